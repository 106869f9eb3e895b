/* AVX2 + FMA + F16C path of the vector primitives (see simd.h).  Each
 * function carries a target attribute, so the build needs no -march flag
 * and the CPU is checked at run time (simd.c) before any is called.  The
 * codec functions avoid FMA so they match the scalar path bit for bit; the
 * attention micro-kernels use FMA. */
#include "quant/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/fp8.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGT_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

TGT static void a_h2f(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = fkv__h2f(src[i]);
}

TGT static void a_f2h(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = fkv__f2h(src[i]);
}

/* 8 codes from 8 fp32 values already scaled: rint, clamp, narrow to bytes */
TGT_INLINE void store_codes8(__m256 v, __m256 qmax, uint8_t *q)
{
    __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()), qmax);
    __m256i i = _mm256_cvttps_epi32(r);
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64((__m128i *)q, _mm_packus_epi16(w, w));
}

static inline uint8_t code_of(float x, float z, float inv, float qmax)
{
    float r = nearbyintf((x - z) * inv);
    if (r < 0.0f) r = 0.0f;
    if (r > qmax) r = qmax;
    return (uint8_t)r;
}

TGT static void a_quant_v(const float *x, const float *z, const float *inv, float qmax,
                          uint8_t *q, size_t n)
{
    size_t i = 0;
    __m256 vq = _mm256_set1_ps(qmax);
    for (; i + 8 <= n; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(z + i));
        store_codes8(_mm256_mul_ps(d, _mm256_loadu_ps(inv + i)), vq, q + i);
    }
    for (; i < n; i++) q[i] = code_of(x[i], z[i], inv[i], qmax);
}

TGT static void a_quant_s(const float *x, float z, float inv, float qmax, uint8_t *q, size_t n)
{
    size_t i = 0;
    __m256 vq = _mm256_set1_ps(qmax), vz = _mm256_set1_ps(z), vi = _mm256_set1_ps(inv);
    for (; i + 8 <= n; i += 8)
        store_codes8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vz), vi), vq, q + i);
    for (; i < n; i++) q[i] = code_of(x[i], z, inv, qmax);
}

TGT_INLINE __m256 u8x8(const uint8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

TGT static void a_deq8_v(const uint8_t *q, const float *s, const float *z, float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_mul_ps(u8x8(q + i), _mm256_loadu_ps(s + i)),
                                              _mm256_loadu_ps(z + i)));
    for (; i < n; i++) x[i] = (float)q[i] * s[i] + z[i];
}

TGT static void a_deq8_s(const uint8_t *q, float s, float z, float *x, size_t n)
{
    size_t i = 0;
    __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_mul_ps(u8x8(q + i), vs), vz));
    for (; i < n; i++) x[i] = (float)q[i] * s + z;
}

/* 16 int4 codes (8 bytes) -> 16 bytes in element order */
TGT_INLINE __m128i u4x16(const uint8_t *q)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)q), m = _mm_set1_epi8(15);
    return _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
}

TGT static void a_deq4_v(const uint8_t *q, const float *s, const float *z, float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i c = u4x16(q + i / 2);
        __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
        __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c, 8)));
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_mul_ps(lo, _mm256_loadu_ps(s + i)),
                                              _mm256_loadu_ps(z + i)));
        _mm256_storeu_ps(x + i + 8, _mm256_add_ps(_mm256_mul_ps(hi, _mm256_loadu_ps(s + i + 8)),
                                                  _mm256_loadu_ps(z + i + 8)));
    }
    for (; i + 1 < n; i += 2) {
        x[i] = (float)(q[i / 2] & 15u) * s[i] + z[i];
        x[i + 1] = (float)(q[i / 2] >> 4) * s[i + 1] + z[i + 1];
    }
}

TGT static void a_deq4_s(const uint8_t *q, float s, float z, float *x, size_t n)
{
    size_t i = 0;
    __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
    for (; i + 16 <= n; i += 16) {
        __m128i c = u4x16(q + i / 2);
        __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
        __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c, 8)));
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_mul_ps(lo, vs), vz));
        _mm256_storeu_ps(x + i + 8, _mm256_add_ps(_mm256_mul_ps(hi, vs), vz));
    }
    for (; i + 1 < n; i += 2) {
        x[i] = (float)(q[i / 2] & 15u) * s + z;
        x[i + 1] = (float)(q[i / 2] >> 4) * s + z;
    }
}

