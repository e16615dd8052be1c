/* Lowering, the simplifier and the interpreter: specific schedules whose loop IR is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "schedule/schedule.h"

static char *print_simplified(tt_expr_pool *p, tt_eid e, const tt_bounds *b)
{
    tt_strbuf sb = {0};
    tt_expr_print(&sb, p, tt_simplify(p, e, b), NULL, NULL);
    return tt_strbuf_take(&sb);
}

static void simplifier_uses_loop_ranges(void **state)
{
    tt_expr_pool p;
    tt_expr_pool_init(&p);
    uint32_t i = tt_var_new(&p, "i"), j = tt_var_new(&p, "j");
    int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 15, 7};
    uint8_t known[3] = {0, 1, 1};
    tt_bounds b = {lo, hi, known, 3};
    tt_eid I = tt_expr_var(&p, i), J = tt_expr_var(&p, j);
    tt_eid lin = tt_add(&p, tt_mul(&p, I, tt_expr_int(&p, 8)), J); /* i*8 + j, j < 8 */
    char *s;
    s = print_simplified(&p, tt_div(&p, lin, tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "i");
    free(s);
    s = print_simplified(&p, tt_mod(&p, lin, tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "j");
    free(s);
    /* (i*8 + j) / 4 keeps the part that is a multiple of 4. */
    s = print_simplified(&p, tt_div(&p, lin, tt_expr_int(&p, 4)), &b);
    assert_string_equal(s, "i * 2 + j / 4");
    free(s);
    /* i*8 + j < 128 is always true for i < 16, j < 8. */
    s = print_simplified(&p, tt_expr_binary(&p, TT_EXPR_LT, lin, tt_expr_int(&p, 128)), &b);
    assert_string_equal(s, "1");
    free(s);
    s = print_simplified(&p, tt_expr_binary(&p, TT_EXPR_LT, lin, tt_expr_int(&p, 100)), &b);
    assert_string_equal(s, "i * 8 + j < 100");
    free(s);
    /* Canonical linear form: terms collected, constants folded. */
    tt_eid e =
        tt_sub(&p, tt_add(&p, tt_add(&p, J, tt_mul(&p, I, tt_expr_int(&p, 3))), tt_expr_int(&p, 5)),
               tt_add(&p, J, tt_expr_int(&p, 2)));
    s = print_simplified(&p, e, NULL);
    assert_string_equal(s, "i * 3 + 3");
    free(s);
    /* Floats are folded only when constant: x + 0.0 stays (it is not an identity for -0.0). */
    tt_eid f =
        tt_add(&p, tt_expr_float(&p, TT_DT_FLOAT32, 1.5), tt_expr_float(&p, TT_DT_FLOAT32, 2.0));
    s = print_simplified(&p, f, NULL);
    assert_string_equal(s, "3.5f");
    free(s);
    /* A term whose atom is a known multiple leaves the division: a grouped convolution's clamped
     * tile start, (min(i*32, 176) + j) / 8 with j < 8 ... 16, is min(i*32, 176) / 8 + j / 8; a
     * min that is not a multiple of 8 (one side i*12) stays inside. */
    tt_eid start =
        tt_expr_binary(&p, TT_EXPR_MIN, tt_mul(&p, I, tt_expr_int(&p, 32)), tt_expr_int(&p, 176));
    s = print_simplified(&p, tt_div(&p, tt_add(&p, start, J), tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "min(i * 32, 176) / 8");
    free(s);
    hi[2] = 15;
    s = print_simplified(&p, tt_div(&p, tt_add(&p, start, J), tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "min(i * 32, 176) / 8 + j / 8");
    free(s);
    s = print_simplified(&p, tt_mod(&p, tt_add(&p, start, J), tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "j % 8");
    free(s);
    tt_eid odd =
        tt_expr_binary(&p, TT_EXPR_MIN, tt_mul(&p, I, tt_expr_int(&p, 12)), tt_expr_int(&p, 176));
    s = print_simplified(&p, tt_div(&p, tt_add(&p, odd, J), tt_expr_int(&p, 8)), &b);
    assert_string_equal(s, "(min(i * 12, 176) + j) / 8");
    free(s);
    /* A quotient and its remainder recombine: f / 2 * 2 + f % 2 is f (a loop fused from two
     * whose inner one is whole indexes its output so), with a common factor too; a remainder
     * by another divisor stays. */
    uint32_t fv = tt_var_new(&p, "f");
    tt_eid F = tt_expr_var(&p, fv);
#define QR(q, qc, r, rc)                                                                           \
    tt_add(&p, tt_mul(&p, tt_div(&p, F, tt_expr_int(&p, q)), tt_expr_int(&p, qc)),                 \
           tt_mul(&p, tt_mod(&p, F, tt_expr_int(&p, r)), tt_expr_int(&p, rc)))
    s = print_simplified(&p, QR(2, 2, 2, 1), NULL);
    assert_string_equal(s, "f");
    free(s);
    s = print_simplified(&p, tt_add(&p, QR(4, 12, 4, 3), tt_expr_int(&p, 1)), NULL);
    assert_string_equal(s, "f * 3 + 1");
    free(s);
    s = print_simplified(&p, QR(2, 2, 4, 1), NULL);
    assert_string_equal(s, "f / 2 * 2 + f % 4");
    free(s);
#undef QR
    tt_expr_pool_free(&p);
}

/* How an index moves across a vector's lanes: through floor division and modulo when the lanes
 * stay in one row, and not otherwise. */
static void lane_steps_follow_rows(void **state)
{
    tt_expr_pool p;
    tt_expr_pool_init(&p);
    uint32_t o = tt_var_new(&p, "o"), v = tt_var_new(&p, "v");
    tt_eid O = tt_expr_var(&p, o), V = tt_expr_var(&p, v);
#define C(x) tt_expr_int(&p, x)
    tt_eid f = tt_add(&p, tt_mul(&p, O, C(4)), V); /* a fused loop split by a 4-wide vector */
    tt_eid row = tt_div(&p, f, C(64)), col = tt_mod(&p, f, C(64));
    int64_t step, align;
    /* A[row * 1024 + col]: one element per lane, from a multiple of 4. */
    assert_true(
        tt_expr_lane_step(&p, tt_add(&p, tt_mul(&p, row, C(1024)), col), v, 4, &step, &align));
    assert_int_equal(step, 1);
    assert_int_equal(align, 4);
    assert_true(tt_expr_lane_step(&p, row, v, 4, &step, &align));
    assert_int_equal(step, 0);
    /* Column-major, B[col * 64 + row]: 64 elements per lane (not a vector load). */
    assert_true(
        tt_expr_lane_step(&p, tt_add(&p, tt_mul(&p, col, C(64)), row), v, 4, &step, &align));
    assert_int_equal(step, 64);
    /* Rows of 6 elements: 4 lanes from 4 * o may cross a row. */
    assert_false(tt_expr_lane_step(&p, tt_mod(&p, f, C(6)), v, 4, &step, &align));
    /* A start that is not a multiple of the lanes: (o*2 + v) % 64 over 4 lanes. */
    tt_eid g = tt_add(&p, tt_mul(&p, O, C(2)), V);
    assert_false(tt_expr_lane_step(&p, tt_mod(&p, g, C(64)), v, 4, &step, &align));
    /* Two lanes per element: (o*4 + v) / 2. */
    assert_false(tt_expr_lane_step(&p, tt_div(&p, f, C(2)), v, 4, &step, &align));
    /* A divisor that is not a constant. */
    assert_false(tt_expr_lane_step(&p, tt_div(&p, f, O), v, 4, &step, &align));
    /* Plain linear indices agree with tt_expr_coef. */
    assert_true(tt_expr_lane_step(&p, tt_add(&p, tt_mul(&p, V, C(3)), O), v, 4, &step, &align));
    assert_int_equal(step, 3);
    assert_int_equal(step, tt_expr_coef(&p, tt_add(&p, tt_mul(&p, V, C(3)), O), v));
#undef C
    tt_expr_pool_free(&p);
}

/* A guard agrees in every lane of a vector from a multiple of the lanes when no vector straddles
 * where it changes: a concatenation's boundaries at multiples of 16 over vectors of 16 channels
 * (c = t*16 + v), in either direction, combined, and through a fused loop's remainder. */
static void lane_uniform_guards(void **state)
{
    (void)state;
    tt_expr_pool p;
    tt_expr_pool_init(&p);
    uint32_t t = tt_var_new(&p, "t"), v = tt_var_new(&p, "v");
    tt_eid T = tt_expr_var(&p, t), V = tt_expr_var(&p, v);
#define C(x)         tt_expr_int(&p, x)
#define CMP(k, a, b) tt_expr_binary(&p, TT_EXPR_##k, a, b)
    tt_eid c = tt_add(&p, tt_mul(&p, T, C(16)), V);
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, c, C(96)), v, 16));
    assert_true(tt_expr_lane_uniform(&p, CMP(GE, c, C(64)), v, 16));
    assert_true(tt_expr_lane_uniform(&p, CMP(GT, C(32), c), v, 16));
    assert_true(tt_expr_lane_uniform(&p, CMP(LE, C(48), c), v, 16));
    assert_true(tt_expr_lane_uniform(
        &p, CMP(AND, CMP(GE, c, C(64)), CMP(LT, tt_sub(&p, c, C(64)), C(32))), v, 16));
    /* The vector variable alone from a multiple of 16: c < 32 over v (the start is known). */
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, V, C(32)), v, 16));
    /* Vectors of 8 lanes, boundaries at multiples of 16: still one side each. */
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, c, C(96)), v, 8));
    /* A fused loop's channel, (f * 16 + v) % 256 < 96, and a guard without v. */
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, tt_mod(&p, c, C(256)), C(96)), v, 16));
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, T, C(3)), v, 16));
    /* Boundaries inside a vector: 100, 24 of 16 lanes, 40 for c * 2 (which moves by 2: a
     * vector spans 32k to 32k + 30, so 32 is a boundary between vectors, 40 is not); lanes that
     * run backwards; equality. */
    assert_false(tt_expr_lane_uniform(&p, CMP(LT, c, C(100)), v, 16));
    assert_false(tt_expr_lane_uniform(&p, CMP(GE, c, C(24)), v, 16));
    assert_true(tt_expr_lane_uniform(&p, CMP(LT, tt_mul(&p, c, C(2)), C(32)), v, 16));
    assert_false(tt_expr_lane_uniform(&p, CMP(LT, tt_mul(&p, c, C(2)), C(40)), v, 16));
    assert_false(tt_expr_lane_uniform(&p, CMP(LT, C(32), c), v, 16));
    assert_false(tt_expr_lane_uniform(&p, CMP(EQ, c, C(32)), v, 16));
