/* Layouts: which activations a network stores channels last (NHWC, NWC, NDHWC), and convolution
 * weights stored HWIO, as TVM's ConvertLayout does for x86 and ARM.  In the model's NCHW a
 * convolution's natural vector axis is the output width, which a stride turns into a gather and
 * a 7-wide layer leaves mostly empty; channels last puts output channels in the vector lanes for
 * every stride and size, with the input value broadcast: the register-blocked micro-kernel that
 * our library convolutions (conv2d_nhwc) and oneDNN's run.
 *
 * Nothing is inserted into the graph: a layout is a permutation of a tensor's memory (tt_gtensor
 * perm), and every kernel reads and writes each tensor through it (te_write.c).  The transforms
 * therefore happen inside the kernels at the edges of the channels-last region: the first
 * convolution reads the NCHW input and writes NHWC, and the kernel before a Flatten or a graph
 * output writes the model's order again.
 *
 * A Transpose is a permutation of memory too: where the order that makes its output the same
 * memory as its input is one a tensor may take, it takes it and the Transpose is a view; so
 * are a Pad that pads nothing and a Slice of everything.
 * ConvNeXt's and Swin's permutes between NCHW and NHWC (x.permute(0, 2, 3, 1) around each
 * LayerNorm and MLP) then cost nothing, and the convolutions after them read channels last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_int.h"

/* Operators whose kernels write their output in any layout (te_write.c: every statement through
 * the node's logical variables): the LAYOUT column of the operator table (graph.h).  Readers
 * need nothing: every kernel reads any layout. */
static bool writes_any_layout(tt_gop op)
{
    static const bool any[TT_GOP_COUNT] = {
#define ANY                                          true
#define ROW                                          false
#define TT_GOP_LAYOUT(e, name, pattern, layout, ...) [TT_GOP_##e] = layout,
        TT_GOP_LIST(TT_GOP_LAYOUT)
#undef TT_GOP_LAYOUT
#undef ROW
#undef ANY
    };
    return (unsigned)op < TT_GOP_COUNT && any[op];
}

/* Channels last for a rank-R tensor whose K dimensions after the batch are its channels:
 * {0, K+1, ..., R-1, 1, ..., K}.  K = 1 is NHWC; ShuffleNet's channel shuffle regroups NHWC's
 * [N, C, H, W] as [N, 2, C/2, H, W] stored [N, H, W, 2, C/2] (K = 2), the same memory. */
static void channels_last_k(int R, int K, uint8_t *perm)
{
    int k = 0;
    perm[k++] = 0;
    for (int d = K + 1; d < R; d++)
        perm[k++] = (uint8_t)d;
    for (int d = 1; d <= K; d++)
        perm[k++] = (uint8_t)d;
}

/* The K of a memory order perm of rank R that is channels_last_k's, else 0. */
static int channels_of_order(int R, const uint8_t *perm)
{
    uint8_t p[TT_GRAPH_MAX_RANK];
    for (int K = 1; K <= R - 2; K++) {
        channels_last_k(R, K, p);
        if (!memcmp(p, perm, (size_t)R))
            return K;
    }
    return 0;
}

/* The K of a tensor stored channels last, else 0. */
static int channel_dims(const tt_gtensor *t)
{
    return t->permuted ? channels_of_order(t->rank, t->perm) : 0;
}

/* Whether perm moves data at all: the dimensions larger than 1 keep their order ([N, C, 1, 1]
 * channels last is the same memory as row-major). */
static bool moves_data(const tt_gtensor *t, const uint8_t *perm)
{
    int last = -1;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[perm[k]] == 1)
            continue;
        if (perm[k] < last)
            return true;
        last = perm[k];
    }
    return false;
}

/* The memory order HWIO of a rank-R convolution weight [CO, CI/G, K...]: {2, ..., R-1, 1, 0}. */
static void hwio_order(int R, uint8_t *perm)
{
    for (int k = 0; k < R - 2; k++)
        perm[k] = (uint8_t)(k + 2);
    perm[R - 2] = 1;
    perm[R - 1] = 0;
}

