/* Convolutions computed region by region where their padding covers many of their taps.
 * DeepLabV3's atrous pyramid convolves its 28x28 (MobileNet: 14x14) features with 3x3 kernels
 * dilated by 12, 24 and 36, padded as much: with dilation 36 every tap but the centre reads only
 * padding, with 24 the outer taps reach 4 rows of 28.  Computed as written, 82-89% of those
 * multiply-adds add zeros (DeepLabV3-ResNet50: 105 of its 212 ms); ONNX Runtime's NCHWc kernels
 * skip such taps.  Here the output is cut, along each spatial axis, into bands whose outputs read
 * the same taps inside the input:
 *
 *     axis of 28 outputs, taps at -24, 0, +24:   [0, 4) taps 0, +24   [4, 24) tap 0   [24, 28) taps
 * -24, 0
 *
 * and each region (a band of rows by a band of columns) becomes a convolution of its own with
 * only those taps, reading the input where its taps land.  The regions share the weights, each
 * reading its taps from TT_NET_FIRST_TAP on (copies would take DeepLabV3's 3x3 weights 5.4x,
 * 96 MiB more); a Conv left with one region gets its taps' slice instead, so that a 1x1 one is
 * a 1x1 convolution to te_write.c's pixel rows.  The region convolution's pads are
 * negative, a crop, which tt__graph_window accepts for the nodes built here (ONNX models'
 * pads stay >= 0) and te_write.c reads as an offset, with no padding stage.  Concats along the
 * columns, then the rows, put the regions back together: two passes over the output, against
 * the multiply-adds of the skipped taps.  The multiply-adds left are exactly those that read the
 * input.
 *
 * Where: a float Conv with constant weights and 1 or 2 spatial dimensions, every output reading at
 * least one tap inside the input, whose regions do at most TT_NET_REGION_MAX_WORK of the whole's
 * multiply-adds, in at most MAX_REGIONS regions, with at least MIN_GROUP_CHANNELS input channels
 * per group.  ResNet's 3x3 convolutions padded by 1 (98% of
 * the work at 56x56) stay whole, as do DeepLabV3's backbone convolutions dilated by 2 and 4 (91%
 * and 82%). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_int.h"

enum { MAX_REGIONS = 32, MAX_BANDS = 2 * 16 - 1, MIN_GROUP_CHANNELS = 8 };

/* Outputs [start, start + len) of one spatial axis read taps [klo, khi] inside the input. */
typedef struct {
    int64_t start, len;
    int klo, khi;
} band;

typedef TT_VEC(tt_gnode) node_vec;

typedef struct {
    int nk;
    band bands[2][MAX_BANDS];
    int nbands[2];
} regions;

/* The bands of spatial axis i; false when an output reads no tap inside the input or there are
 * too many. */
static bool axis_bands(const tt__window *win, int i, int64_t in, band *bands, int *n)
{
    int64_t K = win->kernel[i], s = win->stride[i], d = win->dilation[i];
    *n = 0;
    for (int64_t o = 0; o < win->out[i]; o++) {
        int64_t base = o * s - win->pad_begin[i]; /* tap 0's input position */
        int64_t klo = base >= 0 ? 0 : (-base + d - 1) / d;
        int64_t khi = in - 1 - base < 0 ? -1 : (in - 1 - base) / d;
        if (khi > K - 1)
            khi = K - 1;
        if (klo > khi)
            return false;
        band *last = *n ? &bands[*n - 1] : NULL;
        if (last && last->klo == klo && last->khi == khi) {
            last->len++;
            continue;
        }
        if (*n == MAX_BANDS)
            return false;
        bands[(*n)++] = (band){o, 1, (int)klo, (int)khi};
    }
    return true;
}

