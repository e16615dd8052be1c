/* Shape inference, node by node in the file's (topological) order, by ONNX's rules for opsets
 * 11-22; integer shape arithmetic whose inputs are constant is folded as it goes, so that the
 * shape a Reshape reads is known by the time it is reached. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph_int.h"

/* Folded constants stay small: shape arithmetic, not weights. */
enum { FOLD_MAX_ELEMS = 4096 };

typedef struct {
    tt_graph *g;
    int node;
    tt_errbuf *err;
} ctx;

#define FAIL(c, ...)                                                                               \
    tt__graph_node_err((c)->g, (c)->node, (c)->err, TT_ERR_BAD_WORKLOAD, __VA_ARGS__)

static tt_gnode *node_of(const ctx *c)
{
    return &c->g->nodes.data[c->node];
}

/* Input i of the node, or NULL when it is left out or beyond the node's inputs. */
static tt_gtensor *in(const ctx *c, int i)
{
    const tt_gnode *n = node_of(c);
    return i < n->ninputs && n->inputs[i] >= 0 ? &c->g->tensors.data[n->inputs[i]] : NULL;
}

static tt_gtensor *out(const ctx *c, int i)
{
    const tt_gnode *n = node_of(c);
    return i < n->noutputs && n->outputs[i] >= 0 ? &c->g->tensors.data[n->outputs[i]] : NULL;
}

static int64_t attr_int(const ctx *c, const char *name, int64_t def)
{
    return tt__attr_int(node_of(c), name, def);
}

static const int64_t *attr_ints(const ctx *c, const char *name, size_t *n)
{
    return tt__attr_ints(node_of(c), name, n);
}

static const char *attr_str(const ctx *c, const char *name, const char *def)
{
    return tt__attr_str(node_of(c), name, def);
}

static void set_shape(tt_gtensor *t, tt_dtype dt, int rank, const int64_t *dims)
{
    t->dtype = dt;
    t->rank = rank;
    memmove(t->dims, dims, sizeof(int64_t) * (size_t)rank);
}

/* An integer constant input read as int64 values into v (*n of them); an error naming it when it
 * is not one. */
static tt_status const_ints(const ctx *c, int i, const char *what, int64_t *v, int *n, int max)
{
    const tt_gtensor *t = in(c, i);
    if (t && t->kind != TT_GT_CONST)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "%s (input %d, '%s') is computed at run time; networks are built "
                                  "for static shapes (give the input's value to import)",
                                  what, i, t->name);
    if (!t || (t->dtype != TT_DT_INT64 && t->dtype != TT_DT_INT32))
        return FAIL(c, "%s (input %d) must be a constant integer tensor", what, i);
    int64_t numel = tt_gtensor_numel(t);
    if (numel > max)
        return FAIL(c, "%s (input %d) has %lld values, at most %d", what, i, (long long)numel, max);
    for (int64_t k = 0; k < numel; k++)
        v[k] =
            t->dtype == TT_DT_INT64 ? ((const int64_t *)t->data)[k] : ((const int32_t *)t->data)[k];
    *n = (int)numel;
    return TT_OK;
}

/* Normalises axis a of a rank-r tensor (negative counts from the end). */
static tt_status axis_of(const ctx *c, int64_t a, int r, int *out_axis)
{
    if (a < -r || a >= r || (r == 0 && a != 0))
        return FAIL(c, "axis %lld is out of range for rank %d", (long long)a, r);
    *out_axis = (int)(a < 0 ? a + r : a);
    return TT_OK;
}

/* ---- broadcasting ---- */

static tt_status broadcast(const ctx *c, const tt_gtensor *a, const tt_gtensor *b, int *rank,
                           int64_t *dims)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return FAIL(c,
                        "shapes do not broadcast: dimension %d is %lld in '%s' and %lld in "
                        "'%s'",
                        i, (long long)da, a->name, (long long)db, b->name);
        dims[i] = da == 1 ? db : da;
    }
    *rank = r;
    return TT_OK;
}

/* ---- sliding windows: Conv, pools ---- */

/* The window of a Conv or pool over x's dims from 2 on: sizes, strides, dilations and the pads
 * with auto_pad applied, and the output sizes.  Ceil mode's last window may overhang the end pad;
 * the overhang is left for the lowering (pools read it as padding but do not count it). */
/* The window of a Conv or pool.  Pads are >= 0 in a model; `crop` also takes negative ones, a crop
 * of the input, which only the networks' own rewrites write (conv_regions.c). */
