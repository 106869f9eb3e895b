/* The int8 / int4 codecs on the groups that break naive quantizers: an
 * outlier channel of 1e4 among O(1) values (keys: one channel of every
 * token, or one token of a channel; values: one channel of a token's
 * group), groups whose range is zero (all equal, all zero, negative
 * constants, the fp16 extremes), a group spanning the whole fp16 range, and
 * values in the fp16 subnormal range.  Every decoded element must be finite
 * and within the documented bound of its own group (fairkv_quant.h):
 *     |x - decoded| <= scale / 2 (before the base-dtype rounding),
 *     scale <= ((max - min) + u) / qmax * (1 + 2^-10) + 2^-24,
 * u one fp16 ulp of the group minimum.  A zero-range group of an
 * fp16-representable value c decodes exactly: its zero point is c rounded
 * down (c itself) and its scale (c - zero) / qmax rounded up (0).  Both
 * vector paths, which must also agree byte for byte, for fp32 and fp16
 * bases. */
#include <stdio.h>

#include "attn_fixture.h"
#include "quant/layout.h"
#include "quant/simd.h"

enum { NT = 100 }; /* two key groups: 64 + 36 tokens (the checks assume at most two) */

/* one fp16 ulp at |x| (subnormal spacing below 2^-14) */
static double ulp16(double x)
{
    x = fabs(x);
    if (x < 6.103515625e-05) return 5.9604644775390625e-08;
    return ldexp(1.0, (int)floor(log2(x)) - 10);
}

static int fp16_exact(double x) { return fkv_f16_to_f32(fkv_f32_to_f16((float)x)) == x; }

/* the stored (base dtype) value of x */
static float stored(fkv_dtype base, float x) { return base == FKV_F16 ? fkv_f16_to_f32(fkv_f32_to_f16(x)) : x; }

static float read_el(fkv_dtype base, const char *row, size_t e)
{
    if (base == FKV_F32) {
        float y;
        memcpy(&y, row + 4 * e, 4);
        return y;
    }
    uint16_t h;
    memcpy(&h, row + 2 * e, 2);
    return fkv_f16_to_f32(h);
}

typedef struct result {
    float *k, *v;    /* decoded, [NT][E] (layer 0) */
    int bad, nonfin; /* elements outside their bound, decoded values not finite */
    int bad_scale;   /* stored scales above the documented maximum */
} result;

/* Quantizes one chunk of NT tokens holding k, v ([NT][E], one layer) to dt
 * with the current vector path, decodes it, and checks every element
 * against its group's bound.  codes/meta (may be NULL) receive the bytes. */
