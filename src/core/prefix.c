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
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/internal.h"
#include "fairkv_quant.h"

/* The most logical (base) pages one stored page can hold: a quantized
 * chunk keeps the entries of all its logical pages in fewer stored ones
 * (int4 of f16: 4, of f32: 8).  Any chunk may be quantized (quant_mode, a
 * reclaim ladder's quantize steps, both decided after the cache is made),
 * so this is the densest codec's figure for the cache's geometry. */
static uint64_t logical_per_page(const fkv_cache *c)
{
    fkv_kv_geom g;
    fkv__kv_geom(c, &g);
    static const fkv_dtype codecs[] = {FKV_INT8, FKV_INT4, FKV_FP8};
    uint64_t most = 1;
    for (size_t i = 0; i < sizeof codecs / sizeof *codecs; i++) {
        uint64_t per = fkv_quant_tokens_per_page(&g, codecs[i]) / c->cfg.page_tokens;
        if (per > most) most = per;
    }
    return most;
}

fkv_status fkv__prefix_init(fkv_cache *c)
{
    /* only full pages are indexed, one entry each; two slots a page keep
     * the load <= 1/2: a bucket of 4 holds 2 entries on average when every
     * page is indexed, and about 4% of keys then sit past their home
     * bucket.  Pages are counted as logical ones (logical_per_page: sized
     * by stored pages alone, a cache full of int4 chunks filled the table
     * and the entries past it were dropped, so most quantized chunks could
     * never be matched).  The table, 32 bytes a logical page, never grows. */
    uint64_t nb = 4, per = logical_per_page(c), pages = (uint64_t)c->n_pages * per;
    /* demoted chunks keep their entries: room for a host tier full of them */
    if (c->cfg.host_demote) pages += per * (c->cfg.host_capacity_bytes / c->page_bytes + 1);
    while (nb * FKV__PBUCKET < 2ull * pages) nb *= 2;
    size_t bytes = nb * FKV__PBUCKET * sizeof *c->ptab;
    c->ptab = fkv__table_alloc(bytes);
    c->povf = malloc(nb);
    if (!c->ptab || !c->povf) {
        free(c->ptab);
        free(c->povf);
        c->ptab = NULL;
        c->povf = NULL;
        return FKV_ENOMEM;
    }
    memset(c->ptab, 0, bytes); /* faulted in now, not by the first requests */
    memset(c->povf, 0, nb);
    c->pbmask = nb - 1;
    return FKV_OK;
}

