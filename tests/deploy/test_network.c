/* Networks end to end: every ONNX backend node test of Debian's libonnx-testdata that imports is
 * partitioned into kernels, compiled with default schedules, run in process and compared with
 * the test's expected outputs (within 1e-4, absolute and relative); what kernels cannot compute
 * is refused with the node and the reason.  And the partition itself: fusion, BatchNormalization
 * folding, shared tasks, the memory plan. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "deploy/compile.h"
#include "deploy/netexec.h"
#include "graph/net.h"
#include "graph/onnx_testdata.h"

static bool close_enough(const void *got, const tt_gtensor *want, int64_t *bad)
{
    int64_t n = tt_gtensor_numel(want);
    for (int64_t i = 0; i < n; i++) {
        double g, w;
        switch (want->dtype) {
        case TT_DT_FLOAT32: g = ((const float *)got)[i], w = ((const float *)want->data)[i]; break;
        case TT_DT_FLOAT64:
            g = ((const double *)got)[i], w = ((const double *)want->data)[i];
            break;
        case TT_DT_INT32:
            g = ((const int32_t *)got)[i], w = ((const int32_t *)want->data)[i];
            break;
        case TT_DT_INT64:
            g = (double)((const int64_t *)got)[i], w = (double)((const int64_t *)want->data)[i];
            break;
        default: g = ((const uint8_t *)got)[i], w = ((const uint8_t *)want->data)[i]; break;
        }
        if (isnan(w) ? !isnan(g) : !(fabs(g - w) <= 1e-4 + 1e-4 * fabs(w))) {
            *bad = i;
            return false;
        }
    }
    return true;
}

typedef struct {
    int passed, library, refused_import, refused_lowering, wrong;
} tally;

/* How a test runs a network: in process (netexec) or as the library tvm-compile --model builds
 * (loaded with dlopen, called through NAME_run_buffers with a workspace of its own). */
typedef enum { IN_PROCESS, LIBRARY } runner_kind;

typedef int (*run_buffers_fn)(void *, const void *const *, void *const *);

typedef struct {
    runner_kind kind;
    tt_netexec *x;
    run_buffers_fn run;
    void *workspace;
} runner;

/* The files tt_compile_net writes for OUTDIR/NAME. */
static void remove_library(const char *prefix)
{
    static const char *const ext[] = {"a", "so", "h", "pc"};
    char path[1100];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%.1000s.%s", prefix, ext[i]);
        remove(path);
    }
}

static tt_status runner_create(runner *r, runner_kind kind, tt_net *net, const char *db,
                               tt_errbuf *err)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    if (kind == IN_PROCESS) {
        tt_netexec_options xo = {db, NULL, db != NULL, NULL};
        return tt_netexec_create(net, &xo, &r->x, err);
    }
    char dir[] = "/tmp/tt-netlib-XXXXXX";
    if (!mkdtemp(dir))
        return tt_err(err, TT_ERR_IO, "mkdtemp");
    char prefix[64], path[96];
    snprintf(prefix, sizeof(prefix), "%s/net", dir);
    tt_compile_net_options o = {db, NULL, NULL, prefix, "test", db != NULL, false, NULL, NULL};
    tt_compile_net_summary sum;
    tt_status s = tt_compile_net(&o, net, NULL, &sum, err);
    void *dl = NULL;
    if (!s) {
        /* never unloaded: the thread pool's workers stay in the code it brought */
        snprintf(path, sizeof(path), "%s.so", prefix);
        if (!(dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)))
            s = tt_err(err, TT_ERR_IO, "dlopen: %s", dlerror());
    }
    if (!s && !(r->run = (run_buffers_fn)dlsym(dl, "net_run_buffers")))
        s = tt_err(err, TT_ERR_IO, "no net_run_buffers");
    if (!s && !(r->workspace = aligned_alloc(64, (size_t)(sum.workspace_bytes + 64))))
        s = tt_err(err, TT_ERR_NOMEM, "workspace");
    remove_library(prefix);
    rmdir(dir);
    return s;
}

static tt_status runner_run(runner *r, const void *const *in, void *const *out, tt_errbuf *err)
{
    if (r->kind == IN_PROCESS)
        return tt_netexec_run(r->x, in, out, err);
    int rc = r->run(r->workspace, in, out);
    return rc ? tt_err(err, TT_ERR_RUNTIME, "net_run_buffers returned %d", rc) : TT_OK;
}

static void runner_free(runner *r)
{
    tt_netexec_free(r->x);
    free(r->workspace);
}

/* One test directory (model.onnx, test_data_set_*): 0 passed, 1 refused at import, 2 refused by
 * the partition, -1 wrong (why says how).  When `keep` is given, the graph and net are handed to
 * the caller instead of freed. */
