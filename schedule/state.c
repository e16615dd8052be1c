/* Schedule state: applying and checking transform steps. */
#include "state.h"

#include <stdlib.h>
#include <string.h>

static const char *const step_codes[] = {
#define TT_ST_ROW(n, c) c,
    TT_STEP_LIST(TT_ST_ROW)
#undef TT_ST_ROW
};
_Static_assert(TT_ARRAY_LEN(step_codes) == TT_STEP_KIND_COUNT, "step codes");

static const char *const ann_names[] = {
#define TT_AN_ROW(n, s) s,
    TT_ANN_LIST(TT_AN_ROW)
#undef TT_AN_ROW
};
_Static_assert(TT_ARRAY_LEN(ann_names) == TT_ANN_COUNT, "annotation names");

const char *tt_step_code(tt_step_kind k)
{
    return (unsigned)k < TT_STEP_KIND_COUNT ? step_codes[k] : "?";
}

const char *tt_ann_name(tt_ann a)
{
    return (unsigned)a < TT_ANN_COUNT ? ann_names[a] : "?";
}

bool tt_ann_is_gpu_bind(tt_ann a)
{
    return a >= TT_ANN_VTHREAD && a <= TT_ANN_THREAD_Z;
}

/* ---- creation ---- */

static void stage_reset(tt_state *st, tt_stage *sg)
{
    const tt_op *op = &st->dag.ops.data[sg->op];
    sg->niters = 0;
    sg->rels.len = 0;
    sg->transformed = false;
    sg->auto_unroll_max_step = 0;
    sg->pragma_var = 0;
    if (op->is_placeholder)
        return;
    for (int i = 0; i < op->ndim; i++) {
        tt_iter it = {tt_var_name(&st->dag.pool, op->axis[i]), op->shape[i], op->axis[i],
                      TT_ITER_SPATIAL, TT_ANN_NONE};
        sg->iters[sg->niters++] = it;
    }
    for (int i = 0; i < op->nreduce; i++) {
        tt_iter it = {tt_var_name(&st->dag.pool, op->raxis[i]), op->rextent[i], op->raxis[i],
                      TT_ITER_REDUCE, TT_ANN_NONE};
        sg->iters[sg->niters++] = it;
    }
}

static tt_status stage_insert(tt_state *st, int at, int op)
{
    tt_stage sg;
    memset(&sg, 0, sizeof(sg));
    sg.op = op;
    sg.at = TT_AT_ROOT;
    strcpy(sg.scope, "global");
    if (TT_VEC_RESERVE(&st->stages, 1))
        return TT_ERR_NOMEM;
    memmove(&st->stages.data[at + 1], &st->stages.data[at],
            (st->stages.len - (size_t)at) * sizeof(tt_stage));
    st->stages.data[at] = sg;
    st->stages.len++;
    stage_reset(st, &st->stages.data[at]);
    return TT_OK;
}

tt_status tt_state_create(const tt_dag *dag, tt_state **out, tt_errbuf *err)
{
    tt_state *st = calloc(1, sizeof(*st));
    if (!st || tt_dag_clone(dag, &st->dag)) {
        free(st);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    if (dag->ops.len > TT_MAX_STAGES) {
        tt_state_free(st);
        return tt_err(err, TT_ERR_LIMIT, "more than %d stages", TT_MAX_STAGES);
    }
    for (size_t i = 0; i < dag->ops.len; i++)
        if (stage_insert(st, (int)i, (int)i)) {
            tt_state_free(st);
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
    *out = st;
    return TT_OK;
}

void tt_state_free(tt_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->stages.len; i++)
        TT_VEC_FREE(&st->stages.data[i].rels);
    TT_VEC_FREE(&st->stages);
    TT_VEC_FREE(&st->steps);
    tt_dag_free(&st->dag);
    free(st);
}

tt_status tt_state_clone(const tt_state *src, tt_state **out)
{
    tt_state *st = calloc(1, sizeof(*st));
    if (!st || tt_dag_clone(&src->dag, &st->dag))
        goto oom;
    if (TT_VEC_RESERVE(&st->stages, src->stages.len) || TT_VEC_RESERVE(&st->steps, src->steps.len))
        goto oom;
    if (src->steps.len)
        memcpy(st->steps.data, src->steps.data, src->steps.len * sizeof(tt_step));
    st->steps.len = src->steps.len;
    for (size_t i = 0; i < src->stages.len; i++) {
        tt_stage sg = src->stages.data[i];
        memset(&sg.rels, 0, sizeof(sg.rels));
        /* Iterator names point into the source pool's arena: re-point them to ours. */
        for (int k = 0; k < sg.niters; k++)
            sg.iters[k].name = tt_var_name(&st->dag.pool, sg.iters[k].var);
        st->stages.data[st->stages.len++] = sg;
        const tt_stage *s0 = &src->stages.data[i];
        if (TT_VEC_RESERVE(&st->stages.data[i].rels, s0->rels.len))
            goto oom;
        if (s0->rels.len)
            memcpy(st->stages.data[i].rels.data, s0->rels.data, s0->rels.len * sizeof(tt_relation));
        st->stages.data[i].rels.len = s0->rels.len;
    }
    *out = st;
    return TT_OK;
oom:
    tt_state_free(st);
    return TT_ERR_NOMEM;
}

int tt_state_stage_of_op(const tt_state *st, int op)
{
    for (size_t i = 0; i < st->stages.len; i++)
        if (st->stages.data[i].op == op)
            return (int)i;
    return -1;
}

/* ---- helpers for checks ---- */

typedef struct {
    tt_state *st;
    const tt_step *step;
    int index;
    tt_errbuf *err;
} apply_ctx;

static tt_status illegal(apply_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tt_status illegal(apply_ctx *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tt_err(c->err, TT_ERR_ILLEGAL_STEP, "step %d (%s): %s", c->index,
                  tt_step_code(c->step->kind), msg);
}

static const char *stage_name(const tt_state *st, int s)
{
    return st->dag.ops.data[st->stages.data[s].op].name;
}

static tt_status check_stage(apply_ctx *c, int s, bool allow_placeholder)
{
    if (s < 0 || (size_t)s >= c->st->stages.len)
        return illegal(c, "stage %d does not exist (the state has %zu stages)", s,
                       c->st->stages.len);
    if (!allow_placeholder && c->st->dag.ops.data[c->st->stages.data[s].op].is_placeholder)
        return illegal(c, "stage %d ('%s') is a placeholder and cannot be scheduled", s,
                       stage_name(c->st, s));
    if (c->st->stages.data[s].at == TT_AT_INLINE && c->step->kind != TT_STEP_COMPUTE_ROOT &&
        c->step->kind != TT_STEP_CACHE_READ)
        return illegal(c, "stage %d ('%s') is inlined", s, stage_name(c->st, s));
    return TT_OK;
}

static tt_status check_iter(apply_ctx *c, int s, int it)
{
    const tt_stage *sg = &c->st->stages.data[s];
    if (it < 0 || it >= sg->niters)
        return illegal(c, "iterator %d does not exist in stage %d ('%s', %d iterators)", it, s,
                       stage_name(c->st, s), sg->niters);
    return TT_OK;
}

static bool is_output(const tt_state *st, int op)
{
    return !st->dag.ops.data[op].is_placeholder && !tt_dag_has_readers(&st->dag, op);
}

static bool op_reads(const tt_dag *d, int reader, int op)
{
    return !d->ops.data[reader].is_placeholder &&
           tt_expr_reads_tensor(&d->pool, d->ops.data[reader].body, (uint32_t)op);
}

/* True if `consumer` reads `op` directly or through stages that are inlined. */
static bool reads_through_inline(const tt_state *st, int consumer_op, int op, int depth)
{
    if (depth > TT_MAX_STAGES)
        return false;
    if (op_reads(&st->dag, consumer_op, op))
        return true;
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (sg->at == TT_AT_INLINE && op_reads(&st->dag, consumer_op, sg->op) &&
            reads_through_inline(st, sg->op, op, depth + 1))
            return true;
    }
    return false;
}

/* True if a stage that reads `op` is computed (transitively) inside the stage of `target_op`. */
static bool reader_inside(const tt_state *st, int target_op, int op)
{
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *r = &st->stages.data[i];
        if (r->at == TT_AT_INLINE || !reads_through_inline(st, r->op, op, 0))
            continue;
        /* Walk r's attach chain up to the root. */
        const tt_stage *cur = r;
        for (int depth = 0; cur && cur->at == TT_AT_ITER && depth < TT_MAX_STAGES; depth++) {
            if (cur->at_op == target_op)
                return true;
            int next = tt_state_stage_of_op(st, cur->at_op);
            cur = next >= 0 ? &st->stages.data[next] : NULL;
        }
    }
    return false;
}

