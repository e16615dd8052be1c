/* The OpenCL back end on a real OpenCL device (pocl on the CPU in CI, the GPU's driver where there
 * is one): GPU schedules lowered, emitted as OpenCL C, built by the driver and run in the
 * measuring child compute what the reference evaluator computes; schedules that do not fit the
 * device are refused with the right error before or at launch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "codegen/cl_artifact.h"
#include "codegen/codegen.h"
#include "db/db.h"
#include "rpc/device_info.h"
#include "rpc/measure.h"
#include "rpc/opencl.h"
#include "schedule/random_schedule.h"
#include "schedule/verify.h"
#include "tuner/access.h"
#include "tuner/sketch.h"
#include "tuner/space.h"
#include "tuner/tune.h"

static char dir[128];
static tt_cl_device_info devs[TT_CL_MAX_DEVICES];
static int ndevs;

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-opencl-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    /* the binary cache of these tests' builds, gone with the folder */
    char cache[256];
    snprintf(cache, sizeof(cache), "%s/cl-cache", dir);
    setenv("TT_CL_CACHE", cache, 1);
    tt_errbuf err = {{0}};
    if (tt_cl_probe(devs, TT_CL_MAX_DEVICES, &ndevs, &err))
        fprintf(stderr, "probe: %s\n", err.msg);
    for (int i = 0; i < ndevs; i++) /* says where the tests ran (pocl in CI, a GPU elsewhere) */
        printf("opencl device %d: %s (%s, %s)\n", i, devs[i].name, devs[i].vendor, devs[i].version);
    return 0;
}

static int teardown(void **state)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The device the tests run on: TT_TEST_OPENCL_DEVICE, else the default choice. */
static const char *device_spec(void)
{
    const char *s = getenv("TT_TEST_OPENCL_DEVICE");
    return s && s[0] ? s : NULL;
}

static void need_device(void)
{
    if (ndevs == 0)
        skip();
}

/* Emits `prog`, runs it on the device through the measuring child with the reference outputs of
 * `dag` as the expected ones, and returns the result. */
static tt_measure_result run_on_device(const tt_dag *dag, const tt_program *prog,
                                       const tt_gpu_limits *lim, uint64_t seed,
                                       tt_opencl_stats *stats, tt_status *emit_status,
                                       tt_errbuf *err)
{
    tt_measure_result res;
    memset(&res, 0, sizeof(res));
    char *text;
    size_t len;
    *emit_status = tt_codegen_opencl(prog, "kernel", lim, &text, &len, stats, err);
    if (*emit_status)
        return res;
    static int counter;
    char path[256];
    snprintf(path, sizeof(path), "%s/k%d.cl", dir, counter++);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    free(text);
    int params[64], nin;
    int np = tt_dag_params(dag, params, 64, &nin);
    void *data[64];
    tt_measure_buffer bufs[64];
    memset(bufs, 0, sizeof(bufs));
    for (int i = 0; i < np; i++) {
        const tt_op *op = &dag->ops.data[params[i]];
        int64_t n = tt_op_numel(op);
        data[i] = malloc((size_t)n * (size_t)tt_dtype_bytes(op->dtype) + 1);
        if (i < nin)
            tt_fill_random(data[i], op->dtype, n, seed + (uint64_t)i);
        bufs[i].elem = tt_tune_measure_elem(op->dtype);
        bufs[i].count = n;
        bufs[i].data = i < nin ? data[i] : NULL;
        bufs[i].expect = i < nin ? NULL : data[i];
    }
    assert_int_equal(tt_dag_eval(dag, data, err), TT_OK);
    /* inputs the program reads packed (LR) go in packed */
    void *args[64];
    assert_int_equal(tt_program_args(dag, prog, data, args, err), TT_OK);
    for (int i = 0; i < nin; i++)
        if (args[i] != data[i]) {
            bufs[i].data = args[i];
            bufs[i].count = tt_program_param(prog, i)->layout.size;
        }
    tt_measure_options mo = {.repeat = 1, .timeout_s = 60, .opencl_device = device_spec()};
    assert_int_equal(tt_measure_run(path, "kernel", bufs, np, nin, &mo, &res, err), TT_OK);
    tt_program_args_free(prog, data, args);
    for (int i = 0; i < np; i++)
        free(data[i]);
    unlink(path);
    return res;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static tt_state *replay(const tt_workload *w, const char *steps_json)
{
    tt_state *st;
    tt_errbuf err = {{0}};
    if (tt_state_from_json(&w->dag, steps_json, &st, &err))
        fail_msg("%s: %s", steps_json, err.msg);
    return st;
}

/* A hand-written schedule in TVM's GPU style: 16 blocks of 8x8 threads, each thread a 2x2 tile;
 * A and B staged through shared memory per k.0 step, filled cooperatively by all 64 threads. */
static const char shared_matmul[] =
    "[[\"CHR\", 0, \"shared\", [2]], [\"CHR\", 2, \"shared\", [3]],"
    " [\"SP\", 4, 0, 64, [8, 2], 1], [\"SP\", 4, 3, 64, [8, 2], 1], [\"SP\", 4, 6, 64, [8], 1],"
    " [\"RE\", 4, [0, 3, 1, 4, 6, 7, 2, 5]],"
    " [\"FU\", 4, [0, 1]], [\"AN\", 4, 0, 5], [\"FU\", 4, [1, 2]], [\"AN\", 4, 1, 6],"
    " [\"CA\", 1, 4, 2], [\"CA\", 3, 4, 2],"
    " [\"FU\", 1, [0, 1]], [\"SP\", 1, 0, 128, [64], 1], [\"AN\", 1, 1, 6],"
    " [\"FU\", 3, [0, 1]], [\"SP\", 3, 0, 128, [64], 1], [\"AN\", 3, 1, 6]]";

static void shared_memory_matmul_matches(void **state)
{
    need_device();
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=64,N=64,K=64", &w, &err), TT_OK);
    tt_state *st = replay(w, shared_matmul);
    tt_program *prog;
    if (tt_lower(st, &prog, &err))
        fail_msg("lower: %s", err.msg);
    tt_opencl_stats stats;
    tt_status es;
    tt_measure_result r = run_on_device(&w->dag, prog, NULL, 1, &stats, &es, &err);
    if (es || r.error_no) {
        char *ir = tt_program_print(prog);
        char *text = NULL;
        size_t len;
        tt_codegen_opencl(prog, "kernel", NULL, &text, &len, NULL, &err);
        fprintf(stderr, "%s\n%s\n", ir, text ? text : "");
        free(ir);
        free(text);
        fail_msg("emit %d, run error %d: %s / %s", es, r.error_no, err.msg, r.error_text);
    }
    assert_int_equal(stats.kernels, 1);
    assert_int_equal(stats.grid[0], 16);
    assert_int_equal(stats.block[0], 64);
    /* Two 16x8 tiles of floats in local memory, fenced on both sides of each fill. */
    assert_int_equal(stats.shared_bytes, 2 * 16 * 8 * 4);
    assert_true(stats.barriers >= 2);
    assert_true(r.ncosts == 1 && r.costs[0] > 0);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Random legal GPU schedules (sketches with thread binding, as the search draws them) of every
 * operator compute what the definition computes on the device: 3 each, or TT_GPU_SCHEDULES,
 * drawn from seeds moved by TT_GPU_SEED (a longer hunt for code generator bugs by hand). */
static void gpu_sketches_of_every_operator_match(void **state)
{
    need_device();
    const char *many = getenv("TT_GPU_SCHEDULES"), *seed = getenv("TT_GPU_SEED");
    int per_workload = many && atoi(many) > 0 ? atoi(many) : 3;
    uint64_t seed_base = 77 + (seed ? strtoull(seed, NULL, 10) : 0);
    int ran = 0, kernels = 0, barriers = 0, workgroups_over_1 = 0;
    for (size_t w = 0; w < tt_test_nworkloads; w++) {
        tt_workload *wl;
        tt_errbuf err = {{0}};
        if (tt_workload_parse(tt_test_workloads[w], &wl, &err))
            fail_msg("%s: %s", tt_test_workloads[w], err.msg);
        tt_sketch_params sp;
        tt_sketch_params_gpu(&sp, 256, 8);
        tt_sketch_space space;
        if (tt_sketch_space_init(&space, &wl->dag, &sp, &err))
            fail_msg("%s: sketches: %s", tt_test_workloads[w], err.msg);
        tt_rng rng;
        tt_rng_seed(&rng, seed_base + w);
        int got = 0;
        for (int draw = 0; draw < 70 * per_workload && got < per_workload; draw++) {
            tt_state *st;
            if (tt_sketch_sample(&space, -1, &rng, &st, &err))
                continue;
            tt_program *prog;
            if (tt_lower(st, &prog, &err)) {
                tt_state_free(st);
                continue;
            }
            char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
            tt_opencl_stats stats;
            tt_status es;
            tt_measure_result r =
                run_on_device(&wl->dag, prog, NULL, (uint64_t)draw, &stats, &es, &err);
            if (es == TT_ERR_LIMIT) {
                free(steps);
                tt_program_free(prog);
                tt_state_free(st);
                continue; /* a draw the device cannot hold: the tuner drops these too */
            }
            if (es || r.error_no) {
                char *ir = tt_program_print(prog);
                fprintf(stderr, "%s\n", ir);
                free(ir);
                fail_msg("%s %s: emit %d (%s), run error %d: %s", tt_test_workloads[w], steps, es,
                         err.msg, r.error_no, r.error_text);
            }
            kernels += stats.kernels;
            barriers += stats.barriers;
            workgroups_over_1 += stats.block[0] * stats.block[1] * stats.block[2] > 1;
            got++;
            free(steps);
            tt_program_free(prog);
            tt_state_free(st);
        }
        if (got == 0)
            fail_msg("%s: no GPU schedule could be drawn", tt_test_workloads[w]);
        ran += got;
        tt_sketch_space_free(&space);
        tt_workload_free(wl);
    }
    printf("opencl: %d GPU schedules of %zu workloads matched on the device (%d kernels, %d "
           "barriers, %d with work-groups of several work-items)\n",
           ran, tt_test_nworkloads, kernels, barriers, workgroups_over_1);
    assert_true(barriers > 0);
    assert_true(workgroups_over_1 > ran / 2);
}

/* Runs `st` (lowered) on the device and fails with the schedule when it does not match. */
static void check_state(const tt_workload *w, const tt_state *st, uint64_t seed, const char *what,
                        tt_opencl_stats *stats)
{
    tt_errbuf err = {{0}};
    tt_program *prog;
    if (tt_lower(st, &prog, &err))
        fail_msg("%s: lower: %s", what, err.msg);
    tt_status es;
    tt_measure_result r = run_on_device(&w->dag, prog, NULL, seed, stats, &es, &err);
    if (es || r.error_no) {
        char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
        char *ir = tt_program_print(prog);
        fprintf(stderr, "%s\n", ir);
        fail_msg("%s %s: emit %d (%s), run error %d: %s", what, steps, es, err.msg, r.error_no,
                 r.error_text);
    }
    tt_program_free(prog);
}

/* The GPU template (the space of tvm-tune's template strategies on OpenCL) on matmul and
 * convolutions: random valid configs compute the definition, double-buffered ones among them. */
static void gpu_template_configs_match(void **state)
{
    need_device();
    static const char *const workloads[] = {
        "matmul:M=32,N=24,K=16",
        "batch_matmul:B=2,M=8,N=12,K=8",
        "conv2d_nchw:N=1,CI=4,H=8,W=8,CO=8,K=3,S=1,P=1",
        "conv2d_nhwc:N=1,H=7,W=7,CI=4,CO=6,K=3,S=2,P=1",
    };
    int ran = 0, doubled = 0, staged = 0, unshared = 0;
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
        tt_workload *w;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_workload_parse(workloads[i], &w, &err), TT_OK);
        char sig[2][64];
        /* with shared-memory stages, and without (opencl -device=mali) */
        for (int shared = 1; shared >= 0; shared--) {
            tt_space sp;
            if (tt_space_init_gpu(&sp, &w->dag, 256, 8, shared, &err))
                fail_msg("%s: %s", workloads[i], err.msg);
            assert_true(sp.gpu && sp.size > 1);
            tt_space_signature(&sp, sig[shared], sizeof(sig[shared]));
            tt_rng rng;
            tt_rng_seed(&rng, 31 + i);
            int got = 0;
            for (int draw = 0; draw < 100 && got < 3; draw++) {
                tt_state *st;
                if (tt_space_apply(&sp, tt_rng_below(&rng, sp.size), &st, &err))
                    continue;
                tt_opencl_stats stats;
                check_state(w, st, (uint64_t)draw, workloads[i], &stats);
                assert_true(stats.block[0] >= 1 && stats.grid[0] >= 1);
                for (size_t g = 0; g < st->stages.len; g++) {
                    doubled += st->stages.data[g].double_buffer;
                    bool in_shared = !strcmp(st->stages.data[g].scope, "shared");
                    staged += shared && in_shared;
                    assert_false(!shared && in_shared);
                }
                unshared += !shared;
                tt_state_free(st);
                got++;
            }
            assert_true(got > 0);
            ran += got;
        }
        /* an index of one space means another config in the other: records keep them apart */
        assert_string_not_equal(sig[0], sig[1]);
        tt_workload_free(w);
    }
    printf("opencl: %d GPU template configs matched on the device (%d double-buffered tiles, %d "
           "shared stages; %d of them without, as on Mali)\n",
           ran, doubled, staged, unshared);
    assert_true(doubled > 0); /* the template's double_buffer knob */
    assert_true(staged > 0 && unshared > 0);
}

