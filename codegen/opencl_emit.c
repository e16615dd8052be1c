/* Loop IR -> OpenCL C.
 *
 * Kernels: the program's root is a nest of ALLOCs (workspace intermediates) around a sequence of
 * root loop nests; each nest is one kernel, launched in order.
 *
 * Bindings: a loop bound to a GPU axis is not a loop on the device.  Its launch extent is the
 * largest extent bound to that axis in the kernel; a loop of that extent reads the id
 * (get_group_id / get_local_id), a shorter one is guarded by `if (id < extent)`.  Several loops may
 * share an axis: a `shared` buffer's cooperative fill, computed inside the consumer's thread loop,
 * binds threadIdx.x again and every work-item fills its own part.  Lowering relaxes a shared
 * buffer's region over the thread loops around it (schedule/lower.c), so the fill does not depend
 * on which work-item runs it.
 *
 * Memory: `shared` buffers are __local arrays declared at the kernel's top; each fill is fenced by
 * barriers (before: the previous iteration's readers are done; after: the data is visible).
 * A double-buffered loop's fetch of the next tiles (a `prefetch` sequence) has none: it writes the
 * halves no work-item reads in this iteration, and one barrier ends each iteration.
 * Other buffers computed inside a kernel are per-work-item private arrays.
 *
 * What cannot run on a GPU is refused with the loop or buffer named: an axis bound twice in one
 * nest outside a shared fill, a thread loop inside a private buffer's computation, a store that
 * several work-items would race on (a reduce axis bound to threads: cross-thread reduction), a
 * barrier under thread-dependent control flow, limits exceeded. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"
#include "cl_artifact.h"
#include "codegen.h"

enum { AX_BX, AX_BY, AX_BZ, AX_TX, AX_TY, AX_TZ, AX_N };

typedef struct {
    uint32_t var;
    int fill_depth; /* shared fills enclosing the loop when it was entered */
} bound_loop;

typedef struct {
    const tt_program *p;
    tt_gpu_limits lim;
    tt_errbuf *err;
    tt_status status;
    tt_strbuf body;   /* the kernel being emitted */
    tt_strbuf decls;  /* its __local declarations */
    tt_strbuf source; /* all kernels */
    char **buf_name, **var_name;
    bool *workspace;
    bool long_index; /* int64 data somewhere: integers are `long` */
    bool fp64;
    int indent;
    /* per kernel */
    int64_t launch[AX_N];
    int64_t shared_bytes, private_bytes;
    bound_loop active[AX_N];
    int fill_depth;           /* shared fills around the current statement */
    int private_fill;         /* private-buffer computations around it */
    int divergent;            /* thread-dependent conditions around it */
    int auto_unroll;          /* auto_unroll_max_step in effect */
    size_t barrier_at;        /* body length right after the last barrier */
    uint32_t vec_var;         /* inside an explicitly vectorised loop: its variable */
    int vec_lanes;            /* and its lanes (0 = scalar code) */
    const struct xreduce *xr; /* inside a cross-thread reduction's partial loop */
    int xr_acc;               /* its accumulator's number */
    int nreductions;          /* work-group reductions emitted (names of their buffers) */
    /* Register staging of a double-buffered fetch (emit_staged_loop): 1 while its loads go to
     * private registers, 2 while those go to local memory; its stores numbered in order, the
     * serial loops around the current one, each staging array's elements and type. */
    int staging, nstaged, stage_store;
    int nstage_loops;
    uint32_t stage_var[8];
    int64_t stage_ext[8];
    int64_t stage_size[16];
    int stage_lanes[16];
    tt_dtype stage_type[16];
    bool stage_failed;
    tt_opencl_stats stats; /* accumulated */
} cl_emitter;

static tt_status fail(cl_emitter *e, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tt_status fail(cl_emitter *e, tt_status s, const char *fmt, ...)
{
    if (e->status)
        return e->status;
    va_list ap;
    va_start(ap, fmt);
    tt_verr(e->err, s, fmt, ap);
    va_end(ap);
    e->status = s;
    return s;
}

/* fail() for a broken limit, recording which (tt_opencl_stats.broke) when it is the first error. */
static void fail_limit(cl_emitter *e, tt_gpu_limit_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_limit(cl_emitter *e, tt_gpu_limit_kind kind, const char *fmt, ...)
{
    if (e->status)
        return;
    va_list ap;
    va_start(ap, fmt);
    tt_verr(e->err, TT_ERR_LIMIT, fmt, ap);
    va_end(ap);
    e->status = TT_ERR_LIMIT;
    e->stats.broke = kind;
}

static int axis_of(tt_ann a)
{
    switch (a) {
    case TT_ANN_BLOCK_X: return AX_BX;
    case TT_ANN_BLOCK_Y: return AX_BY;
    case TT_ANN_BLOCK_Z: return AX_BZ;
    case TT_ANN_THREAD_X: return AX_TX;
    case TT_ANN_THREAD_Y: return AX_TY;
    case TT_ANN_THREAD_Z: return AX_TZ;
    default: return -1;
    }
}

static const char *const axis_name[AX_N] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                            "threadIdx.x", "threadIdx.y", "threadIdx.z"};

static char *ident(const char *name, uint32_t id)
{
    tt_strbuf sb = {0};
    if (!name || !name[0] || isdigit((unsigned char)name[0]))
        tt_strbuf_append(&sb, "v");
    for (const char *c = name ? name : ""; *c; c++) {
        char ch = isalnum((unsigned char)*c) ? *c : '_';
        tt_strbuf_appendn(&sb, &ch, 1);
    }
    tt_strbuf_printf(&sb, "_%u", id);
    return tt_strbuf_take(&sb);
}

static const char *ctype(cl_emitter *e, tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return "float";
    case TT_DT_FLOAT64: return "double";
    case TT_DT_INT32: return "int";
    case TT_DT_INT64: return e->long_index ? "long" : "int";
    default: return "int"; /* bool values */
    }
}

/* Type of a buffer's elements in memory (bool is a byte; int64 data stays long). */
static const char *mtype(tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return "float";
    case TT_DT_FLOAT64: return "double";
    case TT_DT_INT32: return "int";
    case TT_DT_INT64: return "long";
    default: return "uchar";
    }
}

static tt_cl_elem cl_elem(tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return TT_CL_F32;
    case TT_DT_FLOAT64: return TT_CL_F64;
    case TT_DT_INT32: return TT_CL_I32;
    case TT_DT_INT64: return TT_CL_I64;
    default: return TT_CL_U8;
    }
}

static void line(cl_emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(cl_emitter *e, const char *fmt, ...)
{
    tt_strbuf_indent(&e->body, e->indent * 2);
    va_list ap;
    va_start(ap, fmt);
    tt_strbuf_vprintf(&e->body, fmt, ap);
    va_end(ap);
    tt_strbuf_append(&e->body, "\n");
}

/* ---- expressions ---- */

static tt_dtype dtype_of(cl_emitter *e, tt_eid id)
{
    return (tt_dtype)tt_expr_get(&e->p->pool, id)->dtype;
}

/* True if integer expression `id` is never negative: loop variables are not, and sums,
 * products, quotients and remainders of such values are not either. */
static bool nonneg(cl_emitter *e, tt_eid id)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: return n->imm.i >= 0;
    case TT_EXPR_VAR: return true;
    case TT_EXPR_ADD:
    case TT_EXPR_MUL:
    case TT_EXPR_DIV:
    case TT_EXPR_MOD:
    case TT_EXPR_MAX: return nonneg(e, n->a) && nonneg(e, n->b);
    case TT_EXPR_MIN: return nonneg(e, n->a) && nonneg(e, n->b);
    default: return false;
    }
}

static void emit_expr(cl_emitter *e, tt_strbuf *o, tt_eid id);

static void emit_as(cl_emitter *e, tt_strbuf *o, tt_eid id, tt_dtype want)
{
    tt_dtype have = dtype_of(e, id);
    if (have == want || (!tt_dtype_is_float(have) && !tt_dtype_is_float(want) &&
                         strcmp(ctype(e, have), ctype(e, want)) == 0 && want != TT_DT_BOOL)) {
        emit_expr(e, o, id);
        return;
    }
    if (want == TT_DT_BOOL) {
        tt_strbuf_append(o, "((");
        emit_expr(e, o, id);
        tt_strbuf_append(o, ") != 0)");
        return;
    }
    tt_strbuf_printf(o, "((%s)(", ctype(e, want));
    emit_expr(e, o, id);
    tt_strbuf_append(o, "))");
}