static void round_trip(const char *what, fkv_dtype base, fkv_dtype dt, uint32_t D, const float *k,
                       const float *v, result *res, unsigned char *codes, uint16_t *meta_out)
{
    rng r = {1};
    fkv_kv_geom g = {1, 2, D, 16, base, 0, 64};
    fx f;
    fx_init(&f, g, &r);
    const uint32_t E = 2 * D, nb = fkv_quant_pages_needed(&g, base, NT), nq = fkv_quant_pages_needed(&g, dt, NT);
    fxseq s;
    fx_seq_alloc(&f, &s, NT);
    memcpy(s.k, k, (size_t)NT * E * sizeof(float));
    memcpy(s.v, v, (size_t)NT * E * sizeof(float));
    const uint32_t len = NT;
    const fkv_dtype bdt = base;
    fx_seq_place(&f, &s, &len, &bdt, 1); /* base pages; quantized by hand below */
    const fkv_chunk_view *c = s.tab[0];
    const size_t mb = fkv_quant_meta_bytes(&g, dt, NT);
    uint16_t *meta = malloc(mb);
    uint32_t dst[64], back[64];
    REQUIRE(meta && nq <= 32 && nb <= 32);
    for (uint32_t i = 0; i < nq; i++) dst[i] = f.free_pages[--f.n_free];
    for (uint32_t i = 0; i < nb; i++) back[i] = f.free_pages[--f.n_free];
    char err[256] = "";
    CHECKF(fkv_quant_chunk(&g, f.layers, NT, c->pages, nb, dt, dst, nq, meta, mb, err, sizeof err) == FKV_OK,
           "%s: %s", what, err);
    CHECKF(fkv_dequant_chunk(&g, f.layers, NT, dt, dst, nq, meta, mb, back, nb, err, sizeof err) == FKV_OK,
           "%s: %s", what, err);
    const uint64_t stride = fkv_kv_page_bytes(&g), qrb = fkv__row_bytes(&g, dt), brb = fkv__row_bytes(&g, base);
    const uint32_t qtpp = fkv_quant_tokens_per_page(&g, dt);
    if (codes)
        for (int is_v = 0; is_v < 2; is_v++)
            for (uint32_t t = 0; t < NT; t++)
                memcpy(codes + ((size_t)is_v * NT + t) * qrb,
                       (const char *)(is_v ? f.layers[0].v : f.layers[0].k) + dst[t / qtpp] * stride + (t % qtpp) * qrb, qrb);
    if (meta_out) memcpy(meta_out, meta, mb);
    const double qmax = dt == FKV_INT8 ? 255 : 15;
    const uint32_t G = fkv__vgroup(dt);
    res->bad = res->nonfin = res->bad_scale = 0;
    double *xs = malloc((size_t)NT * E * sizeof *xs), *glo = malloc(2 * E * sizeof *glo), *ghi = malloc(2 * E * sizeof *ghi);
    REQUIRE(xs && glo && ghi);
    for (int is_v = 0; is_v < 2; is_v++) {
        const float *x0 = is_v ? v : k;
        float *out = is_v ? res->v : res->k;
        const char *arr = is_v ? f.layers[0].v : f.layers[0].k;
        for (size_t i = 0; i < (size_t)NT * E; i++) xs[i] = stored(base, x0[i]);
        for (uint32_t kg = 0; kg < 2; kg++) /* key groups: (channel, FKV_QK_GROUP tokens) */
            for (uint32_t e = 0; e < E; e++) {
                glo[kg * E + e] = INFINITY, ghi[kg * E + e] = -INFINITY;
                for (uint32_t u = kg * FKV_QK_GROUP; u < NT && u < (kg + 1) * FKV_QK_GROUP; u++) {
                    double z = xs[(size_t)u * E + e];
                    glo[kg * E + e] = z < glo[kg * E + e] ? z : glo[kg * E + e];
                    ghi[kg * E + e] = z > ghi[kg * E + e] ? z : ghi[kg * E + e];
                }
            }
        for (uint32_t t = 0; t < NT; t++)
            for (uint32_t h = 0; h < 2; h++) {
                double vlo = 0, vhi = 0; /* the current value group's range (token t, G channels) */
                for (uint32_t d = 0; d < D; d++) {
                    const size_t e = (size_t)h * D + d;
                    double x = xs[(size_t)t * E + e];
                    double y = read_el(base, arr + back[t / g.page_tokens] * stride + (t % g.page_tokens) * brb, e);
                    out[(size_t)t * E + e] = (float)y;
                    /* the element's group: keys (h, d) over FKV_QK_GROUP tokens, values (t, h) over G channels */
                    double lo, hi, sc;
                    if (!is_v) {
                        lo = glo[(t / FKV_QK_GROUP) * E + e], hi = ghi[(t / FKV_QK_GROUP) * E + e];
                        sc = fkv_f16_to_f32(fkv__kmeta(meta, &g, NT, h, t / FKV_QK_GROUP)[d]);
                    } else {
                        if (d % G == 0) {
                            vlo = INFINITY, vhi = -INFINITY;
                            for (uint32_t u = d; u < D && u < d + G; u++) {
                                double z = xs[(size_t)t * E + h * D + u];
                                vlo = z < vlo ? z : vlo, vhi = z > vhi ? z : vhi;
                            }
                        }
                        lo = vlo, hi = vhi;
                        sc = fkv_f16_to_f32(fkv__vmeta(meta, &g, dt, NT, h, d / G)[t]);
                    }
                    double smax = (hi - lo + ulp16(lo)) / qmax * (1 + 0x1p-10) + 0x1p-24;
                    if (!(sc <= smax)) {
                        if (res->bad_scale++ < 3)
                            fprintf(stderr, "%s: %s t%u h%u d%u: scale %.6g above %.6g (group [%.6g, %.6g])\n", what,
                                    is_v ? "V" : "K", t, h, d, sc, smax, lo, hi);
                    }
                    /* one fp32 rounding of code * scale (exact) + zero, then the base dtype's */
                    double bound = 0.5 * sc * (1 + 1e-5) + 0x1p-24 * (fabs(x) + sc) +
                                   (base == FKV_F16 ? 0.5 * ulp16(y) : 0);
                    if (!isfinite(y)) {
                        if (res->nonfin++ < 3)
                            fprintf(stderr, "%s: %s t%u h%u d%u: x %.8g decoded to %g\n", what, is_v ? "V" : "K", t,
                                    h, d, x, y);
                    } else if (!(fabs(x - y) <= bound)) {
                        if (res->bad++ < 3)
                            fprintf(stderr, "%s: %s t%u h%u d%u: x %.8g decoded %.8g, error %.3g > bound %.3g\n", what,
                                    is_v ? "V" : "K", t, h, d, x, y, fabs(x - y), bound);
                    }
                }
            }
    }
    free(xs), free(glo), free(ghi);
    free(meta);
    fx_seq_free(&s);
    fx_free(&f);
}

