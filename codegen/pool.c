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
#define TEAM_BITS        9 /* the region word: a counter above the team's size */
#define TEAM_MASK        ((1u << TEAM_BITS) - 1)

typedef void (*region_fn)(void *);

/* Each word that threads write in turn on a line of its own. */
static struct {
    /* Bumped once per region, with the team's size in its low bits so that a worker reads the
     * region and its size together; the workers wait on it. */
    _Alignas(64) atomic_uint region;
    /* The region's function and argument, written just before `region` is bumped: on its line,
     * so that a worker has the region in one cache miss. */
    region_fn fn;
    void *data;
    _Alignas(64) atomic_int pending;  /* the team's workers still running the region */
    _Alignas(64) atomic_int sleepers; /* workers asleep on `region` */
    _Alignas(64) int workers;         /* threads started: numbers 1..workers */
    int size;                         /* the default team */
    long spin_ns;
    unsigned first_region[POOL_MAX_THREADS]; /* the region word each worker starts after */
} pool;

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

void tt_rt1_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags)
{
    (void)flags;
    uintptr_t outer = place();
    if (outer || !place_ok || pthread_mutex_trylock(&pool_busy)) {
        /* Nested, another thread's region running, or no key: this thread alone. */
        set_place(0);
        fn(data);
        set_place(outer);
        return;
    }
    if (!started())
        start_pool();
    int team = nthreads ? (int)nthreads : pool.size;
    if (team > POOL_MAX_THREADS)
        team = POOL_MAX_THREADS;
    if (team > 1)
        team = grow(team);
    else
        team = 1;
    if (team > 1) {
        pool.fn = fn;
        pool.data = data;
        atomic_store_explicit(&pool.pending, team - 1, memory_order_relaxed);
        unsigned r = atomic_load_explicit(&pool.region, memory_order_relaxed);
        unsigned next = ((r & ~TEAM_MASK) + (1u << TEAM_BITS)) | (unsigned)team;
        atomic_store(&pool.region, next);
        if (atomic_load(&pool.sleepers) > 0)
            syscall(SYS_futex, &pool.region, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
    set_place(place_of(0, team));
    fn(data);
    set_place(0);
    if (team > 1) {
        /* The workers run shares as long as this one: spin, yielding if one was descheduled. */
        for (unsigned i = 1; atomic_load_explicit(&pool.pending, memory_order_acquire) > 0; i++) {
            relax();
            if (i % 4096 == 0)
                sched_yield();
        }
    }
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
