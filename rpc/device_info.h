/* What a device is, as its rpc server reports it (UPDATE_INFO and the session's hello): built
 * without LLVM, from the compiler's target macros, /proc/cpuinfo and sysconf, so it works on any
 * board.  The fingerprint names the device in tuning records. */
#ifndef TT_RPC_DEVICE_INFO_H
#define TT_RPC_DEVICE_INFO_H

#include <stdint.h>

#include "../base/base.h"
#include "opencl.h"

#define TT_DEVICE_MAX_OPENCL 4

typedef struct tt_device_info {
    char arch[32];       /* LLVM's architecture name: x86_64, aarch64, arm, riscv64 */
    char triple[64];     /* the triple this server was built for */
    char model[256];     /* "model name" (x86) or "Model"/"CPU part" (ARM) of /proc/cpuinfo */
    char flags_hash[17]; /* FNV-1a of the CPU's feature flags, as /proc/cpuinfo lists them */
    char flags[2048];    /* the flags themselves (possibly cut) */
    int cores;
    int64_t memory; /* bytes */
    char fingerprint[512];
    /* OpenCL devices (tt_device_probe_opencl); `opencl_selected` is the one this server measures
     * on (-1: none), `opencl_fingerprint` names it in records of OpenCL targets. */
    int nopencl, opencl_selected;
    tt_cl_device_info opencl[TT_DEVICE_MAX_OPENCL];
    char opencl_fingerprint[256];
} tt_device_info;

/* The CPU, memory and architecture (no OpenCL: that needs a child process). */
void tt_device_probe(tt_device_info *d);
/* Adds the OpenCL devices (tt_cl_probe) and selects one by `spec` (tt_cl_select).  A machine
 * without OpenCL is not an error (nopencl = 0); a `spec` that matches nothing is. */
tt_status tt_device_probe_opencl(tt_device_info *d, const char *spec, tt_errbuf *err);
/* The record name of an OpenCL device: "name|vendor|driver|<units>cu|<memory>G". */
void tt_cl_fingerprint(const tt_cl_device_info *c, char *out, size_t n);
/* {"arch", "triple", "model", "cores", "memory", "flags", "fingerprint"} and, with OpenCL devices,
 * "opencl": [{"platform", "device", "name", "vendor", "version", "driver", "type",
 * "compute_units", "max_work_group", "max_work_item", "local_mem", "global_mem", "fp64",
 * "selected"}], "opencl_fingerprint". */
json_t *tt_device_info_json(const tt_device_info *d);
/* The inverse, for clients (fields absent or malformed are left empty). */
void tt_device_info_from_json(const json_t *j, tt_device_info *d);
/* The LLVM architecture of a target triple ("aarch64" of "aarch64-linux-gnu"); "" for "". */
void tt_triple_arch(const char *triple, char *out, size_t n);

#endif
