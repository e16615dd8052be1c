/* Lowering a schedule state to loop IR.
 *
 * 1. Inline: bodies of inlined stages are substituted into their readers.
 * 2. Bound inference, consumers before producers: a stage computed at iterator v of consumer C
 *    computes the region of its output that C reads for one iteration of v, found by interval
 *    arithmetic over C's index expressions (C's iterators up to v fixed, the inner ones ranging).
 *    The region has a symbolic start and a constant extent; its buffer is region-sized.
 * 3. Iterator extents are re-derived from the (region) extents through the split/fuse relations;
 *    root indices are expressions of the leaf iterators; guards keep non-divisible splits and
 *    over-approximated regions inside the tensor.
 * 4. Emission: loop nests with reductions split into an init nest and an update nest, attached
 *    stages emitted inside their target loop, buffers flattened (storage_align honoured). */
#include "loop_ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int op;
    bool inlined, attached, placeholder;
    tt_eid body;              /* expanded (inline-substituted) body, original variables */
    tt_eid min[TT_MAX_DIMS];  /* region start (global index), in enclosing loop variables */
    int64_t ext[TT_MAX_DIMS]; /* region extent */
    bool full[TT_MAX_DIMS];   /* region covers the whole dimension */
    int buf;                  /* buffer id, -1 if none (inlined) */
    int consumer;             /* stage index of the attach target, -1 */
    int at_pos;               /* leaf position in the consumer */
    bool db;                  /* double-buffered (decide_double_buffer): two tiles in the buffer */
    uint32_t db_var;          /* the attach loop's variable */
    uint32_t db_phase;        /* a variable of lowering's own: its parity picks the tile (the
                                 loop's variable where the tiles are read, the next value where
                                 they are fetched); substituted away by build_level */
    int64_t db_size;          /* elements of one tile */
    tt_eid panel_min[TT_MAX_DIMS]; /* packed placeholder: its reader's region start along a
                                      dimension with a panel part (layout.h), else 0 */
} stage_info;

typedef struct {
    const tt_state *st;
    tt_program *p;
    tt_errbuf *err;
    stage_info *si;
    int nstages;
    int64_t *var_ext; /* extent of every leaf/intermediate variable (0 = unknown) */
    tt_eid *root_val; /* value of every non-leaf variable in terms of leaves */
    uint8_t *clamped; /* root variables split with their last tile moved back (clamped_tile) */
    tt_bounds bounds; /* loop variable ranges for the simplifier */
    size_t nvars;
    tt_status status;
} lower_ctx;

static tt_status lerr(lower_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tt_status lerr(lower_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_verr(c->err, TT_ERR_LOWER, fmt, ap);
    va_end(ap);
    return TT_ERR_LOWER;
}

static const char *op_name(lower_ctx *c, int op)
{
    return c->st->dag.ops.data[op].name;
}

static int stage_of(lower_ctx *c, int op)
{
    for (int i = 0; i < c->nstages; i++)
        if (c->si[i].op == op)
            return i;
    return -1;
}

/* ---- step 1: inline expansion ---- */

static tt_eid expand(lower_ctx *c, tt_eid e, int depth);

static tt_eid expand_read(lower_ctx *c, const tt_expr *r0, tt_eid e, int depth)
{
    tt_expr r = *r0;
    tt_expr_pool *pool = &c->p->pool;
    tt_eid idx[TT_MAX_DIMS];
    bool changed = false;
    for (int i = 0; i < r.n; i++) {
        tt_eid old = pool->args.data[r.b + (uint32_t)i];
        idx[i] = expand(c, old, depth);
        if (!idx[i])
            return 0;
        changed |= idx[i] != old;
    }
    int s = stage_of(c, (int)r.a);
    if (s >= 0 && c->si[s].inlined) {
        const tt_op *op = &c->st->dag.ops.data[r.a];
        tt_eid *subst = calloc(pool->vars.len, sizeof(tt_eid));
        if (!subst)
            return 0;
        for (int i = 0; i < op->ndim; i++)
            subst[op->axis[i]] = idx[i];
        tt_eid body = expand(c, op->body, depth + 1);
        tt_eid out = body ? tt_expr_substitute(pool, body, subst, pool->vars.len) : 0;
        free(subst);
        /* The inlined value takes the inlined op's type. */
        if (out && tt_expr_get(pool, out)->dtype != op->dtype)
            out = tt_expr_cast(pool, op->dtype, out);
        return out;
    }
    return changed ? tt_expr_read(pool, (tt_dtype)r.dtype, r.a, r.n, idx) : e;
}

static tt_eid expand(lower_ctx *c, tt_eid e, int depth)
{
    tt_expr_pool *pool = &c->p->pool;
    if (depth > TT_MAX_STAGES)
        return 0;
    tt_expr n = *tt_expr_get(pool, e);
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return e;
    case TT_EXPR_READ: return expand_read(c, &n, e, depth);
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: {
        tt_eid a = expand(c, n.a, depth);
        if (!a || a == n.a)
            return a ? e : 0;
        n.a = a;
        if (TT_VEC_PUSH(&pool->nodes, n))
            return 0;
        return (tt_eid)(pool->nodes.len - 1);
    }
    case TT_EXPR_SELECT: {
        tt_eid a = expand(c, n.a, depth), b = expand(c, n.b, depth), d = expand(c, n.c, depth);
        return a && b && d ? tt_expr_select(pool, a, b, d) : 0;
    }
    default: {
        tt_eid a = expand(c, n.a, depth), b = expand(c, n.b, depth);
        return a && b ? tt_expr_binary(pool, (tt_expr_kind)n.kind, a, b) : 0;
    }
    }
}

/* ---- relations: extents and root values ---- */

/* The tile of a split whose last tile is moved back to end where its axis ends, overlapping
 * the one before, instead of being guarded (0: guarded as usual).  An axis of 112 in register
 * tiles of 6 then has 18 whole tiles and a 19th over rows 106-111: no guard inside the tile,
 * so no branch per row in the micro-kernel, for two rows computed twice.  Only where computing
 * an element twice writes the same value twice: a spatial axis of a stage without a reduction
 * (a copy-out, an elementwise stage), whose tile fits the axis.  A reduction's tiles would add
 * twice into the elements they share, and under a parallel loop race while doing it. */
static int64_t clamped_tile(lower_ctx *c, int s, const tt_relation *rel)
{
    const tt_op *op = &c->st->dag.ops.data[c->st->stages.data[s].op];
    int64_t ext = c->var_ext[rel->parent], tile = 1;
    bool spatial_root = false;
    for (int d = 0; d < op->ndim; d++)
        spatial_root |= op->axis[d] == rel->parent;
    if (!spatial_root || op->nreduce > 0 || rel->nchild < 2)
        return 0;
    for (int k = 1; k < rel->nchild; k++)
        tile *= c->var_ext[rel->child[k]];
    if (ext <= tile || ext % tile == 0 || c->var_ext[rel->child[0]] != (ext + tile - 1) / tile)
        return 0;
    return tile;
}

/* Re-derives extents of a stage's variables from its root extents, then the root variables'
 * values in terms of the leaves (stored in c->root_val). */
