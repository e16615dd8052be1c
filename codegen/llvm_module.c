/* Functions, buffers, parallel outlining, target machines, object code. */
#include "codegen_int.h"
#include "loader.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Buffers up to this size live on the stack (per thread inside parallel loops). */
#define STACK_LIMIT (64 * 1024)

static LLVMTypeRef mem_type(emitter *e, tt_dtype t)
{
    switch (t) {
    case TT_DT_FLOAT32: return e->f32;
    case TT_DT_FLOAT64: return e->f64;
    case TT_DT_INT32: return e->i32;
    case TT_DT_INT64: return e->i64;
    default: return e->i8;
    }
}

static LLVMValueRef declare(emitter *e, const char *name, LLVMTypeRef fty)
{
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    return f ? f : LLVMAddFunction(e->mod, name, fty);
}

/* Heap buffers of the kernel's entry function are kept between calls, as TVM's workspace pool
 * keeps freed blocks: a per-call malloc of megabytes cost a network ~2,400 page faults per call
 * whenever glibc had returned the memory to the OS, which a measurement repeating one kernel
 * never sees.  Each buffer has a slot and a busy flag (internal globals):
 *
 *     p = tt.ws.acquire(&slot, &busy, bytes)   // the slot's block (allocated on first use) if
 *                                              // busy was 0, else a fresh malloc (another thread)
 *     ... kernel ...
 *     tt.ws.release(&slot, &busy, p)           // busy = 0, or free(p) when it was a fresh one
 *
 * so concurrent calls stay correct and nothing waits.  Buffers of outlined parallel bodies are
 * per thread and stay malloc/free. */
static LLVMValueRef ws_function(emitter *e, bool acquire)
{
    const char *name = acquire ? "tt.ws.acquire" : "tt.ws.release";
    LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
    if (f)
        return f;
    LLVMTypeRef slotp = LLVMPointerType(e->i8p, 0), busyp = LLVMPointerType(e->i32, 0);
    LLVMTypeRef params[3] = {slotp, busyp, acquire ? e->i64 : e->i8p};
    LLVMTypeRef fty = LLVMFunctionType(acquire ? e->i8p : e->voidt, params, 3, 0);
    f = LLVMAddFunction(e->mod, name, fty);
    LLVMSetLinkage(f, LLVMInternalLinkage);
    LLVMTypeRef mty = LLVMFunctionType(e->i8p, &e->i64, 1, 0);
    LLVMTypeRef fre = LLVMFunctionType(e->voidt, &e->i8p, 1, 0);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(e->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->ctx, f, "entry");
    LLVMBasicBlockRef mine = LLVMAppendBasicBlockInContext(e->ctx, f, "mine");
    LLVMBasicBlockRef other = LLVMAppendBasicBlockInContext(e->ctx, f, "other");
    LLVMValueRef slot = LLVMGetParam(f, 0), busy = LLVMGetParam(f, 1), x = LLVMGetParam(f, 2);
    LLVMPositionBuilderAtEnd(b, entry);
    if (acquire) {
        LLVMBasicBlockRef fill = LLVMAppendBasicBlockInContext(e->ctx, f, "fill");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->ctx, f, "done");
        LLVMValueRef old =
            LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpXchg, busy, LLVMConstInt(e->i32, 1, 0),
                               LLVMAtomicOrderingAcquire, 0);
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, old, LLVMConstInt(e->i32, 0, 0), ""), mine,
                        other);
        LLVMPositionBuilderAtEnd(b, mine);
        LLVMValueRef c = LLVMBuildLoad2(b, e->i8p, slot, "");
        LLVMBuildCondBr(b, LLVMBuildIsNull(b, c, ""), fill, done);
        LLVMPositionBuilderAtEnd(b, fill);
        LLVMValueRef m = LLVMBuildCall2(b, mty, declare(e, "malloc", mty), &x, 1, "");
        LLVMBuildStore(b, m, slot);
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMValueRef phi = LLVMBuildPhi(b, e->i8p, "");
        LLVMValueRef vals[2] = {c, m};
        LLVMBasicBlockRef from[2] = {mine, fill};
        LLVMAddIncoming(phi, vals, from, 2);
        LLVMBuildRet(b, phi);
        LLVMPositionBuilderAtEnd(b, other);
        LLVMBuildRet(b, LLVMBuildCall2(b, mty, declare(e, "malloc", mty), &x, 1, ""));
    } else {
        LLVMValueRef c = LLVMBuildLoad2(b, e->i8p, slot, "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, c, x, ""), mine, other);
        LLVMPositionBuilderAtEnd(b, mine);
        LLVMValueRef st = LLVMBuildStore(b, LLVMConstInt(e->i32, 0, 0), busy);
        LLVMSetOrdering(st, LLVMAtomicOrderingRelease);
        LLVMSetAlignment(st, 4);
        LLVMBuildRetVoid(b);
        LLVMPositionBuilderAtEnd(b, other);
        LLVMBuildCall2(b, fre, declare(e, "free", fre), &x, 1, "");
        LLVMBuildRetVoid(b);
    }
    LLVMDisposeBuilder(b);
    return f;
}

static LLVMValueRef internal_global(emitter *e, LLVMTypeRef t, const char *what, size_t n)
{
    char name[300];
    snprintf(name, sizeof(name), "%s.%s%zu", e->entry_name, what, n);
    LLVMValueRef g = LLVMAddGlobal(e->mod, t, name);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetInitializer(g, LLVMConstNull(t));
    return g;
}

