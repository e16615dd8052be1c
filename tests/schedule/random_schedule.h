/* Random legal schedules for differential tests: tries random steps on a state, keeping those
 * the state accepts.  Reproducible from the seed. */
#ifndef TT_TESTS_RANDOM_SCHEDULE_H
#define TT_TESTS_RANDOM_SCHEDULE_H

#include "schedule/schedule.h"

/* Small shapes of every operator class (and a few dtypes and a custom TE operator), so that
 * hundreds of schedules run in seconds. */
extern const char *const tt_test_workloads[];
extern const size_t tt_test_nworkloads;

/* Applies up to `nsteps` random steps to `st`.  Returns the number applied. */
int tt_test_random_steps(tt_state *st, tt_rng *rng, int nsteps);

#endif
