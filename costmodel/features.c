/* Per-store features (search.md C7) read from the loop IR.
 *
 * Differences from Ansor's extractor, all forced by our IR or chosen for simplicity: indices are
 * flat, so a stride is the variable's coefficient in the flat index; touched regions are the
 * smaller of the product of the extents of the variables an index uses and its linear span, which
 * is exact for dense tiles and an over-estimate for overlapping windows; reuse is loop reuse only
 * (Ansor's serial read-write reuse is not detected and reads as no reuse). */
#include "features.h"
#include "features_int.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH  64
#define MAX_ACCESS 32
#define NSLOTS     5
#define SLOT_SIZE  18

enum {
    F_COMPUTE = 0,
    F_VEC = 16,
    F_UNROLL = 27,
    F_PARALLEL = 38,
    F_GPU = 49,
    F_BUF = 57,
    F_ARITH = 147,
    F_ALLOC = 157,
    F_OTHER = 161,
    F_TILE = 164,
};

_Static_assert(F_OTHER == TT_FEATURE_OUTER_PROD, "features.h names outer_prod's index");

/* The register tile block (F_TILE): loop groups around the store, from the innermost outward. */
enum {
    TILE_GROUPS = 6,   /* tile, carried, tile, carried, tile, carried */
    TILE_PRODUCTS = 6, /* accumulator vectors and products of groups */
    /* bytes the store's accesses touch inside each group */
    TILE_FOOTPRINT = F_TILE + TILE_GROUPS + TILE_PRODUCTS,
    TILE_INPUT =
        TILE_FOOTPRINT + TILE_GROUPS, /* input elements of the inner tile, and per output */
    TILE_END = TILE_INPUT + 2,
};

_Static_assert(TILE_END == TT_STORE_FEATURES, "the register tile block ends the row");

/* Compute counters, in feature order. */
enum {
    OP_FLOAT_MAD,
    OP_FLOAT_ADDSUB,
    OP_FLOAT_MUL,
    OP_FLOAT_DIVMOD,
    OP_FLOAT_CMP,
    OP_FLOAT_MATH,
    OP_FLOAT_OTHER,
    OP_INT_MAD,
    OP_INT_ADDSUB,
    OP_INT_MUL,
    OP_INT_DIVMOD,
    OP_INT_CMP,
    OP_INT_MATH,
    OP_INT_OTHER,
    OP_BOOL,
    OP_SELECT,
    OP_COUNT
};

static const char *const compute_names[OP_COUNT] = {
    "float_mad",    "float_addsub",   "float_mul",       "float_divmod",
    "float_cmp",    "float_mathfunc", "float_otherfunc", "int_mad",
    "int_addsub",   "int_mul",        "int_divmod",      "int_cmp",
    "int_mathfunc", "int_otherfunc",  "bool_op",         "select_op",
};

typedef struct {
    uint32_t var;
    int64_t extent;
    tt_ann ann;
    int32_t unroll;
} loop;

typedef struct {
    uint32_t buf;
    tt_eid index;
    bool read, write;
} access;

typedef struct {
    const tt_program *p;
    loop stack[MAX_DEPTH];
    int depth;
    int alloc_depth[1024]; /* loop depth at each buffer's allocation, -1 = not allocated */
    bool is_gpu;
    /* rows by buffer */
    int row_of[1024];
    int nrows, max_rows;
    float *out;
} ctx;

static char names[TT_STORE_FEATURES][40];
static bool raw_entry[TT_STORE_FEATURES]; /* one-hots and is_gpu: not log-scaled */
static pthread_once_t names_once = PTHREAD_ONCE_INIT;
static void init_names(void);

static float slog(double x)
{
    return (float)(x < 0 ? -log2(-x + 1) : log2(x + 1));
}

