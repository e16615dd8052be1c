/* Virtual-thread injection (loop_ir.h): TVM's InjectVirtualThread on the loop IR.
 *
 * A vthread loop stands for that many threads of one work-item.  Run as a plain loop around its
 * body, each virtual thread would fetch the shared tiles again and keep its own accumulator tile
 * apart; injected, the work that does not depend on the virtual thread runs once (the shared
 * fetch, whose region bound inference already widened to every virtual thread), and the loop
 * moves down to the statements that do, so the virtual threads' register tiles interleave in one
 * reduction loop.  Buffers allocated inside the loop that the virtual threads write differently
 * get one copy each, side by side.
 *
 * Which statements depend on the virtual thread is TVM's VarTouchedAnalysis: an expression
 * depends on it when it uses its variable or loads a buffer that depends on it; a buffer depends
 * on it when a store into it has such an index or value, or sits under such a condition. */
#include "loop_ir.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t nchild[TT_EXPR_KIND_COUNT] = {
#define TT_EK_NCHILD(n, s, c) c,
    TT_EXPR_KIND_LIST(TT_EK_NCHILD)
#undef TT_EK_NCHILD
};

typedef struct {
    tt_program *p;
    uint32_t var;     /* the vthread loop's variable */
    int64_t ext;      /* and its extent */
    uint8_t *touched; /* per buffer: its contents depend on the virtual thread */
    uint8_t *expand;  /* per buffer: allocated inside the loop and touched: one copy per thread */
    bool changed;     /* the fixpoint moved */
    bool conflict;    /* injection would reorder a write before a read: keep the plain loop */
    tt_status status;
} vt_ctx;

static bool node_touched(void *vctx, tt_eid id)
{
    vt_ctx *v = vctx;
    const tt_expr *n = tt_expr_get(&v->p->pool, id);
    if (n->kind == TT_EXPR_VAR)
        return n->a == v->var;
    return n->kind == TT_EXPR_LOAD && v->touched[n->b];
}

static bool expr_touched(vt_ctx *v, tt_eid e)
{
    return e && tt_expr_any(&v->p->pool, e, node_touched, v);
}

/* One pass of the fixpoint: marks the buffers that stores inside `id` make touched. */
static void mark(vt_ctx *v, tt_sid id, bool under_touched_cond)
{
    const tt_stmt s = v->p->stmts.data[id];
    switch (s.kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s.n; k++)
            mark(v, v->p->items.data[s.first + k], under_touched_cond);
        break;
    case TT_STMT_STORE:
        if (!v->touched[s.buf] &&
            (under_touched_cond || expr_touched(v, s.index) || expr_touched(v, s.value))) {
            v->touched[s.buf] = 1;
            v->changed = true;
        }
        break;
    case TT_STMT_IF:
        under_touched_cond |= expr_touched(v, s.cond);
        mark(v, s.body, under_touched_cond);
        if (s.orelse)
            mark(v, s.orelse, under_touched_cond);
        break;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: mark(v, s.body, under_touched_cond); break;
    default: break;
    }
}

static void find_allocs(vt_ctx *v, tt_sid id)
{
    const tt_stmt s = v->p->stmts.data[id];
    if (s.kind == TT_STMT_SEQ)
        for (uint32_t k = 0; k < s.n; k++)
            find_allocs(v, v->p->items.data[s.first + k]);
    if (s.kind == TT_STMT_ALLOC && v->touched[s.buf])
        v->expand[s.buf] = 1;
    if (s.kind == TT_STMT_FOR || s.kind == TT_STMT_ALLOC || s.kind == TT_STMT_IF)
        find_allocs(v, s.body);
    if (s.kind == TT_STMT_IF && s.orelse)
        find_allocs(v, s.orelse);
}

/* Whether statement `id` depends on the virtual thread anywhere inside. */
static bool stmt_touched(vt_ctx *v, tt_sid id)
{
    const tt_stmt s = v->p->stmts.data[id];
    switch (s.kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s.n; k++)
            if (stmt_touched(v, v->p->items.data[s.first + k]))
                return true;
        return false;
    case TT_STMT_STORE:
        return v->touched[s.buf] || expr_touched(v, s.index) || expr_touched(v, s.value);
    case TT_STMT_IF:
        return expr_touched(v, s.cond) || stmt_touched(v, s.body) ||
               (s.orelse && stmt_touched(v, s.orelse));
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: return stmt_touched(v, s.body);
    default: return false;
    }
}

