/* Internal structures of the cache core.  Not part of the public API. */
#ifndef FKV_CORE_INTERNAL_H
#define FKV_CORE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "core/admit.h"
#include "core/chunk.h"
#include "util/heap.h"
#include "fairkv.h"
#include "metrics/metrics.h"
#include "util/err.h"
#include "core/policy.h"

/* The tier an eviction took its victim from (the `tier` label of
 * fairkv_evictions_by_tier_total, in this order). */
enum fkv__tier {
    FKV__TIER_EXPIRED = 0, /* cached chunk past its predicted TTL */
    FKV__TIER_CACHED,      /* unowned chunk (finished request) */
    FKV__TIER_OVER_QUOTA,  /* chunk of a request over its quota */
    FKV__TIER_IN_QUOTA,    /* chunk of the request nearest its quota */
    FKV__TIER_YOUNG,       /* younger than min_chunk_retention: last resort */
    FKV__TIER_GLOBAL       /* quotas off: the policy alone */
};

/* Where a chunk is in the TTL tier (ttl.c). */
enum fkv__ttl_where { FKV__TTL_NONE = 0, FKV__TTL_HEAP, FKV__TTL_WHEEL, FKV__TTL_OVER };
#define FKV__TTL_W 16   /* requests a wheel bucket spans */
#define FKV__TTL_NB 256 /* buckets on the wheel: it spans 4096 requests */

/* A tenant (tenant.c): who fair shares are computed for in tenant mode;
 * its page count is kept in every mode (metrics, fkv_cache_tenant_info).
 * Entry 0 is the anonymous tenant, always present. */
#define FKV__TENANT_LABELS_MAX 64 /* metric label slots, then "other" */
#define FKV__N_ACTIONS FKV_N_RECLAIM_SLOTS
_Static_assert(FKV__L_TENANT == FKV__TENANT_LABELS_MAX + 1, "metric slots: labels + other");
_Static_assert(FKV__L_TACTION == FKV__L_TENANT * FKV__N_ACTIONS, "metric slots: tenant x action");
typedef struct fkv__tenant {
    uint64_t id;
    double weight;
    uint64_t pages;           /* pages charged: sum of v.n_pages of its chunks */
    double demand;            /* pages, at the last share refresh */
    double share;             /* weighted max-min share, pages */
    double qsum;              /* scratch of the refresh: its requests' quota weights */
    uint32_t n_seqs;          /* open sequences */
    uint32_t n_evictable;     /* its chunks waiting in a policy instance */
    fkv__policy_inst *cached; /* its unowned evictable chunks (tenant mode) */
    uint32_t slot;            /* metric label slot; == tenant_labels for "other" */
    uint64_t reclaimed[FKV__N_ACTIONS];
    uint64_t prefix_queries, prefix_hits;
    uint64_t host_bytes;      /* bytes of its chunks in the host tier (charged to ch->tenant on entry) */
    double host_share;        /* scratch of fkv__host_share_refresh: its host share, bytes */
    fkv__list host_lru;       /* its chunks on the host list, in that list's order (host.c) */
    fkv__list host_small;     /* its chunks on the host's small list, in that list's order */
    uint32_t host_n;          /* chunks on its two lists */
    uint8_t host_pick;        /* scratch of the host victim search: its chunks may go */
} fkv__tenant;

/* One open sequence = one request = one quota owner. */
struct fkv_seq {
    fkv_cache *cache;
    uint64_t request_id, client_id;
    fkv__tenant *tenant;       /* charged for the chunks it creates or restores */
    uint64_t ns_public;        /* parent key of its first page: 0, or the salt's */
    uint64_t ns_private;       /* mixed into the key of page shared_pages; 0 = public throughout */
    uint32_t shared_pages;     /* leading pages in the public namespace */
    double weight;
    uint32_t expected_tokens;
    uint32_t len;              /* tokens */
    fkv__chunk **table;        /* [n_chunks] in position order */
    uint32_t n_chunks, cap_chunks;
    uint32_t pins;             /* nesting count of fkv_seq_pin */
    uint8_t pinned_once;       /* pinned at least once: under guarantees it claims only while pinned */
    /* quota bookkeeping */
    uint32_t owner_idx;        /* index in cache->owners */
    uint64_t usage_pages;      /* pages of chunks it owns */
    double quota_pages;        /* fair share, recomputed lazily */
    int over_quota;            /* last known state, for the overrun counter */
    fkv__policy_inst *inst;    /* its own policy instance (quotas on) */
    /* prefix hash chain */
    uint64_t chain_hash;       /* hash of the last full page, 0 before the first */
    int hashing;               /* 0 once the chain stopped (no tokens/ids given) */
    int32_t *pending;          /* [page_tokens] tokens of the partial last page (after the struct) */
    uint64_t *block_ids;       /* hash-id mode: [n_block_ids] */
    uint32_t n_block_ids;
    int64_t create_ns;
    uint32_t cold_scan;        /* table index up to which chunks were found cold */
    uint32_t ladder_scan;      /* table index up to which chunks passed the warm window (quant_warm_tokens) */
};