static bool has_attached(const tt_state *st, int op)
{
    for (size_t i = 0; i < st->stages.len; i++)
        if (st->stages.data[i].at == TT_AT_ITER && st->stages.data[i].at_op == op)
            return true;
    return false;
}

static void move_attachments(tt_state *st, int op, const uint32_t *from, int nfrom, uint32_t to)
{
    for (size_t i = 0; i < st->stages.len; i++) {
        tt_stage *sg = &st->stages.data[i];
        if (sg->at != TT_AT_ITER || sg->at_op != op)
            continue;
        for (int k = 0; k < nfrom; k++)
            if (sg->at_var == from[k])
                sg->at_var = to;
    }
}

static tt_status new_var(apply_ctx *c, const char *name, uint32_t *out)
{
    *out = tt_var_new(&c->st->dag.pool, name);
    return *out ? TT_OK : tt_err(c->err, TT_ERR_NOMEM, "out of memory");
}

/* ---- the steps ---- */

/* `over`: the lengths may multiply to more than the extent (the excess is guarded).  Only a
 * cooperative fetch's split by its consumer's threads takes it: a tile of 32 elements fetched by
 * 64 threads leaves 32 of them idle, while a loop tile larger than its loop only adds empty
 * iterations (and can hang a run). */
static tt_status do_split_common(apply_ctx *c, int s, int it, const int64_t *lengths, int n,
                                 bool inner_to_outer, bool over)
{
    tt_stage *sg = &c->st->stages.data[s];
    tt_iter old = sg->iters[it];
    if (n < 1 || n > TT_MAX_SPLIT - 1)
        return illegal(c, "a split needs 1 to %d lengths, got %d", TT_MAX_SPLIT - 1, n);
    if (sg->niters + n > TT_MAX_ITERS)
        return illegal(c, "stage '%s' would have more than %d iterators", stage_name(c->st, s),
                       TT_MAX_ITERS);
    if (old.ann != TT_ANN_NONE)
        return illegal(c, "iterator '%s' is annotated (%s) and cannot be split", old.name,
                       tt_ann_name(old.ann));
    int64_t prod = 1;
    for (int i = 0; i < n; i++) {
        if (lengths[i] <= 0)
            return illegal(c, "split length %d of iterator '%s' is %lld; lengths must be positive",
                           i, old.name, (long long)lengths[i]);
        prod *= lengths[i];
        if (prod > old.extent && !over)
            return illegal(c, "split lengths of '%s' multiply to more than its extent %lld",
                           old.name, (long long)old.extent);
    }
    tt_relation rel;
    memset(&rel, 0, sizeof(rel));
    rel.kind = TT_REL_SPLIT;
    rel.parent = old.var;
    rel.nchild = n + 1;
    rel.nlen = n;
    rel.inner_to_outer = inner_to_outer;
    memcpy(rel.lengths, lengths, (size_t)n * sizeof(int64_t));
    tt_iter parts[TT_MAX_SPLIT];
    int64_t rest = (old.extent + prod - 1) / prod;
    for (int i = 0; i <= n; i++) {
        char name[96];
        snprintf(name, sizeof(name), "%s.%d", old.name, i);
        tt_status r = new_var(c, name, &rel.child[i]);
        if (r)
            return r;
        sg = &c->st->stages.data[s];
        parts[i] = old;
        parts[i].var = rel.child[i];
        parts[i].name = tt_var_name(&c->st->dag.pool, rel.child[i]);
        if (inner_to_outer)
            parts[i].extent = i == 0 ? rest : lengths[i - 1];
        else
            parts[i].extent = i == n ? rest : lengths[i];
    }
    if (TT_VEC_PUSH(&sg->rels, rel))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    memmove(&sg->iters[it + n + 1], &sg->iters[it + 1],
            (size_t)(sg->niters - it - 1) * sizeof(tt_iter));
    memcpy(&sg->iters[it], parts, (size_t)(n + 1) * sizeof(tt_iter));
    sg->niters += n;
    sg->transformed = true;
    move_attachments(c->st, sg->op, &old.var, 1, rel.child[n]);
    if (sg->pragma_var == old.var)
        sg->pragma_var = rel.child[0];
    return TT_OK;
}

