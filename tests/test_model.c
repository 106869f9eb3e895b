/* The Llama forward pass against a plain fp64 reference written here from
 * the GGUF tensors (no code shared with the engine), and the equalities the
 * batch interface promises: one batch = token by token = chunked = mixed
 * with other sequences = any thread count = a paged K/V store. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model_fixture.h"
#include "engine_cli.h"
#include "gguf/gguf.h"
#include "model/half.h"
#include "model/model.h"
#include "model/model_init.h"
#include "model/sampler.h"
#include "model/wquant.h"

/* ---------------------------------------------------------------- fp64 reference */

/* Element i of a tensor; Q8_0 / Q4_0 decoded from llama.cpp's block layout
 * (ggml-common.h: an fp16 scale d, then 32 int8, or 16 bytes whose low
 * nibbles are elements 0..15 and high nibbles 16..31, minus 8). */
static double wget(const fkv_gguf_tensor *t, size_t i)
{
    if (t->type == FKV_GGML_Q8_0 || t->type == FKV_GGML_Q4_0) {
        size_t bytes = t->type == FKV_GGML_Q8_0 ? 34 : 18, j = i % 32;
        const uint8_t *b = (const uint8_t *)t->data + (i / 32) * bytes;
        uint16_t h;
        memcpy(&h, b, 2);
        double d = fkv_h2f(h);
        if (t->type == FKV_GGML_Q8_0) return d * (int8_t)b[2 + j];
        int q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
        return d * (q - 8);
    }
    if (t->type == FKV_GGML_F32) {
        float f;
        memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    return fkv_h2f(h);
}

static const fkv_gguf_tensor *T(const fkv_gguf *g, const char *fmt, int l)
{
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    const fkv_gguf_tensor *t = fkv_gguf_tensor_find(g, name);
    REQUIRE(t);
    return t;
}

static double meta(const fkv_gguf *g, const char *key)
{
    double v;
    REQUIRE(fkv_gguf_get_f64(g, key, &v, NULL, 0) == FKV_OK);
    return v;
}

/* y[rows] = W x, W given as GGUF ne = {cols, rows} */
static void ref_mv(const fkv_gguf_tensor *w, const double *x, double *y)
{
    size_t cols = w->ne[0], rows = w->ne[1];
    for (size_t r = 0; r < rows; r++) {
        double s = 0;
        for (size_t c = 0; c < cols; c++) s += wget(w, r * cols + c) * x[c];
        y[r] = s;
    }
}

static void ref_norm(const fkv_gguf_tensor *w, const double *x, double *y, size_t n, double eps)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1 / sqrt(ss / n + eps);
    for (size_t i = 0; i < n; i++) y[i] = x[i] * s * wget(w, i);
}

/* rotate_half = 0: llama.cpp's adjacent pairs; 1: the HF "rotate half"
 * pairing (i, i + d/2), used only to show the test can tell them apart */
static void ref_rope(double *v, size_t heads, size_t hd, size_t rd, double base, size_t pos, int rotate_half,
                     double scale, const fkv_gguf_tensor *ff)
{
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < rd / 2; i++) {
            double a = pos * scale * pow(base, -2.0 * i / rd) / (ff ? wget(ff, i) : 1.0);
            size_t i0 = rotate_half ? i : 2 * i, i1 = rotate_half ? i + rd / 2 : 2 * i + 1;
            double *p = v + h * hd;
            double x0 = p[i0], x1 = p[i1];
            p[i0] = x0 * cos(a) - x1 * sin(a);
            p[i1] = x0 * sin(a) + x1 * cos(a);
        }
}

