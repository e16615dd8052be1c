/* Whole networks against PyTorch (issue #17): ResNet-18, MobileNet-V2 and a BERT-base encoder
 * layer (sequence 128), batch 1, float32, all cores.  For each: export it with PyTorch
 * (scripts/export_torch_models.py), tune every task with N trials (tvm-tune run --model, the
 * task scheduler), build the library (tvm-compile --model), check its output against PyTorch's,
 * then time it (tvm-net time) and PyTorch (torch.set_num_threads = cores, inference mode), each
 * in a fresh process, three rounds interleaved, the best median of each kept; and compare the
 * measured latency with the database's estimate (the sum of weight x best latency).
 *
 * ONNX Runtime, the engine these models are deployed with on a CPU, is timed beside them in the
 * same rounds (bench/ort_time.js, its CPU provider, all graph optimisations, `cores` intra-op
 * threads) when scripts/install-bench-anchors.sh has installed it; its output is checked against
 * PyTorch's too.  --trials 0 builds the networks untuned (no database), as a user's first build.
 *
 * usage: bench_model [--trials N] [--models resnet18,mobilenet_v2,mobilenet_v3_large,...] [--dir
 * DIR]
 *                    [--repeat R] [--json FILE]
 * DIR (default /tmp/bench-model) keeps the exported models and one tuning database per model:
 * a second run with the same DIR resumes tuning up to N trials per task. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "anchors.h"
#include "base/clock.h"
#include "codegen/codegen.h"
#include "schedule/schedule.h"

typedef struct {
    const char *name;
    double gflop;
    int tasks;
    double tune_s, build_s;
    double ours_s, torch_s, estimate_s, error;
    double ort_s, ort_error; /* ONNX Runtime: 0 when it is not installed or failed */
    bool ok;
} result;

/* The ONNX Runtime anchor: the onnxruntime-node module's directory (installed by
 * scripts/install-bench-anchors.sh), and its version; ort_dir[0] == 0 when it is not there. */
static char ort_dir[1024], ort_version[32];

static void find_onnxruntime(void)
{
    const char *base = getenv("TVM_TUNE_ANCHORS");
    char pkg[1200], cmd[1400];
    snprintf(ort_dir, sizeof(ort_dir), "%s/node_modules/onnxruntime-node",
             base && base[0] ? base : "/opt/tvm-tune-anchors");
    snprintf(pkg, sizeof(pkg), "%s/package.json", ort_dir);
    snprintf(cmd, sizeof(cmd), "node -p \"require('%s').version\" 2>/dev/null", pkg);
    FILE *p = access(pkg, R_OK) ? NULL : popen(cmd, "r");
    if (!p || !fgets(ort_version, sizeof(ort_version), p))
        ort_dir[0] = 0;
    if (p && pclose(p))
        ort_dir[0] = 0;
    ort_version[strcspn(ort_version, "\n")] = 0;
}

/* Runs cmd; its stdout parsed as JSON, or else its last line that starts with '{' (NULL on
 * failure). */
static json_t *run_json(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *all = malloc(cap);
    for (size_t got; all && (got = fread(all + len, 1, cap - len - 1, p)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            char *more = realloc(all, cap *= 2);
            if (!more)
                break;
            all = more;
        }
    }
    int rc = pclose(p);
    if (!all || rc) {
        free(all);
        return NULL;
    }
    all[len] = 0;
    json_t *j = json_loads(all, 0, NULL);
    for (char *line = all + len; !j && line > all; line--)
        if (line[-1] == '\n' && line[0] == '{')
            j = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    if (!j && all[0] == '{')
        j = json_loads(all, JSON_DISABLE_EOF_CHECK, NULL);
    free(all);
    return j;
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    if (rc)
        fprintf(stderr, "bench_model: failed (%d): %s\n", rc, cmd);
    return rc;
}

