/* Accumulators kept in SSA values while emitting (declared in codegen_int.h).
 *
 * A register tile accumulates into a local buffer: `C[i] = C[i] + a * b` for each unrolled row
 * and vector of the tile, inside the rolled reduction loops.  Emitted as loads and stores, LLVM's
 * LICM had to promote them to registers across those loops, and where a padded update's branch
 * stood between the loads and stores it did not: the optimised kernel still loaded and stored
 * every accumulator at every multiply-add (a depthwise tile whose taps are guarded; the best
 * such kernels ran 1.1-1.6x faster once promoted here).  The emitter knows what LICM has to
 * prove: the tile's indices do not change inside the loop (they use only the outer loops'
 * variables, with the same coefficients in every access, and constants of unrolled loops), so
 * two accesses are the same element exactly when their constant parts are equal.  It keeps one
 * value per element (a slot, keyed by that constant part), loads it before the loop where it is
 * first needed, carries it through each rolled loop inside by a phi at the loop's header and
 * through guarded code by a phi at the join, and stores what was written once after the loop.
 *
 * A buffer qualifies in the outermost rolled loop (constant bounds, no parallel loop or `if`
 * inside) where every access to it does and that emits at least PROMO_MIN_UPDATES stores to it
 * per iteration; the tile's slots together hold at most PROMO_MAX_BYTES, twice an AVX-512
 * register file: a larger tile is left in memory, to LLVM.  Smaller bodies are left too: their
 * loops became small enough for LLVM to unroll everything around them (llvm_emit.c keeps loops
 * around a promoted tile rolled, but only those with a tile's worth of work). */
#include "codegen_int.h"

#include <stdlib.h>
#include <string.h>

#define PROMO_MAX_BYTES   4096
#define PROMO_MIN_UPDATES 8
#define PROMO_MAX_SLOTS   65536 /* keys summed over accesses, an upper bound of the slots */
#define PROMO_MAX_OUTER   16
#define PROMO_MAX_FRAMES  64

/* A loop or a branch arm inside the root; frames[0] is the root loop. */
typedef struct {
    bool loop;
    LLVMBasicBlockRef pre, head; /* loop: the blocks that enter it and its header */
    LLVMValueRef *cur;           /* per slot: its value here, NULL = not needed here yet */
    LLVMValueRef *phi;           /* loop: per slot, the header's phi */
} frame;

typedef struct tt__promo {
    uint32_t buf;
    int lanes; /* of each slot; 0 = scalars */
    LLVMTypeRef elem, type;
    LLVMBasicBlockRef root_pre;
    LLVMValueRef base; /* the element at the outer variables' part of the index */
    int nouter;        /* the variables kept symbolic, as bound at the root */
    uint32_t outer_var[PROMO_MAX_OUTER];
    LLVMValueRef outer_value[PROMO_MAX_OUTER];
    int nslots, max_slots;
    int64_t *key;
    LLVMValueRef *ptr;
    bool *written;
    int nframes;
    int lost; /* loops and arms inside that got no frame (an error is set): their ends pop none */
    frame frames[PROMO_MAX_FRAMES];
} tt__promo;

/* ---- Which buffer, and where ---- */

enum { VAR_OUTSIDE, VAR_CONST, VAR_VECTOR, VAR_ROLLED };

typedef struct {
    emitter *e;
    uint32_t buf, loop_var;
    bool ok;
    int lanes; /* -1 until the first access */
    int64_t residue;
    int nouter;
    uint32_t outer_var[PROMO_MAX_OUTER];
    int64_t outer_coef[PROMO_MAX_OUTER];
    int64_t max_keys; /* elements one access touches, at most (the tile's size) */
    int64_t sum_keys; /* over all accesses: room for every slot */
    int64_t updates;  /* stores to the buffer emitted per iteration of the loop */
    uint8_t *status;  /* per variable bound inside the loop */
    int64_t *extent;
    uint32_t vec_var;
    int vec_lanes; /* > 0 inside a vector loop */
} scan;

