/* Kernels that misbehave on purpose, for the measurement sandbox tests.  Each follows the kernel
 * ABI: int32_t f(void *const *args); args = {float a[n], float out[n]} with n = 1024. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 1024

int32_t good(void *const *args);
int32_t wrong(void *const *args);
int32_t crash(void *const *args);
int32_t aborts(void *const *args);
int32_t hangs(void *const *args);
int32_t hogs(void *const *args);
int32_t fails(void *const *args);
int32_t sandboxed(void *const *args);
int32_t placement(void *const *args);
int32_t spreads(void *const *args);
int32_t input_rewritten_by_team(void *const *args);
int32_t input_untouched(void *const *args);

int32_t good(void *const *args)
{
    const float *a = args[0];
    float *out = args[1];
    for (int i = 0; i < N; i++)
        out[i] = a[i] * 2.0f;
    return 0;
}

int32_t wrong(void *const *args)
{
    good(args);
    ((float *)args[1])[N - 1] += 1.0f;
    return 0;
}

int32_t crash(void *const *args)
{
    volatile int *p = (volatile int *)(uintptr_t)16;
    *p = 1;
    return 0;
}

int32_t aborts(void *const *args)
{
    abort();
}

int32_t hangs(void *const *args)
{
    for (volatile unsigned long i = 0;; i++)
        ;
    return 0;
}

int32_t hogs(void *const *args)
{
    /* Allocates without end; a memory limit turns this into a failed allocation, then a crash. */
    for (;;) {
        char *p = malloc(64 << 20);
        if (!p)
            raise(SIGSEGV);
        memset(p, 1, 64 << 20);
    }
    return 0;
}

int32_t fails(void *const *args)
{
    return 7;
}

/* Computes what `good` does, but only inside the sandbox's restrictions: no new privileges, no
 * core dumps, a private writable TMPDIR that is the working directory, no socket inherited from
 * the measuring process.  Returns which check failed (1..5), so a measurement outside the
 * sandbox is a RUNTIME_DEVICE error. */
int32_t sandboxed(void *const *args)
{
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return 1;
    struct rlimit core;
    if (getrlimit(RLIMIT_CORE, &core) || core.rlim_cur != 0)
        return 2;
    const char *tmp = getenv("TMPDIR");
    char cwd[4096];
    if (!tmp || !strstr(tmp, "tvm-tune-sandbox-") || !getcwd(cwd, sizeof(cwd)) || strcmp(cwd, tmp))
        return 3;
    FILE *f = fopen("left-behind", "w"); /* removed with the directory */
    if (!f || fputs("x", f) < 0 || fclose(f))
        return 4;
    struct stat st;
    for (int fd = 0; fd < 1024; fd++)
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
            return 5;
    return good(args);
}

/* Where its buffers start within their pages: out[0] and out[1], the rest 0. */
int32_t placement(void *const *args)
{
    float *out = args[1];
    memset(out, 0, sizeof(float) * N);
    out[0] = (float)((uintptr_t)args[0] % 4096);
    out[1] = (float)((uintptr_t)args[1] % 4096);
    return 0;
}

/* A kernel with a worker thread, as an OpenMP kernel's first call creates one.  Every later
 * call (the timed ones) aborts unless it and the worker are each pinned to one core, different
 * cores where the process could use two. */
static volatile pid_t worker_tid;
static int first_cores;

static void *worker(void *arg)
{
    (void)arg;
    worker_tid = gettid();
    for (;;)
        pause();
    return NULL;
}

static int cores_of(pid_t tid, int *core)
{
    cpu_set_t set;
    if (sched_getaffinity(tid, sizeof(set), &set))
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            *core = c;
    return CPU_COUNT(&set);
}

int32_t spreads(void *const *args)
{
    if (!worker_tid) {
        int core;
        first_cores = cores_of(0, &core);
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL))
            return 9;
        while (!worker_tid)
            sched_yield();
        return good(args);
    }
    int mine = -1, theirs = -1;
    if (cores_of(0, &mine) != 1 || cores_of(worker_tid, &theirs) != 1 ||
        (first_cores > 1 && mine == theirs))
        abort();
    return good(args);
}

/* Who writes the input between calls (--cache-flush=network): its pages (it has pages of its
 * own, base/tensor_mem.h) are read-only between calls, and a write faults into watch_fault,
 * which counts it, notes the thread that wrote the last page and opens the page again. */
static char *watched;
static size_t watched_bytes;
static volatile sig_atomic_t watched_writes;
static volatile pid_t last_page_writer;

static void watch_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char *a = si->si_addr;
    if (!watched || a < watched || a >= watched + watched_bytes) {
        signal(sig, SIG_DFL); /* not ours: fault again, and die of it */
        return;
    }
    size_t page = (size_t)(a - watched) / 4096;
    watched_writes++;
    if ((page + 1) * 4096 == watched_bytes)
        last_page_writer = gettid();
    mprotect(watched + page * 4096, 4096, PROT_READ | PROT_WRITE);
}

static int watch_input(void *const *args)
{
    if (!watched) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = watch_fault;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, NULL);
        uintptr_t a = (uintptr_t)args[0];
        watched = (char *)(a & ~(uintptr_t)4095);
        watched_bytes = ((a + sizeof(float) * N + 4095) & ~(uintptr_t)4095) - (uintptr_t)watched;
        return 0;
    }
    return 1;
}

static int32_t seal_and_compute(void *const *args)
{
    watched_writes = 0;
    last_page_writer = 0;
    int32_t rc = good(args);
    mprotect(watched, watched_bytes, PROT_READ);
    return rc;
}

/* Every call after the first finds its input written since the call before, unchanged, its last
 * page by another thread than the caller's where the process has two cores (the team's second
 * share ends the buffer). */
int32_t input_rewritten_by_team(void *const *args)
{
    if (watch_input(args)) {
        if (!watched_writes)
            return 11;
        if (first_cores > 1 && last_page_writer == gettid())
            return 13;
        for (int i = 0; i < N; i++)
            if (((const float *)args[0])[i] != (float)i * 0.5f)
                return 14;
    } else {
        int core;
        first_cores = cores_of(0, &core);
    }
    return seal_and_compute(args);
}

/* Every call finds its input as the call before left it. */
int32_t input_untouched(void *const *args)
{
    if (watch_input(args) && watched_writes)
        return 12;
    return seal_and_compute(args);
}