/* A convolution weight [CO, CI/G, K...] as HWIO [K..., CI/G, CO]: output channels contiguous, the
 * vector a channels-last kernel loads per tap. */
static int hwio_copy(tt_graph *g, int w)
{
    const tt_gtensor *W = &g->tensors.data[w];
    char name[256];
    snprintf(name, sizeof(name), "%s.hwio", W->name);
    int64_t dims[TT_GRAPH_MAX_RANK]; /* adding a tensor may move W */
    memcpy(dims, W->dims, sizeof(dims));
    int nw = tt__net_new_const(g, name, W->dtype, W->rank, dims);
    if (nw < 0)
        return -1;
    W = &g->tensors.data[w];
    tt_gtensor *NW = &g->tensors.data[nw];
    int R = W->rank;
    NW->permuted = true;
    hwio_order(R, NW->perm);
    /* physical strides of each logical dimension */
    int64_t stride[TT_GRAPH_MAX_RANK], s = 1;
    for (int k = R - 1; k >= 0; k--) {
        stride[NW->perm[k]] = s;
        s *= W->dims[NW->perm[k]];
    }
    size_t es = (size_t)tt_dtype_bytes(W->dtype);
    int64_t idx[TT_GRAPH_MAX_RANK] = {0}, n = tt_gtensor_numel(W);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < R; d++)
            off += idx[d] * stride[d];
        memcpy((char *)NW->data + (size_t)off * es, (const char *)W->data + (size_t)i * es, es);
        for (int d = R - 1; d >= 0 && ++idx[d] == W->dims[d]; d--)
            idx[d] = 0;
    }
    return nw;
}

/* The K of y where a Reshape of x, stored channels last with K = kx, is the same memory as y
 * stored channels last with that K: the batch kept, x's channel dimensions regrouped into y's
 * first K after the batch and its spatial ones into the rest, at least one of them; -1 where
 * there is none. */
static int regrouped_channels(const tt_gtensor *x, int kx, const tt_gtensor *y)
{
    if (x->rank < 3 || y->rank < 3 || x->dims[0] != y->dims[0])
        return -1;
    int64_t cx = 1, sx = 1, c = 1, s = 1;
    for (int d = 1; d < x->rank; d++)
        *(d <= kx ? &cx : &sx) *= x->dims[d];
    int ky = 0;
    while (ky + 1 < y->rank - 1 && c < cx)
        c *= y->dims[++ky];
    /* channels split in more than one dimension, each more than 1: a dimension of 1 among them
     * ([N, 1, C, H*W]) is an Unsqueeze, after which a channels-last form helps no reader */
    for (int d = 1; ky > 1 && d <= ky; d++)
        if (y->dims[d] == 1)
            return -1;
    for (int d = ky + 1; d < y->rank; d++)
        s *= y->dims[d];
    return ky >= 1 && c == cx && s == sx ? ky : -1;
}

/* An alias (Reshape, Flatten, Squeeze, Identity...) that keeps the batch dimension and regroups
 * the channel and spatial ones apart: channels last on both sides is the same memory
 * ([N, C, H, W] as N, H, W, C and [N, C, H*W] as N, H*W, C; [N, 2, C/2, H, W] as N, H, W,
 * 2, C/2), so a channels-last input aliases as a channels-last output.  ViT's patch embedding
 * (a 16x16 convolution, Reshape to [1, 768, 196], Transpose to [1, 196, 768]) then keeps its
 * convolution channels last, its output channels in the vector lanes, and the Transpose reads
 * its memory in order; ShuffleNet's channel shuffle (Reshape to [N, 2, C/2, H, W], Transpose of
 * the two, Reshape back) permutes channels within each pixel.  Before layouts are chosen (kx
 * 0), whether some kx allows it. */
