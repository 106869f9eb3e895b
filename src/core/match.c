/* Prefix matching: a new request takes the resident pages of earlier
 * requests' equal prefixes by reference.
 *
 * Matched pages are attached in the largest units possible:
 *  - a whole earlier chunk, when every one of its pages matched and it is
 *    complete (filled to its size): the chunk itself is shared, so its heat
 *    is common to all its users;
 *  - with dynamic chunking, an earlier chunk whose first r pages matched is
 *    split at page r where the prefixes diverge (if no other sequence holds
 *    it), and the matched head is shared whole;
 *  - otherwise the matched pages go into a new chunk of the new sequence
 *    that references them page by page (pages are refcounted). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define PT(c) ((c)->cfg.page_tokens)

/* Splits ch after its first r pages; the tail becomes a new chunk placed
 * right after ch in its owner's table.  Needs ch->m.refs == 0, or 1 with
 * the owner being that one holder. */
static fkv__chunk *split(fkv_cache *c, fkv__chunk *ch, uint32_t r)
{
    uint32_t pt = PT(c);
    fkv__chunk *t = fkv__chunk_new(c, NULL, ch->v.start + r * pt, ch->v.cap_tokens - r * pt);
    if (!t) return NULL;
    fkv_seq *own = ch->owner;
    if (own) {
        uint32_t at = 0;
        while (at < own->n_chunks && own->table[at] != ch) at++;
        if (at == own->n_chunks || fkv__seq_reserve(own, 1) != FKV_OK) {
            /* not found (cannot happen) or no memory: do not split */
            c->n_resident--;
            fkv__chunk_destroy(c, t);
            return NULL;
        }
    }
    uint32_t moved = ch->v.n_pages - r;
    for (uint32_t j = 0; j < moved; j++) {
        t->pages[j] = ch->pages[r + j];
        t->phash[j] = ch->phash[r + j];
        if (t->phash[j]) fkv__prefix_repoint(c, t->phash[j], ch, t);
        ch->phash[r + j] = 0;
    }
    t->cls = ch->cls;
    t->tenant = ch->tenant;
    t->v.dtype = ch->v.dtype;
    t->v.n_tokens = ch->v.n_tokens - r * pt;
    t->m.first_hash = t->phash[0];
    t->m.access_count = ch->m.access_count;
    t->m.create_ns = ch->m.create_ns;
    t->m.last_access_ns = ch->m.last_access_ns;
    t->m.expected_ttl_ns = ch->m.expected_ttl_ns;
    t->ttl.create_req = ch->ttl.create_req;
    t->create_tick = ch->create_tick;
    t->ttl.last_req = ch->ttl.last_req;
    t->ttl.req = ch->ttl.req;
    t->ttl.prefix_hits = ch->ttl.prefix_hits;
    /* move the page accounting from ch to t */
    fkv__place_remove(c, ch);
    if (ch->owner) fkv__owner_usage(c, ch->owner, -(int64_t)moved);
    c->pages_by_dtype[ch->v.dtype] -= moved;
    fkv__tenant_pages(ch, -(int64_t)moved);
    ch->v.n_pages = r;
    ch->v.n_tokens = r * pt;
    ch->v.cap_tokens = r * pt;
    fkv__chunk_add_pages(c, t, moved);
    if (own) {
        uint32_t at = 0;
        while (own->table[at] != ch) at++;
        t->owner = own;
        t->m.owner = own->request_id;
        fkv__owner_usage(c, own, moved);
        fkv__seq_attach(own, t, at + 1);
    }
    if (c->cfg.host_demote) fkv__tree_adopt(ch, t); /* what extended ch extends its tail now */
    fkv__place_update(c, t);
    fkv__place_update(c, ch);
    c->stats.fairkv_chunk_splits_total[0]++;
    return t;
}

static int whole(const fkv_cache *c, const fkv__chunk *ch)
{
    return ch->v.n_tokens == ch->v.cap_tokens && ch->v.n_tokens == fkv__lpages(c, ch) * c->cfg.page_tokens;
}

