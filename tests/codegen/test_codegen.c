/* Code generation: random legal schedules of every operator, compiled through LLVM and run,
 * compute what the reference evaluator computes; explicit vectors and parallel loops are used;
 * aarch64 objects are produced without a cross toolchain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>
#include <elf.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <pthread.h>

#include "base/strbuf.h"
#include "codegen/codegen.h"
#include "schedule/state.h"
#include "schedule/random_schedule.h"
#include "tuner/space.h"

static char dir[128];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-codegen-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Compiles with options `co`, runs and compares with the reference evaluator; returns the stats. */
static void check_compiled_with(const tt_dag *dag, const tt_program *prog, const char *what,
                                uint64_t seed, const tt_codegen_options *co,
                                tt_codegen_stats *stats)
{
    static int counter;
    char so[256];
    snprintf(so, sizeof(so), "%s/k%d.so", dir, counter++);
    tt_target t;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_target_parse("llvm", &t, &err), TT_OK);
    if (tt_codegen_llvm(prog, &t, "kernel", so, co, stats, &err)) {
        char *ir = tt_program_print(prog);
        fail_msg("%s: %s\n%s", what, err.msg, ir);
    }
    tt_kernel *k;
    if (tt_kernel_load(so, "kernel", &k, &err))
        fail_msg("%s: %s", what, err.msg);
    int params[64], nin;
    int np = tt_dag_params(dag, params, 64, &nin);
    void *want[64], *got[64];
    for (int i = 0; i < np; i++) {
        const tt_op *op = &dag->ops.data[params[i]];
        size_t bytes = (size_t)tt_op_numel(op) * (size_t)tt_dtype_bytes(op->dtype);
        want[i] = malloc(bytes);
        got[i] = i < nin ? want[i] : malloc(bytes);
        if (i < nin)
            tt_fill_random(want[i], op->dtype, tt_op_numel(op), seed + (uint64_t)i);
        else
            memset(got[i], 0xff, bytes); /* NaN: an element never written cannot pass */
    }
    assert_int_equal(tt_dag_eval(dag, want, &err), TT_OK);
    void *args[64];
    assert_int_equal(tt_program_args(dag, prog, got, args, &err), TT_OK);
    assert_int_equal(tt_kernel_function(k)(args), 0);
    tt_program_args_free(prog, got, args);
    if (tt_verify_outputs(dag, got, want, 1e-4, 1e-5, NULL, &err)) {
        char *ir = tt_program_print(prog);
        fprintf(stderr, "%s\n", ir);
        free(ir);
        fail_msg("%s: %s", what, err.msg);
    }
    for (int i = 0; i < np; i++) {
        if (got[i] != want[i])
            free(got[i]);
        free(want[i]);
    }
    tt_kernel_unload(k);
    unlink(so);
}

/* Compiles (as a shared object, or as a relocatable object loaded in memory), runs and compares
 * with the reference evaluator; returns the stats. */
static void check_compiled(const tt_dag *dag, const tt_program *prog, const char *what,
                           uint64_t seed, bool object, tt_codegen_stats *stats)
{
    tt_codegen_options co = {3, 64, 64, NULL, object};
    check_compiled_with(dag, prog, what, seed, &co, stats);
}

/* The DT_NEEDED names of the shared object at `path`, space-separated, into out. */
static void dynamic_needs(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size);
    assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC)
            continue;
        const char *str = (const char *)b + sh[sh[i].sh_link].sh_offset;
        const Elf64_Dyn *d = (const Elf64_Dyn *)(b + sh[i].sh_offset);
        for (; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_NEEDED)
                snprintf(out + strlen(out), n - strlen(out), "%s ", str + d->d_un.d_val);
    }
    free(b);
}

#define SCHEDULES 12

static void compiled_random_schedules_match_the_definition(void **state)
{
    int compiled = 0, objects = 0;
    tt_codegen_stats total = {0};
    for (size_t w = 0; w < tt_test_nworkloads; w++) {
        tt_workload *wl;
        tt_errbuf err = {{0}};
        const char *const *workloads = tt_test_workloads;
        if (tt_workload_parse(workloads[w], &wl, &err))
            fail_msg("%s: %s", workloads[w], err.msg);
        for (int k = 0; k < SCHEDULES; k++) {
            tt_rng rng;
            tt_rng_seed(&rng, 5000 * w + (uint64_t)k);
            tt_state *st;
            assert_int_equal(tt_state_create(&wl->dag, &st, &err), TT_OK);
            if (k > 0)
                tt_test_random_steps(st, &rng, 2 + k % 8);
            tt_program *prog;
            if (tt_lower(st, &prog, &err) == TT_OK) {
                char what[600];
                char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
                snprintf(what, sizeof(what), "%s %s", workloads[w], steps);
                free(steps);
                tt_codegen_stats s;
#if defined(__x86_64__)
                bool object = k % 2; /* half through the in-memory object loader */
#else
                bool object = false;
#endif
                check_compiled(&wl->dag, prog, what, (uint64_t)k, object, &s);
                objects += object;
                total.vector_loops += s.vector_loops;
                total.parallel_loops += s.parallel_loops;
                total.unrolled_loops += s.unrolled_loops;
                total.scalar_fallbacks += s.scalar_fallbacks;
                total.promoted_tiles += s.promoted_tiles;
                total.rolled_bodies += s.rolled_bodies;
                compiled++;
                tt_program_free(prog);
            }
            tt_state_free(st);
        }
        tt_workload_free(wl);
    }
    printf("codegen: %d compiled schedules matched (%d loaded as objects); %d vector loops, %d "
           "parallel, %d unrolled, %d vectorize fallbacks, %d tiles in values, %d loops kept "
           "rolled\n",
           compiled, objects, total.vector_loops, total.parallel_loops, total.unrolled_loops,
           total.scalar_fallbacks, total.promoted_tiles, total.rolled_bodies);
    assert_true(total.vector_loops > 0);
    assert_true(total.parallel_loops > 0);
    assert_true(total.unrolled_loops > 0);
}

