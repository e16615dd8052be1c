/* Private to graph/: the stages of tt_net_build (net.c). */
#ifndef TT_GRAPH_NET_INT_H
#define TT_GRAPH_NET_INT_H

#include "../base/strbuf.h"
#include "graph_int.h"
#include "net.h"

/* The most placeholders one fused subgraph reads. */
#define TT__NET_MAX_INPUTS 56

/* Folds every BatchNormalization whose input is a convolution's (constant weights, no other
 * reader) into that convolution: W' = W * s / sqrt(v + eps) per output channel, B' likewise.
 * The BatchNormalization node is removed; *folded counts them. */
tt_status tt__net_fold_batchnorm(tt_graph *g, int *folded, tt_errbuf *err);
/* Folds every zero Pad of the spatial dimensions whose one reader is a Conv or an AveragePool
 * (without pads of its own) into that window's pads (the pool counting the padding:
 * count_include_pad 1); the Pad node is removed; *folded counts them (fold_pad.c). */
tt_status tt__net_fold_pads(tt_graph *g, int *folded, tt_errbuf *err);
/* Reads of tensor t by the live nodes (a node reading it twice counts twice), plus one for each
 * time it is a graph output. */
int tt__net_readers(const tt_graph *g, int t);
/* The one live node reading tensor t (once), or -1: none, several, or t is a graph output. */
int tt__net_only_reader(const tt_graph *g, int t);
/* Rewrites every LayerNormalization written out in elementwise operators (ReduceMean, Sub, Pow,
 * ReduceMean, Add, Sqrt, Div, then Mul and Add by per-channel constants) into one
 * LayerNormalization node, where no intermediate has another reader (fuse_layer_norm.c);
 * *fused counts them. */
tt_status tt__net_fuse_layer_norms(tt_graph *g, int *fused, tt_errbuf *err);

/* Moves every per-channel scale computed at run time (x * s, s of shape [1, C, 1, 1]) from a
 * group-1 convolution's input to its constant weights where they are at most half of x
 * (scale_weights.c): the Mul then computes W * s and the convolution reads x; *moved counts
 * them. */
tt_status tt__net_scale_weights(tt_graph *g, int *moved, tt_errbuf *err);

/* The fewest output tiles (over the batch) for which Winograd's form pays: the product reads
 * each transformed weight once per tile, so with fewer tiles it waits on memory (14x14 outputs
 * of 256 channels in F(4x4)'s 16 tiles: 9.4 MB of weights for 76 MFLOP). */
#define TT_NET_WINOGRAD_MIN_TILES 48

/* Rewrites every group-1, 3x3, stride-1, undilated float32 Conv with constant weights into
 * ConvWinograd F(4x4, 3x3) where its output has at least TT_NET_WINOGRAD_MIN_TILES tiles of 4x4,
 * else F(2x2, 3x3) where it has that many of 2x2; the second input becomes the transformed
 * weights G g G^T [m + 2, m + 2, CI, CO] (a new constant; winograd.c).  With `vector_lanes`
 * (float32 lanes of the target's vectors; 0: not known), only convolutions of at least 3 vectors
 * of output channels.  *rewritten counts them. */
tt_status tt__net_winograd(tt_graph *g, int vector_lanes, int *rewritten, tt_errbuf *err);

/* The most of a convolution's multiply-adds that its regions may keep for the rewrite below to
 * take it: DeepLabV3's atrous convolutions keep 11-51%, ResNet's 3x3 ones padded by 1 98%. */
#define TT_NET_REGION_MAX_WORK 0.75

/* Splits every float Conv (constant weights, 1 or 2 spatial dimensions, 8 or more input channels
 * per group) whose padding covers so many taps that the taps inside the input are at most
 * TT_NET_REGION_MAX_WORK of the work into regions of its output, each a Conv of the taps its
 * outputs read (the shared weights from TT_NET_FIRST_TAP on, or a slice where one region is
 * left; pads negative: a crop), joined by Concats into the same output tensor (conv_regions.c);
 * the new nodes take the Conv's place in the node order.  *split counts them. */
tt_status tt__net_split_padded_convs(tt_graph *g, int *split, tt_errbuf *err);
/* The attribute (ints, one per spatial dimension) of such a region's Conv that reads its taps
 * from the whole kernel's weights: its tap r of dimension i is the weights' tap first[i] + r.
 * Only tt_net_build writes it (TT__GRAPH_OWN_ATTR). */
#define TT_NET_FIRST_TAP TT__GRAPH_OWN_ATTR "first_tap"

/* Chooses the memory order of every tensor (tt_gtensor perm) under `layout` (net.h): channels
 * last from each convolution on, through the ops that can write it, except graph outputs and
 * tensors an alias reinterprets; the weights of channels-last convolutions copied HWIO.  A
 * Transpose (a Pad or Slice that copies the whole input) whose output, in the memory order of
 * its input, is row-major or (channels-last layout, rank 4 and 5) channels last becomes a view
 * (tt_gnode view): an alias, no kernel.  *permuted counts the activations stored channels last,
 * *views the nodes made views. */
tt_status tt__net_choose_layouts(tt_graph *g, tt_net_layout layout, int *permuted, int *views,
                                 tt_errbuf *err);

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: the output is the input's memory. */
bool tt__net_moves_no_data(tt_gop op);
/* One output element from the same element of each input (numpy broadcasting): arithmetic,
 * activations, Cast, BatchNormalization. */
bool tt__net_is_elementwise(tt_gop op);

/* BatchNormalization `bn` (constant statistics) at channel c as y = x * scale + shift. */
void tt__batchnorm_affine(const tt_graph *g, const tt_gnode *bn, int64_t c, double *scale,
                          double *shift);

/* Adds a constant tensor named `name` with room for its values (uninitialised); its index, or -1
 * when out of memory. */
int tt__net_new_const(tt_graph *g, const char *name, tt_dtype dt, int rank, const int64_t *dims);

/* Writes the `te:` program of a chain of nodes: nodes[0]'s output feeds nodes[1] and so on, and
 * tensor `output` (an output of the last node) is the program's output, named "out".  Other
 * tensors read become placeholders x<k> (computed or graph inputs) and w<k> (constants, declared
 * const); ph[k] is the tensor of placeholder k, *nph their count.  Outputs of the nodes other
 * than `output` that the graph uses (LayerNormalization's Mean) are more outputs, y<k>, also in
 * ph.  Scalar constants are written
 * as literals.  Constants the lowering derives (BatchNormalization's scale and shift) are added
 * to g.  TT_ERR_UNSUPPORTED names the node for what kernels cannot compute. */
tt_status tt__net_write_te(tt_graph *g, const int *nodes, int n, int output, tt_strbuf *sb, int *ph,
                           int *nph, tt_errbuf *err);

/* Places every tensor the calls use (net->storage, net->copies, the byte counts), given
 * net->alias and the calls. */
tt_status tt__net_plan(tt_net *net, tt_errbuf *err);

#endif
