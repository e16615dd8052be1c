/* tvm-tune: the command-line front end.  This stage of the project has `lower` (print the loop
 * IR of a workload under a schedule, optionally checked against the definition) and `ops` (list
 * the operator library); `run`, `submit`, `watch` and `summary` arrive with the tuner and farm. */
#include "codegen/codegen.h"
#include "schedule/schedule.h"
#include "rpc/measure.h"
#include "rpc/measure_proto.h"
#include "rpc/tracker_client.h"
#include "tuner/sketch.h"
#include "tuner/tune.h"
#include "tuner/tvm_tune_cli.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tvm-tune COMMAND [options]\n"
        "\n"
        "commands:\n"
        "  run     tune workloads on this machine, recording every measurement\n"
        "  tasks   the tasks of a model (ONNX): its fused kernels, their weights and FLOPs\n"
        "  lower   print the loop IR of a workload under a schedule\n"
        "  ops     list the operator library and its parameters\n"
        "  summary the servers and queues of a tracker, as TVM's query_rpc_tracker prints them\n"
        "  submit  hand a tuning job to a tvm-tracker, which runs it on its farm\n"
        "  status, watch, cancel, jobs   follow and control submitted jobs\n"
        "  keygen  write a new farm key (for --auth-key-file)\n"
        "\n"
        "tvm-tune tasks --model M.onnx [--shape NAME=1x3x224x224 ...] [--layout L] [--target T]\n"
        "               [--winograd on|off] [--json]\n"
        "  imports the model, folds BatchNormalization into convolutions, fuses each anchor\n"
        "  (Conv, Gemm, MatMul, pools, reductions) with the elementwise ops after it, and prints\n"
        "  the tasks: each distinct fused kernel as a te: workload, its weight (calls per run),\n"
        "  FLOPs and share of the network's FLOPs; --shape fixes symbolic input dimensions.\n"
        "  A convolution whose padding covers most of its taps (DeepLabV3's atrous ones) is\n"
        "  split into regions, each a task over only the taps its outputs read inside the\n"
        "  input, joined by Concats (docs/models.md, \"Kernels and tasks\").\n"
        "  --layout channels-last (default: activations between convolutions NHWC, weights\n"
        "  HWIO, the transforms inside the first and last kernels) or model (the model's NCHW);\n"
        "  the layout is part of each task's workload: tune and build with the same one\n"
        "  (docs/models.md).  By default on CPU targets (not opencl), each 3x3, stride-1\n"
        "  convolution with at least 48 output tiles of 4x4 is computed as Winograd F(4x4,\n"
        "  3x3) (4x fewer multiply-adds), else with 48 of 2x2 as F(2x2, 3x3) (2.25x fewer),\n"
        "  weights transformed at build time, where its output channels fill 3 of the\n"
        "  target's vectors (AVX-512: 48; fewer run faster direct); --winograd on takes every\n"
        "  such convolution whatever its channels, off none; part of the workloads too: tune\n"
        "  and build with the same (docs/models.md, \"Kernels and tasks\").  For --target\n"
        "  opencl, an Untuned column (JSON: default) says what a build without records runs\n"
        "  each task as: tiled, cross-thread (a work-group shares each reduction) or naive (a\n"
        "  work-item an output: right for elementwise tasks; a product left so wants tuning\n"
        "  first)\n"
        "\n"
        "tvm-tune run --workload W [--weight X] [--workload W2 [--weight X2] ...] [--target T]\n"
        "             [--trials N] [--strategy random|grid|ga|xgb|evo|sketch-random]\n"
        "             [--population N]\n"
        "             [--diversity R] [--features knob|itervar] [--overlap-search]\n"
        "             [--scheduler gradient|round-robin] [--db PATH] [--db-max-mb N] [--seed S]\n"
        "             [--timeout SEC]\n"
        "             [--batch N] [--number N] [--repeat N] [--min-repeat-ms MS]\n"
        "             [--repeat-budget-ms MS] [--cooldown-ms MS]\n"
        "             [--cache-flush[=inputs|constants|network|off]]\n"
        "             [--opencl-device SPEC] [--overlap-builds on|off]\n"
        "             [--tracker HOST:PORT --key K [--parallel N] [--priority P]\n"
        "              [--device-wait SEC] | --rpc HOST:PORT] [--auth-key-file F]\n"
        "  measures candidate schedules of each workload on this machine, each in a sandboxed\n"
        "  child process, and records every result in the database (default ./tuning.db; or\n"
        "  postgresql://[user@]host/db, shared with other runs and trackers: docs/database.md).\n"
        "  With --tracker the search stays here and candidates are measured on a device of key\n"
        "  K of the farm (tvm-rpc-server): every device of the key at once (--parallel N: at\n"
        "  most N), each candidate as soon as it is compiled, one session per device and batch;\n"
        "  a device lost mid-batch has its candidate measured again on another; --priority is\n"
        "  the tracker's (larger first); --device-wait bounds the wait for a free device\n"
        "  (600 s).  --rpc measures on one standalone tvm-rpc-server.  Give --target\n"
        "  for the devices' CPU, e.g. 'llvm -mtriple=aarch64-linux-gnu' (docs/farm.md).\n"
        "  --trials counts per workload (on average), including what earlier runs of the same\n"
        "  workload, target and machine measured: running the same command again resumes.\n"
        "  --auth-key-file F (default $TVM_TUNE_AUTH_KEY_FILE; also for submit, status, watch,\n"
        "  cancel, jobs, summary): the farm's key, proved to the tracker and the devices, which\n"
        "  prove it back; every measurement message is MAC'ed (docs/security.md).\n"
        "  Ctrl-C stops after the current candidate; everything measured is kept.\n"
        "  --db-max-mb caps the database file: reaching it stops the run as a full disk would,\n"
        "  with every earlier measurement kept (a later run with room resumes).\n"
        "  Several workloads share trials x workloads: after one round each, rounds of up to 64\n"
        "  go to the workload whose next round should cut the weighted sum of latencies most\n"
        "  (--scheduler gradient, the default; round-robin takes turns).  --weight says how\n"
        "  often the preceding workload occurs in the model (default 1).\n"
        "  --model M.onnx [--shape NAME=DIMS] [--layout L] [--winograd on|off] instead of\n"
        "  --workload: every task of the model with its weight, and after each round Ansor's\n"
        "  table (latency, weight, trials per task) with the network's estimated latency;\n"
        "  also for submit.\n"
        "  --target defaults to llvm (this CPU, with its real features); -num-cores=N sets the\n"
        "  threads of parallel loops.  --target opencl tunes GPU kernels (OpenCL C built by the\n"
        "  device's driver): here on this machine's OpenCL device (--opencl-device P:D, an index\n"
        "  or part of its name; default the first GPU, else the first device, e.g. pocl's CPU\n"
        "  device), on the farm on each server's (docs/opencl.md); a GPU measures each candidate\n"
        "  as soon as its driver build is done, while later ones build (--overlap-builds off: "
        "after\n"
        "  the whole batch, the default on CPU devices such as pocl's, whose timing would share\n"
        "  the cores with the builds).  --target 'opencl -device=mali': Mali's rules, no tiles\n"
        "  staged in local memory (on Mali it is the same memory as global).  TVM's GPU options\n"
        "  -max_num_threads=N, -max_shared_memory_per_block=B (bytes of local memory a group)\n"
        "  and -thread_warp_size=W (AMD: 64; default: the warp the device's vendor reports,\n"
        "  else 32) bound the search with the device's own limits; an option neither ours nor\n"
        "  TVM's is an error (docs/opencl.md).\n"
        "  Strategies: xgb (default: XGBoost cost model +\n"
        "  simulated annealing over the tiling template; --diversity R plans from the best 64 x R\n"
        "  proposals the 64 that cover the most knob values; --features itervar feeds the model\n"
        "  AutoTVM's loop-variable features instead of knob values), evo (Ansor: sketches,\n"
        "  evolutionary search, per-store features and a ranking model of whole programs;\n"
        "  --population states per generation, 2048; --overlap-search plans the next round in a\n"
        "  niced child while this one is measured), ga (genetic algorithm), random, grid,\n"
        "  sketch-random (random programs of evo's sketches: the anchor for evo).\n"
        "  Measurement (TVM's options): --number (calls per sample), --repeat (samples),\n"
        "  --min-repeat-ms (number grown until a sample lasts this long), and ours:\n"
        "  --repeat-budget-ms (stop sampling once the samples add up to this, after 5).\n"
        "  Defaults on a CPU: single calls (grown for kernels under 10 us), up to 64 of them\n"
        "  within 100 ms: --number 1 --repeat 64 --min-repeat-ms 0.01 --repeat-budget-ms 100;\n"
        "  on OpenCL: --repeat 5 --min-repeat-ms 20, no budget.  A record's time is its fastest\n"
        "  sample (what \"best\", the database and the cost models use): a busy device only adds\n"
        "  time, so the fastest single call is the kernel's idle time even on a device other\n"
        "  work shares.  --cooldown-ms (0), --timeout (per candidate, 10 s), --cache-flush:\n"
        "  inputs (the default value: every input evicted before each sample, one call per\n"
        "  sample, as TVM), constants (the weights evicted before every call, untimed),\n"
        "  network (as constants, the outputs evicted too, and the activations written again\n"
        "  by the kernel's threads, each its share, as the layer before leaves them; the\n"
        "  default with --model) or off (the default for workloads).\n"
        "  docs/tuning.md and docs/search.md say more.\n"
        "\n"
        "tvm-tune submit --tracker HOST:PORT --key K --workload W ... [--watch]\n"
        "  takes the options of run (workloads, weights, target, trials, strategy, search and\n"
        "  measurement options, --priority, --parallel, --device-wait) and hands the job to the\n"
        "  tracker, which searches, measures on its devices of key K and stores every result in\n"
        "  its database (tvm-tracker --db).  Prints the job id; --watch follows it to the end.\n"
        "tvm-tune status --tracker HOST:PORT JOB [--json]   a job's state and progress\n"
        "tvm-tune watch --tracker HOST:PORT JOB [--interval S]\n"
        "  follows the job to its end: on a terminal a live progress bar with the best time\n"
        "  and an ETA, otherwise a line per change; exit 0 done, 1 failed, 3 cancelled\n"
        "tvm-tune cancel --tracker HOST:PORT JOB   stops it after the candidates in flight\n"
        "tvm-tune jobs --tracker HOST:PORT [--json]   every job of the tracker\n"
        "  (docs/farm.md)\n"
        "\n"
        "tvm-tune lower --workload W [--steps FILE | --steps-json JSON | --default] [--check]\n"
        "               [--seed N] [--time [--cache-flush[=inputs|constants|network|off]]\n"
        "               [--network-mib N]]\n"
        "               [--dag] [--state] [--target T] [--llvm-ir] [--asm]\n"
        "  --workload W      workload text, e.g. matmul:M=512,N=512,K=512 or\n"
        "                    'te:C[i,j] += A[i,k] * B[k,j]; A:float32[64,64]; B:float32[64,64]'\n"
        "  --steps FILE      schedule as an Ansor step list (JSON array); '-' reads stdin\n"
        "  --steps-json J    the same, given inline\n"
        "  --default         the schedule tvm-compile builds without records (on this CPU, or\n"
        "                    --target's), with its knobs; for --target opencl the GPU default\n"
        "                    (a tiling, a cross-thread reduction, or the naive binding)\n"
        "  --check           run the program in the interpreter on random inputs and compare\n"
        "                    every output element with the naive definition (exit 1 on mismatch)\n"
        "  --seed N          seed of the random inputs (default 1)\n"
        "  --time            compile it for this CPU and time it as tvm-tune run times a\n"
        "                    candidate (a sandboxed child, random inputs, packed weights):\n"
        "                    median and fastest of up to 64 samples, GFLOPS; --cache-flush as\n"
        "                    in run (default off; network: as a model's tasks are tuned)\n"
        "  --network-mib N   with --cache-flush=network: the network's weights and arena\n"
        "                    (tvm-tune tasks prints them); the share of it that stays in the\n"
        "                    last-level cache between runs (probed, in quarters;\n"
        "                    TVM_TUNE_LLC_SHARE=S says it, TVM_TUNE_LLC_MIB=N the size that\n"
        "                    stays) keeps that share of the weights' lines there, as tvm-tune\n"
        "                    run --model measures (default: unknown, flushed to memory)\n"
        "  --dag             also print the compute DAG\n"
        "  --state           also print the schedule state (stages and iterators)\n"
        "  --llvm-ir         also print the optimised LLVM IR the CPU code generator emits\n"
        "  --asm             also print the target's assembly (register tiles, FMAs, spills)\n"
        "  --target T        the target of --llvm-ir and --asm (default llvm: this CPU)\n"
        "\n"
        "Step lists and the loop IR are described in docs/steps.md; workloads and the\n"
        "tensor-expression language in docs/workloads.md and docs/tensor-expressions.md.\n");
}