static void derive(lower_ctx *c, int s)
{
    const tt_stage *sg = &c->st->stages.data[s];
    const tt_op *op = &c->st->dag.ops.data[sg->op];
    tt_expr_pool *p = &c->p->pool;
    for (int d = 0; d < op->ndim; d++)
        c->var_ext[op->axis[d]] = c->si[s].ext[d];
    for (int k = 0; k < op->nreduce; k++)
        c->var_ext[op->raxis[k]] = op->rextent[k];
    for (size_t r = 0; r < sg->rels.len; r++) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_SPLIT) {
            int64_t ext = c->var_ext[rel->parent], prod = 1;
            for (int k = 0; k < rel->nlen; k++)
                prod *= rel->lengths[k];
            int64_t rest = (ext + prod - 1) / prod;
            if (rel->inner_to_outer) {
                /* Inner tiles never exceed what is left of the parent: under compute_at a
                 * region can be smaller than the tile, and the extra iterations would only be
                 * guarded away.  Divisible splits are unchanged. */
                int64_t left = ext;
                for (int k = rel->nchild - 1; k >= 1; k--) {
                    int64_t e = rel->lengths[k - 1] < left ? rel->lengths[k - 1] : left;
                    c->var_ext[rel->child[k]] = e;
                    left = (left + e - 1) / e;
                }
                c->var_ext[rel->child[0]] = left;
            } else {
                for (int k = 0; k < rel->nchild; k++)
                    c->var_ext[rel->child[k]] = k == rel->nchild - 1 ? rest : rel->lengths[k];
            }
        } else {
            int64_t e = 1;
            for (int k = 0; k < rel->nchild; k++)
                e *= c->var_ext[rel->child[k]];
            c->var_ext[rel->parent] = e;
        }
    }
    for (int k = 0; k < sg->niters; k++) {
        uint32_t v = sg->iters[k].var;
        c->root_val[v] = 0;
        c->bounds.known[v] = 1;
        c->bounds.lo[v] = 0;
        c->bounds.hi[v] = c->var_ext[v] - 1;
    }
    for (size_t r = sg->rels.len; r-- > 0;) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_SPLIT) {
            int64_t tile = clamped_tile(c, s, rel);
            tt_eid acc = 0;
            for (int k = tile ? 1 : 0; k < rel->nchild; k++) {
                uint32_t ch = rel->child[k];
                tt_eid v = c->root_val[ch] ? c->root_val[ch] : tt_expr_var(p, ch);
                acc = acc ? tt_add(p, tt_mul(p, acc, tt_expr_int(p, c->var_ext[ch])), v) : v;
            }
            if (tile) {
                /* min(outer * tile, extent - tile) + inner: the last tile ends at the end. */
                uint32_t ch = rel->child[0];
                tt_eid o = c->root_val[ch] ? c->root_val[ch] : tt_expr_var(p, ch);
                tt_eid start = tt_expr_binary(p, TT_EXPR_MIN, tt_mul(p, o, tt_expr_int(p, tile)),
                                              tt_expr_int(p, c->var_ext[rel->parent] - tile));
                acc = tt_add(p, start, acc);
            }
            c->clamped[rel->parent] = tile > 0;
            c->root_val[rel->parent] = acc;
        } else {
            tt_eid f =
                c->root_val[rel->parent] ? c->root_val[rel->parent] : tt_expr_var(p, rel->parent);
            int64_t inner = 1;
            for (int k = rel->nchild - 1; k >= 0; k--) {
                tt_eid v = inner == 1 ? f : tt_div(p, f, tt_expr_int(p, inner));
                if (k > 0)
                    v = tt_mod(p, v, tt_expr_int(p, c->var_ext[rel->child[k]]));
                c->root_val[rel->child[k]] = v;
                inner *= c->var_ext[rel->child[k]];
            }
        }
    }
}

/* Value of root variable v of a stage (a leaf itself when never split or fused). */
static tt_eid root_of(lower_ctx *c, uint32_t v)
{
    return c->root_val[v] ? c->root_val[v] : tt_expr_var(&c->p->pool, v);
}

/* Substitution array (indexed by variable) that maps a stage's root variables to their global
 * values: region start + value from the leaves for spatial axes. */
static tt_eid *root_subst(lower_ctx *c, int s)
{
    const tt_op *op = &c->st->dag.ops.data[c->si[s].op];
    tt_expr_pool *p = &c->p->pool;
    tt_eid *sub = calloc(c->nvars, sizeof(tt_eid));
    if (!sub)
        return NULL;
    for (int d = 0; d < op->ndim; d++) {
        tt_eid v = root_of(c, op->axis[d]);
        sub[op->axis[d]] = c->si[s].full[d] ? v : tt_add(p, c->si[s].min[d], v);
    }
    for (int k = 0; k < op->nreduce; k++)
        sub[op->raxis[k]] = root_of(c, op->raxis[k]);
    return sub;
}

/* ---- step 2: bound inference ---- */

typedef struct {
    tt_eid min;
    int64_t ext;
    bool ok;
} interval;

static bool has_ranged(lower_ctx *c, tt_eid e, const uint8_t *ranged)
{
    const tt_expr *n = tt_expr_get(&c->p->pool, e);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT: return false;
    case TT_EXPR_VAR: return ranged[n->a];
    case TT_EXPR_READ:
        for (int i = 0; i < n->n; i++)
            if (has_ranged(c, c->p->pool.args.data[n->b + (uint32_t)i], ranged))
                return true;
        return false;
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return has_ranged(c, n->a, ranged);
    case TT_EXPR_SELECT:
        return has_ranged(c, n->a, ranged) || has_ranged(c, n->b, ranged) ||
               has_ranged(c, n->c, ranged);
    default: return has_ranged(c, n->a, ranged) || has_ranged(c, n->b, ranged);
    }
}

static interval eval_interval(lower_ctx *c, tt_eid e, const uint8_t *ranged)
{
    tt_expr_pool *p = &c->p->pool;
    interval r = {0, 1, false};
    if (!has_ranged(c, e, ranged)) {
        r.min = e;
        r.ok = true;
        return r;
    }
    tt_expr n = *tt_expr_get(p, e);
    interval a, b;
    int64_t k;
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_VAR:
        r.min = tt_expr_int(p, 0);
        r.ext = c->var_ext[n.a];
        r.ok = r.ext > 0;
        return r;
    case TT_EXPR_ADD:
        a = eval_interval(c, n.a, ranged);
        b = eval_interval(c, n.b, ranged);
        if (!a.ok || !b.ok)
            return r;
        r.min = tt_add(p, a.min, b.min);
        r.ext = a.ext + b.ext - 1;
        r.ok = true;
        return r;
    case TT_EXPR_SUB:
        a = eval_interval(c, n.a, ranged);
        b = eval_interval(c, n.b, ranged);
        if (!a.ok || !b.ok)
            return r;
        r.min = tt_sub(p, a.min, tt_add(p, b.min, tt_expr_int(p, b.ext - 1)));
        r.ext = a.ext + b.ext - 1;
        r.ok = true;
        return r;
    case TT_EXPR_MUL:
        if (tt_expr_is_const_int(p, n.b, &k))
            a = eval_interval(c, n.a, ranged);
        else if (tt_expr_is_const_int(p, n.a, &k))
            a = eval_interval(c, n.b, ranged);
        else
            return r;
        if (!a.ok)
            return r;
        if (k >= 0)
            r.min = tt_mul(p, a.min, tt_expr_int(p, k));
        else
            r.min = tt_mul(p, tt_add(p, a.min, tt_expr_int(p, a.ext - 1)), tt_expr_int(p, k));
        r.ext = (a.ext - 1) * (k < 0 ? -k : k) + 1;
        r.ok = true;
        return r;
    case TT_EXPR_DIV:
        if (!tt_expr_is_const_int(p, n.b, &k) || k <= 0)
            return r;
        a = eval_interval(c, n.a, ranged);
        if (!a.ok)
            return r;
        int64_t c0;
        if (tt_expr_is_const_int(p, a.min, &c0)) {
            /* A constant start (a fused or relaxed variable from 0): exact. */
            int64_t lo = c0 >= 0 ? c0 / k : -((-c0 + k - 1) / k);
            int64_t hi_v = c0 + a.ext - 1;
            int64_t hi = hi_v >= 0 ? hi_v / k : -((-hi_v + k - 1) / k);
            r.min = tt_expr_int(p, lo);
            r.ext = hi - lo + 1;
            r.ok = true;
            return r;
        }
        r.min = tt_div(p, a.min, tt_expr_int(p, k));
        r.ext = (a.ext - 1) / k + 2; /* the start need not be a multiple of k */
        r.ok = true;
        return r;
    case TT_EXPR_MOD:
        if (!tt_expr_is_const_int(p, n.b, &k) || k <= 0)
            return r;
        r.min = tt_expr_int(p, 0);
        r.ext = k;
        r.ok = true;
        return r;
    default: return r; /* min, max, select, nested reads over ranged variables: give up */
    }
}

typedef struct {
    lower_ctx *c;
    int target_op;
    const uint8_t *ranged;
    interval *acc; /* per dim */
    int nread;
    bool fail;
} region_ctx;

