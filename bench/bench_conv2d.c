/* Tuned conv2d against oneDNN in the same run: the ResNet-18 layers (workloads.md §3) in NHWC,
 * float32, batch 1, each tuned with `tvm-tune run`'s search, then oneDNN's convolution (NHWC
 * source and destination, weights in the layout oneDNN picks, as a deployment would pre-pack
 * them) timed the same way: a warm-up call, then the median of 5 samples of at least 20 ms.
 *
 * usage: bench_conv2d [--trials N] [--strategy xgb|evo] [--layers C2,C6,C9,C12] [--db PATH]
 * defaults: 64 trials, xgb, the layers C2, C6, C9, C12.  Tuning runs first: oneDNN's OpenMP
 * threads must not exist when the tuner forks its measurement children. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anchors.h"
#include "db/db.h"
#include "tuner/tune.h"

static const struct {
    const char *name;
    int ci, hw, co, k, s, p;
} layers[] = {
    {"C1", 3, 224, 64, 7, 2, 3},    {"C2", 64, 56, 64, 3, 1, 1},    {"C3", 64, 56, 64, 1, 1, 0},
    {"C4", 64, 56, 128, 3, 2, 1},   {"C5", 64, 56, 128, 1, 2, 0},   {"C6", 128, 28, 128, 3, 1, 1},
    {"C7", 128, 28, 256, 3, 2, 1},  {"C8", 128, 28, 256, 1, 2, 0},  {"C9", 256, 14, 256, 3, 1, 1},
    {"C10", 256, 14, 512, 3, 2, 1}, {"C11", 256, 14, 512, 1, 2, 0}, {"C12", 512, 7, 512, 3, 1, 1},
};
enum { NLAYERS = sizeof(layers) / sizeof(layers[0]) };

int main(int argc, char **argv)
{
    int64_t trials = 64;
    tt_strategy strategy = TT_STRATEGY_XGB;
    const char *db = NULL;
    int use[NLAYERS], nuse = 0;
    char deflt[] = "C2,C6,C9,C12";
    char *list = deflt;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--strategy") && i + 1 < argc)
            strategy = !strcmp(argv[++i], "evo") ? TT_STRATEGY_EVO : TT_STRATEGY_XGB;
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            list = argv[++i];
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db = argv[++i];
        else {
            fprintf(stderr, "usage: bench_conv2d [--trials N] [--strategy xgb|evo] [--layers "
                            "C2,C6,...] [--db PATH]\n");
            return 2;
        }
    }
    for (char *tok = strtok(list, ","); tok && nuse < NLAYERS; tok = strtok(NULL, ","))
        for (int l = 0; l < NLAYERS; l++)
            if (!strcmp(tok, layers[l].name))
                use[nuse++] = l;
    char tmp[128];
    snprintf(tmp, sizeof(tmp), "/tmp/bench-conv2d-%d.db", (int)getpid());
    double tuned[NLAYERS], flops[NLAYERS];
    char keys[NLAYERS][128];
    printf("ResNet-18 conv2d, NHWC float32, %lld trials (%s), %ld cores\n", (long long)trials,
           strategy == TT_STRATEGY_EVO ? "evo" : "xgb", sysconf(_SC_NPROCESSORS_ONLN));
    for (int u = 0; u < nuse; u++) {
        int l = use[u];
        snprintf(keys[u], sizeof(keys[u]), "conv2d_nhwc:N=1,H=%d,W=%d,CI=%d,CO=%d,K=%d,S=%d,P=%d",
                 layers[l].hw, layers[l].hw, layers[l].ci, layers[l].co, layers[l].k, layers[l].s,
                 layers[l].p);
        const char *w[1] = {keys[u]};
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = w;
        o.nworkloads = 1;
        o.trials = trials;
        o.strategy = strategy;
        o.db_path = db ? db : tmp;
        o.seed = 1;
        o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
        o.measure.repeat = 5;
        o.measure.min_repeat_ms = 20;
        o.measure.timeout_s = 10;
        tt_tune_summary sum;
        tt_errbuf err = {{0}};
        if (tt_tune_run(&o, &sum, NULL, &err) || sum.best_s <= 0) {
            fprintf(stderr, "bench_conv2d: %s: %s\n", layers[l].name, err.msg);
            return 1;
        }
        tuned[u] = sum.best_s;
        flops[u] = sum.flops;
        printf("  %-4s tuned: %8.2f GFLOPS (%.3g s)\n", layers[l].name,
               sum.flops / sum.best_s / 1e9, sum.best_s);
        fflush(stdout);
    }
    if (!db)
        tt_db_remove(tmp);
    printf("\n%-5s %12s %12s %8s\n", "layer", "tuned", "oneDNN", "ratio");
    for (int u = 0; u < nuse; u++) {
        double t =
            tt_bench_onednn_conv2d_nhwc(layers[use[u]].ci, layers[use[u]].hw, layers[use[u]].co,
                                        layers[use[u]].k, layers[use[u]].s, layers[use[u]].p);
        if (t <= 0)
            return 1;
        printf("%-5s %8.2f GF/s %8.2f GF/s %8.2f\n", layers[use[u]].name, flops[u] / tuned[u] / 1e9,
               flops[u] / t / 1e9, t / tuned[u]);
    }
    return 0;
}
