/* One call brings chunks back (fkv_seq_fetch) and one match reports per
 * tier (fkv_seq_match_prefix): fetch does what the three older calls did
 * (restore: pages to recompute; reload: the host tier's copy of an
 * offloaded chunk; promote: a chunk a tiered match attached from the host
 * tier), both sources in one call with one reservation, and says what came
 * from where; the deprecated names still work and agree with the new
 * calls; fkv_seq_count_preempt records a preemption and frees nothing. */
#include <string.h>

#include "check.h"
#include "fairkv.h"

#define LAYERS 2
#define DIM 4
#define PT 4                                               /* tokens a page */
#define CHUNK 8                                            /* tokens a chunk: 2 pages */
#define PAGE_BYTES (PT * LAYERS * DIM * sizeof(float) * 2) /* K and V: 256 */
#define CHUNK_BYTES (2 * PAGE_BYTES)
#define LEN 32 /* four chunks */

static int64_t now_ns;

static fkv_cache *open_cache(uint32_t pages, int demote)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = LAYERS;
    cfg.n_kv_heads = 1;
    cfg.head_dim = DIM;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = CHUNK;
    cfg.capacity_pages = pages;
    cfg.storage = FKV_STORAGE_CPU;
    cfg.policy = "lru";
    cfg.quotas = FKV_QUOTA_OFF;
    cfg.quant_hot_tokens = CHUNK; /* the last chunk stays: the first three may be reclaimed */
    cfg.host_capacity_bytes = 8 * CHUNK_BYTES;
    cfg.host_demote = demote;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now_ns;
    cfg.thread_safe = 0;
    fkv_cache *c = NULL;
    char err[256];
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    return c;
}

static float kv_value(uint32_t pos, uint32_t layer, uint32_t d)
{
    return (float)(pos * 131u + layer * 7u + d + 1u);
}

/* Writes every layer's K (and V = -K) of n tokens at positions from.. */
static void write_kv(fkv_cache *c, const fkv_slot *slots, uint32_t from, uint32_t n)
{
    for (uint32_t l = 0; l < LAYERS; l++) {
        void *k, *v;
        uint64_t stride;
        REQUIRE(fkv_cache_layer_storage(c, l, &k, &v, &stride) == FKV_OK);
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t d = 0; d < DIM; d++) {
                float *kp = (float *)((char *)k + slots[i].page * stride) + slots[i].slot * DIM + d;
                float *vp = (float *)((char *)v + slots[i].page * stride) + slots[i].slot * DIM + d;
                *kp = kv_value(from + i, l, d);
                *vp = -*kp;
            }
    }
}

/* Resident tokens of s that read back what write_kv wrote; -1 on a mismatch. */
static int verify_kv(fkv_cache *c, fkv_seq *s)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK);
    int seen = 0;
    for (uint32_t l = 0; l < LAYERS; l++) {
        void *k, *v;
        uint64_t stride;
        REQUIRE(fkv_cache_layer_storage(c, l, &k, &v, &stride) == FKV_OK);
        for (size_t i = 0; i < n; i++) {
            if (!ch[i]->resident) continue;
            for (uint32_t t = 0; t < ch[i]->n_tokens; t++) {
                uint32_t pos = ch[i]->start + t, page = ch[i]->pages[t / PT], slot = t % PT;
                for (uint32_t d = 0; d < DIM; d++) {
                    float kk = *((const float *)((const char *)k + page * stride) + slot * DIM + d);
                    float vv = *((const float *)((const char *)v + page * stride) + slot * DIM + d);
                    if (kk != kv_value(pos, l, d) || vv != -kk) return -1;
                }
                if (l == 0) seen++;
            }
        }
    }
    return seen;
}

static void fill(int32_t *tok, uint32_t n, int32_t base)
{
    for (uint32_t i = 0; i < n; i++) tok[i] = base + (int32_t)i;
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

/* A pinned sequence of LEN written tokens whose first chunk is offloaded
 * to the host tier and whose second is evicted (to recompute). */
static fkv_seq *mixed_seq(fkv_cache *c)
{
    int32_t tok[LEN];
    fill(tok, LEN, 100);
    fkv_seq *s = new_seq(c, 1);
    fkv_slot slots[LEN];
    REQUIRE(fkv_seq_append(s, tok, LEN, slots) == FKV_OK);
    write_kv(c, slots, 0, LEN);
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    uint32_t freed = 0;
    REQUIRE(fkv_seq_reclaim(s, FKV_RECLAIM_OFFLOAD, NULL, 2, &freed) == FKV_OK && freed == 2);
    REQUIRE(fkv_seq_reclaim(s, FKV_RECLAIM_EVICT, NULL, 2, &freed) == FKV_OK && freed == 2);
    const fkv_chunk_view *const *ch;
    size_t n;
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK && n == 4);
    REQUIRE(ch[0]->offloaded && !ch[0]->resident && !ch[1]->offloaded && !ch[1]->resident && ch[2]->resident);
    return s;
}

