/* The one-line tensor-expression language (docs/tensor-expressions.md).
 *
 *     C[i,j] += A[i,k] * B[k,j]; A:float32[512,512]; B:float32[512,512]
 *
 * Statements are separated by ';'.  `T[v,...] = e` defines T elementwise, `+=`, `max=`, `min=`
 * reduce over the variables that appear on the right but not on the left.  `T:dtype[d,...]`
 * declares a tensor (an input when nothing assigns it; `T:const dtype[...]` a constant input,
 * such as weights, whose layout a schedule may rewrite), `v:N` declares a variable's extent.
 * Extents not declared are inferred from reads where the variable is a whole index.
 *
 * Parsing goes through a small AST so that extents can be inferred before the DAG is built. */
#include "workload.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 4096
#define MAX_STMTS 256
#define MAX_NAMES 256
#define MAX_ARGS  16
#define NAME_LEN  32

enum { A_INT, A_FLOAT, A_NAME, A_INDEX, A_CALL, A_BIN, A_UN };

typedef struct {
    int kind, col;
    int op; /* tt_expr_kind for A_BIN / A_UN */
    char name[NAME_LEN];
    int64_t ival;
    double fval;
    int nargs;
    int args[MAX_ARGS];
} ast;

enum { S_COMPUTE, S_TENSOR_DECL, S_VAR_DECL };

typedef struct {
    int kind, col;
    char name[NAME_LEN];
    int nidx;
    char idx[TT_MAX_DIMS][NAME_LEN]; /* LHS variables */
    tt_reduce_kind reduce;
    int rhs;
    int dtype;     /* decl */
    bool constant; /* decl: `T:const float32[...]` */
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    int64_t extent; /* var decl */
} stmt;

typedef struct {
    const char *src;
    size_t pos;
    int stmt_no;
    ast nodes[MAX_NODES];
    int nnodes;
    stmt stmts[MAX_STMTS];
    int nstmts;
    tt_errbuf *err;
} parser;

static tt_status perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tt_status perr(parser *p, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tt_err(p->err, TT_ERR_PARSE, "te: statement %d, column %zu: %s", p->stmt_no + 1,
                  p->pos + 1, msg);
}

static void skip_ws(parser *p)
{
    while (p->src[p->pos] == ' ' || p->src[p->pos] == '\t' || p->src[p->pos] == '\n' ||
           p->src[p->pos] == '\r')
        p->pos++;
}

static bool accept(parser *p, const char *tok)
{
    skip_ws(p);
    size_t n = strlen(tok);
    if (strncmp(p->src + p->pos, tok, n) != 0)
        return false;
    /* "=" must not swallow the first half of "==", "<" not of "<=". */
    if ((strcmp(tok, "=") == 0 || strcmp(tok, "<") == 0 || strcmp(tok, ">") == 0 ||
         strcmp(tok, "!") == 0) &&
        p->src[p->pos + n] == '=')
        return false;
    p->pos += n;
    return true;
}

static tt_status expect(parser *p, const char *tok)
{
    if (accept(p, tok))
        return TT_OK;
    char got = p->src[p->pos];
    return perr(p, "expected '%s', found %s%c%s", tok, got ? "'" : "", got ? got : ' ',
                got ? "'" : "end of input");
}

static bool ident(parser *p, char out[NAME_LEN])
{
    skip_ws(p);
    const char *s = p->src + p->pos;
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    if (n >= NAME_LEN)
        n = NAME_LEN - 1;
    memcpy(out, s, n);
    out[n] = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    p->pos += n;
    return true;
}

static int new_node(parser *p, int kind)
{
    if (p->nnodes >= MAX_NODES)
        return -1;
    ast *a = &p->nodes[p->nnodes];
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->col = (int)p->pos + 1;
    return p->nnodes++;
}

static tt_status parse_expr(parser *p, int *out);

static tt_status parse_args(parser *p, const char *close, int id)
{
    if (accept(p, close))
        return TT_OK;
    for (;;) {
        int a;
        tt_status s = parse_expr(p, &a);
        if (s)
            return s;
        if (p->nodes[id].nargs >= MAX_ARGS)
            return perr(p, "too many arguments (at most %d)", MAX_ARGS);
        p->nodes[id].args[p->nodes[id].nargs++] = a;
        if (accept(p, close))
            return TT_OK;
        if ((s = expect(p, ",")))
            return s;
    }
}

