/* The simulator's event loop (see sim.h). */
#include "sim/sim.h"
#include "fairkv_quant.h"

#include "sim/fairness.h"
#include "sim/oracle.h"
#include "sim/remote_store.h"
#include "util/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void fkv_sim_config_default(fkv_sim_config *c)
{
    memset(c, 0, sizeof *c);
    fkv_sched_config_default(&c->sched);
    c->block_tokens = 512;
    c->alpha = c->beta = c->temperature = -1;
    c->min_retention_ns = -1;
    c->quant = -1;
    c->tenant_step_share = -1;
    c->quant_dtype = -1;
    c->quant_hot = -1;
    for (int t = 0; t < FKV_SIM_MAX_TENANTS; t++) c->tenant_weight[t] = 1;
    c->quotas = -1;
    c->share_guarantee = -1;
    c->step_share = c->admit_reclaim = -1;
    c->step_bound = -1;
    c->victim = -1;
    c->host_policy = -1;
    c->remote_bytes_per_s = FKV_SIM_REMOTE_BYTES_PER_S;
    c->remote_latency_ns = FKV_SIM_REMOTE_LATENCY_NS;
}

/* What Belady's MIN may know: the simulator's view of every request. */
typedef struct belady_ctx {
    const fkv_req *reqs;
    size_t n;
    const int64_t *now;
    fkv_oracle *oracle; /* future prefix reads; NULL without shared blocks */
    size_t frontier;    /* requests below it have all started */
} belady_ctx;

/* Next use of a chunk, ns.  The policy keys a chunk when it becomes
 * evictable and when it is read, so the answer must be an absolute time
 * that stays comparable as the clock moves.
 *  - A running request reads its whole context at every step (its chunks
 *    are pinned anyway): now.
 *  - A preempted request (kept sequence) resumes in preemption order,
 *    latest first (it went to the queue's front); its resume time is
 *    unknown, so it is placed after every running use and every known
 *    arrival, the later preempted the sooner.
 *  - A cached chunk (its request finished) is read again only through a
 *    prefix match: the oracle knows which later request's prompt holds its
 *    first page and when that request arrives; none = never.
 * This is MIN with an ordinal estimate for preempted requests, not an exact
 * oracle of the closed loop (docs/EVALUATION.md, section 3). */
static int64_t belady_next_use(void *vctx, const fkv_chunk_view *view, const fkv_chunk_info *ch)
{
    belady_ctx *b = vctx;
    (void)view;
    if (ch->owner == 0 || ch->owner > b->n) {
        if (!b->oracle) return INT64_MAX;
        while (b->frontier < b->n) {
            const fkv_req *f = &b->reqs[b->frontier];
            if (f->state == FKV_REQ_PENDING || (f->state == FKV_REQ_WAITING && f->admit_order == 0)) break;
            b->frontier++;
        }
        return fkv_oracle_next(b->oracle, ch->first_hash, b->reqs, b->frontier, *b->now);
    }
    const fkv_req *r = &b->reqs[ch->owner - 1];
    switch (r->state) {
    case FKV_REQ_RUNNING: return *b->now;
    case FKV_REQ_WAITING: {
        /* 2^50 ns (13 days) lies beyond any simulated time and keeps the
         * policy's double keys exact (53-bit mantissa): near INT64_MAX/2
         * consecutive orders would round to one key */
        uint64_t o = r->preempt_order < (1ULL << 40) ? r->preempt_order : (1ULL << 40);
        return (INT64_C(1) << 50) - (int64_t)o;
    }
    default: return INT64_MAX;
    }
}

void fkv_vllm_batch_defaults(const fkv_profile *p, uint32_t *max_batch_tokens, uint32_t *max_running)
{
    /* vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, the
     * OpenAI-server column: a GPU of 70 GiB or more whose name does not
     * say A100 (H100, H200, MI300x) gets 8192 / 1024, any other 2048 / 256
     * (A100-80GB included: vLLM PR #17885 found the larger budget slower
     * there); then max_num_seqs <= max_num_batched_tokens */
    int big = p && p->gpu_mem_bytes >= 70.0 * 1024 * 1024 * 1024 && p->gpu && !strstr(p->gpu, "A100") &&
              !strstr(p->gpu, "a100");
    *max_batch_tokens = big ? 8192 : 2048;
    *max_running = big ? 1024 : 256;
    if (*max_running > *max_batch_tokens) *max_running = *max_batch_tokens;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct loop_out {
    uint64_t peak_live, steps, max_step_tokens, remote_fetched;
    int64_t end_ns;
    double service_diff;
    /* each tenant's tokens served by the share window's end
     * (fkv_sim_tenant.window_tokens) */
    uint64_t window_tokens[FKV_SIM_MAX_TENANTS + 1];
} loop_out;

/* The share window's end: the workload's last arrival. */
static int64_t last_arrival(const fkv_workload *w)
{
    int64_t t = w->n ? w->reqs[0].arrival_ns : 0;
    for (size_t i = 1; i < w->n; i++)
        if (w->reqs[i].arrival_ns > t) t = w->reqs[i].arrival_ns;
    return t;
}

/* The share window closes (at the first step start at or after its end,
 * or at the run's end if that comes first): each tenant's tokens served so
 * far. */
static void window_close(loop_out *o, const fkv_req *reqs, size_t n, uint32_t n_tenants)
{
    for (size_t i = 0; i < n; i++) {
        const fkv_req *r = &reqs[i];
        uint32_t t = r->tenant <= n_tenants ? (uint32_t)r->tenant : 0;
        uint64_t prompt = r->generated || r->state == FKV_REQ_DONE ? r->prompt
                          : r->computed < r->prompt                ? r->computed
                                                                   : r->prompt;
        o->window_tokens[t] += prompt + r->generated;
    }
}

/* VTC's service difference over a run (fairness.h).  A tenant is
 * backlogged, as in VTC, while one of its requests waits in the queue
 * (arrived and not admitted, or preempted): a tenant whose requests all run
 * already takes what it can and is owed nothing more.  Backlogs are read
 * at each step's start, the step's service is added, the gap observed at
 * its end.  Tenant runs only. */
typedef struct service_track {
    fkv_service_diff d;
    uint32_t n;                 /* tenants; 0 = not tracked */
    double inv_weight[FKV_SIM_MAX_TENANTS + 1];
    size_t *open, n_open;       /* indices of arrived requests not yet finished */
} service_track;

static int track_init(service_track *t, const fkv_sim_config *cfg, size_t n_reqs)
{
    memset(t, 0, sizeof *t);
    if (!cfg->n_tenants || cfg->n_tenants > FKV_SIM_MAX_TENANTS) return 0;
    if (fkv_service_diff_init(&t->d, cfg->n_tenants) || !(t->open = malloc((n_reqs ? n_reqs : 1) * sizeof *t->open))) {
        fkv_service_diff_free(&t->d);
        return -1;
    }
    t->n = cfg->n_tenants;
    for (uint32_t k = 1; k <= t->n; k++) t->inv_weight[k] = 1.0 / cfg->tenant_weight[k - 1];
    return 0;
}

static void track_free(service_track *t)
{
    fkv_service_diff_free(&t->d);
    free(t->open);
}

static uint32_t tenant_of(const service_track *t, const fkv_req *r) { return r->tenant <= t->n ? (uint32_t)r->tenant : 0; }

static void track_arrive(service_track *t, size_t idx)
{
    if (t->n) t->open[t->n_open++] = idx;
}

/* Before the step (formed, not yet finished): who waits, so is
 * backlogged.  Finished requests leave the open list here. */
static void track_before(service_track *t, const fkv_req *reqs)
{
    if (!t->n) return;
    uint8_t waiting[FKV_SIM_MAX_TENANTS + 1] = {0};
    size_t k = 0;
    for (size_t i = 0; i < t->n_open; i++) {
        const fkv_req *r = &reqs[t->open[i]];
        if (r->state == FKV_REQ_DONE || r->state == FKV_REQ_REJECTED) continue;
        t->open[k++] = t->open[i];
        if (r->state == FKV_REQ_WAITING) waiting[tenant_of(t, r)] = 1;
    }
    t->n_open = k;
    for (uint32_t q = 1; q <= t->n; q++) fkv_service_diff_backlog(&t->d, q - 1, waiting[q]);
}

/* After the step: the service it gave, as VTC counts it
 * (fkv_sched_item_cost), then the observation. */
static void track_after(service_track *t, const fkv_batch *b, const fkv_sched_config *sc)
{
    if (!t->n) return;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t k = tenant_of(t, b->items[i].r);
        if (k) fkv_service_diff_serve(&t->d, k - 1, fkv_sched_item_cost(sc, &b->items[i]) * t->inv_weight[k]);
    }
    fkv_service_diff_observe(&t->d);
}

