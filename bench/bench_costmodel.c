/* Cost-model quality: how well the pack-sum model (per-store features) ranks programs it was not
 * trained on, in two settings.
 *
 *   held-out records    each workload's programs split 80/20; one model trained on the 80% of
 *                       every workload ranks each workload's 20%.
 *   held-out workloads  a model trained on the other workloads' programs ranks every program
 *                       of a workload, a shape it never saw: those named --holdout W, or
 *                       with three workloads or more and no --holdout, each in turn.
 *                       Workloads named --train W are only trained on, in both settings
 *                       (does more history, other shapes and operators, help?).
 *
 * Each setting trains six variants, in one run on the same data:
 *   ansor        pack-sum; stops when the training RMSE stalls; labels throughput / best (Ansor's);
 *   validation   the same, stopped on held-out programs' pairwise accuracy;
 *   rank labels  validation stopping, labels the program's rank in its workload (evo's model
 *                until 2026-11-27);
 *   pairwise     the same program sums trained with a pairwise logistic loss (PACK_RANK);
 *   program rank one row per program, its stores side by side, XGBoost's pairwise ranking
 *                objective (PROG_RANK): evo's model;
 *   prog, fastest the same, trained on each program's fastest sample instead of its median.
 * and prints pairwise accuracy (of all pairs, and of the pairs more than 5% apart; a pair the
 * model scores alike counts half), top-1 and top-5 recall and TenSet's top-k score (best latency
 * of the ranked set over the best latency among the model's top k), averaged over workloads, next
 * to two anchors: a random ranking (mean of 200 shuffles) and the measurement itself, one repeat
 * sample of each program ranking another (the labels' own noise).  From that agreement a it
 * prints the range in which a model that knew the true times would agree with one sample,
 * [a, (1 + sqrt(2a - 1)) / 2], and each model's pairwise accuracy by how far apart the two
 * programs' labels are (<1% to >30%): where a ranking errs, on near-ties the measurement cannot
 * order or on pairs it can.
 *
 * With --remeasure N, up to N held-out programs of each workload are built again and measured
 * three more times, idle, as the tuner measures by default (tvm-tune run's CPU defaults, a fresh
 * child each time).  Every model, the recorded labels and one round are then also scored against
 * the median of those rounds: over all pairs, and over the resolved pairs, those every round
 * orders alike.  One round ranking another shows how far two measurements of the same programs
 * agree; the resolved pairs are those a measurement orders reliably.  Under --load this
 * asks what a farm needs answered: does a model trained on a busy device's labels rank programs
 * as they run on an idle one?
 *
 * usage: bench_costmodel [--db PATH] [--workload W]... [--holdout W]... [--train W]...
 *                        [--trials N] [--seed S] [--load K] [--remeasure N]
 *                        [--strategy evo|sketch-random] [--models M,...] [--per-workload N]
 * --models trains only the variants named (ansor, validation, rank, pairwise, prog, fastest;
 * all by default): Ansor's boosts up to 1,000 depth-10 rounds a turn, which on datasets of
 * thousands of programs a workload takes hours.  --per-workload N reads at most the first N
 * programs of each workload recorded in the database (a learning curve: how much history).
 * Without --db it first measures N (400) programs of each workload (default
 * matmul:M=128,N=128,K=128) with `tvm-tune run --strategy evo`'s search and measurement into a
 * temporary database, or into --db PATH when that file does not exist yet (kept, for another
 * run with --db); --load K runs K busy processes meanwhile, as a shared farm device would (the
 * labels of training and held-out programs are then both noisy).  --strategy sketch-random
 * measures random programs of the same sketches instead (TenSet's kind of dataset): how well a
 * model ranks the whole space, where evo's programs ask how well it ranks a search's trajectory,
 * whose later programs lie within a few percent of each other. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/child.h"
#include "base/clock.h"
#include "codegen/codegen.h"
#include "costmodel/costmodel.h"
#include "costmodel/features.h"
#include "db/db.h"
#include "rpc/measure.h"
#include "schedule/loop_ir.h"
#include "tuner/evolution.h"
#include "tuner/tune.h"
#include "anchors.h"

enum { MAX_WORKLOADS = 64, SHUFFLES = 200, REMEASURE_ROUNDS = 3 };

/* Every valid measured program of the workloads: feature rows, latency, workload index. */
typedef struct {
    float *rows;
    int *row_prog;
    int nrows, cap;
    double *lat;
    double *sample[2]; /* two repeat samples of the measurement: the labels' own noise */
    double *fastest;   /* the fastest sample: a label that a busy device's delays leave alone */
    int *wl;
    char **config; /* the schedule's steps, to build it again */
    int nprog, capp;
    tt_workload *w; /* the workload being read */
    int cur;
    int limit,
        taken; /* --per-workload: at most limit programs of each workload, the first recorded */
    /* --remeasure: each round's time (fastest sample) of the programs measured again (0 = not), and
     * their median, the reference the models are also scored against */
    double *round[REMEASURE_ROUNDS], *truth;
} dataset;

