/* Scheduler-level operation sequences over a small cache with real (cpu)
 * storage, shared by tests/test_sched_ops.c and fuzz/fuzz_sched.c.
 *
 * The driver plays the engine of src/engine/engine_step.c without a model:
 * requests are submitted (prompts from a small alphabet with shared
 * prefixes, some with several samples that fork at the prompt's end),
 * cancelled, and run step by step.  Every step it lets fkv_sched_step do
 * all the cache calls, then, for each batch item in batch order, writes
 * K = f(token, pos), V = -f at the slots of the positions the item restored
 * and of its new tokens, and checks that everything the item's attention
 * reads (every resident, non-dropped chunk of its table below
 * ctx + n_new) holds exactly that, quantized chunks within the codec's
 * documented bound.  Free pages are filled with NaN before each step, so a
 * page that became resident without being named as restored, or that a
 * copy-on-write or a quantization took before its K/V existed, reads back
 * (or fails to quantize) as such.  Then the emissions, the forks (as the
 * engine's fork_kids does them), fkv_sched_finish, sparsity drops and the
 * ends follow, and the cache's invariant checker runs.
 *
 * A configuration cell (policy, quotas, chunking, prefix cache, chunked
 * prefill, victim rule, admission, batching mode, quantization, capacity,
 * budget, running limit, preemption mode, miss mode, sparsity, retention,
 * then the tenant part: tenant mode, fair victim, reclaim list, tenant
 * step share, VTC memory term) is decoded from a 32-bit word; the
 * operations come from a byte stream (the fuzzer's input) or from an RNG
 * (the test).  The tenant part comes from the word's quotient after the
 * other fields (0 .. 970), so a word below SD_WORD_BASE has it all off:
 * the corpus seeds made before tenants existed were cut to their remainder
 * and replay exactly what they did. */
#ifndef FKV_SCHED_DRIVER_H
#define FKV_SCHED_DRIVER_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv.h"
#include "fairkv_attn.h"
#include "fairkv_quant.h"
#include "sched/sched.h"

#define SD_MAX_REQS 48 /* request slots of one run, forked samples included */
#define SD_MAX_PROMPT 48
#define SD_MAX_OUT 20
#define SD_MAX_LEN (SD_MAX_PROMPT + SD_MAX_OUT + 1)
#define SD_MAX_SAMPLES 3
#define SD_PT 4             /* page tokens */
#define SD_HOT 16           /* quant_hot_tokens */
#define SD_STEP_NS 1000000  /* 1 ms of virtual time per step, as the engine */
#define SD_STALL_STEPS 400  /* steps without an emission or an end: the scheduler is stuck */
#define SD_DRAIN_STEPS 6000 /* steps the drain at the end may take at most */

/* ---------------------------------------------------------------- input */

typedef struct sd_src {
    const uint8_t *data; /* fuzz input, or NULL for the RNG */
    size_t len, pos;
    uint64_t rng;
    uint8_t *rec; /* RNG mode: if set, the choices made, as the fuzz input that replays them */
    size_t n_rec, cap_rec;
} sd_src;

static uint64_t sd_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint32_t sd_next(sd_src *s, uint32_t bound)
{
    uint64_t x;
    if (s->data) {
        if (s->pos >= s->len) return 0;
        x = s->data[s->pos++];
    } else {
        s->rng += 0x9e3779b97f4a7c15ull;
        x = sd_mix(s->rng);
        if (bound) x %= bound; /* every bound is at most 256: one byte replays it */
        if (s->rec && s->n_rec < s->cap_rec) s->rec[s->n_rec++] = (uint8_t)(bound ? x : 0);
    }
    return bound ? (uint32_t)(x % bound) : 0;
}

static int sd_more(const sd_src *s) { return !s->data || s->pos < s->len; }

/* ---------------------------------------------------------------- cell */

static const char *const sd_policies[] = {"fifo", "lru", "flru", "flru-literal", "sieve", "belady"};
static const uint32_t sd_capacities[] = {8, 14, 24, 40, 96}; /* pages of 4 tokens */
static const uint32_t sd_budgets[] = {4, 8, 16, 64};
static const uint32_t sd_runnings[] = {2, 4, 16};
/* fair reclaim lists; DROP is there because the driver's attention reads
 * only non-dropped chunks, as a sparse engine's */
static const char *const sd_reclaims[] = {"", "quantize8,evict", "quantize8,quantize4,drop,evict", "evict",
                                          "quantize8,offload,drop,evict"};
#define SD_WORD_BASE 4423680u /* 6 x 2^7 x 3 x 2 x 5 x 4 x 3 x 2^4: the fields before the tenant part */

typedef struct sd_cell {
    uint32_t word;
    const char *policy;
    int quotas, dynamic_chunking, prefix_cache, chunked_prefill;
    fkv_victim_rule victim;
    fkv_admit admission;
    fkv_sched_mode mode;
    fkv_quant_mode quant;
    fkv_dtype quant_dtype;
    uint32_t capacity_pages, max_batch_tokens, max_running;
    fkv_preempt_mode on_preempt;
    fkv_miss_mode miss;
    int sparsity, retention;
    int tenants;         /* requests of clients 0..2 are tenants 1..3 (weights 1, 2, 1); quotas per tenant */
    int fair;            /* victim FKV_VICTIM_FAIR */
    uint32_t reclaim;    /* index in sd_reclaims */
    int step_share;      /* tenant_step_share 0.5 */
    int vtc_mem;         /* vtc_mem_weight 1000 */
    int drr;             /* step_share FKV_STEP_DRR */
} sd_cell;

