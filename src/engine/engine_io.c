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
 * fkv_sched_finish frees the sequence.  Full pages of resident chunks are
 * exported, in the base precision: a quantized (cold) chunk's are decoded
 * first, so the importer reads the values this engine's own attention
 * read (the ladder's approximation, which the cache's own prefix hits hand
 * out as well; pages after such a chunk attended them too).  Under the
 * int4 default most of a long prompt is cold by its end, and leaving those
 * pages out would leave out what a later turn returns for.  Nothing at or
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

/* A quantized chunk's K/V decoded to the base precision: its pages copied
 * into a scratch pool of its own (the codec reads and writes pages of one
 * pool) and decoded there after them; decoded_row() gives a token's rows.
 * decode_chunk: 0, or -1 (d untouched) when out of memory or the codec
 * refuses. */
typedef struct decoded {
    uint8_t *buf;          /* [n_layers][2][n_src + n_dst pages] */
    size_t stride, plane;  /* page stride; bytes of one layer's K (or V) pages */
    uint32_t n_src, pt;
} decoded;

static int decode_chunk(const fkv_engine *e, const fkv_chunk_view *cv, decoded *d)
{
    fkv_kv_geom g = e->geom;
    uint32_t pt = g.page_tokens, n_dst = (cv->n_tokens + pt - 1) / pt, n_src = cv->n_pages;
    size_t stride = g.page_stride, plane = (size_t)(n_src + n_dst) * stride;
    size_t meta = fkv_quant_meta_bytes(&g, cv->dtype, cv->n_tokens);
    if (!cv->qmeta || !meta) return -1;
    uint8_t *buf = malloc((size_t)g.n_layers * 2 * plane);
    fkv_kv_layer *layers = malloc(g.n_layers * sizeof *layers);
    uint32_t *idx = malloc((size_t)(n_src + n_dst) * sizeof *idx);
    int ok = buf && layers && idx;
    for (uint32_t l = 0; ok && l < g.n_layers; l++) {
        layers[l].k = buf + (size_t)l * 2 * plane;
        layers[l].v = buf + ((size_t)l * 2 + 1) * plane;
        for (uint32_t j = 0; j < n_src; j++) {
            memcpy((uint8_t *)layers[l].k + j * stride, (const uint8_t *)e->kbase[l] + (size_t)cv->pages[j] * stride, stride);
            memcpy((uint8_t *)layers[l].v + j * stride, (const uint8_t *)e->vbase[l] + (size_t)cv->pages[j] * stride, stride);
        }
    }
    if (ok) {
        for (uint32_t j = 0; j < n_src + n_dst; j++) idx[j] = j;
        g.n_pages = n_src + n_dst;
        char err[160];
        ok = fkv_dequant_chunk(&g, layers, cv->n_tokens, cv->dtype, idx, n_src, cv->qmeta, meta, idx + n_src, n_dst,
                               err, sizeof err) == FKV_OK;
    }
    free(layers);
    free(idx);
    if (!ok) {
        free(buf);
        return -1;
    }
    *d = (decoded){buf, stride, plane, n_src, pt};
    return 0;
}

/* Row of chunk token t (layer l, K or V) in a decoded chunk. */
static const uint8_t *decoded_row(const decoded *d, size_t rb, uint32_t l, int is_v, uint32_t t)
{
    return d->buf + ((size_t)l * 2 + (size_t)is_v) * d->plane + (size_t)(d->n_src + t / d->pt) * d->stride +
           (size_t)(t % d->pt) * rb;
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
    decoded dec = {0};
    size_t dec_c = (size_t)-1; /* the chunk dec holds */
    for (uint32_t p = 0; p < n_pages && !sparse; p++) {
        uint32_t start = p * pt;
        while (c < nc && ch[c]->start + ch[c]->n_tokens <= start) sparse |= ch[c++]->dropped;
        if (c == nc || (sparse |= ch[c]->dropped)) break;
        if (start < q->export_from) continue;
        const fkv_chunk_view *cv = ch[c];
        if (cv->start > start || cv->start + cv->n_tokens < start + pt || !cv->resident) continue;
        uint8_t *dst = kv + (size_t)p * pb;
        if (cv->dtype != e->geom.base) { /* quantized: its decoded rows */
            if (dec_c != c) {
                free(dec.buf);
                dec.buf = NULL;
                dec_c = c;
                decode_chunk(e, cv, &dec);
            }
            if (!dec.buf) continue; /* out of memory: the chunk's pages are left out */
            for (uint32_t t = 0; t < pt; t++)
                for (uint32_t l = 0; l < e->geom.n_layers; l++)
                    for (int v = 0; v < 2; v++)
                        memcpy(dst + io_offset(e, l, v, t), decoded_row(&dec, rb, l, v, start + t - cv->start), rb);
            ok[p] = 1;
            e->st.exported_pages++;
            e->st.exported_decoded_pages++;
            continue;
        }
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
    free(dec.buf);
    fkv_engine_export x = {q->tokens, pt, n_pages, pb, kv, ok};
    q->on_export(q->ctx, q->id, &x);
    free(kv);
    free(ok);
}
