#include "access.h"

#include <string.h>

static const tt_op *op_of(const tt_state *st, int stage)
{
    return &st->dag.ops.data[st->stages.data[stage].op];
}

bool tt_access_is_output(const tt_state *st, int stage)
{
    int op = st->stages.data[stage].op;
    return !st->dag.ops.data[op].is_placeholder && !tt_dag_has_readers(&st->dag, op);
}

/* True if `e` contains a select or an exp call (a branch or an expensive op). */
static bool has_branch_or_exp(const tt_expr_pool *p, tt_eid e)
{
    if (!e)
        return false;
    const tt_expr *x = tt_expr_get(p, e);
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return false;
    case TT_EXPR_SELECT: return true;
    case TT_EXPR_CALL:
        return x->b == TT_FUNC_EXP || x->b == TT_FUNC_SIGMOID || has_branch_or_exp(p, x->a);
    case TT_EXPR_READ:
        for (int i = 0; i < x->n; i++)
            if (has_branch_or_exp(p, tt_expr_read_index(p, x, i)))
                return true;
        return false;
    default: return has_branch_or_exp(p, x->a) || has_branch_or_exp(p, x->b);
    }
}

typedef struct {
    const tt_state *st;
    const tt_op *op;
    int tensor;      /* only reads of this tensor (-1: all) */
    bool injective;  /* every index is an axis variable or a constant */
    bool in_order;   /* axis variables appear in the op's axis order */
    bool duplicated; /* an axis appears twice in one read */
    bool missing;    /* an axis of the op does not appear in some read */
    uint64_t used;   /* axes used by any read (bit per axis) */
    int nreads;
} read_info;

static int axis_pos(const tt_op *op, uint32_t var)
{
    for (int i = 0; i < op->ndim; i++)
        if (op->axis[i] == var)
            return i;
    return -1;
}

static void gather_vars(const tt_expr_pool *p, tt_eid e, const tt_op *op, uint64_t *used)
{
    if (!e)
        return;
    const tt_expr *x = tt_expr_get(p, e);
    if (x->kind == TT_EXPR_VAR) {
        int a = axis_pos(op, x->a);
        if (a >= 0)
            *used |= 1ull << a;
        return;
    }
    if (x->kind == TT_EXPR_INT || x->kind == TT_EXPR_FLOAT)
        return;
    if (x->kind == TT_EXPR_READ) {
        for (int i = 0; i < x->n; i++)
            gather_vars(p, tt_expr_read_index(p, x, i), op, used);
        return;
    }
    gather_vars(p, x->a, op, used);
    gather_vars(p, x->b, op, used);
    if (x->kind == TT_EXPR_SELECT)
        gather_vars(p, x->c, op, used);
}

static void inspect_read(void *ctx, tt_eid read)
{
    read_info *ri = ctx;
    const tt_expr_pool *p = &ri->st->dag.pool;
    const tt_expr *r = tt_expr_get(p, read);
    if (ri->tensor >= 0 && (int)r->a != ri->tensor)
        return;
    ri->nreads++;
    int count[TT_MAX_DIMS] = {0}, last = -1;
    for (int i = 0; i < r->n; i++) {
        tt_eid ix = tt_expr_read_index(p, r, i);
        gather_vars(p, ix, ri->op, &ri->used);
        if (tt_expr_is_const_int(p, ix, NULL))
            continue;
        const tt_expr *x = tt_expr_get(p, ix);
        int a = x->kind == TT_EXPR_VAR ? axis_pos(ri->op, x->a) : -1;
        if (a < 0) {
            ri->injective = false;
            continue;
        }
        if (count[a]++)
            ri->duplicated = true;
        if (a < last)
            ri->in_order = false;
        last = a;
    }
    /* an axis of extent 1 read at a constant index (te_write's "0") is not missing */
    for (int a = 0; a < ri->op->ndim; a++)
        if (!count[a] && ri->op->shape[a] != 1)
            ri->missing = true;
}