static void sd_cell_decode(uint32_t w, sd_cell *c)
{
    memset(c, 0, sizeof *c);
    c->word = w;
    c->policy = sd_policies[w % 6];
    w /= 6;
    c->quotas = (int)(w & 1), w >>= 1;
    c->dynamic_chunking = (int)(w & 1), w >>= 1;
    c->prefix_cache = !(w & 1), w >>= 1;
    c->chunked_prefill = !(w & 1), w >>= 1;
    c->victim = (fkv_victim_rule)(w & 1), w >>= 1;
    c->admission = (fkv_admit)(w & 1), w >>= 1;
    c->mode = (fkv_sched_mode)(w & 1), w >>= 1;
    c->quant = (fkv_quant_mode)(w % 3), w /= 3;
    c->quant_dtype = (w & 1) ? FKV_INT4 : FKV_INT8, w >>= 1;
    c->capacity_pages = sd_capacities[w % 5], w /= 5;
    c->max_batch_tokens = sd_budgets[w % 4], w /= 4;
    c->max_running = sd_runnings[w % 3], w /= 3;
    c->on_preempt = (fkv_preempt_mode)(w & 1), w >>= 1;
    c->miss = (fkv_miss_mode)(w & 1), w >>= 1;
    c->sparsity = (int)(w & 1), w >>= 1;
    c->retention = (int)(w & 1), w >>= 1;
    c->tenants = (int)(w & 1), w >>= 1;
    c->fair = (int)(w & 1), w >>= 1;
    c->reclaim = w % 5, w /= 5;
    c->step_share = (int)(w & 1), w >>= 1;
    c->vtc_mem = (int)(w & 1), w >>= 1;
    c->drr = (int)(w & 1), w >>= 1;
    if (c->fair) c->victim = FKV_VICTIM_FAIR;
    /* as the engine: a step appends at most quant_hot_tokens per request,
     * so that a chunk an append turns cold holds K/V of earlier steps (a
     * restored one is kept from quantization by the cache until read) */
    if (c->quant != FKV_QUANT_OFF && c->max_batch_tokens > SD_HOT) c->max_batch_tokens = SD_HOT;
}

static void sd_cell_describe(const sd_cell *c, char *buf, size_t n)
{
    static const char *const qn[] = {"off", "always", "under-pressure"};
    snprintf(buf, n,
             "cell 0x%08x: %s, quotas %s, %s chunks, prefix cache %s, %s prefill, victim %s, %s, %s batching, "
             "quant %s%s, %u pages, budget %u, max_running %u, preempt %s, miss %s, sparsity %s, retention %s, "
             "tenants %s, reclaim '%s', step share %s, vtc memory %s, drr %s",
             (unsigned)c->word, c->policy, c->quotas ? "on" : "off", c->dynamic_chunking ? "dynamic" : "fixed",
             c->prefix_cache ? "on" : "off", c->chunked_prefill ? "chunked" : "whole",
             fkv_victim_name(c->victim),
             c->admission == FKV_ADMIT_FCFS ? "fcfs" : "vtc",
             c->mode == FKV_SCHED_CONTINUOUS ? "continuous" : "dynamic", qn[c->quant],
             c->quant == FKV_QUANT_OFF ? "" : (c->quant_dtype == FKV_INT4 ? " int4" : " int8"), c->capacity_pages,
             c->max_batch_tokens, c->max_running, c->on_preempt == FKV_PREEMPT_KEEP ? "keep" : "free",
             c->miss == FKV_MISS_RECOMPUTE ? "recompute" : "reload", c->sparsity ? "streaming" : "dense",
             c->retention ? "2 ms" : "0", c->tenants ? "1-3" : "off", sd_reclaims[c->reclaim],
             c->step_share ? "0.5" : "off", c->vtc_mem ? "1000" : "off", c->drr ? "on" : "off");
}

/* ---------------------------------------------------------------- state */

enum { SD_UNUSED = 0, SD_KID, SD_LIVE, SD_ENDED };

typedef struct sd_req {
    fkv_req r;                     /* the scheduler's view; r.tokens = tokens */
    int32_t tokens[SD_MAX_LEN];    /* prompt, then the "sampled" tokens */
    uint32_t n_prompt, max_tokens; /* as an engine request: max_tokens output tokens per sample */
    uint32_t group, sample;        /* the user request (its samples share it) and the sample */
    uint32_t gen_offset;           /* 1 for a forked sample: its first token came with the fork */
    uint32_t kids[SD_MAX_SAMPLES];
    uint32_t n_kids; /* samples waiting to fork at this one's first emission */
    int state;
} sd_req;

typedef struct sd_stats {
    uint64_t steps, items, new_tokens, restored_tokens, restore_items, stalled_items;
    uint64_t emissions, forks, kid_ends_at_fork, done, rejected, cancels, preempted, drops;
    uint64_t verified_tokens, quant_tokens, cow_copies, prefix_hits, quantized, evicted_pages;
    uint64_t max_gap, max_drain;
    uint64_t reclaims, fair_picks; /* reclaim actions that freed pages; victims chosen by the fair rule */
    uint64_t host_tokens;          /* offloaded tokens copied back (fkv_batch.host_tokens) */
} sd_stats;

typedef struct sd_state {
    sd_cell cell;
    fkv_cache *c;
    fkv_sched *s;
    fkv_batch b;
    int64_t now;
    sd_req *req; /* [SD_MAX_REQS] */
    uint32_t n_req, n_groups;
    uint64_t step, last_progress;
    uint8_t in_batch[SD_MAX_REQS];
    uint8_t was_running[SD_MAX_REQS], was_waiting[SD_MAX_REQS];
    uint32_t preemptions[SD_MAX_REQS];
    void *kst, *vst; /* scratch for dequantization */
    size_t scratch_bytes;
    sd_stats st;
    int trace; /* print every step to stderr */
    char msg[512];
} sd_state;