static tt_status do_split(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    if (p->extent < 0)
        return illegal(c, "negative extent %lld", (long long)p->extent);
    return do_split_common(c, p->stage, p->iter, p->lengths, p->nlen, p->inner_to_outer, false);
}

static const tt_step *split_source(apply_ctx *c, int src)
{
    if (src < 0 || (size_t)src >= c->st->steps.len || c->st->steps.data[src].kind != TT_STEP_SPLIT)
        return NULL;
    return &c->st->steps.data[src];
}

static tt_status do_follow_split(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    const tt_step *src = split_source(c, p->src_step);
    if (!src)
        return illegal(c, "source step %d is not an earlier SP step", p->src_step);
    if (p->n_split < 1 || p->n_split > src->nlen + 1)
        return illegal(c, "n_split %d is out of range for source step %d with %d lengths",
                       p->n_split, p->src_step, src->nlen);
    /* The first n_split-1 lengths of the source, then the product of the rest. */
    int64_t lengths[TT_MAX_SPLIT];
    int n = p->n_split - 1;
    for (int i = 0; i < n; i++)
        lengths[i] = src->lengths[i];
    int64_t prod = 1;
    for (int i = n; i < src->nlen; i++)
        prod *= src->lengths[i];
    lengths[n++] = prod;
    return do_split_common(c, p->stage, p->iter, lengths, n, true, false);
}

static tt_status do_follow_fused_split(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    if (p->nsrc < 1)
        return illegal(c, "FFSP needs at least one source step");
    int64_t len = 1;
    for (int k = 0; k < p->nsrc; k++) {
        const tt_step *src = split_source(c, p->srcs[k]);
        if (!src)
            return illegal(c, "source step %d is not an earlier SP step", p->srcs[k]);
        if (p->level < 0 || p->level >= src->nlen)
            return illegal(c, "level %d is out of range for source step %d", p->level, p->srcs[k]);
        len *= src->lengths[p->level];
    }
    return do_split_common(c, p->stage, p->iter, &len, 1, p->factor_or_nparts != 0, true);
}

static tt_status do_fuse(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)))
        return r;
    if (p->nids < 1)
        return illegal(c, "fuse needs at least one iterator");
    tt_stage *sg = &c->st->stages.data[p->stage];
    for (int k = 0; k < p->nids; k++) {
        if ((r = check_iter(c, p->stage, p->ids[k])))
            return r;
        if (k && p->ids[k] != p->ids[k - 1] + 1)
            return illegal(c, "fused iterators must be consecutive (got %d after %d)", p->ids[k],
                           p->ids[k - 1]);
        const tt_iter *it = &sg->iters[p->ids[k]];
        if (it->kind != sg->iters[p->ids[0]].kind)
            return illegal(c, "cannot fuse spatial and reduce iterators ('%s' and '%s')",
                           sg->iters[p->ids[0]].name, it->name);
        if (it->ann != TT_ANN_NONE)
            return illegal(c, "iterator '%s' is annotated (%s) and cannot be fused", it->name,
                           tt_ann_name(it->ann));
    }
    if (p->nids == 1)
        return TT_OK;
    tt_relation rel;
    memset(&rel, 0, sizeof(rel));
    rel.kind = TT_REL_FUSE;
    rel.nchild = p->nids;
    tt_strbuf name = {0};
    int64_t ext = 1;
    for (int k = 0; k < p->nids; k++) {
        const tt_iter *it = &sg->iters[p->ids[k]];
        rel.child[k] = it->var;
        tt_strbuf_printf(&name, "%s@", it->name);
        ext *= it->extent;
    }
    r = new_var(c, tt_strbuf_cstr(&name), &rel.parent);
    tt_strbuf_free(&name);
    if (r)
        return r;
    sg = &c->st->stages.data[p->stage];
    if (TT_VEC_PUSH(&sg->rels, rel))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    tt_iter fused = sg->iters[p->ids[0]];
    fused.var = rel.parent;
    fused.name = tt_var_name(&c->st->dag.pool, rel.parent);
    fused.extent = ext;
    int first = p->ids[0], n = p->nids;
    sg->iters[first] = fused;
    memmove(&sg->iters[first + 1], &sg->iters[first + n],
            (size_t)(sg->niters - first - n) * sizeof(tt_iter));
    sg->niters -= n - 1;
    sg->transformed = true;
    move_attachments(c->st, sg->op, rel.child, rel.nchild, rel.parent);
    for (int k = 0; k < rel.nchild; k++)
        if (sg->pragma_var == rel.child[k])
            sg->pragma_var = rel.parent;
    return TT_OK;
}

static tt_status do_reorder(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)))
        return r;
    tt_stage *sg = &c->st->stages.data[p->stage];
    if (p->nids != sg->niters)
        return illegal(c, "reorder lists %d iterators, but stage '%s' has %d", p->nids,
                       stage_name(c->st, p->stage), sg->niters);
    bool seen[TT_MAX_ITERS] = {false};
    for (int k = 0; k < p->nids; k++) {
        if ((r = check_iter(c, p->stage, p->ids[k])))
            return r;
        if (seen[p->ids[k]])
            return illegal(c, "iterator %d appears twice in the new order", p->ids[k]);
        seen[p->ids[k]] = true;
    }
    tt_iter tmp[TT_MAX_ITERS];
    for (int k = 0; k < p->nids; k++)
        tmp[k] = sg->iters[p->ids[k]];
    memcpy(sg->iters, tmp, (size_t)p->nids * sizeof(tt_iter));
    sg->transformed = true;
    return TT_OK;
}

