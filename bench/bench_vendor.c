/* bench_vendor: tuned kernels against the vendor libraries, in one run on this machine.
 *
 * Rows: matmul 256..2048 and two BERT-base shapes, the twelve ResNet-18 conv2d layers (NHWC) and
 * four of them in NCHW[x]c (against oneDNN's blocked activations), the MobileNet-V2 depthwise
 * layers (3x3, stride 1 and 2), dense 1x512x1000.  Each row is tuned with the default search for
 * the first budget (200 trials), then resumed to the second (1000); the best kernel of each stage
 * is built again here, checked against a reference (OpenBLAS's output for GEMMs, the naive schedule
 * for convolutions) and timed in this process exactly as the vendor is: a warm-up call, then the
 * median of 5 samples of at least 20 ms (anchors.c). Vendors: OpenBLAS sgemm (the faster of 1 and
 * all threads, its kernel for this CPU), oneDNN's convolution with weights pre-packed in the layout
 * it prefers.  Percent of peak is against the FMA peak measured first (peak.c).  Each row also
 * says how long the search took to compile a candidate, and the table ends with that over all rows;
 * the compile section (below) times random configs of the default space, phase by phase.
 *
 * usage: bench_vendor [--quick] [--trials A,B] [--strategy S] [--only SUBSTR] [--json FILE]
 *                     [--db PATH] [--no-compile-bench | --compile-only]
 * Tuning runs before anything multi-threaded: OpenMP pools do not survive the tuner's fork(). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "anchors.h"
#include "codegen/codegen.h"
#include "db/db.h"
#include "schedule/schedule.h"
#include "schedule/verify.h"
#include "tuner/space.h"
#include "tuner/tune.h"

typedef enum { VENDOR_GEMM, VENDOR_CONV } vendor_kind;

typedef struct {
    const char *group, *name;
    vendor_kind kind;
    int m, n, k;                      /* GEMM: C[m,n] = A[m,k] B[k,n] */
    int ci, hw, co, kk, s, p, groups; /* convolution, batch 1, NHWC */
    bool blocked;                     /* NCHW[x]c, x = the vector's floats (8 or 16) */
    bool quick;                       /* in the --quick subset */
    char workload[192];
    /* results, per budget */
    double tuned_s[2], ours_s[2], tune_wall[2], max_err[2];
    double compile_s[2]; /* the tuner's mean compile time per candidate, each budget's run */
    int64_t compiled[2]; /* candidates it compiled in that run */
    char config[2][8192];
    int64_t measured[2];
    double vendor_s, flops;
    const char *vendor;
} row;

#define GEMM(g, nm, M, N, K, q)                                                                    \
    {                                                                                              \
        .group = g, .name = nm, .kind = VENDOR_GEMM, .m = M, .n = N, .k = K, .quick = q            \
    }
#define CONV(nm, CI, HW, CO, K, S, P, q)                                                           \
    {                                                                                              \
        .group = "resnet18", .name = nm, .kind = VENDOR_CONV, .ci = CI, .hw = HW, .co = CO,        \
        .kk = K, .s = S, .p = P, .groups = 1, .quick = q                                           \
    }
#define CONVC(nm, CI, HW, CO, K, S, P, q)                                                          \
    {                                                                                              \
        .group = "nchwc", .name = nm, .kind = VENDOR_CONV, .ci = CI, .hw = HW, .co = CO, .kk = K,  \
        .s = S, .p = P, .groups = 1, .blocked = true, .quick = q                                   \
    }
#define DW(nm, C, HW, S, q)                                                                        \
    {                                                                                              \
        .group = "mbv2-dw", .name = nm, .kind = VENDOR_CONV, .ci = C, .hw = HW, .co = C, .kk = 3,  \
        .s = S, .p = 1, .groups = C, .quick = q                                                    \
    }