/* `<entry>.ws.release` (TT_WS_RELEASE_SUFFIX): frees the kept buffers (no call may be running);
 * tt_kernel_unload calls it before unloading the kernel.  A library tvm-compile builds keeps them
 * for the life of the process, as TVM's runtime keeps its workspace pools. */
static void emit_ws_release(emitter *e)
{
    if (!e->ws_slots.len)
        return;
    char name[300];
    snprintf(name, sizeof(name), "%s%s", e->entry_name, TT_WS_RELEASE_SUFFIX);
    LLVMTypeRef vty = LLVMFunctionType(e->voidt, NULL, 0, 0);
    LLVMValueRef f = LLVMAddFunction(e->mod, name, vty);
    LLVMTypeRef fre = LLVMFunctionType(e->voidt, &e->i8p, 1, 0);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(e->ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(e->ctx, f, "entry"));
    for (size_t i = 0; i < e->ws_slots.len; i++) {
        LLVMValueRef p = LLVMBuildLoad2(b, e->i8p, e->ws_slots.data[i], "");
        LLVMBuildCall2(b, fre, declare(e, "free", fre), &p, 1, ""); /* free(NULL) is fine */
        LLVMBuildStore(b, LLVMConstNull(e->i8p), e->ws_slots.data[i]);
    }
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

LLVMValueRef tt__codegen_alloc(emitter *e, uint32_t buf)
{
    const tt_buffer *b = &e->p->bufs.data[buf];
    LLVMTypeRef t = mem_type(e, b->dtype);
    int64_t bytes = b->size * tt_dtype_bytes(b->dtype);
    /* Allocated once at function entry: the loop IR reuses a buffer across iterations. */
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(e->ctx);
    LLVMPositionBuilderBefore(ab, e->entry_term);
    LLVMValueRef p;
    if (bytes <= STACK_LIMIT) {
        p = LLVMBuildArrayAlloca(ab, t, LLVMConstInt(e->i64, (unsigned long long)b->size, 0),
                                 b->name);
        LLVMSetAlignment(p, 64);
    } else {
        LLVMValueRef size = LLVMConstInt(e->i64, (unsigned long long)bytes + 64, 0);
        tt__heap_buf h = {NULL, NULL, NULL};
        if (e->fn == e->entry_fn) {
            h.slot = internal_global(e, e->i8p, "ws", e->ws_slots.len);
            h.busy = internal_global(e, e->i32, "busy", e->ws_slots.len);
            if (TT_VEC_PUSH(&e->ws_slots, h.slot))
                e->status = TT_ERR_NOMEM;
            LLVMValueRef f = ws_function(e, true);
            LLVMValueRef args[3] = {h.slot, h.busy, size};
            h.raw = LLVMBuildCall2(ab, LLVMGlobalGetValueType(f), f, args, 3, "");
        } else {
            LLVMTypeRef fty = LLVMFunctionType(e->i8p, &e->i64, 1, 0);
            h.raw = LLVMBuildCall2(ab, fty, declare(e, "malloc", fty), &size, 1, "");
        }
        if (TT_VEC_PUSH(&e->frees, h))
            e->status = TT_ERR_NOMEM;
        LLVMValueRef raw = h.raw;
        p = LLVMBuildBitCast(ab, raw, LLVMPointerType(t, 0), b->name);
    }
    LLVMDisposeBuilder(ab);
    return p;
}

/* Frees the heap buffers the current function allocated: those from `base` on (the ones before
 * belong to the function an outlined parallel body came from). */
static void emit_frees(emitter *e, size_t base)
{
    LLVMTypeRef fty = LLVMFunctionType(e->voidt, &e->i8p, 1, 0);
    for (size_t i = base; i < e->frees.len; i++) {
        tt__heap_buf *h = &e->frees.data[i];
        if (h->slot) {
            LLVMValueRef f = ws_function(e, false);
            LLVMValueRef args[3] = {h->slot, h->busy, h->raw};
            LLVMBuildCall2(e->b, LLVMGlobalGetValueType(f), f, args, 3, "");
        } else
            LLVMBuildCall2(e->b, fty, declare(e, "free", fty), &h->raw, 1, "");
    }
    e->frees.len = base;
}

/* Starts function `fn`: an entry block (for allocations) followed by the body block. */
static void begin_function(emitter *e, LLVMValueRef fn)
{
    e->fn = fn;
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->ctx, fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, fn, "start");
    LLVMPositionBuilderAtEnd(e->b, entry);
    e->entry_term = LLVMBuildBr(e->b, body);
    LLVMPositionBuilderAtEnd(e->b, body);
}

/* Ends the current function with a call to a new internal function `name` of the `n` values
 * `args` (returning its `ret` value) and begins that one; its parameters go to `params`.  The
 * pointers among them are `noalias` parameters, so that to LLVM's alias analysis every buffer is
 * an identified object: BasicAA, which LLVM asks before the scoped-noalias metadata that already
 * keeps buffers apart, answers a query between two of them at once, where between two loaded
 * pointers (the kernel's arguments, a parallel body's captured buffers) it decomposed both
 * addresses first, for every pair MemorySSA, GVN and DSE asked about (docs/codegen.md, sixteenth
 * round).  It is inlined back at the end of the pipeline (`alwaysinline`). */
