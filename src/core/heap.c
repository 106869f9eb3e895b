/* Indexed binary min-heap of chunks ordered by (double key, chunk id).  The
 * chunk stores its 1-based position, so removal and key changes are
 * O(log n) without searching.  Used by the heap policies and the TTL tier. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define IDX(ch) (*(uint32_t *)((char *)(ch) + idx_off))
#define KEY(ch) (*(const double *)((const char *)(ch) + key_off))

static int less(const fkv__chunk *a, const fkv__chunk *b, size_t key_off)
{
    double ka = KEY(a), kb = KEY(b);
    if (ka != kb) return ka < kb;
    return a->id < b->id;
}

static void put(fkv__heap *h, uint32_t pos, fkv__chunk *ch, size_t idx_off)
{
    h->a[pos] = ch;
    IDX(ch) = pos;
}

static void sift_up(fkv__heap *h, uint32_t pos, size_t idx_off, size_t key_off)
{
    fkv__chunk *ch = h->a[pos];
    while (pos > 1) {
        uint32_t parent = pos / 2;
        if (!less(ch, h->a[parent], key_off)) break;
        put(h, pos, h->a[parent], idx_off);
        pos = parent;
    }
    put(h, pos, ch, idx_off);
}

static void sift_down(fkv__heap *h, uint32_t pos, size_t idx_off, size_t key_off)
{
    fkv__chunk *ch = h->a[pos];
    for (;;) {
        uint32_t l = pos * 2, best = pos;
        fkv__chunk *bc = ch;
        if (l <= h->n && less(h->a[l], bc, key_off)) best = l, bc = h->a[l];
        if (l + 1 <= h->n && less(h->a[l + 1], bc, key_off)) best = l + 1, bc = h->a[l + 1];
        if (best == pos) break;
        put(h, pos, bc, idx_off);
        pos = best;
    }
    put(h, pos, ch, idx_off);
}

fkv_status fkv__heap_push(fkv__heap *h, fkv__chunk *ch, size_t idx_off, size_t key_off)
{
    if (h->n + 1 >= h->cap) {
        uint32_t ncap = h->cap ? h->cap * 2 : 64;
        fkv__chunk **na = realloc(h->a, (size_t)ncap * sizeof *na);
        if (!na) return FKV_ENOMEM;
        h->a = na;
        h->cap = ncap;
    }
    h->n++;
    put(h, h->n, ch, idx_off);
    sift_up(h, h->n, idx_off, key_off);
    return FKV_OK;
}

void fkv__heap_remove(fkv__heap *h, fkv__chunk *ch, size_t idx_off, size_t key_off)
{
    uint32_t pos = IDX(ch);
    IDX(ch) = 0;
    fkv__chunk *last = h->a[h->n--];
    if (pos == h->n + 1) return;
    put(h, pos, last, idx_off);
    sift_up(h, pos, idx_off, key_off);
    sift_down(h, IDX(last), idx_off, key_off);
}

void fkv__heap_fix(fkv__heap *h, fkv__chunk *ch, size_t idx_off, size_t key_off)
{
    uint32_t pos = IDX(ch);
    sift_up(h, pos, idx_off, key_off);
    sift_down(h, IDX(ch), idx_off, key_off);
}

void fkv__heap_free(fkv__heap *h)
{
    free(h->a);
    memset(h, 0, sizeof *h);
}
