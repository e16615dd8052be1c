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

/* `b` made a dense row-major buffer of its logical shape. */
static void make_dense(tt_buffer *b)
{
    memset(&b->layout, 0, sizeof(b->layout));
    int64_t stride = 1;
    for (int d = b->ndim - 1; d >= 0; d--) {
        b->strides[d] = stride;
        stride *= b->shape[d];
    }
    b->size = stride;
}

/* The loop nest that writes buffer `dst` of p (the packed buffer, layout l) from buffer `src`,
 * whose dense row-major form (make_dense) is `row`, walking dst in order, padding with zeros: its
 * root statement, or 0 when out of memory. */
static tt_sid pack_nest(tt_program *p, const tt_buffer *row, const tt_layout *l, uint32_t src,
                        uint32_t dst)
{
    tt_expr_pool *ep = &p->pool;
    tt_dtype dtype = row->dtype;
    int ndim = row->ndim;
    const int64_t *shape = row->shape, *strides = row->strides;
    /* One loop per part, outer to inner: packed[i] = src[index of part values] or 0 */
    uint32_t var[TT_MAX_LAYOUT_PARTS];
    tt_eid flat_dst = tt_expr_int(ep, 0), idx[TT_MAX_DIMS] = {0};
    for (int k = 0; k < l->nparts; k++) {
        const tt_layout_part *lp = &l->parts[k];
        char vn[32];
        snprintf(vn, sizeof(vn), "p%d", k);
        if (!(var[k] = tt_var_new(ep, vn)))
            return 0;
        tt_eid v = tt_expr_var(ep, var[k]);
        flat_dst = tt_add(ep, tt_mul(ep, flat_dst, tt_expr_int(ep, lp->extent)), v);
        tt_eid term = tt_mul(ep, v, tt_expr_int(ep, lp->inner));
        if (lp->last > 0) /* a panel: the last one moves back (layout.h) */
            term = tt_expr_binary(ep, TT_EXPR_MIN, term, tt_expr_int(ep, lp->last));
        idx[lp->dim] = idx[lp->dim] ? tt_add(ep, idx[lp->dim], term) : term;
    }
    tt_eid flat = tt_expr_int(ep, 0), in_range = 0;
    for (int d = 0; d < ndim; d++) {
        tt_eid i = idx[d] ? idx[d] : tt_expr_int(ep, 0);
        flat = tt_add(ep, flat, tt_mul(ep, i, tt_expr_int(ep, strides[d])));
        /* a part's values may run past the dimension where a split does not divide it */
        int64_t reach = 0;
        for (int k = 0; k < l->nparts; k++)
            if (l->parts[k].dim == d)
                reach += l->parts[k].last > 0 ? l->parts[k].last
                                              : (l->parts[k].extent - 1) * l->parts[k].inner;
        if (reach >= shape[d]) {
            tt_eid c = tt_expr_binary(ep, TT_EXPR_LT, i, tt_expr_int(ep, shape[d]));
            in_range = in_range ? tt_expr_binary(ep, TT_EXPR_AND, in_range, c) : c;
        }
    }
    tt_eid zero = tt_dtype_is_float(dtype) ? tt_expr_float(ep, dtype, 0)
                                           : tt_expr_cast(ep, dtype, tt_expr_int(ep, 0));
    tt_eid value = tt_expr_load(ep, dtype, src, flat);
    if (in_range)
        value = tt_expr_select(ep, in_range, value, zero);
    tt_stmt store = {.kind = TT_STMT_STORE, .buf = dst, .index = flat_dst, .value = value};
    tt_sid body = push_stmt(p, store);
    for (int k = l->nparts - 1; k >= 0 && body; k--) {
        /* The innermost part walks the packed buffer contiguously, and the tensor too when it
         * is a run of its last dimension: vectors, where the code generator can (it keeps a
         * loop it cannot vectorise scalar). */
        tt_stmt loop = {.kind = TT_STMT_FOR,
                        .ann = k == l->nparts - 1 ? TT_ANN_VECTORIZE : TT_ANN_NONE,
                        .var = var[k],
                        .extent = l->parts[k].extent,
                        .body = body};
        body = push_stmt(p, loop);
    }
    return ep->oom ? 0 : body;
}

/* `b` made a flat buffer of `size` elements named NAME_packed (in p's arena). */
static bool make_packed(tt_program *p, tt_buffer *b, const char *name, int64_t size)
{
    char packed[160];
    snprintf(packed, sizeof(packed), "%s_packed", name);
    if (!(b->name = tt_arena_strdup(&p->pool.strings, packed)))
        return false;
    memset(&b->layout, 0, sizeof(b->layout));
    b->ndim = 1;
    b->shape[0] = size;
    b->strides[0] = 1;
    b->size = size;
    snprintf(b->scope, sizeof(b->scope), "global");
    return true;
}

