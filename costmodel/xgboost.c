/* XGBoost behind costmodel.h. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "costmodel.h"
#include "features.h"

struct tt_costmodel {
    BoosterHandle booster;
    bool trained;
    tt_costmodel_objective obj;
    int nthreads;
    uint64_t seed;
    tt_costmodel_stopping stopping;
};

static tt_status xgb_fail(tt_errbuf *err, const char *what)
{
    return tt_err(err, TT_ERR_RUNTIME, "XGBoost %s: %s", what, XGBGetLastError());
}

const char *tt_costmodel_objective_name(tt_costmodel_objective obj)
{
    switch (obj) {
    case TT_COSTMODEL_REG: return "reg";
    case TT_COSTMODEL_RANK: return "rank";
    case TT_COSTMODEL_PACK_SUM: return "pack-sum";
    case TT_COSTMODEL_PACK_RANK: return "pack-rank";
    case TT_COSTMODEL_PROG_RANK: return "prog-rank";
    }
    return "unknown";
}

const char *tt_costmodel_backend_version(void)
{
    static char v[32];
    int a, b, c;
    XGBoostVersion(&a, &b, &c);
    snprintf(v, sizeof(v), "%d.%d.%d", a, b, c);
    return v;
}

tt_status tt_costmodel_create(tt_costmodel_objective obj, int nthreads, uint64_t seed,
                              tt_costmodel **out, tt_errbuf *err)
{
    tt_costmodel *m = calloc(1, sizeof(*m));
    if (!m)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    m->obj = obj;
    m->nthreads = nthreads;
    m->seed = seed;
    *out = m;
    return TT_OK;
}

void tt_costmodel_set_stopping(tt_costmodel *m, tt_costmodel_stopping how)
{
    m->stopping = how;
}

void tt_costmodel_free(tt_costmodel *m)
{
    if (!m)
        return;
    if (m->booster)
        XGBoosterFree(m->booster);
    free(m);
}

static tt_status set(BoosterHandle b, const char *k, const char *v, tt_errbuf *err)
{
    return XGBoosterSetParam(b, k, v) ? xgb_fail(err, k) : TT_OK;
}

static tt_status set_params(tt_costmodel *m, tt_errbuf *err)
{
    char seed[32], threads[16];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)(m->seed % 2147483647));
    snprintf(threads, sizeof(threads), "%d", m->nthreads);
    BoosterHandle b = m->booster;
    tt_status s;
    if (m->obj == TT_COSTMODEL_PACK_SUM || m->obj == TT_COSTMODEL_PACK_RANK) {
        if ((s = set(b, "max_depth", "10", err)) || (s = set(b, "gamma", "0.001", err)) ||
            (s = set(b, "min_child_weight", "0", err)) || (s = set(b, "eta", "0.2", err)) ||
            (s = set(b, "base_score", "0", err)) ||
            (s = set(b, "disable_default_eval_metric", "1", err)))
            return s;
    } else if (m->obj == TT_COSTMODEL_PROG_RANK) {
        /* Shallower and slower than pack-sum's: on six ResNet-18 layers, depth 4-8 and eta
         * 0.05-0.1 ranked within 0.01 of each other (docs/search.md). */
        if ((s = set(b, "max_depth", "6", err)) || (s = set(b, "eta", "0.1", err)) ||
            (s = set(b, "objective", "rank:pairwise", err)))
            return s;
    } else {
        /* AutoTVM's parameters, its exact tree method included: knob rows are short, and
         * training them takes a small share of a search (192 xgb trials of C9: 22 s either way) */
        if ((s = set(b, "max_depth", "3", err)) || (s = set(b, "gamma", "0.0001", err)) ||
            (s = set(b, "min_child_weight", "1", err)) || (s = set(b, "subsample", "1.0", err)) ||
            (s = set(b, "eta", "0.3", err)) || (s = set(b, "lambda", "1", err)) ||
            (s = set(b, "alpha", "0", err)) ||
            (s = set(b, "objective",
                     m->obj == TT_COSTMODEL_RANK ? "rank:pairwise" : "reg:squarederror", err)))
            return s;
    }
    /* The sketch models' rows are wide (184 features a store, 920 a program) and evo trains
     * one every round on up to 2,000 transfer records besides its own: histogram splits
     * (256 bins a feature) instead of exact ones rank as well (bench_costmodel: within 0.004)
     * in half the time (docs/search.md, "Training time"). */
    if (m->obj != TT_COSTMODEL_REG && m->obj != TT_COSTMODEL_RANK &&
        (s = set(b, "tree_method", "hist", err)))
        return s;
    if ((s = set(b, "verbosity", "0", err)) || (s = set(b, "seed", seed, err)) ||
        (m->nthreads > 0 && (s = set(b, "nthread", threads, err))))
        return s;
    return TT_OK;
}

