/* AutoTVM's `itervar` features (search.md B4): one row per loop variable of the lowered program,
 * in order of first occurrence, each [length, nest level, top-down product, bottom-up reuse,
 * 11-way annotation one-hot, add / mul / div counts] followed by six values per buffer access
 * under the loop (sorted by `<buffer>_<k>`): stride, mod (-1), count, reuse, thread count and
 * thread reuse.
 *
 * Our approximations: per-iteration op counts are the ops of the stores under the loop times
 * the extents of the loops between; thread count and reuse are the count and reuse seen from the
 * innermost enclosing parallel loop (0 without one). */
#include "features.h"
#include "features_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH   64
#define MAX_ROWS    128
#define MAX_ENTRIES 16

typedef struct {
    uint32_t buf;
    tt_eid index; /* identity of the access pattern */
    char name[48];
    double stride, count, reuse, tcount, treuse;
} entry;

typedef struct {
    uint32_t var;
    double length, level, topdown, bottomup;
    int ann;
    double add, mul, div;
    entry e[MAX_ENTRIES];
    int ne;
} row;

typedef struct {
    uint32_t var;
    int64_t extent;
    tt_ann ann;
    int row;
} loop;

typedef struct {
    const tt_program *p;
    loop stack[MAX_DEPTH];
    int depth;
    row rows[MAX_ROWS];
    int nrows;
} ctx;

static int ann_slot(tt_ann a)
{
    switch (a) {
    case TT_ANN_BLOCK_X: return 0;
    case TT_ANN_BLOCK_Y: return 1;
    case TT_ANN_BLOCK_Z: return 2;
    case TT_ANN_THREAD_X: return 3;
    case TT_ANN_THREAD_Y: return 4;
    case TT_ANN_THREAD_Z: return 5;
    case TT_ANN_UNROLL: return 6;
    case TT_ANN_VECTORIZE: return 7;
    case TT_ANN_PARALLEL: return 8;
    case TT_ANN_VTHREAD: return 10;
    default: return 9; /* serial */
    }
}

static bool is_parallel_level(tt_ann a)
{
    return a == TT_ANN_PARALLEL || tt_ann_is_gpu_bind(a);
}

/* Coefficient of `var` in a flat index (1 when it occurs non-linearly, 0 when absent). */
static double stride_of(const tt_expr_pool *p, tt_eid e, uint32_t var)
{
    int64_t k;
    return tt__flat_coefficient(p, e, var, &k) ? (double)k : 1;
}

static void count_ops(const tt_expr_pool *p, tt_eid e, double *add, double *mul, double *div)
{
    if (!e)
        return;
    const tt_expr *x = tt_expr_get(p, e);
    bool fl = tt_dtype_is_float((tt_dtype)x->dtype);
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ: return;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB: *add += fl; break;
    case TT_EXPR_MUL: *mul += fl; break;
    case TT_EXPR_DIV:
    case TT_EXPR_MOD: *div += fl; break;
    case TT_EXPR_LOAD: count_ops(p, x->a, add, mul, div); return;
    case TT_EXPR_CALL: count_ops(p, x->a, add, mul, div); return;
    default: break;
    }
    count_ops(p, x->a, add, mul, div);
    if (x->kind != TT_EXPR_NOT && x->kind != TT_EXPR_NEG && x->kind != TT_EXPR_CAST)
        count_ops(p, x->b, add, mul, div);
    if (x->kind == TT_EXPR_SELECT)
        count_ops(p, x->c, add, mul, div);
}

/* One access at the current loop stack: update every enclosing loop's entry for it. */
static void touch(ctx *c, uint32_t buf, tt_eid index)
{
    const tt_expr_pool *p = &c->p->pool;
    double stride[MAX_DEPTH];
    for (int d = 0; d < c->depth; d++)
        stride[d] = stride_of(p, index, c->stack[d].var);
    int par = -1; /* innermost parallel-level loop */
    for (int d = 0; d < c->depth; d++)
        if (is_parallel_level(c->stack[d].ann))
            par = d;
    for (int d = 0; d < c->depth; d++) {
        row *r = &c->rows[c->stack[d].row];
        double count = 1, reuse = 1;
        for (int l = d; l < c->depth; l++) {
            if (stride[l] != 0)
                count *= (double)c->stack[l].extent;
            else
                reuse *= (double)c->stack[l].extent;
        }
        double tcount = 0, treuse = 0;
        if (par >= 0) {
            tcount = treuse = 1;
            for (int l = par; l < c->depth; l++) {
                if (stride[l] != 0)
                    tcount *= (double)c->stack[l].extent;
                else
                    treuse *= (double)c->stack[l].extent;
            }
        }
        int k = 0;
        while (k < r->ne && !(r->e[k].buf == buf && tt_expr_equal(p, r->e[k].index, index)))
            k++;
        if (k == r->ne) {
            if (r->ne == MAX_ENTRIES)
                continue;
            entry *e = &r->e[r->ne++];
            memset(e, 0, sizeof(*e));
            e->buf = buf;
            e->index = index;
            int same = 0;
            for (int j = 0; j < r->ne - 1; j++)
                same += r->e[j].buf == buf;
            snprintf(e->name, sizeof(e->name), "%s_%d", c->p->bufs.data[buf].name, same);
            e->stride = fabs(stride[d]);
        }
        entry *e = &r->e[k];
        if (count * reuse > e->count * e->reuse) {
            e->count = count;
            e->reuse = reuse;
            e->tcount = tcount;
            e->treuse = treuse;
        }
        if (count * reuse > r->bottomup)
            r->bottomup = count * reuse;
    }
}

