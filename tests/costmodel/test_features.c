/* Per-store features: TVM's test vectors on matmul 512^3 (search.md C7), names, one row per stored
 * buffer, allocation features of a cache stage, and no crash on any operator of the library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "costmodel/features.h"

static int feature_index(const char *name)
{
    for (int i = 0; i < TT_STORE_FEATURES; i++)
        if (!strcmp(tt_feature_name(i), name))
            return i;
    fail_msg("no feature named %s", name);
    return -1;
}

static tt_workload *parse(const char *text)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(text, &w, &err))
        fail_msg("%s: %s", text, err.msg);
    return w;
}

/* The slot of buffer accesses whose one-hot says `acc` ("read_write", ...). */
static int slot_with(const float *row, const char *acc)
{
    char name[64];
    for (int s = 0; s < 5; s++) {
        snprintf(name, sizeof(name), "B%d.acc_type.%s", s, acc);
        if (row[feature_index(name)] == 1.0f)
            return s;
    }
    return -1;
}

static float slot_value(const float *row, int slot, const char *what)
{
    char name[64];
    snprintf(name, sizeof(name), "B%d.%s", slot, what);
    return row[feature_index(name)];
}

static void tvm_matmul_vectors(void **state)
{
    (void)state;
    assert_string_equal(tt_feature_name(0), "float_mad");
    assert_string_equal(tt_feature_name(163), "auto_unroll_max_step");
    assert_null(tt_feature_name(TT_STORE_FEATURES));
    tt_workload *w = parse("matmul:M=512,N=512,K=512");
    tt_state *st;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    int C = 2;
    int64_t l16 = 16, l8 = 8;
    /* TVM's test: split i by 16, j by 8, reorder (io, jo, k, ji, ii), vectorize ji, parallel io
     * and jo, unroll k.  We vectorise only innermost loops, so ii (16) instead of ji. */
    assert_int_equal(tt_sched_split(st, C, 0, &l16, 1, true, &err), TT_OK);
    assert_int_equal(tt_sched_split(st, C, 2, &l8, 1, true, &err), TT_OK);
    int order[5] = {0, 2, 4, 3, 1};
    assert_int_equal(tt_sched_reorder(st, C, order, 5, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, C, 4, TT_ANN_VECTORIZE, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, C, 0, TT_ANN_PARALLEL, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, C, 1, TT_ANN_PARALLEL, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, C, 2, TT_ANN_UNROLL, &err), TT_OK);
    tt_program *p;
    if (tt_lower(st, &p, &err))
        fail_msg("%s", err.msg);
    float row[4 * TT_STORE_FEATURES];
    assert_int_equal(tt_features_per_store(p, row, 4), 1);
    int c = slot_with(row, "read_write");
    assert_true(c >= 0);
    assert_float_equal(slot_value(row, c, "bytes"), log2(512.0 * 512 * 512 * 4 + 1), 1e-3);
    assert_float_equal(slot_value(row, c, "reuse_dis_iter"), log2(8 * 16 + 1), 1e-4);
    assert_float_equal(slot_value(row, c, "reuse_type.loop_multiple_read"), 1, 0);
    assert_float_equal(slot_value(row, c, "reuse_ct"), log2(512 + 1), 1e-4);
    assert_float_equal(row[feature_index("parallel_num")], log2(3), 1e-5);
    assert_float_equal(row[feature_index("parallel_prod")], log2(32 * 64 + 1), 1e-4);
    assert_float_equal(row[feature_index("vec_len")], log2(16 + 1), 1e-5);
    assert_float_equal(row[feature_index("vec_type.mixed")], 1, 0);
    assert_float_equal(row[feature_index("unroll_num")], 1, 1e-6);
    assert_float_equal(row[feature_index("is_gpu")], 0, 0);
    assert_float_equal(row[feature_index("num_loops")], log2(5 + 1), 1e-5);
    /* one add and one mul per point */
    assert_float_equal(row[feature_index("float_addsub")], log2(512.0 * 512 * 512 + 1), 1e-3);
    assert_float_equal(row[feature_index("float_mul")], log2(512.0 * 512 * 512 + 1), 1e-3);
    /* A reads along k with stride 1 (inner loops ii and ji: A[i,k] uses ii) */
    int a = slot_with(row, "read");
    assert_true(a >= 0);
    tt_program_free(p);
    tt_state_free(st);
    tt_workload_free(w);
}

