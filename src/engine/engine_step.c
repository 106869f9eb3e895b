/* One engine step (see engine.h for the flow).
 *
 * Which positions a step computes.  The scheduler's cache calls make
 * chunks resident before their K/V exist: appends (computed in the same
 * step) and restores of evicted chunks.  Each batch item names the ranges
 * its request restored (fkv_batch_item.range0 / n_ranges); the scheduler
 * guarantees that a restored range is computed in the step that restored
 * it, by that item (sched.h), so the engine recomputes exactly those
 * ranges, in position order, before the item's new tokens.  A chunk shared
 * by several sequences is restored, and computed, once; the other holders
 * come later in the batch and read it after it is written (the forward
 * pass writes each layer's K/V in batch order).
 *
 * Quantization happens inside the cache at append time, before the engine
 * has written that step's K/V.  A chunk turns cold only once quant_hot_tokens
 * tokens follow it, so capping each step's appends per request to
 * quant_hot_tokens (the scheduler's max_request_tokens) guarantees that a
 * chunk its own request quantizes holds K/V computed in earlier steps.  A
 * chunk another request appends in this step and this one matched is
 * pinned by both, and the cache does not quantize a chunk pinned by a
 * sequence other than the caller's (coldq.c), so the step as a whole may
 * hold more than the hot window. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_internal.h"

/* ---------------------------------------------------------------- entries */

static eng_req *req_of(fkv_req *r) { return (eng_req *)(void *)((char *)r - offsetof(eng_req, r)); }

/* Adds the entry [start, start + n) of q (table ch[nc]).  pure_new: the
 * entry holds only this step's new tokens (a lone one at the table's end
 * goes to the batched decode kernel). */
static fkv_status add_entry(fkv_engine *e, eng_req *q, size_t item, const fkv_chunk_view *const *ch, size_t nc,
                            uint32_t start, uint32_t n, int want_logits, int pure_new)
{
    if (fkv_grow(&e->ent, &e->cap_ent, e->n_ent + 1, sizeof *e->ent)) return FKV_ENOMEM;
    eng_entry *en = &e->ent[e->n_ent];
    memset(en, 0, sizeof *en);
    en->q = q;
    en->chunks = ch;
    en->start = start;
    en->n_tokens = n;
    en->index = (uint32_t)e->n_ent;
    en->lg = -1;
    en->item = item;
    uint32_t end = start + n;
    size_t k = 0;
    while (k < nc && ch[k]->start < end) k++;
    en->n_chunks = k;
    en->decode = !e->cfg.ref_attention && pure_new && n == 1 && k == nc && ch[nc - 1]->start + ch[nc - 1]->n_tokens == end;
    en->keep = malloc(k ? k : 1);
    en->slots = malloc((size_t)n * sizeof *en->slots);
    e->n_ent++; /* counted now so the caller's cleanup frees the buffers */
    if (!en->keep || !en->slots) return FKV_ENOMEM;
    for (size_t i = 0; i < k; i++) {
        en->keep[i] = (uint8_t)(ch[i]->resident != 0);
        if (ch[i]->resident && ch[i]->dtype != e->geom.base) e->st.quant_chunk_reads++;
    }
    for (uint32_t t = 0; t < n; t++) {
        fkv_status st = fkv_chunks_locate(ch, nc, e->geom.page_tokens, start + t, &en->slots[t]);
        if (st) {
            snprintf(e->err, sizeof e->err, "request %llu: no slot for position %u", (unsigned long long)q->r.id,
                     start + t);
            return FKV_ESTATE;
        }
    }
    if (want_logits) en->lg = 0; /* numbered after all entries exist */
    if (en->decode && e->cfg.sparsity == FKV_SPARSE_H2O && q->mass_cap < nc) {
        size_t old = q->mass_cap;
        if (fkv_grow(&q->mass, &q->mass_cap, nc, sizeof *q->mass)) return FKV_ENOMEM;
        memset(q->mass + old, 0, (q->mass_cap - old) * sizeof *q->mass);
    }
    return FKV_OK;
}

/* The entries of one batch item: the ranges it restored, in position
 * order, then its new tokens (one entry with the last range when that ends
 * where they start). */
