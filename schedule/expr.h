/* Expressions of the tensor IR: scalar arithmetic over loop variables, tensor reads (compute
 * definitions) and buffer loads (loop IR).
 *
 * Nodes live in a tt_expr_pool and refer to each other by 32-bit ids (0 = none), so a whole
 * definition or program is freed at once and copied with memcpy.  Index arithmetic is int64 with
 * floor division and floor modulo (as in TVM's TE).  Not thread-safe; one pool per owner. */
#ifndef TT_SCHEDULE_EXPR_H
#define TT_SCHEDULE_EXPR_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_DTYPE_LIST(X)                                                                           \
    X(FLOAT32, "float32", 4, 1)                                                                    \
    X(FLOAT64, "float64", 8, 1)                                                                    \
    X(INT32, "int32", 4, 0)                                                                        \
    X(INT64, "int64", 8, 0)                                                                        \
    X(BOOL, "bool", 1, 0)

typedef enum {
#define TT_DT_ENUM(n, s, b, f) TT_DT_##n,
    TT_DTYPE_LIST(TT_DT_ENUM)
#undef TT_DT_ENUM
        TT_DTYPE_COUNT
} tt_dtype;

const char *tt_dtype_name(tt_dtype t);
/* Returns the dtype for a name ("float32"), or -1. */
int tt_dtype_parse(const char *name, size_t len);
int tt_dtype_bytes(tt_dtype t);
bool tt_dtype_is_float(tt_dtype t);

/* Expression kinds.  Columns: name, printed symbol, number of expression children. */
#define TT_EXPR_KIND_LIST(X)                                                                       \
    X(INT, "int", 0)                                                                               \
    X(FLOAT, "float", 0)                                                                           \
    X(VAR, "var", 0)                                                                               \
    X(ADD, "+", 2)                                                                                 \
    X(SUB, "-", 2)                                                                                 \
    X(MUL, "*", 2)                                                                                 \
    X(DIV, "/", 2)                                                                                 \
    X(MOD, "%", 2)                                                                                 \
    X(MIN, "min", 2)                                                                               \
    X(MAX, "max", 2)                                                                               \
    X(LT, "<", 2)                                                                                  \
    X(LE, "<=", 2)                                                                                 \
    X(GT, ">", 2)                                                                                  \
    X(GE, ">=", 2)                                                                                 \
    X(EQ, "==", 2)                                                                                 \
    X(NE, "!=", 2)                                                                                 \
    X(AND, "&&", 2)                                                                                \
    X(OR, "||", 2)                                                                                 \
    X(NOT, "!", 1)                                                                                 \
    X(NEG, "-", 1)                                                                                 \
    X(SELECT, "select", 3)                                                                         \
    X(CAST, "cast", 1)                                                                             \
    X(CALL, "call", 1)                                                                             \
    X(READ, "read", 0)                                                                             \
    X(LOAD, "load", 1)

typedef enum {
#define TT_EK_ENUM(n, s, c) TT_EXPR_##n,
    TT_EXPR_KIND_LIST(TT_EK_ENUM)
#undef TT_EK_ENUM
        TT_EXPR_KIND_COUNT
} tt_expr_kind;

/* Unary math functions for TT_EXPR_CALL. */
#define TT_FUNC_LIST(X)                                                                            \
    X(EXP, "exp")                                                                                  \
    X(LOG, "log")                                                                                  \
    X(SQRT, "sqrt")                                                                                \
    X(TANH, "tanh")                                                                                \
    X(SIGMOID, "sigmoid")                                                                          \
    X(ABS, "abs")                                                                                  \
    X(ERF, "erf")                                                                                  \
    X(FLOOR, "floor")                                                                              \
    X(CEIL, "ceil")

typedef enum {
#define TT_FN_ENUM(n, s) TT_FUNC_##n,
    TT_FUNC_LIST(TT_FN_ENUM)
#undef TT_FN_ENUM
        TT_FUNC_COUNT
} tt_func;

const char *tt_func_name(tt_func f);
int tt_func_parse(const char *name, size_t len);
const char *tt_expr_kind_name(tt_expr_kind k);

typedef uint32_t tt_eid; /* expression id; 0 = none */

/* One node, 32 bytes.
 *   INT/FLOAT: imm.   VAR: a = variable id.   Binary: a, b.   Unary (NOT, NEG, CAST): a.
 *   SELECT: a ? b : c.   CALL: a = argument, b = tt_func.
 *   READ (compute definitions): a = tensor (op) id, b = first index in the pool's args, n = rank.
 *   LOAD (loop IR): a = flat index expression, b = buffer id. */
typedef struct tt_expr {
    uint8_t kind;  /* tt_expr_kind */
    uint8_t dtype; /* tt_dtype */
    uint16_t n;
    uint32_t a, b, c;
    union {
        int64_t i;
        double f;
    } imm;
} tt_expr;

typedef struct tt_var {
    const char *name; /* in the pool's arena */
} tt_var;