/* The event loop over reqs (a private copy of the workload's requests). */
/* The remote tier's share of a step: its fetches' bytes over the network
 * and one round trip each, in series with the step (the admitting step
 * waits for them; nothing overlaps them with compute).  Bytes are the
 * model's whole K/V (all tensor-parallel shards: one node's network). */
int64_t fkv_sim_remote_ns(const fkv_sim_config *cfg, const fkv_batch *b)
{
    if (!b->remote_fetches || !cfg->profile || !cfg->profile->model) return 0;
    double s = 0;
    if (cfg->remote_bytes_per_s > 0)
        s = (double)b->remote_tokens * (double)fkv_model_token_bytes(cfg->profile->model) / cfg->remote_bytes_per_s;
    return llround(s * 1e9) + (int64_t)b->remote_fetches * cfg->remote_latency_ns;
}

/* fkv_sched_config.below over the remote store: the scheduler appends
 * what it holds, as loaded. */
/* step_bound's cost hook (sched.h): the profile's step time. */
struct bound_cost {
    const fkv_profile *p;
    fkv_miss_mode miss;
};

static int64_t bound_step_cost(void *ctx, const fkv_batch *b)
{
    const struct bound_cost *c = ctx;
    return fkv_profile_step_ns(c->p, b, c->miss);
}

static uint32_t remote_below(void *ctx, fkv_req *r, uint32_t limit, uint64_t *fetched, int *appended)
{
    *appended = 0;
    return fkv_remote_store_find(ctx, r, r->computed, limit, fetched);
}

/* Write-back at request end: the requests this step finished. */
static void remote_write_back(fkv_remote_store *rs, const fkv_batch *b)
{
    if (!rs) return;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].r->state == FKV_REQ_DONE) fkv_remote_store_put(rs, b->items[i].r, b->items[i].r->computed);
}

/* --price-kv-bytes: per item, the bytes its sequence's chunks take at
 * their stored precisions (fkv_kvc_bytes: codes and scales) over the same
 * tokens at fp16; an fp8 scheme's tokens are all fp8 (half). */
static fkv_status kv_factors(const fkv_sim_config *cfg, const fkv_batch *b, int kv_fp8, double **buf, size_t *cap)
{
    if (b->n > *cap) {
        double *nb = realloc(*buf, b->n * sizeof *nb);
        if (!nb) return FKV_ENOMEM;
        *buf = nb, *cap = b->n;
    }
    const fkv_model_geom *m = cfg->profile->model;
    for (size_t i = 0; i < b->n; i++) {
        double f = kv_fp8 ? (double)fkv_kvc_bytes(FKV_KVC_FP8, 64, m->n_kv_heads, m->head_dim) /
                                (double)fkv_kvc_bytes(FKV_KVC_F16, 64, m->n_kv_heads, m->head_dim)
                          : 1.0;
        const fkv_req *r = b->items[i].r;
        if (!kv_fp8 && r->seq) {
            const fkv_chunk_view *const *v;
            size_t nc;
            fkv_seq_chunks(r->seq, &v, &nc);
            double q = 0, h = 0;
            for (size_t j = 0; j < nc; j++) {
                if (!v[j]->resident || !v[j]->n_tokens) continue;
                /* fp8 chunks: codes as fp8-head's (their per-chunk scales, 8 bytes per
                 * layer and kv head, are below a part in a thousand of a chunk) */
                fkv_kvc c = v[j]->dtype == FKV_INT8   ? FKV_KVC_INT8
                            : v[j]->dtype == FKV_INT4 ? FKV_KVC_INT4
                            : v[j]->dtype == FKV_FP8  ? FKV_KVC_FP8_HEAD
                                                      : FKV_KVC_F16;
                q += (double)fkv_kvc_bytes(c, v[j]->n_tokens, m->n_kv_heads, m->head_dim);
                h += (double)fkv_kvc_bytes(FKV_KVC_F16, v[j]->n_tokens, m->n_kv_heads, m->head_dim);
            }
            if (h > 0) f = q / h;
        }
        (*buf)[i] = f;
    }
    return FKV_OK;
}