static tt_status window(const ctx *c, const tt_gtensor *x, const int64_t *kernel, int nk, bool crop,
                        tt__window *w)
{
    size_t ns, nd, np;
    const int64_t *strides = attr_ints(c, "strides", &ns), *dil = attr_ints(c, "dilations", &nd),
                  *pads = attr_ints(c, "pads", &np);
    const char *autopad = attr_str(c, "auto_pad", "NOTSET");
    bool ceil_mode = attr_int(c, "ceil_mode", 0) != 0;
    if ((ns && ns != (size_t)nk) || (nd && nd != (size_t)nk) || (np && np != 2 * (size_t)nk))
        return FAIL(c, "strides, dilations and pads must have %d, %d and %d values", nk, nk,
                    2 * nk);
    memset(w, 0, sizeof(*w));
    w->nk = nk;
    for (int i = 0; i < nk; i++) {
        int64_t in_d = x->dims[2 + i], s = ns ? strides[i] : 1, d = nd ? dil[i] : 1;
        int64_t pb = np ? pads[i] : 0, pe = np ? pads[nk + i] : 0;
        if (s < 1 || d < 1 || kernel[i] < 1 || (!crop && (pb < 0 || pe < 0)) || in_d + pb < 0 ||
            in_d + pe < 0)
            return FAIL(c, "strides, dilations and the kernel must be >= 1, pads >= 0");
        int64_t eff = d * (kernel[i] - 1) + 1;
        int64_t o;
        if (!strcmp(autopad, "SAME_UPPER") || !strcmp(autopad, "SAME_LOWER")) {
            o = (in_d + s - 1) / s;
            int64_t total = (o - 1) * s + eff - in_d;
            total = total < 0 ? 0 : total;
            /* SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning */
            pb = !strcmp(autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
            pe = total - pb;
        } else if (!strcmp(autopad, "VALID")) {
            o = in_d >= eff ? (in_d - eff) / s + 1 : 0;
            pb = pe = 0;
        } else if (!strcmp(autopad, "NOTSET")) {
            int64_t span = in_d + pb + pe - eff;
            o = span < 0 ? 0 : (ceil_mode ? (span + s - 1) / s : span / s) + 1;
            /* ceil mode: the last window must start inside the input or its left padding */
            if (ceil_mode && span >= 0 && (o - 1) * s >= in_d + pb)
                o--;
        } else
            return FAIL(c, "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                        autopad);
        if (o < 1)
            return FAIL(c,
                        "the window (%lld with dilation %lld) is larger than the padded input "
                        "(%lld) in spatial dimension %d",
                        (long long)kernel[i], (long long)d, (long long)(in_d + pb + pe), i);
        w->kernel[i] = kernel[i];
        w->stride[i] = s;
        w->dilation[i] = d;
        w->pad_begin[i] = pb;
        w->pad_end[i] = pe;
        w->out[i] = o;
    }
    return TT_OK;
}

static tt_status infer_conv(const ctx *c)
{
    const tt_gtensor *x = in(c, 0), *w = in(c, 1), *b = in(c, 2);
    if (!x || !w)
        return FAIL(c, "needs inputs X and W");
    if (x->rank < 3 || w->rank != x->rank)
        return FAIL(c, "X (rank %d) and W (rank %d) must have the same rank, at least 3", x->rank,
                    w->rank);
    int64_t group = attr_int(c, "group", 1);
    int nk = x->rank - 2;
    size_t nks;
    const int64_t *ks = attr_ints(c, "kernel_shape", &nks);
    if (ks && nks != (size_t)nk)
        return FAIL(c, "kernel_shape has %zu values for %d spatial dimensions", nks, nk);
    if (group < 1 || x->dims[1] != w->dims[1] * group || w->dims[0] % group)
        return FAIL(c, "channels do not fit the groups: X has %lld, W %lldx%lld, group %lld",
                    (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1],
                    (long long)group);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return FAIL(c, "the bias must have %lld values", (long long)w->dims[0]);
    int64_t dims[TT_GRAPH_MAX_RANK] = {x->dims[0], w->dims[0]};
    tt__window win;
    tt_status s = window(c, x, ks ? ks : w->dims + 2, nk, false, &win);
    if (s)
        return s;
    memcpy(dims + 2, win.out, sizeof(int64_t) * (size_t)nk);
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return TT_OK;
}

static tt_status infer_conv_transpose(const ctx *c)
{
    const tt_gtensor *x = in(c, 0), *w = in(c, 1);
    if (!x || !w || x->rank < 3 || w->rank != x->rank)
        return FAIL(c, "X and W must have the same rank, at least 3");
    int64_t group = attr_int(c, "group", 1);
    int nk = x->rank - 2;
    if (group < 1 || x->dims[1] != w->dims[0])
        return FAIL(c, "W's first dimension (%lld) must be X's channels (%lld)",
                    (long long)w->dims[0], (long long)x->dims[1]);
    size_t ns, nd, np, nop, nos, nks;
    const int64_t *strides = attr_ints(c, "strides", &ns), *dil = attr_ints(c, "dilations", &nd),
                  *pads = attr_ints(c, "pads", &np), *opad = attr_ints(c, "output_padding", &nop),
                  *oshape = attr_ints(c, "output_shape", &nos),
                  *ks = attr_ints(c, "kernel_shape", &nks);
    const char *autopad = attr_str(c, "auto_pad", "NOTSET");
    int64_t dims[TT_GRAPH_MAX_RANK] = {x->dims[0], w->dims[1] * group};
    for (int i = 0; i < nk; i++) {
        int64_t s = ns > (size_t)i ? strides[i] : 1, d = nd > (size_t)i ? dil[i] : 1;
        int64_t k = nks > (size_t)i ? ks[i] : w->dims[2 + i];
        int64_t o;
        if (nos)
            o = oshape[nos - (size_t)nk + (size_t)i];
        else if (!strcmp(autopad, "SAME_UPPER") || !strcmp(autopad, "SAME_LOWER"))
            o = x->dims[2 + i] * s;
        else
            o = s * (x->dims[2 + i] - 1) + (nop > (size_t)i ? opad[i] : 0) + (k - 1) * d + 1 -
                (np ? pads[i] + pads[nk + i] : 0);
        if (o < 1)
            return FAIL(c, "the output would be empty in spatial dimension %d", i);
        dims[2 + i] = o;
    }
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return TT_OK;
}

static tt_status pool_shape(const ctx *c, bool global)
{
    const tt_gtensor *x = in(c, 0);
    if (!x || x->rank < 3)
        return FAIL(c, "X must have rank 3 or more (N, C, spatial...)");
    int nk = x->rank - 2;
    int64_t dims[TT_GRAPH_MAX_RANK] = {x->dims[0], x->dims[1]};
    if (global) {
        for (int i = 0; i < nk; i++)
            dims[2 + i] = 1;
    } else {
        size_t nks;
        const int64_t *ks = attr_ints(c, "kernel_shape", &nks);
        if (nks != (size_t)nk)
            return FAIL(c, "kernel_shape must have %d values", nk);
        tt__window win;
        tt_status s = window(c, x, ks, nk, false, &win);
        if (s)
            return s;
        memcpy(dims + 2, win.out, sizeof(int64_t) * (size_t)nk);
    }
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    if (out(c, 1)) /* MaxPool's indices */
        set_shape(out(c, 1), TT_DT_INT64, x->rank, dims);
    return TT_OK;
}

static tt_status infer_gemm(const ctx *c)
{
    const tt_gtensor *a = in(c, 0), *b = in(c, 1), *cc = in(c, 2);
    if (!a || !b || a->rank != 2 || b->rank != 2)
        return FAIL(c, "A and B must be matrices");
    bool ta = attr_int(c, "transA", 0), tb = attr_int(c, "transB", 0);
    int64_t m = a->dims[ta], k = a->dims[!ta], kb = b->dims[tb], n = b->dims[!tb];
    if (k != kb)
        return FAIL(c,
                    "A is %lldx%lld and B %lldx%lld (after transA=%d, transB=%d): inner "
                    "dimensions differ",
                    (long long)m, (long long)k, (long long)kb, (long long)n, ta, tb);
    int64_t dims[2] = {m, n};
    if (cc) {
        tt_gtensor mn = {.rank = 2, .dims = {m, n}, .name = "A*B"};
        int r;
        int64_t bd[TT_GRAPH_MAX_RANK];
        tt_status s = broadcast(c, &mn, cc, &r, bd);
        if (s)
            return s;
        if (r != 2 || bd[0] != m || bd[1] != n)
            return FAIL(c, "C does not broadcast to %lldx%lld", (long long)m, (long long)n);
    }
    set_shape(out(c, 0), a->dtype, 2, dims);
    return TT_OK;
}

static tt_status infer_matmul(const ctx *c)
{
    const tt_gtensor *a = in(c, 0), *b = in(c, 1);
    if (!a || !b || a->rank < 1 || b->rank < 1)
        return FAIL(c, "A and B must have rank 1 or more");
    /* numpy: a vector is a row (A) or a column (B) that is dropped afterwards */
    tt_gtensor a2 = *a, b2 = *b;
    if (a->rank == 1)
        a2.rank = 2, a2.dims[0] = 1, a2.dims[1] = a->dims[0];
    if (b->rank == 1)
        b2.rank = 2, b2.dims[0] = b->dims[0], b2.dims[1] = 1;
    if (a2.dims[a2.rank - 1] != b2.dims[b2.rank - 2])
        return FAIL(c, "inner dimensions differ: %lld in A, %lld in B",
                    (long long)a2.dims[a2.rank - 1], (long long)b2.dims[b2.rank - 2]);
    tt_gtensor ba = a2, bb = b2; /* batch dimensions */
    ba.rank -= 2, bb.rank -= 2;
    int r;
    int64_t dims[TT_GRAPH_MAX_RANK];
    tt_status s = broadcast(c, &ba, &bb, &r, dims);
    if (s)
        return s;
    if (a->rank > 1)
        dims[r++] = a2.dims[a2.rank - 2];
    if (b->rank > 1)
        dims[r++] = b2.dims[b2.rank - 1];
    set_shape(out(c, 0), a->dtype, r, dims);
    return TT_OK;
}

/* Einsum: the output's dimensions are its labels' extents (a dimension of 1 broadcasts). */
static tt_status infer_einsum(const ctx *c)
{
    const tt_gnode *n = node_of(c);
    const char *eq = attr_str(c, "equation", NULL);
    if (!eq)
        return FAIL(c, "no equation");
    const tt_gtensor *xs[TT__EINSUM_MAX_INPUTS];
    int ranks[TT__EINSUM_MAX_INPUTS];
    for (int k = 0; k < n->ninputs && k < TT__EINSUM_MAX_INPUTS; k++) {
        if (!(xs[k] = in(c, k)))
            return FAIL(c, "input %d is missing", k);
        if (xs[k]->dtype != xs[0]->dtype)
            return FAIL(c, "input %d is %s, input 0 %s", k, tt_dtype_name(xs[k]->dtype),
                        tt_dtype_name(xs[0]->dtype));
        ranks[k] = xs[k]->rank;
    }
    tt__einsum e;
    char why[160];
    if (!tt__einsum_parse(eq, n->ninputs, ranks, &e, why, sizeof(why)))
        return FAIL(c, "equation '%s': %s", eq, why);
    int64_t dims[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < e.out_rank; d++)
        if (!tt__einsum_extent(&e, xs, e.out[d], &dims[d], why, sizeof(why)))
            return FAIL(c, "equation '%s': %s", eq, why);
    for (int k = 0; k < e.nsum; k++) {
        int64_t x;
        if (!tt__einsum_extent(&e, xs, e.sum[k], &x, why, sizeof(why)))
            return FAIL(c, "equation '%s': %s", eq, why);
    }
    set_shape(out(c, 0), xs[0]->dtype, e.out_rank, dims);
    return TT_OK;
}

/* ---- folding of integer arithmetic on small constants ---- */

static bool foldable(const tt_gtensor *t)
{
    return t && t->kind == TT_GT_CONST && (t->dtype == TT_DT_INT64 || t->dtype == TT_DT_INT32) &&
           tt_gtensor_numel(t) <= FOLD_MAX_ELEMS;
}

static int64_t ival(const tt_gtensor *t, int64_t i)
{
    return t->dtype == TT_DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* Makes output 0 a constant with the given int64 values (its shape already set). */
static tt_status make_const(const ctx *c, const int64_t *v)
{
    tt_gtensor *o = out(c, 0);
    int64_t n = tt_gtensor_numel(o);
    o->data = tt__graph_copy(c->g, v, (size_t)n * sizeof(int64_t));
    if (!o->data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    o->dtype = TT_DT_INT64;
    o->kind = TT_GT_CONST;
    o->producer = -1;
    node_of(c)->removed = true;
    return TT_OK;
}

/* The element of tensor t (numpy-broadcast to the output o) at o's flat index i. */
static int64_t broadcast_at(const tt_gtensor *o, const tt_gtensor *t, int64_t i)
{
    int64_t it = 0, rem = i, st = 1;
    for (int d = o->rank - 1; d >= 0; d--) {
        int64_t idx = rem % o->dims[d];
        rem /= o->dims[d];
        int dt = d - (o->rank - t->rank);
        if (dt >= 0) {
            it += (t->dims[dt] == 1 ? 0 : idx) * st;
            st *= t->dims[dt];
        }
    }
    return it;
}

/* Elementwise integer arithmetic of two broadcast constants. */
static tt_status fold_binary(const ctx *c, tt_gop op)
{
    const tt_gtensor *a = in(c, 0), *b = in(c, 1);
    tt_gtensor *o = out(c, 0);
    int64_t n = tt_gtensor_numel(o), v[FOLD_MAX_ELEMS];
    if (n > FOLD_MAX_ELEMS)
        return TT_OK;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = ival(a, broadcast_at(o, a, i)), y = ival(b, broadcast_at(o, b, i));
        if ((op == TT_GOP_DIV || op == TT_GOP_MOD) && y == 0)
            return FAIL(c, "divides by zero while folding constants");
        if (op == TT_GOP_MOD) { /* fmod 0: the divisor's sign (Python's %); 1: C's */
            int64_t r = x % y;
            v[i] = !attr_int(c, "fmod", 0) && r != 0 && (r < 0) != (y < 0) ? r + y : r;
            continue;
        }
        v[i] = op == TT_GOP_ADD   ? x + y
               : op == TT_GOP_SUB ? x - y
               : op == TT_GOP_MUL ? x * y
                                  : x / y;
    }
    return make_const(c, v);
}

/* Largest constant a folded ConstantOfShape or Expand makes (elements). */
enum { FOLD_MAX_MADE = 1 << 24 };

/* Makes output 0 a constant of its dtype and shape from `bytes` of data (copied). */
static tt_status make_const_bytes(const ctx *c, const void *data, size_t bytes)
{
    tt_gtensor *o = out(c, 0);
    if (!(o->data = tt__graph_copy(c->g, data, bytes)))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    o->kind = TT_GT_CONST;
    o->producer = -1;
    node_of(c)->removed = true;
    return TT_OK;
}

/* How output 0 of a folded data movement reads its input: broadcast (Expand), repeated (Tile),
 * sliced (first + step x index) or transposed (perm). */
typedef enum { MOVE_BROADCAST, MOVE_TILE, MOVE_SLICE, MOVE_TRANSPOSE } move_kind;

typedef struct {
    move_kind kind;
    const int64_t *first, *step, *perm;
} move;

/* A constant x moved into output 0 (its shape set) by `m`: output 0 becomes a constant too. */
static tt_status fold_move(const ctx *c, const tt_gtensor *x, move m)
{
    tt_gtensor *o = out(c, 0);
    int64_t numel = tt_gtensor_numel(o);
    if (x->kind != TT_GT_CONST || numel > FOLD_MAX_MADE)
        return TT_OK;
    size_t esize = (size_t)tt_dtype_bytes(x->dtype);
    unsigned char *data = malloc((size_t)(numel ? numel : 1) * esize);
    if (!data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < numel; i++) {
        int64_t oi[TT_GRAPH_MAX_RANK], xi[TT_GRAPH_MAX_RANK], rem = i, at = 0;
        for (int d = o->rank - 1; d >= 0; d--) {
            oi[d] = rem % o->dims[d];
            rem /= o->dims[d];
        }
        for (int d = 0; d < x->rank && m.kind != MOVE_BROADCAST; d++) {
            if (m.kind == MOVE_TILE)
                xi[d] = oi[d] % x->dims[d];
            else if (m.kind == MOVE_SLICE)
                xi[d] = m.first[d] + m.step[d] * oi[d];
            else
                xi[m.perm[d]] = oi[d];
        }
        for (int d = 0; d < x->rank && m.kind != MOVE_BROADCAST; d++)
            at = at * x->dims[d] + xi[d];
        if (m.kind == MOVE_BROADCAST)
            at = broadcast_at(o, x, i);
        memcpy(data + (size_t)i * esize, (const unsigned char *)x->data + (size_t)at * esize,
               esize);
    }
    tt_status s = make_const_bytes(c, data, (size_t)(numel ? numel : 1) * esize);
    free(data);
    return s;
}

/* Arithmetic and Pow on float constants (Swin's attention mask and scale, computed from
 * shapes), in doubles, stored in the output's type. */
static tt_status fold_float_binary(const ctx *c, tt_gop op)
{
    const tt_gtensor *a = in(c, 0), *b = in(c, 1);
    tt_gtensor *o = out(c, 0);
    int64_t n = tt_gtensor_numel(o);
    if (n > FOLD_MAX_MADE)
        return TT_OK;
    tt_gtensor t = *o;
    if (!(t.data = calloc((size_t)(n ? n : 1), (size_t)tt_dtype_bytes(o->dtype))))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        double x = tt__gtensor_value(a, broadcast_at(o, a, i)),
               y = tt__gtensor_value(b, broadcast_at(o, b, i));
        tt__gtensor_set(&t, i,
                        op == TT_GOP_ADD   ? x + y
                        : op == TT_GOP_SUB ? x - y
                        : op == TT_GOP_MUL ? x * y
                        : op == TT_GOP_DIV ? x / y
                        : op == TT_GOP_POW ? pow(x, y)
                                           : fmod(x, y));
    }
    tt_status s = make_const_bytes(c, t.data, (size_t)(n ? n : 1) * tt_dtype_bytes(o->dtype));
    free(t.data);
    return s;
}

/* Reshape, Squeeze, Unsqueeze, Flatten, Identity of a constant: the same values. */
static tt_status fold_same_values(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    if (foldable(x)) {
        int64_t n = tt_gtensor_numel(x), v[FOLD_MAX_ELEMS];
        for (int64_t i = 0; i < n; i++)
            v[i] = ival(x, i);
        return make_const(c, v);
    }
    /* other constants (index tensors, masks, weights) keep their type */
    if (x->kind != TT_GT_CONST || tt_gtensor_numel(x) > FOLD_MAX_MADE)
        return TT_OK;
    return make_const_bytes(c, x->data, (size_t)tt_gtensor_numel(x) * tt_dtype_bytes(x->dtype));
}

/* ---- the operators ---- */

static tt_status infer_reshape(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t want[TT_GRAPH_MAX_RANK];
    int n;
    tt_status s = const_ints(c, 1, "the shape", want, &n, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    bool allowzero = attr_int(c, "allowzero", 0) != 0;
    int64_t known = 1, numel = tt_gtensor_numel(x);
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (want[i] == 0 && !allowzero) {
            if (i >= x->rank)
                return FAIL(c, "shape value 0 at %d copies a dimension X (rank %d) lacks", i,
                            x->rank);
            want[i] = x->dims[i];
        }
        if (want[i] == -1) {
            if (infer >= 0)
                return FAIL(c, "the shape has more than one -1");
            infer = i;
        } else if (want[i] < 0)
            return FAIL(c, "shape value %lld at %d", (long long)want[i], i);
        else
            known *= want[i];
    }
    if (infer >= 0) {
        if (!known || numel % known)
            return FAIL(c, "cannot infer the -1 of the shape: %lld elements over %lld",
                        (long long)numel, (long long)known);
        want[infer] = numel / known;
        known *= want[infer];
    }
    if (known != numel)
        return FAIL(c, "reshapes %lld elements into %lld", (long long)numel, (long long)known);
    set_shape(out(c, 0), x->dtype, n, want);
    return fold_same_values(c);
}

static tt_status infer_transpose(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    size_t np;
    const int64_t *perm = attr_ints(c, "perm", &np);
    if (perm && np != (size_t)x->rank)
        return FAIL(c, "perm has %zu values for rank %d", np, x->rank);
    int64_t dims[TT_GRAPH_MAX_RANK], order[TT_GRAPH_MAX_RANK];
    bool seen[TT_GRAPH_MAX_RANK] = {false};
    for (int i = 0; i < x->rank; i++) {
        int64_t p = perm ? perm[i] : x->rank - 1 - i;
        if (p < 0 || p >= x->rank || seen[p])
            return FAIL(c, "perm is not a permutation of 0..%d", x->rank - 1);
        seen[p] = true;
        dims[i] = x->dims[p];
        order[i] = p;
    }
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return fold_move(c, x, (move){MOVE_TRANSPOSE, NULL, NULL, order});
}

static tt_status infer_concat(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    if (!x)
        return FAIL(c, "needs at least one input");
    int axis;
    tt_status s = axis_of(c, attr_int(c, "axis", 0), x->rank, &axis);
    if (s)
        return s;
    int64_t dims[TT_GRAPH_MAX_RANK];
    memcpy(dims, x->dims, sizeof(dims));
    dims[axis] = 0;
    bool all_const = true;
    for (int i = 0; i < node_of(c)->ninputs; i++) {
        const tt_gtensor *t = in(c, i);
        if (!t || t->rank != x->rank)
            return FAIL(c, "input %d has rank %d, input 0 %d", i, t ? t->rank : -1, x->rank);
        for (int d = 0; d < x->rank; d++)
            if (d != axis && t->dims[d] != x->dims[d])
                return FAIL(c, "input %d differs from input 0 in dimension %d (%lld, %lld)", i, d,
                            (long long)t->dims[d], (long long)x->dims[d]);
        dims[axis] += t->dims[axis];
        all_const = all_const && t->kind == TT_GT_CONST && t->dtype == x->dtype;
    }
    tt_gtensor *o = out(c, 0);
    set_shape(o, x->dtype, x->rank, dims);
    int64_t numel = tt_gtensor_numel(o), outer = 1, inner = 1;
    if (!all_const || numel > FOLD_MAX_MADE)
        return TT_OK;
    /* constants (shapes, Swin's mask indices): each input's rows in turn */
    for (int d = 0; d < x->rank; d++)
        *(d < axis ? &outer : &inner) *= d == axis ? 1 : dims[d];
    size_t esize = (size_t)tt_dtype_bytes(x->dtype);
    unsigned char *data = malloc((size_t)(numel ? numel : 1) * esize), *p = data;
    if (!data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < outer; b++)
        for (int i = 0; i < node_of(c)->ninputs; i++) {
            const tt_gtensor *t = in(c, i);
            size_t n = (size_t)(t->dims[axis] * inner) * esize;
            memcpy(p, (const unsigned char *)t->data + (size_t)b * n, n);
            p += n;
        }
    s = make_const_bytes(c, data, (size_t)(numel ? numel : 1) * esize);
    free(data);
    return s;
}

static tt_status infer_split(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int axis, nout = node_of(c)->noutputs, n = 0;
    tt_status s = axis_of(c, attr_int(c, "axis", 0), x->rank, &axis);
    if (s)
        return s;
    int64_t parts[64];
    if (nout > 64)
        return FAIL(c, "more than 64 outputs");
    if (in(c, 1)) {
        if ((s = const_ints(c, 1, "split", parts, &n, 64)))
            return s;
    } else {
        size_t na;
        const int64_t *a = attr_ints(c, "split", &na);
        if (a && na <= 64)
            memcpy(parts, a, na * sizeof(int64_t)), n = (int)na;
    }
    int64_t num_outputs = attr_int(c, "num_outputs", 0); /* opset 18 */
    if (!n && num_outputs) {
        /* chunks of ceil(dim / num_outputs), the last one what remains */
        int64_t chunk = (x->dims[axis] + num_outputs - 1) / num_outputs;
        if (num_outputs != nout || chunk * (nout - 1) >= x->dims[axis])
            return FAIL(c, "num_outputs %lld does not split dimension %d (%lld) into %d outputs",
                        (long long)num_outputs, axis, (long long)x->dims[axis], nout);
        for (int i = 0; i < nout; i++)
            parts[i] = i < nout - 1 ? chunk : x->dims[axis] - chunk * (nout - 1);
        n = nout;
    }
    if (!n) {
        if (x->dims[axis] % nout)
            return FAIL(c, "dimension %d (%lld) does not split into %d equal parts", axis,
                        (long long)x->dims[axis], nout);
        for (int i = 0; i < nout; i++)
            parts[i] = x->dims[axis] / nout;
        n = nout;
    }
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += parts[i];
    if (n != nout || sum != x->dims[axis])
        return FAIL(c,
                    "split sizes (%d parts, %lld in all) do not match %d outputs of dimension "
                    "%d (%lld)",
                    n, (long long)sum, nout, axis, (long long)x->dims[axis]);
    for (int i = 0; i < nout; i++)
        if (out(c, i)) {
            int64_t dims[TT_GRAPH_MAX_RANK];
            memcpy(dims, x->dims, sizeof(dims));
            dims[axis] = parts[i];
            set_shape(out(c, i), x->dtype, x->rank, dims);
        }
    return TT_OK;
}

/* Slice's starts, ends, axes and steps resolved per dimension of X: the first index read, the
 * step, and the output's dims. */
static tt_status slice_params(const ctx *c, int64_t *first, int64_t *step, int64_t *dims)
{
    const tt_gtensor *x = in(c, 0);
    int64_t st[TT_GRAPH_MAX_RANK], en[TT_GRAPH_MAX_RANK], ax[TT_GRAPH_MAX_RANK],
        sp[TT_GRAPH_MAX_RANK];
    int ns, ne, na = 0, nsp = 0;
    tt_status s = const_ints(c, 1, "starts", st, &ns, TT_GRAPH_MAX_RANK);
    if (!s)
        s = const_ints(c, 2, "ends", en, &ne, TT_GRAPH_MAX_RANK);
    if (!s && in(c, 3))
        s = const_ints(c, 3, "axes", ax, &na, TT_GRAPH_MAX_RANK);
    if (!s && in(c, 4))
        s = const_ints(c, 4, "steps", sp, &nsp, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    if (ne != ns || (na && na != ns) || (nsp && nsp != ns))
        return FAIL(c, "starts, ends, axes and steps must have the same length");
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int d = 0; d < x->rank; d++)
        first[d] = 0, step[d] = 1;
    for (int i = 0; i < ns; i++) {
        int a;
        if ((s = axis_of(c, na ? ax[i] : i, x->rank, &a)))
            return s;
        int64_t dim = x->dims[a], k = nsp ? sp[i] : 1, b = st[i], e = en[i];
        if (!k)
            return FAIL(c, "a step is 0");
        b = b < 0 ? b + dim : b;
        e = e < 0 ? e + dim : e;
        if (k > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
            dims[a] = e > b ? (e - b + k - 1) / k : 0;
        } else {
            b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            dims[a] = b > e ? (b - e - k - 1) / -k : 0;
        }
        first[a] = b, step[a] = k;
    }
    return TT_OK;
}

static tt_status infer_slice(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t dims[TT_GRAPH_MAX_RANK], first[TT_GRAPH_MAX_RANK], step[TT_GRAPH_MAX_RANK];
    tt_status s = slice_params(c, first, step, dims);
    if (s)
        return s;
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return fold_move(c, x, (move){MOVE_SLICE, first, step, NULL});
}

/* The axes of Squeeze/Unsqueeze/ReduceMean: input 1 from opset 13 (18 for ReduceMean), else the
 * attribute; n = -1 when none were given. */
/* The n axes of `given` (NULL: 0, 1, ..., n - 1) normalised for rank r into out, none twice (an
 * axes list of Unsqueeze, Pad or Resize; `use` says what is done to an axis, for the error). */
static tt_status distinct_axes(const ctx *c, const int64_t *given, int n, int r, const char *use,
                               int *out)
{
    bool seen[TT_GRAPH_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        out[i] = i;
        tt_status s = given ? axis_of(c, given[i], r, &out[i]) : TT_OK;
        if (s)
            return s;
        if (seen[out[i]])
            return FAIL(c, "axis %d %s twice", out[i], use);
        seen[out[i]] = true;
    }
    return TT_OK;
}

static tt_status axes_of(const ctx *c, bool from_input, int64_t *axes, int *n)
{
    *n = -1;
    if (from_input && in(c, 1))
        return const_ints(c, 1, "axes", axes, n, TT_GRAPH_MAX_RANK);
    size_t na;
    const int64_t *a = attr_ints(c, "axes", &na);
    if (a) {
        if (na > TT_GRAPH_MAX_RANK)
            return FAIL(c, "more than %d axes", TT_GRAPH_MAX_RANK);
        memcpy(axes, a, na * sizeof(int64_t));
        *n = (int)na;
    }
    return TT_OK;
}

static tt_status squeeze_shape(const ctx *c, bool unsqueeze)
{
    const tt_gtensor *x = in(c, 0);
    int64_t axes[TT_GRAPH_MAX_RANK];
    int n;
    tt_status s = axes_of(c, c->g->opset >= 13, axes, &n);
    if (s)
        return s;
    bool pick[TT_GRAPH_MAX_RANK] = {false};
    int64_t dims[TT_GRAPH_MAX_RANK];
    int r = 0;
    if (unsqueeze) {
        int orank = x->rank + (n > 0 ? n : 0);
        if (n < 1 || orank > TT_GRAPH_MAX_RANK)
            return FAIL(c, "needs axes, and the result at most rank %d", TT_GRAPH_MAX_RANK);
        int picked[TT_GRAPH_MAX_RANK];
        if ((s = distinct_axes(c, axes, n, orank, "given", picked)))
            return s;
        for (int i = 0; i < n; i++)
            pick[picked[i]] = true;
        for (int d = 0, k = 0; d < orank; d++)
            dims[r++] = pick[d] ? 1 : x->dims[k++];
    } else {
        for (int i = 0; i < n; i++) {
            int a;
            if ((s = axis_of(c, axes[i], x->rank, &a)))
                return s;
            if (x->dims[a] != 1)
                return FAIL(c, "squeezes axis %d of size %lld", a, (long long)x->dims[a]);
            pick[a] = true;
        }
        for (int d = 0; d < x->rank; d++)
            if (!(n < 0 ? x->dims[d] == 1 : pick[d]))
                dims[r++] = x->dims[d];
    }
    set_shape(out(c, 0), x->dtype, r, dims);
    return fold_same_values(c);
}

/* Whether a reduction's axes are its second input: ReduceSum's from opset 13, the others' from
 * opset 18 (an attribute before). */
static bool reduce_axes_are_input(const tt_graph *g, tt_gop op)
{
    return g->opset >= 18 || (op == TT_GOP_REDUCE_SUM && g->opset >= 13);
}

/* The reductions (ReduceMean, ReduceSum, ReduceMax, ...): axes an attribute, or the second input
 * (reduce_axes_are_input); none given means all, or none with noop_with_empty_axes. */
bool tt__graph_reduce_axes(const tt_graph *g, int node, bool *reduced)
{
    const tt_gnode *nd = &g->nodes.data[node];
    const tt_gtensor *x = &g->tensors.data[nd->inputs[0]];
    int64_t axes[TT_GRAPH_MAX_RANK];
    int n = -1;
    tt_errbuf err = {{0}};
    ctx c = {(tt_graph *)g, node, &err};
    if (axes_of(&c, reduce_axes_are_input(g, nd->op), axes, &n))
        return false;
    bool noop = n <= 0 && attr_int(&c, "noop_with_empty_axes", 0);
    for (int d = 0; d < x->rank; d++)
        reduced[d] = n <= 0 && !noop;
    for (int i = 0; i < n; i++) {
        int a;
        if (axis_of(&c, axes[i], x->rank, &a))
            return false;
        reduced[a] = true;
    }
    return true;
}

static tt_status infer_reduce(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t axes[TT_GRAPH_MAX_RANK];
    int n;
    tt_status s = axes_of(c, reduce_axes_are_input(c->g, node_of(c)->op), axes, &n);
    if (s)
        return s;
    if (n <= 0 && attr_int(c, "noop_with_empty_axes", 0))
        n = 0; /* no axes: the input as it is */
    else if (n == 0)
        n = -1; /* an empty axes input: all of them */
    bool keep = attr_int(c, "keepdims", 1) != 0, pick[TT_GRAPH_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if ((s = axis_of(c, axes[i], x->rank, &a)))
            return s;
        pick[a] = true;
    }
    int64_t dims[TT_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        bool reduced = n < 0 || pick[d];
        if (!reduced)
            dims[r++] = x->dims[d];
        else if (keep)
            dims[r++] = 1;
    }
    set_shape(out(c, 0), x->dtype, r, dims);
    return TT_OK;
}

/* Gather's and GatherElements' indices: integers, the axis valid, constant ones in range. */
static tt_status gather_indices(const ctx *c, int *axis)
{
    const tt_gtensor *x = in(c, 0), *idx = in(c, 1);
    if (!idx || (idx->dtype != TT_DT_INT64 && idx->dtype != TT_DT_INT32))
        return FAIL(c, "indices must be int32 or int64");
    tt_status s = axis_of(c, attr_int(c, "axis", 0), x->rank, axis);
    for (int64_t i = 0; !s && idx->kind == TT_GT_CONST && i < tt_gtensor_numel(idx); i++) {
        int64_t k = ival(idx, i);
        if (k < -x->dims[*axis] || k >= x->dims[*axis])
            return FAIL(c, "index %lld is out of range for dimension %d (%lld)", (long long)k,
                        *axis, (long long)x->dims[*axis]);
    }
    return s;
}

static tt_status infer_gather(const ctx *c)
{
    const tt_gtensor *x = in(c, 0), *idx = in(c, 1);
    int axis;
    tt_status s = gather_indices(c, &axis);
    if (s)
        return s;
    if (x->rank - 1 + idx->rank > TT_GRAPH_MAX_RANK)
        return FAIL(c, "the result would have rank over %d", TT_GRAPH_MAX_RANK);
    int64_t dims[TT_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        dims[r++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++)
        dims[r++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        dims[r++] = x->dims[d];
    set_shape(out(c, 0), x->dtype, r, dims);
    if (!foldable(x) || !foldable(idx) || x->rank != 1)
        return TT_OK;
    int64_t v[FOLD_MAX_ELEMS];
    for (int64_t i = 0; i < tt_gtensor_numel(idx); i++) {
        int64_t k = ival(idx, i);
        v[i] = ival(x, k < 0 ? k + x->dims[0] : k);
    }
    return make_const(c, v);
}

/* Pad's amounts for every dimension of its input, the begins then the ends (2 * rank values):
 * pads as given, or from opset 18 for the axes of its fourth input, the others 0. */
static tt_status pad_amounts(const ctx *c, int64_t *pads)
{
    const tt_gtensor *x = in(c, 0);
    int64_t given[2 * TT_GRAPH_MAX_RANK], given_axes[TT_GRAPH_MAX_RANK];
    int n, na = x->rank, axes[TT_GRAPH_MAX_RANK];
    tt_status s = const_ints(c, 1, "pads", given, &n, 2 * TT_GRAPH_MAX_RANK);
    if (!s && in(c, 3))
        s = const_ints(c, 3, "axes", given_axes, &na, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    if (n != 2 * na)
        return FAIL(c, "pads has %d values for %d axes", n, na);
    if ((s = distinct_axes(c, in(c, 3) ? given_axes : NULL, na, x->rank, "is padded", axes)))
        return s;
    memset(pads, 0, sizeof(int64_t) * 2 * (size_t)x->rank);
    for (int i = 0; i < na; i++) {
        pads[axes[i]] = given[i];
        pads[x->rank + axes[i]] = given[na + i];
    }
    return TT_OK;
}

bool tt__graph_pad_amounts(const tt_graph *g, int node, int64_t *pads)
{
    tt_errbuf err = {{0}};
    ctx c = {(tt_graph *)g, node, &err};
    return !pad_amounts(&c, pads);
}

static tt_status infer_pad(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t pads[2 * TT_GRAPH_MAX_RANK];
    tt_status s = pad_amounts(c, pads);
    if (s)
        return s;
    const char *mode = attr_str(c, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") &&
        strcmp(mode, "wrap"))
        return FAIL(c, "mode '%s' is not constant, reflect, edge or wrap", mode);
    if (!strcmp(mode, "wrap") && c->g->opset < 19)
        return FAIL(c, "mode 'wrap' is of opset 19, the model's is %lld", (long long)c->g->opset);
    int64_t dims[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        dims[d] = x->dims[d] + pads[d] + pads[x->rank + d];
        if (dims[d] < 1)
            return FAIL(c, "dimension %d would be %lld", d, (long long)dims[d]);
    }
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return TT_OK;
}

static tt_status infer_shape_op(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t start = attr_int(c, "start", 0), end = attr_int(c, "end", x->rank);
    start = start < 0 ? start + x->rank : start;
    end = end < 0 ? end + x->rank : end;
    start = start < 0 ? 0 : start > x->rank ? x->rank : start;
    end = end < 0 ? 0 : end > x->rank ? x->rank : end;
    int64_t n = end > start ? end - start : 0, v[TT_GRAPH_MAX_RANK];
    for (int64_t i = 0; i < n; i++)
        v[i] = x->dims[start + i];
    set_shape(out(c, 0), TT_DT_INT64, 1, &n);
    return make_const(c, v);
}

static tt_status infer_cast(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t to = attr_int(c, "to", -1);
    static const int map[] = {[1] = TT_DT_FLOAT32,
                              [6] = TT_DT_INT32,
                              [7] = TT_DT_INT64,
                              [9] = TT_DT_BOOL,
                              [11] = TT_DT_FLOAT64};
    if (to < 1 || to > 11 || (!map[to] && to != 1))
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "casts to ONNX type %lld (supported: float, double, int32, "
                                  "int64, bool)",
                                  (long long)to);
    tt_dtype dt = (tt_dtype)map[to];
    set_shape(out(c, 0), dt, x->rank, x->dims);
    if (foldable(x) && (dt == TT_DT_INT64 || dt == TT_DT_INT32)) {
        int64_t n = tt_gtensor_numel(x), v[FOLD_MAX_ELEMS];
        for (int64_t i = 0; i < n; i++)
            v[i] = dt == TT_DT_INT32 ? (int32_t)ival(x, i) : ival(x, i);
        tt_status s = make_const(c, v);
        if (!s && dt == TT_DT_INT32) { /* make_const wrote int64: narrow in place */
            tt_gtensor *o = out(c, 0);
            for (int64_t i = 0; i < n; i++)
                ((int32_t *)o->data)[i] = (int32_t)v[i];
            o->dtype = TT_DT_INT32;
        }
        return s;
    }
    /* other constants (Swin's float mask cast to bool): element by element; to bool, nonzero */
    int64_t n = tt_gtensor_numel(x);
    if (x->kind != TT_GT_CONST || n > FOLD_MAX_MADE)
        return TT_OK;
    tt_gtensor t = *out(c, 0);
    if (!(t.data = calloc((size_t)(n ? n : 1), (size_t)tt_dtype_bytes(dt))))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        double v = tt__gtensor_value(x, i);
        tt__gtensor_set(&t, i, dt == TT_DT_BOOL ? v != 0 : v);
    }
    tt_status s = make_const_bytes(c, t.data, (size_t)(n ? n : 1) * tt_dtype_bytes(dt));
    free(t.data);
    return s;
}

static tt_status infer_flatten(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t a = attr_int(c, "axis", 1);
    if (a < -x->rank || a > x->rank)
        return FAIL(c, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    if (a < 0)
        a += x->rank;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++)
        dims[d >= a] *= x->dims[d];
    set_shape(out(c, 0), x->dtype, 2, dims);
    return fold_same_values(c);
}

/* ---- the shape rules of the operator table (graph.h), infer_<rule> ---- */

/* Two inputs broadcast (Add, Sub, Mul, Div, Pow, PRelu); the arithmetic folds on constants. */
static tt_status infer_binary(const ctx *c)
{
    tt_gnode *n = node_of(c);
    const tt_gtensor *x = in(c, 0), *b = in(c, 1);
    if (!b)
        return FAIL(c, "needs two inputs");
    if (n->op != TT_GOP_POW && b->dtype != x->dtype)
        return FAIL(c, "input types differ (%s, %s)", tt_dtype_name(x->dtype),
                    tt_dtype_name(b->dtype));
    int r;
    int64_t dims[TT_GRAPH_MAX_RANK];
    tt_status s = broadcast(c, x, b, &r, dims);
    if (s)
        return s;
    set_shape(out(c, 0), x->dtype, r, dims);
    if (n->op == TT_GOP_MOD && tt_dtype_is_float(x->dtype) && !attr_int(c, "fmod", 0))
        return FAIL(c, "fmod must be 1 for %s inputs", tt_dtype_name(x->dtype));
    bool arithmetic = n->op == TT_GOP_ADD || n->op == TT_GOP_SUB || n->op == TT_GOP_MUL ||
                      n->op == TT_GOP_DIV || n->op == TT_GOP_MOD;
    /* Swin's (C // heads) ** -0.5, a float of the shapes, was a kernel of one value per block */
    bool float_pow = n->op == TT_GOP_POW && tt_dtype_is_float(x->dtype);
    if ((!arithmetic && !float_pow) || x->kind != TT_GT_CONST || b->kind != TT_GT_CONST)
        return TT_OK;
    if (arithmetic && foldable(x) && foldable(b))
        return fold_binary(c, n->op);
    return tt_dtype_is_float(x->dtype) ? fold_float_binary(c, n->op) : TT_OK;
}

/* Any number of inputs of one type, broadcast together (Min, Max). */
static tt_status infer_variadic(const ctx *c)
{
    tt_gnode *n = node_of(c);
    const tt_gtensor *x = in(c, 0);
    tt_gtensor shape = *x;
    for (int i = 1; i < n->ninputs; i++) {
        const tt_gtensor *b = in(c, i);
        if (!b)
            return FAIL(c, "input %d is missing", i);
        if (b->dtype != x->dtype)
            return FAIL(c, "input types differ (%s, %s)", tt_dtype_name(x->dtype),
                        tt_dtype_name(b->dtype));
        int r;
        int64_t dims[TT_GRAPH_MAX_RANK];
        tt_status s = broadcast(c, &shape, b, &r, dims);
        if (s)
            return s;
        shape.rank = r;
        memcpy(shape.dims, dims, sizeof(dims));
    }
    set_shape(out(c, 0), x->dtype, shape.rank, shape.dims);
    return TT_OK;
}

/* The output is the input's type and shape (unary elementwise operators, Softmax). */
static tt_status infer_same(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    set_shape(out(c, 0), x->dtype, x->rank, x->dims);
    return TT_OK;
}

static tt_status infer_identity(const ctx *c)
{
    infer_same(c);
    return fold_same_values(c);
}

static tt_status infer_dropout(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    set_shape(out(c, 0), x->dtype, x->rank, x->dims);
    if (out(c, 1))
        set_shape(out(c, 1), TT_DT_BOOL, x->rank, x->dims);
    return TT_OK;
}

static tt_status infer_batch_norm(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    if (attr_int(c, "training_mode", 0) || node_of(c)->noutputs > 1)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "training mode (running statistics as outputs) is not "
                                  "supported; export the model for inference (model.eval())");
    if (x->rank < 2)
        return FAIL(c, "X must have rank 2 or more");
    for (int i = 1; i <= 4; i++)
        if (!in(c, i) || tt_gtensor_numel(in(c, i)) != x->dims[1])
            return FAIL(c, "input %d must have %lld values (X's channels)", i,
                        (long long)x->dims[1]);
    set_shape(out(c, 0), x->dtype, x->rank, x->dims);
    return TT_OK;
}

static tt_status infer_layer_norm(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int axis;
    tt_status s = axis_of(c, attr_int(c, "axis", -1), x->rank, &axis);
    if (s)
        return s;
    set_shape(out(c, 0), x->dtype, x->rank, x->dims);
    int64_t dims[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < axis ? x->dims[d] : 1;
    for (int i = 1; i < 3; i++)
        if (out(c, i))
            set_shape(out(c, i), TT_DT_FLOAT32, x->rank, dims);
    return TT_OK;
}

static tt_status infer_pool(const ctx *c)
{
    return pool_shape(c, false);
}

static tt_status infer_global_pool(const ctx *c)
{
    return pool_shape(c, true);
}

static tt_status infer_squeeze(const ctx *c)
{
    return squeeze_shape(c, false);
}

static tt_status infer_unsqueeze(const ctx *c)
{
    return squeeze_shape(c, true);
}

/* Output 0 is a bool tensor of a and b broadcast together. */
static tt_status bool_result(const ctx *c, const tt_gtensor *a, const tt_gtensor *b)
{
    int r;
    int64_t dims[TT_GRAPH_MAX_RANK];
    tt_status s = broadcast(c, a, b, &r, dims);
    if (!s)
        set_shape(out(c, 0), TT_DT_BOOL, r, dims);
    return s;
}

/* Equal, Less, Greater: a bool tensor, folded when both inputs are integer constants (the shape
 * arithmetic exporters write); kernels compute no bool tensors (te_write.c). */
static tt_status infer_compare(const ctx *c)
{
    tt_gop op = node_of(c)->op;
    const tt_gtensor *a = in(c, 0), *b = in(c, 1);
    if (!b)
        return FAIL(c, "needs two inputs");
    tt_status s = bool_result(c, a, b);
    if (s)
        return s;
    tt_gtensor *o = out(c, 0);
    int64_t n = tt_gtensor_numel(o);
    if (a->kind != TT_GT_CONST || b->kind != TT_GT_CONST || n > FOLD_MAX_MADE)
        return TT_OK;
    uint8_t *v = malloc((size_t)(n ? n : 1));
    if (!v)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        /* integers exactly; floats (Swin's mask != 0) as doubles */
        int64_t ia = broadcast_at(o, a, i), ib = broadcast_at(o, b, i);
        int cmp;
        if (foldable(a) && foldable(b)) {
            int64_t x = ival(a, ia), y = ival(b, ib);
            cmp = (x > y) - (x < y);
        } else {
            double x = tt__gtensor_value(a, ia), y = tt__gtensor_value(b, ib);
            cmp = (x > y) - (x < y);
        }
        v[i] = op == TT_GOP_EQUAL ? cmp == 0 : op == TT_GOP_LESS ? cmp < 0 : cmp > 0;
    }
    s = make_const_bytes(c, v, (size_t)(n ? n : 1));
    free(v);
    return s;
}

/* Where(cond, x, y): broadcast of the three, x's type; folded when all three are constants. */
static tt_status infer_where(const ctx *c)
{
    const tt_gtensor *cond = in(c, 0), *x = in(c, 1), *y = in(c, 2);
    if (!x || !y)
        return FAIL(c, "needs three inputs");
    if (cond->dtype != TT_DT_BOOL)
        return FAIL(c, "the condition is %s, not bool", tt_dtype_name(cond->dtype));
    if (x->dtype != y->dtype)
        return FAIL(c, "input types differ (%s, %s)", tt_dtype_name(x->dtype),
                    tt_dtype_name(y->dtype));
    tt_gtensor shape = *cond;
    for (int k = 1; k < 3; k++) {
        int r;
        int64_t dims[TT_GRAPH_MAX_RANK];
        tt_status s = broadcast(c, &shape, in(c, k), &r, dims);
        if (s)
            return s;
        shape.rank = r;
        memcpy(shape.dims, dims, sizeof(dims));
    }
    tt_gtensor *o = out(c, 0);
    set_shape(o, x->dtype, shape.rank, shape.dims);
    int64_t n = tt_gtensor_numel(o);
    if (cond->kind != TT_GT_CONST || x->kind != TT_GT_CONST || y->kind != TT_GT_CONST ||
        n > FOLD_MAX_MADE)
        return TT_OK;
    size_t esize = (size_t)tt_dtype_bytes(x->dtype);
    unsigned char *v = malloc((size_t)(n ? n : 1) * esize);
    if (!v)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const tt_gtensor *t = ((const uint8_t *)cond->data)[broadcast_at(o, cond, i)] ? x : y;
        memcpy(v + (size_t)i * esize,
               (const unsigned char *)t->data + (size_t)broadcast_at(o, t, i) * esize, esize);
    }
    tt_status s = make_const_bytes(c, v, (size_t)(n ? n : 1) * esize);
    free(v);
    return s;
}

/* ConstantOfShape: a constant of the shape its input gives, every element the `value`
 * attribute's (float32 0 without one).  Always folded: the shape must be known at import. */
static tt_status infer_constant_of_shape(const ctx *c)
{
    int64_t dims[TT_GRAPH_MAX_RANK];
    int r;
    tt_status s = const_ints(c, 0, "the shape", dims, &r, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    const tt_gattr *a = tt_gnode_attr(node_of(c), "value");
    const tt_gtensor *value =
        a && a->kind == TT_GATTR_TENSOR ? &c->g->tensors.data[a->tensor] : NULL;
    if (value && tt_gtensor_numel(value) != 1)
        return FAIL(c, "its value holds %lld elements, not one",
                    (long long)tt_gtensor_numel(value));
    tt_dtype dt = value ? value->dtype : TT_DT_FLOAT32;
    tt_gtensor *o = out(c, 0);
    set_shape(o, dt, r, dims);
    int64_t n = tt_gtensor_numel(o);
    for (int d = 0; d < r; d++)
        if (dims[d] < 0)
            return FAIL(c, "dimension %d of the shape is %lld", d, (long long)dims[d]);
    if (n > FOLD_MAX_MADE)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_LIMIT,
                                  "a constant of %lld elements is larger than import makes (%d)",
                                  (long long)n, FOLD_MAX_MADE);
    size_t esize = (size_t)tt_dtype_bytes(dt);
    unsigned char *data = calloc((size_t)(n ? n : 1), esize);
    if (!data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; value && i < n; i++)
        memcpy(data + (size_t)i * esize, value->data, esize);
    s = make_const_bytes(c, data, (size_t)(n ? n : 1) * esize);
    free(data);
    return s;
}

/* Expand: x broadcast with the shape its second input gives (both ways, as numpy's
 * broadcast_to after broadcasting the shapes); folded when x is a constant, else a kernel
 * (te_write.c). */
static tt_status infer_expand(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    tt_gtensor want = *x;
    int n;
    tt_status s = const_ints(c, 1, "the shape", want.dims, &n, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    want.rank = n;
    want.name = "the shape";
    int r;
    int64_t dims[TT_GRAPH_MAX_RANK];
    if ((s = broadcast(c, x, &want, &r, dims)))
        return s;
    set_shape(out(c, 0), x->dtype, r, dims);
    return fold_move(c, x, (move){MOVE_BROADCAST, NULL, NULL, NULL});
}

/* Not, And, Or: bool tensors, folded when their inputs are constants (the masks exporters compute
 * from shapes); kernels compute no bool tensors (te_write.c). */
static tt_status infer_logical(const ctx *c)
{
    tt_gop op = node_of(c)->op;
    const tt_gtensor *a = in(c, 0), *b = op == TT_GOP_NOT ? a : in(c, 1);
    if (!b)
        return FAIL(c, "needs two inputs");
    if (a->dtype != TT_DT_BOOL || b->dtype != TT_DT_BOOL)
        return FAIL(c, "takes bool inputs, not %s",
                    tt_dtype_name(a->dtype != TT_DT_BOOL ? a->dtype : b->dtype));
    tt_status s = bool_result(c, a, b);
    if (s)
        return s;
    tt_gtensor *o = out(c, 0);
    int64_t n = tt_gtensor_numel(o);
    if (a->kind != TT_GT_CONST || b->kind != TT_GT_CONST || n > FOLD_MAX_MADE)
        return TT_OK;
    uint8_t *v = malloc((size_t)(n ? n : 1));
    if (!v)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        bool x = ((const uint8_t *)a->data)[broadcast_at(o, a, i)] != 0,
             y = ((const uint8_t *)b->data)[broadcast_at(o, b, i)] != 0;
        v[i] = op == TT_GOP_NOT ? !x : op == TT_GOP_AND ? x && y : x || y;
    }
    s = make_const_bytes(c, v, (size_t)(n ? n : 1));
    free(v);
    return s;
}

/* Range(start, limit, delta): its length needs the three values, so they must be constants; the
 * result is one too. */
static tt_status infer_range(const ctx *c)
{
    const tt_gtensor *t[3] = {in(c, 0), in(c, 1), in(c, 2)};
    for (int i = 0; i < 3; i++) {
        if (!t[i])
            return FAIL(c, "needs three inputs (start, limit, delta)");
        if (t[i]->kind != TT_GT_CONST)
            return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                      "input %d ('%s') is computed at run time, so the result's "
                                      "length depends on data; networks are built for static "
                                      "shapes",
                                      i, t[i]->name);
        if (tt_gtensor_numel(t[i]) != 1 || t[i]->dtype != t[0]->dtype)
            return FAIL(c, "input %d must be a scalar of the first's type", i);
    }
    tt_dtype dt = t[0]->dtype;
    double start = tt__gtensor_value(t[0], 0), limit = tt__gtensor_value(t[1], 0),
           delta = tt__gtensor_value(t[2], 0);
    if (delta == 0)
        return FAIL(c, "delta is 0");
    double len = ceil((limit - start) / delta);
    int64_t n = len > 0 ? (int64_t)len : 0;
    if (n > FOLD_MAX_MADE)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_LIMIT,
                                  "a range of %lld elements is larger than import makes (%d)",
                                  (long long)n, FOLD_MAX_MADE);
    tt_gtensor *o = out(c, 0);
    set_shape(o, dt, 1, &n);
    size_t esize = (size_t)tt_dtype_bytes(dt);
    unsigned char *data = calloc((size_t)(n ? n : 1), esize);
    if (!data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * delta;
        unsigned char *p = data + (size_t)i * esize;
        switch (dt) {
        case TT_DT_FLOAT32: *(float *)p = (float)v; break;
        case TT_DT_FLOAT64: *(double *)p = v; break;
        case TT_DT_INT32: *(int32_t *)p = (int32_t)v; break;
        case TT_DT_INT64: *(int64_t *)p = (int64_t)v; break;
        default:
            free(data);
            return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                      "Range of %s values", tt_dtype_name(dt));
        }
    }
    tt_status s = make_const_bytes(c, data, (size_t)(n ? n : 1) * esize);
    free(data);
    return s;
}

