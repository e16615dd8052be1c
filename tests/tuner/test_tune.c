/* The tiling space and the tuning loop: every sampled config computes the right thing; a run
 * records its measurements, resumes, honours a stop request, and exhausts a small space. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "codegen/codegen.h"
#include "tuner/tune.h"
#include "tuner/tune_int.h" /* tt__tune_spawn_search: the search child's lifetime */
#include "tuner/access.h"
#include "net/proc.h"

static const char *const workloads[] = {
    "matmul:M=24,N=16,K=12",
    "batch_matmul:B=2,M=8,N=8,K=4",
    "conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=8,K=3,S=1,P=1",
    "conv2d_bn_relu:N=1,H=6,W=6,CI=3,CO=4,K=3,S=2,P=1",
    "depthwise_conv2d_nhwc:N=1,H=8,W=8,C=4,K=3,S=1,P=1",
    "conv2d_transpose_nhwc:N=1,H=4,W=4,CI=4,CO=3,K=4,S=2,P=1",
    "norm_bmn:B=2,M=8,N=8",
    "softmax:M=8,N=16",
    "transpose_batch_matmul_softmax:B=1,SEQ=8,HEADS=2,DIM=4",
    "relu:M=16,N=16",
};

static void sampled_configs_compute_the_definition(void **state)
{
    int checked = 0;
    for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
        tt_workload *wl;
        tt_errbuf err = {{0}};
        if (tt_workload_parse(workloads[w], &wl, &err))
            fail_msg("%s", err.msg);
        tt_space sp;
        tt_vector_isa isa = {"avx2", 32, 16, true};
        assert_int_equal(tt_space_init(&sp, &wl->dag, 2, w % 2 ? &isa : NULL, &err), TT_OK);
        assert_true(sp.size > 1);
        tt_rng rng;
        tt_rng_seed(&rng, w);
        for (int k = 0; k < 25; k++) {
            uint64_t idx = k == 0 ? 0 : tt_rng_below(&rng, sp.size);
            tt_state *st;
            tt_program *prog;
            if (tt_space_apply(&sp, idx, &st, &err))
                fail_msg("%s config %llu: %s", workloads[w], (unsigned long long)idx, err.msg);
            if (tt_lower(st, &prog, &err))
                fail_msg("%s config %llu: %s", workloads[w], (unsigned long long)idx, err.msg);
            if (tt_verify_program(&wl->dag, prog, 3, 1e-4, 1e-5, NULL, &err))
                fail_msg("%s config %llu: %s", workloads[w], (unsigned long long)idx, err.msg);
            checked++;
            tt_program_free(prog);
            tt_state_free(st);
        }
        tt_workload_free(wl);
    }
    printf("space: %d sampled configs verified\n", checked);
}

/* Workload `key` and its tiling space for 2 cores of `isa`. */
static tt_workload *open_space(const char *key, const tt_vector_isa *isa, tt_space *sp)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(key, &w, &err) || tt_space_init(sp, &w->dag, 2, isa, &err))
        fail_msg("%s: %s", key, err.msg);
    return w;
}

/* Config `index` of `sp` shows every string of `want` (up to 4, NULL-ended) in its description
 * and, when small enough for the interpreter, computes the definition of `w`. */
static void expect_config(const tt_space *sp, const tt_workload *w, uint64_t index,
                          const char *const *want)
{
    char desc[512];
    tt_space_describe(sp, index, desc, sizeof(desc));
    strcat(desc, " ");
    for (int k = 0; k < 4 && want[k]; k++)
        if (!strstr(desc, want[k]))
            fail_msg("%s: want %s in %s", w->key, want[k], desc);
    if (w->flops >= 1e7)
        return;
    tt_state *st;
    tt_program *prog;
    tt_errbuf err = {{0}};
    if (tt_space_apply(sp, index, &st, &err) || tt_lower(st, &prog, &err))
        fail_msg("%s: %s", w->key, err.msg);
    if (tt_verify_program(&w->dag, prog, 5, 1e-4, 1e-5, NULL, &err))
        fail_msg("%s (%s): %s", w->key, desc, err.msg);
    tt_program_free(prog);
    tt_state_free(st);
}

/* `index` with knob `name` set to the choice `value` (the index itself when there is none). */
static uint64_t with_knob(const tt_space *sp, uint64_t index, const char *name, int64_t value)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(sp, index, pos);
    for (int k = 0; k < sp->nknobs; k++)
        for (int c = 0; !strcmp(sp->knobs[k].name, name) && c < sp->knobs[k].n; c++)
            if (sp->knobs[k].choice[c] == value)
                pos[k] = c;
    return tt_space_encode(sp, pos);
}

static bool has_knob(const tt_space *sp, const char *name)
{
    for (int k = 0; k < sp->nknobs; k++)
        if (!strcmp(sp->knobs[k].name, name))
            return true;
    return false;
}

/* Copies of parameters into local buffers under statement `id` whose innermost loop (`ann`) is
 * not vectorised; counts all such copies in *copies. */
static int unvectorised_copies(const tt_program *p, tt_sid id, tt_ann ann, int *copies)
{
    const tt_stmt *s = &p->stmts.data[id];
    int bad = 0;
    switch (s->kind) {
    case TT_STMT_FOR: return unvectorised_copies(p, s->body, s->ann, copies);
    case TT_STMT_ALLOC: return unvectorised_copies(p, s->body, ann, copies);
    case TT_STMT_IF: return unvectorised_copies(p, s->body, ann, copies);
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            bad += unvectorised_copies(p, p->items.data[s->first + k], ann, copies);
        return bad;
    case TT_STMT_STORE: {
        const tt_expr *v = tt_expr_get(&p->pool, s->value);
        if (p->bufs.data[s->buf].param >= 0 || v->kind != TT_EXPR_LOAD ||
            p->bufs.data[v->b].param < 0)
            return 0;
        (*copies)++;
        return ann != TT_ANN_VECTORIZE;
    }
    default: return 0;
    }
}

/* Packed inputs are copied a vector at a time: every copy of an input (both of them) into its
 * local buffer is a vectorised loop over the input's contiguous axis, and the config computes the
 * definition. */
static void packed_copies_are_vector_loops(void **state)
{
    (void)state;
    static const char *const keys[] = {"matmul:M=64,N=64,K=64",
                                       "conv2d_nhwc:N=1,H=8,W=8,CI=16,CO=16,K=3,S=1,P=0"};
    tt_vector_isa isa = {"avx2", 32, 16, true};
    for (size_t w = 0; w < sizeof(keys) / sizeof(keys[0]); w++) {
        tt_space sp;
        tt_workload *wl = open_space(keys[w], &isa, &sp);
        /* Weights passed row-major, so that both inputs are packed. */
        uint64_t index = with_knob(&sp, tt_space_default_index(&sp, &isa), "pack_inputs", 1);
        index = with_knob(&sp, index, "layout_rewrite", 0);
        tt_state *st;
        tt_program *prog;
        tt_errbuf err = {{0}};
        if (tt_space_apply(&sp, index, &st, &err) || tt_lower(st, &prog, &err))
            fail_msg("%s: %s", keys[w], err.msg);
        int copies = 0, bad = unvectorised_copies(prog, prog->root, TT_ANN_NONE, &copies);
        if (bad || copies < 2) {
            char *text = tt_program_print(prog);
            fail_msg("%s: %d of %d packed copies not vectorised\n%s", keys[w], bad, copies, text);
        }
        if (tt_verify_program(&wl->dag, prog, 7, 1e-4, 1e-5, NULL, &err))
            fail_msg("%s: %s", keys[w], err.msg);
        tt_program_free(prog);
        tt_state_free(st);
        tt_workload_free(wl);
    }
}

/* Does a store to the buffer named `name` under `id` lie in a parallel loop (`par`: one is
 * around `id`)?  *stores counts the stores to it. */
static bool stores_in_parallel(const tt_program *p, tt_sid id, const char *name, bool par,
                               int *stores)
{
    const tt_stmt *s = &p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR:
        return stores_in_parallel(p, s->body, name, par || s->ann == TT_ANN_PARALLEL, stores);
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return stores_in_parallel(p, s->body, name, par, stores);
    case TT_STMT_SEQ: {
        bool all = true;
        for (uint32_t k = 0; k < s->n; k++)
            all &= stores_in_parallel(p, p->items.data[s->first + k], name, par, stores);
        return all;
    }
    case TT_STMT_STORE:
        if (strcmp(p->bufs.data[s->buf].name, name))
            return true;
        (*stores)++;
        return par;
    default: return true;
    }
}

/* Padding computed once (inline_producers 0) for a batch of 1 runs on every core: the leading
 * loops of a stage at the root are fused into its parallel loop until it has iterations to share
 * (a parallel loop over the batch alone left it on one core, 3.5% of ResNet-18 C1's time on AVX2
 * as measured), and the config computes the definition. */