static fkv_status item_entries(fkv_engine *e, const fkv_batch *b, size_t item)
{
    const fkv_batch_item *it = &b->items[item];
    eng_req *q = req_of(it->r);
    const fkv_chunk_view *const *ch;
    size_t nc;
    fkv_status st = fkv_seq_chunks(q->r.seq, &ch, &nc);
    if (st) return st;
    if (it->n_new) /* new tokens attend to everything before them */
        for (size_t c = 0; c < nc && ch[c]->start < it->ctx; c++)
            if (!ch[c]->resident && !ch[c]->dropped) {
                snprintf(e->err, sizeof e->err, "request %llu: chunk at %u missing in a step with new tokens",
                         (unsigned long long)q->r.id, ch[c]->start);
                return FKV_ESTATE;
            }
    int decode = it->kind == FKV_ITEM_DECODE;
    for (uint32_t k = 0; k < it->n_ranges; k++) {
        fkv_range g = b->ranges[it->range0 + k];
        if (g.start >= g.end || g.end > it->ctx) {
            snprintf(e->err, sizeof e->err, "request %llu: restored range [%u,%u) outside [0,%u)",
                     (unsigned long long)q->r.id, g.start, g.end, it->ctx);
            return FKV_ESTATE;
        }
        e->st.recomputed_tokens += g.end - g.start;
        if (k + 1 == it->n_ranges && it->n_new && g.end == it->ctx) {
            if (decode) e->st.decode_tokens++;
            else e->st.prefill_tokens += it->n_new;
            return add_entry(e, q, item, ch, nc, g.start, g.end - g.start + it->n_new, it->emits, 0);
        }
        if ((st = add_entry(e, q, item, ch, nc, g.start, g.end - g.start, 0, 0))) return st;
    }
    if (!it->n_new) return FKV_OK;
    if (decode) e->st.decode_tokens++;
    else e->st.prefill_tokens += it->n_new;
    return add_entry(e, q, item, ch, nc, it->ctx, it->n_new, it->emits, decode);
}

static void free_entries(fkv_engine *e)
{
    for (size_t i = 0; i < e->n_ent; i++) {
        free(e->ent[i].keep);
        free(e->ent[i].slots);
    }
    e->n_ent = 0;
}

/* ---------------------------------------------------------------- after the step */

static fkv_status sparsify(fkv_engine *e)
{
    if (e->cfg.sparsity == FKV_SPARSE_DENSE) return FKV_OK;
    fkv_sparse_config sc = {e->cfg.sparsity, e->cfg.sparsity_budget, 0};
    for (size_t i = 0; i < e->n_live; i++) {
        eng_req *q = e->live[i];
        if (q->r.state != FKV_REQ_RUNNING || !q->r.seq || !q->r.generated) continue;
        const fkv_chunk_view *const *ch;
        size_t nc;
        fkv_status st = fkv_seq_chunks(q->r.seq, &ch, &nc);
        if (st) return st;
        if (q->mass_cap < nc) {
            size_t old = q->mass_cap;
            if (fkv_grow(&q->mass, &q->mass_cap, nc, sizeof *q->mass)) return FKV_ENOMEM;
            memset(q->mass + old, 0, (q->mass_cap - old) * sizeof *q->mass);
        }
        uint8_t *keep = malloc(nc ? nc : 1);
        fkv_range *drop = malloc((nc ? nc : 1) * sizeof *drop);
        if (!keep || !drop) {
            free(keep);
            free(drop);
            return FKV_ENOMEM;
        }
        size_t nd = 0;
        st = fkv_sparse_select(&sc, ch, nc, q->mass, keep, NULL);
        for (size_t c = 0; c < nc && !st; c++) {
            if (keep[c] || !ch[c]->resident) continue;
            if (nd && drop[nd - 1].end == ch[c]->start) drop[nd - 1].end = ch[c]->start + ch[c]->n_tokens;
            else drop[nd++] = (fkv_range){ch[c]->start, ch[c]->start + ch[c]->n_tokens};
        }
        for (size_t d = 0; d < nd && !st; d++) {
            uint32_t got = 0;
            st = fkv_seq_drop(q->r.seq, drop[d].start, drop[d].end, &got);
            e->st.dropped_tokens += got;
        }
        free(keep);
        free(drop);
        if (st) {
            snprintf(e->err, sizeof e->err, "sparsity: %s", fkv_last_error());
            return st;
        }
    }
    return FKV_OK;
}

/* The sampled token is one of the request's stop tokens. */
static int is_stop(const eng_req *q, int32_t tok)
{
    for (uint32_t i = 0; i < q->n_stop_tokens; i++)
        if (q->stop_tokens[i] == tok) return 1;
    return 0;
}

