/* What one engine step does with a sequence: pin it, read it (touch: hits,
 * misses, heat), find the missing ranges and bring them back (fetch). */
#include <string.h>

#include "core/internal.h"

#define PT(c) ((c)->cfg.page_tokens)

fkv_status fkv_seq_touch(fkv_seq *s, uint32_t *missing)
{
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_touch: seq is NULL");
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    int64_t now = fkv__now(c);
    fkv_class cl = fkv__seq_class(s);
    uint64_t hit = 0, miss = 0;
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (ch->v.dropped) continue; /* sparsity: not read */
        if (!ch->v.resident) {
            miss += ch->v.n_tokens;
            continue;
        }
        hit += ch->v.n_tokens;
        ch->kv_pending = 0; /* a holder's next step: what was restored has been computed */
        fkv__chunk_touch(c, ch, now);
    }
    c->stats.fairkv_hit_tokens_total[cl] += (double)hit;
    c->stats.fairkv_miss_tokens_total[cl] += (double)miss;
    if (missing) *missing = (uint32_t)miss;
    FKV__UNLOCK(c);
    return FKV_OK;
}

static void pin_all(fkv_seq *s, int delta)
{
    /* unpinning makes chunks evictable in this order: an entry-ordered
     * policy (freeq) evicts them in it (fkv_config.free_tail_first) */
    int rev = delta < 0 && s->cache->cfg.free_tail_first;
    for (uint32_t k = 0; k < s->n_chunks; k++) {
        fkv__chunk *ch = s->table[rev ? s->n_chunks - 1 - k : k];
        ch->m.pins = (uint32_t)((int)ch->m.pins + delta);
        if ((delta > 0 && ch->m.pins == 1) || ch->m.pins == 0) fkv__place_update(s->cache, ch);
    }
}

fkv_status fkv_seq_pin(fkv_seq *s)
{
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_pin: seq is NULL");
    FKV__LOCK(s->cache);
    /* guarantees: a request claims memory while it runs (pinned), so a
     * change of that state moves the shares */
    if (s->pins == 0 && s->cache->cfg.share_guarantee) s->cache->quota_dirty = 1;
    s->pins++;
    s->pinned_once = 1;
    pin_all(s, 1);
    FKV__UNLOCK(s->cache);
    return FKV_OK;
}

fkv_status fkv_seq_unpin(fkv_seq *s)
{
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_unpin: seq is NULL");
    fkv_status st = FKV_OK;
    FKV__LOCK(s->cache);
    if (!s->pins) {
        st = fkv__fail(FKV_ESTATE, "fkv_seq_unpin: request %llu is not pinned", (unsigned long long)s->request_id);
    } else {
        s->pins--;
        if (!s->pins && s->cache->cfg.share_guarantee) s->cache->quota_dirty = 1;
        pin_all(s, -1);
    }
    FKV__UNLOCK(s->cache);
    return st;
}

fkv_status fkv_seq_missing(fkv_seq *s, fkv_range *out, size_t cap, size_t *n)
{
    if (!s || !n || (cap && !out)) return fkv__fail(FKV_EINVAL, "fkv_seq_missing: NULL argument");
    FKV__LOCK(s->cache);
    size_t k = 0;
    int open = 0;
    fkv_range cur = {0, 0};
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (ch->v.resident || ch->v.dropped) continue;
        uint32_t a = ch->v.start, b = ch->v.start + ch->v.n_tokens;
        if (open && cur.end == a) {
            cur.end = b;
            continue;
        }
        if (open) {
            if (k < cap) out[k] = cur;
            k++;
        }
        cur = (fkv_range){a, b};
        open = 1;
    }
    if (open) {
        if (k < cap) out[k] = cur;
        k++;
    }
    *n = k;
    FKV__UNLOCK(s->cache);
    return FKV_OK;
}

/* fkv_seq_fetch's FKV_FETCH_RECOMPUTE: s's evicted chunks in [start, end)
 * (not dropped, not in the host tier), the pages they need, then those
 * pages (from *fresh) given to them.  Under the lock. */
