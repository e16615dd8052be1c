/* The library tvm-compile builds against the kernels measured while tuning (they must agree
 * within noise: the same schedule, compiled the same way) and against OpenBLAS / oneDNN, in one
 * run: tune matmul and a ResNet conv2d briefly, compile the library, load it and time each
 * function like the anchors (bench/anchors.h).
 *
 * usage: bench_compile [--trials N] [--db PATH]   (defaults: 32 trials of xgb, a fresh db) */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anchors.h"
#include "db/db.h"
#include "deploy/compile.h"
#include "schedule/schedule.h"
#include "tuner/tune.h"

#define MM   "matmul:M=256,N=256,K=256"
#define CONV "conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1"

typedef int (*fn3)(void *, void *, void *);

typedef struct {
    fn3 f;
    void *buf[3];
} call;

static void run_call(void *p)
{
    call *c = p;
    c->f(c->buf[0], c->buf[1], c->buf[2]);
}

/* Median seconds per call of `sym`, on zero-filled buffers of the workload's shapes (a weight
 * the kernel reads packed: of the size the header gives, as an application would allocate). */
static double time_symbol(void *lib, const char *header, const char *sym, const char *workload)
{
    tt_workload *w;
    tt_errbuf err = {{0}};
    if (tt_workload_parse(workload, &w, &err))
        return -1;
    int params[64], nin;
    tt_dag_params(&w->dag, params, 64, &nin);
    call c = {(fn3)dlsym(lib, sym), {0}};
    for (int i = 0; i < 3; i++) {
        const tt_op *op = &w->dag.ops.data[params[i]];
        int64_t n = tt_op_numel(op);
        char macro[200];
        snprintf(macro, sizeof(macro), "_%s_PACKED_ELEMENTS ", op->name);
        for (char *m = macro; *m; m++)
            *m = (char)toupper((unsigned char)*m);
        const char *def = i < nin && header ? strstr(header, macro) : NULL;
        if (def && atoll(def + strlen(macro)) > n)
            n = atoll(def + strlen(macro));
        c.buf[i] = calloc((size_t)n, (size_t)tt_dtype_bytes(op->dtype));
    }
    double t = c.f ? tt_bench_time(run_call, &c) : -1;
    for (int i = 0; i < 3; i++)
        free(c.buf[i]);
    tt_workload_free(w);
    return t;
}

int main(int argc, char **argv)
{
    int64_t trials = 32;
    char db[256];
    snprintf(db, sizeof(db), "/tmp/bench-compile-%d.db", (int)getpid());
    bool own_db = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
            snprintf(db, sizeof(db), "%s", argv[++i]);
            own_db = false;
        }
    }
    const char *ws[2] = {MM, CONV};
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = ws;
    o.nworkloads = 2;
    o.trials = trials;
    o.strategy = TT_STRATEGY_XGB;
    o.db_path = db;
    o.seed = 1;
    o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o.measure.repeat = 5;
    o.measure.min_repeat_ms = 20;
    o.measure.timeout_s = 60;
    tt_tune_summary sum[2];
    tt_errbuf err = {{0}};
    /* Tuning first: the anchors' OpenMP threads must not exist when the tuner forks. */
    if (tt_tune_run(&o, sum, NULL, &err)) {
        fprintf(stderr, "bench_compile: tuning failed: %s\n", err.msg);
        return 1;
    }
    char out[300];
    snprintf(out, sizeof(out), "/tmp/bench-compile-%d/libkernels", (int)getpid());
    tt_compile_kernel ks[2] = {{MM, "bench_matmul"}, {CONV, "bench_conv2d"}};
    tt_compile_options co = {db, "llvm", NULL, out, ks, 2, true, false, NULL, stderr};
    tt_compile_report rep[2];
    if (tt_compile(&co, rep, &err)) {
        fprintf(stderr, "bench_compile: tvm-compile failed: %s\n", err.msg);
        return 1;
    }
    char so[320];
    snprintf(so, sizeof(so), "%s.so", out);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_compile: %s\n", dlerror());
        return 1;
    }
    char hpath[320];
    static char header[1 << 16];
    snprintf(hpath, sizeof(hpath), "%s.h", out);
    FILE *hf = fopen(hpath, "r");
    size_t hn = hf ? fread(header, 1, sizeof(header) - 1, hf) : 0;
    header[hn] = 0;
    if (hf)
        fclose(hf);
    double lib_mm = time_symbol(lib, header, "bench_matmul", MM);
    double lib_conv = time_symbol(lib, header, "bench_conv2d", CONV);
    double blas = tt_bench_openblas_sgemm(256, 256, 256);
    double dnnl = tt_bench_onednn_conv2d_nhwc(64, 56, 64, 3, 1, 1);
    printf("tvm-compile library vs tuning and vendor libraries, %ld cores, %lld trials of xgb\n",
           sysconf(_SC_NPROCESSORS_ONLN), (long long)trials);
    printf("%-44s %10s %10s %8s %10s %8s\n", "workload", "library", "tuned", "lib/tun", "vendor",
           "vend/lib");
    const char *names[2] = {MM, CONV};
    double lib_t[2] = {lib_mm, lib_conv}, vendor[2] = {blas, dnnl};
    const char *vname[2] = {"OpenBLAS", "oneDNN"};
    for (int i = 0; i < 2; i++) {
        printf("%-44s %8.3fms %8.3fms %8.2fx", names[i], lib_t[i] * 1e3, rep[i].fastest_s * 1e3,
               lib_t[i] / rep[i].fastest_s);
        if (vendor[i] > 0)
            printf(" %8.3fms %7.2fx (%s)\n", vendor[i] * 1e3, vendor[i] / lib_t[i], vname[i]);
        else
            printf("   (%s not built in)\n", vname[i]);
    }
    dlclose(lib);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf /tmp/bench-compile-%d", (int)getpid());
    if (system(cmd) != 0)
        fprintf(stderr, "bench_compile: could not remove the library\n");
    if (own_db)
        tt_db_remove(db);
    return 0;
}