static double number(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static void bench_one(const char *bin, const char *script, const char *ort_js, const char *dir,
                      long trials, int repeat, long cores, result *r)
{
    char model[1024], db[1024], lib[1024], cmd[8192], log[1024];
    snprintf(model, sizeof(model), "%s/models/%s/model.onnx", dir, r->name);
    snprintf(db, sizeof(db), "%s/%s.db", dir, r->name);
    snprintf(lib, sizeof(lib), "%s/lib/%s", dir, r->name);
    snprintf(log, sizeof(log), "%s/%s.tune.log", dir, r->name);
    /* tasks and FLOPs */
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune tasks --model %s --json", bin, model);
    json_t *t = run_json(cmd);
    if (t) {
        r->gflop = number(t, "flops") / 1e9;
        r->tasks = (int)json_array_size(json_object_get(t, "tasks"));
        json_decref(t);
    }
    double t0 = tt_clock_monotonic();
    /* --trials 0: the untuned build a user's first tvm-compile makes (no database) */
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune run --model %s --trials %ld --db %s > %s 2>&1", bin,
             model, trials, db, log);
    if (trials > 0 && run(cmd))
        return;
    r->tune_s = tt_clock_monotonic() - t0;
    t0 = tt_clock_monotonic();
    char with_db[1100] = "";
    if (trials > 0)
        snprintf(with_db, sizeof(with_db), "--db %s ", db);
    snprintf(cmd, sizeof(cmd), "%s/tvm-compile %s--model %s -o %s --quiet 2>/dev/null", bin,
             with_db, model, lib);
    if (run(cmd))
        return;
    r->build_s = tt_clock_monotonic() - t0;
    /* correct first: ours against PyTorch's output */
    snprintf(cmd, sizeof(cmd),
             "%s/tvm-net run %s.so -i %s/models/%s/input_0.npy -o %s/%s.out.npy > /dev/null && "
             "/usr/bin/python3 -c \"import numpy as np, json; a = np.load('%s/%s.out.npy'); "
             "b = np.load('%s/models/%s/output_0.npy'); "
             "print(json.dumps({'error': float(abs(a - b).max() / abs(b).max())}))\"",
             bin, lib, dir, r->name, dir, r->name, dir, r->name, dir, r->name);
    json_t *e = run_json(cmd);
    r->error = e ? number(e, "error") : -1;
    json_decref(e);
    /* then fast: fresh processes, interleaved, the best median of three */
    r->ours_s = r->torch_s = 1e30;
    double ort_s = 1e30;
    for (int round = 0; round < 3; round++) {
        snprintf(cmd, sizeof(cmd),
                 "%s/tvm-net time %s.so -i %s/models/%s/input_0.npy --repeat %d "
                 "--json",
                 bin, lib, dir, r->name, repeat);
        json_t *o = run_json(cmd);
        if (o && number(o, "median_s") > 0 && number(o, "median_s") < r->ours_s)
            r->ours_s = number(o, "median_s");
        if (o)
            r->estimate_s = number(o, "estimate_s");
        json_decref(o);
        snprintf(cmd, sizeof(cmd),
                 "/usr/bin/python3 %s --time %s %s/models/%s --threads %ld "
                 "--repeat %d 2>/dev/null",
                 script, r->name, dir, r->name, cores, repeat);
        o = run_json(cmd);
        if (o && number(o, "median_s") > 0 && number(o, "median_s") < r->torch_s)
            r->torch_s = number(o, "median_s");
        json_decref(o);
        if (!ort_dir[0])
            continue;
        snprintf(cmd, sizeof(cmd),
                 "node %s %s %s %ld %d %s/models/%s/output_0.npy %s/models/%s/input_0.npy", ort_js,
                 ort_dir, model, cores, repeat, dir, r->name, dir, r->name);
        o = run_json(cmd);
        if (o && number(o, "median_s") > 0 && number(o, "median_s") < ort_s) {
            ort_s = number(o, "median_s");
            r->ort_error = number(o, "error");
        }
        json_decref(o);
    }
    r->ort_s = ort_s < 1e30 ? ort_s : 0;
    r->ok = r->ours_s < 1e30 && r->torch_s < 1e30 && r->error >= 0;
}

