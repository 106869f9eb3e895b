/* Admission below the device (tier_admission, src/core/admit.h): the
 * TinyLFU filter's counts against sequences worked out by hand (a key seen
 * once is not admitted, twice is, halving after a window forgets), and the
 * cache's use of it: with "seen" a chunk seen once is dropped, not demoted,
 * and one seen twice goes down; with "tinylfu" a full host keeps a chunk
 * seen twice against a newcomer seen once, where "off" replaces it; the
 * prefix tree stays closed; refusals are counted in the metrics; and the
 * configuration is checked. */
#include <string.h>

#include "check.h"
#include "core/admit.h"
#include "core/internal.h"
#include "fairkv.h"
#include "server/backend_engine_opts.h"

#define PT 4
#define CHUNK 8
#define PAGE_BYTES (PT * 2 * 4 * sizeof(float) * 2) /* 2 layers, dim 4, K and V: 256 */
#define CHUNK_BYTES (2 * PAGE_BYTES)

static int64_t now_ns;

/* --------------------------------------------------------------- filter */

static void test_filter_counts(void)
{
    fkv__admit *a = fkv__admit_new(1000, 2);
    REQUIRE(a);
    CHECK(fkv__admit_estimate(a, 11) == 0);
    fkv__admit_record(a, 11); /* the doorkeeper takes the first sighting */
    CHECK(fkv__admit_estimate(a, 11) == 1);
    CHECK(!fkv__admit_ok(a, 11)); /* once seen: never admitted */
    fkv__admit_record(a, 11);
    CHECK(fkv__admit_estimate(a, 11) == 2);
    CHECK(fkv__admit_ok(a, 11)); /* twice: admitted */
    for (int i = 0; i < 3; i++) fkv__admit_record(a, 11);
    CHECK(fkv__admit_estimate(a, 11) == 5);
    CHECK(fkv__admit_estimate(a, 12) == 0 && !fkv__admit_ok(a, 12)); /* another key is not counted */
    for (int i = 0; i < 40; i++) fkv__admit_record(a, 13);
    CHECK(fkv__admit_estimate(a, 13) == 16); /* 15 in the sketch (4-bit counters) + the doorkeeper */
    CHECK(fkv__admit_halvings(a) == 0);
    fkv__admit_free(a);
    CHECK(fkv__admit_new(0, 2) == NULL && fkv__admit_new(10, 0) == NULL && fkv__admit_new(10, 16) == NULL);
}

/* Window 10: key 1 five times (sketch 4, doorkeeper 1), key 2 once, then
 * four other keys: the tenth sighting halves.  Key 1: 4 / 2 = 2 in the
 * sketch, the doorkeeper cleared: 2, still admitted.  Key 2: 0 + 0.  Key 3
 * seen twice before the halving (sketch 1): 0 after it. */
static void test_filter_halving(void)
{
    fkv__admit *a = fkv__admit_new(10, 2);
    REQUIRE(a);
    for (int i = 0; i < 5; i++) fkv__admit_record(a, 1);
    fkv__admit_record(a, 2);
    fkv__admit_record(a, 3);
    fkv__admit_record(a, 3);
    CHECK(fkv__admit_estimate(a, 1) == 5 && fkv__admit_estimate(a, 2) == 1 && fkv__admit_estimate(a, 3) == 2);
    fkv__admit_record(a, 4);
    CHECK(fkv__admit_halvings(a) == 0);
    fkv__admit_record(a, 5); /* the tenth */
    CHECK(fkv__admit_halvings(a) == 1);
    CHECKF(fkv__admit_estimate(a, 1) == 2, "key 1: %u", fkv__admit_estimate(a, 1));
    CHECK(fkv__admit_ok(a, 1));
    CHECK(fkv__admit_estimate(a, 2) == 0);
    CHECK(fkv__admit_estimate(a, 3) == 0 && !fkv__admit_ok(a, 3));
    CHECK(fkv__admit_estimate(a, 5) == 0);
    /* counting starts again: two more sightings of key 3 admit it */
    fkv__admit_record(a, 3);
    fkv__admit_record(a, 3);
    CHECK(fkv__admit_estimate(a, 3) == 2);
    fkv__admit_free(a);
}

/* ---------------------------------------------------------------- cache */

static fkv_cache *open_cache(int admission, uint32_t host_chunks)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 2;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 4;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = CHUNK;
    cfg.capacity_pages = 8;
    cfg.storage = FKV_STORAGE_PHANTOM;
    cfg.policy = "lru";
    cfg.quotas = FKV_QUOTA_OFF;
    cfg.host_capacity_bytes = (uint64_t)host_chunks * CHUNK_BYTES;
    cfg.host_demote = 1;
    cfg.tier_admission = admission;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now_ns;
    cfg.thread_safe = 0;
    fkv_cache *c = NULL;
    char err[256];
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    return c;
}

