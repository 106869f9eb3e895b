/* Reading K/V in place: a run of tokens contiguous in one page is read
 * where it lies by the micro-kernel of its stored format (fp32, fp16, int8
 * or int4 codes), each K/V element once for all the query heads of its kv
 * head.  Quantized runs fold their scales into the queries (keys: per
 * channel) or into the probabilities (values: per token), so codes are
 * never written out as fp32.  fp8 runs read by a few query rows (decode)
 * are read in place too: the qk8 / pv8 micro-kernels widen each E4M3 code in
 * registers to its value times the chunk head's scale (exactly what the fp8
 * decoder of src/quant gives) and use it as the fp32 kernels use an fp32
 * element.  Read by many rows (prefill: more than FKV__FP8_TILE_M), one
 * head's rows of the run are decoded once into a small fp32 tile read by
 * the fp32 kernels, keys first, then values into the same tile: the same
 * bits, fewer conversions. */
#include <math.h>
#include <string.h>

#include "attn/internal.h"
#include "quant/fp16.h"

#ifndef RUN_BYTES
#define RUN_BYTES 32768u
#endif

void fkv__tscratch_init(fkv__tscratch *s, float *mem, size_t M, size_t D)
{
    s->sz = mem;
    s->logits = s->sz + 2 * (D > FKV__TMAX ? D : FKV__TMAX);
    s->w = s->logits + M * FKV__TMAX;
    s->qp = s->w + M * FKV__TMAX;
    s->c = s->qp + M * D;
    s->dec = s->c + M;
    for (size_t t = 0; t < FKV__TMAX; t++) s->drows[t] = (const char *)(s->dec + t * D);
    s->M = M;
    s->rc = NULL;
}

uint32_t fkv__run_len(const fkv_kv_geom *g, const fkv_chunk_view *c, uint32_t t0, int group)
{
    /* at most ~RUN_BYTES of each of K and V per run: the run being read and
     * the next one being prefetched must both stay in L2 */
    const int quant = c->dtype == FKV_INT8 || c->dtype == FKV_INT4;
    uint64_t cap = RUN_BYTES / fkv__row_bytes(g, c->dtype);
    /* a quantized run codes every query row against its key group's channel
     * scales: prefill's many rows make that coding cost more than a longer
     * run's bytes (int8 prefill up to 16% faster, decode 3-8% slower if it
     * did the same: docs/EVALUATION.md section 2) */
    if (group && quant && cap < FKV_QK_GROUP) cap = FKV_QK_GROUP;
    uint32_t n = cap >= FKV__TMAX ? FKV__TMAX : cap < 8 ? 8u : (uint32_t)(cap & ~(uint64_t)7);
    if (quant && FKV_QK_GROUP - t0 % FKV_QK_GROUP < n)
        n = FKV_QK_GROUP - t0 % FKV_QK_GROUP;
    return c->n_tokens - t0 < n ? c->n_tokens - t0 : n;
}

/* byte offset of token t's row of chunk c in the layer arrays */
static inline uint64_t row_off(const fkv__kvctx *x, const fkv_chunk_view *c, uint32_t tpp, uint64_t rb, uint32_t t)
{
    return (uint64_t)c->pages[t / tpp] * x->stride + (t % tpp) * rb;
}

void fkv__prefetch_run(const fkv__kvctx *x, const fkv_chunk_view *c, uint32_t t0, uint32_t part,
                       uint32_t n_parts)
{
    const fkv_kv_geom *g = x->g;
    uint32_t T = fkv__run_len(g, c, t0, 0), tpp = fkv_quant_tokens_per_page(g, c->dtype);
    uint64_t rb = fkv__row_bytes(g, c->dtype), b0 = rb * part / n_parts, b1 = rb * (part + 1) / n_parts;
    for (uint32_t t = t0; t < t0 + T; t++) {
        uint64_t off = row_off(x, c, tpp, rb, t);
        for (uint64_t b = b0 & ~(uint64_t)63; b < b1; b += 64) {
            __builtin_prefetch(x->k + off + b, 0, 2);
            __builtin_prefetch(x->v + off + b, 0, 2);
        }
    }
}

static int fmt_of(fkv_dtype t)
{
    return t == FKV_F32 ? FKV__FMT_F32 : t == FKV_F16 ? FKV__FMT_F16 : t == FKV_INT8 ? FKV__FMT_U8 : FKV__FMT_U4;
}

/* fp8: head h's rows [0, T) of a run (rows[t] + hoff) decoded into s->dec */
static void fp8_tile(const fkv__tscratch *s, const char *const *rows, size_t hoff, uint32_t T, size_t D,
                     float scale)
{
    const fkv__fp8_ops *f8 = fkv__fp8();
    for (uint32_t t = 0; t < T; t++) f8->dec((const uint8_t *)rows[t] + hoff, scale, s->dec + t * D, D);
}

/* the largest of lg[0..n), n >= 1, as the loop mx = lg[t] > mx ? lg[t] : mx
 * from mx = lg[0] gives it (a NaN past lg[0] is passed over), in four
 * chains so that the compares do not wait on each other */
