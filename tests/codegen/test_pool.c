/* The kernels' thread pool (codegen/pool.h): every thread of a team runs a region once with its
 * own number, regions follow each other without losing or repeating work, nested and concurrent
 * regions run on their caller alone, sleeping workers wake, a forked child has a pool of its
 * own, and a parallel loop runs each iteration once, its stalled thread's share taken by the
 * others. */
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

/* ---- parallel loops (tt_rt1_parallel_for) ---- */

#define MAX_EXTENT 4096

typedef struct {
    atomic_int ran[MAX_EXTENT]; /* per iteration */
    atomic_int by[MAX_TEAM];    /* iterations per thread number */
    atomic_int bad;             /* a range out of bounds, or a number outside the team */
    /* slow_num: this thread's first range stalls (-1: none), until the others have run
     * `stall_until` iterations (or 10 s have passed): a descheduled core, or one shared with a
     * busy neighbour, and a test that does not depend on how fast the others are scheduled */
    int extent, team, slow_num, stall_until;
    atomic_int stalled, total;
} loop_run;

static void run_ranges(void *arg, tt_rt1_loop *loop, int num)
{
    loop_run *l = arg;
    if (num < 0 || num >= l->team || tt_rt1_thread_num() != num)
        atomic_fetch_add(&l->bad, 1);
    long long r[2];
    while (tt_rt1_loop_next(loop, num, r)) {
        if (r[0] < 0 || r[1] > l->extent || r[0] >= r[1]) {
            atomic_fetch_add(&l->bad, 1);
            continue;
        }
        if (num == l->slow_num && !atomic_exchange(&l->stalled, 1))
            for (int ms = 0; ms < 10000 && atomic_load(&l->total) < l->stall_until; ms++)
                usleep(1000);
        for (long long i = r[0]; i < r[1]; i++)
            atomic_fetch_add(&l->ran[i], 1);
        atomic_fetch_add(&l->by[num], (int)(r[1] - r[0]));
        atomic_fetch_add(&l->total, (int)(r[1] - r[0]));
    }
}

static void run_loop(loop_run *l, int extent, int team, int slow_num, int stall_until)
{
    memset(l, 0, sizeof(*l));
    l->extent = extent;
    l->team = team < extent ? team : extent;
    l->slow_num = slow_num;
    l->stall_until = stall_until;
    tt_rt1_parallel_for(run_ranges, l, extent, (unsigned)team);
    assert_int_equal(atomic_load(&l->bad), 0);
    for (int i = 0; i < extent; i++)
        if (atomic_load(&l->ran[i]) != 1)
            fail_msg("extent %d, team %d: iteration %d ran %d times", extent, team, i,
                     atomic_load(&l->ran[i]));
}

static void every_iteration_of_a_parallel_loop_runs_once(void **state)
{
    static loop_run l;
    static const int extents[] = {1, 2, 3, 5, 7, 16, 63, 1000, MAX_EXTENT};
    for (size_t e = 0; e < sizeof(extents) / sizeof(extents[0]); e++)
        for (int team = 1; team <= 5; team++) {
            run_loop(&l, extents[e], team, -1, 0);
            /* A team larger than the loop is cut to one thread an iteration. */
            for (int t = l.team; t < MAX_TEAM; t++)
                assert_int_equal(atomic_load(&l.by[t]), 0);
        }
    /* Many in a row, as a network calls its kernels. */
    for (int i = 0; i < 2000; i++)
        run_loop(&l, 1 + i % 97, 2, -1, 0);
    assert_int_equal(tt_rt1_thread_num(), 0);
    assert_int_equal(tt_rt1_num_threads(), 1);
}

/* Each thread starts on its own contiguous share; when one stalls, the others take its share
 * but for the last iteration, which stays its owner's. */
static void a_stalled_threads_share_is_taken_by_the_others(void **state)
{
    static loop_run l;
    /* Thread 1 stalls in its first range (at most a quarter of its 32): thread 0 runs
     * everything else but the last iteration of thread 1's share, 55 at least. */
    run_loop(&l, 64, 2, 1, 55);
    int by1 = atomic_load(&l.by[1]);
    assert_true(by1 >= 1);
    assert_true(by1 <= 8 + 1);
    assert_int_equal(atomic_load(&l.by[0]) + by1, 64);
    /* The caller stalls in its first range (at most 25 of its 100): the two workers run their
     * own shares and all of the caller's but its first range and its last iteration. */
    run_loop(&l, 300, 3, 0, 274);
    assert_true(atomic_load(&l.by[0]) <= 25 + 1);
    assert_true(atomic_load(&l.by[1]) + atomic_load(&l.by[2]) >= 274);
}

static void nested_loop(void *arg, tt_rt1_loop *loop, int num)
{
    atomic_int *bad = arg;
    long long r[2];
    while (tt_rt1_loop_next(loop, num, r)) {
        static loop_run inner[MAX_TEAM];
        loop_run *l = &inner[num];
        memset(l, 0, sizeof(*l));
        l->extent = 50;
        l->team = 1; /* inside a region: the caller alone, as number 0 */
        l->slow_num = -1;
        int t = tt_rt1_thread_num();
        tt_rt1_parallel_for(run_ranges, l, 50, 4);
        for (int i = 0; i < 50; i++)
            if (atomic_load(&l->ran[i]) != 1)
                atomic_fetch_add(bad, 1);
        if (atomic_load(&l->bad) || atomic_load(&l->by[0]) != 50 || tt_rt1_thread_num() != t)
            atomic_fetch_add(bad, 1);
    }
}

static void nested_parallel_loops_run_on_their_caller(void **state)
{
    atomic_int bad = 0;
    tt_rt1_parallel_for(nested_loop, &bad, 3, 3);
    assert_int_equal(atomic_load(&bad), 0);
    /* And inside a plain region. */
    tt_rt1_parallel(nested, &bad, 2, 0);
    assert_int_equal(atomic_load(&bad), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_default_team_is_TT_NUM_THREADS),
        cmocka_unit_test(every_thread_of_a_team_runs_the_region_once),
        cmocka_unit_test(regions_in_a_row_lose_and_repeat_nothing),
        cmocka_unit_test(nested_and_concurrent_regions_run_on_their_caller),
        cmocka_unit_test(sleeping_workers_wake_and_a_child_has_its_own_pool),
        cmocka_unit_test(every_iteration_of_a_parallel_loop_runs_once),
        cmocka_unit_test(a_stalled_threads_share_is_taken_by_the_others),
        cmocka_unit_test(nested_parallel_loops_run_on_their_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
