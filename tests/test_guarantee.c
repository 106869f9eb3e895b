/* Shares as guarantees (fkv_config.share_guarantee; src/core/shares.h,
 * rule 4): an under-share tenant's chunks survive another tenant's burst
 * (and do not when shares are targets), over-share victims follow the
 * policy's order across tenants rather than "the furthest over first",
 * the policy alone when nobody else is at or over its share (the same
 * victim sequence as quotas off), an allocator with nothing evictable
 * fails rather than take from a tenant at its share, the host tier's
 * rule, the server's option and the configuration checks. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "cache_fixture.h"
#include "ops_driver.h"
#include "server/backend_engine_opts.h"
#include "test_rng.h"

static int64_t now;

static fkv_cache *open_cache(uint32_t pages, int quotas, int guarantee, const char *policy)
{
    fkv_config cfg;
    fx_small_config(&cfg, pages);
    cfg.chunk_tokens = 4; /* one page per chunk: victims are easy to name */
    cfg.policy = policy;
    cfg.quotas = quotas;
    cfg.share_guarantee = guarantee;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    char err[256] = "";
    if (fkv_cache_create(&cfg, &c, err, sizeof err) != FKV_OK) {
        fprintf(stderr, "create: %s\n", err);
        REQUIRE(0);
    }
    return c;
}

static fkv_seq *tseq(fkv_cache *c, uint64_t id, uint64_t tenant, uint32_t expected)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    p.tenant = tenant;
    p.expected_tokens = expected;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    return s;
}

static fkv_status fill(fkv_seq *s, int32_t base, uint32_t n)
{
    int32_t tok[512];
    REQUIRE(n <= 512);
    for (uint32_t i = 0; i < n; i++) tok[i] = base + (int32_t)i;
    now += 10;
    return fkv_seq_append(s, tok, n, NULL);
}

static uint64_t pages_of(fkv_cache *c, uint64_t t)
{
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, t, &ti) == FKV_OK);
    return ti.pages;
}

/* A finished request of `tenant` leaves `pages` cached pages. */
static void cached(fkv_cache *c, uint64_t id, uint64_t tenant, int32_t base, uint32_t pages)
{
    fkv_seq *s = tseq(c, id, tenant, 0);
    REQUIRE(fill(s, base, pages * 4) == FKV_OK);
    fkv_seq_free(s);
}

/* Pool 24.  Tenant 1 runs a request of 6 pages (its whole demand),
 * tenant 2 keeps 10 cached pages and has no open request, tenant 3 runs a
 * request expecting 100 pages and holds 8, then grows by 10 pages, one at
 * a time.  Guarantee shares come from the open requests' demands: 6 and
 * 18 (tenant 2 claims nothing, so it is over its share 0): tenant 3 takes
 * tenant 2's 10 cached pages and tenant 1 keeps its 6.  Targets (cached
 * pages count as demand: shares 6, 9, 9): once everybody is at its share,
 * the first tenant with an evictable chunk (tenant 1) gives, so tenant 1
 * loses pages to tenant 3's burst.  A static partition (shares.h, rule 5:
 * 8 pages each for tenants 1-3; the anonymous tenant 0 holds nothing and
 * takes no part): tenant 3 takes tenant 2's 2 pages over its part, keeps
 * the 2 that tenant 1 leaves unused, and then recycles its own: 6, 8, 10. */
static void burst(int guarantee, uint64_t *p1, uint64_t *p2, uint64_t *p3)
{
    fkv_cache *c = open_cache(24, FKV_QUOTA_TENANT, guarantee, "lru");
    fkv_seq *a = tseq(c, 1, 1, 24);
    REQUIRE(fill(a, 1000, 24) == FKV_OK);
    cached(c, 2, 2, 2000, 10);
    fkv_seq *b = tseq(c, 3, 3, 400);
    REQUIRE(fill(b, 3000, 32) == FKV_OK);
    CHECK(pages_of(c, 1) == 6 && pages_of(c, 2) == 10 && pages_of(c, 3) == 8);
    for (int i = 0; i < 10; i++) REQUIRE(fill(b, 4000 + 4 * i, 4) == FKV_OK);
    *p1 = pages_of(c, 1);
    *p2 = pages_of(c, 2);
    *p3 = pages_of(c, 3);
    CHECK(fx_invariants(c));
    fkv_seq_free(a);
    fkv_seq_free(b);
    fkv_cache_destroy(c);
}

