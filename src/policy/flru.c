/* F-LRU: the seed's utility score = alpha/access_count + beta*(now -
 * create_time), with alpha = 0.7 and beta = 0.3 by its grid search.  A
 * rarely read, old chunk scores highest, so the score is read as an
 * eviction priority: highest score first (the seed says "evict the lowest
 * utility", which taken literally keeps cold chunks: flru_literal.c).
 * Quotas, min_chunk_retention and TTL sit around it in the cache. */
#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    /* Evict the HIGHEST utility score alpha/access_count + beta*age first.
     * beta*now is common to all chunks, so the static key
     * -(alpha/access_count - beta*create/unit) orders them the same way
     * at any time and changes only when the chunk is read. */
    return p->beta * fkv__age_origin(p, ch) - p->alpha / (double)ch->m.access_count;
}

/* Among chunks read equally often the key grows with creation time: one
 * run per access count 1..FKV__HP_RUNS (fresh chunks, the bulk of a busy
 * cache, are count 1); hotter chunks go to the heap. */
static int run(const fkv__chunk *ch)
{
    return ch->m.access_count <= FKV__HP_RUNS ? (int)ch->m.access_count - 1 : -1;
}

FKV__HEAP_POLICY(fkv__policy_flru, "flru",
                 "F-LRU: evicts the highest alpha/access_count + beta*age first",
                 key, run, fkv__hp_access);
