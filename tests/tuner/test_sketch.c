/* Sketches: counts match TVM's tests (search.md C4, num_cores = 4), factorisation schemes, and
 * every sampled and mutated candidate lowers and computes what the definition says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "tuner/access.h"
#include "tuner/evolution.h"
#include "tuner/sketch.h"
#include "tuner/sketch_int.h"

static tt_workload *parse(const char *text)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(text, &w, &err))
        fail_msg("%s: %s", text, err.msg);
    return w;
}

/* `st` lowers and computes w's definition in the interpreter; fails the test otherwise. */
static void check(const tt_workload *w, const tt_state *st, const char *what);

/* The GPU sketch space of `w` (`threads` work-items a group, warps of 32); fails the test
 * without one. */
static void gpu_space(const tt_workload *w, int threads, tt_sketch_space *sp)
{
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, threads, 32);
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(sp, &w->dag, &p, &err))
        fail_msg("%s: %s", w->key, err.msg);
}

/* A device of 1024 work-items a group and `shared` bytes of local memory (0: unlimited). */
static void gpu_device(tt_gpu_limits *lim, int64_t shared)
{
    tt_gpu_limits_default(lim);
    lim->max_threads = 1024;
    lim->max_shared_bytes = shared;
}

static int sketch_count_for(const char *text, bool gpu)
{
    tt_workload *w = parse(text);
    tt_sketch_params p;
    if (gpu)
        tt_sketch_params_gpu(&p, 1024, 32);
    else
        tt_sketch_params_cpu(&p, 4);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s: %s", text, err.msg);
    int n = sp.nsketches;
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
    return n;
}

static int sketch_count(const char *text)
{
    return sketch_count_for(text, false);
}

static void counts_match_tvm(void **state)
{
    (void)state;
    /* plain tiling; cache write + fusion at level 1; at level 2 */
    assert_int_equal(sketch_count("matmul:M=512,N=512,K=512"), 3);
    /* two rfactor sketches + the three above */
    assert_int_equal(sketch_count("matmul:M=8,N=8,K=512"), 5);
    assert_int_equal(sketch_count("te:C[i,j] += A[i,k] * B[k,j]; E[i,j] += C[i,k] * D[k,j]; "
                                  "A:float32[512,512]; B:float32[512,512]; D:float32[512,512]"),
                     9);
    assert_int_equal(sketch_count("conv2d_bn_relu:N=1,H=56,W=56,CI=512,CO=512,K=3,S=1,P=1"), 3);
    /* max pool 2x2 with padding: one sketch */
    assert_int_equal(sketch_count("te:pad[n,c,h,w] = select(h >= 1 && h < 57 && w >= 1 && w < 57, "
                                  "data[n,c,h - 1,w - 1], -1000000.0); pad:float32[1,512,58,58]; "
                                  "pool[n,c,h,w] max= pad[n,c,h + rh,w + rw]; "
                                  "pool:float32[1,512,57,57]; rh:2; rw:2; "
                                  "data:float32[1,512,56,56]"),
                     1);
    /* min reduction: two rfactor sketches + the plain one */
    assert_int_equal(sketch_count("te:B[i] min= A[i,k]; A:float32[10,1024]"), 3);
    /* softmax: 3 x 3 (rfactor choices of the two reductions) */
    assert_int_equal(sketch_count("softmax:M=1,N=1024"), 9);
}

static void gpu_counts_match_tvm(void **state)
{
    (void)state;
    assert_int_equal(sketch_count_for("matmul:M=512,N=512,K=512", true), 1);
    /* cross-thread reduction + cache write */
    assert_int_equal(sketch_count_for("matmul:M=8,N=8,K=1024", true), 2);
    assert_int_equal(
        sketch_count_for("conv2d_bn_relu:N=1,H=56,W=56,CI=512,CO=512,K=3,S=1,P=1", true), 1);
    assert_int_equal(sketch_count_for("te:B[i] min= A[i,k]; A:float32[10,1024]", true), 2);
    assert_int_equal(sketch_count_for("softmax:M=1,N=1024", true), 4);
    /* The matmul sketch reads both inputs through shared memory inside the reduce tile; a sample
     * binds the output's tiles to blocks, virtual threads and threads, and the shared stages are
     * fetched by the same threads. */
    tt_workload *w = parse("matmul:M=512,N=512,K=512");
    tt_sketch_space sp;
    gpu_space(w, 1024, &sp);
    tt_errbuf err = {{0}};
    const tt_state *st = sp.sketches[0].state;
    int shared = 0;
    for (size_t i = 0; i < st->stages.len; i++)
        shared += !strcmp(st->stages.data[i].scope, "shared");
    assert_int_equal(shared, 2);
    tt_rng rng;
    tt_rng_seed(&rng, 1);
    tt_state *out = NULL;
    for (int tries = 0; tries < 100 && !out; tries++)
        if (tt_sketch_sample(&sp, 0, &rng, &out, &err))
            out = NULL;
    assert_non_null(out);
    int bound[TT_ANN_COUNT] = {0};
    for (size_t i = 0; i < out->stages.len; i++) {
        const tt_stage *sg = &out->stages.data[i];
        for (int k = 0; k < sg->niters; k++)
            bound[sg->iters[k].ann]++;
        if (!strcmp(sg->scope, "shared"))
            assert_int_equal(sg->iters[1].ann, TT_ANN_THREAD_X);
    }
    assert_int_equal(bound[TT_ANN_BLOCK_X], 1);
    assert_int_equal(bound[TT_ANN_VTHREAD], 1);
    assert_int_equal(bound[TT_ANN_THREAD_X], 3); /* the output and the two cooperative fetches */
    assert_int_equal(bound[TT_ANN_PARALLEL], 0);
    assert_int_equal(tt_sketch_check_gpu(&sp.params, out, &err), TT_OK);
    tt_state_free(out);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

static void factor_schemes(void **state)
{
    (void)state;
    int64_t s[64 * 2];
    /* 8 into two lengths: (1,1) (1,2) (1,4) (1,8) (2,1) (2,2) (2,4) (4,1) (4,2) (8,1) */
    assert_int_equal(tt_factor_schemes(8, 2, 64, s, 64), 10);
    assert_int_equal(s[0], 1);
    assert_int_equal(s[1], 1);
    assert_int_equal(s[2 * 9], 8);
    assert_int_equal(s[2 * 9 + 1], 1);
    /* the innermost limit applies to the last length only */
    assert_int_equal(tt_factor_schemes(128, 1, 64, s, 64), 7);
    assert_int_equal(tt_factor_schemes(7, 3, 64, s, 64), 4);
    /* the divisors, found up to the square root, are those counting to n finds, in its order,
     * the first `max` of them */
    static const int64_t ns[] = {1, 2, 7, 12, 36, 197, 1024, 3136, 50176, 720720, 735134400};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        for (int max = 1; max <= 256; max += max < 8 ? 1 : 37) {
            int64_t d[256], want[256];
            int k = 0;
            for (int64_t x = 1; x <= ns[i] && k < max; x++)
                if (ns[i] % x == 0)
                    want[k++] = x;
            int got = tt__sketch_divisors(ns[i], d, max);
            if (got != k)
                fail_msg("%lld, max %d: %d divisors, want %d", (long long)ns[i], max, got, k);
            for (int j = 0; j < k; j++)
                if (d[j] != want[j])
                    fail_msg("%lld, max %d: divisor %d is %lld, want %lld", (long long)ns[i], max,
                             j, (long long)d[j], (long long)want[j]);
        }
}

/* The undefined tile sizes of a sketch are its multi-level tiling splits. */
/* The steps of every sketch of `text`, as their kinds and stages ("CHW3 SP4 ... | ..."). */
static void sketch_signature(const char *text, char *out, size_t n)
{
    tt_workload *w = parse(text);
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 4);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s: %s", text, err.msg);
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < sp.nsketches && k < n; i++) {
        const tt_state *st = sp.sketches[i].state;
        for (size_t j = 0; j < st->steps.len && k < n; j++)
            k += (size_t)snprintf(out + k, n - k, "%d:%d ", (int)st->steps.data[j].kind,
                                  st->steps.data[j].stage);
        if (k < n)
            k += (size_t)snprintf(out + k, n - k, "| ");
    }
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* A network kernel reads an extent-1 axis at index 0 (te_write's broadcast form): the convolution
 * still fuses into its elementwise epilogue (bias, ReLU) exactly as for the same program written
 * with the axis variable; it was computed apart, into a buffer allocated per call, and the
 * epilogue ran on one core. */
static void constant_index_on_unit_axis_still_fuses(void **state)
{
    (void)state;
    static const char *const forms[2] = {"t0[0,i1,i2,i3]", "t0[i0,i1,i2,i3]"};
    char sig[2][4096];
    for (int k = 0; k < 2; k++) {
        char text[1024];
        snprintf(text, sizeof(text),
                 "te:t2[i0,i1,i2,i3] += x0[0,i1 + r1,i2 + r2,r0] * w1[r1,r2,r0,i3]; "
                 "t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = max(%s, 0); "
                 "t2:float32[1,8,8,16]; x0:float32[1,10,10,8]; w1:const float32[3,3,8,16]; "
                 "t0:float32[1,8,8,16]; w2:const float32[16]; out:float32[1,8,8,16]; r0:8; "
                 "r1:3; r2:3",
                 forms[k]);
        sketch_signature(text, sig[k], sizeof(sig[k]));
    }
    assert_string_equal(sig[0], sig[1]);
    /* and the fused form has a compute-at (the conv's tile inside the epilogue's) */
    char ca[16];
    snprintf(ca, sizeof(ca), "%d:", (int)TT_STEP_COMPUTE_AT);
    assert_non_null(strstr(sig[0], ca));
}

static void sketch_structure(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=64,N=64,K=64");
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 4);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_sketch_space_init(&sp, &w->dag, &p, &err), TT_OK);
    int with_cache = 0;
    for (int k = 0; k < sp.nsketches; k++) {
        const tt_state *st = sp.sketches[k].state;
        int open = 0;
        for (size_t i = 0; i < st->steps.len; i++) {
            if (sp.sketches[k].undefined[i]) {
                assert_int_equal(st->steps.data[i].kind, TT_STEP_SPLIT);
                open++;
            }
            with_cache += st->steps.data[i].kind == TT_STEP_CACHE_WRITE;
        }
        /* i and j into 4 levels, k into 2 */
        assert_int_equal(open, 3);
    }
    assert_int_equal(with_cache, 2);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

static const char *const verified[] = {
    "matmul:M=24,N=16,K=12",
    "matmul:M=4,N=4,K=96",
    "batch_matmul:B=2,M=8,N=8,K=4",
    "conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=8,K=3,S=1,P=1",
    "conv2d_bn_relu:N=1,H=6,W=6,CI=3,CO=4,K=3,S=2,P=1",
    "depthwise_conv2d_nhwc:N=1,H=8,W=8,C=4,K=3,S=1,P=1",
    "conv2d_transpose_nhwc:N=1,H=4,W=4,CI=4,CO=3,K=4,S=2,P=1",
    "norm_bmn:B=2,M=8,N=8",
    "softmax:M=4,N=64",
    "transpose_batch_matmul_softmax:B=1,SEQ=8,HEADS=2,DIM=4",
    "te:C[i,j] += A[i,k] * B[k,j]; E[i,j] += C[i,k] * D[k,j]; A:float32[12,8]; "
    "B:float32[8,10]; D:float32[10,6]",
    "relu:M=16,N=16",
};