/* The warp a device's vendor reports (NVIDIA's warp, AMD's wavefront: the tuner's bindings split
 * by it unless the target says -thread_warp_size) travels with the device's description from a
 * server; pocl reports none, and a server from before it sends none: 0, the default of 32. */
static void device_warps_travel_with_the_device(void **state)
{
    (void)state;
    tt_device_info d;
    memset(&d, 0, sizeof(d));
    tt_errbuf err = {{0}};
    if (ndevs > 0)
        assert_int_equal(tt_device_probe_opencl(&d, device_spec(), &err), TT_OK);
    for (int i = 0; i < d.nopencl; i++)
        assert_int_equal(d.opencl[i].warp, 0); /* pocl */
    d.nopencl = d.nopencl ? d.nopencl : 1;
    d.opencl_selected = 0;
    d.opencl[0].warp = 64;
    json_t *j = tt_device_info_json(&d);
    tt_device_info back;
    tt_device_info_from_json(j, &back);
    assert_int_equal(back.opencl[0].warp, 64);
    json_object_del(json_array_get(json_object_get(j, "opencl"), 0), "warp");
    tt_device_info_from_json(j, &back);
    assert_int_equal(back.opencl[0].warp, 0);
    json_decref(j);
    assert_int_equal(tt_sketch_gpu_warp(1024, 64), 64);
    assert_int_equal(tt_sketch_gpu_warp(1024, 0), 32);
    assert_int_equal(tt_sketch_gpu_warp(16, 64), 16);
}

/* A GPU driver that no ICD file registers is named, so a run does not silently measure on pocl's
 * CPU device (the H100 machine had NVIDIA's libnvidia-opencl.so.1 and only pocl.icd).  Needs no
 * device: folders made here stand for the library folder and the ICD vendors folder. */
static void unregistered_gpu_drivers_are_named(void **state)
{
    (void)state;
    char libs[300], vendors[300], drv[400], path[4096];
    snprintf(libs, sizeof(libs), "%s/lib", dir);
    snprintf(vendors, sizeof(vendors), "%s/vendors", dir);
    assert_int_equal(mkdir(libs, 0700), 0);
    assert_int_equal(mkdir(vendors, 0700), 0);
    const char *const dirs[] = {libs, NULL};
    write_text(strcat(strcpy(drv, vendors), "/pocl.icd"), "libpocl.so.2\n");
    assert_false(tt_cl_unregistered_driver(dirs, vendors, path, sizeof(path)));
    snprintf(drv, sizeof(drv), "%s/libnvidia-opencl.so.1", libs);
    write_text(drv, "");
    assert_true(tt_cl_unregistered_driver(dirs, vendors, path, sizeof(path)));
    assert_string_equal(path, drv);
    /* registered by its name, or by a full path */
    char icd[400];
    snprintf(icd, sizeof(icd), "%s/nvidia.icd", vendors);
    write_text(icd, "libnvidia-opencl.so.1\n");
    assert_false(tt_cl_unregistered_driver(dirs, vendors, path, sizeof(path)));
    write_text(icd, "/usr/local/nvidia/lib64/libnvidia-opencl.so.1");
    assert_false(tt_cl_unregistered_driver(dirs, vendors, path, sizeof(path)));
    unlink(icd);
    /* the hint says what to do, unless a GPU is selected anyway */
    setenv("OCL_ICD_VENDORS", vendors, 1);
    tt_cl_device_info cpu = {.name = "pthread-cpu", .type = "cpu"};
    char hint[1024];
    tt_cl_driver_hint(&cpu, dirs, hint, sizeof(hint));
    assert_non_null(strstr(hint, drv));
    assert_non_null(strstr(hint, "measuring on pthread-cpu instead"));
    assert_non_null(strstr(hint, vendors));
    tt_cl_driver_hint(NULL, dirs, hint, sizeof(hint));
    assert_non_null(strstr(hint, drv));
    tt_cl_device_info gpu = {.name = "gpu", .type = "gpu"};
    tt_cl_driver_hint(&gpu, dirs, hint, sizeof(hint));
    assert_string_equal(hint, "");
    unsetenv("OCL_ICD_VENDORS");
}

