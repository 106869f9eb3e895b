/* Who starts (sched.h, "Step rule", "VTC", "No admission after a
 * preemption", "Dynamic batching"): waiting requests in FCFS or VTC order
 * while the budget, max_running and the cache allow; a request's sequence
 * starts with the prefix match across tiers, then what the tier below
 * holds (an engine's imported pages, the simulator's remote store).  An
 * admission that finds no memory goes back to its place in the queue, or
 * is rejected when nothing else holds memory. */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <string.h>

/* Index of the next waiting request to admit, or n_wait for none. */
static size_t pick_waiting(sched_step *t)
{
    fkv_sched *s = t->s;
    size_t best = s->n_wait;
    for (size_t i = 0; i < s->n_wait; i++) {
        if (!fkv__sched_may_prefill(t, s->wait[i])) continue;
        if (best == s->n_wait) best = i;
        if (s->cfg.admission == FKV_ADMIT_FCFS) break;
        if (s->vtc[s->wait[i]->client] < s->vtc[s->wait[best]->client]) best = i;
    }
    return best;
}

/* After the cache's match: the tokens the tier below provides from
 * r->computed on (sched.h, fkv_sched_config.below). */
static fkv_status load_below(sched_step *t, fkv_req *r, uint32_t limit, uint32_t *got)
{
    fkv_sched *s = t->s;
    *got = 0;
    if (!s->cfg.below || r->computed >= limit) return FKV_OK;
    uint64_t fetched = 0;
    int appended = 0;
    uint32_t from = r->computed, n = s->cfg.below(s->cfg.below_ctx, r, limit, &fetched, &appended);
    if (appended) {
        if (n > limit - from || fkv_seq_len(r->seq) != from + n)
            return fkv__sched_fail(s, FKV_ESTATE, "request %llu: the tier below says %u tokens after %u (limit %u), sequence has %u",
                                   (unsigned long long)r->id, n, from, limit, fkv_seq_len(r->seq));
    } else {
        if (n > limit - from) n = limit - from;
        if (!n) return FKV_OK;
        const int32_t *tok = fkv__sched_tokens(s, r, from, n);
        fkv_status st = fkv_seq_append(r->seq, tok, n, NULL);
        if (st == FKV_EFULL) return FKV_OK;
        if (st)
            return fkv__sched_fail(s, st, "request %llu: load from the tier below: fkv_seq_append: %s",
                                   (unsigned long long)r->id, fkv_last_error());
    }
    if (!n) return FKV_OK;
    r->computed += n;
    s->live_tokens += n;
    t->b->remote_tokens += fetched;
    t->b->remote_fetches++;
    *got = n;
    return FKV_OK;
}

/* Starts (or restarts after a freeing preemption) r's sequence. */
static fkv_status open_seq(sched_step *t, fkv_req *r)
{
    fkv_sched *s = t->s;
    if (!s->cache || r->seq) return FKV_OK;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = r->id;
    p.client_id = r->client;
    p.expected_tokens = r->prompt + r->output;
    p.tenant = r->tenant;
    p.cache_salt = r->cache_salt;
    /* the simulator's shared_tokens are a per-client system prompt: public
     * unless the configuration keeps prefixes within the tenant */
    if (s->cfg.publish_shared) p.shared_prefix_tokens = r->shared_tokens < r->prompt ? r->shared_tokens : r->prompt;
    fkv_status st = s->cfg.open_seq ? s->cfg.open_seq(s->cfg.open_ctx, r, s->cache, &p, &r->seq)
                                    : fkv_seq_create(s->cache, &p, &r->seq);
    if (st)
        return fkv__sched_fail(s, st, "request %llu: %s: %s", (unsigned long long)r->id,
                               s->cfg.open_seq ? "open_seq" : "fkv_seq_create", fkv_last_error());
    /* keep one token to compute: the step that finishes the prefill emits */
    uint32_t matched = 0, host = 0, limit = r->target ? r->target - 1 : 0;
    const int32_t *tok = fkv__sched_tokens(s, r, 0, limit);
    if (limit && (tok || !s->cfg.pass_tokens)) {
        /* across tiers: a prefix demoted to the host tier comes attached as
         * offloaded chunks, which the restores reload and price as
         * host_tokens before the step reads them (a device-only match
         * when the cache demotes nothing) */
        fkv_match_info mi;
        st = fkv_seq_match_prefix(r->seq, tok, limit, limit, FKV_MATCH_ALL_TIERS, &mi);
        if (st)
            return fkv__sched_fail(s, st, "request %llu: fkv_seq_match_prefix: %s", (unsigned long long)r->id,
                                   fkv_last_error());
        matched = mi.device_tokens + mi.host_tokens;
        host = mi.host_tokens;
    }
    r->computed = matched;
    s->live_tokens += matched;
    uint32_t remote = 0;
    if (limit && (tok || !s->cfg.pass_tokens) && (st = load_below(t, r, limit, &remote)) != FKV_OK) return st;
    if (r->preemptions == 0) {
        r->matched = matched + remote;
        r->matched_host = host;
        r->matched_remote = remote;
    }
    return FKV_OK;
}

/* Admits s->wait[wi] and gives it its share of the step; sets
 * t->stop_admit when admission should stop in this step (no memory). */