static void tiled_matmul_uses_vectors_and_threads(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=64,N=64,K=64", &w, &err), TT_OK);
    const char *steps =
        "[[\"SP\", 2, 0, 64, [8], 1], [\"SP\", 2, 2, 64, [16], 1], [\"SP\", 2, 4, 64, [4], 1],"
        " [\"RE\", 2, [0, 2, 4, 1, 5, 3]], [\"AN\", 2, 0, 3], [\"AN\", 2, 5, 2], [\"AN\", 2, 4, "
        "1]]";
    tt_step *s;
    size_t n;
    tt_state *st;
    tt_program *prog;
    assert_int_equal(tt_steps_from_json(steps, &s, &n, &err), TT_OK);
    assert_int_equal(tt_state_replay(&w->dag, s, n, &st, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    tt_codegen_stats stats;
    check_compiled(&w->dag, prog, "tiled matmul", 3, false, &stats);
    assert_int_equal(stats.parallel_loops, 1);
    assert_int_equal(stats.vector_loops, 5); /* init, and the update in each of 4 unrolled k.1 */
    assert_int_equal(stats.scalar_fallbacks, 0);
    /* The IR has <16 x float> arithmetic. */
    tt_target t;
    tt_target_parse("llvm", &t, &err);
    char *ir;
    assert_int_equal(tt_codegen_llvm_ir(prog, &t, "kernel", NULL, &ir, &err), TT_OK);
    assert_non_null(strstr(ir, "<16 x float>"));
    /* On this machine the loop runs on our pool; a cross-compiled kernel calls the device's
     * libgomp. */
    assert_non_null(strstr(ir, "@tt_rt1_parallel_for("));
    assert_non_null(strstr(ir, "@tt_rt1_loop_next("));
    assert_null(strstr(ir, "@tt_rt1_thread_num("));
    assert_null(strstr(ir, "GOMP_parallel"));
    free(ir);
    assert_int_equal(tt_target_parse("llvm -mtriple=aarch64-linux-gnu", &t, &err), TT_OK);
    assert_int_equal(tt_codegen_llvm_ir(prog, &t, "kernel", NULL, &ir, &err), TT_OK);
    assert_non_null(strstr(ir, "@GOMP_parallel"));
    assert_non_null(strstr(ir, "@omp_get_thread_num"));
    assert_null(strstr(ir, "tt_rt1_"));
    free(ir);
    /* The host library carries the pool: it needs no libgomp, and defines the pool's entry. */
    char so[256], needed[1024];
    snprintf(so, sizeof(so), "%s/pooled.so", dir);
    assert_int_equal(tt_target_parse("llvm", &t, &err), TT_OK);
    assert_int_equal(tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, &err), TT_OK);
    dynamic_needs(so, needed, sizeof(needed));
    assert_null(strstr(needed, "gomp"));
    assert_non_null(strstr(needed, "libm.so"));
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_non_null(dlsym(h, "tt_rt1_parallel"));
    assert_non_null(dlsym(h, "tt_rt1_parallel_for"));
    assert_non_null(dlsym(h, "tt_rt1_loop_next"));
    dlclose(h);
    unlink(so);
    free(s);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Replays `steps` on `workload`, lowers, compiles and checks it (check_compiled). */
/* A workload under a schedule (an Ansor step list), lowered; free with free_lowered. */
typedef struct {
    tt_workload *w;
    tt_step *steps;
    tt_state *st;
    tt_program *prog;
} lowered;

static lowered lower_steps(const char *workload, const char *steps_json)
{
    lowered l = {0};
    tt_errbuf err = {{0}};
    size_t n;
    if (tt_workload_parse(workload, &l.w, &err) ||
        tt_steps_from_json(steps_json, &l.steps, &n, &err) ||
        tt_state_replay(&l.w->dag, l.steps, n, &l.st, &err) || tt_lower(l.st, &l.prog, &err))
        fail_msg("%s: %s", workload, err.msg);
    return l;
}

static void free_lowered(lowered *l)
{
    free(l->steps);
    tt_program_free(l->prog);
    tt_state_free(l->st);
    tt_workload_free(l->w);
}

/* A program's LLVM IR, or its assembly when as_asm, for target; the caller frees it. */
static char *kernel_text(const tt_program *prog, const char *target, bool as_asm)
{
    tt_target t;
    tt_errbuf err = {{0}};
    if (tt_target_parse(target, &t, &err))
        fail_msg("%s: %s", target, err.msg);
    char *text = NULL;
    if ((as_asm ? tt_codegen_llvm_asm : tt_codegen_llvm_ir)(prog, &t, "kernel", NULL, &text, &err))
        fail_msg("%s", err.msg);
    return text;
}

static void check_steps(const char *workload, const char *steps_json, uint64_t seed, bool object,
                        tt_codegen_stats *stats)
{
    lowered l = lower_steps(workload, steps_json);
    check_compiled(&l.w->dag, l.prog, workload, seed, object, stats);
    free_lowered(&l);
}

/* A grouped convolution's input, read by a vector of output channels, is one value per group of
 * channels (in[(c / 8) * 8 + r]): with the tile of 32 channels clamped at the last group
 * (min(t*32, 176) of 208), the simplifier takes the start out of the division and each vector
 * load becomes a load per group and a shuffle, no gather, computing the definition. */
static void grouped_inputs_load_once_per_group(void **state)
{
    (void)state;
    const char *w =
        "te:t1[i0,i1,i2,i3] = select(i1 >= 1 && i1 < 15 && i2 >= 1 && i2 < 15, "
        "x0[0,i1 - 1,i2 - 1,i3], 0.0); t2[i0,i1,i2,i3] += t1[i0,i1 + r1,i2 + r2,i3 / 8 * 8 + r0] "
        "* w1[r1,r2,r0,i3]; t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = "
        "max(t0[0,i1,i2,i3], 0); t1:float32[1,16,16,208]; x0:float32[1,14,14,208]; "
        "t2:float32[1,14,14,208]; w1:const float32[3,3,8,208]; t0:float32[1,14,14,208]; "
        "w2:const float32[208]; out:float32[1,14,14,208]; r0:8; r1:3; r2:3";
    const char *steps =
        "[[\"CI\", 5], [\"SP\", 6, 3, 208, [32], 1], [\"SP\", 6, 2, 14, [14], 1], "
        "[\"SP\", 6, 1, 14, [7], 1], [\"SP\", 6, 0, 1, [1], 1], "
        "[\"RE\", 6, [0, 2, 4, 6, 1, 3, 5, 7]], [\"CA\", 3, 6, 3], [\"FU\", 6, [0, 1, 2, 3]], "
        "[\"AN\", 6, 0, 3], [\"AN\", 6, 4, 2], [\"SP\", 3, 6, 8, [8], 1], "
        "[\"SP\", 3, 3, 208, [32], 1], [\"SP\", 3, 2, 14, [7], 1], "
        "[\"RE\", 3, [6, 8, 0, 1, 2, 4, 9, 7, 3, 5]], [\"AN\", 3, 7, 1], [\"AN\", 3, 8, 1], "
        "[\"AN\", 3, 9, 2], [\"FU\", 1, [0, 1, 2]], [\"AN\", 1, 0, 3], [\"AN\", 1, 1, 2]]";
    tt_codegen_stats stats;
    check_steps(w, steps, 23, false, &stats);
    assert_true(stats.pattern_loads >= 1);
    assert_int_equal(stats.gathered_loads, 0);
    assert_int_equal(stats.scalar_fallbacks, 0);
}

/* ShuffleNet's channel shuffle within a pixel, out[.., 2c + j] = in[.., 58j + c], under the
 * default schedule (the last axis of 2 fused with the tile of 29 before it, one vector of 58
 * outputs): the lanes read two runs of 29 elements, each a masked vector load, shuffled
 * together, no gather; it computes the definition.  So does a transpose of 4 x 8 read 16 lanes
 * at a time (two runs of 8 in each window of 16). */
static void interleaves_load_in_runs(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"te:out[i0,i1,i2,i3] = x0[i0,i1,i3,i2]; out:float32[3,4,58,2]; x0:float32[3,4,2,58]",
         "[[\"SP\", 1, 3, 2, [2], 1], [\"SP\", 1, 2, 58, [29], 1], [\"SP\", 1, 1, 4, [4], 1], "
         "[\"SP\", 1, 0, 3, [3], 1], [\"RE\", 1, [0, 2, 4, 6, 1, 3, 5, 7]], "
         "[\"FU\", 1, [6, 7]], [\"FU\", 1, [0, 1, 2, 3]], [\"AN\", 1, 0, 3], "
         "[\"AN\", 1, 3, 2]]"},
        {"te:out[i0,i1,i2] = x0[i0,i2,i1]; out:float32[6,8,4]; x0:float32[6,4,8]",
         "[[\"SP\", 1, 2, 4, [4], 1], [\"SP\", 1, 1, 8, [4], 1], [\"SP\", 1, 0, 6, [6], 1], "
         "[\"RE\", 1, [0, 2, 4, 1, 3, 5]], [\"FU\", 1, [4, 5]], [\"FU\", 1, [0, 1, 2]], "
         "[\"AN\", 1, 0, 3], [\"AN\", 1, 2, 2]]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_codegen_stats stats;
        check_steps(cases[i][0], cases[i][1], 41, false, &stats);
        assert_true(stats.run_loads >= 1);
        assert_int_equal(stats.gathered_loads, 0);
        assert_int_equal(stats.scalar_fallbacks, 0);
    }
}

/* A concatenation along the vector's axis guards each input's load by where it starts.  Where
 * every input starts at a multiple of the vector, each vector reads one input: the guard is one
 * branch per vector (uniform_guards), not a scalar loop.  Where one starts mid-vector (24 of 16
 * lanes), the lanes disagree and the loop stays scalar.  Both compute the definition, as does
 * a vector loop longer than the widest vector (128 lanes, as 2 x 64, the inputs 64 wide). */
static void concatenations_branch_once_per_vector(void **state)
{
    (void)state;
    const char *aligned =
        "te:t0[i0,i1] = select(i1 < 32, x0[i0,i1], select(i1 < 48, x1[i0,i1 - 32], "
        "x2[i0,i1 - 48])); out[i0,i1] = max(t0[i0,i1] * w3[i1], 0); x0:float32[8,32]; "
        "x1:float32[8,16]; x2:float32[8,16]; t0:float32[8,64]; w3:const float32[64]; "
        "out:float32[8,64]";
    const char *steps = "[[\"CI\", 3], [\"SP\", 5, 1, 64, [16], 1], [\"AN\", 5, 0, 3], "
                        "[\"AN\", 5, 2, 2]]";
    tt_codegen_stats stats;
    check_steps(aligned, steps, 5, false, &stats);
    assert_true(stats.uniform_guards >= 2);
    assert_int_equal(stats.scalar_fallbacks, 0);
    assert_int_equal(stats.gathered_loads, 0);

    const char *straddling =
        "te:t0[i0,i1] = select(i1 < 24, x0[i0,i1], x1[i0,i1 - 24]); out[i0,i1] = t0[i0,i1] + "
        "1.0; x0:float32[8,24]; x1:float32[8,40]; t0:float32[8,64]; out:float32[8,64]";
    const char *steps2 = "[[\"CI\", 2], [\"SP\", 3, 1, 64, [16], 1], [\"AN\", 3, 2, 2]]";
    check_steps(straddling, steps2, 6, false, &stats);
    assert_int_equal(stats.uniform_guards, 0);

    const char *wide = "te:out[i0,i1] = select(i1 < 64, x0[i0,i1], x1[i0,i1 - 64]); "
                       "x0:float32[4,64]; x1:float32[4,64]; out:float32[4,128]";
    check_steps(wide, "[[\"AN\", 2, 1, 2]]", 7, false, &stats);
    assert_true(stats.uniform_guards >= 1);
    assert_int_equal(stats.scalar_fallbacks, 0);
}

/* A padding guard that does not depend on the vector lane is one scalar branch: a depthwise
 * convolution's padded input (a vector of channels) and a convolution's (a broadcast element)
 * stay vector code, computing the definition, with no scalar fallback. */
static void padding_guards_stay_vector_code(void **state)
{
    static const char *const cases[][2] = {
        {"depthwise_conv2d_nhwc:N=1,H=8,W=8,C=32,K=3,S=2,P=1",
         "[[\"CI\", 1], [\"SP\", 3, 3, 32, [16], 1], [\"RE\", 3, [0, 1, 2, 3, 5, 6, 4]], "
         "[\"AN\", 3, 6, 2]]"},
        {"conv2d_nhwc:N=1,H=6,W=6,CI=4,CO=16,K=3,S=1,P=1",
         "[[\"CI\", 1], [\"RE\", 3, [0, 1, 2, 4, 5, 6, 3]], [\"AN\", 3, 6, 2]]"},
    };
    for (size_t i = 0; i < 2; i++) {
        tt_codegen_stats stats;
        check_steps(cases[i][0], cases[i][1], 11, false, &stats);
        assert_true(stats.vector_loops >= 1);
        assert_int_equal(stats.scalar_fallbacks, 0);
    }
}

/* A reduction split by the vector width and factored into lanes (rfactor) guards its last,
 * partial vector by the lane: the guarded loads are masked vector loads (no scalar fallback),
 * masked-off lanes read nothing past the row, and the softmax computes the definition, for a row
 * of 37 (2 x 16 + 5) and of 32 (no partial vector: no masks). */
static void reductions_factored_into_lanes_use_masked_loads(void **state)
{
    (void)state;
    for (int cols = 37; cols >= 32; cols -= 5) {
        char w[600], steps[900];
        snprintf(w, sizeof(w),
                 "te:t0[i0,i1] max= x0[i0,i1,r0]; t1[i0,i1,i2] = exp(x0[i0,i1,i2] - t0[i0,i1]); "
                 "t2[i0,i1] += t1[i0,i1,r1]; out[i0,i1,i2] = t1[i0,i1,i2] / t2[i0,i1]; "
                 "x0:float32[3,5,%d]; t0:float32[3,5]; t1:float32[3,5,%d]; t2:float32[3,5]; "
                 "out:float32[3,5,%d]; r0:%d; r1:%d",
                 cols, cols, cols, cols, cols);
        snprintf(steps, sizeof(steps),
                 "[[\"SP\", 3, 2, %d, [16], 1], [\"RF\", 3, 3, 2], [\"RE\", 3, [0, 1, 3, 2]], "
                 "[\"SP\", 1, 2, %d, [16], 1], [\"RF\", 1, 3, 2], [\"RE\", 1, [0, 1, 3, 2]], "
                 "[\"FU\", 6, [0, 1]], [\"SP\", 6, 1, %d, [16], 1], [\"AN\", 6, 0, 3], "
                 "[\"AN\", 6, 2, 2], [\"CA\", 5, 6, 0], [\"CA\", 4, 6, 0], [\"CA\", 3, 6, 0], "
                 "[\"CA\", 2, 6, 0], [\"CA\", 1, 6, 0], [\"SP\", 3, 2, %d, [16], 1], "
                 "[\"AN\", 3, 3, 2], [\"AN\", 1, 3, 2], [\"AN\", 4, 3, 2]]",
                 cols, cols, cols, cols);
        tt_codegen_stats stats;
        check_steps(w, steps, 61, false, &stats);
        assert_int_equal(stats.scalar_fallbacks, 0);
        assert_true(stats.vector_loops >= 4);
        if (cols % 16)
            assert_true(stats.masked_loads >= 2); /* the max's row and the sum's */
        else
            assert_int_equal(stats.masked_loads, 0);
    }
}

/* A matrix-vector product as a row kernel (RegNet-Y's head, 440 -> 1000): the reduction of 40
 * split by 16 leaves a guard around the product x[k] * w[n, k] in its last vector, whose two
 * loads are masked by it (masked_loads) and whose lanes beyond the row add 0; the loop stays
 * vector code and computes the definition. */
static void guarded_products_mask_their_loads(void **state)
{
    (void)state;
    const char *w = "te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; "
                    "t0:float32[1,24]; x0:float32[1,40]; w1:const float32[24,40]; "
                    "out:float32[1,24]; w2:const float32[24]; r0:40";
    const char *steps = "[[\"SP\", 2, 2, 40, [16], 1], [\"RF\", 2, 3, 2], "
                        "[\"RE\", 2, [0, 1, 3, 2]], [\"AN\", 2, 3, 2], [\"FU\", 5, [0, 1]], "
                        "[\"AN\", 5, 0, 3], [\"CA\", 3, 5, 0], [\"CA\", 2, 5, 0]]";
    tt_codegen_stats stats;
    check_steps(w, steps, 62, false, &stats);
    assert_int_equal(stats.scalar_fallbacks, 0);
    assert_true(stats.masked_loads >= 2);
}

/* Unrolling emits a body once per iteration; its index arithmetic on the outer loop variables is
 * built once (value numbering while emitting), and a value built in a branch arm (a guarded load)
 * is not reused after the branch, where it would not dominate its use (LLVM's verifier would
 * refuse the module). */
static void unrolled_bodies_share_index_arithmetic(void **state)
{
    /* A 4x32 tile of a 64x64x64 matmul: k's inner 4, i's 4 and j's 2 vectors of 16 unrolled. */
    const char *mm = "matmul:M=64,N=64,K=64";
    const char *mm_steps =
        "[[\"SP\", 2, 0, 64, [4], 1], [\"SP\", 2, 2, 64, [2, 16], 1], [\"SP\", 2, 5, 64, [4], 1], "
        "[\"RE\", 2, [0, 2, 5, 6, 1, 3, 4]], [\"AN\", 2, 3, 1], [\"AN\", 2, 4, 1], "
        "[\"AN\", 2, 5, 1], [\"AN\", 2, 6, 2]]";
    tt_codegen_stats stats;
    check_steps(mm, mm_steps, 3, false, &stats);
    assert_true(stats.unrolled_loops >= 2);
    /* 4 x 4 x 2 = 32 vector multiply-adds, each a load of A, B and C and a store: with the
     * index products and sums of i.0, j.0, k.0 built once, well under 20 instructions each
     * (without numbering: 45). */
    assert_true(stats.emitted_instructions < 32 * 20);
    /* The same subexpressions inside and after a guarded load. */
    check_steps("te:B[i,j] = select(j >= 1, A[i*4+j-1], 0.0) + A[i*4+j]; "
                "A:float32[64]; B:float32[16,4]",
                "[[\"AN\", 1, 1, 1]]", 5, false, &stats);
    check_steps("te:B[i,j] = select(j >= 1, A[i*4+j-1], 0.0) + A[i*4+j]; "
                "A:float32[64]; B:float32[16,4]",
                "[[\"AN\", 1, 0, 1], [\"AN\", 1, 1, 1]]", 5, true, &stats);
}

/* A padded input's multiply-add is skipped, not multiplied by 0, where the input is padding: a
 * convolution with the padding inlined, vectorised over output channels, and a depthwise one with
 * a tile of outputs unrolled, compute the definition.  Guard terms that do not change inside a
 * loop of padded updates (the input row's, inside the loops over columns and channels) are one
 * branch around the loop, not one per update; the column terms of a rolled loop over the padded
 * columns stay a branch per update, and those of an unrolled one are decided. */
static void padded_taps_are_skipped(void **state)
{
    (void)state;
    static const struct {
        const char *workload, *steps;
        bool per_update; /* some updates keep a branch of their own */
    } cases[] = {
        {"conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=32,K=3,S=1,P=1",
         "[[\"CI\", 1], [\"SP\", 3, 3, 32, [16], 1], [\"RE\", 3, [0, 1, 2, 3, 5, 6, 7, 4]], "
         "[\"AN\", 3, 7, 2]]",
         false},
        {"depthwise_conv2d_nhwc:N=1,H=8,W=8,C=32,K=3,S=2,P=1",
         "[[\"CI\", 1], [\"SP\", 3, 3, 32, [16], 1], [\"RE\", 3, [0, 1, 2, 3, 5, 6, 4]], "
         "[\"AN\", 3, 6, 2]]",
         false},
        {"conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=16,K=3,S=1,P=1", "[[\"CI\", 1], [\"AN\", 3, 6, 1]]",
         false},
        {"conv2d_nhwc:N=1,H=6,W=6,CI=4,CO=16,K=3,S=1,P=1",
         "[[\"CI\", 1], [\"RE\", 3, [0, 1, 2, 4, 5, 6, 3]], [\"AN\", 3, 5, 1], "
         "[\"AN\", 3, 6, 2]]",
         false},
        {"conv2d_nhwc:N=1,H=6,W=6,CI=4,CO=4,K=3,S=1,P=1",
         "[[\"CI\", 1], [\"RE\", 3, [0, 1, 3, 4, 5, 6, 2]], [\"AN\", 3, 6, 1]]", false},
        {"conv2d_nhwc:N=1,H=6,W=6,CI=4,CO=4,K=3,S=1,P=1",
         "[[\"CI\", 1], [\"RE\", 3, [0, 1, 3, 4, 5, 6, 2]]]", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_codegen_stats stats;
        check_steps(cases[i].workload, cases[i].steps, 13 + i, i % 2 == 1, &stats);
        assert_true(stats.padded_updates >= 1);
        assert_int_equal(stats.scalar_fallbacks, 0);
        assert_true(stats.guarded_loops >= 1);
        if (cases[i].per_update)
            assert_true(stats.guarded_updates >= 1);
        else
            assert_int_equal(stats.guarded_updates, 0);
    }
}

/* The steps of a 3x3 convolution (8 -> 32 channels, `width` x `width` outputs, padding inlined)
 * accumulated in register tiles of 7 rows by 32 channels with the kernel's columns unrolled
 * inside them (the template's taps_inner), one output row per tile of the outer loop. */
static void taps_inside_channels(int width, int channels, char *out, size_t n)
{
    snprintf(out, n,
             "[[\"CI\", 1], [\"CHW\", 3, \"local\"], [\"SP\", 4, 3, %d, [%d], 1], "
             "[\"SP\", 4, 2, %d, [%d], 1], [\"SP\", 4, 1, %d, [1], 1], [\"SP\", 4, 0, 1, [1], 1], "
             "[\"RE\", 4, [0, 2, 4, 6, 1, 3, 5, 7]], [\"CA\", 3, 4, 3], [\"AN\", 4, 7, 2], "
             "[\"SP\", 3, 6, 8, [8], 1], [\"SP\", 3, 3, %d, [%d], 1], [\"SP\", 3, 2, %d, [7], 1], "
             "[\"RE\", 3, [6, 8, 0, 1, 2, 4, 9, 7, 3, 5]], [\"AN\", 3, 7, 1], [\"AN\", 3, 8, 1], "
             "[\"AN\", 3, 9, 2]]",
             channels, channels, width, width, width, channels, channels, width);
}

static void taps_inside_steps(int width, char *out, size_t n)
{
    taps_inside_channels(width, 32, out, n);
}

/* With a convolution's kernel columns unrolled inside a register tile that spans the output row
 * (taps_inner), whether a row's tap lies in the left or right padding is known while emitting:
 * the padded ones are not emitted, the others branch on no column term, and the kernel computes
 * the definition. */
static void padded_taps_of_unrolled_rows_are_decided_when_emitting(void **state)
{
    (void)state;
    const char *conv = "conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=32,K=3,S=1,P=1";
    char steps[1024];
    taps_inside_steps(7, steps, sizeof(steps));
    tt_codegen_stats stats;
    check_steps(conv, steps, 23, true, &stats);
    /* 7 rows x 3 taps per step of the reduction, each tap's column terms decided: two taps are
     * padding (row 0's left tap, row 6's right tap) and are not emitted; the other 19 update
     * unguarded, behind one branch on the input row's terms around the tile's reduction. */
    assert_int_equal(stats.decided_guards, 21);
    assert_int_equal(stats.padded_updates, 19);
    assert_int_equal(stats.guarded_loops, 1);
    assert_int_equal(stats.guarded_updates, 0);
    assert_int_equal(stats.scalar_fallbacks, 0);
}

/* Configs of the tuner's tiling template for this machine (register-blocked micro-kernels, the
 * padding inlined or computed once, taps inside the tile, packed inputs), compiled, compute the
 * definition; among them are tiles kept in values (llvm_promote.c) and loops kept rolled, and
 * vectors of 48 lanes emitted in pieces. */
static void template_configs_compute_the_definition(void **state)
{
    (void)state;
    static const char *const workloads[] = {
        "conv2d_nhwc:N=1,H=14,W=14,CI=16,CO=32,K=3,S=1,P=1",
        "conv2d_nhwc:N=1,H=14,W=14,CI=16,CO=32,K=3,S=2,P=1",
        "depthwise_conv2d_nhwc:N=1,H=14,W=14,C=32,K=3,S=1,P=1",
        "depthwise_conv2d_nhwc:N=1,H=14,W=14,C=32,K=3,S=2,P=1",
        "matmul:M=64,N=64,K=64",
        /* 48 channels: vectors of 48 lanes in pieces (tt__codegen_vector_piece) */
        "conv2d_nhwc:N=1,H=14,W=14,CI=16,CO=48,K=3,S=1,P=1",
        "depthwise_conv2d_nhwc:N=1,H=14,W=14,C=48,K=3,S=2,P=1",
    };
    tt_target host;
    tt_vector_isa isa;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_target_parse("llvm", &host, &err), TT_OK);
    tt_codegen_vector_isa(&host, &isa);
    int compiled = 0, promoted = 0, rolled = 0;
    for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
        tt_workload *wl;
        tt_space sp;
        if (tt_workload_parse(workloads[w], &wl, &err) ||
            tt_space_init(&sp, &wl->dag, 2, &isa, &err))
            fail_msg("%s: %s", workloads[w], err.msg);
        tt_rng rng;
        tt_rng_seed(&rng, 700 + w);
        for (int k = 0; k < 16; k++) {
            uint64_t idx = tt_rng_below(&rng, sp.size);
            tt_state *st;
            tt_program *prog;
            if (tt_space_apply(&sp, idx, &st, &err) || tt_lower(st, &prog, &err))
                fail_msg("%s config %llu: %s", workloads[w], (unsigned long long)idx, err.msg);
            char what[300];
            snprintf(what, sizeof(what), "%s config %llu", workloads[w], (unsigned long long)idx);
            tt_codegen_stats s;
            check_compiled(&wl->dag, prog, what, (uint64_t)k, k % 2, &s);
            compiled++;
            promoted += s.promoted_tiles;
            rolled += s.rolled_bodies;
            tt_program_free(prog);
            tt_state_free(st);
        }
        tt_workload_free(wl);
    }
    printf("template: %d configs matched, %d tiles in values, %d loops kept rolled\n", compiled,
           promoted, rolled);
    assert_true(promoted > 0);
    assert_true(rolled > 0);
}

