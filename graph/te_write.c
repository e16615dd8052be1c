/* ONNX nodes as tensor expressions: each fused subgraph becomes one `te:` program (the language
 * of docs/tensor-expressions.md), the same language the operator library is written in, so the
 * tuner, the database and the builds treat a network's kernels like any other workload.
 *
 * Every statement declares its tensor's shape; left-hand variables are i0, i1, ... (their scope is
 * one statement); reduction variables are r0, r1, ... numbered across the program and declared
 * with their extents.  Windows (Conv, pools) read a padding stage that the schedule inlines, as
 * the library's convolutions do.
 *
 * Layouts (layout.c): writers index tensors by logical dimensions (N, C, H, W) and every access
 * goes out in the tensor's memory order (tt_gtensor perm): rd_at for graph tensors, lhs and
 * indexed for the node's own statements, which take the layout of the node's output when they
 * have its rank.  A statement's variables i0, i1... run over its physical dimensions; LV() gives
 * the variable of each logical one. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net_int.h"

#define MAX_INTERNAL 256
#define NAME_LEN     16 /* "t123", "x31", "r40" */

typedef struct {
    tt_graph *g;
    int node; /* being written */
    tt_strbuf *sb;
    tt_strbuf decls;
    int *ph, nph;
    bool extra[TT__NET_MAX_INPUTS]; /* ph[k] is an output, not a placeholder */
    int internal[MAX_INTERNAL];     /* tensors computed in the program, named by tname() */
    char iname[MAX_INTERNAL][NAME_LEN];
    int ninternal;
    int ntmp, nred, nstmts;
    /* the node's output: its rank, memory order, and the variable of each logical dimension */
    int orank;
    bool permuted;
    uint8_t perm[TT_GRAPH_MAX_RANK]; /* a copy: lowering may move the tensors */
    const char *lv[TT_GRAPH_MAX_RANK];
    int which; /* the output of the node being written (Split) */
    tt_errbuf *err;
} tw;

static const char *const IV[] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};

/* The memory order of the node's rank-R statements (NULL: row-major). */
static const uint8_t *stmt_perm(const tw *w, int R)
{
    return R == w->orank && w->permuted ? w->perm : NULL;
}

/* The variable of each logical dimension in a rank-R statement of the node. */
static const char *const *LV(const tw *w, int R)
{
    return stmt_perm(w, R) ? w->lv : IV;
}

#define UNSUP(w, ...)                                                                              \
    tt__graph_node_err((w)->g, (w)->node, (w)->err, TT_ERR_UNSUPPORTED, __VA_ARGS__)
#define BAD(w, ...)                                                                                \
    tt__graph_node_err((w)->g, (w)->node, (w)->err, TT_ERR_BAD_WORKLOAD, __VA_ARGS__)

static const tt_gnode *cur(const tw *w)
{
    return &w->g->nodes.data[w->node];
}

static tt_gtensor *T(const tw *w, int t)
{
    return &w->g->tensors.data[t];
}

/* Input i of the current node (-1 when left out). */
static int input(const tw *w, int i)
{
    return i < cur(w)->ninputs ? cur(w)->inputs[i] : -1;
}

static int64_t attr_int(const tw *w, const char *name, int64_t def)
{
    return tt__attr_int(cur(w), name, def);
}

static double attr_float(const tw *w, const char *name, double def)
{
    return tt__attr_float(cur(w), name, def);
}

static const int64_t *attr_ints(const tw *w, const char *name, size_t *n)
{
    return tt__attr_ints(cur(w), name, n);
}

static const char *attr_str(const tw *w, const char *name, const char *def)
{
    return tt__attr_str(cur(w), name, def);
}

static int axis_norm(int64_t a, int rank)
{
    return (int)(a < 0 ? a + rank : a);
}

/* ---- names, literals, reads ---- */

static bool is_scalar_const(const tt_gtensor *t)
{
    return t->kind == TT_GT_CONST && tt_gtensor_numel(t) == 1 && t->dtype != TT_DT_BOOL;
}

/* A number in te syntax: floats keep a point or exponent, infinities become the dtype's largest
 * finite value, negatives are parenthesised. */
static void lit(tt_strbuf *sb, double v, tt_dtype dt)
{
    char buf[64];
    if (!tt_dtype_is_float(dt)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)v);
    } else {
        double big = dt == TT_DT_FLOAT32 ? FLT_MAX : DBL_MAX;
        if (isinf(v))
            v = v > 0 ? big : -big;
        snprintf(buf, sizeof(buf), dt == TT_DT_FLOAT32 ? "%.9g" : "%.17g", v);
        if (!strpbrk(buf, ".e"))
            strcat(buf, ".0");
    }
    tt_strbuf_printf(sb, buf[0] == '-' ? "(%s)" : "%s", buf);
}

/* "[d0,...]" in memory order (perm NULL: row-major). */
static void decl_dims(tt_strbuf *sb, int rank, const int64_t *dims, const uint8_t *perm)
{
    tt_strbuf_append(sb, "[");
    if (rank == 0)
        tt_strbuf_append(sb, "1");
    for (int i = 0; i < rank; i++)
        tt_strbuf_printf(sb, "%s%lld", i ? "," : "", (long long)dims[perm ? perm[i] : i]);
    tt_strbuf_append(sb, "]");
}

/* The name a read of tensor t uses: a tensor the program computes, else a placeholder. */
static tt_status tname(tw *w, int t, char out[NAME_LEN])
{
    for (int i = 0; i < w->ninternal; i++)
        if (w->internal[i] == t) {
            memcpy(out, w->iname[i], NAME_LEN);
            return TT_OK;
        }
    int k = 0;
    while (k < w->nph && w->ph[k] != t)
        k++;
    const tt_gtensor *x = T(w, t);
    if (k == w->nph) {
        if (w->nph == TT__NET_MAX_INPUTS)
            return UNSUP(w, "the fused subgraph reads more than %d tensors", TT__NET_MAX_INPUTS);
        w->ph[w->nph++] = t;
    }
    snprintf(out, NAME_LEN, "%c%d", x->kind == TT_GT_CONST ? 'w' : 'x', k);
    return TT_OK;
}

/* A second (third...) output of the program: tensor t, written by the kernel and read by no
 * statement, named y<k> with k its slot in ph. */
static tt_status extra_output(tw *w, int t, char out[NAME_LEN])
{
    if (w->nph == TT__NET_MAX_INPUTS)
        return UNSUP(w, "the fused subgraph reads more than %d tensors", TT__NET_MAX_INPUTS);
    snprintf(out, NAME_LEN, "y%d", w->nph);
    w->extra[w->nph] = true;
    w->ph[w->nph++] = t;
    return TT_OK;
}

/* Appends a read of tensor t at the given index expressions (one per dimension of t), or its
 * value when it is a scalar constant. */
static tt_status rd_at(tw *w, tt_strbuf *sb, int t, const char *const *idx)
{
    const tt_gtensor *x = T(w, t);
    if (is_scalar_const(x)) {
        lit(sb, tt__gtensor_value(x, 0), x->dtype);
        return TT_OK;
    }
    char name[NAME_LEN];
    tt_status s = tname(w, t, name);
    if (s)
        return s;
    tt_strbuf_printf(sb, "%s[", name);
    if (x->rank == 0)
        tt_strbuf_append(sb, "0");
    for (int k = 0; k < x->rank; k++) {
        int d = x->permuted ? x->perm[k] : k;
        tt_strbuf_printf(sb, "%s%s", k ? "," : "", x->dims[d] == 1 ? "0" : idx[d]);
    }
    tt_strbuf_append(sb, "]");
    return TT_OK;
}

/* Appends a read of t broadcast (numpy rules) to a rank-R index of variables vars. */
static tt_status rd(tw *w, tt_strbuf *sb, int t, int R, const char *const *vars)
{
    const tt_gtensor *x = T(w, t);
    return rd_at(w, sb, t, vars + (R - x->rank));
}

/* Starts a statement "name[i0,...] op " and declares name (dims logical, declared in the memory
 * order of the node's rank-`rank` statements). */
static void lhs(tw *w, const char *name, tt_dtype dt, int rank, const int64_t *dims, const char *op)
{
    if (w->nstmts++)
        tt_strbuf_append(w->sb, "; ");
    tt_strbuf_printf(w->sb, "%s[", name);
    if (rank == 0)
        tt_strbuf_append(w->sb, "i0");
    for (int i = 0; i < rank; i++)
        tt_strbuf_printf(w->sb, "%s%s", i ? "," : "", IV[i]);
    tt_strbuf_printf(w->sb, "] %s ", op);
    tt_strbuf_printf(&w->decls, "; %s:%s", name, tt_dtype_name(dt));
    decl_dims(&w->decls, rank, dims, stmt_perm(w, rank));
}

/* Appends name[...]: a rank-R tensor of the node's own statements at logical index idx. */
static void indexed(const tw *w, tt_strbuf *sb, const char *name, int R, const char *const *idx)
{
    const uint8_t *p = stmt_perm(w, R);
    tt_strbuf_printf(sb, "%s[", name);
    for (int k = 0; k < R; k++)
        tt_strbuf_printf(sb, "%s%s", k ? "," : "", idx[p ? p[k] : k]);
    tt_strbuf_append(sb, "]");
}

/* A fresh internal tensor name. */
static void tmp(tw *w, char out[NAME_LEN])
{
    snprintf(out, NAME_LEN, "t%d", w->ntmp++);
}

/* A fresh reduction variable of extent n, declared. */
static void red(tw *w, int64_t n, char out[NAME_LEN])
{
    snprintf(out, NAME_LEN, "r%d", w->nred++);
    tt_strbuf_printf(&w->decls, "; %s:%lld", out, (long long)n);
}

/* Records that tensor t is computed in the program under `name`. */
static void computed(tw *w, int t, const char *name)
{
    if (w->ninternal < MAX_INTERNAL) {
        w->internal[w->ninternal] = t;
        snprintf(w->iname[w->ninternal++], NAME_LEN, "%s", name);
    }
}

/* ---- elementwise ---- */

static tt_status w_binary(tw *w, const char *out, const tt_gtensor *o)
{
    static const char *const sym[] = {
        [TT_GOP_ADD] = " + ", [TT_GOP_SUB] = " - ", [TT_GOP_MUL] = " * ", [TT_GOP_DIV] = " / "};
    tt_gop op = cur(w)->op;
    int a = input(w, 0), b = input(w, 1);
    if (op == TT_GOP_DIV && !tt_dtype_is_float(o->dtype))
        return UNSUP(w, "integer Div truncates toward zero, which kernels do not compute");
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    tt_status s = rd(w, w->sb, a, o->rank, lv);
    tt_strbuf_append(w->sb, sym[op]);
    if (!s)
        s = rd(w, w->sb, b, o->rank, lv);
    return s;
}

/* Pow: common constant exponents exactly, others as exp(y * log(x)) (x > 0, as for floats). */
static tt_status w_pow(tw *w, const char *out, const tt_gtensor *o)
{
    int a = input(w, 0), b = input(w, 1);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "integer Pow is not supported");
    const char *const *lv = LV(w, o->rank);
    tt_strbuf x = {0};
    tt_status s = rd(w, &x, a, o->rank, lv);
    if (s) {
        tt_strbuf_free(&x);
        return s;
    }
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    const tt_gtensor *e = T(w, b);
    double ev = is_scalar_const(e) ? tt__gtensor_value(e, 0) : NAN;
    const char *xs = tt_strbuf_cstr(&x);
    if (ev == 1)
        tt_strbuf_printf(w->sb, "%s", xs);
    else if (ev == 2)
        tt_strbuf_printf(w->sb, "%s * %s", xs, xs);
    else if (ev == 3)
        tt_strbuf_printf(w->sb, "%s * %s * %s", xs, xs, xs);
    else if (ev == 0.5)
        tt_strbuf_printf(w->sb, "sqrt(%s)", xs);
    else if (ev == -1)
        tt_strbuf_printf(w->sb, "1.0 / %s", xs);
    else if (ev == 0)
        tt_strbuf_append(w->sb, "1.0");
    else {
        tt_strbuf_append(w->sb, "exp(");
        s = rd(w, w->sb, b, o->rank, lv);
        tt_strbuf_printf(w->sb, " * log(%s))", xs);
    }
    tt_strbuf_free(&x);
    return s;
}