/* Tile: each dimension times its repeat (a constant input); folded for a constant input. */
static tt_status infer_tile(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int64_t rep[TT_GRAPH_MAX_RANK], dims[TT_GRAPH_MAX_RANK];
    int n;
    tt_status s = const_ints(c, 1, "the repeats", rep, &n, TT_GRAPH_MAX_RANK);
    if (s)
        return s;
    if (n != x->rank)
        return FAIL(c, "has %d repeats for rank %d", n, x->rank);
    for (int d = 0; d < n; d++) {
        if (rep[d] < 1)
            return FAIL(c, "repeat %d is %lld", d, (long long)rep[d]);
        dims[d] = x->dims[d] * rep[d];
    }
    set_shape(out(c, 0), x->dtype, x->rank, dims);
    return fold_move(c, x, (move){MOVE_TILE, NULL, NULL, NULL});
}

/* DepthToSpace and SpaceToDepth: NCHW, blocks of blocksize x blocksize moved between the
 * channels and the rows and columns. */
static tt_status infer_depth_space(const ctx *c, bool to_space)
{
    const tt_gtensor *x = in(c, 0);
    int64_t b = attr_int(c, "blocksize", 0);
    if (x->rank != 4)
        return FAIL(c, "takes a rank-4 (NCHW) input, not rank %d", x->rank);
    if (b < 1)
        return FAIL(c, "blocksize is %lld", (long long)b);
    int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    if (to_space) {
        const char *mode = attr_str(c, "mode", "DCR");
        if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
            return FAIL(c, "mode '%s' is neither DCR nor CRD", mode);
        if (dims[1] % (b * b))
            return FAIL(c, "%lld channels are not a multiple of blocksize^2 (%lld)",
                        (long long)dims[1], (long long)(b * b));
        dims[1] /= b * b, dims[2] *= b, dims[3] *= b;
    } else {
        if (dims[2] % b || dims[3] % b)
            return FAIL(c, "the height and width (%lld, %lld) are not multiples of blocksize %lld",
                        (long long)dims[2], (long long)dims[3], (long long)b);
        dims[1] *= b * b, dims[2] /= b, dims[3] /= b;
    }
    set_shape(out(c, 0), x->dtype, 4, dims);
    return TT_OK;
}

