#include "verify.h"

#include "../base/tensor_mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tt_fill_random(void *buf, tt_dtype t, int64_t n, uint64_t seed)
{
    tt_rng r;
    tt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        tt_value v;
        if (tt_dtype_is_float(t))
            v.f = tt_rng_uniform(&r) * 2.0 - 1.0;
        else if (t == TT_DT_BOOL) /* masks: both values as often */
            v.i = (int64_t)tt_rng_below(&r, 2);
        else
            v.i = (int64_t)tt_rng_below(&r, 16) - 8;
        tt_buffer_set(buf, t, i, v);
    }
}

void tt_fill_input(const tt_dag *dag, int op, void *buf, uint64_t seed)
{
    const tt_op *o = &dag->ops.data[op];
    int64_t n = tt_op_numel(o), extent = 0;
    if (!tt_dtype_is_float(o->dtype) && o->dtype != TT_DT_BOOL)
        extent = tt_dag_index_extent(dag, op);
    if (extent <= 0) {
        tt_fill_random(buf, o->dtype, n, seed);
        return;
    }
    tt_rng r;
    tt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        tt_value v = {.i = (int64_t)tt_rng_below(&r, (uint64_t)extent)};
        tt_buffer_set(buf, o->dtype, i, v);
    }
}

tt_status tt_verify_program(const tt_dag *dag, const tt_program *prog, uint64_t seed, double rtol,
                            double atol, tt_verify_result *res, tt_errbuf *err)
{
    int params[64], nin;
    int np = tt_dag_params(dag, params, 64, &nin);
    tt_verify_result local = {0};
    if (!res)
        res = &local;
    memset(res, 0, sizeof(*res));
    if (np != prog->nparams || nin != prog->ninputs)
        return tt_err(err, TT_ERR_INVALID_ARG, "program has %d parameters, the DAG %d",
                      prog->nparams, np);
    void *want[64] = {0}, *got[64] = {0};
    tt_status r = TT_OK;
    for (int i = 0; i < np; i++) {
        const tt_op *op = &dag->ops.data[params[i]];
        size_t bytes = (size_t)tt_op_numel(op) * (size_t)tt_dtype_bytes(op->dtype);
        want[i] = malloc(bytes);
        got[i] = i < nin ? want[i] : malloc(bytes);
        if (!want[i] || !got[i]) {
            r = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (i < nin) {
            tt_fill_input(dag, params[i], want[i], seed + (uint64_t)i * 7919);
        } else {
            /* Outputs start as NaN so an element nobody wrote cannot pass. */
            tt_value nan = {.f = NAN};
            if (!tt_dtype_is_float(op->dtype))
                nan.i = 0x5a5a5a5a;
            for (int64_t k = 0; k < tt_op_numel(op); k++) {
                tt_buffer_set(want[i], op->dtype, k, nan);
                tt_buffer_set(got[i], op->dtype, k, nan);
            }
        }
    }
    if ((r = tt_dag_eval(dag, want, err))) {
        tt_err_prefix(err, r, "reference evaluation");
        goto out;
    }
    /* the program may read the weights in its own layout (LR) */
    void *args[64];
    if ((r = tt_program_args(dag, prog, got, args, err)))
        goto out;
    r = tt_interp_run(prog, args, err);
    tt_program_args_free(prog, got, args);
    if (r) {
        tt_err_prefix(err, r, "interpreter");
        goto out;
    }
    r = tt_verify_outputs(dag, got, want, rtol, atol, res, err);
out:
    for (int i = 0; i < np; i++) {
        if (got[i] != want[i])
            free(got[i]);
        free(want[i]);
    }
    return r;
}

tt_status tt_verify_outputs(const tt_dag *dag, void *const *got, void *const *want, double rtol,
                            double atol, tt_verify_result *res, tt_errbuf *err)
{
    int params[64], nin;
    int np = tt_dag_params(dag, params, 64, &nin);
    tt_verify_result local = {0};
    tt_status r = TT_OK;
    if (!res)
        res = &local;
    memset(res, 0, sizeof(*res));
    for (int i = nin; i < np; i++) {
        const tt_op *op = &dag->ops.data[params[i]];
        /* Normwise, as the measuring child checks (rpc/measure.c): rtol of the output's largest
         * finite magnitude, since reductions round partial sums that large. */
        double scale = 0;
        for (int64_t k = 0; k < tt_op_numel(op); k++) {
            tt_value b = tt_buffer_get(want[i], op->dtype, k);
            double y = fabs(tt_dtype_is_float(op->dtype) ? b.f : (double)b.i);
            if (isfinite(y) && y > scale)
                scale = y;
        }
        for (int64_t k = 0; k < tt_op_numel(op); k++) {
            tt_value a = tt_buffer_get(got[i], op->dtype, k),
                     b = tt_buffer_get(want[i], op->dtype, k);
            double x = tt_dtype_is_float(op->dtype) ? a.f : (double)a.i;
            double y = tt_dtype_is_float(op->dtype) ? b.f : (double)b.i;
            double d = fabs(x - y);
            bool bad = isnan(x) || isnan(y) || d > atol + rtol * scale;
            if (isinf(x) && isinf(y) && (x > 0) == (y > 0))
                bad = false, d = 0;
            res->checked++;
            if (!isnan(d) && d > res->max_abs_err)
                res->max_abs_err = d;
            if (!isnan(d) && fabs(y) > 0 && d / fabs(y) > res->max_rel_err)
                res->max_rel_err = d / fabs(y);
            if (bad) {
                if (res->mismatches++ == 0)
                    r = tt_err(err, TT_ERR_RUNTIME,
                               "output '%s' differs at element %lld: got %.9g, expected %.9g",
                               op->name, (long long)k, x, y);
            }
        }
    }
    return r;
}

/* Bytes of the packed buffer of parameter `b` (64 past its end for vector reads). */
static size_t packed_bytes(const tt_buffer *b)
{
    return (size_t)b->layout.size * (size_t)tt_dtype_bytes(b->dtype) + 64;
}

tt_status tt_program_args(const tt_dag *dag, const tt_program *prog, void *const *args, void **out,
                          tt_errbuf *err)
{
    int params[64];
    int np = tt_dag_params(dag, params, 64, NULL);
    for (int i = 0; i < np && i < 64; i++)
        out[i] = args[i];
    for (int i = 0; i < np && i < 64; i++) {
        const tt_buffer *b = tt_program_param(prog, i);
        if (!b || !b->layout.nparts)
            continue;
        const tt_op *op = &dag->ops.data[params[i]];
        size_t esize = (size_t)tt_dtype_bytes(op->dtype);
        if (!(out[i] = tt_tensor_alloc(packed_bytes(b)))) {
            out[i] = args[i];
            tt_program_args_free(prog, args, out);
            return tt_err(err, TT_ERR_NOMEM, "out of memory packing '%s'", op->name);
        }
        tt_layout_pack(&b->layout, op->ndim, op->shape, esize, args[i], out[i]);
    }
    return TT_OK;
}

void tt_program_args_free(const tt_program *prog, void *const *args, void **out)
{
    for (int i = 0; i < prog->nparams && i < 64; i++)
        if (out[i] != args[i]) {
            tt_tensor_free(out[i], packed_bytes(tt_program_param(prog, i)));
            out[i] = args[i];
        }
}
