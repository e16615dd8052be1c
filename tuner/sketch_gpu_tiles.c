/* The fixed GEMM-like tilings of GPU sketches (sketch.h, tt_sketch_gpu_tiled): the build's
 * default without records and the tuner's large starting tiles, filled in as hand-written GEMMs
 * are, their bank conflicts judged by the OpenCL code generator's count. */
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "codegen/codegen.h"
#include "sketch.h"
#include "sketch_int.h"

/* The largest divisor of n that is at most cap (1 at least). */
static int64_t divisor_at_most(int64_t n, int64_t cap)
{
    for (int64_t d = cap < n ? cap : n; d > 1; d--)
        if (n % d == 0)
            return d;
    return 1;
}

/* The tile of an axis of `extent` that does not divide it: up to `rcap` outputs a thread times
 * up to `tcap` threads, the largest whose last tile wastes at most a quarter of the axis, and
 * false when that is not more than twice `have` (the tile the divisors make).  ViT's 197 tokens
 * (a prime) had one row a work-group (each group read all of B for it) or the naive binding;
 * padded to 7 tiles of 32 rows, the last moved back to end at row 197 (clamped, lower.c),
 * no element is guarded. */
static bool padded_tile(int64_t extent, int64_t rcap, int64_t tcap, int64_t have, int64_t *r,
                        int64_t *t)
{
    int64_t best = 0;
    for (int64_t rr = rcap; rr >= 1; rr /= 2)
        for (int64_t tt = tcap; tt >= 1; tt /= 2) {
            int64_t tile = rr * tt, tiles = (extent + tile - 1) / tile;
            if (tile <= extent && (tiles * tile - extent) * 4 <= extent && tile > best) {
                best = tile;
                *r = rr;
                *t = tt;
            }
        }
    return best >= 2 * have;
}

/* How deep a reduction of `extent` is staged, up to `cap`: its largest divisor, or where that is
 * under half of what could be, the largest depth (halving from `cap`) whose last round wastes at
 * most a quarter: a product over ViT's 197 tokens is 13 rounds of 16, the last guarded, not 197
 * rounds of 1. */
static int64_t reduce_depth(int64_t extent, int64_t cap)
{
    int64_t d = divisor_at_most(extent, cap);
    for (int64_t c = cap < extent ? cap : extent; c >= 2 * d; c /= 2) {
        int64_t rounds = (extent + c - 1) / c;
        if ((rounds * c - extent) * 4 <= extent)
            return c;
    }
    return d;
}

/* Fills the open splits of a GPU sketch as a hand-written GEMM would: from the innermost spatial
 * axis outwards, up to `per_axis` outputs of each axis per thread (the register tile, S4), that
 * `vthreads` times over (S1: the copies a thread computes lie a row of threads apart, as in
 * TVM's and cuBLAS's conflict-free GEMMs), at most `regs` outputs a thread in all, and up to
 * `axis_threads` threads of each axis (at most `threads` in all, *group_threads: S2); the reduction
 * staged through shared memory at least 16 deep where its axes allow (R1, from the innermost axis
 * outwards: a matmul's k by 16, a 3x3 convolution's window whole and 2 of its channels).  Staged by
 * the window's row alone, an NCHW convolution at 7x7x512 ran 1536 rounds of fetch, two barriers and
 * 12 products a thread; now 256 rounds of 72, and the rows of the window's halo are fetched once,
 * not three times.  Not `deep`: the innermost reduce axis alone, up to 16.  Returns the
 * work-groups it makes. */
