#include "expr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int bytes, is_float;
} dtypes[] = {
#define TT_DT_ROW(n, s, b, f) {s, b, f},
    TT_DTYPE_LIST(TT_DT_ROW)
#undef TT_DT_ROW
};
_Static_assert(TT_ARRAY_LEN(dtypes) == TT_DTYPE_COUNT, "dtype table");

static const struct {
    const char *sym;
    int nchild;
} kinds[] = {
#define TT_EK_ROW(n, s, c) {s, c},
    TT_EXPR_KIND_LIST(TT_EK_ROW)
#undef TT_EK_ROW
};
_Static_assert(TT_ARRAY_LEN(kinds) == TT_EXPR_KIND_COUNT, "expr kind table");

static const char *const funcs[] = {
#define TT_FN_ROW(n, s) s,
    TT_FUNC_LIST(TT_FN_ROW)
#undef TT_FN_ROW
};
_Static_assert(TT_ARRAY_LEN(funcs) == TT_FUNC_COUNT, "func table");

const char *tt_dtype_name(tt_dtype t)
{
    return (unsigned)t < TT_DTYPE_COUNT ? dtypes[t].name : "?";
}

int tt_dtype_parse(const char *name, size_t len)
{
    for (int i = 0; i < TT_DTYPE_COUNT; i++)
        if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, name, len) == 0)
            return i;
    return -1;
}

int tt_dtype_bytes(tt_dtype t)
{
    return dtypes[t].bytes;
}

bool tt_dtype_is_float(tt_dtype t)
{
    return dtypes[t].is_float;
}

const char *tt_func_name(tt_func f)
{
    return (unsigned)f < TT_FUNC_COUNT ? funcs[f] : "?";
}

int tt_func_parse(const char *name, size_t len)
{
    for (int i = 0; i < TT_FUNC_COUNT; i++)
        if (strlen(funcs[i]) == len && memcmp(funcs[i], name, len) == 0)
            return i;
    return -1;
}

const char *tt_expr_kind_name(tt_expr_kind k)
{
    return (unsigned)k < TT_EXPR_KIND_COUNT ? kinds[k].sym : "?";
}

void tt_expr_pool_init(tt_expr_pool *p)
{
    memset(p, 0, sizeof(*p));
    tt_arena_init(&p->strings, 4096);
    tt_expr none = {0};
    if (TT_VEC_PUSH(&p->nodes, none))
        p->oom = 1;
    tt_var v0 = {"<none>"};
    if (TT_VEC_PUSH(&p->vars, v0)) /* var id 0 is reserved too */
        p->oom = 1;
}

void tt_expr_pool_free(tt_expr_pool *p)
{
    TT_VEC_FREE(&p->nodes);
    TT_VEC_FREE(&p->args);
    TT_VEC_FREE(&p->vars);
    tt_arena_free(&p->strings);
}

tt_status tt_expr_pool_clone(const tt_expr_pool *src, tt_expr_pool *dst)
{
    tt_expr_pool_init(dst);
    dst->nodes.len = dst->vars.len = 0;
    if (TT_VEC_RESERVE(&dst->nodes, src->nodes.len) || TT_VEC_RESERVE(&dst->args, src->args.len) ||
        TT_VEC_RESERVE(&dst->vars, src->vars.len))
        goto oom;
    memcpy(dst->nodes.data, src->nodes.data, src->nodes.len * sizeof(tt_expr));
    dst->nodes.len = src->nodes.len;
    if (src->args.len)
        memcpy(dst->args.data, src->args.data, src->args.len * sizeof(tt_eid));
    dst->args.len = src->args.len;
    for (size_t i = 0; i < src->vars.len; i++) {
        const char *name = tt_arena_strdup(&dst->strings, src->vars.data[i].name);
        if (!name)
            goto oom;
        dst->vars.data[i].name = name;
    }
    dst->vars.len = src->vars.len;
    return TT_OK;
oom:
    tt_expr_pool_free(dst);
    return TT_ERR_NOMEM;
}

static tt_eid push(tt_expr_pool *p, tt_expr n)
{
    if (p->oom || TT_VEC_PUSH(&p->nodes, n)) {
        p->oom = 1;
        return 0;
    }
    return (tt_eid)(p->nodes.len - 1);
}

uint32_t tt_var_new(tt_expr_pool *p, const char *name)
{
    tt_var v = {tt_arena_strdup(&p->strings, name)};
    if (p->oom || !v.name || TT_VEC_PUSH(&p->vars, v)) {
        p->oom = 1;
        return 0;
    }
    return (uint32_t)(p->vars.len - 1);
}

const char *tt_var_name(const tt_expr_pool *p, uint32_t var)
{
    return var < p->vars.len ? p->vars.data[var].name : "?";
}

tt_eid tt_expr_int(tt_expr_pool *p, int64_t v)
{
    tt_expr n = {.kind = TT_EXPR_INT, .dtype = TT_DT_INT64, .imm.i = v};
    return push(p, n);
}

