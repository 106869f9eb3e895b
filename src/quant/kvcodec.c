/* The block codecs of fairkv_quant.h: every precision the project prices,
 * as an encode / decode round trip over one layer's K and V of a block.
 *
 * int8, int4 and fp8-chunk go through the cache's own chunk codec (quant.c) on a
 * one-page fp32 geometry, so their accuracy is that of the stored chunks.
 * fp8 uses the E4M3 conversions (fp8.h; AVX-512 in simd_avx512.c); int4r
 * and int2 use the vector primitives of simd.h (AVX2 or scalar, the same
 * bits) with the group parameters of qparams.h. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fp8.h"
#include "quant/layout.h"
#include "quant/qparams.h"
#include "quant/simd.h"

static const char *const names[FKV_KVC_COUNT] = {"f32",  "f16",  "fp8",   "fp8-head", "int8",
                                                 "int4", "int4r", "int2", "fp8-chunk"};

const char *fkv_kvc_name(fkv_kvc c) { return (unsigned)c < FKV_KVC_COUNT ? names[c] : NULL; }

fkv_status fkv_kvc_parse(const char *s, fkv_kvc *out)
{
    for (int i = 0; s && i < FKV_KVC_COUNT; i++)
        if (!strcmp(s, names[i])) {
            *out = (fkv_kvc)i;
            return FKV_OK;
        }
    fkv__err(NULL, 0, "unknown KV precision '%s' (f32, f16, fp8, fp8-head, fp8-chunk, int8, int4, int4r, int2)", s ? s : "(null)");
    return FKV_EINVAL;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t fkv_kvc_bytes(fkv_kvc c, uint32_t T, uint32_t H, uint32_t D)
{
    if (!T || !H || !D) return 0;
    uint64_t e = (uint64_t)T * H * D; /* elements of K (and of V) */
    switch (c) {
    case FKV_KVC_F32: return 8 * e;
    case FKV_KVC_F16: return 4 * e;
    case FKV_KVC_FP8:
    case FKV_KVC_FP8_HEAD: return 2 * e;
    /* the cache's fp8 chunk: an fp32 scale per kv head for K and for V */
    case FKV_KVC_FP8_CHUNK: return 2 * e + 8 * (uint64_t)H;
    /* integer codecs: each group stores an fp16 scale and an fp16 zero */
    case FKV_KVC_INT8:
        return 2 * e + 4 * (uint64_t)H * ceil_div(T, FKV_QK_GROUP) * D + 4 * (uint64_t)T * H * ceil_div(D, FKV_QV_GROUP_INT8);
    case FKV_KVC_INT4:
        return e + 4 * (uint64_t)H * ceil_div(T, FKV_QK_GROUP) * D + 4 * (uint64_t)T * H * ceil_div(D, FKV_QV_GROUP_INT4);
    case FKV_KVC_INT4R:
        return e + 4 * (uint64_t)T * H * ceil_div(D, FKV_KVC_INT4R_GROUP) + 4 * (uint64_t)T * H * ceil_div(D, FKV_QV_GROUP_INT4);
    case FKV_KVC_INT2:
        return e / 2 + (e % 2) + 4 * (uint64_t)H * ceil_div(T, FKV_KVC_INT2_GROUP) * D +
               4 * (uint64_t)T * H * ceil_div(D, FKV_KVC_INT2_GROUP);
    default: return 0;
    }
}

/* ---------------------------------------------------------------- fp8 */

static void s_enc(const float *x, float inv, uint8_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++) q[i] = fkv__e4m3_enc(x[i] * inv);
}

static void s_dec(const uint8_t *q, float s, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = fkv__e4m3_dec(q[i]) * s;
}

const fkv__fp8_ops fkv__fp8_scalar = {"scalar", s_enc, s_dec};

const fkv__fp8_ops *fkv__fp8(void)
{
    static const fkv__fp8_ops *_Atomic best;
    static atomic_int known;
    if (fkv__simd() == &fkv__simd_scalar) return &fkv__fp8_scalar;
    if (!atomic_load(&known)) {
        const fkv__fp8_ops *b = fkv__fp8_avx512_ops();
        if (!b) b = fkv__fp8_avx2_ops(); /* fkv__simd() is AVX2's here */
        atomic_store(&best, b ? b : &fkv__fp8_scalar);
        atomic_store(&known, 1);
    }
    return atomic_load(&best);
}

