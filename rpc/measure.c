#define _GNU_SOURCE
#include "measure.h"

#include <dirent.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../base/tensor_mem.h"
#include "../codegen/loader.h"
#include "measure_int.h"
#include "sandbox_int.h"

size_t tt_elem_bytes(tt_elem e)
{
    switch (e) {
    case TT_ELEM_F32:
    case TT_ELEM_I32: return 4;
    case TT_ELEM_F64:
    case TT_ELEM_I64: return 8;
    default: return 1;
    }
}

static double elem_get(const void *p, tt_elem e, int64_t i)
{
    switch (e) {
    case TT_ELEM_F32: return ((const float *)p)[i];
    case TT_ELEM_F64: return ((const double *)p)[i];
    case TT_ELEM_I32: return ((const int32_t *)p)[i];
    case TT_ELEM_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* Set once the child's answer is being written: a kernel deadline that fires then must not
 * interleave its own message with it. */
static volatile sig_atomic_t answering;

void tt__measure_send(int fd, const tt__child_msg *m)
{
    answering = 1;
    const char *p = (const char *)m;
    size_t left = sizeof(*m);
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) {
            if (errno == EINTR)
                continue;
            _exit(3);
        }
        p += w;
        left -= (size_t)w;
    }
}

jmp_buf *tt__measure_recover;

void tt__measure_fail(int fd, tt__child_msg *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    m->error_no = code;
    vsnprintf(m->text, sizeof(m->text), fmt, ap);
    va_end(ap);
    tt__measure_send(fd, m);
    if (tt__measure_recover)
        longjmp(*tt__measure_recover, 1);
    _exit(0);
}

void tt__measure_check(int fd, tt__child_msg *m, void *const *args, const tt_measure_buffer *bufs,
                       int nbufs, int ninputs, const tt_measure_options *o)
{
    for (int i = ninputs; i < nbufs; i++) {
        if (!bufs[i].expect)
            continue;
        /* Normwise: rtol of the output's largest magnitude.  A reduction rounds partial sums as
         * large as that, so an element whose terms cancel carries their rounding; relative to
         * the element itself, a 3x3x512 convolution fails most correct schedules. */
        double scale = 0;
        for (int64_t e = 0; e < bufs[i].count; e++) {
            double y = fabs(elem_get(bufs[i].expect, bufs[i].elem, e));
            scale = y > scale ? y : scale;
        }
        double tol = o->atol + o->rtol * scale;
        for (int64_t e = 0; e < bufs[i].count; e++) {
            double x = elem_get(args[i], bufs[i].elem, e),
                   y = elem_get(bufs[i].expect, bufs[i].elem, e);
            if (!(fabs(x - y) <= tol))
                tt__measure_fail(fd, m, TT__E_WRONG_ANSWER,
                                 "output %d element %lld: got %.9g, expected %.9g", i - ninputs,
                                 (long long)e, x, y);
        }
    }
}

/* The size of the level-`level` data or unified cache of cpu0 from sysfs, 0 when unknown. */
static int64_t sysfs_cache_bytes(int level)
{
    for (int i = 0; i < 8; i++) {
        char path[96], type[32] = "";
        int lv = 0;
        long long kb = 0;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        int got = fscanf(f, "%d", &lv);
        fclose(f);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            got += fscanf(f, "%31s", type);
            fclose(f);
        }
        if (got != 2 || lv != level || !strcmp(type, "Instruction"))
            continue;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            got = fscanf(f, "%lldK", &kb);
            fclose(f);
            return got == 1 && kb > 0 ? kb * 1024 : 0;
        }
    }
    return 0;
}

static int64_t cache_bytes(int level)
{
    long v = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    v = sysconf(level == 3   ? _SC_LEVEL3_CACHE_SIZE
                : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                             : _SC_LEVEL1_DCACHE_SIZE);
#endif
    return v > 0 ? (int64_t)v : sysfs_cache_bytes(level);
}

int64_t tt_measure_llc_bytes(void)
{
    return cache_bytes(3);
}

