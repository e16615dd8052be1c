/* Measuring an OpenCL artifact in tvm-measure-cl, a process of its own.  A kernel that wedges the
 * driver or corrupts the context dies with that process (the recovery TVM's Android RPC app
 * lacked).  The process either measures one candidate and exits (`tvm-measure-cl FD JOB PATH`, the
 * measuring child's exec) or serves one candidate after another in one context
 * (`tvm-measure-cl --serve FD`, measure_cl_worker.c): creating a context and building the program
 * cost NVIDIA's driver 1.8-4.2 s a candidate, the kernels a few milliseconds. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../base/io.h"
#include "../codegen/cl_artifact.h"
#include "cl_cache_int.h"
#include "measure_int.h"
#include "opencl_int.h"

#define BUILD_OPTIONS "-cl-std=CL1.2"

bool tt__measure_is_opencl(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char head[64];
    size_t n = fread(head, 1, sizeof(head), f);
    fclose(f);
    return tt_cl_artifact_is(head, n);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static tt_cl_elem elem_to_cl(tt_elem e)
{
    switch (e) {
    case TT_ELEM_F32: return TT_CL_F32;
    case TT_ELEM_F64: return TT_CL_F64;
    case TT_ELEM_I32: return TT_CL_I32;
    case TT_ELEM_I64: return TT_CL_I64;
    default: return TT_CL_U8;
    }
}

/* ---- the device: one context and queue for the life of the process ---- */

typedef struct {
    bool open;
    tt_cl_api api;
    tt_cl_device_info info;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    int jobs; /* candidates measured in this context, the current one included */
} cl_device;

static cl_device D;

static void device_open(int fd, tt__child_msg *m, const char *spec)
{
    if (D.open)
        return;
    tt_errbuf err;
    if (tt__cl_open(&D.api, &err))
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "%s", err.msg);
    static tt_cl_device_info devs[TT_CL_MAX_DEVICES];
    cl_device_id ids[TT_CL_MAX_DEVICES];
    int ndev = tt__cl_list(&D.api, devs, ids, TT_CL_MAX_DEVICES);
    int which = tt_cl_select(devs, ndev, spec, &err);
    if (which < 0)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "%s", err.msg);
    D.info = devs[which];
    D.dev = ids[which];
    cl_int e;
    D.ctx = D.api.clCreateContext(NULL, 1, &D.dev, NULL, NULL, &e);
    if (!D.ctx)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "clCreateContext on %s: %s", D.info.name,
                         tt__cl_error_name(e));
    D.q = D.api.clCreateCommandQueue(D.ctx, D.dev, CL_QUEUE_PROFILING_ENABLE, &e);
    if (!D.q)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "clCreateCommandQueue: %s",
                         tt__cl_error_name(e));
    D.open = true;
}

/* ---- one candidate's resources, released after it whether it passed or failed ---- */

typedef struct {
    char *src;
    cl_program prog;
    int nkernels, nmems, nouts;
    cl_kernel kernels[TT_CL_MAX_KERNELS];
    cl_mem mems[2 * TT_CL_MAX_BUFFERS];
    void *outs[TT_CL_MAX_BUFFERS];
} cl_job;

static cl_job J;

static void job_release(void)
{
    for (int k = 0; k < J.nkernels; k++)
        if (J.kernels[k])
            D.api.clReleaseKernel(J.kernels[k]);
    for (int i = 0; i < J.nmems; i++)
        if (J.mems[i])
            D.api.clReleaseMemObject(J.mems[i]);
    for (int i = 0; i < J.nouts; i++)
        free(J.outs[i]);
    if (J.prog)
        D.api.clReleaseProgram(J.prog);
    free(J.src);
    memset(&J, 0, sizeof(J));
}

/* Builds J.src for the device: from the binary cache when it holds this source (*cached), else
 * from source, storing the driver's binary for the next time. */
