/* The chunk codecs: sizes of the quantized layout (fairkv_quant.h) and the
 * pure quantize / dequantize hook the cache calls on cold chunks.
 *
 * Keys are quantized per (head, channel) over groups of FKV_QK_GROUP tokens
 * and values per (token, head) over channel groups, KIVI's split: key
 * outliers sit in a few channels for all tokens, so a per-channel range
 * isolates them; values have no such channel structure and a per-token range
 * follows each token's own magnitude.
 *
 * In place works because quantized rows are shorter than base rows: in the
 * byte stream formed by the chunk's pages (page i = bytes [i*S, (i+1)*S)),
 * token t's base row starts at t*Rb and its quantized row at t*Rq < t*Rb.
 * Quantizing front to back (a whole key group is read before any of it is
 * written) never overwrites a row not yet read; dequantizing goes back to
 * front for the same reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/fp8.h"
#include "quant/layout.h"
#include "quant/qparams.h"
#include "quant/simd.h"

/* The element types' names and widths (fairkv.h): here, below the cache
 * that stores them, since the codecs name them too. */
const char *fkv_dtype_name(fkv_dtype t)
{
    static const char *const n[] = {"f32", "f16", "int8", "int4", "fp8"};
    return (unsigned)t < FKV_N_DTYPES ? n[t] : "?";
}

unsigned fkv_dtype_bits(fkv_dtype t)
{
    static const unsigned b[] = {32, 16, 8, 4, 8};
    return (unsigned)t < FKV_N_DTYPES ? b[t] : 0;
}

fkv_status fkv_kv_geom_check(const fkv_kv_geom *g, char *err, size_t errlen)
{
    if (!g) {
        fkv__err(err, errlen, "fkv_kv_geom: NULL");
        return FKV_EINVAL;
    }
    if (!g->n_layers || !g->n_kv_heads || !g->head_dim || !g->page_tokens || !g->n_pages) {
        fkv__err(err, errlen, "fkv_kv_geom: n_layers, n_kv_heads, head_dim, page_tokens, n_pages must be >= 1 "
                 "(got %u, %u, %u, %u, %u)", g->n_layers, g->n_kv_heads, g->head_dim, g->page_tokens, g->n_pages);
        return FKV_EINVAL;
    }
    if (g->base != FKV_F32 && g->base != FKV_F16) {
        fkv__err(err, errlen, "fkv_kv_geom.base: %d is not FKV_F32 or FKV_F16", (int)g->base);
        return FKV_EINVAL;
    }
    if (g->head_dim > 4096 || g->n_kv_heads > 4096) {
        fkv__err(err, errlen, "fkv_kv_geom: head_dim %u or n_kv_heads %u above 4096", g->head_dim, g->n_kv_heads);
        return FKV_EINVAL;
    }
    if (g->page_stride && g->page_stride < fkv_kv_page_bytes(g)) {
        fkv__err(err, errlen, "fkv_kv_geom.page_stride: %llu below the page size %llu",
                 (unsigned long long)g->page_stride, (unsigned long long)fkv_kv_page_bytes(g));
        return FKV_EINVAL;
    }
    return FKV_OK;
}

uint64_t fkv_kv_page_bytes(const fkv_kv_geom *g)
{
    return (uint64_t)g->page_tokens * g->n_kv_heads * g->head_dim * fkv__esize(g->base);
}

uint32_t fkv_quant_tokens_per_page(const fkv_kv_geom *g, fkv_dtype dtype)
{
    if (fkv_kv_geom_check(g, NULL, 0)) return 0;
    if (dtype == g->base) return g->page_tokens;
    if (!fkv__is_quant(dtype)) return 0;
    if (dtype == FKV_INT4 && g->head_dim % 2) return 0;
    return (uint32_t)(fkv_kv_page_bytes(g) / fkv__row_bytes(g, dtype));
}

uint32_t fkv_quant_pages_needed(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens)
{
    uint32_t tpp = fkv_quant_tokens_per_page(g, dtype);
    return tpp ? (uint32_t)(((uint64_t)n_tokens + tpp - 1) / tpp) : 0;
}

