#include "space_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "../base/hash.h"
#include "../codegen/codegen.h"
#include "access.h"

enum { K_CACHE_WRITE, K_PARALLEL, K_VECTORIZE, K_UNROLL }; /* after the tile knobs */

void tt__space_add_knob(tt_space *s, const char *name, const int64_t *c, int n)
{
    tt_knob *k = &s->knobs[s->nknobs++];
    snprintf(k->name, sizeof(k->name), "%.40s", name);
    k->n = n > TT_SPACE_MAX_CHOICES ? TT_SPACE_MAX_CHOICES : n;
    memcpy(k->choice, c, (size_t)k->n * sizeof(int64_t));
}

/* Divisors of `extent` up to `max`, ascending (tile sizes that divide evenly). */
static int divisors(int64_t extent, int64_t max, int64_t *out)
{
    int n = 0;
    for (int64_t d = 1; d <= extent && d <= max && n < TT_SPACE_MAX_CHOICES; d++)
        if (extent % d == 0)
            out[n++] = d;
    return n;
}

bool tt__space_inlinable(const tt_dag *d, int op, int main_op)
{
    const tt_op *o = &d->ops.data[op];
    return op != main_op && !o->is_placeholder && o->nreduce == 0 && tt_dag_has_readers(d, op) &&
           !tt_access_transform_into_reduction(d, op);
}

bool tt__space_feeds(const tt_dag *d, int op, int target)
{
    const tt_op *t = &d->ops.data[target];
    if (!t->is_placeholder && tt_expr_reads_tensor(&d->pool, t->body, (uint32_t)op))
        return true;
    for (size_t i = 0; i < d->ops.len; i++)
        if ((int)i != op && (int)i != target && !d->ops.data[i].is_placeholder &&
            tt_expr_reads_tensor(&d->pool, d->ops.data[i].body, (uint32_t)op) &&
            tt__space_feeds(d, (int)i, target))
            return true;
    return false;
}

tt_status tt__space_pick_main(tt_space *s, const tt_dag *dag, tt_errbuf *err)
{
    memset(s, 0, sizeof(*s));
    s->dag = dag;
    s->main_stage = -1;
    /* The main stage does the most work: the reduction with the largest iteration count. */
    double most = 0;
    for (size_t i = 0; i < dag->ops.len; i++) {
        const tt_op *op = &dag->ops.data[i];
        if (op->is_placeholder || op->nreduce == 0)
            continue;
        double work = (double)tt_op_numel(op);
        for (int k = 0; k < op->nreduce; k++)
            work *= (double)op->rextent[k];
        if (work >= most) {
            most = work;
            s->main_stage = (int)i;
        }
    }
    if (s->main_stage < 0)
        for (size_t i = 0; i < dag->ops.len; i++)
            if (!dag->ops.data[i].is_placeholder)
                s->main_stage = (int)i;
    if (s->main_stage < 0)
        return tt_err(err, TT_ERR_BAD_WORKLOAD, "the workload computes nothing");
    const tt_op *m = &dag->ops.data[s->main_stage];
    s->nspatial = m->ndim;
    s->nreduce = m->nreduce;
    return TT_OK;
}

/* Can register tiles of `rows` cover an axis of `extent`?  When they divide it; else when the
 * last tile, moved back to end with the axis (schedule/lower.c clamps a copy-out's last tile),
 * recomputes at most an eighth of it: 6 rows over 112 (OpenBLAS's 6x16 on AVX2, 2 rows again),
 * not 6 over 7. */
