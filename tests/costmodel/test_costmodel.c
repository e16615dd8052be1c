/* The XGBoost cost model learns a ranking it is shown: trained on a synthetic "throughput"
 * function of three features, its predictions on new points order them correctly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
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

/* Programs of one to three rows; a program's true score is the sum of a function of its rows,
 * as with Ansor's per-store features. */
static double row_truth(const float *x)
{
    return 0.5 / (1.0 + fabs(x[0] - 2.0)) + 0.2 * (x[1] > 4.0);
}

enum { PF = 3 };

static int make_programs(tt_rng *rng, int nprog, float *x, int *prog, float *y)
{
    int r = 0;
    for (int p = 0; p < nprog; p++) {
        int rows = 1 + (int)tt_rng_below(rng, 3);
        double t = 0;
        for (int k = 0; k < rows; k++, r++) {
            for (int f = 0; f < PF; f++)
                x[r * PF + f] = (float)(tt_rng_uniform(rng) * 8.0);
            prog[r] = p;
            t += row_truth(&x[r * PF]);
        }
        y[p] = (float)t;
    }
    return r;
}

static void pack_sum_model_learns_program_scores(void **state)
{
    (void)state;
    enum { N = 400, T = 150 };
    static float x[N * 3 * PF], y[N], tx[T * 3 * PF], ty[T], pred[T], pred2[T];
    static int prog[N * 3], tprog[T * 3];
    tt_rng rng;
    tt_rng_seed(&rng, 5);
    int nrows = make_programs(&rng, N, x, prog, y);
    int trows = make_programs(&rng, T, tx, tprog, ty);
    /* normalise like throughput: best = 1 */
    float maxy = 0;
    for (int p = 0; p < N; p++)
        maxy = y[p] > maxy ? y[p] : maxy;
    for (int p = 0; p < N; p++)
        y[p] /= maxy;
    tt_costmodel *m;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_costmodel_create(TT_COSTMODEL_PACK_SUM, 1, 43, &m, &err), TT_OK);
    /* bad program ids are refused */
    int bad[2] = {1, 0};
    assert_int_equal(tt_costmodel_train_packed(m, x, 2, PF, bad, y, 2, 10, NULL, &err),
                     TT_ERR_INVALID_ARG);
    int rounds = 0;
    if (tt_costmodel_train_packed(m, x, nrows, PF, prog, y, N, 400, &rounds, &err))
        fail_msg("%s", err.msg);
    assert_true(rounds > 2);
    assert_int_equal(tt_costmodel_predict_packed(m, tx, trows, PF, tprog, T, pred, &err), TT_OK);
    int agree = 0, pairs = 0;
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) {
            if (fabsf(ty[i] - ty[j]) < 0.05f)
                continue;
            pairs++;
            agree += (ty[i] > ty[j]) == (pred[i] > pred[j]);
        }
    double acc = (double)agree / pairs;
    printf("pack-sum: %d rounds, pairwise accuracy %.3f on %d held-out programs\n", rounds, acc, T);
    assert_true(acc > 0.8);
    /* Save, load, same predictions. */
    void *blob;
    size_t len;
    assert_int_equal(tt_costmodel_save(m, &blob, &len, &err), TT_OK);
    assert_true(len > 100);
    tt_costmodel *m2;
    if (tt_costmodel_load(TT_COSTMODEL_PACK_SUM, 1, blob, len, &m2, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(tt_costmodel_predict_packed(m2, tx, trows, PF, tprog, T, pred2, &err), TT_OK);
    for (int i = 0; i < T; i++)
        assert_float_equal(pred[i], pred2[i], 1e-6);
    tt_costmodel_free(m2);
    /* A corrupt blob is an error. */
    ((char *)blob)[len / 2] = '#';
    assert_int_equal(tt_costmodel_load(TT_COSTMODEL_PACK_SUM, 1, blob, len, &m2, &err),
                     TT_ERR_RUNTIME);
    free(blob);
    tt_costmodel_free(m);
}

static void a_recall_and_early_stopping(void **state)
{
    (void)state;
    float y[8] = {8, 7, 6, 5, 4, 3, 2, 1}, perfect[8] = {80, 70, 60, 50, 40, 30, 20, 10};
    float reversed[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* perfect order: (0 + 1/2 + 2/3 + 3/4) / 4 (AutoTVM counts j < i) */
    assert_float_equal(tt_costmodel_a_recall(perfect, y, 8, 4), (0.5 + 2.0 / 3 + 0.75) / 4, 1e-9);
    assert_float_equal(tt_costmodel_a_recall(reversed, y, 8, 4), 0, 1e-9);
    /* training stops on its own well before the cap, and ranks the training data well */
    enum { N = 200, F = 3 };
    static float x[N * F], yy[N], pred[N];
    tt_rng rng;
    tt_rng_seed(&rng, 11);
    for (int i = 0; i < N; i++) {
        for (int f = 0; f < F; f++)
            x[i * F + f] = (float)(tt_rng_uniform(&rng) * 8.0);
        yy[i] = (float)truth(&x[i * F]);
    }
    tt_costmodel *m;
    tt_errbuf err = {{0}};
    int rounds = 0;
    assert_int_equal(tt_costmodel_create(TT_COSTMODEL_REG, 1, 3, &m, &err), TT_OK);
    tt_costmodel_set_stopping(m, TT_STOP_TRAINING);
    assert_int_equal(tt_costmodel_train_recall(m, x, N, F, yy, 8000, 64, 20, &rounds, &err), TT_OK);
    assert_true(rounds > 20 && rounds < 8000);
    assert_int_equal(tt_costmodel_predict(m, x, N, F, pred, &err), TT_OK);
    assert_true(tt_costmodel_a_recall(pred, yy, N, 64) > 0.8);
    tt_costmodel_free(m);
    /* the default: a fifth of the rows decide; the model then learns from all of them */
    int vrounds = 0;
    assert_int_equal(tt_costmodel_create(TT_COSTMODEL_REG, 1, 3, &m, &err), TT_OK);
    assert_int_equal(tt_costmodel_train_recall(m, x, N, F, yy, 8000, 64, 20, &vrounds, &err),
                     TT_OK);
    assert_true(vrounds >= 2 && vrounds < 8000);
    assert_int_equal(tt_costmodel_predict(m, x, N, F, pred, &err), TT_OK);
    assert_true(tt_costmodel_a_recall(pred, yy, N, 64) > 0.7);
    tt_costmodel_free(m);
}

/* Pairwise accuracy of pred against the true scores ty (pairs closer than 0.05 left out). */
static double pairwise_vs_truth(const float *pred, const float *ty, int n)
{
    int agree = 0, pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (fabsf(ty[i] - ty[j]) < 0.05f)
                continue;
            pairs++;
            agree += (ty[i] > ty[j]) == (pred[i] > pred[j]);
        }
    return pairs ? (double)agree / pairs : 0;
}

/* Measurements on a busy device: every label noisy, one in five several times too slow.
 * Stopping on held-out programs boosts fewer rounds than waiting for the training error to
 * stall, and ranks unseen programs at least as well. */
static void validation_stopping_does_not_fit_noise(void **state)
{
    (void)state;
    enum { N = 400, T = 150 };
    static float x[N * 3 * PF], y[N], tx[T * 3 * PF], ty[T], pred[T];
    static int prog[N * 3], tprog[T * 3], group[N];
    static double thr[N];
    tt_rng rng;
    tt_rng_seed(&rng, 9);
    int nrows = make_programs(&rng, N, x, prog, y);
    int trows = make_programs(&rng, T, tx, tprog, ty);
    for (int p = 0; p < N; p++) {
        double noise = 0.8 + 0.4 * tt_rng_uniform(&rng);
        if (tt_rng_below(&rng, 5) == 0)
            noise /= 2.0 + 2.0 * tt_rng_uniform(&rng);
        thr[p] = y[p] * noise;
        group[p] = 0;
    }
    tt_errbuf err = {{0}};
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RATIO, thr, group, N, y, &err), TT_OK);
    double acc[2];
    int rounds[2];
    for (int v = 0; v < 2; v++) {
        tt_costmodel *m;
        assert_int_equal(tt_costmodel_create(TT_COSTMODEL_PACK_SUM, 1, 43, &m, &err), TT_OK);
        tt_costmodel_set_stopping(m, v ? TT_STOP_TRAINING : TT_STOP_VALIDATION);
        if (tt_costmodel_train_packed(m, x, nrows, PF, prog, y, N, 1000, &rounds[v], &err))
            fail_msg("%s", err.msg);
        assert_int_equal(tt_costmodel_predict_packed(m, tx, trows, PF, tprog, T, pred, &err),
                         TT_OK);
        acc[v] = pairwise_vs_truth(pred, ty, T);
        tt_costmodel_free(m);
    }
    printf("noisy labels: validation stop %d rounds, pairwise %.3f; training-RMSE stop %d rounds, "
           "pairwise %.3f\n",
           rounds[0], acc[0], rounds[1], acc[1]);
    assert_true(rounds[0] > 2 && rounds[0] < rounds[1]);
    assert_true(acc[0] > 0.75);
    assert_true(acc[0] >= acc[1] - 0.02);
}

