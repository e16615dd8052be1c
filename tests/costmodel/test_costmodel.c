/* The XGBoost cost model learns a ranking it is shown: trained on a synthetic "throughput"
 * function of three features, its predictions on new points order them correctly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "costmodel/costmodel.h"

static double truth(const float *x)
{
    /* Peaks at (3, 5), falls off with distance; the third feature is noise-free but irrelevant. */
    return 1.0 / (1.0 + fabs(x[0] - 3.0) + 0.5 * fabs(x[1] - 5.0));
}

static void model_learns_to_rank_unseen_points(void **state)
{
    enum { N = 300, T = 200, F = 3 };
    static float x[N * F], y[N], tx[T * F], pred[T];
    tt_rng rng;
    tt_rng_seed(&rng, 42);
    for (int i = 0; i < N; i++) {
        for (int f = 0; f < F; f++)
            x[i * F + f] = (float)(tt_rng_uniform(&rng) * 8.0);
        y[i] = (float)truth(&x[i * F]);
    }
    for (int i = 0; i < T; i++)
        for (int f = 0; f < F; f++)
            tx[i * F + f] = (float)(tt_rng_uniform(&rng) * 8.0);
    tt_costmodel *m;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_costmodel_create(TT_COSTMODEL_REG, 1, 7, &m, &err), TT_OK);
    assert_int_equal(tt_costmodel_predict(m, tx, T, F, pred, &err), TT_ERR_INVALID_ARG);
    if (tt_costmodel_train(m, x, N, F, y, 60, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(tt_costmodel_predict(m, tx, T, F, pred, &err), TT_OK);
    /* Pairwise ranking accuracy on unseen points. */
    int agree = 0, pairs = 0;
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) {
            double a = truth(&tx[i * F]), b = truth(&tx[j * F]);
            if (fabs(a - b) < 1e-3)
                continue;
            pairs++;
            agree += (a > b) == (pred[i] > pred[j]);
        }
    double acc = (double)agree / pairs;
    assert_true(acc > 0.85);
    /* The best predicted of the unseen points is near the true optimum. */
    int best = 0;
    for (int i = 1; i < T; i++)
        if (pred[i] > pred[best])
            best = i;
    assert_true(truth(&tx[best * F]) > 0.4);
    tt_costmodel_free(m);
    /* Bad input is an error, not a crash. */
    assert_int_equal(tt_costmodel_create(TT_COSTMODEL_RANK, 0, 1, &m, &err), TT_OK);
    assert_int_equal(tt_costmodel_train(m, x, 0, F, y, 10, &err), TT_ERR_INVALID_ARG);
    tt_costmodel_free(m);
    assert_non_null(tt_costmodel_backend_version());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(model_learns_to_rank_unseen_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