static bool rows_fit(int64_t extent, int64_t rows)
{
    if (extent % rows == 0)
        return true;
    int64_t tiles = (extent + rows - 1) / rows;
    return extent > rows && (tiles * rows - extent) * 8 <= extent;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The largest divisor of `n` that is at most `max`. */
static int64_t divisor_at_most(int64_t n, int64_t max)
{
    for (int64_t d = max < n ? max : n; d > 1; d--)
        if (n % d == 0)
            return d;
    return 1;
}

/* The cache tile along the row axis (`extent`): at most `mult` register tiles of `rows`, a
 * number that divides the axis's register tiles.  When the rows do not divide the axis, it is
 * shorter than the axis, so that only its last copy is moved back and every register tile in
 * it is whole. */
static int64_t cache_rows(int64_t extent, int64_t rows, int64_t mult)
{
    if (extent % rows == 0)
        return rows * divisor_at_most(extent / rows, mult);
    int64_t tiles = (extent + rows - 1) / rows;
    for (int64_t k = mult < tiles ? mult : tiles; k > 1; k--)
        if (tiles % k == 0 && rows * k < extent)
            return rows * k;
    return rows;
}

/* The vector registers a column tile of kind 0x8000 | width takes (micro_kernels). */
static int64_t partial_regs(int64_t kind, int64_t lanes)
{
    return ((kind & 0x7fff) + lanes - 1) / lanes;
}

/* The register tiles of the micro_kernel knob: [rows, vectors] pairs whose accumulators, one
 * vector of B per column vector and a broadcast of A fit the ISA's registers.  Rows divide the
 * row axis, or are the most that fit (rows_fit: the last tile moved back).  Columns (vectors x
 * lanes) divide the column axis, or fit it with the last tile moved back (ViT's 197 x 197
 * attention scores and SqueezeNet's 13 x 13 columns had no micro-kernel at all and ran at 5 and
 * 59 GFLOPS), or are one partial vector as wide as the largest divisor below the vector width,
 * or, where the vector divides no column count, the widest divisor between one and four vectors
 * made of whole vectors and a half (24 channels on AVX-512: 16 + 8 lanes a row, where 12 lanes
 * a row fed one multiply-add of three quarters of a vector per broadcast; MobileNet-V2's
 * 144 -> 24 projection at batch 8 ran in a third of the time).  None when the ISA has no
 * vectors. */
static int micro_kernels(const tt_vector_isa *isa, int64_t lanes, int64_t row_extent,
                         int64_t col_extent, int64_t *out)
{
    int n = 0;
    if (!isa || lanes < 2 || col_extent < 2)
        return n;
    int64_t partial = 0; /* a column tile narrower than one vector */
    if (col_extent % lanes)
        for (int64_t d = lanes - 1; d >= 2 && !partial; d--)
            if (col_extent % d == 0)
                partial = d;
    /* The column tiles: whole vectors that divide the axis; where the vector divides none,
     * whole vectors that fit it with the last tile moved back, then the partial vector. */
    int64_t kinds[6]; /* up to 4 whole-vector kinds, a partial one and a wide one */
    int nkinds = 0;
    for (int64_t v = 1; v <= 4; v++) {
        bool divides = col_extent % (v * lanes) == 0, moves = rows_fit(col_extent, v * lanes);
        /* Where the vector divides the columns but two vectors do not (1000, 72: an odd number
         * of vectors), two vectors with the last tile moved back too: one vector alone feeds a
         * multiply-add per broadcast, and SqueezeNet's 1x1 512->1000 ran 13 x 1 at 35 GFLOPS. */
        if (col_extent % lanes ? moves : divides || (v == 2 && moves))
            kinds[nkinds++] = v;
    }
    if (partial) {
        kinds[nkinds++] = 0x8000 | partial;
    }
    int64_t wide = 0; /* whole vectors and a half: 24 = 16 + 8 */
    for (int64_t w = lanes + lanes / 2; col_extent % lanes && w < 4 * lanes; w += lanes)
        if (col_extent % w == 0)
            wide = w;
    if (wide)
        kinds[nkinds++] = 0x8000 | wide;
    for (int kind = 0; kind < nkinds; kind++) {
        int64_t v = kinds[kind] & 0x8000 ? partial_regs(kinds[kind], lanes) : kinds[kind];
        int64_t most = 0; /* the most rows whose tile fits the registers */
        for (int64_t r = 1; r <= 16 && n < TT_SPACE_MAX_CHOICES; r++) {
            /* Accumulators and one B vector per column vector, plus a register for the
             * broadcast of A unless the ISA folds it into the FMA (AVX-512's {1toN}). */
            int64_t need = r * v + v + (isa->vector_bytes >= 64 ? 0 : 1);
            if (need > isa->vector_regs)
                break;
            most = r;
            if (row_extent % r != 0)
                continue;
            /* [rows, vectors] as a split knob; a partial vector is 0x8000 | its width. */
            out[n++] = (r << 16) | kinds[kind];
        }
        /* Rows that divide the axis, and the most rows the registers hold whose last tile moves
         * back (6 x 2 vectors over 112 on AVX2, where 4 is the most that divide): one more
         * choice, not every row count, which grew the space for tiles no better than their
         * divisors.  Where that many would recompute too much, as many tiles as they take,
         * balanced: over Inception-V3's 17 columns (a prime) 15 x 2 recomputes 13 rows and 9 x
         * 2 one, and without it the 1x7 convolutions of 128 and 160 channels had 1 x 2 and ran
         * at 100-126 GFLOPS; over 28, 16 rows balance to 14, which divides it (15 ran 1.3x
         * slower). */
        int64_t moved = most;
        if (moved > 0 && (row_extent % moved == 0 || !rows_fit(row_extent, moved)))
            moved = ceil_div(row_extent, ceil_div(row_extent, most));
        if (moved > 1 && row_extent % moved != 0 && rows_fit(row_extent, moved) &&
            n < TT_SPACE_MAX_CHOICES)
            out[n++] = (moved << 16) | kinds[kind];
    }
    return n;
}

/* A constant placeholder that the main op reads directly, each index one of its loop variables
 * (a transposed convolution's flipped kernel is not): its layout may follow the loops. */
static bool rewritable(const tt_dag *d, int op, int main_op)
{
    const tt_op *o = &d->ops.data[op];
    return o->is_placeholder && (o->attrs & TT_OP_ATTR_CONSTANT) &&
           tt_expr_reads_tensor_at_vars(&d->pool, d->ops.data[main_op].body, (uint32_t)op,
                                        o->shape);
}

/* ---- row kernels: softmax, layer normalisation, reductions over a row ----
 *
 * A row kernel computes every stage row by row: the main op reduces over one axis, the
 * innermost of what it reads, and every op's leading axes are the main op's (the rows), with at
 * most one axis more (the columns).  Its schedule is the row loop, parallel, with every stage
 * computed at it: the elementwise stages as vectors along the columns, each reduction split by
 * the vector width and factored into lanes (a vector accumulator; the last partial vector is a
 * masked load).  The tiling template treated such a reduction as a matrix product with the rows
 * as its columns: a vector of 16 rows gathered with the row's stride, and ViT-B/16's softmax over
 * 12 x 197 x 197 took 1.49 ms tuned, 15% of the network; as a row kernel 0.13 ms. */

typedef struct {
    const tt_dag *dag;
    const tt_op *op;
    int k; /* row axes */
    bool ok;
    int shared_reads; /* reads of a reduction by row axes that several rows share */
} row_reads_ctx;

/* Elements of the vector a matrix-vector row kernel reads for every row (x of y = W x): it stays
 * in the first-level cache while the weights stream past. */
#define ROW_VECTOR_MAX_ELEMENTS 16384

static bool is_var(const tt_expr_pool *p, tt_eid e, uint32_t var)
{
    const tt_expr *n = tt_expr_get(p, e);
    return n->kind == TT_EXPR_VAR && n->a == var;
}

/* A read of a row kernel: the row axes first, then at most one more index, which a reduction's
 * reads index by its reduce axis; or a constant per column (a layer norm's scale), which no row
 * axis indexes. */
static void row_read(void *vctx, tt_eid id)
{
    row_reads_ctx *c = vctx;
    const tt_expr_pool *p = &c->dag->pool;
    const tt_expr *r = tt_expr_get(p, id);
    const tt_op *t = &c->dag->ops.data[r->a];
    const tt_eid *ix = &p->args.data[r->b];
    bool aligned = r->n == c->k || r->n == c->k + 1;
    for (int d = 0; aligned && d < c->k; d++)
        aligned = is_var(p, ix[d], c->op->axis[d]) ||
                  (c->op->shape[d] == 1 && tt_expr_get(p, ix[d])->kind == TT_EXPR_INT);
    if (aligned && c->op->nreduce > 0)
        aligned = r->n == c->k + 1 && is_var(p, ix[c->k], c->op->raxis[0]);
    if (aligned)
        return;
    /* A matrix-vector product, y[0, n] = sum_k W[n, k] * x[0, k] + b[n] (a classifier's head at
     * batch 1): each read indexes row axes, each by its variable, and then, in the reduction,
     * the reduce axis, so that it reads along a row.  The weights are read by one row each
     * (their elements used once); the vector by every row, so it must be small.  As a tiling of
     * the 1000 outputs the weights were gathered with the row's stride: ShuffleNet-V2's head,
     * 1024 -> 1000, took 1.69 ms, as a row kernel 0.115 ms (weights from memory, Zen 4). */
    int n_rows = r->n - (c->op->nreduce > 0), used = 0;
    bool by_rows = n_rows >= 0 && n_rows <= c->k &&
                   (c->op->nreduce == 0 || is_var(p, ix[r->n - 1], c->op->raxis[0]));
    for (int d = 0; by_rows && d < n_rows; d++) {
        const tt_expr *x = tt_expr_get(p, ix[d]);
        int axis = -1;
        for (int a = 0; x->kind == TT_EXPR_VAR && a < c->k; a++)
            if (x->a == c->op->axis[a])
                axis = a;
        by_rows = axis >= 0 && !(used & (1 << axis));
        used |= axis >= 0 ? 1 << axis : 0;
    }
    if (by_rows) {
        int64_t rows_sharing = 1, elements = 1;
        for (int a = 0; a < c->k; a++)
            rows_sharing *= used & (1 << a) ? 1 : c->op->shape[a];
        for (int d = 0; d < t->ndim; d++)
            elements *= t->shape[d];
        c->shared_reads += c->op->nreduce > 0 && rows_sharing > 1;
        if (c->op->nreduce == 0 || rows_sharing == 1 || elements <= ROW_VECTOR_MAX_ELEMENTS)
            return;
    }
    bool per_column = t->is_placeholder && r->n <= 1;
    for (int d = 0; per_column && d < c->k; d++)
        per_column = !tt_expr_uses_var(p, r->n ? ix[0] : 0, c->op->axis[d]);
    if (!per_column)
        c->ok = false;
}

static bool row_kernel(const tt_dag *dag, int main_op)
{
    const tt_op *m = &dag->ops.data[main_op];
    if (m->nreduce != 1 || m->ndim < 1)
        return false;
    int k = m->ndim, roots = 0;
    for (size_t i = 0; i < dag->ops.len; i++) {
        const tt_op *o = &dag->ops.data[i];
        if (o->is_placeholder)
            continue;
        roots += !tt_dag_has_readers(dag, (int)i);
        if (o->ndim != k && o->ndim != k + 1)
            return false;
        for (int d = 0; d < k; d++)
            if (o->shape[d] != m->shape[d])
                return false;
        if (o->nreduce > 1 || (o->nreduce == 1 && o->ndim != k))
            return false;
        row_reads_ctx c = {dag, o, k, true, 0};
        tt_expr_visit_reads(&dag->pool, o->body, row_read, &c);
        /* One vector shared by the rows: two shared operands are a matrix product to tile. */
        if (!c.ok || c.shared_reads > 1)
            return false;
    }
    return roots == 1;
}

tt_status tt_space_init(tt_space *s, const tt_dag *dag, int cores, const tt_vector_isa *isa,
                        tt_errbuf *err)
{
    tt_status r = tt__space_pick_main(s, dag, err);
    if (r)
        return r;
    const tt_op *m = &dag->ops.data[s->main_stage];
    s->nspatial = m->ndim;
    s->nreduce = m->nreduce;
    if (m->ndim + 11 > TT_SPACE_MAX_KNOBS)
        return tt_err(err, TT_ERR_UNSUPPORTED, "op '%s' has too many axes for the tiling space",
                      m->name);
    int64_t c[TT_SPACE_MAX_CHOICES], mks[TT_SPACE_MAX_CHOICES];
    int esize = tt_dtype_bytes(m->dtype);
    s->vector_lanes = isa && esize > 0 ? isa->vector_bytes / esize : 0;
    int nmk = m->nreduce > 0
                  ? micro_kernels(isa, s->vector_lanes, m->ndim > 1 ? m->shape[m->ndim - 2] : 1,
                                  m->shape[m->ndim - 1], mks)
                  : 0;
    s->micro = nmk > 0;
    for (int d = 0; d < m->ndim; d++) {
        char name[40];
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->axis[d]));
        static const int64_t mult[] = {1, 2, 4, 8, 16};
        if (s->micro && d >= m->ndim - 2) /* register tiles per cache tile */
            tt__space_add_knob(s, name, mult, 5);
        else
            tt__space_add_knob(s, name, c, divisors(m->shape[d], 64, c));
    }
    if (m->nreduce > 0) {
        char name[40];
        snprintf(name, sizeof(name), "tile_%s", tt_var_name(&dag->pool, m->raxis[m->nreduce - 1]));
        /* Longer inner reductions amortise a micro-kernel's accumulator loads and stores. */
        tt__space_add_knob(s, name, c, divisors(m->rextent[m->nreduce - 1], isa ? 256 : 64, c));
        int64_t cw[2] = {0, 1};
        tt__space_add_knob(s, "cache_write", cw, 2);
        /* Loop order inside a tile: spatial rows outside the inner reduction, or inside it. */
        int64_t order[2] = {0, 1};
        tt__space_add_knob(s, "reduce_inner_first", order, 2);
        /* Pack the inputs' tiles into local buffers at each step of the outer reduction. */
        int64_t pack[2] = {0, 1};
        tt__space_add_knob(s, "pack_inputs", pack, 2);
    } else {
        int64_t one[1] = {0};
        tt__space_add_knob(s, "tile_none", (int64_t[]){1}, 1);
        tt__space_add_knob(s, "cache_write", one, 1);
        tt__space_add_knob(s, "reduce_inner_first", one, 1);
        tt__space_add_knob(s, "pack_inputs", one, 1);
    }
    int64_t par[2] = {1, 0}; /* parallel first: it is what users want on a multi-core CPU */
    tt__space_add_knob(s, "parallel", par, cores > 1 ? 2 : 1);
    /* Scalar code only without vectors: with them it ran 2.8-32x slower than the best vectorised
     * config on each of 33 workloads, and took 4-8x as long to compile (docs/tuning.md). */
    int64_t vec[2] = {1, 0};
    tt__space_add_knob(s, "vectorize", vec, s->vector_lanes >= 2 ? 1 : 2);
    int64_t unroll[4] = {0, 16, 64, 512};
    tt__space_add_knob(s, "auto_unroll_max_step", unroll, 4);
    if (!nmk)
        mks[nmk++] = 0;
    tt__space_add_knob(s, "micro_kernel", mks, nmk);
    s->knobs[s->nknobs - 1].parts = 2;
    bool producers = false;
    for (size_t i = 0; i < dag->ops.len; i++)
        producers |= tt__space_inlinable(dag, (int)i, s->main_stage) &&
                     tt__space_feeds(dag, (int)i, s->main_stage);
    int64_t inl[2] = {1, 0};
    tt__space_add_knob(s, "inline_producers", inl, producers && isa ? 2 : 1);
    /* Constant inputs (weights) the main op reads: pass them in the layout its loops read. */
    bool constants = false;
    for (size_t i = 0; i < dag->ops.len; i++)
        constants |= rewritable(dag, (int)i, s->main_stage);
    int64_t lr[2] = {1, 0};
    tt__space_add_knob(s, "layout_rewrite", lr, constants && m->nreduce > 0 ? 2 : 1);
    /* The window's column taps (the reduce axis before the inner one: a convolution's kw)
     * inside the inner reduction, unrolled over the register tile: a padded tap of a row is then
     * known when the kernel is built and costs nothing, not a branch per row and step. */
    int64_t taps[2] = {0, 1};
    if (s->micro && m->nreduce >= 2) /* only where offered: other spaces keep their identity */
        tt__space_add_knob(s, "taps_inner", taps, 2);
    /* Row kernels (above), also offered only where they apply; first, so that it is the
     * untuned schedule. */
    int64_t rows[2] = {1, 0};
    if (isa && s->vector_lanes >= 2 && row_kernel(dag, s->main_stage))
        tt__space_add_knob(s, "row_kernel", rows, 2);
    s->size = 1;
    for (int k = 0; k < s->nknobs; k++)
        s->size *= (uint64_t)s->knobs[k].n;
    return TT_OK;
}