/* Compiles the schedule and checks it computes the definition; does its optimised IR keep a loop
 * that LLVM was asked not to unroll? */
static bool keeps_a_rolled_loop(const char *workload, const char *steps, uint64_t seed,
                                tt_codegen_stats *stats)
{
    lowered l = lower_steps(workload, steps);
    char *ir = kernel_text(l.prog, "llvm", false);
    bool kept = strstr(ir, "llvm.loop.unroll.disable") != NULL;
    free(ir);
    check_compiled(&l.w->dag, l.prog, workload, seed, true, stats);
    free_lowered(&l);
    return kept;
}

/* taps_inside_steps(7), or with the tile's rows (o1.1) a rolled loop instead of unrolled. */
static void tile_steps(bool rows_unrolled, char *out, size_t n)
{
    taps_inside_steps(7, out, n);
    const char *rows = "[\"AN\", 3, 8, 1], ";
    char *at = strstr(out, rows);
    assert_non_null(at);
    if (!rows_unrolled)
        memmove(at, at + strlen(rows), strlen(at + strlen(rows)) + 1);
}

/* Lines of the unoptimised IR of `prog` that contain `what`. */
static int unoptimised_lines(const tt_program *prog, const char *what)
{
    tt_target t;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_target_parse("llvm", &t, &err), TT_OK);
    tt_codegen_options o0 = {0, 64, 64, NULL, false};
    char *ir = NULL;
    if (tt_codegen_llvm_ir(prog, &t, "kernel", &o0, &ir, &err))
        fail_msg("%s", err.msg);
    int n = 0;
    for (const char *q = strstr(ir, what); q; q = strstr(q + 1, what))
        n++;
    free(ir);
    return n;
}

