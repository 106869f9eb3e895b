/* Quotas, temperature, eviction tiers, min_chunk_retention and TTL. */
#include <math.h>
#include <string.h>

#include "cache_fixture.h"

static int64_t now;

static fkv_cache *open_cache(uint32_t pages, int quotas, double temperature, int64_t retention)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 4; /* one page per chunk: victims are easy to name */
    cfg.capacity_pages = pages;
    cfg.policy = "lru";
    cfg.quotas = quotas;
    cfg.temperature = temperature;
    cfg.min_chunk_retention_ns = retention;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    return c;
}

static uint32_t resident_tokens(fkv_seq *s)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    uint32_t t = 0;
    for (size_t i = 0; i < n; i++) t += ch[i]->resident ? ch[i]->n_tokens : 0;
    return t;
}

static void formula(void)
{
    /* demands 4, 16, 64 pages; weights 1, 1, 2 */
    double d[3] = {4, 16, 64}, w[3] = {1, 1, 2};
    double temps[3] = {1.0, 2.0, INFINITY};
    for (int k = 0; k < 3; k++) {
        fkv_cache *c = open_cache(120, 1, temps[k], 0);
        fkv_seq *s[3];
        for (int i = 0; i < 3; i++) s[i] = fx_seq_full(c, (uint64_t)i + 1, (uint32_t)d[i] * 4, w[i], NULL, 0);
        fkv__request_quotas(c, 0);
        double sum = 0, share[3];
        for (int i = 0; i < 3; i++) sum += share[i] = w[i] * (isinf(temps[k]) ? 1.0 : pow(d[i], 1.0 / temps[k]));
        for (int i = 0; i < 3; i++)
            CHECKF(fabs(s[i]->quota_pages - 120 * share[i] / sum) < 1e-9, "T=%g i=%d quota %g", temps[k], i,
                   s[i]->quota_pages);
        fkv_cache_destroy(c);
    }
    /* T = inf, equal weights: equal shares */
    fkv_cache *c = open_cache(90, 1, INFINITY, 0);
    fkv_seq *a = fx_seq_full(c, 1, 8, 1, NULL, 0), *b = fx_seq_full(c, 2, 4000, 1, NULL, 0), *e = fx_seq_full(c, 3, 40, 1, NULL, 0);
    fkv__request_quotas(c, 0);
    CHECK(fabs(a->quota_pages - 30) < 1e-9 && fabs(b->quota_pages - 30) < 1e-9 && fabs(e->quota_pages - 30) < 1e-9);
    fkv_cache_destroy(c);
}

/* A long request over its quota loses its chunks before a short one, even
 * when LRU alone would pick the short one's older chunk. */
static void over_quota_first(void)
{
    for (int quotas = 0; quotas <= 1; quotas++) {
        fkv_cache *c = open_cache(40, quotas, INFINITY, 0);
        now = 10;
        fkv_seq *sh = fx_seq_full(c, 1, 16, 1, NULL, 0); /* short: 4 pages */
        REQUIRE(fkv_seq_append(sh, NULL, 16, NULL) == FKV_OK);
        now = 20;
        fkv_seq *lo = fx_seq_full(c, 2, 96, 1, NULL, 0); /* long: 24 pages, over an equal share */
        REQUIRE(fkv_seq_append(lo, NULL, 96, NULL) == FKV_OK);
        now = 30;
        fkv_seq *nw = fx_seq_full(c, 3, 64, 1, NULL, 0); /* a running request needing 16 pages: evicts 4 */
        fkv_seq_pin(nw);
        REQUIRE(fkv_seq_append(nw, NULL, 64, NULL) == FKV_OK);
        if (quotas) {
            CHECK(resident_tokens(sh) == 16); /* untouched */
            CHECK(resident_tokens(lo) == 96 - 16);
            CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_OVER_QUOTA] == 4);
        } else {
            CHECK(resident_tokens(sh) == 0); /* plain LRU takes the oldest: the short request */
            CHECK(resident_tokens(lo) == 96);
        }
        fkv_cache_destroy(c);
    }
}