void tt_space_decode(const tt_space *s, uint64_t index, int *pos)
{
    for (int k = 0; k < s->nknobs; k++) {
        pos[k] = (int)(index % (uint64_t)s->knobs[k].n);
        index /= (uint64_t)s->knobs[k].n;
    }
}

int tt_space_split_lengths(const tt_space *s, int k, int pos, int64_t *out)
{
    const tt_knob *kn = &s->knobs[k];
    int64_t v = kn->choice[pos];
    for (int i = kn->parts - 1; i >= 0; i--) {
        out[i] = v & 0xffff;
        v >>= 16;
    }
    return kn->parts;
}

double tt_space_knob_feature(const tt_space *s, int k, int pos)
{
    const tt_knob *kn = &s->knobs[k];
    if (!kn->parts)
        return log2(1.0 + (double)kn->choice[pos]);
    int64_t len[4];
    int n = tt_space_split_lengths(s, k, pos, len);
    double f = 0;
    for (int i = 0; i < n; i++)
        f = f * 8 + log2((double)len[i]);
    return f;
}

/* The index of the knob called `name`, or -1 (taps_inner and row_kernel are offered only where
 * they apply). */
static int knob_named(const tt_space *s, const char *name)
{
    for (int k = 0; k < s->nknobs; k++)
        if (!strcmp(s->knobs[k].name, name))
            return k;
    return -1;
}

typedef struct {
    const tt_expr_pool *p;
    uint32_t var;
    int64_t step;
} step_ctx;

static bool scaled_var(void *vctx, tt_eid e)
{
    step_ctx *c = vctx;
    const tt_expr *n = tt_expr_get(c->p, e);
    if (n->kind != TT_EXPR_MUL)
        return false;
    const tt_expr *a = tt_expr_get(c->p, n->a), *b = tt_expr_get(c->p, n->b);
    if (b->kind == TT_EXPR_VAR && a->kind == TT_EXPR_INT) {
        const tt_expr *t = a;
        a = b, b = t;
    }
    if (a->kind != TT_EXPR_VAR || a->a != c->var || b->kind != TT_EXPR_INT)
        return false;
    c->step = b->imm.i < 0 ? -b->imm.i : b->imm.i;
    return true;
}

/* How far apart in its input the main op's taps along reduce variable `var` are: the factor it
 * is read with (a convolution's dilation times the taps' own step), 1 where it is read as is. */
static int64_t taps_step(const tt_space *s, uint32_t var)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    step_ctx c = {&s->dag->pool, var, 1};
    tt_expr_any(&s->dag->pool, m->body, scaled_var, &c);
    return c.step;
}

#define ROOT_PARALLEL_MIN 64 /* iterations of a root stage's parallel loop, when it has them */

typedef struct {
    const tt_dag *dag;
    uint32_t last; /* the reading op's innermost axis */
    bool ok;
} in_order_ctx;

/* A variable other than the reader's innermost axis, or a read (an index computed from data). */
static bool other_axis(void *vctx, tt_eid e)
{
    const in_order_ctx *c = vctx;
    const tt_expr *n = tt_expr_get(&c->dag->pool, e);
    return (n->kind == TT_EXPR_VAR && n->a != c->last) || n->kind == TT_EXPR_READ ||
           n->kind == TT_EXPR_LOAD;
}

static void read_in_order(void *vctx, tt_eid e)
{
    in_order_ctx *c = vctx;
    const tt_expr_pool *p = &c->dag->pool;
    const tt_expr *n = tt_expr_get(p, e);
    if (n->n == 0)
        return;
    tt_eid ix = p->args.data[n->b + n->n - 1];
    const tt_op *x = &c->dag->ops.data[n->a];
    /* its innermost index: the reader's innermost axis plus a constant, or a constant (a
     * per-channel value, a broadcast) */
    if (tt_expr_is_const_int(p, ix, NULL) || x->shape[x->ndim - 1] == 1)
        return;
    c->ok = c->ok && tt_expr_coef(p, ix, c->last) == 1 && !tt_expr_any(p, ix, other_axis, c);
}

/* Data movement and elementwise work (no reduction) that reads every tensor's innermost
 * dimension along its own: a copy, a concatenation, a slice, a bias and activation; a transpose
 * of the innermost dimension is not. */
static bool rows_in_order(const tt_space *s)
{
    if (s->nreduce != 0 || s->micro || s->gpu)
        return false;
    in_order_ctx c = {s->dag, 0, true};
    for (size_t i = 0; i < s->dag->ops.len && c.ok; i++) {
        const tt_op *o = &s->dag->ops.data[i];
        if (o->is_placeholder || o->ndim == 0)
            continue;
        if (o->nreduce)
            return false;
        c.last = o->axis[o->ndim - 1];
        tt_expr_visit_reads(&s->dag->pool, o->body, read_in_order, &c);
    }
    return c.ok;
}

/* The default tile of spatial axis k of rows in order (rows_in_order): the leading axes split
 * into the parallel loop until it has ROOT_PARALLEL_MIN iterations, the rest whole in the inner
 * loops (no index arithmetic in them), the innermost one machine vector, or where that does not
 * divide it as long a vector as the knob offers (the largest choice at most the tile returned:
 * a divisor).  TVM's
 * injective schedule, but for the parallel loop's length: tiles of 8 rows by the largest
 * divisor of the channels up to 16 put the batch in the inner loops, and a concatenation of 116
 * channels ran 4 lanes wide, 8x slower; every axis in the parallel loop made Swin's window
 * partition compute five divisions a row of 48 floats, 2.5x slower. */
static int64_t in_order_tile(const tt_space *s, int k)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    /* one machine vector where they divide the axis: a concatenation's guards agree across a
     * vector of 16 channels, not of 64 (DenseNet's inputs of 32 channels: 1.24x slower) */
    if (k == s->nspatial - 1)
        return s->vector_lanes > 0 && m->shape[k] % s->vector_lanes == 0 ? s->vector_lanes : 64;
    int64_t outer = 1; /* iterations of the parallel loop from the axes before k */
    for (int d = 0; d < k; d++)
        outer *= m->shape[d] / in_order_tile(s, d);
    if (outer >= ROOT_PARALLEL_MIN)
        return m->shape[k];
    int64_t need = (ROOT_PARALLEL_MIN + outer - 1) / outer; /* iterations still wanted */
    return m->shape[k] / need > 1 ? m->shape[k] / need : 1;
}

/* Whether the main stage is data movement (no reduction) whose innermost axis is shorter than a
 * vector and which does not walk rows in order: a transpose of a pixel's channels, [.., 2, 58]
 * to [.., 58, 2] (ShuffleNet's shuffle).  Its default tiles the last axis whole and the one
 * before so that the two, fused (apply), make a vector. */
static bool short_last_axis(const tt_space *s)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    return s->nreduce == 0 && !s->micro && !s->gpu && s->nspatial >= 2 && s->vector_lanes > 1 &&
           m->shape[s->nspatial - 1] < s->vector_lanes;
}

/* short_last_axis's tiles: the last axis whole, the one before the smallest divisor of it that
 * makes a vector with it (up to 64, the largest the knob offers). */
static int64_t short_last_tile(const tt_space *s, int k)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    int64_t last = m->shape[s->nspatial - 1];
    if (k == s->nspatial - 1)
        return last;
    int64_t need = (s->vector_lanes + last - 1) / last;
    for (int64_t d = need; d <= m->shape[k] && d <= 64; d++)
        if (m->shape[k] % d == 0)
            return d;
    return 64;
}