/* The address space in which `idx` of `buf` starts an aligned vector of `lanes` elements (each
 * lane's index known a multiple of `lanes` from lane 0), or NULL.  There a vector is read and
 * written through a cast pointer, which tells the compiler the alignment, so that a float4 can be
 * one 128-bit access.  vload4 promises a float's alignment only: an H200 ran a fetch written so
 * 21% slower than the scalar one (likely four loads a thread, 16 bytes apart across a warp,
 * whose stores into local memory conflict on its banks; not profiled).  Global buffers start
 * aligned (CL_DEVICE_MEM_BASE_ADDR_ALIGN); local arrays are declared aligned to 16 bytes, so
 * vectors of up to 16 bytes.  Private arrays keep vload / vstore: a cast could move them out of
 * registers. */
static const char *aligned_space(cl_emitter *e, uint32_t buf, tt_eid idx, int64_t lanes)
{
    const tt_buffer *b = &e->p->bufs.data[buf];
    int64_t step, align;
    if ((lanes != 2 && lanes != 4) || lanes * tt_dtype_bytes(b->dtype) > 16 ||
        !tt_expr_lane_step(&e->p->pool, idx, e->vec_var, lanes, &step, &align) ||
        align % lanes != 0)
        return NULL;
    if (b->param >= 0 || e->workspace[buf])
        return "__global";
    return strcmp(b->scope, "shared") == 0 ? "__local" : NULL;
}

/* `id` as type `t`, broadcast to the vector's lanes when vector code needs a vector there. */
static void emit_lanes(cl_emitter *e, tt_strbuf *o, tt_eid id, tt_dtype t)
{
    if (!e->vec_lanes || tt_expr_uses_var(&e->p->pool, id, e->vec_var)) {
        emit_as(e, o, id, t);
        return;
    }
    tt_strbuf_printf(o, "((%s%d)(", ctype(e, t), e->vec_lanes);
    emit_as(e, o, id, t);
    tt_strbuf_append(o, "))");
}

static void emit_float(cl_emitter *e, tt_strbuf *o, double v, tt_dtype t)
{
    if (isnan(v)) {
        tt_strbuf_append(o, t == TT_DT_FLOAT64 ? "((double)NAN)" : "NAN");
        return;
    }
    if (isinf(v)) {
        tt_strbuf_append(o, v < 0 ? "(-INFINITY)" : "INFINITY");
        return;
    }
    char buf[64];
    snprintf(buf, sizeof(buf), t == TT_DT_FLOAT64 ? "%.17g" : "%.9g", v);
    bool has_dot = strpbrk(buf, ".eEn") != NULL;
    tt_strbuf_printf(o, "%s%s%s%s", v < 0 ? "(" : "", buf, has_dot ? "" : ".0",
                     t == TT_DT_FLOAT64 ? (v < 0 ? ")" : "") : (v < 0 ? "f)" : "f"));
}

static void emit_binary(cl_emitter *e, tt_strbuf *o, const tt_expr *n)
{
    tt_dtype ot = tt_expr_operand_type(&e->p->pool, n);
    bool fl = tt_dtype_is_float(ot);
    tt_dtype rt = (tt_dtype)n->dtype;
    bool cmp = n->kind >= TT_EXPR_LT && n->kind <= TT_EXPR_NE;
    bool conv = !cmp && n->kind != TT_EXPR_AND && n->kind != TT_EXPR_OR && rt != ot;
    if (conv)
        tt_strbuf_printf(o, "((%s)", ctype(e, rt));
    const char *fn = NULL, *op = NULL;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_ADD: op = "+"; break;
    case TT_EXPR_SUB: op = "-"; break;
    case TT_EXPR_MUL: op = "*"; break;
    case TT_EXPR_DIV:
        if (fl)
            op = "/";
        else if (nonneg(e, n->a) && nonneg(e, n->b))
            op = "/";
        else
            fn = "tt_floordiv";
        break;
    case TT_EXPR_MOD:
        if (fl)
            fn = "fmod";
        else if (nonneg(e, n->a) && nonneg(e, n->b))
            op = "%";
        else
            fn = "tt_floormod";
        break;
    case TT_EXPR_MIN: fn = fl ? "fmin" : "min"; break;
    case TT_EXPR_MAX: fn = fl ? "fmax" : "max"; break;
    case TT_EXPR_LT: op = "<"; break;
    case TT_EXPR_LE: op = "<="; break;
    case TT_EXPR_GT: op = ">"; break;
    case TT_EXPR_GE: op = ">="; break;
    case TT_EXPR_EQ: op = "=="; break;
    case TT_EXPR_NE: op = "!="; break;
    case TT_EXPR_AND: op = "&&"; break;
    case TT_EXPR_OR: op = "||"; break;
    default: fail(e, TT_ERR_INTERNAL, "unexpected expression kind %d", n->kind); return;
    }
    /* Builtins take (vector, vector): in vector code a scalar operand is broadcast, unless
     * neither operand varies across the lanes (an index, a uniform value: the result is scalar,
     * and broadcasting it would make an index of vector type). */
    bool lanes = e->vec_lanes && (tt_expr_uses_var(&e->p->pool, n->a, e->vec_var) ||
                                  tt_expr_uses_var(&e->p->pool, n->b, e->vec_var));
    if (fn) {
        tt_strbuf_printf(o, "%s(", fn);
        if (lanes)
            emit_lanes(e, o, n->a, ot);
        else
            emit_as(e, o, n->a, ot);
        tt_strbuf_append(o, ", ");
        if (lanes)
            emit_lanes(e, o, n->b, ot);
        else
            emit_as(e, o, n->b, ot);
        tt_strbuf_append(o, ")");
    } else {
        tt_strbuf_append(o, "(");
        emit_as(e, o, n->a, ot);
        tt_strbuf_printf(o, " %s ", op);
        emit_as(e, o, n->b, ot);
        tt_strbuf_append(o, ")");
    }
    if (conv)
        tt_strbuf_append(o, ")");
}

static void emit_call(cl_emitter *e, tt_strbuf *o, const tt_expr *n)
{
    tt_dtype t = (tt_dtype)n->dtype;
    bool fl = tt_dtype_is_float(t);
    const char *one = t == TT_DT_FLOAT64 ? "1.0" : "1.0f";
    switch ((tt_func)n->b) {
    case TT_FUNC_EXP: tt_strbuf_append(o, "exp("); break;
    case TT_FUNC_LOG: tt_strbuf_append(o, "log("); break;
    case TT_FUNC_SQRT: tt_strbuf_append(o, "sqrt("); break;
    case TT_FUNC_TANH: tt_strbuf_append(o, "tanh("); break;
    case TT_FUNC_SIGMOID: tt_strbuf_printf(o, "(%s / (%s + exp(-", one, one); break;
    case TT_FUNC_ABS: tt_strbuf_append(o, fl ? "fabs(" : "((int)abs("); break;
    case TT_FUNC_ERF: tt_strbuf_append(o, "erf("); break;
    case TT_FUNC_FLOOR: tt_strbuf_append(o, fl ? "floor(" : "("); break;
    case TT_FUNC_CEIL: tt_strbuf_append(o, fl ? "ceil(" : "("); break;
    default: fail(e, TT_ERR_UNSUPPORTED, "function %u has no OpenCL form", n->b); return;
    }
    emit_as(e, o, n->a, t);
    if (n->b == TT_FUNC_SIGMOID)
        tt_strbuf_append(o, ")))");
    else if (n->b == TT_FUNC_ABS && !fl)
        tt_strbuf_append(o, "))");
    else
        tt_strbuf_append(o, ")");
}

/* The bank conflict of a read of local buffer `buf` at `index` (tt_opencl_stats.local_bank_ways),
 * `lanes` elements a work-item from there: the index evaluated for threadIdx.x = 0 .. 31, every
 * other variable 0 (a vector loop's lane 0).  A warp's access is served in phases of 128 bytes
 * (32 work-items of 4-byte reads, 8 of 16-byte ones, as NVIDIA's and AMD's local memories
 * do); the passes are the most distinct 4-byte words one phase puts in one of 32 banks. */
