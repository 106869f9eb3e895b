/* flru-lowest: the seed's F-LRU taken literally, evicting the lowest
 * utility score first ("flru-literal", its first name, is still accepted).
 * Kept so the benchmark can show why the reading in flru.c is the sensible
 * one: this evicts hot, young chunks. */
#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    /* lowest score alpha/access_count + beta*age first; the static key is
     * alpha/access_count - beta*create/unit (see flru.c) */
    return p->alpha / (double)ch->m.access_count - p->beta * fkv__age_origin(p, ch);
}

FKV__HEAP_POLICY(fkv__policy_flru_literal, "flru-lowest",
                 "F-LRU evicting the lowest score first, as the seed words it (hot young chunks go first)",
                 key, NULL, fkv__hp_access);