/* What a template search offered, checked against the device as the tuner sees it. */
typedef struct {
    const tt_workload *w;
    tt_gpu_limits lim;
    int offered, over;
} offer_check;

static double check_offer(void *ctx, const char *config)
{
    offer_check *oc = ctx;
    oc->offered++;
    if (strcmp(config, "[]")) { /* not the naive baseline */
        tt_state *st = replay(oc->w, config);
        tt_program *prog;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        oc->over += tt_codegen_opencl_check(prog, &oc->lim, &err) != TT_OK;
        tt_program_free(prog);
        tt_state_free(st);
    }
    return 1e-3 * (1.0 + (double)(tt_hash64_str(config) % 1000) / 1000.0);
}

/* A tuning run of one workload on this OpenCL device, 2 compile threads. */
static tt_tune_options opencl_run(const char *const *w, const char *db, int64_t trials,
                                  tt_strategy strategy, uint64_t seed)
{
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = w;
    o.nworkloads = 1;
    o.target = "opencl";
    o.trials = trials;
    o.strategy = strategy;
    o.db_path = db;
    o.seed = seed;
    o.threads = 2;
    o.measure.opencl_device = device_spec();
    return o;
}

/* The template strategies never offer a config whose kernel exceeds the device (the knobs cannot
 * see local memory, which grows with the tiles): on an H100's 48 KiB the evolutionary search had
 * 46 of 64 matmul 1024 candidates refused by the code generator.  pocl offers 1 MiB, which no
 * template config of this space reaches, so the run asks for an H100's 48 KiB
 * (tt_tune_options.gpu_limits), where about one config in eight needs more. */
static void template_search_offers_only_kernels_within_the_device(void **state)
{
    need_device();
    const char *wl = "matmul:M=1024,N=1024,K=1024";
    tt_errbuf err = {{0}};
    int d = tt_cl_select(devs, ndevs, device_spec(), &err);
    assert_true(d >= 0);
    offer_check oc;
    memset(&oc, 0, sizeof(oc));
    assert_int_equal(tt_workload_parse(wl, (tt_workload **)&oc.w, &err), TT_OK);
    tt_gpu_limits_default(&oc.lim); /* as the tuner derives them from the device */
    oc.lim.max_threads = devs[d].max_work_group < 1024 ? devs[d].max_work_group : 1024;
    for (int a = 0; a < 3; a++)
        oc.lim.max_block[a] = devs[d].max_item[a];
    oc.lim.max_shared_bytes = devs[d].local_mem < 49152 ? devs[d].local_mem : 49152;
    /* The control: a share of the space's configs is beyond the device. */
    tt_space sp;
    assert_int_equal(tt_space_init_gpu(&sp, &oc.w->dag, oc.lim.max_threads, 8, true, &err), TT_OK);
    tt_rng rng;
    tt_rng_seed(&rng, 5);
    int beyond = 0, drawn = 0;
    for (int i = 0; i < 200; i++) {
        tt_state *st;
        if (tt_space_apply(&sp, tt_rng_below(&rng, sp.size), &st, &err))
            continue;
        tt_program *prog;
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        beyond += tt_codegen_opencl_check(prog, &oc.lim, &err) == TT_ERR_LIMIT;
        drawn++;
        tt_program_free(prog);
        tt_state_free(st);
    }
    char db[256];
    snprintf(db, sizeof(db), "%s/offers.db", dir);
    const char *w[1] = {wl};
    tt_tune_options o = opencl_run(w, db, 64, TT_STRATEGY_RANDOM, 3);
    o.objective = check_offer; /* nothing runs: the test sees each config the search offers */
    o.objective_ctx = &oc;
    tt_gpu_limits asked = {.max_shared_bytes = 49152};
    o.gpu_limits = &asked;
    tt_tune_summary sum;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    printf("opencl: %d of %d random template configs of %s exceed the device's %lld bytes of "
           "local memory; the search offered %d, %d of them beyond\n",
           beyond, drawn, wl, (long long)oc.lim.max_shared_bytes, oc.offered, oc.over);
    assert_true(beyond > 0);
    assert_true(oc.offered >= 60);
    assert_int_equal(oc.over, 0);
    assert_int_equal(sum.errors, 0);
    tt_workload_free((tt_workload *)oc.w);
}

/* A target's -max_num_threads bounds the search as the device's own limit does: with "opencl
 * -max_num_threads=64" neither the sketches (evo) nor the template (random) offer a kernel of more
 * than 64 work-items a group, where on the same device without it they do; likewise
 * -max_shared_memory_per_block=4096 and the local memory of each kernel offered. */
static void target_thread_limit_bounds_the_search(void **state)
{
    need_device();
    const char *wl = "matmul:M=256,N=256,K=256";
    static const struct {
        const char *target;
        tt_strategy strategy;
        int64_t threads, shared; /* the limits checked (0: not) */
        bool bounded;
    } runs[] = {
        {"opencl -max_num_threads=64", TT_STRATEGY_EVO, 64, 0, true},
        {"opencl -max_num_threads=64", TT_STRATEGY_RANDOM, 64, 0, true},
        {"opencl", TT_STRATEGY_EVO, 64, 0, false},
        {"opencl -max_shared_memory_per_block=4096", TT_STRATEGY_EVO, 0, 4096, true},
        {"opencl", TT_STRATEGY_EVO, 0, 4096, false},
    };
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        tt_errbuf err = {{0}};
        offer_check oc;
        memset(&oc, 0, sizeof(oc));
        assert_int_equal(tt_workload_parse(wl, (tt_workload **)&oc.w, &err), TT_OK);
        tt_gpu_limits_default(&oc.lim);
        oc.lim.max_threads = runs[i].threads ? runs[i].threads : 1024;
        for (int d = 0; d < 3; d++)
            oc.lim.max_block[d] = oc.lim.max_threads;
        oc.lim.max_shared_bytes = runs[i].shared;
        char db[256];
        snprintf(db, sizeof(db), "%s/threads%zu.db", dir, i);
        const char *w[1] = {wl};
        tt_tune_options o = opencl_run(w, db, 48, runs[i].strategy, 9);
        o.target = runs[i].target;
        o.objective = check_offer; /* nothing runs: the test sees each config offered */
        o.objective_ctx = &oc;
        tt_tune_summary sum;
        if (tt_tune_run(&o, &sum, NULL, &err))
            fail_msg("%s: %s", runs[i].target, err.msg);
        printf("opencl: '%s' (%s) offered %d configs of %s, %d beyond %lld %s\n", runs[i].target,
               runs[i].strategy == TT_STRATEGY_EVO ? "evo" : "random", oc.offered, wl, oc.over,
               (long long)(runs[i].threads ? runs[i].threads : runs[i].shared),
               runs[i].threads ? "work-items a group" : "bytes of local memory");
        assert_true(oc.offered >= 40);
        if (runs[i].bounded)
            assert_int_equal(oc.over, 0);
        else
            assert_true(oc.over > 0);
        tt_workload_free((tt_workload *)oc.w);
    }
}

/* Where each fixed GPU tiling (tt_sketch_gpu_tiled) came among the offered configs. */
typedef struct {
    const tt_workload *w;
    int offered;
    /* 1-based position, 0: never offered */
    int at_default, at_large, at_large4, at_large_db, at_large_regs;
    char *config[5]; /* the configs of the five, in that order */
} starts_check;

static double see_start(void *ctx, const char *config)
{
    starts_check *sc = ctx;
    sc->offered++;
    if (strcmp(config, "[]")) {
        tt_state *st = replay(sc->w, config);
        tt_program *prog;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        char *text = NULL;
        tt_opencl_stats stats;
        bool db = strstr(config, "\"double_buffer\"") != NULL;
        if (!tt_codegen_opencl(prog, "kernel", NULL, &text, NULL, &stats, &err) &&
            stats.block[0] * stats.block[1] * stats.block[2] == 256) {
            /* matmul 1024: 64x64 tiles stage 8 KiB, 128x128 tiles 16 KiB; with 4-float
             * fetches A's rows are padded from 16 floats to 20 (18 KiB), twice that when
             * double-buffered */
            bool unroll = strstr(config, "\"auto_unroll_max_step$512\"") != NULL;
            int kind = -1;
            if (unroll && !db && stats.shared_bytes == 8192 && !sc->at_default)
                sc->at_default = sc->offered, kind = 0;
            if (unroll && !db && stats.shared_bytes == 16384 && stats.vector_loops == 0 &&
                !sc->at_large)
                sc->at_large = sc->offered, kind = 1;
            if (unroll && !db && stats.shared_bytes == 18432 && stats.vector_loops >= 2 &&
                !sc->at_large4)
                sc->at_large4 = sc->offered, kind = 2;
            bool regs = strstr(config, "\"local\", [") != NULL; /* a CHR to registers */
            if (unroll && db && !regs && stats.shared_bytes == 36864 && stats.vector_loops >= 2 &&
                !sc->at_large_db)
                sc->at_large_db = sc->offered, kind = 3;
            if (unroll && db && regs && stats.shared_bytes == 36864 && stats.vector_loops >= 3 &&
                !sc->at_large_regs)
                sc->at_large_regs = sc->offered, kind = 4;
            if (kind >= 0)
                sc->config[kind] = strdup(config);
        }
        free(text);
        tt_program_free(prog);
        tt_state_free(st);
    }
    return 1e-3 * (1.0 + (double)(tt_hash64_str(config) % 1000) / 1000.0);
}