size_t fkv_quant_meta_bytes(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens)
{
    if (!fkv_quant_tokens_per_page(g, dtype) || dtype == g->base) return 0;
    return g->n_layers * fkv__layer_meta_elems(g, dtype, n_tokens) * sizeof(uint16_t);
}

uint64_t fkv_quant_chunk_bytes(const fkv_kv_geom *g, fkv_dtype dtype, uint32_t n_tokens)
{
    uint32_t pages = fkv_quant_pages_needed(g, dtype, n_tokens);
    return 2ull * g->n_layers * pages * fkv_kv_page_bytes(g) + fkv_quant_meta_bytes(g, dtype, n_tokens);
}

struct pagemap {
    char *base;
    uint64_t stride, row;
    const uint32_t *pages;
    uint32_t tpp;
};

static inline char *row_at(const struct pagemap *m, uint32_t t)
{
    return m->base + (uint64_t)m->pages[t / m->tpp] * m->stride + (uint64_t)(t % m->tpp) * m->row;
}

static void read_row(const fkv__simd_ops *ops, fkv_dtype base, const char *src, float *dst, size_t n)
{
    if (base == FKV_F32) memcpy(dst, src, n * sizeof(float));
    else ops->h2f((const uint16_t *)src, dst, n);
}

static void write_row(const fkv__simd_ops *ops, fkv_dtype base, const float *src, char *dst, size_t n)
{
    if (base == FKV_F32) memcpy(dst, src, n * sizeof(float));
    else ops->f2h(src, (uint16_t *)dst, n);
}

static void pack4(const uint8_t *c, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) dst[i / 2] = (uint8_t)(c[i] | (c[i + 1] << 4));
}

/* Common argument checks of both directions.  `qpages`/`nq` are the
 * quantized side, `bpages`/`nb` the base side. */
static fkv_status check_args(const char *fn, const fkv_kv_geom *g, const fkv_kv_layer *layers,
                             uint32_t n_tokens, fkv_dtype dtype, const uint32_t *bpages, uint32_t nb,
                             const uint32_t *qpages, uint32_t nq, const void *qmeta,
                             size_t qmeta_bytes, char *err, size_t errlen)
{
    fkv_status st = fkv_kv_geom_check(g, err, errlen);
    if (st) return st;
    if (!fkv__is_quant(dtype)) {
        fkv__err(err, errlen, "%s: dtype %d is not FKV_INT8, FKV_INT4 or FKV_FP8", fn, (int)dtype);
        return FKV_EINVAL;
    }
    if (dtype == FKV_INT4 && g->head_dim % 2) {
        fkv__err(err, errlen, "%s: int4 needs an even head_dim (got %u)", fn, g->head_dim);
        return FKV_EINVAL;
    }
    if (!layers || !bpages || !qpages || !qmeta || !n_tokens) {
        fkv__err(err, errlen, "%s: layers, page lists and qmeta must be non-NULL, n_tokens >= 1", fn);
        return FKV_EINVAL;
    }
    for (uint32_t l = 0; l < g->n_layers; l++)
        if (!layers[l].k || !layers[l].v) {
            fkv__err(err, errlen, "%s: layers[%u].k or .v is NULL", fn, l);
            return FKV_EINVAL;
        }
    uint32_t need_b = fkv_quant_pages_needed(g, g->base, n_tokens);
    uint32_t need_q = fkv_quant_pages_needed(g, dtype, n_tokens);
    if (nb < need_b || nq < need_q) {
        fkv__err(err, errlen, "%s: %u tokens need %u base pages and %u %s pages (got %u and %u)", fn,
                 n_tokens, need_b, need_q, fkv_dtype_name(dtype), nb, nq);
        return FKV_EINVAL;
    }
    size_t mb = fkv_quant_meta_bytes(g, dtype, n_tokens);
    if (qmeta_bytes < mb) {
        fkv__err(err, errlen, "%s: qmeta_bytes %zu below the %zu needed", fn, qmeta_bytes, mb);
        return FKV_EINVAL;
    }
    for (uint32_t i = 0; i < need_b; i++) {
        if (bpages[i] >= g->n_pages) {
            fkv__err(err, errlen, "%s: base page id %u >= n_pages %u", fn, bpages[i], g->n_pages);
            return FKV_EINVAL;
        }
        for (uint32_t j = 0; j < i; j++)
            if (bpages[j] == bpages[i]) {
                fkv__err(err, errlen, "%s: base page %u listed twice", fn, bpages[i]);
                return FKV_EINVAL;
            }
    }
    for (uint32_t i = 0; i < need_q; i++) {
        if (qpages[i] >= g->n_pages) {
            fkv__err(err, errlen, "%s: quantized page id %u >= n_pages %u", fn, qpages[i], g->n_pages);
            return FKV_EINVAL;
        }
        for (uint32_t j = 0; j < i; j++)
            if (qpages[j] == qpages[i]) {
                fkv__err(err, errlen, "%s: quantized page %u listed twice", fn, qpages[i]);
                return FKV_EINVAL;
            }
        /* in place: the quantized page i may only be base page i */
        for (uint32_t j = 0; j < need_b; j++)
            if (bpages[j] == qpages[i] && j != i) {
                fkv__err(err, errlen, "%s: quantized page %u is base page #%u, not #%u: only an in-place "
                         "prefix may overlap", fn, qpages[i], j, i);
                return FKV_EINVAL;
            }
    }
    return FKV_OK;
}

