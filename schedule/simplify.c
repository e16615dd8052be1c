/* Simplifier for index arithmetic.
 *
 * Integer sums of products are brought into a canonical linear form (atoms with coefficients plus
 * a constant); floor division and modulo by constants split off the part that is a multiple of
 * the divisor and use variable bounds to drop what is provably trivial.  Floats are only
 * constant-folded, so float semantics never change. */
#include "expr.h"

#include <string.h>

#define MAX_TERMS 32

typedef struct {
    tt_eid atom[MAX_TERMS];
    int64_t coef[MAX_TERMS];
    int n;
    int64_t c;
    bool ok;
} linear;

static bool is_int(const tt_expr_pool *p, tt_eid e)
{
    tt_dtype t = (tt_dtype)p->nodes.data[e].dtype;
    return t == TT_DT_INT64 || t == TT_DT_INT32;
}

static void lin_add_term(const tt_expr_pool *p, linear *l, tt_eid atom, int64_t coef)
{
    if (coef == 0)
        return;
    for (int i = 0; i < l->n; i++)
        if (tt_expr_equal(p, l->atom[i], atom)) {
            l->coef[i] += coef;
            return;
        }
    if (l->n == MAX_TERMS) {
        l->ok = false;
        return;
    }
    l->atom[l->n] = atom;
    l->coef[l->n++] = coef;
}

static void lin_compact(linear *l)
{
    int k = 0;
    for (int i = 0; i < l->n; i++)
        if (l->coef[i]) {
            l->atom[k] = l->atom[i];
            l->coef[k++] = l->coef[i];
        }
    l->n = k;
}

static tt_eid simplify_rec(tt_expr_pool *p, tt_eid e, const tt_bounds *b);

/* Adds scale * e to l, recursing through + - * by constants. */
static void lin_collect(tt_expr_pool *p, tt_eid e, int64_t scale, linear *l, const tt_bounds *b)
{
    if (!l->ok)
        return;
    tt_expr n = p->nodes.data[e];
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT: l->c += scale * n.imm.i; return;
    case TT_EXPR_ADD:
        lin_collect(p, n.a, scale, l, b);
        lin_collect(p, n.b, scale, l, b);
        return;
    case TT_EXPR_SUB:
        lin_collect(p, n.a, scale, l, b);
        lin_collect(p, n.b, -scale, l, b);
        return;
    case TT_EXPR_NEG: lin_collect(p, n.a, -scale, l, b); return;
    case TT_EXPR_MUL: {
        linear la = {.ok = true}, lb = {.ok = true};
        lin_collect(p, n.a, 1, &la, b);
        lin_collect(p, n.b, 1, &lb, b);
        lin_compact(&la);
        lin_compact(&lb);
        if (la.ok && lb.ok && la.n == 0) {
            lin_collect(p, n.b, scale * la.c, l, b);
            return;
        }
        if (la.ok && lb.ok && lb.n == 0) {
            lin_collect(p, n.a, scale * lb.c, l, b);
            return;
        }
        /* A product of two non-constants is an atom; simplify its factors, not itself (which
         * would come straight back here). */
        tt_eid x = simplify_rec(p, n.a, b), y = simplify_rec(p, n.b, b);
        tt_eid atom = x && y ? tt_mul(p, x, y) : 0;
        if (!atom)
            l->ok = false;
        else
            lin_add_term(p, l, atom, scale);
        return;
    }
    default: break;
    }
    tt_eid atom = simplify_rec(p, e, b);
    if (!atom) {
        l->ok = false;
        return;
    }
    int64_t v;
    if (tt_expr_is_const_int(p, atom, &v))
        l->c += scale * v;
    else
        lin_add_term(p, l, atom, scale);
}

/* (x / c) * c*k + (x % c) * k is x * k (floor division and modulo): a loop fused from two whose
 * inner one is whole, f = i * 2 + j, indexes its output as f / 2 * 2 + f % 2, which is f again,
 * and the code generator sees a vector's contiguous store. */
