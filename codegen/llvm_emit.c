/* Loop IR -> LLVM IR.
 *
 * Values are scalars, or vectors of `lanes` elements inside an explicitly vectorised loop: the
 * loop variable becomes <0, 1, ..., lanes-1>, loads and stores whose index moves by one element
 * per lane become vector loads and stores, invariant values are broadcast, anything else is
 * gathered lane by lane.  A loop body that does not fit this form (nested loops, guards that
 * depend on the loop variable, loads under a select) is emitted as a scalar loop instead and
 * counted as a fallback.  Parallel loops are outlined into a function that every thread of a team
 * runs: on the host's pool each takes ranges of iterations, its own contiguous share first and
 * then what is left of the others' (pool.h); on a cross target's libgomp each takes its
 * contiguous chunk. */
#include "codegen_int.h"
#include "pool.h"

#include <llvm-c/DebugInfo.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    LLVMValueRef v;
    bool vec;
} val;

/* Operation codes for value numbering (llvm_vn.c): an expression kind or one of these, times 256,
 * plus the dtypes or lanes that tell two results of the same operands apart. */
enum { VN_SPLAT = TT_EXPR_KIND_COUNT, VN_CONVERT, VN_GEP, VN_SELECT, VN_RECIP };
#define VN_OP(kind, extra) ((int)(kind)*256 + (int)(extra))

static LLVMTypeRef elem_type(emitter *e, tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return e->f32;
    case TT_DT_FLOAT64: return e->f64;
    case TT_DT_INT32: return e->i32;
    case TT_DT_INT64: return e->i64;
    default: return e->i1;
    }
}

/* Storage type of a buffer element (bool is a byte in memory). */
static LLVMTypeRef mem_type(emitter *e, tt_dtype t)
{
    return t == TT_DT_BOOL ? e->i8 : elem_type(e, t);
}

static LLVMTypeRef type_of(emitter *e, tt_dtype t, bool vec)
{
    LLVMTypeRef s = elem_type(e, t);
    return vec ? LLVMVectorType(s, (unsigned)e->lanes) : s;
}

static LLVMValueRef splat(emitter *e, LLVMValueRef s)
{
    LLVMValueRef known = tt__vn_find(&e->vn, VN_OP(VN_SPLAT, e->lanes), s, NULL, NULL);
    if (known)
        return known;
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), (unsigned)e->lanes);
    LLVMValueRef undef = LLVMGetUndef(vt);
    LLVMValueRef ins = LLVMBuildInsertElement(e->b, undef, s, LLVMConstInt(e->i32, 0, 0), "");
    LLVMValueRef mask = LLVMConstNull(LLVMVectorType(e->i32, (unsigned)e->lanes));
    LLVMValueRef r = LLVMBuildShuffleVector(e->b, ins, undef, mask, "");
    tt__vn_add(&e->vn, VN_OP(VN_SPLAT, e->lanes), s, NULL, NULL, r);
    return r;
}

static val widen(emitter *e, val x, bool vec)
{
    if (vec && !x.vec) {
        x.v = splat(e, x.v);
        x.vec = true;
    }
    return x;
}

static LLVMValueRef build_convert(emitter *e, LLVMValueRef v, tt_dtype from, tt_dtype to, bool vec);

/* Converts a value of dtype `from` to dtype `to`. */
static LLVMValueRef convert(emitter *e, LLVMValueRef v, tt_dtype from, tt_dtype to, bool vec)
{
    if (from == to)
        return v;
    int op = VN_OP(VN_CONVERT, from * 16 + to);
    LLVMValueRef r = tt__vn_find(&e->vn, op, v, NULL, NULL);
    if (!r) {
        r = build_convert(e, v, from, to, vec);
        tt__vn_add(&e->vn, op, v, NULL, NULL, r);
    }
    return r;
}

static LLVMValueRef build_convert(emitter *e, LLVMValueRef v, tt_dtype from, tt_dtype to, bool vec)
{
    LLVMTypeRef dst = type_of(e, to, vec);
    bool ff = tt_dtype_is_float(from), tf = tt_dtype_is_float(to);
    if (to == TT_DT_BOOL) {
        LLVMValueRef zero = LLVMConstNull(type_of(e, from, vec));
        return ff ? LLVMBuildFCmp(e->b, LLVMRealUNE, v, zero, "")
                  : LLVMBuildICmp(e->b, LLVMIntNE, v, zero, "");
    }
    if (from == TT_DT_BOOL)
        return tf ? LLVMBuildUIToFP(e->b, v, dst, "") : LLVMBuildZExt(e->b, v, dst, "");
    if (ff && tf)
        return tt_dtype_bytes(to) > tt_dtype_bytes(from) ? LLVMBuildFPExt(e->b, v, dst, "")
                                                         : LLVMBuildFPTrunc(e->b, v, dst, "");
    if (ff)
        return LLVMBuildFPToSI(e->b, v, dst, "");
    if (tf)
        return LLVMBuildSIToFP(e->b, v, dst, "");
    return tt_dtype_bytes(to) > tt_dtype_bytes(from) ? LLVMBuildSExt(e->b, v, dst, "")
                                                     : LLVMBuildTrunc(e->b, v, dst, "");
}

static tt_dtype dtype_of(emitter *e, tt_eid id)
{
    return (tt_dtype)tt_expr_get(&e->p->pool, id)->dtype;
}

static LLVMValueRef intrinsic(emitter *e, const char *name, LLVMTypeRef t, LLVMValueRef *args,
                              unsigned n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef tys[1] = {t};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, tys, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, tys, 1);
    return LLVMBuildCall2(e->b, fty, fn, args, n, "");
}

static val emit(emitter *e, tt_eid id);

LLVMValueRef tt__codegen_emit_index(emitter *e, tt_eid id)
{
    return emit(e, id).v;
}

/* Emits `id` as a scalar, with the vector variable (if any) pinned to lane 0. */
static LLVMValueRef emit_lane0(emitter *e, tt_eid id)
{
    if (!e->lanes)
        return emit(e, id).v;
    int lanes = e->lanes;
    LLVMValueRef saved = e->vars[e->vec_var];
    e->vars[e->vec_var] = e->vec_base;
    e->lanes = 0;
    LLVMValueRef v = emit(e, id).v;
    e->lanes = lanes;
    e->vars[e->vec_var] = saved;
    return v;
}

static LLVMValueRef element_ptr(emitter *e, uint32_t buf, LLVMValueRef index)
{
    LLVMValueRef r = tt__vn_find(&e->vn, VN_OP(VN_GEP, 0), e->bufs[buf], index, NULL);
    if (!r) {
        LLVMTypeRef t = mem_type(e, e->p->bufs.data[buf].dtype);
        r = LLVMBuildGEP2(e->b, t, e->bufs[buf], &index, 1, "");
        tt__vn_add(&e->vn, VN_OP(VN_GEP, 0), e->bufs[buf], index, NULL, r);
    }
    return r;
}

/* A load or store of buffer `buf`: its element alignment, and its alias scope.  Every buffer is
 * its own scope and aliases none of the others: parameters are distinct tensors (an output never
 * overlaps an input, as in TVM and BLAS), and local buffers are distinct allocations.  LLVM
 * proves a stack buffer apart from the parameters only by tracking every use of the alloca and
 * gives up past 20 uses, so an unrolled register tile of 14 rows stayed in memory, every FMA a
 * load and a store (conv2d C9 at 0.4 of its speed with 14x2 tiles); and it cannot prove one
 * parameter apart from another at all, so a kernel storing to its output reloaded every input
 * after each store.  The metadata says both at no cost. */
static void set_scopes(emitter *e, LLVMValueRef inst, uint32_t buf);
static LLVMValueRef masked_vector_load(emitter *e, LLVMTypeRef vt, LLVMValueRef p, int align,
                                       LLVMValueRef mask, LLVMValueRef passthrough);

void tt__codegen_set_access(emitter *e, LLVMValueRef inst, uint32_t buf)
{
    LLVMSetAlignment(inst, (unsigned)tt_dtype_bytes(e->p->bufs.data[buf].dtype));
    set_scopes(e, inst, buf);
}

/* The alias scopes alone (a call such as llvm.masked.load has its alignment as an argument). */
static void set_scopes(emitter *e, LLVMValueRef inst, uint32_t buf)
{
    size_t nb = e->p->bufs.len;
    if (!e->md_scopes) {
        e->md_scopes = calloc(nb, sizeof(*e->md_scopes));
        e->md_scope = calloc(nb, sizeof(*e->md_scope));
        e->md_noalias = calloc(nb, sizeof(*e->md_noalias));
        if (!e->md_scopes || !e->md_scope || !e->md_noalias) {
            e->status = TT_ERR_NOMEM;
            return;
        }
        LLVMMetadataRef dom_name = LLVMMDStringInContext2(e->ctx, "tt.buffers", 10);
        e->md_domain = LLVMMDNodeInContext2(e->ctx, &dom_name, 1);
        /* Scope nodes are uniqued by content: the buffer's index keeps them apart. */
        for (size_t b = 0; b < nb; b++) {
            char name[32];
            int len = snprintf(name, sizeof(name), "tt.buffer%zu", b);
            LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(e->ctx, name, (size_t)len),
                                      e->md_domain};
            e->md_scopes[b] = LLVMMDNodeInContext2(e->ctx, ops, 2);
        }
        e->md_scope_kind = LLVMGetMDKindIDInContext(e->ctx, "alias.scope", 11);
        e->md_noalias_kind = LLVMGetMDKindIDInContext(e->ctx, "noalias", 7);
    }
    if (!e->md_scope[buf]) {
        LLVMMetadataRef *others = malloc(sizeof(*others) * nb);
        if (!others) {
            e->status = TT_ERR_NOMEM;
            return;
        }
        size_t n = 0;
        for (size_t b = 0; b < nb; b++)
            if (b != buf)
                others[n++] = e->md_scopes[b];
        e->md_scope[buf] =
            LLVMMetadataAsValue(e->ctx, LLVMMDNodeInContext2(e->ctx, &e->md_scopes[buf], 1));
        e->md_noalias[buf] = LLVMMetadataAsValue(e->ctx, LLVMMDNodeInContext2(e->ctx, others, n));
        free(others);
    }
    LLVMSetMetadata(inst, e->md_scope_kind, e->md_scope[buf]);
    if (nb > 1)
        LLVMSetMetadata(inst, e->md_noalias_kind, e->md_noalias[buf]);
}

/* Whether `id` is a load, a read or a variable other than the vector's: what a lane's offset
 * cannot be known without when the code is generated. */
static bool other_var_or_load(void *ctx, tt_eid id)
{
    const emitter *e = ctx;
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    return n->kind == TT_EXPR_LOAD || n->kind == TT_EXPR_READ ||
           (n->kind == TT_EXPR_VAR && n->a != e->vec_var);
}

/* Adds sign * (the terms of `id` that use the vector variable) at lane value `v` to *sum; false
 * when such a term depends on anything else, or cannot be evaluated. */
static bool lane_terms(emitter *e, tt_eid id, int64_t sign, int64_t *vars, int64_t *sum)
{
    const tt_expr_pool *p = &e->p->pool;
    const tt_expr *n = tt_expr_get(p, id);
    if (!tt_expr_uses_var(p, id, e->vec_var))
        return true;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_ADD:
        return lane_terms(e, n->a, sign, vars, sum) && lane_terms(e, n->b, sign, vars, sum);
    case TT_EXPR_SUB:
        return lane_terms(e, n->a, sign, vars, sum) && lane_terms(e, n->b, -sign, vars, sum);
    case TT_EXPR_NEG: return lane_terms(e, n->a, -sign, vars, sum);
    default: break;
    }
    if (tt_expr_any(p, id, other_var_or_load, e))
        return false;
    tt_eval_env env = {.vars = vars};
    tt_value v;
    if (tt_expr_eval(p, id, &env, &v) != TT_OK)
        return false;
    *sum += sign * v.i;
    return true;
}

/* A load whose lanes, at offsets from lane 0's known when the code is generated, fall in a few
 * runs of at most a vector's length each: a masked vector load per run (only the elements the
 * lanes read are touched), shuffled together.  ShuffleNet's channel shuffle writes out[2c + j] =
 * in[58j + c]: a vector of 16 outputs reads two runs of 8, where a gather loaded every lane.
 * NULL when the offsets need more than MAX_RUNS runs, or the vector is partial (a lane mask). */
static LLVMValueRef emit_run_loads(emitter *e, uint32_t buf, tt_eid index, const int64_t *off)
{
    enum { MAX_RUNS = 4 };
    int lanes = e->lanes;
    if (e->lane_mask)
        return NULL;
    /* runs: from the smallest offset not yet covered, `lanes` elements on */
    int64_t start[MAX_RUNS];
    int nruns = 0, run[64];
    for (int l = 0; l < lanes; l++)
        run[l] = -1;
    for (;;) {
        int first = -1;
        for (int l = 0; l < lanes; l++)
            if (run[l] < 0 && (first < 0 || off[l] < off[first]))
                first = l;
        if (first < 0)
            break;
        if (nruns == MAX_RUNS)
            return NULL;
        start[nruns] = off[first];
        for (int l = 0; l < lanes; l++)
            if (run[l] < 0 && off[l] >= start[nruns] && off[l] < start[nruns] + lanes)
                run[l] = nruns;
        nruns++;
    }
    LLVMTypeRef mt = mem_type(e, e->p->bufs.data[buf].dtype);
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)lanes);
    LLVMValueRef first = emit_lane0(e, index), acc = NULL;
    int align = tt_dtype_bytes(e->p->bufs.data[buf].dtype);
    for (int k = 0; k < nruns; k++) {
        LLVMValueRef bits[64];
        bool whole = true;
        for (int i = 0; i < lanes; i++) {
            bool used = false;
            for (int l = 0; l < lanes && !used; l++)
                used = run[l] == k && off[l] - start[k] == i;
            bits[i] = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), used, 0);
            whole = whole && used;
        }
        LLVMValueRef at =
            start[k] - off[0]
                ? LLVMBuildAdd(e->b, first, LLVMConstInt(e->i64, (uint64_t)(start[k] - off[0]), 1),
                               "")
                : first;
        LLVMValueRef p =
            LLVMBuildBitCast(e->b, element_ptr(e, buf, at), LLVMPointerType(vt, 0), "");
        LLVMValueRef v;
        if (whole) {
            v = LLVMBuildLoad2(e->b, vt, p, "");
            tt__codegen_set_access(e, v, buf);
        } else {
            v = masked_vector_load(e, vt, p, align, LLVMConstVector(bits, (unsigned)lanes),
                                   LLVMGetUndef(vt));
            set_scopes(e, v, buf);
        }
        /* lanes of runs before k from acc, run k's from v */
        LLVMValueRef mask[64];
        for (int l = 0; l < lanes; l++)
            mask[l] = LLVMConstInt(
                e->i32, run[l] == k ? (unsigned)(lanes + off[l] - start[k]) : (unsigned)l, 0);
        acc = LLVMBuildShuffleVector(e->b, acc ? acc : LLVMGetUndef(vt), v,
                                     LLVMConstVector(mask, (unsigned)lanes), "");
    }
    e->stats.run_loads++;
    return acc;
}

/* A load whose lanes read few distinct elements at offsets from lane 0's that are known when
 * the code is generated: a grouped convolution's input, in[(c / 8) * 8 + r], read by a vector of
 * output channels c, is one value per group of 8 lanes.  Each distinct element is loaded once
 * and shuffled into place (a broadcast per group), where a gather would load every lane.  NULL
 * when the index does not take that form: the terms with the vector variable must depend on it
 * alone and the vector must start at a constant.  With more than 8 distinct elements, or one per
 * lane, the lanes are loaded in runs where they fall in few (emit_run_loads). */