uint64_t tt_space_default_index(const tt_space *s, const tt_vector_isa *isa)
{
    bool in_order = rows_in_order(s), short_last = !in_order && short_last_axis(s);
    uint64_t index = 0, mul = 1;
    for (int k = 0; k < s->nknobs; k++) {
        const tt_knob *kn = &s->knobs[k];
        int64_t want = 0;
        if (!strncmp(kn->name, "tile_", 5))
            want = s->micro && k >= s->nspatial - 2 && k < s->nspatial
                       ? (k == s->nspatial - 1 ? 2 : 1)
                   : in_order && k < s->nspatial ? in_order_tile(s, k)
                   : short_last && k >= s->nspatial - 2 && k < s->nspatial
                       ? short_last_tile(s, k)
                       : (k == s->nspatial - 1 ? 16 : 8);
        else if (!strcmp(kn->name, "cache_write") || !strcmp(kn->name, "parallel") ||
                 !strcmp(kn->name, "vectorize") || !strcmp(kn->name, "inline_producers") ||
                 !strcmp(kn->name, "layout_rewrite") || !strcmp(kn->name, "row_kernel"))
            want = 1;
        else if (!strcmp(kn->name, "auto_unroll_max_step"))
            want = 16;
        else if (!strcmp(kn->name, "micro_kernel"))
            want = ((int64_t)(isa && isa->vector_regs >= 32 ? 8 : 6) << 16) | 2;
        int pos = 0;
        for (int c = 0; c < kn->n; c++)
            if (kn->choice[c] <= want && kn->choice[c] >= kn->choice[pos])
                pos = c;
        index += (uint64_t)pos * mul;
        mul *= (uint64_t)kn->n;
    }
    return index;
}

/* How far apart two choices of a knob are: log distance of the value, or of each part. */
static double choice_distance(const tt_knob *k, int64_t a, int64_t b)
{
    if (!k->parts)
        return fabs(log2(1.0 + (double)a) - log2(1.0 + (double)b));
    double d = 0;
    for (int i = 0; i < k->parts; i++, a >>= 16, b >>= 16)
        d += fabs(log2(1.0 + (double)(a & 0xffff)) - log2(1.0 + (double)(b & 0xffff)));
    return d;
}

uint64_t tt_space_nearest_index(const tt_space *s, const tt_space *from, uint64_t index)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(from, index % from->size, pos);
    uint64_t out = 0, mul = 1;
    for (int k = 0; k < s->nknobs; k++) {
        const tt_knob *kn = &s->knobs[k];
        int best = 0;
        for (int f = 0; f < from->nknobs; f++) {
            if (strcmp(from->knobs[f].name, kn->name) || from->knobs[f].parts != kn->parts)
                continue;
            int64_t v = from->knobs[f].choice[pos[f]];
            for (int c = 1; c < kn->n; c++)
                if (choice_distance(kn, kn->choice[c], v) <
                    choice_distance(kn, kn->choice[best], v))
                    best = c;
        }
        out += (uint64_t)best * mul;
        mul *= (uint64_t)kn->n;
    }
    return out;
}

void tt_space_describe(const tt_space *s, uint64_t index, char *buf, size_t n)
{
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, index, pos);
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < s->nknobs && len < n; k++) {
        if (s->knobs[k].n <= 1)
            continue;
        if (s->knobs[k].parts) {
            int64_t l[4];
            int np = tt_space_split_lengths(s, k, pos[k], l);
            len +=
                (size_t)snprintf(buf + len, n - len, "%s%s=[-1", len ? " " : "", s->knobs[k].name);
            for (int i = 0; i < np && len < n; i++)
                len += (size_t)snprintf(buf + len, n - len, ",%lld", (long long)l[i]);
            if (len < n)
                len += (size_t)snprintf(buf + len, n - len, "]");
            continue;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%lld", len ? " " : "", s->knobs[k].name,
                                (long long)s->knobs[k].choice[pos[k]]);
    }
}

/* Splits the spatial axes 0..n-1 (at iterator positions 0..n-1) by `tile` and orders the stage as
 * [outer spatial][mid][inner spatial but the last][tail][last inner spatial].  mid and tail index
 * the iterators that follow the spatial ones (the reduce iterators), counted from 0. */
static tt_status tile_stage(tt_state *st, int stage, int n, const int64_t *tile, const int *mid,
                            int nmid, const int *tail, int ntail, bool tail_first, tt_errbuf *err)
{
    /* Split from the last axis back, so earlier positions do not move. */
    for (int d = n - 1; d >= 0; d--) {
        tt_status r = tt_sched_split(st, stage, d, &tile[d], 1, true, err);
        if (r)
            return r;
    }
    int order[TT_MAX_ITERS], k = 0;
    for (int d = 0; d < n; d++)
        order[k++] = 2 * d;
    /* After the n splits the reduce iterators start at position 2n. */
    for (int i = 0; i < nmid; i++)
        order[k++] = 2 * n + mid[i];
    for (int i = 0; tail_first && i < ntail; i++)
        order[k++] = 2 * n + tail[i];
    for (int d = 0; d < n - 1; d++)
        order[k++] = 2 * d + 1;
    for (int i = 0; !tail_first && i < ntail; i++)
        order[k++] = 2 * n + tail[i];
    order[k++] = 2 * (n - 1) + 1;
    return tt_sched_reorder(st, stage, order, k, err);
}

/* Parallel outer loops (fused) and a vector innermost loop for a stage laid out by tile_stage. */
static tt_status finish_stage(tt_state *st, int stage, int nouter, bool parallel, bool vectorize,
                              int unroll, int64_t vector_extent, tt_errbuf *err)
{
    tt_status r;
    if (parallel && nouter > 0) {
        int ids[TT_MAX_ITERS];
        for (int i = 0; i < nouter; i++)
            ids[i] = i;
        if (nouter > 1 && (r = tt_sched_fuse(st, stage, ids, nouter, err)))
            return r;
        if (st->stages.data[stage].iters[0].extent > 1 &&
            (r = tt_sched_annotate(st, stage, 0, TT_ANN_PARALLEL, err)))
            return r;
    }
    const tt_stage *sg = &st->stages.data[stage];
    const tt_iter *last = &sg->iters[sg->niters - 1];
    /* Under compute_at the loop runs over the tile, not the static extent: the caller knows.
     * Longer than 64 lanes, the code generator makes it a loop over vectors: EfficientNet's
     * epilogues over 96..1152 channels (bias, SiLU) were scalar loops, 7 ms of a 1x1
     * convolution's 7.4. */
    int64_t ext = vector_extent ? vector_extent : last->extent;
    if (vectorize && last->kind == TT_ITER_SPATIAL && ext > 1 && (ext <= 64 || ext % 8 == 0) &&
        last->ann == TT_ANN_NONE &&
        (r = tt_sched_annotate(st, stage, sg->niters - 1, TT_ANN_VECTORIZE, err)))
        return r;
    if (unroll > 0) {
        char pragma[48];
        snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d", unroll);
        if ((r = tt_sched_pragma(st, stage, 0, pragma, err)))
            return r;
    }
    return TT_OK;
}

/* The register tile of micro_kernel choice `mk` for the space's main stage. */
static void register_tile(const tt_space *s, int64_t mk, int64_t *rows, int64_t *cols)
{
    int64_t v = mk & 0xffff;
    *rows = (mk >> 16) & 0xffff;
    *cols = v & 0x8000 ? (v & 0x7fff) : v * s->vector_lanes;
}

/* Micro-kernel mode: the row and column tile knobs count register tiles; turn them into cache
 * tile lengths (cache_rows, for columns too: a moved-back last tile is a whole cache tile). */
static void micro_tiles(const tt_space *s, int64_t mk, int64_t *tile)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    int n = s->nspatial;
    int64_t rows, cols;
    register_tile(s, mk, &rows, &cols);
    int64_t reg[2] = {rows, cols};
    for (int a = 0; a < 2; a++) {
        int d = n - 2 + a;
        if (d < 0)
            continue;
        tile[d] = cache_rows(m->shape[d], reg[a], tile[d]);
    }
}

uint64_t tt_space_encode(const tt_space *s, const int *pos)
{
    uint64_t index = 0, mul = 1;
    for (int k = 0; k < s->nknobs; k++) {
        index += (uint64_t)pos[k] * mul;
        mul *= (uint64_t)s->knobs[k].n;
    }
    return index;
}

/* The position of choice `want` in knob `k` (-1: not offered). */
static int choice_pos(const tt_knob *k, int64_t want)
{
    for (int c = 0; c < k->n; c++)
        if (k->choice[c] == want)
            return c;
    return -1;
}

/* Accumulators that hide the multiply-add's latency: 4 cycles on 2 pipes (Zen, Skylake-X). */
enum { MIN_ACCUMULATORS = 8 };

/* The register tile the blocked config takes, as a position of the micro_kernel knob in *pos;
 * rows divide the row axis, and the accumulators, the B vectors (one per column vector and
 * tap) and the broadcast fit the registers.  Two vectors by the most rows (the tile OpenBLAS
 * and oneDNN use), unless that leaves fewer than MIN_ACCUMULATORS: then the most multiply-adds
 * per load (rows x vectors over rows + vectors), then the most accumulators.  Two vectors read
 * 1 row over MobileNet's 7x7 layers on AVX2 (7 x 2 does not fit) and 2 over 14x14, a load per
 * multiply-add: 7 x 1 and 2 x 4 ran their 1x1 convolutions 1.3-2.2x faster in the untuned
 * network (docs/tuning.md).  Rows with a moved-back last tile (rows_fit) only where no tile
 * whose rows divide the axis has MIN_ACCUMULATORS (ViT's 197 tokens: 1 x 4 divides, 6 x 2
 * moved back ran its matmuls 2-3x faster), and with a register spare: with AVX-512's 32
 * registers the most rows, 15 x 2 over 1024, leave none and ran at 0.58 of 8 x 2.  Returns the
 * tile's score (multiply-adds per load; -1: none fits). */
