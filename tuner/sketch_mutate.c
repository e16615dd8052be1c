/* Mutation of sketch states (search.md C6): the evolutionary search's changes to one candidate,
 * each replayed on the space's DAG and checked as sampling checks. */
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "sketch.h"
#include "sketch_int.h"

/* ---- mutation (search.md C6) ---- */
static tt_status replay_owned(tt_sketch_space *sp, tt_step *steps, size_t n, tt_state **out,
                              tt_errbuf *err)
{
    tt_status r = tt_state_replay(sp->dag, steps, n, out, err);
    free(steps);
    if (!r && tt_state_nested_parallel(*out)) {
        tt_state_free(*out);
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "nested parallel loops");
    }
    if (!r && sp->params.gpu && (r = tt_sketch_check_gpu(&sp->params, *out, err)))
        tt_state_free(*out);
    return r;
}

static tt_step *copy_steps(const tt_state *st)
{
    size_t n = st->steps.len;
    tt_step *s = malloc(sizeof(tt_step) * (n ? n : 1));
    if (s && n)
        memcpy(s, st->steps.data, sizeof(tt_step) * n);
    return s;
}

static tt_status not_applicable(tt_errbuf *err, const char *what)
{
    return tt_err(err, TT_ERR_ILLEGAL_STEP, "mutation does not apply: %s", what);
}

static tt_status mutate_tile_size(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                  tt_state **out, tt_errbuf *err)
{
    int64_t maxi = sp->params.max_innermost;
    int cand[MAX_STEPS], nc = 0;
    for (size_t i = 0; i < st->steps.len && nc < MAX_STEPS; i++) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind == TT_STEP_SPLIT && s->extent > 0 && s->nlen > 0 &&
            s->lengths[s->nlen - 1] <= maxi)
            cand[nc++] = (int)i;
    }
    if (nc == 0)
        return not_applicable(err, "no split to change");
    int id = -1;
    for (int tries = 0; tries < 4 * nc; tries++) {
        int c = cand[tt__sketch_rand_below(rng, nc)];
        if (st->steps.data[c].extent > 1) {
            id = c;
            break;
        }
    }
    if (id < 0)
        return not_applicable(err, "every split has extent 1");
    const tt_step *ps = &st->steps.data[id];
    int nl = ps->nlen + 1;
    int64_t len[TT_MAX_SPLIT], prod = 1;
    for (int i = 0; i < ps->nlen; i++) {
        len[i + 1] = ps->lengths[i];
        prod *= ps->lengths[i];
    }
    len[0] = ps->extent / prod;
    int perm[TT_MAX_SPLIT];
    for (int i = 0; i < nl; i++)
        perm[i] = i;
    for (int i = nl - 1; i > 0; i--) {
        int j = tt__sketch_rand_below(rng, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < nl; i++) {
        int src = perm[i], dst = perm[(i + 1) % nl];
        if (len[src] <= 1)
            continue;
        int64_t f[256];
        int nf = tt__sketch_divisors(len[src], f, 256);
        int64_t factor;
        if (dst == nl - 1) {
            int m = nf - 1;
            while (m >= 1 && f[m] * len[dst] > maxi)
                m--;
            if (m == 0)
                continue;
            factor = f[1 + tt__sketch_rand_below(rng, m)];
        } else {
            factor = f[1 + tt__sketch_rand_below(rng, nf - 1)];
        }
        tt_step *steps = copy_steps(st);
        if (!steps)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        len[src] /= factor;
        len[dst] *= factor;
        for (int k = 1; k < nl; k++)
            steps[id].lengths[k - 1] = len[k];
        return replay_owned(sp, steps, st->steps.len, out, err);
    }
    return not_applicable(err, "no factor can move");
}