/* Attaches a demoted chunk whole, as an offloaded one: it leaves the host
 * list (held) and keeps its bytes and index entries until promoted. */
static void attach_host(fkv_cache *c, fkv_seq *s, fkv__chunk *ch, fkv_match_info *mi)
{
    if (!ch->m.refs) fkv__host_list_read(c, ch);
    fkv__seq_attach(s, ch, s->n_chunks);
    mi->host_tokens += ch->v.n_tokens;
    mi->host_bytes += fkv__host_bytes(c, ch);
}

/* fkv_seq_match_prefix; `tiers` = host-resident chunks match too. */
static fkv_status match(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens, int tiers,
                        fkv_match_info *mi)
{
    fkv_cache *c = s->cache;
    memset(mi, 0, sizeof *mi);
    if (!tokens && !s->block_ids)
        return fkv__fail(FKV_EINVAL, "fkv_seq_match_prefix: tokens is NULL and the sequence has no block ids");
    FKV__LOCK(c);
    fkv_status st = FKV_OK;
    if (s->len || s->n_chunks) {
        st = fkv__fail(FKV_ESTATE, "fkv_seq_match_prefix: the sequence already holds %u tokens", s->len);
        goto out;
    }
    tiers = tiers && c->cfg.host_demote;
    c->stats.fairkv_prefix_queries_tokens_total[0] += n;
    s->tenant->prefix_queries += n;
    if (!c->cfg.prefix_cache) goto out;
    uint32_t pt = PT(c), limit = n < max_tokens ? n : max_tokens;
    uint32_t want = limit / pt, m = 0;
    if (want > c->n_pages) want = c->n_pages; /* cannot match more pages than exist */
    fkv__pentry *ent = c->ins; /* scratch, [n_pages] each */
    uint64_t *keys = c->keys;
    /* keys in batches of 8 (a chain: each needs the previous); a batch's
     * probes are all started (prefetched) before the first waits on a cache
     * miss, and a miss ends the walk, so at most 7 keys are hashed in vain */
    uint64_t h = 0;
    uint32_t nk = 0;
    int done = 0;
    while (!done && nk < want) {
        uint32_t batch_end = nk + 8 < want ? nk + 8 : want, from = nk;
        for (; nk < batch_end; nk++) {
            uint32_t start = nk * pt;
            if (s->block_ids && !tokens) {
                uint32_t b = start / c->ev.block_tokens;
                if (b >= s->n_block_ids) {
                    done = 1;
                    break;
                }
                h = fkv__hash_block(fkv__ns_parent(s, h, nk), s->block_ids[b], (start % c->ev.block_tokens) / pt);
            } else {
                h = fkv__hash_tokens(fkv__ns_parent(s, h, nk), tokens + start, pt);
            }
            keys[nk] = h;
            fkv__prefix_prefetch(c, h);
        }
        for (m = from; m < nk; m++) {
            fkv__pentry *e = fkv__prefix_find(c, keys[m]);
            /* key m names sequence page m: the chunk's page m - start/pt */
            if (!e || !(e->chunk->v.resident || (tiers && e->chunk->host.demoted)) || e->chunk->v.start > m * pt ||
                m - e->chunk->v.start / pt >= fkv__lpages(c, e->chunk)) {
                done = 1;
                break;
            }
            ent[m] = *e;
        }
    }
    /* room for the worst case: one chunk per page */
    if (m && fkv__seq_reserve(s, m)) {
        st = fkv__fail(FKV_ENOMEM, "out of memory");
        goto out;
    }
    int64_t now = fkv__now(c);
    uint32_t i = 0;
    while (i < m) {
        fkv__chunk *ch = ent[i].chunk;
        uint32_t np = fkv__lpages(c, ch), r = 0;
        int base = ch->v.dtype == c->cfg.dtype;
        if (ch->v.start == i * pt) {
            while (r < np && i + r < m && ent[i + r].chunk == ch) r++;
        }
        if (!ch->v.resident) { /* in the host tier: whole, or the match ends */
            if (!r || r != np || !whole(c, ch)) break;
            attach_host(c, s, ch, mi);
            ch->ttl.prefix_hits++;
            ch->m.last_access_ns = now;
            ch->ttl.last_req = c->n_requests;
            fkv__chunk_touch(c, ch, now);
            i += r;
            continue;
        }
        if (r && r == np && whole(c, ch)) {
            /* share the whole chunk, whatever its precision */
        } else if (!base) {
            break; /* a quantized chunk's pages cannot be shared one by one */
        } else if (r && c->cfg.dynamic_chunking && r < np &&
                   (ch->m.refs == 0 || (ch->m.refs == 1 && ch->owner)) && split(c, ch, r)) {
            /* ch is now exactly the matched head */
        } else {
            ch = NULL;
        }
        if (ch) {
            fkv__seq_attach(s, ch, s->n_chunks);
            ch->ttl.prefix_hits++;
            ch->m.last_access_ns = now;
            ch->ttl.last_req = c->n_requests;
            if (!ch->owner) {
                fkv__chunk_predict_ttl(c, ch);
                fkv__ttl_sync(c, ch); /* a first match gives it a prediction */
            }
            fkv__chunk_touch(c, ch, now);
            i += r;
            continue;
        }
        /* page by page into a chunk of our own */
        uint32_t cap = fkv__chunk_target(c, i * pt);
        fkv__chunk *own = fkv__chunk_new(c, s, i * pt, cap);
        if (!own) {
            st = fkv__fail(FKV_ENOMEM, "out of memory");
            break;
        }
        uint32_t k = 0;
        while (k < cap / pt && i < m && ent[i].chunk->v.resident && ent[i].chunk->v.dtype == c->cfg.dtype) {
            fkv__chunk *src = ent[i].chunk;
            uint32_t pg = src->pages[i - src->v.start / pt];
            fkv__page_ref(c, pg);
            own->pages[k] = pg;
            own->phash[k] = keys[i];
            if (k == 0 || ent[i - 1].chunk != src) {
                src->ttl.prefix_hits++;
                src->m.last_access_ns = now;
                src->ttl.last_req = c->n_requests;
                if (!src->owner) {
                    fkv__chunk_predict_ttl(c, src);
                    fkv__ttl_sync(c, src);
                }
                fkv__chunk_touch(c, src, now);
            }
            k++;
            i++;
        }
        own->v.n_tokens = k * pt;
        own->m.first_hash = own->phash[0];
        c->resident_tokens += own->v.n_tokens;
        fkv__chunk_add_pages(c, own, k);
        fkv__seq_attach(s, own, s->n_chunks);
    }
    s->len = i * pt;
    s->chain_hash = i ? keys[i - 1] : 0;
    if (c->admit) /* a matched page is a sighting of its key; what follows is counted when computed */
        for (uint32_t j = 0; j < i; j++) fkv__admit_record(c->admit, keys[j]);
    c->stats.fairkv_prefix_hits_tokens_total[0] += s->len;
    s->tenant->prefix_hits += s->len;
    mi->device_tokens = s->len - mi->host_tokens;
    c->stats.fairkv_tier_hit_tokens_total[0] += mi->device_tokens;
    c->stats.fairkv_tier_hit_tokens_total[1] += mi->host_tokens;
out:
    FKV__UNLOCK(c);
    return st;
}

fkv_status fkv_seq_match_prefix(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens,
                                fkv_match_tiers tiers, fkv_match_info *out)
{
    if (!s || !out) return fkv__fail(FKV_EINVAL, "fkv_seq_match_prefix: seq and out must not be NULL");
    if (tiers != FKV_MATCH_DEVICE_ONLY && tiers != FKV_MATCH_ALL_TIERS)
        return fkv__fail(FKV_EINVAL, "fkv_seq_match_prefix: tiers=%d: not FKV_MATCH_DEVICE_ONLY (0) or "
                                     "FKV_MATCH_ALL_TIERS (1)", (int)tiers);
    return match(s, tokens, n, max_tokens, tiers == FKV_MATCH_ALL_TIERS, out);
}