#undef CMP
#undef C
    tt_expr_pool_free(&p);
}

typedef struct {
    tt_workload *w;
    tt_state *st;
    tt_program *prog;
    char *ir;
} lowered;

static void lower_or_fail(lowered *l, const char *workload, const char *steps)
{
    tt_errbuf err = {{0}};
    memset(l, 0, sizeof(*l));
    if (tt_workload_parse(workload, &l->w, &err) ||
        tt_state_from_json(&l->w->dag, steps, &l->st, &err) || tt_lower(l->st, &l->prog, &err))
        fail_msg("%s / %s: %s", workload, steps, err.msg);
    l->ir = tt_program_print(l->prog);
    if (tt_verify_program(&l->w->dag, l->prog, 5, 1e-4, 1e-5, NULL, &err))
        fail_msg("%s / %s: %s\n%s", workload, steps, err.msg, l->ir);
}

static void lowered_free(lowered *l)
{
    free(l->ir);
    tt_program_free(l->prog);
    tt_state_free(l->st);
    tt_workload_free(l->w);
}

static void expect_in(const lowered *l, const char *fragment)
{
    if (!strstr(l->ir, fragment))
        fail_msg("'%s' not in\n%s", fragment, l->ir);
}

static void cache_write_gives_a_register_tile(void **state)
{
    /* C.local is computed per 4x8 tile of C: a 4x8 local buffer inside the tile loops. */
    lowered l;
    lower_or_fail(
        &l, "matmul:M=16,N=16,K=16",
        "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 0, 16, [4], 1], [\"SP\", 3, 2, 16, [8], 1], "
        "[\"RE\", 3, [0, 2, 1, 3]], [\"CA\", 2, 3, 1]]");
    expect_in(&l, "alloc C.local: float32[4, 8] local");
    expect_in(&l, "C.local[i * 8 + j] = 0.0f");
    lowered_free(&l);
}