/* Chunks of finished requests (quota zero) go before any open request's. */
static void cached_first(void)
{
    fkv_cache *c = open_cache(12, 1, 2.0, 0);
    now = 100;
    fkv_seq *open_ = fx_seq_full(c, 1, 0, 1, NULL, 0);
    REQUIRE(fkv_seq_append(open_, NULL, 16, NULL) == FKV_OK); /* t=100 */
    now = 200;
    int32_t t[16] = {0};
    fkv_seq *done = fx_seq_full(c, 2, 0, 1, NULL, 0);
    REQUIRE(fkv_seq_append(done, t, 16, NULL) == FKV_OK);
    fkv_seq_free(done); /* cached, newer than open_'s chunks */
    now = 300;
    fkv_seq *nw = fx_seq_full(c, 3, 0, 1, NULL, 0);
    fkv_seq_pin(nw);
    REQUIRE(fkv_seq_append(nw, NULL, 16, NULL) == FKV_OK); /* needs 4 of the 8 used: 4 free */
    REQUIRE(fkv_seq_append(nw, NULL, 8, NULL) == FKV_OK);  /* 2 more: from the cached ones */
    CHECK(resident_tokens(open_) == 16);
    CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_CACHED] == 2);
    fkv_cache_destroy(c);
}

/* min_chunk_retention: a young chunk goes only when nothing else can. */
static void retention(void)
{
    fkv_cache *c = open_cache(8, 0, 2.0, 1000);
    now = 0;
    fkv_seq *old = fx_seq_full(c, 1, 0, 1, NULL, 0);
    REQUIRE(fkv_seq_append(old, NULL, 16, NULL) == FKV_OK);
    now = 950;
    fkv_seq *young = fx_seq_full(c, 2, 0, 1, NULL, 0);
    REQUIRE(fkv_seq_append(young, NULL, 16, NULL) == FKV_OK);
    now = 990;
    fkv_seq_touch(old, NULL); /* LRU alone would now evict the young chunks first */
    now = 1000;
    fkv_seq *nw = fx_seq_full(c, 3, 0, 1, NULL, 0);
    fkv_seq_pin(nw);
    REQUIRE(fkv_seq_append(nw, NULL, 16, NULL) == FKV_OK);
    CHECK(resident_tokens(young) == 16 && resident_tokens(old) == 0);
    CHECK(fkv_seq_append(nw, NULL, 4, NULL) == FKV_OK); /* only young ones left: last resort */
    CHECK(resident_tokens(young) == 12);
    CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_YOUNG] == 1);
    /* once old enough, they are ordinary chunks again */
    now = 5000;
    CHECK(fkv_seq_append(nw, NULL, 4, NULL) == FKV_OK);
    CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_YOUNG] == 1);
    fkv_cache_destroy(c);
}

/* A cached chunk's predicted TTL: four times its observed reuse gap,
 * counted in requests; once past it, it goes before other cached chunks
 * that the policy would pick first.  Idle time does not age it. */
static void ttl_tier(void)
{
    fkv_cache *c = open_cache(6, 1, 2.0, 0);
    int32_t p[4] = {1, 2, 3, 4}, q[4] = {5, 6, 7, 8};
    now = 0;
    fkv_seq *a = fx_seq_full(c, 1, 0, 1, NULL, 0); /* request clock 1 */
    REQUIRE(fkv_seq_append(a, p, 4, NULL) == FKV_OK);
    fkv_seq_free(a);
    now = 50;
    fkv_seq *b = fx_seq_full(c, 2, 0, 1, NULL, 0); /* 2 */
    REQUIRE(fkv_seq_append(b, q, 4, NULL) == FKV_OK);
    fkv_seq_free(b);
    now = 100;
    fkv_seq *r = fx_seq_full(c, 3, 0, 1, NULL, 0); /* 3: p reused after a gap of 2 requests */
    uint32_t m;
    REQUIRE(fx_match(r, p, 4, 4, &m) == FKV_OK && m == 4);
    fkv_seq_free(r);
    fkv__chunk *pc = NULL;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
        if (ch->ttl.prefix_hits) pc = ch;
    REQUIRE(pc);
    CHECK(pc->ttl.req == 8 && pc->m.owner == 0); /* 4 x 2 requests */
    CHECK(pc->m.expected_ttl_ns == 8 * 50); /* at the mean arrival gap, 50 ns */
    /* a long idle period changes nothing: still within 8 requests */
    now = 1000000;
    fkv_seq *w = fx_seq_full(c, 4, 0, 1, NULL, 0);
    fkv_seq_pin(w);
    REQUIRE(fkv_seq_append(w, NULL, 20, NULL) == FKV_OK); /* 5 pages: 4 free + 1 evicted */
    CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_EXPIRED] == 0);
    fkv_seq *probe = fx_seq_full(c, 5, 0, 1, NULL, 0);
    CHECK(fx_match(probe, p, 4, 4, &m) == FKV_OK && m == 4); /* LRU took q */
    fkv_seq_free(probe);
    fkv_seq_unpin(w);
    fkv_seq_free(w);
    /* p was matched again at request 5: gap (5-1)/2 = 2, TTL 8, expiry 13;
     * eight requests later, p (expired) goes before the younger w chunks */
    for (uint64_t id = 6; id <= 14; id++) fkv_seq_free(fx_seq_full(c, id, 0, 1, NULL, 0));
    fkv_seq *x = fx_seq_full(c, 15, 0, 1, NULL, 0);
    fkv_seq_pin(x);
    REQUIRE(fkv_seq_append(x, NULL, 8, NULL) == FKV_OK);
    CHECK(c->stats.fairkv_evictions_by_tier_total[FKV__TIER_EXPIRED] == 1);
    fkv_seq *probe2 = fx_seq_full(c, 16, 0, 1, NULL, 0);
    CHECK(fx_match(probe2, p, 4, 4, &m) == FKV_OK && m == 0);
    fkv_cache_destroy(c);
}

