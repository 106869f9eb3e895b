/* Iteration-level scheduler (sched.h has the rules): requests in and
 * out, the waiting queue and the running set, and the step's frame.  The
 * other files are listed in sched_internal.h. */
#include "sched/sched_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fkv_sched_config_default(fkv_sched_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = FKV_SCHED_CONTINUOUS;
    c->max_batch_tokens = 2048; /* vLLM's max_num_batched_tokens with chunked prefill */
    c->max_running = 256;       /* vLLM's max_num_seqs */
    c->chunked_prefill = 1;
    c->batch_window_ns = 50 * 1000000LL;
    c->admission = FKV_ADMIT_FCFS;
    c->vtc_in_weight = 1.0; /* VTC (OSDI'24): cost = input + 2 x output */
    c->vtc_out_weight = 2.0;
    c->n_clients = 1;
    c->victim = FKV_VICTIM_LAST_STARTED;
    c->on_preempt = FKV_PREEMPT_KEEP;
    c->miss = FKV_MISS_RECOMPUTE;
    c->pass_tokens = 1;
    c->publish_shared = 1;
    c->fair_max_victim = 2;
    c->n_reclaim = 0;
    c->reclaim_sink_tokens = 4;      /* StreamingLLM's attention sinks */
    c->reclaim_window_tokens = 1024; /* and a recent window */
    c->vtc_mem_weight = 0;
    c->tenant_step_share = 1;
    c->no_admit_after_preempt = 0;
    c->step_share = FKV_STEP_SHARE_OFF;
    c->admit_reclaim = 0;
    c->step_bound = 0;
}

static const char *const step_share_names[] = {"off", "drr"};

int fkv_step_share_parse(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, step_share_names[i])) return i;
    return -1;
}

const char *fkv_step_share_name(fkv_step_share v) { return (unsigned)v < 2 ? step_share_names[v] : "?"; }

static const char *const victim_names[] = {"last-started", "fewest-output", "fair"};

int fkv_victim_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, victim_names[i])) return i;
    return -1;
}

const char *fkv_victim_name(fkv_victim_rule v) { return (unsigned)v < 3 ? victim_names[v] : "?"; }

int fkv_sched_parse_reclaim(const char *list, fkv_reclaim_action *out, uint32_t *n, char *why, size_t whylen)
{
    *n = 0;
    if (!*list || !strcmp(list, "none")) return 0;
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        /* PREEMPT is what happens after the list, not an entry of it */
        for (int a = 0; a < FKV_N_RECLAIM; a++) {
            if (a == FKV_RECLAIM_PREEMPT) continue;
            const char *nm = fkv_reclaim_name((fkv_reclaim_action)a);
            if (strlen(nm) == len && !strncmp(p, nm, len)) found = a;
        }
        if (found < 0) {
            snprintf(why, whylen, "entry %u '%.*s' is not one of quantize8, quantize4, offload, drop, evict", *n + 1,
                     (int)(len < 40 ? len : 40), p);
            return -1;
        }
        for (uint32_t i = 0; i < *n; i++)
            if (out[i] == (fkv_reclaim_action)found) {
                snprintf(why, whylen, "entry %u '%.*s' repeats entry %u", *n + 1, (int)len, p, i + 1);
                return -1;
            }
        out[(*n)++] = (fkv_reclaim_action)found;
        if (!e) return 0;
        p = e + 1;
    }
}

const char *fkv_sched_last_error(const fkv_sched *s) { return s->err; }

fkv_status fkv_sched_create(const fkv_sched_config *cfg, fkv_cache *cache, fkv_sched **out)
{
    *out = NULL;
    if (!cfg->max_batch_tokens || !cfg->max_running || !cfg->n_clients)
        return FKV_EINVAL;
    if ((unsigned)cfg->victim > FKV_VICTIM_FAIR || cfg->n_reclaim > FKV_N_RECLAIM ||
        !(cfg->tenant_step_share > 0 && cfg->tenant_step_share <= 1) || !(cfg->vtc_mem_weight >= 0) ||
        (unsigned)cfg->step_share > FKV_STEP_DRR || (unsigned)cfg->admit_reclaim > 1 ||
        !(cfg->step_bound >= 0 && cfg->step_bound <= 1e6))
        return FKV_EINVAL;
    for (uint32_t i = 0; i < cfg->n_reclaim; i++)
        if ((unsigned)cfg->reclaim[i] >= FKV_N_RECLAIM || cfg->reclaim[i] == FKV_RECLAIM_PREEMPT) return FKV_EINVAL;
    fkv_sched *s = calloc(1, sizeof *s);
    if (!s) return FKV_ENOMEM;
    s->cfg = *cfg;
    s->cache = cache;
    fkv_cache_info ci;
    if (cache && fkv_cache_get_info(cache, &ci) == FKV_OK) s->page_tokens = ci.page_tokens;
    s->vtc = calloc(cfg->n_clients, sizeof *s->vtc);
    s->client_live = calloc(cfg->n_clients, sizeof *s->client_live);
    if (!s->vtc || !s->client_live) {
        fkv_sched_destroy(s);
        return FKV_ENOMEM;
    }
    *out = s;
    return FKV_OK;
}

