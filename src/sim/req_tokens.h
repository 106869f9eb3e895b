/* The simulator's token ids.  A simulated request carries no text: the id
 * of each position is a pure function of the request's seeds and prefix
 * blocks (fkv_req: shared_seed, block_ids, token_seed), so requests that
 * share a prefix agree on its ids and the cache's page hash chain finds it.
 * The scheduler asks for them through fkv_sched_config.token_ids. */
#ifndef FKV_SIM_REQ_TOKENS_H
#define FKV_SIM_REQ_TOKENS_H

#include <stdint.h>

#include "sched/sched.h"

/* Token id of position pos of r: positions < shared_tokens from
 * (shared_seed, pos), so requests with the same shared_seed agree there;
 * then positions named by a block from (block id, offset); the rest from
 * (token_seed, pos). */
int32_t fkv_req_token(const fkv_req *r, uint32_t pos, uint32_t block_tokens);

/* fkv_sched_config.token_ids for simulated requests (ctx unused). */
void fkv_sim_token_ids(void *ctx, const fkv_req *r, uint32_t start, uint32_t n, uint32_t block_tokens, int32_t *out);

#endif
