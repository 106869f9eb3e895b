/* The step under the DRR share (sched.h, "Step share by weighted deficit
 * round robin"): the plan of allotments, then the passes that serve and
 * admit by tenant within them.  The share's accounting (entries, what is
 * left, the charge, the settling) is in sched_share.c. */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <math.h>

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
        struct drr_tenant *e = fkv__sched_drr_entry(s, r->tenant);
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

/* The step under the share: decoders (and their restores) first, then each
 * tenant's prefills and admissions within its allotment, then a leftover
 * pass over what is still unserved.  A failure is in t->status. */
void fkv__sched_drr_serve(sched_step *t)
{
    fkv_sched *s = t->s;
    fkv_batch *b = t->b;
    /* alloc, extra, used, recomputed: zeroed by the step's frame (the
     * within-share pass may have charged some) */
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
        struct drr_tenant *e = fkv__sched_prefill_left(o) ? fkv__sched_drr_entry(s, o->tenant) : NULL;
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
    /* admit_reclaim: within-share tenants next, within their allotments */
    t->drr_limit = 1;
    fkv__sched_guard_first(t);
    t->drr_limit = 0;
    if (t->status) return;
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
