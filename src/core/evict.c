/* Victim selection around the policy: pinning, quotas, TTL and
 * min_chunk_retention live here, once, for every policy.  Candidates wait
 * in the places of place.c (the young FIFO, policy instances, the TTL
 * tier).
 *
 * With quotas on, the victim comes from the first non-empty tier:
 *   1. expired: a cached chunk not matched for longer than its predicted
 *      TTL, on the request clock (chunk.c);
 *   2. cached:  the policy's victim among unowned chunks (a finished
 *      request's quota is zero, so all of its chunks are over quota);
 *   3. the open request with the largest excess usage - quota (in pages):
 *      the policy's victim among its chunks (tier over_quota if the excess
 *      is positive, in_quota otherwise);
 *   4. young:   the oldest chunk of the young FIFO.
 * With quotas off: the policy's victim over all chunks, then young.
 * With quotas = tenant and share_guarantee = 1, shares.h rule 4 instead:
 * the policy's order across the over-share tenants, never the TTL tier.
 *
 * Quota of open request i (pages; shares.h rule 2, fkv__request_quotas):
 *     quota_i = capacity * w_i * d_i^(1/T) / sum_j w_j * d_j^(1/T)
 * where d_i is its demand in pages (its length, or expected_tokens if
 * larger) and T the temperature: T = 1 gives every request the same
 * fraction of its demand, T -> inf equal (weighted) shares, values between
 * smooth from one to the other.  "Largest excess" is rule 3 of shares.h
 * (ties: the first tenant, the first open request).  Quotas are refreshed
 * when a request arrives or leaves and otherwise at most every capacity/64
 * allocated pages: demands change by one page at a time, so a stale quota
 * is off by little, and a refresh costs O(open requests). */
#include <stddef.h>

#include "core/internal.h"
#include "core/shares.h"

/* Quotas (or shares) are stale: a request or tenant came or left, or
 * capacity/64 pages were allocated since the last refresh. */
static int quota_stale(const fkv_cache *c)
{
    return c->quota_dirty || c->quota_epoch_allocs * 64 >= c->n_pages;
}

/* The open request furthest over its quota (shares.h, rule 3; ties: the
 * first in c->owners) among those with an evictable chunk, of tenant t
 * only unless t is NULL; *excess is its usage - quota. */
static fkv_seq *furthest_request(fkv_cache *c, const fkv__tenant *t, double *excess)
{
    fkv__over_rank r = {0};
    fkv_seq *best = NULL;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        if ((t && s->tenant != t) || !s->inst->n) continue;
        if (fkv__over_offer(&r, (double)s->usage_pages, s->quota_pages, 0)) best = s;
    }
    *excess = r.excess;
    return best;
}

/* Tenant mode: the tenant furthest over its share (pages - share; ties:
 * the first) among those with an evictable chunk; in it, a cached chunk
 * first, then the open request furthest over its quota within the tenant. */
static fkv__chunk *pick_tenant(fkv_cache *c, int *tier)
{
    if (quota_stale(c)) fkv__tenant_shares(c);
    fkv__over_rank r = {0};
    fkv__tenant *bt = NULL;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        if (t->n_evictable && fkv__over_offer(&r, (double)t->pages, t->share, 0)) bt = t;
    }
    if (!bt) return NULL;
    if (bt->cached->n) {
        *tier = FKV__TIER_CACHED;
        return bt->cached->ops->victim(bt->cached->state);
    }
    double ex;
    fkv_seq *bs = furthest_request(c, bt, &ex);
    if (!bs) return NULL; /* cannot happen: n_evictable counts these */
    *tier = r.excess > 0 ? FKV__TIER_OVER_QUOTA : FKV__TIER_IN_QUOTA;
    return bs->inst->ops->victim(bs->inst->state);
}

/* Request mode: a cached chunk first (a finished request's quota is 0),
 * then the open request furthest over its quota. */