static LLVMValueRef emit_pattern_load(emitter *e, uint32_t buf, tt_eid index)
{
    enum { MAX_DISTINCT = 8 };
    int lanes = e->lanes;
    if (!LLVMIsAConstantInt(e->vec_base) || lanes > 64)
        return NULL;
    size_t nv = e->p->pool.vars.len;
    int64_t *vars = malloc(sizeof(*vars) * (nv ? nv : 1));
    if (!vars) {
        e->status = TT_ERR_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < nv; i++)
        vars[i] = TT_VAR_UNBOUND;
    int64_t base = LLVMConstIntGetSExtValue(e->vec_base), off[64], distinct[MAX_DISTINCT];
    int nd = 0, which[64];
    bool ok = true, many = false;
    for (int l = 0; l < lanes && ok; l++) {
        vars[e->vec_var] = base + l;
        off[l] = 0;
        ok = lane_terms(e, index, 1, vars, &off[l]);
        int k = 0;
        while (ok && k < nd && distinct[k] != off[l] - off[0])
            k++;
        if (ok && k == nd && nd < MAX_DISTINCT)
            distinct[nd++] = off[l] - off[0];
        else if (ok && k == nd)
            many = true; /* too many for scalar loads: emit_run_loads */
        which[l] = k;
    }
    free(vars);
    if (!ok)
        return NULL;
    if (many || nd == lanes)
        return emit_run_loads(e, buf, index, off);
    LLVMTypeRef mt = mem_type(e, e->p->bufs.data[buf].dtype);
    LLVMValueRef first = emit_lane0(e, index);
    LLVMValueRef few = LLVMGetUndef(LLVMVectorType(mt, (unsigned)nd));
    for (int k = 0; k < nd; k++) {
        LLVMValueRef at =
            k == 0 ? first
                   : LLVMBuildAdd(e->b, first, LLVMConstInt(e->i64, (uint64_t)distinct[k], 1), "");
        LLVMValueRef x = LLVMBuildLoad2(e->b, mt, element_ptr(e, buf, at), "");
        tt__codegen_set_access(e, x, buf);
        few = LLVMBuildInsertElement(e->b, few, x, LLVMConstInt(e->i32, (unsigned)k, 0), "");
    }
    LLVMValueRef mask[64];
    for (int l = 0; l < lanes; l++)
        mask[l] = LLVMConstInt(e->i32, (unsigned)which[l], 0);
    e->stats.pattern_loads++;
    return LLVMBuildShuffleVector(e->b, few, LLVMGetUndef(LLVMTypeOf(few)),
                                  LLVMConstVector(mask, (unsigned)lanes), "");
}

static val emit_load(emitter *e, const tt_expr *n)
{
    uint32_t buf = n->b;
    tt_dtype t = e->p->bufs.data[buf].dtype;
    LLVMTypeRef mt = mem_type(e, t);
    int64_t c = e->lanes ? tt_expr_coef(&e->p->pool, n->a, e->vec_var) : 0;
    val r = {0, false};
    if (tt__promo_buffer(e, buf)) {
        /* An accumulator kept in a value (llvm_promote.c). */
        r.v = tt__promo_read(e, n->a);
        r.vec = c == 1;
        return r;
    }
    if (c == 0) {
        LLVMValueRef idx = e->lanes ? emit_lane0(e, n->a) : emit(e, n->a).v;
        r.v = LLVMBuildLoad2(e->b, mt, element_ptr(e, buf, idx), "");
        tt__codegen_set_access(e, r.v, buf);
    } else if (c == 1) {
        LLVMValueRef base = emit_lane0(e, n->a);
        LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)e->lanes);
        LLVMValueRef p =
            LLVMBuildBitCast(e->b, element_ptr(e, buf, base), LLVMPointerType(vt, 0), "");
        if (e->lane_mask) {
            r.v = masked_vector_load(e, vt, p, tt_dtype_bytes(t), e->lane_mask, LLVMConstNull(vt));
            set_scopes(e, r.v, buf);
        } else {
            r.v = LLVMBuildLoad2(e->b, vt, p, "");
            tt__codegen_set_access(e, r.v, buf);
        }
        r.vec = true;
    } else if ((r.v = emit_pattern_load(e, buf, n->a)) != NULL) {
        r.vec = true;
    } else {
        /* Gather lane by lane. */
        e->stats.gathered_loads++;
        val idx = widen(e, emit(e, n->a), true);
        LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)e->lanes);
        LLVMValueRef acc = LLVMGetUndef(vt);
        for (int l = 0; l < e->lanes; l++) {
            LLVMValueRef li = LLVMConstInt(e->i32, (unsigned)l, 0);
            LLVMValueRef x = LLVMBuildLoad2(
                e->b, mt, element_ptr(e, buf, LLVMBuildExtractElement(e->b, idx.v, li, "")), "");
            tt__codegen_set_access(e, x, buf);
            acc = LLVMBuildInsertElement(e->b, acc, x, li, "");
        }
        r.v = acc;
        r.vec = true;
    }
    if (t == TT_DT_BOOL) /* a byte other than 0 is true, as the interpreter reads it */
        r.v = LLVMBuildICmp(e->b, LLVMIntNE, r.v, LLVMConstNull(LLVMTypeOf(r.v)), "");
    return r;
}

static LLVMValueRef floordiv_or_mod(emitter *e, bool div, LLVMValueRef a, LLVMValueRef b,
                                    LLVMTypeRef t)
{
    /* Floor semantics (TE's): q = a / b rounded down, r = a - q * b with the sign of b. */
    LLVMValueRef q = LLVMBuildSDiv(e->b, a, b, "");
    LLVMValueRef r = LLVMBuildSRem(e->b, a, b, "");
    LLVMValueRef zero = LLVMConstNull(t);
    LLVMValueRef rnz = LLVMBuildICmp(e->b, LLVMIntNE, r, zero, "");
    LLVMValueRef sign = LLVMBuildXor(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, r, zero, ""),
                                     LLVMBuildICmp(e->b, LLVMIntSLT, b, zero, ""), "");
    LLVMValueRef fix = LLVMBuildAnd(e->b, rnz, sign, "");
    if (div)
        return LLVMBuildSub(e->b, q, LLVMBuildZExt(e->b, fix, t, ""), "");
    return LLVMBuildSelect(e->b, fix, LLVMBuildAdd(e->b, r, b, ""), r, "");
}

/* Is `id` a float multiply whose operands and result have dtype `t` (no conversion between)? */
static bool is_plain_fmul(emitter *e, tt_eid id, tt_dtype t)
{
    const tt_expr *m = tt_expr_get(&e->p->pool, id);
    return m->kind == TT_EXPR_MUL && m->dtype == t && tt_dtype_is_float(t) &&
           tt_expr_operand_type(&e->p->pool, m) == t;
}

/* a * b + c as llvm.fmuladd, which the backend turns into one FMA where the target has it: a
 * multiply-accumulate costs one instruction and one rounding instead of two dependent ones (the
 * checks' tolerance covers the rounding difference).  `neg_c` computes a * b - c, `neg_ab`
 * c - a * b. */
static val emit_fmuladd(emitter *e, const tt_expr *mul, tt_eid addend, bool neg_ab, bool neg_c)
{
    val a = emit(e, mul->a), b = emit(e, mul->b), c = emit(e, addend);
    bool vec = a.vec || b.vec || c.vec;
    a = widen(e, a, vec);
    b = widen(e, b, vec);
    c = widen(e, c, vec);
    if (neg_ab)
        a.v = LLVMBuildFNeg(e->b, a.v, "");
    if (neg_c)
        c.v = LLVMBuildFNeg(e->b, c.v, "");
    LLVMValueRef args[3] = {a.v, b.v, c.v};
    val r = {intrinsic(e, "llvm.fmuladd", type_of(e, (tt_dtype)mul->dtype, vec), args, 3), vec};
    return r;
}

static LLVMValueRef build_binary(emitter *e, const tt_expr *n, tt_dtype ot, LLVMValueRef x,
                                 LLVMValueRef y, bool vec);

/* Is an integer constant equal to k? */
static bool is_int_const(LLVMValueRef v, long long k)
{
    return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == k;
}

/* x op y where an operand makes it x, y or 0 (x + 0, x * 1, x * 0, x / 1, x % 1, x && true,
 * x && false, x || false, x || true), else NULL.
 * Unit loops and unrolled iterations bind loop variables to constants, and an index expression
 * built around them would otherwise leave LLVM thousands of adds of zero to clean up. */
static LLVMValueRef int_identity(int kind, LLVMValueRef x, LLVMValueRef y)
{
    switch (kind) {
    case TT_EXPR_ADD: return is_int_const(y, 0) ? x : is_int_const(x, 0) ? y : NULL;
    case TT_EXPR_SUB: return is_int_const(y, 0) ? x : NULL;
    case TT_EXPR_MUL:
        if (is_int_const(y, 1) || is_int_const(x, 0))
            return x;
        return is_int_const(x, 1) || is_int_const(y, 0) ? y : NULL;
    case TT_EXPR_DIV: return is_int_const(y, 1) ? x : NULL;
    case TT_EXPR_MOD: return is_int_const(y, 1) ? LLVMConstNull(LLVMTypeOf(x)) : NULL;
    case TT_EXPR_AND: /* a padding guard with its unrolled terms decided: x && true, x && false */
        if (is_int_const(x, 0) || (LLVMIsAConstantInt(y) && !is_int_const(y, 0)))
            return x;
        return is_int_const(y, 0) || LLVMIsAConstantInt(x) ? y : NULL;
    case TT_EXPR_OR:
        if (is_int_const(y, 0) || (LLVMIsAConstantInt(x) && !is_int_const(x, 0)))
            return x;
        return is_int_const(x, 0) || LLVMIsAConstantInt(y) ? y : NULL;
    default: return NULL;
    }
}

/* The bounds [lo, hi] of `var` if it is the variable of a rolled loop being emitted (innermost
 * first: the middle of a peeled loop is a loop of its own). */
static bool loop_bounds(const emitter *e, uint32_t var, int64_t *lo, int64_t *hi)
{
    for (int k = e->nranges - 1; k >= 0; k--)
        if (e->ranges[k].var == var) {
            *lo = e->ranges[k].lo;
            *hi = e->ranges[k].hi;
            return true;
        }
    return false;
}

/* The range [lo, hi] of integer expression `id`: constants, variables bound to constants
 * (unrolled), variables of the rolled loops being emitted, and their sums, differences and
 * multiples by a constant.  false when it depends on anything else. */
static bool expr_bounds(emitter *e, tt_eid id, int64_t *lo, int64_t *hi)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    int64_t alo, ahi, blo, bhi;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: *lo = *hi = n->imm.i; return true;
    case TT_EXPR_VAR:
        if (e->vars[n->a] && LLVMIsAConstantInt(e->vars[n->a])) {
            *lo = *hi = LLVMConstIntGetSExtValue(e->vars[n->a]);
            return true;
        }
        return loop_bounds(e, n->a, lo, hi);
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
        if (!expr_bounds(e, n->a, &alo, &ahi) || !expr_bounds(e, n->b, &blo, &bhi))
            return false;
        *lo = n->kind == TT_EXPR_ADD ? alo + blo : alo - bhi;
        *hi = n->kind == TT_EXPR_ADD ? ahi + bhi : ahi - blo;
        return true;
    case TT_EXPR_MUL:
        if (!expr_bounds(e, n->a, &alo, &ahi) || !expr_bounds(e, n->b, &blo, &bhi))
            return false;
        if (alo != ahi && blo != bhi)
            return false; /* only multiples by a constant */
        int64_t k = alo == ahi ? alo : blo, xlo = alo == ahi ? blo : alo,
                x_hi = alo == ahi ? bhi : ahi;
        *lo = k >= 0 ? k * xlo : k * x_hi;
        *hi = k >= 0 ? k * x_hi : k * xlo;
        return true;
    default: return false;
    }
}

/* A comparison of integer index expressions decided on the bounds of the loops being emitted
 * (a padding guard that no iteration of the enclosing loops fails, or the middle of a loop
 * peeled for its padding): 1 true, 0 false, -1 unknown. */
static int decide_compare(emitter *e, const tt_expr *n)
{
    int64_t alo, ahi, blo, bhi;
    if (n->kind < TT_EXPR_LT || n->kind > TT_EXPR_GE || !expr_bounds(e, n->a, &alo, &ahi) ||
        !expr_bounds(e, n->b, &blo, &bhi))
        return -1;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_LT: return ahi < blo ? 1 : alo >= bhi ? 0 : -1;
    case TT_EXPR_LE: return ahi <= blo ? 1 : alo > bhi ? 0 : -1;
    case TT_EXPR_GT: return alo > bhi ? 1 : ahi <= blo ? 0 : -1;
    default: return alo >= bhi ? 1 : ahi < blo ? 0 : -1; /* GE */
    }
}

static val emit_binary(emitter *e, const tt_expr *n)
{
    tt_dtype ot = tt_expr_operand_type(&e->p->pool, n);
    if ((n->kind == TT_EXPR_ADD || n->kind == TT_EXPR_SUB) && n->dtype == ot) {
        bool sub = n->kind == TT_EXPR_SUB;
        if (is_plain_fmul(e, n->b, ot))
            return emit_fmuladd(e, tt_expr_get(&e->p->pool, n->b), n->a, sub, false);
        if (is_plain_fmul(e, n->a, ot))
            return emit_fmuladd(e, tt_expr_get(&e->p->pool, n->a), n->b, false, sub);
    }
    int decided = !tt_dtype_is_float(ot) ? decide_compare(e, n) : -1;
    if (decided >= 0)
        return (val){LLVMConstInt(e->i1, (unsigned long long)decided, 0), false};
    val a = emit(e, n->a), b = emit(e, n->b);
    bool vec = a.vec || b.vec;
    if (n->kind == TT_EXPR_DIV && tt_dtype_is_float(ot) && a.vec && !b.vec && n->dtype == ot) {
        /* A vector over a divisor the lanes share (softmax's row sum, a layer norm's deviation):
         * times the divisor's reciprocal, one scalar divide that LLVM hoists out of the loops
         * where the divisor does not change, instead of a vector divide per vector. */
        LLVMValueRef y = convert(e, b.v, dtype_of(e, n->b), ot, false);
        LLVMTypeRef st = elem_type(e, ot);
        int op = VN_OP(VN_RECIP, ot);
        LLVMValueRef inv = tt__vn_find(&e->vn, op, y, NULL, NULL);
        if (!inv) {
            inv = LLVMBuildFDiv(e->b, LLVMConstReal(st, 1.0), y, "");
            tt__vn_add(&e->vn, op, y, NULL, NULL, inv);
        }
        LLVMValueRef x = convert(e, a.v, dtype_of(e, n->a), ot, true);
        return (val){LLVMBuildFMul(e->b, x, splat(e, inv), ""), true};
    }
    a = widen(e, a, vec);
    b = widen(e, b, vec);
    LLVMValueRef x = convert(e, a.v, dtype_of(e, n->a), ot, vec);
    LLVMValueRef y = convert(e, b.v, dtype_of(e, n->b), ot, vec);
    if (!vec && !tt_dtype_is_float(ot) && ot == (tt_dtype)n->dtype) {
        LLVMValueRef same = int_identity(n->kind, x, y);
        if (same)
            return (val){same, false};
    }
    int op = VN_OP(n->kind, ot * 16 + n->dtype);
    val r = {tt__vn_find(&e->vn, op, x, y, NULL), vec};
    if (!r.v) {
        r.v = build_binary(e, n, ot, x, y, vec);
        tt__vn_add(&e->vn, op, x, y, NULL, r.v);
    }
    return r;
}

/* 1 / c for a floating-point constant c whose reciprocal is a normal number, else 0. */
static double reciprocal_of_const(emitter *e, tt_eid id)
{
    const tt_expr *c = tt_expr_get(&e->p->pool, id);
    if (c->kind != TT_EXPR_FLOAT || !isfinite(c->imm.f) || c->imm.f == 0)
        return 0;
    double r = 1.0 / c->imm.f;
    return isnormal((float)r) ? r : 0;
}

