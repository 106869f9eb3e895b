/* Scalar OCP FP8 E4M3 ("E4M3FN": 4 exponent bits with bias 7, 3 mantissa
 * bits, no infinities, S.1111.111 is NaN, largest finite 448), the reference
 * the AVX-512 path (simd_avx512.c) reproduces bit for bit.
 *
 * Encoding rounds to nearest even and saturates: |x| >= 448 (infinities
 * included) gives +-448, as CUDA's __NV_SATFINITE conversion that vLLM's
 * fp8 cache uses; NaN gives 0x7f.  Below 2^-6 (the smallest normal) the
 * codes are subnormal, steps of 2^-9.  So for |x| <= 448 the error is at
 * most 2^-4 |x| (half a unit of the 3-bit mantissa) or 2^-10 (subnormals).
 *
 * Decoding is exact: with the sign moved to bit 15 and the other seven bits
 * shifted left by 7, the code is a binary16 of value x * 2^-8 (the exponent
 * biases differ by 8), subnormals included; fkv__e4m3_dec computes the same
 * number directly.  The NaN code decodes as 480 (never produced here). */
#ifndef FKV_QUANT_FP8_H
#define FKV_QUANT_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint8_t fkv__e4m3_enc(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint8_t sign = (uint8_t)((b >> 24) & 0x80u);
    if (x != x) return 0x7fu;
    float a = fabsf(x);
    if (a > 448.0f) a = 448.0f;
    if (a < 0.015625f) /* 2^-6: subnormal codes m * 2^-9, m in 0..8 (8 is the smallest normal) */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 512.0f));
    memcpy(&b, &a, sizeof b);
    /* round the 23-bit mantissa to 3 bits, nearest even; a carry moves into
     * the exponent as it should */
    uint32_t r = b + 0x7ffffu + ((b >> 20) & 1u);
    return (uint8_t)(sign | (uint8_t)((r >> 20) - (120u << 3)));
}

static inline float fkv__e4m3_dec(uint8_t c)
{
    uint32_t e = (c >> 3) & 15u, m = c & 7u;
    float v = e ? ldexpf(1.0f + (float)m * 0.125f, (int)e - 7) : (float)m * 0.001953125f;
    return (c & 0x80u) ? -v : v;
}

#endif
