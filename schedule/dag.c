#include "dag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const reduce_names[] = {
#define TT_RD_ROW(n, s) s,
    TT_REDUCE_LIST(TT_RD_ROW)
#undef TT_RD_ROW
};
_Static_assert(TT_ARRAY_LEN(reduce_names) == TT_REDUCE_COUNT, "reduce names");

const char *tt_reduce_name(tt_reduce_kind k)
{
    return (unsigned)k < TT_REDUCE_COUNT ? reduce_names[k] : "?";
}

void tt_dag_init(tt_dag *d)
{
    memset(d, 0, sizeof(*d));
    tt_expr_pool_init(&d->pool);
}

void tt_dag_free(tt_dag *d)
{
    tt_expr_pool_free(&d->pool);
    TT_VEC_FREE(&d->ops);
}

tt_status tt_dag_clone(const tt_dag *src, tt_dag *dst)
{
    memset(dst, 0, sizeof(*dst));
    if (tt_expr_pool_clone(&src->pool, &dst->pool))
        return TT_ERR_NOMEM;
    if (TT_VEC_RESERVE(&dst->ops, src->ops.len)) {
        tt_expr_pool_free(&dst->pool);
        return TT_ERR_NOMEM;
    }
    for (size_t i = 0; i < src->ops.len; i++) {
        tt_op op = src->ops.data[i];
        op.name = tt_arena_strdup(&dst->pool.strings, op.name);
        if (!op.name) {
            tt_dag_free(dst);
            return TT_ERR_NOMEM;
        }
        dst->ops.data[dst->ops.len++] = op;
    }
    return TT_OK;
}

static int add_op(tt_dag *d, const char *name, bool ph, tt_dtype t, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > TT_MAX_DIMS)
        return -1;
    tt_op op = {0};
    op.name = tt_arena_strdup(&d->pool.strings, name);
    op.is_placeholder = ph;
    op.dtype = t;
    op.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        op.shape[i] = shape[i];
    if (!op.name || TT_VEC_PUSH(&d->ops, op))
        return -1;
    return (int)d->ops.len - 1;
}

int tt_dag_placeholder(tt_dag *d, const char *name, tt_dtype t, int ndim, const int64_t *shape)
{
    return add_op(d, name, true, t, ndim, shape);
}

int tt_dag_compute(tt_dag *d, const char *name, tt_dtype t, int ndim, const int64_t *shape,
                   const char *const *axis_names)
{
    int id = add_op(d, name, false, t, ndim, shape);
    if (id < 0)
        return -1;
    for (int i = 0; i < ndim; i++) {
        char buf[16];
        const char *nm = axis_names ? axis_names[i] : (snprintf(buf, sizeof(buf), "i%d", i), buf);
        uint32_t v = tt_var_new(&d->pool, nm);
        if (!v)
            return -1;
        d->ops.data[id].axis[i] = v;
    }
    return id;
}

uint32_t tt_dag_reduce_axis(tt_dag *d, int op, const char *name, int64_t extent)
{
    tt_op *o = &d->ops.data[op];
    if (o->nreduce >= TT_MAX_REDUCE)
        return 0;
    uint32_t v = tt_var_new(&d->pool, name);
    if (!v)
        return 0;
    o = &d->ops.data[op];
    o->raxis[o->nreduce] = v;
    o->rextent[o->nreduce++] = extent;
    return v;
}

void tt_dag_set_body(tt_dag *d, int op, tt_reduce_kind reduce, tt_eid body)
{
    d->ops.data[op].reduce = reduce;
    d->ops.data[op].body = body;
}

tt_eid tt_dag_axis(tt_dag *d, int op, int i)
{
    return tt_expr_var(&d->pool, d->ops.data[op].axis[i]);
}

tt_eid tt_dag_raxis(tt_dag *d, int op, int i)
{
    return tt_expr_var(&d->pool, d->ops.data[op].raxis[i]);
}

tt_eid tt_dag_read(tt_dag *d, int op, int n, const tt_eid *idx)
{
    return tt_expr_read(&d->pool, d->ops.data[op].dtype, (uint32_t)op, n, idx);
}

