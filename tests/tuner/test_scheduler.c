/* The task scheduler: Ansor's gradient picks the task whose next round helps the weighted latency
 * sum most; round-robin takes turns; dead tasks are skipped; a two-workload run shares its budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "db/db.h"
#include "tuner/tune.h"

static tt_sched_task task(double weight, double flops, double best, int rounds, double *hist)
{
    for (int r = 0; r < rounds; r++)
        hist[r] = best;
    return (tt_sched_task){weight, flops, best, rounds, hist, -1, false};
}

static void gradient_prefers_heavy_and_slow_tasks(void **state)
{
    (void)state;
    double h[4][16];
    tt_rng rng;
    tt_rng_seed(&rng, 1);
    tt_sched_task t[3];
    /* same work and progress; the one that occurs three times in the model wins */
    t[0] = task(1, 1e9, 1e-3, 2, h[0]);
    t[1] = task(3, 1e9, 1e-3, 2, h[1]);
    t[2] = task(1, 1e9, 1e-3, 2, h[2]);
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_GRADIENT, -1, &rng), 1);
    assert_true(tt_sched_gradient(t, 3, 1, TT_SCHED_ALPHA, TT_SCHED_BETA) <
                tt_sched_gradient(t, 3, 0, TT_SCHED_ALPHA, TT_SCHED_BETA));
    /* equal weights: the slowest (largest latency to win back) */
    t[1].weight = 1;
    t[2].best_s = 5e-3;
    for (int r = 0; r < 2; r++)
        h[2][r] = 5e-3;
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_GRADIENT, -1, &rng), 2);
    /* a task that stopped improving (backward gradient 0) loses to one still improving */
    double a[8] = {4e-3, 3e-3, 2e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
    double b[8] = {1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
    tt_sched_task u[2] = {{1, 1e9, 1e-3, 4, a, -1, false}, {1, 1e9, 1e-3, 8, b, -1, false}};
    assert_int_equal(tt_sched_pick(u, 2, TT_SCHED_GRADIENT, -1, &rng), 0);
    /* dead tasks get nothing */
    t[2].dead = true;
    assert_true(tt_sched_gradient(t, 3, 2, TT_SCHED_ALPHA, TT_SCHED_BETA) == 0);
    assert_int_not_equal(tt_sched_pick(t, 3, TT_SCHED_GRADIENT, -1, &rng), 2);
    t[0].dead = t[1].dead = true;
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_GRADIENT, -1, &rng), -1);
}

static void round_robin_takes_turns(void **state)
{
    (void)state;
    double h[3][4];
    tt_sched_task t[3] = {task(1, 1, 1, 1, h[0]), task(5, 1, 1, 1, h[1]), task(1, 1, 1, 1, h[2])};
    tt_rng rng;
    tt_rng_seed(&rng, 1);
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_ROUND_ROBIN, -1, &rng), 0);
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_ROUND_ROBIN, 0, &rng), 1);
    t[2].dead = true;
    assert_int_equal(tt_sched_pick(t, 3, TT_SCHED_ROUND_ROBIN, 1, &rng), 0);
}

static void similar_tasks_share_a_group(void **state)
{
    (void)state;
    /* same bucket for FLOPs within a factor of 1.618 */
    assert_int_equal(tt_sched_similarity_bucket(1e9), tt_sched_similarity_bucket(1.1e9));
    assert_int_not_equal(tt_sched_similarity_bucket(1e9), tt_sched_similarity_bucket(4e9));
    /* in a group, a task far behind the group's best speed gets a stronger forward gradient */
    double h[2][8];
    tt_sched_task t[2] = {task(1, 1e9, 1e-3, 3, h[0]), task(1, 1e9, 8e-3, 3, h[1])};
    t[0].group = t[1].group = 0;
    assert_int_equal(tt_sched_pick(t, 2, TT_SCHED_GRADIENT, -1, NULL), 1);
    /* it leaves the group once far slower and far more tuned than the others */
    t[1].rounds = 9;
    tt_sched_update_groups(t, 2, 1, TT_SCHED_BETA);
    assert_int_equal(t[1].group, -1);
}

static int count(void *ctx, const tt_db_row *r)
{
    (void)r;
    (*(int *)ctx)++;
    return 0;
}

static void two_workloads_share_the_budget(void **state)
{
    (void)state;
    char db_path[256];
    snprintf(db_path, sizeof(db_path), "/tmp/tt-sched-%d.db", (int)getpid());
    const char *w[2] = {"matmul:M=16,N=16,K=16", "relu:M=32,N=32"};
    const double weights[2] = {3, 1};
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = w;
    o.weights = weights;
    o.nworkloads = 2;
    o.trials = 10;
    o.db_path = db_path;
    o.seed = 3;
    o.batch = 4;
    o.threads = 2;
    o.measure.repeat = 2;
    o.measure.timeout_s = 10;
    tt_tune_summary sum[2];
    tt_errbuf err = {{0}};
    if (tt_tune_run(&o, sum, NULL, &err))
        fail_msg("%s", err.msg);
    /* 20 trials in all, every workload warmed up */
    assert_int_equal(sum[0].total + sum[1].total, 20);
    assert_true(sum[0].total >= 1 && sum[1].total >= 1);
    assert_true(sum[0].best_s > 0 && sum[1].best_s > 0);
    tt_db *db;
    assert_int_equal(tt_db_open(db_path, TT_DB_READONLY, &db, &err), TT_OK);
    int n = 0;
    tt_db_filter f = {0};
    assert_int_equal(tt_db_history(db, &f, count, &n), TT_OK);
    assert_int_equal(n, 20);
    tt_db_close(db);
    /* resumed with a larger budget: only the difference is measured */
    o.trials = 15;
    o.policy = TT_SCHED_ROUND_ROBIN;
    if (tt_tune_run(&o, sum, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sum[0].measured + sum[1].measured, 10);
    assert_int_equal(sum[0].total + sum[1].total, 30);
    tt_db_remove(db_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gradient_prefers_heavy_and_slow_tasks),
        cmocka_unit_test(round_robin_takes_turns),
        cmocka_unit_test(similar_tasks_share_a_group),
        cmocka_unit_test(two_workloads_share_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