static tt_status do_annotate(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    tt_stage *sg = &c->st->stages.data[p->stage];
    tt_iter *it = &sg->iters[p->iter];
    if ((unsigned)p->ann >= TT_ANN_COUNT)
        return illegal(c, "unknown annotation code %d", (int)p->ann);
    if (p->ann == TT_ANN_TENSORIZE)
        return tt_err(c->err, TT_ERR_UNSUPPORTED, "step %d (AN): tensorize is not supported",
                      c->index);
    if (p->ann != TT_ANN_NONE && it->ann != TT_ANN_NONE && it->ann != p->ann)
        return illegal(c, "iterator '%s' is already annotated as %s", it->name,
                       tt_ann_name(it->ann));
    if (it->kind == TT_ITER_REDUCE &&
        (p->ann == TT_ANN_PARALLEL || p->ann == TT_ANN_VECTORIZE || p->ann == TT_ANN_VTHREAD ||
         p->ann == TT_ANN_BLOCK_X || p->ann == TT_ANN_BLOCK_Y || p->ann == TT_ANN_BLOCK_Z))
        return illegal(c, "reduce iterator '%s' cannot be annotated %s (the reduction would race)",
                       it->name, tt_ann_name(p->ann));
    if (p->ann == TT_ANN_VECTORIZE && p->iter != sg->niters - 1)
        return illegal(c, "vectorize needs the innermost iterator of '%s', not '%s'",
                       stage_name(c->st, p->stage), it->name);
    if (p->ann == TT_ANN_PARALLEL || tt_ann_is_gpu_bind(p->ann))
        for (int k = 0; k < sg->niters; k++)
            if (k != p->iter && sg->iters[k].ann == p->ann && p->ann != TT_ANN_VTHREAD &&
                p->ann != TT_ANN_PARALLEL)
                return illegal(c, "'%s' is already bound to %s", sg->iters[k].name,
                               tt_ann_name(p->ann));
    it->ann = p->ann;
    sg->transformed = true;
    return TT_OK;
}

static tt_status do_pragma(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    tt_stage *sg = &c->st->stages.data[p->stage];
    if (strcmp(p->pragma, "double_buffer") == 0) {
        /* TVM's double_buffer_scope: only a shared tile has a fill that can run ahead */
        if (strcmp(sg->scope, "shared") != 0)
            return illegal(c, "double_buffer needs a shared stage, and '%s' is %s",
                           stage_name(c->st, p->stage), sg->scope[0] ? sg->scope : "global");
        sg->double_buffer = true;
        return TT_OK;
    }
    const char *key = "auto_unroll_max_step$";
    if (strncmp(p->pragma, key, strlen(key)) != 0)
        return illegal(c, "unknown pragma '%s' (supported: auto_unroll_max_step$N, double_buffer)",
                       p->pragma);
    char *end;
    long v = strtol(p->pragma + strlen(key), &end, 10);
    if (*end || end == p->pragma + strlen(key) || v < 0 || v > 1 << 20)
        return illegal(c, "auto_unroll_max_step needs a value in 0 .. 1048576, got '%s'",
                       p->pragma + strlen(key));
    sg->auto_unroll_max_step = (int)v;
    sg->pragma_var = sg->iters[p->iter].var;
    return TT_OK;
}

static tt_status do_storage_align(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)))
        return r;
    tt_stage *sg = &c->st->stages.data[p->stage];
    const tt_op *op = &c->st->dag.ops.data[sg->op];
    if (is_output(c->st, sg->op))
        return illegal(c, "'%s' is an output; its layout is fixed", op->name);
    if (p->iter < 0 || p->iter >= op->ndim - 1)
        return illegal(c, "axis %d of '%s' cannot be aligned (rank %d; the last axis has stride 1)",
                       p->iter, op->name, op->ndim);
    if (p->factor <= 0 || p->offset < 0 || p->offset >= p->factor)
        return illegal(c, "storage_align needs factor > 0 and 0 <= offset < factor (got %d, %d)",
                       p->factor, p->offset);
    if (sg->nalign >= TT_MAX_DIMS)
        return illegal(c, "too many storage_align steps on '%s'", op->name);
    for (int k = 0; k < sg->nalign; k++)
        if (sg->align[k].axis == p->iter) {
            sg->align[k].factor = p->factor;
            sg->align[k].offset = p->offset;
            return TT_OK;
        }
    sg->align[sg->nalign].axis = p->iter;
    sg->align[sg->nalign].factor = p->factor;
    sg->align[sg->nalign++].offset = p->offset;
    return TT_OK;
}

static tt_status do_compute_at(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_stage(c, p->target_stage, false)) ||
        (r = check_iter(c, p->target_stage, p->target_iter)))
        return r;
    tt_state *st = c->st;
    tt_stage *sg = &st->stages.data[p->stage], *tg = &st->stages.data[p->target_stage];
    if (p->stage == p->target_stage)
        return illegal(c, "stage '%s' cannot be computed at itself", stage_name(st, p->stage));
    if (is_output(st, sg->op))
        return illegal(c, "'%s' is an output and cannot be computed at another stage",
                       stage_name(st, p->stage));
    if (!reads_through_inline(st, tg->op, sg->op, 0) && !reader_inside(st, tg->op, sg->op))
        return illegal(
            c,
            "neither '%s' nor a stage computed inside it reads '%s'; compute_at needs a consumer",
            stage_name(st, p->target_stage), stage_name(st, p->stage));
    sg->at = TT_AT_ITER;
    sg->at_op = tg->op;
    sg->at_var = tg->iters[p->target_iter].var;
    return TT_OK;
}

static tt_status do_compute_inline(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)))
        return r;
    tt_stage *sg = &c->st->stages.data[p->stage];
    const tt_op *op = &c->st->dag.ops.data[sg->op];
    if (op->nreduce > 0)
        return illegal(c, "'%s' is a reduction and cannot be inlined", op->name);
    if (is_output(c->st, sg->op))
        return illegal(c, "'%s' is an output and cannot be inlined", op->name);
    if (has_attached(c->st, sg->op))
        return illegal(c, "other stages are computed at '%s'; it cannot be inlined", op->name);
    sg->at = TT_AT_INLINE;
    return TT_OK;
}

static tt_status do_compute_root(apply_ctx *c)
{
    tt_status r = check_stage(c, c->step->stage, false);
    if (r)
        return r;
    c->st->stages.data[c->step->stage].at = TT_AT_ROOT;
    return TT_OK;
}

static tt_status do_layout_rewrite(apply_ctx *c)
{
    tt_status r = check_stage(c, c->step->stage, true);
    if (r)
        return r;
    tt_stage *sg = &c->st->stages.data[c->step->stage];
    const tt_op *op = &c->st->dag.ops.data[sg->op];
    if (!op->is_placeholder || !(op->attrs & TT_OP_ATTR_CONSTANT))
        return illegal(c,
                       "stage %d ('%s') is not a constant input: only weights declared "
                       "'const' may be stored in another layout",
                       c->step->stage, op->name);
    if (sg->layout_rewrite)
        return illegal(c, "the layout of '%s' is already rewritten", op->name);
    sg->layout_rewrite = true;
    return TT_OK;
}

static tt_status check_scope(apply_ctx *c, const char *scope)
{
    if (strcmp(scope, "global") && strcmp(scope, "shared") && strcmp(scope, "local"))
        return illegal(c, "unknown scope '%s' (global, shared, local)", scope);
    return TT_OK;
}

