/* AVX-512 paths of simd.h, by target attributes (no -march flag): the fp8
 * E4M3 conversions, the 16-wide FMA attention kernels, and the VNNI integer
 * kernels for int8/int4 runs (sections below).
 *
 * fp8 conversions.  Each step mirrors the scalar reference of fp8.h, so the
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

/* exp(x) for x <= 0, 16 lanes: exp8 of simd_avx2.c at twice the width
 * (simd.h, FKV__EXP_*) */
TGTK_INLINE __m512 exp16(__m512 x)
{
    static const float P[] = FKV__EXP_P;
    x = _mm512_max_ps(x, _mm512_set1_ps(FKV__EXP_MIN));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(FKV__EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(FKV__EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(FKV__EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(P[0]);
    for (int k = 1; k < 6; k++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P[k]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* x[i] = exp(x[i] - mx), the sum returned; the tail masked, not scalar */
TGTK static float z_expsum(float *x, size_t n, float mx)
{
    __m512 s = _mm512_setzero_ps();
    const __m512 vm = _mm512_set1_ps(mx);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
        _mm512_mask_storeu_ps(x + i, k, e);
        s = _mm512_mask_add_ps(s, k, s, e);
    }
    return _mm512_reduce_add_ps(s);
}

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

/* ------------------------------------------------------------ VNNI kernels
 *
 * Int8 and int4 codes multiplied in integers, as llama.cpp's q8 dot products
 * do, with a second code row so that the quantized operand loses almost
 * nothing:
 *
 * Keys (vpdpbusd, the keys' unsigned codes times signed bytes): each query
 * row, the keys' channel scales already folded in, is written as
 * q ~= sq * (hi + lo / 256) with sq = amax / 127, hi = rint(q / sq) and
 * lo = rint(256 (q - sq hi) / sq) clamped to [-128, 127], so that
 * |q - sq (hi + lo / 256)| <= sq / 256 per channel; the two code rows' sums
 * are exact in int32 (256 S_hi + S_lo fits for rows of up to 256 channels)
 * and out = scale * sq / 256 * (256 S_hi + S_lo).  So each score is within
 * scale * sq / 256 * (sum of the row's codes) of scale * dot(q, codes), plus
 * float rounding: 128 times tighter than one int8 row of the query, and
 * below the keys' own quantization error.  Int4 codes hold element 2i in a
 * byte's low nibble and 2i + 1 in its high one, so the query is split into
 * its even and odd channels once per call.  Sixteen tokens' sums are added
 * across lanes together (a transposing tree, about 3 operations a score)
 * rather than one horizontal sum per score.
 *
 * Values (vpdpwssd, int16 pairs): each probability row (the values'
 * per-token scales already folded in) becomes int16 codes
 * W = rint(p * 32767 / amax), step sw = amax / 32767, and two tokens' codes
 * of one channel are interleaved into an int16 pair by one byte permute
 * (vpermt2b, AVX512-VBMI), so acc_j += sw * sum_t W_t code_tj, exact in
 * int32 for runs of up to 64 tokens.  Each output is within
 * sw / 2 * (sum over the run of the channel's codes) of the fp32 sum, plus
 * float rounding.  SageAttention2 quantizes P for P.V on GPUs in the same
 * spirit (to fp8); 15 bits keep the error far below the codes' own.
 *
 * qkq and pvq (simd.h) take the quantized runs with their scales: the
 * keys' channel scales are folded into the query and the values' token
 * scales into the probabilities inside the kernel, in registers, instead of
 * being staged through scale_q, h2f and add_rows per run.  Key rows are
 * read for two query rows at once.
 *
 * Rows outside these limits (keys wider than 256 channels or not a multiple
 * of 16, values not a multiple of the group, runs longer than 64 tokens, a
 * probability that is not finite) go to the FMA kernels. */
#define FKV__VNNI_MAX_D 256
#define FKV__VNNI_MAX_T 64
/* clang's sanitizer builds (the fuzz targets, which do not reach these
 * kernels) leave them uninstrumented: instrumented, their inlined bodies
 * took clang minutes to compile.  The ASan+UBSan test suite (gcc) checks
 * them instrumented. */
#if defined(__clang__)
#define FKV__VNNI_NOSAN __attribute__((no_sanitize("address", "undefined")))
#else
#define FKV__VNNI_NOSAN
#endif
#define TGTV                                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c"))) FKV__VNNI_NOSAN
#define TGTV_INLINE                                                                                       \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c"), always_inline)) \
    FKV__VNNI_NOSAN static inline

/* q[0..d) as sq * (hi + lo / 256) (above); returns sq: 0 for a zero row,
 * NaN for a row with inf or nan, whose scores are then NaN as the FMA
 * kernels' would be. */
TGTV static float quant_hilo(const float *q, size_t d, int8_t *hi, int8_t *lo)
{
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 mx = _mm512_setzero_ps();
    size_t j = 0;
    for (; j + 16 <= d; j += 16) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_loadu_ps(q + j), absm));
    if (j < d) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << (d - j)) - 1), q + j), absm));
    float amax = _mm512_reduce_max_ps(mx);
    if (!(amax > 0) || !isfinite(amax)) {
        memset(hi, 0, d);
        memset(lo, 0, d);
        for (j = 0; j < d; j++)
            if (q[j] != q[j] || isinf(q[j])) return NAN;
        return 0;
    }
    const float sq = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(127.0f / amax), inv_lo = _mm512_set1_ps(256.0f * 127.0f / amax),
                 vsq = _mm512_set1_ps(sq);
    for (j = 0; j < d; j += 16) {
        __mmask16 m = d - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - j)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, q + j);
        __m512i h = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv)); /* nearest even */
        __m512 r = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(h), vsq, x);
        __m512i l = _mm512_cvtps_epi32(_mm512_mul_ps(r, inv_lo));
        _mm_mask_storeu_epi8(hi + j, m, _mm512_cvtsepi32_epi8(h));
        _mm_mask_storeu_epi8(lo + j, m, _mm512_cvtsepi32_epi8(l)); /* saturates 128 to 127 */
    }
    return sq;
}

