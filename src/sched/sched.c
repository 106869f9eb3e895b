/* Iteration-level scheduler: see sched.h for the rules. */
#include "sched/sched.h"
#include "util/array.h"
#include "util/rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fkv_sched {
    fkv_sched_config cfg;
    fkv_cache *cache;
    fkv_req **wait; /* waiting queue, front = index 0 */
    size_t n_wait, cap_wait;
    fkv_req **run;  /* running set in admission order */
    size_t n_run, cap_run;
    uint64_t admit_counter, preempt_counter;
    uint64_t preemptions, rejections, done;
    uint64_t live_tokens;
    double *vtc;          /* [n_clients] virtual token counters */
    uint32_t *client_live; /* [n_clients] waiting + running requests */
    int32_t *tok;         /* [tok_cap] token ids of one append */
    size_t tok_cap;
    const fkv_chunk_view **restored; /* chunks restored in the step being formed */
    size_t n_restored, cap_restored;
    /* tenant step share: new prefill tokens of each tenant in the step
     * being formed (a step sees few tenants: a linear list) */
    struct tenant_use {
        uint64_t tenant;
        uint32_t used;
    } *use;
    size_t n_use, cap_use;
    uint32_t tenant_cap;  /* prefill tokens a tenant may take in this step; UINT32_MAX = no limit */
    int64_t step_ns;      /* start of the step being formed (VTC memory term) */
    uint32_t page_tokens; /* of the cache; 0 without one */
    struct tenant_over {
        uint64_t tenant;
        double over; /* pages - share_pages */
    } *over;
    size_t cap_over;
    const fkv_req *fair_choice; /* the last victim chosen by the fair rule, until preempted */
    /* step share by DRR (sched.h): one entry per tenant seen, kept across
     * steps for the deficits */
    struct drr_tenant {
        uint64_t tenant;
        double weight, deficit;
        uint64_t demand;     /* prefill tokens its requests need, this step */
        uint32_t alloc;      /* allotted this step */
        uint32_t extra;      /* passed on to it from tenants before it this step */
        uint32_t used;       /* new prefill tokens computed this step */
        uint32_t recomputed; /* restored tokens recomputed this step */
    } *drr;
    size_t n_drr, cap_drr;
    size_t drr_first;      /* the entry that starts this step's rounds */
    int drr_on;            /* the share applies to the step being formed */
    int drr_limit;         /* serving within allotments (not the leftover pass) */
    fkv_req **pick;        /* requests to visit in a pass of the share */
    size_t cap_pick;
    char err[256];
};

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
    c->block_tokens = 512;
    c->publish_shared = 1;
    c->fair_max_victim = 2;
    c->n_reclaim = 0;
    c->reclaim_sink_tokens = 4;      /* StreamingLLM's attention sinks */
    c->reclaim_window_tokens = 1024; /* and a recent window */
    c->vtc_mem_weight = 0;
    c->tenant_step_share = 1;
    c->no_admit_after_preempt = 0;
    c->step_share = FKV_STEP_SHARE_OFF;
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

static fkv_status fail(fkv_sched *s, fkv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return st;
}

const char *fkv_sched_last_error(const fkv_sched *s) { return s->err; }

fkv_status fkv_sched_create(const fkv_sched_config *cfg, fkv_cache *cache, fkv_sched **out)
{
    *out = NULL;
    if (!cfg->max_batch_tokens || !cfg->max_running || !cfg->n_clients || !cfg->block_tokens)
        return FKV_EINVAL;
    if ((unsigned)cfg->victim > FKV_VICTIM_FAIR || cfg->n_reclaim > FKV_N_RECLAIM ||
        !(cfg->tenant_step_share > 0 && cfg->tenant_step_share <= 1) || !(cfg->vtc_mem_weight >= 0) ||
        (unsigned)cfg->step_share > FKV_STEP_DRR)
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
    free(s->restored);
    free(s->use);
    free(s->over);
    free(s->drr);
    free(s->pick);
    free(s);
}

size_t fkv_sched_n_waiting(const fkv_sched *s) { return s->n_wait; }
size_t fkv_sched_n_running(const fkv_sched *s) { return s->n_run; }
uint64_t fkv_sched_preemptions(const fkv_sched *s) { return s->preemptions; }
uint64_t fkv_sched_rejections(const fkv_sched *s) { return s->rejections; }
uint64_t fkv_sched_finished(const fkv_sched *s) { return s->done + s->rejections; }
uint64_t fkv_sched_live_tokens(const fkv_sched *s) { return s->live_tokens; }

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

/* token ids are a pure function of (block or request, position): fkv_mix64 */
int32_t fkv_req_token(const fkv_req *r, uint32_t pos, uint32_t block_tokens)
{
    uint64_t h;
    if (pos < r->shared_tokens && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(r->shared_seed ^ 0x2545f4914f6cdd1dULL) + pos);
    else if (r->block_ids && block_tokens && pos / block_tokens < r->n_block_ids && pos < r->prompt)
        h = fkv_mix64(fkv_mix64(r->block_ids[pos / block_tokens] ^ 0x5bd1e995ULL) + pos % block_tokens);
    else
        h = fkv_mix64(fkv_mix64(r->token_seed) + pos);
    return (int32_t)(h & 0x7fffffff);
}

