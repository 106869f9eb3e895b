/* AVX-512F path of the fp8 E4M3 conversions (simd.h), by target attributes
 * (no -march flag).  Each step mirrors the scalar reference of fp8.h, so the
 * results are the same bits: the same product x * inv, the same clamp, the
 * same integer rounding of the mantissa, vcvtps2dq (round to nearest even,
 * the default mode that nearbyintf also uses) for subnormal codes; decoding
 * goes through binary16 (vcvtph2ps, exact), times 256 (exact), times s. */
#include "quant/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "quant/fp8.h"

#define TGT __attribute__((target("avx512f")))

TGT static void v_enc(const float *x, float inv, uint8_t *q, size_t n)
{
    const __m512 vinv = _mm512_set1_ps(inv), vmax = _mm512_set1_ps(448.0f), vmin_n = _mm512_set1_ps(0.015625f);
    const __m512 v512 = _mm512_set1_ps(512.0f);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    const __m512i rbias = _mm512_set1_epi32(0x7ffff), rebias = _mm512_set1_epi32(120 << 3);
    const __m512i s80 = _mm512_set1_epi32(0x80), nan_code = _mm512_set1_epi32(0x7f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv);
        __m512i b = _mm512_castps_si512(v);
        __m512i sign = _mm512_and_si512(_mm512_srli_epi32(b, 24), s80);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_si512(b, abs_mask)), vmax);
        __mmask16 sub = _mm512_cmp_ps_mask(a, vmin_n, _CMP_LT_OQ);
        __m512i subc = _mm512_cvtps_epi32(_mm512_mul_ps(a, v512));
        __m512i ab = _mm512_castps_si512(a);
        __m512i r = _mm512_add_epi32(ab, _mm512_add_epi32(rbias, _mm512_and_si512(_mm512_srli_epi32(ab, 20), one)));
        __m512i code = _mm512_sub_epi32(_mm512_srli_epi32(r, 20), rebias);
        code = _mm512_mask_mov_epi32(code, sub, subc);
        code = _mm512_or_si512(code, sign);
        code = _mm512_mask_mov_epi32(code, nan, nan_code);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(code));
    }
    for (; i < n; i++) q[i] = fkv__e4m3_enc(x[i] * inv);
}

TGT static void v_dec(const uint8_t *q, float s, float *x, size_t n)
{
    const __m512 vs = _mm512_set1_ps(s), v256 = _mm512_set1_ps(256.0f);
    const __m512i m7f = _mm512_set1_epi32(0x7f), m80 = _mm512_set1_epi32(0x80);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + i)));
        __m512i h = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, m7f), 7),
                                    _mm512_slli_epi32(_mm512_and_si512(c, m80), 8));
        __m512 f = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_mul_ps(f, v256), vs));
    }
    for (; i < n; i++) x[i] = fkv__e4m3_dec(q[i]) * s;
}

static const fkv__fp8_ops avx512_ops = {"avx512", v_enc, v_dec};

const fkv__fp8_ops *fkv__fp8_avx512_ops(void)
{
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves zmm state */
    return __builtin_cpu_supports("avx512f") ? &avx512_ops : NULL;
}

/* ---------------------------------------------------------------- attention
 *
 * The AVX2 path's attention micro-kernels, 16 channels wide: K/V rows are
 * read where they lie in their stored format and widened in registers
 * (vcvtph2ps for fp16, vpmovzxbd for int8 codes, a variable shift of the
 * 16 nibbles for int4, the E4M3 codes shifted into binary16 and widened
 * by vcvtph2ps, times 256 s, for fp8), then fused multiply-adds.  Rows whose width is not
 * a multiple of 16 go to the AVX2 kernels.  The codec primitives are the
 * AVX2 path's (bit-identical to scalar); the kernels' sums are in another
 * order than scalar's, within the same bounds (tests/test_attn.c). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#define TGTK __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define TGTK_INLINE __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"), always_inline)) static inline

TGTK_INLINE __m512 z_f(const char *r, size_t j, __m512 sx) { (void)sx; return _mm512_loadu_ps((const float *)(r + 4 * j)); }
TGTK_INLINE __m512 z_h(const char *r, size_t j, __m512 sx)
{
    (void)sx;
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 2 * j)));
}
TGTK_INLINE __m512 z_b(const char *r, size_t j, __m512 sx)
{
    (void)sx;
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + j))));
}
TGTK_INLINE __m512 z_n(const char *r, size_t j, __m512 sx)
{
    (void)sx;
    uint32_t w[2];
    memcpy(w, r + j / 2, 8); /* elements 0..7: nibbles of w[0], 8..15: of w[1] */
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)w[0])),
                                   _mm256_set1_epi32((int)w[1]), 1);
    v = _mm512_srlv_epi32(v, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
    return _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(15)));
}