typedef struct {
    float v;
    int i;
} ranked;

static int cmp_ranked_desc(const void *a, const void *b)
{
    float x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    if (x != y)
        return x < y ? 1 : -1;
    return ((const ranked *)a)->i - ((const ranked *)b)->i;
}

double tt_costmodel_a_recall(const float *pred, const float *y, int nrows, int n)
{
    if (nrows < 1 || n < 1)
        return 0;
    ranked *r = malloc(sizeof(ranked) * (size_t)nrows);
    int *true_rank = malloc(sizeof(int) * (size_t)nrows);
    if (!r || !true_rank) {
        free(r);
        free(true_rank);
        return 0;
    }
    for (int i = 0; i < nrows; i++)
        r[i] = (ranked){y[i], i};
    qsort(r, (size_t)nrows, sizeof(ranked), cmp_ranked_desc);
    for (int k = 0; k < nrows; k++)
        true_rank[r[k].i] = k;
    for (int i = 0; i < nrows; i++)
        r[i] = (ranked){pred[i], i};
    qsort(r, (size_t)nrows, sizeof(ranked), cmp_ranked_desc);
    if (n > nrows)
        n = nrows;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        int hit = 0;
        for (int j = 0; j < i; j++)
            hit += true_rank[r[j].i] <= i;
        sum += (double)hit / (i + 1);
    }
    free(r);
    free(true_rank);
    return sum / n;
}

tt_status tt_costmodel_train(tt_costmodel *m, const float *x, int nrows, int ncols, const float *y,
                             int rounds, tt_errbuf *err)
{
    return tt_costmodel_train_recall(m, x, nrows, ncols, y, rounds, 0, 0, NULL, err);
}

/* Pairwise accuracy of `score` against labels `y` over the items i with held[i] (every item
 * when held is NULL; pairs with equal labels do not count).  0.5 when there is no pair. */
static double held_out_pairwise(const double *score, const float *y, const bool *held, int n)
{
    long agree = 0, pairs = 0;
    for (int i = 0; i < n; i++) {
        if (held && !held[i])
            continue;
        for (int j = i + 1; j < n; j++) {
            if ((held && !held[j]) || y[i] == y[j])
                continue;
            pairs++;
            agree += (y[i] > y[j]) == (score[i] > score[j]);
        }
    }
    return pairs ? (double)agree / (double)pairs : 0.5;
}

/* Raw (margin) predictions of every row of `d`. */
static tt_status margins(tt_costmodel *m, DMatrixHandle d, int nrows, bool training,
                         const float **res, tt_errbuf *err)
{
    bst_ulong len;
    if (XGBoosterPredict(m->booster, d, 1, 0, training, &len, res))
        return xgb_fail(err, "prediction");
    if ((int)len != nrows)
        return tt_err(err, TT_ERR_RUNTIME, "XGBoost returned %llu predictions for %d rows",
                      (unsigned long long)len, nrows);
    return TT_OK;
}

/* Held-out rows in a matrix of their own, with their labels. */
typedef struct {
    DMatrixHandle d;
    const float *y;
    int n;
} validation;

/* A fresh booster over `d` with the model's parameters, in place of the one before (the model
 * untrained until it is boosted). */
static tt_status new_booster(tt_costmodel *m, DMatrixHandle d, tt_errbuf *err)
{
    if (m->booster) {
        XGBoosterFree(m->booster);
        m->booster = NULL;
    }
    m->trained = false;
    if (XGBoosterCreate(&d, 1, &m->booster))
        return xgb_fail(err, "booster");
    return set_params(m, err);
}