static const int32_t *tokens_for(fkv_sched *s, const fkv_req *r, uint32_t start, uint32_t n)
{
    if (!s->cfg.pass_tokens) return NULL;
    if (r->tokens) return r->tokens + start;
    if (fkv_grow(&s->tok, &s->tok_cap, n ? n : 1, sizeof *s->tok)) return NULL;
    for (uint32_t i = 0; i < n; i++) s->tok[i] = fkv_req_token(r, start + i, s->cfg.block_tokens);
    return s->tok;
}

static fkv_status wait_push(fkv_sched *s, fkv_req *r, int front)
{
    if (fkv_grow(&s->wait, &s->cap_wait, s->n_wait + 1, sizeof *s->wait)) return FKV_ENOMEM;
    if (front) {
        memmove(s->wait + 1, s->wait, s->n_wait * sizeof *s->wait);
        s->wait[0] = r;
    } else {
        s->wait[s->n_wait] = r;
    }
    s->n_wait++;
    r->state = FKV_REQ_WAITING;
    return FKV_OK;
}

static void wait_remove(fkv_sched *s, size_t i)
{
    memmove(s->wait + i, s->wait + i + 1, (s->n_wait - i - 1) * sizeof *s->wait);
    s->n_wait--;
}

fkv_status fkv_sched_add(fkv_sched *s, fkv_req *r)
{
    if (!r->id || !r->output || r->client >= s->cfg.n_clients)
        return fail(s, FKV_EINVAL, "request %llu: id, output or client out of range",
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
    return wait_push(s, r, 0);
}

fkv_status fkv_sched_add_seq(fkv_sched *s, fkv_req *r, fkv_seq *seq)
{
    if (!s->cache || !seq) return fail(s, FKV_EINVAL, "request %llu: a sequence needs a cache", (unsigned long long)r->id);
    fkv_status st = fkv_sched_add(s, r);
    if (st) return st;
    r->seq = seq;
    r->computed = r->target = fkv_seq_len(seq);
    s->live_tokens += r->computed;
    return FKV_OK;
}

static void release_seq(fkv_sched *s, fkv_req *r)
{
    if (!r->seq && s->cache) return;
    s->live_tokens -= r->computed;
    if (r->seq) fkv_seq_free(r->seq);
    r->seq = NULL;
}

/* Tokens of r known so far, all prefilled again when its sequence is
 * freed: the target (the prompt, then each emitted token), or one past the
 * sequence when it already reaches the target (a request started from a
 * forked sequence: the fork gave it the token at that position). */
static uint32_t known_tokens(const fkv_req *r) { return r->computed >= r->target ? r->computed + 1 : r->target; }

/* Takes r out of the running set and back to the waiting queue's front. */
static fkv_status preempt(fkv_sched *s, fkv_req *r)
{
    size_t i = 0;
    while (i < s->n_run && s->run[i] != r) i++;
    if (i == s->n_run) return fail(s, FKV_ESTATE, "preempt: request %llu not running", (unsigned long long)r->id);
    /* the cache counts its pages as reclaimed by preemption, for its tenant */
    if (r->seq) fkv_seq_reclaim(r->seq, FKV_RECLAIM_PREEMPT, NULL, 0, NULL);
    if (s->fair_choice == r) {
        r->fair_picks++;
        s->fair_choice = NULL;
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
        uint32_t redo = known_tokens(r);
        r->redo_until = r->computed > r->redo_until ? r->computed : r->redo_until;
        release_seq(s, r);
        r->computed = 0;
        r->target = redo;
    }
    return wait_push(s, r, 1);
}

/* How far r's tenant is over its fair share, in pages (memoized over one
 * choice: n entries of s->over are valid).  A tenant the cache has not
 * seen holds nothing: 0. */
static double tenant_over(fkv_sched *s, uint64_t tenant, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (s->over[i].tenant == tenant) return s->over[i].over;
    fkv_tenant_info ti;
    double over = 0;
    if (fkv_cache_tenant_info(s->cache, tenant, &ti) == FKV_OK) over = (double)ti.pages - ti.share_pages;
    if (!fkv_grow(&s->over, &s->cap_over, *n + 1, sizeof *s->over)) s->over[(*n)++] = (struct tenant_over){tenant, over};
    return over;
}

/* The victim by `rule` among running requests not yet served in this
 * step, other than `except` (may be NULL), or NULL.  *fair is set when the
 * fair rule chose it (sched.h: exempt requests are not its candidates, and
 * with no candidate left the last-started one goes). */
static fkv_req *pick_victim(fkv_sched *s, fkv_victim_rule rule, const fkv_req *except, int *fair)
{
    fkv_req *best = NULL;
    *fair = 0;
    if (rule == FKV_VICTIM_FAIR && s->cache) {
        size_t n_over = 0;
        double best_over = 0;
        for (size_t i = 0; i < s->n_run; i++) {
            fkv_req *r = s->run[i];
            if (r->served || r == except || r->fair_picks >= s->cfg.fair_max_victim) continue;
            double over = tenant_over(s, r->tenant, &n_over);
            if (!best || over > best_over || (over == best_over && r->admit_order > best->admit_order)) {
                best = r;
                best_over = over;
            }
        }
        if (best) {
            *fair = 1;
            return best;
        }
    }
    for (size_t i = 0; i < s->n_run; i++) {
        fkv_req *r = s->run[i];
        if (r->served || r == except) continue;
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

static void reject(fkv_sched *s, fkv_req *r)
{
    if (r->seq) fkv_seq_unpin(r->seq);
    release_seq(s, r);
    r->state = FKV_REQ_REJECTED;
    s->client_live[r->client]--;
    s->rejections++;
}

/* The item's restored ranges are the batch's ranges from range0 on; r has
 * its new tokens (computed = ctx + n_new).  decoding: r had no prefill
 * left when it was served.  The contract fields (sched.h) are decided
 * here, once. */
static fkv_status add_item(fkv_batch *b, fkv_req *r, uint32_t ctx, uint32_t restored, uint32_t n_new, int decoding,
                           size_t range0)
{
    if (fkv_grow(&b->items, &b->cap, b->n + 1, sizeof *b->items)) return FKV_ENOMEM;
    fkv_item_kind kind = !n_new     ? FKV_ITEM_RESTORE
                         : decoding ? FKV_ITEM_DECODE
                         : r->generated ? FKV_ITEM_REFILL
                                        : FKV_ITEM_PROMPT;
    int emits = n_new > 0 && r->computed >= r->target;
    b->items[b->n++] = (fkv_batch_item){.r = r,
                                        .ctx = ctx,
                                        .n_restored = restored,
                                        .n_new = n_new,
                                        .kind = kind,
                                        .emits = emits,
                                        .first = emits && r->generated == 0,
                                        .finishes = emits && r->generated + 1 >= r->output,
                                        .range0 = (uint32_t)range0,
                                        .n_ranges = (uint32_t)(b->n_ranges - range0)};
    return FKV_OK;
}

/* Records [a, e) as restored in this step: in the batch (merged with the
 * item's previous range when adjacent) and the chunk in the step's set. */
static fkv_status note_restored(fkv_sched *s, fkv_batch *b, size_t range0, const fkv_chunk_view *ch, uint32_t a,
                                uint32_t e)
{
    if (fkv_grow(&s->restored, &s->cap_restored, s->n_restored + 1, sizeof *s->restored)) return FKV_ENOMEM;
    s->restored[s->n_restored++] = ch;
    if (b->n_ranges > range0 && b->ranges[b->n_ranges - 1].end == a) {
        b->ranges[b->n_ranges - 1].end = e;
        return FKV_OK;
    }
    if (fkv_grow(&b->ranges, &b->cap_ranges, b->n_ranges + 1, sizeof *b->ranges)) return FKV_ENOMEM;
    b->ranges[b->n_ranges++] = (fkv_range){a, e};
    return FKV_OK;
}

/* r's last chunk is shared and was restored in this step: an append would
 * copy its partial page before that page's K/V exist. */
static int tail_restored_shared(const fkv_sched *s, fkv_req *r)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_chunk_info info;
    if (!s->n_restored || fkv_seq_chunks(r->seq, &ch, &n) || !n || fkv_seq_chunk_info(r->seq, n - 1, &info) ||
        info.refs < 2)
        return 0;
    for (size_t i = 0; i < s->n_restored; i++)
        if (s->restored[i] == ch[n - 1]) return 1;
    return 0;
}

/* serve() results: SERVED; GONE (preempted, rejected or failed); NOROOM
 * (an admission that found no memory: it goes back to the queue); STALLED
 * (no memory after restoring chunks: the item carries the restores, the
 * request stays running and tries again next step). */
enum { SERVED = 0, GONE = 1, NOROOM = 2, STALLED = 3 };

/* Pages an allocation of `tokens` more tokens (after r's `len`) still
 * needs beyond the free ones: at least 1 (it failed). */
static uint32_t pages_needed(fkv_sched *s, uint32_t len, uint32_t tokens, int whole)
{
    uint32_t pt = s->page_tokens ? s->page_tokens : 1;
    uint32_t want = whole ? (tokens + pt - 1) / pt : (len + tokens + pt - 1) / pt - (len + pt - 1) / pt;
    fkv_cache_info ci;
    uint32_t free_pages = fkv_cache_get_info(s->cache, &ci) == FKV_OK ? ci.free_pages : 0;
    return want > free_pages ? want - free_pages : 1;
}

/* Fair reclaim (sched.h): the configured actions in order on the fair
 * victim among the others; 1 when one of them freed pages.  When r's own
 * tenant is further over its share than the victim's, r gives from
 * itself instead, and only by the actions that leave its K/V readable in
 * this step (quantize, drop: its restores for the step are done). */
static int reclaim_some(fkv_sched *s, fkv_req *r, uint32_t need, fkv_status *st)
{
    fkv_reclaim_args args = {s->cfg.reclaim_sink_tokens, s->cfg.reclaim_window_tokens};
    for (uint32_t k = 0; k < s->cfg.n_reclaim; k++) {
        int fair;
        fkv_req *v = pick_victim(s, FKV_VICTIM_FAIR, r, &fair); /* whatever the preemption rule */
        size_t n_over = 0;
        if (r->seq && (!v || tenant_over(s, v->tenant, &n_over) < tenant_over(s, r->tenant, &n_over)))
            v = r, fair = 0; /* paying for itself is not being victimized: no exemption count */
        if (!v) return 0;
        if (!v->seq) continue;
        fkv_reclaim_action a = s->cfg.reclaim[k];
        if (v == r && a != FKV_RECLAIM_QUANTIZE8 && a != FKV_RECLAIM_QUANTIZE4 && a != FKV_RECLAIM_DROP) continue;
        uint32_t freed = 0;
        fkv_status rs = fkv_seq_reclaim(v->seq, s->cfg.reclaim[k], &args, need, &freed);
        if (rs != FKV_OK && rs != FKV_EFULL) {
            *st = fail(s, rs, "request %llu: fkv_seq_reclaim %s: %s", (unsigned long long)v->id,
                       fkv_reclaim_name(s->cfg.reclaim[k]), fkv_last_error());
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
 * go (it is the only or the chosen victim). */
static int make_room(fkv_sched *s, fkv_req *r, fkv_batch *b, uint32_t need, fkv_status *st)
{
    if (s->cfg.n_reclaim && reclaim_some(s, r, need, st)) return 0;
    if (*st) return 0;
    int fair;
    fkv_req *v = pick_victim(s, s->cfg.victim, NULL, &fair);
    s->fair_choice = fair ? v : NULL;
    if (!v || v == r) return 1;
    *st = preempt(s, v);
    b->preempted++;
    return 0;
}

/* r cannot get memory even after preemption of every other candidate. */
static int give_up(fkv_sched *s, fkv_req *r, fkv_batch *b, int admitting, fkv_status *st)
{
    if (admitting) return NOROOM;
    if (s->n_run == 1) {
        /* alone and pinned: everything else is evictable, so r is larger
         * than the whole cache */
        s->n_run = 0;
        reject(s, r);
        return GONE;
    }
    *st = preempt(s, r);
    b->preempted++;
    return GONE;
}

/* Recomputation of evicted chunks, chunk by chunk so a partial restore
 * never splits a chunk.  Returns SERVED with *missing_left set (the rest
 * next step: the budget ran out), STALLED (no memory for the next chunk
 * after restoring some), or GONE/NOROOM (no memory before restoring any). */
static int restore_missing(fkv_sched *s, fkv_req *r, fkv_batch *b, uint32_t *budget, int admitting,
                           uint32_t *restored, uint32_t *missing_left, fkv_status *st)
{
    size_t range0 = b->n_ranges;
    uint32_t missing = 0;
    *missing_left = 0;
    if ((*st = fkv_seq_touch(r->seq, &missing)) != FKV_OK) return GONE;
    int counts = s->cfg.miss == FKV_MISS_RECOMPUTE;
    while (missing) {
        const fkv_chunk_view *const *ch;
        size_t nch;
        if ((*st = fkv_seq_chunks(r->seq, &ch, &nch)) != FKV_OK) return GONE;
        size_t i = 0;
        while (i < nch && (ch[i]->resident || ch[i]->dropped)) i++; /* dropped ones are not missing */
        if (i == nch) break;
        uint32_t a = ch[i]->start, e = ch[i]->start + ch[i]->n_tokens;
        /* the rest next step; a chunk larger than a whole step's budget
         * is recomputed alone, in a step that has nothing else */
        int oversize = e - a > s->cfg.max_batch_tokens && b->n == 0 && *budget == s->cfg.max_batch_tokens;
        if (counts && e - a > *budget && !oversize) break;
        uint32_t got = 0;
        /* an offloaded chunk comes back from the host tier as it was:
         * nothing to compute, so no range of the item names it */
        int host = ch[i]->offloaded;
        fkv_status rs = host ? fkv_seq_reload(r->seq, a, e, &got) : fkv_seq_restore(r->seq, a, e, NULL, &got);
        if (rs == FKV_EFULL) {
            if (make_room(s, r, b, pages_needed(s, 0, e - a, 1), st)) {
                if (!*restored) return give_up(s, r, b, admitting, st);
                *missing_left = missing; /* what it restored is computed in this step */
                return STALLED;
            }
            if (*st) return GONE;
            continue;
        }
        if (rs != FKV_OK) {
            *st = rs;
            return GONE;
        }
        if (got == 0) {
            *st = fail(s, FKV_ESTATE, "request %llu: %s of [%u,%u) brought nothing back", (unsigned long long)r->id,
                       host ? "reload" : "restore", a, e);
            return GONE;
        }
        if (host) {
            r->reloaded += got;
            b->host_tokens += got;
            missing = missing > got ? missing - got : 0;
            continue;
        }
        if ((*st = note_restored(s, b, range0, ch[i], a, e)) != FKV_OK) return GONE;
        *restored += got;
        missing = missing > got ? missing - got : 0;
        if (counts) {
            *budget = got < *budget ? *budget - got : 0;
            r->recomputed += got;
        } else {
            r->reloaded += got;
        }
    }
    *missing_left = missing;
    return SERVED;
}

/* Tenant step share: r's tenant's new prefill tokens in this step so far
 * (an entry is added on first use); NULL on allocation failure. */
static uint32_t *tenant_used(fkv_sched *s, uint64_t tenant)
{
    for (size_t i = 0; i < s->n_use; i++)
        if (s->use[i].tenant == tenant) return &s->use[i].used;
    if (fkv_grow(&s->use, &s->cap_use, s->n_use + 1, sizeof *s->use)) return NULL;
    s->use[s->n_use] = (struct tenant_use){tenant, 0};
    return &s->use[s->n_use++].used;
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

static uint32_t prefill_left(const fkv_req *r);

/* Prefill tokens r's tenant may still take in this step. */
static uint32_t tenant_left(fkv_sched *s, const fkv_req *r)
{
    if (s->drr_limit) {
        if (!prefill_left(r)) return UINT32_MAX; /* decodes are not limited */
        const struct drr_tenant *e = drr_entry(s, r->tenant);
        return e && e->alloc + e->extra > e->used ? e->alloc + e->extra - e->used : 0;
    }
    if (s->tenant_cap == UINT32_MAX) return UINT32_MAX;
    const uint32_t *u = tenant_used(s, r->tenant);
    return !u ? 0 : *u < s->tenant_cap ? s->tenant_cap - *u : 0;
}

/* At the start of a step: the tenant share applies when requests of two
 * tenants or more have prefill left (sched.h). */
static void tenant_share_start(fkv_sched *s)
{
    s->n_use = 0;
    s->tenant_cap = UINT32_MAX;
    if (s->cfg.tenant_step_share >= 1 || !s->cfg.chunked_prefill || s->drr_on) return;
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
    s->tenant_cap = cap < 1 ? 1 : (uint32_t)cap;
}

/* Gives r its share of the step.  r is in the running set and pinned (when
 * it has a sequence).  *budget is the compute budget left. */
static int serve(fkv_sched *s, fkv_req *r, fkv_batch *b, uint32_t *budget, int admitting, fkv_status *st)
{
    uint32_t restored = 0, missing = 0, n = 0, ctx = r->computed;
    int rc = SERVED, prefill = 0, decoding = !prefill_left(r);
    size_t range0 = b->n_ranges;
    *st = FKV_OK;
    if (s->cache && r->seq && r->computed) {
        rc = restore_missing(s, r, b, budget, admitting, &restored, &missing, st);
        if (rc != SERVED || missing) goto out;
    }
    prefill = r->computed < r->target;
    if (prefill) {
        n = r->target - r->computed;
        uint32_t left = tenant_left(s, r);
        if (n > left) n = left; /* chunked prefill only (tenant_share_start) */
        if (n > *budget) {
            /* without chunked prefill a prompt runs whole; one larger than
             * the budget runs alone in an otherwise empty step */
            if (s->cfg.chunked_prefill) n = *budget;
            else n = 0;
        }
        if (!s->cfg.chunked_prefill && n == 0 && b->n == 0 && *budget == s->cfg.max_batch_tokens)
            n = *budget; /* still bounded by the budget: the rest next step */
    } else {
        n = *budget ? 1 : 0;
    }
    if (n && s->cache && tail_restored_shared(s, r)) n = 0; /* next step */
    if (n && s->cache) {
        for (;;) {
            const int32_t *tok = tokens_for(s, r, r->computed, n);
            if (s->cfg.pass_tokens && !tok) {
                *st = FKV_ENOMEM;
                return GONE;
            }
            fkv_status as = fkv_seq_append(r->seq, tok, n, NULL);
            if (as == FKV_OK) break;
            if (as != FKV_EFULL) {
                *st = as;
                return GONE;
            }
            if (make_room(s, r, b, pages_needed(s, r->computed, n, 0), st)) {
                /* after restores, the step computes them; the new tokens wait */
                rc = restored ? STALLED : give_up(s, r, b, admitting, st);
                n = 0;
                goto out;
            }
            if (*st) return GONE;
        }
    }
    if (n) {
        if (prefill && s->tenant_cap != UINT32_MAX) {
            uint32_t *u = tenant_used(s, r->tenant);
            if (u) *u += n;
        }
        if (prefill && r->computed < r->redo_until) {
            uint32_t e = r->computed + n < r->redo_until ? r->computed + n : r->redo_until;
            r->recomputed += e - r->computed;
        }
        r->computed += n;
        s->live_tokens += n;
        *budget -= n;
    }
out:
    if (*st) return GONE;
    if (s->drr_on && (n || restored)) {
        /* what the step share charges the tenant (sched.h) */
        struct drr_tenant *e = drr_entry(s, r->tenant);
        if (e && prefill && !decoding) e->used += n;
        if (e && s->cfg.miss == FKV_MISS_RECOMPUTE) e->recomputed += restored;
    }
    if (n || restored) {
        int counts = s->cfg.miss == FKV_MISS_RECOMPUTE;
        if ((*st = add_item(b, r, ctx, restored, n, decoding, range0)) != FKV_OK) return GONE;
        b->tokens += n + (counts ? restored : 0);
        if (!counts) b->reload_tokens += restored;
    }
    if (rc == SERVED || rc == STALLED) r->served = 1;
    return rc;
}

/* A waiting request whose tenant has used its step share would only take
 * a running slot and memory this step. */
static int may_prefill(fkv_sched *s, const fkv_req *r)
{
    return s->tenant_cap == UINT32_MAX || s->cfg.mode != FKV_SCHED_CONTINUOUS || r->computed >= r->target ||
           tenant_left(s, r) > 0;
}

/* Index of the next waiting request to admit, or n_wait for none. */
static size_t pick_waiting(fkv_sched *s)
{
    size_t best = s->n_wait;
    for (size_t i = 0; i < s->n_wait; i++) {
        if (!may_prefill(s, s->wait[i])) continue;
        if (best == s->n_wait) best = i;
        if (s->cfg.admission == FKV_ADMIT_FCFS) break;
        if (s->vtc[s->wait[i]->client] < s->vtc[s->wait[best]->client]) best = i;
    }
    return best;
}

/* After the cache's match: the remote tier's tokens from r->computed on,
 * appended as loaded K/V.  No memory for them: they are not loaded (the
 * prefill computes them, as without the tier). */
static fkv_status load_remote(fkv_sched *s, fkv_req *r, uint32_t limit, fkv_batch *b, uint32_t *got)
{
    *got = 0;
    if (!s->cfg.remote_find || r->computed >= limit) return FKV_OK;
    uint64_t fetched = 0;
    uint32_t n = s->cfg.remote_find(s->cfg.remote_ctx, r, r->computed, limit, &fetched);
    if (n > limit - r->computed) n = limit - r->computed;
    if (!n) return FKV_OK;
    const int32_t *tok = tokens_for(s, r, r->computed, n);
    fkv_status st = fkv_seq_append(r->seq, tok, n, NULL);
    if (st == FKV_EFULL) return FKV_OK;
    if (st) return fail(s, st, "request %llu: remote load: fkv_seq_append: %s", (unsigned long long)r->id,
                        fkv_cache_last_error(s->cache));
    r->computed += n;
    s->live_tokens += n;
    b->remote_tokens += fetched;
    b->remote_fetches++;
    *got = n;
    return FKV_OK;
}

/* Starts (or restarts after a freeing preemption) r's sequence. */
static fkv_status open_seq(fkv_sched *s, fkv_req *r, fkv_batch *b)
{
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
    if (!s->cfg.pass_tokens) {
        p.block_ids = r->block_ids;
        p.n_block_ids = r->n_block_ids;
    }
    fkv_status st = fkv_seq_create(s->cache, &p, &r->seq);
    if (st) return fail(s, st, "request %llu: fkv_seq_create: %s", (unsigned long long)r->id,
                        fkv_cache_last_error(s->cache));
    /* keep one token to compute: the step that finishes the prefill emits */
    uint32_t matched = 0, host = 0, limit = r->target ? r->target - 1 : 0;
    const int32_t *tok = tokens_for(s, r, 0, limit);
    if (limit && (tok || !s->cfg.pass_tokens)) {
        /* across tiers: a prefix demoted to the host tier comes attached as
         * offloaded chunks, which restore_missing reloads and prices as
         * host_tokens before the step reads them (fkv_seq_match exactly
         * when the cache demotes nothing) */
        fkv_match_info mi;
        st = fkv_seq_match_tiers(r->seq, tok, limit, limit, &mi);
        if (st) return fail(s, st, "request %llu: fkv_seq_match_tiers: %s", (unsigned long long)r->id,
                            fkv_cache_last_error(s->cache));
        matched = mi.device_tokens + mi.host_tokens;
        host = mi.host_tokens;
    }
    if (s->cfg.import && r->tokens && limit > matched) {
        uint32_t k = s->cfg.import(s->cfg.import_ctx, r, matched, limit);
        if (k > limit - matched || fkv_seq_len(r->seq) != matched + k)
            return fail(s, FKV_ESTATE, "request %llu: import says %u tokens after %u (limit %u), sequence has %u",
                        (unsigned long long)r->id, k, matched, limit, fkv_seq_len(r->seq));
        matched += k;
    }
    r->computed = matched;
    s->live_tokens += matched;
    uint32_t remote = 0;
    if (limit && (tok || !s->cfg.pass_tokens) && (st = load_remote(s, r, limit, b, &remote)) != FKV_OK) return st;
    if (r->preemptions == 0) {
        r->matched = matched + remote;
        r->matched_host = host;
        r->matched_remote = remote;
    }
    return FKV_OK;
}

enum { ADMIT_NEXT, ADMIT_STOP };

/* Admits s->wait[wi] and gives it its share of the step.  ADMIT_STOP when
 * admission should stop in this step (no memory); *st on an error. */
static int admit_one(fkv_sched *s, size_t wi, fkv_batch *b, uint32_t *budget, fkv_status *st)
{
    fkv_req *r = s->wait[wi];
    if ((*st = open_seq(s, r, b)) != FKV_OK) return ADMIT_STOP;
    if (fkv_grow(&s->run, &s->cap_run, s->n_run + 1, sizeof *s->run)) {
        *st = FKV_ENOMEM;
        return ADMIT_STOP;
    }
    wait_remove(s, wi);
    s->run[s->n_run++] = r;
    r->state = FKV_REQ_RUNNING;
    r->served = 0;
    uint64_t prev_order = r->admit_order;
    r->admit_order = ++s->admit_counter;
    if (r->seq) fkv_seq_pin(r->seq);
    int rc = serve(s, r, b, budget, 1, st);
    if (*st) return ADMIT_STOP;
    if (rc == NOROOM) {
        /* back to where it was; it keeps its sequence (unpinned) */
        s->n_run--;
        r->state = FKV_REQ_WAITING;
        if (r->seq) fkv_seq_unpin(r->seq);
        r->admit_order = prev_order;
        if (s->n_run == 0 && b->n == 0) {
            /* nothing else holds pinned memory: it can never fit */
            release_seq(s, r);
            r->state = FKV_REQ_REJECTED;
            s->client_live[r->client]--;
            s->rejections++;
            return ADMIT_NEXT;
        }
        if (s->cfg.on_preempt == FKV_PREEMPT_FREE) {
            r->target = known_tokens(r);
            release_seq(s, r);
            r->computed = 0;
        }
        memmove(s->wait + wi + 1, s->wait + wi, (s->n_wait - wi) * sizeof *s->wait);
        s->wait[wi] = r;
        s->n_wait++;
        r->state = FKV_REQ_WAITING;
        return ADMIT_STOP;
    }
    if (rc == GONE && r->state == FKV_REQ_REJECTED) return ADMIT_NEXT;
    if (rc == STALLED) return ADMIT_STOP; /* admitted with its restores; no memory for more */
    return ADMIT_NEXT;
}

/* Prefill work a request has left: none once it decodes (one token a
 * step after its first output: computed + 1 == target), else its target
 * minus what it has. */
static uint32_t prefill_left(const fkv_req *r)
{
    if (r->computed >= r->target || (r->generated && r->computed + 1 == r->target)) return 0;
    return r->target - r->computed;
}

/* Which running requests a pass of the share visits. */
enum { PICK_DECODING, PICK_TENANT_PREFILL, PICK_UNSERVED };

/* The running requests of kind `kind` (of `tenant` for
 * PICK_TENANT_PREFILL), as they are now: a pass then visits each one still
 * running and not yet served, whatever preemptions did to the running
 * set's order meanwhile.  -1 on allocation failure. */
static long pick_running(fkv_sched *s, int kind, uint64_t tenant)
{
    if (fkv_grow(&s->pick, &s->cap_pick, s->n_run + 1, sizeof *s->pick)) return -1;
    long n = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        const fkv_req *r = s->run[i];
        int want = kind == PICK_DECODING        ? !prefill_left(r)
                   : kind == PICK_TENANT_PREFILL ? !r->served && r->tenant == tenant && prefill_left(r)
                                                 : !r->served;
        if (want) s->pick[n++] = s->run[i];
    }
    return n;
}

/* Serves the picked requests still running and unserved; with `limited`,
 * only while their tenant has allotment left. */
static fkv_status serve_picked(fkv_sched *s, long n, fkv_batch *b, uint32_t *budget, int limited)
{
    fkv_status st = FKV_OK;
    for (long i = 0; i < n; i++) {
        fkv_req *r = s->pick[i];
        if (r->state != FKV_REQ_RUNNING || r->served) continue;
        if (limited && !tenant_left(s, r)) continue;
        serve(s, r, b, budget, 0, &st);
        if (st) return st;
    }
    return FKV_OK;
}

/* The allotments of this step (sched.h): deficit rounds over the tenants
 * with prefill work, each bounded by its demand. */
static fkv_status drr_plan(fkv_sched *s, uint32_t budget)
{
    for (size_t i = 0; i < s->n_drr; i++) s->drr[i].demand = 0;
    for (size_t i = 0; i < s->n_run + s->n_wait; i++) {
        const fkv_req *r = i < s->n_run ? s->run[i] : s->wait[i - s->n_run];
        if (i < s->n_run && (r->served || !prefill_left(r))) continue;
        struct drr_tenant *e = drr_entry(s, r->tenant);
        if (!e) return FKV_ENOMEM;
        /* a waiting request's prefix hits are not known before its match:
         * its demand is an upper bound, and what it leaves is passed on */
        e->demand += i < s->n_run || prefill_left(r) ? prefill_left(r) : 1;
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
static int admission_fits(fkv_sched *s, const fkv_req *r)
{
    if (!s->cache || !s->n_run) return 1;
    fkv_cache_info ci;
    if (fkv_cache_get_info(s->cache, &ci) != FKV_OK || !ci.page_tokens) return 1;
    uint64_t pt = ci.page_tokens, held = 0;
    for (size_t i = 0; i < s->n_run; i++) {
        const fkv_req *q = s->run[i];
        held += q->seq ? fkv_seq_pages(q->seq) : 0;
        held += (prefill_left(q) + pt - 1) / pt;
    }
    uint64_t need = (r->target > r->computed ? r->target - r->computed : 1) / pt + 1;
    return held + need <= ci.n_pages;
}

/* The step under the share: decoders (and their restores) first, then each
 * tenant's prefills and admissions within its allotment, then a leftover
 * pass over what is still unserved. */
static fkv_status drr_serve(fkv_sched *s, fkv_batch *b, uint32_t *budget, int *stop_admit)
{
    fkv_status st;
    for (size_t i = 0; i < s->n_drr; i++) s->drr[i].alloc = s->drr[i].extra = s->drr[i].used = s->drr[i].recomputed = 0;
    /* the plan counts a token for each decode; restores may take more */
    uint32_t decodes = 0;
    for (size_t i = 0; i < s->n_run; i++) decodes += !prefill_left(s->run[i]);
    if ((st = drr_plan(s, *budget > decodes ? *budget - decodes : 0)) != FKV_OK) return st;
    /* The oldest running request is served first, as in the plain order
     * (within its tenant's allotment when it prefills): no later one can
     * take its memory, so it always progresses and every request ends. */
    long n = 0;
    if (s->n_run) {
        /* whatever its tenant's debt, the oldest request gets at least its
         * tenant's weighted part of the step (and a token) */
        const fkv_req *o = s->run[0];
        struct drr_tenant *e = prefill_left(o) ? drr_entry(s, o->tenant) : NULL;
        if (e) {
            double w = 0;
            for (size_t i = 0; i < s->n_drr; i++)
                if (s->drr[i].demand) w += s->drr[i].weight;
            uint32_t plan = *budget > decodes ? *budget - decodes : 0;
            uint32_t floor_share = w > 0 ? (uint32_t)(plan * e->weight / w) : plan;
            if (floor_share < 1) floor_share = 1;
            if (e->alloc < floor_share) e->extra = floor_share - e->alloc;
        }
        if (fkv_grow(&s->pick, &s->cap_pick, 1, sizeof *s->pick)) return FKV_ENOMEM;
        s->pick[0] = s->run[0];
        s->drr_limit = 1;
        st = serve_picked(s, 1, b, budget, 0);
        s->drr_limit = 0;
        if (st != FKV_OK) return st;
    }
    if ((n = pick_running(s, PICK_DECODING, 0)) < 0) return FKV_ENOMEM;
    if ((st = serve_picked(s, n, b, budget, 0)) != FKV_OK) return st;
    size_t nt = s->n_drr, first = s->drr_first;
    s->drr_limit = 1;
    /* every tenant's running prefills, then every tenant's admissions
     * (each must fit: admission_fits) */
    for (size_t k = 0; k < nt; k++) {
        const struct drr_tenant *e = &s->drr[(first + k) % nt];
        if (!e->alloc && !e->extra) continue;
        if ((n = pick_running(s, PICK_TENANT_PREFILL, e->tenant)) < 0) return FKV_ENOMEM;
        if ((st = serve_picked(s, n, b, budget, 1)) != FKV_OK) return st;
    }
    /* what a tenant leaves of its allotment goes to those after it in
     * this step's order, by weight (work conservation without serving a
     * request twice in a step) */
    uint32_t pool = 0;
    for (size_t k = 0; k < nt; k++) {
        struct drr_tenant *e = &s->drr[(first + k) % nt];
        uint64_t t = e->tenant;
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
        while (!*stop_admit && *budget && s->n_run < s->cfg.max_running &&
               !(s->cfg.no_admit_after_preempt && b->preempted && b->n)) {
            size_t wi = 0;
            while (wi < s->n_wait && s->wait[wi]->tenant != t) wi++;
            if (wi == s->n_wait || !tenant_left(s, s->wait[wi]) || !admission_fits(s, s->wait[wi])) break;
            int next = admit_one(s, wi, b, budget, &st);
            if (st) return st;
            if (next == ADMIT_STOP) *stop_admit = 1;
        }
        e = &s->drr[(first + k) % nt]; /* admissions may have moved the table */
        if (e->alloc + e->extra > e->used) pool += e->alloc + e->extra - e->used;
    }
    s->drr_limit = 0;
    s->drr_first = nt ? (first + 1) % nt : 0;
    if ((n = pick_running(s, PICK_UNSERVED, 0)) < 0) return FKV_ENOMEM;
    return serve_picked(s, n, b, budget, 0);
}

/* After the step: each tenant pays what it computed (sched.h); one with
 * no prefill work left keeps no credit. */
static void drr_settle(fkv_sched *s)
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
        if (i < s->n_run && !prefill_left(r)) continue;
        for (size_t k = 0; k < s->n_drr; k++)
            if (s->drr[k].tenant == r->tenant) s->drr[k].demand = 1;
    }
    for (size_t i = 0; i < s->n_drr; i++)
        if (!s->drr[i].demand && s->drr[i].deficit > 0) s->drr[i].deficit = 0;
}

fkv_status fkv_sched_step(fkv_sched *s, int64_t now, fkv_batch *b)
{
    fkv_status st = FKV_OK;
    b->n = 0;
    b->n_ranges = 0;
    s->n_restored = 0;
    b->tokens = 0;
    b->reload_tokens = 0;
    b->host_tokens = 0;
    b->remote_tokens = 0;
    b->remote_fetches = 0;
    b->preempted = 0;
    b->wake_ns = 0;
    uint32_t budget = s->cfg.max_batch_tokens;
    s->step_ns = now;
    s->fair_choice = NULL;
    s->drr_on = s->cfg.step_share == FKV_STEP_DRR && s->cfg.chunked_prefill && s->cfg.mode == FKV_SCHED_CONTINUOUS;
    s->drr_limit = 0;
    tenant_share_start(s);
    /* running requests stay pinned from admission to the end (or their
     * preemption): every step reads their whole context, and no cache call
     * happens between steps, so unpinning them in between would only churn
     * the policy's structures */
    for (size_t i = 0; i < s->n_run; i++) s->run[i]->served = 0;
    int stop_admit = 0; /* the step share's admission found no memory */
    if (s->drr_on) {
        if ((st = drr_serve(s, b, &budget, &stop_admit)) != FKV_OK) return st;
    } else {
        /* running requests, oldest first; preemption removes from the tail side */
        for (size_t i = 0; i < s->n_run;) {
            fkv_req *r = s->run[i];
            size_t before = s->n_run;
            int rc = serve(s, r, b, &budget, 0, &st);
            if (st) return st;
            if (rc == SERVED || rc == STALLED) i++;
            else if (s->n_run == before) i++; /* defensive: r stayed */
            /* else r left the running set: the same index now holds the next one */
        }
    }
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
    while (may_admit && !stop_admit && s->n_wait && s->n_run < s->cfg.max_running &&
           (budget > 0 || s->cfg.mode == FKV_SCHED_DYNAMIC)) {
        size_t wi = pick_waiting(s);
        if (wi == s->n_wait) break; /* every waiting tenant used its step share */
        if (s->drr_on && !admission_fits(s, s->wait[wi])) break;
        int next = admit_one(s, wi, b, &budget, &st);
        if (st) return st;
        if (next == ADMIT_STOP) break;
    }
    if (s->drr_on) drr_settle(s);
    /* over the budget only as one item restoring one chunk larger than it */
    int alone = b->n == 1 && b->items[0].n_new == 0 && b->items[0].n_ranges == 1;
    if (b->tokens > s->cfg.max_batch_tokens && !alone)
        return fail(s, FKV_ESTATE, "step of %u tokens over the budget %u", b->tokens, s->cfg.max_batch_tokens);
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
        return fail(s, FKV_EINVAL, "emit: item %zu of %zu does not emit", i, b->n);
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
            release_seq(s, r);
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
