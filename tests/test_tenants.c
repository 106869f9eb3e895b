/* Tenants in the cache: weighted max-min shares, eviction across tenants
 * with weights, prefix namespaces (private, published, salted, anonymous),
 * per-tenant metrics with a bounded label set, and argument errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache_fixture.h"

static int64_t now;

static fkv_cache *open_cache(uint32_t pages, int quotas, uint32_t labels)
{
    fkv_config cfg;
    fx_small_config(&cfg, pages);
    cfg.chunk_tokens = 4; /* one page per chunk: victims are easy to name */
    cfg.policy = "lru";
    cfg.quotas = quotas;
    cfg.tenant_labels = labels;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    return c;
}

static fkv_seq *tseq(fkv_cache *c, uint64_t id, uint64_t tenant, uint32_t expected, uint32_t shared, uint64_t salt)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    p.tenant = tenant;
    p.expected_tokens = expected;
    p.shared_prefix_tokens = shared;
    p.cache_salt = salt;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    return s;
}

static void fill(fkv_seq *s, int32_t base, uint32_t n)
{
    int32_t tok[512];
    REQUIRE(n <= 512);
    for (uint32_t i = 0; i < n; i++) tok[i] = base + (int32_t)i;
    now += 10;
    REQUIRE(fkv_seq_append(s, tok, n, NULL) == FKV_OK);
}

static double share_of(fkv_cache *c, uint64_t t)
{
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, t, &ti) == FKV_OK);
    return ti.share_pages;
}

static uint64_t pages_of(fkv_cache *c, uint64_t t)
{
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, t, &ti) == FKV_OK);
    return ti.pages;
}

/* Water-filling by hand: 100 pages; demands 10 (w 1), 80 (w 1), 80 (w 2).
 * The small demand is met, the rest is split 1:2: 30 and 60.  When all
 * demands fit, the spare pages go by weight. */
static void shares(void)
{
    fkv_cache *c = open_cache(100, FKV_QUOTA_TENANT, 16);
    REQUIRE(fkv_cache_set_tenant_weight(c, 3, 2.0) == FKV_OK);
    fkv_seq *a = tseq(c, 1, 1, 40, 0, 0), *b = tseq(c, 2, 2, 320, 0, 0), *d = tseq(c, 3, 3, 320, 0, 0);
    CHECKF(fabs(share_of(c, 1) - 10) < 1e-9, "share 1 = %g", share_of(c, 1));
    CHECKF(fabs(share_of(c, 2) - 30) < 1e-9, "share 2 = %g", share_of(c, 2));
    CHECKF(fabs(share_of(c, 3) - 60) < 1e-9, "share 3 = %g", share_of(c, 3));
    CHECK(share_of(c, 0) == 0); /* no demand, no share */
    CHECK(fx_invariants(c));
    fkv_seq_free(b);
    fkv_seq_free(d);
    /* only tenant 1 (10 pages) and tenant 3 wanting 20 pages: both fit,
     * the spare 70 go 1:2 */
    d = tseq(c, 4, 3, 80, 0, 0);
    CHECKF(fabs(share_of(c, 1) - (10 + 70.0 / 3)) < 1e-9, "share 1 = %g", share_of(c, 1));
    CHECKF(fabs(share_of(c, 3) - (20 + 140.0 / 3)) < 1e-9, "share 3 = %g", share_of(c, 3));
    CHECK(share_of(c, 2) == 0);
    CHECK(fx_invariants(c));
    /* peek: pages as they are now, shares as of the last refresh */
    fkv_tenant_info pk, in;
    fill(d, 1000, 64); /* tenant 3 takes 16 pages (4 tokens a page) */
    REQUIRE(fkv_cache_tenant_peek(c, 3, &pk) == FKV_OK);
    CHECKF(pk.pages == 16 && pk.weight == 2.0 && pk.seqs == 1, "pages %llu seqs %u demand %g", (unsigned long long)pk.pages, pk.seqs, pk.demand_pages);
    CHECKF(fabs(pk.share_pages - (20 + 140.0 / 3)) < 1e-9, "peeked share %g", pk.share_pages);
    fkv_seq *e = tseq(c, 5, 2, 800, 0, 0); /* tenant 2 claims 200 pages: no refresh yet */
    REQUIRE(fkv_cache_tenant_peek(c, 3, &pk) == FKV_OK);
    CHECKF(fabs(pk.share_pages - (20 + 140.0 / 3)) < 1e-9, "peeked share %g", pk.share_pages);
    /* refreshed: demands 10, 200 and 20 over 100 pages: tenants 1 and 3
     * are met, tenant 2 takes the other 70 */
    REQUIRE(fkv_cache_tenant_info(c, 3, &in) == FKV_OK);
    REQUIRE(fkv_cache_tenant_peek(c, 3, &pk) == FKV_OK);
    CHECKF(fabs(in.share_pages - 20) < 1e-9 && pk.share_pages == in.share_pages && pk.pages == in.pages &&
               pk.demand_pages == in.demand_pages,
           "share %g, peeked %g", in.share_pages, pk.share_pages);
    CHECK(fkv_cache_tenant_peek(c, 99, &pk) == FKV_ENOENT && strstr(fkv_last_error(), "tenant 99"));
    CHECK(fkv_cache_tenant_peek(NULL, 3, &pk) == FKV_EINVAL && strstr(fkv_last_error(), "fkv_cache_tenant_peek"));
    fkv_seq_free(e);
    fkv_seq_free(a);
    fkv_seq_free(d);
    fkv_cache_destroy(c);
}

