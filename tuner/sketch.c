/* Ansor's sketches (search.md C4-C5): the generation rules that turn a DAG into sketches, their
 * random annotation (sampling, ThreadBind on GPUs) and the factorisation schemes tile sizes are
 * drawn from.  Mutation is sketch_mutate.c; the fixed GPU tilings sketch_gpu_tiles.c. */
#include "sketch.h"

#include <stdlib.h>
#include <string.h>

#include "../schedule/loop_ir.h"
#include "access.h"
#include "sketch_int.h"

#define MAX_SKETCHES 64

void tt_sketch_params_cpu(tt_sketch_params *p, int num_cores)
{
    memset(p, 0, sizeof(*p));
    p->num_cores = num_cores > 0 ? num_cores : 1;
    p->max_innermost = 64;
    p->max_vectorize = 16;
    snprintf(p->structure, sizeof(p->structure), "SSRSRS");
}

int tt_sketch_gpu_warp(int64_t max_threads, int target_warp)
{
    int warp = target_warp > 0 ? target_warp : 32;
    return max_threads > 0 && max_threads < warp ? (int)max_threads : warp;
}

void tt_sketch_params_gpu(tt_sketch_params *p, int max_threads, int warp_size)
{
    memset(p, 0, sizeof(*p));
    p->num_cores = 1;
    p->max_innermost = 64;
    p->max_vectorize = 16;
    p->gpu = true;
    p->max_threads = max_threads > 0 ? max_threads : 1024;
    p->warp_size = warp_size > 0 ? warp_size : 32;
    p->max_vthread = p->warp_size / 4 > 1 ? p->warp_size / 4 : 1;
    p->cross_thread = true;
    p->shared_memory = true;
    snprintf(p->structure, sizeof(p->structure), "SSSRRSRS");
}

/* ---- factorisation schemes ---- */

static void schemes_rec(int64_t rest, int n, int depth, int64_t max_inner, int64_t *cur,
                        int64_t *out, int64_t max, int64_t *count)
{
    if (depth == n) {
        if (cur[n - 1] <= max_inner) {
            if (*count < max)
                memcpy(out + *count * n, cur, sizeof(int64_t) * (size_t)n);
            (*count)++;
        }
        return;
    }
    for (int64_t d = 1; d <= rest; d++) {
        if (rest % d)
            continue;
        if (depth == n - 1 && d > max_inner)
            break;
        cur[depth] = d;
        schemes_rec(rest / d, n, depth + 1, max_inner, cur, out, max, count);
    }
}

int64_t tt_factor_schemes(int64_t extent, int n, int64_t max_innermost, int64_t *out, int64_t max)
{
    int64_t cur[TT_MAX_SPLIT] = {0}, count = 0;
    if (n < 1 || n >= TT_MAX_SPLIT || extent < 1)
        return 0;
    schemes_rec(extent, n, 0, max_innermost, cur, out, max, &count);
    return count;
}

typedef struct {
    int64_t extent;
    int n;
    int64_t count; /* schemes stored */
    int64_t *schemes;
} factor_entry;

struct tt_factor_cache {
    factor_entry *e;
    int n, cap;
};

static const factor_entry *schemes_of(tt_sketch_space *sp, int64_t extent, int n)
{
    tt_factor_cache *c = sp->factors;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].extent == extent && c->e[i].n == n)
            return &c->e[i];
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        factor_entry *g = realloc(c->e, sizeof(*g) * (size_t)cap);
        if (!g)
            return NULL;
        c->e = g;
        c->cap = cap;
    }
    /* Enough room for any realistic extent; beyond it the first schemes are used. */
    const int64_t max = 1 << 16;
    int64_t total = tt_factor_schemes(extent, n, sp->params.max_innermost, NULL, 0);
    if (total > max)
        total = max;
    int64_t *buf = malloc(sizeof(int64_t) * (size_t)(total > 0 ? total : 1) * (size_t)n);
    if (!buf)
        return NULL;
    tt_factor_schemes(extent, n, sp->params.max_innermost, buf, total);
    factor_entry *e = &c->e[c->n++];
    e->extent = extent;
    e->n = n;
    e->count = total;
    e->schemes = buf;
    return e;
}

/* ---- sketch generation (search.md C4, CPU rules) ---- */

typedef struct {
    tt_state *st;
    int stage;
    uint8_t undef[MAX_STEPS];
} node;

typedef struct {
    node **v;
    int n, cap;
} node_list;

static tt_status push_node(node_list *l, tt_state *st, int stage, const uint8_t *undef)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        node **g = realloc(l->v, sizeof(*g) * (size_t)cap);
        if (!g)
            return TT_ERR_NOMEM;
        l->v = g;
        l->cap = cap;
    }
    node *nd = calloc(1, sizeof(*nd));
    if (!nd)
        return TT_ERR_NOMEM;
    nd->st = st;
    nd->stage = stage;
    if (undef)
        memcpy(nd->undef, undef, sizeof(nd->undef));
    l->v[l->n++] = nd;
    return TT_OK;
}

static void free_nodes(node_list *l)
{
    for (int i = 0; i < l->n; i++) {
        tt_state_free(l->v[i]->st);
        free(l->v[i]);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static int iter_index(const tt_state *st, int stage, uint32_t var)
{
    const tt_stage *sg = &st->stages.data[stage];
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].var == var)
            return i;
    return -1;
}

static tt_status reorder_vars(tt_state *st, int stage, const uint32_t *vars, int n, tt_errbuf *err)
{
    int order[TT_MAX_ITERS];
    for (int i = 0; i < n; i++)
        if ((order[i] = iter_index(st, stage, vars[i])) < 0)
            return tt_err(err, TT_ERR_INTERNAL, "reorder: lost an iterator");
    return tt_sched_reorder(st, stage, order, n, err);
}

/* Multi-level tiling with a structure string such as "SSRSRS": every spatial iterator split into
 * #S parts and every reduce iterator into #R parts (open lengths), then reordered level by level.
 * The ids of the spatial split steps go to split_steps. */
static tt_status multi_level_tiling(tt_state *st, int stage, const char *structure, uint8_t *undef,
                                    int *split_steps, int *nsplit, tt_errbuf *err)
{
    int ns = 0, nr = 0;
    for (const char *c = structure; *c; c++)
        *c == 'S' ? ns++ : nr++;
    uint32_t space[TT_MAX_SPLIT][TT_MAX_ITERS], reduce[TT_MAX_SPLIT][TT_MAX_ITERS];
    int nsp = 0, nrd = 0;
    int n0 = st->stages.data[stage].niters, pos = 0;
    *nsplit = 0;
    for (int k = 0; k < n0; k++) {
        const tt_iter it = st->stages.data[stage].iters[pos];
        bool spatial = it.kind == TT_ITER_SPATIAL;
        int parts = spatial ? ns : nr;
        if (parts > 1) {
            int64_t ones[TT_MAX_SPLIT] = {1, 1, 1, 1, 1, 1, 1, 1};
            tt_status s = tt_sched_split(st, stage, pos, ones, parts - 1, true, err);
            if (s)
                return s;
            size_t id = st->steps.len - 1;
            if (id < MAX_STEPS)
                undef[id] = spatial ? UNDEF_SPATIAL : UNDEF_OPEN;
            if (spatial)
                split_steps[(*nsplit)++] = (int)id;
        }
        for (int l = 0; l < parts; l++) {
            uint32_t v = st->stages.data[stage].iters[pos + l].var;
            if (spatial)
                space[l][nsp] = v;
            else
                reduce[l][nrd] = v;
        }
        spatial ? nsp++ : nrd++;
        pos += parts;
    }
    uint32_t order[TT_MAX_ITERS];
    int n = 0, si = 0, ri = 0;
    for (const char *c = structure; *c; c++) {
        if (*c == 'S') {
            for (int i = 0; i < nsp; i++)
                order[n++] = space[si][i];
            si++;
        } else {
            for (int i = 0; i < nrd; i++)
                order[n++] = reduce[ri][i];
            ri++;
        }
    }
    return reorder_vars(st, stage, order, n, err);
}

/* Splits every iterator of `stage` like the spatial split steps of its producer, n_split levels
 * deep, and reorders level by level.  map[i] is the producer's axis (its split_steps entry) for
 * the stage's iterator i, or -1 for an iterator of extent 1 the producer lacks (a MatMul's
 * [1, M, N] output of an [M, N] accumulation): those stay whole and go outermost.  *attach_pos
 * gets the iterator after level `n_split`'s tiles minus one: where the producer is computed. */