static read_info analyse_reads(const tt_state *st, const tt_op *op, int tensor)
{
    read_info ri = {st, op, tensor, true, true, false, false, 0, 0};
    tt_expr_visit_reads(&st->dag.pool, op->body, inspect_read, &ri);
    return ri;
}

bool tt_access_strictly_inlineable(const tt_state *st, int stage)
{
    const tt_op *op = op_of(st, stage);
    if (op->is_placeholder)
        return false;
    read_info ri = analyse_reads(st, op, -1);
    if (ri.nreads == 0)
        return true;
    return ri.injective && ri.in_order && !ri.duplicated &&
           !has_branch_or_exp(&st->dag.pool, op->body);
}

/* Input tensors of `op` in order of first read. */
typedef struct {
    int ids[64];
    int n;
} tensor_set;

static void add_tensor(tensor_set *ts, int t)
{
    for (int i = 0; i < ts->n; i++)
        if (ts->ids[i] == t)
            return;
    if (ts->n < 64)
        ts->ids[ts->n++] = t;
}

typedef struct {
    const tt_expr_pool *p;
    tensor_set *ts;
} collect_ctx;

static void collect_read(void *ctx, tt_eid read)
{
    collect_ctx *c = ctx;
    add_tensor(c->ts, (int)tt_expr_get(c->p, read)->a);
}

bool tt_access_needs_mlt(const tt_state *st, int stage)
{
    const tt_op *op = op_of(st, stage);
    if (op->is_placeholder)
        return false;
    tensor_set ts = {{0}, 0};
    collect_ctx cc = {&st->dag.pool, &ts};
    tt_expr_visit_reads(&st->dag.pool, op->body, collect_read, &cc);
    int n_missing = 0;
    for (int t = 0; t < ts.n; t++) {
        read_info ri = analyse_reads(st, op, ts.ids[t]);
        for (int a = 0; a < op->ndim; a++)
            if (op->shape[a] != 1 && !(ri.used & (1ull << a))) {
                n_missing++;
                break;
            }
        if (n_missing >= 2 || (n_missing >= 1 && op->nreduce > 0))
            return true;
    }
    return false;
}

bool tt_access_has_reduce(const tt_state *st, int stage)
{
    const tt_stage *sg = &st->stages.data[stage];
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].kind == TT_ITER_REDUCE)
            return true;
    return false;
}

void tt_access_lengths(const tt_state *st, int stage, int64_t *space, int64_t *reduce)
{
    const tt_stage *sg = &st->stages.data[stage];
    *space = *reduce = 1;
    for (int i = 0; i < sg->niters; i++) {
        if (sg->iters[i].kind == TT_ITER_REDUCE)
            *reduce *= sg->iters[i].extent;
        else
            *space *= sg->iters[i].extent;
    }
}

static bool op_reads(const tt_dag *d, int reader, int op)
{
    return !d->ops.data[reader].is_placeholder &&
           tt_expr_reads_tensor(&d->pool, d->ops.data[reader].body, (uint32_t)op);
}

static void collect_consumers(const tt_state *st, int op, bool *mark, int depth)
{
    if (depth > TT_MAX_STAGES)
        return;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (!op_reads(&st->dag, sg->op, op))
            continue;
        if (sg->at == TT_AT_INLINE)
            collect_consumers(st, sg->op, mark, depth + 1);
        else
            mark[i] = true;
    }
}

int tt_access_consumers(const tt_state *st, int stage, int *out, int max)
{
    bool mark[TT_MAX_STAGES] = {0};
    collect_consumers(st, st->stages.data[stage].op, mark, 0);
    int n = 0;
    for (size_t i = 0; i < st->stages.len && i < TT_MAX_STAGES; i++)
        if (mark[i]) {
            if (n < max)
                out[n] = (int)i;
            n++;
        }
    return n;
}

void tt_access_attach_point(const tt_state *st, int stage, int *target, int *iter)
{
    const tt_stage *sg = &st->stages.data[stage];
    *target = *iter = -1;
    if (sg->at != TT_AT_ITER)
        return;
    int t = tt_state_stage_of_op(st, sg->at_op);
    if (t < 0)
        return;
    const tt_stage *tg = &st->stages.data[t];
    for (int i = 0; i < tg->niters; i++)
        if (tg->iters[i].var == sg->at_var) {
            *target = t;
            *iter = i;
            return;
        }
}