static void burst_both(void)
{
    uint64_t a1, a2, a3, b1, b2, b3;
    burst(1, &a1, &a2, &a3);
    CHECKF(a1 == 6 && a2 == 0 && a3 == 18, "guarantee: pages %llu %llu %llu, want 6 0 18", (unsigned long long)a1,
           (unsigned long long)a2, (unsigned long long)a3);
    burst(0, &b1, &b2, &b3);
    CHECKF(b1 < 6, "targets: tenant 1 kept %llu of 6 pages (the burst took none)", (unsigned long long)b1);
    burst(2, &b1, &b2, &b3);
    CHECKF(b1 == 6 && b2 == 8 && b3 == 10, "partition: pages %llu %llu %llu, want 6 8 10", (unsigned long long)b1,
           (unsigned long long)b2, (unsigned long long)b3);
}

/* Pool 24: tenant 2's 9 cached pages are written first (older), tenant
 * 1's 10 after (newer), tenant 3 holds 5 and wants more.  Tenants 1 and 2
 * are both over their shares (targets: 8, 8, 8; guarantees: 0, 0, 24).  The furthest over is tenant 1 (by 2),
 * but LRU's victim across both is tenant 2's oldest chunk: with
 * guarantees tenant 2 gives the first page, with targets tenant 1. */
static void over_order(int guarantee, const char *policy)
{
    fkv_cache *c = open_cache(24, FKV_QUOTA_TENANT, guarantee, policy);
    cached(c, 2, 2, 2000, 9);
    cached(c, 1, 1, 1000, 10);
    fkv_seq *b = tseq(c, 3, 3, 400);
    REQUIRE(fill(b, 3000, 20) == FKV_OK);
    CHECK(pages_of(c, 1) == 10 && pages_of(c, 2) == 9 && pages_of(c, 3) == 5);
    REQUIRE(fill(b, 4000, 4) == FKV_OK);
    uint64_t p1 = pages_of(c, 1), p2 = pages_of(c, 2);
    if (guarantee)
        CHECKF(p1 == 10 && p2 == 8, "%s guarantee: tenants 1, 2 hold %llu, %llu; want 10, 8 (the older chunk goes)",
               policy, (unsigned long long)p1, (unsigned long long)p2);
    else
        CHECKF(p1 == 9 && p2 == 9, "%s targets: tenants 1, 2 hold %llu, %llu; want 9, 9 (furthest over first)", policy,
               (unsigned long long)p1, (unsigned long long)p2);
    /* tenant 2's first page is the one that went: its prefix is gone */
    fkv_seq *m = tseq(c, 9, 2, 0);
    int32_t tok[36];
    for (int i = 0; i < 36; i++) tok[i] = 2000 + i;
    uint32_t got = 99;
    REQUIRE(fx_match(m, tok, 36, 35, &got) == FKV_OK);
    CHECKF(guarantee ? got == 0 : got == 32, "%s: tenant 2 matched %u tokens", policy, got);
    fkv_seq_free(m);
    CHECK(fx_invariants(c));
    fkv_seq_free(b);
    fkv_cache_destroy(c);
}

/* Pool 16: tenant 1 runs a request of 6 pages, tenant 2 one of 10, pinned
 * (shares 6 and 10: both at their shares).  Tenant 2 wants one more page:
 * nobody is over and tenant 1 is at its share, so tenant 2 may take only
 * from itself, holds nothing evictable, and the allocation fails; tenant
 * 1 keeps its pages (targets: tenant 1 gives one). */
static void over_self_fails(int guarantee)
{
    fkv_cache *c = open_cache(16, FKV_QUOTA_TENANT, guarantee, "lru");
    fkv_seq *a = tseq(c, 1, 1, 24);
    REQUIRE(fill(a, 1000, 24) == FKV_OK);
    fkv_seq *b = tseq(c, 2, 2, 40);
    REQUIRE(fill(b, 3000, 40) == FKV_OK);
    REQUIRE(fkv_seq_pin(b) == FKV_OK);
    fkv_status st = fill(b, 4000, 4);
    if (guarantee) {
        CHECKF(st == FKV_EFULL, "guarantee: status %d, want EFULL", (int)st);
        CHECK(pages_of(c, 1) == 6);
    } else {
        CHECKF(st == FKV_OK && pages_of(c, 1) == 5, "targets: status %d, tenant 1 holds %llu", (int)st,
               (unsigned long long)pages_of(c, 1));
    }
    REQUIRE(fkv_seq_unpin(b) == FKV_OK);
    CHECK(fx_invariants(c));
    fkv_seq_free(a);
    fkv_seq_free(b);
    fkv_cache_destroy(c);
}