static int64_t fill_gemm_like(tt_step *steps, const uint8_t *undef, size_t n, int64_t threads,
                              int64_t regs, int64_t per_axis, int64_t vthreads,
                              int64_t axis_threads, bool deep, int64_t *group_threads)
{
    int64_t groups = 1, depth = 16, budget = threads;
    /* a reduction that the innermost axis stages in a few rounds stays so (a depthwise 3x3
     * convolution: 3 rounds of 3); staged deeper, its tiles would grow for little */
    int64_t reduce = 1, inner = 0;
    for (size_t k = n; k-- > 0;)
        if (undef[k] && undef[k] != UNDEF_SPATIAL && steps[k].kind == TT_STEP_SPLIT &&
            steps[k].nlen == 2 && steps[k].extent > 0) {
            reduce *= steps[k].extent;
            if (!inner)
                inner = reduce_depth(steps[k].extent, 16);
        }
    if (inner && (reduce + inner - 1) / inner <= 16)
        deep = false;
    for (size_t k = n; k-- > 0;) {
        tt_step *s = &steps[k];
        if (!undef[k] || s->kind != TT_STEP_SPLIT || s->extent <= 0)
            continue;
        for (int l = 0; l < s->nlen; l++)
            s->lengths[l] = 1;
        if (undef[k] == UNDEF_SPATIAL && s->nlen == 4) {
            int64_t rcap = regs < per_axis ? regs : per_axis;
            int64_t tcap = threads < axis_threads ? threads : axis_threads;
            int64_t r = divisor_at_most(s->extent, rcap);
            int64_t v = divisor_at_most(s->extent / r, vthreads < regs / r ? vthreads : regs / r);
            int64_t t = divisor_at_most(s->extent / (r * v), tcap);
            int64_t pr, pt;
            if (padded_tile(s->extent, rcap, tcap, r * v * t, &pr, &pt)) {
                r = pr;
                v = 1;
                t = pt;
            }
            s->lengths[0] = v;
            s->lengths[1] = t;
            s->lengths[3] = r;
            regs /= r * v;
            threads /= t;
            groups *= (s->extent + r * v * t - 1) / (r * v * t);
        } else if (undef[k] != UNDEF_SPATIAL && s->nlen == 2 && depth > 1) {
            s->lengths[0] = reduce_depth(s->extent, depth);
            depth = deep ? (depth + s->lengths[0] - 1) / s->lengths[0] : 1;
        }
    }
    *group_threads = budget / threads;
    return groups;
}

/* The vector part of each cooperative fetch (bind_cooperative_fetch splits off 1) set to 4 where
 * the fetch's extent allows, and the state replayed with it. */
static tt_status fetch_by_four(const tt_dag *dag, tt_state **st, tt_errbuf *err)
{
    size_t n = (*st)->steps.len;
    tt_step *steps = malloc(sizeof(tt_step) * (n ? n : 1));
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    memcpy(steps, (*st)->steps.data, sizeof(tt_step) * n);
    int changed = 0;
    for (size_t k = 0; k + 1 < n; k++) {
        tt_step *s = &steps[k];
        const tt_step *next = &steps[k + 1];
        if (s->kind == TT_STEP_SPLIT && s->nlen == 1 && s->lengths[0] == 1 && s->extent % 4 == 0 &&
            next->kind == TT_STEP_ANNOTATE && next->stage == s->stage &&
            next->ann == TT_ANN_VECTORIZE &&
            !strcmp((*st)->stages.data[s->stage].scope, "shared")) {
            s->lengths[0] = 4;
            changed++;
        }
    }
    tt_state *re = NULL;
    tt_status r = changed ? tt_state_replay(dag, steps, n, &re, err)
                          : tt_err(err, TT_ERR_NOT_FOUND, "no fetch of the large tile takes 4");
    free(steps);
    if (r)
        return r;
    tt_state_free(*st);
    *st = re;
    return TT_OK;
}

/* The limits a state is judged by: the sketch's work-items and virtual threads, local memory
 * unlimited (callers compare it against their own cap, to learn how much a tiling takes). */
static void judging_limits(const tt_sketch_params *p, tt_gpu_limits *lim)
{
    tt_gpu_limits_default(lim);
    if (p->max_threads > 0)
        lim->max_threads = lim->max_block[0] = lim->max_block[1] = lim->max_block[2] =
            p->max_threads;
    if (p->max_vthread > 0)
        lim->max_vthread = p->max_vthread;
    lim->max_shared_bytes = 0;
}

/* `st` lowered and emitted within `lim`, its statistics in *stats and its program through *prog
 * when prog is not NULL; false when it does not lower or emit. */
static bool emitted_stats(const tt_state *st, const tt_gpu_limits *lim, tt_opencl_stats *stats,
                          tt_program **prog)
{
    tt_program *p;
    if (tt_lower(st, &p, NULL))
        return false;
    char *text = NULL;
    bool ok = !tt_codegen_opencl(p, "k", lim, &text, NULL, stats, NULL);
    free(text);
    if (prog && ok)
        *prog = p;
    else
        tt_program_free(p);
    return ok;
}

