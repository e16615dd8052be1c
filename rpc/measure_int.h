/* Private to rpc/: the measuring child's pieces shared by the CPU path (measure.c) and the
 * OpenCL path (measure_cl.c). */
#ifndef TT_RPC_MEASURE_INT_H
#define TT_RPC_MEASURE_INT_H

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
} tt__child_msg;

void tt__measure_send(int fd, const tt__child_msg *m);
/* Sends error `code` with the text and ends the child. */
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

#endif