/* Runs one case on both vector paths: the bounds on each, and the same
 * codes, scales and decoded values from both.  Returns the scalar path's
 * decoded values in out (for the case's own exactness checks). */
static void both_paths(const char *what, fkv_dtype base, fkv_dtype dt, uint32_t D, const float *k,
                       const float *v, result *out)
{
    const size_t E = 2 * D, cb = 2 * NT * E, mb = fkv_quant_meta_bytes(&(fkv_kv_geom){1, 2, D, 16, base, 0, 64}, dt, NT);
    unsigned char *c0 = calloc(cb, 1), *c1 = calloc(cb, 1);
    uint16_t *m0 = calloc(mb, 1), *m1 = calloc(mb, 1);
    result r1 = {malloc(NT * E * sizeof(float)), malloc(NT * E * sizeof(float)), 0, 0, 0};
    REQUIRE(c0 && c1 && m0 && m1 && r1.k && r1.v);
    char name[160];
    int avx = fkv__simd_avx2_ops() != NULL;
    for (int p = 0; p < 1 + avx; p++) {
        fkv__simd_force(p);
        result *r = p ? &r1 : out;
        snprintf(name, sizeof name, "%s (base %s, %s, D %u, %s)", what, base == FKV_F32 ? "f32" : "f16",
                 dt == FKV_INT8 ? "int8" : "int4", D, fkv__simd()->name);
        round_trip(name, base, dt, D, k, v, r, p ? c1 : c0, p ? m1 : m0);
        CHECKF(r->nonfin == 0, "%s: %d decoded values not finite", name, r->nonfin);
        CHECKF(r->bad == 0, "%s: %d decoded values outside their bound", name, r->bad);
        CHECKF(r->bad_scale == 0, "%s: %d scales above the documented maximum", name, r->bad_scale);
    }
    if (avx && fkv__simd() != &fkv__simd_scalar) {
        CHECKF(memcmp(c0, c1, cb) == 0, "%s: scalar and avx2 codes differ", what);
        CHECKF(memcmp(m0, m1, mb) == 0, "%s: scalar and avx2 scales differ", what);
        CHECKF(memcmp(out->k, r1.k, NT * E * sizeof(float)) == 0 && memcmp(out->v, r1.v, NT * E * sizeof(float)) == 0,
               "%s: scalar and avx2 decoded values differ", what);
    }
    fkv__simd_force(1);
    free(c0), free(c1), free(m0), free(m1), free(r1.k), free(r1.v);
}

/* max |x - decoded| over the elements (t, h, d) with sel(t, h, d) true */
static double max_err(fkv_dtype base, const float *x, const float *y, uint32_t D,
                      int (*sel)(uint32_t t, uint32_t h, uint32_t d, uint32_t D))
{
    double m = 0;
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++)
            for (uint32_t d = 0; d < D; d++)
                if (sel(t, h, d, D)) {
                    size_t i = ((size_t)t * 2 + h) * D + d;
                    double e = fabs((double)stored(base, x[i]) - y[i]);
                    m = e > m || e != e ? e : m;
                }
    return m;
}

