/* The host tier's eviction orders (fkv_config.host_policy): S3-FIFO and
 * ARC against reference traces whose hits are worked out by hand below,
 * against small independent reference implementations (plain arrays) over
 * a few thousand random accesses, with the prefix closure (an idle chunk
 * extending the order's pick goes first) and the tenant shares (the order
 * chooses only among the designated tenant's chunks); the simulator's
 * remote store with the same orders; and the configuration's checks. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "bench_cli.h"
#include "check.h"
#include "core/ghost.h"
#include "core/internal.h"
#include "engine/engine.h"
#include "fairkv.h"
#include "model_fixture.h"
#include "server/backend_engine_opts.h"
#include "sim/remote_store.h"
#include "util/rng.h"

#define PT 4
#define CHUNK 8
#define PAGE_BYTES (PT * 2 * 4 * sizeof(float) * 2) /* 2 layers, dim 4, K and V: 256 */
#define CHUNK_BYTES (2 * PAGE_BYTES)

static int64_t now_ns;

/* A device of `dev_pages` pages (2 = one chunk), a host of `host_chunks`
 * chunks, quotas off or by tenant. */
static fkv_cache *open_cache(int policy, uint32_t dev_pages, uint32_t host_chunks, fkv_quota_mode quotas)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 2;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 4;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = CHUNK;
    cfg.capacity_pages = dev_pages;
    cfg.storage = FKV_STORAGE_PHANTOM;
    cfg.policy = "lru";
    cfg.quotas = quotas;
    cfg.host_capacity_bytes = (uint64_t)host_chunks * CHUNK_BYTES;
    cfg.host_demote = 1;
    cfg.host_policy = policy;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now_ns;
    cfg.thread_safe = 0;
    fkv_cache *c = NULL;
    char err[256];
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    return c;
}

static fkv_seq *new_seq(fkv_cache *c, uint64_t id, uint64_t tenant)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    p.tenant = tenant;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    return s;
}

static void fill(int32_t *tok, uint32_t n, int32_t base)
{
    for (uint32_t i = 0; i < n; i++) tok[i] = base + (int32_t)i;
}

static int sound(fkv_cache *c)
{
    char msg[256];
    int bad = fkv__cache_check(c, msg, sizeof msg);
    if (bad) fprintf(stderr, "invariant: %s\n", msg);
    return !bad;
}

static uint64_t req_id;

/* One access to the one-chunk prompt of key k on a device of one chunk:
 * 'D' found on the device; 'H' found in the host tier, then copied back
 * (promoted: the device's chunk goes down to make room); 'M' missed, then
 * computed (the device's chunk goes down). */
static char access_key_as(fkv_cache *c, uint32_t k, uint64_t tenant, int look)
{
    int32_t tok[CHUNK];
    fill(tok, CHUNK, (int32_t)(k * 100));
    now_ns += 1000;
    fkv_seq *s = new_seq(c, ++req_id, tenant);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(s, tok, CHUNK, CHUNK, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    char r = 'M';
    if (mi.device_tokens == CHUNK) {
        r = 'D';
    } else if (mi.host_tokens == CHUNK && look) {
        r = 'H'; /* let go without copying back: it returns to its list */
    } else if (mi.host_tokens == CHUNK) {
        fkv_fetch_info fi;
        REQUIRE(fkv_seq_fetch(s, 0, CHUNK, FKV_FETCH_HOST, NULL, &fi) == FKV_OK && fi.host_tokens == CHUNK);
        r = 'H';
    } else if (!look) {
        REQUIRE(mi.device_tokens == 0 && mi.host_tokens == 0);
        REQUIRE(fkv_seq_append(s, tok, CHUNK, NULL) == FKV_OK);
    }
    fkv_seq_free(s);
    return r;
}

static char access_key(fkv_cache *c, uint32_t k, uint64_t tenant) { return access_key_as(c, k, tenant, 0); }

static void run_trace(fkv_cache *c, const uint32_t *keys, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) out[i] = access_key(c, keys[i], 0);
    out[n] = 0;
}

/* ------------------------------------------------- hand-computed traces */