static int regroups(const tt_graph *g, const tt_gnode *n, int kx)
{
    if (!tt__net_moves_no_data(n->op) || n->inputs[0] < 0 || n->outputs[0] < 0)
        return -1;
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *y = &g->tensors.data[n->outputs[0]];
    if (y->rank > 5 || y->kind != TT_GT_VALUE || !tt_dtype_is_float(y->dtype))
        return -1;
    int ky = -1, lo = kx ? kx : 1, hi = kx ? kx : x->rank - 2;
    for (int k = lo; k <= hi && ky < 0; k++)
        ky = regrouped_channels(x, k, y);
    return ky;
}

/* A Transpose of a tensor stored channels last (K channels) that permutes its channel
 * dimensions among themselves and keeps the batch and spatial ones: its output stored the same
 * way, so that the kernel moves channels within each pixel (ShuffleNet's shuffle, [N, 2, C/2,
 * H, W] to [N, C/2, 2, H, W]). */
static bool permutes_channels(const tt_graph *g, const tt_gnode *n, const bool *fixed, int *K)
{
    if (n->op != TT_GOP_TRANSPOSE || n->inputs[0] < 0 || n->outputs[0] < 0 || fixed[n->outputs[0]])
        return false;
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *y = &g->tensors.data[n->outputs[0]];
    size_t np = 0;
    const int64_t *order = tt__attr_ints(n, "perm", &np);
    if (!(*K = channel_dims(x)) || !order || np != (size_t)y->rank || y->rank > 5 ||
        y->kind != TT_GT_VALUE || !tt_dtype_is_float(y->dtype))
        return false;
    for (int j = 0; j < y->rank; j++)
        if ((j == 0 || j > *K) ? order[j] != j : (order[j] < 1 || order[j] > *K))
            return false;
    return true;
}

/* Whether Pad or Slice node n copies its input whole: no padding, or every dimension from 0 by
 * 1 to its end (Swin's Pad to a multiple of its window of 7 at 56x56, its cyclic shift's
 * Slice of all 56 rows). */
static bool copies_whole(const tt_graph *g, const tt_gnode *n, int node)
{
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *y = &g->tensors.data[n->outputs[0]];
    if (x->rank != y->rank || memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->rank))
        return false;
    int R = x->rank;
    if (n->op == TT_GOP_PAD) {
        int64_t pads[2 * TT_GRAPH_MAX_RANK];
        if (!tt__graph_pad_amounts(g, node, pads))
            return false;
        for (int d = 0; d < 2 * R; d++)
            if (pads[d])
                return false;
        return true;
    }
    int64_t first[TT_GRAPH_MAX_RANK], step[TT_GRAPH_MAX_RANK];
    tt_errbuf ignored = {{0}};
    if (tt__graph_slice(g, node, first, step, &ignored))
        return false;
    for (int d = 0; d < R; d++)
        if (first[d] != 0 || step[d] != 1)
            return false;
    return true;
}

/* The memory order that makes node n's output the memory of its input, where n is a Transpose,
 * or a Pad or Slice that copies the whole input (the input's order).  For a Transpose, output
 * dimension j is input dimension order[j] (ONNX perm, default reversed), and the input's
 * physical dimension k is its logical x->perm[k], so the output's physical k is the j with
 * order[j] == x->perm[k].  False for any other node. */
static bool view_order(const tt_graph *g, const tt_gnode *n, int node, uint8_t *perm)
{
    if ((n->op != TT_GOP_TRANSPOSE && n->op != TT_GOP_PAD && n->op != TT_GOP_SLICE) ||
        n->ninputs < 1 || n->inputs[0] < 0 || n->noutputs < 1 || n->outputs[0] < 0)
        return false;
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *y = &g->tensors.data[n->outputs[0]];
    int R = y->rank;
    if (x->kind != TT_GT_VALUE || y->kind != TT_GT_VALUE || x->rank != R || R < 1 ||
        R > TT_GRAPH_MAX_RANK)
        return false;
    if (n->op != TT_GOP_TRANSPOSE) {
        if (!copies_whole(g, n, node))
            return false;
        for (int k = 0; k < R; k++)
            perm[k] = x->permuted ? x->perm[k] : (uint8_t)k;
        return true;
    }
    size_t np = 0;
    const int64_t *order = tt__attr_ints(n, "perm", &np);
    int inverse[TT_GRAPH_MAX_RANK];
    for (int j = 0; j < R; j++)
        inverse[j] = -1;
    for (int j = 0; j < R; j++) {
        int64_t d = order && np == (size_t)R ? order[j] : R - 1 - j;
        if (d < 0 || d >= R || inverse[d] >= 0)
            return false;
        inverse[d] = j;
    }
    for (int k = 0; k < R; k++)
        perm[k] = (uint8_t)inverse[x->permuted ? x->perm[k] : k];
    return true;
}