static row rows[] = {
    GEMM("matmul", "256", 256, 256, 256, true),
    GEMM("matmul", "512", 512, 512, 512, false),
    GEMM("matmul", "1024", 1024, 1024, 1024, false),
    GEMM("matmul", "2048", 2048, 2048, 2048, false),
    GEMM("bert", "128x768x768", 128, 768, 768, false),
    GEMM("bert", "128x768x3072", 128, 3072, 768, false),
    CONV("C1", 3, 224, 64, 7, 2, 3, false),
    CONV("C2", 64, 56, 64, 3, 1, 1, false),
    CONV("C3", 64, 56, 64, 1, 1, 0, false),
    CONV("C4", 64, 56, 128, 3, 2, 1, false),
    CONV("C5", 64, 56, 128, 1, 2, 0, false),
    CONV("C6", 128, 28, 128, 3, 1, 1, false),
    CONV("C7", 128, 28, 256, 3, 2, 1, false),
    CONV("C8", 128, 28, 256, 1, 2, 0, false),
    CONV("C9", 256, 14, 256, 3, 1, 1, false),
    CONV("C10", 256, 14, 512, 3, 2, 1, false),
    CONV("C11", 256, 14, 512, 1, 2, 0, false),
    CONV("C12", 512, 7, 512, 3, 1, 1, true),
    /* Four of them in NCHW[x]c against oneDNN's blocked activations (nChw8c / nChw16c). */
    CONVC("C2c", 64, 56, 64, 3, 1, 1, false),
    CONVC("C6c", 128, 28, 128, 3, 1, 1, false),
    CONVC("C9c", 256, 14, 256, 3, 1, 1, false),
    CONVC("C12c", 512, 7, 512, 3, 1, 1, false),
    /* MobileNet-V2's depthwise layers at 224x224: input size, channels, stride. */
    DW("DW1", 32, 112, 1, false),
    DW("DW2", 96, 112, 2, false),
    DW("DW3", 144, 56, 1, false),
    DW("DW4", 144, 56, 2, false),
    DW("DW5", 192, 28, 1, false),
    DW("DW6", 192, 28, 2, false),
    DW("DW7", 384, 14, 1, false),
    DW("DW8", 576, 14, 1, false),
    DW("DW9", 576, 14, 2, false),
    DW("DW10", 960, 7, 1, true),
    GEMM("dense", "1x512x1000", 1, 1000, 512, true),
};
enum { NROWS = sizeof(rows) / sizeof(rows[0]) };

/* What our kernels are tuned and built for: this CPU, or (--isa avx2) this CPU narrowed to AVX2,
 * to check on an AVX-512 machine what an AVX2 machine gets (16 vector registers, 32-byte
 * vectors), with the vendors capped the same way. */
static const char *target_text = "llvm";
static const char *const avx2_target = "llvm -mattr=-avx512f";
/* OpenBLAS's AVX2 kernels (Haswell's: what it also runs on Zen 1-3). */
static const char *const avx2_openblas_core = "Haswell";

/* Channels per block of the NCHW[x]c rows: one vector of floats on this CPU. */
static int nchwc_block(void)
{
    tt_target host;
    tt_target_parse(target_text, &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    return isa.vector_bytes >= 64 ? 16 : 8;
}

/* The share of a row's nominal multiply-adds that touch the input: a convolution's taps that fall
 * in the padding multiply a zero, which neither our kernels nor oneDNN's compute.  GFLOPS stay
 * nominal, as every library reports them; percent of peak counts only the work a kernel must do,
 * so that it cannot read above 100 (C12's 3x3 taps: 18% in the padding). */
static double useful_share(const row *r)
{
    if (r->kind != VENDOR_CONV)
        return 1;
    int out = (r->hw + 2 * r->p - r->kk) / r->s + 1;
    int64_t inside = 0; /* (output position, tap) pairs along one axis inside the input */
    for (int o = 0; o < out; o++)
        for (int t = 0; t < r->kk; t++) {
            int at = o * r->s - r->p + t;
            inside += at >= 0 && at < r->hw;
        }
    double share = (double)inside / ((double)out * r->kk); /* one axis; the other is the same */
    return share * share;
}

static void workload_of(row *r)
{
    if (r->blocked) {
        int cb = nchwc_block();
        snprintf(r->workload, sizeof(r->workload),
                 "conv2d_nchwc:N=1,CI=%d,H=%d,W=%d,CO=%d,K=%d,S=%d,P=%d,IC=%d,OC=%d", r->ci, r->hw,
                 r->hw, r->co, r->kk, r->s, r->p, cb, cb);
    } else if (r->kind == VENDOR_GEMM)
        snprintf(r->workload, sizeof(r->workload), "matmul:M=%d,N=%d,K=%d", r->m, r->n, r->k);
    else if (r->groups > 1)
        snprintf(r->workload, sizeof(r->workload),
                 "depthwise_conv2d_nhwc:N=1,H=%d,W=%d,C=%d,K=%d,S=%d,P=%d", r->hw, r->hw, r->ci,
                 r->kk, r->s, r->p);
    else
        snprintf(r->workload, sizeof(r->workload),
                 "conv2d_nhwc:N=1,H=%d,W=%d,CI=%d,CO=%d,K=%d,S=%d,P=%d", r->hw, r->hw, r->ci, r->co,
                 r->kk, r->s, r->p);
}

/* ---- one kernel, built and run in this process ---- */

typedef struct {
    tt_workload *w;
    int nparams, ninputs;
    void *data[64]; /* dense: what the reference reads */
    void *args[64]; /* what the kernel is called with: data, or a weight packed (LR) */
    size_t bytes[64];
    tt_program *prog; /* whose packed weights args holds (tt_program_args_free) */
    tt_kernel *kern;
    tt_kernel_fn fn;
} built;

static void run_built(void *ctx)
{
    built *b = ctx;
    b->fn(b->args);
}

static void built_free(built *b)
{
    if (b->kern)
        tt_kernel_unload(b->kern);
    if (b->prog) {
        tt_program_args_free(b->prog, b->data, b->args);
        tt_program_free(b->prog);
    }
    for (int i = 0; i < b->nparams; i++)
        tt_tensor_free(b->data[i], b->bytes[i]);
    tt_workload_free(b->w);
    memset(b, 0, sizeof(*b));
}

/* Builds `config` (a step list; "[]" = the naive schedule) of `workload` into a loaded kernel
 * with random inputs (the same for every config of the workload: seeded by position). */
static tt_status build(const char *workload, const char *config, const char *so, built *b,
                       tt_errbuf *err)
{
    memset(b, 0, sizeof(*b));
    tt_state *st = NULL;
    tt_program *prog = NULL;
    tt_target host;
    tt_target_parse(target_text, &host, NULL);
    tt_status s = tt_workload_parse(workload, &b->w, err);
    if (!s)
        s = tt_state_from_json(&b->w->dag, config, &st, err);
    if (!s)
        s = tt_lower(st, &prog, err);
    if (!s)
        s = tt_codegen_llvm(prog, &host, "kernel", so, NULL, NULL, err);
    if (!s)
        s = tt_kernel_load(so, "kernel", &b->kern, err);
    unlink(so);
    tt_state_free(st);
    if (s) {
        tt_program_free(prog);
        return s;
    }
    b->fn = tt_kernel_function(b->kern);
    int ops[64];
    b->nparams = tt_dag_params(&b->w->dag, ops, 64, &b->ninputs);
    for (int i = 0; i < b->nparams && i < 64; i++) {
        const tt_op *op = &b->w->dag.ops.data[ops[i]];
        b->bytes[i] = (size_t)tt_op_numel(op) * (size_t)tt_dtype_bytes(op->dtype);
        /* placed as the tuner's measurement places them (base/tensor_mem.h) */
        if (!(b->data[i] = tt_tensor_alloc(b->bytes[i]))) {
            tt_program_free(prog);
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
        if (i < b->ninputs)
            tt_fill_input(&b->w->dag, ops[i], b->data[i], 1000 + (uint64_t)i);
        else
            memset(b->data[i], 0, b->bytes[i]);
        b->args[i] = b->data[i];
    }
    /* a weight the schedule reads packed is packed once, outside the timing (deployment) */
    s = tt_program_args(&b->w->dag, prog, b->data, b->args, err);
    if (s)
        tt_program_free(prog);
    else
        b->prog = prog;
    return s;
}

/* Largest |x - y| / (1 + |y|) over the output. */
static double max_rel_err(const float *x, const float *y, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]) / (1.0 + fabs((double)y[i]));
        if (!(d <= m))
            m = d;
    }
    return m;
}