/* A split that does not divide its axis: in a stage without a reduction (the copy out of a
 * local accumulator) the last tile is moved back to end where the axis ends, recomputing rows
 * of the tile before it, with no guard; in a reduction the overlap would be added twice, so
 * the last tile is guarded.  Both compute the definition. */
static void a_tail_tile_ends_where_its_axis_ends(void **state)
{
    lowered l;
    lower_or_fail(&l, "matmul:M=14,N=16,K=8",
                  "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 0, 14, [6], 1], "
                  "[\"SP\", 3, 2, 16, [8], 1], [\"RE\", 3, [0, 2, 1, 3]], [\"CA\", 2, 3, 1], "
                  "[\"FU\", 3, [0, 1]], [\"AN\", 3, 0, 3]]");
    expect_in(&l, "for i.0@j.0@ in 0..6 parallel:");
    expect_in(&l, "C[min(i.0@j.0@ / 2 * 6, 8) * 16");
    if (strstr(l.ir, " if "))
        fail_msg("a guard in\n%s", l.ir);
    lowered_free(&l);
    lower_or_fail(&l, "matmul:M=14,N=16,K=8", "[[\"SP\", 2, 0, 14, [6], 1]]");
    expect_in(&l, "if i.0 * 6 + i.1 < 14:");
    if (strstr(l.ir, "min("))
        fail_msg("a reduction's tile moved back in\n%s", l.ir);
    lowered_free(&l);
}

/* A guard is tested around the loops it does not depend on: a reduction split by 4 that does
 * not divide 14 tests k once a step, not once an element of the row j runs over (on a GPU, a
 * thread's whole register tile of products sat under the test); the part of a conjunction that
 * depends on the loop stays inside it. */
static void a_guard_is_tested_outside_the_loops_it_does_not_use(void **state)
{
    (void)state;
    lowered l;
    lower_or_fail(&l, "matmul:M=8,N=16,K=14",
                  "[[\"SP\", 2, 2, 14, [4], 1], [\"RE\", 2, [0, 2, 3, 1]]]");
    expect_in(&l, "if k.0 * 4 + k.1 < 14:\n          for j in 0..16:\n");
    lowered_free(&l);
    lower_or_fail(&l, "matmul:M=14,N=12,K=14",
                  "[[\"SP\", 2, 0, 14, [4], 1], [\"SP\", 2, 3, 14, [4], 1], "
                  "[\"RE\", 2, [0, 3, 1, 4, 2]]]");
    expect_in(&l, "if i.0 * 4 + i.1 < 14:\n");
    expect_in(&l, "if k.0 * 4 + k.1 < 14:\n              for j in 0..12:\n");
    lowered_free(&l);
}