/* A register tile's accumulators are values across the reduction (llvm_promote.c): loaded once
 * before the loop over the kernel's rows, carried by phis through the rolled loop over input
 * channels inside it and through the branch on the input row around that loop (padding inlined),
 * stored once after it.  Before, they were loads and stores per multiply-add that LLVM promoted
 * itself, and failed to where the padding's branches were in the way.  The kernel computes the
 * definition.  With the tile's rows a rolled loop inside the reduction, an accumulator's index
 * changes there: nothing is promoted, and the kernel still computes the definition. */
static void accumulator_tiles_are_kept_in_values(void **state)
{
    (void)state;
    const char *conv = "conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=32,K=3,S=1,P=1";
    char steps[1024];
    tile_steps(true, steps, sizeof(steps));
    tt_codegen_stats stats;
    lowered l = lower_steps(conv, steps);
    check_compiled(&l.w->dag, l.prog, conv, 31, true, &stats);
    assert_int_equal(stats.promoted_tiles, 1);
    assert_int_equal(stats.guarded_loops, 1);
    /* The tile's 7 rows of 32 lanes: a phi each at the headers of the loops over kernel rows and
     * input channels, and one at the join of the row's branch. */
    assert_int_equal(unoptimised_lines(l.prog, "= phi <32 x float>"), 21);
    /* Vector stores: the tile's 7 zeros, its 7 values written back once after the reduction and
     * the copy-out's row; stored at each update, the 19 updates would be 19 more. */
    assert_int_equal(unoptimised_lines(l.prog, "store <32 x float>"), 7 + 7 + 1);
    free_lowered(&l);
    tile_steps(false, steps, sizeof(steps));
    check_steps(conv, steps, 33, true, &stats);
    assert_int_equal(stats.promoted_tiles, 0);
}

/* A vector loop whose lanes are not a power of two is emitted as vectors of the largest power of
 * two that divides them, at least 4: LLVM 14 legalised a <48 x float> slowly (a depthwise
 * candidate's code generation 223 ms against 50 for <64 x float>) and into slow code (tuned
 * depthwise configs with 48 channels to a vector ran up to 8x slower).  Here the 7-row register
 * tile of taps_inside_steps with 48, 24 and 12 output channels: every vector is a piece, the
 * pieces of a row are kept in values as slots of their own (a phi each at the three places of
 * accumulator_tiles_are_kept_in_values), and the kernel computes the definition; 6 channels
 * (pieces of 2) stay one vector. */
static void odd_vector_widths_are_emitted_as_power_of_two_pieces(void **state)
{
    (void)state;
    static const struct {
        int channels, piece;
    } cases[] = {{48, 16}, {24, 8}, {12, 4}, {6, 6}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char conv[96], steps[1024], whole[32], piece[32];
        snprintf(conv, sizeof(conv), "conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=%d,K=3,S=1,P=1",
                 cases[c].channels);
        taps_inside_channels(7, cases[c].channels, steps, sizeof(steps));
        snprintf(whole, sizeof(whole), "<%d x float>", cases[c].channels);
        snprintf(piece, sizeof(piece), "= phi <%d x float>", cases[c].piece);
        lowered l = lower_steps(conv, steps);
        tt_codegen_stats stats;
        check_compiled(&l.w->dag, l.prog, conv, 37 + c, true, &stats);
        int pieces = cases[c].channels / cases[c].piece;
        int wholes = cases[c].piece == cases[c].channels ? -1 : unoptimised_lines(l.prog, whole);
        int phis = unoptimised_lines(l.prog, piece);
        free_lowered(&l);
        if (stats.promoted_tiles != 1 || wholes > 0 || phis != 21 * pieces ||
            stats.scalar_fallbacks)
            fail_msg("%d channels: %d tiles in values, %d lines with %s vectors, %d phis of %d "
                     "lanes (want %d), %d scalar fallbacks",
                     cases[c].channels, stats.promoted_tiles, wholes, whole, phis, cases[c].piece,
                     21 * pieces, stats.scalar_fallbacks);
    }
}

/* A rolled reduction loop with a large body stays a loop after optimisation (its loop ID keeps
 * LLVM's unrollers away): here the loop over 8 input channels around the tile's 19 multiply-adds,
 * whose iterations share no input, and the loop around the promoted tile.  It computes the
 * definition.  (A sliding window is left to LLVM: guards_are_decided_on_enclosing_loop_bounds.) */
static void large_reduction_bodies_stay_loops(void **state)
{
    (void)state;
    const char *conv = "conv2d_nhwc:N=1,H=7,W=7,CI=8,CO=32,K=3,S=1,P=1";
    char steps[1024];
    tile_steps(true, steps, sizeof(steps));
    tt_codegen_stats stats;
    bool kept = keeps_a_rolled_loop(conv, steps, 35, &stats);
    /* The loop over input channels, and the loop over output rows around the promoted tile
     * (accumulator_tiles_are_kept_in_values), whose body is now small enough for LLVM to take
     * apart. */
    assert_int_equal(stats.rolled_bodies, 2);
    assert_true(kept);
}

/* A row of 28 outputs in register tiles of 7, the kernel's columns unrolled inside: the loop over
 * the tiles is peeled, its first and last tiles emitted with their padded taps decided (one each)
 * and the interior tiles as a loop whose column guards are decided on its bounds; the kernel
 * computes the definition at both edges and inside. */
static void loops_over_padded_tiles_are_peeled(void **state)
{
    (void)state;
    const char *conv = "conv2d_nhwc:N=1,H=28,W=28,CI=8,CO=32,K=3,S=1,P=1";
    char steps[1024];
    taps_inside_steps(28, steps, sizeof(steps));
    tt_codegen_stats stats;
    check_steps(conv, steps, 25, true, &stats);
    assert_int_equal(stats.peeled_loops, 1);
    /* The first, middle and last tiles each decide the column terms of their 7 x 3 taps; the
     * first tile's left tap of row 0 and the last tile's right tap of row 6 are padding. */
    assert_int_equal(stats.decided_guards, 63);
    assert_int_equal(stats.padded_updates, 61);
    assert_int_equal(stats.guarded_updates, 0);
    /* With the kernel's column a rolled loop outside the tile (r1, inside the rolled loop over
     * tiles o1.0), the tile loop is not peeled; the column loop is, since the bounds of o1.0
     * decide its middle tap's guard (o1.0 * 7 + o1.1 + 1 lies in 1..28). */
    check_steps(conv,
                "[[\"CI\", 1], [\"SP\", 3, 2, 28, [7], 1], "
                "[\"RE\", 3, [0, 1, 2, 5, 6, 7, 3, 4]], [\"AN\", 3, 6, 1], [\"AN\", 3, 7, 2]]",
                26, false, &stats);
    assert_int_equal(stats.peeled_loops, 1);
    /* Nor is anything peeled when no unrolled column is in the guard: the bounds of enclosing
     * loops alone would decide only the middle of a loop that tripled its code. */
    check_steps(conv,
                "[[\"CI\", 1], [\"SP\", 3, 2, 28, [7], 1], "
                "[\"RE\", 3, [0, 1, 2, 5, 6, 7, 3, 4]], [\"AN\", 3, 7, 2]]",
                28, false, &stats);
    assert_int_equal(stats.peeled_loops, 0);
}

/* A depthwise tile of 8 columns by 48 channels (three 16-lane pieces) by 3 rows of taps, in a
 * nest whose rows and column tiles are both guarded on the padding: peeled over both, the 72
 * multiply-adds of its body would be copied 9 times, past the code budget (TT_PEEL_BUDGET), so
 * only the rows are peeled.  With 16 channels (24 multiply-adds) both are: the rows, then the
 * column tiles in each of the row's three copies.  Both compute the definition. */
static void peeling_stays_within_a_code_budget(void **state)
{
    (void)state;
    const char *dw = "depthwise_conv2d_nhwc:N=1,H=16,W=32,C=48,K=3,S=1,P=1";
    char steps[1024];
    for (int wide = 1; wide >= 0; wide--) {
        snprintf(steps, sizeof(steps),
                 "[[\"CHR\", 2, \"local\", [3]], [\"CI\", 1], [\"CHW\", 4, \"local\"], "
                 "[\"SP\", 5, 3, 48, [48], 1], [\"SP\", 5, 2, 32, [32], 1], "
                 "[\"SP\", 5, 1, 16, [4], 1], [\"SP\", 5, 0, 1, [1], 1], "
                 "[\"RE\", 5, [0, 2, 4, 6, 1, 3, 5, 7]], [\"CA\", 4, 5, 3], "
                 "[\"FU\", 5, [0, 1, 2, 3]], [\"AN\", 5, 0, 3], [\"SP\", 4, 5, 3, [1], 1], "
                 "[\"SP\", 4, 3, 48, [%d], 1], [\"SP\", 4, 2, 32, [8], 1], "
                 "[\"RE\", 4, [7, 0, 1, 2, 4, 8, 6, 3, 5]], [\"AN\", 4, 6, 1], "
                 "[\"AN\", 4, 7, 1], [\"AN\", 4, 8, 2], "
                 "[\"PR\", 4, 0, \"auto_unroll_max_step$64\"], [\"CA\", 3, 4, 0], "
                 "[\"AN\", 3, 2, 2]]",
                 wide ? 48 : 16);
        tt_codegen_stats stats;
        check_steps(dw, steps, 29, false, &stats);
        assert_int_equal(stats.peeled_loops, wide ? 1 : 4);
        assert_int_equal(stats.unpeeled_loops, wide ? 3 : 0);
    }
}

/* A stride-2 depthwise kernel: a parallel nest of register tiles of 7 columns by 16 channels,
 * the taps unrolled (auto_unroll_max_step), the weights packed. */
static const char stride2_dw[] = "depthwise_conv2d_nhwc:N=1,H=56,W=56,C=144,K=3,S=2,P=1";
static const char stride2_dw_steps[] =
    "[[\"CI\", 1], [\"CHW\", 3, \"local\"], [\"SP\", 4, 3, 144, [16], 1], "
    "[\"SP\", 4, 2, 28, [28], 1], [\"SP\", 4, 1, 28, [1], 1], [\"SP\", 4, 0, 1, [1], 1], "
    "[\"RE\", 4, [0, 2, 4, 6, 1, 3, 5, 7]], [\"CA\", 3, 4, 3], [\"FU\", 4, [0, 1, 2, 3]], "
    "[\"AN\", 4, 0, 3], [\"AN\", 4, 4, 2], [\"SP\", 3, 5, 3, [1], 1], "
    "[\"SP\", 3, 3, 144, [16], 1], [\"SP\", 3, 2, 28, [7], 1], "
    "[\"RE\", 3, [6, 7, 0, 1, 2, 4, 8, 3, 5]], [\"AN\", 3, 7, 1], [\"AN\", 3, 8, 2], "
    "[\"PR\", 3, 0, \"auto_unroll_max_step$64\"], [\"LR\", 2]]";

