/* The host tier below the device (host_demote): an idle chunk the device
 * evicts is demoted, a tiered match finds it as host-resident and promotion
 * copies its exact bytes back; eviction is prefix-closed at both tiers and
 * the host gives way by tenant shares; bytes are accounted per tier and per
 * tenant, in cpu and phantom storage; the metrics say so; and with
 * host_demote off nothing of this happens. */
#include <string.h>

#include "check.h"
#include "core/internal.h"
#include "fairkv.h"
#include "sched/sched.h"
#include "sim/req_tokens.h"

#define LAYERS 2
#define DIM 4
#define PT 4                                             /* tokens a page */
#define CHUNK 8                                          /* tokens a chunk: 2 pages */
#define PAGE_BYTES (PT * LAYERS * DIM * sizeof(float) * 2) /* K and V: 256 */
#define CHUNK_BYTES (2 * PAGE_BYTES)

static int64_t now_ns;

static fkv_cache *open_cache(fkv_storage_kind storage, int demote, uint32_t host_chunks, int quotas)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = LAYERS;
    cfg.n_kv_heads = 1;
    cfg.head_dim = DIM;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = CHUNK;
    cfg.capacity_pages = 8;
    cfg.storage = storage;
    cfg.policy = "lru";
    cfg.quotas = quotas;
    cfg.host_capacity_bytes = (uint64_t)host_chunks * CHUNK_BYTES;
    cfg.host_demote = demote;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now_ns;
    cfg.thread_safe = 0;
    fkv_cache *c = NULL;
    char err[256];
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    return c;
}

static float kv_value(int32_t tok, uint32_t pos, uint32_t layer, uint32_t d)
{
    return (float)((uint32_t)tok * 131u + pos * 7u + layer * 3u + d);
}

/* Writes every layer's K (and V = -K) of n tokens at positions from.. */
static void write_kv(fkv_cache *c, const fkv_slot *slots, const int32_t *tok, uint32_t from, uint32_t n)
{
    for (uint32_t l = 0; l < LAYERS; l++) {
        void *k, *v;
        uint64_t stride;
        if (fkv_cache_layer_storage(c, l, &k, &v, &stride)) return;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t d = 0; d < DIM; d++) {
                float *kp = (float *)((char *)k + slots[i].page * stride) + slots[i].slot * DIM + d;
                float *vp = (float *)((char *)v + slots[i].page * stride) + slots[i].slot * DIM + d;
                *kp = kv_value(tok[from + i], from + i, l, d);
                *vp = -*kp;
            }
    }
}

/* Every resident token of s reads back what write_kv wrote for it; the
 * number of resident tokens compared, or -1 on a mismatch. */
static int verify_kv(fkv_cache *c, fkv_seq *s, const int32_t *tok)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    if (fkv_seq_chunks(s, &ch, &n)) return -1;
    int seen = 0;
    for (uint32_t l = 0; l < LAYERS; l++) {
        void *k, *v;
        uint64_t stride;
        if (fkv_cache_layer_storage(c, l, &k, &v, &stride)) return -1;
        for (size_t i = 0; i < n; i++) {
            if (!ch[i]->resident) continue;
            for (uint32_t t = 0; t < ch[i]->n_tokens; t++) {
                uint32_t pos = ch[i]->start + t, page = ch[i]->pages[t / PT], slot = t % PT;
                for (uint32_t d = 0; d < DIM; d++) {
                    float kk = *((const float *)((const char *)k + page * stride) + slot * DIM + d);
                    float vv = *((const float *)((const char *)v + page * stride) + slot * DIM + d);
                    if (kk != kv_value(tok[pos], pos, l, d) || vv != -kk) return -1;
                }
                if (l == 0) seen++;
            }
        }
    }
    return seen;
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

/* A finished request: its prompt's chunks stay cached. */
static void cached_prompt(fkv_cache *c, uint64_t id, uint64_t tenant, const int32_t *tok, uint32_t n)
{
    fkv_seq *s = new_seq(c, id, tenant);
    fkv_slot slots[64];
    REQUIRE(fkv_seq_append(s, tok, n, slots) == FKV_OK);
    write_kv(c, slots, tok, 0, n);
    fkv_seq_free(s);
}