typedef struct {
    const tt_dag *d;
    int self;
    tt_errbuf *err;
    tt_status st;
} validate_ctx;

static void validate_read(void *vctx, tt_eid e)
{
    validate_ctx *c = vctx;
    const tt_expr *r = tt_expr_get(&c->d->pool, e);
    if (c->st)
        return;
    if ((int)r->a >= c->self) {
        c->st = tt_err(c->err, TT_ERR_BAD_WORKLOAD,
                       "op '%s' reads tensor #%u, which is not defined before it",
                       c->d->ops.data[c->self].name, r->a);
        return;
    }
    const tt_op *src = &c->d->ops.data[r->a];
    if (r->n != src->ndim)
        c->st = tt_err(c->err, TT_ERR_BAD_WORKLOAD,
                       "op '%s' reads '%s' with %d indices, but it has rank %d",
                       c->d->ops.data[c->self].name, src->name, r->n, src->ndim);
}

/* Reads that are not under a select branch (or the right side of && / ||) must stay inside the
 * tensor for every point of the iteration domain: checked with the variables' ranges. */
static tt_status check_read_bounds(const tt_dag *d, int self, tt_eid e, bool guarded,
                                   const tt_bounds *b, tt_errbuf *err)
{
    if (!e)
        return TT_OK;
    const tt_expr n = *tt_expr_get(&d->pool, e);
    tt_status s;
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return TT_OK;
    case TT_EXPR_READ: {
        const tt_op *src = &d->ops.data[n.a];
        for (int k = 0; k < n.n; k++) {
            tt_eid idx = d->pool.args.data[n.b + (uint32_t)k];
            int64_t lo, hi;
            if (!guarded && tt_expr_const_bound(&d->pool, idx, b, &lo, &hi) &&
                (lo < 0 || hi >= src->shape[k]))
                return tt_err(err, TT_ERR_BAD_WORKLOAD,
                              "'%s' reads '%s' outside dimension %d: indices %lld .. %lld, extent "
                              "%lld (guard the read with select)",
                              d->ops.data[self].name, src->name, k, (long long)lo, (long long)hi,
                              (long long)src->shape[k]);
            if ((s = check_read_bounds(d, self, idx, guarded, b, err)))
                return s;
        }
        return TT_OK;
    }
    case TT_EXPR_SELECT:
        if ((s = check_read_bounds(d, self, n.a, guarded, b, err)))
            return s;
        if ((s = check_read_bounds(d, self, n.b, true, b, err)))
            return s;
        return check_read_bounds(d, self, n.c, true, b, err);
    case TT_EXPR_AND:
    case TT_EXPR_OR:
        if ((s = check_read_bounds(d, self, n.a, guarded, b, err)))
            return s;
        return check_read_bounds(d, self, n.b, true, b, err);
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return check_read_bounds(d, self, n.a, guarded, b, err);
    default:
        if ((s = check_read_bounds(d, self, n.a, guarded, b, err)))
            return s;
        return check_read_bounds(d, self, n.b, guarded, b, err);
    }
}

static tt_status validate_bounds(const tt_dag *d, int self, tt_errbuf *err)
{
    const tt_op *op = &d->ops.data[self];
    size_t nv = d->pool.vars.len;
    int64_t *lo = calloc(nv, sizeof(int64_t)), *hi = calloc(nv, sizeof(int64_t));
    uint8_t *known = calloc(nv, 1);
    tt_status s = TT_OK;
    if (!lo || !hi || !known) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < op->ndim; k++) {
        known[op->axis[k]] = 1;
        hi[op->axis[k]] = op->shape[k] - 1;
    }
    for (int k = 0; k < op->nreduce; k++) {
        known[op->raxis[k]] = 1;
        hi[op->raxis[k]] = op->rextent[k] - 1;
    }
    tt_bounds b = {lo, hi, known, nv};
    s = check_read_bounds(d, self, op->body, false, &b, err);
out:
    free(lo);
    free(hi);
    free(known);
    return s;
}