/* Sixteen tokens' scores in one register: lane i = the sum of token i's
 * sixteen lanes.  A transposing tree, built as the tokens come so that at
 * most one partial waits at each level: pairs (tr_a), fours (tr_b: lane
 * 4k + j of 128-bit lane k's partial of token j), eights (tr_c), sixteen
 * (tr_d). */
TGTV_INLINE __m512i tr_a(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
TGTV_INLINE __m512i tr_b(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
TGTV_INLINE __m512i tr_c(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, 0x44), _mm512_shuffle_i32x4(a, b, 0xee));
}
TGTV_INLINE __m512i tr_d(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
}

/* the codes of NR query rows (1 or 2, read against each key row once):
 * hi and lo, for int4 split into even (h, l) and odd (oh, ol) channels; NB
 * 64-byte blocks a key row, the last one masked by mk */
typedef struct vq {
    __m512i h[2][4], l[2][4], oh[2][2], ol[2][2];
    __mmask64 mk;
    int nb, u4, nr;
} vq;

/* 256 S_hi + S_lo of each query row against the key row at r (zero for r
 * NULL) into s[0..nr) */
TGTV_INLINE void kdot(const vq *c, const char *r, __m512i *s)
{
    if (!r) {
        for (int k = 0; k < c->nr; k++) s[k] = _mm512_setzero_si512();
        return;
    }
    __m512i ah[2], al[2];
    for (int k = 0; k < c->nr; k++) ah[k] = al[k] = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int b = 0; b < c->nb; b++)
    {
        __m512i kv = _mm512_maskz_loadu_epi8(b == c->nb - 1 ? c->mk : ~0ULL, r + 64 * b);
        if (c->u4) {
            const __m512i lo4 = _mm512_set1_epi8(15);
            __m512i e = _mm512_and_si512(kv, lo4), o = _mm512_and_si512(_mm512_srli_epi16(kv, 4), lo4);
            _Pragma("GCC unroll 2") for (int k = 0; k < c->nr; k++)
            {
                ah[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(ah[k], e, c->h[k][b]), o, c->oh[k][b]);
                al[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(al[k], e, c->l[k][b]), o, c->ol[k][b]);
            }
        } else {
            _Pragma("GCC unroll 2") for (int k = 0; k < c->nr; k++)
            {
                ah[k] = _mm512_dpbusd_epi32(ah[k], kv, c->h[k][b]);
                al[k] = _mm512_dpbusd_epi32(al[k], kv, c->l[k][b]);
            }
        }
    }
    for (int k = 0; k < c->nr; k++) s[k] = _mm512_add_epi32(_mm512_slli_epi32(ah[k], 8), al[k]);
}