static bool never_seen(void *ctx, const char *config)
{
    (void)ctx;
    (void)config;
    return false;
}

/* The lowered program of a config (step JSON) of `w`. */
static tt_program *lower_config(const tt_workload *w, const char *json)
{
    tt_step *steps;
    size_t ns;
    tt_state *st;
    tt_program *prog;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_steps_from_json(json, &steps, &ns, &err), TT_OK);
    assert_int_equal(tt_state_replay(&w->dag, steps, ns, &st, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    tt_state_free(st);
    free(steps);
    return prog;
}

/* How many of a search round's configs have an OpenCL kernel beyond `lim`. */
static int beyond_limits(const tt_workload *w, char **configs, int n, const tt_gpu_limits *lim)
{
    int over = 0;
    for (int i = 0; i < n; i++) {
        tt_program *prog = lower_config(w, configs[i]);
        tt_status s = tt_codegen_opencl_check(prog, lim, NULL);
        assert_true(s == TT_OK || s == TT_ERR_LIMIT);
        over += s != TT_OK;
        tt_program_free(prog);
    }
    return over;
}

/* A GPU search round offers only programs whose kernels fit the device, as Ansor's feature
 * extraction runs VerifyGPUCode: on an H100 (48 KiB of local memory) 46 of 64 matmul 1024
 * candidates were refused by the code generator before this check.  Here a device with 8 KiB;
 * its population, samples and children, holds only programs that fit. */
static void gpu_search_offers_only_kernels_within_the_device(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=1024,N=1024,K=1024");
    tt_sketch_space sp;
    gpu_space(w, 1024, &sp);
    tt_errbuf err = {{0}};
    tt_gpu_limits lim;
    gpu_device(&lim, 8192);
    tt_evo_params ep;
    tt_evo_params_default(&ep);
    ep.population = 128;
    tt_evo_history h;
    memset(&h, 0, sizeof(h));
    int over[2];
    tt_evo_stats stats[2];
    for (int checked = 0; checked < 2; checked++) {
        ep.gpu_limits = checked ? &lim : NULL;
        ep.stats = &stats[checked];
        tt_rng rng;
        tt_rng_seed(&rng, 7);
        char *out[32];
        int n = tt_evo_search_round(&sp, &ep, &h, NULL, 0, never_seen, NULL, &rng, out, 32, NULL,
                                    NULL, &err);
        assert_int_equal(n, 32);
        over[checked] = beyond_limits(w, out, n, &lim);
        for (int i = 0; i < n; i++)
            free(out[i]);
    }
    printf("sketch: %d of 32 configs beyond 8 KiB of local memory unchecked, %d checked; the "
           "checked population: %d programs within the limits from %d draws, %d of %d children "
           "kept\n",
           over[0], over[1], stats[1].initial, stats[1].drawn, stats[1].children_kept,
           stats[1].children_tried);
    assert_true(over[0] > 8);     /* the limit matters for this workload... */
    assert_int_equal(over[1], 0); /* ...and the checked search never offers such a kernel */
    /* the population holds only programs that fit, drawn for longer (64 draws a place at most;
     * under 1 in 100 fits 8 KiB): before, the first 512 draws' samples, nearly all beyond */
    assert_true(stats[1].initial >= 16 && stats[1].drawn > stats[0].drawn);
    assert_true(stats[1].children_kept > 0 && stats[1].children_kept <= stats[1].children_tried);
    /* 48 KiB, a common GPU's local memory: about 1 draw in 30 fits, and a population of 64 is
     * filled with them */
    gpu_device(&lim, 48 * 1024);
    ep.gpu_limits = &lim;
    ep.population = 64;
    tt_rng rng;
    tt_rng_seed(&rng, 9);
    char *out[16];
    int n = tt_evo_search_round(&sp, &ep, &h, NULL, 0, never_seen, NULL, &rng, out, 16, NULL, NULL,
                                &err);
    assert_int_equal(n, 16);
    assert_int_equal(beyond_limits(w, out, n, &lim), 0);
    for (int i = 0; i < n; i++)
        free(out[i]);
    printf("sketch: 48 KiB: %d of %d places filled from %d draws\n", stats[1].initial,
           ep.population, stats[1].drawn);
    assert_int_equal(stats[1].initial, ep.population);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* tt_lower_buffers, by which the GPU search rejects a tile beyond local memory before lowering
 * it, gives tt_lower's buffers (vthread copies aside) and never more local memory than the
 * kernel declares: over random GPU samples of a matmul and a convolution, padded and double
 * buffered ones among them. */
static void gpu_buffers_bound_local_memory(void **state)
{
    (void)state;
    static const char *const ws[] = {"matmul:M=512,N=512,K=512",
                                     "conv2d_nchw:N=1,H=14,W=14,CI=64,CO=64,K=3,S=1,P=1"};
    int judged = 0, exact = 0, over = 0;
    for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
        tt_workload *w = parse(ws[i]);
        tt_sketch_space sp;
        gpu_space(w, 1024, &sp);
        tt_errbuf err = {{0}};
        tt_gpu_limits lim;
        gpu_device(&lim, 0); /* emitted whatever they take, to compare */
        tt_rng rng;
        tt_rng_seed(&rng, 11);
        for (int k = 0, mine = 0; k < 1000 && mine < 150; k++) {
            tt_state *st;
            if (tt_sketch_sample(&sp, -1, &rng, &st, NULL))
                continue;
            mine++;
            tt_program *lb, *full;
            assert_int_equal(tt_lower_buffers(st, &lb, &err), TT_OK);
            assert_int_equal(tt_lower(st, &full, &err), TT_OK);
            assert_int_equal(lb->root, 0);
            assert_int_equal(lb->nparams, full->nparams);
            assert_int_equal(lb->bufs.len, full->bufs.len);
            for (size_t b = 0; b < lb->bufs.len; b++) {
                const tt_buffer *x = &lb->bufs.data[b], *y = &full->bufs.data[b];
                assert_string_equal(x->name, y->name);
                assert_string_equal(x->scope, y->scope);
                assert_true(x->size <= y->size);
            }
            char *text = NULL;
            tt_opencl_stats stats;
            if (!tt_codegen_opencl(full, "k", &lim, &text, NULL, &stats, NULL)) {
                int64_t bound = tt_program_scope_bytes(lb, "shared");
                assert_true(bound <= stats.shared_bytes);
                assert_true(bound <= tt_program_scope_bytes(full, "shared"));
                judged++;
                exact += bound == stats.shared_bytes;
                over += bound > 48 * 1024;
            }
            free(text);
            tt_program_free(lb);
            tt_program_free(full);
            tt_state_free(st);
        }
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
    printf("sketch: %d GPU samples; the buffers' bound is their kernel's local memory in %d, and "
           "tells %d beyond 48 KiB\n",
           judged, exact, over);
    assert_true(judged >= 100);
    assert_true(exact * 10 >= judged * 9); /* a bound that tells: nearly always exact */
    assert_true(over > 0);
}

/* GPU samples bind within the limits: a multi-level tiling's spatial splits are drawn again,
 * together, until their virtual threads (8 here) and work-items (1024, and a warp at least) fit,
 * where Ansor's independent draws bound 1 sample in 5 of matmul 1024.  With the device's local
 * memory given, a sample beyond it is refused with the bytes it takes, before its padding and
 * register copies; every sample returned is within it. */
static void gpu_samples_bind_within_the_limits(void **state)
{
    (void)state;
    static const char *const ws[] = {"matmul:M=1024,N=1024,K=1024",
                                     "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1",
                                     "batch_matmul:B=12,M=197,N=197,K=64"};
    for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
        tt_workload *w = parse(ws[i]);
        for (int device = 0; device < 2; device++) {
            tt_sketch_params p;
            tt_sketch_params_gpu(&p, 1024, 32);
            p.device_shared_bytes = device ? 48 * 1024 : 0;
            tt_sketch_space sp;
            tt_errbuf err = {{0}};
            if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
                fail_msg("%s: %s", ws[i], err.msg);
            tt_rng rng;
            tt_rng_seed(&rng, 5);
            int ok = 0, beyond = 0;
            for (int k = 0; k < 150; k++) {
                tt_state *st;
                memset(&err, 0, sizeof(err));
                if (tt_sketch_sample(&sp, -1, &rng, &st, &err)) {
                    /* only local memory refuses a sample: never its binding */
                    if (!device || !strstr(err.msg, "more than the device's 49152"))
                        fail_msg("%s: sample %d refused: %s", ws[i], k, err.msg);
                    beyond++;
                    continue;
                }
                assert_int_equal(tt_sketch_check_gpu(&p, st, &err), TT_OK);
                if (device) {
                    int64_t bytes = tt_lower_scope_bytes(st, "shared");
                    assert_true(bytes >= 0 && bytes <= 48 * 1024);
                }
                ok++;
                tt_state_free(st);
            }
            printf("sketch: %s, %s: %d of 150 GPU samples returned, %d beyond local memory\n",
                   ws[i], device ? "48 KiB" : "unlimited", ok, beyond);
            assert_int_equal(ok + beyond, 150);
            assert_true(ok > 0);
            if (device && i < 2)
                assert_true(beyond > 0); /* the check matters for these */
            tt_sketch_space_free(&sp);
        }
        tt_workload_free(w);
    }
}

/* The large tile with registers (TT_GPU_TILE_LARGE_REGISTERS): each input read along the
 * innermost reduction gets a register copy at the reduction's middle tile, 4 deep, filled by
 * vectors along k; inputs read otherwise do not, and a workload with none is not offered it.
 * (test_opencl runs them on the device.) */
static void gpu_registers_copy_inputs_read_along_the_reduction(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        int copies; /* -1: not offered */
    } cases[] = {
        {"matmul:M=1024,N=1024,K=256", 1}, /* A[i, k]; B[k, j] is the register tile's vectors */
        {"te:C[i,j] += A[i,k] * W[j,k]; A:float32[1024,64]; W:float32[1024,64]", 2},
        {"batch_matmul:B=16,M=512,N=512,K=64", 1},
        {"te:C[i,j] += A[k,i] * B[k,j]; A:float32[64,1024]; B:float32[64,1024]", -1},
    };
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, 256, 32);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_workload *w = parse(cases[i].w);
        tt_state *st;
        tt_errbuf err = {{0}};
        tt_status s = tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE_REGISTERS, &st, &err);
        if (cases[i].copies < 0) {
            assert_int_equal(s, TT_ERR_NOT_FOUND);
            assert_non_null(strstr(err.msg, "along the innermost reduction"));
            tt_workload_free(w);
            continue;
        }
        if (s)
            fail_msg("%s: %s", cases[i].w, err.msg);
        int copies = 0;
        for (size_t g = 0; g < st->stages.len; g++) {
            const tt_stage *sg = &st->stages.data[g];
            if (strcmp(sg->scope, "local") || tt_access_has_reduce(st, (int)g))
                continue;
            copies++;
            /* at the consumer's k.1, 4 deep along k, the innermost axis a vector */
            int target, at;
            tt_access_attach_point(st, (int)g, &target, &at);
            assert_true(target > (int)g);
            assert_string_equal(st->stages.data[target].iters[at].name, "k.1");
            const tt_stage *c = &st->stages.data[target];
            int k2 = -1;
            for (int it = at + 1; it < c->niters; it++)
                k2 = !strcmp(c->iters[it].name, "k.2") ? it : k2;
            assert_true(k2 > at);
            assert_int_equal(c->iters[k2].extent, 4);
            /* (its extents are the tensor's until lowering infers the 4-deep region) */
            assert_int_equal(sg->iters[sg->niters - 1].ann, TT_ANN_VECTORIZE);
        }
        assert_int_equal(copies, cases[i].copies);
        assert_int_equal(tt_sketch_check_gpu(&p, st, &err), TT_OK);
        tt_state_free(st);
        tt_workload_free(w);
    }
    /* sampled GPU programs get them at even odds where they apply, and with them (and their
     * tile-size mutants) compute the definition */
    tt_workload *w = parse("matmul:M=64,N=128,K=32");
    tt_sketch_space sp;
    gpu_space(w, 256, &sp);
    tt_rng rng;
    tt_rng_seed(&rng, 21);
    int with = 0, without = 0, mutants = 0;
    for (int k = 0; k < 2000 && with < 6; k++) {
        tt_state *st, *mu;
        if (tt_sketch_sample(&sp, -1, &rng, &st, NULL))
            continue;
        int copies = 0;
        for (size_t g = 0; g < st->stages.len; g++)
            copies +=
                !strcmp(st->stages.data[g].scope, "local") && !tt_access_has_reduce(st, (int)g);
        if (copies) {
            with++;
            check(w, st, "GPU sample with a register copy");
            if (!tt_sketch_mutate_kind(&sp, st, TT_MUTATE_TILE_SIZE, &rng, &mu, NULL)) {
                check(w, mu, "its tile-size mutant");
                mutants++;
                tt_state_free(mu);
            }
        } else {
            without++;
        }
        tt_state_free(st);
    }
    printf("sketch: %d GPU samples with register copies (%d mutants checked), %d without\n", with,
           mutants, without);
    assert_int_equal(with, 6);
    assert_true(without > 0 && mutants >= 1); /* at even odds: not every sample */
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* The program of a config (tt_evo_program_hash of the lowered state). */
static uint64_t program_of(const tt_workload *w, const char *json)
{
    tt_program *prog = lower_config(w, json);
    uint64_t h = tt_evo_program_hash(prog);
    tt_program_free(prog);
    return h;
}