#ifdef TT_HAVE_OPENBLAS
#include <cblas.h>
static void reference_gemm(const built *b, const row *r, float *out)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->m, r->n, r->k, 1.0f, b->data[0], r->k,
                b->data[1], r->n, 0.0f, out, r->n);
}
#else
static void reference_gemm(const built *b, const row *r, float *out)
{
    (void)b, (void)r, (void)out;
}
#endif

/* The expected output of row r's workload on b's inputs. */
static tt_status reference(row *r, const built *b, const char *so, float **out, tt_errbuf *err)
{
    size_t n = b->bytes[b->nparams - 1];
    if (!(*out = malloc(n)))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (r->kind == VENDOR_GEMM && tt_bench_openblas_core()) {
        reference_gemm(b, r, *out);
        return TT_OK;
    }
    /* A path of its own: the kernel checked is still loaded from `so`, and dlopen would hand
     * back that library for the same name. */
    char ref_so[600];
    snprintf(ref_so, sizeof(ref_so), "%s.ref.so", so);
    built naive;
    tt_status s = build(r->workload, "[]", ref_so, &naive, err);
    if (!s) {
        naive.fn(naive.args);
        memcpy(*out, naive.data[naive.nparams - 1], n);
    }
    built_free(&naive);
    return s;
}

/* Timings of each kernel per row, interleaved with the others'; the best counts. */
enum { TIMING_ROUNDS = 3 };

/* *best = t when t is a time (> 0) and *best is none (< 0) or slower. */
static void keep_best(double *best, double t)
{
    if (t > 0 && (*best < 0 || t < *best))
        *best = t;
}

/* ---- timing, each kernel in a process of its own ---- */

/* Every timing runs in a fresh child process, as the tuner measures a candidate: libraries that
 * share a process disturb each other (after oneDNN's OpenMP convolutions, our C12 kernel ran at
 * 0.6 of its speed in the same process for as long as the process lived; alone, or in a child,
 * it ran at the tuner's figure), and a vendor deserves the same clean process as ours.  The
 * parent never runs a parallel kernel itself, so its OpenMP runtime has no threads to lose in
 * fork, and a child's thread pools (OpenBLAS's, OpenMP's) end with it instead of spinning beside
 * the next library timed. */
typedef struct {
    row *r;
    const char *so;
    bool check; /* also compare outputs with the reference */
    long cores;
} timing_job;

/* Child: out[0..1] = seconds per call of ours at budgets A and B, out[2..3] = their largest
 * relative error against the reference (when job->check; else 0). */