static LLVMValueRef call_body(emitter *e, const char *name, LLVMTypeRef ret, LLVMValueRef *args,
                              int n, LLVMValueRef *params)
{
    LLVMTypeRef types[TT_BODY_MAX_PARAMS];
    if (n > TT_BODY_MAX_PARAMS) { /* the build fails; params past the limit keep their values */
        e->status = TT_ERR_LIMIT;
        n = TT_BODY_MAX_PARAMS;
    }
    for (int i = 0; i < n; i++)
        types[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef fty = LLVMFunctionType(ret, types, (unsigned)n, 0);
    LLVMValueRef f = LLVMAddFunction(e->mod, name, fty);
    LLVMSetLinkage(f, LLVMInternalLinkage);
    unsigned inl = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->ctx, inl, 0));
    for (int i = 0; i < n; i++)
        if (LLVMGetTypeKind(types[i]) == LLVMPointerTypeKind)
            LLVMAddAttributeAtIndex(f, (unsigned)i + 1,
                                    LLVMCreateEnumAttribute(e->ctx, noalias, 0));
    LLVMValueRef r = LLVMBuildCall2(e->b, fty, f, args, (unsigned)n, "");
    if (LLVMGetTypeKind(ret) == LLVMVoidTypeKind)
        LLVMBuildRetVoid(e->b);
    else
        LLVMBuildRet(e->b, r);
    begin_function(e, f);
    for (int i = 0; i < n; i++)
        params[i] = LLVMGetParam(f, (unsigned)i);
    return f;
}

/* libgomp's static schedule: thread t runs [t*chunk, min((t+1)*chunk, extent)). */
static void emit_static_share(emitter *e, const tt_stmt *loop, size_t frees_base)
{
    LLVMTypeRef ity = LLVMFunctionType(e->i32, NULL, 0, 0);
    LLVMValueRef tid = LLVMBuildSExt(
        e->b, LLVMBuildCall2(e->b, ity, declare(e, "omp_get_thread_num", ity), NULL, 0, ""), e->i64,
        "");
    LLVMValueRef nt = LLVMBuildSExt(
        e->b, LLVMBuildCall2(e->b, ity, declare(e, "omp_get_num_threads", ity), NULL, 0, ""),
        e->i64, "");
    LLVMValueRef ext = LLVMConstInt(e->i64, (unsigned long long)loop->extent, 0);
    LLVMValueRef chunk = LLVMBuildSDiv(
        e->b, LLVMBuildAdd(e->b, ext, LLVMBuildSub(e->b, nt, LLVMConstInt(e->i64, 1, 0), ""), ""),
        nt, "");
    LLVMValueRef begin = LLVMBuildMul(e->b, tid, chunk, "");
    LLVMValueRef end = LLVMBuildAdd(e->b, begin, chunk, "");
    end = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, end, ext, ""), end, ext, "");
    tt__codegen_emit_serial(e, loop, begin, end);
    emit_frees(e, frees_base);
}

/* The pool's schedule (pool.h): the loop over the ranges tt_rt1_loop_next hands this thread,
 *
 *     while (tt_rt1_loop_next(loop, num, range)) for (i = range[0]; i < range[1]; i++) body
 *
 * with the body's buffers allocated once, before the first range, and freed after the last. */
static void emit_claimed_ranges(emitter *e, const tt_stmt *loop, LLVMValueRef handle,
                                LLVMValueRef num, size_t frees_base)
{
    LLVMTypeRef range_ty = LLVMArrayType(e->i64, 2);
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(e->ctx);
    LLVMPositionBuilderBefore(ab, e->entry_term);
    LLVMValueRef range = LLVMBuildAlloca(ab, range_ty, "range");
    LLVMDisposeBuilder(ab);
    LLVMTypeRef i64p = LLVMPointerType(e->i64, 0);
    LLVMTypeRef nargs[3] = {e->i8p, e->i32, i64p};
    LLVMTypeRef nty = LLVMFunctionType(e->i32, nargs, 3, 0);
    LLVMValueRef next_fn = declare(e, "tt_rt1_loop_next", nty);
    LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "take");
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "run");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "done");
    LLVMBuildBr(e->b, take);
    LLVMPositionBuilderAtEnd(e->b, take);
    LLVMValueRef first = LLVMBuildBitCast(e->b, range, i64p, "");
    LLVMValueRef args[3] = {LLVMBuildIntToPtr(e->b, handle, e->i8p, ""), num, first};
    LLVMValueRef got = LLVMBuildCall2(e->b, nty, next_fn, args, 3, "");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntNE, got, LLVMConstInt(e->i32, 0, 0), ""), run,
                    done);
    LLVMPositionBuilderAtEnd(e->b, run);
    LLVMValueRef begin = LLVMBuildLoad2(e->b, e->i64, first, "");
    LLVMValueRef second =
        LLVMBuildGEP2(e->b, e->i64, first, (LLVMValueRef[]){LLVMConstInt(e->i64, 1, 0)}, 1, "");
    LLVMValueRef end = LLVMBuildLoad2(e->b, e->i64, second, "");
    tt__codegen_emit_serial(e, loop, begin, end);
    LLVMBuildBr(e->b, take);
    LLVMPositionBuilderAtEnd(e->b, done);
    emit_frees(e, frees_base);
}