static void build(int fd, tt__child_msg *m, size_t len, bool *cached)
{
    const tt_cl_api *api = &D.api;
    tt__cl_cache cache;
    tt__cl_cache_open(&cache, &D.info, BUILD_OPTIONS, J.src, len);
    size_t nbin = 0;
    unsigned char *bin = tt__cl_cache_get(&cache, J.src, len, &nbin);
    cl_int e;
    *cached = false;
    if (bin) {
        const unsigned char *bins[1] = {bin};
        cl_int status;
        J.prog = api->clCreateProgramWithBinary(D.ctx, 1, &D.dev, &nbin, bins, &status, &e);
        free(bin);
        if (J.prog &&
            api->clBuildProgram(J.prog, 1, &D.dev, BUILD_OPTIONS, NULL, NULL) == CL_SUCCESS) {
            *cached = true;
            return;
        }
        if (J.prog) /* a binary this driver no longer takes: build again, replace it */
            api->clReleaseProgram(J.prog);
        J.prog = NULL;
    }
    const char *srcs[1] = {J.src};
    J.prog = api->clCreateProgramWithSource(D.ctx, 1, srcs, &len, &e);
    if (!J.prog)
        tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "clCreateProgramWithSource: %s",
                         tt__cl_error_name(e));
    e = api->clBuildProgram(J.prog, 1, &D.dev, BUILD_OPTIONS, NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[400] = {0};
        api->clGetProgramBuildInfo(J.prog, D.dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
        tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "OpenCL build failed on %s (%s): %s",
                         D.info.name, tt__cl_error_name(e), log);
    }
    if (!cache.on)
        return;
    size_t size = 0;
    if (api->clGetProgramInfo(J.prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, NULL) !=
            CL_SUCCESS ||
        size == 0 || !(bin = malloc(size)))
        return;
    unsigned char *bins[1] = {bin};
    if (api->clGetProgramInfo(J.prog, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) == CL_SUCCESS)
        tt__cl_cache_put(&cache, J.src, len, bin, size);
    free(bin);
}

/* Launch errors that mean the kernel does not fit the device: the schedule's fault. */
static bool is_fit_error(cl_int e)
{
    return e == CL_INVALID_WORK_GROUP_SIZE || e == CL_INVALID_WORK_ITEM_SIZE ||
           e == CL_OUT_OF_RESOURCES || e == CL_INVALID_GLOBAL_WORK_SIZE;
}

typedef struct {
    const tt_cl_artifact *art;
    int fd;
    tt__child_msg *m;
} cl_run;

/* Enqueues every kernel `number` times; returns the device time from the first kernel's start to
 * the last one's end, in seconds. */
static double run_cl(void *vctx, int number)
{
    cl_run *c = vctx;
    const tt_cl_api *api = &D.api;
    cl_event first = NULL, last = NULL;
    for (int n = 0; n < number; n++)
        for (int k = 0; k < c->art->nkernels; k++) {
            const tt_cl_kernel *kk = &c->art->kernels[k];
            size_t global[3], local[3];
            for (int d = 0; d < 3; d++) {
                local[d] = (size_t)kk->block[d];
                global[d] = (size_t)(kk->grid[d] * kk->block[d]);
            }
            bool is_first = n == 0 && k == 0,
                 is_last = n == number - 1 && k == c->art->nkernels - 1;
            cl_event ev = NULL;
            cl_int e = api->clEnqueueNDRangeKernel(D.q, J.kernels[k], 3, NULL, global, local, 0,
                                                   NULL, is_first || is_last ? &ev : NULL);
            if (e != CL_SUCCESS)
                tt__measure_fail(
                    c->fd, c->m, is_fit_error(e) ? TT__E_INSTANTIATION : TT__E_RUNTIME_DEVICE,
                    "launching kernel %s (grid %lldx%lldx%lld, block %lldx%lldx%lld): "
                    "%s",
                    kk->name, (long long)kk->grid[0], (long long)kk->grid[1],
                    (long long)kk->grid[2], (long long)kk->block[0], (long long)kk->block[1],
                    (long long)kk->block[2], tt__cl_error_name(e));
            if (is_first)
                first = ev;
            if (is_last)
                last = ev ? ev : first;
        }
    cl_int e = api->clFinish(D.q);
    if (e != CL_SUCCESS)
        tt__measure_fail(c->fd, c->m, is_fit_error(e) ? TT__E_INSTANTIATION : TT__E_RUNTIME_DEVICE,
                         "running the kernels: %s", tt__cl_error_name(e));
    cl_ulong start = 0, end = 0;
    if (api->clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof(start), &start,
                                     NULL) != CL_SUCCESS ||
        api->clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof(end), &end, NULL) !=
            CL_SUCCESS)
        tt__measure_fail(c->fd, c->m, TT__E_RUNTIME_DEVICE, "no profiling times from the device");
    api->clReleaseEvent(first);
    if (last != first)
        api->clReleaseEvent(last);
    return end > start ? (double)(end - start) * 1e-9 : 0.0;
}