/* The records that carry a start's name in their extra JSON ("start"), by name: tvm-db history
 * --json shows it, and the GPU bench's tables label their rows by it. */
typedef struct {
    char *config[5];
    int named, others;
} start_names;

static int note_start_name(void *ctx, const tt_db_row *row)
{
    static const char *const names[] = {"default", "large", "large-float4", "large-double-buffer",
                                        "large-registers"};
    start_names *sn = ctx;
    json_t *x = row->extra ? json_loads(row->extra, 0, NULL) : NULL;
    const char *name = json_string_value(json_object_get(x, "start"));
    int k = -1;
    for (int i = 0; name && i < 5; i++)
        if (!strcmp(name, names[i]))
            k = i;
    if (name)
        assert_true(k >= 0 && !sn->config[k]);
    if (k >= 0) {
        sn->config[k] = strdup(row->config);
        sn->named++;
    } else {
        sn->others++;
    }
    json_decref(x);
    return 0;
}

/* A GPU sketch search measures the fixed tilings right after the naive baseline: the one a build
 * takes without records, so that a tuned record is never slower than the untuned build, and the
 * large tile with scalar and 4-float fetches, double-buffered, and with A's rows in registers
 * (tt__tune_pick), each record named for its tiling; a resumed run does not offer them again. */
static void gpu_search_starts_from_the_fixed_tilings(void **state)
{
    need_device();
    const char *wl = "matmul:M=1024,N=1024,K=1024";
    tt_errbuf err = {{0}};
    starts_check sc;
    memset(&sc, 0, sizeof(sc));
    assert_int_equal(tt_workload_parse(wl, (tt_workload **)&sc.w, &err), TT_OK);
    char db[256];
    snprintf(db, sizeof(db), "%s/starts.db", dir);
    const char *w[1] = {wl};
    tt_tune_options o = opencl_run(w, db, 8, TT_STRATEGY_EVO, 3);
    o.objective = see_start;
    o.objective_ctx = &sc;
    tt_tune_summary sum;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    printf("opencl: of %d offered, the default tiling came %d, the large %d, the large with "
           "4-float fetches %d, double-buffered %d, and with A's rows in registers %d\n",
           sc.offered, sc.at_default, sc.at_large, sc.at_large4, sc.at_large_db, sc.at_large_regs);
    assert_int_equal(sc.offered, 8);
    assert_true(sc.at_default >= 1 && sc.at_default <= 6);
    assert_true(sc.at_large >= 1 && sc.at_large <= 6);
    assert_true(sc.at_large4 >= 1 && sc.at_large4 <= 6);
    assert_true(sc.at_large_db >= 1 && sc.at_large_db <= 6);
    assert_true(sc.at_large_regs >= 1 && sc.at_large_regs <= 6);
    /* each of the five records says which it is */
    tt_db *d;
    assert_int_equal(tt_db_open(db, TT_DB_READONLY, &d, &err), TT_OK);
    start_names sn;
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(tt_db_history(d, NULL, note_start_name, &sn), TT_OK);
    tt_db_close(d);
    assert_int_equal(sn.named, 5);
    assert_int_equal(sn.others, 3);
    for (int k = 0; k < 5; k++) {
        assert_non_null(sc.config[k]);
        assert_non_null(sn.config[k]);
        assert_string_equal(sn.config[k], sc.config[k]);
        free(sn.config[k]);
        free(sc.config[k]);
        sc.config[k] = NULL;
    }
    /* resumed with 8 more trials: the five are in the database and not offered again */
    memset(&sc.offered, 0, sizeof(sc) - offsetof(starts_check, offered));
    o.trials = 16;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sc.offered, 8);
    assert_int_equal(sc.at_default + sc.at_large + sc.at_large4 + sc.at_large_db + sc.at_large_regs,
                     0);
    for (int k = 0; k < 5; k++)
        free(sc.config[k]);
    tt_workload_free((tt_workload *)sc.w);
}

/* Measurements that overlap the driver's builds (tt_tune_options.overlap_builds, the default on a
 * GPU; forced here on pocl): each candidate is measured as soon as it is built, and every one of
 * them is measured, checked and recorded as in the batch-then-measure order. */
static void measurements_overlap_the_builds(void **state)
{
    need_device();
    const char *wl = "matmul:M=128,N=128,K=128";
    char db[256];
    snprintf(db, sizeof(db), "%s/overlap.db", dir);
    const char *w[1] = {wl};
    tt_tune_options o = opencl_run(w, db, 12, TT_STRATEGY_EVO, 5);
    o.batch = 6;
    o.overlap_builds = 1;
    o.measure.repeat = 1;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    printf("opencl: %lld candidates measured overlapping their builds, %lld errors, best %.3f ms "
           "(naive %.3f ms)\n",
           (long long)sum.measured, (long long)sum.errors, sum.best_s * 1e3, sum.naive_s * 1e3);
    assert_int_equal(sum.measured, 12);
    assert_true(sum.errors <= 1); /* the large tile may not fit 128x128 (it is not offered) */
    assert_true(sum.best_s > 0 && sum.naive_s > 0);
    tt_db *d;
    assert_int_equal(tt_db_open(db, TT_DB_READONLY, &d, &err), TT_OK);
    tt_db_stats st;
    assert_int_equal(tt_db_stats_get(d, 0, &st), TT_OK);
    assert_int_equal(st.records, 12);
    assert_true(st.errors[0] >= 11 && st.best_s > 0);
    tt_db_close(d);
}

/* Schedules written for CPUs (parallel, vectorise, unroll, compute_at, caches, rfactor) run on a
 * GPU as one work-item: slow but right, so imported or hand-written configs never miscompute. */
static void cpu_schedules_run_as_one_work_item(void **state)
{
    need_device();
    int ran = 0, refused = 0;
    for (size_t w = 0; w < tt_test_nworkloads; w += 2) {
        tt_workload *wl;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_workload_parse(tt_test_workloads[w], &wl, &err), TT_OK);
        tt_rng rng;
        tt_rng_seed(&rng, 900 + w);
        tt_state *st;
        assert_int_equal(tt_state_create(&wl->dag, &st, &err), TT_OK);
        tt_test_random_steps(st, &rng, 8);
        tt_program *prog;
        if (tt_lower(st, &prog, &err) == TT_OK) {
            /* The random steps may bind loops to GPU threads where a GPU cannot run them (a
             * thread loop inside a private buffer's computation): refused with the reason, as
             * the tuner drops such candidates.  Everything else must run and match. */
            tt_opencl_stats stats;
            tt_status es;
            run_on_device(&wl->dag, prog, NULL, w, &stats, &es, &err);
            tt_program_free(prog);
            if (es == TT_ERR_ILLEGAL_STEP || es == TT_ERR_LIMIT) {
                assert_true(err.msg[0] != 0);
                refused++;
            } else {
                check_state(wl, st, w, tt_test_workloads[w], &stats);
                ran++;
            }
        }
        tt_state_free(st);
        tt_workload_free(wl);
    }
    assert_true(ran > 0 && ran >= refused);
}

/* Ansor's CrossThreadReduction sketches (little spatial work, a long reduction: threads share it)
 * run as work-group reductions and compute the definition: a matmul with a long k, softmax rows,
 * a norm, a min-reduction. */
static void cross_thread_reductions_match(void **state)
{
    need_device();
    static const char *const workloads[] = {
        "matmul:M=4,N=4,K=200",
        "softmax:M=3,N=100",
        "norm_bmn:B=2,M=20,N=20",
        "te:B[i] min= A[i,k]; A:float32[5,300]",
    };
    int reductions = 0;
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
        tt_workload *w;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_workload_parse(workloads[i], &w, &err), TT_OK);
        tt_sketch_params sp;
        tt_sketch_params_gpu(&sp, 256, 32);
        tt_sketch_space space;
        assert_int_equal(tt_sketch_space_init(&space, &w->dag, &sp, &err), TT_OK);
        tt_rng rng;
        tt_rng_seed(&rng, 5 + i);
        int found = 0;
        for (int draw = 0; draw < 60 && found < 2; draw++) {
            tt_state *st;
            if (tt_sketch_sample(&space, -1, &rng, &st, &err))
                continue;
            tt_opencl_stats stats;
            check_state(w, st, (uint64_t)draw, workloads[i], &stats);
            found += stats.cross_thread_reductions > 0;
            reductions += stats.cross_thread_reductions;
            tt_state_free(st);
        }
        if (!found)
            fail_msg("%s: no cross-thread reduction drawn", workloads[i]);
        tt_sketch_space_free(&space);
        tt_workload_free(w);
    }
    printf("opencl: %d cross-thread reductions matched on the device\n", reductions);
}