/* One boosting run of a built-in objective on `d`.  With `held` (rows with weight 0 in `d`) or
 * `val`, stops when the held-out rows' pairwise accuracy has not improved for `patience` rounds;
 * without, when the training a-recall@top_n has not (AutoTVM's rule; patience 0: exactly
 * max_rounds).  *kept gets the rounds up to the best validation score, or the rounds run. */
static tt_status boost_builtin(tt_costmodel *m, DMatrixHandle d, int nrows, const float *y,
                               const bool *held, const validation *val, int max_rounds, int top_n,
                               int patience, int *kept, tt_errbuf *err)
{
    int nscore = val ? val->n : held ? nrows : 0;
    double *score = nscore ? malloc(sizeof(double) * (size_t)nscore) : NULL;
    if (nscore && !score)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = new_booster(m, d, err);
    if (s)
        goto out;
    double best = -INFINITY;
    int best_round = 0, i = 0;
    for (; i < max_rounds; i++) {
        if (XGBoosterUpdateOneIter(m->booster, i, d)) {
            s = xgb_fail(err, "training");
            goto out;
        }
        if (patience <= 0 || i % 2)
            continue;
        bst_ulong len;
        const float *pred;
        double r;
        if (val) {
            if ((s = margins(m, val->d, val->n, false, &pred, err)))
                goto out;
            for (int k = 0; k < val->n; k++)
                score[k] = pred[k];
            r = held_out_pairwise(score, val->y, NULL, val->n);
        } else if (XGBoosterPredict(m->booster, d, 0, 0, 1, &len, &pred) || (int)len != nrows) {
            s = xgb_fail(err, "prediction");
            goto out;
        } else if (held) {
            for (int k = 0; k < nrows; k++)
                score[k] = pred[k];
            r = held_out_pairwise(score, y, held, nrows);
        } else {
            r = tt_costmodel_a_recall(pred, y, nrows, top_n);
        }
        if (r > best) {
            best = r;
            best_round = i;
        } else if (i - best_round >= patience) {
            i++;
            break;
        }
    }
    *kept = held || val ? best_round + 1 : i;
    m->trained = true;
out:
    free(score);
    return s;
}

/* A fifth of n items, drawn by the model's seed: the validation set.  NULL when out of memory. */
static bool *draw_validation(const tt_costmodel *m, int n)
{
    bool *held = calloc((size_t)n, sizeof(bool));
    if (!held)
        return NULL;
    tt_rng rng;
    tt_rng_seed(&rng, m->seed ^ 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < n; i++)
        held[i] = tt_rng_below(&rng, 5) == 0;
    return held;
}

tt_status tt_costmodel_train_recall(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const float *y, int max_rounds, int top_n, int patience,
                                    int *rounds_run, tt_errbuf *err)
{
    if (nrows < 1 || ncols < 1)
        return tt_err(err, TT_ERR_INVALID_ARG, "no training data");
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    tt_status s = TT_OK;
    bool *held = NULL;
    float *weight = NULL;
    int kept = 0;
    if (XGDMatrixSetFloatInfo(d, "label", y, (bst_ulong)nrows)) {
        s = xgb_fail(err, "labels");
        goto out;
    }
    /* Ranking weights belong to query groups, not rows: the rank objective keeps AutoTVM's
     * training-set rule. */
    if (patience > 0 && m->obj == TT_COSTMODEL_REG && m->stopping == TT_STOP_VALIDATION &&
        nrows >= TT_COSTMODEL_MIN_VALIDATION * 5) {
        held = draw_validation(m, nrows);
        weight = malloc(sizeof(float) * (size_t)nrows);
        if (!held || !weight) {
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < nrows; i++)
            weight[i] = held[i] ? 0.0f : 1.0f;
        if (XGDMatrixSetFloatInfo(d, "weight", weight, (bst_ulong)nrows)) {
            s = xgb_fail(err, "weights");
            goto out;
        }
        if ((s = boost_builtin(m, d, nrows, y, held, NULL, max_rounds, top_n, patience, &kept,
                               err)))
            goto out;
        for (int i = 0; i < nrows; i++)
            weight[i] = 1.0f;
        if (XGDMatrixSetFloatInfo(d, "weight", weight, (bst_ulong)nrows)) {
            s = xgb_fail(err, "weights");
            goto out;
        }
        s = boost_builtin(m, d, nrows, y, NULL, NULL, kept, top_n, 0, &kept, err);
    } else {
        s = boost_builtin(m, d, nrows, y, NULL, NULL, max_rounds, top_n, patience, &kept, err);
    }
    if (!s && rounds_run)
        *rounds_run = kept;
out:
    free(held);
    free(weight);
    XGDMatrixFree(d);
    return s;
}

