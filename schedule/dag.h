/* Compute DAG: placeholders (inputs) and compute operations in topological order.
 *
 * A compute op defines every element of its output tensor:
 *     out[axis0, ..., axisN-1] = body                          (reduce == NONE)
 *     out[axis0, ..., axisN-1] = combine over raxis: body      (SUM / MAX / MIN)
 * where `body` reads earlier ops with TT_EXPR_READ nodes whose tensor id is the op id.
 * The DAG owns its expression pool; op ids are indices into `ops` and never change.
 * Not thread-safe; a const DAG may be read from many threads. */
#ifndef TT_SCHEDULE_DAG_H
#define TT_SCHEDULE_DAG_H

#include "expr.h"

#define TT_MAX_DIMS   8
#define TT_MAX_REDUCE 8

#define TT_REDUCE_LIST(X)                                                                          \
    X(NONE, "none")                                                                                \
    X(SUM, "sum")                                                                                  \
    X(MAX, "max")                                                                                  \
    X(MIN, "min")                                                                                  \
    X(PROD, "prod")

typedef enum {
#define TT_RD_ENUM(n, s) TT_REDUCE_##n,
    TT_REDUCE_LIST(TT_RD_ENUM)
#undef TT_RD_ENUM
        TT_REDUCE_COUNT
} tt_reduce_kind;

const char *tt_reduce_name(tt_reduce_kind k);

/* Op attributes (bit flags), as Ansor's op attributes. */
enum {
    TT_OP_ATTR_NONE = 0,
    /* A placeholder known when the kernel is built (a layer's weights): a schedule may store it
     * in the layout its loops read (the LR step; Ansor's layout-free placeholders). */
    TT_OP_ATTR_CONSTANT = 1,
};

typedef struct tt_op {
    const char *name; /* in the pool's arena */
    bool is_placeholder;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    uint32_t axis[TT_MAX_DIMS]; /* spatial axis variables (compute ops) */
    int nreduce;
    uint32_t raxis[TT_MAX_REDUCE]; /* reduce axis variables */
    int64_t rextent[TT_MAX_REDUCE];
    tt_reduce_kind reduce;
    tt_eid body;
    uint32_t attrs;
} tt_op;

typedef struct tt_dag {
    tt_expr_pool pool;
    TT_VEC(tt_op) ops;
} tt_dag;

void tt_dag_init(tt_dag *d);
void tt_dag_free(tt_dag *d);
tt_status tt_dag_clone(const tt_dag *src, tt_dag *dst);

/* Builders.  Return the new op id, or -1 when out of memory or the rank is above TT_MAX_DIMS. */
int tt_dag_placeholder(tt_dag *d, const char *name, tt_dtype t, int ndim, const int64_t *shape);
/* Creates a compute op with spatial axes named `axis_names` (NULL: "i0", "i1", ...). The body is
 * set afterwards with tt_dag_set_body(). */
int tt_dag_compute(tt_dag *d, const char *name, tt_dtype t, int ndim, const int64_t *shape,
                   const char *const *axis_names);
/* Adds a reduce axis; returns its variable id (0 on failure). */
uint32_t tt_dag_reduce_axis(tt_dag *d, int op, const char *name, int64_t extent);
void tt_dag_set_body(tt_dag *d, int op, tt_reduce_kind reduce, tt_eid body);
/* VAR expression of spatial axis i / reduce axis i of `op`. */
tt_eid tt_dag_axis(tt_dag *d, int op, int i);
tt_eid tt_dag_raxis(tt_dag *d, int op, int i);
/* READ of `op` at the given indices. */
tt_eid tt_dag_read(tt_dag *d, int op, int n, const tt_eid *idx);

/* Checks every op: reads refer to earlier ops with the right rank, extents are positive, every
 * compute op has a body.  Returns TT_ERR_BAD_WORKLOAD with the op named. */
tt_status tt_dag_validate(const tt_dag *d, tt_errbuf *err);

/* Puts the ops in the order Apache TVM's ComputeDAG uses: a post-order depth-first walk from the
 * outputs (in definition order), visiting each op's inputs in order of first appearance in its
 * body.  Stage ids in auto_scheduler records index this order, so DAGs built the same way as
 * TVM's replay TVM's records unchanged.  Returns TT_ERR_NOMEM on failure (DAG unchanged). */
tt_status tt_dag_sort_tvm(tt_dag *d);

/* True if some compute op reads `op`. */
bool tt_dag_has_readers(const tt_dag *d, int op);
/* Where the values of placeholder `op` index a dimension on their own (`x[.., w[i], ..]`: a
 * Gather's or a Resize's indices), the smallest such dimension's extent, the values that read
 * inside every one; 0 where they index none. */
int64_t tt_dag_index_extent(const tt_dag *d, int op);
/* Function parameters in order: placeholders (op order), then outputs (compute ops nobody reads,
 * op order).  Writes up to `max` op ids; returns the count.  *n_inputs gets the placeholder
 * count when not NULL. */
int tt_dag_params(const tt_dag *d, int *ops, int max, int *n_inputs);
/* Floating-point operations of one evaluation (as TVM's FLOP estimator counts). */
double tt_dag_flops(const tt_dag *d);
/* Number of elements of op's output. */
int64_t tt_op_numel(const tt_op *op);
/* Identity of the reduction (0 for sum, -inf for max, +inf for min). */
tt_value tt_reduce_identity(tt_reduce_kind k, tt_dtype t);
tt_value tt_reduce_combine(tt_reduce_kind k, tt_dtype t, tt_value acc, tt_value v);

/* Readable definitions, one op per line. Caller frees. */
char *tt_dag_print(const tt_dag *d);

/* Reference evaluation straight from the definitions (no schedule): the correctness oracle's
 * oracle.  `args` are the parameter buffers in tt_dag_params() order, each a dense row-major
 * array of the op's dtype.  Intermediate ops get temporary storage.  Returns TT_ERR_RUNTIME with
 * the op and index when a read is out of bounds. */
tt_status tt_dag_eval(const tt_dag *d, void *const *args, tt_errbuf *err);

/* One element of op `op` at index `idx`, evaluated from the definition alone (recursively through
 * intermediate ops), given the placeholder buffers in tt_dag_params() order.  For spot checks of
 * large outputs, where evaluating everything would take too long. */
tt_status tt_dag_eval_element(const tt_dag *d, int op, const int64_t *idx, void *const *inputs,
                              tt_value *out, tt_errbuf *err);

/* Reads/writes element `i` of a dense buffer of dtype t. */
tt_value tt_buffer_get(const void *buf, tt_dtype t, int64_t i);
void tt_buffer_set(void *buf, tt_dtype t, int64_t i, tt_value v);

#endif