/* Two tenants' finished requests fill the pool (12 pages each); a third
 * tenant wants 12 pages and takes 6.  Equal weights: shares are 8 each, so
 * both give back (9 and 9 after the 6 evictions).  Tenant 2 at weight 3:
 * its 12 pages are within its share, tenant 1 gives all 6, its oldest
 * (the policy, LRU, within the tenant). */
static void victims(double w2, uint64_t want1, uint64_t want2)
{
    fkv_cache *c = open_cache(24, FKV_QUOTA_TENANT, 16);
    REQUIRE(fkv_cache_set_tenant_weight(c, 2, w2) == FKV_OK);
    fkv_seq *a = tseq(c, 1, 1, 0, 0, 0);
    fill(a, 1000, 48);
    fkv_seq_free(a);
    fkv_seq *b = tseq(c, 2, 2, 0, 0, 0);
    fill(b, 2000, 48);
    fkv_seq_free(b);
    fkv_seq *e = tseq(c, 3, 3, 48, 0, 0);
    fill(e, 3000, 24);
    CHECKF(pages_of(c, 1) == want1 && pages_of(c, 2) == want2 && pages_of(c, 3) == 6,
           "w2=%g: pages %llu %llu %llu", w2, (unsigned long long)pages_of(c, 1), (unsigned long long)pages_of(c, 2),
           (unsigned long long)pages_of(c, 3));
    /* what tenant 1 kept is its newest pages: a match finds none of its
     * first page on */
    fkv_seq *a2 = tseq(c, 4, 1, 0, 0, 0);
    int32_t tok[48];
    for (int i = 0; i < 48; i++) tok[i] = 1000 + i;
    uint32_t m = 99;
    CHECK(fx_match(a2, tok, 48, 47, &m) == FKV_OK && m == 0);
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 1, &ti) == FKV_OK);
    CHECK(ti.reclaimed_pages[FKV_N_RECLAIM_SLOTS - 1] == 12 - want1); /* counted as idle evictions */
    CHECK(fx_invariants(c));
    fkv_seq_free(a2);
    fkv_seq_free(e);
    fkv_cache_destroy(c);
}

static uint32_t resident_pages(fkv_seq *s)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    uint32_t p = 0;
    for (size_t i = 0; i < n; i++) p += ch[i]->resident ? ch[i]->n_pages : 0;
    return p;
}

/* Within the victim tenant, its request furthest over its quota gives
 * first.  16 pages: tenant 1's A holds 12 (demand 12) and B 4 (expected
 * 48 tokens: demand 12), both open and unpinned; tenant 2's C (expected 32
 * tokens: 8 pages) appends 4 pages.  Shares: C's tenant its 8, tenant 1
 * the other 8, split 4 and 4 between A and B (equal demands): A is 8 over,
 * B at its quota, so the four victims are A's. */
