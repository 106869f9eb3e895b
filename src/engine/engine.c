/* The engine: configuration, creation, request submission (see engine.h;
 * the step itself is in engine_step.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

void fkv_engine_config_default(fkv_engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->kv_budget_bytes = 64ull << 20;
    c->kv_dtype = FKV_F32;
    c->page_tokens = 16;
    c->chunk_tokens = 32;
    c->policy = "flru";
    c->prefix_cache = 1;
    c->quotas = 1;
    c->dynamic_chunking = 0;
    c->quant_mode = FKV_QUANT_OFF;
    c->quant_dtype = FKV_INT8;
    c->quant_hot_tokens = 128;
    c->sparsity = FKV_SPARSE_DENSE;
    c->sparsity_budget = 256;
    c->sched_mode = FKV_SCHED_CONTINUOUS;
    c->admission = FKV_ADMIT_FCFS;
    c->victim = FKV_VICTIM_LAST_STARTED;
    c->max_batch_tokens = 256;
    c->chunked_prefill = 1;
    c->max_running = 16;
    c->n_threads = 1;
    c->ref_attention = 0;
}

/* step_bound's cost hook (sched.h): the predicted time of a (probe) batch,
 * in FLOPs or, with coefficients, in ns. */
int64_t fkv__engine_step_cost(void *ctx, const fkv_batch *b)
{
    const fkv_engine *e = ctx;
    const fkv_llama_hparams *hp = &e->m->hp;
    double work = fkv__attn_work(b);
    double v;
    if (e->cfg.step_cost == FKV_STEP_COST_COEFFS) {
        const double *c = e->cfg.step_coeffs;
        v = (c[0] + c[1] * b->tokens + c[2] * work + c[3] * (double)b->n) * 1e6;
    } else if (e->cfg.step_cost == FKV_STEP_COST_AUTO && e->fit.ok) {
        const double *c = e->fit.c;
        v = (c[0] + c[1] * b->tokens + c[2] * work) * 1e6;
    } else {
        /* weights a token multiplies: q, k, v, o, the MLP's three, the output */
        double q = (double)hp->n_heads * hp->head_dim, kv = (double)hp->n_kv_heads * hp->head_dim;
        double w = (double)hp->n_layers * (hp->dim * (2 * q + 2 * kv) + 3.0 * hp->dim * hp->hidden) +
                   (double)hp->dim * hp->n_vocab;
        v = 2 * w * b->tokens + 4.0 * hp->n_layers * q * work;
    }
    if (!(v >= 1)) return 1;
    return v < 9e18 ? (int64_t)v : (int64_t)9e18;
}

static double det3(double m[3][3])
{
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

/* Solves the 3x3 system a x = y (Cramer); 0 when it is singular. */
static int solve3(double a[3][3], const double y[3], double x[3])
{
    double d = det3(a), scale = fabs(a[0][0] * a[1][1] * a[2][2]);
    if (!(fabs(d) > 1e-12 * scale) || !(scale > 0)) return 0;
    for (int k = 0; k < 3; k++) {
        double m[3][3];
        memcpy(m, a, sizeof m);
        for (int i = 0; i < 3; i++) m[i][k] = y[i];
        x[k] = det3(m) / d;
    }
    return 1;
}

/* The running fit (FKV_STEP_COST_AUTO): each timed step adds its shape
 * and wall time to normal equations weighted 1 / ms^2 (relative error, as
 * the calibration weighs: src/calib/calibrate.c) that decay by 0.998 a
 * step (the last ~500 steps count); from the 64th step on, every 16th
 * solves them and the coefficients replace the FLOP prediction when the
 * per-token time comes out positive (a negative overhead or attention
 * price is read as 0). */
void fkv__engine_fit_step(fkv_engine *e, double tokens, double attn, int64_t wall_ns)
{
    eng_fit *f = &e->fit;
    double ms = (double)wall_ns / 1e6;
    if (!(ms > 0) || !(tokens > 0)) return;
    double x[3] = {1, tokens, attn}, w = 1 / (ms * ms);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) f->s[i][j] = 0.998 * f->s[i][j] + w * x[i] * x[j];
        f->y[i] = 0.998 * f->y[i] + w * x[i] * ms;
    }
    f->n++;
    if (f->n < 64 || f->n % 16) return;
    double c[3];
    if (!solve3(f->s, f->y, c) || !(c[1] > 0) || !isfinite(c[0]) || !isfinite(c[2])) return;
    f->c[0] = c[0] > 0 ? c[0] : 0;
    f->c[1] = c[1];
    f->c[2] = c[2] > 0 ? c[2] : 0;
    f->ok = 1;
}

static fkv_status bad(char *err, size_t errlen, fkv_status st, const char *msg)
{
    if (err) snprintf(err, errlen, "%s", msg);
    return st;
}

