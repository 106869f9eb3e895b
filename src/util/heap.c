/* Indexed 4-ary min-heap of items ordered by (key, id).  Keys live in the
 * heap array itself, 16-byte entries whose groups of four children are
 * aligned to one cache line, so a level of a sift reads one line and
 * compares 64-bit keys; only on equal keys (rare) is an item's id read.
 * Four children per node halve the depth of a binary heap.  Each item
 * stores its position (+1) at idx_off, so removal and key changes are
 * O(log n) without searching.  Used by the cache's heap policies and its
 * TTL tier. */
#include "util/heap.h"

#include <stdlib.h>
#include <string.h>

#define IDX(it) (*(uint32_t *)((char *)(it) + h->idx_off))
#define ID(it) (*(const uint64_t *)((const char *)(it) + h->id_off))
#define D 4

static inline int less(const fkv__heap *h, const fkv__hent *a, const fkv__hent *b)
{
    return a->key < b->key || (a->key == b->key && ID(a->item) < ID(b->item));
}

void fkv__heap_init(fkv__heap *h, size_t idx_off, size_t id_off)
{
    memset(h, 0, sizeof *h);
    h->idx_off = idx_off;
    h->id_off = id_off;
}

static void sift_up(fkv__heap *h, uint32_t pos, fkv__hent e)
{
    while (pos > 0) {
        uint32_t parent = (pos - 1) / D;
        if (!less(h, &e, &h->a[parent])) break;
        h->a[pos] = h->a[parent];
        IDX(h->a[pos].item) = pos + 1;
        pos = parent;
    }
    h->a[pos] = e;
    IDX(e.item) = pos + 1;
}

/* Index of the smallest of the children [first, first + D) clipped to n.
 * With all four present (every level but the last) the least key is found
 * without branching; only if another child has the same key do ids decide. */
static inline uint32_t min_child(const fkv__heap *h, uint32_t first)
{
    const fkv__hent *a = &h->a[first];
    if (first + D <= h->n) {
        uint64_t k0 = a[0].key, k1 = a[1].key, k2 = a[2].key, k3 = a[3].key;
        uint32_t i01 = k1 < k0, i23 = 2 + (k3 < k2);
        uint64_t m01 = k1 < k0 ? k1 : k0, m23 = k3 < k2 ? k3 : k2;
        /* no tie anywhere the least could be: ids are not needed */
        if (k0 != k1 && k2 != k3 && m01 != m23) return first + (m23 < m01 ? i23 : i01);
    }
    uint32_t best = first;
    for (uint32_t k = first + 1; k < h->n && k < first + D; k++)
        if (less(h, &h->a[k], &h->a[best])) best = k;
    return best;
}

static void sift_down(fkv__heap *h, uint32_t pos, fkv__hent e)
{
    for (;;) {
        uint32_t first = pos * D + 1;
        if (first >= h->n) break;
        uint32_t best = min_child(h, first);
        if (!less(h, &h->a[best], &e)) break;
        h->a[pos] = h->a[best];
        IDX(h->a[pos].item) = pos + 1;
        pos = best;
    }
    h->a[pos] = e;
    IDX(e.item) = pos + 1;
}

/* The array is placed 3 entries past a 64-byte boundary: the children of
 * node i, entries 4i+1 .. 4i+4, then start on a line. */
static int grow(fkv__heap *h)
{
    uint32_t ncap = h->cap ? h->cap * 2 : 64;
    size_t bytes = ((size_t)ncap + 3) * sizeof(fkv__hent);
    void *mem = aligned_alloc(64, (bytes + 63) / 64 * 64); /* a multiple of the alignment */
    if (!mem) return 0;
    fkv__hent *na = (fkv__hent *)mem + 3;
    if (h->n) memcpy(na, h->a, (size_t)h->n * sizeof *na);
    free(h->mem);
    h->mem = mem;
    h->a = na;
    h->cap = ncap;
    return 1;
}

fkv_status fkv__heap_push(fkv__heap *h, void *item, double key)
{
    if (h->n == h->cap && !grow(h)) return FKV_ENOMEM;
    fkv__hent e = {fkv__key_enc(key), item};
    sift_up(h, h->n++, e);
    return FKV_OK;
}

/* Removal fills the hole bottom-up: the hole follows the smaller child
 * down to a leaf (D - 1 compares a level, not D), then the last entry
 * goes into it and rises.  The last entry of a heap usually belongs near
 * the bottom, so it rarely rises more than a level; a top-down sift would
 * compare it at every level on the way down. */
void fkv__heap_remove(fkv__heap *h, void *item)
{
    uint32_t pos = IDX(item) - 1;
    IDX(item) = 0;
    fkv__hent last = h->a[--h->n];
    if (pos == h->n) return;
    for (;;) {
        uint32_t first = pos * D + 1;
        if (first >= h->n) break;
        uint32_t best = min_child(h, first);
        h->a[pos] = h->a[best];
        IDX(h->a[pos].item) = pos + 1;
        pos = best;
    }
    sift_up(h, pos, last);
}

void fkv__heap_fix(fkv__heap *h, void *item, double key)
{
    uint32_t pos = IDX(item) - 1;
    fkv__hent e = h->a[pos];
    uint64_t k = fkv__key_enc(key);
    int up = k < e.key;
    e.key = k;
    if (up) sift_up(h, pos, e);
    else sift_down(h, pos, e);
}

void fkv__heap_free(fkv__heap *h)
{
    free(h->mem);
    fkv__heap_init(h, h->idx_off, h->id_off);
}