int64_t tt__measure_cache_bytes(int level)
{
    return cache_bytes(level);
}

/* Whether the line at p stays: the first `keep` of each 16 lines, by address, so that a buffer's
 * kept lines are spread over all of it as a cache's survivors are. */
static inline bool line_kept(const char *p, int keep)
{
    return (int)(((uintptr_t)p >> 6) & 15) < keep;
}

#if defined(__x86_64__)
/* CLFLUSHOPT: CLFLUSH's effect without its ordering, so the flushes of a buffer overlap.  On the
 * Intel Xeon of docs/models.md CLFLUSH took 7-9 ms for 4 MB (a measurement of a ResNet-50 layer
 * flushed its weights before each of 64 samples), CLFLUSHOPT 0.23 ms. */
__attribute__((target("clflushopt"))) static void flush_unordered(const char *p, size_t bytes,
                                                                  int keep)
{
    for (size_t off = 0; off < bytes; off += 64)
        if (!line_kept(p + off, keep))
            __builtin_ia32_clflushopt(p + off);
    __builtin_ia32_mfence();
}

static bool has_clflushopt(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
}
#endif

void tt__measure_flush_part(const void *buf, size_t bytes, int keep)
{
    const char *p = buf;
    if (keep >= 16)
        return;
#if defined(__x86_64__)
    static int unordered = -1; /* a race writes the same value */
    if (unordered < 0)
        unordered = has_clflushopt();
    if (unordered) {
        flush_unordered(p, bytes, keep);
        return;
    }
    for (size_t off = 0; off < bytes; off += 64)
        if (!line_kept(p + off, keep))
            __builtin_ia32_clflush(p + off);
    __builtin_ia32_mfence();
#elif defined(__aarch64__)
    for (size_t off = 0; off < bytes; off += 64)
        if (!line_kept(p + off, keep))
            __asm__ volatile("dc civac, %0" ::"r"(p + off) : "memory");
    __asm__ volatile("dmb ishst" ::: "memory");
#else
    (void)p, (void)bytes;
#endif
}

void tt__measure_flush(const void *p, size_t bytes)
{
    tt__measure_flush_part(p, bytes, 0);
}

void tt__measure_time(int fd, tt__child_msg *m, const tt_measure_options *o,
                      double (*run)(void *ctx, int number), void *ctx)
{
    int number = o->number > 0 ? o->number : 1;
    int repeat =
        o->repeat > 0 ? (o->repeat > TT_MEASURE_MAX_REPEAT ? TT_MEASURE_MAX_REPEAT : o->repeat) : 3;
    double sampled_ms = 0;
    for (int r = 0; r < repeat; r++) {
        if (o->repeat_budget_ms > 0 && sampled_ms >= o->repeat_budget_ms &&
            r >= TT_MEASURE_MIN_SAMPLES)
            break;
        double dur;
        int zero_tries = 0;
        for (;;) {
            dur = run(ctx, number);
            if (dur < 0)
                return; /* run() reported the failure */
            if (dur * 1e3 >= o->min_repeat_ms)
                break;
            if (dur <= 0) {
                /* Too fast for the clock: grow without dividing by zero, at most 100 times. */
                if (++zero_tries >= 100)
                    break;
                number = (int)(number * 1.618) + 1;
            } else {
                double want = o->min_repeat_ms / (dur * 1e3 / number) + 1;
                double grown = number * 1.618;
                number = (int)(want > grown ? want : grown);
            }
        }
        /* to 0.1 ns, far below the clock's resolution: a record stores up to 64 samples as
         * text, and a difference of two clock readings in seconds prints with 17 digits */
        m->costs[m->ncosts++] = round(dur / number * 1e10) / 1e10;
        sampled_ms += dur * 1e3;
        if (o->cooldown_ms > 0)
            usleep((useconds_t)(o->cooldown_ms * 1000));
    }
    m->number = number;
    m->error_no = 0;
    tt__measure_send(fd, m);
}