void tt__codegen_parallel(emitter *e, const tt_stmt *loop)
{
    size_t nv = e->p->pool.vars.len, nb = e->p->bufs.len;
    /* Everything bound now is captured in an array of i64 slots (pointers as integers). */
    int nslots = 0;
    for (size_t v = 0; v < nv; v++)
        nslots += e->vars[v] != NULL;
    for (size_t b = 0; b < nb; b++)
        nslots += e->bufs[b] != NULL;
    LLVMTypeRef arr = LLVMArrayType(e->i64, (unsigned)(nslots ? nslots : 1));
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(e->ctx);
    LLVMPositionBuilderBefore(ab, e->entry_term);
    LLVMValueRef slots = LLVMBuildAlloca(ab, arr, "captured");
    LLVMDisposeBuilder(ab);
    int k = 0;
    for (size_t v = 0; v < nv; v++)
        if (e->vars[v]) {
            LLVMValueRef idx[2] = {LLVMConstInt(e->i32, 0, 0),
                                   LLVMConstInt(e->i32, (unsigned)k++, 0)};
            LLVMBuildStore(e->b, e->vars[v], LLVMBuildGEP2(e->b, arr, slots, idx, 2, ""));
        }
    for (size_t b = 0; b < nb; b++)
        if (e->bufs[b]) {
            LLVMValueRef idx[2] = {LLVMConstInt(e->i32, 0, 0),
                                   LLVMConstInt(e->i32, (unsigned)k++, 0)};
            LLVMBuildStore(e->b, LLVMBuildPtrToInt(e->b, e->bufs[b], e->i64, ""),
                           LLVMBuildGEP2(e->b, arr, slots, idx, 2, ""));
        }
    /* The outlined body: void fn(i8 *captured) under libgomp, void fn(i8 *captured,
     * tt_rt1_loop *loop, i32 num) on the pool (pool.h). */
    char name[300];
    snprintf(name, sizeof(name), "%s.parallel.%d", e->entry_name, e->outlined++);
    LLVMTypeRef fparams[3] = {e->i8p, e->i8p, e->i32};
    LLVMTypeRef fty = LLVMFunctionType(e->voidt, fparams, e->own_pool ? 3 : 1, 0);
    LLVMValueRef fn = LLVMAddFunction(e->mod, name, fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    /* Save the caller's state. */
    LLVMValueRef saved_fn = e->fn, saved_term = e->entry_term;
    LLVMBasicBlockRef saved_bb = LLVMGetInsertBlock(e->b);
    LLVMValueRef *saved_vars = malloc(nv * sizeof(LLVMValueRef));
    LLVMValueRef *saved_bufs = malloc((nb ? nb : 1) * sizeof(LLVMValueRef));
    /* The captured values as loaded, then as the body's parameters (call_body), slot by slot. */
    LLVMValueRef *vals = malloc((size_t)(nslots + 2) * 2 * sizeof(LLVMValueRef));
    size_t saved_frees = e->frees.len;
    if (!saved_vars || !saved_bufs || !vals) {
        free(saved_vars);
        free(saved_bufs);
        free(vals);
        e->status = TT_ERR_NOMEM;
        return;
    }
    LLVMValueRef *params = vals + nslots + 2;
    memcpy(saved_vars, e->vars, nv * sizeof(LLVMValueRef));
    memcpy(saved_bufs, e->bufs, nb * sizeof(LLVMValueRef));
    /* Values of the caller are not values of the outlined function. */
    int saved_floor = e->vn.floor;
    tt__vn_open(&e->vn);
    e->vn.floor = e->vn.depth;
    begin_function(e, fn);
    LLVMValueRef in = LLVMBuildBitCast(e->b, LLVMGetParam(fn, 0), LLVMPointerType(arr, 0), "");
    k = 0;
    for (size_t v = 0; v < nv; v++)
        if (saved_vars[v]) {
            LLVMValueRef idx[2] = {LLVMConstInt(e->i32, 0, 0),
                                   LLVMConstInt(e->i32, (unsigned)k, 0)};
            vals[k++] = LLVMBuildLoad2(e->b, e->i64, LLVMBuildGEP2(e->b, arr, in, idx, 2, ""), "");
        }
    for (size_t b = 0; b < nb; b++)
        if (saved_bufs[b]) {
            LLVMValueRef idx[2] = {LLVMConstInt(e->i32, 0, 0),
                                   LLVMConstInt(e->i32, (unsigned)k, 0)};
            LLVMValueRef x =
                LLVMBuildLoad2(e->b, e->i64, LLVMBuildGEP2(e->b, arr, in, idx, 2, ""), "");
            vals[k++] = LLVMBuildIntToPtr(e->b, x, LLVMTypeOf(saved_bufs[b]), "");
        }
    /* The body proper, with the captured values as parameters (call_body), and on the pool the
     * loop's handle (as an integer: not one of the body's buffers) and the thread's number. */
    int nargs = nslots;
    if (e->own_pool) {
        vals[nargs++] = LLVMBuildPtrToInt(e->b, LLVMGetParam(fn, 1), e->i64, "");
        vals[nargs++] = LLVMGetParam(fn, 2);
    }
    char body_name[320];
    snprintf(body_name, sizeof(body_name), "%s.body", name);
    memcpy(params, vals, (size_t)nargs * sizeof(*params));
    call_body(e, body_name, e->voidt, vals, nargs, params);
    LLVMValueRef loop_handle = e->own_pool ? params[nslots] : NULL;
    LLVMValueRef thread_num = e->own_pool ? params[nslots + 1] : NULL;
    k = 0;
    for (size_t v = 0; v < nv; v++)
        if (saved_vars[v])
            e->vars[v] = params[k++];
    for (size_t b = 0; b < nb; b++)
        if (saved_bufs[b])
            e->bufs[b] = params[k++];
    free(vals);
    e->in_parallel = true;
    if (e->own_pool)
        emit_claimed_ranges(e, loop, loop_handle, thread_num, saved_frees);
    else
        emit_static_share(e, loop, saved_frees);
    e->in_parallel = false;
    LLVMBuildRetVoid(e->b);
    /* Back to the caller. */
    tt__vn_close(&e->vn);
    e->vn.floor = saved_floor;
    e->fn = saved_fn;
    e->entry_term = saved_term;
    e->frees.len = saved_frees;
    memcpy(e->vars, saved_vars, nv * sizeof(LLVMValueRef));
    memcpy(e->bufs, saved_bufs, nb * sizeof(LLVMValueRef));
    free(saved_vars);
    free(saved_bufs);
    LLVMPositionBuilderAtEnd(e->b, saved_bb);
    LLVMTypeRef fnp = LLVMPointerType(fty, 0);
    LLVMValueRef captured = LLVMBuildBitCast(e->b, slots, e->i8p, "");
    LLVMValueRef nthreads = LLVMConstInt(e->i32, (unsigned)e->num_threads, 0);
    if (e->own_pool) {
        LLVMTypeRef pargs[4] = {fnp, e->i8p, e->i64, e->i32};
        LLVMTypeRef pty = LLVMFunctionType(e->voidt, pargs, 4, 0);
        LLVMValueRef call_args[4] = {
            fn, captured, LLVMConstInt(e->i64, (unsigned long long)loop->extent, 0), nthreads};
        LLVMBuildCall2(e->b, pty, declare(e, "tt_rt1_parallel_for", pty), call_args, 4, "");
        return;
    }
    LLVMTypeRef gargs[4] = {fnp, e->i8p, e->i32, e->i32};
    LLVMTypeRef gty = LLVMFunctionType(e->voidt, gargs, 4, 0);
    LLVMValueRef call_args[4] = {fn, captured, nthreads, LLVMConstInt(e->i32, 0, 0)};
    LLVMBuildCall2(e->b, gty, declare(e, "GOMP_parallel", gty), call_args, 4, "");
}

/* ---- target machines ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char *host_triple, *host_cpu, *host_features;

static void init_llvm(void)
{
    LLVMInitializeAllTargetInfos();
    LLVMInitializeAllTargets();
    LLVMInitializeAllTargetMCs();
    LLVMInitializeAllAsmPrinters();
    /* Code generation options for the whole process (LLVM keeps them in globals), chosen for
     * these kernels: unrolled tiles are basic blocks of thousands of instructions, on which the
     * machine instruction schedulers (before and after register allocation) took half of code
     * generation; out-of-order x86 and ARM cores reorder them anyway, and the best tuned kernels
     * ran at the same speed without them (docs/codegen.md).  The unroll threshold is O3's
     * (300): the textual kernel pipeline below cannot pass O3's level to its full unroller.  The
     * inliner, which puts each body back into its caller at the end of the pipeline (call_body),
     * would turn the body's `noalias` parameters into scopes that every access already has. */
    static const char *const args[] = {"tvm-tune", "-enable-misched=false",
                                       "-post-RA-scheduler=false", "-unroll-threshold-default=300",
                                       "-enable-noalias-to-md-conversion=false"};
    LLVMParseCommandLineOptions((int)(sizeof(args) / sizeof(args[0])), args, NULL);
    host_triple = LLVMGetDefaultTargetTriple();
    host_cpu = LLVMGetHostCPUName();
    host_features = LLVMGetHostCPUFeatures();
}