static int run_model(const char *dir, runner_kind kind, tt_net_layout layout, const char *db,
                     char *why, size_t nwhy, tt_graph **keep_g, tt_net **keep_net)
{
    char path[1200];
    tt_errbuf err = {{0}};
    /* integer inputs (shapes, axes, pads) get their test values, as a deployment fixes them */
    tt_gtensor bind[16];
    int nbind = tt_test_bind_int_inputs(dir, bind, 16);
    tt_graph_options o = {NULL, 0, 0, bind, nbind};
    tt_graph *g = NULL;
    snprintf(path, sizeof(path), "%s/model.onnx", dir);
    tt_status s = tt_graph_import_onnx(path, &o, &g, &err);
    tt_test_free_tensors(bind, nbind);
    if (s) {
        snprintf(why, nwhy, "import: %s", err.msg);
        return s == TT_ERR_UNSUPPORTED ? 1 : -1;
    }
    tt_net *net = NULL;
    runner x = {0};
    int rc = 0;
    tt_net_options no = {0, layout, false, 0};
    if ((s = tt_net_build(g, &no, &net, &err))) {
        snprintf(why, nwhy, "partition: %s", err.msg);
        rc = s == TT_ERR_UNSUPPORTED ? 2 : -1;
    } else if ((s = runner_create(&x, kind, net, db, &err))) {
        snprintf(why, nwhy, "build (%s): %s", kind == LIBRARY ? "library" : "in process", err.msg);
        rc = -1;
    }
    /* every data set: inputs by name (bound ones are constants now), outputs compared */
    for (int set = 0; !rc; set++) {
        char sd[1100];
        snprintf(sd, sizeof(sd), "%s/test_data_set_%d", dir, set);
        struct stat st;
        if (stat(sd, &st))
            break;
        void *in[16] = {0}, *out[16] = {0};
        tt_gtensor files[16];
        int nfiles = 0;
        for (int i = 0; i < 16; i++) {
            snprintf(path, sizeof(path), "%s/input_%d.pb", sd, i);
            if (stat(path, &st))
                break;
            if (tt_graph_read_tensor(path, &files[nfiles], &err)) {
                snprintf(why, nwhy, "%s", err.msg);
                rc = -1;
                break;
            }
            nfiles++;
        }
        for (size_t i = 0; !rc && i < g->inputs.len && i < 16; i++) {
            const tt_gtensor *t = &g->tensors.data[g->inputs.data[i]];
            for (int f = 0; f < nfiles && !in[i]; f++)
                if (!strcmp(files[f].name, t->name))
                    in[i] = files[f].data;
            if (!in[i] && (size_t)nfiles == g->inputs.len)
                in[i] = files[i].data;
            if (!in[i]) {
                snprintf(why, nwhy, "no data for input '%s'", t->name);
                rc = -1;
            }
        }
        for (size_t i = 0; !rc && i < g->outputs.len && i < 16; i++) {
            const tt_gtensor *t = &g->tensors.data[g->outputs.data[i]];
            out[i] = calloc((size_t)tt_gtensor_numel(t) + 1, (size_t)tt_dtype_bytes(t->dtype));
        }
        if (!rc && (s = runner_run(&x, (const void *const *)in, out, &err))) {
            snprintf(why, nwhy, "run: %s", err.msg);
            rc = -1;
        }
        for (size_t i = 0; !rc && i < g->outputs.len && i < 16; i++) {
            snprintf(path, sizeof(path), "%s/output_%zu.pb", sd, i);
            tt_gtensor want;
            if (tt_graph_read_tensor(path, &want, &err)) {
                snprintf(why, nwhy, "%s", err.msg);
                rc = -1;
                break;
            }
            const tt_gtensor *t = &g->tensors.data[g->outputs.data[i]];
            int64_t bad = 0;
            if (want.dtype != t->dtype || tt_gtensor_numel(&want) != tt_gtensor_numel(t)) {
                snprintf(why, nwhy, "output %zu: %s of %lld, expected %s of %lld", i,
                         tt_dtype_name(t->dtype), (long long)tt_gtensor_numel(t),
                         tt_dtype_name(want.dtype), (long long)tt_gtensor_numel(&want));
                rc = -1;
            } else if (!close_enough(out[i], &want, &bad)) {
                double gv = t->dtype == TT_DT_FLOAT32   ? ((float *)out[i])[bad]
                            : t->dtype == TT_DT_FLOAT64 ? ((double *)out[i])[bad]
                                                        : NAN;
                double wv = t->dtype == TT_DT_FLOAT32   ? ((float *)want.data)[bad]
                            : t->dtype == TT_DT_FLOAT64 ? ((double *)want.data)[bad]
                                                        : NAN;
                snprintf(why, nwhy, "data set %d, output %zu, element %lld: %.8g, expected %.8g",
                         set, i, (long long)bad, gv, wv);
                rc = -1;
            }
            free(want.name);
            free(want.data);
        }
        tt_test_free_tensors(files, nfiles);
        for (int i = 0; i < 16; i++)
            free(out[i]);
    }
    runner_free(&x);
    if (keep_g && !rc) {
        *keep_g = g;
        *keep_net = net;
        return rc;
    }
    tt_net_free(net);
    tt_graph_free(g);
    return rc;
}

static int run_model_dir(const char *dir, char *why, size_t nwhy, tt_graph **keep_g,
                         tt_net **keep_net)
{
    return run_model(dir, IN_PROCESS, TT_NET_LAYOUT_CHANNELS_LAST, NULL, why, nwhy, keep_g,
                     keep_net);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void node_tests_compute_the_expected_outputs(void **state)
{
    (void)state;
    if (!tt_test_have_onnx_testdata())
        skip();
    DIR *d = opendir(NODE_TESTS);
    assert_non_null(d);
    char *names[2048];
    int n = 0;
    struct dirent *e;
    const char *only = getenv("TT_NODE_TEST");
    while ((e = readdir(d)) && n < 2048)
        if (!strncmp(e->d_name, "test_", 5) && (!only || strstr(e->d_name, only)))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof(char *), by_name);
    tally t = {0};
    bool verbose = getenv("TT_VERBOSE") != NULL;
    for (int i = 0; i < n; i++) {
        char why[2048] = "", dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", NODE_TESTS, names[i]);
        int rc = run_model_dir(dir, why, sizeof(why), NULL, NULL);
        /* and as the library tvm-compile --model builds, with the same expected outputs */
        if (rc == 0 && !(rc = run_model(dir, LIBRARY, TT_NET_LAYOUT_CHANNELS_LAST, NULL, why,
                                        sizeof(why), NULL, NULL)))
            t.library++;
        if (rc == 0)
            t.passed++;
        else if (rc == 1)
            t.refused_import++;
        else if (rc == 2)
            t.refused_lowering++;
        else
            t.wrong++;
        if (rc < 0 || (verbose && rc == 2))
            print_error("%s: %s\n", names[i], why);
        free(names[i]);
    }
    print_message("node tests: %d computed the expected outputs (in process and built as a "
                  "library), %d refused at import, %d refused by the partition, %d wrong\n",
                  t.passed, t.refused_import, t.refused_lowering, t.wrong);
    assert_int_equal(t.library, t.passed);
    assert_int_equal(t.wrong, 0);
}

/* ---- small networks (tests/graph/make_models.py, checked against numpy) ---- */

static const char *models_dir(void)
{
    const char *d = getenv("TT_TEST_MODELS");
    struct stat st;
    if (d && !stat(d, &st))
        return d;
    if (getenv("CI"))
        fail_msg("TT_TEST_MODELS (%s) is missing: make_models.py needs python3-onnx", d ? d : "");
    return NULL;
}

static void print_tasks(const tt_net *net)
{
    if (!getenv("TT_VERBOSE"))
        return;
    for (size_t i = 0; i < net->tasks.len; i++)
        print_message("  task %zu x%d %s: %s\n", i, net->tasks.data[i].weight,
                      net->tasks.data[i].label, net->tasks.data[i].workload);
}

/* The net of one small network (channels last), run and checked in both layouts (built as a
 * library) and in process; NULL (skipped) without the models. */
static tt_net *small_network(const char *name, tt_graph **g)
{
    const char *base = models_dir();
    if (!base)
        return NULL;
    char dir[1024], why[2048] = "";
    snprintf(dir, sizeof(dir), "%s/%s", base, name);
    tt_net *net = NULL;
    int rc = run_model(dir, LIBRARY, TT_NET_LAYOUT_MODEL, NULL, why, sizeof(why), NULL, NULL);
    if (!rc)
        rc = run_model(dir, LIBRARY, TT_NET_LAYOUT_CHANNELS_LAST, NULL, why, sizeof(why), NULL,
                       NULL);
    if (!rc)
        rc = run_model_dir(dir, why, sizeof(why), g, &net);
    if (rc)
        fail_msg("%s: %s", name, why);
    print_tasks(net);
    return net;
}

/* The net of one small network in `layout`, not run. */
static tt_net *small_net_in(const char *name, tt_net_layout layout, tt_graph **g)
{
    const char *base = models_dir();
    if (!base)
        return NULL;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s/model.onnx", base, name);
    tt_errbuf err = {{0}};
    tt_net_options no = {0, layout, false, 0};
    tt_net *net = NULL;
    if (tt_graph_import_onnx(path, NULL, g, &err) || tt_net_build(*g, &no, &net, &err))
        fail_msg("%s: %s", name, err.msg);
    print_tasks(net);
    return net;
}