static char *read_file(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    tt_strbuf sb = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        tt_strbuf_appendn(&sb, buf, n);
    if (f != stdin)
        fclose(f);
    return tt_strbuf_take(&sb);
}

static int cmd_ops(void)
{
    for (int i = 0; i < tt_op_library_count(); i++) {
        const tt_op_def *d = tt_op_library_get(i);
        printf("%-32s %-5s %s\n", d->name, d->suite, d->doc);
        for (int k = 0; k < d->nparams; k++) {
            const tt_op_param *p = &d->params[k];
            if (p->optional)
                printf("    %-6s %s (default %lld)\n", p->name, p->doc, (long long)p->def);
            else
                printf("    %-6s %s\n", p->name, p->doc);
        }
    }
    printf("%-32s %-5s %s\n", "te:...", "", "custom operator in the tensor-expression language");
    printf("every operator also takes dtype=float32|float64|int32|int64 (default float32)\n");
    return 0;
}

/* The schedule tvm-compile builds for `w` without records (CPU: tt_space_untuned_schedule; GPU:
 * tt_sketch_gpu_build_default), as a step list; `desc` gets its knobs or its form. */
static tt_status untuned_schedule(const tt_workload *w, const char *target_text, tt_step **steps,
                                  size_t *nsteps, char *desc, size_t ndesc, tt_errbuf *err)
{
    tt_target t;
    tt_status s = tt_target_parse_user(target_text, &t, err);
    if (s)
        return s;
    tt_state *st;
    if ((s = !strcmp(t.kind, "opencl")
                 ? tt_sketch_gpu_build_default(&w->dag, &t, &st, desc, ndesc, err)
                 : tt_space_untuned_schedule(&w->dag, &t, &st, desc, ndesc, err)))
        return s;
    char *js = tt_steps_to_json(st->steps.data, st->steps.len);
    tt_state_free(st);
    if (!js)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    s = tt_steps_from_json(js, steps, nsteps, err);
    free(js);
    return s;
}

