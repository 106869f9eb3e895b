/* Fair reclaim from a running request (fkv_seq_reclaim: quantize, drop,
 * evict, offload) and the host tier that offload fills and fkv_seq_fetch
 * empties.  The order of actions and the choice of victim are the
 * scheduler's (src/sched/sched.h); docs/ARCHITECTURE.md, "Reclaim from
 * running requests". */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv_quant.h"

#define PT(c) ((c)->cfg.page_tokens)

/* ---------------------------------------------------------------- host tier */

/* Copies a resident chunk's pages (every layer's K and V) and scales to
 * host memory, then evicts it; 0 when the host tier has no room. */
static int offload(fkv_cache *c, fkv__chunk *ch)
{
    uint32_t np = ch->v.n_pages;
    uint64_t need = (uint64_t)np * c->page_bytes + ch->quant.qmeta_bytes;
    /* a running request's chunks come before idle demoted copies */
    if (!np || !fkv__host_room(c, ch->tenant, need)) return 0;
    uint8_t *buf = NULL;
    if (c->k && !(buf = fkv__host_copy_out(c, ch))) return 0;
    /* the scales go with it: out of the resident accounting first, so the
     * eviction does not free them */
    fkv__host_take_scales(c, ch, np);
    fkv__chunk_evict(c, ch); /* refs >= 1: it stays, as a hole */
    ch->host.kv = buf;
    ch->v.offloaded = 1;
    fkv__host_charge(c, ch, +1);
    return 1;
}

/* fkv_seq_fetch's FKV_FETCH_HOST: the offloaded (and demoted, matched)
 * chunks of s in [start, end), the pages they need, then their K/V copied
 * back into those pages (from *fresh_io); *bytes gets the bytes copied.
 * Under the lock. */
uint64_t fkv__host_back_pages(const fkv_seq *s, uint32_t start, uint32_t end)
{
    uint64_t pages = 0;
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        const fkv__chunk *ch = s->table[i];
        if (ch->v.offloaded && ch->v.start < end && ch->v.start + ch->v.n_tokens > start) pages += ch->host.pages;
    }
    return pages;
}

uint32_t fkv__host_back(fkv_seq *s, uint32_t start, uint32_t end, const uint32_t **fresh_io, uint64_t *bytes_out)
{
    fkv_cache *c = s->cache;
    uint64_t bytes = 0;
    const uint32_t *fresh = *fresh_io;
    uint32_t done = 0, pt = PT(c);
    fkv_kv_geom g;
    fkv__kv_geom(c, &g);
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (!ch->v.offloaded || ch->v.start >= end || ch->v.start + ch->v.n_tokens <= start) continue;
        uint32_t np = ch->host.pages;
        fkv_dtype dt = (fkv_dtype)ch->host.dtype;
        uint32_t tpp = dt == c->cfg.dtype ? pt : fkv_quant_tokens_per_page(&g, dt);
        for (uint32_t j = 0; j < np; j++) {
            ch->pages[j] = *fresh++;
            fkv__page_set_fill(c, ch->pages[j], fkv__stored_fill(pt, tpp, ch->v.n_tokens, j));
        }
        if (c->k) {
            uint64_t stride = c->layer_page_stride;
            for (uint32_t l = 0; l < c->cfg.n_layers; l++)
                for (int kv = 0; kv < 2; kv++)
                    for (uint32_t j = 0; j < np; j++)
                        memcpy((kv ? c->v[l] : c->k[l]) + (size_t)ch->pages[j] * stride,
                               ch->host.kv + (((size_t)l * 2 + (size_t)kv) * np + j) * stride, stride);
        }
        /* a demoted chunk kept its entries; an offloaded one gets back
         * those nobody took meanwhile (insert keeps the first writer) */
        uint32_t lp = fkv__lpages(c, ch);
        for (uint32_t j = 0; j < lp; j++)
            if (ch->phash[j]) fkv__prefix_insert(c, ch->phash[j], ch);
        bytes += fkv__host_bytes(c, ch);
        fkv__host_charge(c, ch, -1); /* from the tenant charged on entry */
        ch->host.demoted = 0;
        c->stats.fairkv_tier_promotions_total[1]++;
        ch->v.dtype = dt;
        ch->v.qmeta = ch->host.qmeta;
        ch->quant.qmeta_bytes = ch->host.qmeta_bytes;
        if (ch->quant.qmeta_bytes) c->qmeta_bytes[dt] += ch->quant.qmeta_bytes;
        ch->host.qmeta = NULL;
        ch->host.qmeta_bytes = 0;
        free(ch->host.kv);
        ch->host.kv = NULL;
        ch->host.pages = 0;
        ch->v.offloaded = 0;
        ch->v.pages = ch->pages;
        ch->v.resident = 1;
        c->n_resident++;
        c->resident_tokens += ch->v.n_tokens;
        if (!ch->owner && c->cfg.quotas) {
            ch->owner = s;
            ch->m.owner = s->request_id;
        }
        ch->tenant = ch->owner ? ch->owner->tenant : s->tenant;
        fkv__chunk_add_pages(c, ch, np);
        fkv__place_update(c, ch);
        done += ch->v.n_tokens;
    }
    c->stats.fairkv_reloaded_tokens_total[0] += done;
    c->stats.fairkv_tier_promoted_bytes_total[1] += (double)bytes;
    *fresh_io = fresh;
    *bytes_out = bytes;
    return done;
}

