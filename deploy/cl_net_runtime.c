/* The OpenCL runtime of a network library (tvm-compile --model M.onnx --target opencl).
 *
 * tvm-compile embeds this file's text at the top of each generated NAME.c (cl_net_source.c);
 * the network's tables and its entry points (NAME_init, NAME_run, ...) follow.  Everything here
 * is static, so two networks linked into one application keep their own devices and buffers.
 *
 * What it does (docs/opencl.md, "Networks on the GPU"):
 *   init    opens the ICD loader at run time (an application without OpenCL still loads),
 *           picks a device (TVM_TUNE_OPENCL_DEVICE=P:D, else the first GPU, else the first
 *           device), checks that the network fits it (global memory, the largest allocation,
 *           each kernel's work-group size and local memory), builds the one program that holds
 *           every kernel, uploads the weights once, and maps a pinned host buffer for each
 *           input and output (TVM_TUNE_OPENCL_PINNED=0: none);
 *   run     writes the inputs, enqueues every kernel on one in-order queue with no host round
 *           trip between them (activations stay in device buffers), reads the outputs back;
 *   profile the same, with each kernel's device time read from its profiling event.
 * Every failure leaves a message naming the OpenCL call, its error code and the device
 * (NAME_error()).  Calls are serialised by the network's mutex. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tvm_tune_abi.h's codes */
#define TT_CLNET_OK           0
#define TT_CLNET_NO_DEVICE    (-1)
#define TT_CLNET_BUILD_FAILED (-2)
#define TT_CLNET_RUN_FAILED   (-3)
#define TT_CLNET_DEVICE_LIMIT (-4)
#define TT_CLNET_BAD_ARGUMENT (-5)

/* Where a device buffer's values come from. */
enum {
    TT_CLNET_INPUT,     /* the caller's input `index`, written at each run */
    TT_CLNET_OUTPUT,    /* the caller's output `index`, read back at each run */
    TT_CLNET_WEIGHT,    /* the weight blob at `offset`, uploaded once at init */
    TT_CLNET_ARENA,     /* an intermediate (one per offset of the memory plan) */
    TT_CLNET_WORKSPACE, /* a kernel's own intermediate */
};

typedef struct {
    int kind, index;
    long long offset, bytes;
} tt_clnet_buffer;

typedef struct {
    const char *name;
    int task;
    size_t grid[3], block[3]; /* work-groups, and work-items per group */
} tt_clnet_kernel;

/* A call runs its task's kernels on args[first_arg .. first_arg + nargs): buffer indices. */
typedef struct {
    int first_kernel, nkernels, first_arg, nargs;
} tt_clnet_call;

/* A graph output whose values are elsewhere: buffer `buffer` (-1: the weights at `offset`, -2:
 * the caller's input `offset`), copied after the last call. */
typedef struct {
    int output, buffer;
    long long offset, bytes;
} tt_clnet_copy;

/* The OpenCL functions the runtime calls, resolved from the ICD loader at init. */
/* clang-format off */
#define TT_CL_API(X) \
    X(clGetPlatformIDs) \
    X(clGetDeviceIDs) \
    X(clGetDeviceInfo) \
    X(clCreateContext) \
    X(clCreateCommandQueue) \
    X(clCreateProgramWithSource) \
    X(clBuildProgram) \
    X(clGetProgramBuildInfo) \
    X(clCreateKernel) \
    X(clGetKernelWorkGroupInfo) \
    X(clSetKernelArg) \
    X(clCreateBuffer) \
    X(clEnqueueWriteBuffer) \
    X(clEnqueueReadBuffer) \
    X(clEnqueueMapBuffer) \
    X(clEnqueueUnmapMemObject) \
    X(clEnqueueNDRangeKernel) \
    X(clGetEventProfilingInfo) \
    X(clReleaseEvent) \
    X(clFinish) \
    X(clReleaseMemObject) \
    X(clReleaseKernel) \
    X(clReleaseProgram) \
    X(clReleaseCommandQueue) \
    X(clReleaseContext)