/* --cache-flush[=MODE] of run, submit and lower (no MODE: inputs); false after saying why. */
static bool parse_cache_flush(const char *cmd, const char *arg, tt_measure_options *m)
{
    if (!tt_cache_flush_parse(arg ? arg : "inputs", &m->cache_flush)) {
        fprintf(stderr,
                "tvm-tune %s: --cache-flush takes inputs, constants, network or off, got '%s'\n",
                cmd, arg);
        return false;
    }
    if (m->cache_flush == TT_CACHE_FLUSH_INPUTS) {
        /* As auto_scheduler: flushing per sample only means something with one call. */
        m->number = 1;
        m->min_repeat_ms = 0;
    }
    return true;
}

static int cmd_lower(int argc, char **argv)
{
    static const struct option opts[] = {{"workload", required_argument, 0, 'w'},
                                         {"steps", required_argument, 0, 's'},
                                         {"steps-json", required_argument, 0, 'j'},
                                         {"default", no_argument, 0, 'D'},
                                         {"check", no_argument, 0, 'c'},
                                         {"seed", required_argument, 0, 'S'},
                                         {"dag", no_argument, 0, 'd'},
                                         {"state", no_argument, 0, 't'},
                                         {"llvm-ir", no_argument, 0, 'L'},
                                         {"asm", no_argument, 0, 'A'},
                                         {"target", required_argument, 0, 'T'},
                                         {"time", no_argument, 0, 'M'},
                                         {"cache-flush", optional_argument, 0, 'F'},
                                         {"network-mib", required_argument, 0, 'N'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *workload = NULL, *steps_file = NULL, *steps_json = NULL;
    bool time_it = false;
    tt_measure_options mo = {
        .number = -1, .repeat = -1, .min_repeat_ms = -1, .repeat_budget_ms = -1, .timeout_s = -1};
    const char *target_text = "llvm";
    bool check = false, show_dag = false, show_state = false, show_ir = false, show_asm = false;
    bool untuned = false;
    unsigned long long seed = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "w:s:j:cS:dth", opts, NULL)) != -1) {
        switch (c) {
        case 'D': untuned = true; break;
        case 'L': show_ir = true; break;
        case 'A': show_asm = true; break;
        case 'T': target_text = optarg; break;
        case 'M': time_it = true; break;
        case 'F':
            if (!parse_cache_flush("lower", optarg, &mo))
                return 2;
            break;
        case 'N': {
            char *end;
            errno = 0;
            double mib = strtod(optarg, &end);
            if (*end || errno || !(mib > 0) || mib > 1e9) {
                fprintf(stderr, "tvm-tune lower: --network-mib needs a positive size, got '%s'\n",
                        optarg);
                return 2;
            }
            mo.network_bytes = (int64_t)(mib * 1048576.0);
            break;
        }
        case 'w': workload = optarg; break;
        case 's': steps_file = optarg; break;
        case 'j': steps_json = optarg; break;
        case 'c': check = true; break;
        case 'd': show_dag = true; break;
        case 't': show_state = true; break;
        case 'S': {
            char *end;
            errno = 0;
            seed = strtoull(optarg, &end, 10);
            if (*end || errno) {
                fprintf(stderr, "tvm-tune lower: --seed needs a non-negative integer, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!workload) {
        fprintf(stderr, "tvm-tune lower: --workload is required\n");
        return 2;
    }
    if (!!steps_file + !!steps_json + untuned > 1) {
        fprintf(stderr, "tvm-tune lower: give one of --steps, --steps-json and --default\n");
        return 2;
    }
    if (mo.network_bytes && (!time_it || mo.cache_flush != TT_CACHE_FLUSH_NETWORK)) {
        fprintf(stderr, "tvm-tune lower: --network-mib goes with --time --cache-flush=network\n");
        return 2;
    }
    int rc = 1;
    tt_errbuf err = {{0}};
    tt_workload *w = NULL;
    tt_state *st = NULL;
    tt_program *prog = NULL;
    tt_step *steps = NULL;
    size_t nsteps = 0;
    char *text = NULL;
    tt_status s = tt_workload_parse(workload, &w, &err);
    if (s) {
        fprintf(stderr, "tvm-tune lower: workload: %s\n", err.msg);
        goto out;
    }
    if (steps_file && !(text = read_file(steps_file))) {
        fprintf(stderr, "tvm-tune lower: cannot read %s: %s\n", steps_file, strerror(errno));
        goto out;
    }
    if (text || steps_json) {
        if ((s = tt_steps_from_json(text ? text : steps_json, &steps, &nsteps, &err))) {
            fprintf(stderr, "tvm-tune lower: %s: %s\n", steps_file ? steps_file : "--steps-json",
                    err.msg);
            goto out;
        }
    }
    if (untuned) {
        char desc[512];
        if ((s = untuned_schedule(w, target_text, &steps, &nsteps, desc, sizeof(desc), &err))) {
            fprintf(stderr, "tvm-tune lower: --default: %s\n", err.msg);
            goto out;
        }
        printf("# default schedule: %s\n", desc);
    }
    if ((s = tt_state_replay(&w->dag, steps, nsteps, &st, &err))) {
        fprintf(stderr, "tvm-tune lower: schedule: %s\n", err.msg);
        goto out;
    }
    if ((s = tt_lower(st, &prog, &err))) {
        fprintf(stderr, "tvm-tune lower: %s\n", err.msg);
        goto out;
    }
    printf("# workload %s (%.0f FLOP)\n", w->key, w->flops);
    if (nsteps) {
        char *js = tt_steps_to_json(steps, nsteps);
        printf("# steps %s\n", js ? js : "?");
        free(js);
    }
    if (show_dag) {
        char *d = tt_dag_print(&w->dag);
        printf("# compute DAG\n%s", d ? d : "");
        free(d);
    }
    if (show_state) {
        char *d = tt_state_print(st);
        printf("# schedule state\n%s", d ? d : "");
        free(d);
    }
    char *ir = tt_program_print(prog);
    printf("%s", ir ? ir : "");
    free(ir);
    if (show_ir || show_asm) {
        tt_target t;
        if ((s = tt_target_parse_user(target_text, &t, &err))) {
            fprintf(stderr, "tvm-tune lower: --target: %s\n", err.msg);
            goto out;
        }
        for (int k = 0; k < 2; k++) {
            if (!(k ? show_asm : show_ir))
                continue;
            char *code = NULL;
            s = k ? tt_codegen_llvm_asm(prog, &t, "kernel", NULL, &code, &err)
                  : tt_codegen_llvm_ir(prog, &t, "kernel", NULL, &code, &err);
            if (s) {
                fprintf(stderr, "tvm-tune lower: %s\n", err.msg);
                goto out;
            }
            printf("# %s (%s)\n%s", k ? "assembly" : "LLVM IR, optimised", target_text, code);
            free(code);
        }
    }
    rc = 0;
    if (time_it) {
        tt_tune_measure_defaults(target_text, &mo);
        rc = cli_time_program(w, prog, target_text, &mo, seed);
    }
    if (check) {
        tt_verify_result vr;
        s = tt_verify_program(&w->dag, prog, seed, 1e-4, 1e-5, &vr, &err);
        if (s) {
            fprintf(stderr, "check: FAILED: %s (%lld of %lld elements differ)\n", err.msg,
                    (long long)vr.mismatches, (long long)vr.checked);
            rc = 1;
        } else {
            printf(
                "check: OK, %lld output elements match the naive definition (max abs error %.3g)\n",
                (long long)vr.checked, vr.max_abs_err);
        }
    }
out:
    free(text);
    free(steps);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    return rc;
}

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig)
{
    (void)sig;
    if (stop_requested)
        _exit(130); /* a second Ctrl-C: leave now */
    stop_requested = 1;
}

/* --layout NAME. */
static bool parse_layout(const char *cmd, const char *arg, tt_net_layout *out)
{
    int l = tt_net_layout_parse(arg);
    if (l < 0) {
        fprintf(stderr, "tvm-tune %s: --layout takes channels-last or model, got '%s'\n", cmd, arg);
        return false;
    }
    *out = (tt_net_layout)l;
    return true;
}

/* One more --shape NAME=DIMS (checked by import). */
static bool add_shape(const char *cmd, const char **shapes, int *n, const char *arg)
{
    if (*n == TT_CLI_MAX_SHAPES) {
        fprintf(stderr, "tvm-tune %s: at most %d --shape\n", cmd, TT_CLI_MAX_SHAPES);
        return false;
    }
    shapes[(*n)++] = arg;
    return true;
}

int parse_tune_args(const char *cmd, int argc, char **argv, tune_args *a)
{
    static const struct option opts[] = {{"workload", required_argument, 0, 'w'},
                                         {"target", required_argument, 0, 't'},
                                         {"trials", required_argument, 0, 'n'},
                                         {"strategy", required_argument, 0, 's'},
                                         {"db", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 'S'},
                                         {"timeout", required_argument, 0, 'T'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"number", required_argument, 0, 'N'},
                                         {"repeat", required_argument, 0, 'R'},
                                         {"min-repeat-ms", required_argument, 0, 'M'},
                                         {"cooldown-ms", required_argument, 0, 'C'},
                                         {"repeat-budget-ms", required_argument, 0, 'B'},
                                         {"cache-flush", optional_argument, 0, 'F'},
                                         {"db-max-mb", required_argument, 0, 'x'},
                                         {"opencl-device", required_argument, 0, 'G'},
                                         {"weight", required_argument, 0, 'W'},
                                         {"scheduler", required_argument, 0, 'P'},
                                         {"population", required_argument, 0, 'O'},
                                         {"diversity", required_argument, 0, 'D'},
                                         {"features", required_argument, 0, 'X'},
                                         {"overlap-search", no_argument, 0, 'V'},
                                         {"overlap-builds", required_argument, 0, 'o'},
                                         {"tracker", required_argument, 0, 'K'},
                                         {"rpc", required_argument, 0, 'Q'},
                                         {"key", required_argument, 0, 'k'},
                                         {"priority", required_argument, 0, 'Y'},
                                         {"device-wait", required_argument, 0, 'Z'},
                                         {"parallel", required_argument, 0, 'L'},
                                         {"watch", no_argument, 0, 'A'},
                                         {"auth-key-file", required_argument, 0, '!'},
                                         {"model", required_argument, 0, 'm'},
                                         {"shape", required_argument, 0, 'H'},
                                         {"layout", required_argument, 0, 'y'},
                                         {"winograd", required_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof(*a));
    a->winograd = -1;
    const char *key_file = NULL;
    bool flush_given = false;
    tt_tune_options *o = &a->o;
    tt_remote_options *remote = &a->remote;
    o->trials = 64;
    o->seed = 1;
    o->strategy = TT_STRATEGY_XGB; /* 1.33x random search within 64 trials (bench_search) */
    o->db_path = "tuning.db";
    a->watch = false;
    o->target = "llvm";
    /* negative: not given; tt_tune_measure_defaults fills them for the target after parsing */
    o->measure.number = o->measure.repeat = -1;
    o->measure.min_repeat_ms = o->measure.repeat_budget_ms = -1;
    o->measure.timeout_s = 10;
    o->measure.memory_limit = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "w:t:n:s:d:S:T:b:N:R:M:C:Fh", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'w':
            if (a->nw == TT_CLI_MAX_WORKLOADS) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "at most %d workloads\n", TT_CLI_MAX_WORKLOADS);
                return 2;
            }
            a->weights[a->nw] = 1.0;
            a->workloads[a->nw++] = optarg;
            break;
        case 'W': {
            char *wend;
            double v = strtod(optarg, &wend);
            if (a->nw == 0 || *wend || !(v > 0) || v > 1e9) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr,
                        "--weight needs a positive number after a "
                        "--workload (got '%s')\n",
                        optarg);
                return 2;
            }
            a->weights[a->nw - 1] = v;
            break;
        }
        case 'V': o->overlap_search = true; break;
        case 'X':
            if (!strcmp(optarg, "knob"))
                o->features = TT_FEATURES_KNOB;
            else if (!strcmp(optarg, "itervar"))
                o->features = TT_FEATURES_ITERVAR;
            else {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--features is knob or itervar\n");
                return 2;
            }
            break;
        case 'D':
            o->diversity = strtod(optarg, &end);
            if (*end || !(o->diversity > 1) || o->diversity > 64) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--diversity needs a ratio above 1 (e.g. 2)\n");
                return 2;
            }
            break;
        case 'P':
            if (!strcmp(optarg, "gradient"))
                o->policy = TT_SCHED_GRADIENT;
            else if (!strcmp(optarg, "round-robin"))
                o->policy = TT_SCHED_ROUND_ROBIN;
            else {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--scheduler is gradient or round-robin\n");
                return 2;
            }
            break;
        case 't': o->target = optarg; break;
        case 'd': o->db_path = optarg; break;
        case 's':
            if (!tt_strategy_parse(optarg, &o->strategy)) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--strategy is random, grid, ga, xgb, evo or sketch-random\n");
                return 2;
            }
            break;
        case 'n':
        case 'S':
        case 'O':
        case 'b': {
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (*end || errno || v < (c == 'S' ? 0 : 1) || (c == 'O' && v > 1 << 20)) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--%s needs a %s integer, got '%s'\n",
                        c == 'n'   ? "trials"
                        : c == 'S' ? "seed"
                        : c == 'O' ? "population"
                                   : "batch",
                        c == 'S' ? "non-negative" : "positive", optarg);
                return 2;
            }
            if (c == 'n')
                o->trials = v;
            else if (c == 'S')
                o->seed = (uint64_t)v;
            else if (c == 'O')
                o->population = (int)v;
            else
                o->batch = (int)v;
            break;
        }
        case 'T':
            o->measure.timeout_s = strtod(optarg, &end);
            if (*end || o->measure.timeout_s <= 0) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--timeout needs a positive number of seconds\n");
                return 2;
            }
            break;
        case 'G': o->measure.opencl_device = optarg; break;
        case 'x': {
            char *xend;
            double mb = strtod(optarg, &xend);
            if (*xend || !(mb > 0)) {
                fprintf(stderr, "tvm-tune %s: --db-max-mb needs a positive size in MiB\n", cmd);
                return 2;
            }
            o->db_max_bytes = (int64_t)(mb * (1 << 20));
            break;
        }
        case 'N':
        case 'R':
        case 'M':
        case 'B':
        case 'C': {
            double v = strtod(optarg, &end);
            if (*end || v < 0 || ((c == 'N' || c == 'R') && (v < 1 || v > 1e6))) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "bad value '%s' for a measurement option\n", optarg);
                return 2;
            }
            if (c == 'N')
                o->measure.number = (int)v;
            else if (c == 'R')
                o->measure.repeat = (int)v;
            else if (c == 'M')
                o->measure.min_repeat_ms = v;
            else if (c == 'B')
                o->measure.repeat_budget_ms = v;
            else
                o->measure.cooldown_ms = v;
            break;
        }
        case 'K':
        case 'Q': {
            tt_errbuf aerr = {{0}};
            int port;
            if (tt_tracker_parse_address(optarg, c == 'K' ? TT_TRACKER_PORT : 9090, a->remote_host,
                                         sizeof(a->remote_host), &port, &aerr)) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--%s: %s\n", c == 'K' ? "tracker" : "rpc", aerr.msg);
                return 2;
            }
            if (c == 'K') {
                remote->tracker_host = a->remote_host;
                remote->tracker_port = port;
            } else {
                remote->host = a->remote_host;
                remote->port = port;
            }
            a->use_remote = true;
            break;
        }
        case 'k': remote->key = optarg; break;
        case 'L': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 16) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--parallel takes 1 to 16 devices, got '%s'\n", optarg);
                return 2;
            }
            remote->parallel = (int)v;
            break;
        }
        case 'Y':
        case 'Z': {
            double v = strtod(optarg, &end);
            if (*end || v < 0) {
                fprintf(stderr, "tvm-tune %s: ", cmd);
                fprintf(stderr, "--%s needs a number, got '%s'\n",
                        c == 'Y' ? "priority" : "device-wait", optarg);
                return 2;
            }
            if (c == 'Y')
                remote->priority = (int)v;
            else
                remote->request_timeout_s = v;
            break;
        }
        case 'F':
            if (!parse_cache_flush(cmd, optarg, &o->measure))
                return 2;
            flush_given = true;
            break;
        case 'A': a->watch = true; break;
        case 'm': a->model = optarg; break;
        case 'H':
            if (!add_shape(cmd, a->shapes, &a->nshapes, optarg))
                return 2;
            break;
        case 'y':
            if (!parse_layout(cmd, optarg, &a->layout))
                return 2;
            break;
        case 'g':
            if (!cli_parse_winograd(cmd, optarg, &a->winograd))
                return 2;
            break;
        case 'o':
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "tvm-tune %s: --overlap-builds takes on or off, got '%s'\n", cmd,
                        optarg);
                return 2;
            }
            o->overlap_builds = strcmp(optarg, "on") ? -1 : 1;
            break;
        case '!': key_file = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!cli_load_auth(cmd, key_file))
        return 2;
    remote->auth = cli_auth();
    if (a->model && a->nw) {
        fprintf(stderr, "tvm-tune %s: give --model or --workload, not both\n", cmd);
        return 2;
    }
    if (a->model) {
        if (!cli_load_model(cmd, a->model, a->shapes, a->nshapes, a->o.target, a->layout,
                            a->winograd, &a->graph, &a->net))
            return 1;
        if (a->net->tasks.len > TT_CLI_MAX_WORKLOADS) {
            fprintf(stderr, "tvm-tune %s: %s has %zu tasks; at most %d are tuned together\n", cmd,
                    a->model, a->net->tasks.len, TT_CLI_MAX_WORKLOADS);
            return 1;
        }
        for (size_t i = 0; i < a->net->tasks.len; i++) {
            a->workloads[a->nw] = a->net->tasks.data[i].workload;
            a->labels[a->nw] = a->net->tasks.data[i].label;
            a->weights[a->nw++] = a->net->tasks.data[i].weight;
        }
        a->o.labels = a->labels;
        /* A layer meets its weights cold and its activations where the layer before left them:
         * time it so, or the estimate flatters and the search ranks as no network runs. */
        if (!flush_given)
            o->measure.cache_flush = TT_CACHE_FLUSH_NETWORK;
        /* ... where its weights wait between runs: memory, the last-level cache, or part of
         * them in each (the measuring machine decides, tt_measure_network_llc_share) */
        o->measure.network_bytes = a->net->weight_bytes + a->net->arena_bytes;
    }
    tt_tune_measure_defaults(o->target, &o->measure);
    if (a->nw == 0) {
        fprintf(stderr, "tvm-tune %s: give at least one --workload, or --model\n", cmd);
        return 2;
    }
    if (a->use_remote && remote->tracker_host && !remote->key) {
        fprintf(stderr, "tvm-tune %s: --tracker needs --key (the device key to measure on)\n", cmd);
        return 2;
    }
    if (a->use_remote)
        o->remote = remote;
    o->workloads = a->workloads;
    o->weights = a->weights;
    o->nworkloads = a->nw;
    return -1;
}