/* Prefix index: buckets of four entries in one cache line, each with an
 * overflow count of the entries that moved on to later buckets; key 0 =
 * empty.  A removal clears its slot (prefix.c). */
/* Prefix index entry: 16 bytes, four to a cache line.  The page is not
 * stored: a key names page i of a hash chain, and the chunk's page for
 * sequence position i is i - chunk start / page_tokens. */
typedef struct fkv__pentry {
    uint64_t key;
    fkv__chunk *chunk;
} fkv__pentry;
#define FKV__PBUCKET 4 /* entries in one 64-byte bucket */

struct fkv_cache {
    fkv_config cfg;
    fkv_eval_config ev; /* fairkv_eval.h: next_use, block_tokens, class limits */
    char policy_name[32];
    char device_label[32];
    pthread_mutex_t lock;

    /* page pool */
    uint32_t n_pages, n_free;
    uint32_t *free_stack; /* [n_pages] */
    uint32_t *page_ref;   /* [n_pages] chunks referencing each page */
    uint16_t *page_fill;  /* [n_pages] tokens written in each page */
    uint64_t fill_sum;    /* sum of page_fill over used pages */
    uint64_t token_bytes; /* K+V bytes of one token, all layers */
    uint64_t page_bytes;  /* K+V bytes of one page, all layers */
    uint64_t layer_page_stride; /* bytes of one page in one layer's K (or V) */
    uint8_t **k, **v;     /* [n_layers] storage (cpu), NULL (phantom) */
    uint32_t *scratch;    /* [n_pages] temporary page lists */
    fkv__pentry *ins;     /* [n_pages] prefix inserts batched by an append; match entries */
    uint64_t *keys;       /* [n_pages] a prompt's page keys (match) */

    /* chunks */
#define FKV__CHUNK_LISTS 65
    fkv__chunk *chunk_free[FKV__CHUNK_LISTS]; /* freed chunks by page_cap, linked by all.next */
#define FKV__ARENA_BYTES ((size_t)2 << 20)
    void **arenas;            /* [cap_arenas] chunk memory (chunk.c) */
    uint32_t n_arenas, cap_arenas;
    char *arena_cur;
    size_t arena_left;
    fkv__list all;            /* every live chunk, resident or hole, newest first */
    uint64_t pinned_evictions; /* must stay 0: checked by fkv__cache_check */
    uint64_t next_chunk_id;
    uint32_t n_resident;
    uint64_t resident_tokens; /* sum of v.n_tokens over resident chunks */
    uint64_t pages_by_dtype[FKV_N_DTYPES];

    /* eviction */
    const fkv__policy_ops *ops;
    fkv__policy_params pparams;
    fkv__policy_inst *shared_inst; /* unowned chunks; every chunk when quotas are off */
    fkv__list young;          /* the young FIFO (place.c) */
    /* TTL tier: cached chunks by expiry on the request clock (quotas on; ttl.c) */
    fkv__heap ttl_heap;       /* the near ones: keys below ttl_next buckets */
    fkv__list ttl_wheel[FKV__TTL_NB]; /* buckets ttl_next .. ttl_end - 1, unordered lists */
    fkv__list ttl_over;       /* keys from bucket ttl_end on */
    uint64_t ttl_next, ttl_end;
    uint32_t ttl_n;           /* chunks in the tier */
    uint32_t ttl_n_wheel;     /* of which on the wheel */
    uint64_t n_requests;      /* request clock: sequences created so far */
    int64_t last_create_ns;
    double ns_per_request;    /* mean gap between request arrivals (EMA), ns */
    fkv_seq **owners;         /* open sequences */
    uint32_t n_owners, cap_owners;
    int quota_dirty;
#define FKV__IDLE_SEQS 64
    fkv_seq *idle_seqs[FKV__IDLE_SEQS]; /* ended sequences kept for reuse */
    uint32_t n_idle_seqs;
    uint64_t quota_epoch_allocs; /* page allocations since the last quota refresh */
    uint64_t pages_taken;        /* page allocations ever: F-LRU's turnover clock */
    /* tenants (tenant.c) */
    fkv__tenant **tenants;    /* [n_tenants]; [0] = anonymous */
    uint32_t n_tenants, cap_tenants;
    uint32_t *tmap;           /* open addressing id -> index + 1; [tmap_mask + 1] */
    uint32_t tmap_mask;
    uint32_t n_slots;         /* label slots given out */
    struct fkv__claim *torder; /* [cap_tenants] scratch of the water-filling (tenant.c, host.c) */

