/* Reproducible pseudo-random numbers (xoshiro256**, seeded through splitmix64).  A search run is
 * reproducible from its seed on every machine.  One generator per thread. */
#ifndef TT_BASE_RNG_H
#define TT_BASE_RNG_H

#include <stdint.h>

typedef struct tt_rng {
    uint64_t s[4];
} tt_rng;

void tt_rng_seed(tt_rng *r, uint64_t seed);
uint64_t tt_rng_next(tt_rng *r);
/* Uniform integer in [0, n); n > 0.  Unbiased (rejection). */
uint64_t tt_rng_below(tt_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double tt_rng_uniform(tt_rng *r);

#endif