tt_status tt_costmodel_predict(tt_costmodel *m, const float *x, int nrows, int ncols, float *out,
                               tt_errbuf *err)
{
    if (!m->trained)
        return tt_err(err, TT_ERR_INVALID_ARG, "the cost model has not been trained");
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    bst_ulong len;
    const float *res;
    tt_status s = TT_OK;
    if (XGBoosterPredict(m->booster, d, 0, 0, 0, &len, &res))
        s = xgb_fail(err, "prediction");
    else if ((int)len != nrows)
        s = tt_err(err, TT_ERR_RUNTIME, "XGBoost returned %llu predictions for %d rows",
                   (unsigned long long)len, nrows);
    else
        memcpy(out, res, sizeof(float) * (size_t)nrows);
    XGDMatrixFree(d);
    return s;
}

/* The pairwise logistic loss of program scores (RankNet's): for every pair of training programs
 * with different labels, log(1 + exp(-(s_hi - s_lo))).  Each program is paired with up to
 * PAIRS_PER_PROGRAM others, drawn afresh each round, so a round costs O(nprog).  Gradient and
 * hessian per program into g, h. */
enum { PAIRS_PER_PROGRAM = 64 };

static void pairwise_gradient(const double *s, const float *y, const bool *held, int nprog,
                              int round, double *g, double *h)
{
    for (int p = 0; p < nprog; p++)
        g[p] = h[p] = 0;
    tt_rng rng;
    tt_rng_seed(&rng, 0x51ed2701u + (uint64_t)round);
    int tries = nprog - 1 < PAIRS_PER_PROGRAM ? nprog - 1 : PAIRS_PER_PROGRAM;
    for (int i = 0; i < nprog; i++) {
        if (held && held[i])
            continue;
        for (int t = 0; t < tries; t++) {
            int j = (int)tt_rng_below(&rng, (uint64_t)nprog);
            if (j == i || (held && held[j]) || y[i] == y[j])
                continue;
            int hi = y[i] > y[j] ? i : j, lo = hi == i ? j : i;
            double sig = 1.0 / (1.0 + exp(s[hi] - s[lo])); /* P(order is wrong) */
            g[hi] -= sig;
            g[lo] += sig;
            h[hi] += sig * (1 - sig);
            h[lo] += sig * (1 - sig);
        }
    }
}

/* Boosts a fresh booster on `d` with Ansor's loss.  Programs with held[p] (held may be NULL) get
 * no gradient: they are the validation set, scored every second round, and boosting stops when
 * their pairwise accuracy has not improved for `patience` rounds.  Without a validation set the
 * training RMSE decides (Ansor's rule; the model keeps every round run); patience 0 boosts
 * exactly max_rounds.  *kept gets the rounds up to the best validation score, or the rounds run. */