    /* cold-chunk quantization (coldq.c) */
    fkv__list cold;                     /* candidates, oldest first (under-pressure) */
    uint64_t qmeta_bytes[FKV_N_DTYPES]; /* scale bytes of quantized chunks */
    /* the allocating call */
    fkv_seq *cur_seq;                   /* the sequence whose call is allocating */
    int reclaiming;                     /* in fkv_seq_reclaim: its pinned chunks may go */

    /* host tier (host.c, demote.c) */
    uint64_t host_used;                 /* bytes of offloaded and demoted chunks */
    fkv__list host_lru;                 /* demoted, unheld chunks, least recently used first; with
                                         * host_policy s3fifo the main FIFO, arc its T2 (host.c) */
    fkv__list host_small;               /* s3fifo's small FIFO, arc's T1; empty with lru */
    uint64_t host_small_bytes;          /* bytes of the chunks on host_small */
    uint64_t host_main_bytes;           /* bytes of the chunks on host_lru */
    uint32_t host_n;                    /* chunks on the two lists */
    struct fkv__ghost *host_ghost;      /* s3fifo's ghost; arc's B1 */
    struct fkv__ghost *host_ghost2;     /* arc's B2 */
    double host_arc_p;                  /* arc's target for T1, bytes */
    uint64_t host_stamp;                /* pushes so far: the next chunk's host.stamp */
    fkv__admit *admit;                  /* tier_admission's filter (admit.h); NULL when off */

    /* prefix index */
    fkv__pentry *ptab;  /* [(pbmask + 1) * FKV__PBUCKET], in buckets of one cache line */
    uint8_t *povf;      /* [pbmask + 1] entries that passed each bucket (prefix.c) */
    uint64_t pbmask;
    uint64_t pcount;
#define FKV__PDEFER 32
    fkv__pentry pdefer[FKV__PDEFER]; /* inserts not yet made (prefix.c) */
    uint32_t n_pdefer;

    /* metrics */
    fkv__stats stats;
    int64_t tnow; /* the clock, read at most once per public call (fkv__now) */
    int tnow_valid; /* tnow was read in this call */
};

void fkv__tick(fkv_cache *c); /* reads the clock (cache.c) */

/* The time of the current public call: read on first use, so that a call
 * that needs no time (most appends, every free) reads no clock. */
static inline int64_t fkv__now(fkv_cache *c)
{
    if (!c->tnow_valid) fkv__tick(c);
    return c->tnow;
}

static inline void fkv__prefix_prefetch(const fkv_cache *c, uint64_t key)
{
    __builtin_prefetch(&c->ptab[(key & c->pbmask) * FKV__PBUCKET], 1);
}

void fkv__prefix_drain_queue(fkv_cache *c);

/* Makes the deferred inserts of the last append; every reader and writer
 * of the index calls it first. */
static inline void fkv__prefix_drain(fkv_cache *c)
{
    if (c->n_pdefer) fkv__prefix_drain_queue(c);
}

/* The helpers the core's files share, all called with the lock held, by
 * file, in the core's one-way order (docs/ARCHITECTURE.md): a file calls
 * the files listed before it, never one listed after it.  Infrastructure
 * first (page pool, table, prefix index, clock), then
 *   shares < ttl < tenant < place < coldq < tree < host < chunk < demote
 *   < evict < seq < match, step, reclaim < cache, metrics, check. */