static double register_tile_pick(const tt_space *s, const tt_vector_isa *isa, int64_t taps,
                                 int *pos)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    const tt_knob *mk = &s->knobs[s->nspatial + 7];
    int64_t extent = m->shape[s->nspatial - 2];
    int spare = isa->vector_bytes >= 64 ? 0 : 1; /* AVX-512 folds the broadcast into the FMA */
    double best = -1, two = -1, moved = -1;
    int64_t two_rows = 0, dividing_accumulators = 0, moved_accumulators = 0;
    int best_pos = -1, two_pos = -1, moved_pos = -1;
    /* Two passes: the dividing tiles, then those whose last tile moves back. */
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < mk->n; c++) {
            int64_t r = mk->choice[c] >> 16, v = mk->choice[c] & 0xffff;
            double vectors = (double)v; /* of the vector width, a partial one counted in part */
            if (v & 0x8000) {
                vectors = (double)(v & 0x7fff) / (double)s->vector_lanes;
                v = partial_regs(v, s->vector_lanes);
                /* A half vector's accumulators: no more than two machine vectors' worth (24
                 * columns by 14 rows, 28 accumulators, ran at 0.4-0.7 of 8 rows). */
                if (vectors > 1 && r * v > 2 * MIN_ACCUMULATORS)
                    continue;
            }
            if (r < 1 || v < 1 || r * v + taps * v + spare > isa->vector_regs ||
                (extent % r != 0) != (pass == 1))
                continue;
            double score = (double)r * vectors / ((double)r + vectors) + (double)r * vectors * 1e-3;
            if (pass == 1) {
                /* rows whose last tile moves back (offered only where that recomputes
                 * little), with a register spare: the fallback for a row axis no good tile
                 * divides.  Of those, the most accumulators: over Inception-V3's 17 columns
                 * 9 x 3 ran its 1x7 convolutions 1.1x faster than 6 x 4, which does more
                 * multiply-adds per load.  A balanced tile, fewer rows than the registers
                 * hold (micro_kernels), only where no dividing tile has MIN_ACCUMULATORS: 5 x 2
                 * over 14 on AVX2 ran a 1x1 convolution 1.15x slower than 2 x 4. */
                bool balanced = r < 16 && (r + 1) * v + v + spare <= isa->vector_regs;
                if (r * v + taps * v + spare < isa->vector_regs && r * v >= MIN_ACCUMULATORS &&
                    (!balanced || dividing_accumulators < MIN_ACCUMULATORS) &&
                    (r * v > moved_accumulators ||
                     (r * v == moved_accumulators && score > moved))) {
                    moved = score;
                    moved_pos = c;
                    moved_accumulators = r * v;
                }
                continue;
            }
            if (r * v > dividing_accumulators)
                dividing_accumulators = r * v;
            if (score > best) {
                best = score;
                best_pos = c;
            }
            if ((mk->choice[c] & 0xffff) == 2 && r > two_rows) {
                two = score;
                two_rows = r;
                two_pos = c;
            }
        }
    if (two_pos >= 0 && two_rows * 2 >= MIN_ACCUMULATORS) {
        *pos = two_pos;
        return two;
    }
    if (moved > best) { /* ViT's 197 tokens, a prime: 6 x 2 (the last tile moved back by 1) */
        *pos = moved_pos;
        return moved;
    }
    *pos = best_pos;
    return best;
}

uint64_t tt_space_blocked_index(const tt_space *s, const tt_vector_isa *isa,
                                const tt_cpu_caches *caches, int cores, bool inline_producers,
                                bool taps_inner)
{
    uint64_t base = tt_space_default_index(s, isa);
    if (!s->micro || s->gpu || s->nreduce == 0 || s->nspatial < 2)
        return base;
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    int n = s->nspatial, pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, base, pos);
    /* The window's column taps inside the register tile, where offered and where their B
     * vectors, live with the accumulators, leave a tile as good as without them (3 x 3
     * convolutions over 14x14 on AVX2 kept 2 x 2 accumulators with them, 2 x 4 without, which
     * ran ResNet-18's in 0.8 of the time), or a tile of 8 vectors or more that does at least
     * half the multiply-adds per load (Inception-V3's 1x7 convolutions over 17 columns: 9 x 1
     * with their 7 taps against 9 x 3 without ran 1.05-1.25x slower). */
    const tt_knob *mk = &s->knobs[n + 7];
    int tile_pos = -1;
    double score = register_tile_pick(s, isa, 1, &tile_pos);
    int taps_knob = knob_named(s, "taps_inner");
    if (taps_inner && taps_knob >= 0) {
        int with_pos = -1;
        int64_t taps = m->rextent[s->nreduce - 2];
        double with = register_tile_pick(s, isa, taps, &with_pos);
        int64_t rows, cols;
        if (with_pos >= 0)
            register_tile(s, mk->choice[with_pos], &rows, &cols);
        /* Taps at least a tile's rows apart (DeepLabV3's atrous convolutions, dilated by 12 over
         * regions 12 columns wide) read rows x taps input rows, each a channel row apart, not
         * rows + taps - 1: 12 x 2 with its 2 taps inside ran 1.47x slower than without. */
        bool apart = with_pos >= 0 && taps_step(s, m->raxis[s->nreduce - 2]) >= rows;
        if (with_pos >= 0 && !apart &&
            (with >= score ||
             (rows * cols >= MIN_ACCUMULATORS * s->vector_lanes && 2 * with >= score))) {
            pos[taps_knob] = 1;
            tile_pos = with_pos;
        }
    }
    if (tile_pos >= 0)
        pos[n + 7] = tile_pos;
    int64_t rows, cols, esize = tt_dtype_bytes(m->dtype);
    register_tile(s, mk->choice[pos[n + 7]], &rows, &cols);
    if (esize <= 0 || rows < 1 || cols < 1)
        return base;
    /* Inner reduction: its slice of B (inner reduction x columns) fills half of L1. */
    const tt_knob *kr = &s->knobs[n];
    pos[n] = 0;
    for (int c = 0; c < kr->n; c++)
        if (kr->choice[c] * cols * esize <= caches->l1d_bytes / 2 &&
            kr->choice[c] > kr->choice[pos[n]])
            pos[n] = c;
    int64_t rtile = kr->choice[pos[n]];
    /* Rows of the cache tile: its accumulators fit half of L1 and its slice of A half of L2, so
     * each slice of B is reused across all of them. */
    int64_t budget = caches->l1d_bytes / 2 / (cols * esize);
    if (budget > caches->l2_bytes / 2 / (rtile * esize))
        budget = caches->l2_bytes / 2 / (rtile * esize);
    int one_tile = choice_pos(&s->knobs[n - 1], 1); /* one register tile of columns */
    pos[n - 1] = one_tile < 0 ? 0 : one_tile;
    int64_t tile[TT_MAX_DIMS];
    for (;;) {
        /* The row axis in register tiles, then each outer axis, as long as the budget lasts;
         * but the outermost (the batch, the heads) only where every axis inside it is whole in
         * the tile.  Else the tile's rows are strips of several images, apart in memory: 8
         * images of 16 rows of MobileNet-V3's 14x14 1x1 convolutions at batch 8 (13 tiles of
         * 16, the last moved back, so the rows stop at one tile) ran 1.1-1.2x slower than one,
         * and ViT's 12 heads of 16 of 197 rows 1.48x. */
        int64_t inner = 1;
        bool whole = true; /* every axis inside d in the tile whole */
        for (int d = n - 2; d >= 0; d--) {
            const tt_knob *k = &s->knobs[d];
            int best = 0;
            int64_t best_len = 0;
            for (int c = 0; c < k->n; c++) {
                int64_t len = k->choice[c]; /* the smallest choice when none fits */
                if (d == n - 2)
                    len = cache_rows(m->shape[d], rows, len);
                if (c > 0 && d == 0 && n >= 3 && !whole && len > 1)
                    continue;
                if (c == 0 || (inner * len <= budget && len > best_len)) {
                    best = c;
                    best_len = len;
                }
            }
            pos[d] = best;
            tile[d] = best_len;
            inner *= tile[d];
            whole = whole && tile[d] == m->shape[d];
        }
        tile[n - 1] = cols;
        /* Enough cache tiles for every core twice over, else a smaller budget. */
        int64_t tiles = 1;
        for (int d = 0; d < n; d++)
            tiles *= (m->shape[d] + tile[d] - 1) / tile[d];
        if (tiles >= 2 * (int64_t)cores || budget <= rows)
            break;
        budget = inner / 2 > rows ? inner / 2 : rows;
    }
    int inl = choice_pos(&s->knobs[n + 8], inline_producers);
    if (inl >= 0)
        pos[n + 8] = inl;
    return tt_space_encode(s, pos);
}

typedef struct {
    const tt_dag *dag;
    uint32_t last; /* the producer's innermost axis, the one the consumer's vectors run along */
    bool transposes;
} transpose_ctx;

static void transposing_read(void *vctx, tt_eid id)
{
    transpose_ctx *c = vctx;
    const tt_expr_pool *p = &c->dag->pool;
    const tt_expr *r = tt_expr_get(p, id);
    if (r->n == 0)
        return;
    const tt_eid *ix = &p->args.data[r->b];
    bool elsewhere = false;
    for (uint32_t d = 0; d + 1 < r->n; d++)
        elsewhere |= tt_expr_uses_var(p, ix[d], c->last);
    if (elsewhere && !tt_expr_uses_var(p, ix[r->n - 1], c->last))
        c->transposes = true;
}

/* Whether an elementwise producer of the main stage reads a tensor across its innermost axis (a
 * layout change: ConvNeXt's padding of an NCHW input for a convolution computed channels-last),
 * so that a vector along its own innermost axis gathers. */