static tt_status follow_tiling(tt_state *st, int stage, const int *split_steps, int nsplit,
                               const int *map, int n_split, int level, int *attach_pos,
                               tt_errbuf *err)
{
    const tt_stage *sg = &st->stages.data[stage];
    int niters = sg->niters, nmapped = 0;
    for (int i = 0; i < niters && niters == st->dag.ops.data[sg->op].ndim; i++)
        nmapped += map[i] >= 0;
    if (nmapped != nsplit)
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "follow tiling: iterator count mismatch");
    uint32_t level_vars[4][TT_MAX_ITERS], whole[TT_MAX_ITERS];
    int pos = 0, nwhole = 0, k = 0;
    for (int i = 0; i < niters; i++) {
        if (map[i] < 0) {
            whole[nwhole++] = st->stages.data[stage].iters[pos++].var;
            continue;
        }
        tt_step s;
        memset(&s, 0, sizeof(s));
        s.kind = TT_STEP_FOLLOW_SPLIT;
        s.stage = stage;
        s.iter = pos;
        s.src_step = split_steps[map[i]];
        s.n_split = n_split;
        tt_status r = tt_state_apply(st, &s, err);
        if (r)
            return r;
        for (int l = 0; l <= n_split; l++)
            level_vars[l][k] = st->stages.data[stage].iters[pos + l].var;
        k++;
        pos += n_split + 1;
    }
    uint32_t order[TT_MAX_ITERS];
    int n = 0;
    for (int i = 0; i < nwhole; i++)
        order[n++] = whole[i];
    for (int l = 0; l <= n_split; l++)
        for (int j = 0; j < nsplit; j++)
            order[n++] = level_vars[l][j];
    *attach_pos = nwhole + level * nsplit - 1;
    return reorder_vars(st, stage, order, n, err);
}

typedef enum { COND_SKIP, COND_APPLY, COND_APPLY_SKIP_REST } rule_cond;

typedef struct {
    const tt_sketch_params *p;
    node_list *next;
    tt_errbuf *err;
} gen_ctx;

static tt_status clone_of(const node *nd, tt_state **out)
{
    return tt_state_clone(nd->st, out) ? TT_ERR_NOMEM : TT_OK;
}

/* Rule 1, AlwaysInline. */
static rule_cond cond_inline(gen_ctx *g, const node *nd)
{
    const tt_state *st = nd->st;
    int s = nd->stage;
    if (st->dag.ops.data[st->stages.data[s].op].is_placeholder || tt_access_is_output(st, s) ||
        tt_access_has_reduce(st, s))
        return COND_SKIP;
    /* GPU sketches inline every such stage (Ansor's AlwaysInline on GPU); CPU ones also a
     * transform that no reduction reads, whose pass over memory costs more than its repeated
     * arithmetic (Winograd's input rows and output columns, docs/search.md). */
    return g->p->gpu || tt_access_strictly_inlineable(st, s) ||
                   tt_access_transform_into_elementwise(&st->dag, st->stages.data[s].op)
               ? COND_APPLY_SKIP_REST
               : COND_SKIP;
}

static tt_status apply_inline(gen_ctx *g, const node *nd)
{
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    if (!r && !(r = tt_sched_compute_inline(st, nd->stage, g->err)))
        return push_node(g->next, st, nd->stage - 1, nd->undef);
    tt_state_free(st);
    return r;
}

/* Rule 3, AddRfactor. */
static rule_cond cond_rfactor(gen_ctx *g, const node *nd)
{
    return tt_access_needs_rfactor(nd->st, nd->stage, g->p->num_cores) &&
                   !tt_access_has_cache_write(nd->st, nd->stage)
               ? COND_APPLY
               : COND_SKIP;
}

static tt_status apply_rfactor(gen_ctx *g, const node *nd)
{
    tt_state *base;
    tt_status r = clone_of(nd, &base);
    if (r)
        return r;
    uint8_t undef[MAX_STEPS];
    memcpy(undef, nd->undef, sizeof(undef));
    int s = nd->stage, ids[TT_MAX_ITERS], nred = 0, nspace = 0;
    const tt_stage *sg = &base->stages.data[s];
    for (int i = 0; i < sg->niters; i++) {
        if (sg->iters[i].kind == TT_ITER_REDUCE)
            ids[nred++] = i;
        else
            nspace++;
    }
    if (nred > 1 && (r = tt_sched_fuse(base, s, ids, nred, g->err)))
        goto out;
    int fused = ids[0];
    const int64_t one = 1;
    if ((r = tt_sched_split(base, s, fused, &one, 1, true, g->err)))
        goto out;
    if (base->steps.len - 1 < MAX_STEPS)
        undef[base->steps.len - 1] = 1;
    for (int part = 0; part < 2 && !r; part++) {
        tt_state *st;
        if ((r = tt_state_clone(base, &st) ? TT_ERR_NOMEM : TT_OK))
            break;
        r = tt_sched_rfactor(st, s, fused + part, nspace, g->err);
        if (!r && part == 1) {
            /* The new factor axis goes innermost, for vectorisation. */
            int order[TT_MAX_ITERS], n = 0, niters = st->stages.data[s].niters;
            for (int i = 0; i < niters; i++)
                if (i != nspace)
                    order[n++] = i;
            order[n++] = nspace;
            r = tt_sched_reorder(st, s, order, n, g->err);
        }
        if (!r)
            r = push_node(g->next, st, s - 1, undef);
        else
            tt_state_free(st);
    }
out:
    tt_state_free(base);
    return r;
}

/* Rule 4, AddCacheWrite. */
/* A consumer that reads the stage element by element; on CPUs also through a diamond of inlined
 * stages (GELU's and SiLU's x * f(x)) and across axes of extent 1 (a MatMul's accumulation and its
 * [1, M, N] output), so that the epilogue stores each tile from the accumulators instead of a pass
 * of its own over a copied-out result (ViT-B/16's GELU pass cost 8-10% of its MatMul). */
static bool fusible_consumer(gen_ctx *g, const node *nd, int *target)
{
    int t;
    if (g->p->gpu)
        return tt_access_elementwise_consumer(nd->st, nd->stage, target);
    if (!tt_access_epilogue_consumer(nd->st, nd->stage, true, &t) ||
        tt_access_has_reduce(nd->st, t))
        return false;
    if (target)
        *target = t;
    return true;
}

static rule_cond cond_cache_write(gen_ctx *g, const node *nd)
{
    if (!tt_access_needs_mlt(nd->st, nd->stage) || fusible_consumer(g, nd, NULL))
        return COND_SKIP;
    return g->p->gpu ? COND_APPLY_SKIP_REST : COND_APPLY;
}

static tt_status apply_cache_write(gen_ctx *g, const node *nd)
{
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    if (!r && !(r = tt_sched_cache_write(st, nd->stage, "local", g->err)))
        return push_node(g->next, st, nd->stage, nd->undef);
    tt_state_free(st);
    return r;
}

/* Rule 5, MultiLevelTilingWithFusion. */
static rule_cond cond_mlt_fusion(gen_ctx *g, const node *nd)
{
    if (tt_access_needs_mlt(nd->st, nd->stage) && fusible_consumer(g, nd, NULL))
        return g->p->gpu || tt_access_has_cache_write(nd->st, nd->stage) ? COND_APPLY_SKIP_REST
                                                                         : COND_APPLY;
    return COND_SKIP;
}

static tt_status apply_mlt_fusion(gen_ctx *g, const node *nd)
{
    int target, map[TT_MAX_ITERS];
    fusible_consumer(g, nd, &target);
    tt_access_axis_map(nd->st, nd->stage, target, map);
    tt_state *base;
    tt_status r = clone_of(nd, &base);
    if (r)
        return r;
    uint8_t undef[MAX_STEPS];
    memcpy(undef, nd->undef, sizeof(undef));
    int split_steps[TT_MAX_ITERS], nsplit = 0;
    r = multi_level_tiling(base, nd->stage, g->p->structure, undef, split_steps, &nsplit, g->err);
    /* Fusion levels: 1 and 2 on CPU, 3 on GPU. */
    for (int level = g->p->gpu ? 3 : 1; level <= (g->p->gpu ? 3 : 2) && !r; level++) {
        if (g->p->structure[level - 1] != 'S')
            continue;
        tt_state *st;
        if ((r = tt_state_clone(base, &st) ? TT_ERR_NOMEM : TT_OK))
            break;
        int attach = 0;
        r = follow_tiling(st, target, split_steps, nsplit, map, level, level, &attach, g->err);
        if (!r)
            r = tt_sched_compute_at(st, nd->stage, target, attach, g->err);
        if (!r)
            r = push_node(g->next, st, nd->stage - 1, undef);
        else
            tt_state_free(st);
    }
    tt_state_free(base);
    return r;
}

