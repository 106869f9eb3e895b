/* Prefix cache: token mode, hash-id mode, whole-chunk sharing, splits
 * where prefixes diverge, cached after free, off switch. */
#include <string.h>

#include "cache_fixture.h"

static int64_t now;

static fkv_cache *open_cache(int prefix, int dynamic)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.dynamic_chunking = dynamic;
    cfg.chunk_min_tokens = 8;
    cfg.chunk_max_tokens = 32;
    cfg.capacity_pages = 128;
    cfg.prefix_cache = prefix;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = 8;
    REQUIRE(fkv_cache_create_eval(&cfg, &ev, &c, NULL, 0) == FKV_OK);
    return c;
}

static void token_mode(void)
{
    fkv_cache *c = open_cache(1, 0);
    int32_t a[40], b[40];
    for (int i = 0; i < 40; i++) a[i] = b[i] = 1000 + i;
    b[33] = 7; /* diverges in page 8 (tokens 32..35) */
    fkv_seq *sa = fx_seq_full(c, 1, 0, 1.0, NULL, 0);
    uint32_t m = 99;
    CHECK(fx_match(sa, a, 40, 39, &m) == FKV_OK && m == 0);
    REQUIRE(fkv_seq_append(sa, a, 40, NULL) == FKV_OK);
    fkv_seq *sb = fx_seq_full(c, 2, 0, 1.0, NULL, 0);
    CHECK(fx_match(sb, b, 40, 39, &m) == FKV_OK && m == 32);
    const fkv_chunk_view *const *ca, *const *cb;
    size_t na, nb;
    fkv_seq_chunks(sa, &ca, &na);
    fkv_seq_chunks(sb, &cb, &nb);
    CHECK(nb == 4); /* four whole chunks of 8, shared as chunks */
    for (size_t i = 0; i < nb; i++) {
        fkv_chunk_info in;
        CHECK(cb[i] == ca[i] && fkv_seq_chunk_info(sa, i, &in) == FKV_OK && in.refs == 2 && in.access_count == 2);
    }
    REQUIRE(fkv_seq_append(sb, b + 32, 8, NULL) == FKV_OK);
    fkv_seq_chunks(sb, &cb, &nb);
    CHECK(nb == 5 && cb[4] != ca[4]);
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(cn.prefix_query_tokens == 80 && cn.prefix_hit_tokens == 32);
    /* a page equal in content but at another position does not match:
     * keys chain through the whole prefix */
    fkv_seq *sc = fx_seq_full(c, 3, 0, 1.0, NULL, 0);
    CHECK(fx_match(sc, a + 4, 36, 36, &m) == FKV_OK && m == 0);
    fkv_seq_free(sc);
    /* finished requests stay cached and are matched later */
    fkv_seq_free(sa);
    fkv_seq_free(sb);
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.n_chunks == 6 && info.free_pages == 128 - 12);
    fkv_seq *sd = fx_seq_full(c, 4, 0, 1.0, NULL, 0);
    CHECK(fx_match(sd, b, 40, 40, &m) == FKV_OK && m == 40);
    /* max_tokens is honoured, page aligned */
    fkv_seq *se = fx_seq_full(c, 5, 0, 1.0, NULL, 0);
    CHECK(fx_match(se, b, 40, 39, &m) == FKV_OK && m == 36);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static void prefix_off(void)
{
    fkv_cache *c = open_cache(0, 0);
    int32_t a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    fkv_seq *sa = fx_seq_full(c, 1, 0, 1.0, NULL, 0);
    REQUIRE(fkv_seq_append(sa, a, 16, NULL) == FKV_OK);
    fkv_seq *sb = fx_seq_full(c, 2, 0, 1.0, NULL, 0);
    uint32_t m = 9;
    CHECK(fx_match(sb, a, 16, 16, &m) == FKV_OK && m == 0);
    fkv_seq_free(sa);
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.free_pages == 128 && info.n_chunks == 0); /* nothing kept */
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

