/* Who pays when memory runs out (sched.h, "Preemption" and "Fair
 * reclaim"): the configured reclaim actions on the fair victim, then a
 * preemption by the victim rule; a request alone and still without memory
 * is larger than the cache and is rejected. */
#include "sched/sched_internal.h"
#include "core/shares.h"
#include "util/array.h"

#include <string.h>

/* Tokens of r known so far, all prefilled again when its sequence is
 * freed: the target (the prompt, then each emitted token), or one past the
 * sequence when it already reaches the target (a request started from a
 * forked sequence: the fork gave it the token at that position). */
static uint32_t known_tokens(const fkv_req *r) { return r->computed >= r->target ? r->computed + 1 : r->target; }

void fkv__sched_forget(fkv_sched *s, fkv_req *r)
{
    uint32_t redo = known_tokens(r);
    fkv__sched_release_seq(s, r);
    r->computed = 0;
    r->target = redo;
}

void fkv__sched_reject(fkv_sched *s, fkv_req *r)
{
    if (r->seq) fkv_seq_unpin(r->seq);
    fkv__sched_release_seq(s, r);
    r->state = FKV_REQ_REJECTED;
    s->client_live[r->client]--;
    s->rejections++;
}

/* Takes r out of the running set and back to the waiting queue's front. */
fkv_status fkv__sched_preempt(fkv_sched *s, fkv_req *r)
{
    size_t i = 0;
    while (i < s->n_run && s->run[i] != r) i++;
    if (i == s->n_run)
        return fkv__sched_fail(s, FKV_ESTATE, "preempt: request %llu not running", (unsigned long long)r->id);
    /* the cache counts its pages as reclaimed by preemption, for its tenant */
    if (r->seq) fkv_seq_count_preempt(r->seq, NULL);
    if (s->step.fair_choice == r) {
        r->fair_picks++;
        s->step.fair_choice = NULL;
    }
    memmove(s->run + i, s->run + i + 1, (s->n_run - i - 1) * sizeof *s->run);
    s->n_run--;
    /* state first: unpinning hands the chunks to the policy, which may ask
     * (Belady) what the request will do next */
    r->state = FKV_REQ_WAITING;
    r->preemptions++;
    r->preempt_order = ++s->preempt_counter;
    s->preemptions++;
    if (r->seq) fkv_seq_unpin(r->seq);
    if (s->cfg.on_preempt == FKV_PREEMPT_FREE && r->seq) {
        /* everything known so far is prefilled again on resume, less what
         * the prefix cache still holds */
        r->redo_until = r->computed > r->redo_until ? r->computed : r->redo_until;
        fkv__sched_forget(s, r);
    }
    return fkv__sched_wait_insert(s, r, 0);
}

/* How far a tenant is over its fair share, in pages (memoized over one
 * choice: n entries of t->over are valid).  A tenant the cache has not
 * seen holds nothing: 0. */
static double tenant_over(sched_step *t, uint64_t tenant, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (t->over[i].tenant == tenant) return t->over[i].over;
    fkv_tenant_info ti;
    double over = 0;
    if (fkv_cache_tenant_info(t->s->cache, tenant, &ti) == FKV_OK) over = (double)ti.pages - ti.share_pages;
    if (!fkv_grow(&t->over, &t->cap_over, *n + 1, sizeof *t->over)) t->over[(*n)++] = (struct tenant_over){tenant, over};
    return over;
}

/* admit_reclaim (sched.h): q may not pay for `for_r`'s memory, being of
 * another tenant within its share (for_r NULL: anyone may). */
static int spared(sched_step *t, const fkv_req *q, const fkv_req *for_r)
{
    return for_r && q->tenant != for_r->tenant && fkv__sched_within_share(t, q->tenant);
}

/* The victim by `rule` among running requests not yet served in this
 * step, other than `except` (may be NULL) and those spared for `for_r`
 * (may be NULL), or NULL.  *fair is set when the fair rule chose it
 * (sched.h: exempt requests are not its candidates, and with no candidate
 * left the last-started one goes). */
static fkv_req *pick_victim(sched_step *t, fkv_victim_rule rule, const fkv_req *except, const fkv_req *for_r,
                            int *fair)
{
    fkv_sched *s = t->s;
    fkv_req *best = NULL;
    *fair = 0;
    if (rule == FKV_VICTIM_FAIR && s->cache) {
        size_t n_over = 0;
        fkv__over_rank rank = {0}; /* the core's ranking: furthest over, then the latest admitted */
        for (size_t i = 0; i < s->n_run; i++) {
            fkv_req *r = s->run[i];
            if (r->served || r == except || r->fair_picks >= s->cfg.fair_max_victim || spared(t, r, for_r)) continue;
            if (fkv__over_offer(&rank, tenant_over(t, r->tenant, &n_over), 0, r->admit_order)) best = r;
        }
        if (best) {
            *fair = 1;
            return best;
        }
    }
    for (size_t i = 0; i < s->n_run; i++) {
        fkv_req *r = s->run[i];
        if (r->served || r == except || spared(t, r, for_r)) continue;
        if (!best) {
            best = r;
            continue;
        }
        if (rule != FKV_VICTIM_FEWEST_OUTPUT) {
            if (r->admit_order > best->admit_order) best = r;
        } else {
            if (r->generated < best->generated ||
                (r->generated == best->generated &&
                 (r->prompt > best->prompt ||
                  (r->prompt == best->prompt && r->admit_order > best->admit_order))))
                best = r;
        }
    }
    return best;
}

