/* Page pool, sequences, fork/copy-on-write, EFULL atomicity, argument
 * validation, classes, one clock read per call. */
#include <math.h>
#include <string.h>

#include "cache_fixture.h"

static int64_t now;

static fkv_cache *open_cache(uint32_t pages, int prefix, const char *policy, fkv_storage_kind storage)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 2;
    cfg.n_kv_heads = 2;
    cfg.head_dim = 4;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.capacity_pages = pages;
    cfg.storage = storage;
    cfg.prefix_cache = prefix;
    cfg.policy = policy;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    char err[160];
    if (fkv_cache_create(&cfg, &c, err, sizeof err)) fprintf(stderr, "create: %s\n", err);
    return c;
}

/* An allocation of n pages succeeds whenever n pages are free, however
 * scattered: fill the pool with sequences of random sizes, free every other
 * one, then ask for exactly the free pages with eviction impossible (the
 * rest pinned, prefix cache off so freed pages really are free). */
static void no_external_fragmentation(void)
{
    fkv_cache *c = open_cache(256, 0, "lru", FKV_STORAGE_PHANTOM);
    REQUIRE(c);
    fkv_seq *s[64];
    int n = 0;
    uint64_t rng = 7;
    for (; n < 64; n++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t len = 1 + (uint32_t)(rng >> 33) % 14; /* 1..14 tokens: 1..4 pages */
        s[n] = fx_seq(c, (uint64_t)n + 1);
        if (fkv_seq_append(s[n], NULL, len, NULL) != FKV_OK) {
            fkv_seq_free(s[n]);
            break;
        }
        fkv_seq_pin(s[n]);
    }
    for (int i = 0; i < n; i += 2) {
        fkv_seq_unpin(s[i]);
        fkv_seq_free(s[i]);
    }
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.free_pages > 0);
    fkv_counters before;
    fkv_cache_counters(c, &before);
    fkv_seq *big = fx_seq(c, 1000);
    /* exactly the free pages, in one sequence (chunks of 8 tokens = 2 pages) */
    CHECK(fkv_seq_append(big, NULL, info.free_pages * 4, NULL) == FKV_OK);
    fkv_counters after;
    fkv_cache_counters(c, &after);
    CHECK(after.evicted_pages == before.evicted_pages);
    CHECK(after.pages_free == 0);
    /* one token more: nothing evictable (all pinned or being written) */
    fkv_seq_pin(big);
    fkv_seq *one = fx_seq(c, 1001);
    CHECK(fkv_seq_append(one, NULL, 1, NULL) == FKV_EFULL);
    CHECK(fkv_seq_len(one) == 0);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* Appended tokens land where the slots say, across page and chunk borders,
 * and the chunk table / locate agree. */
