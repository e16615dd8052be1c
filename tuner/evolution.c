#include "evolution.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tt_evo_params_default(tt_evo_params *p)
{
    p->population = 2048;
    p->iterations = 4;
    p->mutation_prob = 0.85;
    p->measured_ratio = 0.2;
    p->eps_greedy = 0.05;
    p->warmup = 100;
    p->max_rounds = 1000;
    p->objective = TT_COSTMODEL_PROG_RANK;
    p->labels = TT_LABELS_RANK;
    p->gpu_limits = NULL;
    p->stats = NULL;
}

static void *grow(void *ptr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return ptr;
    int cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *g = realloc(ptr, (size_t)cap2 * elem);
    if (g)
        *cap = cap2;
    return g;
}

tt_status tt_evo_history_add(tt_evo_history *h, const char *config, const float *rows, int nrows,
                             double throughput, int group, uint64_t program)
{
    if (nrows > 0) {
        int cap = h->caprows;
        float *r = grow(h->rows, &cap, h->nrows + nrows, sizeof(float) * TT_STORE_FEATURES);
        if (!r)
            return TT_ERR_NOMEM;
        h->rows = r;
        int cap2 = h->caprows;
        int *p = grow(h->row_prog, &cap2, h->nrows + nrows, sizeof(int));
        if (!p)
            return TT_ERR_NOMEM;
        h->row_prog = p;
        h->caprows = cap < cap2 ? cap : cap2;
    }
    int capp = h->capprog, capc = h->capprog, capg = h->capprog, caph = h->capprog;
    double *t = grow(h->throughput, &capp, h->nprog + 1, sizeof(double));
    if (!t)
        return TT_ERR_NOMEM;
    h->throughput = t;
    int *gr = grow(h->group, &capg, h->nprog + 1, sizeof(int));
    if (!gr)
        return TT_ERR_NOMEM;
    h->group = gr;
    uint64_t *ph = grow(h->program, &caph, h->nprog + 1, sizeof(uint64_t));
    if (!ph)
        return TT_ERR_NOMEM;
    h->program = ph;
    char **c = grow(h->configs, &capc, h->nprog + 1, sizeof(char *));
    if (!c)
        return TT_ERR_NOMEM;
    h->configs = c;
    h->capprog = capp < capc ? capp : capc;
    h->capprog = caph < h->capprog ? caph : h->capprog;
    char *copy = strdup(config);
    if (!copy)
        return TT_ERR_NOMEM;
    if (nrows > 0) {
        memcpy(h->rows + (size_t)h->nrows * TT_STORE_FEATURES, rows,
               sizeof(float) * TT_STORE_FEATURES * (size_t)nrows);
        for (int i = 0; i < nrows; i++)
            h->row_prog[h->nrows + i] = h->nprog;
        h->nrows += nrows;
    }
    h->configs[h->nprog] = copy;
    h->group[h->nprog] = group;
    h->program[h->nprog] = program;
    h->throughput[h->nprog++] = throughput;
    return TT_OK;
}

void tt_evo_history_free(tt_evo_history *h)
{
    for (int i = 0; i < h->nprog; i++)
        free(h->configs[i]);
    free(h->configs);
    free(h->throughput);
    free(h->group);
    free(h->program);
    free(h->rows);
    free(h->row_prog);
    memset(h, 0, sizeof(*h));
}

uint64_t tt_evo_program_hash(const tt_program *prog)
{
    char *text = tt_program_print(prog);
    uint64_t h = text ? tt_hash64_str(text) | 1 : 0;
    free(text);
    return h;
}

int tt_evo_features(const tt_state *st, const tt_gpu_limits *gpu_limits, float **rows,
                    uint64_t *program)
{
    tt_program *prog;
    if (rows)
        *rows = NULL;
    if (program)
        *program = 0;
    /* most GPU samples that fail take more local memory than there is, which their buffers tell
     * for a tenth of a lowering and an emission (a program's hash needs the lowering) */
    if (gpu_limits && gpu_limits->max_shared_bytes > 0 && !program) {
        int64_t bound = tt_lower_scope_bytes(st, "shared");
        if (bound < 0 || bound > gpu_limits->max_shared_bytes)
            return -1;
    }
    if (tt_lower(st, &prog, NULL))
        return -1;
    if (program)
        *program = tt_evo_program_hash(prog);
    if (gpu_limits && tt_codegen_opencl_check(prog, gpu_limits, NULL)) {
        tt_program_free(prog);
        return -1;
    }
    int n = tt_features_per_store(prog, NULL, 0);
    if (n > 0 && rows && (*rows = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)n)))
        tt_features_per_store(prog, *rows, n);
    else if (rows)
        n = n > 0 ? -1 : n;
    tt_program_free(prog);
    return n;
}