tt_eid tt_expr_float(tt_expr_pool *p, tt_dtype t, double v)
{
    tt_expr n = {.kind = TT_EXPR_FLOAT, .dtype = (uint8_t)t, .imm.f = v};
    return push(p, n);
}

tt_eid tt_expr_var(tt_expr_pool *p, uint32_t var)
{
    tt_expr n = {.kind = TT_EXPR_VAR, .dtype = TT_DT_INT64, .a = var};
    return push(p, n);
}

static bool is_compare(tt_expr_kind k)
{
    return k >= TT_EXPR_LT && k <= TT_EXPR_NE;
}

tt_eid tt_expr_binary(tt_expr_pool *p, tt_expr_kind k, tt_eid a, tt_eid b)
{
    if (!a || !b)
        return 0;
    tt_dtype ta = p->nodes.data[a].dtype, tb = p->nodes.data[b].dtype;
    /* Mixed operands promote to the float type (a float constant times an int index). */
    tt_dtype t = tt_dtype_is_float(tb) && !tt_dtype_is_float(ta) ? tb : ta;
    if (is_compare(k) || k == TT_EXPR_AND || k == TT_EXPR_OR)
        t = TT_DT_BOOL;
    tt_expr n = {.kind = (uint8_t)k, .dtype = (uint8_t)t, .a = a, .b = b};
    return push(p, n);
}

tt_eid tt_expr_unary(tt_expr_pool *p, tt_expr_kind k, tt_eid a)
{
    if (!a)
        return 0;
    tt_expr n = {.kind = (uint8_t)k,
                 .dtype = k == TT_EXPR_NOT ? TT_DT_BOOL : p->nodes.data[a].dtype,
                 .a = a};
    return push(p, n);
}

tt_eid tt_expr_select(tt_expr_pool *p, tt_eid cond, tt_eid t, tt_eid f)
{
    if (!cond || !t || !f)
        return 0;
    tt_dtype dt = p->nodes.data[t].dtype, df = p->nodes.data[f].dtype;
    tt_expr n = {.kind = TT_EXPR_SELECT,
                 .dtype = tt_dtype_is_float(df) && !tt_dtype_is_float(dt) ? df : dt,
                 .a = cond,
                 .b = t,
                 .c = f};
    return push(p, n);
}

tt_eid tt_expr_cast(tt_expr_pool *p, tt_dtype t, tt_eid a)
{
    if (!a)
        return 0;
    tt_expr n = {.kind = TT_EXPR_CAST, .dtype = (uint8_t)t, .a = a};
    return push(p, n);
}

tt_eid tt_expr_call(tt_expr_pool *p, tt_func f, tt_eid arg)
{
    if (!arg)
        return 0;
    tt_dtype t = p->nodes.data[arg].dtype;
    tt_expr n = {.kind = TT_EXPR_CALL,
                 .dtype = (uint8_t)(tt_dtype_is_float(t) ? t : TT_DT_FLOAT32),
                 .a = arg,
                 .b = (uint32_t)f};
    return push(p, n);
}

tt_eid tt_expr_read(tt_expr_pool *p, tt_dtype t, uint32_t tensor, int n, const tt_eid *idx)
{
    for (int i = 0; i < n; i++)
        if (!idx[i])
            return 0;
    uint32_t first = (uint32_t)p->args.len;
    if (p->oom || TT_VEC_RESERVE(&p->args, (size_t)n)) {
        p->oom = 1;
        return 0;
    }
    for (int i = 0; i < n; i++)
        p->args.data[p->args.len++] = idx[i];
    tt_expr node = {
        .kind = TT_EXPR_READ, .dtype = (uint8_t)t, .n = (uint16_t)n, .a = tensor, .b = first};
    return push(p, node);
}

tt_eid tt_expr_load(tt_expr_pool *p, tt_dtype t, uint32_t buffer, tt_eid index)
{
    if (!index)
        return 0;
    tt_expr n = {.kind = TT_EXPR_LOAD, .dtype = (uint8_t)t, .a = index, .b = buffer};
    return push(p, n);
}

/* ---- structural operations ---- */

