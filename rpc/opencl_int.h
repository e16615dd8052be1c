/* Private to rpc/: the OpenCL entry points, resolved from the ICD loader at run time, and the
 * in-process device list.  Only code that runs in a child process calls these. */
#ifndef TT_RPC_OPENCL_INT_H
#define TT_RPC_OPENCL_INT_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "opencl.h"

#define TT_CL_API(X)                                                                               \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clCreateCommandQueue)                                                                        \
    X(clCreateProgramWithSource)                                                                   \
    X(clCreateProgramWithBinary)                                                                   \
    X(clGetProgramInfo)                                                                            \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clCreateKernel)                                                                              \
    X(clSetKernelArg)                                                                              \
    X(clCreateBuffer)                                                                              \
    X(clEnqueueWriteBuffer)                                                                        \
    X(clEnqueueReadBuffer)                                                                         \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clFinish)                                                                                    \
    X(clWaitForEvents)                                                                             \
    X(clGetEventProfilingInfo)                                                                     \
    X(clReleaseEvent)                                                                              \
    X(clReleaseKernel)                                                                             \
    X(clReleaseProgram)                                                                            \
    X(clReleaseMemObject)                                                                          \
    X(clReleaseCommandQueue)                                                                       \
    X(clReleaseContext)

typedef struct tt_cl_api {
    void *lib;
#define TT_CL_FIELD(name) __typeof__(&name) name;
    TT_CL_API(TT_CL_FIELD)
#undef TT_CL_FIELD
} tt_cl_api;

/* Opens the ICD loader and resolves every entry point; TT_ERR_NOT_FOUND when there is none. */
tt_status tt__cl_open(tt_cl_api *api, tt_errbuf *err);
/* The devices of every platform, in this process.  Returns the count (0 when none). */
int tt__cl_list(const tt_cl_api *api, tt_cl_device_info *out, cl_device_id *ids, int max);
/* OpenCL's name for an error code ("CL_OUT_OF_RESOURCES"). */
const char *tt__cl_error_name(cl_int e);

#endif