/* A 4x16 register tile of matmul 64^3 with the reduction carried over it, against the same tile
 * with the reduction outermost (every output written back on every k): the tile block tells
 * them apart by their loop groups (docs/search.md "The register tile block"). */
static tt_program *matmul_tile(const int order[6])
{
    tt_workload *w = parse("matmul:M=64,N=64,K=64");
    tt_state *st;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    int C = 2;
    int64_t l4 = 4, l16 = 16, l8 = 8;
    assert_int_equal(tt_sched_split(st, C, 0, &l4, 1, true, &err), TT_OK);  /* i.0 16, i.1 4 */
    assert_int_equal(tt_sched_split(st, C, 2, &l16, 1, true, &err), TT_OK); /* j.0 4, j.1 16 */
    assert_int_equal(tt_sched_split(st, C, 4, &l8, 1, true, &err), TT_OK);  /* k.0 8, k.1 8 */
    assert_int_equal(tt_sched_reorder(st, C, order, 6, &err), TT_OK);
    assert_int_equal(tt_sched_annotate(st, C, 5, TT_ANN_VECTORIZE, &err), TT_OK);
    tt_program *p;
    if (tt_lower(st, &p, &err))
        fail_msg("%s", err.msg);
    tt_state_free(st);
    tt_workload_free(w);
    return p;
}