/* ---- population ---- */

typedef struct {
    tt_state *st;
    char *json;
    uint64_t hash;
    float score;
    int valid;   /* judge(): 1 lowers (on a GPU, within its limits), -1 not, 0 not judged yet */
    float *rows; /* its features, once judged with a model to score them */
    int nrows;
} indiv;

typedef struct {
    indiv *v;
    int n, cap;
} pop;

static void pop_clear(pop *p)
{
    for (int i = 0; i < p->n; i++) {
        tt_state_free(p->v[i].st);
        free(p->v[i].json);
        free(p->v[i].rows);
    }
    p->n = 0;
}

static void pop_free(pop *p)
{
    pop_clear(p);
    free(p->v);
    memset(p, 0, sizeof(*p));
}

/* Takes ownership of st (and of json, its steps' JSON, when not NULL). */
static indiv *pop_add(pop *p, tt_state *st, char *json)
{
    if (!json)
        json = tt_steps_to_json(st->steps.data, st->steps.len);
    indiv *g = json ? grow(p->v, &p->cap, p->n + 1, sizeof(indiv)) : NULL;
    if (!g) {
        free(json);
        tt_state_free(st);
        return NULL;
    }
    p->v = g;
    p->v[p->n] = (indiv){st, json, tt_hash64_str(json), 0, 0, NULL, 0};
    return &p->v[p->n++];
}

/* Removes the last member (one judged invalid as it was added). */
static void pop_drop_last(pop *p)
{
    indiv *x = &p->v[--p->n];
    tt_state_free(x->st);
    free(x->json);
    free(x->rows);
}

/* A set of 64-bit hashes (open addressing, 0 never stored). */
typedef struct {
    uint64_t *slot;
    size_t cap, n;
} hset;

static bool hset_add(hset *s, uint64_t h)
{
    h |= 1;
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *g = calloc(cap, sizeof(uint64_t));
        if (!g)
            return false;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slot[i])
                for (size_t j = s->slot[i] & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!g[j]) {
                        g[j] = s->slot[i];
                        break;
                    }
        free(s->slot);
        s->slot = g;
        s->cap = cap;
    }
    for (size_t j = h & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
        if (s->slot[j] == h)
            return false;
        if (!s->slot[j]) {
            s->slot[j] = h;
            s->n++;
            return true;
        }
    }
}

/* Whether the program of the config `json` is new to `programs` (then added).  A config that does
 * not lower counts as new: its build says what is wrong. */
static bool new_program(const tt_sketch_space *sp, hset *programs, const char *json)
{
    tt_state *st;
    tt_program *prog;
    if (tt_state_from_json(sp->dag, json, &st, NULL))
        return true;
    tt_status s = tt_lower(st, &prog, NULL);
    tt_state_free(st);
    if (s)
        return true;
    uint64_t h = tt_evo_program_hash(prog);
    tt_program_free(prog);
    return hset_add(programs, h);
}

/* ---- scoring ---- */

typedef struct {
    tt_costmodel *model; /* NULL: random scores */
    tt_rng *rng;
    const tt_gpu_limits *gpu_limits; /* programs beyond them score -inf */
} scorer;

/* Judges x once (tt_evo_features): whether its state lowers, on a GPU to a kernel within the
 * limits, and when a model will score it, its features, from one lowering.  Before, a GPU member
 * was lowered to judge its limits and again in every generation's scoring, where features were
 * also computed without a model, to be thrown away. */
static void judge(const scorer *sc, indiv *x)
{
    if (x->valid < 0 || (x->valid > 0 && (x->rows || !sc->model)))
        return;
    int n = tt_evo_features(x->st, sc->gpu_limits, sc->model ? &x->rows : NULL, NULL);
    x->valid = n > 0 ? 1 : -1;
    x->nrows = n > 0 ? n : 0;
}

/* A copy of x's judgement for its clone y (the same state). */
static void judged_as(indiv *y, const indiv *x)
{
    y->valid = x->valid;
    if (x->rows && (y->rows = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)x->nrows))) {
        memcpy(y->rows, x->rows, sizeof(float) * TT_STORE_FEATURES * (size_t)x->nrows);
        y->nrows = x->nrows;
    } else if (x->rows) {
        y->valid = 0; /* judged again */
    }
}