static void count_ops(const tt_expr_pool *p, tt_eid e, double *ops)
{
    if (!e)
        return;
    const tt_expr *x = tt_expr_get(p, e);
    bool fl = tt_dtype_is_float((tt_dtype)x->dtype);
    int base = fl ? 0 : OP_INT_MAD - OP_FLOAT_MAD;
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ: return;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB: ops[OP_FLOAT_ADDSUB + base]++; break;
    case TT_EXPR_MUL: ops[OP_FLOAT_MUL + base]++; break;
    case TT_EXPR_DIV:
    case TT_EXPR_MOD: ops[OP_FLOAT_DIVMOD + base]++; break;
    case TT_EXPR_MIN:
    case TT_EXPR_MAX: ops[OP_FLOAT_CMP + base]++; break;
    case TT_EXPR_LT:
    case TT_EXPR_LE:
    case TT_EXPR_GT:
    case TT_EXPR_GE:
    case TT_EXPR_EQ:
    case TT_EXPR_NE: {
        /* A comparison is typed by its operands. */
        bool ofl = tt_dtype_is_float((tt_dtype)tt_expr_get(p, x->a)->dtype);
        ops[ofl ? OP_FLOAT_CMP : OP_INT_CMP]++;
        break;
    }
    case TT_EXPR_AND:
    case TT_EXPR_OR:
    case TT_EXPR_NOT: ops[OP_BOOL]++; break;
    case TT_EXPR_SELECT: ops[OP_SELECT]++; break;
    case TT_EXPR_CALL:
        ops[(x->b == TT_FUNC_ABS || x->b == TT_FUNC_FLOOR || x->b == TT_FUNC_CEIL ? OP_FLOAT_OTHER
                                                                                  : OP_FLOAT_MATH) +
            base]++;
        count_ops(p, x->a, ops);
        return;
    case TT_EXPR_LOAD: count_ops(p, x->a, ops); return;
    default: break;
    }
    count_ops(p, x->a, ops);
    if (x->kind != TT_EXPR_NOT && x->kind != TT_EXPR_NEG && x->kind != TT_EXPR_CAST)
        count_ops(p, x->b, ops);
    if (x->kind == TT_EXPR_SELECT)
        count_ops(p, x->c, ops);
}

static void collect_loads(const tt_expr_pool *p, tt_eid e, access *acc, int *n)
{
    if (!e)
        return;
    const tt_expr *x = tt_expr_get(p, e);
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ: return;
    case TT_EXPR_LOAD:
        if (*n < MAX_ACCESS) {
            acc[*n] = (access){x->b, x->a, true, false};
            (*n)++;
        }
        collect_loads(p, x->a, acc, n);
        return;
    default:
        collect_loads(p, x->a, acc, n);
        if (x->kind != TT_EXPR_NOT && x->kind != TT_EXPR_NEG && x->kind != TT_EXPR_CAST &&
            x->kind != TT_EXPR_CALL)
            collect_loads(p, x->b, acc, n);
        if (x->kind == TT_EXPR_SELECT)
            collect_loads(p, x->c, acc, n);
    }
}

bool tt__flat_coefficient(const tt_expr_pool *p, tt_eid e, uint32_t var, int64_t *c)
{
    const tt_expr *x = tt_expr_get(p, e);
    int64_t a, b;
    switch ((tt_expr_kind)x->kind) {
    case TT_EXPR_VAR: *c = x->a == var; return true;
    case TT_EXPR_INT: *c = 0; return true;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
        if (!tt__flat_coefficient(p, x->a, var, &a) || !tt__flat_coefficient(p, x->b, var, &b))
            return false;
        *c = x->kind == TT_EXPR_ADD ? a + b : a - b;
        return true;
    case TT_EXPR_MUL: {
        int64_t k;
        if (tt_expr_is_const_int(p, x->a, &k) && tt__flat_coefficient(p, x->b, var, &b)) {
            *c = k * b;
            return true;
        }
        if (tt_expr_is_const_int(p, x->b, &k) && tt__flat_coefficient(p, x->a, var, &a)) {
            *c = k * a;
            return true;
        }
        break;
    }
    default: break;
    }
    *c = 0;
    return !tt_expr_uses_var(p, e, var);
}

/* Elements of buffer `b` that index `e` touches while loops depth..top run. */
static double touched(const ctx *c, tt_eid e, int from)
{
    double prod = 1, span = 0;
    bool linear = true;
    for (int d = from; d < c->depth; d++) {
        int64_t k;
        const loop *l = &c->stack[d];
        if (!tt_expr_uses_var(&c->p->pool, e, l->var))
            continue;
        prod *= (double)l->extent;
        if (tt__flat_coefficient(&c->p->pool, e, l->var, &k))
            span += (double)llabs(k) * (double)(l->extent - 1);
        else
            linear = false;
    }
    return linear && span + 1 < prod ? span + 1 : prod;
}

