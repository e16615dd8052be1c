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

int tt__net_readers(const tt_graph *g, int t)
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

int tt__net_only_reader(const tt_graph *g, int t)
{
    if (tt__net_readers(g, t) != 1)
        return -1;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        for (int k = 0; !n->removed && k < n->ninputs; k++)
            if (n->inputs[k] == t)
                return (int)i;
    }
    return -1; /* a graph output */
}

int tt__net_new_const(tt_graph *g, const char *name, tt_dtype dt, int rank, const int64_t *dims)
{
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

void tt__batchnorm_affine(const tt_graph *g, const tt_gnode *bn, int64_t c, double *scale,
                          double *shift)
{
    const tt_gtensor *t = g->tensors.data;
    double eps = tt__attr_float(bn, "epsilon", 1e-5);
    *scale = tt__gtensor_value(&t[bn->inputs[1]], c) /
             sqrt(tt__gtensor_value(&t[bn->inputs[4]], c) + eps);
    *shift =
        tt__gtensor_value(&t[bn->inputs[2]], c) - tt__gtensor_value(&t[bn->inputs[3]], c) * *scale;
}

static tt_status fold_one(tt_graph *g, int bn, int conv, tt_errbuf *err)
{
    tt_gnode *B = &g->nodes.data[bn], *C = &g->nodes.data[conv];
    int w = C->inputs[1], b = C->ninputs > 2 ? C->inputs[2] : -1;
    const tt_gtensor *W = &g->tensors.data[w];
    tt_dtype dt = W->dtype;
    int64_t CO = W->dims[0], per = tt_gtensor_numel(W) / CO;
    char name[256];
    snprintf(name, sizeof(name), "%s.bn_folded", W->name);
    int nw = tt__net_new_const(g, name, dt, W->rank, W->dims);
    snprintf(name, sizeof(name), "%s.bn_bias", g->tensors.data[w].name);
    int nb = nw >= 0 ? tt__net_new_const(g, name, dt, 1, &CO) : -1;
    if (nb < 0)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* pointers after the pushes: the tensor vector may have moved */
    W = &g->tensors.data[w];
    const tt_gtensor *bias = b >= 0 ? &g->tensors.data[b] : NULL;
    tt_gtensor *NW = &g->tensors.data[nw], *NB = &g->tensors.data[nb];
    for (int64_t co = 0; co < CO; co++) {
        double a, shift;
        tt__batchnorm_affine(g, B, co, &a, &shift);
        for (int64_t k = 0; k < per; k++)
            tt__gtensor_set(NW, co * per + k, tt__gtensor_value(W, co * per + k) * a);
        tt__gtensor_set(NB, co, (bias ? tt__gtensor_value(bias, co) : 0) * a + shift);
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
        if (C->removed || C->op != TT_GOP_CONV || C->outputs[0] != x || tt__net_readers(g, x) != 1)
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