static fkv__chunk *pick_request(fkv_cache *c, int *tier)
{
    if (c->shared_inst->n) {
        *tier = FKV__TIER_CACHED;
        return c->shared_inst->ops->victim(c->shared_inst->state);
    }
    if (quota_stale(c)) fkv__request_quotas(c, 0);
    double ex;
    fkv_seq *best = furthest_request(c, NULL, &ex);
    if (!best) return NULL;
    *tier = ex > 0 ? FKV__TIER_OVER_QUOTA : FKV__TIER_IN_QUOTA;
    return best->inst->ops->victim(best->inst->state);
}

/* Guarantee mode (fkv_config.share_guarantee; shares.h, rule 4). */
static int over_share(const fkv__tenant *t)
{
    return (double)t->pages > t->share;
}

/* The policy's order across instances: a is evicted before b.  Key-ordered
 * policies (heap_policy.c) order every chunk by (key, chunk id), so the
 * smallest of their instances' victims is the victim one instance holding
 * them all would give.  The list policies (sieve, freeq) have no order
 * across instances: their victims compare by last read, then chunk id. */
static int evicted_before(const fkv_cache *c, const fkv__chunk *a, const fkv__chunk *b)
{
    if (c->ops->victim == fkv__hp_victim) {
        uint64_t ka = fkv__key_enc(a->pn.key), kb = fkv__key_enc(b->pn.key);
        if (ka != kb) return ka < kb;
    } else if (a->m.last_access_ns != b->m.last_access_ns) {
        return a->m.last_access_ns < b->m.last_access_ns;
    }
    return a->id < b->id;
}

/* Whom a victim may come from: every tenant, the tenants over their
 * shares, or the allocating tenant alone. */
enum { FROM_ALL, FROM_OVER, FROM_SELF };

static int from(int who, const fkv__tenant *t, const fkv__tenant *self)
{
    return who == FROM_ALL || (who == FROM_OVER ? over_share(t) : t == self);
}

static void offer(const fkv_cache *c, fkv__policy_inst *in, fkv__chunk **best)
{
    if (!in || !in->n) return;
    fkv__chunk *v = in->ops->victim(in->state);
    if (v && (!*best || evicted_before(c, v, *best))) *best = v;
}

/* The policy's victim among the evictable chunks of the tenants `who`
 * names: their cached instances and their open requests' ones. */
static fkv__chunk *guarantee_best(fkv_cache *c, int who, const fkv__tenant *self)
{
    fkv__chunk *best = NULL;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        if (t->n_evictable && from(who, t, self)) offer(c, t->cached, &best);
    }
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        if (s->tenant->n_evictable && from(who, s->tenant, self)) offer(c, s->inst, &best);
    }
    return best;
}

/* Rule 4 of shares.h: the first of the groups below with an evictable
 * chunk gives the policy's victim, then, the same way, the oldest young
 * chunk (tenants holding no page take no part).  Some tenant over its
 * share: the over-share tenants, then the allocating tenant itself (an
 * over-share allocator with nothing evictable fails), or everybody when
 * no request is allocating (fkv_cache_evict, teardown).  None over: if
 * every other tenant is strictly under its share, everybody (the policy
 * alone), else the allocator itself.  The TTL tier is not used: the
 * policy's order decides. */
static fkv__chunk *pick_guarantee(fkv_cache *c, int *tier)
{
    if (quota_stale(c)) fkv__tenant_shares(c);
    const fkv__tenant *self = c->cur_seq ? c->cur_seq->tenant : NULL;
    int any_over = 0, others_under = 1;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        const fkv__tenant *t = c->tenants[i];
        if (!t->pages) continue;
        if (over_share(t)) any_over = 1;
        if (t != self && !((double)t->pages < t->share)) others_under = 0;
    }
    int order[2] = {FROM_OVER, -1};
    if (!self) order[1] = FROM_ALL;
    else if (any_over) order[1] = FROM_SELF;
    else order[0] = others_under ? FROM_ALL : FROM_SELF;
    for (int k = 0; k < 2 && order[k] >= 0; k++) {
        fkv__chunk *v = guarantee_best(c, order[k], self);
        if (v) {
            *tier = !v->owner ? FKV__TIER_CACHED : over_share(v->tenant) ? FKV__TIER_OVER_QUOTA : FKV__TIER_IN_QUOTA;
            return v;
        }
    }
    for (int k = 0; k < 2 && order[k] >= 0; k++)
        for (fkv__chunk *y = c->young.head; y; y = y->lk.young.next)
            if (from(order[k], y->tenant, self)) {
                *tier = FKV__TIER_YOUNG;
                return y;
            }
    return NULL;
}