/* logits[n][n_vocab] for every position of tokens[0..n) */
static void ref_forward(const fkv_gguf *g, const int32_t *tok, size_t n, double *logits, int rotate_half)
{
    size_t dim = (size_t)meta(g, "llama.embedding_length"), L = (size_t)meta(g, "llama.block_count");
    size_t nh = (size_t)meta(g, "llama.attention.head_count"), nkv = (size_t)meta(g, "llama.attention.head_count_kv");
    size_t hid = (size_t)meta(g, "llama.feed_forward_length"), rd = (size_t)meta(g, "llama.rope.dimension_count");
    double eps = meta(g, "llama.attention.layer_norm_rms_epsilon"), base = meta(g, "llama.rope.freq_base");
    size_t hd = fkv_gguf_find(g, "llama.attention.key_length") ? (size_t)meta(g, "llama.attention.key_length") : dim / nh;
    size_t qd = nh * hd, kvd = nkv * hd;
    double scale = 1;
    const fkv_gguf_kv *st = fkv_gguf_find(g, "llama.rope.scaling.type");
    if (st && !strcmp(st->str, "linear")) scale = 1 / meta(g, "llama.rope.scaling.factor");
    const fkv_gguf_tensor *ff = fkv_gguf_tensor_find(g, "rope_freqs.weight");
    const fkv_gguf_tensor *emb = T(g, "token_embd.weight", 0), *out = fkv_gguf_tensor_find(g, "output.weight");
    size_t V = emb->ne[1];
    if (!out) out = emb;
    double *x = calloc(n * dim, 8), *xb = malloc(dim * 8), *q = malloc(n * qd * 8), *k = malloc(n * kvd * 8),
           *v = malloc(n * kvd * 8), *att = malloc(n * qd * 8), *o = malloc(dim * 8), *h1 = malloc(hid * 8),
           *h2 = malloc(hid * 8), *sc = malloc(n * 8);
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < dim; i++) x[t * dim + i] = wget(emb, (size_t)tok[t] * dim + i);
    for (size_t l = 0; l < L; l++) {
        for (size_t t = 0; t < n; t++) {
            ref_norm(T(g, "blk.%d.attn_norm.weight", (int)l), x + t * dim, xb, dim, eps);
            ref_mv(T(g, "blk.%d.attn_q.weight", (int)l), xb, q + t * qd);
            ref_mv(T(g, "blk.%d.attn_k.weight", (int)l), xb, k + t * kvd);
            ref_mv(T(g, "blk.%d.attn_v.weight", (int)l), xb, v + t * kvd);
            ref_rope(q + t * qd, nh, hd, rd, base, t, rotate_half, scale, ff);
            ref_rope(k + t * kvd, nkv, hd, rd, base, t, rotate_half, scale, ff);
        }
        for (size_t t = 0; t < n; t++)
            for (size_t h = 0; h < nh; h++) {
                size_t kh = h / (nh / nkv);
                double mx = -INFINITY, sum = 0;
                for (size_t j = 0; j <= t; j++) {
                    double d = 0;
                    for (size_t i = 0; i < hd; i++) d += q[t * qd + h * hd + i] * k[j * kvd + kh * hd + i];
                    sc[j] = d / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (size_t j = 0; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (size_t i = 0; i < hd; i++) {
                    double a = 0;
                    for (size_t j = 0; j <= t; j++) a += sc[j] / sum * v[j * kvd + kh * hd + i];
                    att[t * qd + h * hd + i] = a;
                }
            }
        for (size_t t = 0; t < n; t++) {
            ref_mv(T(g, "blk.%d.attn_output.weight", (int)l), att + t * qd, o);
            for (size_t i = 0; i < dim; i++) x[t * dim + i] += o[i];
            ref_norm(T(g, "blk.%d.ffn_norm.weight", (int)l), x + t * dim, xb, dim, eps);
            ref_mv(T(g, "blk.%d.ffn_gate.weight", (int)l), xb, h1);
            ref_mv(T(g, "blk.%d.ffn_up.weight", (int)l), xb, h2);
            for (size_t i = 0; i < hid; i++) h1[i] = h1[i] / (1 + exp(-h1[i])) * h2[i];
            ref_mv(T(g, "blk.%d.ffn_down.weight", (int)l), h1, o);
            for (size_t i = 0; i < dim; i++) x[t * dim + i] += o[i];
        }
    }
    for (size_t t = 0; t < n; t++) {
        ref_norm(T(g, "output_norm.weight", 0), x + t * dim, xb, dim, eps);
        ref_mv(out, xb, logits + t * V);
    }
    free(x), free(xb), free(q), free(k), free(v), free(att), free(o), free(h1), free(h2), free(sc);
}

static double nmse(const float *a, const double *ref, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += (a[i] - ref[i]) * (a[i] - ref[i]);
        s += ref[i] * ref[i];
    }
    return e / s;
}

static double nmse_dd(const double *a, const double *ref, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += (a[i] - ref[i]) * (a[i] - ref[i]);
        s += ref[i] * ref[i];
    }
    return e / s;
}

/* ---------------------------------------------------------------- helpers */

/* Runs the prompt through a fresh contiguous store in chunks of `chunk`
 * tokens; logits[n][V] of every position. */