/* fp8 E4M3 chunks (layout in fairkv_quant.h): per layer and per K / V, a
 * first read-only pass finds each head's amax over the chunk (and rejects
 * non-finite values before anything is written), a second encodes front to
 * back with scale = amax / 448.  A row is read whole before its codes are
 * written, so in place is safe (file comment). */
static fkv_status fp8_quant(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                            const uint32_t *src_pages, const uint32_t *dst_pages, void *qmeta, char *err,
                            size_t errlen)
{
    const fkv__simd_ops *ops = fkv__simd();
    const fkv__fp8_ops *f8 = fkv__fp8();
    const size_t H = g->n_kv_heads, D = g->head_dim, E = H * D;
    float *buf = malloc((E + 2 * H) * sizeof(float));
    if (!buf) {
        fkv__err(err, errlen, "fkv_quant_chunk: no memory for scratch");
        return FKV_ENOMEM;
    }
    float *row = buf, *amax = row + E, *inv = amax + H;
    uint8_t *codes = NULL;
    for (uint32_t l = 0; l < g->n_layers; l++) {
        uint16_t *lm = (uint16_t *)qmeta + l * fkv__layer_meta_elems(g, FKV_FP8, n_tokens);
        for (int is_v = 0; is_v < 2; is_v++) {
            char *arr = is_v ? layers[l].v : layers[l].k;
            struct pagemap src = {arr, fkv__stride(g), fkv__row_bytes(g, g->base), src_pages, g->page_tokens};
            struct pagemap dst = {arr, fkv__stride(g), fkv__row_bytes(g, FKV_FP8), dst_pages,
                                  fkv_quant_tokens_per_page(g, FKV_FP8)};
            for (size_t h = 0; h < H; h++) amax[h] = 0.0f;
            for (uint32_t t = 0; t < n_tokens; t++) {
                read_row(ops, g->base, row_at(&src, t), row, E);
                for (size_t h = 0; h < H; h++)
                    for (size_t d = 0; d < D; d++) {
                        float a = fabsf(row[h * D + d]);
                        if (!(a <= 65504.0f)) {
                            fkv__err(err, errlen, "fkv_quant_chunk: layer %u %s token %u head %zu: "
                                     "non-finite or beyond fp16 range", l, is_v ? "value" : "key", t, h);
                            free(buf);
                            return FKV_EINVAL;
                        }
                        amax[h] = a > amax[h] ? a : amax[h];
                    }
            }
            for (size_t h = 0; h < H; h++) {
                float sc = amax[h] / 448.0f;
                fkv__fp8_set_scale(lm, g, is_v, (uint32_t)h, sc);
                inv[h] = sc > 0.0f ? 1.0f / sc : 0.0f;
            }
            for (uint32_t t = 0; t < n_tokens; t++) {
                read_row(ops, g->base, row_at(&src, t), row, E);
                codes = (uint8_t *)row_at(&dst, t); /* after the read: in place */
                for (size_t h = 0; h < H; h++) f8->enc(row + h * D, inv[h], codes + h * D, D);
            }
        }
    }
    free(buf);
    return FKV_OK;
}

