/* fairkv quantized KV codecs (int8, int4) and the hook the cache calls to
 * quantize a cold chunk into fewer pages.
 *
 * Layout (KIVI's: keys per channel, values per token; all "pure" functions
 * here touch no cache state and are thread-safe):
 *
 *  - Quantized K/V data live in ordinary pages of the cache's K[l] / V[l]
 *    arrays, so a quantized chunk still occupies whole pages of the same
 *    byte stride.  A page of natural size S = page_tokens * n_kv_heads *
 *    head_dim * sizeof(base) bytes holds S / row_bytes quantized tokens
 *    (fkv_quant_tokens_per_page): with an fp16 base, 2*page_tokens int8
 *    tokens or 4*page_tokens int4 tokens.  Token t of the chunk lives in
 *    page pages[t / tpp], slot t % tpp; a slot is one row [n_kv_heads][head_dim]
 *    of unsigned codes: int8 one byte per element, int4 two elements per
 *    byte (element 2i in the low nibble, 2i+1 in the high nibble).
 *  - Keys: per (head, channel) an fp16 scale and fp16 zero point over each
 *    group of FKV_QK_GROUP consecutive tokens of the chunk (the last group
 *    may be shorter).  Channel outliers of real keys stay in their own
 *    channel's range instead of inflating a whole token's scale.
 *  - Values: per (token, head) an fp16 scale and zero over each group of
 *    FKV_QV_GROUP_INT8 / FKV_QV_GROUP_INT4 consecutive channels.
 *  - Decoding: x = code * scale + zero (asymmetric, codes 0..255 or 0..15).
 *  - qmeta, one buffer per chunk covering all layers, fp16 (uint16 bits):
 *        for layer l in [0, n_layers):
 *          kmeta[n_kv_heads][n_kgroups][2][head_dim]   (scale row, zero row)
 *          vmeta[n_kv_heads][n_vgroups][2][n_tokens]    (scale row, zero row)
 *    with n_kgroups = ceil(n_tokens / FKV_QK_GROUP) and
 *    n_vgroups = ceil(head_dim / value group).  Size: fkv_quant_meta_bytes().
 *
 * Error bound (per element, before the base-dtype rounding of a decoded
 * value): |x - decoded| <= scale/2.  The stored fp16 scale is at most
 * ((max - min) + u) / qmax * (1 + 2^-10) + 2^-24 for its group, qmax = 255
 * or 15, u = one fp16 ulp of the group minimum: the zero point is the
 * minimum rounded down to fp16 and the scale is rounded up, so every value
 * of the group lies inside the code range (nothing is clipped).  Values
 * must be finite and within fp16 range (|x| <= 65504).  The largest codes
 * of a group whose maximum is near 65504 decode a little above it: into an
 * fp16 base they saturate at +-65504 (closer to x, never infinite).
 *
 * Memory: with an fp16 base and page_tokens 16, a 64-token chunk takes
 * 0.531 (int8) and 0.297 (int4) of its fp16 bytes, scales included.  Pages
 * are whole: int4 reaches that only for chunks of a multiple of
 * 4*page_tokens tokens (8*page_tokens from an fp32 base); a shorter chunk
 * still takes one page.
 */
#ifndef FAIRKV_QUANT_H
#define FAIRKV_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FKV_QK_GROUP 64      /* key tokens per (head, channel) scale */
#define FKV_QV_GROUP_INT8 64 /* value channels per (token, head) scale, int8 */
#define FKV_QV_GROUP_INT4 32 /* value channels per (token, head) scale, int4 */

/* The geometry of a cache's K/V storage, as the codecs and kernels see it. */
typedef struct fkv_kv_geom {
    uint32_t n_layers;
    uint32_t n_kv_heads;
    uint32_t head_dim;    /* must be even for int4 */
    uint32_t page_tokens; /* tokens per base-dtype page */
    fkv_dtype base;       /* FKV_F32 or FKV_F16: dtype of the K/V arrays */
    uint64_t page_stride; /* bytes between pages; 0 = natural size (see above) */
    uint32_t n_pages;     /* pages in each K/V array: page ids must be below */
} fkv_kv_geom;