typedef struct {
    tt_kernel_fn fn;
    void **args;
    const tt_measure_buffer *bufs;
    int ninputs, nbufs;
    tt_cache_flush cache_flush;
    int fd; /* where a failed call is reported */
    tt__child_msg *m;
    tt_kernel_pool pool; /* the threads the kernel's parallel loops run on */
    /* network mode with (part of) the network in the last-level cache: each thread's buffer
     * that pushes its core's own caches out (evict_bytes each, one per thread of the team), and
     * how many of each 16 lines of the weights and outputs stay in the LLC (the rest go to
     * memory) */
    unsigned char *evict;
    size_t evict_bytes;
    int evict_threads;
    int keep16;
} cpu_run;

/* Flushes the inputs (the constants only, if so) but `keep` of each 16 lines. */
static void flush_inputs(const cpu_run *c, bool constants_only, int keep)
{
    for (int i = 0; i < c->ninputs; i++)
        if (!constants_only || c->bufs[i].constant)
            tt__measure_flush_part(c->args[i],
                                   (size_t)c->bufs[i].count * tt_elem_bytes(c->bufs[i].elem), keep);
}

static void flush_outputs(const cpu_run *c, int keep)
{
    for (int i = c->ninputs; i < c->nbufs; i++)
        tt__measure_flush_part(c->args[i],
                               (size_t)c->bufs[i].count * tt_elem_bytes(c->bufs[i].elem), keep);
}

typedef struct {
    const cpu_run *c;
    int (*thread_num)(void), (*num_threads)(void);
} share_writer;

/* One thread's part of TT_CACHE_FLUSH_NETWORK: its contiguous share of every activation, each
 * cache line written (with its own byte) so that it is modified in this core's cache. */
static void write_own_shares(void *arg)
{
    const share_writer *w = arg;
    int t = w->thread_num(), n = w->num_threads();
    for (int i = 0; i < w->c->ninputs; i++) {
        if (w->c->bufs[i].constant)
            continue;
        size_t bytes = (size_t)w->c->bufs[i].count * tt_elem_bytes(w->c->bufs[i].elem);
        size_t lines = (bytes + 63) / 64;
        volatile unsigned char *p = w->c->args[i];
        for (size_t l = lines * (size_t)t / (size_t)n; l < lines * (size_t)(t + 1) / (size_t)n; l++)
            p[l * 64] = p[l * 64];
    }
}

/* One thread's eviction of its core's private caches: reading more than they hold leaves in
 * them only this buffer, and what was there (the weights, the last outputs) in the shared
 * last-level cache, which on current x86 and Arm cores takes what the private levels evict. */
static void evict_own_caches(void *arg)
{
    const share_writer *w = arg;
    int t = w->thread_num();
    if (t >= w->c->evict_threads)
        return;
    const volatile unsigned char *p = w->c->evict + (size_t)t * w->c->evict_bytes;
    unsigned sum = 0;
    for (size_t off = 0; off < w->c->evict_bytes; off += 64)
        sum += p[off];
    (void)sum;
}

/* The activations as a parallel layer before leaves them: thread t of the kernel's team wrote
 * the t-th share of each. */
static void write_activation_shares(const cpu_run *c)
{
    share_writer w = {c, c->pool.thread_num, c->pool.num_threads};
    c->pool.parallel(write_own_shares, &w, 0, 0);
}

/* A timed call that fails ends the measurement as the checked warm-up would. */
static void check_calls(const cpu_run *c, int32_t rc)
{
    if (rc != 0)
        tt__measure_fail(c->fd, c->m, TT__E_RUNTIME_DEVICE, "kernel returned %d in a timed call",
                         rc);
}

