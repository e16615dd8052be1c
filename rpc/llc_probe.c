/* Does a network's working set stay in this machine's last-level cache from one run to the next?
 * Measured, not read from the cache's size.
 *
 * sysfs reports the whole LLC, but the share a process keeps is smaller: other cores and, on a
 * cloud host, other tenants use it, and its replacement is not perfect.  On the Intel Xeon VM of
 * docs/models.md (260 MB of L3 reported, 2 cores), a buffer read again and again ran at 27-30 GB/s
 * up to 64 MiB and at DRAM's 15 GB/s from 96 MiB, and ResNet-50's 1x1 convolutions (100 MB of
 * weights, half the reported L3) took their DRAM times in the network: the rule "fits half the
 * LLC" timed them warmer than the network runs them.  So a buffer of the network's size is read
 * once after a flush to memory and again after a read; when the second pass is markedly faster,
 * what one pass leaves in the cache is what the next finds there.  Done once per size and process
 * (the measuring children are forked from it and take its answer). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/tensor_mem.h"
#include "measure_int.h"

#define MIN_RATIO  1.4 /* the second pass at least this much faster: it found the lines cached */
#define ROUNDS     3
#define MAX_MEMO   8
#define LINE_BYTES 64

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct {
    int64_t bytes;
    bool fits;
} probed;
static probed memo[MAX_MEMO];
static int nmemo;

/* Seconds of one pass that touches every line. */
__attribute__((no_sanitize("address"))) static double read_pass(const uint64_t *p, size_t words)
{
    double t = tt_clock_monotonic();
    uint64_t acc = 0;
    for (size_t i = 0; i < words; i += LINE_BYTES / sizeof(uint64_t))
        acc += p[i];
    __asm__ volatile("" ::"r"(acc));
    return tt_clock_monotonic() - t;
}

static bool probe(int64_t bytes)
{
    size_t n = ((size_t)bytes + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES;
    uint64_t *p = tt_tensor_alloc(n);
    if (!p)
        return false;
    memset(p, 1, n);
    double cold = 1e30, warm = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        tt__measure_flush(p, n);
        double t = read_pass(p, n / sizeof(uint64_t));
        cold = t < cold ? t : cold;
        for (int k = 0; k < 2; k++) {
            t = read_pass(p, n / sizeof(uint64_t));
            warm = t < warm ? t : warm;
        }
    }
    tt_tensor_free(p, n);
    return warm > 0 && cold >= MIN_RATIO * warm;
}

bool tt_measure_network_fits_llc(int64_t network_bytes)
{
    int64_t llc = tt_measure_llc_bytes();
    if (network_bytes <= 0 || llc <= 0 || network_bytes > llc / 2)
        return false;
    /* TVM_TUNE_LLC_MIB: what a process keeps of the LLC, where the probe should not decide */
    const char *env = getenv("TVM_TUNE_LLC_MIB");
    if (env && *env) {
        char *end;
        double mib = strtod(env, &end);
        if (*end == 0 && mib >= 0)
            return (double)network_bytes <= mib * 1048576.0;
    }
#if !defined(__x86_64__) && !defined(__aarch64__)
    return true; /* no flush to measure against: half the LLC */
#else
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < nmemo; i++)
        if (memo[i].bytes == network_bytes) {
            bool fits = memo[i].fits;
            pthread_mutex_unlock(&memo_lock);
            return fits;
        }
    bool fits = probe(network_bytes);
    if (nmemo < MAX_MEMO)
        memo[nmemo++] = (probed){network_bytes, fits};
    pthread_mutex_unlock(&memo_lock);
    return fits;
#endif
}