static void run_chunked(const fkv_llama *m, uint32_t threads, const int32_t *tok, uint32_t n, uint32_t chunk,
                        float *logits)
{
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_kvref_seq kv;
    REQUIRE(fkv_kvref_seq_init(&kv, &g, n) == FKV_OK);
    fkv_fwd *f;
    fkv_attn_pool *pool;
    REQUIRE(fkv_attn_pool_create(threads, &pool) == FKV_OK);
    REQUIRE(fkv_fwd_create(m, pool, &f) == FKV_OK);
    for (uint32_t p = 0; p < n; p += chunk) {
        uint32_t c = n - p < chunk ? n - p : chunk;
        fkv_fwd_seq s = {&kv, tok + p, c, p, NULL, logits + (size_t)p * m->hp.n_vocab, 1};
        char err[200];
        REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
    }
    fkv_fwd_destroy(f);
    fkv_attn_pool_destroy(pool);
    fkv_kvref_seq_free(&kv);
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float d = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > d) d = fabsf(a[i] - b[i]);
    return d;
}

static void tokens(int32_t *t, uint32_t n, uint64_t seed)
{
    fkv_rng r;
    fkv_rng_seed(&r, seed);
    t[0] = 1; /* BOS */
    for (uint32_t i = 1; i < n; i++) t[i] = 3 + (int32_t)(fkv_rng_next(&r) % 256);
}

/* ---------------------------------------------------------------- tests */

static void test_vs_reference(fkv_model_init_cfg *cfg, const char *label, double bound)
{
    built b = build(cfg);
    uint32_t n = 13, V = b.m->hp.n_vocab;
    int32_t tok[13];
    tokens(tok, n, cfg->seed + 11);
    float *lg = malloc((size_t)n * V * sizeof *lg);
    double *ref = malloc((size_t)n * V * sizeof *ref), *alt = malloc((size_t)n * V * sizeof *alt);
    run_chunked(b.m, 2, tok, n, n, lg);
    ref_forward(b.g, tok, n, ref, 0);
    double e = nmse(lg, ref, (size_t)n * V);
    printf("%-34s logits NMSE vs fp64 reference: %.3g\n", label, e);
    CHECKF(e < bound, "%s: NMSE %g >= %g", label, e, bound);
    /* the bound is tight enough to tell RoPE pairings apart */
    ref_forward(b.g, tok, n, alt, 1);
    double e_alt = nmse_dd(alt, ref, (size_t)n * V);
    CHECKF(e_alt > 1e3 * bound, "%s: rotate-half differs from adjacent pairs by only %g", label, e_alt);
    free(lg), free(ref), free(alt);
    unbuild(&b);
}

/* Hand-made blocks decode as llama.cpp lays them out, and the quantizers
 * round-trip within what their steps allow. */
static void test_blocks(void)
{
    uint8_t q4[18], q8[34];
    uint16_t one = fkv_f2h(0.5f);
    memcpy(q4, &one, 2);
    memcpy(q8, &one, 2);
    for (int j = 0; j < 16; j++) q4[2 + j] = (uint8_t)(j | (15 - j) << 4);
    for (int j = 0; j < 32; j++) q8[2 + j] = (uint8_t)(int8_t)(j - 16);
    float o4[32], o8[32];
    fkv_wq_row_f32(FKV_GGML_Q4_0, q4, 32, o4);
    fkv_wq_row_f32(FKV_GGML_Q8_0, q8, 32, o8);
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += o4[j] != 0.5f * (j - 8) || o4[16 + j] != 0.5f * (7 - j);
    for (int j = 0; j < 32; j++) bad += o8[j] != 0.5f * (j - 16);
    CHECKF(bad == 0, "hand-made q4_0 / q8_0 blocks: %d elements decoded wrongly", bad);
    CHECK(fkv_wq_row_bytes(FKV_GGML_Q8_0, 64) == 68 && fkv_wq_row_bytes(FKV_GGML_Q4_0, 64) == 36);
    fkv_rng r;
    fkv_rng_seed(&r, 3);
    float x[64], y[64];
    uint8_t buf[68];
    for (int i = 0; i < 64; i++) x[i] = (float)(2 * fkv_rng_unif(&r) - 1) * (i < 32 ? 1.0f : 0.1f);
    for (int t = 0; t < 2; t++) {
        uint32_t type = t ? FKV_GGML_Q4_0 : FKV_GGML_Q8_0;
        fkv_wq_quantize_row(type, x, 64, buf);
        fkv_wq_row_f32(type, buf, 64, y);
        int worse = 0;
        for (int b = 0; b < 2; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
            /* step d = amax / 127 (q8_0): within half a step; q4_0's d = -max / 8 leaves
             * levels -8..7, so the end opposite max is clamped: within a step.  The
             * fp16 rounding of d adds up to 2^-11 of amax. */
            float step = amax / (t ? 8.0f : 127.0f), tol = step * (t ? 1.0f : 0.5f) + amax * 0x1p-10f;
            for (int i = 0; i < 32; i++) worse += fabsf(y[32 * b + i] - x[32 * b + i]) > tol;
        }
        CHECKF(worse == 0, "%s: %d elements off by more than the step allows", t ? "q4_0" : "q8_0", worse);
    }
}

