/* The engine's page import / export (engine.h, engine_io.c), on a tiny
 * random model: pages exported by one engine and imported by a fresh one
 * give the same logits bit for bit while the prompt is not computed
 * (prefill tokens, prefix_hit_out, imported_tokens); an import extends the
 * cache's own partial match and only past it; export_from leaves pages
 * out, quantized (cold int8) chunks go decoded; an import longer than the prompt is
 * cut to it; below a host tier, a prompt comes back part from the host,
 * part from the import; nothing from the first chunk a sparsity mode
 * dropped on is exported. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/engine.h"
#include "fairkv_quant.h"
#include "model_fixture.h"

#define PLEN 100
#define MAXTOK 16
#define PT 16

static built tiny;
static int32_t prompt[PLEN];

typedef struct run {
    float *logits; /* [MAXTOK][n_vocab] */
    uint32_t n_tok, hit, n_prompt;
    uint8_t *kv, ok[64];
    uint32_t n_pages;
    size_t page_bytes;
    int exports;
} run;

static void on_token(void *ctx, uint64_t id, uint32_t sample, int32_t token, const float *lg, uint32_t nv, unsigned flags)
{
    (void)id, (void)sample, (void)token, (void)flags;
    run *r = ctx;
    if (r->n_tok < MAXTOK) memcpy(r->logits + (size_t)r->n_tok * nv, lg, nv * sizeof *lg);
    r->n_tok++;
}

static void on_export(void *ctx, uint64_t id, const fkv_engine_export *x)
{
    (void)id;
    run *r = ctx;
    r->exports++;
    REQUIRE(x->page_tokens == PT && x->n_pages <= 64);
    for (uint32_t p = 0; p < x->n_pages * PT; p++) if (p < r->n_prompt) CHECK(x->tokens[p] == prompt[p]);
    free(r->kv);
    r->kv = malloc(x->n_pages * x->page_bytes);
    memcpy(r->kv, x->kv, x->n_pages * x->page_bytes);
    memcpy(r->ok, x->ok, x->n_pages);
    r->n_pages = x->n_pages;
    r->page_bytes = x->page_bytes;
}

static uint64_t host_bytes, budget; /* 0: none, the default */
static int streaming;                /* 1: streaming sparsity, 64 tokens */

static fkv_engine *make(fkv_quant_mode q)
{
    fkv_engine_config c;
    fkv_engine_config_default(&c);
    if (host_bytes) c.host_bytes = host_bytes, c.host_demote = 1;
    if (budget) c.kv_budget_bytes = budget;
    if (streaming) c.sparsity = FKV_SPARSE_STREAMING, c.sparsity_budget = 64;
    c.page_tokens = PT;
    c.chunk_tokens = 32;
    if (q != FKV_QUANT_OFF) {
        c.quant_mode = q;
        c.quant_hot_tokens = 32;
    }
    fkv_engine *e;
    char err[300];
    REQUIRE(fkv_engine_create(tiny.m, &c, &e, err, sizeof err) == FKV_OK);
    return e;
}

/* One greedy request of prompt[0, n) through e. */
static void go(fkv_engine *e, uint32_t n, run *r, const uint8_t *imp, uint32_t imp_tokens, uint32_t export_from)
{
    uint32_t nv = tiny.m->hp.n_vocab;
    if (!r->logits) r->logits = calloc((size_t)MAXTOK * nv, sizeof(float));
    r->n_tok = 0;
    r->n_prompt = n;
    fkv_engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt = prompt;
    q.n_prompt = n;
    q.max_tokens = MAXTOK;
    q.top_p = 1;
    q.n = 1;
    q.n_stop_tokens = 0;
    q.on_token = on_token;
    q.ctx = r;
    q.prefix_hit_out = &r->hit;
    q.import_kv = imp;
    q.import_tokens = imp_tokens;
    q.on_export = on_export;
    q.export_from = export_from;
    REQUIRE(fkv_engine_submit(e, &q, NULL) == FKV_OK);
    REQUIRE(fkv_engine_run_until_idle(e) == FKV_OK);
}

/* fairkv_tier_hit_tokens_total{tier="host"} of the engine's cache */
static double host_hits(fkv_engine *e)
{
    size_t len = 0;
    fkv_cache_metrics_prometheus(fkv_engine_cache(e), NULL, 0, &len);
    char *t = malloc(len + 1);
    REQUIRE(t && fkv_cache_metrics_prometheus(fkv_engine_cache(e), t, len + 1, &len) == FKV_OK);
    const char *k = "fairkv_tier_hit_tokens_total{tier=\"host\"} ", *at = strstr(t, k);
    double v = at ? atof(at + strlen(k)) : -1;
    free(t);
    return v;
}

static void done(run *r)
{
    free(r->logits);
    free(r->kv);
}