/* x op y for binary node n, whose operands have been converted to dtype ot. */
static LLVMValueRef build_binary(emitter *e, const tt_expr *n, tt_dtype ot, LLVMValueRef x,
                                 LLVMValueRef y, bool vec)
{
    LLVMTypeRef t = type_of(e, ot, vec);
    bool fl = tt_dtype_is_float(ot);
    val r = {0, vec};
    /* 64-bit integers are indices and loop variables, which stay far from overflow: said with
     * `nsw`, which InstCombine otherwise spent a third of its time proving add by add
     * (docs/codegen.md, seventeenth round).  Other integer types keep wrapping arithmetic. */
    bool nsw = ot == TT_DT_INT64;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_ADD:
        r.v = fl    ? LLVMBuildFAdd(e->b, x, y, "")
              : nsw ? LLVMBuildNSWAdd(e->b, x, y, "")
                    : LLVMBuildAdd(e->b, x, y, "");
        break;
    case TT_EXPR_SUB:
        r.v = fl    ? LLVMBuildFSub(e->b, x, y, "")
              : nsw ? LLVMBuildNSWSub(e->b, x, y, "")
                    : LLVMBuildSub(e->b, x, y, "");
        break;
    case TT_EXPR_MUL:
        r.v = fl    ? LLVMBuildFMul(e->b, x, y, "")
              : nsw ? LLVMBuildNSWMul(e->b, x, y, "")
                    : LLVMBuildMul(e->b, x, y, "");
        break;
    case TT_EXPR_DIV:
        if (fl) {
            /* By a constant: times its reciprocal, a multiply where a divide costs 10-16
             * cycles of throughput (x / 1.41421354 in GELU, / 6 in HardSwish); within an ulp. */
            double rc = reciprocal_of_const(e, n->b);
            r.v = rc != 0 ? LLVMBuildFMul(e->b, x,
                                          vec ? splat(e, LLVMConstReal(elem_type(e, ot), rc))
                                              : LLVMConstReal(t, rc),
                                          "")
                          : LLVMBuildFDiv(e->b, x, y, "");
        } else {
            r.v = floordiv_or_mod(e, true, x, y, t);
        }
        break;
    case TT_EXPR_MOD:
        r.v = fl ? LLVMBuildFRem(e->b, x, y, "") : floordiv_or_mod(e, false, x, y, t);
        break;
    case TT_EXPR_MIN:
    case TT_EXPR_MAX: {
        /* As the interpreter: x < y ? x : y (and x > y ? x : y). */
        bool mn = n->kind == TT_EXPR_MIN;
        LLVMValueRef c = fl ? LLVMBuildFCmp(e->b, mn ? LLVMRealOLT : LLVMRealOGT, x, y, "")
                            : LLVMBuildICmp(e->b, mn ? LLVMIntSLT : LLVMIntSGT, x, y, "");
        r.v = LLVMBuildSelect(e->b, c, x, y, "");
        break;
    }
    case TT_EXPR_AND: r.v = LLVMBuildAnd(e->b, x, y, ""); break;
    case TT_EXPR_OR: r.v = LLVMBuildOr(e->b, x, y, ""); break;
    default: {
        static const LLVMRealPredicate fp[] = {LLVMRealOLT, LLVMRealOLE, LLVMRealOGT,
                                               LLVMRealOGE, LLVMRealOEQ, LLVMRealUNE};
        static const LLVMIntPredicate ip[] = {LLVMIntSLT, LLVMIntSLE, LLVMIntSGT,
                                              LLVMIntSGE, LLVMIntEQ,  LLVMIntNE};
        int k = n->kind - TT_EXPR_LT;
        return fl ? LLVMBuildFCmp(e->b, fp[k], x, y, "") : LLVMBuildICmp(e->b, ip[k], x, y, "");
    }
    }
    /* Arithmetic nodes carry the result dtype: convert if it differs from the operands'. */
    return convert(e, r.v, ot, (tt_dtype)n->dtype, vec);
}

static bool has_load(emitter *e, tt_eid id)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR: return false;
    case TT_EXPR_LOAD: return true;
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return has_load(e, n->a);
    case TT_EXPR_SELECT: return has_load(e, n->a) || has_load(e, n->b) || has_load(e, n->c);
    default: return has_load(e, n->a) || has_load(e, n->b);
    }
}

/* Builds, in the current block, the addresses that the loads of `id` will read: a guarded load's
 * index arithmetic is pure, so it is computed where it dominates every guarded block after it and
 * value numbering shares it among them.  Built inside each guard instead, an unrolled padded
 * convolution repeated the same multiplies and adds under every tap: four fifths of its IR, which
 * LLVM spent most of its optimisation time removing again.  Gathers and indirect indices are
 * left where they are. */
static void hoist_addresses(emitter *e, tt_eid id)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ: return;
    case TT_EXPR_LOAD: {
        if (has_load(e, n->a) || tt__promo_buffer(e, n->b))
            return;
        int64_t c = e->lanes ? tt_expr_coef(&e->p->pool, n->a, e->vec_var) : 0;
        if (c == 0 || c == 1)
            element_ptr(e, n->b, e->lanes ? emit_lane0(e, n->a) : emit(e, n->a).v);
        return;
    }
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: hoist_addresses(e, n->a); return;
    case TT_EXPR_SELECT:
        hoist_addresses(e, n->b);
        hoist_addresses(e, n->c);
        return;
    default:
        hoist_addresses(e, n->a);
        hoist_addresses(e, n->b);
        return;
    }
}

/* llvm.masked.load of a vector of type vt at p: lanes off in `mask` read no memory and take
 * `passthrough`'s. */
static LLVMValueRef masked_vector_load(emitter *e, LLVMTypeRef vt, LLVMValueRef p, int align,
                                       LLVMValueRef mask, LLVMValueRef passthrough)
{
    const char *name = "llvm.masked.load";
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef tys[2] = {vt, LLVMPointerType(vt, 0)};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, tys, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, tys, 2);
    LLVMValueRef args[4] = {p, LLVMConstInt(e->i32, (unsigned)align, 0), mask, passthrough};
    e->stats.masked_loads++;
    return LLVMBuildCall2(e->b, fty, fn, args, 4, "");
}

/* A select whose guard depends on the vector lane, taking a load that is contiguous in the lane
 * or a load-free value: one masked vector load (llvm.masked.load), the other side its
 * pass-through, and masked-off lanes read no memory.  The tail of a reduction split by the
 * vector width and factored into lanes (rfactor) is such a guard: 197 = 12 x 16 + 5 columns of a
 * softmax row. */
static bool masked_load_select(emitter *e, const tt_expr *n, uint32_t var)
{
    if (n->kind != TT_EXPR_SELECT || has_load(e, n->c))
        return false;
    const tt_expr *ld = tt_expr_get(&e->p->pool, n->b);
    return ld->kind == TT_EXPR_LOAD && ld->dtype == n->dtype &&
           e->p->bufs.data[ld->b].dtype != TT_DT_BOOL &&
           tt_expr_coef(&e->p->pool, ld->a, var) == 1 && !has_load(e, ld->a);
}

static val emit_masked_load(emitter *e, const tt_expr *n, LLVMValueRef mask)
{
    tt_dtype rt = (tt_dtype)n->dtype;
    const tt_expr *ld = tt_expr_get(&e->p->pool, n->b);
    val other = widen(e, emit(e, n->c), true);
    other.v = convert(e, other.v, dtype_of(e, n->c), rt, true);
    if (tt__promo_buffer(e, ld->b)) { /* a value, not memory: both sides are safe */
        val a = widen(e, emit(e, n->b), true);
        val r = {LLVMBuildSelect(e->b, mask, a.v, other.v, ""), true};
        return r;
    }
    LLVMTypeRef mt = mem_type(e, rt), vt = LLVMVectorType(mt, (unsigned)e->lanes);
    LLVMValueRef p = LLVMBuildBitCast(e->b, element_ptr(e, ld->b, emit_lane0(e, ld->a)),
                                      LLVMPointerType(vt, 0), "");
    val r = {masked_vector_load(e, vt, p, tt_dtype_bytes(rt), mask, other.v), true};
    set_scopes(e, r.v, ld->b);
    return r;
}

/* A side of a select that may be computed in every lane when its loads read only the lanes the
 * guard lets through: float arithmetic of loads contiguous in the lane and load-free floats. */
static bool maskable(emitter *e, tt_eid id, uint32_t var)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    if (!tt_dtype_is_float((tt_dtype)n->dtype))
        return false;
    if (!has_load(e, id))
        return true;
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_LOAD:
        return e->p->bufs.data[n->b].dtype == n->dtype &&
               tt_expr_coef(&e->p->pool, n->a, var) == 1 && !has_load(e, n->a);
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
    case TT_EXPR_MUL:
    case TT_EXPR_MIN:
    case TT_EXPR_MAX: return maskable(e, n->a, var) && maskable(e, n->b, var);
    case TT_EXPR_NEG: return maskable(e, n->a, var);
    default: return false;
    }
}

/* A select whose guard depends on the vector lane, taking arithmetic of contiguous loads (a
 * product x[k] * w[n, k] over a reduction split by the vector width, 440 = 27 x 16 + 8) and a
 * load-free other side: the loads masked by the guard, the rest computed in every lane. */
static bool masked_expr_select(emitter *e, const tt_expr *n, uint32_t var)
{
    return n->kind == TT_EXPR_SELECT && !has_load(e, n->c) && has_load(e, n->b) &&
           maskable(e, n->b, var);
}

static val emit_masked_expr(emitter *e, const tt_expr *n, LLVMValueRef mask)
{
    tt_dtype rt = (tt_dtype)n->dtype;
    val other = widen(e, emit(e, n->c), true);
    other.v = convert(e, other.v, dtype_of(e, n->c), rt, true);
    tt__vn_open(&e->vn);
    e->lane_mask = mask;
    val taken = widen(e, emit(e, n->b), true);
    e->lane_mask = NULL;
    tt__vn_close(&e->vn);
    taken.v = convert(e, taken.v, dtype_of(e, n->b), rt, true);
    return (val){LLVMBuildSelect(e->b, mask, taken.v, other.v, ""), true};
}

/* A condition of vector code: one scalar where every lane agrees (tt_expr_lane_uniform: a
 * concatenation's `c < 96` over a vector of channels), its value at the vector's first lane. */
static val emit_condition(emitter *e, tt_eid cond)
{
    if (e->lanes && tt_expr_uses_var(&e->p->pool, cond, e->vec_var) &&
        tt_expr_lane_uniform(&e->p->pool, cond, e->vec_var, e->lanes)) {
        e->stats.uniform_guards++;
        return (val){emit_lane0(e, cond), false};
    }
    return emit(e, cond);
}

static val emit_select(emitter *e, const tt_expr *n)
{
    tt_dtype rt = (tt_dtype)n->dtype;
    val c = emit_condition(e, n->a);
    if (!has_load(e, n->b) && !has_load(e, n->c)) {
        val a = emit(e, n->b), b = emit(e, n->c);
        bool vec = c.vec || a.vec || b.vec;
        a = widen(e, a, vec);
        b = widen(e, b, vec);
        c = widen(e, c, vec);
        LLVMValueRef x = convert(e, a.v, dtype_of(e, n->b), rt, vec),
                     y = convert(e, b.v, dtype_of(e, n->c), rt, vec);
        val r = {tt__vn_find(&e->vn, VN_OP(VN_SELECT, rt), c.v, x, y), vec};
        if (!r.v) {
            r.v = LLVMBuildSelect(e->b, c.v, x, y, "");
            tt__vn_add(&e->vn, VN_OP(VN_SELECT, rt), c.v, x, y, r.v);
        }
        return r;
    }
    if (c.vec && e->lanes && masked_load_select(e, n, e->vec_var))
        return emit_masked_load(e, n, c.v);
    if (c.vec && e->lanes && masked_expr_select(e, n, e->vec_var))
        return emit_masked_expr(e, n, c.v);
    /* A guarded load (padding) must not run when the guard is false: branch.  The guard is one
     * scalar condition (the vectoriser only lets through guards that do not depend on the lane);
     * the branches may be vectors (a depthwise convolution's padded input, loaded for a vector of
     * channels).  Selecting between both sides with the loads' indices clamped under the guard
     * avoids the branches (and compiles faster) but ran padded convolutions at half the speed. */
    bool vec = e->lanes && (tt_expr_uses_var(&e->p->pool, n->b, e->vec_var) ||
                            tt_expr_uses_var(&e->p->pool, n->c, e->vec_var));
    if (!c.vec && LLVMIsAConstantInt(c.v)) {
        /* Decided while emitting (every variable of the guard unrolled): only the taken side. */
        e->stats.decided_guards++;
        tt_eid arm = LLVMConstIntGetZExtValue(c.v) ? n->b : n->c;
        val a = emit(e, arm);
        a.v = convert(e, a.v, dtype_of(e, arm), rt, a.vec);
        return widen(e, a, vec);
    }
    hoist_addresses(e, n->b);
    LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "sel.then");
    LLVMBasicBlockRef else_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "sel.else");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "sel.join");
    LLVMBuildCondBr(e->b, c.v, then_bb, else_bb);
    LLVMPositionBuilderAtEnd(e->b, then_bb);
    tt__vn_open(&e->vn);
    val a = emit(e, n->b);
    a.v = convert(e, a.v, dtype_of(e, n->b), rt, a.vec);
    a = widen(e, a, vec);
    tt__vn_close(&e->vn);
    LLVMBasicBlockRef then_end = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, join);
    LLVMPositionBuilderAtEnd(e->b, else_bb);
    tt__vn_open(&e->vn);
    val b = emit(e, n->c);
    b.v = convert(e, b.v, dtype_of(e, n->c), rt, b.vec);
    b = widen(e, b, vec);
    tt__vn_close(&e->vn);
    LLVMBasicBlockRef else_end = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, join);
    LLVMPositionBuilderAtEnd(e->b, join);
    LLVMValueRef phi = LLVMBuildPhi(e->b, type_of(e, rt, vec), "");
    LLVMValueRef vals[2] = {a.v, b.v};
    LLVMBasicBlockRef bbs[2] = {then_end, else_end};
    LLVMAddIncoming(phi, vals, bbs, 2);
    val r = {phi, vec};
    return r;
}

/* a * b + c as llvm.fmuladd: one FMA where the target has one (the polynomials below). */
static LLVMValueRef fma3(emitter *e, LLVMTypeRef ty, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[3] = {a, b, c};
    return intrinsic(e, "llvm.fmuladd", ty, args, 3);
}

/* A call of a target intrinsic that is not overloaded (its name fixes its type). */
static LLVMValueRef fixed_intrinsic(emitter *e, const char *name, LLVMValueRef *args, unsigned n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, NULL, 0);
    return LLVMBuildCall2(e->b, fty, fn, args, n, "");
}

/* A target intrinsic on `w` float32 lanes applied to float32 vectors of e->lanes lanes: piece by
 * piece of w lanes, the results put back together pairwise (vectors are powers of two lanes wide:
 * tt__codegen_vector_piece).  `ins` (nin vectors of e->lanes) are split; each piece's call takes
 * its pieces, then `tail` (per-piece constants).  NULL where the lanes are no such pieces. */