static void end_kids(eng_req *q, fkv_status st)
{
    for (uint32_t k = 0; k < q->n_kids; k++) {
        eng_req *c = q->kids[k];
        if (c->on_done) c->on_done(c->ctx, c->id, c->sample, st, 0);
        fkv__eng_req_free(c);
    }
    q->n_kids = 0;
}

/* q (sample 0) emitted its first token from lg: every other sample draws
 * its first token from the same logits with its own sampler, and forks q's
 * sequence, sharing the prompt's pages (the first write into a shared page
 * copies that page); it then decodes like any request. */
static void fork_kids(fkv_engine *e, eng_req *q, const float *lg)
{
    uint32_t V = e->m->hp.n_vocab;
    for (uint32_t k = 0; k < q->n_kids; k++) {
        eng_req *c = q->kids[k];
        int32_t tok = fkv_sample(&c->smp, lg);
        c->tokens[c->n_prompt] = c->forced ? c->forced[0] : tok;
        e->st.generated_tokens++;
        /* drawn outside the batch: the sample's first token ends it as an
         * item's would (a stop token, or a max_tokens of 1) */
        unsigned fl = is_stop(c, tok) ? FKV_ENGINE_TOKEN_STOP : 0;
        if (fl || c->max_tokens == 1) fl |= FKV_ENGINE_TOKEN_LAST;
        if (c->on_token) c->on_token(c->ctx, c->id, c->sample, tok, lg, V, fl);
        if (fl & FKV_ENGINE_TOKEN_LAST) {
            if (c->on_done) c->on_done(c->ctx, c->id, c->sample, FKV_OK, 1);
            fkv__eng_req_free(c);
            continue;
        }
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = c->r.id;
        p.client_id = c->r.client;
        p.tenant = c->r.tenant; /* a fork stays in its parent's tenant and namespace */
        p.expected_tokens = c->n_prompt + c->max_tokens;
        fkv_seq *child = NULL;
        fkv_status st = fkv_seq_fork(q->r.seq, &p, &child);
        if (!st && fkv_grow(&e->live, &e->cap_live, e->n_live + 1, sizeof *e->live)) st = FKV_ENOMEM;
        /* the scheduler starts a request holding a sequence from that
         * sequence: position n_prompt, the fork's first token, is decoded
         * next; it owes max_tokens - 1 more */
        c->r.output = c->max_tokens - 1;
        if (!st) st = fkv_sched_add_seq(e->sched, &c->r, child);
        if (st) {
            /* this sample ends with the error; the others go on */
            if (child) fkv_seq_free(child);
            if (c->on_done) c->on_done(c->ctx, c->id, c->sample, st, 1);
            fkv__eng_req_free(c);
            continue;
        }
        c->gen_offset = 1;
        e->live[e->n_live++] = c;
        e->st.forks++;
    }
    q->n_kids = 0;
}

static void reap(fkv_engine *e)
{
    size_t w = 0;
    for (size_t i = 0; i < e->n_live; i++) {
        eng_req *q = e->live[i];
        if (q->r.state == FKV_REQ_DONE || q->r.state == FKV_REQ_REJECTED) {
            if (q->r.state == FKV_REQ_REJECTED) e->st.rejections++;
            end_kids(q, FKV_EFULL); /* only a rejected request still has them */
            if (q->prefix_hit_out) *q->prefix_hit_out = (uint32_t)q->r.matched;
            if (q->on_done)
                q->on_done(q->ctx, q->id, q->sample, q->r.state == FKV_REQ_DONE ? FKV_OK : FKV_EFULL,
                           q->r.generated + q->gen_offset);
            fkv__eng_req_free(q);
        } else {
            e->live[w++] = q;
        }
    }
    e->n_live = w;
}

/* Cancelled requests owe one more token at most (the same rule as a stop
 * token: the scheduler ends a request once it has generated `output`);
 * their samples not forked yet end at the fork. */
static void apply_cancels(fkv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    for (size_t c = 0; c < e->n_cancels; c++)
        for (size_t i = 0; i < e->n_live; i++) {
            eng_req *q = e->live[i];
            if (q->id != e->cancels[c]) continue;
            fkv_sched_stop(e->sched, &q->r);
            for (uint32_t k = 0; k < q->n_kids; k++) q->kids[k]->max_tokens = 1;
        }
    e->n_cancels = 0;
    pthread_mutex_unlock(&e->mu);
}