/* In the model's layout (--layout model) no tensor of network `name` is permuted. */
static void assert_model_layout_permutes_nothing(const char *name)
{
    tt_graph *g;
    tt_net *net = small_net_in(name, TT_NET_LAYOUT_MODEL, &g);
    for (size_t t = 0; t < g->tensors.len; t++)
        assert_false(g->tensors.data[t].permuted);
    tt_net_free(net);
    tt_graph_free(g);
}

static int task_calls(const tt_net *net, const char *label)
{
    int n = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        if (!strcmp(net->tasks.data[i].label, label))
            n += net->tasks.data[i].weight;
    return n;
}

static void a_resnet_block_folds_fuses_and_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("resnet_block", &g);
    if (!net)
        skip();
    assert_int_equal(net->folded_batchnorms, 2);
    /* conv+bn+relu, conv+bn+add+relu: the normalisation is in the weights (then transformed:
     * 16x16 outputs are 16 tiles of 4x4, too few, and 64 of 2x2: F(2x2, 3x3)), the rest fused */
    assert_int_equal(net->winograd_convs, 2);
    assert_int_equal(task_calls(net, "ConvWinograd+Relu"), 1);
    assert_int_equal(task_calls(net, "ConvWinograd+Add+Relu"), 1);
    assert_int_equal(task_calls(net, "MaxPool"), 1);
    assert_int_equal(task_calls(net, "Gemm"), 1);
    /* Flatten moves nothing: 6 kernels for 12 nodes */
    assert_int_equal((int)net->calls.len, 6);
    assert_true(net->arena_bytes < net->unplanned_bytes);
    tt_net_free(net);
    tt_graph_free(g);
}

static void a_mobilenet_block_shares_tasks_and_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("mobilenet_block", &g);
    if (!net)
        skip();
    /* channels last: the first block reads the model's NCHW input and the second writes the
     * NCHW output, so only the depthwise convolution, between them, is one task of two calls */
    assert_int_equal((int)net->tasks.len, 5);
    assert_int_equal(task_calls(net, "Conv+Clip"), 4);
    assert_int_equal(task_calls(net, "Conv+Add"), 2);
    int shared = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        shared += net->tasks.data[i].weight == 2;
    assert_int_equal(shared, 1);
    /* the 1x1 convolutions (stride 1, no padding) are matrix products over the 144 pixels
     * ([1, C, 1, 144]: the register tile's rows are pixels, not the 12 columns of one image
     * row), also where they read the NCHW input or write the NCHW output; the depthwise one is
     * not */
    int pixel_rows = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        pixel_rows += strstr(net->tasks.data[i].workload, "[1,1,144,") != NULL ||
                      strstr(net->tasks.data[i].workload, ",1,144]") != NULL;
    assert_int_equal(pixel_rows, 4);
    tt_net_free(net);
    tt_graph_free(g);
    /* in the model's layout, two blocks of the same shapes: three tasks, each run twice */
    net = small_net_in("mobilenet_block", TT_NET_LAYOUT_MODEL, &g);
    assert_int_equal((int)net->tasks.len, 3);
    for (size_t i = 0; i < net->tasks.len; i++)
        assert_int_equal(net->tasks.data[i].weight, 2);
    assert_int_equal(net->channels_last, 0);
    tt_net_free(net);
    tt_graph_free(g);
}

/* Where channels last applies: from the first convolution on, through every op that can write
 * it; not at graph outputs or under a Reshape; convolution weights HWIO. */
static void layouts_are_channels_last_between_convolutions(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("layouts", &g);
    if (!net)
        skip();
    int cl = 0, hwio = 0;
    for (size_t t = 0; t < g->tensors.len; t++) {
        const tt_gtensor *x = &g->tensors.data[t];
        if (!x->permuted)
            continue;
        if (x->kind == TT_GT_CONST) {
            /* [CO, CI/G, KH, KW] stored [KH, KW, CI/G, CO] */
            assert_int_equal(x->rank, 4);
            assert_int_equal(x->perm[0], 2);
            assert_int_equal(x->perm[3], 0);
            hwio++;
            continue;
        }
        assert_int_equal(x->kind, TT_GT_VALUE);
        assert_false(x->output);
        assert_int_equal(x->perm[0], 0);
        assert_int_equal(x->perm[x->rank - 1], 1);
        cl++;
    }
    assert_int_equal(net->channels_last, cl);
    /* conv + relu, maxpool, conv 1x1, avgpool, concat, pad, slice, both splits, sigmoid, mul,
     * batchnorm, depthwise conv, the second concat, add, the conv + relu after ConvTranspose: 18
     * tensors; not the ConvTranspose's output, the GlobalAveragePool's [1,6,1,1] (the same memory
     * in both orders), the conv under the Reshape */
    assert_int_equal(cl, 18);
    /* the weights of the channels-last convolutions: stem, 1x1, depthwise, after ConvTranspose */
    assert_int_equal(hwio, 4);
    for (size_t i = 0; i < g->inputs.len; i++)
        assert_false(g->tensors.data[g->inputs.data[i]].permuted);
    for (size_t i = 0; i < g->outputs.len; i++)
        assert_false(g->tensors.data[g->outputs.data[i]].permuted);
    tt_net_free(net);
    tt_graph_free(g);
    assert_model_layout_permutes_nothing("layouts");
}

/* The elementwise operators of the model zoos (the operator table's formula writer, Min and
 * Max of three inputs) match numpy in both layouts, in process and built as a library; a chain
 * of them fuses into the convolution before it, as Relu does. */
static void every_activation_of_the_zoos_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("activations", &g);
    if (!net)
        skip();
    assert_string_equal(net->tasks.data[0].label,
                        "Conv+HardSigmoid+HardSwish+LeakyRelu+Elu+Selu+Celu+Softsign+"
                        "ThresholdedRelu+Neg+Softplus+Sub+PRelu+Min+Max");
    /* the second convolution's output has four readers: the tail is cut where a tensor is
     * read twice, as everywhere (Abs; Add+Log; Neg+Exp+Add+Reciprocal; Sign+Mul+Add) */
    assert_int_equal(net->tasks.len, 6);
    tt_net_free(net);
    tt_graph_free(g);
}

/* ViT's class token: the shape arithmetic before its Expand (ConstantOfShape, Equal, Where) folds
 * at import, the Expand of a constant becomes a constant, and an Expand of a value computed at
 * run time is a kernel; the network matches numpy. */