tt_status tt_dag_validate(const tt_dag *d, tt_errbuf *err)
{
    if (d->pool.oom)
        return tt_err(err, TT_ERR_NOMEM, "out of memory while building the compute DAG");
    for (size_t i = 0; i < d->ops.len; i++) {
        const tt_op *op = &d->ops.data[i];
        for (int k = 0; k < op->ndim; k++)
            if (op->shape[k] <= 0)
                return tt_err(err, TT_ERR_BAD_WORKLOAD,
                              "tensor '%s' has non-positive extent %lld in dimension %d", op->name,
                              (long long)op->shape[k], k);
        if (op->is_placeholder)
            continue;
        for (int k = 0; k < op->nreduce; k++)
            if (op->rextent[k] <= 0)
                return tt_err(err, TT_ERR_BAD_WORKLOAD,
                              "op '%s' has reduce axis '%s' with non-positive extent %lld",
                              op->name, tt_var_name(&d->pool, op->raxis[k]),
                              (long long)op->rextent[k]);
        if (!op->body)
            return tt_err(err, TT_ERR_BAD_WORKLOAD, "op '%s' has no body", op->name);
        if (op->nreduce > 0 && op->reduce == TT_REDUCE_NONE)
            return tt_err(err, TT_ERR_BAD_WORKLOAD, "op '%s' has reduce axes but no reduction",
                          op->name);
        validate_ctx c = {d, (int)i, err, TT_OK};
        tt_expr_visit_reads(&d->pool, op->body, validate_read, &c);
        if (c.st)
            return c.st;
        tt_status s = validate_bounds(d, (int)i, err);
        if (s)
            return s;
    }
    return TT_OK;
}

bool tt_dag_has_readers(const tt_dag *d, int op)
{
    /* Cache and rfactor steps append ops, so a reader may have a smaller id: scan them all. */
    for (size_t i = 0; i < d->ops.len; i++)
        if (!d->ops.data[i].is_placeholder &&
            tt_expr_reads_tensor(&d->pool, d->ops.data[i].body, (uint32_t)op))
            return true;
    return false;
}

typedef struct {
    const tt_dag *d;
    uint32_t op;
    int64_t extent;
} index_ctx;

static void index_dims(void *vctx, tt_eid e)
{
    index_ctx *c = vctx;
    const tt_expr_pool *p = &c->d->pool;
    const tt_expr *r = tt_expr_get(p, e);
    const tt_op *src = &c->d->ops.data[r->a];
    for (int k = 0; k < r->n && k < src->ndim; k++) {
        const tt_expr *ix = tt_expr_get(p, tt_expr_read_index(p, r, k));
        while (ix->kind == TT_EXPR_CAST)
            ix = tt_expr_get(p, ix->a);
        if (ix->kind == TT_EXPR_READ && ix->a == c->op &&
            (c->extent == 0 || src->shape[k] < c->extent))
            c->extent = src->shape[k];
    }
}

int64_t tt_dag_index_extent(const tt_dag *d, int op)
{
    index_ctx c = {d, (uint32_t)op, 0};
    for (size_t i = 0; i < d->ops.len; i++)
        if (!d->ops.data[i].is_placeholder)
            tt_expr_visit_reads(&d->pool, d->ops.data[i].body, index_dims, &c);
    return c.extent;
}

typedef struct {
    const tt_dag *d;
    int *inputs;
    int n, max;
} inputs_ctx;

static void collect_input(void *vctx, tt_eid e)
{
    inputs_ctx *c = vctx;
    int op = (int)tt_expr_get(&c->d->pool, e)->a;
    for (int i = 0; i < c->n; i++)
        if (c->inputs[i] == op)
            return;
    if (c->n < c->max)
        c->inputs[c->n++] = op;
}

static void post_order(const tt_dag *d, int op, bool *seen, int *order, int *n)
{
    if (seen[op])
        return;
    seen[op] = true;
    if (!d->ops.data[op].is_placeholder) {
        int inputs[64];
        inputs_ctx c = {d, inputs, 0, 64};
        tt_expr_visit_reads(&d->pool, d->ops.data[op].body, collect_input, &c);
        for (int i = 0; i < c.n; i++)
            post_order(d, inputs[i], seen, order, n);
    }
    order[(*n)++] = op;
}