tt_eid tt_expr_copy(tt_expr_pool *dst, const tt_expr_pool *src, tt_eid e, const uint32_t *var_map,
                    const uint32_t *tensor_map)
{
    if (!e)
        return 0;
    tt_expr n = src->nodes.data[e];
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT: return push(dst, n);
    case TT_EXPR_VAR:
        if (var_map)
            n.a = var_map[n.a];
        return push(dst, n);
    case TT_EXPR_READ: {
        tt_eid idx[16];
        if (n.n > 16)
            return 0;
        for (int i = 0; i < n.n; i++)
            if (!(idx[i] = tt_expr_copy(dst, src, src->args.data[n.b + (uint32_t)i], var_map,
                                        tensor_map)))
                return 0;
        return tt_expr_read(dst, (tt_dtype)n.dtype, tensor_map ? tensor_map[n.a] : n.a, n.n, idx);
    }
    case TT_EXPR_LOAD:
        n.a = tt_expr_copy(dst, src, n.a, var_map, tensor_map);
        return n.a ? push(dst, n) : 0;
    case TT_EXPR_CALL:
        n.a = tt_expr_copy(dst, src, n.a, var_map, tensor_map);
        return n.a ? push(dst, n) : 0;
    default: break;
    }
    int nc = kinds[n.kind].nchild;
    if (nc >= 1 && !(n.a = tt_expr_copy(dst, src, n.a, var_map, tensor_map)))
        return 0;
    if (nc >= 2 && !(n.b = tt_expr_copy(dst, src, n.b, var_map, tensor_map)))
        return 0;
    if (nc >= 3 && !(n.c = tt_expr_copy(dst, src, n.c, var_map, tensor_map)))
        return 0;
    return push(dst, n);
}

tt_eid tt_expr_substitute(tt_expr_pool *p, tt_eid e, const tt_eid *subst, size_t nsubst)
{
    if (!e)
        return 0;
    tt_expr n = p->nodes.data[e];
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT: return e;
    case TT_EXPR_VAR: return n.a < nsubst && subst[n.a] ? subst[n.a] : e;
    case TT_EXPR_READ: {
        tt_eid idx[16];
        bool changed = false;
        if (n.n > 16)
            return 0;
        for (int i = 0; i < n.n; i++) {
            tt_eid old = p->args.data[n.b + (uint32_t)i];
            if (!(idx[i] = tt_expr_substitute(p, old, subst, nsubst)))
                return 0;
            changed |= idx[i] != old;
        }
        return changed ? tt_expr_read(p, (tt_dtype)n.dtype, n.a, n.n, idx) : e;
    }
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL: {
        tt_eid a = tt_expr_substitute(p, n.a, subst, nsubst);
        if (!a)
            return 0;
        if (a == n.a)
            return e;
        n.a = a;
        return push(p, n);
    }
    default: break;
    }
    int nc = kinds[n.kind].nchild;
    tt_eid a = nc >= 1 ? tt_expr_substitute(p, n.a, subst, nsubst) : 0;
    tt_eid b = nc >= 2 ? tt_expr_substitute(p, n.b, subst, nsubst) : 0;
    tt_eid c = nc >= 3 ? tt_expr_substitute(p, n.c, subst, nsubst) : 0;
    if ((nc >= 1 && !a) || (nc >= 2 && !b) || (nc >= 3 && !c))
        return 0;
    if (a == n.a && b == n.b && c == n.c)
        return e;
    n.a = a;
    n.b = b;
    n.c = c;
    return push(p, n);
}

void tt_expr_visit_reads(const tt_expr_pool *p, tt_eid e, void (*fn)(void *ctx, tt_eid read),
                         void *ctx)
{
    if (!e)
        return;
    /* A copy: the callback may add nodes to the pool, which moves it. */
    const tt_expr n = p->nodes.data[e];
    if (n.kind == TT_EXPR_READ) {
        fn(ctx, e);
        for (int i = 0; i < n.n; i++)
            tt_expr_visit_reads(p, p->args.data[n.b + (uint32_t)i], fn, ctx);
        return;
    }
    if (n.kind == TT_EXPR_LOAD || n.kind == TT_EXPR_CALL) {
        tt_expr_visit_reads(p, n.a, fn, ctx);
        return;
    }
    int nc = kinds[n.kind].nchild;
    if (nc >= 1)
        tt_expr_visit_reads(p, n.a, fn, ctx);
    if (nc >= 2)
        tt_expr_visit_reads(p, n.b, fn, ctx);
    if (nc >= 3)
        tt_expr_visit_reads(p, n.c, fn, ctx);
}

typedef struct {
    const tt_expr_pool *pool;
    uint32_t tensor;
    const int64_t *shape; /* the tensor's, or NULL */
    bool found, plain;    /* plain: every index of every read is a variable (or 0 on a unit dim) */
} reads_ctx;

static void match_read(void *vctx, tt_eid e)
{
    reads_ctx *c = vctx;
    const tt_expr *n = &c->pool->nodes.data[e];
    if (n->a != c->tensor)
        return;
    c->found = true;
    for (int d = 0; d < n->n; d++) {
        tt_eid ix = c->pool->args.data[n->b + (uint32_t)d];
        c->plain &= c->pool->nodes.data[ix].kind == TT_EXPR_VAR ||
                    (c->shape && tt_expr_is_unit_index(c->pool, ix, c->shape[d]));
    }
}

bool tt_expr_is_unit_index(const tt_expr_pool *p, tt_eid ix, int64_t extent)
{
    int64_t v;
    return extent == 1 && tt_expr_is_const_int(p, ix, &v) && v == 0;
}

