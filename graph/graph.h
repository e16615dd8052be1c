/* Models: an ONNX file imported into a graph of our own, every tensor's shape known.
 *
 *     tt_graph *g;
 *     tt_graph_options o = {.shapes = (const char *[]){"input=1x3x224x224"}, .nshapes = 1};
 *     if (tt_graph_import_onnx("resnet18.onnx", &o, &g, &err)) ...err.msg says file, node, why...
 *     for (size_t i = 0; i < g->nodes.len; i++) ...g->nodes.data[i]...
 *     tt_graph_free(g);
 *
 * Import parses the protobuf (protobuf-c, the schema Debian's libonnx-dev ships), checks the
 * opset (ai.onnx 11-17), maps each node to an operator this module knows (an unknown one is an
 * error naming it), and infers every shape, folding the integer shape arithmetic that exporters
 * emit (Shape -> Gather -> Concat -> Reshape) into constants.  Later stages (fusion into tasks,
 * the memory plan) read the graph and never see protobuf.  Thread-safe for distinct graphs. */
#ifndef TT_GRAPH_GRAPH_H
#define TT_GRAPH_GRAPH_H

#include "../base/arena.h"
#include "../base/vec.h"
#include "../schedule/expr.h"

#define TT_GRAPH_MAX_RANK 8
/* The ai.onnx opsets import accepts. */
#define TT_GRAPH_MIN_OPSET 11
#define TT_GRAPH_MAX_OPSET 17

/* The operators import knows, with their ONNX names. */
#define TT_GOP_LIST(X)                                                                             \
    X(CONV, "Conv")                                                                                \
    X(CONV_TRANSPOSE, "ConvTranspose")                                                             \
    X(GEMM, "Gemm")                                                                                \
    X(MATMUL, "MatMul")                                                                            \
    X(ADD, "Add")                                                                                  \
    X(SUB, "Sub")                                                                                  \
    X(MUL, "Mul")                                                                                  \
    X(DIV, "Div")                                                                                  \
    X(POW, "Pow")                                                                                  \
    X(SQRT, "Sqrt")                                                                                \
    X(RELU, "Relu")                                                                                \
    X(CLIP, "Clip")                                                                                \
    X(SIGMOID, "Sigmoid")                                                                          \
    X(ERF, "Erf")                                                                                  \
    X(TANH, "Tanh")                                                                                \
    X(MAX_POOL, "MaxPool")                                                                         \
    X(AVERAGE_POOL, "AveragePool")                                                                 \
    X(GLOBAL_AVERAGE_POOL, "GlobalAveragePool")                                                    \
    X(BATCH_NORM, "BatchNormalization")                                                            \
    X(LAYER_NORM, "LayerNormalization")                                                            \
    X(REDUCE_MEAN, "ReduceMean")                                                                   \
    X(SOFTMAX, "Softmax")                                                                          \
    X(RESHAPE, "Reshape")                                                                          \
    X(FLATTEN, "Flatten")                                                                          \
    X(TRANSPOSE, "Transpose")                                                                      \
    X(CONCAT, "Concat")                                                                            \
    X(SPLIT, "Split")                                                                              \
    X(SLICE, "Slice")                                                                              \
    X(SQUEEZE, "Squeeze")                                                                          \
    X(UNSQUEEZE, "Unsqueeze")                                                                      \
    X(GATHER, "Gather")                                                                            \
    X(PAD, "Pad")                                                                                  \
    X(IDENTITY, "Identity")                                                                        \
    X(DROPOUT, "Dropout")                                                                          \
    X(SHAPE, "Shape")                                                                              \
    X(CONSTANT, "Constant")                                                                        \
    X(CAST, "Cast")

typedef enum {
#define TT_GOP_ENUM(n, s) TT_GOP_##n,
    TT_GOP_LIST(TT_GOP_ENUM)
#undef TT_GOP_ENUM
        TT_GOP_COUNT
} tt_gop;

/* The ONNX name of an operator ("Conv"). */
const char *tt_gop_name(tt_gop op);
/* The operator of an ONNX name, or -1. */
int tt_gop_parse(const char *name);

typedef enum {
    TT_GT_INPUT, /* a graph input: the caller's data */
    TT_GT_CONST, /* an initializer or a folded value: `data` holds it */
    TT_GT_VALUE, /* computed by a node */
} tt_gtensor_kind;

