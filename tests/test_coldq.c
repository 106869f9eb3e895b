/* Cold-chunk quantization inside the cache: which chunks, when, what it
 * frees, that the data survives within the codec's bound, shared chunks
 * once, pressure before eviction; and sparsity drops. */
#include <math.h>
#include <string.h>

#include "cache_fixture.h"
#include "fairkv_quant.h"

static int64_t now;

static uint64_t host_bytes; /* host tier of the next cache */
static uint32_t warm_tokens; /* quant_warm_tokens of the next cache (the ladder) */
static fkv_dtype base_dtype = FKV_F16; /* the next cache's base precision */
static uint32_t chunk_tokens = 64, hot_tokens = 128; /* and its chunk size and hot window */

static fkv_cache *open_cache(fkv_quant_mode mode, fkv_dtype qd, uint32_t pages, fkv_storage_kind storage)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 2;
    cfg.n_kv_heads = 2;
    cfg.head_dim = 64;
    cfg.dtype = base_dtype;
    cfg.page_tokens = 16;
    cfg.chunk_tokens = chunk_tokens;
    cfg.capacity_pages = pages;
    cfg.storage = storage;
    cfg.policy = "lru";
    cfg.quotas = 0;
    cfg.quant_mode = mode;
    cfg.quant_dtype = qd;
    cfg.quant_hot_tokens = hot_tokens;
    cfg.quant_pressure = 0.75;
    cfg.host_capacity_bytes = host_bytes;
    cfg.quant_warm_tokens = warm_tokens;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    char err[200];
    if (fkv_cache_create(&cfg, &c, err, sizeof err)) fprintf(stderr, "create: %s\n", err);
    return c;
}

static uint64_t rng = 12345;
static float gauss(void)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u += (double)(rng >> 11) / 9007199254740992.0;
    }
    return (float)(u - 6);
}

/* reference copy of what was written: [pos][layer][k/v][head*dim] */
#define MAXT 512
#define ROW (2 * 64)
static float ref[MAXT][2][2][ROW];

static void append_real(fkv_cache *c, fkv_seq *s, const int32_t *tok, uint32_t n)
{
    fkv_slot sl[MAXT];
    uint32_t from = fkv_seq_len(s);
    REQUIRE(fkv_seq_append(s, tok, n, sl) == FKV_OK);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t l = 0; l < 2; l++) {
            void *k, *v;
            uint64_t stride;
            fkv_cache_layer_storage(c, l, &k, &v, &stride);
            uint16_t *kp = (uint16_t *)((char *)k + sl[i].page * stride) + sl[i].slot * ROW;
            uint16_t *vp = (uint16_t *)((char *)v + sl[i].page * stride) + sl[i].slot * ROW;
            for (int e = 0; e < ROW; e++) {
                /* keys with two outlier channels, as real keys have */
                float kx = gauss() * ((e % 64 == 3 || e % 64 == 40) ? 20.0f : 1.0f), vx = gauss();
                kp[e] = fkv_f32_to_f16(kx);
                vp[e] = fkv_f32_to_f16(vx);
                ref[from + i][l][0][e] = fkv_f16_to_f32(kp[e]);
                ref[from + i][l][1][e] = fkv_f16_to_f32(vp[e]);
            }
        }
}

/* Decodes a quantized chunk into a private copy and compares with ref by
 * normalized MSE per layer and K/V. */
