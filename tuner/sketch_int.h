/* Internal to the sketch module (sketch.c, sketch_gpu_tiles.c). */
#ifndef TT_TUNER_SKETCH_INT_H
#define TT_TUNER_SKETCH_INT_H

#include "sketch.h"

/* tt_sketch.undefined: a split whose lengths are sampled; one of a multi-level tiling's spatial
 * axes (where register tiles go). */
#define UNDEF_OPEN    1
#define UNDEF_SPATIAL 2

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

#endif