static int bank_ways(cl_emitter *e, uint32_t buf, tt_eid index, int lanes)
{
    uint32_t tx = e->active[AX_TX].var;
    int64_t warp = e->launch[AX_TX] < 32 ? e->launch[AX_TX] : 32;
    if (!tx || warp < 2)
        return 1;
    int64_t *vars = calloc(e->p->pool.vars.len, sizeof(int64_t));
    if (!vars)
        return 1;
    int64_t bytes = tt_dtype_bytes(e->p->bufs.data[buf].dtype);
    int64_t span = bytes * lanes / 4 > 1 ? bytes * lanes / 4 : 1; /* words a work-item reads */
    int64_t phase = 32 / span > 1 ? 32 / span : 1, words[32];
    tt_eval_env env = {.vars = vars};
    int ways = 1;
    for (int64_t t = 0; t < warp; t++) {
        vars[tx] = t;
        tt_value v;
        if (tt_expr_eval(&e->p->pool, index, &env, &v)) {
            free(vars);
            return 1; /* not an index of loop variables alone: not judged */
        }
        words[t] = v.i * bytes / 4;
    }
    free(vars);
    for (int64_t p0 = 0; p0 < warp; p0 += phase) {
        int64_t end = p0 + phase < warp ? p0 + phase : warp;
        int per_bank[32] = {0};
        int64_t seen[32 * 32];
        int nseen = 0;
        for (int64_t t = p0; t < end; t++)
            for (int64_t w = words[t]; w < words[t] + span; w++) {
                bool dup = false;
                for (int i = 0; i < nseen && !dup; i++)
                    dup = seen[i] == w;
                if (dup || nseen >= 32 * 32)
                    continue;
                seen[nseen++] = w;
                int b = (int)(((w % 32) + 32) % 32);
                if (++per_bank[b] > ways)
                    ways = per_bank[b];
            }
    }
    return ways;
}

static void emit_expr(cl_emitter *e, tt_strbuf *o, tt_eid id)
{
    const tt_expr n = *tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
        tt_strbuf_printf(o, n.imm.i < 0 ? "(%lld%s)" : "%lld%s", (long long)n.imm.i,
                         e->long_index && (n.imm.i > INT32_MAX || n.imm.i < INT32_MIN) ? "L" : "");
        return;
    case TT_EXPR_FLOAT: emit_float(e, o, n.imm.f, (tt_dtype)n.dtype); return;
    case TT_EXPR_VAR:
        if (!e->var_name[n.a]) {
            fail(e, TT_ERR_INTERNAL, "variable '%s' used outside its loop",
                 tt_var_name(&e->p->pool, n.a));
            return;
        }
        tt_strbuf_append(o, e->var_name[n.a]);
        return;
    case TT_EXPR_LOAD:
        if (e->vec_lanes && tt_expr_uses_var(&e->p->pool, n.a, e->vec_var)) {
            /* One element per lane (checked by vectorisable): a vector load from lane 0's. */
            const char *space = aligned_space(e, n.b, n.a, e->vec_lanes);
            if (!strcmp(e->p->bufs.data[n.b].scope, "shared")) {
                int ways = bank_ways(e, n.b, n.a, e->vec_lanes);
                if (ways > e->stats.local_bank_ways)
                    e->stats.local_bank_ways = ways;
            }
            if (space)
                tt_strbuf_printf(o, "(*(%s %s%d *)&%s[", space, mtype(e->p->bufs.data[n.b].dtype),
                                 e->vec_lanes, e->buf_name[n.b]);
            else
                tt_strbuf_printf(o, "vload%d(0, &%s[", e->vec_lanes, e->buf_name[n.b]);
            emit_expr(e, o, n.a);
            tt_strbuf_append(o, "])");
            return;
        }
        if (e->p->bufs.data[n.b].dtype == TT_DT_BOOL)
            tt_strbuf_append(o, "(int)");
        if (!strcmp(e->p->bufs.data[n.b].scope, "shared")) {
            int ways = bank_ways(e, n.b, n.a, 1);
            if (ways > e->stats.local_bank_ways)
                e->stats.local_bank_ways = ways;
        }
        tt_strbuf_printf(o, "%s[", e->buf_name[n.b]);
        emit_expr(e, o, n.a);
        tt_strbuf_append(o, "]");
        return;
    case TT_EXPR_SELECT:
        tt_strbuf_append(o, "(");
        emit_as(e, o, n.a, TT_DT_BOOL);
        tt_strbuf_append(o, " ? ");
        emit_as(e, o, n.b, (tt_dtype)n.dtype);
        tt_strbuf_append(o, " : ");
        emit_as(e, o, n.c, (tt_dtype)n.dtype);
        tt_strbuf_append(o, ")");
        return;
    case TT_EXPR_CALL: emit_call(e, o, &n); return;
    case TT_EXPR_CAST: emit_as(e, o, n.a, (tt_dtype)n.dtype); return;
    case TT_EXPR_NOT:
        tt_strbuf_append(o, "(!");
        emit_as(e, o, n.a, TT_DT_BOOL);
        tt_strbuf_append(o, ")");
        return;
    case TT_EXPR_NEG:
        tt_strbuf_append(o, "(-");
        emit_expr(e, o, n.a);
        tt_strbuf_append(o, ")");
        return;
    case TT_EXPR_READ: fail(e, TT_ERR_INVALID_ARG, "a lowered program has no tensor reads"); return;
    default: emit_binary(e, o, &n); return;
    }
}

/* ---- statements ---- */

static void emit_stmt(cl_emitter *e, tt_sid id);
static void check_race(cl_emitter *e, const tt_stmt *s);
static void emit_for_plain(cl_emitter *e, const tt_stmt *s);
static bool emit_staged_loop(cl_emitter *e, const tt_stmt *s);

static void barrier(cl_emitter *e, const char *why)
{
    if (e->divergent)
        fail(e, TT_ERR_ILLEGAL_STEP,
             "the shared buffer '%s' is filled under thread-dependent control flow (a guarded "
             "thread loop or condition): its barrier would not be reached by every work-item",
             why);
    if (e->barrier_at == e->body.len)
        return; /* right after another barrier */
    line(e, "barrier(CLK_LOCAL_MEM_FENCE);");
    e->barrier_at = e->body.len;
    e->stats.barriers++;
}

static void emit_bound(cl_emitter *e, const tt_stmt *s, int ax)
{
    const char *vname = tt_var_name(&e->p->pool, s->var);
    bool thread = ax >= AX_TX;
    if (e->active[ax].var) {
        bool coop = thread && e->fill_depth > e->active[ax].fill_depth;
        if (!coop) {
            fail(e, TT_ERR_ILLEGAL_STEP,
                 "loop '%s' is bound to %s inside loop '%s', already bound to it (outside a "
                 "shared-memory fill an axis is bound once per nest)",
                 vname, axis_name[ax], tt_var_name(&e->p->pool, e->active[ax].var));
            return;
        }
    }
    if (thread && e->private_fill) {
        fail(e, TT_ERR_ILLEGAL_STEP,
             "loop '%s' is bound to %s inside a private (per-work-item) buffer's computation",
             vname, axis_name[ax]);
        return;
    }
    bound_loop saved = e->active[ax];
    e->active[ax].var = s->var;
    e->active[ax].fill_depth = e->fill_depth;
    const char *fn = thread ? "get_local_id" : "get_group_id";
    int dim = thread ? ax - AX_TX : ax;
    line(e, "{");
    e->indent++;
    line(e, "const %s %s = (%s)%s(%d);", ctype(e, TT_DT_INT64), e->var_name[s->var],
         ctype(e, TT_DT_INT64), fn, dim);
    bool guard = s->extent < e->launch[ax];
    if (guard) {
        line(e, "if (%s < %lld) {", e->var_name[s->var], (long long)s->extent);
        e->indent++;
        if (thread) {
            e->divergent++;
            e->stats.guarded_thread_loops++;
        }
    }
    emit_stmt(e, s->body);
    if (guard) {
        if (thread)
            e->divergent--;
        e->indent--;
        line(e, "}");
    }
    e->indent--;
    line(e, "}");
    e->active[ax] = saved;
}

/* Does index `idx` move by one element per lane of a `lanes`-wide loop over `var`?  Through
 * floor division and modulo too: a cooperative fetch split by the vector reads (o*4 + v) / 64
 * and (o*4 + v) % 64, one row's consecutive elements. */
static bool one_per_lane(cl_emitter *e, tt_eid idx, uint32_t var, int64_t lanes)
{
    int64_t step, align;
    return tt_expr_lane_step(&e->p->pool, idx, var, lanes, &step, &align) && step == 1;
}