static void chunk_state(fkv_seq *s, int *res0, int *off0, int *res1)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK && n >= 2);
    *res0 = ch[0]->resident;
    *off0 = ch[0]->offloaded;
    *res1 = ch[1]->resident;
}

/* Each source alone leaves the other's chunk as it was; both in one call
 * bring both back, and the out-struct says which came from where. */
static void test_sources(void)
{
    int r0, o0, r1;
    /* recompute only: the evicted chunk gets pages and slots, the
     * offloaded one stays in the host tier */
    fkv_cache *c = open_cache(16, 0);
    fkv_seq *s = mixed_seq(c);
    fkv_slot slots[LEN];
    fkv_fetch_info fi;
    memset(&fi, 0xff, sizeof fi);
    REQUIRE(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_RECOMPUTE, slots, &fi) == FKV_OK);
    CHECKF(fi.recompute_tokens == CHUNK && fi.host_tokens == 0 && fi.host_bytes == 0, "recompute %u host %u",
           fi.recompute_tokens, fi.host_tokens);
    chunk_state(s, &r0, &o0, &r1);
    CHECK(!r0 && o0 && r1);
    const fkv_chunk_view *const *ch;
    size_t n;
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK);
    for (uint32_t t = 0; t < CHUNK; t++) /* slots name the chunk's new pages, in position order */
        CHECK(slots[t].page == ch[1]->pages[t / PT] && slots[t].slot == t % PT);
    write_kv(c, slots, CHUNK, CHUNK); /* the caller recomputes them */
    CHECK(verify_kv(c, s) == 3 * CHUNK);
    /* then host only: the offloaded chunk comes back with its bytes */
    REQUIRE(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_HOST, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == CHUNK && fi.host_bytes == CHUNK_BYTES && fi.recompute_tokens == 0);
    CHECKF(verify_kv(c, s) == LEN, "K/V after the host copy: %d tokens read back", verify_kv(c, s));
    size_t nr = 9;
    fkv_range rg[4];
    CHECK(fkv_seq_missing(s, rg, 4, &nr) == FKV_OK && nr == 0);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);

    /* host only first: the evicted chunk stays missing */
    c = open_cache(16, 0);
    s = mixed_seq(c);
    REQUIRE(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_HOST, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == CHUNK && fi.recompute_tokens == 0);
    chunk_state(s, &r0, &o0, &r1);
    CHECK(r0 && !o0 && !r1);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);

    /* both in one call */
    c = open_cache(16, 0);
    s = mixed_seq(c);
    REQUIRE(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_ALL, slots, &fi) == FKV_OK);
    CHECK(fi.host_tokens == CHUNK && fi.host_bytes == CHUNK_BYTES && fi.recompute_tokens == CHUNK);
    chunk_state(s, &r0, &o0, &r1);
    CHECK(r0 && !o0 && r1);
    REQUIRE(fkv_seq_chunks(s, &ch, &n) == FKV_OK);
    CHECK(slots[0].page == ch[1]->pages[0]); /* the slots are the recomputed chunk's only */
    write_kv(c, slots, CHUNK, CHUNK);
    CHECK(verify_kv(c, s) == LEN);
    /* a range outside both brings nothing */
    REQUIRE(fkv_seq_fetch(s, LEN, LEN, FKV_FETCH_ALL, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == 0 && fi.recompute_tokens == 0);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
}

/* One reservation covers both sources: when the pool cannot hold both,
 * nothing comes back, though either alone would fit. */