static void region_read(void *vctx, tt_eid e)
{
    region_ctx *rc = vctx;
    lower_ctx *c = rc->c;
    tt_expr r = *tt_expr_get(&c->p->pool, e);
    if ((int)r.a != rc->target_op)
        return;
    for (int d = 0; d < r.n; d++) {
        tt_eid idx = tt_simplify(&c->p->pool, c->p->pool.args.data[r.b + (uint32_t)d], NULL);
        interval iv = eval_interval(c, idx, rc->ranged);
        if (!iv.ok) {
            rc->acc[d].ok = false;
            continue;
        }
        iv.min = tt_simplify(&c->p->pool, iv.min, NULL);
        if (rc->nread == 0) {
            rc->acc[d] = iv;
            continue;
        }
        if (!rc->acc[d].ok)
            continue;
        /* Union of two intervals whose starts differ by a constant. */
        int64_t diff;
        tt_eid delta = tt_simplify(&c->p->pool, tt_sub(&c->p->pool, iv.min, rc->acc[d].min), NULL);
        if (!tt_expr_is_const_int(&c->p->pool, delta, &diff)) {
            rc->acc[d].ok = false;
            continue;
        }
        int64_t lo = diff < 0 ? diff : 0;
        int64_t hi = rc->acc[d].ext > diff + iv.ext ? rc->acc[d].ext : diff + iv.ext;
        if (diff < 0)
            rc->acc[d].min = iv.min;
        rc->acc[d].ext = hi - lo;
    }
    rc->nread++;
}

/* True if stage `r` runs within one iteration of leaf `k` of stage `t` after stage `s` computed
 * there: inside a deeper leaf, or at the same leaf but later in stage order (stages at one
 * attach point are emitted in stage order). */
static bool runs_after_within(lower_ctx *c, int r, int t, int k, int s)
{
    int q = r;
    for (int depth = 0; depth <= TT_MAX_STAGES && c->si[q].attached; depth++) {
        int cs = c->si[q].consumer;
        if (cs < 0)
            return false;
        if (cs == t)
            return c->si[q].at_pos > k || (c->si[q].at_pos == k && q > s);
        q = cs;
    }
    return false;
}

static tt_status infer_region(lower_ctx *c, int s)
{
    stage_info *si = &c->si[s];
    const tt_stage *sg = &c->st->stages.data[s];
    const tt_op *op = &c->st->dag.ops.data[si->op];
    for (int d = 0; d < op->ndim; d++) {
        si->min[d] = tt_expr_int(&c->p->pool, 0);
        si->ext[d] = op->shape[d];
        si->full[d] = true;
    }
    if (!si->attached)
        return TT_OK;
    int cs = stage_of(c, sg->at_op);
    if (cs < 0 || c->si[cs].inlined || c->si[cs].placeholder)
        return lerr(c, "'%s' is computed at '%s', which is inlined or not a stage", op->name,
                    op_name(c, sg->at_op));
    const tt_stage *cg = &c->st->stages.data[cs];
    int pos = -1;
    for (int k = 0; k < cg->niters; k++)
        if (cg->iters[k].var == sg->at_var)
            pos = k;
    if (pos < 0)
        return lerr(c, "'%s' is computed at an iterator that '%s' no longer has", op->name,
                    op_name(c, sg->at_op));
    si->consumer = cs;
    si->at_pos = pos;
    /* Readers must all run inside the attach point: the target itself, or stages computed
     * inside it further in; others would read an incomplete region. */
    bool reader[TT_MAX_STAGES] = {false};
    for (int r = 0; r < c->nstages; r++) {
        if (c->si[r].inlined || c->si[r].placeholder ||
            !tt_expr_reads_tensor(&c->p->pool, c->si[r].body, (uint32_t)si->op))
            continue;
        if (r != cs && !runs_after_within(c, r, cs, pos, s))
            return lerr(c, "'%s' is computed at '%s' but is also read by '%s'", op->name,
                        op_name(c, sg->at_op), op_name(c, c->si[r].op));
        reader[r] = true;
    }
    /* Iterators inside the attach point range over their extents; outer ones are fixed. */
    uint8_t *ranged = calloc(c->nvars, 1);
    interval acc[TT_MAX_DIMS];
    if (!ranged)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int k = pos + 1; k < cg->niters; k++)
        ranged[cg->iters[k].var] = 1;
    for (int r = 0; r < c->nstages; r++)
        if (r != s && runs_after_within(c, r, cs, pos, s))
            for (int k = 0; k < c->st->stages.data[r].niters; k++)
                ranged[c->st->stages.data[r].iters[k].var] = 1;
    /* A shared buffer serves every work-item of the group: its region covers all threadIdx
     * values of the loops around the attach point (TVM's relaxation for shared scope), so the
     * fill does not depend on which work-item runs it.  vthread loops too: the fill then does
     * not depend on the virtual thread either, and tt_program_inject_vthreads runs it once for
     * all of them. */
    if (strcmp(sg->scope, "shared") == 0) {
        int q = cs, qpos = pos;
        for (int depth = 0; depth <= TT_MAX_STAGES && q >= 0; depth++) {
            const tt_stage *qg = &c->st->stages.data[q];
            for (int k = 0; k <= qpos && k < qg->niters; k++) {
                tt_ann a = qg->iters[k].ann;
                if (a == TT_ANN_THREAD_X || a == TT_ANN_THREAD_Y || a == TT_ANN_THREAD_Z ||
                    a == TT_ANN_VTHREAD)
                    ranged[qg->iters[k].var] = 1;
            }
            if (!c->si[q].attached)
                break;
            qpos = c->si[q].at_pos;
            q = c->si[q].consumer;
        }
    }
    region_ctx rc = {c, si->op, ranged, acc, 0, false};
    for (int d = 0; d < TT_MAX_DIMS; d++)
        acc[d].ok = true;
    for (int r = 0; r < c->nstages; r++) {
        if (!reader[r])
            continue;
        derive(c, r);
        tt_eid *sub = root_subst(c, r);
        if (!sub) {
            free(ranged);
            return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
        }
        tt_eid body = tt_expr_substitute(&c->p->pool, c->si[r].body, sub, c->nvars);
        if (body)
            tt_expr_visit_reads(&c->p->pool, body, region_read, &rc);
        free(sub);
    }
    free(ranged);
    if (rc.nread == 0)
        return lerr(c, "'%s' is computed at '%s', but nothing inside it reads '%s'", op->name,
                    op_name(c, sg->at_op), op->name);
    for (int d = 0; d < op->ndim; d++) {
        if (!acc[d].ok || acc[d].ext >= op->shape[d])
            continue; /* whole dimension */
        si->min[d] = acc[d].min;
        si->ext[d] = acc[d].ext;
        si->full[d] = false;
    }
    return TT_OK;
}

/* ---- layout rewrite (LR) ---- */

#define LR_UNIT_DIM UINT32_MAX /* var[d] of a dimension of extent 1 read at 0 */

typedef struct {
    int op;
    const int64_t *shape; /* the placeholder's */
    uint32_t var[TT_MAX_DIMS];
    int nreads;
    bool not_vars, mismatch;
    const tt_expr_pool *pool;
} lr_reads;

static void lr_read(void *vctx, tt_eid e)
{
    lr_reads *r = vctx;
    const tt_expr *n = tt_expr_get(r->pool, e);
    if ((int)n->a != r->op)
        return;
    for (int d = 0; d < n->n; d++) {
        tt_eid id = r->pool->args.data[n->b + (uint32_t)d];
        const tt_expr *ix = tt_expr_get(r->pool, id);
        uint32_t v = ix->kind == TT_EXPR_VAR ? ix->a : LR_UNIT_DIM;
        if (ix->kind != TT_EXPR_VAR && !tt_expr_is_unit_index(r->pool, id, r->shape[d])) {
            r->not_vars = true;
            continue;
        }
        if (r->nreads == 0)
            r->var[d] = v;
        else if (r->var[d] != v)
            r->mismatch = true;
    }
    r->nreads++;
}

/* Position among sg's current iterators of the loop that carries variable v: its own, that of
 * the outermost part it was split into, or that of the loop it was fused into.  -1 if none. */
static int loop_pos(const tt_stage *sg, uint32_t v, int depth)
{
    if (depth > TT_MAX_ITERS)
        return -1;
    for (int k = 0; k < sg->niters; k++)
        if (sg->iters[k].var == v)
            return k;
    for (size_t r = 0; r < sg->rels.len; r++) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_SPLIT && rel->parent == v)
            return loop_pos(sg, rel->child[0], depth + 1);
        for (int k = 0; rel->kind == TT_REL_FUSE && k < rel->nchild; k++)
            if (rel->child[k] == v)
                return loop_pos(sg, rel->parent, depth + 1);
    }
    return -1;
}