/* The regions of Conv node `node` when the rewrite takes it. */
static bool plan_regions(const tt_graph *g, int node, regions *r)
{
    const tt_gnode *n = &g->nodes.data[node];
    if (n->removed || n->op != TT_GOP_CONV || n->ninputs < 2 || n->inputs[0] < 0 ||
        n->inputs[1] < 0 || n->noutputs < 1 || n->outputs[0] < 0)
        return false;
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *W = &g->tensors.data[n->inputs[1]];
    /* A depthwise convolution waits on memory, not on its multiply-adds: the Concats would cost
     * more than the taps save. */
    if (W->kind != TT_GT_CONST || W->permuted || !tt_dtype_is_float(W->dtype) ||
        (x->rank != 3 && x->rank != 4) || W->rank != x->rank || W->dims[1] < MIN_GROUP_CHANNELS)
        return false;
    tt__window win;
    tt_errbuf ignored = {{0}};
    if (tt__graph_window(g, node, &win, &ignored))
        return false;
    r->nk = win.nk;
    double kept = 1;
    int count = 1;
    for (int i = 0; i < win.nk; i++) {
        if (!axis_bands(&win, i, x->dims[2 + i], r->bands[i], &r->nbands[i]))
            return false;
        int64_t taps = 0;
        for (int b = 0; b < r->nbands[i]; b++)
            taps += r->bands[i][b].len * (r->bands[i][b].khi - r->bands[i][b].klo + 1);
        kept *= (double)taps / (double)(win.out[i] * win.kernel[i]);
        count *= r->nbands[i];
    }
    return kept <= TT_NET_REGION_MAX_WORK && count <= MAX_REGIONS;
}

/* A new value tensor like `like` with spatial extents `ext`; its index or -1. */
static int new_value(tt_graph *g, int like, const char *suffix, const int64_t *ext, int nk)
{
    char name[256];
    snprintf(name, sizeof(name), "%s/%s", g->tensors.data[like].name, suffix);
    int t = tt__graph_add_tensor(g, name, TT_GT_VALUE);
    if (t < 0)
        return -1;
    tt_gtensor *y = &g->tensors.data[t], *l = &g->tensors.data[like];
    y->dtype = l->dtype;
    y->rank = l->rank;
    memcpy(y->dims, l->dims, sizeof(y->dims));
    for (int i = 0; i < nk; i++)
        y->dims[2 + i] = ext[i];
    return t;
}

/* The weights of taps [klo[i], khi[i]] of W [CO, CI, K...]: a new constant, or -1. */
static int slice_weights(tt_graph *g, int w, const band *const *b, int nk)
{
    const tt_gtensor *W = &g->tensors.data[w];
    int64_t dims[4] = {W->dims[0], W->dims[1], 1, 1}, K1 = nk == 2 ? W->dims[3] : 1;
    for (int i = 0; i < nk; i++)
        dims[2 + i] = b[i]->khi - b[i]->klo + 1;
    char name[256];
    snprintf(name, sizeof(name), "%s/taps", W->name);
    tt_dtype dt = W->dtype;
    int u = tt__net_new_const(g, name, dt, W->rank, dims);
    if (u < 0)
        return -1;
    W = &g->tensors.data[w]; /* tt__net_new_const may move the tensors */
    const char *src = W->data;
    char *dst = g->tensors.data[u].data;
    size_t eb = (size_t)tt_dtype_bytes(dt);
    int64_t K0 = W->dims[2], n1 = nk == 2 ? dims[3] : 1, lo1 = nk == 2 ? b[1]->klo : 0;
    for (int64_t oc = 0; oc < W->dims[0] * W->dims[1]; oc++)
        for (int64_t a = 0; a < dims[2]; a++) {
            int64_t from = (oc * K0 + b[0]->klo + a) * K1 + lo1, to = (oc * dims[2] + a) * n1;
            memcpy(dst + (size_t)to * eb, src + (size_t)from * eb, (size_t)n1 * eb);
        }
    return u;
}

/* Attributes of the node for region b of Conv `c` (window win over an input of extents `in`):
 * c's own, with the taps' kernel shape, the pads that place them and, where the region reads the
 * whole kernel's weights (`shared`), its first tap. */