static int wants_recompute(const fkv__chunk *ch, uint32_t start, uint32_t end)
{
    return !ch->v.resident && !ch->v.dropped && !ch->v.offloaded && ch->v.start < end &&
           ch->v.start + ch->v.n_tokens > start;
}

static uint64_t recompute_pages(const fkv_seq *s, uint32_t start, uint32_t end)
{
    uint32_t pt = PT(s->cache);
    uint64_t pages = 0;
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        const fkv__chunk *ch = s->table[i];
        if (wants_recompute(ch, start, end)) pages += (ch->v.n_tokens + pt - 1) / pt;
    }
    return pages;
}

static uint32_t recompute(fkv_seq *s, uint32_t start, uint32_t end, const uint32_t **fresh_io, fkv_slot *slots)
{
    fkv_cache *c = s->cache;
    uint32_t pt = PT(c);
    const uint32_t *fresh = *fresh_io;
    uint32_t done = 0;
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (!wants_recompute(ch, start, end)) continue;
        uint32_t np = (ch->v.n_tokens + pt - 1) / pt;
        for (uint32_t j = 0; j < np; j++) {
            ch->pages[j] = *fresh++;
            uint32_t fill = j + 1 < np ? pt : ch->v.n_tokens - j * pt;
            fkv__page_set_fill(c, ch->pages[j], fill);
            if (ch->phash[j]) fkv__prefix_insert(c, ch->phash[j], ch);
        }
        if (slots)
            for (uint32_t t = 0; t < ch->v.n_tokens; t++) slots[done + t] = (fkv_slot){ch->pages[t / pt], t % pt};
        done += ch->v.n_tokens;
        ch->v.pages = ch->pages;
        ch->v.resident = 1;
        ch->kv_pending = 1;
        ch->v.dtype = c->cfg.dtype;
        c->n_resident++;
        c->resident_tokens += ch->v.n_tokens;
        if (!ch->owner && c->cfg.quotas) {
            ch->owner = s;
            ch->m.owner = s->request_id;
        }
        ch->tenant = ch->owner ? ch->owner->tenant : s->tenant; /* tenant.c: who pays */
        fkv__chunk_add_pages(c, ch, np);
        fkv__place_update(c, ch);
    }
    c->stats.fairkv_restored_tokens_total[0] += done;
    *fresh_io = fresh;
    return done;
}

fkv_status fkv_seq_fetch(fkv_seq *s, uint32_t start, uint32_t end, unsigned from, fkv_slot *slots,
                         fkv_fetch_info *out)
{
    fkv_fetch_info fi = {0, 0, 0};
    if (out) *out = fi;
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_fetch: seq is NULL");
    if (start > end) return fkv__fail(FKV_EINVAL, "fkv_seq_fetch: start=%u > end=%u", start, end);
    if (!from || (from & ~(unsigned)FKV_FETCH_ALL))
        return fkv__fail(FKV_EINVAL, "fkv_seq_fetch: from=%u: not a set of FKV_FETCH_RECOMPUTE (1), FKV_FETCH_HOST (2)",
                         from);
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    uint64_t pages = 0;
    if (from & FKV_FETCH_HOST) pages += fkv__host_back_pages(s, start, end);
    if (from & FKV_FETCH_RECOMPUTE) pages += recompute_pages(s, start, end);
    fkv_status st = fkv__reserve_for_seq(c, s, pages, "fkv_seq_fetch");
    if (st == FKV_OK) {
        const uint32_t *fresh = c->scratch;
        if (from & FKV_FETCH_HOST) fi.host_tokens = fkv__host_back(s, start, end, &fresh, &fi.host_bytes);
        if (from & FKV_FETCH_RECOMPUTE) fi.recompute_tokens = recompute(s, start, end, &fresh, slots);
        if (out) *out = fi;
    }
    FKV__UNLOCK(c);
    return st;
}

