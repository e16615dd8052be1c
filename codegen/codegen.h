/* codegen/: loop IR -> native code through LLVM (host and cross targets), and loop IR -> OpenCL C
 * (GPUs; see cl_artifact.h for what a device receives).
 *
 * A kernel is one exported function with the C signature
 *
 *     int32_t NAME(void *const *args);
 *
 * where args[i] points at the buffer of parameter i of the program (tt_program: inputs in DAG
 * order, then outputs), each a dense row-major array of its dtype.  It returns 0.  Parallel loops
 * of host kernels call our thread pool (pool.h), which every host library carries; those of
 * cross-compiled kernels call the device's libgomp (GOMP_parallel); math functions come from
 * libm, resolved when the shared object is loaded.
 *
 * Thread-safe: every call creates its own LLVM context. */
#ifndef TT_CODEGEN_CODEGEN_H
#define TT_CODEGEN_CODEGEN_H

#include "../schedule/loop_ir.h"
#include "../schedule/target.h"
#include "loader.h"

/* Options of one compilation. */
typedef struct tt_codegen_options {
    int opt_level;    /* 0..3, default 3 */
    int max_vector;   /* widest loop vectorised explicitly (lanes), default 64 */
    int unroll_limit; /* largest `unroll` loop expanded in full, default 64 */
    /* Libraries (tvm-compile): when set, the module also exports
     *     int32_t typed_entry(T0 *p0, T1 *p1, ...)
     * taking the parameters as pointers in order, and `entry` itself stays internal. */
    const char *typed_entry;
    /* tt_codegen_llvm writes the relocatable object itself to `so_path`, unlinked: the loader
     * (tt_kernel_load) places it in memory on x86-64, which saves spawning the linker (~20-40 ms
     * per candidate).  For kernels measured on this machine; devices receive shared objects. */
    bool object_only;
} tt_codegen_options;

typedef struct tt_codegen_stats {
    double emit_s;   /* loop IR -> LLVM IR */
    double opt_s;    /* optimisation passes */
    double object_s; /* machine code */
    double link_s;   /* object -> shared object */
    int vector_loops, scalar_fallbacks, parallel_loops, unrolled_loops;
    int padded_updates;    /* multiply-adds of padded inputs skipped where the input is padding */
    int guarded_loops;     /* loops of padded updates behind one branch on guard terms they share */
    int guarded_updates;   /* padded updates behind a branch of their own (terms that change
                            * inside every loop around them) */
    int decided_guards;    /* guards or guard terms of padded updates and loads known while
                            * emitting (unrolled) */
    int masked_loads;      /* vector loads whose lanes are guarded (a reduction's last partial
                            * vector): llvm.masked.load */
    int pattern_loads;     /* vector loads of a few elements that a known pattern spreads over
                            * the lanes (a grouped convolution's input: one value per group) */
    int run_loads;         /* vector loads of a few runs of elements, masked and shuffled */
    int gathered_loads;    /* vector loads gathered lane by lane */
    int uniform_guards;    /* guards of vector code that depend on the lane but agree in every
                            * lane (a concatenation's c < 96 on 16 channels): one branch */
    int interior_loops;    /* loops emitted twice behind one branch: where no padded update
                            * under them reads padding (their guards known), and elsewhere */
    int peeled_loops;      /* loops emitted as first iteration, middle, last for their padding */
    int unpeeled_loops;    /* loops left unpeeled: their copies would pass the code budget */
    int rolled_copies;     /* loops copying through or filling local buffers too large for
                            * registers, kept from LLVM's unrolling */
    int rolled_bodies;     /* loops kept from LLVM's unrollers: around a promoted tile, or
                            * reductions with large bodies (llvm_emit.c) */
    int promoted_tiles;    /* loops across which an accumulator tile was kept in values */
    int prefetched_panels; /* register tiles' inner reductions that prefetch the next panel of
                            * their packed weights (llvm_prefetch.c) */
    int64_t emitted_instructions; /* LLVM instructions before optimisation */
} tt_codegen_stats;

