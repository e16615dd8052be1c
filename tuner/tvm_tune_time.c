/* `tvm-tune lower --time`: one schedule compiled and timed on this machine exactly as the tuner
 * times a candidate (the sandboxed child of rpc/measure.h, random inputs, constant inputs packed
 * in the layouts the program asks for), so that a record, a hand-written step list or the default
 * schedule can be compared without a tuning run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../rpc/measure_proto.h"
#include "../schedule/layout.h"
#include "../schedule/verify.h"
#include "tune_int.h"
#include "tvm_tune_cli.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cli_time_program(const tt_workload *w, const tt_program *prog, const char *target_text,
                     const tt_measure_options *mo, uint64_t seed)
{
    tt_errbuf err = {{0}};
    tt_target target;
    if (tt_target_parse_user(target_text, &target, &err)) {
        fprintf(stderr, "tvm-tune lower: --target: %s\n", err.msg);
        return 1;
    }
    if (strcmp(target.kind, "llvm") || target.triple[0]) {
        fprintf(stderr, "tvm-tune lower: --time runs on this CPU only (target 'llvm'), not '%s'\n",
                target_text);
        return 1;
    }
    const tt_dag *d = &w->dag;
    int params[64], ninputs = 0;
    int nparams = tt_dag_params(d, params, 64, &ninputs);
    if (nparams > 64 || nparams != prog->nparams) {
        fprintf(stderr, "tvm-tune lower: --time: %d parameters (at most 64 are timed)\n", nparams);
        return 1;
    }
    tt_measure_buffer bufs[64];
    void *data[64] = {0};
    int rc = 1;
    char dir[4096], so[4200];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/tvm-tune-time-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "tvm-tune lower: --time: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(so, sizeof(so), "%s/kernel.so", dir);
    for (int i = 0; i < nparams; i++) {
        const tt_op *op = &d->ops.data[params[i]];
        const tt_buffer *b = tt_program_param(prog, i);
        size_t esize = (size_t)tt_dtype_bytes(op->dtype);
        int64_t n = b && b->layout.nparts ? b->layout.size : tt_op_numel(op);
        if (posix_memalign(&data[i], 64, (size_t)n * esize + 64)) {
            fprintf(stderr, "tvm-tune lower: --time: out of memory for '%s'\n", op->name);
            goto out;
        }
        if (i < ninputs) {
            /* Random values, packed as the program reads them (a layout rewrite, LR). */
            void *dense = data[i];
            if (b && b->layout.nparts &&
                posix_memalign(&dense, 64, (size_t)tt_op_numel(op) * esize + 64)) {
                fprintf(stderr, "tvm-tune lower: --time: out of memory for '%s'\n", op->name);
                goto out;
            }
            tt_fill_input(d, params[i], dense, seed + (uint64_t)i * 7919);
            if (dense != data[i]) {
                tt_layout_pack(&b->layout, op->ndim, op->shape, esize, dense, data[i]);
                free(dense);
            }
        } else {
            memset(data[i], 0, (size_t)n * esize);
        }
        bufs[i] = (tt_measure_buffer){.elem = tt_tune_measure_elem(op->dtype),
                                      .count = n,
                                      .data = i < ninputs ? data[i] : NULL,
                                      .constant = i < ninputs && (op->attrs & TT_OP_ATTR_CONSTANT)};
    }
    tt_codegen_stats stats = {0};
    if (tt_codegen_llvm(prog, &target, "kernel", so, NULL, &stats, &err)) {
        fprintf(stderr, "tvm-tune lower: --time: %s\n", err.msg);
        goto out;
    }
    tt_measure_result res;
    if (tt_measure_run(so, "kernel", bufs, nparams, ninputs, mo, &res, &err)) {
        fprintf(stderr, "tvm-tune lower: --time: %s\n", err.msg);
        goto out;
    }
    if (res.error_no) {
        fprintf(stderr, "tvm-tune lower: --time: error %d: %s\n", res.error_no, res.error_text);
        goto out;
    }
    double sorted[TT_MEASURE_MAX_REPEAT];
    memcpy(sorted, res.costs, sizeof(double) * (size_t)res.ncosts);
    qsort(sorted, (size_t)res.ncosts, sizeof(double), compare_doubles);
    double median = sorted[res.ncosts / 2], best = sorted[0];
    printf("time: median %.4f ms, fastest %.4f ms, %.2f GFLOPS at the median (%d samples of %d "
           "call%s, cache flush %s)\n",
           median * 1e3, best * 1e3, median > 0 ? w->flops / median / 1e9 : 0.0, res.ncosts,
           res.number, res.number == 1 ? "" : "s",
           tt_measure_flush_name(mo->cache_flush, res.llc_share));
    rc = 0;
out:
    for (int i = 0; i < nparams; i++)
        free(data[i]);
    unlink(so);
    rmdir(dir);
    return rc;
}
