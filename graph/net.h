/* A network: an imported graph partitioned into kernels, the tasks the tuner sees, and the memory
 * plan a build runs them with.
 *
 *     tt_net *net;
 *     if (tt_net_build(g, NULL, &net, &err)) ...err.msg names the node and why...
 *     for (size_t i = 0; i < net->tasks.len; i++)   tune net->tasks.data[i].workload ...
 *     for (size_t i = 0; i < net->calls.len; i++)   run kernel calls[i].task on calls[i].args ...
 *     tt_net_free(net);
 *
 * Building folds BatchNormalization into the convolution before it (weights and bias rescaled),
 * fuses each anchor (Conv, ConvTranspose, Gemm, MatMul, pools, reductions, Softmax,
 * LayerNormalization) with the elementwise ops that follow it as TVM's FuseOps does (bias, a
 * residual Add, Relu, Clip...), fuses elementwise chains into the reduction they feed, and writes
 * each fused subgraph as one `te:` workload whose weights are constant inputs.  Identical subgraphs
 * share a task; a task's weight is how many calls run it.  Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity and Dropout move no data: their output is the same memory as their input.
 *
 * Layouts: by default the activations between convolutions are stored channels last (NHWC) and
 * convolution weights HWIO (tt_gtensor.perm); graph inputs and outputs, and any tensor a Reshape
 * reinterprets, keep the model's order, and the kernels at those edges read one order and write
 * the other, so no transpose runs on its own.  The layout is part of every task's workload: tune
 * and build with the same one.
 *
 * The graph is changed in place (folded constants are added, folded nodes removed) and must
 * outlive the net.  Not thread-safe. */
#ifndef TT_GRAPH_NET_H
#define TT_GRAPH_NET_H

#include "graph.h"

typedef struct tt_net_task {
    char *workload; /* canonical `te:` text: the tuner's and the database's key */
    char *label;    /* the ONNX operators it fuses, "Conv+Add+Relu" */
    int weight;     /* calls that run it */
    double flops;   /* of one call */
} tt_net_task;

typedef struct tt_net_call {
    int task;
    int *args; /* graph tensor of each kernel parameter, in tt_dag_params() order */
    int nargs;
    int first_node, last_node; /* the nodes it computes (for messages) */
} tt_net_call;

/* The memory order of activations around convolutions (docs/models.md, "Layouts"). */
typedef enum {
    /* Channels last (NHWC, NWC, NDHWC) between convolutions, pools and the elementwise ops
     * around them, weights HWIO: the layout our CPU kernels vectorise best (output channels in
     * vector lanes, whatever the stride).  The default. */
    TT_NET_LAYOUT_CHANNELS_LAST,
    /* Every tensor in the model's own order (NCHW for ONNX). */
    TT_NET_LAYOUT_MODEL,
} tt_net_layout;

/* "channels-last" or "model"; and the layout of such a name (-1 if none). */
const char *tt_net_layout_name(tt_net_layout l);
int tt_net_layout_parse(const char *name);

/* Where a tensor's values live while the network runs. */
typedef enum {
    TT_NET_NONE,   /* not used by any call */
    TT_NET_INPUT,  /* the caller's input `index` */
    TT_NET_OUTPUT, /* the caller's output `index` */
    TT_NET_CONST,  /* the weights, at byte `offset` of the weight blob */
    TT_NET_ARENA,  /* the intermediate arena, at byte `offset` */
} tt_net_place;

typedef struct tt_net_storage {
    tt_net_place place;
    int index;
    int64_t offset;
} tt_net_storage;

/* A graph output whose storage is not the caller's buffer (it is an input, a constant, or the same
 * memory as another output): copied there after the last call. */
typedef struct tt_net_copy {
    int output; /* index in g->outputs */
    int from;   /* the tensor whose storage holds its values */
} tt_net_copy;

typedef struct tt_net {
    tt_graph *g;
    TT_VEC(tt_net_task) tasks; /* in order of first call */
    TT_VEC(tt_net_call) calls; /* in execution order */
    TT_VEC(tt_net_copy) copies;
    int *alias;              /* per tensor: the tensor whose memory it is (itself if none) */
    tt_net_storage *storage; /* per tensor, of its alias root */
    int64_t arena_bytes;     /* intermediates, reused as their lifetimes allow */
    int64_t weight_bytes;    /* constants the calls read, 64-byte aligned each */
    int64_t unplanned_bytes; /* the arena without reuse: what the plan saves */
    double flops;            /* of one run */
    int folded_batchnorms;
    int fused_layer_norms; /* written out in elementwise operators, now one node each */
    int scaled_weights;    /* per-channel scales moved onto a convolution's weights (SE) */
    int winograd_convs;    /* 3x3 convolutions computed as Winograd F(4x4, 3x3) */
    int folded_pads;       /* zero Pads folded into the Conv or AveragePool that reads them */
    int region_convs;      /* convolutions split where padding covers their taps (conv_regions.c) */
    tt_net_layout layout;
    int channels_last; /* activations stored channels last */
    int views;         /* Transposes, whole Pads and Slices that move no data: aliases */
} tt_net;

typedef struct tt_net_options {
    /* The largest fused subgraph, in ONNX nodes (0: 16). */
    int max_fused;
    tt_net_layout layout;
    /* Keep every convolution direct: no Winograd F(4x4, 3x3) for the 3x3 ones (docs/models.md,
     * "Kernels and tasks"); what builds from records tuned before the rewrite need. */
    bool no_winograd;
    /* float32 lanes of the target's vectors (0: not known).  Winograd takes a convolution only
     * where its output channels fill 3 vectors or more (winograd.c). */
    int vector_lanes;
} tt_net_options;

/* Whether builds for `target` (its text) compute 3x3 convolutions as Winograd's by default:
 * on CPUs; not on OpenCL devices, whose sketches inline the transforms into the product. */
bool tt_net_winograd_default(const char *target);

/* The partition options tvm-tune and tvm-compile share for a model built for `target` (its text),
 * whose vectors hold `target_lanes` float32 lanes (tt_space_target_lanes; 0: not known): `layout`,
 * and Winograd's form per `winograd`: -1 the target's default (on CPUs, for convolutions of at
 * least 3 vectors of output channels; off on OpenCL), 1 every 3x3 stride-1 convolution of enough
 * tiles whatever its channels, 0 none. */
void tt_net_options_for(tt_net_options *o, const char *target, int target_lanes,
                        tt_net_layout layout, int winograd);

/* Partitions `g` into calls and tasks and plans its memory.  Errors name the node: an operator or
 * dtype that kernels cannot compute (TT_ERR_UNSUPPORTED: bool tensors, MaxPool's indices,
 * LayerNormalization's mean output...), TT_ERR_BAD_WORKLOAD for a subgraph whose workload does not
 * parse (a bug: the message has the text). */
tt_status tt_net_build(tt_graph *g, const tt_net_options *o, tt_net **out, tt_errbuf *err);
void tt_net_free(tt_net *net);

#endif