static tt_status parse_primary(parser *p, int *out)
{
    skip_ws(p);
    const char *s = p->src + p->pos;
    if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
        char *end;
        errno = 0;
        size_t n = strspn(s, "0123456789");
        bool is_float = s[n] == '.' || s[n] == 'e' || s[n] == 'E';
        int id = new_node(p, is_float ? A_FLOAT : A_INT);
        if (id < 0)
            return perr(p, "expression too large");
        if (is_float)
            p->nodes[id].fval = strtod(s, &end);
        else
            p->nodes[id].ival = strtoll(s, &end, 10);
        if (errno == ERANGE)
            return perr(p, "number out of range");
        p->pos += (size_t)(end - s);
        *out = id;
        return TT_OK;
    }
    if (accept(p, "(")) {
        tt_status st = parse_expr(p, out);
        return st ? st : expect(p, ")");
    }
    char name[NAME_LEN];
    size_t start = p->pos;
    if (!ident(p, name)) {
        if (!p->src[p->pos])
            return perr(p, "unexpected end of input in an expression");
        return perr(p, "unexpected '%c' in an expression", p->src[p->pos]);
    }
    int kind = A_NAME;
    if (accept(p, "["))
        kind = A_INDEX;
    else if (accept(p, "("))
        kind = A_CALL;
    int id = new_node(p, kind);
    if (id < 0)
        return perr(p, "expression too large");
    p->nodes[id].col = (int)start + 1;
    strcpy(p->nodes[id].name, name);
    if (kind != A_NAME) {
        tt_status st = parse_args(p, kind == A_INDEX ? "]" : ")", id);
        if (st)
            return st;
    }
    *out = id;
    return TT_OK;
}

static tt_status parse_unary(parser *p, int *out)
{
    int op = -1;
    if (accept(p, "-"))
        op = TT_EXPR_NEG;
    else if (accept(p, "!"))
        op = TT_EXPR_NOT;
    if (op < 0)
        return parse_primary(p, out);
    int a, id;
    tt_status s = parse_unary(p, &a);
    if (s)
        return s;
    if ((id = new_node(p, A_UN)) < 0)
        return perr(p, "expression too large");
    p->nodes[id].op = op;
    p->nodes[id].args[0] = a;
    p->nodes[id].nargs = 1;
    *out = id;
    return TT_OK;
}

typedef struct {
    const char *tok;
    int op;
} binop;

static const binop levels[][7] = {
    {{"||", TT_EXPR_OR}},
    {{"&&", TT_EXPR_AND}},
    {{"==", TT_EXPR_EQ},
     {"!=", TT_EXPR_NE},
     {"<=", TT_EXPR_LE},
     {">=", TT_EXPR_GE},
     {"<", TT_EXPR_LT},
     {">", TT_EXPR_GT}},
    {{"+", TT_EXPR_ADD}, {"-", TT_EXPR_SUB}},
    {{"*", TT_EXPR_MUL}, {"/", TT_EXPR_DIV}, {"%", TT_EXPR_MOD}},
};
#define NLEVELS ((int)TT_ARRAY_LEN(levels))

static tt_status parse_level(parser *p, int level, int *out)
{
    if (level == NLEVELS)
        return parse_unary(p, out);
    int lhs;
    tt_status s = parse_level(p, level + 1, &lhs);
    if (s)
        return s;
    for (;;) {
        int op = -1;
        for (int i = 0; i < 7 && levels[level][i].tok; i++) {
            /* "+=" ends the left-hand side of a statement, never an addition. */
            if (accept(p, levels[level][i].tok)) {
                op = levels[level][i].op;
                break;
            }
        }
        if (op < 0)
            break;
        int rhs, id;
        if ((s = parse_level(p, level + 1, &rhs)))
            return s;
        if ((id = new_node(p, A_BIN)) < 0)
            return perr(p, "expression too large");
        p->nodes[id].op = op;
        p->nodes[id].nargs = 2;
        p->nodes[id].args[0] = lhs;
        p->nodes[id].args[1] = rhs;
        lhs = id;
        if (level == 2)
            break; /* comparisons do not chain */
    }
    *out = lhs;
    return TT_OK;
}

static tt_status parse_expr(parser *p, int *out)
{
    return parse_level(p, 0, out);
}

static tt_status parse_int(parser *p, int64_t *out)
{
    skip_ws(p);
    const char *s = p->src + p->pos;
    if (!isdigit((unsigned char)*s))
        return perr(p, "expected a positive integer");
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || v <= 0 || v > (1LL << 40))
        return perr(p, "integer %.*s out of range (1 .. 2^40)", (int)(end - s), s);
    p->pos += (size_t)(end - s);
    *out = v;
    return TT_OK;
}

