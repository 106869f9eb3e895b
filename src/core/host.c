/* The host tier below the device, and the prefix tree both tiers evict by.
 *
 * One host tier, of host_capacity_bytes, holds two kinds of chunk:
 *  - offloaded ones (fkv_seq_reclaim OFFLOAD): a running request's cold
 *    chunks, held by it, waiting for fkv_seq_reload; never evicted here;
 *  - demoted ones (host_demote): idle cached chunks the device evicted.
 *    Their K/V are copied to host memory (cpu storage; phantom storage
 *    only accounts the bytes) and their prefix index entries stay, so a
 *    tiered match finds them; while no sequence holds them they wait on
 *    the host LRU list, least recently demoted or released first.
 * A demoted chunk leaves the host when room is needed, for a demotion or
 * an offload (running requests come before idle copies): in tenant mode
 * the tenant furthest over its host share goes first, as on the device;
 * then its least recently used chunk, replaced by a leaf that extends it
 * (below).  Both kinds are charged, in bytes, to ch->tenant.
 *
 * Prefix closure.  Each chunk links to the chunk it extends in the
 * sequence that created it (tparent) and lists those that extend it
 * (tkids); the links exist only with host_demote.  A chunk leaves a tier
 * only once no idle chunk extending it is still in that tier: a device
 * victim with an evictable device-resident extension is replaced by that
 * extension, repeatedly, down to a leaf (fkv__tree_device_leaf), and a host
 * victim likewise by a demoted extension.  So a prefix is never in a lower
 * tier than an idle chunk that extends it (fkv__tree_check).  Paths that
 * take a chunk from a request regardless of what extends it (reclaim,
 * drop, evicting a held chunk) make its idle extensions roots: they cannot
 * be matched without it any more. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/shares.h"

/* ---------------------------------------------------------------- tree */

void fkv__tree_link(fkv__chunk *parent, fkv__chunk *kid)
{
    kid->tree.parent = parent;
    fkv__list_push_front(&parent->tree.kids, kid, FKV__LINK(tree.sib));
}

void fkv__tree_leave(fkv__chunk *ch)
{
    fkv__chunk *p = ch->tree.parent;
    if (!p) return;
    fkv__list_unlink(&p->tree.kids, ch, FKV__LINK(tree.sib));
    ch->tree.parent = NULL;
}

void fkv__tree_unlink(fkv__chunk *ch)
{
    fkv__tree_leave(ch);
    while (ch->tree.kids.head) fkv__tree_leave(ch->tree.kids.head);
}

void fkv__tree_adopt(fkv__chunk *from, fkv__chunk *to)
{
    while (from->tree.kids.head) {
        fkv__chunk *k = from->tree.kids.head;
        fkv__tree_leave(k);
        fkv__tree_link(to, k);
    }
    fkv__tree_link(from, to);
}

/* An idle chunk (no sequence holds it) and where it is: 2 device, 1 host. */
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

static int idle_level(const fkv__chunk *ch)
{
    if (ch->m.refs) return 0;
    return ch->v.resident ? 2 : ch->host.demoted ? 1 : 0;
}

fkv__chunk *fkv__tree_device_leaf(fkv__chunk *v)
{
    for (fkv__chunk *k = v->tree.kids.head; k;) {
        if (k->v.resident && k->place != FKV__PLACE_NONE) { /* evictable, not already leaving */
            v = k;
            k = v->tree.kids.head;
        } else {
            k = k->tree.sib.next;
        }
    }
    return v;
}

static fkv__chunk *host_leaf(fkv__chunk *v)
{
    for (fkv__chunk *k = v->tree.kids.head; k;) {
        if (idle_level(k) == 1) {
            v = k;
            k = v->tree.kids.head;
        } else {
            k = k->tree.sib.next;
        }
    }
    return v;
}

/* The idle extensions a chunk would strand above it, leaving the device
 * outside the closure's order (it is held: reclaimed, dropped, evicted as
 * a hole), become roots. */
void fkv__tree_orphan_idle(fkv__chunk *ch)
{
    for (fkv__chunk *k = ch->tree.kids.head; k;) {
        fkv__chunk *next = k->tree.sib.next;
        if (idle_level(k) == 2) fkv__tree_leave(k);
        k = next;
    }
}

