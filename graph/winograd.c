/* 3x3 convolutions as Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, 2015): each
 * m x m tile of the output comes from an (m + 2) x (m + 2) tile of the input through
 *
 *     Y = A^T [ (G g G^T) . (B^T d B) ] A
 *
 * so (m + 2)^2 products per tile and channel pair replace 9 m^2: 36 for 144 with m = 4 (4x fewer
 * multiply-adds), 16 for 36 with m = 2 (2.25x).  The product is a batched matrix product over
 * the tile positions.  The weights' transform G g G^T is done here, once, when the network is
 * built: the node becomes ConvWinograd, reading the transformed weights U [m + 2, m + 2, CI,
 * CO]; te_write.c writes the input and output transforms around the product as stages of the
 * same kernel (m is U's first dimension less 2).
 *
 * Where: group 1, 3x3, stride 1, dilation 1, float32, and at least TT_NET_WINOGRAD_MIN_TILES
 * output tiles over the batch: F(4x4) where its tiles are that many, else F(2x2) (whose tiles
 * are 4x as many, for weights 16/9 of the direct ones rather than 4x).  With fewer tiles (a
 * batch of one at 7x7: 4 of 4x4, 16 of 2x2) the transformed weights are read for too few tiles:
 * the product waits on memory and the direct convolution is as fast or faster (docs/models.md,
 * "Kernels and tasks").  Nor with fewer output channels than 3 of the target's vectors: the
 * transforms then cost more than the product saves where the direct convolution runs near the
 * FMA peak (AVX-512: DenseNet's 128 -> 32 at 14x14 0.050 ms direct against 0.077, Inception-V3's
 * 32 -> 32 at 147x147 1.06 against 1.27; 48 channels and more, 3 vectors, were level or faster
 * as Winograd), while on AVX2 the same 32 channels, 4 vectors, ran 1.5-2x faster as Winograd. */
#include <string.h>

#include "net_int.h"

/* G of F(4x4, 3x3) with interpolation points 0, 1, -1, 2, -2 and infinity, and of F(2x2, 3x3)
 * with 0, 1, -1 and infinity. */
static const double G4[6][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};
static const double G2[4][3] = {
    {1, 0, 0},
    {0.5, 0.5, 0.5},
    {0.5, -0.5, 0.5},
    {0, 0, 1},
};

/* The m x m tiles of an output [N, C, H, W]. */
static int64_t tiles(const tt_gtensor *y, int m)
{
    return y->dims[0] * ((y->dims[2] + m - 1) / m) * ((y->dims[3] + m - 1) / m);
}

/* The output tile (4 or 2) for Conv node n, or 0 when the rewrite does not take it. */
static int tile_for(const tt_graph *g, int node, int vector_lanes)
{
    const tt_gnode *n = &g->nodes.data[node];
    if (n->removed || n->op != TT_GOP_CONV || n->ninputs < 2 || n->inputs[0] < 0 ||
        n->inputs[1] < 0 || n->noutputs < 1 || n->outputs[0] < 0 ||
        tt__attr_int(n, "group", 1) != 1)
        return 0;
    const tt_gtensor *x = &g->tensors.data[n->inputs[0]], *W = &g->tensors.data[n->inputs[1]],
                     *y = &g->tensors.data[n->outputs[0]];
    if (x->rank != 4 || W->rank != 4 || W->kind != TT_GT_CONST || W->permuted ||
        W->dtype != TT_DT_FLOAT32 || x->dtype != TT_DT_FLOAT32 || W->dims[2] != 3 ||
        W->dims[3] != 3)
        return 0;
    if (vector_lanes > 0 && W->dims[0] < 3 * vector_lanes)
        return 0;
    tt__window win;
    tt_errbuf ignored = {{0}};
    if (tt__graph_window(g, node, &win, &ignored) || win.nk != 2)
        return 0;
    for (int d = 0; d < 2; d++)
        if (win.stride[d] != 1 || win.dilation[d] != 1 || win.kernel[d] != 3)
            return 0;
    return tiles(y, 4) >= TT_NET_WINOGRAD_MIN_TILES   ? 4
           : tiles(y, 2) >= TT_NET_WINOGRAD_MIN_TILES ? 2
                                                      : 0;
}

/* U[a][b][ci][co] = sum over i, j of G[a][i] g[co][ci][i][j] G[b][j], in double; G has n rows. */
static void transform_weights(const tt_gtensor *W, const double (*G)[3], int n, tt_gtensor *U)
{
    int64_t CO = W->dims[0], CI = W->dims[1];
    const float *g = W->data;
    float *u = U->data;
    for (int64_t co = 0; co < CO; co++)
        for (int64_t ci = 0; ci < CI; ci++) {
            const float *k = g + (co * CI + ci) * 9;
            double gk[6][3]; /* G g */
            for (int a = 0; a < n; a++)
                for (int j = 0; j < 3; j++)
                    gk[a][j] = G[a][0] * k[j] + G[a][1] * k[3 + j] + G[a][2] * k[6 + j];
            for (int a = 0; a < n; a++)
                for (int b = 0; b < n; b++)
                    u[((a * n + b) * CI + ci) * CO + co] =
                        (float)(gk[a][0] * G[b][0] + gk[a][1] * G[b][1] + gk[a][2] * G[b][2]);
        }
}

tt_status tt__net_winograd(tt_graph *g, int vector_lanes, int *rewritten, tt_errbuf *err)
{
    *rewritten = 0;
    for (size_t i = 0; i < g->nodes.len; i++) {
        int m = tile_for(g, (int)i, vector_lanes);
        if (!m)
            continue;
        int w = g->nodes.data[i].inputs[1], alpha = m + 2;
        int64_t dims[4] = {alpha, alpha, g->tensors.data[w].dims[1], g->tensors.data[w].dims[0]};
        char name[256];
        snprintf(name, sizeof(name), "%s.winograd%d", g->tensors.data[w].name, m);
        int u = tt__net_new_const(g, name, TT_DT_FLOAT32, 4, dims);
        if (u < 0)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        /* tt__net_new_const may move the tensors */
        transform_weights(&g->tensors.data[w], m == 4 ? G4 : G2, alpha, &g->tensors.data[u]);
        tt_gnode *n = &g->nodes.data[i];
        n->op = TT_GOP_CONV_WINOGRAD;
        n->inputs[1] = u;
        ++*rewritten;
    }
    return TT_OK;
}
