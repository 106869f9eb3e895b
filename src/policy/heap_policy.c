/* The common engine of key-ordered policies (fifo, lru, flru, flru-literal,
 * belady): each chunk's key is a number that changes only when the chunk is
 * read, so a min-heap gives the victim in O(1) and every update in
 * O(log n), with no periodic rescoring.  A policy supplies the key. */
#include <stddef.h>
#include <stdlib.h>

#include "core/internal.h"

struct fkv__heap_policy {
    fkv__heap heap;
    fkv__keyfn key;
    fkv__policy_params p;
};

#define HP_IDX offsetof(fkv__chunk, pn.hidx)

fkv_status fkv__hp_create(const fkv__policy_params *p, fkv__keyfn key, void **state)
{
    fkv__heap_policy *hp = calloc(1, sizeof *hp);
    if (!hp) return FKV_ENOMEM;
    hp->key = key;
    hp->p = *p;
    *state = hp;
    return FKV_OK;
}

void fkv__hp_destroy(void *state)
{
    fkv__heap_policy *hp = state;
    if (!hp) return;
    fkv__heap_free(&hp->heap);
    free(hp);
}

fkv_status fkv__hp_insert(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    ch->pn.key = hp->key(&hp->p, ch);
    return fkv__heap_push(&hp->heap, ch, ch->pn.key, HP_IDX);
}

void fkv__hp_remove(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    fkv__heap_remove(&hp->heap, ch, HP_IDX);
}

void fkv__hp_access(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    double k = hp->key(&hp->p, ch);
    if (k == ch->pn.key) return;
    ch->pn.key = k;
    fkv__heap_fix(&hp->heap, ch, k, HP_IDX);
}

fkv__chunk *fkv__hp_victim(void *state)
{
    fkv__heap_policy *hp = state;
    return hp->heap.n ? hp->heap.a[0].ch : NULL;
}