void tt_codegen_host(const char **triple, const char **cpu, const char **features)
{
    pthread_once(&init_once, init_llvm);
    *triple = host_triple;
    *cpu = host_cpu;
    *features = host_features;
}

void tt_codegen_vector_isa(const tt_target *t, tt_vector_isa *out)
{
    const char *triple, *cpu, *features;
    tt_codegen_host(&triple, &cpu, &features);
    tt_target_vector_isa(t, features, out);
}

static tt_status make_machine(const tt_target *t, int opt_level, LLVMTargetMachineRef *out,
                              tt_errbuf *err)
{
    pthread_once(&init_once, init_llvm);
    if (strcmp(t->kind, "llvm") && strcmp(t->kind, "c"))
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "the LLVM code generator does not handle target kind '%s'", t->kind);
    bool host = !t->triple[0];
    const char *triple = host ? host_triple : t->triple;
    /* The host's features come from the CPU itself: this LLVM may not know the CPU's name. */
    const char *cpu = t->cpu[0] ? t->cpu : host ? host_cpu : "generic";
    char features[4096];
    snprintf(features, sizeof(features), "%s%s%s", host ? host_features : "",
             host && t->attrs[0] ? "," : "", t->attrs);
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        tt_status s = tt_err(err, TT_ERR_UNSUPPORTED, "target triple '%s': %s", triple,
                             msg ? msg : "unknown");
        LLVMDisposeMessage(msg);
        return s;
    }
    LLVMCodeGenOptLevel lvl = opt_level >= 3   ? LLVMCodeGenLevelAggressive
                              : opt_level == 2 ? LLVMCodeGenLevelDefault
                              : opt_level == 1 ? LLVMCodeGenLevelLess
                                               : LLVMCodeGenLevelNone;
    *out = LLVMCreateTargetMachine(target, triple, cpu, features, lvl, LLVMRelocPIC,
                                   LLVMCodeModelDefault);
    if (!*out)
        return tt_err(err, TT_ERR_UNSUPPORTED, "cannot create a target machine for %s (cpu %s)",
                      triple, cpu);
    return TT_OK;
}

/* int32_t typed(T0 *p0, ...): the parameters as pointers, packed into the kernel's argument
 * array (every data pointer has one ABI, so the element types need not appear). */