/* Bytes that accesses acc[0..nacc) touch while loops from..top run. */
static double accesses_bytes(const ctx *c, const access *acc, int nacc, int from)
{
    double bytes = 0;
    for (int i = 0; i < nacc; i++)
        bytes += touched(c, acc[i].index, from) * tt_dtype_bytes(c->p->bufs.data[acc[i].buf].dtype);
    return bytes;
}

typedef struct {
    double f[SLOT_SIZE];
    double lines, bytes;
} slot;

static int cmp_slot(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    if (x->lines != y->lines)
        return x->lines < y->lines ? 1 : -1;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* The register-level structure of the code around a store, which the access slots above do not
 * show (docs/search.md "The register tile block"): from the innermost loop outward, loops of
 * extent 1 skipped, the loops fall into groups that alternate between a tile (their variables
 * index the store) and a carried loop group (they do not: a reduction carried over the tile).
 * A 1x16 tile kept in registers across 32 input channels and the same tile written back on every
 * channel differ here in two values, and in 13 of the other 164. */
static void tile_features(const ctx *c, const tt_stmt *s, const access *acc, int nacc, double *f)
{
    const tt_expr_pool *pool = &c->p->pool;
    double group[TILE_GROUPS], vec = 1;
    int start[TILE_GROUPS]; /* the outermost loop depth inside each group's boundary */
    int d = c->depth - 1;
    for (int l = 0; l < c->depth; l++)
        if (c->stack[l].ann == TT_ANN_VECTORIZE)
            vec = (double)c->stack[l].extent;
    for (int g = 0; g < TILE_GROUPS; g++) {
        bool want_tile = g % 2 == 0;
        group[g] = 1;
        for (; d >= 0; d--) {
            const loop *l = &c->stack[d];
            if (l->extent == 1)
                continue;
            if (tt_expr_uses_var(pool, s->index, l->var) != want_tile)
                break;
            group[g] *= (double)l->extent;
        }
        start[g] = d + 1;
    }
    for (int g = 0; g < TILE_GROUPS; g++)
        f[F_TILE + g] = group[g];
    double *prod = &f[F_TILE + TILE_GROUPS];
    prod[0] = group[0] / vec; /* accumulator vectors of the inner tile */
    prod[1] = group[0] * group[1];
    prod[2] = group[2] * group[3];
    prod[3] = group[0] * group[2];
    prod[4] = group[1] * group[3];
    prod[5] = group[0] * group[1] * group[2] * group[3];
    for (int g = 0; g < TILE_GROUPS; g++)
        f[TILE_FOOTPRINT + g] = accesses_bytes(c, acc, nacc, start[g]);
    double inputs = 0;
    for (int i = 0; i < nacc; i++)
        if (acc[i].buf != s->buf)
            inputs += touched(c, acc[i].index, start[0]);
    f[TILE_INPUT] = inputs;
    f[TILE_INPUT + 1] = inputs / group[0];
}

static void store_features(ctx *c, const tt_stmt *s)
{
    const tt_expr_pool *pool = &c->p->pool;
    if (s->buf >= 1024)
        return;
    int row = c->row_of[s->buf];
    if (row < 0) {
        row = c->row_of[s->buf] = c->nrows++;
    }
    if (row >= c->max_rows)
        return;
    double f[TT_STORE_FEATURES] = {0};
    double outer = 1;
    for (int d = 0; d < c->depth; d++)
        outer *= (double)c->stack[d].extent;
    /* compute */
    double ops[OP_COUNT] = {0};
    count_ops(pool, s->value, ops);
    count_ops(pool, s->index, ops);
    double flops = 0;
    for (int k = 0; k < OP_COUNT; k++) {
        f[F_COMPUTE + k] = ops[k] * outer;
        if (k <= OP_FLOAT_OTHER)
            flops += ops[k];
    }
    /* vectorize, unroll, parallel */
    static const tt_ann kinds[3] = {TT_ANN_VECTORIZE, TT_ANN_UNROLL, TT_ANN_PARALLEL};
    static const int base[3] = {F_VEC, F_UNROLL, F_PARALLEL};
    for (int k = 0; k < 3; k++) {
        double num = 0, prod = 1, len = 0;
        for (int d = 0; d < c->depth; d++) {
            tt_ann a = c->stack[d].ann;
            bool match = a == kinds[k] || (k == 2 && tt_ann_is_gpu_bind(a));
            if (!match)
                continue;
            num++;
            prod *= (double)c->stack[d].extent;
            len = (double)c->stack[d].extent;
        }
        f[base[k]] = num;
        f[base[k] + 1] = num ? prod : 0;
        f[base[k] + 2] = len;
        f[base[k] + 3 + (num ? 7 : 0)] = 1; /* type: none, or mixed */
    }
    /* gpu */
    f[F_GPU] = c->is_gpu;
    for (int k = 1; k < 8; k++)
        f[F_GPU + k] = 1;
    for (int d = 0; d < c->depth; d++) {
        int k = 0;
        switch (c->stack[d].ann) {
        case TT_ANN_BLOCK_X: k = 1; break;
        case TT_ANN_BLOCK_Y: k = 2; break;
        case TT_ANN_BLOCK_Z: k = 3; break;
        case TT_ANN_THREAD_X: k = 4; break;
        case TT_ANN_THREAD_Y: k = 5; break;
        case TT_ANN_THREAD_Z: k = 6; break;
        case TT_ANN_VTHREAD: k = 7; break;
        default: break;
        }
        if (k)
            f[F_GPU + k] = (double)c->stack[d].extent;
    }
    /* buffer accesses: loads of the value, then the store itself */
    access acc[MAX_ACCESS];
    int nacc = 0;
    collect_loads(pool, s->value, acc, &nacc);
    bool merged = false;
    for (int i = 0; i < nacc; i++)
        if (acc[i].buf == s->buf) {
            acc[i].write = true;
            merged = true;
        }
    if (!merged && nacc < MAX_ACCESS)
        acc[nacc++] = (access){s->buf, s->index, false, true};
    /* one entry per buffer: its first access */
    slot slots[MAX_ACCESS];
    int ns = 0;
    for (int i = 0; i < nacc; i++) {
        bool dup = false;
        for (int j = 0; j < i && !dup; j++)
            dup = acc[j].buf == acc[i].buf;
        if (dup)
            continue;
        const tt_buffer *b = &c->p->bufs.data[acc[i].buf];
        double eb = tt_dtype_bytes(b->dtype);
        double uniq = touched(c, acc[i].index, 0);
        if (b->size > 0 && uniq > (double)b->size)
            uniq = (double)b->size;
        slot *sl = &slots[ns++];
        memset(sl, 0, sizeof(*sl));
        double *g = sl->f;
        g[acc[i].read && acc[i].write ? 2 : acc[i].write ? 1 : 0] = 1;
        double bytes = outer * eb, ubytes = uniq * eb;
        /* stride: the innermost loop whose variable the index uses */
        double stride = 0, reduce_ratio = 1;
        int d = c->depth - 1;
        for (; d >= 0; d--) {
            int64_t k;
            if (tt_expr_uses_var(pool, acc[i].index, c->stack[d].var)) {
                stride = tt__flat_coefficient(pool, acc[i].index, c->stack[d].var, &k)
                             ? (double)llabs(k)
                             : 1;
                break;
            }
            reduce_ratio *= (double)c->stack[d].extent;
        }
        double lines = outer / reduce_ratio * fmin(1.0, stride * eb / 64.0);
        lines = fmax(lines, 1.0);
        double ulines = fmax(ubytes / 64.0, 1.0);
        if (d != c->depth - 1)
            stride = 0;
        /* reuse: the innermost loop whose variable the index does not use */
        int rtype = 2;
        double rdis_iter = 0, rdis_bytes = 0, rct = 0;
        for (int l = c->depth - 1; l >= 0; l--) {
            if (tt_expr_uses_var(pool, acc[i].index, c->stack[l].var))
                continue;
            rtype = 0;
            rdis_iter = 1;
            for (int j = l + 1; j < c->depth; j++)
                rdis_iter *= (double)c->stack[j].extent;
            rdis_bytes = accesses_bytes(c, acc, nacc, l + 1);
            rct = (double)c->stack[l].extent;
            break;
        }
        double den = rct > 0.5 ? rct : 0.5;
        g[3] = bytes;
        g[4] = ubytes;
        g[5] = lines;
        g[6] = ulines;
        g[7 + rtype] = 1;
        g[10] = rdis_iter;
        g[11] = rdis_bytes;
        g[12] = rct;
        g[13] = bytes / den;
        g[14] = ubytes / den;
        g[15] = lines / den;
        g[16] = ulines / den;
        g[17] = stride;
        sl->lines = lines;
        sl->bytes = bytes;
    }
    qsort(slots, (size_t)ns, sizeof(slot), cmp_slot);
    for (int k = 0; k < ns && k < NSLOTS; k++)
        memcpy(&f[F_BUF + k * SLOT_SIZE], slots[k].f, sizeof(slots[k].f));
    /* arithmetic intensity: log2 flops against log2 bytes, loop by loop from the innermost */
    double cops[MAX_DEPTH + 1], mem[MAX_DEPTH + 1];
    int npt = 0;
    double cur = flops > 0 ? flops : 0;
    for (int l = c->depth - 1; l >= 0 && flops > 0; l--) {
        cur *= (double)c->stack[l].extent;
        cops[npt] = log2(cur);
        mem[npt++] = log2(fmax(accesses_bytes(c, acc, nacc, l), 1.0));
    }
    if (npt > 0) {
        int pt = 0;
        for (int i = 0; i < 10; i++) {
            double x = cops[npt - 1] * (i + 1) / 10.0;
            while (pt < npt - 1 && cops[pt] < x - 1e-4)
                pt++;
            double v;
            if (pt == 0 || cops[pt] == cops[pt - 1]) {
                v = cops[pt] / fmax(mem[pt], 1e-9);
            } else {
                double y0 = cops[pt - 1] / fmax(mem[pt - 1], 1e-9),
                       y1 = cops[pt] / fmax(mem[pt], 1e-9);
                v = y0 + (y1 - y0) / (cops[pt] - cops[pt - 1]) * (x - cops[pt - 1]);
            }
            f[F_ARITH + i] = v;
        }
    }
    /* allocation */
    const tt_buffer *sb = &c->p->bufs.data[s->buf];
    if (sb->param < 0 && c->alloc_depth[s->buf] >= 0) {
        double aouter = 1;
        for (int d = 0; d < c->alloc_depth[s->buf]; d++)
            aouter *= (double)c->stack[d].extent;
        double asize = (double)sb->size * tt_dtype_bytes(sb->dtype);
        f[F_ALLOC] = asize;
        f[F_ALLOC + 1] = asize * aouter;
        f[F_ALLOC + 2] = aouter;
        f[F_ALLOC + 3] = outer / aouter;
    }
    /* other */
    int32_t unroll = 0;
    for (int d = 0; d < c->depth; d++)
        if (c->stack[d].unroll > unroll)
            unroll = c->stack[d].unroll;
    f[F_OTHER] = outer;
    f[F_OTHER + 1] = c->depth;
    f[F_OTHER + 2] = unroll;
    tile_features(c, s, acc, nacc, f);
    /* scale, except one-hots and is_gpu */
    float *o = c->out + (size_t)row * TT_STORE_FEATURES;
    for (int i = 0; i < TT_STORE_FEATURES; i++)
        o[i] = raw_entry[i] ? (float)f[i] : slog(f[i]);
}

static void walk(ctx *c, tt_sid id)
{
    if (!id)
        return;
    const tt_stmt *s = &c->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR:
        if (c->depth < MAX_DEPTH) {
            c->stack[c->depth++] = (loop){s->var, s->extent, s->ann, s->unroll_max_step};
            walk(c, s->body);
            c->depth--;
        }
        break;
    case TT_STMT_SEQ:
        for (uint32_t i = 0; i < s->n; i++)
            walk(c, c->p->items.data[s->first + i]);
        break;
    case TT_STMT_STORE: store_features(c, s); break;
    case TT_STMT_ALLOC:
        if (s->buf < 1024)
            c->alloc_depth[s->buf] = c->depth;
        walk(c, s->body);
        break;
    case TT_STMT_IF:
        walk(c, s->body);
        walk(c, s->orelse);
        break;
    default: break;
    }
}

