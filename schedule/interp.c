/* The loop-IR interpreter: the correctness oracle for every schedule and code generator.
 * Slow and strict: every access is bounds-checked and local buffers start as NaN. */
#include "loop_ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const tt_program *p;
    void **bufs;
    int64_t *vars;
    tt_errbuf *err;
    tt_eval_env env;
} interp;

static tt_status oob(interp *it, uint32_t buf, int64_t index, const char *what)
{
    const tt_buffer *b = &it->p->bufs.data[buf];
    return tt_err(it->err, TT_ERR_RUNTIME, "%s of buffer '%s' out of bounds: index %lld, size %lld",
                  what, b->name, (long long)index, (long long)b->size);
}

static tt_status do_load(void *ctx, const tt_expr *node, int64_t index, tt_value *out)
{
    interp *it = ctx;
    const tt_buffer *b = &it->p->bufs.data[node->b];
    if (index < 0 || index >= b->size)
        return oob(it, node->b, index, "load");
    *out = tt_buffer_get(it->bufs[node->b], b->dtype, index);
    return TT_OK;
}

static tt_status run(interp *it, tt_sid id)
{
    const tt_stmt *s = &it->p->stmts.data[id];
    tt_status r;
    tt_value v, ix;
    switch (s->kind) {
    case TT_STMT_FOR:
        for (int64_t i = 0; i < s->extent; i++) {
            it->vars[s->var] = i;
            if ((r = run(it, s->body)))
                return r;
        }
        it->vars[s->var] = TT_VAR_UNBOUND;
        return TT_OK;
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if ((r = run(it, it->p->items.data[s->first + k])))
                return r;
        return TT_OK;
    case TT_STMT_ALLOC: return run(it, s->body);
    case TT_STMT_IF:
        if ((r = tt_expr_eval(&it->p->pool, s->cond, &it->env, &v)))
            return r;
        if (v.i)
            return run(it, s->body);
        return s->orelse ? run(it, s->orelse) : TT_OK;
    case TT_STMT_STORE: {
        const tt_buffer *b = &it->p->bufs.data[s->buf];
        if ((r = tt_expr_eval(&it->p->pool, s->index, &it->env, &ix)))
            return r;
        if (ix.i < 0 || ix.i >= b->size)
            return oob(it, s->buf, ix.i, "store");
        if ((r = tt_expr_eval(&it->p->pool, s->value, &it->env, &v)))
            return r;
        tt_dtype vt = (tt_dtype)tt_expr_get(&it->p->pool, s->value)->dtype;
        if (tt_dtype_is_float(b->dtype) && !tt_dtype_is_float(vt))
            v.f = (double)v.i;
        else if (!tt_dtype_is_float(b->dtype) && tt_dtype_is_float(vt))
            v.i = (int64_t)v.f;
        tt_buffer_set(it->bufs[s->buf], b->dtype, ix.i, v);
        return TT_OK;
    }
    default: return TT_OK;
    }
}

tt_status tt_interp_run(const tt_program *p, void *const *args, tt_errbuf *err)
{
    interp it = {p, NULL, NULL, err, {0}};
    tt_status r = TT_OK;
    size_t nb = p->bufs.len;
    it.bufs = calloc(nb ? nb : 1, sizeof(void *));
    it.vars = malloc(sizeof(int64_t) * (p->pool.vars.len ? p->pool.vars.len : 1));
    for (size_t v = 0; it.vars && v < p->pool.vars.len; v++)
        it.vars[v] = TT_VAR_UNBOUND;
    if (!it.bufs || !it.vars) {
        r = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nb; i++) {
        const tt_buffer *b = &p->bufs.data[i];
        if (b->param >= 0) {
            it.bufs[i] = args[b->param];
            continue;
        }
        it.bufs[i] = malloc((size_t)b->size * (size_t)tt_dtype_bytes(b->dtype));
        if (!it.bufs[i]) {
            r = tt_err(err, TT_ERR_NOMEM, "out of memory for buffer '%s'", b->name);
            goto out;
        }
        /* Poison: reading an element no loop wrote shows up in the result. */
        tt_value poison;
        if (tt_dtype_is_float(b->dtype))
            poison.f = NAN;
        else
            poison.i = 0x5a5a5a5a;
        for (int64_t k = 0; k < b->size; k++)
            tt_buffer_set(it.bufs[i], b->dtype, k, poison);
    }
    it.env.vars = it.vars;
    it.env.load = do_load;
    it.env.ctx = &it;
    r = run(&it, p->root);
    if (r == TT_ERR_RUNTIME && err && !err->msg[0])
        tt_err(err, r, "division by zero, or a variable read outside its loop");
out:
    for (size_t i = 0; it.bufs && i < nb; i++)
        if (p->bufs.data[i].param < 0)
            free(it.bufs[i]);
    free(it.bufs);
    free(it.vars);
    return r;
}