/* scores of the query rows (their codes in c) against rows [0, T): row k
 * into out + k * ldo, times f[k], plus bias[k].  The tree's levels are
 * kept by index (a loop of pairs, not sixteen inlined dot products): the
 * same operations, a fraction of the code for the compiler to unroll. */
TGTV_INLINE void kscores(const vq *c, size_t T, const char *const *rows, size_t off, const float *f, const float *bias,
                         float *out, size_t ldo)
{
    for (size_t t0 = 0; t0 < T; t0 += 16) {
        const size_t n = T - t0 < 16 ? T - t0 : 16;
        __m512i lv[3][2]; /* the partial waiting at each level: pairs, fours, eights */
        for (int l = 0; l < 3; l++) lv[l][0] = lv[l][1] = _mm512_setzero_si512();
        _Pragma("GCC unroll 1") for (size_t i = 0; i < 16; i += 2)
        {
            __m512i a[2], b[2], w[2];
            kdot(c, i < n ? rows[t0 + i] + off : NULL, a);
            kdot(c, i + 1 < n ? rows[t0 + i + 1] + off : NULL, b);
            for (int k = 0; k < c->nr; k++) w[k] = tr_a(a[k], b[k]);
            if (!(i & 2)) { /* first pair of a four */
                for (int k = 0; k < c->nr; k++) lv[0][k] = w[k];
                continue;
            }
            for (int k = 0; k < c->nr; k++) w[k] = tr_b(lv[0][k], w[k]); /* a four */
            if (!(i & 4)) {
                for (int k = 0; k < c->nr; k++) lv[1][k] = w[k];
                continue;
            }
            for (int k = 0; k < c->nr; k++) w[k] = tr_c(lv[1][k], w[k]); /* an eight */
            if (!(i & 8)) {
                for (int k = 0; k < c->nr; k++) lv[2][k] = w[k];
                continue;
            }
            for (int k = 0; k < c->nr; k++)
                _mm512_mask_storeu_ps(out + k * ldo + t0, (__mmask16)((1u << n) - 1),
                                      _mm512_fmadd_ps(_mm512_cvtepi32_ps(tr_d(lv[2][k], w[k])), _mm512_set1_ps(f[k]),
                                                      _mm512_set1_ps(bias[k])));
        }
    }
}

/* Query row q[0..d) for keys stored as code * s + z per channel (s, z in
 * fp16 at km, km + d; d a multiple of 16): qs = q * s, returns
 * scale * dot(q, z), what scale_q gives (for km NULL, qs = q and 0). */
TGTV_INLINE float fold_keys(const float *q, size_t d, const uint16_t *km, float scale, float *qs)
{
    if (!km) {
        memcpy(qs, q, d * sizeof *q);
        return 0.0f;
    }
    __m512 cz = _mm512_setzero_ps();
    for (size_t j = 0; j < d; j += 16) {
        __m512 x = _mm512_loadu_ps(q + j);
        _mm512_store_ps(qs + j, _mm512_mul_ps(x, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(km + j)))));
        cz = _mm512_fmadd_ps(x, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(km + d + j))), cz);
    }
    return _mm512_reduce_add_ps(cz) * scale;
}

/* int8 (U4 0) or int4 (U4 1) keys, NB 64-byte blocks a row (d or d / 2
 * bytes); query rows two at a time */