TGT_INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Loaders: 8 consecutive elements j..j+7 of a row, as fp32, in each stored
 * format (f: fp32, h: fp16, b: uint8 codes, n: packed uint4 codes, e: fp8 E4M3
 * codes, sx = 256 x the rows' scale). */
TGT_INLINE __m256 ld_f(const char *r, size_t j, __m256 sx) { (void)sx; return _mm256_loadu_ps((const float *)r + j); }
TGT_INLINE __m256 ld_h(const char *r, size_t j, __m256 sx)
{
    (void)sx;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 2 * j)));
}
TGT_INLINE __m256 ld_b(const char *r, size_t j, __m256 sx)
{
    (void)sx;
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(r + j))));
}
TGT_INLINE __m256 ld_n(const char *r, size_t j, __m256 sx)
{
    (void)sx;
    int32_t w;
    memcpy(&w, r + j / 2, 4); /* element i of the 8 is nibble i of w */
    __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(15)));
}

/* E4M3: each code sign-extended to 16 bits and shifted left by 7 is, with
 * bit 14 cleared, a binary16 of value e4m3(code) * 2^-8 (fp8.h); widened
 * exactly, then one product by sx = 256 s.  Since 256 is a power of two and
 * 256 s is finite for every scale the encoder writes (amax / 448), that
 * product rounds e4m3(code) * s once, as fkv__fp8's dec does. */
TGT_INLINE __m256 ld_e(const char *r, size_t j, __m256 sx)
{
    __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(r + j)));
    __m128i h = _mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16((short)0xbf80));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), sx);
}

/* NM query rows x NT key rows of dot products (qk) and NM rows x NJ*8
 * channels of p.V (pv); NM, NT, NJ are constants at each call, so with the
 * unrolling the accumulators stay in registers (8 of 16 ymm at 4x2). */
#define A_KERNELS(SUF, LD)                                                                          \
    TGT_INLINE void qk_blk_##SUF(int NM, int NT, const float *q, size_t d, const char *const *rows,  \
                                 size_t off, __m256 sx, float scale, float *out, size_t ldo)         \
    {                                                                                               \
        __m256 acc[4][2];                                                                           \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                        \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[m][t] = _mm256_setzero_ps();   \
        for (size_t j = 0; j < d; j += 8) {                                                         \
            __m256 kv[2];                                                                           \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) kv[t] = LD(rows[t] + off, j, sx);    \
            _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                    \
            {                                                                                       \
                __m256 qv = _mm256_loadu_ps(q + (size_t)m * d + j);                                 \
                _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[m][t] =                    \
                    _mm256_fmadd_ps(qv, kv[t], acc[m][t]);                                          \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                        \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) out[(size_t)m * ldo + (size_t)t] = \
                hsum8(acc[m][t]) * scale;                                                           \
    }                                                                                               \
    TGT_INLINE void a_qkx_##SUF(size_t M, const float *q, size_t T, const char *const *rows,        \
                                size_t off, size_t d, __m256 sx, float scale, float *out, size_t ldo) \
    {                                                                                               \
        size_t t = 0;                                                                               \
        for (; t + 2 <= T; t += 2) {                                                                \
            size_t m = 0;                                                                           \
            for (; m + 4 <= M; m += 4) qk_blk_##SUF(4, 2, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
            for (; m < M; m++) qk_blk_##SUF(1, 2, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
        }                                                                                           \
        if (t < T) {                                                                                \
            size_t m = 0;                                                                           \
            for (; m + 4 <= M; m += 4) qk_blk_##SUF(4, 1, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
            for (; m < M; m++) qk_blk_##SUF(1, 1, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
        }                                                                                           \
    }                                                                                               \
    TGT_INLINE void pv_blk_##SUF(int NM, int NJ, const float *p, size_t ldp, size_t T,               \
                                 const char *const *rows, size_t off, size_t j0, __m256 sx, float *acc, size_t lda) \
    {                                                                                               \
        __m256 a[4][2];                                                                             \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                        \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) a[m][j] =                          \
                _mm256_loadu_ps(acc + (size_t)m * lda + (size_t)j * 8);                             \
        for (size_t t = 0; t < T; t++) {                                                            \
            __m256 vv[2];                                                                           \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) vv[j] = LD(rows[t] + off, j0 + (size_t)j * 8, sx); \
            _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                    \
            {                                                                                       \
                __m256 w = _mm256_broadcast_ss(p + (size_t)m * ldp + t);                            \
                _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) a[m][j] =                      \
                    _mm256_fmadd_ps(w, vv[j], a[m][j]);                                             \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                        \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++)                                    \
                _mm256_storeu_ps(acc + (size_t)m * lda + (size_t)j * 8, a[m][j]);                   \
    }                                                                                               \
    TGT_INLINE void a_pvx_##SUF(size_t M, const float *p, size_t ldp, size_t T,                     \
                                const char *const *rows, size_t off, size_t n, __m256 sx, float *acc, size_t lda) \
    {                                                                                               \
        size_t m = 0;                                                                               \
        for (; m + 4 <= M; m += 4) {                                                                \
            size_t j = 0;                                                                           \
            for (; j + 16 <= n; j += 16) pv_blk_##SUF(4, 2, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
            for (; j < n; j += 8) pv_blk_##SUF(4, 1, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
        }                                                                                           \
        for (; m < M; m++) {                                                                        \
            size_t j = 0;                                                                           \
            for (; j + 16 <= n; j += 16) pv_blk_##SUF(1, 2, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
            for (; j < n; j += 8) pv_blk_##SUF(1, 1, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
        }                                                                                           \
    }