/* Emits matmul 64^3 under `steps`, expects two vector loops and every fragment of `expect` (NULL
 * ends it) in the OpenCL source, and runs it on the device against the reference. */
static void check_vector_code(const char *steps, const char *const *expect)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=64,N=64,K=64", &w, &err), TT_OK);
    tt_state *st = replay(w, steps);
    tt_program *prog;
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    char *text;
    size_t len;
    tt_opencl_stats stats;
    assert_int_equal(tt_codegen_opencl(prog, "kernel", NULL, &text, &len, &stats, &err), TT_OK);
    bool found = stats.vector_loops == 2;
    for (int i = 0; expect[i]; i++)
        found = found && strstr(text, expect[i]);
    if (!found) {
        fprintf(stderr, "%s\n", text);
        fail_msg("%d vector loops, or not every expected access", stats.vector_loops);
    }
    free(text);
    tt_status es;
    tt_measure_result r = run_on_device(&w->dag, prog, NULL, 3, &stats, &es, &err);
    assert_int_equal(es, TT_OK);
    if (r.error_no)
        fail_msg("run error %d: %s", r.error_no, r.error_text);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* A vectorised loop becomes OpenCL vector code: the 2-wide inner tile of each thread (its init and
 * its update) is stored as a float2, B's row read as one, A's element broadcast.  Both start at
 * an even element of buffers whose base is aligned, so each is one float2 access. */
static void vectorised_loops_use_vector_types(void **state)
{
    need_device();
    char steps[2048];
    snprintf(steps, sizeof(steps), "%.*s, [\"AN\", 4, 5, 2]]", (int)strlen(shared_matmul) - 1,
             shared_matmul);
    const char *const expect[] = {"*(__global float2 *)&C_2[", "(*(__local float2 *)&B_shared_4[",
                                  NULL};
    check_vector_code(steps, expect);
}

/* Ansor's cooperative fetch split by the vector (fuse the tile's axes, split off the vector, bind
 * the rest to threads) moves whole aligned vectors: its index divides the fused loop by the
 * tile's row length (16 x 8 of A, 8 x 16 of B), which keeps two lanes in one row and starts them
 * at an even element. */
static void vectorised_fetches_load_whole_vectors(void **state)
{
    need_device();
    const char *at = strstr(shared_matmul, "[\"FU\", 1, [0, 1]]");
    assert_non_null(at);
    char steps[2048];
    snprintf(steps, sizeof(steps),
             "%.*s[\"FU\", 1, [0, 1]], [\"SP\", 1, 0, 128, [64, 2], 1], [\"AN\", 1, 1, 6],"
             " [\"AN\", 1, 2, 2], [\"FU\", 3, [0, 1]], [\"SP\", 3, 0, 128, [64, 2], 1],"
             " [\"AN\", 3, 1, 6], [\"AN\", 3, 2, 2]]",
             (int)(at - shared_matmul), shared_matmul);
    const char *const expect[] = {"(*(__global float2 *)&A_0[", "(*(__global float2 *)&B_1[",
                                  "*(__local float2 *)&A_shared_3[", NULL};
    check_vector_code(steps, expect);
}

/* `wl` parsed into *w and its GPU default tiling (256 threads, warps of 32); fails the test
 * without one. */
static tt_state *default_tiling_of(const char *wl, tt_workload **w)
{
    tt_sketch_params sp;
    tt_sketch_params_gpu(&sp, 256, 32);
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse(wl, w, &err), TT_OK);
    tt_state *st;
    if (tt_sketch_gpu_tiled(&(*w)->dag, &sp, TT_GPU_TILE_DEFAULT, &st, &err))
        fail_msg("%s: %s", wl, err.msg);
    return st;
}

/* Double-buffered shared tiles (PR "double_buffer"), their fetch staged through registers,
 * compute the definition on the device: the
 * default tiling of a matmul, a padded convolution (its tiles fetched inside the kh, kw loops)
 * and a batched matmul with every shared stage double-buffered, a schedule with virtual threads,
 * and the large tiles that the tuner starts from (128x128 a work-group as 2x2 virtual threads of
 * 4x4 outputs a work-item; single-buffered, then with 4-float fetches and a vector register tile,
 * then double-buffered: two 16-deep slices of each input in 36 KiB of local memory).  The kernels
 * fence each step of the reduction once: one barrier more than the single-buffered kernel in the
 * text (the prologue's), and none around the fetch. */