/* A stride-2 depthwise kernel whose column guard, ow.0 * 14 + ow.1 * 2 + rw.0 >= 1, depends on
 * the tile loop ow.0 and the tap loop rw.0 outside it, both rolled: the bounds of rw.0 (0..2)
 * decide the guard in every tile but the first, so the tile loop is peeled, and the kernel still
 * computes the definition. */
static void guards_are_decided_on_enclosing_loop_bounds(void **state)
{
    (void)state;
    tt_codegen_stats stats;
    check_steps(stride2_dw, stride2_dw_steps, 27, true, &stats);
    assert_int_equal(stats.peeled_loops, 1);
    /* The loop over kernel columns is a window sliding with the tile's output columns
     * (neighbouring columns read an input element at neighbouring taps): left to LLVM, which
     * shares those loads once it unrolls it. */
    assert_int_equal(stats.rolled_bodies, 0);
}

/* MobileNet-V2's first depthwise convolution as its network builds it untuned (the padding
 * inlined, tiles of 8 columns by 16 channels, the kernel's columns unrolled inside, its rows a
 * rolled loop): each tile's column guard (tile * 8 + column + tap >= 1) is a guard per update,
 * since the tile loop is fused into the parallel loop, where no peeling reaches.  The loop over
 * the kernel's rows is emitted twice behind one branch, the tiles inside the map with no guard
 * and the others as before (emit_interior).  On an 8 x 8 map every tile touches both borders:
 * one copy.  Both compute the definition. */
static void interior_tiles_are_emitted_without_guards(void **state)
{
    (void)state;
    for (int size = 56; size >= 8; size -= 48) {
        char w[1024], steps[1024];
        snprintf(w, sizeof(w),
                 "te:t1[i0,i1,i2,i3] = select(i1 >= 1 && i1 < %d && i2 >= 1 && i2 < %d, "
                 "x0[0,i1 - 1,i2 - 1,i3], 0.0); t2[i0,i1,i2,i3] += t1[i0,i1 + r0,i2 + r1,i3] * "
                 "w1[r0,r1,0,i3]; t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = "
                 "max(min(t0[0,i1,i2,i3], 6.0), 0.0); t1:float32[1,%d,%d,32]; "
                 "x0:float32[1,%d,%d,32]; t2:float32[1,%d,%d,32]; w1:const float32[3,3,1,32]; "
                 "t0:float32[1,%d,%d,32]; w2:const float32[32]; out:float32[1,%d,%d,32]; r0:3; "
                 "r1:3",
                 size + 1, size + 1, size + 2, size + 2, size, size, size, size, size, size, size,
                 size);
        snprintf(steps, sizeof(steps),
                 "[[\"CI\", 1], [\"CI\", 5], [\"SP\", 6, 3, 32, [16], 1], "
                 "[\"SP\", 6, 2, %d, [8], 1], [\"SP\", 6, 1, %d, [1], 1], "
                 "[\"SP\", 6, 0, 1, [1], 1], [\"RE\", 6, [0, 2, 4, 6, 1, 3, 5, 7]], "
                 "[\"CA\", 3, 6, 3], [\"FU\", 6, [0, 1, 2, 3]], [\"AN\", 6, 0, 3], "
                 "[\"AN\", 6, 4, 2], [\"SP\", 3, 5, 3, [3], 1], [\"SP\", 3, 3, 32, [16], 1], "
                 "[\"SP\", 3, 2, %d, [8], 1], [\"RE\", 3, [0, 1, 2, 4, 6, 7, 8, 3, 5]], "
                 "[\"AN\", 3, 7, 1], [\"AN\", 3, 8, 2], "
                 "[\"PR\", 3, 0, \"auto_unroll_max_step$512\"], [\"LR\", 2]]",
                 size, size, size);
        tt_codegen_stats stats;
        check_steps(w, steps, 41, size == 56, &stats);
        if (stats.interior_loops != (size == 56))
            fail_msg("%dx%d map: %d loops split for the interior", size, size,
                     stats.interior_loops);
    }
}

/* A register tile of 14 rows by 2 vectors (28 of AVX-512's 32 registers) stays in registers across
 * the reduction: LLVM proves that the accumulators (a stack buffer) do not alias the inputs only
 * by tracking every use of the buffer, and gave up past 20, so every FMA of such a tile loaded and
 * stored its accumulator (conv2d C9 at 0.4 of its speed).  Scoped-noalias metadata on every
 * access says it instead: no FMA reads its accumulator from the stack, and the kernel computes
 * the definition. */
