/* Cold-chunk quantization (the seed keeps distant chunks in 8 bits):
 * chunks far from their sequence's end are read by every decode step but
 * matter less to it, so they can be stored in int8 (or int4) and free
 * pages.
 *
 * A chunk is *cold* once its sequence holds quant_hot_tokens tokens after it
 * (default: the last 128 tokens stay full precision), or once its request
 * has ended.  It can be quantized when it is resident, in the base
 * precision, full (filled to its size) and owns its pages alone (no page is
 * shared with another chunk: quantizing rewrites pages in place).  A chunk
 * shared whole by several sequences is one object, so it is quantized once
 * for all its holders.  It must not be pinned by another sequence than the
 * one whose call is running: a pinned chunk may be being read by a kernel
 * (with phantom storage, which has no data, pins do not matter).  Nor may
 * it have been restored since its holders last read it (kv_pending): its
 * K/V are computed in the step that restored it, after the cache calls.
 *
 *  - always: a cold chunk is quantized as soon as it is found cold (after
 *    each append of its sequence, and when its request ends);
 *  - under-pressure: cold chunks wait in a FIFO; an allocation that would
 *    take the pool above quant_pressure occupancy, or that needs more pages
 *    than are free, first quantizes the oldest candidates, and only then
 *    evicts.
 * Quantized pages hold more tokens (with an fp16 base, int8 twice and int4
 * four times as many) and the scales live in a per-chunk buffer (qmeta);
 * src/quant does the conversion in place, so no free page is needed. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv_quant.h"

/* held: the running call's sequence holds the chunk in its table */
static int quantizable(const fkv_cache *c, const fkv__chunk *ch, int held)
{
    if (!ch->v.resident || ch->v.dtype != c->cfg.dtype || ch->v.n_tokens == 0 ||
        ch->v.n_tokens != ch->v.cap_tokens)
        return 0;
    /* restored in the step being formed: its pages hold no K/V yet (the
     * restoring request's own append or restore would quantize garbage);
     * phantom storage has no data */
    if (c->k && ch->kv_pending) return 0;
    /* a chunk pinned by another sequence may be under a kernel right now;
     * phantom storage has no data to race on */
    uint32_t own_pins = held && c->cur_seq ? c->cur_seq->pins : 0;
    if (c->k && ch->m.pins > own_pins) return 0;
    for (uint32_t j = 0; j < ch->v.n_pages; j++)
        if (c->page_ref[ch->pages[j]] != 1) return 0;
    return 1;
}

void fkv__chunk_free_qmeta(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->quant.qmeta_bytes && !ch->v.qmeta) return;
    if (ch->quant.qmeta_bytes) c->qmeta_bytes[ch->v.dtype] -= ch->quant.qmeta_bytes;
    free((void *)ch->v.qmeta);
    ch->v.qmeta = NULL;
    ch->quant.qmeta_bytes = 0;
}

/* The codec needs finite values within fp16 range (its scales are fp16)
 * and converts in place, so a bad value found half way would leave the
 * chunk half converted: check every value first. */
static int convertible(const fkv_cache *c, const fkv__chunk *ch)
{
    size_t per_page = (size_t)c->cfg.page_tokens * c->cfg.n_kv_heads * c->cfg.head_dim;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t j = 0; j < ch->v.n_pages; j++) {
                const uint8_t *base = (kv ? c->v[l] : c->k[l]) + (size_t)ch->pages[j] * c->layer_page_stride;
                if (c->cfg.dtype == FKV_F32) {
                    const float *x = (const float *)base;
                    for (size_t i = 0; i < per_page; i++)
                        if (!(x[i] >= -65504.0f && x[i] <= 65504.0f)) return 0; /* also NaN */
                } else {
                    const uint16_t *h = (const uint16_t *)base;
                    for (size_t i = 0; i < per_page; i++)
                        if ((h[i] & 0x7c00) == 0x7c00) return 0; /* inf or NaN */
                }
            }
    return 1;
}

/* After a chunk's K/V were rewritten as dt into its first `need` pages:
 * frees the others, sets the fills, moves the accounting and installs the
 * new scales (the old ones, if any, go). */
static void shrink_to(fkv_cache *c, fkv__chunk *ch, fkv_dtype dt, uint32_t need, void *qm, size_t meta, int reason)
{
    fkv_kv_geom g;
    fkv__kv_geom(c, &g);
    uint32_t old = ch->v.n_pages, tpp = fkv_quant_tokens_per_page(&g, dt);
    for (uint32_t j = 0; j < old; j++) {
        if (j < need) fkv__page_set_fill(c, ch->pages[j], fkv__stored_fill(c->cfg.page_tokens, tpp, ch->v.n_tokens, j));
        else fkv__page_unref(c, ch->pages[j]);
    }
    if (ch->owner) fkv__owner_usage(c, ch->owner, -(int64_t)(old - need));
    fkv__tenant_pages(ch, -(int64_t)(old - need));
    c->pages_by_dtype[ch->v.dtype] -= old;
    c->pages_by_dtype[dt] += need;
    fkv__chunk_free_qmeta(c, ch);
    ch->v.n_pages = need;
    ch->v.dtype = dt;
    ch->v.qmeta = qm;
    ch->quant.qmeta_bytes = meta;
    c->qmeta_bytes[dt] += meta;
    c->stats.fairkv_quantized_chunks_total[reason]++;
}