/* Adds op `name` with the shape of `like` and fresh axes; returns its id or -1. */
static int add_copy_op(tt_state *st, int like, const char *name)
{
    tt_op src = st->dag.ops.data[like];
    const char *names[TT_MAX_DIMS];
    char buf[TT_MAX_DIMS][32];
    for (int i = 0; i < src.ndim; i++) {
        if (src.is_placeholder)
            snprintf(buf[i], sizeof(buf[i]), "ax%d", i);
        else
            snprintf(buf[i], sizeof(buf[i]), "%s", tt_var_name(&st->dag.pool, src.axis[i]));
        names[i] = buf[i];
    }
    return tt_dag_compute(&st->dag, name, src.dtype, src.ndim, src.shape, names);
}

/* Rewrites reads of `from` into reads of `to` in op `reader`'s body. */
static tt_status redirect_reads(tt_state *st, int reader, int from, int to)
{
    size_t n = st->dag.ops.len;
    uint32_t *map = malloc(n * sizeof(uint32_t));
    if (!map)
        return TT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        map[i] = (uint32_t)i;
    map[from] = (uint32_t)to;
    tt_eid body =
        tt_expr_copy(&st->dag.pool, &st->dag.pool, st->dag.ops.data[reader].body, NULL, map);
    free(map);
    if (!body)
        return TT_ERR_NOMEM;
    st->dag.ops.data[reader].body = body;
    return TT_OK;
}

static tt_eid read_all_axes(tt_state *st, int reader_op, int src_op)
{
    const tt_op *r = &st->dag.ops.data[reader_op];
    tt_eid idx[TT_MAX_DIMS];
    int n = r->ndim;
    uint32_t axes[TT_MAX_DIMS];
    memcpy(axes, r->axis, sizeof(axes));
    for (int i = 0; i < n; i++)
        idx[i] = tt_expr_var(&st->dag.pool, axes[i]);
    return tt_dag_read(&st->dag, src_op, n, idx);
}

static tt_status do_cache_read(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, true)) || (r = check_scope(c, p->scope)))
        return r;
    tt_state *st = c->st;
    int op = st->stages.data[p->stage].op;
    if (p->nids < 1)
        return illegal(c, "cache_read needs at least one reader stage");
    int reader_ops[TT_MAX_ITERS];
    for (int k = 0; k < p->nids; k++) {
        if ((r = check_stage(c, p->ids[k], false)))
            return r;
        reader_ops[k] = st->stages.data[p->ids[k]].op;
        if (!op_reads(&st->dag, reader_ops[k], op))
            return illegal(c, "stage %d ('%s') does not read '%s'", p->ids[k],
                           stage_name(st, p->ids[k]), stage_name(st, p->stage));
    }
    if (st->stages.len >= TT_MAX_STAGES)
        return illegal(c, "more than %d stages", TT_MAX_STAGES);
    char name[96];
    snprintf(name, sizeof(name), "%s.%s", st->dag.ops.data[op].name, p->scope);
    int nop = add_copy_op(st, op, name);
    if (nop < 0)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    tt_dag_set_body(&st->dag, nop, TT_REDUCE_NONE, read_all_axes(st, nop, op));
    for (int k = 0; k < p->nids; k++)
        if (redirect_reads(st, reader_ops[k], op, nop))
            return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    if (st->dag.pool.oom || stage_insert(st, p->stage + 1, nop))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    strcpy(st->stages.data[p->stage + 1].scope, p->scope);
    return TT_OK;
}

static tt_status do_cache_write(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_scope(c, p->scope)))
        return r;
    tt_state *st = c->st;
    tt_stage *sg = &st->stages.data[p->stage];
    int op = sg->op;
    if (sg->transformed)
        return illegal(
            c, "'%s' was already split, fused, reordered or annotated; cache_write must come first",
            stage_name(st, p->stage));
    if (has_attached(st, op))
        return illegal(c, "other stages are computed at '%s'; cache_write must come first",
                       stage_name(st, p->stage));
    if (st->stages.len >= TT_MAX_STAGES)
        return illegal(c, "more than %d stages", TT_MAX_STAGES);
    char name[96];
    snprintf(name, sizeof(name), "%s.%s", st->dag.ops.data[op].name, p->scope);
    int nop = add_copy_op(st, op, name);
    if (nop < 0)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    /* The cache op takes the whole definition (fresh variables); the original copies it out. */
    tt_op orig = st->dag.ops.data[op];
    size_t nv = st->dag.pool.vars.len;
    tt_eid *subst = calloc(nv + TT_MAX_REDUCE, sizeof(tt_eid));
    if (!subst)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < orig.ndim; i++)
        subst[orig.axis[i]] = tt_expr_var(&st->dag.pool, st->dag.ops.data[nop].axis[i]);
    for (int i = 0; i < orig.nreduce; i++) {
        uint32_t v = tt_dag_reduce_axis(&st->dag, nop, tt_var_name(&st->dag.pool, orig.raxis[i]),
                                        orig.rextent[i]);
        subst[orig.raxis[i]] = v ? tt_expr_var(&st->dag.pool, v) : 0;
    }
    tt_eid body = tt_expr_substitute(&st->dag.pool, orig.body, subst, nv);
    free(subst);
    tt_dag_set_body(&st->dag, nop, orig.reduce, body);
    tt_op *o = &st->dag.ops.data[op];
    o->nreduce = 0;
    tt_dag_set_body(&st->dag, op, TT_REDUCE_NONE, read_all_axes(st, op, nop));
    if (st->dag.pool.oom || !body || stage_insert(st, p->stage, nop))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    strcpy(st->stages.data[p->stage].scope, p->scope);
    stage_reset(st, &st->stages.data[p->stage + 1]);
    return TT_OK;
}

/* Expressions of a stage's root variables in terms of its current iterators, using the
 * iterators' static extents. subst must have room for every variable. */
