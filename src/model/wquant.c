/* llama.cpp's Q8_0 and Q4_0 blocks (see wquant.h).  Scales are fp16 and
 * read with memcpy: the blocks are packed, 2-byte aligned at best. */
#include "model/wquant.h"

#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/half.h"

#define Q8_BYTES (2u + FKV_GGML_QK)
#define Q4_BYTES (2u + FKV_GGML_QK / 2u)

int fkv_wq_is_block(uint32_t type) { return type == FKV_GGML_Q8_0 || type == FKV_GGML_Q4_0; }

size_t fkv_wq_row_bytes(uint32_t type, uint32_t n)
{
    switch (type) {
    case FKV_GGML_F32: return (size_t)n * 4;
    case FKV_GGML_F16: return (size_t)n * 2;
    case FKV_GGML_Q8_0: return (size_t)(n / FKV_GGML_QK) * Q8_BYTES;
    case FKV_GGML_Q4_0: return (size_t)(n / FKV_GGML_QK) * Q4_BYTES;
    default: return 0;
    }
}

void fkv_wq_row_f32(uint32_t type, const uint8_t *src, uint32_t n, float *dst)
{
    uint32_t nb = n / FKV_GGML_QK;
    if (type == FKV_GGML_Q8_0) {
        for (uint32_t b = 0; b < nb; b++, src += Q8_BYTES, dst += FKV_GGML_QK) {
            uint16_t h;
            memcpy(&h, src, 2);
            float d = fkv_h2f(h);
            const int8_t *q = (const int8_t *)(src + 2);
            for (uint32_t j = 0; j < FKV_GGML_QK; j++) dst[j] = (float)q[j] * d;
        }
    } else if (type == FKV_GGML_Q4_0) {
        for (uint32_t b = 0; b < nb; b++, src += Q4_BYTES, dst += FKV_GGML_QK) {
            uint16_t h;
            memcpy(&h, src, 2);
            float d = fkv_h2f(h);
            const uint8_t *q = src + 2;
            for (uint32_t j = 0; j < FKV_GGML_QK / 2; j++) {
                dst[j] = (float)((int)(q[j] & 0x0F) - 8) * d;
                dst[j + FKV_GGML_QK / 2] = (float)((int)(q[j] >> 4) - 8) * d;
            }
        }
    }
}

void fkv_wq_quantize_row(uint32_t type, const float *src, uint32_t n, uint8_t *dst)
{
    uint32_t nb = n / FKV_GGML_QK;
    for (uint32_t b = 0; b < nb; b++, src += FKV_GGML_QK) {
        if (type == FKV_GGML_Q8_0) {
            /* d = max|x| / 127, q = round(x / d) */
            float amax = 0;
            for (uint32_t j = 0; j < FKV_GGML_QK; j++) amax = fmaxf(amax, fabsf(src[j]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t h = fkv_f2h(d);
            memcpy(dst, &h, 2);
            for (uint32_t j = 0; j < FKV_GGML_QK; j++) dst[2 + j] = (uint8_t)(int8_t)roundf(src[j] * id);
            dst += Q8_BYTES;
        } else {
            /* d = (the element of largest magnitude, signed) / -8, q = min(15, (int)(x / d + 8.5)) */
            float amax = 0, max = 0;
            for (uint32_t j = 0; j < FKV_GGML_QK; j++)
                if (fabsf(src[j]) > amax) {
                    amax = fabsf(src[j]);
                    max = src[j];
                }
            float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t h = fkv_f2h(d);
            memcpy(dst, &h, 2);
            for (uint32_t j = 0; j < FKV_GGML_QK / 2; j++) {
                int a = (int)(src[j] * id + 8.5f), c = (int)(src[j + FKV_GGML_QK / 2] * id + 8.5f);
                a = a > 15 ? 15 : a;
                c = c > 15 ? 15 : c;
                dst[2 + j] = (uint8_t)(a | (c << 4));
            }
            dst += Q4_BYTES;
        }
    }
}