/* Configs that lower to one program (a compute_at among loops of extent 1, say) are one
 * measurement: a round offers no program measured before and none twice.  The history here is
 * 48 sampled programs plus their twins found by mutation, so the round's evolution, which breeds
 * from the measured ones, meets them. */
static void search_rounds_offer_each_program_once(void **state)
{
    (void)state;
    tt_workload *w = parse("conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1");
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 2);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_sketch_space_init(&sp, &w->dag, &p, &err), TT_OK);
    tt_evo_history h;
    memset(&h, 0, sizeof(h));
    tt_rng rng;
    tt_rng_seed(&rng, 11);
    int twins = 0;
    for (int tries = 0; h.nprog < 48 && tries < 1000; tries++) {
        tt_state *st;
        if (tt_sketch_sample(&sp, -1, &rng, &st, NULL))
            continue;
        char *json = tt_steps_to_json(st->steps.data, st->steps.len);
        uint64_t prog = program_of(w, json);
        assert_int_equal(tt_evo_history_add(&h, json, NULL, 0, 1.0 + h.nprog, 0, prog), TT_OK);
        free(json);
        /* a twin: a mutant of another config with the same program */
        for (int m = 0; m < 32; m++) {
            tt_state *mu;
            if (tt_sketch_mutate(&sp, st, &rng, &mu, NULL))
                continue;
            char *mj = tt_steps_to_json(mu->steps.data, mu->steps.len);
            tt_state_free(mu);
            if (program_of(w, mj) == prog && strcmp(mj, h.configs[h.nprog - 1])) {
                twins++;
                free(mj);
                break;
            }
            free(mj);
        }
        tt_state_free(st);
    }
    tt_evo_params ep;
    tt_evo_params_default(&ep);
    ep.population = 256;
    char *out[64];
    int n = tt_evo_search_round(&sp, &ep, &h, NULL, 0, never_seen, NULL, &rng, out, 64, NULL, NULL,
                                &err);
    assert_true(n >= 32);
    uint64_t seen[64 + 48];
    int nseen = 0;
    for (int i = 0; i < h.nprog; i++)
        seen[nseen++] = h.program[i];
    int repeated = 0;
    for (int i = 0; i < n; i++) {
        uint64_t prog = program_of(w, out[i]);
        for (int k = 0; k < nseen; k++)
            repeated += seen[k] == prog;
        seen[nseen++] = prog;
        free(out[i]);
    }
    printf("sketch: %d of 48 measured programs have a twin config; a round of %d repeats %d\n",
           twins, n, repeated);
    assert_true(twins > 0);        /* the search space has twins... */
    assert_int_equal(repeated, 0); /* ...and a round never offers one */
    tt_evo_history_free(&h);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

static void check(const tt_workload *w, const tt_state *st, const char *what)
{
    tt_program *prog;
    tt_errbuf err = {{0}};
    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
    if (tt_lower(st, &prog, &err))
        fail_msg("%s (%s) %s: %s", w->key, what, steps, err.msg);
    if (tt_verify_program(&w->dag, prog, 5, 1e-4, 1e-5, NULL, &err))
        fail_msg("%s (%s) %s: %s", w->key, what, steps, err.msg);
    free(steps);
    tt_program_free(prog);
}

static void samples_and_mutants_compute_the_definition(void **state)
{
    (void)state;
    int samples = 0, mutants = 0, kinds[TT_MUTATE_COUNT] = {0};
    for (size_t wi = 0; wi < sizeof(verified) / sizeof(verified[0]); wi++) {
        tt_workload *w = parse(verified[wi]);
        tt_sketch_params p;
        tt_sketch_params_cpu(&p, 2);
        tt_sketch_space sp;
        tt_errbuf err = {{0}};
        if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
            fail_msg("%s: %s", w->key, err.msg);
        tt_rng rng;
        tt_rng_seed(&rng, wi + 1);
        for (int k = 0; k < 24; k++) {
            tt_state *st;
            if (tt_sketch_sample(&sp, k % sp.nsketches, &rng, &st, &err))
                continue; /* invalid samples are allowed; they are drawn again */
            check(w, st, "sample");
            samples++;
            for (int m = 0; m < TT_MUTATE_COUNT; m++) {
                tt_state *mu;
                if (tt_sketch_mutate_kind(&sp, st, (tt_mutation)m, &rng, &mu, &err))
                    continue;
                check(w, mu, "mutant");
                mutants++;
                kinds[m]++;
                tt_state_free(mu);
            }
            tt_state_free(st);
        }
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
    printf("sketch: %d samples and %d mutants verified (tile %d, unroll %d, location %d, "
           "parallel %d)\n",
           samples, mutants, kinds[0], kinds[1], kinds[2], kinds[3]);
    assert_true(samples >= 200);
    assert_true(kinds[TT_MUTATE_TILE_SIZE] > 100);
    assert_true(kinds[TT_MUTATE_AUTO_UNROLL] > 50);
    assert_true(kinds[TT_MUTATE_COMPUTE_LOCATION] > 0);
    assert_true(kinds[TT_MUTATE_PARALLEL] > 0);
}

/* The op of the workload's DAG named `name`, or -1. */
static int op_named(const tt_workload *w, const char *name)
{
    for (size_t o = 0; o < w->dag.ops.len; o++)
        if (!strcmp(w->dag.ops.data[o].name, name))
            return (int)o;
    return -1;
}

/* A 1x1 convolution as the importer writes it reads its weights at W[0, 0, k, j]: its samples
 * pass them packed in the order the loops read them (LR), as a 3x3 convolution's are; they
 * were left row-major, so a late ResNet-50 layer read rows of 64 weights 8 KiB apart from
 * memory.  Each sample computes the definition. */
static void pointwise_weights_are_packed(void **state)
{
    (void)state;
    tt_workload *w = parse("te:t0[i0,i1,i2,i3] += x0[0,i1,i2,r0] * w1[0,0,r0,i3]; "
                           "out[i0,i1,i2,i3] = max(t0[0,i1,i2,i3], 0); t0:float32[1,7,7,64]; "
                           "x0:float32[1,7,7,32]; w1:const float32[1,1,32,64]; "
                           "out:float32[1,7,7,64]; r0:32");
    int ws = op_named(w, "w1");
    assert_true(ws >= 0);
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 2);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s", err.msg);
    tt_rng rng;
    tt_rng_seed(&rng, 7);
    int samples = 0, packed = 0;
    for (int k = 0; k < 16; k++) {
        tt_state *st;
        if (tt_sketch_sample(&sp, k % sp.nsketches, &rng, &st, &err))
            continue;
        samples++;
        packed += st->stages.data[tt_state_stage_of_op(st, ws)].layout_rewrite;
        check(w, st, "sample");
        tt_program *prog;
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        const tt_buffer *b = tt_program_param(prog, 1);
        assert_non_null(b);
        assert_string_equal(b->name, "w1");
        tt_program_free(prog);
        tt_state_free(st);
    }
    assert_true(samples >= 8);
    assert_int_equal(packed, samples);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* Loop nests at the root of a program (through allocations and sequences). */
static int root_loops(const tt_program *p, tt_sid id)
{
    const tt_stmt *s = &p->stmts.data[id];
    if (s->kind == TT_STMT_ALLOC)
        return root_loops(p, s->body);
    if (s->kind == TT_STMT_SEQ) {
        int n = 0;
        for (uint32_t i = 0; i < s->n; i++)
            n += root_loops(p, p->items.data[s->first + i]);
        return n;
    }
    return s->kind == TT_STMT_FOR;
}

/* A MatMul as the importer writes it accumulates [M, N] and its epilogue writes the [1, M, N]
 * output, through a diamond (GELU reads the biased result twice).  Every CPU sketch computes the
 * accumulation at the output's tile, so that each tile goes through the epilogue into the output:
 * no cache write copied out into a full-size buffer that a second pass reads again (ViT-B/16's
 * GELU pass was 8-10% of its MatMul's time).  The added axis of extent 1 stays whole, outermost.
 * Each sample lowers to one loop nest and computes the definition. */
static void matmul_epilogue_fuses_across_unit_axes(void **state)
{
    (void)state;
    tt_workload *w = parse(
        "te:t1[i0,i1] += x0[0,i0,r0] * w1[r0,i1]; t0[i0,i1,i2] = t1[i1,i2]; "
        "t2[i0,i1,i2] = w2[i2] + t0[0,i1,i2]; t3[i0,i1,i2] = erf(t2[0,i1,i2] / 1.41421354); "
        "out[i0,i1,i2] = t2[0,i1,i2] * (t3[0,i1,i2] + 1.0) * 0.5; t1:float32[20,48]; "
        "x0:float32[1,20,32]; w1:const float32[32,48]; t0:float32[1,20,48]; t2:float32[1,20,48]; "
        "w2:const float32[48]; t3:float32[1,20,48]; out:float32[1,20,48]; r0:32");
    int out_op = op_named(w, "out"), acc_op = op_named(w, "t1");
    assert_true(out_op >= 0 && acc_op >= 0);
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 2);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s", err.msg);
    /* fused at the output's tiles (levels 1 and 2), or (as Ansor also offers) tiled alone */
    bool fused[16] = {false};
    int nfused = 0;
    assert_true(sp.nsketches <= 16);
    for (int k = 0; k < sp.nsketches; k++) {
        const tt_state *st = sp.sketches[k].state;
        for (size_t i = 0; i < st->steps.len; i++)
            assert_int_not_equal(st->steps.data[i].kind, TT_STEP_CACHE_WRITE);
        const tt_stage *acc = &st->stages.data[tt_state_stage_of_op(st, acc_op)];
        if (acc->at != TT_AT_ITER)
            continue;
        assert_int_equal(acc->at_op, out_op);
        fused[k] = true;
        nfused++;
        /* the output's axis of extent 1 is its outermost iterator, not split */
        const tt_stage *o = &st->stages.data[tt_state_stage_of_op(st, out_op)];
        assert_int_equal(o->iters[0].extent, 1);
    }
    assert_int_equal(nfused, 2);
    tt_rng rng;
    tt_rng_seed(&rng, 11);
    int samples = 0;
    for (int k = 0; k < 24; k++) {
        tt_state *st;
        if (tt_sketch_sample(&sp, k % sp.nsketches, &rng, &st, &err))
            continue;
        samples++;
        check(w, st, "sample");
        tt_program *prog;
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        /* one loop nest at the root: the accumulators are not copied out for a second pass */
        if (fused[k % sp.nsketches])
            assert_int_equal(root_loops(prog, prog->root), 1);
        tt_program_free(prog);
        tt_state_free(st);
    }
    assert_true(samples >= 8);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* Transforms (stages that combine their input at several points, as Winograd's) in CPU sketches:
 * the one a product reads stays at the root in every sketch (inlined, it would be recomputed for
 * every output column); those only non-reductions read are inlined (their pass over memory
 * costs more than their repeated arithmetic).  Samples compute the definition. */
static void transforms_stay_out_of_products(void **state)
{
    (void)state;
    tt_workload *w = parse(
        "te:d[i0,i1,i2] = select(i0 == 0, x0[i1 * 2,i2] - x0[i1 * 2 + 2,i2], x0[i1 * 2 + 1,i2] + "
        "x0[i1 * 2 + 2,i2]); v[i0,i1,i2] = select(i0 == 0, d[0,i1,i2] + "
        "d[1,i1,i2], d[1,i1,i2] - 2 * d[0,i1,i2]); m[i0,i1,i2] += v[i0,i1,r0] * w1[i0,r0,i2]; "
        "z[i0,i1,i2] = select(i0 == 0, m[0,i1,i2] - m[1,i1,i2], m[0,i1,i2] + 3 * m[1,i1,i2]); "
        "out[i0,i1,i2] = max(z[i0,i1,i2] + z[1 - i0,i1,i2], 0); d:float32[2,6,16]; "
        "x0:float32[14,16]; v:float32[2,6,16]; m:float32[2,6,32]; w1:const float32[2,16,32]; "
        "z:float32[2,6,32]; out:float32[2,6,32]; r0:16");
    int d = op_named(w, "d"), v = op_named(w, "v"), z = op_named(w, "z");
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 2);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s", err.msg);
    assert_true(sp.nsketches >= 1);
    for (int k = 0; k < sp.nsketches; k++) {
        const tt_state *st = sp.sketches[k].state;
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, v)].at, TT_AT_ROOT);
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, d)].at, TT_AT_INLINE);
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, z)].at, TT_AT_INLINE);
    }
    tt_rng rng;
    tt_rng_seed(&rng, 5);
    int samples = 0;
    for (int k = 0; k < 8; k++) {
        tt_state *st;
        if (tt_sketch_sample(&sp, k % sp.nsketches, &rng, &st, &err))
            continue;
        samples++;
        check(w, st, "sample");
        tt_state_free(st);
    }
    assert_true(samples >= 4);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* A convolution's padding, at the root in every CPU sketch, is inlined in some samples (Ansor
 * never inlines it there): the code generator then skips the taps that fall in the padding
 * instead of multiplying zeros.  Those samples compute the definition like every other. */
