/* fairkv quantized KV codecs (int8, int4, fp8) and the hook the cache calls to
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
 * fp8 chunks (FKV_FP8) store one OCP E4M3 code per element (rows of
 * n_kv_heads*head_dim bytes, like int8) and, per layer, one fp32 scale per
 * kv head for K and one for V: qmeta is
 *        for layer l: kscale[n_kv_heads] then vscale[n_kv_heads], fp32
 * (4 * n_kv_heads uint16 slots each, so fkv_quant_meta_bytes counts it in
 * the same units).  scale = amax / 448 over that head's K (or V) in the
 * whole chunk, so the largest element maps to E4M3's largest finite value;
 * code = e4m3(x / scale) (round to nearest even, saturating), decoded x =
 * e4m3_value(code) * scale (the conversions of fkv_f32_to_e4m3, one
 * implementation).  Symmetric: no zero point.  Error bound per element,
 * before the base-dtype rounding: |x - decoded| <= 2^-4 |x| + 2^-10 scale,
 * plus fp32 rounding of the two products (a relative 2^-22); an outlier
 * channel raises the head's scale and so only the subnormal term of the
 * other channels (amax * 2^-10 / 448).
 * How this differs from vLLM's fp8 cache: vLLM keeps one static scale per
 * layer (k_scale / v_scale, per tensor or per head), fixed at load time
 * from a calibration run or 1.0, so values beyond 448 * scale saturate.
 * The cache has no calibration run and quantizes a chunk only once it is
 * complete and cold, so it can measure the chunk's own range: a dynamic
 * per-chunk scale never saturates and follows each chunk's magnitude, at a
 * cost of 8 bytes per (layer, kv head) per chunk.
 *
 * Memory: with an fp16 base and page_tokens 16, a 64-token chunk takes
 * 0.531 (int8), 0.297 (int4) and 0.500 (fp8) of its fp16 bytes, scales
 * included (fp8's scales add n_layers * n_kv_heads * 16 bytes per chunk).  Pages
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
 * dtype is not base, int8, int4 or fp8, or the geometry is invalid. */
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
 * fkv_quant_meta_bytes).  dtype: FKV_INT8, FKV_INT4 or FKV_FP8.
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

/* Pure, thread-safe.  The reverse: decodes a chunk of `dtype` (int8/int4/fp8) in
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


/* ---------------------------------------------------------------- block codecs
 *
 * Every precision the project prices, applied to a block of n_tokens tokens
 * of one layer: K and V as [n_tokens][n_kv_heads][head_dim] fp32.  The round
 * trip (encode, then decode in place) is what attention over the stored codes
 * computes, up to fp32 rounding: the accuracy harness (`fairkv model eval`)
 * and the tests use it.  fkv_kvc_bytes gives the bytes the codes and scales
 * of a block take.
 *
 *  f32       no rounding: the reference
 *  f16       IEEE binary16, round to nearest even
 *  fp8       OCP E4M3 (largest finite 448, no infinities, round to nearest
 *            even, saturating), x = code * scale with one fp32 scale per
 *            layer for K and one for V: vLLM's per-tensor fp8 cache
 *            (k_scale / v_scale, docs "Quantized KV Cache")
 *  fp8-head  E4M3 with one fp32 scale per (layer, kv head) for K and for V:
 *            vLLM's per-attention-head scheme
 *            Both fp8 scales are static: amax / 448 of a calibration run
 *            (fkv_kvc_calib), as vLLM's calibrated scales; values beyond the
 *            calibrated range saturate.  Error: at most 2^-4 |x| (+ 2^-10
 *            scale below 2^-6 scale) inside the range.
 *  int8      the chunk codec above (keys per (head, channel) over groups of
 *  int4      64 tokens, values per (token, head) over channel groups)
 *  int4r     keys rotated per head by the normalized Walsh-Hadamard
 *            transform (fkv_hadamard: orthogonal and its own inverse, so a
 *            query rotated alike keeps every dot product), then int4 per
 *            (token, head) over groups of min(head_dim, 32) channels: the
 *            rotation spreads outlier channels over the whole row, so a
 *            per-token range no longer pays for them (llama.cpp's rotated
 *            q4_0 cache, QuaRot).  Values as int4.  head_dim a power of two.
 *  int2      KIVI's 2-bit: keys per (head, channel) over groups of 32
 *            tokens, values per (token, head) over groups of 32 channels
 *  fp8-chunk the cache's own fp8 chunks (FKV_FP8 above, through
 *            fkv_quant_chunk): E4M3 with a dynamic fp32 scale per kv head
 *            for K and for V, amax / 448 of the block itself (the block is
 *            the chunk), so nothing saturates and no calibration is used
 * The integer codecs are asymmetric with fp16 scale and zero (the bound of
 * the chunk codec: |x - decoded| <= scale / 2 per element, in the rotated
 * basis for int4r keys, where the orthogonal rotation keeps the error's
 * norm) and need finite values within fp16 range.
 */