const char *fkv_fp8_path(void) { return fkv__fp8()->name; }

uint8_t fkv_f32_to_e4m3(float x) { return fkv__e4m3_enc(x); }
float fkv_e4m3_to_f32(uint8_t c) { return fkv__e4m3_dec(c); }

fkv_status fkv_kvc_calib_init(fkv_kvc_calib *c, uint32_t n_layers, uint32_t n_kv_heads)
{
    memset(c, 0, sizeof *c);
    if (!n_layers || !n_kv_heads) {
        fkv__err(NULL, 0, "fkv_kvc_calib_init: n_layers and n_kv_heads must be >= 1");
        return FKV_EINVAL;
    }
    c->n_layers = n_layers, c->n_kv_heads = n_kv_heads;
    c->k_amax = calloc((size_t)n_layers * n_kv_heads, sizeof(float));
    c->v_amax = calloc((size_t)n_layers * n_kv_heads, sizeof(float));
    if (!c->k_amax || !c->v_amax) {
        fkv_kvc_calib_free(c);
        return FKV_ENOMEM;
    }
    return FKV_OK;
}

void fkv_kvc_calib_free(fkv_kvc_calib *c)
{
    free(c->k_amax);
    free(c->v_amax);
    c->k_amax = c->v_amax = NULL;
}

fkv_status fkv_kvc_calib_observe(fkv_kvc_calib *c, uint32_t layer, const float *k, const float *v, uint32_t T,
                                 uint32_t D)
{
    if (!c || !c->k_amax || layer >= c->n_layers || !k || !v || !D) {
        fkv__err(NULL, 0, "fkv_kvc_calib_observe: no calibration, layer %u out of range or no data", layer);
        return FKV_EINVAL;
    }
    const uint32_t H = c->n_kv_heads;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t d = 0; d < D; d++) {
                size_t i = ((size_t)t * H + h) * D + d;
                float a = fabsf(k[i]), b = fabsf(v[i]);
                if (!isfinite(a) || !isfinite(b)) {
                    fkv__err(NULL, 0, "fkv_kvc_calib_observe: layer %u token %u head %u: non-finite K or V", layer, t, h);
                    return FKV_EINVAL;
                }
                float *ka = &c->k_amax[(size_t)layer * H + h], *va = &c->v_amax[(size_t)layer * H + h];
                if (a > *ka) *ka = a;
                if (b > *va) *va = b;
            }
    return FKV_OK;
}

float fkv_kvc_fp8_scale(const fkv_kvc_calib *c, uint32_t layer, uint32_t head, int is_v, int per_head)
{
    const float *am = (is_v ? c->v_amax : c->k_amax) + (size_t)layer * c->n_kv_heads;
    float a = 0.0f;
    if (per_head) a = am[head];
    else
        for (uint32_t h = 0; h < c->n_kv_heads; h++) a = am[h] > a ? am[h] : a;
    return a > 0.0f ? a / 448.0f : 1.0f;
}

/* ---------------------------------------------------------------- helpers */

fkv_status fkv_hadamard(float *x, uint32_t n)
{
    if (!x || !n || (n & (n - 1))) {
        fkv__err(NULL, 0, "fkv_hadamard: n = %u is not a power of two", n);
        return FKV_EINVAL;
    }
    for (uint32_t len = 1; len < n; len <<= 1)
        for (uint32_t i = 0; i < n; i += 2 * len)
            for (uint32_t j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    float s = 1.0f / sqrtf((float)n);
    for (uint32_t i = 0; i < n; i++) x[i] *= s;
    return FKV_OK;
}

/* One asymmetric group of n values: codes by ops->quant_s, decoded in
 * place.  0 if out of range. */
static int group_rt(const fkv__simd_ops *ops, float *x, size_t n, float qmax, uint8_t *codes)
{
    float lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        if (x[i] != x[i]) lo = NAN;
    }
    uint16_t s16, z16;
    if (!fkv__group_params(lo, hi, qmax, &s16, &z16)) return 0;
    float s = fkv__h2f(s16), z = fkv__h2f(z16);
    ops->quant_s(x, z, s > 0.0f ? 1.0f / s : 0.0f, qmax, codes, n);
    ops->deq8_s(codes, s, z, x, n);
    return 1;
}