static tt_status w_unary(tw *w, const char *out, const tt_gtensor *o)
{
    tt_gop op = cur(w)->op;
    int a = input(w, 0);
    if (op != TT_GOP_RELU && op != TT_GOP_CLIP && op != TT_GOP_CAST && op != TT_GOP_IDENTITY &&
        op != TT_GOP_DROPOUT && !tt_dtype_is_float(o->dtype))
        return UNSUP(w, "%s of %s values is not supported", tt_gop_name(op),
                     tt_dtype_name(o->dtype));
    tt_status s = TT_OK;
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    switch (op) {
    case TT_GOP_RELU:
        tt_strbuf_append(w->sb, "max(");
        s = rd(w, w->sb, a, o->rank, lv);
        tt_strbuf_append(w->sb, ", 0)");
        return s;
    case TT_GOP_CLIP: {
        int lo = input(w, 1), hi = input(w, 2);
        if (lo >= 0)
            tt_strbuf_append(w->sb, "max(");
        if (hi >= 0)
            tt_strbuf_append(w->sb, "min(");
        s = rd(w, w->sb, a, o->rank, lv);
        if (!s && hi >= 0) {
            tt_strbuf_append(w->sb, ", ");
            s = rd_at(w, w->sb, hi, lv);
            tt_strbuf_append(w->sb, ")");
        }
        if (!s && lo >= 0) {
            tt_strbuf_append(w->sb, ", ");
            s = rd_at(w, w->sb, lo, lv);
            tt_strbuf_append(w->sb, ")");
        }
        return s;
    }
    case TT_GOP_CAST: tt_strbuf_printf(w->sb, "%s(", tt_dtype_name(o->dtype)); break;
    case TT_GOP_SQRT: tt_strbuf_append(w->sb, "sqrt("); break;
    case TT_GOP_SIGMOID: tt_strbuf_append(w->sb, "sigmoid("); break;
    case TT_GOP_TANH: tt_strbuf_append(w->sb, "tanh("); break;
    case TT_GOP_ERF: tt_strbuf_append(w->sb, "erf("); break;
    default: tt_strbuf_append(w->sb, "("); break; /* Identity, Dropout */
    }
    s = rd(w, w->sb, a, o->rank, lv);
    tt_strbuf_append(w->sb, ")");
    return s;
}

/* The FORMULA column of the operator table (graph.h). */
static const char *const formulas[TT_GOP_COUNT] = {
#define TT_GOP_FORMULA(e, name, pattern, layout, shape, writer, formula) [TT_GOP_##e] = formula,
    TT_GOP_LIST(TT_GOP_FORMULA)
#undef TT_GOP_FORMULA
};

/* An elementwise operator written as its formula: $ or $0, $1 become the inputs read at the
 * output's index (broadcast), {name=default} the float attribute `name`. */
static tt_status write_formula(tw *w, const char *out, const tt_gtensor *o, const char *f)
{
    tt_gop op = cur(w)->op;
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "%s of %s values is not supported", tt_gop_name(op),
                     tt_dtype_name(o->dtype));
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    tt_status s = TT_OK;
    for (const char *p = f; *p && !s; p++) {
        if (*p == '$') {
            int i = 0;
            if (p[1] >= '0' && p[1] <= '9')
                i = *++p - '0';
            int t = input(w, i);
            if (t < 0)
                return BAD(w, "input %d is missing", i);
            s = rd(w, w->sb, t, o->rank, lv);
        } else if (*p == '{') {
            const char *eq = strchr(p, '='), *end = strchr(p, '}');
            char name[32];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - p - 1), p + 1);
            lit(w->sb, attr_float(w, name, strtod(eq + 1, NULL)), o->dtype);
            p = end;
        } else {
            tt_strbuf_appendn(w->sb, p, 1);
        }
    }
    return s;
}

static tt_status w_formula(tw *w, const char *out, const tt_gtensor *o)
{
    return write_formula(w, out, o, formulas[cur(w)->op]);
}

/* Gelu (opset 20): exact, 0.5 x (1 + erf(x / sqrt 2)), or with approximate = "tanh",
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
static tt_status w_gelu(tw *w, const char *out, const tt_gtensor *o)
{
    const char *approx = attr_str(w, "approximate", "none");
    if (!strcmp(approx, "none"))
        return write_formula(w, out, o, "$ * 0.5 * (1.0 + erf($ * 0.7071067811865476))");
    if (!strcmp(approx, "tanh"))
        return write_formula(
            w, out, o, "$ * 0.5 * (1.0 + tanh(0.7978845608028654 * ($ + 0.044715 * $ * $ * $)))");
    return BAD(w, "approximate '%s' is not none or tanh", approx);
}

/* Min and Max of any number of inputs, broadcast: min(min(a, b), c). */
static tt_status w_min_max(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gnode *n = cur(w);
    const char *fn = n->op == TT_GOP_MIN ? "min(" : "max(";
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    for (int i = 1; i < n->ninputs; i++)
        tt_strbuf_append(w->sb, fn);
    tt_status s = rd(w, w->sb, input(w, 0), o->rank, lv);
    for (int i = 1; i < n->ninputs && !s; i++) {
        tt_strbuf_append(w->sb, ", ");
        s = rd(w, w->sb, input(w, i), o->rank, lv);
        tt_strbuf_append(w->sb, ")");
    }
    return s;
}

/* BatchNormalization (inference): y = x * a[c] + b[c] with a = s / sqrt(v + eps) and
 * b = B - m * a; a and b are computed here when the statistics are constants. */
static tt_status w_batchnorm(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0), sc = input(w, 1), bi = input(w, 2), mean = input(w, 3), var = input(w, 4);
    double eps = attr_float(w, "epsilon", 1e-5);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "BatchNormalization of %s values", tt_dtype_name(o->dtype));
    const char *const *lv = LV(w, o->rank);
    const char *cv[1] = {lv[1]};
    tt_status s = TT_OK;
    if (T(w, sc)->kind == TT_GT_CONST && T(w, bi)->kind == TT_GT_CONST &&
        T(w, mean)->kind == TT_GT_CONST && T(w, var)->kind == TT_GT_CONST) {
        int64_t C = o->dims[1];
        tt_dtype dt = o->dtype;
        int ta = tt__net_new_const(w->g, "bn_scale", dt, 1, &C);
        int tb = ta >= 0 ? tt__net_new_const(w->g, "bn_shift", dt, 1, &C) : -1;
        if (tb < 0)
            return tt_err(w->err, TT_ERR_NOMEM, "out of memory");
        o = T(w, cur(w)->outputs[0]); /* the tensors may have moved */
        for (int64_t c = 0; c < C; c++) {
            double a, b;
            tt__batchnorm_affine(w->g, cur(w), c, &a, &b);
            tt__gtensor_set(T(w, ta), c, a);
            tt__gtensor_set(T(w, tb), c, b);
        }
        lhs(w, out, o->dtype, o->rank, o->dims, "=");
        s = rd(w, w->sb, x, o->rank, lv);
        tt_strbuf_append(w->sb, " * ");
        if (!s)
            s = rd_at(w, w->sb, ta, cv);
        tt_strbuf_append(w->sb, " + ");
        if (!s)
            s = rd_at(w, w->sb, tb, cv);
        return s;
    }
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    tt_strbuf_append(w->sb, "(");
    s = rd(w, w->sb, x, o->rank, lv);
    tt_strbuf_append(w->sb, " - ");
    if (!s)
        s = rd_at(w, w->sb, mean, cv);
    tt_strbuf_append(w->sb, ") / sqrt(");
    if (!s)
        s = rd_at(w, w->sb, var, cv);
    tt_strbuf_append(w->sb, " + ");
    lit(w->sb, eps, o->dtype);
    tt_strbuf_append(w->sb, ") * ");
    if (!s)
        s = rd_at(w, w->sb, sc, cv);
    tt_strbuf_append(w->sb, " + ");
    if (!s)
        s = rd_at(w, w->sb, bi, cv);
    return s;
}

/* ---- windows: Conv, ConvTranspose, pools ---- */

/* The padding stage of a window op: x [N, C, S...] padded to cover every window, `fill` outside.
 * Writes its name into src and sets *padded; x's own name when nothing is padded. */
static tt_status pad_stage(tw *w, int x, const tt__window *win, double fill, char src[NAME_LEN],
                           bool *padded)
{
    const tt_gtensor *X = T(w, x);
    int64_t dims[TT_GRAPH_MAX_RANK] = {X->dims[0], X->dims[1]};
    bool any = false;
    for (int i = 0; i < win->nk; i++) {
        /* the last window's end: past the input under ceil mode or end padding */
        int64_t need =
            (win->out[i] - 1) * win->stride[i] + (win->kernel[i] - 1) * win->dilation[i] + 1;
        dims[2 + i] = need;
        any |= win->pad_begin[i] > 0 || need > X->dims[2 + i] + win->pad_begin[i];
    }
    *padded = any;
    if (!any)
        return tname(w, x, src);
    const char *const *lv = LV(w, X->rank);
    char buf[TT__MAX_WINDOW][48];
    const char *idx[TT_GRAPH_MAX_RANK] = {lv[0], lv[1]};
    for (int i = 0; i < win->nk; i++) {
        if (win->pad_begin[i]) /* negative: a crop (conv_regions.c) */
            snprintf(buf[i], sizeof(buf[i]), "%s%+lld", lv[2 + i], (long long)-win->pad_begin[i]);
        else
            snprintf(buf[i], sizeof(buf[i]), "%s", lv[2 + i]);
        idx[2 + i] = buf[i];
    }
    tmp(w, src);
    lhs(w, src, X->dtype, X->rank, dims, "=");
    tt_strbuf_append(w->sb, "select(");
    for (int i = 0; i < win->nk; i++)
        tt_strbuf_printf(w->sb, "%s%s >= %lld && %s < %lld", i ? " && " : "", lv[2 + i],
                         (long long)win->pad_begin[i], lv[2 + i],
                         (long long)(win->pad_begin[i] + X->dims[2 + i]));
    tt_strbuf_append(w->sb, ", ");
    tt_status s = rd_at(w, w->sb, x, idx);
    tt_strbuf_append(w->sb, ", ");
    lit(w->sb, fill, X->dtype);
    tt_strbuf_append(w->sb, ")");
    return s;
}

/* A read of a window op's source at logical index idx: the padding stage, or x itself. */
static tt_status rd_src(tw *w, int x, const char *src, bool padded, const char *const *idx)
{
    if (!padded)
        return rd_at(w, w->sb, x, idx);
    indexed(w, w->sb, src, T(w, x)->rank, idx);
    return TT_OK;
}

#define TAP_LEN 80

/* idx[2 + i] = "i2*2+r1*2": for each spatial dimension of the window, the input position of the
 * output position (logical variable lv[2 + i]) and tap rs[i], written into taps[i].  Read from
 * the input itself (not `padded`), a crop (negative pads, conv_regions.c) offsets it. */
static void window_taps(const tt__window *win, bool padded, const char *const *lv,
                        const char (*rs)[NAME_LEN], char (*taps)[TAP_LEN], const char **idx)
{
    for (int i = 0; i < win->nk; i++) {
        char st[32] = "", dl[32] = "";
        if (win->stride[i] != 1)
            snprintf(st, sizeof(st), "*%lld", (long long)win->stride[i]);
        if (win->dilation[i] != 1)
            snprintf(dl, sizeof(dl), "*%lld", (long long)win->dilation[i]);
        snprintf(taps[i], TAP_LEN, "%s%s+%s%s", lv[2 + i], st, rs[i], dl);
        if (!padded && win->pad_begin[i] < 0) {
            size_t len = strlen(taps[i]);
            snprintf(taps[i] + len, TAP_LEN - len, "+%lld", (long long)-win->pad_begin[i]);
        }
        idx[2 + i] = taps[i];
    }
}

/* Adds the bias b[co] (if any) to tensor `src` into `out`, or names the result `out`. */
static tt_status bias_stage(tw *w, const char *src, int bias, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    indexed(w, w->sb, src, o->rank, lv);
    tt_strbuf_append(w->sb, " + ");
    const char *cv[1] = {lv[1]};
    return rd_at(w, w->sb, bias, cv);
}