static void add_typed_entry(emitter *e, LLVMValueRef kernel, const tt_program *p)
{
    int n = p->nparams;
    LLVMTypeRef params[64];
    for (int i = 0; i < n && i < 64; i++)
        params[i] = e->i8p;
    LLVMTypeRef fty = LLVMFunctionType(e->i32, params, (unsigned)n, 0);
    LLVMValueRef fn = LLVMAddFunction(e->mod, e->opt.typed_entry, fty);
    LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(e->b, bb);
    LLVMTypeRef arrt = LLVMArrayType(e->i8p, (unsigned)(n ? n : 1));
    LLVMValueRef arr = LLVMBuildAlloca(e->b, arrt, "args");
    for (int i = 0; i < n; i++) {
        LLVMValueRef idx[2] = {LLVMConstInt(e->i64, 0, 0), LLVMConstInt(e->i64, (unsigned)i, 0)};
        LLVMBuildStore(e->b, LLVMGetParam(fn, (unsigned)i),
                       LLVMBuildGEP2(e->b, arrt, arr, idx, 2, ""));
    }
    LLVMValueRef zero[2] = {LLVMConstInt(e->i64, 0, 0), LLVMConstInt(e->i64, 0, 0)};
    LLVMValueRef first = LLVMBuildGEP2(e->b, arrt, arr, zero, 2, "");
    LLVMTypeRef kty = LLVMFunctionType(e->i32, (LLVMTypeRef[]){LLVMPointerType(e->i8p, 0)}, 1, 0);
    LLVMValueRef rc = LLVMBuildCall2(e->b, kty, kernel, &first, 1, "");
    LLVMBuildRet(e->b, rc);
    LLVMSetLinkage(kernel, LLVMInternalLinkage);
}

/* O3's pipeline (LLVM 14, `opt -passes='default<O3>' -print-pipeline-passes`) without what
 * these kernels do not need: the inliner and interprocedural passes (a kernel is one function and
 * its outlined parallel bodies, called through libgomp), coroutines, and the loop and SLP
 * vectorisers with loop distribution and load elimination (vectors are explicit: the schedule's
 * `vectorize`), which took half of the optimisation time in loop access analysis.  O3's order is
 * kept: the register tile is promoted to registers only when its small loops are fully unrolled
 * before SROA runs again.  Also left out, measured on random candidates and tuned kernels:
 *   - O3's second, late unroller with the InstCombine and LICM after it: 8-15% of compile time.
 *     Its partial, runtime, upper-bound unrolling and peeling multiplied the loops the schedule
 *     left rolled by up to 8x and the best kernels ran no faster for it; what was left, full
 *     unrolling of loops that earlier passes had made small, changed none of the top configs of
 *     an AVX2 search (150) or of eight tuned AVX-512 matmul and convolution rows (40), and the
 *     tuned depthwise kernels it changed on AVX-512 ran at the same speed (docs/codegen.md,
 *     eighteenth and nineteenth rounds).  Unrolling is the schedule's (`unroll`,
 *     auto_unroll_max_step) and the early full unroller's;
 *   - loop-idiom (10-15% of optimisation; nothing to turn into memset once tiles are unrolled);
 *   - indvars (a fifth to a third of optimisation on convolutions): the padding guards it once
 *     folded are decided while emitting (peeled loops, guards decided on the bounds of the loops
 *     around them), and the tuned kernels ran at the same speed without it (docs/codegen.md).
 *   - the two InstCombine runs of the late function pipeline before that unroller (O3 has
 *     eight in all; InstCombine was 30% of optimisation): without them the machine code was byte
 *     for byte the same on 64 random candidates and 59 tuned kernels, and optimisation 9% shorter
 *     (docs/codegen.md, eleventh round);
 *   - non-trivial loop unswitching (a loop cloned for each value of an invariant condition
 *     inside it): padding guards are hoisted while emitting, and what it cloned of the guards
 *     left inside made padded convolutions 13% slower to compile (C2: 37 ms of one candidate's
 *     loop strength reduction went through a nest cloned three times); 165 tuned kernels ran at
 *     the same speed without it, two depthwise layers 1.1-1.4x faster (thirteenth round).
 * The jump threading after full unrolling stays: without it padded convolutions ran 1.4-1.6x
 * slower (their bounds checks fold only then).  `always-inline` at the end puts each function
 * body back into its caller (call_body). */
#define TT_SIMPLIFYCFG                                                                             \
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;"              \
    "no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts>"
static const char kernel_pipeline[] =
    "function<eager-inv>(lower-expect," TT_SIMPLIFYCFG ",sroa,early-cse<>),ipsccp,globalopt,"
    "function(mem2reg),function<eager-inv>(instcombine," TT_SIMPLIFYCFG "),"
    "function<eager-inv>(sroa,early-cse<memssa>,speculative-execution,jump-threading,"
    "correlated-propagation," TT_SIMPLIFYCFG
    ",instcombine,aggressive-instcombine,tailcallelim," TT_SIMPLIFYCFG
    ",reassociate,loop-mssa(loop-instsimplify,loop-simplifycfg,licm,loop-rotate,"
    "licm,simple-loop-unswitch<no-nontrivial;trivial>)," TT_SIMPLIFYCFG ",instcombine,"
    "loop(loop-deletion,loop-unroll-full),sroa,"
    "mldst-motion<no-split-footer-bb>,gvn<>,sccp,bdce,instcombine,jump-threading,"
    "correlated-propagation,adce,memcpyopt,dse,loop-mssa(licm)," TT_SIMPLIFYCFG ",instcombine),"
    "globaldce,function<eager-inv>(float2int,lower-constant-intrinsics,"
    "loop(loop-rotate,loop-deletion)," TT_SIMPLIFYCFG ",vector-combine,"
    "alignment-from-assumptions,loop-sink,"
    "instsimplify,div-rem-pairs," TT_SIMPLIFYCFG "),always-inline,globaldce,constmerge";

