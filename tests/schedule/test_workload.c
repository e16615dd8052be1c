/* Workload text: canonical round trips, the operator library, the TE language, parse errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "schedule/schedule.h"

static void expect_key(const char *text, const char *key)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    tt_status s = tt_workload_parse(text, &w, &err);
    if (s)
        fail_msg("%s: %s", text, err.msg);
    assert_string_equal(w->key, key);
    /* The canonical key parses back to itself. */
    tt_workload *w2;
    assert_int_equal(tt_workload_parse(w->key, &w2, &err), TT_OK);
    assert_string_equal(w2->key, key);
    assert_true(w2->hash == w->hash);
    tt_workload_free(w2);
    tt_workload_free(w);
}

static void workload_text_prints_back_canonically(void **state)
{
    expect_key("matmul:M=512,N=512,K=512", "matmul:M=512,N=512,K=512");
    expect_key("matmul:K=512,N=256,M=128", "matmul:M=128,N=256,K=512");
    expect_key("conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1,DIL=1,G=1",
               "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1");
    expect_key("conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1,G=4,dtype=float64",
               "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1,G=4,dtype=float64");
    expect_key("matmul:M=4,N=4,K=4,dtype=float32", "matmul:M=4,N=4,K=4");
    expect_key("te:C[i,j]+=A[i,k]*B[k,j];A:float32[512,512];B:float32[512,512]",
               "te:C[i,j] += A[i,k] * B[k,j]; A:float32[512,512]; B:float32[512,512]");
    expect_key("te: B[i] = (A[i] + 1) * 2 ; A:float64[8]",
               "te:B[i] = (A[i] + 1) * 2; A:float64[8]");
    expect_key("te:B[i] = A[i] - (A[i] - 1); A:float32[8]",
               "te:B[i] = A[i] - (A[i] - 1); A:float32[8]");
    expect_key("te:S[i] max= A[i,k]; A:float32[4,6]; k:6",
               "te:S[i] max= A[i,k]; A:float32[4,6]; k:6");
    /* constant inputs (weights) keep their mark */
    expect_key("te:C[i,j]+=A[i,k]*W[k,j];A:float32[4,4];W:const   float32[4,4]",
               "te:C[i,j] += A[i,k] * W[k,j]; A:float32[4,4]; W:const float32[4,4]");
}

static void matmul_flops_are_two_mnk(void **state)
{
    tt_workload *w;
    assert_int_equal(tt_workload_parse("matmul:M=512,N=256,K=128", &w, NULL), TT_OK);
    assert_true(w->flops == 2.0 * 512 * 256 * 128);
    tt_workload_free(w);
}

static void conv2d_output_shape_follows_stride_and_padding(void **state)
{
    tt_workload *w;
    assert_int_equal(
        tt_workload_parse("conv2d_nhwc:N=1,H=224,W=224,CI=3,CO=64,K=7,S=2,P=3", &w, NULL), TT_OK);
    const tt_op *out = &w->dag.ops.data[w->dag.ops.len - 1];
    assert_int_equal(out->shape[1], 112);
    assert_int_equal(out->shape[2], 112);
    assert_int_equal(out->shape[3], 64);
    tt_workload_free(w);
}

static void every_library_operator_has_a_valid_example(void **state)
{
    /* Parameters named in the library all accept 1..; build each with small values. */
    for (int i = 0; i < tt_op_library_count(); i++) {
        const tt_op_def *d = tt_op_library_get(i);
        assert_non_null(d->te);
        assert_true(d->nparams > 0);
    }
    assert_null(tt_op_library_find("nope", 4));
}

static void expect_error(const char *text, tt_status want, const char *fragment)
{
    tt_workload *w = (tt_workload *)1;
    tt_errbuf err = {{0}};
    tt_status s = tt_workload_parse(text, &w, &err);
    if (s != want)
        fail_msg("%s: expected %s, got %s (%s)", text, tt_status_name(want), tt_status_name(s),
                 err.msg);
    assert_null(w);
    if (!strstr(err.msg, fragment))
        fail_msg("%s: message '%s' lacks '%s'", text, err.msg, fragment);
}

