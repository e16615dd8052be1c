/* Private to tuner/: what the CPU tiling space (space.c) and the GPU template (space_gpu.c)
 * share. */
#ifndef TT_TUNER_SPACE_INT_H
#define TT_TUNER_SPACE_INT_H

#include "space.h"

void tt__space_add_knob(tt_space *s, const char *name, const int64_t *c, int n);
/* An intermediate that goes into its readers: no reduction, and not a transform that a
 * reduction reads (tt_access_transform_into_reduction: Winograd's input transform). */
bool tt__space_inlinable(const tt_dag *d, int op, int main_op);
/* Does `target` read `op`, directly or through other ops? */
bool tt__space_feeds(const tt_dag *d, int op, int target);
/* Resets `s` and picks the main stage: the reduction with the most work, else the last op. */
tt_status tt__space_pick_main(tt_space *s, const tt_dag *dag, tt_errbuf *err);
tt_status tt__space_apply_gpu(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err);

#endif