/* per (token, head): groups of g consecutive channels */
static int per_token_rt(const fkv__simd_ops *ops, float *x, uint32_t T, uint32_t H, uint32_t D, uint32_t g,
                        float qmax, uint8_t *codes)
{
    for (size_t r = 0; r < (size_t)T * H; r++)
        for (uint32_t a = 0; a < D; a += g)
            if (!group_rt(ops, x + r * D + a, D - a < g ? D - a : g, qmax, codes)) return 0;
    return 1;
}

/* per (head, channel) over groups of tg tokens; scratch: 4 * D floats */
static int per_channel_rt(const fkv__simd_ops *ops, float *x, uint32_t T, uint32_t H, uint32_t D, uint32_t tg,
                          float qmax, uint8_t *codes, float *scratch)
{
    float *mn = scratch, *mx = mn + D, *sv = mx + D, *zv = sv + D;
    const size_t E = (size_t)H * D;
    for (uint32_t t0 = 0; t0 < T; t0 += tg) {
        uint32_t n = T - t0 < tg ? T - t0 : tg;
        for (uint32_t h = 0; h < H; h++) {
            const float *r0 = x + (size_t)t0 * E + (size_t)h * D;
            for (uint32_t d = 0; d < D; d++) mn[d] = mx[d] = r0[d];
            for (uint32_t t = 1; t < n; t++)
                for (uint32_t d = 0; d < D; d++) {
                    float v = r0[t * E + d];
                    mn[d] = v < mn[d] ? v : mn[d];
                    mx[d] = v > mx[d] ? v : mx[d];
                    if (v != v) mn[d] = NAN;
                }
            for (uint32_t d = 0; d < D; d++) {
                uint16_t s16, z16;
                if (!fkv__group_params(mn[d], mx[d], qmax, &s16, &z16)) return 0;
                sv[d] = fkv__h2f(s16);
                zv[d] = fkv__h2f(z16);
                mn[d] = sv[d] > 0.0f ? 1.0f / sv[d] : 0.0f; /* now the inverse scale */
            }
            for (uint32_t t = 0; t < n; t++) {
                float *row = x + (size_t)(t0 + t) * E + (size_t)h * D;
                ops->quant_v(row, zv, mn, qmax, codes, D);
                ops->deq8_v(codes, sv, zv, row, D);
            }
        }
    }
    return 1;
}

static fkv_status int_chunk_rt(fkv_kvc c, float *k, float *v, uint32_t T, uint32_t H, uint32_t D, char *err,
                               size_t errlen)
{
    fkv_kv_geom g = {1, H, D, T, FKV_F32, 0, 1};
    fkv_kv_layer l = {k, v};
    fkv_dtype dt = c == FKV_KVC_INT8 ? FKV_INT8 : c == FKV_KVC_FP8_CHUNK ? FKV_FP8 : FKV_INT4;
    size_t mb = fkv_quant_meta_bytes(&g, dt, T);
    void *meta = malloc(mb ? mb : 1);
    if (!meta) return FKV_ENOMEM;
    const uint32_t page = 0;
    fkv_status st = fkv_quant_chunk(&g, &l, T, &page, 1, dt, &page, 1, meta, mb, err, errlen);
    if (!st) st = fkv_dequant_chunk(&g, &l, T, dt, &page, 1, meta, mb, &page, 1, err, errlen);
    free(meta);
    return st;
}