static void hash_id_mode(void)
{
    fkv_cache *c = open_cache(1, 0);
    uint64_t ia[3] = {11, 12, 13}, ib[3] = {11, 12, 99}, ic[2] = {12, 13};
    fkv_seq *sa = fx_seq_full(c, 1, 0, 1.0, ia, 3);
    uint32_t m = 5;
    CHECK(fx_match(sa, NULL, 24, 24, &m) == FKV_OK && m == 0);
    REQUIRE(fkv_seq_append(sa, NULL, 30, NULL) == FKV_OK); /* 24 hashed + 6 past the ids */
    fkv_seq *sb = fx_seq_full(c, 2, 0, 1.0, ib, 3);
    CHECK(fx_match(sb, NULL, 24, 24, &m) == FKV_OK && m == 16);
    fkv_seq *sc = fx_seq_full(c, 3, 0, 1.0, ic, 2); /* same ids at other positions: no match */
    CHECK(fx_match(sc, NULL, 16, 16, &m) == FKV_OK && m == 0);
    fkv_seq_free(sa);
    fkv_seq *sd = fx_seq_full(c, 4, 0, 1.0, ia, 3);
    CHECK(fx_match(sd, NULL, 24, 23, &m) == FKV_OK && m == 20);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* Dynamic chunking: sizes follow the rule, and a divergence inside a
 * chunk splits it so the common head is shared as one chunk. */
static void dynamic_split(void)
{
    fkv_cache *c = open_cache(1, 1);
    CHECK(fkv__chunk_target(c, 0) == 8 && fkv__chunk_target(c, 32) == 8 && fkv__chunk_target(c, 64) == 16 &&
          fkv__chunk_target(c, 128) == 32 && fkv__chunk_target(c, 4096) == 32);
    int32_t a[96], b[96];
    for (int i = 0; i < 96; i++) a[i] = b[i] = i + 1;
    b[70] = -1; /* diverges in page 17 (tokens 68..71), inside the chunk 64..80 */
    fkv_seq *sa = fx_seq_full(c, 1, 0, 1.0, NULL, 0);
    REQUIRE(fkv_seq_append(sa, a, 96, NULL) == FKV_OK);
    const fkv_chunk_view *const *ca;
    size_t na;
    fkv_seq_chunks(sa, &ca, &na);
    /* 0..64 in chunks of 8, then 64..80 and 80..96 of 16 */
    CHECK(na == 10 && ca[8]->start == 64 && ca[8]->cap_tokens == 16 && ca[9]->start == 80);
    fkv_seq *sb = fx_seq_full(c, 2, 0, 1.0, NULL, 0);
    uint32_t m;
    CHECK(fx_match(sb, b, 96, 95, &m) == FKV_OK && m == 68);
    fkv_seq_chunks(sa, &ca, &na);
    CHECK(na == 11); /* 64..68 split from 68..80 */
    fkv_chunk_info i8, i9;
    REQUIRE(fkv_seq_chunk_info(sa, 8, &i8) == FKV_OK && fkv_seq_chunk_info(sa, 9, &i9) == FKV_OK);
    CHECK(ca[8]->start == 64 && ca[8]->n_tokens == 4 && i8.refs == 2);
    CHECK(ca[9]->start == 68 && ca[9]->n_tokens == 12 && i9.refs == 1 && i9.owner == 1);
    const fkv_chunk_view *const *cb;
    size_t nb;
    fkv_seq_chunks(sb, &cb, &nb);
    CHECK(nb == 9 && cb[8] == ca[8]);
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(c->stats.fairkv_chunk_splits_total[0] == 1);
    CHECK(fx_invariants(c));
    /* fixed chunking: the same divergence shares the pages, not the chunk */
    fkv_cache *f = open_cache(1, 0);
    fkv_seq *fa = fx_seq_full(f, 1, 0, 1.0, NULL, 0);
    REQUIRE(fkv_seq_append(fa, a, 96, NULL) == FKV_OK);
    fkv_seq *fb = fx_seq_full(f, 2, 0, 1.0, NULL, 0);
    CHECK(fx_match(fb, b, 96, 95, &m) == FKV_OK && m == 68);
    fkv_seq_chunks(fb, &cb, &nb);
    fkv_seq_chunks(fa, &ca, &na);
    CHECK(na == 12 && nb == 9 && cb[8] != ca[8] && cb[8]->pages[0] == ca[8]->pages[0] && cb[8]->n_tokens == 4);
    CHECK(f->page_ref[ca[8]->pages[0]] == 2 && f->page_ref[ca[8]->pages[1]] == 1);
    CHECK(fx_invariants(f));
    fkv_cache_destroy(f);
    fkv_cache_destroy(c);
}

/* A page's key chains through the page before it: with [X, W] and [Z, Y]
 * cached, the prompt [X, Y] matches X only (Y's K/V were computed after Z,
 * not after X).  Pages of 16 tokens take the hash's fixed-length path,
 * pages of 4 the general one. */
static void key_chain(uint32_t page_tokens)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = page_tokens;
    cfg.chunk_tokens = 2 * page_tokens;
    cfg.capacity_pages = 64;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    uint32_t pt = page_tokens;
    int32_t xw[32], zy[32], xy[33];
    for (uint32_t i = 0; i < pt; i++) {
        xw[i] = xy[i] = 100 + (int32_t)i;      /* X */
        xw[pt + i] = 200 + (int32_t)i;         /* W */
        zy[i] = 300 + (int32_t)i;              /* Z */
        zy[pt + i] = xy[pt + i] = 400 + (int32_t)i; /* Y */
    }
    xy[2 * pt] = 5;
    fkv_seq *a = fx_seq(c, 1), *b = fx_seq(c, 2);
    REQUIRE(fkv_seq_append(a, xw, 2 * pt, NULL) == FKV_OK);
    REQUIRE(fkv_seq_append(b, zy, 2 * pt, NULL) == FKV_OK);
    fkv_seq_free(a);
    fkv_seq_free(b);
    fkv_seq *q = fx_seq(c, 3);
    uint32_t m = 99;
    CHECK(fx_match(q, xy, 2 * pt + 1, 2 * pt, &m) == FKV_OK);
    CHECKF(m == pt, "%u-token pages: [X, Y] matched %u tokens, want %u (X only)", pt, m, pt);
    fkv_seq_free(q);
    /* and the whole of a cached prompt still matches */
    q = fx_seq(c, 4);
    CHECK(fx_match(q, zy, 2 * pt, 2 * pt, &m) == FKV_OK && m == 2 * pt);
    fkv_seq_free(q);
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

int main(void)
{
    key_chain(16);
    key_chain(4);
    token_mode();
    prefix_off();
    hash_id_mode();
    dynamic_split();
    return check_done();
}