static void padding_computed_once_runs_in_parallel(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    tt_space sp;
    tt_workload *w = open_space("conv2d_nhwc:N=1,H=12,W=12,CI=8,CO=16,K=3,S=1,P=1", &isa, &sp);
    uint64_t index = with_knob(&sp, tt_space_default_index(&sp, &isa), "inline_producers", 0);
    index = with_knob(&sp, index, "parallel", 1);
    tt_state *st;
    tt_program *prog;
    tt_errbuf err = {{0}};
    if (tt_space_apply(&sp, index, &st, &err) || tt_lower(st, &prog, &err))
        fail_msg("%s", err.msg);
    int stores = 0;
    if (!stores_in_parallel(prog, prog->root, "pad", false, &stores) || stores != 1) {
        char *text = tt_program_print(prog);
        fail_msg("the padding is not computed in a parallel loop (%d stores)\n%s", stores, text);
    }
    if (tt_verify_program(&w->dag, prog, 9, 1e-4, 1e-5, NULL, &err))
        fail_msg("%s", err.msg);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* Only the main op's producers (padding) may stay at the root: its epilogue (bias, ReLU) always
 * goes into the output's loops, in every config.  At the root it made a pass of its own over
 * the whole result (MobileNet-V2's 1x1 convolutions took 2.3x as long). */
static void the_epilogue_is_always_inlined(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    tt_space sp;
    tt_workload *w = open_space(
        "te:t1[i0,i1,i2,i3] = select(i1 >= 1 && i1 < 9 && i2 >= 1 && i2 < 9, "
        "x0[0,i1 - 1,i2 - 1,i3], 0.0); t2[i0,i1,i2,i3] += t1[i0,i1 + r1,i2 + r2,r0] * "
        "w1[r1,r2,r0,i3]; t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = "
        "max(t0[0,i1,i2,i3], 0); t1:float32[1,10,10,8]; x0:float32[1,8,8,8]; "
        "t2:float32[1,8,8,16]; w1:const float32[3,3,8,16]; t0:float32[1,8,8,16]; "
        "w2:const float32[16]; out:float32[1,8,8,16]; r0:8; r1:3; r2:3",
        &isa, &sp);
    int pad = -1, bias = -1;
    for (size_t i = 0; i < w->dag.ops.len; i++) {
        if (!strcmp(w->dag.ops.data[i].name, "t1"))
            pad = (int)i;
        if (!strcmp(w->dag.ops.data[i].name, "t0"))
            bias = (int)i;
    }
    assert_true(pad >= 0 && bias >= 0);
    for (int inl = 0; inl < 2; inl++) {
        uint64_t index = with_knob(&sp, tt_space_default_index(&sp, &isa), "inline_producers", inl);
        tt_state *st;
        tt_errbuf err = {{0}};
        if (tt_space_apply(&sp, index, &st, &err))
            fail_msg("%s", err.msg);
        const tt_stage *p = &st->stages.data[tt_state_stage_of_op(st, pad)];
        const tt_stage *b = &st->stages.data[tt_state_stage_of_op(st, bias)];
        assert_int_equal(p->at, inl ? TT_AT_INLINE : TT_AT_ROOT);
        assert_int_equal(b->at, TT_AT_INLINE);
        tt_state_free(st);
        expect_config(&sp, w, index, (const char *const[]){NULL});
    }
    tt_workload_free(w);
}

/* Op index of the op named `name` in w's DAG. */
static int op_index(const tt_workload *w, const char *name)
{
    for (size_t i = 0; i < w->dag.ops.len; i++)
        if (!strcmp(w->dag.ops.data[i].name, name))
            return (int)i;
    fail_msg("no op %s", name);
    return -1;
}

/* A transform (a stage that combines its input at several points, as Winograd's do) stays a pass
 * of its own where a reduction reads it, whose work inlining would repeat for every output
 * column (v, read by the product m), and is inlined where only non-reductions read it (d into
 * v, z into out), in the untuned config and under both choices of inline_producers (whose 0
 * leaves the product's producers at the root); each computes the definition. */
static void transforms_stay_out_of_reductions(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    tt_space sp;
    tt_workload *w = open_space(
        "te:d[i0,i1,i2] = select(i0 == 0, x0[i1 * 2,i2] - x0[i1 * 2 + 2,i2], x0[i1 * 2 + 1,i2] + "
        "x0[i1 * 2 + 2,i2]); v[i0,i1,i2] = select(i0 == 0, d[0,i1,i2] + "
        "d[1,i1,i2], d[1,i1,i2] - 2 * d[0,i1,i2]); m[i0,i1,i2] += v[i0,i1,r0] * w1[i0,r0,i2]; "
        "z[i0,i1,i2] = select(i0 == 0, m[0,i1,i2] - m[1,i1,i2], m[0,i1,i2] + 3 * m[1,i1,i2]); "
        "out[i0,i1,i2] = max(z[i0,i1,i2] + z[1 - i0,i1,i2], 0); d:float32[2,6,16]; "
        "x0:float32[14,16]; v:float32[2,6,16]; m:float32[2,6,32]; w1:const float32[2,16,32]; "
        "z:float32[2,6,32]; out:float32[2,6,32]; r0:16",
        &isa, &sp);
    int d = op_index(w, "d"), v = op_index(w, "v"), z = op_index(w, "z");
    assert_true(tt_access_transform_into_reduction(&w->dag, v));
    assert_false(tt_access_transform_into_elementwise(&w->dag, v));
    assert_true(tt_access_transform_into_elementwise(&w->dag, d));
    assert_true(tt_access_transform_into_elementwise(&w->dag, z));
    assert_false(tt_access_reads_at_many_points(&w->dag, op_index(w, "m")));
    tt_cpu_caches caches;
    tt_cpu_caches_typical(&caches);
    uint64_t configs[3] = {
        tt_space_untuned_index(&sp, &isa, &caches, 2),
        with_knob(&sp, tt_space_default_index(&sp, &isa), "inline_producers", 0),
        with_knob(&sp, tt_space_default_index(&sp, &isa), "inline_producers", 1)};
    for (int k = 0; k < 3; k++) {
        tt_state *st;
        tt_errbuf err = {{0}};
        if (tt_space_apply(&sp, configs[k], &st, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, v)].at, TT_AT_ROOT);
        /* d feeds the product: inline_producers 0 (configs[1]) computes it once at the root */
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, d)].at,
                         k == 1 ? TT_AT_ROOT : TT_AT_INLINE);
        assert_int_equal(st->stages.data[tt_state_stage_of_op(st, z)].at, TT_AT_INLINE);
        tt_state_free(st);
        expect_config(&sp, w, configs[k], (const char *const[]){NULL});
    }
    tt_workload_free(w);
}

/* Accumulators in a tile-sized buffer are written through the epilogue straight into the output:
 * the accumulating stage is computed at the output stage's tile and no full-size intermediate is
 * left (a cache write copied out to a global buffer that a root pass read again: a 1x1
 * convolution with ReLU6 over 112x112 ran 3x slower in MobileNet-V2 than alone), also through a
 * diamond (SiLU, HardSwish: MobileNet-V3's stem ran 4.8x its estimate in the network).  Without
 * an epilogue the accumulation stays a cache write, copied out by the output stage itself. */
/* Softmax, layer normalisation's reductions and other reductions along a row are row kernels:
 * the untuned config (row_kernel 1) computes every stage at the parallel row loop (elementwise
 * stages inlined or computed there, each reduction factored into a vector of lanes) and computes
 * the definition, as do its scalar and serial variants.  A matrix product and a convolution
 * are not offered the knob, so their spaces keep their identity. */
static void rows_reduce_in_vector_lanes(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    const char *const rows[] = {
        "te:t0[i0,i1] max= x0[i0,i1,r0]; t1[i0,i1,i2] = exp(x0[i0,i1,i2] - t0[i0,i1]); "
        "t2[i0,i1] += t1[i0,i1,r1]; out[i0,i1,i2] = t1[i0,i1,i2] / t2[i0,i1]; "
        "x0:float32[3,5,37]; t0:float32[3,5]; t1:float32[3,5,37]; t2:float32[3,5]; "
        "out:float32[3,5,37]; r0:37; r1:37",
        "te:t0[i0,i1,i2] max= x0[0,i1,i2,r0]; t1[i0,i1,i2,i3] = exp(x0[0,i1,i2,i3] - "
        "t0[i0,i1,i2]); t2[i0,i1,i2] += t1[i0,i1,i2,r1]; out[i0,i1,i2,i3] = t1[i0,i1,i2,i3] / "
        "t2[i0,i1,i2]; t0:float32[1,2,4]; x0:float32[1,2,4,40]; t1:float32[1,2,4,40]; "
        "t2:float32[1,2,4]; out:float32[1,2,4,40]; r0:40; r1:40",
        "te:t0[i0,i1] += x0[0,i1,r0]; out[i0,i1,i2] = t0[i0,i1] / 40.0; t0:float32[1,9]; "
        "x0:float32[1,9,40]; out:float32[1,9,1]; r0:40",
        "te:t0[i0,i1,i2] = x0[0,i1,i2] * x0[0,i1,i2]; t2[i0,i1] += t0[0,i1,r0]; t1[i0,i1,i2] = "
        "t2[i0,i1] / 40.0; t3[i0,i1,i2] = t1[0,i1,0] + 1e-6; out[i0,i1,i2] = sqrt(t3[0,i1,0]); "
        "t0:float32[1,9,40]; x0:float32[1,9,40]; t2:float32[1,9]; t1:float32[1,9,1]; "
        "t3:float32[1,9,1]; out:float32[1,9,1]; r0:40",
        /* A matrix-vector product (a classifier's head at batch 1): each output a row */
        "te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; "
        "t0:float32[1,100]; x0:float32[1,64]; w1:const float32[100,64]; out:float32[1,100]; "
        "w2:const float32[100]; r0:64",
    };
    for (int c = 0; c < 5; c++) {
        tt_space sp;
        tt_workload *w = open_space(rows[c], &isa, &sp);
        assert_true(has_knob(&sp, "row_kernel"));
        tt_cpu_caches caches = {32 << 10, 512 << 10};
        uint64_t untuned = tt_space_untuned_index(&sp, &isa, &caches, 2);
        expect_config(&sp, w, untuned, (const char *const[]){"row_kernel=1 ", NULL});
        tt_state *st;
        tt_errbuf err = {{0}};
        if (tt_space_apply(&sp, untuned, &st, &err))
            fail_msg("%s", err.msg);
        int root = (int)st->stages.len - 1, factored = 0;
        assert_int_equal(st->stages.data[root].iters[0].ann, TT_ANN_PARALLEL);
        for (int i = 0; i < root; i++) {
            const tt_stage *sg = &st->stages.data[i];
            if (st->dag.ops.data[sg->op].is_placeholder)
                continue;
            assert_true(sg->at == TT_AT_INLINE || sg->at == TT_AT_ITER);
            if (sg->at == TT_AT_ITER)
                assert_int_equal(sg->at_op, st->stages.data[root].op);
            factored += sg->niters > 0 && sg->iters[sg->niters - 1].kind == TT_ITER_SPATIAL &&
                        sg->iters[sg->niters - 1].ann == TT_ANN_VECTORIZE &&
                        sg->iters[sg->niters - 2].kind == TT_ITER_REDUCE;
        }
        assert_int_equal(factored, c < 2 ? 2 : 1); /* softmax: the max and the sum */
        tt_state_free(st);
        expect_config(&sp, w, with_knob(&sp, untuned, "vectorize", 0),
                      (const char *const[]){"row_kernel=1 ", NULL});
        expect_config(&sp, w, with_knob(&sp, untuned, "parallel", 0),
                      (const char *const[]){"row_kernel=1 ", NULL});
        expect_config(&sp, w, with_knob(&sp, untuned, "row_kernel", 0),
                      (const char *const[]){"row_kernel=0 ", NULL});
        tt_workload_free(w);
    }
    /* Matrix products stay tiled, among them the same product at batch 4 (each weight used by
     * 4 rows) and a product with both operands small (16 x 64 by 100 x 64). */
    const char *const others[] = {
        "matmul:M=24,N=16,K=12", "conv2d_nhwc:N=1,H=8,W=8,CI=8,CO=16,K=3,S=1,P=1",
        "te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; "
        "t0:float32[4,100]; x0:float32[4,64]; w1:const float32[100,64]; out:float32[4,100]; "
        "w2:const float32[100]; r0:64",
        "te:out[i0,i1] += x0[i0,r0] * w1[i1,r0]; x0:float32[16,64]; w1:float32[100,64]; "
        "out:float32[16,100]; r0:64"};
    for (int c = 0; c < 4; c++) {
        tt_space sp;
        tt_workload *w = open_space(others[c], &isa, &sp);
        assert_false(has_knob(&sp, "row_kernel"));
        tt_workload_free(w);
    }
}

