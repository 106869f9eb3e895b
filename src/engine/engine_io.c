/* K/V in and out of the cache in whole pages (engine.h, fkv_engine_page_bytes):
 * the import of a request's prompt pages fetched from outside (a remote
 * tier), appended when its sequence opens, and the export of a finished
 * request's pages.
 *
 * Import runs inside the scheduler's open_seq (its import hook), on the
 * stepping thread, right after the cache's own (device + host) match: the
 * pages past that match are appended one page at a time, each page's K/V
 * written into its slots at once.  A page at a time because an append may
 * quantize a cold chunk (quant_mode), and a chunk turns cold only once
 * quant_hot_tokens tokens follow it: appending and writing page by page
 * means every chunk an append quantizes holds its K/V already.
 *
 * Export runs in the step that ends the request, after the forward pass
 * (every position of the sequence has its K/V) and before
 * fkv_sched_finish frees the sequence.  Only full pages of chunks that
 * are resident and at the base precision are marked ok: a quantized chunk
 * holds int8/int4 bytes and scales, not the layout the importer expects.
 * (Pages after a quantized chunk are exported: they attended int8 K/V, the
 * same approximation the cache's own prefix hits hand out.)  Nothing at or
 * after the first chunk dropped by a sparsity mode is exported: a page
 * computed once a chunk before it was dropped attended a sparse context,
 * which a dense importer would take for the real one; a page before every
 * dropped chunk was computed before any drop (drops are for good), so it
 * is exact. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

static size_t elt_bytes(fkv_dtype d) { return d == FKV_F16 ? 2 : 4; }

size_t fkv_engine_page_bytes(const fkv_engine *e)
{
    return (size_t)e->geom.n_layers * 2 * e->geom.page_tokens * e->geom.n_kv_heads * e->geom.head_dim *
           elt_bytes(e->geom.base);
}

uint32_t fkv_engine_page_tokens(const fkv_engine *e) { return e->geom.page_tokens; }

/* Token row (all K/V heads of one token) of layer l, K or V, inside one
 * page of the exchange layout. */
static size_t row_bytes(const fkv_engine *e) { return (size_t)e->geom.n_kv_heads * e->geom.head_dim * elt_bytes(e->geom.base); }

static size_t io_offset(const fkv_engine *e, uint32_t layer, int is_v, uint32_t t)
{
    size_t plane = (size_t)e->geom.page_tokens * row_bytes(e);
    return ((size_t)layer * 2 + (size_t)is_v) * plane + (size_t)t * row_bytes(e);
}

static uint8_t *cache_row(const fkv_engine *e, uint32_t layer, int is_v, fkv_slot sl)
{
    uint8_t *base = is_v ? e->vbase[layer] : e->kbase[layer];
    return base + (size_t)sl.page * e->geom.page_stride + (size_t)sl.slot * row_bytes(e);
}

uint32_t fkv__engine_import(void *ctx, fkv_req *r, uint32_t limit, uint64_t *fetched, int *appended)
{
    fkv_engine *e = ctx;
    eng_req *q = fkv__req_of(r);
    uint32_t matched = r->computed;
    *appended = 1;
    *fetched = 0;
    if (!q->import_kv) return 0;
    uint32_t pt = e->geom.page_tokens, end = q->import_tokens < limit ? q->import_tokens : limit, pos = matched;
    size_t pb = fkv_engine_page_bytes(e), rb = row_bytes(e);
    fkv_slot slots[1024]; /* one page's: the server's pages are 16 tokens; larger ones import nothing */
    /* pinned while it appends: its own matched and imported pages must not
     * be what the next page's append evicts */
    fkv_seq_pin(r->seq);
    while (pos < end && pt <= 1024) {
        uint32_t page = pos / pt, off = pos % pt, n = pt - off;
        if (n > end - pos) n = end - pos;
        /* FKV_EFULL: no memory now; what is left is computed as usual */
        if (fkv_seq_append(r->seq, q->tokens + pos, n, slots) != FKV_OK) break;
        const uint8_t *src = q->import_kv + (size_t)page * pb;
        for (uint32_t l = 0; l < e->geom.n_layers; l++)
            for (int v = 0; v < 2; v++)
                for (uint32_t t = 0; t < n; t++)
                    memcpy(cache_row(e, l, v, slots[t]), src + io_offset(e, l, v, off + t), rb);
        pos += n;
    }
    fkv_seq_unpin(r->seq);
    /* used once: a request that reopens its sequence (the scheduler's
     * freeing preemption) computes it */
    free(q->import_kv);
    q->import_kv = NULL;
    e->st.imported_tokens += pos - matched;
    *fetched = pos - matched;
    return pos - matched;
}

void fkv__engine_finished(void *ctx, fkv_req *r)
{
    eng_req *q = fkv__req_of(r);
    if (q->on_export) fkv__engine_export(ctx, q);
}

void fkv__engine_export(fkv_engine *e, eng_req *q)
{
    const fkv_chunk_view *const *ch;
    size_t nc;
    if (!q->on_export || !q->r.seq || fkv_seq_chunks(q->r.seq, &ch, &nc) != FKV_OK) return;
    uint32_t pt = e->geom.page_tokens, n_pages = q->r.computed / pt;
    if (!n_pages) return;
    size_t pb = fkv_engine_page_bytes(e), rb = row_bytes(e);
    uint8_t *kv = malloc((size_t)n_pages * pb), *ok = calloc(n_pages, 1);
    if (!kv || !ok) { /* out of memory: nothing exported, nothing lost */
        free(kv);
        free(ok);
        return;
    }
    size_t c = 0;
    int sparse = 0; /* a dropped chunk met: nothing from here on */
    for (uint32_t p = 0; p < n_pages && !sparse; p++) {
        uint32_t start = p * pt;
        while (c < nc && ch[c]->start + ch[c]->n_tokens <= start) sparse |= ch[c++]->dropped;
        if (c == nc || (sparse |= ch[c]->dropped)) break;
        if (start < q->export_from) continue;
        const fkv_chunk_view *cv = ch[c];
        if (cv->start > start || cv->start + cv->n_tokens < start + pt || !cv->resident ||
            cv->dtype != e->geom.base)
            continue;
        uint8_t *dst = kv + (size_t)p * pb;
        int good = 1;
        for (uint32_t t = 0; t < pt && good; t++) {
            fkv_slot sl;
            if (fkv_chunks_locate(ch, nc, pt, start + t, &sl) != FKV_OK) {
                good = 0;
                break;
            }
            for (uint32_t l = 0; l < e->geom.n_layers; l++)
                for (int v = 0; v < 2; v++) memcpy(dst + io_offset(e, l, v, t), cache_row(e, l, v, sl), rb);
        }
        ok[p] = (uint8_t)good;
        e->st.exported_pages += (uint64_t)good;
    }
    fkv_engine_export x = {q->tokens, pt, n_pages, pb, kv, ok};
    q->on_export(q->ctx, q->id, &x);
    free(kv);
    free(ok);
}