/* Device: one chunk; host: 4 chunks.  A hot pair (1, 2) is read from the
 * host twice, then a scan of keys seen once, then the pair again.  Hits
 * (H) worked out by hand:
 *
 *   step:    1 2 3 4 5 6 7 8 9 10 11 12 13
 *   key:     1 2 1 2 3 4 5 6 1 2  3  7  3
 *   lru:     M M H H M M M M M M  M  M  H
 *   s3fifo:  M M H H M M M M H H  M  M  H
 *
 * lru (host list oldest first): step 3 finds 1 and copies it back, which
 * demotes 2 ([2]); step 4 the same for 2 ([1]); 3 4 5 demote 2 3 4:
 * [1 2 3 4], full; 6 demotes 5, 1 leaves; step 9 misses 1 and demotes 6,
 * 2 leaves; then 3 and 4 leave for 1 and 2; step 12 demotes 3 (5 leaves),
 * which step 13 finds: [6 1 2 3].
 *
 * s3fifo (small FIFO S: a tenth of 4 chunks, so any chunk in it is over
 * its target; main FIFO M; ghost: 4 - 0.4 chunks of bytes, 3 keys): steps
 * 2 and 3 demote 1 and 2, new: S.  Both are read from the host (steps 3,
 * 4: frequency 1), so when they come down again (steps 4, 5) they enter
 * M: M [1 2].  Steps 6, 7 demote 3 and 4: S [3 4], the host is full.  Step
 * 8 demotes 5: room from S, whose head 3 (frequency 0) leaves (ghost [3]):
 * S [4 5].  Step 9 finds 1 in M (frequency 2); its copy back demotes 6
 * while 1 still holds its bytes: 4 leaves (ghost [3 4]), S [5 6].  Step 10
 * finds 2 (frequency 2) and demotes 1 (read before: M [1]).  Step 11
 * misses 3 and demotes 2: M [1 2], S [5 6], full.  Step 12 misses 7 and
 * demotes 3: room first, 5 leaves S (ghost [3 4 5]); then 3, its key in
 * the ghost, enters M (ghost [4 5]).  Step 13 finds 3 in M and copies it
 * back, demoting 7: 6 leaves S (ghost [4 5 6]), 7 enters S.  At the end:
 * M [1 2] (frequency 2 each), S [7], 3 on the device, ghost 3 keys. */