/* Makes node n (a Transpose, a Pad or Slice of the whole input) a view where its output may take
 * the order view_order gives: row-major (no data moves: ConvNeXt's NHWC tensor permuted to
 * [N, H, W, C], any layout) or, under the channels-last layout, channels last of rank 4 or 5
 * for a float tensor no alias reinterprets (the permute back to [N, C, H, W], which the next
 * convolution then reads as NHWC). */
static bool make_view(tt_graph *g, int node, const bool *fixed, tt_net_layout layout)
{
    tt_gnode *n = &g->nodes.data[node];
    uint8_t perm[TT_GRAPH_MAX_RANK];
    if (!view_order(g, n, node, perm))
        return false;
    tt_gtensor *y = &g->tensors.data[n->outputs[0]];
    if (!moves_data(y, perm)) {
        y->permuted = false;
        n->view = true;
        return true;
    }
    /* channels last: NHWC (K = 1) of rank 4 and 5 from any order, a regrouped form (K > 1)
     * only from another (BERT's keys, [B, S, H, D] permuted to [B, H, D, S], are no channels) */
    int K = channels_of_order(y->rank, perm);
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]];
    if (layout != TT_NET_LAYOUT_CHANNELS_LAST || fixed[n->outputs[0]] || y->rank < 4 ||
        y->rank > 5 || !tt_dtype_is_float(y->dtype) || !K || (K > 1 && !channel_dims(x)))
        return false;
    y->permuted = true;
    memcpy(y->perm, perm, sizeof(y->perm));
    n->view = true;
    return true;
}

