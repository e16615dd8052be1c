#include "anchors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tt_bench_time(void (*fn)(void *ctx), void *ctx)
{
    fn(ctx);
    int number = 1;
    for (;;) { /* calls per sample: grow until a sample lasts 20 ms */
        double t0 = tt_clock_monotonic();
        for (int i = 0; i < number; i++)
            fn(ctx);
        if (tt_clock_monotonic() - t0 >= 0.02 || number > 1 << 20)
            break;
        number *= 2;
    }
    double sample[5];
    for (int r = 0; r < 5; r++) {
        double t0 = tt_clock_monotonic();
        for (int i = 0; i < number; i++)
            fn(ctx);
        sample[r] = (tt_clock_monotonic() - t0) / number;
    }
    qsort(sample, 5, sizeof(double), cmp_double);
    return sample[2];
}

#ifdef TT_HAVE_OPENBLAS
#include <cblas.h>

typedef struct {
    int m, n, k;
    float *a, *b, *c;
} gemm;

static void run_gemm(void *p)
{
    gemm *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a, g->k, g->b,
                g->n, 0.0f, g->c, g->n);
}

char *openblas_get_corename(void);
void openblas_set_num_threads(int n);

const char *tt_bench_openblas_core(void)
{
    return openblas_get_corename();
}

void tt_bench_openblas_threads(int n)
{
    openblas_set_num_threads(n);
}

double tt_bench_openblas_sgemm(int m, int n, int k)
{
    gemm g = {
        m, n, k, calloc((size_t)m * k, 4), calloc((size_t)k * n, 4), calloc((size_t)m * n, 4)};
    double t = g.a && g.b && g.c ? tt_bench_time(run_gemm, &g) : -1;
    free(g.a);
    free(g.b);
    free(g.c);
    return t;
}
#else
double tt_bench_openblas_sgemm(int m, int n, int k)
{
    (void)m, (void)n, (void)k;
    return -1;
}

const char *tt_bench_openblas_core(void)
{
    return NULL;
}

void tt_bench_openblas_threads(int n)
{
    (void)n;
}
#endif

#ifdef TT_HAVE_DNNL
#include <dnnl.h>

typedef struct {
    dnnl_primitive_t conv;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[3];
} conv_run;

static void run_conv(void *p)
{
    conv_run *c = p;
    dnnl_primitive_execute(c->conv, c->stream, 3, c->args);
    dnnl_stream_wait(c->stream);
}

#define CHECK(call)                                                                                \
    if ((call) != dnnl_success)                                                                    \
    goto out

double tt_bench_onednn_conv2d_nhwc(int ci, int hw, int co, int k, int s, int p)
{
    return tt_bench_onednn_conv2d_nhwc_groups(ci, hw, co, k, s, p, 1);
}

static double onednn_conv(int ci, int hw, int co, int k, int s, int p, int groups, int block);

int tt_bench_onednn_max_isa_avx2(void)
{
    return dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2) == dnnl_success ? 0 : -1;
}

double tt_bench_onednn_conv2d_nhwc_groups(int ci, int hw, int co, int k, int s, int p, int groups)
{
    return onednn_conv(ci, hw, co, k, s, p, groups, 0);
}

double tt_bench_onednn_conv2d_blocked(int ci, int hw, int co, int k, int s, int p, int block)
{
    if (block != 0 && block != 8 && block != 16)
        return -1;
    return onednn_conv(ci, hw, co, k, s, p, 1, block);
}

static double onednn_conv(int ci, int hw, int co, int k, int s, int p, int groups, int block)
{
    int oh = (hw + 2 * p - k) / s + 1;
    dnnl_format_tag_t act = block == 16 ? dnnl_nChw16c : block == 8 ? dnnl_nChw8c : dnnl_nhwc;
    double t = -1;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t conv = NULL;
    dnnl_memory_t src = NULL, w = NULL, dst = NULL;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    dnnl_dims_t src_dims = {1, ci, hw, hw}, dst_dims = {1, co, oh, oh};
    /* Grouped weights are (groups, co / groups, ci / groups, k, k). */
    dnnl_dims_t w_dims = {co, ci, k, k}, gw_dims = {groups, co / groups, ci / groups, k, k};
    dnnl_dims_t strides = {s, s}, pad = {p, p};
    dnnl_memory_desc_t src_md, w_md, dst_md;
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, act));
    if (groups > 1) {
        CHECK(dnnl_memory_desc_init_by_tag(&w_md, 5, gw_dims, dnnl_f32, dnnl_format_tag_any));
    } else {
        CHECK(dnnl_memory_desc_init_by_tag(&w_md, 4, w_dims, dnnl_f32, dnnl_format_tag_any));
    }
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, act));
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                             &src_md, &w_md, NULL, &dst_md, strides, pad, pad));
    CHECK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
    const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    CHECK(dnnl_memory_create(&src, &src_md, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&w, wq, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&dst, &dst_md, eng, DNNL_MEMORY_ALLOCATE));
    void *h;
    CHECK(dnnl_memory_get_data_handle(src, &h));
    memset(h, 0, dnnl_memory_desc_get_size(&src_md));
    CHECK(dnnl_memory_get_data_handle(w, &h));
    memset(h, 0, dnnl_memory_desc_get_size(wq));
    CHECK(dnnl_primitive_create(&conv, pd));
    conv_run r = {conv, stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}}};
    t = tt_bench_time(run_conv, &r);
out:
    if (conv)
        dnnl_primitive_destroy(conv);
    if (src)
        dnnl_memory_destroy(src);
    if (w)
        dnnl_memory_destroy(w);
    if (dst)
        dnnl_memory_destroy(dst);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (stream)
        dnnl_stream_destroy(stream);
    if (eng)
        dnnl_engine_destroy(eng);
    return t;
}
#else
int tt_bench_onednn_max_isa_avx2(void)
{
    return -1;
}

double tt_bench_onednn_conv2d_nhwc(int ci, int hw, int co, int k, int s, int p)
{
    (void)ci, (void)hw, (void)co, (void)k, (void)s, (void)p;
    return -1;
}

double tt_bench_onednn_conv2d_nhwc_groups(int ci, int hw, int co, int k, int s, int p, int groups)
{
    (void)ci, (void)hw, (void)co, (void)k, (void)s, (void)p, (void)groups;
    return -1;
}

double tt_bench_onednn_conv2d_blocked(int ci, int hw, int co, int k, int s, int p, int block)
{
    (void)ci, (void)hw, (void)co, (void)k, (void)s, (void)p, (void)block;
    return -1;
}
#endif

const char *tt_bench_cpu_name(char *buf, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, n, "unknown CPU");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, n, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    return buf;
}
