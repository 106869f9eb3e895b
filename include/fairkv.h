/* fairkv — a KV cache manager for LLM inference engines.
 *
 * Pages for memory, chunks for policy: the cache owns a pool of fixed-size
 * pages (default 16 tokens; page id p names token slots [p*page_tokens,
 * (p+1)*page_tokens) in every layer's K and V arrays).  A sequence's tokens
 * are grouped into chunks (default 64 tokens, whole pages), which carry the
 * metadata that eviction, quotas and quantization act on.
 *
 * Thread safety: every fkv_cache_* and fkv_seq_* function may be called from
 * several threads at once on the same cache when `thread_safe` is set in the
 * config (the default): each call takes the cache's lock.  Pointers returned
 * into the cache (chunk tables, chunk views, storage) stay valid only until
 * the next call that changes that sequence or evicts; the caller keeps the
 * batch pinned (fkv_seq_pin) while its kernels read them.  Functions marked
 * "pure" touch no cache state and are always thread-safe.
 */
#ifndef FAIRKV_H
#define FAIRKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every public function is declared FKV_API: the shared library is built
 * with hidden visibility and exports these alone. */
#ifndef FKV_API
#if defined(__GNUC__) || defined(__clang__)
#define FKV_API __attribute__((visibility("default")))
#else
#define FKV_API
#endif
#endif

/* A name kept one release for callers written against it, then removed:
 * the compiler says which call replaces it (as llama.h's DEPRECATED). */
#ifndef FKV_DEPRECATED
#if defined(__GNUC__) || defined(__clang__)
#define FKV_DEPRECATED(hint) __attribute__((deprecated(hint)))
#else
#define FKV_DEPRECATED(hint)
#endif
#endif

#define FKV_VERSION_MAJOR 0
#define FKV_VERSION_MINOR 2 /* 0.2: evaluation fields moved to fairkv_eval.h (ABI change) */
#define FKV_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

typedef enum fkv_status {
    FKV_OK = 0,
    FKV_EINVAL = 1,      /* an argument is invalid (the detail says which) */
    FKV_ENOMEM = 2,      /* host memory allocation failed */
    FKV_EFULL = 3,       /* the cache has no evictable chunk left */
    FKV_ENOENT = 4,      /* no such policy, preset, key, ... */
    FKV_ESTATE = 5,      /* call not valid in the object's current state */
    FKV_EIO = 6,         /* file could not be read or written */
    FKV_EPARSE = 7,      /* malformed input (the detail names file and line) */
    FKV_EUNSUPPORTED = 8 /* feature not built in or not supported here */
} fkv_status;

/* Pure.  Static string for a status code. */
FKV_API const char *fkv_strerror(fkv_status st);

/* Errors, one convention for every public header (fairkv.h, fairkv_attn.h,
 * fairkv_quant.h): a function that can fail returns an fkv_status, FKV_OK
 * (0) on success.  On failure it leaves a detail naming what is wrong (the
 * argument or field, its value, the limit) in a buffer of the calling
 * thread, which fkv_last_error() returns until that thread's next failing
 * call.  The functions that also take (char *err, size_t errlen) -- those
 * that run before a cache exists or outside one: fkv_cache_create,
 * fkv_config_from_env, the kernels and the codecs -- copy the same detail
 * there (err may be NULL).  Nothing else reports errors: no global state,
 * no per-object error string. */
FKV_API const char *fkv_last_error(void);

/* ---------------------------------------------------------------- types */

typedef enum fkv_dtype {
    FKV_F32 = 0,
    FKV_F16 = 1,
    FKV_INT8 = 2,
    FKV_INT4 = 3,
    FKV_FP8 = 4  /* E4M3 codes, one fp32 scale per (chunk, layer, kv head) of K and of V */
} fkv_dtype;
#define FKV_N_DTYPES 5

/* Pure.  "f32", "f16", "int8", "int4", "fp8". */
FKV_API const char *fkv_dtype_name(fkv_dtype t);
/* Pure.  Bits per stored element: 32, 16, 8, 4, 8. */
FKV_API unsigned fkv_dtype_bits(fkv_dtype t);

typedef enum fkv_storage_kind {
    FKV_STORAGE_PHANTOM = 0, /* accounts bytes, allocates no K/V memory */
    FKV_STORAGE_CPU = 1      /* real host memory */
} fkv_storage_kind;

/* Injectable clock, in nanoseconds.  NULL now_ns = monotonic clock. */
typedef struct fkv_clock {
    int64_t (*now_ns)(void *ctx);
    void *ctx;
} fkv_clock;