/* FKV_MATMUL=loops: the hand-written dot loops give what the BLAS tiles
 * give, up to rounding, and do not depend on the thread count either. */
static void test_loops(void)
{
    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.dim = 64, cfg.n_layers = 2, cfg.hidden = 96, cfg.seed = 9, cfg.f16 = 1;
    built b = build(&cfg);
    uint32_t n = 21, V = b.m->hp.n_vocab;
    int32_t tok[21];
    tokens(tok, n, 5);
    size_t sz = (size_t)n * V;
    float *blas = malloc(sz * 4), *l1 = malloc(sz * 4), *l3 = malloc(sz * 4);
    REQUIRE(blas && l1 && l3);
    REQUIRE(fkv_matmul_mode_env() == FKV_MATMUL_AUTO);
    run_chunked(b.m, 2, tok, n, 5, blas);
    setenv("FKV_MATMUL", "loops", 1);
    REQUIRE(fkv_matmul_mode_env() == FKV_MATMUL_LOOPS);
    run_chunked(b.m, 1, tok, n, 5, l1);
    run_chunked(b.m, 3, tok, n, 5, l3);
    unsetenv("FKV_MATMUL");
    float d = max_abs_diff(blas, l1, sz);
    printf("loops vs BLAS tiles: max |diff| %.3g\n", d);
    CHECK(d > 0 && d <= 1e-4f); /* > 0: the two paths really ran */
    CHECK(!memcmp(l1, l3, sz * 4));
    free(blas), free(l1), free(l3);
    unbuild(&b);
}

