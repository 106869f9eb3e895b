/* LRU: the chunk read longest ago goes first.  Ties (chunks read in the
 * same step) go by creation order, so a sequence's oldest chunks leave first. */
#include "core/internal.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    (void)p;
    return (double)ch->v.last_access_ns;
}

static fkv_status create(const fkv__policy_params *p, void **state)
{
    return fkv__hp_create(p, key, state);
}

const fkv__policy_ops fkv__policy_lru = {
    .name = "lru",
    .help = "least recently used chunk first",
    .create = create,
    .destroy = fkv__hp_destroy,
    .insert = fkv__hp_insert,
    .remove = fkv__hp_remove,
    .access = fkv__hp_access,
    .victim = fkv__hp_victim,
};