static bool has_gpu_loop(const tt_program *p)
{
    for (size_t i = 1; i < p->stmts.len; i++)
        if (p->stmts.data[i].kind == TT_STMT_FOR && tt_ann_is_gpu_bind(p->stmts.data[i].ann))
            return true;
    return false;
}

int tt_features_per_store(const tt_program *p, float *out, int max_rows)
{
    pthread_once(&names_once, init_names);
    ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->p = p;
    c->out = out;
    c->max_rows = out ? max_rows : 0;
    c->is_gpu = has_gpu_loop(p);
    for (int i = 0; i < 1024; i++) {
        c->row_of[i] = -1;
        c->alloc_depth[i] = -1;
    }
    walk(c, p->root);
    int n = c->nrows;
    free(c);
    return n;
}

/* ---- names ---- */

static void name_group(int *i, const char *prefix, const char *const *n, int k)
{
    for (int j = 0; j < k; j++)
        snprintf(names[(*i)++], sizeof(names[0]), "%s%s", prefix, n[j]);
}

static void init_names(void)
{
    static const char *const kinds[8] = {"none",          "inner_spatial", "middle_spatial",
                                         "outer_spatial", "inner_reduce",  "middle_reduce",
                                         "outer_reduce",  "mixed"};
    static const char *const ann3[3] = {"vec", "unroll", "parallel"};
    static const char *const gpu[8] = {"is_gpu",          "blockIdx_x_len",  "blockIdx_y_len",
                                       "blockIdx_z_len",  "threadIdx_x_len", "threadIdx_y_len",
                                       "threadIdx_z_len", "vthread_len"};
    static const char *const slot_names[SLOT_SIZE] = {"acc_type.read",
                                                      "acc_type.write",
                                                      "acc_type.read_write",
                                                      "bytes",
                                                      "unique_bytes",
                                                      "lines",
                                                      "unique_lines",
                                                      "reuse_type.loop_multiple_read",
                                                      "reuse_type.serial_multiple_read_write",
                                                      "reuse_type.no_reuse",
                                                      "reuse_dis_iter",
                                                      "reuse_dis_bytes",
                                                      "reuse_ct",
                                                      "bytes_d_reuse_ct",
                                                      "unique_bytes_d_reuse_ct",
                                                      "lines_d_reuse_ct",
                                                      "unique_lines_d_reuse_ct",
                                                      "stride"};
    static const char *const alloc[4] = {"alloc_size", "alloc_prod", "alloc_outer_prod",
                                         "alloc_inner_prod"};
    static const char *const other[3] = {"outer_prod", "num_loops", "auto_unroll_max_step"};
    static const char *const tile[TILE_END - F_TILE] = {"tile.inner",
                                                        "tile.inner_carried",
                                                        "tile.middle",
                                                        "tile.middle_carried",
                                                        "tile.outer",
                                                        "tile.outer_carried",
                                                        "tile.acc_vectors",
                                                        "tile.inner_x_carried",
                                                        "tile.middle_x_carried",
                                                        "tile.inner_x_middle",
                                                        "tile.carried_x_carried",
                                                        "tile.two_levels",
                                                        "tile.footprint.inner",
                                                        "tile.footprint.inner_carried",
                                                        "tile.footprint.middle",
                                                        "tile.footprint.middle_carried",
                                                        "tile.footprint.outer",
                                                        "tile.footprint.outer_carried",
                                                        "tile.input_elems",
                                                        "tile.input_per_output"};
    int i = 0;
    name_group(&i, "", compute_names, OP_COUNT);
    for (int k = 0; k < 3; k++) {
        snprintf(names[i++], sizeof(names[0]), "%s_num", ann3[k]);
        snprintf(names[i++], sizeof(names[0]), "%s_prod", ann3[k]);
        snprintf(names[i++], sizeof(names[0]), "%s_len", ann3[k]);
        for (int j = 0; j < 8; j++)
            snprintf(names[i++], sizeof(names[0]), "%s_type.%s", ann3[k], kinds[j]);
    }
    name_group(&i, "", gpu, 8);
    for (int s = 0; s < NSLOTS; s++) {
        char prefix[16];
        snprintf(prefix, sizeof(prefix), "B%d.", s);
        name_group(&i, prefix, slot_names, SLOT_SIZE);
    }
    for (int k = 0; k < 10; k++)
        snprintf(names[i++], sizeof(names[0]), "arith_intensity_curve_%d", k);
    name_group(&i, "", alloc, 4);
    name_group(&i, "", other, 3);
    name_group(&i, "", tile, TILE_END - F_TILE);
    for (int k = 0; k < TT_STORE_FEATURES; k++)
        raw_entry[k] = k == F_GPU || strstr(names[k], "_type.") != NULL;
}

const char *tt_feature_name(int i)
{
    pthread_once(&names_once, init_names);
    return i >= 0 && i < TT_STORE_FEATURES ? names[i] : NULL;
}
