/* Step lists: text round trips (Ansor's own log lines), replay, and one failing case per kind of
 * illegal step (in the manner of Halide's test/error). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "schedule/schedule.h"

/* Step arrays of real auto_scheduler records (log-formats.md §2.6) and one of every kind. */
static const char *const lists[] = {
    "[[\"CI\", 5], [\"SP\", 3, 0, 1, [1, 1, 1], 1], [\"SP\", 3, 4, 512, [1, 32, 16], 1], [\"SP\", "
    "3, 8, 7, [7, 1, 1], 1], "
    "[\"SP\", 3, 12, 7, [1, 1, 1], 1], [\"SP\", 3, 16, 512, [1], 1], [\"SP\", 3, 18, 3, [1], 1], "
    "[\"SP\", 3, 20, 3, [3], 1], "
    "[\"RE\", 3, [0, 4, 8, 12, 1, 5, 9, 13, 16, 18, 20, 2, 6, 10, 14, 17, 19, 21, 3, 7, 11, 15]], "
    "[\"FSP\", 6, 0, 1, 2], "
    "[\"FSP\", 6, 3, 2, 2], [\"FSP\", 6, 6, 3, 2], [\"FSP\", 6, 9, 4, 2], [\"RE\", 6, [0, 3, 6, 9, "
    "1, 4, 7, 10, 2, 5, 8, 11]], "
    "[\"CA\", 3, 6, 7], [\"CA\", 1, 6, 5], [\"FU\", 6, [0, 1, 2, 3, 4, 5]], [\"AN\", 6, 0, 3], "
    "[\"PR\", 3, 0, \"auto_unroll_max_step$512\"], "
    "[\"AN\", 1, 3, 2], [\"AN\", 3, 21, 2], [\"AN\", 6, 6, 2]]",
    "[[\"SP\", 2, 0, 1024, [2, 1, 4], 1], [\"SP\", 2, 4, 1024, [1, 1, 8], 1], [\"SP\", 2, 8, 1024, "
    "[4], 1], "
    "[\"RE\", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], [\"FSP\", 4, 0, 0, 2], [\"FSP\", 4, 3, 1, 2], "
    "[\"RE\", 4, [0, 3, 1, 4, 2, 5]], "
    "[\"CA\", 2, 4, 3], [\"FU\", 4, [0, 1]], [\"AN\", 4, 0, 3], [\"PR\", 2, 0, "
    "\"auto_unroll_max_step$8\"], [\"AN\", 2, 9, 2], [\"AN\", 4, 4, 2]]",
    "[[\"CHW\", 2, \"local\"], [\"CHR\", 0, \"shared\", [3]], [\"FFSP\", 4, 0, [1, 2], 1, 1], "
    "[\"SA\", 1, 0, 32, 8], "
    "[\"RF\", 2, 3, 1], [\"CR\", 2], [\"SP\", 2, 0, 0, [4, 2], 0]]",
    "[[\"SP\", 2, 1, 64, [16], 1], [\"LR\", 1]]",
    "[]",
};

static void step_lists_round_trip_byte_for_byte(void **state)
{
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        tt_step *steps;
        size_t n;
        tt_errbuf err = {{0}};
        if (tt_steps_from_json(lists[i], &steps, &n, &err))
            fail_msg("list %zu: %s", i, err.msg);
        char *back = tt_steps_to_json(steps, n);
        assert_string_equal(back, lists[i]);
        free(back);
        free(steps);
    }
}