tt_status tt_dag_sort_tvm(tt_dag *d)
{
    size_t n = d->ops.len;
    bool *seen = calloc(n, sizeof(bool));
    int *order = calloc(n, sizeof(int));
    uint32_t *map = calloc(n, sizeof(uint32_t));
    tt_op *ops = calloc(n, sizeof(tt_op));
    tt_status r = TT_OK;
    if (!seen || !order || !map || !ops) {
        r = TT_ERR_NOMEM;
        goto out;
    }
    int count = 0;
    for (size_t i = 0; i < n; i++)
        if (!d->ops.data[i].is_placeholder && !tt_dag_has_readers(d, (int)i))
            post_order(d, (int)i, seen, order, &count);
    for (size_t i = 0; i < n; i++) /* inputs nobody reads keep their place at the end */
        if (!seen[i])
            post_order(d, (int)i, seen, order, &count);
    for (int i = 0; i < count; i++)
        map[order[i]] = (uint32_t)i;
    for (int i = 0; i < count; i++) {
        ops[i] = d->ops.data[order[i]];
        if (!ops[i].is_placeholder &&
            !(ops[i].body = tt_expr_copy(&d->pool, &d->pool, ops[i].body, NULL, map))) {
            r = TT_ERR_NOMEM;
            goto out;
        }
    }
    memcpy(d->ops.data, ops, n * sizeof(tt_op));
out:
    free(seen);
    free(order);
    free(map);
    free(ops);
    return r;
}

int tt_dag_params(const tt_dag *d, int *ops, int max, int *n_inputs)
{
    int n = 0, nin = 0;
    for (size_t i = 0; i < d->ops.len; i++)
        if (d->ops.data[i].is_placeholder) {
            if (n < max)
                ops[n] = (int)i;
            n++;
            nin++;
        }
    for (size_t i = 0; i < d->ops.len; i++)
        if (!d->ops.data[i].is_placeholder && !tt_dag_has_readers(d, (int)i)) {
            if (n < max)
                ops[n] = (int)i;
            n++;
        }
    if (n_inputs)
        *n_inputs = nin;
    return n;
}

int64_t tt_op_numel(const tt_op *op)
{
    int64_t n = 1;
    for (int i = 0; i < op->ndim; i++)
        n *= op->shape[i];
    return n;
}

/* Float operations in an expression, not counting index arithmetic. */
static double count_flops(const tt_expr_pool *p, tt_eid e)
{
    const tt_expr *n = tt_expr_get(p, e);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ:
    case TT_EXPR_LOAD: return 0;
    case TT_EXPR_SELECT: return count_flops(p, n->b) + count_flops(p, n->c);
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return count_flops(p, n->a);
    case TT_EXPR_CALL: return 1 + count_flops(p, n->a);
    default: {
        double self = tt_dtype_is_float((tt_dtype)n->dtype) ? 1 : 0;
        if (n->kind >= TT_EXPR_LT && n->kind <= TT_EXPR_NE)
            self = tt_dtype_is_float((tt_dtype)tt_expr_get(p, n->a)->dtype) ? 1 : 0;
        if (n->kind == TT_EXPR_AND || n->kind == TT_EXPR_OR)
            self = 0;
        return self + count_flops(p, n->a) + count_flops(p, n->b);
    }
    }
}

double tt_dag_flops(const tt_dag *d)
{
    double total = 0;
    for (size_t i = 0; i < d->ops.len; i++) {
        const tt_op *op = &d->ops.data[i];
        if (op->is_placeholder)
            continue;
        double points = (double)tt_op_numel(op), body = count_flops(&d->pool, op->body);
        for (int k = 0; k < op->nreduce; k++)
            points *= (double)op->rextent[k];
        if (op->reduce != TT_REDUCE_NONE && tt_dtype_is_float(op->dtype))
            body += 1; /* the combine */
        total += points * body;
    }
    return total;
}