static tt_status infer_depth_to_space(const ctx *c)
{
    return infer_depth_space(c, true);
}

static tt_status infer_space_to_depth(const ctx *c)
{
    return infer_depth_space(c, false);
}

/* ScatterND of constants (the masks exporters compute from shapes: Swin's shifted windows):
 * data with slices replaced by updates at the index tuples, folded at import.  Of a value
 * computed at run time it is refused. */
static tt_status infer_scatter_nd(const ctx *c)
{
    const tt_gtensor *x = in(c, 0), *idx = in(c, 1), *upd = in(c, 2);
    if (!idx || !upd)
        return FAIL(c, "needs three inputs (data, indices, updates)");
    if (idx->dtype != TT_DT_INT64 || idx->rank < 1)
        return FAIL(c, "indices must be int64 of rank 1 or more");
    int k = (int)idx->dims[idx->rank - 1];
    if (k < 1 || k > x->rank || upd->dtype != x->dtype || upd->rank != idx->rank - 1 + x->rank - k)
        return FAIL(c,
                    "indices (last dimension %d) and updates (rank %d) do not fit the data "
                    "(rank %d)",
                    k, upd->rank, x->rank);
    for (int d = 0; d < upd->rank; d++)
        if (upd->dims[d] != (d < idx->rank - 1 ? idx->dims[d] : x->dims[d - (idx->rank - 1) + k]))
            return FAIL(c, "updates dimension %d is %lld, not what the indices and data make", d,
                        (long long)upd->dims[d]);
    const char *red = attr_str(c, "reduction", "none");
    if (strcmp(red, "none"))
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "reduction '%s' is not supported", red);
    tt_gtensor *o = out(c, 0);
    set_shape(o, x->dtype, x->rank, x->dims);
    for (int i = 0; i < 3; i++)
        if (in(c, i)->kind != TT_GT_CONST)
            return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                      "input %d ('%s') is computed at run time; ScatterND is "
                                      "folded at import, of constants only",
                                      i, in(c, i)->name);
    int64_t numel = tt_gtensor_numel(o), slice = 1, tuples = tt_gtensor_numel(idx) / k;
    if (numel > FOLD_MAX_MADE)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_LIMIT,
                                  "a constant of %lld elements is larger than import makes (%d)",
                                  (long long)numel, FOLD_MAX_MADE);
    for (int d = k; d < x->rank; d++)
        slice *= x->dims[d];
    size_t esize = (size_t)tt_dtype_bytes(x->dtype);
    unsigned char *data = malloc((size_t)(numel ? numel : 1) * esize);
    if (!data)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    memcpy(data, x->data, (size_t)numel * esize);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t at = 0;
        for (int d = 0; d < k; d++) {
            int64_t i = ival(idx, t * k + d);
            if (i < -x->dims[d] || i >= x->dims[d]) {
                free(data);
                return FAIL(c, "index %lld is out of range for dimension %d (%lld)", (long long)i,
                            d, (long long)x->dims[d]);
            }
            at = at * x->dims[d] + (i < 0 ? i + x->dims[d] : i);
        }
        memcpy(data + (size_t)(at * slice) * esize,
               (const unsigned char *)upd->data + (size_t)(t * slice) * esize,
               (size_t)slice * esize);
    }
    tt_status s = make_const_bytes(c, data, (size_t)(numel ? numel : 1) * esize);
    free(data);
    return s;
}