/* TVM's matmul_add DAG (A, B, matmul, C, out) replays the v0.3 gallery record and matches. */
static void ansor_matmul_record_replays_and_matches_the_definition(void **state)
{
    /* Stage order as in TVM: A, B, matmul, C (bias), out.  Shapes reduced from 1024 to 64 so the
     * interpreter is quick; the record's tile sizes still apply. */
    tt_dag d;
    tt_dag_init(&d);
    int64_t sh[2] = {64, 64};
    int A = tt_dag_placeholder(&d, "A", TT_DT_FLOAT32, 2, sh);
    int B = tt_dag_placeholder(&d, "B", TT_DT_FLOAT32, 2, sh);
    const char *mn[2] = {"i", "j"};
    int M = tt_dag_compute(&d, "matmul", TT_DT_FLOAT32, 2, sh, mn);
    tt_dag_reduce_axis(&d, M, "k", 64);
    tt_eid ia[2] = {tt_dag_axis(&d, M, 0), tt_dag_raxis(&d, M, 0)};
    tt_eid ib[2] = {tt_dag_raxis(&d, M, 0), tt_dag_axis(&d, M, 1)};
    tt_dag_set_body(&d, M, TT_REDUCE_SUM,
                    tt_mul(&d.pool, tt_dag_read(&d, A, 2, ia), tt_dag_read(&d, B, 2, ib)));
    int C = tt_dag_placeholder(&d, "C", TT_DT_FLOAT32, 2, sh);
    int O = tt_dag_compute(&d, "out", TT_DT_FLOAT32, 2, sh, mn);
    tt_eid io[2] = {tt_dag_axis(&d, O, 0), tt_dag_axis(&d, O, 1)};
    tt_dag_set_body(&d, O, TT_REDUCE_NONE,
                    tt_add(&d.pool, tt_dag_read(&d, M, 2, io), tt_dag_read(&d, C, 2, io)));
    tt_errbuf err = {{0}};
    assert_int_equal(tt_dag_validate(&d, &err), TT_OK);
    const char *text =
        "[[\"SP\", 2, 0, 64, [2, 1, 4], 1], [\"SP\", 2, 4, 64, [1, 1, 8], 1], [\"SP\", 2, 8, 64, "
        "[4], 1], "
        "[\"RE\", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], [\"FSP\", 4, 0, 0, 2], [\"FSP\", 4, 3, 1, "
        "2], "
        "[\"RE\", 4, [0, 3, 1, 4, 2, 5]], [\"CA\", 2, 4, 3], [\"FU\", 4, [0, 1]], [\"AN\", 4, 0, "
        "3], "
        "[\"PR\", 2, 0, \"auto_unroll_max_step$8\"], [\"AN\", 2, 9, 2], [\"AN\", 4, 4, 2]]";
    tt_step *steps;
    size_t n;
    assert_int_equal(tt_steps_from_json(text, &steps, &n, &err), TT_OK);
    tt_state *st;
    if (tt_state_replay(&d, steps, n, &st, &err))
        fail_msg("replay: %s", err.msg);
    /* The output stage: fused outer loop, parallel; its innermost loop vectorised. */
    const tt_stage *out = &st->stages.data[4];
    assert_string_equal(out->iters[0].name, "i.0@j.0@");
    assert_int_equal(out->iters[0].ann, TT_ANN_PARALLEL);
    assert_int_equal(out->iters[out->niters - 1].ann, TT_ANN_VECTORIZE);
    assert_int_equal(st->stages.data[2].at, TT_AT_ITER);
    tt_program *prog;
    if (tt_lower(st, &prog, &err))
        fail_msg("lower: %s", err.msg);
    tt_verify_result vr;
    if (tt_verify_program(&d, prog, 7, 1e-4, 1e-5, &vr, &err))
        fail_msg("verify: %s", err.msg);
    assert_int_equal(vr.checked, 64 * 64);
    tt_program_free(prog);
    tt_state_free(st);
    free(steps);
    tt_dag_free(&d);
}

/* The v0.6 record of TVM's test_tir_transform_common_subexpr_elim.py, replayed unchanged on the
 * same computation written in the TE language: stage ids agree because our DAG follows TVM's
 * op order. */
