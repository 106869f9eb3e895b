/* Tenants: the table, fair shares and the public queries.
 *
 * Charging rule: a chunk's pages are charged to the tenant of the request
 * that allocated them -- the one that created the chunk, or restored it
 * after an eviction -- for as long as the chunk holds them (running,
 * preempted or cached).  A tenant's pages are the sum of its chunks'
 * v.n_pages, the unit every other count of the cache uses (a page that a
 * copy-on-write tail shares with its source chunk counts for both, as it
 * does in the per-request usage).  Why the allocator and not a split by
 * references: private prefixes are matched only within their tenant
 * (prefix namespaces), so a chunk is shared across tenants only inside a
 * published prefix; there, splitting would move charges every time some
 * tenant matches or leaves, and would let a tenant lower its own charge
 * by making others hold its chunks.  Charging the allocator is stable
 * (O(1) per allocation) and makes the tenant that asked for memory pay
 * for it; the publisher of a shared system prompt pays once for everyone.
 *
 * Fair shares (tenant mode): weighted max-min over demands.  The demand of
 * tenant t is the pages it holds plus what its open requests expect to
 * grow into (expected_tokens, or their length, minus their pages).  With
 * capacity C, shares are water-filled: tenants in ascending order of
 * demand/weight get their whole demand while it is below weight * C' / W'
 * (C', W' = capacity and weight not yet given); the rest get weight * C' /
 * W'.  A tenant that wants less than its share leaves the rest to others;
 * when all demands fit, the spare pages are spread by weight, so shares
 * always sum to the pool.  Within a tenant, its share is split among its
 * open requests as in request mode (weight * demand^(1/T), T =
 * temperature): that split orders the tenant's own requests when it is
 * the one that must give memory back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

typedef struct order {
    double key;
    uint32_t idx;
} order;

static uint32_t slot_of(uint64_t id, uint32_t mask)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32) & mask;
}

static fkv_status map_grow(fkv_cache *c)
{
    uint32_t nmask = c->tmap_mask ? c->tmap_mask * 2 + 1 : 63;
    uint32_t *m = calloc((size_t)nmask + 1, sizeof *m);
    if (!m) return FKV_ENOMEM;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        uint32_t h = slot_of(c->tenants[i]->id, nmask);
        while (m[h]) h = (h + 1) & nmask;
        m[h] = i + 1;
    }
    free(c->tmap);
    c->tmap = m;
    c->tmap_mask = nmask;
    return FKV_OK;
}

fkv__tenant *fkv__tenant_get(fkv_cache *c, uint64_t id, int create)
{
    if (c->tmap) {
        uint32_t h = slot_of(id, c->tmap_mask);
        while (c->tmap[h]) {
            fkv__tenant *t = c->tenants[c->tmap[h] - 1];
            if (t->id == id) return t;
            h = (h + 1) & c->tmap_mask;
        }
    }
    if (!create) return NULL;
    if ((c->n_tenants + 1) * 2 > c->tmap_mask + 1 && map_grow(c)) return NULL;
    if (c->n_tenants == c->cap_tenants) {
        uint32_t ncap = c->cap_tenants ? c->cap_tenants * 2 : 8;
        fkv__tenant **nt = realloc(c->tenants, ncap * sizeof *nt);
        if (!nt) return NULL;
        c->tenants = nt;
        order *no = realloc(c->torder, ncap * sizeof *no);
        if (!no) return NULL;
        c->torder = no;
        c->cap_tenants = ncap;
    }
    fkv__tenant *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->id = id;
    t->weight = 1.0;
    if (c->cfg.quotas == FKV_QUOTA_TENANT) {
        t->cached = fkv__policy_inst_new(c->ops, &c->pparams);
        if (!t->cached) {
            free(t);
            return NULL;
        }
    }
    t->slot = c->n_slots < c->cfg.tenant_labels ? c->n_slots++ : c->cfg.tenant_labels;
    uint32_t h = slot_of(id, c->tmap_mask);
    while (c->tmap[h]) h = (h + 1) & c->tmap_mask;
    c->tmap[h] = c->n_tenants + 1;
    c->tenants[c->n_tenants++] = t;
    c->quota_dirty = 1;
    return t;
}

fkv_status fkv__tenants_init(fkv_cache *c)
{
    return fkv__tenant_get(c, 0, 1) ? FKV_OK : FKV_ENOMEM;
}

void fkv__tenants_fini(fkv_cache *c)
{
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__policy_inst_free(c->tenants[i]->cached);
        free(c->tenants[i]);
    }
    free(c->tenants);
    free(c->tmap);
    free(c->torder);
}

static int by_key(const void *a, const void *b)
{
    const order *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint64_t seq_demand(const fkv_cache *c, const fkv_seq *s)
{
    uint32_t pt = c->cfg.page_tokens;
    uint32_t toks = s->len > s->expected_tokens ? s->len : s->expected_tokens;
    return (toks + pt - 1) / pt;
}

void fkv__tenant_shares(fkv_cache *c)
{
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[i]->demand = (double)c->tenants[i]->pages;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        uint64_t d = seq_demand(c, s);
        if (d > s->usage_pages) s->tenant->demand += (double)(d - s->usage_pages);
    }
    /* water-filling in ascending demand / weight */
    order *o = c->torder;
    uint32_t n = 0;
    double wsum = 0;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        t->share = 0;
        if (t->demand > 0) {
            o[n++] = (order){t->demand / t->weight, i};
            wsum += t->weight;
        }
    }
    qsort(o, n, sizeof *o, by_key);
    double left = (double)c->n_pages, w = wsum;
    uint32_t k = 0;
    for (; k < n; k++) {
        fkv__tenant *t = c->tenants[o[k].idx];
        if (t->demand > t->weight * left / w) break;
        t->share = t->demand;
        left -= t->demand;
        w -= t->weight;
    }
    if (k < n) {
        for (uint32_t j = k; j < n; j++) {
            fkv__tenant *t = c->tenants[o[j].idx];
            t->share = t->weight * left / w;
        }
    } else if (n && left > 0) { /* every demand fits: the spare pages by weight */
        for (uint32_t j = 0; j < n; j++) {
            fkv__tenant *t = c->tenants[o[j].idx];
            t->share += t->weight * left / wsum;
        }
    }
    if (c->cfg.quotas != FKV_QUOTA_TENANT) return; /* request quotas are evict.c's */
    /* within a tenant: its share split among its open requests */
    double inv_t = isinf(c->cfg.temperature) ? 0.0 : 1.0 / c->cfg.temperature;
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[i]->qsum = 0;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        double d = (double)seq_demand(c, s);
        if (d < 1) d = 1;
        s->quota_pages = s->weight * (inv_t == 1.0 ? d : pow(d, inv_t));
        s->tenant->qsum += s->quota_pages;
    }
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        s->quota_pages = s->tenant->qsum > 0 ? s->tenant->share * s->quota_pages / s->tenant->qsum : 0;
        s->over_quota = (double)s->usage_pages > s->quota_pages;
    }
    c->quota_dirty = 0;
    c->quota_epoch_allocs = 0;
}