/* clang-format on */

typedef struct {
    /* the network, from the generated tables */
    const char *name, *source;
    const unsigned char *weights;
    int nbuffers, nkernels, ncalls, ninputs, noutputs, ncopies;
    const tt_clnet_buffer *buffers;
    const tt_clnet_kernel *kernels;
    const tt_clnet_call *calls;
    const int *args;
    const tt_clnet_copy *copies;
    const char *const *task_labels;
    /* its state on the device */
    pthread_mutex_t mu;
    int ready;
    void *lib;
#define TT_CL_FIELD(n) __typeof__(&n) n;
    TT_CL_API(TT_CL_FIELD)
#undef TT_CL_FIELD
    cl_device_id dev;
    char device_name[256];
    cl_context ctx;
    cl_command_queue queue;
    cl_program prog;
    cl_kernel *k;
    cl_mem *mem;
    /* pinned host copies of the inputs and outputs (tt_clnet_pin), mapped once; NULL where
     * a buffer is not one, or with TVM_TUNE_OPENCL_PINNED=0 */
    cl_mem *pinned;
    void **pinned_at;
    cl_event *events;
    char error[4096];
} tt_clnet;

static const char *tt_cl_code_name(cl_int e)
{
    switch (e) {
#define TT_CL_CODE(c)                                                                              \
    case c: return #c;
        TT_CL_CODE(CL_DEVICE_NOT_FOUND)
        TT_CL_CODE(CL_DEVICE_NOT_AVAILABLE)
        TT_CL_CODE(CL_COMPILER_NOT_AVAILABLE)
        TT_CL_CODE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        TT_CL_CODE(CL_OUT_OF_RESOURCES)
        TT_CL_CODE(CL_OUT_OF_HOST_MEMORY)
        TT_CL_CODE(CL_PROFILING_INFO_NOT_AVAILABLE)
        TT_CL_CODE(CL_BUILD_PROGRAM_FAILURE)
        TT_CL_CODE(CL_INVALID_VALUE)
        TT_CL_CODE(CL_INVALID_PLATFORM)
        TT_CL_CODE(CL_INVALID_DEVICE)
        TT_CL_CODE(CL_INVALID_CONTEXT)
        TT_CL_CODE(CL_INVALID_COMMAND_QUEUE)
        TT_CL_CODE(CL_INVALID_MEM_OBJECT)
        TT_CL_CODE(CL_INVALID_BINARY)
        TT_CL_CODE(CL_INVALID_BUILD_OPTIONS)
        TT_CL_CODE(CL_INVALID_PROGRAM)
        TT_CL_CODE(CL_INVALID_PROGRAM_EXECUTABLE)
        TT_CL_CODE(CL_INVALID_KERNEL_NAME)
        TT_CL_CODE(CL_INVALID_KERNEL)
        TT_CL_CODE(CL_INVALID_ARG_INDEX)
        TT_CL_CODE(CL_INVALID_ARG_VALUE)
        TT_CL_CODE(CL_INVALID_ARG_SIZE)
        TT_CL_CODE(CL_INVALID_KERNEL_ARGS)
        TT_CL_CODE(CL_INVALID_WORK_DIMENSION)
        TT_CL_CODE(CL_INVALID_WORK_GROUP_SIZE)
        TT_CL_CODE(CL_INVALID_WORK_ITEM_SIZE)
        TT_CL_CODE(CL_INVALID_GLOBAL_OFFSET)
        TT_CL_CODE(CL_INVALID_EVENT)
        TT_CL_CODE(CL_INVALID_OPERATION)
        TT_CL_CODE(CL_INVALID_BUFFER_SIZE)
        TT_CL_CODE(CL_INVALID_GLOBAL_WORK_SIZE)
#undef TT_CL_CODE
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an OpenCL error";
    }
}

static void tt_clnet_fail(tt_clnet *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tt_clnet_fail(tt_clnet *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->error, sizeof(n->error), fmt, ap);
    va_end(ap);
}