/* the table's entries: rows whose width is not a multiple of 8 go to the
 * scalar kernels */
#define A_ENTRIES(SUF)                                                                              \
    TGT static void a_qk_##SUF(size_t M, const float *q, size_t T, const char *const *rows,         \
                               size_t off, size_t d, float scale, float *out, size_t ldo)           \
    {                                                                                               \
        if (d % 8) fkv__simd_scalar.qk[FMT_##SUF](M, q, T, rows, off, d, scale, out, ldo);          \
        else a_qkx_##SUF(M, q, T, rows, off, d, _mm256_setzero_ps(), scale, out, ldo);              \
    }                                                                                               \
    TGT static void a_pv_##SUF(size_t M, const float *p, size_t ldp, size_t T,                      \
                               const char *const *rows, size_t off, size_t n, float *acc, size_t lda) \
    {                                                                                               \
        if (n % 8) fkv__simd_scalar.pv[FMT_##SUF](M, p, ldp, T, rows, off, n, acc, lda);            \
        else a_pvx_##SUF(M, p, ldp, T, rows, off, n, _mm256_setzero_ps(), acc, lda);                \
    }

enum { FMT_f = FKV__FMT_F32, FMT_h = FKV__FMT_F16, FMT_b = FKV__FMT_U8, FMT_n = FKV__FMT_U4 };
A_KERNELS(f, ld_f)
A_KERNELS(h, ld_h)
A_KERNELS(b, ld_b)
A_KERNELS(n, ld_n)
A_KERNELS(e, ld_e)
A_ENTRIES(f)
A_ENTRIES(h)
A_ENTRIES(b)
A_ENTRIES(n)

TGT static void a_qk8(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d, float s,
                      float scale, float *out, size_t ldo)
{
    if (d % 8) fkv__simd_scalar.qk8(M, q, T, rows, off, d, s, scale, out, ldo);
    else a_qkx_e(M, q, T, rows, off, d, _mm256_set1_ps(256.0f * s), scale, out, ldo);
}

TGT static void a_pv8(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off, size_t n,
                      float s, float *acc, size_t lda)
{
    if (n % 8) fkv__simd_scalar.pv8(M, p, ldp, T, rows, off, n, s, acc, lda);
    else a_pvx_e(M, p, ldp, T, rows, off, n, _mm256_set1_ps(256.0f * s), acc, lda);
}

/* exp(x) for x <= 0, 8 lanes (simd.h, FKV__EXP_*) */
TGT_INLINE __m256 exp8(__m256 x)
{
    static const float P[] = FKV__EXP_P;
    x = _mm256_max_ps(x, _mm256_set1_ps(FKV__EXP_MIN));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(FKV__EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(FKV__EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(FKV__EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(P[0]);
    for (int k = 1; k < 6; k++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P[k]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

TGT static void a_scale_q(size_t M, const float *q, size_t ld, const float *s, const float *z, size_t d,
                          float scale, float *qp, float *c)
{
    for (size_t m = 0; m < M; m++) {
        __m256 cz = _mm256_setzero_ps();
        size_t j = 0;
        for (; j + 8 <= d; j += 8) {
            __m256 qv = _mm256_loadu_ps(q + m * ld + j);
            _mm256_storeu_ps(qp + m * ld + j, _mm256_mul_ps(qv, _mm256_loadu_ps(s + j)));
            cz = _mm256_fmadd_ps(qv, _mm256_loadu_ps(z + j), cz);
        }
        float t = hsum8(cz);
        for (; j < d; j++) { /* tail of a short run */
            qp[m * ld + j] = q[m * ld + j] * s[j];
            t += q[m * ld + j] * z[j];
        }
        c[m] = t * scale;
    }
}

TGT static void a_add_rows(size_t M, const float *c, size_t n, float *acc, size_t lda)
{
    for (size_t m = 0; m < M; m++) {
        __m256 cv = _mm256_set1_ps(c[m]);
        size_t j = 0;
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(acc + m * lda + j, _mm256_add_ps(_mm256_loadu_ps(acc + m * lda + j), cv));
        for (; j < n; j++) acc[m * lda + j] += c[m];
    }
}

TGT static float a_expsum(float *x, size_t n, float mx)
{
    size_t i = 0;
    __m256 s = _mm256_setzero_ps(), vm = _mm256_set1_ps(mx);
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float sum = hsum8(s);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return sum;
}

static const fkv__simd_ops avx2_ops = {
    "avx2", a_h2f, a_f2h, a_quant_v, a_quant_s, a_deq8_v, a_deq8_s, a_deq4_v, a_deq4_s,
    {a_qk_f, a_qk_h, a_qk_b, a_qk_n}, {a_pv_f, a_pv_h, a_pv_b, a_pv_n}, a_scale_q, a_add_rows, a_expsum,
    a_qk8, a_pv8, NULL, NULL,
};

const fkv__simd_ops *fkv__simd_avx2_ops(void) { return &avx2_ops; }

/* ---------------------------------------------------------------- fp8
 *
 * AVX2 path of the fp8 E4M3 conversions (simd.h), for CPUs without
 * AVX-512: the steps of simd_avx512.c's, 8 lanes at a time, with blends in
 * place of mask registers, so the same bits as the scalar reference of
 * fp8.h (tests/test_quant_kvc.c).  Decoding widens the code through binary16
 * (exact), times 256 (exact), times s. */
TGT static void a_fp8_enc(const float *x, float inv, uint8_t *q, size_t n)
{
    const __m256 vinv = _mm256_set1_ps(inv), vmax = _mm256_set1_ps(448.0f), vmin_n = _mm256_set1_ps(0.015625f);
    const __m256 v512 = _mm256_set1_ps(512.0f);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
    const __m256i rbias = _mm256_set1_epi32(0x7ffff), rebias = _mm256_set1_epi32(120 << 3);
    const __m256i s80 = _mm256_set1_epi32(0x80), nan_code = _mm256_set1_epi32(0x7f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
        __m256i b = _mm256_castps_si256(v);
        __m256i sign = _mm256_and_si256(_mm256_srli_epi32(b, 24), s80);
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        __m256 a = _mm256_min_ps(_mm256_castsi256_ps(_mm256_and_si256(b, abs_mask)), vmax);
        __m256i sub = _mm256_castps_si256(_mm256_cmp_ps(a, vmin_n, _CMP_LT_OQ));
        __m256i subc = _mm256_cvtps_epi32(_mm256_mul_ps(a, v512)); /* nearest even, as nearbyintf */
        __m256i ab = _mm256_castps_si256(a);
        __m256i r = _mm256_add_epi32(ab, _mm256_add_epi32(rbias, _mm256_and_si256(_mm256_srli_epi32(ab, 20), one)));
        __m256i code = _mm256_sub_epi32(_mm256_srli_epi32(r, 20), rebias);
        code = _mm256_blendv_epi8(code, subc, sub);
        code = _mm256_or_si256(code, sign);
        code = _mm256_blendv_epi8(code, nan_code, nan);
        __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(code), _mm256_extracti128_si256(code, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packus_epi16(w, w));
    }
    for (; i < n; i++) q[i] = fkv__e4m3_enc(x[i] * inv);
}

TGT static void a_fp8_dec(const uint8_t *q, float s, float *x, size_t n)
{
    const __m256 vs = _mm256_set1_ps(s), v256 = _mm256_set1_ps(256.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(q + i)));
        __m128i h = _mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16((short)0xbf80));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtph_ps(h), v256), vs));
    }
    for (; i < n; i++) x[i] = fkv__e4m3_dec(q[i]) * s;
}

static const fkv__fp8_ops avx2_fp8 = {"avx2", a_fp8_enc, a_fp8_dec};

const fkv__fp8_ops *fkv__fp8_avx2_ops(void) { return &avx2_fp8; }

#else
const fkv__simd_ops *fkv__simd_avx2_ops(void) { return NULL; }
const fkv__fp8_ops *fkv__fp8_avx2_ops(void) { return NULL; }
#endif