/* Local memory a padded tiling may take: the target's, else what OpenCL GPUs commonly offer. */
static int64_t padding_cap(const tt_sketch_params *p)
{
    tt_gpu_limits lim;
    tt_gpu_limits_default(&lim);
    return p->max_shared_bytes > 0 ? p->max_shared_bytes : lim.max_shared_bytes;
}

/* Shared stage g's rows padded (SA: factor 32, stride row + pad) when that makes the worst read
 * of local memory take fewer passes than *ways and stays within the cap.  A stride of row + 4
 * keeps rows a multiple of 16 bytes (4-float fetches stay aligned) and is tried first; row + 1
 * spreads a column read by 32 work-items over all 32 banks where + 4 reaches only 8.  On success
 * *st, *prog and *ways are the padded state's. */
static bool pad_stage(const tt_sketch_params *p, tt_state **st, int g, tt_program **prog, int *ways)
{
    const tt_stage *sg = &(*st)->stages.data[g];
    const char *name = (*st)->dag.ops.data[sg->op].name;
    const tt_buffer *b = NULL;
    for (size_t k = 0; k < (*prog)->bufs.len && !b; k++)
        if (!strcmp((*prog)->bufs.data[k].name, name))
            b = &(*prog)->bufs.data[k];
    int64_t row = b && b->ndim >= 2 ? b->shape[b->ndim - 1] : 0;
    if (row <= 0 || b->strides[b->ndim - 2] != row)
        return false; /* one-dimensional, or padded already */
    tt_gpu_limits lim;
    judging_limits(p, &lim);
    static const int pads[] = {4, 1};
    for (size_t i = 0; i < sizeof(pads) / sizeof(pads[0]); i++) {
        tt_state *padded;
        if (tt_state_clone(*st, &padded))
            return false;
        tt_program *pp = NULL;
        tt_opencl_stats stats;
        bool better = !tt_sched_storage_align(padded, g, b->ndim - 2, 32,
                                              (int)((row + pads[i]) % 32), NULL) &&
                      emitted_stats(padded, &lim, &stats, &pp) && stats.local_bank_ways < *ways &&
                      stats.shared_bytes <= padding_cap(p);
        if (better) {
            tt_state_free(*st);
            tt_program_free(*prog);
            *st = padded;
            *prog = pp;
            *ways = stats.local_bank_ways;
            return true;
        }
        tt_program_free(pp);
        tt_state_free(padded);
    }
    return false;
}

int tt__sketch_pad_shared(const tt_sketch_params *p, tt_state **st, int only, tt_rng *rng)
{
    if (rng && tt_rng_uniform(rng) < 0.5)
        return 0;
    bool shared = false;
    for (size_t g = 0; g < (*st)->stages.len && !shared; g++)
        shared = !strcmp((*st)->stages.data[g].scope, "shared") && (only < 0 || (int)g == only);
    if (!shared)
        return 0; /* nothing to pad: spare the lowering */
    int64_t bound = tt_lower_scope_bytes(*st, "shared");
    if (bound < 0 || bound > padding_cap(p))
        return 0; /* no room to pad, told by the buffers alone (most GPU samples) */
    tt_gpu_limits lim;
    judging_limits(p, &lim);
    tt_opencl_stats stats;
    tt_program *prog = NULL;
    if (!emitted_stats(*st, &lim, &stats, &prog) || stats.shared_bytes > padding_cap(p)) {
        tt_program_free(prog); /* judged by the caller's checks; no room to pad */
        return 0;
    }
    int ways = stats.local_bank_ways, padded = 0;
    for (size_t g = 0; g < (*st)->stages.len && ways > 1; g++)
        if ((only < 0 || (int)g == only) && !strcmp((*st)->stages.data[g].scope, "shared"))
            padded += pad_stage(p, st, (int)g, &prog, &ways);
    tt_program_free(prog);
    return padded;
}

/* The innermost staged reduction of filled `steps` split 4 deep below its staged depth (k.1 16,
 * k.2 1 become 4 and 4), where a register copy of an input 4 floats along it is filled
 * (register_cache); false where the depth is not a multiple of 4 of 8 or more. */