static void double_buffered_tiles_match(void **state)
{
    need_device();
    static const char *const wls[] = {"matmul:M=64,N=128,K=64",
                                      "conv2d_nhwc:N=1,H=8,W=8,CI=32,CO=32,K=3,S=1,P=1",
                                      "batch_matmul:B=2,M=32,N=64,K=48"};
    tt_sketch_params sp;
    tt_sketch_params_gpu(&sp, 256, 32);
    tt_errbuf err = {{0}};
    for (size_t k = 0; k < sizeof(wls) / sizeof(wls[0]); k++) {
        tt_workload *w;
        tt_state *st = default_tiling_of(wls[k], &w);
        tt_opencl_stats one, two;
        check_state(w, st, 5, wls[k], &one);
        for (size_t g = 0; g < st->stages.len; g++)
            if (!strcmp(st->stages.data[g].scope, "shared"))
                assert_int_equal(tt_sched_pragma(st, (int)g, 0, "double_buffer", &err), TT_OK);
        check_state(w, st, 6, wls[k], &two);
        assert_int_equal(two.shared_bytes, 2 * one.shared_bytes);
        assert_int_equal(two.barriers, one.barriers + 1);
        assert_int_equal(two.staged_fetches, 1);
        tt_state_free(st);
        tt_workload_free(w);
    }
    /* a sampled schedule with 8 virtual threads around the reduction: a branch around its fetch
     * (the last iteration's) made pocl's compiler run for minutes, hence the branch-free fetch */
    tt_workload *w;
    assert_int_equal(tt_workload_parse("matmul:M=32,N=32,K=32", &w, &err), TT_OK);
    tt_state *st = replay(
        w, "[[\"CHW\", 2, \"local\"], [\"SP\", 2, 0, 32, [2, 4, 4, 1], 1], [\"SP\", 2, 5, 32, "
           "[4, 8, 1, 1], 1], [\"SP\", 2, 10, 32, [8, 1], 1], [\"RE\", 2, [0, 5, 1, 6, 2, 7, 10, "
           "11, 3, 8, 12, 4, 9]], [\"FSP\", 3, 0, 1, 3], [\"FSP\", 3, 4, 2, 3], [\"RE\", 3, [0, "
           "4, 1, 5, 2, 6, 3, 7]], [\"CA\", 2, 3, 5], [\"CHR\", 1, \"shared\", [2]], [\"CA\", 2, "
           "3, 6], [\"CHR\", 0, \"shared\", [3]], [\"CA\", 1, 4, 6], [\"FU\", 1, [0, 1]], "
           "[\"SP\", 1, 0, 1024, [1], 1], [\"AN\", 1, 1, 2], [\"FFSP\", 1, 0, [1, 2], 1, 1], "
           "[\"AN\", 1, 1, 6], [\"FU\", 3, [0, 1]], [\"SP\", 3, 0, 1024, [1], 1], [\"AN\", 3, "
           "1, 2], [\"FFSP\", 3, 0, [1, 2], 1, 1], [\"AN\", 3, 1, 6], [\"FU\", 5, [0, 1]], "
           "[\"AN\", 5, 0, 5], [\"FU\", 5, [1, 2]], [\"AN\", 5, 1, 4], [\"FU\", 5, [2, 3]], "
           "[\"AN\", 5, 2, 6], [\"PR\", 4, 0, \"auto_unroll_max_step$0\"], [\"PR\", 1, 0, "
           "\"double_buffer\"], [\"PR\", 3, 0, \"double_buffer\"]]");
    tt_opencl_stats stats;
    check_state(w, st, 8, "double-buffered under virtual threads", &stats);
    tt_state_free(st);
    tt_workload_free(w);
    /* a sampled capsule convolution of 9 work-items, its reduction loops unrolled around their
     * barriers (auto_unroll_max_step 1024) and the data's tile fetched through registers: pocl's
     * default work-group method (loopvec) got 56 of its 72 outputs wrong, its "loops" right
     * (tests/CMakeLists.txt sets it; docs/opencl.md "pocl, the test device") */
    assert_int_equal(tt_workload_parse(
                         "conv2d_capsule_nhwijc:N=1,H=6,W=6,CI=2,CO=2,K=3,S=2,P=1,CAP=2", &w, &err),
                     TT_OK);
    st = replay(
        w, "[[\"CHW\", 3, \"local\"], [\"SP\", 3, 0, 1, [1, 1, 1, 1], 1], [\"SP\", 3, 5, 3, [1, "
           "3, 1, 1], 1], [\"SP\", 3, 10, 3, [1, 3, 1, 1], 1], [\"SP\", 3, 15, 2, [2, 1, 1, 1], "
           "1], [\"SP\", 3, 20, 2, [1, 1, 1, 2], 1], [\"SP\", 3, 25, 2, [1, 1, 1, 2], 1], [\"SP"
           "\", 3, 30, 3, [1, 1], 1], [\"SP\", 3, 33, 3, [1, 3], 1], [\"SP\", 3, 36, 2, [2, 1], "
           "1], [\"SP\", 3, 39, 2, [1, 1], 1], [\"RE\", 3, [0, 5, 10, 15, 20, 25, 1, 6, 11, 16, "
           "21, 26, 2, 7, 12, 17, 22, 27, 30, 33, 36, 39, 31, 34, 37, 40, 3, 8, 13, 18, 23, 28, "
           "32, 35, 38, 41, 4, 9, 14, 19, 24, 29]], [\"FSP\", 4, 0, 1, 3], [\"FSP\", 4, 4, 2, 3]"
           ", [\"FSP\", 4, 8, 3, 3], [\"FSP\", 4, 12, 4, 3], [\"FSP\", 4, 16, 5, 3], [\"FSP\", 4"
           ", 20, 6, 3], [\"RE\", 4, [0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18"
           ", 22, 3, 7, 11, 15, 19, 23]], [\"CA\", 3, 4, 17], [\"CHR\", 2, \"shared\", [3]], [\""
           "CA\", 3, 4, 21], [\"CHR\", 1, \"shared\", [4]], [\"CA\", 2, 5, 21], [\"CI\", 1], [\""
           "FU\", 2, [0, 1, 2, 3, 4, 5]], [\"SP\", 2, 0, 512, [1], 1], [\"AN\", 2, 1, 2], [\"FFS"
           "P\", 2, 0, [1, 2, 3, 4, 5, 6], 1, 1], [\"AN\", 2, 1, 6], [\"FU\", 4, [0, 1, 2, 3, 4,"
           " 5]], [\"SP\", 4, 0, 144, [1], 1], [\"AN\", 4, 1, 2], [\"FFSP\", 4, 0, [1, 2, 3, 4, "
           "5, 6], 1, 1], [\"AN\", 4, 1, 6], [\"FU\", 6, [0, 1, 2, 3, 4, 5]], [\"AN\", 6, 0, 5],"
           " [\"FU\", 6, [1, 2, 3, 4, 5, 6]], [\"AN\", 6, 1, 4], [\"FU\", 6, [2, 3, 4, 5, 6, 7]]"
           ", [\"AN\", 6, 2, 6], [\"PR\", 5, 0, \"auto_unroll_max_step$1024\"], [\"PR\", 2, 0, "
           "\"double_buffer\"]]");
    check_state(w, st, 3, "double-buffered capsule convolution, unrolled", &stats);
    assert_int_equal(stats.staged_fetches, 1);
    tt_state_free(st);
    tt_workload_free(w);
    /* a sampled grouped convolution of 8 work-items with vector register tiles: pocl's "loops"
     * method crashed in it (SIGSEGV) when its work-group functions were specialised for the local
     * size (hence POCL_WORK_GROUP_SPECIALIZATION=0 beside it) */
    assert_int_equal(
        tt_workload_parse("conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=8,K=3,S=2,P=1,G=2", &w, &err), TT_OK);
    st = replay(
        w, "[[\"CHW\", 3, \"local\"], [\"SP\", 3, 0, 1, [1, 1, 1, 1], 1], [\"SP\", 3, 5, 4, [2, "
           "2, 1, 1], 1], [\"SP\", 3, 10, 4, [1, 4, 1, 1], 1], [\"SP\", 3, 15, 8, [1, 1, 1, 2], "
           "1], [\"SP\", 3, 20, 3, [1, 3], 1], [\"SP\", 3, 23, 3, [1, 3], 1], [\"SP\", 3, 26, 2,"
           " [1, 2], 1], [\"RE\", 3, [0, 5, 10, 15, 1, 6, 11, 16, 2, 7, 12, 17, 20, 23, 26, 21, "
           "24, 27, 3, 8, 13, 18, 22, 25, 28, 4, 9, 14, 19]], [\"FSP\", 4, 0, 1, 3], [\"FSP\", 4"
           ", 4, 2, 3], [\"FSP\", 4, 8, 3, 3], [\"FSP\", 4, 12, 4, 3], [\"RE\", 4, [0, 4, 8, 12,"
           " 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]], [\"CA\", 3, 4, 11], [\"CHR\", 2, \"share"
           "d\", [3]], [\"CA\", 3, 4, 14], [\"CHR\", 1, \"shared\", [4]], [\"CA\", 2, 5, 14], ["
           "\"CI\", 1], [\"FU\", 2, [0, 1, 2, 3]], [\"SP\", 2, 0, 400, [1], 1], [\"AN\", 2, 1, 2"
           "], [\"FFSP\", 2, 0, [1, 2, 3, 4], 1, 1], [\"AN\", 2, 1, 6], [\"FU\", 4, [0, 1, 2, 3]"
           "], [\"SP\", 4, 0, 144, [1], 1], [\"AN\", 4, 1, 2], [\"FFSP\", 4, 0, [1, 2, 3, 4], 1,"
           " 1], [\"AN\", 4, 1, 6], [\"FU\", 6, [0, 1, 2, 3]], [\"AN\", 6, 0, 5], [\"FU\", 6, [1"
           ", 2, 3, 4]], [\"AN\", 6, 1, 4], [\"FU\", 6, [2, 3, 4, 5]], [\"AN\", 6, 2, 6], [\"PR"
           "\", 5, 0, \"auto_unroll_max_step$512\"], [\"PR\", 2, 0, \"double_buffer\"], [\"AN\","
           " 5, 28, 2], [\"AN\", 6, 6, 2]]");
    check_state(w, st, 4, "grouped convolution with vector register tiles", &stats);
    assert_true(stats.vector_loops > 0);
    tt_state_free(st);
    tt_workload_free(w);
    /* K = 64: four 16-deep steps, so the fetch's clamped step, min(k + 1, 3), is not folded
     * away (inside the 4-float fetch, where it once came out as a vector index) */
    assert_int_equal(tt_workload_parse("matmul:M=1024,N=1024,K=64", &w, &err), TT_OK);
    /* the single-buffered large tiles first: 2x2 virtual threads of 4x4 (injected: one fetch for
     * the four), then with 4-float fetches, a vector register tile and A's rows padded */
    for (int four = 0; four < 2; four++) {
        if (tt_sketch_gpu_tiled(&w->dag, &sp, four ? TT_GPU_TILE_LARGE_FLOAT4 : TT_GPU_TILE_LARGE,
                                &st, &err))
            fail_msg("large tile: %s", err.msg);
        check_state(w, st, 9, four ? "large tile, 4-float" : "large tile", &stats);
        assert_int_equal(stats.local_bank_ways, four ? 1 : 2);
        tt_state_free(st);
    }
    if (tt_sketch_gpu_tiled(&w->dag, &sp, TT_GPU_TILE_LARGE_DOUBLE_BUFFER, &st, &err))
        fail_msg("large double-buffered tile: %s", err.msg);
    check_state(w, st, 7, "large double-buffered tile", &stats);
    /* A's rows padded from 16 floats to 20 (no bank conflict) */
    assert_int_equal(stats.shared_bytes, 2 * (128 * 20 + 16 * 128) * 4);
    assert_int_equal(stats.local_bank_ways, 1);
    /* the 4-float fetches: into the first tiles, into registers, from registers; the vector
     * register tile: its init, its products, its copy-out */
    assert_int_equal(stats.vector_loops, 9);
    assert_int_equal(stats.staged_fetches, 1);
    printf("opencl: double-buffered tiles match (the large one: %lld bytes of local memory, %d "
           "barriers, %d vector loops)\n",
           (long long)stats.shared_bytes, stats.barriers, stats.vector_loops);
    tt_state_free(st);
    /* A's rows copied into registers 4 deep, from either half of the double buffer: one more
     * vector loop (the copy: 128-bit reads of local memory), the same local memory; and a dense
     * layer's two inputs, both read along k, both copied */
    if (tt_sketch_gpu_tiled(&w->dag, &sp, TT_GPU_TILE_LARGE_REGISTERS, &st, &err))
        fail_msg("large tile, registers: %s", err.msg);
    check_state(w, st, 8, "large tile with A's rows in registers", &stats);
    assert_int_equal(stats.shared_bytes, 2 * (128 * 20 + 16 * 128) * 4);
    assert_int_equal(stats.vector_loops, 10);
    tt_state_free(st);
    tt_workload_free(w);
    assert_int_equal(tt_workload_parse("te:C[i,j] += A[i,k] * W[j,k]; A:float32[1024,64]; "
                                       "W:float32[1024,64]",
                                       &w, &err),
                     TT_OK);
    if (tt_sketch_gpu_tiled(&w->dag, &sp, TT_GPU_TILE_LARGE_REGISTERS, &st, &err))
        fail_msg("dense layer, registers: %s", err.msg);
    int copies = 0;
    for (size_t g = 0; g < st->stages.len; g++)
        copies += !strcmp(st->stages.data[g].scope, "local") && !tt_access_has_reduce(st, (int)g);
    assert_int_equal(copies, 2);
    check_state(w, st, 9, "dense layer with both inputs in registers", &stats);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Axes of a prime length (ViT's 197 tokens) take tiles that do not divide them: the spatial
 * ones a last tile moved back to end with the axis (computing a few elements twice, no guard),
 * the reduction rounds of 16 whose last is guarded once a round of a thread's products.  They
 * compute the definition on the device; before, 197 gave one row a work-group or the naive
 * binding. */
static void prime_extents_take_padded_tiles(void **state)
{
    need_device();
    static const char *const wls[] = {"matmul:M=67,N=128,K=67", "batch_matmul:B=2,M=67,N=67,K=32",
                                      "batch_matmul:B=1,M=37,N=64,K=37"};
    for (size_t k = 0; k < sizeof(wls) / sizeof(wls[0]); k++) {
        tt_workload *w;
        tt_state *st = default_tiling_of(wls[k], &w);
        int padded = 0;
        for (size_t i = 0; i < st->steps.len; i++) {
            const tt_step *s = &st->steps.data[i];
            int64_t tile = 1;
            for (int l = 0; s->kind == TT_STEP_SPLIT && l < s->nlen; l++)
                tile *= s->lengths[l];
            if (s->kind == TT_STEP_SPLIT && (s->extent == 67 || s->extent == 37) && tile > 1 &&
                s->extent % tile)
                padded++;
        }
        assert_true(padded >= 2);
        tt_opencl_stats stats;
        check_state(w, st, 10 + k, wls[k], &stats);
        printf("opencl: %s tiled with %d padded axes: %lld groups of %lld work-items\n", wls[k],
               padded, (long long)(stats.grid[0] * stats.grid[1] * stats.grid[2]),
               (long long)(stats.block[0] * stats.block[1] * stats.block[2]));
        tt_state_free(st);
        tt_workload_free(w);
    }
}

/* Limits are checked before anything reaches the device: too many threads per block, too much
 * local memory, a vthread too long, each named in the error. */
static void limits_refused_before_the_device(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=64,N=64,K=64", &w, &err), TT_OK);
    tt_state *st = replay(w, shared_matmul);
    tt_program *prog;
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    char *text = NULL;
    size_t len;
    tt_gpu_limits lim;
    tt_opencl_stats broke;
    tt_gpu_limits_default(&lim);
    lim.max_threads = 32;
    assert_int_equal(tt_codegen_opencl(prog, "kernel", &lim, &text, &len, &broke, &err),
                     TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "64 work-items is more than the 32 allowed"));
    assert_int_equal(broke.broke, TT_GPU_LIMIT_THREADS);
    tt_gpu_limits_default(&lim);
    lim.max_shared_bytes = 512;
    assert_int_equal(tt_codegen_opencl(prog, "kernel", &lim, &text, &len, &broke, &err),
                     TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "shared (local) memory of 1024 bytes"));
    assert_int_equal(broke.broke, TT_GPU_LIMIT_SHARED);
    tt_gpu_limits_default(&lim);
    lim.max_block[0] = 16;
    assert_int_equal(tt_codegen_opencl(prog, "kernel", &lim, &text, &len, &broke, &err),
                     TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "threadIdx.x has extent 64"));
    assert_int_equal(broke.broke, TT_GPU_LIMIT_THREADS);
    assert_null(text);
    /* Private arrays (the default tiling's register tile): `broke` says which limit, where the
     * message alone would leave a caller guessing which option to name. */
    tt_workload *dw;
    tt_state *dst = default_tiling_of("matmul:M=64,N=64,K=64", &dw);
    tt_program *dprog;
    assert_int_equal(tt_lower(dst, &dprog, &err), TT_OK);
    tt_gpu_limits_default(&lim);
    lim.max_private_bytes = 2; /* its 64x64 default keeps one float a work-item */
    assert_int_equal(tt_codegen_opencl(dprog, "kernel", &lim, &text, &len, &broke, &err),
                     TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "private buffers of one work-item"));
    assert_int_equal(broke.broke, TT_GPU_LIMIT_PRIVATE);
    assert_int_equal(tt_codegen_opencl(dprog, "kernel", NULL, &text, &len, &broke, &err), TT_OK);
    assert_int_equal(broke.broke, TT_GPU_LIMIT_NONE);
    free(text);
    text = NULL;
    tt_program_free(dprog);
    tt_state_free(dst);
    tt_workload_free(dw);
    assert_null(text);
    tt_program_free(prog);
    tt_state_free(st);
    /* A reduce axis bound to threads (by hand): a work-group reduction, not a race. */
    st = replay(w, "[[\"SP\", 2, 2, 64, [16], 1], [\"AN\", 2, 3, 6], [\"AN\", 2, 0, 5]]");
    tt_opencl_stats stats;
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    assert_int_equal(tt_codegen_opencl(prog, "kernel", NULL, &text, &len, &stats, &err), TT_OK);
    assert_int_equal(stats.cross_thread_reductions, 1);
    assert_non_null(strstr(text, "red_0["));
    free(text);
    text = NULL;
    tt_program_free(prog);
    if (ndevs > 0)
        check_state(w, st, 4, "hand-bound reduction", &stats);
    tt_state_free(st);
    /* Threads only in the cooperative fills: every work-item would repeat the update of C. */
    char steps[2048];
    snprintf(steps, sizeof(steps), "%s", shared_matmul);
    char *an = strstr(steps, " [\"AN\", 4, 1, 6],");
    assert_non_null(an);
    memmove(an, an + strlen(" [\"AN\", 4, 1, 6],"), strlen(an + strlen(" [\"AN\", 4, 1, 6],")) + 1);
    st = replay(w, steps);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    assert_int_equal(tt_codegen_opencl(prog, "kernel", NULL, &text, &len, NULL, &err),
                     TT_ERR_ILLEGAL_STEP);
    if (!strstr(err.msg, "the update of 'C' is repeated by the 16 work-items of threadIdx.x"))
        fail_msg("%s", err.msg);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Writes an artifact by hand (for errors the generator never makes) and measures it. */