/* Builds, checks and times the artifact at `path`; always ends by sending a result (or by
 * tt__measure_fail, which sends one). */
static void measure_artifact(int fd, tt__child_msg *m, const char *path,
                             const tt_measure_buffer *bufs, int nbufs, int ninputs,
                             const tt_measure_options *o)
{
    size_t len = 0;
    if (!(J.src = read_file(path, &len)))
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "cannot read the artifact %s", path);
    static tt_cl_artifact art;
    tt_errbuf err;
    if (tt_cl_artifact_parse(J.src, len, &art, &err))
        tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "%s", err.msg);
    if (o->build_only)
        nbufs = art.nparams; /* nothing is run: no buffers to match */
    else if (art.nparams != nbufs)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                         "the artifact takes %d buffers, the workload has %d", art.nparams, nbufs);
    for (int i = 0; i < nbufs && !o->build_only; i++)
        if (art.params[i].count != bufs[i].count || art.params[i].elem != elem_to_cl(bufs[i].elem))
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                             "buffer %d: the artifact wants %lld x %s, the workload has %lld x %s",
                             i, (long long)art.params[i].count, tt_cl_elem_name(art.params[i].elem),
                             (long long)bufs[i].count, tt_cl_elem_name(elem_to_cl(bufs[i].elem)));
    device_open(fd, m, o->opencl_device);
    m->context_jobs = ++D.jobs;
    const tt_cl_api *api = &D.api;
    bool cached;
    build(fd, m, len, &cached);
    m->build_cached = cached;
    cl_int e;
    if (o->build_only) {
        for (int k = 0; k < art.nkernels; k++) {
            cl_kernel kk = api->clCreateKernel(J.prog, art.kernels[k].name, &e);
            if (!kk)
                tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "kernel %s: %s", art.kernels[k].name,
                                 tt__cl_error_name(e));
            api->clReleaseKernel(kk);
        }
        tt__measure_send(fd, m); /* built: error 0, no costs */
        return;
    }
    cl_run run = {&art, fd, m};
    int nall = nbufs + art.nworkspace;
    for (int i = 0; i < nall; i++) {
        const tt_cl_buffer *b = i < nbufs ? &art.params[i] : &art.workspace[i - nbufs];
        size_t bytes = (size_t)b->count * tt_cl_elem_bytes(b->elem);
        if (bytes == 0)
            bytes = 64;
        J.mems[J.nmems++] = api->clCreateBuffer(D.ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
        if (!J.mems[i])
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                             "cannot allocate %zu bytes on %s for buffer %d: %s", bytes,
                             D.info.name, i, tt__cl_error_name(e));
        /* Inputs get their data; outputs and workspace start as NaN, so a kernel that leaves
         * something unwritten shows up as a wrong answer. */
        if (i < ninputs && bufs[i].data) {
            e = api->clEnqueueWriteBuffer(D.q, J.mems[i], CL_TRUE, 0, bytes, bufs[i].data, 0, NULL,
                                          NULL);
        } else {
            void *init = malloc(bytes);
            if (!init)
                tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "out of memory");
            memset(init, i < ninputs ? 0 : 0xff, bytes);
            e = api->clEnqueueWriteBuffer(D.q, J.mems[i], CL_TRUE, 0, bytes, init, 0, NULL, NULL);
            free(init);
        }
        if (e != CL_SUCCESS)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "writing buffer %d: %s", i,
                             tt__cl_error_name(e));
    }
    for (int k = 0; k < art.nkernels; k++) {
        J.kernels[J.nkernels++] = api->clCreateKernel(J.prog, art.kernels[k].name, &e);
        if (!J.kernels[k])
            tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "kernel %s: %s", art.kernels[k].name,
                             tt__cl_error_name(e));
        for (int i = 0; i < nall; i++)
            if ((e = api->clSetKernelArg(J.kernels[k], (cl_uint)i, sizeof(cl_mem), &J.mems[i])) !=
                CL_SUCCESS)
                tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "kernel %s argument %d: %s",
                                 art.kernels[k].name, i, tt__cl_error_name(e));
    }
    /* Warm-up, which is also the call whose outputs are checked. */
    run_cl(&run, 1);
    J.nouts = nbufs;
    for (int i = ninputs; i < nbufs; i++) {
        if (!bufs[i].expect)
            continue;
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        if (!(J.outs[i] = malloc(bytes ? bytes : 1)))
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "out of memory");
        if ((e = api->clEnqueueReadBuffer(D.q, J.mems[i], CL_TRUE, 0, bytes, J.outs[i], 0, NULL,
                                          NULL)) != CL_SUCCESS)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "reading output %d: %s", i - ninputs,
                             tt__cl_error_name(e));
    }
    tt__measure_check(fd, m, J.outs, bufs, nbufs, ninputs, o);
    tt__measure_time(fd, m, o, run_cl, &run);
}

