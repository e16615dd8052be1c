/* A per-channel scale computed at run time, moved from a convolution's input to its weights:
 * conv(x * s, W) = conv(x, W * s) for s of shape [1, C, 1, 1], since the convolution sums over
 * input channels.  Squeeze-and-excitation blocks (EfficientNet, MobileNet-V3, RegNet-Y) scale
 * the depthwise convolution's output so before the projection: the scale cannot join the
 * depthwise kernel (the pooled excitation needs all of its output first) and, joined to the
 * projection as a prologue, costs a multiply per broadcast input element in the register tile
 * (docs/models.md, "SE blocks").  Scaling the weights instead costs K x C multiplies in a small
 * kernel of its own where x * s cost H x W x C in a pass over the activation: it is done where
 * the weights are at most half the activation (the early, large layers). */
#include <string.h>

#include "net_int.h"

/* The scale of `mul` when it is x * s with s of shape [1, C, 1, 1] computed at run time and x of
 * shape [1, C, ...]; -1 otherwise.  *x_out gets x. */
static int channel_scale(const tt_graph *g, const tt_gnode *mul, int *x_out)
{
    if (mul->op != TT_GOP_MUL || mul->ninputs != 2 || mul->inputs[0] < 0 || mul->inputs[1] < 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        const tt_gtensor *x = &g->tensors.data[mul->inputs[k]],
                         *s = &g->tensors.data[mul->inputs[1 - k]];
        if (s->kind != TT_GT_VALUE || x->kind != TT_GT_VALUE || x->rank < 3 || s->rank != x->rank ||
            x->dims[0] != 1 || s->dims[0] != 1 || s->dims[1] != x->dims[1] ||
            s->dtype != x->dtype || !tt_dtype_is_float(x->dtype))
            continue;
        bool per_channel = true;
        for (int d = 2; d < s->rank; d++)
            per_channel &= s->dims[d] == 1;
        if (per_channel) {
            *x_out = mul->inputs[k];
            return mul->inputs[1 - k];
        }
    }
    return -1;
}

tt_status tt__net_scale_weights(tt_graph *g, int *moved, tt_errbuf *err)
{
    (void)err;
    *moved = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        tt_gnode *mul = &g->nodes.data[i];
        int x, s;
        if (mul->removed || mul->noutputs < 1 || mul->outputs[0] < 0 ||
            (s = channel_scale(g, mul, &x)) < 0)
            continue;
        int y = mul->outputs[0], c = tt__net_only_reader(g, y);
        if (c < 0)
            continue;
        tt_gnode *conv = &g->nodes.data[c];
        if (conv->op != TT_GOP_CONV || conv->ninputs < 2 || conv->inputs[0] != y ||
            conv->inputs[1] < 0 || tt__attr_int(conv, "group", 1) != 1)
            continue;
        const tt_gtensor *W = &g->tensors.data[conv->inputs[1]], *X = &g->tensors.data[x];
        if (W->kind != TT_GT_CONST || W->rank != X->rank || W->dtype != X->dtype ||
            W->dims[1] != X->dims[1] || 2 * tt_gtensor_numel(W) > tt_gtensor_numel(X))
            continue;
        /* The Mul now writes W * s, of W's shape; the convolution reads x and it.  Both nodes
         * stay where they are, so the order stays topological (W is a constant, s was computed
         * before the Mul). */
        int w = conv->inputs[1];
        mul->inputs[0] = w;
        mul->inputs[1] = s;
        tt_gtensor *Y = &g->tensors.data[y];
        Y->rank = W->rank;
        memcpy(Y->dims, W->dims, sizeof(int64_t) * (size_t)W->rank);
        conv->inputs[0] = x;
        conv->inputs[1] = y;
        ++*moved;
    }
    return TT_OK;
}