/* "clCreateBuffer failed: CL_OUT_OF_RESOURCES (-5) on device 'X' (what)" and code `rc`. */
static int tt_clnet_call_failed(tt_clnet *n, int rc, const char *call, cl_int e, const char *what)
{
    tt_clnet_fail(n, "%s: %s: %s (%d) on device '%s'%s%s", n->name, call, tt_cl_code_name(e),
                  (int)e, n->device_name[0] ? n->device_name : "(none yet)", what[0] ? ", " : "",
                  what);
    return rc;
}

/* "12.3 MiB", "4.0 KiB" into buf */
static const char *tt_clnet_size(char buf[32], long long bytes)
{
    if (bytes >= 1048576)
        snprintf(buf, 32, "%.1f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, 32, "%.1f KiB", (double)bytes / 1024.0);
    return buf;
}

static int tt_clnet_open_loader(tt_clnet *n)
{
    n->lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib)
        n->lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        tt_clnet_fail(n, "%s: no OpenCL ICD loader (libOpenCL.so.1): %s", n->name, dlerror());
        return TT_CLNET_NO_DEVICE;
    }
#define TT_CL_RESOLVE(f)                                                                           \
    if (!(*(void **)&n->f = dlsym(n->lib, #f))) {                                                  \
        tt_clnet_fail(n, "%s: the OpenCL ICD loader has no %s", n->name, #f);                      \
        return TT_CLNET_NO_DEVICE;                                                                 \
    }
    TT_CL_API(TT_CL_RESOLVE)
#undef TT_CL_RESOLVE
    return TT_CLNET_OK;
}

/* TVM_TUNE_OPENCL_DEVICE=P:D, else the first GPU, else the first device of any kind. */
static int tt_clnet_pick(tt_clnet *n)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_int e = n->clGetPlatformIDs(16, plats, &np);
    if (e != CL_SUCCESS || np == 0) {
        const char *v = getenv("OCL_ICD_VENDORS");
        tt_clnet_fail(n,
                      "%s: no OpenCL platform: the ICD loader found no driver (clGetPlatformIDs: "
                      "%s (%d); drivers are registered by .icd files in %s)",
                      n->name, e == CL_SUCCESS ? "0 platforms" : tt_cl_code_name(e), (int)e,
                      v && v[0] ? v : "/etc/OpenCL/vendors");
        return TT_CLNET_NO_DEVICE;
    }
    const char *want = getenv("TVM_TUNE_OPENCL_DEVICE");
    int wp = -1, wd = -1, found = 0;
    if (want && want[0] && sscanf(want, "%d:%d", &wp, &wd) != 2) {
        tt_clnet_fail(n, "%s: TVM_TUNE_OPENCL_DEVICE='%s' is not PLATFORM:DEVICE (0:0)", n->name,
                      want);
        return TT_CLNET_NO_DEVICE;
    }
    for (int pass = 0; pass < 2 && !found; pass++)
        for (cl_uint p = 0; p < np && p < 16 && !found; p++) {
            cl_device_id devs[16];
            cl_uint nd = 0;
            if (n->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS)
                continue;
            for (cl_uint d = 0; d < nd && d < 16 && !found; d++) {
                cl_device_type t = 0;
                n->clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof(t), &t, NULL);
                if (wp >= 0 ? ((int)p == wp && (int)d == wd)
                            : (pass == 1 || (t & CL_DEVICE_TYPE_GPU))) {
                    n->dev = devs[d];
                    found = 1;
                }
            }
        }
    if (!found) {
        tt_clnet_fail(n, "%s: no OpenCL device %s among %u platform(s)", n->name,
                      want && want[0] ? want : "of any kind", (unsigned)np);
        return TT_CLNET_NO_DEVICE;
    }
    n->clGetDeviceInfo(n->dev, CL_DEVICE_NAME, sizeof(n->device_name) - 1, n->device_name, NULL);
    return TT_CLNET_OK;
}