static double chunk_nmse(fkv_cache *c, const fkv_chunk_view *v)
{
    fkv_kv_geom g = {2, 2, 64, 16, FKV_F16, 0, 8};
    uint64_t pb = fkv_kv_page_bytes(&g);
    static uint8_t kbuf[2][8 * 16 * ROW * 2], vbuf[2][8 * 16 * ROW * 2];
    fkv_kv_layer layers[2];
    for (uint32_t l = 0; l < 2; l++) {
        void *k, *vv;
        uint64_t stride;
        fkv_cache_layer_storage(c, l, &k, &vv, &stride);
        for (uint32_t j = 0; j < v->n_pages; j++) {
            memcpy(kbuf[l] + j * pb, (char *)k + v->pages[j] * stride, pb);
            memcpy(vbuf[l] + j * pb, (char *)vv + v->pages[j] * stride, pb);
        }
        layers[l] = (fkv_kv_layer){kbuf[l], vbuf[l]};
    }
    uint32_t src[8] = {0, 1, 2, 3, 4, 5, 6, 7}, nd = fkv_quant_pages_needed(&g, FKV_F16, v->n_tokens);
    char err[160];
    REQUIRE(fkv_dequant_chunk(&g, layers, v->n_tokens, v->dtype, src, v->n_pages, v->qmeta,
                              fkv_quant_meta_bytes(&g, v->dtype, v->n_tokens), src, nd, err, sizeof err) == FKV_OK);
    double worst = 0;
    for (uint32_t l = 0; l < 2; l++)
        for (int kv = 0; kv < 2; kv++) {
            double num = 0, den = 0;
            for (uint32_t t = 0; t < v->n_tokens; t++)
                for (int e = 0; e < ROW; e++) {
                    const uint16_t *h = (const uint16_t *)((kv ? vbuf[l] : kbuf[l]) + (t / 16) * pb) + (t % 16) * ROW;
                    double a = ref[v->start + t][l][kv][e], b = fkv_f16_to_f32(h[e]);
                    num += (a - b) * (a - b);
                    den += a * a;
                }
            if (num / den > worst) worst = num / den;
        }
    return worst;
}

static void always_mode(fkv_dtype qd, double bound)
{
    fkv_cache *c = open_cache(FKV_QUANT_ALWAYS, qd, 64, FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq *s = fx_seq(c, 1);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = i;
    for (int k = 0; k < 8; k++) append_real(c, s, tok + k * 64, 64);
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    REQUIRE(n == 8);
    uint32_t pages = 0;
    for (size_t i = 0; i < n; i++) {
        /* chunks ending at or before 512 - 128 are cold */
        int cold = ch[i]->start + 64 <= 384;
        CHECKF(ch[i]->dtype == (cold ? qd : FKV_F16), "chunk %zu is %s", i, fkv_dtype_name(ch[i]->dtype));
        CHECK(cold == (ch[i]->qmeta != NULL));
        pages += ch[i]->n_pages;
        if (cold) {
            double e = chunk_nmse(c, ch[i]);
            CHECKF(e <= bound, "chunk %zu %s NMSE %g > %g", i, fkv_dtype_name(qd), e, bound);
        }
    }
    uint32_t per = qd == FKV_INT4 ? 1 : 2; /* pages per 64 int8/fp8/int4 tokens with an fp16 base */
    CHECK(pages == 6 * per + 2 * 4);
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.free_pages == 64 - pages);
    /* memory: quantized bytes (pages + scales) over the same tokens at fp16 */
    char buf[8192];
    size_t len;
    fkv_cache_metrics_json(c, buf, sizeof buf, &len);
    const char *p = strstr(buf, "\"fairkv_bytes\":");
    REQUIRE(p);
    char key[16];
    snprintf(key, sizeof key, "\"%s\":", fkv_dtype_name(qd));
    REQUIRE(strstr(p, key));
    double qbytes = atof(strstr(p, key) + strlen(key));
    double fp16_of_cold = 6.0 * 4 * (double)info.page_bytes;
    double ratio = qbytes / fp16_of_cold;
    printf("%s: cold chunks take %.3f of their fp16 bytes (scales included)\n", fkv_dtype_name(qd), ratio);
    CHECK(ratio <= (qd == FKV_INT8 ? 0.55 : qd == FKV_FP8 ? 0.51 : 0.30));
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_cache_destroy(c);
}

/* The precision ladder: 128 hot tokens in fp16, then 128 warm tokens in
 * int8 (or fp8), older chunks int4 re-encoded from their int8 (fp8)
 * values; and a ladder from int4 is refused. */
static void ladder_mode(fkv_dtype warm)
{
    warm_tokens = 128;
    fkv_cache *c = open_cache(FKV_QUANT_ALWAYS, warm, 64, FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq *s = fx_seq(c, 1);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = i;
    for (int k = 0; k < 8; k++) append_real(c, s, tok + k * 64, 64);
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    REQUIRE(n == 8);
    uint32_t pages = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t end = ch[i]->start + 64; /* 512 tokens: cold up to 256, warm up to 384 */
        fkv_dtype want = end <= 256 ? FKV_INT4 : end <= 384 ? warm : FKV_F16;
        CHECKF(ch[i]->dtype == want, "chunk %zu is %s, not %s", i, fkv_dtype_name(ch[i]->dtype), fkv_dtype_name(want));
        pages += ch[i]->n_pages;
        if (want != FKV_F16) {
            double e = chunk_nmse(c, ch[i]);
            CHECKF(e <= (want == FKV_INT4 ? 3e-2 : want == FKV_FP8 ? 2e-3 : 1e-3), "chunk %zu NMSE %g", i, e);
        }
    }
    CHECK(pages == 4 * 1 + 2 * 2 + 2 * 4);
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
    c = open_cache(FKV_QUANT_ALWAYS, FKV_INT4, 64, FKV_STORAGE_CPU);
    CHECK(c == NULL && strstr(fkv_last_error(), "quant_warm_tokens"));
    warm_tokens = 0;
}