static tt_status w_conv(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0), wt = input(w, 1), b = input(w, 2);
    const tt_gtensor *W = T(w, wt);
    tt__window win;
    tt_status s = tt__graph_window(w->g, w->node, &win, w->err);
    if (s)
        return s;
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "Conv of %s values", tt_dtype_name(o->dtype));
    int64_t G = attr_int(w, "group", 1), CO = W->dims[0], CIg = W->dims[1], COg = CO / G;
    const char *const *lv = LV(w, o->rank);
    char src[NAME_LEN], acc[NAME_LEN];
    bool padded;
    if ((s = pad_stage(w, x, &win, 0, src, &padded)))
        return s;
    if (b >= 0)
        tmp(w, acc);
    else
        snprintf(acc, sizeof(acc), "%s", out);
    char rc[NAME_LEN] = "0", rs[TT__MAX_WINDOW][NAME_LEN];
    if (CIg > 1)
        red(w, CIg, rc);
    for (int i = 0; i < win.nk; i++)
        red(w, win.kernel[i], rs[i]);
    /* input channel: rc (one group), co's group's first channel + rc */
    char ci[TAP_LEN], taps[TT__MAX_WINDOW][TAP_LEN], per[32] = "", off[48] = "";
    if (G == 1)
        snprintf(ci, sizeof(ci), "%s", rc);
    else {
        if (COg != 1)
            snprintf(per, sizeof(per), "/%lld", (long long)COg);
        if (CIg != 1)
            snprintf(off, sizeof(off), "*%lld+%s", (long long)CIg, rc);
        snprintf(ci, sizeof(ci), "%s%s%s", lv[1], per, off);
    }
    const char *xi[TT_GRAPH_MAX_RANK] = {lv[0], ci}, *wi[TT_GRAPH_MAX_RANK] = {lv[1], rc};
    window_taps(&win, padded, lv, (const char(*)[NAME_LEN])rs, taps, xi);
    /* a region of a convolution (conv_regions.c) reads its taps of the whole kernel's weights */
    size_t nfirst;
    const int64_t *first = attr_ints(w, TT_NET_FIRST_TAP, &nfirst);
    if (first && nfirst != (size_t)win.nk)
        return UNSUP(w, "%s has %zu values for %d spatial dimensions", TT_NET_FIRST_TAP, nfirst,
                     win.nk);
    char wtaps[TT__MAX_WINDOW][TAP_LEN];
    for (int i = 0; i < win.nk; i++) {
        wi[2 + i] = rs[i];
        if (first && first[i]) {
            snprintf(wtaps[i], TAP_LEN, "%s+%lld", rs[i], (long long)first[i]);
            wi[2 + i] = wtaps[i];
        }
    }
    lhs(w, acc, o->dtype, o->rank, o->dims, "+=");
    if ((s = rd_src(w, x, src, padded, xi)))
        return s;
    tt_strbuf_append(w->sb, " * ");
    if ((s = rd_at(w, w->sb, wt, wi)))
        return s;
    return b >= 0 ? bias_stage(w, acc, b, out, o) : TT_OK;
}

/* ---- ConvWinograd (winograd.c): F(m x m, 3x3), m = 4 or 2 ----
 *
 * Five stages; the internal ones are row-major [m + 2, m + 2, tiles, channels], a tile t being
 * (image, tile row, tile column):
 *   d[a, j, t, c] = (B^T x_t)[a, j]                      the input tile's rows, through padding
 *   v[a, b, t, c] = (d B)[a, b]                          and its columns
 *   m[a, b, t, o] += v[a, b, t, r] * U[a, b, r, o]       (m + 2)^2 products over the channels
 *   z[a, y, t, o] = (m A)[a, y]                          the output transform's columns
 *   out[n, o, h, w] = (A^T z)[h % m, w % m] of the tile of (n, h, w), then the bias
 * Each transform is a select chain over the rows of its constant matrix, so an element costs
 * the row's few nonzero terms.  Schedules keep v a pass of its own (inlined into the products it
 * would be recomputed per output channel) and inline d into v and z into the output
 * (tt_access_transform_into_reduction and _into_elementwise, tuner/access.h). */

static const int8_t WINO_BT4[6][6] = {
    {4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1},
};
static const int8_t WINO_AT4[4][6] = {
    {1, 1, 1, 1, 1, 0},
    {0, 1, -1, 2, -2, 0},
    {0, 1, 1, 4, 4, 0},
    {0, 1, -1, 8, -8, 1},
};
static const int8_t WINO_BT2[4][6] = {
    {1, 0, -1, 0},
    {0, 1, 1, 0},
    {0, -1, 1, 0},
    {0, 1, 0, -1},
};
static const int8_t WINO_AT2[2][6] = {
    {1, 1, 1, 0},
    {0, 1, -1, -1},
};

typedef tt_status (*wino_term)(tw *w, int k, const void *ctx);

/* Appends sum over k of row[k] * term(k), the nonzero terms only. */
static tt_status wino_comb(tw *w, const int8_t *row, wino_term term, const void *ctx)
{
    bool first = true;
    for (int k = 0; k < 6; k++) {
        int c = row[k];
        if (!c)
            continue;
        if (first)
            tt_strbuf_append(w->sb, c < 0 ? "-" : "");
        else
            tt_strbuf_append(w->sb, c < 0 ? " - " : " + ");
        if (c != 1 && c != -1)
            tt_strbuf_printf(w->sb, "%d * ", c < 0 ? -c : c);
        tt_status s = term(w, k, ctx);
        if (s)
            return s;
        first = false;
    }
    return TT_OK;
}

/* Appends select(var == 0, row 0, select(var == 1, row 1, ... row n-1)). */
static tt_status wino_chain(tw *w, const char *var, const int8_t (*rows)[6], int n, wino_term term,
                            const void *ctx)
{
    tt_status s = TT_OK;
    for (int r = 0; r < n - 1 && !s; r++) {
        tt_strbuf_printf(w->sb, "select(%s == %d, ", var, r);
        s = wino_comb(w, rows[r], term, ctx);
        tt_strbuf_append(w->sb, ", ");
    }
    if (!s)
        s = wino_comb(w, rows[n - 1], term, ctx);
    for (int r = 0; r < n - 1; r++)
        tt_strbuf_append(w->sb, ")");
    return s;
}

/* Starts a statement "name[i0,i1,i2,i3] op " of an internal row-major tensor. */
static void wino_lhs(tw *w, const char *name, const int64_t *dims, const char *op)
{
    if (w->nstmts++)
        tt_strbuf_append(w->sb, "; ");
    tt_strbuf_printf(w->sb, "%s[i0,i1,i2,i3] %s ", name, op);
    tt_strbuf_printf(&w->decls, "; %s:float32", name);
    decl_dims(&w->decls, 4, dims, NULL);
}

typedef struct {
    int x;
    const char *src;
    bool padded;
    const char *n, *row, *col; /* the tile's image, and the index of its first row and column */
} wino_input;

/* The input tile's element (k, j) of statement d: x[n, c = i3, row + k, col + j = i1]. */
static tt_status wino_d_term(tw *w, int k, const void *ctx)
{
    const wino_input *in = ctx;
    char r[96], c[96];
    snprintf(r, sizeof(r), "%s + %d", in->row, k);
    snprintf(c, sizeof(c), "%s + i1", in->col);
    const char *idx[4] = {in->n, "i3", r, c};
    return rd_src(w, in->x, in->src, in->padded, idx);
}

/* name[i0, k, i2, i3]: statement v's and z's term. */
static tt_status wino_row_term(tw *w, int k, const void *ctx)
{
    tt_strbuf_printf(w->sb, "%s[i0,%d,i2,i3]", (const char *)ctx, k);
    return TT_OK;
}

typedef struct {
    const char *z, *col, *tile, *co;
} wino_output;

/* z[a = k, w % 4, tile, co]: the output statement's term. */
static tt_status wino_out_term(tw *w, int k, const void *ctx)
{
    const wino_output *o = ctx;
    tt_strbuf_printf(w->sb, "%s[%d,%s,%s,%s]", o->z, k, o->col, o->tile, o->co);
    return TT_OK;
}

static tt_status w_conv_winograd(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0), u = input(w, 1), b = input(w, 2);
    const tt_gtensor *X = T(w, x), *U = T(w, u);
    tt__window win;
    tt_status s = tt__graph_window(w->g, w->node, &win, w->err);
    if (s)
        return s;
    if (o->dtype != TT_DT_FLOAT32 || X->rank != 4 || U->rank != 4 || win.nk != 2 ||
        (U->dims[0] != 6 && U->dims[0] != 4) || U->dims[1] != U->dims[0])
        return BAD(w, "ConvWinograd needs a 2-D float32 convolution and weights of F(4x4, 3x3) "
                      "or F(2x2, 3x3)");
    const int alpha = (int)U->dims[0], m = alpha - 2;
    const int8_t(*BT)[6] = m == 4 ? WINO_BT4 : WINO_BT2, (*AT)[6] = m == 4 ? WINO_AT4 : WINO_AT2;
    int64_t N = o->dims[0], CI = U->dims[2], CO = U->dims[3];
    int64_t TH = (o->dims[2] + m - 1) / m, TW = (o->dims[3] + m - 1) / m, P = N * TH * TW;
    /* padding that covers every tile: TH * m + 2 rows */
    tt__window cover = win;
    cover.out[0] = TH * m, cover.out[1] = TW * m;
    char src[NAME_LEN];
    bool padded;
    if ((s = pad_stage(w, x, &cover, 0, src, &padded)))
        return s;
    /* the tile t = i2 of statements d, v, m, z: image, first row, first column */
    char n[64], row[64], col[64];
    if (N == 1)
        snprintf(n, sizeof(n), "0");
    else
        snprintf(n, sizeof(n), "i2 / %lld", (long long)(TH * TW));
    if (N == 1)
        snprintf(row, sizeof(row), "i2 / %lld * %d", (long long)TW, m);
    else
        snprintf(row, sizeof(row), "i2 / %lld %% %lld * %d", (long long)TW, (long long)TH, m);
    snprintf(col, sizeof(col), "i2 %% %lld * %d", (long long)TW, m);
    char d[NAME_LEN], v[NAME_LEN], mm[NAME_LEN], z[NAME_LEN], acc[NAME_LEN], r[NAME_LEN];
    tmp(w, d);
    int64_t din[4] = {alpha, alpha, P, CI};
    wino_lhs(w, d, din, "=");
    wino_input in = {x, src, padded, n, row, col};
    if ((s = wino_chain(w, "i0", BT, alpha, wino_d_term, &in)))
        return s;
    tmp(w, v);
    wino_lhs(w, v, din, "=");
    if ((s = wino_chain(w, "i1", BT, alpha, wino_row_term, d)))
        return s;
    tmp(w, mm);
    red(w, CI, r);
    int64_t dm[4] = {alpha, alpha, P, CO};
    wino_lhs(w, mm, dm, "+=");
    tt_strbuf_printf(w->sb, "%s[i0,i1,i2,%s] * ", v, r);
    const char *ui[4] = {"i0", "i1", r, "i3"};
    if ((s = rd_at(w, w->sb, u, ui)))
        return s;
    tmp(w, z);
    int64_t dz[4] = {alpha, m, P, CO};
    wino_lhs(w, z, dz, "=");
    if ((s = wino_chain(w, "i1", AT, m, wino_row_term, mm)))
        return s;
    /* the output, in the node's layout */
    const char *const *lv = LV(w, o->rank);
    char hv[48], wcol[48], tile[160];
    snprintf(hv, sizeof(hv), "%s %% %d", lv[2], m);
    snprintf(wcol, sizeof(wcol), "%s %% %d", lv[3], m);
    if (N == 1)
        snprintf(tile, sizeof(tile), "%s / %d * %lld + %s / %d", lv[2], m, (long long)TW, lv[3], m);
    else
        snprintf(tile, sizeof(tile), "%s * %lld + %s / %d * %lld + %s / %d", lv[0],
                 (long long)(TH * TW), lv[2], m, (long long)TW, lv[3], m);
    if (b >= 0)
        tmp(w, acc);
    else
        snprintf(acc, sizeof(acc), "%s", out);
    lhs(w, acc, o->dtype, o->rank, o->dims, "=");
    wino_output wo = {z, wcol, tile, lv[1]};
    if ((s = wino_chain(w, hv, AT, m, wino_out_term, &wo)))
        return s;
    return b >= 0 ? bias_stage(w, acc, b, out, o) : TT_OK;
}

/* ConvTranspose as a gather: out[n, co, o] sums x[n, ci, (o + pad - r*d) / s] * w[ci, co', r]
 * over the taps whose input position is whole and inside x. */
