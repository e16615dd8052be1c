/* The GPU template space (space.h, tt_space_init_gpu): TVM's direct GPU template generalised to
 * any workload's main stage, with a knob of ours: its shared tiles double-buffered or not. */
#include <stdio.h>
#include <string.h>

#include "sketch.h"
#include "space_int.h"

#define WARP 32

/* Every (vthread, thread, inner) tiling of `extent` whose product divides it, with vthread up to
 * `max_vt`, thread up to `max_t` and inner up to 16; more than the knob holds are thinned evenly
 * (AutoTVM's define_split lists them all; a knob holds 64). */
static int split_choices(int64_t extent, int64_t max_vt, int64_t max_t, int64_t *out)
{
    static int64_t all[4096];
    int n = 0;
    for (int64_t t = 1; t <= extent && t <= max_t; t++) {
        if (extent % t)
            continue;
        for (int64_t in = 1; in <= 16 && t * in <= extent; in++) {
            if (extent % (t * in))
                continue;
            for (int64_t vt = 1; vt <= max_vt && t * in * vt <= extent; vt *= 2) {
                if (extent % (t * in * vt) || n == (int)(sizeof(all) / sizeof(all[0])))
                    continue;
                all[n++] = vt << 32 | t << 16 | in;
            }
        }
    }
    if (n <= TT_SPACE_MAX_CHOICES) {
        memcpy(out, all, sizeof(int64_t) * (size_t)n);
        return n;
    }
    for (int i = 0; i < TT_SPACE_MAX_CHOICES; i++)
        out[i] = all[(int64_t)i * n / TT_SPACE_MAX_CHOICES];
    return TT_SPACE_MAX_CHOICES;
}

tt_status tt_space_init_gpu(tt_space *s, const tt_dag *dag, int64_t max_threads, int max_vthread,
                            bool shared_memory, tt_errbuf *err)
{
    tt_status r = tt__space_pick_main(s, dag, err);
    if (r)
        return r;
    s->gpu = true;
    s->no_shared = !shared_memory;
    s->max_threads = (int)(max_threads > 0 ? max_threads : 256);
    s->max_vthread = max_vthread > 0 ? max_vthread : 8;
    const tt_op *m = &dag->ops.data[s->main_stage];
    if (m->ndim + m->nreduce + 3 > TT_SPACE_MAX_KNOBS)
        return tt_err(err, TT_ERR_UNSUPPORTED, "op '%s' has too many axes for the GPU template",
                      m->name);
    int64_t c[TT_SPACE_MAX_CHOICES];
    for (int d = 0; d < m->ndim; d++) {
        char name[40];
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->axis[d]));
        tt__space_add_knob(
            s, name, c,
            split_choices(m->shape[d], max_vthread > 0 ? max_vthread : 8, s->max_threads, c));
        s->knobs[s->nknobs - 1].parts = 3;
    }
    for (int k = 0; k < m->nreduce; k++) {
        char name[40];
        int n = 0;
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->raxis[k]));
        for (int64_t d = 1; d <= m->rextent[k] && d <= 64 && n < TT_SPACE_MAX_CHOICES; d++)
            if (m->rextent[k] % d == 0)
                c[n++] = d;
        tt__space_add_knob(s, name, c, n);
    }
    int64_t unroll[3] = {0, 512, 1500}, explicit_[2] = {0, 1};
    tt__space_add_knob(s, "auto_unroll_max_step", unroll, 3);
    tt__space_add_knob(s, "unroll_explicit", explicit_, m->nreduce > 0 ? 2 : 1);
    /* ours (TVM's template has none): the shared tiles double-buffered, PR "double_buffer" */
    tt__space_add_knob(s, "double_buffer", explicit_, m->nreduce > 0 && shared_memory ? 2 : 1);
    s->size = 1;
    for (int k = 0; k < s->nknobs; k++)
        s->size *= (uint64_t)s->knobs[k].n;
    return TT_OK;
}

