/* Tenants: the table, fair shares of the pool and of the host, request
 * quotas, and the public queries.
 *
 * Charging rule: a chunk's pages are charged to the tenant of the request
 * that allocated them -- the one that created the chunk, or restored it
 * after an eviction -- for as long as the chunk holds them (running,
 * preempted or cached).  A tenant's pages are the sum of its chunks'
 * v.n_pages (a page a copy-on-write tail shares with its source chunk
 * counts for both).  Why the allocator and not a split by references:
 * docs/ARCHITECTURE.md, Tenants.
 *
 * Fair shares (tenant mode): the pool water-filled over the tenants'
 * demands (src/core/shares.h, rule 1, spare pages spread by weight, so
 * shares always sum to the pool).  The demand of tenant t is the pages it
 * holds plus what its open requests expect to grow into (expected_tokens,
 * or their length, minus their pages).  Within a tenant, its share is
 * split among its open requests by rule 2 (weight * demand^(1/T)), as the
 * pool is in request mode: that split orders the tenant's own requests when
 * it is the one that must give memory back.  With share_guarantee, the
 * demand counts the open requests only (shares.h, rule 4), and of those
 * that are ever pinned only the pinned (running) ones.
 *
 * Host shares: the host's capacity water-filled over the tenants' host
 * bytes (rule 1, spare bytes kept: demote.c ranks tenants by them only
 * when the host is full, and fkv_cache_tenant_info reports them). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/shares.h"

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
        fkv__claim *no = realloc(c->torder, ncap * sizeof *no);
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

static uint64_t seq_demand(const fkv_cache *c, const fkv_seq *s)
{
    uint32_t pt = c->cfg.page_tokens;
    uint32_t toks = s->len > s->expected_tokens ? s->len : s->expected_tokens;
    return (toks + pt - 1) / pt;
}

/* Rule 5 of shares.h: whether t has a part of a static partition. */
static int partakes(const fkv__tenant *t)
{
    return t->id != 0 || t->pages || t->n_seqs;
}

void fkv__tenant_shares(fkv_cache *c)
{
    /* guarantees (shares.h, rule 4): only open requests claim memory, so
     * cached pages are guaranteed within the spare spread by weight */
    int live = c->cfg.share_guarantee;
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[i]->demand = live ? 0 : (double)c->tenants[i]->pages;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        /* guarantees: a request its owner pins while it runs claims only
         * while pinned; preempted (unpinned, kept) it claims nothing, or
         * the kept requests of tenants at their shares would hold memory
         * no running request may take */
        if (live && s->pinned_once && !s->pins) continue;
        uint64_t d = seq_demand(c, s);
        if (live) s->tenant->demand += (double)s->usage_pages;
        if (d > s->usage_pages) s->tenant->demand += (double)(d - s->usage_pages);
    }
    if (c->cfg.share_guarantee == 2) { /* shares.h, rule 5: a static partition */
        double w = 0;
        for (uint32_t i = 0; i < c->n_tenants; i++)
            if (partakes(c->tenants[i])) w += c->tenants[i]->weight;
        for (uint32_t i = 0; i < c->n_tenants; i++) {
            fkv__tenant *t = c->tenants[i];
            t->share = partakes(t) ? t->weight / w * (double)c->n_pages : 0;
        }
    } else {
        fkv__claim *cl = c->torder;
        for (uint32_t i = 0; i < c->n_tenants; i++)
            cl[i] = (fkv__claim){.demand = c->tenants[i]->demand, .weight = c->tenants[i]->weight, .id = i};
        fkv__water_fill(cl, c->n_tenants, (double)c->n_pages, FKV__SPARE_SPREAD);
        for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[cl[i].id]->share = cl[i].share;
    }
    if (c->cfg.quotas == FKV_QUOTA_TENANT) fkv__request_quotas(c, 1); /* request mode: evict.c refreshes them */
}

/* Rule 2 of shares.h: every open request's quota within its group, the
 * whole pool (request mode) or its tenant's share (tenant mode). */