static void victims_within_tenant(void)
{
    fkv_cache *c = open_cache(16, FKV_QUOTA_TENANT, 16);
    fkv_seq *a = tseq(c, 1, 1, 0, 0, 0), *b = tseq(c, 2, 1, 48, 0, 0);
    fill(a, 100, 48);
    fill(b, 200, 16);
    fkv_seq *e = tseq(c, 3, 2, 32, 0, 0);
    fill(e, 300, 16);
    CHECKF(resident_pages(a) == 8 && resident_pages(b) == 4 && resident_pages(e) == 4, "resident pages %u %u %u",
           resident_pages(a), resident_pages(b), resident_pages(e));
    CHECK(fx_invariants(c));
    fkv_seq_free(a);
    fkv_seq_free(b);
    fkv_seq_free(e);
    fkv_cache_destroy(c);
}

static uint32_t match(fkv_cache *c, uint64_t id, uint64_t tenant, uint32_t shared, uint64_t salt, const int32_t *tok,
                      uint32_t n)
{
    fkv_seq *s = tseq(c, id, tenant, 0, shared, salt);
    uint32_t m = 0;
    REQUIRE(fx_match(s, tok, n, n - 1, &m) == FKV_OK);
    if (m < n) REQUIRE(fkv_seq_append(s, tok + m, n - m, NULL) == FKV_OK);
    fkv_seq_free(s); /* its pages stay cached */
    return m;
}

/* Prefix namespaces: a private prefix is matched by its own tenant only;
 * a published head by every tenant of the same salt; tenant 0 is public. */
static void namespaces(int hash_ids)
{
    (void)hash_ids;
    fkv_cache *c = open_cache(256, FKV_QUOTA_TENANT, 16);
    int32_t p[32], q[32];
    for (int i = 0; i < 32; i++) p[i] = 500 + i, q[i] = 900 + i;
    CHECK(match(c, 1, 1, 0, 0, p, 32) == 0);
    CHECK(match(c, 2, 2, 0, 0, p, 32) == 0);  /* B never sees A's private prompt */
    CHECK(match(c, 3, 1, 0, 0, p, 32) == 28); /* A does (n - 1 = 31 tokens: 7 pages) */
    CHECK(match(c, 4, 2, 0, 0, p, 32) == 28); /* and B its own copy */
    /* published: the first 16 tokens (a system prompt) are public */
    CHECK(match(c, 5, 1, 16, 0, q, 32) == 0);
    CHECK(match(c, 6, 2, 16, 0, q, 32) == 16); /* B gets the head, not A's private rest */
    CHECK(match(c, 7, 1, 16, 0, q, 32) == 28);
    CHECK(match(c, 8, 3, 16, 7, q, 32) == 0);  /* another salt: another namespace */
    CHECK(match(c, 9, 4, 16, 7, q, 32) == 16); /* the same salt shares the head */
    /* the anonymous tenant is public: anonymous requests share with each
     * other and with every tenant's published head, never a private part */
    int32_t z[32];
    for (int i = 0; i < 32; i++) z[i] = 1500 + i;
    CHECK(match(c, 10, 0, 0, 0, z, 32) == 0);
    CHECK(match(c, 11, 0, 0, 0, z, 32) == 28);
    CHECK(match(c, 12, 5, 0, 0, z, 32) == 0);
    CHECK(match(c, 13, 5, 16, 0, z, 32) == 16);
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 2, &ti) == FKV_OK);
    CHECK(ti.prefix_query_tokens == 3 * 32 && ti.prefix_hit_tokens == 28 + 16);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* The same rule in hash-id mode (block ids name the prompt). */
static void namespaces_ids(void)
{
    fkv_config cfg;
    fx_small_config(&cfg, 64);
    cfg.chunk_tokens = 4;
    cfg.quotas = FKV_QUOTA_TENANT;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = 8;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create_eval(&cfg, &ev, &c, NULL, 0) == FKV_OK);
    uint64_t ids[4] = {11, 12, 13, 14};
    uint32_t got[3];
    uint64_t tenants[3] = {1, 2, 1};
    for (int k = 0; k < 3; k++) {
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = 1 + (uint64_t)k;
        p.tenant = tenants[k];
        p.shared_prefix_tokens = k == 1 ? 0 : 0;
        fkv_seq *s = NULL;
        REQUIRE(fkv_seq_create_blocks(c, &p, ids, 4, &s) == FKV_OK);
        REQUIRE(fx_match(s, NULL, 32, 31, &got[k]) == FKV_OK);
        REQUIRE(fkv_seq_append(s, NULL, 32 - got[k], NULL) == FKV_OK);
        fkv_seq_free(s);
    }
    CHECKF(got[0] == 0 && got[1] == 0 && got[2] == 28, "matched %u %u %u", got[0], got[1], got[2]);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static double prom_value(const char *text, const char *series)
{
    const char *p = strstr(text, series);
    if (!p) return -1;
    return atof(p + strlen(series));
}