static tt_status region_attrs(tt_graph *g, const tt_gnode *c, const tt__window *win,
                              const int64_t *in, const band *const *b, bool shared, tt_gnode *n,
                              tt_errbuf *err)
{
    int nk = win->nk;
    tt_gattr *at = tt_arena_alloc(&g->arena, (size_t)(c->nattrs + 3) * sizeof(tt_gattr));
    int64_t *pads = tt_arena_alloc(&g->arena, 2 * (size_t)nk * sizeof(int64_t)),
            *ks = tt_arena_alloc(&g->arena, (size_t)nk * sizeof(int64_t)),
            *first = tt_arena_alloc(&g->arena, (size_t)nk * sizeof(int64_t));
    if (!at || !pads || !ks || !first)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    int na = 0;
    for (int a = 0; a < c->nattrs; a++)
        if (strcmp(c->attrs[a].name, "pads") && strcmp(c->attrs[a].name, "kernel_shape") &&
            strcmp(c->attrs[a].name, "auto_pad"))
            at[na++] = c->attrs[a];
    for (int i = 0; i < nk; i++) {
        int64_t s = win->stride[i], d = win->dilation[i], taps = b[i]->khi - b[i]->klo + 1;
        ks[i] = taps;
        first[i] = b[i]->klo;
        /* the band's first output reads tap klo at (start * s - pad + klo * d): pad there */
        pads[i] = win->pad_begin[i] - b[i]->start * s - b[i]->klo * d;
        /* and its last reads tap khi inside the input: the end pad that gives len outputs */
        pads[nk + i] = (b[i]->len - 1) * s + (taps - 1) * d + 1 - in[i] - pads[i];
    }
    at[na++] = (tt_gattr){.name = "pads", .kind = TT_GATTR_INTS, .ints = pads, .n = 2 * (size_t)nk};
    at[na++] =
        (tt_gattr){.name = "kernel_shape", .kind = TT_GATTR_INTS, .ints = ks, .n = (size_t)nk};
    if (shared)
        at[na++] = (tt_gattr){
            .name = TT_NET_FIRST_TAP, .kind = TT_GATTR_INTS, .ints = first, .n = (size_t)nk};
    n->attrs = at;
    n->nattrs = na;
    return TT_OK;
}

/* A node of `op` reading `in` (n of them) into `out`; its attributes are set by the caller. */
static tt_status new_node(tt_graph *g, tt_gop op, const char *name, const int *in, int n, int out,
                          tt_gnode *node, tt_errbuf *err)
{
    memset(node, 0, sizeof(*node));
    node->op = op;
    node->name = tt_arena_strdup(&g->arena, name);
    node->inputs = tt__graph_copy(g, in, (size_t)n * sizeof(int));
    node->outputs = tt__graph_copy(g, &out, sizeof(int));
    if (!node->name || !node->inputs || !node->outputs)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    node->ninputs = n;
    node->noutputs = 1;
    return TT_OK;
}

static tt_status concat_node(tt_graph *g, const char *name, const int *in, int n, int axis, int out,
                             tt_gnode *node, tt_errbuf *err)
{
    tt_status s = new_node(g, TT_GOP_CONCAT, name, in, n, out, node, err);
    tt_gattr *at = s ? NULL : tt_arena_alloc(&g->arena, sizeof(tt_gattr));
    if (!s && !at)
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (s)
        return s;
    *at = (tt_gattr){.name = "axis", .kind = TT_GATTR_INT, .i = axis};
    node->attrs = at;
    node->nattrs = 1;
    return TT_OK;
}

/* Appends to `nodes` the region convolutions of Conv `ci` and the Concats joining them into its
 * output. */
