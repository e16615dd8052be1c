/* AutoTVM configuration spaces: TVM's entity counts and orders (search.md A2-A8, D1-D3), index
 * decoding of public logs, fallback splits, and dense_pack.x86 configs that compute the definition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tuner/templates.h"

static int split_count(int64_t len, int n, tt_split_policy policy)
{
    tt_config_space cs;
    tt_errbuf err = {{0}};
    tt_cs_init(&cs);
    assert_int_equal(tt_cs_define_split(&cs, "s", len, policy, n, 0, NULL, 0, 0, &err), TT_OK);
    int c = cs.knobs[0].count;
    tt_cs_free(&cs);
    return c;
}

static void split_counts(void **state)
{
    (void)state;
    assert_int_equal(split_count(128, 2, TT_SPLIT_FACTORS), 8);
    assert_int_equal(split_count(256, 3, TT_SPLIT_FACTORS), 45);
    assert_int_equal(split_count(256, 3, TT_SPLIT_POWER2), 45);
    assert_int_equal(split_count(256, 3, TT_SPLIT_VERBOSE), 45);
    assert_int_equal(split_count(224, 3, TT_SPLIT_FACTORS), 63);
    assert_int_equal(split_count(224, 3, TT_SPLIT_POWER2), 36);
    assert_int_equal(split_count(224, 3, TT_SPLIT_VERBOSE), 84);
    assert_int_equal(split_count((int64_t)1 << 25, 4, TT_SPLIT_FACTORS), 3276);
}

static void split_order(void **state)
{
    (void)state;
    static const int64_t want[10][3] = {{-1, 1, 1}, {-1, 2, 1}, {-1, 4, 1}, {-1, 8, 1}, {-1, 1, 2},
                                        {-1, 2, 2}, {-1, 4, 2}, {-1, 1, 4}, {-1, 2, 4}, {-1, 1, 8}};
    tt_config_space cs;
    tt_errbuf err = {{0}};
    tt_cs_init(&cs);
    assert_int_equal(tt_cs_define_split(&cs, "s", 8, TT_SPLIT_FACTORS, 3, 0, NULL, 0, 0, &err),
                     TT_OK);
    assert_int_equal(cs.knobs[0].count, 10);
    for (int i = 0; i < 10; i++)
        assert_memory_equal(cs.knobs[0].ent + i * 3, want[i], sizeof(want[i]));
    tt_cs_free(&cs);
    /* TVM's verbose list is CPython's set order */
    static const int64_t v112[12] = {32, 1, 2, 64, 4, 7, 8, 14, 16, 112, 56, 28};
    int64_t got[32];
    assert_int_equal(tt_cs_verbose_factors(112, got, 32), 12);
    assert_memory_equal(got, v112, sizeof(v112));
}

static void mixed_radix(void **state)
{
    (void)state;
    tt_config_space cs;
    tt_errbuf err = {{0}};
    tt_cs_init(&cs);
    int64_t v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(tt_cs_define_knob(&cs, "a", v, 8, &err), TT_OK);
    assert_int_equal(tt_cs_define_knob(&cs, "b", v, 8, &err), TT_OK);
    int pos[2];
    tt_cs_decode(&cs, 12, pos);
    assert_int_equal(pos[0], 4);
    assert_int_equal(pos[1], 1);
    int p2[2] = {0, 1};
    assert_int_equal(tt_cs_encode(&cs, p2), 8);
    assert_int_equal(tt_cs_size(&cs), 64);
    tt_cs_free(&cs);
    /* reorder and annotate */
    tt_cs_init(&cs);
    assert_int_equal(tt_cs_define_reorder(&cs, "re", 3, true, &err), TT_OK);
    assert_int_equal(cs.knobs[0].count, 6);
    assert_int_equal(cs.knobs[0].ent[3 * 5], 2); /* last permutation: 2 1 0 */
    assert_int_equal(tt_cs_define_annotate(&cs, "an", 2, "try_unroll_vec", &err), TT_OK);
    assert_int_equal(cs.knobs[1].count, 8); /* 9 pairs minus (vec, vec) */
    assert_int_equal(tt_cs_define_annotate(&cs, "bad", 2, "try_spin", &err), TT_ERR_INVALID_ARG);
    char *j = tt_cs_entity_json(&cs, 5);
    assert_string_equal(j, "[[\"re\", \"re\", [2, 1, 0]], [\"an\", \"an\", [\"none\", \"none\"]]]");
    free(j);
    tt_cs_free(&cs);
}

static void fallback_split(void **state)
{
    (void)state;
    int64_t lim[3] = {-1, 8, 4}, out[3];
    tt_cs_fallback_split(128, lim, 3, out);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 8);
    assert_int_equal(out[2], 4);
    tt_cs_fallback_split(49, lim, 3, out);
    assert_int_equal(out[0], 7);
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 1);
}

static void template_sizes(void **state)
{
    (void)state;
    tt_config_space cs;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_template_dense_pack_x86(&cs, 1024, 1024, 1024, &err), TT_OK);
    assert_int_equal(cs.knobs[0].count, 66);
    assert_int_equal(cs.knobs[1].count, 66);
    assert_int_equal(cs.knobs[2].count, 11);
    assert_int_equal(cs.knobs[3].count, 5);
    assert_int_equal(tt_cs_size(&cs), 239580);
    tt_cs_free(&cs);
    assert_int_equal(tt_template_dense_pack_x86(&cs, 1, 1000, 2048, &err), TT_OK);
    assert_int_equal(tt_cs_size(&cs), 1200);
    tt_cs_free(&cs);
    assert_int_equal(tt_template_conv2d_nchw_cuda(&cs, 512, 7, 7, 512, 3, 3, false, false, &err),
                     TT_OK);
    assert_int_equal(tt_cs_size(&cs), 844800);
    tt_cs_free(&cs);
}