/* Quantizes one chunk in place to dt and frees the pages it no longer needs. */
static fkv_status quantize_to(fkv_cache *c, fkv__chunk *ch, fkv_dtype dt, int reason)
{
    fkv_kv_geom g;
    fkv__kv_geom(c, &g);
    uint32_t need = fkv_quant_pages_needed(&g, dt, ch->v.n_tokens);
    size_t meta = fkv_quant_meta_bytes(&g, dt, ch->v.n_tokens);
    if (!need || need > ch->v.n_pages) return FKV_EINVAL;
    void *qm = NULL;
    if (c->k) {
        if (!convertible(c, ch)) {
            c->stats.fairkv_quant_failures_total[0]++;
            return fkv__fail(FKV_EINVAL, "chunk at token %u: values not finite or beyond fp16 range: kept as is",
                             ch->v.start);
        }
        qm = malloc(meta);
        if (!qm) return FKV_ENOMEM;
        fkv_kv_layer *layers = malloc(c->cfg.n_layers * sizeof *layers);
        if (!layers) {
            free(qm);
            return FKV_ENOMEM;
        }
        for (uint32_t l = 0; l < c->cfg.n_layers; l++) layers[l] = (fkv_kv_layer){c->k[l], c->v[l]};
        char err[160];
        fkv_status st = fkv_quant_chunk(&g, layers, ch->v.n_tokens, ch->pages, ch->v.n_pages, dt, ch->pages, need,
                                        qm, meta, err, sizeof err);
        free(layers);
        if (st) {
            /* after the check above only argument or memory errors remain,
             * found before anything is written */
            free(qm);
            c->stats.fairkv_quant_failures_total[0]++;
            return fkv__fail(st, "quantizing chunk at token %u: %s", ch->v.start, err);
        }
    }
    shrink_to(c, ch, dt, need, qm, meta, reason);
    return FKV_OK;
}

static fkv_status quantize(fkv_cache *c, fkv__chunk *ch, int reason)
{
    return quantize_to(c, ch, c->cfg.quant_dtype, reason);
}

/* int8 (or fp8) -> int4, for fair reclaim's second step and the ladder:
 * the chunk is decoded to the base precision and encoded again in a
 * scratch copy (the pool has no free page to do it in), then its first
 * pages take the int4 data and the rest are freed.  The int4 error is then
 * that of encoding the int8 (fp8) values, which test_coldq bounds like a
 * direct int4 encoding. */
static fkv_status requantize(fkv_cache *c, fkv__chunk *ch, fkv_dtype to)
{
    fkv_kv_geom g;
    fkv__kv_geom(c, &g);
    uint32_t nt = ch->v.n_tokens, n8 = ch->v.n_pages;
    uint32_t nb = fkv_quant_pages_needed(&g, c->cfg.dtype, nt), n4 = fkv_quant_pages_needed(&g, to, nt);
    size_t meta = fkv_quant_meta_bytes(&g, to, nt);
    if (!n4 || n4 >= n8) return FKV_EINVAL;
    void *qm = NULL;
    if (c->k) {
        size_t stride = c->layer_page_stride, tp = (size_t)n8 + nb, nl = c->cfg.n_layers;
        uint8_t *tmp = malloc(2 * nl * tp * stride);
        fkv_kv_layer *tl = malloc(nl * sizeof *tl);
        uint32_t *ids = malloc(tp * sizeof *ids);
        qm = malloc(meta);
        if (!tmp || !tl || !ids || !qm) {
            free(tmp), free(tl), free(ids), free(qm);
            return FKV_ENOMEM;
        }
        for (uint32_t i = 0; i < tp; i++) ids[i] = i; /* scratch pages: the int8 copy, then the decoded chunk */
        for (size_t l = 0; l < nl; l++) {
            tl[l] = (fkv_kv_layer){tmp + 2 * l * tp * stride, tmp + (2 * l + 1) * tp * stride};
            for (uint32_t j = 0; j < n8; j++) {
                memcpy((uint8_t *)tl[l].k + j * stride, c->k[l] + (size_t)ch->pages[j] * stride, stride);
                memcpy((uint8_t *)tl[l].v + j * stride, c->v[l] + (size_t)ch->pages[j] * stride, stride);
            }
        }
        fkv_kv_geom sg = g;
        sg.n_pages = (uint32_t)tp;
        char err[160];
        fkv_status st = fkv_dequant_chunk(&sg, tl, nt, ch->v.dtype, ids, n8, ch->v.qmeta, ch->quant.qmeta_bytes, ids + n8,
                                          nb, err, sizeof err);
        if (!st) st = fkv_quant_chunk(&sg, tl, nt, ids + n8, nb, to, ids, n4, qm, meta, err, sizeof err);
        if (!st)
            for (size_t l = 0; l < nl; l++)
                for (uint32_t j = 0; j < n4; j++) {
                    memcpy(c->k[l] + (size_t)ch->pages[j] * stride, (uint8_t *)tl[l].k + j * stride, stride);
                    memcpy(c->v[l] + (size_t)ch->pages[j] * stride, (uint8_t *)tl[l].v + j * stride, stride);
                }
        free(tmp), free(tl), free(ids);
        if (st) {
            free(qm);
            c->stats.fairkv_quant_failures_total[0]++;
            return fkv__fail(st, "re-quantizing chunk at token %u: %s", ch->v.start, err);
        }
    }
    shrink_to(c, ch, to, n4, qm, meta, 2);
    return FKV_OK;
}

