/* Private to graph/: what import and shape inference share. */
#ifndef TT_GRAPH_GRAPH_INT_H
#define TT_GRAPH_GRAPH_INT_H

#include "graph.h"

/* Infers the dtype and shape of every node output in order, folding integer shape arithmetic
 * whose inputs are constants into constants (the node is marked removed).  Errors name the
 * node. */
tt_status tt__graph_infer(tt_graph *g, tt_errbuf *err);

/* Attributes whose names begin so are written by tt_net_build's rewrites only (a model's are
 * refused at import): they mean what the rewrite says. */
#define TT__GRAPH_OWN_ATTR "tvm_tune."

/* Appends a tensor (name copied into the arena); its index, or -1 when out of memory. */
int tt__graph_add_tensor(tt_graph *g, const char *name, tt_gtensor_kind kind);

/* `bytes` of src copied into g's arena (at least one byte allocated, so an empty tensor's data
 * is not NULL); NULL when out of memory. */
void *tt__graph_copy(tt_graph *g, const void *src, size_t bytes);

#define TT__MAX_WINDOW 6

/* The window of a Conv, MaxPool or AveragePool node, auto_pad resolved into pads. */
typedef struct tt__window {
    int nk; /* spatial dimensions */
    int64_t kernel[TT__MAX_WINDOW], stride[TT__MAX_WINDOW], dilation[TT__MAX_WINDOW];
    int64_t pad_begin[TT__MAX_WINDOW], pad_end[TT__MAX_WINDOW], out[TT__MAX_WINDOW];
} tt__window;

tt_status tt__graph_window(const tt_graph *g, int node, tt__window *w, tt_errbuf *err);

/* A reduction node's reduced dimensions of its input (false: its axes are not valid, which
 * shape inference has reported). */
bool tt__graph_reduce_axes(const tt_graph *g, int node, bool *reduced);
/* Pad's amounts for each dimension of its input (2 * rank: the begins, then the ends), opset 18's
 * axes input expanded; false when they are not constants of the right length. */
bool tt__graph_pad_amounts(const tt_graph *g, int node, int64_t *pads);

/* A Slice node's first index and step in every dimension of its input. */
tt_status tt__graph_slice(const tt_graph *g, int node, int64_t *first, int64_t *step,
                          tt_errbuf *err);

/* Einsum's equation resolved against its operands' ranks (graph/einsum.c).  A label is a letter,
 * or 1 + k for dimension k of the ellipsis (the widest operand's, operands right-aligned in it
 * as numpy broadcasts). */
#define TT__EINSUM_MAX_INPUTS 8
#define TT__EINSUM_MAX_SUMMED 8
typedef struct tt__einsum {
    int ninputs;
    int in_rank[TT__EINSUM_MAX_INPUTS];
    char in[TT__EINSUM_MAX_INPUTS][TT_GRAPH_MAX_RANK]; /* each operand dimension's label */
    int out_rank;
    char out[TT_GRAPH_MAX_RANK]; /* given after "->", else numpy's implicit output */
    int nsum;
    char sum[TT__EINSUM_MAX_SUMMED]; /* labels summed over: in an operand, not in the output */
    int ellipsis;                    /* dimensions the ellipsis covers */
} tt__einsum;

/* Parses `eq` for operands of the given ranks; false with the reason in `why`. */
bool tt__einsum_parse(const char *eq, int ninputs, const int *ranks, tt__einsum *e, char *why,
                      size_t whylen);
/* The extent of `label` over the operands (a dimension of 1 broadcasts); false when two
 * operands disagree, with the reason in `why`. */
bool tt__einsum_extent(const tt__einsum *e, const tt_gtensor *const *inputs, char label,
                       int64_t *extent, char *why, size_t whylen);

/* Typed attributes of a node: the value, or `def` when it is absent or of another kind. */
int64_t tt__attr_int(const tt_gnode *n, const char *name, int64_t def);
double tt__attr_float(const tt_gnode *n, const char *name, double def);
const char *tt__attr_str(const tt_gnode *n, const char *name, const char *def);
/* The ints attribute `name` (NULL and *count = 0 when absent). */
const int64_t *tt__attr_ints(const tt_gnode *n, const char *name, size_t *count);

/* Element i of a constant tensor of any dtype, as a double; and stored (converted to its dtype). */
double tt__gtensor_value(const tt_gtensor *t, int64_t i);
void tt__gtensor_set(tt_gtensor *t, int64_t i, double v);

/* The error prefix for node i: "<source>: node 12 'Conv_3' (Conv): ". */
tt_status tt__graph_node_err(const tt_graph *g, int node, tt_errbuf *err, tt_status s,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