static void tile_block_tells_kept_from_reloaded_accumulators(void **state)
{
    (void)state;
    float row[4 * TT_STORE_FEATURES];
    /* i.0, j.0, k.0, k.1, i.1, j.1: the tile's 4 accumulator vectors stay over all 64 k */
    const int kept[6] = {0, 2, 4, 5, 1, 3};
    tt_program *p = matmul_tile(kept);
    assert_int_equal(tt_features_per_store(p, row, 4), 1);
    assert_float_equal(row[feature_index("tile.inner")], log2(64 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.inner_carried")], log2(64 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.middle")], log2(64 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.middle_carried")], log2(1 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.acc_vectors")], log2(4 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.inner_x_carried")], log2(64 * 64 + 1), 1e-4);
    /* one k: C's 4x16 tile, 4 elements of A's column, 16 of B's row */
    assert_float_equal(row[feature_index("tile.footprint.inner")], log2((64 + 4 + 16) * 4 + 1),
                       1e-4);
    /* all k: A's 4x64 rows and B's 64x16 panel besides */
    assert_float_equal(row[feature_index("tile.footprint.inner_carried")],
                       log2((64 + 256 + 1024) * 4 + 1), 1e-4);
    assert_float_equal(row[feature_index("tile.input_elems")], log2(20 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.input_per_output")], log2(20.0 / 64 + 1), 1e-5);
    tt_program_free(p);
    /* k.0, k.1, i.0, j.0, i.1, j.1: the whole 64x64 output is the tile carried over k */
    const int reloaded[6] = {4, 5, 0, 2, 1, 3};
    p = matmul_tile(reloaded);
    assert_int_equal(tt_features_per_store(p, row, 4), 1);
    assert_float_equal(row[feature_index("tile.inner")], log2(64 * 64 + 1), 1e-4);
    assert_float_equal(row[feature_index("tile.inner_carried")], log2(64 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.middle")], log2(1 + 1), 1e-5);
    assert_float_equal(row[feature_index("tile.acc_vectors")], log2(256 + 1), 1e-5);
    tt_program_free(p);
}

static void rows_per_stored_buffer(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=64,N=64,K=64");
    tt_state *st;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    assert_int_equal(tt_sched_cache_write(st, 2, "local", &err), TT_OK);
    int64_t l = 8;
    assert_int_equal(tt_sched_split(st, 3, 0, &l, 1, true, &err), TT_OK);
    assert_int_equal(tt_sched_compute_at(st, 2, 3, 0, &err), TT_OK);
    tt_program *p;
    if (tt_lower(st, &p, &err))
        fail_msg("%s", err.msg);
    float row[4 * TT_STORE_FEATURES];
    assert_int_equal(tt_features_per_store(p, row, 4), 2);
    /* the cache stage (first stored) is allocated inside the i.0 loop: 8 x 64 floats */
    assert_float_equal(row[feature_index("alloc_size")], log2(8 * 64 * 4 + 1), 1e-4);
    assert_float_equal(row[feature_index("alloc_outer_prod")], log2(8 + 1), 1e-4);
    assert_float_equal(row[TT_STORE_FEATURES + feature_index("alloc_size")], 0, 0);
    /* counting only */
    assert_int_equal(tt_features_per_store(p, NULL, 0), 2);
    tt_program_free(p);
    tt_state_free(st);
    tt_workload_free(w);
}

static void every_operator_has_finite_features(void **state)
{
    (void)state;
    static const char *const ops[] = {
        "conv2d_nhwc:N=1,H=8,W=8,CI=4,CO=8,K=3,S=1,P=1",          "softmax:M=4,N=16",
        "conv2d_bn_relu:N=1,H=6,W=6,CI=3,CO=4,K=3,S=2,P=1",       "norm_bmn:B=2,M=8,N=8",
        "transpose_batch_matmul_softmax:B=1,SEQ=8,HEADS=2,DIM=4", "sigmoid:M=5,N=6"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        tt_workload *w = parse(ops[i]);
        tt_state *st;
        tt_program *p;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
        assert_int_equal(tt_lower(st, &p, &err), TT_OK);
        float rows[16 * TT_STORE_FEATURES];
        int n = tt_features_per_store(p, rows, 16);
        assert_true(n >= 1 && n <= 16);
        for (int k = 0; k < n * TT_STORE_FEATURES; k++)
            if (!isfinite(rows[k]))
                fail_msg("%s: feature %s of row %d is %f", ops[i],
                         tt_feature_name(k % TT_STORE_FEATURES), k / TT_STORE_FEATURES, rows[k]);
        tt_program_free(p);
        tt_state_free(st);
        tt_workload_free(w);
    }
}

/* AutoTVM's itervar test vector (search.md B4): the naive 128^3 GEMM, untransformed. */
static void itervar_matches_autotvm(void **state)
{
    (void)state;
    tt_workload *w = parse("matmul:M=128,N=128,K=128");
    tt_state *st;
    tt_program *p;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    assert_int_equal(tt_lower(st, &p, &err), TT_OK);
    float f[512];
    int n = tt_features_itervar(p, true, f, 512);
    /* three loops; i and j see A, B, C; k sees them too: 18 + 3 x 6 each */
    assert_int_equal(n, 3 * (18 + 3 * 6));
    static const float first[4] = {128, 1, 128, 2097152};
    for (int i = 0; i < 4; i++)
        assert_float_equal(f[i], first[i], 0);
    for (int k = 0; k < 11; k++)
        assert_float_equal(f[4 + k], k == 9, 0); /* serial */
    static const float a0[6] = {128, -1, 16384, 128, 0, 0}, b0[6] = {0, -1, 16384, 128, 0, 0};
    for (int i = 0; i < 6; i++) {
        assert_float_equal(f[18 + i], a0[i], 0);
        assert_float_equal(f[24 + i], b0[i], 0);
    }
    /* the innermost loop: length 128 at level 3, one multiply and one add per iteration */
    const float *k = f + 2 * 36;
    assert_float_equal(k[0], 128, 0);
    assert_float_equal(k[1], 3, 0);
    assert_float_equal(k[15], 1, 0);
    assert_float_equal(k[16], 1, 0);
    /* scaled: trans(x) = log2(1 + x) */
    float g[512];
    assert_int_equal(tt_features_itervar(p, false, g, 512), n);
    assert_float_equal(g[0], log2(129.0), 1e-5);
    assert_float_equal(g[1], 1, 0);
    assert_float_equal(g[19], -1, 0);
    tt_program_free(p);
    tt_state_free(st);
    tt_workload_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tvm_matmul_vectors),
        cmocka_unit_test(tile_block_tells_kept_from_reloaded_accumulators),
        cmocka_unit_test(rows_per_stored_buffer),
        cmocka_unit_test(every_operator_has_finite_features),
        cmocka_unit_test(itervar_matches_autotvm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