static void accumulators_write_through_the_epilogue(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    const char *const cases[] = {
        "te:t1[i0,i1,i2,i3] = select(i1 >= 1 && i1 < 9 && i2 >= 1 && i2 < 9, "
        "x0[0,i1 - 1,i2 - 1,i3], 0.0); t2[i0,i1,i2,i3] += t1[i0,i1 + r1,i2 + r2,r0] * "
        "w1[r1,r2,r0,i3]; t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = "
        "max(t0[0,i1,i2,i3], 0) + x1[0,i1,i2,i3]; t1:float32[1,10,10,8]; x0:float32[1,8,8,8]; "
        "t2:float32[1,8,8,16]; w1:const float32[3,3,8,16]; t0:float32[1,8,8,16]; "
        "w2:const float32[16]; x1:float32[1,8,8,16]; out:float32[1,8,8,16]; r0:8; r1:3; r2:3",
        "te:out[i,j] += x0[i,k] * w1[k,j]; x0:float32[24,12]; w1:const float32[12,16]",
        /* a diamond: SiLU reads the biased result twice */
        "te:t2[i0,i1,i2,i3] += x0[0,i1,i2,r0] * w1[r0,i3]; t0[i0,i1,i2,i3] = t2[i0,i1,i2,i3] + "
        "w2[i3]; t3[i0,i1,i2,i3] = sigmoid(t0[0,i1,i2,i3]); out[i0,i1,i2,i3] = t0[0,i1,i2,i3] * "
        "t3[0,i1,i2,i3]; t2:float32[1,8,8,16]; x0:float32[1,8,8,8]; w1:const float32[8,16]; "
        "t0:float32[1,8,8,16]; w2:const float32[16]; t3:float32[1,8,8,16]; "
        "out:float32[1,8,8,16]; r0:8",
        /* a MatMul as the importer writes it: the [32, 48] accumulation read by the [1, 32, 48]
         * output (an added axis of extent 1), through GELU's diamond */
        "te:t2[i0,i1] += x0[0,i0,r0] * w1[r0,i1]; t0[i0,i1,i2] = t2[i1,i2]; t1[i0,i1,i2] = "
        "w2[i2] + t0[0,i1,i2]; t3[i0,i1,i2] = erf(t1[0,i1,i2] / 1.41421354); out[i0,i1,i2] = "
        "t1[0,i1,i2] * (t3[0,i1,i2] + 1.0) * 0.5; t2:float32[32,48]; x0:float32[1,32,24]; "
        "w1:const float32[24,48]; t0:float32[1,32,48]; t1:float32[1,32,48]; "
        "w2:const float32[48]; t3:float32[1,32,48]; out:float32[1,32,48]; r0:24",
    };
    for (int c = 0; c < 4; c++) {
        tt_space sp;
        tt_workload *w = open_space(cases[c], &isa, &sp);
        int acc = -1, out = -1;
        for (size_t i = 0; i < w->dag.ops.len; i++) {
            if (!strcmp(w->dag.ops.data[i].name, c != 1 ? "t2" : "out"))
                acc = (int)i;
            if (!strcmp(w->dag.ops.data[i].name, "out"))
                out = (int)i;
        }
        tt_cpu_caches caches = {32 << 10, 512 << 10};
        uint64_t idx[3] = {tt_space_default_index(&sp, &isa),
                           tt_space_blocked_index(&sp, &isa, &caches, 2, true, false), 0};
        idx[2] = with_knob(&sp, idx[0], "cache_write", 1);
        int accumulating = 0;
        for (int k = 0; k < 3; k++) {
            tt_state *st;
            tt_program *prog;
            tt_errbuf err = {{0}};
            if (tt_space_apply(&sp, idx[k], &st, &err) || tt_lower(st, &prog, &err))
                fail_msg("%s", err.msg);
            bool cached = st->dag.ops.len > w->dag.ops.len; /* a cache write added a stage */
            const tt_stage *a = &st->stages.data[tt_state_stage_of_op(st, acc)];
            if (c != 1) {
                assert_false(cached);
                if (a->at == TT_AT_ITER) {
                    assert_int_equal(a->at_op, out);
                    accumulating++;
                }
                for (size_t b = 0; b < prog->bufs.len; b++) /* no full-size intermediate */
                    if (prog->bufs.data[b].param < 0)
                        assert_true(prog->bufs.data[b].size < (c == 3 ? 32 * 48 : 8 * 8 * 16));
            } else if (cached) {
                accumulating++;
            }
            tt_program_free(prog);
            tt_state_free(st);
            expect_config(&sp, w, idx[k], (const char *const[]){NULL});
        }
        assert_true(accumulating >= 2);
        tt_workload_free(w);
    }
}

/* The output stage after a convolution (bias and SiLU inlined into it) is a vector loop over
 * its channels, also beyond 64 of them (the code generator loops over vectors): over 96
 * channels it was a scalar loop, 7 ms of EfficientNet's 7.4 ms 1x1 convolution.  Since the
 * accumulators go through the epilogue it is the tiled stage, its inner loop the columns. */
static void long_epilogue_rows_are_vector_loops(void **state)
{
    (void)state;
    tt_vector_isa isa = {"avx2", 32, 16, true};
    for (int co = 96; co <= 100; co += 4) {
        char te[1024];
        snprintf(te, sizeof(te),
                 "te:t1[i0,i1,i2,i3] += x0[0,i1,i2,r0] * w1[r0,i3]; t0[i0,i1,i2,i3] = "
                 "t1[i0,i1,i2,i3] + w2[i3]; t2[i0,i1,i2,i3] = sigmoid(t0[0,i1,i2,i3]); "
                 "out[i0,i1,i2,i3] = t0[0,i1,i2,i3] * t2[0,i1,i2,i3]; t1:float32[1,4,4,%d]; "
                 "x0:float32[1,4,4,16]; w1:const float32[16,%d]; t0:float32[1,4,4,%d]; "
                 "w2:const float32[%d]; t2:float32[1,4,4,%d]; out:float32[1,4,4,%d]; r0:16",
                 co, co, co, co, co, co);
        tt_space sp;
        tt_workload *w = open_space(te, &isa, &sp);
        tt_cpu_caches caches = {32 << 10, 512 << 10};
        uint64_t index = tt_space_blocked_index(&sp, &isa, &caches, 2, true, false);
        tt_state *st;
        tt_errbuf err = {{0}};
        if (tt_space_apply(&sp, index, &st, &err))
            fail_msg("%s", err.msg);
        int out = -1;
        for (size_t i = 0; i < w->dag.ops.len; i++)
            if (!strcmp(w->dag.ops.data[i].name, "out"))
                out = tt_state_stage_of_op(st, (int)i);
        const tt_stage *o = &st->stages.data[out];
        /* the output stage writes the accumulators' tiles through SiLU: its inner loop is the
         * register tile's columns, whole vectors (over 100 channels the last tile moves back) */
        assert_int_equal(o->iters[o->niters - 1].ann, TT_ANN_VECTORIZE);
        assert_true(o->at == TT_AT_ROOT);
        tt_state_free(st);
        expect_config(&sp, w, index, (const char *const[]){NULL});
        tt_workload_free(w);
    }
}

/* On AVX2's 16 registers two vectors by the most rows that divide the axis leave too few
 * accumulators over short row axes (MobileNet's 7 and 14 columns, 7 x 2 does not fit): the
 * starting point then takes the most multiply-adds per load (rows with a moved-back last tile
 * where no dividing tile has 8 accumulators), and leaves the window's taps out of the register
 * tile where they would halve it.  Where two vectors keep 8 accumulators it keeps them (and the
 * taps). */
static void short_row_axes_keep_enough_accumulators(void **state)
{
    (void)state;
    tt_vector_isa avx2 = {"avx2", 32, 16, true};
    static const struct {
        const char *workload;
        const char *want[3];
    } cases[] = {
        {"conv2d_nhwc:N=1,H=7,W=7,CI=320,CO=1280,K=1,S=1,P=0", {"micro_kernel=[-1,7,1]"}},
        {"conv2d_nhwc:N=1,H=14,W=14,CI=96,CO=576,K=1,S=1,P=0", {"micro_kernel=[-1,2,4]"}},
        {"conv2d_nhwc:N=1,H=14,W=14,CI=256,CO=256,K=3,S=1,P=1",
         {"micro_kernel=[-1,2,4]", "taps_inner=0"}},
        {"conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1",
         {"micro_kernel=[-1,4,2]", "taps_inner=1"}},
        {"conv2d_nhwc:N=1,H=7,W=7,CI=512,CO=512,K=3,S=1,P=1",
         {"micro_kernel=[-1,7,1]", "taps_inner=1"}},
        /* ViT's 197 tokens, a prime: no dividing tile has 8 accumulators, so 6 x 2 with its
         * last tile moved back (it recomputes one row) */
        {"matmul:M=197,N=256,K=64", {"micro_kernel=[-1,6,2]"}},
    };
    tt_cpu_caches caches = {32 << 10, 512 << 10};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].workload, &avx2, &sp);
        uint64_t index = tt_space_blocked_index(&sp, &avx2, &caches, 2, false, true);
        expect_config(&sp, w, index, cases[i].want);
        tt_workload_free(w);
    }
}

/* The cache-blocked starting point: a register tile of the most rows by two vectors (fewer with
 * a convolution's column taps unrolled inside it, whose B vectors need registers too), an inner
 * reduction whose slice of B fills half of L1, a cache tile one register tile wide and as deep as
 * half of L1 (accumulators) and half of L2 (A's slice) allow, every core with two tiles; padding
 * inlined or computed once as asked.  Each config computes the definition. */