static fkv_match_info match_tiers(fkv_cache *c, uint64_t id, uint64_t tenant, const int32_t *tok, uint32_t n,
                                  fkv_seq **out)
{
    fkv_seq *s = new_seq(c, id, tenant);
    fkv_match_info mi;
    memset(&mi, 0xff, sizeof mi);
    REQUIRE(fkv_seq_match_prefix(s, tok, n, n, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    if (out) *out = s;
    else fkv_seq_free(s);
    return mi;
}

static int sound(fkv_cache *c)
{
    char msg[256];
    int bad = fkv__cache_check(c, msg, sizeof msg);
    if (bad) fprintf(stderr, "invariant: %s\n", msg);
    return !bad;
}

static double metric(fkv_cache *c, const char *line_start)
{
    static char buf[1 << 16];
    size_t len = 0;
    if (fkv_cache_metrics_prometheus(c, buf, sizeof buf, &len) || len >= sizeof buf) return -1;
    const char *p = strstr(buf, line_start);
    return p ? atof(p + strlen(line_start)) : -1;
}

static void fill(int32_t *tok, uint32_t n, int32_t base)
{
    for (uint32_t i = 0; i < n; i++) tok[i] = base + (int32_t)i;
}

/* Demote on eviction, match as host-resident, promote the exact bytes. */
static void test_demote_match_promote(fkv_storage_kind storage)
{
    fkv_cache *c = open_cache(storage, 1, 4, FKV_QUOTA_OFF);
    int32_t a[24], b[16];
    fill(a, 24, 0);
    fill(b, 16, 500);
    cached_prompt(c, 1, 0, a, 24); /* three chunks, 6 of the 8 pages */
    /* another request needs 4 pages: one of a's chunks leaves the device.
     * LRU alone would take a's first chunk (same access time, lowest id);
     * the closure takes its leaf, the last one, and demotes it */
    fkv_seq *sb = new_seq(c, 2, 0);
    fkv_slot slots[64];
    REQUIRE(fkv_seq_append(sb, b, 16, slots) == FKV_OK);
    write_kv(c, slots, b, 0, 16);
    CHECK(sound(c));
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 1);
    CHECK(c->host_used == CHUNK_BYTES);
    CHECK((storage == FKV_STORAGE_CPU) == (c->host_lru.head && c->host_lru.head->host.kv != NULL));
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    CHECK(ti.host_bytes == CHUNK_BYTES);

    fkv_seq *s = NULL;
    fkv_match_info mi = match_tiers(c, 3, 0, a, 24, &s);
    CHECKF(mi.device_tokens == 16 && mi.host_tokens == 8 && mi.host_bytes == CHUNK_BYTES,
           "device %u host %u bytes %llu", mi.device_tokens, mi.host_tokens, (unsigned long long)mi.host_bytes);
    CHECK(fkv_seq_len(s) == 24);
    const fkv_chunk_view *const *ch;
    size_t n;
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK && n == 3);
    CHECK(!ch[2]->resident && ch[2]->offloaded && ch[0]->resident && ch[1]->resident);
    CHECK(c->host_n == 0); /* held: out of the host's eviction order */
    CHECK(sound(c));
    /* a device-only match sees the device only */
    fkv_seq *plain = new_seq(c, 4, 0);
    fkv_match_info pm;
    REQUIRE(fkv_seq_match_prefix(plain, a, 24, 24, FKV_MATCH_DEVICE_ONLY, &pm) == FKV_OK);
    CHECK(pm.device_tokens == 16 && pm.host_tokens == 0 && fkv_seq_len(plain) == 16);
    fkv_seq_free(plain);

    /* pinned, as a batch about to run: the room comes from sb (held, so
     * dropped as a hole, not demoted) */
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    fkv_fetch_info fi;
    REQUIRE(fkv_seq_fetch(s, 0, 24, FKV_FETCH_ALL, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == 8 && fi.host_bytes == CHUNK_BYTES && fi.recompute_tokens == 0);
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK);
    CHECK(ch[2]->resident && !ch[2]->offloaded);
    if (storage == FKV_STORAGE_CPU) CHECKF(verify_kv(c, s, a) == 24, "promoted K/V differ");
    CHECK(c->host_used == 0);
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    CHECK(ti.host_bytes == 0);
    CHECK(sound(c));

    /* metrics of both tiers */
    CHECK(metric(c, "fairkv_tier_demotions_total{tier=\"device\"} ") == 1);
    CHECK(metric(c, "fairkv_tier_demotions_total{tier=\"host\"} ") == 0);
    CHECK(metric(c, "fairkv_tier_hit_tokens_total{tier=\"device\"} ") == 32); /* 16 tiered + 16 plain */
    CHECK(metric(c, "fairkv_tier_hit_tokens_total{tier=\"host\"} ") == 8);
    CHECK(metric(c, "fairkv_tier_promotions_total{tier=\"host\"} ") == 1);
    CHECK(metric(c, "fairkv_tier_promoted_bytes_total{tier=\"host\"} ") == CHUNK_BYTES);
    CHECK(metric(c, "fairkv_tier_bytes{tier=\"host\"} ") == 0);
    CHECK(metric(c, "fairkv_tier_bytes{tier=\"device\"} ") == 8.0 * PAGE_BYTES);
    CHECK(metric(c, "fairkv_tier_evictions_total{tier=\"device\"} ") == 1);
    CHECK(metric(c, "fairkv_tier_evictions_total{tier=\"host\"} ") == 0);
    CHECK(metric(c, "kv_cache_chunk_size{device=\"cpu0\"} ") > 0); /* the seed's names stay */
    CHECK(metric(c, "kv_cache_miss_rate{request_type=\"short\"} ") == 0);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_seq_free(sb);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* The host list's oldest chunk is a prefix of another host chunk: the
 * extension goes first. */
static void test_host_closure(void)
{
    fkv_cache *c = open_cache(FKV_STORAGE_CPU, 1, 2, FKV_QUOTA_OFF);
    int32_t p[24];
    fill(p, 24, 0);
    cached_prompt(c, 1, 0, p, 24);            /* chunks A B C */
    uint32_t freed = 0;
    REQUIRE(fkv_cache_evict(c, 6, &freed) == FKV_OK); /* C, then B, go down: the host is full */
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 2);
    fkv_match_info mi = match_tiers(c, 2, 0, p, 24, NULL); /* matched, then let go: B then C */
    CHECK(mi.device_tokens == 8 && mi.host_tokens == 16);
    REQUIRE(c->host_lru.head && c->host_lru.head->v.start == 8 && c->host_n == 2); /* B is the oldest */
    CHECK(sound(c));
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK); /* A goes down; room: C, not B */
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 3);
    CHECK(c->stats.fairkv_tier_evictions_total[1] == 1);
    mi = match_tiers(c, 3, 0, p, 24, NULL);
    CHECKF(mi.device_tokens == 0 && mi.host_tokens == 16, "device %u host %u", mi.device_tokens, mi.host_tokens);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* A request's tail chunk, which it ended inside (8 + 8 + 6 tokens: the
 * last chunk holds one full page and 2 tokens of the next), goes down
 * trimmed to its full page: the partial page is released, the chunk
 * becomes a whole 4-token chunk, and a tiered match takes all 20 matchable
 * tokens from the host, with their exact bytes once promoted.  A tail of
 * less than a page has nothing to keep and is released. */