static void test_batching(void)
{
    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.dim = 64, cfg.n_layers = 2, cfg.hidden = 96, cfg.seed = 5, cfg.tied = 0;
    built b = build(&cfg);
    const fkv_llama *m = b.m;
    uint32_t n = 40, V = m->hp.n_vocab;
    int32_t tok[40];
    tokens(tok, n, 99);
    size_t sz = (size_t)n * V;
    float *one = malloc(sz * 4), *each = malloc(sz * 4), *chunk = malloc(sz * 4), *thr = malloc(sz * 4);
    run_chunked(m, 1, tok, n, n, one);
    run_chunked(m, 1, tok, n, 1, each);
    run_chunked(m, 1, tok, n, 7, chunk);
    run_chunked(m, 3, tok, n, 7, thr);
    float d1 = max_abs_diff(one, each, sz), d2 = max_abs_diff(one, chunk, sz);
    printf("batch vs token-by-token max |diff| %.3g, vs chunks of 7 %.3g\n", d1, d2);
    CHECK(d1 <= 1e-5f);
    CHECK(d2 <= 1e-5f);
    CHECK(!memcmp(chunk, thr, sz * 4)); /* threads change who computes, not what */
    for (uint32_t t = 0; t < n; t++) CHECK(fkv_argmax(one + (size_t)t * V, V) == fkv_argmax(each + (size_t)t * V, V));

    /* several sequences in one step: A prefills a chunk while B decodes and
     * C starts; each must match running alone */
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_kvref_seq ka, kb, kc;
    REQUIRE(!fkv_kvref_seq_init(&ka, &g, n) && !fkv_kvref_seq_init(&kb, &g, n) && !fkv_kvref_seq_init(&kc, &g, n));
    int32_t tb[40], tc[40];
    tokens(tb, n, 7);
    tokens(tc, n, 8);
    float *lb = malloc(sz * 4), *lc = malloc(sz * 4), *ra = malloc(sz * 4), *rb = malloc(sz * 4), *rc = malloc(sz * 4);
    run_chunked(m, 1, tb, n, n, rb);
    run_chunked(m, 1, tc, n, n, rc);
    fkv_fwd *f;
    fkv_attn_pool *pool;
    REQUIRE(fkv_attn_pool_create(2, &pool) == FKV_OK);
    REQUIRE(fkv_fwd_create(m, pool, &f) == FKV_OK);
    uint32_t pa = 0, pb = 0, pc = 0, step = 0;
    while (pa < n || pb < n || pc < n) {
        fkv_fwd_seq s[3];
        uint32_t k = 0, na = 0, nb = 0, nc = 0;
        if (pa < n) {
            na = n - pa < 9 ? n - pa : 9;
            s[k++] = (fkv_fwd_seq){&ka, tok + pa, na, pa, NULL, ra + (size_t)pa * V, 1};
        }
        if (pb < n) {
            nb = pb < 5 ? 5 : 1; /* a short prefill, then decode */
            s[k++] = (fkv_fwd_seq){&kb, tb + pb, nb, pb, NULL, lb + (size_t)pb * V, 1};
        }
        if (step >= 2 && pc < n) {
            nc = n - pc < 13 ? n - pc : 13;
            s[k++] = (fkv_fwd_seq){&kc, tc + pc, nc, pc, NULL, lc + (size_t)pc * V, 1};
        }
        char err[200];
        REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, s, k, err, sizeof err) == FKV_OK);
        pa += na, pb += nb, pc += nc, step++;
    }
    CHECK(max_abs_diff(ra, one, sz) <= 1e-5f);
    CHECK(max_abs_diff(lb, rb, sz) <= 1e-5f);
    CHECK(max_abs_diff(lc, rc, sz) <= 1e-5f);

    /* logits of the last token only */
    fkv_kvref_seq_free(&ka);
    REQUIRE(!fkv_kvref_seq_init(&ka, &g, n));
    float *last = malloc(V * 4);
    fkv_fwd_seq s1 = {&ka, tok, n, 0, NULL, last, 0};
    char err[200];
    REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s1, 1, err, sizeof err) == FKV_OK);
    CHECK(max_abs_diff(last, one + (size_t)(n - 1) * V, V) <= 1e-5f);

    /* greedy generation: prefill in one batch vs token by token */
    int32_t gen1[60], gen2[60];
    for (int mode = 0; mode < 2; mode++) {
        int32_t *gen = mode ? gen2 : gen1;
        fkv_kvref_seq kv;
        REQUIRE(!fkv_kvref_seq_init(&kv, &g, 60));
        memcpy(gen, tok, 20 * sizeof *gen);
        for (uint32_t p = 0; p < 20; p += mode ? 1 : 20) {
            fkv_fwd_seq s = {&kv, gen + p, mode ? 1 : 20, p, NULL, last, 0};
            REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
        }
        for (uint32_t p = 20; p < 60; p++) {
            gen[p] = fkv_argmax(last, V);
            fkv_fwd_seq s = {&kv, gen + p, 1, p, NULL, last, 0};
            REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
        }
        fkv_kvref_seq_free(&kv);
    }
    CHECK(!memcmp(gen1, gen2, sizeof gen1));

    /* bad input: token id, context overflow, empty */
    int32_t bad = (int32_t)V;
    fkv_fwd_seq sb = {&ka, &bad, 1, 0, NULL, NULL, 0};
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &sb, 1, err, sizeof err) == FKV_EINVAL && strstr(err, "token"));
    sb = (fkv_fwd_seq){&ka, tok, 1, m->hp.ctx_len, NULL, NULL, 0};
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &sb, 1, err, sizeof err) == FKV_EINVAL && strstr(err, "context"));
    sb = (fkv_fwd_seq){&ka, tok, 0, 0, NULL, NULL, 0};
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &sb, 1, err, sizeof err) == FKV_EINVAL);
    /* a store that fails: the status comes back */
    sb = (fkv_fwd_seq){&ka, tok, 3, n - 1, NULL, NULL, 0}; /* past the store's 40 tokens */
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &sb, 1, err, sizeof err) == FKV_EFULL && strstr(err, "layer 0"));

    fkv_fwd_destroy(f);
    fkv_attn_pool_destroy(pool);
    fkv_kvref_seq_free(&ka), fkv_kvref_seq_free(&kb), fkv_kvref_seq_free(&kc);
    free(one), free(each), free(chunk), free(thr), free(lb), free(lc), free(ra), free(rb), free(rc), free(last);
    unbuild(&b);
}

/* ---------------------------------------------------------------- paged store */

/* A toy page pool with fairkv's layout: pages handed out in a scrambled
 * order, one page table per sequence, slots given to the forward pass the
 * way fkv_seq_append returns them. */
typedef struct paged {
    fkv_dtype dtype;
    uint32_t page_tokens, n_pages, next_free;
    uint64_t page_stride;
    uint32_t *free_list;
    uint8_t **k, **v; /* [n_layers] page pools */
} paged;