static void cache_blocked_configs_follow_the_caches(void **state)
{
    (void)state;
    static const struct {
        const char *workload;
        tt_cpu_caches caches;
        bool inline_producers, taps_inner;
        const char *want[4];
    } cases[] = {
        {"matmul:M=1024,N=1024,K=1024",
         {48 << 10, 2 << 20},
         true,
         true,
         {"tile_i=16 ", "tile_j=1 ", "tile_k=128 ", "micro_kernel=[-1,8,2]"}},
        /* Half the L1: half the inner reduction, then half the rows. */
        {"matmul:M=1024,N=1024,K=1024",
         {16 << 10, 256 << 10},
         true,
         false,
         {"tile_i=8 ", "tile_j=1 ", "tile_k=64 ", "micro_kernel=[-1,8,2]"}},
        /* ViT's attention product, 12 heads of 197 rows: 16-row tiles, the last moved back,
         * leave the cache tile part of one head's rows, so it spans no more heads (apart
         * strips of A; 1.48x faster than 8 heads of 16 rows). */
        {"te:out[i0,i1,i2] += x0[i0,i1,r0] * x1[i0,r0,i2]; out:float32[12,197,64]; "
         "x0:float32[12,197,197]; x1:float32[12,197,64]; r0:197",
         {48 << 10, 2 << 20},
         true,
         false,
         {"tile_i0=1 ", "micro_kernel=[-1,16,1]"}},
        /* 7 rows each: every row of a head in the tile, which then spans heads. */
        {"te:out[i0,i1,i2] += x0[i0,i1,r0] * x1[i0,r0,i2]; out:float32[12,7,16]; "
         "x0:float32[12,7,32]; x1:float32[12,32,16]; r0:32",
         {48 << 10, 2 << 20},
         true,
         false,
         {"tile_i0=3 ", "tile_i1=1 "}},
        /* 64 x 64: four tiles of 32 x 32 for two cores, not two of 64 x 32. */
        {"matmul:M=64,N=64,K=64", {48 << 10, 2 << 20}, true, false, {"tile_i=4 ", "tile_j=1 "}},
        /* ResNet-18's last 3x3 layer: all 7 x 7 outputs in one tile, so each weight is loaded
         * once; the padding computed once, or inlined with the column taps inside the tile. */
        {"conv2d_nhwc:N=1,H=7,W=7,CI=512,CO=512,K=3,S=1,P=1",
         {48 << 10, 2 << 20},
         false,
         false,
         {"tile_o0=7 ", "micro_kernel=[-1,7,2]", "inline_producers=0", "taps_inner=0"}},
        {"conv2d_nhwc:N=1,H=7,W=7,CI=512,CO=512,K=3,S=1,P=1",
         {48 << 10, 2 << 20},
         true,
         true,
         {"tile_o0=7 ", "inline_producers=1", "taps_inner=1"}},
        /* The taps' 3 x 2 B vectors leave room for 13 rows of 2 accumulators: 8 of 56. */
        {"conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1",
         {48 << 10, 2 << 20},
         true,
         true,
         {"micro_kernel=[-1,8,2]", "taps_inner=1"}},
        {"conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=32,K=3,S=1,P=1",
         {32 << 10, 1 << 20},
         false,
         true,
         {"taps_inner=1"}},
        {"conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=32,K=3,S=1,P=1",
         {32 << 10, 1 << 20},
         true,
         false,
         {"taps_inner=0"}},
        /* A region of DeepLabV3's atrous convolution (graph/conv_regions.c): its 2 column taps
         * 12 apart, as far as the tile's 12 rows, stay outside the tile (24 input rows inside
         * ran 1.47x slower); dilated by 4, 7 rows keep their 3 taps inside. */
        {"te:t0[i0,i1,i2,i3] += x0[0,i1 + r1 * 12,i2 + r2 * 12,r0] * w1[r1 + 1,r2 + 1,r0,i3]; "
         "out[i0,i1,i2,i3] = t0[i0,i1,i2,i3] + w2[i3]; t0:float32[1,12,12,256]; "
         "x0:float32[1,28,28,512]; w1:const float32[3,3,512,256]; out:float32[1,12,12,256]; "
         "w2:const float32[256]; r0:512; r1:2; r2:2",
         {48 << 10, 2 << 20},
         true,
         true,
         {"micro_kernel=[-1,12,2]", "taps_inner=0"}},
        {"te:t1[i0,i1,i2,i3] = select(i1 >= 4 && i1 < 32 && i2 >= 4 && i2 < 32, "
         "x0[0,i1 - 4,i2 - 4,i3], 0.0); t2[i0,i1,i2,i3] += t1[i0,i1 + r1 * 4,i2 + r2 * 4,r0] * "
         "w1[r1,r2,r0,i3]; out[i0,i1,i2,i3] = t2[i0,i1,i2,i3]; t1:float32[1,36,36,64]; "
         "x0:float32[1,28,28,64]; t2:float32[1,28,28,64]; w1:const float32[3,3,64,64]; "
         "out:float32[1,28,28,64]; r0:64; r1:3; r2:3",
         {48 << 10, 2 << 20},
         false,
         true,
         {"micro_kernel=[-1,7,2]", "taps_inner=1"}},
        {"matmul:M=24,N=16,K=12", {32 << 10, 1 << 20}, true, false, {NULL}},
    };
    tt_vector_isa avx512 = {"avx512", 64, 32, true};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].workload, &avx512, &sp);
        uint64_t index = tt_space_blocked_index(&sp, &avx512, &cases[i].caches, 2,
                                                cases[i].inline_producers, cases[i].taps_inner);
        expect_config(&sp, w, index, cases[i].want);
        tt_workload_free(w);
    }
    /* This machine's caches are read, or the typical sizes stand in. */
    tt_cpu_caches host;
    tt_cpu_caches_host(&host);
    assert_true(host.l1d_bytes >= 4096 && host.l2_bytes >= 65536);
}

/* The micro_kernel choices whose rows do not divide the row axis (their last tile moves back)
 * are `want`, in order, up to `max` of them (a 0 ends a shorter list). */
static void expect_moved_rows(const tt_space *sp, const tt_workload *w, const int64_t *want,
                              int max)
{
    const tt_knob *mk = &sp->knobs[sp->nspatial + 7];
    int64_t extent = w->dag.ops.data[sp->main_stage].shape[sp->nspatial - 2];
    int n = 0;
    for (int c = 0; c < mk->n; c++)
        if (extent % (mk->choice[c] >> 16) != 0) {
            if (n >= max || mk->choice[c] != want[n])
                fail_msg("%s: offered %d x %d", w->key, (int)(mk->choice[c] >> 16),
                         (int)(mk->choice[c] & 0xffff));
            n++;
        }
    if (n < max && want[n] != 0)
        fail_msg("%s: %d x %d not offered", w->key, (int)(want[n] >> 16), (int)(want[n] & 0xffff));
}

/* Where no row count that divides the row axis fills the registers, the space also offers the
 * most rows that do (OpenBLAS's 6 x 16 on AVX2 over ResNet-18's first output rows of 112), its
 * last tile moved back to end with the axis: whole register tiles, no guard (schedule/lower.c).
 * Not where that would recompute more than an eighth of the axis (6 rows over 7), nor in the
 * starting points, which keep dividing rows.  Each config computes the definition. */
static void register_tiles_may_move_their_last_tile_back(void **state)
{
    (void)state;
    tt_vector_isa avx2 = {"avx2", 32, 16, true}, avx512 = {"avx512", 64, 32, true};
#define RV(r, v) (((int64_t)(r) << 16) | (v)) /* a micro_kernel choice: rows x vectors */
    static const struct {
        const char *workload;
        bool avx512;
        int64_t beyond[3]; /* register tiles offered whose rows do not divide the axis */
    } offers[] = {
        /* 4 is the most rows that divide 112 with two vectors (14 with one). */
        {"conv2d_nhwc:N=1,H=224,W=224,CI=3,CO=64,K=7,S=2,P=3", false, {RV(6, 2)}},
        {"matmul:M=512,N=512,K=512", false, {RV(14, 1), RV(6, 2)}},
        {"matmul:M=512,N=512,K=512", true, {RV(15, 2), RV(7, 4)}},
        {"conv2d_nhwc:N=1,H=7,W=7,CI=64,CO=64,K=3,S=1,P=1", false, {0}}, /* 6 over 7 */
        {"matmul:M=48,N=48,K=48", false, {0}},                           /* 6 divides 48 */
    };
    for (size_t i = 0; i < sizeof(offers) / sizeof(offers[0]); i++) {
        tt_space sp;
        const tt_vector_isa *isa = offers[i].avx512 ? &avx512 : &avx2;
        tt_workload *w = open_space(offers[i].workload, isa, &sp);
        const tt_knob *mk = &sp.knobs[sp.nspatial + 7];
        int64_t extent = w->dag.ops.data[sp.main_stage].shape[sp.nspatial - 2];
        expect_moved_rows(&sp, w, offers[i].beyond, 3);
        /* The starting point keeps a dividing register tile. */
        tt_cpu_caches caches = {48 << 10, 2 << 20};
        uint64_t start = tt_space_blocked_index(&sp, isa, &caches, 2, true, false);
        int pos[TT_SPACE_MAX_KNOBS];
        tt_space_decode(&sp, start, pos);
        assert_int_equal(extent % (mk->choice[pos[sp.nspatial + 7]] >> 16), 0);
        tt_workload_free(w);
    }
    /* 6 rows over 50: 9 register tiles, in cache tiles of 1 or 3 of them (18 rows: 50 = 2 x 18
     * + 14, the last from row 32); both compute the definition without a guard. */
    tt_space sp;
    tt_workload *w = open_space("matmul:M=50,N=32,K=24", &avx2, &sp);
    uint64_t base =
        with_knob(&sp, tt_space_default_index(&sp, &avx2), "micro_kernel", (6 << 16) | 2);
    static const struct {
        int64_t mult;
        const char *start;
    } tiles[] = {{1, "min(i.0@j.0@ * 6, 44)"}, {4, "min(i.0@j.0@ * 18, 32)"}};
    for (size_t i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++) {
        uint64_t index = with_knob(&sp, base, "tile_i", tiles[i].mult);
        expect_config(&sp, w, index, (const char *const[]){"micro_kernel=[-1,6,2]", NULL});
        tt_state *st;
        tt_program *prog;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_space_apply(&sp, index, &st, &err), TT_OK);
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        char *ir = tt_program_print(prog);
        if (!strstr(ir, tiles[i].start) || strstr(ir, " if "))
            fail_msg("want %s and no guard in\n%s", tiles[i].start, ir);
        free(ir);
        tt_program_free(prog);
        tt_state_free(st);
    }
    tt_workload_free(w);
#undef RV
}

/* A row axis of a prime length (Inception-V3's 17 columns at 17x17) has no dividing tile of
 * more than one row: the space offers, per vector count, the rows that cover it in as many tiles
 * as the most the registers hold, balanced (9 + 9 over 17, where 15 + 15 recomputed 13 rows and
 * was not offered, so the 1x7 convolutions took 1 x 2 and ran 3x slower).  The starting point
 * takes the one with the most accumulators (9 x 3 ran 1.1x faster than 6 x 4), keeps the taps
 * inside the tile where that leaves at least half the multiply-adds per load, and a row axis
 * that the balanced rows divide (28: 14) gets none.  Each config computes the definition. */
