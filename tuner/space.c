#include "space_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { K_CACHE_WRITE, K_PARALLEL, K_VECTORIZE, K_UNROLL }; /* after the tile knobs */

void tt__space_add_knob(tt_space *s, const char *name, const int64_t *c, int n)
{
    tt_knob *k = &s->knobs[s->nknobs++];
    snprintf(k->name, sizeof(k->name), "%.40s", name);
    k->n = n > TT_SPACE_MAX_CHOICES ? TT_SPACE_MAX_CHOICES : n;
    memcpy(k->choice, c, (size_t)k->n * sizeof(int64_t));
}

/* Divisors of `extent` up to `max`, ascending (tile sizes that divide evenly). */
static int divisors(int64_t extent, int64_t max, int64_t *out)
{
    int n = 0;
    for (int64_t d = 1; d <= extent && d <= max && n < TT_SPACE_MAX_CHOICES; d++)
        if (extent % d == 0)
            out[n++] = d;
    return n;
}

bool tt__space_inlinable(const tt_dag *d, int op, int main_op)
{
    const tt_op *o = &d->ops.data[op];
    return op != main_op && !o->is_placeholder && o->nreduce == 0 && tt_dag_has_readers(d, op);
}

tt_status tt__space_pick_main(tt_space *s, const tt_dag *dag, tt_errbuf *err)
{
    memset(s, 0, sizeof(*s));
    s->dag = dag;
    s->main_stage = -1;
    /* The main stage does the most work: the reduction with the largest iteration count. */
    double most = 0;
    for (size_t i = 0; i < dag->ops.len; i++) {
        const tt_op *op = &dag->ops.data[i];
        if (op->is_placeholder || op->nreduce == 0)
            continue;
        double work = (double)tt_op_numel(op);
        for (int k = 0; k < op->nreduce; k++)
            work *= (double)op->rextent[k];
        if (work >= most) {
            most = work;
            s->main_stage = (int)i;
        }
    }
    if (s->main_stage < 0)
        for (size_t i = 0; i < dag->ops.len; i++)
            if (!dag->ops.data[i].is_placeholder)
                s->main_stage = (int)i;
    if (s->main_stage < 0)
        return tt_err(err, TT_ERR_BAD_WORKLOAD, "the workload computes nothing");
    const tt_op *m = &dag->ops.data[s->main_stage];
    s->nspatial = m->ndim;
    s->nreduce = m->nreduce;
    return TT_OK;
}

tt_status tt_space_init(tt_space *s, const tt_dag *dag, int cores, tt_errbuf *err)
{
    tt_status r = tt__space_pick_main(s, dag, err);
    if (r)
        return r;
    const tt_op *m = &dag->ops.data[s->main_stage];
    s->nspatial = m->ndim;
    s->nreduce = m->nreduce;
    if (m->ndim + 7 > TT_SPACE_MAX_KNOBS)
        return tt_err(err, TT_ERR_UNSUPPORTED, "op '%s' has too many axes for the tiling space",
                      m->name);
    int64_t c[TT_SPACE_MAX_CHOICES];
    for (int d = 0; d < m->ndim; d++) {
        char name[40];
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->axis[d]));
        tt__space_add_knob(s, name, c, divisors(m->shape[d], 64, c));
    }
    if (m->nreduce > 0) {
        char name[40];
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->raxis[m->nreduce - 1]));
        tt__space_add_knob(s, name, c, divisors(m->rextent[m->nreduce - 1], 64, c));
        int64_t cw[2] = {0, 1};
        tt__space_add_knob(s, "cache_write", cw, 2);
        /* Loop order inside a tile: spatial rows outside the inner reduction, or inside it. */
        int64_t order[2] = {0, 1};
        tt__space_add_knob(s, "reduce_inner_first", order, 2);
        /* Pack the inputs' tiles into local buffers at each step of the outer reduction. */
        int64_t pack[2] = {0, 1};
        tt__space_add_knob(s, "pack_inputs", pack, 2);
    } else {
        int64_t one[1] = {0};
        tt__space_add_knob(s, "tile_none", (int64_t[]){1}, 1);
        tt__space_add_knob(s, "cache_write", one, 1);
        tt__space_add_knob(s, "reduce_inner_first", one, 1);
        tt__space_add_knob(s, "pack_inputs", one, 1);
    }
    int64_t par[2] = {1, 0}; /* parallel first: it is what users want on a multi-core CPU */
    tt__space_add_knob(s, "parallel", par, cores > 1 ? 2 : 1);
    int64_t vec[2] = {1, 0};
    tt__space_add_knob(s, "vectorize", vec, 2);
    int64_t unroll[4] = {0, 16, 64, 512};
    tt__space_add_knob(s, "auto_unroll_max_step", unroll, 4);
    s->size = 1;
    for (int k = 0; k < s->nknobs; k++)
        s->size *= (uint64_t)s->knobs[k].n;
    return TT_OK;
}

void tt_space_decode(const tt_space *s, uint64_t index, int *pos)
{
    for (int k = 0; k < s->nknobs; k++) {
        pos[k] = (int)(index % (uint64_t)s->knobs[k].n);
        index /= (uint64_t)s->knobs[k].n;
    }
}