void fkv_sched_destroy(fkv_sched *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_run; i++)
        if (s->run[i]->seq) {
            fkv_seq_unpin(s->run[i]->seq);
            fkv_seq_free(s->run[i]->seq);
            s->run[i]->seq = NULL;
        }
    for (size_t i = 0; i < s->n_wait; i++)
        if (s->wait[i]->seq) {
            fkv_seq_free(s->wait[i]->seq);
            s->wait[i]->seq = NULL;
        }
    free(s->wait);
    free(s->run);
    free(s->vtc);
    free(s->client_live);
    free(s->tok);
    free(s->step.restored);
    free(s->step.use);
    free(s->step.over);
    free(s->drr);
    free(s->step.pick);
    fkv_batch_free(&s->step.probe);
    free(s->step.shares);
    free(s->step.claims);
    free(s);
}

size_t fkv_sched_n_waiting(const fkv_sched *s) { return s->n_wait; }
size_t fkv_sched_n_running(const fkv_sched *s) { return s->n_run; }
uint64_t fkv_sched_preemptions(const fkv_sched *s) { return s->preemptions; }
uint64_t fkv_sched_rejections(const fkv_sched *s) { return s->rejections; }
uint64_t fkv_sched_finished(const fkv_sched *s) { return s->done + s->rejections; }
uint64_t fkv_sched_live_tokens(const fkv_sched *s) { return s->live_tokens; }

fkv_status fkv_sched_add(fkv_sched *s, fkv_req *r)
{
    if (!r->id || !r->output || r->client >= s->cfg.n_clients)
        return fkv__sched_fail(s, FKV_EINVAL, "request %llu: id, output or client out of range",
                    (unsigned long long)r->id);
    if (s->cfg.pass_tokens && !r->tokens && !s->cfg.token_ids)
        return fkv__sched_fail(s, FKV_EINVAL, "request %llu: no token ids (tokens NULL, no token_ids hook)",
                               (unsigned long long)r->id);
    r->seq = NULL;
    r->target = r->prompt;
    r->computed = r->generated = 0;
    r->first_token_ns = r->finish_ns = -1;
    /* VTC: a client whose queue refills is lifted to the smallest counter
     * among clients with work, so idle time earns no credit. */
    if (s->cfg.admission == FKV_ADMIT_VTC && s->client_live[r->client] == 0) {
        double lo = -1;
        for (uint32_t k = 0; k < s->cfg.n_clients; k++)
            if (s->client_live[k] && (lo < 0 || s->vtc[k] < lo)) lo = s->vtc[k];
        if (lo > s->vtc[r->client]) s->vtc[r->client] = lo;
    }
    s->client_live[r->client]++;
    return fkv__sched_wait_insert(s, r, s->n_wait);
}

fkv_status fkv_sched_add_seq(fkv_sched *s, fkv_req *r, fkv_seq *seq)
{
    if (!s->cache || !seq) return fkv__sched_fail(s, FKV_EINVAL, "request %llu: a sequence needs a cache", (unsigned long long)r->id);
    fkv_status st = fkv_sched_add(s, r);
    if (st) return st;
    r->seq = seq;
    r->computed = r->target = fkv_seq_len(seq);
    s->live_tokens += r->computed;
    return FKV_OK;
}