static void prime_row_axes_take_balanced_tiles(void **state)
{
    (void)state;
    tt_vector_isa avx512 = {"avx512", 64, 32, true};
    tt_cpu_caches caches = {48 << 10, 2 << 20};
#define RV(r, v) (((int64_t)(r) << 16) | (v))
    static const struct {
        const char *workload;
        int64_t beyond[4]; /* register tiles offered whose rows do not divide the axis */
        const char *want[3];
    } cases[] = {
        {"matmul:M=17,N=160,K=64", {RV(9, 1), RV(9, 2)}, {"micro_kernel=[-1,9,2]"}},
        {"matmul:M=17,N=192,K=64",
         {RV(9, 1), RV(9, 2), RV(9, 3), RV(6, 4)},
         {"micro_kernel=[-1,9,3]"}},
        {"matmul:M=17,N=128,K=64", {RV(9, 1), RV(9, 2), RV(6, 4)}, {"micro_kernel=[-1,6,4]"}},
        /* 16 rows of one vector balance to 14 over 28, which divides it: no tile moves */
        {"matmul:M=28,N=16,K=64", {0}, {"micro_kernel=[-1,14,1]"}},
        /* a 1x7 convolution over 17 columns: 9 x 1 with the 7 taps' B vectors (9 x 2 with them
         * would take all 32 registers) */
        {"te:t1[i0,i1,i2,i3] = select(i2 >= 3 && i2 < 20, x0[0,i1,i2 - 3,i3], 0.0); "
         "out[i0,i1,i2,i3] += t1[i0,i1 + r1,i2 + r2,r0] * w1[0,r2,r0,i3]; "
         "t1:float32[1,2,23,16]; x0:float32[1,2,17,16]; w1:const float32[1,7,16,160]; "
         "out:float32[1,2,17,160]; r0:16; r1:1; r2:7",
         {RV(9, 1), RV(9, 2)},
         {"micro_kernel=[-1,9,1]", "taps_inner=1"}},
        {"te:t1[i0,i1,i2,i3] = select(i2 >= 3 && i2 < 20, x0[0,i1,i2 - 3,i3], 0.0); "
         "out[i0,i1,i2,i3] += t1[i0,i1 + r1,i2 + r2,r0] * w1[0,r2,r0,i3]; "
         "t1:float32[1,2,23,8]; x0:float32[1,2,17,8]; w1:const float32[1,7,8,192]; "
         "out:float32[1,2,17,192]; r0:8; r1:1; r2:7",
         {RV(9, 1), RV(9, 2), RV(9, 3), RV(6, 4)},
         {"micro_kernel=[-1,9,3]", "taps_inner=0"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].workload, &avx512, &sp);
        expect_moved_rows(&sp, w, cases[i].beyond, 4);
        uint64_t index = tt_space_blocked_index(&sp, &avx512, &caches, 2, true, true);
        expect_config(&sp, w, index, cases[i].want);
        tt_workload_free(w);
    }
#undef RV
}

/* Columns that no vector divides (ViT's 197 x 197 attention scores) get whole-vector register
 * tiles whose last cache tile moves back, besides the partial vector; the starting point takes
 * one, and it computes the definition with the column's start clamped and no guard.  Where the
 * vector divides the columns but two vectors do not, two vectors move back too. */
static void column_tiles_may_move_their_last_tile_back(void **state)
{
    (void)state;
    tt_vector_isa avx2 = {"avx2", 32, 16, true};
    static const struct {
        const char *workload;
        const char *want[3];
        const char *start;
    } cases[] = {
        {"matmul:M=197,N=197,K=64", {"micro_kernel=[-1,6,2]"}, "min("},
        {"batch_matmul:B=2,M=30,N=45,K=16", {"micro_kernel=[-1,"}, "min("},
        /* 196 = 4 x 49: half vectors divide it, whole ones moved back are offered too */
        {"matmul:M=32,N=196,K=32", {"micro_kernel=[-1,"}, NULL},
    };
    tt_cpu_caches caches = {32 << 10, 512 << 10};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].workload, &avx2, &sp);
        const tt_knob *mk = &sp.knobs[sp.nspatial + 7];
        int64_t cols = w->dag.ops.data[sp.main_stage].shape[sp.nspatial - 1];
        int whole = 0;
        for (int c = 0; c < mk->n; c++) {
            int64_t v = mk->choice[c] & 0xffff;
            if (!(v & 0x8000)) {
                assert_true(cols % (v * 8) != 0);
                whole++;
            }
        }
        assert_true(whole > 0);
        uint64_t index = tt_space_blocked_index(&sp, &avx2, &caches, 2, false, true);
        expect_config(&sp, w, index, cases[i].want);
        tt_state *st;
        tt_program *prog;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_space_apply(&sp, index, &st, &err), TT_OK);
        assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
        char *ir = tt_program_print(prog);
        if (cases[i].start && (!strstr(ir, cases[i].start) || strstr(ir, " if ")))
            fail_msg("%s: want %s and no guard in\n%s", w->key, cases[i].start, ir);
        free(ir);
        tt_program_free(prog);
        tt_state_free(st);
        tt_workload_free(w);
    }
    /* 1000 columns (SqueezeNet's last 1x1 convolution over 169 pixels): 8 divides them but 16
     * does not, so two vectors move back too, and the starting point takes them (6 x 2 rather
     * than 13 x 1, a multiply-add per broadcast); other whole-vector tiles divide.  It computes
     * the definition. */
    tt_space sp;
    tt_workload *w = open_space("matmul:M=169,N=1000,K=64", &avx2, &sp);
    const tt_knob *mk = &sp.knobs[sp.nspatial + 7];
    int moved = 0;
    for (int c = 0; c < mk->n; c++) {
        int64_t v = mk->choice[c] & 0xffff;
        if (1000 % (v * 8)) {
            assert_int_equal(v, 2);
            moved++;
        }
    }
    assert_true(moved > 0);
    uint64_t index = tt_space_blocked_index(&sp, &avx2, &caches, 2, false, true);
    expect_config(&sp, w, index, (const char *const[]){"micro_kernel=[-1,6,2]", NULL});
    tt_workload_free(w);
    /* 24 columns on AVX-512 (MobileNet-V2's 24-channel projections): no whole vector divides
     * them and one moved back would recompute a third, so besides the partial vector of 12 the
     * knob offers the whole 24, a vector and a half (0x8000 | 24), and the starting point takes
     * it by 8 rows, 16 accumulators; the tile's vector loop runs over all 24 columns. */
    tt_vector_isa avx512 = {"avx512", 64, 32, true};
    w = open_space("matmul:M=392,N=24,K=48", &avx512, &sp);
    mk = &sp.knobs[sp.nspatial + 7];
    bool wide = false, partial = false;
    for (int c = 0; c < mk->n; c++) {
        wide |= (mk->choice[c] & 0xffff) == (0x8000 | 24);
        partial |= (mk->choice[c] & 0xffff) == (0x8000 | 12);
    }
    assert_true(wide && partial);
    index = tt_space_blocked_index(&sp, &avx512, &caches, 2, false, true);
    expect_config(&sp, w, index, (const char *const[]){"micro_kernel=[-1,8,32792]", NULL});
    tt_state *st;
    tt_program *prog;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_space_apply(&sp, index, &st, &err), TT_OK);
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    char *ir = tt_program_print(prog);
    if (!strstr(ir, "in 0..24 vectorize"))
        fail_msg("want a vector loop over 24 columns in\n%s", ir);
    free(ir);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    /* On AVX2 three whole vectors divide 24: no such tile. */
    w = open_space("matmul:M=392,N=24,K=48", &avx2, &sp);
    mk = &sp.knobs[sp.nspatial + 7];
    for (int c = 0; c < mk->n; c++)
        assert_false(mk->choice[c] & 0x8000);
    tt_workload_free(w);
    /* 1000 columns on AVX-512 (ResNet-18's classifier): every kind at once, one to four whole
     * vectors moved back, the partial vector of 10 and the wide tile of 40 (two and a half). */
    w = open_space("matmul:M=8,N=1000,K=512", &avx512, &sp);
    mk = &sp.knobs[sp.nspatial + 7];
    static const int64_t every_kind[] = {1, 2, 3, 4, 0x8000 | 10, 0x8000 | 40};
    for (size_t k = 0; k < sizeof(every_kind) / sizeof(every_kind[0]); k++) {
        bool offered = false;
        for (int c = 0; c < mk->n; c++)
            offered |= (mk->choice[c] & 0xffff) == every_kind[k];
        if (!offered)
            fail_msg("1000 columns: column tile %#llx not offered", (long long)every_kind[k]);
    }
    tt_workload_free(w);
}

/* The window starting point: for operators whose reductions are a small window (depthwise), the
 * register tile of one vector by the most rows up to the cap, outside the unrolled window; every
 * other space gets the default.  Each config computes the definition. */
static void window_configs_tile_the_whole_window(void **state)
{
    (void)state;
    static const struct {
        const char *workload;
        int64_t max_rows;
        const char *want[4]; /* NULL first: the default config */
    } cases[] = {
        {"depthwise_conv2d_nhwc:N=1,H=56,W=56,C=144,K=3,S=1,P=1",
         8,
         {"micro_kernel=[-1,8,1]", "reduce_inner_first=1", "auto_unroll_max_step=512",
          "tile_oh=1 "}},
        {"depthwise_conv2d_nhwc:N=1,H=56,W=56,C=144,K=3,S=1,P=1", 16, {"micro_kernel=[-1,14,1]"}},
        /* 14 output columns (stride 2) hold no 8: 7 rows. */
        {"depthwise_conv2d_nhwc:N=1,H=28,W=28,C=192,K=3,S=2,P=1", 8, {"micro_kernel=[-1,7,1]"}},
        {"depthwise_conv2d_nhwc:N=1,H=8,W=8,C=32,K=3,S=1,P=1", 8, {"micro_kernel=[-1,8,1]"}},
        {"depthwise_conv2d_nhwc:N=1,H=6,W=6,C=24,K=3,S=2,P=1", 16, {"reduce_inner_first=1"}},
        /* The padded input computed into the taps (inlined), unless it changes the layout: an
         * NCHW input to a channels-last depthwise convolution (ConvNeXt's) is padded and
         * transposed once, not gathered again by each of the 49 taps. */
        {"depthwise_conv2d_nhwc:N=1,H=12,W=12,C=16,K=3,S=1,P=1", 8, {"inline_producers=1 "}},
        {"te:t0[i0,i1,i2,i3] = select(i1 >= 3 && i1 < 15 && i2 >= 3 && i2 < 15, "
         "x0[0,i3,i1 - 3,i2 - 3], 0.0); out[i0,i1,i2,i3] += t0[i0,i1 + r0,i2 + r1,i3] * "
         "w1[r0,r1,0,i3]; t0:float32[1,18,18,16]; x0:float32[1,16,12,12]; "
         "w1:const float32[7,7,1,16]; out:float32[1,12,12,16]; r0:7; r1:7",
         8,
         {"inline_producers=0 ", "micro_kernel=[-1,6,1]"}},
        /* A 1x1 convolution of 16 or 48 input channels is a short reduction too, but each input
         * pixel is broadcast to every column: several vectors of columns (the blocked config's
         * tile), a vector and a half where that is all the columns; one vector, the last moved
         * back, over 72 columns, where 3 tiles of 24 ran slower. */
        {"te:t1[i0,i1,i2,i3] += x0[i0,0,i2 + r2,r0] * w1[0,0,r0,i3]; t0[i0,i1,i2,i3] = "
         "t1[i0,i1,i2,i3] + w2[i3]; out[i0,i1,i2,i3] = max(t0[i0,0,i2,i3], 0); "
         "t1:float32[1,1,196,48]; x0:float32[1,1,196,16]; w1:const float32[1,1,16,48]; "
         "t0:float32[1,1,196,48]; w2:const float32[48]; out:float32[1,1,196,48]; r0:16; r1:1; "
         "r2:1",
         8,
         {"micro_kernel=[-1,9,3]", "reduce_inner_first=1"}},
        {"te:t0[i0,i1,i2,i3] += x0[i0,0,i2 + r2,r0] * w1[0,0,r0,i3]; out[i0,i1,i2,i3] = "
         "t0[i0,i1,i2,i3] + w2[i3]; t0:float32[1,1,196,24]; x0:float32[1,1,196,48]; "
         "w1:const float32[1,1,48,24]; out:float32[1,1,196,24]; w2:const float32[24]; r0:48; "
         "r1:1; r2:1",
         8,
         {"micro_kernel=[-1,7,32792]"}},
        {"te:t0[i0,i1,i2,i3] += x0[i0,0,i2 + r2,r0] * w1[0,0,r0,i3]; out[i0,i1,i2,i3] = "
         "t0[i0,i1,i2,i3] + w2[i3]; t0:float32[1,1,196,72]; x0:float32[1,1,196,24]; "
         "w1:const float32[1,1,24,72]; out:float32[1,1,196,72]; w2:const float32[72]; r0:24; "
         "r1:1; r2:1",
         8,
         {"micro_kernel=[-1,7,1]"}},
        /* 576 taps (3 x 3 x 64) and a GEMM's 12: not windows, or windows that the default fits. */
        {"conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1", 8, {NULL}},
        {"matmul:M=512,N=512,K=512", 8, {NULL}},
    };
    tt_vector_isa avx512 = {"avx512", 64, 32, true};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].workload, &avx512, &sp);
        uint64_t index = tt_space_window_index(&sp, &avx512, cases[i].max_rows);
        if (!cases[i].want[0])
            assert_true(index == tt_space_default_index(&sp, &avx512));
        expect_config(&sp, w, index, cases[i].want);
        tt_workload_free(w);
    }
}

