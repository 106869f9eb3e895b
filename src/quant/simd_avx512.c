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
#else
const fkv__fp8_ops *fkv__fp8_avx512_ops(void) { return NULL; }
#endif