typedef struct {
    const tt_program *p;
    uint8_t *set;
} access_ctx;

static bool load_pred(void *vctx, tt_eid id)
{
    access_ctx *a = vctx;
    const tt_expr *n = tt_expr_get(&a->p->pool, id);
    if (n->kind == TT_EXPR_LOAD)
        a->set[n->b] = 1;
    return false;
}

static void note_load(void *vctx, tt_eid e)
{
    access_ctx *a = vctx;
    if (e)
        tt_expr_any(&a->p->pool, e, load_pred, a);
}

/* Buffers that statement `id` stores into (want_writes) or loads from, marked in `set`. */
static void accesses(const tt_program *p, tt_sid id, bool want_writes, uint8_t *set)
{
    const tt_stmt s = p->stmts.data[id];
    access_ctx a = {p, set};
    switch (s.kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s.n; k++)
            accesses(p, p->items.data[s.first + k], want_writes, set);
        break;
    case TT_STMT_STORE:
        if (want_writes) {
            set[s.buf] = 1;
        } else {
            note_load(&a, s.index);
            note_load(&a, s.value);
        }
        break;
    case TT_STMT_IF:
        if (!want_writes)
            note_load(&a, s.cond);
        accesses(p, s.body, want_writes, set);
        if (s.orelse)
            accesses(p, s.orelse, want_writes, set);
        break;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: accesses(p, s.body, want_writes, set); break;
    default: break;
    }
}

static tt_sid push_stmt(vt_ctx *v, tt_stmt s)
{
    if (TT_VEC_PUSH(&v->p->stmts, s)) {
        v->status = TT_ERR_NOMEM;
        return 0;
    }
    return (tt_sid)(v->p->stmts.len - 1);
}

static tt_sid push_seq(vt_ctx *v, const tt_sid *items, uint32_t n, bool prefetch)
{
    tt_stmt s = {
        .kind = TT_STMT_SEQ, .first = (uint32_t)v->p->items.len, .n = n, .prefetch = prefetch};
    for (uint32_t k = 0; k < n; k++)
        if (TT_VEC_PUSH(&v->p->items, items[k])) {
            v->status = TT_ERR_NOMEM;
            return 0;
        }
    return push_stmt(v, s);
}

/* `e` with every load of an expanded buffer moved to the virtual thread's copy. */
static tt_eid offset_loads(vt_ctx *v, tt_eid e)
{
    tt_expr_pool *ep = &v->p->pool;
    if (!e)
        return 0;
    tt_expr n = *tt_expr_get(ep, e);
    if (nchild[n.kind] == 0)
        return e; /* a leaf (a READ is not in a lowered program) */
    tt_eid a = nchild[n.kind] >= 1 ? offset_loads(v, n.a) : 0;
    tt_eid b = nchild[n.kind] >= 2 ? offset_loads(v, n.b) : 0;
    tt_eid c = nchild[n.kind] >= 3 ? offset_loads(v, n.c) : 0;
    if (n.kind == TT_EXPR_LOAD && v->expand[n.b]) {
        const tt_buffer *bf = &v->p->bufs.data[n.b];
        a = tt_add(ep, tt_mul(ep, tt_expr_var(ep, v->var), tt_expr_int(ep, bf->size)), a);
    }
    if (a == n.a && (nchild[n.kind] < 2 || b == n.b) && (nchild[n.kind] < 3 || c == n.c))
        return e;
    n.a = a; /* a LOAD's and a CALL's b is not an expression: they have one child */
    if (nchild[n.kind] >= 2)
        n.b = b;
    if (nchild[n.kind] >= 3)
        n.c = c;
    if (TT_VEC_PUSH(&ep->nodes, n)) {
        v->status = TT_ERR_NOMEM;
        return e;
    }
    return (tt_eid)(ep->nodes.len - 1);
}