bool tt_access_has_attached(const tt_state *st, int stage, int iter)
{
    const tt_stage *tg = &st->stages.data[stage];
    uint32_t var = tg->iters[iter].var;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (sg->at == TT_AT_ITER && sg->at_op == tg->op && sg->at_var == var)
            return true;
    }
    return false;
}

int tt_access_single_consumer(const tt_state *st, int stage)
{
    int c[TT_MAX_STAGES];
    int n = tt_access_consumers(st, stage, c, TT_MAX_STAGES);
    if (n == 0)
        return -1;
    if (n == 1)
        return c[0];
    int root = -1;
    for (int i = 0; i < n; i++) {
        int r = c[i], it;
        if (st->stages.data[r].at == TT_AT_ITER)
            tt_access_attach_point(st, c[i], &r, &it);
        if (r < 0 || (root >= 0 && r != root))
            return -1;
        root = r;
    }
    return root;
}

/* Ops that read `op` directly (not through inlining). */
static int direct_readers(const tt_state *st, int op, int *out)
{
    int n = 0;
    for (size_t i = 0; i < st->dag.ops.len; i++)
        if (op_reads(&st->dag, (int)i, op))
            out[n < 1 ? n : 1] = (int)i, n++;
    return n;
}

/* The extents of `op`'s axes other than those of extent 1, in order; returns their count. */
static int non_unit_shape(const tt_op *op, int64_t *out)
{
    int n = 0;
    for (int i = 0; i < op->ndim; i++)
        if (op->shape[i] != 1)
            out[n++] = op->shape[i];
    return n;
}

