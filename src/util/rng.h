/* The project's one random number generator: xoshiro256**, seeded by
 * splitmix64, with explicit state: same seed, same stream, on every
 * platform; no global state.  fkv_mix64 is splitmix64's output function as
 * a pure hash (token ids that are functions of a position). */
#ifndef FKV_UTIL_RNG_H
#define FKV_UTIL_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct fkv_rng {
    uint64_t s[4];
} fkv_rng;

static inline uint64_t fkv_rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Pure: the splitmix64 output of state x (the value fkv_rng_splitmix
 * returns from state x). */
static inline uint64_t fkv_mix64(uint64_t x) { return fkv_rng_splitmix(&x); }

static inline void fkv_rng_seed(fkv_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = fkv_rng_splitmix(&seed);
}

static inline uint64_t fkv_rng_next(fkv_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* uniform in [0, 1), 53 bits */
static inline double fkv_rng_unif(fkv_rng *r) { return (double)(fkv_rng_next(r) >> 11) * 0x1.0p-53; }

/* uniform integer in [lo, hi] (hi - lo < 2^32; the modulo bias is < 2^-32) */
static inline uint32_t fkv_rng_range(fkv_rng *r, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(fkv_rng_next(r) % ((uint64_t)hi - lo + 1));
}

/* exponential with mean 1 */
static inline double fkv_rng_exp(fkv_rng *r) { return -log1p(-fkv_rng_unif(r)); }

#endif