static void test_scan(void)
{
    static const uint32_t keys[] = {1, 2, 1, 2, 3, 4, 5, 6, 1, 2, 3, 7, 3};
    size_t n = sizeof keys / sizeof keys[0];
    char got[32];
    fkv_cache *c = open_cache(FKV_HOST_LRU, 2, 4, FKV_QUOTA_OFF);
    run_trace(c, keys, n, got);
    CHECKF(!strcmp(got, "MMHHMMMMMMMMH"), "lru: %s", got);
    CHECK(sound(c));
    fkv_cache_destroy(c);
    c = open_cache(FKV_HOST_S3FIFO, 2, 4, FKV_QUOTA_OFF);
    run_trace(c, keys, n, got);
    CHECKF(!strcmp(got, "MMHHMMMMHHMMH"), "s3fifo: %s", got);
    CHECK(c->host_main_bytes == 2 * CHUNK_BYTES && c->host_small_bytes == CHUNK_BYTES);
    CHECK(c->host_lru.head && c->host_lru.head->host.freq == 2 && c->host_lru.tail->host.freq == 2);
    CHECK(fkv__ghost_count(c->host_ghost) == 3);
    CHECK(c->stats.fairkv_tier_evictions_total[1] == 4); /* 3 4 5 6 */
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* ARC on the same device and host (4 chunks; p, T1's target, starts at 0;
 * B1 holds at most 4 - |T1| chunks' keys, B2 4 - |T2|).  Worked by hand:
 *
 *   step:  1 2 3 4 5 6 7 8 9 10 11 | 12 13 14
 *   key:   1 2 1 2 3 4 5 3 6 4  7  |  8  1  9
 *   arc:   M M H H M M M H M M  M  |  M  M  M
 *
 * Steps 1-5 as in test_scan: 1 and 2 read, then on T2 [1 2].  Steps 6, 7
 * demote 3, 4: T1 [3 4], full.  Step 8 finds 3 and demotes 5: room, T1
 * (1 chunk once 3 is held) is over p = 0: 4 leaves for B1 [4]; T1 [5].
 * Step 9 demotes 3 (read: T2 [1 2 3]).  Step 10 misses 4 and demotes 6
 * (5 leaves T1 for B1 [4 5]).  Step 11 misses 7 and demotes 4: room first
 * (6 leaves T1: B1 [4 5 6]), then 4 is found in B1: |B1| = 3 >= |B2| = 0,
 * so p grows by one chunk, and 4 enters T2 [1 2 3 4]; B1 [5 6].
 * Step 12 demotes 7: T1 is empty, so T2's oldest, 1, leaves for B2 [1];
 * T1 [7].  Step 13 misses 1 and demotes 8: T1 holds 1 chunk, not more
 * than p = 1: T2's oldest, 2, leaves (B2 [1 2]); T1 [7 8].  Step 14
 * demotes 1: room first, T1 (2) is over p (1): 7 leaves (B1 [5 6 7]); 1
 * is found in B2: |B2| = 2 < |B1| = 3, so p falls by 3/2 chunk, to 0;
 * T2 [3 4 1], T1 [8]. */
static void test_arc_adapts(void)
{
    static const uint32_t keys[] = {1, 2, 1, 2, 3, 4, 5, 3, 6, 4, 7, 8, 1, 9};
    char got[32];
    fkv_cache *c = open_cache(FKV_HOST_ARC, 2, 4, FKV_QUOTA_OFF);
    run_trace(c, keys, 11, got);
    CHECKF(!strcmp(got, "MMHHMMMHMMM"), "arc: %s", got);
    CHECKF(c->host_arc_p == (double)CHUNK_BYTES, "p = %g", c->host_arc_p);
    CHECK(c->host_main_bytes == 4 * CHUNK_BYTES && c->host_small_bytes == 0);
    CHECK(fkv__ghost_count(c->host_ghost) == 2 && fkv__ghost_count(c->host_ghost2) == 0);
    run_trace(c, keys + 11, 3, got);
    CHECKF(!strcmp(got, "MMM"), "arc: %s", got);
    CHECKF(c->host_arc_p == 0, "p = %g", c->host_arc_p);
    CHECK(c->host_main_bytes == 3 * CHUNK_BYTES && c->host_small_bytes == CHUNK_BYTES);
    CHECK(fkv__ghost_count(c->host_ghost) == 3 && fkv__ghost_count(c->host_ghost2) == 1);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* --------------------------------------------- reference implementations */

/* The tier as the test sees it, in plain arrays: chunks of equal size,
 * capacity `cap` chunks, the device one chunk in front (each access as in
 * access_key).  Queues are arrays, oldest first. */
#define NK 64
typedef struct ref {
    int policy;
    uint32_t cap;
    int dev;                  /* key on the device, -1 none */
    int small[NK], main[NK];  /* queues: keys, oldest first */
    uint32_t ns, nm;
    int ghost[NK], ghost2[NK]; /* s3fifo's ghost / arc's B1; arc's B2 */
    uint32_t ng, ng2;
    uint8_t freq[NK], read[NK];
    double p;                 /* arc, in chunks */
} ref;

static int find(const int *q, uint32_t n, int k)
{
    for (uint32_t i = 0; i < n; i++)
        if (q[i] == k) return (int)i;
    return -1;
}

static void del(int *q, uint32_t *n, uint32_t at)
{
    memmove(q + at, q + at + 1, (*n - at - 1) * sizeof *q);
    (*n)--;
}

static void ghost_add(int *g, uint32_t *n, int k, uint32_t keep)
{
    int at = find(g, *n, k);
    if (at >= 0) del(g, n, (uint32_t)at);
    g[(*n)++] = k;
    while (*n > keep) del(g, n, 0);
}

static int ghost_take(int *g, uint32_t *n, int k)
{
    int at = find(g, *n, k);
    if (at < 0) return 0;
    del(g, n, (uint32_t)at);
    return 1;
}

/* One chunk leaves for room (the caller checked the tier is full). */
static void ref_evict(ref *r)
{
    for (;;) {
        /* s3fifo: the small FIFO when over a tenth of the bytes; arc: T1 over p */
        double limit = r->policy == FKV_HOST_S3FIFO ? (double)(r->cap * CHUNK_BYTES / 10) / CHUNK_BYTES : r->p;
        int from_small = r->policy != FKV_HOST_LRU && r->ns && (!r->nm || r->ns > limit);
        int *q = from_small ? r->small : r->main;
        uint32_t *n = from_small ? &r->ns : &r->nm;
        int h = q[0];
        if (r->policy == FKV_HOST_S3FIFO && r->freq[h]) {
            del(q, n, 0);
            if (from_small) r->freq[h] = 0;
            else r->freq[h]--;
            r->main[r->nm++] = h;
            continue;
        }
        del(q, n, 0);
        if (r->policy == FKV_HOST_S3FIFO && from_small) {
            ghost_add(r->ghost, &r->ng, h, (r->cap * CHUNK_BYTES - r->cap * CHUNK_BYTES / 10) / CHUNK_BYTES);
        } else if (r->policy == FKV_HOST_ARC) {
            if (from_small) ghost_add(r->ghost, &r->ng, h, r->cap - r->ns);
            else ghost_add(r->ghost2, &r->ng2, h, r->cap - r->nm);
        }
        r->freq[h] = r->read[h] = 0; /* gone: a new chunk if it returns */
        return;
    }
}

/* The device's chunk goes down; `held` chunks still hold host bytes. */
static void ref_demote(ref *r, uint32_t held)
{
    int d = r->dev;
    if (d < 0) return;
    while (r->ns + r->nm + held + 1 > r->cap) ref_evict(r);
    int small = 0;
    if (r->policy == FKV_HOST_S3FIFO) {
        if (ghost_take(r->ghost, &r->ng, d)) r->freq[d] = 0;
        else if (!r->read[d]) small = 1, r->freq[d] = 0;
    } else if (r->policy == FKV_HOST_ARC) {
        double b1 = r->ng, b2 = r->ng2;
        if (ghost_take(r->ghost, &r->ng, d)) {
            r->p += b1 >= b2 ? 1 : b2 / b1;
            if (r->p > r->cap) r->p = r->cap;
        } else if (ghost_take(r->ghost2, &r->ng2, d)) {
            r->p -= b2 >= b1 ? 1 : b1 / b2;
            if (r->p < 0) r->p = 0;
        } else if (!r->read[d]) {
            small = 1;
        }
    }
    if (small) r->small[r->ns++] = d;
    else r->main[r->nm++] = d;
}

/* A look: a match that lets go.  A host chunk is read and returns to
 * the tail of its list (arc: of T2); nothing is computed on a miss. */
static char ref_look(ref *r, int k)
{
    if (r->dev == k) return 'D';
    int at;
    if ((at = find(r->small, r->ns, k)) >= 0) {
        del(r->small, &r->ns, (uint32_t)at);
        if (r->policy == FKV_HOST_ARC) r->main[r->nm++] = k;
        else r->small[r->ns++] = k;
    } else if ((at = find(r->main, r->nm, k)) >= 0) {
        del(r->main, &r->nm, (uint32_t)at);
        r->main[r->nm++] = k;
    } else {
        return 'M';
    }
    if (r->freq[k] < 3) r->freq[k]++;
    r->read[k] = 1;
    return 'H';
}

static char ref_access(ref *r, int k)
{
    if (r->dev == k) return 'D';
    int at;
    if ((at = find(r->small, r->ns, k)) >= 0 || (at = find(r->main, r->nm, k)) >= 0) {
        if (find(r->small, r->ns, k) >= 0) del(r->small, &r->ns, (uint32_t)at);
        else del(r->main, &r->nm, (uint32_t)at);
        if (r->freq[k] < 3) r->freq[k]++;
        r->read[k] = 1;
        ref_demote(r, 1); /* k still holds its bytes while it is copied back */
        r->dev = k;
        return 'H';
    }
    ref_demote(r, 0);
    r->dev = k;
    return 'M';
}

/* A few thousand accesses over 40 keys, skewed (a key's chance falls with
 * its index, squared uniform), a quarter of them looks (matched, let go),
 * against the reference, access by access. */
static void test_against_reference(int policy, uint32_t cap, uint64_t seed)
{
    fkv_cache *c = open_cache(policy, 2, cap, FKV_QUOTA_OFF);
    ref r;
    memset(&r, 0, sizeof r);
    r.policy = policy;
    r.cap = cap;
    r.dev = -1;
    uint64_t rng = seed;
    uint32_t hits = 0, diverged = 0;
    for (uint32_t i = 0; i < 3000 && !diverged; i++) {
        double u = (double)(fkv_rng_splitmix(&rng) >> 11) / 9007199254740992.0;
        int k = (int)(u * u * 40), look = fkv_rng_splitmix(&rng) % 4 == 0; /* a quarter: looks */
        char want = look ? ref_look(&r, k) : ref_access(&r, k), got = access_key_as(c, (uint32_t)k, 0, look);
        hits += want == 'H';
        if (want != got) {
            fprintf(stderr, "%s cap %u: access %u (key %d): tier %c, reference %c\n", fkv_host_policy_name(policy), cap, i,
                    k, got, want);
            diverged = 1;
        }
        if (i % 500 == 0 && !sound(c)) diverged = 1;
    }
    CHECK(!diverged);
    CHECKF(hits > 100, "%s cap %u: %u host hits (the trace must exercise the host)", fkv_host_policy_name(policy), cap, hits);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* ----------------------------------------------------- closure, shares */

/* A prompt A B C: A stays on the device, B and C go down (leaves first: C
 * then B, both new: the small list).  A match of all three reads B and C
 * and lets go: B returns first, then C, frequency 1 (s3fifo: the small
 * FIFO; arc: T2).  A goes down into a full host of 2 chunks: s3fifo moves
 * B then C on to the main FIFO (frequency 0), takes main's head B, and
 * the closure replaces B by C, which extends it; arc takes T2's oldest, B,
 * replaced by C the same way.  B and A stay: a match finds 16 host tokens. */
static void test_closure(int policy)
{
    fkv_cache *c = open_cache(policy, 8, 2, FKV_QUOTA_OFF);
    int32_t p[24];
    fill(p, 24, 0);
    fkv_seq *s = new_seq(c, ++req_id, 0);
    REQUIRE(fkv_seq_append(s, p, 24, NULL) == FKV_OK);
    fkv_seq_free(s);
    uint32_t freed = 0;
    REQUIRE(fkv_cache_evict(c, 6, &freed) == FKV_OK); /* C, then B, go down */
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 2 && c->host_n == 2);
    s = new_seq(c, ++req_id, 0);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(s, p, 24, 24, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    CHECK(mi.device_tokens == 8 && mi.host_tokens == 16);
    fkv_seq_free(s);
    CHECK(sound(c));
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK); /* A goes down; room: C, not B */
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 3 && c->stats.fairkv_tier_evictions_total[1] == 1);
    s = new_seq(c, ++req_id, 0);
    REQUIRE(fkv_seq_match_prefix(s, p, 24, 24, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    CHECKF(mi.device_tokens == 0 && mi.host_tokens == 16, "%s: device %u host %u", fkv_host_policy_name(policy),
           mi.device_tokens, mi.host_tokens);
    fkv_seq_free(s);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* Key k of tenant t is in the host tier (matched, not fetched, let go). */
static int in_host(fkv_cache *c, uint32_t k, uint64_t tenant)
{
    int32_t tok[CHUNK];
    fill(tok, CHUNK, (int32_t)(k * 100));
    fkv_seq *s = new_seq(c, ++req_id, tenant);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(s, tok, CHUNK, CHUNK, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    fkv_seq_free(s);
    return mi.host_tokens == CHUNK;
}

/* Tenant shares with the orders: x of tenant 2 goes down first, then y1
 * y2 y3 of tenant 1 (host of 4 chunks, full, all new: the small list).  z
 * of tenant 2 comes down: tenant 1 holds 3 of a fair 2 and gives way, so
 * its oldest small chunk y1 leaves, not x, the oldest of all.  With quotas
 * off the same order takes x. */
static void test_shares(int policy)
{
    for (int tenant_mode = 0; tenant_mode < 2; tenant_mode++) {
        fkv_cache *c = open_cache(policy, 2, 4, tenant_mode ? FKV_QUOTA_TENANT : FKV_QUOTA_OFF);
        CHECK(access_key(c, 10, 2) == 'M'); /* x */
        CHECK(access_key(c, 11, 1) == 'M'); /* y1: x goes down */
        CHECK(access_key(c, 12, 1) == 'M');
        CHECK(access_key(c, 13, 1) == 'M');
        CHECK(access_key(c, 14, 2) == 'M'); /* z: y3 goes down, the host is full */
        CHECK(access_key(c, 15, 2) == 'M'); /* z goes down: someone leaves */
        CHECK(c->stats.fairkv_tier_evictions_total[1] == 1);
        /* which one left (a match that lets go evicts nothing) */
        int x_in = in_host(c, 10, 2), y1_in = in_host(c, 11, 1);
        if (tenant_mode) CHECKF(x_in && !y1_in, "%s, tenant shares: x %d y1 %d", fkv_host_policy_name(policy), x_in, y1_in);
        else CHECKF(!x_in && y1_in, "%s, quotas off: x %d y1 %d", fkv_host_policy_name(policy), x_in, y1_in);
        CHECK(sound(c));
        fkv_cache_destroy(c);
    }
}

/* Chunks of different sizes (dynamic chunking: one page up to position
 * 32, two after): the orders count bytes, so the host of 20 pages stays
 * within its bytes, its lists' byte counts hold (fkv__cache_check), and
 * both sizes are found there, over a mixed trace of prompts of 16 to 56
 * tokens. */
static void test_variable_sizes(int policy)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 2;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 4;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = CHUNK;
    cfg.dynamic_chunking = 1;
    cfg.chunk_min_tokens = PT;
    cfg.chunk_max_tokens = 4 * PT;
    cfg.capacity_pages = 32;
    cfg.storage = FKV_STORAGE_PHANTOM;
    cfg.policy = "lru";
    cfg.quotas = FKV_QUOTA_OFF;
    cfg.host_capacity_bytes = 20 * PAGE_BYTES;
    cfg.host_demote = 1;
    cfg.host_policy = policy;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now_ns;
    cfg.thread_safe = 0;
    fkv_cache *c = NULL;
    char err[256];
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    uint64_t rng = 7;
    uint32_t host_hits = 0, sizes = 0;
    for (int i = 0; i < 400; i++) {
        uint32_t k = (uint32_t)(fkv_rng_splitmix(&rng) % 12), len = 16 + 8 * (k % 6);
        int32_t tok[64];
        fill(tok, len, (int32_t)k * 100);
        fkv_seq *s = new_seq(c, ++req_id, 0);
        fkv_match_info mi;
        REQUIRE(fkv_seq_match_prefix(s, tok, len, len, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
        host_hits += mi.host_tokens > 0;
        if (mi.host_tokens) REQUIRE(fkv_seq_fetch(s, 0, mi.device_tokens + mi.host_tokens, FKV_FETCH_HOST, NULL, NULL) == FKV_OK);
        uint32_t have = mi.device_tokens + mi.host_tokens;
        if (have < len) REQUIRE(fkv_seq_append(s, tok + have, len - have, NULL) == FKV_OK);
        fkv_seq_free(s);
        CHECK(c->host_used <= cfg.host_capacity_bytes);
        for (fkv__chunk *ch = c->host_lru.head; ch; ch = ch->host.lru.next) sizes |= 1u << (ch->host.pages & 31);
        for (fkv__chunk *ch = c->host_small.head; ch; ch = ch->host.lru.next) sizes |= 1u << (ch->host.pages & 31);
        if (i % 50 == 0) CHECK(sound(c));
    }
    CHECKF(__builtin_popcount(sizes) >= 2, "%s: host chunk sizes seen %#x", fkv_host_policy_name(policy), sizes);
    CHECKF(host_hits > 10, "%s: %u host hits", fkv_host_policy_name(policy), host_hits);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* --------------------------------------------------------------- ghost */

static void test_ghost(void)
{
    fkv__ghost *g = fkv__ghost_new();
    REQUIRE(g);
    for (uint64_t k = 1; k <= 5; k++) CHECK(fkv__ghost_add(g, k, 10, 30) == 0); /* keeps the last 3 */
    CHECK(fkv__ghost_count(g) == 3 && fkv__ghost_bytes(g) == 30);
    CHECK(!fkv__ghost_take(g, 1) && !fkv__ghost_take(g, 2));
    CHECK(fkv__ghost_take(g, 4) && !fkv__ghost_take(g, 4));
    CHECK(fkv__ghost_count(g) == 2 && fkv__ghost_bytes(g) == 20);
    CHECK(fkv__ghost_add(g, 3, 10, 30) == 0); /* 3 moves to the newest place */
    /* [5 3] + 6 + 7: over 30 bytes, the oldest, 5, leaves; 3 (moved up) stays */
    CHECK(fkv__ghost_add(g, 6, 10, 30) == 0 && fkv__ghost_add(g, 7, 10, 30) == 0);
    CHECK(!fkv__ghost_take(g, 5));
    CHECK(fkv__ghost_take(g, 3) && fkv__ghost_take(g, 6) && fkv__ghost_take(g, 7));
    CHECK(fkv__ghost_count(g) == 0 && fkv__ghost_bytes(g) == 0);
    /* many keys, most taken out again: the ring and table stay consistent */
    for (uint64_t k = 0; k < 100000; k++) {
        REQUIRE(fkv__ghost_add(g, k * 7919, 1, 1000) == 0);
        if (k % 3) fkv__ghost_take(g, k * 7919);
    }
    CHECK(fkv__ghost_count(g) <= 1000 && fkv__ghost_count(g) == fkv__ghost_bytes(g));
    CHECK(fkv__ghost_take(g, 99999ull * 7919));      /* 99999 % 3 == 0: kept, the newest */
    CHECK(!fkv__ghost_take(g, 99998ull * 7919));     /* taken out */
    fkv__ghost_free(g);
}

/* ------------------------------------------------------- remote store */

/* The remote store with one-chunk requests (8 tokens, chunk 8): the same
 * scan as test_scan, counted in entries (capacity 4, no device in front):
 * puts of 1 2 (reads of each), a scan 3 4 5 6 7, then 1 2 again.
 *   lru:    1 and 2 pushed out by the scan: both missed.
 *   s3fifo: 1 and 2 were read in the small FIFO, so they move on to the
 *           main FIFO when the scan reaches them: both found. */
static void test_remote_store(void)
{
    for (int policy = FKV_HOST_LRU; policy <= FKV_HOST_ARC; policy++) {
        fkv_remote_store *st = fkv_remote_store_create(4, 8, NULL, 1000); /* tokens from each tag */
        REQUIRE(st);
        REQUIRE(fkv_remote_store_policy(st, policy) == 0);
        fkv_req r[8];
        memset(r, 0, sizeof r);
        for (int i = 0; i < 8; i++) r[i].id = (uint64_t)i + 1, r[i].tag = (uint64_t)i + 1, r[i].prompt = 9;
        uint64_t fetched;
        fkv_remote_store_put(st, &r[0], 8);
        fkv_remote_store_put(st, &r[1], 8);
        CHECK(fkv_remote_store_find(st, &r[0], 0, 8, &fetched) == 8);
        CHECK(fkv_remote_store_find(st, &r[1], 0, 8, &fetched) == 8);
        for (int i = 2; i < 7; i++) fkv_remote_store_put(st, &r[i], 8);
        uint32_t f1 = fkv_remote_store_find(st, &r[0], 0, 8, &fetched), f2 = fkv_remote_store_find(st, &r[1], 0, 8, &fetched);
        if (policy == FKV_HOST_LRU) CHECKF(f1 == 0 && f2 == 0, "lru: %u %u", f1, f2);
        else CHECKF(f1 == 8 && f2 == 8, "%s: %u %u", fkv_host_policy_name(policy), f1, f2);
        fkv_remote_store_stats s;
        fkv_remote_store_stats_get(st, &s);
        CHECK(s.entries == 4 && s.evictions == 3);
        CHECK(fkv_remote_store_policy(st, FKV_HOST_LRU) == -1); /* not after the first put */
        fkv_remote_store_free(st);
    }
}

/* -------------------------------------------------------------- config */

static void test_config(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    CHECK(cfg.host_policy == FKV_HOST_LRU);
    fkv_cache *c = NULL;
    char err[256] = "";
    cfg.capacity_pages = 64;
    cfg.host_policy = FKV_HOST_S3FIFO;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "host_policy=s3fifo") &&
          strstr(err, "host_demote"));
    cfg.host_capacity_bytes = 1 << 20;
    cfg.host_demote = 1;
    cfg.host_policy = 9;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "host_policy=9"));
    cfg.host_policy = FKV_HOST_ARC;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    fkv_cache_destroy(c);
    int m = -5;
    CHECK(fkv_host_policy_parse("s3fifo", &m) == 0 && m == FKV_HOST_S3FIFO);
    CHECK(fkv_host_policy_parse("arc", &m) == 0 && m == FKV_HOST_ARC);
    CHECK(fkv_host_policy_parse("lru", &m) == 0 && m == FKV_HOST_LRU);
    CHECK(fkv_host_policy_parse("lfu", &m) == -1 && m == FKV_HOST_LRU);
    CHECK(fkv_host_policy_parse(NULL, &m) == -1);
    CHECK(!strcmp(fkv_host_policy_name(FKV_HOST_S3FIFO), "s3fifo") && !strcmp(fkv_host_policy_name(7), "?"));
    fkv_config_default(&cfg);
    setenv("FAIRKV_HOST_POLICY", "arc", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_OK && cfg.host_policy == FKV_HOST_ARC);
    setenv("FAIRKV_HOST_POLICY", "clock", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) != FKV_OK && strstr(err, "FAIRKV_HOST_POLICY"));
    unsetenv("FAIRKV_HOST_POLICY");
}

/* ------------------------------------------------ simulator and server */

static char *bench_out(const char *args)
{
    char path[] = "/tmp/fkv_hostpol_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    int rc = bench_cli(args, path);
    CHECKF(rc == 0, "bench %s: rc %d", args, rc);
    FILE *f = fopen(path, "rb");
    REQUIRE(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    char *out = strdup(buf);
    REQUIRE(out);
    return out;
}

/* Removes the values of the fields a row reports relative to the lru row
 * (which the host order changes), keeping their names. */
static void drop_relative(char *s)
{
    static const char *keys[] = {"\"fairness_gain\":", "\"throughput_rel_lru\":"};
    for (int k = 0; k < 2; k++)
        for (char *at = strstr(s, keys[k]); at; at = strstr(at, keys[k])) {
            at += strlen(keys[k]);
            char *end = at + strcspn(at, ",}");
            memmove(at, end, strlen(end) + 1);
        }
}

/* `fairkv bench --host-policy`: lru is the run without the option, byte
 * for byte; s3fifo and arc reach the host tier and the remote store (the
 * runs differ from lru's); oracle-memory, which has no tier below the
 * device, runs the same under any; no tier to order, or an unknown name,
 * is refused. */
static void test_bench_option(void)
{
    const char *host = "--workload chat --requests 400 --load 0.9 --schemes lru,oracle-memory --quiet --format json "
                       "--host-x 2 --host-demote";
    const char *remote = "--workload chat --requests 400 --load 0.9 --schemes lru --quiet --format json --remote-gb 5";
    char a[512];
    for (int tier = 0; tier < 2; tier++) {
        const char *base = tier ? remote : host;
        char *plain = bench_out(base), *runs[3];
        for (int p = 0; p < 3; p++) {
            snprintf(a, sizeof a, "%s --host-policy %s", base, fkv_host_policy_name(p));
            runs[p] = bench_out(a);
        }
        CHECK(!strcmp(plain, runs[0]));
        CHECKF(strcmp(runs[0], runs[1]) && strcmp(runs[0], runs[2]), "%s: s3fifo or arc equal to lru",
               tier ? "remote" : "host");
        if (!tier) {
            /* oracle-memory's row, the last scheme, is the same under every order */
            const char *o0 = strstr(runs[0], "\"oracle-memory\""), *o1 = strstr(runs[1], "\"oracle-memory\"");
            REQUIRE(o0 && o1);
            /* its row and all that follows it, but for what is relative to lru's row */
            drop_relative((char *)o0);
            drop_relative((char *)o1);
            CHECK(!strcmp(o0, o1));
        }
        free(plain);
        for (int p = 0; p < 3; p++) free(runs[p]);
    }
    CHECK(bench_cli("--workload chat --requests 50 --quiet --schemes lru --host-policy s3fifo", "/dev/null") != 0);
    CHECK(bench_cli("--workload chat --requests 50 --quiet --schemes lru --host-x 1 --host-demote --host-policy lfu",
                    "/dev/null") != 0);
    /* the recommended fairkv scheme orders its tiers by S3-FIFO: its run
     * without the option is the S3-FIFO run, not lru's; and the scheme
     * needs no tier (no refusal without one).  A device of 0.3 x peak
     * demand: at 0.75 its int4 cold chunks leave the host tier unfilled,
     * so every order gives the same run */
    const char *fk = "--workload chat --requests 400 --load 0.9 --schemes fairkv --quiet --format json --host-x 2 "
                     "--host-demote --capacity-frac 0.3";
    char *dflt = bench_out(fk), *ord[2];
    for (int p = 0; p < 2; p++) {
        snprintf(a, sizeof a, "%s --host-policy %s", fk, p ? "s3fifo" : "lru");
        ord[p] = bench_out(a);
    }
    CHECK(!strcmp(dflt, ord[1]));
    CHECK(strcmp(dflt, ord[0]));
    free(dflt);
    free(ord[0]);
    free(ord[1]);
    CHECK(bench_cli("--workload chat --requests 50 --quiet --schemes fairkv", "/dev/null") == 0);
}

/* `fairkv serve --host-policy` (the engine's host_policy option): parsed,
 * and refused with no host tier (the Redis tier has its own policy). */
static void test_serve_option(void)
{
    fkv_engine_config cfg;
    fkv_engine_backend_opts bo;
    char model[64], err[256] = "";
    const char *host[] = {"model=m.gguf", "host_policy=s3fifo", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(host, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.host_policy == FKV_HOST_S3FIFO && cfg.host_demote);
    const char *arc[] = {"model=m.gguf", "host_policy=arc", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(arc, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.host_policy == FKV_HOST_ARC);
    const char *none[] = {"model=m.gguf", "host_policy=arc", "remote=redis://127.0.0.1:1", NULL};
    CHECK(fkv__engine_opts_parse(none, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "no host tier"));
    const char *bad[] = {"model=m.gguf", "host_policy=mru", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(bad, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "host_policy=mru"));
    /* serve's default with a host tier: the recommended order, S3-FIFO */
    const char *dflt[] = {"model=m.gguf", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(dflt, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.host_policy == FKV_HOST_S3FIFO);
    const char *lru[] = {"model=m.gguf", "host_kv=1MiB", "host_policy=lru", NULL};
    CHECK(fkv__engine_opts_parse(lru, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.host_policy == FKV_HOST_LRU);
}

/* The engine hands the order to its cache's host tier (what `fairkv serve
 * --host-policy` sets), on a tiny generated model. */
static void test_engine_cache(void)
{
    fkv_model_init_cfg mc;
    REQUIRE(!fkv_model_init_preset("tiny", &mc));
    built tiny = build(&mc);
    for (int policy = FKV_HOST_LRU; policy <= FKV_HOST_ARC; policy++) {
        fkv_engine_config ec;
        fkv_engine_config_default(&ec);
        ec.host_bytes = 1 << 20;
        ec.host_demote = 1;
        ec.host_policy = policy;
        fkv_engine *e = NULL;
        char err[300];
        REQUIRE(fkv_engine_create(tiny.m, &ec, &e, err, sizeof err) == FKV_OK);
        const fkv_cache *c = fkv_engine_cache(e);
        CHECKF(c->cfg.host_policy == (fkv_host_policy)policy && (policy == FKV_HOST_LRU) == !c->host_ghost,
               "engine cache: host_policy %d for %d", (int)c->cfg.host_policy, policy);
        fkv_engine_destroy(e);
    }
    unbuild(&tiny);
}

int main(void)
{
    test_config();
    test_ghost();
    test_scan();
    test_arc_adapts();
    for (int policy = FKV_HOST_LRU; policy <= FKV_HOST_ARC; policy++) {
        test_against_reference(policy, 4, 1);
        test_against_reference(policy, 8, 2);
        test_against_reference(policy, 20, 3);
        test_closure(policy);
        test_shares(policy);
        test_variable_sizes(policy);
    }
    test_remote_store();
    test_bench_option();
    test_serve_option();
    test_engine_cache();
    return check_done();
}