static void append_slots(void)
{
    fkv_cache *c = open_cache(64, 1, "flru", FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq *s = fx_seq(c, 1);
    fkv_slot sl[40];
    int32_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = i * 3;
    REQUIRE(fkv_seq_append(s, tok, 13, sl) == FKV_OK);
    REQUIRE(fkv_seq_append(s, tok + 13, 27, sl + 13) == FKV_OK);
    CHECK(fkv_seq_len(s) == 40);
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    CHECK(n == 5); /* 40 tokens in chunks of 8 */
    for (size_t i = 0; i < n; i++) {
        CHECK(ch[i]->start == i * 8 && ch[i]->n_tokens == 8 && ch[i]->n_pages == 2);
        fkv_chunk_info in;
        CHECK(fkv_seq_chunk_info(s, i, &in) == FKV_OK && in.refs == 1 && ch[i]->resident && in.owner == 1);
    }
    for (uint32_t pos = 0; pos < 40; pos++) {
        fkv_slot at;
        CHECK(fkv_chunks_locate(ch, n, 4, pos, &at) == FKV_OK);
        CHECK(at.page == sl[pos].page && at.slot == sl[pos].slot);
    }
    /* pages are distinct for distinct token slots */
    for (int i = 0; i < 40; i++)
        for (int j = i + 1; j < 40; j++) CHECK(sl[i].page != sl[j].page || sl[i].slot != sl[j].slot);
    fkv_slot at;
    CHECK(fkv_chunks_locate(ch, n, 4, 40, &at) == FKV_EINVAL);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static float *kptr(fkv_cache *c, uint32_t layer, fkv_slot sl, int v)
{
    void *k, *vv;
    uint64_t stride;
    fkv_cache_layer_storage(c, layer, &k, &vv, &stride);
    /* [page][slot][head][dim]: head 0, dim 0 */
    return (float *)((char *)(v ? vv : k) + sl.page * stride) + sl.slot * 2 * 4;
}

/* Fork shares every page; the first write into the shared partial page
 * copies that page only; the parent's data is untouched. */
static void fork_cow(void)
{
    fkv_cache *c = open_cache(64, 1, "lru", FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq *a = fx_seq(c, 1);
    fkv_slot sl[16];
    int32_t tok[16] = {0};
    REQUIRE(fkv_seq_append(a, tok, 10, sl) == FKV_OK); /* pages: 4+4+2 */
    for (int i = 0; i < 10; i++)
        for (uint32_t l = 0; l < 2; l++) *kptr(c, l, sl[i], 0) = (float)(100 * l + i), *kptr(c, l, sl[i], 1) = -(float)i;
    fkv_cache_info i0;
    fkv_cache_get_info(c, &i0);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 2;
    fkv_seq *b = NULL;
    REQUIRE(fkv_seq_fork(a, &p, &b) == FKV_OK);
    fkv_cache_info i1;
    fkv_cache_get_info(c, &i1);
    CHECK(i1.free_pages == i0.free_pages); /* nothing copied yet */
    CHECK(fkv_seq_len(b) == 10);
    fkv_slot bs[2];
    REQUIRE(fkv_seq_append(b, tok, 1, bs) == FKV_OK);
    fkv_cache_info i2;
    fkv_cache_get_info(c, &i2);
    CHECK(i2.free_pages == i0.free_pages - 1); /* exactly one page copied */
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(cn.cow_copies == 1);
    CHECK(bs[0].page != sl[9].page && bs[0].slot == 2); /* token 10 goes to slot 2 of the copy */
    *kptr(c, 0, bs[0], 0) = 999;
    /* the child reads the parent's values through the copy */
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(b, &ch, &n);
    for (uint32_t pos = 0; pos < 10; pos++) {
        fkv_slot at;
        REQUIRE(fkv_chunks_locate(ch, n, 4, pos, &at) == FKV_OK);
        CHECK(*kptr(c, 1, at, 0) == (float)(100 + pos));
        CHECK(*kptr(c, 0, at, 1) == -(float)pos);
        CHECK(pos >= 8 || at.page == sl[pos].page); /* full pages still shared */
    }
    /* the parent's slot 2 of its last page is untouched; its own append
     * copies too (the tail chunk is still shared with... nobody now: b has
     * its own copy), so it writes in place */
    fkv_slot as[1];
    REQUIRE(fkv_seq_append(a, tok, 1, as) == FKV_OK);
    CHECK(as[0].page == sl[9].page && as[0].slot == 2);
    CHECK(*kptr(c, 0, bs[0], 0) == 999);
    fkv_seq_free(a);
    CHECK(fx_invariants(c));
    fkv_seq_free(b);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* FKV_EFULL leaves the sequence as it was and nothing else changes. */
static void efull_atomic(void)
{
    fkv_cache *c = open_cache(8, 1, "lru", FKV_STORAGE_PHANTOM);
    REQUIRE(c);
    fkv_seq *a = fx_seq(c, 1);
    REQUIRE(fkv_seq_append(a, NULL, 20, NULL) == FKV_OK); /* 5 pages */
    fkv_seq_pin(a);
    fkv_seq *b = fx_seq(c, 2);
    CHECK(fkv_seq_append(b, NULL, 16, NULL) == FKV_EFULL); /* needs 4, 3 free */
    CHECK(fkv_seq_len(b) == 0);
    CHECK(strstr(fkv_last_error(), "pages") != NULL);
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.free_pages == 3);
    CHECK(fkv_seq_append(b, NULL, 12, NULL) == FKV_OK);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* Unpinned chunks of an open sequence can be evicted: the hole is
 * reported, counted as missed on the next touch, and restored. */
static void holes_and_restore(void)
{
    fkv_cache *c = open_cache(8, 1, "fifo", FKV_STORAGE_PHANTOM);
    REQUIRE(c);
    fkv_seq *a = fx_seq(c, 1);
    REQUIRE(fkv_seq_append(a, NULL, 24, NULL) == FKV_OK); /* 6 pages, chunks 0-8,8-16,16-24 */
    fkv_seq *b = fx_seq(c, 2);
    fkv_seq_pin(b);
    REQUIRE(fkv_seq_append(b, NULL, 12, NULL) == FKV_OK); /* evicts a's oldest chunk */
    fkv_range r[4];
    size_t nr = 0;
    CHECK(fkv_seq_missing(a, r, 4, &nr) == FKV_OK);
    CHECK(nr == 1 && r[0].start == 0 && r[0].end == 8);
    uint32_t missing = 0;
    CHECK(fkv_seq_touch(a, &missing) == FKV_OK && missing == 8);
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(cn.miss_tokens[FKV_CLASS_SHORT] == 8 && cn.hit_tokens[FKV_CLASS_SHORT] == 16);
    fkv_seq_unpin(b);
    fkv_seq_free(b); /* its pages stay cached but are evictable */
    fkv_slot sl[8];
    fkv_fetch_info fi;
    CHECK(fkv_seq_fetch(a, 0, 24, FKV_FETCH_RECOMPUTE, sl, &fi) == FKV_OK && fi.recompute_tokens == 8);
    CHECK(fkv_seq_missing(a, r, 4, &nr) == FKV_OK && nr == 0);
    CHECK(fkv_seq_touch(a, &missing) == FKV_OK && missing == 0);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static void bad_arguments(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    char err[200];
    fkv_cache *c = NULL;
    cfg.chunk_tokens = 10; /* not a multiple of 16 */
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "chunk_tokens") && !c);
    fkv_config_default(&cfg);
    cfg.policy = "nope";
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "policy"));
    fkv_config_default(&cfg);
    cfg.policy = "belady";
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "next_use"));
    fkv_config_default(&cfg);
    cfg.temperature = 0;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "temperature"));
    fkv_config_default(&cfg);
    cfg.capacity_bytes = 10;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "capacity"));
    fkv_config_default(&cfg);
    cfg.dtype = FKV_INT8;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "dtype"));
    CHECK(fkv_cache_create(NULL, &c, err, sizeof err) == FKV_EINVAL);
    setenv("FAIRKV_ALPHA", "abc", 1);
    fkv_config_default(&cfg);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_EINVAL && strstr(err, "FAIRKV_ALPHA"));
    setenv("FAIRKV_ALPHA", "0.25", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_OK && cfg.alpha == 0.25);
    unsetenv("FAIRKV_ALPHA");

    c = open_cache(16, 1, "lru", FKV_STORAGE_PHANTOM);
    REQUIRE(c);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    fkv_seq *s = NULL;
    CHECK(fkv_seq_create(c, &p, &s) == FKV_EINVAL); /* request_id 0 */
    p.request_id = 5;
    p.weight = -1;
    CHECK(fkv_seq_create(c, &p, &s) == FKV_EINVAL && strstr(fkv_last_error(), "weight"));
    p.weight = 1;
    CHECK(fkv_seq_create(c, &p, &s) == FKV_OK);
    fkv_seq *dup = NULL;
    CHECK(fkv_seq_create(c, &p, &dup) == FKV_EINVAL && !dup); /* same id open */
    CHECK(fkv_seq_unpin(s) == FKV_ESTATE);
    CHECK(fkv_seq_append(NULL, NULL, 1, NULL) == FKV_EINVAL);
    CHECK(fkv_seq_fetch(s, 5, 2, FKV_FETCH_ALL, NULL, NULL) == FKV_EINVAL);
    uint32_t m;
    CHECK(fx_match(s, NULL, 4, 4, &m) == FKV_EINVAL); /* no tokens, no block ids */
    fkv_seq_append(s, NULL, 3, NULL);
    int32_t t[4] = {1, 2, 3, 4};
    CHECK(fx_match(s, t, 4, 4, &m) == FKV_ESTATE);
    void *kv = NULL;
    CHECK(fkv_cache_layer_storage(c, 0, &kv, &kv, &p.request_id) ==
          FKV_EUNSUPPORTED);
    CHECK(strcmp(fkv_strerror(FKV_EFULL), "cache full: nothing evictable") == 0);
    fkv_cache_destroy(c);
}