static fkv_seq *new_seq(fkv_cache *c, uint64_t id)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    return s;
}

static void cached_prompt(fkv_cache *c, uint64_t id, const int32_t *tok, uint32_t n)
{
    now_ns += 1000;
    fkv_seq *s = new_seq(c, id);
    REQUIRE(fkv_seq_append(s, tok, n, NULL) == FKV_OK);
    fkv_seq_free(s);
}

/* A request that finds tok[0..n) (in any tier) and lets go. */
static fkv_match_info rematch(fkv_cache *c, uint64_t id, const int32_t *tok, uint32_t n)
{
    now_ns += 1000;
    fkv_seq *s = new_seq(c, id);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(s, tok, n, n, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    fkv_seq_free(s);
    return mi;
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

static double metric(fkv_cache *c, const char *line_start)
{
    static char buf[1 << 16];
    size_t len = 0;
    if (fkv_cache_metrics_prometheus(c, buf, sizeof buf, &len) || len >= sizeof buf) return -1;
    const char *p = strstr(buf, line_start);
    return p ? atof(p + strlen(line_start)) : -1;
}

/* "seen": a prompt of 24 tokens (3 chunks, 6 of the 8 pages) computed
 * once, then pushed off the device by another of 24 (2 of its chunks must
 * go): its leaf chunk is refused
 * and dropped.  The same after a second request matched it: demoted. */
static void test_seen_once_twice(void)
{
    int32_t a[24], b[24];
    fill(a, 24, 0);
    fill(b, 24, 1000);
    fkv_cache *c = open_cache(FKV_TIER_ADMIT_SEEN, 4);
    cached_prompt(c, 1, a, 24);
    cached_prompt(c, 2, b, 24); /* two of a's chunks leave: C, then B (leaves first) */
    CHECK(c->stats.fairkv_tier_refused_total[0] == 2);
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 0);
    CHECK(c->host_used == 0);
    CHECK(metric(c, "fairkv_tier_refused_total{tier=\"device\"} ") == 2);
    fkv_counters k;
    REQUIRE(fkv_cache_counters(c, &k) == FKV_OK);
    CHECK(k.host_refused_chunks == 2 && k.host_demoted_chunks == 0 && k.host_demoted_bytes == 0);
    CHECK(sound(c));
    fkv_cache_destroy(c);

    c = open_cache(FKV_TIER_ADMIT_SEEN, 4);
    cached_prompt(c, 1, a, 24);
    fkv_match_info mi = rematch(c, 2, a, 24); /* the second sighting of every page */
    CHECK(mi.device_tokens == 24);
    cached_prompt(c, 3, b, 24);
    CHECK(c->stats.fairkv_tier_refused_total[0] == 0);
    CHECK(c->stats.fairkv_tier_demotions_total[0] == 2);
    CHECK(c->host_used == 2 * CHUNK_BYTES);
    REQUIRE(fkv_cache_counters(c, &k) == FKV_OK);
    CHECK(k.host_demoted_chunks == 2 && k.host_demoted_bytes == 2 * CHUNK_BYTES);
    CHECK(sound(c));
    mi = rematch(c, 4, a, 24);
    CHECKF(mi.host_tokens == 16, "host %u", mi.host_tokens);
    fkv_cache_destroy(c);
}

/* "tinylfu" with a host of one chunk: x (seen twice) goes down while the
 * host has room; y (seen once) would push it out, and is refused.  With
 * the filter off y replaces x. */
static void test_tinylfu_keeps_frequent(void)
{
    int32_t x[8], y[8], z[32];
    fill(x, 8, 0);
    fill(y, 8, 100);
    fill(z, 32, 1000);
    for (int mode = 0; mode < 2; mode++) {
        fkv_cache *c = open_cache(mode ? FKV_TIER_ADMIT_TINYLFU : FKV_TIER_ADMIT_OFF, 1);
        cached_prompt(c, 1, x, 8);
        rematch(c, 2, x, 8);
        cached_prompt(c, 3, y, 8); /* y is the most recently used */
        cached_prompt(c, 4, z, 32); /* all 8 pages: x then y leave the device */
        CHECK(sound(c));
        fkv_match_info mx = rematch(c, 5, x, 8), my = rematch(c, 6, y, 8);
        if (mode) {
            CHECK(c->stats.fairkv_tier_refused_total[0] == 1);
            CHECK(c->stats.fairkv_tier_demotions_total[0] == 1);
            CHECKF(mx.host_tokens == 8 && my.host_tokens == 0, "x %u y %u", mx.host_tokens, my.host_tokens);
        } else {
            CHECK(c->stats.fairkv_tier_refused_total[0] == 0);
            CHECK(c->stats.fairkv_tier_demotions_total[0] == 2);
            CHECKF(mx.host_tokens == 0 && my.host_tokens == 8, "x %u y %u", mx.host_tokens, my.host_tokens);
        }
        fkv_cache_destroy(c);
    }
}

/* Prefix closure under the filter: chunks of one prompt seen a different
 * number of times, pushed down and back in turns; the tree stays closed
 * (fkv__cache_check: no idle prefix in a lower tier than an idle chunk
 * extending it). */
static void test_closure(void)
{
    for (int mode = 1; mode <= 2; mode++) {
        fkv_cache *c = open_cache(mode, 2);
        int32_t a[24], b[24];
        fill(a, 24, 0);
        fill(b, 24, 5000);
        for (int round = 0; round < 6; round++) {
            cached_prompt(c, 10 + (uint64_t)round * 3, a, 8 + 8 * (uint32_t)(round % 3));
            rematch(c, 11 + (uint64_t)round * 3, a, 24);
            cached_prompt(c, 12 + (uint64_t)round * 3, b, 16 + 4 * (uint32_t)(round % 2));
            CHECK(sound(c));
        }
        fkv_cache_destroy(c);
    }
}

static void test_config(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    CHECK(cfg.tier_admission == FKV_TIER_ADMIT_OFF && cfg.tier_admission_threshold == 2);
    fkv_cache *c = NULL;
    char err[256] = "";
    cfg.capacity_pages = 64;
    cfg.tier_admission = 7;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "tier_admission"));
    cfg.tier_admission = FKV_TIER_ADMIT_SEEN;
    cfg.tier_admission_threshold = 16;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "tier_admission_threshold"));
    cfg.tier_admission_threshold = 2;
    cfg.prefix_cache = 0;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "prefix_cache"));
    int m = -5;
    CHECK(fkv_tier_admission_parse("tinylfu", &m) == 0 && m == FKV_TIER_ADMIT_TINYLFU);
    CHECK(fkv_tier_admission_parse("seen", &m) == 0 && m == FKV_TIER_ADMIT_SEEN);
    CHECK(fkv_tier_admission_parse("off", &m) == 0 && m == FKV_TIER_ADMIT_OFF);
    CHECK(fkv_tier_admission_parse("lfu", &m) == -1 && m == FKV_TIER_ADMIT_OFF);
    CHECK(!strcmp(fkv_tier_admission_name(FKV_TIER_ADMIT_SEEN), "seen"));
    fkv_config_default(&cfg);
    setenv("FAIRKV_TIER_ADMISSION", "tinylfu", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_OK && cfg.tier_admission == FKV_TIER_ADMIT_TINYLFU);
    setenv("FAIRKV_TIER_ADMISSION", "sometimes", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) != FKV_OK && strstr(err, "FAIRKV_TIER_ADMISSION"));
    unsetenv("FAIRKV_TIER_ADMISSION");
}

/* The served engine's option: parsed, and refused with no tier below the
 * device to admit to. */
static void test_serve_option(void)
{
    fkv_engine_config cfg;
    fkv_engine_backend_opts bo;
    char model[64], err[256] = "";
    const char *alone[] = {"model=m.gguf", "tier_admission=seen", NULL};
    CHECK(fkv__engine_opts_parse(alone, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "no tier below the device"));
    const char *host[] = {"model=m.gguf", "tier_admission=tinylfu", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(host, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.tier_admission == FKV_TIER_ADMIT_TINYLFU && cfg.host_demote);
    const char *remote[] = {"model=m.gguf", "tier_admission=seen", "remote=redis://127.0.0.1:1", NULL};
    CHECK(fkv__engine_opts_parse(remote, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.tier_admission == FKV_TIER_ADMIT_SEEN);
    const char *bad[] = {"model=m.gguf", "tier_admission=often", "host_kv=1MiB", NULL};
    CHECK(fkv__engine_opts_parse(bad, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "tier_admission=often"));
}

int main(void)
{
    test_filter_counts();
    test_filter_halving();
    test_seen_once_twice();
    test_tinylfu_keeps_frequent();
    test_closure();
    test_config();
    test_serve_option();
    return check_done();
}