enum { OC = 5 }; /* the outlier channel */
/* value channels outside the outlier's channel group */
static int other_vgroup8(uint32_t t, uint32_t h, uint32_t d, uint32_t D) { (void)t, (void)h, (void)D; return d / FKV_QV_GROUP_INT8 != OC / FKV_QV_GROUP_INT8; }
static int other_vgroup4(uint32_t t, uint32_t h, uint32_t d, uint32_t D) { (void)t, (void)h, (void)D; return d / FKV_QV_GROUP_INT4 != OC / FKV_QV_GROUP_INT4; }
static int all_el(uint32_t t, uint32_t h, uint32_t d, uint32_t D) { (void)t, (void)h, (void)d, (void)D; return 1; }

static void gauss_fill(rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_gauss(r);
}

/* Outliers of +-1e4 in O(1) data.  Keys: channel OC of every token is
 * 1e4 + N(0,1) (a per-channel scale isolates it), and in the second key
 * group one token's channel 2 is -1e4 (that channel's group is coarse, the
 * other channels are not).  Values: channel OC of every token is 1e4 (its
 * channel group of that token is coarse, the other groups are not). */
static void outliers(rng *r, fkv_dtype base, fkv_dtype dt, uint32_t D)
{
    const size_t E = 2 * D, n = NT * E;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    result res = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), 0, 0, 0};
    REQUIRE(k && v && res.k && res.v);
    gauss_fill(r, k, n);
    gauss_fill(r, v, n);
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++) {
            k[(t * 2 + h) * D + OC] = (float)(1e4 + rng_gauss(r));
            v[(t * 2 + h) * D + OC] = h ? -1e4f : 1e4f;
        }
    k[(70 * 2 + 1) * D + 2] = -1e4f;
    both_paths("outliers 1e4", base, dt, D, k, v, &res);
    const double qmax = dt == FKV_INT8 ? 255 : 15;
    /* an O(1) element's error is set by its own group's range (under 15
     * for the Gaussian data here), not by an outlier's 1e4: the isolation
     * each layout promises (the bound above, restated) */
    double ek = 0;
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++)
            for (uint32_t d = 0; d < D; d++) {
                if (d == OC || (h == 1 && d == 2 && t >= FKV_QK_GROUP)) continue;
                size_t i = ((size_t)t * 2 + h) * D + d;
                double e = fabs((double)stored(base, k[i]) - res.k[i]);
                ek = e > ek || e != e ? e : ek;
            }
    CHECKF(ek <= 15.0 / qmax, "outlier keys: O(1) channels' error %.3g", ek);
    double ev = max_err(base, v, res.v, D, dt == FKV_INT8 ? other_vgroup8 : other_vgroup4);
    CHECKF(ev <= 15.0 / qmax, "outlier values: other channel groups' error %.3g", ev);
    free(k), free(v), free(res.k), free(res.v);
}

/* Zero-range groups: every key channel and every value group constant.
 * fp16-representable constants decode exactly; a constant that is not
 * (fp32 base) decodes within the zero-range bound (u / qmax). */
static void constant(fkv_dtype base, fkv_dtype dt, uint32_t D, float c, const char *what)
{
    const size_t E = 2 * D, n = NT * E;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    result res = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), 0, 0, 0};
    REQUIRE(k && v && res.k && res.v);
    for (size_t i = 0; i < n; i++) k[i] = v[i] = c;
    both_paths(what, base, dt, D, k, v, &res);
    double ek = max_err(base, k, res.k, D, all_el), ev = max_err(base, v, res.v, D, all_el);
    if (fp16_exact(stored(base, c)))
        CHECKF(ek == 0 && ev == 0, "%s (base %d, dt %d): constant %.9g not exact: errors %.3g, %.3g", what, (int)base,
               (int)dt, c, ek, ev);
    free(k), free(v), free(res.k), free(res.v);
}

/* Mixed: some zero-range groups among ordinary ones in the same chunk (a
 * constant key channel, an all-zero value group, a negative-constant value
 * group), the first key group constant in one channel and the second not. */