bool tt_expr_reads_tensor(const tt_expr_pool *p, tt_eid e, uint32_t tensor)
{
    reads_ctx c = {p, tensor, NULL, false, true};
    tt_expr_visit_reads(p, e, match_read, &c);
    return c.found;
}

bool tt_expr_reads_tensor_at_vars(const tt_expr_pool *p, tt_eid e, uint32_t tensor,
                                  const int64_t *shape)
{
    reads_ctx c = {p, tensor, shape, false, true};
    tt_expr_visit_reads(p, e, match_read, &c);
    return c.found && c.plain;
}

bool tt_expr_any(const tt_expr_pool *p, tt_eid e, bool (*pred)(void *ctx, tt_eid id), void *ctx)
{
    if (!e)
        return false;
    if (pred(ctx, e))
        return true;
    const tt_expr *n = &p->nodes.data[e];
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_READ:
        for (int i = 0; i < n->n; i++)
            if (tt_expr_any(p, p->args.data[n->b + (uint32_t)i], pred, ctx))
                return true;
        return false;
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL: return tt_expr_any(p, n->a, pred, ctx);
    default: break;
    }
    int nc = kinds[n->kind].nchild;
    return (nc >= 1 && tt_expr_any(p, n->a, pred, ctx)) ||
           (nc >= 2 && tt_expr_any(p, n->b, pred, ctx)) ||
           (nc >= 3 && tt_expr_any(p, n->c, pred, ctx));
}

bool tt_expr_uses_var(const tt_expr_pool *p, tt_eid e, uint32_t var)
{
    if (!e)
        return false;
    const tt_expr *n = &p->nodes.data[e];
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT: return false;
    case TT_EXPR_VAR: return n->a == var;
    case TT_EXPR_READ:
        for (int i = 0; i < n->n; i++)
            if (tt_expr_uses_var(p, p->args.data[n->b + (uint32_t)i], var))
                return true;
        return false;
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL: return tt_expr_uses_var(p, n->a, var);
    default: break;
    }
    int nc = kinds[n->kind].nchild;
    return (nc >= 1 && tt_expr_uses_var(p, n->a, var)) ||
           (nc >= 2 && tt_expr_uses_var(p, n->b, var)) ||
           (nc >= 3 && tt_expr_uses_var(p, n->c, var));
}

bool tt_expr_is_const_int(const tt_expr_pool *p, tt_eid e, int64_t *v)
{
    const tt_expr *n = &p->nodes.data[e];
    if (n->kind != TT_EXPR_INT)
        return false;
    if (v)
        *v = n->imm.i;
    return true;
}

bool tt_expr_equal(const tt_expr_pool *p, tt_eid a, tt_eid b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    const tt_expr *x = &p->nodes.data[a], *y = &p->nodes.data[b];
    if (x->kind != y->kind || x->dtype != y->dtype)
        return false;
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT: return x->imm.i == y->imm.i;
    case TT_EXPR_FLOAT: return x->imm.f == y->imm.f;
    case TT_EXPR_VAR: return x->a == y->a;
    case TT_EXPR_READ:
        if (x->a != y->a || x->n != y->n)
            return false;
        for (int i = 0; i < x->n; i++)
            if (!tt_expr_equal(p, p->args.data[x->b + (uint32_t)i],
                               p->args.data[y->b + (uint32_t)i]))
                return false;
        return true;
    case TT_EXPR_LOAD:
    case TT_EXPR_CALL: return x->b == y->b && tt_expr_equal(p, x->a, y->a);
    default: break;
    }
    int nc = kinds[x->kind].nchild;
    return (nc < 1 || tt_expr_equal(p, x->a, y->a)) && (nc < 2 || tt_expr_equal(p, x->b, y->b)) &&
           (nc < 3 || tt_expr_equal(p, x->c, y->c));
}

/* ---- printing ---- */

static void print_float(tt_strbuf *sb, double f, tt_dtype t)
{
    char buf[64];
    if (isinf(f)) {
        tt_strbuf_append(sb, f < 0 ? "-inf" : "inf");
        return;
    }
    snprintf(buf, sizeof(buf), "%.9g", f);
    tt_strbuf_append(sb, buf);
    if (!strpbrk(buf, ".eEn"))
        tt_strbuf_append(sb, ".0");
    if (t == TT_DT_FLOAT32)
        tt_strbuf_append(sb, "f");
}

/* Binding strength of infix operators; higher binds tighter.  Others are atoms (-1). */
static int infix_prec(tt_expr_kind k)
{
    switch (k) {
    case TT_EXPR_OR: return 0;
    case TT_EXPR_AND: return 1;
    case TT_EXPR_LT:
    case TT_EXPR_LE:
    case TT_EXPR_GT:
    case TT_EXPR_GE:
    case TT_EXPR_EQ:
    case TT_EXPR_NE: return 2;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB: return 3;
    case TT_EXPR_MUL:
    case TT_EXPR_DIV:
    case TT_EXPR_MOD: return 4;
    default: return -1;
    }
}