typedef struct {
    uint32_t var;
    int dim;
    int64_t stride; /* the variable's weight in its root's value */
    int key;        /* loop position, then place within a fused loop */
} lr_part;

/* The parts of variable v of stage sg (split into its leaves; a variable fused with others is a
 * part of its own, placed at the fused loop).  False when v is no variable of sg or there are too
 * many parts. */
static bool lr_leaves(lower_ctx *c, const tt_stage *sg, uint32_t v, int64_t stride, int dim,
                      lr_part *parts, int *n)
{
    int key = -1;
    for (int k = 0; k < sg->niters && key < 0; k++)
        if (sg->iters[k].var == v)
            key = k * (TT_MAX_ITERS + 1);
    for (size_t r = 0; r < sg->rels.len && key < 0; r++) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_FUSE) {
            for (int k = 0; k < rel->nchild && key < 0; k++)
                if (rel->child[k] == v) {
                    int pos = loop_pos(sg, rel->parent, 0);
                    if (pos < 0)
                        return false;
                    key = pos * (TT_MAX_ITERS + 1) + k;
                }
            continue;
        }
        if (rel->parent != v)
            continue;
        int64_t inner = stride;
        for (int k = rel->nchild - 1; k >= 0; k--) {
            if (!lr_leaves(c, sg, rel->child[k], inner, dim, parts, n))
                return false;
            inner *= c->var_ext[rel->child[k]];
        }
        return true;
    }
    if (key < 0 || *n == TT_MAX_LAYOUT_PARTS)
        return false;
    parts[(*n)++] = (lr_part){v, dim, stride, key};
    return true;
}

/* The start of the last panel (layout.h) where the reader's region along a dimension starts at
 * min(tile * t, last) for its tiles t, the last moved back to end with the dimension (the form
 * derive() gives clamped_tile's splits), else 0: the tiles then start at multiples of `tile`. */
static int64_t panel_last(lower_ctx *c, tt_eid region_min, int64_t tile, int64_t dim)
{
    if (!region_min || dim % tile == 0)
        return 0;
    const tt_expr *m = tt_expr_get(&c->p->pool, region_min);
    int64_t last = 0;
    if (m->kind != TT_EXPR_MIN || !(tt_expr_is_const_int(&c->p->pool, m->b, &last) ||
                                    tt_expr_is_const_int(&c->p->pool, m->a, &last)))
        return 0;
    return last == dim - tile ? last : 0;
}

/* Whether each dimension's parts, by their inner size, are a mixed radix: the smallest inner
 * 1, each next one the product of the one before and its extent. */
static bool mixed_radix(const tt_layout *l)
{
    bool seen[TT_MAX_LAYOUT_PARTS] = {0};
    for (int k = 0; k < l->nparts; k++) {
        if (seen[k])
            continue;
        int64_t need = 1;
        for (;;) {
            int next = -1;
            for (int j = 0; j < l->nparts; j++)
                if (!seen[j] && l->parts[j].dim == l->parts[k].dim && l->parts[j].inner == need)
                    next = j;
            if (next < 0)
                break;
            seen[next] = true;
            need *= l->parts[next].extent;
        }
        for (int j = 0; j < l->nparts; j++)
            if (l->parts[j].dim == l->parts[k].dim && !seen[j])
                return false;
    }
    return true;
}

/* The layout of constant placeholder stage `ps` under the LR step: the order in which its only
 * reader's loops walk it.  Each dimension must be indexed by one of the reader's own axes (or
 * be of extent 1 and indexed by 0: it has no part in the layout); the
 * part of a dimension that the reader's region leaves to enclosing loops is outermost, then the
 * reader's leaf iterators over it in loop order. */
static tt_status derive_layout(lower_ctx *c, int ps, tt_layout *out)
{
    const tt_op *pop = &c->st->dag.ops.data[c->si[ps].op];
    memset(out, 0, sizeof(*out));
    int reader = -1, nreaders = 0;
    lr_reads rr = {.op = c->si[ps].op, .shape = pop->shape, .pool = &c->p->pool};
    for (int s = 0; s < c->nstages; s++) {
        if (c->si[s].placeholder || c->si[s].inlined)
            continue;
        int before = rr.nreads;
        tt_expr_visit_reads(&c->p->pool, c->si[s].body, lr_read, &rr);
        if (rr.nreads > before) {
            reader = s;
            nreaders++;
        }
    }
    if (nreaders != 1)
        return lerr(c,
                    "cannot rewrite the layout of '%s': %d stages read it (LR needs exactly one)",
                    pop->name, nreaders);
    const tt_stage *sg = &c->st->stages.data[reader];
    const tt_op *rop = &c->st->dag.ops.data[sg->op];
    if (rr.not_vars || rr.mismatch)
        return lerr(c,
                    "cannot rewrite the layout of '%s': '%s' reads it %s (LR needs each index to "
                    "be one of its loop variables, or 0 on a dimension of extent 1)",
                    pop->name, rop->name,
                    rr.mismatch ? "at different indices" : "at computed indices");
    derive(c, reader);
    lr_part leaves[TT_MAX_LAYOUT_PARTS];
    int nleaf = 0;
    for (int d = 0; d < pop->ndim; d++) {
        if (rr.var[d] == LR_UNIT_DIM)
            continue; /* always 0: no part of the layout */
        int64_t region = -1;
        tt_eid region_min = 0;
        for (int a = 0; a < rop->ndim; a++)
            if (rop->axis[a] == rr.var[d]) {
                region = c->si[reader].ext[a];
                region_min = c->si[reader].full[a] ? 0 : c->si[reader].min[a];
            }
        for (int a = 0; a < rop->nreduce; a++)
            if (rop->raxis[a] == rr.var[d])
                region = rop->rextent[a];
        for (int e = 0; e < d; e++)
            if (rr.var[e] == rr.var[d])
                region = -1;
        if (region < 0)
            return lerr(c,
                        "cannot rewrite the layout of '%s': index %d is not an axis of '%s' of "
                        "its own",
                        pop->name, d, rop->name);
        int first = nleaf;
        if (!lr_leaves(c, sg, rr.var[d], 1, d, leaves, &nleaf))
            return lerr(c,
                        "cannot rewrite the layout of '%s': the loops of '%s' over its index %d "
                        "have more than %d parts",
                        pop->name, rop->name, d, TT_MAX_LAYOUT_PARTS);
        int64_t covered = 1;
        for (int k = first; k < nleaf; k++)
            covered *= c->var_ext[leaves[k].var];
        /* what enclosing loops cover: outermost */
        if (covered < pop->shape[d]) {
            if (out->nparts == TT_MAX_LAYOUT_PARTS)
                return lerr(c, "cannot rewrite the layout of '%s': more than %d parts", pop->name,
                            TT_MAX_LAYOUT_PARTS);
            int64_t last = panel_last(c, region_min, covered, pop->shape[d]);
            out->parts[out->nparts++] =
                (tt_layout_part){d, covered, (pop->shape[d] + covered - 1) / covered, last};
            c->si[ps].panel_min[d] = last ? region_min : 0;
        }
    }
    /* the reader's leaves, in its loop order (insertion sort: a handful of parts) */
    for (int i = 1; i < nleaf; i++)
        for (int j = i; j > 0 && leaves[j - 1].key > leaves[j].key; j--) {
            lr_part t = leaves[j];
            leaves[j] = leaves[j - 1];
            leaves[j - 1] = t;
        }
    for (int k = 0; k < nleaf; k++) {
        if (c->var_ext[leaves[k].var] <= 1)
            continue;
        if (out->nparts == TT_MAX_LAYOUT_PARTS)
            return lerr(c, "cannot rewrite the layout of '%s': more than %d parts", pop->name,
                        TT_MAX_LAYOUT_PARTS);
        out->parts[out->nparts++] =
            (tt_layout_part){leaves[k].dim, leaves[k].stride, c->var_ext[leaves[k].var], 0};
    }
    out->size = 1;
    for (int k = 0; k < out->nparts; k++)
        out->size *= out->parts[k].extent;
    /* A dimension's parts must be a mixed radix of it (layout.h): the loops of a split that does
     * not divide an inner tile (5 elements in 3 x 2) give parts whose places and elements do
     * not correspond one to one.  Such a tensor is read as it is. */
    if (!mixed_radix(out)) {
        memset(out, 0, sizeof(*out));
        return TT_OK;
    }
    /* Loops that walk the tensor in row-major order need no packing: the step changes nothing
     * and the kernel takes the tensor as it is. */
    bool row_major = true;
    for (int k = 0, d = -1; k < out->nparts && row_major; k++) {
        const tt_layout_part *lp = &out->parts[k];
        row_major = lp->dim > d && lp->inner == 1 && lp->extent == pop->shape[lp->dim];
        d = lp->dim;
    }
    if (row_major)
        memset(out, 0, sizeof(*out));
    return TT_OK;
}