static tt_status w_conv_transpose(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0), wt = input(w, 1), b = input(w, 2);
    const tt_gtensor *X = T(w, x), *W = T(w, wt);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "ConvTranspose of %s values", tt_dtype_name(o->dtype));
    int nk = X->rank - 2;
    if (nk > TT__MAX_WINDOW)
        return UNSUP(w, "more than %d spatial dimensions", TT__MAX_WINDOW);
    int64_t G = attr_int(w, "group", 1), CIg = X->dims[1] / G, COg = W->dims[1];
    size_t ns, nd, np, nop, nos, nks;
    const int64_t *strides = attr_ints(w, "strides", &ns), *dil = attr_ints(w, "dilations", &nd),
                  *pads = attr_ints(w, "pads", &np), *opad = attr_ints(w, "output_padding", &nop),
                  *ks = attr_ints(w, "kernel_shape", &nks);
    attr_ints(w, "output_shape", &nos); /* when given, the pads follow from it */
    const char *autopad = attr_str(w, "auto_pad", "NOTSET");
    bool same = !strcmp(autopad, "SAME_UPPER") || !strcmp(autopad, "SAME_LOWER");
    int64_t st[TT__MAX_WINDOW], dl[TT__MAX_WINDOW], kk[TT__MAX_WINDOW], pb[TT__MAX_WINDOW];
    for (int i = 0; i < nk; i++) {
        st[i] = ns > (size_t)i ? strides[i] : 1;
        dl[i] = nd > (size_t)i ? dil[i] : 1;
        kk[i] = nks > (size_t)i ? ks[i] : W->dims[2 + i];
        int64_t op = nop > (size_t)i ? opad[i] : 0;
        if (nos || same) {
            int64_t total =
                st[i] * (X->dims[2 + i] - 1) + op + (kk[i] - 1) * dl[i] + 1 - o->dims[2 + i];
            total = total < 0 ? 0 : total;
            pb[i] = !strcmp(autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
        } else
            pb[i] = np ? pads[i] : 0;
    }
    char xn[NAME_LEN], wn[NAME_LEN], acc[NAME_LEN], rc[NAME_LEN] = "0",
                                                    rs[TT__MAX_WINDOW][NAME_LEN];
    tt_status s;
    if ((s = tname(w, x, xn)) || (s = tname(w, wt, wn)))
        return s;
    if (b >= 0)
        tmp(w, acc);
    else
        snprintf(acc, sizeof(acc), "%s", out);
    if (CIg > 1)
        red(w, CIg, rc);
    for (int i = 0; i < nk; i++)
        red(w, kk[i], rs[i]);
    lhs(w, acc, o->dtype, o->rank, o->dims, "+=");
    /* p = o + pb - r*d: the position in the stride-dilated input */
    tt_strbuf *sb = w->sb;
    tt_strbuf_append(sb, "select(");
    for (int i = 0; i < nk; i++) {
        char p[96];
        snprintf(p, sizeof(p), "(%s + %lld - %s*%lld)", IV[2 + i], (long long)pb[i], rs[i],
                 (long long)dl[i]);
        tt_strbuf_printf(sb, "%s%s >= 0 && %s < %lld", i ? " && " : "", p, p,
                         (long long)(X->dims[2 + i] * st[i]));
        if (st[i] > 1)
            tt_strbuf_printf(sb, " && %s %% %lld == 0", p, (long long)st[i]);
    }
    char ci[64];
    if (G == 1)
        snprintf(ci, sizeof(ci), "%s", rc);
    else
        snprintf(ci, sizeof(ci), "i1/%lld*%lld+%s", (long long)COg, (long long)CIg, rc);
    /* x read through rd_at: it may be stored channels last */
    char taps[TT__MAX_WINDOW][128];
    const char *xi[TT_GRAPH_MAX_RANK] = {"i0", ci};
    for (int i = 0; i < nk; i++) {
        snprintf(taps[i], sizeof(taps[i]), "(%s + %lld - %s*%lld) / %lld", IV[2 + i],
                 (long long)pb[i], rs[i], (long long)dl[i], (long long)st[i]);
        xi[2 + i] = taps[i];
    }
    tt_strbuf_append(sb, ", ");
    if ((s = rd_at(w, sb, x, xi)))
        return s;
    tt_strbuf_printf(sb, " * %s[%s,%s", wn, ci, G == 1 ? "i1" : "i1%");
    if (G != 1)
        tt_strbuf_printf(sb, "%lld", (long long)COg);
    for (int i = 0; i < nk; i++)
        tt_strbuf_printf(sb, ",%s", rs[i]);
    tt_strbuf_append(sb, "], 0)");
    return b >= 0 ? bias_stage(w, acc, b, out, o) : TT_OK;
}

static tt_status pool(tw *w, const char *out, const tt_gtensor *o, bool max)
{
    int x = input(w, 0);
    const tt_gtensor *X = T(w, x);
    if (max && cur(w)->noutputs > 1 && cur(w)->outputs[1] >= 0)
        return UNSUP(w, "MaxPool's Indices output is not supported");
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "%s of %s values", tt_gop_name(cur(w)->op), tt_dtype_name(o->dtype));
    tt__window win;
    tt_status s = tt__graph_window(w->g, w->node, &win, w->err);
    if (s)
        return s;
    double fill = max ? -(o->dtype == TT_DT_FLOAT32 ? FLT_MAX : DBL_MAX) : 0;
    const char *const *lv = LV(w, o->rank);
    char src[NAME_LEN], acc[NAME_LEN], rs[TT__MAX_WINDOW][NAME_LEN];
    bool padded;
    if ((s = pad_stage(w, x, &win, fill, src, &padded)))
        return s;
    if (max)
        snprintf(acc, sizeof(acc), "%s", out);
    else
        tmp(w, acc);
    for (int i = 0; i < win.nk; i++)
        red(w, win.kernel[i], rs[i]);
    char taps[TT__MAX_WINDOW][TAP_LEN];
    const char *xi[TT_GRAPH_MAX_RANK] = {lv[0], lv[1]};
    window_taps(&win, padded, lv, (const char(*)[NAME_LEN])rs, taps, xi);
    lhs(w, acc, o->dtype, o->rank, o->dims, max ? "max=" : "+=");
    if ((s = rd_src(w, x, src, padded, xi)) || max)
        return s;
    /* The divisor: the taps of the window inside the input (count_include_pad = 0) or inside
     * the padded input (1, where ceil mode may leave taps beyond it); a constant when no
     * window is clipped. */
    bool include = attr_int(w, "count_include_pad", 0) != 0;
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    indexed(w, w->sb, acc, o->rank, lv);
    tt_strbuf_append(w->sb, " / ");
    int64_t full = 1;
    bool clipped = false;
    for (int i = 0; i < win.nk; i++) {
        full *= win.kernel[i];
        int64_t lo = include ? -win.pad_begin[i] : 0;
        int64_t hi = include ? X->dims[2 + i] + win.pad_end[i] : X->dims[2 + i];
        int64_t first = -win.pad_begin[i];
        int64_t last = (win.out[i] - 1) * win.stride[i] - win.pad_begin[i] +
                       (win.kernel[i] - 1) * win.dilation[i] + 1;
        clipped |= first < lo || last > hi;
    }
    if (!clipped) {
        lit(w->sb, (double)full, o->dtype);
        return TT_OK;
    }
    tt_strbuf_printf(w->sb, "%s(", tt_dtype_name(o->dtype));
    for (int i = 0; i < win.nk; i++) {
        int64_t lo = include ? -win.pad_begin[i] : 0;
        int64_t hi = include ? X->dims[2 + i] + win.pad_end[i] : X->dims[2 + i];
        char start[64];
        snprintf(start, sizeof(start), "%s*%lld - %lld", lv[2 + i], (long long)win.stride[i],
                 (long long)win.pad_begin[i]);
        long long K = win.kernel[i], d = win.dilation[i];
        if (d == 1) {
            tt_strbuf_printf(w->sb, "%s(min(%s + %lld, %lld) - max(%s, %lld))", i ? " * " : "",
                             start, K, (long long)hi, start, (long long)lo);
            continue;
        }
        /* taps k < K with lo <= start + k*d < hi: from ceil((lo - start) / d), clamped to 0,
         * to below ceil((hi - start) / d), clamped to K (floor division: (a + d - 1) / d) */
        tt_strbuf_printf(w->sb,
                         "%smax(min((%lld - (%s) + %lld) / %lld, %lld) - "
                         "max((%lld - (%s) + %lld) / %lld, 0), 0)",
                         i ? " * " : "", (long long)hi, start, d - 1, d, K, (long long)lo, start,
                         d - 1, d);
    }
    tt_strbuf_append(w->sb, ")");
    return TT_OK;
}

/* ---- reductions: ReduceMean, GlobalAveragePool, Softmax, LayerNormalization ---- */

/* `acc[kept dims of x] op= x-read with reduced dims replaced by fresh variables`.  reduced[d]
 * marks x's reduced dims; kept vars are IV in order; kdims gets the kept dims. */
/* idx[d] for a read of a rank-R tensor in a reduction: a fresh reduction variable (its name in
 * rv[d]) for each reduced dim, the next kept variable otherwise. */
static void reduce_index(tw *w, int R, const int64_t *dims, const bool *reduced,
                         char rv[][NAME_LEN], const char **idx)
{
    for (int d = 0, k = 0; d < R; d++) {
        if (reduced[d]) {
            red(w, dims[d], rv[d]);
            idx[d] = rv[d];
        } else
            idx[d] = IV[k++];
    }
}

/* `acc[kept dims of x] op= x[...]` over x's reduced dims; kdims gets the kept dims. */
static tt_status reduce_stage(tw *w, const char *acc, const char *op, int x, const bool *reduced,
                              int *krank, int64_t *kdims)
{
    const tt_gtensor *X = T(w, x);
    char rv[TT_GRAPH_MAX_RANK][NAME_LEN];
    const char *idx[TT_GRAPH_MAX_RANK];
    int k = 0;
    for (int d = 0; d < X->rank; d++)
        if (!reduced[d])
            kdims[k++] = X->dims[d];
    *krank = k;
    reduce_index(w, X->rank, X->dims, reduced, rv, idx);
    lhs(w, acc, X->dtype, k, kdims, op);
    return rd_at(w, w->sb, x, idx);
}

/* Appends acc[kept vars of a full-rank index] (reduced dims dropped). */
static void kept_read(tt_strbuf *sb, const char *acc, int rank, const bool *reduced)
{
    tt_strbuf_printf(sb, "%s[", acc);
    int k = 0;
    for (int d = 0; d < rank; d++)
        if (!reduced[d])
            tt_strbuf_printf(sb, "%s%s", k++ ? "," : "", IV[d]);
    if (!k)
        tt_strbuf_append(sb, "0");
    tt_strbuf_append(sb, "]");
}

/* out = post(acc[kept vars]) / divisor: a reduction's result, which keeps the reduced dims as 1
 * (keepdims) or drops them.  `post` is a function name or "" (then no parentheses); a divisor
 * of 1 writes none; `plus` (or NULL) is added after, read at the same index. */
static void reduce_out(tw *w, const char *out, const tt_gtensor *o, const tt_gtensor *X,
                       const char *acc, const bool *reduced, const char *post, double divisor,
                       const char *plus)
{
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    bool keep = o->rank == X->rank;
    for (int pass = 0; pass < (plus ? 2 : 1); pass++) {
        const char *name = pass ? plus : acc;
        if (pass)
            tt_strbuf_append(w->sb, " + ");
        else if (post[0])
            tt_strbuf_printf(w->sb, "%s(", post);
        tt_strbuf_printf(w->sb, "%s[", name);
        int k = 0;
        for (int d = 0, od = 0; d < X->rank; d++) {
            if (!reduced[d])
                tt_strbuf_printf(w->sb, "%s%s", k++ ? "," : "", lv[keep ? d : od]);
            if (keep || !reduced[d])
                od++;
        }
        if (!k)
            tt_strbuf_append(w->sb, "0");
        tt_strbuf_append(w->sb, "]");
        if (!pass && post[0])
            tt_strbuf_append(w->sb, ")");
        if (!pass && divisor != 1) {
            tt_strbuf_append(w->sb, " / ");
            lit(w->sb, divisor, o->dtype);
        }
    }
}

/* The mean of input 0 over its `reduced` dims into out. */
static tt_status mean(tw *w, const char *out, const tt_gtensor *o, const bool *reduced)
{
    int x = input(w, 0);
    const tt_gtensor *X = T(w, x);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "%s of %s values", tt_gop_name(cur(w)->op), tt_dtype_name(o->dtype));
    int64_t count = 1;
    for (int d = 0; d < X->rank; d++)
        if (reduced[d])
            count *= X->dims[d];
    char acc[NAME_LEN];
    int64_t kd[TT_GRAPH_MAX_RANK];
    int kr;
    tmp(w, acc);
    tt_status s = reduce_stage(w, acc, "+=", x, reduced, &kr, kd);
    if (!s)
        reduce_out(w, out, o, X, acc, reduced, "", (double)count, NULL);
    return s;
}

/* ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare,
 * ReduceLogSum, ReduceLogSumExp: an accumulation of each element (itself, abs, square, exp
 * less the max), then a function of it. */
static tt_status w_reduce(tw *w, const char *out, const tt_gtensor *o)
{
    tt_gop op = cur(w)->op;
    int x = input(w, 0);
    const tt_gtensor *X = T(w, x);
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    if (!tt__graph_reduce_axes(w->g, w->node, reduced))
        return BAD(w, "its axes are not valid");
    bool any = false;
    for (int d = 0; d < X->rank; d++)
        any |= reduced[d];
    if (!any) { /* noop_with_empty_axes: the input as it is */
        lhs(w, out, o->dtype, o->rank, o->dims, "=");
        return rd(w, w->sb, x, o->rank, LV(w, o->rank));
    }
    if (op == TT_GOP_REDUCE_MEAN)
        return mean(w, out, o, reduced);
    bool integral = op == TT_GOP_REDUCE_MAX || op == TT_GOP_REDUCE_MIN ||
                    op == TT_GOP_REDUCE_PROD || op == TT_GOP_REDUCE_SUM; /* exact on integers */
    if (!tt_dtype_is_float(o->dtype) && !integral)
        return UNSUP(w, "%s of %s values", tt_gop_name(op), tt_dtype_name(o->dtype));
    char acc[NAME_LEN], mx[NAME_LEN] = "";
    int64_t kd[TT_GRAPH_MAX_RANK];
    int kr = 0;
    tt_status s;
    if (op == TT_GOP_REDUCE_LOG_SUM_EXP) { /* log(sum(exp(x - max))) + max, which cannot overflow */
        tmp(w, mx);
        if ((s = reduce_stage(w, mx, "max=", x, reduced, &kr, kd)))
            return s;
    }
    tmp(w, acc);
    char rv[TT_GRAPH_MAX_RANK][NAME_LEN];
    const char *idx[TT_GRAPH_MAX_RANK];
    kr = 0;
    for (int d = 0; d < X->rank; d++)
        if (!reduced[d])
            kd[kr++] = X->dims[d];
    reduce_index(w, X->rank, X->dims, reduced, rv, idx);
    lhs(w, acc, X->dtype, kr, kd,
        op == TT_GOP_REDUCE_MAX    ? "max="
        : op == TT_GOP_REDUCE_MIN  ? "min="
        : op == TT_GOP_REDUCE_PROD ? "*="
                                   : "+=");
    tt_strbuf r = {0};
    s = rd_at(w, &r, x, idx);
    const char *v = tt_strbuf_cstr(&r);
    switch (op) {
    case TT_GOP_REDUCE_L1: tt_strbuf_printf(w->sb, "abs(%s)", v); break;
    case TT_GOP_REDUCE_L2:
    case TT_GOP_REDUCE_SUM_SQUARE: tt_strbuf_printf(w->sb, "%s * %s", v, v); break;
    case TT_GOP_REDUCE_LOG_SUM_EXP:
        tt_strbuf_printf(w->sb, "exp(%s - %s[", v, mx);
        for (int k = 0; k < kr; k++)
            tt_strbuf_printf(w->sb, "%s%s", k ? "," : "", IV[k]);
        tt_strbuf_append(w->sb, kr ? "])" : "0])");
        break;
    default: tt_strbuf_append(w->sb, v); break;
    }
    tt_strbuf_free(&r);
    if (s)
        return s;
    const char *post = op == TT_GOP_REDUCE_L2                                           ? "sqrt"
                       : op == TT_GOP_REDUCE_LOG_SUM || op == TT_GOP_REDUCE_LOG_SUM_EXP ? "log"
                                                                                        : "";
    reduce_out(w, out, o, X, acc, reduced, post, 1, mx[0] ? mx : NULL);
    return TT_OK;
}

static tt_status w_global_pool(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gtensor *X = T(w, input(w, 0));
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    for (int d = 2; d < X->rank; d++)
        reduced[d] = true;
    return mean(w, out, o, reduced);
}

static tt_status w_softmax(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0);
    const tt_gtensor *X = T(w, x);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "Softmax of %s values", tt_dtype_name(o->dtype));
    int R = X->rank, axis = axis_norm(attr_int(w, "axis", w->g->opset >= 13 ? -1 : 1), R);
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    for (int d = 0; d < R; d++) /* before opset 13: the trailing dims from axis, flattened */
        reduced[d] = w->g->opset >= 13 ? d == axis : d >= axis;
    char mx[NAME_LEN], e[NAME_LEN], sum[NAME_LEN];
    int64_t kd[TT_GRAPH_MAX_RANK];
    int kr;
    tt_status s;
    tmp(w, mx);
    if ((s = reduce_stage(w, mx, "max=", x, reduced, &kr, kd)))
        return s;
    tmp(w, e);
    lhs(w, e, o->dtype, R, X->dims, "=");
    tt_strbuf_append(w->sb, "exp(");
    if ((s = rd(w, w->sb, x, R, IV)))
        return s;
    tt_strbuf_append(w->sb, " - ");
    kept_read(w->sb, mx, R, reduced);
    tt_strbuf_append(w->sb, ")");
    tmp(w, sum);
    char rv[TT_GRAPH_MAX_RANK][NAME_LEN];
    const char *idx[TT_GRAPH_MAX_RANK];
    reduce_index(w, R, X->dims, reduced, rv, idx);
    lhs(w, sum, o->dtype, kr, kd, "+=");
    indexed(w, w->sb, e, R, idx);
    lhs(w, out, o->dtype, R, o->dims, "=");
    indexed(w, w->sb, e, R, IV);
    tt_strbuf_append(w->sb, " / ");
    kept_read(w->sb, sum, R, reduced);
    return TT_OK;
}

/* ArgMax, ArgMin: the extreme value along the axis, then the least index that holds it (the
 * greatest with select_last_index). */
static tt_status w_arg(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0);
    const tt_gtensor *X = T(w, x);
    bool max = cur(w)->op == TT_GOP_ARG_MAX, last = attr_int(w, "select_last_index", 0) != 0;
    int axis = axis_norm(attr_int(w, "axis", 0), X->rank);
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    reduced[axis] = true;
    char m[NAME_LEN], acc[NAME_LEN], rv[TT_GRAPH_MAX_RANK][NAME_LEN];
    const char *idx[TT_GRAPH_MAX_RANK];
    int64_t kd[TT_GRAPH_MAX_RANK];
    int kr;
    tmp(w, m);
    tt_status s = reduce_stage(w, m, max ? "max=" : "min=", x, reduced, &kr, kd);
    if (s)
        return s;
    tmp(w, acc);
    reduce_index(w, X->rank, X->dims, reduced, rv, idx);
    lhs(w, acc, TT_DT_INT64, kr, kd, last ? "max=" : "min=");
    tt_strbuf_append(w->sb, "select(");
    if ((s = rd_at(w, w->sb, x, idx)))
        return s;
    tt_strbuf_printf(w->sb, " == %s[", m);
    for (int k = 0; k < kr; k++)
        tt_strbuf_printf(w->sb, "%s%s", k ? "," : "", IV[k]);
    tt_strbuf_printf(w->sb, "%s], %s, %lld)", kr ? "" : "0", rv[axis],
                     last ? -1LL : (long long)X->dims[axis]);
    reduce_out(w, out, o, X, acc, reduced, "", 1, NULL);
    return TT_OK;
}

/* (x - mean) / sqrt(variance + eps) * scale + bias over x's `reduced` dims (D elements); scale
 * and bias broadcast numpy-style (channel < 0) or are per channel (indexed by dim `channel`).
 * s1 and s2 get the sums of x and of the squared deviations. */
static tt_status normalize(tw *w, const char *out, const tt_gtensor *o, const bool *reduced,
                           int64_t D, double eps, int channel, char s1[NAME_LEN], char s2[NAME_LEN])
{
    int x = input(w, 0), sc = input(w, 1), bi = input(w, 2);
    const tt_gtensor *X = T(w, x);
    int R = X->rank;
    char dv[NAME_LEN];
    int64_t kd[TT_GRAPH_MAX_RANK];
    int kr;
    tmp(w, s1);
    tt_status s = reduce_stage(w, s1, "+=", x, reduced, &kr, kd);
    if (s)
        return s;
    tmp(w, dv); /* x - mean */
    lhs(w, dv, o->dtype, R, X->dims, "=");
    if ((s = rd(w, w->sb, x, R, IV)))
        return s;
    tt_strbuf_append(w->sb, " - ");
    kept_read(w->sb, s1, R, reduced);
    tt_strbuf_append(w->sb, " / ");
    lit(w->sb, (double)D, o->dtype);
    tmp(w, s2);
    char rv[TT_GRAPH_MAX_RANK][NAME_LEN];
    const char *idx[TT_GRAPH_MAX_RANK];
    reduce_index(w, R, X->dims, reduced, rv, idx);
    lhs(w, s2, o->dtype, kr, kd, "+=");
    indexed(w, w->sb, dv, R, idx);
    tt_strbuf_append(w->sb, " * ");
    indexed(w, w->sb, dv, R, idx);
    lhs(w, out, o->dtype, R, o->dims, "=");
    indexed(w, w->sb, dv, R, IV);
    tt_strbuf_append(w->sb, " / sqrt(");
    kept_read(w->sb, s2, R, reduced);
    tt_strbuf_append(w->sb, " / ");
    lit(w->sb, (double)D, o->dtype);
    tt_strbuf_append(w->sb, " + ");
    lit(w->sb, eps, o->dtype);
    tt_strbuf_append(w->sb, ") * ");
    const char *ch[1] = {channel >= 0 ? IV[channel] : NULL};
    if ((s = channel >= 0 ? rd_at(w, w->sb, sc, ch) : rd(w, w->sb, sc, R, IV)))
        return s;
    if (bi >= 0) {
        tt_strbuf_append(w->sb, " + ");
        if ((s = channel >= 0 ? rd_at(w, w->sb, bi, ch) : rd(w, w->sb, bi, R, IV)))
            return s;
    }
    return TT_OK;
}

/* InstanceNormalization: each channel of each batch element over its spatial dims, the scale
 * and bias per channel. */
static tt_status w_instance_norm(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gtensor *X = T(w, input(w, 0));
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "InstanceNormalization of %s values", tt_dtype_name(o->dtype));
    if (X->rank < 3)
        return BAD(w, "takes an input of rank 3 or more (N, C, D1, ...), not %d", X->rank);
    for (int i = 1; i < 3; i++) {
        const tt_gtensor *t = input(w, i) >= 0 ? T(w, input(w, i)) : NULL;
        if (!t || t->rank != 1 || t->dims[0] != X->dims[1])
            return BAD(w, "input %d must have the %lld channels' values", i, (long long)X->dims[1]);
    }
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    int64_t D = 1;
    for (int d = 2; d < X->rank; d++)
        reduced[d] = true, D *= X->dims[d];
    char s1[NAME_LEN], s2[NAME_LEN];
    return normalize(w, out, o, reduced, D, attr_float(w, "epsilon", 1e-5), 1, s1, s2);
}

/* GroupNormalization: the channels in num_groups groups of C / G, each group of each batch
 * element normalized over its channels and spatial dims; the scale and bias per group at opset
 * 18, per channel from opset 21.  The group statistics are [N, G] stages that read channel
 * i1 * C/G + r, and the output reads them at group i1 / (C/G). */