typedef struct tt_expr_pool {
    TT_VEC(tt_expr) nodes; /* nodes.data[0] is the unused "none" node */
    TT_VEC(tt_eid) args;
    TT_VEC(tt_var) vars;
    tt_arena strings;
    int oom; /* set when an allocation failed; constructors then return 0 */
} tt_expr_pool;

void tt_expr_pool_init(tt_expr_pool *p);
void tt_expr_pool_free(tt_expr_pool *p);
/* Deep copy of a whole pool (ids stay valid in the copy). */
tt_status tt_expr_pool_clone(const tt_expr_pool *src, tt_expr_pool *dst);

static inline const tt_expr *tt_expr_get(const tt_expr_pool *p, tt_eid e)
{
    return &p->nodes.data[e];
}

/* Constructors.  Each returns the new id, or 0 when out of memory (pool->oom is then set). */
uint32_t tt_var_new(tt_expr_pool *p, const char *name);
const char *tt_var_name(const tt_expr_pool *p, uint32_t var);
tt_eid tt_expr_int(tt_expr_pool *p, int64_t v);
tt_eid tt_expr_float(tt_expr_pool *p, tt_dtype t, double v);
tt_eid tt_expr_var(tt_expr_pool *p, uint32_t var);
/* Binary and unary nodes; the dtype is derived (comparisons give BOOL, arithmetic the operand's).
 */
tt_eid tt_expr_binary(tt_expr_pool *p, tt_expr_kind k, tt_eid a, tt_eid b);
tt_eid tt_expr_unary(tt_expr_pool *p, tt_expr_kind k, tt_eid a);
tt_eid tt_expr_select(tt_expr_pool *p, tt_eid cond, tt_eid t, tt_eid f);
tt_eid tt_expr_cast(tt_expr_pool *p, tt_dtype t, tt_eid a);
tt_eid tt_expr_call(tt_expr_pool *p, tt_func f, tt_eid arg);
tt_eid tt_expr_read(tt_expr_pool *p, tt_dtype t, uint32_t tensor, int n, const tt_eid *idx);
tt_eid tt_expr_load(tt_expr_pool *p, tt_dtype t, uint32_t buffer, tt_eid index);

/* Shorthands for index arithmetic. */
#define tt_add(p, a, b) tt_expr_binary((p), TT_EXPR_ADD, (a), (b))
#define tt_sub(p, a, b) tt_expr_binary((p), TT_EXPR_SUB, (a), (b))
#define tt_mul(p, a, b) tt_expr_binary((p), TT_EXPR_MUL, (a), (b))
#define tt_div(p, a, b) tt_expr_binary((p), TT_EXPR_DIV, (a), (b))
#define tt_mod(p, a, b) tt_expr_binary((p), TT_EXPR_MOD, (a), (b))

static inline tt_eid tt_expr_read_index(const tt_expr_pool *p, const tt_expr *r, int i)
{
    return p->args.data[r->b + (uint32_t)i];
}

/* Copies expression `e` of pool `src` into `dst`, mapping variables through `var_map` (indexed by
 * source var id; NULL = same ids) and tensor ids of READ nodes through `tensor_map` (NULL = same).
 * Returns the new id or 0 on OOM. */
tt_eid tt_expr_copy(tt_expr_pool *dst, const tt_expr_pool *src, tt_eid e, const uint32_t *var_map,
                    const uint32_t *tensor_map);

/* Replaces variables by expressions: every VAR v with subst[v] != 0 becomes subst[v] (an id in the
 * same pool).  `nsubst` is the length of `subst`.  Shares unchanged subtrees. */
tt_eid tt_expr_substitute(tt_expr_pool *p, tt_eid e, const tt_eid *subst, size_t nsubst);

/* Calls fn(ctx, read_node_id) for every READ node in `e`, outermost first. */
void tt_expr_visit_reads(const tt_expr_pool *p, tt_eid e, void (*fn)(void *ctx, tt_eid read),
                         void *ctx);
/* True if pred(ctx, id) holds for some node of `e`, visited outermost first (a LOAD's index and
 * a READ's indices included); stops at the first. */
bool tt_expr_any(const tt_expr_pool *p, tt_eid e, bool (*pred)(void *ctx, tt_eid id), void *ctx);
/* True if `e` contains a READ of tensor `tensor`. */
bool tt_expr_reads_tensor(const tt_expr_pool *p, tt_eid e, uint32_t tensor);
/* True if index `ix` of a dimension of `extent` elements is the constant 0 on a dimension of one
 * element: it reads that dimension's only element, as a loop variable over it would. */
bool tt_expr_is_unit_index(const tt_expr_pool *p, tt_eid ix, int64_t extent);
/* True if e reads `tensor` and indexes it by plain variables only (A[i, k], not A[i + r, k]);
 * given the tensor's shape, also by 0 on a dimension of extent 1 (a 1x1 convolution's
 * W[0, 0, c, k]). */
bool tt_expr_reads_tensor_at_vars(const tt_expr_pool *p, tt_eid e, uint32_t tensor,
                                  const int64_t *shape);
/* True if variable `var` occurs in `e`. */
bool tt_expr_uses_var(const tt_expr_pool *p, tt_eid e, uint32_t var);
/* The type a binary node computes in: float wins (the wider float), else the wider integer (bool
 * only with bool).  The code generators convert both operands to it. */