static bool is_affine(const tt_expr_pool *p, tt_eid id)
{
    const tt_expr *n = tt_expr_get(p, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_VAR: return true;
    case TT_EXPR_ADD:
    case TT_EXPR_SUB: return is_affine(p, n->a) && is_affine(p, n->b);
    case TT_EXPR_NEG: return is_affine(p, n->a);
    case TT_EXPR_MUL:
        return (tt_expr_is_const_int(p, n->a, NULL) && is_affine(p, n->b)) ||
               (tt_expr_is_const_int(p, n->b, NULL) && is_affine(p, n->a));
    default: return false;
    }
}

/* The value of affine `id` with every variable at 0, except those bound to constants now. */
static int64_t constant_part(const emitter *e, tt_eid id, bool bound_constants)
{
    const tt_expr_pool *p = &e->p->pool;
    const tt_expr *n = tt_expr_get(p, id);
    int64_t c;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: return n->imm.i;
    case TT_EXPR_VAR: {
        LLVMValueRef v = e->vars[n->a];
        if (e->lanes && n->a == e->vec_var) /* lane 0: 0, or where this piece starts */
            return bound_constants && LLVMIsAConstantInt(e->vec_base)
                       ? LLVMConstIntGetSExtValue(e->vec_base)
                       : 0;
        if (!bound_constants || !v || !LLVMIsAConstantInt(v))
            return 0;
        return LLVMConstIntGetSExtValue(v);
    }
    case TT_EXPR_ADD:
        return constant_part(e, n->a, bound_constants) + constant_part(e, n->b, bound_constants);
    case TT_EXPR_SUB:
        return constant_part(e, n->a, bound_constants) - constant_part(e, n->b, bound_constants);
    case TT_EXPR_NEG: return -constant_part(e, n->a, bound_constants);
    case TT_EXPR_MUL:
        if (tt_expr_is_const_int(p, n->a, &c))
            return c * constant_part(e, n->b, bound_constants);
        tt_expr_is_const_int(p, n->b, &c);
        return c * constant_part(e, n->a, bound_constants);
    default: return 0;
    }
}

static void collect_vars(const tt_expr_pool *p, tt_eid id, uint32_t *vars, int *n, int max)
{
    const tt_expr *x = tt_expr_get(p, id);
    if (x->kind == TT_EXPR_VAR) {
        for (int k = 0; k < *n; k++)
            if (vars[k] == x->a)
                return;
        if (*n < max)
            vars[(*n)++] = x->a;
        else
            vars[0] = UINT32_MAX; /* too many: refused by the caller */
        return;
    }
    if (x->kind == TT_EXPR_INT)
        return;
    collect_vars(p, x->a, vars, n, max);
    if (x->kind != TT_EXPR_NEG)
        collect_vars(p, x->b, vars, n, max);
}