static char db_path[256];

static int count_records(void *ctx, const tt_db_row *r)
{
    int *n = ctx;
    n[0]++;
    n[1] += r->error_no == 0;
    return 0;
}

typedef struct {
    uint64_t h[4096];
    int n, dups;
} distinct;

static int check_distinct(void *ctx, const tt_db_row *r)
{
    distinct *d = ctx;
    uint64_t h = tt_hash64_str(r->config);
    for (int i = 0; i < d->n; i++)
        d->dups += d->h[i] == h;
    if (d->n < 4096)
        d->h[d->n++] = h;
    return 0;
}

static tt_tune_options options(const char *const *w, int64_t trials, volatile sig_atomic_t *stop)
{
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = w;
    o.nworkloads = 1;
    o.trials = trials;
    o.db_path = db_path;
    o.seed = 7;
    o.batch = 3;
    o.threads = 2;
    o.stop = stop;
    o.measure.repeat = 2;
    o.measure.timeout_s = 10;
    return o;
}

static void a_run_records_every_measurement_and_resumes(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-%d.db", (int)getpid());
    const char *w[1] = {"matmul:M=16,N=16,K=16"};
    volatile sig_atomic_t stop = 0;
    tt_tune_options o = options(w, 6, &stop);
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.measured, 6);
    assert_int_equal(sum.total, 6);
    assert_true(sum.best_s > 0);
    assert_true(sum.naive_s > 0); /* the naive schedule is measured first, as the baseline */
    assert_string_not_equal(sum.best_config, "");
    /* Again with a larger budget: only the difference is measured. */
    o.trials = 10;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.measured, 4);
    assert_int_equal(sum.total, 10);
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    int n[2] = {0, 0};
    tt_db_filter f = {.workload = w[0]};
    assert_int_equal(tt_db_history(db, &f, count_records, n), TT_OK);
    assert_int_equal(n[0], 10);
    assert_int_equal(n[1], 10);
    /* The best config answers tvm-db's question. */
    tt_db_row *rows;
    size_t nr;
    assert_int_equal(tt_db_best(db, w[0], "llvm", NULL, 1, false, &rows, &nr), TT_OK);
    assert_int_equal(nr, 1);
    assert_string_equal(rows[0].config, sum.best_config);
    tt_db_rows_free(rows, nr);
    tt_db_close(db);
    /* A stop request before anything runs measures nothing and says so. */
    stop = 1;
    o.trials = 20;
    assert_int_equal(tt_tune_run(&o, &sum, NULL, &err), TT_OK);
    assert_int_equal(sum.measured, 0);
    tt_db_remove(db_path);
}

static void grid_search_exhausts_a_small_space(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-grid-%d.db", (int)getpid());
    const char *w[1] = {"relu:M=1,N=2"};
    tt_tune_options o = options(w, 1000, NULL);
    o.strategy = TT_STRATEGY_GRID;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    /* Fewer distinct configs than trials: the run ends when the space is exhausted. */
    assert_true(sum.total > 1);
    assert_true(sum.total < 1000);
    assert_int_equal(sum.errors, 0);
    tt_db_remove(db_path);
}

/* A bilinear Resize's task reads its input through constant indices (x[w0[i], w1[j]]): the
 * tuner's random inputs keep them inside the dimensions they index, [0, 5) and [0, 4) here.
 * In [-8, 8), as other integers are, the reference read out of bounds and the run ended with
 * "reads 'x' out of bounds" (DeepLabV3's last Resize, 2026-12-08).  Every config measures. */
static void gather_indices_stay_inside_what_they_index(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-gather-%d.db", (int)getpid());
    const char *w[1] = {"te:out[i,j] = x[w0[i],w1[j]] * 2.0 + x[w0[i],w1[j] * 0 + 1]; "
                        "x:float32[5,4]; w0:const int64[7]; w1:const int64[6]"};
    tt_tune_options o = options(w, 6, NULL);
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_true(sum.total > 0);
    assert_int_equal(sum.errors, 0);
    tt_db_remove(db_path);
    /* the extents, from the reads that index with the values alone */
    tt_workload *wl;
    assert_int_equal(tt_workload_parse(w[0], &wl, &err), TT_OK);
    int params[8], nin;
    tt_dag_params(&wl->dag, params, 8, &nin);
    assert_int_equal(nin, 3);
    assert_int_equal(tt_dag_index_extent(&wl->dag, params[0]), 0);
    assert_int_equal(tt_dag_index_extent(&wl->dag, params[1]), 5);
    assert_int_equal(tt_dag_index_extent(&wl->dag, params[2]), 4);
    tt_workload_free(wl);
}

/* The genetic algorithm and the model-guided strategy run past their warm-up (the model is
 * trained and proposes; the GA breeds) and every config they pick is new and correct. */
static void ga_and_xgb_strategies_pick_new_correct_configs(void **state)
{
    static const tt_strategy strategies[2] = {TT_STRATEGY_GA, TT_STRATEGY_XGB};
    for (int k = 0; k < 2; k++) {
        snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-strategy-%d-%d.db", k, (int)getpid());
        const char *w[1] = {"matmul:M=32,N=32,K=32"};
        tt_tune_options o = options(w, 48, NULL);
        o.strategy = strategies[k];
        o.batch = 8;
        tt_tune_summary sum;
        tt_errbuf err = {{0}};
        if (tt_tune_run(&o, &sum, NULL, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(sum.total, 48);
        assert_int_equal(sum.errors, 0); /* every picked config lowered, compiled and matched */
        assert_true(sum.best_s > 0 && sum.best_s <= sum.naive_s);
        tt_db_remove(db_path);
    }
}

/* The log a run wrote to `log` (closed here), as text. */
static void read_log(FILE *log, char *text, size_t size)
{
    rewind(log);
    size_t got = fread(text, 1, size - 1, log);
    text[got] = 0;
    fclose(log);
}

/* Whether db_path holds evo's saved model of `workload`: TT_OK with its size in *len, or
 * TT_ERR_NOT_FOUND. */
static tt_status saved_model(const char *workload, size_t *len)
{
    char name[256];
    snprintf(name, sizeof(name), "prog-rank:llvm:%s", workload);
    tt_db *db;
    tt_errbuf err = {{0}};
    if (tt_db_open(db_path, TT_DB_READONLY, &db, &err))
        fail_msg("%s", err.msg);
    void *blob = NULL;
    size_t n = 0;
    tt_status s = tt_db_model_load(db, name, TT_FEATURES_VERSION, &blob, &n, NULL);
    free(blob);
    tt_db_close(db);
    if (len)
        *len = n;
    return s;
}

/* The evolutionary search: a first run samples sketches (the model is not trusted yet), a resumed
 * run retrains the pack-sum model on what the first measured, saves it, and evolves from the best
 * measured programs; a similar workload's first round learns from those records; every program
 * is new, compiles and computes the definition. */
static void evolutionary_search_resumes_with_its_model(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-evo-%d.db", (int)getpid());
    const char *w[1] = {"matmul:M=32,N=48,K=16"};
    tt_tune_options o = options(w, 40, NULL);
    o.strategy = TT_STRATEGY_EVO;
    o.population = 96;
    o.batch = 8;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.total, 40);
    assert_int_equal(sum.errors, 0);
    size_t len;
    assert_int_equal(saved_model(w[0], NULL), TT_ERR_NOT_FOUND);
    double first_best = sum.best_s;
    o.trials = 120; /* 40 resumed, a random round of 64 (under the warm-up), a model round */
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.measured, 80);
    assert_int_equal(sum.total, 120);
    assert_int_equal(sum.errors, 0);
    assert_true(sum.best_s > 0 && sum.best_s <= first_best && sum.best_s <= sum.naive_s);
    /* The model trained on the resumed history was kept. */
    assert_int_equal(saved_model(w[0], &len), TT_OK);
    assert_true(len > 100);
    /* Resumed with under 20% new records since the saved model: it is reloaded, not retrained;
     * the next round, planned while this one is measured (overlap), trains anew. */
    FILE *log = tmpfile();
    o.trials = 200;
    o.overlap_search = true;
    if (tt_tune_run(&o, &sum, log, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.total, 200);
    assert_int_equal(sum.errors, 0);
    char text[4096] = "";
    read_log(log, text, sizeof(text));
    assert_non_null(strstr(text, "reusing the saved cost model"));
    o.overlap_search = false;
    /* no config was measured twice */
    static distinct d;
    tt_db_filter fw = {.workload = w[0]};
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    assert_int_equal(tt_db_history(db, &fw, check_distinct, &d), TT_OK);
    tt_db_close(db);
    assert_int_equal(d.n, 200);
    assert_int_equal(d.dups, 0);
    /* A similar workload starts from a model trained on those records (transfer): its first
     * round already has a model. */
    const char *w2[1] = {"matmul:M=48,N=32,K=16"};
    o.workloads = w2;
    o.trials = 8;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.total, 8);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(saved_model(w2[0], NULL), TT_OK);
    tt_db_remove(db_path);
}