static tt_status parse_stmt(parser *p, stmt *st)
{
    memset(st, 0, sizeof(*st));
    skip_ws(p);
    st->col = (int)p->pos + 1;
    if (!ident(p, st->name))
        return perr(p, "a statement starts with a tensor or variable name");
    tt_status s;
    if (accept(p, ":")) {
        skip_ws(p);
        if (isdigit((unsigned char)p->src[p->pos])) {
            st->kind = S_VAR_DECL;
            return parse_int(p, &st->extent);
        }
        char dt[NAME_LEN];
        if (!ident(p, dt))
            return perr(
                p, "expected a dtype (float32, float64, int32, int64, bool) or an extent after "
                   "':'");
        if (!strcmp(dt, "const")) {
            st->constant = true;
            skip_ws(p);
            if (!ident(p, dt))
                return perr(p, "expected a dtype (float32, float64, int32, int64, bool) after "
                               "'const'");
        }
        st->kind = S_TENSOR_DECL;
        st->dtype = tt_dtype_parse(dt, strlen(dt));
        if (st->dtype < 0)
            return perr(p, "unknown dtype '%s' (float32, float64, int32, int64, bool)", dt);
        if ((s = expect(p, "[")))
            return s;
        do {
            if (st->ndim >= TT_MAX_DIMS)
                return perr(p, "tensor '%s' has more than %d dimensions", st->name, TT_MAX_DIMS);
            if ((s = parse_int(p, &st->shape[st->ndim++])))
                return s;
        } while (accept(p, ","));
        return expect(p, "]");
    }
    st->kind = S_COMPUTE;
    if ((s = expect(p, "[")))
        return s;
    do {
        if (st->nidx >= TT_MAX_DIMS)
            return perr(p, "tensor '%s' has more than %d dimensions", st->name, TT_MAX_DIMS);
        if (!ident(p, st->idx[st->nidx]))
            return perr(p, "the left-hand side indexes with plain variable names");
        for (int k = 0; k < st->nidx; k++)
            if (strcmp(st->idx[k], st->idx[st->nidx]) == 0)
                return perr(p, "variable '%s' appears twice on the left-hand side", st->idx[k]);
        st->nidx++;
    } while (accept(p, ","));
    if ((s = expect(p, "]")))
        return s;
    if (accept(p, "+="))
        st->reduce = TT_REDUCE_SUM;
    else if (accept(p, "max="))
        st->reduce = TT_REDUCE_MAX;
    else if (accept(p, "min="))
        st->reduce = TT_REDUCE_MIN;
    else if (accept(p, "*="))
        st->reduce = TT_REDUCE_PROD;
    else if (accept(p, "="))
        st->reduce = TT_REDUCE_NONE;
    else
        return perr(p, "expected '=', '+=', '*=', 'max=' or 'min=' after the left-hand side");
    return parse_expr(p, &st->rhs);
}

/* ---- semantic analysis and DAG construction ---- */

typedef struct {
    char name[NAME_LEN];
    int decl;  /* statement index of its declaration, -1 */
    int def;   /* statement index that computes it, -1 */
    int op;    /* DAG op id once built, -1 */
    int first; /* statement where it first appears */
    int first_col;
} tensor_info;

typedef struct {
    parser *p;
    tensor_info t[MAX_NAMES];
    int nt;
    tt_dag *dag;
} sema;

static int find_tensor(sema *s, const char *name)
{
    for (int i = 0; i < s->nt; i++)
        if (strcmp(s->t[i].name, name) == 0)
            return i;
    return -1;
}

static int add_tensor(sema *s, const char *name, int stmt_no, int col)
{
    int i = find_tensor(s, name);
    if (i >= 0 || s->nt >= MAX_NAMES)
        return i;
    tensor_info *t = &s->t[s->nt];
    memset(t, 0, sizeof(*t));
    strcpy(t->name, name);
    t->decl = t->def = t->op = -1;
    t->first = stmt_no;
    t->first_col = col;
    return s->nt++;
}

static void collect_tensors(sema *s, int node, int stmt_no)
{
    ast *a = &s->p->nodes[node];
    if (a->kind == A_INDEX)
        add_tensor(s, a->name, stmt_no, a->col);
    for (int i = 0; i < a->nargs; i++)
        collect_tensors(s, a->args[i], stmt_no);
}