static void test_all_or_nothing(void)
{
    fkv_cache *c = open_cache(10, 0); /* s holds 4 pages, another 4: room for one chunk */
    fkv_seq *s = mixed_seq(c);
    fkv_seq *other = new_seq(c, 2); /* pinned, holds the rest of the pool */
    int32_t tok[16];
    fill(tok, 16, 900);
    REQUIRE(fkv_seq_append(other, tok, 16, NULL) == FKV_OK);
    REQUIRE(fkv_seq_pin(other) == FKV_OK);
    fkv_cache_info ci;
    REQUIRE(fkv_cache_get_info(c, &ci) == FKV_OK);
    CHECKF(ci.free_pages == 2, "free pages %u", ci.free_pages);
    fkv_fetch_info fi;
    memset(&fi, 0xff, sizeof fi);
    CHECK(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_ALL, NULL, &fi) == FKV_EFULL);
    CHECK(fi.host_tokens == 0 && fi.recompute_tokens == 0 && fi.host_bytes == 0);
    int r0, o0, r1;
    chunk_state(s, &r0, &o0, &r1);
    CHECK(!r0 && o0 && !r1);
    CHECK(fkv_seq_fetch(s, 0, LEN, FKV_FETCH_HOST, NULL, &fi) == FKV_OK && fi.host_tokens == CHUNK);
    CHECK(verify_kv(c, s) == 3 * CHUNK);
    fkv_seq_unpin(other);
    fkv_seq_free(other);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
}

/* A chunk demoted to the host tier: the device-only match stops before
 * it, the all-tiers match attaches it, and fetch copies it back (what
 * promote did). */
static void test_tiered_match_fetch(void)
{
    fkv_cache *c = open_cache(8, 1);
    int32_t a[24], b[16];
    fill(a, 24, 0);
    fill(b, 16, 500);
    fkv_seq *s = new_seq(c, 1);
    fkv_slot slots[24];
    REQUIRE(fkv_seq_append(s, a, 24, slots) == FKV_OK);
    write_kv(c, slots, 0, 24);
    fkv_seq_free(s); /* three cached chunks, 6 of 8 pages */
    now_ns += 1000;
    fkv_seq *sb = new_seq(c, 2);
    REQUIRE(fkv_seq_append(sb, b, 16, slots) == FKV_OK); /* a's last chunk goes to the host tier */
    REQUIRE(fkv_seq_pin(sb) == FKV_OK);

    fkv_seq *plain = new_seq(c, 3);
    fkv_match_info mi;
    memset(&mi, 0xff, sizeof mi);
    REQUIRE(fkv_seq_match_prefix(plain, a, 24, 24, FKV_MATCH_DEVICE_ONLY, &mi) == FKV_OK);
    CHECKF(mi.device_tokens == 16 && mi.host_tokens == 0 && mi.host_bytes == 0 && fkv_seq_len(plain) == 16,
           "device-only: device %u host %u", mi.device_tokens, mi.host_tokens);
    fkv_seq_free(plain);

    fkv_seq *t = new_seq(c, 4);
    REQUIRE(fkv_seq_match_prefix(t, a, 24, 24, FKV_MATCH_ALL_TIERS, &mi) == FKV_OK);
    CHECKF(mi.device_tokens == 16 && mi.host_tokens == 8 && mi.host_bytes == CHUNK_BYTES && fkv_seq_len(t) == 24,
           "all tiers: device %u host %u", mi.device_tokens, mi.host_tokens);
    REQUIRE(fkv_seq_pin(t) == FKV_OK);
    fkv_seq_unpin(sb);
    fkv_seq_free(sb); /* room for the promotion */
    fkv_fetch_info fi;
    REQUIRE(fkv_seq_fetch(t, 0, 24, FKV_FETCH_ALL, NULL, &fi) == FKV_OK);
    CHECK(fi.host_tokens == 8 && fi.host_bytes == mi.host_bytes && fi.recompute_tokens == 0);
    CHECKF(verify_kv(c, t) == 24, "promoted K/V: %d tokens read back", verify_kv(c, t));
    fkv_seq_unpin(t);
    fkv_seq_free(t);
    fkv_cache_destroy(c);
}