TGTV_INLINE void vqk_rows(int NB, int U4, size_t M, const float *q, size_t T, const char *const *rows, size_t off,
                          size_t d, const uint16_t *km, float scale, float *out, size_t ldo)
{
    _Alignas(64) float qs[FKV__VNNI_MAX_D];
    /* zero past d: the channels the masked key loads leave out */
    _Alignas(64) int8_t hi[FKV__VNNI_MAX_D] = {0}, lo[FKV__VNNI_MAX_D] = {0};
    _Alignas(64) uint8_t evb[64], odb[64];
    for (int i = 0; i < 64; i++) evb[i] = (uint8_t)(2 * i), odb[i] = (uint8_t)(2 * i + 1);
    const __m512i ev = _mm512_load_si512(evb), od = _mm512_load_si512(odb);
    const size_t rb = U4 ? d / 2 : d;
    vq c;
    c.nb = NB, c.u4 = U4, c.mk = rb % 64 ? ~0ULL >> (64 - rb % 64) : ~0ULL;
    for (size_t m = 0; m < M; m += 2) {
        float f[2], bias[2];
        c.nr = M - m >= 2 ? 2 : 1;
        for (int k = 0; k < c.nr; k++) {
            const float *qr = q + (m + (size_t)k) * d;
            bias[k] = km ? fold_keys(qr, d, km, scale, qs) : 0.0f;
            f[k] = quant_hilo(km ? qs : qr, d, hi, lo) / 256.0f * scale;
            _Pragma("GCC unroll 4") for (int b = 0; b < NB; b++)
            {
                if (U4) { /* even and odd channels apart: bytes 2i and 2i + 1 of each 128 */
                    const __m512i h0 = _mm512_load_si512(hi + 128 * b), h1 = _mm512_load_si512(hi + 128 * b + 64);
                    const __m512i l0 = _mm512_load_si512(lo + 128 * b), l1 = _mm512_load_si512(lo + 128 * b + 64);
                    c.h[k][b] = _mm512_permutex2var_epi8(h0, ev, h1), c.oh[k][b] = _mm512_permutex2var_epi8(h0, od, h1);
                    c.l[k][b] = _mm512_permutex2var_epi8(l0, ev, l1), c.ol[k][b] = _mm512_permutex2var_epi8(l0, od, l1);
                } else {
                    c.h[k][b] = _mm512_load_si512(hi + 64 * b);
                    c.l[k][b] = _mm512_load_si512(lo + 64 * b);
                }
            }
        }
        if (c.nr == 2) { /* a constant nr in each copy, for the compiler */
            c.nr = 2;
            kscores(&c, T, rows, off, f, bias, out + m * ldo, ldo);
        } else {
            c.nr = 1;
            kscores(&c, T, rows, off, f, bias, out + m * ldo, ldo);
        }
    }
}

