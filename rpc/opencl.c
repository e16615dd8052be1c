#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "opencl_int.h"
#include "sandbox_int.h"

tt_status tt__cl_open(tt_cl_api *api, tt_errbuf *err)
{
    memset(api, 0, sizeof(*api));
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !api->lib; i++)
        api->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!api->lib)
        return tt_err(err, TT_ERR_NOT_FOUND, "no OpenCL ICD loader (libOpenCL.so.1): %s",
                      dlerror());
#define TT_CL_RESOLVE(name)                                                                        \
    if (!(*(void **)&api->name = dlsym(api->lib, #name)))                                          \
        return tt_err(err, TT_ERR_NOT_FOUND, "the OpenCL ICD loader lacks %s", #name);
    TT_CL_API(TT_CL_RESOLVE)
#undef TT_CL_RESOLVE
    return TT_OK;
}

const char *tt__cl_error_name(cl_int e)
{
    switch (e) {
#define N(c)                                                                                       \
    case c: return #c;
        N(CL_SUCCESS)
        N(CL_DEVICE_NOT_FOUND)
        N(CL_DEVICE_NOT_AVAILABLE)
        N(CL_COMPILER_NOT_AVAILABLE)
        N(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        N(CL_OUT_OF_RESOURCES)
        N(CL_OUT_OF_HOST_MEMORY)
        N(CL_PROFILING_INFO_NOT_AVAILABLE)
        N(CL_BUILD_PROGRAM_FAILURE)
        N(CL_INVALID_VALUE)
        N(CL_INVALID_DEVICE)
        N(CL_INVALID_CONTEXT)
        N(CL_INVALID_COMMAND_QUEUE)
        N(CL_INVALID_MEM_OBJECT)
        N(CL_INVALID_BUILD_OPTIONS)
        N(CL_INVALID_PROGRAM)
        N(CL_INVALID_PROGRAM_EXECUTABLE)
        N(CL_INVALID_KERNEL_NAME)
        N(CL_INVALID_KERNEL)
        N(CL_INVALID_ARG_INDEX)
        N(CL_INVALID_ARG_VALUE)
        N(CL_INVALID_ARG_SIZE)
        N(CL_INVALID_KERNEL_ARGS)
        N(CL_INVALID_WORK_DIMENSION)
        N(CL_INVALID_WORK_GROUP_SIZE)
        N(CL_INVALID_WORK_ITEM_SIZE)
        N(CL_INVALID_GLOBAL_OFFSET)
        N(CL_INVALID_EVENT)
        N(CL_INVALID_BUFFER_SIZE)
        N(CL_INVALID_GLOBAL_WORK_SIZE)
#undef N
    default: return "CL_ERROR";
    }
}

static void info_str(const tt_cl_api *api, cl_device_id d, cl_device_info what, char *out, size_t n)
{
    /* A buffer shorter than the value is an error (CL_INVALID_VALUE): read it whole, then cut. */
    char buf[1024] = {0};
    out[0] = 0;
    if (api->clGetDeviceInfo(d, what, sizeof(buf) - 1, buf, NULL) != CL_SUCCESS)
        return;
    snprintf(out, n, "%s", buf);
    /* Drivers pad some names with spaces. */
    size_t len = strlen(out);
    while (len && (out[len - 1] == ' ' || out[len - 1] == '\n'))
        out[--len] = 0;
}

static int64_t info_u64(const tt_cl_api *api, cl_device_id d, cl_device_info what, size_t size)
{
    uint64_t v = 0;
    if (size == 4) {
        cl_uint u = 0;
        if (api->clGetDeviceInfo(d, what, 4, &u, NULL) == CL_SUCCESS)
            v = u;
    } else if (size == sizeof(size_t)) {
        size_t u = 0;
        if (api->clGetDeviceInfo(d, what, sizeof(u), &u, NULL) == CL_SUCCESS)
            v = u;
    } else {
        cl_ulong u = 0;
        if (api->clGetDeviceInfo(d, what, sizeof(u), &u, NULL) == CL_SUCCESS)
            v = u;
    }
    return (int64_t)v;
}

/* The vendors' queries for the threads that run in lockstep (their extension headers' values); a
 * device without the extension fails the query, which leaves 0. */
enum {
    CL_DEVICE_WARP_SIZE_NV_ = 0x4003,
    CL_DEVICE_WAVEFRONT_WIDTH_AMD_ = 0x4043,
    CL_DEVICE_SUB_GROUP_SIZES_INTEL_ = 0x4108
};

static int reported_warp(const tt_cl_api *api, cl_device_id d)
{
    int64_t w = info_u64(api, d, CL_DEVICE_WARP_SIZE_NV_, 4);
    if (w <= 0)
        w = info_u64(api, d, CL_DEVICE_WAVEFRONT_WIDTH_AMD_, 4);
    if (w <= 0) {
        size_t sizes[16] = {0}, got = 0;
        if (api->clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL_, sizeof(sizes), sizes, &got) ==
            CL_SUCCESS)
            for (size_t k = 0; k < got / sizeof(size_t) && k < 16; k++)
                if ((int64_t)sizes[k] > w)
                    w = (int64_t)sizes[k];
    }
    return w > 0 && w <= 1024 ? (int)w : 0;
}

int tt__cl_list(const tt_cl_api *api, tt_cl_device_info *out, cl_device_id *ids, int max)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (api->clGetPlatformIDs(8, plats, &np) != CL_SUCCESS)
        return 0;
    int n = 0;
    for (cl_uint p = 0; p < np && p < 8; p++) {
        char pname[1024] = {0};
        api->clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof(pname) - 1, pname, NULL);
        cl_device_id devs[TT_CL_MAX_DEVICES];
        cl_uint nd = 0;
        if (api->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, TT_CL_MAX_DEVICES, devs, &nd) !=
            CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && d < TT_CL_MAX_DEVICES && n < max; d++) {
            tt_cl_device_info *o = &out[n];
            memset(o, 0, sizeof(*o));
            if (ids)
                ids[n] = devs[d];
            o->platform = (int)p;
            o->device = (int)d;
            snprintf(o->platform_name, sizeof(o->platform_name), "%.95s", pname);
            info_str(api, devs[d], CL_DEVICE_NAME, o->name, sizeof(o->name));
            info_str(api, devs[d], CL_DEVICE_VENDOR, o->vendor, sizeof(o->vendor));
            info_str(api, devs[d], CL_DEVICE_VERSION, o->version, sizeof(o->version));
            info_str(api, devs[d], CL_DRIVER_VERSION, o->driver, sizeof(o->driver));
            cl_device_type t = 0;
            api->clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof(t), &t, NULL);
            snprintf(o->type, sizeof(o->type), "%s",
                     (t & CL_DEVICE_TYPE_GPU)           ? "gpu"
                     : (t & CL_DEVICE_TYPE_CPU)         ? "cpu"
                     : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                        : "other");
            o->compute_units = (int)info_u64(api, devs[d], CL_DEVICE_MAX_COMPUTE_UNITS, 4);
            o->max_work_group =
                info_u64(api, devs[d], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t));
            size_t items[3] = {0, 0, 0};
            api->clGetDeviceInfo(devs[d], CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(items), items,
                                 NULL);
            for (int k = 0; k < 3; k++)
                o->max_item[k] = (int64_t)items[k];
            o->local_mem = info_u64(api, devs[d], CL_DEVICE_LOCAL_MEM_SIZE, 8);
            o->global_mem = info_u64(api, devs[d], CL_DEVICE_GLOBAL_MEM_SIZE, 8);
            o->max_alloc = info_u64(api, devs[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE, 8);
            o->fp64 = info_u64(api, devs[d], CL_DEVICE_DOUBLE_FP_CONFIG, 8) != 0;
            o->warp = reported_warp(api, devs[d]);
            n++;
        }
    }
    return n;
}