static tt_status mutate_auto_unroll(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                    tt_state **out, tt_errbuf *err)
{
    int cand[MAX_STEPS], nc = 0;
    for (size_t i = 0; i < st->steps.len && nc < MAX_STEPS; i++) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind == TT_STEP_PRAGMA && !strncmp(s->pragma, "auto_unroll_max_step", 20))
            cand[nc++] = (int)i;
    }
    if (nc == 0)
        return not_applicable(err, "no auto_unroll_max_step pragma");
    tt_step *steps = copy_steps(st);
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    int id = cand[tt__sketch_rand_below(rng, nc)];
    snprintf(steps[id].pragma, sizeof(steps[id].pragma), "auto_unroll_max_step$%d",
             tt__sketch_unroll_value(sp, rng));
    return replay_owned(sp, steps, st->steps.len, out, err);
}

/* One of `st`'s shared stages computed inside a loop nest (the ones a fetch fills), drawn
 * uniformly; -1 when it has none. */
static int random_shared_stage(const tt_state *st, tt_rng *rng)
{
    int shared[TT_MAX_STAGES], ns = 0;
    for (size_t g = 0; g < st->stages.len && ns < TT_MAX_STAGES; g++)
        if (!strcmp(st->stages.data[g].scope, "shared") && st->stages.data[g].at == TT_AT_ITER)
            shared[ns++] = (int)g;
    return ns ? shared[tt__sketch_rand_below(rng, ns)] : -1;
}

/* A shared stage's double buffering switched: its PR "double_buffer" step dropped, or one
 * appended.  Stage ids of the appended step are those of the final state, where it applies. */
static tt_status mutate_double_buffer(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                      tt_state **out, tt_errbuf *err)
{
    int g = random_shared_stage(st, rng);
    if (g < 0)
        return not_applicable(err, "no shared stage");
    size_t n = st->steps.len;
    tt_step *steps = malloc(sizeof(tt_step) * (n + 1));
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const tt_step *s = &st->steps.data[i];
        /* stage ids as of each step: a register copy's CHR, after it, moves the stages on */
        if (s->kind == TT_STEP_PRAGMA && tt_access_final_stage(st, i, s->stage) == g &&
            !strcmp(s->pragma, "double_buffer"))
            continue; /* a PR step adds no stage: the ids of the others hold */
        steps[m++] = *s;
    }
    if (m == n) {
        memset(&steps[m], 0, sizeof(tt_step));
        steps[m].kind = TT_STEP_PRAGMA;
        steps[m].stage = g;
        snprintf(steps[m].pragma, sizeof(steps[m].pragma), "double_buffer");
        m++;
    }
    return replay_owned(sp, steps, m, out, err);
}

/* A shared stage's padding switched: its SA step dropped, or the padding that spares bank
 * conflicts (tt__sketch_pad_shared) added; not applicable where none would. */
static tt_status mutate_pad_shared(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                   tt_state **out, tt_errbuf *err)
{
    int g = random_shared_stage(st, rng);
    if (g < 0)
        return not_applicable(err, "no shared stage");
    size_t n = st->steps.len, m = 0;
    tt_step *steps = copy_steps(st);
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(steps[i].kind == TT_STEP_STORAGE_ALIGN &&
              tt_access_final_stage(st, i, steps[i].stage) == g))
            steps[m++] = steps[i];
    if (m < n)
        return replay_owned(sp, steps, m, out, err);
    free(steps);
    tt_state *mu;
    if (tt_state_clone(st, &mu))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!tt__sketch_pad_shared(&sp->params, &mu, g, NULL)) {
        tt_state_free(mu);
        return not_applicable(err, "no padding spares the stage's bank conflicts");
    }
    *out = mu;
    return TT_OK;
}

/* A register tile's vectorisation (tt_sketch_vector_tile) switched: one cache-write stage whose
 * tile can take it loses its AN vectorize steps (its own and its copy-out's), or gains them. */
