/* Anchors measured in the same run as our kernels, timed one way for all: a warm-up call, then
 * the median of 5 samples of at least 20 ms each (bench/README.md). */
#ifndef TT_BENCH_ANCHORS_H
#define TT_BENCH_ANCHORS_H

/* Median seconds per call of fn(ctx). */
double tt_bench_time(void (*fn)(void *ctx), void *ctx);

/* OpenBLAS sgemm, row-major C[m,n] = A[m,k] x B[k,n], on every core; -1 when not built in. */
double tt_bench_openblas_sgemm(int m, int n, int k);

/* oneDNN's direct convolution, batch 1, NHWC source and destination, weights in the layout it
 * picks (pre-packed, as a deployment would), float32; -1 when not built in or on error. */
double tt_bench_onednn_conv2d_nhwc(int ci, int hw, int co, int k, int s, int p);

#endif
