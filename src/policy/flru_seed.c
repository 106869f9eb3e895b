/* flru-seed: F-LRU as the seed writes it, age in seconds whatever
 * age_unit_ns says.  The default flru measures age in turnovers of the
 * pool (docs/ARCHITECTURE.md, "F-LRU's units"): in seconds the age term
 * outweighs the whole heat term (alpha = 0.7) after 0.7 / 0.3 = 2.3 s, so
 * on a busy server the seed's formula is FIFO by creation time.  Kept as
 * its own variant so the benchmark shows what the unit changes. */
#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    return p->beta * ((double)ch->m.create_ns / 1e9) - p->alpha / (double)ch->m.access_count;
}

static int run(const fkv__chunk *ch)
{
    return ch->m.access_count <= FKV__HP_RUNS ? (int)ch->m.access_count - 1 : -1;
}

FKV__HEAP_POLICY(fkv__policy_flru_seed, "flru-seed",
                 "F-LRU with the seed's age in seconds: evicts the highest alpha/access_count + beta*age_s first",
                 key, run, fkv__hp_access);