/* The records of a sketch-random run: every one a step list of the sketches (no template
 * config, so no starting point), lowering to a program no other record lowers to. */
typedef struct {
    const tt_dag *dag;
    uint64_t program[256];
    int n, not_steps, twins, unlowered;
} sampled;

static int check_sampled(void *ctx, const tt_db_row *r)
{
    sampled *s = ctx;
    if (!strcmp(r->config, "[]")) /* the naive schedule, the baseline of every run */
        return 0;
    tt_state *st;
    tt_program *prog;
    if (r->config_kind != TT_CONFIG_STEPS) {
        s->not_steps++;
        return 0;
    }
    if (tt_state_from_json(s->dag, r->config, &st, NULL)) {
        s->unlowered++;
        return 0;
    }
    tt_status lowered = tt_lower(st, &prog, NULL);
    tt_state_free(st);
    if (lowered) {
        s->unlowered++;
        return 0;
    }
    uint64_t h = tt_evo_program_hash(prog);
    tt_program_free(prog);
    for (int i = 0; i < s->n; i++)
        s->twins += s->program[i] == h;
    if (s->n < 256)
        s->program[s->n++] = h;
    return 0;
}

/* sketch-random, evo's space without its model: no starting points, no model trained or saved,
 * every program new and correct; a second run resumes without measuring one again. */
static void sketch_random_samples_new_programs_without_a_model(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-sketch-random-%d.db", (int)getpid());
    const char *w[1] = {"matmul:M=32,N=48,K=16"};
    tt_tune_options o = options(w, 70, NULL);
    o.strategy = TT_STRATEGY_SKETCH_RANDOM;
    o.batch = 8;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    FILE *log = tmpfile();
    assert_non_null(log);
    if (tt_tune_run(&o, &sum, log, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.total, 70); /* past the 64 after which evo would trust its model */
    assert_int_equal(sum.errors, 0); /* every program compiled and computed the definition */
    assert_true(sum.best_s > 0 && sum.best_s <= sum.naive_s);
    o.trials = 100;
    if (tt_tune_run(&o, &sum, log, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum.measured, 30);
    assert_int_equal(sum.total, 100);
    assert_int_equal(sum.errors, 0);
    char text[8192] = "";
    read_log(log, text, sizeof(text));
    assert_null(strstr(text, "starting from")); /* no template configs, no similar workloads */
    assert_null(strstr(text, "cost model"));
    assert_int_equal(saved_model(w[0], NULL), TT_ERR_NOT_FOUND);
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    tt_workload *wl;
    assert_int_equal(tt_workload_parse(w[0], &wl, &err), TT_OK);
    static sampled s;
    memset(&s, 0, sizeof(s));
    s.dag = &wl->dag;
    tt_db_filter fw = {.workload = w[0]};
    assert_int_equal(tt_db_history(db, &fw, check_sampled, &s), TT_OK);
    tt_db_close(db);
    tt_workload_free(wl);
    assert_int_equal(s.n, 99); /* and the naive schedule, which every run measures first */
    assert_int_equal(s.not_steps, 0);
    assert_int_equal(s.unlowered, 0);
    assert_int_equal(s.twins, 0);
    tt_db_remove(db_path);
}

/* A synthetic cost: what a config's text hashes to (no compiling, deterministic). */
static double hashed_cost(void *ctx, const char *config)
{
    (void)ctx;
    return 1e-3 * (1.0 + (double)(tt_hash64_str(config) % 1000) / 1000.0);
}

typedef struct {
    char configs[8][4096];
    int n;
} first_configs;

static int keep_first(void *ctx, const tt_db_row *r)
{
    first_configs *f = ctx;
    if (f->n < 8)
        snprintf(f->configs[f->n++], sizeof(f->configs[0]), "%s", r->config);
    return 0;
}

/* Fails unless the template's default config of `workload` is among its first 8 records. */
static void default_among_first_records(const char *workload, const tt_vector_isa *isa)
{
    tt_errbuf err = {{0}};
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    first_configs fc = {.n = 0};
    tt_db_filter f = {.workload = workload};
    assert_int_equal(tt_db_history(db, &f, keep_first, &fc), TT_OK);
    tt_db_close(db);
    assert_true(fc.n >= 2);
    tt_workload *w;
    assert_int_equal(tt_workload_parse(workload, &w, &err), TT_OK);
    tt_space sp;
    tt_state *st;
    assert_int_equal(tt_space_init(&sp, &w->dag, 2, isa, &err), TT_OK);
    assert_int_equal(tt_space_apply(&sp, tt_space_default_index(&sp, isa), &st, &err), TT_OK);
    char *want = tt_steps_to_json(st->steps.data, st->steps.len);
    bool found = false;
    for (int i = 0; i < fc.n; i++)
        found |= !strcmp(fc.configs[i], want);
    if (!found)
        fail_msg("%s: the default config %s is not among the first records", workload, want);
    free(want);
    tt_state_free(st);
    tt_workload_free(w);
}

static int count_flush(void *ctx, const tt_db_row *r)
{
    int *n = ctx;
    n[0]++;
    n[1] += r->extra && strstr(r->extra, "\"flush\": \"constants\"") != NULL;
    return 0;
}

/* Records say how the caches were flushed when they were timed; a run that resumes records of
 * another mode says that their times do not compare, and what to resume with. */
static void records_say_how_the_caches_were_flushed(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-flush-%d.db", (int)getpid());
    const char *w[1] = {"matmul:M=16,N=16,K=8"};
    tt_tune_options o = options(w, 4, NULL);
    o.measure.cache_flush = TT_CACHE_FLUSH_CONSTANTS;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    char *log = NULL;
    size_t len = 0;
    FILE *lf = open_memstream(&log, &len);
    if (tt_tune_run(&o, &sum, lf, &err))
        fail_msg("%s", err.msg);
    fflush(lf);
    assert_null(strstr(log, "do not compare"));
    tt_db *db;
    int n[2] = {0, 0};
    tt_db_filter f = {.workload = w[0]};
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    assert_int_equal(tt_db_history(db, &f, count_flush, n), TT_OK);
    tt_db_close(db);
    assert_int_equal(n[0], 4);
    assert_int_equal(n[1], 4);
    /* The same mode resumes quietly; the network mode warns. */
    o.trials = 6;
    if (tt_tune_run(&o, &sum, lf, &err))
        fail_msg("%s", err.msg);
    fflush(lf);
    assert_null(strstr(log, "do not compare"));
    o.trials = 8;
    o.measure.cache_flush = TT_CACHE_FLUSH_NETWORK;
    if (tt_tune_run(&o, &sum, lf, &err))
        fail_msg("%s", err.msg);
    fclose(lf);
    if (!strstr(log, "warning: 6 earlier records were timed with cache flush 'constants', this "
                     "run times with 'network': their times do not compare (resume with "
                     "--cache-flush=constants"))
        fail_msg("log: %s", log);
    free(log);
    tt_db_remove(db_path);
}

/* The log of `trials` xgb trials of `workload` (hashed costs), malloc'ed. */
static char *xgb_run_log(const char *workload, int64_t trials)
{
    const char *w[1] = {workload};
    tt_tune_options o = options(w, trials, NULL);
    o.strategy = TT_STRATEGY_XGB;
    o.objective = hashed_cost;
    char *log = NULL;
    size_t loglen = 0;
    FILE *lf = open_memstream(&log, &loglen);
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, lf, &err))
        fail_msg("%s", err.msg);
    fclose(lf);
    return log;
}

/* Fails unless `workload`'s first xgb trials say that they start from `what`. */
static void xgb_starts_from(const char *workload, const char *what)
{
    char *log = xgb_run_log(workload, 6), want[256];
    snprintf(want, sizeof(want), "starting from %s", what);
    if (!strstr(log, want))
        fail_msg("log: %s", log);
    free(log);
}

/* The searches start from good points: the template's default config right after the baseline,
 * then the best configs of a similar workload measured before, mapped to the new shape (xgb); the
 * evolutionary search measures the default in its first round.  A different operator's records
 * are not used. */