static void cache_read_into_shared_memory_at_a_reduction_tile(void **state)
{
    /* A.shared holds the 16x4 slice of A used by one k.0 iteration of a 16-row block. */
    lowered l;
    lower_or_fail(
        &l, "matmul:M=32,N=16,K=16",
        "[[\"CHR\", 0, \"shared\", [2]], [\"SP\", 3, 0, 32, [16], 1], [\"SP\", 3, 3, 16, [4], 1], "
        "[\"RE\", 3, [0, 3, 1, 2, 4]], [\"CA\", 1, 3, 1]]");
    expect_in(&l, "alloc A.shared: float32[16, 4] shared");
    lowered_free(&l);
}

static void rfactor_splits_a_reduction(void **state)
{
    lowered l;
    lower_or_fail(&l, "norm_bmn:B=2,M=8,N=6",
                  "[[\"FU\", 1, [1, 2]], [\"SP\", 1, 1, 48, [8], 1], [\"RF\", 1, 2, 1]]");
    expect_in(&l, "alloc sq.rf: float32[2, 8] global");
    lowered_free(&l);
}

static void storage_align_pads_the_stride(void **state)
{
    /* e is softmax's [6, 10] intermediate: stride 10 becomes 17 (17 mod 8 == 1). */
    lowered l;
    lower_or_fail(&l, "softmax:M=6,N=10", "[[\"SA\", 2, 0, 8, 1]]");
    const tt_buffer *e = NULL;
    for (size_t i = 0; i < l.prog->bufs.len; i++)
        if (strcmp(l.prog->bufs.data[i].name, "e") == 0)
            e = &l.prog->bufs.data[i];
    assert_non_null(e);
    assert_int_equal(e->strides[0], 17);
    assert_int_equal(e->size, 102);
    expect_in(&l, "e[e.i * 17 + j]");
    lowered_free(&l);
}

static void inlined_padding_becomes_a_guarded_select(void **state)
{
    lowered l;
    lower_or_fail(&l, "conv2d_nhwc:N=1,H=5,W=5,CI=2,CO=2,K=3,S=1,P=1", "[[\"CI\", 1]]");
    expect_in(&l, "select(");
    assert_null(strstr(l.ir, "alloc pad"));
    lowered_free(&l);
}

static void parallel_fused_loop_keeps_its_annotation(void **state)
{
    lowered l;
    lower_or_fail(
        &l, "add:M=8,N=8",
        "[[\"FU\", 2, [0, 1]], [\"SP\", 2, 0, 64, [4], 1], [\"AN\", 2, 0, 3], [\"AN\", 2, 1, 2]]");
    expect_in(&l, "for i@j@.0 in 0..16 parallel:");
    expect_in(&l, "for i@j@.1 in 0..4 vectorize:");
    lowered_free(&l);
}

static void interpreter_reports_out_of_bounds_stores(void **state)
{
    lowered l;
    lower_or_fail(&l, "relu:M=4,N=4", "[]");
    /* Corrupt the store's index: the interpreter must refuse, naming the buffer. */
    for (size_t i = 1; i < l.prog->stmts.len; i++)
        if (l.prog->stmts.data[i].kind == TT_STMT_STORE)
            l.prog->stmts.data[i].index = tt_expr_int(&l.prog->pool, 16);
    float a[16] = {0}, b[16];
    void *args[2] = {a, b};
    tt_errbuf err = {{0}};
    assert_int_equal(tt_interp_run(l.prog, args, &err), TT_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "store of buffer 'B' out of bounds: index 16, size 16"));
    lowered_free(&l);
    /* A variable read outside its loop is an error, not a silent 0 (an rfactor guard once
     * referred to split leaves of another stage). */
    lower_or_fail(&l, "relu:M=4,N=4", "[]");
    uint32_t stray = tt_var_new(&l.prog->pool, "stray");
    for (size_t i = 1; i < l.prog->stmts.len; i++)
        if (l.prog->stmts.data[i].kind == TT_STMT_STORE)
            l.prog->stmts.data[i].index = tt_expr_var(&l.prog->pool, stray);
    memset(&err, 0, sizeof(err));
    assert_int_equal(tt_interp_run(l.prog, args, &err), TT_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "outside its loop"));
    lowered_free(&l);
}

static void reference_evaluator_reports_reads_outside_a_tensor(void **state)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    tt_status s = tt_workload_parse("te:B[i] = A[i + 1]; A:float32[4]; B:float32[4]", &w, &err);
    assert_int_equal(s, TT_ERR_BAD_WORKLOAD);
    assert_non_null(strstr(err.msg, "'B' reads 'A' outside dimension 0"));
}

static void verification_catches_a_wrong_program(void **state)
{
    lowered l;
    lower_or_fail(&l, "matmul:M=4,N=4,K=4", "[]");
    /* Make every update store 0: the result no longer matches the definition. */
    for (size_t i = 1; i < l.prog->stmts.len; i++)
        if (l.prog->stmts.data[i].kind == TT_STMT_STORE)
            l.prog->stmts.data[i].value = tt_expr_float(&l.prog->pool, TT_DT_FLOAT32, 0.0);
    tt_errbuf err = {{0}};
    tt_verify_result vr;
    assert_int_equal(tt_verify_program(&l.w->dag, l.prog, 1, 1e-4, 1e-5, &vr, &err),
                     TT_ERR_RUNTIME);
    assert_true(vr.mismatches > 0);
    assert_non_null(strstr(err.msg, "output 'C' differs at element"));
    lowered_free(&l);
}

