/* The host tier's rules: who enters, who leaves.
 *
 * One host tier, of host_capacity_bytes, holds two kinds of chunk (host.c
 * keeps their copies and bytes):
 *  - offloaded ones (fkv_seq_reclaim OFFLOAD): a running request's cold
 *    chunks, held by it, waiting for fkv_seq_reload; never evicted here;
 *  - demoted ones (host_demote): idle cached chunks the device evicted,
 *    copied down with their prefix index entries kept, so a tiered match
 *    finds them; while no sequence holds them they wait on the host LRU
 *    list, least recently demoted or released first.
 * A demoted chunk leaves the host when room is needed, for a demotion or
 * an offload (running requests come before idle copies): in tenant mode
 * the tenant furthest over its host share goes first (shares.h, rules 1
 * and 3), as on the device; then its least recently used chunk, replaced
 * by a leaf that extends it (tree.c).  With share_guarantee (shares.h,
 * rule 4) the least recently used chunk across all the tenants over their
 * host shares goes instead.  Both kinds are charged, in bytes, to
 * ch->tenant. */
#include <stdlib.h>

#include "core/internal.h"
#include "core/shares.h"

/* The next host victim: in tenant mode, among the tenants with a demoted
 * idle chunk, the one furthest over its host share (ties: the one whose
 * oldest chunk is older); its least recently used chunk; then the
 * closure's leaf below it. */
/* The same choice of tenants with an order other than lru (host_policy):
 * the tenants the share rule designates are picked, and the order takes
 * its candidate among their chunks (fkv__host_order_pick). */
static fkv__chunk *order_victim(fkv_cache *c, const fkv__tenant *who, uint64_t need, int commit)
{
    int all = 1;
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[i]->host_pick = 0;
    if (c->cfg.share_guarantee) {
        fkv__host_shares(c, who, need);
        int any_over = 0, over_held = 0;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            if (!(fkv__host_demand(t, who, need) > t->host_share)) continue;
            any_over = 1;
            t->host_pick = 1;
            if (t->host_n) over_held = 1;
        }
        if (any_over) {
            all = 0;
            if (!over_held && who) ((fkv__tenant *)who)->host_pick = 1; /* one of c->tenants */
        }
    } else if (c->cfg.quotas == FKV_QUOTA_TENANT) {
        fkv__host_shares(c, who, need);
        fkv__over_rank r = {0};
        fkv__tenant *bt = NULL;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            if (!t->host_n) continue;
            /* ties: the tenant whose oldest chunk is older */
            const fkv__chunk *h = t->host_lru.head, *sm = t->host_small.head;
            uint64_t st = !h ? sm->host.stamp : !sm ? h->host.stamp : h->host.stamp < sm->host.stamp ? h->host.stamp : sm->host.stamp;
            if (fkv__over_offer(&r, fkv__host_demand(t, who, need), t->host_share, ~st)) bt = t;
        }
        bt->host_pick = 1;
        all = 0;
    }
    fkv__chunk *v = fkv__host_order_pick(c, all, commit);
    return v ? fkv__tree_host_leaf(v) : NULL;
}

static fkv__chunk *host_victim(fkv_cache *c, const fkv__tenant *who, uint64_t need, int commit)
{
    if (!c->host_n) return NULL;
    if (c->cfg.host_policy != FKV_HOST_LRU) return order_victim(c, who, need, commit);
    fkv__chunk *v = c->host_lru.head;
    if (c->cfg.share_guarantee) {
        /* shares.h, rule 4: the least recently used demoted chunk of the
         * tenants over their host shares; none over: the host LRU alone;
         * else the incoming tenant's own, or nothing */
        fkv__host_shares(c, who, need);
        fkv__chunk *over = NULL, *own = NULL;
        int any_over = 0;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            if (!(fkv__host_demand(t, who, need) > t->host_share)) continue;
            any_over = 1;
            fkv__chunk *h = t->host_lru.head;
            if (h && (!over || h->host.stamp < over->host.stamp)) over = h;
        }
        if (who && !over) own = who->host_lru.head;
        if (any_over) v = over ? over : own;
        if (!v) return NULL;
    } else if (c->cfg.quotas == FKV_QUOTA_TENANT) {
        fkv__host_shares(c, who, need);
        fkv__over_rank r = {0};
        fkv__tenant *bt = NULL;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            /* ties: the tenant whose oldest chunk is older */
            if (t->host_lru.head && fkv__over_offer(&r, fkv__host_demand(t, who, need), t->host_share, ~t->host_lru.head->host.stamp))
                bt = t;
        }
        v = bt->host_lru.head;
    }
    return fkv__tree_host_leaf(v);
}

int fkv__host_room(fkv_cache *c, const fkv__tenant *who, uint64_t need)
{
    if (need > c->cfg.host_capacity_bytes) return 0;
    while (c->host_used + need > c->cfg.host_capacity_bytes) {
        fkv__chunk *v = host_victim(c, who, need, 1);
        if (!v) return 0;
        c->stats.fairkv_tier_evictions_total[1]++;
        fkv__host_evicting(c, v);
        fkv__host_free(c, v);
        fkv__chunk_destroy(c, v); /* idle: nobody holds it */
    }
    return 1;
}

/* A chunk's sightings: its last page's key (0 when it has none). */
static uint32_t seen(const fkv_cache *c, const fkv__chunk *ch)
{
    uint32_t lp = fkv__lpages(c, ch);
    return lp && ch->phash[lp - 1] ? fkv__admit_estimate(c->admit, ch->phash[lp - 1]) : 0;
}