fkv_status fkv_kvc_roundtrip(fkv_kvc c, const fkv_kvc_calib *cal, uint32_t layer, float *k, float *v, uint32_t T,
                             uint32_t H, uint32_t D, char *err, size_t errlen)
{
    if ((unsigned)c >= FKV_KVC_COUNT || !k || !v || !T || !H || !D || H > 4096 || D > 4096) {
        fkv__err(err, errlen, "fkv_kvc_roundtrip: bad codec %d, NULL block or size %u x %u x %u", (int)c, T, H, D);
        return FKV_EINVAL;
    }
    const int fp8 = c == FKV_KVC_FP8 || c == FKV_KVC_FP8_HEAD;
    if (fp8 && (!cal || !cal->k_amax || layer >= cal->n_layers || cal->n_kv_heads != H)) {
        fkv__err(err, errlen, "fkv_kvc_roundtrip: %s needs a calibration of layer %u with %u kv heads", names[c],
                 layer, H);
        return FKV_EINVAL;
    }
    if ((c == FKV_KVC_INT4 || c == FKV_KVC_INT2) && D % 2) {
        fkv__err(err, errlen, "fkv_kvc_roundtrip: %s needs an even head_dim (got %u)", names[c], D);
        return FKV_EINVAL;
    }
    if (c == FKV_KVC_INT4R && (D & (D - 1))) {
        fkv__err(err, errlen, "fkv_kvc_roundtrip: int4r needs a power-of-two head_dim (got %u)", D);
        return FKV_EINVAL;
    }
    const size_t n = (size_t)T * H * D;
    if (c == FKV_KVC_F32) return FKV_OK;
    if (c == FKV_KVC_INT8 || c == FKV_KVC_INT4 || c == FKV_KVC_FP8_CHUNK)
        return int_chunk_rt(c, k, v, T, H, D, err, errlen);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(k[i]) || !isfinite(v[i]) || (c != FKV_KVC_FP8 && c != FKV_KVC_FP8_HEAD &&
                                                   (fabsf(k[i]) > 65504.0f || fabsf(v[i]) > 65504.0f))) {
            fkv__err(err, errlen, "fkv_kvc_roundtrip: %s: element %zu of K or V is non-finite%s", names[c], i,
                     fp8 ? "" : " or beyond fp16 range");
            return FKV_EINVAL;
        }
    const fkv__simd_ops *ops = fkv__simd();
    if (c == FKV_KVC_F16) {
        uint16_t *h = malloc(D * sizeof *h);
        if (!h) return FKV_ENOMEM;
        for (int is_v = 0; is_v < 2; is_v++) {
            float *x = is_v ? v : k;
            for (size_t r = 0; r < n / D; r++) {
                ops->f2h(x + r * D, h, D);
                ops->h2f(h, x + r * D, D);
            }
        }
        free(h);
        return FKV_OK;
    }
    uint8_t *codes = malloc(D);
    float *scratch = malloc(4 * (size_t)D * sizeof(float));
    fkv_status st = FKV_OK;
    if (!codes || !scratch) {
        st = FKV_ENOMEM;
        goto out;
    }
    if (fp8) {
        const fkv__fp8_ops *f8 = fkv__fp8();
        for (int is_v = 0; is_v < 2; is_v++) {
            float *x = is_v ? v : k;
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < H; h++) {
                    float s = fkv_kvc_fp8_scale(cal, layer, h, is_v, c == FKV_KVC_FP8_HEAD);
                    float *row = x + ((size_t)t * H + h) * D;
                    f8->enc(row, 1.0f / s, codes, D);
                    f8->dec(codes, s, row, D);
                }
        }
    } else if (c == FKV_KVC_INT4R) {
        for (size_t r = 0; r < (size_t)T * H; r++) fkv_hadamard(k + r * D, D);
        int ok = per_token_rt(ops, k, T, H, D, FKV_KVC_INT4R_GROUP, 15.0f, codes) &&
                 per_token_rt(ops, v, T, H, D, FKV_QV_GROUP_INT4, 15.0f, codes);
        /* back to the original basis (the transform is its own inverse);
         * a kernel would rotate the query instead */
        for (size_t r = 0; r < (size_t)T * H; r++) fkv_hadamard(k + r * D, D);
        if (!ok) st = FKV_EINVAL;
    } else { /* int2 */
        if (!per_channel_rt(ops, k, T, H, D, FKV_KVC_INT2_GROUP, 3.0f, codes, scratch) ||
            !per_token_rt(ops, v, T, H, D, FKV_KVC_INT2_GROUP, 3.0f, codes))
            st = FKV_EINVAL;
    }
    if (st == FKV_EINVAL)
        fkv__err(err, errlen, "fkv_kvc_roundtrip: %s: a group beyond fp16 range", names[c]);
out:
    free(codes);
    free(scratch);
    return st;
}