static fkv_status drain_inbox(fkv_engine *e)
{
    fkv_status st = FKV_OK;
    pthread_mutex_lock(&e->mu);
    if (fkv_grow(&e->live, &e->cap_live, e->n_live + e->n_inbox, sizeof *e->live)) st = FKV_ENOMEM;
    size_t i = 0;
    for (; i < e->n_inbox && !st; i++) {
        eng_req *q = e->inbox[i];
        q->r.arrival_ns = e->now;
        if ((st = fkv_sched_add(e->sched, &q->r))) {
            snprintf(e->err, sizeof e->err, "%s", fkv_sched_last_error(e->sched));
            break;
        }
        e->live[e->n_live++] = q;
    }
    if (i && i < e->n_inbox) memmove(e->inbox, e->inbox + i, (e->n_inbox - i) * sizeof *e->inbox);
    e->n_inbox -= i;
    pthread_mutex_unlock(&e->mu);
    return st;
}

/* ---------------------------------------------------------------- step */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static fkv_status step_inner(fkv_engine *e, int *busy);

/* The K/V bytes the batch's attention reads, by stored precision, into
 * e->step_kv (fkv_engine_step_info.kv_read). */
static void step_kv_bytes(fkv_engine *e)
{
    const fkv_kv_geom *g = &e->geom;
    const fkv_kvc base = g->base == FKV_F16 ? FKV_KVC_F16 : FKV_KVC_F32;
    for (size_t i = 0; i < e->batch.n; i++) {
        const fkv_chunk_view *const *v;
        size_t nc;
        fkv_seq_chunks(e->batch.items[i].r->seq, &v, &nc);
        for (size_t j = 0; j < nc; j++) {
            if (!v[j]->resident || !v[j]->n_tokens) continue;
            int k = v[j]->dtype == FKV_INT8 ? 1 : v[j]->dtype == FKV_INT4 ? 2 : 0;
            fkv_kvc c = k == 1 ? FKV_KVC_INT8 : k == 2 ? FKV_KVC_INT4 : base;
            e->step_kv[k] += (double)fkv_kvc_bytes(c, v[j]->n_tokens, g->n_kv_heads, g->head_dim) * g->n_layers;
        }
    }
}

/* Times the step and adds its shape to the counters the simulator's cost
 * profile is checked against (fkv_engine_stats.step_ns, batch_tokens,
 * attn_work). */
fkv_status fkv_engine_step(fkv_engine *e, int *busy)
{
    int b = 0;
    memset(e->step_kv, 0, sizeof e->step_kv);
    int64_t t0 = mono_ns();
    fkv_status st = step_inner(e, &b);
    if (busy) *busy = b;
    if (b && e->batch.n) {
        int64_t wall = mono_ns() - t0;
        e->st.step_ns += (uint64_t)wall;
        e->st.timed_steps++;
        e->st.batch_tokens += e->batch.tokens;
        double attn = fkv__attn_work(&e->batch);
        e->st.attn_work += attn;
        if (e->cfg.step_cost == FKV_STEP_COST_AUTO) fkv__engine_fit_step(e, e->batch.tokens, attn, wall);
        if (e->cfg.on_step) {
            fkv_engine_step_info si = {t0, wall, e->batch.tokens, (uint32_t)e->batch.n, attn,
                                       {e->step_kv[0], e->step_kv[1], e->step_kv[2]}};
            e->cfg.on_step(e->cfg.step_ctx, &si);
        }
    }
    return st;
}