/* Fair reclaim (fkv_seq_reclaim): ch is one of cur_seq's chunks, in the
 * base precision (-> dt) or, for int4, already in int8 or fp8 (re-encoded). */
int fkv__reclaim_quantize(fkv_cache *c, fkv__chunk *ch, fkv_dtype dt)
{
    if ((ch->v.dtype == FKV_INT8 || ch->v.dtype == FKV_FP8) && dt == FKV_INT4) {
        /* the checks of quantizable() but the precision */
        if (!ch->v.resident || ch->v.n_tokens != ch->v.cap_tokens || (c->k && ch->kv_pending)) return 0;
        uint32_t own_pins = c->cur_seq ? c->cur_seq->pins : 0;
        if (c->k && ch->m.pins > own_pins) return 0;
        for (uint32_t j = 0; j < ch->v.n_pages; j++)
            if (c->page_ref[ch->pages[j]] != 1) return 0;
        return requantize(c, ch, dt) == FKV_OK;
    }
    if (!quantizable(c, ch, 1)) return 0;
    fkv__cold_remove(c, ch);
    return quantize_to(c, ch, dt, 2) == FKV_OK;
}

void fkv__cold_remove(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->quant.queued) return;
    fkv__list_unlink(&c->cold, ch, FKV__LINK(quant.lk));
    ch->quant.queued = 0;
}

static void found_cold(fkv_cache *c, fkv__chunk *ch)
{
    if (c->cfg.quant_mode == FKV_QUANT_ALWAYS) {
        if (quantizable(c, ch, 1)) quantize(c, ch, 0);
    } else if (!ch->quant.queued && ch->v.resident && ch->v.dtype == c->cfg.dtype) {
        fkv__list_push_back(&c->cold, ch, FKV__LINK(quant.lk));
        ch->quant.queued = 1;
    }
}

/* Visits the chunks of s that are now cold (all of them if `all`, for a
 * request that ends). */
void fkv__cold_scan(fkv_cache *c, fkv_seq *s, int all)
{
    if (c->cfg.quant_mode == FKV_QUANT_OFF) return;
    uint32_t hot = c->cfg.quant_hot_tokens;
    fkv_seq *prev = c->cur_seq;
    c->cur_seq = s;
    uint32_t i = all ? 0 : s->cold_scan;
    for (; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (!all && (uint64_t)ch->v.start + ch->v.n_tokens + hot > s->len) break;
        found_cold(c, ch);
    }
    if (!all) s->cold_scan = i;
    /* the ladder: warm (int8 or fp8) chunks past the warm window turn
     * int4; a chunk
     * that could not be quantized is looked at again only when its
     * request ends */
    if (c->cfg.quant_warm_tokens) {
        uint64_t old = (uint64_t)hot + c->cfg.quant_warm_tokens;
        uint32_t j = all ? 0 : s->ladder_scan;
        for (; j < s->n_chunks; j++) {
            fkv__chunk *ch = s->table[j];
            if (!all && ch->v.start + ch->v.n_tokens + old > s->len) break;
            /* under pressure, a full-precision chunk waiting in the cold
             * FIFO may still turn int8: wait for it */
            if (!all && ch->quant.queued) break;
            if (ch->v.dtype == FKV_INT8 || ch->v.dtype == FKV_FP8) fkv__reclaim_quantize(c, ch, FKV_INT4);
        }
        if (!all) s->ladder_scan = j;
    }
    c->cur_seq = prev;
}

/* Under-pressure mode: before `need` pages are taken, quantize the oldest
 * cold candidates while the pool would end above quant_pressure occupancy
 * or short of free pages. */
void fkv__cold_relieve(fkv_cache *c, uint32_t need)
{
    if (c->cfg.quant_mode != FKV_QUANT_UNDER_PRESSURE) return;
    double limit = c->cfg.quant_pressure * c->n_pages;
    while (c->cold.head &&
           ((double)(c->n_pages - c->n_free) + need > limit || c->n_free < need)) {
        fkv__chunk *ch = c->cold.head;
        fkv__cold_remove(c, ch);
        if (quantizable(c, ch, ch->owner && ch->owner == c->cur_seq)) quantize(c, ch, 1);
    }
}