typedef struct {
    char name[NAME_LEN];
    int64_t extent; /* 0 = unknown */
    uint32_t var;
    bool reduce;
    bool declared; /* its extent given as NAME:N */
} var_info;

typedef struct {
    var_info v[TT_MAX_DIMS + TT_MAX_REDUCE];
    int n;
} var_table;

static var_info *find_var(var_table *vt, const char *name)
{
    for (int i = 0; i < vt->n; i++)
        if (strcmp(vt->v[i].name, name) == 0)
            return &vt->v[i];
    return NULL;
}

static tt_status serr(sema *s, int stmt_no, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tt_status serr(sema *s, int stmt_no, int col, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tt_err(s->p->err, TT_ERR_BAD_WORKLOAD, "te: statement %d, column %d: %s", stmt_no + 1,
                  col, msg);
}

static bool is_builtin(const char *name)
{
    return tt_func_parse(name, strlen(name)) >= 0 || strcmp(name, "max") == 0 ||
           strcmp(name, "min") == 0 || strcmp(name, "select") == 0 ||
           tt_dtype_parse(name, strlen(name)) >= 0;
}

/* Finds free variables (reduce candidates) and checks names. */
static tt_status collect_vars(sema *s, int node, int stmt_no, var_table *vt)
{
    ast *a = &s->p->nodes[node];
    if (a->kind == A_NAME) {
        if (find_tensor(s, a->name) >= 0)
            return serr(s, stmt_no, a->col, "tensor '%s' used without indices", a->name);
        if (!find_var(vt, a->name)) {
            if (vt->n >= TT_MAX_DIMS + TT_MAX_REDUCE)
                return serr(s, stmt_no, a->col, "too many variables");
            var_info *v = &vt->v[vt->n++];
            memset(v, 0, sizeof(*v));
            strcpy(v->name, a->name);
            v->reduce = true;
        }
    }
    if (a->kind == A_INDEX) {
        int ti = find_tensor(s, a->name);
        if (ti >= 0 && s->t[ti].op < 0 && s->t[ti].def >= 0)
            return serr(s, stmt_no, a->col, "'%s' is read before it is computed (statement %d)",
                        a->name, s->t[ti].def + 1);
    }
    if (a->kind == A_CALL && !is_builtin(a->name))
        return serr(
            s, stmt_no, a->col,
            "unknown function '%s' (exp, log, sqrt, tanh, sigmoid, abs, max, min, select, casts)",
            a->name);
    for (int i = 0; i < a->nargs; i++) {
        tt_status st = collect_vars(s, a->args[i], stmt_no, vt);
        if (st)
            return st;
    }
    return TT_OK;
}

/* Extent candidates from reads where a variable is a whole index. */
static tt_status infer_extents(sema *s, int node, int stmt_no, var_table *vt)
{
    ast *a = &s->p->nodes[node];
    if (a->kind == A_INDEX) {
        int ti = find_tensor(s, a->name);
        const tt_op *op = s->t[ti].op >= 0 ? &s->dag->ops.data[s->t[ti].op] : NULL;
        if (op && a->nargs != op->ndim)
            return serr(s, stmt_no, a->col, "'%s' has rank %d but is indexed with %d indices",
                        a->name, op->ndim, a->nargs);
        for (int i = 0; op && i < a->nargs; i++) {
            ast *ix = &s->p->nodes[a->args[i]];
            var_info *v = ix->kind == A_NAME ? find_var(vt, ix->name) : NULL;
            if (!v)
                continue;
            if (v->extent == 0)
                v->extent = op->shape[i];
            else if (v->extent != op->shape[i] && v->reduce &&
                     !(v->declared && v->extent < op->shape[i])) /* a declared part is read */
                return serr(s, stmt_no, ix->col,
                            "extent of '%s' is ambiguous (%lld or %lld): declare it as %s:N",
                            v->name, (long long)v->extent, (long long)op->shape[i], v->name);
        }
    }
    for (int i = 0; i < a->nargs; i++) {
        tt_status st = infer_extents(s, a->args[i], stmt_no, vt);
        if (st)
            return st;
    }
    return TT_OK;
}

static tt_dtype node_dtype(sema *s, tt_eid e)
{
    return (tt_dtype)tt_expr_get(&s->dag->pool, e)->dtype;
}

/* Makes both operands of an arithmetic node the same type: integer constants next to floats
 * become float constants, other integers are cast. */
static void coerce(sema *s, tt_eid *a, tt_eid *b)
{
    tt_dtype ta = node_dtype(s, *a), tb = node_dtype(s, *b);
    if (tt_dtype_is_float(ta) == tt_dtype_is_float(tb))
        return;
    tt_eid *x = tt_dtype_is_float(ta) ? b : a;
    tt_dtype ft = tt_dtype_is_float(ta) ? ta : tb;
    const tt_expr *n = tt_expr_get(&s->dag->pool, *x);
    if (n->kind == TT_EXPR_INT)
        *x = tt_expr_float(&s->dag->pool, ft, (double)n->imm.i);
    else
        *x = tt_expr_cast(&s->dag->pool, ft, *x);
}

/* Logical operands: a number x means x != 0. */
static tt_eid to_bool(sema *s, tt_eid e)
{
    tt_dtype t = node_dtype(s, e);
    if (t == TT_DT_BOOL)
        return e;
    tt_eid zero =
        tt_dtype_is_float(t) ? tt_expr_float(&s->dag->pool, t, 0.0) : tt_expr_int(&s->dag->pool, 0);
    return tt_expr_binary(&s->dag->pool, TT_EXPR_NE, e, zero);
}

static tt_status build(sema *s, int node, int stmt_no, var_table *vt, tt_dtype ft, tt_eid *out)
{
    ast a = s->p->nodes[node];
    tt_expr_pool *pool = &s->dag->pool;
    tt_eid args[MAX_ARGS];
    tt_status st;
    switch (a.kind) {
    case A_INT: *out = tt_expr_int(pool, a.ival); return TT_OK;
    case A_FLOAT: *out = tt_expr_float(pool, ft, a.fval); return TT_OK;
    case A_NAME: *out = tt_expr_var(pool, find_var(vt, a.name)->var); return TT_OK;
    case A_INDEX: {
        int ti = find_tensor(s, a.name);
        if (s->t[ti].op < 0)
            return serr(s, stmt_no, a.col, "'%s' is read before it is computed", a.name);
        for (int i = 0; i < a.nargs; i++) {
            if ((st = build(s, a.args[i], stmt_no, vt, ft, &args[i])))
                return st;
            if (tt_dtype_is_float(node_dtype(s, args[i])))
                return serr(s, stmt_no, s->p->nodes[a.args[i]].col,
                            "index %d of '%s' is not an integer expression", i, a.name);
        }
        *out = tt_dag_read(s->dag, s->t[ti].op, a.nargs, args);
        return TT_OK;
    }
    case A_CALL: {
        for (int i = 0; i < a.nargs; i++)
            if ((st = build(s, a.args[i], stmt_no, vt, ft, &args[i])))
                return st;
        int want = strcmp(a.name, "select") == 0                                ? 3
                   : (strcmp(a.name, "max") == 0 || strcmp(a.name, "min") == 0) ? 2
                                                                                : 1;
        if (a.nargs != want)
            return serr(s, stmt_no, a.col, "%s() takes %d argument%s, got %d", a.name, want,
                        want == 1 ? "" : "s", a.nargs);
        int f = tt_func_parse(a.name, strlen(a.name));
        int dt = tt_dtype_parse(a.name, strlen(a.name));
        if (f >= 0) {
            if (!tt_dtype_is_float(node_dtype(s, args[0])))
                args[0] = tt_expr_cast(pool, ft, args[0]);
            *out = tt_expr_call(pool, (tt_func)f, args[0]);
        } else if (dt >= 0) {
            *out = tt_expr_cast(pool, (tt_dtype)dt, args[0]);
        } else if (want == 3) {
            args[0] = to_bool(s, args[0]);
            coerce(s, &args[1], &args[2]);
            *out = tt_expr_select(pool, args[0], args[1], args[2]);
        } else {
            coerce(s, &args[0], &args[1]);
            *out = tt_expr_binary(pool, a.name[1] == 'a' ? TT_EXPR_MAX : TT_EXPR_MIN, args[0],
                                  args[1]);
        }
        return TT_OK;
    }
    case A_UN:
        if ((st = build(s, a.args[0], stmt_no, vt, ft, &args[0])))
            return st;
        if (a.op == TT_EXPR_NOT)
            args[0] = to_bool(s, args[0]);
        *out = tt_expr_unary(pool, (tt_expr_kind)a.op, args[0]);
        return TT_OK;
    default:
        if ((st = build(s, a.args[0], stmt_no, vt, ft, &args[0])) ||
            (st = build(s, a.args[1], stmt_no, vt, ft, &args[1])))
            return st;
        if (a.op != TT_EXPR_AND && a.op != TT_EXPR_OR) {
            coerce(s, &args[0], &args[1]);
        } else {
            args[0] = to_bool(s, args[0]);
            args[1] = to_bool(s, args[1]);
        }
        *out = tt_expr_binary(pool, (tt_expr_kind)a.op, args[0], args[1]);
        return TT_OK;
    }
}

static tt_status build_compute(sema *s, int si)
{
    stmt *st = &s->p->stmts[si];
    var_table vt = {.n = 0};
    tt_status r;
    for (int i = 0; i < st->nidx; i++) {
        var_info *v = &vt.v[vt.n++];
        memset(v, 0, sizeof(*v));
        strcpy(v->name, st->idx[i]);
        if (find_tensor(s, v->name) >= 0)
            return serr(s, si, st->col, "'%s' is both a tensor and a variable", v->name);
    }
    if ((r = collect_vars(s, st->rhs, si, &vt)))
        return r;
    int nreduce = 0;
    for (int i = 0; i < vt.n; i++)
        nreduce += vt.v[i].reduce;
    if (nreduce && st->reduce == TT_REDUCE_NONE)
        for (int i = 0; i < vt.n; i++)
            if (vt.v[i].reduce)
                return serr(s, si, st->col,
                            "variable '%s' is not on the left-hand side: use '+=', 'max=' or "
                            "'min=' to reduce over it",
                            vt.v[i].name);
    if (nreduce > TT_MAX_REDUCE)
        return serr(s, si, st->col, "more than %d reduce variables", TT_MAX_REDUCE);
    /* Extents: declarations first, then the output declaration, then inference from reads. */
    for (int i = 0; i < vt.n; i++)
        for (int k = 0; k < s->p->nstmts; k++)
            if (s->p->stmts[k].kind == S_VAR_DECL &&
                strcmp(s->p->stmts[k].name, vt.v[i].name) == 0) {
                vt.v[i].extent = s->p->stmts[k].extent;
                vt.v[i].declared = true;
            }
    tensor_info *out = &s->t[find_tensor(s, st->name)];
    const stmt *decl = out->decl >= 0 ? &s->p->stmts[out->decl] : NULL;
    if (decl && decl->ndim != st->nidx)
        return serr(s, si, st->col, "'%s' is declared with rank %d but assigned with %d indices",
                    st->name, decl->ndim, st->nidx);
    for (int i = 0; decl && i < st->nidx; i++) {
        if (vt.v[i].extent && vt.v[i].extent != decl->shape[i])
            return serr(s, si, st->col,
                        "extent of '%s' (%lld) disagrees with the declared shape of '%s' (%lld)",
                        vt.v[i].name, (long long)vt.v[i].extent, st->name,
                        (long long)decl->shape[i]);
        vt.v[i].extent = decl->shape[i];
    }
    if ((r = infer_extents(s, st->rhs, si, &vt)))
        return r;
    for (int i = 0; i < vt.n; i++)
        if (!vt.v[i].extent)
            return serr(
                s, si, st->col,
                "cannot infer the extent of '%s': declare it as %s:N or declare '%s' with a shape",
                vt.v[i].name, vt.v[i].name, st->name);
    /* The dtype: declared, else that of the first tensor read, else float32. */
    tt_dtype dt = TT_DT_FLOAT32;
    if (decl) {
        dt = (tt_dtype)decl->dtype;
    } else {
        /* first read in the statement */
        int stack[64], sp = 0;
        stack[sp++] = st->rhs;
        while (sp) {
            ast *a = &s->p->nodes[stack[--sp]];
            if (a->kind == A_INDEX) {
                int ti = find_tensor(s, a->name);
                if (s->t[ti].op >= 0) {
                    dt = s->dag->ops.data[s->t[ti].op].dtype;
                    break;
                }
            }
            for (int i = a->nargs - 1; i >= 0 && sp < 64; i--)
                stack[sp++] = a->args[i];
        }
    }
    int64_t shape[TT_MAX_DIMS];
    const char *names[TT_MAX_DIMS];
    for (int i = 0; i < st->nidx; i++) {
        shape[i] = vt.v[i].extent;
        names[i] = vt.v[i].name;
    }
    int op = tt_dag_compute(s->dag, st->name, dt, st->nidx, shape, names);
    if (op < 0)
        return tt_err(s->p->err, TT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < st->nidx; i++)
        vt.v[i].var = s->dag->ops.data[op].axis[i];
    for (int i = st->nidx; i < vt.n; i++)
        if (!(vt.v[i].var = tt_dag_reduce_axis(s->dag, op, vt.v[i].name, vt.v[i].extent)))
            return tt_err(s->p->err, TT_ERR_NOMEM, "out of memory");
    tt_eid body;
    if ((r = build(s, st->rhs, si, &vt, tt_dtype_is_float(dt) ? dt : TT_DT_FLOAT32, &body)))
        return r;
    if (!body)
        return tt_err(s->p->err, TT_ERR_NOMEM, "out of memory");
    /* The stored value takes the op's type. */
    tt_dtype bt = node_dtype(s, body);
    if (bt == TT_DT_BOOL || tt_dtype_is_float(bt) != tt_dtype_is_float(dt)) {
        const tt_expr *n = tt_expr_get(&s->dag->pool, body);
        body = n->kind == TT_EXPR_INT && tt_dtype_is_float(dt)
                   ? tt_expr_float(&s->dag->pool, dt, (double)n->imm.i)
                   : tt_expr_cast(&s->dag->pool, dt, body);
    }
    tt_dag_set_body(s->dag, op, st->reduce, body);
    out->op = op;
    return TT_OK;
}

/* ---- canonical printing ---- */

static int prec_of(int op)
{
    for (int l = 0; l < NLEVELS; l++)
        for (int i = 0; i < 7 && levels[l][i].tok; i++)
            if (levels[l][i].op == op)
                return l;
    return NLEVELS;
}

static const char *tok_of(int op)
{
    for (int l = 0; l < NLEVELS; l++)
        for (int i = 0; i < 7 && levels[l][i].tok; i++)
            if (levels[l][i].op == op)
                return levels[l][i].tok;
    return "?";
}

static void print_ast(parser *p, tt_strbuf *sb, int node, int parent_prec, bool right)
{
    ast *a = &p->nodes[node];
    switch (a->kind) {
    case A_INT: tt_strbuf_printf(sb, "%lld", (long long)a->ival); return;
    case A_FLOAT: {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.9g", a->fval);
        tt_strbuf_append(sb, buf);
        if (!strpbrk(buf, ".eEn"))
            tt_strbuf_append(sb, ".0");
        return;
    }
    case A_NAME: tt_strbuf_append(sb, a->name); return;
    case A_INDEX:
    case A_CALL:
        tt_strbuf_printf(sb, "%s%s", a->name, a->kind == A_INDEX ? "[" : "(");
        for (int i = 0; i < a->nargs; i++) {
            if (i)
                tt_strbuf_append(sb, a->kind == A_INDEX ? "," : ", ");
            print_ast(p, sb, a->args[i], -1, false);
        }
        tt_strbuf_append(sb, a->kind == A_INDEX ? "]" : ")");
        return;
    case A_UN:
        tt_strbuf_append(sb, a->op == TT_EXPR_NEG ? "-" : "!");
        print_ast(p, sb, a->args[0], NLEVELS, false);
        return;
    default: {
        int prec = prec_of(a->op);
        /* Comparisons do not chain, so a comparison inside a comparison keeps its parentheses. */
        bool paren = prec < parent_prec || (prec == parent_prec && (right || prec == 2));
        if (paren)
            tt_strbuf_append(sb, "(");
        print_ast(p, sb, a->args[0], prec, false);
        tt_strbuf_printf(sb, " %s ", tok_of(a->op));
        print_ast(p, sb, a->args[1], prec, true);
        if (paren)
            tt_strbuf_append(sb, ")");
        return;
    }
    }
}

static const char *reduce_tok(tt_reduce_kind r)
{
    switch (r) {
    case TT_REDUCE_SUM: return "+=";
    case TT_REDUCE_MAX: return "max=";
    case TT_REDUCE_MIN: return "min=";
    case TT_REDUCE_PROD: return "*=";
    default: return "=";
    }
}

static void print_canonical(sema *s, tt_strbuf *sb)
{
    parser *p = s->p;
    bool first = true;
    for (int i = 0; i < p->nstmts; i++) {
        stmt *st = &p->stmts[i];
        if (st->kind != S_COMPUTE)
            continue;
        tt_strbuf_printf(sb, "%s%s[", first ? "" : "; ", st->name);
        first = false;
        for (int k = 0; k < st->nidx; k++)
            tt_strbuf_printf(sb, "%s%s", k ? "," : "", st->idx[k]);
        tt_strbuf_printf(sb, "] %s ", reduce_tok(st->reduce));
        print_ast(p, sb, st->rhs, -1, false);
    }
    /* Declarations: tensors in order of first appearance, then variable extents. */
    for (int t = 0; t < s->nt; t++) {
        if (s->t[t].decl < 0)
            continue;
        stmt *d = &p->stmts[s->t[t].decl];
        tt_strbuf_printf(sb, "; %s:%s%s[", d->name, d->constant ? "const " : "",
                         tt_dtype_name((tt_dtype)d->dtype));
        for (int k = 0; k < d->ndim; k++)
            tt_strbuf_printf(sb, "%s%lld", k ? "," : "", (long long)d->shape[k]);
        tt_strbuf_append(sb, "]");
    }
    for (int i = 0; i < p->nstmts; i++)
        if (p->stmts[i].kind == S_VAR_DECL)
            tt_strbuf_printf(sb, "; %s:%lld", p->stmts[i].name, (long long)p->stmts[i].extent);
}

tt_status tt_te_parse(const char *text, tt_dag *dag, tt_strbuf *canon, tt_errbuf *err)
{
    /* The parser's node table is large and filled as it is used: no need to zero it. */
    parser *p = malloc(sizeof(*p));
    sema *s = calloc(1, sizeof(*s));
    if (p) {
        p->pos = 0;
        p->stmt_no = 0;
        p->nnodes = 0;
        p->nstmts = 0;
    }
    tt_status r = TT_OK;
    if (!p || !s) {
        r = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    p->src = text;
    p->err = err;
    s->p = p;
    s->dag = dag;
    /* Parse. */
    for (;;) {
        skip_ws(p);
        if (!p->src[p->pos])
            break;
        if (p->nstmts >= MAX_STMTS) {
            r = perr(p, "more than %d statements", MAX_STMTS);
            goto out;
        }
        p->stmt_no = p->nstmts;
        if ((r = parse_stmt(p, &p->stmts[p->nstmts])))
            goto out;
        p->nstmts++;
        skip_ws(p);
        if (!p->src[p->pos])
            break;
        if ((r = expect(p, ";")))
            goto out;
    }
    /* Names. */
    int ncompute = 0;
    for (int i = 0; i < p->nstmts; i++) {
        stmt *st = &p->stmts[i];
        if (st->kind == S_VAR_DECL) {
            for (int k = 0; k < i; k++)
                if (p->stmts[k].kind == S_VAR_DECL && strcmp(p->stmts[k].name, st->name) == 0) {
                    r = serr(s, i, st->col, "variable '%s' declared twice", st->name);
                    goto out;
                }
            continue;
        }
        int ti = add_tensor(s, st->name, i, st->col);
        if (ti < 0) {
            r = serr(s, i, st->col, "too many tensors");
            goto out;
        }
        if (st->kind == S_TENSOR_DECL) {
            if (s->t[ti].decl >= 0) {
                r = serr(s, i, st->col, "tensor '%s' declared twice", st->name);
                goto out;
            }
            s->t[ti].decl = i;
        } else {
            if (s->t[ti].def >= 0) {
                r = serr(s, i, st->col, "tensor '%s' is assigned twice", st->name);
                goto out;
            }
            s->t[ti].def = i;
            ncompute++;
            collect_tensors(s, st->rhs, i);
        }
    }
    if (ncompute == 0) {
        r = tt_err(err, TT_ERR_BAD_WORKLOAD,
                   "te: no computation (write e.g. C[i,j] += A[i,k] * B[k,j])");
        goto out;
    }
    /* Inputs become placeholders, in order of first appearance. */
    for (int t = 0; t < s->nt; t++) {
        if (s->t[t].def >= 0)
            continue;
        if (s->t[t].decl < 0) {
            r = serr(s, s->t[t].first, s->t[t].first_col,
                     "tensor '%s' is read but never declared: add '%s:float32[...]'", s->t[t].name,
                     s->t[t].name);
            goto out;
        }
        stmt *d = &p->stmts[s->t[t].decl];
        s->t[t].op = tt_dag_placeholder(dag, d->name, (tt_dtype)d->dtype, d->ndim, d->shape);
        if (s->t[t].op < 0) {
            r = tt_err(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (d->constant)
            dag->ops.data[s->t[t].op].attrs |= TT_OP_ATTR_CONSTANT;
    }
    for (int i = 0; i < p->nstmts; i++)
        if (p->stmts[i].kind == S_COMPUTE && (r = build_compute(s, i)))
            goto out;
    if (tt_dag_sort_tvm(dag)) {
        r = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((r = tt_dag_validate(dag, err)))
        goto out;
    if (canon)
        print_canonical(s, canon);
out:
    free(p);
    free(s);
    return r;
}