int main(void)
{
    fkv_model_init_cfg cfg;
    REQUIRE(!fkv_model_init_preset("tiny", &cfg));
    cfg.n_layers = 2;
    cfg.dim = 64;
    cfg.hidden = 256;
    cfg.seed = 11;
    tiny = build(&cfg);
    uint64_t x = 5;
    for (int i = 0; i < PLEN; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = 3 + (int32_t)((x >> 33) % 256);
    }
    size_t lgbytes = (size_t)MAXTOK * tiny.m->hp.n_vocab * sizeof(float);

    /* the source: every page of the finished sequence, all full precision */
    fkv_engine *e1 = make(FKV_QUANT_OFF);
    run a = {0};
    go(e1, PLEN, &a, NULL, 0, 0);
    CHECK(a.exports == 1 && a.n_tok == MAXTOK);
    CHECKF(a.n_pages == (PLEN + MAXTOK - 1) / PT, "%u pages", a.n_pages); /* the last token has no K/V */
    int all = 1;
    for (uint32_t p = 0; p < a.n_pages; p++) all &= a.ok[p];
    CHECK(all);
    CHECK(a.page_bytes == fkv_engine_page_bytes(e1));
    fkv_engine_stats s;
    fkv_engine_stats_get(e1, &s);
    CHECK(s.exported_pages == a.n_pages && s.imported_tokens == 0);

    /* a fresh engine given the prompt's 6 whole pages: not computed, same logits */
    fkv_engine *e2 = make(FKV_QUANT_OFF);
    run b = {0};
    go(e2, PLEN, &b, a.kv, 6 * PT, 6 * PT);
    fkv_engine_stats_get(e2, &s);
    CHECKF(b.hit == 6 * PT && s.imported_tokens == 6 * PT, "hit %u imported %llu", b.hit,
           (unsigned long long)s.imported_tokens);
    CHECKF(s.prefill_tokens == PLEN - 6 * PT, "prefill %llu", (unsigned long long)s.prefill_tokens);
    CHECK(b.n_tok == MAXTOK && !memcmp(a.logits, b.logits, lgbytes));
    /* export_from: the imported pages are left out, the rest exported */
    for (uint32_t p = 0; p < b.n_pages; p++) CHECKF(b.ok[p] == (p >= 6), "page %u ok %u", p, b.ok[p]);
    fkv_engine_destroy(e2);

    /* the cache's own partial match (a 40-token prompt ran first: two
     * whole pages are cached) is extended by the import past it only */
    fkv_engine *e3 = make(FKV_QUANT_OFF);
    run c = {0};
    go(e3, 40, &c, NULL, 0, 0);
    fkv_engine_stats s0;
    fkv_engine_stats_get(e3, &s0);
    /* bytes that would break the logits if the matched part were overwritten */
    uint8_t *imp = malloc(6 * a.page_bytes);
    memcpy(imp, a.kv, 6 * a.page_bytes);
    memset(imp, 0x7f, 2 * a.page_bytes);
    go(e3, PLEN, &c, imp, 6 * PT, 0);
    fkv_engine_stats_get(e3, &s);
    CHECKF(c.hit == 6 * PT, "hit %u", c.hit);
    CHECKF(s.imported_tokens - s0.imported_tokens == 6 * PT - 32, "imported %llu",
           (unsigned long long)(s.imported_tokens - s0.imported_tokens));
    CHECK(!memcmp(a.logits, c.logits, lgbytes));
    free(imp);
    fkv_engine_destroy(e3);

    /* an import claiming more than the prompt: cut to its whole pages
     * before the last token, which is computed */
    fkv_engine *e4 = make(FKV_QUANT_OFF);
    run d = {0};
    go(e4, PLEN, &d, a.kv, a.n_pages * PT, 0);
    CHECKF(d.hit == PLEN / PT * PT, "hit %u", d.hit);
    CHECK(!memcmp(a.logits, d.logits, lgbytes));
    fkv_engine_destroy(e4);

    /* cold chunks stored in int8 are exported decoded to the base
     * precision: every page goes, and the first chunk's layer-0 rows
     * (K/V of layer 0 do not depend on attention, so the full-precision
     * run's are the values that were quantized) are exactly the int8
     * codec's round trip of the full-precision run's */
    fkv_engine *e5 = make(FKV_QUANT_ALWAYS);
    run q = {0};
    go(e5, PLEN, &q, NULL, 0, 0);
    fkv_engine_stats s5;
    fkv_engine_stats_get(e5, &s5);
    int sent = 0;
    for (uint32_t p = 0; p < q.n_pages; p++) sent += q.ok[p];
    CHECKF(q.n_pages >= PLEN / PT && sent == (int)q.n_pages && s5.exported_decoded_pages >= 2,
           "int8: %d of %u pages exported, %llu decoded", sent, q.n_pages,
           (unsigned long long)s5.exported_decoded_pages);
    {
        const uint32_t H = tiny.m->hp.n_kv_heads, D = tiny.m->hp.head_dim;
        const size_t row = (size_t)H * D * sizeof(float), plane = (size_t)PT * row;
        fkv_kv_geom g = {1, H, D, PT, FKV_F32, plane, 4};
        uint8_t *kb = calloc(4, plane), *vb = calloc(4, plane);
        size_t meta = fkv_quant_meta_bytes(&g, FKV_INT8, 2 * PT);
        void *qm = malloc(meta);
        REQUIRE(kb && vb && qm);
        for (uint32_t t = 0; t < 2 * PT; t++) { /* layer 0's K then V plane of page t / PT */
            const uint8_t *src = a.kv + (size_t)(t / PT) * a.page_bytes;
            memcpy(kb + t * row, src + (t % PT) * row, row);
            memcpy(vb + t * row, src + plane + (t % PT) * row, row);
        }
        fkv_kv_layer L = {kb, vb};
        uint32_t src2[2] = {0, 1}, dst1[1] = {2};
        char err[160];
        REQUIRE(fkv_quant_chunk(&g, &L, 2 * PT, src2, 2, FKV_INT8, dst1, 1, qm, meta, err, sizeof err) == FKV_OK);
        REQUIRE(fkv_dequant_chunk(&g, &L, 2 * PT, FKV_INT8, dst1, 1, qm, meta, src2, 2, err, sizeof err) == FKV_OK);
        int same = 1, moved = 0;
        for (uint32_t t = 0; t < 2 * PT; t++) {
            const uint8_t *got = q.kv + (size_t)(t / PT) * q.page_bytes, *full = a.kv + (size_t)(t / PT) * a.page_bytes;
            same &= !memcmp(got + (t % PT) * row, kb + t * row, row) &&
                    !memcmp(got + plane + (t % PT) * row, vb + t * row, row);
            moved |= memcmp(got + (t % PT) * row, full + (t % PT) * row, row) != 0;
        }
        CHECKF(same, "the exported cold chunk is not the int8 round trip of its full-precision K/V");
        CHECKF(moved, "the exported cold chunk equals the full-precision K/V: nothing was quantized");
        free(kb);
        free(vb);
        free(qm);
    }
    fkv_engine_destroy(e5);

    /* with the host tier below: the prompt, evicted from the device by
     * another one, comes back partly from the host (whole chunks, as many
     * as its 16 KiB hold) and partly from the import, same logits */
    host_bytes = 16 << 10;
    budget = 64 << 10; /* 128 tokens of 512 bytes: one request */
    fkv_engine *e6 = make(FKV_QUANT_OFF);
    run h = {0};
    go(e6, PLEN, &h, NULL, 0, 0);
    for (int i = 0; i < PLEN; i++) prompt[i] ^= 1; /* another prompt evicts it */
    go(e6, PLEN, &h, NULL, 0, 0);
    for (int i = 0; i < PLEN; i++) prompt[i] ^= 1;
    fkv_engine_stats_get(e6, &s0);
    double host0 = host_hits(e6);
    go(e6, PLEN, &h, a.kv, 6 * PT, 0);
    fkv_engine_stats_get(e6, &s);
    uint64_t host_hit = (uint64_t)host_hits(e6) - host0;
    uint64_t imported = s.imported_tokens - s0.imported_tokens;
    CHECKF(h.hit == 6 * PT && host_hit > 0 && imported > 0 && host_hit + imported == 6 * PT,
           "hit %u: host %llu + imported %llu", h.hit, (unsigned long long)host_hit, (unsigned long long)imported);
    CHECK(!memcmp(a.logits, h.logits, lgbytes));
    fkv_engine_destroy(e6);

    /* streaming sparsity drops middle chunks while decoding: the pages of
     * the sink chunk before them are exact and exported, nothing after */
    host_bytes = budget = 0;
    streaming = 1;
    fkv_engine *e7 = make(FKV_QUANT_OFF);
    run sp = {0};
    go(e7, PLEN, &sp, NULL, 0, 0);
    fkv_engine_stats_get(e7, &s);
    CHECK(s.dropped_tokens > 0);
    for (uint32_t p = 0; p < sp.n_pages; p++) CHECKF(sp.ok[p] == (p < 2), "streaming: page %u ok %u", p, sp.ok[p]);
    CHECK(!memcmp(sp.kv, a.kv, 2 * a.page_bytes));
    fkv_engine_destroy(e7);
    done(&sp);

    fkv_engine_destroy(e1);
    done(&h);
    done(&a), done(&b), done(&c), done(&d), done(&q);
    unbuild(&tiny);
    return check_done();
}
