/* How tenants share a step (sched.h, "Tenant step share" and "Step share
 * by weighted deficit round robin"): a cap on each tenant's prefill
 * tokens while two tenants have prefill left, or allotments planned by
 * deficit rounds, served by tenant, settled after the step. */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <math.h>

/* The tenant step share's counter of r's tenant in this step (an entry is
 * added on first use); NULL on allocation failure. */
static uint32_t *tenant_used(sched_step *t, uint64_t tenant)
{
    for (size_t i = 0; i < t->n_use; i++)
        if (t->use[i].tenant == tenant) return &t->use[i].used;
    if (fkv_grow(&t->use, &t->cap_use, t->n_use + 1, sizeof *t->use)) return NULL;
    t->use[t->n_use] = (struct tenant_use){tenant, 0};
    return &t->use[t->n_use++].used;
}

void fkv__sched_tenant_used(sched_step *t, const fkv_req *r, uint32_t n)
{
    if (t->tenant_cap == UINT32_MAX) return;
    uint32_t *u = tenant_used(t, r->tenant);
    if (u) *u += n;
}

/* The step share's entry of a tenant, created when first seen; NULL on
 * allocation failure.  Pointers die with the next creation. */
struct drr_tenant *fkv__sched_drr_entry(fkv_sched *s, uint64_t tenant)
{
    for (size_t i = 0; i < s->n_drr; i++)
        if (s->drr[i].tenant == tenant) return &s->drr[i];
    if (fkv_grow(&s->drr, &s->cap_drr, s->n_drr + 1, sizeof *s->drr)) return NULL;
    double w = 1;
    fkv_tenant_info ti;
    if (s->cache && fkv_cache_tenant_info(s->cache, tenant, &ti) == FKV_OK) w = ti.weight;
    s->drr[s->n_drr] = (struct drr_tenant){.tenant = tenant, .weight = w};
    return &s->drr[s->n_drr++];
}

fkv_status fkv_sched_drr_info(const fkv_sched *s, uint64_t tenant, double *deficit, uint32_t *allotted)
{
    for (size_t i = 0; i < s->n_drr; i++)
        if (s->drr[i].tenant == tenant) {
            *deficit = s->drr[i].deficit;
            *allotted = s->drr[i].alloc;
            return FKV_OK;
        }
    return FKV_ENOENT;
}

uint32_t fkv__sched_tenant_left(sched_step *t, const fkv_req *r)
{
    if (t->drr_limit) {
        if (!fkv__sched_prefill_left(r)) return UINT32_MAX; /* decodes are not limited */
        const struct drr_tenant *e = fkv__sched_drr_entry(t->s, r->tenant);
        return e && e->alloc + e->extra > e->used ? e->alloc + e->extra - e->used : 0;
    }
    if (t->tenant_cap == UINT32_MAX) return UINT32_MAX;
    const uint32_t *u = tenant_used(t, r->tenant);
    return !u ? 0 : *u < t->tenant_cap ? t->tenant_cap - *u : 0;
}

/* At the start of a step: the tenant share applies when requests of two
 * tenants or more have prefill left (sched.h). */
void fkv__sched_share_start(sched_step *t)
{
    fkv_sched *s = t->s;
    t->n_use = 0;
    t->tenant_cap = UINT32_MAX;
    if (s->cfg.tenant_step_share >= 1 || !s->cfg.chunked_prefill || t->drr_on) return;
    const fkv_req *first = NULL;
    int two = 0;
    for (size_t i = 0; i < s->n_wait + s->n_run && !two; i++) {
        const fkv_req *r = i < s->n_wait ? s->wait[i] : s->run[i - s->n_wait];
        if (r->computed >= r->target) continue; /* decoding, or only restores left */
        if (!first) first = r;
        else two = r->tenant != first->tenant;
    }
    if (!two) return;
    double cap = s->cfg.tenant_step_share * s->cfg.max_batch_tokens;
    t->tenant_cap = cap < 1 ? 1 : (uint32_t)cap;
}

/* A waiting request whose tenant has used its step share would only take
 * a running slot and memory this step. */
int fkv__sched_may_prefill(sched_step *t, const fkv_req *r)
{
    return t->tenant_cap == UINT32_MAX || t->s->cfg.mode != FKV_SCHED_CONTINUOUS || r->computed >= r->target ||
           fkv__sched_tenant_left(t, r) > 0;
}

/* What the step share charges r's tenant for its item (sched.h, "Settle"). */
void fkv__sched_drr_charge(sched_step *t, const fkv_req *r, int prefill, uint32_t n, uint32_t restored)
{
    struct drr_tenant *e = fkv__sched_drr_entry(t->s, r->tenant);
    if (e && prefill) e->used += n;
    if (e && t->s->cfg.miss == FKV_MISS_RECOMPUTE) e->recomputed += restored;
}

/* Under the share, a tenant's admission must fit its prompt beside what
 * the running requests hold and will still prefill, without taking
 * anyone's memory (pages of idle cached chunks count as free); otherwise
 * every tenant would start a prompt at once and they would push each
 * other out.  Without a cache, or with nothing running (a prompt larger
 * than the cache is then tried, and rejected, as in the plain order),
 * always. */
int fkv__sched_admission_fits(fkv_sched *s, const fkv_req *r)
{
    if (!s->cache || !s->n_run) return 1;
    fkv_cache_info ci;
    if (fkv_cache_get_info(s->cache, &ci) != FKV_OK || !ci.page_tokens) return 1;
    uint64_t pt = ci.page_tokens, held = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        const fkv_req *q = s->run[i];
        held += q->seq ? fkv_seq_pages(q->seq) : 0;
        held += (fkv__sched_prefill_left(q) + pt - 1) / pt;
    }
    uint64_t need = (r->target > r->computed ? r->target - r->computed : 1) / pt + 1;
    return held + need <= ci.n_pages;
}

/* After the step: each tenant pays what it computed (sched.h); one with
 * no prefill work left keeps no credit. */
void fkv__sched_drr_settle(fkv_sched *s)
{
    for (size_t i = 0; i < s->n_drr; i++) {
        struct drr_tenant *e = &s->drr[i];
        /* an allotment left unused is not credited (the tenant could not
         * use it: prefix hits, memory, max_running); tokens beyond it,
         * taken from others' leftovers, and recomputed ones are charged;
         * the debt is bounded by one step's budget */
        double over = e->used > e->alloc ? (double)(e->used - e->alloc) : 0;
        e->deficit -= over + (double)e->recomputed;
        if (e->deficit < -(double)s->cfg.max_batch_tokens) e->deficit = -(double)s->cfg.max_batch_tokens;
        e->demand = 0; /* from here: work left after the step */
    }
    for (size_t i = 0; i < s->n_run + s->n_wait; i++) {
        const fkv_req *r = i < s->n_run ? s->run[i] : s->wait[i - s->n_run];
        if (i < s->n_run && !fkv__sched_prefill_left(r)) continue;
        for (size_t k = 0; k < s->n_drr; k++)
            if (s->drr[k].tenant == r->tenant) s->drr[k].demand = 1;
    }
    for (size_t i = 0; i < s->n_drr; i++)
        if (!s->drr[i].demand && s->drr[i].deficit > 0) s->drr[i].deficit = 0;
}