/* ---- buffers ---- */

static int add_buffer(lower_ctx *c, int s, int param)
{
    stage_info *si = &c->si[s];
    const tt_op *op = &c->st->dag.ops.data[si->op];
    const tt_stage *sg = &c->st->stages.data[s];
    tt_buffer b;
    memset(&b, 0, sizeof(b));
    b.name = tt_arena_strdup(&c->p->pool.strings, op->name);
    b.dtype = op->dtype;
    b.ndim = op->ndim;
    b.param = param;
    snprintf(b.scope, sizeof(b.scope), "%s", param >= 0 ? "global" : sg->scope);
    for (int d = 0; d < op->ndim; d++)
        b.shape[d] = si->ext[d];
    int64_t stride = 1;
    for (int d = op->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < sg->nalign; k++)
            if (sg->align[k].axis == d && param < 0)
                while (stride % sg->align[k].factor != sg->align[k].offset)
                    stride++;
        b.strides[d] = stride;
        stride *= b.shape[d];
    }
    b.size = op->ndim ? stride : 1;
    if (si->db) {
        si->db_size = b.size;
        b.size *= 2;
    }
    if (TT_VEC_PUSH(&c->p->bufs, b))
        return -1;
    return (int)c->p->bufs.len - 1;
}

/* ---- step 4: emission ---- */

static tt_sid add_stmt(lower_ctx *c, tt_stmt s)
{
    if (TT_VEC_PUSH(&c->p->stmts, s)) {
        c->status = TT_ERR_NOMEM;
        return 0;
    }
    return (tt_sid)(c->p->stmts.len - 1);
}

static tt_sid seq(lower_ctx *c, const tt_sid *items, int n)
{
    if (n == 1)
        return items[0];
    tt_stmt s = {.kind = TT_STMT_SEQ, .first = (uint32_t)c->p->items.len, .n = 0};
    for (int i = 0; i < n; i++)
        if (items[i]) {
            if (TT_VEC_PUSH(&c->p->items, items[i])) {
                c->status = TT_ERR_NOMEM;
                return 0;
            }
            s.n++;
        }
    return add_stmt(c, s);
}

/* Flat index into stage s's buffer from global indices. */
static tt_eid flat_index(lower_ctx *c, int s, const tt_eid *global)
{
    tt_expr_pool *p = &c->p->pool;
    const stage_info *si = &c->si[s];
    const tt_buffer *b = &c->p->bufs.data[si->buf];
    tt_eid acc = tt_expr_int(p, 0);
    if (b->layout.nparts) {
        /* packed: sum of (g[dim] / inner) % extent, row-major over the parts; a panel part is
         * the panel the reader's region starts, ceil(start / inner), and the parts after it
         * index the offset into that panel, g[dim] - start */
        tt_eid rel[TT_MAX_DIMS];
        memcpy(rel, global, sizeof(tt_eid) * (size_t)b->ndim);
        for (int k = 0; k < b->layout.nparts; k++) {
            const tt_layout_part *lp = &b->layout.parts[k];
            tt_eid v = rel[lp->dim];
            if (lp->last > 0) {
                /* start = min(a, last) (panel_last): ceil distributes over the min, and
                 * ceil(tile * t / tile) simplifies to t, min(t, extent - 1) to t */
                tt_eid start = si->panel_min[lp->dim];
                tt_expr m = *tt_expr_get(p, start);
                tt_eid ceil_a = tt_div(p, tt_add(p, m.a, tt_expr_int(p, lp->inner - 1)),
                                       tt_expr_int(p, lp->inner));
                tt_eid ceil_b = tt_div(p, tt_add(p, m.b, tt_expr_int(p, lp->inner - 1)),
                                       tt_expr_int(p, lp->inner));
                v = tt_expr_binary(p, TT_EXPR_MIN, ceil_a, ceil_b);
                rel[lp->dim] = tt_sub(p, rel[lp->dim], start);
            } else {
                if (lp->inner > 1)
                    v = tt_div(p, v, tt_expr_int(p, lp->inner));
                v = tt_mod(p, v, tt_expr_int(p, lp->extent));
            }
            acc = tt_add(p, tt_mul(p, acc, tt_expr_int(p, lp->extent)), v);
        }
        return tt_simplify(p, acc, &c->bounds);
    }
    for (int d = 0; d < b->ndim; d++) {
        tt_eid local = si->full[d] ? global[d] : tt_sub(p, global[d], si->min[d]);
        acc = tt_add(p, acc, tt_mul(p, local, tt_expr_int(p, b->strides[d])));
    }
    if (si->db) /* iteration v of the attach loop reads tile v % 2 */
        acc = tt_add(p, acc,
                     tt_mul(p, tt_mod(p, tt_expr_var(p, si->db_phase), tt_expr_int(p, 2)),
                            tt_expr_int(p, si->db_size)));
    return tt_simplify(p, acc, &c->bounds);
}

/* Replaces READs by LOADs of the readers' buffers. */
static tt_eid to_loads(lower_ctx *c, tt_eid e)
{
    tt_expr_pool *p = &c->p->pool;
    tt_expr n = *tt_expr_get(p, e);
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return e;
    case TT_EXPR_READ: {
        tt_eid idx[TT_MAX_DIMS];
        for (int i = 0; i < n.n; i++)
            if (!(idx[i] = to_loads(c, p->args.data[n.b + (uint32_t)i])))
                return 0;
        int s = stage_of(c, (int)n.a);
        if (s < 0 || c->si[s].buf < 0)
            return 0;
        return tt_expr_load(p, (tt_dtype)n.dtype, (uint32_t)c->si[s].buf, flat_index(c, s, idx));
    }
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: {
        tt_eid a = to_loads(c, n.a);
        if (!a)
            return 0;
        n.a = a;
        if (TT_VEC_PUSH(&p->nodes, n))
            return 0;
        return (tt_eid)(p->nodes.len - 1);
    }
    case TT_EXPR_SELECT: {
        tt_eid a = to_loads(c, n.a), b = to_loads(c, n.b), d = to_loads(c, n.c);
        return a && b && d ? tt_expr_select(p, a, b, d) : 0;
    }
    default: {
        tt_eid a = to_loads(c, n.a), b = to_loads(c, n.b);
        return a && b ? tt_expr_binary(p, (tt_expr_kind)n.kind, a, b) : 0;
    }
    }
}

static tt_eid and_cond(tt_expr_pool *p, tt_eid acc, tt_eid c)
{
    return acc ? tt_expr_binary(p, TT_EXPR_AND, acc, c) : c;
}