static int add_row(void *ctx, const tt_db_row *r)
{
    dataset *d = ctx;
    if (r->error_no || r->median_s <= 0 || r->config_kind != TT_CONFIG_STEPS ||
        !strcmp(r->config, "[]") || (d->limit && d->taken >= d->limit))
        return 0;
    tt_state *st;
    if (tt_state_from_json(&d->w->dag, r->config, &st, NULL))
        return 0;
    float *rows;
    int nr = tt_evo_features(st, NULL, &rows, NULL);
    tt_state_free(st);
    if (nr <= 0)
        return 0;
    if (d->nrows + nr > d->cap) {
        d->cap = (d->nrows + nr) * 2;
        d->rows = realloc(d->rows, sizeof(float) * TT_STORE_FEATURES * (size_t)d->cap);
        d->row_prog = realloc(d->row_prog, sizeof(int) * (size_t)d->cap);
    }
    if (d->nprog == d->capp) {
        d->capp = d->capp ? 2 * d->capp : 256;
        d->lat = realloc(d->lat, sizeof(double) * (size_t)d->capp);
        d->sample[0] = realloc(d->sample[0], sizeof(double) * (size_t)d->capp);
        d->sample[1] = realloc(d->sample[1], sizeof(double) * (size_t)d->capp);
        d->fastest = realloc(d->fastest, sizeof(double) * (size_t)d->capp);
        d->wl = realloc(d->wl, sizeof(int) * (size_t)d->capp);
        d->config = realloc(d->config, sizeof(char *) * (size_t)d->capp);
    }
    if (!d->rows || !d->row_prog || !d->lat || !d->sample[0] || !d->sample[1] || !d->fastest ||
        !d->wl || !d->config || !(d->config[d->nprog] = strdup(r->config)))
        return 1;
    memcpy(d->rows + (size_t)d->nrows * TT_STORE_FEATURES, rows,
           sizeof(float) * TT_STORE_FEATURES * (size_t)nr);
    for (int i = 0; i < nr; i++)
        d->row_prog[d->nrows + i] = d->nprog;
    d->nrows += nr;
    d->wl[d->nprog] = d->cur;
    /* The last two samples: the first of a measurement may still be warming caches. */
    d->sample[0][d->nprog] = r->ncosts >= 2 ? r->costs[r->ncosts - 2] : r->median_s;
    d->sample[1][d->nprog] = r->ncosts >= 2 ? r->costs[r->ncosts - 1] : r->median_s;
    /* what the tuner's models learn from, as a latency */
    d->fastest[d->nprog] = 1.0 / tt_tune_label(1.0, r->costs, r->ncosts, r->median_s, 0);
    d->lat[d->nprog++] = r->median_s;
    d->taken++;
    free(rows);
    return 0;
}

/* Pairs by how far apart their latencies are (relative to the faster): where a ranking errs. */
enum { NGAPS = 6 };
static const double gap_upper[NGAPS] = {0.01, 0.02, 0.05, 0.10, 0.30, INFINITY};
static const char *const gap_name[NGAPS] = {"<1%", "1-2%", "2-5%", "5-10%", "10-30%", ">30%"};

typedef struct {
    double pairwise, apart, top1, top5, score1, score5;
    double gap_pairs[NGAPS], gap_agree[NGAPS]; /* counts, pooled over workloads */
} quality;

/* Pairs at least this far apart (relative) count for the `apart` accuracy: beyond the 1-3%
 * between a measurement's own repeat samples. */
#define APART 0.05

static void quality_add(quality *acc, quality q, double w)
{
    acc->pairwise += q.pairwise * w;
    acc->apart += q.apart * w;
    acc->top1 += q.top1 * w;
    acc->top5 += q.top5 * w;
    acc->score1 += q.score1 * w;
    acc->score5 += q.score5 * w;
    for (int g = 0; g < NGAPS; g++) {
        acc->gap_pairs[g] += q.gap_pairs[g] * w;
        acc->gap_agree[g] += q.gap_agree[g] * w;
    }
}

/* Whether a ranking orders a pair of latencies a != b as they are: 1 or 0, and a tie in score
 * (sa == sb) is a coin's toss, half right. */
static double pair_right(double a, double b, double sa, double sb)
{
    return sa == sb ? 0.5 : (a < b) == (sa > sb);
}

/* The ranking `score` (higher = predicted faster) of the programs ids[0..n) against their
 * latencies. */
static quality evaluate(const double *lat, const double *score, const int *ids, int n)
{
    quality q = {0};
    int pairs = 0, best = 0, pairs_apart = 0;
    double agree = 0, agree_apart = 0;
    for (int i = 0; i < n; i++) {
        if (lat[ids[i]] < lat[ids[best]])
            best = i;
        for (int j = i + 1; j < n; j++) {
            double a = lat[ids[i]], b = lat[ids[j]];
            if (a == b)
                continue;
            double right = pair_right(a, b, score[i], score[j]);
            pairs++;
            agree += right;
            double gap = fabs(a - b) / fmin(a, b);
            if (gap > APART) {
                pairs_apart++;
                agree_apart += right;
            }
            int g = 0;
            while (gap >= gap_upper[g])
                g++;
            q.gap_pairs[g]++;
            q.gap_agree[g] += right;
        }
    }
    q.pairwise = pairs ? agree / pairs : 0;
    q.apart = pairs_apart ? agree_apart / pairs_apart : 1;
    int top[5], nt = 0;
    for (int k = 0; k < 5 && k < n; k++) {
        int b = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int j = 0; j < nt; j++)
                taken |= top[j] == i;
            if (!taken && (b < 0 || score[i] > score[b]))
                b = i;
        }
        top[nt++] = b;
    }
    double best5 = INFINITY;
    for (int k = 0; k < nt; k++) {
        if (top[k] == best) {
            q.top5 = 1;
            if (k == 0)
                q.top1 = 1;
        }
        if (lat[ids[top[k]]] < best5)
            best5 = lat[ids[top[k]]];
    }
    q.score1 = lat[ids[best]] / lat[ids[top[0]]];
    q.score5 = lat[ids[best]] / best5;
    return q;
}