static void a_class_token_folds_and_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("class_token", &g);
    if (!net)
        skip();
    int folded = 0, expand_kernels = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        folded += n->removed && (n->op == TT_GOP_CONSTANT_OF_SHAPE || n->op == TT_GOP_EQUAL ||
                                 n->op == TT_GOP_WHERE || n->op == TT_GOP_EXPAND);
        expand_kernels += !n->removed && n->op == TT_GOP_EXPAND;
    }
    assert_int_equal(folded, 4);
    assert_int_equal(expand_kernels, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* Issue #54's second batch of operators matches numpy in both layouts: the logical operators and
 * Range fold at import (into Tile's repeats), as does a Tile of a constant, and the rest are
 * kernels. */
static void more_operators_of_the_zoos_match(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("more_ops", &g);
    if (!net)
        skip();
    int folded = 0, kernels = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        bool logical = n->op == TT_GOP_RANGE || n->op == TT_GOP_NOT || n->op == TT_GOP_AND ||
                       n->op == TT_GOP_OR || n->op == TT_GOP_TILE;
        folded += n->removed && logical;
        kernels += !n->removed && (n->op == TT_GOP_TILE || n->op == TT_GOP_DEPTH_TO_SPACE ||
                                   n->op == TT_GOP_SPACE_TO_DEPTH || n->op == TT_GOP_MOD ||
                                   n->op == TT_GOP_INSTANCE_NORM || n->op == TT_GOP_REDUCE_L2);
    }
    assert_int_equal(folded, 5); /* and the Tile of a constant */
    assert_int_equal(kernels, 6);
    tt_net_free(net);
    tt_graph_free(g);
}

/* Opset 18's changes import and match numpy in both layouts: GroupNormalization is one kernel,
 * Mish joins it, the Split into uneven num_outputs parts is three outputs of 4, 4 and 2, and the
 * LayerNorm written out with ReduceMean's axes as an input fuses into one node. */
static void opset_18_operators_match(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("opset18", &g);
    if (!net)
        skip();
    assert_int_equal(g->opset, 18);
    assert_int_equal(net->fused_layer_norms, 1);
    assert_int_equal(task_calls(net, "ReduceMean"), 0);
    int group_norms = 0, splits = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        group_norms += !n->removed && n->op == TT_GOP_GROUP_NORM;
        if (n->op == TT_GOP_SPLIT) {
            splits++;
            assert_int_equal(n->noutputs, 3);
            assert_int_equal(g->tensors.data[n->outputs[0]].dims[3], 4);
            assert_int_equal(g->tensors.data[n->outputs[1]].dims[3], 4);
            assert_int_equal(g->tensors.data[n->outputs[2]].dims[3], 2);
        }
    }
    assert_int_equal(group_norms, 1);
    assert_int_equal(splits, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* Opsets 19 to 22 import and match numpy in both layouts: GroupNormalization's scale and bias
 * per channel (21), Gelu exact and tanh joining the kernel before it (20), Pad's wrap mode,
 * Resize's half_pixel_symmetric and AveragePool's dilations (19: two pools, each a task). */
static void opsets_19_to_22_match(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("opset22", &g);
    if (!net)
        skip();
    assert_int_equal(g->opset, 22);
    assert_int_equal(task_calls(net, "GroupNormalization+Gelu"), 1);
    assert_int_equal(task_calls(net, "Resize+Gelu"), 1);
    assert_int_equal(task_calls(net, "Gelu"), 0);
    assert_int_equal(task_calls(net, "AveragePool"), 2);
    tt_net_free(net);
    tt_graph_free(g);
}

/* Swin's shifted-window mask: ScatterND, Transpose, Concat, float arithmetic, Pow, comparison
 * and Cast on constants fold at import, so one kernel is left (Add, Softmax; the Dropout of ratio 0
 * in training mode is an alias), and it matches numpy. */
static void a_shifted_window_mask_folds_and_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("shifted_window_mask", &g);
    if (!net)
        skip();
    int folded = 0;
    for (size_t i = 0; i < g->nodes.len; i++)
        folded += g->nodes.data[i].removed;
    assert_true(folded >= 10);
    assert_int_equal(net->tasks.len, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* A MatMul whose result has a unit dimension before its last ([6, 1, 16]: sequence first)
 * accumulates without it, so the tiling space's row axis is the sequence, and matches. */
static void a_sequence_first_matmul_tiles_its_rows(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("seq_first_matmul", &g);
    if (!net)
        skip();
    assert_int_equal(net->tasks.len, 1);
    assert_non_null(strstr(net->tasks.data[0].workload, "float32[6,16]"));
    tt_net_free(net);
    tt_graph_free(g);
}

/* ViT's patch embedding: the Reshape that flattens the Conv's spatial dimensions passes its
 * channels-last layout on (the same memory), so the Conv writes its output channels
 * contiguously; the Transpose into tokens reads that memory in order.  Matches numpy in both
 * layouts and as a library (small_network). */
static void a_patch_embedding_stays_channels_last(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("patch_embed", &g);
    if (!net)
        skip();
    int conv_out = 0, tokens_cf = 0, tokens = 0;
    for (size_t t = 0; t < g->tensors.len; t++) {
        const tt_gtensor *x = &g->tensors.data[t];
        if (x->kind != TT_GT_VALUE)
            continue;
        if (x->rank == 4 && x->dims[1] == 8) {
            assert_true(x->permuted); /* [2, 8, 4, 4] stored [2, 4, 4, 8] */
            assert_int_equal(x->perm[3], 1);
            conv_out++;
        } else if (x->rank == 3 && x->dims[1] == 8 && x->dims[2] == 16) {
            assert_true(x->permuted); /* [2, 8, 16] stored [2, 16, 8]: the Conv's memory */
            assert_int_equal(x->perm[1], 2);
            assert_int_equal(x->perm[2], 1);
            tokens_cf++;
        } else if (x->rank == 3 && x->dims[1] == 16 && x->dims[2] == 8) {
            assert_false(x->permuted); /* the tokens, in the model's order */
            tokens++;
        }
    }
    assert_int_equal(conv_out, 1);
    assert_int_equal(tokens_cf, 1);
    assert_true(tokens >= 1);
    int nhwc = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        nhwc += strncmp(net->tasks.data[i].label, "Conv", 4) == 0 &&
                strstr(net->tasks.data[i].workload, "float32[2,4,4,8]") != NULL;
    assert_int_equal(nhwc, 1);
    tt_net_free(net);
    tt_graph_free(g);
    assert_model_layout_permutes_nothing("patch_embed");
}

/* ConvNeXt's block: the permutes to NHWC and back are views of the channels-last memory around
 * them (no Transpose kernel), the permute back gives the residual stream channels last, which
 * the layer scale and the residual Add keep; a Transpose of a dimension of 1 is a view in the
 * model's layout too.  Matches numpy in both layouts and as a library (small_network). */
static void convnext_permutes_are_views(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("channels_last_permutes", &g);
    if (!net)
        skip();
    assert_int_equal(net->views, 5);
    int back = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->op != TT_GOP_TRANSPOSE)
            continue;
        assert_true(n->view);
        const tt_gtensor *y = &g->tensors.data[n->outputs[0]];
        if (y->rank == 4 && y->dims[1] == 8 && y->dims[2] == 4) { /* [2, 8, 4, 4] */
            assert_true(y->permuted);
            assert_memory_equal(y->perm, ((uint8_t[]){0, 2, 3, 1}), 4);
            back++;
        }
    }
    assert_int_equal(back, 2);
    int residual = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        assert_null(strstr(net->tasks.data[i].label, "Transpose"));
        residual += !strcmp(net->tasks.data[i].label, "Mul+Add") &&
                    strstr(net->tasks.data[i].workload, "out:float32[2,4,4,8]") != NULL;
    }
    assert_int_equal(residual, 1);
    tt_net_free(net);
    tt_graph_free(g);
    net = small_net_in("channels_last_permutes", TT_NET_LAYOUT_MODEL, &g);
    assert_int_equal(net->views, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* The tensor (rank 3 to 5) of network g whose dims are `dims`; it must be there. */
static const tt_gtensor *tensor_of_dims(const tt_graph *g, int rank, const int64_t *dims)
{
    for (size_t t = 0; t < g->tensors.len; t++) {
        const tt_gtensor *x = &g->tensors.data[t];
        if (x->kind == TT_GT_VALUE && x->rank == rank &&
            !memcmp(x->dims, dims, sizeof(int64_t) * (size_t)rank))
            return x;
    }
    fail_msg("no tensor of rank %d with those dims", rank);
    return NULL;
}

/* ShuffleNet's channel shuffle stays channels last: the Concat writes NHWC, the Reshape to
 * [N, 2, C/2, H, W] is that memory stored [N, H, W, 2, C/2], the Transpose swaps the two channel
 * dimensions within each pixel ([N, H, W, C/2, 2]), and the Reshape back is NHWC again, which the
 * Split's slices and the convolution read.  Matches numpy in both layouts and as a library. */
static void a_channel_shuffle_stays_channels_last(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("channel_shuffle", &g);
    if (!net)
        skip();
    static const struct {
        int rank;
        int64_t dims[5];
        uint8_t perm[5];
    } cases[] = {
        {4, {2, 16, 6, 6}, {0, 2, 3, 1}},      /* the Concat, and the shuffle reshaped back */
        {5, {2, 2, 8, 6, 6}, {0, 3, 4, 1, 2}}, /* [N, 2, C/2, H, W] */
        {5, {2, 8, 2, 6, 6}, {0, 3, 4, 1, 2}}, /* the Transpose's output */
        {4, {2, 8, 6, 6}, {0, 2, 3, 1}},       /* a slice */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const tt_gtensor *x = tensor_of_dims(g, cases[i].rank, cases[i].dims);
        assert_true(x->permuted);
        assert_memory_equal(x->perm, cases[i].perm, (size_t)cases[i].rank);
    }
    int shuffles = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        shuffles += !strcmp(net->tasks.data[i].label, "Transpose") &&
                    strstr(net->tasks.data[i].workload, "out:float32[2,6,6,8,2]") &&
                    strstr(net->tasks.data[i].workload, "x0:float32[2,6,6,2,8]");
    assert_int_equal(shuffles, 1);
    tt_net_free(net);
    tt_graph_free(g);
    assert_model_layout_permutes_nothing("channel_shuffle");
}

/* A squeeze-and-excitation scale moves onto the projection's weights (conv(x * s, W) as
 * conv(x, W * s)), which the Mul then writes HWIO, [1, 1, 8, 6]; the scale whose product another
 * node reads stays on the activation.  Matches numpy in both layouts and as a library. */
static void an_se_scale_moves_onto_the_weights(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("se_block", &g);
    if (!net)
        skip();
    assert_int_equal(net->scaled_weights, 1);
    int weights = 0, activation = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        const char *wl = net->tasks.data[i].workload;
        if (strcmp(net->tasks.data[i].label, "Mul"))
            continue;
        weights += strstr(wl, "out:float32[1,1,8,6]") != NULL;
        activation += strstr(wl, "out:float32[1,12,12,8]") != NULL;
    }
    assert_int_equal(weights, 1);
    assert_int_equal(activation, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* At batch 3 the squeeze-and-excitation scale differs per image, so it stays a Mul, and the two
 * 1x1 convolutions over the pooled [3, C, 1, 1] take the batch as their rows: [1, 1, 3, C]
 * channels last, a register tile of images by output-channel vectors rather than one image's
 * scalar dot products.  A 1x1 convolution of the pooled values that is a graph output (the
 * model's order) keeps [3, 5, 1, 1].  Matches numpy in both layouts and as a library. */
static void se_convolutions_take_the_batch_as_rows(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("se_batch", &g);
    if (!net)
        skip();
    assert_int_equal(net->scaled_weights, 0);
    int rows = 0, kept = 0, scales = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        const char *label = net->tasks.data[i].label, *wl = net->tasks.data[i].workload;
        if (!strcmp(label, "Conv+Relu"))
            rows += strstr(wl, "out:float32[1,1,3,4]") && strstr(wl, "x0:float32[1,1,3,8]") &&
                    strstr(wl, "w1:const float32[1,1,8,4]");
        if (!strcmp(label, "Conv+HardSigmoid"))
            rows += strstr(wl, "out:float32[1,1,3,8]") && strstr(wl, "x0:float32[1,1,3,4]");
        if (!strcmp(label, "Conv"))
            kept += strstr(wl, "out:float32[3,5,1,1]") != NULL;
        if (!strcmp(label, "Mul"))
            scales += strstr(wl, "out:float32[3,6,6,8]") != NULL;
    }
    assert_int_equal(rows, 2);
    assert_int_equal(kept, 1);
    assert_int_equal(scales, 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* DeepLabV3's atrous convolutions, scaled down: where padding covers most taps, each is split into
 * regions of its output that read only their taps inside the input (conv_regions.c), joined by
 * Concats.  Dilation 3, 6 (twice, one in 2 groups) and a strided 4 split into 9 regions, the 1-D
 * one dilated by 40 into 3: each region reads the shared 3x3 weights from its first tap on.
 * Dilation 12 keeps the centre tap alone: a 1x1 convolution of sliced weights.  Dilation 1 and
 * the depthwise one stay whole.  Every form matches numpy in both layouts and as a library
 * (small_network). */
static void atrous_convolutions_skip_the_padding(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("atrous_pyramid", &g);
    if (!net)
        skip();
    assert_int_equal(net->region_convs, 6);
    int regions = 0, cropped = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->removed || n->op != TT_GOP_CONV)
            continue;
        const tt_gattr *first = tt_gnode_attr(n, "tvm_tune.first_tap"),
                       *pads = tt_gnode_attr(n, "pads");
        regions += first != NULL;
        for (size_t k = 0; pads && k < pads->n; k++)
            cropped += pads->ints[k] < 0;
        /* a region reads no padding: its pads are crops or none */
        for (size_t k = 0; first && pads && k < pads->n; k++)
            assert_true(pads->ints[k] <= 0);
    }
    assert_int_equal(regions, 4 * 9 + 3);
    assert_true(cropped > 0);
    /* the centre tap of dilation 12, and the two convolutions that stay whole: through their
     * padding (dilation 1 may go Winograd: no vector width is given here) */
    int centre = 0, whole = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        const char *wl = net->tasks.data[i].workload, *label = net->tasks.data[i].label;
        centre += strstr(wl, "w1:const float32[1,1,16,8]") != NULL;
        whole += (strstr(wl, "float32[3,3,16,8]") && strstr(wl, "select(")) ||
                 !strncmp(label, "ConvWinograd", 12);
        whole += strstr(wl, "float32[3,3,1,16]") && strstr(wl, "select(");
    }
    assert_int_equal(centre, 1);
    assert_int_equal(whole, 2);
    tt_net_free(net);
    tt_graph_free(g);
}

/* A model's attribute named as one of tvm-tune's own (tvm_tune.first_tap) is refused at import,
 * naming the node and the attribute: it would change what the region convolutions compute. */
static void reserved_attributes_are_refused(void **state)
{
    (void)state;
    const char *base = models_dir();
    if (!base)
        skip();
    char path[1024];
    snprintf(path, sizeof(path), "%s/bad/reserved_attribute.onnx", base);
    tt_graph *g = NULL;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_graph_import_onnx(path, NULL, &g, &err), TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "Conv_1"));
    assert_non_null(strstr(err.msg, "'tvm_tune.first_tap'"));
    assert_null(g);
}