static fkv_status fp8_dequant(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                              const uint32_t *src_pages, const void *qmeta, const uint32_t *dst_pages,
                              char *err, size_t errlen)
{
    const fkv__simd_ops *ops = fkv__simd();
    const fkv__fp8_ops *f8 = fkv__fp8();
    const size_t H = g->n_kv_heads, D = g->head_dim, E = H * D;
    float *out = malloc(E * sizeof(float) + E);
    if (!out) {
        fkv__err(err, errlen, "fkv_dequant_chunk: no memory for scratch");
        return FKV_ENOMEM;
    }
    uint8_t *codes = (uint8_t *)(out + E);
    for (uint32_t l = 0; l < g->n_layers; l++) {
        const uint16_t *lm = (const uint16_t *)qmeta + l * fkv__layer_meta_elems(g, FKV_FP8, n_tokens);
        for (int is_v = 0; is_v < 2; is_v++) {
            char *arr = is_v ? layers[l].v : layers[l].k;
            struct pagemap q = {arr, fkv__stride(g), fkv__row_bytes(g, FKV_FP8), src_pages,
                                fkv_quant_tokens_per_page(g, FKV_FP8)};
            struct pagemap b = {arr, fkv__stride(g), fkv__row_bytes(g, g->base), dst_pages, g->page_tokens};
            for (uint32_t t = n_tokens; t-- > 0;) { /* back to front: in place */
                memcpy(codes, row_at(&q, t), E);
                for (size_t h = 0; h < H; h++)
                    f8->dec(codes + h * D, fkv__fp8_scale(lm, g, is_v, (uint32_t)h), out + h * D, D);
                if (g->base == FKV_F16) /* 448 * scale may round a little above the fp16 maximum */
                    for (size_t e = 0; e < E; e++)
                        out[e] = out[e] > 65504.0f ? 65504.0f : out[e] < -65504.0f ? -65504.0f : out[e];
                write_row(ops, g->base, out, row_at(&b, t), E);
            }
        }
    }
    free(out);
    return FKV_OK;
}

