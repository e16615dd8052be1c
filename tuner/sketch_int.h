/* Internal to the sketch module (sketch.c, sketch_gpu_tiles.c). */
#ifndef TT_TUNER_SKETCH_INT_H
#define TT_TUNER_SKETCH_INT_H

#include "sketch.h"

/* tt_sketch.undefined: a split whose lengths are sampled; one of a multi-level tiling's spatial
 * axes (where register tiles go). */
#define UNDEF_OPEN    1
#define UNDEF_SPATIAL 2

/* Steps a sampled or mutated state may hold. */
#define MAX_STEPS 512

/* ThreadBind (search.md C5): a GPU state's tiled roots bound to blockIdx, vthread and threadIdx,
 * the others split by the warp, shared stages fetched cooperatively. */
tt_status tt__sketch_thread_bind(tt_sketch_space *sp, tt_state *st, tt_errbuf *err);

/* Double buffering of the shared stages (PR "double_buffer"): each at even odds with `rng`,
 * every one without. */
tt_status tt__sketch_double_buffer(tt_state *st, tt_rng *rng, tt_errbuf *err);

/* Shared stages' rows padded (SA, TVM's storage_align) where that spares bank conflicts, as the
 * OpenCL code generator counts them (tt_opencl_stats.local_bank_ways): each stage in turn (or
 * stage `only` alone, when >= 0) takes the padding that lowers the worst conflict, within the
 * sketch's limits and its local memory.  With `rng`, at even odds none is tried.  The number of
 * stages padded. */
int tt__sketch_pad_shared(const tt_sketch_params *p, tt_state **st, int only, tt_rng *rng);
/* Register copies (CHR "local" at the reduction's middle tile, NAME.1) of the shared stages
 * that their consumer reads along the innermost reduction (a matmul's A[i, k]: the register
 * tile's vectors run along B's rows, so it read A one float at a time), filled by vectors along
 * NAME.2: all of them, kept only where the code generator emits every fill as vectors and local
 * memory is within the cap; with `rng`, at even odds.  Returns the copies made (the state is
 * unchanged when 0). */
int tt__sketch_register_copy(const tt_sketch_params *p, tt_state **st, tt_rng *rng);

/* Shared by sampling (sketch.c) and mutation (sketch_mutate.c). */
/* A uniform draw in [0, n) (0 when n <= 0). */
int tt__sketch_rand_below(tt_rng *rng, int n);
/* An auto_unroll_max_step value of the target's kind (CPU {0, 16, 64, 512}, GPU adds 1024). */
int tt__sketch_unroll_value(const tt_sketch_space *sp, tt_rng *rng);
/* The iterators where `stage` may be computed (Ansor's GetComputeLocationCandidates): (stage,
 * iter) pairs into out, at most `max`; their count (0 without a single consumer). */
int tt__sketch_location_candidates(const tt_state *st, int stage, int (*out)[2], int max);
/* The innermost iterator of stage g when a vector tile may vectorise it, else -1; whether g is a
 * register tile (a local cache-write stage with a reduction); g's tile vectorised. */
int tt__sketch_vector_tile_iter(const tt_state *st, int g);
bool tt__sketch_vector_tile_stage(const tt_state *st, int g);
tt_status tt__sketch_vector_tile_one(tt_state *st, int g, tt_errbuf *err);
/* The divisors of n in increasing order, at most `max` (up to 256); their count. */
int tt__sketch_divisors(int64_t n, int64_t *out, int max);

#endif