/* The CPU this process runs on, as an LLVM triple, CPU name and feature string.  The features are
 * read from the CPU itself (LLVMGetHostCPUFeatures), so a CPU this LLVM does not know by name
 * ("generic") still gets its real vector units.  Strings are static. */
void tt_codegen_host(const char **triple, const char **cpu, const char **features);

/* The vector ISA of CPU target `t` (tt_target_vector_isa with this machine's features). */
void tt_codegen_vector_isa(const tt_target *t, tt_vector_isa *out);

/* Compiles `p` for target `t` into the shared object `so_path`, exporting `entry`.  Returns
 * TT_ERR_UNSUPPORTED for a target kind other than llvm/c, TT_ERR_IO when writing or linking
 * fails, with LLVM's or the linker's message in err. */
tt_status tt_codegen_llvm(const tt_program *p, const tt_target *t, const char *entry,
                          const char *so_path, const tt_codegen_options *opt,
                          tt_codegen_stats *stats, tt_errbuf *err);

/* Compiles `p` into the object file `obj_path` (for libraries: several objects are linked by
 * tt_codegen_link_shared or archived by tt_codegen_archive).  Errors as tt_codegen_llvm. */
tt_status tt_codegen_llvm_object(const tt_program *p, const tt_target *t, const char *entry,
                                 const char *obj_path, const tt_codegen_options *opt,
                                 tt_codegen_stats *stats, tt_errbuf *err);

/* Links objects into a shared object with ld.lld (any architecture).  `host`: the objects run on
 * this machine, so the kernels' thread pool is linked in (tt_codegen_write_pool_object; the
 * library is then never unloaded, since its workers run its code) and this machine's libm is
 * named as a dependency; `extra` are more linker inputs or flags (may be NULL).  TT_ERR_IO with
 * the linker's message on failure. */
tt_status tt_codegen_link_shared(const char *const *objs, int nobjs, const char *so_path, bool host,
                                 const char *const *extra, int nextra, tt_errbuf *err);

/* Writes the kernels' thread pool (pool.h) as a position-independent object for this machine. */
tt_status tt_codegen_write_pool_object(const char *path, tt_errbuf *err);

/* The first of `names` found on PATH (a versioned name before a plain one: "ld.lld-14",
 * "ld.lld"), its path into out.  False when none is. */
bool tt_codegen_find_tool(const char *const *names, int nnames, char *out, size_t n);

/* Writes a static library of `objs` with a symbol index (llvm-ar, any architecture); `host`: the
 * kernels' thread pool goes in too, as with tt_codegen_link_shared (an application linking two
 * such archives takes the pool from the first). */
tt_status tt_codegen_archive(const char *const *objs, int nobjs, const char *a_path, bool host,
                             tt_errbuf *err);

/* The textual LLVM IR of `p` (after optimisation when opt_level > 0), for inspection.  Caller
 * frees. */
tt_status tt_codegen_llvm_ir(const tt_program *p, const tt_target *t, const char *entry,
                             const tt_codegen_options *opt, char **ir, tt_errbuf *err);

/* The assembly the target machine emits for `p` (what the object file holds), for inspection of
 * register tiles, FMA chains and spills.  Caller frees. */
tt_status tt_codegen_llvm_asm(const tt_program *p, const tt_target *t, const char *entry,
                              const tt_codegen_options *opt, char **text, tt_errbuf *err);

/* What a GPU allows one kernel: checked before anything reaches the device, so an invalid
 * candidate costs no measurement (TVM's INSTANTIATION_ERROR).  0 = no limit. */
typedef struct tt_gpu_limits {
    int64_t max_threads;       /* work-items per work-group */
    int64_t max_block[3];      /* work-items per group on each axis */
    int64_t max_shared_bytes;  /* __local memory per work-group */
    int64_t max_private_bytes; /* private arrays per work-item */
    int64_t max_vthread;       /* extent of a vthread loop */
} tt_gpu_limits;