static void root_exprs(tt_state *st, const tt_stage *sg, tt_eid *subst, int64_t *ext)
{
    tt_expr_pool *p = &st->dag.pool;
    /* Extents of every variable, forward from the op's axes through the relations. */
    const tt_op *op = &st->dag.ops.data[sg->op];
    for (int i = 0; i < op->ndim; i++)
        ext[op->axis[i]] = op->shape[i];
    for (int i = 0; i < op->nreduce; i++)
        ext[op->raxis[i]] = op->rextent[i];
    for (size_t r = 0; r < sg->rels.len; r++) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_FUSE) {
            ext[rel->parent] = 1;
            for (int k = 0; k < rel->nchild; k++)
                ext[rel->parent] *= ext[rel->child[k]];
            continue;
        }
        int64_t prod = 1;
        for (int k = 0; k < rel->nlen; k++)
            prod *= rel->lengths[k];
        int64_t rest = (ext[rel->parent] + prod - 1) / prod;
        for (int k = 0; k < rel->nchild; k++)
            ext[rel->child[k]] = rel->inner_to_outer
                                     ? (k == 0 ? rest : rel->lengths[k - 1])
                                     : (k == rel->nchild - 1 ? rest : rel->lengths[k]);
    }
    for (size_t r = sg->rels.len; r-- > 0;) {
        const tt_relation *rel = &sg->rels.data[r];
        if (rel->kind == TT_REL_SPLIT) {
            tt_eid acc = 0;
            for (int k = 0; k < rel->nchild; k++) {
                tt_eid v =
                    subst[rel->child[k]] ? subst[rel->child[k]] : tt_expr_var(p, rel->child[k]);
                acc = acc ? tt_add(p, tt_mul(p, acc, tt_expr_int(p, ext[rel->child[k]])), v) : v;
            }
            subst[rel->parent] = acc;
        } else {
            tt_eid f = subst[rel->parent] ? subst[rel->parent] : tt_expr_var(p, rel->parent);
            int64_t inner = 1;
            for (int k = rel->nchild - 1; k >= 0; k--) {
                tt_eid v = inner == 1 ? f : tt_div(p, f, tt_expr_int(p, inner));
                if (k > 0)
                    v = tt_mod(p, v, tt_expr_int(p, ext[rel->child[k]]));
                subst[rel->child[k]] = v;
                inner *= ext[rel->child[k]];
            }
        }
    }
}

static tt_status do_rfactor(apply_ctx *c)
{
    const tt_step *p = c->step;
    tt_status r;
    if ((r = check_stage(c, p->stage, false)) || (r = check_iter(c, p->stage, p->iter)))
        return r;
    tt_state *st = c->st;
    tt_stage sg = st->stages.data[p->stage];
    int op = sg.op;
    tt_op orig = st->dag.ops.data[op];
    if (sg.iters[p->iter].kind != TT_ITER_REDUCE)
        return illegal(c, "rfactor needs a reduce iterator; '%s' is spatial",
                       sg.iters[p->iter].name);
    if (p->factor_iter < 0 || p->factor_iter > orig.ndim)
        return illegal(c, "factor_iter %d is out of range 0..%d", p->factor_iter, orig.ndim);
    if (orig.ndim >= TT_MAX_DIMS)
        return illegal(c, "'%s' has rank %d; the rfactor tensor would exceed %d dimensions",
                       orig.name, orig.ndim, TT_MAX_DIMS);
    if (has_attached(st, op))
        return illegal(c, "other stages are computed at '%s'; rfactor must come first", orig.name);
    if (st->stages.len >= TT_MAX_STAGES)
        return illegal(c, "more than %d stages", TT_MAX_STAGES);
    /* The rfactor op: spatial axes + the factored iterator; reduce axes = the other reduce
     * iterators of the stage. */
    char name[96];
    snprintf(name, sizeof(name), "%s.rf", orig.name);
    int64_t shape[TT_MAX_DIMS];
    const char *names[TT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i <= orig.ndim; i++) {
        if (i == p->factor_iter) {
            shape[nd] = sg.iters[p->iter].extent;
            names[nd++] = sg.iters[p->iter].name;
        }
        if (i < orig.ndim) {
            shape[nd] = orig.shape[i];
            names[nd++] = tt_var_name(&st->dag.pool, orig.axis[i]);
        }
    }
    int rf = tt_dag_compute(&st->dag, name, orig.dtype, nd, shape, names);
    if (rf < 0)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    size_t nv = st->dag.pool.vars.len + TT_MAX_ITERS + 4;
    tt_eid *subst = calloc(nv, sizeof(tt_eid));
    if (!subst)
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    /* Leaf variables -> variables of the rfactor op. */
    for (int i = 0, d = 0; i <= orig.ndim; i++) {
        if (i == p->factor_iter)
            subst[sg.iters[p->iter].var] =
                tt_expr_var(&st->dag.pool, st->dag.ops.data[rf].axis[d++]);
        if (i < orig.ndim)
            subst[orig.axis[i]] = tt_expr_var(&st->dag.pool, st->dag.ops.data[rf].axis[d++]);
    }
    for (int i = 0; i < sg.niters; i++) {
        const tt_iter *it = &sg.iters[i];
        if (it->kind != TT_ITER_REDUCE || i == p->iter)
            continue;
        uint32_t v = tt_dag_reduce_axis(&st->dag, rf, it->name, it->extent);
        if (!v) {
            free(subst);
            return illegal(c, "too many reduce iterators for rfactor (at most %d)", TT_MAX_REDUCE);
        }
        subst[it->var] = tt_expr_var(&st->dag.pool, v);
    }
    /* Root reduce variables in terms of the leaves, then in terms of the new op's variables. */
    tt_eid *roots = calloc(nv, sizeof(tt_eid));
    int64_t *ext = calloc(nv, sizeof(int64_t));
    if (!roots || !ext) {
        free(subst);
        free(roots);
        free(ext);
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    }
    root_exprs(st, &sg, roots, ext);
    tt_eid guard = 0;
    /* Variables derived from reduce axes: only their splits matter here (the rfactor op's spatial
     * axes are the original ones, so spatial splits and their leaves do not carry over). */
    bool *reduce_var = calloc(nv, sizeof(bool));
    if (!reduce_var) {
        free(subst);
        free(roots);
        free(ext);
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < orig.nreduce; i++)
        reduce_var[orig.raxis[i]] = true;
    for (size_t ri = 0; ri < sg.rels.len; ri++) {
        const tt_relation *rel = &sg.rels.data[ri];
        for (int k = 0; k < rel->nchild; k++) {
            if (rel->kind == TT_REL_SPLIT && reduce_var[rel->parent])
                reduce_var[rel->child[k]] = true;
            if (rel->kind == TT_REL_FUSE && reduce_var[rel->child[k]])
                reduce_var[rel->parent] = true;
        }
    }
    /* Split parts that over-cover their parent would revisit reduction points: guard every
     * such parent (the roots are guarded below). */
    for (size_t ri = 0; ri < sg.rels.len; ri++) {
        const tt_relation *rel = &sg.rels.data[ri];
        int64_t prod = 1;
        if (rel->kind != TT_REL_SPLIT || !reduce_var[rel->parent])
            continue;
        for (int k = 0; k < rel->nchild; k++)
            prod *= ext[rel->child[k]];
        if (prod <= ext[rel->parent] || !roots[rel->parent])
            continue;
        tt_eid v = tt_expr_substitute(&st->dag.pool, roots[rel->parent], subst, nv);
        tt_eid cond = tt_expr_binary(&st->dag.pool, TT_EXPR_LT, v,
                                     tt_expr_int(&st->dag.pool, ext[rel->parent]));
        guard = guard ? tt_expr_binary(&st->dag.pool, TT_EXPR_AND, guard, cond) : cond;
    }
    free(reduce_var);
    free(ext);
    for (int i = 0; i < orig.nreduce; i++) {
        tt_eid e =
            roots[orig.raxis[i]] ? roots[orig.raxis[i]] : tt_expr_var(&st->dag.pool, orig.raxis[i]);
        e = tt_expr_substitute(&st->dag.pool, e, subst, nv);
        roots[orig.raxis[i]] = e;
        /* A split that does not divide the extent would over-iterate: guard it. */
        int64_t lo, hi;
        if (!tt_expr_const_bound(&st->dag.pool, e, NULL, &lo, &hi) || hi >= orig.rextent[i]) {
            tt_eid cond = tt_expr_binary(&st->dag.pool, TT_EXPR_LT, e,
                                         tt_expr_int(&st->dag.pool, orig.rextent[i]));
            guard = guard ? tt_expr_binary(&st->dag.pool, TT_EXPR_AND, guard, cond) : cond;
        }
    }
    tt_eid *final = calloc(nv, sizeof(tt_eid));
    if (!final) {
        free(subst);
        free(roots);
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < orig.ndim; i++)
        final[orig.axis[i]] = subst[orig.axis[i]];
    for (int i = 0; i < orig.nreduce; i++)
        final[orig.raxis[i]] = roots[orig.raxis[i]];
    tt_eid body = tt_expr_substitute(&st->dag.pool, orig.body, final, nv);
    free(subst);
    free(roots);
    free(final);
    if (guard && body) {
        tt_value id = tt_reduce_identity(orig.reduce, orig.dtype);
        tt_eid ide = tt_dtype_is_float(orig.dtype) ? tt_expr_float(&st->dag.pool, orig.dtype, id.f)
                                                   : tt_expr_int(&st->dag.pool, id.i);
        body = tt_expr_select(&st->dag.pool, guard, body, ide);
    }
    tt_dag_set_body(&st->dag, rf, orig.reduce, body);
    /* The original op now reduces the rfactor tensor over the factored axis. */
    tt_op *o = &st->dag.ops.data[op];
    o->nreduce = 0;
    uint32_t k = tt_dag_reduce_axis(&st->dag, op, sg.iters[p->iter].name, sg.iters[p->iter].extent);
    tt_eid idx[TT_MAX_DIMS];
    for (int i = 0, d = 0; i <= orig.ndim; i++) {
        if (i == p->factor_iter)
            idx[d++] = tt_expr_var(&st->dag.pool, k);
        if (i < orig.ndim)
            idx[d++] = tt_expr_var(&st->dag.pool, orig.axis[i]);
    }
    tt_dag_set_body(&st->dag, op, orig.reduce, tt_dag_read(&st->dag, rf, nd, idx));
    if (st->dag.pool.oom || !body || !k || stage_insert(st, p->stage, rf))
        return tt_err(c->err, TT_ERR_NOMEM, "out of memory");
    stage_reset(st, &st->stages.data[p->stage + 1]);
    return TT_OK;
}

