/* OpenCL artifacts: what the host's OpenCL code generator sends a device.
 *
 * One text file that is at once valid OpenCL C and self-describing: its first two lines are a
 * comment holding the launch metadata as JSON, the rest is the kernels' source, which the
 * device's driver builds.  The host compiles nothing.
 *
 *     /\* tvm-tune opencl artifact 1
 *     {"kernels": [{"name": "k_C_0", "grid": [64, 1, 1], "block": [16, 1, 1]}],
 *      "params": [{"dtype": "float32", "count": 4096}, ...],
 *      "workspace": [{"dtype": "float32", "count": 256}]}
 *     *\/
 *     __kernel void k_C_0(__global float *restrict A_1, ...) { ... }
 *
 * Every kernel takes the parameter buffers (inputs, then outputs, as in codegen.h), then the
 * workspace buffers (intermediates the host allocates), all __global.  The kernels run in order;
 * `grid` counts work-groups and `block` work-items per group on each axis (TVM's blockIdx and
 * threadIdx), so the NDRange's global size is grid x block.
 *
 * Part of the device-side loader library: no LLVM, no schedule types. */
#ifndef TT_CODEGEN_CL_ARTIFACT_H
#define TT_CODEGEN_CL_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_CL_ARTIFACT_MAGIC "/* tvm-tune opencl artifact 1\n"
#define TT_CL_MAX_KERNELS    16
#define TT_CL_MAX_BUFFERS    64

typedef enum { TT_CL_F32, TT_CL_F64, TT_CL_I32, TT_CL_I64, TT_CL_U8 } tt_cl_elem;

typedef struct tt_cl_buffer {
    tt_cl_elem elem;
    int64_t count; /* elements */
} tt_cl_buffer;

typedef struct tt_cl_kernel {
    char name[64];
    int64_t grid[3];  /* work-groups per axis */
    int64_t block[3]; /* work-items per group per axis */
} tt_cl_kernel;

typedef struct tt_cl_artifact {
    int nkernels;
    tt_cl_kernel kernels[TT_CL_MAX_KERNELS];
    int nparams, nworkspace;
    tt_cl_buffer params[TT_CL_MAX_BUFFERS];
    tt_cl_buffer workspace[TT_CL_MAX_BUFFERS];
    int64_t shared_bytes; /* largest __local use of one kernel (informative) */
} tt_cl_artifact;

/* True if `text` starts like an OpenCL artifact (cheap; no parsing). */
bool tt_cl_artifact_is(const char *text, size_t len);

/* Reads the metadata of an artifact.  TT_ERR_PARSE says what was malformed (a missing field, a
 * non-positive extent, too many kernels or buffers). */
tt_status tt_cl_artifact_parse(const char *text, size_t len, tt_cl_artifact *out, tt_errbuf *err);

/* The metadata comment for `a` (ends with a newline); caller frees.  NULL when out of memory. */
char *tt_cl_artifact_header(const tt_cl_artifact *a);

/* Element names as in the metadata: "float32", "float64", "int32", "int64", "uint8". */
const char *tt_cl_elem_name(tt_cl_elem e);
size_t tt_cl_elem_bytes(tt_cl_elem e);

#endif
