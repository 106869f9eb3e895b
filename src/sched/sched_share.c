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
static struct drr_tenant *drr_entry(fkv_sched *s, uint64_t tenant)
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
        const struct drr_tenant *e = drr_entry(t->s, r->tenant);
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
    struct drr_tenant *e = drr_entry(t->s, r->tenant);
    if (e && prefill) e->used += n;
    if (e && t->s->cfg.miss == FKV_MISS_RECOMPUTE) e->recomputed += restored;
}

/* Which running requests a pass of the share visits. */
enum { PICK_DECODING, PICK_TENANT_PREFILL, PICK_UNSERVED };

/* The running requests of kind `kind` (of `tenant` for
 * PICK_TENANT_PREFILL), as they are now: a pass then visits each one still
 * running and not yet served, whatever preemptions did to the running
 * set's order meanwhile.  -1 on allocation failure. */
static long pick_running(sched_step *t, int kind, uint64_t tenant)
{
    fkv_sched *s = t->s;
    if (fkv_grow(&t->pick, &t->cap_pick, s->n_run + 1, sizeof *t->pick)) return -1;
    long n = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        const fkv_req *r = s->run[i];
        int want = kind == PICK_DECODING        ? !fkv__sched_prefill_left(r)
                   : kind == PICK_TENANT_PREFILL ? !r->served && r->tenant == tenant && fkv__sched_prefill_left(r)
                                                 : !r->served;
        if (want) t->pick[n++] = s->run[i];
    }
    return n;
}

/* Serves the picked requests still running and unserved; with `limited`,
 * only while their tenant has allotment left.  0, or -1 when the step
 * failed. */
static int serve_picked(sched_step *t, long n, int limited)
{
    if (n < 0) return fkv__step_failed(t, FKV_ENOMEM), -1;
    for (long i = 0; i < n; i++) {
        fkv_req *r = t->pick[i];
        if (r->state != FKV_REQ_RUNNING || r->served) continue;
        if (limited && !fkv__sched_tenant_left(t, r)) continue;
        if (fkv__sched_serve(t, r) == FAILED) return -1;
    }
    return 0;
}

/* The allotments of this step (sched.h): deficit rounds over the tenants
 * with prefill work, each bounded by its demand. */