/* The kernel with its pack stages inserted takes every input row-major, keeps the packed one as
 * a buffer of its own that the stage fills first, and computes the definition (serial and
 * with the packing's outer loop parallel). */
static void row_major_form_matches(const lowered *l)
{
    for (int parallel = 0; parallel < 2; parallel++) {
        tt_program *rm;
        tt_errbuf err = {{0}};
        if (tt_program_insert_pack_stages(l->prog, parallel, &rm, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(rm->nparams, l->prog->nparams);
        int ops[64], nin;
        assert_int_equal(tt_dag_params(&l->w->dag, ops, 64, &nin), rm->nparams);
        char *text = tt_program_print(rm);
        int packed = 0;
        for (int i = 0; i < rm->nparams; i++) {
            const tt_buffer *b = tt_program_param(rm, i), *was = tt_program_param(l->prog, i);
            assert_non_null(b);
            assert_int_equal(b->layout.nparts, 0);
            assert_string_equal(b->name, was->name);
            assert_int_equal(b->size, tt_op_numel(&l->w->dag.ops.data[ops[i]]));
            if (was->layout.nparts) {
                char local[96];
                snprintf(local, sizeof(local), "%s_packed[", was->name);
                assert_non_null(strstr(text, local));
                packed++;
            }
        }
        assert_true(packed > 0);
        if (parallel)
            assert_non_null(strstr(text, "parallel"));
        free(text);
        tt_verify_result vr;
        if (tt_verify_program(&l->w->dag, rm, 1, 1e-4, 1e-5, &vr, &err))
            fail_msg("the row-major form: %s", err.msg);
        tt_program_free(rm);
    }
}

/* The pack program of parameter 1 (run in the interpreter) writes what tt_layout_pack does,
 * padding included. */
static void pack_program_matches(const lowered *l)
{
    const tt_buffer *b = tt_program_param(l->prog, 1);
    tt_program *pk;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_pack_program(l->prog, 0, &pk, &err), TT_ERR_INVALID_ARG);
    if (tt_pack_program(l->prog, 1, &pk, &err))
        fail_msg("%s", err.msg);
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++)
        n *= b->shape[d];
    float *src = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * b->size),
          *got = malloc(sizeof(float) * b->size);
    tt_fill_random(src, TT_DT_FLOAT32, n, 3);
    for (int64_t i = 0; i < b->size; i++)
        got[i] = 12345.0f;
    tt_layout_pack(&b->layout, b->ndim, b->shape, sizeof(float), src, want);
    void *args[2] = {src, got};
    if (tt_interp_run(pk, args, &err))
        fail_msg("%s", err.msg);
    for (int64_t i = 0; i < b->size; i++)
        assert_float_equal(got[i], want[i], 0);
    char *text = tt_program_print(pk), packed[64];
    snprintf(packed, sizeof(packed), "%s_packed[", b->name);
    assert_non_null(strstr(text, packed));
    free(text);
    free(src), free(want), free(got);
    tt_program_free(pk);
    row_major_form_matches(l);
}