static void print_rec(tt_strbuf *sb, const tt_expr_pool *p, tt_eid e, tt_name_fn tensor_name,
                      const void *ctx, int parent, bool right);

void tt_expr_print(tt_strbuf *sb, const tt_expr_pool *p, tt_eid e, tt_name_fn tensor_name,
                   const void *ctx)
{
    print_rec(sb, p, e, tensor_name, ctx, -1, false);
}

static void print_rec(tt_strbuf *sb, const tt_expr_pool *p, tt_eid e, tt_name_fn tensor_name,
                      const void *ctx, int parent, bool right)
{
    if (!e) {
        tt_strbuf_append(sb, "<null>");
        return;
    }
    const tt_expr *n = &p->nodes.data[e];
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: tt_strbuf_printf(sb, "%lld", (long long)n->imm.i); return;
    case TT_EXPR_FLOAT: print_float(sb, n->imm.f, (tt_dtype)n->dtype); return;
    case TT_EXPR_VAR: tt_strbuf_append(sb, tt_var_name(p, n->a)); return;
    case TT_EXPR_READ:
        if (tensor_name)
            tt_strbuf_append(sb, tensor_name(ctx, n->a));
        else
            tt_strbuf_printf(sb, "T%u", n->a);
        tt_strbuf_append(sb, "[");
        for (int i = 0; i < n->n; i++) {
            if (i)
                tt_strbuf_append(sb, ", ");
            print_rec(sb, p, p->args.data[n->b + (uint32_t)i], tensor_name, ctx, -1, false);
        }
        tt_strbuf_append(sb, "]");
        return;
    case TT_EXPR_LOAD:
        if (tensor_name)
            tt_strbuf_append(sb, tensor_name(ctx, n->b));
        else
            tt_strbuf_printf(sb, "B%u", n->b);
        tt_strbuf_append(sb, "[");
        print_rec(sb, p, n->a, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, "]");
        return;
    case TT_EXPR_CALL:
        tt_strbuf_printf(sb, "%s(", tt_func_name((tt_func)n->b));
        print_rec(sb, p, n->a, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ")");
        return;
    case TT_EXPR_MIN:
    case TT_EXPR_MAX:
        tt_strbuf_printf(sb, "%s(", kinds[n->kind].sym);
        print_rec(sb, p, n->a, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ", ");
        print_rec(sb, p, n->b, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ")");
        return;
    case TT_EXPR_SELECT:
        tt_strbuf_append(sb, "select(");
        print_rec(sb, p, n->a, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ", ");
        print_rec(sb, p, n->b, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ", ");
        print_rec(sb, p, n->c, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ")");
        return;
    case TT_EXPR_CAST:
        tt_strbuf_printf(sb, "%s(", tt_dtype_name((tt_dtype)n->dtype));
        print_rec(sb, p, n->a, tensor_name, ctx, -1, false);
        tt_strbuf_append(sb, ")");
        return;
    case TT_EXPR_NOT:
    case TT_EXPR_NEG:
        tt_strbuf_append(sb, kinds[n->kind].sym);
        print_rec(sb, p, n->a, tensor_name, ctx, 5, false);
        return;
    default: {
        /* Parentheses only where precedence needs them; the right operand of an operator of the
         * same strength keeps them (a - (b - c)), comparisons never chain. */
        int prec = infix_prec((tt_expr_kind)n->kind);
        bool paren = prec < parent || (prec == parent && (right || prec == 2));
        if (paren)
            tt_strbuf_append(sb, "(");
        print_rec(sb, p, n->a, tensor_name, ctx, prec, false);
        tt_strbuf_printf(sb, " %s ", kinds[n->kind].sym);
        print_rec(sb, p, n->b, tensor_name, ctx, prec, true);
        if (paren)
            tt_strbuf_append(sb, ")");
        return;
    }
    }
}

/* ---- evaluation ---- */

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floormod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

tt_value tt_value_round(tt_dtype t, tt_value v)
{
    switch (t) {
    case TT_DT_FLOAT32: v.f = (double)(float)v.f; break;
    case TT_DT_INT32: v.i = (int64_t)(int32_t)v.i; break;
    case TT_DT_BOOL: v.i = v.i != 0; break;
    default: break;
    }
    return v;
}

static double as_f(const tt_expr_pool *p, tt_eid e, tt_value v)
{
    return tt_dtype_is_float((tt_dtype)p->nodes.data[e].dtype) ? v.f : (double)v.i;
}