static int sd_fail(sd_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sd_fail(sd_state *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(st->msg, sizeof st->msg, "step %llu: ", (unsigned long long)st->step);
    if (n < 0 || (size_t)n >= sizeof st->msg) n = 0;
    vsnprintf(st->msg + n, sizeof st->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return 1;
}

static sd_req *sd_of(sd_state *st, const fkv_req *r)
{
    sd_req *q = (sd_req *)(void *)((char *)(void *)(uintptr_t)r - offsetof(sd_req, r));
    return q >= st->req && q < st->req + st->n_req ? q : NULL;
}

/* distinct for distinct (token, pos) with tokens < 4093, and within fp16
 * range as real K/V are (the quantizer's scales are fp16) */
static float sd_value(int32_t tok, uint32_t pos) { return (float)(((uint32_t)tok * 31u + pos) % 4093u); }

/* The "sampled" token of a sample at a position past its prompt: a pure
 * function, different per sample, outside the prompts' alphabet. */
static int32_t sd_sampled(uint32_t group, uint32_t sample, uint32_t pos)
{
    return (int32_t)(16 + sd_mix(((uint64_t)group << 20) ^ ((uint64_t)sample << 12) ^ pos) % 4000);
}

static int64_t sd_next_use(void *ctx, const fkv_chunk_view *v, const fkv_chunk_info *in)
{
    (void)ctx;
    return (int64_t)((v->start * 2654435761u) ^ (uint32_t)in->create_ns ^ (uint32_t)in->owner) & 0xffffff;
}

static fkv_status sd_open(sd_state *st, uint32_t word)
{
    memset(st, 0, sizeof *st);
    sd_cell_decode(word, &st->cell);
    const sd_cell *k = &st->cell;
    st->req = calloc(SD_MAX_REQS, sizeof *st->req);
    if (!st->req) return FKV_ENOMEM;
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = SD_PT;
    cfg.chunk_tokens = 8;
    cfg.chunk_min_tokens = 4;
    cfg.chunk_max_tokens = 16;
    cfg.capacity_pages = k->capacity_pages;
    cfg.storage = FKV_STORAGE_CPU;
    cfg.policy = k->policy;
    cfg.quotas = k->tenants ? FKV_QUOTA_TENANT : k->quotas;
    cfg.dynamic_chunking = k->dynamic_chunking;
    cfg.min_chunk_retention_ns = k->retention ? 2 * SD_STEP_NS : 0;
    cfg.prefix_cache = k->prefix_cache;
    cfg.quant_mode = k->quant;
    cfg.quant_dtype = k->quant_dtype;
    cfg.quant_hot_tokens = SD_HOT;
    cfg.quant_pressure = 0.75;
    cfg.host_capacity_bytes = 1 << 16; /* offload: a few dozen pages of this geometry */
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &st->now;
    cfg.thread_safe = 0;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = 8;
    ev.next_use = sd_next_use;
    fkv_status rc = fkv_cache_create_eval(&cfg, &ev, &st->c, st->msg, sizeof st->msg);
    if (rc) return rc;
    for (uint64_t t = 1; k->tenants && t <= 3; t++)
        if ((rc = fkv_cache_set_tenant_weight(st->c, t, t == 2 ? 2.0 : 1.0)) != FKV_OK) {
            snprintf(st->msg, sizeof st->msg, "fkv_cache_set_tenant_weight: %s", fkv_last_error());
            return rc;
        }
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.mode = k->mode;
    sc.max_batch_tokens = k->max_batch_tokens;
    sc.max_running = k->max_running;
    sc.chunked_prefill = k->chunked_prefill;
    sc.batch_window_ns = 3 * SD_STEP_NS;
    sc.admission = k->admission;
    sc.n_clients = 3;
    sc.victim = k->victim;
    sc.on_preempt = k->on_preempt;
    sc.miss = k->miss;
    sc.pass_tokens = 1;
    if (fkv_sched_parse_reclaim(sd_reclaims[k->reclaim], sc.reclaim, &sc.n_reclaim, NULL, 0)) return FKV_EINVAL;
    sc.reclaim_sink_tokens = 4;
    sc.reclaim_window_tokens = 16;
    sc.tenant_step_share = k->step_share ? 0.5 : 1;
    sc.step_share = k->drr ? FKV_STEP_DRR : FKV_STEP_SHARE_OFF;
    sc.vtc_mem_weight = k->vtc_mem ? 1000 : 0;
    rc = fkv_sched_create(&sc, st->c, &st->s);
    if (rc) snprintf(st->msg, sizeof st->msg, "fkv_sched_create: %s", fkv_strerror(rc));
    return rc;
}

static void sd_close(sd_state *st)
{
    fkv_sched_destroy(st->s); /* frees the sequences of running and waiting requests */
    fkv_batch_free(&st->b);
    fkv_cache_destroy(st->c);
    free(st->req);
    free(st->kst);
    free(st->vst);
    memset(st, 0, sizeof *st);
}

/* ---------------------------------------------------------------- ops */

/* A user request of n samples: sample 0 runs the prompt, the others wait
 * to fork from it.  Returns 0 (also when there is no room left). */
static int sd_submit(sd_state *st, sd_src *src)
{
    uint32_t fam = sd_next(src, 3), plen = 1 + sd_next(src, sd_next(src, 2) ? 16 : SD_MAX_PROMPT);
    uint32_t same = sd_next(src, 4) ? plen : sd_next(src, plen + 1), seed = sd_next(src, 256);
    uint32_t n = sd_next(src, 4) ? 1 : 2 + sd_next(src, SD_MAX_SAMPLES - 1);
    uint32_t out = 1 + sd_next(src, sd_next(src, 2) ? 4 : SD_MAX_OUT), client = sd_next(src, 3);
    if (st->n_req + n > SD_MAX_REQS) return 0;
    uint32_t g = ++st->n_groups, first = st->n_req;
    for (uint32_t k = 0; k < n; k++) {
        sd_req *q = &st->req[st->n_req++];
        memset(q, 0, sizeof *q);
        for (uint32_t i = 0; i < plen; i++) /* a family's prefix, then the request's own tokens */
            q->tokens[i] =
                i < same ? (int32_t)((fam * 5 + i * 7 + i / 3) % 16) : (int32_t)(sd_mix(seed * 131 + g + i) % 16);
        for (uint32_t i = plen; i < SD_MAX_LEN; i++) q->tokens[i] = sd_sampled(g, k, i);
        q->n_prompt = plen;
        q->max_tokens = out;
        q->group = g;
        q->sample = k;
        q->r.id = (uint64_t)(q - st->req) + 1;
        q->r.client = client;
        q->r.tenant = st->cell.tenants ? 1 + client : 0;
        q->r.arrival_ns = st->now;
        q->r.prompt = plen;
        q->r.output = out;
        q->r.tokens = q->tokens;
        q->state = k ? SD_KID : SD_LIVE;
        if (k) st->req[first].kids[st->req[first].n_kids++] = first + k;
    }
    if (st->trace)
        fprintf(stderr, "submit req %llu: prompt %u (family %u for %u), output %u, %u samples\n",
                (unsigned long long)st->req[first].r.id, plen, fam, same, out, n);
    fkv_status rc = fkv_sched_add(st->s, &st->req[first].r);
    if (rc) return sd_fail(st, "fkv_sched_add: %s (%s)", fkv_strerror(rc), fkv_sched_last_error(st->s));
    return 0;
}

/* As the engine's fkv_engine_cancel: every live sample of the user request
 * owes one more token at most; samples not forked yet end at the fork. */
static void sd_cancel(sd_state *st, sd_src *src)
{
    if (!st->n_groups) return;
    uint32_t g = 1 + sd_next(src, st->n_groups);
    for (uint32_t i = 0; i < st->n_req; i++) {
        sd_req *q = &st->req[i];
        if (q->group != g || q->state != SD_LIVE) continue;
        fkv_sched_stop(st->s, &q->r);
        for (uint32_t k = 0; k < q->n_kids; k++) st->req[q->kids[k]].max_tokens = 1;
        st->st.cancels++;
    }
}

/* ---------------------------------------------------------------- K/V */

static int sd_storage(sd_state *st, float **k, float **v, uint64_t *stride)
{
    void *kk, *vv;
    if (fkv_cache_layer_storage(st->c, 0, &kk, &vv, stride)) return sd_fail(st, "no storage");
    *k = kk;
    *v = vv;
    return 0;
}

/* NaN in every free page: whatever takes a page must write it first. */
static void sd_poison(sd_state *st)
{
    float *k = NULL, *v = NULL;
    uint64_t stride = 0;
    if (sd_storage(st, &k, &v, &stride)) return;
    size_t n = stride / sizeof(float);
    for (uint32_t i = 0; i < st->c->n_free; i++) {
        uint32_t p = st->c->free_stack[i];
        for (size_t j = 0; j < n; j++) k[p * n + j] = v[p * n + j] = NAN;
    }
}

/* Writes K/V of positions [a, e) of q at the slots its chunk table gives. */
static int sd_write(sd_state *st, sd_req *q, uint32_t a, uint32_t e)
{
    const fkv_chunk_view *const *ch;
    size_t nc;
    float *k = NULL, *v = NULL;
    uint64_t stride = 0;
    if (sd_storage(st, &k, &v, &stride)) return 1;
    if (fkv_seq_chunks(q->r.seq, &ch, &nc))
        return sd_fail(st, "request %llu: no chunk table", (unsigned long long)q->r.id);
    for (uint32_t pos = a; pos < e; pos++) {
        fkv_slot sl;
        fkv_status rc = fkv_chunks_locate(ch, nc, SD_PT, pos, &sl);
        if (rc)
            return sd_fail(st, "request %llu: no slot for position %u: %s", (unsigned long long)q->r.id, pos,
                           fkv_last_error());
        float *kp = (float *)((char *)k + sl.page * stride) + sl.slot * 2;
        float *vp = (float *)((char *)v + sl.page * stride) + sl.slot * 2;
        kp[0] = sd_value(q->tokens[pos], pos);
        vp[0] = -kp[0];
        kp[1] = vp[1] = 0.5f; /* every element written, as an engine does */
    }
    return 0;
}

static double sd_f16_ulp(double x)
{
    x = fabs(x);
    if (x < 6.103515625e-05) return 5.960464477539063e-08; /* subnormal: 2^-24 */
    int e;
    frexp(x, &e); /* x = m * 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 11);
}

/* The documented bound of one element of a group whose values lie in [lo, hi]. */
static double sd_qbound(fkv_dtype dt, double lo, double hi, double x)
{
    double qmax = dt == FKV_INT4 ? 15 : 255;
    double scale = ((hi - lo) + sd_f16_ulp(lo)) / qmax * (1 + 1.0 / 1024) + 5.960464477539063e-08;
    return scale / 2 + fabs(x) * 2.4e-7 + 1e-6; /* and the f32 rounding of the decoded value */
}

/* A quantized chunk decodes to its K/V within the codec's bound. */
static int sd_verify_quant(sd_state *st, sd_req *q, const fkv_chunk_view *ch)
{
    float *k = NULL, *v = NULL;
    uint64_t stride = 0;
    if (sd_storage(st, &k, &v, &stride)) return 1;
    fkv_kv_geom g = {1, 1, 2, SD_PT, FKV_F32, stride, 64};
    uint32_t nsrc = ch->n_pages, ndst = fkv_quant_pages_needed(&g, FKV_F32, ch->n_tokens);
    size_t need = (size_t)(nsrc + ndst) * stride;
    if (need > st->scratch_bytes) {
        free(st->kst);
        free(st->vst);
        st->kst = malloc(need);
        st->vst = malloc(need);
        st->scratch_bytes = st->kst && st->vst ? need : 0;
        if (!st->scratch_bytes) return sd_fail(st, "out of memory");
    }
    uint32_t src[16], dst[16];
    if (nsrc > 16 || ndst > 16) return sd_fail(st, "chunk of %u pages", nsrc);
    for (uint32_t j = 0; j < nsrc; j++) {
        memcpy((char *)st->kst + j * stride, (char *)k + ch->pages[j] * stride, stride);
        memcpy((char *)st->vst + j * stride, (char *)v + ch->pages[j] * stride, stride);
        src[j] = j;
    }
    for (uint32_t j = 0; j < ndst; j++) dst[j] = nsrc + j;
    g.n_pages = nsrc + ndst;
    fkv_kv_layer l = {st->kst, st->vst};
    char err[160] = "";
    fkv_status rc = fkv_dequant_chunk(&g, &l, ch->n_tokens, ch->dtype, src, nsrc, ch->qmeta,
                                      fkv_quant_meta_bytes(&g, ch->dtype, ch->n_tokens), dst, ndst, err, sizeof err);
    if (rc)
        return sd_fail(st, "request %llu: chunk at %u does not decode: %s", (unsigned long long)q->r.id, ch->start,
                       err);
    /* keys: per channel over groups of FKV_QK_GROUP tokens (one group here) */
    double lo = 1e30, hi = -1e30;
    for (uint32_t t = 0; t < ch->n_tokens; t++) {
        double x = sd_value(q->tokens[ch->start + t], ch->start + t);
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    for (uint32_t t = 0; t < ch->n_tokens; t++) {
        uint32_t pos = ch->start + t;
        const float *kp = (const float *)((const char *)st->kst + dst[t / SD_PT] * stride) + (t % SD_PT) * 2;
        const float *vp = (const float *)((const char *)st->vst + dst[t / SD_PT] * stride) + (t % SD_PT) * 2;
        double want = sd_value(q->tokens[pos], pos);
        /* values: per token over its channels (-f, 0.5) */
        double vlo = -want < 0.5 ? -want : 0.5, vhi = -want < 0.5 ? 0.5 : -want;
        if (!(fabs(kp[0] - want) <= sd_qbound(ch->dtype, lo, hi, want)) ||
            !(fabs(kp[1] - 0.5) <= sd_qbound(ch->dtype, 0.5, 0.5, 0.5)) ||
            !(fabs(vp[0] + want) <= sd_qbound(ch->dtype, vlo, vhi, want)) ||
            !(fabs(vp[1] - 0.5) <= sd_qbound(ch->dtype, vlo, vhi, 0.5)))
            return sd_fail(st, "request %llu pos %u (%s chunk at %u): K=(%g,%g) V=(%g,%g), want K=(%g,0.5) V=(%g,0.5)",
                           (unsigned long long)q->r.id, pos, fkv_dtype_name(ch->dtype), ch->start, kp[0], kp[1], vp[0],
                           vp[1], want, -want);
        st->st.quant_tokens++;
    }
    return 0;
}

/* Every resident, non-dropped chunk of q's table below `limit` holds the
 * K/V of its tokens. */
static int sd_verify(sd_state *st, sd_req *q, uint32_t limit)
{
    const fkv_chunk_view *const *ch;
    size_t nc;
    float *k = NULL, *v = NULL;
    uint64_t stride = 0;
    if (sd_storage(st, &k, &v, &stride)) return 1;
    if (fkv_seq_chunks(q->r.seq, &ch, &nc))
        return sd_fail(st, "request %llu: no chunk table", (unsigned long long)q->r.id);
    uint32_t expect = 0;
    for (size_t i = 0; i < nc; i++) {
        const fkv_chunk_view *c = ch[i];
        if (c->start != expect || !c->n_tokens)
            return sd_fail(st, "request %llu: chunk %zu at %u (%u tokens), expected at %u", (unsigned long long)q->r.id,
                           i, c->start, c->n_tokens, expect);
        expect = c->start + c->n_tokens;
        if (c->start >= limit || !c->resident || c->dropped) continue;
        if (c->dtype != FKV_F32) {
            if (c->dtype != FKV_INT8 && c->dtype != FKV_INT4)
                return sd_fail(st, "request %llu: chunk at %u in precision %d", (unsigned long long)q->r.id, c->start,
                               (int)c->dtype);
            if (sd_verify_quant(st, q, c)) return 1;
            continue;
        }
        for (uint32_t t = 0; t < c->n_tokens && c->start + t < limit; t++) {
            uint32_t pos = c->start + t;
            const float *kp = (const float *)((const char *)k + c->pages[t / SD_PT] * stride) + (t % SD_PT) * 2;
            const float *vp = (const float *)((const char *)v + c->pages[t / SD_PT] * stride) + (t % SD_PT) * 2;
            float want = sd_value(q->tokens[pos], pos);
            if (kp[0] != want || vp[0] != -want || kp[1] != 0.5f || vp[1] != 0.5f)
                return sd_fail(st, "request %llu pos %u (chunk at %u, page %u slot %u): K=%g V=%g, want %g",
                               (unsigned long long)q->r.id, pos, c->start, c->pages[t / SD_PT], t % SD_PT, kp[0], vp[0],
                               want);
            st->st.verified_tokens++;
        }
    }
    if (expect != fkv_seq_len(q->r.seq))
        return sd_fail(st, "request %llu: chunks end at %u, length %u", (unsigned long long)q->r.id, expect,
                       fkv_seq_len(q->r.seq));
    return 0;
}

/* ---------------------------------------------------------------- one item */

static int sd_item(sd_state *st, size_t idx, uint32_t *range_next)
{
    const fkv_batch *b = &st->b;
    const fkv_batch_item *it = &b->items[idx];
    sd_req *q = sd_of(st, it->r);
    if (!q) return sd_fail(st, "item %zu: not a request of the driver", idx);
    unsigned long long id = (unsigned long long)q->r.id;
    uint32_t qi = (uint32_t)(q - st->req);
    /* (1) a running request with a sequence, once per batch */
    if (q->r.state != FKV_REQ_RUNNING || !q->r.seq)
        return sd_fail(st, "request %llu: in the batch in state %d, seq %p", id, (int)q->r.state, (void *)q->r.seq);
    if (st->in_batch[qi]++) return sd_fail(st, "request %llu: twice in the batch", id);
    if (!it->n_new && !it->n_restored) return sd_fail(st, "request %llu: an empty item", id);
    uint32_t len = fkv_seq_len(q->r.seq);
    if (len != it->ctx + it->n_new || q->r.computed != len)
        return sd_fail(st, "request %llu: ctx %u + n_new %u, sequence length %u, computed %u", id, it->ctx, it->n_new,
                       len, q->r.computed);
    if (it->ctx + it->n_new > q->n_prompt + q->max_tokens)
        return sd_fail(st, "request %llu: ctx %u + n_new %u beyond prompt %u + output %u", id, it->ctx, it->n_new,
                       q->n_prompt, q->max_tokens);
    /* the step contract (sched.h): what the step does, decided once */
    {
        int decoding = it->ctx >= q->r.target || (q->r.generated && it->ctx + 1 == q->r.target);
        fkv_item_kind want = !it->n_new   ? FKV_ITEM_RESTORE
                             : decoding   ? FKV_ITEM_DECODE
                             : q->r.generated ? FKV_ITEM_REFILL
                                              : FKV_ITEM_PROMPT;
        int emits = it->n_new && it->ctx + it->n_new >= q->r.target;
        if (it->kind != want)
            return sd_fail(st, "request %llu: kind %d, want %d (ctx %u, n_new %u, target %u, generated %u)", id,
                           (int)it->kind, (int)want, it->ctx, it->n_new, q->r.target, q->r.generated);
        if (it->emits != emits || it->first != (emits && !q->r.generated) ||
            it->finishes != (emits && q->r.generated + 1 >= q->r.output))
            return sd_fail(st, "request %llu: emits %d first %d finishes %d (ctx %u + %u, target %u, %u of %u out)",
                           id, it->emits, it->first, it->finishes, it->ctx, it->n_new, q->r.target, q->r.generated,
                           q->r.output);
    }
    /* the shape of the new tokens: a prefill chunk up to the target, or one decode token */
    if (it->n_new) {
        int prefill = it->kind != FKV_ITEM_DECODE;
        if (prefill && it->ctx + it->n_new > q->r.target)
            return sd_fail(st, "request %llu: prefill to %u past the target %u", id, it->ctx + it->n_new, q->r.target);
        if (!prefill && it->n_new != 1) return sd_fail(st, "request %llu: decode of %u tokens", id, it->n_new);
        if (!st->cell.chunked_prefill && prefill && it->ctx + it->n_new < q->r.target &&
            (idx != 0 || it->n_new != st->cell.max_batch_tokens))
            return sd_fail(st, "request %llu: whole-prompt prefill split (%u of %u) as item %zu", id, it->n_new,
                           q->r.target - it->ctx, idx);
    }
    /* (2) the restored ranges: this item's share of the batch's, in order */
    if (it->range0 != *range_next || it->range0 + it->n_ranges > b->n_ranges)
        return sd_fail(st, "request %llu: ranges [%u, +%u) after %u of %zu", id, it->range0, it->n_ranges, *range_next,
                       b->n_ranges);
    *range_next = it->range0 + it->n_ranges;
    const fkv_chunk_view *const *ch;
    size_t nc;
    if (fkv_seq_chunks(q->r.seq, &ch, &nc)) return sd_fail(st, "request %llu: no chunk table", id);
    uint32_t sum = 0, prev_end = 0;
    for (uint32_t k = 0; k < it->n_ranges; k++) {
        fkv_range g = b->ranges[it->range0 + k];
        if (g.start >= g.end || g.end > it->ctx || (k && g.start < prev_end))
            return sd_fail(st, "request %llu: restored range [%u,%u) (previous end %u, ctx %u)", id, g.start, g.end,
                           prev_end, it->ctx);
        prev_end = g.end;
        sum += g.end - g.start;
        /* whole chunks (the last one may have grown since, by this step's
         * new tokens), resident now, and everything before them readable */
        int starts = 0, ends = 0;
        for (size_t i = 0; i < nc; i++) {
            const fkv_chunk_view *c = ch[i];
            uint32_t e = c->start + c->n_tokens;
            starts |= c->start == g.start;
            ends |= e == g.end || (g.end == it->ctx && c->start < g.end && e > g.end && e <= it->ctx + it->n_new);
            if (c->start < g.end && !c->resident && !c->dropped)
                return sd_fail(st, "request %llu: restored [%u,%u) but chunk at %u is missing", id, g.start, g.end,
                               c->start);
            if (c->start < g.end && e > g.start && c->dtype != FKV_F32)
                return sd_fail(st, "request %llu: restored chunk at %u is %s", id, c->start, fkv_dtype_name(c->dtype));
        }
        if (!starts || !ends)
            return sd_fail(st, "request %llu: restored range [%u,%u) splits a chunk", id, g.start, g.end);
    }
    if (sum != it->n_restored)
        return sd_fail(st, "request %llu: ranges sum to %u, n_restored %u", id, sum, it->n_restored);
    /* (5) new tokens attend to everything before them */
    if (it->n_new)
        for (size_t i = 0; i < nc && ch[i]->start < it->ctx; i++)
            if (!ch[i]->resident && !ch[i]->dropped)
                return sd_fail(st, "request %llu: chunk at %u missing in a step with %u new tokens", id, ch[i]->start,
                               it->n_new);
    /* (3) compute: the restored ranges, then the new tokens */
    for (uint32_t k = 0; k < it->n_ranges; k++) {
        fkv_range g = b->ranges[it->range0 + k];
        if (sd_write(st, q, g.start, g.end)) return 1;
    }
    if (sd_write(st, q, it->ctx, it->ctx + it->n_new)) return 1;
    /* (4) attention reads what it attends to: everything before its new
     * tokens; an item of restores alone, what lies before its last range
     * (a later chunk may be restored by a later item of the step) */
    uint32_t reads = it->n_new ? it->ctx + it->n_new : it->n_ranges ? b->ranges[it->range0 + it->n_ranges - 1].end : 0;
    if (sd_verify(st, q, reads)) return 1;
    st->st.items++;
    st->st.new_tokens += it->n_new;
    st->st.restored_tokens += it->n_restored;
    if (it->n_restored) st->st.restore_items++;
    if (it->n_restored && !it->n_new) st->st.stalled_items++;
    return 0;
}

/* ---------------------------------------------------------------- forks, ends */

/* As the engine's fork_kids: each waiting sample takes its first token
 * from the fork and shares q's sequence; the scheduler starts it from that
 * sequence. */
static int sd_fork_kids(sd_state *st, sd_req *q)
{
    for (uint32_t k = 0; k < q->n_kids; k++) {
        sd_req *c = &st->req[q->kids[k]];
        if (c->max_tokens == 1) { /* its only token came with the fork */
            c->state = SD_ENDED;
            st->st.kid_ends_at_fork++;
            continue;
        }
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = c->r.id;
        p.client_id = c->r.client;
        p.tenant = c->r.tenant;
        p.expected_tokens = c->n_prompt + c->max_tokens;
        fkv_seq *child = NULL;
        fkv_status rc = fkv_seq_fork(q->r.seq, &p, &child);
        if (rc)
            return sd_fail(st, "fork of request %llu: %s", (unsigned long long)q->r.id, fkv_last_error());
        c->r.output = c->max_tokens - 1;
        c->r.arrival_ns = st->now;
        rc = fkv_sched_add_seq(st->s, &c->r, child);
        if (rc) {
            fkv_seq_free(child);
            return sd_fail(st, "fkv_sched_add_seq of a fork: %s", fkv_sched_last_error(st->s));
        }
        c->gen_offset = 1;
        c->state = SD_LIVE;
        st->st.forks++;
    }
    q->n_kids = 0;
    return 0;
}

/* As the engine with streaming sparsity: after the step, chunks outside
 * the first one and the recent window are dropped. */
static int sd_sparsify(sd_state *st)
{
    for (uint32_t i = 0; i < st->n_req; i++) {
        sd_req *q = &st->req[i];
        if (q->state != SD_LIVE || q->r.state != FKV_REQ_RUNNING || !q->r.seq || !q->r.generated) continue;
        const fkv_chunk_view *const *ch;
        size_t nc;
        if (fkv_seq_chunks(q->r.seq, &ch, &nc)) return sd_fail(st, "no chunk table");
        uint8_t keep[SD_MAX_LEN];
        fkv_range drop[SD_MAX_LEN];
        size_t nd = 0;
        fkv_sparse_config sc = {FKV_SPARSE_STREAMING, 16, 0};
        if (nc > SD_MAX_LEN || fkv_sparse_select(&sc, ch, nc, NULL, keep, NULL)) return sd_fail(st, "sparse select");
        for (size_t c = 0; c < nc; c++) {
            if (keep[c] || !ch[c]->resident) continue;
            if (nd && drop[nd - 1].end == ch[c]->start)
                drop[nd - 1].end = ch[c]->start + ch[c]->n_tokens;
            else
                drop[nd++] = (fkv_range){ch[c]->start, ch[c]->start + ch[c]->n_tokens};
        }
        for (size_t d = 0; d < nd; d++) {
            uint32_t got = 0;
            if (fkv_seq_drop(q->r.seq, drop[d].start, drop[d].end, &got))
                return sd_fail(st, "drop: %s", fkv_last_error());
            st->st.drops += got;
        }
    }
    return 0;
}

/* Requests the step ended: done ones emitted everything, rejected ones
 * could not fit even alone (so a small one never is), and neither holds a
 * sequence any more. */
static int sd_reap(sd_state *st)
{
    for (uint32_t i = 0; i < st->n_req; i++) {
        sd_req *q = &st->req[i];
        if (q->state != SD_LIVE || (q->r.state != FKV_REQ_DONE && q->r.state != FKV_REQ_REJECTED)) continue;
        unsigned long long id = (unsigned long long)q->r.id;
        if (q->r.seq) return sd_fail(st, "request %llu: ended holding its sequence", id);
        if (q->r.state == FKV_REQ_DONE && q->r.generated != q->r.output)
            return sd_fail(st, "request %llu: done after %u of %u tokens", id, q->r.generated, q->r.output);
        if (q->r.state == FKV_REQ_REJECTED) {
            uint32_t tokens = q->n_prompt + q->max_tokens;
            if (2 * (tokens + 8) <= st->cell.capacity_pages * SD_PT)
                return sd_fail(st, "request %llu of %u tokens rejected by a cache of %u tokens", id, tokens,
                               st->cell.capacity_pages * SD_PT);
            for (uint32_t k = 0; k < q->n_kids; k++) st->req[q->kids[k]].state = SD_ENDED; /* its samples end with it */
            q->n_kids = 0;
            st->st.rejected++;
        } else {
            st->st.done++;
        }
        q->state = SD_ENDED;
        st->last_progress = st->step;
    }
    return 0;
}

/* ---------------------------------------------------------------- one step */

static int sd_step(sd_state *st)
{
    st->step++;
    st->st.steps++;
    st->now += SD_STEP_NS;
    memset(st->in_batch, 0, sizeof st->in_batch);
    for (uint32_t i = 0; i < st->n_req; i++) {
        st->was_running[i] = st->req[i].state == SD_LIVE && st->req[i].r.state == FKV_REQ_RUNNING;
        st->was_waiting[i] = st->req[i].state == SD_LIVE && st->req[i].r.state == FKV_REQ_WAITING;
        st->preemptions[i] = st->req[i].r.preemptions;
    }
    uint64_t preempted_before = fkv_sched_preemptions(st->s);
    sd_poison(st);
    fkv_batch *b = &st->b;
    fkv_status rc = fkv_sched_step(st->s, st->now, b);
    if (rc) return sd_fail(st, "fkv_sched_step: %s: %s", fkv_strerror(rc), fkv_sched_last_error(st->s));
    if (b->n == 0 && b->wake_ns > st->now) st->now = b->wake_ns;
    if (st->trace) {
        fprintf(stderr, "step %llu: %zu items, %u tokens, %u preempted\n", (unsigned long long)st->step, b->n,
                b->tokens, b->preempted);
        for (size_t i = 0; i < b->n; i++) {
            const fkv_batch_item *it = &b->items[i];
            fprintf(stderr, "  req %llu ctx %u new %u%s restored %u:", (unsigned long long)it->r->id, it->ctx,
                    it->n_new, it->kind != FKV_ITEM_DECODE && it->n_new ? " (prefill)" : "", it->n_restored);
            for (uint32_t k = 0; k < it->n_ranges && it->range0 + k < b->n_ranges; k++)
                fprintf(stderr, " [%u,%u)", b->ranges[it->range0 + k].start, b->ranges[it->range0 + k].end);
            fputc('\n', stderr);
        }
        for (uint32_t i = 0; i < st->n_req; i++) {
            const sd_req *q = &st->req[i];
            if (q->state != SD_LIVE) continue;
            fprintf(stderr, "  [req %llu: state %d computed %u target %u generated %u/%u prompt %u%s",
                    (unsigned long long)q->r.id, (int)q->r.state, q->r.computed, q->r.target, q->r.generated,
                    q->r.output, q->n_prompt, q->gen_offset ? " fork" : "");
            const fkv_chunk_view *const *ch;
            size_t nc;
            if (q->r.seq && !fkv_seq_chunks(q->r.seq, &ch, &nc))
                for (size_t c = 0; c < nc; c++) {
                    fkv_chunk_info in = {0};
                    fkv_seq_chunk_info(q->r.seq, c, &in);
                    fprintf(stderr, " %u+%u%s%s%s", ch[c]->start, ch[c]->n_tokens,
                            ch[c]->resident ? "" : (ch[c]->dropped ? "d" : "x"), in.refs > 1 ? "s" : "",
                            ch[c]->dtype != FKV_F32 ? "q" : "");
                }
            fprintf(stderr, "]\n");
        }
    }
    st->st.preempted += fkv_sched_preemptions(st->s) - preempted_before;
    st->st.host_tokens += b->host_tokens;
    /* the budget and its accounting */
    uint64_t sum = 0, reload = 0;
    for (size_t i = 0; i < b->n; i++) {
        sum += b->items[i].n_new + (st->cell.miss == FKV_MISS_RECOMPUTE ? b->items[i].n_restored : 0);
        reload += st->cell.miss == FKV_MISS_RELOAD ? b->items[i].n_restored : 0;
    }
    /* over the budget only as a step of one item that restores one chunk
     * larger than the budget (sched.h) */
    int oversize = b->n == 1 && b->items[0].n_new == 0 && b->items[0].n_ranges == 1 &&
                   b->ranges[b->items[0].range0].end - b->ranges[b->items[0].range0].start > st->cell.max_batch_tokens;
    if (sum != b->tokens || reload != b->reload_tokens || (b->tokens > st->cell.max_batch_tokens && !oversize))
        return sd_fail(st, "batch of %zu items: tokens %u (items say %llu), reloads %llu (items say %llu), budget %u",
                       b->n, b->tokens, (unsigned long long)sum, (unsigned long long)b->reload_tokens,
                       (unsigned long long)reload, st->cell.max_batch_tokens);
    /* the engine's work, item by item in batch order */
    uint32_t range_next = 0;
    for (size_t i = 0; i < b->n; i++)
        if (sd_item(st, i, &range_next)) return 1;
    if (range_next != b->n_ranges) return sd_fail(st, "%zu ranges, items name %u", b->n_ranges, range_next);
    /* the running set, the batching mode, and everything left resident */
    uint32_t running = 0;
    int kept = 0, started = 0;
    for (uint32_t i = 0; i < st->n_req; i++) {
        sd_req *q = &st->req[i];
        if (q->state != SD_LIVE) continue;
        running += q->r.state == FKV_REQ_RUNNING;
        /* (one preempted and admitted again in this step was not kept) */
        int again = q->r.preemptions != st->preemptions[i];
        kept |= st->was_running[i] && !again && q->r.state == FKV_REQ_RUNNING;
        started |= (st->was_waiting[i] || again) && q->r.state == FKV_REQ_RUNNING;
        if (q->r.seq) {
            if (fkv_seq_len(q->r.seq) != q->r.computed)
                return sd_fail(st, "request %llu: sequence length %u, computed %u", (unsigned long long)q->r.id,
                               fkv_seq_len(q->r.seq), q->r.computed);
            if (sd_verify(st, q, UINT32_MAX)) return 1;
        } else if (q->r.state == FKV_REQ_RUNNING) {
            return sd_fail(st, "request %llu: running without a sequence", (unsigned long long)q->r.id);
        }
    }
    uint64_t live = 0;
    for (uint32_t i = 0; i < st->n_req; i++)
        if (st->req[i].state == SD_LIVE && st->req[i].r.seq) live += st->req[i].r.computed;
    if (live != fkv_sched_live_tokens(st->s))
        return sd_fail(st, "live tokens %llu, the sequences hold %llu",
                       (unsigned long long)fkv_sched_live_tokens(st->s), (unsigned long long)live);
    if (running > st->cell.max_running) return sd_fail(st, "%u running, limit %u", running, st->cell.max_running);
    if (st->cell.mode == FKV_SCHED_DYNAMIC && kept && started)
        return sd_fail(st, "dynamic batching admitted a request while the batch ran");
    if (fkv__cache_check(st->c, st->msg, sizeof st->msg)) {
        char m[sizeof st->msg];
        memcpy(m, st->msg, sizeof m);
        return sd_fail(st, "cache invariant: %s", m);
    }
    if (st->c->stats.fairkv_quant_failures_total[0] != 0)
        return sd_fail(st, "the cache tried to quantize a chunk whose K/V were not written yet");
    /* emissions, in batch order; sample 0 forks the others at its first */
    for (size_t i = 0; i < b->n; i++) {
        const fkv_batch_item *it = &b->items[i];
        sd_req *q = sd_of(st, it->r);
        if (!it->n_new || q->r.computed < q->r.target) continue;
        uint32_t pos = q->r.computed, want = q->n_prompt + q->gen_offset + q->r.generated;
        if (pos != want)
            return sd_fail(st, "request %llu: emission %u at position %u, expected %u", (unsigned long long)q->r.id,
                           q->r.generated + 1, pos, want);
        if (q->r.generated >= q->r.output)
            return sd_fail(st, "request %llu: emits token %u of %u", (unsigned long long)q->r.id, q->r.generated + 1,
                           q->r.output);
        st->st.emissions++;
        st->last_progress = st->step;
        if (q->n_kids && q->r.generated == 0 && sd_fork_kids(st, q)) return 1;
    }
    rc = fkv_sched_finish(st->s, b, st->now);
    if (rc) return sd_fail(st, "fkv_sched_finish: %s", fkv_strerror(rc));
    if (st->cell.sparsity && sd_sparsify(st)) return 1;
    if (sd_reap(st)) return 1;
    if (st->step - st->last_progress > st->st.max_gap) st->st.max_gap = st->step - st->last_progress;
    if (st->step - st->last_progress > SD_STALL_STEPS)
        return sd_fail(st, "no emission and no end in %d steps (%zu waiting, %zu running)", SD_STALL_STEPS,
                       fkv_sched_n_waiting(st->s), fkv_sched_n_running(st->s));
    return 0;
}

static int sd_live(const sd_state *st)
{
    for (uint32_t i = 0; i < st->n_req; i++)
        if (st->req[i].state == SD_LIVE || st->req[i].state == SD_KID) return 1;
    return 0;
}

/* One operation of the stream: 0, or 1 with st->msg set. */
static int sd_op(sd_state *st, sd_src *src)
{
    uint32_t op = sd_next(src, 8);
    if (!sd_live(st)) st->last_progress = st->step; /* idle is not stuck */
    switch (op) {
    case 0:
    case 1:
    case 2:
        return sd_submit(st, src);
    case 3:
        sd_cancel(st, src);
        return 0;
    case 4:
        st->now += (int64_t)sd_next(src, 4) * SD_STEP_NS;
        return 0; /* time passes between steps */
    default: {
        uint32_t n = op == 7 ? 1 + sd_next(src, 12) : 1 + sd_next(src, 3);
        for (uint32_t i = 0; i < n; i++)
            if (sd_step(st)) return 1;
        return 0;
    }
    }
}

/* Runs steps until every request has ended: they must, within bounds. */
static int sd_drain(sd_state *st)
{
    uint64_t from = st->step;
    st->last_progress = st->step;
    while (sd_live(st)) {
        if (st->step - from > SD_DRAIN_STEPS) return sd_fail(st, "requests still live after %d steps", SD_DRAIN_STEPS);
        if (sd_step(st)) return 1;
    }
    if (st->step - from > st->st.max_drain) st->st.max_drain = st->step - from;
    if (fkv_sched_n_waiting(st->s) || fkv_sched_n_running(st->s))
        return sd_fail(st, "every request ended, the scheduler has %zu waiting, %zu running",
                       fkv_sched_n_waiting(st->s), fkv_sched_n_running(st->s));
    fkv_counters cn;
    fkv_cache_counters(st->c, &cn);
    st->st.cow_copies += cn.cow_copies;
    st->st.prefix_hits += cn.prefix_hit_tokens;
    st->st.evicted_pages += cn.evicted_pages;
    st->st.quantized +=
        (uint64_t)(st->c->stats.fairkv_quantized_chunks_total[0] + st->c->stats.fairkv_quantized_chunks_total[1]);
    for (uint32_t i = 0; i < st->n_req; i++) {
        st->st.reclaims += st->req[i].r.reclaims;
        st->st.fair_picks += st->req[i].r.fair_picks;
        if (st->req[i].r.fair_picks > 2) /* fair_max_victim's default */
            return sd_fail(st, "request %llu chosen %u times by the fair rule", (unsigned long long)st->req[i].r.id,
                           st->req[i].r.fair_picks);
    }
    return 0;
}

/* A whole run: the ops of src (at most max_ops), then the drain. */
static int sd_run(sd_state *st, sd_src *src, uint32_t max_ops)
{
    for (uint32_t i = 0; i < max_ops && sd_more(src); i++)
        if (sd_op(st, src)) return 1;
    return sd_drain(st);
}

/* A fuzz input: four bytes of cell word (little-endian), then at most
 * 512 bytes of operations (one input stays a short run).  Returns 0, 1 on
 * a failure (st->msg), -1 if the input is too short; st is closed unless
 * it failed. */
#define SD_INPUT_OPS 512
static int sd_run_input(sd_state *st, const uint8_t *data, size_t size, int trace)
{
    if (size < 4) return -1;
    uint32_t word = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    if (sd_open(st, word) != FKV_OK) return 1;
    st->trace = trace;
    sd_src src = {data + 4, size - 4 < SD_INPUT_OPS ? size - 4 : SD_INPUT_OPS, 0, 0, NULL, 0, 0};
    if (sd_run(st, &src, 200)) return 1;
    sd_close(st);
    return 0;
}

#endif