/* The network against the device's memory, before anything is allocated.  TVM_TUNE_OPENCL_MEMORY
 * (bytes, or with a K, M or G suffix) caps what the library may use, for a shared device. */
static int tt_clnet_check_memory(tt_clnet *n)
{
    cl_ulong global = 0, max_alloc = 0;
    n->clGetDeviceInfo(n->dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(global), &global, NULL);
    n->clGetDeviceInfo(n->dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc, NULL);
    const char *cap = getenv("TVM_TUNE_OPENCL_MEMORY");
    const char *whose = "has";
    if (cap && cap[0]) {
        char *end;
        double v = strtod(cap, &end);
        double scale = *end == 'K' || *end == 'k'   ? 1024.0
                       : *end == 'M' || *end == 'm' ? 1048576.0
                       : *end == 'G' || *end == 'g' ? 1073741824.0
                                                    : 1.0;
        if (end == cap || v <= 0) {
            tt_clnet_fail(n, "%s: TVM_TUNE_OPENCL_MEMORY='%s' is not a size (bytes, or 512M, 2G)",
                          n->name, cap);
            return TT_CLNET_BAD_ARGUMENT;
        }
        if (v * scale < (double)global) {
            global = (cl_ulong)(v * scale);
            whose = "may use (TVM_TUNE_OPENCL_MEMORY)";
        }
    }
    long long kinds[5] = {0};
    for (int i = 0; i < n->nbuffers; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        kinds[b->kind] += b->bytes;
        if ((cl_ulong)b->bytes > max_alloc) {
            char s1[32], s2[32];
            tt_clnet_fail(n,
                          "%s: device '%s' allocates at most %s at once "
                          "(CL_DEVICE_MAX_MEM_ALLOC_SIZE); one buffer of the network needs %s",
                          n->name, n->device_name, tt_clnet_size(s1, (long long)max_alloc),
                          tt_clnet_size(s2, b->bytes));
            return TT_CLNET_DEVICE_LIMIT;
        }
    }
    long long total = kinds[0] + kinds[1] + kinds[2] + kinds[3] + kinds[4];
    if ((cl_ulong)total > global) {
        char s1[32], s2[32], s3[32], s4[32], s5[32];
        tt_clnet_fail(n,
                      "%s: the network needs %s of device memory (weights %s, activations %s, "
                      "inputs and outputs %s) but device '%s' %s %s",
                      n->name, tt_clnet_size(s1, total), tt_clnet_size(s2, kinds[TT_CLNET_WEIGHT]),
                      tt_clnet_size(s3, kinds[TT_CLNET_ARENA] + kinds[TT_CLNET_WORKSPACE]),
                      tt_clnet_size(s4, kinds[TT_CLNET_INPUT] + kinds[TT_CLNET_OUTPUT]),
                      n->device_name, whose, tt_clnet_size(s5, (long long)global));
        return TT_CLNET_DEVICE_LIMIT;
    }
    return TT_CLNET_OK;
}