tt_status tt_cl_probe(tt_cl_device_info *out, int max, int *n, tt_errbuf *err)
{
    *n = 0;
    if (max > TT_CL_MAX_DEVICES)
        max = TT_CL_MAX_DEVICES;
    int fd;
    pid_t pid = tt__sandbox_start(&fd, -1, err);
    if (pid < 0)
        return TT_ERR_IO;
    if (pid == 0) {
        tt_cl_api api;
        tt_cl_device_info devs[TT_CL_MAX_DEVICES];
        int32_t count = 0;
        if (tt__cl_open(&api, NULL) == TT_OK)
            count = tt__cl_list(&api, devs, NULL, max);
        if (write(fd, &count, sizeof(count)) != sizeof(count) ||
            (count > 0 && write(fd, devs, sizeof(devs[0]) * (size_t)count) !=
                              (ssize_t)(sizeof(devs[0]) * (size_t)count)))
            _exit(3);
        _exit(0);
    }
    /* A driver that hangs while listing must not hang the server: 20 s, then it is killed. */
    double deadline = tt_clock_monotonic() + 20;
    int32_t count = -1;
    bool timed_out;
    tt_status r = TT_OK;
    size_t got = tt__sandbox_read(fd, &count, sizeof(count), deadline, &timed_out);
    if (got == sizeof(count) && (count < 0 || count > max))
        r = tt_err(err, TT_ERR_IO, "listing OpenCL devices: bad count %d", count);
    else if (got == sizeof(count) && count > 0) {
        size_t want = sizeof(tt_cl_device_info) * (size_t)count;
        got = tt__sandbox_read(fd, out, want, deadline, &timed_out) == want ? sizeof(count) : 0;
    }
    if (!r && got != sizeof(count))
        r = tt_err(err, TT_ERR_IO, "listing OpenCL devices %s",
                   timed_out ? "timed out (driver hung)" : "failed (the driver crashed)");
    tt__sandbox_finish(pid, fd, r != TT_OK);
    if (!r)
        *n = count;
    return r;
}