fkv_status fkv_seq_drop(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_dropped)
{
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_drop: seq is NULL");
    if (start > end) return fkv__fail(FKV_EINVAL, "fkv_seq_drop: start=%u > end=%u", start, end);
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    uint32_t done = 0;
    for (uint32_t i = 0; i < s->n_chunks; i++) {
        fkv__chunk *ch = s->table[i];
        if (ch->v.dropped || ch->v.start < start || ch->v.start + ch->v.n_tokens > end) continue;
        /* a chunk other sequences also hold stays: they may still attend to it */
        if (ch->m.refs > 1) continue;
        ch->v.dropped = 1;
        if (ch->v.resident) fkv__chunk_evict(c, ch);
        fkv__host_free(c, ch);
        done += ch->v.n_tokens;
    }
    c->stats.fairkv_dropped_tokens_total[0] += done;
    if (n_dropped) *n_dropped = done;
    FKV__UNLOCK(c);
    return FKV_OK;
}

fkv_status fkv_seq_chunks(fkv_seq *s, const fkv_chunk_view *const **chunks, size_t *n)
{
    if (!s || !chunks || !n) return fkv__fail(FKV_EINVAL, "fkv_seq_chunks: NULL argument");
    FKV__LOCK(s->cache);
    /* the table holds chunk pointers whose first member is the view */
    *chunks = (const fkv_chunk_view *const *)(const void *)s->table;
    *n = s->n_chunks;
    FKV__UNLOCK(s->cache);
    return FKV_OK;
}

fkv_status fkv_seq_chunk_info(fkv_seq *s, size_t i, fkv_chunk_info *out)
{
    if (!s || !out) return fkv__fail(FKV_EINVAL, "fkv_seq_chunk_info: seq and out must not be NULL");
    FKV__LOCK(s->cache);
    fkv_status st = FKV_OK;
    if (i >= s->n_chunks) st = fkv__fail(FKV_EINVAL, "fkv_seq_chunk_info: chunk %zu of %u", i, s->n_chunks);
    else *out = s->table[i]->m;
    FKV__UNLOCK(s->cache);
    return st;
}

fkv_status fkv_chunks_locate(const fkv_chunk_view *const *chunks, size_t n, uint32_t page_tokens, uint32_t pos,
                             fkv_slot *out)
{
    if (!chunks || !out || !page_tokens) return fkv__fail(FKV_EINVAL, "fkv_chunks_locate: NULL argument");
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first chunk with start > pos */
        size_t mid = (lo + hi) / 2;
        if (chunks[mid]->start <= pos) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return fkv__fail(FKV_EINVAL, "fkv_chunks_locate: pos=%u before the first chunk", pos);
    const fkv_chunk_view *v = chunks[lo - 1];
    if (pos >= v->start + v->n_tokens) return fkv__fail(FKV_EINVAL, "fkv_chunks_locate: pos=%u past the end", pos);
    if (!v->resident) return fkv__fail(FKV_ENOENT, "fkv_chunks_locate: pos=%u was evicted", pos);
    if (v->dtype != FKV_F32 && v->dtype != FKV_F16)
        return fkv__fail(FKV_EUNSUPPORTED, "fkv_chunks_locate: pos=%u is in a %s chunk", pos, fkv_dtype_name(v->dtype));
    uint32_t t = pos - v->start;
    out->page = v->pages[t / page_tokens];
    out->slot = t % page_tokens;
    return FKV_OK;
}

/* ---------------------------------------------------------------- reclaim */

const char *fkv_reclaim_name(fkv_reclaim_action a)
{
    static const char *const n[FKV_N_RECLAIM] = {"quantize8", "quantize4", "drop", "evict", "preempt", "offload"};
    return (unsigned)a < FKV_N_RECLAIM ? n[a] : "?";
}

uint64_t fkv_seq_tenant(const fkv_seq *s)
{
    return s ? s->tenant->id : 0; /* immutable */
}

uint64_t fkv_seq_pages(fkv_seq *s)
{
    if (!s) return 0;
    FKV__LOCK(s->cache);
    uint64_t n = s->usage_pages;
    FKV__UNLOCK(s->cache);
    return n;
}
