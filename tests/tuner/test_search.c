/* Every strategy finds the planted optimum of a synthetic objective faster than random search on
 * average over seeds.  The objective replaces compiling and running (tt_tune_options.objective):
 * a config costs more the further the innermost length of each split is from 4, and more without
 * a parallel loop; the optimum (1 ms) is reachable in the tiling template and in the sketches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "tuner/tune.h"

static double objective(void *ctx, const char *config)
{
    (void)ctx;
    tt_step *steps;
    size_t n;
    if (tt_steps_from_json(config, &steps, &n, NULL))
        return -1;
    double penalty = 0;
    int nsplit = 0;
    bool parallel = false;
    for (size_t i = 0; i < n; i++) {
        if (steps[i].kind == TT_STEP_SPLIT && steps[i].nlen > 0) {
            penalty += fabs(log2((double)steps[i].lengths[steps[i].nlen - 1]) - 2);
            nsplit++;
        }
        parallel |= steps[i].kind == TT_STEP_ANNOTATE && steps[i].ann == TT_ANN_PARALLEL;
    }
    free(steps);
    if (nsplit < 3)
        penalty += 3;
    return 1e-3 * (1 + penalty + (parallel ? 0 : 1));
}

typedef struct {
    int trial, found;
    double late_cost; /* the objective summed over the trials after LATE */
    int late;
} first_hit;

enum { BUDGET = 320, SEEDS = 4, LATE = 192 };

static int scan(void *ctx, const tt_db_row *r)
{
    first_hit *f = ctx;
    f->trial++;
    if (!f->found && r->error_no == 0 && r->fastest_s <= 1e-3 * 1.0001)
        f->found = f->trial;
    if (f->trial > LATE && r->error_no == 0) {
        f->late_cost += r->fastest_s;
        f->late++;
    }
    return 0;
}

/* SSE's 4-lane vectors: the template's register tiles can then have innermost lengths of 4, so
 * the planted optimum is in the template space (with AVX-512 every column tile is a multiple of
 * 16).  The objective replaces compiling, so the target only shapes the space. */
#define TARGET "llvm -num-cores=4 -mattr=-avx,-avx2,-avx512f"

/* Mean over `seeds` runs (rounds of `batch`) of the trials to the planted optimum (BUDGET + 1: not
 * found); *late: the mean objective of the trials after LATE, where a strategy that learns proposes
 * better configs than random ones even when neither hits the optimum. */
static double mean_trials_to_optimum(tt_strategy strategy, const char *name, double diversity,
                                     tt_feature_kind features, int batch, int seeds, double *late)
{
    double total = 0, late_sum = 0;
    printf("%-7s", name);
    for (int seed = 1; seed <= seeds; seed++) {
        char db_path[256];
        snprintf(db_path, sizeof(db_path), "/tmp/tt-search-%d.db", (int)getpid());
        tt_db_remove(db_path);
        const char *w[1] = {"matmul:M=64,N=64,K=64"};
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = w;
        o.nworkloads = 1;
        o.trials = BUDGET;
        o.strategy = strategy;
        o.target = TARGET; /* the same spaces on every machine */
        o.db_path = db_path;
        o.seed = (uint64_t)seed * 7919;
        o.batch = batch;
        o.threads = 2;
        o.population = 256;
        o.diversity = diversity;
        o.features = features;
        o.objective = objective;
        o.measure.repeat = 1;
        o.measure.timeout_s = 10;
        tt_tune_summary sum;
        tt_errbuf err = {{0}};
        if (tt_tune_run(&o, &sum, NULL, &err))
            fail_msg("%s: %s", name, err.msg);
        tt_db *db;
        first_hit f = {0};
        tt_db_filter flt = {.workload = sum.workload};
        assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
        assert_int_equal(tt_db_history(db, &flt, scan, &f), TT_OK);
        tt_db_close(db);
        tt_db_remove(db_path);
        int t = f.found ? f.found : BUDGET + 1;
        printf(" %4d", t);
        total += t;
        late_sum += f.late ? f.late_cost / f.late : 1;
    }
    *late = late_sum / seeds;
    printf("   mean %.1f trials to the optimum, %.2f ms after trial %d\n", total / seeds,
           *late * 1e3, LATE);
    return total / seeds;
}