static tt_status w_group_norm(tw *w, const char *out, const tt_gtensor *o)
{
    int x = input(w, 0), sc = input(w, 1), bi = input(w, 2);
    const tt_gtensor *X = T(w, x);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "GroupNormalization of %s values", tt_dtype_name(o->dtype));
    int R = X->rank;
    if (R < 3)
        return BAD(w, "takes an input of rank 3 or more (N, C, D1, ...), not %d", R);
    int64_t G = attr_int(w, "num_groups", 0), C = X->dims[1];
    if (G < 1 || C % G)
        return BAD(w, "num_groups %lld does not divide the %lld channels", (long long)G,
                   (long long)C);
    bool per_channel = w->g->opset >= 21;
    for (int i = 1; i < 3; i++) {
        const tt_gtensor *t = input(w, i) >= 0 ? T(w, input(w, i)) : NULL;
        if (!t || t->rank != 1 || t->dims[0] != (per_channel ? C : G))
            return BAD(w, "input %d must have the %lld %s' values (opset %lld)", i,
                       (long long)(per_channel ? C : G), per_channel ? "channels" : "groups",
                       (long long)w->g->opset);
    }
    int64_t Cg = C / G, D = Cg, kd[2] = {X->dims[0], G};
    for (int d = 2; d < R; d++)
        D *= X->dims[d];
    char s1[NAME_LEN], s2[NAME_LEN], dv[NAME_LEN], group[32];
    snprintf(group, sizeof(group), "i1 / %lld", (long long)Cg);
    /* s1[n, g] += x[n, g * Cg + r, ...]; then s2 the same of (x - mean)^2 */
    tt_status s = TT_OK;
    for (int pass = 0; pass < 2 && !s; pass++) {
        char rv[TT_GRAPH_MAX_RANK][NAME_LEN], chan[64];
        const char *idx[TT_GRAPH_MAX_RANK];
        red(w, Cg, rv[1]);
        for (int d = 2; d < R; d++)
            red(w, X->dims[d], rv[d]), idx[d] = rv[d];
        snprintf(chan, sizeof(chan), "i1 * %lld + %s", (long long)Cg, rv[1]);
        idx[0] = IV[0], idx[1] = chan;
        tmp(w, pass ? s2 : s1);
        lhs(w, pass ? s2 : s1, o->dtype, 2, kd, "+=");
        if (!pass) {
            s = rd_at(w, w->sb, x, idx);
            tmp(w, dv); /* x - mean */
            lhs(w, dv, o->dtype, R, X->dims, "=");
            if (!s)
                s = rd(w, w->sb, x, R, IV);
            tt_strbuf_printf(w->sb, " - %s[i0, %s] / ", s1, group);
            lit(w->sb, (double)D, o->dtype);
        } else {
            indexed(w, w->sb, dv, R, idx);
            tt_strbuf_append(w->sb, " * ");
            indexed(w, w->sb, dv, R, idx);
        }
    }
    if (s)
        return s;
    lhs(w, out, o->dtype, R, o->dims, "=");
    indexed(w, w->sb, dv, R, IV);
    tt_strbuf_printf(w->sb, " / sqrt(%s[i0, %s] / ", s2, group);
    lit(w->sb, (double)D, o->dtype);
    tt_strbuf_append(w->sb, " + ");
    lit(w->sb, attr_float(w, "epsilon", 1e-5), o->dtype);
    tt_strbuf_append(w->sb, ") * ");
    const char *gi[1] = {per_channel ? "i1" : group};
    if ((s = rd_at(w, w->sb, sc, gi)))
        return s;
    tt_strbuf_append(w->sb, " + ");
    return rd_at(w, w->sb, bi, gi);
}

static tt_status w_layer_norm(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gtensor *X = T(w, input(w, 0));
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "LayerNormalization of %s values", tt_dtype_name(o->dtype));
    int R = X->rank, axis = axis_norm(attr_int(w, "axis", -1), R);
    double eps = attr_float(w, "epsilon", 1e-5);
    bool reduced[TT_GRAPH_MAX_RANK] = {false};
    int64_t D = 1;
    for (int d = axis; d < R; d++)
        reduced[d] = true, D *= X->dims[d];
    char s1[NAME_LEN], s2[NAME_LEN];
    tt_status s = normalize(w, out, o, reduced, D, eps, -1, s1, s2);
    if (s)
        return s;
    /* Mean and InvStdDev, when the graph uses them: more outputs of the same kernel */
    for (int k = 1; k < 3 && k < cur(w)->noutputs; k++) {
        int t = cur(w)->outputs[k];
        if (t < 0)
            continue;
        char name[NAME_LEN];
        if ((s = extra_output(w, t, name)))
            return s;
        const tt_gtensor *y = T(w, t);
        lhs(w, name, y->dtype, y->rank, y->dims, "=");
        if (k == 2)
            tt_strbuf_append(w->sb, "1.0 / sqrt(");
        kept_read(w->sb, k == 1 ? s1 : s2, R, reduced);
        tt_strbuf_append(w->sb, " / ");
        lit(w->sb, (double)D, y->dtype);
        if (k == 2) {
            tt_strbuf_append(w->sb, " + ");
            lit(w->sb, eps, y->dtype);
            tt_strbuf_append(w->sb, ")");
        }
    }
    return TT_OK;
}

/* ---- matrix products ---- */

static tt_status w_gemm(tw *w, const char *out, const tt_gtensor *o)
{
    int a = input(w, 0), b = input(w, 1), c = input(w, 2);
    bool ta = attr_int(w, "transA", 0), tb = attr_int(w, "transB", 0);
    double alpha = attr_float(w, "alpha", 1), beta = attr_float(w, "beta", 1);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "Gemm of %s values", tt_dtype_name(o->dtype));
    const tt_gtensor *A = T(w, a);
    char an[NAME_LEN], bn[NAME_LEN], acc[NAME_LEN], r[NAME_LEN];
    tt_status s;
    if ((s = tname(w, a, an)) || (s = tname(w, b, bn)))
        return s;
    bool epilogue = c >= 0 || alpha != 1;
    if (epilogue)
        tmp(w, acc);
    else
        snprintf(acc, sizeof(acc), "%s", out);
    red(w, A->dims[ta ? 0 : 1], r);
    lhs(w, acc, o->dtype, 2, o->dims, "+=");
    if (ta)
        tt_strbuf_printf(w->sb, "%s[%s,i0] * ", an, r);
    else
        tt_strbuf_printf(w->sb, "%s[i0,%s] * ", an, r);
    if (tb)
        tt_strbuf_printf(w->sb, "%s[i1,%s]", bn, r);
    else
        tt_strbuf_printf(w->sb, "%s[%s,i1]", bn, r);
    if (!epilogue)
        return TT_OK;
    lhs(w, out, o->dtype, 2, o->dims, "=");
    if (alpha != 1) {
        lit(w->sb, alpha, o->dtype);
        tt_strbuf_append(w->sb, " * ");
    }
    tt_strbuf_printf(w->sb, "%s[i0,i1]", acc);
    if (c >= 0 && beta != 0) {
        tt_strbuf_append(w->sb, " + ");
        if (beta != 1) {
            lit(w->sb, beta, o->dtype);
            tt_strbuf_append(w->sb, " * ");
        }
        s = rd(w, w->sb, c, 2, IV);
    }
    return s;
}

/* MatMul, numpy-style.  Unit dimensions of the result but the last (a sequence-first [197, 1,
 * 2304] projection) are left out of the accumulation, so its rows are the register tile's row
 * axis (the tiling space tiles the two innermost); a stage of its own then adds them back. */
static tt_status w_matmul(tw *w, const char *out, const tt_gtensor *o)
{
    int a = input(w, 0), b = input(w, 1);
    const tt_gtensor *A = T(w, a), *B = T(w, b);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "MatMul of %s values", tt_dtype_name(o->dtype));
    int R = o->rank, BR = R - (A->rank > 1) - (B->rank > 1), nk = 0;
    const char *ov[TT_GRAPH_MAX_RANK]; /* each output dim's variable in the accumulation */
    int64_t kd[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < R; d++) {
        bool unit = R >= 3 && d < R - 1 && o->dims[d] == 1;
        ov[d] = unit ? "0" : IV[nk];
        if (!unit)
            kd[nk++] = o->dims[d];
    }
    char r[NAME_LEN], acc[NAME_LEN];
    red(w, A->dims[A->rank - 1], r);
    /* index lists of A and B over the output's variables */
    const char *ia[TT_GRAPH_MAX_RANK], *ib[TT_GRAPH_MAX_RANK];
    int na = 0, nb = 0;
    for (int d = 0; d < A->rank - 2; d++)
        ia[na++] = ov[BR - (A->rank - 2) + d];
    for (int d = 0; d < B->rank - 2; d++)
        ib[nb++] = ov[BR - (B->rank - 2) + d];
    if (A->rank > 1)
        ia[na++] = ov[BR];
    ia[na++] = r;
    ib[nb++] = r;
    if (B->rank > 1)
        ib[nb++] = ov[R - 1];
    if (nk < R)
        tmp(w, acc);
    else
        snprintf(acc, sizeof(acc), "%s", out);
    lhs(w, acc, o->dtype, nk, kd, "+=");
    tt_status s = rd_at(w, w->sb, a, ia);
    tt_strbuf_append(w->sb, " * ");
    if (!s)
        s = rd_at(w, w->sb, b, ib);
    if (s || nk == R)
        return s;
    lhs(w, out, o->dtype, R, o->dims, "=");
    tt_strbuf_printf(w->sb, "%s[", acc);
    for (int d = 0, k = 0; d < R; d++)
        if (strcmp(ov[d], "0"))
            tt_strbuf_printf(w->sb, "%s%s", k++ ? "," : "", IV[d]);
    tt_strbuf_append(w->sb, "]");
    return TT_OK;
}

/* Einsum: the product of the operands, each read at its labels' variables (the output's, or a
 * reduction variable for a summed label), accumulated over the summed labels: a matrix product
 * "bij,bjk->bik" is MatMul's program, "ij->i" a row sum, "ii->i" a diagonal. */
static tt_status w_einsum(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gnode *n = cur(w);
    if (!tt_dtype_is_float(o->dtype))
        return UNSUP(w, "Einsum of %s values", tt_dtype_name(o->dtype));
    const tt_gtensor *xs[TT__EINSUM_MAX_INPUTS];
    int ranks[TT__EINSUM_MAX_INPUTS];
    for (int k = 0; k < n->ninputs; k++)
        xs[k] = T(w, input(w, k)), ranks[k] = xs[k]->rank;
    tt__einsum e;
    char why[160];
    const char *eq = attr_str(w, "equation", "");
    if (!tt__einsum_parse(eq, n->ninputs, ranks, &e, why, sizeof(why)))
        return BAD(w, "equation '%s': %s", eq, why);
    char rv[TT__EINSUM_MAX_SUMMED][NAME_LEN];
    for (int k = 0; k < e.nsum; k++) {
        int64_t x;
        if (!tt__einsum_extent(&e, xs, e.sum[k], &x, why, sizeof(why)))
            return BAD(w, "equation '%s': %s", eq, why);
        red(w, x, rv[k]);
    }
    lhs(w, out, o->dtype, o->rank, o->dims, e.nsum ? "+=" : "=");
    for (int k = 0; k < n->ninputs; k++) {
        const char *idx[TT_GRAPH_MAX_RANK];
        for (int d = 0; d < e.in_rank[k]; d++) {
            const char *l = memchr(e.out, e.in[k][d], (size_t)e.out_rank);
            if (l)
                idx[d] = IV[l - e.out];
            else
                idx[d] = rv[(const char *)memchr(e.sum, e.in[k][d], (size_t)e.nsum) - e.sum];
        }
        if (k)
            tt_strbuf_append(w->sb, " * ");
        tt_status s = rd_at(w, w->sb, input(w, k), idx);
        if (s)
            return s;
    }
    return TT_OK;
}

/* ---- data movement ---- */

static tt_status w_transpose(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int x = input(w, 0);
    size_t np;
    const int64_t *perm = attr_ints(w, "perm", &np);
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int j = 0; j < o->rank; j++)
        idx[perm ? perm[j] : o->rank - 1 - j] = lv[j];
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    return rd_at(w, w->sb, x, idx);
}

static tt_status w_concat(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int axis = axis_norm(attr_int(w, "axis", 0), o->rank), n = cur(w)->ninputs;
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    int64_t off = 0;
    tt_status s = TT_OK;
    for (int k = 0; k < n && !s; k++) {
        const tt_gtensor *X = T(w, input(w, k));
        char shifted[32];
        const char *idx[TT_GRAPH_MAX_RANK];
        memcpy(idx, lv, sizeof(idx));
        snprintf(shifted, sizeof(shifted), "%s-%lld", lv[axis], (long long)off);
        if (off)
            idx[axis] = shifted;
        if (k < n - 1)
            tt_strbuf_printf(w->sb, "select(%s < %lld, ", lv[axis],
                             (long long)(off + X->dims[axis]));
        s = rd_at(w, w->sb, input(w, k), idx);
        if (k < n - 1)
            tt_strbuf_append(w->sb, ", ");
        off += X->dims[axis];
    }
    for (int k = 0; k < n - 1; k++)
        tt_strbuf_append(w->sb, ")");
    return s;
}

