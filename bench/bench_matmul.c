/* matmul benchmark: the best kernel `tvm-tune run` finds vs OpenBLAS sgemm, both on every core,
 * timed the same way in the same run; and compile throughput of candidates.
 *
 * usage: bench_matmul [--trials N] [--random] [SIZE ...]
 *        (defaults: 64 trials of the xgb strategy, sizes 512 1024) */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "db/db.h"
#include "tuner/tune.h"

/* Median of `reps` timings of fn (after one warm-up call). */
static double time_median(void (*fn)(void *), void *ctx, int reps)
{
    double t[64];
    fn(ctx);
    for (int i = 0; i < reps; i++) {
        double t0 = tt_clock_monotonic();
        fn(ctx);
        t[i] = tt_clock_monotonic() - t0;
    }
    return tt_median(t, reps);
}

typedef struct {
    int n;
    float *a, *b, *c;
    tt_kernel_fn fn;
    float *b_arg; /* b, or b packed for the schedule */
} mm;

static void run_blas(void *p)
{
    mm *m = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m->n, m->n, m->n, 1.0f, m->a, m->n, m->b,
                m->n, 0.0f, m->c, m->n);
}

static void run_ours(void *p)
{
    mm *m = p;
    void *args[3] = {m->a, m->b_arg, m->c};
    m->fn(args);
}

/* Compiles `config`; *b_layout gets B's layout when the schedule reads it packed (LR). */
static tt_status compile_config(const char *workload, const char *config, const char *so,
                                tt_layout *b_layout, tt_errbuf *err)
{
    tt_workload *w;
    tt_state *st;
    tt_program *prog;
    tt_target t;
    tt_status s = tt_workload_parse(workload, &w, err);
    if (s)
        return s;
    if (!(s = tt_state_from_json(&w->dag, config, &st, err))) {
        if (!(s = tt_lower(st, &prog, err))) {
            tt_target_parse("llvm", &t, NULL);
            s = tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, err);
            memset(b_layout, 0, sizeof(*b_layout));
            if (tt_program_param(prog, 1))
                *b_layout = tt_program_param(prog, 1)->layout;
            tt_program_free(prog);
        }
        tt_state_free(st);
    }
    tt_workload_free(w);
    return s;
}