/* A shared prefix chunk is one object: quantized once, for every holder. */
static void shared_once(void)
{
    fkv_cache *c = open_cache(FKV_QUANT_ALWAYS, FKV_INT8, 64, FKV_STORAGE_CPU);
    fkv_seq *a = fx_seq(c, 1);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = 7 * i;
    append_real(c, a, tok, 256);
    fkv_seq_free(a); /* ended: all four full chunks are cold and quantized */
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(c->stats.fairkv_quantized_chunks_total[0] == 4);
    CHECK(cn.pages_used == 8);
    fkv_seq *b = fx_seq(c, 2), *d = fx_seq(c, 3);
    uint32_t m1, m2;
    CHECK(fx_match(b, tok, 300, 299, &m1) == FKV_OK && m1 == 256);
    CHECK(fx_match(d, tok, 200, 199, &m2) == FKV_OK && m2 == 192); /* whole chunks only */
    const fkv_chunk_view *const *cb, *const *cd;
    size_t nb, nd;
    fkv_seq_chunks(b, &cb, &nb);
    fkv_seq_chunks(d, &cd, &nd);
    CHECK(nb == 4 && nd == 3 && cb[0] == cd[0] && cb[0]->dtype == FKV_INT8);
    fkv_chunk_info ib;
    CHECK(fkv_seq_chunk_info(b, 0, &ib) == FKV_OK && ib.refs == 2);
    fkv_cache_counters(c, &cn);
    CHECK(cn.pages_used == 8 && c->stats.fairkv_quantized_chunks_total[0] == 4);
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_cache_destroy(c);
}

/* A cache full of int4 chunks keeps every one findable.  The prefix index
 * holds one entry per logical page, and an int4 chunk of a 16-bit base
 * keeps 4 logical pages in one stored page (8 of a 32-bit base): 12
 * ended 256-token prompts (48 stored pages of 64, 192 logical pages, 12
 * with an f32 base: 384) must each match whole, with no key left out.
 * With the index sized by stored pages, it filled after 4 prompts and the
 * later ones could never be matched. */
static void index_of_quantized(fkv_dtype base)
{
    base_dtype = base;
    chunk_tokens = base == FKV_F32 ? 128 : 64; /* one stored int4 page a chunk */
    hot_tokens = 0;
    fkv_cache *c = open_cache(FKV_QUANT_ALWAYS, FKV_INT4, base == FKV_F32 ? 128 : 64, FKV_STORAGE_PHANTOM);
    base_dtype = FKV_F16;
    chunk_tokens = 64;
    hot_tokens = 128;
    REQUIRE(c);
    enum { N = 12, LEN = 256 };
    static int32_t tok[N][LEN + 44];
    for (int p = 0; p < N; p++) {
        for (int i = 0; i < LEN + 44; i++) tok[p][i] = 1000 * (p + 1) + i;
        fkv_seq *s = fx_seq(c, (uint64_t)p + 1);
        REQUIRE(fkv_seq_append(s, tok[p], LEN, NULL) == FKV_OK);
        fkv_seq_free(s); /* ended: its chunks are cold and quantized */
    }
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    uint32_t per_page = base == FKV_F32 ? 8 : 4;
    CHECKF(cn.pages_used == N * LEN / 16 / per_page, "%u stored pages used", (unsigned)cn.pages_used);
    CHECK(c->stats.fairkv_prefix_index_full_total[0] == 0);
    int whole = 0;
    for (int p = 0; p < N; p++) {
        fkv_seq *s = fx_seq(c, 100 + (uint64_t)p);
        uint32_t m = 0;
        REQUIRE(fx_match(s, tok[p], LEN + 44, LEN + 43, &m) == FKV_OK);
        whole += m == LEN;
        fkv_seq_free(s);
    }
    CHECKF(whole == N, "%s base: %d of %d int4 prompts matched whole", base == FKV_F32 ? "f32" : "f16", whole, N);
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_cache_destroy(c);
}

