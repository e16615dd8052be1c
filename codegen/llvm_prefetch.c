/* Software prefetch of a micro-kernel's next weight panel, spread over the passes that reuse the
 * current one.
 *
 * A register-blocked kernel reads a panel of packed weights (the inner reduction by the register
 * tile's columns) once per row tile of its cache tile: the first pass takes it from memory or the
 * last-level cache, the others from L1 or L2.  The hardware prefetcher runs only a little ahead
 * of the first pass, so that pass waits on memory at the pace of its multiply-adds, about 40
 * bytes a cycle, several times what one core's misses can bring in; the other passes wait on
 * nothing.  Here each step of the inner reduction asks for a line (up to 4) of the NEXT panel, so
 * that the whole of it arrives while the current one is reused, at a pace memory can keep.
 *
 * Applies to the innermost rolled loop around a register tile whose body makes a vector load of
 * a packed constant parameter (the LR step's weights) that moves with the loop.  The next panel
 * is the one after it in memory: packed weights are laid out in the order the loops read them
 * (the outer reduction's next step; past its last, the next column tile's first panel).  The
 * loops around it up to the first that moves the load are the passes; their iteration number and
 * the loop's step number count through the next panel's lines.  The environment variable
 * TT_NO_PANEL_PREFETCH turns it off, to measure what it does.  A prefetch never faults, so one
 * beyond the buffer's end (the last panel's) is harmless. */
#include <llvm-c/Core.h>
#include <stdlib.h>

#include "codegen_int.h"

#define LINE_BYTES         64
#define MAX_LINES_PER_STEP 4
#define MIN_PANEL_BYTES    4096 /* smaller panels come in with the first pass's own lines */

typedef struct {
    const tt_program *p;
    uint32_t loop_var;
    const tt__inner_loops *inner; /* the loops inside the loop */
    tt_eid index;                 /* the load found */
    uint32_t buf;
} find_ctx;

/* A vector load of packed weights: a constant parameter with a layout, contiguous along one of
 * the loops inside, moving with the loop. */
static bool weights_load(void *vctx, tt_eid id)
{
    find_ctx *c = vctx;
    const tt_expr *n = tt_expr_get(&c->p->pool, id);
    if (n->kind != TT_EXPR_LOAD)
        return false;
    const tt_buffer *b = &c->p->bufs.data[n->b];
    if (b->param < 0 || b->layout.nparts == 0)
        return false;
    int64_t step = tt_expr_coef(&c->p->pool, n->a, c->loop_var);
    if (step <= 0 || step == INT64_MIN)
        return false;
    bool contiguous = false;
    for (int i = 0; i < c->inner->n && !contiguous; i++)
        contiguous = tt_expr_coef(&c->p->pool, n->a, c->inner->var[i]) == 1;
    if (!contiguous)
        return false;
    c->index = n->a;
    c->buf = n->b;
    return true;
}

static bool find_in_stmt(find_ctx *c, tt_sid id, bool *rolled_inside)
{
    const tt_stmt *s = &c->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (find_in_stmt(c, c->p->items.data[s->first + k], rolled_inside))
                return true;
        return false;
    case TT_STMT_FOR:
        if (s->ann != TT_ANN_UNROLL && s->ann != TT_ANN_VECTORIZE)
            *rolled_inside = true;
        return find_in_stmt(c, s->body, rolled_inside);
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return find_in_stmt(c, s->body, rolled_inside);
    case TT_STMT_STORE:
        return tt_expr_any(&c->p->pool, s->value, weights_load, c) ||
               tt_expr_any(&c->p->pool, s->index, weights_load, c);
    default: return false;
    }
}