/* E4M3 codes: as ld_e of simd_avx2.c, 16 at a time (sx = 256 s) */
TGTK_INLINE __m512 z_e(const char *r, size_t j, __m512 sx)
{
    __m256i c = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(r + j)));
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16((short)0xbf80));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), sx);
}

static const fkv__simd_ops *avx2_base;

#define Z_KERNELS(SUF, LD, FMT)                                                                       \
    TGTK_INLINE void zqk_blk_##SUF(int NM, int NT, const float *q, size_t d, const char *const *rows, \
                                   size_t off, __m512 sx, float scale, float *out, size_t ldo)        \
    {                                                                                                 \
        __m512 acc[4][4];                                                                             \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                          \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[m][t] = _mm512_setzero_ps();     \
        for (size_t j = 0; j < d; j += 16) {                                                          \
            __m512 kv[4];                                                                             \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) kv[t] = LD(rows[t] + off, j, sx);       \
            _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                      \
            {                                                                                         \
                __m512 qv = _mm512_loadu_ps(q + (size_t)m * d + j);                                   \
                _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[m][t] =                      \
                    _mm512_fmadd_ps(qv, kv[t], acc[m][t]);                                            \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                          \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) out[(size_t)m * ldo + (size_t)t] =   \
                _mm512_reduce_add_ps(acc[m][t]) * scale;                                              \
    }                                                                                                 \
    TGTK_INLINE void z_qkx_##SUF(size_t M, const float *q, size_t T, const char *const *rows,         \
                                 size_t off, size_t d, __m512 sx, float scale, float *out, size_t ldo) \
    {                                                                                                 \
        size_t t = 0;                                                                                 \
        for (; t + 4 <= T; t += 4) {                                                                  \
            size_t m = 0;                                                                             \
            for (; m + 2 <= M; m += 2) zqk_blk_##SUF(2, 4, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
            for (; m < M; m++) zqk_blk_##SUF(1, 4, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
        }                                                                                             \
        for (; t < T; t++) {                                                                          \
            size_t m = 0;                                                                             \
            for (; m + 4 <= M; m += 4) zqk_blk_##SUF(4, 1, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
            for (; m < M; m++) zqk_blk_##SUF(1, 1, q + m * d, d, rows + t, off, sx, scale, out + m * ldo + t, ldo); \
        }                                                                                             \
    }                                                                                                 \
    TGTK_INLINE void zpv_blk_##SUF(int NM, int NJ, const float *p, size_t ldp, size_t T,               \
                                   const char *const *rows, size_t off, size_t j0, __m512 sx, float *acc, size_t lda) \
    {                                                                                                 \
        __m512 a[4][2];                                                                               \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) a[m][j] =                            \
                _mm512_loadu_ps(acc + (size_t)m * lda + (size_t)j * 16);                              \
        for (size_t t = 0; t < T; t++) {                                                              \
            __m512 vv[2];                                                                             \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) vv[j] = LD(rows[t] + off, j0 + (size_t)j * 16, sx); \
            _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                      \
            {                                                                                         \
                __m512 w = _mm512_set1_ps(p[(size_t)m * ldp + t]);                                    \
                _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) a[m][j] =                        \
                    _mm512_fmadd_ps(w, vv[j], a[m][j]);                                               \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 8") for (int m = 0; m < NM; m++)                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++)                                      \
                _mm512_storeu_ps(acc + (size_t)m * lda + (size_t)j * 16, a[m][j]);                    \
    }                                                                                                 \
    TGTK_INLINE void z_pvx_##SUF(size_t M, const float *p, size_t ldp, size_t T,                      \
                                 const char *const *rows, size_t off, size_t n, __m512 sx, float *acc, size_t lda) \
    {                                                                                                 \
        size_t m = 0;                                                                                 \
        for (; m + 4 <= M; m += 4) {                                                                  \
            size_t j = 0;                                                                             \
            for (; j + 32 <= n; j += 32) zpv_blk_##SUF(4, 2, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
            for (; j < n; j += 16) zpv_blk_##SUF(4, 1, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
        }                                                                                             \
        for (; m < M; m++) {                                                                          \
            size_t j = 0;                                                                             \
            for (; j + 32 <= n; j += 32) zpv_blk_##SUF(1, 2, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
            for (; j < n; j += 16) zpv_blk_##SUF(1, 1, p + m * ldp, ldp, T, rows, off, j, sx, acc + m * lda + j, lda); \
        }                                                                                             \
    }