static void padding_is_sometimes_inlined(void **state)
{
    (void)state;
    tt_workload *w = parse("conv2d_nhwc:N=1,H=7,W=7,CI=16,CO=32,K=3,S=1,P=1");
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 2);
    p.vector_lanes = 8;
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
        fail_msg("%s", err.msg);
    tt_target host;
    assert_int_equal(tt_target_parse("llvm", &host, &err), TT_OK);
    char obj[64];
    snprintf(obj, sizeof(obj), "/tmp/tt-sketch-pad-%d.o", (int)getpid());
    tt_rng rng;
    tt_rng_seed(&rng, 5);
    int samples = 0, inlined = 0, skipping = 0;
    for (int k = 0; k < 200; k++) {
        tt_state *st;
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        samples++;
        bool inl = false;
        for (size_t i = 0; i < st->steps.len; i++)
            inl |= st->steps.data[i].kind == TT_STEP_COMPUTE_INLINE;
        if (inl && inlined++ < 8) { /* the emitter's part, on a few: it is the slow step */
            check(w, st, "inlined padding");
            tt_program *prog;
            tt_codegen_stats cs;
            memset(&cs, 0, sizeof(cs));
            assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
            if (tt_codegen_llvm_object(prog, &host, "kernel", obj, NULL, &cs, &err))
                fail_msg("%s", err.msg);
            skipping += cs.padded_updates > 0;
            tt_program_free(prog);
        }
        tt_state_free(st);
    }
    unlink(obj);
    printf("sketch: %d of %d samples inline the padding; %d of the first 8 skip padded taps\n",
           inlined, samples, skipping);
    assert_true(samples >= 100);
    assert_true(inlined >= samples / 20); /* a choice among the locations, not a rarity */
    assert_true(inlined < samples);       /* ...and not a rule */
    assert_true(skipping > 0);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* With the target's vectors, about half of the samples have a register tile: the multi-level
 * tiling's innermost spatial lengths are rows by whole vectors within the registers, the level
 * above them 1, the tile unrolled; they compute the definition like every sample. */
static void register_tiles_fit_the_registers(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        int lanes, regs;
    } cases[] = {
        {"matmul:M=24,N=32,K=12", 8, 16},
        {"matmul:M=28,N=64,K=8", 16, 32},
        {"conv2d_nhwc:N=1,H=6,W=8,CI=4,CO=16,K=3,S=1,P=1", 8, 16},
        {"conv2d_nhwc:N=1,H=4,W=14,CI=4,CO=32,K=3,S=1,P=1", 16, 32},
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        tt_workload *w = parse(cases[ci].w);
        tt_sketch_params p;
        tt_sketch_params_cpu(&p, 2);
        p.vector_lanes = cases[ci].lanes;
        p.vector_regs = cases[ci].regs;
        p.max_vectorize = 4 * p.vector_lanes;
        tt_sketch_space sp;
        tt_errbuf err = {{0}};
        if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
            fail_msg("%s: %s", w->key, err.msg);
        tt_rng rng;
        tt_rng_seed(&rng, ci + 7);
        int drawn = 0, tiled = 0, drawn_cached = 0, tiled_cached = 0;
        for (int k = 0; k < 60; k++) {
            const tt_sketch *sk = &sp.sketches[k % sp.nsketches];
            tt_state *st;
            if (tt_sketch_sample(&sp, k % sp.nsketches, &rng, &st, &err))
                continue;
            drawn++;
            /* The first multi-level tiling's spatial splits (the sketch marks them 2). */
            const tt_step *ax[TT_MAX_ITERS] = {NULL};
            int m = 0, stage = -1;
            for (size_t i = 0; i < sk->state->steps.len && m < TT_MAX_ITERS; i++)
                if (sk->undefined[i] == 2 && (stage < 0 || st->steps.data[i].stage == stage)) {
                    stage = st->steps.data[i].stage;
                    ax[m++] = &st->steps.data[i];
                }
            assert_true(m >= 2);
            int nl = ax[0]->nlen;
            int64_t rows = 1, cols = ax[m - 1]->lengths[nl - 1];
            bool reg = cols % cases[ci].lanes == 0 && cols <= 4 * cases[ci].lanes;
            int others = 0;
            for (int i = 0; i < m; i++) {
                reg = reg && ax[i]->lengths[nl - 2] == 1;
                if (i < m - 1 && ax[i]->lengths[nl - 1] > 1) {
                    rows = ax[i]->lengths[nl - 1];
                    others++;
                }
            }
            int64_t vecs = cols / cases[ci].lanes;
            reg = reg && others <= 1 && rows * vecs + vecs + 1 <= cases[ci].regs &&
                  st->stages.data[stage].auto_unroll_max_step >= 16;
            tiled += reg;
            /* A cache-write sketch tiles a stage the sketch added to its own DAG. */
            bool cached = sk->state->dag.ops.len > w->dag.ops.len;
            drawn_cached += cached;
            tiled_cached += cached && reg;
            check(w, st, "sample with the target's vectors");
            tt_state_free(st);
        }
        /* Half drawn as register tiles, and few of the rest by chance. */
        if (tiled < drawn / 4 || tiled > drawn * 3 / 4)
            fail_msg("%s: %d register tiles in %d samples", w->key, tiled, drawn);
        if (drawn_cached < 8 || tiled_cached < drawn_cached / 4)
            fail_msg("%s: %d register tiles in %d samples of cache-write sketches", w->key,
                     tiled_cached, drawn_cached);
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
}

/* A tile-size mutation keeps the product of the lengths and the innermost limit. */
static void tile_mutation_moves_a_factor(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=512,N=512,K=512");
    tt_sketch_params p;
    tt_sketch_params_cpu(&p, 4);
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_sketch_space_init(&sp, &w->dag, &p, &err), TT_OK);
    tt_rng rng;
    tt_rng_seed(&rng, 9);
    int changed = 0;
    for (int k = 0; k < 50; k++) {
        tt_state *st, *mu;
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        if (tt_sketch_mutate_kind(&sp, st, TT_MUTATE_TILE_SIZE, &rng, &mu, &err)) {
            tt_state_free(st);
            continue;
        }
        assert_int_equal(st->steps.len, mu->steps.len);
        int diff = 0;
        for (size_t i = 0; i < st->steps.len; i++) {
            const tt_step *a = &st->steps.data[i], *b = &mu->steps.data[i];
            if (a->kind != TT_STEP_SPLIT ||
                !memcmp(a->lengths, b->lengths, sizeof(int64_t) * (size_t)a->nlen))
                continue;
            diff++;
            int64_t pa = 1, pb = 1;
            for (int l = 0; l < a->nlen; l++) {
                pa *= a->lengths[l];
                pb *= b->lengths[l];
            }
            assert_int_equal(a->extent % pb, 0);
            assert_true(b->lengths[b->nlen - 1] <= 64);
            (void)pa;
        }
        assert_int_equal(diff, 1);
        changed++;
        tt_state_free(mu);
        tt_state_free(st);
    }
    assert_true(changed > 20);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* The build's default GPU tiling of `w` (256 threads, warps of 32); fails the test without one. */
