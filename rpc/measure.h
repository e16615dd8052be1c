/* Measuring a kernel safely: the sacrificial child process and the timing loop.
 *
 * Used by the local runner (tvm-tune run) and, later, by tvm-rpc-server on devices, so it depends
 * on base/ and codegen's loader only.  The semantics are TVM's time evaluator
 * (../shared/reference/measurement.md §2): one warm-up call, `repeat` samples of `number` calls,
 * `number` grown until a sample lasts `min_repeat_ms`, optional cooldown and cache flush (of every
 * input per sample as TVM, or of the constant inputs per call as a network finds them).
 *
 * A crash, an abort, a hang, a runaway allocation or a wrong answer is a result with TVM's error
 * code, never the caller's problem.  Thread-safe (each call forks its own child).
 *
 * The calling process must not have run OpenMP (libgomp, e.g. inside XGBoost): its thread pool
 * does not survive fork() and the child's first parallel loop would hang (RUN_TIMEOUT). */
#ifndef TT_RPC_MEASURE_H
#define TT_RPC_MEASURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

typedef enum { TT_ELEM_F32, TT_ELEM_F64, TT_ELEM_I32, TT_ELEM_I64, TT_ELEM_U8 } tt_elem;

/* Bytes of one element. */
size_t tt_elem_bytes(tt_elem e);

/* One kernel parameter.  Inputs carry `data` (copied into the child); outputs may carry
 * `expect`, the reference result the first call must reproduce. */
typedef struct tt_measure_buffer {
    tt_elem elem;
    int64_t count;      /* elements */
    const void *data;   /* inputs: initial contents (NULL: zeros) */
    const void *expect; /* outputs: reference (NULL: not checked) */
    /* data is a temporary copy (a weight packed for one candidate): a farm session must not
     * recognise it by its address, which a later copy may reuse with other contents */
    bool transient;
    /* a constant input (a layer's weights, TT_OP_ATTR_CONSTANT): what TT_CACHE_FLUSH_CONSTANTS
     * evicts */
    bool constant;
} tt_measure_buffer;

/* What is evicted from the caches before the kernel is timed. */
typedef enum tt_cache_flush {
    TT_CACHE_FLUSH_OFF = 0,
    /* TVM's enable_cpu_cache_flush: every input before each sample (meant for number = 1) */
    TT_CACHE_FLUSH_INPUTS,
    /* The constant inputs before every call, outside the timed region (each call timed alone and
     * summed, so number and min_repeat_ms keep their meaning).  In a network a layer's weights
     * were last read a whole inference ago and the other layers have evicted them since, while
     * its activations were just written by the layer before: timed warm, a layer looks 1.2-2x
     * faster than it runs in the network (docs/models.md). */
    TT_CACHE_FLUSH_CONSTANTS,
    /* As constants, and before every call each activation (a non-constant input) is written
     * again by the kernel's threads, thread t its t-th contiguous share, as a parallel layer
     * before leaves it, and the outputs are evicted, as the arena's memory a layer writes was
     * last used layers ago.  A kernel that reads its input in another split than its producer wrote
     * it pays for the lines it fetches from another core's cache, as in the network; timed with
     * activations hot in its own cores' caches, a serial depthwise convolution measured 5.6 us
     * and ran 31 us in MobileNet-V2 (docs/models.md, "Activations between cores"). */
    TT_CACHE_FLUSH_NETWORK,
} tt_cache_flush;

typedef struct tt_measure_options {
    int number;           /* calls per sample (grown by min_repeat_ms), default 1 */
    int repeat;           /* samples, default 3 */
    double min_repeat_ms; /* 0 = off */
    /* Ours, not TVM's: stop taking samples once they add up to this (ms), when at least
     * TT_MEASURE_MIN_SAMPLES are taken; 0 = off (all `repeat`).  With single-call samples it
     * bounds a slow kernel's measurement: 64 samples of a 1 ms kernel, 5 of a 50 ms one. */
    double repeat_budget_ms;
    double cooldown_ms;         /* sleep between samples, 0 = none */
    tt_cache_flush cache_flush; /* default off */
    double timeout_s;           /* whole child (load, check, timing), default 10 */
    /* TT_CACHE_FLUSH_NETWORK: the bytes one run of the whole network touches (its weights and
     * its activation arena), 0 = unknown.  The share of them that stays in the measuring
     * machine's last-level cache from one run to the next (tt_measure_network_llc_share) is the
     * share of a layer's weights and outputs that it finds there: before each timed call the
     * constants and outputs leave the cores' own caches (each of the kernel's threads reads a
     * buffer larger than its core's L1 and L2) and the rest of their lines is flushed to memory.
     * The result says which share was kept (llc_share). */
    int64_t network_bytes;
    /* CPU kernels: the kernel's own calls (warm-up, check, samples), counted from its first
     * call, so that a loaded machine slowing the child's start (fork, dlopen, copies) is not
     * taken for a slow kernel; 0 = only timeout_s.  The tuner sets it from the best time. */
    double kernel_timeout_s;
    int64_t memory_limit; /* bytes of address space the kernel may add to the measuring child's
                             own (RLIMIT_AS; CPU kernels), 0 = unlimited */
    double rtol, atol;    /* output check |got - want| <= atol + rtol * max|want| (normwise),
                             defaults 1e-4 and 1e-5 */
    /* OpenCL artifacts: which device (opencl.h's tt_cl_select: "P:D", an index or a name;
     * NULL = the first GPU, else the first device). */
    const char *opencl_device;
    /* OpenCL artifacts: only build the program with the device's driver and run nothing (no
     * buffers needed): error 0 with no costs, or COMPILE_DEVICE with the build log.  Drivers
     * cache what they built by source (pocl's kernel cache, NVIDIA's compute cache), so builds
     * done in parallel before the measurements, which run one at a time, take the driver's
     * compiler off the measuring path (TVM's builder and runner). */
    bool build_only;
} tt_measure_options;