/* Under pressure: cold chunks are quantized before anything is evicted. */
static void pressure_mode(void)
{
    fkv_cache *c = open_cache(FKV_QUANT_UNDER_PRESSURE, FKV_INT8, 64, FKV_STORAGE_PHANTOM);
    fkv_seq *a = fx_seq(c, 1);
    REQUIRE(fkv_seq_append(a, NULL, 512, NULL) == FKV_OK); /* 32 pages: half the pool, below 0.75 */
    CHECK(c->stats.fairkv_quantized_chunks_total[1] == 0);
    fkv_seq *b = fx_seq(c, 2);
    REQUIRE(fkv_seq_append(b, NULL, 512, NULL) == FKV_OK); /* would be 64: quantize first */
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    /* the candidates at that moment: a's 6 cold chunks (b's become cold
     * only as it grows); 6 x (4 -> 2) pages freed: 20 + 32 used */
    CHECK(c->stats.fairkv_quantized_chunks_total[1] == 6);
    CHECK(cn.evicted_pages == 0);
    CHECK(cn.pages_used == 52);
    /* keep appending: once no cold chunk is left, eviction takes over */
    fkv_seq *d = fx_seq(c, 3);
    REQUIRE(fkv_seq_append(d, NULL, 512, NULL) == FKV_OK);
    fkv_seq *e = fx_seq(c, 4);
    REQUIRE(fkv_seq_append(e, NULL, 512, NULL) == FKV_OK);
    fkv_cache_counters(c, &cn);
    CHECK(cn.evicted_pages > 0);
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_cache_destroy(c);
}

/* Sparsity: dropped chunks free their pages and are neither missing nor read. */
static void drops(void)
{
    fkv_cache *c = open_cache(FKV_QUANT_OFF, FKV_INT8, 64, FKV_STORAGE_PHANTOM);
    fkv_seq *s = fx_seq(c, 1);
    REQUIRE(fkv_seq_append(s, NULL, 320, NULL) == FKV_OK); /* 5 chunks, 20 pages */
    fkv_seq_pin(s);
    uint32_t n = 0;
    CHECK(fkv_seq_drop(s, 64, 256, &n) == FKV_OK && n == 192); /* keep the sink chunk and the recent one */
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    CHECK(info.free_pages == 64 - 8);
    uint32_t missing = 9;
    CHECK(fkv_seq_touch(s, &missing) == FKV_OK && missing == 0);
    fkv_range r[4];
    size_t nr;
    CHECK(fkv_seq_missing(s, r, 4, &nr) == FKV_OK && nr == 0);
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    CHECK(cn.hit_tokens[FKV_CLASS_SHORT] + cn.hit_tokens[FKV_CLASS_MEDIUM] == 128);
    char msg[256];
    CHECKF(!fkv__cache_check(c, msg, sizeof msg), "%s", msg);
    fkv_seq_unpin(s);
    fkv_cache_destroy(c);
}

static void bad_config(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.quant_mode = FKV_QUANT_ALWAYS;
    cfg.quant_dtype = FKV_F16;
    fkv_cache *c;
    char err[200];
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "quant_dtype"));
    cfg.quant_dtype = FKV_FP8;
    cfg.quant_pressure = 1.5; /* fp8 is a quant_dtype: the next field is the one named */
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "quant_pressure"));
    setenv("FAIRKV_QUANT_DTYPE", "fp8", 1);
    fkv_config_default(&cfg);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_OK && cfg.quant_dtype == FKV_FP8);
    setenv("FAIRKV_QUANT_DTYPE", "fp4", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_EINVAL && strstr(err, "FAIRKV_QUANT_DTYPE"));
    unsetenv("FAIRKV_QUANT_DTYPE");
    cfg.quant_mode = FKV_QUANT_ALWAYS;
    cfg.quant_dtype = FKV_INT4;
    cfg.quant_pressure = 1.5;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && strstr(err, "quant_pressure"));
    setenv("FAIRKV_QUANT_MODE", "sometimes", 1);
    fkv_config_default(&cfg);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_EINVAL && strstr(err, "FAIRKV_QUANT_MODE"));
    setenv("FAIRKV_QUANT_MODE", "under-pressure", 1);
    CHECK(fkv_config_from_env(&cfg, err, sizeof err) == FKV_OK && cfg.quant_mode == FKV_QUANT_UNDER_PRESSURE);
    unsetenv("FAIRKV_QUANT_MODE");
}