/* TLCBench's ResNet-50 AutoTVM log (search.md A8). */
static void decodes_tlcbench_conv2d_nchwc(void **state)
{
    (void)state;
    static const struct {
        int64_t ci, co, h, k, s, p;
        uint64_t index;
        int64_t ic, oc, ow, last;
    } rows[] = {
        {3, 64, 224, 7, 2, 3, 95, 3, 32, 8, 1},       {64, 64, 56, 1, 1, 0, 472, 8, 16, 28, 1},
        {64, 64, 56, 3, 1, 1, 235, 16, 32, 7, 1},     {256, 128, 56, 1, 2, 0, 197, 256, 32, 4, 1},
        {512, 256, 28, 1, 2, 0, 497, 128, 16, 14, 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int64_t out = (rows[i].h + 2 * rows[i].p - rows[i].k) / rows[i].s + 1;
        tt_config_space cs;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_template_conv2d_nchwc_x86(&cs, rows[i].ci, rows[i].co, out, out,
                                                      rows[i].k, rows[i].k, &err),
                         TT_OK);
        assert_int_equal(tt_cs_entity(&cs, 0, rows[i].index)[1], rows[i].ic);
        assert_int_equal(tt_cs_entity(&cs, 1, rows[i].index)[1], rows[i].oc);
        assert_int_equal(tt_cs_entity(&cs, 2, rows[i].index)[1], rows[i].ow);
        assert_int_equal(tt_cs_entity(&cs, 3, rows[i].index)[0], rows[i].last);
        tt_cs_free(&cs);
    }
}

/* TopHub cuda_v0.10.log: older knob order, explicit outer factors. */
static void decodes_tophub_conv2d_cuda(void **state)
{
    (void)state;
    static const struct {
        int64_t co;
        uint64_t index;
        int64_t f[4], y[4], x[4], rc[2], unroll, expl;
    } rows[] = {
        {192, 8797896, {6, 1, 32, 1}, {4, 1, 2, 1}, {1, 1, 8, 1}, {64, 32}, 1500, 1},
        {448, 734204, {28, 2, 8, 1}, {2, 2, 2, 1}, {1, 1, 8, 1}, {64, 32}, 0, 0},
    };
    for (size_t i = 0; i < 2; i++) {
        tt_config_space cs;
        tt_errbuf err = {{0}};
        assert_int_equal(
            tt_template_conv2d_nchw_cuda(&cs, rows[i].co, 8, 8, 2048, 1, 1, false, true, &err),
            TT_OK);
        const int64_t *lens[4] = {rows[i].f, rows[i].y, rows[i].x, rows[i].rc};
        const int64_t axis[4] = {rows[i].co, 8, 8, 2048};
        for (int k = 0; k < 4; k++) {
            const int64_t *e = tt_cs_entity(&cs, k, rows[i].index);
            int n = cs.knobs[k].width;
            int64_t prod = 1;
            for (int l = 1; l < n; l++) {
                assert_int_equal(e[l], lens[k][l]);
                prod *= e[l];
            }
            assert_int_equal(e[0], -1);
            assert_int_equal(axis[k] / prod, lens[k][0]); /* the explicit outer factor */
        }
        assert_int_equal(tt_cs_entity(&cs, 6, rows[i].index)[0], rows[i].unroll);
        assert_int_equal(tt_cs_entity(&cs, 7, rows[i].index)[0], rows[i].expl);
        tt_cs_free(&cs);
    }
}

static void dense_pack_configs_compute_the_definition(void **state)
{
    (void)state;
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=24,N=32,K=12", &w, &err), TT_OK);
    tt_config_space cs;
    assert_int_equal(tt_template_dense_pack_x86(&cs, 24, 32, 12, &err), TT_OK);
    tt_rng rng;
    tt_rng_seed(&rng, 3);
    uint64_t size = tt_cs_size(&cs);
    for (int k = 0; k < 30; k++) {
        uint64_t idx = k == 0 ? 0 : tt_rng_below(&rng, size);
        tt_state *st;
        tt_program *p;
        if (tt_template_dense_pack_apply(&cs, idx, &w->dag, &st, &err))
            fail_msg("config %llu: %s", (unsigned long long)idx, err.msg);
        if (tt_lower(st, &p, &err) || tt_verify_program(&w->dag, p, 1, 1e-4, 1e-5, NULL, &err))
            fail_msg("config %llu: %s", (unsigned long long)idx, err.msg);
        tt_program_free(p);
        tt_state_free(st);
    }
    /* Not a matmul: refused with a reason. */
    tt_workload *w2;
    assert_int_equal(tt_workload_parse("relu:M=4,N=4", &w2, &err), TT_OK);
    tt_state *st;
    assert_int_equal(tt_template_dense_pack_apply(&cs, 0, &w2->dag, &st, &err), TT_ERR_INVALID_ARG);
    tt_workload_free(w2);
    tt_cs_free(&cs);
    tt_workload_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_counts),
        cmocka_unit_test(split_order),
        cmocka_unit_test(mixed_radix),
        cmocka_unit_test(fallback_split),
        cmocka_unit_test(template_sizes),
        cmocka_unit_test(decodes_tlcbench_conv2d_nchwc),
        cmocka_unit_test(decodes_tophub_conv2d_cuda),
        cmocka_unit_test(dense_pack_configs_compute_the_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