/* The resident chunks, as a fingerprint: (id, resident) of every live one. */
static uint64_t fingerprint(fkv_cache *c)
{
    uint64_t h = 1469598103934665603ull;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        h = (h ^ ch->id) * 1099511628211ull;
        h = (h ^ (uint64_t)ch->v.resident) * 1099511628211ull;
    }
    return h;
}

/* Random requests of one tenant (prefix matches, appends, frees, reads):
 * after every operation the fingerprint is recorded.  Run with quotas off
 * and with one tenant under guarantees, the records must be equal. */
enum { OPS = 3000, OPEN = 4 };
static void random_ops(fkv_cache *c, uint64_t tenant, uint64_t seed, uint64_t *rec, uint64_t *evictions)
{
    rng r = {seed};
    fkv_seq *open[OPEN] = {0};
    uint64_t id = 1;
    now = 0;
    for (int op = 0; op < OPS; op++) {
        uint32_t k = next(&r) % OPEN, what = next(&r) % 8;
        if (!open[k]) {
            open[k] = tseq(c, id++, tenant, 0);
            int32_t tok[64];
            uint32_t base = 10000 * (next(&r) % 6), n = 8 + next(&r) % 56, got = 0;
            for (uint32_t i = 0; i < n; i++) tok[i] = (int32_t)(base + i);
            REQUIRE(fx_match(open[k], tok, n, n - 1, &got) == FKV_OK);
            now += 10;
            REQUIRE(fkv_seq_append(open[k], tok + got, n - got, NULL) == FKV_OK);
        } else if (what < 5) {
            REQUIRE(fill(open[k], (int32_t)(100000 + op * 8), 1 + next(&r) % 12) == FKV_OK);
        } else if (what < 6) {
            now += 10;
            REQUIRE(fkv_seq_touch(open[k], NULL) == FKV_OK);
        } else {
            fkv_seq_free(open[k]);
            open[k] = NULL;
        }
        rec[op] = fingerprint(c);
    }
    for (int k = 0; k < OPEN; k++)
        if (open[k]) fkv_seq_free(open[k]);
    fkv_counters ct;
    REQUIRE(fkv_cache_counters(c, &ct) == FKV_OK);
    *evictions = ct.evicted_chunks[0] + ct.evicted_chunks[1] + ct.evicted_chunks[2];
}

static void alone_equals_policy(const char *policy, uint64_t seed)
{
    static uint64_t a[OPS], b[OPS];
    uint64_t ea = 0, eb = 0;
    fkv_cache *c = open_cache(32, FKV_QUOTA_OFF, 0, policy);
    random_ops(c, 1, seed, a, &ea);
    fkv_cache_destroy(c);
    c = open_cache(32, FKV_QUOTA_TENANT, 1, policy);
    random_ops(c, 1, seed, b, &eb);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
    int first = -1;
    for (int i = 0; i < OPS && first < 0; i++)
        if (a[i] != b[i]) first = i;
    CHECKF(first < 0, "%s: one tenant under guarantees differs from quotas off at operation %d", policy, first);
    CHECKF(ea == eb && ea > 100, "%s: evictions %llu vs %llu (the run must evict)", policy, (unsigned long long)ea,
           (unsigned long long)eb);
}

/* The host tier.  Host of 9 chunks, tenant 2 at weight 2: tenant 1's 3
 * chunks are demoted first (the least recently used), tenant 2's 6 after;
 * then tenant 3 demotes one.  Host shares (demands 3, 6, 1; capacity 9):
 * 1 for tenant 3, 8/3 and 16/3 for tenants 1 and 2, both over.  Targets:
 * tenant 2, the furthest over (by 2/3), gives a chunk; guarantees: the
 * host LRU across both over-share tenants takes tenant 1's. */
