/* The host copy of a chunk and the host lists (the tier's rules are in
 * demote.c).  A copy holds the chunk's K/V, layer by layer, K then V, page
 * by page (NULL with phantom storage, which only accounts the bytes), its
 * scales, dtype and page count; its bytes are charged to ch->tenant.  An
 * idle demoted chunk is on the host LRU list and on its tenant's, in the
 * same order. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* The host copy of a chunk of np pages takes its quantization scales, its
 * dtype and its page count; the scales leave the resident accounting. */
void fkv__host_take_scales(fkv_cache *c, fkv__chunk *ch, uint32_t np)
{
    ch->host.qmeta = (void *)ch->v.qmeta;
    ch->host.qmeta_bytes = ch->quant.qmeta_bytes;
    if (ch->quant.qmeta_bytes) c->qmeta_bytes[ch->v.dtype] -= ch->quant.qmeta_bytes;
    ch->v.qmeta = NULL;
    ch->quant.qmeta_bytes = 0;
    ch->host.dtype = (uint8_t)ch->v.dtype;
    ch->host.pages = np;
}

/* A chunk's K/V pages copied out to one host buffer, layer by layer, K
 * then V, page by page (the layout fkv_seq_reload copies back); NULL when
 * out of memory.  cpu storage only. */
uint8_t *fkv__host_copy_out(const fkv_cache *c, const fkv__chunk *ch)
{
    uint32_t np = ch->v.n_pages;
    uint64_t stride = c->layer_page_stride;
    uint8_t *buf = malloc((size_t)np * c->page_bytes);
    if (!buf) return NULL;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t j = 0; j < np; j++)
                memcpy(buf + (((size_t)l * 2 + (size_t)kv) * np + j) * stride,
                       (kv ? c->v[l] : c->k[l]) + (size_t)ch->pages[j] * stride, stride);
    return buf;
}

uint64_t fkv__host_bytes(const fkv_cache *c, const fkv__chunk *ch)
{
    return (uint64_t)ch->host.pages * c->page_bytes + ch->host.qmeta_bytes;
}

void fkv__host_charge(fkv_cache *c, fkv__chunk *ch, int sign)
{
    uint64_t b = fkv__host_bytes(c, ch);
    if (sign > 0) c->host_used += b, ch->tenant->host_bytes += b;
    else c->host_used -= b, ch->tenant->host_bytes -= b;
}

/* The host list, least recently used first, and the same chunks on one
 * list per tenant in the same order, so that the victim search under
 * tenant quotas takes the chosen tenant's oldest chunk at once rather than
 * walking the whole list to it. */
void fkv__host_list_push(fkv_cache *c, fkv__chunk *ch) /* most recent at the tail */
{
    fkv__list_push_back(&c->host_lru, ch, FKV__LINK(host.lru));
    c->host_n++;
    fkv__tenant *t = ch->tenant;
    ch->host.tenant = t;
    ch->host.stamp = c->host_stamp++;
    fkv__list_push_back(&t->host_lru, ch, FKV__LINK(host.tlru));
    t->host_n++;
}

static int on_list(const fkv_cache *c, const fkv__chunk *ch)
{
    return fkv__list_has(&c->host_lru, ch, FKV__LINK(host.lru));
}

void fkv__host_list_remove(fkv_cache *c, fkv__chunk *ch)
{
    if (!on_list(c, ch)) return;
    fkv__list_unlink(&c->host_lru, ch, FKV__LINK(host.lru));
    c->host_n--;
    fkv__tenant *t = ch->host.tenant;
    fkv__list_unlink(&t->host_lru, ch, FKV__LINK(host.tlru));
    ch->host.tenant = NULL;
    t->host_n--;
}

void fkv__host_free(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->v.offloaded) return;
    fkv__host_charge(c, ch, -1);
    if (ch->host.demoted) { /* its index entries stayed with it in the host tier */
        fkv__host_list_remove(c, ch);
        uint32_t lp = fkv__lpages(c, ch);
        for (uint32_t j = 0; j < lp; j++)
            if (ch->phash[j]) fkv__prefix_remove(c, ch->phash[j], ch);
        ch->host.demoted = 0;
    }
    free(ch->host.kv);
    free(ch->host.qmeta);
    ch->host.kv = NULL;
    ch->host.qmeta = NULL;
    ch->host.qmeta_bytes = 0;
    ch->host.pages = 0;
    ch->v.offloaded = 0;
}

/* ---------------------------------------------------------------- demotion */
