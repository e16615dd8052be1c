/* Private to codegen/: the emitter shared by llvm_emit.c and llvm_module.c. */
#ifndef TT_CODEGEN_CODEGEN_INT_H
#define TT_CODEGEN_CODEGEN_INT_H

#include <llvm-c/Core.h>

#include "codegen.h"

/* Value numbering while emitting (llvm_vn.c). */
#define TT_VN_MAX_DEPTH    256
#define TT_EMIT_MAX_RANGES 32
#define TT_EMIT_MAX_KNOWN  16
#define TT_EMIT_MAX_LANES  256 /* widest vector (tt_codegen_options.max_vector) */
#define TT_BODY_MAX_PARAMS 256 /* values a function body takes from its caller (llvm_module.c) */
typedef struct tt__vn_entry {
    int op;         /* an emitter-defined operation code */
    uint16_t depth; /* region it was built in */
    uint32_t region;
    LLVMValueRef a, b, c; /* operands (NULL where unused) */
    LLVMValueRef v;       /* the result; NULL = empty slot */
} tt__vn_entry;

typedef struct tt__vn {
    tt__vn_entry *table; /* open addressing, capacity a power of two */
    size_t cap, used;
    int depth, floor; /* open regions; entries below `floor` belong to another function */
    uint32_t next_region;
    uint32_t stack[TT_VN_MAX_DEPTH];
} tt__vn;