static LLVMValueRef piecewise_f32(emitter *e, const char *name, int w, LLVMValueRef *ins, int nin,
                                  LLVMValueRef *tail, int ntail)
{
    int lanes = e->lanes, npieces = w ? lanes / w : 0;
    if (npieces < 1 || lanes % w || (npieces & (npieces - 1)) || lanes > TT_EMIT_MAX_LANES ||
        nin + ntail > 6)
        return NULL;
    LLVMValueRef pieces[TT_EMIT_MAX_LANES / 4];
    for (int k = 0; k < npieces; k++) {
        LLVMValueRef args[6];
        for (int j = 0; j < nin; j++) {
            args[j] = ins[j];
            if (npieces > 1) {
                LLVMValueRef idx[16];
                for (int i = 0; i < w; i++)
                    idx[i] = LLVMConstInt(e->i32, (unsigned long long)(k * w + i), 0);
                args[j] = LLVMBuildShuffleVector(e->b, ins[j], LLVMGetUndef(LLVMTypeOf(ins[j])),
                                                 LLVMConstVector(idx, (unsigned)w), "");
            }
        }
        for (int j = 0; j < ntail; j++)
            args[nin + j] = tail[j];
        pieces[k] = fixed_intrinsic(e, name, args, (unsigned)(nin + ntail));
    }
    /* Concatenate pairs until one vector remains. */
    for (int n = npieces; n > 1; n /= 2) {
        int pw = lanes / n;
        for (int k = 0; k < n / 2; k++) {
            LLVMValueRef idx[TT_EMIT_MAX_LANES];
            for (int i = 0; i < 2 * pw; i++)
                idx[i] = LLVMConstInt(e->i32, (unsigned long long)i, 0);
            pieces[k] = LLVMBuildShuffleVector(e->b, pieces[2 * k], pieces[2 * k + 1],
                                               LLVMConstVector(idx, (unsigned)(2 * pw)), "");
        }
    }
    return pieces[0];
}

/* Whether float32 vectors of this kernel are AVX-512 registers or several of them. */
static bool avx512_f32(const emitter *e, bool vec, tt_dtype t)
{
    return vec && t == TT_DT_FLOAT32 && e->x86 && !strcmp(e->isa.name, "avx512") &&
           e->lanes % 16 == 0;
}

/* 1 / d for a float32 vector d known to be finite and at least 1 (sigmoid's 1 + exp(-x), erf's
 * 1 + p|x| with |x| clamped), or NaN.  On x86 the reciprocal estimate (RCP14PS on AVX-512, 14
 * bits; RCPPS on AVX and SSE, 12 bits) refined by Newton steps, r' = r + r (1 - d r), one for 14
 * bits and two for 12 (both within an ulp of 1 / d): a divide's throughput is 5-16 cycles a
 * vector, and in EfficientNet's SiLU it was half of the activation's cost.  Elsewhere a divide. */
static LLVMValueRef emit_recip(emitter *e, LLVMValueRef d, LLVMTypeRef ty, bool vec, tt_dtype t,
                               LLVMValueRef one)
{
    LLVMValueRef r = NULL;
    int steps = 2;
    if (avx512_f32(e, vec, t)) {
        LLVMValueRef tail[2] = {LLVMConstNull(LLVMVectorType(e->f32, 16)),
                                LLVMConstInt(LLVMInt16TypeInContext(e->ctx), 0xffff, 0)};
        r = piecewise_f32(e, "llvm.x86.avx512.rcp14.ps.512", 16, &d, 1, tail, 2);
        steps = 1;
    } else if (vec && t == TT_DT_FLOAT32 && e->x86) {
        if (e->isa.vector_bytes >= 32 && e->lanes % 8 == 0)
            r = piecewise_f32(e, "llvm.x86.avx.rcp.ps.256", 8, &d, 1, NULL, 0);
        else if (e->lanes % 4 == 0)
            r = piecewise_f32(e, "llvm.x86.sse.rcp.ps", 4, &d, 1, NULL, 0);
    }
    if (!r)
        return LLVMBuildFDiv(e->b, one, d, "");
    LLVMValueRef nd = LLVMBuildFNeg(e->b, d, "");
    for (int i = 0; i < steps; i++)
        r = fma3(e, ty, r, fma3(e, ty, nd, r, one), r);
    return r;
}

/* min(x, hi) and max(x, lo) that keep a NaN x NaN, in one MINPS / MAXPS on x86 (whose result is
 * the second operand when either is NaN): llvm.minnum's NaN rule cost a compare and a blend. */
static LLVMValueRef clamp_above(emitter *e, LLVMValueRef x, LLVMValueRef hi)
{
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOLT, hi, x, ""), hi, x, "");
}

static LLVMValueRef clamp_below(emitter *e, LLVMValueRef x, LLVMValueRef lo)
{
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOGT, lo, x, ""), lo, x, "");
}

/* exp(x) in float32 as straight-line code that vectorises: Cephes' expf (x = n ln 2 + r, a
 * degree-5 polynomial in r, times 2^n), within a few ulp of libm's where neither overflows.
 * llvm.exp on a vector became one libm call per lane: EfficientNet's SiLU kernels ran at 0.3 G
 * elements/s, softmax's exp likewise.  Arguments are clamped to [-86.6, ln FLT_MAX] (below: 2.4e-38
 * for exp's 0); a NaN goes through the clamps and the polynomial as a NaN.  2^n: on AVX-512
 * VSCALEFPS multiplies by it in one instruction, elsewhere n is added to the exponent's bits;
 * float64 keeps llvm.exp. */
static LLVMValueRef emit_exp(emitter *e, LLVMValueRef x, LLVMTypeRef ty, bool vec, tt_dtype t)
{
    if (t != TT_DT_FLOAT32)
        return intrinsic(e, "llvm.exp", ty, &x, 1);
    LLVMTypeRef et = LLVMFloatTypeInContext(e->ctx);
#define EXP_C(v) (vec ? splat(e, LLVMConstReal(et, v)) : LLVMConstReal(ty, v))
#define EXP_I(v) (vec ? splat(e, LLVMConstInt(e->i32, v, 0)) : LLVMConstInt(e->i32, v, 0))
    LLVMValueRef xc = clamp_below(e, clamp_above(e, x, EXP_C(88.72283172607421875)), EXP_C(-86.6));
    LLVMValueRef fx = fma3(e, ty, xc, EXP_C(1.44269504088896341), EXP_C(0.5));
    fx = intrinsic(e, "llvm.floor", ty, &fx, 1);
    LLVMValueRef nfx = LLVMBuildFNeg(e->b, fx, "");
    LLVMValueRef r = fma3(e, ty, nfx, EXP_C(0.693359375), xc);
    r = fma3(e, ty, nfx, EXP_C(-2.12194440e-4), r);
    static const double c[6] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    LLVMValueRef p = EXP_C(c[0]);
    for (int i = 1; i < 6; i++)
        p = fma3(e, ty, p, r, EXP_C(c[i]));
    LLVMValueRef y = fma3(e, ty, p, LLVMBuildFMul(e->b, r, r, ""), r);
    y = LLVMBuildFAdd(e->b, y, EXP_C(1.0), "");
    if (avx512_f32(e, vec, t)) {
        LLVMValueRef ins[2] = {y, fx};
        LLVMValueRef tail[3] = {LLVMConstNull(LLVMVectorType(e->f32, 16)),
                                LLVMConstInt(LLVMInt16TypeInContext(e->ctx), 0xffff, 0),
                                LLVMConstInt(e->i32, 4, 0)}; /* the current rounding mode */
        LLVMValueRef res =
            piecewise_f32(e, "llvm.x86.avx512.mask.scalef.ps.512", 16, ins, 2, tail, 3);
        if (res)
            return res;
    }
    /* y x 2^n as n added to y's exponent: y = exp(r) is in [0.70, 1.42] (exponent -1 or 0) and
     * n in -125..128 over the clamped range, so the sum is a normal float's exponent (1..254).
     * A NaN has no n (fptosi of a NaN is poison): the select gives it back. */
    LLVMTypeRef it = vec ? LLVMVectorType(e->i32, (unsigned)e->lanes) : e->i32;
    LLVMValueRef n = LLVMBuildFPToSI(e->b, fx, it, "");
    LLVMValueRef bits = LLVMBuildAdd(e->b, LLVMBuildBitCast(e->b, y, it, ""),
                                     LLVMBuildShl(e->b, n, EXP_I(23), ""), "");
    LLVMValueRef nan = LLVMBuildFCmp(e->b, LLVMRealUNO, x, x, "");
    return LLVMBuildSelect(e->b, nan, x, LLVMBuildBitCast(e->b, bits, ty, ""), "");
#undef EXP_C
#undef EXP_I
}

/* erf(x) as straight-line code that vectorises where a libm call would not: below |x| = 1 an odd
 * polynomial, x P(x^2) (degree 5 in x^2, fitted here for relative error: 2e-7 in float), above it
 * Abramowitz and Stegun 7.1.26, 1 - t P(t) exp(-x^2) with t = 1 / (1 + 0.3275911 |x|) (absolute
 * error 1.5e-7; near 0 it loses the relative precision, 1e-4 at x = 0.001, to cancellation). */
static LLVMValueRef emit_erf(emitter *e, LLVMValueRef x, LLVMTypeRef ty, bool vec, tt_dtype dt,
                             LLVMValueRef one)
{
    LLVMTypeRef et = vec ? LLVMGetElementType(ty) : ty;
#define ERF_C(v) (vec ? splat(e, LLVMConstReal(et, v)) : LLVMConstReal(ty, v))
    static const double s[6] = {1.1283791471038294,   -0.37612390676009755,
                                0.11280578875735553,  -0.026720893598272774,
                                0.004927419853005058, -0.0005667995186351554};
    static const double a[5] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
    LLVMValueRef x2 = LLVMBuildFMul(e->b, x, x, "");
    LLVMValueRef ps = ERF_C(s[5]);
    for (int i = 4; i >= 0; i--)
        ps = fma3(e, ty, ps, x2, ERF_C(s[i]));
    LLVMValueRef small = LLVMBuildFMul(e->b, x, ps, "");
    /* |x| at most 6, where erf is 1 in float: the reciprocal below then sees a finite number. */
    LLVMValueRef ax = intrinsic(e, "llvm.fabs", ty, &x, 1);
    LLVMValueRef axc = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOGT, ax, ERF_C(6.0), ""),
                                       ERF_C(6.0), ax, "");
    LLVMValueRef t = emit_recip(e, fma3(e, ty, ERF_C(0.3275911), axc, one), ty, vec, dt, one);
    LLVMValueRef poly = ERF_C(a[4]);
    for (int i = 3; i >= 0; i--)
        poly = fma3(e, ty, poly, t, ERF_C(a[i]));
    poly = LLVMBuildFMul(e->b, poly, t, "");
    LLVMValueRef nx2 = LLVMBuildFNeg(e->b, LLVMBuildFMul(e->b, axc, axc, ""), "");
    LLVMValueRef ex = emit_exp(e, nx2, ty, vec, dt);
    LLVMValueRef y = fma3(e, ty, LLVMBuildFNeg(e->b, poly, ""), ex, one);
    LLVMValueRef args[2] = {y, x};
    LLVMValueRef large = intrinsic(e, "llvm.copysign", ty, args, 2);
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOLT, ax, one, ""), small, large, "");
#undef ERF_C
}

static val emit_call(emitter *e, const tt_expr *n)
{
    tt_dtype t = (tt_dtype)n->dtype;
    val a = emit(e, n->a);
    LLVMValueRef x = convert(e, a.v, dtype_of(e, n->a), t, a.vec);
    LLVMTypeRef ty = type_of(e, t, a.vec);
    LLVMValueRef one =
        a.vec ? splat(e, LLVMConstReal(elem_type(e, t), 1.0)) : LLVMConstReal(ty, 1.0);
    val r = {0, a.vec};
    switch ((tt_func)n->b) {
    case TT_FUNC_EXP: r.v = emit_exp(e, x, ty, a.vec, t); break;
    case TT_FUNC_LOG: r.v = intrinsic(e, "llvm.log", ty, &x, 1); break;
    case TT_FUNC_SQRT: r.v = intrinsic(e, "llvm.sqrt", ty, &x, 1); break;
    case TT_FUNC_ABS: r.v = intrinsic(e, "llvm.fabs", ty, &x, 1); break;
    case TT_FUNC_SIGMOID: {
        LLVMValueRef nx = LLVMBuildFNeg(e->b, x, "");
        LLVMValueRef ex = emit_exp(e, nx, ty, a.vec, t);
        r.v = emit_recip(e, LLVMBuildFAdd(e->b, one, ex, ""), ty, a.vec, t, one);
        break;
    }
    case TT_FUNC_TANH: {
        /* tanh(x) = 1 - 2 / (exp(2x) + 1): exact at the limits, vectorisable; exp(2x) + 1 is
         * finite and at least 1, as emit_recip wants. */
        LLVMValueRef two =
            a.vec ? splat(e, LLVMConstReal(elem_type(e, t), 2.0)) : LLVMConstReal(ty, 2.0);
        LLVMValueRef x2 = LLVMBuildFMul(e->b, x, two, "");
        LLVMValueRef ex = emit_exp(e, x2, ty, a.vec, t);
        LLVMValueRef inv = emit_recip(e, LLVMBuildFAdd(e->b, ex, one, ""), ty, a.vec, t, one);
        r.v = LLVMBuildFSub(e->b, one, LLVMBuildFMul(e->b, two, inv, ""), "");
        break;
    }
    case TT_FUNC_ERF: r.v = emit_erf(e, x, ty, a.vec, t, one); break;
    case TT_FUNC_FLOOR: r.v = intrinsic(e, "llvm.floor", ty, &x, 1); break;
    case TT_FUNC_CEIL: r.v = intrinsic(e, "llvm.ceil", ty, &x, 1); break;
    default: r.v = x; break;
    }
    return r;
}

/* Is `id` one of the guard terms known to hold here (emit_for)? */
static bool is_known(const emitter *e, tt_eid id)
{
    for (int k = 0; k < e->nknown; k++)
        if (e->known[k] == id || tt_expr_equal(&e->p->pool, e->known[k], id))
            return true;
    return false;
}

/* Are all the terms of guard `c` known to hold here? */
static bool all_known(const emitter *e, tt_eid c)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, c);
    if (n->kind == TT_EXPR_AND)
        return all_known(e, n->a) && all_known(e, n->b);
    return is_known(e, c);
}

static val emit(emitter *e, tt_eid id)
{
    const tt_expr n = *tt_expr_get(&e->p->pool, id);
    val r = {0, false};
    if (id == e->taken_select) {
        r = emit(e, n.b);
        r.v = convert(e, r.v, dtype_of(e, n.b), (tt_dtype)n.dtype, r.vec);
        return r;
    }
    if (e->nknown && n.dtype == TT_DT_BOOL && is_known(e, id))
        return (val){LLVMConstInt(e->i1, 1, 0), false};
    switch ((tt_expr_kind)n.kind) {
    case TT_EXPR_INT:
        r.v = LLVMConstInt(elem_type(e, (tt_dtype)n.dtype), (unsigned long long)n.imm.i, 1);
        return r;
    case TT_EXPR_FLOAT: r.v = LLVMConstReal(elem_type(e, (tt_dtype)n.dtype), n.imm.f); return r;
    case TT_EXPR_VAR:
        r.v = e->vars[n.a];
        if (!r.v) { /* not a loop variable in scope: a lowering bug, not a crash */
            e->status = TT_ERR_INVALID_ARG;
            r.v = LLVMConstNull(e->i64);
        }
        r.vec = e->lanes && n.a == e->vec_var;
        return r;
    case TT_EXPR_LOAD: return emit_load(e, &n);
    case TT_EXPR_SELECT: return emit_select(e, &n);
    case TT_EXPR_CALL: return emit_call(e, &n);
    case TT_EXPR_CAST: {
        val a = emit(e, n.a);
        r.v = convert(e, a.v, dtype_of(e, n.a), (tt_dtype)n.dtype, a.vec);
        r.vec = a.vec;
        return r;
    }
    case TT_EXPR_NOT: {
        val a = emit(e, n.a);
        r.v = LLVMBuildNot(e->b, convert(e, a.v, dtype_of(e, n.a), TT_DT_BOOL, a.vec), "");
        r.vec = a.vec;
        return r;
    }
    case TT_EXPR_NEG: {
        val a = emit(e, n.a);
        r.v = tt_dtype_is_float(dtype_of(e, n.a)) ? LLVMBuildFNeg(e->b, a.v, "")
                                                  : LLVMBuildNeg(e->b, a.v, "");
        r.vec = a.vec;
        return r;
    }
    case TT_EXPR_READ:
        e->status = TT_ERR_INVALID_ARG; /* lowered programs have no tensor reads */
        r.v = LLVMConstNull(e->i64);
        return r;
    default: return emit_binary(e, &n);
    }
}

