/* The simulator's token ids: see req_tokens.h. */
#include "sim/req_tokens.h"
#include "util/err.h"
#include "util/rng.h"

#include <stdio.h>

fkv_req_src fkv_sim_src(const fkv_sim_tokens *t, const fkv_req *r)
{
    fkv_req_src s = {0};
    if (!t || !t->src) s.token_seed = r->tag;
    else if (r->tag < t->n) s = t->src[r->tag];
    return s;
}

fkv_status fkv_sim_check_tags(const fkv_sim_tokens *t, const fkv_req *reqs, size_t n, char *err, size_t errlen)
{
    if (!t || !t->src) return FKV_OK;
    for (size_t i = 0; i < n; i++)
        if (reqs[i].tag >= t->n)
            return fkv_errf(err, errlen, FKV_EINVAL, "request %llu: tag %llu names no token source (%zu sources)",
                            (unsigned long long)reqs[i].id, (unsigned long long)reqs[i].tag, t->n);
    return FKV_OK;
}

static int32_t token_of(const fkv_req_src *s, const fkv_req *r, uint32_t block_tokens, uint32_t pos)
{
    uint64_t h;
    if (pos < r->shared_tokens && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(s->shared_seed ^ 0x2545f4914f6cdd1dULL) + pos);
    else if (s->block_ids && pos / block_tokens < s->n_block_ids && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(s->block_ids[pos / block_tokens] ^ 0x5bd1e995ULL) + pos % block_tokens);
    else
        h = fkv_mix64(fkv_mix64(s->token_seed) + pos);
    return (int32_t)(h & 0x7fffffff);
}

static uint32_t block_tokens_of(const fkv_sim_tokens *t) { return t && t->block_tokens ? t->block_tokens : 512; }

int32_t fkv_req_token(const fkv_sim_tokens *t, const fkv_req *r, uint32_t pos)
{
    fkv_req_src s = fkv_sim_src(t, r);
    return token_of(&s, r, block_tokens_of(t), pos);
}

void fkv_sim_token_ids(void *ctx, const fkv_req *r, uint32_t start, uint32_t n, int32_t *out)
{
    const fkv_sim_tokens *t = ctx;
    fkv_req_src s = fkv_sim_src(t, r);
    uint32_t bt = block_tokens_of(t);
    for (uint32_t i = 0; i < n; i++) out[i] = token_of(&s, r, bt, start + i);
}

fkv_status fkv_sim_open_seq(void *ctx, const fkv_req *r, fkv_cache *cache, const fkv_seq_params *p, fkv_seq **out)
{
    const fkv_sim_tokens *t = ctx;
    if (t && t->src && r->tag >= t->n)
        return fkv__fail(FKV_EINVAL, "request %llu: tag %llu names no token source (%zu sources)",
                         (unsigned long long)r->id, (unsigned long long)r->tag, t->n);
    if (t && t->blocks) {
        fkv_req_src s = fkv_sim_src(t, r);
        return fkv_seq_create_blocks(cache, p, s.block_ids, s.n_block_ids, out);
    }
    return fkv_seq_create(cache, p, out);
}