static void large_register_tiles_stay_in_registers(void **state)
{
    (void)state;
    /* Two rows of 14 outputs by 32 channels, the padding computed once: the tile's buffer has
     * 2 x 14 row accesses of each kind. */
    const char *conv = "conv2d_nhwc:N=1,H=14,W=14,CI=16,CO=32,K=3,S=1,P=1";
    const char *steps =
        "[[\"CHW\", 3, \"local\"], [\"SP\", 4, 3, 32, [32], 1], [\"SP\", 4, 2, 14, [14], 1], "
        "[\"SP\", 4, 1, 14, [2], 1], [\"SP\", 4, 0, 1, [1], 1], "
        "[\"RE\", 4, [0, 2, 4, 6, 1, 3, 5, 7]], [\"CA\", 3, 4, 3], [\"AN\", 4, 7, 2], "
        "[\"SP\", 3, 6, 16, [16], 1], [\"SP\", 3, 3, 32, [32], 1], [\"SP\", 3, 2, 14, [14], 1], "
        "[\"RE\", 3, [6, 7, 8, 0, 1, 2, 4, 9, 3, 5]], [\"AN\", 3, 8, 1], [\"AN\", 3, 9, 2], "
        "[\"AN\", 1, 3, 2]]";
    lowered l = lower_steps(conv, steps);
    char *text = kernel_text(l.prog, "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", true);
    int fmas = 0, from_stack = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        snprintf(buf, sizeof(buf), "%.*s", (int)(n < 255 ? n : 255), line);
        if (strstr(buf, "vfmadd")) {
            fmas++;
            from_stack += strstr(buf, "(%rsp") != NULL;
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    assert_true(fmas >= 28); /* 14 rows x 2 vectors per step of the reduction */
    if (from_stack)
        fail_msg("%d of %d FMAs read their accumulator from the stack", from_stack, fmas);
    free_lowered(&l);
    /* On this machine it computes the definition (any ISA: the tile spills where it must). */
    check_steps(conv, steps, 21, true, NULL);
}

/* Each buffer is its own alias scope: a kernel that accumulates straight into its output (no
 * cache_write) keeps the output row in registers across the reduction and loads an input element
 * once for the four columns it feeds, which LLVM cannot do when a store to C may alias A. */
static void stores_to_outputs_do_not_clobber_inputs(void **state)
{
    (void)state;
    const char *mm = "matmul:M=64,N=64,K=64";
    /* i, j.0, k, j.1 (4, unrolled): C[i, 4j.0 + j.1] += A[i, k] * B[k, 4j.0 + j.1] */
    const char *steps =
        "[[\"SP\", 2, 1, 64, [4], 1], [\"RE\", 2, [0, 1, 3, 2]], [\"AN\", 2, 3, 1]]";
    lowered l = lower_steps(mm, steps);
    char *ir = kernel_text(l.prog, "llvm", false);
    int loads = 0, stores = 0;
    for (const char *q = ir; (q = strstr(q, "load float,")); q++)
        loads++;
    for (const char *q = ir; (q = strstr(q, "store float ")); q++)
        stores++;
    free(ir);
    free_lowered(&l);
    /* A once and B four times per k, C's four elements stored once after the k loop; with one
     * scope for all parameters, 8 loads and 8 stores: C loaded and stored in every k. */
    if (loads != 5 || stores != 4)
        fail_msg("%d loads and %d stores of floats; expected 5 and 4", loads, stores);
    check_steps(mm, steps, 5, false, NULL);
}

/* Index arithmetic (64-bit: loop variables and the indices built from them) carries `nsw`, which
 * InstCombine otherwise proved for each add by itself (docs/codegen.md, seventeenth round); a
 * tensor's own integer arithmetic keeps wrapping semantics.  Both compute the definition. */
static void index_arithmetic_is_said_not_to_overflow(void **state)
{
    (void)state;
    lowered mm = lower_steps("matmul:M=8,N=8,K=8", "[]");
    assert_true(unoptimised_lines(mm.prog, "= mul nsw i64 ") > 0);
    assert_true(unoptimised_lines(mm.prog, "= add nsw i64 ") > 0);
    check_compiled(&mm.w->dag, mm.prog, "matmul", 43, false, NULL);
    free_lowered(&mm);
    const char *ints = "te:C[i] = A[i] * B[i] + A[i]; A:int32[16]; B:int32[16]; C:int32[16]";
    lowered l = lower_steps(ints, "[]");
    assert_int_equal(unoptimised_lines(l.prog, "= mul i32 "), 1);
    assert_int_equal(unoptimised_lines(l.prog, "= add i32 "), 1);
    assert_int_equal(unoptimised_lines(l.prog, " nsw i32 "), 0);
    check_compiled(&l.w->dag, l.prog, ints, 44, false, NULL);
    free_lowered(&l);
}

/* Bool tensors are bytes (0 or 1; a load reads any byte but 0 as true, as the interpreter does):
 * a mask computed from comparisons and stored, a mask read and turned into floats by select and a
 * cast, masks combined; all compute the definition, vectorised and not. */
static void bool_tensors_are_bytes(void **state)
{
    (void)state;
    const char *const kernels[] = {
        "te:O[i] = A[i] > 0.25 && !(B[i] < -0.5) || A[i] == B[i]; A:float32[64]; B:float32[64]; "
        "O:bool[64]",
        "te:O[i,j] = select(M[i,j], A[i,j], -2.0 * A[i,j]) + float32(M[j,i]); M:bool[16,16]; "
        "A:float32[16,16]; O:float32[16,16]",
        "te:O[i] = !M[i] || N[i]; M:bool[64]; N:bool[64]; O:bool[64]",
    };
    /* the output is stage 2 of each: split its last axis by 8 and vectorise the inner part */
    const char *const vectorised[] = {"[[\"SP\", 2, 0, 64, [8], 1], [\"AN\", 2, 1, 2]]",
                                      "[[\"SP\", 2, 1, 16, [8], 1], [\"AN\", 2, 2, 2]]",
                                      "[[\"SP\", 2, 0, 64, [8], 1], [\"AN\", 2, 1, 2]]"};
    for (int k = 0; k < 3; k++)
        for (int v = 0; v < 2; v++) {
            lowered l = lower_steps(kernels[k], v ? vectorised[k] : "[]");
            check_compiled(&l.w->dag, l.prog, kernels[k], 45 + k, false, NULL);
            free_lowered(&l);
        }
}

/* Every buffer reaches LLVM's alias analysis as an identified object, a `noalias` parameter of the
 * function that holds the code: the kernel's three parameters in its body, the three captured by
 * its parallel body in that one's.  BasicAA, which LLVM asks first, then tells two buffers apart at
 * once, where for two loaded pointers it decomposed both addresses before the scoped-noalias
 * metadata answered (docs/codegen.md, sixteenth round).  The bodies are inlined back at the end of
 * the pipeline: the optimised kernel has none, and it computes the definition. */
static void buffers_are_distinct_objects_to_alias_analysis(void **state)
{
    (void)state;
    lowered l = lower_steps(stride2_dw, stride2_dw_steps);
    assert_int_equal(unoptimised_lines(l.prog, "define internal i32 @kernel.body("), 1);
    assert_int_equal(unoptimised_lines(l.prog, "define internal void @kernel.parallel.0.body("), 1);
    assert_int_equal(unoptimised_lines(l.prog, "* noalias %"), 3 + 3);
    char *ir = kernel_text(l.prog, "llvm", false);
    assert_null(strstr(ir, "@kernel.body"));
    assert_null(strstr(ir, "@kernel.parallel.0.body"));
    free(ir);
    check_compiled(&l.w->dag, l.prog, stride2_dw, 41, true, NULL);
    free_lowered(&l);
}

/* A kernel of as many tensors as a workload may have (a network's fused kernel with its
 * constants) states that every buffer is apart from all the others: the output's store carries
 * a noalias list of every input. */
static void every_other_buffer_is_in_the_noalias_list(void **state)
{
    (void)state;
    enum { INPUTS = TT_MAX_STAGES - 1 }; /* the widest workload: one stage per buffer */
    tt_strbuf sb = {0};
    tt_strbuf_append(&sb, "te:C[i] = A0[i]");
    for (int k = 1; k < INPUTS; k++)
        tt_strbuf_printf(&sb, " + A%d[i]", k);
    for (int k = 0; k < INPUTS; k++)
        tt_strbuf_printf(&sb, "; A%d:float32[16]", k);
    tt_strbuf_append(&sb, "; C:float32[16]");
    lowered l = lower_steps(sb.data, "[]");
    char *ir = kernel_text(l.prog, "llvm", false);
    /* store float ..., !alias.scope !S, !noalias !N  ...  !N = !{!a, !b, ...} */
    const char *store = strstr(ir, "store float ");
    assert_non_null(store);
    const char *na = strstr(store, "!noalias !");
    assert_non_null(na);
    char def[32];
    snprintf(def, sizeof(def), "\n!%d = !{", atoi(na + strlen("!noalias !")));
    const char *node = strstr(ir, def);
    assert_non_null(node);
    int scopes = 1;
    for (const char *q = node + strlen(def); *q && *q != '}'; q++)
        scopes += *q == ',';
    assert_int_equal(scopes, INPUTS);
    free(ir);
    free_lowered(&l);
    check_steps(sb.data, "[]", 7, false, NULL);
    free(sb.data);
}

/* A split by 1 leaves unit loops and index terms multiplied by 1 or added to 0: emitted code is
 * the same as without the split. */
static void unit_loops_emit_nothing(void **state)
{
    (void)state;
    const char *mm = "matmul:M=64,N=64,K=64";
    tt_codegen_stats plain, unit;
    check_steps(mm, "[]", 3, false, &plain);
    check_steps(mm, "[[\"SP\", 2, 0, 64, [1, 1], 1], [\"SP\", 2, 4, 64, [1], 1]]", 3, false, &unit);
    assert_int_equal(unit.emitted_instructions, plain.emitted_instructions);
}

/* The steps of a 64^3 matmul that copies `rows` rows of B (a vector each) into B.local at every
 * step of the outer reduction, then accumulates C in k.0, i, k.1, j (vector) order. */
static void packed_b_steps(int rows, char *out, size_t n)
{
    snprintf(out, n,
             "[[\"CHR\", 1, \"local\", [2]], [\"SP\", 3, 2, 64, [%d], 1], "
             "[\"RE\", 3, [2, 0, 3, 1]], [\"AN\", 3, 3, 2], [\"CA\", 2, 3, 0], "
             "[\"AN\", 2, 1, 2]]",
             rows);
}

/* The inner reduction of a register tile that reads packed weights prefetches the next panel of
 * them, one line a step (llvm_prefetch.c), and computes the definition; with the weights not
 * packed (no LR step) or not constant, it prefetches nothing. */
static void register_tiles_prefetch_the_next_weight_panel(void **state)
{
    (void)state;
    static const char *const steps =
        "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 1, 64, [32], 1], [\"SP\", 3, 0, 32, [16], 1], "
        "[\"RE\", 3, [0, 2, 1, 3]], [\"CA\", 2, 3, 1], [\"FU\", 3, [0, 1]], [\"AN\", 3, 0, 3], "
        "[\"AN\", 3, 2, 2], [\"SP\", 2, 2, 256, [128], 1], [\"SP\", 2, 1, 64, [32], 1], "
        "[\"SP\", 2, 0, 32, [8], 1], [\"RE\", 2, [4, 0, 2, 5, 1, 3]], [\"AN\", 2, 4, 1], "
        "[\"AN\", 2, 5, 2]%s]";
    static const struct {
        const char *weights, *lr;
        int prefetched;
    } cases[] = {
        {"const float32", ", [\"LR\", 1]", 1}, {"const float32", "", 0}, {"float32", "", 0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char te[256], st[1024];
        snprintf(te, sizeof(te),
                 "te:o[i,j] += x[i,r] * w[r,j]; o:float32[32,64]; x:float32[32,256]; "
                 "w:%s[256,64]; r:256",
                 cases[c].weights);
        snprintf(st, sizeof(st), steps, cases[c].lr);
        tt_codegen_stats stats;
        check_steps(te, st, 71 + c, true, &stats);
        if (stats.prefetched_panels != cases[c].prefetched)
            fail_msg("%s%s: %d loops prefetch, want %d", cases[c].weights, cases[c].lr,
                     stats.prefetched_panels, cases[c].prefetched);
    }
}

/* A copy through a local buffer larger than the registers stays a loop after optimisation (its
 * loop ID asks LLVM not to unroll it); a smaller one is left to LLVM, which may keep such a
 * buffer in registers once the copy is unrolled.  Both compute the definition. */
static void copies_through_large_local_buffers_stay_loops(void **state)
{
    (void)state;
    const char *mm = "matmul:M=64,N=64,K=64";
    static const struct {
        int rows, rolled; /* B.local: rows x 64 floats; 16 rows = 4 KiB, 8 rows = 2 KiB */
    } cases[] = {{16, 1}, {8, 0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char steps[512];
        packed_b_steps(cases[c].rows, steps, sizeof(steps));
        tt_codegen_stats stats;
        bool kept = keeps_a_rolled_loop(mm, steps, 13, &stats);
        if (kept != (cases[c].rolled > 0) || stats.rolled_copies != cases[c].rolled)
            fail_msg("%d rows of B: %d rolled copies, loop ID %s in the optimised IR",
                     cases[c].rows, stats.rolled_copies, kept ? "kept" : "absent");
    }
}

/* A local buffer too large for registers set to 0 stays a loop too: here C.local of 16 rows x 64
 * (4 KiB), whose fill LLVM's full unroller had made 64 vector stores (448 in a conv2d candidate,
 * which every pass after it then walked).  The copy out of it was kept rolled before (two loops);
 * the fill is the third.  With 4 rows (1 KiB) nothing is kept.  Both compute the definition. */
static void fills_of_large_local_buffers_stay_loops(void **state)
{
    (void)state;
    static const struct {
        int rows, rolled;
    } cases[] = {{16, 3}, {4, 0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char steps[512];
        snprintf(steps, sizeof(steps),
                 "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 0, 64, [%d], 1], [\"RE\", 3, [0, 2, 1]], "
                 "[\"CA\", 2, 3, 0], [\"SP\", 2, 1, 64, [16], 1], [\"RE\", 2, [0, 3, 1, 2]], "
                 "[\"AN\", 2, 3, 2]]",
                 cases[c].rows);
        tt_codegen_stats stats;
        bool kept = keeps_a_rolled_loop("matmul:M=64,N=64,K=64", steps, 41 + c, &stats);
        if (kept != (cases[c].rolled > 0) || stats.rolled_copies != cases[c].rolled)
            fail_msg("%d rows of C.local: %d rolled copies and fills, loop ID %s", cases[c].rows,
                     stats.rolled_copies, kept ? "kept" : "absent");
    }
}

/* A vectorised loop longer than the widest vector (max_vector, 64 lanes) is a loop over vectors
 * that divide it, not a scalar loop: here C's initialisation, B.local's copy and the update, 128
 * lanes each, at max_vector 64 and 32; a prime extent (67) stays scalar. */
static void long_vector_loops_are_loops_over_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *workload;
        int max_vector, vector_loops, scalar_fallbacks;
    } cases[] = {{"matmul:M=64,N=128,K=64", 64, 3, 0},
                 {"matmul:M=64,N=128,K=64", 32, 3, 0},
                 {"matmul:M=64,N=67,K=64", 64, 0, 3}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char steps[512];
        packed_b_steps(16, steps, sizeof(steps));
        lowered l = lower_steps(cases[c].workload, steps);
        tt_codegen_options o = {3, cases[c].max_vector, 64, NULL, true};
        tt_codegen_stats stats;
        check_compiled_with(&l.w->dag, l.prog, cases[c].workload, 29, &o, &stats);
        free_lowered(&l);
        if (stats.vector_loops != cases[c].vector_loops ||
            stats.scalar_fallbacks != cases[c].scalar_fallbacks)
            fail_msg("%s at %d lanes: %d vector loops, %d scalar fallbacks", cases[c].workload,
                     cases[c].max_vector, stats.vector_loops, stats.scalar_fallbacks);
    }
}

/* A register tile of 6 rows over 50, its last tile moved back to rows 44-49 (schedule/lower.c)
 * and run by two threads next to the tile before it: compiled, it computes the definition, the
 * rows both tiles write holding the same values, and its tile is vector code without a guard. */
static void a_moved_back_last_tile_computes_the_definition(void **state)
{
    (void)state;
    const char *mm = "matmul:M=50,N=32,K=24";
    lowered l = lower_steps(
        mm, "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 0, 50, [6], 1], [\"SP\", 3, 2, 32, [16], 1], "
            "[\"RE\", 3, [0, 2, 1, 3]], [\"CA\", 2, 3, 1], [\"FU\", 3, [0, 1]], "
            "[\"AN\", 3, 0, 3], [\"AN\", 3, 2, 2], [\"SP\", 2, 2, 24, [8], 1], "
            "[\"RE\", 2, [2, 3, 0, 1]], [\"AN\", 2, 2, 1], [\"AN\", 2, 3, 2]]");
    char *ir = tt_program_print(l.prog);
    if (!strstr(ir, "min(i.0@j.0@ / 2 * 6, 44)") || strstr(ir, " if "))
        fail_msg("want the last tile moved back, no guard:\n%s", ir);
    free(ir);
    for (int object = 0; object < 2; object++) {
        tt_codegen_stats stats;
        check_compiled(&l.w->dag, l.prog, mm, 31 + (uint64_t)object, object, &stats);
        assert_int_equal(stats.scalar_fallbacks, 0);
        assert_int_equal(stats.parallel_loops, 1);
    }
    free_lowered(&l);
}

/* A buffer allocated in the body of an unrolled loop is allocated once, not once per copy of the
 * body (four copies of a 4 KiB stack buffer before), and the kernel computes the definition. */
static void buffers_in_unrolled_loops_are_allocated_once(void **state)
{
    (void)state;
    const char *mm = "matmul:M=64,N=64,K=64";
    char steps[512];
    packed_b_steps(16, steps, sizeof(steps));
    /* ... and the outer reduction (4 steps, each allocating B.local) unrolled. */
    strcpy(steps + strlen(steps) - 1, ", [\"AN\", 3, 0, 1]]");
    lowered l = lower_steps(mm, steps);
    tt_target t;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_target_parse("llvm", &t, &err), TT_OK);
    tt_codegen_options unoptimised = {0, 64, 64, NULL, false};
    char *ir = NULL;
    if (tt_codegen_llvm_ir(l.prog, &t, "kernel", &unoptimised, &ir, &err))
        fail_msg("%s", err.msg);
    int allocas = 0;
    for (const char *q = ir; (q = strstr(q, "%B.local")); q++)
        allocas += !strncmp(q + strcspn(q, " "), " = alloca", 9);
    free(ir);
    tt_codegen_stats stats;
    check_compiled(&l.w->dag, l.prog, mm, 17, false, &stats);
    free_lowered(&l);
    assert_int_equal(stats.unrolled_loops, 1);
    if (allocas != 1)
        fail_msg("B.local allocated %d times", allocas);
}

/* Intermediates above the stack limit live on the heap; an outlined parallel body must neither
 * free nor touch the caller's heap buffers' lifetimes. */
static void heap_buffers_and_parallel_loops(void **state)
{
    static const char *const cases[][2] = {
        {"softmax:M=128,N=256", "[[\"AN\", 4, 0, 3], [\"AN\", 2, 0, 3]]"},
        {"conv2d_bn_relu:N=1,H=28,W=28,CI=32,CO=32,K=3,S=1,P=1",
         "[[\"CI\", 5], [\"CI\", 7], [\"CI\", 9], [\"AN\", 3, 0, 3], [\"AN\", 10, 1, 3]]"},
    };
    for (size_t i = 0; i < 2; i++) {
        tt_codegen_stats stats;
        check_steps(cases[i][0], cases[i][1], 9, i % 2 == 1, &stats);
        assert_true(stats.parallel_loops >= 1);
    }
}

/* A kernel's heap intermediates are kept between calls (no per-call malloc and page faults in
 * a network), stay correct when two threads call it at once (the second gets blocks of its
 * own), and are freed by <entry>.ws.release, which unloading calls (the sanitizer build checks
 * that nothing leaks). */
typedef struct {
    tt_kernel_fn fn;
    void **args;
    int rc;
} call_job;

static void *call_thread(void *arg)
{
    call_job *j = arg;
    for (int k = 0; k < 20 && !j->rc; k++)
        j->rc = j->fn(j->args);
    return NULL;
}

static void heap_buffers_are_kept_between_calls(void **state)
{
    (void)state;
    lowered l = lower_steps("softmax:M=128,N=256", "[[\"AN\", 4, 0, 3], [\"AN\", 2, 0, 3]]");
    const tt_workload *w = l.w;
    const tt_program *prog = l.prog;
    tt_errbuf err = {{0}};
    tt_target t;
    assert_int_equal(tt_target_parse("llvm", &t, &err), TT_OK);
    for (int object = 0; object < 2; object++) {
        char so[256];
        snprintf(so, sizeof(so), "%s/kept%d.so", dir, object);
        tt_codegen_options co = {3, 64, 64, NULL, object == 1};
        assert_int_equal(tt_codegen_llvm(prog, &t, "kernel", so, &co, NULL, &err), TT_OK);
        /* the release function is there */
        tt_kernel *rel;
        if (tt_kernel_load(so, "kernel" TT_WS_RELEASE_SUFFIX, &rel, &err))
            fail_msg("%s", err.msg);
        tt_kernel_unload(rel);
        tt_kernel *k;
        assert_int_equal(tt_kernel_load(so, "kernel", &k, &err), TT_OK);
        int params[8], nin;
        int np = tt_dag_params(&w->dag, params, 8, &nin);
        assert_int_equal(np, 2);
        const tt_op *in = &w->dag.ops.data[params[0]], *out = &w->dag.ops.data[params[1]];
        size_t nbytes = (size_t)tt_op_numel(out) * sizeof(float);
        float *x = malloc(nbytes), *want = malloc(nbytes),
              *got[2] = {malloc(nbytes), malloc(nbytes)};
        tt_fill_random(x, in->dtype, tt_op_numel(in), 4);
        void *ref[2] = {x, want};
        assert_int_equal(tt_dag_eval(&w->dag, ref, &err), TT_OK);
        /* one thread, repeatedly; then two at once */
        void *a0[2] = {x, got[0]}, *a1[2] = {x, got[1]};
        for (int r = 0; r < 3; r++) {
            memset(got[0], 0xff, nbytes);
            assert_int_equal(tt_kernel_function(k)(a0), 0);
            assert_int_equal(
                tt_verify_outputs(&w->dag, (void *[]){x, got[0]}, ref, 1e-4, 1e-5, NULL, &err),
                TT_OK);
        }
        call_job j[2] = {{tt_kernel_function(k), a0, 0}, {tt_kernel_function(k), a1, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) {
            memset(got[i], 0xff, nbytes);
            assert_int_equal(pthread_create(&th[i], NULL, call_thread, &j[i]), 0);
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(j[i].rc, 0);
            assert_int_equal(
                tt_verify_outputs(&w->dag, (void *[]){x, got[i]}, ref, 1e-4, 1e-5, NULL, &err),
                TT_OK);
        }
        tt_kernel_unload(k);
        free(x);
        free(want);
        free(got[0]);
        free(got[1]);
        unlink(so);
    }
    free_lowered(&l);
}

/* exp, sigmoid, tanh and erf in float32 are straight-line code (no libm call per lane), in
 * vector loops of 8, 16 and 32 lanes and in scalar ones, on this machine's ISA and on AVX2 where
 * it has AVX-512 (the reciprocal estimates differ: RCP14PS, RCPPS): within 4e-7 relative of
 * libm's over the whole range (sigmoid, tanh and erf also 2.5e-7 absolute), 0 / 1 / -1 / a tiny
 * value at the extremes, NaN for NaN.  A division by a constant is a multiply by its reciprocal,
 * within the same bound. */
static void exp_family_is_exact_enough_in_vectors(void **state)
{
    (void)state;
    static const char *const fns[] = {"exp", "sigmoid", "tanh", "erf", "div"};
    static const char *const targets[] = {"llvm", "llvm -mattr=-avx512f"};
    static const int widths[] = {0, 8, 16, 32};
    enum { N = 4096 };
    static float x[N], got[N];
    for (int i = 0; i < N - 8; i++) /* -100 .. 100, denser near 0 */
        x[i] = (float)(100.0 * pow((i - (N - 8) / 2.0) / ((N - 8) / 2.0), 3));
    const float special[8] = {NAN, INFINITY, -INFINITY, 88.7f, -87.0f, 1e-30f, -1e-30f, 0.0f};
    memcpy(x + N - 8, special, sizeof(special));
    tt_errbuf err = {{0}};
    for (int ti = 0; ti < 2; ti++)
        for (int f = 0; f < 5; f++)
            for (int wi = 0; wi < 4; wi++) {
                tt_target t;
                assert_int_equal(tt_target_parse(targets[ti], &t, &err), TT_OK);
                char w[160], steps[128];
                if (f == 4)
                    snprintf(w, sizeof(w),
                             "te:B[i] = A[i] / 1.41421354; A:float32[%d]; B:float32[%d]", N, N);
                else
                    snprintf(w, sizeof(w), "te:B[i] = %s(A[i]); A:float32[%d]; B:float32[%d]",
                             fns[f], N, N);
                snprintf(steps, sizeof(steps), "[[\"SP\", 1, 0, %d, [%d], 1], [\"AN\", 1, 1, 6]]",
                         N, widths[wi]);
                lowered l = lower_steps(w, widths[wi] ? steps : "[]");
                char so[256];
                snprintf(so, sizeof(so), "%s/exp%d%d%d.so", dir, ti, f, wi);
                assert_int_equal(tt_codegen_llvm(l.prog, &t, "kernel", so, NULL, NULL, &err),
                                 TT_OK);
                tt_kernel *k;
                assert_int_equal(tt_kernel_load(so, "kernel", &k, &err), TT_OK);
                void *args[2] = {x, got};
                assert_int_equal(tt_kernel_function(k)(args), 0);
                for (int i = 0; i < N; i++) {
                    double v = x[i];
                    double want = f == 0   ? exp(v)
                                  : f == 1 ? 1 / (1 + exp(-v))
                                  : f == 2 ? tanh(v)
                                  : f == 3 ? erf(v)
                                           : v / 1.41421354;
                    if (isnan(v)) {
                        if (!isnan(got[i]))
                            fail_msg("%s(NaN) = %g", fns[f], got[i]);
                        continue;
                    }
                    if (f == 0 && want > FLT_MAX) /* exp beyond float: inf or the largest float */
                        want = got[i] >= 3.4e38f ? got[i] : INFINITY;
                    if (isinf(want)) {
                        if (got[i] != want)
                            fail_msg("%s(%g) = %g, want %g", fns[f], v, got[i], want);
                        continue;
                    }
                    /* tanh as 1 - 2 / (exp(2x) + 1) loses a float epsilon near 0, erf's
                     * polynomial is within 1.5e-7 */
                    double tol = 4e-7 * fabs(want) + (f == 0 || f == 4 ? 3e-38 : 2.5e-7);
                    if (!(fabs(got[i] - want) <= tol))
                        fail_msg("%s(%.9g) = %.9g, want %.9g (%s, %d lanes)", fns[f], v, got[i],
                                 want, targets[ti], widths[wi]);
                }
                tt_kernel_unload(k);
                unlink(so);
                free_lowered(&l);
            }
}

/* Compilation is thread-safe: the tuner compiles candidates on every core at once. */
typedef struct {
    const tt_program *prog;
    int id;
    tt_status status;
    char msg[512];
} compile_job;

static void *compile_thread(void *arg)
{
    compile_job *j = arg;
    tt_target t;
    tt_errbuf err = {{0}};
    tt_target_parse("llvm", &t, NULL);
    for (int k = 0; k < 4 && !j->status; k++) {
        char so[300];
        snprintf(so, sizeof(so), "%s/t%d-%d.so", dir, j->id, k);
        j->status = tt_codegen_llvm(j->prog, &t, "kernel", so, NULL, NULL, &err);
        unlink(so);
    }
    snprintf(j->msg, sizeof(j->msg), "%s", err.msg);
    return NULL;
}

static void concurrent_compilations_succeed(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    tt_state *st;
    tt_program *prog;
    assert_int_equal(tt_workload_parse("matmul:M=32,N=32,K=32", &w, &err), TT_OK);
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, 2, 0, TT_ANN_PARALLEL, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    enum { N = 6 };
    pthread_t th[N];
    compile_job jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (compile_job){prog, i, TT_OK, ""};
        assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].status)
            fail_msg("thread %d: %s", i, jobs[i].msg);
    }
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

