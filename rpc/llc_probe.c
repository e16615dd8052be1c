/* How much of a network's working set stays in this machine's last-level cache from one run to
 * the next?  Measured, not read from the cache's size.
 *
 * sysfs reports the whole LLC, but the share a process keeps is smaller: other cores and, on a
 * cloud host, other tenants use it, and its replacement is not LRU.  On the Intel Xeon VM of
 * docs/models.md (260 MB of L3 reported, 2 cores), a buffer read again and again ran at 27-30 GB/s
 * up to 64 MiB and at DRAM's 15 GB/s from 96 MiB; on an AMD EPYC Zen 4 VM (32 MiB of L3) at
 * 100 GB/s up to 8 MiB, 80 at 12, 50 from 20 to 28 MiB, and at memory's 38 GB/s from 32 MiB.
 * Between the two ends a run finds part of the last one's lines, and a network there (20-31 MB:
 * MobileNet-V2 and -V3, EfficientNet-B0 on that Zen 4) ran up to 14% faster than its layers timed
 * with their weights in memory.  So a buffer of the network's size is read once after a flush to
 * memory and twice more, and a buffer that surely stays (an eighth of the LLC, at most 8 MiB) is
 * read again likewise: where the network's second read lies between the two says which share of
 * its lines stayed (decision 69, shares since 2026-11-30).  Done once per size and process (the
 * measuring children are forked from it and take its answer). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/tensor_mem.h"
#include "measure_int.h"

#define MIN_RATIO  1.4 /* a buffer no larger than the sure one: its second pass this much faster */
#define MIN_GAIN   1.2 /* memory at least this much slower than the LLC, or nothing to measure */
#define ROUNDS     5
#define MAX_MEMO   8
#define LINE_BYTES 64
#define SURE_MAX   ((int64_t)8 << 20)

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct {
    int64_t bytes;
    double share;
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

/* The fastest per-byte seconds of reading `bytes` after a flush to memory (*cold) and read
 * again right after (*warm), over ROUNDS rounds; false without the memory. */
static bool pass_times(int64_t bytes, double *cold, double *warm)
{
    size_t n = ((size_t)bytes + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES;
    uint64_t *p = tt_tensor_alloc(n);
    if (!p)
        return false;
    memset(p, 1, n);
    *cold = *warm = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        tt__measure_flush(p, n);
        double t = read_pass(p, n / sizeof(uint64_t)) / (double)n;
        *cold = t < *cold ? t : *cold;
        for (int k = 0; k < 2; k++) {
            t = read_pass(p, n / sizeof(uint64_t)) / (double)n;
            *warm = t < *warm ? t : *warm;
        }
    }
    tt_tensor_free(p, n);
    return true;
}

/* A share rounded to the nearest quarter, within 0..1. */
static double to_quarter(double share)
{
    share = share < 0 ? 0 : share > 1 ? 1 : share;
    return (double)(int)(share * 4 + 0.5) / 4;
}

double tt__llc_share_from_times(double cold, double warm, double hot)
{
    if (!(cold > 0 && warm > 0 && hot > 0) || cold < MIN_GAIN * hot)
        return -1;
    return to_quarter((cold - warm) / (cold - hot));
}

/* The share for `bytes`, measured; the LLC is `llc` bytes. */
static double probe(int64_t bytes, int64_t llc)
{
    /* a buffer that stays: an eighth of the LLC (at most 8 MiB), past L2 where that is smaller */
    int64_t sure = llc / 8 < SURE_MAX ? llc / 8 : SURE_MAX, l2 = tt__measure_cache_bytes(2);
    if (l2 > 0 && sure < 2 * l2)
        sure = 2 * l2 < llc / 2 ? 2 * l2 : llc / 2;
    double cold, warm, hot_cold, hot;
    if (!pass_times(bytes, &cold, &warm))
        return 0;
    if (bytes <= sure) /* as small as the sure buffer: stays when read again markedly faster */
        return cold >= MIN_RATIO * warm ? 1 : 0;
    if (!pass_times(sure, &hot_cold, &hot))
        return 0;
    double share = tt__llc_share_from_times(cold, warm, hot);
    if (share < 0) /* no flush to measure against: the old rule, half the LLC */
        return bytes <= llc / 2 ? 1 : 0;
    return share;
}

double tt_measure_network_llc_share(int64_t network_bytes)
{
    if (network_bytes <= 0)
        return 0;
    /* TVM_TUNE_LLC_SHARE: the share said for every network (a run that must time as an earlier
     * one did, or a machine whose probe misjudges) */
    const char *said = getenv("TVM_TUNE_LLC_SHARE");
    if (said && *said) {
        char *end;
        double share = strtod(said, &end);
        if (*end == 0 && share >= 0 && share <= 1)
            return to_quarter(share);
    }
    int64_t llc = tt_measure_llc_bytes();
    if (llc <= 0 || network_bytes > llc)
        return 0;
    /* TVM_TUNE_LLC_MIB: what a process keeps of the LLC, where the probe should not decide */
    const char *env = getenv("TVM_TUNE_LLC_MIB");
    if (env && *env) {
        char *end;
        double mib = strtod(env, &end);
        if (*end == 0 && mib >= 0)
            return (double)network_bytes <= mib * 1048576.0 ? 1 : 0;
    }
#if !defined(__x86_64__) && !defined(__aarch64__)
    return network_bytes <= llc / 2 ? 1 : 0; /* no flush to measure against: half the LLC */
#else
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < nmemo; i++)
        if (memo[i].bytes == network_bytes) {
            double share = memo[i].share;
            pthread_mutex_unlock(&memo_lock);
            return share;
        }
    double share = probe(network_bytes, llc);
    if (nmemo < MAX_MEMO)
        memo[nmemo++] = (probed){network_bytes, share};
    pthread_mutex_unlock(&memo_lock);
    return share;
#endif
}

const char *tt_measure_network_flush_name(double llc_share)
{
    static const char *const names[] = {"network", "network-llc-25", "network-llc-50",
                                        "network-llc-75", "network-llc"};
    return names[(int)(to_quarter(llc_share) * 4)];
}
