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

__extension__ typedef unsigned __int128 u128;

/* (key, id) as one integer: key in the high half, the unique id below */
static inline u128 rank(const fkv__hent *e)
{
    return (u128)e->key << 64 | e->id;
}

static void sift_up(fkv__heap *h, uint32_t pos, fkv__hent e, size_t idx_off)
{
    u128 r = rank(&e);
    while (pos > 0) {
        uint32_t parent = (pos - 1) / D;
        if (r >= rank(&h->a[parent])) break;
        h->a[pos] = h->a[parent];
        IDX(h->a[pos].ch) = pos + 1;
        pos = parent;
    }
    h->a[pos] = e;
    IDX(e.ch) = pos + 1;
}

/* Index of the smallest of the children [first, first + D) clipped to n:
 * a branch-free tournament when all four exist (every level but the last). */
static inline uint32_t min_child(const fkv__heap *h, uint32_t first)
{
    const fkv__hent *a = &h->a[first];
    if (first + D <= h->n) {
        u128 r0 = rank(&a[0]), r1 = rank(&a[1]), r2 = rank(&a[2]), r3 = rank(&a[3]);
        uint32_t i01 = r1 < r0, i23 = 2 + (r3 < r2);
        u128 m01 = r1 < r0 ? r1 : r0, m23 = r3 < r2 ? r3 : r2;
        return first + (m23 < m01 ? i23 : i01);
    }
    uint32_t best = first;
    u128 rb = rank(&a[0]);
    for (uint32_t k = first + 1; k < h->n; k++) {
        u128 rk = rank(&h->a[k]);
        if (rk < rb) best = k, rb = rk;
    }
    return best;
}

static void sift_down(fkv__heap *h, uint32_t pos, fkv__hent e, size_t idx_off)
{
    u128 r = rank(&e);
    for (;;) {
        uint32_t first = pos * D + 1;
        if (first >= h->n) break;
        uint32_t best = min_child(h, first);
        if (rank(&h->a[best]) >= r) break;
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
    fkv__hent e = {ch->id, fkv__key_enc(key), ch};
    sift_up(h, h->n++, e, idx_off);
    return FKV_OK;
}

/* Removal fills the hole bottom-up: the hole follows the smaller child
 * down to a leaf (D - 1 compares a level, not D), then the last entry
 * goes into it and rises.  The last entry of a heap usually belongs near
 * the bottom, so it rarely rises more than a level; a top-down sift would
 * compare it at every level on the way down. */
void fkv__heap_remove(fkv__heap *h, fkv__chunk *ch, size_t idx_off)
{
    uint32_t pos = IDX(ch) - 1;
    IDX(ch) = 0;
    fkv__hent last = h->a[--h->n];
    if (pos == h->n) return;
    for (;;) {
        uint32_t first = pos * D + 1;
        if (first >= h->n) break;
        uint32_t best = min_child(h, first);
        h->a[pos] = h->a[best];
        IDX(h->a[pos].ch) = pos + 1;
        pos = best;
    }
    sift_up(h, pos, last, idx_off);
}

void fkv__heap_fix(fkv__heap *h, fkv__chunk *ch, double key, size_t idx_off)
{
    uint32_t pos = IDX(ch) - 1;
    fkv__hent e = h->a[pos];
    uint64_t k = fkv__key_enc(key);
    int up = k < e.key;
    e.key = k;
    if (up) sift_up(h, pos, e, idx_off);
    else sift_down(h, pos, e, idx_off);
}

void fkv__heap_free(fkv__heap *h)
{
    free(h->a);
    memset(h, 0, sizeof *h);
}