static double run_cpu(void *vctx, int number)
{
    cpu_run *c = vctx;
    int32_t rc = 0;
    if (c->cache_flush >= TT_CACHE_FLUSH_CONSTANTS) {
        /* Each call alone, its weights evicted first (and its activations written again by
         * the threads, its outputs evicted) and that not timed. */
        double total = 0;
        for (int k = 0; k < number; k++) {
            if (c->evict) {
                /* The network stays in the last-level cache, all of it or a share: the weights
                 * and outputs leave the cores' own caches, the lines that a run does not find
                 * in the LLC go on to memory, then the activations are written. */
                share_writer w = {c, c->pool.thread_num, c->pool.num_threads};
                c->pool.parallel(evict_own_caches, &w, 0, 0);
                flush_outputs(c, c->keep16);
                flush_inputs(c, true, c->keep16);
                write_activation_shares(c);
            } else {
                if (c->cache_flush == TT_CACHE_FLUSH_NETWORK) {
                    write_activation_shares(c);
                    flush_outputs(c, 0);
                }
                flush_inputs(c, true, 0);
            }
            double t0 = tt_clock_monotonic();
            int32_t r = c->fn(c->args);
            total += tt_clock_monotonic() - t0;
            rc = rc ? rc : r;
        }
        check_calls(c, rc);
        return total;
    }
    if (c->cache_flush == TT_CACHE_FLUSH_INPUTS)
        flush_inputs(c, false, 0);
    double t0 = tt_clock_monotonic();
    for (int k = 0; k < number; k++) {
        int32_t r = c->fn(c->args);
        rc = rc ? rc : r; /* the first failure's code */
    }
    double dur = tt_clock_monotonic() - t0;
    check_calls(c, rc);
    return dur;
}

/* Pins each thread of the child to a core of its own, the calling thread to the core it is on;
 * returns how many threads it found.  The kernel's OpenMP workers are created by its first
 * call, on the core of the thread that forks them, and the scheduler took up to 30 ms to move
 * them apart: until then each call of a parallel kernel waited two scheduler ticks (8 ms instead
 * of 0.1 ms), which 5% of records read as a first sample 10-140x the others and 1% as a median
 * 70x too slow.  TVM's runtime pins its pool the same way (TVM_BIND_THREADS); a deployment's
 * long-running threads have long been spread.  Best effort: where /proc or affinity is missing,
 * the threads stay where the scheduler puts them. */
static int pin_threads(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed))
        return 0;
    int here = sched_getcpu();
    if (here < 0)
        return 0;
    /* The other threads take the other cores first, then all of them in turn. */
    int order[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != here && CPU_ISSET(c, &allowed))
            order[n++] = c;
    order[n++] = here;
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return 0;
    pid_t self = gettid();
    int others = 0, nthreads = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0)
            continue;
        nthreads++;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(tid == self ? here : order[others++ % n], &one);
        sched_setaffinity(tid, sizeof(one), &one);
    }
    closedir(dir);
    return nthreads;
}

/* The kernel's deadline: SIGALRM sends the timeout from the child itself, whatever thread it
 * interrupts (write and _exit are async-signal-safe; the message is formatted beforehand). */
static tt__child_msg kernel_timeout_msg;
static int kernel_timeout_fd = -1;

static void kernel_timed_out(int sig)
{
    (void)sig;
    if (answering)
        return; /* the answer is on its way: the parent's own deadline still bounds it */
    tt__measure_send(kernel_timeout_fd, &kernel_timeout_msg);
    _exit(0);
}

