/* Schedule state and transform steps.
 *
 * A state is the compute DAG plus one stage per op (placeholders included, in op order; cache and
 * rfactor stages are inserted as Ansor does), each with its current iterators, and the list of
 * steps applied so far.  The step list is the canonical config: replaying it on the DAG rebuilds
 * the state exactly, and its text form is Ansor's step JSON (docs/steps.md).
 *
 * Step codes and fields follow auto_scheduler's log format (log-formats.md §2.4), so stage and
 * iterator ids mean what they mean there: ids at the time of the step.
 * Not thread-safe; copy a state (tt_state_clone) per thread. */
#ifndef TT_SCHEDULE_STATE_H
#define TT_SCHEDULE_STATE_H

#include "dag.h"

#define TT_MAX_ITERS  64
#define TT_MAX_SPLIT  8
#define TT_MAX_STAGES 64

/* Step kinds: enum name, log code. */
#define TT_STEP_LIST(X)                                                                            \
    X(ANNOTATE, "AN")                                                                              \
    X(FUSE, "FU")                                                                                  \
    X(PRAGMA, "PR")                                                                                \
    X(REORDER, "RE")                                                                               \
    X(SPLIT, "SP")                                                                                 \
    X(FOLLOW_SPLIT, "FSP")                                                                         \
    X(FOLLOW_FUSED_SPLIT, "FFSP")                                                                  \
    X(STORAGE_ALIGN, "SA")                                                                         \
    X(COMPUTE_AT, "CA")                                                                            \
    X(COMPUTE_INLINE, "CI")                                                                        \
    X(COMPUTE_ROOT, "CR")                                                                          \
    X(CACHE_READ, "CHR")                                                                           \
    X(CACHE_WRITE, "CHW")                                                                          \
    X(RFACTOR, "RF")                                                                               \
    X(LAYOUT_REWRITE, "LR")

typedef enum {
#define TT_ST_ENUM(n, c) TT_STEP_##n,
    TT_STEP_LIST(TT_ST_ENUM)
#undef TT_ST_ENUM
        TT_STEP_KIND_COUNT
} tt_step_kind;

/* Iterator annotations, numbered as in Ansor's AN step. */
#define TT_ANN_LIST(X)                                                                             \
    X(NONE, "none")                                                                                \
    X(UNROLL, "unroll")                                                                            \
    X(VECTORIZE, "vectorize")                                                                      \
    X(PARALLEL, "parallel")                                                                        \
    X(VTHREAD, "vthread")                                                                          \
    X(BLOCK_X, "blockIdx.x")                                                                       \
    X(THREAD_X, "threadIdx.x")                                                                     \
    X(BLOCK_Y, "blockIdx.y")                                                                       \
    X(THREAD_Y, "threadIdx.y")                                                                     \
    X(BLOCK_Z, "blockIdx.z")                                                                       \
    X(THREAD_Z, "threadIdx.z")                                                                     \
    X(TENSORIZE, "tensorize")

typedef enum {
#define TT_AN_ENUM(n, s) TT_ANN_##n,
    TT_ANN_LIST(TT_AN_ENUM)
#undef TT_AN_ENUM
        TT_ANN_COUNT
} tt_ann;

const char *tt_step_code(tt_step_kind k);
const char *tt_ann_name(tt_ann a);
bool tt_ann_is_gpu_bind(tt_ann a);

/* One transform step.  Which fields are used depends on the kind (see docs/steps.md). */
typedef struct tt_step {
    tt_step_kind kind;
    int stage;
    int iter;
    /* SP */
    int64_t extent; /* 0 = unknown */
    int nlen;
    int64_t lengths[TT_MAX_SPLIT];
    int inner_to_outer;
    /* FSP: src_step, n_split.   FFSP: srcs, level, factor_or_nparts */
    int src_step, n_split;
    int nsrc;
    int srcs[TT_MAX_SPLIT];
    int level, factor_or_nparts;
    /* FU, RE: iterator ids.   CHR: reader stage ids */
    int nids;
    int ids[TT_MAX_ITERS];
    tt_ann ann;         /* AN */
    char pragma[64];    /* PR, e.g. "auto_unroll_max_step$512" */
    int target_stage;   /* CA */
    int target_iter;    /* CA */
    char scope[16];     /* CHR, CHW: "global", "shared", "local" */
    int factor_iter;    /* RF: position of the new axis in the rfactor tensor */
    int factor, offset; /* SA */
} tt_step;

typedef enum { TT_ITER_SPATIAL, TT_ITER_REDUCE } tt_iter_kind;

typedef struct tt_iter {
    const char *name; /* e.g. "i.0", "i.1@j.1@" */
    int64_t extent;   /* extent known from the op shape (lowering re-infers under compute_at) */
    uint32_t var;     /* variable of this iterator in the state's pool */
    tt_iter_kind kind;
    tt_ann ann;
} tt_iter;

/* How an iterator was derived: parent -> children (split) or children -> fused (fuse). */
typedef enum { TT_REL_SPLIT, TT_REL_FUSE } tt_rel_kind;

typedef struct tt_relation {
    tt_rel_kind kind;
    uint32_t parent; /* SPLIT: the split variable.  FUSE: the fused result. */
    int nchild;
    uint32_t
        child[TT_MAX_ITERS]; /* SPLIT: parts outer -> inner.  FUSE: fused vars outer -> inner */
    int64_t lengths[TT_MAX_SPLIT]; /* SPLIT: the step's lengths */
    int nlen;
    int inner_to_outer;
} tt_relation;