fkv_status fkv_quant_chunk(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                           const uint32_t *src_pages, uint32_t n_src, fkv_dtype dtype,
                           const uint32_t *dst_pages, uint32_t n_dst, void *qmeta,
                           size_t qmeta_bytes, char *err, size_t errlen)
{
    fkv_status st = check_args("fkv_quant_chunk", g, layers, n_tokens, dtype, src_pages, n_src,
                               dst_pages, n_dst, qmeta, qmeta_bytes, err, errlen);
    if (st) return st;
    if (dtype == FKV_FP8) return fp8_quant(g, layers, n_tokens, src_pages, dst_pages, qmeta, err, errlen);
    const fkv__simd_ops *ops = fkv__simd();
    const size_t H = g->n_kv_heads, D = g->head_dim, E = H * D;
    const float qmax = dtype == FKV_INT8 ? 255.0f : 15.0f;
    const uint32_t G = fkv__vgroup(dtype), nvg = fkv__vgroups(g, dtype);
    /* scratch: one key group of rows [FKV_QK_GROUP][E] fp32, codes [E],
     * per-channel z / inv / min / max [D] */
    size_t nf = (size_t)FKV_QK_GROUP * E + 4 * D;
    float *buf = malloc(nf * sizeof(float) + E);
    if (!buf) {
        fkv__err(err, errlen, "fkv_quant_chunk: no memory for %zu scratch bytes", nf * sizeof(float) + E);
        return FKV_ENOMEM;
    }
    float *rows = buf, *zv = rows + (size_t)FKV_QK_GROUP * E, *iv = zv + D, *mn = iv + D, *mx = mn + D;
    uint8_t *codes = (uint8_t *)(mx + D);
    const int q4 = dtype == FKV_INT4;
    for (uint32_t l = 0; l < g->n_layers && !st; l++) {
        uint16_t *lm = (uint16_t *)qmeta + l * fkv__layer_meta_elems(g, dtype, n_tokens);
        for (int is_v = 0; is_v < 2 && !st; is_v++) {
            char *arr = is_v ? layers[l].v : layers[l].k;
            struct pagemap src = {arr, fkv__stride(g), fkv__row_bytes(g, g->base), src_pages, g->page_tokens};
            struct pagemap dst = {arr, fkv__stride(g), fkv__row_bytes(g, dtype), dst_pages,
                                  fkv_quant_tokens_per_page(g, dtype)};
            for (uint32_t t0 = 0; t0 < n_tokens && !st; t0 += FKV_QK_GROUP) {
                uint32_t T = n_tokens - t0 < FKV_QK_GROUP ? n_tokens - t0 : FKV_QK_GROUP;
                for (uint32_t t = 0; t < T; t++) read_row(ops, g->base, row_at(&src, t0 + t), rows + t * E, E);
                if (!is_v) { /* keys: per (head, channel) over the group's tokens */
                    for (size_t h = 0; h < H && !st; h++) {
                        for (size_t d = 0; d < D; d++) mn[d] = mx[d] = rows[h * D + d];
                        for (uint32_t t = 1; t < T; t++)
                            for (size_t d = 0; d < D; d++) {
                                float x = rows[t * E + h * D + d];
                                mn[d] = x < mn[d] ? x : mn[d];
                                mx[d] = x > mx[d] ? x : mx[d];
                                if (x != x) mn[d] = NAN;
                            }
                        uint16_t *km = (uint16_t *)fkv__kmeta(lm, g, n_tokens, (uint32_t)h, t0 / FKV_QK_GROUP);
                        for (size_t d = 0; d < D; d++) {
                            if (!fkv__group_params(mn[d], mx[d], qmax, &km[d], &km[D + d])) {
                                fkv__err(err, errlen, "fkv_quant_chunk: layer %u key head %zu channel %zu: "
                                         "non-finite or beyond fp16 range near token %u", l, h, d, t0);
                                st = FKV_EINVAL;
                                break;
                            }
                            float s = fkv__h2f(km[d]);
                            zv[d] = fkv__h2f(km[D + d]);
                            iv[d] = s > 0.0f ? 1.0f / s : 0.0f;
                        }
                        /* the whole group was read above, so writing its
                         * rows cannot clobber unread input (in place) */
                        for (uint32_t t = 0; t < T && !st; t++) {
                            ops->quant_v(rows + t * E + h * D, zv, iv, qmax, codes, D);
                            char *dr = row_at(&dst, t0 + t);
                            if (q4) pack4(codes, (uint8_t *)dr + h * D / 2, D);
                            else memcpy(dr + h * D, codes, D);
                        }
                    }
                } else { /* values: per (token, head, channel group) */
                    for (uint32_t t = 0; t < T && !st; t++) {
                        const float *x = rows + t * E;
                        for (size_t h = 0; h < H && !st; h++) {
                            for (uint32_t j = 0; j < nvg; j++) {
                                size_t a = h * D + (size_t)j * G, n = D - (size_t)j * G < G ? D - (size_t)j * G : G;
                                float lo = x[a], hi = x[a];
                                for (size_t i = 1; i < n; i++) {
                                    lo = x[a + i] < lo ? x[a + i] : lo;
                                    hi = x[a + i] > hi ? x[a + i] : hi;
                                    if (x[a + i] != x[a + i]) lo = NAN;
                                }
                                uint16_t *vm = (uint16_t *)fkv__vmeta(lm, g, dtype, n_tokens, (uint32_t)h, j) + t0 + t;
                                if (!fkv__group_params(lo, hi, qmax, &vm[0], &vm[n_tokens])) {
                                    fkv__err(err, errlen, "fkv_quant_chunk: layer %u value token %u head %zu: "
                                             "non-finite or beyond fp16 range", l, t0 + t, h);
                                    st = FKV_EINVAL;
                                    break;
                                }
                                float s = fkv__h2f(vm[0]);
                                ops->quant_s(x + a, fkv__h2f(vm[n_tokens]), s > 0.0f ? 1.0f / s : 0.0f, qmax,
                                             codes + a, n);
                            }
                        }
                        if (st) break;
                        char *dr = row_at(&dst, t0 + t);
                        if (q4) pack4(codes, (uint8_t *)dr, E);
                        else memcpy(dr, codes, E);
                    }
                }
            }
        }
    }
    free(buf);
    return st;
}