static float row_max(const float *lg, uint32_t n)
{
    float m[4] = {lg[0], lg[0], lg[0], lg[0]};
    uint32_t t = 1;
    for (; t + 4 <= n; t += 4)
        for (int k = 0; k < 4; k++) m[k] = lg[t + k] > m[k] ? lg[t + k] : m[k];
    for (; t < n; t++) m[0] = lg[t] > m[0] ? lg[t] : m[0];
    for (int k = 1; k < 4; k++) m[0] = m[k] > m[0] ? m[k] : m[0];
    return m[0];
}

void fkv__attend_run(const fkv__kvctx *x, const fkv_chunk_view *c, uint32_t h, uint32_t t0,
                     uint32_t T, const float *q, size_t M, const uint32_t *lim, float scale,
                     float *m, float *l, float *acc, float *csum, fkv__tscratch *s)
{
    const fkv_kv_geom *g = x->g;
    const size_t D = g->head_dim;
    const uint32_t tpp = fkv_quant_tokens_per_page(g, c->dtype);
    const uint64_t rb = fkv__row_bytes(g, c->dtype);
    const int fmt = fmt_of(c->dtype), quant = c->dtype == FKV_INT8 || c->dtype == FKV_INT4;
    /* byte offset of head h inside a row */
    const size_t hoff = c->dtype == FKV_INT4 ? h * D / 2 : h * D * (rb / ((size_t)g->n_kv_heads * D));
    const uint16_t *lm = quant ? (const uint16_t *)c->qmeta + x->layer * fkv__layer_meta_elems(g, c->dtype, c->n_tokens) : NULL;
    if (s->rc != c || s->rt0 != t0 || s->rT != T) { /* rows once per run, for all heads */
        s->rc = c, s->rt0 = t0, s->rT = T;
        for (uint32_t t = 0; t < T; t++) {
            uint64_t o = row_off(x, c, tpp, rb, t0 + t);
            s->krows[t] = x->k + o;
            s->vrows[t] = x->v + o;
        }
    }

    const uint16_t *f8m = c->dtype == FKV_FP8 ? (const uint16_t *)c->qmeta +
                                                    x->layer * fkv__layer_meta_elems(g, FKV_FP8, c->n_tokens)
                                              : NULL;

    const int f8tile = f8m && M > FKV__FP8_TILE_M;
    if (f8tile) fp8_tile(s, s->krows, hoff, T, D, fkv__fp8_scale(f8m, g, 0, h));

    /* scores */
    if (f8tile) {
        x->ops->qk[FKV__FMT_F32](M, q, T, s->drows, 0, D, scale, s->logits, FKV__TMAX);
    } else if (f8m) {
        x->ops->qk8(M, q, T, s->krows, hoff, D, fkv__fp8_scale(f8m, g, 0, h), scale, s->logits, FKV__TMAX);
    } else if (!quant) {
        x->ops->qk[fmt](M, q, T, s->krows, hoff, D, scale, s->logits, FKV__TMAX);
    } else {
        /* k = code*s + z per channel: q.k = (q*s).code + q.z */
        const uint16_t *km = fkv__kmeta(lm, g, c->n_tokens, h, t0 / FKV_QK_GROUP);
        if (x->ops->qkq && x->ops->qkq(fmt, M, q, T, s->krows, hoff, D, km, scale, s->logits, FKV__TMAX))
            goto softmax;
        x->ops->h2f(km, s->sz, 2 * D);
        x->ops->scale_q(M, q, D, s->sz, s->sz + D, D, scale, s->qp, s->c);
        x->ops->qk[fmt](M, s->qp, T, s->krows, hoff, D, scale, s->logits, FKV__TMAX);
        x->ops->add_rows(M, s->c, T, s->logits, FKV__TMAX);
    }

softmax:;
    /* online softmax */
    int any = 0;
    for (size_t r = 0; r < M; r++) {
        float *lg = s->logits + r * FKV__TMAX;
        uint32_t n = lim ? lim[r] : T;
        if (n == 0) {
            memset(lg, 0, T * sizeof *lg);
            continue;
        }
        any = 1;
        float mx = row_max(lg, n);
        if (mx > m[r]) { /* new running max: rescale what was summed so far */
            float alpha = expf(m[r] - mx);
            l[r] *= alpha;
            if (csum) csum[r] *= alpha;
            for (size_t j = 0; j < D; j++) acc[r * D + j] *= alpha; /* rare: O(log n) times per row */
            m[r] = mx;
        }
        float sum = x->ops->expsum(lg, n, m[r]);
        if (n < T) memset(lg + n, 0, (T - n) * sizeof *lg);
        l[r] += sum;
        if (csum) csum[r] += sum;
    }
    if (!any) return;

    /* values */
    if (f8tile) {
        fp8_tile(s, s->vrows, hoff, T, D, fkv__fp8_scale(f8m, g, 1, h));
        x->ops->pv[FKV__FMT_F32](M, s->logits, FKV__TMAX, T, s->drows, 0, D, acc, D);
        return;
    }
    if (f8m) {
        x->ops->pv8(M, s->logits, FKV__TMAX, T, s->vrows, hoff, D, fkv__fp8_scale(f8m, g, 1, h), acc, D);
        return;
    }
    if (!quant) {
        x->ops->pv[fmt](M, s->logits, FKV__TMAX, T, s->vrows, hoff, D, acc, D);
        return;
    }
    /* v = code*s_t + z_t per (token, channel group):
     * p.v = (p*s_t).code + sum_t p*z_t over the group's channels */
    const uint32_t G = fkv__vgroup(c->dtype), nvg = fkv__vgroups(g, c->dtype);
    if (x->ops->pvq && x->ops->pvq(fmt, M, s->logits, FKV__TMAX, T, s->vrows, hoff, D, G,
                                   fkv__vmeta(lm, g, c->dtype, c->n_tokens, h, 0) + t0, 2u * c->n_tokens,
                                   c->n_tokens, acc, D))
        return;
    for (uint32_t gi = 0; gi < nvg; gi++) {
        size_t a = (size_t)gi * G, n = D - a < G ? D - a : G;
        /* this group's scale and zero of each token of the run */
        const uint16_t *vm = fkv__vmeta(lm, g, c->dtype, c->n_tokens, h, gi) + t0;
        x->ops->h2f(vm, s->sz, T);
        x->ops->h2f(vm + c->n_tokens, s->sz + FKV__TMAX, T);
        x->ops->scale_q(M, s->logits, FKV__TMAX, s->sz, s->sz + FKV__TMAX, T, 1.0f, s->w, s->c);
        x->ops->pv[fmt](M, s->w, FKV__TMAX, T, s->vrows, hoff + (c->dtype == FKV_INT4 ? a / 2 : a), n, acc + a, D);
        x->ops->add_rows(M, s->c, n, acc + a, D);
    }
}