/* Fitted 7-term profiles (profile.h, kv_byte_ms): attention's time per
 * K/V byte read, by stored precision, as the engine's calibration learned
 * it.  Per item: with --price-kv-bytes its resident chunks' bytes at their
 * precisions (codes and scales; an fp8 row's ctx + new tokens at fp8, priced
 * as full precision's, no fp8 price being fitted), else ctx + new tokens at
 * fp16; all layers, over the tensor-parallel GPUs. */
static int64_t kv_bytes_ns(const fkv_sim_config *cfg, const fkv_batch *b, int kv_fp8)
{
    const fkv_profile *p = cfg->profile;
    const fkv_model_geom *m = p->model;
    if (!m) return 0;
    double ms = 0;
    for (size_t i = 0; i < b->n; i++) {
        const fkv_batch_item *it = &b->items[i];
        double by[3] = {0, 0, 0};
        if (cfg->price_kv_bytes && !kv_fp8 && it->r->seq) {
            const fkv_chunk_view *const *v;
            size_t nc;
            fkv_seq_chunks(it->r->seq, &v, &nc);
            for (size_t j = 0; j < nc; j++) {
                if (!v[j]->resident || !v[j]->n_tokens) continue;
                int k = v[j]->dtype == FKV_INT8 ? 1 : v[j]->dtype == FKV_INT4 ? 2 : 0;
                fkv_kvc c = k == 1 ? FKV_KVC_INT8 : k == 2 ? FKV_KVC_INT4 : FKV_KVC_F16;
                by[k] += (double)fkv_kvc_bytes(c, v[j]->n_tokens, m->n_kv_heads, m->head_dim);
            }
        } else {
            uint64_t t = (uint64_t)it->ctx + it->n_new;
            if (t > UINT32_MAX) t = UINT32_MAX;
            by[0] = (double)fkv_kvc_bytes(kv_fp8 && cfg->price_kv_bytes ? FKV_KVC_FP8 : FKV_KVC_F16, (uint32_t)t,
                                          m->n_kv_heads, m->head_dim);
        }
        ms += (by[0] * p->kv_byte_ms[0] + by[1] * p->kv_byte_ms[1] + by[2] * p->kv_byte_ms[2]) * m->n_layers / p->tp;
    }
    return llround(ms * 1e6);
}

/* One step of cfg->step_trace (FKV_SIM_STEP_TRACE_HEADER); -1 on a write
 * error. */
static int trace_step(FILE *f, const char *scheme, int64_t t0, int64_t t1, const fkv_batch *b)
{
    static const char kinds[] = {[FKV_ITEM_RESTORE] = 'R', [FKV_ITEM_PROMPT] = 'P', [FKV_ITEM_REFILL] = 'F',
                                 [FKV_ITEM_DECODE] = 'D'};
    int bad = fprintf(f, "%s %lld %lld %u %zu", scheme, (long long)t0, (long long)t1, b->tokens, b->n) < 0;
    for (size_t i = 0; i < b->n && !bad; i++) {
        const fkv_batch_item *it = &b->items[i];
        char k = (unsigned)it->kind < sizeof kinds ? kinds[it->kind] : '?';
        bad = fprintf(f, " %llu,%c,%u,%u,%u,%llu,%lld,%d", (unsigned long long)it->r->tenant, k, it->n_new, it->ctx,
                      it->n_restored, (unsigned long long)it->r->id, (long long)it->r->arrival_ns, it->first) < 0;
    }
    return bad || fputc('\n', f) == EOF ? -1 : 0;
}

