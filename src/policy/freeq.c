/* vLLM v1's free block queue (vllm/v1/core/kv_cache_utils.py,
 * FreeKVCacheBlockQueue; vllm/v1/core/block_pool.py, BlockPool): a chunk
 * joins the queue's tail when it becomes evictable (free_blocks appends),
 * leaves it when it is pinned again (touch removes a prefix hit), and the
 * allocation that needs a page takes the head (get_new_blocks: popleft).
 * So the order is the order of becoming evictable, whatever was read when;
 * a read of an evictable chunk changes nothing (access NULL).  With
 * fkv_config.free_tail_first the cache hands a sequence's chunks over tail
 * first (single_type_kv_cache_manager.py, free: reversed(req_blocks)), so
 * a freed request loses its tail first and keeps the prefix it re-matches. */
#include <stdlib.h>

#include "core/chunk.h"

typedef struct freeq {
    fkv__chunk *head, *tail; /* head = evicted next; next points towards the tail */
} freeq;

static fkv_status create(const fkv__policy_params *p, void **state)
{
    (void)p;
    freeq *q = calloc(1, sizeof *q);
    if (!q) return FKV_ENOMEM;
    *state = q;
    return FKV_OK;
}

static void destroy(void *state)
{
    free(state);
}

static fkv_status insert(void *state, fkv__chunk *ch)
{
    freeq *q = state;
    ch->pn.next = NULL;
    ch->pn.prev = q->tail;
    if (q->tail) q->tail->pn.next = ch;
    else q->head = ch;
    q->tail = ch;
    return FKV_OK;
}

static void remove_(void *state, fkv__chunk *ch)
{
    freeq *q = state;
    if (ch->pn.prev) ch->pn.prev->pn.next = ch->pn.next;
    else q->head = ch->pn.next;
    if (ch->pn.next) ch->pn.next->pn.prev = ch->pn.prev;
    else q->tail = ch->pn.prev;
    ch->pn.prev = ch->pn.next = NULL;
}

static fkv__chunk *victim(void *state)
{
    return ((freeq *)state)->head;
}

const fkv__policy_ops fkv__policy_freeq = {
    .name = "freeq",
    .help = "vLLM's free block queue: the chunk that became evictable first goes first",
    .create = create,
    .destroy = destroy,
    .insert = insert,
    .remove = remove_,
    .access = NULL,
    .victim = victim,
};
