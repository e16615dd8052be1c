/* AutoTVM-style configuration spaces (search.md A1-A7): an ordered list of knobs, each a list of
 * entities; a config is a mixed-radix index over the knobs, the first-defined knob being the least
 * significant digit.  Entity lists and their order match TVM's, so indices in AutoTVM logs decode
 * to the same knob values here.
 *
 * Not thread-safe while knobs are being defined; a finished space may be shared. */
#ifndef TT_TUNER_CONFIG_SPACE_H
#define TT_TUNER_CONFIG_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/base.h"

#define TT_CS_MAX_KNOBS 32

typedef enum { TT_KNOB_SPLIT, TT_KNOB_REORDER, TT_KNOB_ANNOTATE, TT_KNOB_OTHER } tt_knob_kind;

typedef enum {
    TT_SPLIT_FACTORS,   /* divisors of the length, ascending */
    TT_SPLIT_POWER2,    /* 1, 2, 4, ... up to the length */
    TT_SPLIT_VERBOSE,   /* divisors and powers of two, in TVM's (CPython set) order */
    TT_SPLIT_CANDIDATE, /* the caller's list */
} tt_split_policy;

/* Annotation entity codes (search.md A6, the `knob` feature's numbering). */
enum {
    TT_AN_NONE = 0,
    TT_AN_VEC = 1,
    TT_AN_UNROLL = 2,
    TT_AN_BLOCK_X = 3,
    TT_AN_BLOCK_Y = 4,
    TT_AN_BLOCK_Z = 5,
    TT_AN_THREAD_X = 6,
    TT_AN_THREAD_Y = 7,
    TT_AN_THREAD_Z = 8,
    TT_AN_VTHREAD = 9,
    TT_AN_FUSE = 10,
};

typedef struct tt_cknob {
    char name[32];
    tt_knob_kind kind;
    int width;    /* values per entity: split outputs, reorder/annotate axes, 1 for other */
    int count;    /* entities */
    int64_t *ent; /* count x width values; a split's first value is -1 ("the rest") */
} tt_cknob;

typedef struct tt_config_space {
    int nknobs;
    tt_cknob knobs[TT_CS_MAX_KNOBS];
} tt_config_space;

void tt_cs_init(tt_config_space *cs);
void tt_cs_free(tt_config_space *cs);

/* define_split: split an axis of length `len` into `n` parts.  max_factor 0 = unlimited;
 * `candidates` (policy CANDIDATE) are entities of n sizes each; `max_last` > 0 keeps only
 * entities whose last size is at most max_last (a knob filter). */
tt_status tt_cs_define_split(tt_config_space *cs, const char *name, int64_t len,
                             tt_split_policy policy, int n, int64_t max_factor,
                             const int64_t *candidates, int ncandidates, int64_t max_last,
                             tt_errbuf *err);
/* define_reorder with policy "all" (every permutation, lexicographic) or "identity". */
tt_status tt_cs_define_reorder(tt_config_space *cs, const char *name, int naxes, bool all,
                               tt_errbuf *err);
/* define_annotate with a policy of words joined by '_' from none, try, unroll, vec (e.g.
 * "try_unroll_vec"): each axis takes one of them; at most one vec per entity. */
tt_status tt_cs_define_annotate(tt_config_space *cs, const char *name, int naxes,
                                const char *policy, tt_errbuf *err);
/* define_knob: one value per entity, in the given order. */
tt_status tt_cs_define_knob(tt_config_space *cs, const char *name, const int64_t *values, int n,
                            tt_errbuf *err);

/* Number of configs (product of the knob sizes); UINT64_MAX when it overflows. */
uint64_t tt_cs_size(const tt_config_space *cs);
/* Index -> knob positions (pos[k] in [0, count)). */
void tt_cs_decode(const tt_config_space *cs, uint64_t index, int *pos);
/* Knob positions -> index. */
uint64_t tt_cs_encode(const tt_config_space *cs, const int *pos);
/* The entity of knob `k` at config `index` (width values). */
const int64_t *tt_cs_entity(const tt_config_space *cs, int k, uint64_t index);
/* Index of knob `name`, or -1. */
int tt_cs_find(const tt_config_space *cs, const char *name);
/* The config as TVM's entity text, e.g.
 * [["tile_y", "sp", [-1, 8, 4]], ["tile_x", "sp", [-1, 16, 1]], ["auto_unroll", "ot", 512]]. */
char *tt_cs_entity_json(const tt_config_space *cs, uint64_t index);

/* AutoTVM's fallback_split (A7): for `len` and per-slot limits (-1 = none, slot 0 ignored),
 * fills out[0..n) walking from the last slot to the first, each the largest divisor of what
 * remains within its limit; out[0] gets the rest. */
void tt_cs_fallback_split(int64_t len, const int64_t *limits, int n, int64_t *out);

/* TVM's "verbose" factor list of `len` (CPython set order); returns the count. */
int tt_cs_verbose_factors(int64_t len, int64_t *out, int max);

#endif