static fkv_status run_loop(fkv_req *reqs, size_t n, fkv_sched *s, fkv_cache *cache, const fkv_sim_config *cfg,
                           fkv_remote_store *rs, int64_t window_end, int64_t *now, loop_out *o, const char *label,
                           int kv_fp8, char *err, size_t errlen)
{
    double *kvf = NULL;
    size_t kvf_cap = 0;
    fkv_batch b = {0};
    size_t next = 0;
    fkv_status st = FKV_OK;
    int tty = cfg->progress && isatty(2);
    double t_last = wall_s();
    memset(o, 0, sizeof *o);
    *now = 0;
    service_track tr;
    int windowed = 0;
    if (track_init(&tr, cfg, n)) return FKV_ENOMEM;
    while (fkv_sched_finished(s) < n) {
        while (next < n && reqs[next].arrival_ns <= *now) {
            if ((st = fkv_sched_add(s, &reqs[next])) != FKV_OK) {
                fkv_errf(err, errlen, st, "%s", fkv_sched_last_error(s));
                goto out;
            }
            track_arrive(&tr, next);
            next++;
        }
        if (!windowed && *now >= window_end) {
            window_close(o, reqs, n, cfg->n_tenants);
            windowed = 1;
        }
        if (fkv_sched_n_running(s) == 0 && fkv_sched_n_waiting(s) == 0) {
            if (next >= n) break;
            *now = reqs[next].arrival_ns;
            continue;
        }
        if ((st = fkv_sched_step(s, *now, &b)) != FKV_OK) {
            fkv_errf(err, errlen, st, "scheduler: %s (%s)", fkv_sched_last_error(s),
                 cache ? fkv_last_error() : "");
            goto out;
        }
        if (b.n == 0) {
            /* nothing ran: requests may have been rejected (then go on), or
             * the batch window is open (wait for it or an arrival) */
            if (fkv_sched_n_running(s) == 0 && fkv_sched_n_waiting(s) == 0) continue;
            int64_t t = b.wake_ns > *now ? b.wake_ns : INT64_MAX;
            if (next < n && reqs[next].arrival_ns < t) t = reqs[next].arrival_ns;
            if (t == INT64_MAX) {
                st = fkv_errf(err, errlen, FKV_ESTATE, "simulation stuck at t=%lld ns with %zu waiting, %zu running",
                          (long long)*now, fkv_sched_n_waiting(s), fkv_sched_n_running(s));
                goto out;
            }
            *now = t;
            continue;
        }
        int64_t t_start = *now;
        if (b.tokens > o->max_step_tokens) o->max_step_tokens = b.tokens;
        if (cfg->price_kv_bytes && cfg->profile->model) {
            if ((st = kv_factors(cfg, &b, kv_fp8, &kvf, &kvf_cap)) != FKV_OK) goto out;
            *now += fkv_profile_step_ns_kv(cfg->profile, &b, cfg->sched.miss, kvf);
        } else {
            *now += fkv_profile_step_ns(cfg->profile, &b, cfg->sched.miss);
        }
        if (cfg->profile->kv_byte_ms[0] != 0 || cfg->profile->kv_byte_ms[1] != 0 || cfg->profile->kv_byte_ms[2] != 0)
            *now += kv_bytes_ns(cfg, &b, kv_fp8);
        if (b.remote_fetches) {
            *now += fkv_sim_remote_ns(cfg, &b);
            o->remote_fetched += b.remote_tokens;
        }
        if (cfg->step_trace && trace_step(cfg->step_trace, label, t_start, *now, &b)) {
            st = fkv_errf(err, errlen, FKV_EIO, "step trace: write failed");
            goto out;
        }
        track_before(&tr, reqs);
        if ((st = fkv_sched_finish(s, &b, *now)) != FKV_OK) {
            fkv_errf(err, errlen, st, "scheduler finish: %s", fkv_sched_last_error(s));
            goto out;
        }
        remote_write_back(rs, &b);
        track_after(&tr, &b, &cfg->sched);
        o->steps++;
        uint64_t live = fkv_sched_live_tokens(s);
        if (live > o->peak_live) o->peak_live = live;
        if (tty && (o->steps & 1023) == 0 && wall_s() - t_last > 0.5) {
            t_last = wall_s();
            fprintf(stderr, "\r  %-12s %llu/%zu requests, t=%.1f s   ", label,
                    (unsigned long long)fkv_sched_finished(s), n, *now * 1e-9);
        }
    }
    if (tty) fprintf(stderr, "\r%60s\r", "");
out:
    o->end_ns = *now;
    if (!windowed) window_close(o, reqs, n, cfg->n_tenants);
    o->service_diff = tr.n ? tr.d.max_diff : 0;
    track_free(&tr);
    free(kvf);
    fkv_batch_free(&b);
    return st;
}

uint64_t fkv_sim_host_bytes(const fkv_sim_config *cfg, uint64_t device_bytes)
{
    return cfg->host_x > 0 ? (uint64_t)(cfg->host_x * (double)device_bytes) : cfg->host_capacity_bytes;
}

static fkv_status make_cache(const fkv_scheme *sc, const fkv_sim_config *cfg, int64_t *now, belady_ctx *bctx,
                             fkv_cache **cache, char *err, size_t errlen)
{
    fkv_config cc;
    fkv_config_default(&cc);
    const fkv_model_geom *m = cfg->profile->model;
    cc.n_layers = m->n_layers;
    cc.n_kv_heads = m->n_kv_heads;
    cc.head_dim = m->head_dim;
    cc.dtype = FKV_F16;
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.page_tokens = sc->page_tokens;
    /* fp8 KV (vllm-fp8): vLLM sizes a block by its dtype (kv_cache_interface.py,
     * page_size_bytes), so the same bytes hold exactly twice the blocks; the
     * phantom cache just has twice the pages.  Per-tensor scales, every token
     * fp8, no full-precision window: nothing else changes in the simulator,
     * and its accuracy is not priced into its latency; the reports print it
     * beside the row (accuracy.h, docs/EVALUATION.md) */
    uint64_t mult = sc->kv_fp8 ? 2 : 1;
    uint64_t pages = (cfg->capacity_tokens + sc->page_tokens - 1) / sc->page_tokens;
    if (pages * mult > UINT32_MAX) return fkv_errf(err, errlen, FKV_EINVAL, "capacity of %llu pages is too large",
                                        (unsigned long long)(pages * mult));
    cc.capacity_pages = (uint32_t)(pages * mult);
    cc.capacity_bytes = pages * sc->page_tokens * fkv_model_token_bytes(m);
    cc.free_tail_first = sc->free_tail_first;
    cc.chunk_tokens = sc->chunk_tokens;
    cc.dynamic_chunking = sc->dynamic_chunking;
    cc.policy = sc->policy;
    cc.quotas = cfg->quotas >= 0 ? cfg->quotas : sc->quotas;
    cc.share_guarantee = cc.quotas == FKV_QUOTA_TENANT
                             ? (cfg->share_guarantee >= 0 ? cfg->share_guarantee : sc->share_guarantee)
                             : 0;
    cc.prefix_cache = sc->prefix_cache;
    if (cfg->alpha >= 0) cc.alpha = cfg->alpha;
    if (cfg->beta >= 0) cc.beta = cfg->beta;
    if (cfg->temperature >= 0) cc.temperature = cfg->temperature;
    if (cfg->min_retention_ns >= 0) cc.min_chunk_retention_ns = cfg->min_retention_ns;
    cc.quant_mode = fkv_sim_quant_mode(cfg, sc);
    cc.quant_dtype = fkv_sim_quant_dtype(cfg, sc);
    cc.quant_hot_tokens = fkv_sim_quant_hot(cfg, sc);
    cc.quant_warm_tokens = cfg->quant_warm;
    cc.host_capacity_bytes = fkv_sim_host_bytes(cfg, cc.capacity_bytes);
    cc.host_demote = cfg->host_demote;
    cc.tier_admission = cfg->tier_admission;
    cc.host_policy = cfg->host_demote ? fkv_sim_host_policy(cfg, sc) : FKV_HOST_LRU;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = now;
    cc.thread_safe = 0;
    cc.device_label = "sim0";
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = cfg->block_tokens;
    if (!strcmp(sc->policy, "belady")) {
        ev.next_use = belady_next_use;
        ev.next_use_ctx = bctx;
    }
    char e[256] = "";
    fkv_status st = fkv_cache_create_eval(&cc, &ev, cache, e, sizeof e);
    if (st) return fkv_errf(err, errlen, st, "scheme %s: fkv_cache_create: %s (%s)", sc->name, fkv_strerror(st), e);
    for (uint32_t t = 0; t < cfg->n_tenants; t++)
        if ((st = fkv_cache_set_tenant_weight(*cache, t + 1, cfg->tenant_weight[t])) != FKV_OK) {
            fkv_errf(err, errlen, st, "scheme %s: tenant %u weight %g: %s", sc->name, t + 1, cfg->tenant_weight[t],
                     fkv_last_error());
            fkv_cache_destroy(*cache);
            *cache = NULL;
            return st;
        }
    return FKV_OK;
}