/* ---- statements ---- */

static void emit_stmt(emitter *e, tt_sid id);

/* The select of a padded update `B[i] = B[i] + select(c, x, 0) * y` (either order of the sum and
 * of the product, float), whose guard c does not depend on the vector lane, and the load of B[i]
 * in *acc; else 0.  Where c is false the update adds 0: B[i] keeps its value. */
static tt_eid padded_update(emitter *e, const tt_stmt *s, tt_eid *acc)
{
    const tt_expr_pool *pool = &e->p->pool;
    const tt_expr *sum = tt_expr_get(pool, s->value);
    if (sum->kind != TT_EXPR_ADD || !tt_dtype_is_float((tt_dtype)sum->dtype) ||
        sum->dtype != e->p->bufs.data[s->buf].dtype)
        return 0;
    for (int side = 0; side < 2; side++) {
        *acc = side ? sum->b : sum->a;
        const tt_expr *ld = tt_expr_get(pool, *acc);
        tt_eid prod_id = side ? sum->a : sum->b;
        const tt_expr *prod = tt_expr_get(pool, prod_id);
        if (ld->kind != TT_EXPR_LOAD || ld->b != s->buf || !tt_expr_equal(pool, ld->a, s->index) ||
            !is_plain_fmul(e, prod_id, (tt_dtype)sum->dtype))
            continue;
        for (int f = 0; f < 2; f++) {
            tt_eid sel_id = f ? prod->b : prod->a;
            const tt_expr *sel = tt_expr_get(pool, sel_id);
            if (sel->kind != TT_EXPR_SELECT)
                continue;
            const tt_expr *zero = tt_expr_get(pool, sel->c);
            if (zero->kind == TT_EXPR_FLOAT && zero->imm.f == 0.0 &&
                !(e->lanes && !tt_expr_lane_uniform(pool, sel->a, e->vec_var, e->lanes)))
                return sel_id;
        }
    }
    return 0;
}

static void store_value(emitter *e, const tt_stmt *s, val v);

/* Padded update `s` where its guard (select `sel`) is known to hold: the multiply-add, unguarded.
 */
static void emit_taken_update(emitter *e, const tt_stmt *s, tt_eid sel)
{
    e->taken_select = sel;
    val sum = emit(e, s->value);
    e->taken_select = 0;
    store_value(e, s, sum);
}

/* A padded update branches around its whole multiply-add, not only around the load of the padded
 * input: B[i] = c ? B[i] + x * y : B[i].  Padded taps then cost no FMA (a 3x3 convolution's
 * border outputs skip a third of them, as oneDNN's do), and the guards of taps whose position is
 * a constant once LLVM has unrolled the tile fold away.  The store itself stays unconditional, so
 * an accumulator tile is still promoted to registers across the reduction loop. */
static void emit_store(emitter *e, const tt_stmt *s)
{
    tt_eid acc_id = 0, sel = padded_update(e, s, &acc_id);
    if (!sel) {
        store_value(e, s, emit(e, s->value));
        return;
    }
    const tt_expr *n = tt_expr_get(&e->p->pool, sel);
    if (e->nknown && all_known(e, n->a)) {
        /* Inside a loop already branched around on this guard (emit_for). */
        e->stats.padded_updates++;
        emit_taken_update(e, s, sel);
        return;
    }
    val c = emit_condition(e, n->a);
    LLVMValueRef cond = convert(e, c.v, dtype_of(e, n->a), TT_DT_BOOL, false);
    if (LLVMIsAConstantInt(cond)) {
        /* Decided while emitting (a tap of an unrolled row known to be in the padding, or known
         * to be inside): the update, or nothing. */
        e->stats.padded_updates++;
        e->stats.decided_guards++;
        if (LLVMConstIntGetZExtValue(cond))
            emit_taken_update(e, s, sel);
        return;
    }
    bool vec = e->lanes && tt_expr_uses_var(&e->p->pool, s->value, e->vec_var);
    val acc = widen(e, emit(e, acc_id), vec);
    hoist_addresses(e, s->value);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "pad.then");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "pad.end");
    LLVMBuildCondBr(e->b, cond, then_bb, join);
    LLVMPositionBuilderAtEnd(e->b, then_bb);
    e->stats.padded_updates++;
    e->stats.guarded_updates++;
    tt__vn_open(&e->vn);
    e->taken_select = sel;
    val sum = emit(e, s->value);
    e->taken_select = 0;
    tt__vn_close(&e->vn);
    sum = widen(e, sum, vec);
    LLVMBasicBlockRef then_end = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, join);
    LLVMPositionBuilderAtEnd(e->b, join);
    LLVMValueRef phi = LLVMBuildPhi(e->b, LLVMTypeOf(sum.v), "");
    LLVMValueRef vals[2] = {sum.v, acc.v};
    LLVMBasicBlockRef bbs[2] = {then_end, pre};
    LLVMAddIncoming(phi, vals, bbs, 2);
    store_value(e, s, (val){phi, vec});
}

/* Stores v, the value of s->value, as s says. */
static void store_value(emitter *e, const tt_stmt *s, val v)
{
    tt_dtype t = e->p->bufs.data[s->buf].dtype;
    LLVMTypeRef mt = mem_type(e, t);
    int64_t c = e->lanes ? tt_expr_coef(&e->p->pool, s->index, e->vec_var) : 0;
    LLVMValueRef x = convert(e, v.v, dtype_of(e, s->value), t, v.vec);
    if (t == TT_DT_BOOL)
        x = LLVMBuildZExt(e->b, x, v.vec ? LLVMVectorType(e->i8, (unsigned)e->lanes) : e->i8, "");
    if (!v.vec || c == 0) {
        /* A vector value into one element cannot happen in lowered code (the vector variable is
         * a spatial axis of the stored tensor); keep the last lane to be safe. */
        if (v.vec)
            x = LLVMBuildExtractElement(e->b, x, LLVMConstInt(e->i32, (unsigned)e->lanes - 1, 0),
                                        "");
        if (c != 0) {
            x = splat(e, x);
            v.vec = true;
        } else if (tt__promo_buffer(e, s->buf)) {
            tt__promo_write(e, s->index, x);
            return;
        } else {
            LLVMValueRef idx = e->lanes ? emit_lane0(e, s->index) : emit(e, s->index).v;
            LLVMValueRef st = LLVMBuildStore(e->b, x, element_ptr(e, s->buf, idx));
            tt__codegen_set_access(e, st, s->buf);
            return;
        }
    }
    if (c == 1 && tt__promo_buffer(e, s->buf)) {
        tt__promo_write(e, s->index, x);
        return;
    }
    if (c == 1) {
        LLVMValueRef base = emit_lane0(e, s->index);
        LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)e->lanes);
        LLVMValueRef p =
            LLVMBuildBitCast(e->b, element_ptr(e, s->buf, base), LLVMPointerType(vt, 0), "");
        LLVMValueRef st = LLVMBuildStore(e->b, x, p);
        tt__codegen_set_access(e, st, s->buf);
        return;
    }
    val idx = widen(e, emit(e, s->index), true);
    for (int l = 0; l < e->lanes; l++) {
        LLVMValueRef li = LLVMConstInt(e->i32, (unsigned)l, 0);
        LLVMValueRef st =
            LLVMBuildStore(e->b, LLVMBuildExtractElement(e->b, x, li, ""),
                           element_ptr(e, s->buf, LLVMBuildExtractElement(e->b, idx.v, li, "")));
        tt__codegen_set_access(e, st, s->buf);
    }
}

/* Can the body of a loop over `var` be emitted as vector code, in vectors of `lanes` from
 * multiples of `lanes`? */
static bool vectorisable(emitter *e, tt_sid id, uint32_t var, int64_t lanes)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!vectorisable(e, e->p->items.data[s->first + k], var, lanes))
                return false;
        return true;
    case TT_STMT_IF:
        return tt_expr_lane_uniform(&e->p->pool, s->cond, var, lanes) && !s->orelse &&
               vectorisable(e, s->body, var, lanes);
    case TT_STMT_STORE: {
        int64_t c = tt_expr_coef(&e->p->pool, s->index, var);
        if (c == INT64_MIN || c == 0)
            return false;
        tt_eid stack[256];
        int sp = 0;
        stack[sp++] = s->value;
        while (sp) {
            tt_eid top = stack[--sp];
            const tt_expr *n = tt_expr_get(&e->p->pool, top);
            /* A select guarding a load (padding) would need masked loads, unless its guard does
             * not depend on the lane: then it is one scalar branch around what it guards, a
             * broadcast element (a convolution's padded input, shared by a vector of output
             * channels) or a vector (a depthwise convolution's input, one per channel). */
            if (n->kind == TT_EXPR_SELECT && (has_load(e, n->b) || has_load(e, n->c)) &&
                !tt_expr_lane_uniform(&e->p->pool, n->a, var, lanes) &&
                !masked_load_select(e, n, var) && !masked_expr_select(e, n, var))
                return false;
            if (n->kind == TT_EXPR_VAR || n->kind == TT_EXPR_INT || n->kind == TT_EXPR_FLOAT)
                continue;
            if (sp + 3 >= 256)
                return false;
            if (n->a && n->kind != TT_EXPR_READ)
                stack[sp++] = n->a;
            if (n->kind != TT_EXPR_LOAD && n->kind != TT_EXPR_CALL && n->b)
                stack[sp++] = n->b;
            if (n->kind == TT_EXPR_SELECT)
                stack[sp++] = n->c;
        }
        return true;
    }
    default: return false; /* nested loops and allocations */
    }
}

bool tt__codegen_contains_parallel(emitter *e, tt_sid id)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: return s->ann == TT_ANN_PARALLEL || tt__codegen_contains_parallel(e, s->body);
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (tt__codegen_contains_parallel(e, e->p->items.data[s->first + k]))
                return true;
        return false;
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return tt__codegen_contains_parallel(e, s->body);
    default: return false;
    }
}

/* A local buffer larger than this cannot live in registers (32 registers of 64 bytes). */
#define TT_REGISTER_FILE_BYTES 2048

static bool too_large_for_registers(const tt_buffer *b)
{
    return !strcmp(b->scope, "local") &&
           b->size * tt_dtype_bytes(b->dtype) > TT_REGISTER_FILE_BYTES;
}

/* Is the nest at `id` a copy between parameters and local buffers too large for registers (an
 * input packed per reduction step, a tile of accumulators written back), possibly behind a select
 * for padding, or a fill of such a buffer with a constant (accumulators set to 0)?  A smaller
 * local buffer is left out: unrolled, its copy lets LLVM keep the buffer in registers (a
 * depthwise convolution's accumulators), rolled it could not. */
static bool is_memory_copy(emitter *e, tt_sid id)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: return s->ann != TT_ANN_PARALLEL && is_memory_copy(e, s->body);
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!is_memory_copy(e, e->p->items.data[s->first + k]))
                return false;
        return s->n > 0;
    case TT_STMT_STORE: {
        const tt_expr *v = tt_expr_get(&e->p->pool, s->value);
        const tt_buffer *to = &e->p->bufs.data[s->buf];
        if (v->kind == TT_EXPR_FLOAT || v->kind == TT_EXPR_INT)
            return to->param < 0 && too_large_for_registers(to);
        if (v->kind == TT_EXPR_SELECT)
            v = tt_expr_get(&e->p->pool, v->b);
        if (v->kind != TT_EXPR_LOAD)
            return false;
        const tt_buffer *from = &e->p->bufs.data[v->b];
        const tt_buffer *local = to->param < 0 ? to : from;
        return (to->param < 0) != (from->param < 0) && too_large_for_registers(local);
    }
    default: return false;
    }
}

/* The loop metadata that keeps LLVM from unrolling a loop (made once per module). */
static LLVMValueRef no_unroll_md(emitter *e)
{
    if (!e->md_no_unroll) {
        /* A loop ID is a node whose first operand is itself: built on a placeholder. */
        LLVMMetadataRef self = LLVMTemporaryMDNode(e->ctx, NULL, 0);
        LLVMMetadataRef name = LLVMMDStringInContext2(e->ctx, "llvm.loop.unroll.disable", 24);
        LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(e->ctx, &name, 1)};
        LLVMMetadataRef id = LLVMMDNodeInContext2(e->ctx, ops, 2);
        LLVMMetadataReplaceAllUsesWith(self, id);
        e->md_no_unroll = LLVMMetadataAsValue(e->ctx, id);
    }
    return e->md_no_unroll;
}

/* The constant vector <first, first + 1, ..., first + lanes - 1> (i64). */
static LLVMValueRef lane_numbers(emitter *e, int64_t first, int lanes)
{
    LLVMValueRef l[TT_EMIT_MAX_LANES];
    for (int i = 0; i < lanes; i++)
        l[i] = LLVMConstInt(e->i64, (unsigned long long)(first + i), 0);
    return LLVMConstVector(l, (unsigned)lanes);
}

void tt__codegen_collect_loops(emitter *e, tt_sid id, tt__inner_loops *in)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            tt__codegen_collect_loops(e, e->p->items.data[s->first + k], in);
        return;
    case TT_STMT_FOR:
        if (in->n == TT_EMIT_MAX_INNER) {
            in->ok = false;
            return;
        }
        in->var[in->n] = s->var;
        in->extent[in->n++] = s->extent;
        tt__codegen_collect_loops(e, s->body, in);
        return;
    case TT_STMT_ALLOC:
    case TT_STMT_IF: tt__codegen_collect_loops(e, s->body, in); return;
    default: return;
    }
}

/* Do two iterations of the loop over `var` (coefficient cv, `extent` iterations) read a common
 * element of a load at `index` through a loop inside it: a sliding window (an output column and a
 * kernel column: x + r), whose loads LLVM shares between the iterations once it unrolls them. */
static bool window_overlap(emitter *e, tt_eid index, uint32_t var, int64_t cv, int64_t extent,
                           const tt__inner_loops *in)
{
    for (int k = 0; k < in->n; k++) {
        int64_t cu = tt_expr_coef(&e->p->pool, index, in->var[k]);
        if (cu == INT64_MIN)
            return true;
        if (cu == 0 || in->var[k] == var)
            continue;
        if ((cu % cv == 0 && llabs(cu / cv) < extent) ||
            (cv % cu == 0 && llabs(cv / cu) < in->extent[k]))
            return true;
    }
    return false;
}

/* A loop over `var` of `extent` iterations, for shares_load. */
typedef struct {
    emitter *e;
    uint32_t var;
    int64_t extent;
    const tt__inner_loops *in;
} loop_ctx;

/* Is `id` a load of an element that two iterations of the loop share? */
static bool shared_load(void *ctx, tt_eid id)
{
    const loop_ctx *l = ctx;
    const tt_expr *n = tt_expr_get(&l->e->p->pool, id);
    if (n->kind != TT_EXPR_LOAD)
        return false;
    int64_t cv = tt_expr_coef(&l->e->p->pool, n->a, l->var);
    return cv == INT64_MIN || (cv && window_overlap(l->e, n->a, l->var, cv, l->extent, l->in));
}

/* Does any load under expression `id` read an element that two iterations of the loop share? */
static bool loads_overlap(emitter *e, tt_eid id, uint32_t var, int64_t extent,
                          const tt__inner_loops *in)
{
    loop_ctx l = {e, var, extent, in};
    return tt_expr_any(&e->p->pool, id, shared_load, &l);
}

