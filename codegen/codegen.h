/* codegen/: loop IR -> native code through LLVM (host and cross targets).
 *
 * A kernel is one exported function with the C signature
 *
 *     int32_t NAME(void *const *args);
 *
 * where args[i] points at the buffer of parameter i of the program (tt_program: inputs in DAG
 * order, then outputs), each a dense row-major array of its dtype.  It returns 0.  Parallel loops
 * call libgomp's GOMP_parallel; math functions come from libm; both are resolved when the shared
 * object is loaded (the loader links neither).
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
} tt_codegen_options;

typedef struct tt_codegen_stats {
    double emit_s;   /* loop IR -> LLVM IR */
    double opt_s;    /* optimisation passes */
    double object_s; /* machine code */
    double link_s;   /* object -> shared object */
    int vector_loops, scalar_fallbacks, parallel_loops, unrolled_loops;
} tt_codegen_stats;

/* The CPU this process runs on, as an LLVM triple, CPU name and feature string.  The features are
 * read from the CPU itself (LLVMGetHostCPUFeatures), so a CPU this LLVM does not know by name
 * ("generic") still gets its real vector units.  Strings are static. */
void tt_codegen_host(const char **triple, const char **cpu, const char **features);

/* Compiles `p` for target `t` into the shared object `so_path`, exporting `entry`.  Returns
 * TT_ERR_UNSUPPORTED for a target kind other than llvm/c, TT_ERR_IO when writing or linking
 * fails, with LLVM's or the linker's message in err. */
tt_status tt_codegen_llvm(const tt_program *p, const tt_target *t, const char *entry,
                          const char *so_path, const tt_codegen_options *opt,
                          tt_codegen_stats *stats, tt_errbuf *err);

/* The textual LLVM IR of `p` (after optimisation when opt_level > 0), for inspection.  Caller
 * frees. */
tt_status tt_codegen_llvm_ir(const tt_program *p, const tt_target *t, const char *entry,
                             const tt_codegen_options *opt, char **ir, tt_errbuf *err);

#endif