static void lin_merge_divmod(tt_expr_pool *p, linear *l, const tt_bounds *b)
{
    for (int i = 0; i < l->n && l->ok; i++) {
        const tt_expr *d = &p->nodes.data[l->atom[i]];
        int64_t c;
        if (d->kind != TT_EXPR_DIV || !l->coef[i] || !tt_expr_is_const_int(p, d->b, &c) || c <= 1 ||
            l->coef[i] % c)
            continue;
        for (int j = 0; j < l->n; j++) {
            const tt_expr *m = &p->nodes.data[l->atom[j]];
            int64_t cm;
            if (m->kind != TT_EXPR_MOD || l->coef[j] != l->coef[i] / c ||
                !tt_expr_is_const_int(p, m->b, &cm) || cm != c || !tt_expr_equal(p, m->a, d->a))
                continue;
            tt_eid x = d->a;
            int64_t k = l->coef[j];
            l->coef[i] = l->coef[j] = 0;
            lin_collect(p, x, k, l, b);
            break;
        }
    }
    lin_compact(l);
}

static tt_eid lin_build(tt_expr_pool *p, const linear *l)
{
    tt_eid acc = 0;
    /* Positive terms first, so "i*16 + j - 1" rather than "-1 + ...". */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < l->n; i++) {
            int64_t c = l->coef[i];
            if ((pass == 0) != (c > 0))
                continue;
            int64_t mag = c < 0 ? -c : c;
            tt_eid t = mag == 1 ? l->atom[i] : tt_mul(p, l->atom[i], tt_expr_int(p, mag));
            if (!acc)
                acc = c > 0 ? t : tt_expr_unary(p, TT_EXPR_NEG, t);
            else
                acc = tt_expr_binary(p, c > 0 ? TT_EXPR_ADD : TT_EXPR_SUB, acc, t);
        }
    if (!acc)
        return tt_expr_int(p, l->c);
    if (l->c > 0)
        acc = tt_add(p, acc, tt_expr_int(p, l->c));
    else if (l->c < 0)
        acc = tt_sub(p, acc, tt_expr_int(p, -l->c));
    return acc;
}

static int64_t fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static bool bound_rec(const tt_expr_pool *p, tt_eid e, const tt_bounds *b, int64_t *lo,
                      int64_t *hi);

static bool lin_bound(const tt_expr_pool *p, const linear *l, const tt_bounds *b, int64_t *lo,
                      int64_t *hi)
{
    int64_t L = l->c, H = l->c;
    for (int i = 0; i < l->n; i++) {
        int64_t a, z;
        if (!bound_rec(p, l->atom[i], b, &a, &z))
            return false;
        int64_t c = l->coef[i];
        if (c > 0) {
            L += c * a;
            H += c * z;
        } else {
            L += c * z;
            H += c * a;
        }
    }
    *lo = L;
    *hi = H;
    return true;
}