/* Builds the module of `p` into e (caller disposes ctx). */
static tt_status build_module(emitter *e, const tt_program *p, const tt_target *t,
                              const char *entry, const tt_codegen_options *opt,
                              LLVMTargetMachineRef tm, tt_errbuf *err)
{
    double t0 = tt_clock_monotonic();
    memset(e, 0, sizeof(*e));
    e->copies = 1;
    e->opt = opt ? *opt : (tt_codegen_options){3, 64, 64, NULL, false};
    if (e->opt.max_vector <= 0 || e->opt.max_vector > 256)
        e->opt.max_vector = 64;
    if (e->opt.unroll_limit <= 0)
        e->opt.unroll_limit = 64;
    e->p = p;
    e->entry_name = entry;
    e->num_threads = t->num_cores;
    const char *host_tr, *host_cpu_name, *host_feat;
    tt_codegen_host(&host_tr, &host_cpu_name, &host_feat);
    e->own_pool = !t->triple[0] || !strcmp(t->triple, host_tr);
    tt_target_vector_isa(t, host_feat, &e->isa);
    const char *tr = t->triple[0] ? t->triple : host_tr;
    e->x86 = !strncmp(tr, "x86_64", 6) || !strncmp(tr, "i386", 4) || !strncmp(tr, "i686", 4);
    e->ctx = LLVMContextCreate();
    e->mod = LLVMModuleCreateWithNameInContext(entry, e->ctx);
    e->b = LLVMCreateBuilderInContext(e->ctx);
    e->i1 = LLVMInt1TypeInContext(e->ctx);
    e->i8 = LLVMInt8TypeInContext(e->ctx);
    e->i32 = LLVMInt32TypeInContext(e->ctx);
    e->i64 = LLVMInt64TypeInContext(e->ctx);
    e->f32 = LLVMFloatTypeInContext(e->ctx);
    e->f64 = LLVMDoubleTypeInContext(e->ctx);
    e->vec_base = LLVMConstInt(e->i64, 0, 0);
    e->i8p = LLVMPointerType(e->i8, 0);
    e->voidt = LLVMVoidTypeInContext(e->ctx);
    e->vars = calloc(p->pool.vars.len, sizeof(LLVMValueRef));
    e->bufs = calloc(p->bufs.len ? p->bufs.len : 1, sizeof(LLVMValueRef));
    e->buf_fn = calloc(p->bufs.len ? p->bufs.len : 1, sizeof(LLVMValueRef));
    if (!e->vars || !e->bufs || !e->buf_fn)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(e->mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(e->mod, dl);
    LLVMDisposeTargetData(dl);
    /* int32_t entry(void *const *args) */
    LLVMTypeRef argt = LLVMPointerType(e->i8p, 0);
    LLVMTypeRef fty = LLVMFunctionType(e->i32, &argt, 1, 0);
    LLVMValueRef fn = LLVMAddFunction(e->mod, entry, fty);
    e->entry_fn = fn;
    begin_function(e, fn);
    LLVMValueRef args = LLVMGetParam(fn, 0);
    LLVMValueRef raws[TT_BODY_MAX_PARAMS], params[TT_BODY_MAX_PARAMS];
    size_t raw_buf[TT_BODY_MAX_PARAMS];
    int nraw = 0;
    for (size_t b = 0; b < p->bufs.len; b++) {
        const tt_buffer *bf = &p->bufs.data[b];
        if (bf->param < 0)
            continue;
        if (nraw == TT_BODY_MAX_PARAMS) {
            e->status = TT_ERR_LIMIT;
            break;
        }
        LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned long long)bf->param, 0);
        raw_buf[nraw] = b;
        raws[nraw++] = LLVMBuildBitCast(
            e->b,
            LLVMBuildLoad2(e->b, e->i8p, LLVMBuildGEP2(e->b, e->i8p, args, &idx, 1, ""), bf->name),
            LLVMPointerType(mem_type(e, bf->dtype), 0), "");
    }
    /* The body proper, with the buffers as parameters (call_body). */
    char body_name[300];
    snprintf(body_name, sizeof(body_name), "%s.body", entry);
    e->entry_fn = call_body(e, body_name, e->i32, raws, nraw, params);
    for (int i = 0; i < nraw; i++)
        e->bufs[raw_buf[i]] = params[i];
    tt__codegen_emit_body(e, p->root);
    emit_frees(e, 0);
    LLVMBuildRet(e->b, LLVMConstInt(e->i32, 0, 0));
    emit_ws_release(e);
    if (e->opt.typed_entry && e->opt.typed_entry[0])
        add_typed_entry(e, fn, p);
    e->stats.emit_s = tt_clock_monotonic() - t0;
    for (LLVMValueRef f = LLVMGetFirstFunction(e->mod); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
                e->stats.emitted_instructions++;
    if (e->status)
        return tt_err(err, e->status, "code generation failed: %s", tt_strerror(e->status));
    char *msg = NULL;
    if (LLVMVerifyModule(e->mod, LLVMReturnStatusAction, &msg)) {
        tt_status s = tt_err(err, TT_ERR_RUNTIME,
                             "generated LLVM IR is invalid (a code generator bug): %.300s", msg);
        LLVMDisposeMessage(msg);
        return s;
    }
    LLVMDisposeMessage(msg);
    if (e->opt.opt_level > 0) {
        t0 = tt_clock_monotonic();
        char pipeline[32];
        snprintf(pipeline, sizeof(pipeline), "default<O%d>",
                 e->opt.opt_level > 3 ? 3 : e->opt.opt_level);
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMErrorRef perr =
            LLVMRunPasses(e->mod, e->opt.opt_level >= 3 ? kernel_pipeline : pipeline, tm, po);
        LLVMDisposePassBuilderOptions(po);
        if (perr) {
            char *m = LLVMGetErrorMessage(perr);
            tt_status s = tt_err(err, TT_ERR_RUNTIME, "LLVM passes: %s", m);
            LLVMDisposeErrorMessage(m);
            return s;
        }
        e->stats.opt_s = tt_clock_monotonic() - t0;
    }
    return TT_OK;
}

