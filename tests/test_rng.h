/* A small deterministic generator for the randomized tests (64-bit LCG,
 * the high bits returned): the same seed gives the same operations on
 * every machine. */
#ifndef FKV_TEST_RNG_H
#define FKV_TEST_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s;
} rng;

static inline uint32_t next(rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 33);
}

#endif
