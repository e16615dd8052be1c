/* OpenCL devices on this machine, for measurement.
 *
 * The ICD loader (libOpenCL.so.1) is opened at run time, so tvm-rpc-server runs, and measures CPU
 * kernels, on a machine without OpenCL; the vendor's driver is picked by the loader.  A process
 * that forks sacrificial children must not initialise OpenCL itself (drivers keep threads and
 * device state that do not survive fork), so everything here that touches OpenCL runs in a child:
 * tt_cl_probe() lists the devices from one, and measure.c runs artifacts in its usual child. */
#ifndef TT_RPC_OPENCL_H
#define TT_RPC_OPENCL_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_CL_MAX_DEVICES 16

typedef struct tt_cl_device_info {
    int platform, device; /* indices, as "-device P:D" selects them */
    char platform_name[96];
    char name[96];
    char vendor[64];
    char version[64]; /* device version, "OpenCL 3.0 PoCL ..." */
    char driver[64];
    char type[16]; /* "gpu", "cpu", "accelerator", "other" */
    int compute_units;
    int64_t max_work_group; /* work-items per group */
    int64_t max_item[3];    /* per axis */
    int64_t local_mem;      /* bytes of __local memory per group */
    int64_t global_mem;     /* bytes */
    int64_t max_alloc;      /* largest single buffer */
    bool fp64;
    /* Work-items that run in lockstep, as the vendor's extension reports it: NVIDIA's warp
     * (cl_nv_device_attribute_query), AMD's wavefront (cl_amd_device_attribute_query), Intel's
     * widest sub-group (cl_intel_required_subgroup_size); 0 where none does (pocl). */
    int warp;
} tt_cl_device_info;

/* Lists the OpenCL devices from a child process (the caller's process never loads a driver).
 * *n = 0 with TT_OK when there is no ICD loader or no platform; TT_ERR_IO when the child failed
 * (a crashing driver), with the reason. */
tt_status tt_cl_probe(tt_cl_device_info *out, int max, int *n, tt_errbuf *err);

/* Picks a device by `spec`: "P:D" (platform and device index), a decimal index into the list,
 * or a case-insensitive substring of the device or platform name; NULL or "" = the first GPU,
 * else the first device.  Returns the list index, or -1 with the reason in err. */
int tt_cl_select(const tt_cl_device_info *devs, int n, const char *spec, tt_errbuf *err);

/* A GPU vendor's OpenCL driver installed here that no ICD file registers (the loader then never
 * offers its GPU: a container with NVIDIA's driver mounted but no nvidia.icd, where pocl's CPU
 * device is all a run sees).  Looks for the drivers of NVIDIA, AMD and Intel in `lib_dirs` (NULL:
 * the usual library folders) and for their names in the .icd files of `vendors_dir` (NULL:
 * $OCL_ICD_VENDORS, else /etc/OpenCL/vendors).  Writes the driver's path into `path` and returns
 * true when one is unregistered.  Reads files only; loads nothing. */
bool tt_cl_unregistered_driver(const char *const *lib_dirs, const char *vendors_dir, char *path,
                               size_t n);

/* A note for the log when the selected device (NULL: none) is not a GPU and
 * tt_cl_unregistered_driver(lib_dirs, NULL, ...) finds a driver: what to write where.  Empty when
 * there is nothing to say. */
void tt_cl_driver_hint(const tt_cl_device_info *selected, const char *const *lib_dirs, char *out,
                       size_t n);

#endif