/* the table's entries: rows whose width is not a multiple of 16 go to the
 * AVX2 kernels */
#define Z_ENTRIES(SUF, FMT)                                                                           \
    TGTK static void z_qk_##SUF(size_t M, const float *q, size_t T, const char *const *rows,          \
                                size_t off, size_t d, float scale, float *out, size_t ldo)            \
    {                                                                                                 \
        if (d % 16) avx2_base->qk[FMT](M, q, T, rows, off, d, scale, out, ldo);                       \
        else z_qkx_##SUF(M, q, T, rows, off, d, _mm512_setzero_ps(), scale, out, ldo);                \
    }                                                                                                 \
    TGTK static void z_pv_##SUF(size_t M, const float *p, size_t ldp, size_t T,                       \
                                const char *const *rows, size_t off, size_t n, float *acc, size_t lda) \
    {                                                                                                 \
        if (n % 16) avx2_base->pv[FMT](M, p, ldp, T, rows, off, n, acc, lda);                         \
        else z_pvx_##SUF(M, p, ldp, T, rows, off, n, _mm512_setzero_ps(), acc, lda);                  \
    }

Z_KERNELS(f, z_f, FKV__FMT_F32)
Z_KERNELS(h, z_h, FKV__FMT_F16)
Z_KERNELS(b, z_b, FKV__FMT_U8)
Z_KERNELS(n, z_n, FKV__FMT_U4)
Z_KERNELS(e, z_e, 0)
Z_ENTRIES(f, FKV__FMT_F32)
Z_ENTRIES(h, FKV__FMT_F16)
Z_ENTRIES(b, FKV__FMT_U8)
Z_ENTRIES(n, FKV__FMT_U4)

TGTK static void z_qk8(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d, float s,
                       float scale, float *out, size_t ldo)
{
    if (d % 16) avx2_base->qk8(M, q, T, rows, off, d, s, scale, out, ldo);
    else z_qkx_e(M, q, T, rows, off, d, _mm512_set1_ps(256.0f * s), scale, out, ldo);
}

TGTK static void z_pv8(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off,
                       size_t n, float s, float *acc, size_t lda)
{
    if (n % 16) avx2_base->pv8(M, p, ldp, T, rows, off, n, s, acc, lda);
    else z_pvx_e(M, p, ldp, T, rows, off, n, _mm512_set1_ps(256.0f * s), acc, lda);
}

