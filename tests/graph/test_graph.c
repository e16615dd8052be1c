/* ONNX import and shape inference: every node test of Debian's libonnx-testdata either imports
 * with the shapes its expected outputs have, or is refused as unsupported with a reason; and
 * bad files get clear errors. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "graph/onnx_testdata.h"
#include "onnx.pb-c.h"

/* Node tests that must import: the operators networks are made of. */
static const char *const must_import[] = {
    "test_conv_with_strides_padding",
    "test_conv_with_autopad_same",
    "test_convtranspose",
    "test_gemm_all_attributes",
    "test_matmul_2d",
    "test_matmul_4d",
    "test_add_bcast",
    "test_relu",
    "test_clip",
    "test_sigmoid",
    "test_erf",
    "test_tanh",
    "test_maxpool_2d_pads",
    "test_maxpool_2d_ceil",
    "test_averagepool_2d_strides",
    "test_batchnorm_example",
    "test_layer_normalization_4d_axis1",
    "test_reduce_mean_keepdims_example",
    "test_softmax_axis_1",
    "test_reshape_negative_dim",
    "test_flatten_axis2",
    "test_transpose_all_permutations_3",
    "test_concat_2d_axis_1",
    "test_split_equal_parts_1d",
    "test_slice_neg_steps",
    "test_squeeze",
    "test_unsqueeze_axis_1",
    "test_gather_0",
    "test_constant_pad",
    "test_identity",
    "test_dropout_default",
    "test_shape",
    "test_cast_FLOAT_to_DOUBLE",
    "test_pow",
    /* the elementwise family the model zoos need (issue #54); the node tests of HardSigmoid,
     * Elu, Selu, Softplus, Softsign and ThresholdedRelu are of opsets below 11, and
     * tests/graph/make_models.py's `activations` network checks those */
    "test_hardswish",
    "test_leakyrelu",
    "test_prelu_broadcast",
    "test_celu",
    "test_sign",
    "test_neg",
    "test_abs",
    "test_exp",
    "test_log",
    "test_reciprocal",
    "test_min_example",
    "test_max_two_inputs",
    "test_equal",
    "test_where_example",
    "test_expand_dim_changed",
    /* more of issue #54's operators; those of Not, And, Or and InstanceNormalization are of
     * opsets below 11, and Range's inputs are run-time values: make_models.py's `more_ops`
     * network checks them */
    "test_floor",
    "test_ceil",
    "test_mod_mixed_sign_float32",
    "test_mod_mixed_sign_int64",
    "test_mod_int64_fmod",
    "test_mod_broadcast",
    "test_tile",
    "test_tile_precomputed",
    "test_depthtospace_crd_mode",
    "test_depthtospace_dcr_mode",
    "test_spacetodepth",
    "test_reduce_sum_keepdims_random",
    "test_reduce_sum_default_axes_keepdims_random",
    "test_reduce_sum_empty_axes_input_noop_random",
    "test_reduce_sum_negative_axes_keepdims_random",
    "test_reduce_max_do_not_keepdims_random",
    "test_reduce_min_negative_axes_keepdims_random",
    "test_reduce_l1_keep_dims_random",
    "test_reduce_l2_do_not_keepdims_random",
    "test_reduce_sum_square_default_axes_keepdims_random",
    "test_reduce_log_sum_desc_axes",
    "test_reduce_log_sum_exp_negative_axes_keepdims_random",
    "test_reduce_mean_default_axes_keepdims_random",
    "test_argmax_keepdims_random",
    "test_gather_elements_0",
    "test_gather_elements_negative_indices",
    "test_reduce_prod_keepdims_random",
    "test_argmax_no_keepdims_random_select_last_index",
    "test_argmin_negative_axis_keepdims_random",
    "test_resize_upsample_scales_linear",
    "test_resize_downsample_scales_linear_align_corners",
    "test_resize_downsample_sizes_linear_pytorch_half_pixel",
    "test_resize_upsample_scales_nearest",
    "test_resize_upsample_sizes_nearest_floor_align_corners",
    "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
    "test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "test_einsum_batch_diagonal",
    "test_einsum_batch_matmul",
    "test_einsum_inner_prod",
    "test_einsum_sum",
    "test_einsum_transpose",
};