static void arm_kernel_deadline(int fd, double seconds)
{
    if (seconds <= 0)
        return;
    memset(&kernel_timeout_msg, 0, sizeof(kernel_timeout_msg));
    kernel_timeout_msg.error_no = TT__E_RUN_TIMEOUT;
    snprintf(kernel_timeout_msg.text, sizeof(kernel_timeout_msg.text),
             "killed after %.3g s of kernel calls (timeout)", seconds);
    kernel_timeout_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = kernel_timed_out;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it;
    memset(&it, 0, sizeof(it));
    it.it_value.tv_sec = (time_t)seconds;
    it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Sets up the eviction buffers of TT_CACHE_FLUSH_NETWORK when (a share of) the network stays in
 * the last-level cache: 1.5 times L1 and L2 for each thread the kernel may run (the pool's team is
 * at most the CPUs this process may use), read once so that its pages exist.  Without memory for
 * them the weights are flushed to memory as for a larger network, and the result says so. */
static void network_in_llc(cpu_run *c, double llc_share)
{
    c->keep16 = (int)(llc_share * 16 + 0.5);
    int64_t l1 = cache_bytes(1), l2 = cache_bytes(2);
    cpu_set_t allowed;
    int n = sched_getaffinity(0, sizeof(allowed), &allowed) ? 0 : CPU_COUNT(&allowed);
    if (n <= 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (l2 <= 0 || n <= 0)
        return;
    size_t bytes = ((size_t)((l1 > 0 ? l1 : 0) + l2) * 3 / 2 + 4095) / 4096 * 4096;
    unsigned char *p = tt_tensor_alloc(bytes * (size_t)n);
    if (!p)
        return;
    memset(p, 1, bytes * (size_t)n);
    c->evict = p;
    c->evict_bytes = bytes;
    c->evict_threads = n;
}

static void child(int fd, const char *so, const char *entry, const tt_measure_buffer *bufs,
                  int nbufs, int ninputs, const tt_measure_options *o, double llc_share)
{
    tt__child_msg m;
    memset(&m, 0, sizeof(m));
    if (tt__measure_is_opencl(so)) {
        tt__measure_opencl_exec(fd, &m, so, bufs, nbufs, ninputs, o);
    }
    /* Before the memory limit, which is what the kernel may add. */
    cpu_run c = {.cache_flush = o->cache_flush, .fd = fd, .m = &m};
    if (llc_share > 0)
        network_in_llc(&c, llc_share);
    m.llc_share = c.evict ? llc_share : 0;
    if (o->memory_limit > 0) {
        /* The limit is what the kernel may add to the child's own address space (a sanitized
         * build maps terabytes of shadow before any kernel runs). */
        long pages = 0, page = sysconf(_SC_PAGESIZE);
        FILE *f = fopen("/proc/self/statm", "r");
        if (f) {
            if (fscanf(f, "%ld", &pages) != 1)
                pages = 0;
            fclose(f);
        }
        rlim_t lim = (rlim_t)o->memory_limit + (rlim_t)(pages > 0 ? pages : 0) * (rlim_t)page;
        struct rlimit rl = {lim, lim};
        setrlimit(RLIMIT_AS, &rl);
    }
    /* Between two timed calls the flushing can take milliseconds, while in a network the next
     * kernel follows at once: the pool's threads keep spinning here as they would there. */
    setenv("TT_POOL_SPIN_US", "100000", 0);
    tt_kernel *k;
    tt_errbuf err;
    if (tt_kernel_load(so, entry, &k, &err))
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "%s", err.msg);
    void *args[256];
    if (nbufs > 256)
        tt__measure_fail(fd, &m, TT__E_UNKNOWN, "too many parameters");
    for (int i = 0; i < nbufs; i++) {
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        /* At the page offset a deployment's allocator gives them, not wherever this heap's
         * history leaves room: a kernel's speed can depend on it (base/tensor_mem.h). */
        if (!(args[i] = tt_tensor_alloc(bytes)))
            tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE,
                             "cannot allocate %zu bytes for argument %d", bytes, i);
        if (i < ninputs && bufs[i].data)
            memcpy(args[i], bufs[i].data, bytes);
        else
            memset(args[i], i < ninputs ? 0 : 0xff, bytes); /* outputs start as NaN */
    }
    tt_kernel_fn fn = tt_kernel_function(k);
    arm_kernel_deadline(fd, o->kernel_timeout_s);
    /* Warm-up, which is also the call whose outputs are checked. */
    int32_t rc = fn(args);
    if (rc != 0)
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "kernel returned %d", rc);
    tt__measure_check(fd, &m, args, bufs, nbufs, ninputs, o);
    /* The warm-up created the kernel's threads (a serial kernel's are created by the first
     * writing of the activations' shares): spread them now, and warm the moved ones' caches
     * with one more call. */
    c.fn = fn;
    c.args = args;
    c.bufs = bufs;
    c.ninputs = ninputs;
    c.nbufs = nbufs;
    c.pool = tt_kernel_pool_of(k);
    if (o->cache_flush == TT_CACHE_FLUSH_NETWORK)
        write_activation_shares(&c);
    if (pin_threads() > 1)
        fn(args);
    tt__measure_time(fd, &m, o, run_cpu, &c);
    _exit(0);
}

