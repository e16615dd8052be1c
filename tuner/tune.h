/* The tuning loop on this machine (tvm-tune run): candidates from a search space, compiled in
 * parallel, measured one at a time in sandboxed child processes, every result stored in the
 * database as it arrives.  A second run of the same command resumes: configs already measured
 * for the workload, target and device are not measured again, and trials count from there. */
#ifndef TT_TUNER_TUNE_H
#define TT_TUNER_TUNE_H

#include <signal.h>
#include <stdio.h>

#include "../rpc/measure.h"
#include "../rpc/remote.h"
#include "evolution.h"
#include "scheduler.h"
#include "space.h"

typedef enum {
    TT_STRATEGY_RANDOM, /* uniform without replacement */
    TT_STRATEGY_GRID,   /* index order */
    TT_STRATEGY_GA,     /* genetic algorithm (AutoTVM's GATuner) */
    TT_STRATEGY_XGB,    /* XGBoost cost model + simulated annealing (AutoTVM's XGBTuner) */
    TT_STRATEGY_EVO,    /* sketches + evolutionary search + XGBoost model (Ansor's form) */
    /* Random programs of evo's sketches, uniform over the sketches, none measured twice: evo's
     * space without a model or evolution (MetaSchedule's replay-trace, the programs TenSet
     * measures).  The anchor for evo as random is for the template strategies. */
    TT_STRATEGY_SKETCH_RANDOM,
} tt_strategy;

/* A strategy's name ("random", "grid", "ga", "xgb", "evo", "sketch-random") and back; false for
 * an unknown one. */
const char *tt_strategy_name(tt_strategy s);
bool tt_strategy_parse(const char *name, tt_strategy *out);
/* Whether a strategy searches Ansor's sketches (evo, sketch-random) rather than the template. */
bool tt_strategy_uses_sketches(tt_strategy s);

typedef enum {
    TT_FEATURES_KNOB,    /* xgb: log2 of each knob value (AutoTVM's "knob") */
    TT_FEATURES_ITERVAR, /* xgb: loop-variable features of the lowered program + knob values */
} tt_feature_kind;

typedef struct tt_tune_options {
    const char *const *workloads;
    int nworkloads;
    const char *target; /* default "llvm" (this machine) */
    int64_t trials;     /* per workload on average, counting what earlier runs measured; with
                           several workloads the scheduler shares trials x workloads among them */
    tt_strategy strategy;
    const char *db_path;  /* default ./tuning.db */
    int64_t db_max_bytes; /* cap the database file (0: none); reaching it stops the run as a
                             full disk does, with every earlier measurement kept */
    uint64_t seed;
    int batch;                   /* candidates compiled together, default 2 x cores */
    int threads;                 /* compile threads, default cores */
    bool progress;               /* a live progress line (on a terminal) */
    volatile sig_atomic_t *stop; /* set (e.g. by SIGINT) to stop after the current candidate */
    int population;              /* evo: states per generation, default 2048 */
    double diversity;            /* xgb: diversity filter ratio (> 1; 0 = off, AutoTVM's default) */
    tt_feature_kind features;    /* xgb: what the model sees */
    bool overlap_search;         /* evo: plan the next round while this one is measured */
    const double *weights;       /* per workload (how often it occurs), NULL = all 1 */
    /* Short names of the workloads ("Conv+Add+Relu"), NULL = none.  With several workloads and
     * labels, the log gets Ansor's task table after every round: each task's latency, weight
     * and trials, and the network's estimated latency (the sum of weight x best latency). */
    const char *const *labels;
    tt_sched_policy policy; /* how rounds are shared among several workloads */
    tt_measure_options measure;
    /* Measure on devices of a farm (a tracker's key, or a standalone tvm-rpc-server) instead of
     * this machine: a session per batch of candidates; a device lost mid-batch costs nothing but
     * a retry of its candidate on another device.  NULL: this machine. */
    const tt_remote_options *remote;
    int64_t job; /* the tracker's job these measurements belong to (records carry it), 0: none */
    /* For tests and benchmarks of the search itself: when set, candidates are lowered but not
     * compiled or run, and a config's cost in seconds is objective(ctx, config) (<= 0: an error
     * of the run).  Everything else (records, resume, strategies) is unchanged. */
    double (*objective)(void *ctx, const char *config);
    void *objective_ctx;
    /* OpenCL targets: limits tighter than the device's own (the smaller of each field counts; 0
     * leaves a field to the device), e.g. kernels that must also fit a smaller GPU of the family,
     * or a test of the search on pocl's generous device.  NULL: the device's. */
    const tt_gpu_limits *gpu_limits;
    /* OpenCL targets measured here: measure each candidate as soon as the driver has built it,
     * while later ones still build, rather than after the whole batch.  0: where the device is
     * not this machine's CPU (a GPU's timing does not share the host's cores with the builds;
     * pocl's does); 1: always; -1: never. */
    int overlap_builds;
} tt_tune_options;