static void ansor_v06_conv2d_record_replays_with_tvm_stage_ids(void **state)
{
    const char *wl =
        "te:pad[n,c,h,w] = select(h >= 1 && h < 8 && w >= 1 && w < 8, data[n,c,h-1,w-1], 0); "
        "conv[n,co,oh,ow] += pad[n,rc,oh+rh,ow+rw] * kernel[co,rc,rh,rw]; "
        "T_add[n,c,h,w] = conv[n,c,h,w] + bias[0,c,0,0]; relu[n,c,h,w] = max(T_add[n,c,h,w], 0); "
        "pad:float32[1,512,9,9]; conv:float32[1,512,7,7]; data:float32[1,512,7,7]; "
        "kernel:float32[512,512,3,3]; bias:float32[1,512,1,1]";
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(wl, &w, &err))
        fail_msg("%s", err.msg);
    static const char *const names[] = {"data", "pad", "kernel", "conv", "bias", "T_add", "relu"};
    assert_int_equal(w->dag.ops.len, 7);
    for (int i = 0; i < 7; i++)
        assert_string_equal(w->dag.ops.data[i].name, names[i]);
    tt_state *st;
    if (tt_state_from_json(&w->dag, lists[0], &st, &err))
        fail_msg("replay: %s", err.msg);
    assert_int_equal(st->stages.data[5].at, TT_AT_INLINE);
    assert_int_equal(st->stages.data[3].at, TT_AT_ITER);
    assert_int_equal(st->stages.data[1].at, TT_AT_ITER);
    const tt_stage *relu = &st->stages.data[6];
    assert_int_equal(relu->niters, 7);
    assert_int_equal(relu->iters[0].ann, TT_ANN_PARALLEL);
    assert_int_equal(relu->iters[6].ann, TT_ANN_VECTORIZE);
    assert_int_equal(st->stages.data[3].auto_unroll_max_step, 512);
    tt_program *prog;
    if (tt_lower(st, &prog, &err))
        fail_msg("lower: %s", err.msg);
    /* The convolution is computed per (h, w) point of the ReLU over all 512 channels; the
     * padded input per ReLU row over the 3 columns the point's window needs. */
    char *ir = tt_program_print(prog);
    assert_non_null(strstr(ir, "alloc conv: float32[1, 512, 1, 1]"));
    assert_non_null(strstr(ir, "alloc pad: float32[1, 512, 9, 3]"));
    free(ir);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

/* The same record's structure on 32 channels (tile 4 x 8 instead of 32 x 16) computes what the
 * definition computes: nested compute_at (pad inside relu, outside conv), inlining, fusion. */
static void ansor_v06_conv2d_structure_matches_the_definition(void **state)
{
    const char *wl =
        "te:pad[n,c,h,w] = select(h >= 1 && h < 8 && w >= 1 && w < 8, data[n,c,h-1,w-1], 0); "
        "conv[n,co,oh,ow] += pad[n,rc,oh+rh,ow+rw] * kernel[co,rc,rh,rw]; "
        "T_add[n,c,h,w] = conv[n,c,h,w] + bias[0,c,0,0]; relu[n,c,h,w] = max(T_add[n,c,h,w], 0); "
        "pad:float32[1,32,9,9]; conv:float32[1,32,7,7]; data:float32[1,32,7,7]; "
        "kernel:float32[32,32,3,3]; bias:float32[1,32,1,1]";
    char *text = strdup(lists[0]);
    char *p = strstr(text, "512, [1, 32, 16]");
    memcpy(p, " 32, [1,  4,  8]", 16);
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse(wl, &w, &err), TT_OK);
    tt_step *steps;
    size_t n;
    if (tt_steps_from_json(text, &steps, &n, &err))
        fail_msg("%s", err.msg);
    tt_state *st;
    tt_program *prog;
    if (tt_state_replay(&w->dag, steps, n, &st, &err) || tt_lower(st, &prog, &err))
        fail_msg("%s", err.msg);
    if (tt_verify_program(&w->dag, prog, 11, 1e-4, 1e-5, NULL, &err))
        fail_msg("verify: %s", err.msg);
    tt_program_free(prog);
    tt_state_free(st);
    free(steps);
    free(text);
    tt_workload_free(w);
}

typedef struct {
    const char *workload, *steps, *fragment;
    tt_status status;
} bad_case;