/* Against the re-measurement (--remeasure): all pairs of the programs measured again, ordered by
 * the median of the rounds, and the resolved pairs, those every round orders alike.  Pairs the
 * rounds disagree on are near-ties no measurement orders reliably. */
typedef struct {
    double pairwise, resolved, share; /* share: resolved pairs among all pairs */
} truth_quality;

static void truth_add(truth_quality *acc, truth_quality q, double w)
{
    acc->pairwise += q.pairwise * w;
    acc->resolved += q.resolved * w;
    acc->share += q.share * w;
}

static truth_quality evaluate_truth(const dataset *d, const double *score, const int *ids, int n)
{
    truth_quality q = {0};
    int pairs = 0, resolved = 0;
    double agree = 0, agree_resolved = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double a = d->truth[ids[i]], b = d->truth[ids[j]];
            if (a == b)
                continue;
            double right = pair_right(a, b, score[i], score[j]);
            bool alike = true;
            for (int k = 0; k < REMEASURE_ROUNDS; k++)
                alike &= (d->round[k][ids[i]] < d->round[k][ids[j]]) == (a < b);
            pairs++;
            agree += right;
            resolved += alike;
            agree_resolved += alike ? right : 0;
        }
    q.pairwise = pairs ? agree / pairs : 0;
    q.resolved = resolved ? agree_resolved / resolved : 0;
    q.share = pairs ? (double)resolved / pairs : 0;
    return q;
}

/* How often one round orders a pair as another does, over all pairs and pairs of rounds: how far
 * two measurements of these programs agree. */
static double round_agreement(const dataset *d, const int *ids, int n)
{
    int pairs = 0, agree = 0;
    for (int a = 0; a < REMEASURE_ROUNDS; a++)
        for (int b = a + 1; b < REMEASURE_ROUNDS; b++)
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++) {
                    const double *ra = d->round[a], *rb = d->round[b];
                    if (ra[ids[i]] == ra[ids[j]] || rb[ids[i]] == rb[ids[j]])
                        continue;
                    pairs++;
                    agree += (ra[ids[i]] < ra[ids[j]]) == (rb[ids[i]] < rb[ids[j]]);
                }
    return pairs ? (double)agree / pairs : 0;
}

typedef struct {
    const char *name, *key; /* key: what --models names it */
    tt_costmodel_objective obj;
    tt_costmodel_stopping stopping;
    tt_costmodel_labels_kind labels;
    bool fastest; /* trained on each program's fastest sample instead of its median */
} variant;

static const variant variants[] = {
    {"ansor", "ansor", TT_COSTMODEL_PACK_SUM, TT_STOP_TRAINING, TT_LABELS_RATIO, false},
    {"validation", "validation", TT_COSTMODEL_PACK_SUM, TT_STOP_VALIDATION, TT_LABELS_RATIO, false},
    {"rank labels", "rank", TT_COSTMODEL_PACK_SUM, TT_STOP_VALIDATION, TT_LABELS_RANK, false},
    {"pairwise", "pairwise", TT_COSTMODEL_PACK_RANK, TT_STOP_VALIDATION, TT_LABELS_RANK, false},
    {"program rank", "prog", TT_COSTMODEL_PROG_RANK, TT_STOP_VALIDATION, TT_LABELS_RANK, false},
    {"prog, fastest", "fastest", TT_COSTMODEL_PROG_RANK, TT_STOP_VALIDATION, TT_LABELS_RANK, true},
};
enum { NVARIANTS = sizeof(variants) / sizeof(variants[0]) };

/* The variants --models chose (all by default), and the first of them, which also computes the
 * anchors (random ranking, repeat sample, the re-measurement's labels). */
static bool enabled[NVARIANTS];
static int first_variant;

/* "prog,fastest" -> enabled[]; false when a name is unknown or none is given. */
static bool parse_models(const char *list)
{
    memset(enabled, 0, sizeof(enabled));
    first_variant = -1;
    while (*list) {
        size_t n = strcspn(list, ",");
        int v = 0;
        while (v < NVARIANTS && (strlen(variants[v].key) != n || strncmp(variants[v].key, list, n)))
            v++;
        if (v == NVARIANTS) {
            fprintf(stderr, "bench_costmodel: unknown model '%.*s' in --models\n", (int)n, list);
            return false;
        }
        enabled[v] = true;
        list += n + (list[n] == ',');
    }
    for (int v = NVARIANTS - 1; v >= 0; v--)
        if (enabled[v])
            first_variant = v;
    return first_variant >= 0;
}

typedef struct {
    quality q[NVARIANTS], random, repeat;
    double rounds[NVARIANTS];
    int ntrain, ntest, nsets;
    /* against the re-measurement: each variant, the recorded labels, one round against another */
    truth_quality t[NVARIANTS], t_labels, t_fastest;
    double t_rounds;
    int tsets, tprogs, tturns;
} result;