int tt_space_split_lengths(const tt_space *s, int k, int pos, int64_t *out)
{
    const tt_knob *kn = &s->knobs[k];
    int64_t v = kn->choice[pos];
    for (int i = kn->parts - 1; i >= 0; i--) {
        out[i] = v & 0xffff;
        v >>= 16;
    }
    return kn->parts;
}

double tt_space_knob_feature(const tt_space *s, int k, int pos)
{
    const tt_knob *kn = &s->knobs[k];
    if (!kn->parts)
        return log2(1.0 + (double)kn->choice[pos]);
    int64_t len[4];
    int n = tt_space_split_lengths(s, k, pos, len);
    double f = 0;
    for (int i = 0; i < n; i++)
        f = f * 8 + log2((double)len[i]);
    return f;
}

void tt_space_describe(const tt_space *s, uint64_t index, char *buf, size_t n)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, index, pos);
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < s->nknobs && len < n; k++) {
        if (s->knobs[k].n <= 1)
            continue;
        if (s->knobs[k].parts) {
            int64_t l[4];
            int np = tt_space_split_lengths(s, k, pos[k], l);
            len +=
                (size_t)snprintf(buf + len, n - len, "%s%s=[-1", len ? " " : "", s->knobs[k].name);
            for (int i = 0; i < np && len < n; i++)
                len += (size_t)snprintf(buf + len, n - len, ",%lld", (long long)l[i]);
            if (len < n)
                len += (size_t)snprintf(buf + len, n - len, "]");
            continue;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%lld", len ? " " : "", s->knobs[k].name,
                                (long long)s->knobs[k].choice[pos[k]]);
    }
}

/* Splits the spatial axes 0..n-1 (at iterator positions 0..n-1) by `tile` and orders the stage as
 * [outer spatial][mid][inner spatial but the last][tail][last inner spatial].  mid and tail index
 * the iterators that follow the spatial ones (the reduce iterators), counted from 0. */
static tt_status tile_stage(tt_state *st, int stage, int n, const int64_t *tile, const int *mid,
                            int nmid, const int *tail, int ntail, bool tail_first, tt_errbuf *err)
{
    /* Split from the last axis back, so earlier positions do not move. */
    for (int d = n - 1; d >= 0; d--) {
        tt_status r = tt_sched_split(st, stage, d, &tile[d], 1, true, err);
        if (r)
            return r;
    }
    int order[TT_MAX_ITERS], k = 0;
    for (int d = 0; d < n; d++)
        order[k++] = 2 * d;
    /* After the n splits the reduce iterators start at position 2n. */
    for (int i = 0; i < nmid; i++)
        order[k++] = 2 * n + mid[i];
    for (int i = 0; tail_first && i < ntail; i++)
        order[k++] = 2 * n + tail[i];
    for (int d = 0; d < n - 1; d++)
        order[k++] = 2 * d + 1;
    for (int i = 0; !tail_first && i < ntail; i++)
        order[k++] = 2 * n + tail[i];
    order[k++] = 2 * (n - 1) + 1;
    return tt_sched_reorder(st, stage, order, k, err);
}

/* Parallel outer loops (fused) and a vector innermost loop for a stage laid out by tile_stage. */
static tt_status finish_stage(tt_state *st, int stage, int nouter, bool parallel, bool vectorize,
                              int unroll, int64_t vector_extent, tt_errbuf *err)
{
    tt_status r;
    if (parallel && nouter > 0) {
        int ids[TT_MAX_ITERS];
        for (int i = 0; i < nouter; i++)
            ids[i] = i;
        if (nouter > 1 && (r = tt_sched_fuse(st, stage, ids, nouter, err)))
            return r;
        if (st->stages.data[stage].iters[0].extent > 1 &&
            (r = tt_sched_annotate(st, stage, 0, TT_ANN_PARALLEL, err)))
            return r;
    }
    const tt_stage *sg = &st->stages.data[stage];
    const tt_iter *last = &sg->iters[sg->niters - 1];
    /* Under compute_at the loop runs over the tile, not the static extent: the caller knows. */
    int64_t ext = vector_extent ? vector_extent : last->extent;
    if (vectorize && last->kind == TT_ITER_SPATIAL && ext > 1 && ext <= 64 &&
        last->ann == TT_ANN_NONE &&
        (r = tt_sched_annotate(st, stage, sg->niters - 1, TT_ANN_VECTORIZE, err)))
        return r;
    if (unroll > 0) {
        char pragma[48];
        snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d", unroll);
        if ((r = tt_sched_pragma(st, stage, 0, pragma, err)))
            return r;
    }
    return TT_OK;
}