/* sched.h, "Within share": the weighted max-min shares (src/core/shares.h)
 * of the pool over the demand of the tenants with running or waiting
 * requests: the cache's demand_pages (held, and what open sequences
 * expect), plus prompt + output of waiting requests without a sequence
 * (which the cache does not know yet). */
void fkv__sched_shares_start(sched_step *t)
{
    fkv_sched *s = t->s;
    t->n_shares = 0;
    if ((!s->cfg.admit_reclaim && !(s->cfg.step_bound > 0)) || !s->cache) return;
    fkv_cache_info ci;
    if (fkv_cache_get_info(s->cache, &ci) != FKV_OK || !ci.page_tokens) return;
    int refreshed = 0;
    for (size_t i = 0; i < s->n_run + s->n_wait; i++) {
        const fkv_req *r = i < s->n_run ? s->run[i] : s->wait[i - s->n_run];
        size_t k = 0;
        while (k < t->n_shares && t->shares[k].tenant != r->tenant) k++;
        if (k == t->n_shares) {
            if (fkv_grow(&t->shares, &t->cap_shares, k + 1, sizeof *t->shares)) {
                fkv__step_failed(t, FKV_ENOMEM);
                return;
            }
            /* one refresh of the cache's shares per step, then O(1) reads:
             * a server's step must not cost tenants x open requests */
            fkv_tenant_info ti;
            int seen = (refreshed ? fkv_cache_tenant_peek(s->cache, r->tenant, &ti)
                                  : fkv_cache_tenant_info(s->cache, r->tenant, &ti)) == FKV_OK;
            refreshed |= seen;
            t->shares[t->n_shares++] =
                (struct tenant_share){r->tenant, seen ? ti.demand_pages : 0, seen && ti.weight > 0 ? ti.weight : 1, 0};
        }
        if (!r->seq) t->shares[k].demand += (double)((r->prompt + r->output + ci.page_tokens - 1) / ci.page_tokens);
    }
    if (fkv_grow(&t->claims, &t->cap_claims, t->n_shares ? t->n_shares : 1, sizeof *t->claims)) {
        fkv__step_failed(t, FKV_ENOMEM);
        return;
    }
    for (size_t k = 0; k < t->n_shares; k++)
        t->claims[k] = (fkv__claim){.demand = t->shares[k].demand, .weight = t->shares[k].weight, .id = (uint32_t)k};
    fkv__water_fill(t->claims, (uint32_t)t->n_shares, (double)ci.n_pages, FKV__SPARE_SPREAD);
    for (size_t k = 0; k < t->n_shares; k++) t->shares[t->claims[k].id].share = t->claims[k].share;
}

/* Pages a tenant holds now beyond its share of this step (<= 0: within). */
static double share_over(sched_step *t, uint64_t tenant)
{
    size_t k = 0;
    while (k < t->n_shares && t->shares[k].tenant != tenant) k++;
    if (k == t->n_shares) return 0;
    fkv_tenant_info ti; /* its pages now; nothing else is read */
    if (fkv_cache_tenant_peek(t->s->cache, tenant, &ti) != FKV_OK) return -t->shares[k].share;
    return (double)ti.pages - t->shares[k].share;
}

int fkv__sched_within_share(sched_step *t, uint64_t tenant) { return share_over(t, tenant) <= 0; }

/* admit_reclaim (sched.h, "Reclaiming admission"): the latest admitted
 * unserved running request, other than r, of the tenant furthest over its
 * share (over > 0), requests the fair rule has not exempted first; NULL
 * when no other over-share request is unserved.  *fair: chosen among the
 * non-exempt ones (it counts toward exemption where the fair rule's would). */
static fkv_req *guard_victim(sched_step *t, const fkv_req *r, int *fair)
{
    fkv_sched *s = t->s;
    *fair = 0;
    if (!s->cfg.admit_reclaim || !s->cache) return NULL;
    for (int pass = 0; pass < 2; pass++) {
        fkv_req *best = NULL;
        fkv__over_rank rank = {0};
        for (size_t i = 0; i < s->n_run; i++) {
            fkv_req *q = s->run[i];
            if (q->served || q == r || (!pass && q->fair_picks >= s->cfg.fair_max_victim)) continue;
            double over = share_over(t, q->tenant);
            if (over > 0 && fkv__over_offer(&rank, over, 0, q->admit_order)) best = q;
        }
        if (best) {
            *fair = !pass;
            return best;
        }
    }
    return NULL;
}