/* The bytes of token pos, layer l, as stored now (an fp16 chunk). */
static int same_as_ref(fkv_cache *c, fkv_seq *s, uint32_t pos)
{
    fkv_slot sl;
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    if (fkv_chunks_locate(ch, n, 16, pos, &sl)) return 0;
    for (uint32_t l = 0; l < 2; l++) {
        void *k, *v;
        uint64_t stride;
        fkv_cache_layer_storage(c, l, &k, &v, &stride);
        const uint16_t *kp = (const uint16_t *)((char *)k + sl.page * stride) + sl.slot * ROW;
        const uint16_t *vp = (const uint16_t *)((char *)v + sl.page * stride) + sl.slot * ROW;
        for (int e = 0; e < ROW; e++)
            if (fkv_f16_to_f32(kp[e]) != ref[pos][l][0][e] || fkv_f16_to_f32(vp[e]) != ref[pos][l][1][e]) return 0;
    }
    return 1;
}

/* Fair reclaim from a running (pinned) request, in the reclaim order:
 * int8 of its oldest cold chunks, then int4, drop outside a window, evict;
 * the hot end keeps its bytes, the quantized chunks decode within the
 * codec's bound, dropped ones are gone and evicted ones missing; each
 * action's pages are counted for the tenant; a chunk another pinned
 * sequence shares is never touched. */
static void reclaim_running(void)
{
    fkv_cache *c = open_cache(FKV_QUANT_OFF, FKV_INT8, 64, FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    p.tenant = 7;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = 3 * i + 1;
    for (int k = 0; k < 8; k++) append_real(c, s, tok + k * 64, 64); /* 8 chunks of 4 pages: the pool is full */
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    const fkv_chunk_view *const *ch;
    size_t n;
    uint32_t freed = 0;
    /* 3 pages wanted: int8 halves a chunk, so two chunks go, oldest first */
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_QUANTIZE8, NULL, 3, &freed) == FKV_OK && freed == 4);
    fkv_seq_chunks(s, &ch, &n);
    for (size_t i = 0; i < n; i++) CHECKF(ch[i]->dtype == (i < 2 ? FKV_INT8 : FKV_F16), "chunk %zu: %s", i, fkv_dtype_name(ch[i]->dtype));
    for (size_t i = 0; i < 2; i++) CHECKF(chunk_nmse(c, ch[i]) <= 1e-3, "chunk %zu NMSE %g", i, chunk_nmse(c, ch[i]));
    /* int4 takes the int8 chunks (2 pages -> 1) and the remaining cold fp16
     * ones (2..5, 4 -> 1; 128 tokens stay hot) */
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_QUANTIZE4, NULL, 100, &freed) == FKV_OK && freed == 2 + 12);
    fkv_seq_chunks(s, &ch, &n);
    for (size_t i = 0; i < 6; i++) {
        CHECKF(ch[i]->dtype == FKV_INT4, "chunk %zu: %s", i, fkv_dtype_name(ch[i]->dtype));
        CHECKF(chunk_nmse(c, ch[i]) <= 3e-2, "chunk %zu NMSE %g", i, chunk_nmse(c, ch[i]));
    }
    for (uint32_t pos = 384; pos < 512; pos++) CHECKF(same_as_ref(c, s, pos), "hot token %u changed", pos);
    /* drop what lies wholly inside [sink 64, len - window 128) */
    fkv_reclaim_args w = {64, 128};
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_DROP, &w, 100, &freed) == FKV_OK && freed == 5);
    fkv_seq_chunks(s, &ch, &n);
    for (size_t i = 0; i < n; i++) CHECKF(ch[i]->dropped == (i >= 1 && i < 6), "chunk %zu dropped=%d", i, ch[i]->dropped);
    /* evict: the sink chunk goes and is the one missing range */
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_EVICT, NULL, 100, &freed) == FKV_OK && freed == 1);
    fkv_range r[4];
    size_t nr = 0;
    CHECK(fkv_seq_missing(s, r, 4, &nr) == FKV_OK && nr == 1 && r[0].start == 0 && r[0].end == 64);
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_PREEMPT, NULL, 100, &freed) == FKV_OK && freed == 0);
    for (uint32_t pos = 384; pos < 512; pos++) CHECKF(same_as_ref(c, s, pos), "hot token %u changed", pos);
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 7, &ti) == FKV_OK);
    CHECK(ti.reclaimed_pages[FKV_RECLAIM_QUANTIZE8] == 4 && ti.reclaimed_pages[FKV_RECLAIM_QUANTIZE4] == 14);
    CHECK(ti.reclaimed_pages[FKV_RECLAIM_DROP] == 5 && ti.reclaimed_pages[FKV_RECLAIM_EVICT] == 1);
    CHECKF(ti.reclaimed_pages[FKV_RECLAIM_PREEMPT] == 8 && ti.pages == 8, "preempt %llu, pages %llu",
           (unsigned long long)ti.reclaimed_pages[FKV_RECLAIM_PREEMPT], (unsigned long long)ti.pages);
    CHECK(fx_invariants(c));
    fkv_seq_unpin(s);
    fkv_seq_free(s);

    /* shared with a pinned fork: every action leaves it */
    s = fx_seq(c, 2);
    for (int k = 0; k < 6; k++) append_real(c, s, tok + k * 64, 64);
    fkv_seq_params_default(&p);
    p.request_id = 3;
    fkv_seq *f = NULL;
    REQUIRE(fkv_seq_fork(s, &p, &f) == FKV_OK && fkv_seq_pin(f) == FKV_OK);
    for (int a = 0; a < FKV_N_RECLAIM; a++) {
        if (a == FKV_RECLAIM_PREEMPT) continue;
        CHECK(fkv_seq_reclaim(s, (fkv_reclaim_action)a, &w, 100, &freed) == FKV_OK);
        CHECKF(freed == 0, "%s freed %u pages of chunks a pinned fork holds", fkv_reclaim_name((fkv_reclaim_action)a), freed);
    }
    CHECK(fkv_seq_reclaim(s, (fkv_reclaim_action)9, NULL, 1, &freed) == FKV_EINVAL);
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_DROP, NULL, 1, &freed) == FKV_EINVAL && strstr(fkv_last_error(), "drop"));
    CHECK(fx_invariants(c));
    fkv_cache_destroy(c);
}