fkv_status fkv_engine_create(const fkv_llama *m, const fkv_engine_config *cfg, fkv_engine **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    if (cfg->kv_dtype != FKV_F32 && cfg->kv_dtype != FKV_F16)
        return bad(err, errlen, FKV_EINVAL, "engine config kv_dtype: f32 or f16");
    if (cfg->ref_attention && (cfg->quant_mode != FKV_QUANT_OFF || cfg->sparsity != FKV_SPARSE_DENSE))
        return bad(err, errlen, FKV_EINVAL,
                   "engine config ref_attention: only with quant_mode off and dense attention");
    if (!cfg->max_batch_tokens || !cfg->max_running || !cfg->n_threads || cfg->n_threads > 256)
        return bad(err, errlen, FKV_EINVAL, "engine config: max_batch_tokens, max_running, n_threads (1..256)");
    if (cfg->sparsity != FKV_SPARSE_DENSE && cfg->sparsity_budget < 2 * cfg->chunk_tokens)
        return bad(err, errlen, FKV_EINVAL, "engine config sparsity_budget: at least two chunks");
    if (cfg->n_reclaim > FKV_N_RECLAIM) return bad(err, errlen, FKV_EINVAL, "engine config n_reclaim: too many");
    for (uint32_t i = 0; i < cfg->n_reclaim; i++) {
        fkv_reclaim_action a = cfg->reclaim[i];
        /* drop takes what streaming attention would not read anyway: its
         * sink (the first chunk) and window are the sparsity's; a dense or
         * H2O engine would lose K/V it still reads */
        if (a == FKV_RECLAIM_DROP && cfg->sparsity != FKV_SPARSE_STREAMING)
            return bad(err, errlen, FKV_EINVAL, "engine config reclaim: drop needs sparsity streaming");
        if ((a == FKV_RECLAIM_QUANTIZE8 || a == FKV_RECLAIM_QUANTIZE4) && cfg->ref_attention)
            return bad(err, errlen, FKV_EINVAL,
                       "engine config reclaim: quantize8/quantize4 need the fairkv kernels (ref_attention reads "
                       "base precision only)");
    }
    fkv_engine *e = calloc(1, sizeof *e);
    if (!e) return FKV_ENOMEM;
    e->m = m;
    e->cfg = *cfg;
    if (pthread_mutex_init(&e->mu, NULL)) {
        free(e);
        return FKV_ENOMEM;
    }
    e->next_id = 1;
    e->next_rid = 1;
    fkv_config cc;
    fkv_config_default(&cc);
    cc.n_layers = m->hp.n_layers;
    cc.n_kv_heads = m->hp.n_kv_heads;
    cc.head_dim = m->hp.head_dim;
    cc.dtype = cfg->kv_dtype;
    cc.page_tokens = cfg->page_tokens;
    cc.capacity_bytes = cfg->kv_budget_bytes;
    cc.storage = FKV_STORAGE_CPU;
    cc.chunk_tokens = cfg->chunk_tokens;
    if (cfg->policy) cc.policy = cfg->policy;
    cc.prefix_cache = cfg->prefix_cache;
    cc.quotas = cfg->quotas;
    cc.share_guarantee = cfg->share_guarantee;
    cc.host_capacity_bytes = cfg->host_bytes;
    cc.host_demote = cfg->host_demote;
    cc.tier_admission = cfg->tier_admission;
    cc.host_policy = cfg->host_policy;
    cc.dynamic_chunking = cfg->dynamic_chunking;
    cc.quant_mode = cfg->quant_mode;
    cc.quant_dtype = cfg->quant_dtype;
    cc.quant_hot_tokens = cfg->quant_hot_tokens;
    cc.quant_warm_tokens = cfg->quant_warm_tokens;
    cc.clock = (fkv_clock){fkv_virtual_clock_now, &e->now};
    fkv_status st = fkv_cache_create(&cc, &e->cache, err, errlen);
    fkv_cache_info info;
    if (!st) st = fkv_cache_get_info(e->cache, &info);
    if (st) goto fail;
    e->kbase = calloc(m->hp.n_layers, sizeof *e->kbase);
    e->vbase = calloc(m->hp.n_layers, sizeof *e->vbase);
    if (!e->kbase || !e->vbase) {
        st = FKV_ENOMEM;
        goto fail;
    }
    uint64_t stride = 0;
    for (uint32_t l = 0; l < m->hp.n_layers && !st; l++)
        st = fkv_cache_layer_storage(e->cache, l, &e->kbase[l], &e->vbase[l], &stride);
    if (st) goto fail;
    e->geom = (fkv_kv_geom){m->hp.n_layers, m->hp.n_kv_heads, m->hp.head_dim, cfg->page_tokens, cfg->kv_dtype,
                            stride, info.n_pages};
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.mode = cfg->sched_mode;
    sc.admission = cfg->admission;
    sc.victim = cfg->victim;
    sc.step_share = cfg->step_share;
    sc.admit_reclaim = cfg->admit_reclaim;
    sc.step_bound = cfg->step_bound;
    if (cfg->step_cost != FKV_STEP_COST_TOKENS) {
        sc.step_cost = fkv__engine_step_cost;
        sc.cost_ctx = e;
    }
    memcpy(sc.reclaim, cfg->reclaim, sizeof sc.reclaim);
    sc.n_reclaim = cfg->n_reclaim;
    sc.reclaim_sink_tokens = cfg->chunk_tokens; /* streaming keeps chunk 0 ... */
    sc.reclaim_window_tokens = cfg->sparsity_budget > cfg->chunk_tokens ? cfg->sparsity_budget - cfg->chunk_tokens : 0;
    sc.max_batch_tokens = e->cfg.max_batch_tokens;
    /* quantizing: no request appends more than the hot window in a step
     * (engine_step.c, at the top); without chunked prefill a prompt runs
     * whole, so the step itself is held to the hot window */
    if (cfg->quant_mode != FKV_QUANT_OFF) {
        if (cfg->chunked_prefill) sc.max_request_tokens = cfg->quant_hot_tokens;
        else if (sc.max_batch_tokens > cfg->quant_hot_tokens) sc.max_batch_tokens = cfg->quant_hot_tokens;
    }
    sc.chunked_prefill = cfg->chunked_prefill;
    sc.max_running = cfg->max_running;
    sc.n_clients = 64;
    sc.on_preempt = FKV_PREEMPT_KEEP;
    sc.miss = FKV_MISS_RECOMPUTE;
    sc.pass_tokens = 1;
    sc.below = fkv__engine_import; /* a no-op for requests without import_kv */
    sc.below_ctx = e;
    sc.on_finish = fkv__engine_finished;
    sc.finish_ctx = e;
    if ((st = fkv_sched_create(&sc, e->cache, &e->sched))) goto fail;
    if ((st = fkv_attn_pool_create(cfg->n_threads, &e->apool))) goto fail;
    if ((st = fkv_fwd_create(m, e->apool, &e->fwd))) goto fail;
    *out = e;
    return FKV_OK;
fail:
    if (err && !err[0]) snprintf(err, errlen, "engine setup failed: %s", fkv_strerror(st));
    fkv_engine_destroy(e);
    return st;
}