bool cli_parse_winograd(const char *cmd, const char *arg, int *mode)
{
    if (strcmp(arg, "on") && strcmp(arg, "off")) {
        fprintf(stderr, "tvm-tune %s: --winograd takes on or off, got '%s'\n", cmd, arg);
        return false;
    }
    *mode = !strcmp(arg, "on");
    return true;
}

bool cli_load_model(const char *cmd, const char *path, const char *const *shapes, int nshapes,
                    const char *target, tt_net_layout layout, int winograd, tt_graph **g,
                    tt_net **net)
{
    tt_graph_options go = {shapes, nshapes, 0, NULL, 0};
    tt_net_options no;
    const char *t = target ? target : "llvm";
    tt_net_options_for(&no, t, tt_space_target_lanes(t), layout, winograd);
    tt_errbuf err = {{0}};
    *net = NULL;
    if (tt_graph_import_onnx(path, &go, g, &err) || tt_net_build(*g, &no, net, &err)) {
        fprintf(stderr, "tvm-tune %s: %s\n", cmd, err.msg);
        tt_graph_free(*g);
        *g = NULL;
        return false;
    }
    return true;
}

void free_tune_args(tune_args *a)
{
    tt_net_free(a->net);
    tt_graph_free(a->graph);
    a->net = NULL;
    a->graph = NULL;
}