/* ---- printing ---- */

static const char *buf_name(const void *ctx, uint32_t id)
{
    const tt_program *p = ctx;
    return id < p->bufs.len ? p->bufs.data[id].name : "?";
}

static void print_stmt(const tt_program *p, tt_strbuf *sb, tt_sid id, int depth)
{
    const tt_stmt *s = &p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR:
        tt_strbuf_indent(sb, depth);
        tt_strbuf_printf(sb, "for %s in 0..%lld", tt_var_name(&p->pool, s->var),
                         (long long)s->extent);
        if (s->ann != TT_ANN_NONE)
            tt_strbuf_printf(sb, " %s", tt_ann_name(s->ann));
        if (s->unroll_max_step)
            tt_strbuf_printf(sb, " auto_unroll_max_step=%d", s->unroll_max_step);
        tt_strbuf_append(sb, ":\n");
        print_stmt(p, sb, s->body, depth + 1);
        return;
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            print_stmt(p, sb, p->items.data[s->first + k], depth);
        return;
    case TT_STMT_ALLOC: {
        const tt_buffer *b = &p->bufs.data[s->buf];
        tt_strbuf_indent(sb, depth);
        tt_strbuf_printf(sb, "alloc %s: %s[", b->name, tt_dtype_name(b->dtype));
        for (int d = 0; d < b->ndim; d++)
            tt_strbuf_printf(sb, "%s%lld", d ? ", " : "", (long long)b->shape[d]);
        tt_strbuf_printf(sb, "] %s\n", b->scope);
        print_stmt(p, sb, s->body, depth);
        return;
    }
    case TT_STMT_IF:
        tt_strbuf_indent(sb, depth);
        tt_strbuf_append(sb, "if ");
        tt_expr_print(sb, &p->pool, s->cond, buf_name, p);
        tt_strbuf_append(sb, ":\n");
        print_stmt(p, sb, s->body, depth + 1);
        if (s->orelse) {
            tt_strbuf_indent(sb, depth);
            tt_strbuf_append(sb, "else:\n");
            print_stmt(p, sb, s->orelse, depth + 1);
        }
        return;
    case TT_STMT_STORE:
        tt_strbuf_indent(sb, depth);
        tt_strbuf_printf(sb, "%s[", p->bufs.data[s->buf].name);
        tt_expr_print(sb, &p->pool, s->index, buf_name, p);
        tt_strbuf_append(sb, "] = ");
        tt_expr_print(sb, &p->pool, s->value, buf_name, p);
        tt_strbuf_append(sb, "\n");
        return;
    default: return;
    }
}

int64_t tt_program_nest_trip(const tt_program *p, tt_sid id, bool vectors_as_one)
{
    const tt_stmt *s = &p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: {
        int64_t inner = tt_program_nest_trip(p, s->body, vectors_as_one);
        int64_t ext =
            s->extent > 0 && !(vectors_as_one && s->ann == TT_ANN_VECTORIZE) ? s->extent : 1;
        return inner > (1 << 24) / ext ? (1 << 24) : inner * ext;
    }
    case TT_STMT_SEQ: {
        int64_t m = 1;
        for (uint32_t k = 0; k < s->n; k++) {
            int64_t t = tt_program_nest_trip(p, p->items.data[s->first + k], vectors_as_one);
            m = t > m ? t : m;
        }
        return m;
    }
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return tt_program_nest_trip(p, s->body, vectors_as_one);
    default: return 1;
    }
}

char *tt_program_print(const tt_program *p)
{
    tt_strbuf sb = {0};
    tt_strbuf_append(&sb, "def kernel(");
    for (int i = 0; i < p->nparams; i++)
        for (size_t b = 0; b < p->bufs.len; b++)
            if (p->bufs.data[b].param == i) {
                const tt_buffer *bf = &p->bufs.data[b];
                tt_strbuf_printf(&sb, "%s%s: %s[", i ? ", " : "", bf->name,
                                 tt_dtype_name(bf->dtype));
                for (int d = 0; d < bf->ndim; d++)
                    tt_strbuf_printf(&sb, "%s%lld", d ? ", " : "", (long long)bf->shape[d]);
                tt_strbuf_append(&sb, "]");
                if (bf->layout.nparts) {
                    char lay[512];
                    tt_strbuf_printf(&sb, " packed %s",
                                     tt_layout_print(&bf->layout, lay, sizeof(lay)));
                }
            }
    tt_strbuf_append(&sb, "):\n");
    print_stmt(p, &sb, p->root, 1);
    return tt_strbuf_take(&sb);
}
