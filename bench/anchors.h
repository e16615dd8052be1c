/* Anchors measured in the same run as our kernels, timed one way for all: a warm-up call, then
 * the median of 5 samples of at least 20 ms each (bench/README.md). */
#ifndef TT_BENCH_ANCHORS_H
#define TT_BENCH_ANCHORS_H

#include <stddef.h>

/* Median seconds per call of fn(ctx). */
double tt_bench_time(void (*fn)(void *ctx), void *ctx);

/* OpenBLAS sgemm, row-major C[m,n] = A[m,k] x B[k,n], on every core; -1 when not built in. */
double tt_bench_openblas_sgemm(int m, int n, int k);

/* oneDNN's direct convolution, batch 1, NHWC source and destination, weights in the layout it
 * picks (pre-packed, as a deployment would), float32; -1 when not built in or on error. */
double tt_bench_onednn_conv2d_nhwc(int ci, int hw, int co, int k, int s, int p);

/* oneDNN's convolution with `groups` groups (groups == ci == co: depthwise), as above. */
double tt_bench_onednn_conv2d_nhwc_groups(int ci, int hw, int co, int k, int s, int p, int groups);

/* oneDNN's convolution with activations blocked by `block` channels (8: nChw8c, 16: nChw16c;
 * 0: NHWC as above), the layout of a network that runs blocked end to end. */
double tt_bench_onednn_conv2d_blocked(int ci, int hw, int co, int k, int s, int p, int block);

/* Whether OpenBLAS is built in, its core name ("Haswell", "SkylakeX", ...) and a thread count
 * setter (OpenBLAS's own pool: 1 or all cores). */
const char *tt_bench_openblas_core(void);
void tt_bench_openblas_threads(int n);

/* The single-precision FMA peak of `threads` threads, in FLOP/s (best of five runs of chains
 * of independent FMAs on the widest vectors, or on 32-byte ones when `avx2_only`); *isa names
 * what was used.  -1 when the CPU has no FMA this probe knows (non-x86). */
double tt_bench_fma_peak(int threads, int avx2_only, const char **isa);

/* Caps oneDNN at AVX2 (its kernels for AVX2 machines), before its first primitive; 0 on
 * success, -1 when oneDNN is not built in or refuses. */
int tt_bench_onednn_max_isa_avx2(void);

/* The CPU's model name from /proc/cpuinfo ("unknown CPU" when there is none), into buf. */
const char *tt_bench_cpu_name(char *buf, size_t n);

#endif