tt_status tt__net_choose_layouts(tt_graph *g, tt_net_layout layout, int *permuted, int *views,
                                 tt_errbuf *err)
{
    *permuted = *views = 0;
    if (layout == TT_NET_LAYOUT_MODEL) {
        /* every tensor row-major: the views are the Transposes of dimensions of 1 and the
         * whole Pads and Slices */
        for (size_t i = 0; i < g->nodes.len; i++)
            if (!g->nodes.data[i].removed)
                *views += make_view(g, (int)i, NULL, layout);
        return TT_OK;
    }
    size_t nt = g->tensors.len;
    /* tensors that must keep the model's order: graph outputs, memory a Reshape reinterprets */
    bool *fixed = calloc(nt, sizeof(bool));
    bool *weight = calloc(nt, sizeof(bool)); /* a convolution's weight: HWIO, below */
    int *hwio = malloc(nt * sizeof(int));
    if (!fixed || !weight || !hwio) {
        free(fixed);
        free(weight);
        free(hwio);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (!n->removed && n->op == TT_GOP_CONV && n->ninputs > 1 && n->inputs[1] >= 0)
            weight[n->inputs[1]] = true;
    }
    for (size_t t = 0; t < nt; t++)
        hwio[t] = -1;
    for (size_t i = 0; i < g->outputs.len; i++)
        fixed[g->outputs.data[i]] = true;
    /* backwards, so that a chain of aliases ending at a fixed tensor fixes all of it */
    for (size_t i = g->nodes.len; i-- > 0;) {
        const tt_gnode *n = &g->nodes.data[i];
        if (!n->removed && tt__net_moves_no_data(n->op) && n->inputs[0] >= 0 &&
            (regroups(g, n, 0) < 0 || fixed[n->outputs[0]]))
            fixed[n->inputs[0]] = true;
    }
    tt_status s = TT_OK;
    /* in node order (topological): a convolution's output goes channels last, and so does the
     * output of an op that can write it and reads a channels-last tensor of the same rank */
    for (size_t i = 0; i < g->nodes.len && !s; i++) {
        tt_gnode *n = &g->nodes.data[i];
        if (!n->removed && make_view(g, (int)i, fixed, layout)) {
            ++*views;
            *permuted += g->tensors.data[n->outputs[0]].permuted;
            continue;
        }
        int kx = n->removed || !tt__net_moves_no_data(n->op) || n->inputs[0] < 0
                     ? 0
                     : channel_dims(&g->tensors.data[n->inputs[0]]);
        int ky = kx ? regroups(g, n, kx) : -1;
        if (ky > 0 || (!n->removed && permutes_channels(g, n, fixed, &ky))) {
            tt_gtensor *y = &g->tensors.data[n->outputs[0]];
            uint8_t perm[TT_GRAPH_MAX_RANK];
            channels_last_k(y->rank, ky, perm);
            if (moves_data(y, perm)) {
                y->permuted = true;
                memcpy(y->perm, perm, sizeof(perm));
                ++*permuted;
            }
            continue;
        }
        if (n->removed || !writes_any_layout(n->op))
            continue;
        for (int o = 0; o < n->noutputs; o++) {
            int t = n->outputs[o];
            if (t < 0 || fixed[t] || weight[t])
                continue;
            tt_gtensor *y = &g->tensors.data[t];
            if (y->kind != TT_GT_VALUE || y->rank < 3 || y->rank > 5 ||
                !tt_dtype_is_float(y->dtype))
                continue;
            /* the channels of the input it follows (K = 1 but for a regrouped one) */
            int K = n->op == TT_GOP_CONV || n->op == TT_GOP_CONV_WINOGRAD;
            for (int k = 0; k < n->ninputs && !K; k++) {
                const tt_gtensor *x = n->inputs[k] >= 0 ? &g->tensors.data[n->inputs[k]] : NULL;
                if (x && x->permuted && x->rank == y->rank)
                    K = channel_dims(x) ? channel_dims(x) : 1;
            }
            if (K == 0)
                continue;
            /* Channels last even where that is the same memory ([N, C, 1, 1] after a global
             * pool): the statements that write and read it then run over the channels
             * innermost, the vector axis, and a convolution of it reads HWIO weights.  A
             * squeeze-and-excitation block's 1x1 convolutions were scalar code over their
             * width of 1 without it (te_write.c, pixel_rows, takes its batch as the rows). */
            uint8_t perm[TT_GRAPH_MAX_RANK];
            channels_last_k(y->rank, K, perm);
            y->permuted = true;
            memcpy(y->perm, perm, sizeof(perm));
            *permuted += moves_data(y, perm);
        }
        /* the weights of a channels-last convolution, HWIO (one copy per weight) */
        int out = n->outputs[0], w = n->ninputs > 1 ? n->inputs[1] : -1;
        if (n->op != TT_GOP_CONV || w < 0 || !g->tensors.data[out].permuted ||
            g->tensors.data[w].permuted)
            continue;
        if (g->tensors.data[w].kind == TT_GT_VALUE && !fixed[w]) {
            /* weights computed at run time (scale_weights.c), by an op that writes any layout:
             * it writes them HWIO */
            tt_gtensor *W = &g->tensors.data[w];
            hwio_order(W->rank, W->perm);
            W->permuted = moves_data(W, W->perm);
            continue;
        }
        if (g->tensors.data[w].kind != TT_GT_CONST)
            continue;
        if (hwio[w] < 0 && (hwio[w] = hwio_copy(g, w)) < 0)
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        else
            n->inputs[1] = hwio[w];
    }
    free(fixed);
    free(weight);
    free(hwio);
    return s;
}