static bool equal_shape(const tt_op *a, const tt_op *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* Same shape, or (unit_dims) the same after dropping the axes of extent 1. */
static bool same_shape(const tt_op *a, const tt_op *b, bool unit_dims)
{
    if (equal_shape(a, b))
        return true;
    int64_t sa[TT_MAX_DIMS], sb[TT_MAX_DIMS];
    int na = non_unit_shape(a, sa), nb = non_unit_shape(b, sb);
    return unit_dims && na == nb && !memcmp(sa, sb, sizeof(int64_t) * (size_t)na);
}

static bool elementwise_match(const tt_state *st, int op, int target_op, bool unit_dims)
{
    int cur = op;
    for (int depth = 0; cur != target_op; depth++) {
        int r[2];
        if (depth > TT_MAX_STAGES || direct_readers(st, cur, r) != 1)
            return false;
        const tt_op *a = &st->dag.ops.data[cur], *b = &st->dag.ops.data[r[0]];
        if (!same_shape(a, b, unit_dims))
            return false;
        read_info ri = analyse_reads(st, b, cur);
        if (!ri.injective || ri.missing || ri.duplicated || !ri.in_order)
            return false;
        cur = r[0];
    }
    return true;
}

bool tt_access_elementwise_consumer(const tt_state *st, int stage, int *target)
{
    return tt_access_elementwise_consumer_ex(st, stage, false, target);
}

bool tt_access_elementwise_consumer_ex(const tt_state *st, int stage, bool unit_dims, int *target)
{
    int c[2];
    if (tt_access_consumers(st, stage, c, 2) != 1)
        return false;
    if (target)
        *target = c[0];
    if (tt_access_has_reduce(st, stage) && tt_access_has_reduce(st, c[0]))
        return false;
    if (!strcmp(st->stages.data[c[0]].scope, "shared"))
        return false;
    return elementwise_match(st, st->stages.data[stage].op, st->stages.data[c[0]].op, unit_dims);
}

int tt_access_axis_map(const tt_state *st, int stage, int target, int *map)
{
    const tt_op *a = op_of(st, stage), *b = op_of(st, target);
    if (equal_shape(a, b)) {
        for (int i = 0; i < b->ndim; i++)
            map[i] = i;
        return b->ndim;
    }
    int next = 0, n = 0;
    for (int i = 0; i < b->ndim; i++) {
        map[i] = -1;
        if (b->shape[i] == 1)
            continue;
        while (next < a->ndim && a->shape[next] == 1)
            next++;
        if (next < a->ndim)
            map[i] = next++, n++;
    }
    return n;
}

/* Every op that reads `op` directly reads it element by element with its shape, and is either
 * `target_op` or an inlined stage whose readers do the same, so that every path ends at
 * target_op. */
static bool diamond_match(const tt_state *st, int op, int target_op, int depth, bool unit_dims)
{
    if (op == target_op)
        return true;
    if (depth > TT_MAX_STAGES)
        return false;
    const tt_op *a = &st->dag.ops.data[op];
    int readers = 0;
    for (size_t i = 0; i < st->dag.ops.len; i++) {
        if (!op_reads(&st->dag, (int)i, op))
            continue;
        const tt_op *b = &st->dag.ops.data[i];
        int sg = tt_state_stage_of_op(st, (int)i);
        if (!same_shape(a, b, unit_dims) ||
            ((int)i != target_op && (sg < 0 || st->stages.data[sg].at != TT_AT_INLINE)))
            return false;
        read_info ri = analyse_reads(st, b, op);
        if (!ri.injective || ri.missing || ri.duplicated || !ri.in_order ||
            !diamond_match(st, (int)i, target_op, depth + 1, unit_dims))
            return false;
        readers++;
    }
    return readers > 0;
}

bool tt_access_epilogue_consumer(const tt_state *st, int stage, bool unit_dims, int *target)
{
    if (tt_access_elementwise_consumer_ex(st, stage, unit_dims, target))
        return true;
    int c[2];
    if (tt_access_consumers(st, stage, c, 2) != 1 || tt_access_has_reduce(st, c[0]) ||
        !strcmp(st->stages.data[c[0]].scope, "shared"))
        return false;
    *target = c[0];
    return diamond_match(st, st->stages.data[stage].op, st->stages.data[c[0]].op, 0, unit_dims);
}

static bool stage_changing(tt_step_kind k)
{
    return k == TT_STEP_CACHE_WRITE || k == TT_STEP_CACHE_READ || k == TT_STEP_RFACTOR;
}

bool tt_access_has_cache_write(const tt_state *st, int stage)
{
    for (size_t i = st->steps.len; i-- > 0;) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind == TT_STEP_CACHE_WRITE && s->stage == stage)
            return true;
        if (stage_changing(s->kind) && stage > s->stage)
            stage--;
    }
    return false;
}

int tt_access_final_stage(const tt_state *st, size_t step, int stage_at_step)
{
    /* a cache write and an rfactor insert their stage before the one they name, a cache read
     * after it (state.c): a CHR of the stage itself leaves its id as it was (a register copy
     * of a shared stage, after the stage's PR and SA steps) */
    int inc = 0;
    for (size_t i = step + 1; i < st->steps.len; i++) {
        const tt_step *s = &st->steps.data[i];
        int at = stage_at_step + inc;
        if (stage_changing(s->kind) &&
            (s->kind == TT_STEP_CACHE_READ ? s->stage < at : s->stage <= at))
            inc++;
    }
    return stage_at_step + inc;
}

bool tt_access_needs_rfactor(const tt_state *st, int stage, int num_cores)
{
    if (st->dag.ops.data[st->stages.data[stage].op].is_placeholder)
        return false;
    int64_t space, reduce;
    tt_access_lengths(st, stage, &space, &reduce);
    if (tt_access_needs_mlt(st, stage))
        return !(space > reduce || space > (int64_t)num_cores * 16);
    return reduce > 1 && reduce > num_cores;
}

bool tt_access_is_tiled(const tt_state *st, int stage)
{
    const tt_op *op = op_of(st, stage);
    return st->stages.data[stage].niters != op->ndim + op->nreduce;
}

bool tt_access_reads_directly(const tt_state *st, int stage, int producer)
{
    return op_reads(&st->dag, st->stages.data[stage].op, st->stages.data[producer].op);
}