/* Guards: root values inside their extents, region indices inside the tensor. */
static tt_eid guards(lower_ctx *c, int s, const tt_eid *sub, bool with_reduce)
{
    tt_expr_pool *p = &c->p->pool;
    const tt_op *op = &c->st->dag.ops.data[c->si[s].op];
    tt_eid cond = 0;
    for (int d = 0; d < op->ndim; d++) {
        tt_eid g = tt_simplify(
            p,
            tt_expr_binary(p, TT_EXPR_LT, root_of(c, op->axis[d]), tt_expr_int(p, c->si[s].ext[d])),
            &c->bounds);
        if (!tt_expr_is_const_int(p, g, NULL) && !c->clamped[op->axis[d]])
            cond = and_cond(p, cond, g);
        if (!c->si[s].full[d]) {
            tt_eid hi = tt_simplify(
                p, tt_expr_binary(p, TT_EXPR_LT, sub[op->axis[d]], tt_expr_int(p, op->shape[d])),
                &c->bounds);
            tt_eid lo = tt_simplify(
                p, tt_expr_binary(p, TT_EXPR_GE, sub[op->axis[d]], tt_expr_int(p, 0)), &c->bounds);
            if (!tt_expr_is_const_int(p, hi, NULL))
                cond = and_cond(p, cond, hi);
            if (!tt_expr_is_const_int(p, lo, NULL))
                cond = and_cond(p, cond, lo);
        }
    }
    /* A split whose parts over-cover their parent (non-divisible, or a region smaller than the
     * tile) would revisit points of the parent: guard every such parent, not only the roots. */
    const tt_stage *sg = &c->st->stages.data[s];
    for (size_t r = 0; r < sg->rels.len; r++) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind != TT_REL_SPLIT)
            continue;
        int64_t prod = 1;
        for (int k = 0; k < rel->nchild; k++)
            prod *= c->var_ext[rel->child[k]];
        bool is_root = false; /* roots are guarded against their extents below */
        for (int d = 0; d < op->ndim; d++)
            is_root |= op->axis[d] == rel->parent;
        for (int k = 0; k < op->nreduce; k++)
            is_root |= op->raxis[k] == rel->parent;
        if (is_root || prod <= c->var_ext[rel->parent])
            continue;
        tt_eid v = root_of(c, rel->parent);
        bool reduce = false;
        for (int k = 0; k < sg->niters; k++)
            if (sg->iters[k].kind == TT_ITER_REDUCE && tt_expr_uses_var(p, v, sg->iters[k].var))
                reduce = true;
        if (reduce && !with_reduce)
            continue;
        tt_eid g = tt_simplify(
            p, tt_expr_binary(p, TT_EXPR_LT, v, tt_expr_int(p, c->var_ext[rel->parent])),
            &c->bounds);
        if (!tt_expr_is_const_int(p, g, NULL))
            cond = and_cond(p, cond, g);
    }
    for (int k = 0; with_reduce && k < op->nreduce; k++) {
        tt_eid g = tt_simplify(
            p,
            tt_expr_binary(p, TT_EXPR_LT, root_of(c, op->raxis[k]), tt_expr_int(p, op->rextent[k])),
            &c->bounds);
        if (!tt_expr_is_const_int(p, g, NULL))
            cond = and_cond(p, cond, g);
    }
    return cond;
}

static tt_sid guarded(lower_ctx *c, tt_eid cond, tt_sid body)
{
    if (!cond)
        return body;
    tt_stmt s = {.kind = TT_STMT_IF, .cond = cond, .body = body};
    return add_stmt(c, s);
}

static tt_sid emit_stage(lower_ctx *c, int s);

typedef struct {
    int s;
    const tt_eid *sub;
    tt_sid update, init;
    int first_reduce;
} nest_ctx;

/* The conjuncts of `cond` that use `var` and those that do not, each joined by AND (0: none). */
static void split_guard(tt_expr_pool *p, tt_eid cond, uint32_t var, tt_eid *dep, tt_eid *indep)
{
    const tt_expr *e = tt_expr_get(p, cond);
    if (e->kind == TT_EXPR_AND) {
        tt_eid a = e->a, b = e->b;
        split_guard(p, a, var, dep, indep);
        split_guard(p, b, var, dep, indep);
    } else if (tt_expr_uses_var(p, cond, var)) {
        *dep = and_cond(p, *dep, cond);
    } else {
        *indep = and_cond(p, *indep, cond);
    }
}

static tt_sid wrap_loop(lower_ctx *c, int s, int k, tt_sid inner)
{
    const tt_stage *sg = &c->st->stages.data[s];
    const tt_iter *it = &sg->iters[k];
    /* A guard's conjuncts that do not depend on the loop's variable are tested once, around the
     * loop: a padded reduction's `k < 197` then wraps a thread's register tile of products, not
     * each of them (GPU compilers did not hoist it).  Serial, unrolled and vectorised loops only:
     * a bound loop's variable is a thread's or a group's. */
    const tt_stmt *in = &c->p->stmts.data[inner];
    if (in->kind == TT_STMT_IF && !in->orelse &&
        (it->ann == TT_ANN_NONE || it->ann == TT_ANN_UNROLL || it->ann == TT_ANN_VECTORIZE)) {
        tt_eid dep = 0, indep = 0;
        tt_sid body = in->body;
        split_guard(&c->p->pool, in->cond, it->var, &dep, &indep);
        if (indep) {
            tt_sid loop = wrap_loop(c, s, k, dep ? guarded(c, dep, body) : body);
            return guarded(c, indep, loop);
        }
    }
    tt_stmt f = {.kind = TT_STMT_FOR,
                 .ann = it->ann,
                 .var = it->var,
                 .extent = c->var_ext[it->var],
                 .body = inner};
    if (sg->auto_unroll_max_step && sg->pragma_var == it->var)
        f.unroll_max_step = sg->auto_unroll_max_step;
    return add_stmt(c, f);
}

/* A copy of statement `id` with the variables `sub` maps (nsub entries) replaced, simplified. */
static tt_sid subst_stmt(lower_ctx *c, tt_sid id, const tt_eid *sub, size_t nsub)
{
    tt_expr_pool *p = &c->p->pool;
    tt_stmt s = c->p->stmts.data[id];
#define SUBST(e) ((e) ? tt_simplify(p, tt_expr_substitute(p, (e), sub, nsub), &c->bounds) : 0)
    switch (s.kind) {
    case TT_STMT_SEQ: { /* the items first: copying them appends the items of inner sequences */
        tt_sid *items = malloc(sizeof(tt_sid) * (s.n ? s.n : 1));
        if (!items) {
            c->status = TT_ERR_NOMEM;
            return 0;
        }
        for (uint32_t k = 0; k < s.n; k++)
            items[k] = subst_stmt(c, c->p->items.data[s.first + k], sub, nsub);
        s.first = (uint32_t)c->p->items.len;
        for (uint32_t k = 0; k < s.n && !c->status; k++)
            if (!items[k] || TT_VEC_PUSH(&c->p->items, items[k]))
                c->status = c->status ? c->status : TT_ERR_NOMEM;
        free(items);
        break;
    }
    case TT_STMT_STORE:
        s.index = SUBST(s.index);
        s.value = SUBST(s.value);
        break;
    default:
        if (s.kind == TT_STMT_IF)
            s.cond = SUBST(s.cond);
        if (s.body)
            s.body = subst_stmt(c, s.body, sub, nsub);
        if (s.orelse)
            s.orelse = subst_stmt(c, s.orelse, sub, nsub);
        break;
    }
#undef SUBST
    return c->status || p->oom ? 0 : add_stmt(c, s);
}

/* Whether shared stage s, computed at its consumer's loop v, is double-buffered (TVM's
 * InjectDoubleBuffer): v must be a loop of one work-item's own (serial or unrolled) with two
 * iterations or more, and the fill must allocate nothing shared of its own (it is emitted twice).
 * Otherwise the pragma changes nothing: the program is the single-buffered one. */
static void decide_double_buffer(lower_ctx *c, int s)
{
    stage_info *si = &c->si[s];
    const tt_stage *sg = &c->st->stages.data[s];
    if (!sg->double_buffer || !si->attached || si->consumer < 0 || strcmp(sg->scope, "shared"))
        return;
    const tt_iter *it = &c->st->stages.data[si->consumer].iters[si->at_pos];
    if ((it->ann != TT_ANN_NONE && it->ann != TT_ANN_UNROLL) || it->var >= c->nvars ||
        c->var_ext[it->var] < 2)
        return;
    for (int q = 0; q < c->nstages; q++)
        if (c->si[q].attached && c->si[q].consumer == s)
            return;
    char name[96];
    snprintf(name, sizeof(name), "%s.phase", tt_var_name(&c->p->pool, it->var));
    si->db = true;
    si->db_var = it->var;
    si->db_phase = tt_var_new(&c->p->pool, name);
}