static void classes(void)
{
    fkv_cache *c = open_cache(64, 1, "lru", FKV_STORAGE_PHANTOM);
    REQUIRE(c);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    fkv_seq *s;
    uint32_t cases[][2] = {{127, FKV_CLASS_SHORT}, {128, FKV_CLASS_MEDIUM}, {512, FKV_CLASS_MEDIUM}, {513, FKV_CLASS_LONG}};
    for (int i = 0; i < 4; i++) {
        p.request_id = (uint64_t)i + 1;
        p.expected_tokens = cases[i][0];
        REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
        CHECK(fkv_seq_class(s) == (fkv_class)cases[i][1]);
        fkv_seq_free(s);
    }
    /* without a hint the class follows the length */
    p.expected_tokens = 0;
    p.request_id = 9;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    CHECK(fkv_seq_class(s) == FKV_CLASS_SHORT);
    fkv_seq_append(s, NULL, 200, NULL);
    CHECK(fkv_seq_class(s) == FKV_CLASS_MEDIUM);
    fkv_cache_destroy(c);
}

/* KV bytes per token: the seed's 175B figure (96 layers, 96 heads of 128,
 * fp16): 2*96*12288*2 = 4.7 MB. */
static void sizes(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 96;
    cfg.n_kv_heads = 96;
    cfg.head_dim = 128;
    CHECK(fkv_config_token_bytes(&cfg) == 4718592);
    CHECK(fabs(fkv_config_token_bytes(&cfg) * 2048.0 / 1e9 - 9.66) < 0.01);
}