static void free_emitter(emitter *e)
{
    if (e->b)
        LLVMDisposeBuilder(e->b);
    if (e->mod)
        LLVMDisposeModule(e->mod);
    if (e->ctx)
        LLVMContextDispose(e->ctx);
    free(e->vars);
    free(e->bufs);
    free(e->buf_fn);
    TT_VEC_FREE(&e->frees);
    TT_VEC_FREE(&e->ws_slots);
    tt__vn_free(&e->vn);
    free(e->md_scopes);
    free(e->md_scope);
    free(e->md_noalias);
}

/* Emits the object of module e to `obj`. */
static tt_status write_object(emitter *e, LLVMTargetMachineRef tm, const char *obj, tt_errbuf *err)
{
    double t0 = tt_clock_monotonic();
    LLVMMemoryBufferRef buf;
    char *msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, e->mod, LLVMObjectFile, &msg, &buf)) {
        tt_status s = tt_err(err, TT_ERR_RUNTIME, "LLVM code emission: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    tt_status s = TT_OK;
    FILE *f = fopen(obj, "wb");
    size_t n = LLVMGetBufferSize(buf);
    if (!f || fwrite(LLVMGetBufferStart(buf), 1, n, f) != n)
        s = tt_err(err, TT_ERR_IO, "cannot write %s", obj);
    if (f && fclose(f) && !s)
        s = tt_err(err, TT_ERR_IO, "cannot write %s", obj);
    LLVMDisposeMemoryBuffer(buf);
    e->stats.object_s = tt_clock_monotonic() - t0;
    return s;
}

tt_status tt_codegen_llvm_object(const tt_program *p, const tt_target *t, const char *entry,
                                 const char *obj_path, const tt_codegen_options *opt,
                                 tt_codegen_stats *stats, tt_errbuf *err)
{
    LLVMTargetMachineRef tm;
    tt_status s = make_machine(t, opt ? opt->opt_level : 3, &tm, err);
    if (s)
        return s;
    emitter e;
    s = build_module(&e, p, t, entry, opt, tm, err);
    if (!s)
        s = write_object(&e, tm, obj_path, err);
    if (stats)
        *stats = e.stats;
    free_emitter(&e);
    LLVMDisposeTargetMachine(tm);
    return s;
}

tt_status tt_codegen_llvm(const tt_program *p, const tt_target *t, const char *entry,
                          const char *so_path, const tt_codegen_options *opt,
                          tt_codegen_stats *stats, tt_errbuf *err)
{
    if (opt && opt->object_only)
        return tt_codegen_llvm_object(p, t, entry, so_path, opt, stats, err);
    char obj[4096];
    snprintf(obj, sizeof(obj), "%s.o", so_path);
    tt_codegen_stats st = {0};
    tt_status s = tt_codegen_llvm_object(p, t, entry, obj, opt, &st, err);
    if (!s) {
        double t0 = tt_clock_monotonic();
        /* Host kernels depend on this machine's libgomp and libm by name. */
        const char *host, *cpu, *features;
        tt_codegen_host(&host, &cpu, &features);
        bool on_host = !t->triple[0] || !strcmp(t->triple, host);
        const char *objs[1] = {obj};
        s = tt_codegen_link_shared(objs, 1, so_path, on_host, NULL, 0, err);
        st.link_s = tt_clock_monotonic() - t0;
    }
    remove(obj);
    if (stats)
        *stats = st;
    return s;
}

/* The module of `p` as text: LLVM IR, or the target's assembly. */
static tt_status module_text(const tt_program *p, const tt_target *t, const char *entry,
                             const tt_codegen_options *opt, bool assembly, char **out,
                             tt_errbuf *err)
{
    *out = NULL;
    LLVMTargetMachineRef tm;
    tt_status s = make_machine(t, opt ? opt->opt_level : 3, &tm, err);
    if (s)
        return s;
    emitter e;
    s = build_module(&e, p, t, entry, opt, tm, err);
    if (!s && !assembly) {
        char *text = LLVMPrintModuleToString(e.mod);
        *out = text ? strdup(text) : NULL;
        LLVMDisposeMessage(text);
    } else if (!s) {
        LLVMMemoryBufferRef buf;
        char *msg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, e.mod, LLVMAssemblyFile, &msg, &buf)) {
            s = tt_err(err, TT_ERR_RUNTIME, "LLVM code emission: %s", msg ? msg : "?");
        } else {
            size_t n = LLVMGetBufferSize(buf);
            if ((*out = malloc(n + 1))) {
                memcpy(*out, LLVMGetBufferStart(buf), n);
                (*out)[n] = 0;
            }
            LLVMDisposeMemoryBuffer(buf);
        }
        LLVMDisposeMessage(msg);
    }
    if (!s && !*out)
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    free_emitter(&e);
    LLVMDisposeTargetMachine(tm);
    return s;
}

tt_status tt_codegen_llvm_ir(const tt_program *p, const tt_target *t, const char *entry,
                             const tt_codegen_options *opt, char **ir, tt_errbuf *err)
{
    return module_text(p, t, entry, opt, false, ir, err);
}

tt_status tt_codegen_llvm_asm(const tt_program *p, const tt_target *t, const char *entry,
                              const tt_codegen_options *opt, char **text, tt_errbuf *err)
{
    return module_text(p, t, entry, opt, true, text, err);
}