/* Trains each variant on the programs with train[p] and ranks, per workload, the programs with
 * test[p]; averages over the workloads that have at least 10 test programs. */
static int run_setting(const dataset *d, int nwl, const bool *train, const bool *test, tt_rng *rng,
                       result *res)
{
    memset(res, 0, sizeof(*res));
    float *tx = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)d->nrows);
    float *ex = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)d->nrows);
    int *tp = malloc(sizeof(int) * (size_t)d->nrows), *ep = malloc(sizeof(int) * (size_t)d->nrows);
    int *map = malloc(sizeof(int) * (size_t)d->nprog), *tids = malloc(sizeof(int) * d->nprog);
    int *eids = malloc(sizeof(int) * (size_t)d->nprog), *group = malloc(sizeof(int) * d->nprog);
    double *thr = malloc(sizeof(double) * (size_t)d->nprog);
    float *y = malloc(sizeof(float) * (size_t)d->nprog), *pred = malloc(sizeof(float) * d->nprog);
    double *score = malloc(sizeof(double) * (size_t)d->nprog);
    int *ids = malloc(sizeof(int) * (size_t)d->nprog);
    if (!tx || !ex || !tp || !ep || !map || !tids || !eids || !group || !thr || !y || !pred ||
        !score || !ids)
        return 1;
    int ntp = 0, nep = 0, ntr = 0, nte = 0;
    for (int p = 0; p < d->nprog; p++) {
        map[p] = -1;
        if (train[p]) {
            map[p] = ntp;
            group[ntp] = d->wl[p];
            tids[ntp++] = p;
        } else if (test[p]) {
            map[p] = nep;
            eids[nep++] = p;
        }
    }
    for (int r = 0; r < d->nrows; r++) {
        int p = d->row_prog[r];
        const float *src = d->rows + (size_t)r * TT_STORE_FEATURES;
        if (train[p]) {
            memcpy(tx + (size_t)ntr * TT_STORE_FEATURES, src, sizeof(float) * TT_STORE_FEATURES);
            tp[ntr++] = map[p];
        } else if (test[p]) {
            memcpy(ex + (size_t)nte * TT_STORE_FEATURES, src, sizeof(float) * TT_STORE_FEATURES);
            ep[nte++] = map[p];
        }
    }
    res->ntrain = ntp;
    res->ntest = nep;
    tt_errbuf err = {{0}};
    for (int v = 0; v < NVARIANTS; v++) {
        if (!enabled[v])
            continue;
        tt_costmodel *m;
        int rounds = 0;
        for (int i = 0; i < ntp; i++)
            thr[i] = 1.0 / (variants[v].fastest ? d->fastest : d->lat)[tids[i]];
        if (tt_costmodel_labels(variants[v].labels, thr, group, ntp, y, &err) ||
            tt_costmodel_create(variants[v].obj, 0, 43, &m, &err))
            goto fail;
        tt_costmodel_set_stopping(m, variants[v].stopping);
        if (tt_costmodel_train_packed(m, tx, ntr, TT_STORE_FEATURES, tp, y, ntp, 1000, &rounds,
                                      &err) ||
            tt_costmodel_predict_packed(m, ex, nte, TT_STORE_FEATURES, ep, nep, pred, &err)) {
            tt_costmodel_free(m);
            goto fail;
        }
        tt_costmodel_free(m);
        res->rounds[v] = rounds;
        int sets = 0;
        for (int w = 0; w < nwl; w++) {
            int n = 0;
            for (int i = 0; i < nep; i++)
                if (d->wl[eids[i]] == w) {
                    ids[n] = eids[i];
                    score[n++] = pred[i];
                }
            if (n < 10)
                continue;
            sets++;
            quality_add(&res->q[v], evaluate(d->lat, score, ids, n), 1);
            if (d->truth) {
                /* the programs of this workload measured again: first in ids and score */
                int nt = 0;
                for (int i = 0; i < n; i++)
                    if (d->truth[ids[i]] > 0) {
                        int id = ids[i];
                        double sc = score[i];
                        ids[i] = ids[nt], score[i] = score[nt];
                        ids[nt] = id, score[nt++] = sc;
                    }
                if (nt >= 10) {
                    truth_add(&res->t[v], evaluate_truth(d, score, ids, nt), 1);
                    if (v == first_variant) {
                        double *rec = malloc(sizeof(double) * (size_t)nt);
                        if (!rec)
                            return 1;
                        for (int i = 0; i < nt; i++)
                            rec[i] = -d->lat[ids[i]];
                        truth_add(&res->t_labels, evaluate_truth(d, rec, ids, nt), 1);
                        for (int i = 0; i < nt; i++)
                            rec[i] = -d->fastest[ids[i]];
                        truth_add(&res->t_fastest, evaluate_truth(d, rec, ids, nt), 1);
                        free(rec);
                        res->t_rounds += round_agreement(d, ids, nt);
                        res->tsets++;
                        res->tprogs += nt;
                    }
                }
            }
            if (v == first_variant) {
                double *own = malloc(sizeof(double) * (size_t)n);
                if (!own)
                    return 1;
                for (int i = 0; i < n; i++)
                    own[i] = -d->sample[1][ids[i]];
                quality_add(&res->repeat, evaluate(d->sample[0], own, ids, n), 1);
                free(own);
            }
            if (v == first_variant)
                for (int s = 0; s < SHUFFLES; s++) {
                    for (int i = 0; i < n; i++)
                        score[i] = tt_rng_uniform(rng);
                    quality_add(&res->random, evaluate(d->lat, score, ids, n), 1.0 / SHUFFLES);
                }
        }
        if (!sets)
            goto fail_quiet;
        quality_add(&res->q[v], res->q[v], 1.0 / sets - 1);
        if (v == first_variant) {
            quality_add(&res->random, res->random, 1.0 / sets - 1);
            quality_add(&res->repeat, res->repeat, 1.0 / sets - 1);
        }
        res->nsets = sets;
    }
    if (res->tsets) {
        for (int v = 0; v < NVARIANTS; v++)
            truth_add(&res->t[v], res->t[v], 1.0 / res->tsets - 1);
        truth_add(&res->t_labels, res->t_labels, 1.0 / res->tsets - 1);
        truth_add(&res->t_fastest, res->t_fastest, 1.0 / res->tsets - 1);
        res->t_rounds /= res->tsets;
    }
    free(tx), free(ex), free(tp), free(ep), free(map), free(tids), free(eids), free(group);
    free(thr), free(y), free(pred), free(score), free(ids);
    return 0;