static void aarch64_objects_need_no_cross_toolchain(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=16,N=16,K=16", &w, &err), TT_OK);
    tt_state *st;
    tt_program *prog;
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    int64_t f = 4;
    assert_int_equal(tt_sched_split(st, 2, 1, &f, 1, true, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, 2, 3, TT_ANN_VECTORIZE, &err), TT_ERR_ILLEGAL_STEP);
    int order[4] = {0, 1, 3, 2};
    assert_int_equal(tt_sched_reorder(st, 2, order, 4, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, 2, 3, TT_ANN_VECTORIZE, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, 2, 0, TT_ANN_PARALLEL, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    tt_target t;
    assert_int_equal(tt_target_parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", &t, &err),
                     TT_OK);
    char so[256];
    snprintf(so, sizeof(so), "%s/arm.so", dir);
    if (tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, &err))
        fail_msg("%s", err.msg);
    /* ELF64, little endian, shared object, machine EM_AARCH64 (183). */
    FILE *fp = fopen(so, "rb");
    unsigned char h[64];
    assert_int_equal(fread(h, 1, 64, fp), 64);
    fclose(fp);
    assert_memory_equal(h,
                        "\x7f"
                        "ELF",
                        4);
    assert_int_equal(h[4], 2);
    assert_int_equal(h[5], 1);
    assert_int_equal(h[16] | h[17] << 8, 3);
    assert_int_equal(h[18] | h[19] << 8, 183);
    /* Unsupported kinds and unknown triples are clear errors. */
    assert_int_equal(tt_target_parse("opencl", &t, &err), TT_OK);
    assert_int_equal(tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, &err), TT_ERR_UNSUPPORTED);
    assert_int_equal(tt_target_parse("llvm -mtriple=nonsense-unknown-none", &t, &err), TT_OK);
    assert_int_equal(tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, &err), TT_ERR_UNSUPPORTED);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Writes `n` bytes of `data` to `path`. */