static void node_tests_import_with_the_expected_shapes(void **state)
{
    (void)state;
    if (!tt_test_have_onnx_testdata())
        skip();
    DIR *d = opendir(NODE_TESTS);
    assert_non_null(d);
    struct dirent *e;
    int ok = 0, unsupported = 0, wrong = 0, required = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5))
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s/model.onnx", NODE_TESTS, e->d_name);
        tt_graph *g;
        tt_errbuf err = {{0}};
        /* integer inputs (shapes, axes, pads) get their test values, as a deployment fixes them */
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", NODE_TESTS, e->d_name);
        tt_gtensor bind[16];
        int nbind = tt_test_bind_int_inputs(dir, bind, 16);
        tt_graph_options o = {NULL, 0, 0, bind, nbind};
        tt_status s = tt_graph_import_onnx(path, &o, &g, &err);
        tt_test_free_tensors(bind, nbind);
        bool must = false;
        for (size_t i = 0; i < sizeof(must_import) / sizeof(must_import[0]); i++)
            must = must || !strcmp(must_import[i], e->d_name);
        required += must && !s;
        if (s == TT_ERR_UNSUPPORTED && !must) {
            unsupported++;
            continue;
        }
        if (s) {
            print_error("%s: %s\n", e->d_name, err.msg);
            wrong++;
            continue;
        }
        for (size_t k = 0; k < g->outputs.len; k++) {
            snprintf(path, sizeof(path), "%s/%s/test_data_set_0/output_%zu.pb", NODE_TESTS,
                     e->d_name, k);
            tt_gtensor want;
            if (tt_graph_read_tensor(path, &want, &err)) {
                print_error("%s: %s\n", e->d_name, err.msg);
                wrong++;
                break;
            }
            const tt_gtensor *got = &g->tensors.data[g->outputs.data[k]];
            bool same = got->rank == want.rank && got->dtype == want.dtype &&
                        !memcmp(got->dims, want.dims, sizeof(int64_t) * (size_t)want.rank);
            if (!same) {
                print_error("%s: output %zu: inferred %s rank %d [%lld,%lld,...], expected %s "
                            "rank %d [%lld,%lld,...]\n",
                            e->d_name, k, tt_dtype_name(got->dtype), got->rank,
                            (long long)got->dims[0], (long long)got->dims[1],
                            tt_dtype_name(want.dtype), want.rank, (long long)want.dims[0],
                            (long long)want.dims[1]);
                wrong++;
            }
            free(want.name);
            free(want.data);
            if (!same)
                break;
        }
        ok++;
        tt_graph_free(g);
    }
    closedir(d);
    print_message("node tests: %d imported with the expected shapes, %d refused as unsupported, "
                  "%d wrong\n",
                  ok - wrong, unsupported, wrong);
    assert_int_equal(wrong, 0);
    assert_int_equal(required, (int)(sizeof(must_import) / sizeof(must_import[0])));
}

/* ---- models built here, byte by byte ---- */

typedef struct {
    const char *op;
    int64_t opset;
    int64_t dims[2];
    const char *dim_param; /* the first dimension symbolic when set */
    bool external;         /* the weight stored outside the file */
    const char *equation;  /* Einsum's equation attribute, when set */
    /* external: the weight's location (default weights.bin), offset and length when set */
    const char *location, *offset, *length;
} model_spec;