static tt_state *gpu_default_tiling(const tt_workload *w)
{
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, 256, 32);
    tt_state *st;
    tt_errbuf err = {{0}};
    if (tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_DEFAULT, &st, &err))
        fail_msg("%s: %s", w->key, err.msg);
    return st;
}

/* The OpenCL statistics of `st` lowered and emitted under the default GPU limits (local memory
 * unlimited unless `capped`); fails the test when it does not lower or emit. */
static void emitted_stats(const tt_workload *w, const tt_state *st, bool capped,
                          tt_opencl_stats *stats)
{
    tt_errbuf err = {{0}};
    tt_program *prog;
    if (tt_lower(st, &prog, &err))
        fail_msg("%s: %s", w->key, err.msg);
    tt_gpu_limits lim;
    tt_gpu_limits_default(&lim);
    if (!capped)
        lim.max_shared_bytes = 0;
    char *text = NULL;
    tt_status r = tt_codegen_opencl(prog, "k", &lim, &text, NULL, stats, &err);
    free(text);
    tt_program_free(prog);
    if (r)
        fail_msg("%s: %s", w->key, err.msg);
}

/* The reduction steps one round of a GPU state's shared tiles holds: the inner parts of its
 * reduce axes' splits (two parts each in the GPU structure). */
static int64_t staged_depth(const tt_state *st)
{
    int64_t depth = 1;
    for (size_t i = 0; i < st->steps.len; i++) {
        const tt_step *sp = &st->steps.data[i];
        if (sp->kind == TT_STEP_SPLIT && sp->nlen == 2)
            depth *= sp->lengths[0] * sp->lengths[1];
    }
    return depth;
}

/* The number of open splits of `st` whose tile (the product of its lengths) is more than 1 and
 * does not divide the axis. */
static int padded_splits(const tt_state *st)
{
    int n = 0;
    for (size_t i = 0; i < st->steps.len; i++) {
        const tt_step *s = &st->steps.data[i];
        int64_t tile = 1;
        for (int l = 0; s->kind == TT_STEP_SPLIT && l < s->nlen; l++)
            tile *= s->lengths[l];
        n += s->kind == TT_STEP_SPLIT && s->extent > 0 && tile > 1 && s->extent % tile;
    }
    return n;
}

/* A small GPU task (the layouts model's 1x1 convolution: 25x4 outputs, 8 input channels) takes at
 * least a warp of threads only as 50 or 100, more than its 8x4 weights have elements: the
 * cooperative fetch's split by the threads goes over the tile's extent, its excess threads idle.
 * Such splits were refused, so no sample of this task was valid and its search found nothing.
 * (Since 2026-12-01 a sample may also tile the 25 rows as 32, padded: a warp exactly.) */
static void gpu_fetch_splits_take_more_threads_than_elements(void **state)
{
    (void)state;
    tt_workload *w = parse("te:out[i0,i1,i2,i3] += x0[0,0,i2 + r2,r0] * w1[0,0,r0,i3]; "
                           "out:float32[1,1,25,4]; x0:float32[1,1,25,8]; w1:const "
                           "float32[1,1,8,4]; r0:8; r1:1; r2:1");
    tt_sketch_space sp;
    gpu_space(w, 256, &sp);
    tt_rng rng;
    tt_rng_seed(&rng, 7);
    int valid = 0, over = 0;
    for (int k = 0; k < 600 && valid < 6; k++) {
        tt_state *st;
        tt_errbuf err = {{0}};
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        tt_opencl_stats stats;
        emitted_stats(w, st, true, &stats);
        int64_t threads = stats.block[0] * stats.block[1] * stats.block[2];
        assert_true(threads >= 32);
        over += threads > 32 || padded_splits(st) > 0; /* 25 padded to 32: a warp */
        check(w, st, "sample");
        valid++;
        tt_state_free(st);
    }
    printf("25x4 outputs on GPU: %d valid samples, %d with more threads than w1 has elements or "
           "padded rows\n",
           valid, over);
    assert_true(valid >= 6);
    assert_true(over == valid);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* The default GPU schedule of a build (tt_sketch_gpu_tiled): a matmul and a convolution get
 * register tiles, thread blocks and shared-memory stages and compute the definition; a
 * reduction gets its cross-thread form; each is within the bindings' limits. */
static void gpu_default_tiles_what_can_be_tiled(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        const char *has; /* in the steps: what the default must do */
        int64_t threads; /* work-items per group */
        int64_t depth;   /* reduction steps a shared tile holds (0: not checked) */
    } cases[] = {
        {"matmul:M=64,N=128,K=16", "\"shared\"", 64, 16},
        {"conv2d_nhwc:N=1,H=8,W=8,CI=16,CO=32,K=3,S=1,P=1", "\"shared\"", 0, 0},
        /* 7x7 maps (ResNet-18's last stage): 7 has no divisor from 2 to 4, so the channels
         * take the threads alone, rather than 16 threads, under a warp, and the naive binding */
        {"conv2d_nhwc:N=1,H=7,W=7,CI=1,CO=512,K=3,S=1,P=1", "\"shared\"", 64, 0},
        /* the 3x3 window whole and 2 channels: 18 products a round, not the window's row of 3 */
        {"conv2d_nchw:N=1,CI=8,H=8,W=8,CO=16,K=3,S=1,P=1", "\"shared\"", 0, 18},
        {"te:R[i] += A[i,k]; A:float32[64,256]", "", 32, 0},
        {"softmax:M=64,N=256", "", 0, 0},
        /* a GlobalAveragePool: its output's innermost axis is 1 long, too short to lend the
         * reduction its threads (one thread each, once) */
        {"te:t0[i0,i1] += x0[0,r0,r1,i1]; out[i0,i1,i2,i3] = t0[i0,i1] / 49.0; t0:float32[1,512]; "
         "x0:float32[1,7,7,512]; out:float32[1,512,1,1]; r0:7; r1:7",
         "", 32, 0},
        /* a MatMul+Add of a network: the product, its reshape and the bias, in one task */
        {"te:t1[i0,i1] += x0[0,i0,r0] * w1[r0,i1]; t0[i0,i1,i2] = t1[i1,i2]; out[i0,i1,i2] = "
         "w2[i2] + t0[0,i1,i2]; t1:float32[64,128]; x0:float32[1,64,16]; w1:const "
         "float32[16,128]; t0:float32[1,64,128]; out:float32[1,64,128]; w2:const float32[128]; "
         "r0:16",
         "\"shared\"", 64, 16},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tt_workload *w = parse(cases[c].w);
        tt_sketch_params p;
        tt_sketch_params_gpu(&p, 256, 32);
        tt_state *st = gpu_default_tiling(w);
        tt_errbuf err = {{0}};
        char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
        printf("gpu default %s: %s\n", w->key, steps);
        assert_non_null(strstr(steps, cases[c].has));
        assert_non_null(strstr(steps, "auto_unroll_max_step$512"));
        assert_int_equal(tt_sketch_check_gpu(&p, st, &err), TT_OK);
        check(w, st, "gpu default");
        tt_opencl_stats stats;
        emitted_stats(w, st, true, &stats);
        int64_t threads = stats.block[0] * stats.block[1] * stats.block[2];
        printf("  %d kernel(s), %lld work-items per group, %lld bytes shared, local reads "
               "%d-way\n",
               stats.kernels, (long long)threads, (long long)stats.shared_bytes,
               stats.local_bank_ways);
        if (cases[c].threads)
            assert_int_equal(threads, cases[c].threads);
        int64_t depth = staged_depth(st);
        if (cases[c].depth)
            assert_int_equal(depth, cases[c].depth);
        free(steps);
        tt_state_free(st);
        tt_workload_free(w);
    }
}

/* Matrix-vector products (a classifier's Gemm at batch 1 or 2, weights [n, k]): the default and a
 * sketch of the search share each output's reduction among a work-group's threads at the root,
 * a work-group an output, the weight rows read along k (at batch 2 the batch inside the rows: a
 * row's work-groups neighbours), and compute the definition.  Tiled, the
 * 1000-class heads had no group of a warp and ran the naive binding, one thread a row; a 4096-wide
 * layer ran 4096 threads.  A 1x1 convolution (a matrix product: its activations reused by 32
 * outputs) and a product whose weights run along n ([k, n]) keep their tilings. */