/* One access at `index` to the buffer inside the loop: does it keep the buffer promotable? */
static void scan_access(scan *sc, tt_eid index)
{
    const tt_expr_pool *p = &sc->e->p->pool;
    if (!is_affine(p, index)) {
        sc->ok = false;
        return;
    }
    uint32_t vars[32];
    int nv = 0;
    collect_vars(p, index, vars, &nv, 32);
    if (nv && vars[0] == UINT32_MAX) {
        sc->ok = false;
        return;
    }
    int lanes = 0;
    int64_t konst = constant_part(sc->e, index, true), keys = 1;
    uint32_t outer_var[PROMO_MAX_OUTER];
    int64_t outer_coef[PROMO_MAX_OUTER];
    int nouter = 0;
    for (int k = 0; k < nv; k++) {
        uint32_t v = vars[k];
        int64_t coef = tt_expr_coef(p, index, v);
        if (coef == 0)
            continue;
        if (v == sc->loop_var) {
            sc->ok = false;
            return;
        }
        switch (sc->status[v]) {
        case VAR_CONST: keys *= sc->extent[v]; break;
        case VAR_VECTOR:
            if (coef != 1) {
                sc->ok = false; /* a gather */
                return;
            }
            lanes = sc->vec_lanes;
            keys *= sc->extent[v] / lanes; /* its pieces */
            break;
        case VAR_ROLLED: sc->ok = false; return;
        default: {
            LLVMValueRef b = sc->e->vars[v];
            if (!b) {
                sc->ok = false;
                return;
            }
            if (LLVMIsAConstantInt(b))
                break; /* in konst */
            if (nouter == PROMO_MAX_OUTER) {
                sc->ok = false;
                return;
            }
            outer_var[nouter] = v;
            outer_coef[nouter++] = coef;
        }
        }
    }
    /* Vector slots are equal or apart: every unrolled step moves whole vectors. */
    if (lanes)
        for (int k = 0; k < nv; k++)
            if (sc->status[vars[k]] == VAR_CONST && tt_expr_coef(p, index, vars[k]) % lanes) {
                sc->ok = false;
                return;
            }
    int64_t residue = lanes ? ((konst % lanes) + lanes) % lanes : 0;
    if (sc->lanes < 0) {
        sc->lanes = lanes;
        sc->residue = residue;
        sc->nouter = nouter;
        memcpy(sc->outer_var, outer_var, sizeof(outer_var[0]) * (size_t)nouter);
        memcpy(sc->outer_coef, outer_coef, sizeof(outer_coef[0]) * (size_t)nouter);
    } else {
        if (lanes != sc->lanes || residue != sc->residue || nouter != sc->nouter) {
            sc->ok = false;
            return;
        }
        for (int k = 0; k < nouter; k++) {
            int j = 0;
            while (j < nouter && sc->outer_var[j] != outer_var[k])
                j++;
            if (j == nouter || sc->outer_coef[j] != outer_coef[k]) {
                sc->ok = false;
                return;
            }
        }
    }
    if (keys > sc->max_keys)
        sc->max_keys = keys;
    sc->sum_keys += keys;
}

/* Scans `id` if it is a load of the buffer; stops the walk once the buffer is refused. */
static bool scan_load(void *ctx, tt_eid id)
{
    scan *sc = ctx;
    const tt_expr *n = tt_expr_get(&sc->e->p->pool, id);
    if (n->kind == TT_EXPR_LOAD && n->b == sc->buf)
        scan_access(sc, n->a);
    return !sc->ok;
}

static void scan_expr(scan *sc, tt_eid id)
{
    tt_expr_any(&sc->e->p->pool, id, scan_load, sc);
}

/* Walks the loop's body as emit_loop will emit it (tt__codegen_loop_form). */
static void scan_stmt(scan *sc, tt_sid id, int auto_unroll, bool in_vector, int64_t copies)
{
    const tt_stmt *s = &sc->e->p->stmts.data[id];
    if (!sc->ok)
        return;
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n && sc->ok; k++)
            scan_stmt(sc, sc->e->p->items.data[s->first + k], auto_unroll, in_vector, copies);
        return;
    case TT_STMT_STORE:
        if (s->buf == sc->buf) {
            sc->updates += copies;
            scan_access(sc, s->index);
        }
        scan_expr(sc, s->index);
        scan_expr(sc, s->value);
        return;
    case TT_STMT_ALLOC:
        if (s->buf == sc->buf) {
            sc->ok = false;
            return;
        }
        scan_stmt(sc, s->body, auto_unroll, in_vector, copies);
        return;
    case TT_STMT_FOR: {
        int au = s->unroll_max_step ? s->unroll_max_step : auto_unroll;
        uint32_t saved_vec = sc->vec_var;
        int saved_lanes = sc->vec_lanes;
        switch (tt__codegen_loop_form(sc->e, s, au, in_vector)) {
        case TT__LOOP_UNIT:
        case TT__LOOP_UNROLLED:
            sc->status[s->var] = VAR_CONST;
            sc->extent[s->var] = s->extent;
            copies *= s->extent;
            break;
        case TT__LOOP_VECTOR:
            sc->status[s->var] = VAR_VECTOR;
            sc->vec_var = s->var;
            sc->vec_lanes = tt__codegen_vector_piece(s->extent);
            sc->extent[s->var] = s->extent;
            copies *= s->extent / sc->vec_lanes; /* its pieces, each a store */
            in_vector = true;
            break;
        case TT__LOOP_ROLLED: sc->status[s->var] = VAR_ROLLED; break;
        default: sc->ok = false; return; /* parallel, or a loop over vectors */
        }
        scan_stmt(sc, s->body, au, in_vector, copies);
        sc->status[s->var] = VAR_OUTSIDE;
        sc->vec_var = saved_vec;
        sc->vec_lanes = saved_lanes;
        return;
    }
    default: sc->ok = false; return; /* an `if` */
    }
}