/* Can `id` be computed as a vector over `var`?  Loads move by one element per lane or not at all,
 * arithmetic stays in the stored type, and the variable appears nowhere else. */
static bool vector_expr(cl_emitter *e, tt_eid id, uint32_t var, int64_t lanes, tt_dtype t)
{
    const tt_expr_pool *p = &e->p->pool;
    if (!tt_expr_uses_var(p, id, var))
        return true; /* a scalar, broadcast */
    const tt_expr *n = tt_expr_get(p, id);
    if ((tt_dtype)n->dtype != t)
        return false;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_LOAD: return e->p->bufs.data[n->b].dtype == t && one_per_lane(e, n->a, var, lanes);
    case TT_EXPR_NEG: return vector_expr(e, n->a, var, lanes, t);
    case TT_EXPR_CALL:
        return tt_dtype_is_float(t) && n->b != TT_FUNC_ABS && vector_expr(e, n->a, var, lanes, t);
    case TT_EXPR_DIV:
        if (!tt_dtype_is_float(t))
            return false;
        /* fall through */
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
    case TT_EXPR_MUL:
    case TT_EXPR_MIN:
    case TT_EXPR_MAX:
        return tt_expr_operand_type(&e->p->pool, n) == t && vector_expr(e, n->a, var, lanes, t) &&
               vector_expr(e, n->b, var, lanes, t);
    default: return false;
    }
}

/* A vectorised loop that OpenCL's vector types express: one store moving by one element per lane
 * of float, double or int data, of 2, 3, 4, 8 or 16 lanes. */
static bool vectorisable(cl_emitter *e, const tt_stmt *s)
{
    int64_t n = s->extent;
    if (n != 2 && n != 3 && n != 4 && n != 8 && n != 16)
        return false;
    const tt_stmt *b = &e->p->stmts.data[s->body];
    if (b->kind != TT_STMT_STORE)
        return false;
    tt_dtype t = e->p->bufs.data[b->buf].dtype;
    if (t != TT_DT_FLOAT32 && t != TT_DT_FLOAT64 && t != TT_DT_INT32)
        return false;
    return one_per_lane(e, b->index, s->var, n) && vector_expr(e, b->value, s->var, n, t);
}

/* Staging: the next register of the fetch, `stg<k>_<n>[index]`, its index the serial loops of
 * the fetch around the store (unrolled, so the index is a constant and the array registers).
 * Phase 1 records each array's size and type; phase 2 finds the same stores in the same order. */
static void stage_register(cl_emitter *e, tt_strbuf *o, tt_dtype t, int lanes)
{
    int n = e->stage_store++;
    int64_t size = 1;
    for (int k = 0; k < e->nstage_loops; k++)
        size *= e->stage_ext[k];
    if (n >= 16) {
        e->stage_failed = true;
        n = 15;
    } else if (e->staging == 1) {
        e->stage_size[n] = size;
        e->stage_lanes[n] = lanes;
        e->stage_type[n] = t;
    }
    tt_strbuf_printf(o, "stg%d_%d[", e->nstaged, n);
    if (e->nstage_loops == 0)
        tt_strbuf_append(o, "0");
    for (int k = 0; k < e->nstage_loops; k++) {
        int64_t stride = 1;
        for (int j = k + 1; j < e->nstage_loops; j++)
            stride *= e->stage_ext[j];
        tt_strbuf_printf(o, "%s%s * %lld", k ? " + " : "", e->var_name[e->stage_var[k]],
                         (long long)stride);
    }
    tt_strbuf_append(o, "]");
}

static void emit_vector_loop(cl_emitter *e, const tt_stmt *s)
{
    const tt_stmt *b = &e->p->stmts.data[s->body];
    check_race(e, b);
    line(e, "{");
    e->indent++;
    line(e, "const %s %s = 0;", ctype(e, TT_DT_INT64), e->var_name[s->var]);
    e->vec_var = s->var;
    e->vec_lanes = (int)s->extent;
    tt_strbuf_indent(&e->body, e->indent * 2);
    tt_dtype t = e->p->bufs.data[b->buf].dtype;
    const char *space = aligned_space(e, b->buf, b->index, e->vec_lanes);
    if (e->staging == 1) { /* the loads into a register */
        stage_register(e, &e->body, t, e->vec_lanes);
        tt_strbuf_append(&e->body, " = ");
        emit_lanes(e, &e->body, b->value, t);
        tt_strbuf_append(&e->body, ";\n");
    } else if (space) {
        tt_strbuf_printf(&e->body, "*(%s %s%d *)&%s[", space, mtype(t), e->vec_lanes,
                         e->buf_name[b->buf]);
        emit_expr(e, &e->body, b->index);
        tt_strbuf_append(&e->body, "] = ");
        if (e->staging == 2)
            stage_register(e, &e->body, t, e->vec_lanes);
        else
            emit_lanes(e, &e->body, b->value, t);
        tt_strbuf_append(&e->body, ";\n");
    } else {
        tt_strbuf_printf(&e->body, "vstore%d(", e->vec_lanes);
        if (e->staging == 2)
            stage_register(e, &e->body, t, e->vec_lanes);
        else
            emit_lanes(e, &e->body, b->value, t);
        tt_strbuf_printf(&e->body, ", 0, &%s[", e->buf_name[b->buf]);
        emit_expr(e, &e->body, b->index);
        tt_strbuf_append(&e->body, "]);\n");
    }
    e->vec_lanes = 0;
    e->indent--;
    line(e, "}");
    e->stats.vector_loops++;
}

/* ---- cross-thread reductions ----
 *
 * Ansor's CrossThreadReduction binds (part of) a reduction's loop to threadIdx: the update
 * `S[i] = S[i] op f(i, r)` sits inside a thread loop whose variable the index does not use.  Each
 * work-item accumulates its share in a register, the work-group combines the partial values in
 * local memory by a tree of barriers, and the combined value is applied once: by work-item 0 for
 * a shared or global buffer, by every work-item for a private one (each holds its own copy, as
 * TVM's allreduce leaves the result in every thread). */

typedef struct xreduce {
    const tt_stmt *store; /* the update */
    const tt_stmt *tloop; /* the thread loop over the reduction */
    int axis;
    tt_expr_kind op; /* ADD, MAX or MIN */
    tt_eid contrib;  /* what one iteration adds */
    uint32_t vars[32];
    int nvars;
    tt_eid conds[16]; /* conditions on the way to the store */
    int nconds;
    bool store_in_tloop;
} xreduce;

static bool xr_walk(cl_emitter *e, tt_sid id, xreduce *x, bool in_tloop, int *nstores)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: {
        int ax = axis_of(s->ann);
        if (ax >= 0 && (x->tloop || ax < AX_TX))
            return false;
        if (ax >= 0) {
            x->tloop = s;
            x->axis = ax;
            in_tloop = true;
        }
        if (x->nvars == (int)TT_ARRAY_LEN(x->vars))
            return false;
        x->vars[x->nvars++] = s->var;
        return xr_walk(e, s->body, x, in_tloop, nstores);
    }
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!xr_walk(e, e->p->items.data[s->first + k], x, in_tloop, nstores))
                return false;
        return true;
    case TT_STMT_IF:
        if (s->orelse || x->nconds == (int)TT_ARRAY_LEN(x->conds))
            return false;
        x->conds[x->nconds++] = s->cond;
        return xr_walk(e, s->body, x, in_tloop, nstores);
    case TT_STMT_STORE:
        (*nstores)++;
        x->store = s;
        x->store_in_tloop = in_tloop;
        return true;
    default: return false;
    }
}

/* Is the nest at `s` a reduction shared by the work-items of a thread axis? */
static bool match_xreduce(cl_emitter *e, const tt_stmt *s, xreduce *x)
{
    memset(x, 0, sizeof(*x));
    int nstores = 0;
    if (e->xr || e->vec_lanes || !xr_walk(e, (tt_sid)(s - e->p->stmts.data), x, false, &nstores) ||
        nstores != 1 || !x->tloop || !x->store_in_tloop || e->active[x->axis].var)
        return false;
    const tt_expr_pool *p = &e->p->pool;
    for (int i = 0; i < x->nvars; i++)
        if (tt_expr_uses_var(p, x->store->index, x->vars[i]))
            return false;
    const tt_buffer *b = &e->p->bufs.data[x->store->buf];
    if (b->dtype == TT_DT_BOOL)
        return false;
    const tt_expr *v = tt_expr_get(p, x->store->value);
    if (v->kind != TT_EXPR_ADD && v->kind != TT_EXPR_MAX && v->kind != TT_EXPR_MIN)
        return false;
    const tt_expr *old = tt_expr_get(p, v->a);
    if (old->kind != TT_EXPR_LOAD || old->b != x->store->buf ||
        !tt_expr_equal(p, old->a, x->store->index) || (tt_dtype)v->dtype != b->dtype)
        return false;
    x->op = (tt_expr_kind)v->kind;
    x->contrib = v->b;
    return true;
}