static tt_status boost_packed(tt_costmodel *m, DMatrixHandle d, int nrows, const int *row_prog,
                              const float *y, int nprog, const bool *held, int max_rounds,
                              int patience, int *kept, tt_errbuf *err)
{
    float *grad = malloc(sizeof(float) * (size_t)nrows * 2);
    double *sum = malloc(sizeof(double) * (size_t)nprog * 3), *pg = sum + nprog, *ph = pg + nprog;
    tt_status s = TT_OK;
    if (!grad || !sum) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    float *hess = grad + nrows;
    if ((s = new_booster(m, d, err)))
        goto out;
    double best = -INFINITY;
    int best_round = 0, round = 0;
    for (; round < max_rounds; round++) {
        const float *pred = NULL;
        if (round > 0 && (s = margins(m, d, nrows, true, &pred, err)))
            goto out;
        for (int p = 0; p < nprog; p++)
            sum[p] = 0;
        for (int r = 0; r < nrows; r++)
            sum[row_prog[r]] += round > 0 ? pred[r] : 0;
        if (patience > 0 && round > 0 && round % 2 == 0) {
            double score;
            if (held) {
                score = held_out_pairwise(sum, y, held, nprog);
            } else {
                double se = 0;
                for (int p = 0; p < nprog; p++)
                    se += (sum[p] - y[p]) * (sum[p] - y[p]);
                score = -sqrt(se / nprog);
            }
            if (score > best) {
                best = score;
                best_round = round;
            } else if (round - best_round >= patience) {
                break;
            }
        }
        if (m->obj == TT_COSTMODEL_PACK_RANK) {
            pairwise_gradient(sum, y, held, nprog, round, pg, ph);
            for (int r = 0; r < nrows; r++) {
                grad[r] = (float)pg[row_prog[r]];
                hess[r] = (float)ph[row_prog[r]];
            }
        } else {
            for (int r = 0; r < nrows; r++) {
                int p = row_prog[r];
                double w = held && held[p] ? 0 : y[p];
                grad[r] = (float)((sum[p] - y[p]) * w);
                hess[r] = (float)w;
            }
        }
        if (XGBoosterBoostOneIter(m->booster, d, grad, hess, (bst_ulong)nrows)) {
            s = xgb_fail(err, "training");
            goto out;
        }
    }
    m->trained = true;
    *kept = held && best_round > 0 ? best_round : round;
out:
    free(grad);
    free(sum);
    return s;
}

/* PROG_RANK's program rows (costmodel.h) of the programs p with keep[p] (all when keep is NULL),
 * in program order, into a malloc'ed matrix of *n rows; NULL when out of memory. */
static float *program_matrix(const float *x, int nrows, int ncols, const int *row_prog, int nprog,
                             const bool *keep, int *n)
{
    enum { K = TT_COSTMODEL_PROG_SLOTS, SIDE = K - 1 };
    int *count = calloc((size_t)nprog * 2, sizeof(int)), *seen = count + nprog;
    int *slot_of = malloc(sizeof(int) * (size_t)nprog),
        *main_row = malloc(sizeof(int) * (size_t)nprog);
    float *out = NULL;
    if (!count || !slot_of || !main_row)
        goto out;
    *n = 0;
    for (int p = 0; p < nprog; p++) {
        slot_of[p] = keep && !keep[p] ? -1 : (*n)++;
        main_row[p] = -1;
    }
    /* the main store: the largest outer product (the reduction's), the last of equals */
    bool has_outer = ncols > TT_FEATURE_OUTER_PROD;
    for (int r = 0; r < nrows; r++) {
        int p = row_prog[r];
        count[p]++;
        if (main_row[p] < 0 || !has_outer ||
            x[(size_t)r * ncols + TT_FEATURE_OUTER_PROD] >=
                x[(size_t)main_row[p] * ncols + TT_FEATURE_OUTER_PROD])
            main_row[p] = r;
    }
    size_t width = (size_t)K * (size_t)ncols;
    if (!(out = malloc(sizeof(float) * width * (size_t)(*n ? *n : 1))))
        goto out;
    for (size_t i = 0; i < width * (size_t)*n; i++)
        out[i] = NAN;
    for (int r = 0; r < nrows; r++) {
        int p = row_prog[r], k = seen[p]++;
        if (slot_of[p] < 0)
            continue;
        int slot = SIDE - count[p] + k;
        float *row = out + (size_t)slot_of[p] * width;
        float *dst = row + (size_t)(slot > 0 ? slot : 0) * ncols;
        const float *src = x + (size_t)r * ncols;
        for (int f = 0; f < ncols; f++)
            dst[f] = slot >= 1 || isnan(dst[f]) ? src[f] : dst[f] + src[f];
        if (r == main_row[p])
            memcpy(row + (size_t)SIDE * ncols, src, sizeof(float) * (size_t)ncols);
    }
out:
    free(count);
    free(slot_of);
    free(main_row);
    return out;
}

/* A DMatrix of program rows with their labels, all in one query group. */
static tt_status program_dmatrix(const float *px, int n, int ncols, const float *y,
                                 DMatrixHandle *d, tt_errbuf *err)
{
    if (XGDMatrixCreateFromMat(px, (bst_ulong)n, (bst_ulong)ncols * TT_COSTMODEL_PROG_SLOTS, NAN,
                               d))
        return xgb_fail(err, "matrix");
    unsigned group = (unsigned)n;
    if ((y && XGDMatrixSetFloatInfo(*d, "label", y, (bst_ulong)n)) ||
        XGDMatrixSetUIntInfo(*d, "group", &group, 1)) {
        XGDMatrixFree(*d);
        return xgb_fail(err, "labels");
    }
    return TT_OK;
}