/* A copy of `id` for one virtual thread: its accesses of expanded buffers moved to its copy. */
static tt_sid copy_for_thread(vt_ctx *v, tt_sid id)
{
    tt_stmt s = v->p->stmts.data[id];
    switch (s.kind) {
    case TT_STMT_SEQ: {
        tt_sid *items = malloc(sizeof(tt_sid) * (s.n ? s.n : 1));
        if (!items) {
            v->status = TT_ERR_NOMEM;
            return 0;
        }
        for (uint32_t k = 0; k < s.n; k++)
            items[k] = copy_for_thread(v, v->p->items.data[s.first + k]);
        tt_sid r = push_seq(v, items, s.n, s.prefetch);
        free(items);
        return r;
    }
    case TT_STMT_STORE:
        s.value = offset_loads(v, s.value);
        s.index = offset_loads(v, s.index);
        if (v->expand[s.buf]) {
            tt_expr_pool *ep = &v->p->pool;
            int64_t size = v->p->bufs.data[s.buf].size;
            s.index =
                tt_add(ep, tt_mul(ep, tt_expr_var(ep, v->var), tt_expr_int(ep, size)), s.index);
        }
        return push_stmt(v, s);
    case TT_STMT_IF:
        s.cond = offset_loads(v, s.cond);
        s.body = copy_for_thread(v, s.body);
        if (s.orelse)
            s.orelse = copy_for_thread(v, s.orelse);
        return push_stmt(v, s);
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: s.body = copy_for_thread(v, s.body); return push_stmt(v, s);
    default: return id;
    }
}

/* The vthread loop around statement `id`, where the injection stops. */
static tt_sid leaf(vt_ctx *v, tt_sid id)
{
    tt_stmt f = {.kind = TT_STMT_FOR, .ann = TT_ANN_VTHREAD, .var = v->var, .extent = v->ext};
    f.body = copy_for_thread(v, id);
    return push_stmt(v, f);
}

/* Statement `id` with the virtual threads injected: untouched parts as they are, once. */
static tt_sid inject(vt_ctx *v, tt_sid id)
{
    if (v->status || !stmt_touched(v, id))
        return id;
    tt_stmt s = v->p->stmts.data[id];
    switch (s.kind) {
    case TT_STMT_SEQ: {
        /* An untouched item runs once, before the virtual threads' later items rather than
         * between them: it must not overwrite what an earlier touched item reads. */
        size_t nb = v->p->bufs.len;
        uint8_t *read = calloc(nb, 1), *wrote = calloc(nb, 1);
        tt_sid *items = malloc(sizeof(tt_sid) * (s.n ? s.n : 1));
        if (!read || !wrote || !items) {
            free(read);
            free(wrote);
            free(items);
            v->status = TT_ERR_NOMEM;
            return id;
        }
        for (uint32_t k = 0; k < s.n; k++) {
            tt_sid item = v->p->items.data[s.first + k];
            if (stmt_touched(v, item)) {
                accesses(v->p, item, false, read);
            } else {
                memset(wrote, 0, nb);
                accesses(v->p, item, true, wrote);
                for (size_t b = 0; b < nb; b++)
                    v->conflict |= read[b] && wrote[b];
            }
            items[k] = inject(v, item);
        }
        tt_sid r = push_seq(v, items, s.n, s.prefetch);
        free(read);
        free(wrote);
        free(items);
        return r;
    }
    case TT_STMT_FOR:
        if (s.ann == TT_ANN_VECTORIZE)
            return leaf(v, id); /* the vector stays innermost */
        s.body = inject(v, s.body);
        return push_stmt(v, s);
    case TT_STMT_ALLOC: s.body = inject(v, s.body); return push_stmt(v, s);
    case TT_STMT_IF:
        if (expr_touched(v, s.cond))
            return leaf(v, id);
        s.body = inject(v, s.body);
        if (s.orelse)
            s.orelse = inject(v, s.orelse);
        return push_stmt(v, s);
    default: return leaf(v, id);
    }
}