/* Float buffers stored under `id`, each once, into out (at most max); returns the count. */
static int stored_buffers(const emitter *e, tt_sid id, uint32_t *out, int n, int max)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            n = stored_buffers(e, e->p->items.data[s->first + k], out, n, max);
        return n;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: return stored_buffers(e, s->body, out, n, max);
    case TT_STMT_STORE: {
        tt_dtype t = e->p->bufs.data[s->buf].dtype;
        if (t != TT_DT_FLOAT32 && t != TT_DT_FLOAT64)
            return n;
        for (int k = 0; k < n; k++)
            if (out[k] == s->buf)
                return n;
        if (n < max)
            out[n++] = s->buf;
        return n;
    }
    default: return n;
    }
}

/* ---- Slots and frames ---- */

static frame *push(emitter *e, bool loop)
{
    tt__promo *pr = e->promo;
    if (pr->nframes == PROMO_MAX_FRAMES) {
        e->status = TT_ERR_LIMIT;
        pr->lost++;
        return NULL;
    }
    frame *f = &pr->frames[pr->nframes];
    f->loop = loop;
    f->cur = calloc((size_t)pr->max_slots * 2, sizeof(LLVMValueRef));
    if (!f->cur) {
        e->status = TT_ERR_NOMEM;
        pr->lost++;
        return NULL;
    }
    f->phi = f->cur + pr->max_slots;
    pr->nframes++;
    return f;
}

static void pop(tt__promo *pr)
{
    pr->nframes--;
    free(pr->frames[pr->nframes].cur);
}

/* A phi in loop header `head`, among its other phis. */
static LLVMValueRef header_phi(emitter *e, LLVMBasicBlockRef head, LLVMTypeRef t)
{
    LLVMBasicBlockRef at = LLVMGetInsertBlock(e->b);
    LLVMValueRef first = LLVMGetFirstInstruction(head);
    while (first && LLVMIsAPHINode(first))
        first = LLVMGetNextInstruction(first);
    if (first)
        LLVMPositionBuilderBefore(e->b, first);
    else
        LLVMPositionBuilderAtEnd(e->b, head);
    LLVMValueRef phi = LLVMBuildPhi(e->b, t, "acc");
    LLVMPositionBuilderAtEnd(e->b, at);
    return phi;
}

/* The value of slot k in frame fi, made available there on first use. */
static LLVMValueRef value_in(emitter *e, int fi, int k)
{
    tt__promo *pr = e->promo;
    frame *f = &pr->frames[fi];
    if (f->cur[k])
        return f->cur[k];
    LLVMValueRef in;
    if (fi == 0) {
        /* Loaded before the root loop, in its preheader. */
        LLVMBasicBlockRef at = LLVMGetInsertBlock(e->b);
        LLVMPositionBuilderBefore(e->b, LLVMGetBasicBlockTerminator(pr->root_pre));
        in = LLVMBuildLoad2(e->b, pr->type, pr->ptr[k], "");
        tt__codegen_set_access(e, in, pr->buf);
        LLVMPositionBuilderAtEnd(e->b, at);
    } else {
        in = value_in(e, fi - 1, k);
    }
    if (f->loop) {
        f->phi[k] = header_phi(e, f->head, pr->type);
        LLVMAddIncoming(f->phi[k], &in, &f->pre, 1);
        in = f->phi[k];
    }
    return f->cur[k] = in;
}

