/* LRU: the chunk read longest ago goes first.  Ties (chunks read in the
 * same step) go by creation order, so a sequence's oldest chunks leave first. */
#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    (void)p;
    return (double)ch->m.last_access_ns;
}

/* a read sets the key to now, after every other: one run */
static int run0(const fkv__chunk *ch)
{
    (void)ch;
    return 0;
}

FKV__HEAP_POLICY(fkv__policy_lru, "lru",
                 "least recently used chunk first",
                 key, run0, fkv__hp_access);
