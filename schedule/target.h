/* Targets: TVM-style target strings parsed into their fields.
 *
 *     llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon -num-cores=4
 *     opencl -device=mali
 *
 * The string itself stays the identity (the database keys on it); the fields serve code
 * generation and the database's fallbacks ("same target family").  Thread-safe. */
#ifndef TT_SCHEDULE_TARGET_H
#define TT_SCHEDULE_TARGET_H

#include "../base/base.h"

typedef struct tt_target {
    char kind[16];   /* llvm, c, opencl, cuda, rocm, vulkan, metal */
    char triple[64]; /* -mtriple (or TVM's -target), "" = host */
    char cpu[64];    /* -mcpu */
    char attrs[256]; /* -mattr, comma-separated */
    char keys[96];   /* -keys */
    char model[64];  /* -model */
    char device[64]; /* -device */
    int num_cores;   /* -num-cores, 0 = unset */
    /* -max_num_threads (TVM's, GPU targets): work-items a work-group may have, 0 = unset.  The
     * builds' kernels and the search keep under it (a device that allows fewer than a build's
     * default of 256, named before the device is at hand). */
    int max_num_threads;
    /* -thread_warp_size (TVM's, GPU targets): work-items that run in lockstep (NVIDIA 32, AMD 64,
     * Intel 8 to 32), 0 = unset (32).  GPU bindings split by it: a work-group's threads come in
     * whole warps, a cross-thread reduction splits by it. */
    int thread_warp_size;
    /* -max_shared_memory_per_block (TVM's, GPU targets): bytes of local memory a work-group may
     * take, 0 = unset.  A build's default tilings keep under it (else under 32 KiB, the least a
     * GPU has), its kernels are refused beyond it, and the search keeps under it and the
     * device's own. */
    int max_shared_memory_per_block;
} tt_target;

/* Parses a target string.  Unknown options are accepted and ignored (TVM has many, and imported
 * logs carry them); an unknown kind, a malformed option or a value too long returns
 * TT_ERR_PARSE naming it. */
tt_status tt_target_parse(const char *text, tt_target *out, tt_errbuf *err);
/* tt_target_parse for a target a user typed (--target): an option that is neither ours nor one
 * of TVM's target options is refused, naming it and its column (a misspelt -max_num_thread
 * would otherwise build for 256 threads without a word).  TVM's options we do not use (-libs,
 * -opt-level, -arch, ...) are accepted and ignored. */
tt_status tt_target_parse_user(const char *text, tt_target *out, tt_errbuf *err);
/* The family used for fallbacks: kind plus architecture, e.g. "llvm:host", "llvm:aarch64",
 * "opencl:mali", "cuda:gpu". */
void tt_target_family(const tt_target *t, char *out, size_t n);

/* Whether a GPU target's local memory (CUDA's shared memory) is faster than its global memory, so
 * that staging tiles there pays: false for `-device=mali`, whose local memory is the same main
 * memory behind the same caches (TVM's Mali schedules and Ansor's Mali rules use none). */
bool tt_target_fast_local_memory(const tt_target *t);

/* What a CPU target's vector unit offers the code generator and the search spaces: the widest
 * vector register and how many there are, which bound a register-blocked micro-kernel (rows x
 * vectors accumulators plus the operands must fit, or the tile spills). */
typedef struct tt_vector_isa {
    char name[16];    /* "avx512", "avx2", "avx", "sse", "neon", "scalar" */
    int vector_bytes; /* widest vector register (4: none) */
    int vector_regs;  /* architectural vector registers */
    bool fma;         /* fused multiply-add */
} tt_vector_isa;

/* The vector ISA of a CPU target.  `host_features` is LLVM's feature string of this machine
 * ("+avx2,-avx512f,..."; codegen's tt_codegen_host), used when the target has no triple; the
 * target's -mattr is applied after it, so "-mattr=-avx512f" narrows the host.  A cross target is
 * judged by its triple, -mcpu and -mattr.  Never fails: unknown CPUs get the architecture's
 * baseline (x86-64: SSE, aarch64: NEON). */
void tt_target_vector_isa(const tt_target *t, const char *host_features, tt_vector_isa *out);

/* The data caches a core sees, which bound a schedule's cache tiles the way the vector registers
 * bound its register tile. */
typedef struct tt_cpu_caches {
    int64_t l1d_bytes; /* level-1 data cache of one core */
    int64_t l2_bytes;  /* level-2 cache of one core (or its share) */
} tt_cpu_caches;

/* Typical sizes (32 KiB L1d, 1 MiB L2) for a CPU whose caches are not known here: a farm device,
 * a cross target. */
void tt_cpu_caches_typical(tt_cpu_caches *out);
/* This machine's caches (sysconf, then /sys/devices/system/cpu/cpu0/cache), each falling back to
 * the typical size when the system does not say. */
void tt_cpu_caches_host(tt_cpu_caches *out);

#endif
