/* XGBoost behind costmodel.h. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "costmodel.h"

struct tt_costmodel {
    BoosterHandle booster;
    bool trained;
    tt_costmodel_objective obj;
    int nthreads;
    uint64_t seed;
};

static tt_status xgb_fail(tt_errbuf *err, const char *what)
{
    return tt_err(err, TT_ERR_RUNTIME, "XGBoost %s: %s", what, XGBGetLastError());
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
    if (m->obj == TT_COSTMODEL_PACK_SUM) {
        if ((s = set(b, "max_depth", "10", err)) || (s = set(b, "gamma", "0.001", err)) ||
            (s = set(b, "min_child_weight", "0", err)) || (s = set(b, "eta", "0.2", err)) ||
            (s = set(b, "base_score", "0", err)) ||
            (s = set(b, "disable_default_eval_metric", "1", err)))
            return s;
    } else {
        if ((s = set(b, "max_depth", "3", err)) || (s = set(b, "gamma", "0.0001", err)) ||
            (s = set(b, "min_child_weight", "1", err)) || (s = set(b, "subsample", "1.0", err)) ||
            (s = set(b, "eta", "0.3", err)) || (s = set(b, "lambda", "1", err)) ||
            (s = set(b, "alpha", "0", err)) ||
            (s = set(b, "objective",
                     m->obj == TT_COSTMODEL_RANK ? "rank:pairwise" : "reg:squarederror", err)))
            return s;
    }
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

tt_status tt_costmodel_train_recall(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const float *y, int max_rounds, int top_n, int patience,
                                    int *rounds_run, tt_errbuf *err)
{
    int rounds = max_rounds;
    if (nrows < 1 || ncols < 1)
        return tt_err(err, TT_ERR_INVALID_ARG, "no training data");
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    tt_status s = TT_OK;
    if (XGDMatrixSetFloatInfo(d, "label", y, (bst_ulong)nrows)) {
        s = xgb_fail(err, "labels");
        goto out;
    }
    if (m->booster) {
        XGBoosterFree(m->booster);
        m->booster = NULL;
    }
    if (XGBoosterCreate(&d, 1, &m->booster)) {
        s = xgb_fail(err, "booster");
        goto out;
    }
    if ((s = set_params(m, err)))
        goto out;
    double best = -1;
    int best_round = 0, i = 0;
    for (; i < rounds; i++) {
        if (XGBoosterUpdateOneIter(m->booster, i, d)) {
            s = xgb_fail(err, "training");
            goto out;
        }
        if (patience <= 0 || i % 2)
            continue;
        bst_ulong len;
        const float *pred;
        if (XGBoosterPredict(m->booster, d, 0, 0, 1, &len, &pred) || (int)len != nrows) {
            s = xgb_fail(err, "prediction");
            goto out;
        }
        double r = tt_costmodel_a_recall(pred, y, nrows, top_n);
        if (r > best) {
            best = r;
            best_round = i;
        } else if (i - best_round >= patience) {
            i++;
            break;
        }
    }
    if (rounds_run)
        *rounds_run = i;
    m->trained = true;
out:
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

tt_status tt_costmodel_train_packed(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const int *row_prog, const float *y, int nprog, int max_rounds,
                                    int *rounds, tt_errbuf *err)
{
    if (m->obj != TT_COSTMODEL_PACK_SUM)
        return tt_err(err, TT_ERR_INVALID_ARG, "packed training needs the pack-sum objective");
    if (nrows < 1 || ncols < 1 || nprog < 1)
        return tt_err(err, TT_ERR_INVALID_ARG, "no training data");
    for (int r = 0; r < nrows; r++)
        if (row_prog[r] < 0 || row_prog[r] >= nprog || (r && row_prog[r] < row_prog[r - 1]))
            return tt_err(err, TT_ERR_INVALID_ARG,
                          "row %d: program ids must be in [0, %d) and "
                          "non-decreasing",
                          r, nprog);
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    float *grad = malloc(sizeof(float) * (size_t)nrows * 2);
    double *sum = malloc(sizeof(double) * (size_t)nprog);
    tt_status s = TT_OK;
    if (!grad || !sum) {
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    float *hess = grad + nrows;
    if (m->booster) {
        XGBoosterFree(m->booster);
        m->booster = NULL;
    }
    m->trained = false;
    if (XGBoosterCreate(&d, 1, &m->booster)) {
        s = xgb_fail(err, "booster");
        goto out;
    }
    if ((s = set_params(m, err)))
        goto out;
    double best = INFINITY;
    int best_round = 0, round = 0;
    for (; round < max_rounds; round++) {
        const float *pred = NULL;
        if (round > 0 && (s = margins(m, d, nrows, true, &pred, err)))
            goto out;
        for (int p = 0; p < nprog; p++)
            sum[p] = 0;
        for (int r = 0; r < nrows; r++)
            sum[row_prog[r]] += round > 0 ? pred[r] : 0;
        if (round > 0 && round % 2 == 0) {
            double se = 0;
            for (int p = 0; p < nprog; p++)
                se += (sum[p] - y[p]) * (sum[p] - y[p]);
            double rmse = sqrt(se / nprog);
            if (rmse < best) {
                best = rmse;
                best_round = round;
            } else if (round - best_round >= 50) {
                break;
            }
        }
        for (int r = 0; r < nrows; r++) {
            double w = y[row_prog[r]];
            grad[r] = (float)((sum[row_prog[r]] - w) * w);
            hess[r] = (float)w;
        }
        if (XGBoosterBoostOneIter(m->booster, d, grad, hess, (bst_ulong)nrows)) {
            s = xgb_fail(err, "training");
            goto out;
        }
    }
    m->trained = true;
    if (rounds)
        *rounds = round;
out:
    free(grad);
    free(sum);
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
    DMatrixHandle d;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)nrows, (bst_ulong)ncols, NAN, &d))
        return xgb_fail(err, "matrix");
    const float *pred;
    tt_status s = margins(m, d, nrows, false, &pred, err);
    for (int r = 0; !s && r < nrows; r++) {
        if (row_prog[r] < 0 || row_prog[r] >= nprog) {
            s = tt_err(err, TT_ERR_INVALID_ARG, "row %d: program id %d out of range", r,
                       row_prog[r]);
            break;
        }
        out[row_prog[r]] += pred[r];
    }
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
