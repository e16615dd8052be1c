/* The FMA peak of this CPU, measured: chains of independent fused multiply-adds on the widest
 * vectors the CPU has, enough of them to cover the FMA latency on every port, in one thread per
 * core.  Every row of bench_vendor shows percent of this figure. */
#include "anchors.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

/* Loop iterations (12 FMAs each) of one run: about 0.1 s on a 3.5 GHz core with two 256-bit FMA
 * ports; AVX-512 runs half as many (one 512-bit FMA per cycle on such cores). */
#define PEAK_ITERS 6000000L

#if defined(__x86_64__)
#include <immintrin.h>

/* Independent accumulators, written out so that they live in registers: 12 chains x 2 FMA ports
 * covers a 4 to 6-cycle FMA latency. */
#define FMA12(F, A)                                                                                \
    A##0 = F(A##0, x, y), A##1 = F(A##1, x, y), A##2 = F(A##2, x, y), A##3 = F(A##3, x, y),        \
    A##4 = F(A##4, x, y), A##5 = F(A##5, x, y), A##6 = F(A##6, x, y), A##7 = F(A##7, x, y),        \
    A##8 = F(A##8, x, y), A##9 = F(A##9, x, y), A##10 = F(A##10, x, y), A##11 = F(A##11, x, y)

__attribute__((target("avx512f"))) static double fma_avx512(long iters)
{
    /* Distinct starting values, or the compiler merges identical chains. */
    __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#define S(i) _mm512_set1_ps(1.0f + 0.01f * i)
    __m512 a0 = S(0), a1 = S(1), a2 = S(2), a3 = S(3), a4 = S(4), a5 = S(5), a6 = S(6), a7 = S(7),
           a8 = S(8), a9 = S(9), a10 = S(10), a11 = S(11);
#undef S
    for (long it = 0; it < iters; it++)
        FMA12(_mm512_fmadd_ps, a);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0]; /* keeps the chains live */
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iters)
{
    __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#define S(i) _mm256_set1_ps(1.0f + 0.01f * i)
    __m256 a0 = S(0), a1 = S(1), a2 = S(2), a3 = S(3), a4 = S(4), a5 = S(5), a6 = S(6), a7 = S(7),
           a8 = S(8), a9 = S(9), a10 = S(10), a11 = S(11);
#undef S
    for (long it = 0; it < iters; it++)
        FMA12(_mm256_fmadd_ps, a);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}
#endif

typedef struct {
    int kind; /* 2: AVX-512, 1: AVX2+FMA, 0: none */
    long iters;
    double sink, seconds;
} probe;

static void *run_probe(void *arg)
{
    probe *p = arg;
    double t0 = tt_clock_monotonic();
#if defined(__x86_64__)
    p->sink = p->kind == 2 ? fma_avx512(p->iters) : fma_avx2(p->iters);
#endif
    p->seconds = tt_clock_monotonic() - t0;
    return NULL;
}

double tt_bench_fma_peak(int threads, int avx2_only, const char **isa)
{
    int kind = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    kind = __builtin_cpu_supports("avx512f") && !avx2_only ? 2
           : __builtin_cpu_supports("fma")                 ? 1
                                                           : 0;
#endif
    *isa = kind == 2 ? "avx512" : kind == 1 ? "avx2+fma" : "none";
    if (!kind || threads < 1 || threads > 256)
        return -1;
    double flops_per_iter = kind == 2 ? 12.0 * 16 * 2 : 12.0 * 8 * 2;
    probe p[256];
    pthread_t tid[256];
    double best = 0;
    for (int rep = 0; rep < 5; rep++) { /* the best of five: a busy neighbour only lowers it */
        for (int t = 0; t < threads; t++) {
            memset(&p[t], 0, sizeof(p[t]));
            p[t].kind = kind;
            p[t].iters = PEAK_ITERS / (kind == 2 ? 2 : 1);
        }
        for (int t = 1; t < threads; t++)
            if (pthread_create(&tid[t], NULL, run_probe, &p[t]))
                return -1;
        run_probe(&p[0]);
        double slowest = p[0].seconds;
        for (int t = 1; t < threads; t++) {
            pthread_join(tid[t], NULL);
            if (p[t].seconds > slowest)
                slowest = p[t].seconds;
        }
        double rate = flops_per_iter * (double)p[0].iters * threads / slowest;
        if (rate > best)
            best = rate;
    }
    return best;
}