/* Fair reclaim's quantize4 takes fp8 chunks (quant_dtype fp8) to int4,
 * re-encoded from their decoded values, as it does int8 ones. */
static void reclaim_fp8(void)
{
    fkv_cache *c = open_cache(FKV_QUANT_ALWAYS, FKV_FP8, 64, FKV_STORAGE_CPU);
    REQUIRE(c);
    fkv_seq *s = fx_seq(c, 1);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = 5 * i + 2;
    for (int k = 0; k < 8; k++) append_real(c, s, tok + k * 64, 64);
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    for (size_t i = 0; i < n; i++) CHECK(ch[i]->dtype == (i < 6 ? FKV_FP8 : FKV_F16));
    uint32_t freed = 0;
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_QUANTIZE4, NULL, 100, &freed) == FKV_OK && freed == 6); /* 2 pages -> 1 */
    fkv_seq_chunks(s, &ch, &n);
    for (size_t i = 0; i < 6; i++) {
        CHECKF(ch[i]->dtype == FKV_INT4, "chunk %zu: %s", i, fkv_dtype_name(ch[i]->dtype));
        CHECKF(chunk_nmse(c, ch[i]) <= 3e-2, "chunk %zu NMSE %g", i, chunk_nmse(c, ch[i]));
    }
    for (uint32_t pos = 384; pos < 512; pos++) CHECKF(same_as_ref(c, s, pos), "hot token %u changed", pos);
    CHECK(fx_invariants(c));
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
}

/* Offload to the host tier and reload: an int8 chunk and an fp16 chunk of
 * a pinned request go to host memory (their pages free), are missing and
 * marked offloaded (restore leaves them), and come back with the same
 * bytes: the fp16 one equal to the reference, the int8 one decoding as
 * before.  The tier's capacity bounds what goes. */