/* A virtual clock for simulations: now_ns returns *ctx. */
FKV_API int64_t fkv_virtual_clock_now(void *ctx); /* ctx: int64_t* */
FKV_API int64_t fkv_monotonic_now_ns(void);       /* pure */

typedef struct fkv_chunk_view fkv_chunk_view;

/* When cold chunks (farther than quant_hot_tokens from their sequence's
 * end) are stored quantized: the seed keeps distant chunks in 8 bits. */
typedef enum fkv_quant_mode {
    FKV_QUANT_OFF = 0,           /* never */
    FKV_QUANT_ALWAYS = 1,        /* as soon as a full chunk becomes cold */
    FKV_QUANT_UNDER_PRESSURE = 2 /* when the pool is fuller than quant_pressure, before evicting */
} fkv_quant_mode;

typedef struct fkv_chunk_info fkv_chunk_info;

/* Who fair shares are computed for (fkv_config.quotas).  Rules and
 * reasons in docs/ARCHITECTURE.md ("Tenants"). */
typedef enum fkv_quota_mode {
    FKV_QUOTA_OFF = 0,     /* the policy alone */
    FKV_QUOTA_REQUEST = 1, /* per open request: quota ~ weight * demand^(1/T) */
    FKV_QUOTA_TENANT = 2   /* per tenant: weighted max-min over demand; within a tenant per request */
} fkv_quota_mode;

/* Admission below the device (fkv_config.tier_admission). */
typedef enum fkv_tier_admission {
    FKV_TIER_ADMIT_OFF = 0,     /* every idle chunk the device evicts goes down */
    FKV_TIER_ADMIT_TINYLFU = 1, /* TinyLFU: when the tier is full, a chunk goes down only if it was
                                 * seen at least as often as the chunk it would push out */
    FKV_TIER_ADMIT_SEEN = 2     /* a chunk goes down only once seen tier_admission_threshold times */
} fkv_tier_admission;

/* The host tier's eviction order (fkv_config.host_policy). */
typedef enum fkv_host_policy {
    FKV_HOST_LRU = 0,    /* least recently demoted or released first */
    FKV_HOST_S3FIFO = 1, /* S3-FIFO: a small FIFO, a main FIFO with frequency bits, a ghost */
    FKV_HOST_ARC = 2     /* ARC: recency and frequency lists with an adaptive target */
} fkv_host_policy;