fail:
    fprintf(stderr, "bench_costmodel: %s\n", err.msg);
fail_quiet:
    return 1;
}

/* acc += r / n, for means over several settings. */
static void result_add(result *acc, const result *r, int n)
{
    for (int v = 0; v < NVARIANTS; v++) {
        quality_add(&acc->q[v], r->q[v], 1.0 / n);
        acc->rounds[v] += r->rounds[v] / n;
    }
    quality_add(&acc->random, r->random, 1.0 / n);
    quality_add(&acc->repeat, r->repeat, 1.0 / n);
    if (r->tsets) {
        /* summed: result_mean_truth divides by the settings that had any */
        for (int v = 0; v < NVARIANTS; v++)
            truth_add(&acc->t[v], r->t[v], 1);
        truth_add(&acc->t_labels, r->t_labels, 1);
        truth_add(&acc->t_fastest, r->t_fastest, 1);
        acc->t_rounds += r->t_rounds;
        acc->tturns++;
        acc->tsets += r->tsets;
        acc->tprogs += r->tprogs;
    }
    acc->ntrain += r->ntrain;
    acc->ntest += r->ntest;
    acc->nsets += r->nsets;
}

static void result_mean_truth(result *acc)
{
    if (!acc->tturns)
        return;
    for (int v = 0; v < NVARIANTS; v++)
        truth_add(&acc->t[v], acc->t[v], 1.0 / acc->tturns - 1);
    truth_add(&acc->t_labels, acc->t_labels, 1.0 / acc->tturns - 1);
    truth_add(&acc->t_fastest, acc->t_fastest, 1.0 / acc->tturns - 1);
    acc->t_rounds /= acc->tturns;
}

static void print_result(const char *title, const result *r)
{
    printf("\n%s: %d programs trained on, %d ranked, mean over %d workload(s)\n", title, r->ntrain,
           r->ntest, r->nsets);
    printf("%-14s %7s %9s %9s %7s %7s %9s %9s\n", "model", "rounds", "pairwise", "apart>5%",
           "top-1", "top-5", "TenSet@1", "TenSet@5");
    for (int v = 0; v < NVARIANTS; v++)
        if (enabled[v])
            printf("%-14s %7.0f %9.3f %9.3f %7.3f %7.3f %9.3f %9.3f\n", variants[v].name,
                   r->rounds[v], r->q[v].pairwise, r->q[v].apart, r->q[v].top1, r->q[v].top5,
                   r->q[v].score1, r->q[v].score5);
    printf("%-14s %7s %9.3f %9.3f %7.3f %7.3f %9.3f %9.3f\n", "random", "-", r->random.pairwise,
           r->random.apart, r->random.top1, r->random.top5, r->random.score1, r->random.score5);
    printf("%-14s %7s %9.3f %9.3f %7.3f %7.3f %9.3f %9.3f\n", "repeat sample", "-",
           r->repeat.pairwise, r->repeat.apart, r->repeat.top1, r->repeat.top5, r->repeat.score1,
           r->repeat.score5);
    /* One sample ranks another with agreement a = mean(p^2 + (1-p)^2), p the chance that one
     * sample orders a pair as the true times do; a model that knew the true times would agree
     * with one sample on mean(p) of the pairs, which lies in [a, (1 + sqrt(2a - 1)) / 2]
     * (p^2 + (1-p)^2 is convex, and below p on [1/2, 1]).  The labels are medians of several
     * samples, which that model would order at least as well. */
    double a = r->repeat.pairwise;
    printf("a model that knew the true times would agree with one sample on %.3f-%.3f of the "
           "pairs (from the repeat samples' %.3f), with the median labels at least as often\n",
           a, (1 + sqrt(fmax(2 * a - 1, 0))) / 2, a);
    printf("pairwise by the gap between the two programs' labels (the repeat sample: between "
           "its samples): share of pairs, then");
    for (int v = 0; v < NVARIANTS; v++)
        if (enabled[v])
            printf(" %s /", variants[v].name);
    printf(" repeat sample\n");
    double all = 0;
    for (int g = 0; g < NGAPS; g++)
        all += r->q[first_variant].gap_pairs[g];
    for (int g = 0; g < NGAPS; g++) {
        printf("  %-7s %5.1f%%:", gap_name[g],
               all > 0 ? 100 * r->q[first_variant].gap_pairs[g] / all : 0);
        for (int v = 0; v < NVARIANTS; v++)
            if (enabled[v])
                printf(" %6.3f", r->q[v].gap_pairs[g] > 0
                                     ? r->q[v].gap_agree[g] / r->q[v].gap_pairs[g]
                                     : NAN);
        printf(" %6.3f\n",
               r->repeat.gap_pairs[g] > 0 ? r->repeat.gap_agree[g] / r->repeat.gap_pairs[g] : NAN);
    }
    if (!r->tsets)
        return;
    printf("against a re-measurement: %d of these programs measured again, %d rounds, idle; "
           "%.1f%% of their pairs resolved (every round orders them alike)\n",
           r->tprogs, REMEASURE_ROUNDS, 100 * r->t[first_variant].share);
    printf("%-14s %9s %9s\n", "model", "pairwise", "resolved");
    for (int v = 0; v < NVARIANTS; v++)
        if (enabled[v])
            printf("%-14s %9.3f %9.3f\n", variants[v].name, r->t[v].pairwise, r->t[v].resolved);
    printf("%-14s %9.3f %9.3f   (the recorded medians: what the models were trained on)\n",
           "labels", r->t_labels.pairwise, r->t_labels.resolved);
    printf("%-14s %9.3f %9.3f   (the recorded fastest samples)\n", "fastest sample",
           r->t_fastest.pairwise, r->t_fastest.resolved);
    printf("%-14s %9.3f %9s   (one round ranking another: how far two measurements agree)\n",
           "one round", r->t_rounds, "1");
}