typedef struct paged_seq {
    fkv_slot slot_of[64]; /* position -> slot */
    uint32_t len;
} paged_seq;

static paged *paged_new(const fkv_fwd_geom *g, fkv_dtype dt, uint32_t page_tokens, uint32_t n_pages)
{
    paged *p = calloc(1, sizeof *p);
    p->dtype = dt, p->page_tokens = page_tokens, p->n_pages = n_pages;
    p->page_stride = (uint64_t)page_tokens * g->n_kv_heads * g->head_dim * (dt == FKV_F32 ? 4 : 2);
    p->free_list = malloc(n_pages * sizeof *p->free_list);
    for (uint32_t i = 0; i < n_pages; i++) p->free_list[i] = (i * 7 + 3) % n_pages; /* 7 coprime to n_pages */
    p->k = calloc(g->n_layers, sizeof *p->k);
    p->v = calloc(g->n_layers, sizeof *p->v);
    for (uint32_t l = 0; l < g->n_layers; l++) {
        p->k[l] = calloc(n_pages, p->page_stride);
        p->v[l] = calloc(n_pages, p->page_stride);
    }
    return p;
}

static void paged_free(paged *p, uint32_t n_layers)
{
    for (uint32_t l = 0; l < n_layers; l++) free(p->k[l]), free(p->v[l]);
    free(p->k), free(p->v), free(p->free_list), free(p);
}

/* fkv_seq_append's job: slots for n more tokens */
static void paged_append(paged *p, paged_seq *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++, s->len++) {
        if (s->len % p->page_tokens == 0) {
            REQUIRE(p->next_free < p->n_pages);
            s->slot_of[s->len].page = p->free_list[p->next_free++];
        } else {
            s->slot_of[s->len].page = s->slot_of[s->len - 1].page;
        }
        s->slot_of[s->len].slot = s->len % p->page_tokens;
    }
}

static fkv_status paged_store(void *ctx, const fkv_fwd_geom *g, uint32_t l, const fkv_fwd_seq *s, const float *k,
                              const float *v)
{
    paged *p = ctx;
    return fkv_kv_write_paged(p->k[l], p->v[l], p->page_stride, p->page_tokens, p->dtype, g->n_kv_heads, g->head_dim,
                              s->slots, s->n_tokens, k, v);
}

static fkv_status paged_attend(void *ctx, const fkv_fwd_geom *g, uint32_t l, const fkv_fwd_seq *s, const float *q,
                               float *out)
{
    paged *p = ctx;
    const paged_seq *ps = s->seq;
    return fkv_attn_paged_ref(g, p->k[l], p->v[l], p->page_stride, p->page_tokens, p->dtype, ps->slot_of, s->start_pos,
                              s->n_tokens, q, out);
}

static void test_paged(void)
{
    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.dim = 64, cfg.n_layers = 2, cfg.hidden = 96, cfg.seed = 6;
    built b = build(&cfg);
    uint32_t n = 37, V = b.m->hp.n_vocab;
    int32_t ta[37], tb[37];
    tokens(ta, n, 1);
    tokens(tb, n, 2);
    size_t sz = (size_t)n * V;
    float *ra = malloc(sz * 4), *rb = malloc(sz * 4), *la = malloc(sz * 4), *lb = malloc(sz * 4);
    run_chunked(b.m, 1, ta, n, n, ra);
    run_chunked(b.m, 1, tb, n, n, rb);
    fkv_fwd_geom g = fkv_llama_geom(b.m);
    for (int dt = 0; dt < 2; dt++) {
        paged *p = paged_new(&g, dt ? FKV_F16 : FKV_F32, 4, 25);
        paged_seq sa = {0}, sb = {0};
        fkv_kv_ops ops = {paged_store, paged_attend, p};
        fkv_fwd *f;
        fkv_attn_pool *pool;
        REQUIRE(fkv_attn_pool_create(2, &pool) == FKV_OK);
        REQUIRE(fkv_fwd_create(b.m, pool, &f) == FKV_OK);
        /* two sequences interleaved so their pages alternate in the pool */
        for (uint32_t pos = 0; pos < n;) {
            uint32_t c = pos == 0 ? 6 : (n - pos < 5 ? n - pos : 5);
            paged_append(p, &sa, c);
            paged_append(p, &sb, c);
            fkv_fwd_seq s[2] = {{&sa, ta + pos, c, pos, sa.slot_of + pos, la + (size_t)pos * V, 1},
                                {&sb, tb + pos, c, pos, sb.slot_of + pos, lb + (size_t)pos * V, 1}};
            char err[200];
            REQUIRE(fkv_llama_forward(f, &ops, s, 2, err, sizeof err) == FKV_OK);
            pos += c;
        }
        double ea = 0, eb = 0, s2 = 0;
        for (size_t i = 0; i < sz; i++) {
            ea += (la[i] - ra[i]) * (la[i] - ra[i]);
            eb += (lb[i] - rb[i]) * (lb[i] - rb[i]);
            s2 += ra[i] * ra[i];
        }
        printf("paged %s store vs contiguous: NMSE %.3g / %.3g\n", dt ? "f16" : "f32", ea / s2, eb / s2);
        if (!dt) {
            CHECK(max_abs_diff(la, ra, sz) <= 1e-5f && max_abs_diff(lb, rb, sz) <= 1e-5f);
        } else { /* f16 K/V: a rounding error of ~2^-11 relative, not a layout error */
            CHECK(ea / s2 < 1e-5 && eb / s2 < 1e-5);
            CHECK(ea > 0);
        }
        fkv_fwd_destroy(f);
        fkv_attn_pool_destroy(pool);
        paged_free(p, g.n_layers);
    }
    free(ra), free(rb), free(la), free(lb);
    unbuild(&b);
}