tt_value tt_reduce_identity(tt_reduce_kind k, tt_dtype t)
{
    tt_value v;
    bool fl = tt_dtype_is_float(t);
    switch (k) {
    case TT_REDUCE_MAX:
        if (fl)
            v.f = -INFINITY;
        else
            v.i = t == TT_DT_INT32 ? INT32_MIN : INT64_MIN;
        break;
    case TT_REDUCE_MIN:
        if (fl)
            v.f = INFINITY;
        else
            v.i = t == TT_DT_INT32 ? INT32_MAX : INT64_MAX;
        break;
    case TT_REDUCE_PROD:
        if (fl)
            v.f = 1;
        else
            v.i = 1;
        break;
    default:
        if (fl)
            v.f = 0;
        else
            v.i = 0;
        break;
    }
    return v;
}

tt_value tt_reduce_combine(tt_reduce_kind k, tt_dtype t, tt_value acc, tt_value v)
{
    bool fl = tt_dtype_is_float(t);
    switch (k) {
    case TT_REDUCE_SUM:
        if (fl)
            acc.f += v.f;
        else
            acc.i += v.i;
        break;
    case TT_REDUCE_MAX:
        if (fl ? v.f > acc.f : v.i > acc.i)
            acc = v;
        break;
    case TT_REDUCE_MIN:
        if (fl ? v.f < acc.f : v.i < acc.i)
            acc = v;
        break;
    case TT_REDUCE_PROD:
        if (fl)
            acc.f *= v.f;
        else
            acc.i *= v.i;
        break;
    default: acc = v; break;
    }
    return tt_value_round(t, acc);
}

tt_value tt_buffer_get(const void *buf, tt_dtype t, int64_t i)
{
    tt_value v;
    switch (t) {
    case TT_DT_FLOAT32: v.f = ((const float *)buf)[i]; break;
    case TT_DT_FLOAT64: v.f = ((const double *)buf)[i]; break;
    case TT_DT_INT32: v.i = ((const int32_t *)buf)[i]; break;
    case TT_DT_INT64: v.i = ((const int64_t *)buf)[i]; break;
    default: v.i = ((const uint8_t *)buf)[i]; break;
    }
    return v;
}

void tt_buffer_set(void *buf, tt_dtype t, int64_t i, tt_value v)
{
    switch (t) {
    case TT_DT_FLOAT32: ((float *)buf)[i] = (float)v.f; break;
    case TT_DT_FLOAT64: ((double *)buf)[i] = v.f; break;
    case TT_DT_INT32: ((int32_t *)buf)[i] = (int32_t)v.i; break;
    case TT_DT_INT64: ((int64_t *)buf)[i] = v.i; break;
    default: ((uint8_t *)buf)[i] = (uint8_t)(v.i != 0); break;
    }
}

static const char *op_name(const void *ctx, uint32_t id)
{
    const tt_dag *d = ctx;
    return id < d->ops.len ? d->ops.data[id].name : "?";
}

char *tt_dag_print(const tt_dag *d)
{
    tt_strbuf sb = {0};
    for (size_t i = 0; i < d->ops.len; i++) {
        const tt_op *op = &d->ops.data[i];
        if (op->is_placeholder) {
            tt_strbuf_printf(&sb, "%s = placeholder(%s[", op->name, tt_dtype_name(op->dtype));
            for (int k = 0; k < op->ndim; k++)
                tt_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)op->shape[k]);
            tt_strbuf_append(&sb, "])\n");
            continue;
        }
        tt_strbuf_printf(&sb, "%s[", op->name);
        for (int k = 0; k < op->ndim; k++)
            tt_strbuf_printf(&sb, "%s%s", k ? ", " : "", tt_var_name(&d->pool, op->axis[k]));
        tt_strbuf_append(&sb, "] = ");
        if (op->reduce != TT_REDUCE_NONE) {
            tt_strbuf_printf(&sb, "%s(", tt_reduce_name(op->reduce));
            tt_expr_print(&sb, &d->pool, op->body, op_name, d);
            tt_strbuf_append(&sb, ", axis=[");
            for (int k = 0; k < op->nreduce; k++)
                tt_strbuf_printf(&sb, "%s%s:%lld", k ? ", " : "",
                                 tt_var_name(&d->pool, op->raxis[k]), (long long)op->rextent[k]);
            tt_strbuf_append(&sb, "])");
        } else {
            tt_expr_print(&sb, &d->pool, op->body, op_name, d);
        }
        tt_strbuf_printf(&sb, "    # %s[", tt_dtype_name(op->dtype));
        for (int k = 0; k < op->ndim; k++)
            tt_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)op->shape[k]);
        tt_strbuf_append(&sb, "]\n");
    }
    return tt_strbuf_take(&sb);
}