typedef struct fkv_config {
    /* model geometry: bytes per token = 2 * n_layers * n_kv_heads * head_dim * sizeof(dtype) */
    uint32_t n_layers;   /* 32 */
    uint32_t n_kv_heads; /* 8 */
    uint32_t head_dim;   /* 128 */
    fkv_dtype dtype;     /* FKV_F16; FKV_F32 or FKV_F16 only */

    uint32_t page_tokens;   /* 16: tokens per page */
    uint64_t capacity_bytes; /* K+V bytes of all layers; used when capacity_pages == 0 */
    uint32_t capacity_pages; /* if nonzero, overrides capacity_bytes */
    fkv_storage_kind storage;

    /* chunks */
    uint32_t chunk_tokens;     /* 64: fixed size, or base size when dynamic */
    int dynamic_chunking;      /* 0: fixed chunk_tokens; 1: rule in docs/ARCHITECTURE.md */
    uint32_t chunk_min_tokens; /* 32 */
    uint32_t chunk_max_tokens; /* 256 */

    /* eviction */
    const char *policy;      /* "flru" (see fkv_policy_names) */
    double alpha;            /* 0.7: F-LRU weight of 1/access_count */
    double beta;             /* 0.3: F-LRU weight of age */
    int64_t age_unit_ns;     /* 0: F-LRU age in turnovers of the pool (pages allocated / pool pages);
                              * > 0: in units of this many ns (the seed: 1e9, seconds) */
    fkv_quota_mode quotas;   /* FKV_QUOTA_REQUEST: fair shares around the policy */
    int share_guarantee;     /* 0 (default): tenant shares are targets, the tenant furthest over its
                              * share gives first; 1: shares are guarantees (tenant mode only): an
                              * under-share tenant never loses memory to another's allocation, over
                              * shares the policy's own order decides (src/core/shares.h, rule 4);
                              * 2: a static partition, the baseline of FairRide's guarantee: each
                              * tenant's share is its weighted part of the pool, whatever it runs,
                              * victims as with 1 (src/core/shares.h, rule 5) */
    double temperature;      /* 2.0: request quota ~ weight * demand^(1/T) */
    uint32_t tenant_labels;  /* 16: tenants with their own metric label (the rest: tenant="other") */
    int64_t min_chunk_retention_ns; /* 0: chunks younger than this go last */
    int free_tail_first;     /* 0: a sequence's chunks reach the policy in position order when it is
                              * unpinned or freed; 1: last chunk first (vLLM frees a request's blocks
                              * reversed, so its tail is evicted first: policy "freeq") */
    /* Belady's future (the "belady" policy), the hash-id mode's block size
     * and the request-class limits are evaluation notions: fkv_eval_config
     * and fkv_cache_create_eval in fairkv_eval.h (no longer fields here
     * since 0.2.0). */

    /* cold-chunk quantization (layouts in fairkv_quant.h) */
    fkv_quant_mode quant_mode; /* FKV_QUANT_OFF */
    fkv_dtype quant_dtype;     /* FKV_INT8, FKV_INT4 or FKV_FP8 */
    uint32_t quant_hot_tokens; /* 128: a sequence's last tokens stay full precision */
    double quant_pressure;     /* 0.9: pool occupancy above which under-pressure mode quantizes */
    /* precision ladder: 0 (default) off; N > 0: a warm chunk (quant_dtype:
     * int8 or fp8) with more than quant_hot_tokens + N tokens after it in
     * its sequence (or whose request ended) turns int4 (re-encoded from its
     * decoded int8 or fp8 values, as fair reclaim does).  So fp16 hot ->
     * int8 or fp8 warm -> int4 cold.  Needs quant_dtype int8 or fp8 and a
     * quant_mode other than off. */
    uint32_t quant_warm_tokens;

    /* host tier: chunks offloaded by fkv_seq_reclaim wait here, in host
     * memory, until fkv_seq_fetch copies them back (no recompute) */
    uint64_t host_capacity_bytes; /* 0: no host tier */
    /* 1: an idle cached chunk the device evicts is demoted to the host tier
     * (its K/V copied there, its prefix index entries kept) instead of
     * dropped; it leaves the host by the tier's own LRU, tenant shares and
     * prefix closure (docs/ARCHITECTURE.md, "Tiers").  fkv_seq_match_prefix
     * (FKV_MATCH_ALL_TIERS) finds it, fkv_seq_fetch copies it back.  Needs
     * host_capacity_bytes.
     * 0 (the default): nothing is demoted, and the cache behaves exactly as
     * without this field. */
    int host_demote;

    /* admission below the device (src/core/admit.h).  FKV_TIER_ADMIT_OFF (the
     * default): every idle chunk the device evicts goes down, as without
     * these fields.  Otherwise every full page a request computes or
     * matches is a sighting of its page key (the chained prefix key, seeded
     * by the tenant's namespace, so tenants never share counts), counted
     * by a TinyLFU sketch over about tier_admission_window sightings, and
     * an idle chunk the device evicts goes down to the host tier only when
     * its last page's count passes the test: FKV_TIER_ADMIT_SEEN, at least
     * tier_admission_threshold; FKV_TIER_ADMIT_TINYLFU, when the host is
     * full, at least the count of the host chunk it would push out (ties
     * go down: equal counts leave the host's order as it was).  Either
     * way a chunk that starts past 0 must extend a chunk still held, on
     * the device or in the host tier (prefix closure; with SEEN that one
     * must pass too).  Refused chunks are dropped and counted in
     * fairkv_tier_refused_total. */
    fkv_tier_admission tier_admission; /* FKV_TIER_ADMIT_OFF */
    uint32_t tier_admission_threshold; /* 2: sightings needed, 1..15 */
    uint64_t tier_admission_window;    /* 0: 10 x (device pages + host pages) */

    /* The order in which demoted idle chunks leave the host tier
     * (docs/ARCHITECTURE.md, "Host-tier eviction orders"); host_demote
     * only.  Whatever the order, the tenant shares choose whose chunk goes
     * first and the prefix closure replaces the order's pick by an idle
     * demoted chunk extending it (leaves first).  FKV_HOST_LRU (the
     * default): as without this field.  FKV_HOST_S3FIFO (Yang et al., SOSP
     * 2023): demoted chunks enter a small FIFO of a tenth of
     * host_capacity_bytes; one read from the host tier (a match that
     * attaches it) moves to the main FIFO when it reaches the small one's
     * head, the others leave and their keys wait in a ghost FIFO (as many
     * bytes as the main FIFO's nine tenths); a chunk demoted again while
     * its key is in the ghost, or that was read from the host tier before,
     * enters the main FIFO, whose head goes back to its tail while its
     * frequency (reads, at most 3) is above 0, one less each time.  Sizes
     * are in bytes, so chunks of any size count by what they hold.
     * FKV_HOST_ARC (Megiddo and Modha, FAST 2003): see the same section. */
    fkv_host_policy host_policy;

    /* prefix cache */
    int prefix_cache;        /* 1: finished requests' chunks stay cached and are matched */

    fkv_clock clock;
    const char *device_label; /* "cpu0": label of kv_cache_chunk_size{device} */
    int thread_safe;          /* 1: every call takes the cache lock */
} fkv_config;