static void offload_reload(void)
{
    fkv_kv_geom g = {2, 2, 64, 16, FKV_F16, 0, 8};
    host_bytes = 2 * 4 * fkv_kv_page_bytes(&g) * 2 * 2 + 4096; /* two fp16 chunks' K+V of both layers, + scales */
    fkv_cache *c = open_cache(FKV_QUANT_OFF, FKV_INT8, 64, FKV_STORAGE_CPU);
    host_bytes = 0;
    REQUIRE(c);
    fkv_seq *s = fx_seq(c, 1);
    int32_t tok[MAXT];
    for (int i = 0; i < MAXT; i++) tok[i] = 5 * i + 2;
    for (int k = 0; k < 8; k++) append_real(c, s, tok + k * 64, 64);
    REQUIRE(fkv_seq_pin(s) == FKV_OK);
    uint32_t freed = 0;
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_QUANTIZE8, NULL, 1, &freed) == FKV_OK && freed == 2); /* chunk 0 */
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_seq_chunks(s, &ch, &n);
    double before = chunk_nmse(c, ch[0]);
    /* room for chunk 0 (2 int8 pages) and chunk 1 (4 pages), not chunk 2 */
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_OFFLOAD, NULL, 100, &freed) == FKV_OK);
    fkv_seq_chunks(s, &ch, &n);
    CHECKF(freed == 6 && ch[0]->offloaded && ch[1]->offloaded && !ch[2]->offloaded && ch[2]->resident,
           "freed %u, offloaded %d %d %d", freed, ch[0]->offloaded, ch[1]->offloaded, ch[2]->offloaded);
    CHECK(!ch[0]->resident && !ch[1]->resident);
    fkv_range r[4];
    size_t nr = 0;
    CHECK(fkv_seq_missing(s, r, 4, &nr) == FKV_OK && nr == 1 && r[0].start == 0 && r[0].end == 128);
    fkv_fetch_info fi;
    CHECK(fkv_seq_fetch(s, 0, 128, FKV_FETCH_RECOMPUTE, NULL, &fi) == FKV_OK && fi.recompute_tokens == 0 &&
          fi.host_tokens == 0); /* in the host tier: not the recompute source's to give back */
    CHECK(fx_invariants(c));
    /* scribble on the freed pages, as other requests would */
    static float keep[64][2][2][ROW];
    memcpy(keep, ref, sizeof keep); /* append_real records the scribble in ref */
    fkv_seq *o = fx_seq(c, 2);
    append_real(c, o, tok, 64);
    fkv_seq_free(o);
    memcpy(ref, keep, sizeof keep);
    fkv_cache_evict(c, 64, &freed);
    CHECK(fkv_seq_fetch(s, 0, 512, FKV_FETCH_HOST, NULL, &fi) == FKV_OK && fi.host_tokens == 128 &&
          fi.recompute_tokens == 0);
    fkv_seq_chunks(s, &ch, &n);
    CHECK(ch[0]->resident && ch[1]->resident && !ch[0]->offloaded && ch[0]->dtype == FKV_INT8);
    CHECKF(chunk_nmse(c, ch[0]) == before, "int8 chunk decodes to %g, was %g", chunk_nmse(c, ch[0]), before);
    for (uint32_t pos = 64; pos < 128; pos++) CHECKF(same_as_ref(c, s, pos), "reloaded token %u differs", pos);
    for (uint32_t pos = 384; pos < 512; pos++) CHECKF(same_as_ref(c, s, pos), "hot token %u differs", pos);
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(c, 0, &ti) == FKV_OK);
    CHECK(ti.reclaimed_pages[FKV_RECLAIM_OFFLOAD] == 6);
    CHECK(fx_invariants(c));
    /* no host tier: offload frees nothing */
    fkv_seq_unpin(s);
    fkv_seq_free(s);
    fkv_cache_destroy(c);
    c = open_cache(FKV_QUANT_OFF, FKV_INT8, 64, FKV_STORAGE_CPU);
    s = fx_seq(c, 1);
    for (int k = 0; k < 4; k++) append_real(c, s, tok + k * 64, 64);
    CHECK(fkv_seq_reclaim(s, FKV_RECLAIM_OFFLOAD, NULL, 100, &freed) == FKV_OK && freed == 0);
    fkv_cache_destroy(c);
}

int main(void)
{
    always_mode(FKV_INT8, 1e-3);
    always_mode(FKV_INT4, 3e-2);
    always_mode(FKV_FP8, 2e-3);
    ladder_mode(FKV_INT8);
    ladder_mode(FKV_FP8);
    shared_once();
    index_of_quantized(FKV_F16);
    index_of_quantized(FKV_F32);
    pressure_mode();
    drops();
    reclaim_running();
    reclaim_fp8();
    offload_reload();
    bad_config();
    return check_done();
}