tt_status tt_measure_run(const char *so_path, const char *entry, const tt_measure_buffer *bufs,
                         int nbufs, int ninputs, const tt_measure_options *opt,
                         tt_measure_result *res, tt_errbuf *err)
{
    tt_measure_options o = opt ? *opt : (tt_measure_options){0};
    if (o.timeout_s <= 0)
        o.timeout_s = 10;
    if (o.rtol <= 0)
        o.rtol = 1e-4;
    if (o.atol <= 0)
        o.atol = 1e-5;
    memset(res, 0, sizeof(*res));
    /* The child works in its own directory: a relative path must not change meaning there. */
    char abs_path[PATH_MAX];
    if (so_path[0] != '/' && realpath(so_path, abs_path))
        so_path = abs_path;
    double t0 = tt_clock_monotonic();
    /* OpenCL candidates go to the worker that keeps the device's context, when it is free, and
     * builds to this thread's builder, when it keeps one. */
    if (tt__measure_is_opencl(so_path) &&
        (o.build_only ? tt__cl_builder_build(so_path, &o, res)
                      : tt__cl_worker_measure(so_path, bufs, nbufs, ninputs, &o, res))) {
        res->run_s = tt_clock_monotonic() - t0;
        return TT_OK;
    }
    /* Decided here, where the probe's answer is kept for the next candidates (llc_probe.c). */
    double llc_share = !tt__measure_is_opencl(so_path) && o.cache_flush == TT_CACHE_FLUSH_NETWORK
                           ? tt_measure_network_llc_share(o.network_bytes)
                           : 0;
    int fd;
    pid_t pid = tt__sandbox_start(&fd, -1, err);
    if (pid < 0)
        return TT_ERR_IO;
    if (pid == 0) {
        child(fd, so_path, entry, bufs, nbufs, ninputs, &o, llc_share);
        _exit(0);
    }
    tt__child_msg m;
    bool timed_out;
    size_t got = tt__sandbox_read(fd, &m, sizeof(m), t0 + o.timeout_s, &timed_out);
    int status = tt__sandbox_finish(pid, fd, timed_out || got < sizeof(m));
    tt__measure_result_from(res, &m, got, timed_out, status, o.timeout_s);
    res->run_s = tt_clock_monotonic() - t0;
    return TT_OK;
}

void tt__measure_result_from(tt_measure_result *res, const tt__child_msg *m, size_t got,
                             bool timed_out, int status, double timeout_s)
{
    memset(res, 0, sizeof(*res));
    if (timed_out) {
        res->error_no = TT__E_RUN_TIMEOUT;
        snprintf(res->error_text, sizeof(res->error_text), "killed after %.3g s (timeout)",
                 timeout_s);
        return;
    }
    if (got < sizeof(*m)) {
        res->error_no = TT__E_RUNTIME_DEVICE;
        if (WIFSIGNALED(status))
            snprintf(res->error_text, sizeof(res->error_text),
                     "kernel process killed by signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(res->error_text, sizeof(res->error_text),
                     "kernel process exited with status %d",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return;
    }
    res->error_no = m->error_no;
    memcpy(res->error_text, m->text, sizeof(res->error_text));
    res->error_text[sizeof(res->error_text) - 1] = 0;
    res->ncosts = m->ncosts > TT_MEASURE_MAX_REPEAT ? TT_MEASURE_MAX_REPEAT
                  : m->ncosts < 0                   ? 0
                                                    : m->ncosts;
    memcpy(res->costs, m->costs, sizeof(double) * (size_t)res->ncosts);
    res->number = m->number;
    res->context_jobs = m->context_jobs;
    res->build_cached = m->build_cached != 0;
    res->llc_share = m->llc_share;
}
