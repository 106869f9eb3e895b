/* Attention kernels against an fp64 reference on the original contiguous
 * data, by normalized MSE (llama.cpp's test-backend-ops criterion):
 * fp32 chunks <= 1e-10, fp16 <= 1e-6, int8 <= 1e-3, int4 <= 3e-2 (bound of the
 * sequence's lowest precision).  Random chunk sizes, mixed precisions in one
 * sequence, scattered pages, GQA ratios 1/4/8, Gaussian keys and keys with
 * outlier channels, scalar and vector paths, 1 and 3 threads, decode batches
 * and causal prefill.  The fp8 micro-kernels of each path are checked bit for
 * bit against that path's fp32 kernels on decoded rows (fp8_kernels);
 * attention over fp8 chunks is in test_quant_fp8. */
#include <stdio.h>

#include "attn_fixture.h"
#include "quant/simd.h"

static int n_cases;
static double worst[4]; /* largest nmse seen per lowest dtype */

static void note(fkv_dtype lo, double e)
{
    if (e > worst[lo]) worst[lo] = e;
}

static void run_case(rng *r, fkv_dtype base, const fkv_dtype *dts, int n_dt, uint32_t ratio,
                     uint32_t head_dim, int outliers, fkv_attn_pool *pool, int prefill)
{
    fkv_kv_geom g = {0};
    g.n_layers = 2;
    g.n_kv_heads = 1 + rng_below(r, 3);
    g.head_dim = head_dim;
    g.page_tokens = (uint32_t[]){4, 8, 16}[rng_below(r, 3)];
    g.base = base;
    g.n_pages = 4096;
    fx f;
    fx_init(&f, g, r);
    const uint32_t n_heads = g.n_kv_heads * ratio, D = head_dim, layer = 1;
    const float scale = 1.0f / sqrtf((float)D);
    size_t nseq = prefill ? 1 : 1 + rng_below(r, 3);
    fxseq seqs[3];
    fkv_attn_seq as[3];
    for (size_t b = 0; b < nseq; b++) {
        fx_seq(&f, &seqs[b], 1 + rng_below(r, 700), 1 + rng_below(r, 160), dts, n_dt, outliers, r);
        as[b] = (fkv_attn_seq){seqs[b].tab, seqs[b].n_chunks, NULL, NULL};
    }
    fkv_attn_kv kv = {&f.g, layer, f.layers[layer].k, f.layers[layer].v};
    char err[256] = "";
    if (!prefill) {
        size_t qn = nseq * n_heads * D;
        float *q = malloc(qn * sizeof *q), *out = malloc(qn * sizeof *out);
        double *ref = malloc(qn * sizeof *ref);
        REQUIRE(q && out && ref);
        for (size_t i = 0; i < qn; i++) q[i] = (float)rng_gauss(r);
        fkv_status st = fkv_attn_decode(pool, &kv, n_heads, as, nseq, q, out, scale, err, sizeof err);
        CHECKF(st == FKV_OK, "%s", err);
        for (size_t b = 0; b < nseq; b++) {
            fx_ref(&f, &seqs[b], layer, NULL, n_heads, q + b * n_heads * D, seqs[b].n - 1, scale,
                   ref + b * n_heads * D, NULL);
            double e = fx_nmse(ref + b * n_heads * D, out + b * n_heads * D, (size_t)n_heads * D);
            fkv_dtype lo = fx_lowest(&seqs[b], NULL);
            note(lo, e);
            CHECKF(e <= fx_bound(lo), "decode nmse %.3g > %.0e (lowest %d, base %d, ratio %u, D %u, n %u, outliers %d, %s)",
                   e, fx_bound(lo), (int)lo, (int)base, ratio, D, seqs[b].n, outliers, fkv__simd()->name);
        }
        free(q), free(out), free(ref);
    } else {
        const fxseq *s = &seqs[0];
        uint32_t n_q = 1 + rng_below(r, s->n < 40 ? s->n : 40), pos0 = s->n - n_q - rng_below(r, 3 < s->n - n_q + 1 ? 3 : s->n - n_q + 1);
        size_t qn = (size_t)n_q * n_heads * D;
        float *q = malloc(qn * sizeof *q), *out = malloc(qn * sizeof *out);
        double *ref = malloc(qn * sizeof *ref);
        REQUIRE(q && out && ref);
        for (size_t i = 0; i < qn; i++) q[i] = (float)rng_gauss(r);
        fkv_status st = fkv_attn_prefill(pool, &kv, n_heads, &as[0], pos0, n_q, q, out, scale, err, sizeof err);
        CHECKF(st == FKV_OK, "%s", err);
        for (uint32_t i = 0; i < n_q; i++)
            fx_ref(&f, s, layer, NULL, n_heads, q + (size_t)i * n_heads * D, pos0 + i, scale,
                   ref + (size_t)i * n_heads * D, NULL);
        double e = fx_nmse(ref, out, qn);
        fkv_dtype lo = fx_lowest(s, NULL);
        note(lo, e);
        CHECKF(e <= fx_bound(lo), "prefill nmse %.3g > %.0e (lowest %d, ratio %u, D %u, n %u, q %u@%u, %s)", e,
               fx_bound(lo), (int)lo, ratio, D, s->n, n_q, pos0, fkv__simd()->name);
        free(q), free(out), free(ref);
    }
    for (size_t b = 0; b < nseq; b++) fx_seq_free(&seqs[b]);
    fx_free(&f);
    n_cases++;
}