/* GatherElements: the indices' shape, the data's type; indices of the data's rank, no larger
 * than it off the axis, and (when constant) in range. */
static tt_status infer_gather_elements(const ctx *c)
{
    const tt_gtensor *x = in(c, 0), *idx = in(c, 1);
    int axis;
    tt_status s = gather_indices(c, &axis);
    if (s)
        return s;
    if (idx->rank != x->rank)
        return FAIL(c, "indices have rank %d, the data %d", idx->rank, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != axis && idx->dims[d] > x->dims[d])
            return FAIL(c, "indices dimension %d (%lld) is larger than the data's (%lld)", d,
                        (long long)idx->dims[d], (long long)x->dims[d]);
    set_shape(out(c, 0), x->dtype, idx->rank, idx->dims);
    return TT_OK;
}

/* ArgMax, ArgMin: int64 indices along `axis`, kept as 1 (keepdims) or dropped. */
static tt_status infer_arg(const ctx *c)
{
    const tt_gtensor *x = in(c, 0);
    int axis;
    tt_status s = axis_of(c, attr_int(c, "axis", 0), x->rank, &axis);
    if (s)
        return s;
    int64_t dims[TT_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != axis || attr_int(c, "keepdims", 1))
            dims[r++] = d == axis ? 1 : x->dims[d];
    set_shape(out(c, 0), TT_DT_INT64, r, dims);
    return TT_OK;
}

