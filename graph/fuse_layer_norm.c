/* LayerNormalization written out in elementwise operators, as exporters before opset 17 write it
 * (torch.onnx.export of nn.LayerNorm at opset 13):
 *
 *     m = ReduceMean(x, axes=[-1]);  d = Sub(x, m);  v = ReduceMean(Pow(d, 2), axes=[-1])
 *     y = Div(d, Sqrt(Add(v, eps)))  [ * gamma ]  [ + beta ]
 *
 * (from opset 18 the means' axes are an input),
 *
 * becomes one LayerNormalization node (axis -1, epsilon eps), as ONNX Runtime's LayerNormFusion
 * does.  Partitioned as written it was four kernels per normalisation (the mean; the difference,
 * read twice; the variance; the scaling), each a few microseconds of work behind a parallel loop:
 * ViT-B/16's 25 of them took 2.4 ms in the network for 0.6 ms of work.  One node is one row
 * kernel (tuner/space.c).  Only when every intermediate has no other reader and is no graph
 * output. */
#include <string.h>

#include "net_int.h"

/* The live node reading tensor t as its input `k`, when it is `op`; else -1. */
static int reader_at(const tt_graph *g, int t, tt_gop op, int k)
{
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (!n->removed && n->op == op && k < n->ninputs && n->inputs[k] == t)
            return (int)i;
    }
    return -1;
}

/* The one reader of tensor t, when it is `op` and t is no graph output; else -1. */
static int only_reader(const tt_graph *g, int t, tt_gop op)
{
    int r = tt__net_only_reader(g, t);
    return r >= 0 && g->nodes.data[r].op == op ? r : -1;
}

/* A constant of one element, its value in *v. */
static bool scalar_const(const tt_graph *g, int t, double *v)
{
    if (t < 0 || g->tensors.data[t].kind != TT_GT_CONST ||
        tt_gtensor_numel(&g->tensors.data[t]) != 1)
        return false;
    *v = tt__gtensor_value(&g->tensors.data[t], 0);
    return true;
}

/* A mean over the last axis that keeps it, of tensor x (rank r). */
static bool last_axis_mean(const tt_graph *g, const tt_gnode *n, int x)
{
    if (n->op != TT_GOP_REDUCE_MEAN || n->removed || n->inputs[0] != x ||
        tt__attr_int(n, "keepdims", 1) != 1)
        return false;
    bool reduced[TT_GRAPH_MAX_RANK];
    int r = g->tensors.data[x].rank;
    /* axes an attribute, or from opset 18 an input */
    if (r < 1 || !tt__graph_reduce_axes(g, (int)(n - g->nodes.data), reduced))
        return false;
    for (int d = 0; d < r; d++)
        if (reduced[d] != (d == r - 1))
            return false;
    return true;
}

/* The other input of binary node n than t, when one of its two inputs is t. */
static int other_input(const tt_gnode *n, int t)
{
    if (n->ninputs != 2)
        return -2;
    return n->inputs[0] == t ? n->inputs[1] : n->inputs[1] == t ? n->inputs[0] : -2;
}

/* A per-channel constant of the normalised axis, [C]: LayerNormalization's scale and bias. */
static bool channel_const(const tt_graph *g, int t, int64_t c)
{
    if (t < 0 || g->tensors.data[t].kind != TT_GT_CONST)
        return false;
    const tt_gtensor *k = &g->tensors.data[t];
    return k->rank == 1 && k->dims[0] == c;
}

