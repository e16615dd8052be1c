/* Checking a lowered program against the definition: random inputs, the reference evaluator
 * (tt_dag_eval) on one side, the interpreter on the other, compared with a tolerance. */
#ifndef TT_SCHEDULE_VERIFY_H
#define TT_SCHEDULE_VERIFY_H

#include "loop_ir.h"

typedef struct tt_verify_result {
    double max_abs_err;
    double max_rel_err;
    int64_t mismatches; /* elements outside the tolerance */
    int64_t checked;    /* output elements compared */
} tt_verify_result;

/* Fills `n` elements of a buffer with reproducible values in [-1, 1) (integers in [-8, 8)). */
void tt_fill_random(void *buf, tt_dtype t, int64_t n, uint64_t seed);
/* The same for placeholder `op` of `dag`, except that integers that index a dimension on their own
 * (tt_dag_index_extent: a Gather's or a bilinear Resize's indices) stay inside it: [0, extent).
 * Values in [-8, 8) read out of bounds there, and the reference then fails the whole task. */
void tt_fill_input(const tt_dag *dag, int op, void *buf, uint64_t seed);

/* Compares every output of `dag` (parameters from the first output on) of `got` with `want`:
 * |a-b| <= atol + rtol*max|b| (normwise: the largest finite magnitude of the output), NaN never
 * equal, infinities equal when their signs agree.  `got` and `want` are parameter arrays in
 * tt_dag_params() order.  TT_ERR_RUNTIME names the first mismatch (output, index, both values). */
tt_status tt_verify_outputs(const tt_dag *dag, void *const *got, void *const *want, double rtol,
                            double atol, tt_verify_result *res, tt_errbuf *err);

/* Runs `prog` in the interpreter and `dag` through the reference evaluator on the same random
 * inputs (from `seed`) and compares every output element as above.  Returns TT_OK when all match,
 * TT_ERR_RUNTIME with the first mismatch (output, index, both values) otherwise; execution errors
 * are returned as they are. */
tt_status tt_verify_program(const tt_dag *dag, const tt_program *prog, uint64_t seed, double rtol,
                            double atol, tt_verify_result *res, tt_errbuf *err);

/* The arguments of `prog` for dense parameter arrays `args` (tt_dag_params() order): the same
 * pointers, except for constant inputs the program reads packed (the LR step), packed into new
 * buffers placed as a measurement places them (base/tensor_mem.h).  Release with
 * tt_program_args_free. */
tt_status tt_program_args(const tt_dag *dag, const tt_program *prog, void *const *args, void **out,
                          tt_errbuf *err);
/* Frees what tt_program_args allocated (the out[i] that differ from args[i]). */
void tt_program_args_free(const tt_program *prog, void *const *args, void **out);

#endif