static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 20];
    *n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return buf;
}

/* Relocatable objects load in memory (calls into libgomp through stubs, constants through
 * PC-relative relocations); malformed ones, other machines' and missing entries are errors that
 * say what is wrong, never a crash. */
static void relocatable_objects_load_in_memory_and_bad_ones_are_refused(void **state)
{
#if !defined(__x86_64__)
    skip();
#endif
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=64,N=64,K=64", &w, &err), TT_OK);
    tt_step *steps;
    size_t n;
    tt_state *st;
    tt_program *prog;
    const char *cfg = "[[\"SP\", 2, 0, 64, [8], 1], [\"SP\", 2, 2, 64, [16], 1], "
                      "[\"RE\", 2, [0, 2, 4, 1, 3]], [\"AN\", 2, 0, 3], [\"AN\", 2, 4, 2]]";
    assert_int_equal(tt_steps_from_json(cfg, &steps, &n, &err), TT_OK);
    if (tt_state_replay(&w->dag, steps, n, &st, &err) || tt_lower(st, &prog, &err))
        fail_msg("%s", err.msg);
    tt_target t;
    tt_target_parse("llvm", &t, NULL);
    char obj[256], bad[256];
    snprintf(obj, sizeof(obj), "%s/k.o", dir);
    snprintf(bad, sizeof(bad), "%s/bad.o", dir);
    tt_codegen_options co = {3, 64, 64, NULL, true};
    tt_codegen_stats stats;
    assert_int_equal(tt_codegen_llvm(prog, &t, "kernel", obj, &co, &stats, &err), TT_OK);
    assert_int_equal(stats.parallel_loops, 1);
    assert_true(stats.link_s == 0);
    /* Runs, on all threads, and computes the product. */
    tt_kernel *k;
    if (tt_kernel_load(obj, "kernel", &k, &err))
        fail_msg("%s", err.msg);
    float *a = malloc(64 * 64 * 4), *b = malloc(64 * 64 * 4), *c = malloc(64 * 64 * 4);
    for (int i = 0; i < 64 * 64; i++) {
        a[i] = (float)(i % 7) - 3;
        b[i] = (float)(i % 5) - 2;
    }
    void *args[3] = {a, b, c};
    assert_int_equal(tt_kernel_function(k)(args), 0);
    for (int i = 0; i < 64; i += 9)
        for (int j = 0; j < 64; j += 7) {
            float want = 0;
            for (int q = 0; q < 64; q++)
                want += a[i * 64 + q] * b[q * 64 + j];
            assert_float_equal(c[i * 64 + j], want, 1e-3);
        }
    tt_kernel_unload(k);
    /* A missing entry. */
    assert_int_equal(tt_kernel_load(obj, "nothing", &k, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "no function 'nothing'"));
    /* Truncated at every interesting length: an error each time. */
    size_t len;
    unsigned char *bytes = read_bytes(obj, &len);
    static unsigned char copy[1 << 20];
    memcpy(copy, bytes, len);
    size_t cuts[] = {20, 63, 64, 200, len / 2, len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        write_bytes(bad, copy, cuts[i]);
        tt_status s = tt_kernel_load(bad, "kernel", &k, &err);
        if (s == TT_OK)
            fail_msg("an object cut at %zu bytes of %zu loaded", cuts[i], len);
        assert_true(strlen(err.msg) > 0);
    }
    /* The section table pointed past the end. */
    memcpy(copy, bytes, len);
    uint64_t far = (uint64_t)len * 4;
    memcpy(copy + 40, &far, 8); /* e_shoff */
    write_bytes(bad, copy, len);
    assert_int_equal(tt_kernel_load(bad, "kernel", &k, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "bad section table"));
    /* An aarch64 object: refused with the reason. */
    tt_target arm;
    tt_target_parse("llvm -mtriple=aarch64-linux-gnu", &arm, NULL);
    assert_int_equal(tt_codegen_llvm(prog, &arm, "kernel", bad, &co, NULL, &err), TT_OK);
    assert_int_equal(tt_kernel_load(bad, "kernel", &k, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "x86-64 only"));
    free(a);
    free(b);
    free(c);
    free(steps);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* The vector ISA of a target: the host's features narrowed by -mattr, cross targets by CPU. */
static void vector_isa_follows_the_target(void **state)
{
    tt_target t;
    tt_vector_isa isa;
    tt_target_parse("llvm", &t, NULL);
    tt_target_vector_isa(&t, "+sse2,+avx,+avx2,+fma,+avx512f", &isa);
    assert_string_equal(isa.name, "avx512");
    assert_int_equal(isa.vector_bytes, 64);
    assert_int_equal(isa.vector_regs, 32);
    tt_target_parse("llvm -mattr=-avx512f", &t, NULL);
    tt_target_vector_isa(&t, "+sse2,+avx,+avx2,+fma,+avx512f", &isa);
    assert_string_equal(isa.name, "avx2");
    assert_int_equal(isa.vector_regs, 16);
    assert_true(isa.fma);
    tt_target_parse("llvm", &t, NULL);
    tt_target_vector_isa(&t, "+sse2,-avx,-avx2,-avx512f", &isa);
    assert_string_equal(isa.name, "sse");
    tt_target_parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", &t, NULL);
    tt_target_vector_isa(&t, NULL, &isa);
    assert_string_equal(isa.name, "avx2");
    tt_target_parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", &t, NULL);
    tt_target_vector_isa(&t, NULL, &isa);
    assert_string_equal(isa.name, "avx512");
    tt_target_parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", &t, NULL);
    tt_target_vector_isa(&t, NULL, &isa);
    assert_string_equal(isa.name, "neon");
    assert_int_equal(isa.vector_bytes, 16);
    assert_int_equal(isa.vector_regs, 32);
    /* This machine: what LLVM reads from the CPU. */
    tt_target_parse("llvm", &t, NULL);
    tt_codegen_vector_isa(&t, &isa);
    assert_true(isa.vector_bytes >= 16);
}

static void host_detection_reads_real_features(void **state)
{
    const char *triple, *cpu, *features;
    tt_codegen_host(&triple, &cpu, &features);
    assert_non_null(strstr(triple, "linux"));
    assert_true(strlen(cpu) > 0);
#if defined(__x86_64__)
    /* Every x86-64 CPU has SSE2; the feature string must say so even for a "generic" CPU. */
    assert_non_null(strstr(features, "+sse2"));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_detection_reads_real_features),
        cmocka_unit_test(vector_isa_follows_the_target),
        cmocka_unit_test(relocatable_objects_load_in_memory_and_bad_ones_are_refused),
        cmocka_unit_test(tiled_matmul_uses_vectors_and_threads),
        cmocka_unit_test(aarch64_objects_need_no_cross_toolchain),
        cmocka_unit_test(heap_buffers_and_parallel_loops),
        cmocka_unit_test(heap_buffers_are_kept_between_calls),
        cmocka_unit_test(padding_guards_stay_vector_code),
        cmocka_unit_test(unrolled_bodies_share_index_arithmetic),
        cmocka_unit_test(unit_loops_emit_nothing),
        cmocka_unit_test(padded_taps_are_skipped),
        cmocka_unit_test(large_register_tiles_stay_in_registers),
        cmocka_unit_test(stores_to_outputs_do_not_clobber_inputs),
        cmocka_unit_test(buffers_are_distinct_objects_to_alias_analysis),
        cmocka_unit_test(index_arithmetic_is_said_not_to_overflow),
        cmocka_unit_test(bool_tensors_are_bytes),
        cmocka_unit_test(reductions_factored_into_lanes_use_masked_loads),
        cmocka_unit_test(grouped_inputs_load_once_per_group),
        cmocka_unit_test(interleaves_load_in_runs),
        cmocka_unit_test(concatenations_branch_once_per_vector),
        cmocka_unit_test(guarded_products_mask_their_loads),
        cmocka_unit_test(exp_family_is_exact_enough_in_vectors),
        cmocka_unit_test(every_other_buffer_is_in_the_noalias_list),
        cmocka_unit_test(padded_taps_of_unrolled_rows_are_decided_when_emitting),
        cmocka_unit_test(loops_over_padded_tiles_are_peeled),
        cmocka_unit_test(peeling_stays_within_a_code_budget),
        cmocka_unit_test(accumulator_tiles_are_kept_in_values),
        cmocka_unit_test(odd_vector_widths_are_emitted_as_power_of_two_pieces),
        cmocka_unit_test(template_configs_compute_the_definition),
        cmocka_unit_test(large_reduction_bodies_stay_loops),
        cmocka_unit_test(guards_are_decided_on_enclosing_loop_bounds),
        cmocka_unit_test(interior_tiles_are_emitted_without_guards),
        cmocka_unit_test(register_tiles_prefetch_the_next_weight_panel),
        cmocka_unit_test(copies_through_large_local_buffers_stay_loops),
        cmocka_unit_test(fills_of_large_local_buffers_stay_loops),
        cmocka_unit_test(long_vector_loops_are_loops_over_vectors),
        cmocka_unit_test(a_moved_back_last_tile_computes_the_definition),
        cmocka_unit_test(buffers_in_unrolled_loops_are_allocated_once),
        cmocka_unit_test(concurrent_compilations_succeed),
        cmocka_unit_test(compiled_random_schedules_match_the_definition),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