static void host_order(int guarantee, uint64_t *h1, uint64_t *h2)
{
    fkv_config cfg;
    fx_small_config(&cfg, 16);
    cfg.chunk_tokens = 4;
    cfg.policy = "lru";
    cfg.quotas = FKV_QUOTA_TENANT;
    cfg.share_guarantee = guarantee;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    fkv_cache_info ci;
    REQUIRE(fkv_cache_get_info(c, &ci) == FKV_OK);
    fkv_cache_destroy(c);
    cfg.host_capacity_bytes = 9 * ci.page_bytes; /* a chunk is a page */
    cfg.host_demote = 1;
    c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    REQUIRE(fkv_cache_set_tenant_weight(c, 2, 2.0) == FKV_OK);
    uint32_t freed = 0;
    cached(c, 1, 1, 1000, 3);
    REQUIRE(fkv_cache_evict(c, 16, &freed) == FKV_OK);
    cached(c, 2, 2, 2000, 6);
    REQUIRE(fkv_cache_evict(c, 16, &freed) == FKV_OK);
    fkv_tenant_info t1, t2;
    REQUIRE(fkv_cache_tenant_info(c, 1, &t1) == FKV_OK && fkv_cache_tenant_info(c, 2, &t2) == FKV_OK);
    CHECK(t1.host_bytes == 3 * ci.page_bytes && t2.host_bytes == 6 * ci.page_bytes);
    cached(c, 3, 3, 3000, 1);
    REQUIRE(fkv_cache_evict(c, 16, &freed) == FKV_OK);
    REQUIRE(fkv_cache_tenant_info(c, 1, &t1) == FKV_OK && fkv_cache_tenant_info(c, 2, &t2) == FKV_OK);
    *h1 = t1.host_bytes / ci.page_bytes;
    *h2 = t2.host_bytes / ci.page_bytes;
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static void host_both(void)
{
    uint64_t a1, a2, b1, b2;
    host_order(1, &a1, &a2);
    CHECKF(a1 == 2 && a2 == 6, "guarantee: host chunks %llu %llu, want 2 6", (unsigned long long)a1,
           (unsigned long long)a2);
    host_order(0, &b1, &b2);
    CHECKF(b1 == 3 && b2 == 5, "targets: host chunks %llu %llu, want 3 5", (unsigned long long)b1,
           (unsigned long long)b2);
}

/* `fairkv serve --backend-opt shares=...` */
static void serve_option(void)
{
    fkv_engine_config ec;
    fkv_engine_backend_opts bo;
    char model[256], err[256] = "";
    const char *on[] = {"quotas=tenant", "shares=guarantee", NULL};
    CHECK(fkv__engine_opts_parse(on, &ec, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          ec.share_guarantee == 1 && ec.quotas == FKV_QUOTA_TENANT);
    const char *off[] = {"shares=target", NULL};
    CHECK(fkv__engine_opts_parse(off, &ec, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          ec.share_guarantee == 0);
    const char *part[] = {"shares=partition", NULL};
    CHECK(fkv__engine_opts_parse(part, &ec, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          ec.share_guarantee == 2);
    const char *bad[] = {"shares=maybe", NULL};
    CHECK(fkv__engine_opts_parse(bad, &ec, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "shares"));
}

/* `fairkv bench --shares`: the option reaches the fairkv scheme's cache
 * (its rows change) and not lru's (no tenant quotas: identical rows). */
static double hit_rate(const char *shares, const char *scheme)
{
    char path[] = "/tmp/fkv_guarantee_XXXXXX", args[256];
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(args, sizeof args,
             "--workload chat --tenants 4 --requests 400 --load 0.9 --schemes lru,fairkv --format json --quiet "
             "--shares %s",
             shares);
    CHECK(bench_cli(args, path) == 0);
    char *js = check_slurp(path);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    double r = -1;
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "schemes"))
    {
        if (!strcmp(cJSON_GetObjectItem(x, "name")->valuestring, scheme))
            r = cJSON_GetObjectItem(x, "prefix_hit_rate")->valuedouble;
    }
    cJSON_Delete(j);
    free(js);
    unlink(path);
    REQUIRE(r >= 0);
    return r;
}

static void bench_option(void)
{
    double lt = hit_rate("target", "lru"), lg = hit_rate("guarantee", "lru");
    double ft = hit_rate("target", "fairkv"), fg = hit_rate("guarantee", "fairkv");
    CHECKF(lt == lg, "lru: %g vs %g (it has no tenant shares)", lt, lg);
    CHECKF(ft != fg, "fairkv: %g with either --shares: the option did not reach the cache", ft);
    double fp = hit_rate("partition", "fairkv");
    CHECKF(fp != fg && fp != ft, "fairkv: --shares partition gives %g, as guarantee (%g) or target (%g)", fp, fg, ft);
    CHECK(bench_cli("--workload chat --requests 10 --shares maybe --quiet", NULL) != 0);
}

/* The random operation driver (tests/ops_driver.h) over its tenant-mode
 * variants (every policy, chunking, retention, prefix cache,
 * quantization, reclaim; and the host tier's), with guarantees on: the
 * full invariant checker and the K/V read-back after every 50 operations. */
static void random_sweep(void)
{
    ops_share_guarantee = 1;
    uint64_t per = (uint64_t)(1000 * check_scale()) + 1, total = 0, evicted = 0;
    for (uint32_t k = 288; k < OPS_VARIANTS + OPS_HOST_VARIANTS; k++) {
        if (k >= OPS_VARIANTS && ((k - OPS_VARIANTS) / 6) % 2 == 0) continue; /* host variants in request mode */
        ops_state st;
        REQUIRE(ops_open(&st, k) == FKV_OK);
        REQUIRE(st.c->cfg.share_guarantee == 1);
        ops_src src = {NULL, 0, 0, 5000 + k};
        int failed = 0;
        for (uint64_t i = 0; i < per && !failed; i++)
            if (ops_step(&st, &src) || (i % 50 == 49 && ops_check(&st))) {
                fprintf(stderr, "variant %u op %llu: %s\n", k, (unsigned long long)i, st.msg);
                failed = 1;
            }
        CHECKF(!failed, "variant %u", k);
        if (!failed) CHECKF(!ops_check(&st), "variant %u final: %s", k, st.msg);
        fkv_counters cn;
        fkv_cache_counters(st.c, &cn);
        evicted += cn.evicted_pages;
        total += st.ops;
        ops_close(&st);
    }
    ops_share_guarantee = 0;
    printf("random sweep under guarantees: %llu ops, %llu pages evicted\n", (unsigned long long)total,
           (unsigned long long)evicted);
    CHECKF(evicted > 0 && total > 0, "%llu ops, %llu pages evicted", (unsigned long long)total,
           (unsigned long long)evicted);
}

static void config_errors(void)
{
    fkv_config cfg;
    fx_small_config(&cfg, 16);
    cfg.share_guarantee = 1; /* quotas request (the default) */
    fkv_cache *c = NULL;
    char err[256] = "";
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "quotas=tenant"));
    cfg.quotas = FKV_QUOTA_TENANT;
    cfg.share_guarantee = 3;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "share_guarantee=3"));
    cfg.share_guarantee = 2;
    cfg.quotas = FKV_QUOTA_REQUEST;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "share_guarantee=2 needs quotas=tenant"));
}

