/* The calling convention of the libraries tvm-compile builds (installed as
 * <tvm-tune/tvm_tune_abi.h>; a generated header does not need it, it is self-contained).
 *
 * Every function SYM takes its buffers as pointers, inputs first, outputs last, each a dense
 * row-major array of its element type (float32 -> float, float64 -> double, int32 -> int32_t,
 * int64 -> int64_t, bool -> uint8_t), whatever record it was built from, and returns one of these
 * codes.  Where the record reads a weight packed, the header adds the packed form: SYM_pack_NAME
 * writes the weight in the record's layout and SYM_packed takes it so; those names exist only in
 * such a library and their symbols carry the layout's tag.  The generated header documents each
 * function's shapes and the tuning record its schedule came from (NAME_TVM_RECORD, 0 for the
 * default schedule). */
#ifndef TVM_TUNE_ABI_H
#define TVM_TUNE_ABI_H

#define TVM_TUNE_OK 0
/* OpenCL libraries only: */
#define TVM_TUNE_NO_DEVICE    (-1) /* no OpenCL ICD loader or device (TVM_TUNE_OPENCL_DEVICE=P:D) */
#define TVM_TUNE_BUILD_FAILED (-2) /* the driver could not build the kernels */
#define TVM_TUNE_RUN_FAILED   (-3) /* the device could not allocate or run them */
/* OpenCL networks (tvm-compile --model --target opencl; NAME_error() says what failed): */
/* beyond the device's memory, work-group size or local memory */
#define TVM_TUNE_DEVICE_LIMIT (-4)
#define TVM_TUNE_BAD_ARGUMENT (-5) /* a NULL buffer, a malformed setting */

#endif