/* Pure.  Fills the defaults above.  Then fkv_config_from_env() may override
 * fields from FAIRKV_<NAME> environment variables (docs/OPERATIONS.md). */
FKV_API void fkv_config_default(fkv_config *cfg);
FKV_API fkv_status fkv_config_from_env(fkv_config *cfg, char *err, size_t errlen);

/* Pure.  Bytes of one token's K and V over all layers at the config's dtype. */
FKV_API uint64_t fkv_config_token_bytes(const fkv_config *cfg);

/* Names of the registered eviction policies, NULL-terminated.  Pure. */
FKV_API const char *const *fkv_policy_names(void);

/* Pure.  "off", "tinylfu" or "seen" -> *out (an fkv_tier_admission, kept
 * an int for callers' own option structs); -1 on any other name (out
 * untouched).  The name of a mode, or "?" */
FKV_API int fkv_tier_admission_parse(const char *name, int *out);
FKV_API const char *fkv_tier_admission_name(int mode);

/* Pure.  "lru", "s3fifo" or "arc" -> *out (an fkv_host_policy); -1 on any
 * other name (out untouched).  The name of a policy, or "?" */
FKV_API int fkv_host_policy_parse(const char *name, int *out);
FKV_API const char *fkv_host_policy_name(int policy);

/* ---------------------------------------------------------------- cache */

typedef struct fkv_cache fkv_cache;
typedef struct fkv_seq fkv_seq;

/* Creates a cache.  On error returns the status and, if err != NULL, a
 * message naming the offending field. */
FKV_API fkv_status fkv_cache_create(const fkv_config *cfg, fkv_cache **out, char *err, size_t errlen);
/* Frees the cache and every sequence still open on it. */
FKV_API void fkv_cache_destroy(fkv_cache *c);

/* Deprecated: fkv_last_error() under another name (the detail is the
 * calling thread's, not the cache's; c is not read).  Kept one release;
 * a per-cache detail would only differ when two threads fail on one
 * cache at once, and then the thread's own detail is the one it wants. */
FKV_API FKV_DEPRECATED("use fkv_last_error") const char *fkv_cache_last_error(fkv_cache *c);

typedef struct fkv_cache_info {
    uint32_t page_tokens;
    uint32_t n_pages;
    uint32_t free_pages;
    uint64_t page_bytes;  /* K+V bytes of one page over all layers */
    uint64_t token_bytes; /* K+V bytes of one token over all layers */
    uint32_t n_chunks;    /* resident chunks */
    uint32_t n_seqs;      /* open sequences */
} fkv_cache_info;
FKV_API fkv_status fkv_cache_get_info(fkv_cache *c, fkv_cache_info *out);

/* Real storage (FKV_STORAGE_CPU).  Layer l's K of page p, slot s, head h
 * starts at k + p*page_stride + (s*n_kv_heads + h)*head_dim elements:
 * K[l] and V[l] are [n_pages][page_tokens][n_kv_heads][head_dim] of dtype.
 * page_stride is in bytes.  FKV_EUNSUPPORTED for phantom storage. */
FKV_API fkv_status fkv_cache_layer_storage(fkv_cache *c, uint32_t layer, void **k, void **v,
                                           uint64_t *page_stride);

/* Evicts chunks until `pages` pages are free; *freed gets the pages freed. */
FKV_API fkv_status fkv_cache_evict(fkv_cache *c, uint32_t pages, uint32_t *freed);

/* ---------------------------------------------------------------- tenants */

/* A tenant's weight in the max-min shares (default 1; (0, 1e9]).  Creates
 * the tenant if it has not been seen. */
FKV_API fkv_status fkv_cache_set_tenant_weight(fkv_cache *c, uint64_t tenant, double weight);