/* ------------------------------------------------------------ VNNI keys
 *
 * Int8 and int4 keys against a query quantized per row, as llama.cpp's q8
 * dot products do: each query row (the scales already folded in) becomes
 * int8 codes qi = rint(q * 127 / amax) with step sq = amax / 127, and
 * vpdpbusd multiplies the keys' unsigned codes by them four at a time into
 * int32 sums, exact; out = scale * sq * sum.  Since |q - sq * qi| <= sq / 2
 * per channel, |out - scale * dot(q, codes)| <= scale * sq / 2 * sum of the
 * row's codes (plus the float rounding of the result), the bound
 * tests/test_attn.c checks.  Int4 codes hold element 2i in a byte's low
 * nibble and 2i + 1 in its high one, so the query is split into its even
 * and odd channels once per call.  Rows longer than FKV__VNNI_MAX_D go to
 * the FMA kernels. */
#define FKV__VNNI_MAX_D 512
#define TGTV __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

/* q[0..d) into int8 codes qi = rint(q / sq), sq = amax / 127; returns sq
 * (0 for a zero row, nan for a row with inf or nan, whose scores are then
 * nan as the FMA kernels' would be). */
TGTV static float quant_row(const float *q, size_t d, int8_t *qi)
{
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 mx = _mm512_setzero_ps();
    size_t j = 0;
    for (; j + 16 <= d; j += 16) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_loadu_ps(q + j), absm));
    if (j < d) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << (d - j)) - 1), q + j), absm));
    float amax = _mm512_reduce_max_ps(mx);
    if (!(amax > 0) || !isfinite(amax)) {
        memset(qi, 0, d);
        for (j = 0; j < d; j++)
            if (q[j] != q[j] || isinf(q[j])) return NAN;
        return 0;
    }
    const __m512 inv = _mm512_set1_ps(127.0f / amax);
    for (j = 0; j < d; j += 16) {
        __mmask16 m = d - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - j)) - 1);
        __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, q + j), inv)); /* nearest even */
        _mm_mask_storeu_epi8(qi + j, m, _mm512_cvtsepi32_epi8(c));
    }
    return amax / 127.0f;
}

TGTV static void v_qk_b(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                        float scale, float *out, size_t ldo)
{
    if (d > FKV__VNNI_MAX_D) {
        z_qk_b(M, q, T, rows, off, d, scale, out, ldo);
        return;
    }
    /* one step per 64 channels (a register of codes): an outlier channel
     * coarsens only its own block's query codes */
    _Alignas(64) int8_t qi[4][FKV__VNNI_MAX_D];
    float sq[4][FKV__VNNI_MAX_D / 64];
    size_t nblk = (d + 63) / 64;
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        size_t nm = M - m0 < 4 ? M - m0 : 4;
        for (size_t k = 0; k < nm; k++)
            for (size_t b = 0; b < nblk; b++) {
                size_t w = d - 64 * b < 64 ? d - 64 * b : 64;
                sq[k][b] = quant_row(q + (m0 + k) * d + 64 * b, w, qi[k] + 64 * b);
            }
        for (size_t t = 0; t < T; t++) {
            const char *r = rows[t] + off;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (size_t b = 0; b < nblk; b++) {
                size_t j = 64 * b, w = d - j < 64 ? d - j : 64;
                __mmask64 mk = w == 64 ? ~0ULL : ~0ULL >> (64 - w);
                __m512i kv = _mm512_maskz_loadu_epi8(mk, r + j);
                for (size_t k = 0; k < nm; k++) {
                    __m512i s32 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), kv, _mm512_maskz_loadu_epi8(mk, qi[k] + j));
                    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32), _mm512_set1_ps(sq[k][b]), acc[k]);
                }
            }
            for (size_t k = 0; k < nm; k++) out[(m0 + k) * ldo + t] = _mm512_reduce_add_ps(acc[k]) * scale;
        }
    }
}