static bool bound_rec(const tt_expr_pool *p, tt_eid e, const tt_bounds *b, int64_t *lo, int64_t *hi)
{
    const tt_expr *n = &p->nodes.data[e];
    int64_t al, ah, bl, bh;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: *lo = *hi = n->imm.i; return true;
    case TT_EXPR_VAR:
        if (b && n->a < b->n && b->known[n->a]) {
            *lo = b->lo[n->a];
            *hi = b->hi[n->a];
            return true;
        }
        return false;
    case TT_EXPR_ADD:
        if (!bound_rec(p, n->a, b, &al, &ah) || !bound_rec(p, n->b, b, &bl, &bh))
            return false;
        *lo = al + bl;
        *hi = ah + bh;
        return true;
    case TT_EXPR_SUB:
        if (!bound_rec(p, n->a, b, &al, &ah) || !bound_rec(p, n->b, b, &bl, &bh))
            return false;
        *lo = al - bh;
        *hi = ah - bl;
        return true;
    case TT_EXPR_NEG:
        if (!bound_rec(p, n->a, b, &al, &ah))
            return false;
        *lo = -ah;
        *hi = -al;
        return true;
    case TT_EXPR_MUL: {
        if (!bound_rec(p, n->a, b, &al, &ah) || !bound_rec(p, n->b, b, &bl, &bh))
            return false;
        int64_t c[4] = {al * bl, al * bh, ah * bl, ah * bh};
        *lo = *hi = c[0];
        for (int i = 1; i < 4; i++) {
            if (c[i] < *lo)
                *lo = c[i];
            if (c[i] > *hi)
                *hi = c[i];
        }
        return true;
    }
    case TT_EXPR_DIV:
        if (!bound_rec(p, n->b, b, &bl, &bh) || bl != bh || bl <= 0 ||
            !bound_rec(p, n->a, b, &al, &ah))
            return false;
        *lo = fdiv(al, bl);
        *hi = fdiv(ah, bl);
        return true;
    case TT_EXPR_MOD:
        if (!bound_rec(p, n->b, b, &bl, &bh) || bl != bh || bl <= 0)
            return false;
        if (bound_rec(p, n->a, b, &al, &ah) && fdiv(al, bl) == fdiv(ah, bl)) {
            *lo = al - fdiv(al, bl) * bl;
            *hi = ah - fdiv(al, bl) * bl;
            return true;
        }
        *lo = 0;
        *hi = bl - 1;
        return true;
    case TT_EXPR_MIN:
    case TT_EXPR_MAX:
        if (!bound_rec(p, n->a, b, &al, &ah) || !bound_rec(p, n->b, b, &bl, &bh))
            return false;
        if (n->kind == TT_EXPR_MIN) {
            *lo = al < bl ? al : bl;
            *hi = ah < bh ? ah : bh;
        } else {
            *lo = al > bl ? al : bl;
            *hi = ah > bh ? ah : bh;
        }
        return true;
    case TT_EXPR_SELECT:
        if (!bound_rec(p, n->b, b, &al, &ah) || !bound_rec(p, n->c, b, &bl, &bh))
            return false;
        *lo = al < bl ? al : bl;
        *hi = ah > bh ? ah : bh;
        return true;
    default:
        if (n->dtype == TT_DT_BOOL) {
            *lo = 0;
            *hi = 1;
            return true;
        }
        return false;
    }
}

bool tt_expr_const_bound(const tt_expr_pool *p, tt_eid e, const tt_bounds *bounds, int64_t *lo,
                         int64_t *hi)
{
    return bound_rec(p, e, bounds, lo, hi);
}

static tt_eid simplify_divmod(tt_expr_pool *p, tt_eid e, const tt_bounds *b)
{
    tt_expr n = p->nodes.data[e];
    tt_eid den = simplify_rec(p, n.b, b);
    int64_t c;
    if (!den)
        return 0;
    if (!tt_expr_is_const_int(p, den, &c) || c <= 0) {
        tt_eid num = simplify_rec(p, n.a, b);
        return num ? tt_expr_binary(p, (tt_expr_kind)n.kind, num, den) : 0;
    }
    linear l = {.ok = true};
    lin_collect(p, n.a, 1, &l, b);
    lin_compact(&l);
    if (!l.ok) {
        tt_eid num = simplify_rec(p, n.a, b);
        return num ? tt_expr_binary(p, (tt_expr_kind)n.kind, num, den) : 0;
    }
    if (c == 1)
        return n.kind == TT_EXPR_DIV ? lin_build(p, &l) : tt_expr_int(p, 0);
    /* Split into the multiple-of-c part (q * c) and the rest r. */
    linear q = {.ok = true}, r = {.ok = true};
    for (int i = 0; i < l.n; i++) {
        /* A term is a multiple of c when its coefficient is, or when its atom is known to be a
         * multiple of what the coefficient lacks: a clamped tile start min(t*32, 176) over a
         * grouped convolution's groups of 8 channels, (min(t*32, 176) + v) / 8, splits into
         * min(t*32, 176) / 8 + v / 8, and the lanes of v then read from a pattern that the code
         * generators see (one value per group) instead of a gather. */
        int64_t need = c / tt_gcd64(l.coef[i], c), d = tt_expr_known_divisor(p, l.atom[i]);
        if (l.coef[i] % c == 0)
            lin_add_term(p, &q, l.atom[i], l.coef[i] / c);
        else if (d > 0 && d % need == 0)
            lin_add_term(p, &q, tt_div(p, l.atom[i], tt_expr_int(p, need)), l.coef[i] * need / c);
        else
            lin_add_term(p, &r, l.atom[i], l.coef[i]);
    }
    q.c = fdiv(l.c, c);
    r.c = l.c - q.c * c;
    int64_t lo, hi;
    bool bounded = lin_bound(p, &r, b, &lo, &hi);
    if (n.kind == TT_EXPR_DIV) {
        if (bounded && fdiv(lo, c) == fdiv(hi, c)) {
            q.c += fdiv(lo, c);
            return lin_build(p, &q);
        }
        tt_eid rest = tt_div(p, lin_build(p, &r), tt_expr_int(p, c));
        if (q.n == 0 && q.c == 0)
            return rest;
        return tt_add(p, lin_build(p, &q), rest);
    }
    if (bounded && fdiv(lo, c) == fdiv(hi, c)) {
        r.c -= fdiv(lo, c) * c;
        return lin_build(p, &r);
    }
    return tt_mod(p, lin_build(p, &r), tt_expr_int(p, c));
}