/* A zero Pad read only by an AveragePool or a Conv becomes the window's pads (the pool counting
 * them), so it is no task of its own; a Pad of ones stays.  Every form matches numpy in both
 * layouts and as a library (small_network). */
static void zero_pads_fold_into_their_windows(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("pad_windows", &g);
    if (!net)
        skip();
    assert_int_equal(net->folded_pads, 2);
    assert_int_equal(task_calls(net, "Pad"), 1);
    assert_int_equal(task_calls(net, "AveragePool"), 2);
    assert_int_equal(task_calls(net, "Conv"), 1);
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->removed || n->op != TT_GOP_AVERAGE_POOL)
            continue;
        /* the first pool reads the input itself, counting its padding; the second the Pad */
        bool folded = n->inputs[0] == g->inputs.data[0];
        int64_t include = 0;
        for (int a = 0; a < n->nattrs; a++)
            if (!strcmp(n->attrs[a].name, "count_include_pad"))
                include = n->attrs[a].i;
        assert_int_equal(include, folded ? 1 : 0);
    }
    tt_net_free(net);
    tt_graph_free(g);
}

/* The Winograd rewrite takes the 3x3, stride-1 convolutions of 48 output tiles or more over a
 * batch of 2: F(4x4, 3x3) padded (tiles past the edge) and not, F(2x2, 3x3) where only its
 * smaller tiles are that many; it leaves a strided one.  Every form matches numpy in both
 * layouts and as a library (small_network).  With no_winograd every convolution stays direct, and
 * so does one of fewer output channels than 3 of the target's vectors. */
