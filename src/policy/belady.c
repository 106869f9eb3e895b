/* Belady's MIN: evict the chunk whose next read lies furthest in the future.
 * It needs the future, so it exists for the simulator, which knows it and
 * answers through fkv_eval_config.next_use; it is the hit-rate limit that online
 * policies are measured against.  The key is refreshed on every read (the
 * next use moves then) and when a chunk re-enters (after a pin). */
#include <stdint.h>

#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    int64_t t = p->next_use(p->next_use_ctx, &ch->v, &ch->m);
    return -(double)t; /* furthest next use = smallest key */
}

static fkv_status create(const fkv__policy_params *p, void **state)
{
    if (!p->next_use) return FKV_EINVAL;
    return fkv__hp_create(p, key, NULL, state); /* next uses have no order in time: the heap */
}

const fkv__policy_ops fkv__policy_belady = {
    .name = "belady",
    .help = "offline optimum: evicts the chunk used furthest in the future (needs next_use)",
    .create = create,
    .destroy = fkv__hp_destroy,
    .insert = fkv__hp_insert,
    .remove = fkv__hp_remove,
    .access = fkv__hp_access,
    .victim = fkv__hp_victim,
};