/* Rule 6, MultiLevelTiling. */
static rule_cond cond_mlt(gen_ctx *g, const node *nd)
{
    (void)g;
    return tt_access_needs_mlt(nd->st, nd->stage) ? COND_APPLY_SKIP_REST : COND_SKIP;
}

static tt_status apply_mlt(gen_ctx *g, const node *nd)
{
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    if (r)
        return r;
    uint8_t undef[MAX_STEPS];
    memcpy(undef, nd->undef, sizeof(undef));
    int split_steps[TT_MAX_ITERS], nsplit;
    r = multi_level_tiling(st, nd->stage, g->p->structure, undef, split_steps, &nsplit, g->err);
    if (!r)
        return push_node(g->next, st, nd->stage - 1, undef);
    tt_state_free(st);
    return r;
}

/* Rule 7, SkipStage. */
static rule_cond cond_skip(gen_ctx *g, const node *nd)
{
    (void)g, (void)nd;
    return COND_APPLY;
}

static tt_status apply_skip(gen_ctx *g, const node *nd)
{
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    return r ? r : push_node(g->next, st, nd->stage - 1, nd->undef);
}

/* GPU rule 1, AddCacheRead: a direct producer of a multi-level tiled consumer (without
 * cross-thread reduction) is read through shared memory, loaded at the end of the outermost
 * reduce tile. */
static rule_cond cond_cache_read(gen_ctx *g, const node *nd)
{
    int c[2];
    if (!g->p->shared_memory)
        return COND_SKIP;
    if (tt_access_consumers(nd->st, nd->stage, c, 2) != 1)
        return COND_SKIP;
    if (!tt_access_needs_mlt(nd->st, c[0]) || tt_access_cross_thread_reduction(nd->st, c[0]) ||
        !tt_access_reads_directly(nd->st, c[0], nd->stage))
        return COND_SKIP;
    return COND_APPLY_SKIP_REST;
}

static tt_status apply_cache_read(gen_ctx *g, const node *nd)
{
    int c[2];
    tt_access_consumers(nd->st, nd->stage, c, 2);
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    if (r)
        return r;
    int target = c[0];
    if (!(r = tt_sched_cache_read(st, nd->stage, "shared", &target, 1, g->err))) {
        target++; /* the shared stage went in right after the producer */
        r = tt_sched_compute_at(st, nd->stage + 1, target,
                                tt_access_outer_reduce_tile_end(st, target), g->err);
    }
    if (!r)
        return push_node(g->next, st, nd->stage, nd->undef);
    tt_state_free(st);
    return r;
}

/* A matrix-vector product (ours; Ansor leaves these to multi-level tiling, whose threads take an
 * output each): too few outputs to give a GPU its threads one output apiece (under 64 work-groups
 * of 256), a reduction of four warps or more, and its largest operand read along the reduction
 * and used by at most 4 outputs an element (a classifier's or an MLP's weight rows [n, k] at
 * batch 1 to 4; a 1x1 convolution reuses its operands more, and is a matrix product).  Tiled,
 * AlexNet's 9216 x 4096 layer ran 64 work-groups of 64 threads, each thread streaming its own rows:
 * 4096 threads to read 151 MB.  Its cross-thread reduction stays at the root instead: a work-group
 * an output, its threads sharing the reduction, each warp reading 128 contiguous bytes of a row at
 * a time. */
enum { GEMV_MAX_SPACE = 64 * 256 };

static bool gemv_like(const tt_sketch_params *p, const tt_state *st, int stage)
{
    int64_t space, reduce;
    tt_access_lengths(st, stage, &space, &reduce);
    bool along_reduce;
    int64_t largest = tt_access_largest_read(st, stage, &along_reduce);
    return space < GEMV_MAX_SPACE && reduce >= 4 * (int64_t)p->warp_size && along_reduce &&
           space * reduce <= 4 * largest;
}

/* Threads sharing a matrix-vector product's reduction of `extent`: the most whole warps, up to 256
 * (and the block limit), that leave each thread 8 or more of it, dividing it where such a count
 * does; a warp at least. */
static int64_t gemv_threads(const tt_sketch_params *p, int64_t extent)
{
    int64_t warp = p->warp_size > 0 ? p->warp_size : 32;
    int64_t cap = p->max_threads > 0 && p->max_threads < 256 ? p->max_threads : 256;
    for (int exact = 1; exact >= 0; exact--)
        for (int64_t t = cap / warp * warp; t > warp; t -= warp)
            if (extent / t >= 8 && (!exact || extent % t == 0))
                return t;
    return warp;
}

/* GPU rule 5, CrossThreadReduction: too little spatial work for the threads of a block, so
 * threads share the reduction. */
static rule_cond cond_cross_thread(gen_ctx *g, const node *nd)
{
    const tt_state *st = nd->st;
    if (!g->p->cross_thread)
        return COND_SKIP;
    if (tt_access_has_cache_write(st, nd->stage) ||
        st->dag.ops.data[st->stages.data[nd->stage].op].is_placeholder)
        return COND_SKIP;
    int64_t space, reduce;
    tt_access_lengths(st, nd->stage, &space, &reduce);
    if (tt_access_needs_mlt(st, nd->stage))
        return (space <= g->p->max_threads && space < reduce) || gemv_like(g->p, st, nd->stage)
                   ? COND_APPLY
                   : COND_SKIP;
    return reduce > 1 && reduce > g->p->warp_size ? COND_APPLY : COND_SKIP;
}

/* A matrix-vector product's batch axes (the spatial ones its weight rows do not use) moved inside
 * the others, so that the work-groups of one weight row are neighbours in blockIdx.x and run
 * together: at batch 2 to 4 the row then comes from memory once and from the cache for the other
 * rows of the batch, where batch-major groups, a whole matrix apart, read a matrix larger than
 * the cache (AlexNet's 151 MB, an LLM's layers) once per batch row. */
static tt_status gemv_batch_inside(tt_state *st, int s, tt_errbuf *err)
{
    uint32_t rows = tt_access_largest_read_axes(st, s);
    const tt_stage *sg = &st->stages.data[s];
    const tt_op *op = &st->dag.ops.data[sg->op];
    bool batch[TT_MAX_ITERS] = {false}, some = false;
    for (int i = 0; i < sg->niters && i < op->ndim; i++) {
        if (sg->iters[i].var != op->axis[i])
            return TT_OK; /* already transformed */
        batch[i] = !(rows >> i & 1);
        some |= batch[i] && sg->iters[i].extent > 1;
    }
    if (!some)
        return TT_OK; /* batch 1: nothing to move */
    int order[TT_MAX_ITERS], n = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < sg->niters; i++) {
            bool reduce = sg->iters[i].kind == TT_ITER_REDUCE;
            if ((pass == 0 && !reduce && !batch[i]) || (pass == 1 && !reduce && batch[i]) ||
                (pass == 2 && reduce))
                order[n++] = i;
        }
    for (int i = 0; i < n; i++)
        if (order[i] != i)
            return tt_sched_reorder(st, s, order, n, err);
    return TT_OK;
}

