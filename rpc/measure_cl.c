/* Measuring an OpenCL artifact in the sacrificial child.  Nothing here runs in a long-lived
 * process: a kernel that wedges the driver or corrupts the context dies with its child, and the
 * next candidate starts from a fresh one (the recovery TVM's Android RPC app lacked). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../codegen/cl_artifact.h"
#include "measure_int.h"
#include "opencl_int.h"

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

typedef struct {
    const tt_cl_api *api;
    cl_command_queue q;
    cl_kernel kernels[TT_CL_MAX_KERNELS];
    const tt_cl_artifact *art;
    int fd;
    tt__child_msg *m;
} cl_run;

/* Launch errors that mean the kernel does not fit the device: the schedule's fault. */
static bool is_fit_error(cl_int e)
{
    return e == CL_INVALID_WORK_GROUP_SIZE || e == CL_INVALID_WORK_ITEM_SIZE ||
           e == CL_OUT_OF_RESOURCES || e == CL_INVALID_GLOBAL_WORK_SIZE;
}

/* Enqueues every kernel `number` times; returns the device time from the first kernel's start to
 * the last one's end, in seconds. */
static double run_cl(void *vctx, int number)
{
    cl_run *c = vctx;
    const tt_cl_api *api = c->api;
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
            cl_int e = api->clEnqueueNDRangeKernel(c->q, c->kernels[k], 3, NULL, global, local, 0,
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
            if (is_last) {
                if (ev == first && first)
                    last = first;
                else
                    last = ev;
            }
        }
    cl_int e = api->clFinish(c->q);
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

void tt__measure_opencl(int fd, tt__child_msg *m, const char *path, const tt_measure_buffer *bufs,
                        int nbufs, int ninputs, const tt_measure_options *o)
{
    size_t len = 0;
    char *src = read_file(path, &len);
    if (!src)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "cannot read the artifact %s", path);
    static tt_cl_artifact art;
    tt_errbuf err;
    if (tt_cl_artifact_parse(src, len, &art, &err))
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
    static tt_cl_api api;
    if (tt__cl_open(&api, &err))
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "%s", err.msg);
    static tt_cl_device_info devs[TT_CL_MAX_DEVICES];
    cl_device_id ids[TT_CL_MAX_DEVICES];
    int ndev = tt__cl_list(&api, devs, ids, TT_CL_MAX_DEVICES);
    int which = tt_cl_select(devs, ndev, o->opencl_device, &err);
    if (which < 0)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "%s", err.msg);
    cl_device_id dev = ids[which];
    cl_int e;
    cl_context ctx = api.clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    if (!ctx)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "clCreateContext on %s: %s", devs[which].name,
                         tt__cl_error_name(e));
    cl_command_queue q = api.clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    if (!q)
        tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "clCreateCommandQueue: %s",
                         tt__cl_error_name(e));
    const char *srcs[1] = {src};
    cl_program prog = api.clCreateProgramWithSource(ctx, 1, srcs, &len, &e);
    if (!prog)
        tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "clCreateProgramWithSource: %s",
                         tt__cl_error_name(e));
    e = api.clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[400] = {0};
        api.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
        tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "OpenCL build failed on %s (%s): %s",
                         devs[which].name, tt__cl_error_name(e), log);
    }
    if (o->build_only) {
        for (int k = 0; k < art.nkernels; k++) {
            cl_kernel kk = api.clCreateKernel(prog, art.kernels[k].name, &e);
            if (!kk)
                tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "kernel %s: %s", art.kernels[k].name,
                                 tt__cl_error_name(e));
            api.clReleaseKernel(kk);
        }
        tt__measure_send(fd, m); /* built: error 0, no costs */
        return;
    }
    cl_run run = {&api, q, {0}, &art, fd, m};
    int nall = nbufs + art.nworkspace;
    cl_mem mems[2 * TT_CL_MAX_BUFFERS];
    for (int i = 0; i < nall; i++) {
        const tt_cl_buffer *b = i < nbufs ? &art.params[i] : &art.workspace[i - nbufs];
        size_t bytes = (size_t)b->count * tt_cl_elem_bytes(b->elem);
        if (bytes == 0)
            bytes = 64;
        mems[i] = api.clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
        if (!mems[i])
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                             "cannot allocate %zu bytes on the device for buffer %d: %s", bytes, i,
                             tt__cl_error_name(e));
        /* Inputs get their data; outputs and workspace start as NaN, so a kernel that leaves
         * something unwritten shows up as a wrong answer. */
        void *init = malloc(bytes);
        if (!init)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "out of memory");
        if (i < ninputs && bufs[i].data)
            memcpy(init, bufs[i].data, bytes);
        else
            memset(init, i < ninputs ? 0 : 0xff, bytes);
        e = api.clEnqueueWriteBuffer(q, mems[i], CL_TRUE, 0, bytes, init, 0, NULL, NULL);
        free(init);
        if (e != CL_SUCCESS)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "writing buffer %d: %s", i,
                             tt__cl_error_name(e));
    }
    for (int k = 0; k < art.nkernels; k++) {
        run.kernels[k] = api.clCreateKernel(prog, art.kernels[k].name, &e);
        if (!run.kernels[k])
            tt__measure_fail(fd, m, TT__E_COMPILE_DEVICE, "kernel %s: %s", art.kernels[k].name,
                             tt__cl_error_name(e));
        for (int i = 0; i < nall; i++)
            if ((e = api.clSetKernelArg(run.kernels[k], (cl_uint)i, sizeof(cl_mem), &mems[i])) !=
                CL_SUCCESS)
                tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "kernel %s argument %d: %s",
                                 art.kernels[k].name, i, tt__cl_error_name(e));
    }
    /* Warm-up, which is also the call whose outputs are checked. */
    run_cl(&run, 1);
    void *outs[TT_CL_MAX_BUFFERS];
    for (int i = 0; i < nbufs; i++) {
        outs[i] = NULL;
        if (i < ninputs || !bufs[i].expect)
            continue;
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        outs[i] = malloc(bytes ? bytes : 1);
        if (!outs[i])
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "out of memory");
        if ((e = api.clEnqueueReadBuffer(q, mems[i], CL_TRUE, 0, bytes, outs[i], 0, NULL, NULL)) !=
            CL_SUCCESS)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "reading output %d: %s", i - ninputs,
                             tt__cl_error_name(e));
    }
    tt__measure_check(fd, m, outs, bufs, nbufs, ninputs, o);
    tt__measure_time(fd, m, o, run_cl, &run);
    /* The child exits right after; the driver's teardown is left to process exit. */
}