static bool producer_transposes(const tt_space *s)
{
    for (size_t i = 0; i < s->dag->ops.len; i++) {
        const tt_op *o = &s->dag->ops.data[i];
        if (!tt__space_inlinable(s->dag, (int)i, s->main_stage) ||
            !tt__space_feeds(s->dag, (int)i, s->main_stage) || o->ndim < 1)
            continue;
        transpose_ctx c = {s->dag, o->axis[o->ndim - 1], false};
        tt_expr_visit_reads(&s->dag->pool, o->body, transposing_read, &c);
        if (c.transposes)
            return true;
    }
    return false;
}

typedef struct {
    const tt_expr_pool *pool;
    uint32_t column;
    bool broadcasts;
} broadcast_ctx;

static void column_free_read(void *vctx, tt_eid id)
{
    broadcast_ctx *c = vctx;
    if (!tt_expr_uses_var(c->pool, id, c->column))
        c->broadcasts = true;
}

/* Whether the main op reads a tensor that no column index moves (a 1x1 convolution's input
 * pixel, a matrix product's row of A): one broadcast of it feeds every column vector of a
 * register tile, so the tile wants several vectors.  A window operator's reads (a depthwise
 * convolution's, a pooling's) all move with the column: there a broadcast is of no use. */
static bool broadcasts_across_columns(const tt_space *s)
{
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    broadcast_ctx c = {&s->dag->pool, m->axis[m->ndim - 1], false};
    tt_expr_visit_reads(&s->dag->pool, m->body, column_free_read, &c);
    return c.broadcasts;
}

uint64_t tt_space_window_index(const tt_space *s, const tt_vector_isa *isa, int64_t max_rows)
{
    uint64_t base = tt_space_default_index(s, isa);
    if (!s->micro || s->gpu || s->nreduce == 0 || s->nspatial < 2)
        return base;
    const tt_op *m = &s->dag->ops.data[s->main_stage];
    int64_t taps = 1;
    for (int k = 0; k < s->nreduce; k++)
        taps *= m->rextent[k];
    if (taps > TT_SPACE_WINDOW_TAPS)
        return base;
    int n = s->nspatial, pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, base, pos);
    /* Register tile: one vector (or the partial one), the most rows up to max_rows that divide
     * the row axis.  A short reduction that broadcasts (a 1x1 convolution of 16 to 64 input
     * channels, MobileNet's expansions) takes the blocked config's tile instead, several vectors
     * of columns: one vector fed one multiply-add per broadcast, and MnasNet's 16 -> 48 over
     * 112x112 at batch 8 ran in 0.62 ms against 0.41 ms with 8 x 3 (docs/tuning.md). */
    const tt_knob *mk = &s->knobs[n + 7];
    int best = -1;
    int64_t best_rows = 0;
    bool broadcasts = broadcasts_across_columns(s);
    if (broadcasts) {
        register_tile_pick(s, isa, 1, &best);
        int64_t kind = best >= 0 ? mk->choice[best] & 0xffff : 0;
        /* a tile of a vector and a half only where it is all the columns: 3 x 24 of 72 ran
         * slower than 5 vectors, the last moved back (0.44 against 0.33-0.38 ms) */
        if (kind & 0x8000 && (kind & 0x7fff) < m->shape[n - 1])
            best = -1, broadcasts = false;
    }
    for (int c = 0; c < mk->n && !broadcasts; c++) {
        int64_t rows, cols;
        register_tile(s, mk->choice[c], &rows, &cols);
        if (cols <= s->vector_lanes && rows <= max_rows && rows > best_rows &&
            m->shape[n - 2] % rows == 0) {
            best = c;
            best_rows = rows;
        }
    }
    if (best < 0)
        return base;
    pos[n + 7] = best;
    /* The cache tile is the register tile: one of it along the row and column axes, 1 along the
     * others (the smallest choice). */
    for (int d = 0; d < n; d++)
        pos[d] = 0;
    /* reduce_inner_first, unroll, taps; a producer that changes the layout computed once, not
     * gathered again by every tap (ConvNeXt's 7x7 depthwise convolutions on an NCHW input: 6.5
     * ms inlined, 0.4 ms with the padded, transposed input written first) */
    int want[4][2] = {{n + 2, 1},
                      {n + 6, 512},
                      {knob_named(s, "taps_inner"), 0},
                      {producer_transposes(s) ? n + 8 : -1, 0}};
    for (int i = 0; i < 4; i++) {
        int c = want[i][0] >= 0 ? choice_pos(&s->knobs[want[i][0]], want[i][1]) : -1;
        if (c >= 0)
            pos[want[i][0]] = c;
    }
    return tt_space_encode(s, pos);
}

uint64_t tt_space_untuned_index(const tt_space *s, const tt_vector_isa *isa,
                                const tt_cpu_caches *caches, int cores)
{
    uint64_t index = tt_space_default_index(s, isa);
    uint64_t window = tt_space_window_index(s, isa, 8);
    if (window != index)
        return window;
    return tt_space_blocked_index(s, isa, caches, cores, false, true);
}

int tt_space_target_lanes(const char *text)
{
    tt_target t;
    tt_errbuf ignored = {{0}};
    if (!text || tt_target_parse(text, &t, &ignored) ||
        (strcmp(t.kind, "llvm") && strcmp(t.kind, "c")))
        return 0;
    tt_vector_isa isa;
    tt_codegen_vector_isa(&t, &isa);
    return isa.vector_bytes / 4;
}

tt_status tt_space_untuned_schedule(const tt_dag *dag, const tt_target *target, tt_state **out,
                                    char *desc, size_t ndesc, tt_errbuf *err)
{
    tt_vector_isa isa;
    tt_codegen_vector_isa(target, &isa);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = n > 1 ? (int)n : 2;
    tt_cpu_caches caches;
    if (target->triple[0])
        tt_cpu_caches_typical(&caches);
    else
        tt_cpu_caches_host(&caches);
    tt_space sp;
    tt_errbuf why = {{0}};
    if (!tt_space_init(&sp, dag, cores, &isa, &why)) {
        uint64_t index = tt_space_untuned_index(&sp, &isa, &caches, cores);
        if (!tt_space_apply(&sp, index, out, &why)) {
            if (desc)
                tt_space_describe(&sp, index, desc, ndesc);
            return TT_OK;
        }
    }
    /* a workload the template cannot tile: the naive schedule */
    if (desc)
        snprintf(desc, ndesc, "naive (%.400s)", why.msg);
    return tt_state_create(dag, out, err);
}

/* The stage that stores `main`'s result through its epilogue: its single consumer when that
 * reads it element by element at the root (bias, activation, residual inlined into the output;
 * also through a diamond, SiLU's x * sigmoid(x) or HardSwish; also where the output adds axes of
 * extent 1, a MatMul's [1, M, N] output of its [M, N] accumulation), else -1.  map[i]: the axis of
 * `main` for the writer's axis i, -1 for an added axis of extent 1. */
static int epilogue_writer(const tt_state *st, int main, int n, int *map)
{
    int c;
    if (!tt_access_epilogue_consumer(st, main, true, &c))
        return -1;
    const tt_stage *sg = &st->stages.data[c];
    const tt_op *op = &st->dag.ops.data[sg->op];
    if (sg->at != TT_AT_ROOT || sg->transformed || op->nreduce > 0 || sg->niters != op->ndim ||
        op->ndim > TT_MAX_ITERS || tt_access_axis_map(st, main, c, map) != n)
        return -1;
    return c;
}

/* The writer's tiles: its axes that map to `main`'s split by main's tile, [added axes of extent
 * 1][outer tiles][inner tiles]; *nouter gets the count of the first two. */
static tt_status tile_writer(tt_state *st, int writer, const int *map, const int64_t *tile,
                             int *nouter, tt_errbuf *err)
{
    int nd = st->stages.data[writer].niters, pos[TT_MAX_ITERS], p = 0;
    for (int d = 0; d < nd; d++)
        pos[d] = p, p += map[d] >= 0 ? 2 : 1;
    for (int d = nd - 1; d >= 0; d--) {
        tt_status r = map[d] >= 0 ? tt_sched_split(st, writer, d, &tile[map[d]], 1, true, err) : 0;
        if (r)
            return r;
    }
    int order[TT_MAX_ITERS], k = 0;
    for (int d = 0; d < nd; d++)
        if (map[d] < 0)
            order[k++] = pos[d];
    for (int d = 0; d < nd; d++)
        if (map[d] >= 0)
            order[k++] = pos[d];
    *nouter = k;
    for (int d = 0; d < nd; d++)
        if (map[d] >= 0)
            order[k++] = pos[d] + 1;
    return tt_sched_reorder(st, writer, order, k, err);
}

/* The accumulation in a tile-sized buffer, computed at the last outer tile loop of the stage that
 * writes the result, which is tiled (parallel outer loops, vector inner loop).  With an epilogue
 * (epilogue_writer) that stage is the epilogue's: each tile goes from the accumulators through
 * bias and activation into the output, as TVM's cache_write into the output stage.  A cache write
 * copied out into a global buffer that a root pass then read again: MobileNet-V2's 1x1 16->96 over
 * 112x112 with ReLU6 moved its 4.8 MB result three times and ran 3x slower in the network than
 * alone.  Without an epilogue, a cache write copied out by the original stage.  Both accumulating
 * layouts start from this; `main` stays the accumulating stage. */
