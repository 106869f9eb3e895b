/* The forward pass's K/V callbacks over the fairkv cache: store writes each
 * new token's K/V at the slot its chunk table names; attend runs the fairkv
 * kernels over the table (prefill kernel per entry; decode entries of a
 * layer are collected and run as one batched decode call when the layer's
 * last entry is reached), or the scalar reference (tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

static fkv_status kv_store(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s, const float *k,
                           const float *v)
{
    fkv_engine *e = ctx;
    const eng_entry *en = s->seq;
    return fkv_kv_write_paged(e->kbase[layer], e->vbase[layer], e->geom.page_stride, e->geom.page_tokens,
                              e->geom.base, g->n_kv_heads, g->head_dim, en->slots, s->n_tokens, k, v);
}

/* Scalar reference: every position [0, end) through its slot. */
static fkv_status attend_ref(fkv_engine *e, const fkv_fwd_geom *g, uint32_t layer, const eng_entry *en,
                             const float *q, float *out)
{
    uint32_t end = en->start + en->n_tokens, pt = e->geom.page_tokens;
    fkv_slot *slot_of = malloc((size_t)end * sizeof *slot_of);
    if (!slot_of) return FKV_ENOMEM;
    fkv_status st = FKV_OK;
    uint32_t filled = 0;
    for (size_t i = 0; i < en->n_chunks && !st; i++) {
        const fkv_chunk_view *c = en->chunks[i];
        if (!c->resident || c->dtype != e->geom.base) {
            snprintf(e->err, sizeof e->err, "reference attention: chunk at %u is %s", c->start,
                     c->resident ? "quantized" : "not resident");
            st = c->resident ? FKV_EUNSUPPORTED : FKV_ESTATE;
            break;
        }
        for (uint32_t t = 0; t < c->n_tokens && c->start + t < end; t++)
            slot_of[c->start + t] = (fkv_slot){c->pages[t / pt], t % pt}, filled++;
    }
    if (!st && filled != end) st = FKV_ESTATE;
    if (!st)
        st = fkv_attn_paged_ref(g, e->kbase[layer], e->vbase[layer], e->geom.page_stride, pt, e->geom.base, slot_of,
                                en->start, en->n_tokens, q, out);
    free(slot_of);
    return st;
}

static fkv_status flush_decode(fkv_engine *e, const fkv_fwd_geom *g, uint32_t layer)
{
    if (!e->n_dec) return FKV_OK;
    fkv_attn_kv kv = {&e->geom, layer, e->kbase[layer], e->vbase[layer]};
    char err[200] = "";
    fkv_status st = fkv_attn_decode(e->apool, &kv, g->n_heads, e->dseq, e->n_dec, e->dq, e->dout, g->scale, err,
                                    sizeof err);
    if (st) {
        snprintf(e->err, sizeof e->err, "decode attention, layer %u: %s", layer, err);
        e->n_dec = 0;
        return st;
    }
    size_t qd = (size_t)g->n_heads * g->head_dim;
    for (size_t i = 0; i < e->n_dec; i++) memcpy(e->dout_ptr[i], e->dout + i * qd, qd * sizeof(float));
    e->st.decode_batches++;
    if (e->n_dec > e->st.max_decode_batch) e->st.max_decode_batch = e->n_dec;
    e->n_dec = 0;
    return FKV_OK;
}

static fkv_status kv_attend(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s, const float *q,
                            float *out)
{
    fkv_engine *e = ctx;
    const eng_entry *en = s->seq;
    fkv_status st = FKV_OK;
    if (e->cfg.ref_attention) {
        st = attend_ref(e, g, layer, en, q, out);
    } else if (en->decode) {
        size_t qd = (size_t)g->n_heads * g->head_dim, i = e->n_dec;
        if (fkv_grow(&e->dseq, &e->cap_dseq, i + 1, sizeof *e->dseq) ||
            fkv_grow(&e->dout_ptr, &e->cap_dptr, i + 1, sizeof *e->dout_ptr) ||
            fkv_grow(&e->dq, &e->cap_dq, (i + 1) * qd, sizeof *e->dq) ||
            fkv_grow(&e->dout, &e->cap_dout, (i + 1) * qd, sizeof *e->dout))
            return FKV_ENOMEM;
        e->dseq[i] = (fkv_attn_seq){en->chunks, en->n_chunks, en->keep,
                                    e->cfg.sparsity == FKV_SPARSE_H2O ? en->q->mass : NULL};
        memcpy(e->dq + i * qd, q, qd * sizeof(float));
        e->dout_ptr[i] = out;
        e->n_dec++;
    } else {
        fkv_attn_kv kv = {&e->geom, layer, e->kbase[layer], e->vbase[layer]};
        fkv_attn_seq sq = {en->chunks, en->n_chunks, en->keep, NULL};
        char err[200] = "";
        st = fkv_attn_prefill(e->apool, &kv, g->n_heads, &sq, en->start, en->n_tokens, q, out, g->scale, err,
                              sizeof err);
        if (st) snprintf(e->err, sizeof e->err, "prefill attention, layer %u: %s", layer, err);
    }
    if (!st && en->index + 1 == e->n_ent) st = flush_decode(e, g, layer);
    return st;
}

const fkv_kv_ops fkv__engine_kv_ops = {kv_store, kv_attend, NULL};