#define FKV_N_RECLAIM_SLOTS 7 /* fkv_reclaim_action values, then 6: idle chunks evicted */
typedef struct fkv_tenant_info {
    uint64_t tenant;
    double weight;
    uint64_t pages;        /* pages charged to it: running, preempted and cached chunks */
    double demand_pages;   /* pages it holds or its open requests expect to grow into */
    double share_pages;    /* weighted max-min fair share of the pool over demands */
    uint32_t seqs;         /* open sequences */
    uint64_t reclaimed_pages[FKV_N_RECLAIM_SLOTS]; /* by fkv_reclaim_action; [6] = idle chunks evicted */
    uint64_t prefix_query_tokens, prefix_hit_tokens;
    uint64_t host_bytes;       /* bytes it holds in the host tier (offloaded and demoted chunks) */
    double host_share_bytes;   /* weighted max-min share of the host tier over its holders */
} fkv_tenant_info;
/* Shares are refreshed first.  FKV_ENOENT for a tenant never seen. */
FKV_API fkv_status fkv_cache_tenant_info(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out);
/* The same without the refresh, in O(1): pages, weight and counters as
 * they are now; demand_pages, share_pages and host_share_bytes as of the
 * last refresh (by fkv_cache_tenant_info or the cache's own eviction).
 * For a caller asking about many tenants at once: one fkv_cache_tenant_info
 * refreshes every tenant's shares (O(tenants + open requests)). */
FKV_API fkv_status fkv_cache_tenant_peek(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out);

/* ---------------------------------------------------------------- chunks */

/* What attention kernels and tools read of a chunk, in place: only what
 * stays as it is while the chunk's sequence is pinned.  A chunk is a
 * run of tokens [start, start+n_tokens) of a sequence, held in whole pages.
 * Token t of the chunk (0-based) lives in page pages[t / page_tokens],
 * slot t % page_tokens, for fp32/fp16 chunks; quantized layouts are defined
 * by src/quant.  `pages` is NULL when the chunk is evicted. */
struct fkv_chunk_view {
    uint32_t start;          /* first token position in the sequence */
    uint32_t n_tokens;       /* tokens held (the last chunk may be partial) */
    uint32_t cap_tokens;     /* target size (whole pages) */
    uint32_t n_pages;        /* pages in use */
    const uint32_t *pages;   /* [n_pages] page ids, NULL if evicted */
    fkv_dtype dtype;         /* precision of the stored K/V */
    int resident;            /* 0 once evicted: the range must be recomputed */
    const void *qmeta;       /* quantization scales, NULL for fp32/fp16 (and phantom storage) */
    int dropped;             /* evicted on purpose by fkv_seq_drop: not missing, not read */
    int offloaded;           /* not resident, its K/V in the host tier: fkv_seq_fetch brings them back */
};

/* What changes with every call, even while the chunk's sequence is pinned
 * (other sequences share it, read it, free it): read a copy, taken under
 * the cache's lock (fkv_seq_chunk_info), or in a next-use callback. */
struct fkv_chunk_info {
    uint32_t refs;           /* sequences whose table holds the chunk */
    uint32_t pins;           /* pins of running batches */
    uint64_t access_count;   /* heat: touches since creation (>= 1) */
    int64_t create_ns;
    int64_t last_access_ns;
    int64_t expected_ttl_ns; /* predicted remaining life; 0 = unknown */
    uint64_t owner;          /* request id charged for it; 0 = none (cached) */
    uint64_t first_hash;     /* prefix hash of its first full page; 0 = none */
};

/* ---------------------------------------------------------------- sequences */

typedef struct fkv_seq_params {
    uint64_t request_id;      /* nonzero, unique among open sequences */
    uint64_t client_id;       /* fairness client (informational in the cache) */
    double weight;            /* 1.0: quota weight */
    uint32_t expected_tokens; /* prompt + max output if known (class, TTL); 0 = unknown */
    /* (hash-id mode, traces that publish block ids instead of tokens:
     * fkv_seq_create_blocks in fairkv_eval.h) */
    /* Tenant (a user, an API key): fair shares and the charge of pages.
     * 0 = the anonymous tenant.  Prefix namespaces: a page is matched only
     * by requests of the same tenant and salt, except the pages wholly
     * inside the first shared_prefix_tokens tokens, which any tenant with
     * the same salt matches (a system prompt published to all).  Tenant 0's
     * pages are all in the public namespace (a request that names no
     * tenant opts out of isolation, as in an engine without cache salts). */
    uint64_t tenant;
    uint64_t cache_salt;           /* 0 = none; else mixed into every page key (vLLM's cache_salt) */
    uint32_t shared_prefix_tokens; /* leading tokens published to every tenant; 0 = none */
} fkv_seq_params;

FKV_API void fkv_seq_params_default(fkv_seq_params *p); /* pure */

/* Where the caller writes K/V for one appended token. */
typedef struct fkv_slot {
    uint32_t page;
    uint32_t slot;
} fkv_slot;

typedef struct fkv_range {
    uint32_t start, end; /* token positions [start, end) */
} fkv_range;

FKV_API fkv_status fkv_seq_create(fkv_cache *c, const fkv_seq_params *p, fkv_seq **out);