tt_status tt_pack_program(const tt_program *prog, int param, tt_program **out, tt_errbuf *err)
{
    *out = NULL;
    const tt_buffer *src = tt_program_param(prog, param);
    if (!src || !src->layout.nparts || param >= prog->ninputs)
        return tt_err(err, TT_ERR_INVALID_ARG, "parameter %d is not a packed input", param);
    tt_program *p = calloc(1, sizeof(*p));
    if (!p)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_expr_pool_init(&p->pool);
    tt_stmt none = {0};
    tt_buffer in = *src, packed = {0};
    in.name = tt_arena_strdup(&p->pool.strings, src->name);
    in.param = 0;
    make_dense(&in);
    packed.dtype = src->dtype;
    packed.param = 1;
    p->nparams = 2;
    p->ninputs = 1;
    p->name = malloc(strlen(src->name) + 8);
    if (p->name)
        sprintf(p->name, "%s_packed", src->name);
    if (!in.name || !make_packed(p, &packed, src->name, src->layout.size) || !p->name ||
        TT_VEC_PUSH(&p->stmts, none) || TT_VEC_PUSH(&p->bufs, in) ||
        TT_VEC_PUSH(&p->bufs, packed) || !(p->root = pack_nest(p, &in, &src->layout, 0, 1))) {
        tt_program_free(p);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    *out = p;
    return TT_OK;
}

/* A copy of prog whose strings live in its own pool. */
static tt_program *program_clone(const tt_program *prog)
{
    tt_program *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    if (tt_expr_pool_clone(&prog->pool, &p->pool)) {
        free(p);
        return NULL;
    }
    bool ok = !TT_VEC_RESERVE(&p->stmts, prog->stmts.len) &&
              !TT_VEC_RESERVE(&p->items, prog->items.len) &&
              !TT_VEC_RESERVE(&p->bufs, prog->bufs.len) &&
              (!prog->name || (p->name = strdup(prog->name)));
    if (ok) {
        memcpy(p->stmts.data, prog->stmts.data, prog->stmts.len * sizeof(tt_stmt));
        p->stmts.len = prog->stmts.len;
        if (prog->items.len)
            memcpy(p->items.data, prog->items.data, prog->items.len * sizeof(tt_sid));
        p->items.len = prog->items.len;
        for (size_t b = 0; b < prog->bufs.len && ok; b++) {
            p->bufs.data[b] = prog->bufs.data[b];
            ok =
                (p->bufs.data[b].name = tt_arena_strdup(&p->pool.strings, prog->bufs.data[b].name));
        }
        p->bufs.len = prog->bufs.len;
    }
    p->root = prog->root;
    p->nparams = prog->nparams;
    p->ninputs = prog->ninputs;
    if (!ok) {
        tt_program_free(p);
        return NULL;
    }
    return p;
}

tt_status tt_program_insert_pack_stages(const tt_program *prog, bool parallel, tt_program **out,
                                        tt_errbuf *err)
{
    *out = NULL;
    tt_program *p = program_clone(prog);
    if (!p)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_sid root = p->root;
    for (uint32_t b = 0; b < (uint32_t)prog->bufs.len && root; b++) {
        const tt_buffer *src = &prog->bufs.data[b];
        if (src->param < 0 || src->param >= prog->ninputs || !src->layout.nparts)
            continue;
        /* The parameter becomes the row-major tensor; the kernel's loads keep reading buffer b,
         * now a buffer of the program's own that the pack stage fills first. */
        tt_buffer row = p->bufs.data[b];
        make_dense(&row);
        if (!make_packed(p, &p->bufs.data[b], src->name, src->layout.size) ||
            TT_VEC_PUSH(&p->bufs, row)) {
            root = 0;
            break;
        }
        p->bufs.data[b].param = -1;
        tt_sid nest = pack_nest(p, &row, &src->layout, (uint32_t)p->bufs.len - 1, b);
        if (nest && parallel && p->stmts.data[nest].extent > 1)
            p->stmts.data[nest].ann = TT_ANN_PARALLEL;
        uint32_t first = (uint32_t)p->items.len;
        if (!nest || TT_VEC_PUSH(&p->items, nest) || TT_VEC_PUSH(&p->items, root)) {
            root = 0;
            break;
        }
        tt_stmt seq = {.kind = TT_STMT_SEQ, .first = first, .n = 2};
        tt_sid s = push_stmt(p, seq);
        tt_stmt alloc = {.kind = TT_STMT_ALLOC, .buf = b, .body = s};
        root = s ? push_stmt(p, alloc) : 0;
    }
    if (!root) {
        tt_program_free(p);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    p->root = root;
    *out = p;
    return TT_OK;
}