/* A model Y = op(X) (or X + W for external), serialized into *buf. */
static size_t build_model(const model_spec *m, uint8_t **buf)
{
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT,
                                      d1 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    if (m->dim_param) {
        d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d0.dim_param = (char *)m->dim_param;
    } else {
        d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d0.dim_value = m->dims[0];
    }
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d1.dim_value = m->dims[1];
    Onnx__TensorShapeProto__Dimension *dims[2] = {&d0, &d1};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 2, shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1, tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
    Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT;
    x.name = "X", x.type = &type, y.name = "Y";
    Onnx__ValueInfoProto *ins[1] = {&x}, *outs[1] = {&y};
    char *node_in[2] = {"X", "W"}, *node_out[1] = {"Y"};
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
    node.op_type = (char *)(m->external ? "Add" : m->op), node.name = "the_node";
    node.n_input = m->external ? 2 : 1, node.input = node_in;
    node.n_output = 1, node.output = node_out;
    Onnx__NodeProto *nodes[1] = {&node};
    Onnx__AttributeProto eq = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *attrs[1] = {&eq};
    if (m->equation) {
        eq.name = "equation", eq.has_type = 1,
        eq.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        eq.has_s = 1, eq.s.data = (uint8_t *)m->equation, eq.s.len = strlen(m->equation);
        node.n_attribute = 1, node.attribute = attrs;
    }
    Onnx__TensorProto w = ONNX__TENSOR_PROTO__INIT;
    int64_t wdims[2] = {m->dims[0], m->dims[1]};
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                 off = ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                 len = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    Onnx__StringStringEntryProto *locs[3] = {&loc};
    size_t nlocs = 1;
    loc.key = "location", loc.value = (char *)(m->location ? m->location : "weights.bin");
    if (m->offset)
        off.key = "offset", off.value = (char *)m->offset, locs[nlocs++] = &off;
    if (m->length)
        len.key = "length", len.value = (char *)m->length, locs[nlocs++] = &len;
    w.name = "W", w.n_dims = 2, w.dims = wdims, w.has_data_type = 1,
    w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w.n_external_data = nlocs,
    w.external_data = locs, w.has_data_location = 1,
    w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__TensorProto *inits[1] = {&w};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = "g", graph.n_node = 1, graph.node = nodes, graph.n_input = 1, graph.input = ins,
    graph.n_output = 1, graph.output = outs;
    if (m->external)
        graph.n_initializer = 1, graph.initializer = inits;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    os.domain = "", os.has_version = 1, os.version = m->opset;
    Onnx__OperatorSetIdProto *oss[1] = {&os};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = 1, model.ir_version = 8, model.n_opset_import = 1,
    model.opset_import = oss, model.graph = &graph, model.producer_name = "test_graph";
    size_t n = onnx__model_proto__get_packed_size(&model);
    *buf = malloc(n);
    assert_non_null(*buf);
    onnx__model_proto__pack(&model, *buf);
    return n;
}

/* Imports a built model; the status, with the message in err. */
static tt_status import_built(const model_spec *m, const tt_graph_options *o, tt_graph **g,
                              tt_errbuf *err)
{
    uint8_t *buf;
    size_t n = build_model(m, &buf);
    tt_status s = tt_graph_import_onnx_bytes(buf, n, "built.onnx", o, g, err);
    free(buf);
    return s;
}

static void a_built_model_imports(void **state)
{
    (void)state;
    model_spec m = {"Relu", 13, {2, 5}, NULL, false, NULL, NULL, NULL, NULL};
    tt_graph *g;
    tt_errbuf err = {{0}};
    assert_int_equal(import_built(&m, NULL, &g, &err), TT_OK);
    assert_int_equal(g->opset, 13);
    assert_int_equal(g->nodes.len, 1);
    assert_int_equal(g->nodes.data[0].op, TT_GOP_RELU);
    const tt_gtensor *y = &g->tensors.data[g->outputs.data[0]];
    assert_int_equal(y->rank, 2);
    assert_int_equal(y->dims[0], 2);
    assert_int_equal(y->dims[1], 5);
    assert_string_equal(g->producer, "test_graph");
    tt_graph_free(g);
}