/* Where fkv_seq_match_prefix looks for the prefix. */
typedef enum fkv_match_tiers {
    FKV_MATCH_DEVICE_ONLY = 0, /* pages resident on the device */
    FKV_MATCH_ALL_TIERS = 1    /* and whole chunks in the host tier (demoted ones, host_demote) */
} fkv_match_tiers;

/* What a match attached, per tier.  The matched run is
 * [0, device_tokens + host_tokens), the sequence's length after the call:
 * every token is device-resident or in the host tier, and device and host
 * chunks may alternate (a prefix is never in a lower tier than what
 * extends it, but a shared head may be). */
typedef struct fkv_match_info {
    uint32_t device_tokens; /* matched tokens whose pages are on the device now */
    uint32_t host_tokens;   /* matched tokens in the host tier: attached as offloaded chunks */
    uint64_t host_bytes;    /* bytes fkv_seq_fetch will copy for them (K/V and scales) */
} fkv_match_info;

/* Matches the start of `tokens` (or, in hash-id mode with tokens == NULL,
 * the sequence's block ids) against the prefix cache and attaches the
 * matching chunks to the empty sequence by reference.  At most max_tokens
 * are matched (pass n-1 to keep one token to compute); append the rest.
 *   FKV_MATCH_DEVICE_ONLY  resident pages only: host_tokens is 0;
 *   FKV_MATCH_ALL_TIERS    the host tier's whole chunks of the prefix
 *                          too: they are attached as offloaded chunks
 *                          (view.offloaded, missing) that hold no device
 *                          page until fkv_seq_fetch (FKV_FETCH_HOST)
 *                          copies their K/V back, which the caller does
 *                          before a step reads them; until then they leave
 *                          the host tier's eviction order.  With no
 *                          host-resident chunk it matches what
 *                          FKV_MATCH_DEVICE_ONLY does.
 * (SGLang's match_prefix likewise returns one result for one prefix with
 * a device part and, with its hierarchical cache, a host part.) */
FKV_API fkv_status fkv_seq_match_prefix(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens,
                                        fkv_match_tiers tiers, fkv_match_info *out);

/* Appends n tokens (token ids may be NULL when prefix caching is off or in
 * hash-id mode).  slots (may be NULL) gets where each token's K/V goes.
 * Evicts as needed; on FKV_EFULL nothing was appended or lost. */
FKV_API fkv_status fkv_seq_append(fkv_seq *s, const int32_t *tokens, uint32_t n, fkv_slot *slots);

/* Creates a child that shares every chunk of s by reference; the first
 * write into a shared page copies that page only. */
FKV_API fkv_status fkv_seq_fork(fkv_seq *s, const fkv_seq_params *p, fkv_seq **child);

/* Ends the sequence.  Its chunks stay cached (prefix cache on) until evicted. */
FKV_API void fkv_seq_free(fkv_seq *s);

/* One engine step reads [0, len) of the sequence: counts hit and missing
 * tokens for the sequence's class, heats the resident chunks.  *missing
 * (may be NULL) gets the tokens that must be recomputed. */
FKV_API fkv_status fkv_seq_touch(fkv_seq *s, uint32_t *missing);

/* Pinned chunks (the running batch) are never evicted; pins nest. */
FKV_API fkv_status fkv_seq_pin(fkv_seq *s);
FKV_API fkv_status fkv_seq_unpin(fkv_seq *s);

/* Token ranges whose chunks were evicted, in order; *n gets the count
 * (may exceed cap: then only cap were written). */
FKV_API fkv_status fkv_seq_missing(fkv_seq *s, fkv_range *out, size_t cap, size_t *n);

/* Where fkv_seq_fetch brings chunks back from: a set of these bits. */
typedef enum fkv_fetch_from {
    FKV_FETCH_RECOMPUTE = 1, /* evicted chunks, whose K/V are nowhere: they get device pages again
                              * and the caller computes their K/V into `slots` */
    FKV_FETCH_HOST = 2,      /* chunks in the host tier (offloaded by fkv_seq_reclaim, or attached
                              * by an FKV_MATCH_ALL_TIERS match): their K/V and scales are copied
                              * back as they were, nothing to compute */
    FKV_FETCH_ALL = 3
} fkv_fetch_from;

/* What fkv_seq_fetch brought back, by source. */
typedef struct fkv_fetch_info {
    uint32_t recompute_tokens; /* tokens given pages to recompute (slots[0, recompute_tokens)) */
    uint32_t host_tokens;      /* tokens copied back from the host tier */
    uint64_t host_bytes;       /* bytes copied (K/V and scales): what a simulator prices at the host
                                * link's bandwidth */
} fkv_fetch_info;