static tt_status apply_cross_thread(gen_ctx *g, const node *nd)
{
    tt_state *st;
    tt_status r = clone_of(nd, &st);
    if (r)
        return r;
    int s = nd->stage, ids[TT_MAX_ITERS], nred = 0;
    bool gemv = tt_access_needs_mlt(st, s) && gemv_like(g->p, st, s);
    if (gemv && (r = gemv_batch_inside(st, s, g->err)))
        goto fail;
    const tt_stage *sg = &st->stages.data[s];
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].kind == TT_ITER_REDUCE)
            ids[nred++] = i;
    if (nred > 1 && (r = tt_sched_fuse(st, s, ids, nred, g->err)))
        goto fail;
    int fused = ids[0];
    int target = tt_access_single_consumer(st, s);
    int common = target >= 0 ? tt_access_common_outer(st, s, target) : 0;
    /* The reduction's threads follow the consumer's innermost axis: one shorter than a warp
     * would leave it fewer threads than the warp (a GlobalAveragePool's [1, 512, 1, 1] output
     * gave one thread to each 49-long reduction), so it then stays at the root. */
    const tt_stage *tg = target >= 0 ? &st->stages.data[target] : NULL;
    bool short_consumer = tg && tg->niters > 0 && tg->iters[tg->niters - 1].extent > 0 &&
                          tg->iters[tg->niters - 1].extent < g->p->warp_size &&
                          tg->iters[tg->niters - 1].extent < st->stages.data[s].iters[fused].extent;
    if (!gemv && target >= 0 && common > 0 && !tt_access_needs_mlt(st, target) && !short_consumer) {
        /* Fuse into the consumer: share its thread split. */
        int split = -1;
        for (size_t i = 0; i < st->steps.len; i++)
            if (st->steps.data[i].kind == TT_STEP_SPLIT &&
                tt_access_final_stage(st, i, st->steps.data[i].stage) == target)
                split = (int)i;
        if (split < 0) {
            /* The warp, or the whole loop when it is shorter (Ansor's split would leave an
             * outer loop of one; our states refuse lengths beyond the extent). */
            int64_t warp = g->p->warp_size;
            if (tg->iters[tg->niters - 1].extent > 0 && tg->iters[tg->niters - 1].extent < warp)
                warp = tg->iters[tg->niters - 1].extent;
            if ((r = tt_sched_split(st, target, tg->niters - 1, &warp, 1, true, g->err)) ||
                (r = tt_sched_annotate(st, target, st->stages.data[target].niters - 1,
                                       TT_ANN_THREAD_X, g->err)))
                goto fail;
            split = (int)st->steps.len - 2;
        }
        tt_step fs;
        memset(&fs, 0, sizeof(fs));
        fs.kind = TT_STEP_FOLLOW_SPLIT;
        fs.stage = s;
        fs.iter = fused;
        fs.src_step = split;
        fs.n_split = 1;
        if ((r = tt_state_apply(st, &fs, g->err)) ||
            (r = tt_sched_annotate(st, s, fused + 1, TT_ANN_THREAD_X, g->err)) ||
            (r = tt_sched_compute_at(st, s, target, common - 1, g->err)))
            goto fail;
    } else {
        int64_t warp = g->p->warp_size, ext = st->stages.data[s].iters[fused].extent;
        if (gemv)
            warp = gemv_threads(g->p, ext);
        if (ext > 0 && ext < warp)
            warp = ext;
        if ((r = tt_sched_split(st, s, fused, &warp, 1, true, g->err)) ||
            (r = tt_sched_annotate(st, s, fused + 1, TT_ANN_THREAD_X, g->err)))
            goto fail;
    }
    return push_node(g->next, st, s - 1, nd->undef);
fail:
    tt_state_free(st);
    return r;
}

typedef struct {
    rule_cond (*cond)(gen_ctx *, const node *);
    tt_status (*apply)(gen_ctx *, const node *);
} sketch_rule;

static const sketch_rule gpu_rules[] = {
    {cond_cache_read, apply_cache_read},
    {cond_inline, apply_inline},
    {cond_cross_thread, apply_cross_thread},
    {cond_cache_write, apply_cache_write},
    {cond_mlt_fusion, apply_mlt_fusion},
    {cond_mlt, apply_mlt},
    {cond_skip, apply_skip},
};

static const sketch_rule cpu_rules[] = {
    {cond_inline, apply_inline},
    {cond_rfactor, apply_rfactor},
    {cond_cache_write, apply_cache_write},
    {cond_mlt_fusion, apply_mlt_fusion},
    {cond_mlt, apply_mlt},
    {cond_skip, apply_skip},
};

tt_status tt_sketch_space_init(tt_sketch_space *sp, const tt_dag *dag, const tt_sketch_params *p,
                               tt_errbuf *err)
{
    memset(sp, 0, sizeof(*sp));
    sp->dag = dag;
    sp->params = *p;
    sp->factors = calloc(1, sizeof(tt_factor_cache));
    sp->sketches = calloc(MAX_SKETCHES, sizeof(tt_sketch));
    if (!sp->factors || !sp->sketches) {
        tt_sketch_space_free(sp);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    tt_state *init;
    tt_status r = tt_state_create(dag, &init, err);
    if (r) {
        tt_sketch_space_free(sp);
        return r;
    }
    node_list cur = {0}, next = {0};
    if ((r = push_node(&cur, init, (int)init->stages.len - 1, NULL))) {
        tt_state_free(init);
        goto out;
    }
    while (cur.n > 0 && !r) {
        gen_ctx g = {&sp->params, &next, err};
        for (int i = 0; i < cur.n && !r; i++) {
            node *nd = cur.v[i];
            if (nd->stage < 0) {
                if (sp->nsketches == MAX_SKETCHES) {
                    r = tt_err(err, TT_ERR_LIMIT, "more than %d sketches", MAX_SKETCHES);
                    break;
                }
                tt_sketch *sk = &sp->sketches[sp->nsketches];
                size_t n = nd->st->steps.len;
                sk->undefined = calloc(n ? n : 1, 1);
                if (!sk->undefined) {
                    r = tt_err(err, TT_ERR_NOMEM, "out of memory");
                    break;
                }
                for (size_t k = 0; k < n && k < MAX_STEPS; k++) {
                    sk->undefined[k] = nd->undef[k];
                    /* A split right before an rfactor: its factor is sampled too. */
                    if (k + 1 < n && nd->st->steps.data[k].kind == TT_STEP_SPLIT &&
                        nd->st->steps.data[k + 1].kind == TT_STEP_RFACTOR)
                        sk->undefined[k] = 1;
                }
                sk->state = nd->st;
                nd->st = NULL;
                sp->nsketches++;
                continue;
            }
            const sketch_rule *rules = sp->params.gpu ? gpu_rules : cpu_rules;
            size_t nrules = sp->params.gpu ? sizeof(gpu_rules) / sizeof(gpu_rules[0])
                                           : sizeof(cpu_rules) / sizeof(cpu_rules[0]);
            for (size_t k = 0; k < nrules && !r; k++) {
                rule_cond c = rules[k].cond(&g, nd);
                if (c == COND_SKIP)
                    continue;
                r = rules[k].apply(&g, nd);
                if (r && !err->msg[0])
                    tt_err(err, r, "sketch rule %zu failed", k + 1);
                if (c == COND_APPLY_SKIP_REST)
                    break;
            }
        }
        free_nodes(&cur);
        cur = next;
        memset(&next, 0, sizeof(next));
    }
out:
    free_nodes(&cur);
    free_nodes(&next);
    if (r)
        tt_sketch_space_free(sp);
    return r;
}

void tt_sketch_space_free(tt_sketch_space *sp)
{
    for (int i = 0; i < sp->nsketches; i++) {
        tt_state_free(sp->sketches[i].state);
        free(sp->sketches[i].undefined);
    }
    free(sp->sketches);
    if (sp->factors) {
        for (int i = 0; i < sp->factors->n; i++)
            free(sp->factors->e[i].schemes);
        free(sp->factors->e);
        free(sp->factors);
    }
    memset(sp, 0, sizeof(*sp));
}

/* ---- random annotation (search.md C5) ---- */

int tt__sketch_rand_below(tt_rng *rng, int n)
{
    return n > 0 ? (int)tt_rng_below(rng, (uint64_t)n) : 0;
}

/* Iterators of the stage `stage` is attached to, where it may be computed (Ansor's
 * GetComputeLocationCandidates).  Pairs (stage, iter) go to out; returns the count. */
int tt__sketch_location_candidates(const tt_state *st, int stage, int (*out)[2], int max)
{
    int target = tt_access_single_consumer(st, stage);
    if (target < 0)
        return 0;
    const tt_stage *tg = &st->stages.data[target];
    bool target_attached = tg->at == TT_AT_ITER;
    bool tiled = tt_access_is_tiled(st, target), seen_reduce = false;
    int n = 0;
    for (int i = 0; i < tg->niters && n < max; i++) {
        const tt_iter *it = &tg->iters[i];
        if (it->kind == TT_ITER_REDUCE) {
            seen_reduce = true;
            if (!tiled)
                break;
        } else if (seen_reduce) {
            break;
        }
        if (it->ann == TT_ANN_UNROLL)
            break;
        if (it->extent == 1)
            continue;
        size_t len = strlen(it->name);
        if (target_attached && it->kind == TT_ITER_SPATIAL && len >= 2 &&
            !strcmp(it->name + len - 2, ".0"))
            continue;
        out[n][0] = target;
        out[n++][1] = i;
        if (tt_access_has_attached(st, target, i))
            break;
    }
    if (target_attached) {
        int tt2, ti;
        tt_access_attach_point(st, target, &tt2, &ti);
        if (tt2 >= 0) {
            const tt_stage *t2 = &st->stages.data[tt2];
            for (int i = 0; i < t2->niters && n < max; i++) {
                if (t2->iters[i].kind == TT_ITER_REDUCE || tt_access_has_attached(st, tt2, i))
                    break;
                out[n][0] = tt2;
                out[n++][1] = i;
            }
        }
    }
    return n;
}

static tt_status change_compute_location(tt_sketch_space *sp, tt_state *st, tt_rng *rng,
                                         tt_errbuf *err)
{
    if (sp->params.no_compute_location)
        return TT_OK;
    for (int s = (int)st->stages.len - 1; s >= 0; s--) {
        const tt_stage *sg = &st->stages.data[s];
        if (st->dag.ops.data[sg->op].is_placeholder || sg->at == TT_AT_INLINE)
            continue;
        if (tt_access_is_tiled(st, s) || tt_access_needs_mlt(st, s))
            continue;
        int cand[TT_MAX_ITERS * 2][2];
        int n = tt__sketch_location_candidates(st, s, cand, TT_MAX_ITERS * 2);
        int choice = tt__sketch_rand_below(rng, n + 2);
        tt_status r = TT_OK;
        if (choice == 0) {
            /* Ansor inlines only a stage already attached, so a padding stage, at the root in
             * every CPU sketch, was never inlined.  Inlined padding is what lets the code
             * generator skip the taps that fall in it (decision 47; 18% of C12's), so a stage at
             * the root is inlined too (decision 59). */
            if (!tt_access_has_reduce(st, s) && !tt_access_is_output(st, s))
                r = tt_sched_compute_inline(st, s, err);
        } else if (choice == 1) {
            if (!tt_access_is_output(st, s))
                r = tt_sched_compute_root(st, s, err);
        } else {
            r = tt_sched_compute_at(st, s, cand[choice - 2][0], cand[choice - 2][1], err);
        }
        if (r)
            return r;
    }
    return TT_OK;
}

static tt_status annotate_parallel(tt_sketch_space *sp, tt_state *st, int stage, int offset,
                                   int depth, tt_errbuf *err)
{
    if (depth > TT_MAX_STAGES)
        return TT_OK;
    const tt_stage *sg = &st->stages.data[stage];
    int64_t degree = 1;
    int first = offset, i = offset, nfuse = 0;
    for (; i < sg->niters; i++) {
        const tt_iter *it = &sg->iters[i];
        if (it->kind == TT_ITER_REDUCE || it->ann != TT_ANN_NONE)
            break;
        nfuse++;
        degree *= it->extent;
        if (degree > (int64_t)sp->params.num_cores * 16 || tt_access_has_attached(st, stage, i))
            break;
    }
    if (degree == 1 && i < sg->niters && tt_access_has_attached(st, stage, i)) {
        /* Nothing to parallelise here: try the stages computed at this iterator, then below. */
        uint32_t var = sg->iters[i].var;
        int op = sg->op;
        for (size_t k = 0; k < st->stages.len; k++) {
            const tt_stage *a = &st->stages.data[k];
            if (a->at == TT_AT_ITER && a->at_op == op && a->at_var == var) {
                tt_status r = annotate_parallel(sp, st, (int)k, 0, depth + 1, err);
                if (r)
                    return r;
            }
        }
        tt_status r = annotate_parallel(sp, st, stage, i + 1, depth + 1, err);
        if (r)
            return r;
    }
    if (nfuse <= 0)
        return TT_OK;
    if (nfuse > 1) {
        int ids[TT_MAX_ITERS];
        for (int k = 0; k < nfuse; k++)
            ids[k] = first + k;
        tt_status r = tt_sched_fuse(st, stage, ids, nfuse, err);
        if (r)
            return r;
    }
    return tt_sched_annotate(st, stage, first, TT_ANN_PARALLEL, err);
}

static tt_status init_parallel(tt_sketch_space *sp, tt_state *st, tt_errbuf *err)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        if (sg->at != TT_AT_ROOT || st->dag.ops.data[sg->op].is_placeholder)
            continue;
        tt_status r = annotate_parallel(sp, st, (int)s, 0, 0, err);
        if (r)
            return r;
    }
    return TT_OK;
}

