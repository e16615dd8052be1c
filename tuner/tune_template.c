/* The template strategies over the tiling space: XGBoost + simulated annealing (xgb, planned in a
 * child process), the genetic algorithm (ga), and the starting points both measure first. */
#include "tune_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "similar.h"

/* ---- strategies ---- */

/* Knob features of a config: log2(1 + value) per knob (AutoTVM's "knob" features). */
static void knob_features(const tt_space *sp, uint64_t index, float *row)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(sp, index, pos);
    for (int k = 0; k < sp->nknobs; k++)
        row[k] = (float)tt_space_knob_feature(sp, k, pos[k]);
}

/* Itervar features of a config's lowered program, zero-padded or cut to `width`; an all-zero
 * row when it does not lower (AutoTVM's failed extraction). */
static void itervar_features(const task *t, uint64_t index, float *row, int width)
{
    memset(row, 0, sizeof(float) * (size_t)width);
    tt_state *st;
    tt_program *prog;
    if (tt_space_apply(&t->space, index, &st, NULL))
        return;
    if (!tt_lower(st, &prog, NULL)) {
        tt_features_itervar(prog, false, row, width);
        tt_program_free(prog);
    }
    tt_state_free(st);
}

/* The model's row of a config: knob features, or (--features itervar) the loop-variable features
 * followed by the knob values, as AutoTVM appends its define_knob values. */
static void model_row(const task *t, uint64_t index, float *row, int ncols)
{
    int nk = t->space.nknobs;
    if (ncols > nk)
        itervar_features(t, index, row, ncols - nk);
    knob_features(&t->space, index, row + (ncols - nk));
}

/* Columns of the model's rows: the knobs, plus the longest itervar vector of the measured
 * configs (at most 4096) with --features itervar. */
static int feature_columns(const task *t)
{
    int nk = t->space.nknobs;
    if (t->o->features != TT_FEATURES_ITERVAR)
        return nk;
    int longest = 0;
    for (int i = 0; i < t->nrun; i++) {
        tt_state *st;
        tt_program *prog;
        if (tt_space_apply(&t->space, t->run_idx[i], &st, NULL))
            continue;
        if (!tt_lower(st, &prog, NULL)) {
            int n = tt_features_itervar(prog, false, NULL, 0);
            longest = n > longest ? n : longest;
            tt_program_free(prog);
        }
        tt_state_free(st);
    }
    return nk + (longest < 4096 ? longest : 4096);
}

static uint64_t neighbour(task *t, uint64_t index)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(&t->space, index, pos);
    for (int tries = 0; tries < 16; tries++) {
        int k = (int)tt_rng_below(&t->rng, (uint64_t)t->space.nknobs);
        if (t->space.knobs[k].n < 2)
            continue;
        int v = (int)tt_rng_below(&t->rng, (uint64_t)t->space.knobs[k].n);
        if (v == pos[k])
            continue;
        pos[k] = v;
        break;
    }
    return tt_space_encode(&t->space, pos);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = ((const float *)a)[0], y = ((const float *)b)[0];
    return x < y ? 1 : x > y ? -1 : 0;
}

static int model_plan_here(task *t, uint64_t *out, int n);

/* Runs child(t, fd, arg) in a forked process with a fresh RNG stream; returns the read end of
 * its pipe (or -1) and its pid.  The child must _exit.  The thread that calls this must be the
 * one that reaps the child (tt__tune_reap_search): it is, since one thread runs a task's whole
 * loop, and the child dies with that thread. */
int tt__tune_spawn_search(task *t, void (*child)(task *, int, void *), void *arg, pid_t *pid)
{
    uint64_t seed = tt_rng_next(&t->rng);
    int fd;
    /* A tuner killed with SIGKILL (an OOM kill, a stopped service) takes its search round with
     * it: training and evolving a population can run for minutes on a big one. */
    *pid = tt_child_fork(&fd, 1);
    if (*pid < 0)
        return -1;
    if (*pid == 0) {
        /* a tracker's round must not keep its port: killed and started again at once, the
         * tracker would find the port taken by a child still dying of its SIGKILL */
        tt_child_close_sockets(-1);
        tt_rng_seed(&t->rng, seed);
        child(t, fd, arg);
        _exit(1);
    }
    return fd;
}