void fkv__sched_admit_one(sched_step *t, size_t wi)
{
    fkv_sched *s = t->s;
    fkv_req *r = s->wait[wi];
    fkv_status st = open_seq(t, r);
    if (st != FKV_OK || fkv_grow(&s->run, &s->cap_run, s->n_run + 1, sizeof *s->run)) {
        fkv__step_failed(t, st ? st : FKV_ENOMEM);
        t->stop_admit = 1;
        return;
    }
    memmove(s->wait + wi, s->wait + wi + 1, (s->n_wait - wi - 1) * sizeof *s->wait);
    s->n_wait--;
    s->run[s->n_run++] = r;
    r->state = FKV_REQ_RUNNING;
    r->served = 0;
    uint64_t prev_order = r->admit_order;
    r->admit_order = ++s->admit_counter;
    if (r->seq) fkv_seq_pin(r->seq);
    t->admitting = 1;
    int rc = fkv__sched_serve(t, r);
    t->admitting = 0;
    if (rc == FAILED) {
        t->stop_admit = 1;
        return;
    }
    if (rc == NOROOM) {
        /* out of the running set again (it is its last entry), as it was */
        s->n_run--;
        r->admit_order = prev_order;
        if (s->n_run == 0 && t->b->n == 0) {
            /* nothing else holds pinned memory: it can never fit */
            fkv__sched_reject(s, r);
            return;
        }
        if (r->seq) fkv_seq_unpin(r->seq); /* it keeps its sequence, unpinned */
        if (s->cfg.on_preempt == FKV_PREEMPT_FREE) fkv__sched_forget(s, r);
        if ((st = fkv__sched_wait_insert(s, r, wi)) != FKV_OK) fkv__step_failed(t, st);
        t->stop_admit = 1;
        return;
    }
    if (rc == STALLED) t->stop_admit = 1; /* admitted with its restores; no memory for more */
}

/* Under the tenant step share, before r, a running prefill longer than a
 * whole step, takes its tenant's share: the waiting prompts of r's tenant
 * whose prefill fits in what is left of the share, keeping one token for r,
 * are admitted first, in queue order (sched.h, "Tenant step share").  r
 * then takes what they leave, so tokens they cannot use (no memory, no
 * running slot) stay r's.  While they start, r counts as served: an
 * admission that reclaims may not preempt it (nor the requests before it,
 * served already), so r keeps its place in the running set. */
void fkv__sched_admit_own_short(sched_step *t, fkv_req *r)
{
    fkv_sched *s = t->s;
    uint32_t left = fkv__sched_tenant_left(t, r);
    if (t->drr_limit || left == UINT32_MAX || left < 2 || s->cfg.mode != FKV_SCHED_CONTINUOUS ||
        fkv__sched_prefill_left(r) <= s->cfg.max_batch_tokens)
        return;
    if (s->cfg.no_admit_after_preempt && t->b->preempted && t->b->n) return;
    r->served = 1;
    for (size_t i = 0; i < s->n_wait && !t->stop_admit && !t->status && s->n_run < s->cfg.max_running && t->budget;) {
        const fkv_req *w = s->wait[i];
        uint32_t need = fkv__sched_prefill_left(w);
        left = fkv__sched_tenant_left(t, r);
        if (w->tenant != r->tenant || !need || need >= left) {
            i++;
            continue;
        }
        size_t before = s->n_wait;
        fkv__sched_admit_one(t, i);
        if (s->n_wait == before) i++; /* back in its place (no memory: stop_admit) */
    }
    r->served = 0;
}

/* The admission phase of a step, after the running requests. */
void fkv__sched_admit(sched_step *t, int64_t now)
{
    fkv_sched *s = t->s;
    fkv_batch *b = t->b;
    /* vLLM admits nothing in a step that preempted (sched.h); a step with
     * no item would only stall */
    int may_admit = !(s->cfg.no_admit_after_preempt && b->preempted && b->n);
    if (s->cfg.mode == FKV_SCHED_DYNAMIC) {
        may_admit = s->n_run == 0 && s->n_wait > 0;
        if (may_admit && s->n_wait < s->cfg.max_running) {
            int64_t oldest = s->wait[0]->arrival_ns;
            for (size_t i = 1; i < s->n_wait; i++)
                if (s->wait[i]->arrival_ns < oldest) oldest = s->wait[i]->arrival_ns;
            if (now < oldest + s->cfg.batch_window_ns) {
                may_admit = 0;
                if (b->n == 0) b->wake_ns = oldest + s->cfg.batch_window_ns;
            }
        }
    }
    /* a dynamic batch takes up to max_running requests at once, whatever the
     * step's budget: their prefills continue over the next steps */
    while (may_admit && !t->stop_admit && s->n_wait && s->n_run < s->cfg.max_running &&
           (t->budget > 0 || s->cfg.mode == FKV_SCHED_DYNAMIC)) {
        size_t wi = pick_waiting(t);
        if (wi == s->n_wait) break; /* every waiting tenant used its step share */
        if (t->drr_on && !fkv__sched_admission_fits(s, s->wait[wi])) break;
        fkv__sched_admit_one(t, wi);
        if (t->status) return;
    }
}