static void test_partial_tail_trimmed(fkv_storage_kind storage)
{
    fkv_cache *c = open_cache(storage, 1, 4, FKV_QUOTA_OFF);
    int32_t p[22];
    fill(p, 22, 0);
    cached_prompt(c, 1, 0, p, 22); /* 6 pages */
    uint32_t freed = 0;
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK);
    CHECKF(c->stats.fairkv_tier_demotions_total[0] == 3 && c->stats.fairkv_tier_evictions_total[0] == 0,
           "demoted %g released %g", (double)c->stats.fairkv_tier_demotions_total[0],
           (double)c->stats.fairkv_tier_evictions_total[0]);
    CHECK(c->host_used == 2 * CHUNK_BYTES + PAGE_BYTES);
    CHECK(c->n_free == 8);
    CHECK(sound(c));
    fkv_seq *s = NULL;
    fkv_match_info mi = match_tiers(c, 2, 0, p, 22, &s);
    CHECKF(mi.device_tokens == 0 && mi.host_tokens == 20 && mi.host_bytes == 2 * CHUNK_BYTES + PAGE_BYTES,
           "device %u host %u", mi.device_tokens, mi.host_tokens);
    CHECK(fkv_seq_len(s) == 20);
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    fkv_fetch_info fi;
    REQUIRE(fkv_seq_fetch(s, 0, 20, FKV_FETCH_ALL, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == 20 && fi.recompute_tokens == 0);
    if (storage == FKV_STORAGE_CPU) CHECKF(verify_kv(c, s, p) == 20, "promoted K/V differ");
    /* the sequence goes on from its 20 tokens: a new chunk, not the trimmed one */
    fkv_slot slots[8];
    REQUIRE(fkv_seq_append(s, p + 20, 2, slots) == FKV_OK);
    CHECK(fkv_seq_len(s) == 22);
    CHECK(sound(c));
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    CHECK(sound(c));
    fkv_cache_destroy(c);

    /* 8 + 2 tokens: the tail has no full page and is not demoted */
    c = open_cache(storage, 1, 4, FKV_QUOTA_OFF);
    cached_prompt(c, 1, 0, p, 10);
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK);
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 1 && c->stats.fairkv_tier_evictions_total[0] == 1);
    CHECK(c->host_used == CHUNK_BYTES);
    mi = match_tiers(c, 2, 0, p, 10, NULL);
    CHECK(mi.device_tokens == 0 && mi.host_tokens == 8);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* A full host in tenant mode: the tenant over its share gives way, even
 * when the oldest chunk is another's. */