TGTV static void v_qk_b(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                        float scale, float *out, size_t ldo)
{
    switch (d > FKV__VNNI_MAX_D || d % 16 ? 0 : (d + 63) / 64) {
    case 1: vqk_rows(1, 0, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    case 2: vqk_rows(2, 0, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    case 3: vqk_rows(3, 0, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    case 4: vqk_rows(4, 0, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    default: z_qk_b(M, q, T, rows, off, d, scale, out, ldo);
    }
}

TGTV static void v_qk_n(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                        float scale, float *out, size_t ldo)
{
    switch (d > FKV__VNNI_MAX_D || d % 2 ? 0 : (d / 2 + 63) / 64) {
    case 1: vqk_rows(1, 1, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    case 2: vqk_rows(2, 1, M, q, T, rows, off, d, NULL, scale, out, ldo); break;
    default: z_qk_n(M, q, T, rows, off, d, scale, out, ldo);
    }
}

/* Keys stored as code * s + z per channel, the scales folded in here (the
 * table's qkq); 0 (nothing written) where the fast paths do not apply. */
TGTV static int v_qkq(int fmt, size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                      const uint16_t *km, float scale, float *out, size_t ldo)
{
    if (d > FKV__VNNI_MAX_D || d % 16) return 0;
    if (fmt == FKV__FMT_U8) switch ((d + 63) / 64) {
        case 1: vqk_rows(1, 0, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        case 2: vqk_rows(2, 0, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        case 3: vqk_rows(3, 0, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        default: vqk_rows(4, 0, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        }
    if (fmt == FKV__FMT_U4) switch ((d / 2 + 63) / 64) {
        case 1: vqk_rows(1, 1, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        default: vqk_rows(2, 1, M, q, T, rows, off, d, km, scale, out, ldo); return 1;
        }
    return 0;
}

/* p[0..T) (T <= 64) into int16 codes W = rint(p * 32767 / amax), zero from T
 * to the next even index; returns the step amax / 32767: 0 for a zero row,
 * NaN when a value is not finite. */
TGTV static float quant_w(const float *p, size_t T, int16_t *w)
{
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 mx = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (size_t j = 0; j < T; j += 16) {
        __mmask16 m = T - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (T - j)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, p + j);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); /* max_ps would drop a NaN */
        mx = _mm512_max_ps(mx, _mm512_and_ps(x, absm));
    }
    float amax = _mm512_reduce_max_ps(mx);
    if (nan || isinf(amax)) return NAN;
    const __m512 inv = _mm512_set1_ps(amax > 0 ? 32767.0f / amax : 0.0f);
    for (size_t j = 0; j < T + (T & 1); j += 16) {
        __mmask16 m = T - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (T - j)) - 1);
        __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), inv));
        _mm256_storeu_si256((__m256i *)(w + j), _mm512_cvtsepi32_epi16(c)); /* w has room for 64 */
    }
    return amax / 32767.0f;
}

/* int8 values, NM rows (constant) and 64 channels j0.. of them */
TGTV_INLINE void vpv_b_blk(int NM, int16_t (*w)[FKV__VNNI_MAX_T], const float *sw, const float *cadd, size_t T,
                           const char *const *rows, size_t off, size_t j0, float *acc, size_t lda)
{
    const __mmask64 even = 0x5555555555555555ULL;
    __m512i idx[4];
    _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
    {
        /* lane i: byte 16g + i of the first row, then of the second, as int16s */
        const __m512i i4 = _mm512_add_epi32(_mm512_set1_epi32(16 * g),
                                            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        idx[g] = _mm512_or_si512(i4, _mm512_slli_epi32(_mm512_add_epi32(i4, _mm512_set1_epi32(64)), 16));
    }
    __m512i a[4][4];
    _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++)
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) a[k][g] = _mm512_setzero_si512();
    for (size_t t = 0; t < T; t += 2) {
        __m512i r0 = _mm512_loadu_si512(rows[t] + off + j0);
        __m512i r1 = t + 1 < T ? _mm512_loadu_si512(rows[t + 1] + off + j0) : _mm512_setzero_si512();
        __m512i x[4];
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) x[g] = _mm512_maskz_permutex2var_epi8(even, r0, idx[g], r1);
        _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++)
        {
            int32_t pr;
            memcpy(&pr, w[k] + t, 4);
            const __m512i wv = _mm512_set1_epi32(pr);
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) a[k][g] = _mm512_dpwssd_epi32(a[k][g], x[g], wv);
        }
    }
    _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++)
    {
        float *o = acc + (size_t)k * lda + j0;
        const __m512 f = _mm512_set1_ps(sw[k]), c = _mm512_set1_ps(cadd[k]);
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) _mm512_storeu_ps(
            o + 16 * g, _mm512_add_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(a[k][g]), f, _mm512_loadu_ps(o + 16 * g)), c));
    }
}

/* int4 values, NM rows (constant) and 32 channels j0.. of them: even and
 * odd channels apart, interleaved again at the end */
TGTV_INLINE void vpv_n_blk(int NM, int16_t (*w)[FKV__VNNI_MAX_T], const float *sw, const float *cadd, size_t T,
                           const char *const *rows, size_t off, size_t j0, float *acc, size_t lda)
{
    const __mmask64 even = 0x5555555555555555ULL;
    const __m512i i4 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i idx = _mm512_or_si512(i4, _mm512_slli_epi32(_mm512_add_epi32(i4, _mm512_set1_epi32(16)), 16));
    const __m256i lo4 = _mm256_set1_epi8(15);
    __m512i ae[4], ao[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++) ae[k] = ao[k] = _mm512_setzero_si512();
    for (size_t t = 0; t < T; t += 2) {
        __m128i r0 = _mm_loadu_si128((const __m128i *)(rows[t] + off + j0 / 2));
        __m128i r1 = t + 1 < T ? _mm_loadu_si128((const __m128i *)(rows[t + 1] + off + j0 / 2)) : _mm_setzero_si128();
        __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1);
        __m512i e = _mm512_maskz_permutexvar_epi8(even, idx, _mm512_castsi256_si512(_mm256_and_si256(y, lo4)));
        __m512i o = _mm512_maskz_permutexvar_epi8(even, idx, _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(y, 4), lo4)));
        _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++)
        {
            int32_t pr;
            memcpy(&pr, w[k] + t, 4);
            const __m512i wv = _mm512_set1_epi32(pr);
            ae[k] = _mm512_dpwssd_epi32(ae[k], e, wv);
            ao[k] = _mm512_dpwssd_epi32(ao[k], o, wv);
        }
    }
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _Pragma("GCC unroll 4") for (int k = 0; k < NM; k++)
    {
        float *out = acc + (size_t)k * lda + j0;
        const __m512 f = _mm512_set1_ps(sw[k]), c = _mm512_set1_ps(cadd[k]);
        const __m512 fe = _mm512_cvtepi32_ps(ae[k]), fo = _mm512_cvtepi32_ps(ao[k]);
        _mm512_storeu_ps(out, _mm512_add_ps(_mm512_fmadd_ps(_mm512_permutex2var_ps(fe, lo_idx, fo), f, _mm512_loadu_ps(out)), c));
        _mm512_storeu_ps(out + 16,
                         _mm512_add_ps(_mm512_fmadd_ps(_mm512_permutex2var_ps(fe, hi_idx, fo), f, _mm512_loadu_ps(out + 16)), c));
    }
}