/* One layer's arrays: [n_pages][page_tokens][n_kv_heads][head_dim] of base. */
typedef struct fkv_kv_layer {
    void *k;
    void *v;
} fkv_kv_layer;

/* Pure.  FKV_OK if the geometry is usable (names the bad field in err). */
FKV_API fkv_status fkv_kv_geom_check(const fkv_kv_geom *g, char *err, size_t errlen);

/* Pure.  Natural page size in bytes: page_tokens*n_kv_heads*head_dim*sizeof(base). */
FKV_API uint64_t fkv_kv_page_bytes(const fkv_kv_geom *g);

/* Pure.  Tokens one page holds in `dtype` (base dtype: page_tokens). 0 if
 * dtype is not base, int8 or int4, or the geometry is invalid. */
FKV_API uint32_t fkv_quant_tokens_per_page(const fkv_kv_geom *g, fkv_dtype dtype);

/* Pure.  Pages a chunk of n_tokens needs in `dtype` (base or quantized). */
FKV_API uint32_t fkv_quant_pages_needed(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens);

/* Pure.  Bytes of the chunk's qmeta buffer (0 for the base dtype). */
FKV_API size_t fkv_quant_meta_bytes(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens);

/* Pure.  Bytes a chunk of n_tokens occupies in `dtype`, K and V of all
 * layers: whole pages at their natural size plus qmeta.  The memory target
 * compares this with the same chunk at fp16. */
FKV_API uint64_t fkv_quant_chunk_bytes(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens);

/* Pure, thread-safe (writes only the destination pages and qmeta).
 * Quantizes all layers of one chunk of n_tokens (n_tokens >= 1), stored in
 * base dtype in src_pages[n_src] (n_src >= pages_needed(base)), into
 * dst_pages[n_dst] (n_dst == pages_needed(dtype)) and qmeta (qmeta_bytes >=
 * fkv_quant_meta_bytes).  dtype: FKV_INT8 or FKV_INT4.
 *
 * In place: dst_pages may be exactly the first n_dst entries of src_pages
 * (quantizing then needs no free page; the cache frees the rest of
 * src_pages afterwards).  Otherwise the two lists must be disjoint; any
 * other overlap is FKV_EINVAL.  FKV_EINVAL also for non-finite values or
 * values beyond fp16 range (the destination is then partly written).
 * FKV_ENOMEM if the scratch row buffer cannot be allocated. */
FKV_API fkv_status fkv_quant_chunk(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                                   const uint32_t *src_pages, uint32_t n_src, fkv_dtype dtype,
                                   const uint32_t *dst_pages, uint32_t n_dst, void *qmeta,
                                   size_t qmeta_bytes, char *err, size_t errlen);

/* Pure, thread-safe.  The reverse: decodes a chunk of `dtype` (int8/int4) in
 * src_pages[n_src] with its qmeta into base dtype in dst_pages[n_dst]
 * (n_dst >= pages_needed(base)).  In place: src_pages may be exactly the
 * first n_src entries of dst_pages; otherwise disjoint. */
FKV_API fkv_status fkv_dequant_chunk(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                                     fkv_dtype dtype, const uint32_t *src_pages, uint32_t n_src,
                                     const void *qmeta, size_t qmeta_bytes, const uint32_t *dst_pages,
                                     uint32_t n_dst, char *err, size_t errlen);

/* Pure.  IEEE binary16 conversions (round to nearest even). */
FKV_API uint16_t fkv_f32_to_f16(float x);
FKV_API float fkv_f16_to_f32(uint16_t h);

/* Which vector path the codecs and kernels use: "avx2" (AVX2+FMA+F16C,
 * detected at run time) or "scalar".  FAIRKV_SIMD=scalar in the environment
 * forces the portable path. */
FKV_API const char *fkv_simd_path(void);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_QUANT_H */
