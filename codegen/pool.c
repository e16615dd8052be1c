#define _GNU_SOURCE /* sched_getaffinity, syscall */
/* The kernels' thread pool (pool.h).  It is linked into kernel libraries that applications load,
 * so it uses nothing beyond the C library and keeps no state but this file's. */
#include "pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX_THREADS 256
#define TEAM_BITS        9 /* the region word: the team's size, the loop flag, a counter above */
#define TEAM_MASK        ((1u << TEAM_BITS) - 1)
#define REGION_LOOP      (1u << TEAM_BITS) /* a tt_rt1_parallel_for region */
#define REGION_ONE       (1u << (TEAM_BITS + 1))

typedef void (*region_fn)(void *);
typedef void (*loop_fn)(void *, tt_rt1_loop *, int);

/* One thread's share of a parallel loop, [next, limit) packed as limit << 32 | next: its owner
 * takes from the front, others from the back, each with one compare-and-swap. */
typedef struct {
    _Alignas(64) _Atomic uint64_t range;
} loop_share;

struct tt_rt1_loop {
    int team;
    loop_share *shares;
};

/* Each word that threads write in turn on a line of its own. */
static struct {
    /* Bumped once per region, with the team's size in its low bits so that a worker reads the
     * region and its size together; the workers wait on it. */
    _Alignas(64) atomic_uint region;
    /* The region's function and argument, written just before `region` is bumped: on its line,
     * so that a worker has the region in one cache miss. */
    region_fn fn;
    void *data;
    /* A loop region's function, argument and shares, written before `region` is bumped. */
    loop_fn loop_fn;
    void *loop_data;
    tt_rt1_loop loop;
    _Alignas(64) atomic_int pending;  /* the team's workers still running the region */
    _Alignas(64) atomic_int sleepers; /* workers asleep on `region` */
    _Alignas(64) int workers;         /* threads started: numbers 1..workers */
    int size;                         /* the default team */
    long spin_ns;
    unsigned first_region[POOL_MAX_THREADS]; /* the region word each worker starts after */
} pool;
static loop_share shares[POOL_MAX_THREADS];

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER; /* held by the running region */
/* The calling thread's place in its team, (team << 16) | number, 0 outside a region (thread 0
 * of 1).  A pthread key, not thread-local storage: a library's TLS is either a dynamically
 * allocated block, on which LeakSanitizer's thread scan crashes in an ASan process that ran an
 * uninstrumented library's pool, or initial-exec, which takes glibc's small static reserve and
 * runs out after some hundreds of kernel libraries loaded by one process. */
static pthread_key_t place_key;
static pthread_once_t place_once = PTHREAD_ONCE_INIT;
static int place_ok;

static void make_place_key(void)
{
    place_ok = pthread_key_create(&place_key, NULL) == 0;
}

static uintptr_t place(void)
{
    pthread_once(&place_once, make_place_key);
    return place_ok ? (uintptr_t)pthread_getspecific(place_key) : 0;
}

static void set_place(uintptr_t p)
{
    if (place_ok)
        pthread_setspecific(place_key, (void *)p);
}

static uintptr_t place_of(int num, int team)
{
    return team > 1 ? ((uintptr_t)team << 16) | (uintptr_t)num : 0;
}

/* A page the kernel zeroes in a forked child (MADV_WIPEONFORK): the pool's threads do not
 * survive fork, and a child that finds the mark gone starts its own.  Where the kernel cannot
 * wipe, the process id that started the pool tells (a system call a region). */
static volatile int *alive;
static pid_t owner;

static int started(void)
{
    return alive ? *alive : owner && owner == getpid();
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *s = getenv(name);
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || v < lo || v > hi)
        return dflt;
    return v;
}