static tt_measure_result run_text(const char *text, double timeout_s)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/hand.cl", dir);
    write_text(path, text);
    static float a[64], c[64];
    for (int i = 0; i < 64; i++)
        a[i] = c[i] = (float)i;
    tt_measure_buffer bufs[2] = {{TT_ELEM_F32, 64, a, NULL, false, false},
                                 {TT_ELEM_F32, 64, NULL, c, false, false}};
    tt_measure_options mo = {.repeat = 1, .timeout_s = timeout_s, .opencl_device = device_spec()};
    tt_measure_result r;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_measure_run(path, "kernel", bufs, 2, 1, &mo, &r, &err), TT_OK);
    return r;
}

#define HEAD(grid, block)                                                                          \
    TT_CL_ARTIFACT_MAGIC "{\"kernels\": [{\"name\": \"k\", \"grid\": [" grid                       \
                         "], \"block\": [" block                                                   \
                         "]}], \"params\": [{\"dtype\": \"float32\", \"count\": 64}, {\"dtype\": " \
                         "\"float32\", \"count\": 64}]}\n*/\n"

/* The hang spins on volatile reads of global memory: NVIDIA's compiler deletes a loop on a
 * private volatile (`volatile int x = 1; while (x) {}`), and the kernel then returns. */
static const char hang_kernel[] = HEAD(
    "1, 1, 1",
    "1, 1, 1") "__kernel void k(__global float *a, __global float *c) { __global volatile int *v = "
               "(__global volatile int *)a; uint n = 0; while (v[0] == v[0]) n++; c[0] = n; }\n";