/* ---- the job: what the measuring child hands tvm-measure-cl ----
 *
 * OpenCL drivers bring their own LLVM (pocl links LLVM 15, tvm-tune LLVM 14): loaded into a
 * process that already has another LLVM, or into the fork of a multithreaded one, a driver
 * crashes.  So the driver is only ever loaded by tvm-measure-cl, a fresh image with nothing but
 * base/ and rpc/.  A job is the measurement's options and buffers, written into a memfd for a
 * one-shot exec, or sent on the worker's socket after a frame header. */

#define JOB_MAGIC 0x434d5454u /* "TTMC" */

#define JOB_BUILD_ONLY 1u /* job_header.flags */

typedef struct {
    uint32_t magic, nbufs, ninputs, flags;
    int32_t number, repeat;
    double min_repeat_ms, repeat_budget_ms, cooldown_ms, timeout_s, rtol, atol;
    char opencl_device[64];
} job_header;

typedef struct {
    int32_t elem;
    uint8_t has_data, has_expect, pad[2];
    int64_t count;
} job_buffer;

size_t tt__cl_job_size(const tt_measure_buffer *bufs, int nbufs, const tt_measure_options *o)
{
    size_t n = sizeof(job_header);
    for (int i = 0; i < nbufs && !o->build_only; i++) {
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        n += sizeof(job_buffer) + (bufs[i].data ? bytes : 0) + (bufs[i].expect ? bytes : 0);
    }
    return n;
}