static bool reduce_by_four(tt_step *steps, const uint8_t *undef, size_t n)
{
    for (size_t k = n; k-- > 0;) {
        tt_step *s = &steps[k];
        if (!undef[k] || undef[k] == UNDEF_SPATIAL || s->kind != TT_STEP_SPLIT || s->nlen != 2)
            continue;
        if (s->lengths[0] < 8 || s->lengths[0] % 4 || s->lengths[1] != 1)
            return false;
        s->lengths[0] /= 4;
        s->lengths[1] = 4;
        return true;
    }
    return false;
}

/* The iterator NAME.L of the innermost reduce axis of stage c's op, or -1. */
static int reduce_level(const tt_state *st, int c, int level)
{
    const tt_op *op = &st->dag.ops.data[st->stages.data[c].op];
    if (op->nreduce == 0)
        return -1;
    char name[96];
    snprintf(name, sizeof(name), "%s.%d", tt_var_name(&st->dag.pool, op->raxis[op->nreduce - 1]),
             level);
    for (int i = 0; i < st->stages.data[c].niters; i++)
        if (!strcmp(st->stages.data[c].iters[i].name, name))
            return i;
    return -1;
}

/* Whether shared stage g is one a register copy applies to: its consumer c reads it along the
 * innermost reduction, whose middle tile (NAME.1) has at least 2 steps below it (NAME.2). */
static bool copy_applies(const tt_state *st, int g, int *c, int *mid)
{
    int at, inner;
    if (strcmp(st->stages.data[g].scope, "shared") != 0)
        return false;
    tt_access_attach_point(st, g, c, &at);
    if (*c < 0 || !tt_access_reads_along_innermost_reduce(st, *c, g))
        return false;
    *mid = reduce_level(st, *c, 1);
    inner = reduce_level(st, *c, 2);
    return *mid >= 0 && inner > *mid && st->stages.data[*c].iters[inner].extent >= 2;
}

int tt__sketch_register_copy(const tt_sketch_params *p, tt_state **st, tt_rng *rng)
{
    if (rng && tt_rng_uniform(rng) < 0.5)
        return 0;
    int c, mid, want = 0;
    for (size_t g = 0; g < (*st)->stages.len; g++)
        want += copy_applies(*st, (int)g, &c, &mid);
    if (!want)
        return 0; /* spare the emission */
    int64_t bound = tt_lower_scope_bytes(*st, "shared");
    if (bound < 0 || bound > padding_cap(p))
        return 0; /* beyond local memory already: the search rejects it, told by its buffers */
    tt_gpu_limits lim;
    judging_limits(p, &lim);
    tt_opencl_stats before, after;
    tt_state *work = NULL;
    if (!emitted_stats(*st, &lim, &before, NULL) || before.shared_bytes > padding_cap(p) ||
        tt_state_clone(*st, &work))
        return 0;
    int copies = 0;
    for (size_t g = 0; g < work->stages.len; g++) {
        if (!copy_applies(work, (int)g, &c, &mid))
            continue;
        /* the copy is stage g + 1; the consumer moves one on */
        if (tt_sched_cache_read(work, (int)g, "local", &c, 1, NULL) ||
            tt_sched_compute_at(work, (int)g + 1, c + 1, mid, NULL) ||
            tt_sched_annotate(work, (int)g + 1, work->stages.data[g + 1].niters - 1,
                              TT_ANN_VECTORIZE, NULL)) {
            copies = 0;
            break;
        }
        copies++;
        g++;
    }
    if (!copies || !emitted_stats(work, &lim, &after, NULL) ||
        after.vector_loops < before.vector_loops + copies) {
        tt_state_free(work);
        return 0; /* the copies would be filled one float at a time: no gain */
    }
    tt_state_free(*st);
    *st = work;
    return copies;
}

/* The fixed large tile's register copies (TT_GPU_TILE_LARGE_REGISTERS), all of them;
 * NOT_FOUND where none applies or none fills by vectors. */
static tt_status register_cache(const tt_sketch_params *p, tt_state **st, tt_errbuf *err)
{
    int c, mid, want = 0;
    for (size_t g = 0; g < (*st)->stages.len; g++)
        want += copy_applies(*st, (int)g, &c, &mid);
    if (!want)
        return tt_err(err, TT_ERR_NOT_FOUND, "no input is read along the innermost reduction");
    if (tt__sketch_register_copy(p, st, NULL) != want)
        return tt_err(err, TT_ERR_NOT_FOUND, "the register copies do not fill by vectors");
    return TT_OK;
}

