/* Pads into the windows that read them.  A model exported with an explicit zero Pad before a
 * convolution or an average pool (torch's avg_pool2d with count_include_pad, as Inception-V3's
 * branch pools; TensorFlow's converters before every strided convolution) ran the Pad as a task
 * of its own: one more pass over the activation, written and read again (Inception-V3: nine
 * Pads, 0.03-0.07 ms each).  A Conv or AveragePool reads a padded input through its own pads
 * attribute for nothing (te_write.c: a guarded load), so the Pad's amounts go there:
 *
 *   Conv(Pad(x, p, 0), pads q)                        = Conv(x, pads p + q)
 *   AveragePool(Pad(x, p, 0), no pads)                = AveragePool(x, pads p, count_include_pad 1)
 *
 * Only a constant Pad of zeros, of the spatial dimensions alone (not the batch or the channels),
 * by non-negative amounts, whose output is read by that one node and is no graph output; the
 * window's auto_pad NOTSET (explicit pads).  A pool that already pads is left (its divisor counts
 * its own pads differently from the Pad's zeros). */
#include <string.h>

#include "net_int.h"

/* Whether Pad node p pads with zeros (its constant_value input, or before opset 11 its value
 * attribute). */
static bool pads_zeros(const tt_graph *g, const tt_gnode *p)
{
    if (strcmp(tt__attr_str(p, "mode", "constant"), "constant"))
        return false;
    if (tt__attr_float(p, "value", 0.0) != 0.0)
        return false;
    if (p->ninputs < 3 || p->inputs[2] < 0)
        return true;
    const tt_gtensor *v = &g->tensors.data[p->inputs[2]];
    return v->kind == TT_GT_CONST && tt_gtensor_numel(v) == 1 && tt__gtensor_value(v, 0) == 0.0;
}

/* Sets attribute v of node n (its name and value; ints are copied into the graph's arena),
 * replacing one of the same name or adding it. */
static tt_status set_attr(tt_graph *g, tt_gnode *n, tt_gattr v, tt_errbuf *err)
{
    if (v.kind == TT_GATTR_INTS) {
        int64_t *copy = tt_arena_alloc(&g->arena, v.n * sizeof(int64_t));
        if (!copy)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        memcpy(copy, v.ints, v.n * sizeof(int64_t));
        v.ints = copy;
    }
    for (int a = 0; a < n->nattrs; a++)
        if (!strcmp(n->attrs[a].name, v.name)) {
            v.name = n->attrs[a].name;
            n->attrs[a] = v;
            return TT_OK;
        }
    tt_gattr *at = tt_arena_alloc(&g->arena, (size_t)(n->nattrs + 1) * sizeof(tt_gattr));
    if (!at || !(v.name = tt_arena_strdup(&g->arena, v.name)))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (n->nattrs)
        memcpy(at, n->attrs, (size_t)n->nattrs * sizeof(tt_gattr));
    at[n->nattrs] = v;
    n->attrs = at;
    n->nattrs++;
    return TT_OK;
}

/* Folds Pad node `pi` into its reader where it can; *folded says whether it did. */
static tt_status fold_at(tt_graph *g, int pi, bool *folded, tt_errbuf *err)
{
    *folded = false;
    const tt_gnode *p = &g->nodes.data[pi];
    if (p->ninputs < 1 || p->inputs[0] < 0 || p->noutputs < 1 || p->outputs[0] < 0 ||
        !pads_zeros(g, p))
        return TT_OK;
    const tt_gtensor *x = &g->tensors.data[p->inputs[0]];
    int rank = x->rank, nk = rank - 2;
    int64_t amounts[2 * TT_GRAPH_MAX_RANK];
    if (nk < 1 || !tt__graph_pad_amounts(g, pi, amounts))
        return TT_OK;
    for (int d = 0; d < rank; d++)
        if (amounts[d] < 0 || amounts[rank + d] < 0 || (d < 2 && (amounts[d] || amounts[rank + d])))
            return TT_OK;
    int ri = tt__net_only_reader(g, p->outputs[0]);
    if (ri < 0 || g->nodes.data[ri].inputs[0] != p->outputs[0])
        return TT_OK;
    tt_gnode *r = &g->nodes.data[ri];
    if ((r->op != TT_GOP_CONV && r->op != TT_GOP_AVERAGE_POOL) ||
        strcmp(tt__attr_str(r, "auto_pad", "NOTSET"), "NOTSET"))
        return TT_OK;
    size_t have = 0;
    const int64_t *old = tt__attr_ints(r, "pads", &have);
    if (old && have != (size_t)(2 * nk))
        return TT_OK;
    int64_t pads[2 * TT_GRAPH_MAX_RANK];
    bool pool_pads = false;
    for (int i = 0; i < nk; i++) {
        pads[i] = amounts[2 + i] + (old ? old[i] : 0);
        pads[nk + i] = amounts[rank + 2 + i] + (old ? old[nk + i] : 0);
        pool_pads |= old && (old[i] || old[nk + i]);
    }
    if (r->op == TT_GOP_AVERAGE_POOL && pool_pads)
        return TT_OK;
    tt_gattr pa = {.name = (char *)"pads", .kind = TT_GATTR_INTS, .ints = pads, .n = 2 * nk};
    tt_gattr ci = {.name = (char *)"count_include_pad", .kind = TT_GATTR_INT, .i = 1};
    tt_status s = set_attr(g, r, pa, err);
    if (!s && r->op == TT_GOP_AVERAGE_POOL)
        s = set_attr(g, r, ci, err);
    if (s)
        return s;
    r->inputs[0] = g->nodes.data[pi].inputs[0];
    g->nodes.data[pi].removed = true;
    *folded = true;
    return TT_OK;
}

tt_status tt__net_fold_pads(tt_graph *g, int *folded, tt_errbuf *err)
{
    *folded = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        if (g->nodes.data[i].removed || g->nodes.data[i].op != TT_GOP_PAD)
            continue;
        bool one;
        tt_status s = fold_at(g, (int)i, &one, err);
        if (s)
            return s;
        *folded += one;
    }
    return TT_OK;
}