/* Applies a step to `st` itself; on failure `st` may be half-changed. */
static tt_status apply_in_place(tt_state *st, const tt_step *step, tt_errbuf *err)
{
    apply_ctx c = {st, step, (int)st->steps.len, err};
    tt_status r;
    switch (step->kind) {
    case TT_STEP_SPLIT: r = do_split(&c); break;
    case TT_STEP_FOLLOW_SPLIT: r = do_follow_split(&c); break;
    case TT_STEP_FOLLOW_FUSED_SPLIT: r = do_follow_fused_split(&c); break;
    case TT_STEP_FUSE: r = do_fuse(&c); break;
    case TT_STEP_REORDER: r = do_reorder(&c); break;
    case TT_STEP_ANNOTATE: r = do_annotate(&c); break;
    case TT_STEP_PRAGMA: r = do_pragma(&c); break;
    case TT_STEP_STORAGE_ALIGN: r = do_storage_align(&c); break;
    case TT_STEP_COMPUTE_AT: r = do_compute_at(&c); break;
    case TT_STEP_COMPUTE_INLINE: r = do_compute_inline(&c); break;
    case TT_STEP_COMPUTE_ROOT: r = do_compute_root(&c); break;
    case TT_STEP_CACHE_READ: r = do_cache_read(&c); break;
    case TT_STEP_CACHE_WRITE: r = do_cache_write(&c); break;
    case TT_STEP_RFACTOR: r = do_rfactor(&c); break;
    case TT_STEP_LAYOUT_REWRITE: r = do_layout_rewrite(&c); break;
    default:
        r = tt_err(err, TT_ERR_ILLEGAL_STEP, "step %d: unknown step kind %d", c.index,
                   (int)step->kind);
    }
    if (!r && TT_VEC_PUSH(&st->steps, *step))
        r = tt_err(err, TT_ERR_NOMEM, "out of memory");
    return r;
}

tt_status tt_state_apply(tt_state *st, const tt_step *step, tt_errbuf *err)
{
    /* Annotations, pragmas and storage_align check everything before they change a field of one
     * stage, so they apply in place once the step has room: a GPU sample's binding is mostly
     * annotations, and copying the state (its DAG's expressions) for each was 8% of a search
     * round. */
    if (step->kind == TT_STEP_ANNOTATE || step->kind == TT_STEP_PRAGMA ||
        step->kind == TT_STEP_STORAGE_ALIGN) {
        if (TT_VEC_RESERVE(&st->steps, 1))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        return apply_in_place(st, step, err);
    }
    /* Other steps that fail leave the state as it was: work on a copy, swap on success. */
    tt_state *work;
    if (tt_state_clone(st, &work))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status r = apply_in_place(work, step, err);
    if (r) {
        tt_state_free(work);
        return r;
    }
    /* Swap contents so the caller's pointer stays valid. */
    tt_state tmp = *st;
    *st = *work;
    *work = tmp;
    tt_state_free(work);
    return TT_OK;
}