/* ---- the helper process ----
 *
 * OpenCL drivers bring their own LLVM (pocl links LLVM 15, tvm-tune LLVM 14): loaded into a
 * process that already has another LLVM, or into the fork of a multithreaded one, a driver
 * crashes.  So the measuring child does not load the driver itself: it writes the job into a
 * memfd and execs tvm-measure-cl, a fresh image with nothing but base/ and rpc/, which runs the
 * artifact and writes the result to the same pipe.  The pid, the process group and the deadline
 * are the child's, so a timeout still kills everything. */

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

static void put(int fd, tt__child_msg *m, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE, "writing the measurement job: %s",
                             strerror(errno));
        c += w;
        n -= (size_t)w;
    }
}

/* Where tvm-measure-cl is: $TT_MEASURE_CL, beside this executable, in ../bin from it (the test
 * binaries), else on $PATH. */
static void exec_helper(char *const argv[])
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
    put(job, m, &h, sizeof(h));
    for (int i = 0; i < nbufs; i++) {
        job_buffer b = {(int32_t)bufs[i].elem,
                        bufs[i].data != NULL,
                        bufs[i].expect != NULL,
                        {0, 0},
                        bufs[i].count};
        size_t bytes = (size_t)bufs[i].count * tt_elem_bytes(bufs[i].elem);
        put(job, m, &b, sizeof(b));
        if (bufs[i].data)
            put(job, m, bufs[i].data, bytes);
        if (bufs[i].expect)
            put(job, m, bufs[i].expect, bytes);
    }
    char fd_text[16], job_text[16];
    snprintf(fd_text, sizeof(fd_text), "%d", fd);
    snprintf(job_text, sizeof(job_text), "%d", job);
    char *argv[] = {"tvm-measure-cl", fd_text, job_text, (char *)path, NULL};
    exec_helper(argv);
    tt__measure_fail(fd, m, TT__E_RUNTIME_DEVICE,
                     "cannot run tvm-measure-cl (it belongs beside this program or on PATH): %s",
                     strerror(errno));
}

int tt__measure_cl_main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "tvm-measure-cl RESULT_FD JOB_FD ARTIFACT: run by tvm-tune and "
                        "tvm-rpc-server to measure an OpenCL kernel; not for people\n");
        return 2;
    }
    int fd = atoi(argv[1]), job = atoi(argv[2]);
    /* Drivers print their compilers' diagnostics; the build log goes into the result instead. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
    tt__child_msg m;
    memset(&m, 0, sizeof(m));
    off_t size = lseek(job, 0, SEEK_END);
    if (size < (off_t)sizeof(job_header))
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
    const char *base = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, job, 0);
    if (base == MAP_FAILED)
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "mmap: %s", strerror(errno));
    job_header h;
    memcpy(&h, base, sizeof(h));
    if (h.magic != JOB_MAGIC || h.nbufs > TT_CL_MAX_BUFFERS || h.ninputs > h.nbufs)
        tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "the measurement job is malformed");
    tt_measure_options o = {.number = h.number,
                            .repeat = h.repeat,
                            .min_repeat_ms = h.min_repeat_ms,
                            .repeat_budget_ms = h.repeat_budget_ms,
                            .cooldown_ms = h.cooldown_ms,
                            .timeout_s = h.timeout_s,
                            .rtol = h.rtol,
                            .atol = h.atol,
                            .build_only = (h.flags & JOB_BUILD_ONLY) != 0};
    h.opencl_device[sizeof(h.opencl_device) - 1] = 0;
    o.opencl_device = h.opencl_device[0] ? h.opencl_device : NULL;
    tt_measure_buffer bufs[TT_CL_MAX_BUFFERS];
    memset(bufs, 0, sizeof(bufs));
    size_t off = sizeof(h);
    for (uint32_t i = 0; i < h.nbufs; i++) {
        job_buffer b;
        if (off + sizeof(b) > (size_t)size)
            tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
        memcpy(&b, base + off, sizeof(b));
        off += sizeof(b);
        size_t bytes = (size_t)b.count * tt_elem_bytes((tt_elem)b.elem);
        if (b.count < 0 || off + bytes * (size_t)(b.has_data + b.has_expect) > (size_t)size)
            tt__measure_fail(fd, &m, TT__E_RUNTIME_DEVICE, "the measurement job is truncated");
        bufs[i].elem = (tt_elem)b.elem;
        bufs[i].count = b.count;
        bufs[i].data = b.has_data ? base + off : NULL;
        off += b.has_data ? bytes : 0;
        bufs[i].expect = b.has_expect ? base + off : NULL;
        off += b.has_expect ? bytes : 0;
    }
    tt__measure_opencl(fd, &m, argv[3], bufs, (int)h.nbufs, (int)h.ninputs, &o);
    /* The result is sent; the driver's teardown (slow on some, leak reports under sanitizers) is
     * skipped. */
    _exit(0);
}