static void loads(ctx *c, tt_eid e)
{
    if (!e)
        return;
    const tt_expr *x = tt_expr_get(&c->p->pool, e);
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ: return;
    case TT_EXPR_LOAD:
        touch(c, x->b, x->a);
        loads(c, x->a);
        return;
    default:
        loads(c, x->a);
        if (x->kind != TT_EXPR_NOT && x->kind != TT_EXPR_NEG && x->kind != TT_EXPR_CAST &&
            x->kind != TT_EXPR_CALL)
            loads(c, x->b);
        if (x->kind == TT_EXPR_SELECT)
            loads(c, x->c);
    }
}

static void walk(ctx *c, tt_sid id)
{
    if (!id)
        return;
    const tt_stmt *s = &c->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: {
        if (c->depth == MAX_DEPTH)
            return;
        int r = 0;
        while (r < c->nrows && c->rows[r].var != s->var)
            r++;
        if (r == c->nrows) {
            if (c->nrows == MAX_ROWS)
                return;
            row *nr = &c->rows[c->nrows++];
            memset(nr, 0, sizeof(*nr));
            nr->var = s->var;
            nr->length = (double)s->extent;
            nr->level = c->depth + 1;
            nr->topdown = (double)s->extent;
            for (int d = 0; d < c->depth; d++)
                nr->topdown *= (double)c->stack[d].extent;
            nr->ann = ann_slot(s->ann);
        }
        c->stack[c->depth++] = (loop){s->var, s->extent, s->ann, r};
        walk(c, s->body);
        c->depth--;
        break;
    }
    case TT_STMT_SEQ:
        for (uint32_t i = 0; i < s->n; i++)
            walk(c, c->p->items.data[s->first + i]);
        break;
    case TT_STMT_STORE: {
        double add = 0, mul = 0, div = 0;
        count_ops(&c->p->pool, s->value, &add, &mul, &div);
        for (int d = 0; d < c->depth; d++) {
            double inner = 1;
            for (int l = d + 1; l < c->depth; l++)
                inner *= (double)c->stack[l].extent;
            row *r = &c->rows[c->stack[d].row];
            r->add += add * inner;
            r->mul += mul * inner;
            r->div += div * inner;
        }
        loads(c, s->value);
        touch(c, s->buf, s->index);
        break;
    }
    case TT_STMT_ALLOC: walk(c, s->body); break;
    case TT_STMT_IF:
        walk(c, s->body);
        walk(c, s->orelse);
        break;
    default: break;
    }
}

static double trans(double x)
{
    return x < 0 ? -log2(1 - x) : log2(1 + x);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

int tt_features_itervar(const tt_program *p, bool raw, float *out, int max)
{
    ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->p = p;
    walk(c, p->root);
    int n = 0;
#define PUT(v)                                                                                     \
    do {                                                                                           \
        if (out && n < max)                                                                        \
            out[n] = (float)(v);                                                                   \
        n++;                                                                                       \
    } while (0)
#define T(v) (raw ? (v) : trans(v))
    for (int i = 0; i < c->nrows; i++) {
        row *r = &c->rows[i];
        PUT(T(r->length));
        PUT(r->level);
        PUT(T(r->topdown));
        PUT(T(r->bottomup));
        for (int k = 0; k < 11; k++)
            PUT(k == r->ann);
        PUT(T(r->add));
        PUT(T(r->mul));
        PUT(T(r->div));
        qsort(r->e, (size_t)r->ne, sizeof(entry), cmp_entry);
        for (int k = 0; k < r->ne; k++) {
            const entry *e = &r->e[k];
            PUT(T(e->stride));
            PUT(-1);
            PUT(T(e->count));
            PUT(T(e->reuse));
            PUT(T(e->tcount));
            PUT(T(e->treuse));
        }
    }
#undef PUT
#undef T
    free(c);
    return n;
}