static tt_status split(tt_graph *g, int ci, const regions *r, node_vec *nodes, tt_errbuf *err)
{
    tt_gnode c = g->nodes.data[ci];
    tt__window win;
    tt_status s = tt__graph_window(g, ci, &win, err);
    if (s)
        return s;
    int x = c.inputs[0], w = c.inputs[1], y = c.outputs[0], nk = r->nk;
    int64_t in[2] = {g->tensors.data[x].dims[2], nk == 2 ? g->tensors.data[x].dims[3] : 1};
    int nb0 = r->nbands[0], nb1 = nk == 2 ? r->nbands[1] : 1;
    int rows[MAX_BANDS];
    for (int b0 = 0; b0 < nb0; b0++) {
        int cols[MAX_REGIONS];
        int64_t row_ext[2] = {r->bands[0][b0].len, win.out[nk - 1]};
        for (int b1 = 0; b1 < nb1; b1++) {
            const band *b[2] = {&r->bands[0][b0], nk == 2 ? &r->bands[1][b1] : NULL};
            int64_t ext[2] = {b[0]->len, nk == 2 ? b[1]->len : 0};
            char sfx[64], name[300];
            snprintf(sfx, sizeof(sfx), "region%d_%d", b0, b1);
            snprintf(name, sizeof(name), "%s/%s", c.name, sfx);
            /* one region: the taps' slice of the weights, and the node's own output */
            bool one = nb0 * nb1 == 1;
            int ws = one ? slice_weights(g, w, b, nk) : w;
            int out = one ? y : new_value(g, y, sfx, ext, nk);
            if (ws < 0 || out < 0)
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            int ins[3] = {x, ws, c.ninputs > 2 ? c.inputs[2] : -1};
            tt_gnode n;
            if ((s = new_node(g, TT_GOP_CONV, name, ins, c.ninputs > 2 ? 3 : 2, out, &n, err)) ||
                (s = region_attrs(g, &c, &win, in, b, !one, &n, err)))
                return s;
            if (TT_VEC_PUSH(nodes, n))
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            cols[b1] = out;
        }
        rows[b0] = cols[0];
        if (nb1 > 1) { /* the band's regions side by side */
            char sfx[64], name[300];
            snprintf(sfx, sizeof(sfx), "band%d", b0);
            snprintf(name, sizeof(name), "%s/%s", c.name, sfx);
            int out = nb0 == 1 ? y : new_value(g, y, sfx, row_ext, nk);
            tt_gnode n;
            if (out < 0)
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            if ((s = concat_node(g, name, cols, nb1, 2 + nk - 1, out, &n, err)))
                return s;
            if (TT_VEC_PUSH(nodes, n))
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            rows[b0] = out;
        }
    }
    if (nb0 > 1) { /* the bands one above the other */
        char name[300];
        snprintf(name, sizeof(name), "%s/bands", c.name);
        tt_gnode n;
        if ((s = concat_node(g, name, rows, nb0, 2, y, &n, err)))
            return s;
        if (TT_VEC_PUSH(nodes, n))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return TT_OK;
}

tt_status tt__net_split_padded_convs(tt_graph *g, int *split_convs, tt_errbuf *err)
{
    *split_convs = 0;
    size_t n = g->nodes.len;
    bool any = false;
    for (size_t i = 0; i < n && !any; i++) {
        regions r;
        any = plan_regions(g, (int)i, &r);
    }
    if (!any)
        return TT_OK;
    /* The nodes stay in topological order: each split Conv's nodes take its place. */
    node_vec nodes = {0};
    tt_status s = TT_OK;
    for (size_t i = 0; i < n && !s; i++) {
        regions r;
        if (plan_regions(g, (int)i, &r)) {
            s = split(g, (int)i, &r, &nodes, err);
            ++*split_convs;
        } else if (TT_VEC_PUSH(&nodes, g->nodes.data[i]))
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    if (s) {
        TT_VEC_FREE(&nodes);
        return s;
    }
    TT_VEC_FREE(&g->nodes);
    g->nodes.data = nodes.data;
    g->nodes.len = nodes.len;
    g->nodes.cap = nodes.cap;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *nd = &g->nodes.data[i];
        for (int k = 0; !nd->removed && k < nd->noutputs; k++)
            if (nd->outputs[k] >= 0)
                g->tensors.data[nd->outputs[k]].producer = (int)i;
    }
    return TT_OK;
}