/* Programs whose speed depends on how two stores fit together: the output store (the last row)
 * is fast when its first feature matches that of the store before it, as a cache stage's tile
 * must match its consumer's.  A sum over stores cannot express that; program rows can. */
static int make_matched_programs(tt_rng *rng, int nprog, int max_rows, float *x, int *prog,
                                 float *y)
{
    int r = 0;
    for (int p = 0; p < nprog; p++) {
        int rows = 2 + (int)tt_rng_below(rng, (uint64_t)max_rows - 1);
        for (int k = 0; k < rows; k++, r++) {
            for (int f = 0; f < PF; f++)
                x[r * PF + f] = (float)(tt_rng_uniform(rng) * 8.0);
            prog[r] = p;
        }
        const float *last = &x[(r - 1) * PF], *before = &x[(r - 2) * PF];
        y[p] = (float)(1.0 / (1.0 + fabs(last[0] - before[0])) + 0.1 * last[1] / 8.0);
    }
    return r;
}

static void program_rank_model_learns_how_stores_combine(void **state)
{
    (void)state;
    enum { N = 600, T = 150, MAXR = 6 };
    static float x[N * MAXR * PF], y[N], tx[T * MAXR * PF], ty[T], pred[T], pred2[T];
    static int prog[N * MAXR], tprog[T * MAXR], group[N];
    static double thr[N];
    tt_rng rng;
    tt_rng_seed(&rng, 21);
    /* up to 6 stores: more than the 4 slots, the earliest added into the first */
    int nrows = make_matched_programs(&rng, N, MAXR, x, prog, y);
    int trows = make_matched_programs(&rng, T, MAXR, tx, tprog, ty);
    for (int p = 0; p < N; p++) {
        thr[p] = y[p];
        group[p] = 0;
    }
    tt_errbuf err = {{0}};
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RANK, thr, group, N, y, &err), TT_OK);
    double acc[2];
    tt_costmodel *m[2];
    tt_costmodel_objective obj[2] = {TT_COSTMODEL_PROG_RANK, TT_COSTMODEL_PACK_SUM};
    for (int v = 0; v < 2; v++) {
        int rounds = 0;
        assert_int_equal(tt_costmodel_create(obj[v], 1, 43, &m[v], &err), TT_OK);
        if (tt_costmodel_train_packed(m[v], x, nrows, PF, prog, y, N, 400, &rounds, &err))
            fail_msg("%s", err.msg);
        assert_true(rounds >= 2 && rounds <= 400);
        assert_int_equal(tt_costmodel_predict_packed(m[v], tx, trows, PF, tprog, T, pred, &err),
                         TT_OK);
        acc[v] = pairwise_vs_truth(pred, ty, T);
    }
    printf("stores that must match: program rank %.3f, pack-sum %.3f pairwise on %d held-out "
           "programs\n",
           acc[0], acc[1], T);
    assert_true(acc[0] > 0.8);
    assert_true(acc[0] > acc[1] + 0.05);
    /* Saved and loaded, it predicts the same; bad program ids are refused. */
    assert_int_equal(tt_costmodel_predict_packed(m[0], tx, trows, PF, tprog, T, pred, &err), TT_OK);
    void *blob;
    size_t len;
    assert_int_equal(tt_costmodel_save(m[0], &blob, &len, &err), TT_OK);
    tt_costmodel *loaded;
    if (tt_costmodel_load(TT_COSTMODEL_PROG_RANK, 1, blob, len, &loaded, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(tt_costmodel_predict_packed(loaded, tx, trows, PF, tprog, T, pred2, &err),
                     TT_OK);
    for (int i = 0; i < T; i++)
        assert_float_equal(pred[i], pred2[i], 1e-6);
    int bad[2] = {0, T};
    assert_int_equal(tt_costmodel_predict_packed(loaded, tx, 2, PF, bad, T, pred2, &err),
                     TT_ERR_INVALID_ARG);
    free(blob);
    tt_costmodel_free(loaded);
    tt_costmodel_free(m[0]);
    tt_costmodel_free(m[1]);
}

static void labels_ratio_and_rank(void **state)
{
    (void)state;
    /* two groups; failures (0, negative) get 0; equal throughputs share their mean rank */
    double thr[8] = {2, 4, 0, 8, 4, 10, 30, -1};
    int group[8] = {0, 0, 0, 0, 0, 1, 1, 1};
    float y[8];
    tt_errbuf err = {{0}};
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RATIO, thr, group, 8, y, &err), TT_OK);
    float ratio[8] = {0.25f, 0.5f, 0, 1, 0.5f, 1.0f / 3, 1, 0};
    for (int i = 0; i < 8; i++)
        assert_float_equal(y[i], ratio[i], 1e-6);
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RANK, thr, group, 8, y, &err), TT_OK);
    /* group 0 working: 2 < 4 = 4 < 8 -> ranks 0, 1.5, 1.5, 3 of 4; group 1: 10 < 30 */
    float rank[8] = {0.25f, 0.625f, 0, 1, 0.625f, 0.5f, 1, 0};
    for (int i = 0; i < 8; i++)
        assert_float_equal(y[i], rank[i], 1e-6);
    /* an outlier moves ratio labels, not rank labels */
    thr[3] = 800;
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RANK, thr, group, 8, y, &err), TT_OK);
    assert_float_equal(y[0], 0.25f, 1e-6);
    assert_int_equal(tt_costmodel_labels(TT_LABELS_RATIO, thr, group, 8, y, &err), TT_OK);
    assert_float_equal(y[0], 2.0f / 800, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(model_learns_to_rank_unseen_points),
        cmocka_unit_test(pack_sum_model_learns_program_scores),
        cmocka_unit_test(program_rank_model_learns_how_stores_combine),
        cmocka_unit_test(a_recall_and_early_stopping),
        cmocka_unit_test(validation_stopping_does_not_fit_noise),
        cmocka_unit_test(labels_ratio_and_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