void tt__codegen_prefetch_panel(emitter *e, const tt_stmt *loop)
{
    const tt_program *p = e->p;
    /* TT_NO_PANEL_PREFETCH: kernels without it, to measure what it does (docs/codegen.md) */
    if (getenv("TT_NO_PANEL_PREFETCH") || e->lanes || e->nranges < 1 ||
        e->ranges[e->nranges - 1].var != loop->var)
        return;
    tt__inner_loops in = {.ok = true};
    tt__codegen_collect_loops(e, loop->body, &in);
    if (in.n == 0 || !in.ok)
        return;
    find_ctx c = {p, loop->var, &in, 0, 0};
    bool rolled_inside = false;
    if (!find_in_stmt(&c, loop->body, &rolled_inside) || rolled_inside)
        return;
    const tt_expr_pool *pool = &p->pool;
    int esize = tt_dtype_bytes(p->bufs.data[c.buf].dtype);
    int64_t step = tt_expr_coef(pool, c.index, loop->var);
    const int64_t loop_lo = e->ranges[e->nranges - 1].lo;
    const int64_t loop_n = e->ranges[e->nranges - 1].hi - loop_lo + 1;
    int64_t panel = step * loop_n; /* elements the loop's steps cover */
    if (esize <= 0 || loop_n < 2 || panel * esize < MIN_PANEL_BYTES)
        return;
    /* Outward: the passes, the loops that do not move the load, up to the first that does (the
     * outer reduction).  The packed layout follows the loops, so the panel read next lies right
     * after this one: the next step of the outer reduction, or the next column tile's first. */
    int64_t passes = 1;
    LLVMValueRef pass = LLVMConstInt(e->i64, 0, 0);
    for (int k = e->nranges - 2; k >= 0; k--) {
        int64_t coef = tt_expr_coef(pool, c.index, e->ranges[k].var);
        int64_t n = e->ranges[k].hi - e->ranges[k].lo + 1;
        if (coef == INT64_MIN)
            return;
        if (coef != 0)
            break;
        if (n <= 1 || !e->vars[e->ranges[k].var])
            continue;
        /* pass += (v - lo) * passes: the innermost pass loop counts fastest */
        LLVMValueRef v =
            LLVMBuildSub(e->b, e->vars[e->ranges[k].var],
                         LLVMConstInt(e->i64, (unsigned long long)e->ranges[k].lo, 0), "");
        pass = LLVMBuildAdd(
            e->b, pass,
            LLVMBuildMul(e->b, v, LLVMConstInt(e->i64, (unsigned long long)passes, 0), ""), "");
        passes *= n;
    }
    int64_t lines = (panel * esize + LINE_BYTES - 1) / LINE_BYTES;
    int64_t steps = passes * loop_n;
    int64_t per_step = (lines + steps - 1) / steps;
    if (per_step > MAX_LINES_PER_STEP)
        per_step = MAX_LINES_PER_STEP;
    /* The panel's first element: the load's index with the loop and every loop inside it at 0. */
    LLVMValueRef saved[TT_EMIT_MAX_INNER + 1];
    uint32_t zeroed[TT_EMIT_MAX_INNER + 1];
    int nz = 0;
    zeroed[nz++] = loop->var;
    for (int i = 0; i < in.n; i++)
        zeroed[nz++] = in.var[i];
    for (int i = 0; i < nz; i++) {
        saved[i] = e->vars[zeroed[i]];
        e->vars[zeroed[i]] = LLVMConstInt(e->i64, 0, 0);
    }
    tt__vn_open(&e->vn); /* values built with the zeroed variables stay here */
    LLVMValueRef first = tt__codegen_emit_index(e, c.index);
    tt__vn_close(&e->vn);
    for (int i = nz - 1; i >= 0; i--)
        e->vars[zeroed[i]] = saved[i];
    if (!first)
        return;
    LLVMValueRef here = LLVMBuildSub(e->b, e->vars[loop->var],
                                     LLVMConstInt(e->i64, (unsigned long long)loop_lo, 0), "");
    LLVMValueRef count = LLVMBuildAdd(
        e->b, LLVMBuildMul(e->b, pass, LLVMConstInt(e->i64, (unsigned long long)loop_n, 0), ""),
        here, "");
    LLVMValueRef base = LLVMBuildAdd(e->b, LLVMBuildSExtOrBitCast(e->b, first, e->i64, ""),
                                     LLVMConstInt(e->i64, (unsigned long long)panel, 0), "");
    LLVMTypeRef fty =
        LLVMFunctionType(e->voidt, (LLVMTypeRef[]){e->i8p, e->i32, e->i32, e->i32}, 4, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(e->mod, "llvm.prefetch.p0i8");
    if (!fn)
        fn = LLVMAddFunction(e->mod, "llvm.prefetch.p0i8", fty);
    const int64_t line_elems = LINE_BYTES / esize;
    LLVMValueRef last = LLVMConstInt(e->i64, (unsigned long long)(lines - 1), 0);
    for (int64_t j = 0; j < per_step; j++) {
        LLVMValueRef line = LLVMBuildAdd(
            e->b,
            LLVMBuildMul(e->b, count, LLVMConstInt(e->i64, (unsigned long long)per_step, 0), ""),
            LLVMConstInt(e->i64, (unsigned long long)j, 0), "");
        line =
            LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntULT, line, last, ""), line, last, "");
        LLVMValueRef at = LLVMBuildAdd(
            e->b, base,
            LLVMBuildMul(e->b, line, LLVMConstInt(e->i64, (unsigned long long)line_elems, 0), ""),
            "");
        LLVMTypeRef mt = LLVMIntTypeInContext(e->ctx, (unsigned)esize * 8);
        LLVMValueRef ptr = LLVMBuildGEP2(
            e->b, mt, LLVMBuildBitCast(e->b, e->bufs[c.buf], LLVMPointerType(mt, 0), ""), &at, 1,
            "");
        /* rw 0 (read), locality 2 (into L2: it is read after the current panel's passes), data */
        LLVMValueRef args[4] = {LLVMBuildBitCast(e->b, ptr, e->i8p, ""), LLVMConstInt(e->i32, 0, 0),
                                LLVMConstInt(e->i32, 2, 0), LLVMConstInt(e->i32, 1, 0)};
        LLVMBuildCall2(e->b, fty, fn, args, 4, "");
    }
    e->stats.prefetched_panels++;
}
