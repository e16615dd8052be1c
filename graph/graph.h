/* Models: an ONNX file imported into a graph of our own, every tensor's shape known.
 *
 *     tt_graph *g;
 *     tt_graph_options o = {.shapes = (const char *[]){"input=1x3x224x224"}, .nshapes = 1};
 *     if (tt_graph_import_onnx("resnet18.onnx", &o, &g, &err)) ...err.msg says file, node, why...
 *     for (size_t i = 0; i < g->nodes.len; i++) ...g->nodes.data[i]...
 *     tt_graph_free(g);
 *
 * Import parses the protobuf (protobuf-c, the schema Debian's libonnx-dev ships), checks the
 * opset (ai.onnx 11-22), maps each node to an operator this module knows (an unknown one is an
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
#define TT_GRAPH_MAX_OPSET 22

/* The operator table: every operator import knows, one row each, in one place (as TVM registers an
 * operator's pattern and compute together).  Columns:
 *   ENUM, "OnnxName"
 *   PATTERN  how it fuses into kernels (graph/net.c): NONE (folded away at import), ALIAS (no
 *            data moves), ELEM (elementwise: joins the kernel computing its input), ANCHOR
 *            (starts a kernel that elementwise operators join), REDUCE (joins an elementwise-only
 *            kernel, then as an anchor), INJECTIVE (data movement: a kernel of its own), SPLIT
 *            (a kernel per output)
 *   LAYOUT   ANY: its kernel writes its output in any memory order (channels last too); ROW: in
 *            the model's (graph/layout.c)
 *   SHAPE    its shape rule, infer_SHAPE in graph/shape.c
 *   WRITER   its tensor-expression writer, w_WRITER in graph/te_write.c
 *   FORMULA  for the `formula` writer: the elementwise expression, $ (or $0, $1) for the inputs
 *            read at the output's index, {name=default} for a float attribute; else NULL
 * Adding an operator is a row here, and its rule and writer where they do not exist yet.
 * ConvWinograd is our own, not ONNX's: a 3x3 Conv rewritten by tt_net_build (graph/winograd.c),
 * whose second input is the transformed weights; a model that names it is refused (`internal`). */