/* Split's output `which`: a slice of the input along the axis. */
static tt_status w_split(tw *w, const char *out, const tt_gtensor *o)
{
    int which = w->which;
    const char *const *lv = LV(w, o->rank);
    const tt_gtensor *X = T(w, input(w, 0));
    int axis = axis_norm(attr_int(w, "axis", 0), X->rank);
    int64_t off = 0;
    for (int k = 0; k < which; k++)
        if (cur(w)->outputs[k] >= 0)
            off += T(w, cur(w)->outputs[k])->dims[axis];
        else
            return UNSUP(w, "Split with an unnamed output before a used one");
    char shifted[32];
    const char *idx[TT_GRAPH_MAX_RANK];
    memcpy(idx, lv, sizeof(idx));
    snprintf(shifted, sizeof(shifted), "%s+%lld", lv[axis], (long long)off);
    if (off)
        idx[axis] = shifted;
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    return rd_at(w, w->sb, input(w, 0), idx);
}

static tt_status w_slice(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int64_t first[TT_GRAPH_MAX_RANK], step[TT_GRAPH_MAX_RANK];
    tt_status s = tt__graph_slice(w->g, w->node, first, step, w->err);
    if (s)
        return s;
    char buf[TT_GRAPH_MAX_RANK][48];
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < o->rank; d++) {
        if (step[d] == 1 && first[d] == 0)
            snprintf(buf[d], sizeof(buf[d]), "%s", lv[d]);
        else if (step[d] == 1)
            snprintf(buf[d], sizeof(buf[d]), "%s+%lld", lv[d], (long long)first[d]);
        else
            snprintf(buf[d], sizeof(buf[d]), "%lld+%s*%lld", (long long)first[d], lv[d],
                     (long long)step[d]);
        idx[d] = buf[d];
    }
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    return rd_at(w, w->sb, input(w, 0), idx);
}

static tt_status w_gather(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int x = input(w, 0), ind = input(w, 1);
    const tt_gtensor *X = T(w, x), *I = T(w, ind);
    int axis = axis_norm(attr_int(w, "axis", 0), X->rank), q = I->rank;
    /* the index value: a literal, or a read wrapped for negative indices */
    tt_strbuf iv = {0};
    bool nonneg = I->kind == TT_GT_CONST;
    for (int64_t i = 0; nonneg && i < tt_gtensor_numel(I); i++)
        nonneg = tt__gtensor_value(I, i) >= 0;
    tt_status s;
    if (is_scalar_const(I)) {
        double v = tt__gtensor_value(I, 0);
        lit(&iv, v < 0 ? v + (double)X->dims[axis] : v, TT_DT_INT64);
        s = TT_OK;
    } else {
        tt_strbuf r = {0};
        s = rd_at(w, &r, ind, lv + axis);
        if (nonneg)
            tt_strbuf_append(&iv, tt_strbuf_cstr(&r));
        else
            tt_strbuf_printf(&iv, "select(%s < 0, %s + %lld, %s)", tt_strbuf_cstr(&r),
                             tt_strbuf_cstr(&r), (long long)X->dims[axis], tt_strbuf_cstr(&r));
        tt_strbuf_free(&r);
    }
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < X->rank; d++)
        idx[d] = d < axis ? lv[d] : d == axis ? tt_strbuf_cstr(&iv) : lv[d - 1 + q];
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    if (!s)
        s = rd_at(w, w->sb, x, idx);
    tt_strbuf_free(&iv);
    return s;
}

/* GatherElements: out[.., i, ..] = x[.., indices[.., i, ..], ..] along the axis (negative
 * indices wrapped). */
static tt_status w_gather_elements(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int x = input(w, 0), ind = input(w, 1);
    const tt_gtensor *X = T(w, x);
    int axis = axis_norm(attr_int(w, "axis", 0), X->rank);
    tt_strbuf r = {0}, iv = {0};
    tt_status s = rd_at(w, &r, ind, lv);
    if (!s)
        tt_strbuf_printf(&iv, "select(%s < 0, %s + %lld, %s)", tt_strbuf_cstr(&r),
                         tt_strbuf_cstr(&r), (long long)X->dims[axis], tt_strbuf_cstr(&r));
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < X->rank; d++)
        idx[d] = d == axis ? tt_strbuf_cstr(&iv) : lv[d];
    if (!s) {
        lhs(w, out, o->dtype, o->rank, o->dims, "=");
        s = rd_at(w, w->sb, x, idx);
    }
    tt_strbuf_free(&r);
    tt_strbuf_free(&iv);
    return s;
}

static tt_status w_pad(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    int x = input(w, 0), value = input(w, 2);
    const tt_gtensor *X = T(w, x);
    const char *mode = attr_str(w, "mode", "constant");
    int R = X->rank;
    int64_t pb[2 * TT_GRAPH_MAX_RANK]; /* the begins; the output's shape gives the ends */
    if (!tt__graph_pad_amounts(w->g, w->node, pb))
        return UNSUP(w, "Pad's pads and axes are not constants of the right length");
    char buf[TT_GRAPH_MAX_RANK][400];
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < R; d++) {
        char j[48];
        if (pb[d])
            snprintf(j, sizeof(j), "(%s - %lld)", lv[d], (long long)pb[d]);
        else
            snprintf(j, sizeof(j), "%s", lv[d]);
        int64_t D = X->dims[d];
        if (!strcmp(mode, "edge"))
            snprintf(buf[d], sizeof(buf[d]), "min(max(%s, 0), %lld)", j, (long long)(D - 1));
        else if (!strcmp(mode, "reflect")) {
            if (D < 2 && o->dims[d] != D)
                return UNSUP(w, "reflect padding of a dimension of size 1");
            /* the clamp changes nothing: it tells bound checking the read stays inside */
            snprintf(buf[d], sizeof(buf[d]),
                     "min(max(select(%s < 0, 0 - %s, select(%s > %lld, %lld - %s, %s)), 0), %lld)",
                     j, j, j, (long long)(D - 1), (long long)(2 * (D - 1)), j, j,
                     (long long)(D - 1));
        } else if (!strcmp(mode, "wrap") && (pb[d] || o->dims[d] != D)) {
            /* opset 19: the input repeated as a torus; the index made non-negative first */
            int64_t lift = (pb[d] + D - 1) / D * D;
            snprintf(buf[d], sizeof(buf[d]), "(%s + %lld) %% %lld", j, (long long)lift,
                     (long long)D);
        } else
            snprintf(buf[d], sizeof(buf[d]), "%s", j);
        idx[d] = buf[d];
    }
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    if (strcmp(mode, "constant"))
        return rd_at(w, w->sb, x, idx);
    tt_strbuf_append(w->sb, "select(");
    int k = 0;
    for (int d = 0; d < R; d++) {
        if (!pb[d] && o->dims[d] == X->dims[d])
            continue;
        tt_strbuf_printf(w->sb, "%s%s >= 0 && %s < %lld", k++ ? " && " : "", buf[d], buf[d],
                         (long long)X->dims[d]);
    }
    if (!k)
        tt_strbuf_append(w->sb, "1 == 1");
    tt_strbuf_append(w->sb, ", ");
    tt_status s = rd_at(w, w->sb, x, idx);
    tt_strbuf_append(w->sb, ", ");
    if (!s && value >= 0)
        s = rd_at(w, w->sb, value, lv);
    else
        tt_strbuf_append(w->sb, "0");
    tt_strbuf_append(w->sb, ")");
    return s;
}

/* ---- one node, one program ---- */

static tt_status w_max_pool(tw *w, const char *out, const tt_gtensor *o)
{
    return pool(w, out, o, true);
}

static tt_status w_average_pool(tw *w, const char *out, const tt_gtensor *o)
{
    return pool(w, out, o, false);
}

/* Comparisons and logical operators: bool tensors (a byte each, 0 or 1), which kernels read and
 * write like any other (a padding mask given as an input, compared, expanded and turned into an
 * additive mask by Where). */
static tt_status w_bool_result(tw *w, const char *out, const tt_gtensor *o)
{
    static const char *const sym[TT_GOP_COUNT] = {[TT_GOP_EQUAL] = " == ",
                                                  [TT_GOP_LESS] = " < ",
                                                  [TT_GOP_GREATER] = " > ",
                                                  [TT_GOP_AND] = " && ",
                                                  [TT_GOP_OR] = " || "};
    tt_gop op = cur(w)->op;
    const char *const *lv = LV(w, o->rank);
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    tt_strbuf_append(w->sb, op == TT_GOP_NOT ? "!(" : "(");
    tt_status s = rd(w, w->sb, input(w, 0), o->rank, lv);
    if (!s && op != TT_GOP_NOT) {
        tt_strbuf_append(w->sb, sym[op]);
        s = rd(w, w->sb, input(w, 1), o->rank, lv);
    }
    tt_strbuf_append(w->sb, ")");
    return s;
}

/* Expand: the input read at the output's index, broadcast. */
static tt_status w_expand(tw *w, const char *out, const tt_gtensor *o)
{
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    return rd(w, w->sb, input(w, 0), o->rank, LV(w, o->rank));
}

/* Mod: C's remainder (fmod 1, and floats) or the divisor's sign (fmod 0, integers). */
static tt_status w_mod(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    tt_strbuf a = {0}, b = {0};
    tt_status s = rd(w, &a, input(w, 0), o->rank, lv);
    if (!s)
        s = rd(w, &b, input(w, 1), o->rank, lv);
    if (!s) {
        const char *x = tt_strbuf_cstr(&a), *y = tt_strbuf_cstr(&b);
        lhs(w, out, o->dtype, o->rank, o->dims, "=");
        if (tt_dtype_is_float(o->dtype)) /* x - y * trunc(x / y) */
            tt_strbuf_printf(w->sb,
                             "%s - %s * select(%s / %s < 0.0, ceil(%s / %s), floor(%s / %s))", x, y,
                             x, y, x, y, x, y);
        else if (attr_int(w, "fmod", 0))
            tt_strbuf_printf(w->sb, "%s %% %s", x, y);
        else
            tt_strbuf_printf(w->sb,
                             "select(%s %% %s != 0 && (%s %% %s < 0) != (%s < 0), %s %% %s + %s, "
                             "%s %% %s)",
                             x, y, x, y, y, x, y, y, x, y);
    }
    tt_strbuf_free(&a);
    tt_strbuf_free(&b);
    return s;
}

/* Tile: the input read at the output's index modulo its dims. */
static tt_status w_tile(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, o->rank);
    const tt_gtensor *X = T(w, input(w, 0));
    char buf[TT_GRAPH_MAX_RANK][48];
    const char *idx[TT_GRAPH_MAX_RANK];
    for (int d = 0; d < o->rank; d++) {
        if (X->dims[d] == o->dims[d])
            snprintf(buf[d], sizeof(buf[d]), "%s", lv[d]);
        else
            snprintf(buf[d], sizeof(buf[d]), "%s %% %lld", lv[d], (long long)X->dims[d]);
        idx[d] = buf[d];
    }
    lhs(w, out, o->dtype, o->rank, o->dims, "=");
    return rd_at(w, w->sb, input(w, 0), idx);
}

/* DepthToSpace: out[n, c, h, w] = x[n, channel, h / b, w / b], where the channel is
 * ((h % b) * b + w % b) * C + c (DCR) or c * b * b + (h % b) * b + w % b (CRD). */
static tt_status w_depth_to_space(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, 4);
    long long b = (long long)attr_int(w, "blocksize", 1), C = (long long)o->dims[1];
    char ch[128], h[48], wd[48];
    if (!strcmp(attr_str(w, "mode", "DCR"), "CRD"))
        snprintf(ch, sizeof(ch), "%s * %lld + %s %% %lld * %lld + %s %% %lld", lv[1], b * b, lv[2],
                 b, b, lv[3], b);
    else
        snprintf(ch, sizeof(ch), "(%s %% %lld * %lld + %s %% %lld) * %lld + %s", lv[2], b, b, lv[3],
                 b, C, lv[1]);
    snprintf(h, sizeof(h), "%s / %lld", lv[2], b);
    snprintf(wd, sizeof(wd), "%s / %lld", lv[3], b);
    const char *idx[4] = {lv[0], ch, h, wd};
    lhs(w, out, o->dtype, 4, o->dims, "=");
    return rd_at(w, w->sb, input(w, 0), idx);
}

/* SpaceToDepth: out[n, (bh * b + bw) * C + c, h, w] = x[n, c, h * b + bh, w * b + bw]. */
static tt_status w_space_to_depth(tw *w, const char *out, const tt_gtensor *o)
{
    const char *const *lv = LV(w, 4);
    long long b = (long long)attr_int(w, "blocksize", 1), C = (long long)T(w, input(w, 0))->dims[1];
    char ch[48], h[96], wd[96];
    snprintf(ch, sizeof(ch), "%s %% %lld", lv[1], C);
    snprintf(h, sizeof(h), "%s * %lld + %s / %lld / %lld", lv[2], b, lv[1], C, b);
    snprintf(wd, sizeof(wd), "%s * %lld + %s / %lld %% %lld", lv[3], b, lv[1], C, b);
    const char *idx[4] = {lv[0], ch, h, wd};
    lhs(w, out, o->dtype, 4, o->dims, "=");
    return rd_at(w, w->sb, input(w, 0), idx);
}