/* Double buffering of the shared stages (PR "double_buffer"): in GPU sampling each at even odds
 * (the search and the cost model decide; Ansor's rules have no double buffering), every one
 * without `rng` (the double-buffered large tile). */
tt_status tt__sketch_double_buffer(tt_state *st, tt_rng *rng, tt_errbuf *err)
{
    for (size_t g = 0; g < st->stages.len; g++)
        if (!strcmp(st->stages.data[g].scope, "shared") && st->stages.data[g].at == TT_AT_ITER &&
            (!rng || tt__sketch_rand_below(rng, 2) == 0)) {
            tt_status r = tt_sched_pragma(st, (int)g, 0, "double_buffer", err);
            if (r)
                return r;
        }
    return TT_OK;
}

/* The innermost iterator of stage g when a vector tile may vectorise it (tt_sketch_vector_tile):
 * spatial, unannotated, 2 or 4 iterations, nothing computed at it; else -1. */
int tt__sketch_vector_tile_iter(const tt_state *st, int g)
{
    const tt_stage *sg = &st->stages.data[g];
    int k = sg->niters - 1;
    if (k < 0)
        return -1;
    const tt_iter *it = &sg->iters[k];
    bool fits = it->kind == TT_ITER_SPATIAL && it->ann == TT_ANN_NONE &&
                (it->extent == 2 || it->extent == 4) && !tt_access_has_attached(st, g, k);
    return fits ? k : -1;
}

/* The cache-write stages a vector tile applies to: local, computed at a consumer, a reduction. */
bool tt__sketch_vector_tile_stage(const tt_state *st, int g)
{
    const tt_stage *sg = &st->stages.data[g];
    return !strcmp(sg->scope, "local") && sg->at == TT_AT_ITER && tt_access_has_reduce(st, g);
}

/* Stage g's register tile vectorised (vector_tile_iter holds), and its copy-out's loop where it
 * runs as many times. */
tt_status tt__sketch_vector_tile_one(tt_state *st, int g, tt_errbuf *err)
{
    int k = tt__sketch_vector_tile_iter(st, g);
    int64_t lanes = st->stages.data[g].iters[k].extent;
    tt_status r = tt_sched_annotate(st, g, k, TT_ANN_VECTORIZE, err);
    int c = tt_state_stage_of_op(st, st->stages.data[g].at_op), ck;
    if (!r && c >= 0 && (ck = tt__sketch_vector_tile_iter(st, c)) >= 0 &&
        st->stages.data[c].iters[ck].extent == lanes)
        r = tt_sched_annotate(st, c, ck, TT_ANN_VECTORIZE, err);
    return r;
}

tt_status tt_sketch_vector_tile(tt_state *st, tt_rng *rng, tt_errbuf *err)
{
    int done = 0;
    for (size_t g = 0; g < st->stages.len; g++) {
        if (!tt__sketch_vector_tile_stage(st, (int)g) ||
            tt__sketch_vector_tile_iter(st, (int)g) < 0 || (rng && tt__sketch_rand_below(rng, 2)))
            continue;
        tt_status r = tt__sketch_vector_tile_one(st, (int)g, err);
        if (r)
            return r;
        done++;
    }
    if (!done && !rng)
        return tt_err(err, TT_ERR_NOT_FOUND, "no register tile ends in a loop of 2 or 4");
    return TT_OK;
}

static const int cpu_unroll[] = {0, 16, 64, 512};
static const int gpu_unroll[] = {0, 16, 64, 512, 1024};

int tt__sketch_unroll_value(const tt_sketch_space *sp, tt_rng *rng)
{
    return sp->params.gpu ? gpu_unroll[tt__sketch_rand_below(rng, 5)]
                          : cpu_unroll[tt__sketch_rand_below(rng, 4)];
}

static tt_status init_unroll(tt_sketch_space *sp, tt_state *st, tt_rng *rng, int min_step,
                             tt_errbuf *err)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        if (sg->at == TT_AT_INLINE || st->dag.ops.data[sg->op].is_placeholder ||
            !tt_access_has_reduce(st, (int)s))
            continue;
        char pragma[64];
        int step = tt__sketch_unroll_value(sp, rng);
        snprintf(pragma, sizeof(pragma), "auto_unroll_max_step$%d",
                 step < min_step ? min_step : step);
        tt_status r = tt_sched_pragma(st, (int)s, 0, pragma, err);
        if (r)
            return r;
    }
    return TT_OK;
}

