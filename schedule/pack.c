/* Programs that pack constant inputs into the layouts kernels read them in (loop_ir.h). */
#include "loop_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tt_sid push_stmt(tt_program *p, tt_stmt s)
{
    if (TT_VEC_PUSH(&p->stmts, s))
        return 0;
    return (tt_sid)(p->stmts.len - 1);
}

tt_status tt_pack_program(const tt_program *prog, int param, tt_program **out, tt_errbuf *err)
{
    *out = NULL;
    const tt_buffer *src = tt_program_param(prog, param);
    if (!src || !src->layout.nparts || param >= prog->ninputs)
        return tt_err(err, TT_ERR_INVALID_ARG, "parameter %d is not a packed input", param);
    const tt_layout *l = &src->layout;
    tt_program *p = calloc(1, sizeof(*p));
    if (!p)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_expr_pool_init(&p->pool);
    tt_expr_pool *ep = &p->pool;
    tt_stmt none = {0};
    char name[160];
    snprintf(name, sizeof(name), "%s_packed", src->name);
    tt_buffer in = *src, packed;
    memset(&in.layout, 0, sizeof(in.layout));
    in.name = tt_arena_strdup(&ep->strings, src->name);
    in.param = 0;
    int64_t stride = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        in.strides[d] = stride;
        stride *= in.shape[d];
    }
    in.size = stride;
    memset(&packed, 0, sizeof(packed));
    packed.name = tt_arena_strdup(&ep->strings, name);
    packed.dtype = src->dtype;
    packed.ndim = 1;
    packed.shape[0] = l->size;
    packed.strides[0] = 1;
    packed.size = l->size;
    snprintf(packed.scope, sizeof(packed.scope), "global");
    packed.param = 1;
    p->nparams = 2;
    p->ninputs = 1;
    p->name = strdup(name);
    if (TT_VEC_PUSH(&p->stmts, none) || TT_VEC_PUSH(&p->bufs, in) ||
        TT_VEC_PUSH(&p->bufs, packed) || !p->name)
        goto oom;
    /* One loop per part, outer to inner: packed[i] = src[index of part values] or 0 */
    uint32_t var[TT_MAX_LAYOUT_PARTS];
    tt_eid dst = tt_expr_int(ep, 0), idx[TT_MAX_DIMS] = {0};
    for (int k = 0; k < l->nparts; k++) {
        const tt_layout_part *lp = &l->parts[k];
        char vn[32];
        snprintf(vn, sizeof(vn), "p%d", k);
        if (!(var[k] = tt_var_new(ep, vn)))
            goto oom;
        tt_eid v = tt_expr_var(ep, var[k]);
        dst = tt_add(ep, tt_mul(ep, dst, tt_expr_int(ep, lp->extent)), v);
        tt_eid term = tt_mul(ep, v, tt_expr_int(ep, lp->inner));
        idx[lp->dim] = idx[lp->dim] ? tt_add(ep, idx[lp->dim], term) : term;
    }
    tt_eid flat = tt_expr_int(ep, 0), in_range = 0;
    for (int d = 0; d < in.ndim; d++) {
        tt_eid i = idx[d] ? idx[d] : tt_expr_int(ep, 0);
        flat = tt_add(ep, flat, tt_mul(ep, i, tt_expr_int(ep, in.strides[d])));
        /* a part's values may run past the dimension where a split does not divide it */
        int64_t reach = 0;
        for (int k = 0; k < l->nparts; k++)
            if (l->parts[k].dim == d)
                reach += (l->parts[k].extent - 1) * l->parts[k].inner;
        if (reach >= in.shape[d]) {
            tt_eid c = tt_expr_binary(ep, TT_EXPR_LT, i, tt_expr_int(ep, in.shape[d]));
            in_range = in_range ? tt_expr_binary(ep, TT_EXPR_AND, in_range, c) : c;
        }
    }
    tt_eid zero = tt_dtype_is_float(src->dtype) ? tt_expr_float(ep, src->dtype, 0)
                                                : tt_expr_cast(ep, src->dtype, tt_expr_int(ep, 0));
    tt_eid value = tt_expr_load(ep, src->dtype, 0, flat);
    if (in_range)
        value = tt_expr_select(ep, in_range, value, zero);
    tt_stmt store = {.kind = TT_STMT_STORE, .buf = 1, .index = dst, .value = value};
    tt_sid body = push_stmt(p, store);
    for (int k = l->nparts - 1; k >= 0 && body; k--) {
        tt_stmt loop = {
            .kind = TT_STMT_FOR, .var = var[k], .extent = l->parts[k].extent, .body = body};
        body = push_stmt(p, loop);
    }
    if (!body || ep->oom)
        goto oom;
    p->root = body;
    *out = p;
    return TT_OK;
oom:
    tt_program_free(p);
    return tt_err(err, TT_ERR_NOMEM, "out of memory");
}