/* The value of `op` on (a, b, c) built earlier in a region still open, or NULL. */
LLVMValueRef tt__vn_find(const tt__vn *vn, int op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* Remembers v = op(a, b, c) for the innermost open region (constants are not kept). */
void tt__vn_add(tt__vn *vn, int op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, LLVMValueRef v);
/* A region whose values do not dominate what is emitted after it: a loop body, a branch arm. */
void tt__vn_open(tt__vn *vn);
void tt__vn_close(tt__vn *vn);
void tt__vn_free(tt__vn *vn);

/* A heap buffer of the function being emitted: `slot` and `busy` (internal globals) when it is the
 * kernel's own, kept between calls (tt__codegen_alloc). */
typedef struct tt__heap_buf {
    LLVMValueRef raw, slot, busy;
} tt__heap_buf;

struct tt__promo; /* llvm_promote.c */

typedef struct emitter {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;               /* function being emitted */
    LLVMValueRef entry_term;       /* terminator of its entry block: allocations go before it */
    TT_VEC(tt__heap_buf) frees;    /* heap buffers of this function, released before it returns */
    LLVMValueRef entry_fn;         /* the kernel's entry (not an outlined parallel body) */
    TT_VEC(LLVMValueRef) ws_slots; /* the kernel's kept heap buffers (tt__codegen_alloc) */
    const tt_program *p;
    const char *entry_name;
    LLVMValueRef *vars;   /* current value of each variable (NULL = not bound) */
    LLVMValueRef *bufs;   /* element pointer of each live buffer */
    LLVMValueRef *buf_fn; /* the function each local buffer was allocated in */
    LLVMTypeRef i1, i8, i32, i64, f32, f64, i8p, voidt;
    int lanes; /* > 0 inside an explicitly vectorised loop */
    /* The target's vector ISA, and whether it is x86 (whose reciprocal estimates emit_recip uses).
     */
    tt_vector_isa isa;
    bool x86;
    uint32_t vec_var;
    LLVMValueRef vec_base;  /* the vector variable's lane 0: 0, or a strided loop's counter */
    LLVMValueRef lane_mask; /* while emitting a guarded side (masked_expr_select): the lanes
                             * whose loads may read memory; NULL otherwise */
    int auto_unroll;        /* auto_unroll_max_step in effect */
    /* A select known to take its first branch (inside a padded update's guard): emitted as that
     * branch.  0 = none. */
    uint32_t taken_select;
    /* Terms of padded updates' guards (conjuncts of `c1 && c2 && ...`) known to hold where code is
     * being emitted: a loop whose updates all share them is emitted behind one branch on them
     * (emit_for), and inside it they are emitted as true. */
    uint32_t known[TT_EMIT_MAX_KNOWN];
    int nknown;
    bool in_parallel;
    bool in_interior; /* inside a loop emitted for its interior and its border (emit_interior) */
    int num_threads;  /* 0 = the pool's size */
    /* Host kernels call our pool (pool.h), cross-compiled ones the device's libgomp. */
    bool own_pool;
    int outlined; /* counter for names */
    tt_codegen_options opt;
    tt_codegen_stats stats;
    tt_status status;
    tt__vn vn;
    /* Alias scopes (scoped-noalias metadata) of memory accesses, one per buffer: its scope and
     * the list of every other buffer's, built on first use (set_access in llvm_emit.c). */
    unsigned md_scope_kind, md_noalias_kind;
    LLVMMetadataRef md_domain;
    LLVMMetadataRef *md_scopes; /* per buffer, NULL until built */
    LLVMValueRef *md_scope, *md_noalias;
    LLVMValueRef md_no_unroll; /* loop ID with llvm.loop.unroll.disable, NULL until built */
    /* The bounds of the variables of the rolled loops being emitted, innermost last (a loop over
     * its whole range, or part of it: the middle of a loop peeled for its padding, emit_peeled):
     * comparisons of index expressions are decided on them where they can be.  A nest deeper
     * than the stack leaves its inner loops without bounds (nothing decided there). */
    struct {
        uint32_t var;
        int64_t lo, hi;
    } ranges[TT_EMIT_MAX_RANGES];
    int nranges;
    int npeeled; /* loops peeled around the code being emitted */
    /* How often the code being emitted is emitted: the product of the unrolled loops', vector
     * pieces' and peeled loops' copies around it (emit_peeled's code budget). */
    int64_t copies;
    /* The accumulator tile kept in SSA values across the rolled loop being emitted, NULL when
     * none (llvm_promote.c). */
    struct tt__promo *promo;
} emitter;

void tt__codegen_emit_body(emitter *e, tt_sid root);
/* The loops inside a statement (a rolled loop's body), outermost first. */
#define TT_EMIT_MAX_INNER 64
typedef struct {
    uint32_t var[TT_EMIT_MAX_INNER];
    int64_t extent[TT_EMIT_MAX_INNER];
    int n;
    bool ok; /* false: too many to tell */
} tt__inner_loops;
void tt__codegen_collect_loops(emitter *e, tt_sid id, tt__inner_loops *in);
/* Integer expression `id` emitted where the builder is (llvm_emit.c). */
LLVMValueRef tt__codegen_emit_index(emitter *e, tt_eid id);
/* At the top of a rolled loop's body: prefetches of the next weight panel (llvm_prefetch.c). */
void tt__codegen_prefetch_panel(emitter *e, const tt_stmt *loop);

/* How emit_loop emits loop `s`, given the auto-unroll step in effect there and whether it is
 * inside a vector loop (llvm_emit.c). */
typedef enum {
    TT__LOOP_UNIT,        /* extent 1: the body, the variable 0 */
    TT__LOOP_PARALLEL,    /* outlined, run on every thread */
    TT__LOOP_VECTOR,      /* one vector of `extent` lanes */
    TT__LOOP_LONG_VECTOR, /* a rolled loop over vectors */
    TT__LOOP_UNROLLED,    /* the body once per iteration, the variable a constant in each */
    TT__LOOP_ROLLED       /* a loop (or peeled: first, middle, last) */
} tt__loop_form;
tt__loop_form tt__codegen_loop_form(emitter *e, const tt_stmt *s, int auto_unroll, bool in_vector);
/* The lanes of each vector a TT__LOOP_VECTOR loop of `extent` lanes is emitted as: the extent if a
 * power of two, else the largest power of two dividing it if at least TT_VECTOR_MIN_PIECE.  LLVM
 * 14 legalises other widths slowly: a depthwise candidate's <48 x float> code took 223 ms in
 * code generation, 50 ms as <64 x float>. */
#define TT_VECTOR_MIN_PIECE 4
int tt__codegen_vector_piece(int64_t extent);
bool tt__codegen_contains_parallel(emitter *e, tt_sid id);
/* Alignment and alias scope of a load or store of buffer `buf`. */
void tt__codegen_set_access(emitter *e, LLVMValueRef inst, uint32_t buf);

/* Accumulators in SSA values (llvm_promote.c).  A float buffer stored inside a rolled loop, whose
 * every access there is at an index that the loop does not change (the outer loops' variables
 * with the same coefficients everywhere, plus constants of unrolled loops and lane 0 of a vector
 * loop), is read and written as values while the loop is emitted: loaded before it on first use,
 * carried through every rolled loop inside by phis and through guarded code by phis at the
 * join, stored once after it. */

/* Called at the top of a rolled loop with constant bounds (the builder at the end of its
 * preheader, before the branch to `head`): begins promoting a buffer if one qualifies; true if
 * this loop is now the promotion's root. */
bool tt__promo_try(emitter *e, const tt_stmt *loop, LLVMBasicBlockRef head);
/* A rolled loop inside the root (its preheader is the current block) and its end (the builder
 * at the start of its exit block; `latch` branches back to `head`).  At the root's end the
 * written values are stored. */
void tt__promo_loop_begin(emitter *e, LLVMBasicBlockRef head);
void tt__promo_loop_end(emitter *e, LLVMBasicBlockRef latch);
/* Code under a branch inside the root: `arm_end` and `other` (the block that skips it) meet at the
 * current block, where the values written under the branch get phis. */
void tt__promo_arm_begin(emitter *e);
void tt__promo_arm_end(emitter *e, LLVMBasicBlockRef arm_end, LLVMBasicBlockRef other);
/* Is this a load or store of the promoted buffer? */
bool tt__promo_buffer(const emitter *e, uint32_t buf);
/* The value of the promoted buffer at `index` (the loop IR's index expression: lanes of the vector
 * loop being emitted where it moves by one element per lane), and a new one. */
LLVMValueRef tt__promo_read(emitter *e, tt_eid index);
void tt__promo_write(emitter *e, tt_eid index, LLVMValueRef v);
void tt__codegen_emit_serial(emitter *e, const tt_stmt *loop, LLVMValueRef begin, LLVMValueRef end);
void tt__codegen_parallel(emitter *e, const tt_stmt *loop);
LLVMValueRef tt__codegen_alloc(emitter *e, uint32_t buf);

#endif
