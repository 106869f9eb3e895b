/* F-LRU (seed 2.2): score = alpha/access_count + beta*(now - create_time).
 * A rarely read, old chunk scores highest, so the score is read as an
 * eviction priority: highest score first (see SEED-en.md's note).  Quotas,
 * min_chunk_retention and TTL sit around it in the cache. */
#include "core/internal.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    (void)p;
    /* Evict the HIGHEST utility score alpha/access_count + beta*age first.
     * beta*now is common to all chunks, so the static key
     * -(alpha/access_count - beta*create/unit) orders them the same way
     * at any time and changes only when the chunk is read. */
    return p->beta * ((double)ch->v.create_ns / p->age_unit_ns) - p->alpha / (double)ch->v.access_count;
}

static fkv_status create(const fkv__policy_params *p, void **state)
{
    return fkv__hp_create(p, key, state);
}

const fkv__policy_ops fkv__policy_flru = {
    .name = "flru",
    .help = "F-LRU: evicts the highest alpha/access_count + beta*age first",
    .create = create,
    .destroy = fkv__hp_destroy,
    .insert = fkv__hp_insert,
    .remove = fkv__hp_remove,
    .access = fkv__hp_access,
    .victim = fkv__hp_victim,
};