static tt_eid make_bool(tt_expr_pool *p, bool v)
{
    tt_eid e = tt_expr_int(p, v);
    if (e)
        p->nodes.data[e].dtype = TT_DT_BOOL;
    return e;
}

static tt_eid simplify_rec(tt_expr_pool *p, tt_eid e, const tt_bounds *b)
{
    if (!e)
        return 0;
    tt_expr n = p->nodes.data[e];
    tt_expr_kind k = (tt_expr_kind)n.kind;
    switch (k) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return e;
    case TT_EXPR_READ: {
        tt_eid idx[16];
        for (int i = 0; i < n.n && i < 16; i++)
            if (!(idx[i] = simplify_rec(p, p->args.data[n.b + (uint32_t)i], b)))
                return 0;
        return tt_expr_read(p, (tt_dtype)n.dtype, n.a, n.n, idx);
    }
    case TT_EXPR_LOAD: {
        tt_eid idx = simplify_rec(p, n.a, b);
        return idx ? tt_expr_load(p, (tt_dtype)n.dtype, n.b, idx) : 0;
    }
    case TT_EXPR_CALL: {
        tt_eid a = simplify_rec(p, n.a, b);
        if (!a)
            return 0;
        n.a = a;
        tt_eid r = tt_expr_call(p, (tt_func)n.b, a);
        if (r)
            p->nodes.data[r].dtype = n.dtype;
        return r;
    }
    default: break;
    }
    if (is_int(p, e) &&
        (k == TT_EXPR_ADD || k == TT_EXPR_SUB || k == TT_EXPR_MUL || k == TT_EXPR_NEG)) {
        linear l = {.ok = true};
        lin_collect(p, e, 1, &l, b);
        lin_compact(&l);
        lin_merge_divmod(p, &l, b);
        if (l.ok)
            return lin_build(p, &l);
    }
    if (is_int(p, e) && (k == TT_EXPR_DIV || k == TT_EXPR_MOD))
        return simplify_divmod(p, e, b);

    tt_eid a = n.a ? simplify_rec(p, n.a, b) : 0;
    tt_eid bb = 0, c = 0;
    if (k == TT_EXPR_SELECT) {
        int64_t v;
        if (a && tt_expr_is_const_int(p, a, &v))
            return simplify_rec(p, v ? n.b : n.c, b);
        bb = simplify_rec(p, n.b, b);
        c = simplify_rec(p, n.c, b);
        return tt_expr_select(p, a, bb, c);
    }
    if (k == TT_EXPR_NOT || k == TT_EXPR_NEG || k == TT_EXPR_CAST) {
        int64_t v;
        if (!a)
            return 0;
        if (k == TT_EXPR_NOT && tt_expr_is_const_int(p, a, &v))
            return make_bool(p, !v);
        if (k == TT_EXPR_CAST) {
            const tt_expr *x = &p->nodes.data[a];
            if (x->dtype == n.dtype)
                return a;
            if (x->kind == TT_EXPR_INT && tt_dtype_is_float((tt_dtype)n.dtype))
                return tt_expr_float(p, (tt_dtype)n.dtype, (double)x->imm.i);
            return tt_expr_cast(p, (tt_dtype)n.dtype, a);
        }
        if (k == TT_EXPR_NEG && p->nodes.data[a].kind == TT_EXPR_FLOAT)
            return tt_expr_float(p, (tt_dtype)n.dtype, -p->nodes.data[a].imm.f);
        return tt_expr_unary(p, k, a);
    }
    bb = simplify_rec(p, n.b, b);
    if (!a || !bb)
        return 0;
    const tt_expr *x = &p->nodes.data[a], *y = &p->nodes.data[bb];
    /* Float constant folding. */
    if (x->kind == TT_EXPR_FLOAT && y->kind == TT_EXPR_FLOAT &&
        tt_dtype_is_float((tt_dtype)n.dtype)) {
        double u = x->imm.f, w = y->imm.f, r;
        switch (k) {
        case TT_EXPR_ADD: r = u + w; break;
        case TT_EXPR_SUB: r = u - w; break;
        case TT_EXPR_MUL: r = u * w; break;
        case TT_EXPR_MIN: r = u < w ? u : w; break;
        case TT_EXPR_MAX: r = u > w ? u : w; break;
        default: goto rebuild;
        }
        return tt_expr_float(p, (tt_dtype)n.dtype, r);
    }
    if (k == TT_EXPR_AND || k == TT_EXPR_OR) {
        int64_t u, w;
        bool cu = tt_expr_is_const_int(p, a, &u), cw = tt_expr_is_const_int(p, bb, &w);
        if (k == TT_EXPR_AND) {
            if ((cu && !u) || (cw && !w))
                return make_bool(p, false);
            if (cu)
                return bb;
            if (cw)
                return a;
        } else {
            if ((cu && u) || (cw && w))
                return make_bool(p, true);
            if (cu)
                return bb;
            if (cw)
                return a;
        }
        goto rebuild;
    }
    if (is_int(p, a) && is_int(p, bb)) {
        /* Integer comparisons and min/max decided through the bounds of a - b. */
        linear d = {.ok = true};
        lin_collect(p, a, 1, &d, b);
        lin_collect(p, bb, -1, &d, b);
        lin_compact(&d);
        int64_t lo, hi;
        if (d.ok && lin_bound(p, &d, b, &lo, &hi)) {
            switch (k) {
            case TT_EXPR_LT:
                if (hi < 0 || lo >= 0)
                    return make_bool(p, hi < 0);
                break;
            case TT_EXPR_LE:
                if (hi <= 0 || lo > 0)
                    return make_bool(p, hi <= 0);
                break;
            case TT_EXPR_GT:
                if (lo > 0 || hi <= 0)
                    return make_bool(p, lo > 0);
                break;
            case TT_EXPR_GE:
                if (lo >= 0 || hi < 0)
                    return make_bool(p, lo >= 0);
                break;
            case TT_EXPR_EQ:
                if (lo == 0 && hi == 0)
                    return make_bool(p, true);
                if (lo > 0 || hi < 0)
                    return make_bool(p, false);
                break;
            case TT_EXPR_NE:
                if (lo == 0 && hi == 0)
                    return make_bool(p, false);
                if (lo > 0 || hi < 0)
                    return make_bool(p, true);
                break;
            case TT_EXPR_MIN:
                if (hi <= 0)
                    return a;
                if (lo >= 0)
                    return bb;
                break;
            case TT_EXPR_MAX:
                if (lo >= 0)
                    return a;
                if (hi <= 0)
                    return bb;
                break;
            default: break;
            }
        }
    }
rebuild:
    if (a == n.a && bb == n.b)
        return e;
    return tt_expr_binary(p, k, a, bb);
}

tt_eid tt_simplify(tt_expr_pool *p, tt_eid e, const tt_bounds *bounds)
{
    return simplify_rec(p, e, bounds);
}
