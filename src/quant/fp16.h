/* Scalar IEEE binary16 conversions (round to nearest even), inline because
 * the scalar codec paths call them per element.  The vector paths use F16C
 * (src/quant/simd_avx2.c), which gives bit-identical results. */
#ifndef FKV_QUANT_FP16_H
#define FKV_QUANT_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fkv__h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        /* zero or subnormal: m * 2^-24, exact in fp32 */
        float f = (float)m * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t fkv__f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, nan (keeps nan quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half; scale to units of 2^-24 */
        float a;
        memcpy(&a, &ax, sizeof a);
        uint32_t m = (uint32_t)nearbyintf(a * 16777216.0f); /* nearest even; 1024 = min normal */
        return (uint16_t)(sign | m);
    }
    uint32_t h = ((((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13));
    uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

#endif
