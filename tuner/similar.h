/* Tuned configs of similar workloads: for a shape with no records of its own, the best template
 * config of the nearest other shape of the same operator, mapped into its space knob by knob.
 * What tvm-compile builds for a kernel nobody tuned (docs/compile.md), and the same carrying-over
 * of register and cache tiles between shapes that the search starts from (docs/search.md). */
#ifndef TT_TUNER_SIMILAR_H
#define TT_TUNER_SIMILAR_H

#include "../db/db.h"
#include "space.h"

typedef struct tt_similar {
    char workload[512]; /* the workload whose record it is */
    long long record;   /* that record's id */
    double fastest_s;   /* its time (fastest sample), on that workload */
    double distance;    /* tt_workload_distance to the asked workload */
    uint64_t index;     /* the config mapped into the asked space */
} tt_similar;

/* The length of the operator name of workload `key` ("matmul" of "matmul:M=..."); 0 for a tensor
 * expression (`te:`) or a key without one. */
size_t tt_workload_op_length(const char *key);

/* How far apart two workload keys of one operator are: the sum over their parameters of
 * |ln((a + 1) / (b + 1))| for numeric values, and 8 for each parameter that one lacks or that
 * differs and is not a number (a dtype).  Negative when their operators differ or either is a
 * tensor expression (`te:`). */
double tt_workload_distance(const char *a, const char *b);

/* The best `max` distinct template configs of workload `key` measured on `target` (and `device`
 * when not NULL), best first: records whose config is of `sp`, key's template space as
 * tt_space_init or tt_space_init_gpu built it.  Fills out[0..) (index in sp, not mapped; distance
 * 0) and returns how many. */
int tt_similar_best_of(tt_db *db, const char *key, const char *target, const char *device,
                       const tt_space *sp, tt_similar *out, int max);

/* The workloads of `key`'s operator other than key with error-free records of `target` in `db`,
 * the nearest `max` of them (tt_workload_distance), nearest first: *count keys into `out`, each
 * malloc'ed for the caller to free. */
tt_status tt_similar_workloads(tt_db *db, const char *target, const char *key, char **out, int max,
                               int *count, tt_errbuf *err);

/* The best record of `target` (and `device` when not NULL) among the workloads of `w`'s operator
 * other than w, taken from the nearest of them (tt_workload_distance; the next when the nearest
 * has no record of its current template space), whose config is a template config of that
 * workload's space (built with `cores` and `isa`, as `space` was); its index mapped into `space`
 * with tt_space_nearest_index.  TT_ERR_NOT_FOUND when there is none; TT_ERR_IO and the like
 * with the database's message. */
tt_status tt_similar_config(tt_db *db, const char *target, const char *device, const tt_workload *w,
                            const tt_space *space, int cores, const tt_vector_isa *isa,
                            tt_similar *out, tt_errbuf *err);

#endif