static void three_by_three_convolutions_go_winograd(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("winograd_convs", &g);
    if (!net)
        skip();
    assert_int_equal(net->winograd_convs, 3);
    assert_int_equal(task_calls(net, "ConvWinograd+Relu"), 1);
    assert_int_equal(task_calls(net, "ConvWinograd"), 1);
    assert_int_equal(task_calls(net, "Conv"), 1);
    assert_int_equal(task_calls(net, "ConvWinograd+Add"), 1);
    int transformed = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        const char *wl = net->tasks.data[i].workload;
        /* the weights G g G^T [m + 2, m + 2, CI, CO], the tiles of both images */
        transformed +=
            strstr(wl, "const float32[6,6,6,8]") != NULL && strstr(wl, "float32[6,6,70,6]") != NULL;
        transformed +=
            strstr(wl, "const float32[6,6,8,8]") != NULL && strstr(wl, "float32[6,6,48,8]") != NULL;
        transformed +=
            strstr(wl, "const float32[4,4,8,8]") != NULL && strstr(wl, "float32[4,4,48,8]") != NULL;
    }
    assert_int_equal(transformed, 3);
    tt_net_free(net);
    tt_graph_free(g);
    char path[1024];
    snprintf(path, sizeof(path), "%s/winograd_convs/model.onnx", models_dir());
    tt_errbuf err = {{0}};
    tt_net_options direct = {0, TT_NET_LAYOUT_CHANNELS_LAST, true, 0};
    assert_int_equal(tt_graph_import_onnx(path, NULL, &g, &err), TT_OK);
    assert_int_equal(tt_net_build(g, &direct, &net, &err), TT_OK);
    assert_int_equal(net->winograd_convs, 0);
    assert_int_equal(task_calls(net, "Conv+Relu"), 1);
    tt_net_free(net);
    tt_graph_free(g);
    /* Output channels of fewer than 3 of the target's vectors stay direct: these 8 are 3 vectors
     * of 2 lanes and half of AVX2's 8 (and tvm-tune tasks says the same for this machine). */
    static const struct {
        int lanes, rewritten;
    } widths[] = {{2, 3}, {3, 0}, {8, 0}};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
        tt_net_options narrow = {0, TT_NET_LAYOUT_CHANNELS_LAST, false, widths[i].lanes};
        assert_int_equal(tt_graph_import_onnx(path, NULL, &g, &err), TT_OK);
        assert_int_equal(tt_net_build(g, &narrow, &net, &err), TT_OK);
        assert_int_equal(net->winograd_convs, widths[i].rewritten);
        tt_net_free(net);
        tt_graph_free(g);
    }
}

/* Bool tensors computed at run time (comparisons and logical operators of the input, a
 * Transpose of the mask, Where and Cast of it) are computed by kernels, in both layouts and as a
 * library, and match numpy; the mask crosses a kernel boundary as a bool tensor. */
static void run_time_masks_are_computed(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("run_time_masks", &g);
    if (!net)
        skip();
    int bool_tasks = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        bool_tasks += strstr(net->tasks.data[i].workload, ":bool[") != NULL;
    assert_true(bool_tasks >= 2); /* the mask's writer and its reader */
    tt_net_free(net);
    tt_graph_free(g);
}

/* Elementwise diamonds (SiLU, HardSwish) join the convolution whose result they read twice;
 * a Sigmoid whose input a convolution also reads stays a kernel of its own.  All match numpy. */
static void diamond_epilogues_join_their_convolution(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("diamond_epilogues", &g);
    if (!net)
        skip();
    assert_int_equal(task_calls(net, "Conv+Sigmoid+Mul"), 1);
    assert_int_equal(task_calls(net, "Conv+HardSigmoid+Mul"), 1);
    assert_int_equal(task_calls(net, "Sigmoid"), 1);
    assert_int_equal(task_calls(net, "Conv+Add"), 1);
    assert_int_equal(net->calls.len, 5);
    tt_net_free(net);
    tt_graph_free(g);
}

static void a_bert_layer_matches(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("bert_layer", &g);
    if (!net)
        skip();
    /* Q, K and V projections share a task; the feed-forward's first projection has its own,
     * with GELU (x * 0.5 * (1 + erf(x / sqrt 2)): a diamond on x) in its epilogue */
    assert_int_equal(task_calls(net, "MatMul+Add"), 3);
    int qkv = 0;
    for (size_t i = 0; i < net->tasks.len; i++)
        qkv += !strcmp(net->tasks.data[i].label, "MatMul+Add") && net->tasks.data[i].weight == 3;
    assert_int_equal(qkv, 1);
    /* the scaling fused into the scores' MatMul; projections with their residual Add */
    assert_int_equal(task_calls(net, "MatMul+Div"), 1);
    assert_int_equal(task_calls(net, "MatMul+Add+Add"), 2);
    /* the written-out LayerNorm (mean, difference, variance, scaling: four kernels as written)
     * is one LayerNormalization node, beside the model's own */
    assert_int_equal(net->fused_layer_norms, 1);
    assert_int_equal(task_calls(net, "Pow+ReduceMean+Add+Sqrt"), 0);
    assert_int_equal(task_calls(net, "ReduceMean"), 0);
    assert_int_equal(task_calls(net, "MatMul+Add+Div+Erf+Add+Mul+Mul"), 1);
    assert_int_equal(task_calls(net, "Div+Erf+Add+Mul+Mul"), 0);
    assert_int_equal(task_calls(net, "LayerNormalization"), 2);
    /* the Reshapes move nothing */
    assert_int_equal(task_calls(net, "Reshape"), 0);
    tt_net_free(net);
    tt_graph_free(g);
}