static tt_status score_all(scorer *sc, pop *p, tt_errbuf *err)
{
    float *rows = NULL;
    int *prog = NULL, nrows = 0, cap = 0, capp = 0;
    bool *ok = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof(bool));
    if (!ok)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = TT_OK;
    for (int i = 0; i < p->n; i++) {
        judge(sc, &p->v[i]);
        ok[i] = p->v[i].valid > 0;
        int n = p->v[i].nrows;
        if (!ok[i] || !sc->model)
            continue;
        int cap0 = cap;
        float *g = grow(rows, &cap, nrows + n, sizeof(float) * TT_STORE_FEATURES);
        int *gp = g ? grow(prog, &capp, nrows + n, sizeof(int)) : NULL;
        if (!g || !gp) {
            if (g)
                rows = g;
            cap = cap0;
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        rows = g;
        prog = gp;
        memcpy(rows + (size_t)nrows * TT_STORE_FEATURES, p->v[i].rows,
               sizeof(float) * TT_STORE_FEATURES * (size_t)n);
        for (int k = 0; k < n; k++)
            prog[nrows + k] = i;
        nrows += n;
    }
    if (sc->model) {
        float *out = malloc(sizeof(float) * (size_t)(p->n > 0 ? p->n : 1));
        if (!out) {
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        s = tt_costmodel_predict_packed(sc->model, rows, nrows, TT_STORE_FEATURES, prog, p->n, out,
                                        err);
        for (int i = 0; !s && i < p->n; i++)
            p->v[i].score = out[i];
        free(out);
    } else {
        for (int i = 0; i < p->n; i++)
            p->v[i].score = (float)tt_rng_uniform(sc->rng);
    }
    for (int i = 0; i < p->n; i++)
        if (!ok[i])
            p->v[i].score = -INFINITY;
out:
    free(ok);
    free(rows);
    free(prog);
    return s;
}

/* The best `cap` distinct, unmeasured programs seen so far. */
typedef struct {
    char **json;
    float *score;
    uint64_t *hash;
    int n, cap;
} best_set;

static void best_offer(best_set *b, const indiv *x)
{
    if (!isfinite(x->score))
        return;
    for (int i = 0; i < b->n; i++)
        if (b->hash[i] == x->hash)
            return;
    int slot = b->n;
    if (b->n == b->cap) {
        int lo = 0;
        for (int i = 1; i < b->n; i++)
            if (b->score[i] < b->score[lo])
                lo = i;
        if (b->score[lo] >= x->score)
            return;
        free(b->json[lo]);
        slot = lo;
    } else {
        b->n++;
    }
    b->json[slot] = strdup(x->json);
    b->score[slot] = x->score;
    b->hash[slot] = x->hash;
    if (!b->json[slot]) {
        b->json[slot] = b->json[--b->n];
        b->score[slot] = b->score[b->n];
        b->hash[slot] = b->hash[b->n];
    }
}

static int pick_roulette(const pop *p, const double *cum, tt_rng *rng)
{
    double total = cum[p->n - 1];
    if (total <= 0)
        return (int)tt_rng_below(rng, (uint64_t)p->n);
    double u = tt_rng_uniform(rng) * total;
    int lo = 0, hi = p->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cum[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static tt_status train_model(const tt_evo_params *p, const tt_evo_history *h, tt_costmodel **out,
                             tt_errbuf *err)
{
    *out = NULL;
    if (h->nprog < p->warmup || h->nrows == 0)
        return TT_OK;
    float *y = malloc(sizeof(float) * (size_t)h->nprog);
    if (!y)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (tt_costmodel_labels(p->labels, h->throughput, h->group, h->nprog, y, err)) {
        free(y);
        return TT_ERR_NOMEM;
    }
    bool any = false;
    for (int i = 0; i < h->nprog; i++)
        any |= y[i] > 0;
    if (!any) {
        free(y);
        return TT_OK;
    }
    tt_costmodel *m;
    tt_status s = tt_costmodel_create(p->objective, 0, 43, &m, err);
    if (!s)
        s = tt_costmodel_train_packed(m, h->rows, h->nrows, TT_STORE_FEATURES, h->row_prog, y,
                                      h->nprog, p->max_rounds, NULL, err);
    free(y);
    if (s) {
        tt_costmodel_free(m);
        return s;
    }
    *out = m;
    return TT_OK;
}

typedef struct {
    double thr;
    int prog;
} ranked;

static int cmp_ranked_desc(const void *a, const void *b)
{
    double x = ((const ranked *)a)->thr, y = ((const ranked *)b)->thr;
    return x < y ? 1 : x > y ? -1 : 0;
}

int tt_evo_search_round(tt_sketch_space *sp, const tt_evo_params *p, const tt_evo_history *h,
                        const void *preload, size_t preload_len,
                        bool (*seen)(void *ctx, const char *config), void *ctx, tt_rng *rng,
                        char **out, int n, void **model_blob, size_t *model_len, tt_errbuf *err)
{
    if (model_blob) {
        *model_blob = NULL;
        *model_len = 0;
    }
    tt_costmodel *model = NULL;
    if (preload && !tt_costmodel_load(p->objective, 0, preload, preload_len, &model, NULL)) {
        /* the saved model of this very history: no need to train again */
    } else {
        if (train_model(p, h, &model, err))
            return -1;
        if (model && model_blob)
            tt_costmodel_save(model, model_blob, model_len, NULL);
    }
    scorer sc = {model, rng, p->gpu_limits};
    tt_evo_stats stats = {0};
    pop cur = {0}, next = {0};
    hset uniq = {0};
    best_set best = {0};
    int found = 0;
    double *cum = NULL;
    ranked *order = NULL;
    best.cap = 2 * n;
    best.json = calloc((size_t)best.cap, sizeof(char *));
    best.score = calloc((size_t)best.cap, sizeof(float));
    best.hash = calloc((size_t)best.cap, sizeof(uint64_t));
    cum = malloc(sizeof(double) * (size_t)(p->population + h->nprog + 1));
    order = malloc(sizeof(ranked) * (size_t)(h->nprog + 1));
    if (!best.json || !best.score || !best.hash || !cum || !order)
        goto out;
    /* Initial population: random samples of the sketches... On a GPU only those within its
     * limits: of matmul 1024's samples that pass the sketch's checks (1024 work-items), 15% fit
     * 48 KiB of local memory, so a population of 256 held some 35 programs that could run and
     * 220 that scored -inf; the draws go on longer instead, up to 64 a place, each fresh sample
     * judged as it is drawn (judge(): its buffers, then one lowering that scoring reuses; a
     * round of 256 places there takes 0.7 s, 1.8 s when each was lowered twice). */
    int draws = p->gpu_limits ? 64 * p->population : 4 * p->population;
    for (int tries = 0; cur.n < p->population && tries < draws; tries++) {
        tt_state *st;
        stats.drawn++;
        if (tt_sketch_sample(sp, -1, rng, &st, NULL))
            continue;
        /* a repeat first: it costs a hash, the limits a lowering and an
         * emission, or a tenth of that where the buffers tell */
        char *json = tt_steps_to_json(st->steps.data, st->steps.len);
        if (!json || !hset_add(&uniq, tt_hash64_str(json))) {
            free(json);
            tt_state_free(st);
            continue;
        }
        indiv *x = pop_add(&cur, st, json);
        if (x && p->gpu_limits) {
            judge(&sc, x);
            if (x->valid < 0)
                pop_drop_last(&cur);
        }
    }
    stats.initial = cur.n;
    /* ...and the best measured programs. */
    int nm = 0;
    for (int i = 0; i < h->nprog; i++)
        if (h->throughput[i] > 0 && h->group[i] == 0)
            order[nm++] = (ranked){h->throughput[i], i};
    qsort(order, (size_t)nm, sizeof(ranked), cmp_ranked_desc);
    int want = (int)(p->measured_ratio * p->population);
    for (int i = 0; i < nm && i < want; i++) {
        tt_state *st;
        if (!tt_state_from_json(sp->dag, h->configs[order[i].prog], &st, NULL))
            pop_add(&cur, st, NULL);
    }
    if (cur.n == 0) {
        tt_err(err, TT_ERR_ILLEGAL_STEP, "no valid program could be sampled from %d sketches",
               sp->nsketches);
        found = -1;
        goto out;
    }
    int nrandom = (int)(p->eps_greedy * n), nrand_found = 0;
    char **random = calloc((size_t)(nrandom + 1), sizeof(char *));
    if (!random)
        goto out;
    /* Evolution. */
    int iters = model ? p->iterations : (p->iterations < 2 ? p->iterations : 2);
    for (int k = 0;; k++) {
        if (score_all(&sc, &cur, err)) {
            found = -1;
            break;
        }
        /* Random picks for the epsilon-greedy share, from the initial population's valid
         * programs (a score of -inf: does not lower, or beyond the GPU's limits). */
        for (int tries = 0; k == 0 && nrand_found < nrandom && tries < 8 * nrandom + 8; tries++) {
            const indiv *x = &cur.v[tt_rng_below(rng, (uint64_t)cur.n)];
            bool dup = !isfinite(x->score) || seen(ctx, x->json);
            for (int j = 0; j < nrand_found && !dup; j++)
                dup = !strcmp(random[j], x->json);
            if (!dup)
                random[nrand_found++] = strdup(x->json);
        }
        for (int i = 0; i < cur.n; i++)
            if (!seen(ctx, cur.v[i].json))
                best_offer(&best, &cur.v[i]);
        if (k == iters)
            break;
        /* Fitness: a pack-sum model predicts normalised throughput, used as it is (Ansor); a
         * ranking model's scores are log-odds of being faster, so exp(score - best) is how
         * likely a state beats the best one. */
        double acc = 0, top = -INFINITY;
        for (int i = 0; i < cur.n; i++)
            top = isfinite(cur.v[i].score) && cur.v[i].score > top ? cur.v[i].score : top;
        for (int i = 0; i < cur.n; i++) {
            double f = cur.v[i].score;
            if (p->objective == TT_COSTMODEL_PACK_RANK || p->objective == TT_COSTMODEL_PROG_RANK)
                f = isfinite(f) ? exp(f - top) : 0;
            acc += f > 0 ? f : 0;
            cum[i] = acc;
        }
        for (int tries = 0; next.n < p->population && tries < 3 * p->population; tries++) {
            const indiv *parent = &cur.v[pick_roulette(&cur, cum, rng)];
            tt_state *child;
            stats.children_tried++;
            if (tt_rng_uniform(rng) < p->mutation_prob) {
                if (tt_sketch_mutate(sp, parent->st, rng, &child, NULL))
                    continue;
                indiv *x = pop_add(&next, child, NULL);
                /* a mutant beyond the GPU's limits (a tile grown past local memory) would score
                 * -inf and never breed: its place goes to another */
                if (x && p->gpu_limits) {
                    judge(&sc, x);
                    if (x->valid < 0) {
                        pop_drop_last(&next);
                        continue;
                    }
                }
            } else {
                /* a clone keeps its parent's judgement (parent may move as next grows: it is
                 * in cur) */
                if (tt_state_clone(parent->st, &child))
                    continue;
                indiv *x = pop_add(&next, child, NULL);
                if (x)
                    judged_as(x, parent);
            }
            stats.children_kept++;
        }
        pop_clear(&cur);
        pop tmp = cur;
        cur = next;
        next = tmp;
        if (cur.n == 0)
            break;
    }
    if (found == 0) {
        /* Best first; the epsilon-greedy share comes from the random picks. */
        for (int i = 0; i < best.n; i++)
            for (int j = i + 1; j < best.n; j++)
                if (best.score[j] > best.score[i]) {
                    float s = best.score[i];
                    best.score[i] = best.score[j];
                    best.score[j] = s;
                    char *t = best.json[i];
                    best.json[i] = best.json[j];
                    best.json[j] = t;
                    uint64_t hh = best.hash[i];
                    best.hash[i] = best.hash[j];
                    best.hash[j] = hh;
                }
        /* No program twice: not one measured before, not two of this round. */
        hset programs = {0};
        for (int i = 0; i < h->nprog; i++)
            if (h->group[i] == 0 && h->program[i])
                hset_add(&programs, h->program[i]);
        int from_best = n - nrand_found;
        for (int i = 0; i < best.n && found < from_best; i++) {
            if (new_program(sp, &programs, best.json[i]))
                out[found++] = best.json[i];
            else
                free(best.json[i]);
            best.json[i] = NULL;
        }
        for (int i = 0; i < nrand_found && found < n; i++) {
            bool dup = false;
            for (int k = 0; k < found && !dup; k++)
                dup = !strcmp(out[k], random[i]);
            if (!dup && new_program(sp, &programs, random[i])) {
                out[found++] = random[i];
                random[i] = NULL;
            }
        }
        for (int i = 0; i < best.n && found < n; i++)
            if (best.json[i]) {
                if (new_program(sp, &programs, best.json[i]))
                    out[found++] = best.json[i];
                else
                    free(best.json[i]);
                best.json[i] = NULL;
            }
        free(programs.slot);
    }
    for (int i = 0; i < nrand_found; i++)
        free(random[i]);
    free(random);
out:
    if (p->stats)
        *p->stats = stats;
    if (best.json)
        for (int i = 0; i < best.n; i++)
            free(best.json[i]);
    free(best.json);
    free(best.score);
    free(best.hash);
    free(cum);
    free(order);
    free(uniq.slot);
    pop_free(&cur);
    pop_free(&next);
    tt_costmodel_free(model);
    return found;
}