typedef enum fkv_kvc {
    FKV_KVC_F32 = 0,
    FKV_KVC_F16,
    FKV_KVC_FP8,
    FKV_KVC_FP8_HEAD,
    FKV_KVC_INT8,
    FKV_KVC_INT4,
    FKV_KVC_INT4R,
    FKV_KVC_INT2,
    FKV_KVC_FP8_CHUNK,
    FKV_KVC_COUNT
} fkv_kvc;

#define FKV_KVC_INT4R_GROUP 32 /* channels per (token, head) scale of int4r keys */
#define FKV_KVC_INT2_GROUP 32  /* int2: key tokens per channel scale, value channels per token scale */

/* Pure.  "f32", "f16", "fp8", "fp8-head", "int8", "int4", "int4r", "int2";
 * NULL for a value out of range. */
FKV_API const char *fkv_kvc_name(fkv_kvc c);
/* Pure.  The reverse; FKV_EINVAL (naming the choices) for an unknown name. */
FKV_API fkv_status fkv_kvc_parse(const char *s, fkv_kvc *out);

/* Pure.  Bytes of n_tokens tokens' K and V of one layer in codec c: codes
 * plus the scales stored with them (per-layer fp8 scales are not counted:
 * 8 bytes per layer (fp8) or 8 per layer and kv head (fp8-head) for the
 * whole cache).  0 for a bad codec or zero size. */
FKV_API uint64_t fkv_kvc_bytes(fkv_kvc c, uint32_t n_tokens, uint32_t n_kv_heads, uint32_t head_dim);

/* The range a calibration run observed: per (layer, kv head), the largest
 * |K| and |V|.  The fp8 codecs take their scales from it. */
typedef struct fkv_kvc_calib {
    uint32_t n_layers, n_kv_heads;
    float *k_amax, *v_amax; /* [n_layers][n_kv_heads] */
} fkv_kvc_calib;

FKV_API fkv_status fkv_kvc_calib_init(fkv_kvc_calib *c, uint32_t n_layers, uint32_t n_kv_heads);
FKV_API void fkv_kvc_calib_free(fkv_kvc_calib *c);
/* Folds n_tokens tokens of K and V ([n_tokens][n_kv_heads][head_dim]) of
 * `layer` into the ranges.  FKV_EINVAL for a bad layer or non-finite value. */
FKV_API fkv_status fkv_kvc_calib_observe(fkv_kvc_calib *c, uint32_t layer, const float *k, const float *v,
                                         uint32_t n_tokens, uint32_t head_dim);
/* The fp8 scale of (layer, head) for K (is_v 0) or V: amax / 448 over the
 * layer's heads (per_head 0) or of the head alone; 1 when amax is 0. */
FKV_API float fkv_kvc_fp8_scale(const fkv_kvc_calib *c, uint32_t layer, uint32_t head, int is_v, int per_head);

/* Thread-safe.  Encodes K and V of a block in codec c and decodes them back
 * in place.  cal: needed by fp8 and fp8-head (layer < cal->n_layers,
 * n_kv_heads == cal->n_kv_heads), ignored otherwise.  FKV_EINVAL (message in
 * err) for bad arguments, a head_dim the codec cannot take, or values the
 * codec cannot represent (non-finite; beyond fp16 range for f16 and the
 * integer codecs); k and v may then be partly rewritten.  FKV_ENOMEM. */
FKV_API fkv_status fkv_kvc_roundtrip(fkv_kvc c, const fkv_kvc_calib *cal, uint32_t layer, float *k, float *v,
                                     uint32_t n_tokens, uint32_t n_kv_heads, uint32_t head_dim, char *err,
                                     size_t errlen);

/* Pure.  In place, x[n] <- H x / sqrt(n) (Walsh-Hadamard, Sylvester order),
 * n a power of two (else x is left alone and FKV_EINVAL is returned). */
FKV_API fkv_status fkv_hadamard(float *x, uint32_t n);

/* Pure.  One E4M3 code: round to nearest even, saturating at +-448, NaN to
 * 0x7f; and its exact value. */
FKV_API uint8_t fkv_f32_to_e4m3(float x);
FKV_API float fkv_e4m3_to_f32(uint8_t c);

/* Which path the fp8 conversions use: "avx512" (AVX-512F, detected at run
 * time) or "scalar"; FAIRKV_SIMD=scalar forces the portable one.  Both give
 * the same bits. */
FKV_API const char *fkv_fp8_path(void);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_QUANT_H */