static fkv__chunk *pick(fkv_cache *c, int *tier)
{
    if (c->young.head) fkv__place_mature(c, fkv__now(c));
    if (c->cfg.share_guarantee) return pick_guarantee(c, tier);
    if (c->cfg.quotas) {
        /* nothing can have expired while the heap is empty and the clock
         * has not reached the wheel's next bucket */
        int maybe = c->ttl_n && (c->ttl_heap.n || c->ttl_next * FKV__TTL_W < c->n_requests);
        fkv__chunk *expired = maybe ? fkv__ttl_expired(c) : NULL;
        if (expired) {
            *tier = FKV__TIER_EXPIRED;
            return expired;
        }
        fkv__chunk *v = c->cfg.quotas == FKV_QUOTA_TENANT ? pick_tenant(c, tier) : pick_request(c, tier);
        if (v) return v;
    } else if (c->shared_inst->n) {
        *tier = FKV__TIER_GLOBAL;
        return c->shared_inst->ops->victim(c->shared_inst->state);
    }
    if (c->young.head) {
        *tier = FKV__TIER_YOUNG;
        return c->young.head;
    }
    return NULL;
}

/* Eviction in two halves, so that a batch of victims can be chosen first
 * and their memory touched together (fkv__evict_until):
 *  - detach: out of every place and count; from here on nothing chooses
 *    it again, and quotas see its owner's usage without it;
 *  - release: its index entries and pages go, and the chunk struct too
 *    unless a sequence still holds it (then it stays as a hole (resident
 *    = 0) that fkv_seq_missing reports). */
void fkv__chunk_detach(fkv_cache *c, fkv__chunk *ch)
{
    if (ch->m.pins && !ch->v.dropped && !c->reclaiming) c->pinned_evictions++;
    fkv__place_remove(c, ch);
    fkv__cold_remove(c, ch);
    if (ch->owner) fkv__owner_usage(c, ch->owner, -(int64_t)ch->v.n_pages);
    c->pages_by_dtype[ch->v.dtype] -= ch->v.n_pages;
    fkv__tenant_pages(ch, -(int64_t)ch->v.n_pages);
    c->resident_tokens -= ch->v.n_tokens;
    c->n_resident--;
    c->stats.fairkv_evicted_chunks_total[ch->cls]++;
}

void fkv__chunk_release(fkv_cache *c, fkv__chunk *ch)
{
    if (c->cfg.host_demote) {
        fkv__tree_orphan_idle(ch); /* none when the closure chose it (host.c) */
        /* an idle chunk goes down a tier, not out of the cache */
        if (!ch->m.refs && !ch->v.dropped && fkv__host_demote(c, ch)) return;
    }
    c->stats.fairkv_tier_evictions_total[0]++;
    uint32_t free_before = c->n_free, lp = fkv__lpages(c, ch), np = ch->v.n_pages;
    for (uint32_t j = 0; j < np; j++) {
        if (j < lp && ch->phash[j]) fkv__prefix_remove(c, ch->phash[j], ch);
        fkv__page_unref(c, ch->pages[j]);
    }
    for (uint32_t j = np; j < lp; j++) /* a quantized chunk holds fewer pages than its logical ones */
        if (ch->phash[j]) fkv__prefix_remove(c, ch->phash[j], ch);
    fkv__chunk_free_qmeta(c, ch);
    c->stats.fairkv_evicted_pages_total[0] += c->n_free - free_before;
    ch->v.n_pages = 0;
    ch->v.pages = NULL;
    ch->v.resident = 0;
    ch->v.dtype = c->cfg.dtype;
    if (ch->m.refs == 0) fkv__chunk_destroy(c, ch);
}