static void malformed_workloads_are_rejected_with_a_located_message(void **state)
{
    expect_error("", TT_ERR_PARSE, "empty");
    expect_error("foo:X=1", TT_ERR_UNKNOWN_OP, "unknown operator 'foo'");
    expect_error("matmul:M=4,N=4", TT_ERR_BAD_WORKLOAD, "needs parameter K");
    expect_error("matmul:M=4,N=4,K=4,Q=2", TT_ERR_BAD_WORKLOAD, "no parameter 'Q'");
    expect_error("matmul:M=4,N=x,K=4", TT_ERR_PARSE, "column 12");
    expect_error("matmul:M=4,N=4,K=0", TT_ERR_BAD_WORKLOAD, "out of range");
    expect_error("matmul:M=4,M=4,N=4,K=4", TT_ERR_BAD_WORKLOAD, "given twice");
    expect_error("matmul:M=4,N=4,K=4,", TT_ERR_PARSE, "trailing");
    expect_error("matmul:M=4;N=4,K=4", TT_ERR_PARSE, "must be an integer");
    expect_error("matmul:M=4,N=4,K=4,dtype=float7", TT_ERR_BAD_WORKLOAD, "unknown dtype");
    expect_error("conv2d_nhwc:N=1,H=8,W=8,CI=3,CO=4,K=3,S=1,P=1,G=2", TT_ERR_BAD_WORKLOAD,
                 "divisible by G");
    expect_error("conv2d_nhwc:N=1,H=2,W=2,CI=3,CO=4,K=7,S=1,P=0", TT_ERR_BAD_WORKLOAD,
                 "does not fit");
    expect_error("softmax:M=4,N=4,dtype=int32", TT_ERR_BAD_WORKLOAD, "float dtype");
    expect_error("conv2d_nchwc:N=1,CI=24,H=8,W=8,CO=32,K=3,S=1,P=1", TT_ERR_BAD_WORKLOAD,
                 "CI=24 must be a multiple of IC=16");
    expect_error("layout_nchwc:N=1,C=12,H=4,W=4,CB=8", TT_ERR_BAD_WORKLOAD,
                 "C=12 must be a multiple of CB=8");
    expect_error("conv2d_transpose_nhwc:N=1,H=4,W=4,CI=4,CO=4,K=3,S=2,P=3", TT_ERR_BAD_WORKLOAD,
                 "at most K-1");
}

static void malformed_tensor_expressions_are_rejected(void **state)
{
    expect_error("te:", TT_ERR_BAD_WORKLOAD, "no computation");
    expect_error("te:C[i] = A[i]", TT_ERR_BAD_WORKLOAD, "never declared");
    expect_error("te:C[i] = A[i]; A:const [4]", TT_ERR_PARSE, "after 'const'");
    expect_error("te:C[i] = A[i,k]; A:float32[3,4]", TT_ERR_BAD_WORKLOAD, "use '+='");
    expect_error("te:C[i] += A[i] * B[k]; A:float32[3]; B:float32[4]; C:float32[3]; k:2; k:3",
                 TT_ERR_BAD_WORKLOAD, "declared twice");
    expect_error("te:C[i,i] = A[i]; A:float32[3]", TT_ERR_PARSE, "appears twice");
    expect_error("te:C[i] = A[i] +; A:float32[3]", TT_ERR_PARSE, "statement 1, column");
    expect_error("te:C[i] = A[i]; C[i] = A[i]; A:float32[3]", TT_ERR_BAD_WORKLOAD,
                 "assigned twice");
    expect_error("te:C[i] = A[i,0]; A:float32[3]", TT_ERR_BAD_WORKLOAD, "rank 1");
    expect_error("te:C[i] = foo(A[i]); A:float32[3]", TT_ERR_BAD_WORKLOAD, "unknown function");
    expect_error("te:C[i] = A[i]; A:float9[3]", TT_ERR_PARSE, "unknown dtype");
    expect_error("te:C[i] += A[i,k] * B[k]; A:float32[3,4]; B:float32[5]", TT_ERR_BAD_WORKLOAD,
                 "ambiguous");
    expect_error("te:C[i] = B[i]; B[i] = A[i]; A:float32[3]", TT_ERR_BAD_WORKLOAD,
                 "before it is computed");
    expect_error("te:C[i] = A[i] + k; A:float32[3]", TT_ERR_BAD_WORKLOAD, "use '+='");
    expect_error("te:C[i] = A[1.5]; A:float32[3]; C:float32[3]", TT_ERR_BAD_WORKLOAD,
                 "not an integer");
    expect_error("te:C[j] = A[0]; A:float32[3]", TT_ERR_BAD_WORKLOAD,
                 "cannot infer the extent of 'j'");
}

/* A declared reduction variable may index a longer dimension, reading part of it (the region
 * convolutions of graph/conv_regions.c read 2 of a kernel's 3 taps); one longer than the
 * dimension is still ambiguous. */
static void a_declared_reduction_reads_part_of_a_tensor(void **state)
{
    (void)state;
    tt_workload *w;
    tt_errbuf err = {{0}};
    assert_int_equal(
        tt_workload_parse("te:C[i] += A[i,k + 1] * B[k]; A:float32[3,4]; B:float32[5]; k:3", &w,
                          &err),
        TT_OK);
    assert_true(w->flops == 2.0 * 3 * 3);
    tt_workload_free(w);
    expect_error("te:C[i] += A[i,k] * B[k]; A:float32[3,4]; B:float32[5]; k:6", TT_ERR_BAD_WORKLOAD,
                 "ambiguous");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(workload_text_prints_back_canonically),
        cmocka_unit_test(matmul_flops_are_two_mnk),
        cmocka_unit_test(conv2d_output_shape_follows_stride_and_padding),
        cmocka_unit_test(every_library_operator_has_a_valid_example),
        cmocka_unit_test(malformed_workloads_are_rejected_with_a_located_message),
        cmocka_unit_test(malformed_tensor_expressions_are_rejected),
        cmocka_unit_test(a_declared_reduction_reads_part_of_a_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