/* Ansor rewrites the layouts of layout-free placeholders when it builds; here every constant
 * input a program reads by its loop variables gets the LR step, so what is measured is what a
 * build makes.  A program whose loops cannot carry it fails to lower and is dropped like any
 * other. */
static tt_status init_layout_rewrite(tt_state *st)
{
    for (size_t i = 0; i < st->stages.len; i++) {
        const tt_op *op = &st->dag.ops.data[st->stages.data[i].op];
        if (!op->is_placeholder || !(op->attrs & TT_OP_ATTR_CONSTANT) ||
            st->stages.data[i].layout_rewrite)
            continue;
        bool plain = false;
        for (size_t j = 0; j < st->dag.ops.len && !plain; j++)
            plain = !st->dag.ops.data[j].is_placeholder &&
                    tt_expr_reads_tensor_at_vars(&st->dag.pool, st->dag.ops.data[j].body,
                                                 (uint32_t)st->stages.data[i].op, op->shape);
        if (plain)
            tt_sched_layout_rewrite(st, (int)i, NULL); /* illegal: left as it is */
    }
    return TT_OK;
}

static tt_status init_vectorize(tt_sketch_space *sp, tt_state *st, tt_rng *rng, tt_errbuf *err)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        if (sg->at == TT_AT_INLINE || st->dag.ops.data[sg->op].is_placeholder)
            continue;
        int64_t prod = 1;
        int num = 0;
        bool tiled = tt_access_is_tiled(st, (int)s);
        while (num < sg->niters) {
            int id = sg->niters - 1 - num;
            const tt_iter *it = &sg->iters[id];
            if (tt_access_has_attached(st, (int)s, id) || it->kind == TT_ITER_REDUCE ||
                it->ann != TT_ANN_NONE || (tiled && num != 0))
                break;
            prod *= it->extent;
            if (prod > sp->params.max_vectorize)
                break;
            num++;
        }
        if (num > 1)
            num = 1 + tt__sketch_rand_below(rng, num - 1);
        tt_status r = TT_OK;
        if (num == 1) {
            r = tt_sched_annotate(st, (int)s, sg->niters - 1, TT_ANN_VECTORIZE, err);
        } else if (num > 1) {
            int ids[TT_MAX_ITERS], first = sg->niters - num;
            for (int k = 0; k < num; k++)
                ids[k] = first + k;
            r = tt_sched_fuse(st, (int)s, ids, num, err);
            if (!r)
                r = tt_sched_annotate(st, (int)s, first, TT_ANN_VECTORIZE, err);
        }
        if (r)
            return r;
    }
    return TT_OK;
}

/* ---- GPU: ThreadBind and unroll (search.md C5) ---- */

tt_status tt_sketch_check_gpu(const tt_sketch_params *p, const tt_state *st, tt_errbuf *err)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        int64_t threads = 1;
        for (int i = 0; i < sg->niters; i++) {
            const tt_iter *it = &sg->iters[i];
            if (it->ann == TT_ANN_VTHREAD && p->max_vthread > 0 && it->extent > p->max_vthread)
                return tt_err(err, TT_ERR_ILLEGAL_STEP, "vthread '%s' of extent %lld exceeds %d",
                              it->name, (long long)it->extent, p->max_vthread);
            if (it->ann == TT_ANN_THREAD_X || it->ann == TT_ANN_THREAD_Y ||
                it->ann == TT_ANN_THREAD_Z)
                threads *= it->extent;
        }
        if (p->max_threads > 0 && threads > p->max_threads)
            return tt_err(err, TT_ERR_ILLEGAL_STEP, "stage %zu uses %lld threads, more than %d", s,
                          (long long)threads, p->max_threads);
    }
    return TT_OK;
}

static bool has_ann(const tt_stage *sg, tt_ann a)
{
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].ann == a)
            return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The SP steps that shaped `stage`, in order. */
static int split_steps_of(const tt_state *st, int stage, int *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < st->steps.len && n < max; i++) {
        const tt_step *s = &st->steps.data[i];
        if (s->kind == TT_STEP_SPLIT && tt_access_final_stage(st, i, s->stage) == stage)
            out[n++] = (int)i;
    }
    return n;
}

static tt_status bind_tiled_root(tt_sketch_space *sp, tt_state *st, int s, tt_errbuf *err)
{
    const tt_sketch_params *p = &sp->params;
    int64_t total = 1;
    const tt_stage *sg = &st->stages.data[s];
    for (int i = 0; i < sg->niters; i++)
        if (sg->iters[i].kind == TT_ITER_SPATIAL)
            total *= sg->iters[i].extent;
    static const char *const level[3] = {".0", ".1", ".2"};
    static const tt_ann ann[3] = {TT_ANN_BLOCK_X, TT_ANN_VTHREAD, TT_ANN_THREAD_X};
    for (int l = 0; l < 3; l++) {
        sg = &st->stages.data[s];
        int first = l, n = 0;
        int64_t ext = 1;
        while (first + n < sg->niters && sg->iters[first + n].kind == TT_ITER_SPATIAL &&
               ends_with(sg->iters[first + n].name, level[l])) {
            ext *= sg->iters[first + n].extent;
            n++;
        }
        if (n == 0)
            return tt_err(err, TT_ERR_ILLEGAL_STEP, "no %s tile to bind to %s", level[l],
                          tt_ann_name(ann[l]));
        if (l == 1 && p->max_vthread > 0 && ext > p->max_vthread)
            return tt_err(err, TT_ERR_ILLEGAL_STEP, "vthread extent %lld exceeds %d",
                          (long long)ext, p->max_vthread);
        if (l == 2 && ext > p->max_threads)
            return tt_err(err, TT_ERR_ILLEGAL_STEP, "%lld threads per block exceed %d",
                          (long long)ext, p->max_threads);
        if (l == 2 && ext < p->warp_size && total > 2 * (int64_t)p->warp_size)
            return tt_err(err, TT_ERR_ILLEGAL_STEP, "%lld threads, fewer than a warp (%d)",
                          (long long)ext, p->warp_size);
        tt_status r = tt_sched_fuse_annotate(st, s, first, n, ann[l], err);
        if (r)
            return r;
    }
    return TT_OK;
}

tt_status tt_sketch_bind_untiled(tt_state *st, int s, int64_t warp, tt_errbuf *err)
{
    const tt_stage *sg = &st->stages.data[s];
    int n = 0;
    int64_t total = 1;
    while (n < sg->niters && sg->iters[n].kind == TT_ITER_SPATIAL &&
           sg->iters[n].ann == TT_ANN_NONE) {
        total *= sg->iters[n].extent;
        n++;
    }
    if (n == 0)
        return TT_OK; /* a scalar: one work-item */
    if (total <= warp)
        return tt_sched_fuse_annotate(st, s, 0, n, TT_ANN_THREAD_X, err);
    tt_status r = tt_sched_fuse_annotate(st, s, 0, n, TT_ANN_NONE, err);
    if (r || (r = tt_sched_split(st, s, 0, &warp, 1, true, err)) ||
        (r = tt_sched_annotate(st, s, 0, TT_ANN_BLOCK_X, err)))
        return r;
    return tt_sched_annotate(st, s, 1, TT_ANN_THREAD_X, err);
}

/* A shared stage is filled by all threads of its consumer's block: fuse, split off a vector part
 * of 1, split the rest by the consumer's thread count (a follow-fused split of its spatial tiles at
 * the thread level) and bind threadIdx.x. */
static tt_status bind_cooperative_fetch(tt_state *st, int s, tt_errbuf *err)
{
    int target, at;
    tt_access_attach_point(st, s, &target, &at);
    if (target < 0)
        return TT_OK;
    int srcs[TT_MAX_SPLIT], nsrc = 0;
    int all[TT_MAX_ITERS];
    int nall = split_steps_of(st, target, all, TT_MAX_ITERS);
    for (int k = 0; k < nall && nsrc < TT_MAX_SPLIT; k++) {
        const tt_step *sp = &st->steps.data[all[k]];
        /* Spatial tiles of SSSRRSRS have 4 inner lengths; reduce tiles have 2. */
        if (sp->nlen >= 4)
            srcs[nsrc++] = all[k];
    }
    if (nsrc == 0)
        return TT_OK;
    const tt_stage *sg = &st->stages.data[s];
    int n = sg->niters;
    int ids[TT_MAX_ITERS];
    for (int k = 0; k < n; k++)
        ids[k] = k;
    tt_status r = n > 1 ? tt_sched_fuse(st, s, ids, n, err) : TT_OK;
    int64_t one = 1;
    if (!r)
        r = tt_sched_split(st, s, 0, &one, 1, true, err);
    if (!r)
        r = tt_sched_annotate(st, s, 1, TT_ANN_VECTORIZE, err);
    if (r)
        return r;
    tt_step f;
    memset(&f, 0, sizeof(f));
    f.kind = TT_STEP_FOLLOW_FUSED_SPLIT;
    f.stage = s;
    f.iter = 0;
    f.nsrc = nsrc;
    memcpy(f.srcs, srcs, sizeof(int) * (size_t)nsrc);
    f.level = 1;
    f.factor_or_nparts = 1;
    if ((r = tt_state_apply(st, &f, err)))
        return r;
    return tt_sched_annotate(st, s, 1, TT_ANN_THREAD_X, err);
}