/* The vthread loop `id` injected, or `id` itself where injection would not be safe. */
static tt_sid inject_loop(tt_program *p, tt_sid id, tt_status *status)
{
    const tt_stmt loop = p->stmts.data[id];
    size_t nb = p->bufs.len;
    vt_ctx v = {.p = p, .var = loop.var, .ext = loop.extent};
    v.touched = calloc(nb ? nb : 1, 1);
    v.expand = calloc(nb ? nb : 1, 1);
    if (!v.touched || !v.expand) {
        free(v.touched);
        free(v.expand);
        *status = TT_ERR_NOMEM;
        return id;
    }
    do {
        v.changed = false;
        mark(&v, loop.body, false);
    } while (v.changed);
    find_allocs(&v, loop.body);
    /* Virtual threads that write a buffer of the work-group or work-item allocated around them
     * communicate through it: run one after the other, as the plain loop does.  (Global memory
     * they write in different places, as threads do.) */
    for (size_t b = 0; b < nb; b++)
        v.conflict |= v.touched[b] && !v.expand[b] && strcmp(p->bufs.data[b].scope, "global");
    tt_sid out = inject(&v, loop.body);
    if (!v.status && !v.conflict) {
        for (size_t b = 0; b < nb; b++) {
            if (!v.expand[b])
                continue;
            tt_buffer *bf = &p->bufs.data[b];
            if (bf->ndim < TT_MAX_DIMS) { /* a leading dimension: one row per virtual thread */
                memmove(bf->shape + 1, bf->shape, sizeof(int64_t) * (size_t)bf->ndim);
                memmove(bf->strides + 1, bf->strides, sizeof(int64_t) * (size_t)bf->ndim);
                bf->shape[0] = v.ext;
                bf->strides[0] = bf->size;
                bf->ndim++;
            }
            bf->size *= v.ext;
        }
    } else {
        out = id;
    }
    if (v.status)
        *status = v.status;
    free(v.touched);
    free(v.expand);
    return out;
}

/* `id` with every vthread loop inside injected, inner loops first. */
static tt_sid walk(tt_program *p, tt_sid id, tt_status *status)
{
    if (*status)
        return id;
    tt_stmt s = p->stmts.data[id];
    switch (s.kind) {
    case TT_STMT_SEQ: {
        tt_sid *items = malloc(sizeof(tt_sid) * (s.n ? s.n : 1));
        if (!items) {
            *status = TT_ERR_NOMEM;
            return id;
        }
        bool changed = false;
        for (uint32_t k = 0; k < s.n; k++) {
            tt_sid old = p->items.data[s.first + k];
            items[k] = walk(p, old, status);
            changed |= items[k] != old;
        }
        if (changed && !*status) {
            s.first = (uint32_t)p->items.len;
            for (uint32_t k = 0; k < s.n; k++)
                if (TT_VEC_PUSH(&p->items, items[k]))
                    *status = TT_ERR_NOMEM;
        }
        free(items);
        if (!changed || *status)
            return id;
        break;
    }
    case TT_STMT_FOR:
    case TT_STMT_ALLOC:
    case TT_STMT_IF: {
        tt_sid body = walk(p, s.body, status);
        tt_sid orelse = s.orelse ? walk(p, s.orelse, status) : 0;
        if (*status)
            return id;
        if (s.kind == TT_STMT_FOR && s.ann == TT_ANN_VTHREAD && s.extent > 1) {
            s.body = body;
            if (TT_VEC_PUSH(&p->stmts, s)) {
                *status = TT_ERR_NOMEM;
                return id;
            }
            tt_sid copy = (tt_sid)(p->stmts.len - 1), out = inject_loop(p, copy, status);
            return out == copy && body == p->stmts.data[id].body ? id : out;
        }
        if (body == s.body && orelse == s.orelse)
            return id;
        s.body = body;
        s.orelse = orelse;
        break;
    }
    default: return id;
    }
    if (TT_VEC_PUSH(&p->stmts, s)) {
        *status = TT_ERR_NOMEM;
        return id;
    }
    return (tt_sid)(p->stmts.len - 1);
}

tt_status tt_program_inject_vthreads(tt_program *p, tt_errbuf *err)
{
    tt_status status = TT_OK;
    tt_sid root = walk(p, p->root, &status);
    if (status || p->pool.oom)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    p->root = root;
    return TT_OK;
}
