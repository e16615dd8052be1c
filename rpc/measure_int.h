/* Private to rpc/: the measuring child's pieces shared by the CPU path (measure.c) and the
 * OpenCL path (measure_cl.c). */
#ifndef TT_RPC_MEASURE_INT_H
#define TT_RPC_MEASURE_INT_H

#include <setjmp.h>

#include "measure.h"

/* Error codes (the same values as db.h's tt_measure_error; rpc/ does not include db/). */
enum {
    TT__E_INSTANTIATION = 1,
    TT__E_COMPILE_DEVICE = 3,
    TT__E_RUNTIME_DEVICE = 4,
    TT__E_WRONG_ANSWER = 5,
    TT__E_RUN_TIMEOUT = 7,
    TT__E_UNKNOWN = 8
};

/* What the child sends back: a fixed-size message. */
typedef struct tt__child_msg {
    int error_no;
    int ncosts, number;
    double costs[TT_MEASURE_MAX_REPEAT];
    char text[512];
    int context_jobs, build_cached; /* OpenCL: tt_measure_result's fields */
    double llc_share;               /* CPU, network mode: tt_measure_result's field */
} tt__child_msg;

/* Where tt__measure_fail goes after sending, instead of ending the process: the OpenCL worker
 * (measure_cl.c's serve) reports a failed candidate and takes the next one.  NULL: _exit. */
extern jmp_buf *tt__measure_recover;

void tt__measure_send(int fd, const tt__child_msg *m);
/* Sends error `code` with the text and ends the child (see tt__measure_recover). */
void tt__measure_fail(int fd, tt__child_msg *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
/* Compares the outputs (args[ninputs..]) with the expected ones; ends the child with
 * WRONG_ANSWER at the first difference. */
void tt__measure_check(int fd, tt__child_msg *m, void *const *args, const tt_measure_buffer *bufs,
                       int nbufs, int ninputs, const tt_measure_options *o);
/* TVM's time evaluator over run(ctx, number), which returns the seconds of `number` calls (or
 * < 0 after it has reported a failure itself); sends the samples. */
void tt__measure_time(int fd, tt__child_msg *m, const tt_measure_options *o,
                      double (*run)(void *ctx, int number), void *ctx);

/* Evicts a buffer from every cache to memory (TVM's cache_flush_cpu_non_first_arg); a no-op where
 * the ISA has no such instruction (neither x86-64 nor AArch64). */
void tt__measure_flush(const void *p, size_t bytes);
/* The same for part of its cache lines: of each 16 consecutive lines (by address) the first
 * `keep` stay where they are, the others go to memory; keep 0 is tt__measure_flush. */
void tt__measure_flush_part(const void *p, size_t bytes, int keep);

/* The size of this machine's level-`level` data cache (1, 2 or 3), 0 when unknown. */
int64_t tt__measure_cache_bytes(int level);
/* The share from per-byte read times: `cold` after a flush to memory, `warm` read again, `hot`
 * of a buffer that stays in the cache; rounded to a quarter, or -1 when memory is not
 * measurably slower than the cache (no flush to measure against). */
double tt__llc_share_from_times(double cold, double warm, double hot);

/* True if the file at `path` is an OpenCL artifact (codegen/cl_artifact.h). */
bool tt__measure_is_opencl(const char *path);
/* Runs an OpenCL artifact in the child: build, check, time; always ends by sending a result. */
void tt__measure_opencl(int fd, tt__child_msg *m, const char *path, const tt_measure_buffer *bufs,
                        int nbufs, int ninputs, const tt_measure_options *o);

/* The same, in a fresh process image (tvm-measure-cl): a driver must not share a process with
 * another LLVM or inherit a multithreaded parent's state.  Never returns. */
void tt__measure_opencl_exec(int fd, tt__child_msg *m, const char *path,
                             const tt_measure_buffer *bufs, int nbufs, int ninputs,
                             const tt_measure_options *o) __attribute__((noreturn));
/* main() of tvm-measure-cl. */
int tt__measure_cl_main(int argc, char **argv);

/* The job tvm-measure-cl reads: bytes it takes, and writing it to a file or socket (false with
 * errno when a write failed). */
size_t tt__cl_job_size(const tt_measure_buffer *bufs, int nbufs, const tt_measure_options *o);
bool tt__cl_job_write(int fd, const tt_measure_buffer *bufs, int nbufs, int ninputs,
                      const tt_measure_options *o);
/* Execs tvm-measure-cl with argv ($TT_MEASURE_CL, beside this program, ../bin, $PATH); returns
 * only when none could be run. */
void tt__cl_exec_helper(char *const argv[]);

/* A frame on the worker's socket: this header, the artifact's path, then the job. */
#define TT__CL_FRAME_MAGIC 0x464d5454u /* "TTMF" */
typedef struct {
    uint32_t magic, path_len;
    uint64_t job_len;
} tt__cl_frame;

/* Measures an OpenCL artifact in this thread's long-lived worker (measure_cl_worker.c), which
 * keeps one context on the device across candidates.  False when no worker could take it (another
 * thread's measurement holds it, or none would start): the caller measures in a fresh process. */
bool tt__cl_worker_measure(const char *path, const tt_measure_buffer *bufs, int nbufs, int ninputs,
                           const tt_measure_options *o, tt_measure_result *res);

/* Builds an OpenCL artifact (o->build_only) in this thread's long-lived builder, when the thread
 * keeps one (tt_measure_keep_builder).  False when it does not or none would start: the caller
 * builds in a fresh process. */
bool tt__cl_builder_build(const char *path, const tt_measure_options *o, tt_measure_result *res);

/* Fills a result from what a measuring process sent (`got` bytes of m), whether its deadline
 * passed, and its wait status (when it ended). */
void tt__measure_result_from(tt_measure_result *res, const tt__child_msg *m, size_t got,
                             bool timed_out, int status, double timeout_s);

#endif