static const char copy_kernel[] = HEAD(
    "4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global float *c) {\n"
                           "  int i = get_group_id(0) * 16 + get_local_id(0); c[i] = a[i];\n}\n";

/* The tuner's build before the measurements (tt_measure_options.build_only): the driver builds
 * the artifact and nothing runs, so no buffers are needed; a build error is COMPILE_DEVICE with
 * the log, as when measuring.  A second build of the same source is the driver's cache. */
static void builds_alone_before_the_measurement(void **state)
{
    need_device();
    char path[256];
    snprintf(path, sizeof(path), "%s/build_only.cl", dir);
    tt_measure_options mo = {.timeout_s = 60, .opencl_device = device_spec(), .build_only = true};
    tt_measure_result r;
    tt_errbuf err = {{0}};
    write_text(path, copy_kernel);
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.ncosts, 0);
    write_text(path, HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global "
                                                 "float *c) { c[0] = undeclared_name; }\n");
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "undeclared_name"));
    /* a kernel the artifact names but the source lacks */
    write_text(path, HEAD("4, 1, 1", "16, 1, 1") "__kernel void other(__global float *a) { }\n");
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "kernel k"));
}

/* A thread that keeps a builder (tt_measure_keep_builder: the tuner's compile threads) builds
 * one artifact after another in the same process and context, a build error included; released,
 * its builds take a fresh process each again. */
static void builders_keep_a_context_for_their_thread(void **state)
{
    need_device();
    char path[256];
    snprintf(path, sizeof(path), "%s/builder.cl", dir);
    tt_measure_options mo = {.timeout_s = 60, .opencl_device = device_spec(), .build_only = true};
    tt_measure_result r;
    tt_errbuf err = {{0}};
    tt_measure_keep_builder();
    write_text(path, copy_kernel);
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 0);
    int first = r.context_jobs;
    assert_true(first >= 1);
    write_text(path, HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global "
                                                 "float *c) { c[0] = not_a_name; }\n");
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "not_a_name"));
    assert_int_equal(r.context_jobs, first + 1);
    write_text(path, HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global "
                                                 "float *c) { int i = get_global_id(0); c[i] = "
                                                 "2.0f * a[i]; }\n");
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.context_jobs, first + 2);
    tt_measure_release_builder();
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.context_jobs, 1);
}

/* What the device does wrong is a result with TVM's error code, and the next candidate runs in a
 * fresh process: a build error (COMPILE_DEVICE, with the driver's log), a launch the device
 * refuses (INSTANTIATION), a wrong answer, a crash (RUNTIME_DEVICE), a hang (RUN_TIMEOUT). */
static void device_errors_are_results(void **state)
{
    need_device();
    tt_measure_result r = run_text(copy_kernel, 60);
    assert_int_equal(r.error_no, 0);
    r = run_text(HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global float "
                                             "*c) { c[0] = undeclared_name; }\n",
                 60);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "OpenCL build failed"));
    assert_non_null(strstr(r.error_text, "undeclared_name"));
    r = run_text(TT_CL_ARTIFACT_MAGIC "{\"kernels\": []}\n*/\n", 60);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "\"kernels\" must list"));
    /* More work-items per group than any device takes. */
    r = run_text(HEAD("1, 1, 1", "65536, 1, 1") "__kernel void k(__global float *a, __global "
                                                "float *c) { }\n",
                 60);
    assert_int_equal(r.error_no, 1);
    assert_non_null(strstr(r.error_text, "CL_INVALID_WORK"));
    r = run_text(HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global float "
                                             "*c) { int i = get_global_id(0); c[i] = a[i] + 1; }\n",
                 60);
    assert_int_equal(r.error_no, 5);
    assert_non_null(strstr(r.error_text, "got 1, expected 0"));
    r = run_text(hang_kernel, 4);
    assert_int_equal(r.error_no, 7);
    /* After all that, a good kernel measures normally. */
    r = run_text(copy_kernel, 60);
    assert_int_equal(r.error_no, 0);
    assert_true(r.ncosts == 1 && r.costs[0] > 0);
}

/* Candidates measured one after another share the worker's context (rpc/measure_cl_worker.c):
 * failures that leave the device sound keep it, a hang kills it and the next candidate starts a
 * fresh one; TT_CL_WORKER=0 measures each in a process of its own. */
static void one_context_serves_many_candidates(void **state)
{
    need_device();
    tt_measure_result a = run_text(copy_kernel, 60), b = run_text(copy_kernel, 60);
    assert_int_equal(a.error_no, 0);
    assert_int_equal(b.error_no, 0);
    assert_true(a.context_jobs >= 1);
    assert_int_equal(b.context_jobs, a.context_jobs + 1);
    tt_measure_result r =
        run_text(HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global float "
                                             "*c) { int i = get_global_id(0); c[i] = -a[i]; }\n",
                 60);
    assert_int_equal(r.error_no, 5);
    assert_int_equal(r.context_jobs, b.context_jobs + 1);
    r = run_text(HEAD("4, 1, 1", "16, 1, 1") "__kernel void k(__global float *a, __global float "
                                             "*c) { c[0] = not_declared; }\n",
                 60);
    assert_int_equal(r.error_no, 3);
    assert_non_null(strstr(r.error_text, "not_declared"));
    assert_int_equal(r.context_jobs, b.context_jobs + 2);
    r = run_text(hang_kernel, 4);
    assert_int_equal(r.error_no, 7);
    r = run_text(copy_kernel, 60);
    assert_int_equal(r.error_no, 0);
    assert_int_equal(r.context_jobs, 1);
    setenv("TT_CL_WORKER", "0", 1);
    a = run_text(copy_kernel, 60);
    b = run_text(copy_kernel, 60);
    unsetenv("TT_CL_WORKER");
    assert_int_equal(a.error_no, 0);
    assert_int_equal(b.error_no, 0);
    assert_int_equal(a.context_jobs, 1);
    assert_int_equal(b.context_jobs, 1);
}

/* The path of the binary cache's entry whose source contains `marker` ("" when none). */
static void cache_entry_with(const char *marker, char *out, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "grep -l -F '%s' %s/cl-cache/*.bin 2>/dev/null", marker, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    out[0] = 0;
    if (fgets(out, (int)n, p))
        out[strcspn(out, "\n")] = 0;
    pclose(p);
}

/* The tuner's parallel builders store the driver's binary; the measurement loads it instead of
 * building again.  An entry the driver no longer takes is built again from source and replaced. */
static void builds_are_cached_by_content(void **state)
{
    need_device();
    char path[256], marker[64], text[1024], entry[512];
    snprintf(path, sizeof(path), "%s/hand.cl", dir);
    snprintf(marker, sizeof(marker), "cache test %d %ld", (int)getpid(), (long)time(NULL));
    snprintf(text, sizeof(text), "%s/* %s */\n", copy_kernel, marker);
    write_text(path, text);
    tt_measure_options mo = {.timeout_s = 60, .opencl_device = device_spec(), .build_only = true};
    tt_measure_result r;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_measure_run(path, "kernel", NULL, 0, 0, &mo, &r, &err), TT_OK);
    assert_int_equal(r.error_no, 0);
    assert_false(r.build_cached);
    cache_entry_with(marker, entry, sizeof(entry));
    assert_true(entry[0] != 0);
    r = run_text(text, 60);
    assert_int_equal(r.error_no, 0);
    assert_true(r.build_cached);
    /* the binary's first bytes (after the 24-byte header and the source) overwritten: built
     * from source, the entry replaced */
    FILE *f = fopen(entry, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 24 + (long)strlen(text), SEEK_SET), 0);
    assert_int_equal(fwrite("garbage garbage!", 1, 16, f), 16);
    fclose(f);
    r = run_text(text, 60);
    assert_int_equal(r.error_no, 0);
    assert_false(r.build_cached);
    r = run_text(text, 60);
    assert_int_equal(r.error_no, 0);
    assert_true(r.build_cached);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_memory_matmul_matches),
        cmocka_unit_test(gpu_sketches_of_every_operator_match),
        cmocka_unit_test(gpu_template_configs_match),
        cmocka_unit_test(template_search_offers_only_kernels_within_the_device),
        cmocka_unit_test(target_thread_limit_bounds_the_search),
        cmocka_unit_test(gpu_search_starts_from_the_fixed_tilings),
        cmocka_unit_test(measurements_overlap_the_builds),
        cmocka_unit_test(cpu_schedules_run_as_one_work_item),
        cmocka_unit_test(cross_thread_reductions_match),
        cmocka_unit_test(vectorised_loops_use_vector_types),
        cmocka_unit_test(vectorised_fetches_load_whole_vectors),
        cmocka_unit_test(double_buffered_tiles_match),
        cmocka_unit_test(prime_extents_take_padded_tiles),
        cmocka_unit_test(limits_refused_before_the_device),
        cmocka_unit_test(device_errors_are_results),
        cmocka_unit_test(builds_alone_before_the_measurement),
        cmocka_unit_test(builders_keep_a_context_for_their_thread),
        cmocka_unit_test(one_context_serves_many_candidates),
        cmocka_unit_test(builds_are_cached_by_content),
        cmocka_unit_test(unregistered_gpu_drivers_are_named),
        cmocka_unit_test(device_warps_travel_with_the_device),
    };
    /* TT_TEST_FILTER=NAME runs the tests whose names match (cmocka's wildcards) */
    if (getenv("TT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("TT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