void fkv__request_quotas(fkv_cache *c, int by_tenant)
{
    double inv_t = fkv__quota_exponent(c->cfg.temperature), sum = 0;
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[i]->qsum = 0;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        s->quota_pages = fkv__quota_weight(s->weight, (double)seq_demand(c, s), inv_t);
        if (by_tenant) s->tenant->qsum += s->quota_pages;
        else sum += s->quota_pages;
    }
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        s->quota_pages = by_tenant ? fkv__quota_of(s->tenant->share, s->quota_pages, s->tenant->qsum)
                                   : fkv__quota_of((double)c->n_pages, s->quota_pages, sum);
        s->over_quota = (double)s->usage_pages > s->quota_pages;
    }
    c->quota_dirty = 0;
    c->quota_epoch_allocs = 0;
}

/* A request's usage moved by delta pages: its quota state, and the
 * overrun counter when it crosses its quota growing. */
void fkv__owner_usage(fkv_cache *c, fkv_seq *s, int64_t delta)
{
    s->usage_pages = (uint64_t)((int64_t)s->usage_pages + delta);
    if (!c->cfg.quotas) return;
    int over = (double)s->usage_pages > s->quota_pages;
    if (over && !s->over_quota && delta > 0) c->stats.fairkv_quota_overruns_total[0]++;
    s->over_quota = over;
}

/* A tenant's host demand: the bytes it holds there (offloaded chunks
 * count, though only demoted ones can be taken), plus `need` for `who`,
 * the tenant whose chunk is coming in (so that when the host is full,
 * whoever holds more than its share of what is asked for gives way, the
 * newcomer included). */
double fkv__host_demand(const fkv__tenant *t, const fkv__tenant *who, uint64_t need)
{
    return (double)t->host_bytes + (t == who ? (double)need : 0);
}

/* The tenants' host shares: water-filling (shares.h, rule 1) of their
 * host demands over the host's capacity, spare bytes unassigned. */
void fkv__host_shares(fkv_cache *c, const fkv__tenant *who, uint64_t need)
{
    fkv__claim *cl = c->torder;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        cl[i] = (fkv__claim){.demand = fkv__host_demand(t, who, need), .weight = t->weight, .id = i};
    }
    fkv__water_fill(cl, c->n_tenants, (double)c->cfg.host_capacity_bytes, FKV__SPARE_KEEP);
    for (uint32_t i = 0; i < c->n_tenants; i++) c->tenants[cl[i].id]->host_share = cl[i].share;
}

double fkv__host_share(fkv_cache *c, const fkv__tenant *t)
{
    if (!c->cfg.host_capacity_bytes) return 0;
    fkv__host_shares(c, NULL, 0);
    return t->host_share;
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

/* fkv_cache_tenant_info (fresh = 1: shares refreshed first) and
 * fkv_cache_tenant_peek (0: the shares of the last refresh). */
static fkv_status tenant_info(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out, int fresh, const char *fn)
{
    if (!c || !out) return fkv__fail(FKV_EINVAL, "%s: cache and out must not be NULL", fn);
    FKV__LOCK(c);
    fkv_status st = FKV_OK;
    fkv__tenant *t = fkv__tenant_get(c, tenant, 0);
    if (!t) {
        st = fkv__fail(FKV_ENOENT, "tenant %llu: never seen by this cache", (unsigned long long)tenant);
    } else {
        if (fresh) fkv__tenant_shares(c);
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
        out->host_share_bytes = fresh ? fkv__host_share(c, t) : c->cfg.host_capacity_bytes ? t->host_share : 0;
    }
    FKV__UNLOCK(c);
    return st;
}

fkv_status fkv_cache_tenant_info(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out)
{
    return tenant_info(c, tenant, out, 1, "fkv_cache_tenant_info");
}

fkv_status fkv_cache_tenant_peek(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out)
{
    return tenant_info(c, tenant, out, 0, "fkv_cache_tenant_peek");
}