/* `acc op value` in the buffer's type. */
static void xr_combine(cl_emitter *e, tt_strbuf *o, tt_dtype t, tt_expr_kind op, const char *a,
                       const char *b)
{
    bool fl = tt_dtype_is_float(t);
    if (op == TT_EXPR_ADD)
        tt_strbuf_printf(o, "(%s + %s)", a, b);
    else
        tt_strbuf_printf(o, "%s(%s, %s)",
                         op == TT_EXPR_MAX ? (fl ? "fmax" : "max") : (fl ? "fmin" : "min"), a, b);
}

static void emit_xr_tloop(cl_emitter *e, const tt_stmt *s);

static void emit_xreduce(cl_emitter *e, const tt_stmt *root, const xreduce *x)
{
    if (e->divergent) {
        fail(e, TT_ERR_ILLEGAL_STEP,
             "the cross-thread reduction into '%s' sits under thread-dependent control flow",
             e->p->bufs.data[x->store->buf].name);
        return;
    }
    const tt_buffer *b = &e->p->bufs.data[x->store->buf];
    tt_dtype t = b->dtype;
    const char *ty = ctype(e, t);
    int k = e->nreductions++;
    int64_t lx = e->launch[AX_TX], ly = e->launch[AX_TY], lz = e->launch[AX_TZ];
    int dim = x->axis - AX_TX;
    int64_t stride = dim == 0 ? 1 : dim == 1 ? lx : lx * ly, len = e->launch[x->axis];
    int64_t bytes = lx * ly * lz * tt_dtype_bytes(t);
    tt_strbuf_printf(&e->decls, "  __local %s red_%d[%lld];\n", mtype(t), k,
                     (long long)(lx * ly * lz));
    e->shared_bytes += bytes;
    /* The identity of the reduction. */
    const char *ident;
    char buf[64];
    if (x->op == TT_EXPR_ADD)
        ident = "0";
    else if (tt_dtype_is_float(t))
        ident = x->op == TT_EXPR_MAX ? "(-INFINITY)" : "INFINITY";
    else {
        bool wide = strcmp(ty, "long") == 0;
        snprintf(buf, sizeof(buf), "%s",
                 x->op == TT_EXPR_MAX ? (wide ? "LONG_MIN" : "INT_MIN")
                                      : (wide ? "LONG_MAX" : "INT_MAX"));
        ident = buf;
    }
    line(e, "{");
    e->indent++;
    line(e, "%s acc_%d = (%s)%s;", ty, k, ty, ident);
    /* The partial loop: every work-item its share, into acc_k. */
    e->xr = x;
    e->xr_acc = k;
    if (root == x->tloop)
        emit_xr_tloop(e, root);
    else
        emit_for_plain(e, root);
    e->xr = NULL;
    /* Combine along the axis: a tree over local memory. */
    line(e,
         "const int lid_%d = (int)(get_local_id(0) + %lld * get_local_id(1) + %lld * "
         "get_local_id(2));",
         k, (long long)lx, (long long)(lx * ly));
    line(e, "const int lane_%d = (int)get_local_id(%d);", k, dim);
    /* Also a global fence: a replicated initial write of the output must land before work-item
     * 0 applies the result. */
    line(e, "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);");
    line(e, "red_%d[lid_%d] = acc_%d;", k, k, k);
    /* Sequential addressing (halves folded onto the lower, the stride halving from the power of
     * two at or above the length): the work-items still adding are the lowest lanes, so whole
     * warps drop out and a warp reads consecutive words, where interleaved pairs (lane % 2s)
     * left every warp busy to the end and read with a stride of 2s words, in conflict. */
    long long half = 1;
    while (2 * half < len)
        half *= 2;
    line(e, "for (int s_%d = %lld; s_%d > 0; s_%d >>= 1) {", k, half, k, k);
    e->indent++;
    line(e, "barrier(CLK_LOCAL_MEM_FENCE);");
    line(e, "if (lane_%d < s_%d && lane_%d + s_%d < %lld)", k, k, k, k, (long long)len);
    char a[64], c[96];
    snprintf(a, sizeof(a), "red_%d[lid_%d]", k, k);
    snprintf(c, sizeof(c), "red_%d[lid_%d + s_%d * %lld]", k, k, k, (long long)stride);
    tt_strbuf_indent(&e->body, (e->indent + 1) * 2);
    tt_strbuf_printf(&e->body, "red_%d[lid_%d] = ", k, k);
    xr_combine(e, &e->body, t, x->op, a, c);
    tt_strbuf_append(&e->body, ";\n");
    e->indent--;
    line(e, "}");
    line(e, "barrier(CLK_LOCAL_MEM_FENCE);");
    e->stats.barriers += 3;
    e->barrier_at = (size_t)-1;
    /* Apply it once (or in every work-item's private copy), under the conditions that do not
     * depend on the reduction's loops. */
    bool private_buf = b->param < 0 && !e->workspace[x->store->buf] && strcmp(b->scope, "shared");
    tt_strbuf_indent(&e->body, e->indent * 2);
    tt_strbuf_append(&e->body, "if (");
    tt_strbuf_append(&e->body, private_buf ? "1" : "");
    if (!private_buf)
        tt_strbuf_printf(&e->body, "lane_%d == 0", k);
    for (int i = 0; i < x->nconds; i++) {
        bool inner = false;
        for (int v = 0; v < x->nvars && !inner; v++)
            inner = tt_expr_uses_var(&e->p->pool, x->conds[i], x->vars[v]);
        if (inner)
            continue;
        tt_strbuf_append(&e->body, " && ");
        emit_as(e, &e->body, x->conds[i], TT_DT_BOOL);
    }
    tt_strbuf_append(&e->body, ") {\n");
    e->indent++;
    tt_strbuf_indent(&e->body, e->indent * 2);
    tt_strbuf_printf(&e->body, "%s[", e->buf_name[x->store->buf]);
    emit_expr(e, &e->body, x->store->index);
    tt_strbuf_append(&e->body, "] = ");
    tt_strbuf ld = {0};
    tt_strbuf_printf(&ld, "%s[", e->buf_name[x->store->buf]);
    emit_expr(e, &ld, x->store->index);
    tt_strbuf_append(&ld, "]");
    char red0[64];
    snprintf(red0, sizeof(red0), "red_%d[lid_%d - lane_%d * %lld]", k, k, k, (long long)stride);
    xr_combine(e, &e->body, t, x->op, ld.data ? ld.data : "", red0);
    tt_strbuf_free(&ld);
    tt_strbuf_append(&e->body, ";\n");
    e->indent--;
    line(e, "}");
    e->indent--;
    line(e, "}");
    e->stats.cross_thread_reductions++;
}

/* Inside a cross-thread reduction: the thread loop takes this work-item's iteration, the update
 * goes to the accumulator. */
static void emit_xr_tloop(cl_emitter *e, const tt_stmt *s)
{
    int ax = axis_of(s->ann);
    bool guard = s->extent < e->launch[ax];
    line(e, "{");
    e->indent++;
    line(e, "const %s %s = (%s)get_local_id(%d);", ctype(e, TT_DT_INT64), e->var_name[s->var],
         ctype(e, TT_DT_INT64), ax - AX_TX);
    if (guard) {
        line(e, "if (%s < %lld) {", e->var_name[s->var], (long long)s->extent);
        e->indent++;
    }
    emit_stmt(e, s->body);
    if (guard) {
        e->indent--;
        line(e, "}");
    }
    e->indent--;
    line(e, "}");
}

static void emit_xr_update(cl_emitter *e, const tt_stmt *s)
{
    const tt_buffer *b = &e->p->bufs.data[s->buf];
    char acc[32];
    snprintf(acc, sizeof(acc), "acc_%d", e->xr_acc);
    tt_strbuf v = {0};
    emit_as(e, &v, e->xr->contrib, b->dtype);
    tt_strbuf_indent(&e->body, e->indent * 2);
    tt_strbuf_printf(&e->body, "%s = ", acc);
    xr_combine(e, &e->body, b->dtype, e->xr->op, acc, v.data ? v.data : "");
    tt_strbuf_append(&e->body, ";\n");
    tt_strbuf_free(&v);
}