static void gpu_matrix_vector_products_share_their_reductions(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        int64_t outputs; /* work-groups of the reduction's kernel; 0: not a cross-thread form */
        int64_t threads; /* its work-items a group */
    } cases[] = {
        {"te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; "
         "t0:float32[1,100]; x0:float32[1,512]; w1:const float32[100,512]; out:float32[1,100]; "
         "w2:const float32[100]; r0:512",
         100, 64},
        {"te:t1[i0,i1] += x0[i0,r0] * w1[i1,r0]; t0[i0,i1] = t1[i0,i1] + w2[i1]; out[i0,i1] = "
         "max(t0[0,i1], 0); t1:float32[2,30]; x0:float32[2,1280]; w1:const float32[30,1280]; "
         "t0:float32[2,30]; w2:const float32[30]; out:float32[2,30]; r0:1280",
         60, 160},
        {"te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; "
         "t0:float32[1,40]; x0:float32[1,1000]; w1:const float32[40,1000]; out:float32[1,40]; "
         "w2:const float32[40]; r0:1000",
         40, 96},
        {"te:out[i0,i1,i2,i3] += x0[0,0,i2 + r2,r0] * x1[0,0,r0,i3]; out:float32[1,1,98,32]; "
         "x0:float32[1,1,98,160]; x1:float32[1,1,160,32]; r0:160; r1:1; r2:1",
         0, 0},
        {"te:out[i0,i1] += x0[i0,r0] * w1[r0,i1]; out:float32[1,256]; x0:float32[1,256]; "
         "w1:const float32[256,256]; r0:256",
         0, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tt_workload *w = parse(cases[c].w);
        tt_state *st = gpu_default_tiling(w);
        check(w, st, "gpu default");
        tt_opencl_stats stats;
        emitted_stats(w, st, true, &stats);
        int64_t threads = stats.block[0] * stats.block[1] * stats.block[2];
        printf("gpu default %s: %d kernel(s), first %lld groups of %lld, %d cross-thread "
               "reduction(s)\n",
               w->key, stats.kernels, (long long)stats.grid[0], (long long)threads,
               stats.cross_thread_reductions);
        if (cases[c].outputs) {
            assert_true(stats.cross_thread_reductions > 0);
            assert_int_equal(stats.grid[0] * stats.grid[1] * stats.grid[2], cases[c].outputs);
            assert_int_equal(threads, cases[c].threads);
            /* the batch inside the weight rows (the groups of a row neighbours in blockIdx.x,
             * reading it once from memory); nothing moved at batch 1 */
            char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
            bool batched = st->dag.ops.data[st->stages.data[st->stages.len - 1].op].shape[0] > 1;
            assert_true(!strstr(steps, "[\"RE\", 2, [1, 0, 2]]") == !batched);
            free(steps);
        } else {
            assert_int_equal(stats.cross_thread_reductions, 0);
        }
        tt_state_free(st);
        /* the search has the form too: a sample of each sketch computes the definition */
        tt_sketch_space sp;
        gpu_space(w, 256, &sp);
        tt_rng rng;
        tt_rng_seed(&rng, 3);
        int with_form = 0;
        for (int k = 0; k < sp.nsketches; k++) {
            for (int tries = 0; tries < 200; tries++) {
                tt_errbuf err = {{0}};
                if (tt_sketch_sample(&sp, k, &rng, &st, &err))
                    continue;
                check(w, st, "gpu sample");
                emitted_stats(w, st, false, &stats);
                with_form += stats.cross_thread_reductions > 0;
                tt_state_free(st);
                break;
            }
        }
        assert_true(cases[c].outputs ? with_form > 0 : with_form == 0);
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
}

/* ViT's 197 tokens are a prime: its attention products took the naive binding (12 threads,
 * fewer than a warp) and its linear layers one row of 197 a work-group.  The default now tiles
 * both axes of 197 by 32 (8 threads of 4), padded; and the search draws such tiles too, half
 * the time, on axes whose divisors give poor ones.  Samples compute the definition. */
static void gpu_prime_extents_take_padded_tiles(void **state)
{
    (void)state;
    tt_workload *w = parse("batch_matmul:B=12,M=197,N=197,K=64");
    tt_state *st = gpu_default_tiling(w);
    assert_int_equal(padded_splits(st), 2);
    int tiles = 0;
    for (size_t i = 0; i < st->steps.len; i++) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind == TT_STEP_SPLIT && s->extent == 197 && s->nlen == 4)
            tiles += s->lengths[1] == 8 && s->lengths[3] == 4;
    }
    assert_int_equal(tiles, 2);
    tt_opencl_stats stats;
    emitted_stats(w, st, true, &stats);
    assert_int_equal(stats.grid[0] * stats.grid[1] * stats.grid[2], 3 * 7 * 7);
    assert_int_equal(stats.block[0] * stats.block[1] * stats.block[2], 256);
    tt_state_free(st);
    tt_workload_free(w);

    w = parse("matmul:M=37,N=37,K=37");
    tt_sketch_space sp;
    gpu_space(w, 256, &sp);
    tt_rng rng;
    tt_rng_seed(&rng, 11);
    int valid = 0, padded = 0;
    for (int tries = 0; tries < 400 && valid < 12; tries++) {
        tt_errbuf err = {{0}};
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        valid++;
        if (padded_splits(st) > 0) {
            padded++;
            check(w, st, "padded gpu sample");
        }
        tt_state_free(st);
    }
    printf("gpu samples of %s: %d valid, %d with padded tiles\n", w->key, valid, padded);
    assert_true(padded >= 3);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* The default takes at most 32 KiB of local memory (the least GPUs have) where a tiling fits:
 * its reduction staged shallower, else a smaller shape.  A 7x7 stride-2 convolution of 3
 * channels took 51 KiB, more than NVIDIA's 48; a depthwise one staged whole, 65 KiB; a 3x3
 * one with channels to reduce still stages deep (18). */
static void gpu_default_fits_the_least_local_memory(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        int64_t depth; /* 0: not checked */
    } cases[] = {
        {"conv2d_nchw:N=1,CI=3,H=224,W=224,CO=64,K=7,S=2,P=3", 0},
        {"depthwise_conv2d_nhwc:N=1,H=112,W=112,C=96,K=3,S=2,P=1", 3},
        {"conv2d_nchw:N=1,CI=64,H=56,W=56,CO=64,K=3,S=1,P=1", 18},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tt_workload *w = parse(cases[c].w);
        tt_state *st = gpu_default_tiling(w);
        tt_opencl_stats stats;
        emitted_stats(w, st, false, &stats);
        int64_t depth = staged_depth(st);
        printf("gpu default %s: %lld bytes shared, %lld deep\n", w->key,
               (long long)stats.shared_bytes, (long long)depth);
        assert_true(stats.shared_bytes > 0 && stats.shared_bytes <= 32 << 10);
        if (cases[c].depth)
            assert_int_equal(depth, cases[c].depth);
        tt_state_free(st);
        tt_workload_free(w);
    }
}

/* `opencl -device=mali`: local memory is the same main memory as global on Mali, so its sketches
 * stage nothing there (Ansor's Mali rules have no AddCacheRead): no sketch of a matmul or a
 * convolution has a shared stage, their samples compute the definition, the default tiling is
 * register tiles and threads alone, and the large tilings (shared tiles) are not offered. */
static void gpu_mali_stages_nothing_in_local_memory(void **state)
{
    (void)state;
    tt_target mali, plain;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_target_parse("opencl -device=mali", &mali, &err), TT_OK);
    assert_int_equal(tt_target_parse("opencl", &plain, &err), TT_OK);
    assert_false(tt_target_fast_local_memory(&mali));
    assert_true(tt_target_fast_local_memory(&plain));
    static const char *const cases[] = {"matmul:M=32,N=32,K=32",
                                        "conv2d_nhwc:N=1,H=8,W=8,CI=8,CO=16,K=3,S=1,P=1"};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tt_workload *w = parse(cases[c]);
        tt_sketch_params p;
        tt_sketch_params_gpu(&p, 256, 32);
        p.shared_memory = tt_target_fast_local_memory(&mali);
        tt_sketch_space sp;
        if (tt_sketch_space_init(&sp, &w->dag, &p, &err))
            fail_msg("%s: %s", w->key, err.msg);
        for (int k = 0; k < sp.nsketches; k++)
            for (size_t g = 0; g < sp.sketches[k].state->stages.len; g++)
                assert_string_not_equal(sp.sketches[k].state->stages.data[g].scope, "shared");
        tt_rng rng;
        tt_rng_seed(&rng, 3);
        int valid = 0;
        for (int k = 0; k < 400 && valid < 4; k++) {
            tt_state *st;
            if (tt_sketch_sample(&sp, -1, &rng, &st, NULL))
                continue;
            check(w, st, "mali sample");
            valid++;
            tt_state_free(st);
        }
        assert_int_equal(valid, 4);
        tt_state *st;
        if (tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_DEFAULT, &st, &err))
            fail_msg("%s: %s", w->key, err.msg);
        tt_opencl_stats stats;
        emitted_stats(w, st, true, &stats);
        printf("mali default %s: %lld threads, %lld groups, %lld bytes local\n", w->key,
               (long long)(stats.block[0] * stats.block[1] * stats.block[2]),
               (long long)(stats.grid[0] * stats.grid[1] * stats.grid[2]),
               (long long)stats.shared_bytes);
        assert_int_equal(stats.shared_bytes, 0);
        assert_true(stats.block[0] * stats.block[1] * stats.block[2] >= 32);
        check(w, st, "mali default");
        tt_state_free(st);
        assert_int_equal(tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE, &st, &err),
                         TT_ERR_NOT_FOUND);
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
}

/* TT_OK when every vthread loop of `prog` under `id` (of 2 or more: a loop of one is a plain loop)
 * holds only statements of its own thread:
 * no shared-memory store (a fetch the virtual threads would repeat), no other loop but a
 * vector one; TT_ERR_INVALID_ARG otherwise. */
static tt_status vthread_loops_are_leaves(const tt_program *prog, tt_sid id, bool inside)
{
    const tt_stmt *s = &prog->stmts.data[id];
    if (s->kind == TT_STMT_STORE)
        return inside && !strcmp(prog->bufs.data[s->buf].scope, "shared") ? TT_ERR_INVALID_ARG
                                                                          : TT_OK;
    if (s->kind == TT_STMT_FOR && inside && s->ann != TT_ANN_VECTORIZE)
        return TT_ERR_INVALID_ARG;
    inside |= s->kind == TT_STMT_FOR && s->ann == TT_ANN_VTHREAD && s->extent > 1;
    tt_status r = TT_OK;
    if (s->kind == TT_STMT_SEQ)
        for (uint32_t k = 0; k < s->n && !r; k++)
            r = vthread_loops_are_leaves(prog, prog->items.data[s->first + k], inside);
    if (!r && (s->kind == TT_STMT_FOR || s->kind == TT_STMT_ALLOC || s->kind == TT_STMT_IF))
        r = vthread_loops_are_leaves(prog, s->body, inside);
    if (!r && s->kind == TT_STMT_IF && s->orelse)
        r = vthread_loops_are_leaves(prog, s->orelse, inside);
    return r;
}

/* The large tile (TT_GPU_TILE_LARGE, the tuner's second starting point on a GPU): a big matmul
 * gets 256 threads of 8x8 outputs, a 128x128 tile a work-group with its reduction staged through
 * local memory, and computes the definition; a matmul too small for 64 such work-groups is
 * refused.  K is 4 (staged 4 deep, 4 KiB) so that the interpreter's check stays cheap under the
 * sanitizers: a million outputs are the least the tile takes. */
/* Whether OpenCL C `text` has a loop starting with `loop` right under a `#pragma unroll`. */
static bool unrolled(const char *text, const char *loop)
{
    for (const char *p = strstr(text, "#pragma unroll\n"); p;
         p = strstr(p + 1, "#pragma unroll\n")) {
        const char *q = p + strlen("#pragma unroll\n");
        while (*q == ' ')
            q++;
        if (!strncmp(q, loop, strlen(loop)))
            return true;
    }
    return false;
}

