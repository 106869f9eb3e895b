/* The simulator's token ids: see req_tokens.h. */
#include "sim/req_tokens.h"
#include "util/rng.h"

int32_t fkv_req_token(const fkv_req *r, uint32_t pos, uint32_t block_tokens)
{
    uint64_t h;
    if (pos < r->shared_tokens && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(r->shared_seed ^ 0x2545f4914f6cdd1dULL) + pos);
    else if (r->block_ids && block_tokens && pos / block_tokens < r->n_block_ids && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(r->block_ids[pos / block_tokens] ^ 0x5bd1e995ULL) + pos % block_tokens);
    else
        h = fkv_mix64(fkv_mix64(r->token_seed) + pos);
    return (int32_t)(h & 0x7fffffff);
}

void fkv_sim_token_ids(void *ctx, const fkv_req *r, uint32_t start, uint32_t n, uint32_t block_tokens, int32_t *out)
{
    (void)ctx;
    for (uint32_t i = 0; i < n; i++) out[i] = fkv_req_token(r, start + i, block_tokens);
}
