/* Portable scalar path of the vector primitives (see simd.h).  Also the
 * reference the AVX2 path is tested against. */
#include <math.h>

#include "quant/fp16.h"
#include "quant/simd.h"

static void s_h2f(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = fkv__h2f(src[i]);
}

static void s_f2h(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = fkv__f2h(src[i]);
}

/* rint then clamp: the same two steps as _mm256_round_ps + min/max */
static inline uint8_t code_of(float x, float z, float inv, float qmax)
{
    float r = nearbyintf((x - z) * inv);
    if (r < 0.0f) r = 0.0f;
    if (r > qmax) r = qmax;
    return (uint8_t)r;
}

static void s_quant_v(const float *x, const float *z, const float *inv, float qmax, uint8_t *q,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) q[i] = code_of(x[i], z[i], inv[i], qmax);
}

static void s_quant_s(const float *x, float z, float inv, float qmax, uint8_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++) q[i] = code_of(x[i], z, inv, qmax);
}

static void s_deq8_v(const uint8_t *q, const float *s, const float *z, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)q[i] * s[i] + z[i];
}

static void s_deq8_s(const uint8_t *q, float s, float z, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)q[i] * s + z;
}

static void s_deq4_v(const uint8_t *q, const float *s, const float *z, float *x, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        x[i] = (float)(q[i / 2] & 15u) * s[i] + z[i];
        x[i + 1] = (float)(q[i / 2] >> 4) * s[i + 1] + z[i + 1];
    }
}

static void s_deq4_s(const uint8_t *q, float s, float z, float *x, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        x[i] = (float)(q[i / 2] & 15u) * s + z;
        x[i + 1] = (float)(q[i / 2] >> 4) * s + z;
    }
}

static void s_qk(size_t M, const float *q, size_t T, const float *k, size_t ks, size_t d,
                 float scale, float *out, size_t ldo)
{
    for (size_t m = 0; m < M; m++)
        for (size_t t = 0; t < T; t++) {
            const float *a = q + m * d, *b = k + t * ks;
            float acc = 0.0f;
            for (size_t j = 0; j < d; j++) acc += a[j] * b[j];
            out[m * ldo + t] = acc * scale;
        }
}

static void s_pv(size_t M, const float *p, size_t ldp, size_t T, const float *v, size_t vs,
                 size_t d, float *acc)
{
    for (size_t m = 0; m < M; m++)
        for (size_t t = 0; t < T; t++) {
            float w = p[m * ldp + t];
            if (w == 0.0f) continue;
            const float *b = v + t * vs;
            float *a = acc + m * d;
            for (size_t j = 0; j < d; j++) a[j] += w * b[j];
        }
}

static float s_expsum(float *x, size_t n, float mx)
{
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return sum;
}

const fkv__simd_ops fkv__simd_scalar = {
    "scalar", s_h2f, s_f2h, s_quant_v, s_quant_s, s_deq8_v, s_deq8_s, s_deq4_v, s_deq4_s,
    s_qk, s_pv, s_expsum,
};
