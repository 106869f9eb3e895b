/* Indexed 4-ary min-heap of chunks ordered by (key, chunk id).  Keys and
 * ids live in the heap array itself, so a sift reads one or two contiguous
 * cache lines per level instead of dereferencing every chunk it compares;
 * four children per node halve the depth of a binary heap.  Each chunk
 * stores its position (+1) at idx_off, so removal and key changes are
 * O(log n) without searching.  Used by the heap policies and the TTL tier. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define IDX(ch) (*(uint32_t *)((char *)(ch) + idx_off))
#define D 4

static int less(const fkv__hent *a, const fkv__hent *b)
{
    return a->key < b->key || (a->key == b->key && a->id < b->id);
}

static void sift_up(fkv__heap *h, uint32_t pos, fkv__hent e, size_t idx_off)
{
    while (pos > 0) {
        uint32_t parent = (pos - 1) / D;
        if (!less(&e, &h->a[parent])) break;
        h->a[pos] = h->a[parent];
        IDX(h->a[pos].ch) = pos + 1;
        pos = parent;
    }
    h->a[pos] = e;
    IDX(e.ch) = pos + 1;
}

static void sift_down(fkv__heap *h, uint32_t pos, fkv__hent e, size_t idx_off)
{
    for (;;) {
        uint32_t first = pos * D + 1;
        if (first >= h->n) break;
        uint32_t last = first + D < h->n ? first + D : h->n, best = first;
        for (uint32_t k = first + 1; k < last; k++)
            if (less(&h->a[k], &h->a[best])) best = k;
        if (!less(&h->a[best], &e)) break;
        h->a[pos] = h->a[best];
        IDX(h->a[pos].ch) = pos + 1;
        pos = best;
    }
    h->a[pos] = e;
    IDX(e.ch) = pos + 1;
}

fkv_status fkv__heap_push(fkv__heap *h, fkv__chunk *ch, double key, size_t idx_off)
{
    if (h->n == h->cap) {
        uint32_t ncap = h->cap ? h->cap * 2 : 64;
        fkv__hent *na = realloc(h->a, (size_t)ncap * sizeof *na);
        if (!na) return FKV_ENOMEM;
        h->a = na;
        h->cap = ncap;
    }
    fkv__hent e = {key, ch->id, ch};
    sift_up(h, h->n++, e, idx_off);
    return FKV_OK;
}

void fkv__heap_remove(fkv__heap *h, fkv__chunk *ch, size_t idx_off)
{
    uint32_t pos = IDX(ch) - 1;
    IDX(ch) = 0;
    fkv__hent last = h->a[--h->n];
    if (pos == h->n) return;
    if (less(&last, &h->a[pos])) sift_up(h, pos, last, idx_off);
    else sift_down(h, pos, last, idx_off);
}

void fkv__heap_fix(fkv__heap *h, fkv__chunk *ch, double key, size_t idx_off)
{
    uint32_t pos = IDX(ch) - 1;
    fkv__hent e = h->a[pos];
    int up = key < e.key;
    e.key = key;
    if (up) sift_up(h, pos, e, idx_off);
    else sift_down(h, pos, e, idx_off);
}

void fkv__heap_free(fkv__heap *h)
{
    free(h->a);
    memset(h, 0, sizeof *h);
}