typedef struct {
    const tt_state *st;
    const tt_op *reader;
    int producer;
    int common; /* running minimum */
} common_ctx;

static void common_read(void *ctx, tt_eid read)
{
    common_ctx *c = ctx;
    const tt_expr_pool *p = &c->st->dag.pool;
    const tt_expr *r = tt_expr_get(p, read);
    if ((int)r->a != c->producer)
        return;
    int k = 0;
    while (k < r->n && k < c->reader->ndim) {
        const tt_expr *x = tt_expr_get(p, tt_expr_read_index(p, r, k));
        if (x->kind != TT_EXPR_VAR || x->a != c->reader->axis[k] ||
            c->st->dag.ops.data[c->producer].shape[k] != c->reader->shape[k])
            break;
        k++;
    }
    if (k < c->common)
        c->common = k;
}

/* Common outer axes of op -> target_op through direct reads and inlined stages; -1 if target_op
 * does not read op. */
static int common_outer_ops(const tt_state *st, int op, int target_op, int depth)
{
    if (depth > TT_MAX_STAGES)
        return -1;
    const tt_op *t = &st->dag.ops.data[target_op];
    if (op_reads(&st->dag, target_op, op)) {
        common_ctx c = {st, t, op, TT_MAX_DIMS};
        tt_expr_visit_reads(&st->dag.pool, t->body, common_read, &c);
        return c.common;
    }
    int best = -1;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *q = &st->stages.data[i];
        if (q->at != TT_AT_INLINE || !op_reads(&st->dag, q->op, op))
            continue;
        int a = common_outer_ops(st, op, q->op, depth + 1);
        int b = a >= 0 ? common_outer_ops(st, q->op, target_op, depth + 1) : -1;
        if (b >= 0) {
            int m = a < b ? a : b;
            best = best < 0 || m < best ? m : best;
        }
    }
    return best;
}

int tt_access_common_outer(const tt_state *st, int stage, int target)
{
    int n = common_outer_ops(st, st->stages.data[stage].op, st->stages.data[target].op, 0);
    return n > 0 ? n : 0;
}

static bool thread_bound_reduce(const tt_stage *sg)
{
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].ann == TT_ANN_THREAD_X && sg->iters[i].kind == TT_ITER_REDUCE)
            return true;
    return false;
}

typedef struct {
    const tt_dag *d;
    tt_eid largest;
    int64_t elements;
} largest_ctx;

static void note_largest(void *vctx, tt_eid read)
{
    largest_ctx *c = vctx;
    const tt_op *t = &c->d->ops.data[tt_expr_get(&c->d->pool, read)->a];
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    if (n > c->elements) {
        c->elements = n;
        c->largest = read;
    }
}

/* The read of the largest tensor in `stage`'s body (c->largest 0: it reads none). */
static largest_ctx largest_read_of(const tt_state *st, int stage)
{
    const tt_op *op = op_of(st, stage);
    largest_ctx c = {&st->dag, 0, 0};
    if (!op->is_placeholder)
        tt_expr_visit_reads(&st->dag.pool, op->body, note_largest, &c);
    return c;
}

int64_t tt_access_largest_read(const tt_state *st, int stage, bool *along_reduce)
{
    const tt_op *op = op_of(st, stage);
    *along_reduce = false;
    largest_ctx c = largest_read_of(st, stage);
    if (!c.largest)
        return 0;
    const tt_expr *r = tt_expr_get(&st->dag.pool, c.largest);
    const tt_expr *last =
        r->n ? tt_expr_get(&st->dag.pool, tt_expr_read_index(&st->dag.pool, r, r->n - 1)) : NULL;
    for (int k = 0; last && last->kind == TT_EXPR_VAR && k < op->nreduce; k++)
        if (op->raxis[k] == last->a)
            *along_reduce = true;
    return c.elements;
}