/* ---------------------------------------------------------------- API */

fkv_status fkv_cache_set_tenant_weight(fkv_cache *c, uint64_t tenant, double weight)
{
    if (!c) return fkv__fail(FKV_EINVAL, "fkv_cache_set_tenant_weight: cache is NULL");
    if (!(weight > 0) || weight > 1e9)
        return fkv__fail(FKV_EINVAL, "tenant %llu: weight=%g: must be in (0, 1e9]", (unsigned long long)tenant, weight);
    FKV__LOCK(c);
    fkv_status st = FKV_OK;
    fkv__tenant *t = fkv__tenant_get(c, tenant, 1);
    if (!t) st = fkv__fail(FKV_ENOMEM, "out of memory");
    else if (t->weight != weight) t->weight = weight, c->quota_dirty = 1;
    FKV__UNLOCK(c);
    return st;
}

fkv_status fkv_cache_tenant_info(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out)
{
    if (!c || !out) return fkv__fail(FKV_EINVAL, "fkv_cache_tenant_info: cache and out must not be NULL");
    FKV__LOCK(c);
    fkv_status st = FKV_OK;
    fkv__tenant *t = fkv__tenant_get(c, tenant, 0);
    if (!t) {
        st = fkv__fail(FKV_ENOENT, "tenant %llu: never seen by this cache", (unsigned long long)tenant);
    } else {
        fkv__tenant_shares(c);
        memset(out, 0, sizeof *out);
        out->tenant = t->id;
        out->weight = t->weight;
        out->pages = t->pages;
        out->demand_pages = t->demand;
        out->share_pages = t->share;
        out->seqs = t->n_seqs;
        memcpy(out->reclaimed_pages, t->reclaimed, sizeof out->reclaimed_pages);
        out->prefix_query_tokens = t->prefix_queries;
        out->prefix_hit_tokens = t->prefix_hits;
        out->host_bytes = t->host_bytes;
        out->host_share_bytes = fkv__host_share(c, t);
    }
    FKV__UNLOCK(c);
    return st;
}