/* page_pool.c */
fkv_status fkv__pool_init(fkv_cache *c);
void fkv__pool_fini(fkv_cache *c);
struct fkv_kv_geom;
void fkv__kv_geom(const fkv_cache *c, struct fkv_kv_geom *g); /* the pool's storage as the codecs read it */
void fkv__pool_take(fkv_cache *c, uint32_t n, uint32_t *out); /* n <= n_free: pops n pages */
void fkv__page_ref(fkv_cache *c, uint32_t page);
static inline void fkv__page_unref(fkv_cache *c, uint32_t page)
{
    if (--c->page_ref[page] == 0) { /* free: back on the stack */
        c->fill_sum -= c->page_fill[page];
        c->page_fill[page] = 0;
        c->free_stack[c->n_free++] = page;
    }
}
void fkv__page_copy(fkv_cache *c, uint32_t dst, uint32_t src);
static inline void fkv__page_set_fill(fkv_cache *c, uint32_t page, uint32_t fill)
{
    c->fill_sum += fill;
    c->fill_sum -= c->page_fill[page];
    c->page_fill[page] = (uint16_t)fill;
}

/* table.c */
void *fkv__table_alloc(size_t bytes); /* 64-byte aligned, huge pages when large; free() */

/* prefix.c */
fkv_status fkv__prefix_init(fkv_cache *c);
void fkv__prefix_fini(fkv_cache *c);
void fkv__prefix_insert(fkv_cache *c, uint64_t key, fkv__chunk *ch);
void fkv__prefix_insert_batch(fkv_cache *c, const fkv__pentry *e, uint32_t n);
void fkv__prefix_remove(fkv_cache *c, uint64_t key, const fkv__chunk *ch);
fkv__pentry *fkv__prefix_find(fkv_cache *c, uint64_t key);
void fkv__prefix_repoint(fkv_cache *c, uint64_t key, const fkv__chunk *from, fkv__chunk *to);
uint64_t fkv__hash_tokens(uint64_t parent, const int32_t *tokens, uint32_t n);
uint64_t fkv__hash_block(uint64_t parent, uint64_t block_id, uint32_t page_in_block);

/* Sizes of a chunk's pages (coldq.c and every reader of a quantized chunk).
 * Fill of page j of a chunk of n tokens stored tpp to a page: quantized
 * pages hold more tokens, and their fill follows the bytes used, in base
 * token slots (tpp == page_tokens: the tokens themselves). */
static inline uint32_t fkv__stored_fill(uint32_t page_tokens, uint32_t tpp, uint32_t n, uint32_t j)
{
    uint32_t held = n - j * tpp < tpp ? n - j * tpp : tpp;
    return (held * page_tokens + tpp - 1) / tpp;
}
static inline uint32_t fkv__lpages(const fkv_cache *c, const fkv__chunk *ch) /* logical (base) pages */
{
    return (ch->v.n_tokens + c->cfg.page_tokens - 1) / c->cfg.page_tokens;
}

/* ttl.c: the TTL tier's order */
void fkv__ttl_add(fkv_cache *c, fkv__chunk *ch);    /* files it under ttl.last_req + ttl.req */
void fkv__ttl_remove(fkv_cache *c, fkv__chunk *ch); /* no-op if not in the tier */
fkv__chunk *fkv__ttl_expired(fkv_cache *c);         /* the first expired chunk, or NULL */

/* tenant.c: tenants, their shares of the pool and of the host, request quotas */
fkv_status fkv__tenants_init(fkv_cache *c);
void fkv__tenants_fini(fkv_cache *c);
fkv__tenant *fkv__tenant_get(fkv_cache *c, uint64_t id, int create); /* NULL: unknown (or no memory) */
void fkv__tenant_shares(fkv_cache *c); /* weighted max-min shares and request quotas (tenant mode) */
/* every open request's quota in its group: its tenant's share (by_tenant) or the pool */
void fkv__request_quotas(fkv_cache *c, int by_tenant);
void fkv__owner_usage(fkv_cache *c, fkv_seq *s, int64_t delta_pages);
/* host demand of t: its host bytes, plus `need` if it is `who` (the tenant whose chunk comes in) */
double fkv__host_demand(const fkv__tenant *t, const fkv__tenant *who, uint64_t need);
void fkv__host_shares(fkv_cache *c, const fkv__tenant *who, uint64_t need); /* every tenant's host_share */
double fkv__host_share(fkv_cache *c, const fkv__tenant *t); /* its weighted max-min share of the host, bytes */
static inline void fkv__tenant_pages(fkv__chunk *ch, int64_t delta)
{
    ch->tenant->pages = (uint64_t)((int64_t)ch->tenant->pages + delta);
}
static inline fkv_class fkv__seq_class(const fkv_seq *s)
{
    const fkv_eval_config *cfg = &s->cache->ev;
    uint32_t n = s->expected_tokens ? s->expected_tokens : s->len;
    if (n < cfg->class_short_max) return FKV_CLASS_SHORT;
    if (n <= cfg->class_medium_max) return FKV_CLASS_MEDIUM;
    return FKV_CLASS_LONG;
}
static inline uint64_t fkv__ns_mix(uint64_t parent, uint64_t ns) /* the namespace step of a key chain */
{
    uint64_t x = (parent ^ ns) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (x ^ (x >> 32)) | 1;
}
/* The parent key to hash page `page` of s under: the chain so far, with
 * the salt at the first page and the tenant at the first private one. */