uint32_t tt_access_largest_read_axes(const tt_state *st, int stage)
{
    const tt_op *op = op_of(st, stage);
    largest_ctx c = largest_read_of(st, stage);
    if (!c.largest)
        return 0;
    const tt_expr *r = tt_expr_get(&st->dag.pool, c.largest);
    uint32_t axes = 0;
    for (int a = 0; a < op->ndim; a++)
        for (int i = 0; i < r->n; i++)
            if (tt_expr_uses_var(&st->dag.pool, tt_expr_read_index(&st->dag.pool, r, i),
                                 op->axis[a]))
                axes |= 1u << a;
    return axes;
}

typedef struct {
    const tt_dag *d;
    uint32_t producer, axis;
    int reads, along;
} along_ctx;

static void note_along(void *vctx, tt_eid read)
{
    along_ctx *c = vctx;
    const tt_expr *r = tt_expr_get(&c->d->pool, read);
    if (r->a != c->producer)
        return;
    c->reads++;
    const tt_expr *last =
        r->n ? tt_expr_get(&c->d->pool, tt_expr_read_index(&c->d->pool, r, r->n - 1)) : NULL;
    c->along += last && last->kind == TT_EXPR_VAR && last->a == c->axis;
}

bool tt_access_reads_along_innermost_reduce(const tt_state *st, int stage, int producer)
{
    const tt_op *op = op_of(st, stage);
    if (op->is_placeholder || op->nreduce == 0)
        return false;
    along_ctx c = {&st->dag, (uint32_t)st->stages.data[producer].op, op->raxis[op->nreduce - 1], 0,
                   0};
    tt_expr_visit_reads(&st->dag.pool, op->body, note_along, &c);
    return c.reads > 0 && c.along == c.reads;
}

bool tt_access_cross_thread_reduction(const tt_state *st, int stage)
{
    const tt_stage *sg = &st->stages.data[stage];
    if (thread_bound_reduce(sg))
        return true;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *a = &st->stages.data[i];
        if (a->at == TT_AT_ITER && a->at_op == sg->op && thread_bound_reduce(a))
            return true;
    }
    return false;
}

int tt_access_outer_reduce_tile_end(const tt_state *st, int stage)
{
    const tt_stage *sg = &st->stages.data[stage];
    int left = op_of(st, stage)->nreduce;
    for (int i = 0; i < sg->niters && left > 0; i++)
        if (sg->iters[i].kind == TT_ITER_REDUCE && --left == 0)
            return i;
    return 0;
}

typedef struct {
    const tt_expr_pool *p;
    tt_eid seen[64];
    int nseen;
    bool many;
} points_ctx;

static void note_point(void *vctx, tt_eid read)
{
    points_ctx *c = vctx;
    const tt_expr *r = tt_expr_get(c->p, read);
    if (c->many)
        return;
    for (int i = 0; i < c->nseen; i++)
        if (tt_expr_get(c->p, c->seen[i])->a == r->a && !tt_expr_equal(c->p, c->seen[i], read)) {
            c->many = true;
            return;
        }
    if (c->nseen < 64)
        c->seen[c->nseen++] = read;
}

bool tt_access_reads_at_many_points(const tt_dag *d, int op)
{
    points_ctx c = {&d->pool, {0}, 0, false};
    tt_expr_visit_reads(&d->pool, d->ops.data[op].body, note_point, &c);
    return c.many;
}

/* Whether a reduction reads op. */
static bool read_by_reduction(const tt_dag *d, int op)
{
    for (size_t i = 0; i < d->ops.len; i++) {
        const tt_op *r = &d->ops.data[i];
        if ((int)i != op && !r->is_placeholder && r->nreduce > 0 &&
            tt_expr_reads_tensor(&d->pool, r->body, (uint32_t)op))
            return true;
    }
    return false;
}

bool tt_access_transform_into_reduction(const tt_dag *d, int op)
{
    return !d->ops.data[op].is_placeholder && tt_access_reads_at_many_points(d, op) &&
           read_by_reduction(d, op);
}

bool tt_access_transform_into_elementwise(const tt_dag *d, int op)
{
    return !d->ops.data[op].is_placeholder && d->ops.data[op].nreduce == 0 &&
           tt_dag_has_readers(d, op) && tt_access_reads_at_many_points(d, op) &&
           !read_by_reduction(d, op);
}