static void layout_rewrite_packs_weights_in_loop_order(void **state)
{
    /* B[k, j] read by loops j.0, i, k.0, k.1, j.1: B is passed as [j/16][k/4][k%4][j%16] and
     * read contiguously along j.1; the check packs the reference's B the same way. */
    lowered l;
    lower_or_fail(&l, "matmul:M=16,N=64,K=32",
                  "[[\"SP\", 2, 1, 64, [16], 1], [\"SP\", 2, 3, 32, [4], 1], "
                  "[\"RE\", 2, [1, 0, 3, 4, 2]], [\"LR\", 1]]");
    expect_in(&l, "B: float32[32, 64] packed [d1/16%4][d0/4%8][d0%4][d1%16]");
    expect_in(&l, "B[j.0 * 512 + k.0 * 64 + k.1 * 16 + j.1]");
    const tt_buffer *b = tt_program_param(l.prog, 1);
    assert_non_null(b);
    assert_int_equal(b->size, 32 * 64);
    /* every element has its own place */
    int64_t idx[2];
    static bool seen[32 * 64];
    memset(seen, 0, sizeof(seen));
    for (idx[0] = 0; idx[0] < 32; idx[0]++)
        for (idx[1] = 0; idx[1] < 64; idx[1]++) {
            int64_t off = tt_layout_offset(&b->layout, idx);
            assert_true(off >= 0 && off < b->size && !seen[off]);
            seen[off] = true;
        }
    pack_program_matches(&l);
    lowered_free(&l);
    /* Under compute_at the part left to enclosing loops goes outermost.  A split of the
     * reduction that does not divide pads the packed buffer, whose padding is never read; the
     * columns' last tile moves back, so theirs is a panel part (below). */
    lower_or_fail(&l, "matmul:M=24,N=40,K=12",
                  "[[\"CHW\", 2, \"local\"], [\"SP\", 3, 0, 24, [8], 1], "
                  "[\"SP\", 3, 2, 40, [16], 1], [\"RE\", 3, [0, 2, 1, 3]], [\"CA\", 2, 3, 1], "
                  "[\"SP\", 2, 2, 12, [5], 1], [\"RE\", 2, [2, 0, 3, 1]], [\"LR\", 1]]");
    expect_in(&l, "packed [d1/16%3,last=24][d0/5%3][d0%5][d1%16]");
    b = tt_program_param(l.prog, 1);
    assert_int_equal(b->size, 3 * 3 * 5 * 16);
    pack_program_matches(&l);
    lowered_free(&l);
    /* Column tiles whose last one moves back (a classifier's 1000 classes in tiles of 32; here
     * 40 in tiles of 16, the last over 24..39): the weights go in panels, the last starting at
     * 24, so that every tile reads one panel in order, with no min() in the kernel's index. */
    lower_or_fail(&l,
                  "te:t0[i,j] += x0[i,r] * w1[j,r]; out[i,j] = t0[i,j] + w2[j]; "
                  "x0:float32[4,24]; w1:const float32[40,24]; w2:const float32[40]",
                  "[[\"SP\", 4, 1, 40, [16], 1], [\"SP\", 4, 0, 4, [4], 1], "
                  "[\"RE\", 4, [0, 2, 1, 3]], [\"CA\", 2, 4, 1], [\"FU\", 4, [0, 1]], "
                  "[\"SP\", 2, 2, 24, [8], 1], [\"SP\", 2, 1, 40, [16], 1], "
                  "[\"RE\", 2, [3, 1, 4, 0, 2]], [\"LR\", 1]]");
    expect_in(&l, "packed [d0/16%3,last=24][d1/8%3][d1%8][d0%16]");
    expect_in(&l, "w1[i.0@j.0@ * 384 + r.0 * 128 + r.1 * 16 + j.1]");
    b = tt_program_param(l.prog, 1);
    assert_int_equal(b->size, 3 * 24 * 16);
    {
        /* columns 24..31 are in panels 1 and 2; every element's place holds it */
        float *src = malloc(sizeof(float) * 40 * 24), *dst = malloc(sizeof(float) * 3 * 24 * 16);
        for (int e = 0; e < 40 * 24; e++)
            src[e] = (float)e;
        tt_layout_pack(&b->layout, 2, (const int64_t[]){40, 24}, sizeof(float), src, dst);
        for (int r = 0; r < 24; r++) {
            assert_float_equal(dst[1 * 384 + r * 16 + 8], src[24 * 24 + r], 0);  /* panel 1 */
            assert_float_equal(dst[2 * 384 + r * 16 + 0], src[24 * 24 + r], 0);  /* panel 2 */
            assert_float_equal(dst[2 * 384 + r * 16 + 15], src[39 * 24 + r], 0); /* the end */
        }
        for (idx[0] = 0; idx[0] < 40; idx[0]++)
            for (idx[1] = 0; idx[1] < 24; idx[1]++) {
                int64_t off = tt_layout_offset(&b->layout, idx);
                assert_true(off >= 0 && off < b->size);
                assert_float_equal(dst[off], src[idx[0] * 24 + idx[1]], 0);
            }
        free(src), free(dst);
    }
    pack_program_matches(&l);
    lowered_free(&l);
    /* Inner tiles that do not divide (columns in 2 tiles of 5, each in 3 x 2) give parts that
     * are no mixed radix, [d1/5%2][d1/2%3][d1%2]: element 5 would go where the packing puts
     * column 10.  The weights are then read as they are. */
    lower_or_fail(&l, "matmul:M=12,N=10,K=8",
                  "[[\"SP\", 2, 1, 10, [2, 1], 0], [\"FFSP\", 2, 3, [0], 1, 0], "
                  "[\"FSP\", 2, 4, 0, 1], [\"SP\", 2, 4, 3, [1], 1], [\"LR\", 1]]");
    expect_in(&l, "B: float32[8, 10], C");
    lowered_free(&l);
    /* A fused loop carries the parts of what was fused, in the fused order. */
    lower_or_fail(&l, "matmul:M=4,N=8,K=6", "[[\"FU\", 2, [0, 1]], [\"LR\", 1]]");
    expect_in(&l, "B: float32[6, 8] packed [d1%8][d0%6]");
    pack_program_matches(&l);
    lowered_free(&l);
    /* A convolution's weights: every index is a loop variable of the convolution. */
    lower_or_fail(&l, "conv2d_nhwc:N=1,H=6,W=6,CI=8,CO=16,K=3,S=1,P=1",
                  "[[\"CI\", 1], [\"SP\", 3, 3, 16, [8], 1], [\"LR\", 2]]");
    expect_in(&l, "weight: float32[3, 3, 8, 16] packed");
    row_major_form_matches(&l);
    lowered_free(&l);
    /* A 1x1 convolution's weights, W[0, 0, k, j]: a dimension of extent 1 read at 0 has no part
     * in the layout (the importer writes every 1x1 convolution so). */
    lower_or_fail(&l,
                  "te:C[i,j] += A[i,k] * W[0,0,k,j]; A:float32[8,16]; W:const float32[1,1,16,32]",
                  "[[\"SP\", 2, 1, 32, [8], 1], [\"RE\", 2, [1, 0, 3, 2]], [\"LR\", 1]]");
    expect_in(&l, "W: float32[1, 1, 16, 32] packed [d3/8%4][d2%16][d3%8]");
    pack_program_matches(&l);
    row_major_form_matches(&l);
    lowered_free(&l);
}