/* The clock is read at most once per call, on first need: one time for
 * everything a call stamps, and none for calls that stamp nothing. */
static int clock_reads;
static int64_t counting_clock(void *ctx)
{
    (void)ctx;
    clock_reads++;
    return now;
}

static void clock_once_per_call(void)
{
    fkv_config cfg;
    fx_small_config(&cfg, 64);
    cfg.chunk_tokens = 16;
    cfg.clock.now_ns = counting_clock;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    fkv_seq *s = NULL;
    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = i + 1;
    clock_reads = 0;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    CHECK(clock_reads == 1); /* its creation time */
    now += 1000;
    clock_reads = 0;
    REQUIRE(fkv_seq_append(s, tok, 16, NULL) == FKV_OK); /* four pages, one new chunk */
    CHECK(clock_reads == 1);
    fkv__chunk *ch = (fkv__chunk *)s->table[0];
    CHECK(ch->m.create_ns == now && ch->m.last_access_ns == now);
    clock_reads = 0;
    REQUIRE(fkv_seq_append(s, tok + 16, 4, NULL) == FKV_OK); /* the first chunk is full... */
    CHECK(clock_reads == 1);                                   /* ...so a second one is stamped */
    clock_reads = 0;
    REQUIRE(fkv_seq_append(s, tok + 20, 4, NULL) == FKV_OK); /* into the open chunk: nothing stamped */
    CHECK(clock_reads == 0);
    clock_reads = 0;
    REQUIRE(fkv_seq_touch(s, NULL) == FKV_OK); /* two chunks stamped with one time */
    CHECK(clock_reads == 1);
    clock_reads = 0;
    fkv_seq_free(s);
    CHECK(clock_reads == 0);
    fkv_cache_destroy(c);
}