static void bad_args(fkv_attn_pool *pool)
{
    rng r = {7};
    fkv_kv_geom g = {1, 2, 32, 8, FKV_F32, 0, 64};
    fx f;
    fx_init(&f, g, &r);
    fxseq s;
    fkv_dtype dt = FKV_F32;
    fx_seq(&f, &s, 50, 20, &dt, 1, 0, &r);
    float q[4 * 32] = {0}, out[4 * 32];
    char err[256];
    fkv_attn_kv kv = {&f.g, 0, f.layers[0].k, f.layers[0].v};
    fkv_attn_seq as = {s.tab, s.n_chunks, NULL, NULL};
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_OK);
    err[0] = 0;
    CHECK(fkv_attn_decode(pool, &kv, 3, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL && err[0]);
    kv.layer = 1;
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL);
    kv.layer = 0;
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, NULL, out, 1.0f, err, sizeof err) == FKV_EINVAL);
    uint32_t saved = s.views[1].pages[0];
    ((uint32_t *)s.views[1].pages)[0] = 64; /* out of the pool */
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL && strstr(err, "pages"));
    ((uint32_t *)s.views[1].pages)[0] = saved;
    s.views[1].resident = 0; /* evicted but not dropped */
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_ESTATE);
    s.views[1].resident = 1;
    s.views[1].dtype = FKV_F16; /* not the base dtype */
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL);
    s.views[1].dtype = FKV_INT8; /* quantized without qmeta */
    CHECK(fkv_attn_decode(pool, &kv, 4, &as, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL);
    s.views[1].dtype = FKV_F32;
    CHECK(fkv_attn_prefill(pool, &kv, 4, &as, 50, 1, q, out, 1.0f, err, sizeof err) == FKV_EINVAL); /* past the table */
    CHECK(fkv_attn_prefill(pool, &kv, 4, &as, 49, 1, q, out, 1.0f, err, sizeof err) == FKV_OK);
    fx_seq_free(&s);
    fx_free(&f);
}

/* The VNNI kernels.  Keys: each query row becomes sq * (hi + lo / 256)
 * (sq = amax / 127 of the row), so each score is within
 * scale * sq / 256 * (sum of the row's codes) of the exact dot product, plus
 * float rounding.  Values: each probability row becomes int16 codes of step
 * sw = amax / 32767, so each output is within sw / 2 * (sum of the
 * channel's codes over the run) of the exact sum.  Checked against fp64
 * sums for int8 and int4 codes, widths the fast paths take and ones they
 * leave to the FMA kernels, more rows than one block of four, runs of 1 to
 * 64 tokens (odd ones too), an outlier channel, a zero row, a negative
 * probability, and an offset into the rows. */