static int tt_clnet_build(tt_clnet *n)
{
    cl_int e;
    size_t len = strlen(n->source);
    n->prog = n->clCreateProgramWithSource(n->ctx, 1, &n->source, &len, &e);
    if (!n->prog)
        return tt_clnet_call_failed(n, TT_CLNET_BUILD_FAILED, "clCreateProgramWithSource", e, "");
    e = n->clBuildProgram(n->prog, 1, &n->dev, "-cl-std=CL1.2", NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[2048] = "";
        n->clGetProgramBuildInfo(n->prog, n->dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
        char what[2200];
        snprintf(what, sizeof(what), "the driver's build log: %s", log[0] ? log : "(empty)");
        return tt_clnet_call_failed(n, TT_CLNET_BUILD_FAILED, "clBuildProgram", e, what);
    }
    cl_ulong local = 0;
    n->clGetDeviceInfo(n->dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local), &local, NULL);
    for (int i = 0; i < n->nkernels; i++) {
        const tt_clnet_kernel *kk = &n->kernels[i];
        char what[400];
        snprintf(what, sizeof(what), "kernel %s (task %d, %s)", kk->name, kk->task,
                 n->task_labels[kk->task]);
        if (!(n->k[i] = n->clCreateKernel(n->prog, kk->name, &e)))
            return tt_clnet_call_failed(n, TT_CLNET_BUILD_FAILED, "clCreateKernel", e, what);
        size_t wg = 0;
        cl_ulong kernel_local = 0;
        n->clGetKernelWorkGroupInfo(n->k[i], n->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg,
                                    NULL);
        n->clGetKernelWorkGroupInfo(n->k[i], n->dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(kernel_local),
                                    &kernel_local, NULL);
        size_t threads = kk->block[0] * kk->block[1] * kk->block[2];
        if (wg && threads > wg) {
            tt_clnet_fail(n,
                          "%s: %s runs %zu work-items per group; device '%s' allows %zu for it "
                          "(CL_KERNEL_WORK_GROUP_SIZE): tune on this device, or build for it with "
                          "--target 'opencl -max_num_threads=%zu'",
                          n->name, what, threads, n->device_name, wg, wg);
            return TT_CLNET_DEVICE_LIMIT;
        }
        if (local && kernel_local > local) {
            tt_clnet_fail(n,
                          "%s: %s uses %llu bytes of local memory; device '%s' has %llu "
                          "(CL_DEVICE_LOCAL_MEM_SIZE): tune on this device (records tuned on "
                          "one with more local memory do not fit it)",
                          n->name, what, (unsigned long long)kernel_local, n->device_name,
                          (unsigned long long)local);
            return TT_CLNET_DEVICE_LIMIT;
        }
    }
    return TT_CLNET_OK;
}

static int tt_clnet_alloc(tt_clnet *n)
{
    for (int i = 0; i < n->nbuffers; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        cl_int e;
        int weight = b->kind == TT_CLNET_WEIGHT;
        cl_mem_flags f = weight ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE;
        void *host = weight ? (void *)(n->weights + b->offset) : NULL;
        n->mem[i] = n->clCreateBuffer(n->ctx, f, (size_t)(b->bytes > 0 ? b->bytes : 4), host, &e);
        if (!n->mem[i]) {
            char what[200], sz[32];
            snprintf(what, sizeof(what), "a buffer of %s (%s)", tt_clnet_size(sz, b->bytes),
                     weight                       ? "weights"
                     : b->kind == TT_CLNET_INPUT  ? "an input"
                     : b->kind == TT_CLNET_OUTPUT ? "an output"
                                                  : "activations");
            return tt_clnet_call_failed(n, TT_CLNET_DEVICE_LIMIT, "clCreateBuffer", e, what);
        }
    }
    return TT_CLNET_OK;
}

/* Transfers from pageable memory go through the driver's own staging copy, at a fraction of
 * what the bus carries from pinned memory (NVIDIA's OpenCL guide: map a buffer made with
 * CL_MEM_ALLOC_HOST_PTR and copy from the mapped pointer).  Each input and output gets such a
 * buffer, mapped once for the library's life; a run copies the caller's data through it.
 * TVM_TUNE_OPENCL_PINNED=0 leaves them out (the caller's memory goes to the driver as it is). */