tt_status tt_state_replay(const tt_dag *dag, const tt_step *steps, size_t n, tt_state **out,
                          tt_errbuf *err)
{
    tt_state *st;
    tt_status r = tt_state_create(dag, &st, err);
    if (r)
        return r;
    /* A failed replay discards the state, so no step needs the copy that apply makes. */
    for (size_t i = 0; i < n; i++)
        if ((r = apply_in_place(st, &steps[i], err))) {
            tt_state_free(st);
            return r;
        }
    *out = st;
    return TT_OK;
}

/* ---- convenience builders ---- */

static tt_step step_of(tt_step_kind k, int stage)
{
    tt_step s;
    memset(&s, 0, sizeof(s));
    s.kind = k;
    s.stage = stage;
    return s;
}

tt_status tt_sched_split(tt_state *st, int stage, int iter, const int64_t *lengths, int n,
                         bool inner_to_outer, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_SPLIT, stage);
    s.iter = iter;
    if (n < 0 || n >= TT_MAX_SPLIT)
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "split: %d lengths (at most %d)", n,
                      TT_MAX_SPLIT - 1);
    s.nlen = n;
    memcpy(s.lengths, lengths, (size_t)n * sizeof(int64_t));
    s.inner_to_outer = inner_to_outer;
    if (stage >= 0 && (size_t)stage < st->stages.len && iter >= 0 &&
        iter < st->stages.data[stage].niters)
        s.extent = st->stages.data[stage].iters[iter].extent;
    return tt_state_apply(st, &s, err);
}

static tt_status ids_step(tt_state *st, tt_step_kind k, int stage, const int *ids, int n,
                          tt_errbuf *err)
{
    tt_step s = step_of(k, stage);
    if (n < 0 || n > TT_MAX_ITERS)
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "%s: %d iterators (at most %d)", tt_step_code(k), n,
                      TT_MAX_ITERS);
    s.nids = n;
    memcpy(s.ids, ids, (size_t)n * sizeof(int));
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_fuse(tt_state *st, int stage, const int *iters, int n, tt_errbuf *err)
{
    return ids_step(st, TT_STEP_FUSE, stage, iters, n, err);
}

tt_status tt_sched_reorder(tt_state *st, int stage, const int *order, int n, tt_errbuf *err)
{
    return ids_step(st, TT_STEP_REORDER, stage, order, n, err);
}

tt_status tt_sched_annotate(tt_state *st, int stage, int iter, tt_ann ann, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_ANNOTATE, stage);
    s.iter = iter;
    s.ann = ann;
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_compute_at(tt_state *st, int stage, int target_stage, int target_iter,
                              tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_COMPUTE_AT, stage);
    s.target_stage = target_stage;
    s.target_iter = target_iter;
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_compute_inline(tt_state *st, int stage, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_COMPUTE_INLINE, stage);
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_layout_rewrite(tt_state *st, int stage, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_LAYOUT_REWRITE, stage);
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_compute_root(tt_state *st, int stage, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_COMPUTE_ROOT, stage);
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_cache_read(tt_state *st, int stage, const char *scope, const int *readers, int n,
                              tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_CACHE_READ, stage);
    snprintf(s.scope, sizeof(s.scope), "%s", scope);
    if (n < 0 || n > TT_MAX_ITERS)
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "cache_read: %d readers", n);
    s.nids = n;
    memcpy(s.ids, readers, (size_t)n * sizeof(int));
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_cache_write(tt_state *st, int stage, const char *scope, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_CACHE_WRITE, stage);
    snprintf(s.scope, sizeof(s.scope), "%s", scope);
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_rfactor(tt_state *st, int stage, int iter, int factor_iter, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_RFACTOR, stage);
    s.iter = iter;
    s.factor_iter = factor_iter;
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_pragma(tt_state *st, int stage, int iter, const char *pragma, tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_PRAGMA, stage);
    s.iter = iter;
    snprintf(s.pragma, sizeof(s.pragma), "%s", pragma);
    return tt_state_apply(st, &s, err);
}

tt_status tt_sched_storage_align(tt_state *st, int stage, int iter, int factor, int offset,
                                 tt_errbuf *err)
{
    tt_step s = step_of(TT_STEP_STORAGE_ALIGN, stage);
    s.iter = iter;
    s.factor = factor;
    s.offset = offset;
    return tt_state_apply(st, &s, err);
}

char *tt_state_print(const tt_state *st)
{
    tt_strbuf sb = {0};
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_stage *sg = &st->stages.data[i];
        const tt_op *op = &st->dag.ops.data[sg->op];
        tt_strbuf_printf(&sb, "stage %zu: %s", i, op->name);
        if (op->is_placeholder) {
            tt_strbuf_append(&sb, " (placeholder)\n");
            continue;
        }
        if (sg->at == TT_AT_INLINE)
            tt_strbuf_append(&sb, " (inlined)");
        else if (sg->at == TT_AT_ITER)
            tt_strbuf_printf(&sb, " (at %s.%s)", st->dag.ops.data[sg->at_op].name,
                             tt_var_name(&st->dag.pool, sg->at_var));
        if (strcmp(sg->scope, "global"))
            tt_strbuf_printf(&sb, " [%s%s]", sg->scope,
                             sg->double_buffer ? ", double-buffered" : "");
        tt_strbuf_append(&sb, "\n");
        for (int k = 0; k < sg->niters; k++) {
            const tt_iter *it = &sg->iters[k];
            tt_strbuf_printf(&sb, "  %d: %s (%lld%s%s%s)\n", k, it->name, (long long)it->extent,
                             it->kind == TT_ITER_REDUCE ? ", reduce" : "", it->ann ? ", " : "",
                             it->ann ? tt_ann_name(it->ann) : "");
        }
    }
    return tt_strbuf_take(&sb);
}

tt_status tt_sched_fuse_annotate(tt_state *st, int stage, int first, int n, tt_ann ann,
                                 tt_errbuf *err)
{
    int ids[TT_MAX_ITERS];
    if (n < 1 || n > TT_MAX_ITERS)
        return tt_err(err, TT_ERR_INVALID_ARG, "fuse of %d iterators", n);
    for (int k = 0; k < n; k++)
        ids[k] = first + k;
    tt_status r = n > 1 ? tt_sched_fuse(st, stage, ids, n, err) : TT_OK;
    return r || ann == TT_ANN_NONE ? r : tt_sched_annotate(st, stage, first, ann, err);
}