/* ---- reference evaluation ---- */

typedef struct {
    const tt_dag *d;
    void **bufs;
    tt_errbuf *err;
    int cur;
} eval_ctx;

static tt_status eval_read(void *vctx, const tt_expr *node, const int64_t *idx, tt_value *out)
{
    eval_ctx *c = vctx;
    const tt_op *src = &c->d->ops.data[node->a];
    int64_t flat = 0;
    for (int k = 0; k < src->ndim; k++) {
        if (idx[k] < 0 || idx[k] >= src->shape[k])
            return tt_err(
                c->err, TT_ERR_RUNTIME,
                "op '%s' reads '%s' out of bounds: index %lld in dimension %d of extent %lld",
                c->d->ops.data[c->cur].name, src->name, (long long)idx[k], k,
                (long long)src->shape[k]);
        flat = flat * src->shape[k] + idx[k];
    }
    *out = tt_buffer_get(c->bufs[node->a], src->dtype, flat);
    return TT_OK;
}

static tt_status eval_op(eval_ctx *c, int id, int64_t *vars)
{
    const tt_op *op = &c->d->ops.data[id];
    tt_eval_env env = {vars, eval_read, NULL, c};
    int64_t n = tt_op_numel(op), r = 1;
    for (int k = 0; k < op->nreduce; k++)
        r *= op->rextent[k];
    c->cur = id;
    for (int64_t flat = 0; flat < n; flat++) {
        int64_t rem = flat;
        for (int k = op->ndim - 1; k >= 0; k--) {
            vars[op->axis[k]] = rem % op->shape[k];
            rem /= op->shape[k];
        }
        tt_value acc = tt_reduce_identity(op->reduce, op->dtype), v;
        for (int64_t rf = 0; rf < r; rf++) {
            int64_t rr = rf;
            for (int k = op->nreduce - 1; k >= 0; k--) {
                vars[op->raxis[k]] = rr % op->rextent[k];
                rr /= op->rextent[k];
            }
            tt_status s = tt_expr_eval(&c->d->pool, op->body, &env, &v);
            if (s) {
                if (s != TT_ERR_RUNTIME || !c->err || !c->err->msg[0])
                    tt_err(c->err, s, "evaluating op '%s' failed", op->name);
                return s;
            }
            if (tt_dtype_is_float(op->dtype) &&
                !tt_dtype_is_float((tt_dtype)tt_expr_get(&c->d->pool, op->body)->dtype))
                v.f = (double)v.i;
            else if (!tt_dtype_is_float(op->dtype) &&
                     tt_dtype_is_float((tt_dtype)tt_expr_get(&c->d->pool, op->body)->dtype))
                v.i = (int64_t)v.f;
            acc = tt_reduce_combine(op->reduce, op->dtype, acc, v);
        }
        tt_buffer_set(c->bufs[id], op->dtype, flat, acc);
    }
    return TT_OK;
}

tt_status tt_dag_eval(const tt_dag *d, void *const *args, tt_errbuf *err)
{
    int params[64], nparams = tt_dag_params(d, params, 64, NULL);
    tt_status s = TT_OK;
    if (nparams > 64)
        return tt_err(err, TT_ERR_LIMIT, "too many parameters (%d)", nparams);
    void **bufs = calloc(d->ops.len, sizeof(void *));
    bool *owned = calloc(d->ops.len, sizeof(bool));
    int64_t *vars = calloc(d->pool.vars.len, sizeof(int64_t));
    if (!bufs || !owned || !vars) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < nparams; i++)
        bufs[params[i]] = args[i];
    for (size_t i = 0; i < d->ops.len; i++)
        if (!bufs[i]) {
            const tt_op *op = &d->ops.data[i];
            bufs[i] = calloc((size_t)tt_op_numel(op), (size_t)tt_dtype_bytes(op->dtype));
            owned[i] = true;
            if (!bufs[i]) {
                s = tt_err(err, TT_ERR_NOMEM, "out of memory for '%s'", op->name);
                goto out;
            }
        }
    eval_ctx c = {d, bufs, err, 0};
    for (size_t i = 0; i < d->ops.len && !s; i++)
        if (!d->ops.data[i].is_placeholder)
            s = eval_op(&c, (int)i, vars);