static tt_status local_accumulator(tt_state *st, int main, int n, const int64_t *tile,
                                   bool parallel, bool vectorize, tt_errbuf *err)
{
    int map[TT_MAX_ITERS], nouter = n;
    int writer = epilogue_writer(st, main, n, map);
    tt_status r = TT_OK;
    if (writer < 0) {
        r = tt_sched_cache_write(st, main, "local", err);
        writer = main + 1;
        if (!r)
            r = tile_stage(st, writer, n, tile, NULL, 0, NULL, 0, false, err);
    } else {
        r = tile_writer(st, writer, map, tile, &nouter, err);
    }
    if (!r)
        r = tt_sched_compute_at(st, main, writer, nouter - 1, err);
    if (!r)
        r = finish_stage(st, writer, nouter, parallel, vectorize, 0, 0, err);
    return r;
}

/* The register-blocked layout (tt_space_init's micro_kernel knob): the original stage tiled and
 * parallel, a local accumulator computed at its last outer tile and ordered
 *     [outer reductions][spatial tile / register tile][inner reduction][rows][columns]
 * (reduce_first: the spatial loops outside the reductions instead), rows unrolled and columns
 * vectorised.  *pack_pos: the local stage's outer reduction step, where packed inputs go. */
static tt_status micro_kernel_layout(const tt_space *s, tt_state *st, int main, const int64_t *tile,
                                     int64_t rtile, int64_t mk, bool reduce_first, bool taps_inner,
                                     bool parallel, bool vectorize, int unroll, int *pack_pos,
                                     tt_errbuf *err)
{
    int n = s->nspatial, nr = s->nreduce;
    tt_status r = local_accumulator(st, main, n, tile, parallel, vectorize, err);
    if (r)
        return r;
    /* The register tile, shrunk to divide this config's cache tile. */
    int64_t rows, cols, lanes = s->vector_lanes;
    register_tile(s, mk, &rows, &cols);
    int64_t tcol = tile[n - 1], trow = n > 1 ? tile[n - 2] : 1;
    rows = divisor_at_most(trow, rows);
    if (tcol % cols) {
        int64_t best = 0;
        for (int64_t k = cols / lanes; k >= 1 && !best; k--)
            if (tcol % (k * lanes) == 0)
                best = k * lanes;
        cols = best ? best : tcol;
    }
    /* Split the last reduction (ki), the column axis and the row axis, last position first. */
    int64_t one;
    one = rtile;
    if ((r = tt_sched_split(st, main, n + nr - 1, &one, 1, true, err)))
        return r;
    one = cols;
    if ((r = tt_sched_split(st, main, n - 1, &one, 1, true, err)))
        return r;
    int row0 = -1, row1 = -1, col0, col1;
    if (n > 1) {
        one = rows;
        if ((r = tt_sched_split(st, main, n - 2, &one, 1, true, err)))
            return r;
        row0 = n - 2;
        row1 = n - 1;
        col0 = n;
        col1 = n + 1;
    } else {
        col0 = 0;
        col1 = 1;
    }
    int base = n > 1 ? n + 2 : 2; /* first reduce iterator after the splits */
    int order[TT_MAX_ITERS], k = 0;
    int outer_sp[TT_MAX_ITERS], nouter = 0;
    for (int d = 0; d < n - 2; d++)
        outer_sp[nouter++] = d;
    if (row0 >= 0)
        outer_sp[nouter++] = row0;
    outer_sp[nouter++] = col0;
    int taps = taps_inner && nr >= 2 ? base + nr - 2 : -1; /* the window's column axis */
    if (!reduce_first)
        for (int i = 0; i < nr; i++)
            if (base + i != taps)
                order[k++] = base + i; /* R0 .. R_last.0 */
    for (int i = 0; i < nouter; i++)
        order[k++] = outer_sp[i];
    if (reduce_first)
        for (int i = 0; i < nr; i++)
            if (base + i != taps)
                order[k++] = base + i;
    *pack_pos = k - 1 - (reduce_first ? 0 : nouter);
    order[k++] = base + nr; /* R_last.1 */
    int taps_pos = k;
    if (taps >= 0)
        order[k++] = taps;
    if (row1 >= 0)
        order[k++] = row1;
    order[k++] = col1;
    if ((r = tt_sched_reorder(st, main, order, k, err)))
        return r;
    const tt_stage *sg = &st->stages.data[main];
    int last = sg->niters - 1;
    if (taps >= 0 && (r = tt_sched_annotate(st, main, taps_pos, TT_ANN_UNROLL, err)))
        return r;
    if (row1 >= 0 && rows > 1 && (r = tt_sched_annotate(st, main, last - 1, TT_ANN_UNROLL, err)))
        return r;
    if (cols > 1 &&
        (r = tt_sched_annotate(st, main, last,
                               vectorize && cols <= 64 ? TT_ANN_VECTORIZE : TT_ANN_UNROLL, err)))
        return r;
    if (unroll > 0) {
        char pragma[48];
        snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d", unroll);
        r = tt_sched_pragma(st, main, 0, pragma, err);
    }
    return r;
}

/* A reduction stage as a vector accumulator: its reduce axis split by `lanes` and the lanes
 * factored out (rfactor), the factored stage ordered [rows][outer][lanes] with the lanes a vector.
 * The stage itself then adds up the lanes. */
static tt_status row_reduction_lanes(tt_state *st, int op, int k, int64_t lanes, tt_errbuf *err)
{
    int stage = tt_state_stage_of_op(st, op);
    if (st->dag.ops.data[op].rextent[0] < 2 * lanes)
        return TT_OK; /* a short row: one scalar loop */
    tt_status r = tt_sched_split(st, stage, k, &lanes, 1, true, err);
    if (!r)
        r = tt_sched_rfactor(st, stage, k + 1, k, err);
    if (r)
        return r;
    int rf = tt_state_stage_of_op(st, (int)st->dag.ops.len - 1), order[TT_MAX_ITERS];
    for (int d = 0; d < k; d++)
        order[d] = d;
    order[k] = k + 1;
    order[k + 1] = k;
    r = tt_sched_reorder(st, rf, order, k + 2, err);
    return r ? r : tt_sched_annotate(st, rf, k + 1, TT_ANN_VECTORIZE, err);
}

/* An elementwise stage computed at the row: its column axis as vectors of `lanes`. */
static tt_status row_columns(tt_state *st, int stage, int k, int64_t lanes, int unroll,
                             tt_errbuf *err)
{
    const tt_stage *sg = &st->stages.data[stage];
    if (sg->niters != k + 1 || sg->iters[k].kind != TT_ITER_SPATIAL)
        return TT_OK;
    int64_t ext = sg->iters[k].extent;
    tt_status r = TT_OK;
    if (ext > lanes) {
        r = tt_sched_split(st, stage, k, &lanes, 1, true, err);
        ext = lanes;
    }
    if (!r && ext > 1)
        r = tt_sched_annotate(st, stage, st->stages.data[stage].niters - 1, TT_ANN_VECTORIZE, err);
    if (!r && unroll > 0) {
        char pragma[48];
        snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d", unroll);
        r = tt_sched_pragma(st, stage, 0, pragma, err);
    }
    return r;
}

static int readers_of(const tt_dag *dag, int op)
{
    int n = 0;
    for (size_t i = 0; i < dag->ops.len; i++)
        n += !dag->ops.data[i].is_placeholder &&
             tt_expr_reads_tensor(&dag->pool, dag->ops.data[i].body, (uint32_t)op);
    return n;
}

static tt_status row_apply(const tt_space *s, bool parallel, bool vectorize, int unroll,
                           tt_state **out, tt_errbuf *err)
{
    const tt_dag *dag = s->dag;
    int k = s->nspatial, root_op = -1;
    int64_t lanes = vectorize ? s->vector_lanes : 1;
    tt_state *st;
    tt_status r = tt_state_create(dag, &st, err);
    size_t nops = dag->ops.len;
    for (size_t i = 0; i < nops && !r; i++) {
        const tt_op *o = &dag->ops.data[i];
        if (o->is_placeholder)
            continue;
        if (!tt_dag_has_readers(dag, (int)i))
            root_op = (int)i;
        else if (o->nreduce == 0 && readers_of(dag, (int)i) == 1)
            r = tt_sched_compute_inline(st, tt_state_stage_of_op(st, (int)i), err);
        else if (o->nreduce == 1 && lanes > 1)
            r = row_reduction_lanes(st, (int)i, k, lanes, err);
    }
    if (!r && root_op < 0)
        r = tt_err(err, TT_ERR_BAD_WORKLOAD, "a row kernel without an output");
    int root = r ? -1 : tt_state_stage_of_op(st, root_op);
    if (!r && k > 1) {
        int ids[TT_MAX_DIMS];
        for (int d = 0; d < k; d++)
            ids[d] = d;
        r = tt_sched_fuse(st, root, ids, k, err);
    }
    if (!r && parallel && st->stages.data[root].iters[0].extent > 1)
        r = tt_sched_annotate(st, root, 0, TT_ANN_PARALLEL, err);
    /* Every other stage at the row, readers before what they read. */
    for (int i = (int)st->stages.len - 1; i >= 0 && !r; i--) {
        const tt_stage *sg = &st->stages.data[i];
        if (i == root || st->dag.ops.data[sg->op].is_placeholder || sg->at == TT_AT_INLINE)
            continue;
        r = tt_sched_compute_at(st, i, root, 0, err);
    }
    for (size_t i = 0; i < st->stages.len && !r && lanes > 1; i++) {
        const tt_stage *sg = &st->stages.data[i];
        if (st->dag.ops.data[sg->op].is_placeholder || sg->at == TT_AT_INLINE ||
            st->dag.ops.data[sg->op].nreduce > 0)
            continue;
        r = (int)i == root ? row_columns(st, (int)i, 1, lanes, unroll, err)
                           : row_columns(st, (int)i, k, lanes, 0, err);
    }
    if (r) {
        tt_state_free(st);
        return r;
    }
    *out = st;
    return TT_OK;
}

