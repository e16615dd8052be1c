/* Access analysis of a schedule state, for the sketch rules (search.md C1).
 *
 * Questions are asked of the state's current DAG (cache_write and rfactor add ops to it), the way
 * Ansor's access analyzer answers them for the state's current compute DAG.  Stage ids are indices
 * into st->stages.  Read-only; safe on a const state from many threads. */
#ifndef TT_TUNER_ACCESS_H
#define TT_TUNER_ACCESS_H

#include "../schedule/schedule.h"

/* A compute op that nobody reads. */
bool tt_access_is_output(const tt_state *st, int stage);
/* Every read indexes with plain axis variables (or constants) in the op's axis order, without
 * repeats, and the body has no select and no exp.  Constant tensors (no reads) qualify. */
bool tt_access_strictly_inlineable(const tt_state *st, int stage);
/* Needs multi-level tiling: at least two input tensors miss a spatial axis of extent > 1, or one
 * does and the op reduces (matmul, convolution). */
bool tt_access_needs_mlt(const tt_state *st, int stage);
/* The stage has a reduce iterator. */
bool tt_access_has_reduce(const tt_state *st, int stage);
/* Product of the extents of the stage's spatial / reduce iterators. */
void tt_access_lengths(const tt_state *st, int stage, int64_t *space, int64_t *reduce);
/* Consumers of a stage (stage ids, ascending), looking through inlined stages.  Returns the count
 * (at most `max` written). */
int tt_access_consumers(const tt_state *st, int stage, int *out, int max);
/* The single consumer, or the common root all consumers are computed at; -1 if none. */
int tt_access_single_consumer(const tt_state *st, int stage);
/* The stage has one consumer, reached through a chain of single readers of the same shape that
 * read element by element, and they do not both reduce.  *target gets the consumer. */
bool tt_access_elementwise_consumer(const tt_state *st, int stage, int *target);
/* The same, and with unit_dims the chain may also add or drop axes of extent 1 (a MatMul's
 * [M, N] accumulation read by its [1, M, N] output as out[0, i, j] = t[i, j]). */
bool tt_access_elementwise_consumer_ex(const tt_state *st, int stage, bool unit_dims, int *target);
/* For each axis of `target`'s op, the axis of `stage`'s op it corresponds to element by element
 * (tt_access_elementwise_consumer_ex): itself where the shapes are equal, else the axes other
 * than those of extent 1 in order, and -1 for target's axes of extent 1.  Returns how many map. */
int tt_access_axis_map(const tt_state *st, int stage, int target, int *map);
/* tt_access_elementwise_consumer, or else the one stage that all the stage's readers lead to
 * through inlined elementwise stages of its shape (a diamond: SiLU's x * sigmoid(x), HardSwish),
 * the consumer not reducing: where an accumulator may be written through its epilogue.  unit_dims
 * as for tt_access_elementwise_consumer_ex. */
bool tt_access_epilogue_consumer(const tt_state *st, int stage, bool unit_dims, int *target);
/* A cache_write step created this stage (the ".local" stage of a cache_write). */
bool tt_access_has_cache_write(const tt_state *st, int stage);
/* Ansor's CPU rfactor condition (search.md C4). */
bool tt_access_needs_rfactor(const tt_state *st, int stage, int num_cores);
/* The stage's iterator count differs from its op's axes: it has been split or fused. */
bool tt_access_is_tiled(const tt_state *st, int stage);
/* The stage and iterator a stage is computed at (-1, -1 when not at an iterator). */
void tt_access_attach_point(const tt_state *st, int stage, int *target, int *iter);
/* True if some stage is computed at iterator `iter` of `stage`. */
bool tt_access_has_attached(const tt_state *st, int stage, int iter);
/* `stage` reads `producer` directly (not through an inlined stage). */
bool tt_access_reads_directly(const tt_state *st, int stage, int producer);
/* How many leading axes `stage`'s output shares with its consumer `target`: positions where
 * every read (through inlined stages) indexes with the consumer's own axis variable. */
int tt_access_common_outer(const tt_state *st, int stage, int target);
/* The elements of the largest tensor the stage reads (0: it reads none), and in *along_reduce
 * whether that read varies fastest along one of the stage's reductions: its last index is a
 * reduce axis of the op (a matrix-vector product's weight rows w[n, k], which the threads of a
 * work-group read coalesced when they share the reduction of one output). */
int64_t tt_access_largest_read(const tt_state *st, int stage, bool *along_reduce);
/* The spatial axes of `stage`'s op (bit k: op->axis[k]) that index its largest read (0: it reads
 * none): the weight rows w[n, k] of a matrix-vector product use n, not the batch. */
uint32_t tt_access_largest_read_axes(const tt_state *st, int stage);
/* Every read of `producer`'s op in `stage`'s body has the innermost reduce axis of stage's op as
 * its last index (a matmul's A[i, k]: a register tile whose vectors run along the output's rows
 * reads it one element at a time, and a copy of it in registers can be filled by vectors along
 * k); false when there is no such read. */
bool tt_access_reads_along_innermost_reduce(const tt_state *st, int stage, int producer);
/* The stage, or a stage computed at it, has a reduce iterator bound to threadIdx.x. */
bool tt_access_cross_thread_reduction(const tt_state *st, int stage);
/* Ansor's cache-read location: the last reduce iterator of the outermost reduce tile (the n-th
 * reduce iterator for n reduce axes); 0 when the stage does not reduce. */
int tt_access_outer_reduce_tile_end(const tt_state *st, int stage);
/* Stage id, after all of st's steps, of what step `step` called stage `stage_at_step`. */
int tt_access_final_stage(const tt_state *st, size_t step, int stage_at_step);

/* Transforms: stages that combine their input at several points (Winograd's input and output
 * transforms, written as select chains, graph/te_write.c).  Whether op reads one tensor at two
 * different index lists; whether it is such a stage that a reduction reads (inlined, its work
 * would repeat for every element the reduction reuses, a matrix product's output column: the
 * templates and sketches keep it a pass of its own); whether it is one that only non-reductions
 * read (inlined, its work repeats a few times but its pass over memory goes: CPU sketches inline
 * it, as the templates do). */
bool tt_access_reads_at_many_points(const tt_dag *d, int op);
bool tt_access_transform_into_reduction(const tt_dag *d, int op);
bool tt_access_transform_into_elementwise(const tt_dag *d, int op);

#endif