void fkv__eng_req_free(eng_req *q)
{
    if (!q) return;
    for (uint32_t i = 0; i < q->n_kids; i++) fkv__eng_req_free(q->kids[i]);
    free(q->kids);
    fkv_sampler_free(&q->smp);
    free(q->tokens);
    free(q->forced);
    free(q->mass);
    free(q->import_kv);
    free(q);
}

void fkv_engine_destroy(fkv_engine *e)
{
    if (!e) return;
    fkv_sched_destroy(e->sched); /* frees the sequences it opened */
    for (size_t i = 0; i < e->n_live; i++) fkv__eng_req_free(e->live[i]);
    for (size_t i = 0; i < e->n_inbox; i++) fkv__eng_req_free(e->inbox[i]);
    fkv_cache_destroy(e->cache);
    fkv_fwd_destroy(e->fwd);
    fkv_attn_pool_destroy(e->apool);
    pthread_mutex_destroy(&e->mu);
    free(e->kbase);
    free(e->vbase);
    free(e->inbox);
    free(e->cancels);
    free(e->live);
    fkv_batch_free(&e->batch);
    free(e->ent);
    free(e->fs);
    free(e->logits);
    free(e->dq);
    free(e->dout);
    free(e->dseq);
    free(e->dout_ptr);
    free(e);
}

fkv_cache *fkv_engine_cache(fkv_engine *e) { return e->cache; }
const char *fkv_engine_last_error(const fkv_engine *e) { return e->err; }