/* values of either format: rows four at a time, their probabilities coded
 * once, then the channels STEP at a time; a block of rows holding a
 * probability that is not finite goes to the FMA kernel FB (its NaN or inf,
 * as without VNNI) */
#define VPV_BODY(BLK, STEP, FB)                                                                           \
    _Alignas(64) int16_t w[4][FKV__VNNI_MAX_T];                                                           \
    float sw[4];                                                                                          \
    static const float zero4[4];                                                                          \
    for (size_t m0 = 0; m0 < M; m0 += 4) {                                                                \
        const size_t nm = M - m0 < 4 ? M - m0 : 4;                                                        \
        int finite = 1;                                                                                   \
        for (size_t k = 0; k < nm; k++) {                                                                 \
            sw[k] = quant_w(p + (m0 + k) * ldp, T, w[k]);                                                 \
            finite &= sw[k] == sw[k];                                                                     \
        }                                                                                                 \
        if (!finite) {                                                                                    \
            FB(nm, p + m0 * ldp, ldp, T, rows, off, n, acc + m0 * lda, lda);                              \
            continue;                                                                                     \
        }                                                                                                 \
        for (size_t j0 = 0; j0 < n; j0 += STEP) switch (nm) {                                             \
            case 4: BLK(4, w, sw, zero4, T, rows, off, j0, acc + m0 * lda, lda); break;                          \
            case 3: BLK(3, w, sw, zero4, T, rows, off, j0, acc + m0 * lda, lda); break;                          \
            case 2: BLK(2, w, sw, zero4, T, rows, off, j0, acc + m0 * lda, lda); break;                          \
            default: BLK(1, w, sw, zero4, T, rows, off, j0, acc + m0 * lda, lda); break;                         \
            }                                                                                             \
    }

/* the table's entries: int8 values (64 channels a step, two tokens' codes
 * of channel c being lane c's int16 pair) and int4 values (32 a step);
 * acc[m][j] += sum_t p[m][t] code_t[j] */