int tt_cl_select(const tt_cl_device_info *devs, int n, const char *spec, tt_errbuf *err)
{
    if (n <= 0) {
        tt_err(err, TT_ERR_NOT_FOUND, "no OpenCL device on this machine");
        return -1;
    }
    if (!spec || !spec[0]) {
        for (int i = 0; i < n; i++)
            if (strcmp(devs[i].type, "gpu") == 0)
                return i;
        return 0;
    }
    int p, d, used = 0;
    if (sscanf(spec, "%d:%d%n", &p, &d, &used) == 2 && spec[used] == 0) {
        for (int i = 0; i < n; i++)
            if (devs[i].platform == p && devs[i].device == d)
                return i;
        tt_err(err, TT_ERR_NOT_FOUND, "no OpenCL device %d:%d (platform:device) here", p, d);
        return -1;
    }
    char *end;
    long idx = strtol(spec, &end, 10);
    if (*end == 0) {
        if (idx >= 0 && idx < n)
            return (int)idx;
        tt_err(err, TT_ERR_NOT_FOUND, "OpenCL device index %ld: this machine has %d", idx, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (strcasestr(devs[i].name, spec) || strcasestr(devs[i].platform_name, spec))
            return i;
    tt_err(err, TT_ERR_NOT_FOUND, "no OpenCL device named like '%s' here", spec);
    return -1;
}

/* Where the ICD loader reads its .icd files: $OCL_ICD_VENDORS, else /etc/OpenCL/vendors. */
static const char *icd_vendors_dir(void)
{
    const char *env = getenv("OCL_ICD_VENDORS");
    return env && env[0] ? env : "/etc/OpenCL/vendors";
}

/* Whether an .icd file in `dir` names the driver `file` (by its name or a path ending in it). */
static bool icd_names(const char *dir, const char *file)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".icd"))
            continue;
        char path[4096], line[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\r\n")] = 0;
            const char *base = strrchr(line, '/');
            found = strcmp(base ? base + 1 : line, file) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

bool tt_cl_unregistered_driver(const char *const *lib_dirs, const char *vendors_dir, char *path,
                               size_t n)
{
    static const char *const usual[] = {
        "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",    "/usr/lib",
        "/usr/local/nvidia/lib64",   "/usr/local/nvidia/lib",      "/opt/rocm/lib", NULL};
    static const char *const drivers[] = {"libnvidia-opencl.so.1", "libamdocl64.so", "libigdrcl.so",
                                          NULL};
    if (!lib_dirs)
        lib_dirs = usual;
    if (!vendors_dir)
        vendors_dir = icd_vendors_dir();
    for (int k = 0; drivers[k]; k++)
        for (int i = 0; lib_dirs[i]; i++) {
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", lib_dirs[i], drivers[k]);
            if (access(p, R_OK) == 0 && !icd_names(vendors_dir, drivers[k])) {
                snprintf(path, n, "%s", p);
                return true;
            }
        }
    return false;
}

void tt_cl_driver_hint(const tt_cl_device_info *selected, const char *const *lib_dirs, char *out,
                       size_t n)
{
    out[0] = 0;
    char drv[4096];
    if (selected && !strcmp(selected->type, "gpu"))
        return;
    if (!tt_cl_unregistered_driver(lib_dirs, NULL, drv, sizeof(drv)))
        return;
    snprintf(out, n,
             "%s is installed but no ICD file registers it, so its GPU is not offered%s%s%s: "
             "write its path into a .icd file in %s (or point OCL_ICD_VENDORS at a folder with "
             "one)",
             drv, selected ? " (measuring on " : "", selected ? selected->name : "",
             selected ? " instead)" : "", icd_vendors_dir());
}