/* The remote store of a run: entries of one page each, as the served
 * engine writes its Redis tier (src/server/backend_remote.c: every full
 * page of a finished request, keyed by its chained prefix), as many as the
 * capacity's bytes hold.  (Chunks of the scheme's size, as before, lost
 * every request's partial last chunk, which the real tier keeps.) */
static fkv_status make_remote(const fkv_scheme *sc, const fkv_sim_config *cfg, const fkv_workload *w,
                              const fkv_sim_tokens *tokens, fkv_remote_store **rs, char *err, size_t errlen)
{
    uint32_t c = sc->page_tokens;
    uint64_t chunk_bytes = (uint64_t)c * fkv_model_token_bytes(cfg->profile->model);
    uint64_t keys = 0;
    for (size_t i = 0; i < w->n; i++) keys += ((uint64_t)w->reqs[i].prompt + w->reqs[i].output) / c;
    uint64_t chunks = cfg->remote_capacity_bytes / chunk_bytes;
    if (!chunks) return fkv_errf(err, errlen, FKV_EINVAL, "remote tier of %llu bytes holds no %u-token chunk",
                                 (unsigned long long)cfg->remote_capacity_bytes, c);
    *rs = fkv_remote_store_create(chunks, c, tokens, keys);
    if (!*rs) return FKV_ENOMEM;
    /* the window: ten sightings per chunk the store holds (Caffeine's
     * TinyLFU sample size), as the host tier's per page */
    if (cfg->tier_admission != FKV_TIER_ADMIT_OFF && fkv_remote_store_admit(*rs, cfg->tier_admission, 10 * chunks, 2))
        return FKV_ENOMEM;
    fkv_host_policy order = fkv_sim_host_policy(cfg, sc);
    if (order != FKV_HOST_LRU && fkv_remote_store_policy(*rs, order)) return FKV_ENOMEM;
    return FKV_OK;
}

void fkv_sim_result_free(fkv_sim_result *r)
{
    free(r->e2e_ns);
    free(r->ttft_ns);
    free(r->tpot_ns);
    free(r->cls);
    free(r->tenant);
    memset(r, 0, sizeof *r);
}

/* The per-request arrays of a result, every latency "not done" (-1). */
static fkv_status alloc_result(fkv_sim_result *res, size_t n)
{
    res->e2e_ns = malloc(n * sizeof *res->e2e_ns);
    res->ttft_ns = malloc(n * sizeof *res->ttft_ns);
    res->tpot_ns = malloc(n * sizeof *res->tpot_ns);
    res->cls = calloc(n, 1);
    res->tenant = calloc(n, 1);
    if (!res->e2e_ns || !res->ttft_ns || !res->tpot_ns || !res->cls || !res->tenant) {
        fkv_sim_result_free(res);
        return FKV_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) res->e2e_ns[i] = res->ttft_ns[i] = res->tpot_ns[i] = -1;
    res->n = n;
    return FKV_OK;
}

static fkv_status run_whole(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg,
                           int64_t window_end, fkv_sim_result *res, char *err, size_t errlen);

/* The figures' combining and counting, from their list (result_fields.h):
 * run_apart combines the tenants' runs r into res by each figure's `apart`
 * rule; run_whole sums each ALL / DONE figure's request field over the
 * requests r (DONE: the finished ones). */
#define APART_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) APART_##apart(name)
#define APART_SUM(name) res->name += r.name;
#define APART_MAX(name) if (r.name > res->name) res->name = r.name;
#define APART_LAST(name) res->name = r.name;
#define APART_HAND(name)
#define APART_DROP(name)
#define APART_SUMMARY(name)
#define COUNT_ALL(kind, name, apart, req, rf, summary, fmt, json, csv) COUNT_ALL_##req(name, rf)
#define COUNT_ALL_ALL(name, rf) res->name += r->rf;
#define COUNT_ALL_DONE(name, rf)
#define COUNT_ALL_HAND(name, rf)
#define COUNT_DONE(kind, name, apart, req, rf, summary, fmt, json, csv) COUNT_DONE_##req(name, rf)
#define COUNT_DONE_ALL(name, rf)
#define COUNT_DONE_DONE(name, rf) res->name += r->rf;
#define COUNT_DONE_HAND(name, rf)

/* Each tenant's requests run alone (ids renumbered: the sim and Belady
 * index requests by id - 1), at capacity cap(t) (0 = cfg's); the results
 * are put back at the requests' places, the counters summed, the
 * makespan the longest.  The isolated scheme and the partition both. */