int main(int argc, char **argv)
{
    /* OpenBLAS reads OPENBLAS_CORETYPE when it loads: restart without it so that OpenBLAS picks
     * its best kernel for this CPU. */
    if (getenv("OPENBLAS_CORETYPE")) {
        unsetenv("OPENBLAS_CORETYPE");
        execv("/proc/self/exe", argv);
    }
    int64_t trials = 64;
    tt_strategy strategy = TT_STRATEGY_XGB;
    int sizes[8], nsizes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--random"))
            strategy = TT_STRATEGY_RANDOM;
        else if (nsizes < 8 && atoi(argv[i]) > 0)
            sizes[nsizes++] = atoi(argv[i]);
    }
    if (nsizes == 0) {
        sizes[0] = 512;
        sizes[1] = 1024;
        nsizes = 2;
    }
    char db_path[128], so[128];
    snprintf(db_path, sizeof(db_path), "/tmp/bench-matmul-%d.db", (int)getpid());
    snprintf(so, sizeof(so), "/tmp/bench-matmul-%d.so", (int)getpid());
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("matmul float32, %ld cores, %lld tuning trials per size (%s search)\n", cores,
           (long long)trials, strategy == TT_STRATEGY_XGB ? "xgb" : "random");
    for (int k = 0; k < nsizes; k++) {
        int n = sizes[k];
        char workload[96];
        snprintf(workload, sizeof(workload), "matmul:M=%d,N=%d,K=%d", n, n, n);
        const char *w[1] = {workload};
        tt_tune_options o;
        memset(&o, 0, sizeof(o));
        o.workloads = w;
        o.nworkloads = 1;
        o.trials = trials;
        o.strategy = strategy;
        o.db_path = db_path;
        o.seed = 1;
        o.threads = (int)cores;
        o.measure.repeat = 3;
        o.measure.min_repeat_ms = 20;
        o.measure.timeout_s = 60;
        tt_tune_summary sum;
        tt_errbuf err = {{0}};
        double t0 = tt_clock_monotonic();
        if (tt_tune_run(&o, &sum, NULL, &err) || sum.best_s <= 0) {
            fprintf(stderr, "bench_matmul: tuning failed: %s\n", err.msg);
            return 1;
        }
        double tune_s = tt_clock_monotonic() - t0;
        tt_layout bl;
        if (compile_config(workload, sum.best_config, so, &bl, &err)) {
            fprintf(stderr, "bench_matmul: %s\n", err.msg);
            return 1;
        }
        tt_kernel *kern;
        if (tt_kernel_load(so, "kernel", &kern, &err)) {
            fprintf(stderr, "bench_matmul: %s\n", err.msg);
            return 1;
        }
        mm m = {n,
                malloc(sizeof(float) * (size_t)n * n),
                malloc(sizeof(float) * (size_t)n * n),
                malloc(sizeof(float) * (size_t)n * n),
                tt_kernel_function(kern),
                NULL};
        for (int i = 0; i < n * n; i++) {
            m.a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
            m.b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        }
        /* B packed once when the schedule reads it so (as a deployment packs its weights) */
        m.b_arg = m.b;
        if (bl.nparts) {
            int64_t shape[2] = {n, n};
            m.b_arg = malloc(sizeof(float) * (size_t)bl.size);
            tt_layout_pack(&bl, 2, shape, sizeof(float), m.b, m.b_arg);
        }
        double flops = 2.0 * n * n * n;
        double ours = time_median(run_ours, &m, 11);
        float *mine = malloc(sizeof(float) * (size_t)n * n);
        memcpy(mine, m.c, sizeof(float) * (size_t)n * n);
        double blas = time_median(run_blas, &m, 11);
        double maxdiff = 0;
        for (int i = 0; i < n * n; i++)
            maxdiff = fmax(maxdiff, fabs((double)mine[i] - (double)m.c[i]));
        printf("M=N=K=%-5d tuned %8.2f GFLOPS (%.3f ms)   OpenBLAS %8.2f GFLOPS (%.3f ms)   ratio "
               "%.2f   "
               "naive %.2f GFLOPS   max |diff| %.2g   tuning %.0f s\n",
               n, flops / ours / 1e9, ours * 1e3, flops / blas / 1e9, blas * 1e3, blas / ours,
               sum.naive_s > 0 ? flops / sum.naive_s / 1e9 : 0.0, maxdiff, tune_s);
        printf("  best config %s\n", sum.best_config);
        free(mine);
        free(m.a);
        if (m.b_arg != m.b)
            free(m.b_arg);
        free(m.b);
        free(m.c);
        tt_kernel_unload(kern);
        unlink(so);
    }
    /* Compile throughput: random configs of matmul 512, one thread. */
    tt_workload *w;
    tt_errbuf err;
    tt_workload_parse("matmul:M=512,N=512,K=512", &w, &err);
    tt_space sp;
    tt_target host;
    tt_target_parse("llvm", &host, NULL);
    tt_vector_isa isa;
    tt_codegen_vector_isa(&host, &isa);
    tt_space_init(&sp, &w->dag, (int)cores, &isa, &err);
    tt_rng rng;
    tt_rng_seed(&rng, 3);
    int count = 0;
    double t0 = tt_clock_monotonic();
    tt_target t;
    tt_target_parse("llvm", &t, NULL);
    while (count < 24) {
        tt_state *st;
        tt_program *prog;
        if (tt_space_apply(&sp, tt_rng_below(&rng, sp.size), &st, &err))
            continue;
        if (!tt_lower(st, &prog, &err)) {
            if (!tt_codegen_llvm(prog, &t, "kernel", so, NULL, NULL, &err))
                count++;
            tt_program_free(prog);
        }
        tt_state_free(st);
    }
    double per = (tt_clock_monotonic() - t0) / count;
    printf(
        "compile throughput (O3, lower + LLVM + link): %.1f candidates/s per core (%.0f ms each)\n",
        1 / per, per * 1e3);
    unlink(so);
    tt_workload_free(w);
    tt_db_remove(db_path);
    return 0;
}