typedef enum { TT_AT_ROOT, TT_AT_INLINE, TT_AT_ITER } tt_at_kind;

typedef struct tt_stage {
    int op; /* op id in the state's DAG (stable identity of the stage) */
    int niters;
    tt_iter iters[TT_MAX_ITERS]; /* current (leaf) iterators, outer -> inner */
    TT_VEC(tt_relation) rels;    /* in order of application */
    tt_at_kind at;
    int at_op;                /* TT_AT_ITER: op of the target stage */
    uint32_t at_var;          /* TT_AT_ITER: the target iterator's variable */
    char scope[16];           /* storage scope of the stage's buffer */
    int auto_unroll_max_step; /* from the auto_unroll_max_step pragma; 0 = none */
    uint32_t pragma_var;      /* iterator carrying that pragma */
    int nalign;
    struct {
        int axis, factor, offset;
    } align[TT_MAX_DIMS];
    bool transformed;    /* any split/fuse/reorder/annotate applied */
    bool layout_rewrite; /* LR: a constant placeholder stored in the layout its reader's loops
                            read (lower.c derives it; docs/steps.md) */
    bool double_buffer;  /* PR "double_buffer" on a shared stage: two tiles, the next one fetched
                            while the current one is read (lower.c; docs/steps.md) */
} tt_stage;

typedef struct tt_state {
    tt_dag dag; /* the state's own copy; cache and rfactor steps add ops to it */
    TT_VEC(tt_stage) stages;
    TT_VEC(tt_step) steps;
} tt_state;

/* Creates the initial state of `dag` (no steps).  The DAG is copied. */
tt_status tt_state_create(const tt_dag *dag, tt_state **out, tt_errbuf *err);
void tt_state_free(tt_state *st);
tt_status tt_state_clone(const tt_state *src, tt_state **out);

/* Applies one step, after checking it against the state; on success the step is appended to
 * st->steps.  On error the state is unchanged and err says what is illegal
 * (TT_ERR_ILLEGAL_STEP). */
tt_status tt_state_apply(tt_state *st, const tt_step *step, tt_errbuf *err);
/* Creates a state by replaying `steps` on `dag`.  Errors name the failing step's index. */
tt_status tt_state_replay(const tt_dag *dag, const tt_step *steps, size_t n, tt_state **out,
                          tt_errbuf *err);

/* Index of the stage of `op`, or -1. */
int tt_state_stage_of_op(const tt_state *st, int op);

/* Convenience builders: fill a step and apply it. */
tt_status tt_sched_split(tt_state *st, int stage, int iter, const int64_t *lengths, int n,
                         bool inner_to_outer, tt_errbuf *err);
tt_status tt_sched_fuse(tt_state *st, int stage, const int *iters, int n, tt_errbuf *err);
/* Fuses iterators [first, first + n) (nothing to do for n = 1) and annotates the result with
 * `ann` (TT_ANN_NONE: none). */
tt_status tt_sched_fuse_annotate(tt_state *st, int stage, int first, int n, tt_ann ann,
                                 tt_errbuf *err);
tt_status tt_sched_reorder(tt_state *st, int stage, const int *order, int n, tt_errbuf *err);
tt_status tt_sched_annotate(tt_state *st, int stage, int iter, tt_ann ann, tt_errbuf *err);
tt_status tt_sched_compute_at(tt_state *st, int stage, int target_stage, int target_iter,
                              tt_errbuf *err);
tt_status tt_sched_compute_inline(tt_state *st, int stage, tt_errbuf *err);
tt_status tt_sched_compute_root(tt_state *st, int stage, tt_errbuf *err);
tt_status tt_sched_cache_read(tt_state *st, int stage, const char *scope, const int *readers, int n,
                              tt_errbuf *err);
tt_status tt_sched_cache_write(tt_state *st, int stage, const char *scope, tt_errbuf *err);
tt_status tt_sched_rfactor(tt_state *st, int stage, int iter, int factor_iter, tt_errbuf *err);
tt_status tt_sched_pragma(tt_state *st, int stage, int iter, const char *pragma, tt_errbuf *err);
tt_status tt_sched_storage_align(tt_state *st, int stage, int iter, int factor, int offset,
                                 tt_errbuf *err);
/* LR: the constant placeholder `stage` is passed in the layout its reader's loops read. */
tt_status tt_sched_layout_rewrite(tt_state *st, int stage, tt_errbuf *err);

/* Readable dump of stages and iterators (like Ansor's state printing). Caller frees. */
char *tt_state_print(const tt_state *st);

/* ---- step text (steps_json.c) ---- */

/* Serialises steps as Ansor's step array, e.g. [["SP", 2, 0, 512, [16, 8], 1], ["RE", 2, [0, 2, 1,
 * 3]]]. Caller frees. NULL on OOM. */
char *tt_steps_to_json(const tt_step *steps, size_t n);
/* Parses that text.  *out is malloc'ed (caller frees); errors name the step index and field. */
tt_status tt_steps_from_json(const char *text, tt_step **out, size_t *n, tt_errbuf *err);
/* Same, from a jansson array (used by the log importers). */
struct json_t;
tt_status tt_steps_from_jarray(const struct json_t *arr, tt_step **out, size_t *n, tt_errbuf *err);
/* The state the steps of step text (a record's config) build from `dag`'s initial state:
 * tt_steps_from_json, then tt_state_replay. */
tt_status tt_state_from_json(const tt_dag *dag, const char *text, tt_state **out, tt_errbuf *err);

#endif