static tt_sid build_level(lower_ctx *c, nest_ctx *n, int k)
{
    const tt_stage *sg = &c->st->stages.data[n->s];
    tt_sid items[3];
    int ni = 0;
    if (k == n->first_reduce && n->init)
        items[ni++] = n->init;
    if (k == sg->niters) {
        items[ni++] = n->update;
        return seq(c, items, ni);
    }
    tt_sid inner = build_level(c, n, k + 1);
    /* Stages computed at this iterator: inside the loop, before the rest, allocated there.  A
     * double-buffered one is allocated around the loop instead: its first tile is filled before
     * the loop, and iteration v fetches the tile of v + 1 into the other half before it reads its
     * own.  The last iteration fetches its own tile again into the half no one reads: a fetch
     * without a branch (a branch around it made pocl's compiler run for minutes), and no read
     * past the tensor. */
    int dbs[TT_MAX_STAGES], ndb = 0;
    for (int a = c->nstages - 1; a >= 0; a--) {
        if (!c->si[a].attached || c->si[a].consumer != n->s || c->si[a].at_pos != k)
            continue;
        if (c->si[a].db) {
            dbs[ndb++] = a;
            continue;
        }
        tt_sid parts[2] = {emit_stage(c, a), inner};
        tt_stmt al = {
            .kind = TT_STMT_ALLOC, .buf = (uint32_t)c->si[a].buf, .body = seq(c, parts, 2)};
        inner = add_stmt(c, al);
    }
    if (ndb == 0) {
        items[ni++] = wrap_loop(c, n->s, k, inner);
        return seq(c, items, ni);
    }
    tt_expr_pool *p = &c->p->pool;
    uint32_t v = sg->iters[k].var;
    tt_eid var = tt_expr_var(p, v), zero = tt_expr_int(p, 0);
    tt_eid after = tt_add(p, var, tt_expr_int(p, 1));
    tt_eid clamped = tt_expr_binary(p, TT_EXPR_MIN, after, tt_expr_int(p, c->var_ext[v] - 1));
    size_t nsub = p->vars.len;
    tt_eid *sub = calloc(nsub, sizeof(tt_eid));
    tt_sid first[TT_MAX_STAGES], next[TT_MAX_STAGES];
    if (!sub) {
        c->status = TT_ERR_NOMEM;
        return 0;
    }
    for (int i = 0; i < ndb; i++) /* the tiles read in iteration v: tile v % 2 */
        sub[c->si[dbs[i]].db_phase] = var;
    inner = subst_stmt(c, inner, sub, nsub);
    for (int i = 0; i < ndb; i++) {
        uint32_t phase = c->si[dbs[i]].db_phase;
        tt_sid fill = emit_stage(c, dbs[i]);
        sub[v] = zero;
        sub[phase] = zero;
        first[i] = fill ? subst_stmt(c, fill, sub, nsub) : 0;
        sub[v] = clamped;
        sub[phase] = after;
        next[i] = fill ? subst_stmt(c, fill, sub, nsub) : 0;
        sub[v] = sub[phase] = 0;
    }
    free(sub);
    /* the fetch: a sequence of its own even for one fill, flagged for the code generators */
    tt_stmt fetch = {.kind = TT_STMT_SEQ, .first = (uint32_t)c->p->items.len, .prefetch = true};
    for (int i = 0; i < ndb; i++)
        if (TT_VEC_PUSH(&c->p->items, next[i]))
            c->status = TT_ERR_NOMEM;
    fetch.n = (uint32_t)ndb;
    tt_sid body[2] = {add_stmt(c, fetch), inner};
    tt_sid loop = wrap_loop(c, n->s, k, seq(c, body, 2));
    if (c->status)
        return 0;
    c->p->stmts.data[loop].prefetch = true;
    for (int i = 0; i < ndb; i++) {
        tt_sid parts[2] = {first[i], loop};
        tt_stmt al = {
            .kind = TT_STMT_ALLOC, .buf = (uint32_t)c->si[dbs[i]].buf, .body = seq(c, parts, 2)};
        loop = add_stmt(c, al);
    }
    items[ni++] = loop;
    return seq(c, items, ni);
}

/* Init nest of a reduction: the spatial iterators from position `from` inward. */
static tt_sid build_init(lower_ctx *c, int s, int from, tt_sid store)
{
    const tt_stage *sg = &c->st->stages.data[s];
    tt_sid body = store;
    for (int k = sg->niters - 1; k >= from; k--)
        if (sg->iters[k].kind == TT_ITER_SPATIAL)
            body = wrap_loop(c, s, k, body);
    return body;
}

static tt_sid emit_stage(lower_ctx *c, int s)
{
    if (c->status)
        return 0;
    tt_expr_pool *p = &c->p->pool;
    const stage_info *si = &c->si[s];
    const tt_stage *sg = &c->st->stages.data[s];
    const tt_op *op = &c->st->dag.ops.data[si->op];
    derive(c, s);
    tt_eid *sub = root_subst(c, s);
    if (!sub) {
        c->status = TT_ERR_NOMEM;
        return 0;
    }
    tt_eid global[TT_MAX_DIMS];
    for (int d = 0; d < op->ndim; d++)
        global[d] = tt_simplify(p, sub[op->axis[d]], &c->bounds);
    tt_eid index = flat_index(c, s, global);
    tt_eid value = tt_expr_substitute(p, si->body, sub, c->nvars);
    value = value ? to_loads(c, value) : 0;
    value = value ? tt_simplify(p, value, &c->bounds) : 0;
    if (!value || !index) {
        free(sub);
        c->status = c->status ? c->status : TT_ERR_NOMEM;
        return 0;
    }
    if (tt_expr_get(p, value)->dtype != op->dtype)
        value = tt_expr_cast(p, op->dtype, value);
    nest_ctx n = {s, sub, 0, 0, sg->niters};
    if (op->reduce != TT_REDUCE_NONE) {
        for (int k = 0; k < sg->niters; k++)
            if (sg->iters[k].kind == TT_ITER_REDUCE) {
                n.first_reduce = k;
                break;
            }
        tt_value id = tt_reduce_identity(op->reduce, op->dtype);
        tt_eid ide =
            tt_dtype_is_float(op->dtype) ? tt_expr_float(p, op->dtype, id.f) : tt_expr_int(p, id.i);
        tt_stmt init = {
            .kind = TT_STMT_STORE, .buf = (uint32_t)si->buf, .index = index, .value = ide};
        n.init = build_init(c, s, n.first_reduce,
                            guarded(c, guards(c, s, sub, false), add_stmt(c, init)));
        tt_eid old = tt_expr_load(p, op->dtype, (uint32_t)si->buf, index);
        tt_expr_kind k = op->reduce == TT_REDUCE_SUM    ? TT_EXPR_ADD
                         : op->reduce == TT_REDUCE_MAX  ? TT_EXPR_MAX
                         : op->reduce == TT_REDUCE_PROD ? TT_EXPR_MUL
                                                        : TT_EXPR_MIN;
        value = tt_expr_binary(p, k, old, value);
    }
    tt_stmt st = {.kind = TT_STMT_STORE, .buf = (uint32_t)si->buf, .index = index, .value = value};
    n.update = guarded(c, guards(c, s, sub, true), add_stmt(c, st));
    tt_sid out = build_level(c, &n, 0);
    free(sub);
    return out;
}

/* Loop variables of different stages often share a name (i.0 of a producer and of its consumer).
 * Renames the later ones to "<stage>.<name>" so the printed program and generated code are
 * unambiguous. */
typedef struct {
    lower_ctx *c;
    uint32_t seen[1024];
    int nseen;
} rename_ctx;

static void rename_loops(rename_ctx *r, tt_sid id)
{
    tt_program *p = r->c->p;
    const tt_stmt s = p->stmts.data[id];
    if (s.kind == TT_STMT_SEQ) {
        for (uint32_t k = 0; k < s.n; k++)
            rename_loops(r, p->items.data[s.first + k]);
        return;
    }
    if (s.kind == TT_STMT_FOR) {
        bool known = false, clash = false;
        for (int i = 0; i < r->nseen; i++) {
            known |= r->seen[i] == s.var;
            clash |= r->seen[i] != s.var &&
                     strcmp(p->pool.vars.data[r->seen[i]].name, p->pool.vars.data[s.var].name) == 0;
        }
        if (!known && clash) {
            const char *owner = "stage";
            for (int st = 0; st < r->c->nstages; st++) {
                const tt_stage *sg = &r->c->st->stages.data[st];
                for (int k = 0; k < sg->niters; k++)
                    if (sg->iters[k].var == s.var)
                        owner = r->c->st->dag.ops.data[sg->op].name;
            }
            const char *name =
                tt_arena_printf(&p->pool.strings, "%s.%s", owner, p->pool.vars.data[s.var].name);
            if (name)
                p->pool.vars.data[s.var].name = name;
        }
        if (!known && r->nseen < (int)TT_ARRAY_LEN(r->seen))
            r->seen[r->nseen++] = s.var;
    }
    if (s.kind == TT_STMT_FOR || s.kind == TT_STMT_ALLOC || s.kind == TT_STMT_IF) {
        rename_loops(r, s.body);
        if (s.orelse)
            rename_loops(r, s.orelse);
    }
}