static fkv_status drr_plan(fkv_sched *s, uint32_t budget)
{
    for (size_t i = 0; i < s->n_drr; i++) s->drr[i].demand = 0;
    for (size_t i = 0; i < s->n_run + s->n_wait; i++) {
        const fkv_req *r = i < s->n_run ? s->run[i] : s->wait[i - s->n_run];
        if (i < s->n_run && (r->served || !fkv__sched_prefill_left(r))) continue;
        struct drr_tenant *e = drr_entry(s, r->tenant);
        if (!e) return FKV_ENOMEM;
        /* a waiting request's prefix hits are not known before its match:
         * its demand is an upper bound, and what it leaves is passed on */
        e->demand += i < s->n_run || fkv__sched_prefill_left(r) ? fkv__sched_prefill_left(r) : 1;
    }
    size_t n = s->n_drr;
    for (size_t i = 0; i < n; i++)
        if (!s->drr[i].demand) s->drr[i].deficit = 0; /* no work: no credit, no debt */
    uint32_t left = budget;
    /* each round shares what is left by weight; floors and met demands
     * leave a remainder for the next round (a bounded number of rounds:
     * the leftover pass takes what they leave) */
    for (int round = 0; left && round < 64; round++) {
        double w = 0;
        for (size_t i = 0; i < n; i++)
            if (s->drr[i].demand > s->drr[i].alloc) w += s->drr[i].weight;
        if (w <= 0) break;
        double q = (double)left / w;
        for (size_t k = 0; k < n && left; k++) {
            struct drr_tenant *e = &s->drr[(s->drr_first + k) % n];
            if (e->demand <= e->alloc) continue;
            e->deficit += e->weight * q;
            double want = floor(e->deficit);
            uint64_t x = want > 0 ? (uint64_t)want : 0;
            if (x > e->demand - e->alloc) x = e->demand - e->alloc;
            if (x > left) x = left;
            e->alloc += (uint32_t)x;
            e->deficit -= (double)x;
            left -= (uint32_t)x;
            if (e->alloc >= e->demand) e->deficit = 0; /* met: nothing carried */
        }
    }
    return FKV_OK;
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

/* The step under the share: decoders (and their restores) first, then each
 * tenant's prefills and admissions within its allotment, then a leftover
 * pass over what is still unserved.  A failure is in t->status. */
void fkv__sched_drr_serve(sched_step *t)
{
    fkv_sched *s = t->s;
    fkv_batch *b = t->b;
    for (size_t i = 0; i < s->n_drr; i++) s->drr[i].alloc = s->drr[i].extra = s->drr[i].used = s->drr[i].recomputed = 0;
    /* the plan counts a token for each decode; restores may take more */
    uint32_t decodes = 0;
    for (size_t i = 0; i < s->n_run; i++) decodes += !fkv__sched_prefill_left(s->run[i]);
    uint32_t plan = t->budget > decodes ? t->budget - decodes : 0;
    if (drr_plan(s, plan) != FKV_OK) {
        fkv__step_failed(t, FKV_ENOMEM);
        return;
    }
    /* The oldest running request is served first, as in the plain order
     * (within its tenant's allotment when it prefills): no later one can
     * take its memory, so it always progresses and every request ends. */
    if (s->n_run) {
        /* whatever its tenant's debt, the oldest request gets at least its
         * tenant's weighted part of the step (and a token) */
        const fkv_req *o = s->run[0];
        struct drr_tenant *e = fkv__sched_prefill_left(o) ? drr_entry(s, o->tenant) : NULL;
        if (e) {
            double w = 0;
            for (size_t i = 0; i < s->n_drr; i++)
                if (s->drr[i].demand) w += s->drr[i].weight;
            uint32_t floor_share = w > 0 ? (uint32_t)(plan * e->weight / w) : plan;
            if (floor_share < 1) floor_share = 1;
            if (e->alloc < floor_share) e->extra = floor_share - e->alloc;
        }
        if (fkv_grow(&t->pick, &t->cap_pick, 1, sizeof *t->pick)) {
            fkv__step_failed(t, FKV_ENOMEM);
            return;
        }
        t->pick[0] = s->run[0];
        t->drr_limit = 1;
        int rc = serve_picked(t, 1, 0);
        t->drr_limit = 0;
        if (rc) return;
    }
    if (serve_picked(t, pick_running(t, PICK_DECODING, 0), 0)) return;
    size_t nt = s->n_drr, first = s->drr_first;
    t->drr_limit = 1;
    /* every tenant's running prefills, then every tenant's admissions
     * (each must fit: fkv__sched_admission_fits) */
    for (size_t k = 0; k < nt; k++) {
        const struct drr_tenant *e = &s->drr[(first + k) % nt];
        if (!e->alloc && !e->extra) continue;
        if (serve_picked(t, pick_running(t, PICK_TENANT_PREFILL, e->tenant), 1)) return;
    }
    /* what a tenant leaves of its allotment goes to those after it in
     * this step's order, by weight (work conservation without serving a
     * request twice in a step) */
    uint32_t pool = 0;
    for (size_t k = 0; k < nt; k++) {
        struct drr_tenant *e = &s->drr[(first + k) % nt];
        uint64_t tn = e->tenant;
        if (pool) {
            double w = 0;
            for (size_t j = k; j < nt; j++) {
                const struct drr_tenant *f = &s->drr[(first + j) % nt];
                if (f->demand > f->alloc) w += f->weight;
            }
            uint64_t room = e->demand > (uint64_t)e->alloc + e->extra ? e->demand - e->alloc - e->extra : 0;
            uint64_t x = room && w > 0 ? (uint64_t)ceil(pool * e->weight / w) : 0;
            if (x > room) x = room;
            if (x > pool) x = pool;
            e->extra += (uint32_t)x;
            pool -= (uint32_t)x;
        }
        while (!t->stop_admit && t->budget && s->n_run < s->cfg.max_running &&
               !(s->cfg.no_admit_after_preempt && b->preempted && b->n)) {
            size_t wi = 0;
            while (wi < s->n_wait && s->wait[wi]->tenant != tn) wi++;
            if (wi == s->n_wait || !fkv__sched_tenant_left(t, s->wait[wi]) ||
                !fkv__sched_admission_fits(s, s->wait[wi]))
                break;
            fkv__sched_admit_one(t, wi);
            if (t->status) return;
        }
        e = &s->drr[(first + k) % nt]; /* admissions may have moved the table */
        if (e->alloc + e->extra > e->used) pool += e->alloc + e->extra - e->used;
    }
    t->drr_limit = 0;
    s->drr_first = nt ? (first + 1) % nt : 0;
    serve_picked(t, pick_running(t, PICK_UNSERVED, 0), 0);
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