/* Does a select (a padding guard) under expression `id` test `var`? */
static bool guard_uses(emitter *e, tt_eid id, uint32_t var)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT:
    case TT_EXPR_FLOAT:
    case TT_EXPR_VAR:
    case TT_EXPR_READ:
    case TT_EXPR_LOAD: return false;
    case TT_EXPR_CALL:
    case TT_EXPR_CAST:
    case TT_EXPR_NOT:
    case TT_EXPR_NEG: return guard_uses(e, n->a, var);
    case TT_EXPR_SELECT:
        return tt_expr_uses_var(&e->p->pool, n->a, var) || guard_uses(e, n->b, var) ||
               guard_uses(e, n->c, var);
    default: return guard_uses(e, n->a, var) || guard_uses(e, n->b, var);
    }
}

/* Is every store under `id` at an index without `var`, and no load a window sliding with it? */
static bool reduces_over(emitter *e, tt_sid id, uint32_t var, int64_t extent,
                         const tt__inner_loops *in)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!reduces_over(e, e->p->items.data[s->first + k], var, extent, in))
                return false;
        return true;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: return reduces_over(e, s->body, var, extent, in);
    case TT_STMT_STORE:
        return !tt_expr_uses_var(&e->p->pool, s->index, var) &&
               !loads_overlap(e, s->value, var, extent, in) &&
               !loads_overlap(e, s->index, var, extent, in);
    default: return false; /* an `if`: left to LLVM */
    }
}

/* Loops kept from LLVM's unrollers (llvm.loop.unroll.disable) while emitting, unrolling being the
 * schedule's (`unroll`, auto_unroll_max_step):
 *   - a loop around an accumulator tile kept in values (llvm_promote.c): the tile's loads and
 *     stores, which made its body too large for LLVM's full unroller, are gone, and it then
 *     took the loops around the tile apart (a stride-2 depthwise candidate's code generation
 *     from 64 ms to 740);
 *   - a reduction whose iterations share nothing (a convolution's input channels around a
 *     register tile, a matmul's k) with a large body: at least TT_ROLLED_BODY_FLOPS
 *     floating-point operations per iteration, or TT_ROLLED_BODY_MIN instructions, at least
 *     TT_ROLLED_BODY_FLOPS_GUARDLESS of them multiply-adds, and no padding guard on its variable.
 *     Its counter costs a few instructions per iteration against these, and unrolled it
 *     multiplied what every pass after it and code generation worked through.
 * Left to LLVM: small bodies (a tile of 7 accumulators, one multiply-add each per step, ran 1.16x
 * slower rolled), loops whose variable a padding guard tests (unrolled, the guards fold: a
 * depthwise tile's rows of taps ran up to 1.3x slower rolled), loops over the elements a body
 * stores, and sliding windows (unrolled, neighbouring columns share their loads). */
#define TT_ROLLED_BODY_FLOPS           32
#define TT_ROLLED_BODY_MIN             64
#define TT_ROLLED_BODY_FLOPS_GUARDLESS 8

/* The instructions and floating-point operations (fadd, fsub, fmul, fmuladd; a vector counts
 * once) in block `body` and the blocks after it (a loop body's own: emission appends blocks in
 * order), counted until there are TT_ROLLED_BODY_MIN and TT_ROLLED_BODY_FLOPS. */
static void body_size(LLVMBasicBlockRef body, int *instructions, int *flops)
{
    int n = 0, f = 0;
    for (LLVMBasicBlockRef bb = body; bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
            LLVMOpcode op = LLVMGetInstructionOpcode(i);
            n++;
            if (op == LLVMFAdd || op == LLVMFSub || op == LLVMFMul) {
                f++;
            } else if (op == LLVMCall) {
                size_t len = 0;
                LLVMValueRef callee = LLVMGetCalledValue(i);
                const char *name = callee ? LLVMGetValueName2(callee, &len) : "";
                f += !strncmp(name, "llvm.fmuladd", 12);
            }
            if (n >= TT_ROLLED_BODY_MIN && f >= TT_ROLLED_BODY_FLOPS)
                goto done;
        }
done:
    *instructions = n;
    *flops = f;
}

static bool reduction_loop(emitter *e, const tt_stmt *s)
{
    tt__inner_loops in = {.ok = true};
    tt__codegen_collect_loops(e, s->body, &in);
    return in.ok && reduces_over(e, s->body, s->var, s->extent, &in);
}

/* Does any padded store under `id` guard on `var`? */
static bool guarded_on(emitter *e, tt_sid id, uint32_t var)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (guarded_on(e, e->p->items.data[s->first + k], var))
                return true;
        return false;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: return guarded_on(e, s->body, var);
    case TT_STMT_STORE: return guard_uses(e, s->value, var);
    default: return true;
    }
}

/* Large enough to stay rolled (above). */
static bool large_body(emitter *e, const tt_stmt *s, int instructions, int flops)
{
    return flops >= TT_ROLLED_BODY_FLOPS ||
           (instructions >= TT_ROLLED_BODY_MIN && flops >= TT_ROLLED_BODY_FLOPS_GUARDLESS &&
            !guarded_on(e, s->body, s->var));
}

/* `lanes` > 1: a vectorised loop too long for one vector, `lanes` of its iterations at a time
 * (the variable is the counter plus <0, 1, ..., lanes-1>); `lanes` divides the extent. */
static void emit_serial_loop(emitter *e, const tt_stmt *s, LLVMValueRef begin, LLVMValueRef end,
                             int lanes)
{
    /* while (i < end) { body; i++ } with the test at the top (parallel chunks may be empty). */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "body");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "exit");
    /* Accumulators kept in values across the loop (llvm_promote.c): from here, or from a loop
     * around it. */
    bool inside = e->promo != NULL, root = false;
    if (inside)
        tt__promo_loop_begin(e, head);
    else if (!lanes && LLVMIsAConstantInt(begin) && LLVMIsAConstantInt(end))
        root = tt__promo_try(e, s, head);
    int tiles = e->stats.promoted_tiles;
    LLVMBuildBr(e->b, head);
    LLVMPositionBuilderAtEnd(e->b, head);
    LLVMValueRef phi = LLVMBuildPhi(e->b, e->i64, tt_var_name(&e->p->pool, s->var));
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, phi, end, ""), body, exit);
    LLVMPositionBuilderAtEnd(e->b, body);
    LLVMValueRef saved = e->vars[s->var];
    e->vars[s->var] = phi;
    if (lanes > 1) {
        e->lanes = lanes;
        e->vec_var = s->var;
        e->vec_base = phi;
        e->vars[s->var] = LLVMBuildAdd(e->b, splat(e, phi), lane_numbers(e, 0, lanes), "");
    }
    /* Its bounds: [begin, end) where they are constants (a parallel chunk's are not; the chunk
     * lies within the loop's extent). */
    bool bounded = e->nranges < TT_EMIT_MAX_RANGES;
    if (bounded) {
        e->ranges[e->nranges].var = s->var;
        e->ranges[e->nranges].lo = LLVMIsAConstantInt(begin) ? LLVMConstIntGetSExtValue(begin) : 0;
        e->ranges[e->nranges].hi =
            (LLVMIsAConstantInt(end) ? LLVMConstIntGetSExtValue(end) : s->extent) - 1;
        e->nranges++;
    }
    tt__vn_open(&e->vn);
    if (bounded && lanes <= 1)
        tt__codegen_prefetch_panel(e, s);
    emit_stmt(e, s->body);
    tt__vn_close(&e->vn);
    if (bounded)
        e->nranges--;
    e->vars[s->var] = saved;
    if (lanes > 1) {
        e->lanes = 0;
        e->vec_base = LLVMConstInt(e->i64, 0, 0);
    }
    LLVMValueRef next =
        LLVMBuildAdd(e->b, phi, LLVMConstInt(e->i64, lanes > 1 ? (unsigned)lanes : 1, 0), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->b);
    LLVMValueRef back = LLVMBuildBr(e->b, head);
    bool around_tile = !inside && !root && e->stats.promoted_tiles > tiles;
    int instructions = 0, flops = 0;
    if (lanes <= 1)
        body_size(body, &instructions, &flops);
    /* A copy through a local buffer too large for registers stays a loop: unrolled it gains
     * nothing (its time is memory traffic), and LLVM's full unroller made a copy of a few vectors
     * per iteration hundreds of instructions for the passes after it to work through. */
    if (is_memory_copy(e, s->body)) {
        LLVMSetMetadata(back, LLVMGetMDKindIDInContext(e->ctx, "llvm.loop", 9), no_unroll_md(e));
        e->stats.rolled_copies++;
    } else if (lanes <= 1 && ((around_tile && flops >= TT_ROLLED_BODY_FLOPS_GUARDLESS) ||
                              (large_body(e, s, instructions, flops) && reduction_loop(e, s)))) {
        LLVMSetMetadata(back, LLVMGetMDKindIDInContext(e->ctx, "llvm.loop", 9), no_unroll_md(e));
        e->stats.rolled_bodies++;
    }
    LLVMValueRef vals[2] = {begin, next};
    LLVMBasicBlockRef bbs[2] = {pre, latch};
    LLVMAddIncoming(phi, vals, bbs, 2);
    LLVMPositionBuilderAtEnd(e->b, exit);
    if (inside || root)
        tt__promo_loop_end(e, latch);
}

/* Does guard `c` (a conjunction) have a term equal to `term`? */
static bool has_term(emitter *e, tt_eid c, tt_eid term)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, c);
    if (n->kind == TT_EXPR_AND)
        return has_term(e, n->a, term) || has_term(e, n->b, term);
    return c == term || tt_expr_equal(&e->p->pool, c, term);
}

/* Is every store under `s` a padded update whose guard has the term `term`, in which no loop
 * variable bound at or under `s` appears?  (Not for nests with a parallel loop: its body is
 * emitted in a function of its own.) */
static bool guards_share(emitter *e, const tt_stmt *s, tt_eid term)
{
    switch (s->kind) {
    case TT_STMT_STORE: {
        tt_eid acc, sel = padded_update(e, s, &acc);
        return sel && has_term(e, tt_expr_get(&e->p->pool, sel)->a, term);
    }
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!guards_share(e, &e->p->stmts.data[e->p->items.data[s->first + k]], term))
                return false;
        return s->n > 0;
    case TT_STMT_FOR:
        return s->ann != TT_ANN_PARALLEL && !tt_expr_uses_var(&e->p->pool, term, s->var) &&
               guards_share(e, &e->p->stmts.data[s->body], term);
    default: return false;
    }
}

/* The guard of the first store under `s` when it is a padded update, else 0. */
static tt_eid first_guard(emitter *e, const tt_stmt *s)
{
    switch (s->kind) {
    case TT_STMT_STORE: {
        tt_eid acc, sel = padded_update(e, s, &acc);
        return sel ? tt_expr_get(&e->p->pool, sel)->a : 0;
    }
    case TT_STMT_SEQ:
        return s->n ? first_guard(e, &e->p->stmts.data[e->p->items.data[s->first]]) : 0;
    case TT_STMT_FOR: return first_guard(e, &e->p->stmts.data[s->body]);
    default: return 0;
    }
}

/* Collects into out the terms of guard `c` not yet known that every padded update under loop
 * `s` shares and that do not change inside it; returns the count. */
static int loop_terms(emitter *e, const tt_stmt *s, tt_eid c, tt_eid *out, int n, int max)
{
    const tt_expr *x = tt_expr_get(&e->p->pool, c);
    if (x->kind == TT_EXPR_AND) {
        n = loop_terms(e, s, x->a, out, n, max);
        return loop_terms(e, s, x->b, out, n, max);
    }
    if (n < max && !is_known(e, c) && guards_share(e, s, c))
        out[n++] = c;
    return n;
}

static void emit_loop(emitter *e, const tt_stmt *s);
static void emit_for(emitter *e, const tt_stmt *s);
static int peels(emitter *e, const tt_stmt *s);
static int64_t emitted_stores(emitter *e, tt_sid id, int auto_unroll, bool in_vector);
/* The most stores a loop's copies may emit, the copies around it counted (emit_peeled). */
#define TT_PEEL_BUDGET 256

/* Collects into out[*n] the distinct terms of the guards of the padded updates under `s`, not yet
 * known; false when there are more than `max` or a parallel loop is under `s`. */
static bool padded_terms(emitter *e, const tt_stmt *s, tt_eid c, tt_eid *out, int *n, int max)
{
    if (c) { /* the terms of guard c */
        const tt_expr *x = tt_expr_get(&e->p->pool, c);
        if (x->kind == TT_EXPR_AND)
            return padded_terms(e, s, x->a, out, n, max) && padded_terms(e, s, x->b, out, n, max);
        if (is_known(e, c))
            return true;
        for (int k = 0; k < *n; k++)
            if (out[k] == c || tt_expr_equal(&e->p->pool, out[k], c))
                return true;
        if (*n == max)
            return false;
        out[(*n)++] = c;
        return true;
    }
    switch (s->kind) {
    case TT_STMT_STORE: {
        tt_eid acc, sel = padded_update(e, s, &acc);
        return !sel || padded_terms(e, s, tt_expr_get(&e->p->pool, sel)->a, out, n, max);
    }
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!padded_terms(e, &e->p->stmts.data[e->p->items.data[s->first + k]], 0, out, n, max))
                return false;
        return true;
    case TT_STMT_FOR:
        return s->ann != TT_ANN_PARALLEL &&
               padded_terms(e, &e->p->stmts.data[s->body], 0, out, n, max);
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return padded_terms(e, &e->p->stmts.data[s->body], 0, out, n, max);
    default: return true;
    }
}

/* Guard term `t`, a comparison of integer expressions linear in each of the loop variables of
 * `in`, holds for every iteration of those loops where it holds with each variable at the end
 * of its range where the comparison is tightest (the least of a - b for a >= b): those ends into
 * `at`; false when `t` is not such a term. */
static bool term_ends(emitter *e, tt_eid t, const tt__inner_loops *in, int64_t *at)
{
    const tt_expr_pool *pool = &e->p->pool;
    const tt_expr *n = tt_expr_get(pool, t);
    if (n->kind < TT_EXPR_LT || n->kind > TT_EXPR_GE || tt_dtype_is_float(dtype_of(e, n->a)) ||
        tt_dtype_is_float(dtype_of(e, n->b)))
        return false;
    bool least = n->kind == TT_EXPR_GT || n->kind == TT_EXPR_GE; /* of a - b */
    for (int k = 0; k < in->n; k++) {
        int64_t ca = tt_expr_coef(pool, n->a, in->var[k]),
                cb = tt_expr_coef(pool, n->b, in->var[k]);
        if (ca == INT64_MIN || cb == INT64_MIN)
            return false;
        at[k] = (ca - cb >= 0) == least ? 0 : in->extent[k] - 1;
    }
    return true;
}

/* Term `t` emitted with the loops of `in` at `at` (term_ends). */
static LLVMValueRef universal_term(emitter *e, tt_eid t, const tt__inner_loops *in,
                                   const int64_t *at)
{
    LLVMValueRef saved[TT_EMIT_MAX_INNER];
    for (int k = 0; k < in->n; k++) {
        saved[k] = e->vars[in->var[k]];
        e->vars[in->var[k]] = LLVMConstInt(e->i64, (unsigned long long)at[k], 0);
    }
    val c = emit_condition(e, t);
    LLVMValueRef v = convert(e, c.v, dtype_of(e, t), TT_DT_BOOL, false);
    for (int k = in->n - 1; k >= 0; k--)
        e->vars[in->var[k]] = saved[k];
    return v;
}

/* The variables of the loops at and under `s` emitted as copies of their body, unrolled or one
 * per vector lane, into `out`, under unroll setting `au`: a guard term on one of them is a guard
 * per update (or per lane), unless the loops around decide it.  Those of the rolled loops that
 * emit_peeled would peel into `peeled`: it decides their terms (where they are terms of tiles). */