/* Steps 1 to 3 and the buffers: everything tt_lower does before emitting statements. */
static tt_status lower_buffers(lower_ctx *c)
{
    const tt_state *st = c->st;
    tt_program *p = c->p;
    tt_errbuf *err = c->err;
    tt_status r;
    tt_stmt none = {0};
    c->si = calloc(st->stages.len, sizeof(stage_info));
    /* Variables created during lowering are never loop variables, so the tables only need the
     * state's variables (plus slack for safety). */
    c->nvars = p->pool.vars.len;
    c->var_ext = calloc(c->nvars, sizeof(int64_t));
    c->root_val = calloc(c->nvars, sizeof(tt_eid));
    c->clamped = calloc(c->nvars, 1);
    c->bounds.lo = calloc(c->nvars, sizeof(int64_t));
    c->bounds.hi = calloc(c->nvars, sizeof(int64_t));
    c->bounds.known = calloc(c->nvars, 1);
    c->bounds.n = c->nvars;
    if (!c->si || !c->var_ext || !c->root_val || !c->clamped || !c->bounds.lo || !c->bounds.hi ||
        !c->bounds.known || TT_VEC_PUSH(&p->stmts, none))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (int s = 0; s < c->nstages; s++) {
        const tt_stage *sg = &st->stages.data[s];
        c->si[s].op = sg->op;
        c->si[s].placeholder = st->dag.ops.data[sg->op].is_placeholder;
        c->si[s].inlined = sg->at == TT_AT_INLINE;
        c->si[s].attached = sg->at == TT_AT_ITER;
        c->si[s].buf = -1;
        c->si[s].consumer = -1;
    }
    for (int s = 0; s < c->nstages; s++)
        if (!c->si[s].placeholder && !c->si[s].inlined &&
            !(c->si[s].body = expand(c, st->dag.ops.data[c->si[s].op].body, 0)))
            return tt_err(err, TT_ERR_LOWER, "inlining into '%s' failed (cyclic or out of memory)",
                          op_name(c, c->si[s].op));
    /* Regions need the consumer's iterator extents, so derive consumers first. */
    for (int s = c->nstages - 1; s >= 0; s--) {
        if (c->si[s].inlined)
            continue;
        if (c->si[s].attached) {
            int cs = stage_of(c, st->stages.data[s].at_op);
            if (cs >= 0 && cs < s)
                return lerr(c, "'%s' is computed at '%s', which comes before it",
                            op_name(c, c->si[s].op), op_name(c, c->si[cs].op));
            if (cs >= 0)
                derive(c, cs);
        }
        if ((r = infer_region(c, s)))
            return r;
    }
    for (int s = 0; s < c->nstages; s++)
        decide_double_buffer(c, s);
    /* Buffers: parameters in order, then intermediates. */
    int params[64], nin;
    int np = tt_dag_params(&st->dag, params, 64, &nin);
    if (np > 64)
        return tt_err(err, TT_ERR_LIMIT, "more than 64 parameters");
    p->nparams = np;
    p->ninputs = nin;
    for (int i = 0; i < np; i++) {
        int s = stage_of(c, params[i]);
        if (c->si[s].inlined)
            return lerr(c, "output '%s' cannot be inlined", op_name(c, params[i]));
        if (c->si[s].attached)
            return lerr(c, "output '%s' cannot be computed at another stage",
                        op_name(c, params[i]));
        if ((c->si[s].buf = add_buffer(c, s, i)) < 0)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        if (st->stages.data[s].layout_rewrite) {
            tt_buffer *b = &p->bufs.data[c->si[s].buf];
            if ((r = derive_layout(c, s, &b->layout)))
                return r;
            if (b->layout.nparts)
                b->size = b->layout.size;
        }
    }
    for (int s = 0; s < c->nstages; s++)
        if (c->si[s].buf < 0 && !c->si[s].inlined && (c->si[s].buf = add_buffer(c, s, -1)) < 0)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    return TT_OK;
}

static void lower_ctx_free(lower_ctx *c)
{
    free(c->si);
    free(c->var_ext);
    free(c->root_val);
    free(c->clamped);
    free(c->bounds.lo);
    free(c->bounds.hi);
    free(c->bounds.known);
}

/* The context and the program of lowering `st`; NULL program when out of memory. */
static lower_ctx lower_ctx_init(const tt_state *st, tt_errbuf *err)
{
    tt_program *p = calloc(1, sizeof(*p));
    lower_ctx c = {.st = st, .p = p, .err = err, .nstages = (int)st->stages.len, .status = TT_OK};
    if (p && tt_expr_pool_clone(&st->dag.pool, &p->pool)) {
        free(p);
        c.p = NULL;
    }
    return c;
}

tt_status tt_lower_buffers(const tt_state *st, tt_program **out, tt_errbuf *err)
{
    *out = NULL;
    lower_ctx c = lower_ctx_init(st, err);
    if (!c.p)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status r = lower_buffers(&c);
    lower_ctx_free(&c);
    if (r) {
        tt_program_free(c.p);
        return r;
    }
    *out = c.p;
    return TT_OK;
}

tt_status tt_lower(const tt_state *st, tt_program **out, tt_errbuf *err)
{
    *out = NULL;
    lower_ctx c = lower_ctx_init(st, err);
    tt_program *p = c.p;
    if (!p)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status r = lower_buffers(&c);
    if (r)
        goto out;
    /* Root stages in order; intermediates allocated around everything. */
    tt_sid items[TT_MAX_STAGES];
    int ni = 0;
    for (int s = 0; s < c.nstages; s++)
        if (!c.si[s].placeholder && !c.si[s].inlined && !c.si[s].attached)
            items[ni++] = emit_stage(&c, s);
    if (c.status) {
        r = tt_err(err, c.status, "lowering failed: %s", tt_strerror(c.status));
        goto out;
    }
    tt_sid body = seq(&c, items, ni);
    for (int s = c.nstages - 1; s >= 0; s--) {
        if (c.si[s].placeholder || c.si[s].inlined || c.si[s].attached ||
            c.p->bufs.data[c.si[s].buf].param >= 0)
            continue;
        tt_stmt al = {.kind = TT_STMT_ALLOC, .buf = (uint32_t)c.si[s].buf, .body = body};
        body = add_stmt(&c, al);
    }
    p->root = body;
    if ((r = tt_program_inject_vthreads(p, err)))
        goto out;
    rename_ctx *rn = calloc(1, sizeof(*rn));
    if (rn) {
        rn->c = &c;
        rename_loops(rn, body);
        free(rn);
    }
    if (c.status || p->pool.oom)
        r = tt_err(err, TT_ERR_NOMEM, "out of memory");
out:
    lower_ctx_free(&c);
    if (r) {
        tt_program_free(p);
        return r;
    }
    *out = p;
    return TT_OK;
}

const tt_buffer *tt_program_param(const tt_program *p, int i)
{
    for (size_t b = 0; b < p->bufs.len; b++)
        if (p->bufs.data[b].param == i)
            return &p->bufs.data[b];
    return NULL;
}

int64_t tt_program_scope_bytes(const tt_program *p, const char *scope)
{
    int64_t bytes = 0;
    for (size_t k = 0; k < p->bufs.len; k++) {
        const tt_buffer *b = &p->bufs.data[k];
        if (!strcmp(b->scope, scope))
            bytes += b->size * (b->dtype == TT_DT_BOOL ? 1 : tt_dtype_bytes(b->dtype));
    }
    return bytes;
}

int64_t tt_lower_scope_bytes(const tt_state *st, const char *scope)
{
    tt_program *p;
    if (tt_lower_buffers(st, &p, NULL))
        return -1;
    int64_t bytes = tt_program_scope_bytes(p, scope);
    tt_program_free(p);
    return bytes;
}

void tt_program_free(tt_program *p)
{
    if (!p)
        return;
    tt_expr_pool_free(&p->pool);
    TT_VEC_FREE(&p->stmts);
    TT_VEC_FREE(&p->items);
    TT_VEC_FREE(&p->bufs);
    free(p->name);
    free(p);
}