static int time_ours(const void *arg, double *out)
{
    const timing_job *job = arg;
    row *r = job->r;
    built k[2];
    memset(k, 0, sizeof(k));
    int rc = 0;
    for (int b = 0; b < 2 && !rc; b++) {
        tt_errbuf err = {{0}};
        char so[200];
        snprintf(so, sizeof(so), "%.180s.%d.so", job->so,
                 b); /* both stay loaded: names of their own */
        if (build(r->workload, r->config[b], so, &k[b], &err)) {
            fprintf(stderr, "bench_vendor: %s: %s\n", r->workload, err.msg);
            rc = -1;
            break;
        }
        out[2 + b] = 0;
        if (job->check) {
            float *expect = NULL;
            if (reference(r, &k[b], so, &expect, &err)) {
                fprintf(stderr, "bench_vendor: %s: %s\n", r->workload, err.msg);
                rc = -1;
            } else {
                k[b].fn(k[b].args);
                out[2 + b] = max_rel_err(k[b].data[k[b].nparams - 1], expect,
                                         k[b].bytes[k[b].nparams - 1] / sizeof(float));
            }
            free(expect);
        }
    }
    for (int b = 0; b < 2 && !rc; b++)
        out[b] = tt_bench_time(run_built, &k[b]);
    built_free(&k[0]);
    built_free(&k[1]);
    return rc;
}

/* Child: out[0] = seconds per call of the vendor's kernel for the row; -1 when not built in. */
static int time_vendor(const void *arg, double *out)
{
    const timing_job *job = arg;
    const row *r = job->r;
    if (r->kind == VENDOR_GEMM) {
        double best = -1;
        for (int th = 1; th <= job->cores && th <= 2; th++) { /* 1 thread, then all (2 here) */
            tt_bench_openblas_threads(th == 2 ? (int)job->cores : 1);
            keep_best(&best, tt_bench_openblas_sgemm(r->m, r->n, r->k));
        }
        out[0] = best;
    } else if (r->blocked)
        out[0] =
            tt_bench_onednn_conv2d_blocked(r->ci, r->hw, r->co, r->kk, r->s, r->p, nchwc_block());
    else
        out[0] =
            tt_bench_onednn_conv2d_nhwc_groups(r->ci, r->hw, r->co, r->kk, r->s, r->p, r->groups);
    return 0;
}

/* Runs fn(arg, out) in a child process and copies its n results back; -1 when the child failed
 * or died. */
