/* Cost-model quality on held-out measured programs: the pack-sum model trained on 80% of a
 * workload's records (per-store features) ranks the other 20%.  Prints pairwise accuracy, top-1
 * and top-5 recall and TenSet's top-k score (best latency of the held-out set over the best
 * latency among the model's top k), each next to the same number for a random ranking (the
 * anchor, same run, mean of 200 shuffles).
 *
 * usage: bench_costmodel [--db PATH --workload W] [--trials N] [--seed S]
 * Without --db it first measures N (400) programs of matmul:M=128,N=128,K=128 with
 * `tvm-tune run --strategy evo`'s search into a temporary database. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costmodel/costmodel.h"
#include "costmodel/features.h"
#include "db/db.h"
#include "tuner/evolution.h"
#include "tuner/tune.h"

typedef struct {
    tt_workload *w;
    float *rows;
    int *row_prog;
    int nrows, cap;
    double *lat; /* seconds, per program */
    int nprog, capp;
} dataset;

static int add_row(void *ctx, const tt_db_row *r)
{
    dataset *d = ctx;
    if (r->error_no || r->median_s <= 0 || r->config_kind != TT_CONFIG_STEPS ||
        !strcmp(r->config, "[]"))
        return 0;
    tt_step *steps;
    size_t n;
    tt_state *st;
    if (tt_steps_from_json(r->config, &steps, &n, NULL))
        return 0;
    int ok = !tt_state_replay(&d->w->dag, steps, n, &st, NULL);
    free(steps);
    if (!ok)
        return 0;
    float *rows;
    int nr = tt_evo_features(st, &rows);
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
    }
    if (!d->rows || !d->row_prog || !d->lat)
        return 1;
    memcpy(d->rows + (size_t)d->nrows * TT_STORE_FEATURES, rows,
           sizeof(float) * TT_STORE_FEATURES * (size_t)nr);
    for (int i = 0; i < nr; i++)
        d->row_prog[d->nrows + i] = d->nprog;
    d->nrows += nr;
    d->lat[d->nprog++] = r->median_s;
    free(rows);
    return 0;
}

typedef struct {
    double pairwise, top1, top5, score1, score5;
} quality;

