/* An application that links a tvm-compile'd library (deploy/examples/README.md):
 *
 *     tvm-compile --db tuning.db -o out/kernels \
 *         --workload matmul:M=128,N=128,K=128 --symbol tuned_matmul \
 *         --workload conv2d_nhwc:N=1,H=28,W=28,CI=16,CO=32,K=3,S=1,P=1 --symbol tuned_conv2d
 *     cc -O2 app.c $(PKG_CONFIG_PATH=out pkg-config --cflags --libs kernels) -o app
 *
 * It runs both functions on random inputs, checks them against naive loops and prints the time
 * per call.  Exit status 0 when all agree.  Every SYM takes row-major buffers, whatever record
 * the library was built from.  A record that reads a weight in a layout of its own adds a packed
 * form beside SYM (the header defines SYM_packed, SYM_pack_NAME and SYM_NAME_PACKED_ELEMENTS):
 * where it is there, the weight is also packed once, as an application does when it loads its
 * weights, and the packed form is checked and timed too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels.h"

enum { M = 128, N = 128, K = 128 };
enum { H = 28, W = 28, CI = 16, CO = 32, R = 3, P = 1 };

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare(const char *what, const float *got, const float *want, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        /* relative for large values, absolute near zero (sums of products cancel) */
        double d = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(d <= worst))
            worst = d;
    }
    printf("%s: largest difference %.2g", what, worst);
    if (!(worst < 1e-4)) {
        printf(" -- WRONG\n");
        return 1;
    }
    return 0;
}

static float a[M * K], b[K * N], c[M * N], ref[M * N];
static float data[H * W * CI], weight[R * R * CI * CO], out[H * W * CO], oref[H * W * CO];

/* Milliseconds per call of f, over at least 0.2 s and 3 calls. */
static double ms_per_call(void (*f)(const float *), const float *arg)
{
    double t0 = now();
    int calls = 0;
    while (now() - t0 < 0.2 || calls < 3) {
        f(arg);
        calls++;
    }
    return (now() - t0) / calls * 1e3;
}

static void call_matmul(const float *unused)
{
    (void)unused;
    tuned_matmul(a, b, c);
}

static void call_conv2d(const float *unused)
{
    (void)unused;
    tuned_conv2d(data, weight, out);
}

#ifdef tuned_matmul_packed
static void call_matmul_packed(const float *b_packed)
{
    tuned_matmul_packed(a, b_packed, c);
}
#endif

#ifdef tuned_conv2d_packed
static void call_conv2d_packed(const float *weight_packed)
{
    tuned_conv2d_packed(data, weight_packed, out);
}
#endif

int main(void)
{
    unsigned seed = 42;
    for (int i = 0; i < M * K; i++)
        a[i] = frand(&seed);
    for (int i = 0; i < K * N; i++)
        b[i] = frand(&seed);
    for (int i = 0; i < H * W * CI; i++)
        data[i] = frand(&seed);
    for (int i = 0; i < R * R * CI * CO; i++)
        weight[i] = frand(&seed);
    /* naive references */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += a[i * K + k] * b[k * N + j];
            ref[i * N + j] = s;
        }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int co = 0; co < CO; co++) {
                float s = 0;
                for (int r0 = 0; r0 < R; r0++)
                    for (int r1 = 0; r1 < R; r1++)
                        for (int ci = 0; ci < CI; ci++) {
                            int iy = y + r0 - P, ix = x + r1 - P;
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                s += data[(iy * W + ix) * CI + ci] *
                                     weight[((r0 * R + r1) * CI + ci) * CO + co];
                        }
                oref[(y * W + x) * CO + co] = s;
            }
    int bad = 0;
    if (tuned_matmul(a, b, c) != 0 || tuned_conv2d(data, weight, out) != 0) {
        printf("a kernel returned an error\n");
        return 1;
    }
    bad |= compare("matmul 128", c, ref, M * N);
    printf(", %.3f ms per call (record %lld)\n", ms_per_call(call_matmul, NULL),
           (long long)TUNED_MATMUL_TVM_RECORD);
    bad |= compare("conv2d 28x28x16->32", out, oref, H * W * CO);
    printf(", %.3f ms per call (record %lld)\n", ms_per_call(call_conv2d, NULL),
           (long long)TUNED_CONV2D_TVM_RECORD);
    /* The packed forms, where the records read a weight packed: packed once, outside the timed
     * calls. */
#ifdef tuned_matmul_packed
    float *b_packed = malloc(sizeof(float) * TUNED_MATMUL_B_PACKED_ELEMENTS);
    if (!b_packed || tuned_matmul_pack_B(b, b_packed) != 0 ||
        tuned_matmul_packed(a, b_packed, c) != 0)
        return 1;
    bad |= compare("matmul 128, B packed once", c, ref, M * N);
    printf(", %.3f ms per call\n", ms_per_call(call_matmul_packed, b_packed));
    free(b_packed);
#endif
#ifdef tuned_conv2d_packed
    float *weight_packed = malloc(sizeof(float) * TUNED_CONV2D_WEIGHT_PACKED_ELEMENTS);
    if (!weight_packed || tuned_conv2d_pack_weight(weight, weight_packed) != 0 ||
        tuned_conv2d_packed(data, weight_packed, out) != 0)
        return 1;
    bad |= compare("conv2d 28x28x16->32, weight packed once", out, oref, H * W * CO);
    printf(", %.3f ms per call\n", ms_per_call(call_conv2d_packed, weight_packed));
    free(weight_packed);
#endif
    printf(bad ? "FAILED\n" : "OK\n");
    return bad;
}