void tt__tune_reap_search(int fd, pid_t pid)
{
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* XGBoost runs OpenMP threads, and libgomp does not survive fork(): a measurement child forked
 * after the model trained in this process would hang in its first parallel loop.  So the model
 * lives in a child of its own, which sends the plan back through a pipe. */
typedef struct {
    uint64_t *out;
    int n;
} plan_arg;

static void model_plan_child(task *t, int fd, void *arg)
{
    plan_arg *p = arg;
    int found = model_plan_here(t, p->out, p->n);
    bool ok = tt_write_all(fd, &found, sizeof(found)) &&
              (found <= 0 || tt_write_all(fd, p->out, sizeof(uint64_t) * (size_t)found));
    _exit(ok ? 0 : 1);
}

int tt__tune_model_plan(task *t, uint64_t *out, int n)
{
    plan_arg arg = {out, n};
    pid_t pid;
    int fd = tt__tune_spawn_search(t, model_plan_child, &arg, &pid);
    if (fd < 0)
        return 0;
    int found = 0;
    if (!tt_read_all(fd, &found, sizeof(found)) || found < 0 || found > n ||
        (found > 0 && !tt_read_all(fd, out, sizeof(uint64_t) * (size_t)found)))
        found = 0;
    tt__tune_reap_search(fd, pid);
    return found;
}

/* AutoTVM's diversity filter (search.md B4): of the best 64 x ratio candidates keep 64, picked
 * greedily, each scoring one point per knob whose value the picked set does not have yet. */
static int diversity_filter(task *t, uint64_t *cand, int n, double ratio)
{
    enum { PLAN = 64 };
    int pool = (int)(PLAN * ratio);
    if (pool > n)
        pool = n;
    if (pool <= PLAN)
        return n;
    int nk = t->space.nknobs;
    int(*pos)[TT_SPACE_MAX_KNOBS] = malloc(sizeof(*pos) * (size_t)pool);
    bool *used = calloc((size_t)pool, sizeof(bool));
    bool(*have)[TT_SPACE_MAX_CHOICES] = calloc(TT_SPACE_MAX_KNOBS, sizeof(*have));
    uint64_t picked[PLAN];
    int np = 0;
    if (!pos || !used || !have)
        goto out;
    for (int i = 0; i < pool; i++)
        tt_space_decode(&t->space, cand[i], pos[i]);
    while (np < PLAN) {
        int best = -1, best_score = -1;
        for (int i = 0; i < pool; i++) {
            if (used[i])
                continue;
            int score = 0;
            for (int k = 0; k < nk; k++)
                score += !have[k][pos[i][k]];
            if (score > best_score) {
                best = i;
                best_score = score;
            }
        }
        if (best < 0)
            break;
        used[best] = true;
        for (int k = 0; k < nk; k++)
            have[k][pos[best][k]] = true;
        picked[np++] = cand[best];
    }
    memcpy(cand, picked, sizeof(uint64_t) * (size_t)np);
    n = np;
out:
    free(pos);
    free(used);
    free(have);
    return n;
}

static int model_plan_here(task *t, uint64_t *out, int n)
{
    int nk = feature_columns(t), m = t->nrun;
    enum { WALKERS = 64, ITERS = 80, KEEP = 256 };
    float *x = malloc(sizeof(float) * (size_t)m * (size_t)nk),
          *y = malloc(sizeof(float) * (size_t)m),
          *row = malloc(sizeof(float) * WALKERS * (size_t)nk);
    double best = 1e-12;
    int found = 0;
    if (!x || !y || !row)
        goto out;
    for (int i = 0; i < m; i++)
        best = t->run_score[i] > best ? t->run_score[i] : best;
    for (int i = 0; i < m; i++) {
        model_row(t, t->run_idx[i], x + (size_t)i * (size_t)nk, nk);
        y[i] = (float)(t->run_score[i] / best);
    }
    tt_errbuf err;
    if (!t->model && tt_costmodel_create(TT_COSTMODEL_REG, 0, t->o->seed, &t->model, &err))
        goto out;
    /* AutoTVM's fit: boost until the training a-recall@64 stalls for 20 rounds. */
    if (tt_costmodel_train_recall(t->model, x, m, nk, y, 8000, 64, 20, NULL, &err))
        goto out;
    /* Simulated annealing over the index space (walkers kept per call). */
    uint64_t walk[WALKERS], prop[WALKERS];
    float cur[WALKERS], next[WALKERS];
    float heap[KEEP][3]; /* score, index (as two floats is lossy): keep indices aside */
    uint64_t heap_idx[KEEP];
    int nheap = 0;
    int nw = t->space.size < WALKERS ? (int)t->space.size : WALKERS;
    for (int w = 0; w < nw; w++) {
        walk[w] = tt_rng_below(&t->rng, t->space.size);
        model_row(t, walk[w], row + (size_t)w * (size_t)nk, nk);
    }
    if (tt_costmodel_predict(t->model, row, nw, nk, cur, &err))
        goto out;
    for (int it = 0; it < ITERS; it++) {
        double temp = 1.0 - (double)it / ITERS;
        for (int w = 0; w < nw; w++) {
            prop[w] = neighbour(t, walk[w]);
            model_row(t, prop[w], row + (size_t)w * (size_t)nk, nk);
        }
        if (tt_costmodel_predict(t->model, row, nw, nk, next, &err))
            goto out;
        for (int w = 0; w < nw; w++) {
            /* Remember every proposal worth keeping (duplicates filtered later). */
            if (nheap < KEEP) {
                heap[nheap][0] = next[w];
                heap_idx[nheap++] = prop[w];
            } else {
                int lo = 0;
                for (int h = 1; h < KEEP; h++)
                    if (heap[h][0] < heap[lo][0])
                        lo = h;
                if (next[w] > heap[lo][0]) {
                    heap[lo][0] = next[w];
                    heap_idx[lo] = prop[w];
                }
            }
            double p = exp(fmin((next[w] - cur[w]) / (temp + 1e-5), 1.0));
            if (next[w] >= cur[w] || tt_rng_uniform(&t->rng) < p) {
                walk[w] = prop[w];
                cur[w] = next[w];
            }
        }
    }
    /* Best first. */
    for (int h = 0; h < nheap; h++)
        heap[h][1] = (float)h;
    qsort(heap, (size_t)nheap, sizeof(heap[0]), cmp_desc);
    for (int h = 0; h < nheap && found < n; h++) {
        uint64_t idx = heap_idx[(int)heap[h][1]];
        bool dup = false;
        for (int j = 0; j < found && !dup; j++)
            dup = out[j] == idx;
        if (!dup)
            out[found++] = idx;
    }
    if (t->o->diversity > 1)
        found = diversity_filter(t, out, found, t->o->diversity);
out:
    free(x);
    free(y);
    free(row);
    return found;
}

/* Genetic algorithm (search.md B3): when the previous generation is measured, breed the next from
 * it and the elites, by throughput-weighted selection, one-point crossover and mutation. */
void tt__tune_ga_breed(task *t, int pop)
{
    int m = t->nrun, nk = t->space.nknobs;
    /* The generation just measured: the random first one, then the last bred. */
    int last_gen = t->ngen > 0 ? t->ngen : pop;
    int first = m - last_gen > 0 ? m - last_gen : 0;
    /* Pool: the last generation plus the elites. */
    int npool = 0;
    uint64_t pool[512];
    double score[512];
    for (int i = first; i < m && npool < 509; i++) {
        pool[npool] = t->run_idx[i];
        score[npool++] = t->run_score[i];
    }
    for (int e = 0; e < t->nelites && npool < 512; e++) {
        pool[npool] = t->elites[e];
        score[npool++] = t->elite_score[e];
    }
    /* New elites: the best three of the pool. */
    t->nelites = 0;
    for (int e = 0; e < 3 && e < npool; e++) {
        int b = -1;
        for (int i = 0; i < npool; i++) {
            bool taken = false;
            for (int j = 0; j < t->nelites; j++)
                taken |= t->elites[j] == pool[i];
            if (!taken && (b < 0 || score[i] > score[b]))
                b = i;
        }
        if (b < 0)
            break;
        t->elites[t->nelites] = pool[b];
        t->elite_score[t->nelites++] = score[b];
    }
    double maxs = 1e-8, sum = 0;
    for (int i = 0; i < npool; i++)
        maxs = score[i] + 1e-8 > maxs ? score[i] + 1e-8 : maxs;
    for (int i = 0; i < npool; i++)
        sum += (score[i] + 1e-8) / maxs;
    t->ngen = 0;
    t->gen_next = 0;
    for (int tries = 0; t->ngen < pop && tries < pop * 20 && npool > 0; tries++) {
        int parent[2];
        for (int p = 0; p < 2; p++) {
            double r = tt_rng_uniform(&t->rng) * sum;
            parent[p] = npool - 1;
            for (int i = 0; i < npool; i++) {
                r -= (score[i] + 1e-8) / maxs;
                if (r <= 0) {
                    parent[p] = i;
                    break;
                }
            }
        }
        int a[TT_SPACE_MAX_KNOBS], b[TT_SPACE_MAX_KNOBS];
        tt_space_decode(&t->space, pool[parent[0]], a);
        tt_space_decode(&t->space, pool[parent[1]], b);
        int cut = (int)tt_rng_below(&t->rng, (uint64_t)nk);
        for (int k = 0; k < nk; k++) {
            if (k >= cut)
                a[k] = b[k];
            if (tt_rng_uniform(&t->rng) < 0.1)
                a[k] = (int)tt_rng_below(&t->rng, (uint64_t)t->space.knobs[k].n);
        }
        t->gen[t->ngen++] = tt_space_encode(&t->space, a);
    }
}

/* ---- starting points of the template strategies ---- */

#define SEED_WORKLOADS    8 /* the nearest similar workloads consulted */
#define SEED_PER_WORKLOAD 2 /* configs taken from each */

static void seed_add(task *t, uint64_t index)
{
    for (int i = 0; i < t->nseeds; i++)
        if (t->seeds[i] == index)
            return;
    if (t->nseeds < (int)TT_ARRAY_LEN(t->seeds))
        t->seeds[t->nseeds++] = index;
}

/* Seeds the best SEED_PER_WORKLOAD distinct template configs of workload `key` measured on this
 * target and device, each mapped into this task's space; how many it added. */
static int seed_from(task *t, const char *key, int cores)
{
    tt_workload *w;
    if (tt_workload_parse(key, &w, NULL))
        return 0;
    tt_space sp;
    tt_similar best[SEED_PER_WORKLOAD];
    int n = 0;
    if (!(t->gpu ? tt_space_init_gpu(&sp, &w->dag, t->lim.max_threads, (int)t->lim.max_vthread,
                                     !t->space.no_shared, NULL)
                 : tt_space_init(&sp, &w->dag, cores, &t->isa, NULL)))
        n = tt_similar_best_of(t->db, key, t->target_text, t->device, &sp, best, SEED_PER_WORKLOAD);
    for (int i = 0; i < n; i++)
        seed_add(t, tt_space_nearest_index(&t->space, &sp, best[i].index));
    tt_workload_free(w);
    return n;
}

/* The template's default config, its cache-blocked configs (tt_space_blocked_index) and, for
 * window operators, its window configs (tt_space_window_index), then the best configs of the
 * SEED_WORKLOADS nearest other shapes of its operator (tt_similar_workloads) measured on this
 * target and device, each mapped to this workload's space knob by knob
 * (tt_space_nearest_index): good tiles and register tiles carry over between shapes of one
 * operator, so the first round already measures strong candidates.  (It once read the target's
 * whole history and kept the first 512 records of the operator, so a shape tuned 1000 trials
 * before filled them alone, and not with its best.) */
void tt__tune_load_seeds(task *t, int cores)
{
    if (!t->gpu) {
        seed_add(t, tt_space_default_index(&t->space, &t->isa));
        /* Cache-blocked, with padding inlined and computed once: on an AVX-512 Xeon these
         * reached the vendors' speed on matmul 1024 and the 7x7 convolutions where 200 trials
         * from the default did not (docs/tuning.md). */
        tt_cpu_caches caches; /* this machine's, when it measures (not a farm, a cross target
                                 or an objective function) */
        if (t->farm || t->target.triple[0] || t->o->objective)
            tt_cpu_caches_typical(&caches);
        else
            tt_cpu_caches_host(&caches);
        for (int k = 0; k < 4; k++) /* padding computed once or inlined; taps inside or not */
            seed_add(t, tt_space_blocked_index(&t->space, &t->isa, &caches, cores, k & 1, k & 2));
        /* Window operators (depthwise): the register tile over the whole window.  On the Xeon
         * these ran at 1.0-1.5x oneDNN where 200 trials from the others stayed at 0.84 on some
         * layers; rows up to 8 or up to 16, which neither wins everywhere (docs/tuning.md). */
        seed_add(t, tt_space_window_index(&t->space, &t->isa, 8));
        seed_add(t, tt_space_window_index(&t->space, &t->isa, 16));
    }
    if (!tt_workload_op_length(t->w->key))
        return;
    char *near[SEED_WORKLOADS];
    int nnear = 0, used = 0, mapped = 0;
    if (tt_similar_workloads(t->db, t->target_text, t->w->key, near, SEED_WORKLOADS, &nnear, NULL))
        nnear = 0;
    for (int k = 0; k < nnear; k++) {
        int added = seed_from(t, near[k], cores);
        mapped += added;
        used += added > 0;
        free(near[k]);
    }
    if (mapped && t->log)
        fprintf(t->log,
                "%s: starting from the template's default and %d configs of %d similar "
                "workload%s\n",
                t->w->key, mapped, used, used == 1 ? "" : "s");
}