/* Pool 16.  Tenant 2's request (expecting 16 pages) holds 8 pages; tenant
 * 1's (expecting 16) then grows page by page to 16.  If tenant 2's
 * request was pinned once and is not now (preempted and kept, as the
 * scheduler does), it claims nothing: tenant 2 is over its share of 0 and
 * tenant 1 takes all 16 pages.  If it was never pinned, it still claims
 * 16: shares 8 and 8, tenant 2 at its share keeps its 8 pages and tenant
 * 1 stops at 8 (FKV_EFULL).  Before the pinned rule, a kept request of
 * every other tenant at its share left a running request no memory to
 * grow into, and the scheduler refused it as larger than the cache. */
static void kept_claims_nothing(int pinned_once)
{
    fkv_cache *c = open_cache(16, FKV_QUOTA_TENANT, 1, "lru");
    fkv_seq *b = tseq(c, 2, 2, 64);
    if (pinned_once) REQUIRE(fkv_seq_pin(b) == FKV_OK);
    REQUIRE(fill(b, 1000, 32) == FKV_OK);
    if (pinned_once) REQUIRE(fkv_seq_unpin(b) == FKV_OK);
    fkv_seq *a = tseq(c, 1, 1, 64);
    REQUIRE(fkv_seq_pin(a) == FKV_OK);
    uint32_t got = 0;
    for (uint32_t k = 0; k < 16; k++) {
        if (fill(a, 5000 + 4 * (int32_t)k, 4) != FKV_OK) break;
        got++;
    }
    CHECKF(got == (pinned_once ? 16u : 8u), "kept request %s: the running one got %u pages, want %u",
           pinned_once ? "pinned once" : "never pinned", got, pinned_once ? 16u : 8u);
    CHECKF(pages_of(c, 2) == (pinned_once ? 0u : 8u), "tenant 2 holds %llu pages",
           (unsigned long long)pages_of(c, 2));
    fkv_seq_free(a);
    fkv_seq_free(b);
    fkv_cache_destroy(c);
}

int main(void)
{
    kept_claims_nothing(1);
    kept_claims_nothing(0);
    burst_both();
    over_order(1, "lru");
    over_order(0, "lru");
    over_order(1, "fifo");
    over_self_fails(1);
    over_self_fails(0);
    alone_equals_policy("lru", 7);
    alone_equals_policy("flru", 11);
    alone_equals_policy("fifo", 13);
    host_both();
    serve_option();
    bench_option();
    random_sweep();
    config_errors();
    return check_done();
}