static void test_host_tenant_share(void)
{
    fkv_cache *c = open_cache(FKV_STORAGE_PHANTOM, 1, 4, FKV_QUOTA_TENANT);
    int32_t x[8], y1[8], y2[8], y3[8], z[8];
    fill(x, 8, 100);
    fill(y1, 8, 200);
    fill(y2, 8, 300);
    fill(y3, 8, 400);
    fill(z, 8, 500);
    uint32_t freed = 0;
    cached_prompt(c, 1, 2, x, 8);
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK); /* x: the oldest in the host */
    /* the host a quarter full: a share is what its holder keeps, the spare
     * bytes go to nobody (shares.h, FKV__SPARE_KEEP) */
    fkv_tenant_info t0;
    REQUIRE(fkv_cache_tenant_info(c, 2, &t0) == FKV_OK);
    CHECK(t0.host_bytes == CHUNK_BYTES && t0.host_share_bytes == (double)CHUNK_BYTES);
    cached_prompt(c, 2, 1, y1, 8);
    cached_prompt(c, 3, 1, y2, 8);
    cached_prompt(c, 4, 1, y3, 8);
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK); /* the host is full: 1 of tenant 2, 3 of tenant 1 */
    CHECK(c->host_used == 4 * CHUNK_BYTES && c->host_lru.head && c->host_lru.head->tenant->id == 2);
    cached_prompt(c, 5, 2, z, 8);
    REQUIRE(fkv_cache_evict(c, 8, &freed) == FKV_OK); /* z comes in: tenant 1, 3 of a fair 2, gives way */
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 5 && c->stats.fairkv_tier_evictions_total[1] == 1);
    CHECK(match_tiers(c, 6, 2, x, 8, NULL).host_tokens == 8);
    CHECK(match_tiers(c, 7, 2, z, 8, NULL).host_tokens == 8);
    uint32_t y_left = match_tiers(c, 8, 1, y1, 8, NULL).host_tokens + match_tiers(c, 9, 1, y2, 8, NULL).host_tokens +
                      match_tiers(c, 10, 1, y3, 8, NULL).host_tokens;
    CHECK(y_left == 16);
    CHECK(match_tiers(c, 11, 1, y1, 8, NULL).host_tokens == 0); /* its least recent went */
    fkv_tenant_info t1, t2;
    REQUIRE(fkv_cache_tenant_info(c, 1, &t1) == FKV_OK && fkv_cache_tenant_info(c, 2, &t2) == FKV_OK);
    CHECK(t1.host_bytes == 2 * CHUNK_BYTES && t2.host_bytes == 2 * CHUNK_BYTES);
    CHECK(t1.host_share_bytes == 2.0 * CHUNK_BYTES && t2.host_share_bytes == 2.0 * CHUNK_BYTES);
    CHECK(sound(c));
    fkv_cache_destroy(c);
}

/* host_demote off: the same eviction drops the chunk, the policy's own
 * victim (no closure), and nothing reaches the host. */