/* The state of `steps` (a sketch's, filled) with the finishing touches of tile `size`, checked
 * against the sketch's GPU limits. */
static tt_status tiled_state(const tt_dag *dag, tt_sketch_space *sp, tt_gpu_tile size,
                             const tt_step *steps, size_t n, tt_state **out, tt_errbuf *err)
{
    tt_state *st = NULL;
    tt_status e = tt_state_replay(dag, steps, n, &st, err);
    if (!e)
        e = tt__sketch_thread_bind(sp, st, err);
    if (!e && size >= TT_GPU_TILE_LARGE_FLOAT4)
        e = fetch_by_four(dag, &st, err);
    if (!e && size >= TT_GPU_TILE_LARGE_FLOAT4)
        e = tt_sketch_vector_tile(st, NULL, err);
    if (!e && size >= TT_GPU_TILE_LARGE_FLOAT4)
        tt__sketch_pad_shared(&sp->params, &st, -1, NULL);
    if (!e && size >= TT_GPU_TILE_LARGE_DOUBLE_BUFFER)
        e = tt__sketch_double_buffer(st, NULL, err);
    if (!e && size == TT_GPU_TILE_LARGE_REGISTERS)
        e = register_cache(&sp->params, &st, err);
    for (size_t g = 0; !e && g < st->stages.len; g++) {
        const tt_stage *sg = &st->stages.data[g];
        if (sg->at != TT_AT_INLINE && !st->dag.ops.data[sg->op].is_placeholder &&
            tt_access_has_reduce(st, (int)g))
            e = tt_sched_pragma(st, (int)g, 0, "auto_unroll_max_step$512", err);
    }
    if (!e)
        e = tt_sketch_check_gpu(&sp->params, st, err);
    if (e && st) {
        tt_state_free(st);
        st = NULL;
    }
    *out = st;
    return e;
}

/* Local memory a tiled default may take before its reduction is staged shallower, unless the
 * target names its own (-max_shared_memory_per_block): 32 KiB, the least of the GPUs a build
 * without a device in mind may meet (Mali; NVIDIA has 48, AMD and Intel 64).  MobileNet-V2's
 * depthwise convolutions staged whole took 65 KiB. */
enum { TILED_SHARED_CAP = 32 << 10 };