/* The victim by `rule` for r's memory (pick_victim's candidates, other
 * than `except`).  Under admit_reclaim they spare other tenants within
 * their share (sched.h); only the oldest running request, which must
 * progress, takes from them, and only when no other candidate is left. */
static fkv_req *victim_for(sched_step *t, fkv_victim_rule rule, const fkv_req *except, const fkv_req *r, int *fair)
{
    fkv_sched *s = t->s;
    int guard = s->cfg.admit_reclaim && s->cache;
    fkv_req *v = pick_victim(t, rule, except, guard ? r : NULL, fair);
    if (!v && guard && s->n_run && s->run[0] == r) v = pick_victim(t, rule, except, NULL, fair);
    return v;
}

/* Fair reclaim (sched.h): the configured actions in order on the fair
 * victim among the others; 1 when one of them freed pages.  When r's own
 * tenant is further over its share than the victim's, r gives from
 * itself instead, and only by the actions that leave its K/V readable in
 * this step (quantize, drop: its restores for the step are done). */
static int reclaim_some(sched_step *t, fkv_req *r, uint32_t need)
{
    fkv_sched *s = t->s;
    fkv_reclaim_args args = {s->cfg.reclaim_sink_tokens, s->cfg.reclaim_window_tokens};
    for (uint32_t k = 0; k < s->cfg.n_reclaim; k++) {
        int fair;
        fkv_req *v = guard_victim(t, r, &fair);
        if (!v) v = victim_for(t, FKV_VICTIM_FAIR, r, r, &fair); /* whatever the preemption rule */
        size_t n_over = 0;
        if (r->seq && (!v || tenant_over(t, v->tenant, &n_over) < tenant_over(t, r->tenant, &n_over)))
            v = r, fair = 0; /* paying for itself is not being victimized: no exemption count */
        if (!v) return 0;
        if (!v->seq) continue;
        fkv_reclaim_action a = s->cfg.reclaim[k];
        if (v == r && a != FKV_RECLAIM_QUANTIZE8 && a != FKV_RECLAIM_QUANTIZE4 && a != FKV_RECLAIM_DROP) continue;
        uint32_t freed = 0;
        fkv_status rs = fkv_seq_reclaim(v->seq, s->cfg.reclaim[k], &args, need, &freed);
        if (rs != FKV_OK && rs != FKV_EFULL) {
            fkv__step_failed(t, fkv__sched_fail(s, rs, "request %llu: fkv_seq_reclaim %s: %s",
                                                (unsigned long long)v->id, fkv_reclaim_name(s->cfg.reclaim[k]),
                                                fkv_last_error()));
            return 0;
        }
        if (freed) {
            /* only what costs it progress counts toward its exemption:
             * recompute or reload (evict, offload), not a coarser copy */
            v->fair_picks += fair && (a == FKV_RECLAIM_EVICT || a == FKV_RECLAIM_OFFLOAD);
            v->reclaims++;
            return 1;
        }
    }
    return 0;
}

/* On a full cache that needs `need` more pages: reclaim from a victim or
 * preempt one other than r and report 0, or report 1 when r itself must
 * go (it is the only or the chosen victim).  A failure is in t->status. */
int fkv__sched_make_room(sched_step *t, fkv_req *r, uint32_t need)
{
    fkv_sched *s = t->s;
    if (s->cfg.n_reclaim && reclaim_some(t, r, need)) return 0;
    if (t->status) return 0;
    int fair;
    fkv_req *v = guard_victim(t, r, &fair);
    if (v) fair = fair && s->cfg.victim == FKV_VICTIM_FAIR;
    else v = victim_for(t, s->cfg.victim, NULL, r, &fair);
    t->fair_choice = fair ? v : NULL;
    if (!v || v == r) return 1;
    fkv_status st = fkv__sched_preempt(s, v);
    t->b->preempted++;
    if (st) fkv__step_failed(t, st);
    return 0;
}

/* r cannot get memory even after preemption of every other candidate. */
int fkv__sched_give_up(sched_step *t, fkv_req *r)
{
    fkv_sched *s = t->s;
    if (t->admitting) return NOROOM;
    if (s->n_run == 1) {
        /* alone and pinned: everything else is evictable, so r is larger
         * than the whole cache */
        s->n_run = 0;
        fkv__sched_reject(s, r);
        return GONE;
    }
    fkv_status st = fkv__sched_preempt(s, r);
    t->b->preempted++;
    return st ? fkv__step_failed(t, st) : GONE;
}
