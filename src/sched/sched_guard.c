/* Within-share tenants first (sched.h, "Reclaiming admission") and the
 * step-time bound (sched.h, "Step-time bound").  Both read "within share"
 * from this step's shares (fkv__sched_within_share, sched_victim.c). */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <string.h>

/* ------------------------------------------------------- step-time bound */

/* The probe batch: one decode item per running decode, then (n > 0) one
 * prompt item of n tokens at context ctx. */
static fkv_status probe_fill(sched_step *t, const fkv_req *w, uint32_t ctx, uint32_t n)
{
    fkv_sched *s = t->s;
    fkv_batch *p = &t->probe;
    p->n = p->n_ranges = 0;
    p->tokens = 0;
    p->reload_tokens = p->host_tokens = p->remote_tokens = 0;
    p->remote_fetches = p->preempted = 0;
    p->wake_ns = 0;
    if (fkv_grow(&p->items, &p->cap, s->n_run + 1, sizeof *p->items)) return FKV_ENOMEM;
    for (size_t i = 0; i < s->n_run; i++) {
        fkv_req *r = s->run[i];
        if (fkv__sched_prefill_left(r)) continue;
        p->items[p->n++] = (fkv_batch_item){.r = r, .ctx = r->computed, .n_new = 1, .kind = FKV_ITEM_DECODE, .emits = 1};
        p->tokens++;
    }
    if (n) {
        p->items[p->n++] = (fkv_batch_item){.r = (fkv_req *)w, .ctx = ctx, .n_new = n, .kind = FKV_ITEM_PROMPT};
        p->tokens += n;
    }
    return FKV_OK;
}

static int64_t probe_cost(const fkv_sched *s, const fkv_batch *p)
{
    return s->cfg.step_cost ? s->cfg.step_cost(s->cfg.cost_ctx, p) : (int64_t)p->tokens;
}

/* Caps t->budget by the bound (sched.h); a failure is in t->status. */
void fkv__sched_step_bound(sched_step *t)
{
    fkv_sched *s = t->s;
    if (!(s->cfg.step_bound > 0) || !s->cfg.chunked_prefill || s->cfg.mode != FKV_SCHED_CONTINUOUS) return;
    /* the within-share request waiting for its first token with the least
     * prefill left */
    const fkv_req *w = NULL;
    uint32_t p = 0;
    for (size_t i = 0; i < s->n_run + s->n_wait; i++) {
        const fkv_req *r = i < s->n_run ? s->run[i] : s->wait[i - s->n_run];
        uint32_t left = fkv__sched_prefill_left(r);
        if (r->generated || !left || (w && left >= p)) continue;
        if (!fkv__sched_within_share(t, r->tenant)) continue;
        w = r;
        p = left;
    }
    if (!w) return;
    uint32_t budget = t->budget, d = 0;
    for (size_t i = 0; i < s->n_run; i++) d += !fkv__sched_prefill_left(s->run[i]);
    if (p > budget) p = budget;
    if ((uint64_t)d + p >= budget) return;
    if (probe_fill(t, w, w->computed, p)) {
        fkv__step_failed(t, FKV_ENOMEM);
        return;
    }
    double limit = s->cfg.step_bound * (double)probe_cost(s, &t->probe);
    /* the largest B in [d + p, budget] with cost(d decodes + B - d prompt
     * tokens) <= limit; B = d + p always qualifies (k >= 1 in practice; for
     * k < 1 the request's own step is still allowed) */
    uint32_t lo = d + p, hi = budget;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (probe_fill(t, w, 0, mid - d)) {
            fkv__step_failed(t, FKV_ENOMEM);
            return;
        }
        if ((double)probe_cost(s, &t->probe) <= limit) lo = mid;
        else hi = mid - 1;
    }
    t->held = t->budget - lo; /* restores may still use them (sched.h) */
    t->budget = lo;
    t->bound_w = w;
    t->bound_reserve = p;
}

/* ------------------------------------------------ within-share tenants first */

/* Unserved running decodes other than r: a token each is held back. */
static uint32_t decodes_left(const fkv_sched *s, const fkv_req *r)
{
    uint32_t d = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        const fkv_req *q = s->run[i];
        d += q != r && !q->served && !fkv__sched_prefill_left(q);
    }
    return d;
}

/* Serves running r with `hold` tokens of the budget held back. */
static int serve_holding(sched_step *t, fkv_req *r, uint32_t hold)
{
    if (hold > t->budget) hold = t->budget;
    t->budget -= hold;
    int rc = fkv__sched_serve(t, r);
    t->budget += hold;
    return rc;
}

/* The next waiting request of a within-share tenant in admission order
 * (FCFS: the queue's; VTC: the smallest counter), or n_wait. */
static size_t next_within(sched_step *t)
{
    fkv_sched *s = t->s;
    size_t best = s->n_wait;
    for (size_t i = 0; i < s->n_wait; i++) {
        const fkv_req *r = s->wait[i];
        if (!fkv__sched_may_prefill(t, r) || !fkv__sched_within_share(t, r->tenant)) continue;
        if (t->drr_limit && !fkv__sched_tenant_left(t, r)) continue; /* its DRR allotment is used */
        if (best == s->n_wait) best = i;
        if (s->cfg.admission == FKV_ADMIT_FCFS) break;
        if (s->vtc[r->client] < s->vtc[s->wait[best]->client]) best = i;
    }
    return best;
}

/* Phases (1)-(3) of sched.h's "Reclaiming admission", when some running
 * request's tenant is over its share.  A failure is in t->status. */
void fkv__sched_guard_first(sched_step *t)
{
    fkv_sched *s = t->s;
    if (!s->cfg.admit_reclaim || !s->cache || s->cfg.mode != FKV_SCHED_CONTINUOUS || !s->n_run) return;
    int over = 0;
    for (size_t i = 0; i < s->n_run && !over; i++) over = !fkv__sched_within_share(t, s->run[i]->tenant);
    if (!over) return;
    /* (1) the oldest: it always progresses, so every request ends */
    fkv_req *o = s->run[0];
    if (!o->served && fkv__sched_serve(t, o) == FAILED) return;
    /* (2) running requests of within-share tenants, oldest first; a
     * request that leaves the running set moves the ones after it */
    for (size_t i = 0; i < s->n_run && !t->status;) {
        fkv_req *r = s->run[i];
        if (r->served || !fkv__sched_within_share(t, r->tenant)) {
            i++;
            continue;
        }
        if (t->drr_limit && !fkv__sched_tenant_left(t, r)) {
            i++;
            continue;
        }
        size_t before = s->n_run;
        if (serve_holding(t, r, decodes_left(s, r)) == FAILED) return;
        i = s->n_run == before ? i + 1 : 0; /* a preemption moved others: again (served ones are skipped) */
    }
    /* (3) their waiting requests, taking memory from over-share tenants */
    if (s->cfg.no_admit_after_preempt && t->b->preempted && t->b->n) return;
    while (!t->stop_admit && !t->status && s->n_wait && s->n_run < s->cfg.max_running) {
        uint32_t hold = decodes_left(s, NULL);
        if (t->budget <= hold) break;
        size_t wi = next_within(t);
        if (wi == s->n_wait) break;
        t->budget -= hold;
        fkv__sched_admit_one(t, wi);
        t->budget += hold;
    }
}