/* Defaults for a target's device kind when the device has not told us its own: 256 threads,
 * 48 KiB local memory (what OpenCL GPUs commonly offer), 16 KiB private arrays, vthread 8. */
void tt_gpu_limits_default(tt_gpu_limits *lim);

/* Which of a GPU's limits a kernel broke (tt_opencl_stats.broke), so that a caller can name the
 * option or device property behind it without reading the message. */
typedef enum tt_gpu_limit_kind {
    TT_GPU_LIMIT_NONE = 0,
    TT_GPU_LIMIT_THREADS, /* work-items per work-group, in all or on one axis */
    TT_GPU_LIMIT_SHARED,  /* __local memory per work-group */
    TT_GPU_LIMIT_PRIVATE, /* private arrays per work-item */
    TT_GPU_LIMIT_VTHREAD, /* extent of a vthread loop */
    TT_GPU_LIMIT_GRID,    /* work-groups on one axis */
    TT_GPU_LIMIT_COUNTS,  /* kernels, parameters or workspace buffers of one artifact */
} tt_gpu_limit_kind;

typedef struct tt_opencl_stats {
    int kernels;
    int64_t grid[3], block[3]; /* of the first kernel */
    int64_t shared_bytes;      /* largest of one kernel */
    int barriers, unrolled_loops, guarded_thread_loops;
    int vector_loops; /* vectorised loops written with OpenCL vector types (vloadN/vstoreN) */
    int cross_thread_reductions; /* reductions shared by a work-group (tree in local memory) */
    /* The worst bank conflict of a read of local memory: the most distinct 4-byte words that
     * the first 32 work-items along threadIdx.x (a warp, where x is the fastest axis) read in
     * one phase from one of 32 banks, the other loop variables at 0.  A phase is 128 bytes: all
     * 32 work-items of a scalar read, 8 of a 16-byte vector read.  1 is conflict-free (a
     * broadcast too); 4 means the read takes four passes a phase.  0: no such read. */
    int local_bank_ways;
    int staged_fetches;      /* double-buffered fetches staged through registers */
    tt_gpu_limit_kind broke; /* on TT_ERR_LIMIT, the limit broken; else TT_GPU_LIMIT_NONE */
} tt_opencl_stats;

/* Translates `p` into an OpenCL artifact (cl_artifact.h): one kernel per root loop nest, named
 * `<entry>_<k>`.  Loops bound to blockIdx.{x,y,z} / threadIdx.{x,y,z} become work-group and
 * work-item ids (a loop shorter than the launch is guarded; several loops may share an axis),
 * vectorised loops of one contiguous store become vloadN/vstoreN over OpenCL vector types (others
 * are unrolled), vthread and unroll loops are unrolled, `shared` buffers are __local with barriers
 * around their fills, other buffers computed inside a kernel are private arrays, root intermediates
 * are workspace buffers.
 *
 * TT_ERR_LIMIT when the kernel exceeds `lim` (threads, local or private memory, vthread) and
 * TT_ERR_ILLEGAL_STEP when the bindings cannot run on a GPU (an axis bound twice in one nest, a
 * barrier under thread-dependent control flow); both say which loop or buffer.  `stats`, when
 * given, is filled on success and on TT_ERR_LIMIT (its `broke` then says which limit).  The caller
 * frees *text. */
tt_status tt_codegen_opencl(const tt_program *p, const char *entry, const tt_gpu_limits *lim,
                            char **text, size_t *len, tt_opencl_stats *stats, tt_errbuf *err);

/* What tt_codegen_opencl would say of `p` against `lim`, without keeping the text: the search
 * asks it before it offers a GPU candidate, so what it offers is what the build accepts (about the
 * cost of lowering). */
tt_status tt_codegen_opencl_check(const tt_program *p, const tt_gpu_limits *lim, tt_errbuf *err);

#endif