static void copied_loops(emitter *e, const tt_stmt *s, int au, bool in_vector, tt__inner_loops *out,
                         tt__inner_loops *peeled)
{
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            copied_loops(e, &e->p->stmts.data[e->p->items.data[s->first + k]], au, in_vector, out,
                         peeled);
        return;
    case TT_STMT_FOR: {
        if (s->unroll_max_step)
            au = s->unroll_max_step;
        tt__loop_form form = tt__codegen_loop_form(e, s, au, in_vector);
        bool vector = form == TT__LOOP_VECTOR || form == TT__LOOP_LONG_VECTOR;
        tt__inner_loops *to = vector || form == TT__LOOP_UNROLLED          ? out
                              : form == TT__LOOP_ROLLED && peels(e, s) > 0 ? peeled
                                                                           : NULL;
        if (to) {
            if (to->n == TT_EMIT_MAX_INNER) {
                out->ok = false;
                return;
            }
            to->var[to->n] = s->var;
            to->extent[to->n++] = s->extent;
        }
        copied_loops(e, &e->p->stmts.data[s->body], au, in_vector || vector, out, peeled);
        return;
    }
    case TT_STMT_ALLOC:
    case TT_STMT_IF:
        copied_loops(e, &e->p->stmts.data[s->body], au, in_vector, out, peeled);
        return;
    default: return;
    }
}

/* The most taps a padded update's reduction may have for its loop to be split (a window's: a
 * depthwise convolution's 3 x 3, a pooling's; tt_space_window_index's bound too). */
#define INTERIOR_MAX_TAPS 64

/* The loops from the root to a statement, and where each buffer allocated on the way was
 * (window_updates). */
typedef struct {
    tt__inner_loops loops;
    uint32_t buf[16];
    int depth[16], nbufs;
} loop_path;

/* Steps into loop or allocation `s` (false when the path is full), and back out of it. */
static bool path_enter(loop_path *path, const tt_stmt *s)
{
    tt__inner_loops *l = &path->loops;
    if (s->kind == TT_STMT_FOR) {
        if (l->n == TT_EMIT_MAX_INNER)
            return false;
        l->var[l->n] = s->var;
        l->extent[l->n++] = s->extent;
    } else {
        if (path->nbufs == 16)
            return false;
        path->buf[path->nbufs] = s->buf;
        path->depth[path->nbufs++] = l->n;
    }
    return true;
}

static void path_leave(loop_path *path, const tt_stmt *s)
{
    if (s->kind == TT_STMT_FOR)
        path->loops.n--;
    else
        path->nbufs--;
}

/* Are the padded updates under `id` (the loops from the root to it in `path`) all reductions
 * over a window alone: at most INTERIOR_MAX_TAPS iterations of the loops, inside their buffer's
 * allocation, that do not index it?  Where the reduction runs over input channels too (a dense
 * convolution), the guards are a small part of the work and the second copy measured slower:
 * ResNet-18 at 0.99x, and every candidate took 1.3x as long to compile. */
static bool window_updates(emitter *e, tt_sid id, loop_path *path)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (!window_updates(e, e->p->items.data[s->first + k], path))
                return false;
        return true;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: {
        if (!path_enter(path, s))
            return false;
        bool ok = window_updates(e, s->body, path);
        path_leave(path, s);
        return ok;
    }
    case TT_STMT_IF: return window_updates(e, s->body, path);
    case TT_STMT_STORE: {
        tt_eid acc;
        if (!padded_update(e, s, &acc))
            return true;
        int from = 0; /* the loops inside the accumulator's allocation */
        for (int b = 0; b < path->nbufs; b++)
            if (path->buf[b] == s->buf)
                from = path->depth[b];
        int64_t taps = 1;
        for (int k = from; k < path->loops.n; k++)
            if (!tt_expr_uses_var(&e->p->pool, s->index, path->loops.var[k]))
                taps *= path->loops.extent[k];
        return taps <= INTERIOR_MAX_TAPS;
    }
    default: return true;
    }
}

/* The path from the root to statement `target` into `path`; false when it is not found. */
static bool path_to(emitter *e, tt_sid id, const tt_stmt *target, loop_path *path)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    if (s == target)
        return true;
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (path_to(e, e->p->items.data[s->first + k], target, path))
                return true;
        return false;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC:
        if (!path_enter(path, s))
            return false;
        if (path_to(e, s->body, target, path))
            return true;
        path_leave(path, s);
        return false;
    case TT_STMT_IF:
        return path_to(e, s->body, target, path) ||
               (s->orelse && path_to(e, s->orelse, target, path));
    default: return false;
    }
}

enum { INTERIOR_SAMPLES = 1 << 12 };
/* The least share of iterations inside the padding that is worth a second copy of a loop. */
#define INTERIOR_MIN_SHARE 0.25

/* The share of the iterations of the loops `out` around a loop (up to INTERIOR_SAMPLES of them,
 * evenly spread) in which every term of `terms` holds throughout it, each with the loops of `in` at
 * `at` (universal_term's ends, term by term); -1 when it cannot be told. */
static double interior_share(emitter *e, const tt__inner_loops *out, const tt_eid *terms,
                             int nterms, const tt__inner_loops *in,
                             const int64_t (*at)[TT_EMIT_MAX_INNER])
{
    size_t nvars = e->p->pool.vars.len;
    int64_t *vars = malloc(nvars * sizeof(int64_t));
    if (!vars)
        return -1;
    for (size_t v = 0; v < nvars; v++) /* the loops' variables are set below, each sample */
        vars[v] = TT_VAR_UNBOUND;
    int64_t total = 1;
    for (int k = 0; k < out->n; k++)
        total *= out->extent[k];
    int64_t step = total > INTERIOR_SAMPLES ? (total + INTERIOR_SAMPLES - 1) / INTERIOR_SAMPLES : 1;
    int64_t inside = 0, seen = 0;
    tt_eval_env env = {.vars = vars};
    for (int64_t i = 0; i < total; i += step, seen++) {
        for (int64_t k = out->n - 1, rest = i; k >= 0; k--) {
            vars[out->var[k]] = rest % out->extent[k];
            rest /= out->extent[k];
        }
        bool all = true;
        for (int t = 0; t < nterms && all; t++) {
            for (int k = 0; k < in->n; k++)
                vars[in->var[k]] = at[t][k];
            tt_value v;
            if (tt_expr_eval(&e->p->pool, terms[t], &env, &v)) {
                free(vars);
                return -1;
            }
            all = v.i != 0;
        }
        inside += all;
    }
    free(vars);
    if (!seen)
        return -1;
    /* all of a sample is not all: the branch stays */
    return step > 1 && inside == seen ? 1 - 1.0 / (double)(seen + 1)
                                      : (double)inside / (double)seen;
}

/* Loop `s` emitted by `body` with `terms` known. */
static void emit_knowing(emitter *e, const tt_stmt *s, const tt_eid *terms, int nterms,
                         void (*body)(emitter *, const tt_stmt *))
{
    int saved = e->nknown;
    if (nterms) /* terms may be NULL then */
        memcpy(e->known + e->nknown, terms, (size_t)nterms * sizeof(terms[0]));
    e->nknown += nterms;
    body(e, s);
    e->nknown = saved;
}

/* Loop `s` emitted by `body` behind `cond` (or, with `skip`, behind its negation), with `terms`
 * known inside: an arm of emit_interior, or the guarded loop of emit_for. */
static void emit_known_arm(emitter *e, const tt_stmt *s, LLVMValueRef cond, bool skip,
                           const tt_eid *terms, int nterms,
                           void (*body)(emitter *, const tt_stmt *))
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef arm = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "known.arm");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "known.end");
    LLVMBuildCondBr(e->b, cond, skip ? join : arm, skip ? arm : join);
    LLVMPositionBuilderAtEnd(e->b, arm);
    bool promoted = e->promo != NULL;
    if (promoted)
        tt__promo_arm_begin(e);
    tt__vn_open(&e->vn);
    emit_knowing(e, s, terms, nterms, body);
    tt__vn_close(&e->vn);
    LLVMBasicBlockRef arm_end = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, join);
    LLVMPositionBuilderAtEnd(e->b, join);
    if (promoted)
        tt__promo_arm_end(e, arm_end, pre);
}

/* A loop with padded updates under it whose guards change inside it (a depthwise convolution's
 * tile: its rows, its columns and the window's taps) is emitted twice, behind one branch: where
 * every guard term holds for the whole loop (the term at the ends of the loops' ranges,
 * universal_term: a tile inside the image) with those terms known, so its updates are plain
 * multiply-adds on addresses that share one base, and elsewhere as before.  Halide splits such
 * loops the same way (its loop partitioning), and oneDNN's kernels have separate code for the
 * border.  Once per nest: not inside a loop already split.  Returns false when `s` was not
 * emitted (nothing to split). */
static bool emit_interior(emitter *e, const tt_stmt *s)
{
    /* TT_NO_INTERIOR_SPLIT: kernels without it, to measure what it does (docs/codegen.md) */
    if (e->in_interior || e->lanes || s->extent < 2 || s->ann == TT_ANN_PARALLEL ||
        tt__codegen_contains_parallel(e, s->body) || getenv("TT_NO_INTERIOR_SPLIT"))
        return false;
    tt_eid terms[TT_EMIT_MAX_KNOWN];
    int nterms = 0;
    if (!padded_terms(e, s, 0, terms, &nterms, TT_EMIT_MAX_KNOWN - e->nknown) || !nterms)
        return false;
    /* the loops around `s`, and the window's updates under it (window_updates leaves `path` as
     * it found it) */
    loop_path path = {.loops = {.ok = true}};
    if (!path_to(e, e->p->root, s, &path) ||
        !window_updates(e, (tt_sid)(s - e->p->stmts.data), &path))
        return false;
    tt__inner_loops in = {.ok = true, .n = 1};
    in.var[0] = s->var;
    in.extent[0] = s->extent;
    tt__codegen_collect_loops(e, s->body, &in);
    if (!in.ok)
        return false;
    /* The terms that are guards per update: on a loop inside emitted as copies of its body (a
     * tile's rows and taps, unrolled), the loops around not deciding them (a row of tiles: on a
     * rolled loop around); at the ends of the loop's ranges.  Terms on rolled loops alone are a
     * branch per iteration of the innermost (emit_for), and the peeling decides a rolled loop
     * over tiles where it can (emit_peeled). */
    tt__inner_loops rt = {.ok = true}, peeled = {.ok = true};
    copied_loops(e, s, e->auto_unroll, false, &rt, &peeled);
    if (!rt.ok)
        return false;
    tt_eid cand[TT_EMIT_MAX_KNOWN];
    int64_t cand_at[TT_EMIT_MAX_KNOWN][TT_EMIT_MAX_INNER];
    double cand_share[TT_EMIT_MAX_KNOWN];
    int ncand = 0;
    for (int t = 0; t < nterms; t++) {
        bool changes = false;
        for (int k = 0; k < rt.n && !changes; k++)
            changes = tt_expr_uses_var(&e->p->pool, terms[t], rt.var[k]);
        for (int k = 0; k < peeled.n && changes; k++)
            changes = !tt_expr_uses_var(&e->p->pool, terms[t], peeled.var[k]);
        if (!changes || !term_ends(e, terms[t], &in, cand_at[ncand]))
            continue;
        /* Where few iterations of the loops around are inside (7x7 maps: every tile touches the
         * border), a second copy for the term would only cost code and a branch. */
        cand_share[ncand] = interior_share(e, &path.loops, &terms[t], 1, &in, &cand_at[ncand]);
        if (cand_share[ncand] >= INTERIOR_MIN_SHARE)
            cand[ncand++] = terms[t];
    }
    /* The terms split on: the most often true first, each while the share where all hold stays
     * above the least (a row of tiles inside the map's rows though never inside its columns:
     * the rows' terms; the peeling decides the columns'). */
    tt_eid split[TT_EMIT_MAX_KNOWN];
    int64_t at[TT_EMIT_MAX_KNOWN][TT_EMIT_MAX_INNER];
    int nsplit = 0;
    double share = 0;
    while (ncand) {
        int best = 0;
        for (int c = 1; c < ncand; c++)
            if (cand_share[c] > cand_share[best])
                best = c;
        split[nsplit] = cand[best];
        memcpy(at[nsplit], cand_at[best], sizeof(at[0]));
        double joint = interior_share(e, &path.loops, split, nsplit + 1, &in, at);
        if (joint >= INTERIOR_MIN_SHARE) {
            share = joint;
            nsplit++;
        }
        ncand--;
        cand[best] = cand[ncand];
        cand_share[best] = cand_share[ncand];
        memcpy(cand_at[best], cand_at[ncand], sizeof(cand_at[0]));
    }
    /* Within the code budget of the peeling: two copies of the loop, each still peeling what
     * the loop would (a row's column tiles, whose guards are in every row, before a split on the
     * rows of the first row's copy) */
    if (!nsplit ||
        2 * e->copies * emitted_stores(e, (tt_sid)(s - e->p->stmts.data), e->auto_unroll, false) >
            TT_PEEL_BUDGET)
        return false;
    if (peeled.n) {
        tt__inner_loops rt2 = {.ok = true}, peeled2 = {.ok = true};
        e->copies *= 2;
        copied_loops(e, s, e->auto_unroll, false, &rt2, &peeled2);
        e->copies /= 2;
        if (peeled2.n < peeled.n)
            return false;
    }
    LLVMValueRef cond = NULL;
    for (int t = 0; t < nsplit && share < 1; t++) {
        LLVMValueRef u = universal_term(e, split[t], &in, at[t]);
        if (!LLVMIsAConstantInt(u))
            cond = cond ? LLVMBuildAnd(e->b, cond, u, "") : u;
        else if (!LLVMConstIntGetZExtValue(u)) /* never inside here (a peeled edge) */
            return false;
    }
    if (!cond && share < 1) /* decided while emitting (a peeled loop's middle, on its bounds) */
        return false;
    if (!cond) { /* every term holds throughout, though not provably here: one copy, known */
        e->stats.decided_guards++;
        emit_knowing(e, s, split, nsplit, emit_for);
        return true;
    }
    int64_t saved_copies = e->copies;
    e->in_interior = true;
    e->copies *= 2;
    emit_known_arm(e, s, cond, false, split, nsplit, emit_for);
    emit_known_arm(e, s, cond, true, NULL, 0, emit_for);
    e->stats.interior_loops++;
    e->copies = saved_copies;
    e->in_interior = false;
    return true;
}

/* A loop whose padded updates all share guard terms that do not change inside it is emitted
 * behind one branch on those terms (LLVM's loop unswitching, done while the terms are still
 * known to be shared): where they are false each update would keep its value.  The terms are
 * hoisted to the outermost loop they are invariant in, so a convolution's row guard (`the input
 * row of this output row and tap is not padding`) branches once around the tile's whole
 * reduction, and the column terms of each unrolled column are decided further in.  Unrolled, a
 * branch per update on the same condition cost jump threading up to a third of the optimisation
 * time, and the kernel as many branches. */
static void emit_for(emitter *e, const tt_stmt *s)
{
    if (emit_interior(e, s))
        return;
    tt_eid terms[TT_EMIT_MAX_KNOWN];
    tt_eid guard = first_guard(e, s);
    int nterms = guard ? loop_terms(e, s, guard, terms, 0, TT_EMIT_MAX_KNOWN - e->nknown) : 0;
    if (!nterms) {
        emit_loop(e, s);
        return;
    }
    LLVMValueRef cond = NULL;
    for (int k = 0; k < nterms; k++) {
        val c = emit(e, terms[k]);
        LLVMValueRef v = convert(e, c.v, dtype_of(e, terms[k]), TT_DT_BOOL, false);
        if (LLVMIsAConstantInt(v) && LLVMConstIntGetZExtValue(v))
            continue;
        cond = !cond || LLVMIsAConstantInt(v) ? v : LLVMBuildAnd(e->b, cond, v, "");
        if (LLVMIsAConstantInt(cond))
            break; /* false */
    }
    if (!cond || LLVMIsAConstantInt(cond)) {
        /* Decided while emitting (a tap of an unrolled row in the padding, or inside it): the
         * loop with these terms known, or nothing, as its updates would keep their values. */
        e->stats.decided_guards++;
        if (!cond)
            emit_knowing(e, s, terms, nterms, emit_loop);
        return;
    }
    emit_known_arm(e, s, cond, false, terms, nterms, emit_loop);
    e->stats.guarded_loops++;
}