tt_dtype tt_expr_operand_type(const tt_expr_pool *p, const tt_expr *n);
/* Linear coefficient of variable `var` in integer expression `e`: 0 if absent, INT64_MIN if not
 * linear in it (used to find loads and stores that move by one element per lane). */
int64_t tt_expr_coef(const tt_expr_pool *p, tt_eid e, uint32_t var);
/* The greatest common divisor of |a| and |b|; gcd(0, b) = |b| (0 divides nothing but is
 * divisible by everything). */
int64_t tt_gcd64(int64_t a, int64_t b);
/* A known divisor of integer expression `e`, 0 when it is 0 (divisible by everything), 1 when
 * nothing better is known: constants, sums, products by constants, exact quotients, min/max and
 * selects of multiples (a clamped tile start, min(t*32, 176), is a multiple of 16). */
int64_t tt_expr_known_divisor(const tt_expr_pool *p, tt_eid e);
/* How integer expression `e` moves across the lanes of a vector loop whose variable `var` runs
 * over [0, lanes): true when e(var) = e(0) + *step * var for every lane, with *align a known
 * divisor of e(0) (0 when e(0) is 0).  Beyond tt_expr_coef it understands floor division and
 * modulo by a constant multiple of `lanes` whose operand moves by one per lane from a multiple of
 * `lanes`: the lanes then stay in one row, so a fused loop split by the vector, (o*4 + v) / 64
 * and (o*4 + v) % 64, moves by 0 and by 1 element per lane. */
bool tt_expr_lane_step(const tt_expr_pool *p, tt_eid e, uint32_t var, int64_t lanes, int64_t *step,
                       int64_t *align);
/* Whether boolean `cond` takes one value in all the lanes of each vector of a loop over `var`
 * emitted as vectors of `lanes` from multiples of `lanes`: comparisons, and their conjunctions,
 * disjunctions and negations, whose sides move by the lane (tt_expr_lane_step) so that no vector
 * straddles where they change.  A concatenation's `c < 96` over a vector of 16 channels starting at
 * a multiple of 16 is; `c < 100` is not.  Such a guard is one scalar branch, not a lane mask. */
bool tt_expr_lane_uniform(const tt_expr_pool *p, tt_eid cond, uint32_t var, int64_t lanes);
/* True if `e` is an INT constant; stores its value in *v when v is not NULL. */
bool tt_expr_is_const_int(const tt_expr_pool *p, tt_eid e, int64_t *v);
/* Structural equality. */
bool tt_expr_equal(const tt_expr_pool *p, tt_eid a, tt_eid b);

/* Appends a readable form ("(i*16 + j)") to sb.  `tensor_name(ctx, id)` names READ tensors and
 * LOAD buffers; NULL prints "T<id>". */
typedef const char *(*tt_name_fn)(const void *ctx, uint32_t id);
void tt_expr_print(tt_strbuf *sb, const tt_expr_pool *p, tt_eid e, tt_name_fn tensor_name,
                   const void *ctx);

/* ---- simplification ---- */

/* Known ranges of variables: var v lies in [lo[v], hi[v]] when known[v]. */
typedef struct tt_bounds {
    int64_t *lo, *hi;
    uint8_t *known;
    size_t n;
} tt_bounds;

/* Returns an equivalent, simpler expression: constants folded, sums of products put in canonical
 * linear form, div/mod by constants removed where the bounds prove them trivial, comparisons
 * decided where the bounds allow.  `bounds` may be NULL. */
tt_eid tt_simplify(tt_expr_pool *p, tt_eid e, const tt_bounds *bounds);
/* Constant range of an integer expression under `bounds`; false if unbounded. */
bool tt_expr_const_bound(const tt_expr_pool *p, tt_eid e, const tt_bounds *bounds, int64_t *lo,
                         int64_t *hi);

/* ---- evaluation (shared by the reference evaluator and the interpreter) ---- */

typedef union tt_value {
    int64_t i;
    double f;
} tt_value;

/* The value of a variable outside its loop: reading it is an error, not a silent 0. */
#define TT_VAR_UNBOUND INT64_MIN

typedef struct tt_eval_env {
    const int64_t *vars; /* value of each variable (TT_VAR_UNBOUND: none) */
    tt_status (*read)(void *ctx, const tt_expr *node, const int64_t *idx, tt_value *out);
    tt_status (*load)(void *ctx, const tt_expr *node, int64_t index, tt_value *out);
    void *ctx;
} tt_eval_env;

/* Evaluates `e`; floats as double, integers and booleans as int64.  SELECT evaluates only the
 * chosen branch, so guarded out-of-bounds reads are never performed.  Errors (division by zero,
 * a failing read) return a status. */
tt_status tt_expr_eval(const tt_expr_pool *p, tt_eid e, const tt_eval_env *env, tt_value *out);

/* Converts a computed value to storage form and back (rounds to float32, wraps to int32). */
tt_value tt_value_round(tt_dtype t, tt_value v);

#endif