static void overruns(void)
{
    fkv_cache *c = open_cache(16, 1, INFINITY, 0);
    fkv_seq *a = fx_seq_full(c, 1, 0, 1, NULL, 0), *b = fx_seq_full(c, 2, 0, 1, NULL, 0);
    (void)b;
    fkv__request_quotas(c, 0); /* 8 pages each */
    REQUIRE(fkv_seq_append(a, NULL, 32, NULL) == FKV_OK);
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(cn.quota_overruns == 0);
    REQUIRE(fkv_seq_append(a, NULL, 4, NULL) == FKV_OK); /* 9th page */
    fkv_cache_counters(c, &cn);
    CHECK(cn.quota_overruns == 1);
    REQUIRE(fkv_seq_append(a, NULL, 4, NULL) == FKV_OK); /* still over: not a new overrun */
    fkv_cache_counters(c, &cn);
    CHECK(cn.quota_overruns == 1);
    fkv_cache_destroy(c);
}

/* The periodic refresh (evict.c: quotas are refreshed when a request
 * arrives or leaves, and otherwise every capacity/64 allocated pages): no
 * expected_tokens, so a request's demand is its length, and no request
 * arrives or leaves while B grows, so only the periodic refresh sees it.
 * 64 pages of 4 tokens, T = 1 (quota proportional to demand): the period is
 * one page, so every eviction sees fresh quotas.
 *   A and B append 32 pages each: the pool is full, nothing evicted yet.
 *   B then appends one page 64 times; each append evicts one chunk (one
 *   page).  Before append k, A's demand is 32 pages and B's 31 + k, so
 *   qA(k) = 64 x 32 / (63 + k).  usage A + usage B = 64 = qA + qB, so A's
 *   excess is minus B's and the victim is A's iff usage A >= qA (a tie at
 *   k = 1, qA = 32, goes to A, the first owner).  qA falls by less than a
 *   page per append (2048 / (63 x 64) = 0.51 at most), so after each
 *   append A holds the largest whole number of pages below qA(k): after the
 *   last, qA(64) = 2048 / 127 = 16.13, A keeps 16 pages (64 tokens) and B
 *   48 (192 tokens).
 * With only the refresh at the first eviction (the arrivals made the
 * quotas dirty), the quotas stay 32 and 32: A loses one page then and B
 * every later one, and A would keep 31 pages. */
static void periodic_refresh(void)
{
    fkv_cache *c = open_cache(64, 1, 1.0, 0);
    now = 0;
    fkv_seq *a = fx_seq(c, 1), *b = fx_seq(c, 2);
    REQUIRE(fkv_seq_append(a, NULL, 128, NULL) == FKV_OK);
    REQUIRE(fkv_seq_append(b, NULL, 128, NULL) == FKV_OK);
    CHECK(c->n_free == 0 && c->stats.fairkv_evicted_pages_total[0] == 0);
    for (int k = 1; k <= 64; k++) {
        now = k;
        REQUIRE(fkv_seq_append(b, NULL, 4, NULL) == FKV_OK);
    }
    CHECK(c->stats.fairkv_evicted_pages_total[0] == 64);
    CHECKF(resident_tokens(a) == 64 && resident_tokens(b) == 192, "resident A %u B %u tokens, want 64 and 192",
           resident_tokens(a), resident_tokens(b));
    /* the quotas of the last refresh, before the 64th append */
    CHECKF(fabs(a->quota_pages - 2048.0 / 127) < 1e-9 && fabs(b->quota_pages - 64.0 * 95 / 127) < 1e-9,
           "quotas %g %g", a->quota_pages, b->quota_pages);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

int main(void)
{
    formula();
    periodic_refresh();
    over_quota_first();
    cached_first();
    retention();
    ttl_tier();
    overruns();
    return check_done();
}
