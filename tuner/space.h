/* A tiling search space for any workload, in the manner of an AutoTVM template: knobs (tile sizes
 * of the main stage's spatial axes and of its last reduce axis, cache-write, parallel,
 * vectorize, auto-unroll) map to a step list, which is the config stored in the database.
 *
 * The main stage is the reduction with the most work (or the last op).  Elementwise intermediates
 * (padding, bias, batch-norm) are inlined; other stages get a parallel outer loop and a vector
 * inner loop.  Thread-safe for distinct spaces; a const space may be shared. */
#ifndef TT_TUNER_SPACE_H
#define TT_TUNER_SPACE_H

#include "../schedule/schedule.h"

#define TT_SPACE_MAX_KNOBS   16
#define TT_SPACE_MAX_CHOICES 64

typedef struct tt_knob {
    char name[48];
    int n; /* number of choices */
    int64_t choice[TT_SPACE_MAX_CHOICES];
} tt_knob;

typedef struct tt_space {
    const tt_dag *dag;
    int main_stage; /* stage id of the main op */
    int nspatial, nreduce;
    int nknobs;
    tt_knob knobs[TT_SPACE_MAX_KNOBS];
    uint64_t size; /* product of the knob sizes */
} tt_space;

/* Builds the space of `dag` for a CPU with `cores` cores and `vector_bytes`-wide vectors. */
tt_status tt_space_init(tt_space *s, const tt_dag *dag, int cores, tt_errbuf *err);
/* Decodes config index `index` (mixed radix, first knob least significant) into knob positions. */
void tt_space_decode(const tt_space *s, uint64_t index, int *pos);
/* The schedule state of config `index`; TT_ERR_ILLEGAL_STEP for a combination the state rejects
 * (rare).  *out owned by the caller. */
tt_status tt_space_apply(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err);
/* "tile_i=8 tile_j=16 ..." for people. */
void tt_space_describe(const tt_space *s, uint64_t index, char *buf, size_t n);

#endif