#define TT_GOP_LIST(X)                                                                             \
    X(CONV, "Conv", ANCHOR, ANY, conv, conv, NULL)                                                 \
    X(CONV_WINOGRAD, "ConvWinograd", ANCHOR, ANY, internal, conv_winograd, NULL)                   \
    X(CONV_TRANSPOSE, "ConvTranspose", ANCHOR, ROW, conv_transpose, conv_transpose, NULL)          \
    X(GEMM, "Gemm", ANCHOR, ROW, gemm, gemm, NULL)                                                 \
    X(MATMUL, "MatMul", ANCHOR, ROW, matmul, matmul, NULL)                                         \
    X(EINSUM, "Einsum", ANCHOR, ROW, einsum, einsum, NULL)                                         \
    X(ADD, "Add", ELEM, ANY, binary, binary, NULL)                                                 \
    X(SUB, "Sub", ELEM, ANY, binary, binary, NULL)                                                 \
    X(MUL, "Mul", ELEM, ANY, binary, binary, NULL)                                                 \
    X(DIV, "Div", ELEM, ANY, binary, binary, NULL)                                                 \
    X(POW, "Pow", ELEM, ANY, binary, pow, NULL)                                                    \
    X(MIN, "Min", ELEM, ANY, variadic, min_max, NULL)                                              \
    X(MAX, "Max", ELEM, ANY, variadic, min_max, NULL)                                              \
    X(PRELU, "PRelu", ELEM, ANY, binary, formula, "select($0 < 0.0, $0 * $1, $0)")                 \
    X(SQRT, "Sqrt", ELEM, ANY, same, unary, NULL)                                                  \
    X(RELU, "Relu", ELEM, ANY, same, unary, NULL)                                                  \
    X(CLIP, "Clip", ELEM, ANY, same, unary, NULL)                                                  \
    X(SIGMOID, "Sigmoid", ELEM, ANY, same, unary, NULL)                                            \
    X(ERF, "Erf", ELEM, ANY, same, unary, NULL)                                                    \
    X(TANH, "Tanh", ELEM, ANY, same, unary, NULL)                                                  \
    X(HARD_SIGMOID, "HardSigmoid", ELEM, ANY, same, formula,                                       \
      "max(min($ * {alpha=0.2} + {beta=0.5}, 1.0), 0.0)")                                          \
    X(HARD_SWISH, "HardSwish", ELEM, ANY, same, formula,                                           \
      "$ * max(min($ * 0.16666666666666666 + 0.5, 1.0), 0.0)")                                     \
    X(LEAKY_RELU, "LeakyRelu", ELEM, ANY, same, formula, "select($ < 0.0, $ * {alpha=0.01}, $)")   \
    X(ELU, "Elu", ELEM, ANY, same, formula, "select($ < 0.0, (exp($) - 1.0) * {alpha=1.0}, $)")    \
    X(SELU, "Selu", ELEM, ANY, same, formula,                                                      \
      "select($ > 0.0, $, (exp($) - 1.0) * {alpha=1.67326319217681884765625}) * "                  \
      "{gamma=1.05070102214813232421875}")                                                         \
    X(CELU, "Celu", ELEM, ANY, same, formula,                                                      \
      "max($, 0.0) + min((exp($ / {alpha=1.0}) - 1.0) * {alpha=1.0}, 0.0)")                        \
    X(THRESHOLDED_RELU, "ThresholdedRelu", ELEM, ANY, same, formula,                               \
      "select($ > {alpha=1.0}, $, 0.0)")                                                           \
    X(SOFTPLUS, "Softplus", ELEM, ANY, same, formula,                                              \
      "max($, 0.0) + log(1.0 + exp(0.0 - abs($)))")                                                \
    X(MISH, "Mish", ELEM, ANY, same, formula,                                                      \
      "$ * tanh(max($, 0.0) + log(1.0 + exp(0.0 - abs($))))")                                      \
    X(GELU, "Gelu", ELEM, ANY, same, gelu, NULL)                                                   \
    X(SOFTSIGN, "Softsign", ELEM, ANY, same, formula, "$ / (1.0 + abs($))")                        \
    X(SIGN, "Sign", ELEM, ANY, same, formula, "select($ > 0.0, 1.0, select($ < 0.0, -1.0, 0.0))")  \
    X(NEG, "Neg", ELEM, ANY, same, formula, "0.0 - $")                                             \
    X(ABS, "Abs", ELEM, ANY, same, formula, "abs($)")                                              \
    X(EXP, "Exp", ELEM, ANY, same, formula, "exp($)")                                              \
    X(LOG, "Log", ELEM, ANY, same, formula, "log($)")                                              \
    X(RECIPROCAL, "Reciprocal", ELEM, ANY, same, formula, "1.0 / $")                               \
    X(FLOOR, "Floor", ELEM, ANY, same, formula, "floor($)")                                        \
    X(CEIL, "Ceil", ELEM, ANY, same, formula, "ceil($)")                                           \
    X(MOD, "Mod", ELEM, ANY, binary, mod, NULL)                                                    \
    X(EQUAL, "Equal", ELEM, ANY, compare, bool_result, NULL)                                       \
    X(LESS, "Less", ELEM, ANY, compare, bool_result, NULL)                                         \
    X(GREATER, "Greater", ELEM, ANY, compare, bool_result, NULL)                                   \
    X(WHERE, "Where", ELEM, ANY, where, formula, "select($0, $1, $2)")                             \
    X(NOT, "Not", ELEM, ANY, logical, bool_result, NULL)                                           \
    X(AND, "And", ELEM, ANY, logical, bool_result, NULL)                                           \
    X(OR, "Or", ELEM, ANY, logical, bool_result, NULL)                                             \
    X(RANGE, "Range", NONE, ROW, range, none, NULL)                                                \
    X(SCATTER_ND, "ScatterND", NONE, ROW, scatter_nd, none, NULL)                                  \
    X(TILE, "Tile", INJECTIVE, ROW, tile, tile, NULL)                                              \
    X(DEPTH_TO_SPACE, "DepthToSpace", INJECTIVE, ROW, depth_to_space, depth_to_space, NULL)        \
    X(SPACE_TO_DEPTH, "SpaceToDepth", INJECTIVE, ROW, space_to_depth, space_to_depth, NULL)        \
    X(RESIZE, "Resize", INJECTIVE, ANY, resize, resize, NULL)                                      \
    X(CONSTANT_OF_SHAPE, "ConstantOfShape", NONE, ROW, constant_of_shape, none, NULL)              \
    X(EXPAND, "Expand", INJECTIVE, ROW, expand, expand, NULL)                                      \
    X(MAX_POOL, "MaxPool", REDUCE, ANY, pool, max_pool, NULL)                                      \
    X(AVERAGE_POOL, "AveragePool", REDUCE, ANY, pool, average_pool, NULL)                          \
    X(GLOBAL_AVERAGE_POOL, "GlobalAveragePool", REDUCE, ANY, global_pool, global_pool, NULL)       \
    X(BATCH_NORM, "BatchNormalization", ELEM, ANY, batch_norm, batchnorm, NULL)                    \
    X(LAYER_NORM, "LayerNormalization", REDUCE, ROW, layer_norm, layer_norm, NULL)                 \
    X(INSTANCE_NORM, "InstanceNormalization", REDUCE, ROW, same, instance_norm, NULL)              \
    X(GROUP_NORM, "GroupNormalization", REDUCE, ROW, same, group_norm, NULL)                       \
    X(REDUCE_MEAN, "ReduceMean", REDUCE, ROW, reduce, reduce, NULL)                                \
    X(REDUCE_SUM, "ReduceSum", REDUCE, ROW, reduce, reduce, NULL)                                  \
    X(REDUCE_MAX, "ReduceMax", REDUCE, ROW, reduce, reduce, NULL)                                  \
    X(REDUCE_MIN, "ReduceMin", REDUCE, ROW, reduce, reduce, NULL)                                  \
    X(REDUCE_L1, "ReduceL1", REDUCE, ROW, reduce, reduce, NULL)                                    \
    X(REDUCE_L2, "ReduceL2", REDUCE, ROW, reduce, reduce, NULL)                                    \
    X(REDUCE_SUM_SQUARE, "ReduceSumSquare", REDUCE, ROW, reduce, reduce, NULL)                     \
    X(REDUCE_LOG_SUM, "ReduceLogSum", REDUCE, ROW, reduce, reduce, NULL)                           \
    X(REDUCE_LOG_SUM_EXP, "ReduceLogSumExp", REDUCE, ROW, reduce, reduce, NULL)                    \
    X(REDUCE_PROD, "ReduceProd", REDUCE, ROW, reduce, reduce, NULL)                                \
    X(ARG_MAX, "ArgMax", REDUCE, ROW, arg, arg, NULL)                                              \
    X(ARG_MIN, "ArgMin", REDUCE, ROW, arg, arg, NULL)                                              \
    X(SOFTMAX, "Softmax", REDUCE, ROW, same, softmax, NULL)                                        \
    X(RESHAPE, "Reshape", ALIAS, ROW, reshape, none, NULL)                                         \
    X(FLATTEN, "Flatten", ALIAS, ROW, flatten, none, NULL)                                         \
    X(TRANSPOSE, "Transpose", INJECTIVE, ROW, transpose, transpose, NULL)                          \
    X(CONCAT, "Concat", INJECTIVE, ANY, concat, concat, NULL)                                      \
    X(SPLIT, "Split", SPLIT, ANY, split, split, NULL)                                              \
    X(SLICE, "Slice", INJECTIVE, ANY, slice, slice, NULL)                                          \
    X(SQUEEZE, "Squeeze", ALIAS, ROW, squeeze, none, NULL)                                         \
    X(UNSQUEEZE, "Unsqueeze", ALIAS, ROW, unsqueeze, none, NULL)                                   \
    X(GATHER, "Gather", INJECTIVE, ROW, gather, gather, NULL)                                      \
    X(GATHER_ELEMENTS, "GatherElements", INJECTIVE, ROW, gather_elements, gather_elements, NULL)   \
    X(PAD, "Pad", INJECTIVE, ANY, pad, pad, NULL)                                                  \
    X(IDENTITY, "Identity", ALIAS, ROW, identity, unary, NULL)                                     \
    X(DROPOUT, "Dropout", ALIAS, ROW, dropout, unary, NULL)                                        \
    X(SHAPE, "Shape", NONE, ROW, shape_op, none, NULL)                                             \
    X(CONSTANT, "Constant", NONE, ROW, none, none, NULL)                                           \
    X(CAST, "Cast", ELEM, ANY, cast, unary, NULL)

typedef enum {
#define TT_GOP_ENUM(n, ...) TT_GOP_##n,
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
    /* A Transpose (or a Pad or Slice of the whole input) whose output the layout pass gave the
     * memory of its input (layout.c): an alias, no kernel. */
    bool view;
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
 * and why: not ONNX or truncated, an opset outside 11-22, an unknown operator, external weights,
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