/* ---- Resize ---- */

/* Where output element o of a resized axis (`out` of `in` elements, `scale` the ratio given or
 * out / in) reads its input, by coordinate_transformation_mode (ONNX's formulas, in doubles as
 * its reference does; align_corners divides by the length in x scale, not rounded). */
static double resize_source(const char *ctm, int64_t o, int64_t in, int64_t out, double scale)
{
    double x = (double)o, length = (double)in * scale; /* not rounded, as ONNX's reference */
    if (!strcmp(ctm, "align_corners"))
        return length == 1 ? 0 : x * (double)(in - 1) / (length - 1);
    if (!strcmp(ctm, "asymmetric"))
        return x / scale;
    if (!strcmp(ctm, "tf_half_pixel_for_nn"))
        return (x + 0.5) / scale;
    if (!strcmp(ctm, "pytorch_half_pixel") && out == 1)
        return 0;
    if (!strcmp(ctm, "half_pixel_symmetric")) /* opset 19: centred when out < in x scale */
        return (double)in / 2 * (1 - (double)out / length) + (x + 0.5) / scale - 0.5;
    return (x + 0.5) / scale - 0.5; /* half_pixel, pytorch_half_pixel */
}

static int64_t clamp_index(double v, int64_t in)
{
    return v < 0 ? 0 : v > (double)(in - 1) ? in - 1 : (int64_t)v;
}