fkv_status fkv_dequant_chunk(const fkv_kv_geom *g, const fkv_kv_layer *layers, uint32_t n_tokens,
                             fkv_dtype dtype, const uint32_t *src_pages, uint32_t n_src,
                             const void *qmeta, size_t qmeta_bytes, const uint32_t *dst_pages,
                             uint32_t n_dst, char *err, size_t errlen)
{
    fkv_status st = check_args("fkv_dequant_chunk", g, layers, n_tokens, dtype, dst_pages, n_dst,
                               src_pages, n_src, qmeta, qmeta_bytes, err, errlen);
    if (st) return st;
    if (dtype == FKV_FP8) return fp8_dequant(g, layers, n_tokens, src_pages, qmeta, dst_pages, err, errlen);
    const fkv__simd_ops *ops = fkv__simd();
    const size_t H = g->n_kv_heads, D = g->head_dim, E = H * D;
    const uint32_t G = fkv__vgroup(dtype), nvg = fkv__vgroups(g, dtype);
    const int q4 = dtype == FKV_INT4;
    /* scratch: decoded row [E], key scales and zeros of the current group
     * [E] each, one quantized row [E] bytes */
    float *buf = malloc(3 * E * sizeof(float) + E);
    if (!buf) {
        fkv__err(err, errlen, "fkv_dequant_chunk: no memory for scratch");
        return FKV_ENOMEM;
    }
    float *out = buf, *sv = out + E, *zv = sv + E;
    uint8_t *codes = (uint8_t *)(zv + E);
    for (uint32_t l = 0; l < g->n_layers; l++) {
        const uint16_t *lm = (const uint16_t *)qmeta + l * fkv__layer_meta_elems(g, dtype, n_tokens);
        for (int is_v = 0; is_v < 2; is_v++) {
            char *arr = is_v ? layers[l].v : layers[l].k;
            struct pagemap q = {arr, fkv__stride(g), fkv__row_bytes(g, dtype), src_pages,
                                fkv_quant_tokens_per_page(g, dtype)};
            struct pagemap b = {arr, fkv__stride(g), fkv__row_bytes(g, g->base), dst_pages, g->page_tokens};
            uint32_t cur_group = UINT32_MAX;
            /* back to front: see the file comment (in place) */
            for (uint32_t t = n_tokens; t-- > 0;) {
                memcpy(codes, row_at(&q, t), q.row);
                if (!is_v) {
                    if (t / FKV_QK_GROUP != cur_group) {
                        cur_group = t / FKV_QK_GROUP;
                        for (size_t h = 0; h < H; h++) {
                            const uint16_t *km = fkv__kmeta(lm, g, n_tokens, (uint32_t)h, cur_group);
                            ops->h2f(km, sv + h * D, D);
                            ops->h2f(km + D, zv + h * D, D);
                        }
                    }
                    for (size_t h = 0; h < H; h++) {
                        if (q4) ops->deq4_v(codes + h * D / 2, sv + h * D, zv + h * D, out + h * D, D);
                        else ops->deq8_v(codes + h * D, sv + h * D, zv + h * D, out + h * D, D);
                    }
                } else {
                    for (size_t h = 0; h < H; h++) {
                        for (uint32_t j = 0; j < nvg; j++) {
                            size_t a = h * D + (size_t)j * G, n = D - (size_t)j * G < G ? D - (size_t)j * G : G;
                            const uint16_t *vm = fkv__vmeta(lm, g, dtype, n_tokens, (uint32_t)h, j) + t;
                            float s = fkv__h2f(vm[0]), z = fkv__h2f(vm[n_tokens]);
                            if (q4) ops->deq4_s(codes + a / 2, s, z, out + a, n);
                            else ops->deq8_s(codes + a, s, z, out + a, n);
                        }
                    }
                }
                if (g->base == FKV_F16) /* code * scale + zero may pass 65504 when the group's max is near it */
                    for (size_t e = 0; e < E; e++) out[e] = out[e] > 65504.0f ? 65504.0f : out[e] < -65504.0f ? -65504.0f : out[e];
                write_row(ops, g->base, out, row_at(&b, t), E);
            }
        }
    }
    free(buf);
    return FKV_OK;
}

uint16_t fkv_f32_to_f16(float x) { return fkv__f2h(x); }
float fkv_f16_to_f32(uint16_t h) { return fkv__h2f(h); }
