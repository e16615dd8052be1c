/* Search efficiency: the best GFLOPS each strategy has found after 50, 100, 200 and 500 trials
 * (mean over seeds), and the trials each needs to reach 90% of the best any strategy found, as a
 * ratio to the first strategy listed (the anchor, measured in the same run): random search, or
 * sketch-random.  Random and grid search, the GA and XGB search the tiling template; evo and
 * sketch-random (evo's space without its model) search Ansor's sketches, so
 * `--strategies sketch-random,evo` asks what evo's model and evolution are worth in its own space.
 *
 * usage: bench_search [--checkpoints 50,100,200,500] [--seeds S] [--strategies random,ga,xgb,evo]
 *                     [--population N] [WORKLOAD]
 * defaults: the checkpoints above, 3 seeds, random, ga, xgb and evo, matmul:M=512,N=512,K=512;
 * grid and sketch-random may also be listed.
 * The C2D layer of the issue: conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "tuner/tune.h"

#define MAX_CK 16
#define MAX_ST 6

typedef struct {
    double *best; /* best GFLOPS after each trial */
    int n, cap;
    double flops;
} curve;

static int collect(void *ctx, const tt_db_row *r)
{
    curve *c = ctx;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 512;
        double *g = realloc(c->best, sizeof(double) * (size_t)cap);
        if (!g)
            return 1;
        c->best = g;
        c->cap = cap;
    }
    double g = r->error_no == 0 && r->fastest_s > 0 ? c->flops / r->fastest_s / 1e9 : 0;
    double prev = c->n ? c->best[c->n - 1] : 0;
    c->best[c->n++] = g > prev ? g : prev;
    return 0;
}

int main(int argc, char **argv)
{
    int64_t ck[MAX_CK] = {50, 100, 200, 500};
    int nck = 4, seeds = 3, population = 0;
    const char *workload = "matmul:M=512,N=512,K=512";
    static const struct {
        const char *name;
        tt_strategy s;
    } all[] = {{"random", TT_STRATEGY_RANDOM}, {"ga", TT_STRATEGY_GA},
               {"xgb", TT_STRATEGY_XGB},       {"evo", TT_STRATEGY_EVO},
               {"grid", TT_STRATEGY_GRID},     {"sketch-random", TT_STRATEGY_SKETCH_RANDOM}};
    int use[MAX_ST] = {0, 1, 2, 3}, nuse = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--checkpoints") && i + 1 < argc) {
            nck = 0;
            for (char *p = argv[++i]; *p && nck < MAX_CK;) {
                ck[nck++] = strtoll(p, &p, 10);
                if (*p == ',')
                    p++;
                else if (*p)
                    break;
            }
        } else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
            seeds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--population") && i + 1 < argc) {
            population = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--strategies") && i + 1 < argc) {
            nuse = 0;
            char *list = argv[++i];
            for (char *tok = strtok(list, ","); tok && nuse < MAX_ST; tok = strtok(NULL, ","))
                for (int k = 0; k < MAX_ST; k++)
                    if (!strcmp(tok, all[k].name))
                        use[nuse++] = k;
        } else {
            workload = argv[i];
        }
    }
    if (nck < 1 || seeds < 1 || nuse < 1 ||
        (all[use[0]].s != TT_STRATEGY_RANDOM && all[use[0]].s != TT_STRATEGY_SKETCH_RANDOM)) {
        fprintf(stderr, "bench_search: needs checkpoints, seeds, and random or sketch-random first "
                        "(the anchor)\n");
        return 2;
    }
    int64_t max = ck[nck - 1];
    printf("%s, up to %lld trials, %d seeds, %ld cores\n", workload, (long long)max, seeds,
           sysconf(_SC_NPROCESSORS_ONLN));
    static double mean[MAX_ST][4096];
    if (max > 4096) {
        fprintf(stderr, "bench_search: at most 4096 trials\n");
        return 2;
    }
    for (int k = 0; k < nuse; k++) {
        for (int seed = 1; seed <= seeds; seed++) {
            char db[128];
            snprintf(db, sizeof(db), "/tmp/bench-search-%d.db", (int)getpid());
            tt_db_remove(db);
            const char *w[1] = {workload};
            tt_tune_options o;
            memset(&o, 0, sizeof(o));
            o.workloads = w;
            o.nworkloads = 1;
            o.trials = max;
            o.strategy = all[use[k]].s;
            o.population = population;
            o.db_path = db;
            o.seed = (uint64_t)seed;
            o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
            o.measure.repeat = 3;
            o.measure.min_repeat_ms = 20;
            o.measure.timeout_s = 10;
            tt_tune_summary sum;
            tt_errbuf err = {{0}};
            if (tt_tune_run(&o, &sum, NULL, &err) || sum.best_s <= 0) {
                fprintf(stderr, "bench_search: %s\n", err.msg);
                return 1;
            }
            curve c = {NULL, 0, 0, sum.flops};
            tt_db *d;
            tt_db_filter f = {.workload = sum.workload};
            if (tt_db_open(db, TT_DB_READONLY, &d, &err) || tt_db_history(d, &f, collect, &c)) {
                fprintf(stderr, "bench_search: reading the history: %s\n", err.msg);
                return 1;
            }
            tt_db_close(d);
            printf("  %-13s seed %d:", all[use[k]].name, seed);
            for (int64_t t = 0; t < max; t++) {
                double g = c.n ? c.best[t < c.n ? t : c.n - 1] : 0;
                mean[k][t] += g / seeds;
            }
            for (int i = 0; i < nck; i++)
                printf(" %8.2f", c.n ? c.best[(ck[i] <= c.n ? ck[i] : c.n) - 1] : 0);
            printf("  GFLOPS at");
            for (int i = 0; i < nck; i++)
                printf(" %lld", (long long)ck[i]);
            printf(" trials\n");
            fflush(stdout);
            free(c.best);
            tt_db_remove(db);
        }
    }
    double top = 0;
    for (int k = 0; k < nuse; k++)
        top = mean[k][max - 1] > top ? mean[k][max - 1] : top;
    int64_t need[MAX_ST];
    for (int k = 0; k < nuse; k++) {
        need[k] = -1;
        for (int64_t t = 0; t < max && need[k] < 0; t++)
            if (mean[k][t] >= 0.9 * top)
                need[k] = t + 1;
    }
    printf("\nmean best GFLOPS (90%% of the best found = %.2f GFLOPS)\n%-13s", 0.9 * top,
           "strategy");
    for (int i = 0; i < nck; i++)
        printf(" %8lld", (long long)ck[i]);
    printf("   trials to 90%%   %s's / this\n", all[use[0]].name);
    for (int k = 0; k < nuse; k++) {
        printf("%-13s", all[use[k]].name);
        for (int i = 0; i < nck; i++)
            printf(" %8.2f", mean[k][ck[i] - 1]);
        if (need[k] < 0)
            printf("   >%-13lld", (long long)max);
        else
            printf("   %-14lld", (long long)need[k]);
        if (need[k] > 0 && need[0] > 0)
            printf("   %.2f\n", (double)need[0] / (double)need[k]);
        else if (need[k] > 0)
            printf("   >%.2f\n", (double)max / (double)need[k]);
        else
            printf("   -\n");
    }
    return 0;
}