/* The evaluation settings (fairkv_eval.h): defaults 512 / 128 / 512;
 * class limits move the classes; bad values are refused at creation with
 * the field named; FAIRKV_BLOCK_TOKENS and the class variables reach them
 * through fkv_eval_config_from_env (fkv_config_from_env ignores them);
 * hash-id sequences need their ids. */
static int64_t far(void *ctx, const fkv_chunk_view *v, const fkv_chunk_info *in)
{
    (void)ctx;
    (void)v;
    (void)in;
    return INT64_MAX;
}

static void eval_settings(void)
{
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    CHECK(ev.block_tokens == 512 && ev.class_short_max == 128 && ev.class_medium_max == 512 && !ev.next_use);
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 4;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.capacity_pages = 64;
    cfg.storage = FKV_STORAGE_PHANTOM;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    char err[200];
    ev.class_short_max = 10;
    ev.class_medium_max = 20;
    REQUIRE(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_OK);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    fkv_seq *s;
    uint32_t cases[][2] = {{9, FKV_CLASS_SHORT}, {10, FKV_CLASS_MEDIUM}, {20, FKV_CLASS_MEDIUM}, {21, FKV_CLASS_LONG}};
    for (int i = 0; i < 4; i++) {
        p.request_id = (uint64_t)i + 1;
        p.expected_tokens = cases[i][0];
        REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
        CHECKF(fkv_seq_class(s) == (fkv_class)cases[i][1], "expected %u tokens", cases[i][0]);
        fkv_seq_free(s);
    }
    p.request_id = 9;
    CHECK(fkv_seq_create_blocks(c, &p, NULL, 2, &s) == FKV_EINVAL && !s &&
          strstr(fkv_last_error(), "block_ids") && strstr(fkv_last_error(), "n_block_ids=2"));
    fkv_cache_destroy(c);

    fkv_eval_config_default(&ev);
    ev.block_tokens = 6; /* not a multiple of page_tokens 4 */
    c = NULL;
    CHECK(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_EINVAL && !c && strstr(err, "block_tokens=6") &&
          strstr(fkv_last_error(), "block_tokens=6"));
    ev.block_tokens = 0;
    CHECK(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "block_tokens=0"));
    fkv_eval_config_default(&ev);
    ev.class_short_max = 600;
    CHECK(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "class_short_max=600"));
    fkv_eval_config_default(&ev);
    cfg.policy = "belady";
    CHECK(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "next_use"));
    CHECK(fkv_cache_create_eval(&cfg, NULL, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "next_use"));
    ev.next_use = far;
    REQUIRE(fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err) == FKV_OK);
    fkv_cache_destroy(c);
    cfg.policy = "lru";

    setenv("FAIRKV_BLOCK_TOKENS", "64", 1);
    setenv("FAIRKV_CLASS_SHORT_MAX", "7", 1);
    fkv_config plain;
    fkv_config_default(&plain);
    fkv_config plain_env = plain;
    CHECK(fkv_config_from_env(&plain_env, err, sizeof err) == FKV_OK && !memcmp(&plain, &plain_env, sizeof plain));
    fkv_eval_config_default(&ev);
    CHECK(fkv_eval_config_from_env(&ev, err, sizeof err) == FKV_OK && ev.block_tokens == 64 &&
          ev.class_short_max == 7 && ev.class_medium_max == 512);
    setenv("FAIRKV_CLASS_MEDIUM_MAX", "x1", 1);
    CHECK(fkv_eval_config_from_env(&ev, err, sizeof err) == FKV_EINVAL && strstr(err, "FAIRKV_CLASS_MEDIUM_MAX"));
    CHECK(fkv_eval_config_from_env(NULL, err, sizeof err) == FKV_EINVAL);
    unsetenv("FAIRKV_BLOCK_TOKENS");
    unsetenv("FAIRKV_CLASS_SHORT_MAX");
    unsetenv("FAIRKV_CLASS_MEDIUM_MAX");
}

int main(void)
{
    clock_once_per_call();
    no_external_fragmentation();
    append_slots();
    fork_cow();
    efull_atomic();
    holes_and_restore();
    bad_arguments();
    classes();
    eval_settings();
    sizes();
    return check_done();
}
