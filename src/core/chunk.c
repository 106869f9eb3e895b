/* Chunks: variable-length runs of one sequence's tokens in whole pages, the
 * unit of every policy decision (heat, age, TTL, owner, eviction).
 *
 * Dynamic chunking (config.dynamic_chunking): a chunk starting at token
 * position p is given the size  clamp(pow2_floor(p / 4), min, max)  tokens,
 * rounded to whole pages, so it is never longer than a quarter of the
 * context before it.  Early positions (prompt heads, the parts that are
 * shared across requests) get fine chunks, which keeps prefix sharing and
 * eviction precise where it matters; deep positions get coarse chunks, which
 * cuts per-chunk metadata and policy work to O(log L) chunks per doubling of
 * the context while evicting one chunk still loses at most ~1/4 of what
 * precedes it.  Chunks also split where a new request's prefix diverges
 * (match.c).  See docs/ARCHITECTURE.md.
 *
 * A chunk's lifecycle reaches every subsystem it takes part in, all below
 * this file in the core's order: creation links it into the prefix tree
 * (tree.c); destruction takes it off its cold FIFO, tree and host copy;
 * a change of owner re-places it (place.c).  Eviction, which chooses
 * chunks, is above (evict.c, demote.c). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

uint32_t fkv__chunk_target(const fkv_cache *c, uint32_t start)
{
    const fkv_config *cfg = &c->cfg;
    if (!cfg->dynamic_chunking) return cfg->chunk_tokens;
    uint32_t q = start / 4, t = 1;
    while (t <= q / 2) t *= 2; /* pow2_floor(q), 1 for q <= 1 */
    if (t < cfg->chunk_min_tokens) t = cfg->chunk_min_tokens;
    uint32_t pt = cfg->page_tokens;
    t = (t + pt - 1) / pt * pt;
    if (t > cfg->chunk_max_tokens) t = cfg->chunk_max_tokens;
    return t;
}

#if defined(__SANITIZE_ADDRESS__)
#define FKV__NO_ARENA 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FKV__NO_ARENA 1
#endif
#endif

/* Memory for a chunk of up to FKV__CHUNK_LISTS - 1 pages: carved from
 * arenas, of 2 MiB on huge pages for a large cache (table.c), so that the
 * chunks a step touches, a few hundred bytes each, do not each cost a TLB
 * miss.  Such chunks are never freed one by one (they wait in a free list
 * by page count), so an arena is only a bump pointer; the arenas go with
 * the cache.  Under AddressSanitizer every chunk is its own malloc, so
 * overruns are seen. */
static void *chunk_mem(fkv_cache *c, size_t bytes, uint8_t *own)
{
    bytes = (bytes + 15) & ~(size_t)15;
#ifndef FKV__NO_ARENA
    if (c->arena_left < bytes) {
        if (c->n_arenas == c->cap_arenas) {
            uint32_t ncap = c->cap_arenas ? 2 * c->cap_arenas : 8;
            void **na = realloc(c->arenas, ncap * sizeof *na);
            if (na) c->arenas = na, c->cap_arenas = ncap;
        }
        /* about 128 bytes of chunk a page, in arenas of 64 KiB to 2 MiB (the
         * larger on huge pages): a small cache does not hold 2 MiB */
        size_t ab = (size_t)64 << 10;
        while (ab < FKV__ARENA_BYTES && ab < (size_t)c->n_pages * 128) ab *= 2;
        void *a = c->n_arenas < c->cap_arenas && bytes <= ab ? fkv__table_alloc(ab) : NULL;
        if (a) {
            c->arenas[c->n_arenas++] = a;
            c->arena_cur = a;
            c->arena_left = ab;
        }
    }
    if (c->arena_left >= bytes) {
        void *p = c->arena_cur;
        c->arena_cur += bytes;
        c->arena_left -= bytes;
        *own = 0;
        return p;
    }
#else
    (void)c;
#endif
    *own = 1; /* its own malloc: freed one by one */
    return malloc(bytes);
}