static void gpu_large_tile_is_a_128_square(void **state)
{
    (void)state;
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, 256, 32);
    tt_errbuf err = {{0}};
    tt_workload *w = parse("matmul:M=1024,N=1024,K=4");
    tt_state *st;
    if (tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE, &st, &err))
        fail_msg("%s: %s", w->key, err.msg);
    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
    printf("gpu large %s: %s\n", w->key, steps);
    assert_int_equal(tt_sketch_check_gpu(&p, st, &err), TT_OK);
    check(w, st, "gpu large");
    tt_program *prog;
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    tt_gpu_limits lim;
    tt_gpu_limits_default(&lim);
    char *text = NULL;
    tt_opencl_stats stats;
    if (tt_codegen_opencl(prog, "k", &lim, &text, NULL, &stats, &err))
        fail_msg("%s: %s", w->key, err.msg);
    assert_int_equal(stats.block[0] * stats.block[1] * stats.block[2], 256);
    assert_int_equal(stats.shared_bytes, (128 * 4 + 4 * 128) * 4);
    /* 2x2 virtual threads of 4x4 outputs (tt_program_inject_vthreads): one fetch of the tiles
     * for all four, whose products interleave in one reduction loop */
    assert_non_null(strstr(steps, "[2, 16, 1, 4]"));
    assert_int_equal(vthread_loops_are_leaves(prog, prog->root, false), TT_OK);
    /* its reads of local memory take two passes (tt_opencl_stats.local_bank_ways): 16
     * work-items in a row read B's row 4 floats apart, 2 words in each of 16 banks, where
     * without virtual threads (8 outputs of a row a thread) they read it 8 apart: 4 passes */
    assert_int_equal(stats.local_bank_ways, 2);
    free(text);
    free(steps);
    tt_program_free(prog);
    tt_state_free(st);
    /* with 4-float fetches: both shared stages' vector parts are 4, vectorised in OpenCL C */
    if (tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE_FLOAT4, &st, &err))
        fail_msg("%s: %s", w->key, err.msg);
    int by4 = 0;
    for (size_t k = 0; k < st->steps.len; k++) {
        const tt_step *s = &st->steps.data[k];
        by4 += s->kind == TT_STEP_SPLIT && s->nlen == 1 && s->lengths[0] == 4 &&
               !strcmp(st->stages.data[s->stage].scope, "shared");
    }
    assert_int_equal(by4, 2);
    check(w, st, "gpu large, 4-float fetches");
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    if (tt_codegen_opencl(prog, "k", &lim, &text, NULL, &stats, &err))
        fail_msg("%s: %s", w->key, err.msg);
    /* the register tile vectorised too: 2 fetches, the init, the product, the copy-out */
    assert_true(stats.vector_loops >= 5);
    /* no read of local memory conflicts: B's tile 4 floats a work-item, 8 work-items in a phase
     * of 128 bytes; A's rows of 4 floats for the warp's two rows of work-items 16 banks apart */
    assert_int_equal(stats.local_bank_ways, 1);
    free(text);
    tt_program_free(prog);
    tt_state_free(st);
    /* over a deeper reduction, the 16-deep inner product is unrolled under its
     * auto_unroll_max_step of 512: 16 steps of 16 float4 FMAs, a vector counting once as in TVM
     * (1024 counted by lanes: it stayed a loop) */
    tt_workload *deep = parse("matmul:M=1024,N=1024,K=64");
    if (tt_sketch_gpu_tiled(&deep->dag, &p, TT_GPU_TILE_LARGE_FLOAT4, &st, &err))
        fail_msg("%s: %s", deep->key, err.msg);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    if (tt_codegen_opencl(prog, "k", &lim, &text, NULL, &stats, &err))
        fail_msg("%s: %s", deep->key, err.msg);
    assert_non_null(strstr(text, "for (int k_1"));
    assert_true(unrolled(text, "for (int k_1"));
    free(text);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(deep);
    /* the default's 4x4 outputs a work-item: B's row 4 floats apart, two words a bank */
    if (tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_DEFAULT, &st, &err))
        fail_msg("%s: %s", w->key, err.msg);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    if (tt_codegen_opencl(prog, "k", &lim, &text, NULL, &stats, &err))
        fail_msg("%s: %s", w->key, err.msg);
    assert_int_equal(stats.local_bank_ways, 2);
    free(text);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    /* 16 deep (K = 64; lowered and emitted, not run), A's tile is 128 rows of 16 floats: the
     * warp's two rows of work-items read rows 64 words apart, in one bank (2 passes); the 4-float
     * tile pads the rows to 20 floats (SA, factor 32, offset 20), 16 banks apart: 1 pass */
    w = parse("matmul:M=1024,N=1024,K=64");
    for (int padded = 0; padded < 2; padded++) {
        tt_gpu_tile size = padded ? TT_GPU_TILE_LARGE_FLOAT4 : TT_GPU_TILE_LARGE;
        if (tt_sketch_gpu_tiled(&w->dag, &p, size, &st, &err))
            fail_msg("%s: %s", w->key, err.msg);
        steps = tt_steps_to_json(st->steps.data, st->steps.len);
        assert_true(!strstr(steps, "[\"SA\", 1, 0, 32, 20]") == !padded);
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        if (tt_codegen_opencl(prog, "k", &lim, &text, NULL, &stats, &err))
            fail_msg("%s: %s", w->key, err.msg);
        assert_int_equal(stats.local_bank_ways, padded ? 1 : 2);
        assert_int_equal(stats.shared_bytes, ((padded ? 20 : 16) * 128 + 16 * 128) * 4);
        free(steps);
        free(text);
        tt_program_free(prog);
        tt_state_free(st);
    }
    tt_workload_free(w);
    /* 512x512 makes 16 work-groups of 128x128: the default's smaller tiles are the start there */
    w = parse("matmul:M=512,N=512,K=32");
    assert_int_equal(tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_LARGE, &st, &err),
                     TT_ERR_NOT_FOUND);
    assert_int_equal(tt_sketch_gpu_tiled(&w->dag, &p, TT_GPU_TILE_DEFAULT, &st, &err), TT_OK);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Statements of `prog` under `id` that carry the double-buffering flag: loops and their
 * fetches. */
static int count_prefetch_in(const tt_program *prog, tt_sid id, tt_stmt_kind kind)
{
    const tt_stmt *s = &prog->stmts.data[id];
    int n = s->prefetch && s->kind == kind;
    if (s->kind == TT_STMT_SEQ)
        for (uint32_t k = 0; k < s->n; k++)
            n += count_prefetch_in(prog, prog->items.data[s->first + k], kind);
    if (s->kind == TT_STMT_FOR || s->kind == TT_STMT_ALLOC || s->kind == TT_STMT_IF)
        n += count_prefetch_in(prog, s->body, kind);
    if (s->kind == TT_STMT_IF && s->orelse)
        n += count_prefetch_in(prog, s->orelse, kind);
    return n;
}

static int count_prefetch(const tt_program *prog, tt_stmt_kind kind)
{
    return count_prefetch_in(prog, prog->root, kind);
}

/* Double buffering (PR "double_buffer" on a shared stage): the tile's buffer holds two, the first
 * is filled before the loop that the stage is computed at, and each iteration fetches the next
 * one under `if (v < extent - 1)` before it reads its own; the program still computes the
 * definition (the interpreter, which reads what no loop wrote as NaN), and the OpenCL kernel
 * declares twice the local memory and fences the loop's iteration with one barrier instead of
 * one before and one after each fill.  A stage computed at a loop of one iteration, or at a
 * loop bound to threads, stays single-buffered; any other stage refuses the pragma. */