void fkv__prefix_fini(fkv_cache *c)
{
    free(c->ptab);
    free(c->povf);
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

/* Buckets of FKV__PBUCKET entries, one cache line, probed linearly from
 * the key's home bucket.  povf[b] counts the entries that passed bucket b
 * because it was full (saturating at 255, then never decremented): a walk
 * stops at the first bucket with no such entries, so a removal only clears
 * its slot and walks back the counts, with no shifting and no tombstones. */
static inline uint64_t next_bucket(const fkv_cache *c, uint64_t b)
{
    return (b + 1) & c->pbmask;
}

/* bit k set where bucket slot k holds key: no branch on which slot */
#if defined(__SSE2__)
static inline unsigned bucket_match(const fkv__pentry *e, uint64_t key)
{
    /* the four keys as two vectors; 64-bit equality from 32-bit halves */
    __m128i k01 = _mm_unpacklo_epi64(_mm_load_si128((const __m128i *)&e[0]), _mm_load_si128((const __m128i *)&e[1]));
    __m128i k23 = _mm_unpacklo_epi64(_mm_load_si128((const __m128i *)&e[2]), _mm_load_si128((const __m128i *)&e[3]));
    __m128i kk = _mm_set1_epi64x((long long)key);
    __m128i c01 = _mm_cmpeq_epi32(k01, kk), c23 = _mm_cmpeq_epi32(k23, kk);
    c01 = _mm_and_si128(c01, _mm_shuffle_epi32(c01, _MM_SHUFFLE(2, 3, 0, 1)));
    c23 = _mm_and_si128(c23, _mm_shuffle_epi32(c23, _MM_SHUFFLE(2, 3, 0, 1)));
    return (unsigned)_mm_movemask_pd(_mm_castsi128_pd(c01)) | (unsigned)_mm_movemask_pd(_mm_castsi128_pd(c23)) << 2;
}
#else
static inline unsigned bucket_match(const fkv__pentry *e, uint64_t key)
{
    return (unsigned)(e[0].key == key) | (unsigned)(e[1].key == key) << 1 | (unsigned)(e[2].key == key) << 2 |
           (unsigned)(e[3].key == key) << 3;
}
#endif

fkv__pentry *fkv__prefix_find(fkv_cache *c, uint64_t key)
{
    fkv__prefix_drain(c);
    for (uint64_t b = key & c->pbmask;; b = next_bucket(c, b)) {
        fkv__pentry *e = &c->ptab[b * FKV__PBUCKET];
        unsigned m = bucket_match(e, key);
        if (m) return &e[__builtin_ctz(m)];
        if (!c->povf[b]) return NULL;
    }
}

/* Keeps the first writer of a key: a second copy of the same prefix is not
 * indexed (and is freed when its own sequence lets go of it). */
static void insert(fkv_cache *c, uint64_t key, fkv__chunk *ch)
{
    /* cannot happen: one entry per logical page at most (fkv__prefix_init) */
    if (c->pcount >= (c->pbmask + 1) * FKV__PBUCKET / 2) {
        c->stats.fairkv_prefix_index_full_total[0]++;
        return;
    }
    uint64_t home = key & c->pbmask, b = home;
    fkv__pentry *slot = NULL; /* the first free slot on the way */
    {
        /* the usual case: not in its home bucket, nothing passed that, and
         * it has room (the key cannot be anywhere else) */
        fkv__pentry *e = &c->ptab[home * FKV__PBUCKET];
        if (bucket_match(e, key)) return;
        unsigned free_slots = bucket_match(e, 0);
        if (free_slots && !c->povf[home]) {
            e += __builtin_ctz(free_slots);
            e->key = key;
            e->chunk = ch;
            c->pcount++;
            return;
        }
    }
    /* the key may sit anywhere up to the first bucket nothing passed */
    for (;; b = next_bucket(c, b)) {
        fkv__pentry *e = &c->ptab[b * FKV__PBUCKET];
        if (bucket_match(e, key)) return;
        unsigned free_slots = bucket_match(e, 0);
        if (!slot && free_slots) slot = &e[__builtin_ctz(free_slots)];
        if (!c->povf[b]) break;
    }
    while (!slot) { /* every bucket on the way is full: the first one with room */
        b = next_bucket(c, b);
        fkv__pentry *e = &c->ptab[b * FKV__PBUCKET];
        unsigned free_slots = bucket_match(e, 0);
        if (free_slots) slot = &e[__builtin_ctz(free_slots)];
    }
    /* the buckets before the slot's were full: the entry passes them */
    uint64_t at = (uint64_t)(slot - c->ptab) / FKV__PBUCKET;
    for (b = home; b != at; b = next_bucket(c, b))
        if (c->povf[b] < 255) c->povf[b]++;
    slot->key = key;
    slot->chunk = ch;
    c->pcount++;
}

void fkv__prefix_insert(fkv_cache *c, uint64_t key, fkv__chunk *ch)
{
    fkv__prefix_drain(c);
    insert(c, key, ch);
}

/* Inserts an append's batch.  Its home buckets are prefetched now and,
 * when the batch is small, the entries wait in c->pdefer until the queue
 * is full or something reads or changes the index (each of those drains
 * the queue first, so none can tell): the cache misses of the insertion
 * then overlap with whatever the caller does in between, instead of
 * stalling the append that made them. */
void fkv__prefix_insert_batch(fkv_cache *c, const fkv__pentry *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) fkv__prefix_prefetch(c, e[i].key);
    if (c->n_pdefer + n > FKV__PDEFER) fkv__prefix_drain(c);
    if (n > FKV__PDEFER) {
        for (uint32_t i = 0; i < n; i++) insert(c, e[i].key, e[i].chunk);
        return;
    }
    for (uint32_t i = 0; i < n; i++) c->pdefer[c->n_pdefer++] = e[i];
}

void fkv__prefix_drain_queue(fkv_cache *c)
{
    uint32_t n = c->n_pdefer;
    c->n_pdefer = 0;
    for (uint32_t i = 0; i < n; i++) insert(c, c->pdefer[i].key, c->pdefer[i].chunk);
}

/* Removes key if `ch` is the chunk indexed under it. */
void fkv__prefix_remove(fkv_cache *c, uint64_t key, const fkv__chunk *ch)
{
    fkv__prefix_drain(c);
    uint64_t home = key & c->pbmask;
    for (uint64_t b = home;; b = next_bucket(c, b)) {
        fkv__pentry *e = &c->ptab[b * FKV__PBUCKET];
        unsigned m = bucket_match(e, key);
        if (m) {
            e += __builtin_ctz(m);
            if (e->chunk != ch) return;
            e->key = 0;
            e->chunk = NULL;
            c->pcount--;
            for (uint64_t p = home; p != b; p = next_bucket(c, p))
                if (c->povf[p] < 255) c->povf[p]--;
            return;
        }
        if (!c->povf[b]) return;
    }
}

void fkv__prefix_repoint(fkv_cache *c, uint64_t key, const fkv__chunk *from, fkv__chunk *to)
{
    fkv__pentry *e = fkv__prefix_find(c, key);
    if (e && e->chunk == from) e->chunk = to;
}