static void strategies_beat_random_on_a_planted_optimum(void **state)
{
    (void)state;
    const tt_feature_kind knob = TT_FEATURES_KNOB;
    double late_random, late_ga, late;
    double random =
        mean_trials_to_optimum(TT_STRATEGY_RANDOM, "random", 0, knob, 16, SEEDS, &late_random);
    mean_trials_to_optimum(TT_STRATEGY_GA, "ga", 0, knob, 16, SEEDS, &late_ga);
    double xgb = mean_trials_to_optimum(TT_STRATEGY_XGB, "xgb", 0, knob, 16, SEEDS, &late);
    double xgb_div = mean_trials_to_optimum(TT_STRATEGY_XGB, "xgb-div", 2, knob, 16, SEEDS, &late);
    double evo = mean_trials_to_optimum(TT_STRATEGY_EVO, "evo", 0, knob, 16, SEEDS, &late);
    /* AutoTVM's loop-variable features (every proposal lowered: slower, so rounds of 32, as
     * AutoTVM's, and two seeds: the sanitizer build takes a minute a seed).  Once its own test of
     * one seed and 160 trials: a lottery ticket that any change to the starting points redrew
     * (2026-12-07: found after 124 trials, then missed). */
    double itervar =
        mean_trials_to_optimum(TT_STRATEGY_XGB, "xgb-iv", 0, TT_FEATURES_ITERVAR, 32, 2, &late);
    /* GA (AutoTVM's: roulette over throughput) rarely hits the optimum in this budget, nor does
     * random (over 12 seeds, 4 and 2 of 12): its bred generations are better, not the best. */
    assert_true(late_ga < late_random);
    assert_true(xgb < random);
    assert_true(xgb_div < random);
    assert_true(evo < random);
    assert_true(itervar < random);
}

static int extras(void *ctx, const tt_db_row *r)
{
    int *n = ctx;
    n[0]++;
    n[1] += r->extra && strstr(r->extra, "\"space\": \"tiling:") && strstr(r->extra, "\"index\": ");
    return 0;
}

/* A run stopped early and resumed continues from its records: template records carry their
 * config index, so the model and the GA pick up where they were; the resumed xgb search still
 * finds the optimum well within the budget random search does not find it in (320 trials). */
enum { RESUMED = 192 }; /* 6 runs of 32 */

static void resumed_model_search_continues(void **state)
{
    (void)state;
    char db_path[256];
    snprintf(db_path, sizeof(db_path), "/tmp/tt-search-resume-%d.db", (int)getpid());
    for (int seed = 1; seed <= 3; seed++) {
        tt_db_remove(db_path);
        const char *w[1] = {"matmul:M=64,N=64,K=64"};
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = w;
        o.nworkloads = 1;
        o.strategy = TT_STRATEGY_XGB;
        o.target = TARGET;
        o.db_path = db_path;
        o.seed = (uint64_t)seed;
        o.batch = 16;
        o.threads = 2;
        o.objective = objective;
        o.measure.repeat = 1;
        tt_tune_summary sum;
        tt_errbuf err = {{0}};
        for (int64_t trials = 32; trials <= RESUMED; trials += 32) {
            o.trials = trials;
            o.seed++;
            if (tt_tune_run(&o, &sum, NULL, &err))
                fail_msg("%s", err.msg);
        }
        tt_db *db;
        first_hit f = {0};
        int n[2] = {0, 0};
        tt_db_filter flt = {.workload = sum.workload};
        assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
        assert_int_equal(tt_db_history(db, &flt, scan, &f), TT_OK);
        assert_int_equal(tt_db_history(db, &flt, extras, n), TT_OK);
        tt_db_close(db);
        assert_int_equal(n[0], RESUMED);
        assert_int_equal(n[1], RESUMED - 1); /* all but the naive baseline */
        printf("resumed xgb, seed %d: optimum after %d trials\n", seed, f.found);
        assert_true(f.found > 0 && f.found <= RESUMED);
    }
    tt_db_remove(db_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strategies_beat_random_on_a_planted_optimum),
        cmocka_unit_test(resumed_model_search_continues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