/* Resize: x read through the constant tables shape inference made (graph/shape.c): nearest,
 * x[.., i0[h], i0[w]]; linear, the sum over the corners of x[.., i0|i1[h], i0|i1[w]] times
 * their weights w0|w1[h] x w0|w1[w]. */
static tt_status w_resize(tw *w, const char *out, const tt_gtensor *o)
{
    const tt_gnode *n = cur(w);
    const char *const *lv = LV(w, o->rank);
    int R = o->rank, axes[TT_GRAPH_MAX_RANK], k = 0;
    bool linear = !strcmp(attr_str(w, "mode", "nearest"), "linear");
    for (int d = 0; d < R; d++)
        if (4 + 4 * d < n->ninputs && n->inputs[4 + 4 * d] >= 0)
            axes[k++] = d;
    /* the tables read at the output's index: [axis][i0, i1, w0, w1] */
    tt_strbuf tab[TT_GRAPH_MAX_RANK][4];
    memset(tab, 0, sizeof(tab));
    tt_status s = TT_OK;
    for (int a = 0; a < k && !s; a++)
        for (int j = 0; j < (linear ? 4 : 1) && !s; j++)
            s = rd_at(w, &tab[a][j], n->inputs[4 + 4 * axes[a] + j], &lv[axes[a]]);
    if (!s)
        lhs(w, out, o->dtype, R, o->dims, "=");
    for (int corner = 0; corner < (linear ? 1 << k : 1) && !s; corner++) {
        const char *idx[TT_GRAPH_MAX_RANK];
        for (int d = 0; d < R; d++)
            idx[d] = lv[d];
        for (int a = 0; a < k; a++)
            idx[axes[a]] = tt_strbuf_cstr(&tab[a][(corner >> a) & 1]);
        if (corner)
            tt_strbuf_append(w->sb, " + ");
        s = rd_at(w, w->sb, n->inputs[0], idx);
        for (int a = 0; a < k && linear && !s; a++)
            tt_strbuf_printf(w->sb, " * %s", tt_strbuf_cstr(&tab[a][2 + ((corner >> a) & 1)]));
    }
    for (int a = 0; a < k; a++)
        for (int j = 0; j < 4; j++)
            tt_strbuf_free(&tab[a][j]);
    return s;
}

/* Shape arithmetic, constants and operators that move no data: no kernel computes them. */
static tt_status w_none(tw *w, const char *out, const tt_gtensor *o)
{
    (void)out, (void)o;
    return UNSUP(w, "%s is not computed by a kernel", tt_gop_name(cur(w)->op));
}

static tt_status write_node(tw *w, int node, const char *out, int which)
{
    w->node = node;
    const tt_gnode *n = cur(w);
    const tt_gtensor *o = T(w, n->outputs[which]);
    w->orank = o->rank;
    w->permuted = o->permuted;
    memcpy(w->perm, o->perm, sizeof(w->perm));
    for (int k = 0; k < o->rank; k++)
        w->lv[o->permuted ? o->perm[k] : k] = IV[k];
    w->which = which;
    switch (n->op) {
#define TT_GOP_WRITER(e, name, pattern, layout, shape, writer, ...)                                \
    case TT_GOP_##e: return w_##writer(w, out, o);
        TT_GOP_LIST(TT_GOP_WRITER)
#undef TT_GOP_WRITER
    default: return w_none(w, out, o);
    }
}

/* ---- pixel rows: a 1x1 convolution as a matrix product ---- */

#define PIXEL_VIEW_MAX 64 /* tensors a kernel may view; a kernel with more keeps its shapes */

typedef struct {
    int64_t H, W;
    int64_t N; /* > 0: the batch's rows, each [N, C, 1, 1] tensor viewed as [1, C, 1, N] */
    int n;
    int tensor[PIXEL_VIEW_MAX]; /* the [.., H, W] tensors to view as [.., 1, H*W] */
} pixel_view;

/* Adds tensor t to the view's list; false when the list is full. */
static bool view_add(pixel_view *v, int t)
{
    for (int i = 0; i < v->n; i++)
        if (v->tensor[i] == t)
            return true;
    if (v->n == PIXEL_VIEW_MAX)
        return false;
    v->tensor[v->n++] = t;
    return true;
}

/* The kernel's tensors a view must take: all but scalars, the convolution's weight and bias and
 * BatchNormalization's per-channel inputs; `takes` says whether tensor t takes view v (adding
 * it to v's list where it changes). */
static bool all_take(const tt_graph *g, const int *nodes, int n, pixel_view *v,
                     bool (*takes)(const tt_gtensor *u, int t, pixel_view *v))
{
    for (int i = 0; i < n; i++) {
        const tt_gnode *nd = &g->nodes.data[nodes[i]];
        for (int k = 0; k < nd->ninputs + nd->noutputs; k++) {
            int t = k < nd->ninputs ? nd->inputs[k] : nd->outputs[k - nd->ninputs];
            if (t < 0)
                continue;
            const tt_gtensor *u = &g->tensors.data[t];
            bool per_channel = (nd->op == TT_GOP_CONV && k == 2) ||
                               (nd->op == TT_GOP_BATCH_NORM && k >= 1 && k < nd->ninputs);
            if (tt_gtensor_numel(u) == 1 || (per_channel && u->rank == 1) || (i == 0 && k == 1))
                continue;
            if (!takes(u, t, v))
                return false;
        }
    }
    return true;
}

/* Over [.., H, W]: a 4-D tensor with H and W stored adjacent and in order, or one broadcast over
 * both (numpy aligns its last two dims with H and W). */
static bool takes_pixels(const tt_gtensor *u, int t, pixel_view *v)
{
    if (u->rank == 4 && u->dims[2] == v->H && u->dims[3] == v->W) {
        int p2 = 2, p3 = 3; /* physical positions of H and W */
        for (int q = 0; u->permuted && q < 4; q++) {
            if (u->perm[q] == 2)
                p2 = q;
            if (u->perm[q] == 3)
                p3 = q;
        }
        return p3 == p2 + 1 && view_add(v, t);
    }
    return u->rank >= 2 && u->dims[u->rank - 2] == 1 && u->dims[u->rank - 1] == 1;
}

/* Over the batch of 1x1 images: [N, C, 1, 1] stored channels last (or of one channel), N*C in
 * memory, is [1, C, 1, N] channels last; one broadcast over the batch ([1, C, 1, 1]) or of lower
 * rank ([C, 1, 1]) stays as it is. */
static bool takes_batch(const tt_gtensor *u, int t, pixel_view *v)
{
    static const uint8_t nhwc[4] = {0, 2, 3, 1};
    if (u->rank < 2 || u->rank > 4 || u->dims[u->rank - 2] != 1 || u->dims[u->rank - 1] != 1)
        return false;
    if (u->rank < 4 || u->dims[0] == 1)
        return true;
    return u->dims[0] == v->N && (u->dims[1] == 1 || (u->permuted && !memcmp(u->perm, nhwc, 4))) &&
           view_add(v, t);
}

/* A 1x1 convolution of stride 1 without padding is a matrix product over the image's pixels.
 * Written over [N, C, H, W] its register tile's rows are the W columns of one image row: 13 in
 * SqueezeNet's last layer, 7 in the last stage of ResNets and MobileNets, primes no tile of 6
 * rows covers, so they took 13 x 1 or 7 x 1 vector tiles (13 or 7 accumulators, each broadcast
 * feeding one multiply-add).  Viewed as [N, C, 1, H*W], the same memory in either layout since H
 * and W are adjacent in both, the rows are the H*W pixels and any tile fits them.
 *
 * Over 1x1 images (a squeeze-and-excitation block's, after its global pool) the rows are the
 * batch instead: [N, C, 1, 1] channels last is [1, C, 1, N] channels last, a register tile of
 * images by output-channel vectors rather than one image's dot products, in scalar code over
 * the model's width of 1.
 *
 * The view applies when nodes[0] is such a convolution and every tensor the kernel touches takes
 * it (takes_pixels, takes_batch); those it changes are listed in *v. */
static bool pixel_rows(const tt_graph *g, const int *nodes, int n, pixel_view *v)
{
    const tt_gnode *c = &g->nodes.data[nodes[0]];
    if (c->op != TT_GOP_CONV || c->ninputs < 2 || c->inputs[1] < 0)
        return false;
    const tt_gtensor *x = &g->tensors.data[c->inputs[0]], *wt = &g->tensors.data[c->inputs[1]];
    const tt_gtensor *y = &g->tensors.data[c->outputs[0]];
    if (x->rank != 4 || wt->rank != 4 || wt->dims[2] != 1 || wt->dims[3] != 1 ||
        tt__attr_int(c, "group", 1) != 1 || x->dims[2] != y->dims[2] || x->dims[3] != y->dims[3])
        return false;
    tt__window win;
    tt_errbuf ignored = {{0}};
    if (tt__graph_window(g, nodes[0], &win, &ignored))
        return false;
    for (int d = 0; d < 2; d++)
        if (win.stride[d] != 1 || win.pad_begin[d] || win.pad_end[d])
            return false;
    v->H = x->dims[2], v->W = x->dims[3], v->N = 0, v->n = 0;
    if (v->H == 1 && v->W == 1 && x->dims[0] > 1) {
        v->N = x->dims[0];
        return all_take(g, nodes, n, v, takes_batch);
    }
    return v->H >= 2 && all_take(g, nodes, n, v, takes_pixels);
}

/* Sets (view) or restores the pixel-row view of v's tensors. */
static void view_pixel_rows(tt_graph *g, const pixel_view *v, bool view)
{
    for (int i = 0; i < v->n; i++) {
        tt_gtensor *u = &g->tensors.data[v->tensor[i]];
        if (v->N) {
            u->dims[0] = view ? 1 : v->N;
            u->dims[3] = view ? v->N : 1;
            continue;
        }
        u->dims[2] = view ? 1 : v->H;
        u->dims[3] = view ? v->H * v->W : v->W;
    }
}

static tt_status write_te(tt_graph *g, const int *nodes, int n, int output, tt_strbuf *sb, int *ph,
                          int *nph, tt_errbuf *err);

tt_status tt__net_write_te(tt_graph *g, const int *nodes, int n, int output, tt_strbuf *sb, int *ph,
                           int *nph, tt_errbuf *err)
{
    pixel_view v;
    if (!pixel_rows(g, nodes, n, &v))
        return write_te(g, nodes, n, output, sb, ph, nph, err);
    view_pixel_rows(g, &v, true);
    tt_status s = write_te(g, nodes, n, output, sb, ph, nph, err);
    view_pixel_rows(g, &v, false);
    return s;
}

static tt_status write_te(tt_graph *g, const int *nodes, int n, int output, tt_strbuf *sb, int *ph,
                          int *nph, tt_errbuf *err)
{
    tw w;
    memset(&w, 0, sizeof(w));
    w.g = g;
    w.sb = sb;
    w.ph = ph;
    w.err = err;
    tt_status s = TT_OK;
    for (int i = 0; i < n && !s; i++) {
        const tt_gnode *nd = &g->nodes.data[nodes[i]];
        int which = 0;
        if (i == n - 1)
            while (which < nd->noutputs && nd->outputs[which] != output)
                which++;
        if (which == nd->noutputs)
            return tt_err(err, TT_ERR_INTERNAL, "tensor %d is not an output of node %d", output,
                          nodes[i]);
        char name[NAME_LEN];
        if (i == n - 1)
            snprintf(name, sizeof(name), "out");
        else
            tmp(&w, name);
        s = write_node(&w, nodes[i], name, which);
        if (!s)
            computed(&w, nd->outputs[which], name);
    }
    for (int k = 0; k < w.nph && !s; k++) {
        const tt_gtensor *t = &g->tensors.data[ph[k]];
        if (w.extra[k])
            continue;
        tt_strbuf_printf(sb, "; %c%d:%s%s", t->kind == TT_GT_CONST ? 'w' : 'x', k,
                         t->kind == TT_GT_CONST ? "const " : "", tt_dtype_name(t->dtype));
        decl_dims(sb, t->rank, t->dims, t->permuted ? t->perm : NULL);
    }
    if (!s)
        tt_strbuf_append(sb, tt_strbuf_cstr(&w.decls));
    tt_strbuf_free(&w.decls);
    *nph = w.nph;
    if (!s && sb->oom)
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    return s;
}
