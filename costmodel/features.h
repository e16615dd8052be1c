/* Features of lowered programs for the cost model.
 *
 * Per-store features in the manner of Ansor (search.md C7): one row of 184 floats per buffer that
 * the program stores to, describing the store's arithmetic, its loop annotations, up to five
 * buffer accesses (bytes, cache lines, reuse, stride), arithmetic intensity, allocation and loop
 * structure.  Everything except one-hot entries and is_gpu is log2p-scaled:
 * sign(x) * log2(|x| + 1).  docs/search.md ("Features") lists every entry.
 *
 * The schema is versioned: a model trained on one version must not be fed another. */
#ifndef TT_COSTMODEL_FEATURES_H
#define TT_COSTMODEL_FEATURES_H

#include "../schedule/schedule.h"

#define TT_FEATURES_VERSION 2
#define TT_STORE_FEATURES   184
/* A store's outer loop product (log-scaled): the largest is a program's main store. */
#define TT_FEATURE_OUTER_PROD 161

/* Feature rows of `p`: one per stored buffer, in order of the buffer's first store.  Writes up to
 * `max_rows` rows into out (row-major, TT_STORE_FEATURES floats each) and returns the number of
 * rows the program has. */
int tt_features_per_store(const tt_program *p, float *out, int max_rows);

/* AutoTVM's `itervar` features (search.md B4) of a program, flattened row after row (one row per
 * loop variable: 18 values plus 6 per buffer access under the loop).  `raw` leaves out the
 * log scaling (for tests).  Writes up to `max` values into out; returns the total length. */
int tt_features_itervar(const tt_program *p, bool raw, float *out, int max);

/* Name of feature `i` ("float_mad", "B0.bytes", ...); NULL when out of range. */
const char *tt_feature_name(int i);

#endif
