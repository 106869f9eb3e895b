/* SIEVE (Zhang et al., NSDI'24): a FIFO queue with a "visited" bit and a
 * hand that moves from the oldest entry towards the newest.  A read only
 * sets the bit (no list move, which is why it is cheap and scan-resistant);
 * the hand clears set bits as it passes and evicts the first chunk whose
 * bit is clear.  New chunks enter at the head; the hand keeps its place
 * between evictions.  A chunk re-entering after a pin counts as visited. */
#include <stdlib.h>

#include "core/chunk.h"

typedef struct sieve {
    fkv__chunk *head, *tail; /* head = newest; prev points towards the head */
    fkv__chunk *hand;
} sieve;

static fkv_status create(const fkv__policy_params *p, void **state)
{
    (void)p;
    sieve *s = calloc(1, sizeof *s);
    if (!s) return FKV_ENOMEM;
    *state = s;
    return FKV_OK;
}

static void destroy(void *state)
{
    free(state);
}

static fkv_status insert(void *state, fkv__chunk *ch)
{
    sieve *s = state;
    ch->pn.prev = NULL;
    ch->pn.next = s->head;
    if (s->head) s->head->pn.prev = ch;
    s->head = ch;
    if (!s->tail) s->tail = ch;
    ch->pn.visited = ch->m.access_count > 1;
    return FKV_OK;
}

static void remove_(void *state, fkv__chunk *ch)
{
    sieve *s = state;
    if (s->hand == ch) s->hand = ch->pn.prev;
    if (ch->pn.prev) ch->pn.prev->pn.next = ch->pn.next;
    else s->head = ch->pn.next;
    if (ch->pn.next) ch->pn.next->pn.prev = ch->pn.prev;
    else s->tail = ch->pn.prev;
    ch->pn.prev = ch->pn.next = NULL;
}

static void access_(void *state, fkv__chunk *ch)
{
    (void)state;
    ch->pn.visited = 1;
}

static fkv__chunk *victim(void *state)
{
    sieve *s = state;
    if (!s->tail) return NULL;
    fkv__chunk *h = s->hand ? s->hand : s->tail;
    /* at most one full lap clears every bit, so this ends */
    while (h->pn.visited) {
        h->pn.visited = 0;
        h = h->pn.prev ? h->pn.prev : s->tail;
    }
    s->hand = h;
    return h;
}

const fkv__policy_ops fkv__policy_sieve = {
    .name = "sieve",
    .help = "SIEVE: FIFO with a visited bit and a moving hand (NSDI'24)",
    .create = create,
    .destroy = destroy,
    .insert = insert,
    .remove = remove_,
    .access = access_,
    .victim = victim,
};