/* PROG_RANK training.  Ranking objectives weigh query groups, not rows, so the validation set is
 * a matrix of its own rather than rows of weight 0. */
static tt_status train_programs(tt_costmodel *m, const float *x, int nrows, int ncols,
                                const int *row_prog, const float *y, int nprog, int max_rounds,
                                int *rounds, tt_errbuf *err)
{
    bool validate = m->stopping == TT_STOP_VALIDATION && nprog >= TT_COSTMODEL_MIN_VALIDATION * 5;
    bool *held = validate ? draw_validation(m, nprog) : NULL;
    bool *fit = malloc(sizeof(bool) * (size_t)nprog);
    float *yfit = malloc(sizeof(float) * (size_t)nprog * 2), *yheld = yfit + nprog;
    float *pfit = NULL, *pheld = NULL, *pall = NULL;
    DMatrixHandle dfit = NULL, dheld = NULL, dall = NULL;
    tt_status s = TT_OK;
    int nfit = 0, nheld = 0, nall = 0;
    int kept = max_rounds < TT_COSTMODEL_PROG_ROUNDS ? max_rounds : TT_COSTMODEL_PROG_ROUNDS;
    if ((validate && !held) || !fit || !yfit) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (validate) {
        for (int p = 0; p < nprog; p++) {
            fit[p] = !held[p];
            if (held[p])
                yheld[nheld++] = y[p];
            else
                yfit[nfit++] = y[p];
        }
        if (!(pfit = program_matrix(x, nrows, ncols, row_prog, nprog, fit, &nfit)) ||
            !(pheld = program_matrix(x, nrows, ncols, row_prog, nprog, held, &nheld))) {
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((s = program_dmatrix(pfit, nfit, ncols, yfit, &dfit, err)) ||
            (s = program_dmatrix(pheld, nheld, ncols, NULL, &dheld, err)))
            goto out;
        validation val = {dheld, yheld, nheld};
        if ((s = boost_builtin(m, dfit, nfit, yfit, NULL, &val, max_rounds, 0,
                               TT_COSTMODEL_PATIENCE, &kept, err)))
            goto out;
    }
    /* The model kept: every program, for the rounds that ranked the held-out ones best. */
    if (!(pall = program_matrix(x, nrows, ncols, row_prog, nprog, NULL, &nall))) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = program_dmatrix(pall, nall, ncols, y, &dall, err)))
        goto out;
    s = boost_builtin(m, dall, nall, y, NULL, NULL, kept, 0, 0, &kept, err);
    if (!s && rounds)
        *rounds = kept;
out:
    if (dfit)
        XGDMatrixFree(dfit);
    if (dheld)
        XGDMatrixFree(dheld);
    if (dall)
        XGDMatrixFree(dall);
    free(held), free(fit), free(yfit), free(pfit), free(pheld), free(pall);
    return s;
}

static tt_status predict_programs(tt_costmodel *m, const float *x, int nrows, int ncols,
                                  const int *row_prog, int nprog, float *out, tt_errbuf *err)
{
    int n;
    float *px = program_matrix(x, nrows, ncols, row_prog, nprog, NULL, &n);
    if (!px)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    DMatrixHandle d;
    tt_status s = program_dmatrix(px, n, ncols, NULL, &d, err);
    free(px);
    if (s)
        return s;
    const float *pred;
    if (!(s = margins(m, d, n, false, &pred, err)))
        memcpy(out, pred, sizeof(float) * (size_t)n);
    XGDMatrixFree(d);
    return s;
}