static int time_in_child(int (*fn)(const void *, double *), const void *arg, double *out, int n)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        double res[8] = {0};
        int rc = fn(arg, res);
        ssize_t want = (ssize_t)(n * sizeof(double));
        _exit(rc == 0 && write(fd[1], res, (size_t)want) == want ? 0 : 1);
    }
    close(fd[1]);
    size_t want = (size_t)n * sizeof(double), got = 0;
    while (got < want) {
        ssize_t k = read(fd[0], (char *)out + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return got == want && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ---- the table ---- */

static double geomean(const double *v, int n)
{
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0) {
            s += log(v[i]);
            k++;
        }
    return k ? exp(s / k) : 0;
}

/* ---- compile throughput ---- */

/* Per candidate, in seconds: the phases of its faster pass. */
typedef struct {
    double lower, emit, opt, object, link, load;
} compile_phases;

typedef struct {
    compile_phases best; /* sums over candidates of each one's faster pass */
    double all;          /* sum over every pass of every candidate */
    int n, passes;
} compile_times;

static double phases_total(const compile_phases *p)
{
    return p->lower + p->emit + p->opt + p->object + p->link + p->load;
}

/* Lowers and compiles config `index` of `sp` as the tuner compiles what it measures here (an
 * unlinked object on x86-64), then loads it; false if the config does not apply. */
static bool compile_one(const tt_space *sp, const tt_target *host, uint64_t index, const char *so,
                        compile_phases *ph)
{
    tt_errbuf err = {{0}};
    tt_state *st;
    tt_program *prog;
    if (tt_space_apply(sp, index, &st, &err))
        return false;
    double t0 = tt_clock_monotonic();
    tt_status s = tt_lower(st, &prog, &err);
    double t1 = tt_clock_monotonic();
    tt_state_free(st);
    if (s)
        return false;
    tt_codegen_stats cs;
    tt_codegen_options co = {3, 64, 64, NULL, false};
#if defined(__x86_64__)
    co.object_only = true;
#endif
    s = tt_codegen_llvm(prog, host, "kernel", so, &co, &cs, &err);
    tt_program_free(prog);
    if (s)
        return false;
    double t2 = tt_clock_monotonic();
    tt_kernel *k;
    if (tt_kernel_load(so, "kernel", &k, &err) == TT_OK)
        tt_kernel_unload(k);
    *ph = (compile_phases){t1 - t0,     cs.emit_s, cs.opt_s,
                           cs.object_s, cs.link_s, tt_clock_monotonic() - t2};
    unlink(so);
    return true;
}

/* `count` random configs of the default space of `workload` (seed 3), each compiled `passes`
 * times, one pass over all of them after another.  Compile times on a shared machine drift by
 * 20% and more from one second to the next (docs/codegen.md), so each candidate's faster pass is
 * what is summed; `all` keeps every pass. */
static void compile_bench(const char *workload, int count, int passes, const char *so,
                          compile_times *ct)
{
    memset(ct, 0, sizeof(*ct));
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(workload, &w, &err))
        return;
    tt_target host;
    tt_target_parse(target_text, &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    tt_space sp;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t *picked = calloc((size_t)count, sizeof(uint64_t));
    compile_phases *best = calloc((size_t)count, sizeof(compile_phases));
    if (!picked || !best || tt_space_init(&sp, &w->dag, (int)cores, &isa, &err)) {
        free(picked);
        free(best);
        tt_workload_free(w);
        return;
    }
    tt_rng rng;
    tt_rng_seed(&rng, 3);
    for (int tries = 0; ct->n < count && tries < 10 * count; tries++) {
        uint64_t index = tt_rng_below(&rng, sp.size);
        if (compile_one(&sp, &host, index, so, &best[ct->n])) {
            ct->all += phases_total(&best[ct->n]);
            picked[ct->n++] = index;
        }
    }
    ct->passes = passes;
    for (int p = 1; p < passes; p++)
        for (int i = 0; i < ct->n; i++) {
            compile_phases ph;
            if (!compile_one(&sp, &host, picked[i], so, &ph))
                continue;
            ct->all += phases_total(&ph);
            if (phases_total(&ph) < phases_total(&best[i]))
                best[i] = ph;
        }
    for (int i = 0; i < ct->n; i++) {
        ct->best.lower += best[i].lower;
        ct->best.emit += best[i].emit;
        ct->best.opt += best[i].opt;
        ct->best.object += best[i].object;
        ct->best.link += best[i].link;
        ct->best.load += best[i].load;
    }
    free(picked);
    free(best);
    tt_workload_free(w);
}

/* The goal's two (#16: 25 candidates/s per core), then a depthwise and an NCHWc convolution. */
#define NCOMPILE 4
static const char *const compile_workloads[NCOMPILE] = {
    "matmul:M=512,N=512,K=512", "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1",
    "depthwise_conv2d_nhwc:N=1,H=56,W=56,C=144,K=3,S=1,P=1",
    "conv2d_nchwc:N=1,CI=64,H=56,W=56,CO=64,K=3,S=1,P=1"};

/* Measures and prints compile throughput on one thread: random configs of the default space of
 * each of compile_workloads, compiled as the tuner compiles what it measures here. */
static void compile_section_print(bool quick, const char *so, compile_times ct[NCOMPILE])
{
    int count = quick ? 4 : 48, passes = quick ? 1 : 2;
    printf("\ncompile throughput (one thread; %d random configs of the default space each, "
           "compiled as the tuner compiles what it measures here; each config's faster of %d "
           "passes, in brackets the mean of all %d):\n",
           count, passes, passes);
    for (int i = 0; i < NCOMPILE; i++) {
        compile_bench(compile_workloads[i], count, passes, so, &ct[i]);
        if (!ct[i].n)
            continue;
        double n = ct[i].n, total = phases_total(&ct[i].best) / n,
               mean = ct[i].all / (n * ct[i].passes);
        printf("  %-54s %5.1f candidates/s per core (%.1f ms: lower %.1f, emit %.1f, "
               "optimise %.1f, codegen %.1f, link %.1f, load %.1f) [%.1f/s, %.1f ms]\n",
               compile_workloads[i], 1 / total, total * 1e3, ct[i].best.lower / n * 1e3,
               ct[i].best.emit / n * 1e3, ct[i].best.opt / n * 1e3, ct[i].best.object / n * 1e3,
               ct[i].best.link / n * 1e3, ct[i].best.load / n * 1e3, 1 / mean, mean * 1e3);
    }
    fflush(stdout);
}

/* Does a row's group or name contain one of the comma-separated words of `list`? */
static bool matches(const char *list, const row *r)
{
    char word[64];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(word, sizeof(word), "%.*s", (int)(n < 63 ? n : 63), p);
        if (n && (strstr(r->group, word) || !strcmp(r->name, word)))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: bench_vendor [--quick] [--trials A,B] [--strategy xgb|evo|...] "
        "[--only SUBSTR] [--json FILE] [--db PATH] [--isa avx2] "
        "[--no-compile-bench | --compile-only]\n"
        "  --quick      a tiny subset with 8 and 16 trials (seconds): checks the suite\n"
        "  --trials     the two budgets per row (default 200,1000)\n"
        "  --only       rows whose group contains, or whose name is, one of the comma-separated\n"
        "               words (e.g. C9,C12 or matmul,bert or mbv2)\n"
        "  --json       also write the table as JSON (default bench_vendor.json)\n"
        "  --db         keep the tuning database (a second run resumes from it)\n"
        "  --isa avx2   on an AVX-512 CPU, run as an AVX2 machine would: ours tuned for\n"
        "               'llvm -mattr=-avx512f', OpenBLAS's Haswell kernels, oneDNN capped at\n"
        "               AVX2, the peak probed with 32-byte FMAs\n"
        "  --compile-only  only the compile throughput section (48 candidates per workload,\n"
        "               4 with --quick)\n");
}