fkv__chunk *fkv__chunk_new(fkv_cache *c, fkv_seq *owner, uint32_t start, uint32_t cap_tokens)
{
    uint32_t pt = c->cfg.page_tokens, cap = (cap_tokens + pt - 1) / pt;
    /* one allocation: the chunk, then phash[cap], then pages[cap]; sizes
     * recur, so freed chunks wait in a free list per page count */
    fkv__chunk *ch = NULL;
    uint8_t own = 1;
    size_t bytes = sizeof *ch + (size_t)cap * (sizeof(uint64_t) + sizeof(uint32_t));
    if (cap < FKV__CHUNK_LISTS && c->chunk_free[cap]) {
        ch = c->chunk_free[cap];
        c->chunk_free[cap] = ch->all.next;
        own = ch->own_mem;
    } else if (cap < FKV__CHUNK_LISTS) {
        ch = chunk_mem(c, bytes, &own);
    } else {
        ch = malloc(bytes);
    }
    if (!ch) return NULL;
    memset(ch, 0, sizeof *ch);
    ch->own_mem = own;
    ch->page_cap = cap;
    ch->phash = (uint64_t *)(ch + 1);
    ch->pages = (uint32_t *)(ch->phash + cap);
    memset(ch->phash, 0, (size_t)cap * sizeof *ch->phash);
    int64_t now = fkv__now(c);
    ch->id = ++c->next_chunk_id;
    ch->ttl.create_req = ch->ttl.last_req = c->n_requests;
    ch->create_tick = c->pages_taken;
    ch->v.start = start;
    ch->v.cap_tokens = cap_tokens;
    ch->v.pages = ch->pages;
    ch->v.dtype = c->cfg.dtype;
    ch->v.resident = 1;
    ch->m.access_count = 1;
    ch->m.create_ns = now;
    ch->m.last_access_ns = now;
    ch->tenant = owner ? owner->tenant : c->tenants[0];
    if (owner) {
        ch->cls = fkv__seq_class(owner);
        ch->m.owner = owner->request_id;
        ch->owner = owner;
        /* predicted life: the owner's remaining tokens at its observed pace */
        if (owner->expected_tokens > owner->len && owner->len > 0 && now > owner->create_ns)
            ch->m.expected_ttl_ns =
                (int64_t)((double)(now - owner->create_ns) / owner->len * (owner->expected_tokens - owner->len));
    }
    fkv__list_push_front(&c->all, ch, FKV__LINK(all));
    c->n_resident++;
    /* the prefix tree (host.c): it extends the owner's chunk that ends where
     * it starts (the last one; the one before when it replaces the last) */
    if (c->cfg.host_demote && owner)
        for (uint32_t i = owner->n_chunks, k = 0; i > 0 && k < 2; i--, k++)
            if (owner->table[i - 1]->v.start + owner->table[i - 1]->v.n_tokens == start) {
                fkv__tree_link(owner->table[i - 1], ch);
                break;
            }
    return ch;
}

void fkv__chunk_destroy(fkv_cache *c, fkv__chunk *ch)
{
    fkv__host_free(c, ch);
    fkv__tree_unlink(ch);
    fkv__cold_remove(c, ch);
    fkv__chunk_free_qmeta(c, ch);
    fkv__list_unlink(&c->all, ch, FKV__LINK(all));
    if (ch->page_cap < FKV__CHUNK_LISTS) {
        ch->all.next = c->chunk_free[ch->page_cap];
        c->chunk_free[ch->page_cap] = ch;
    } else {
        free(ch);
    }
}

/* Accounts n_new pages just written at ch->pages[v.n_pages ...]. */
void fkv__chunk_add_pages(fkv_cache *c, fkv__chunk *ch, uint32_t n_new)
{
    ch->v.n_pages += n_new;
    c->pages_by_dtype[ch->v.dtype] += n_new;
    fkv__tenant_pages(ch, n_new);
    if (ch->owner) fkv__owner_usage(c, ch->owner, n_new);
}

void fkv__chunk_set_owner(fkv_cache *c, fkv__chunk *ch, fkv_seq *owner)
{
    if (ch->owner == owner) return;
    if (ch->owner) fkv__owner_usage(c, ch->owner, -(int64_t)ch->v.n_pages);
    ch->owner = owner;
    ch->m.owner = owner ? owner->request_id : 0;
    if (owner) fkv__owner_usage(c, owner, ch->v.n_pages);
    else fkv__chunk_predict_ttl(c, ch);
    fkv__place_update(c, ch);
}

/* TTL of a cached chunk: it is expected to be wanted again within about
 * the mean gap at which new requests have matched it so far; reuse is
 * bursty, so the prediction allows four such gaps.  Gaps are counted in
 * requests, not nanoseconds, so an idle period (no traffic) does not make
 * every shared prefix look dead.  A chunk never matched has no prediction. */
void fkv__chunk_predict_ttl(const fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->ttl.prefix_hits) {
        ch->ttl.req = 0;
        ch->m.expected_ttl_ns = 0;
        return;
    }
    ch->ttl.req = 4.0 * (double)(ch->ttl.last_req - ch->ttl.create_req) / (double)ch->ttl.prefix_hits;
    if (ch->ttl.req < 1) ch->ttl.req = 1;
    ch->m.expected_ttl_ns = (int64_t)(ch->ttl.req * c->ns_per_request);
    if (ch->m.expected_ttl_ns <= 0) ch->m.expected_ttl_ns = 1;
}

void fkv__chunk_touch(fkv_cache *c, fkv__chunk *ch, int64_t now)
{
    ch->m.access_count++;
    if (now > ch->m.last_access_ns) ch->m.last_access_ns = now;
    if (ch->place == FKV__PLACE_POLICY && ch->inst->ops->access) ch->inst->ops->access(ch->inst->state, ch);
    (void)c; /* the TTL heap is re-keyed lazily, when its top is examined (ttl.c) */
}

/* Starts the loads fkv__chunk_release (evict.c) will wait on: the index
 * slots of the pages.  It lives here, apart from its caller: in evict.c's
 * translation unit GCC finds it free of side effects (prefetches only) and
 * drops the calls, and eviction got 30% slower (fairkv micro cache). */
void fkv__chunk_release_prefetch(fkv_cache *c, const fkv__chunk *ch)
{
    uint32_t lp = fkv__lpages(c, ch);
    for (uint32_t j = 0; j < lp; j++)
        if (ch->phash[j]) fkv__prefix_prefetch(c, ch->phash[j]);
    if (ch->v.n_pages) __builtin_prefetch(&c->page_ref[ch->pages[0]], 1);
}