static int tt_clnet_pin(tt_clnet *n)
{
    const char *want = getenv("TVM_TUNE_OPENCL_PINNED");
    if (want && want[0] && strcmp(want, "0") && strcmp(want, "1")) {
        tt_clnet_fail(n, "%s: TVM_TUNE_OPENCL_PINNED='%s' is not 0 or 1", n->name, want);
        return TT_CLNET_BAD_ARGUMENT;
    }
    if (want && !strcmp(want, "0"))
        return TT_CLNET_OK;
    n->pinned = calloc((size_t)n->nbuffers + 1, sizeof(cl_mem));
    n->pinned_at = calloc((size_t)n->nbuffers + 1, sizeof(void *));
    if (!n->pinned || !n->pinned_at) {
        tt_clnet_fail(n, "%s: out of host memory", n->name);
        return TT_CLNET_RUN_FAILED;
    }
    for (int i = 0; i < n->nbuffers; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        if ((b->kind != TT_CLNET_INPUT && b->kind != TT_CLNET_OUTPUT) || b->bytes <= 0)
            continue;
        cl_int e;
        char what[96], sz[32];
        snprintf(what, sizeof(what), "pinned host memory of %s for an %s",
                 tt_clnet_size(sz, b->bytes), b->kind == TT_CLNET_INPUT ? "input" : "output");
        n->pinned[i] = n->clCreateBuffer(n->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                         (size_t)b->bytes, NULL, &e);
        if (!n->pinned[i])
            return tt_clnet_call_failed(n, TT_CLNET_DEVICE_LIMIT, "clCreateBuffer", e, what);
        n->pinned_at[i] =
            n->clEnqueueMapBuffer(n->queue, n->pinned[i], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                  (size_t)b->bytes, 0, NULL, NULL, &e);
        if (!n->pinned_at[i])
            return tt_clnet_call_failed(n, TT_CLNET_DEVICE_LIMIT, "clEnqueueMapBuffer", e, what);
    }
    return TT_CLNET_OK;
}

static void tt_clnet_release_locked(tt_clnet *n)
{
    if (n->pinned)
        for (int i = 0; i < n->nbuffers; i++)
            if (n->pinned[i]) {
                if (n->pinned_at && n->pinned_at[i])
                    n->clEnqueueUnmapMemObject(n->queue, n->pinned[i], n->pinned_at[i], 0, NULL,
                                               NULL);
                n->clReleaseMemObject(n->pinned[i]);
            }
    if (n->pinned && n->queue)
        n->clFinish(n->queue);
    free(n->pinned);
    free(n->pinned_at);
    n->pinned = NULL;
    n->pinned_at = NULL;
    if (n->mem)
        for (int i = 0; i < n->nbuffers; i++)
            if (n->mem[i])
                n->clReleaseMemObject(n->mem[i]);
    if (n->k)
        for (int i = 0; i < n->nkernels; i++)
            if (n->k[i])
                n->clReleaseKernel(n->k[i]);
    if (n->prog)
        n->clReleaseProgram(n->prog);
    if (n->queue)
        n->clReleaseCommandQueue(n->queue);
    if (n->ctx)
        n->clReleaseContext(n->ctx);
    free(n->mem);
    free(n->k);
    free(n->events);
    n->mem = NULL;
    n->k = NULL;
    n->events = NULL;
    n->prog = NULL;
    n->queue = NULL;
    n->ctx = NULL;
    n->ready = 0;
    /* the loader stays open: drivers do not all survive being unloaded */
}

static int tt_clnet_init_locked(tt_clnet *n)
{
    if (n->ready)
        return TT_CLNET_OK;
    n->error[0] = 0;
    int rc = n->lib ? TT_CLNET_OK : tt_clnet_open_loader(n);
    if (!rc)
        rc = tt_clnet_pick(n);
    if (!rc)
        rc = tt_clnet_check_memory(n);
    cl_int e = CL_SUCCESS;
    if (!rc && !(n->ctx = n->clCreateContext(NULL, 1, &n->dev, NULL, NULL, &e)))
        rc = tt_clnet_call_failed(n, TT_CLNET_NO_DEVICE, "clCreateContext", e, "");
    if (!rc && !(n->queue = n->clCreateCommandQueue(n->ctx, n->dev, CL_QUEUE_PROFILING_ENABLE, &e)))
        rc = tt_clnet_call_failed(n, TT_CLNET_NO_DEVICE, "clCreateCommandQueue", e, "");
    if (!rc) {
        n->k = calloc((size_t)n->nkernels + 1, sizeof(cl_kernel));
        n->mem = calloc((size_t)n->nbuffers + 1, sizeof(cl_mem));
        n->events = calloc((size_t)n->nkernels * (size_t)n->ncalls + 1, sizeof(cl_event));
        if (!n->k || !n->mem || !n->events) {
            tt_clnet_fail(n, "%s: out of host memory", n->name);
            rc = TT_CLNET_RUN_FAILED;
        }
    }
    if (!rc)
        rc = tt_clnet_build(n);
    if (!rc)
        rc = tt_clnet_alloc(n);
    if (!rc)
        rc = tt_clnet_pin(n);
    if (!rc && (e = n->clFinish(n->queue)) != CL_SUCCESS)
        rc = tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clFinish", e, "uploading the weights");
    if (rc)
        tt_clnet_release_locked(n);
    else
        n->ready = 1;
    return rc;
}