/* Builds the `chosen` programs again and measures each REMEASURE_ROUNDS times, idle, with the
 * tuner's default measurement (5 samples of at least 20 ms), each time in a fresh child as the
 * tuner does, round after round so that a drift in the machine's speed touches every program
 * alike.  Fills d->round and d->truth (0 where a measurement failed). */
enum { MAX_PARAMS = 16 };
static int remeasure(dataset *d, tt_workload *const *wls, const bool *chosen)
{
    tt_errbuf err = {{0}};
    tt_target host;
    int rc = 1;
    d->truth = calloc((size_t)d->nprog, sizeof(double));
    bool allocated = d->truth != NULL;
    for (int k = 0; k < REMEASURE_ROUNDS; k++)
        allocated &= (d->round[k] = calloc((size_t)d->nprog, sizeof(double))) != NULL;
    char(*so)[96] = calloc((size_t)d->nprog, sizeof(*so));
    tt_measure_buffer(*bufs)[MAX_PARAMS] = calloc((size_t)d->nprog, sizeof(*bufs));
    int *nbufs = calloc((size_t)d->nprog, sizeof(int)),
        *ninputs = calloc((size_t)d->nprog, sizeof(int));
    if (!allocated || !so || !bufs || !nbufs || !ninputs) {
        tt_err(&err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (tt_target_parse("llvm", &host, &err))
        goto out;
    for (int p = 0; p < d->nprog; p++) {
        if (!chosen[p])
            continue;
        tt_state *st;
        tt_program *prog;
        if (tt_state_from_json(&wls[d->wl[p]]->dag, d->config[p], &st, &err))
            goto out;
        tt_status s = tt_lower(st, &prog, &err);
        tt_state_free(st);
        if (s)
            goto out;
        if (prog->nparams > MAX_PARAMS) {
            tt_err(&err, TT_ERR_UNSUPPORTED, "program %d has %d parameters (at most %d)", p,
                   prog->nparams, MAX_PARAMS);
            tt_program_free(prog);
            goto out;
        }
        for (int i = 0; i < prog->nparams; i++) {
            const tt_buffer *b = tt_program_param(prog, i);
            bufs[p][i] = (tt_measure_buffer){.elem = tt_tune_measure_elem(b->dtype),
                                             .count = b->size}; /* inputs of zeros, unchecked */
        }
        nbufs[p] = prog->nparams;
        ninputs[p] = prog->ninputs;
        snprintf(so[p], sizeof(so[p]), "/tmp/bench-costmodel-%d-%d.so", (int)getpid(), p);
        s = tt_codegen_llvm(prog, &host, "kernel", so[p], NULL, NULL, &err);
        tt_program_free(prog);
        if (s)
            goto out;
    }
    /* as the tuner measures (tvm-tune run's CPU defaults), a round's time the fastest sample */
    tt_measure_options mo = {
        .number = -1, .repeat = -1, .min_repeat_ms = -1, .repeat_budget_ms = -1, .timeout_s = -1};
    tt_tune_measure_defaults("llvm", &mo);
    for (int k = 0; k < REMEASURE_ROUNDS; k++)
        for (int p = 0; p < d->nprog; p++) {
            tt_measure_result m;
            if (!chosen[p])
                continue;
            if (tt_measure_run(so[p], "kernel", bufs[p], nbufs[p], ninputs[p], &mo, &m, &err))
                goto out;
            if (m.error_no || m.ncosts < 1)
                fprintf(stderr, "bench_costmodel: program %d measured again: %s\n", p,
                        m.error_text);
            else
                d->round[k][p] = 1.0 / tt_tune_label(1.0, m.costs, m.ncosts, 0, 0);
        }
    for (int p = 0; p < d->nprog; p++) {
        double r[REMEASURE_ROUNDS];
        bool measured = chosen[p];
        for (int k = 0; k < REMEASURE_ROUNDS; k++) {
            r[k] = d->round[k][p];
            measured &= r[k] > 0;
        }
        if (measured)
            d->truth[p] = tt_median(r, REMEASURE_ROUNDS);
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench_costmodel: measuring again: %s\n", err.msg);
    for (int p = 0; so && p < d->nprog; p++)
        if (so[p][0])
            unlink(so[p]);
    free(so), free(bufs), free(nbufs), free(ninputs);
    return rc;
}

/* K processes that spin until killed: the load of a shared device.  They die with the bench,
 * also when it is killed with SIGKILL (tt_child_fork), instead of spinning on. */
static void start_load(pid_t *pids, int k)
{
    for (int i = 0; i < k; i++) {
        int fd;
        pids[i] = tt_child_fork(&fd, 0);
        if (pids[i] < 0)
            continue;
        close(fd); /* no word goes back: the pipe only comes with the tie */
        if (pids[i] == 0) {
            volatile unsigned long x = 0;
            for (;;)
                x = x * 6364136223846793005ul + 1;
        }
    }
}

static void stop_load(pid_t *pids, int k)
{
    for (int i = 0; i < k; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
}

int main(int argc, char **argv)
{
    const char *db_path = NULL, *names[MAX_WORKLOADS];
    bool holdout[MAX_WORKLOADS] = {false}, train_only[MAX_WORKLOADS] = {false};
    int nwl = 0, load = 0, remeasure_n = 0, per_workload = 0;
    int64_t trials = 400;
    uint64_t seed = 1;
    parse_models("ansor,validation,rank,pairwise,prog,fastest");
    tt_strategy strategy = TT_STRATEGY_EVO;
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--db") && more)
            db_path = argv[++i];
        else if ((!strcmp(argv[i], "--workload") || !strcmp(argv[i], "--holdout") ||
                  !strcmp(argv[i], "--train")) &&
                 more && nwl < MAX_WORKLOADS) {
            holdout[nwl] = !strcmp(argv[i], "--holdout");
            train_only[nwl] = !strcmp(argv[i], "--train");
            names[nwl++] = argv[++i];
        } else if (!strcmp(argv[i], "--trials") && more)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && more)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--load") && more)
            load = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--remeasure") && more)
            remeasure_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--per-workload") && more)
            per_workload = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--models") && more) {
            if (!parse_models(argv[++i]))
                return 2;
        } else if (!strcmp(argv[i], "--strategy") && more &&
                   tt_strategy_parse(argv[i + 1], &strategy) && tt_strategy_uses_sketches(strategy))
            i++;
        else {
            fprintf(stderr, "usage: bench_costmodel [--db PATH] [--workload W]... [--holdout W]... "
                            "[--train W]... [--trials N] [--seed S] [--load K] [--remeasure N] "
                            "[--strategy evo|sketch-random] [--models M,...] "
                            "[--per-workload N]\n"
                            "  --models: of ansor, validation, rank, pairwise, prog, fastest "
                            "(all by default)\n");
            return 2;
        }
    }
    if (!nwl)
        names[nwl++] = "matmul:M=128,N=128,K=128";
    int nheld = 0, nranked = 0;
    for (int w = 0; w < nwl; w++) {
        nheld += holdout[w];
        nranked += !train_only[w];
    }
    if (nheld == nranked) {
        fprintf(stderr, "bench_costmodel: %s\n",
                nheld == nwl ? "every workload is held out; nothing to train on"
                             : "no --workload whose records are split 80/20; nothing to rank");
        return 2;
    }
    char tmp[128] = "";
    tt_errbuf err = {{0}};
    /* --db naming a file that does not exist yet: measure into it and keep it */
    bool measure_into_db = db_path && access(db_path, F_OK) != 0;
    if (!db_path || measure_into_db) {
        if (!db_path) {
            snprintf(tmp, sizeof(tmp), "/tmp/bench-costmodel-%d.db", (int)getpid());
            db_path = tmp;
        }
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = names;
        o.nworkloads = nwl;
        o.trials = trials;
        o.strategy = strategy;
        o.policy = TT_SCHED_ROUND_ROBIN;
        o.population = 512;
        o.db_path = db_path;
        o.seed = seed;
        o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
        o.measure.number = o.measure.repeat = -1;
        o.measure.min_repeat_ms = o.measure.repeat_budget_ms = o.measure.timeout_s = -1;
        tt_tune_measure_defaults("llvm", &o.measure); /* what tvm-tune run measures with */
        tt_tune_summary sum[MAX_WORKLOADS];
        pid_t pids[64] = {0};
        load = load > 64 ? 64 : load;
        printf("measuring %lld programs of each of %d workload(s) (%s)%s ...\n", (long long)trials,
               nwl, tt_strategy_name(strategy), load ? ", with busy processes beside" : "");
        fflush(stdout);
        start_load(pids, load);
        tt_status s = tt_tune_run(&o, sum, NULL, &err);
        stop_load(pids, load);
        if (s) {
            fprintf(stderr, "bench_costmodel: %s\n", err.msg);
            return 1;
        }
    }
    dataset d;
    memset(&d, 0, sizeof(d));
    d.limit = per_workload > 0 ? per_workload : 0;
    tt_workload *wls[MAX_WORKLOADS];
    tt_db *db;
    if (tt_db_open(db_path, TT_DB_READONLY, &db, &err)) {
        fprintf(stderr, "bench_costmodel: %s\n", err.msg);
        return 1;
    }
    for (int w = 0; w < nwl; w++) {
        int before = d.nprog;
        d.cur = w;
        d.taken = 0;
        if (tt_workload_parse(names[w], &d.w, &err)) {
            fprintf(stderr, "bench_costmodel: %s\n", err.msg);
            return 1;
        }
        tt_db_filter f = {.workload = d.w->key};
        if (tt_db_history(db, &f, add_row, &d)) {
            fprintf(stderr, "bench_costmodel: reading %s failed\n", db_path);
            return 1;
        }
        printf("%s%s: %d programs\n", d.w->key,
               holdout[w]      ? " (held out)"
               : train_only[w] ? " (only trained on)"
                               : "",
               d.nprog - before);
        if (d.nprog - before < 50) {
            fprintf(stderr, "bench_costmodel: only %d valid programs of %s in %s (need 50)\n",
                    d.nprog - before, d.w->key, db_path);
            return 1;
        }
        wls[w] = d.w;
    }
    tt_db_close(db);
    char cpu[128];
    printf("\ncost model: XGBoost %s, pack-sum, %d features per store; CPU %s; %s\n",
           tt_costmodel_backend_version(), TT_STORE_FEATURES, tt_bench_cpu_name(cpu, sizeof cpu),
           load     ? "measured beside busy processes"
           : tmp[0] ? "measured idle"
                    : "as recorded in the database");
    tt_rng rng;
    tt_rng_seed(&rng, seed);
    bool *train = calloc((size_t)d.nprog, sizeof(bool)), *test = calloc((size_t)d.nprog, 1);
    result r;
    /* Held-out records: 80/20 within each trained-on workload. */
    for (int p = 0; p < d.nprog; p++) {
        bool in = !holdout[d.wl[p]], t = tt_rng_below(&rng, 5) == 0;
        train[p] = in && (!t || train_only[d.wl[p]]);
        test[p] = in && t && !train_only[d.wl[p]];
    }
    if (remeasure_n > 0) {
        /* Up to N programs of each ranked workload, of those held out of training: the records'
         * 20% and the workloads named --holdout. */
        bool *chosen = calloc((size_t)d.nprog, sizeof(bool));
        int *order = malloc(sizeof(int) * (size_t)d.nprog), taken[MAX_WORKLOADS] = {0}, n = 0;
        if (!chosen || !order)
            return 1;
        for (int p = 0; p < d.nprog; p++)
            order[p] = p;
        for (int p = d.nprog - 1; p > 0; p--) {
            int q = (int)tt_rng_below(&rng, (uint64_t)p + 1), t = order[p];
            order[p] = order[q], order[q] = t;
        }
        for (int i = 0; i < d.nprog; i++) {
            int p = order[i], w = d.wl[p];
            if ((test[p] || holdout[w]) && taken[w] < remeasure_n) {
                chosen[p] = true;
                taken[w]++;
                n++;
            }
        }
        printf("measuring %d held-out programs again, %d rounds, idle ...\n", n, REMEASURE_ROUNDS);
        fflush(stdout);
        if (remeasure(&d, wls, chosen))
            return 1;
        free(chosen), free(order);
    }
    if (run_setting(&d, nwl, train, test, &rng, &r))
        return 1;
    print_result("held-out records", &r);
    if (nheld) {
        for (int p = 0; p < d.nprog; p++) {
            train[p] = !holdout[d.wl[p]];
            test[p] = holdout[d.wl[p]];
        }
        if (run_setting(&d, nwl, train, test, &rng, &r))
            return 1;
        print_result("held-out workloads", &r);
    } else if (nwl >= 3) {
        /* Each workload in turn, ranked by a model trained on all the others. */
        result mean;
        memset(&mean, 0, sizeof(mean));
        for (int w = 0; w < nwl; w++) {
            if (train_only[w])
                continue;
            for (int p = 0; p < d.nprog; p++) {
                train[p] = d.wl[p] != w;
                test[p] = d.wl[p] == w;
            }
            if (run_setting(&d, nwl, train, test, &rng, &r))
                return 1;
            printf("  %s held out: pairwise", names[w]);
            for (int v = 0; v < NVARIANTS; v++)
                if (enabled[v])
                    printf(" %s %.3f", variants[v].name, r.q[v].pairwise);
            printf("\n");
            result_add(&mean, &r, nranked);
        }
        result_mean_truth(&mean);
        print_result("held-out workloads, each in turn (programs summed over the turns)", &mean);
    }
    for (int w = 0; w < nwl; w++)
        tt_workload_free(wls[w]);
    if (tmp[0])
        tt_db_remove(tmp);
    return 0;
}