tt_status tt_expr_eval(const tt_expr_pool *p, tt_eid e, const tt_eval_env *env, tt_value *out)
{
    const tt_expr *n = &p->nodes.data[e];
    tt_value a, b;
    tt_status s;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: out->i = n->imm.i; return TT_OK;
    case TT_EXPR_FLOAT: out->f = n->imm.f; return TT_OK;
    case TT_EXPR_VAR:
        out->i = env->vars[n->a];
        return out->i == TT_VAR_UNBOUND ? TT_ERR_RUNTIME : TT_OK; /* used outside its loop */
    case TT_EXPR_READ: {
        int64_t idx[16];
        for (int i = 0; i < n->n; i++) {
            if ((s = tt_expr_eval(p, p->args.data[n->b + (uint32_t)i], env, &a)))
                return s;
            idx[i] = a.i;
        }
        return env->read ? env->read(env->ctx, n, idx, out) : TT_ERR_RUNTIME;
    }
    case TT_EXPR_LOAD:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        return env->load ? env->load(env->ctx, n, a.i, out) : TT_ERR_RUNTIME;
    case TT_EXPR_SELECT:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        if ((s = tt_expr_eval(p, a.i ? n->b : n->c, env, out)))
            return s;
        if (tt_dtype_is_float((tt_dtype)n->dtype))
            out->f = as_f(p, a.i ? n->b : n->c, *out);
        return TT_OK;
    case TT_EXPR_AND:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        if (!a.i) {
            out->i = 0;
            return TT_OK;
        }
        if ((s = tt_expr_eval(p, n->b, env, &b)))
            return s;
        out->i = b.i != 0;
        return TT_OK;
    case TT_EXPR_OR:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        if (a.i) {
            out->i = 1;
            return TT_OK;
        }
        if ((s = tt_expr_eval(p, n->b, env, &b)))
            return s;
        out->i = b.i != 0;
        return TT_OK;
    case TT_EXPR_NOT:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        out->i = !a.i;
        return TT_OK;
    case TT_EXPR_NEG:
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        if (tt_dtype_is_float((tt_dtype)n->dtype))
            out->f = -a.f;
        else
            out->i = -a.i;
        return TT_OK;
    case TT_EXPR_CAST: {
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        bool from_f = tt_dtype_is_float((tt_dtype)p->nodes.data[n->a].dtype);
        if (tt_dtype_is_float((tt_dtype)n->dtype))
            out->f = from_f ? a.f : (double)a.i;
        else
            out->i = from_f ? (int64_t)a.f : a.i;
        *out = tt_value_round((tt_dtype)n->dtype, *out);
        return TT_OK;
    }
    case TT_EXPR_CALL: {
        if ((s = tt_expr_eval(p, n->a, env, &a)))
            return s;
        double x = as_f(p, n->a, a);
        switch ((tt_func)n->b) {
        case TT_FUNC_EXP: out->f = exp(x); break;
        case TT_FUNC_LOG: out->f = log(x); break;
        case TT_FUNC_SQRT: out->f = sqrt(x); break;
        case TT_FUNC_TANH: out->f = tanh(x); break;
        case TT_FUNC_SIGMOID: out->f = 1.0 / (1.0 + exp(-x)); break;
        case TT_FUNC_ABS: out->f = fabs(x); break;
        case TT_FUNC_ERF: out->f = erf(x); break;
        case TT_FUNC_FLOOR: out->f = floor(x); break;
        case TT_FUNC_CEIL: out->f = ceil(x); break;
        default: return TT_ERR_RUNTIME;
        }
        return TT_OK;
    }
    default: break;
    }
    /* Binary arithmetic and comparisons. */
    if ((s = tt_expr_eval(p, n->a, env, &a)) || (s = tt_expr_eval(p, n->b, env, &b)))
        return s;
    tt_dtype ta = (tt_dtype)p->nodes.data[n->a].dtype, tb = (tt_dtype)p->nodes.data[n->b].dtype;
    bool fl = tt_dtype_is_float(ta) || tt_dtype_is_float(tb);
    if (fl) {
        double x = tt_dtype_is_float(ta) ? a.f : (double)a.i;
        double y = tt_dtype_is_float(tb) ? b.f : (double)b.i;
        switch ((tt_expr_kind)n->kind) {
        case TT_EXPR_ADD: out->f = x + y; break;
        case TT_EXPR_SUB: out->f = x - y; break;
        case TT_EXPR_MUL: out->f = x * y; break;
        case TT_EXPR_DIV: out->f = x / y; break;
        case TT_EXPR_MOD: out->f = fmod(x, y); break;
        case TT_EXPR_MIN: out->f = x < y ? x : y; break;
        case TT_EXPR_MAX: out->f = x > y ? x : y; break;
        case TT_EXPR_LT: out->i = x < y; break;
        case TT_EXPR_LE: out->i = x <= y; break;
        case TT_EXPR_GT: out->i = x > y; break;
        case TT_EXPR_GE: out->i = x >= y; break;
        case TT_EXPR_EQ: out->i = x == y; break;
        case TT_EXPR_NE: out->i = x != y; break;
        default: return TT_ERR_RUNTIME;
        }
        return TT_OK;
    }
    int64_t x = a.i, y = b.i;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_ADD: out->i = x + y; break;
    case TT_EXPR_SUB: out->i = x - y; break;
    case TT_EXPR_MUL: out->i = x * y; break;
    case TT_EXPR_DIV:
        if (y == 0)
            return TT_ERR_RUNTIME;
        out->i = floordiv(x, y);
        break;
    case TT_EXPR_MOD:
        if (y == 0)
            return TT_ERR_RUNTIME;
        out->i = floormod(x, y);
        break;
    case TT_EXPR_MIN: out->i = x < y ? x : y; break;
    case TT_EXPR_MAX: out->i = x > y ? x : y; break;
    case TT_EXPR_LT: out->i = x < y; break;
    case TT_EXPR_LE: out->i = x <= y; break;
    case TT_EXPR_GT: out->i = x > y; break;
    case TT_EXPR_GE: out->i = x >= y; break;
    case TT_EXPR_EQ: out->i = x == y; break;
    case TT_EXPR_NE: out->i = x != y; break;
    default: return TT_ERR_RUNTIME;
    }
    if (n->dtype == TT_DT_INT32)
        out->i = (int64_t)(int32_t)out->i;
    return TT_OK;
}