static void emit_for(cl_emitter *e, const tt_stmt *s)
{
    xreduce x;
    if (axis_of(s->ann) < 0 || axis_of(s->ann) >= AX_TX) {
        if (!e->xr && match_xreduce(e, s, &x)) {
            emit_xreduce(e, s, &x);
            return;
        }
        if (e->xr && s == e->xr->tloop) {
            emit_xr_tloop(e, s);
            return;
        }
    }
    emit_for_plain(e, s);
}

/* A double-buffered loop with its fetch staged through registers, as fast GPU GEMMs do: each
 * iteration loads the next tiles from global memory into private registers, computes on the current
 * tiles while those loads are in flight, then stores the registers into the other half of each
 * buffer, and ends with the barrier.  False (nothing written) when the fetch does not stage: more
 * than 16 stores or 8 loops, or more than 64 elements of registers. */
static bool emit_staged_loop(cl_emitter *e, const tt_stmt *s)
{
    const tt_stmt *b = &e->p->stmts.data[s->body];
    if (b->kind != TT_STMT_SEQ || b->n < 2 ||
        !e->p->stmts.data[e->p->items.data[b->first]].prefetch)
        return false;
    tt_sid fetch = e->p->items.data[b->first];
    size_t at = e->body.len;
    int saved_indent = e->indent;
    tt_opencl_stats saved_stats = e->stats;
    const char *it = ctype(e, TT_DT_INT64);
    line(e, "for (%s %s = 0; %s < %lld; ++%s) {", it, e->var_name[s->var], e->var_name[s->var],
         (long long)s->extent, e->var_name[s->var]);
    e->indent++;
    e->staging = 1;
    e->stage_store = 0;
    e->stage_failed = false;
    emit_stmt(e, fetch);
    int nstores = e->stage_store;
    int64_t elems = 0;
    for (int k = 0; k < nstores && k < 16; k++)
        elems += e->stage_size[k] * e->stage_lanes[k];
    if (e->stage_failed || nstores == 0 || elems > 64 || e->status) {
        e->staging = 0;
        e->indent = saved_indent;
        e->body.len = at; /* undone: the plain loop instead */
        e->body.data[at] = 0;
        e->stats = saved_stats;
        return false;
    }
    for (uint32_t k = 1; k < b->n; k++) {
        e->staging = 0;
        emit_stmt(e, e->p->items.data[b->first + k]);
    }
    e->staging = 2;
    e->stage_store = 0;
    emit_stmt(e, fetch);
    e->staging = 0;
    barrier(e, "double-buffered");
    e->indent--;
    line(e, "}");
    for (int k = 0; k < nstores; k++) {
        tt_strbuf_printf(&e->decls, "    %s", mtype(e->stage_type[k]));
        if (e->stage_lanes[k] > 1)
            tt_strbuf_printf(&e->decls, "%d", e->stage_lanes[k]);
        tt_strbuf_printf(&e->decls, " stg%d_%d[%lld];\n", e->nstaged, k,
                         (long long)e->stage_size[k]);
        e->private_bytes += e->stage_size[k] * e->stage_lanes[k] * tt_dtype_bytes(e->stage_type[k]);
    }
    if (e->lim.max_private_bytes > 0 && e->private_bytes > e->lim.max_private_bytes)
        fail_limit(
            e, TT_GPU_LIMIT_PRIVATE,
            "private buffers of one work-item need %lld bytes (the staged fetch's registers are "
            "the last), more than the %lld allowed",
            (long long)e->private_bytes, (long long)e->lim.max_private_bytes);
    e->nstaged++;
    e->stats.staged_fetches++;
    return true;
}

static void emit_for_plain(cl_emitter *e, const tt_stmt *s)
{
    int ax = axis_of(s->ann);
    int saved_unroll = e->auto_unroll;
    if (s->unroll_max_step)
        e->auto_unroll = s->unroll_max_step;
    if (ax >= 0) {
        emit_bound(e, s, ax);
    } else if (s->ann == TT_ANN_VECTORIZE && !e->vec_lanes && vectorisable(e, s)) {
        emit_vector_loop(e, s);
    } else {
        /* vthread: a virtual thread is a serial loop of every work-item, unrolled so that its
         * private tiles stay in registers.  A vector loop inside counts once (TVM's order:
         * VectorizeLoop, then UnrollLoop): the large tile's 16-deep inner product, 16 float4
         * FMAs a step, was 1024 > 512 counted by lanes and stayed a loop. */
        bool unroll = s->ann == TT_ANN_UNROLL || s->ann == TT_ANN_VTHREAD ||
                      s->ann == TT_ANN_VECTORIZE || e->staging ||
                      (e->auto_unroll &&
                       tt_program_nest_trip(e->p, s->body, true) * s->extent <= e->auto_unroll);
        if (s->ann == TT_ANN_VTHREAD && e->lim.max_vthread > 0 && s->extent > e->lim.max_vthread)
            fail_limit(e, TT_GPU_LIMIT_VTHREAD,
                       "vthread loop '%s' has extent %lld, more than the %lld allowed",
                       tt_var_name(&e->p->pool, s->var), (long long)s->extent,
                       (long long)e->lim.max_vthread);
        if (unroll && s->extent > 1) {
            line(e, "#pragma unroll");
            e->stats.unrolled_loops++;
        }
        const char *it = ctype(e, TT_DT_INT64);
        if (s->prefetch && !e->staging && emit_staged_loop(e, s)) {
            e->auto_unroll = saved_unroll;
            return;
        }
        line(e, "for (%s %s = 0; %s < %lld; ++%s) {", it, e->var_name[s->var], e->var_name[s->var],
             (long long)s->extent, e->var_name[s->var]);
        e->indent++;
        bool stacked = e->staging && e->nstage_loops < 8;
        if (stacked) {
            e->stage_var[e->nstage_loops] = s->var;
            e->stage_ext[e->nstage_loops++] = s->extent;
        } else if (e->staging) {
            e->stage_failed = true;
        }
        emit_stmt(e, s->body);
        if (stacked)
            e->nstage_loops--;
        /* double buffering: the next tiles were fetched into the other halves while this
         * iteration read its own; both must be done before the next iteration starts */
        if (s->prefetch)
            barrier(e, "double-buffered");
        e->indent--;
        line(e, "}");
    }
    e->auto_unroll = saved_unroll;
}

/* True if `id` loads from buffer `buf`. */
static bool reads_buffer(const tt_expr_pool *p, tt_eid id, uint32_t buf)
{
    const tt_expr *n = tt_expr_get(p, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return false;
    case TT_EXPR_LOAD: return n->b == buf || reads_buffer(p, n->a, buf);
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return reads_buffer(p, n->a, buf);
    case TT_EXPR_SELECT:
        return reads_buffer(p, n->a, buf) || reads_buffer(p, n->b, buf) ||
               reads_buffer(p, n->c, buf);
    default: return reads_buffer(p, n->a, buf) || reads_buffer(p, n->b, buf);
    }
}

/* Stores several work-items would make to one element.  Inside a loop bound to an axis (of the
 * current fill level), the index must use the loop's variable: otherwise a reduce axis is bound
 * to threads (a cross-thread reduction, which needs code this generator does not write).  On an
 * axis of the launch that no enclosing loop binds, every work-item along it repeats the store:
 * harmless for a plain write of the same value, a race for an update of the element.  Private
 * buffers are per work-item and exempt. */
static void check_race(cl_emitter *e, const tt_stmt *s)
{
    const tt_buffer *b = &e->p->bufs.data[s->buf];
    bool private_buf = b->param < 0 && !e->workspace[s->buf] && strcmp(b->scope, "shared") != 0;
    if (private_buf)
        return;
    for (int ax = 0; ax < AX_N; ax++) {
        const bound_loop *bl = &e->active[ax];
        bool here = bl->var && bl->fill_depth == e->fill_depth;
        if (here && !tt_expr_uses_var(&e->p->pool, s->index, bl->var))
            fail(e, TT_ERR_ILLEGAL_STEP,
                 "every work-item of %s loop '%s' stores to the same elements of '%s' (a "
                 "reduction bound to threads needs a cross-thread reduction, which the OpenCL "
                 "back end does not generate)",
                 axis_name[ax], tt_var_name(&e->p->pool, bl->var), b->name);
        else if (!here && e->launch[ax] > 1 && reads_buffer(&e->p->pool, s->value, s->buf))
            fail(e, TT_ERR_ILLEGAL_STEP,
                 "the update of '%s' is repeated by the %lld work-items of %s, which no loop "
                 "around it binds (they would race)",
                 b->name, (long long)e->launch[ax], axis_name[ax]);
    }
}