static fkv_status run_apart(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg, int partition,
                            fkv_sim_result *res, char *err, size_t errlen)
{
    uint32_t nt = cfg->n_tenants ? cfg->n_tenants : 1;
    fkv_workload sub = *w;
    sub.session = sub.turn = NULL;
    sub.reqs = malloc(w->n * sizeof *sub.reqs);
    size_t *where = malloc(w->n * sizeof *where);
    fkv_status st = FKV_OK;
    if (!sub.reqs || !where) {
        st = FKV_ENOMEM;
        goto out;
    }
    if ((st = alloc_result(res, w->n)) != FKV_OK) goto out;
    res->n_tenants = cfg->n_tenants;
    res->n_light = w->n_light;
    for (uint32_t t = 1; t <= nt; t++) {
        sub.n = 0;
        uint32_t biggest = 0;
        for (size_t i = 0; i < w->n; i++) {
            uint32_t rt = cfg->n_tenants ? (uint32_t)w->reqs[i].tenant : 1;
            if (rt != t) continue;
            where[sub.n] = i;
            sub.reqs[sub.n] = w->reqs[i];
            sub.reqs[sub.n].id = sub.n + 1;
            if (w->reqs[i].prompt + w->reqs[i].output > biggest) biggest = w->reqs[i].prompt + w->reqs[i].output;
            sub.n++;
        }
        if (!sub.n) continue;
        fkv_sim_config c = *cfg;
        c.progress = 0;
        c.step_trace = NULL; /* the whole runs' steps only */
        if (partition && c.capacity_tokens) {
            /* a static 1/n partition, never below the tenant's largest
             * request plus one 256-token chunk: bench.c's capacity rule */
            c.capacity_tokens = (c.capacity_tokens + nt - 1) / nt;
            if (c.capacity_tokens < (uint64_t)biggest + 256) c.capacity_tokens = (uint64_t)biggest + 256;
        }
        fkv_sim_result r;
        if ((st = run_whole(&sub, sc, &c, last_arrival(w), &r, err, errlen)) != FKV_OK) goto out;
        for (size_t j = 0; j < sub.n; j++) {
            size_t i = where[j];
            res->e2e_ns[i] = r.e2e_ns[j];
            res->ttft_ns[i] = r.ttft_ns[j];
            res->tpot_ns[i] = r.tpot_ns[j];
            res->cls[i] = r.cls[j];
            res->tenant[i] = r.tenant[j];
        }
        FKV_RESULT_FIELDS(APART_FIELD)
        int64_t end = r.makespan_ns + sub.reqs[0].arrival_ns - w->reqs[0].arrival_ns;
        if (end > res->makespan_ns) res->makespan_ns = end;
        if (cfg->n_tenants) {
            res->tenants[t] = r.tenants[t];
            /* its window from the whole workload's first arrival, as the makespan */
            res->tenants[t].window_ns += sub.reqs[0].arrival_ns - w->reqs[0].arrival_ns;
        }
        fkv_sim_result_free(&r);
    }
out:
    free(sub.reqs);
    free(where);
    if (st) fkv_sim_result_free(res);
    return st;
}

fkv_status fkv_sim_partition(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg,
                             fkv_sim_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (!w->n || !cfg->profile) return fkv_errf(err, errlen, FKV_EINVAL, "empty workload or no profile");
    fkv_status st = run_apart(w, sc, cfg, 1, res, err, errlen);
    if (!st) snprintf(res->scheme, sizeof res->scheme, "%s", sc ? sc->name : "unlimited");
    return st;
}

fkv_status fkv_sim_run(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg, fkv_sim_result *res,
                       char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (!w->n || !cfg->profile) return fkv_errf(err, errlen, FKV_EINVAL, "empty workload or no profile");
    if (sc && sc->mode == FKV_SCHEME_ISOLATED) {
        fkv_status st = run_apart(w, sc, cfg, 0, res, err, errlen);
        if (!st) snprintf(res->scheme, sizeof res->scheme, "%s", sc->name);
        return st;
    }
    return run_whole(w, sc, cfg, last_arrival(w), res, err, errlen);
}