typedef struct tt_gtensor {
    char *name;
    tt_gtensor_kind kind;
    tt_dtype dtype;
    int rank;
    int64_t dims[TT_GRAPH_MAX_RANK];
    void *data;   /* TT_GT_CONST: numel elements of dtype, row-major */
    int producer; /* the node computing it, -1 for inputs and constants */
    bool output;  /* a graph output */
    /* Memory order (tt_net_build's layout choice; import leaves every tensor row-major): when
     * `permuted`, physical dimension k holds logical dimension perm[k], so a channels-last
     * activation [N,C,H,W] has perm {0,2,3,1} and a weight stored HWIO has {2,3,1,0}.  dims stay
     * logical; a constant's data is in the physical order. */
    bool permuted;
    uint8_t perm[TT_GRAPH_MAX_RANK];
} tt_gtensor;

typedef enum {
    TT_GATTR_INT,
    TT_GATTR_FLOAT,
    TT_GATTR_STRING,
    TT_GATTR_INTS,
    TT_GATTR_FLOATS,
    TT_GATTR_TENSOR, /* `tensor` indexes g->tensors (a constant) */
} tt_gattr_kind;

typedef struct tt_gattr {
    char *name;
    tt_gattr_kind kind;
    int64_t i;
    float f;
    char *s;
    int64_t *ints;
    float *floats;
    size_t n; /* of ints or floats */
    int tensor;
} tt_gattr;

typedef struct tt_gnode {
    tt_gop op;
    char *name;  /* the file's node name, or "" */
    int *inputs; /* tensor indices; -1: an optional input left out ("") */
    int ninputs;
    int *outputs;
    int noutputs;
    tt_gattr *attrs;
    int nattrs;
    bool removed; /* folded into a constant or otherwise gone from the graph */
} tt_gnode;

typedef struct tt_graph {
    char *source;  /* the file (or name) it came from, for messages */
    int64_t opset; /* of the default domain */
    int64_t ir_version;
    char *producer; /* "pytorch 1.13.1" */
    TT_VEC(tt_gtensor) tensors;
    TT_VEC(tt_gnode) nodes; /* in the file's order, which is topological */
    TT_VEC(int) inputs;     /* graph inputs (not initializers), in order */
    TT_VEC(int) outputs;
    tt_arena arena; /* owns names, attributes, index lists and constant data */
} tt_graph;

typedef struct tt_graph_options {
    /* Shapes for inputs whose dimensions are symbolic or to be changed: "name=1x3x224x224". */
    const char *const *shapes;
    int nshapes;
    /* Largest model accepted, in bytes (0: 2 GiB, protobuf's own limit). */
    int64_t max_bytes;
    /* Inputs given values (matched by name): they become constants, as TVM's freeze_params,
     * so that shapes, axes or pads passed as inputs are known when the network is built. */
    const tt_gtensor *bind;
    int nbind;
} tt_graph_options;

/* Imports an ONNX model.  Errors (TT_ERR_IO, TT_ERR_PARSE, TT_ERR_UNSUPPORTED, TT_ERR_LIMIT,
 * TT_ERR_BAD_WORKLOAD) name the file and, where one is at fault, the node (index, name, operator)
 * and why: not ONNX or truncated, an opset outside 11-17, an unknown operator, external weights,
 * a symbolic dimension without a `shapes` override, shapes that do not fit the operator. */
tt_status tt_graph_import_onnx(const char *path, const tt_graph_options *o, tt_graph **out,
                               tt_errbuf *err);
/* The same from bytes in memory; `source` names them in messages. */
tt_status tt_graph_import_onnx_bytes(const uint8_t *data, size_t len, const char *source,
                                     const tt_graph_options *o, tt_graph **out, tt_errbuf *err);
void tt_graph_free(tt_graph *g);

/* Reads one serialized ONNX TensorProto (the test data's input_0.pb, output_0.pb) into *out,
 * a constant tensor owned by the caller (free name and data). */
tt_status tt_graph_read_tensor(const char *path, tt_gtensor *out, tt_errbuf *err);

/* Elements of a tensor (product of its dims; 1 for a scalar). */
int64_t tt_gtensor_numel(const tt_gtensor *t);
/* Its dims in memory order (perm applied), what a kernel declares it as. */
void tt_gtensor_memory_dims(const tt_gtensor *t, int64_t *dims);
/* The attribute `name` of node n, or NULL. */
const tt_gattr *tt_gnode_attr(const tt_gnode *n, const char *name);

/* "node 12 'Conv_3' (Conv)": how messages name a node, into buf. */
const char *tt_gnode_describe(const tt_graph *g, int node, char *buf, size_t n);

#endif
