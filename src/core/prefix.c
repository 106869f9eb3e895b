/* Prefix index: a page-aligned hash chain, as vLLM's block hashes.
 *
 * Page i of a sequence is keyed by hash(key of page i-1, contents of page
 * i), so equal keys mean equal prefixes up to that page (up to 64-bit hash
 * collisions: with 2^20 resident pages the chance of any collision is about
 * 2^-24).  A chain needs no tree walk: matching a prompt is one hash and one
 * table probe per page, and the index is a flat open-addressing table sized
 * for every page, so it never grows.  A radix tree would also find partial
 * pages, which a page-aligned chain cannot; we give that up for the flat,
 * allocation-free lookup.  Contents are token ids (XXH3 over the page's
 * tokens) or, in hash-id mode, a trace's block id and the page's place in
 * its block.
 *
 * Only full pages are indexed, each by the chunk that wrote it; other chunks
 * sharing that page (after a fork or a partial match) do not index it. */
#include <stdlib.h>
#include <string.h>
/* xxHash compiled in (header-only mode): a page of the default 16 tokens
 * is hashed by a call with a constant length, which the compiler reduces
 * to the straight-line 64-byte path */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/internal.h"

fkv_status fkv__prefix_init(fkv_cache *c)
{
    /* only full pages are indexed, one entry each: the load factor stays
     * <= 1/2 (linear probing: 1.5 probes per hit, 2.5 per miss on average,
     * mostly in one cache line), and the table, 32 bytes a page, never grows */
    uint64_t cap = 16;
    while (cap < 2ull * c->n_pages) cap *= 2;
    c->ptab = malloc(cap * sizeof *c->ptab);
    if (!c->ptab) return FKV_ENOMEM;
    memset(c->ptab, 0, cap * sizeof *c->ptab); /* faulted in now, not by the first requests */
    c->pmask = cap - 1;
    return FKV_OK;
}

void fkv__prefix_fini(fkv_cache *c)
{
    free(c->ptab);
}

static uint64_t nonzero(uint64_t h)
{
    return h ? h : 0x9e3779b97f4a7c15ull;
}

uint64_t fkv__hash_tokens(uint64_t parent, const int32_t *tokens, uint32_t n)
{
    if (n == 16) return nonzero(XXH3_64bits_withSeed(tokens, 16 * sizeof *tokens, parent));
    return nonzero(XXH3_64bits_withSeed(tokens, (size_t)n * sizeof *tokens, parent));
}

uint64_t fkv_page_key(uint64_t parent, const int32_t *tokens, uint32_t page_tokens)
{
    return fkv__hash_tokens(parent, tokens, page_tokens);
}

uint64_t fkv__hash_block(uint64_t parent, uint64_t block_id, uint32_t page_in_block)
{
    uint64_t buf[2] = {block_id, page_in_block};
    return nonzero(XXH3_64bits_withSeed(buf, sizeof buf, parent ^ 0x5bd1e9955bd1e995ull));
}

fkv__pentry *fkv__prefix_find(fkv_cache *c, uint64_t key)
{
    for (uint64_t i = key & c->pmask;; i = (i + 1) & c->pmask) {
        fkv__pentry *e = &c->ptab[i];
        if (e->key == key) return e;
        if (e->key == 0) return NULL;
    }
}

/* Keeps the first writer of a key: a second copy of the same prefix is not
 * indexed (and is freed when its own sequence lets go of it). */
void fkv__prefix_insert(fkv_cache *c, uint64_t key, fkv__chunk *ch)
{
    if (c->pcount >= (c->pmask + 1) / 2) return; /* cannot happen: one entry per page at most */
    for (uint64_t i = key & c->pmask;; i = (i + 1) & c->pmask) {
        fkv__pentry *e = &c->ptab[i];
        if (e->key == key) return;
        if (e->key == 0) {
            e->key = key;
            e->chunk = ch;
            c->pcount++;
            return;
        }
    }
}

/* Inserts a batch, prefetching every home slot first so that the cache
 * misses of a whole append overlap instead of following one another. */
void fkv__prefix_insert_batch(fkv_cache *c, const fkv__pentry *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) fkv__prefix_prefetch(c, e[i].key);
    for (uint32_t i = 0; i < n; i++) fkv__prefix_insert(c, e[i].key, e[i].chunk);
}

/* Removes key if `ch` is the chunk indexed under it (backward-shift
 * deletion keeps probe chains intact without tombstones). */
void fkv__prefix_remove(fkv_cache *c, uint64_t key, const fkv__chunk *ch)
{
    fkv__pentry *e = fkv__prefix_find(c, key);
    if (!e || e->chunk != ch) return;
    uint64_t i = (uint64_t)(e - c->ptab);
    c->pcount--;
    for (;;) {
        c->ptab[i].key = 0;
        uint64_t j = i;
        for (;;) {
            j = (j + 1) & c->pmask;
            if (c->ptab[j].key == 0) return;
            uint64_t home = c->ptab[j].key & c->pmask;
            /* move j back to i unless its home lies cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        c->ptab[i] = c->ptab[j];
        i = j;
    }
}

void fkv__prefix_repoint(fkv_cache *c, uint64_t key, const fkv__chunk *from, fkv__chunk *to)
{
    fkv__pentry *e = fkv__prefix_find(c, key);
    if (e && e->chunk == from) e->chunk = to;
}