static fkv_status run_whole(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg,
                           int64_t window_end, fkv_sim_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    /* oracle-memory: a cache that holds every token the run ever writes
     * (every prompt and output, whole pages of them), so nothing is
     * evicted or preempted while the prefix cache still shares prefixes;
     * a run with no cache at all would recompute every shared prefix */
    fkv_sim_config oracle_cfg;
    if (sc && sc->mode == FKV_SCHEME_UNLIMITED) {
        oracle_cfg = *cfg;
        uint64_t total = 0, pt = sc->page_tokens;
        for (size_t i = 0; i < w->n; i++) total += ((uint64_t)w->reqs[i].prompt + w->reqs[i].output + pt) / pt * pt;
        oracle_cfg.capacity_tokens = total + 2 * pt;
        /* it evicts nothing, so no tier below the device (a host tier
         * sized from its whole-trace device would ask for terabytes) */
        oracle_cfg.host_x = 0;
        oracle_cfg.host_capacity_bytes = 0;
        oracle_cfg.host_demote = 0;
        oracle_cfg.remote_capacity_bytes = 0;
        oracle_cfg.tier_admission = FKV_TIER_ADMIT_OFF;
        oracle_cfg.host_policy = FKV_HOST_LRU;
        cfg = &oracle_cfg;
    }
    fkv_req *reqs = malloc(w->n * sizeof *reqs);
    if (!reqs || alloc_result(res, w->n) != FKV_OK) {
        free(reqs);
        return FKV_ENOMEM;
    }
    memcpy(reqs, w->reqs, w->n * sizeof *reqs);
    for (size_t i = 0; i < w->n; i++) reqs[i].state = FKV_REQ_PENDING;
    res->n = w->n;
    snprintf(res->scheme, sizeof res->scheme, "%s", sc && cfg->capacity_tokens ? sc->name : "unlimited");
    res->capacity_tokens = sc ? cfg->capacity_tokens : 0;

    int64_t now = 0;
    belady_ctx bctx = {reqs, w->n, &now, NULL, 0};
    if (sc && cfg->capacity_tokens && !strcmp(sc->policy, "belady") && sc->prefix_cache)
        bctx.oracle = fkv_oracle_build(w, sc->page_tokens, cfg->block_tokens);
    fkv_cache *cache = NULL;
    fkv_remote_store *rs = NULL;
    fkv_sched *s = NULL;
    fkv_status st = FKV_OK;
    fkv_sched_config scfg = cfg->sched;
    fkv_sim_tokens srcs = fkv_workload_tokens(w, cfg->block_tokens);
    scfg.token_ids = fkv_sim_token_ids; /* ids of the simulated requests */
    struct bound_cost bcost = {cfg->profile, cfg->sched.miss};
    /* the tenant mechanisms as named for every scheme (a run without a
     * scheme's cache: each off unless named); a scheme's own below */
    scfg.step_share = cfg->step_share >= 0 ? (fkv_step_share)cfg->step_share : FKV_STEP_SHARE_OFF;
    scfg.admit_reclaim = cfg->admit_reclaim > 0;
    scfg.step_bound = cfg->step_bound > 0 ? cfg->step_bound : 0;
    scfg.tenant_step_share = cfg->tenant_step_share > 0 ? cfg->tenant_step_share : 1;
    scfg.token_ctx = &srcs;
    scfg.open_seq = fkv_sim_open_seq; /* their prompt blocks, without pass_tokens */
    scfg.open_ctx = &srcs;
    if ((st = fkv_sim_check_tags(&srcs, w->reqs, w->n, err, errlen)) != FKV_OK) goto out;
    if (cfg->n_tenants > FKV_SIM_MAX_TENANTS) {
        st = fkv_errf(err, errlen, FKV_EINVAL, "%u tenants: at most %d", cfg->n_tenants, FKV_SIM_MAX_TENANTS);
        goto out;
    }
    res->n_tenants = cfg->n_tenants;
    res->n_light = w->n_light;
    if (sc && cfg->capacity_tokens) {
        if ((st = make_cache(sc, cfg, &now, &bctx, &cache, err, errlen)) != FKV_OK) goto out;
        scfg.victim = cfg->victim >= 0 ? (fkv_victim_rule)cfg->victim : sc->victim;
        scfg.on_preempt = sc->on_preempt;
        scfg.pass_tokens = sc->prefix_cache;
        srcs.blocks = !scfg.pass_tokens;
        scfg.no_admit_after_preempt = sc->no_admit_after_preempt;
        /* the scheme's mechanisms where none was named for every scheme;
         * its step share not with the older per-tenant fraction */
        if (cfg->tenant_step_share < 0 && sc->step_fraction && cfg->n_tenants >= 2)
            scfg.tenant_step_share = 1.0 / cfg->n_tenants;
        if (cfg->step_share < 0 && scfg.tenant_step_share >= 1) scfg.step_share = sc->step_share;
        if (cfg->admit_reclaim < 0) scfg.admit_reclaim = sc->admit_reclaim;
        if (cfg->step_bound < 0) scfg.step_bound = sc->step_bound;
        if (sc->mode == FKV_SCHEME_VTC) scfg.admission = FKV_ADMIT_VTC;
        if (sc->gpu_batch_defaults) {
            uint32_t tokens, running;
            fkv_vllm_batch_defaults(cfg->profile, &tokens, &running);
            if (!cfg->batch_tokens_set) scfg.max_batch_tokens = tokens;
            if (!cfg->running_set) scfg.max_running = running;
        }
        if (!cfg->reclaim_set) {
            char why[160] = "";
            if (fkv_sched_parse_reclaim(sc->reclaim ? sc->reclaim : "", scfg.reclaim, &scfg.n_reclaim, why,
                                        sizeof why)) {
                st = fkv_errf(err, errlen, FKV_EINVAL, "scheme %s: reclaim '%s': %s", sc->name, sc->reclaim, why);
                goto out;
            }
        }
    }
    if (cache && cfg->remote_capacity_bytes && sc->prefix_cache) {
        if ((st = make_remote(sc, cfg, w, &srcs, &rs, err, errlen)) != FKV_OK) goto out;
        scfg.below = remote_below;
        scfg.below_ctx = rs;
    }
    if (scfg.step_bound > 0 && cfg->profile) {
        scfg.step_cost = bound_step_cost;
        scfg.cost_ctx = &bcost;
    }
    if ((st = fkv_sched_create(&scfg, cache, &s)) != FKV_OK) {
        fkv_errf(err, errlen, st, "scheduler config invalid");
        goto out;
    }
    loop_out lo;
    st = run_loop(reqs, w->n, s, cache, cfg, rs, window_end, &now, &lo, res->scheme, sc ? sc->kv_fp8 : 0, err, errlen);
    if (st) goto out;
    res->steps = lo.steps;
    res->peak_live_tokens = lo.peak_live;
    res->max_step_tokens = lo.max_step_tokens;
    res->makespan_ns = lo.end_ns - (w->n ? w->reqs[0].arrival_ns : 0);
    res->preemptions = fkv_sched_preemptions(s);
    res->service_diff_tokens = lo.service_diff;
    res->remote_fetched_tokens = lo.remote_fetched;
    for (uint32_t t = 0; t <= cfg->n_tenants && t <= FKV_SIM_MAX_TENANTS; t++) {
        res->tenants[t].window_ns = window_end - (w->n ? w->reqs[0].arrival_ns : 0);
        res->tenants[t].window_tokens = lo.window_tokens[t];
    }
    res->tiered = cache && (cfg->host_x > 0 || cfg->host_capacity_bytes || rs);
    for (size_t i = 0; i < w->n; i++) {
        const fkv_req *r = &reqs[i];
        res->cls[i] = (uint8_t)fkv_sim_class(r->prompt + r->output);
        res->e2e_ns[i] = res->ttft_ns[i] = res->tpot_ns[i] = -1;
        FKV_RESULT_FIELDS(COUNT_ALL)
        uint32_t t = r->tenant <= cfg->n_tenants ? (uint32_t)r->tenant : 0;
        res->tenant[i] = (uint8_t)t;
        res->tenants[t].preemptions += r->preemptions;
        res->tenants[t].reclaims += r->reclaims;
        res->tenants[t].prompt_tokens += r->prompt;
        res->tenants[t].matched_tokens += r->matched;
        res->tenants[t].offered_tokens += (uint64_t)r->prompt + r->output;
        if (r->state == FKV_REQ_REJECTED) {
            res->rejected++;
            continue;
        }
        if (r->state != FKV_REQ_DONE) continue;
        res->done++;
        res->e2e_ns[i] = r->finish_ns - r->arrival_ns;
        res->ttft_ns[i] = r->first_token_ns - r->arrival_ns;
        if (r->output > 1) res->tpot_ns[i] = (r->finish_ns - r->first_token_ns) / (r->output - 1);
        FKV_RESULT_FIELDS(COUNT_DONE)
    }
    if (cache) {
        fkv_counters c;
        if (fkv_cache_counters(cache, &c) == FKV_OK) {
            for (int k = 0; k < FKV_N_CLASSES; k++) {
                res->hit_tokens += c.hit_tokens[k];
                res->miss_tokens += c.miss_tokens[k];
            }
            res->prefix_query_tokens = c.prefix_query_tokens;
            res->prefix_hit_tokens = c.prefix_hit_tokens;
            res->evicted_pages = c.evicted_pages;
            res->host_written_bytes = c.host_demoted_bytes;
            res->host_refused_chunks = c.host_refused_chunks;
        }
        for (uint32_t t = 0; t <= cfg->n_tenants; t++) {
            fkv_tenant_info ti;
            if (fkv_cache_tenant_info(cache, t, &ti) != FKV_OK) continue; /* never seen */
            res->tenants[t].weight = ti.weight;
            res->tenants[t].share_pages = ti.share_pages;
            memcpy(res->tenants[t].reclaimed_pages, ti.reclaimed_pages, sizeof ti.reclaimed_pages);
        }
    }
    if (rs) {
        fkv_remote_store_stats rst;
        fkv_remote_store_stats_get(rs, &rst);
        uint32_t ct = sc->chunk_tokens ? sc->chunk_tokens : sc->page_tokens;
        res->remote_written_bytes = rst.puts * ct * fkv_model_token_bytes(cfg->profile->model);
        res->remote_refused_chunks = rst.refused;
    }
out:
    fkv_sched_destroy(s);
    fkv_remote_store_free(rs);
    if (cache) fkv_cache_destroy(cache);
    fkv_oracle_free(bctx.oracle);
    free(reqs);
    if (st) fkv_sim_result_free(res);
    return st;
}