int main(int argc, char **argv)
{
    int64_t budget[2] = {200, 1000};
    bool quick = false, compile_section = true, compile_only = false;
    const char *only = NULL, *json_path = "bench_vendor.json", *db_arg = NULL;
    tt_strategy strategy = TT_STRATEGY_XGB;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--trials") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lld,%lld", (long long *)&budget[0], (long long *)&budget[1]) !=
                    2 ||
                budget[0] < 1 || budget[1] < budget[0]) {
                fprintf(stderr, "bench_vendor: --trials needs A,B with 1 <= A <= B\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--strategy") && i + 1 < argc) {
            if (!tt_strategy_parse(argv[++i], &strategy)) {
                fprintf(stderr, "bench_vendor: unknown strategy '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
            db_arg = argv[++i];
        } else if (!strcmp(argv[i], "--no-compile-bench")) {
            compile_section = false;
        } else if (!strcmp(argv[i], "--compile-only")) {
            compile_only = true;
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (strcmp(argv[++i], "avx2")) {
                fprintf(stderr, "bench_vendor: --isa takes avx2 (the default is this CPU's)\n");
                return 2;
            }
            target_text = avx2_target;
        } else {
            usage(!strcmp(argv[i], "--help") ? stdout : stderr);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    /* OpenBLAS reads OPENBLAS_CORETYPE when it loads: restart with it set as the run needs (unset:
     * OpenBLAS picks its kernel for this CPU). */
    bool avx2 = target_text == avx2_target;
    const char *core = getenv("OPENBLAS_CORETYPE");
    if (avx2 ? !core || strcmp(core, avx2_openblas_core) : core != NULL) {
        if (avx2)
            setenv("OPENBLAS_CORETYPE", avx2_openblas_core, 1);
        else
            unsetenv("OPENBLAS_CORETYPE");
        execv("/proc/self/exe", argv);
    }
    if (avx2 && tt_bench_onednn_max_isa_avx2())
        fprintf(stderr, "bench_vendor: oneDNN could not be capped at AVX2\n");
    if (quick && budget[0] == 200 && budget[1] == 1000) {
        budget[0] = 8;
        budget[1] = 16;
    }
    if (compile_only) {
        char cpu[256], so[128];
        snprintf(so, sizeof(so), "/tmp/bench-vendor-%d.so", (int)getpid());
        printf("bench_vendor: %s, %ld cores, target '%s'\n", tt_bench_cpu_name(cpu, sizeof(cpu)),
               sysconf(_SC_NPROCESSORS_ONLN), target_text);
        compile_times ct[NCOMPILE];
        memset(ct, 0, sizeof(ct));
        compile_section_print(quick, so, ct);
        return ct[0].n && ct[1].n ? 0 : 1;
    }
    row *use[NROWS];
    int nuse = 0;
    for (int i = 0; i < NROWS; i++) {
        row *r = &rows[i];
        if (quick && !r->quick)
            continue;
        if (only && !matches(only, r))
            continue;
        workload_of(r);
        use[nuse++] = r;
    }
    if (!nuse) {
        fprintf(stderr, "bench_vendor: no row matches '%s'\n", only ? only : "");
        return 2;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char cpu[256];
    tt_target host;
    tt_target_parse(target_text, &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    const char *probe_isa;
    double peak1 = tt_bench_fma_peak(1, avx2, &probe_isa);
    double peakn = tt_bench_fma_peak((int)cores, avx2, &probe_isa);
    printf("bench_vendor: %s, %ld cores, vector ISA %s (%d-byte vectors, %d registers)%s\n",
           tt_bench_cpu_name(cpu, sizeof(cpu)), cores, isa.name, isa.vector_bytes, isa.vector_regs,
           avx2 ? ", narrowed by --isa avx2 (target 'llvm -mattr=-avx512f')" : "");
    printf("FMA peak (float32, %s): %.1f GFLOPS on 1 core, %.1f GFLOPS on %ld cores\n", probe_isa,
           peak1 / 1e9, peakn / 1e9, cores);
    printf("search: %s, %lld then %lld trials per row; vendors: OpenBLAS %s, oneDNN\n\n",
           tt_strategy_name(strategy), (long long)budget[0], (long long)budget[1],
           tt_bench_openblas_core() ? tt_bench_openblas_core() : "(not built in)");
    fflush(stdout);

    char db_tmp[128], so[128];
    snprintf(db_tmp, sizeof(db_tmp), "/tmp/bench-vendor-%d.db", (int)getpid());
    snprintf(so, sizeof(so), "/tmp/bench-vendor-%d.so", (int)getpid());
    const char *db_path = db_arg ? db_arg : db_tmp;

    /* 1. Tuning, every row and both budgets, before any thread pool exists. */
    for (int u = 0; u < nuse; u++) {
        row *r = use[u];
        for (int b = 0; b < 2; b++) {
            const char *w[1] = {r->workload};
            tt_tune_options o;
            memset(&o, 0, sizeof(o));
            o.workloads = w;
            o.nworkloads = 1;
            o.trials = budget[b];
            o.strategy = strategy;
            o.target = target_text;
            o.db_path = db_path;
            o.seed = 1;
            o.threads = (int)cores;
            /* tvm-tune run's measurement for this target */
            o.measure.number = o.measure.repeat = -1;
            o.measure.min_repeat_ms = o.measure.repeat_budget_ms = o.measure.timeout_s = -1;
            tt_tune_measure_defaults(target_text, &o.measure);
            tt_tune_summary sum;
            tt_errbuf err = {{0}};
            double t0 = tt_clock_monotonic();
            if (tt_tune_run(&o, &sum, NULL, &err) || sum.best_s <= 0) {
                fprintf(stderr, "bench_vendor: tuning %s: %s\n", r->workload,
                        err.msg[0] ? err.msg : "no kernel ran");
                return 1;
            }
            r->tune_wall[b] = tt_clock_monotonic() - t0 + (b ? r->tune_wall[0] : 0);
            r->tuned_s[b] = sum.best_s;
            r->flops = sum.flops;
            r->measured[b] = sum.total;
            r->compile_s[b] = sum.compile_s;
            r->compiled[b] = sum.measured;
            snprintf(r->config[b], sizeof(r->config[b]), "%s", sum.best_config);
            printf("tuned %-9s %-13s %5lld trials: %8.2f GFLOPS (%.0f s; %.0f ms compile per "
                   "candidate)\n",
                   r->group, r->name, (long long)sum.total, sum.flops / sum.best_s / 1e9,
                   r->tune_wall[b], sum.compile_s * 1e3);
            fflush(stdout);
        }
    }

    /* 2. Ours built, checked and timed, then the vendor, each in a fresh child process, in
     * TIMING_ROUNDS interleaved rounds, the best of each kept (see time_in_child). */
    int failures = 0;
    for (int u = 0; u < nuse; u++) {
        row *r = use[u];
        r->vendor = r->kind == VENDOR_GEMM ? "OpenBLAS" : "oneDNN";
        r->ours_s[0] = r->ours_s[1] = r->vendor_s = -1;
        for (int round = 0; round < TIMING_ROUNDS; round++) {
            double got[4];
            timing_job job = {r, so, round == 0, cores};
            if (time_in_child(time_ours, &job, got, 4)) {
                fprintf(stderr, "bench_vendor: %s: our kernels could not be built or run\n",
                        r->workload);
                return 1;
            }
            for (int b = 0; b < 2; b++) {
                keep_best(&r->ours_s[b], got[b]);
                if (round == 0)
                    r->max_err[b] = got[2 + b];
            }
            if (!time_in_child(time_vendor, &job, got, 1))
                keep_best(&r->vendor_s, got[0]);
        }
        for (int b = 0; b < 2; b++)
            if (!(r->max_err[b] <= 1e-3)) {
                fprintf(stderr,
                        "bench_vendor: %s: the tuned kernel disagrees with the reference "
                        "(max relative error %.3g)\n",
                        r->workload, r->max_err[b]);
                failures++;
            }
    }

    /* The peak again, now that the machine is quiet after tuning: the higher figure counts. */
    double again1 = tt_bench_fma_peak(1, avx2, &probe_isa),
           againn = tt_bench_fma_peak((int)cores, avx2, &probe_isa);
    if (again1 > peak1)
        peak1 = again1;
    if (againn > peakn)
        peakn = againn;
    printf(
        "\nFMA peak: %.1f GFLOPS on 1 core, %.1f GFLOPS on %ld cores (the higher of two probes)\n",
        peak1 / 1e9, peakn / 1e9, cores);

    /* 3. The table. */
    printf("%-9s %-13s %8s | %9s %9s | %9s %-8s | %6s %6s | %6s %6s | %7s\n", "group", "kernel",
           "GFLOP", "ours@A", "ours@B", "vendor", "", "ratioA", "ratioB", "%pk B", "%pk V",
           "tune s");
    double ratio[2][NROWS];
    int low = 0;
    for (int u = 0; u < nuse; u++) {
        row *r = use[u];
        double gf = r->flops / 1e9;
        for (int b = 0; b < 2; b++)
            ratio[b][u] = r->vendor_s > 0 ? r->vendor_s / r->ours_s[b] : 0;
        low += ratio[1][u] > 0 && ratio[1][u] < 0.9;
        double pk = peakn > 0 ? 100 * r->flops * useful_share(r) / peakn : 0; /* x seconds */
        printf("%-9s %-13s %8.3f | %9.1f %9.1f | %9.1f %-8s | %6.2f %6.2f | %6.1f %6.1f | %7.0f\n",
               r->group, r->name, gf, gf / r->ours_s[0], gf / r->ours_s[1],
               r->vendor_s > 0 ? gf / r->vendor_s : 0, r->vendor, ratio[0][u], ratio[1][u],
               pk / r->ours_s[1], r->vendor_s > 0 ? pk / r->vendor_s : 0, r->tune_wall[1]);
    }
    double g0 = geomean(ratio[0], nuse), g1 = geomean(ratio[1], nuse);
    printf("(GFLOPS, nominal; A = %lld trials, B = %lld; ratio = vendor time / ours; %%pk = "
           "percent of the %ld-core FMA peak, ours at B and the vendor, counting only the taps "
           "inside a convolution's input)\n",
           (long long)budget[0], (long long)budget[1], cores);
    printf("geometric mean of ratios: %.3f at %lld trials, %.3f at %lld trials; %d of %d rows "
           "below 0.9 at %lld\n",
           g0, (long long)budget[0], g1, (long long)budget[1], low, nuse, (long long)budget[1]);

    /* What the search compiled: every candidate of every row's runs, as the tuner timed them. */
    double csum = 0;
    int64_t cn = 0;
    for (int u = 0; u < nuse; u++)
        for (int b = 0; b < 2; b++) {
            csum += use[u]->compile_s[b] * (double)use[u]->compiled[b];
            cn += use[u]->compiled[b];
        }
    if (cn > 0 && csum > 0)
        printf("the search compiled %lld candidates at %.1f ms each: %.1f candidates/s per core\n",
               (long long)cn, csum / (double)cn * 1e3, (double)cn / csum);

    /* 4. Compile throughput. */
    compile_times ct[NCOMPILE];
    memset(ct, 0, sizeof(ct));
    if (compile_section)
        compile_section_print(quick, so, ct);

    /* 5. JSON. */
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "cpu", json_string(cpu));
    json_object_set_new(root, "isa", json_string(isa.name));
    json_object_set_new(root, "target", json_string(target_text));
    json_object_set_new(root, "cores", json_integer(cores));
    json_object_set_new(root, "peak_gflops_1core", json_real(peak1 / 1e9));
    json_object_set_new(root, "peak_gflops_all", json_real(peakn / 1e9));
    json_object_set_new(root, "strategy", json_string(tt_strategy_name(strategy)));
    json_object_set_new(root, "trials",
                        json_pack("[I, I]", (json_int_t)budget[0], (json_int_t)budget[1]));
    json_object_set_new(root, "openblas_core",
                        json_string(tt_bench_openblas_core() ? tt_bench_openblas_core() : ""));
    for (int u = 0; u < nuse; u++) {
        row *r = use[u];
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:s, s:f, s:f, s:[f, f], s:[f, f], s:s, s:f, s:[f, f], "
                           "s:[f, f], s:[s, s], s:[f, f], s:[f, f]}",
                           "group", r->group, "kernel", r->name, "workload", r->workload, "gflop",
                           r->flops / 1e9, "useful_share", useful_share(r), "ours_s", r->ours_s[0],
                           r->ours_s[1], "tuned_s", r->tuned_s[0], r->tuned_s[1], "vendor",
                           r->vendor, "vendor_s", r->vendor_s, "ratio", ratio[0][u], ratio[1][u],
                           "tune_s", r->tune_wall[0], r->tune_wall[1], "config", r->config[0],
                           r->config[1], "max_rel_err", r->max_err[0], r->max_err[1], "compile_ms",
                           r->compile_s[0] * 1e3, r->compile_s[1] * 1e3));
    }
    json_object_set_new(root, "rows", arr);
    json_object_set_new(root, "geomean", json_pack("[f, f]", g0, g1));
    if (compile_section && ct[0].n) {
        json_t *c = json_array();
        for (int i = 0; i < NCOMPILE; i++) {
            double n = ct[i].n ? ct[i].n : 1, passes = ct[i].passes ? ct[i].passes : 1;
            json_array_append_new(
                c, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "workload",
                             compile_workloads[i], "candidates", ct[i].n, "passes", ct[i].passes,
                             "lower_ms", ct[i].best.lower / n * 1e3, "emit_ms",
                             ct[i].best.emit / n * 1e3, "opt_ms", ct[i].best.opt / n * 1e3,
                             "codegen_ms", ct[i].best.object / n * 1e3, "link_ms",
                             ct[i].best.link / n * 1e3, "load_ms", ct[i].best.load / n * 1e3,
                             "mean_all_passes_ms", ct[i].all / (n * passes) * 1e3));
        }
        json_object_set_new(root, "compile", c);
    }
    if (json_dump_file(root, json_path, JSON_INDENT(1)))
        fprintf(stderr, "bench_vendor: cannot write %s: %s\n", json_path, strerror(errno));
    else
        printf("\nwrote %s\n", json_path);
    json_decref(root);
    if (!db_arg)
        tt_db_remove(db_tmp);
    return failures ? 1 : 0;
}