/* The deprecated names, one release: each does what its replacement does. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
static void test_deprecated_aliases(void)
{
    /* restore = fetch RECOMPUTE, reload = fetch HOST */
    fkv_cache *c = open_cache(16, 0);
    fkv_seq *s = mixed_seq(c);
    fkv_slot slots[LEN];
    uint32_t got = 99;
    CHECK(fkv_seq_restore(s, 0, LEN, slots, &got) == FKV_OK && got == CHUNK);
    int r0, o0, r1;
    chunk_state(s, &r0, &o0, &r1);
    CHECK(!r0 && o0 && r1);
    write_kv(c, slots, CHUNK, CHUNK);
    got = 99;
    CHECK(fkv_seq_reload(s, 0, LEN, &got) == FKV_OK && got == CHUNK);
    CHECK(verify_kv(c, s) == LEN);
    CHECK(fkv_seq_restore(s, 5, 2, NULL, NULL) == FKV_EINVAL && strstr(fkv_last_error(), "start=5 > end=2"));
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);

    /* promote = fetch HOST, with the bytes */
    c = open_cache(16, 0);
    s = mixed_seq(c);
    uint64_t bytes = 0;
    got = 0;
    CHECK(fkv_seq_promote(s, 0, LEN, &got, &bytes) == FKV_OK && got == CHUNK && bytes == CHUNK_BYTES);
    chunk_state(s, &r0, &o0, &r1);
    CHECK(r0 && !o0 && !r1);

    /* match = match_prefix DEVICE_ONLY; match_tiers = ALL_TIERS */
    int32_t tok[LEN];
    fill(tok, LEN, 100);
    fkv_seq *m1 = new_seq(c, 7);
    uint32_t m = 99;
    CHECK(fkv_seq_match(m1, tok, LEN, LEN - 1, &m) == FKV_OK && m == CHUNK); /* the evicted second chunk stops it */
    CHECK(fkv_seq_match(m1, tok, LEN, LEN - 1, NULL) == FKV_EINVAL);
    fkv_seq *m2 = new_seq(c, 8);
    fkv_match_info mi;
    CHECK(fkv_seq_match_tiers(m2, tok, LEN, LEN - 1, &mi) == FKV_OK && mi.device_tokens == CHUNK &&
          mi.host_tokens == 0);
    fkv_seq_free(m1);
    fkv_seq_free(m2);

    /* fkv_cache_last_error reads the thread's detail */
    CHECK(fkv_seq_fetch(s, 3, 1, FKV_FETCH_ALL, NULL, NULL) == FKV_EINVAL);
    CHECK(!strcmp(fkv_cache_last_error(c), fkv_last_error()) && strstr(fkv_cache_last_error(c), "start=3 > end=1"));

    /* reclaim PREEMPT = count_preempt */
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    uint64_t before = ti.reclaimed_pages[FKV_RECLAIM_PREEMPT], held = fkv_seq_pages(s);
    uint32_t freed = 99;
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_PREEMPT, NULL, 100, &freed) == FKV_OK && freed == 0);
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    CHECK(ti.reclaimed_pages[FKV_RECLAIM_PREEMPT] == before + held);
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* A preemption is recorded for the tenant, and nothing is freed. */
static void test_count_preempt(void)
{
    fkv_cache *c = open_cache(16, 0);
    int32_t tok[LEN];
    fill(tok, LEN, 100);
    fkv_seq *s = new_seq(c, 1);
    REQUIRE(fkv_seq_append(s, tok, LEN, NULL) == FKV_OK);
    fkv_cache_info before, after;
    REQUIRE(fkv_cache_get_info(c, &before) == FKV_OK);
    uint64_t pages = 0;
    CHECK(fkv_seq_count_preempt(s, &pages) == FKV_OK && pages == LEN / PT && pages == fkv_seq_pages(s));
    CHECK(fkv_seq_count_preempt(s, NULL) == FKV_OK);
    REQUIRE(fkv_cache_get_info(c, &after) == FKV_OK);
    CHECK(after.free_pages == before.free_pages);
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    CHECKF(ti.reclaimed_pages[FKV_RECLAIM_PREEMPT] == 2 * (LEN / PT), "preempt slot %llu",
           (unsigned long long)ti.reclaimed_pages[FKV_RECLAIM_PREEMPT]);
    CHECK(fkv_seq_count_preempt(NULL, &pages) == FKV_EINVAL && pages == 0 &&
          strstr(fkv_last_error(), "fkv_seq_count_preempt"));
    fkv_seq_free(s);
    fkv_cache_destroy(c);
}

int main(void)
{
    test_sources();
    test_all_or_nothing();
    test_tiered_match_fetch();
    test_deprecated_aliases();
    test_count_preempt();
    return check_done();
}