out:
    if (bufs && owned)
        for (size_t i = 0; i < d->ops.len; i++)
            if (owned[i])
                free(bufs[i]);
    free(bufs);
    free(owned);
    free(vars);
    return s;
}

/* ---- point evaluation ---- */

typedef struct {
    const tt_dag *d;
    void **bufs; /* placeholders only */
    int64_t *vars;
    tt_errbuf *err;
    int depth;
} point_ctx;

static tt_status point_eval(point_ctx *c, int op, const int64_t *idx, tt_value *out);

static tt_status point_read(void *vctx, const tt_expr *node, const int64_t *idx, tt_value *out)
{
    point_ctx *c = vctx;
    const tt_op *src = &c->d->ops.data[node->a];
    for (int k = 0; k < src->ndim; k++)
        if (idx[k] < 0 || idx[k] >= src->shape[k])
            return tt_err(c->err, TT_ERR_RUNTIME, "read of '%s' out of bounds", src->name);
    if (!src->is_placeholder)
        return point_eval(c, (int)node->a, idx, out);
    int64_t flat = 0;
    for (int k = 0; k < src->ndim; k++)
        flat = flat * src->shape[k] + idx[k];
    *out = tt_buffer_get(c->bufs[node->a], src->dtype, flat);
    return TT_OK;
}

static tt_status point_eval(point_ctx *c, int id, const int64_t *idx, tt_value *out)
{
    const tt_op *op = &c->d->ops.data[id];
    if (++c->depth > TT_MAX_DIMS * 64) {
        c->depth--;
        return tt_err(c->err, TT_ERR_RUNTIME, "definition nests too deeply");
    }
    for (int k = 0; k < op->ndim; k++)
        c->vars[op->axis[k]] = idx[k];
    int64_t r = 1;
    for (int k = 0; k < op->nreduce; k++)
        r *= op->rextent[k];
    tt_eval_env env = {c->vars, point_read, NULL, c};
    tt_value acc = tt_reduce_identity(op->reduce, op->dtype), v;
    tt_status s = TT_OK;
    bool body_float = tt_dtype_is_float((tt_dtype)tt_expr_get(&c->d->pool, op->body)->dtype);
    for (int64_t rf = 0; rf < r && !s; rf++) {
        int64_t rr = rf;
        for (int k = op->nreduce - 1; k >= 0; k--) {
            c->vars[op->raxis[k]] = rr % op->rextent[k];
            rr /= op->rextent[k];
        }
        /* A nested evaluation of another op may not touch this op's variables (ops have their
         * own), but restore the spatial ones in case the same op is read at another point. */
        for (int k = 0; k < op->ndim; k++)
            c->vars[op->axis[k]] = idx[k];
        if ((s = tt_expr_eval(&c->d->pool, op->body, &env, &v)))
            break;
        if (tt_dtype_is_float(op->dtype) && !body_float)
            v.f = (double)v.i;
        else if (!tt_dtype_is_float(op->dtype) && body_float)
            v.i = (int64_t)v.f;
        acc = tt_reduce_combine(op->reduce, op->dtype, acc, v);
    }
    c->depth--;
    *out = acc;
    return s;
}

tt_status tt_dag_eval_element(const tt_dag *d, int op, const int64_t *idx, void *const *inputs,
                              tt_value *out, tt_errbuf *err)
{
    int params[64], nin;
    tt_dag_params(d, params, 64, &nin);
    void **bufs = calloc(d->ops.len, sizeof(void *));
    int64_t *vars = calloc(d->pool.vars.len, sizeof(int64_t));
    tt_status s;
    if (!bufs || !vars) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    } else {
        for (int i = 0; i < nin; i++)
            bufs[params[i]] = inputs[i];
        point_ctx c = {d, bufs, vars, err, 0};
        s = point_eval(&c, op, idx, out);
    }
    free(bufs);
    free(vars);
    return s;
}
