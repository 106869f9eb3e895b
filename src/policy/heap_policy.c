/* The common engine of key-ordered policies (fifo, lru, flru, flru-literal,
 * belady): each chunk's key is a number that changes only when the chunk is
 * read, and the victim is the chunk with the smallest (key, chunk id).
 *
 * Keys mostly arrive in order: FIFO's creation time and LRU's last access
 * grow with the clock, and so does F-LRU's key among chunks read equally
 * often (beta * creation time - alpha / count, for one count).  The policy
 * names the run a chunk's key belongs to (runfn); a chunk that ranks after
 * its run's tail is appended to it (a linked list: O(1) in, O(1) out), any
 * other goes into a min-heap (O(log n)).  The victim is the smallest of the
 * runs' heads and the heap's top, so the order is exactly that of one heap
 * over all chunks, and no periodic rescoring is needed.  Keys with no
 * order in time (Belady's next use) go to the heap. */
#include <stddef.h>
#include <stdlib.h>

#include "core/chunk.h"
#include "util/heap.h"

#define RUNS FKV__HP_RUNS

struct fkv__heap_policy {
    fkv__heap heap;
    struct {
        fkv__chunk *head, *tail; /* smallest first */
    } run[RUNS];
    fkv__keyfn key;
    fkv__runfn run_of;
    fkv__policy_params p;
};


__extension__ typedef unsigned __int128 u128;

static u128 rank(const fkv__chunk *ch)
{
    return (u128)fkv__key_enc(ch->pn.key) << 64 | ch->id;
}

fkv_status fkv__hp_create(const fkv__policy_params *p, fkv__keyfn key, fkv__runfn run, void **state)
{
    fkv__heap_policy *hp = calloc(1, sizeof *hp);
    if (!hp) return FKV_ENOMEM;
    fkv__heap_init(&hp->heap, offsetof(fkv__chunk, pn.hidx), offsetof(fkv__chunk, id));
    hp->key = key;
    hp->run_of = run;
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

static void run_link_after(fkv__heap_policy *hp, int r, fkv__chunk *x, fkv__chunk *ch)
{
    ch->pn.in_run = (uint8_t)(r + 1);
    ch->pn.prev = x;
    ch->pn.next = x ? x->pn.next : hp->run[r].head;
    if (ch->pn.next) ch->pn.next->pn.prev = ch;
    else hp->run[r].tail = ch;
    if (x) x->pn.next = ch;
    else hp->run[r].head = ch;
}

static int run_of(const fkv__heap_policy *hp, const fkv__chunk *ch)
{
    int r = hp->run_of ? hp->run_of(ch) : -1;
    return r >= 0 && r < RUNS ? r : -1;
}

/* ch->pn.key is set */
static fkv_status place(fkv__heap_policy *hp, fkv__chunk *ch)
{
    int r = run_of(hp, ch);
    if (r >= 0 && (!hp->run[r].tail || rank(ch) > rank(hp->run[r].tail))) {
        run_link_after(hp, r, hp->run[r].tail, ch);
        return FKV_OK;
    }
    ch->pn.in_run = 0;
    return fkv__heap_push(&hp->heap, ch, ch->pn.key);
}

fkv_status fkv__hp_insert(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    ch->pn.key = hp->key(&hp->p, ch);
    return place(hp, ch);
}

void fkv__hp_remove(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    if (!ch->pn.in_run) {
        fkv__heap_remove(&hp->heap, ch);
        return;
    }
    int r = ch->pn.in_run - 1;
    if (ch->pn.prev) {
        ch->pn.prev->pn.next = ch->pn.next;
    } else {
        hp->run[r].head = ch->pn.next;
        /* a head leaves, usually as the victim: the chunk after the new
         * head is likely next, and nobody has read it for a while, so its
         * lines are fetched now (the new head's were, one eviction ago) */
        fkv__chunk *n2 = ch->pn.next ? ch->pn.next->pn.next : NULL;
        if (n2)
            for (size_t off = 0; off < sizeof *n2; off += 64) __builtin_prefetch((const char *)n2 + off);
    }
    if (ch->pn.next) ch->pn.next->pn.prev = ch->pn.prev;
    else hp->run[r].tail = ch->pn.prev;
    ch->pn.prev = ch->pn.next = NULL;
    ch->pn.in_run = 0;
}

void fkv__hp_access(void *state, fkv__chunk *ch)
{
    fkv__heap_policy *hp = state;
    double k = hp->key(&hp->p, ch);
    if (k == ch->pn.key) return;
    if (!ch->pn.in_run) {
        int r = run_of(hp, ch);
        u128 rk = (u128)fkv__key_enc(k) << 64 | ch->id;
        if (r < 0 || (hp->run[r].tail && rk < rank(hp->run[r].tail))) {
            ch->pn.key = k; /* stays in the heap: re-keyed in place */
            fkv__heap_fix(&hp->heap, ch, k);
            return;
        }
    }
    fkv__hp_remove(hp, ch);
    ch->pn.key = k;
    if (place(hp, ch) != FKV_OK) {
        /* the heap could not grow (only possible when ch came from a
         * run): walk run 0 from its tail to ch's place rather than lose it */
        fkv__chunk *x = hp->run[0].tail;
        while (x && rank(x) > rank(ch)) x = x->pn.prev;
        run_link_after(hp, 0, x, ch);
    }
}

fkv__chunk *fkv__hp_victim(void *state)
{
    fkv__heap_policy *hp = state;
    fkv__chunk *v = hp->heap.n ? (fkv__chunk *)hp->heap.a[0].item : NULL;
    u128 rv = v ? (u128)hp->heap.a[0].key << 64 | v->id : 0;
    for (int r = 0; r < RUNS; r++) {
        fkv__chunk *h = hp->run[r].head;
        if (!h) continue;
        u128 rh = rank(h);
        if (!v || rh < rv) v = h, rv = rh;
    }
    return v;
}