tt_status tt_space_apply(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err)
{
    if (s->gpu)
        return tt__space_apply_gpu(s, index, out, err);
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, index % s->size, pos);
    int n = s->nspatial;
    int64_t tile[TT_MAX_DIMS];
    for (int d = 0; d < n; d++)
        tile[d] = s->knobs[d].choice[pos[d]];
    int64_t rtile = s->knobs[n].choice[pos[n]];
    bool cache_write = s->knobs[n + 1].choice[pos[n + 1]];
    bool reduce_first = s->knobs[n + 2].choice[pos[n + 2]];
    bool pack = s->knobs[n + 3].choice[pos[n + 3]];
    bool parallel = s->knobs[n + 4].choice[pos[n + 4]];
    bool vectorize = s->knobs[n + 5].choice[pos[n + 5]];
    int unroll = (int)s->knobs[n + 6].choice[pos[n + 6]];
    tt_state *st;
    tt_status r = tt_state_create(s->dag, &st, err);
    if (r)
        return r;
    /* Packing: a local copy of every input the main op reads directly (placed later). */
    int packs[TT_MAX_STAGES], npacks = 0;
    for (size_t i = 0; pack && s->nreduce > 0 && i < s->dag->ops.len && !r; i++) {
        if (!s->dag->ops.data[i].is_placeholder ||
            !tt_expr_reads_tensor(&s->dag->pool, s->dag->ops.data[s->main_stage].body, (uint32_t)i))
            continue;
        int reader = tt_state_stage_of_op(st, s->main_stage);
        r = tt_sched_cache_read(st, tt_state_stage_of_op(st, (int)i), "local", &reader, 1, err);
        packs[npacks++] = (int)st->dag.ops.len - 1;
    }
    /* Elementwise intermediates go into their readers. */
    for (size_t i = 0; i < s->dag->ops.len && !r; i++)
        if (tt__space_inlinable(s->dag, (int)i, s->main_stage))
            r = tt_sched_compute_inline(st, tt_state_stage_of_op(st, (int)i), err);
    int main = tt_state_stage_of_op(st, s->main_stage), nr = s->nreduce;
    /* The iterator of the outer reduction step in the stage that accumulates. */
    int pack_target = -1, pack_pos = 0;
    if (!r && nr > 0 && !cache_write) {
        /* Split the last reduce axis; order [S outer][R.. R_last.0][S inner..][R_last.1][S_last
         * inner]. */
        r = tt_sched_split(st, main, n + nr - 1, &rtile, 1, true, err);
        int mid[TT_MAX_REDUCE + 1], tail[1] = {nr};
        for (int i = 0; i < nr; i++)
            mid[i] = i;
        if (!r)
            r = tile_stage(st, main, n, tile, mid, nr, tail, 1, reduce_first, err);
        if (!r)
            r = finish_stage(st, main, n, parallel, vectorize, unroll, 0, err);
        pack_target = main;
        pack_pos = (parallel ? 1 : n) + nr - 1;
    } else if (!r && nr > 0) {
        /* cache_write: the accumulation happens in a tile-sized local buffer, copied out by the
         * original stage, which is tiled and computes the local stage at its last outer loop. */
        r = tt_sched_cache_write(st, main, "local", err);
        int orig = main + 1;
        if (!r)
            r = tile_stage(st, orig, n, tile, NULL, 0, NULL, 0, false, err);
        if (!r)
            r = tt_sched_compute_at(st, main, orig, n - 1, err);
        if (!r)
            r = finish_stage(st, orig, n, parallel, vectorize, 0, 0, err);
        /* The local stage: [R.. R_last.0][S all but the last][R_last.1][S last]. */
        if (!r)
            r = tt_sched_split(st, main, n + nr - 1, &rtile, 1, true, err);
        if (!r) {
            int order[TT_MAX_ITERS], k = 0;
            for (int i = 0; i < nr; i++)
                order[k++] = n + i;
            if (reduce_first)
                order[k++] = n + nr;
            for (int d = 0; d < n - 1; d++)
                order[k++] = d;
            if (!reduce_first)
                order[k++] = n + nr;
            order[k++] = n - 1;
            r = tt_sched_reorder(st, main, order, k, err);
        }
        if (!r)
            r = finish_stage(st, main, 0, false, vectorize, unroll, tile[n - 1], err);
        pack_target = main;
        pack_pos = nr - 1;
    } else if (!r) {
        r = tile_stage(st, main, n, tile, NULL, 0, NULL, 0, false, err);
        if (!r)
            r = finish_stage(st, main, n, parallel, vectorize, unroll, 0, err);
    }
    for (int i = 0; i < npacks && !r && pack_target >= 0; i++)
        r = tt_sched_compute_at(st, tt_state_stage_of_op(st, packs[i]), pack_target, pack_pos, err);
    /* Every other stage at the root: parallel outer loop, vector inner loop. */
    for (size_t i = 0; i < st->stages.len && !r; i++) {
        const tt_stage *sg = &st->stages.data[i];
        const tt_op *op = &st->dag.ops.data[sg->op];
        if (op->is_placeholder || sg->at != TT_AT_ROOT || sg->transformed || sg->niters == 0)
            continue;
        r = finish_stage(st, (int)i, 1, parallel && sg->iters[0].kind == TT_ITER_SPATIAL, vectorize,
                         0, 0, err);
    }
    if (r) {
        tt_state_free(st);
        return r;
    }
    *out = st;
    return TT_OK;
}