/* The caller vouches that nothing reads s's K/V during the call, so s's
 * own pins do not protect its chunks here (c->reclaiming); another
 * sequence's pins, a share with another sequence (DROP, EVICT) and K/V
 * not yet computed (kv_pending, real storage) do. */
fkv_status fkv_seq_reclaim(fkv_seq *s, fkv_reclaim_action a, const fkv_reclaim_args *args, uint32_t pages,
                           uint32_t *freed)
{
    if (freed) *freed = 0;
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_reclaim: seq is NULL");
    if ((unsigned)a >= FKV_N_RECLAIM) return fkv__fail(FKV_EINVAL, "fkv_seq_reclaim: action=%d: unknown", (int)a);
    if (a == FKV_RECLAIM_DROP && !args)
        return fkv__fail(FKV_EINVAL, "fkv_seq_reclaim: drop needs args (sink_tokens, window_tokens)");
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    if (a == FKV_RECLAIM_PREEMPT) { /* deprecated: fkv_seq_count_preempt */
        s->tenant->reclaimed[a] += s->usage_pages;
        FKV__UNLOCK(c);
        return FKV_OK;
    }
    uint32_t before = c->n_free, hot = c->cfg.quant_hot_tokens, dropped = 0;
    uint64_t lo = args ? args->sink_tokens : 0;
    uint64_t hi = args && (uint64_t)args->window_tokens < s->len ? s->len - args->window_tokens : 0;
    fkv_seq *prev = c->cur_seq;
    c->cur_seq = s;
    c->reclaiming = 1;
    for (uint32_t i = 0; i < s->n_chunks && c->n_free - before < pages; i++) {
        fkv__chunk *ch = s->table[i];
        uint64_t end = (uint64_t)ch->v.start + ch->v.n_tokens;
        if (a != FKV_RECLAIM_DROP && end + hot > s->len) break; /* the hot end stays */
        if (ch->v.dropped) continue;
        int alone = ch->m.refs == 1 && ch->m.pins <= s->pins && !(c->k && ch->kv_pending);
        switch (a) {
        case FKV_RECLAIM_QUANTIZE8:
            if (ch->v.dtype == c->cfg.dtype) fkv__reclaim_quantize(c, ch, FKV_INT8);
            break;
        case FKV_RECLAIM_QUANTIZE4: /* base precision, or int8/fp8 from before */
            if (ch->v.dtype == c->cfg.dtype || ch->v.dtype == FKV_INT8 || ch->v.dtype == FKV_FP8)
                fkv__reclaim_quantize(c, ch, FKV_INT4);
            break;
        case FKV_RECLAIM_DROP:
            if (ch->v.start < lo || end > hi || !alone) break;
            ch->v.dropped = 1;
            if (ch->v.resident) fkv__chunk_evict(c, ch);
            fkv__host_free(c, ch);
            dropped += ch->v.n_tokens;
            break;
        case FKV_RECLAIM_OFFLOAD:
            if (ch->v.resident && alone) offload(c, ch);
            break;
        default: /* EVICT */
            if (ch->v.resident && alone) fkv__chunk_evict(c, ch);
            break;
        }
    }
    c->reclaiming = 0;
    c->cur_seq = prev;
    c->stats.fairkv_dropped_tokens_total[0] += dropped;
    uint32_t got = c->n_free - before;
    s->tenant->reclaimed[a] += got;
    if (freed) *freed = got;
    FKV__UNLOCK(c);
    return FKV_OK;
}

fkv_status fkv_seq_count_preempt(fkv_seq *s, uint64_t *pages)
{
    if (pages) *pages = 0;
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_count_preempt: seq is NULL");
    FKV__LOCK(s->cache);
    s->tenant->reclaimed[FKV_RECLAIM_PREEMPT] += s->usage_pages;
    if (pages) *pages = s->usage_pages;
    FKV__UNLOCK(s->cache);
    return FKV_OK;
}
