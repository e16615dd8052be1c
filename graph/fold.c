/* BatchNormalization folded into the convolution before it: inference-time statistics are
 * constants, so y = (conv(x, W) + B - m) * s / sqrt(v + eps) + beta is conv(x, W') + B' with
 * W' = W * a[co] and B' = (B - m) * a[co] + beta, a = s / sqrt(v + eps).  One multiply-add per
 * output element less, and the convolution's task is the same as the unnormalised one's. */
#include <math.h>
#include <string.h>

#include "net_int.h"

static bool is_float_const(const tt_graph *g, int t, tt_dtype dt)
{
    return t >= 0 && g->tensors.data[t].kind == TT_GT_CONST && g->tensors.data[t].dtype == dt;
}

static double value(const tt_gtensor *t, int64_t i)
{
    return t->dtype == TT_DT_FLOAT32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static void set(void *data, tt_dtype dt, int64_t i, double v)
{
    if (dt == TT_DT_FLOAT32)
        ((float *)data)[i] = (float)v;
    else
        ((double *)data)[i] = v;
}

/* Readers of tensor t among the live nodes, and whether it is a graph output. */
static int readers(const tt_graph *g, int t)
{
    int n = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *nd = &g->nodes.data[i];
        if (nd->removed)
            continue;
        for (int k = 0; k < nd->ninputs; k++)
            n += nd->inputs[k] == t;
    }
    for (size_t i = 0; i < g->outputs.len; i++)
        n += g->outputs.data[i] == t;
    return n;
}

/* A new constant tensor of `n` values of dt, named after `base`. */
static int new_const(tt_graph *g, const char *base, const char *suffix, tt_dtype dt, int rank,
                     const int64_t *dims)
{
    char name[256];
    snprintf(name, sizeof(name), "%s%s", base, suffix);
    int t = tt__graph_add_tensor(g, name, TT_GT_CONST);
    if (t < 0)
        return -1;
    tt_gtensor *x = &g->tensors.data[t];
    x->dtype = dt;
    x->rank = rank;
    memcpy(x->dims, dims, sizeof(int64_t) * (size_t)rank);
    size_t bytes = (size_t)tt_gtensor_numel(x) * (size_t)tt_dtype_bytes(dt);
    if (!(x->data = tt_arena_alloc(&g->arena, bytes ? bytes : 1)))
        return -1;
    return t;
}

static tt_status fold_one(tt_graph *g, int bn, int conv, tt_errbuf *err)
{
    tt_gnode *B = &g->nodes.data[bn], *C = &g->nodes.data[conv];
    int w = C->inputs[1], b = C->ninputs > 2 ? C->inputs[2] : -1;
    const tt_gtensor *W = &g->tensors.data[w];
    tt_dtype dt = W->dtype;
    const tt_gattr *ea = tt_gnode_attr(B, "epsilon");
    double eps = ea && ea->kind == TT_GATTR_FLOAT ? ea->f : 1e-5;
    int64_t CO = W->dims[0], per = tt_gtensor_numel(W) / CO;
    int nw = new_const(g, W->name, ".bn_folded", dt, W->rank, W->dims);
    int nb = nw >= 0 ? new_const(g, W->name, ".bn_bias", dt, 1, &CO) : -1;
    if (nb < 0)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* pointers after the pushes: the tensor vector may have moved */
    W = &g->tensors.data[w];
    const tt_gtensor *s = &g->tensors.data[B->inputs[1]], *beta = &g->tensors.data[B->inputs[2]],
                     *m = &g->tensors.data[B->inputs[3]], *v = &g->tensors.data[B->inputs[4]];
    const tt_gtensor *bias = b >= 0 ? &g->tensors.data[b] : NULL;
    tt_gtensor *NW = &g->tensors.data[nw], *NB = &g->tensors.data[nb];
    for (int64_t co = 0; co < CO; co++) {
        double a = value(s, co) / sqrt(value(v, co) + eps);
        for (int64_t k = 0; k < per; k++)
            set(NW->data, dt, co * per + k, value(W, co * per + k) * a);
        set(NB->data, dt, co, ((bias ? value(bias, co) : 0) - value(m, co)) * a + value(beta, co));
    }
    int *in = tt_arena_alloc(&g->arena, 3 * sizeof(int));
    if (!in)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    in[0] = C->inputs[0], in[1] = nw, in[2] = nb;
    C->inputs = in;
    C->ninputs = 3;
    /* the convolution now produces the normalisation's output */
    int y = B->outputs[0];
    g->tensors.data[C->outputs[0]].producer = -1;
    C->outputs[0] = y;
    g->tensors.data[y].producer = conv;
    B->removed = true;
    return TT_OK;
}

tt_status tt__net_fold_batchnorm(tt_graph *g, int *folded, tt_errbuf *err)
{
    *folded = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *B = &g->nodes.data[i];
        if (B->removed || B->op != TT_GOP_BATCH_NORM || B->ninputs < 5)
            continue;
        int x = B->inputs[0];
        int conv = g->tensors.data[x].producer;
        if (conv < 0)
            continue;
        const tt_gnode *C = &g->nodes.data[conv];
        if (C->removed || C->op != TT_GOP_CONV || C->outputs[0] != x || readers(g, x) != 1)
            continue;
        tt_dtype dt = g->tensors.data[x].dtype;
        if (dt != TT_DT_FLOAT32 && dt != TT_DT_FLOAT64)
            continue;
        bool consts = is_float_const(g, C->inputs[1], dt) &&
                      (C->ninputs < 3 || C->inputs[2] < 0 || is_float_const(g, C->inputs[2], dt));
        for (int k = 1; k <= 4; k++)
            consts = consts && is_float_const(g, B->inputs[k], dt);
        if (!consts)
            continue;
        tt_status s = fold_one(g, (int)i, conv, err);
        if (s)
            return s;
        ++*folded;
    }
    return TT_OK;
}