#define VPV_ENTRY(SUF, STEP)                                                                              \
    TGTV static void v_pv_##SUF(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows,  \
                                size_t off, size_t n, float *acc, size_t lda)                             \
    {                                                                                                     \
        if (n % STEP || T > FKV__VNNI_MAX_T) {                                                            \
            z_pv_##SUF(M, p, ldp, T, rows, off, n, acc, lda);                                             \
            return;                                                                                       \
        }                                                                                                 \
        VPV_BODY(vpv_##SUF##_blk, STEP, z_pv_##SUF)                                                       \
    }
VPV_ENTRY(b, 64)
VPV_ENTRY(n, 32)

/* Values stored as code * s_t + z_t per (token, group of G channels), the
 * table's pvq: for each group and block of four rows, w = p * s_t and
 * c = sum_t p z_t (as scale_q), then the VNNI kernel with c added after
 * (as add_rows); a block with a value that is not finite goes to the FMA
 * kernel with the same w and c.  Returns 0 (nothing written) where the
 * fast paths do not apply. */
TGTV static int v_pvq(int fmt, size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off,
                      size_t d, size_t G, const uint16_t *vm, size_t vstride, size_t zoff, float *acc, size_t lda)
{
    const int u4 = fmt == FKV__FMT_U4;
    if ((fmt != FKV__FMT_U8 && !u4) || T > FKV__VNNI_MAX_T || !T || G != (u4 ? 32u : 64u) || d % G) return 0;
    _Alignas(64) float wf[4][FKV__VNNI_MAX_T];
    _Alignas(64) int16_t w[4][FKV__VNNI_MAX_T];
    float sw[4], c[4];
    for (size_t gi = 0; gi < d / G; gi++) {
        const uint16_t *sg = vm + gi * vstride, *zg = sg + zoff;
        __m512 sv[4], zv[4];
        for (size_t j = 0; j < 4; j++) {
            __mmask16 mk = T <= 16 * j ? 0 : T - 16 * j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (T - 16 * j)) - 1);
            sv[j] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, sg + 16 * j));
            zv[j] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, zg + 16 * j));
        }
        const size_t hoff = off + (u4 ? gi * G / 2 : gi * G);
        for (size_t m0 = 0; m0 < M; m0 += 4) {
            const size_t nm = M - m0 < 4 ? M - m0 : 4;
            int finite = 1;
            for (size_t k = 0; k < nm; k++) {
                const float *pr = p + (m0 + k) * ldp;
                __m512 cz = _mm512_setzero_ps();
                for (size_t j = 0; j < 4 && 16 * j < T; j++) {
                    __mmask16 mk = T - 16 * j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (T - 16 * j)) - 1);
                    __m512 x = _mm512_maskz_loadu_ps(mk, pr + 16 * j);
                    _mm512_store_ps(wf[k] + 16 * j, _mm512_mul_ps(x, sv[j]));
                    cz = _mm512_fmadd_ps(x, zv[j], cz);
                }
                c[k] = _mm512_reduce_add_ps(cz);
                sw[k] = quant_w(wf[k], T, w[k]);
                finite &= sw[k] == sw[k];
            }
            float *a = acc + m0 * lda + gi * G;
            if (!finite) {
                if (u4) z_pv_n(nm, wf[0], FKV__VNNI_MAX_T, T, rows, hoff, G, a, lda);
                else z_pv_b(nm, wf[0], FKV__VNNI_MAX_T, T, rows, hoff, G, a, lda);
                for (size_t k = 0; k < nm; k++)
                    for (size_t j = 0; j < G; j++) a[k * lda + j] += c[k];
                continue;
            }
#define PVQ_CASE(BLK)                                                                                     \
    switch (nm) {                                                                                         \
    case 4: BLK(4, w, sw, c, T, rows, hoff, 0, a, lda); break;                                           \
    case 3: BLK(3, w, sw, c, T, rows, hoff, 0, a, lda); break;                                           \
    case 2: BLK(2, w, sw, c, T, rows, hoff, 0, a, lda); break;                                           \
    default: BLK(1, w, sw, c, T, rows, hoff, 0, a, lda); break;                                          \
    }
            if (u4) PVQ_CASE(vpv_n_blk) else PVQ_CASE(vpv_b_blk)
#undef PVQ_CASE
        }
    }
    return 1;
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
    avx512_simd.expsum = z_expsum;
    avx512_simd_ptr = &avx512_simd;
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vbmi")) {
        vnni_simd = avx512_simd;
        vnni_simd.name = "avx512-vnni";
        vnni_simd.qk[FKV__FMT_U8] = v_qk_b, vnni_simd.qk[FKV__FMT_U4] = v_qk_n;
        vnni_simd.pv[FKV__FMT_U8] = v_pv_b, vnni_simd.pv[FKV__FMT_U4] = v_pv_n;
        vnni_simd.qkq = v_qkq, vnni_simd.pvq = v_pvq;
        vnni_simd_ptr = &vnni_simd;
    }
}

/* The AVX2 table with the attention kernels widened (built once). */
const fkv__simd_ops *fkv__simd_avx512_ops(void)
{
    pthread_once(&avx512_once, avx512_build);
    return avx512_simd_ptr;
}

/* The AVX-512 table with the VNNI kernels (built once). */
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