static void emit_alloc(cl_emitter *e, const tt_stmt *s)
{
    const tt_buffer *b = &e->p->bufs.data[s->buf];
    int64_t bytes = b->size * (b->dtype == TT_DT_BOOL ? 1 : tt_dtype_bytes(b->dtype));
    if (strcmp(b->scope, "shared") == 0) {
        /* aligned: vectors of up to 16 bytes are accessed through cast pointers (above) */
        tt_strbuf_printf(&e->decls, "    __local %s %s[%lld] __attribute__((aligned(16)));\n",
                         mtype(b->dtype), e->buf_name[s->buf],
                         (long long)(b->size > 0 ? b->size : 1));
        e->shared_bytes += bytes;
        /* body = [fill, rest...]: barrier, fill, barrier, rest. */
        const tt_stmt *bs = &e->p->stmts.data[s->body];
        barrier(e, b->name);
        /* Inside the fill, work-items cooperate again, even within a private buffer's
         * computation (a shared tile loaded per reduction step of a private accumulator). */
        int saved_private = e->private_fill;
        e->private_fill = 0;
        e->fill_depth++;
        bool split = bs->kind == TT_STMT_SEQ && bs->n >= 2;
        emit_stmt(e, split ? e->p->items.data[bs->first] : s->body);
        e->fill_depth--;
        e->private_fill = saved_private;
        barrier(e, b->name);
        for (uint32_t k = 1; split && k < bs->n; k++)
            emit_stmt(e, e->p->items.data[bs->first + k]);
        return;
    }
    e->private_bytes += bytes;
    if (e->lim.max_private_bytes > 0 && e->private_bytes > e->lim.max_private_bytes)
        fail_limit(
            e, TT_GPU_LIMIT_PRIVATE,
            "private buffers of one work-item need %lld bytes ('%s' is the last), more than the "
            "%lld allowed",
            (long long)e->private_bytes, b->name, (long long)e->lim.max_private_bytes);
    line(e, "{");
    e->indent++;
    line(e, "%s %s[%lld];", mtype(b->dtype), e->buf_name[s->buf],
         (long long)(b->size > 0 ? b->size : 1));
    const tt_stmt *bs = &e->p->stmts.data[s->body];
    if (bs->kind == TT_STMT_SEQ && bs->n >= 2) {
        e->private_fill++;
        emit_stmt(e, e->p->items.data[bs->first]);
        e->private_fill--;
        for (uint32_t k = 1; k < bs->n; k++)
            emit_stmt(e, e->p->items.data[bs->first + k]);
    } else {
        emit_stmt(e, s->body);
    }
    e->indent--;
    line(e, "}");
}

static void emit_stmt(cl_emitter *e, tt_sid id)
{
    if (e->status)
        return;
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: emit_for(e, s); return;
    case TT_STMT_SEQ: {
        /* the next tiles of a double-buffered loop: the work-items cooperate as in any fill,
         * and the barrier that ends the loop's iteration fences it */
        int saved_private = e->private_fill;
        if (s->prefetch) {
            e->private_fill = 0;
            e->fill_depth++;
        }
        for (uint32_t k = 0; k < s->n; k++)
            emit_stmt(e, e->p->items.data[s->first + k]);
        if (s->prefetch) {
            e->fill_depth--;
            e->private_fill = saved_private;
        }
        return;
    }
    case TT_STMT_STORE: {
        if (e->xr && s == e->xr->store) {
            emit_xr_update(e, s);
            return;
        }
        const tt_buffer *b = &e->p->bufs.data[s->buf];
        tt_strbuf_indent(&e->body, e->indent * 2);
        if (e->staging == 1) { /* the load into a register */
            stage_register(e, &e->body, b->dtype, 1);
            tt_strbuf_append(&e->body, " = ");
            emit_as(e, &e->body, s->value, b->dtype);
            tt_strbuf_append(&e->body, ";\n");
            return;
        }
        check_race(e, s);
        tt_strbuf_printf(&e->body, "%s[", e->buf_name[s->buf]);
        emit_expr(e, &e->body, s->index);
        tt_strbuf_append(&e->body, "] = ");
        if (e->staging == 2) {
            stage_register(e, &e->body, b->dtype, 1);
        } else if (b->dtype == TT_DT_BOOL) {
            tt_strbuf_append(&e->body, "(uchar)");
            emit_as(e, &e->body, s->value, TT_DT_BOOL);
        } else {
            emit_as(e, &e->body, s->value, b->dtype);
        }
        tt_strbuf_append(&e->body, ";\n");
        return;
    }
    case TT_STMT_ALLOC: emit_alloc(e, s); return;
    case TT_STMT_IF: {
        tt_strbuf_indent(&e->body, e->indent * 2);
        tt_strbuf_append(&e->body, "if (");
        emit_as(e, &e->body, s->cond, TT_DT_BOOL);
        tt_strbuf_append(&e->body, ") {\n");
        e->indent++;
        e->divergent++;
        emit_stmt(e, s->body);
        e->indent--;
        if (s->orelse) {
            line(e, "} else {");
            e->indent++;
            emit_stmt(e, s->orelse);
            e->indent--;
        }
        e->divergent--;
        line(e, "}");
        return;
    }
    default: return;
    }
}

/* ---- kernels ---- */

/* Launch extents: the largest extent bound to each axis. */
static void scan_launch(cl_emitter *e, tt_sid id)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: {
        int ax = axis_of(s->ann);
        if (ax >= 0 && s->extent > e->launch[ax])
            e->launch[ax] = s->extent;
        scan_launch(e, s->body);
        return;
    }
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            scan_launch(e, e->p->items.data[s->first + k]);
        return;
    case TT_STMT_ALLOC: scan_launch(e, s->body); return;
    case TT_STMT_IF:
        scan_launch(e, s->body);
        if (s->orelse)
            scan_launch(e, s->orelse);
        return;
    default: return;
    }
}

static void emit_kernel(cl_emitter *e, tt_sid root, const char *entry, tt_cl_artifact *art)
{
    if (art->nkernels == TT_CL_MAX_KERNELS) {
        fail_limit(e, TT_GPU_LIMIT_COUNTS, "more than %d kernels", TT_CL_MAX_KERNELS);
        return;
    }
    for (int a = 0; a < AX_N; a++) {
        e->launch[a] = 1;
        e->active[a].var = 0;
    }
    e->shared_bytes = e->private_bytes = 0;
    e->fill_depth = e->private_fill = e->divergent = e->auto_unroll = 0;
    scan_launch(e, root);
    tt_cl_kernel *k = &art->kernels[art->nkernels];
    snprintf(k->name, sizeof(k->name), "%s_%d", entry, art->nkernels);
    int64_t threads = 1;
    for (int d = 0; d < 3; d++) {
        k->grid[d] = e->launch[AX_BX + d];
        k->block[d] = e->launch[AX_TX + d];
        threads *= k->block[d];
        if (e->lim.max_block[d] > 0 && k->block[d] > e->lim.max_block[d]) {
            fail_limit(e, TT_GPU_LIMIT_THREADS, "%s has extent %lld, more than the %lld allowed",
                       axis_name[AX_TX + d], (long long)k->block[d],
                       (long long)e->lim.max_block[d]);
            return;
        }
        if (k->grid[d] > INT32_MAX) {
            fail_limit(e, TT_GPU_LIMIT_GRID, "%s has extent %lld", axis_name[AX_BX + d],
                       (long long)k->grid[d]);
            return;
        }
    }
    if (e->lim.max_threads > 0 && threads > e->lim.max_threads) {
        fail_limit(
            e, TT_GPU_LIMIT_THREADS,
            "a work-group of %lld x %lld x %lld = %lld work-items is more than the %lld allowed",
            (long long)k->block[0], (long long)k->block[1], (long long)k->block[2],
            (long long)threads, (long long)e->lim.max_threads);
        return;
    }
    art->nkernels++;
    e->body.len = 0;
    if (e->body.data)
        e->body.data[0] = 0;
    e->decls.len = 0;
    if (e->decls.data)
        e->decls.data[0] = 0;
    e->barrier_at = (size_t)-1;
    e->indent = 1;
    emit_stmt(e, root);
    if (e->status)
        return;
    if (e->lim.max_shared_bytes > 0 && e->shared_bytes > e->lim.max_shared_bytes) {
        fail_limit(e, TT_GPU_LIMIT_SHARED,
                   "shared (local) memory of %lld bytes is more than the %lld allowed",
                   (long long)e->shared_bytes, (long long)e->lim.max_shared_bytes);
        return;
    }
    if (e->shared_bytes > art->shared_bytes)
        art->shared_bytes = e->shared_bytes;
    tt_strbuf *o = &e->source;
    tt_strbuf_printf(
        o, "__kernel __attribute__((reqd_work_group_size(%lld, %lld, %lld)))\nvoid %s(",
        (long long)k->block[0], (long long)k->block[1], (long long)k->block[2], k->name);
    int nargs = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t b = 0; b < e->p->bufs.len; b++) {
            const tt_buffer *bf = &e->p->bufs.data[b];
            if (pass == 0 ? bf->param < 0 : !e->workspace[b])
                continue;
            tt_strbuf_printf(o, "%s__global %s *restrict %s", nargs++ ? ", " : "", mtype(bf->dtype),
                             e->buf_name[b]);
        }
    tt_strbuf_append(o, ")\n{\n");
    if (e->decls.len)
        tt_strbuf_append(o, e->decls.data);
    if (e->body.len)
        tt_strbuf_append(o, e->body.data);
    tt_strbuf_append(o, "}\n\n");
    if (art->nkernels == 1) {
        memcpy(e->stats.grid, k->grid, sizeof(k->grid));
        memcpy(e->stats.block, k->block, sizeof(k->block));
    }
    if (e->shared_bytes > e->stats.shared_bytes)
        e->stats.shared_bytes = e->shared_bytes;
}