static void vnni_bound(rng *r)
{
    const fkv__simd_ops *v = fkv__simd_vnni_ops();
    if (!v) {
        printf("VNNI kernels: skipped, this CPU has no AVX512-VNNI/DQ/VBMI\n");
        return;
    }
    enum { M = 6, TM = 64, OFF = 5 };
    static const size_t dims[] = {8, 32, 40, 64, 128, 200, 256, 512};
    static const size_t runs[] = {1, 3, 16, 17, 63, 64};
    int cases = 0;
    for (int u4 = 0; u4 < 2; u4++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t ti = 0; ti < sizeof runs / sizeof runs[0]; ti++) {
                const size_t d = dims[di], rb = u4 ? d / 2 : d, T = runs[ti];
                static float q[M * 512], out[M * TM], p[M * TM], acc[M * 512];
                static char rowbuf[TM][OFF + 512];
                const char *rows[TM];
                for (size_t i = 0; i < M * d; i++) q[i] = (float)rng_gauss(r);
                q[3] *= 50;                                     /* an outlier channel in row 0 */
                for (size_t j = 0; j < d; j++) q[1 * d + j] = 0; /* a zero row */
                for (size_t i = 0; i < M * T; i++) p[i] = (float)rng_unif(r);
                for (size_t t = 0; t < T; t++) p[1 * T + t] = 0, p[2 * T + t] *= 1e-30f; /* a zero row, a tiny one */
                p[3 * T] = 40.0f;                                                     /* one dominant token */
                p[4 * T + T / 2] = -0.5f;
                for (size_t t = 0; t < T; t++) {
                    for (size_t b = 0; b < OFF + rb; b++) rowbuf[t][b] = (char)rng_below(r, 256);
                    rows[t] = rowbuf[t];
                }
                const float scale = 0.125f;
                const int fmt = u4 ? FKV__FMT_U4 : FKV__FMT_U8;
                v->qk[fmt](M, q, T, rows, OFF, d, scale, out, TM);
                for (size_t i = 0; i < M * d; i++) acc[i] = (float)rng_gauss(r);
                float acc0[M * 512];
                memcpy(acc0, acc, sizeof(float) * M * d);
                v->pv[fmt](M, p, T, T, rows, OFF, d, acc, d);
                for (int m = 0; m < M; m++) {
                    double amax = 0, pmax = 0;
                    for (size_t j = 0; j < d; j++) amax = fmax(amax, fabs(q[m * d + j]));
                    for (size_t t = 0; t < T; t++) pmax = fmax(pmax, fabs(p[m * T + t]));
                    for (size_t t = 0; t < T; t++) {
                        const unsigned char *c = (const unsigned char *)rows[t] + OFF;
                        double exact = 0, csum = 0, mag = 0;
                        for (size_t j = 0; j < d; j++) {
                            unsigned code = u4 ? (c[j / 2] >> (4 * (j % 2))) & 15u : c[j];
                            exact += (double)q[m * d + j] * code, csum += code, mag += fabs(q[m * d + j]) * code;
                        }
                        double err = fabs(out[m * TM + t] - scale * exact);
                        double bound = scale * (amax / 127 / 256 * csum + 1e-6 * mag);
                        CHECKF(err <= bound, "vnni qk %s d %zu T %zu row %d token %zu: |%.8g - %.8g| > %.3g",
                               u4 ? "int4" : "int8", d, T, m, t, out[m * TM + t], scale * exact, bound);
                    }
                    for (size_t j = 0; j < d; j++) {
                        double exact = acc0[m * d + j], csum = 0, mag = fabs(acc0[m * d + j]);
                        for (size_t t = 0; t < T; t++) {
                            const unsigned char *c = (const unsigned char *)rows[t] + OFF;
                            unsigned code = u4 ? (c[j / 2] >> (4 * (j % 2))) & 15u : c[j];
                            exact += (double)p[m * T + t] * code, csum += code, mag += fabs(p[m * T + t]) * code;
                        }
                        double err = fabs(acc[m * d + j] - exact);
                        double bound = pmax / 32767 / 2 * csum + 1e-6 * mag;
                        CHECKF(err <= bound, "vnni pv %s d %zu T %zu row %d channel %zu: |%.8g - %.8g| > %.3g",
                               u4 ? "int4" : "int8", d, T, m, j, acc[m * d + j], exact, bound);
                    }
                }
                cases++;
            }
    printf("VNNI kernels: %d cases within their bounds\n", cases);
}

/* The fp8 micro-kernels (qk8, pv8: E4M3 codes widened in registers to
 * e4m3(code) * s) of the scalar, AVX2 and AVX-512 tables give the same bits
 * as the fp32 kernels of the same table on rows decoded by the scalar fp8
 * decoder (fkv__fp8_scalar, the reference of fp8.h): widths that are and are
 * not multiples of 8 and 16, every one of the 256 codes (the NaN codes
 * too), an offset into the rows, a zero probability, scales from subnormal
 * to 1e36. */