/* score[i]: higher = predicted faster. */
static quality evaluate(const double *lat, const double *score, const int *ids, int n)
{
    quality q = {0};
    int agree = 0, pairs = 0, best = 0;
    for (int i = 0; i < n; i++) {
        if (lat[ids[i]] < lat[ids[best]])
            best = i;
        for (int j = i + 1; j < n; j++) {
            if (lat[ids[i]] == lat[ids[j]])
                continue;
            pairs++;
            agree += (lat[ids[i]] < lat[ids[j]]) == (score[i] > score[j]);
        }
    }
    q.pairwise = pairs ? (double)agree / pairs : 0;
    /* the model's top 5, best predicted first */
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

int main(int argc, char **argv)
{
    const char *db_path = NULL, *workload = "matmul:M=128,N=128,K=128";
    int64_t trials = 400;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db_path = argv[++i];
        else if (!strcmp(argv[i], "--workload") && i + 1 < argc)
            workload = argv[++i];
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_costmodel [--db PATH --workload W] [--trials N] "
                            "[--seed S]\n");
            return 2;
        }
    }
    char tmp[128] = "";
    tt_errbuf err = {{0}};
    if (!db_path) {
        snprintf(tmp, sizeof(tmp), "/tmp/bench-costmodel-%d.db", (int)getpid());
        db_path = tmp;
        const char *w[1] = {workload};
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = w;
        o.nworkloads = 1;
        o.trials = trials;
        o.strategy = TT_STRATEGY_EVO;
        o.population = 512;
        o.db_path = db_path;
        o.seed = seed;
        o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
        o.measure.repeat = 3;
        o.measure.min_repeat_ms = 10;
        o.measure.timeout_s = 10;
        tt_tune_summary sum;
        printf("measuring %lld programs of %s ...\n", (long long)trials, workload);
        fflush(stdout);
        if (tt_tune_run(&o, &sum, NULL, &err)) {
            fprintf(stderr, "bench_costmodel: %s\n", err.msg);
            return 1;
        }
    }
    dataset d;
    memset(&d, 0, sizeof(d));
    if (tt_workload_parse(workload, &d.w, &err)) {
        fprintf(stderr, "bench_costmodel: %s\n", err.msg);
        return 1;
    }
    tt_db *db;
    tt_db_filter f = {.workload = d.w->key};
    if (tt_db_open(db_path, TT_DB_READONLY, &db, &err) || tt_db_history(db, &f, add_row, &d)) {
        fprintf(stderr, "bench_costmodel: %s\n", err.msg);
        return 1;
    }
    tt_db_close(db);
    if (d.nprog < 50) {
        fprintf(stderr, "bench_costmodel: only %d valid programs of %s in %s (need 50)\n", d.nprog,
                d.w->key, db_path);
        return 1;
    }
    /* 80/20 split, shuffled */
    int *perm = malloc(sizeof(int) * (size_t)d.nprog);
    tt_rng rng;
    tt_rng_seed(&rng, seed);
    for (int i = 0; i < d.nprog; i++)
        perm[i] = i;
    for (int i = d.nprog - 1; i > 0; i--) {
        int j = (int)tt_rng_below(&rng, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int ntrain = d.nprog * 4 / 5, ntest = d.nprog - ntrain;
    bool *is_test = calloc((size_t)d.nprog, sizeof(bool));
    for (int i = ntrain; i < d.nprog; i++)
        is_test[perm[i]] = true;
    /* training rows in program order, labels min latency / latency */
    float *tx = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)d.nrows);
    float *ex = malloc(sizeof(float) * TT_STORE_FEATURES * (size_t)d.nrows);
    int *tp = malloc(sizeof(int) * (size_t)d.nrows), *ep = malloc(sizeof(int) * (size_t)d.nrows);
    int *tmap = malloc(sizeof(int) * (size_t)d.nprog),
        *emap = malloc(sizeof(int) * (size_t)d.nprog);
    float *y = malloc(sizeof(float) * (size_t)d.nprog);
    int *test_ids = malloc(sizeof(int) * (size_t)d.nprog);
    double minlat = INFINITY;
    for (int p = 0; p < d.nprog; p++)
        if (!is_test[p] && d.lat[p] < minlat)
            minlat = d.lat[p];
    int ntr = 0, nte = 0, ntp = 0, nep = 0;
    for (int p = 0; p < d.nprog; p++) {
        if (is_test[p]) {
            emap[p] = nep;
            test_ids[nep++] = p;
        } else {
            tmap[p] = ntp;
            y[ntp++] = (float)(minlat / d.lat[p]);
        }
    }
    for (int r = 0; r < d.nrows; r++) {
        int p = d.row_prog[r];
        if (is_test[p]) {
            memcpy(ex + (size_t)nte * TT_STORE_FEATURES, d.rows + (size_t)r * TT_STORE_FEATURES,
                   sizeof(float) * TT_STORE_FEATURES);
            ep[nte++] = emap[p];
        } else {
            memcpy(tx + (size_t)ntr * TT_STORE_FEATURES, d.rows + (size_t)r * TT_STORE_FEATURES,
                   sizeof(float) * TT_STORE_FEATURES);
            tp[ntr++] = tmap[p];
        }
    }
    tt_costmodel *m;
    int rounds = 0;
    float *pred = malloc(sizeof(float) * (size_t)ntest);
    if (tt_costmodel_create(TT_COSTMODEL_PACK_SUM, 0, 43, &m, &err) ||
        tt_costmodel_train_packed(m, tx, ntr, TT_STORE_FEATURES, tp, y, ntp, 1000, &rounds, &err) ||
        tt_costmodel_predict_packed(m, ex, nte, TT_STORE_FEATURES, ep, nep, pred, &err)) {
        fprintf(stderr, "bench_costmodel: %s\n", err.msg);
        return 1;
    }
    double *score = malloc(sizeof(double) * (size_t)ntest);
    for (int i = 0; i < ntest; i++)
        score[i] = pred[i];
    quality q = evaluate(d.lat, score, test_ids, ntest);
    /* anchor: random rankings */
    quality a = {0};
    enum { SHUFFLES = 200 };
    for (int s = 0; s < SHUFFLES; s++) {
        for (int i = 0; i < ntest; i++)
            score[i] = tt_rng_uniform(&rng);
        quality r = evaluate(d.lat, score, test_ids, ntest);
        a.pairwise += r.pairwise / SHUFFLES;
        a.top1 += r.top1 / SHUFFLES;
        a.top5 += r.top5 / SHUFFLES;
        a.score1 += r.score1 / SHUFFLES;
        a.score5 += r.score5 / SHUFFLES;
    }
    printf("%s: %d programs (%d train, %d held out), %d feature rows, %d boosting rounds\n",
           d.w->key, d.nprog, ntrain, ntest, d.nrows, rounds);
    printf("%-22s %10s %10s %8s\n", "", "pack-sum", "random", "ratio");
    printf("%-22s %10.3f %10.3f %8.2f\n", "pairwise accuracy", q.pairwise, a.pairwise,
           q.pairwise / a.pairwise);
    printf("%-22s %10.3f %10.3f\n", "top-1 recall", q.top1, a.top1);
    printf("%-22s %10.3f %10.3f\n", "top-5 recall", q.top5, a.top5);
    printf("%-22s %10.3f %10.3f %8.2f\n", "TenSet top-1 score", q.score1, a.score1,
           q.score1 / a.score1);
    printf("%-22s %10.3f %10.3f %8.2f\n", "TenSet top-5 score", q.score5, a.score5,
           q.score5 / a.score5);
    tt_costmodel_free(m);
    if (tmp[0])
        tt_db_remove(tmp);
    return 0;
}