bool tt__cl_job_write(int fd, const tt_measure_buffer *bufs, int nbufs, int ninputs,
                      const tt_measure_options *o)
{
    job_header h;
    memset(&h, 0, sizeof(h));
    h.magic = JOB_MAGIC;
    if (o->build_only)
        nbufs = ninputs = 0; /* nothing runs: the data stays here */
    h.nbufs = (uint32_t)nbufs;
    h.ninputs = (uint32_t)ninputs;
    h.flags = o->build_only ? JOB_BUILD_ONLY : 0;
    h.number = o->number;
    h.repeat = o->repeat;
    h.min_repeat_ms = o->min_repeat_ms;
    h.repeat_budget_ms = o->repeat_budget_ms;
    h.cooldown_ms = o->cooldown_ms;
    h.timeout_s = o->timeout_s;
    h.rtol = o->rtol;
    h.atol = o->atol;
    snprintf(h.opencl_device, sizeof(h.opencl_device), "%s",
             o->opencl_device ? o->opencl_device : "");
    if (!tt_write_all(fd, &h, sizeof(h)))
        return false;
    for (int i = 0; i < nbufs; i++) {
        job_buffer b = {(int32_t)bufs[i].elem,
                        bufs[i].data != NULL,
                        bufs[i].expect != NULL,
                        {0, 0},
                        bufs[i].count};
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        if (!tt_write_all(fd, &b, sizeof(b)) ||
            (bufs[i].data && !tt_write_all(fd, bufs[i].data, bytes)) ||
            (bufs[i].expect && !tt_write_all(fd, bufs[i].expect, bytes)))
            return false;
    }
    return true;
}

/* Reads a job back: options, and buffers pointing into `base`. */
static void job_parse(int fd, tt__child_msg *m, const char *base, size_t size,
                      tt_measure_options *o, char device[64], tt_measure_buffer *bufs, int *nbufs,
                      int *ninputs)
{
    job_header h;
    if (size < sizeof(h))
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
    memcpy(&h, base, sizeof(h));
    if (h.magic != JOB_MAGIC || h.nbufs > TT_CL_MAX_BUFFERS || h.ninputs > h.nbufs)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "the measurement job is malformed");
    *o = (tt_measure_options){.number = h.number,
                              .repeat = h.repeat,
                              .min_repeat_ms = h.min_repeat_ms,
                              .repeat_budget_ms = h.repeat_budget_ms,
                              .cooldown_ms = h.cooldown_ms,
                              .timeout_s = h.timeout_s,
                              .rtol = h.rtol,
                              .atol = h.atol,
                              .build_only = (h.flags & JOB_BUILD_ONLY) != 0};
    memcpy(device, h.opencl_device, 64);
    device[63] = 0;
    o->opencl_device = device[0] ? device : NULL;
    memset(bufs, 0, sizeof(*bufs) * TT_CL_MAX_BUFFERS);
    size_t off = sizeof(h);
    for (uint32_t i = 0; i < h.nbufs; i++) {
        job_buffer b;
        if (off + sizeof(b) > size)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
        memcpy(&b, base + off, sizeof(b));
        off += sizeof(b);
        size_t bytes = (size_t)b.count * tt_elem_bytes((tt_elem)b.elem);
        if (b.count < 0 || off + bytes * (size_t)(b.has_data + b.has_expect) > size)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
        bufs[i].elem = (tt_elem)b.elem;
        bufs[i].count = b.count;
        bufs[i].data = b.has_data ? base + off : NULL;
        off += b.has_data ? bytes : 0;
        bufs[i].expect = b.has_expect ? base + off : NULL;
        off += b.has_expect ? bytes : 0;
    }
    *nbufs = (int)h.nbufs;
    *ninputs = (int)h.ninputs;
}

/* Where tvm-measure-cl is: $TT_MEASURE_CL, beside this executable, in ../bin from it (the test
 * binaries), else on $PATH.  Returns only when none could be run. */
void tt__cl_exec_helper(char *const argv[])
{
    const char *env = getenv("TT_MEASURE_CL");
    if (env && env[0])
        execv(env, argv);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            char path[PATH_MAX + 32];
            snprintf(path, sizeof(path), "%s/tvm-measure-cl", self);
            execv(path, argv);
            snprintf(path, sizeof(path), "%s/../bin/tvm-measure-cl", self);
            execv(path, argv);
        }
    }
    execvp("tvm-measure-cl", argv);
}