/* Two label slots: tenants 0 and 1 by name, 2 and 3 add up in "other". */
static void metrics(void)
{
    fkv_cache *c = open_cache(64, FKV_QUOTA_TENANT, 2);
    fkv_seq *s[4];
    for (int t = 0; t < 4; t++) {
        s[t] = tseq(c, 1 + (uint64_t)t, (uint64_t)t, 0, 0, 0);
        fill(s[t], 100 * t, 4 * (uint32_t)(t + 1)); /* 1, 2, 3, 4 pages */
    }
    static char buf[1 << 16];
    size_t len = 0;
    REQUIRE(fkv_cache_metrics_prometheus(c, buf, sizeof buf, &len) == FKV_OK && len < sizeof buf);
    CHECK(prom_value(buf, "fairkv_tenant_pages{tenant=\"0\"} ") == 1);
    CHECK(prom_value(buf, "fairkv_tenant_pages{tenant=\"1\"} ") == 2);
    CHECK(prom_value(buf, "fairkv_tenant_pages{tenant=\"other\"} ") == 3 + 4);
    CHECK(!strstr(buf, "tenant=\"2\"") && !strstr(buf, "tenant=\"3\""));
    CHECK(strstr(buf, "fairkv_tenant_reclaimed_pages_total{tenant=\"other\",action=\"quantize8\"} 0"));
    double share_sum = prom_value(buf, "fairkv_tenant_share_pages{tenant=\"0\"} ") +
                       prom_value(buf, "fairkv_tenant_share_pages{tenant=\"1\"} ") +
                       prom_value(buf, "fairkv_tenant_share_pages{tenant=\"other\"} ");
    CHECKF(fabs(share_sum - 64) < 1e-6, "shares sum to %g", share_sum);
    /* the seed's two names stay */
    CHECK(strstr(buf, "\nkv_cache_chunk_size{") && strstr(buf, "\nkv_cache_miss_rate{"));
    REQUIRE(fkv_cache_metrics_json(c, buf, sizeof buf, &len) == FKV_OK);
    CHECK(strstr(buf, "\"fairkv_tenant_pages\":{\"0\":1,\"1\":2,\"other\":7}"));
    for (int t = 0; t < 4; t++) fkv_seq_free(s[t]);
    fkv_cache_destroy(c);
}

static void errors(void)
{
    fkv_config cfg;
    fx_small_config(&cfg, 16);
    cfg.quotas = 3;
    fkv_cache *c = NULL;
    char err[200] = "";
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "quotas=3"));
    cfg.quotas = FKV_QUOTA_TENANT;
    cfg.tenant_labels = 65;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "tenant_labels=65"));
    c = open_cache(16, FKV_QUOTA_TENANT, 16);
    CHECK(fkv_cache_set_tenant_weight(c, 5, 0) == FKV_EINVAL && strstr(fkv_last_error(), "weight=0"));
    CHECK(fkv_cache_set_tenant_weight(c, 5, NAN) == FKV_EINVAL);
    fkv_tenant_info ti;
    CHECK(fkv_cache_tenant_info(c, 99, &ti) == FKV_ENOENT && strstr(fkv_last_error(), "tenant 99"));
    fkv_seq *s = tseq(c, 1, 4, 0, 0, 0), *k = NULL;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 2;
    p.tenant = 5;
    CHECK(fkv_seq_fork(s, &p, &k) == FKV_EINVAL && strstr(fkv_last_error(), "tenant=5"));
    p.tenant = 0; /* a fork without a tenant inherits its parent's */
    REQUIRE(fkv_seq_fork(s, &p, &k) == FKV_OK);
    CHECK(fkv_seq_tenant(k) == 4);
    fkv_seq_free(k);
    fkv_seq_free(s);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

int main(void)
{
    shares();
    victims(1.0, 9, 9);
    victims(3.0, 6, 12);
    victims_within_tenant();
    namespaces(0);
    namespaces_ids();
    metrics();
    errors();
    return check_done();
}