typedef struct tt_tune_summary {
    char workload[1024];
    int64_t measured; /* this run */
    int64_t total;    /* including earlier runs */
    int64_t errors;
    double best_s, naive_s, flops;
    double compile_s; /* mean compile time per candidate of this run (lower + LLVM + link) */
    double measure_s; /* mean wall time of a candidate's measurement in this run (the device's
                         process, the run and the check; the driver's build when not ahead) */
    char best_config[8192];
    char best_knobs[512];
    bool interrupted;
    int64_t device_losses; /* farm: sessions that broke and whose candidate was measured again */
    int64_t devices_quarantined; /* farm: devices found sick (the canary failed there too) */
    double queue_wait_s;         /* farm: time spent waiting for a free device (never run time) */
} tt_tune_summary;

/* The measurement element type of a schedule dtype (what tt_measure_buffer.elem says). */
tt_elem tt_tune_measure_elem(tt_dtype t);

/* What the cost models learn from a measurement (evo's history, the template strategies' runs):
 * `flops` over its fastest sample (over `median_s` when there are none), 0 for an error.  A
 * busy device only adds time, so its fastest sample is the one least delayed (docs/search.md,
 * "Against a re-measurement"); "best" compares the same sample (db.h, decision 56). */
double tt_tune_label(double flops, const double *costs, int ncosts, double median_s, int error_no);

/* Tunes every workload in turn; fills summaries[i] for each.  Writes progress and notes to `log`
 * (may be NULL). */
tt_status tt_tune_run(const tt_tune_options *o, tt_tune_summary *summaries, FILE *log,
                      tt_errbuf *err);

/* Fills the fields of `m` that are negative (not given) with the defaults for `target`
 * (docs/tuning.md, "Measurement"):
 * - a CPU: single-call samples (`number` 1, grown only for a kernel under 10 us, so the clock's
 *   tens of nanoseconds stay under 1%), up to 64 of them until they add up to 100 ms and at
 *   least 5.  A record's time is its fastest sample (db.h), and the fastest of many single calls
 *   is both the most repeatable statistic idle and the idle time on a busy device;
 * - OpenCL: 5 samples of calls grown to 20 ms each (TVM's advice for GPU timers, whose
 *   resolution can be a microsecond or coarser), no budget.
 * `timeout_s` (10 s) likewise. */
void tt_tune_measure_defaults(const char *target, tt_measure_options *m);

/* The run deadline of a candidate (measurement.md §4, rule 5): a candidate slower than 50x the
 * best so far is not worth waiting for, so the deadline is what 50x the best would need for the
 * warm-up and every sample (plus a second of slack), never more than the configured timeout
 * and never less than one second.  Before anything succeeded, the configured timeout.  A CPU
 * candidate's deadline is its kernel_timeout_s, counted from the kernel's first call. */
double tt_tune_deadline(const tt_measure_options *m, double best_s);
/* OpenCL targets add this much to a candidate's deadline: the device's driver builds the source
 * inside the measuring child (seconds for a large kernel on some drivers). */
#define TT_TUNE_GPU_BUILD_S 30.0

/* Workloads (tasks) one run tunes together: a large network's distinct fused kernels. */
#define TT_TUNE_MAX_TASKS 256

/* This machine's device fingerprint: CPU model, cores, memory, a hash of the CPU features. */
void tt_host_fingerprint(char *out, size_t n);

#endif