void tt__measure_opencl_exec(int fd, tt__child_msg *m, const char *path,
                             const tt_measure_buffer *bufs, int nbufs, int ninputs,
                             const tt_measure_options *o)
{
    int job = memfd_create("tvm-measure-job", 0);
    if (job < 0)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "memfd_create: %s", strerror(errno));
    if (!tt__cl_job_write(job, bufs, nbufs, ninputs, o))
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "writing the measurement job: %s",
                         strerror(errno));
    char fd_text[16], job_text[16];
    snprintf(fd_text, sizeof(fd_text), "%d", fd);
    snprintf(job_text, sizeof(job_text), "%d", job);
    char *argv[] = {"tvm-measure-cl", fd_text, job_text, (char *)path, NULL};
    tt__cl_exec_helper(argv);
    tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                     "cannot run tvm-measure-cl (it belongs beside this program or on PATH): %s",
                     strerror(errno));
}

/* ---- tvm-measure-cl ---- */

/* One candidate after another on the socket `fd` (measure_cl_worker.c writes the frames).  A
 * failing candidate is a result and the next one follows; after a device error (a kernel that
 * faulted, a launch the driver refused for want of resources) the context may be broken, so the
 * worker exits and the next candidate starts a fresh one.  EOF, the parent gone, ends it. */
static int serve(int fd)
{
    static tt__child_msg m;
    static jmp_buf recover;
    for (;;) {
        tt__cl_frame f;
        if (!tt_read_all(fd, &f, sizeof(f)))
            _exit(0);
        if (f.magic != TT__CL_FRAME_MAGIC || f.path_len == 0 || f.path_len >= PATH_MAX ||
            f.job_len > ((uint64_t)1 << 40))
            _exit(3);
        char path[PATH_MAX];
        char *job = malloc(f.job_len ? f.job_len : 1);
        if (!job || !tt_read_all(fd, path, f.path_len) || !tt_read_all(fd, job, f.job_len))
            _exit(3);
        path[f.path_len] = 0;
        memset(&m, 0, sizeof(m));
        if (setjmp(recover) == 0) {
            tt__measure_recover = &recover;
            static tt_measure_options o;
            static char device[64];
            static tt_measure_buffer bufs[TT_CL_MAX_BUFFERS];
            int nbufs, ninputs;
            job_parse(fd, &m, job, f.job_len, &o, device, bufs, &nbufs, &ninputs);
            measure_artifact(fd, &m, path, bufs, nbufs, ninputs, &o);
        }
        tt__measure_recover = NULL;
        job_release();
        free(job);
        if (m.error_no == TT__E_RUNTIME_DEVICE)
            _exit(0);
    }
}

int tt__measure_cl_main(int argc, char **argv)
{
    bool serving = argc == 3 && !strcmp(argv[1], "--serve");
    if (argc != 4 && !serving) {
        fprintf(stderr, "tvm-measure-cl RESULT_FD JOB_FD ARTIFACT | --serve SOCKET_FD: run by "
                        "tvm-tune and tvm-rpc-server to measure OpenCL kernels; not for people\n");
        return 2;
    }
    int fd = atoi(argv[serving ? 2 : 1]);
    /* Drivers print their compilers' diagnostics; the build log goes into the result instead. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
    if (serving)
        return serve(fd);
    int job = atoi(argv[2]);
    tt__child_msg m;
    memset(&m, 0, sizeof(m));
    off_t size = lseek(job, 0, SEEK_END);
    if (size < (off_t)sizeof(job_header))
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
    const char *base = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, job, 0);
    if (base == MAP_FAILED)
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "mmap: %s", strerror(errno));
    tt_measure_options o;
    char device[64];
    static tt_measure_buffer bufs[TT_CL_MAX_BUFFERS];
    int nbufs, ninputs;
    job_parse(fd, &m, base, (size_t)size, &o, device, bufs, &nbufs, &ninputs);
    measure_artifact(fd, &m, argv[3], bufs, nbufs, ninputs, &o);
    /* The result is sent; the driver's teardown (slow on some, leak reports under sanitizers) is
     * skipped. */
    _exit(0);
}