/* ---------------------------------------------------------------- loading errors */

static void test_load_errors(void)
{
    fkv_gguf_writer *w = fkv_gguf_writer_new(32);
    fkv_gguf_w_str(w, "general.architecture", "llama");
    fkv_gguf_w_u32(w, "llama.embedding_length", 8);
    fkv_gguf_w_u32(w, "llama.block_count", 1);
    fkv_gguf_w_u32(w, "llama.feed_forward_length", 8);
    fkv_gguf_w_u32(w, "llama.attention.head_count", 3);
    float z[8 * 10] = {0};
    uint64_t ne[2] = {8, 10};
    fkv_gguf_w_tensor(w, "token_embd.weight", FKV_GGML_F32, 2, ne, z);
    uint8_t *buf;
    size_t len;
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    fkv_gguf *g;
    fkv_llama *m;
    char err[300];
    REQUIRE(!fkv_gguf_parse(buf, len, "x", &g, err, sizeof err));
    CHECK(fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_EPARSE && strstr(err, "head_count 3"));
    fkv_gguf_free(g);
    free(buf);

    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.n_layers = 1;
    REQUIRE(!fkv_model_init_build(&cfg, &w));
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    /* rename a tensor: the model names the one it misses */
    size_t at = 0;
    while (memcmp(buf + at, "blk.0.ffn_up", 12)) at++;
    buf[at + 6] = 'g';
    REQUIRE(!fkv_gguf_parse(buf, len, "x", &g, err, sizeof err));
    CHECK(fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_EPARSE && strstr(err, "blk.0.ffn_up.weight"));
    fkv_gguf_free(g);
    buf[at + 6] = 'f';
    /* wrong architecture: the value follows the key, its u32 type and u64 length */
    at = 0;
    while (memcmp(buf + at, "general.architecture", 20)) at++;
    at += 20 + 4 + 8;
    REQUIRE(!memcmp(buf + at, "llama", 5));
    buf[at] = 'L';
    REQUIRE(!fkv_gguf_parse(buf, len, "x", &g, err, sizeof err));
    CHECK(fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_EUNSUPPORTED && strstr(err, "Llama"));
    fkv_gguf_free(g);
    free(buf);
}

/* ---------------------------------------------------------------- CLI */