tt_status tt__sketch_thread_bind(tt_sketch_space *sp, tt_state *st, tt_errbuf *err)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        if (st->dag.ops.data[sg->op].is_placeholder || sg->at == TT_AT_INLINE)
            continue;
        tt_status r = TT_OK;
        if (has_ann(sg, TT_ANN_THREAD_X)) {
            /* A cross-thread reduction at the root: its outer spatial loops to blockIdx.x. */
            int n = 0;
            while (sg->at == TT_AT_ROOT && n < sg->niters && sg->iters[n].kind == TT_ITER_SPATIAL &&
                   sg->iters[n].ann == TT_ANN_NONE)
                n++;
            if (n > 0 && (r = tt_sched_fuse_annotate(st, (int)s, 0, n, TT_ANN_BLOCK_X, err)))
                return r;
            continue;
        }
        if (sg->at == TT_AT_ITER) {
            if (strcmp(sg->scope, "shared") == 0)
                r = bind_cooperative_fetch(st, (int)s, err);
        } else if (sg->niters > 0 && ends_with(sg->iters[0].name, ".0")) {
            r = bind_tiled_root(sp, st, (int)s, err);
        } else {
            r = tt_sketch_bind_untiled(st, (int)s, sp->params.warp_size, err);
        }
        if (r)
            return r;
    }
    return TT_OK;
}

tt_status tt_sketch_gpu_default(const tt_dag *dag, int warp_size, tt_state **out, tt_errbuf *err)
{
    tt_state *st;
    tt_status r = tt_state_create(dag, &st, err);
    for (int s = (int)st->stages.len - 1; s >= 0 && !r; s--)
        if (!st->dag.ops.data[st->stages.data[s].op].is_placeholder &&
            !tt_access_is_output(st, s) && !tt_access_has_reduce(st, s))
            r = tt_sched_compute_inline(st, s, err);
    for (size_t s = 0; s < st->stages.len && !r; s++) {
        const tt_stage *sg = &st->stages.data[s];
        if (!st->dag.ops.data[sg->op].is_placeholder && sg->at == TT_AT_ROOT)
            r = tt_sketch_bind_untiled(st, (int)s, warp_size > 0 ? warp_size : 32, err);
    }
    if (r) {
        tt_state_free(st);
        return r;
    }
    *out = st;
    return TT_OK;
}

bool tt_state_nested_parallel(const tt_state *st)
{
    for (size_t s = 0; s < st->stages.len; s++) {
        const tt_stage *sg = &st->stages.data[s];
        bool par = false;
        for (int i = 0; i < sg->niters; i++)
            par |= sg->iters[i].ann == TT_ANN_PARALLEL;
        if (!par || sg->at != TT_AT_ITER)
            continue;
        /* Any parallel loop at or outside the attach point, up the chain? */
        int cur = (int)s;
        for (int depth = 0; depth < TT_MAX_STAGES; depth++) {
            int t, it;
            tt_access_attach_point(st, cur, &t, &it);
            if (t < 0)
                break;
            for (int i = 0; i <= it; i++)
                if (st->stages.data[t].iters[i].ann == TT_ANN_PARALLEL)
                    return true;
            cur = t;
        }
    }
    return false;
}

int tt__sketch_divisors(int64_t n, int64_t *out, int max)
{
    /* pairs (d, n / d) up to the square root: counting to n was 18% of a GPU search round
     * (mutate_tile_size, and samples of extents of 1024 and more).  The large ones come in
     * descending order; the last `cap` of them, the smallest, are all that can be returned. */
    int64_t large[256];
    int cap = max < 256 ? max : 256, k = 0, nl = 0;
    for (int64_t d = 1; d <= n / d && k < max; d++) {
        if (n % d)
            continue;
        out[k++] = d;
        if (d != n / d && cap > 0)
            large[nl++ % cap] = n / d;
    }
    for (int i = nl - 1; i >= 0 && i >= nl - cap && k < max; i--)
        out[k++] = large[i % cap];
    return k;
}

/* A random divisor of n (1 included). */
static int64_t random_divisor(tt_rng *rng, int64_t n)
{
    int64_t d[256];
    return d[tt__sketch_rand_below(rng, tt__sketch_divisors(n, d, 256))];
}

/* RegisterTile (ours, issue #16; see tt_sketch_sample): sets the lengths of the first multi-level
 * tiling's spatial splits in `steps`.  Ansor samples every level uniformly, so a tile that keeps
 * its accumulators in registers (rows by vectors, the level above it 1) is rare among its
 * samples, and the template's fastest kernels are all of that form.  False when the stage has no
 * vector axis that the vectors divide (the sample stays as drawn). */
static bool register_tile(tt_sketch_space *sp, const tt_sketch *sk, tt_step *steps, size_t n,
                          tt_rng *rng)
{
    int ids[TT_MAX_ITERS], m = 0, stage = -1;
    for (size_t i = 0; i < n && m < TT_MAX_ITERS; i++)
        if (sk->undefined[i] == UNDEF_SPATIAL && steps[i].kind == TT_STEP_SPLIT &&
            (stage < 0 || steps[i].stage == stage)) {
            stage = steps[i].stage;
            ids[m++] = (int)i;
        }
    if (m == 0 || steps[ids[0]].nlen < 2)
        return false;
    int nl = steps[ids[0]].nlen;
    const tt_step *vec = &steps[ids[m - 1]];
    /* Stage ops index the state's own DAG, which holds the cache stages the sketch added. */
    const tt_op *op = &sk->state->dag.ops.data[sk->state->stages.data[stage].op];
    int bytes = tt_dtype_bytes(op->dtype);
    int lanes = bytes > 0 ? sp->params.vector_lanes * 4 / bytes : 0;
    int regs = sp->params.vector_regs;
    if (lanes < 2 || vec->extent <= 0 || vec->extent % lanes)
        return false;
    int row = -1;
    for (int i = m - 2; i >= 0 && row < 0; i--)
        if (steps[ids[i]].extent > 1)
            row = i;
    /* The (rows, cols) that fit, drawn uniformly. */
    int64_t pick_r[512], pick_c[512];
    int np = 0;
    for (int64_t c = 1; c <= 4 && c * lanes <= vec->extent; c++) {
        if (vec->extent % (c * lanes))
            continue;
        int64_t rmax = row < 0 ? 1 : steps[ids[row]].extent;
        for (int64_t r = 1; r <= rmax && r * c + c + 1 <= regs && np < 512; r++)
            if (rmax % r == 0) {
                pick_r[np] = r;
                pick_c[np++] = c;
            }
    }
    if (np == 0)
        return false;
    int k = tt__sketch_rand_below(rng, np);
    /* The consumer fused at level 1 holds the accumulators of levels 1 and up: those are 1 too. */
    int level = 2;
    for (size_t i = 0; i < n; i++)
        if (steps[i].kind == TT_STEP_COMPUTE_AT && steps[i].stage == stage)
            level = (steps[i].target_iter + 1) / m;
    for (int i = 0; i < m; i++) {
        tt_step *s = &steps[ids[i]];
        int64_t inner = i == m - 1 ? pick_c[k] * lanes : i == row ? pick_r[k] : 1;
        if (s->extent <= 0 || s->extent % inner)
            return false;
        for (int l = 0; l < nl; l++)
            s->lengths[l] = 1;
        s->lengths[nl - 1] = inner;
        if (level >= 2 && nl >= 3)
            s->lengths[0] = random_divisor(rng, s->extent / inner);
    }
    return true;
}

/* The length a GPU split of `extent` is also drawn as (0: none): an extent of 16 or more with no
 * divisor from 8 to 64 but itself (ViT's 197 tokens, a prime) rounded up to a multiple of 16, or of
 * 8 where that wastes over a quarter.  Its schemes whose parts below the outermost fit the extent
 * are tiles that do not divide it: the spatial ones end where the axis ends (clamped), the
 * reduction's last round is guarded (lower.c). */