static int cmd_run(int argc, char **argv)
{
    static tune_args args;
    int rc0 = parse_tune_args("run", argc, argv, &args);
    if (rc0 >= 0)
        return rc0;
    tt_tune_options o = args.o;
    int nw = args.nw;
    bool use_remote = args.use_remote;
    o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o.progress = isatty(STDERR_FILENO);
    o.stop = &stop_requested;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static tt_tune_summary sums[TT_CLI_MAX_WORKLOADS];
    memset(sums, 0, sizeof(sums));
    if (!use_remote && o.measure.cache_flush == TT_CACHE_FLUSH_NETWORK &&
        o.measure.network_bytes > 0) {
        double share = tt_measure_network_llc_share(o.measure.network_bytes);
        char stays[96] = "does not stay", where[96] = "memory";
        if (share >= 1)
            snprintf(stays, sizeof(stays), "stays"), snprintf(where, sizeof(where), "the LLC");
        else if (share > 0)
            snprintf(stays, sizeof(stays), "stays in part (%.0f%% of its lines)", share * 100),
                snprintf(where, sizeof(where),
                         "the LLC for %.0f%% of their lines, the rest in memory", share * 100);
        fprintf(stderr,
                "network: %.0f MB a run (weights and activation arena), %s in this machine's "
                "last-level cache from one run to the next (measured; TVM_TUNE_LLC_SHARE=S says "
                "the share instead): its tasks are timed with their weights in %s\n",
                (double)o.measure.network_bytes / 1e6, stays, where);
    }
    tt_errbuf err = {{0}};
    tt_status s = tt_tune_run(&o, sums, stderr, &err);
    int rc = 0;
    /* A run that failed before measuring anything (a workload that does not parse, a database
     * it cannot open or migrate) ends with its error alone: a summary of nothing says nothing. */
    long long measured = 0;
    for (int i = 0; i < nw; i++)
        measured += sums[i].measured;
    for (int i = 0; i < nw && !(s && measured == 0); i++) {
        tt_tune_summary *m = &sums[i];
        if (!m->workload[0])
            continue;
        if (args.model)
            printf("task %d (%s, weight %g)", i, args.labels[i], args.weights[i]);
        else
            printf("%s", m->workload);
        printf(" on %s: %lld measured now, %lld in all, %lld errors", o.target,
               (long long)m->measured, (long long)m->total, (long long)m->errors);
        if (m->measured)
            printf(", %.0f ms compile and %.0f ms measurement per candidate", m->compile_s * 1e3,
                   m->measure_s * 1e3);
        printf("\n");
        if (m->best_s > 0) {
            printf("  best   %.6g s  %.2f GFLOPS", m->best_s, m->flops / m->best_s / 1e9);
            if (m->naive_s > 0)
                printf("  (%.1fx the naive schedule, %.6g s)", m->naive_s / m->best_s, m->naive_s);
            printf("\n  config %s\n", m->best_config);
        } else {
            printf("  no error-free measurement yet\n");
        }
    }
    if (args.model && !(s && measured == 0)) {
        double est = 0;
        int missing = 0;
        for (int i = 0; i < nw; i++) {
            est += args.weights[i] * sums[i].best_s;
            missing += sums[i].best_s <= 0;
        }
        printf("%s: %d tasks, %zu kernel calls; estimated latency %s%.3f ms (the sum of weight x "
               "best latency)%s\n",
               args.model, nw, args.net->calls.len, missing ? ">= " : "", est * 1e3,
               missing ? ", some tasks have no measurement yet" : "");
    }
    if (use_remote && sums[0].workload[0] && !(s && measured == 0))
        printf("farm: %.1f s waiting for devices, %lld lost device sessions (their candidates "
               "measured again), %lld sick devices left\n",
               sums[0].queue_wait_s, (long long)sums[0].device_losses,
               (long long)sums[0].devices_quarantined);
    if (stop_requested)
        printf("stopped by request: everything measured is in %s; run the same command to resume\n",
               o.db_path);
    if (s) {
        fprintf(stderr, "tvm-tune run: %s\n", err.msg);
        rc = 1;
    } else {
        printf("records in %s (tvm-db best --db %s --workload ... --target %s)\n", o.db_path,
               o.db_path, o.target);
    }
    free_tune_args(&args);
    return rc;
}