/* Brings s's chunks in [start, end) that are not on the device back to
 * device pages, from the sources in `from` (evicting others as needed;
 * dropped chunks stay dropped).  One reservation covers them all:
 * FKV_EFULL means nothing was brought back.  slots (may be NULL) gets one
 * entry per recomputed token, in position order; out (may be NULL) what
 * came from where.  The remote tier lives outside the cache: what it
 * holds comes back by fkv_seq_append. */
FKV_API fkv_status fkv_seq_fetch(fkv_seq *s, uint32_t start, uint32_t end, unsigned from, fkv_slot *slots,
                                 fkv_fetch_info *out);

/* Attention sparsity (StreamingLLM, H2O): the chunks wholly inside
 * [start, end) are dropped: their pages are freed now and they are neither
 * missing (fkv_seq_missing, fkv_seq_touch) nor restored.  *n_dropped
 * (may be NULL) gets the tokens dropped. */
FKV_API fkv_status fkv_seq_drop(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_dropped);

/* Fair reclaim of a running request's memory (docs/ARCHITECTURE.md,
 * "Reclaim"): frees up to `pages` pages from s's cold chunks (those with
 * at least quant_hot_tokens tokens after them) by one action, oldest
 * positions first; *freed (may be NULL) gets the pages freed.  The caller
 * may hold s pinned but must guarantee that nothing reads s's K/V during
 * the call (a scheduler forming a step); chunks pinned by another
 * sequence, shared with one (DROP, EVICT), or restored and not yet
 * computed are left alone.  Each action's pages are counted for s's
 * tenant (fairkv_tenant_reclaimed_pages_total{action}).
 *   QUANTIZE8 / QUANTIZE4  store base-precision chunks in int8 / int4, and
 *                          (QUANTIZE4) int8 chunks in int4 (readers
 *                          dequantize: nothing to redo);
 *   DROP                   drop chunks wholly inside [sink, len - window)
 *                          (attention sparsity: never read again);
 *   EVICT                  evict: fkv_seq_missing reports them, and the
 *                          caller fetches (FKV_FETCH_RECOMPUTE) and
 *                          recomputes them before s's next step;
 *   OFFLOAD                copy the chunks' K/V (and scales) to the host
 *                          tier (host_capacity_bytes) and free their pages:
 *                          they are missing with view.offloaded set, and
 *                          fkv_seq_fetch (FKV_FETCH_HOST) copies them back
 *                          before s's next step reads them;
 *   PREEMPT                not an action of the cache: the slot where
 *                          fkv_seq_count_preempt records a preemption (the
 *                          scheduler frees or offloads the victim itself).
 *                          Passed here it does what fkv_seq_count_preempt
 *                          does and frees nothing; kept one release. */
typedef enum fkv_reclaim_action {
    FKV_RECLAIM_QUANTIZE8 = 0,
    FKV_RECLAIM_QUANTIZE4 = 1,
    FKV_RECLAIM_DROP = 2,
    FKV_RECLAIM_EVICT = 3,
    FKV_RECLAIM_PREEMPT = 4, /* accounting only: fkv_seq_count_preempt */
    FKV_RECLAIM_OFFLOAD = 5
} fkv_reclaim_action;
#define FKV_N_RECLAIM 6
FKV_API const char *fkv_reclaim_name(fkv_reclaim_action a); /* pure: "quantize8", ... */
typedef struct fkv_reclaim_args {
    uint32_t sink_tokens, window_tokens; /* DROP: the kept sink and recent window */
} fkv_reclaim_args;
FKV_API fkv_status fkv_seq_reclaim(fkv_seq *s, fkv_reclaim_action a, const fkv_reclaim_args *args, uint32_t pages,
                                   uint32_t *freed);

/* s is about to be preempted by its scheduler: the pages charged to it now
 * are counted for its tenant as reclaimed by preemption
 * (reclaimed_pages[FKV_RECLAIM_PREEMPT], the metric's action="preempt").
 * Frees nothing: the preemption itself is the scheduler's (fkv_seq_free,
 * or fkv_seq_reclaim OFFLOAD).  A separate call rather than a reclaim
 * action because it changes no chunk; *pages (may be NULL) gets the pages
 * counted. */
FKV_API fkv_status fkv_seq_count_preempt(fkv_seq *s, uint64_t *pages);

FKV_API uint32_t fkv_seq_len(const fkv_seq *s);       /* tokens in the sequence */
FKV_API uint64_t fkv_seq_tenant(const fkv_seq *s);    /* its tenant id */
/* Pages charged to s (its chunks' pages: docs/ARCHITECTURE.md, "Tenants"). */
FKV_API uint64_t fkv_seq_pages(fkv_seq *s);
FKV_API uint64_t fkv_seq_id(const fkv_seq *s);        /* request id */

