/* Weight rows in llama.cpp's block formats (gguf.h: FKV_GGML_Q8_0,
 * FKV_GGML_Q4_0): bytes per row, a row converted to f32, and an f32 row
 * quantized the way llama.cpp's reference quantizers do (ggml-quants.c,
 * quantize_row_q8_0_ref / quantize_row_q4_0_ref). */
#ifndef FKV_MODEL_WQUANT_H
#define FKV_MODEL_WQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one row of n elements (n a multiple of 32 for the block types);
 * 0 for a type this code does not know. */
size_t fkv_wq_row_bytes(uint32_t type, uint32_t n);
/* Whether a type is a block type this code reads (Q8_0, Q4_0). */
int fkv_wq_is_block(uint32_t type);
/* One row of n elements of a block type to f32. */
void fkv_wq_row_f32(uint32_t type, const uint8_t *src, uint32_t n, float *dst);
/* One f32 row of n elements (a multiple of 32) into a block type. */
void fkv_wq_quantize_row(uint32_t type, const float *src, uint32_t n, uint8_t *dst);

#endif