/* The slot of the element at the index's constant part, made on first use. */
static int slot(emitter *e, tt_eid index)
{
    tt__promo *pr = e->promo;
    /* Every other variable must be one kept symbolic, still bound as at the root. */
    uint32_t vars[32];
    int nv = 0;
    collect_vars(&e->p->pool, index, vars, &nv, 32);
    for (int k = 0; k < nv; k++) {
        LLVMValueRef b = vars[k] == UINT32_MAX ? NULL : e->vars[vars[k]];
        if ((b && LLVMIsAConstantInt(b)) || (e->lanes && vars[k] == e->vec_var))
            continue;
        int j = 0;
        while (j < pr->nouter && (pr->outer_var[j] != vars[k] || pr->outer_value[j] != b))
            j++;
        if (j == pr->nouter && tt_expr_coef(&e->p->pool, index, vars[k]) != 0) {
            e->status = TT_ERR_INTERNAL; /* the scan and the emitter disagree */
            return -1;
        }
    }
    int64_t key = constant_part(e, index, true);
    for (int k = 0; k < pr->nslots; k++)
        if (pr->key[k] == key)
            return k;
    if (pr->nslots == pr->max_slots) {
        e->status = TT_ERR_INTERNAL;
        return -1;
    }
    int k = pr->nslots++;
    pr->key[k] = key;
    pr->written[k] = false;
    /* Its address, before the root loop. */
    LLVMBasicBlockRef at = LLVMGetInsertBlock(e->b);
    LLVMPositionBuilderBefore(e->b, LLVMGetBasicBlockTerminator(pr->root_pre));
    LLVMValueRef off = LLVMConstInt(e->i64, (unsigned long long)key, 1);
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->b, pr->elem, pr->base, &off, 1, "");
    if (pr->lanes)
        ptr = LLVMBuildBitCast(e->b, ptr, LLVMPointerType(pr->type, 0), "");
    pr->ptr[k] = ptr;
    LLVMPositionBuilderAtEnd(e->b, at);
    return k;
}

/* ---- The interface ---- */

static void release(emitter *e)
{
    tt__promo *pr = e->promo;
    while (pr->nframes)
        pop(pr);
    free(pr->key);
    free(pr);
    e->promo = NULL;
}

bool tt__promo_try(emitter *e, const tt_stmt *loop, LLVMBasicBlockRef head)
{
    if (e->promo || e->lanes || e->status)
        return false;
    uint32_t bufs[8];
    int nb = stored_buffers(e, loop->body, bufs, 0, 8);
    if (!nb)
        return false;
    size_t nvars = e->p->pool.vars.len;
    uint8_t *status = calloc(nvars, sizeof(*status));
    int64_t *extent = calloc(nvars, sizeof(*extent));
    if (!status || !extent) {
        free(status);
        free(extent);
        return false;
    }
    scan sc;
    bool found = false;
    for (int b = 0; b < nb && !found; b++) {
        memset(&sc, 0, sizeof(sc));
        sc.e = e;
        sc.buf = bufs[b];
        sc.loop_var = loop->var;
        sc.ok = e->bufs[bufs[b]] && e->buf_fn[bufs[b]] == e->fn;
        sc.lanes = -1;
        sc.status = status;
        sc.extent = extent;
        sc.vec_var = UINT32_MAX;
        scan_stmt(&sc, loop->body, e->auto_unroll, false, 1); /* emit_loop set the loop's own */
        size_t bytes = (size_t)tt_dtype_bytes(e->p->bufs.data[sc.buf].dtype) *
                       (size_t)(sc.lanes > 0 ? sc.lanes : 1);
        found = sc.ok && sc.updates >= PROMO_MIN_UPDATES &&
                sc.max_keys * (int64_t)bytes <= PROMO_MAX_BYTES && sc.sum_keys <= PROMO_MAX_SLOTS;
    }
    free(status);
    free(extent);
    if (!found)
        return false;
    tt__promo *pr = calloc(1, sizeof(*pr));
    int max_slots = (int)sc.sum_keys;
    if (!pr)
        return false;
    pr->key = malloc((size_t)max_slots * (sizeof(int64_t) + sizeof(LLVMValueRef) + sizeof(bool)));
    if (!pr->key) {
        free(pr);
        return false;
    }
    pr->ptr = (LLVMValueRef *)(pr->key + max_slots);
    pr->written = (bool *)(pr->ptr + max_slots);
    pr->max_slots = max_slots;
    pr->buf = sc.buf;
    pr->lanes = sc.lanes;
    pr->elem = e->p->bufs.data[sc.buf].dtype == TT_DT_FLOAT64 ? e->f64 : e->f32;
    pr->type = sc.lanes ? LLVMVectorType(pr->elem, (unsigned)sc.lanes) : pr->elem;
    pr->root_pre = LLVMGetInsertBlock(e->b);
    /* The outer variables' part of the index, the same in every access. */
    LLVMValueRef outer = LLVMConstInt(e->i64, 0, 0);
    pr->nouter = sc.nouter;
    for (int k = 0; k < sc.nouter; k++) {
        pr->outer_var[k] = sc.outer_var[k];
        pr->outer_value[k] = e->vars[sc.outer_var[k]];
        LLVMValueRef term =
            LLVMBuildMul(e->b, pr->outer_value[k],
                         LLVMConstInt(e->i64, (unsigned long long)sc.outer_coef[k], 1), "");
        outer = LLVMBuildAdd(e->b, outer, term, "");
    }
    pr->base = LLVMBuildGEP2(e->b, pr->elem, e->bufs[sc.buf], &outer, 1, "tile");
    e->promo = pr;
    frame *f = push(e, true);
    if (!f) {
        release(e);
        return false;
    }
    f->pre = pr->root_pre;
    f->head = head;
    e->stats.promoted_tiles++;
    return true;
}

