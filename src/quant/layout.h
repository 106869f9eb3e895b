/* Internal view of the quantized chunk layout described in fairkv_quant.h,
 * shared by the codecs (quant.c) and the attention tiles (src/attn). */
#ifndef FKV_QUANT_LAYOUT_H
#define FKV_QUANT_LAYOUT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fairkv_quant.h"
#include "util/err.h"

static inline uint32_t fkv__esize(fkv_dtype base) { return base == FKV_F32 ? 4u : 2u; }
static inline uint32_t fkv__qbits(fkv_dtype t)
{
    return t == FKV_INT8 || t == FKV_FP8 ? 8u : t == FKV_INT4 ? 4u : 0u;
}
/* the quantized chunk formats the codecs and tiles read */
static inline int fkv__is_quant(fkv_dtype t) { return t == FKV_INT8 || t == FKV_INT4 || t == FKV_FP8; }
static inline uint32_t fkv__vgroup(fkv_dtype t) { return t == FKV_INT4 ? FKV_QV_GROUP_INT4 : FKV_QV_GROUP_INT8; }
static inline uint64_t fkv__stride(const fkv_kv_geom *g) { return g->page_stride ? g->page_stride : fkv_kv_page_bytes(g); }

/* bytes of one token row [n_kv_heads][head_dim] in dtype t (base or quantized) */
static inline uint64_t fkv__row_bytes(const fkv_kv_geom *g, fkv_dtype t)
{
    uint64_t e = (uint64_t)g->n_kv_heads * g->head_dim;
    if (t == g->base) return e * fkv__esize(t);
    return e * fkv__qbits(t) / 8u;
}

static inline uint32_t fkv__kgroups(uint32_t n_tokens) { return (n_tokens + FKV_QK_GROUP - 1) / FKV_QK_GROUP; }
static inline uint32_t fkv__vgroups(const fkv_kv_geom *g, fkv_dtype t)
{
    return (g->head_dim + fkv__vgroup(t) - 1) / fkv__vgroup(t);
}

/* qmeta of one layer, in uint16 (fp16) elements: kmeta then vmeta */
static inline size_t fkv__kmeta_elems(const fkv_kv_geom *g, uint32_t n_tokens)
{
    return (size_t)g->n_kv_heads * fkv__kgroups(n_tokens) * 2u * g->head_dim;
}
static inline size_t fkv__layer_meta_elems(const fkv_kv_geom *g, fkv_dtype t, uint32_t n_tokens)
{
    /* fp8: one fp32 scale per kv head for K, then for V (two uint16 slots each) */
    if (t == FKV_FP8) return (size_t)g->n_kv_heads * 4u;
    return fkv__kmeta_elems(g, n_tokens) + (size_t)n_tokens * g->n_kv_heads * fkv__vgroups(g, t) * 2u;
}
/* scale row of keys (head h, token group gi); the zero row follows it */
static inline const uint16_t *fkv__kmeta(const uint16_t *layer_meta, const fkv_kv_geom *g,
                                         uint32_t n_tokens, uint32_t h, uint32_t gi)
{
    return layer_meta + ((size_t)h * fkv__kgroups(n_tokens) + gi) * 2u * g->head_dim;
}
/* value scales of (head h, channel group gi), one per token of the chunk;
 * the zeros follow at + n_tokens */
static inline const uint16_t *fkv__vmeta(const uint16_t *layer_meta, const fkv_kv_geom *g,
                                         fkv_dtype t, uint32_t n_tokens, uint32_t h, uint32_t gi)
{
    return layer_meta + fkv__kmeta_elems(g, n_tokens) +
           ((size_t)h * fkv__vgroups(g, t) + gi) * 2u * n_tokens;
}

/* fp8 chunks: the fp32 scale of head h's keys (is_v 0) or values (is_v 1)
 * in one layer's qmeta (read and written by memcpy: qmeta is uint16-aligned) */
static inline float fkv__fp8_scale(const uint16_t *layer_meta, const fkv_kv_geom *g, int is_v, uint32_t h)
{
    float s;
    memcpy(&s, layer_meta + ((size_t)is_v * g->n_kv_heads + h) * 2u, sizeof s);
    return s;
}
static inline void fkv__fp8_set_scale(uint16_t *layer_meta, const fkv_kv_geom *g, int is_v, uint32_t h, float s)
{
    memcpy(layer_meta + ((size_t)is_v * g->n_kv_heads + h) * 2u, &s, sizeof s);
}

/* The library's convention (fairkv.h, "Errors"): the calling thread's
 * detail, and a copy into err when given. */
static inline void fkv__err(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void fkv__err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv__vset_error(fmt, ap);
    va_end(ap);
    if (err && len) snprintf(err, len, "%s", fkv_last_error());
}

#endif