fkv_status fkv_sim_capacity_rps(const fkv_workload *w, const fkv_sim_config *cfg, double *rps, char *err,
                                size_t errlen)
{
    return fkv_sim_capacity(w, cfg, rps, NULL, err, errlen);
}

/* The configuration of the runs that size a workload (saturation
 * throughput, peak demand): cfg with unlimited memory and the plain
 * scheduler order, FCFS with no step share, step-time bound or
 * within-share-first.  Those orders are mechanisms under comparison: a flag
 * that turns one on for every scheme of a run must not also move the
 * arrival rate and the capacity that every scheme, and a baseline run
 * without the flag, is measured at. */
static fkv_sim_config sizing_config(const fkv_sim_config *cfg)
{
    fkv_sim_config c = *cfg;
    c.capacity_tokens = 0;
    c.progress = 0;
    c.sched.admission = FKV_ADMIT_FCFS;
    c.tenant_step_share = 1;
    c.step_share = FKV_STEP_SHARE_OFF;
    c.step_bound = 0;
    c.admit_reclaim = 0;
    c.step_trace = NULL;
    return c;
}

fkv_status fkv_sim_capacity(const fkv_workload *w, const fkv_sim_config *cfg, double *rps, double *tok_s, char *err,
                            size_t errlen)
{
    fkv_workload sat = *w;
    sat.reqs = malloc(w->n * sizeof *sat.reqs);
    if (!sat.reqs) return FKV_ENOMEM;
    memcpy(sat.reqs, w->reqs, w->n * sizeof *sat.reqs);
    for (size_t i = 0; i < w->n; i++) sat.reqs[i].arrival_ns = 0;
    fkv_sim_config c = sizing_config(cfg);
    fkv_sim_result r;
    fkv_status st = fkv_sim_run(&sat, NULL, &c, &r, err, errlen);
    free(sat.reqs);
    if (st) return st;
    *rps = r.makespan_ns > 0 ? (double)r.done / (r.makespan_ns * 1e-9) : 0;
    if (tok_s)
        *tok_s = r.makespan_ns > 0 ? (double)(r.prompt_tokens + r.output_tokens) / (r.makespan_ns * 1e-9) : 0;
    fkv_sim_result_free(&r);
    return FKV_OK;
}

fkv_status fkv_sim_idle_latency(const fkv_workload *w, const fkv_sim_config *cfg, int64_t *e2e, char *err,
                                size_t errlen)
{
    fkv_workload one = *w;
    fkv_req r1;
    one.reqs = &r1;
    one.n = 1;
    one.session = one.turn = NULL;
    fkv_sim_config c = *cfg;
    c.capacity_tokens = 0;
    c.progress = 0;
    c.step_trace = NULL;
    for (size_t i = 0; i < w->n; i++) {
        r1 = w->reqs[i];
        r1.arrival_ns = 0;
        fkv_sim_result r;
        fkv_status st = fkv_sim_run(&one, NULL, &c, &r, err, errlen);
        if (st) return st;
        e2e[i] = r.e2e_ns[0];
        fkv_sim_result_free(&r);
    }
    return FKV_OK;
}

fkv_quant_mode fkv_sim_quant_mode(const fkv_sim_config *cfg, const fkv_scheme *sc)
{
    if (cfg->quant >= 0) return (fkv_quant_mode)cfg->quant;
    return sc ? sc->quant : FKV_QUANT_OFF;
}

fkv_dtype fkv_sim_quant_dtype(const fkv_sim_config *cfg, const fkv_scheme *sc)
{
    if (cfg->quant_dtype >= 0) return (fkv_dtype)cfg->quant_dtype;
    return sc && sc->quant_dtype ? sc->quant_dtype : FKV_INT8;
}

uint32_t fkv_sim_quant_hot(const fkv_sim_config *cfg, const fkv_scheme *sc)
{
    if (cfg->quant_hot >= 0) return (uint32_t)cfg->quant_hot;
    return sc && sc->quant_hot ? sc->quant_hot : 128;
}

fkv_host_policy fkv_sim_host_policy(const fkv_sim_config *cfg, const fkv_scheme *sc)
{
    if (cfg->host_policy >= 0) return (fkv_host_policy)cfg->host_policy;
    return sc ? sc->host_policy : FKV_HOST_LRU;
}

fkv_status fkv_sim_peak_demand(const fkv_workload *w, const fkv_sim_config *cfg, uint64_t *tokens, char *err,
                               size_t errlen)
{
    fkv_sim_config c = sizing_config(cfg);
    fkv_sim_result r;
    fkv_status st = fkv_sim_run(w, NULL, &c, &r, err, errlen);
    if (st) return st;
    *tokens = r.peak_live_tokens;
    fkv_sim_result_free(&r);
    return FKV_OK;
}