tt_status tt_space_apply(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err)
{
    if (s->gpu)
        return tt__space_apply_gpu(s, index, out, err);
    int pos[TT_SPACE_MAX_KNOBS];
    tt_space_decode(s, index % s->size, pos);
    int n = s->nspatial;
    int row_knob = knob_named(s, "row_kernel");
    if (row_knob >= 0 && s->knobs[row_knob].choice[pos[row_knob]])
        return row_apply(s, s->knobs[n + 4].choice[pos[n + 4]] != 0,
                         s->knobs[n + 5].choice[pos[n + 5]] != 0,
                         (int)s->knobs[n + 6].choice[pos[n + 6]], out, err);
    int64_t tile[TT_MAX_DIMS];
    for (int d = 0; d < n; d++)
        tile[d] = s->knobs[d].choice[pos[d]];
    int64_t mk = s->knobs[n + 7].choice[pos[n + 7]];
    if (s->micro)
        micro_tiles(s, mk, tile);
    const tt_op *mop = &s->dag->ops.data[s->main_stage];
    int64_t rtile = s->knobs[n].choice[pos[n]];
    bool cache_write = s->knobs[n + 1].choice[pos[n + 1]];
    bool reduce_first = s->knobs[n + 2].choice[pos[n + 2]];
    bool pack = s->knobs[n + 3].choice[pos[n + 3]];
    bool parallel = s->knobs[n + 4].choice[pos[n + 4]];
    bool vectorize = s->knobs[n + 5].choice[pos[n + 5]];
    int unroll = (int)s->knobs[n + 6].choice[pos[n + 6]];
    bool inline_producers = s->knobs[n + 8].choice[pos[n + 8]];
    bool layout_rewrite = s->knobs[n + 9].choice[pos[n + 9]];
    int taps_knob = knob_named(s, "taps_inner");
    bool taps_inner = taps_knob >= 0 && s->knobs[taps_knob].choice[pos[taps_knob]];
    if (s->micro)
        cache_write = true; /* the register tile is a local accumulator */
    tt_state *st;
    tt_status r = tt_state_create(s->dag, &st, err);
    if (r)
        return r;
    /* Packing: a local copy of every input the main op reads directly (placed later). */
    int packs[TT_MAX_STAGES], npacks = 0;
    for (size_t i = 0; pack && s->nreduce > 0 && i < s->dag->ops.len && !r; i++) {
        if (!s->dag->ops.data[i].is_placeholder ||
            !tt_expr_reads_tensor(&s->dag->pool, s->dag->ops.data[s->main_stage].body,
                                  (uint32_t)i) ||
            (layout_rewrite && rewritable(s->dag, (int)i, s->main_stage)))
            continue; /* weights passed packed need no copy */
        int reader = tt_state_stage_of_op(st, s->main_stage);
        r = tt_sched_cache_read(st, tt_state_stage_of_op(st, (int)i), "local", &reader, 1, err);
        packs[npacks++] = (int)st->dag.ops.len - 1;
    }
    /* Elementwise intermediates go into their readers.  The main op's producers (padding) may
     * instead stay at the root, computed once; its epilogue (bias, activation, residual) always
     * goes into the output's loops: at the root it made a pass of its own over the whole
     * result, and 1x1 convolutions with bias and ReLU6 took 2.3-2.4x as long (docs/tuning.md). */
    for (size_t i = 0; i < s->dag->ops.len && !r; i++)
        if (tt__space_inlinable(s->dag, (int)i, s->main_stage) &&
            (inline_producers || !tt__space_feeds(s->dag, (int)i, s->main_stage)))
            r = tt_sched_compute_inline(st, tt_state_stage_of_op(st, (int)i), err);
    int main = tt_state_stage_of_op(st, s->main_stage), nr = s->nreduce;
    /* The iterator of the outer reduction step in the stage that accumulates. */
    int pack_target = -1, pack_pos = 0;
    if (!r && nr > 0 && !cache_write) {
        /* Split the last reduce axis; order [S outer][R.. R_last.0][S inner..][R_last.1][S_last
         * inner]. */
        r = tt_sched_split(st, main, n + nr - 1, &rtile, 1, true, err);
        int mid[TT_MAX_REDUCE + 1], tail[1] = {nr};
        for (int i = 0; i < nr; i++)
            mid[i] = i;
        if (!r)
            r = tile_stage(st, main, n, tile, mid, nr, tail, 1, reduce_first, err);
        if (!r)
            r = finish_stage(st, main, n, parallel, vectorize, unroll, 0, err);
        pack_target = main;
        pack_pos = (parallel ? 1 : n) + nr - 1;
    } else if (!r && nr > 0 && s->micro) {
        r = micro_kernel_layout(s, st, main, tile, rtile, mk, reduce_first, taps_inner, parallel,
                                vectorize, unroll, &pack_pos, err);
        pack_target = main;
    } else if (!r && nr > 0) {
        /* cache_write: the accumulation happens in a tile-sized local buffer. */
        r = local_accumulator(st, main, n, tile, parallel, vectorize, err);
        /* The local stage: [R.. R_last.0][S all but the last][R_last.1][S last]. */
        if (!r)
            r = tt_sched_split(st, main, n + nr - 1, &rtile, 1, true, err);
        if (!r) {
            int order[TT_MAX_ITERS], k = 0;
            for (int i = 0; i < nr; i++)
                order[k++] = n + i;
            if (reduce_first)
                order[k++] = n + nr;
            for (int d = 0; d < n - 1; d++)
                order[k++] = d;
            if (!reduce_first)
                order[k++] = n + nr;
            order[k++] = n - 1;
            r = tt_sched_reorder(st, main, order, k, err);
        }
        if (!r)
            r = finish_stage(st, main, 0, false, vectorize, unroll, tile[n - 1], err);
        pack_target = main;
        pack_pos = nr - 1;
    } else if (!r) {
        r = tile_stage(st, main, n, tile, NULL, 0, NULL, 0, false, err);
        /* A last axis whole in the tile and shorter than a vector: fused with the inner loop
         * before it, one contiguous run of the output, vectorised (a vector of 2 lanes per
         * pixel made ShuffleNet's shuffle 4x a copy's time). */
        if (!r && vectorize && n >= 2 && tile[n - 1] == mop->shape[n - 1] &&
            tile[n - 1] < s->vector_lanes && tile[n - 2] > 1)
            r = tt_sched_fuse(st, main, (int[]){2 * n - 2, 2 * n - 1}, 2, err);
        if (!r)
            r = finish_stage(st, main, n, parallel, vectorize, unroll, 0, err);
    }
    /* Each packed copy walks its input's innermost (contiguous) axis as one vector: a copy of
     * scalars, unrolled, cost LLVM more than the kernel around it (60-250 ms per candidate). */
    for (int i = 0; i < npacks && !r && pack_target >= 0; i++) {
        int copy = tt_state_stage_of_op(st, packs[i]);
        r = tt_sched_compute_at(st, copy, pack_target, pack_pos, err);
        if (!r && vectorize)
            r = tt_sched_annotate(st, copy, st->stages.data[copy].niters - 1, TT_ANN_VECTORIZE,
                                  err);
    }
    /* Weights in the order the accumulating loops read them (packed when the kernel is built). */
    for (size_t i = 0; i < s->dag->ops.len && !r && layout_rewrite && nr > 0; i++)
        if (rewritable(s->dag, (int)i, s->main_stage))
            r = tt_sched_layout_rewrite(st, tt_state_stage_of_op(st, (int)i), err);
    /* Every other stage at the root: parallel outer loop, vector inner loop.  The parallel loop
     * is the leading spatial loops fused until there are ROOT_PARALLEL_MIN iterations: a batch
     * of 1 alone left padding computed once (inline_producers 0) on one core while the others
     * waited for it. */
    for (size_t i = 0; i < st->stages.len && !r; i++) {
        const tt_stage *sg = &st->stages.data[i];
        const tt_op *op = &st->dag.ops.data[sg->op];
        if (op->is_placeholder || sg->at != TT_AT_ROOT || sg->transformed || sg->niters == 0)
            continue;
        int nouter = 1;
        for (int64_t ext = sg->iters[0].extent; nouter < sg->niters - 1 &&
                                                ext < ROOT_PARALLEL_MIN &&
                                                sg->iters[nouter].kind == TT_ITER_SPATIAL;)
            ext *= sg->iters[nouter++].extent;
        r = finish_stage(st, (int)i, nouter, parallel && sg->iters[0].kind == TT_ITER_SPATIAL,
                         vectorize, 0, 0, err);
    }
    if (r) {
        tt_state_free(st);
        return r;
    }
    *out = st;
    return TT_OK;
}

void tt_space_signature(const tt_space *s, char *out, size_t n)
{
    uint64_t sig = tt_hash64_str(!s->gpu        ? "tiling-space-5"
                                 : s->no_shared ? "gpu-template-unshared-1"
                                                : "gpu-template-1");
    for (int k = 0; k < s->nknobs; k++) {
        sig = tt_hash64_update(sig, s->knobs[k].name, strlen(s->knobs[k].name));
        sig = tt_hash64_update(sig, s->knobs[k].choice, sizeof(int64_t) * (size_t)s->knobs[k].n);
    }
    snprintf(out, n, "%s:%016llx", s->gpu ? "gpu" : "tiling", (unsigned long long)sig);
}