/* A kernel that writes a second output (LayerNormalization's Mean) runs before that output's
 * readers: the Relu after its main output does not join it and move it later. */
static void a_second_output_is_ready_for_its_readers(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("layernorm_outputs", &g);
    if (!net)
        skip();
    assert_int_equal(task_calls(net, "LayerNormalization"), 1);
    assert_int_equal(task_calls(net, "Relu+Add"), 1);
    tt_net_free(net);
    tt_graph_free(g);
}

/* The build's report names a task whose vector code gathers lane by lane (run_time_masks'
 * Transpose, which reads across its innermost axis) beside its line of where its schedule came
 * from, and names none in a network without such code (patch_embed). */
static void the_report_names_kernels_that_gather(void **state)
{
    (void)state;
    static const struct {
        const char *model, *want;
    } cases[] = {{"run_time_masks", "Transpose"}, {"patch_embed", NULL}};
    for (int c = 0; c < 2; c++) {
        tt_graph *g;
        tt_net *net = small_net_in(cases[c].model, TT_NET_LAYOUT_CHANNELS_LAST, &g);
        if (!net)
            skip();
        char dir[] = "/tmp/tt-netreport-XXXXXX", prefix[64];
        assert_non_null(mkdtemp(dir));
        snprintf(prefix, sizeof(prefix), "%s/net", dir);
        char *text = NULL;
        size_t len = 0;
        FILE *log = open_memstream(&text, &len);
        assert_non_null(log);
        tt_compile_net_options o = {NULL, NULL, NULL, prefix, "test", false, false, log, NULL};
        tt_compile_net_summary sum;
        tt_errbuf err = {{0}};
        tt_status s = tt_compile_net(&o, net, NULL, &sum, &err);
        fclose(log);
        if (s)
            fail_msg("%s: %s", cases[c].model, err.msg);
        const char *line = strstr(text, "vector code:");
        if (cases[c].want) {
            assert_non_null(line);
            assert_non_null(strstr(line, "gathered lane by lane"));
            const char *start = line;
            while (start > text && start[-1] != '\n')
                start--;
            assert_non_null(strstr(start, cases[c].want));
            assert_true(strstr(start, cases[c].want) < line);
        } else if (line) {
            fail_msg("%s: %s", cases[c].model, text);
        }
        assert_non_null(strstr(text, "default schedule")); /* the per-task lines stay */
        free(text);
        remove_library(prefix);
        rmdir(dir);
        tt_net_free(net);
        tt_graph_free(g);
    }
}

/* Tuned records replace the default schedules (weights packed for the layouts they chose), and
 * the network still computes what numpy says. */
static void tuned_records_build_the_network(void **state)
{
    (void)state;
    tt_graph *g;
    tt_net *net = small_network("resnet_block", &g);
    if (!net)
        skip();
    char db[] = "/tmp/tt-net-XXXXXX";
    assert_non_null(mkdtemp(db));
    char path[256];
    snprintf(path, sizeof(path), "%s/tuning.db", db);
    /* tvm-tune in a process of its own: this one has run OpenMP kernels, and a process that has
     * started libgomp's threads cannot fork a child that starts them again.  --winograd on, as
     * small_network partitions (no target: every 3x3 convolution of enough tiles, where this
     * machine's default leaves the block's 8 channels direct) */
    const char *tvm_tune = getenv("TT_TVM_TUNE");
    if (!tvm_tune)
        skip();
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "%s run --model %s/resnet_block/model.onnx --winograd on --trials 3 --strategy evo "
             "--population 64 --repeat 2 --min-repeat-ms 0 --seed 3 --db %s > %s.log 2>&1",
             tvm_tune, models_dir(), path, path);
    int rc0 = system(cmd);
    if (rc0) {
        snprintf(cmd, sizeof(cmd), "cat %s.log >&2", path);
        (void)!system(cmd);
        fail_msg("tvm-tune run --model failed (%d)", rc0);
    }
    tt_errbuf err = {{0}};
    tt_netexec *x;
    tt_netexec_options xo = {path, NULL, true, NULL};
    if (tt_netexec_create(net, &xo, &x, &err))
        fail_msg("%s", err.msg);
    for (size_t i = 0; i < net->tasks.len; i++)
        assert_int_equal(tt_netexec_report(x, (int)i)->source, TT_COMPILE_EXACT);
    tt_netexec_free(x);
    /* the library's estimate adds the records' medians (the network is timed by its median),
     * and says what their fastest samples add up to */
    char lib[1100];
    snprintf(lib, sizeof(lib), "%s/net", db);
    tt_compile_net_options co = {path, NULL, NULL, lib, "test", true, false, NULL, NULL};
    tt_compile_net_summary sum;
    tt_compile_report *reps = calloc(net->tasks.len, sizeof(*reps));
    assert_non_null(reps);
    if (tt_compile_net(&co, net, reps, &sum, &err))
        fail_msg("%s", err.msg);
    double median = 0, fastest = 0;
    for (size_t i = 0; i < net->tasks.len; i++) {
        assert_true(reps[i].fastest_s > 0 && reps[i].median_s >= reps[i].fastest_s);
        median += net->tasks.data[i].weight * reps[i].median_s;
        fastest += net->tasks.data[i].weight * reps[i].fastest_s;
    }
    assert_true(fabs(sum.estimate_s - median) <= 1e-12 * median);
    assert_true(fabs(sum.estimate_fastest_s - fastest) <= 1e-12 * fastest);
    free(reps);
    snprintf(lib, sizeof(lib), "%s/net", db);
    remove_library(lib);
    tt_net_free(net);
    tt_graph_free(g);
    /* the run itself: the same directory test, now with the database */
    char dir[1024], why[2048] = "";
    snprintf(dir, sizeof(dir), "%s/resnet_block", models_dir());
    int rc =
        run_model(dir, IN_PROCESS, TT_NET_LAYOUT_CHANNELS_LAST, path, why, sizeof(why), NULL, NULL);
    /* the library packs the weights at build time for the layouts the records chose */
    if (!rc)
        rc = run_model(dir, LIBRARY, TT_NET_LAYOUT_CHANNELS_LAST, path, why, sizeof(why), NULL,
                       NULL);
    remove(path);
    snprintf(cmd, sizeof(cmd), "%s.log", path);
    remove(cmd);
    rmdir(db);
    if (rc)
        fail_msg("%s", why);
}

/* ---- where a library's weights live ---- */

/* The library's weights segment: its last PT_LOAD, read-only (.lrodata, placed after .bss). */
typedef struct {
    const char *path;
    uintptr_t start, end;
} weights_segment;