static tt_status fuse_at(tt_graph *g, int r1, bool *fused, tt_errbuf *err)
{
    *fused = false;
    const tt_gnode *R1 = &g->nodes.data[r1];
    int x = R1->inputs[0], m = R1->outputs[0];
    const tt_gtensor *X = &g->tensors.data[x];
    if (!tt_dtype_is_float(X->dtype) || X->rank < 1)
        return TT_OK;
    int64_t C = X->dims[X->rank - 1];
    int s = only_reader(g, m, TT_GOP_SUB);
    if (s < 0 || g->nodes.data[s].inputs[0] != x || g->nodes.data[s].inputs[1] != m)
        return TT_OK;
    int d = g->nodes.data[s].outputs[0];
    /* d is read twice: squared for the variance, and divided */
    int pw = reader_at(g, d, TT_GOP_POW, 0), dv = reader_at(g, d, TT_GOP_DIV, 0);
    double two, eps;
    if (tt__net_readers(g, d) != 2 || pw < 0 || dv < 0 ||
        !scalar_const(g, g->nodes.data[pw].inputs[1], &two) || two != 2.0)
        return TT_OK;
    int r2 = only_reader(g, g->nodes.data[pw].outputs[0], TT_GOP_REDUCE_MEAN);
    if (r2 < 0 || !last_axis_mean(g, &g->nodes.data[r2], g->nodes.data[pw].outputs[0]))
        return TT_OK;
    int v = g->nodes.data[r2].outputs[0];
    int add = only_reader(g, v, TT_GOP_ADD);
    if (add < 0 || !scalar_const(g, other_input(&g->nodes.data[add], v), &eps) || eps < 0)
        return TT_OK;
    int sq = only_reader(g, g->nodes.data[add].outputs[0], TT_GOP_SQRT);
    if (sq < 0 || only_reader(g, g->nodes.data[sq].outputs[0], TT_GOP_DIV) != dv ||
        g->nodes.data[dv].inputs[1] != g->nodes.data[sq].outputs[0])
        return TT_OK;
    /* optional scale and shift, per channel of the normalised axis */
    int last = dv, gamma = -1, beta = -1;
    int mul = only_reader(g, g->nodes.data[dv].outputs[0], TT_GOP_MUL);
    if (mul >= 0 &&
        channel_const(g, other_input(&g->nodes.data[mul], g->nodes.data[dv].outputs[0]), C)) {
        gamma = other_input(&g->nodes.data[mul], g->nodes.data[dv].outputs[0]);
        last = mul;
        int sh = only_reader(g, g->nodes.data[mul].outputs[0], TT_GOP_ADD);
        if (sh >= 0 &&
            channel_const(g, other_input(&g->nodes.data[sh], g->nodes.data[mul].outputs[0]), C)) {
            beta = other_input(&g->nodes.data[sh], g->nodes.data[mul].outputs[0]);
            last = sh;
        }
    }
    if (gamma >= 0 && g->tensors.data[gamma].dtype != X->dtype)
        return TT_OK;
    if (beta >= 0 && g->tensors.data[beta].dtype != X->dtype)
        return TT_OK;
    if (gamma < 0) { /* LayerNormalization's scale is not optional */
        char name[300];
        snprintf(name, sizeof(name), "%s.layer_norm_scale", X->name);
        if ((gamma = tt__net_new_const(g, name, X->dtype, 1, &C)) < 0)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        for (int64_t c = 0; c < C; c++)
            tt__gtensor_set(&g->tensors.data[gamma], c, 1.0);
    }
    int *in = tt_arena_alloc(&g->arena, 3 * sizeof(int));
    tt_gattr *at = tt_arena_alloc(&g->arena, 2 * sizeof(tt_gattr));
    char *axis = tt_arena_strdup(&g->arena, "axis"),
         *epsilon = tt_arena_strdup(&g->arena, "epsilon");
    if (!in || !at || !axis || !epsilon)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    memset(at, 0, 2 * sizeof(tt_gattr));
    at[0].name = axis, at[0].kind = TT_GATTR_INT, at[0].i = -1;
    at[1].name = epsilon, at[1].kind = TT_GATTR_FLOAT, at[1].f = (float)eps;
    in[0] = x, in[1] = gamma, in[2] = beta;
    /* the last node computes the whole normalisation; the others go */
    const int parts[] = {r1, s, pw, r2, add, sq, dv, mul};
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
        if (parts[k] >= 0 && parts[k] != last && (parts[k] != mul || last != dv))
            g->nodes.data[parts[k]].removed = true;
    tt_gnode *L = &g->nodes.data[last];
    L->op = TT_GOP_LAYER_NORM;
    L->inputs = in;
    L->ninputs = beta >= 0 ? 3 : 2;
    L->attrs = at;
    L->nattrs = 2;
    *fused = true;
    return TT_OK;
}

tt_status tt__net_fuse_layer_norms(tt_graph *g, int *fused, tt_errbuf *err)
{
    *fused = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->removed || n->op != TT_GOP_REDUCE_MEAN || !last_axis_mean(g, n, n->inputs[0]))
            continue;
        bool one;
        tt_status s = fuse_at(g, (int)i, &one, err);
        if (s)
            return s;
        *fused += one;
    }
    return TT_OK;
}