/* A constant rank-1 table of n values (int64 indices or weights of `dt`) named for node output
 * `base`; its tensor index, or -1 when out of memory. */
static int resize_table(const ctx *c, const char *base, const char *what, int d, tt_dtype dt,
                        const double *v, int64_t n)
{
    char name[512];
    snprintf(name, sizeof(name), "%s/resize_%s_%d", base, what, d);
    int t = tt__graph_add_tensor(c->g, name, TT_GT_CONST);
    if (t < 0)
        return -1;
    tt_gtensor *x = &c->g->tensors.data[t];
    x->dtype = dt;
    x->rank = 1;
    x->dims[0] = n;
    if (!(x->data = tt_arena_alloc(&c->g->arena, (size_t)n * (size_t)tt_dtype_bytes(dt))))
        return -1;
    for (int64_t i = 0; i < n; i++)
        tt__gtensor_set(x, i, v[i]);
    return t;
}

/* Resize (opset 11-22): the output shape from `sizes`, or from `scales` (floor(in x scale)); the
 * modes nearest (every nearest_mode) and linear, every coordinate_transformation_mode but
 * tf_crop_and_resize.  Each resized axis gets constant tables, appended to the node's inputs
 * after its four (at 4 + 4d: the first and second index read along axis d, and their weights
 * for linear), so that the kernel reads x[.., i0[h], ..] without arithmetic of its own. */