tt_status tt__space_apply_gpu(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, index % s->size, pos);
    int n = s->nspatial, nr = s->nreduce;
    int64_t len[TT_MAX_DIMS][4], threads = 1, vthreads = 1;
    for (int d = 0; d < n; d++) {
        tt_space_split_lengths(s, d, pos[d], len[d]);
        vthreads *= len[d][0];
        threads *= len[d][1];
    }
    if (threads > s->max_threads)
        return tt_err(err, TT_ERR_ILLEGAL_STEP,
                      "the config uses %lld threads per block, more than %d", (long long)threads,
                      s->max_threads);
    int64_t rtile[TT_MAX_REDUCE];
    for (int k = 0; k < nr; k++)
        rtile[k] = s->knobs[n + k].choice[pos[n + k]];
    int unroll = (int)s->knobs[n + nr].choice[pos[n + nr]];
    bool unroll_explicit = s->knobs[n + nr + 1].choice[pos[n + nr + 1]] != 0;
    bool double_buffer = s->knobs[n + nr + 2].choice[pos[n + nr + 2]] != 0;
    if (vthreads > s->max_vthread)
        return tt_err(err, TT_ERR_ILLEGAL_STEP,
                      "the config uses %lld virtual threads, more than %d", (long long)vthreads,
                      s->max_vthread);
    tt_state *st;
    tt_status r = tt_state_create(s->dag, &st, err);
    if (r)
        return r;
    for (size_t i = 0; i < s->dag->ops.len && !r; i++)
        if (tt__space_inlinable(s->dag, (int)i, s->main_stage))
            r = tt_sched_compute_inline(st, tt_state_stage_of_op(st, (int)i), err);
    int main_op = s->main_stage, local_op = -1;
    int shared_ops[TT_MAX_STAGES], nshared = 0;
    if (!r && nr > 0) {
        /* The accumulation in a per-thread local buffer; its inputs through shared memory. */
        r = tt_sched_cache_write(st, tt_state_stage_of_op(st, main_op), "local", err);
        local_op = (int)st->dag.ops.len - 1;
        for (size_t i = 0; i < s->dag->ops.len && !r && !s->no_shared; i++) {
            if (!s->dag->ops.data[i].is_placeholder ||
                !tt_expr_reads_tensor(&s->dag->pool, s->dag->ops.data[main_op].body, (uint32_t)i))
                continue;
            int reader = tt_state_stage_of_op(st, local_op);
            r = tt_sched_cache_read(st, tt_state_stage_of_op(st, (int)i), "shared", &reader, 1,
                                    err);
            shared_ops[nshared++] = (int)st->dag.ops.len - 1;
        }
    }
    /* The output: four levels per spatial axis, bound to blockIdx.x, vthread, threadIdx.x. */
    int orig = tt_state_stage_of_op(st, main_op);
    for (int d = n - 1; d >= 0 && !r; d--)
        r = tt_sched_split(st, orig, d, len[d], 3, true, err);
    if (!r) {
        int order[TT_MAX_ITERS], k = 0;
        for (int l = 0; l < 4; l++)
            for (int d = 0; d < n; d++)
                order[k++] = 4 * d + l;
        r = tt_sched_reorder(st, orig, order, k, err);
    }
    if (!r)
        r = tt_sched_fuse_annotate(st, orig, 0, n, TT_ANN_BLOCK_X, err);
    if (!r)
        r = tt_sched_fuse_annotate(st, orig, 1, n, TT_ANN_VTHREAD, err);
    if (!r)
        r = tt_sched_fuse_annotate(st, orig, 2, n, TT_ANN_THREAD_X, err);
    if (!r && local_op >= 0) {
        int local = tt_state_stage_of_op(st, local_op);
        r = tt_sched_compute_at(st, local, tt_state_stage_of_op(st, main_op), 2, err);
        /* The local stage: [reduce outer][reduce inner][spatial]. */
        for (int k = nr - 1; k >= 0 && !r; k--)
            r = tt_sched_split(st, local, n + k, &rtile[k], 1, true, err);
        if (!r) {
            int order[TT_MAX_ITERS], m = 0;
            for (int k = 0; k < nr; k++)
                order[m++] = n + 2 * k;
            for (int k = 0; k < nr; k++)
                order[m++] = n + 2 * k + 1;
            for (int d = 0; d < n; d++)
                order[m++] = d;
            r = tt_sched_reorder(st, local, order, m, err);
        }
        for (int i = 0; i < nshared && !r; i++) {
            /* Loaded at each outer reduction step, by all threads of the block. */
            int sh = tt_state_stage_of_op(st, shared_ops[i]);
            r = tt_sched_compute_at(st, sh, tt_state_stage_of_op(st, local_op), nr - 1, err);
            const tt_stage *sg = &st->stages.data[sh];
            int ids[TT_MAX_ITERS];
            for (int k = 0; k < sg->niters; k++)
                ids[k] = k;
            if (!r && sg->niters > 1)
                r = tt_sched_fuse(st, sh, ids, sg->niters, err);
            if (!r)
                r = tt_sched_split(st, sh, 0, &threads, 1, true, err);
            if (!r)
                r = tt_sched_annotate(st, sh, 1, TT_ANN_THREAD_X, err);
            if (!r && double_buffer)
                r = tt_sched_pragma(st, sh, 0, "double_buffer", err);
        }
        local = tt_state_stage_of_op(st, local_op);
        if (!r && unroll > 0) {
            char pragma[48];
            snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d", unroll);
            r = tt_sched_pragma(st, local, 0, pragma, err);
        }
        const tt_stage *lg = &st->stages.data[local];
        if (!r && unroll_explicit && lg->iters[lg->niters - 1].extent > 1)
            r = tt_sched_annotate(st, local, lg->niters - 1, TT_ANN_UNROLL, err);
    }
    /* Every other stage computed on its own: a plain binding. */
    for (size_t i = 0; i < st->stages.len && !r; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (!st->dag.ops.data[sg->op].is_placeholder && sg->at == TT_AT_ROOT && !sg->transformed)
            r = tt_sketch_bind_untiled(st, (int)i, WARP, err);
    }
    if (r) {
        tt_state_free(st);
        return r;
    }
    *out = st;
    return TT_OK;
}