/* The extent of the loop of `var` under `id` when it is emitted unrolled (a constant in each
 * copy; 1 for a unit loop), else 0. */
static int64_t unrolled_inside(emitter *e, tt_sid id, uint32_t var)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    int64_t ext = 0;
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n && !ext; k++)
            ext = unrolled_inside(e, e->p->items.data[s->first + k], var);
        return ext;
    case TT_STMT_FOR:
        if (s->var != var)
            return unrolled_inside(e, s->body, var);
        return s->extent == 1 || (s->ann == TT_ANN_UNROLL && s->extent <= e->opt.unroll_limit)
                   ? s->extent
                   : 0;
    case TT_STMT_ALLOC:
    case TT_STMT_IF: return unrolled_inside(e, s->body, var);
    default: return 0;
    }
}

/* Does comparison term `id` of a padding guard use `var` (*uses), with every other variable bound
 * to a constant, the variable of a loop under `body` that is unrolled (*tile), or the variable of
 * an enclosing rolled loop, whose bounds may decide the term (*rolled)? */
typedef struct {
    bool uses, tile, rolled;
} term_vars;

static bool peelable_term(emitter *e, tt_sid body, tt_eid id, uint32_t var, term_vars *tv)
{
    const tt_expr *n = tt_expr_get(&e->p->pool, id);
    switch ((tt_expr_kind)n->kind) {
    case TT_EXPR_INT: return true;
    case TT_EXPR_VAR: {
        tv->uses |= n->a == var;
        if (n->a == var || (e->vars[n->a] && LLVMIsAConstantInt(e->vars[n->a])))
            return true;
        int64_t lo, hi;
        if (e->vars[n->a]) { /* an enclosing rolled loop's, decided on its bounds if any */
            if (!loop_bounds(e, n->a, &lo, &hi))
                return false;
            return tv->rolled = true;
        }
        int64_t ext = unrolled_inside(e, body, n->a);
        tv->tile |= ext > 1;
        return ext > 0;
    }
    case TT_EXPR_ADD:
    case TT_EXPR_SUB:
    case TT_EXPR_MUL:
    case TT_EXPR_LT:
    case TT_EXPR_LE:
    case TT_EXPR_GT:
    case TT_EXPR_GE:
        return peelable_term(e, body, n->a, var, tv) && peelable_term(e, body, n->b, var, tv);
    default: return false;
    }
}

/* Some padded update under `id` (within loop body `body`) has a guard term on `var` that the
 * bounds of var's middle iterations and the unrolled loops inside decide. */
static bool padding_depends_on(emitter *e, tt_sid body, tt_sid id, uint32_t var)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            if (padding_depends_on(e, body, e->p->items.data[s->first + k], var))
                return true;
        return false;
    case TT_STMT_FOR:
    case TT_STMT_ALLOC: return padding_depends_on(e, body, s->body, var);
    case TT_STMT_STORE: {
        tt_eid acc, sel = padded_update(e, s, &acc);
        if (!sel)
            return false;
        tt_eid stack[32];
        int sp = 0;
        stack[sp++] = tt_expr_get(&e->p->pool, sel)->a;
        while (sp) {
            tt_eid term = stack[--sp];
            const tt_expr *n = tt_expr_get(&e->p->pool, term);
            if (n->kind == TT_EXPR_AND && sp + 2 <= 32) {
                stack[sp++] = n->a;
                stack[sp++] = n->b;
                continue;
            }
            /* An enclosing rolled loop in the term only with the tile's columns unrolled inside
             * (a stride-2 tile's taps over a rolled window column): peeling loops without them
             * tripled their code for guards LLVM removes anyway. */
            term_vars tv = {false, false, false};
            if (n->kind >= TT_EXPR_LT && n->kind <= TT_EXPR_GE &&
                peelable_term(e, body, term, var, &tv) && tv.uses && (tv.tile || !tv.rolled))
                return true;
        }
        return false;
    }
    default: return false;
    }
}

/* The statements emitting `id` produces: each store once per iteration of the loops around it
 * (within id) that are unrolled and once per vector piece, the body of a rolled loop once. */
static int64_t emitted_stores(emitter *e, tt_sid id, int auto_unroll, bool in_vector)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_SEQ: {
        int64_t n = 0;
        for (uint32_t k = 0; k < s->n; k++)
            n += emitted_stores(e, e->p->items.data[s->first + k], auto_unroll, in_vector);
        return n;
    }
    case TT_STMT_STORE: return 1;
    case TT_STMT_ALLOC: return emitted_stores(e, s->body, auto_unroll, in_vector);
    case TT_STMT_IF:
        return emitted_stores(e, s->body, auto_unroll, in_vector) +
               (s->orelse ? emitted_stores(e, s->orelse, auto_unroll, in_vector) : 0);
    case TT_STMT_FOR: {
        int au = s->unroll_max_step ? s->unroll_max_step : auto_unroll;
        switch (tt__codegen_loop_form(e, s, au, in_vector)) {
        case TT__LOOP_VECTOR:
            return s->extent / tt__codegen_vector_piece(s->extent) *
                   emitted_stores(e, s->body, au, true);
        case TT__LOOP_UNROLLED: return s->extent * emitted_stores(e, s->body, au, in_vector);
        default: return emitted_stores(e, s->body, au, in_vector);
        }
    }
    default: return 0;
    }
}

/* A serial loop over register tiles whose padding guards depend on it (a row of 28 outputs in
 * tiles of 7, the kernel's columns unrolled inside): its first and last iterations are emitted
 * with the variable a constant, where the unrolled taps' guards are decided, and the middle ones
 * as a loop whose guards are decided on its bounds: the interior tiles run without a branch per
 * row and tap, as oneDNN's JIT emits its left, middle and right kernels.
 *
 * Peeling triples the body, and a peeled loop inside a peeled loop makes it nine copies: not past
 * TT_PEEL_BUDGET stores in all, counting every copy the loops around it make (unrolled
 * iterations, vector pieces, peeled loops), the outer loop first.  A depthwise candidate's tile of
 * 8 columns by 48 channels by 3 rows of taps (72 vector multiply-adds) peeled over rows and
 * columns became 648, and took 0.7 s to compile; no tuned kernel's peeled code was above 168
 * (the top three configs of each row of ten tuned databases). */
#define TT_PEEL_BUDGET 256
/* Would emit_peeled peel loop `s` (1), leave it for its code budget (-1) or not (0)? */
static int peels(emitter *e, const tt_stmt *s)
{
    if (s->extent < 2 || s->extent > 64 || e->lanes || e->npeeled == 4 ||
        tt__codegen_contains_parallel(e, s->body) ||
        !padding_depends_on(e, s->body, s->body, s->var))
        return 0;
    return 3 * e->copies * emitted_stores(e, s->body, e->auto_unroll, false) > TT_PEEL_BUDGET ? -1
                                                                                              : 1;
}

static bool emit_peeled(emitter *e, const tt_stmt *s)
{
    int peel = peels(e, s);
    if (peel < 0)
        e->stats.unpeeled_loops++;
    if (peel <= 0)
        return false;
    LLVMValueRef saved = e->vars[s->var];
    int64_t saved_copies = e->copies;
    e->copies *= 3;
    e->npeeled++;
    e->vars[s->var] = LLVMConstInt(e->i64, 0, 0);
    emit_stmt(e, s->body);
    if (s->extent > 2) /* the middle: bounded [1, extent - 2] by the loop's constant bounds */
        emit_serial_loop(e, s, LLVMConstInt(e->i64, 1, 0),
                         LLVMConstInt(e->i64, (unsigned long long)s->extent - 1, 0), 0);
    e->vars[s->var] = LLVMConstInt(e->i64, (unsigned long long)s->extent - 1, 0);
    emit_stmt(e, s->body);
    e->vars[s->var] = saved;
    e->copies = saved_copies;
    e->npeeled--;
    e->stats.peeled_loops++;
    return true;
}

int tt__codegen_vector_piece(int64_t extent)
{
    int64_t piece = extent & -extent; /* the largest power of two dividing it */
    return piece == extent || piece < TT_VECTOR_MIN_PIECE ? (int)extent : (int)piece;
}

/* The lanes of each vector of a vectorised loop longer than the widest vector: the largest power
 * of two dividing its extent that is at most max_vector (odd widths legalise slowly: see
 * tt__codegen_vector_piece), else its largest such divisor, or 0 when that is under 4 (a prime
 * extent: the loop stays scalar). */
static int long_vector_lanes(const emitter *e, int64_t extent)
{
    for (int lanes = e->opt.max_vector; lanes >= 4; lanes /= 2)
        if (extent % lanes == 0 && (lanes & (lanes - 1)) == 0)
            return lanes;
    for (int lanes = e->opt.max_vector; lanes >= 4; lanes--)
        if (extent % lanes == 0)
            return lanes;
    return 0;
}

tt__loop_form tt__codegen_loop_form(emitter *e, const tt_stmt *s, int auto_unroll, bool in_vector)
{
    if (s->extent == 1)
        return TT__LOOP_UNIT;
    /* The pool hands out ranges of a parallel loop as 32-bit halves of one word (pool.h). */
    if (s->ann == TT_ANN_PARALLEL && !e->in_parallel && s->extent <= TT_RT1_MAX_LOOP_EXTENT)
        return TT__LOOP_PARALLEL;
    if (s->ann == TT_ANN_VECTORIZE && !in_vector) {
        if (s->extent <= e->opt.max_vector &&
            vectorisable(e, s->body, s->var, tt__codegen_vector_piece(s->extent)))
            return TT__LOOP_VECTOR;
        if (s->extent > e->opt.max_vector && long_vector_lanes(e, s->extent) &&
            vectorisable(e, s->body, s->var, long_vector_lanes(e, s->extent)))
            return TT__LOOP_LONG_VECTOR;
    }
    if ((s->ann == TT_ANN_UNROLL && s->extent <= e->opt.unroll_limit) ||
        (auto_unroll && s->ann != TT_ANN_PARALLEL &&
         tt_program_nest_trip(e->p, s->body, false) * s->extent <= auto_unroll &&
         !tt__codegen_contains_parallel(e, s->body)))
        return TT__LOOP_UNROLLED;
    return TT__LOOP_ROLLED;
}

static void emit_loop(emitter *e, const tt_stmt *s)
{
    LLVMValueRef zero = LLVMConstInt(e->i64, 0, 0),
                 ext = LLVMConstInt(e->i64, (unsigned long long)s->extent, 0);
    int saved_unroll = e->auto_unroll;
    if (s->unroll_max_step)
        e->auto_unroll = s->unroll_max_step;
    LLVMValueRef saved = e->vars[s->var];
    switch (tt__codegen_loop_form(e, s, e->auto_unroll, e->lanes > 0)) {
    case TT__LOOP_UNIT:
        /* A unit loop (a split by 1) is its body with the variable 0. */
        e->vars[s->var] = zero;
        emit_stmt(e, s->body);
        e->vars[s->var] = saved;
        break;
    case TT__LOOP_PARALLEL:
        tt__codegen_parallel(e, s);
        e->stats.parallel_loops++;
        break;
    case TT__LOOP_VECTOR: {
        /* The whole loop as vectors of `lanes`: one, or pieces of a power of two lanes each. */
        int lanes = tt__codegen_vector_piece(s->extent);
        int64_t saved_copies = e->copies;
        e->copies *= s->extent / lanes;
        e->lanes = lanes;
        e->vec_var = s->var;
        for (int64_t at = 0; at < s->extent; at += lanes) {
            e->vec_base = LLVMConstInt(e->i64, (unsigned long long)at, 0);
            e->vars[s->var] = lane_numbers(e, at, lanes);
            emit_stmt(e, s->body);
        }
        e->lanes = 0;
        e->vec_base = zero;
        e->vars[s->var] = saved;
        e->copies = saved_copies;
        e->stats.vector_loops++;
        break;
    }
    case TT__LOOP_LONG_VECTOR:
        /* Too long for one vector (a packed copy's row of 128): a loop over vectors. */
        emit_serial_loop(e, s, zero, ext, long_vector_lanes(e, s->extent));
        e->stats.vector_loops++;
        break;
    case TT__LOOP_UNROLLED: {
        int64_t saved_copies = e->copies;
        e->copies *= s->extent;
        for (int64_t i = 0; i < s->extent; i++) {
            e->vars[s->var] = LLVMConstInt(e->i64, (unsigned long long)i, 0);
            emit_stmt(e, s->body);
        }
        e->copies = saved_copies;
        e->vars[s->var] = saved;
        e->stats.unrolled_loops++;
        break;
    }
    case TT__LOOP_ROLLED:
        if (s->ann == TT_ANN_VECTORIZE || !emit_peeled(e, s)) {
            if (s->ann == TT_ANN_VECTORIZE)
                e->stats.scalar_fallbacks++;
            emit_serial_loop(e, s, zero, ext, 0);
        }
        break;
    }
    e->auto_unroll = saved_unroll;
}

static void emit_stmt(emitter *e, tt_sid id)
{
    const tt_stmt *s = &e->p->stmts.data[id];
    switch (s->kind) {
    case TT_STMT_FOR: emit_for(e, s); return;
    case TT_STMT_SEQ:
        for (uint32_t k = 0; k < s->n; k++)
            emit_stmt(e, e->p->items.data[s->first + k]);
        return;
    case TT_STMT_STORE: emit_store(e, s); return;
    case TT_STMT_ALLOC:
        /* Once per function, however often the statement is emitted (the body of an unrolled or
         * peeled loop): the allocation is at the function's entry, and the loop IR reuses one
         * buffer across iterations.  A copy per emission multiplied the stack a kernel needs. */
        if (!e->bufs[s->buf] || e->buf_fn[s->buf] != e->fn) {
            e->bufs[s->buf] = tt__codegen_alloc(e, s->buf);
            e->buf_fn[s->buf] = e->fn;
        }
        emit_stmt(e, s->body);
        return;
    case TT_STMT_IF: {
        val c = emit_condition(e, s->cond);
        LLVMValueRef cond = convert(e, c.v, dtype_of(e, s->cond), TT_DT_BOOL, false);
        LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "if.then");
        LLVMBasicBlockRef else_bb =
            s->orelse ? LLVMAppendBasicBlockInContext(e->ctx, e->fn, "if.else") : NULL;
        LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "if.end");
        LLVMBuildCondBr(e->b, cond, then_bb, else_bb ? else_bb : join);
        LLVMPositionBuilderAtEnd(e->b, then_bb);
        tt__vn_open(&e->vn);
        emit_stmt(e, s->body);
        tt__vn_close(&e->vn);
        LLVMBuildBr(e->b, join);
        if (else_bb) {
            LLVMPositionBuilderAtEnd(e->b, else_bb);
            tt__vn_open(&e->vn);
            emit_stmt(e, s->orelse);
            tt__vn_close(&e->vn);
            LLVMBuildBr(e->b, join);
        }
        LLVMPositionBuilderAtEnd(e->b, join);
        return;
    }
    default: return;
    }
}

void tt__codegen_emit_body(emitter *e, tt_sid root)
{
    emit_stmt(e, root);
}

void tt__codegen_emit_serial(emitter *e, const tt_stmt *loop, LLVMValueRef begin, LLVMValueRef end)
{
    emit_serial_loop(e, loop, begin, end, 0);
}