static inline uint64_t fkv__ns_parent(const fkv_seq *s, uint64_t parent, uint32_t page)
{
    if (page == 0) parent = s->ns_public;
    if (page == s->shared_pages && s->ns_private) parent = fkv__ns_mix(parent, s->ns_private);
    return parent;
}

/* place.c: where an evictable chunk waits */
void fkv__place_update(fkv_cache *c, fkv__chunk *ch); /* re-place after a state change */
void fkv__place_remove(fkv_cache *c, fkv__chunk *ch);
void fkv__place_mature(fkv_cache *c, int64_t now);   /* young chunks past min_chunk_retention into their policy */
void fkv__ttl_sync(fkv_cache *c, fkv__chunk *ch);    /* in the TTL tier iff a cached chunk with a TTL */

/* coldq.c: cold-chunk quantization */
void fkv__cold_scan(fkv_cache *c, fkv_seq *s, int all);  /* chunks of s that became cold */
void fkv__cold_remove(fkv_cache *c, fkv__chunk *ch);
void fkv__cold_relieve(fkv_cache *c, uint32_t need);    /* quantize before evicting */
void fkv__chunk_free_qmeta(fkv_cache *c, fkv__chunk *ch);
int fkv__reclaim_quantize(fkv_cache *c, fkv__chunk *ch, fkv_dtype dt); /* 1 if quantized */

/* tree.c: the prefix tree the tiers' closure rests on */
void fkv__tree_link(fkv__chunk *parent, fkv__chunk *kid);
void fkv__tree_unlink(fkv__chunk *ch);             /* leaves its parent; its kids become roots */
void fkv__tree_leave(fkv__chunk *ch);              /* leaves its parent only */
void fkv__tree_orphan_idle(fkv__chunk *ch);        /* its idle device-resident extensions become roots */
void fkv__tree_adopt(fkv__chunk *from, fkv__chunk *to); /* split: from's kids extend its tail `to` now */
fkv__chunk *fkv__tree_device_leaf(fkv__chunk *v);  /* v, or an evictable device extension with none itself */
fkv__chunk *fkv__tree_host_leaf(fkv__chunk *v);    /* v, or a demoted idle extension with none itself */
int fkv__tree_check(fkv_cache *c, char *msg, size_t len); /* closure at every tier (for check.c) */

/* host.c: a chunk's host copy, its bytes, the host lists */
void fkv__host_free(fkv_cache *c, fkv__chunk *ch); /* drops a chunk's host copy, if it has one */
uint64_t fkv__host_bytes(const fkv_cache *c, const fkv__chunk *ch); /* bytes its host copy holds */
void fkv__host_charge(fkv_cache *c, fkv__chunk *ch, int sign);     /* host_used and its tenant's bytes */
uint8_t *fkv__host_copy_out(const fkv_cache *c, const fkv__chunk *ch);
void fkv__host_take_scales(fkv_cache *c, fkv__chunk *ch, uint32_t np);
void fkv__host_list_push(fkv_cache *c, fkv__chunk *ch);   /* held no more: back on its list, most recent */
void fkv__host_list_enter(fkv_cache *c, fkv__chunk *ch);  /* just demoted: on the list its order says */
void fkv__host_list_read(fkv_cache *c, fkv__chunk *ch);   /* a match attaches it: off its list, one read more */
void fkv__host_list_remove(fkv_cache *c, fkv__chunk *ch); /* off its list (no-op if on none) */
/* The host order's next candidate among the idle demoted chunks of the
 * tenants with host_pick set (all of them if `all`), NULL if none; with
 * `commit`, s3fifo's and arc's moves on the way are made (else a look
 * that changes nothing).  The closure's leaf below it is the caller's. */