/* The sequence's chunk table, zero-copy: (*chunks)[i] points at the live
 * chunk metadata, in position order.  Valid until the next call that
 * changes this sequence or evicts. */
FKV_API fkv_status fkv_seq_chunks(fkv_seq *s, const fkv_chunk_view *const **chunks, size_t *n);

/* A copy of chunk i's info (fkv_chunk_info), taken under the lock. */
FKV_API fkv_status fkv_seq_chunk_info(fkv_seq *s, size_t i, fkv_chunk_info *out);

/* Pure.  The prefix index's key of a page: parent = key of the previous
 * page (0 for the first), tokens = the page's page_tokens ids.  Equal keys
 * mean equal prefixes; a simulator can predict future matches with it. */
FKV_API uint64_t fkv_page_key(uint64_t parent, const int32_t *tokens, uint32_t page_tokens);

/* Pure.  Where token `pos` of a sequence with this chunk table lives. */
FKV_API fkv_status fkv_chunks_locate(const fkv_chunk_view *const *chunks, size_t n, uint32_t page_tokens,
                                     uint32_t pos, fkv_slot *out);

/* ---------------------------------------------------------------- metrics */

/* Prometheus text exposition format 0.0.4 / a JSON object.  Writes at most
 * cap bytes including the NUL; *len gets the full length (call again with a
 * larger buffer if *len >= cap). */
FKV_API fkv_status fkv_cache_metrics_prometheus(fkv_cache *c, char *buf, size_t cap, size_t *len);
FKV_API fkv_status fkv_cache_metrics_json(fkv_cache *c, char *buf, size_t cap, size_t *len);

/* Snapshot of a few counters for programs (the full list is in the text
 * formats). */
typedef struct fkv_counters {
    /* by request class (fairkv_eval.h: fkv_class, FKV_N_CLASSES) */
    uint64_t hit_tokens[3];
    uint64_t miss_tokens[3];
    uint64_t evicted_chunks[3];
    uint64_t evicted_pages;
    uint64_t prefix_query_tokens;
    uint64_t prefix_hit_tokens;
    uint64_t quota_overruns;
    uint64_t cow_copies;
    uint32_t pages_used;
    uint32_t pages_free;
    /* below the device: idle chunks demoted to the host tier and their
     * bytes (the PCIe writes), and those the admission filter refused */
    uint64_t host_demoted_chunks;
    uint64_t host_demoted_bytes;
    uint64_t host_refused_chunks;
} fkv_counters;
FKV_API fkv_status fkv_cache_counters(fkv_cache *c, fkv_counters *out);

/* ---------------------------------------------------------------- deprecated */

/* Kept one release as thin wrappers over the calls named, then removed. */

/* fkv_seq_fetch(s, start, end, FKV_FETCH_RECOMPUTE, slots, &fi);
 * *n_restored = fi.recompute_tokens. */
FKV_API FKV_DEPRECATED("use fkv_seq_fetch(..., FKV_FETCH_RECOMPUTE, ...)") fkv_status
fkv_seq_restore(fkv_seq *s, uint32_t start, uint32_t end, fkv_slot *slots, uint32_t *n_restored);
/* fkv_seq_fetch(s, start, end, FKV_FETCH_HOST, NULL, &fi); *n_reloaded = fi.host_tokens. */
FKV_API FKV_DEPRECATED("use fkv_seq_fetch(..., FKV_FETCH_HOST, ...)") fkv_status
fkv_seq_reload(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_reloaded);
/* fkv_seq_fetch(s, start, end, FKV_FETCH_HOST, NULL, &fi); *n_tokens =
 * fi.host_tokens, *n_bytes = fi.host_bytes. */
FKV_API FKV_DEPRECATED("use fkv_seq_fetch(..., FKV_FETCH_HOST, ...)") fkv_status
fkv_seq_promote(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_tokens, uint64_t *n_bytes);
/* fkv_seq_match_prefix(s, tokens, n, max_tokens, FKV_MATCH_DEVICE_ONLY, &mi);
 * *matched = mi.device_tokens. */
FKV_API FKV_DEPRECATED("use fkv_seq_match_prefix(..., FKV_MATCH_DEVICE_ONLY, ...)") fkv_status
fkv_seq_match(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens, uint32_t *matched);
/* fkv_seq_match_prefix(s, tokens, n, max_tokens, FKV_MATCH_ALL_TIERS, out). */
FKV_API FKV_DEPRECATED("use fkv_seq_match_prefix(..., FKV_MATCH_ALL_TIERS, ...)") fkv_status
fkv_seq_match_tiers(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens, fkv_match_info *out);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_H */