static tt_status mutate_vector_tile(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                    tt_state **out, tt_errbuf *err)
{
    int cand[TT_MAX_STAGES], nc = 0;
    for (size_t g = 0; g < st->stages.len && nc < TT_MAX_STAGES; g++) {
        const tt_stage *sg = &st->stages.data[g];
        if (tt__sketch_vector_tile_stage(st, (int)g) &&
            (tt__sketch_vector_tile_iter(st, (int)g) >= 0 ||
             (sg->niters > 0 && sg->iters[sg->niters - 1].ann == TT_ANN_VECTORIZE)))
            cand[nc++] = (int)g;
    }
    if (nc == 0)
        return not_applicable(err, "no register tile to vectorise");
    int g = cand[tt__sketch_rand_below(rng, nc)];
    const tt_stage *sg = &st->stages.data[g];
    int c = tt_state_stage_of_op(st, sg->at_op);
    if (tt__sketch_vector_tile_iter(st, g) >= 0) { /* switch on, as tt_sketch_vector_tile does */
        tt_state *mu;
        if (tt_state_clone(st, &mu))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        tt_status r = tt__sketch_vector_tile_one(mu, g, err);
        tt_step *steps = r ? NULL : copy_steps(mu);
        if (!r)
            r = steps ? replay_owned(sp, steps, mu->steps.len, out, err)
                      : tt_err(err, TT_ERR_NOMEM, "out of memory");
        tt_state_free(mu);
        return r;
    }
    size_t n = st->steps.len, m = 0;
    tt_step *steps = malloc(sizeof(tt_step) * (n ? n : 1));
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* switch off: the AN vectorize steps of the stage's last iterator and its copy-out's (stage
     * ids as of each step: a register copy's CHR, after them, moves the stages on) */
    for (size_t i = 0; i < n; i++) {
        const tt_step *s = &st->steps.data[i];
        int at = s->kind == TT_STEP_ANNOTATE ? tt_access_final_stage(st, i, s->stage) : -1;
        if (s->kind == TT_STEP_ANNOTATE && s->ann == TT_ANN_VECTORIZE &&
            ((at == g && s->iter == sg->niters - 1) ||
             (c >= 0 && at == c && s->iter == st->stages.data[c].niters - 1)))
            continue; /* an AN step adds no stage or iterator: the others' ids hold */
        steps[m++] = *s;
    }
    return replay_owned(sp, steps, m, out, err);
}

/* Candidates are computed in the state as it was when the compute_at step ran, so stage and
 * iterator ids need no translation (Ansor computes them in the final state). */
static tt_status mutate_compute_location(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                         tt_state **out, tt_errbuf *err)
{
    if (sp->params.no_compute_location)
        return not_applicable(err, "compute-location changes are disabled");
    int cand[MAX_STEPS], nc = 0;
    for (size_t i = 0; i < st->steps.len && nc < MAX_STEPS; i++) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind != TT_STEP_COMPUTE_AT)
            continue;
        int fs = tt_access_final_stage(st, i, s->stage);
        if (tt_access_is_tiled(st, fs) || tt_access_needs_mlt(st, fs))
            continue;
        cand[nc++] = (int)i;
    }
    if (nc == 0)
        return not_applicable(err, "no compute_at of an untiled stage");
    int id = cand[tt__sketch_rand_below(rng, nc)];
    tt_state *before;
    tt_status r = tt_state_replay(sp->dag, st->steps.data, (size_t)id, &before, err);
    if (r)
        return r;
    int loc[TT_MAX_ITERS * 2][2];
    int n = tt__sketch_location_candidates(before, st->steps.data[id].stage, loc, TT_MAX_ITERS * 2);
    tt_state_free(before);
    if (n == 0)
        return not_applicable(err, "no other location");
    int c = tt__sketch_rand_below(rng, n);
    tt_step *steps = copy_steps(st);
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    steps[id].target_stage = loc[c][0];
    steps[id].target_iter = loc[c][1];
    return replay_owned(sp, steps, st->steps.len, out, err);
}

static bool stage_changing(tt_step_kind k)
{
    return k == TT_STEP_CACHE_WRITE || k == TT_STEP_CACHE_READ || k == TT_STEP_RFACTOR;
}