static int tt_clnet_init(tt_clnet *n)
{
    pthread_mutex_lock(&n->mu);
    int rc = tt_clnet_init_locked(n);
    pthread_mutex_unlock(&n->mu);
    return rc;
}

static void tt_clnet_release(tt_clnet *n)
{
    pthread_mutex_lock(&n->mu);
    if (n->ready || n->ctx)
        tt_clnet_release_locked(n);
    pthread_mutex_unlock(&n->mu);
}

/* One run.  call_s (when not NULL) gets each call's device time in seconds: the sum of its
 * kernels' profiling events, start to end. */
static int tt_clnet_run_locked(tt_clnet *n, const void *const *in, void *const *out, double *call_s)
{
    if (!in || !out) {
        tt_clnet_fail(n, "%s: NULL inputs or outputs", n->name);
        return TT_CLNET_BAD_ARGUMENT;
    }
    for (int i = 0; i < n->ninputs; i++)
        if (!in[i]) {
            tt_clnet_fail(n, "%s: input %d is NULL", n->name, i);
            return TT_CLNET_BAD_ARGUMENT;
        }
    for (int i = 0; i < n->noutputs; i++)
        if (!out[i]) {
            tt_clnet_fail(n, "%s: output %d is NULL", n->name, i);
            return TT_CLNET_BAD_ARGUMENT;
        }
    int rc = tt_clnet_init_locked(n);
    if (rc)
        return rc;
    cl_int e;
    for (int i = 0; i < n->nbuffers; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        if (b->kind != TT_CLNET_INPUT || b->bytes <= 0)
            continue;
        const void *from = in[b->index];
        if (n->pinned_at && n->pinned_at[i]) {
            /* the previous run's write from it has finished: that run ended with clFinish */
            memcpy(n->pinned_at[i], from, (size_t)b->bytes);
            from = n->pinned_at[i];
        }
        if ((e = n->clEnqueueWriteBuffer(n->queue, n->mem[i], CL_FALSE, 0, (size_t)b->bytes, from,
                                         0, NULL, NULL)) != CL_SUCCESS)
            return tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clEnqueueWriteBuffer", e,
                                        "an input");
    }
    int nev = 0;
    for (int c = 0; c < n->ncalls; c++) {
        const tt_clnet_call *call = &n->calls[c];
        for (int j = 0; j < call->nkernels; j++) {
            int ki = call->first_kernel + j;
            const tt_clnet_kernel *kk = &n->kernels[ki];
            char what[400];
            for (int a = 0; a < call->nargs; a++)
                if ((e = n->clSetKernelArg(n->k[ki], (cl_uint)a, sizeof(cl_mem),
                                           &n->mem[n->args[call->first_arg + a]])) != CL_SUCCESS) {
                    snprintf(what, sizeof(what), "call %d, kernel %s, argument %d", c, kk->name, a);
                    for (int v = 0; v < nev; v++)
                        n->clReleaseEvent(n->events[v]);
                    return tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clSetKernelArg", e, what);
                }
            size_t global[3];
            for (int d = 0; d < 3; d++)
                global[d] = kk->grid[d] * kk->block[d];
            e = n->clEnqueueNDRangeKernel(n->queue, n->k[ki], 3, NULL, global, kk->block, 0, NULL,
                                          call_s ? &n->events[nev] : NULL);
            if (e != CL_SUCCESS) {
                snprintf(what, sizeof(what), "call %d, kernel %s (task %d, %s)", c, kk->name,
                         kk->task, n->task_labels[kk->task]);
                for (int v = 0; v < nev; v++)
                    n->clReleaseEvent(n->events[v]);
                return tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clEnqueueNDRangeKernel", e,
                                            what);
            }
            nev += call_s != NULL;
        }
    }
    for (int i = 0; i < n->nbuffers && !rc; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        if (b->kind != TT_CLNET_OUTPUT || b->bytes <= 0)
            continue;
        void *to = n->pinned_at && n->pinned_at[i] ? n->pinned_at[i] : out[b->index];
        if ((e = n->clEnqueueReadBuffer(n->queue, n->mem[i], CL_FALSE, 0, (size_t)b->bytes, to, 0,
                                        NULL, NULL)) != CL_SUCCESS)
            rc =
                tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clEnqueueReadBuffer", e, "an output");
    }
    for (int i = 0; i < n->ncopies && !rc; i++) {
        const tt_clnet_copy *cp = &n->copies[i];
        if (cp->buffer >= 0 && (e = n->clEnqueueReadBuffer(n->queue, n->mem[cp->buffer], CL_FALSE,
                                                           0, (size_t)cp->bytes, out[cp->output], 0,
                                                           NULL, NULL)) != CL_SUCCESS)
            rc = tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clEnqueueReadBuffer", e,
                                      "an output's copy");
    }
    /* a kernel that faults is reported here, at the latest */
    if ((e = n->clFinish(n->queue)) != CL_SUCCESS && !rc)
        rc = tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clFinish", e, "running the network");
    for (int i = 0; i < n->nbuffers && !rc; i++) {
        const tt_clnet_buffer *b = &n->buffers[i];
        if (b->kind == TT_CLNET_OUTPUT && b->bytes > 0 && n->pinned_at && n->pinned_at[i])
            memcpy(out[b->index], n->pinned_at[i], (size_t)b->bytes);
    }
    for (int i = 0; i < n->ncopies && !rc; i++) {
        const tt_clnet_copy *cp = &n->copies[i];
        if (cp->buffer == -1)
            memmove(out[cp->output], n->weights + cp->offset, (size_t)cp->bytes);
        else if (cp->buffer == -2)
            memmove(out[cp->output], in[cp->offset], (size_t)cp->bytes);
    }
    if (call_s) {
        int v = 0;
        for (int c = 0; c < n->ncalls; c++) {
            double s = 0;
            for (int j = 0; j < n->calls[c].nkernels; j++, v++) {
                cl_ulong t0 = 0, t1 = 0;
                if (!rc &&
                    ((e = n->clGetEventProfilingInfo(n->events[v], CL_PROFILING_COMMAND_START,
                                                     sizeof(t0), &t0, NULL)) != CL_SUCCESS ||
                     (e = n->clGetEventProfilingInfo(n->events[v], CL_PROFILING_COMMAND_END,
                                                     sizeof(t1), &t1, NULL)) != CL_SUCCESS))
                    rc = tt_clnet_call_failed(n, TT_CLNET_RUN_FAILED, "clGetEventProfilingInfo", e,
                                              "");
                s += t1 > t0 ? (double)(t1 - t0) * 1e-9 : 0.0;
                n->clReleaseEvent(n->events[v]);
            }
            call_s[c] = s;
        }
    }
    if (rc == TT_CLNET_RUN_FAILED) /* the context may be broken: the next call starts afresh */
        tt_clnet_release_locked(n);
    return rc;
}

static int tt_clnet_run(tt_clnet *n, const void *const *in, void *const *out, double *call_s)
{
    pthread_mutex_lock(&n->mu);
    int rc = tt_clnet_run_locked(n, in, out, call_s);
    pthread_mutex_unlock(&n->mu);
    return rc;
}
