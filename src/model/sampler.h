/* Token sampling with explicit RNG state: greedy (temperature 0), or
 * softmax(logits / temperature) restricted to the smallest set of most
 * likely tokens whose mass reaches top_p.  Same seed, same logits -> same
 * tokens, on any machine (xoshiro256** seeded by splitmix64; the uniform
 * draw uses 53 bits). */
#ifndef FKV_ENGINE_SAMPLER_H
#define FKV_ENGINE_SAMPLER_H

#include <stdint.h>

#include "fairkv.h"
#include "util/rng.h"

typedef struct fkv_sampler {
    float temperature; /* 0: greedy */
    float top_p;       /* (0, 1]; 1: no truncation */
    fkv_rng rng;
    uint32_t n_vocab;
    struct fkv_prob *work; /* [n_vocab] */
} fkv_sampler;

fkv_status fkv_sampler_init(fkv_sampler *s, uint32_t n_vocab, float temperature, float top_p, uint64_t seed);
void fkv_sampler_free(fkv_sampler *s);
/* Index of the largest logit (lowest index on ties). */
int32_t fkv_argmax(const float *logits, uint32_t n);
/* Draws a token from logits[n_vocab] (not modified). */
int32_t fkv_sample(fkv_sampler *s, const float *logits);

#endif