static void gpu_double_buffer_fetches_ahead(void **state)
{
    (void)state;
    static const struct {
        const char *w;
        int loops; /* double-buffered loops expected */
    } cases[] = {
        {"matmul:M=64,N=128,K=64", 1},                          /* k.0 runs 4 times */
        {"conv2d_nhwc:N=1,H=8,W=8,CI=32,CO=32,K=3,S=1,P=1", 1}, /* ci.0 twice, inside kh, kw */
        {"batch_matmul:B=2,M=32,N=64,K=48", 1},
        {"matmul:M=64,N=128,K=16", 0}, /* one 16-deep step: nothing to fetch ahead */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tt_workload *w = parse(cases[c].w);
        tt_state *st = gpu_default_tiling(w);
        tt_errbuf err = {{0}};
        tt_gpu_limits lim;
        tt_gpu_limits_default(&lim);
        tt_program *one, *two;
        char *text1 = NULL, *text2 = NULL;
        tt_opencl_stats s1, s2;
        assert_int_equal(tt_lower(st, &one, &err), TT_OK);
        if (tt_codegen_opencl(one, "k", &lim, &text1, NULL, &s1, &err))
            fail_msg("%s: %s", w->key, err.msg);
        int shared = 0;
        for (size_t g = 0; g < st->stages.len; g++)
            if (!strcmp(st->stages.data[g].scope, "shared")) {
                assert_int_equal(tt_sched_pragma(st, (int)g, 0, "double_buffer", &err), TT_OK);
                shared++;
            } else if (!st->dag.ops.data[st->stages.data[g].op].is_placeholder &&
                       st->stages.data[g].at != TT_AT_INLINE) {
                assert_int_equal(tt_sched_pragma(st, (int)g, 0, "double_buffer", &err),
                                 TT_ERR_ILLEGAL_STEP);
                assert_non_null(strstr(err.msg, "needs a shared stage"));
            }
        assert_true(shared > 0);
        char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
        assert_non_null(strstr(steps, "[\"PR\", "));
        assert_non_null(strstr(steps, "\"double_buffer\"]"));
        /* the step text round-trips */
        tt_step *back;
        size_t nback;
        assert_int_equal(tt_steps_from_json(steps, &back, &nback, &err), TT_OK);
        tt_state *re;
        assert_int_equal(tt_state_replay(&w->dag, back, nback, &re, &err), TT_OK);
        for (size_t g = 0; g < st->stages.len; g++)
            assert_int_equal(re->stages.data[g].double_buffer, st->stages.data[g].double_buffer);
        tt_state_free(re);
        free(back);
        check(w, st, "double-buffered");
        assert_int_equal(tt_lower(st, &two, &err), TT_OK);
        assert_int_equal(count_prefetch(two, TT_STMT_FOR), cases[c].loops);
        assert_int_equal(count_prefetch(two, TT_STMT_SEQ), cases[c].loops);
        if (tt_codegen_opencl(two, "k", &lim, &text2, NULL, &s2, &err))
            fail_msg("%s: %s", w->key, err.msg);
        if (cases[c].loops) {
            printf("double-buffered %s: %s\n", w->key, steps);
            assert_int_equal(s2.shared_bytes, 2 * s1.shared_bytes);
            /* one barrier before each fill and one after, merged where adjacent: single-
             * buffered, n fills make n + 1 in the loop; double-buffered, the prologue's n + 1
             * and the loop's one */
            assert_int_equal(s2.barriers, s1.barriers + 1);
            /* the fetch goes through registers: loaded before the step's products, stored to
             * local memory after them */
            assert_int_equal(s2.staged_fetches, 1);
        } else {
            assert_string_equal(text1, text2);
        }
        free(steps);
        free(text1);
        free(text2);
        tt_program_free(one);
        tt_program_free(two);
        tt_state_free(st);
        tt_workload_free(w);
    }
    /* the search: GPU samples double-buffer some shared stages, and the mutation switches one */
    tt_workload *w = parse("matmul:M=64,N=128,K=64");
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    gpu_space(w, 256, &sp);
    tt_rng rng;
    tt_rng_seed(&rng, 3);
    int samples = 0, with = 0, switched = 0;
    for (int k = 0; k < 256 && samples < 8; k++) { /* about 1 draw in 9 is valid */
        tt_state *st, *mu;
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        samples++;
        char *a = tt_steps_to_json(st->steps.data, st->steps.len);
        with += strstr(a, "double_buffer") != NULL;
        check(w, st, "GPU sample");
        if (!tt_sketch_mutate_kind(&sp, st, TT_MUTATE_DOUBLE_BUFFER, &rng, &mu, &err)) {
            char *b = tt_steps_to_json(mu->steps.data, mu->steps.len);
            int da = 0, db = 0;
            for (size_t g = 0; g < st->stages.len; g++) {
                da += st->stages.data[g].double_buffer;
                db += mu->stages.data[g].double_buffer;
            }
            assert_int_equal(abs(da - db), 1);
            check(w, mu, "GPU double-buffer mutant");
            switched++;
            free(b);
            tt_state_free(mu);
        }
        free(a);
        tt_state_free(st);
    }
    printf("double-buffered: %d of %d GPU samples, %d switched by mutation\n", with, samples,
           switched);
    assert_true(with > 0 && with < samples);
    assert_int_equal(switched, samples);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

/* `st` without its SA steps (its shared rows unpadded), replayed. */
static tt_state *unpadded(const tt_workload *w, const tt_state *st)
{
    tt_step *steps = malloc(sizeof(tt_step) * (st->steps.len + 1));
    assert_non_null(steps);
    size_t n = 0;
    for (size_t i = 0; i < st->steps.len; i++)
        if (st->steps.data[i].kind != TT_STEP_STORAGE_ALIGN)
            steps[n++] = st->steps.data[i];
    tt_state *out;
    tt_errbuf err = {{0}};
    if (tt_state_replay(&w->dag, steps, n, &out, &err))
        fail_msg("%s: %s", w->key, err.msg);
    free(steps);
    return out;
}

static int bank_ways(const tt_workload *w, const tt_state *st)
{
    tt_opencl_stats stats;
    emitted_stats(w, st, false, &stats);
    return stats.local_bank_ways;
}

static int count_padded(const tt_state *st)
{
    int n = 0;
    for (size_t i = 0; i < st->steps.len; i++)
        n += st->steps.data[i].kind == TT_STEP_STORAGE_ALIGN;
    return n;
}

/* Shared rows padded against bank conflicts (SA, TVM's storage_align): GPU sampling pads some
 * samples, each only where the worst read of local memory then takes fewer passes, and the
 * mutation switches a stage's padding off, or on where that spares conflicts; every padded state
 * computes the definition. */
static void gpu_samples_pad_shared_rows_against_bank_conflicts(void **state)
{
    (void)state;
    static const char *const workloads[] = {"matmul:M=64,N=128,K=32",
                                            "batch_matmul:B=2,M=32,N=64,K=16"};
    int padded = 0, plain = 0, added = 0, removed = 0;
    for (size_t wi = 0; wi < sizeof(workloads) / sizeof(workloads[0]); wi++) {
        tt_workload *w = parse(workloads[wi]);
        tt_sketch_space sp;
        tt_errbuf err = {{0}};
        gpu_space(w, 256, &sp);
        tt_rng rng;
        tt_rng_seed(&rng, 5 + wi);
        int was = padded + added + removed, removed_was = removed;
        /* each workload until 10 are seen, one removal among them (rarer: a padded sample's
         * mutation picks its padded stage) */
        for (int k = 0; k < 600 && (padded + added + removed < was + 10 || removed == removed_was);
             k++) {
            tt_state *st, *mu;
            if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
                continue;
            int ways = bank_ways(w, st);
            if (count_padded(st) > 0) {
                tt_state *un = unpadded(w, st);
                assert_true(ways < bank_ways(w, un));
                check(w, st, "GPU sample with padded rows");
                tt_state_free(un);
                padded++;
            } else if (ways > 1) {
                plain++;
            } else {
                tt_state_free(st);
                continue;
            }
            /* the mutation picks a shared stage: its padding dropped (no better than padded),
             * or, on one still unpadded, added where that spares conflicts */
            if (!tt_sketch_mutate_kind(&sp, st, TT_MUTATE_PAD_SHARED, &rng, &mu, &err)) {
                if (count_padded(mu) < count_padded(st)) {
                    assert_true(bank_ways(w, mu) >= ways);
                    removed++;
                } else {
                    assert_int_equal(count_padded(mu), count_padded(st) + 1);
                    assert_true(bank_ways(w, mu) < ways);
                    check(w, mu, "GPU mutant with padded rows");
                    added++;
                }
                tt_state_free(mu);
            } else {
                assert_non_null(strstr(err.msg, "mutation does not apply"));
            }
            tt_state_free(st);
        }
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
    printf("padded rows: %d samples padded (%d unpadded with conflicts), the mutation padded %d "
           "and unpadded %d\n",
           padded, plain, added, removed);
    assert_true(padded >= 2 && plain >= 2 && added >= 2 && removed >= 2);
}

/* GPU samples with virtual threads (vthread loops of 2 or more): lowered, each vthread loop holds
 * only its own thread's statements (the shared fetch runs once for all of them), and the program
 * computes the definition. */
static void gpu_virtual_threads_fetch_once(void **state)
{
    (void)state;
    static const char *const workloads[] = {
        "matmul:M=64,N=64,K=16",
        "batch_matmul:B=2,M=16,N=32,K=8",
        "conv2d_nhwc:N=1,H=6,W=6,CI=8,CO=16,K=3,S=1,P=1",
        "conv2d_nchw:N=1,CI=4,H=6,W=6,CO=16,K=3,S=1,P=1",
        /* two products: the first one's result an intermediate in global memory, which the
         * virtual threads of its kernel write in different places */
        "te:T[i,j] += A[i,r] * B[r,j]; C[i,j] += T[i,s] * D[s,j]; T:float32[32,32]; "
        "A:float32[32,8]; B:float32[8,32]; C:float32[32,32]; D:float32[32,32]; r:8; s:32",
    };
    for (size_t wi = 0; wi < sizeof(workloads) / sizeof(workloads[0]); wi++) {
        tt_workload *w = parse(workloads[wi]);
        tt_sketch_space sp;
        tt_errbuf err = {{0}};
        gpu_space(w, 256, &sp);
        tt_rng rng;
        tt_rng_seed(&rng, 11 + wi);
        int got = 0;
        for (int k = 0; k < 1600 && got < 3;
             k++) { /* valid samples of the chained products are rare */
            tt_state *st;
            if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
                continue;
            int64_t vthreads = 1;
            for (size_t g = 0; g < st->stages.len; g++)
                for (int i = 0; i < st->stages.data[g].niters; i++)
                    if (st->stages.data[g].iters[i].ann == TT_ANN_VTHREAD)
                        vthreads *= st->stages.data[g].iters[i].extent;
            tt_program *prog;
            if (vthreads > 1 && !tt_lower(st, &prog, &err)) {
                if (vthread_loops_are_leaves(prog, prog->root, false)) {
                    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
                    char *ir = tt_program_print(prog);
                    fprintf(stderr, "%s\n", ir);
                    fail_msg("%s %s: a vthread loop holds more than its thread's work (above)",
                             w->key, steps);
                }
                check(w, st, "GPU sample with virtual threads");
                tt_program_free(prog);
                got++;
            }
            tt_state_free(st);
        }
        printf("%s: %d samples with virtual threads checked\n", w->key, got);
        assert_true(got >= 2);
        tt_sketch_space_free(&sp);
        tt_workload_free(w);
    }
}

/* Vector register tiles (tt_sketch_vector_tile): GPU sampling vectorises some register tiles'
 * innermost loop and their copy-out's, the mutation switches one on or off, and each computes the
 * definition; vectorised, the product reads the shared tile as vectors. */
static void gpu_vector_tiles_switch_on_and_off(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=32,N=64,K=16");
    tt_sketch_space sp;
    tt_errbuf err = {{0}};
    gpu_space(w, 256, &sp);
    tt_rng rng;
    tt_rng_seed(&rng, 5);
    int samples = 0, with = 0, on = 0, off = 0;
    for (int k = 0; k < 200 && samples < 16; k++) {
        tt_state *st, *mu;
        if (tt_sketch_sample(&sp, -1, &rng, &st, &err))
            continue;
        samples++;
        int va = 0, vb = 0;
        for (size_t g = 0; g < st->stages.len; g++)
            for (int i = 0; i < st->stages.data[g].niters; i++)
                va += st->stages.data[g].iters[i].ann == TT_ANN_VECTORIZE &&
                      !strcmp(st->stages.data[g].scope, "local");
        with += va > 0;
        if (!tt_sketch_mutate_kind(&sp, st, TT_MUTATE_VECTOR_TILE, &rng, &mu, &err)) {
            for (size_t g = 0; g < mu->stages.len; g++)
                for (int i = 0; i < mu->stages.data[g].niters; i++)
                    vb += mu->stages.data[g].iters[i].ann == TT_ANN_VECTORIZE &&
                          !strcmp(mu->stages.data[g].scope, "local");
            assert_int_equal(abs(va - vb), 1);
            on += vb > va;
            off += vb < va;
            check(w, mu, "GPU vector-tile mutant");
            tt_state_free(mu);
        }
        check(w, st, "GPU sample");
        tt_state_free(st);
    }
    printf("vector tiles: %d of %d GPU samples; the mutation switched %d on and %d off\n", with,
           samples, on, off);
    assert_true(with > 0 && with < samples);
    assert_true(on > 0 && off > 0);
    tt_sketch_space_free(&sp);
    tt_workload_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counts_match_tvm),
        cmocka_unit_test(gpu_counts_match_tvm),
        cmocka_unit_test(gpu_default_tiles_what_can_be_tiled),
        cmocka_unit_test(gpu_matrix_vector_products_share_their_reductions),
        cmocka_unit_test(gpu_prime_extents_take_padded_tiles),
        cmocka_unit_test(gpu_default_fits_the_least_local_memory),
        cmocka_unit_test(gpu_fetch_splits_take_more_threads_than_elements),
        cmocka_unit_test(gpu_mali_stages_nothing_in_local_memory),
        cmocka_unit_test(gpu_search_offers_only_kernels_within_the_device),
        cmocka_unit_test(gpu_buffers_bound_local_memory),
        cmocka_unit_test(gpu_samples_bind_within_the_limits),
        cmocka_unit_test(gpu_registers_copy_inputs_read_along_the_reduction),
        cmocka_unit_test(search_rounds_offer_each_program_once),
        cmocka_unit_test(factor_schemes),
        cmocka_unit_test(sketch_structure),
        cmocka_unit_test(constant_index_on_unit_axis_still_fuses),
        cmocka_unit_test(register_tiles_fit_the_registers),
        cmocka_unit_test(tile_mutation_moves_a_factor),
        cmocka_unit_test(samples_and_mutants_compute_the_definition),
        cmocka_unit_test(pointwise_weights_are_packed),
        cmocka_unit_test(matmul_epilogue_fuses_across_unit_axes),
        cmocka_unit_test(padding_is_sometimes_inlined),
        cmocka_unit_test(transforms_stay_out_of_products),
        cmocka_unit_test(gpu_large_tile_is_a_128_square),
        cmocka_unit_test(gpu_double_buffer_fetches_ahead),
        cmocka_unit_test(gpu_virtual_threads_fetch_once),
        cmocka_unit_test(gpu_samples_pad_shared_rows_against_bank_conflicts),
        cmocka_unit_test(gpu_vector_tiles_switch_on_and_off),
    };
    /* TT_TEST_FILTER=NAME runs the tests whose names match (cmocka's wildcards), TT_TEST_SKIP
     * skips them: CTest runs the GPU cases (gpu_*) and the others as two tests */
    if (getenv("TT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("TT_TEST_FILTER"));
    if (getenv("TT_TEST_SKIP"))
        cmocka_set_skip_filter(getenv("TT_TEST_SKIP"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