TGTV static void v_qk_n(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                        float scale, float *out, size_t ldo)
{
    if (d > FKV__VNNI_MAX_D || d % 2) {
        z_qk_n(M, q, T, rows, off, d, scale, out, ldo);
        return;
    }
    _Alignas(64) int8_t qi[FKV__VNNI_MAX_D], qe[4][FKV__VNNI_MAX_D / 2], qo[4][FKV__VNNI_MAX_D / 2];
    float sq[4];
    size_t nb = d / 2, full = nb & ~(size_t)63, rem = nb - full;
    __mmask64 mk = rem ? (~0ULL >> (64 - rem)) : 0;
    const __m512i lo4 = _mm512_set1_epi8(15);
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        size_t nm = M - m0 < 4 ? M - m0 : 4;
        for (size_t k = 0; k < nm; k++) {
            sq[k] = quant_row(q + (m0 + k) * d, d, qi);
            for (size_t i = 0; i < nb; i++) qe[k][i] = qi[2 * i], qo[k][i] = qi[2 * i + 1];
        }
        for (size_t t = 0; t < T; t++) {
            const char *r = rows[t] + off;
            __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                              _mm512_setzero_si512()};
            for (size_t j = 0; j < full + (rem ? 64 : 0); j += 64) {
                __mmask64 m = j < full ? ~0ULL : mk;
                __m512i kv = _mm512_maskz_loadu_epi8(m, r + j);
                __m512i lo = _mm512_and_si512(kv, lo4), hi = _mm512_and_si512(_mm512_srli_epi16(kv, 4), lo4);
                for (size_t k = 0; k < nm; k++) {
                    acc[k] = _mm512_dpbusd_epi32(acc[k], lo, _mm512_maskz_loadu_epi8(m, qe[k] + j));
                    acc[k] = _mm512_dpbusd_epi32(acc[k], hi, _mm512_maskz_loadu_epi8(m, qo[k] + j));
                }
            }
            for (size_t k = 0; k < nm; k++)
                out[(m0 + k) * ldo + t] = (float)_mm512_reduce_add_epi32(acc[k]) * sq[k] * scale;
        }
    }
}

static fkv__simd_ops avx512_simd, vnni_simd;
static const fkv__simd_ops *avx512_simd_ptr, *vnni_simd_ptr;
static pthread_once_t avx512_once = PTHREAD_ONCE_INIT;

static void avx512_build(void)
{
    const fkv__simd_ops *b = fkv__simd_avx2_ops();
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves zmm state */
    if (!b || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
        return;
    avx2_base = b;
    avx512_simd = *b;
    avx512_simd.name = "avx512";
    avx512_simd.qk[FKV__FMT_F32] = z_qk_f, avx512_simd.qk[FKV__FMT_F16] = z_qk_h;
    avx512_simd.qk[FKV__FMT_U8] = z_qk_b, avx512_simd.qk[FKV__FMT_U4] = z_qk_n;
    avx512_simd.pv[FKV__FMT_F32] = z_pv_f, avx512_simd.pv[FKV__FMT_F16] = z_pv_h;
    avx512_simd.pv[FKV__FMT_U8] = z_pv_b, avx512_simd.pv[FKV__FMT_U4] = z_pv_n;
    avx512_simd.qk8 = z_qk8, avx512_simd.pv8 = z_pv8;
    avx512_simd_ptr = &avx512_simd;
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq")) {
        vnni_simd = avx512_simd;
        vnni_simd.name = "avx512-vnni";
        vnni_simd.qk[FKV__FMT_U8] = v_qk_b, vnni_simd.qk[FKV__FMT_U4] = v_qk_n;
        vnni_simd_ptr = &vnni_simd;
    }
}

/* The AVX2 table with the attention kernels widened (built once). */
const fkv__simd_ops *fkv__simd_avx512_ops(void)
{
    pthread_once(&avx512_once, avx512_build);
    return avx512_simd_ptr;
}

/* The AVX-512 table with the VNNI key kernels (built once). */
const fkv__simd_ops *fkv__simd_vnni_ops(void)
{
    pthread_once(&avx512_once, avx512_build);
    return vnni_simd_ptr;
}
#else
const fkv__simd_ops *fkv__simd_vnni_ops(void) { return NULL; }
const fkv__fp8_ops *fkv__fp8_avx512_ops(void) { return NULL; }
const fkv__simd_ops *fkv__simd_avx512_ops(void) { return NULL; }
#endif