/* The form of the schedule a GPU build takes for `workload` without records: "tiled" (shared or
 * register tiles), "cross-thread" (a reduction shared by a work-group's threads), "naive" (a
 * work-item an output: right for elementwise tasks, slow for products), or "error". */
static const char *gpu_default_form(const char *workload, const tt_target *target)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(workload, &w, &err))
        return "error";
    tt_state *st;
    const char *form = "error";
    if (!tt_sketch_gpu_build_default(&w->dag, target, &st, NULL, 0, &err)) {
        form = "naive";
        for (size_t g = 0; g < st->stages.len; g++) {
            const tt_stage *sg = &st->stages.data[g];
            if (!strcmp(sg->scope, "shared") || !strcmp(sg->scope, "local")) {
                form = "tiled";
                break;
            }
            for (int k = 0; k < sg->niters; k++)
                if (sg->iters[k].kind == TT_ITER_REDUCE &&
                    (sg->iters[k].ann == TT_ANN_THREAD_X || sg->iters[k].ann == TT_ANN_THREAD_Y))
                    form = "cross-thread";
        }
        tt_state_free(st);
    }
    tt_workload_free(w);
    return form;
}

/* tvm-tune tasks: what tuning a model means, before any trial. */
static int cmd_tasks(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"shape", required_argument, 0, 'H'},
        {"target", required_argument, 0, 't'}, {"json", no_argument, 0, 'j'},
        {"layout", required_argument, 0, 'O'}, {"winograd", required_argument, 0, 'g'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *model = NULL, *target = "llvm", *shapes[TT_CLI_MAX_SHAPES];
    int nshapes = 0, c;
    bool json = false;
    tt_net_layout layout = TT_NET_LAYOUT_CHANNELS_LAST;
    int winograd = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': target = optarg; break;
        case 'j': json = true; break;
        case 'H':
            if (!add_shape("tasks", shapes, &nshapes, optarg))
                return 2;
            break;
        case 'O':
            if (!parse_layout("tasks", optarg, &layout))
                return 2;
            break;
        case 'g':
            if (!cli_parse_winograd("tasks", optarg, &winograd))
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "tvm-tune tasks: --model is required\n");
        return 2;
    }
    tt_target tg;
    tt_errbuf err = {{0}};
    if (tt_target_parse_user(target, &tg, &err)) {
        fprintf(stderr, "tvm-tune tasks: --target: %s\n", err.msg);
        return 2;
    }
    tt_graph *g;
    tt_net *net;
    if (!cli_load_model("tasks", model, shapes, nshapes, target, layout, winograd, &g, &net))
        return 1;
    double total = net->flops > 0 ? net->flops : 1;
    bool gpu = !strcmp(tg.kind, "opencl");
    if (json) {
        json_t *tasks = json_array();
        for (size_t i = 0; i < net->tasks.len; i++) {
            const tt_net_task *t = &net->tasks.data[i];
            json_t *o = json_pack("{s:i, s:s, s:s, s:i, s:f, s:f}", "id", (int)i, "label", t->label,
                                  "workload", t->workload, "weight", t->weight, "flops", t->flops,
                                  "share", t->flops * t->weight / total);
            if (gpu)
                json_object_set_new(o, "default", json_string(gpu_default_form(t->workload, &tg)));
            json_array_append_new(tasks, o);
        }
        json_t *root = json_pack(
            "{s:s, s:s, s:i, s:i, s:f, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o}",
            "model", model, "target", target, "nodes", (int)g->nodes.len, "calls",
            (int)net->calls.len, "flops", net->flops, "arena_bytes", (json_int_t)net->arena_bytes,
            "weight_bytes", (json_int_t)net->weight_bytes, "unplanned_bytes",
            (json_int_t)net->unplanned_bytes, "folded_batchnorms", net->folded_batchnorms,
            "fused_layer_norms", net->fused_layer_norms, "scaled_weights", net->scaled_weights,
            "winograd_convs", net->winograd_convs, "folded_pads", net->folded_pads, "region_convs",
            net->region_convs, "views", net->views, "tasks", tasks);
        char *text = json_dumps(root, JSON_INDENT(2));
        printf("%s\n", text);
        free(text);
        json_decref(root);
    } else {
        printf("%s (%s): %zu nodes, %zu kernel calls, %zu tasks, %.3f GFLOP per run\n", model,
               g->producer && g->producer[0] ? g->producer : "unknown producer", g->nodes.len,
               net->calls.len, net->tasks.len, net->flops / 1e9);
        printf("memory: %.2f MiB of weights, %.2f MiB arena for the intermediates (%.2f MiB "
               "without reuse); %d BatchNormalization folded into convolutions, %d layer "
               "normalisations written out in elementwise operators fused, %d channel scales "
               "moved onto convolution weights, %d 3x3 convolutions as Winograd's F(4x4 or 2x2, "
               "3x3), %d zero Pads folded into the window that reads them, %d convolutions split "
               "into regions that skip the taps reading only padding, %d Transposes, Pads and "
               "Slices read in place (views)\n",
               (double)net->weight_bytes / (1 << 20), (double)net->arena_bytes / (1 << 20),
               (double)net->unplanned_bytes / (1 << 20), net->folded_batchnorms,
               net->fused_layer_norms, net->scaled_weights, net->winograd_convs, net->folded_pads,
               net->region_convs, net->views);
        /* on a GPU, the form of each task's untuned schedule: the naive products are the ones
         * that most want tuning */
        printf("| ID  | %-32s | Weight |  MFLOP | Share  |%s\n", "Task",
               gpu ? " Untuned      |" : "");
        for (size_t i = 0; i < net->tasks.len; i++) {
            const tt_net_task *t = &net->tasks.data[i];
            printf("| %3zu | %-32.32s | %6d | %6.1f | %5.1f%% |", i, t->label, t->weight,
                   t->flops / 1e6, 100 * t->flops * t->weight / total);
            if (gpu)
                printf(" %-12s |", gpu_default_form(t->workload, &tg));
            printf("\n");
        }
        printf("workloads (tvm-tune run --model %s tunes them all):\n", model);
        for (size_t i = 0; i < net->tasks.len; i++)
            printf("%3zu %s\n", i, net->tasks.data[i].workload);
    }
    tt_net_free(net);
    tt_graph_free(g);
    return 0;
}