void fkv__chunk_evict(fkv_cache *c, fkv__chunk *ch)
{
    fkv__chunk_detach(c, ch);
    fkv__chunk_release_prefetch(c, ch);
    fkv__chunk_release(c, ch);
}

fkv_status fkv__evict_one(fkv_cache *c)
{
    int tier = 0;
    fkv__chunk *v = pick(c, &tier);
    if (!v) return FKV_EFULL;
    if (c->cfg.host_demote) v = fkv__tree_device_leaf(v); /* prefix-closed (host.c) */
    c->stats.fairkv_evictions_by_tier_total[tier]++;
    v->tenant->reclaimed[FKV__N_ACTIONS - 1] += v->v.n_pages;
    fkv__chunk_evict(c, v);
    return FKV_OK;
}

/* Victims are chosen one at a time, each after the previous one is
 * detached (so quotas see its owner's usage drop), but released in
 * batches: a victim is a chunk nobody read for a while, so its struct,
 * index slots and page counts are rarely cached, and in a batch those
 * misses overlap instead of following one another.  The batch stops when
 * its chunks' pages would cover the need (shared pages may not free, and
 * then the next batch continues).  The victims are the ones evict_one
 * would choose in turn. */
#define BATCH 8
fkv_status fkv__evict_until(fkv_cache *c, uint32_t n_free)
{
    while (c->n_free < n_free) {
        fkv__chunk *b[BATCH];
        uint32_t k = 0;
        uint64_t expect = c->n_free;
        while (k < BATCH && expect < n_free) {
            int tier = 0;
            fkv__chunk *v = pick(c, &tier);
            if (!v) break;
            if (c->cfg.host_demote) v = fkv__tree_device_leaf(v); /* prefix-closed (host.c) */
            c->stats.fairkv_evictions_by_tier_total[tier]++;
            v->tenant->reclaimed[FKV__N_ACTIONS - 1] += v->v.n_pages;
            fkv__chunk_detach(c, v);
            __builtin_prefetch(v->phash);
            __builtin_prefetch(v->pages);
            /* the previous victim's hashes have arrived by now: start
             * loading its index buckets while the next one is chosen */
            if (k) fkv__chunk_release_prefetch(c, b[k - 1]);
            expect += v->v.n_pages;
            b[k++] = v;
        }
        if (!k) return FKV_EFULL;
        fkv__chunk_release_prefetch(c, b[k - 1]);
        for (uint32_t i = 0; i < k; i++) fkv__chunk_release(c, b[i]);
    }
    return FKV_OK;
}

/* What fkv_seq_restore and fkv_seq_reload reserve for s (who: the call,
 * for the message): the pool's limit first, then the reservation with s
 * as the allocating sequence. */
fkv_status fkv__reserve_for_seq(fkv_cache *c, fkv_seq *s, uint64_t pages, const char *who)
{
    if (pages > c->n_pages)
        return fkv__fail(FKV_EFULL, "%s: %llu pages needed, the pool has %u", who, (unsigned long long)pages,
                         c->n_pages);
    c->cur_seq = s;
    fkv_status st = fkv__reserve_pages(c, (uint32_t)pages, c->scratch);
    c->cur_seq = NULL;
    return st;
}

/* The one way to get pages: relieve (quantize cold chunks, under pressure)
 * -> evict -> take.  All or nothing: on FKV_EFULL no page was taken
 * (chunks evicted on the way stay evicted: they were evictable and are
 * reported as missing, nothing is lost). */
fkv_status fkv__reserve_pages(fkv_cache *c, uint32_t n, uint32_t *out)
{
    if (n > c->n_pages) {
        c->stats.fairkv_alloc_failures_total[0]++;
        return fkv__fail(FKV_EFULL, "%u pages asked, the pool has %u", n, c->n_pages);
    }
    fkv__cold_relieve(c, n);
    if (c->n_free < n && fkv__evict_until(c, n) != FKV_OK) {
        c->stats.fairkv_alloc_failures_total[0]++;
        return fkv__fail(FKV_EFULL, "%u pages needed, %u free and nothing evictable", n, c->n_free);
    }
    fkv__pool_take(c, n, out);
    return FKV_OK;
}