static void mixed_constant_groups(rng *r, fkv_dtype base, fkv_dtype dt, uint32_t D)
{
    const size_t E = 2 * D, n = NT * E;
    const uint32_t G = fkv__vgroup(dt);
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    result res = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), 0, 0, 0};
    REQUIRE(k && v && res.k && res.v);
    gauss_fill(r, k, n);
    gauss_fill(r, v, n);
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++) {
            float *kr = k + (t * 2 + h) * D, *vr = v + (t * 2 + h) * D;
            kr[1] = -3.25f;                          /* constant channel */
            kr[4] = 0.0f;                            /* zero channel */
            if (t < FKV_QK_GROUP) kr[6] = 7.0f;      /* constant in the first group only */
            for (uint32_t d = 0; d < G && d < D; d++) vr[d] = t % 2 ? 0.0f : -1.5f; /* group 0 constant */
        }
    both_paths("zero-range groups among others", base, dt, D, k, v, &res);
    int bad = 0;
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++) {
            const size_t i = ((size_t)t * 2 + h) * D;
            bad += res.k[i + 1] != -3.25f || res.k[i + 4] != 0.0f || (t < FKV_QK_GROUP && res.k[i + 6] != 7.0f);
            for (uint32_t d = 0; d < G && d < D; d++) bad += res.v[i + d] != (t % 2 ? 0.0f : -1.5f);
        }
    CHECKF(bad == 0, "zero-range groups among others (base %d, dt %d): %d elements not exact", (int)base, (int)dt, bad);
    free(k), free(v), free(res.k), free(res.v);
}

/* Extremes of the fp16 range: a group spanning [-65504, 65504] (its scale is
 * the largest there is, and a code rounded up lands above 65504: an fp16
 * base must not decode that to infinity), and tiny values in the fp16
 * subnormal range next to zero. */
static void extremes(rng *r, fkv_dtype base, fkv_dtype dt, uint32_t D)
{
    const size_t E = 2 * D, n = NT * E;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    result res = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), 0, 0, 0};
    REQUIRE(k && v && res.k && res.v);
    for (size_t i = 0; i < n; i++) {
        double u = rng_unif(r);
        k[i] = v[i] = (float)(u * 131008.0 - 65504.0);
    }
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < 2; h++) {
            float *kr = k + (t * 2 + h) * D, *vr = v + (t * 2 + h) * D;
            kr[0] = t % 3 ? 65504.0f : -65504.0f; /* every key group holds both ends */
            kr[1] = t % 2 ? 65504.0f : 65000.0f;
            vr[0] = -65504.0f, vr[1] = 65504.0f, vr[2] = 65490.0f; /* both ends in value group 0 */
            kr[2] = (float)(rng_gauss(r) * 1e-6); /* fp16 subnormals (and fp32-only values) */
            kr[3] = t % 5 ? 0.0f : 3e-8f;
            for (uint32_t d = fkv__vgroup(dt); d < D; d++) vr[d] = (float)(rng_gauss(r) * 1e-6);
        }
    both_paths("fp16 extremes", base, dt, D, k, v, &res);
    free(k), free(v), free(res.k), free(res.v);
}

int main(void)
{
    rng r = {31337};
    static const fkv_dtype bases[] = {FKV_F32, FKV_F16}, qts[] = {FKV_INT8, FKV_INT4};
    /* 72: int8 value groups of 64 + 8 channels, int4 32 + 32 + 8 */
    static const uint32_t dims[] = {72, 16};
    static const float consts[] = {0.0f, -0.0f, 1.0f, -7.0f, -0.1f, 0.1f, 65504.0f, -65504.0f, -3e-8f, 1e-30f};
    for (int b = 0; b < 2; b++)
        for (int q = 0; q < 2; q++)
            for (int di = 0; di < 2; di++) {
                outliers(&r, bases[b], qts[q], dims[di]);
                mixed_constant_groups(&r, bases[b], qts[q], dims[di]);
                extremes(&r, bases[b], qts[q], dims[di]);
                for (size_t c = 0; c < sizeof consts / sizeof consts[0]; c++) {
                    char what[64];
                    snprintf(what, sizeof what, "constant %g", consts[c]);
                    constant(bases[b], qts[q], dims[di], consts[c], what);
                }
            }
    printf("vector paths: scalar%s\n", fkv__simd_avx2_ops() ? " and avx2 (where the CPU has it)" : "");
    return check_done();
}
