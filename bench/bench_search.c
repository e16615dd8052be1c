/* Search strategies compared: best GFLOPS found within a trial budget, averaged over seeds, as a
 * ratio to random search measured in the same run (the anchor).
 *
 * usage: bench_search [--trials N] [--seeds S] [WORKLOAD]   (64, 3, matmul:M=256,N=256,K=256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "tuner/tune.h"

int main(int argc, char **argv)
{
    int64_t trials = 64;
    int seeds = 3;
    const char *workload = "matmul:M=256,N=256,K=256";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else
            workload = argv[i];
    }
    static const struct {
        const char *name;
        tt_strategy s;
    } strategies[] = {
        {"random", TT_STRATEGY_RANDOM}, {"ga", TT_STRATEGY_GA}, {"xgb", TT_STRATEGY_XGB}};
    double mean[3] = {0};
    printf("%s, %lld trials, %d seeds, %ld cores\n", workload, (long long)trials, seeds,
           sysconf(_SC_NPROCESSORS_ONLN));
    for (int k = 0; k < 3; k++) {
        for (int seed = 1; seed <= seeds; seed++) {
            char db[128];
            snprintf(db, sizeof(db), "/tmp/bench-search-%d.db", (int)getpid());
            tt_db_remove(db);
            const char *w[1] = {workload};
            tt_tune_options o;
            memset(&o, 0, sizeof(o));
            o.workloads = w;
            o.nworkloads = 1;
            o.trials = trials;
            o.strategy = strategies[k].s;
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
            double g = sum.flops / sum.best_s / 1e9;
            mean[k] += g / seeds;
            printf("  %-6s seed %d: %8.2f GFLOPS\n", strategies[k].name, seed, g);
            tt_db_remove(db);
        }
    }
    for (int k = 0; k < 3; k++)
        printf("%-6s mean best %8.2f GFLOPS   ratio to random %.2f\n", strategies[k].name, mean[k],
               mean[k] / mean[0]);
    return 0;
}