static int64_t padded_extent(int64_t extent)
{
    if (extent < 16)
        return 0;
    for (int64_t d = 8; d <= 64 && d < extent; d++)
        if (extent % d == 0)
            return 0;
    int64_t up16 = (extent + 15) / 16 * 16;
    return (up16 - extent) * 4 <= extent ? up16 : (extent + 7) / 8 * 8;
}

/* A scheme of `fe` (over a padded extent) whose lengths multiply to at most `extent`, drawn
 * uniformly in a few tries; NULL when none came. */
static const int64_t *fitting_scheme(const factor_entry *fe, int n, int64_t extent, tt_rng *rng)
{
    for (int tries = 0; tries < 16 && fe->count > 0; tries++) {
        const int64_t *pick = fe->schemes + (int64_t)tt__sketch_rand_below(rng, (int)fe->count) * n;
        int64_t prod = 1;
        for (int l = 0; l < n; l++)
            prod *= pick[l];
        if (prod <= extent)
            return pick;
    }
    return NULL;
}

/* FillTileSize for one open split: a uniformly drawn factorisation; on a GPU, half the time one
 * of a padded length where the extent's divisors give poor tiles (padded_extent).  False when out
 * of memory. */
static bool draw_split(tt_sketch_space *sp, tt_step *s, tt_rng *rng)
{
    int64_t padded = sp->params.gpu ? padded_extent(s->extent) : 0;
    if (padded && tt__sketch_rand_below(rng, 2)) {
        const factor_entry *pe = schemes_of(sp, padded, s->nlen);
        const int64_t *pick = pe ? fitting_scheme(pe, s->nlen, s->extent, rng) : NULL;
        if (pick) {
            memcpy(s->lengths, pick, sizeof(int64_t) * (size_t)s->nlen);
            return true;
        }
    }
    const factor_entry *fe = schemes_of(sp, s->extent, s->nlen);
    if (!fe)
        return false;
    if (fe->count > 0)
        memcpy(s->lengths,
               fe->schemes + (int64_t)tt__sketch_rand_below(rng, (int)fe->count) * s->nlen,
               sizeof(int64_t) * (size_t)s->nlen);
    return true;
}

/* The open spatial splits of one GPU multi-level tiling, as ThreadBind binds them (bind_tiled_root:
 * level 1 of every axis fused into the vthread, level 2 into threadIdx.x), within the sketch's
 * limits: at most max_vthread virtual threads, at most max_threads work-items, and a warp or
 * more where there are over two warps of outputs. */
static bool bindable(const tt_sketch_params *p, const tt_step *steps, const int *ids, int m)
{
    int64_t vthreads = 1, threads = 1, total = 1;
    for (int i = 0; i < m; i++) {
        const tt_step *s = &steps[ids[i]];
        vthreads *= s->lengths[0];
        threads *= s->lengths[1];
        total *= s->extent;
    }
    return (p->max_vthread <= 0 || vthreads <= p->max_vthread) &&
           (p->max_threads <= 0 || threads <= p->max_threads) &&
           (threads >= p->warp_size || total <= 2 * (int64_t)p->warp_size);
}

/* GPU: each multi-level tiling's spatial splits drawn again, all together, until they bind within
 * the limits (up to 64 times; then the binding rejects them).  Drawing them independently, as
 * Ansor does, bound 1 sample in 5 of matmul 1024 (1024 work-items, 8 vthreads): over half had
 * more virtual threads than 8, a quarter fewer work-items than a warp.  Redrawing the whole group
 * keeps each tiling exactly as likely as before among those that bind: only the draws that the
 * binding would reject are skipped, before the replay that made them cost 100 us each. */
static bool draw_bindable(tt_sketch_space *sp, const tt_sketch *sk, tt_step *steps, size_t n,
                          tt_rng *rng)
{
    int spatial_levels = 0;
    for (const char *c = sp->params.structure; *c; c++)
        spatial_levels += *c == 'S';
    if (strncmp(sp->params.structure, "SSS", 3) != 0)
        return true; /* no tiled binding to fit */
    uint8_t done[MAX_STEPS] = {0};
    for (size_t first = 0; first < n && first < MAX_STEPS; first++) {
        if (done[first] || sk->undefined[first] != UNDEF_SPATIAL ||
            steps[first].kind != TT_STEP_SPLIT || steps[first].nlen != spatial_levels - 1)
            continue;
        int ids[TT_MAX_ITERS], m = 0;
        for (size_t i = first; i < n && i < MAX_STEPS && m < TT_MAX_ITERS; i++)
            if (sk->undefined[i] == UNDEF_SPATIAL && steps[i].kind == TT_STEP_SPLIT &&
                steps[i].stage == steps[first].stage && steps[i].nlen == spatial_levels - 1 &&
                steps[i].extent > 0) {
                done[i] = 1;
                ids[m++] = (int)i;
            }
        for (int tries = 0; m > 0 && tries < 64 && !bindable(&sp->params, steps, ids, m); tries++)
            for (int i = 0; i < m; i++)
                if (!draw_split(sp, &steps[ids[i]], rng))
                    return false;
    }
    return true;
}

tt_status tt_sketch_sample(tt_sketch_space *sp, int k, tt_rng *rng, tt_state **out, tt_errbuf *err)
{
    if (sp->nsketches == 0)
        return tt_err(err, TT_ERR_INTERNAL, "no sketches");
    if (k < 0 || k >= sp->nsketches)
        k = tt__sketch_rand_below(rng, sp->nsketches);
    const tt_sketch *sk = &sp->sketches[k];
    size_t n = sk->state->steps.len;
    tt_step *steps = malloc(sizeof(tt_step) * (n ? n : 1));
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (n)
        memcpy(steps, sk->state->steps.data, sizeof(tt_step) * n);
    bool drawn = true;
    for (size_t i = 0; i < n && drawn; i++)
        if (sk->undefined[i] && steps[i].kind == TT_STEP_SPLIT && steps[i].extent > 0)
            drawn = draw_split(sp, &steps[i], rng);
    if (!drawn || (sp->params.gpu && !draw_bindable(sp, sk, steps, n, rng))) {
        free(steps);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    bool reg_tile = !sp->params.gpu && sp->params.vector_lanes > 1 &&
                    tt__sketch_rand_below(rng, 2) == 0 && register_tile(sp, sk, steps, n, rng);
    tt_state *st;
    tt_status r = tt_state_replay(sp->dag, steps, n, &st, err);
    free(steps);
    if (r)
        return r;
    if (sp->params.gpu)
        r = tt__sketch_thread_bind(sp, st, err);
    else
        r = change_compute_location(sp, st, rng, err);
    if (r || (!sp->params.gpu && (r = init_parallel(sp, st, err))) ||
        (r = init_unroll(sp, st, rng, reg_tile ? 16 : 0, err)) ||
        (sp->params.gpu && (r = tt__sketch_double_buffer(st, rng, err))) ||
        (sp->params.gpu && (r = tt_sketch_vector_tile(st, rng, err))) ||
        (!sp->params.gpu && (r = init_vectorize(sp, st, rng, err))) ||
        (!sp->params.gpu && (r = init_layout_rewrite(st)))) {
        tt_state_free(st);
        return r;
    }
    if (tt_state_nested_parallel(st)) {
        tt_state_free(st);
        return tt_err(err, TT_ERR_ILLEGAL_STEP, "nested parallel loops");
    }
    if (sp->params.gpu && (r = tt_sketch_check_gpu(&sp->params, st, err))) {
        tt_state_free(st);
        return r;
    }
    int64_t shared = sp->params.gpu && sp->params.device_shared_bytes > 0
                         ? tt_lower_scope_bytes(st, "shared")
                         : 0;
    if (shared < 0 || shared > sp->params.device_shared_bytes) {
        tt_state_free(st);
        return shared < 0 ? tt_err(err, TT_ERR_ILLEGAL_STEP, "the sample does not lower")
                          : tt_err(err, TT_ERR_ILLEGAL_STEP,
                                   "the sample's shared stages take %lld bytes of local memory, "
                                   "more than the device's %lld",
                                   (long long)shared, (long long)sp->params.device_shared_bytes);
    }
    if (sp->params.gpu) {
        /* copies first: the padding is judged by the reads of local memory that remain */
        tt__sketch_register_copy(&sp->params, &st, rng);
        tt__sketch_pad_shared(&sp->params, &st, -1, rng);
    }
    *out = st;
    return TT_OK;
}
