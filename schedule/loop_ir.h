/* Loop IR: the lowered program.  For-loops with kinds (serial, parallel, vectorized, unrolled,
 * GPU-bound), buffer stores of flat indices, allocations, conditions.  Produced by tt_lower(),
 * run by the interpreter, read by the feature extractor and both code generators.
 *
 * Statements refer to each other by 32-bit ids (0 = none); expressions live in the program's own
 * pool, where LOAD nodes name buffers.  A program is immutable once lowered; it may be read from
 * many threads. */
#ifndef TT_SCHEDULE_LOOP_IR_H
#define TT_SCHEDULE_LOOP_IR_H

#include "layout.h"
#include "state.h"

typedef enum {
    TT_STMT_NONE,
    TT_STMT_FOR,   /* var in [0, extent): body */
    TT_STMT_SEQ,   /* items[first .. first+n) */
    TT_STMT_STORE, /* buf[index] = value */
    TT_STMT_ALLOC, /* buf is live inside body */
    TT_STMT_IF,    /* if (cond) body else orelse */
} tt_stmt_kind;

typedef uint32_t tt_sid;

typedef struct tt_stmt {
    tt_stmt_kind kind;
    tt_ann ann;              /* FOR: loop kind (TT_ANN_NONE = serial) */
    uint32_t var;            /* FOR */
    int64_t extent;          /* FOR */
    int32_t unroll_max_step; /* FOR: auto_unroll_max_step pragma on this loop, 0 = none */
    tt_sid body, orelse;     /* FOR, ALLOC, IF */
    uint32_t buf;            /* STORE, ALLOC */
    tt_eid index, value;     /* STORE */
    tt_eid cond;             /* IF */
    uint32_t first, n;       /* SEQ */
    /* Double buffering (lower.c): on a FOR, its iterations fetch the next iteration's shared
     * tiles while reading the current ones, so a GPU ends each iteration with a barrier; on a
     * SEQ (the FOR body's first statement), that fetch: work-items cooperate in it, and no
     * barrier fences it.  A sequential reader ignores both. */
    bool prefetch;
} tt_stmt;

typedef struct tt_buffer {
    const char *name;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    int64_t strides[TT_MAX_DIMS];
    int64_t size;   /* elements, including storage_align padding */
    char scope[16]; /* "global", "shared", "local" */
    int param;      /* position in the function's parameters, or -1 for a local buffer */
    /* A constant input passed packed (LR step): shape stays the logical one, `size` is the
     * packed buffer's and indices follow the layout (layout.h).  nparts 0 otherwise. */
    tt_layout layout;
} tt_buffer;

typedef struct tt_program {
    tt_expr_pool pool;
    TT_VEC(tt_stmt) stmts; /* stmts.data[0] unused */
    TT_VEC(tt_sid) items;
    TT_VEC(tt_buffer) bufs;
    tt_sid root;
    int nparams, ninputs; /* parameters: buffers with param >= 0; inputs first, then outputs */
    char *name;
} tt_program;

/* Lowers a scheduled state: bound inference (regions of compute_at stages), inlining,
 * simplification, guards for non-divisible splits, allocation of cache and intermediate stages.
 * Returns TT_ERR_LOWER with the reason when the schedule cannot be lowered (e.g. a stage computed
 * at a consumer that does not cover all of its readers). */
tt_status tt_lower(const tt_state *st, tt_program **out, tt_errbuf *err);
void tt_program_free(tt_program *p);

/* The buffers tt_lower would allocate for `st` (shapes, strides, scopes, sizes: double buffers
 * and storage_align included) and no statements (root 0): a look at a schedule's memory for a
 * seventh of a lowering (steps 1 to 3 and no emission: 27 us against 190 us on matmul 1024's GPU
 * samples, and 295 us with the OpenCL emission that judges them whole).  tt_lower's virtual-thread
 * injection may still give a buffer copies, never fewer elements, so what this counts is a lower
 * bound: the GPU search rejects a tile beyond local memory by it (evolution.c).  Errors as
 * tt_lower's. */
tt_status tt_lower_buffers(const tt_state *st, tt_program **out, tt_errbuf *err);

/* Bytes of the buffers of `scope` ("shared", "local", "global") in `p`. */
int64_t tt_program_scope_bytes(const tt_program *p, const char *scope);
/* The same of tt_lower_buffers(st): a lower bound on what st's kernel takes; -1 when st does not
 * lower. */
int64_t tt_lower_scope_bytes(const tt_state *st, const char *scope);

/* The program that packs constant input `param` of `prog` (a parameter with a layout, from the
 * LR step) into that layout: two parameters, the dense row-major tensor NAME (input) and
 * NAME_packed (output, layout.size elements, every element written: padding gets zero).  Its
 * loops walk the packed buffer in order, so it can be compiled like any kernel.  TT_ERR_NOMEM,
 * or TT_ERR_INVALID_ARG when the parameter is not packed. */
tt_status tt_pack_program(const tt_program *prog, int param, tt_program **out, tt_errbuf *err);

/* The same kernel taking every input row-major, as TVM's auto_scheduler builds a standalone kernel
 * with a layout rewrite (its transform stage inserted): each input `prog` reads packed (LR)
 * becomes a buffer of the program's own, NAME_packed, filled from the row-major parameter NAME
 * by a pack stage before the kernel's loops (with its outermost loop parallel when `parallel`).
 * A program without packed inputs is copied as it is.  TT_ERR_NOMEM. */
tt_status tt_program_insert_pack_stages(const tt_program *prog, bool parallel, tt_program **out,
                                        tt_errbuf *err);

/* Virtual-thread injection (TVM's InjectVirtualThread), applied by tt_lower: each vthread loop
 * is pushed down to the statements that depend on its variable, so that what does not (the
 * shared tiles' fetch, widened to every virtual thread by bound inference) runs once and the
 * virtual threads' register tiles interleave in one reduction loop.  Buffers allocated inside
 * the loop that the virtual threads write differently get a leading dimension of the loop's
 * extent, one copy each.  A loop whose injection would move a write before a read of it stays
 * as it is.  The result computes what the plain loops did.  TT_ERR_NOMEM. */
tt_status tt_program_inject_vthreads(tt_program *p, tt_errbuf *err);

/* The buffer of parameter i (inputs first, then outputs), or NULL. */
const tt_buffer *tt_program_param(const tt_program *p, int i);

/* Iterations of the deepest path through the nest at `id` (loops multiply, a sequence takes its
 * longest part), capped at 2^24: what auto_unroll_max_step compares with, in both code
 * generators.  With `vectors_as_one` a vectorized loop counts once, as in TVM, whose UnrollLoop
 * runs after VectorizeLoop: the OpenCL generator's count (its vectors are one statement).  The
 * LLVM generator counts their lanes still, as its tuned CPU records were measured with. */
int64_t tt_program_nest_trip(const tt_program *p, tt_sid id, bool vectors_as_one);

/* Readable form, e.g.
 *     for i.0 in 0..16 parallel:
 *       C[i.0*32 + i.1] = 0.0f
 * Caller frees. */
char *tt_program_print(const tt_program *p);

/* Runs the program in the interpreter.  `args` are the parameter buffers in order (dense arrays
 * of their dtypes).  Local buffers are filled with NaN (or a sentinel integer) first, so reading
 * what no loop wrote shows up in the result.  Every load and store is bounds-checked: an
 * out-of-bounds access returns TT_ERR_RUNTIME naming the buffer and index. */
tt_status tt_interp_run(const tt_program *p, void *const *args, tt_errbuf *err);

#endif