int main(int argc, char **argv)
{
    long trials = 64;
    int repeat = 30;
    const char *models = "resnet18,mobilenet_v2,bert_layer", *dir = "/tmp/bench-model",
               *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atol(argv[++i]);
        else if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else {
            fprintf(stderr, "usage: bench_model [--trials N] [--models "
                            "resnet18,mobilenet_v2,mobilenet_v3_large,...] "
                            "[--dir DIR] [--repeat R] [--json FILE]\n");
            return 2;
        }
    }
    if (trials < 0 || repeat < 1)
        return fprintf(stderr, "bench_model: --trials is 0 (untuned) or more, --repeat positive\n"),
               2;
    const char *bin = TT_BIN_DIR, *script = TT_SOURCE_DIR "/scripts/export_torch_models.py",
               *ort_js = TT_SOURCE_DIR "/bench/ort_time.js";
    find_onnxruntime();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char cpu[256], cmd[4096];
    tt_target host;
    tt_target_parse("llvm", &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    printf("bench_model: %s, %ld cores, vector ISA %s (%d-byte vectors)\n",
           tt_bench_cpu_name(cpu, sizeof(cpu)), cores, isa.name, isa.vector_bytes);
    if (trials > 0)
        printf("networks: batch 1, float32; ours: %ld trials per task (tvm-tune run --model), ",
               trials);
    else
        printf("networks: batch 1, float32; ours: untuned (tvm-compile --model, no database), ");
    printf("PyTorch: %ld threads, inference mode; ", cores);
    if (ort_dir[0])
        printf("ONNX Runtime %s: CPU, all graph optimisations, %ld intra-op threads; ", ort_version,
               cores);
    else
        printf("ONNX Runtime: not installed (scripts/install-bench-anchors.sh); ");
    printf("median of %d runs, best of 3 fresh processes\n\n", repeat);
    mkdir(dir, 0755);
    snprintf(cmd, sizeof(cmd), "%s/lib", dir);
    mkdir(cmd, 0755);
    /* export what is missing */
    char list[256];
    snprintf(list, sizeof(list), "%s", models);
    result rs[8];
    int n = 0;
    for (char *save, *m = strtok_r(list, ",", &save); m && n < 8; m = strtok_r(NULL, ",", &save)) {
        memset(&rs[n], 0, sizeof(rs[n]));
        rs[n].name = strdup(m);
        char path[1024];
        snprintf(path, sizeof(path), "%s/models/%s/model.onnx", dir, m);
        struct stat st;
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s/models %s > /dev/null 2>&1", script, dir,
                 m);
        if (stat(path, &st) && run(cmd))
            return 1;
        n++;
    }
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "bench_model: %s ...\n", rs[i].name);
        bench_one(bin, script, ort_js, dir, trials, repeat, cores, &rs[i]);
    }
    printf("| network      | GFLOP | tasks | trials/task | tuning (min) | ONNX Runtime (ms) | "
           "PyTorch (ms) | ours (ms) | vs ONNX Runtime | vs PyTorch | estimate (ms) | "
           "measured/estimate | max rel. error |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    json_t *out = json_array();
    for (int i = 0; i < n; i++) {
        result *r = &rs[i];
        if (!r->ok) {
            printf("| %-12s | (failed: see %s/%s.tune.log) |\n", r->name, dir, r->name);
            continue;
        }
        char ort[32] = "-", vs_ort[32] = "-", est[32] = "-", ratio[32] = "-";
        if (r->ort_s > 0) {
            snprintf(ort, sizeof(ort), "%.2f", r->ort_s * 1e3);
            snprintf(vs_ort, sizeof(vs_ort), "%.2fx", r->ort_s / r->ours_s);
        }
        if (r->estimate_s > 0) {
            snprintf(est, sizeof(est), "%.2f", r->estimate_s * 1e3);
            snprintf(ratio, sizeof(ratio), "%.3f", r->ours_s / r->estimate_s);
        }
        printf("| %-12s | %5.2f | %5d | %11ld | %12.1f | %17s | %12.2f | %9.2f | %15s | %9.2fx | "
               "%13s | %17s | %14.1e |\n",
               r->name, r->gflop, r->tasks, trials, r->tune_s / 60, ort, r->torch_s * 1e3,
               r->ours_s * 1e3, vs_ort, r->torch_s / r->ours_s, est, ratio, r->error);
        json_array_append_new(
            out, json_pack("{s:s, s:f, s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                           "network", r->name, "gflop", r->gflop, "tasks", r->tasks,
                           "trials_per_task", (json_int_t)trials, "tuning_s", r->tune_s, "build_s",
                           r->build_s, "onnxruntime_s", r->ort_s, "onnxruntime_max_rel_error",
                           r->ort_error, "pytorch_s", r->torch_s, "ours_s", r->ours_s, "estimate_s",
                           r->estimate_s, "max_rel_error", r->error));
    }
    printf("\nvs ONNX Runtime, vs PyTorch: their latency / ours (above 1: ours is faster); "
           "estimate: the database's sum of weight x the median sample of each task's best "
           "record (none untuned); max rel. error: ours against PyTorch's output\n");
    for (int i = 0; i < n; i++)
        if (rs[i].ort_s > 0 && rs[i].ort_error > 1e-3)
            printf("note: ONNX Runtime's output of %s differs from PyTorch's by %.1e\n", rs[i].name,
                   rs[i].ort_error);
    if (json_path && json_dump_file(out, json_path, JSON_INDENT(2)))
        fprintf(stderr, "bench_model: cannot write %s\n", json_path);
    json_decref(out);
    return 0;
}
