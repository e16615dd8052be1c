/* What a device is, as its rpc server reports it (UPDATE_INFO and the session's hello): built
 * without LLVM, from the compiler's target macros, /proc/cpuinfo and sysconf, so it works on any
 * board.  The fingerprint names the device in tuning records. */
#ifndef TT_RPC_DEVICE_INFO_H
#define TT_RPC_DEVICE_INFO_H

#include <stdint.h>

#include "../base/base.h"

typedef struct tt_device_info {
    char arch[32];       /* LLVM's architecture name: x86_64, aarch64, arm, riscv64 */
    char triple[64];     /* the triple this server was built for */
    char model[256];     /* "model name" (x86) or "Model"/"CPU part" (ARM) of /proc/cpuinfo */
    char flags_hash[17]; /* FNV-1a of the CPU's feature flags, as /proc/cpuinfo lists them */
    char flags[2048];    /* the flags themselves (possibly cut) */
    int cores;
    int64_t memory; /* bytes */
    char fingerprint[512];
} tt_device_info;

void tt_device_probe(tt_device_info *d);
/* {"arch", "triple", "model", "cores", "memory", "flags", "fingerprint"} */
json_t *tt_device_info_json(const tt_device_info *d);
/* The LLVM architecture of a target triple ("aarch64" of "aarch64-linux-gnu"); "" for "". */
void tt_triple_arch(const char *triple, char *out, size_t n);

#endif