static tt_status infer_resize(const ctx *c)
{
    tt_gnode *nd = node_of(c);
    const tt_gtensor *x = in(c, 0), *scales = in(c, 2), *sizes = in(c, 3);
    const char *mode = attr_str(c, "mode", "nearest"),
               *ctm = attr_str(c, "coordinate_transformation_mode", "half_pixel"),
               *nearest = attr_str(c, "nearest_mode", "round_prefer_floor");
    bool linear = !strcmp(mode, "linear");
    if (!linear && strcmp(mode, "nearest"))
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "mode '%s' is not supported (nearest and linear are)", mode);
    static const char *const modes[] = {"half_pixel",           "pytorch_half_pixel",
                                        "align_corners",        "asymmetric",
                                        "tf_half_pixel_for_nn", "half_pixel_symmetric"};
    bool known = false;
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        known |= !strcmp(ctm, modes[i]);
    if (!known)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "coordinate_transformation_mode '%s' is not supported", ctm);
    if (!linear && strcmp(nearest, "round_prefer_floor") && strcmp(nearest, "round_prefer_ceil") &&
        strcmp(nearest, "floor") && strcmp(nearest, "ceil"))
        return FAIL(c, "nearest_mode '%s' is not one of ONNX's", nearest);
    if (linear && !tt_dtype_is_float(x->dtype))
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "linear Resize of %s values", tt_dtype_name(x->dtype));
    int R = x->rank;
    int64_t dims[TT_GRAPH_MAX_RANK];
    double scale[TT_GRAPH_MAX_RANK];
    tt_status s;
    /* opset 18: the scales or sizes may be of some axes only, the others kept */
    int axes[TT_GRAPH_MAX_RANK], na = R;
    size_t nattr = 0;
    const int64_t *attr_axes = attr_ints(c, "axes", &nattr);
    if (attr_axes && (nattr < 1 || nattr > (size_t)R))
        return FAIL(c, "has %zu axes for rank %d", nattr, R);
    if (attr_axes)
        na = (int)nattr;
    if ((s = distinct_axes(c, attr_axes, na, R, "is given", axes)))
        return s;
    for (int d = 0; d < R; d++)
        dims[d] = x->dims[d], scale[d] = 1;
    const char *policy = attr_str(c, "keep_aspect_ratio_policy", "stretch");
    if (sizes && tt_gtensor_numel(sizes) > 0) {
        int64_t given[TT_GRAPH_MAX_RANK];
        int n;
        if ((s = const_ints(c, 3, "the sizes", given, &n, TT_GRAPH_MAX_RANK)))
            return s;
        if (n != na)
            return FAIL(c, "has %d sizes for %d axes", n, na);
        bool larger = !strcmp(policy, "not_smaller"), stretch = !strcmp(policy, "stretch");
        if (!larger && !stretch && strcmp(policy, "not_larger"))
            return FAIL(c, "keep_aspect_ratio_policy '%s' is not one of ONNX's", policy);
        /* not_larger / not_smaller: one scale for all the axes, the least / greatest */
        double keep = larger ? 0 : INFINITY;
        for (int i = 0; i < na; i++) {
            double r = (double)given[i] / (double)x->dims[axes[i]];
            keep = larger ? fmax(keep, r) : fmin(keep, r);
        }
        for (int i = 0; i < na; i++) {
            int d = axes[i];
            dims[d] = stretch ? given[i] : (int64_t)floor((double)x->dims[d] * keep + 0.5);
            scale[d] = stretch ? (double)dims[d] / (double)x->dims[d] : keep;
        }
    } else if (scales && tt_gtensor_numel(scales) > 0) {
        if (scales->kind != TT_GT_CONST)
            return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                      "the scales (input 2, '%s') are computed at run time; "
                                      "networks are built for static shapes",
                                      scales->name);
        if (tt_gtensor_numel(scales) != na || !tt_dtype_is_float(scales->dtype))
            return FAIL(c, "needs %d float scales", na);
        for (int i = 0; i < na; i++) {
            int d = axes[i];
            scale[d] = tt__gtensor_value(scales, i);
            if (!(scale[d] > 0))
                return FAIL(c, "scale %d is %g", i, scale[d]);
            dims[d] = (int64_t)floor((double)x->dims[d] * scale[d]);
        }
    } else {
        return FAIL(c, "needs scales or sizes");
    }
    /* opset 18's antialias filters a linear downscale over more than two inputs an output */
    bool shrinks = false;
    for (int d = 0; d < R; d++)
        shrinks |= dims[d] < x->dims[d];
    if (linear && attr_int(c, "antialias", 0) && shrinks)
        return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                                  "antialias (opset 18) of a linear downscale is not supported");
    for (int d = 0; d < R; d++)
        if (dims[d] < 1)
            return FAIL(c, "dimension %d of the result would be %lld", d, (long long)dims[d]);
    set_shape(out(c, 0), x->dtype, R, dims);
    const char *base = out(c, 0)->name;
    tt_dtype wdt = x->dtype;
    int64_t xdims[TT_GRAPH_MAX_RANK];
    memcpy(xdims, x->dims, sizeof(xdims)); /* x moves when tables are added */
    int *inputs = tt_arena_alloc(&c->g->arena, sizeof(int) * (size_t)(4 + 4 * R));
    if (!inputs)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 4 + 4 * R; i++)
        inputs[i] = i < 4 && i < nd->ninputs ? nd->inputs[i] : -1;
    for (int d = 0; d < R; d++) {
        int64_t n = dims[d], len = xdims[d];
        double *t = malloc(sizeof(double) * 4 * (size_t)n);
        if (!t)
            return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
        double *i0 = t, *i1 = t + n, *w0 = t + 2 * n, *w1 = t + 3 * n;
        bool identity = n == len;
        for (int64_t o = 0; o < n; o++) {
            double v = resize_source(ctm, o, len, n, scale[d]);
            if (linear) {
                double f = floor(v);
                i0[o] = (double)clamp_index(f, len);
                i1[o] = (double)clamp_index(f + 1, len);
                w1[o] = v - f;
                w0[o] = 1 - w1[o];
                identity &= i0[o] == (double)o && w1[o] == 0;
            } else {
                double r = !strcmp(nearest, "floor")               ? floor(v)
                           : !strcmp(nearest, "ceil")              ? ceil(v)
                           : !strcmp(nearest, "round_prefer_ceil") ? floor(v + 0.5)
                                                                   : ceil(v - 0.5);
                i0[o] = (double)clamp_index(r, len);
                identity &= i0[o] == (double)o;
            }
        }
        if (!identity) {
            const char *what[4] = {"i0", "i1", "w0", "w1"};
            for (int k = 0; k < (linear ? 4 : 1); k++)
                if ((inputs[4 + 4 * d + k] = resize_table(
                         c, base, what[k], d, k < 2 ? TT_DT_INT64 : wdt, t + k * n, n)) < 0) {
                    free(t);
                    return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
                }
        }
        free(t);
    }
    nd = node_of(c);
    nd->inputs = inputs;
    nd->ninputs = 4 + 4 * R;
    return TT_OK;
}

/* Our own operators (ConvWinograd) come from tt_net_build, never from a model. */
static tt_status infer_internal(const ctx *c)
{
    return tt__graph_node_err(c->g, c->node, c->err, TT_ERR_UNSUPPORTED,
                              "is not an ONNX operator: tvm-tune's own, written by its Winograd "
                              "rewrite of 3x3 convolutions");
}

/* Constant nodes become constants at import and never reach the rules. */
static tt_status infer_none(const ctx *c)
{
    return FAIL(c, "no shape rule");
}

static tt_status infer_node(const ctx *c)
{
    tt_gnode *n = node_of(c);
    tt_gtensor *x = in(c, 0);
    if (!x && n->op != TT_GOP_CONSTANT)
        return FAIL(c, "its first input is missing");
    if (!out(c, 0))
        return FAIL(c, "its first output is unnamed");
    switch (n->op) {
#define TT_GOP_RULE(e, name, pattern, layout, shape, ...)                                          \
    case TT_GOP_##e: return infer_##shape(c);
        TT_GOP_LIST(TT_GOP_RULE)
#undef TT_GOP_RULE
    case TT_GOP_COUNT: break;
    }
    return FAIL(c, "no shape rule");
}

tt_status tt__graph_infer(tt_graph *g, tt_errbuf *err)
{
    for (size_t i = 0; i < g->nodes.len; i++) {
        if (g->nodes.data[i].removed)
            continue;
        ctx c = {g, (int)i, err};
        tt_status s = infer_node(&c);
        if (s)
            return s;
        const tt_gnode *n = &g->nodes.data[i];
        for (int k = 0; k < n->noutputs; k++) {
            const tt_gtensor *o = n->outputs[k] >= 0 ? &g->tensors.data[n->outputs[k]] : NULL;
            /* an empty constant is shape arithmetic's business (Swin's empty mask slices) */
            if (o && o->rank > 0 && tt_gtensor_numel(o) <= 0 && o->kind != TT_GT_CONST)
                return tt__graph_node_err(g, (int)i, err, TT_ERR_UNSUPPORTED,
                                          "output %d ('%s') would be empty (empty tensors are "
                                          "not supported)",
                                          k, o->name);
        }
    }
    return TT_OK;
}

tt_status tt__graph_window(const tt_graph *g, int node, tt__window *w, tt_errbuf *err)
{
    ctx c = {(tt_graph *)g, node, err};
    const tt_gtensor *x = in(&c, 0), *wt = in(&c, 1);
    int nk = x->rank - 2;
    size_t nks;
    const int64_t *ks = attr_ints(&c, "kernel_shape", &nks);
    static const int64_t three_by_three[2] = {3, 3};
    if (!ks && node_of(&c)->op == TT_GOP_CONV && wt)
        ks = wt->dims + 2;
    else if (!ks && node_of(&c)->op == TT_GOP_CONV_WINOGRAD)
        ks = three_by_three; /* its weights are the transformed ones (winograd.c) */
    if (!ks || nk < 1 || nk > TT__MAX_WINDOW)
        return FAIL(&c, "no kernel shape, or more than %d spatial dimensions", TT__MAX_WINDOW);
    return window(&c, x, ks, nk, true, w);
}

tt_status tt__graph_slice(const tt_graph *g, int node, int64_t *first, int64_t *step,
                          tt_errbuf *err)
{
    ctx c = {(tt_graph *)g, node, err};
    int64_t dims[TT_GRAPH_MAX_RANK];
    return slice_params(&c, first, step, dims);
}