tt_status tt_sketch_gpu_tiled(const tt_dag *dag, const tt_sketch_params *p, tt_gpu_tile size,
                              tt_state **out, tt_errbuf *err)
{
    /* the large tiles are shared-memory tiles (and vector fetches into them) */
    if (size != TT_GPU_TILE_DEFAULT && !p->shared_memory)
        return tt_err(err, TT_ERR_NOT_FOUND,
                      "the large tilings stage through local memory, which this target "
                      "does not use");
    tt_sketch_space sp;
    tt_status r = tt_sketch_space_init(&sp, dag, p, err);
    if (r)
        return r;
    /* threads per group and register tile, larger first, while the work-groups number under 64.
     * On the H200, BERT's 128x768x768 products ran in 40 us a call with 128 threads of 4
     * outputs (192 groups) and in 50 us with 64 threads of 16 (96 groups): a large GPU wants
     * the threads more than the register tile. */
    static const int64_t shapes[][2] = {{256, 16}, {128, 16}, {128, 4}, {64, 4}, {64, 1}, {32, 1}};
    /* the large tile has one shape and no fallback: where it makes too few work-groups the
     * default's smaller ones are the better start */
    static const int64_t large[][2] = {{256, 64}};
    bool is_large = size != TT_GPU_TILE_DEFAULT;
    const int64_t(*try)[2] = is_large ? large : shapes;
    size_t ntry = is_large ? 1 : sizeof(shapes) / sizeof(shapes[0]);
    /* the large tile's 8x8 outputs a thread are 2x2 virtual threads of 4x4: a row of 16
     * threads reads B's tile 4 floats apart (2 words a bank, 128-bit reads without conflict)
     * rather than 8 (4 words a bank) */
    int64_t per_axis = 4, vthreads = is_large ? 2 : 1;
    int64_t cap = p->max_shared_bytes > 0 ? p->max_shared_bytes : TILED_SHARED_CAP;
    r = tt_err(err, TT_ERR_NOT_FOUND, "no GPU sketch of the workload takes a %s tiling",
               is_large ? "large" : "default");
    for (int k = 0; k < sp.nsketches && r; k++) {
        const tt_sketch *sk = &sp.sketches[k];
        size_t n = sk->state->steps.len;
        tt_step *steps = malloc(sizeof(tt_step) * (n ? n : 1));
        if (!steps) {
            r = tt_err(err, TT_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t c = 0; c < ntry && r; c++) {
            /* 16 threads an axis make square tiles of threads; where the outer axes cannot
             * take their share (a 7x7 feature map: 7 has no divisor from 2 to 4) the group
             * would be under a warp, and the innermost axis takes the threads alone (on
             * ResNet-18's 7x7x512 convolutions, 64 threads of 4 channels rather than the naive
             * binding, 16 threads being refused).  The reduction is staged deep unless that
             * takes more local memory than TILED_SHARED_CAP, and a shape that takes more even
             * so gives way to the next. */
            for (int deep = 1; deep >= 0 && r; deep--) {
                if (n)
                    memcpy(steps, sk->state->steps.data, sizeof(tt_step) * n);
                /* the last, smallest shape within a limit under a warp of 32 (a target's
                 * -max_num_threads=16: every shape was refused, and the naive binding taken) */
                int64_t threads = try[c][0], group_threads;
                if (c + 1 == ntry && !is_large && p->max_threads > 0 && threads > p->max_threads)
                    threads = p->max_threads;
                int64_t groups = fill_gemm_like(steps, sk->undefined, n, threads, try[c][1],
                                                per_axis, vthreads, 16, deep, &group_threads);
                if (group_threads < p->warp_size && threads > 16)
                    groups = fill_gemm_like(steps, sk->undefined, n, threads, try[c][1], per_axis,
                                            vthreads, threads, deep, &group_threads);
                if (groups < 64 && (c + 1 < ntry || is_large))
                    break;
                if (size == TT_GPU_TILE_LARGE_REGISTERS &&
                    !reduce_by_four(steps, sk->undefined, n)) {
                    r = tt_err(err, TT_ERR_NOT_FOUND,
                               "the reduction is not staged a multiple of 4 deep");
                    continue;
                }
                tt_state *st;
                if (tiled_state(dag, &sp, size, steps, n, &st, err))
                    continue;
                tt_opencl_stats stats;
                tt_gpu_limits lim;
                judging_limits(p, &lim);
                if ((deep || c + 1 < ntry) && emitted_stats(st, &lim, &stats, NULL) &&
                    stats.shared_bytes > cap) {
                    tt_state_free(st);
                    continue;
                }
                *out = st;
                r = TT_OK;
            }
        }
        free(steps);
    }
    tt_sketch_space_free(&sp);
    return r;
}

void tt_sketch_gpu_build_threads(const tt_target *target, int *threads, int *warp)
{
    int n = target->max_num_threads;
    *threads = n > 0 && n < 256 ? n : 256;
    *warp = tt_sketch_gpu_warp(*threads, target->thread_warp_size);
}

tt_status tt_sketch_gpu_build_default(const tt_dag *dag, const tt_target *target, tt_state **out,
                                      char *desc, size_t ndesc, tt_errbuf *err)
{
    /* a tiled schedule where the workload has one (matmul, convolutions: 5-20x the naive one on
     * a GPU), else the naive binding */
    int threads, warp;
    tt_sketch_gpu_build_threads(target, &threads, &warp);
    tt_sketch_params p;
    tt_sketch_params_gpu(&p, threads, warp);
    p.shared_memory = tt_target_fast_local_memory(target);
    p.max_shared_bytes = target->max_shared_memory_per_block;
    tt_errbuf why = {{0}};
    if (tt_sketch_gpu_tiled(dag, &p, TT_GPU_TILE_DEFAULT, out, &why) == TT_OK) {
        if (desc)
            snprintf(desc, ndesc, "the GPU default tiling (up to %d work-items a group)", threads);
        return TT_OK;
    }
    if (desc)
        snprintf(desc, ndesc, "the naive GPU binding (warps of %d): %s", warp, why.msg);
    return tt_sketch_gpu_default(dag, warp, out, err);
}