#define TT_MEASURE_MAX_REPEAT  64
#define TT_MEASURE_MIN_SAMPLES 5 /* taken whatever repeat_budget_ms says (if repeat allows) */

typedef struct tt_measure_result {
    int error_no; /* 0..8 (db.h's tt_measure_error) */
    char error_text[512];
    int ncosts;
    double costs[TT_MEASURE_MAX_REPEAT]; /* seconds per call */
    int number;                          /* effective number of calls per sample */
    double run_s;                        /* wall time of the child */
    /* OpenCL: the candidates measured in the device context that measured this one, this one
     * included (1: a fresh context), and whether the driver's build came from the binary
     * cache (rpc/cl_cache_int.h) */
    int context_jobs;
    bool build_cached;
    /* TT_CACHE_FLUSH_NETWORK on a CPU: the share of the weights' and outputs' cache lines that
     * were evicted to the last-level cache only, the rest to memory (0, 0.25, 0.5, 0.75 or 1) */
    double llc_share;
} tt_measure_result;

/* Loads `entry` from `so_path` in a child process, checks the outputs of the first call against
 * the expected ones and times it.  `so_path` may also be an OpenCL artifact
 * (codegen/cl_artifact.h; `entry` is then unused): the child builds it with the device's driver
 * (a build error is COMPILE_DEVICE with the build log, a launch the device refuses is
 * INSTANTIATION), runs its kernels and times them with profiling events.  Returns TT_OK whenever a
 * result was produced (the result's error_no says how the candidate fared); other statuses mean the
 * measurement itself could not be made (fork failed, out of memory). */
tt_status tt_measure_run(const char *so_path, const char *entry, const tt_measure_buffer *bufs,
                         int nbufs, int ninputs, const tt_measure_options *opt,
                         tt_measure_result *res, tt_errbuf *err);

/* OpenCL builds (tt_measure_options.build_only) from the calling thread go to a builder process
 * of its own that keeps the device's context from one build to the next (a fresh process per
 * build cost NVIDIA's driver seconds in its start and context alone), until
 * tt_measure_release_builder, which the thread must call before it ends.  For threads that live
 * as long as their work, such as the tuner's compile threads; a thread that never calls it builds
 * each artifact in a fresh process.  TT_CL_WORKER=0 turns builders off with the worker. */
void tt_measure_keep_builder(void);
void tt_measure_release_builder(void);

/* The last-level cache of this machine's cores (sysconf, else sysfs), 0 when unknown. */
int64_t tt_measure_llc_bytes(void);
/* The share of a network's working set (`network_bytes` touched per run) that this machine's
 * last-level cache keeps from one run to the next, in quarters: 0 (every run reads it from
 * memory) to 1 (it stays).  Measured once per size and process (rpc/llc_probe.c): a buffer of that
 * size read again, against reading it from memory and against a buffer that surely stays; 0 when
 * either size is unknown or the network exceeds the LLC.  TVM_TUNE_LLC_MIB=N instead says that a
 * network of at most N MiB stays (1) and a larger one does not (0); TVM_TUNE_LLC_SHARE=S (0 to
 * 1) says the share of every network. */
double tt_measure_network_llc_share(int64_t network_bytes);
/* The name under which records timed with that share are stored ("flush" of a record's extra):
 * "network" for 0, "network-llc" for 1, "network-llc-25", "-50" or "-75" between. */
const char *tt_measure_network_flush_name(double llc_share);

#endif