/* tvm-tune summary: what `python -m tvm.exec.query_rpc_tracker` prints, from any TVM-compatible
 * tracker. */
static int cmd_summary(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tracker", required_argument, 0, 't'}, {"legacy", no_argument, 0, 'l'},
        {"devices", no_argument, 0, 'd'},       {"auth-key-file", required_argument, 0, '!'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    bool devices = false;
    const char *key_file = NULL;
    const char *env_host = getenv("TVM_TRACKER_HOST"), *env_port = getenv("TVM_TRACKER_PORT");
    char host[256];
    int port = env_port ? atoi(env_port) : TT_TRACKER_PORT;
    snprintf(host, sizeof(host), "%s", env_host && *env_host ? env_host : "127.0.0.1");
    bool legacy = false;
    tt_errbuf err = {{0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (tt_tracker_parse_address(optarg, TT_TRACKER_PORT, host, sizeof(host), &port,
                                         &err)) {
                fprintf(stderr, "tvm-tune summary: --tracker: %s\n", err.msg);
                return 2;
            }
            break;
        case 'l': legacy = true; break;
        case 'd': devices = true; break;
        case '!': key_file = optarg; break;
        case 'h':
            printf("usage: tvm-tune summary [--tracker HOST:PORT] [--legacy | --devices]\n"
                   "                        [--auth-key-file F]\n"
                   "  prints the tracker's servers and queues exactly as TVM's query_rpc_tracker\n"
                   "  does (--legacy: TVM <= v0.23's right-aligned addresses).  --devices lists\n"
                   "  every server instead: key, address, implementation, architecture, cores and\n"
                   "  what the tracker says of it (heard from, stale, quarantined and why).  The\n"
                   "  tracker defaults to $TVM_TRACKER_HOST:$TVM_TRACKER_PORT, else\n"
                   "  127.0.0.1:9190.\n");
            return 0;
        default: return 2;
        }
    }
    if (!cli_load_auth("summary", key_file))
        return 2;
    tt_tracker_conn conn;
    char *reply = NULL, *text = NULL;
    if (tt_tracker_connect(host, port, 10, cli_auth(), &conn, &err)) {
        fprintf(stderr, "tvm-tune summary: %s\n", err.msg);
        return 1;
    }
    tt_status s = tt_tracker_call(&conn, "[6]", &reply, &err);
    tt_tracker_close(&conn);
    if (!s)
        s = devices ? tt_tracker_format_devices(reply, &text, &err)
                    : tt_tracker_format_summary(reply, host, port, legacy, &text, &err);
    free(reply);
    if (s) {
        fprintf(stderr, "tvm-tune summary: %s\n", err.msg);
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

static tt_auth_keyring cli_ring;

bool cli_load_auth(const char *cmd, const char *path)
{
    tt_errbuf err = {{0}};
    if (tt_auth_load_default(path, &cli_ring, &err)) {
        fprintf(stderr, "tvm-tune %s: %s\n", cmd, err.msg);
        return false;
    }
    return true;
}

const tt_auth_keyring *cli_auth(void)
{
    return &cli_ring;
}

static int cmd_keygen(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        FILE *f = argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr;
        fprintf(f, "usage: tvm-tune keygen FILE\n"
                   "  writes a new random farm key to FILE (mode 0600; an existing file is never\n"
                   "  overwritten).  Give the same file to tvm-tracker, every tvm-rpc-server and\n"
                   "  tvm-tune with --auth-key-file (docs/security.md).\n");
        return f == stdout ? 0 : 2;
    }
    tt_errbuf err = {{0}};
    if (tt_auth_keygen(argv[1], &err)) {
        fprintf(stderr, "tvm-tune keygen: %s\n", err.msg);
        return 1;
    }
    printf("wrote a new farm key to %s\n", argv[1]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "lower") == 0)
        return cmd_lower(argc - 1, argv + 1);
    if (strcmp(cmd, "tasks") == 0)
        return cmd_tasks(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "ops") == 0)
        return cmd_ops();
    if (strcmp(cmd, "summary") == 0)
        return cmd_summary(argc - 1, argv + 1);
    if (strcmp(cmd, "keygen") == 0)
        return cmd_keygen(argc - 1, argv + 1);
    if (strcmp(cmd, "submit") == 0)
        return cmd_submit(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0 || strcmp(cmd, "watch") == 0 || strcmp(cmd, "cancel") == 0 ||
        strcmp(cmd, "jobs") == 0)
        return cmd_job(cmd, argc - 1, argv + 1);
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "tvm-tune: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