fkv_status fkv_engine_submit(fkv_engine *e, const fkv_engine_request *rq, uint64_t *id)
{
    if (!rq->prompt || !rq->n_prompt || !rq->max_tokens || !rq->n || rq->n > 1024 || rq->client >= 64 ||
        !(rq->temperature >= 0) || !(rq->top_p > 0 && rq->top_p <= 1) || rq->n_stop_tokens > FKV_ENGINE_MAX_STOP)
        return FKV_EINVAL;
    for (uint32_t i = 0; i < rq->n_stop_tokens; i++)
        if (rq->stop_tokens[i] < 0 || (uint32_t)rq->stop_tokens[i] >= e->m->hp.n_vocab) return FKV_EINVAL;
    uint64_t total = (uint64_t)rq->n_prompt + rq->max_tokens;
    if (total > e->m->hp.ctx_len) return FKV_EINVAL;
    for (uint32_t i = 0; i < rq->n_prompt; i++)
        if (rq->prompt[i] < 0 || (uint32_t)rq->prompt[i] >= e->m->hp.n_vocab) return FKV_EINVAL;
    eng_req **made = calloc(rq->n, sizeof *made);
    if (!made) return FKV_ENOMEM;
    fkv_status st = FKV_OK;
    for (uint32_t s = 0; s < rq->n && !st; s++) {
        eng_req *q = calloc(1, sizeof *q);
        if (!q || !(q->tokens = malloc(total * sizeof *q->tokens))) {
            free(q);
            st = FKV_ENOMEM;
            break;
        }
        made[s] = q;
        memcpy(q->tokens, rq->prompt, rq->n_prompt * sizeof *q->tokens);
        if (rq->forced) {
            if (!(q->forced = malloc(rq->max_tokens * sizeof *q->forced))) {
                st = FKV_ENOMEM;
                break;
            }
            memcpy(q->forced, rq->forced, rq->max_tokens * sizeof *q->forced);
        }
        q->n_prompt = rq->n_prompt;
        q->max_tokens = rq->max_tokens;
        q->sample = s;
        memcpy(q->stop_tokens, rq->stop_tokens, sizeof q->stop_tokens);
        q->n_stop_tokens = rq->n_stop_tokens;
        q->on_token = rq->on_token;
        q->on_done = rq->on_done;
        q->ctx = rq->ctx;
        q->prefix_hit_out = s == 0 ? rq->prefix_hit_out : NULL;
        if (s == 0) {
            q->on_export = rq->on_export;
            q->export_from = rq->export_from;
        }
        /* whole pages of the prompt only: a longer import could not be
         * appended, since the prompt's last token is always computed */
        uint32_t imp = rq->import_kv ? rq->import_tokens / e->cfg.page_tokens * e->cfg.page_tokens : 0;
        if (imp > rq->n_prompt) imp = rq->n_prompt / e->cfg.page_tokens * e->cfg.page_tokens;
        if (s == 0 && imp) {
            size_t bytes = (size_t)(imp / e->cfg.page_tokens) * fkv_engine_page_bytes(e);
            if (!(q->import_kv = malloc(bytes))) {
                st = FKV_ENOMEM;
                break;
            }
            memcpy(q->import_kv, rq->import_kv, bytes);
            q->import_tokens = imp;
        }
        q->r.client = rq->client;
        q->r.tenant = rq->tenant;
        q->r.cache_salt = rq->cache_salt;
        q->r.prompt = rq->n_prompt;
        q->r.output = rq->max_tokens;
        q->r.tokens = q->tokens;
        st = fkv_sampler_init(&q->smp, e->m->hp.n_vocab, rq->temperature, rq->top_p, rq->seed + s);
    }
    if (!st && rq->n > 1) {
        /* samples 1.. wait on sample 0 (engine_step.c forks them) */
        if (!(made[0]->kids = malloc((rq->n - 1) * sizeof *made[0]->kids))) st = FKV_ENOMEM;
        for (uint32_t s = 1; s < rq->n && !st; s++) made[0]->kids[made[0]->n_kids++] = made[s];
    }
    pthread_mutex_lock(&e->mu);
    if (!st && fkv_grow(&e->inbox, &e->cap_inbox, e->n_inbox + 1, sizeof *e->inbox)) st = FKV_ENOMEM;
    if (!st) {
        uint64_t uid = e->next_id++;
        for (uint32_t s = 0; s < rq->n; s++) {
            made[s]->id = uid;
            made[s]->r.id = e->next_rid++;
        }
        e->inbox[e->n_inbox++] = made[0];
        if (id) *id = uid;
    }
    pthread_mutex_unlock(&e->mu);
    if (st) {
        if (made[0] && made[0]->n_kids) made[0]->n_kids = 0; /* each is freed below */
        for (uint32_t s = 0; s < rq->n; s++) fkv__eng_req_free(made[s]);
    }
    free(made);
    return st;
}

fkv_status fkv_engine_cancel(fkv_engine *e, uint64_t id)
{
    fkv_status st = FKV_OK;
    pthread_mutex_lock(&e->mu);
    if (fkv_grow(&e->cancels, &e->cap_cancels, e->n_cancels + 1, sizeof *e->cancels)) st = FKV_ENOMEM;
    else e->cancels[e->n_cancels++] = id;
    pthread_mutex_unlock(&e->mu);
    return st;
}

fkv_status fkv_engine_stats_get(fkv_engine *e, fkv_engine_stats *out)
{
    *out = e->st;
    out->preemptions = fkv_sched_preemptions(e->sched);
    return fkv_cache_counters(e->cache, &out->cache);
}