static void fp8_kernels(rng *r)
{
    enum { M = 6, T = 5, OFF = 3, DMAX = 256 };
    static const size_t dims[] = {8, 12, 16, 40, 64, 128, 136, 256};
    static const float scales[] = {1.0f, 0.37f, 3e-3f, 1e-40f, 2.5e4f, 1e36f};
    static const int paths[] = {0, 2, 1}; /* scalar, AVX2, the best (AVX-512 where there) */
    int checked = 0;
    for (int pi = 0; pi < 3; pi++) {
        fkv__simd_force(paths[pi]);
        const fkv__simd_ops *o = fkv__simd();
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
                const size_t d = dims[di];
                const float sc = scales[si];
                float q[M * DMAX], p[M * T], dec[T][DMAX], o8[M * T], of[M * T], a8[M * DMAX], af[M * DMAX];
                char buf[T][OFF + DMAX];
                const char *rows[T], *drows[T];
                for (size_t i = 0; i < M * d; i++) q[i] = (float)rng_gauss(r);
                for (int i = 0; i < M * T; i++) p[i] = i == 7 ? 0.0f : (float)rng_unif(r);
                for (int t = 0; t < T; t++) {
                    for (size_t j = 0; j < OFF + d; j++)
                        buf[t][j] = (char)(d == 256 && t == 0 && j >= OFF ? (int)(j - OFF) : (int)rng_below(r, 256));
                    rows[t] = buf[t];
                    fkv__fp8_scalar.dec((const uint8_t *)buf[t] + OFF, sc, dec[t], d);
                    drows[t] = (const char *)dec[t];
                }
                o->qk8(M, q, T, rows, OFF, d, sc, 0.125f, o8, T);
                o->qk[FKV__FMT_F32](M, q, T, drows, 0, d, 0.125f, of, T);
                CHECKF(memcmp(o8, of, sizeof(float) * M * T) == 0, "%s qk8 d %zu scale %g: not the fp32 kernel's bits",
                       o->name, d, sc);
                for (size_t i = 0; i < M * d; i++) a8[i] = af[i] = (float)rng_gauss(r);
                o->pv8(M, p, T, T, rows, OFF, d, sc, a8, d);
                o->pv[FKV__FMT_F32](M, p, T, T, drows, 0, d, af, d);
                CHECKF(memcmp(a8, af, sizeof(float) * M * d) == 0, "%s pv8 d %zu scale %g: not the fp32 kernel's bits",
                       o->name, d, sc);
                checked++;
            }
    }
    fkv__simd_force(1);
    printf("fp8 kernels: %d cases, each path's bits equal its fp32 kernels' on decoded rows\n", checked);
}

int main(void)
{
    rng r = {12345};
    rng rv = {99}; /* its own stream: the cases below see the same numbers as without it */
    vnni_bound(&rv);
    rng rf = {4242};
    fp8_kernels(&rf);
    fkv_attn_pool *p3 = NULL;
    REQUIRE(fkv_attn_pool_create(3, &p3) == FKV_OK);
    static const fkv_dtype f32_only[] = {FKV_F32}, f32_mix[] = {FKV_F32, FKV_INT8},
                           f16_only[] = {FKV_F16}, f16_i8[] = {FKV_F16, FKV_INT8},
                           f16_all[] = {FKV_F16, FKV_INT8, FKV_INT4}, i4_only[] = {FKV_INT4},
                           f32_all[] = {FKV_F32, FKV_INT8, FKV_INT4};
    struct { fkv_dtype base; const fkv_dtype *d; int n; } mixes[] = {
        {FKV_F32, f32_only, 1}, {FKV_F32, f32_mix, 2}, {FKV_F32, f32_all, 3}, {FKV_F16, f16_only, 1},
        {FKV_F16, f16_i8, 2},   {FKV_F16, f16_all, 3}, {FKV_F16, i4_only, 1},
    };
    const uint32_t ratios[] = {1, 4, 8}, dims[] = {128, 64, 40};
    int reps = (int)(2 * check_scale() + 0.5);
    if (reps < 1) reps = 1;
    /* scalar, the best path (AVX-512 kernels where the CPU has them, VNNI
     * ones where it has those), AVX2's kernels when they are not the best,
     * and AVX-512's FMA kernels when the VNNI ones are */
    int n_paths = fkv__simd_vnni_ops() ? 4 : fkv__simd_avx512_ops() ? 3 : 2;
    if (n_paths == 2) printf("AVX-512 kernels: skipped, this CPU has no AVX-512F/BW/VL\n");
    for (int simd = 0; simd < n_paths; simd++) {
        fkv__simd_force(simd);
        for (int rep = 0; rep < reps; rep++)
            for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++)
                for (int ri = 0; ri < 3; ri++)
                    for (int outl = 0; outl < 2; outl++) {
                        uint32_t D = dims[rng_below(&r, 3)];
                        fkv_attn_pool *pool = rng_below(&r, 2) ? p3 : NULL;
                        run_case(&r, mixes[m].base, mixes[m].d, mixes[m].n, ratios[ri], D, outl, pool, 0);
                        run_case(&r, mixes[m].base, mixes[m].d, mixes[m].n, ratios[ri], D, outl, pool, 1);
                    }
    }
    fkv__simd_force(1);
    bad_args(p3);
    bad_args(NULL);
    fkv_attn_pool_destroy(p3);
    printf("%d kernel cases, vector path: %s\n", n_cases, fkv_simd_path());
    printf("worst nmse by lowest chunk dtype: f32 %.2g (bound 1e-10), f16 %.2g (1e-6), int8 %.2g (1e-3), int4 %.2g (3e-2)\n",
           worst[FKV_F32], worst[FKV_F16], worst[FKV_INT8], worst[FKV_INT4]);
    return check_done();
}
