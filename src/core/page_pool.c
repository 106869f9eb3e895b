/* The page pool: fixed-size pages are the only unit of memory.  Any n free
 * pages satisfy an allocation of n pages (a free stack, no contiguity), so
 * variable-size chunks cost no external fragmentation.  The pool only takes
 * and gives pages: making room (quantizing, evicting) is the eviction
 * module's reservation step.  Storage is phantom
 * (bytes only) or cpu: per layer, K and V arrays of
 * [n_pages][page_tokens][n_kv_heads][head_dim] elements. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv_quant.h"
#include "util/bigmem.h"

static size_t kv_bytes(const fkv_cache *c)
{
    return ((size_t)c->layer_page_stride * c->n_pages + 63) / 64 * 64;
}

fkv_status fkv__pool_init(fkv_cache *c)
{
    uint32_t n = c->n_pages;
    c->free_stack = malloc((size_t)n * sizeof *c->free_stack);
    c->page_ref = calloc(n, sizeof *c->page_ref);
    c->page_fill = calloc(n, sizeof *c->page_fill);
    c->scratch = malloc((size_t)n * sizeof *c->scratch);
    c->ins = malloc((size_t)n * sizeof *c->ins);
    c->keys = malloc((size_t)n * sizeof *c->keys);
    if (!c->free_stack || !c->page_ref || !c->page_fill || !c->scratch || !c->ins || !c->keys) return FKV_ENOMEM;
    /* written now, so the first requests do not pay the page faults of
     * lazily mapped zero pages (scratch arrays included) */
    memset(c->page_ref, 0, (size_t)n * sizeof *c->page_ref);
    memset(c->page_fill, 0, (size_t)n * sizeof *c->page_fill);
    memset(c->scratch, 0, (size_t)n * sizeof *c->scratch);
    memset(c->ins, 0, (size_t)n * sizeof *c->ins);
    memset(c->keys, 0, (size_t)n * sizeof *c->keys);
    /* pop order 0, 1, 2, ...: deterministic page ids */
    for (uint32_t i = 0; i < n; i++) c->free_stack[i] = n - 1 - i;
    c->n_free = n;
    if (c->cfg.storage == FKV_STORAGE_CPU) {
        uint32_t L = c->cfg.n_layers;
        c->k = calloc(L, sizeof *c->k);
        c->v = calloc(L, sizeof *c->v);
        if (!c->k || !c->v) return FKV_ENOMEM;
        size_t rounded = kv_bytes(c);
        for (uint32_t l = 0; l < L; l++) {
            /* zeros that cost nothing until written, so a large budget
             * (--kv-budget 8GiB) starts at once and only the pages requests
             * fill become resident; in 2 MiB pages where the system allows
             * (util/bigmem.h) */
            c->k[l] = fkv__big_alloc(rounded);
            c->v[l] = fkv__big_alloc(rounded);
            if (!c->k[l] || !c->v[l]) return FKV_ENOMEM;
        }
    }
    return FKV_OK;
}

void fkv__pool_fini(fkv_cache *c)
{
    if (c->k || c->v) {
        for (uint32_t l = 0; l < c->cfg.n_layers; l++) {
            if (c->k) fkv__big_free(c->k[l], kv_bytes(c));
            if (c->v) fkv__big_free(c->v[l], kv_bytes(c));
        }
    }
    free(c->k);
    free(c->v);
    free(c->free_stack);
    free(c->page_ref);
    free(c->page_fill);
    free(c->scratch);
    free(c->ins);
    free(c->keys);
}

/* Takes n pages from the free stack, which must hold them (the caller
 * made room: fkv__reserve_pages in evict.c). */
void fkv__pool_take(fkv_cache *c, uint32_t n, uint32_t *out)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = c->free_stack[--c->n_free];
        c->page_ref[p] = 1;
        c->page_fill[p] = 0;
        out[i] = p;
    }
    c->quota_epoch_allocs += n;
    c->pages_taken += n;
}

void fkv__page_ref(fkv_cache *c, uint32_t page)
{
    c->page_ref[page]++;
}

/* Copy-on-write: dst gets src's K/V in every layer and its fill. */
void fkv__page_copy(fkv_cache *c, uint32_t dst, uint32_t src)
{
    if (c->k) {
        size_t s = c->layer_page_stride;
        for (uint32_t l = 0; l < c->cfg.n_layers; l++) {
            memcpy(c->k[l] + (size_t)dst * s, c->k[l] + (size_t)src * s, s);
            memcpy(c->v[l] + (size_t)dst * s, c->v[l] + (size_t)src * s, s);
        }
    }
    fkv__page_set_fill(c, dst, c->page_fill[src]);
    c->stats.fairkv_cow_copies_total[0]++;
}

void fkv__kv_geom(const fkv_cache *c, fkv_kv_geom *g)
{
    g->n_layers = c->cfg.n_layers;
    g->n_kv_heads = c->cfg.n_kv_heads;
    g->head_dim = c->cfg.head_dim;
    g->page_tokens = c->cfg.page_tokens;
    g->base = c->cfg.dtype;
    g->page_stride = c->layer_page_stride;
    g->n_pages = c->n_pages;
}
