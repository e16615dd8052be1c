/* The kernels' thread pool (codegen/pool.h): every thread of a team runs a region once with its
 * own number, regions follow each other without losing or repeating work, nested and concurrent
 * regions run on their caller alone, sleeping workers wake, and a forked child has a pool of
 * its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/pool.h"

#define MAX_TEAM 16

typedef struct {
    atomic_int runs[MAX_TEAM]; /* per thread number */
    atomic_int wrong_team;     /* threads that saw another team size */
    int team;
} region;

static void count_me(void *arg)
{
    region *r = arg;
    int t = tt_rt1_thread_num(), n = tt_rt1_num_threads();
    if (n != r->team || t < 0 || t >= MAX_TEAM)
        atomic_fetch_add(&r->wrong_team, 1);
    else
        atomic_fetch_add(&r->runs[t], 1);
}

/* Runs a region of `team` and checks that numbers 0..team-1 each ran it once. */
static void run_team(int team)
{
    region r;
    memset(&r, 0, sizeof(r));
    r.team = team;
    tt_rt1_parallel(count_me, &r, (unsigned)team, 0);
    assert_int_equal(atomic_load(&r.wrong_team), 0);
    for (int t = 0; t < MAX_TEAM; t++)
        assert_int_equal(atomic_load(&r.runs[t]), t < team ? 1 : 0);
}

static void every_thread_of_a_team_runs_the_region_once(void **state)
{
    assert_int_equal(tt_rt1_thread_num(), 0);
    assert_int_equal(tt_rt1_num_threads(), 1);
    for (int team = 1; team <= 7; team++)
        run_team(team);
    /* Smaller teams than the workers started: the others stay out. */
    for (int team = 6; team >= 1; team--)
        run_team(team);
    /* Outside a region again. */
    assert_int_equal(tt_rt1_thread_num(), 0);
    assert_int_equal(tt_rt1_num_threads(), 1);
}

static void the_default_team_is_TT_NUM_THREADS(void **state)
{
    /* Read when the pool starts: in a child of its own. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TT_NUM_THREADS", "5", 1);
        region r;
        memset(&r, 0, sizeof(r));
        r.team = 5;
        tt_rt1_parallel(count_me, &r, 0, 0);
        int ok = atomic_load(&r.wrong_team) == 0;
        for (int t = 0; t < 5; t++)
            ok &= atomic_load(&r.runs[t]) == 1;
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void add_share(void *arg)
{
    atomic_fetch_add((atomic_long *)arg, tt_rt1_num_threads());
}

/* Team sizes that change from one region to the next: a worker outside one region's team must
 * not run it, nor take the next one for it. */
static void regions_in_a_row_lose_and_repeat_nothing(void **state)
{
    static const int teams[] = {2, 3, 1, 4, 2, 2, 3};
    atomic_long sum = 0;
    long want = 0;
    for (int i = 0; i < 20000; i++) {
        int team = teams[i % 7];
        tt_rt1_parallel(add_share, &sum, (unsigned)team, 0);
        want += (long)team * team;
        if (atomic_load(&sum) != want)
            fail_msg("region %d (team %d): %ld, want %ld", i, team, atomic_load(&sum), want);
    }
}

static void nested(void *arg)
{
    atomic_int *bad = arg;
    int t = tt_rt1_thread_num(), n = tt_rt1_num_threads();
    region inner;
    memset(&inner, 0, sizeof(inner));
    inner.team = 1;
    tt_rt1_parallel(count_me, &inner, 4, 0);
    if (atomic_load(&inner.runs[0]) != 1 || atomic_load(&inner.wrong_team))
        atomic_fetch_add(bad, 1);
    /* The outer region's numbers are back. */
    if (tt_rt1_thread_num() != t || tt_rt1_num_threads() != n)
        atomic_fetch_add(bad, 1);
}

static void *caller(void *arg)
{
    atomic_int *bad = arg;
    for (int i = 0; i < 2000; i++) {
        atomic_long sum = 0;
        tt_rt1_parallel(add_share, &sum, 3, 0);
        /* Either the pool's team of 3 (3 x 3) or the caller alone (1 x 1). */
        long s = atomic_load(&sum);
        if (s != 9 && s != 1)
            atomic_fetch_add(bad, 1);
    }
    return NULL;
}

static void nested_and_concurrent_regions_run_on_their_caller(void **state)
{
    atomic_int bad = 0;
    tt_rt1_parallel(nested, &bad, 3, 0);
    assert_int_equal(atomic_load(&bad), 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, caller, &bad), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&bad), 0);
}

/* With no spinning the workers sleep between regions; each region still wakes its team.  In a
 * forked child, which also shows that a child starts a pool of its own after the parent's. */
static void sleeping_workers_wake_and_a_child_has_its_own_pool(void **state)
{
    run_team(3); /* the parent's pool is running */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TT_POOL_SPIN_US", "0", 1);
        atomic_long sum = 0;
        long want = 0;
        for (int i = 0; i < 200; i++) {
            tt_rt1_parallel(add_share, &sum, 3, 0);
            want += 9;
            if (i % 10 == 0)
                usleep(2000); /* the workers are asleep by now */
        }
        _exit(atomic_load(&sum) == want ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    run_team(4); /* and the parent's still is */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_default_team_is_TT_NUM_THREADS),
        cmocka_unit_test(every_thread_of_a_team_runs_the_region_once),
        cmocka_unit_test(regions_in_a_row_lose_and_repeat_nothing),
        cmocka_unit_test(nested_and_concurrent_regions_run_on_their_caller),
        cmocka_unit_test(sleeping_workers_wake_and_a_child_has_its_own_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