static int cpus_allowed(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* Waits for a region word other than `seen`: spinning first, asleep once spin_ns have passed. */
static unsigned next_region(unsigned seen)
{
    long start = 0;
    for (unsigned i = 1;; i++) {
        unsigned r = atomic_load_explicit(&pool.region, memory_order_acquire);
        if (r != seen)
            return r;
        relax();
        if (i % 256)
            continue;
        long t = now_ns();
        if (!start)
            start = t;
        if (t - start < pool.spin_ns)
            continue;
        /* Sequentially consistent with the bump and its reading of `sleepers`: either the
         * region's thread sees this sleeper or this worker sees the new region. */
        atomic_fetch_add(&pool.sleepers, 1);
        if (atomic_load(&pool.region) == seen)
            syscall(SYS_futex, &pool.region, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        atomic_fetch_sub(&pool.sleepers, 1);
        start = 0;
    }
}

static void *worker(void *arg)
{
    int num = (int)(intptr_t)arg;
    unsigned seen = pool.first_region[num];
    for (;;) {
        unsigned r = next_region(seen);
        seen = r;
        int team = (int)(r & TEAM_MASK);
        if (num >= team)
            continue; /* not in this region's team: it does not wait for this one */
        set_place(place_of(num, team));
        if (r & REGION_LOOP)
            pool.loop_fn(pool.loop_data, &pool.loop, num);
        else
            pool.fn(pool.data);
        set_place(0);
        atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_release);
    }
    return NULL;
}

/* First call in this process (or in a forked child): the settings, no workers yet. */
static void start_pool(void)
{
    if (!alive && !owner) {
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int wiped = -1;
#ifdef MADV_WIPEONFORK
        if (page != MAP_FAILED)
            wiped = madvise(page, 4096, MADV_WIPEONFORK);
#endif
        if (wiped == 0)
            alive = page;
        else if (page != MAP_FAILED)
            munmap(page, 4096);
    }
    pool.workers = 0;
    atomic_store(&pool.pending, 0);
    atomic_store(&pool.sleepers, 0);
    long size = env_long("TT_NUM_THREADS", 0, 1, POOL_MAX_THREADS);
    if (!size)
        size = env_long("OMP_NUM_THREADS", 0, 1, POOL_MAX_THREADS);
    pool.size = size ? (int)size : cpus_allowed();
    if (pool.size > POOL_MAX_THREADS)
        pool.size = POOL_MAX_THREADS;
    pool.spin_ns = env_long("TT_POOL_SPIN_US", 1000, 0, 10000000) * 1000;
    if (alive)
        *alive = 1;
    else
        owner = getpid();
}

/* Starts workers up to number team-1; the team that can run (fewer where a thread could not be
 * started). */
static int grow(int team)
{
    unsigned r = atomic_load_explicit(&pool.region, memory_order_relaxed);
    while (pool.workers < team - 1) {
        int num = pool.workers + 1;
        pool.first_region[num] = r;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t th;
        int rc = pthread_create(&th, &attr, worker, (void *)(intptr_t)num);
        pthread_attr_destroy(&attr);
        if (rc)
            break;
        pool.workers = num;
    }
    return pool.workers + 1 < team ? pool.workers + 1 : team;
}

/* Takes the pool for a region of up to `nthreads` threads (0 = the pool's size): the team that
 * can run, or 0 when this thread must run the region alone (nested, another thread's region
 * running, no key), in which case the pool is not taken. */
static int take_pool(unsigned nthreads)
{
    if (place() || !place_ok || pthread_mutex_trylock(&pool_busy))
        return 0;
    if (!started())
        start_pool();
    int team = nthreads ? (int)nthreads : pool.size;
    if (team > POOL_MAX_THREADS)
        team = POOL_MAX_THREADS;
    return team > 1 ? grow(team) : 1;
}

/* Starts a region of `team` > 1 threads: its word, with `kind` (0 or REGION_LOOP), published
 * after everything the workers read, and the sleepers woken. */
static void begin_region(int team, unsigned kind)
{
    unsigned r = atomic_load_explicit(&pool.region, memory_order_relaxed);
    unsigned next = ((r & ~(TEAM_MASK | REGION_LOOP)) + REGION_ONE) | kind | (unsigned)team;
    atomic_store(&pool.region, next);
    if (atomic_load(&pool.sleepers) > 0)
        syscall(SYS_futex, &pool.region, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Spins until *count is 0, yielding now and then in case the thread it waits for was
 * descheduled. */
static void wait_zero(atomic_int *count)
{
    for (unsigned i = 1; atomic_load_explicit(count, memory_order_acquire) > 0; i++) {
        relax();
        if (i % 4096 == 0)
            sched_yield();
    }
}

void tt_rt1_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags)
{
    (void)flags;
    uintptr_t outer = place();
    int team = take_pool(nthreads);
    if (!team) {
        set_place(0);
        fn(data);
        set_place(outer);
        return;
    }
    if (team > 1) {
        pool.fn = fn;
        pool.data = data;
        atomic_store_explicit(&pool.pending, team - 1, memory_order_relaxed);
        begin_region(team, 0);
    }
    set_place(place_of(0, team));
    fn(data);
    set_place(0);
    if (team > 1)
        wait_zero(&pool.pending); /* every worker runs a share as long as this one */
    pthread_mutex_unlock(&pool_busy);
}

static uint64_t pack_range(uint64_t next, uint64_t limit)
{
    return limit << 32 | next;
}

/* A quarter of what is left (at least one): pieces shrink as a share runs out, so that whoever
 * finishes first finds something left to take near the end. */
static uint64_t piece(uint64_t left)
{
    return (left + 3) / 4;
}

/* Takes a piece of `share` into range: from the front (its owner), else from the back, where
 * the share's last iteration stays its owner's (a late start, not a stall).  0 when there is
 * none to take. */
static int take(loop_share *share, int front, long long range[2])
{
    uint64_t v = atomic_load_explicit(&share->range, memory_order_relaxed);
    for (;;) {
        uint64_t next = v & 0xffffffffu, limit = v >> 32, left = limit - next;
        if (next >= limit || (!front && left < 2))
            return 0;
        uint64_t n = piece(left);
        if (!front && n > left - 1)
            n = left - 1;
        uint64_t lo = front ? next : limit - n, hi = lo + n;
        if (atomic_compare_exchange_weak_explicit(
                &share->range, &v, front ? pack_range(hi, limit) : pack_range(next, lo),
                memory_order_relaxed, memory_order_relaxed)) {
            range[0] = (long long)lo;
            range[1] = (long long)hi;
            return 1;
        }
    }
}

int tt_rt1_loop_next(tt_rt1_loop *loop, int num, long long range[2])
{
    if (take(&loop->shares[num], 1, range))
        return 1;
    for (int k = 1; k < loop->team; k++)
        if (take(&loop->shares[(num + k) % loop->team], 0, range))
            return 1;
    return 0;
}

void tt_rt1_parallel_for(void (*fn)(void *, tt_rt1_loop *, int), void *data, long long extent,
                         unsigned nthreads)
{
    if (extent <= 0)
        return;
    uintptr_t outer = place();
    if (extent > TT_RT1_MAX_LOOP_EXTENT)
        abort(); /* the code generator never emits one (pool.h) */
    int team = extent > 1 ? take_pool(nthreads) : 0;
    if (team > extent)
        team = (int)extent;
    if (team <= 1) {
        /* This thread alone, on a share of its own (the pool's may be another region's). */
        loop_share own;
        atomic_init(&own.range, pack_range(0, (uint64_t)extent));
        tt_rt1_loop alone = {1, &own};
        set_place(0);
        fn(data, &alone, 0);
        set_place(outer);
        if (team == 1)
            pthread_mutex_unlock(&pool_busy);
        return;
    }
    /* The static schedule's contiguous shares, as the layer before split its loop. */
    uint64_t chunk = ((uint64_t)extent + (uint64_t)team - 1) / (uint64_t)team;
    for (int t = 0; t < team; t++) {
        uint64_t lo = (uint64_t)t * chunk, hi = lo + chunk;
        if (lo > (uint64_t)extent)
            lo = (uint64_t)extent;
        if (hi > (uint64_t)extent)
            hi = (uint64_t)extent;
        atomic_store_explicit(&shares[t].range, pack_range(lo, hi), memory_order_relaxed);
    }
    pool.loop_fn = fn;
    pool.loop_data = data;
    pool.loop = (tt_rt1_loop){team, shares};
    atomic_store_explicit(&pool.pending, team - 1, memory_order_relaxed);
    begin_region(team, REGION_LOOP);
    set_place(place_of(0, team));
    fn(data, &pool.loop, 0);
    set_place(0);
    wait_zero(&pool.pending); /* the workers' last ranges */
    pthread_mutex_unlock(&pool_busy);
}

int tt_rt1_thread_num(void)
{
    return (int)(place() & 0xffff);
}

int tt_rt1_num_threads(void)
{
    uintptr_t p = place();
    return p ? (int)(p >> 16) : 1;
}