fkv_status fkv_sched_step(fkv_sched *s, int64_t now, fkv_batch *b)
{
    b->n = 0;
    b->n_ranges = 0;
    b->tokens = 0;
    b->reload_tokens = 0;
    b->host_tokens = 0;
    b->remote_tokens = 0;
    b->remote_fetches = 0;
    b->preempted = 0;
    b->wake_ns = 0;
    sched_step *t = &s->step;
    t->s = s;
    t->b = b;
    t->budget = s->cfg.max_batch_tokens;
    t->held = 0;
    t->bound_w = NULL;
    t->bound_reserve = 0;
    t->admitting = 0;
    t->stop_admit = 0;
    t->status = FKV_OK;
    t->n_restored = 0;
    t->fair_choice = NULL;
    t->drr_on = s->cfg.step_share == FKV_STEP_DRR && s->cfg.chunked_prefill && s->cfg.mode == FKV_SCHED_CONTINUOUS;
    t->drr_limit = 0;
    s->step_ns = now;
    fkv__sched_share_start(t);
    /* running requests stay pinned from admission to the end (or their
     * preemption): every step reads their whole context, and no cache call
     * happens between steps, so unpinning them in between would only churn
     * the policy's structures */
    for (size_t i = 0; i < s->n_run; i++) s->run[i]->served = 0;
    if (t->drr_on)
        for (size_t i = 0; i < s->n_drr; i++)
            s->drr[i].alloc = s->drr[i].extra = s->drr[i].used = s->drr[i].recomputed = 0;
    fkv__sched_shares_start(t);
    if (!t->status) fkv__sched_step_bound(t);
    if (!t->status && !t->drr_on) fkv__sched_guard_first(t); /* under the DRR share: after its plan */
    if (t->status) return t->status;
    if (t->drr_on) {
        fkv__sched_drr_serve(t);
    } else {
        /* running requests, oldest first; preemption removes from the tail side */
        for (size_t i = 0; i < s->n_run && !t->status;) {
            fkv_req *r = s->run[i];
            if (r->served) { /* by the within-share pass */
                i++;
                continue;
            }
            fkv__sched_admit_own_short(t, r);
            if (t->status) break;
            if (i >= s->n_run || s->run[i] != r) { /* its tenant's admissions may not move it */
                t->status = fkv__sched_fail(s, FKV_ESTATE, "request %llu moved while its tenant's prompts started",
                                            (unsigned long long)r->id);
                break;
            }
            size_t before = s->n_run;
            int rc = fkv__sched_serve(t, r);
            if (rc == SERVED || rc == STALLED) i++;
            else if (s->n_run == before) i++; /* defensive: r stayed */
            /* else r left the running set: the same index now holds the next one */
        }
    }
    if (t->status) return t->status;
    fkv__sched_admit(t, now);
    if (t->status) return t->status;
    if (t->drr_on) fkv__sched_drr_settle(s);
    /* over the budget only as one item restoring one chunk larger than it */
    int alone = b->n == 1 && b->items[0].n_new == 0 && b->items[0].n_ranges == 1;
    if (b->tokens > s->cfg.max_batch_tokens && !alone)
        return fkv__sched_fail(s, FKV_ESTATE, "step of %u tokens over the budget %u", b->tokens, s->cfg.max_batch_tokens);
    return FKV_OK;
}

double fkv_sched_item_cost(const fkv_sched_config *c, const fkv_batch_item *it)
{
    double cost = it->kind == FKV_ITEM_PROMPT ? c->vtc_in_weight * it->n_new : 0;
    return it->emits ? cost + c->vtc_out_weight : cost;
}

fkv_status fkv_sched_emit(fkv_sched *s, fkv_batch *b, size_t i, int32_t token, int stop)
{
    if (i >= b->n || !b->items[i].emits)
        return fkv__sched_fail(s, FKV_EINVAL, "emit: item %zu of %zu does not emit", i, b->n);
    fkv_batch_item *it = &b->items[i];
    fkv_req *r = it->r;
    uint32_t pos = it->ctx + it->n_new;
    if (r->tokens && pos < r->prompt + r->output) r->tokens[pos] = token;
    if (stop && !it->finishes) {
        it->finishes = 1;
        r->output = r->generated + 1;
    }
    return FKV_OK;
}

void fkv_sched_stop(fkv_sched *s, fkv_req *r)
{
    (void)s;
    if (r->state != FKV_REQ_DONE && r->state != FKV_REQ_REJECTED && r->output > r->generated + 1)
        r->output = r->generated + 1;
}

fkv_status fkv_sched_finish(fkv_sched *s, fkv_batch *b, int64_t end_ns)
{
    for (size_t i = 0; i < b->n; i++) {
        fkv_batch_item *it = &b->items[i];
        fkv_req *r = it->r;
        if (r->state != FKV_REQ_RUNNING) continue;
        s->vtc[r->client] += fkv_sched_item_cost(&s->cfg, it);
        if (it->emits) {
            if (it->first) r->first_token_ns = end_ns;
            r->generated++;
            r->target = r->computed + 1; /* decode: one token per step from now */
        }
        if (it->finishes) {
            r->finish_ns = end_ns;
            r->state = FKV_REQ_DONE;
            s->done++;
            if (s->cfg.on_finish) s->cfg.on_finish(s->cfg.finish_ctx, r);
        }
    }
    /* VTC with memory: every running request pays for the KV it held
     * during the step (sched.h) */
    if (s->cfg.vtc_mem_weight > 0 && end_ns > s->step_ns) {
        double dt = (end_ns - s->step_ns) * 1e-9;
        for (size_t i = 0; i < s->n_run; i++) {
            const fkv_req *r = s->run[i];
            double held = s->cache && r->seq ? (double)fkv_seq_pages(r->seq) * s->page_tokens : r->computed;
            s->vtc[r->client] += s->cfg.vtc_mem_weight * held * dt;
        }
    }
    /* drop the finished ones (unpinned: their chunks join the prefix cache) */
    size_t w = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        fkv_req *r = s->run[i];
        if (r->state == FKV_REQ_DONE) {
            if (r->seq) fkv_seq_unpin(r->seq);
            fkv__sched_release_seq(s, r);
            s->client_live[r->client]--;
        } else {
            s->run[w++] = r;
        }
    }
    s->n_run = w;
    return FKV_OK;
}

void fkv_batch_free(fkv_batch *b)
{
    free(b->items);
    free(b->ranges);
    memset(b, 0, sizeof *b);
}