static fkv_status step_inner(fkv_engine *e, int *busy)
{
    if (busy) *busy = 0;
    e->err[0] = 0;
    fkv_status st = drain_inbox(e);
    if (st) return st;
    apply_cancels(e);
    if (!e->n_live) return FKV_OK;
    if (busy) *busy = 1;
    e->now += 1000000; /* 1 ms of virtual time per step */
    if ((st = fkv_sched_step(e->sched, e->now, &e->batch))) {
        snprintf(e->err, sizeof e->err, "scheduler: %s", fkv_sched_last_error(e->sched));
        goto out;
    }
    e->st.steps++;
    if (e->batch.n == 0 && e->batch.wake_ns > e->now) e->now = e->batch.wake_ns;
    for (size_t i = 0; i < e->batch.n && !st; i++) {
        const fkv_batch_item *it = &e->batch.items[i];
        if (it->r->state != FKV_REQ_RUNNING || !it->r->seq) { /* the scheduler never leaves such an item */
            snprintf(e->err, sizeof e->err, "request %llu: in the batch but not running",
                     (unsigned long long)it->r->id);
            st = FKV_ESTATE;
            break;
        }
        st = item_entries(e, &e->batch, i);
    }
    if (st) goto out;
    if (e->cfg.on_step) step_kv_bytes(e);
    uint32_t V = e->m->hp.n_vocab;
    size_t n_lg = 0;
    for (size_t i = 0; i < e->n_ent; i++)
        if (e->ent[i].lg >= 0) e->ent[i].lg = (int)n_lg++;
    if (fkv_grow(&e->logits, &e->cap_logits, n_lg * V, sizeof *e->logits)) {
        st = FKV_ENOMEM;
        goto out;
    }
    if (fkv_grow(&e->fs, &e->cap_fs, e->n_ent, sizeof *e->fs)) {
        st = FKV_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < e->n_ent; i++) {
        eng_entry *en = &e->ent[i];
        e->fs[i] = (fkv_fwd_seq){en, en->q->tokens + en->start, en->n_tokens, en->start, en->slots,
                                 en->lg >= 0 ? e->logits + (size_t)en->lg * V : NULL, 0};
    }
    if (e->n_ent) {
        fkv_kv_ops ops = fkv__engine_kv_ops;
        ops.ctx = e;
        char err[300] = "";
        e->n_dec = 0;
        if ((st = fkv_llama_forward(e->fwd, &ops, e->fs, (uint32_t)e->n_ent, err, sizeof err))) {
            if (!e->err[0]) snprintf(e->err, sizeof e->err, "forward: %s", err);
            goto out;
        }
    }
    for (size_t i = 0; i < e->n_ent; i++) {
        eng_entry *en = &e->ent[i];
        if (en->lg < 0) continue;
        eng_req *q = en->q;
        const float *lg = e->logits + (size_t)en->lg * V;
        int32_t tok = fkv_sample(&q->smp, lg);
        /* the token the next position holds: the forced one when teacher-forced */
        int32_t next = q->forced && q->r.generated + q->gen_offset < q->max_tokens
                           ? q->forced[q->r.generated + q->gen_offset]
                           : tok;
        int stop = is_stop(q, tok);
        if ((st = fkv_sched_emit(e->sched, &e->batch, en->item, next, stop))) {
            snprintf(e->err, sizeof e->err, "scheduler: %s", fkv_sched_last_error(e->sched));
            goto out;
        }
        e->st.generated_tokens++;
        /* the item says whether the request ends here (emit set it) */
        unsigned fl = (stop ? FKV_ENGINE_TOKEN_STOP : 0) |
                      (e->batch.items[en->item].finishes ? FKV_ENGINE_TOKEN_LAST : 0);
        if (q->on_token) q->on_token(q->ctx, q->id, q->sample, tok, lg, V, fl);
        if (q->n_kids && q->r.generated == 0) fork_kids(e, q, lg);
    }
    /* the requests this step ends export their pages from the scheduler's
     * on_finish (fkv__engine_finished), while the sequence exists */
    if ((st = fkv_sched_finish(e->sched, &e->batch, e->now))) goto out;
    if ((st = sparsify(e))) goto out;
    reap(e);
    fkv_cache_info info;
    if (!fkv_cache_get_info(e->cache, &info) && info.n_pages - info.free_pages > e->st.peak_pages_used)
        e->st.peak_pages_used = info.n_pages - info.free_pages;
out:
    free_entries(e);
    return st;
}

fkv_status fkv_engine_run_until_idle(fkv_engine *e)
{
    uint64_t idle_steps = 0;
    for (;;) {
        int busy = 0;
        uint64_t gen = e->st.generated_tokens, done = fkv_sched_finished(e->sched);
        fkv_status st = fkv_engine_step(e, &busy);
        if (st) return st;
        pthread_mutex_lock(&e->mu);
        size_t pending = e->n_inbox;
        pthread_mutex_unlock(&e->mu);
        if (!busy && !pending) return FKV_OK;
        /* a step that computes nothing, emits nothing and ends nothing,
         * many times over, means the scheduler cannot move */
        int moved = e->st.generated_tokens != gen || fkv_sched_finished(e->sched) != done || e->batch.n > 0;
        idle_steps = moved ? 0 : idle_steps + 1;
        if (idle_steps > 100000) {
            snprintf(e->err, sizeof e->err, "no progress in 100000 steps (%zu requests live)", e->n_live);
            return FKV_ESTATE;
        }
    }
}