static void test_cli(void)
{
    char a[] = "/tmp/fkv_test_model_a_XXXXXX", bpath[] = "/tmp/fkv_test_model_b_XXXXXX";
    int fa = mkstemp(a), fb = mkstemp(bpath);
    REQUIRE(fa >= 0 && fb >= 0);
    close(fa), close(fb);
    char *argv1[] = {"model", "init", "--preset", "tiny", "--out", a, "--seed", "3", "--f16", NULL};
    char *argv2[] = {"model", "init", "--preset", "tiny", "--out", bpath, "--seed", "3", "--f16", NULL};
    CHECK(fkv_cli_model(9, argv1) == 0);
    CHECK(fkv_cli_model(9, argv2) == 0);
    FILE *f1 = fopen(a, "rb"), *f2 = fopen(bpath, "rb");
    REQUIRE(f1 && f2);
    int same = 1, c1, c2;
    long n = 0;
    do {
        c1 = fgetc(f1), c2 = fgetc(f2), n++;
        if (c1 != c2) same = 0;
    } while (c1 != EOF && c2 != EOF);
    fclose(f1), fclose(f2);
    CHECK(same && n > 100000); /* same seed, same bytes */
    char *argv3[] = {"model", "init", "--preset", "tiny", "--out", bpath, "--seed", "4", "--f16", NULL};
    CHECK(fkv_cli_model(9, argv3) == 0);
    fkv_llama *m1, *m2;
    char err[300];
    REQUIRE(fkv_llama_load(a, &m1, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_llama_load(bpath, &m2, err, sizeof err) == FKV_OK);
    CHECK(m1->tied_output && m1->tok_embd.type == FKV_GGML_F16 && m1->hp.n_kv_heads == 2);
    CHECK(memcmp(m1->tok_embd.data, m2->tok_embd.data, 128 * 2) != 0); /* another seed, other weights */
    /* the parameter count is every tensor the model reads, once */
    uint64_t total = 0;
    for (uint64_t i = 0; i < m1->gguf->n_tensors; i++) total += m1->gguf->tensors[i].n_elements;
    CHECK(fkv_llama_n_params(m1) == total);
    printf("tiny preset: %llu parameters\n", (unsigned long long)total);
    CHECK(total > 900000 && total < 1100000);
    fkv_llama_free(m1), fkv_llama_free(m2);
    char *argv4[] = {"generate", "--model", a, "--prompt", "hi", "--max-tokens", "5", "--temperature", "0.8",
                     "--top-p", "0.9", "--seed", "2", "--threads", "2", NULL};
    CHECK(fkv_cli_generate(15, argv4) == 0);
    char *argv5[] = {"generate", "--model", a, "--prompt", "hi", "--max-tokens", "5000", NULL};
    CHECK(fkv_cli_generate(7, argv5) == 1); /* beyond the context */
    char *argv6[] = {"model", "info", a, NULL};
    CHECK(fkv_cli_model(3, argv6) == 0);
    REQUIRE(truncate(a, 5000) == 0); /* cut inside the tensor data */
    CHECK(fkv_cli_model(3, argv6) == 1);
    CHECK(fkv_llama_load(a, &m1, err, sizeof err) == FKV_EPARSE && strstr(err, a) && strstr(err, "byte "));
    char *argv7[] = {"model", "init", "--preset", "huge", "--out", a, NULL};
    CHECK(fkv_cli_model(6, argv7) == 2);
    unlink(a), unlink(bpath);
}

int main(void)
{
    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.dim = 64, cfg.n_layers = 2, cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.hidden = 96, cfg.seed = 1;
    test_vs_reference(&cfg, "f32, GQA 4/2, tied head", 1e-9);
    cfg.f16 = 1, cfg.tied = 0, cfg.seed = 2;
    test_vs_reference(&cfg, "f16, GQA 4/2, separate head", 1e-9);
    cfg.f16 = 0, cfg.n_kv_heads = 4, cfg.rope_dim = 8, cfg.rope_base = 500000, cfg.eps = 1e-6f, cfg.seed = 3;
    test_vs_reference(&cfg, "f32, MHA, partial RoPE 8/16", 1e-9);
    cfg.n_heads = 8, cfg.n_kv_heads = 1, cfg.rope_dim = 0, cfg.seed = 4;
    test_vs_reference(&cfg, "f32, MQA 8/1", 1e-9);
    cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.head_dim = 24, cfg.rope_linear = 4, cfg.rope_freqs = 1, cfg.seed = 5;
    test_vs_reference(&cfg, "key_length 24, linear x4, rope_freqs", 1e-9);
    fkv_model_init_preset("small", &cfg);
    cfg.f16 = 1, cfg.n_layers = 2, cfg.seed = 6;
    test_vs_reference(&cfg, "small preset shape (2 layers), f16", 1e-9);
    fkv_model_init_preset("tiny", &cfg);
    cfg.dim = 64, cfg.n_layers = 2, cfg.hidden = 96, cfg.wtype = FKV_GGML_Q8_0, cfg.tied = 0, cfg.seed = 7;
    test_vs_reference(&cfg, "q8_0 weights, GQA 4/2", 1e-9);
    cfg.wtype = FKV_GGML_Q4_0, cfg.tied = 1, cfg.seed = 8;
    test_vs_reference(&cfg, "q4_0 weights, tied head", 1e-9);
    test_blocks();
    test_loops();
    test_batching();
    test_paged();
    test_load_errors();
    test_cli();
    return check_done();
}
