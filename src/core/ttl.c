/* The TTL tier's order: cached chunks by predicted expiry on the request
 * clock (key = last prefix hit + predicted TTL, in requests; chunk.c).
 *
 * Eviction only ever asks for the entries whose key is below the clock,
 * so only those need to be in key order.  A chunk goes into the heap when
 * its key is near (below ttl_next buckets of TTL_W requests); a farther
 * one waits unordered in its bucket's list on a wheel of TTL_NB buckets,
 * and one beyond the wheel in an overflow list.  As the clock passes a
 * bucket, its list moves into the heap; each full turn of the wheel, the
 * overflow entries that now fit move onto it.  Entering and leaving a list
 * is O(1) and touches two neighbours, where a heap touches a chunk per
 * level: most cached chunks leave the tier by eviction long before their
 * expiry, and so never pay for a heap.
 *
 * The heap then holds every entry with a key below the clock, in the same
 * (key, chunk id) order as a single heap of all entries: the victims are
 * the same.  Keys are refreshed lazily, as before: a top that was read
 * since it was keyed gets its real expiry and goes back in. */
#include <math.h>
#include <stddef.h>

#include "core/internal.h"


/* bucket of a key; keys are >= 0 (request counts) */
static uint64_t bucket(double key)
{
    return (uint64_t)(key / FKV__TTL_W);
}

static fkv__list *list_of(fkv_cache *c, const fkv__chunk *ch)
{
    return ch->ttl.where == FKV__TTL_WHEEL ? &c->ttl_wheel[bucket(ch->ttl.key) % FKV__TTL_NB] : &c->ttl_over;
}

static void list_push(fkv__list *l, fkv__chunk *ch)
{
    fkv__list_push_front(l, ch, FKV__LINK(lk.ttl));
}

static void list_unlink(fkv__list *l, fkv__chunk *ch)
{
    fkv__list_unlink(l, ch, FKV__LINK(lk.ttl));
}

/* Files ch under `key` where the tier's invariant says it belongs. */
static void file(fkv_cache *c, fkv__chunk *ch, double key)
{
    ch->ttl.key = key;
    if (key < (double)c->ttl_next * FKV__TTL_W) {
        if (fkv__heap_push(&c->ttl_heap, ch, key) != FKV_OK) return; /* out of memory: not in the tier */
        ch->ttl.where = FKV__TTL_HEAP;
    } else if (key < (double)c->ttl_end * FKV__TTL_W) {
        ch->ttl.where = FKV__TTL_WHEEL;
        list_push(list_of(c, ch), ch);
        c->ttl_n_wheel++;
    } else {
        ch->ttl.where = FKV__TTL_OVER;
        list_push(&c->ttl_over, ch);
    }
    c->ttl_n++;
}

void fkv__ttl_add(fkv_cache *c, fkv__chunk *ch)
{
    if (ch->ttl.where == FKV__TTL_NONE) file(c, ch, (double)ch->ttl.last_req + ch->ttl.req);
}

void fkv__ttl_remove(fkv_cache *c, fkv__chunk *ch)
{
    switch (ch->ttl.where) {
    case FKV__TTL_NONE: return;
    case FKV__TTL_HEAP: fkv__heap_remove(&c->ttl_heap, ch); break;
    default:
        c->ttl_n_wheel -= ch->ttl.where == FKV__TTL_WHEEL;
        list_unlink(list_of(c, ch), ch);
        break;
    }
    ch->ttl.where = FKV__TTL_NONE;
    c->ttl_n--;
}

/* Moves buckets into the heap until it holds every key below `clock`. */
static void advance(fkv_cache *c, double clock)
{
    while ((double)c->ttl_next * FKV__TTL_W < clock) {
        if (!c->ttl_n) { /* nothing waits: jump to the clock */
            uint64_t b = bucket(clock) + 1;
            c->ttl_next = b;
            c->ttl_end = (b / FKV__TTL_NB + 1) * FKV__TTL_NB;
            return;
        }
        if (c->ttl_next == c->ttl_end) { /* a full turn: what now fits comes onto the wheel */
            c->ttl_end += FKV__TTL_NB;
            fkv__chunk *ch = c->ttl_over.head;
            while (ch) {
                fkv__chunk *nx = ch->lk.ttl.next;
                if (bucket(ch->ttl.key) < c->ttl_end) {
                    list_unlink(&c->ttl_over, ch);
                    ch->ttl.where = FKV__TTL_WHEEL;
                    list_push(list_of(c, ch), ch);
                    c->ttl_n_wheel++;
                }
                ch = nx;
            }
        }
        if (!c->ttl_n_wheel) { /* empty buckets: straight to the clock, or to the turn */
            uint64_t b = (uint64_t)ceil(clock / FKV__TTL_W);
            c->ttl_next = b < c->ttl_end ? b : c->ttl_end;
            continue;
        }
        fkv__list *head = &c->ttl_wheel[c->ttl_next % FKV__TTL_NB];
        while (head->head) {
            fkv__chunk *ch = head->head;
            if (fkv__heap_push(&c->ttl_heap, ch, ch->ttl.key) != FKV_OK) return; /* retried next time */
            list_unlink(head, ch);
            ch->ttl.where = FKV__TTL_HEAP;
            c->ttl_n_wheel--;
        }
        c->ttl_next++;
    }
}

fkv__chunk *fkv__ttl_expired(fkv_cache *c)
{
    double clock = (double)c->n_requests;
    advance(c, clock);
    uint64_t clock_enc = fkv__key_enc(clock);
    while (c->ttl_heap.n && c->ttl_heap.a[0].key < clock_enc) {
        fkv__chunk *top = (fkv__chunk *)c->ttl_heap.a[0].item;
        double real = (double)top->ttl.last_req + top->ttl.req;
        if (real < clock) return top;
        if (real < (double)c->ttl_next * FKV__TTL_W) {
            top->ttl.key = real;
            fkv__heap_fix(&c->ttl_heap, top, real);
        } else { /* far again: back to the wheel */
            fkv__ttl_remove(c, top);
            file(c, top, real);
        }
    }
    return NULL;
}