static void layout_rewrite_refuses_what_it_cannot_pack(void **state)
{
    tt_errbuf err = {{0}};
    tt_workload *w;
    tt_step *steps;
    size_t n;
    tt_state *st;
    tt_program *prog;
    /* A is not declared constant */
    assert_int_equal(tt_workload_parse("matmul:M=8,N=8,K=8", &w, &err), TT_OK);
    assert_int_equal(tt_steps_from_json("[[\"LR\", 0]]", &steps, &n, &err), TT_OK);
    assert_int_equal(tt_state_replay(&w->dag, steps, n, &st, &err), TT_ERR_ILLEGAL_STEP);
    assert_non_null(strstr(err.msg, "not a constant input"));
    free(steps);
    /* twice */
    assert_int_equal(tt_steps_from_json("[[\"LR\", 1], [\"LR\", 1]]", &steps, &n, &err), TT_OK);
    assert_int_equal(tt_state_replay(&w->dag, steps, n, &st, &err), TT_ERR_ILLEGAL_STEP);
    assert_non_null(strstr(err.msg, "already rewritten"));
    free(steps);
    tt_workload_free(w);
    /* a constant read at a computed index, and one read by two stages */
    static const char *const bad[][2] = {
        {"te:C[i] += A[i,k] * W[k+i]; A:float32[8,8]; W:const float32[16]", "computed indices"},
        /* a constant index on a dimension that has more than one element */
        {"te:C[i] += A[i,k] * W[1,k]; A:float32[8,8]; W:const float32[2,8]", "computed indices"},
        {"te:C[i] += W[i,k]; D[i] += W[i,k] * 2; W:const float32[8,8]", "2 stages read it"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(tt_workload_parse(bad[i][0], &w, &err), TT_OK);
        int ws = -1;
        for (size_t o = 0; o < w->dag.ops.len; o++)
            if (!strcmp(w->dag.ops.data[o].name, "W"))
                ws = (int)o;
        assert_true(ws >= 0 && (w->dag.ops.data[ws].attrs & TT_OP_ATTR_CONSTANT));
        assert_int_equal(tt_state_create(&w->dag, &st, &err), TT_OK);
        assert_int_equal(tt_sched_layout_rewrite(st, tt_state_stage_of_op(st, ws), &err), TT_OK);
        assert_int_equal(tt_lower(st, &prog, &err), TT_ERR_LOWER);
        if (!strstr(err.msg, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err.msg);
        tt_state_free(st);
        tt_workload_free(w);
    }
}

/* ---- virtual-thread injection on hand-built programs ---- */

static tt_sid hb_push(tt_program *p, tt_stmt s)
{
    assert_int_equal(TT_VEC_PUSH(&p->stmts, s), 0);
    return (tt_sid)(p->stmts.len - 1);
}

static tt_sid hb_seq(tt_program *p, const tt_sid *items, uint32_t n)
{
    tt_stmt s = {.kind = TT_STMT_SEQ, .first = (uint32_t)p->items.len, .n = n};
    for (uint32_t k = 0; k < n; k++)
        assert_int_equal(TT_VEC_PUSH(&p->items, items[k]), 0);
    return hb_push(p, s);
}

static uint32_t hb_buf(tt_program *p, const char *name, const char *scope, int64_t size, int param)
{
    tt_buffer b = {.name = name, .dtype = TT_DT_FLOAT32, .ndim = 1, .size = size, .param = param};
    b.shape[0] = size;
    b.strides[0] = 1;
    snprintf(b.scope, sizeof(b.scope), "%s", scope);
    assert_int_equal(TT_VEC_PUSH(&p->bufs, b), 0);
    return (uint32_t)p->bufs.len - 1;
}

static tt_sid hb_store(tt_program *p, uint32_t buf, tt_eid index, tt_eid value)
{
    tt_stmt s = {.kind = TT_STMT_STORE, .buf = buf, .index = index, .value = value};
    return hb_push(p, s);
}

static tt_sid hb_alloc(tt_program *p, uint32_t buf, tt_sid body)
{
    tt_stmt s = {.kind = TT_STMT_ALLOC, .buf = buf, .body = body};
    return hb_push(p, s);
}

static tt_program *hb_new(void)
{
    tt_program *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    tt_expr_pool_init(&p->pool);
    tt_stmt none = {0};
    hb_push(p, none);
    return p;
}

/* Whether a store into `buf` lies inside a vthread loop under `id`. */
static bool stored_in_vthread(const tt_program *p, tt_sid id, uint32_t buf, bool inside)
{
    const tt_stmt *s = &p->stmts.data[id];
    if (s->kind == TT_STMT_STORE)
        return inside && s->buf == buf;
    inside |= s->kind == TT_STMT_FOR && s->ann == TT_ANN_VTHREAD;
    if (s->kind == TT_STMT_SEQ) {
        for (uint32_t k = 0; k < s->n; k++)
            if (stored_in_vthread(p, p->items.data[s->first + k], buf, inside))
                return true;
        return false;
    }
    return (s->kind == TT_STMT_FOR || s->kind == TT_STMT_ALLOC || s->kind == TT_STMT_IF) &&
           stored_in_vthread(p, s->body, buf, inside);
}

/* Injection (tt_program_inject_vthreads) on
 *     for vt in 0..2 vthread: alloc S shared: { S[0] = 7;  alloc X local: { X[0] = S[0] + vt;
 *                                               Y[vt] = X[0] } }
 * runs the shared store once, outside any vthread loop, gives X a copy per virtual thread, and
 * computes what the plain loop did.  Two loops it leaves alone: one whose virtual threads would
 * share a buffer allocated outside it (X allocated around the loop), and one where a store that
 * runs once would move before a read of the same buffer by an earlier statement. */
static void virtual_threads_share_what_does_not_depend_on_them(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        tt_program *p = hb_new();
        tt_expr_pool *ep = &p->pool;
        uint32_t vt = tt_var_new(ep, "vt");
        uint32_t Y = hb_buf(p, "Y", "global", 2, 0), S = hb_buf(p, "S", "shared", 1, -1),
                 X = hb_buf(p, "X", "local", 1, -1);
        p->nparams = 1;
        tt_eid zero = tt_expr_int(ep, 0), V = tt_expr_var(ep, vt);
        tt_eid Vf = tt_expr_cast(ep, TT_DT_FLOAT32, V);
        tt_eid S0 = tt_expr_load(ep, TT_DT_FLOAT32, S, zero);
        tt_eid X0 = tt_expr_load(ep, TT_DT_FLOAT32, X, zero);
        tt_sid inner[2] = {hb_store(p, X, zero, tt_add(ep, S0, Vf)), hb_store(p, Y, V, X0)};
        tt_sid xbody = hb_seq(p, inner, 2);
        tt_sid body;
        if (variant == 2) { /* S read by the virtual threads, then written again */
            tt_sid items[3] = {hb_store(p, S, zero, tt_expr_float(ep, TT_DT_FLOAT32, 7)),
                               hb_alloc(p, X, xbody),
                               hb_store(p, S, zero, tt_expr_float(ep, TT_DT_FLOAT32, 1))};
            body = hb_alloc(p, S, hb_seq(p, items, 3));
        } else {
            tt_sid items[2] = {hb_store(p, S, zero, tt_expr_float(ep, TT_DT_FLOAT32, 7)),
                               variant == 0 ? hb_alloc(p, X, xbody) : xbody};
            body = hb_alloc(p, S, hb_seq(p, items, 2));
        }
        tt_stmt loop = {
            .kind = TT_STMT_FOR, .ann = TT_ANN_VTHREAD, .var = vt, .extent = 2, .body = body};
        p->root = hb_push(p, loop);
        if (variant == 1)
            p->root = hb_alloc(p, X, p->root);
        tt_sid before = p->root;
        tt_errbuf err = {{0}};
        assert_int_equal(tt_program_inject_vthreads(p, &err), TT_OK);
        char *text = tt_program_print(p);
        printf("variant %d:\n%s", variant, text);
        if (variant == 0) {
            assert_int_equal(p->stmts.data[p->root].kind, TT_STMT_ALLOC); /* the loop is gone */
            assert_false(stored_in_vthread(p, p->root, S, false));
            assert_true(stored_in_vthread(p, p->root, X, false));
            assert_true(stored_in_vthread(p, p->root, Y, false));
            assert_int_equal(p->bufs.data[X].size, 2);
            assert_int_equal(p->bufs.data[X].ndim, 2);
            assert_int_equal(p->bufs.data[X].shape[0], 2);
            assert_non_null(strstr(text, "X: float32[2, 1] local"));
        } else {
            assert_int_equal(p->root, before);
            assert_true(stored_in_vthread(p, p->root, S, false));
            assert_int_equal(p->bufs.data[X].size, 1);
        }
        float y[2] = {0, 0};
        void *args[1] = {y};
        if (tt_interp_run(p, args, &err))
            fail_msg("variant %d: %s", variant, err.msg);
        assert_true(y[0] == 7.0f && y[1] == 8.0f);
        free(text);
        tt_program_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(simplifier_uses_loop_ranges),
        cmocka_unit_test(lane_steps_follow_rows),
        cmocka_unit_test(lane_uniform_guards),
        cmocka_unit_test(cache_write_gives_a_register_tile),
        cmocka_unit_test(a_tail_tile_ends_where_its_axis_ends),
        cmocka_unit_test(a_guard_is_tested_outside_the_loops_it_does_not_use),
        cmocka_unit_test(cache_read_into_shared_memory_at_a_reduction_tile),
        cmocka_unit_test(rfactor_splits_a_reduction),
        cmocka_unit_test(storage_align_pads_the_stride),
        cmocka_unit_test(inlined_padding_becomes_a_guarded_select),
        cmocka_unit_test(parallel_fused_loop_keeps_its_annotation),
        cmocka_unit_test(interpreter_reports_out_of_bounds_stores),
        cmocka_unit_test(reference_evaluator_reports_reads_outside_a_tensor),
        cmocka_unit_test(verification_catches_a_wrong_program),
        cmocka_unit_test(layout_rewrite_packs_weights_in_loop_order),
        cmocka_unit_test(layout_rewrite_refuses_what_it_cannot_pack),
        cmocka_unit_test(virtual_threads_share_what_does_not_depend_on_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
