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

/* element j of a row in each stored format (sx: the fp8 rows' scale) */
static inline float el_f(const char *r, size_t j, float sx) { float x; (void)sx; memcpy(&x, r + 4 * j, 4); return x; }
static inline float el_h(const char *r, size_t j, float sx) { uint16_t h; (void)sx; memcpy(&h, r + 2 * j, 2); return fkv__h2f(h); }
static inline float el_b(const char *r, size_t j, float sx) { (void)sx; return (float)(uint8_t)r[j]; }
static inline float el_n(const char *r, size_t j, float sx) { (void)sx; return (float)(((uint8_t)r[j / 2] >> (4 * (j & 1))) & 15u); }
/* E4M3: the code as a binary16 of value x * 2^-8 (fp8.h), times 256 (exact)
 * is fkv__e4m3_dec's value; then times sx, fkv__fp8's dec */
static inline float el_e(const char *r, size_t j, float sx)
{
    unsigned c = (uint8_t)r[j];
    return fkv__h2f((uint16_t)(((c & 0x7fu) << 7) | ((c & 0x80u) << 8))) * 256.0f * sx;
}

#define S_KERNELS_X(SUF, EL)                                                                      \
    static inline void s_qkx_##SUF(size_t M, const float *q, size_t T, const char *const *rows,   \
                                   size_t off, size_t d, float sx, float scale, float *out, size_t ldo) \
    {                                                                                             \
        for (size_t m = 0; m < M; m++)                                                            \
            for (size_t t = 0; t < T; t++) {                                                      \
                const char *row = rows[t] + off;                                                  \
                float acc = 0.0f;                                                                 \
                for (size_t j = 0; j < d; j++) acc += q[m * d + j] * EL(row, j, sx);              \
                out[m * ldo + t] = acc * scale;                                                   \
            }                                                                                     \
    }                                                                                             \
    static inline void s_pvx_##SUF(size_t M, const float *p, size_t ldp, size_t T,                \
                                   const char *const *rows, size_t off, size_t n, float sx, float *acc, \
                                   size_t lda)                                                    \
    {                                                                                             \
        for (size_t m = 0; m < M; m++)                                                            \
            for (size_t t = 0; t < T; t++) {                                                      \
                float w = p[m * ldp + t];                                                         \
                if (w == 0.0f) continue;                                                          \
                const char *row = rows[t] + off;                                                  \
                for (size_t j = 0; j < n; j++) acc[m * lda + j] += w * EL(row, j, sx);            \
            }                                                                                     \
    }
#define S_KERNELS(SUF, EL)                                                                        \
    S_KERNELS_X(SUF, EL)                                                                          \
    static void s_qk_##SUF(size_t M, const float *q, size_t T, const char *const *rows, size_t off, \
                           size_t d, float scale, float *out, size_t ldo)                         \
    {                                                                                             \
        s_qkx_##SUF(M, q, T, rows, off, d, 0.0f, scale, out, ldo);                                \
    }                                                                                             \
    static void s_pv_##SUF(size_t M, const float *p, size_t ldp, size_t T,                        \
                           const char *const *rows, size_t off, size_t n, float *acc, size_t lda) \
    {                                                                                             \
        s_pvx_##SUF(M, p, ldp, T, rows, off, n, 0.0f, acc, lda);                                  \
    }

S_KERNELS(f, el_f)
S_KERNELS(h, el_h)
S_KERNELS(b, el_b)
S_KERNELS(n, el_n)
S_KERNELS_X(e, el_e)

static void s_qk8(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d, float s,
                  float scale, float *out, size_t ldo)
{
    s_qkx_e(M, q, T, rows, off, d, s, scale, out, ldo);
}

static void s_pv8(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off, size_t n,
                  float s, float *acc, size_t lda)
{
    s_pvx_e(M, p, ldp, T, rows, off, n, s, acc, lda);
}

static void s_scale_q(size_t M, const float *q, size_t ld, const float *s, const float *z, size_t d,
                      float scale, float *qp, float *c)
{
    for (size_t m = 0; m < M; m++) {
        float cz = 0.0f;
        for (size_t j = 0; j < d; j++) {
            qp[m * ld + j] = q[m * ld + j] * s[j];
            cz += q[m * ld + j] * z[j];
        }
        c[m] = cz * scale;
    }
}

static void s_add_rows(size_t M, const float *c, size_t n, float *acc, size_t lda)
{
    for (size_t m = 0; m < M; m++)
        for (size_t j = 0; j < n; j++) acc[m * lda + j] += c[m];
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
    {s_qk_f, s_qk_h, s_qk_b, s_qk_n}, {s_pv_f, s_pv_h, s_pv_b, s_pv_n}, s_scale_q, s_add_rows, s_expsum,
    s_qk8, s_pv8, NULL, NULL,
};