/* The admission filter's test for an idle chunk leaving the device (whole,
 * its pages indexed), needing `need` host bytes (fairkv.h,
 * tier_admission).  Prefix closure first: the chunk it extends stays
 * findable above or beside it: held by a sequence, in the host tier, or
 * idle on the device (with SEEN, passing the same count, so it will
 * follow).  A chunk that starts past 0 and extends nothing any more (its
 * prefix left the cache) is refused: it could be matched only after its
 * prefix is computed again. */
int fkv__host_admits(fkv_cache *c, const fkv__chunk *ch, uint64_t need)
{
    /* an extension of it went down already: its prefix follows, or that
     * one could not be matched */
    for (const fkv__chunk *k = ch->tree.kids.head; k; k = k->tree.sib.next)
        if (k->host.demoted) return 1;
    uint32_t n = seen(c, ch), t = c->cfg.tier_admission_threshold;
    int by_count = c->cfg.tier_admission == FKV_TIER_ADMIT_SEEN;
    if (by_count && n < t) return 0;
    const fkv__chunk *p = ch->tree.parent;
    if (!p) {
        if (ch->v.start) return 0;
    } else if (!p->m.refs && !p->host.demoted && !(p->v.resident && (!by_count || seen(c, p) >= t))) {
        return 0;
    }
    if (by_count || c->host_used + need <= c->cfg.host_capacity_bytes) return 1;
    const fkv__chunk *v = host_victim(c, ch->tenant, need, 0);
    return !v || n >= seen(c, v);
}

/* A chunk a sequence ended inside (fewer tokens than its size: the last
 * chunk of a finished request) leaving the device: its full pages are
 * indexed and matchable, and a tiered match takes a chunk whole, so its
 * size becomes its full pages and a partial last page (never indexed:
 * keys are of whole pages) is released.  Without this, every request's
 * tail chunk was lost to the tiers below; on a multi-turn conversation
 * that tail is what the next turn starts with.  Nothing extends such a
 * chunk (a chunk is extended only once filled), and it holds the base
 * precision (only whole chunks are quantized); otherwise nothing
 * changes. */
static void trim_to_full_pages(fkv_cache *c, fkv__chunk *ch)
{
    uint32_t pt = c->cfg.page_tokens, full = ch->v.n_tokens / pt;
    if (ch->v.n_tokens == ch->v.cap_tokens || !full || ch->tree.kids.head || ch->v.dtype != c->cfg.dtype ||
        ch->quant.qmeta_bytes || ch->v.n_pages != fkv__lpages(c, ch))
        return;
    uint32_t free_before = c->n_free;
    for (uint32_t j = full; j < ch->v.n_pages; j++) {
        if (ch->phash[j]) fkv__prefix_remove(c, ch->phash[j], ch);
        ch->phash[j] = 0;
        fkv__page_unref(c, ch->pages[j]);
    }
    c->stats.fairkv_evicted_pages_total[0] += c->n_free - free_before;
    ch->v.n_pages = full;
    ch->v.n_tokens = ch->v.cap_tokens = full * pt;
}

/* Called by fkv__chunk_release before the pages go, for a chunk no
 * sequence holds: copies its K/V (every layer, K then V, page by page) and
 * scales to the host and leaves its index entries in place.  0 when it
 * cannot be found again (not whole, or its first page is not indexed by
 * it) or the host has no room: then it is released as without a host
 * tier. */
int fkv__host_demote(fkv_cache *c, fkv__chunk *ch)
{
    uint32_t pt = c->cfg.page_tokens;
    /* only what a tiered match can take back: a whole chunk, filled to its
     * size in full pages (a restored one not yet computed holds no K/V
     * worth keeping); a chunk its sequence ended inside is trimmed to its
     * full pages first */
    if (c->k && ch->kv_pending) return 0;
    trim_to_full_pages(c, ch);
    uint32_t np = ch->v.n_pages;
    int whole = ch->v.n_tokens == ch->v.cap_tokens && ch->v.n_tokens == fkv__lpages(c, ch) * pt;
    if (!np || !whole || !ch->phash[0]) return 0;
    fkv__pentry *e = fkv__prefix_find(c, ch->phash[0]);
    if (!e || e->chunk != ch) return 0;
    uint64_t need = (uint64_t)np * c->page_bytes + ch->quant.qmeta_bytes;
    if (c->admit && !fkv__host_admits(c, ch, need)) {
        c->stats.fairkv_tier_refused_total[0]++;
        return 0;
    }
    if (!fkv__host_room(c, ch->tenant, need)) return 0;
    uint8_t *buf = NULL;
    if (c->k && !(buf = fkv__host_copy_out(c, ch))) return 0;
    uint32_t free_before = c->n_free;
    for (uint32_t j = 0; j < np; j++) fkv__page_unref(c, ch->pages[j]);
    c->stats.fairkv_evicted_pages_total[0] += c->n_free - free_before;
    ch->host.kv = buf;
    fkv__host_take_scales(c, ch, np);
    ch->v.n_pages = 0;
    ch->v.pages = NULL;
    ch->v.resident = 0;
    ch->v.dtype = c->cfg.dtype;
    ch->v.offloaded = 1;
    ch->host.demoted = 1;
    fkv__host_charge(c, ch, +1);
    fkv__host_list_enter(c, ch);
    c->stats.fairkv_tier_demotions_total[0]++;
    c->stats.fairkv_tier_demoted_bytes_total[0] += (double)need;
    return 1;
}

/* Its last holder let go of an offloaded chunk.  A demoted one waits on
 * the host list again, unless an idle extension of it is on the device
 * (a holder promoted that one alone: it becomes a root); an offloaded one the reclaim made is
 * not indexed and goes, as without demotion. */
void fkv__host_unheld(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->host.demoted) {
        fkv__chunk_destroy(c, ch);
        return;
    }
    fkv__tree_orphan_idle(ch);
    fkv__host_list_push(c, ch);
}