void tt__promo_loop_begin(emitter *e, LLVMBasicBlockRef head)
{
    frame *f = push(e, true);
    if (f) {
        f->pre = LLVMGetInsertBlock(e->b);
        f->head = head;
    }
}

void tt__promo_loop_end(emitter *e, LLVMBasicBlockRef latch)
{
    tt__promo *pr = e->promo;
    if (pr->lost) {
        pr->lost--;
        return;
    }
    int fi = pr->nframes - 1;
    frame *f = &pr->frames[fi];
    for (int k = 0; k < pr->nslots; k++)
        if (f->phi[k])
            LLVMAddIncoming(f->phi[k], &f->cur[k], &latch, 1);
    if (fi > 0) {
        /* After the loop each slot holds what its header held when the loop exited. */
        frame *up = &pr->frames[fi - 1];
        for (int k = 0; k < pr->nslots; k++)
            if (f->phi[k])
                up->cur[k] = f->phi[k];
        pop(pr);
        return;
    }
    for (int k = 0; k < pr->nslots; k++)
        if (pr->written[k] && f->phi[k]) {
            LLVMValueRef st = LLVMBuildStore(e->b, f->phi[k], pr->ptr[k]);
            tt__codegen_set_access(e, st, pr->buf);
        }
    release(e);
}

void tt__promo_arm_begin(emitter *e)
{
    push(e, false);
}

void tt__promo_arm_end(emitter *e, LLVMBasicBlockRef arm_end, LLVMBasicBlockRef other)
{
    tt__promo *pr = e->promo;
    if (pr->lost) {
        pr->lost--;
        return;
    }
    int fi = pr->nframes - 1;
    frame *f = &pr->frames[fi], *up = &pr->frames[fi - 1];
    for (int k = 0; k < pr->nslots; k++) {
        if (!f->cur[k] || f->cur[k] == up->cur[k])
            continue;
        LLVMValueRef phi = LLVMBuildPhi(e->b, pr->type, "acc");
        LLVMValueRef vals[2] = {f->cur[k], up->cur[k]};
        LLVMBasicBlockRef bbs[2] = {arm_end, other};
        LLVMAddIncoming(phi, vals, bbs, 2);
        up->cur[k] = phi;
    }
    pop(pr);
}

bool tt__promo_buffer(const emitter *e, uint32_t buf)
{
    return e->promo && e->promo->buf == buf;
}

LLVMValueRef tt__promo_read(emitter *e, tt_eid index)
{
    int k = slot(e, index);
    if (k < 0)
        return LLVMGetUndef(e->promo->type);
    return value_in(e, e->promo->nframes - 1, k);
}

void tt__promo_write(emitter *e, tt_eid index, LLVMValueRef v)
{
    int k = slot(e, index);
    if (k < 0)
        return;
    tt__promo *pr = e->promo;
    /* Every frame up to the root needs the slot, to carry the new value out. */
    value_in(e, pr->nframes - 1, k);
    pr->frames[pr->nframes - 1].cur[k] = v;
    pr->written[k] = true;
}