static tt_status mutate_parallel(tt_sketch_space *sp, const tt_state *st, tt_rng *rng,
                                 tt_state **out, tt_errbuf *err)
{
    int cand[MAX_STEPS], nc = 0;
    for (size_t i = 1; i < st->steps.len && nc < MAX_STEPS; i++) {
        const tt_step *s = &st->steps.data[i], *f = &st->steps.data[i - 1];
        if (s->kind == TT_STEP_ANNOTATE && s->ann == TT_ANN_PARALLEL && s->iter == 0 &&
            f->kind == TT_STEP_FUSE && f->stage == s->stage && f->nids > 0 && f->ids[0] == 0)
            cand[nc++] = (int)i;
    }
    if (nc == 0)
        return not_applicable(err, "no fused parallel loop");
    int id = cand[tt__sketch_rand_below(rng, nc)];
    const tt_step *fuse = &st->steps.data[id - 1];
    int stage = fuse->stage;
    tt_state *before;
    tt_status r = tt_state_replay(sp->dag, st->steps.data, (size_t)id - 1, &before, err);
    if (r)
        return r;
    const tt_stage *sg = &before->stages.data[stage];
    int maxf = 0;
    for (; maxf < sg->niters; maxf++) {
        const tt_iter *it = &sg->iters[maxf];
        if (it->kind == TT_ITER_REDUCE || it->ann != TT_ANN_NONE ||
            tt_access_has_attached(before, stage, maxf))
            break;
    }
    tt_state_free(before);
    if (maxf == 0)
        return not_applicable(err, "nothing to fuse");
    int to = tt__sketch_rand_below(rng, maxf) + 1;
    int offset = fuse->ids[fuse->nids - 1] - (to - 1);
    if (offset == 0)
        return not_applicable(err, "same fusion");
    tt_step *steps = copy_steps(st);
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    steps[id - 1].nids = to;
    for (int k = 0; k < to; k++)
        steps[id - 1].ids[k] = k;
    for (size_t i = (size_t)id + 1; i < st->steps.len; i++) {
        tt_step *s = &steps[i];
        if (stage_changing(s->kind)) {
            free(steps);
            return not_applicable(err, "a stage-adding step follows");
        }
        if (s->stage != stage)
            continue;
        if (s->kind != TT_STEP_ANNOTATE && s->kind != TT_STEP_PRAGMA) {
            free(steps);
            return not_applicable(err, "a loop-changing step follows on the same stage");
        }
        if (s->iter != 0)
            s->iter += offset;
    }
    return replay_owned(sp, steps, st->steps.len, out, err);
}

tt_status tt_sketch_mutate_kind(tt_sketch_space *sp, const tt_state *st, tt_mutation kind,
                                tt_rng *rng, tt_state **out, tt_errbuf *err)
{
    switch (kind) {
    case TT_MUTATE_TILE_SIZE: return mutate_tile_size(sp, st, rng, out, err);
    case TT_MUTATE_AUTO_UNROLL: return mutate_auto_unroll(sp, st, rng, out, err);
    case TT_MUTATE_COMPUTE_LOCATION: return mutate_compute_location(sp, st, rng, out, err);
    case TT_MUTATE_PARALLEL: return mutate_parallel(sp, st, rng, out, err);
    case TT_MUTATE_DOUBLE_BUFFER: return mutate_double_buffer(sp, st, rng, out, err);
    case TT_MUTATE_VECTOR_TILE: return mutate_vector_tile(sp, st, rng, out, err);
    case TT_MUTATE_PAD_SHARED: return mutate_pad_shared(sp, st, rng, out, err);
    default: return tt_err(err, TT_ERR_INTERNAL, "unknown mutation %d", (int)kind);
    }
}

tt_status tt_sketch_mutate(tt_sketch_space *sp, const tt_state *st, tt_rng *rng, tt_state **out,
                           tt_errbuf *err)
{
    static const double cpu_weight[TT_MUTATE_COUNT] = {0.90, 0.04, 0.05, 0.01, 0, 0, 0};
    static const double gpu_weight[TT_MUTATE_COUNT] = {0.75, 0.10, 0, 0, 0.05, 0.05, 0.05};
    const double *weight = sp->params.gpu ? gpu_weight : cpu_weight;
    double u = tt_rng_uniform(rng), acc = 0;
    tt_mutation k = TT_MUTATE_TILE_SIZE;
    for (int i = 0; i < TT_MUTATE_COUNT; i++) {
        acc += weight[i];
        if (u < acc) {
            k = (tt_mutation)i;
            break;
        }
    }
    return tt_sketch_mutate_kind(sp, st, k, rng, out, err);
}