int fkv__tree_check(fkv_cache *c, char *msg, size_t len)
{
    uint64_t n = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) n++;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        if (!c->cfg.host_demote && (ch->tree.parent || ch->tree.kids.head)) {
            snprintf(msg, len, "chunk %llu: prefix tree links without host_demote", (unsigned long long)ch->id);
            return 1;
        }
        uint64_t depth = 0;
        for (fkv__chunk *p = ch->tree.parent; p; p = p->tree.parent)
            if (++depth > n) {
                snprintf(msg, len, "chunk %llu: a cycle in the prefix tree", (unsigned long long)ch->id);
                return 1;
            }
        int found = 0;
        if (ch->tree.parent)
            for (fkv__chunk *k = ch->tree.parent->tree.kids.head; k && !found; k = k->tree.sib.next) found = k == ch;
        if (ch->tree.parent && !found) {
            snprintf(msg, len, "chunk %llu: not among its parent's extensions", (unsigned long long)ch->id);
            return 1;
        }
        for (fkv__chunk *k = ch->tree.kids.head; k; k = k->tree.sib.next)
            if (k->tree.parent != ch) {
                snprintf(msg, len, "chunk %llu: lists chunk %llu that extends another", (unsigned long long)ch->id,
                         (unsigned long long)k->id);
                return 1;
            }
        /* closed under prefixes at every tier: an idle prefix is at least
         * as high as each idle chunk extending it */
        if (ch->tree.parent && idle_level(ch) && idle_level(ch->tree.parent) && idle_level(ch->tree.parent) < idle_level(ch)) {
            snprintf(msg, len, "chunk %llu is on the device, its prefix %llu only in the host tier",
                     (unsigned long long)ch->id, (unsigned long long)ch->tree.parent->id);
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- bytes */

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
static void list_push(fkv_cache *c, fkv__chunk *ch) /* most recent at the tail */
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

/* ---------------------------------------------------------------- shares */

/* A tenant's host demand: the bytes it holds there (offloaded chunks
 * count, though only demoted ones can be taken), plus `need` for `who`,
 * the tenant whose chunk is coming in (so that when the host is full,
 * whoever holds more than its share of what is asked for gives way, the
 * newcomer included). */
static double host_demand(const fkv__tenant *t, const fkv__tenant *who, uint64_t need)
{
    return (double)t->host_bytes + (t == who ? (double)need : 0);
}

/* The tenants' host shares: water-filling (shares.h, rule 1) of their
 * host demands over the host's capacity, spare bytes unassigned. */
static void host_shares(fkv_cache *c, const fkv__tenant *who, uint64_t need)
{
    fkv__claim *cl = c->torder;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        cl[i] = (fkv__claim){.demand = host_demand(t, who, need), .weight = t->weight, .id = i};
    }
    fkv__water_fill(cl, c->n_tenants, (double)c->cfg.host_capacity_bytes, FKV__SPARE_KEEP);
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[cl[i].id]->host_share = cl[i].share;
}

double fkv__host_share(fkv_cache *c, const fkv__tenant *t)
{
    if (!c->cfg.host_capacity_bytes) return 0;
    host_shares(c, NULL, 0);
    return t->host_share;
}

/* The next host victim: in tenant mode, among the tenants with a demoted
 * idle chunk, the one furthest over its host share (ties: the one whose
 * oldest chunk is older); its least recently used chunk; then the
 * closure's leaf below it. */
static fkv__chunk *host_victim(fkv_cache *c, const fkv__tenant *who, uint64_t need)
{
    if (!c->host_lru.head) return NULL;
    fkv__chunk *v = c->host_lru.head;
    if (c->cfg.quotas == FKV_QUOTA_TENANT) {
        host_shares(c, who, need);
        fkv__over_rank r = {0};
        fkv__tenant *bt = NULL;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            /* ties: the tenant whose oldest chunk is older */
            if (t->host_lru.head && fkv__over_offer(&r, host_demand(t, who, need), t->host_share, ~t->host_lru.head->host.stamp))
                bt = t;
        }
        v = bt->host_lru.head;
    }
    return host_leaf(v);
}

int fkv__host_room(fkv_cache *c, const fkv__tenant *who, uint64_t need)
{
    if (need > c->cfg.host_capacity_bytes) return 0;
    while (c->host_used + need > c->cfg.host_capacity_bytes) {
        fkv__chunk *v = host_victim(c, who, need);
        if (!v) return 0;
        c->stats.fairkv_tier_evictions_total[1]++;
        fkv__host_free(c, v);
        fkv__chunk_destroy(c, v); /* idle: nobody holds it */
    }
    return 1;
}

/* ---------------------------------------------------------------- demotion */

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
    const fkv__chunk *v = host_victim(c, ch->tenant, need);
    return !v || n >= seen(c, v);
}

/* Called by fkv__chunk_release before the pages go, for a chunk no
 * sequence holds: copies its K/V (every layer, K then V, page by page) and
 * scales to the host and leaves its index entries in place.  0 when it
 * cannot be found again (not whole, or its first page is not indexed by
 * it) or the host has no room: then it is released as without a host
 * tier. */
int fkv__host_demote(fkv_cache *c, fkv__chunk *ch)
{
    uint32_t np = ch->v.n_pages, pt = c->cfg.page_tokens;
    /* only what a tiered match can take back: a whole chunk, filled to its
     * size in full pages (a restored one not yet computed holds no K/V
     * worth keeping) */
    int whole = ch->v.n_tokens == ch->v.cap_tokens && ch->v.n_tokens == fkv__lpages(c, ch) * pt;
    if (!np || !whole || !ch->phash[0] || (c->k && ch->kv_pending)) return 0;
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
    list_push(c, ch);
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
    list_push(c, ch);
}