static void xgb_starts_from_the_default_and_similar_workloads(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-seeds-%d.db", (int)getpid());
    const char *first[1] = {"matmul:M=64,N=64,K=64"};
    tt_tune_options o = options(first, 24, NULL);
    o.strategy = TT_STRATEGY_XGB;
    o.objective = hashed_cost;
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    /* The new shape's run says where it starts from. */
    const char *second[1] = {"matmul:M=128,N=64,K=64"};
    xgb_starts_from(second[0], "the template's default and 2 configs of 1 similar workload");
    /* Its first records: the naive baseline, then the default config (xgb, then evo). */
    tt_target host;
    tt_target_parse("llvm", &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    default_among_first_records(second[0], &isa);
    const char *evo[1] = {"matmul:M=32,N=64,K=64"};
    o = options(evo, 4, NULL);
    o.strategy = TT_STRATEGY_EVO;
    o.objective = hashed_cost;
    if (tt_tune_run(&o, &sum, NULL, &err))
        fail_msg("%s", err.msg);
    default_among_first_records(evo[0], &isa);
    /* Another operator starts from its own default only. */
    char *log = xgb_run_log("batch_matmul:B=2,M=32,N=32,K=32", 4);
    assert_null(strstr(log, "similar workload"));
    free(log);
    tt_db_remove(db_path);
}

/* The configs a search starts from come from the nearest shapes' best records, however much
 * history came before them: a far shape tuned for 600 trials first (more than the 512 records the
 * seeds were once read from, in history order) does not crowd out a near one tuned for 8. */
static void seeds_come_from_the_nearest_shapes(void **state)
{
    (void)state;
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-near-%d.db", (int)getpid());
    const char *far[1] = {"matmul:M=512,N=512,K=16"};
    const char *near[1] = {"matmul:M=64,N=64,K=64"};
    const char *const *before[2] = {far, near};
    int64_t trials[2] = {600, 8};
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    for (int i = 0; i < 2; i++) {
        tt_tune_options o = options(before[i], trials[i], NULL);
        o.strategy = TT_STRATEGY_RANDOM;
        o.objective = hashed_cost;
        o.batch = 32;
        if (tt_tune_run(&o, &sum, NULL, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(sum.measured, trials[i]);
    }
    xgb_starts_from("matmul:M=64,N=64,K=32",
                    "the template's default and 4 configs of 2 similar workloads");
    tt_db_remove(db_path);
}

static void run_deadline_adapts_to_the_best_time(void **state)
{
    tt_measure_options m = {.repeat = 5, .min_repeat_ms = 20, .timeout_s = 10};
    /* Nothing measured yet: the configured timeout. */
    assert_true(tt_tune_deadline(&m, 0) == 10);
    /* A fast best: the floor of one second plus the samples' minimum length. */
    double d = tt_tune_deadline(&m, 1e-5);
    assert_true(d >= 1.0 && d < 1.5);
    /* A best of 10 ms: 50x is 0.5 s per call, warm-up + 5 samples + 1 s to load = 4 s. */
    d = tt_tune_deadline(&m, 0.01);
    assert_true(d > 3.9 && d < 4.1);
    /* Never more than the configured timeout. */
    assert_true(tt_tune_deadline(&m, 1.0) == 10);
    /* The CPU's defaults: 64 single calls within a 100 ms budget.  A best of 10 ms: 50x is
     * 0.5 s a call, so the budget stops after the minimum 5 samples: 0.5 + 2.5 + 1 = 4 s, not
     * the 33 s that 64 samples would need. */
    tt_measure_options cpu = {
        .number = -1, .repeat = -1, .min_repeat_ms = -1, .repeat_budget_ms = -1, .timeout_s = 60};
    tt_tune_measure_defaults("llvm -mcpu=znver4", &cpu);
    assert_int_equal(cpu.number, 1);
    assert_int_equal(cpu.repeat, TT_MEASURE_MAX_REPEAT);
    assert_true(cpu.min_repeat_ms == 0.01 && cpu.repeat_budget_ms == 100);
    assert_true(cpu.timeout_s == 60); /* given: kept */
    d = tt_tune_deadline(&cpu, 0.01);
    assert_true(d > 3.9 && d < 4.1);
    /* A best of 10 us: 64 calls of 0.5 ms fit the budget: 0.5 ms + 32 ms + 1 s. */
    d = tt_tune_deadline(&cpu, 1e-5);
    assert_true(d > 1.03 && d < 1.04);
    /* OpenCL keeps TVM's GPU advice: samples of calls grown to 20 ms, no budget. */
    tt_measure_options gpu = {
        .number = -1, .repeat = 7, .min_repeat_ms = -1, .repeat_budget_ms = -1, .timeout_s = -1};
    tt_tune_measure_defaults("opencl -device=mali", &gpu);
    assert_int_equal(gpu.repeat, 7); /* given: kept */
    assert_true(gpu.min_repeat_ms == 20 && gpu.repeat_budget_ms == 0 && gpu.timeout_s == 10);
}

/* The models learn from a measurement's fastest sample: a busy device only adds time, so the
 * median of a measurement that a busy process interrupted reads slow. */
static void models_learn_from_the_fastest_sample(void **state)
{
    (void)state;
    const double interrupted[5] = {3e-3, 1e-3, 2.5e-3, 0, 4e-3};
    /* the fastest positive sample, not the median (2.5 ms) and not the empty one */
    assert_true(fabs(tt_tune_label(2e9, interrupted, 5, 2.5e-3, 0) - 2e12) < 1);
    assert_true(fabs(tt_tune_label(2e9, NULL, 0, 4e-3, 0) - 5e11) < 1); /* no samples: median */
    assert_true(tt_tune_label(2e9, interrupted, 5, 2.5e-3, 4) == 0);    /* an error */
    assert_true(tt_tune_label(2e9, NULL, 0, 0, 0) == 0);
}

/* A search round (training, then evolving a population) runs in a child of the tuner.  A tuner
 * killed with SIGKILL takes it along instead of leaving it to run out its round.  The child here
 * says it is running (so the kill comes after its prctl, not in the race that its parent check
 * closes) and never ends by itself; this test adopts it (a subreaper) to see it die. */
static void never_returns(task *t, int fd, void *arg)
{
    (void)t, (void)fd;
    pid_t self = getpid();
    if (write(*(int *)arg, &self, sizeof(self)) != sizeof(self))
        _exit(1);
    for (;;)
        pause();
}

static void a_killed_tuner_takes_its_search_round_with_it(void **state)
{
    (void)state;
    int report[2];
    assert_int_equal(pipe(report), 0);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t tuner = fork();
    assert_true(tuner >= 0);
    if (tuner == 0) {
        task t;
        memset(&t, 0, sizeof(t));
        tt_rng_seed(&t.rng, 1);
        pid_t search = 0;
        if (tt__tune_spawn_search(&t, never_returns, &report[1], &search) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(report[1]);
    pid_t search = 0;
    assert_int_equal(read(report[0], &search, sizeof(search)), sizeof(search));
    close(report[0]);
    assert_true(search > 0);
    kill(tuner, SIGKILL);
    assert_int_equal(waitpid(tuner, NULL, 0), tuner);
    int status = 0;
    bool died = tt_proc_reap(search, false, 5, &status); /* killed there if not: the defect */
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    assert_true(died);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* The default of data movement that reads every tensor along its innermost dimension (a copy,
 * a concatenation) walks the rows in order: the leading axes split into a parallel loop of 64
 * iterations or more, the rest whole, the innermost one vector of 16 where that divides it
 * (DenseNet's concatenations of 32 channels agree per vector), else as long as the knob offers
 * (ShuffleNet's 116 channels: 58, where it was 4).  A transpose of the innermost dimension keeps
 * the tiles that block both orders; where its last axis is shorter than a vector (the shuffle's
 * pixel of 2 x 58 channels), that axis whole and the one before tiled so that the two, fused,
 * make a vector (29 x 2).  Each computes its definition. */
static void data_movement_defaults_walk_rows_in_order(void **state)
{
    (void)state;
    tt_vector_isa avx512 = {"avx512", 64, 32, true};
    static const struct {
        const char *key;
        const char *want[4];
    } cases[] = {
        {"te:out[i0,i1,i2,i3] = select(i3 < 58, x0[i0,i1,i2,i3], x1[i0,i1,i2,i3 - 58]); "
         "out:float32[2,28,28,116]; x0:float32[2,28,28,58]; x1:float32[2,28,28,58]",
         {"tile_i0=1 ", "tile_i1=1 ", "tile_i2=14 ", "tile_i3=58 "}},
        {"te:out[i0,i1,i2,i3] = select(i3 < 32, x0[0,i1,i2,i3], x1[0,i1,i2,i3 - 32]); "
         "out:float32[1,14,14,64]; x0:float32[1,14,14,32]; x1:float32[1,14,14,32]",
         {"tile_i1=1 ", "tile_i2=2 ", "tile_i3=16 ", NULL}},
        {"te:out[i0,i1,i2,i3,i4] = x0[i0,i1,i2,i4,i3]; out:float32[2,8,8,58,2]; "
         "x0:float32[2,8,8,2,58]",
         {"tile_i1=8 ", "tile_i2=8 ", "tile_i3=29 ", "tile_i4=2"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_space sp;
        tt_workload *w = open_space(cases[i].key, &avx512, &sp);
        expect_config(&sp, w, tt_space_default_index(&sp, &avx512), cases[i].want);
        tt_workload_free(w);
    }
}

/* A search round holds none of its tuner's sockets.  The tracker runs jobs' rounds in such
 * children: one that kept the tracker's listening socket held its port after the tracker was
 * killed, until its own SIGKILL took effect, and a tracker started again at once could not
 * listen ("address already in use").  The child reports what its copy of the listener is; the
 * tuner then closes its own and listens on the same port while the child still runs. */
static int listener_fd = -1;

static void reports_the_listener(task *t, int fd, void *arg)
{
    (void)t, (void)arg;
    struct stat st;
    char held = fstat(listener_fd, &st) == 0 && S_ISSOCK(st.st_mode);
    if (write(fd, &held, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static int listen_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void a_search_round_holds_none_of_the_tuners_sockets(void **state)
{
    (void)state;
    listener_fd = listen_loopback(0);
    assert_true(listener_fd >= 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(listener_fd, (struct sockaddr *)&a, &len), 0);
    int port = ntohs(a.sin_port);
    task t;
    memset(&t, 0, sizeof(t));
    tt_rng_seed(&t.rng, 1);
    pid_t search = 0;
    int fd = tt__tune_spawn_search(&t, reports_the_listener, NULL, &search);
    assert_true(fd >= 0);
    char held = 1;
    assert_int_equal(read(fd, &held, 1), 1);
    assert_int_equal(held, 0);
    close(listener_fd);
    int again = listen_loopback(port); /* the child still runs */
    assert_true(again >= 0);
    close(again);
    kill(search, SIGKILL);
    tt__tune_reap_search(fd, search);
}

static void bad_workloads_and_targets_are_errors(void **state)
{
    snprintf(db_path, sizeof(db_path), "/tmp/tt-tune-bad-%d.db", (int)getpid());
    const char *w[1] = {"matmul:M=16"};
    tt_tune_options o = options(w, 4, NULL);
    tt_tune_summary sum;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_tune_run(&o, &sum, NULL, &err), TT_ERR_BAD_WORKLOAD);
    assert_non_null(strstr(err.msg, "needs parameter N"));
    const char *w2[1] = {"matmul:M=16,N=16,K=16"};
    o = options(w2, 4, NULL);
    o.target = "vulkan";
    assert_int_equal(tt_tune_run(&o, &sum, NULL, &err), TT_ERR_UNSUPPORTED);
    tt_db_remove(db_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampled_configs_compute_the_definition),
        cmocka_unit_test(the_epilogue_is_always_inlined),
        cmocka_unit_test(transforms_stay_out_of_reductions),
        cmocka_unit_test(cache_blocked_configs_follow_the_caches),
        cmocka_unit_test(short_row_axes_keep_enough_accumulators),
        cmocka_unit_test(accumulators_write_through_the_epilogue),
        cmocka_unit_test(rows_reduce_in_vector_lanes),
        cmocka_unit_test(long_epilogue_rows_are_vector_loops),
        cmocka_unit_test(packed_copies_are_vector_loops),
        cmocka_unit_test(padding_computed_once_runs_in_parallel),
        cmocka_unit_test(window_configs_tile_the_whole_window),
        cmocka_unit_test(register_tiles_may_move_their_last_tile_back),
        cmocka_unit_test(prime_row_axes_take_balanced_tiles),
        cmocka_unit_test(column_tiles_may_move_their_last_tile_back),
        cmocka_unit_test(a_run_records_every_measurement_and_resumes),
        cmocka_unit_test(grid_search_exhausts_a_small_space),
        cmocka_unit_test(gather_indices_stay_inside_what_they_index),
        cmocka_unit_test(ga_and_xgb_strategies_pick_new_correct_configs),
        cmocka_unit_test(evolutionary_search_resumes_with_its_model),
        cmocka_unit_test(sketch_random_samples_new_programs_without_a_model),
        cmocka_unit_test(records_say_how_the_caches_were_flushed),
        cmocka_unit_test(run_deadline_adapts_to_the_best_time),
        cmocka_unit_test(xgb_starts_from_the_default_and_similar_workloads),
        cmocka_unit_test(seeds_come_from_the_nearest_shapes),
        cmocka_unit_test(models_learn_from_the_fastest_sample),
        cmocka_unit_test(data_movement_defaults_walk_rows_in_order),
        cmocka_unit_test(bad_workloads_and_targets_are_errors),
        cmocka_unit_test(a_killed_tuner_takes_its_search_round_with_it),
        cmocka_unit_test(a_search_round_holds_none_of_the_tuners_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
