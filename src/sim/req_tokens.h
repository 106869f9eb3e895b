/* The simulator's token ids.  A simulated request carries no text: the id
 * of each position is a pure function of the request's source (below),
 * so requests that share a prefix agree on its ids and the cache's page
 * hash chain finds it.  The scheduler knows none of this: it asks for ids
 * through fkv_sched_config.token_ids and opens sequences through
 * fkv_sched_config.open_seq (which, without pass_tokens, names the prompt
 * blocks for the cache's hash-id mode); both hooks take an fkv_sim_tokens
 * and find a request's source by its fkv_req.tag. */
#ifndef FKV_SIM_REQ_TOKENS_H
#define FKV_SIM_REQ_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_eval.h"
#include "sched/sched.h"

/* Where a simulated request's token ids come from. */
typedef struct fkv_req_src {
    const uint64_t *block_ids; /* prefix blocks (block_tokens each), may be NULL */
    uint32_t n_block_ids;
    uint64_t token_seed;       /* positions not named by a block */
    uint64_t shared_seed;      /* positions < fkv_req.shared_tokens */
} fkv_req_src;

/* The sources of a run's requests: the hooks' ctx.  With src, a request's
 * tag is the index of its source in src[n]; without (NULL: requests that
 * have a token seed and nothing else, as the generated workloads), its tag
 * is its token_seed. */
typedef struct fkv_sim_tokens {
    const fkv_req_src *src;
    size_t n;
    uint32_t block_tokens; /* tokens named by one block id (512; 0 reads as 512) */
    int blocks;            /* 1: open_seq names the prompt blocks (a scheduler without pass_tokens) */
} fkv_sim_tokens;

/* r's source under t (t NULL: no sources, the tag is the seed); a source
 * of nothing (seed 0) when r->tag names no source: fkv_sim_check_tags
 * refuses that first. */
fkv_req_src fkv_sim_src(const fkv_sim_tokens *t, const fkv_req *r);

/* FKV_EINVAL with err naming the request when a tag names no source. */
fkv_status fkv_sim_check_tags(const fkv_sim_tokens *t, const fkv_req *reqs, size_t n, char *err, size_t errlen);

/* Token id of position pos of r: positions < shared_tokens from
 * (shared_seed, pos), so requests with the same shared_seed agree there;
 * then positions named by a block from (block id, offset); the rest from
 * (token_seed, pos). */
int32_t fkv_req_token(const fkv_sim_tokens *t, const fkv_req *r, uint32_t pos);

/* fkv_sched_config.token_ids for simulated requests (ctx: fkv_sim_tokens,
 * or NULL: no sources). */
void fkv_sim_token_ids(void *ctx, const fkv_req *r, uint32_t start, uint32_t n, int32_t *out);

/* fkv_sched_config.open_seq for simulated requests (ctx as above): with
 * ctx->blocks, the sequence opens in the cache's hash-id mode on r's
 * prompt blocks.  FKV_EINVAL for a tag that names no source. */
fkv_status fkv_sim_open_seq(void *ctx, const fkv_req *r, fkv_cache *cache, const fkv_seq_params *p, fkv_seq **out);

#endif