static int find_weights_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    weights_segment *w = data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, w->path))
        return 0;
    const ElfW(Phdr) *last = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD &&
            (!last || info->dlpi_phdr[i].p_vaddr > last->p_vaddr))
            last = &info->dlpi_phdr[i];
    if (last && last->p_flags == PF_R) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        w->start = (info->dlpi_addr + last->p_vaddr) / page * page;
        w->end = (info->dlpi_addr + last->p_vaddr + last->p_memsz + page - 1) / page * page;
    }
    return 1;
}

static void weights_were_read(int sig)
{
    (void)sig;
    _exit(3);
}

/* In a child: loads the library, runs it once (which copies the weights unless
 * TVM_TUNE_WEIGHTS=mapped), makes the library's own weights unreadable and runs it again.  Exit
 * 0: the same outputs without touching them; 3: a kernel read them; 4: the outputs differ;
 * others: a failure on the way. */
static int run_with_mapped_weights_unreadable(const char *so, const tt_graph *g,
                                              int64_t workspace_bytes, bool mapped)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (mapped)
            setenv("TVM_TUNE_WEIGHTS", "mapped", 1);
        else
            unsetenv("TVM_TUNE_WEIGHTS");
        void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        run_buffers_fn run = dl ? (run_buffers_fn)dlsym(dl, "net_run_buffers") : NULL;
        int (*init)(void) = dl ? (int (*)(void))dlsym(dl, "net_init") : NULL;
        if (!run || !init || init() != 0)
            _exit(10);
        void *in[16] = {0}, *out[2][16] = {{0}};
        size_t out_bytes[16] = {0};
        for (size_t i = 0; i < g->inputs.len && i < 16; i++) {
            const tt_gtensor *t = &g->tensors.data[g->inputs.data[i]];
            size_t n = (size_t)tt_gtensor_numel(t) * (size_t)tt_dtype_bytes(t->dtype);
            if (!(in[i] = calloc(n + 1, 1)))
                _exit(11);
            for (size_t k = 0; t->dtype == TT_DT_FLOAT32 && k < n / 4; k++)
                ((float *)in[i])[k] = (float)(k % 13) / 13.0f - 0.5f;
        }
        for (int r = 0; r < 2; r++)
            for (size_t i = 0; i < g->outputs.len && i < 16; i++) {
                const tt_gtensor *t = &g->tensors.data[g->outputs.data[i]];
                out_bytes[i] = (size_t)tt_gtensor_numel(t) * (size_t)tt_dtype_bytes(t->dtype);
                if (!(out[r][i] = calloc(out_bytes[i] + 1, 1)))
                    _exit(11);
            }
        void *ws = aligned_alloc(64, (size_t)workspace_bytes + 64);
        if (!ws || run(ws, (const void *const *)in, out[0]))
            _exit(12);
        weights_segment w = {so, 0, 0};
        dl_iterate_phdr(find_weights_segment, &w);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = weights_were_read;
        if (w.end <= w.start || sigaction(SIGSEGV, &sa, NULL) ||
            mprotect((void *)w.start, w.end - w.start, PROT_NONE))
            _exit(13);
        if (run(ws, (const void *const *)in, out[1]))
            _exit(12);
        for (size_t i = 0; i < g->outputs.len && i < 16; i++)
            if (memcmp(out[0][i], out[1][i], out_bytes[i]))
                _exit(4);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A library copies its weights into the process's own memory at NAME_init (or its first run) and
 * reads them there: the page cache's pages of a large library were 2-3x slower to stream on a
 * virtual machine (docs/models.md, "Where the weights live").  TVM_TUNE_WEIGHTS=mapped reads them
 * where the library is mapped, which the test must see, or it would prove nothing. */
static void library_weights_are_copied_into_process_memory(void **state)
{
    (void)state;
#if !defined(__x86_64__)
    skip(); /* .lrodata, the weights' own segment, is x86-64's */
#endif
    tt_graph *g;
    tt_net *net = small_net_in("resnet_block", TT_NET_LAYOUT_CHANNELS_LAST, &g);
    if (!net)
        skip();
    char dir[] = "/tmp/tt-netw-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char prefix[64], so[96];
    snprintf(prefix, sizeof(prefix), "%s/net", dir);
    snprintf(so, sizeof(so), "%s.so", prefix);
    tt_compile_net_options o = {NULL, NULL, NULL, prefix, "test", false, false, NULL, NULL};
    tt_compile_net_summary sum;
    tt_errbuf err = {{0}};
    if (tt_compile_net(&o, net, NULL, &sum, &err))
        fail_msg("%s", err.msg);
    /* more than a page of weights, so that a page of them is the segment's alone */
    assert_true(sum.weight_bytes > 8192);
    int copied = run_with_mapped_weights_unreadable(so, g, sum.workspace_bytes, false);
    int mapped = run_with_mapped_weights_unreadable(so, g, sum.workspace_bytes, true);
    remove_library(prefix);
    rmdir(dir);
    tt_net_free(net);
    tt_graph_free(g);
    if (copied != 0)
        fail_msg("with the weights copied, a run after net_init %s (child status %d)",
                 copied == 3 ? "read the library's mapped weights" : "failed", copied);
    if (mapped != 3)
        fail_msg("with TVM_TUNE_WEIGHTS=mapped, a run did not read the mapped weights (child "
                 "status %d)",
                 mapped);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(node_tests_compute_the_expected_outputs),
        cmocka_unit_test(a_resnet_block_folds_fuses_and_matches),
        cmocka_unit_test(a_mobilenet_block_shares_tasks_and_matches),
        cmocka_unit_test(layouts_are_channels_last_between_convolutions),
        cmocka_unit_test(a_bert_layer_matches),
        cmocka_unit_test(every_activation_of_the_zoos_matches),
        cmocka_unit_test(a_class_token_folds_and_matches),
        cmocka_unit_test(diamond_epilogues_join_their_convolution),
        cmocka_unit_test(a_patch_embedding_stays_channels_last),
        cmocka_unit_test(convnext_permutes_are_views),
        cmocka_unit_test(a_channel_shuffle_stays_channels_last),
        cmocka_unit_test(an_se_scale_moves_onto_the_weights),
        cmocka_unit_test(se_convolutions_take_the_batch_as_rows),
        cmocka_unit_test(three_by_three_convolutions_go_winograd),
        cmocka_unit_test(zero_pads_fold_into_their_windows),
        cmocka_unit_test(atrous_convolutions_skip_the_padding),
        cmocka_unit_test(reserved_attributes_are_refused),
        cmocka_unit_test(run_time_masks_are_computed),
        cmocka_unit_test(more_operators_of_the_zoos_match),
        cmocka_unit_test(opset_18_operators_match),
        cmocka_unit_test(opsets_19_to_22_match),
        cmocka_unit_test(a_shifted_window_mask_folds_and_matches),
        cmocka_unit_test(a_sequence_first_matmul_tiles_its_rows),
        cmocka_unit_test(a_second_output_is_ready_for_its_readers),
        cmocka_unit_test(the_report_names_kernels_that_gather),
        cmocka_unit_test(tuned_records_build_the_network),
        cmocka_unit_test(library_weights_are_copied_into_process_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