fkv__chunk *fkv__host_order_pick(fkv_cache *c, int all, int commit);
void fkv__host_evicting(fkv_cache *c, fkv__chunk *ch);    /* ch leaves for room: its key to a ghost */
fkv_status fkv__host_order_init(fkv_cache *c);
void fkv__host_order_fini(fkv_cache *c);

/* chunk.c */
fkv__chunk *fkv__chunk_new(fkv_cache *c, fkv_seq *owner, uint32_t start, uint32_t cap_tokens);
void fkv__chunk_destroy(fkv_cache *c, fkv__chunk *ch);
uint32_t fkv__chunk_target(const fkv_cache *c, uint32_t start);
void fkv__chunk_set_owner(fkv_cache *c, fkv__chunk *ch, fkv_seq *owner);
void fkv__chunk_add_pages(fkv_cache *c, fkv__chunk *ch, uint32_t n_new); /* accounting */
void fkv__chunk_touch(fkv_cache *c, fkv__chunk *ch, int64_t now);
void fkv__chunk_predict_ttl(const fkv_cache *c, fkv__chunk *ch);
void fkv__chunk_release_prefetch(fkv_cache *c, const fkv__chunk *ch); /* before fkv__chunk_release */

/* demote.c: the host tier's rules */
/* evicts demoted chunks until `need` more bytes of tenant `who` fit; 1 if they do */
int fkv__host_room(fkv_cache *c, const fkv__tenant *who, uint64_t need);
int fkv__host_demote(fkv_cache *c, fkv__chunk *ch); /* 1 if the released chunk now waits in the host tier */
int fkv__host_admits(fkv_cache *c, const fkv__chunk *ch, uint64_t need); /* tier_admission's test (admit.h) */
void fkv__host_unheld(fkv_cache *c, fkv__chunk *ch);      /* its last holder let go of an offloaded chunk */

/* evict.c: victims, eviction (detach + release), the reservation of pages */
void fkv__chunk_evict(fkv_cache *c, fkv__chunk *ch); /* detach + release */
void fkv__chunk_detach(fkv_cache *c, fkv__chunk *ch);
void fkv__chunk_release(fkv_cache *c, fkv__chunk *ch);
fkv_status fkv__evict_one(fkv_cache *c);
fkv_status fkv__evict_until(fkv_cache *c, uint32_t n_free); /* evicts until n_free pages are free */
/* relieve -> evict -> take n pages; FKV_EFULL takes none */
fkv_status fkv__reserve_pages(fkv_cache *c, uint32_t n, uint32_t *out);
/* pages for s's restore or reload, into c->scratch (s is the allocating sequence); FKV_EFULL past the pool */
fkv_status fkv__reserve_for_seq(fkv_cache *c, fkv_seq *s, uint64_t pages, const char *who);
/* fkv_seq_fetch's host source (reclaim.c), under the lock: the pages the
 * host-tier chunks of s in [start, end) need, and their copy back into
 * pages taken from *fresh (advanced); returns the tokens, *bytes the bytes. */
uint64_t fkv__host_back_pages(const fkv_seq *s, uint32_t start, uint32_t end);
uint32_t fkv__host_back(fkv_seq *s, uint32_t start, uint32_t end, const uint32_t **fresh, uint64_t *bytes);

/* seq.c */
void fkv__seq_release(fkv_seq *s); /* frees an ended sequence's memory */
fkv_status fkv__seq_reserve(fkv_seq *s, uint32_t more); /* table room */
void fkv__seq_attach(fkv_seq *s, fkv__chunk *ch, uint32_t at); /* insert at table index */
void fkv__seq_detach(fkv_seq *s, uint32_t at);

/* metrics.c: fills the gauges from the cache state */
void fkv__metrics_refresh(fkv_cache *c);

/* check.c: full invariant check (tests, fuzzing); returns 0 when sound and
 * writes the first broken invariant into msg. */
int fkv__cache_check(fkv_cache *c, char *msg, size_t len);

/* Every public call takes the lock (if thread_safe) and reads the clock
 * once: all times within one call are the same instant. */
#define FKV__LOCK(c)                                     \
    do {                                                 \
        if ((c)->cfg.thread_safe) pthread_mutex_lock(&(c)->lock); \
        (c)->tnow_valid = 0;                             \
    } while (0)
#define FKV__UNLOCK(c)                                   \
    do {                                                 \
        if ((c)->cfg.thread_safe) pthread_mutex_unlock(&(c)->lock); \
    } while (0)

#endif