/* The root: ALLOCs of workspace intermediates around the kernels' nests. */
static void split_kernels(cl_emitter *e, tt_sid id, const char *entry, tt_cl_artifact *art)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    if (s->kind == TT_STMT_ALLOC && e->p->bufs.data[s->buf].param < 0) {
        e->workspace[s->buf] = true;
        split_kernels(e, s->body, entry, art);
        return;
    }
    if (s->kind == TT_STMT_SEQ) {
        for (uint32_t k = 0; k < s->n && !e->status; k++)
            split_kernels(e, e->p->items.data[s->first + k], entry, art);
        return;
    }
    emit_kernel(e, id, entry, art);
}

void tt_gpu_limits_default(tt_gpu_limits *lim)
{
    memset(lim, 0, sizeof(*lim));
    lim->max_threads = 256;
    lim->max_block[0] = lim->max_block[1] = lim->max_block[2] = 256;
    lim->max_shared_bytes = 48 * 1024;
    lim->max_private_bytes = 16 * 1024;
    lim->max_vthread = 8;
}

/* Guarded, so that artifacts concatenate into one program (a network's, deploy/cl_net_source.c):
 * each defines the helpers of its index type once and points tt_floordiv at them. */
static const char preamble[] =
    "/* Floor division and remainder of the tensor language (TVM's floordiv/floormod). */\n"
    "#ifndef TT_FLOORDIV\n"
    "#define TT_FLOORDIV(T) \\\n"
    "    inline T tt_floordiv_##T(T a, T b) { T q = a / b; return (a % b != 0 && ((a < 0) != (b "
    "< 0))) ? q - 1 : q; } \\\n"
    "    inline T tt_floormod_##T(T a, T b) { T r = a % b; return (r != 0 && ((r < 0) != (b < "
    "0))) ? r + b : r; }\n"
    "#endif\n";

tt_status tt_codegen_opencl(const tt_program *p, const char *entry, const tt_gpu_limits *lim,
                            char **text, size_t *len, tt_opencl_stats *stats, tt_errbuf *err)
{
    *text = NULL;
    if (len)
        *len = 0;
    cl_emitter e;
    memset(&e, 0, sizeof(e));
    e.p = p;
    e.err = err;
    if (lim)
        e.lim = *lim;
    else
        tt_gpu_limits_default(&e.lim);
    size_t nvars = p->pool.vars.len;
    e.buf_name = calloc(p->bufs.len + 1, sizeof(char *));
    e.var_name = calloc(nvars + 1, sizeof(char *));
    e.workspace = calloc(p->bufs.len + 1, sizeof(bool));
    tt_cl_artifact *art = calloc(1, sizeof(*art));
    if (!e.buf_name || !e.var_name || !e.workspace || !art) {
        fail(&e, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t b = 0; b < p->bufs.len; b++) {
        const tt_buffer *bf = &p->bufs.data[b];
        if (!(e.buf_name[b] = ident(bf->name, (uint32_t)b)))
            fail(&e, TT_ERR_NOMEM, "out of memory");
        e.long_index |= bf->dtype == TT_DT_INT64 || bf->size > INT32_MAX;
        e.fp64 |= bf->dtype == TT_DT_FLOAT64;
    }
    for (size_t v = 0; v < nvars && !e.status; v++)
        if (!(e.var_name[v] = ident(p->pool.vars.data[v].name, (uint32_t)v)))
            fail(&e, TT_ERR_NOMEM, "out of memory");
    for (size_t n = 1; n < p->pool.nodes.len; n++)
        e.fp64 |= p->pool.nodes.data[n].dtype == TT_DT_FLOAT64;
    if (p->nparams > TT_CL_MAX_BUFFERS) {
        fail_limit(&e, TT_GPU_LIMIT_COUNTS, "more than %d parameters", TT_CL_MAX_BUFFERS);
        goto out;
    }
    if (e.status)
        goto out;
    split_kernels(&e, p->root, entry, art);
    if (e.status)
        goto out;
    for (size_t b = 0; b < p->bufs.len; b++) {
        const tt_buffer *bf = &p->bufs.data[b];
        tt_cl_buffer cb = {cl_elem(bf->dtype), bf->size};
        if (bf->param >= 0)
            art->params[bf->param] = cb;
        else if (e.workspace[b]) {
            if (art->nworkspace == TT_CL_MAX_BUFFERS) {
                fail_limit(&e, TT_GPU_LIMIT_COUNTS, "more than %d workspace buffers",
                           TT_CL_MAX_BUFFERS);
                goto out;
            }
            art->workspace[art->nworkspace++] = cb;
        }
    }
    art->nparams = p->nparams;
    char *head = tt_cl_artifact_header(art);
    tt_strbuf all = {0};
    if (head)
        tt_strbuf_append(&all, head);
    free(head);
    if (e.fp64)
        tt_strbuf_append(&all, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    tt_strbuf_append(&all, preamble);
    const char *it = ctype(&e, TT_DT_INT64);
    tt_strbuf_printf(&all,
                     "#ifndef TT_FLOORDIV_%s\n#define TT_FLOORDIV_%s\nTT_FLOORDIV(%s)\n#endif\n",
                     it, it, it);
    tt_strbuf_printf(&all,
                     "#undef tt_floordiv\n#undef tt_floormod\n"
                     "#define tt_floordiv tt_floordiv_%s\n#define tt_floormod tt_floormod_%s\n\n",
                     it, it);
    if (e.source.len)
        tt_strbuf_append(&all, e.source.data);
    if (all.oom || e.body.oom || e.decls.oom || e.source.oom) {
        tt_strbuf_free(&all);
        fail(&e, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (len)
        *len = all.len;
    *text = tt_strbuf_take(&all);
    e.stats.kernels = art->nkernels;
out:
    if (stats && (!e.status || e.status == TT_ERR_LIMIT))
        *stats = e.stats;
    if (e.buf_name)
        for (size_t b = 0; b < p->bufs.len; b++)
            free(e.buf_name[b]);
    if (e.var_name)
        for (size_t v = 0; v < nvars; v++)
            free(e.var_name[v]);
    free(e.buf_name);
    free(e.var_name);
    free(e.workspace);
    free(art);
    tt_strbuf_free(&e.body);
    tt_strbuf_free(&e.decls);
    tt_strbuf_free(&e.source);
    return e.status;
}

tt_status tt_codegen_opencl_check(const tt_program *p, const tt_gpu_limits *lim, tt_errbuf *err)
{
    char *text = NULL;
    tt_status s = tt_codegen_opencl(p, "kernel", lim, &text, NULL, NULL, err);
    free(text);
    return s;
}