static void test_off(void)
{
    fkv_cache *c = open_cache(FKV_STORAGE_CPU, 0, 4, FKV_QUOTA_OFF);
    int32_t a[24], b[16];
    fill(a, 24, 0);
    fill(b, 16, 500);
    cached_prompt(c, 1, 0, a, 24);
    fkv_seq *sb = new_seq(c, 2, 0);
    REQUIRE(fkv_seq_append(sb, b, 16, NULL) == FKV_OK);
    fkv_match_info mi = match_tiers(c, 3, 0, a, 24, NULL);
    CHECK(mi.device_tokens == 0 && mi.host_tokens == 0 && mi.host_bytes == 0); /* LRU took a's head */
    CHECK(c->host_used == 0 && c->stats.fairkv_tier_demotions_total[0] == 0);
    CHECK(metric(c, "fairkv_tier_bytes{tier=\"host\"} ") == 0);
    CHECK(metric(c, "fairkv_tier_evictions_total{tier=\"device\"} ") == 1);
    CHECK(sound(c));
    fkv_seq_free(sb);
    fkv_cache_destroy(c);

    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.host_demote = 1; /* without a host */
    fkv_cache *bad = NULL;
    char err[256] = "";
    CHECK(fkv_cache_create(&cfg, &bad, err, sizeof err) == FKV_EINVAL && strstr(err, "host_demote"));
}

/* The scheduler: a request repeating a finished one's 64-token system
 * prompt after a large request pushed it off the device finds it in the
 * host tier, and the step that serves it copies it back, priced as the
 * batch's host_tokens (recomputed by nothing); without host_demote it
 * finds nothing and recomputes the prompt. */
static void sched_promotes(int demote)
{
    int64_t now = 0;
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 16; /* 256 tokens of 16 a page */
    cc.policy = "lru";
    cc.host_capacity_bytes = 1 << 30;
    cc.host_demote = demote;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    cc.thread_safe = 0;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create(&cc, &cache, NULL, 0) == FKV_OK);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    /* the requests' token sources: one shared seed, their own seeds */
    fkv_req_src src[3];
    memset(src, 0, sizeof src);
    fkv_sim_tokens ts = {src, 3, 512, 0};
    sc.token_ids = fkv_sim_token_ids;
    sc.token_ctx = &ts;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req r[3];
    memset(r, 0, sizeof r);
    uint32_t prompt[3] = {100, 238, 100};
    for (int i = 0; i < 3; i++) {
        r[i].id = (uint64_t)i + 1;
        r[i].prompt = prompt[i];
        r[i].output = 2;
        r[i].tag = (uint64_t)i;
        src[i].token_seed = 1000 + (uint64_t)i;
        r[i].shared_tokens = i == 1 ? 0 : 64;
        src[i].shared_seed = 77;
    }
    fkv_batch b = {0};
    uint64_t host[3] = {0};
    for (int i = 0; i < 3; i++) {
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
        for (int k = 0; k < 100 && r[i].state != FKV_REQ_DONE; k++) {
            fkv_status st = fkv_sched_step(s, now, &b);
            CHECKF(st == FKV_OK, "step: %s", fkv_sched_last_error(s));
            REQUIRE(st == FKV_OK);
            host[i] += b.host_tokens;
            now += 1000000;
            REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        }
        CHECK(r[i].state == FKV_REQ_DONE);
        CHECK(sound(cache));
    }
    CHECKF(r[2].matched == (demote ? 64u : 0u), "demote %d: matched %u", demote, (unsigned)r[2].matched);
    CHECKF(host[2] == (demote ? 64u : 0u) && host[0] == 0 && host[1] == 0, "demote %d: host tokens %llu",
           demote, (unsigned long long)host[2]);
    CHECK(r[2].reloaded == (demote ? 64u : 0u));
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

int main(void)
{
    test_demote_match_promote(FKV_STORAGE_CPU);
    test_demote_match_promote(FKV_STORAGE_PHANTOM);
    test_host_closure();
    test_partial_tail_trimmed(FKV_STORAGE_CPU);
    test_partial_tail_trimmed(FKV_STORAGE_PHANTOM);
    test_host_tenant_share();
    test_off();
    sched_promotes(1);
    sched_promotes(0);
    return check_done();
}