fkv_status fkv__check_kv(const char *fn, const fkv_attn_kv *kv, uint32_t n_heads, char *err, size_t errlen)
{
    if (!kv || !kv->geom || !kv->k || !kv->v) {
        fkv__err(err, errlen, "%s: kv, kv->geom, kv->k and kv->v must be non-NULL", fn);
        return FKV_EINVAL;
    }
    fkv_status st = fkv_kv_geom_check(kv->geom, err, errlen);
    if (st) return st;
    if (kv->layer >= kv->geom->n_layers) {
        fkv__err(err, errlen, "%s: kv->layer %u >= n_layers %u", fn, kv->layer, kv->geom->n_layers);
        return FKV_EINVAL;
    }
    if (!n_heads || n_heads % kv->geom->n_kv_heads) {
        fkv__err(err, errlen, "%s: n_heads %u is not a positive multiple of n_kv_heads %u", fn, n_heads,
                 kv->geom->n_kv_heads);
        return FKV_EINVAL;
    }
    return FKV_OK;
}

fkv_status fkv__check_seq(const char *fn, const fkv_attn_kv *kv, const fkv_attn_seq *s, size_t idx,
                          char *err, size_t errlen)
{
    const fkv_kv_geom *g = kv->geom;
    if (s->n_chunks && !s->chunks) {
        fkv__err(err, errlen, "%s: seqs[%zu].chunks is NULL", fn, idx);
        return FKV_EINVAL;
    }
    uint64_t end = 0;
    for (size_t i = 0; i < s->n_chunks; i++) {
        const fkv_chunk_view *c = s->chunks[i];
        if (!c) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu] is NULL", fn, idx, i);
            return FKV_EINVAL;
        }
        if (c->start < end) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu].start %u overlaps the previous chunk (ends at %llu)",
                     fn, idx, i, c->start, (unsigned long long)end);
            return FKV_EINVAL;
        }
        end = (uint64_t)c->start + c->n_tokens;
        if (s->keep && !s->keep[i]) continue;
        if (!c->resident || !c->pages) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu] is evicted but kept (recompute it or drop it)",
                     fn, idx, i);
            return FKV_ESTATE;
        }
        if (c->dtype != g->base && !fkv__is_quant(c->dtype)) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu].dtype %d is neither the base dtype nor int8/int4/fp8",
                     fn, idx, i, (int)c->dtype);
            return FKV_EINVAL;
        }
        uint32_t need = fkv_quant_pages_needed(g, c->dtype, c->n_tokens);
        if ((!need && c->n_tokens) || c->n_pages < need) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu]: %u tokens of dtype %d need %u pages, n_pages is %u",
                     fn, idx, i, c->n_tokens, (int)c->dtype, need, c->n_pages);
            return FKV_EINVAL;
        }
        if (c->dtype != g->base && !c->qmeta) {
            fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu] is quantized but qmeta is NULL", fn, idx, i);
            return FKV_EINVAL;
        }
        for (uint32_t p = 0; p < need; p++)
            if (c->pages[p] >= g->n_pages) {
                fkv__err(err, errlen, "%s: seqs[%zu].chunks[%zu].pages[%u] = %u >= n_pages %u", fn, idx, i, p,
                         c->pages[p], g->n_pages);
                return FKV_EINVAL;
            }
    }
    return FKV_OK;
}