tt_status tt_costmodel_train_packed(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const int *row_prog, const float *y, int nprog, int max_rounds,
                                    int *rounds, tt_errbuf *err)
{
    if (m->obj != TT_COSTMODEL_PACK_SUM && m->obj != TT_COSTMODEL_PACK_RANK &&
        m->obj != TT_COSTMODEL_PROG_RANK)
        return tt_err(err, TT_ERR_INVALID_ARG, "packed training needs a pack-sum objective");
    if (nrows < 1 || ncols < 1 || nprog < 1)
        return tt_err(err, TT_ERR_INVALID_ARG, "no training data");
    for (int r = 0; r < nrows; r++)
        if (row_prog[r] < 0 || row_prog[r] >= nprog || (r && row_prog[r] < row_prog[r - 1]))
            return tt_err(err, TT_ERR_INVALID_ARG,
                          "row %d: program ids must be in [0, %d) and "
                          "non-decreasing",
                          r, nprog);
    if (m->obj == TT_COSTMODEL_PROG_RANK)
        return train_programs(m, x, nrows, ncols, row_prog, y, nprog, max_rounds, rounds, err);
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    /* A fifth of the programs, drawn by the seed, decide when to stop; the model kept is then
     * boosted again on every program for that many rounds.  Measurements on a busy device are
     * noisy, and boosting until the training error stalls fits the noise (issue #16). */
    bool *held = NULL;
    tt_status s = TT_OK;
    int kept = 0;
    if (m->stopping == TT_STOP_VALIDATION && nprog >= TT_COSTMODEL_MIN_VALIDATION * 5) {
        if (!(held = draw_validation(m, nprog))) {
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((s = boost_packed(m, d, nrows, row_prog, y, nprog, held, max_rounds,
                              TT_COSTMODEL_PATIENCE, &kept, err)))
            goto out;
        s = boost_packed(m, d, nrows, row_prog, y, nprog, NULL, kept, 0, &kept, err);
    } else {
        s = boost_packed(m, d, nrows, row_prog, y, nprog, NULL, max_rounds, 50, &kept, err);
    }
    if (!s && rounds)
        *rounds = kept;
out:
    free(held);
    XGDMatrixFree(d);
    return s;
}

tt_status tt_costmodel_predict_packed(tt_costmodel *m, const float *x, int nrows, int ncols,
                                      const int *row_prog, int nprog, float *out, tt_errbuf *err)
{
    if (!m->trained)
        return tt_err(err, TT_ERR_INVALID_ARG, "the cost model has not been trained");
    for (int p = 0; p < nprog; p++)
        out[p] = 0;
    if (nrows == 0)
        return TT_OK;
    for (int r = 0; r < nrows; r++)
        if (row_prog[r] < 0 || row_prog[r] >= nprog)
            return tt_err(err, TT_ERR_INVALID_ARG, "row %d: program id %d out of range", r,
                          row_prog[r]);
    if (m->obj == TT_COSTMODEL_PROG_RANK)
        return predict_programs(m, x, nrows, ncols, row_prog, nprog, out, err);
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    const float *pred;
    tt_status s = margins(m, d, nrows, false, &pred, err);
    for (int r = 0; !s && r < nrows; r++)
        out[row_prog[r]] += pred[r];
    XGDMatrixFree(d);
    return s;
}

tt_status tt_costmodel_save(tt_costmodel *m, void **blob, size_t *len, tt_errbuf *err)
{
    if (!m->trained)
        return tt_err(err, TT_ERR_INVALID_ARG, "the cost model has not been trained");
    bst_ulong n;
    const char *buf;
    if (XGBoosterSaveModelToBuffer(m->booster, "{\"format\": \"json\"}", &n, &buf))
        return xgb_fail(err, "save");
    void *copy = malloc(n ? n : 1);
    if (!copy)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    memcpy(copy, buf, n);
    *blob = copy;
    *len = n;
    return TT_OK;
}

tt_status tt_costmodel_load(tt_costmodel_objective obj, int nthreads, const void *blob, size_t len,
                            tt_costmodel **out, tt_errbuf *err)
{
    tt_costmodel *m = NULL;
    tt_status s = tt_costmodel_create(obj, nthreads, 0, &m, err);
    if (s)
        return s;
    if (XGBoosterCreate(NULL, 0, &m->booster) ||
        XGBoosterLoadModelFromBuffer(m->booster, blob, (bst_ulong)len)) {
        s = xgb_fail(err, "load");
        tt_costmodel_free(m);
        return s;
    }
    if (nthreads > 0) {
        char threads[16];
        snprintf(threads, sizeof(threads), "%d", nthreads);
        XGBoosterSetParam(m->booster, "nthread", threads);
    }
    m->trained = true;
    *out = m;
    return TT_OK;
}