int64_t tt_expr_coef(const tt_expr_pool *p, tt_eid id, uint32_t var)
{
    const tt_expr *n = tt_expr_get(p, id);
    int64_t a, b, c;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT: return 0;
    case TT_EXPR_VAR: return n->a == var ? 1 : 0;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
        a = tt_expr_coef(p, n->a, var);
        b = tt_expr_coef(p, n->b, var);
        if (a == INT64_MIN || b == INT64_MIN)
            return INT64_MIN;
        return n->kind == TT_EXPR_ADD ? a + b : a - b;
    case TT_EXPR_NEG: a = tt_expr_coef(p, n->a, var); return a == INT64_MIN ? a : -a;
    case TT_EXPR_MUL:
        if (tt_expr_is_const_int(p, n->b, &c)) {
            a = tt_expr_coef(p, n->a, var);
            return a == INT64_MIN ? a : a * c;
        }
        if (tt_expr_is_const_int(p, n->a, &c)) {
            b = tt_expr_coef(p, n->b, var);
            return b == INT64_MIN ? b : b * c;
        }
        break;
    default: break;
    }
    return tt_expr_uses_var(p, id, var) ? INT64_MIN : 0;
}

int64_t tt_gcd64(int64_t a, int64_t b)
{
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a; /* gcd(0, b) = b: 0 divides nothing but is divisible by everything */
}

/* A known divisor of a product, 1 when it would not fit (a divisor needs no precision). */
static int64_t mul_divisor(int64_t a, int64_t b)
{
    if (a == 0 || b == 0)
        return 0;
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    return a > ((int64_t)1 << 31) || b > ((int64_t)1 << 31) ? 1 : a * b;
}

int64_t tt_expr_known_divisor(const tt_expr_pool *p, tt_eid id)
{
    const tt_expr *n = tt_expr_get(p, id);
    int64_t a, c;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: return n->imm.i < 0 ? -n->imm.i : n->imm.i;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
        return tt_gcd64(tt_expr_known_divisor(p, n->a), tt_expr_known_divisor(p, n->b));
    case TT_EXPR_NEG: return tt_expr_known_divisor(p, n->a);
    case TT_EXPR_MUL:
        return mul_divisor(tt_expr_known_divisor(p, n->a), tt_expr_known_divisor(p, n->b));
    case TT_EXPR_DIV:
        if (!tt_expr_is_const_int(p, n->b, &c) || c <= 0)
            return 1;
        a = tt_expr_known_divisor(p, n->a);
        return a % c == 0 ? a / c : 1;
    case TT_EXPR_MOD:
        if (!tt_expr_is_const_int(p, n->b, &c) || c <= 0)
            return 1;
        a = tt_expr_known_divisor(p, n->a);
        return a == 0 ? 0 : tt_gcd64(a, c);
    case TT_EXPR_MIN:
    case TT_EXPR_MAX:
        return tt_gcd64(tt_expr_known_divisor(p, n->a), tt_expr_known_divisor(p, n->b));
    case TT_EXPR_SELECT:
        return tt_gcd64(tt_expr_known_divisor(p, n->b), tt_expr_known_divisor(p, n->c));
    default: return 1;
    }
}

/* tt_expr_lane_step with the vector variable's own start known to be a multiple of var_align (0:
 * it is 0). */