static const bad_case bad[] = {
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 7, 0, 8, [2], 1]]", "stage 7 does not exist",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 0, 0, 8, [2], 1]]", "placeholder", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 5, 8, [2], 1]]", "iterator 5 does not exist",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [0], 1]]", "must be positive", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [4, 4], 1]]", "multiply to more than its extent 8",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"FU\", 2, [1, 2]]]", "cannot fuse spatial and reduce",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2], 1], [\"FU\", 2, [0, 2]]]", "consecutive",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"RE\", 2, [0, 1]]]", "reorder lists 2 iterators",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"RE\", 2, [0, 0, 1]]]", "appears twice", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 2, 3]]", "cannot be annotated parallel",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 0, 2]]", "vectorize needs the innermost",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 0, 3], [\"AN\", 2, 0, 1]]", "already annotated",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 0, 3], [\"SP\", 2, 0, 8, [2], 1]]",
     "annotated (parallel) and cannot be split", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 0, 11]]", "tensorize", TT_ERR_UNSUPPORTED},
    {"matmul:M=8,N=8,K=8", "[[\"AN\", 2, 0, 5], [\"AN\", 2, 1, 5]]", "already bound",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"PR\", 2, 0, \"unroll_everything\"]]", "unknown pragma",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"PR\", 2, 0, \"auto_unroll_max_step$x\"]]", "needs a value",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"CI\", 2]]", "reduction and cannot be inlined", TT_ERR_ILLEGAL_STEP},
    {"relu:M=4,N=4", "[[\"CI\", 1]]", "output and cannot be inlined", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"CA\", 2, 2, 0]]", "at itself", TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"CA\", 1, 3, 0]]", "compute_at needs a consumer", TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"CA\", 4, 1, 0]]", "is an output", TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"CA\", 1, 2, 0], [\"CI\", 2]]", "other stages are computed at 'e'",
     TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"CI\", 2], [\"CA\", 2, 4, 0]]", "stage 2 ('e') is inlined",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"CHR\", 0, \"texture\", [2]]]", "unknown scope",
     TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"CHR\", 0, \"shared\", [3]]]", "does not read", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2], 1], [\"CHW\", 2, \"local\"]]",
     "cache_write must come first", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"RF\", 2, 0, 0]]", "needs a reduce iterator", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"RF\", 2, 2, 5]]", "factor_iter 5 is out of range",
     TT_ERR_ILLEGAL_STEP},
    {"relu:M=4,N=4", "[[\"SA\", 1, 0, 4, 1]]", "is an output", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"LR\", 2]]", "not a constant input", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"LR\", 1, 0]]", "expected 2 fields", TT_ERR_PARSE},
    {"softmax:M=4,N=4", "[[\"SA\", 2, 0, 0, 1]]", "factor > 0", TT_ERR_ILLEGAL_STEP},
    {"softmax:M=4,N=4", "[[\"SA\", 1, 0, 4, 1]]", "cannot be aligned", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"FSP\", 2, 0, 0, 2]]", "not an earlier SP step",
     TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2], 1], [\"FSP\", 2, 2, 0, 5]]",
     "n_split 5 is out of range", TT_ERR_ILLEGAL_STEP},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2], 1], [\"FFSP\", 2, 2, [0], 3, 1]]",
     "level 3 is out of range", TT_ERR_ILLEGAL_STEP},
    /* text errors */
    {"matmul:M=8,N=8,K=8", "[[\"XX\", 2]]", "unknown step code", TT_ERR_PARSE},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2]]]", "expected 6 fields", TT_ERR_PARSE},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [null], 1]]", "undefined", TT_ERR_PARSE},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, \"0\", 8, [2], 1]]", "field 2 must be an integer",
     TT_ERR_PARSE},
    {"matmul:M=8,N=8,K=8", "[[\"SP\", 2, 0, 8, [2], 1]", "line 1", TT_ERR_PARSE},
    {"matmul:M=8,N=8,K=8", "{\"a\": 1}", "JSON array", TT_ERR_PARSE},
};

static void illegal_steps_fail_with_a_precise_message(void **state)
{
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tt_workload *w;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_workload_parse(bad[i].workload, &w, &err), TT_OK);
        tt_state *st = NULL;
        tt_status s = tt_state_from_json(&w->dag, bad[i].steps, &st, &err);
        if (s != bad[i].status)
            fail_msg("case %zu %s: expected %s, got %s (%s)", i, bad[i].steps,
                     tt_status_name(bad[i].status), tt_status_name(s), err.msg);
        if (!strstr(err.msg, bad[i].fragment))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, bad[i].fragment);
        assert_null(st);
        tt_workload_free(w);
    }
}

