/* Victim selection around the policy: pinning, quotas, TTL and
 * min_chunk_retention live here, once, for every policy.
 *
 * Every resident, unpinned chunk waits in exactly one place:
 *  - the young FIFO while it is younger than min_chunk_retention;
 *  - otherwise a policy instance: its owner's (quotas on) or the shared one
 *    (unowned chunks of finished requests; every chunk when quotas are off).
 * Cached chunks with a predicted TTL are also in the TTL tier's order by
 * expiry (ttl.c).
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
 *
 * Quota of open request i (pages; shares.h rule 2, fkv__request_quotas):
 *     quota_i = capacity * w_i * d_i^(1/T) / sum_j w_j * d_j^(1/T)
 * where d_i is its demand in pages (its length, or expected_tokens if
 * larger) and T the temperature: T = 1 gives every request the same
 * fraction of its demand, T -> inf equal (weighted) shares, values between
 * smooth from one to the other.  "Largest excess" is rule 3 of shares.h
 * (ties: the first tenant, the first open request).  Quotas are refreshed when a request
 * arrives or leaves and otherwise at most every capacity/64 allocated pages:
 * demands change by one page at a time, so a stale quota is off by little,
 * and a refresh costs O(open requests). */
#include <stddef.h>

#include "core/internal.h"
#include "core/shares.h"

void fkv__place_remove(fkv_cache *c, fkv__chunk *ch)
{
    switch (ch->place) {
    case FKV__PLACE_POLICY:
        ch->inst->ops->remove(ch->inst->state, ch);
        ch->inst->n--;
        ch->tenant->n_evictable--;
        ch->inst = NULL;
        break;
    case FKV__PLACE_YOUNG:
        fkv__list_unlink(&c->young, ch, FKV__LINK(lk.young));
        break;
    default: break;
    }
    ch->place = FKV__PLACE_NONE;
    fkv__ttl_remove(c, ch);
}

static fkv__policy_inst *home(fkv_cache *c, const fkv__chunk *ch)
{
    if (!c->cfg.quotas) return c->shared_inst;
    if (ch->owner) return ch->owner->inst;
    return c->cfg.quotas == FKV_QUOTA_TENANT ? ch->tenant->cached : c->shared_inst;
}

/* Puts ch in the TTL tier or takes it out, as its state now says. */
void fkv__ttl_sync(fkv_cache *c, fkv__chunk *ch)
{
    int want = c->cfg.quotas && !ch->owner && ch->ttl.req > 0 && ch->place == FKV__PLACE_POLICY;
    if (want) fkv__ttl_add(c, ch);
    else fkv__ttl_remove(c, ch);
}

static void place_policy(fkv_cache *c, fkv__chunk *ch)
{
    fkv__policy_inst *in = home(c, ch);
    if (in->ops->insert(in->state, ch) != FKV_OK) return; /* out of memory: stays unevictable */
    in->n++;
    ch->tenant->n_evictable++;
    ch->inst = in;
    ch->place = FKV__PLACE_POLICY;
    fkv__ttl_sync(c, ch);
}

/* Puts the chunk where its state says it belongs.  A chunk already in the
 * right place stays where it is, so list policies (SIEVE) keep its
 * position when a request merely starts or stops holding it. */
void fkv__place_update(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->v.resident || ch->m.pins > 0) {
        fkv__place_remove(c, ch);
        return;
    }
    int64_t ret = c->cfg.min_chunk_retention_ns;
    int young = ret > 0 && fkv__now(c) - ch->m.create_ns < ret;
    if (young) {
        if (ch->place == FKV__PLACE_YOUNG) return;
        fkv__place_remove(c, ch);
        fkv__list_push_back(&c->young, ch, FKV__LINK(lk.young));
        ch->place = FKV__PLACE_YOUNG;
        return;
    }
    if (ch->place == FKV__PLACE_POLICY && ch->inst == home(c, ch)) {
        fkv__ttl_sync(c, ch);
        return;
    }
    fkv__place_remove(c, ch);
    place_policy(c, ch);
}

/* Moves chunks that have outlived min_chunk_retention into their policy.
 * The FIFO is in order of entry, which is creation order except for chunks
 * re-entering after a pin; those wait at most one retention period more. */
static void mature(fkv_cache *c, int64_t now)
{
    int64_t ret = c->cfg.min_chunk_retention_ns;
    while (c->young.head && now - c->young.head->m.create_ns >= ret) {
        fkv__chunk *ch = c->young.head;
        fkv__place_remove(c, ch);
        place_policy(c, ch);
    }
}

void fkv__owner_usage(fkv_cache *c, fkv_seq *s, int64_t delta)
{
    s->usage_pages = (uint64_t)((int64_t)s->usage_pages + delta);
    if (!c->cfg.quotas) return;
    int over = (double)s->usage_pages > s->quota_pages;
    if (over && !s->over_quota && delta > 0) c->stats.fairkv_quota_overruns_total[0]++;
    s->over_quota = over;
}

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

static fkv__chunk *pick(fkv_cache *c, int *tier)
{
    if (c->young.head) mature(c, fkv__now(c));
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
