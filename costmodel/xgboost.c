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

tt_status tt_costmodel_train(tt_costmodel *m, const float *x, int nrows, int ncols, const float *y,
                             int rounds, tt_errbuf *err)
{
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
    char seed[32], threads[16];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)(m->seed % 2147483647));
    snprintf(threads, sizeof(threads), "%d", m->nthreads);
    if ((s = set(m->booster, "max_depth", "3", err)) ||
        (s = set(m->booster, "gamma", "0.0001", err)) ||
        (s = set(m->booster, "min_child_weight", "1", err)) ||
        (s = set(m->booster, "subsample", "1.0", err)) ||
        (s = set(m->booster, "eta", "0.3", err)) || (s = set(m->booster, "lambda", "1", err)) ||
        (s = set(m->booster, "alpha", "0", err)) ||
        (s = set(m->booster, "objective",
                 m->obj == TT_COSTMODEL_RANK ? "rank:pairwise" : "reg:squarederror", err)) ||
        (s = set(m->booster, "verbosity", "0", err)) || (s = set(m->booster, "seed", seed, err)) ||
        (m->nthreads > 0 && (s = set(m->booster, "nthread", threads, err))))
        goto out;
    for (int i = 0; i < rounds; i++)
        if (XGBoosterUpdateOneIter(m->booster, i, d)) {
            s = xgb_fail(err, "training");
            goto out;
        }
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
