/* OpenCL benchmark: tuned OpenCL kernels against two anchors measured in the same run on the same
 * machine: the naive OpenCL schedule (elementwise stages inlined, outer loops spread over blocks of
 * 32 threads) and the CPU code generator's tuned kernel (LLVM, every core).  On pocl the OpenCL
 * device is this CPU, so the last ratio says what the OpenCL route costs against native code; on
 * a GPU machine it says what the GPU buys.
 *
 * usage: bench_opencl [--trials N] [--strategy evo|xgb|...] [--device SPEC] [--db PATH]
 *                     [--no-cpu] [WORKLOAD ...]
 *        (defaults: 64 trials of evo; matmul 256 and a 3x3 conv2d of 64 channels at 28x28; the
 *        records go to a temporary database unless --db names one to keep; --no-cpu skips the CPU
 *        anchor, for a GPU check with little time)
 *
 * Each workload's line gives the candidates measured per minute of tuning and the wall time of a
 * candidate's measurement: on a GPU most of a candidate's cost was the driver (docs/opencl.md). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "rpc/device_info.h"
#include "tuner/tune.h"

static int tune(const char *workload, const char *target, int64_t trials, tt_strategy strategy,
                const char *device, const char *db, tt_tune_summary *sum, double *seconds)
{
    const char *w[1] = {workload};
    tt_tune_options o;
    memset(&o, 0, sizeof(o));
    o.workloads = w;
    o.nworkloads = 1;
    o.target = target;
    o.trials = trials;
    o.strategy = strategy;
    o.db_path = db;
    o.seed = 1;
    o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o.population = 512;
    o.measure.repeat = 3;
    o.measure.min_repeat_ms = 20;
    o.measure.timeout_s = 60;
    o.measure.opencl_device = device;
    tt_errbuf err = {{0}};
    double t0 = tt_clock_monotonic();
    if (tt_tune_run(&o, sum, NULL, &err) || sum->best_s <= 0) {
        fprintf(stderr, "bench_opencl: tuning %s for %s failed: %s\n", workload, target, err.msg);
        return 1;
    }
    *seconds = tt_clock_monotonic() - t0;
    return 0;
}

int main(int argc, char **argv)
{
    int64_t trials = 64;
    tt_strategy strategy = TT_STRATEGY_EVO;
    const char *device = NULL;
    const char *keep_db = NULL;
    bool cpu_anchor = true;
    const char *workloads[16];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--strategy") && i + 1 < argc) {
            if (!tt_strategy_parse(argv[++i], &strategy)) {
                fprintf(stderr, "bench_opencl: unknown strategy %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            keep_db = argv[++i];
        else if (!strcmp(argv[i], "--no-cpu"))
            cpu_anchor = false;
        else if (n < 16)
            workloads[n++] = argv[i];
    }
    if (n == 0) {
        workloads[n++] = "matmul:M=256,N=256,K=256";
        workloads[n++] = "conv2d_nchw:N=1,CI=64,H=28,W=28,CO=64,K=3,S=1,P=1";
    }
    tt_device_info dev;
    tt_device_probe(&dev);
    tt_errbuf err = {{0}};
    if (tt_device_probe_opencl(&dev, device, &err) || dev.opencl_selected < 0) {
        fprintf(stderr, "bench_opencl: no OpenCL device: %s\n", err.msg[0] ? err.msg : "none");
        return 1;
    }
    const tt_cl_device_info *cl = &dev.opencl[dev.opencl_selected];
    char hint[1024];
    tt_cl_driver_hint(cl, NULL, hint, sizeof(hint));
    if (hint[0])
        printf("note: %s\n", hint);
    printf("OpenCL device: %s (%s, %s, %d compute units); CPU: %s, %d cores\n", cl->name,
           cl->vendor, cl->version, cl->compute_units, dev.model, dev.cores);
    printf("%lld trials of %s per workload and target\n\n", (long long)trials,
           tt_strategy_name(strategy));
    char tmp_db[128];
    snprintf(tmp_db, sizeof(tmp_db), "/tmp/bench-opencl-%d.db", (int)getpid());
    const char *db = keep_db ? keep_db : tmp_db;
    for (int i = 0; i < n; i++) {
        tt_tune_summary gpu, cpu;
        double gpu_s, cpu_s = 0;
        memset(&cpu, 0, sizeof(cpu));
        if (tune(workloads[i], "opencl", trials, strategy, device, db, &gpu, &gpu_s) ||
            (cpu_anchor && tune(workloads[i], "llvm", trials, strategy, NULL, db, &cpu, &cpu_s))) {
            if (!keep_db)
                tt_db_remove(db);
            return 1;
        }
        double gflops = gpu.flops / gpu.best_s * 1e-9;
        printf("%s\n", workloads[i]);
        printf("  OpenCL tuned   %9.3f ms  %7.2f GFLOPS  (tuned in %.0f s, %lld errors)\n",
               gpu.best_s * 1e3, gflops, gpu_s, (long long)gpu.errors);
        printf("  OpenCL naive   %9.3f ms  ratio naive/tuned %.2fx\n", gpu.naive_s * 1e3,
               gpu.naive_s / gpu.best_s);
        printf("  OpenCL search  %lld candidates in %.0f s: %.0f per minute, %.0f ms measurement "
               "and %.0f ms compile (with the driver's build) per candidate\n",
               (long long)gpu.measured, gpu_s, gpu.measured / gpu_s * 60, gpu.measure_s * 1e3,
               gpu.compile_s * 1e3);
        if (cpu_anchor)
            printf("  CPU (LLVM)     %9.3f ms  ratio cpu/opencl  %.2fx  (tuned in %.0f s)\n",
                   cpu.best_s * 1e3, cpu.best_s / gpu.best_s, cpu_s);
        printf("  best OpenCL config %s\n\n", gpu.best_config);
    }
    if (!keep_db)
        tt_db_remove(db);
    return 0;
}