static void bad_files_get_clear_errors(void **state)
{
    (void)state;
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    /* not ONNX at all */
    const char *text = "this is a text file, not a model\n";
    assert_int_not_equal(tt_graph_import_onnx_bytes((const uint8_t *)text, strlen(text),
                                                    "notes.txt", NULL, &g, &err),
                         TT_OK);
    assert_null(g);
    assert_non_null(strstr(err.msg, "notes.txt"));
    /* truncated: every cut of a real model is refused, none crashes */
    model_spec m = {"Relu", 13, {2, 5}, NULL, false, NULL, NULL, NULL, NULL};
    uint8_t *buf;
    size_t n = build_model(&m, &buf);
    for (size_t cut = 0; cut < n; cut++) {
        tt_status s = tt_graph_import_onnx_bytes(buf, cut, "cut.onnx", NULL, &g, &err);
        if (s == TT_OK) /* a cut at a field boundary can parse: it must then be a whole model */
            tt_graph_free(g), g = NULL;
        else
            assert_non_null(strstr(err.msg, "cut.onnx"));
    }
    /* over the size limit */
    tt_graph_options lim = {NULL, 0, 16, NULL, 0};
    assert_int_equal(tt_graph_import_onnx_bytes(buf, n, "big.onnx", &lim, &g, &err), TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "limit"));
    free(buf);
    /* a file that is not there */
    assert_int_equal(tt_graph_import_onnx("/nonexistent/m.onnx", NULL, &g, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/m.onnx"));
}

static void unsupported_things_are_named(void **state)
{
    (void)state;
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    model_spec op = {"NonMaxSuppression", 13, {2, 5}, NULL, false, NULL, NULL, NULL, NULL};
    assert_int_equal(import_built(&op, NULL, &g, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "NonMaxSuppression"));
    assert_non_null(strstr(err.msg, "the_node"));
    model_spec old = {"Relu", 9, {2, 5}, NULL, false, NULL, NULL, NULL, NULL};
    assert_int_equal(import_built(&old, NULL, &g, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "opset 9"));
    /* our own operator (the Winograd rewrite's) is not one a model may name */
    model_spec own = {"ConvWinograd", 13, {2, 5}, NULL, false, NULL, NULL, NULL, NULL};
    assert_int_equal(import_built(&own, NULL, &g, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "ConvWinograd"));
    assert_non_null(strstr(err.msg, "not an ONNX operator"));
    /* external data needs the model's directory: from bytes there is none */
    model_spec ext = {"Add", 13, {2, 5}, NULL, true, NULL, NULL, NULL, NULL};
    assert_int_equal(import_built(&ext, NULL, &g, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "external data"));
    assert_non_null(strstr(err.msg, "from its path"));
    assert_null(g);
}

/* Writes a built model to dir/m.onnx and imports it from there. */
static tt_status import_from_dir(const char *dir, const model_spec *m, tt_graph **g, tt_errbuf *err)
{
    uint8_t *buf;
    size_t n = build_model(m, &buf);
    char path[512];
    snprintf(path, sizeof(path), "%s/m.onnx", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
    return tt_graph_import_onnx(path, NULL, g, err);
}

/* Weights stored outside the model (exporters do so past protobuf's 2 GB) are read from the file
 * beside it that they name, at their offset; a missing or short file, a name outside the
 * model's directory and a length that is not the tensor's are refused with the reason. */
static void external_data_is_read_beside_the_model(void **state)
{
    (void)state;
    char dir[] = "/tmp/tt-external-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof(path), "%s/weights.bin", dir);
    float data[4 + 10];
    for (int i = 0; i < 14; i++)
        data[i] = i < 4 ? -1.0f : 0.5f * (float)(i - 4);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, sizeof(float), 14, f), 14);
    fclose(f);
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    model_spec m = {"Add", 13, {2, 5}, NULL, true, NULL, "weights.bin", "16", "40"};
    assert_int_equal(import_from_dir(dir, &m, &g, &err), TT_OK);
    const tt_gtensor *w = NULL;
    for (size_t i = 0; i < g->tensors.len; i++)
        if (g->tensors.data[i].name && !strcmp(g->tensors.data[i].name, "W"))
            w = &g->tensors.data[i];
    assert_non_null(w);
    assert_int_equal(w->kind, TT_GT_CONST);
    assert_int_equal(w->dims[0] * w->dims[1], 10);
    assert_memory_equal(w->data, data + 4, 10 * sizeof(float));
    tt_graph_free(g);
    g = NULL;
    /* no offset: from the file's start, all of it */
    model_spec whole = {"Add", 13, {2, 7}, NULL, true, NULL, "weights.bin", NULL, NULL};
    assert_int_equal(import_from_dir(dir, &whole, &g, &err), TT_OK);
    tt_graph_free(g);
    g = NULL;
    static const struct {
        const char *location, *offset, *length, *says;
        tt_status status;
    } bad[] = {
        {"missing.bin", NULL, NULL, "missing.bin", TT_ERR_IO},
        {"../weights.bin", NULL, NULL, "outside the model's directory", TT_ERR_PARSE},
        {"/etc/hostname", NULL, NULL, "outside the model's directory", TT_ERR_PARSE},
        {"weights.bin", "24", NULL, "too few", TT_ERR_PARSE},
        {"weights.bin", NULL, "8", "8 bytes of external data", TT_ERR_PARSE},
        {"weights.bin", "-4", NULL, "offset '-4'", TT_ERR_PARSE},
        {"weights.bin", "4x", NULL, "offset '4x'", TT_ERR_PARSE},
        {"", NULL, NULL, "no location", TT_ERR_PARSE},
        {".", NULL, NULL, "not a regular file", TT_ERR_IO},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        model_spec b = {"Add",         13,           {2, 5}, NULL, true, NULL, bad[i].location,
                        bad[i].offset, bad[i].length};
        assert_int_equal(import_from_dir(dir, &b, &g, &err), bad[i].status);
        assert_null(g);
        assert_non_null(strstr(err.msg, bad[i].says));
        assert_non_null(strstr(err.msg, "'W'"));
    }
    snprintf(path, sizeof(path), "%s/m.onnx", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/weights.bin", dir);
    unlink(path);
    rmdir(dir);
}

/* Einsum's equation against a 2x5 operand: explicit and implicit outputs, the ellipsis, and
 * equations that do not fit, each refused with the node and the reason. */
static void einsum_equations_are_checked(void **state)
{
    (void)state;
    static const struct {
        const char *eq;
        int rank;
        int64_t dims[2];
        const char *error;
    } cases[] = {
        {"ij->ji", 2, {5, 2}, NULL},
        {"ij->i", 1, {2, 0}, NULL},
        {"ji", 2, {5, 2}, NULL}, /* implicit: the letters that appear once, in order */
        {"ii", 0, {0, 0}, "subscript 'i' is 2 in one place and 5 in another"},
        {"...j->j", 0, {0, 0}, "leaves out the operands' ellipsis"}, /* as numpy */
        {"i...->...", 1, {5, 0}, NULL},
        {"ij->", 0, {0, 0}, NULL},
        {"ijk->i", 0, {0, 0}, "names 3 dimensions of an operand of rank 2"},
        {"ij->k", 0, {0, 0}, "output subscript 'k' is in no operand"},
        {"ij->ii", 0, {0, 0}, "output subscript 'i' appears twice"},
        {"ij,jk->ik", 0, {0, 0}, "2 operand terms for 1 inputs"},
        {"i.j", 0, {0, 0}, "stray '.'"},
        {"i1", 0, {0, 0}, "'1' in 'i1' is not a letter"},
        {"...ij->ij", 2, {2, 5}, NULL}, /* an empty ellipsis */
        {"i...j->ij", 2, {2, 5}, NULL},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        model_spec m = {"Einsum", 13, {2, 5}, NULL, false, cases[k].eq, NULL, NULL, NULL};
        tt_graph *g = NULL;
        tt_errbuf err = {{0}};
        tt_status s = import_built(&m, NULL, &g, &err);
        if (cases[k].error) {
            if (s == TT_OK || !strstr(err.msg, cases[k].error) || !strstr(err.msg, "the_node"))
                fail_msg("'%s': %s", cases[k].eq, s ? err.msg : "imported");
            assert_null(g);
            continue;
        }
        if (s)
            fail_msg("'%s': %s", cases[k].eq, err.msg);
        const tt_gtensor *y = &g->tensors.data[g->outputs.data[0]];
        assert_int_equal(y->rank, cases[k].rank);
        for (int d = 0; d < y->rank; d++)
            assert_int_equal(y->dims[d], cases[k].dims[d]);
        tt_graph_free(g);
    }
}

static void dynamic_shapes_need_an_override(void **state)
{
    (void)state;
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    model_spec dyn = {"Sigmoid", 13, {0, 7}, "batch", false, NULL, NULL, NULL, NULL};
    assert_int_equal(import_built(&dyn, NULL, &g, &err), TT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "batch"));
    assert_non_null(strstr(err.msg, "--shape X="));
    const char *shapes[] = {"X=3x7"};
    tt_graph_options o = {shapes, 1, 0, NULL, 0};
    assert_int_equal(import_built(&dyn, &o, &g, &err), TT_OK);
    assert_int_equal(g->tensors.data[g->outputs.data[0]].dims[0], 3);
    tt_graph_free(g);
    const char *bad[] = {"X=3x0"};
    o.shapes = bad;
    assert_int_equal(import_built(&dyn, &o, &g, &err), TT_ERR_INVALID_ARG);
    const char *rank[] = {"X=3x7x2"};
    o.shapes = rank;
    assert_int_equal(import_built(&dyn, &o, &g, &err), TT_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "rank"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_built_model_imports),
        cmocka_unit_test(bad_files_get_clear_errors),
        cmocka_unit_test(unsupported_things_are_named),
        cmocka_unit_test(external_data_is_read_beside_the_model),
        cmocka_unit_test(dynamic_shapes_need_an_override),
        cmocka_unit_test(einsum_equations_are_checked),
        cmocka_unit_test(node_tests_import_with_the_expected_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