static bool lane_step(const tt_expr_pool *p, tt_eid id, uint32_t var, int64_t lanes,
                      int64_t var_align, int64_t *step, int64_t *align)
{
    if (!tt_expr_uses_var(p, id, var)) {
        *step = 0;
        *align = tt_expr_known_divisor(p, id);
        return true;
    }
    const tt_expr *n = tt_expr_get(p, id);
    int64_t sa, ga, sb, gb, c;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_VAR: *step = 1, *align = var_align; return true;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
        if (!lane_step(p, n->a, var, lanes, var_align, &sa, &ga) ||
            !lane_step(p, n->b, var, lanes, var_align, &sb, &gb))
            return false;
        *step = n->kind == TT_EXPR_ADD ? sa + sb : sa - sb;
        *align = tt_gcd64(ga, gb);
        return true;
    case TT_EXPR_NEG:
        if (!lane_step(p, n->a, var, lanes, var_align, &sa, &ga))
            return false;
        *step = -sa, *align = ga;
        return true;
    case TT_EXPR_MUL: {
        tt_eid x = n->a;
        if (!tt_expr_is_const_int(p, n->b, &c)) {
            if (!tt_expr_is_const_int(p, n->a, &c))
                return false;
            x = n->b;
        }
        if (!lane_step(p, x, var, lanes, var_align, &sa, &ga) || c > INT32_MAX || c < -INT32_MAX ||
            sa > INT32_MAX || sa < -INT32_MAX)
            return false;
        *step = sa * c, *align = mul_divisor(ga, c);
        return true;
    }
    case TT_EXPR_DIV:
    case TT_EXPR_MOD:
        /* Floor division and modulo by c > 0, a multiple of `lanes`: an operand that moves by one
         * per lane from a multiple of `lanes` keeps every lane in one block of c. */
        if (!tt_expr_is_const_int(p, n->b, &c) || c <= 0 || lanes <= 0 || c % lanes != 0 ||
            !lane_step(p, n->a, var, lanes, var_align, &sa, &ga))
            return false;
        if (sa == 0) { /* the variable cancelled out */
            *step = 0;
            *align = tt_expr_known_divisor(p, id);
            return true;
        }
        if (sa != 1 || ga % lanes != 0)
            return false;
        if (n->kind == TT_EXPR_DIV)
            *step = 0, *align = ga % c == 0 ? ga / c : 1;
        else
            *step = 1, *align = ga == 0 ? 0 : tt_gcd64(ga, c);
        return true;
    default: return false;
    }
}

bool tt_expr_lane_step(const tt_expr_pool *p, tt_eid id, uint32_t var, int64_t lanes, int64_t *step,
                       int64_t *align)
{
    return lane_step(p, id, var, lanes, 0, step, align);
}

/* Whether x < y holds in all lanes or in none: x - y = d + s * l over the lanes l of a vector
 * that starts at a multiple of `lanes`, d a multiple of g.  With s > 0 the lanes disagree only
 * when d lies in [-s * (lanes - 1), -1], which holds no multiple of g > s * (lanes - 1). */
static bool less_uniform(const tt_expr_pool *p, tt_eid x, tt_eid y, uint32_t var, int64_t lanes)
{
    int64_t sx, gx, sy, gy;
    if (!lane_step(p, x, var, lanes, lanes, &sx, &gx) ||
        !lane_step(p, y, var, lanes, lanes, &sy, &gy))
        return false;
    int64_t s = sx - sy, g = tt_gcd64(gx, gy);
    if (s == 0)
        return true;
    return s > 0 && s <= INT32_MAX && lanes <= INT32_MAX && (g == 0 || g > s * (lanes - 1));
}

bool tt_expr_lane_uniform(const tt_expr_pool *p, tt_eid cond, uint32_t var, int64_t lanes)
{
    if (!tt_expr_uses_var(p, cond, var))
        return true;
    if (lanes < 1)
        return false;
    const tt_expr *n = tt_expr_get(p, cond);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_AND:
    case TT_EXPR_OR:
        return tt_expr_lane_uniform(p, n->a, var, lanes) &&
               tt_expr_lane_uniform(p, n->b, var, lanes);
    case TT_EXPR_NOT: return tt_expr_lane_uniform(p, n->a, var, lanes);
    case TT_EXPR_LT:
    case TT_EXPR_GE: return less_uniform(p, n->a, n->b, var, lanes);
    case TT_EXPR_GT:
    case TT_EXPR_LE: return less_uniform(p, n->b, n->a, var, lanes);
    default: return false;
    }
}

tt_dtype tt_expr_operand_type(const tt_expr_pool *p, const tt_expr *n)
{
    tt_dtype a = (tt_dtype)tt_expr_get(p, n->a)->dtype, b = (tt_dtype)tt_expr_get(p, n->b)->dtype;
    if (tt_dtype_is_float(a) || tt_dtype_is_float(b)) {
        if (tt_dtype_is_float(a) && tt_dtype_is_float(b))
            return tt_dtype_bytes(a) >= tt_dtype_bytes(b) ? a : b;
        return tt_dtype_is_float(a) ? a : b;
    }
    if (a == TT_DT_BOOL && b == TT_DT_BOOL)
        return TT_DT_BOOL;
    return tt_dtype_bytes(a) >= tt_dtype_bytes(b) && a != TT_DT_BOOL ? a : b;
}