static void a_failed_step_leaves_the_state_unchanged(void **state)
{
    tt_workload *w;
    tt_errbuf err;
    assert_int_equal(tt_workload_parse("matmul:M=8,N=8,K=8", &w, &err), TT_OK);
    tt_state *st;
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    int64_t f = 4;
    assert_int_equal(tt_sched_split(st, 2, 0, &f, 1, true, &err), TT_OK);
    char *before = tt_state_print(st);
    int bad_order[2] = {0, 1};
    assert_int_equal(tt_sched_reorder(st, 2, bad_order, 2, &err), TT_ERR_ILLEGAL_STEP);
    /* annotations, pragmas and storage_align apply in place, without the copy (tt_state_apply):
     * each checks everything before it changes a field */
    assert_int_equal(tt_sched_annotate(st, 2, 3, TT_ANN_PARALLEL, &err), TT_ERR_ILLEGAL_STEP);
    assert_non_null(strstr(err.msg, "reduce iterator"));
    assert_int_equal(tt_sched_annotate(st, 2, 0, TT_ANN_VECTORIZE, &err), TT_ERR_ILLEGAL_STEP);
    assert_int_equal(tt_sched_pragma(st, 2, 0, "auto_unroll_max_step$x", &err),
                     TT_ERR_ILLEGAL_STEP);
    assert_int_equal(tt_sched_pragma(st, 2, 0, "double_buffer", &err), TT_ERR_ILLEGAL_STEP);
    assert_int_equal(tt_sched_storage_align(st, 2, 0, 32, 1, &err), TT_ERR_ILLEGAL_STEP);
    char *after = tt_state_print(st);
    assert_string_equal(before, after);
    assert_int_equal(st->steps.len, 1);
    /* ...and when they succeed they are recorded as any other step */
    assert_int_equal(tt_sched_annotate(st, 2, 0, TT_ANN_PARALLEL, &err), TT_OK);
    assert_int_equal(tt_sched_pragma(st, 2, 0, "auto_unroll_max_step$16", &err), TT_OK);
    assert_int_equal(st->steps.len, 3);
    assert_int_equal(st->steps.data[1].kind, TT_STEP_ANNOTATE);
    assert_int_equal(st->stages.data[2].iters[0].ann, TT_ANN_PARALLEL);
    assert_int_equal(st->stages.data[2].auto_unroll_max_step, 16);
    free(before);
    free(after);
    tt_state_free(st);
    tt_workload_free(w);
}

static void lowering_rejects_compute_at_with_another_reader(void **state)
{
    /* e is read by expsum and out; computing it inside expsum leaves out reading garbage. */
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("softmax:M=4,N=4", &w, &err), TT_OK);
    tt_step *steps;
    size_t n;
    assert_int_equal(tt_steps_from_json("[[\"CA\", 2, 3, 0]]", &steps, &n, &err), TT_OK);
    tt_state *st;
    assert_int_equal(tt_state_replay(&w->dag, steps, n, &st, &err), TT_OK);
    tt_program *prog = NULL;
    assert_int_equal(tt_lower(st, &prog, &err), TT_ERR_LOWER);
    assert_non_null(strstr(err.msg, "also read by 'out'"));
    assert_null(prog);
    free(steps);
    tt_state_free(st);
    tt_workload_free(w);
}

static void non_divisible_split_is_guarded(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_workload_parse("matmul:M=10,N=7,K=5", &w, &err), TT_OK);
    tt_state *st;
    assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
    int64_t f = 4;
    assert_int_equal(tt_sched_split(st, 2, 0, &f, 1, true, &err), TT_OK);
    tt_program *prog;
    assert_int_equal(tt_lower(st, &prog, &err), TT_OK);
    char *ir = tt_program_print(prog);
    assert_non_null(strstr(ir, "if i.0 * 4 + i.1 < 10:"));
    free(ir);
    assert_int_equal(tt_verify_program(&w->dag, prog, 3, 1e-5, 1e-6, NULL, &err), TT_OK);
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(step_lists_round_trip_byte_for_byte),
        cmocka_unit_test(ansor_matmul_record_replays_and_matches_the_definition),
        cmocka_unit_test(ansor_v06_conv2d_record_replays_with_tvm_stage_ids),
        cmocka_unit_test(ansor_v06_conv2d_structure_matches_the_definition),
        cmocka_unit_test(illegal_steps_fail_with_a_precise_message),
        cmocka_unit_test(a_failed_step_leaves_the_state_unchanged),
        cmocka_unit_test(lowering_rejects_compute_at_with_another_reader),
        cmocka_unit_test(non_divisible_split_is_guarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
