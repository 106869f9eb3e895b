/* Random operation sequences over a small cache with real (cpu) storage,
 * shared by tests/test_ops_random.c and fuzz/fuzz_ops.c.
 *
 * Every appended token's K vector is written as a function of (token id,
 * position); whatever the cache does (sharing, copy-on-write, eviction,
 * restore), reading a resident token through the chunk table must give that
 * value back.  After every op the full invariant checker runs (or every
 * `check_every` ops). */
#ifndef FKV_OPS_DRIVER_H
#define FKV_OPS_DRIVER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv.h"

#define OPS_MAX_SEQS 24
#define OPS_MAX_LEN 600

typedef struct ops_src {
    const uint8_t *data; /* fuzz input, or NULL for the RNG */
    size_t len, pos;
    uint64_t rng;
} ops_src;

static uint32_t ops_next(ops_src *s, uint32_t bound)
{
    uint64_t x;
    if (s->data) {
        if (s->pos >= s->len) return 0;
        x = s->data[s->pos++];
        if (bound > 256 && s->pos < s->len) x = x << 8 | s->data[s->pos++];
    } else {
        s->rng += 0x9e3779b97f4a7c15ull; /* splitmix64 */
        x = s->rng;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
    }
    return bound ? (uint32_t)(x % bound) : 0;
}

typedef struct ops_seq {
    fkv_seq *s;
    int32_t tokens[OPS_MAX_LEN];
    uint32_t len;
    int pinned;
} ops_seq;

typedef struct ops_state {
    fkv_cache *c;
    int64_t now;
    ops_seq seqs[OPS_MAX_SEQS];
    uint32_t n;
    uint64_t next_id;
    char msg[256];
    uint64_t ops, efull, checks;
    int tenants; /* tenant mode: the extra draws and ops happen only here, so the
                  * other variants (and their fuzz seeds) replay as before */
    uint64_t reclaimed, reloaded;
    int host;  /* host tier variants: demotion on, a small host, tiered matches */
    uint64_t host_matched, promoted;
} ops_state;

/* distinct enough to catch misplaced data, and within fp16 range as real
 * K/V are (the quantizer's scales are fp16) */
static float ops_value(int32_t tok, uint32_t pos)
{
    return (float)(((uint32_t)tok * 31u + pos) % 4093u);
}

static int64_t ops_next_use(void *ctx, const fkv_chunk_view *v, const fkv_chunk_info *in)
{
    (void)ctx;
    return (int64_t)((v->start * 2654435761u) ^ (uint32_t)in->create_ns) & 0xffffff;
}

static const char *const ops_policies[] = {"fifo", "lru", "flru", "flru-literal", "sieve", "belady"};
/* 6 policies x quotas x dynamic x retention x prefix x 3 quantization
 * modes (k < 288), then the same 144 with quotas on in tenant mode: four
 * tenants of weights 1, 2, 0.5, 1, requests with published prefixes and
 * salts, and reclaim of running requests' chunks (ops_step case 9). */
#define OPS_VARIANTS 432
/* Then, numbered from OPS_VARIANTS on, the host tier: 6 policies x quotas
 * (request, tenant) x dynamic chunking x quantization (off, always) x
 * admission below the device (off, tinylfu, seen: a window of 64 sightings,
 * so the sketch halves often), with demotion on and a host of 16 pages,
 * matches across tiers and promotion (tests/test_ops_host.c); those 144
 * with the host tier's order lru, then s3fifo, then arc (host_policy). */
#define OPS_HOST_VARIANTS 432

/* 1: the variants in tenant mode read shares as guarantees
 * (fkv_config.share_guarantee; tests/test_guarantee.c); 0: as targets. */
static int ops_share_guarantee;

/* Config variant k: policies x quotas x dynamic chunking x retention. */
static fkv_status ops_open(ops_state *st, uint32_t k)
{
    memset(st, 0, sizeof *st);
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.dtype = FKV_F32;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.chunk_min_tokens = 4;
    cfg.chunk_max_tokens = 16;
    cfg.capacity_pages = 96;
    cfg.storage = FKV_STORAGE_CPU;
    st->host = k >= OPS_VARIANTS;
    st->tenants = k >= 288 && !st->host;
    if (st->host) {
        uint32_t h = k - OPS_VARIANTS;
        cfg.policy = ops_policies[h % 6];
        cfg.quotas = (h / 6) % 2 ? FKV_QUOTA_TENANT : FKV_QUOTA_REQUEST;
        cfg.dynamic_chunking = (h / 12) % 2;
        cfg.quant_mode = (fkv_quant_mode)((h / 24) % 2);
        cfg.tier_admission = (int)(h / 48 % 3); /* off, tinylfu, seen */
        cfg.host_policy = (fkv_host_policy)(h / 144); /* lru, s3fifo, arc */
        cfg.tier_admission_window = 64;
        cfg.quant_dtype = FKV_INT8;
        cfg.quant_hot_tokens = 8;
        cfg.host_capacity_bytes = 16 * 4 * 2 * 2 * sizeof(float); /* 16 pages of K+V */
        cfg.host_demote = 1;
        cfg.capacity_pages = 48; /* pressure: the device evicts often */
    } else {
        if (st->tenants) k = (k - 288) % 6 + 6 + 12 * ((k - 288) / 6); /* as the quotas-on variants */
        cfg.policy = ops_policies[k % 6];
        cfg.quotas = st->tenants ? FKV_QUOTA_TENANT : (k / 6) % 2;
        if (st->tenants) cfg.host_capacity_bytes = 24 * 4 * 2 * 2 * sizeof(float); /* 24 pages of K+V */
        cfg.dynamic_chunking = (k / 12) % 2;
        cfg.min_chunk_retention_ns = (k / 24) % 2 ? 50 : 0;
        cfg.prefix_cache = (k / 48) % 2 ? 0 : 1;
        cfg.quant_mode = (fkv_quant_mode)((k / 96) % 3); /* off, always, under-pressure */
        /* under pressure: int4; always: int8, or fp8 without the prefix cache */
        cfg.quant_dtype = (k / 96) % 3 == 2 ? FKV_INT4 : (k / 48) % 2 ? FKV_FP8 : FKV_INT8;
        cfg.quant_hot_tokens = 8;
        cfg.quant_pressure = 0.75;
    }
    cfg.share_guarantee = ops_share_guarantee && cfg.quotas == FKV_QUOTA_TENANT;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &st->now;
    cfg.thread_safe = 0;
    st->next_id = 1;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = 8;
    ev.next_use = ops_next_use;
    fkv_status rc = fkv_cache_create_eval(&cfg, &ev, &st->c, st->msg, sizeof st->msg);
    static const double w[4] = {1, 2, 0.5, 1};
    for (uint32_t t = 0; !rc && (st->tenants || st->host) && t < 4; t++)
        rc = fkv_cache_set_tenant_weight(st->c, t, w[t]);
    return rc;
}

static void ops_close(ops_state *st)
{
    fkv_cache_destroy(st->c);
    st->c = NULL;
}

static void ops_write(ops_state *st, ops_seq *q, const fkv_slot *slots, uint32_t from, uint32_t n)
{
    void *k, *v;
    uint64_t stride;
    if (fkv_cache_layer_storage(st->c, 0, &k, &v, &stride)) return;
    for (uint32_t i = 0; i < n; i++) {
        float *kp = (float *)((char *)k + slots[i].page * stride) + slots[i].slot * 2;
        float *vp = (float *)((char *)v + slots[i].page * stride) + slots[i].slot * 2;
        kp[0] = ops_value(q->tokens[from + i], from + i);
        vp[0] = -kp[0];
        kp[1] = vp[1] = 0.5f; /* every element written, as an engine does */
    }
}

/* Every resident token reads back what was written for it. */
static int ops_verify(ops_state *st, ops_seq *q)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    void *k, *v;
    uint64_t stride;
    if (fkv_seq_chunks(q->s, &ch, &n) || fkv_cache_layer_storage(st->c, 0, &k, &v, &stride)) return 1;
    if (fkv_seq_len(q->s) != q->len) {
        snprintf(st->msg, sizeof st->msg, "length %u, driver has %u", fkv_seq_len(q->s), q->len);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!ch[i]->resident) continue;
        if (ch[i]->dtype != FKV_F32) { /* quantized: its codec has its own tests */
            if (ch[i]->dtype != FKV_INT8 && ch[i]->dtype != FKV_INT4 && ch[i]->dtype != FKV_FP8) {
                snprintf(st->msg, sizeof st->msg, "chunk in precision %d", (int)ch[i]->dtype);
                return 1;
            }
            continue;
        }
        for (uint32_t t = 0; t < ch[i]->n_tokens; t++) {
            uint32_t pos = ch[i]->start + t;
            uint32_t page = ch[i]->pages[t / 4], slot = t % 4;
            const float *kp = (const float *)((const char *)k + page * stride) + slot * 2;
            const float *vp = (const float *)((const char *)v + page * stride) + slot * 2;
            float want = ops_value(q->tokens[pos], pos);
            if (kp[0] != want || vp[0] != -want) {
                snprintf(st->msg, sizeof st->msg, "request %llu pos %u: K=%g V=%g, want %g",
                         (unsigned long long)fkv_seq_id(q->s), pos, kp[0], vp[0], want);
                return 1;
            }
        }
    }
    return 0;
}

static void ops_drop(ops_state *st, uint32_t i)
{
    fkv_seq_free(st->seqs[i].s);
    st->seqs[i] = st->seqs[--st->n];
}

/* One random operation.  Returns 0, or 1 with st->msg set on a failure. */
/* A device-only match of the first plen tokens, keeping one to compute. */
static fkv_status ops_match(fkv_seq *s, const int32_t *tokens, uint32_t plen, uint32_t *m)
{
    fkv_match_info mi = {0, 0, 0};
    fkv_status st = fkv_seq_match_prefix(s, tokens, plen, plen - 1, FKV_MATCH_DEVICE_ONLY, &mi);
    *m = mi.device_tokens;
    return st;
}

static int ops_step(ops_state *st, ops_src *src)
{
    fkv_slot slots[OPS_MAX_LEN];
    uint32_t op = ops_next(src, st->tenants || st->host ? 10 : 9);
    st->ops++;
    st->now += ops_next(src, 20);
    ops_seq *q = st->n ? &st->seqs[ops_next(src, st->n)] : NULL;
    switch (op) {
    case 0:
    case 1: { /* new request: a prompt that often shares a prefix */
        if (st->n == OPS_MAX_SEQS) break;
        ops_seq *nq = &st->seqs[st->n];
        memset(nq, 0, sizeof *nq);
        uint32_t base = ops_next(src, 3), plen = 1 + ops_next(src, 60), same = ops_next(src, plen + 1);
        for (uint32_t i = 0; i < plen; i++) nq->tokens[i] = i < same ? (int32_t)(base * 7 + i % 5) : (int32_t)ops_next(src, 50);
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = st->next_id++;
        p.expected_tokens = plen + ops_next(src, 200);
        if (st->tenants || st->host) {
            p.tenant = ops_next(src, 4);
            p.shared_prefix_tokens = ops_next(src, 2) ? same : 0;
            p.cache_salt = ops_next(src, 8) == 0 ? 1 + ops_next(src, 2) : 0;
        }
        uint64_t blocks[8];
        /* (not in the host variants: a fork of an empty hash-id request
         * keys its appended pages on the ids, not on the tokens the driver
         * checks, which the host tier's longer memory makes visible) */
        int hashmode = ops_next(src, 4) == 0 && plen >= 8 && !st->host;
        uint32_t n_blocks = 0;
        if (hashmode) { /* block ids as a trace gives them: same ids for a same prefix */
            for (uint32_t b = 0; b < 8; b++) blocks[b] = (uint64_t)(base + 1) * 100 + (b * 8 < same ? b : 50 + ops_next(src, 3));
            n_blocks = plen / 8; /* full blocks of the prompt only */
        }
        if (fkv_seq_create_blocks(st->c, &p, hashmode ? blocks : NULL, n_blocks, &nq->s)) {
            snprintf(st->msg, sizeof st->msg, "create: %s", fkv_last_error());
            return 1;
        }
        st->n++;
        uint32_t m = 0;
        if (st->host && !hashmode) { /* across tiers: host chunks come attached, then maybe promoted */
            fkv_match_info mi;
            if (fkv_seq_match_prefix(nq->s, nq->tokens, plen, plen - 1, FKV_MATCH_ALL_TIERS, &mi)) {
                snprintf(st->msg, sizeof st->msg, "match tiers: %s", fkv_last_error());
                return 1;
            }
            m = mi.device_tokens + mi.host_tokens;
            if (fkv_seq_len(nq->s) != m || (mi.host_tokens && !mi.host_bytes)) {
                snprintf(st->msg, sizeof st->msg, "match tiers: %u + %u tokens (%llu bytes), length %u",
                         mi.device_tokens, mi.host_tokens, (unsigned long long)mi.host_bytes, fkv_seq_len(nq->s));
                return 1;
            }
            st->host_matched += mi.host_tokens;
            if (mi.host_tokens && ops_next(src, 2)) {
                fkv_fetch_info fi;
                fkv_status rc = fkv_seq_fetch(nq->s, 0, m, FKV_FETCH_HOST, NULL, &fi);
                uint32_t got = fi.host_tokens;
                uint64_t bytes = fi.host_bytes;
                if (rc && rc != FKV_EFULL) {
                    snprintf(st->msg, sizeof st->msg, "promote: %s", fkv_last_error());
                    return 1;
                }
                if (!rc && (got != mi.host_tokens || bytes != mi.host_bytes)) {
                    snprintf(st->msg, sizeof st->msg, "promoted %u tokens %llu bytes, matched %u in %llu",
                             got, (unsigned long long)bytes, mi.host_tokens, (unsigned long long)mi.host_bytes);
                    return 1;
                }
                st->promoted += got;
            }
        } else if (!hashmode && ops_match(nq->s, nq->tokens, plen, &m)) {
            snprintf(st->msg, sizeof st->msg, "match: %s", fkv_last_error());
            return 1;
        }
        if (hashmode) { /* ids cover 8-token blocks; tokens must agree with them for verification */
            for (uint32_t i = 0; i < plen; i++) nq->tokens[i] = (int32_t)(blocks[i / 8] % 1000) * 10 + (int32_t)(i % 8);
            if (ops_match(nq->s, NULL, plen, &m)) {
                snprintf(st->msg, sizeof st->msg, "match ids: %s", fkv_last_error());
                return 1;
            }
        }
        nq->len = m;
        if (m > plen) {
            snprintf(st->msg, sizeof st->msg, "matched %u of %u", m, plen);
            return 1;
        }
        fkv_status rc = fkv_seq_append(nq->s, hashmode ? NULL : nq->tokens + m, plen - m, slots);
        if (rc == FKV_EFULL) {
            st->efull++;
            if (fkv_seq_len(nq->s) != m) {
                snprintf(st->msg, sizeof st->msg, "EFULL append changed the length");
                return 1;
            }
        } else if (rc) {
            snprintf(st->msg, sizeof st->msg, "append: %s", fkv_last_error());
            return 1;
        } else {
            ops_write(st, nq, slots, m, plen - m);
            nq->len = plen;
        }
        break;
    }
    case 2: { /* decode: append a few tokens */
        if (!q) break;
        uint32_t n = 1 + ops_next(src, 12);
        if (q->len + n > OPS_MAX_LEN) break;
        for (uint32_t i = 0; i < n; i++) q->tokens[q->len + i] = (int32_t)ops_next(src, 50);
        fkv_status rc = fkv_seq_append(q->s, q->tokens + q->len, n, slots);
        if (rc == FKV_EFULL) {
            st->efull++;
        } else if (rc) {
            snprintf(st->msg, sizeof st->msg, "append: %s", fkv_last_error());
            return 1;
        } else {
            ops_write(st, q, slots, q->len, n);
            q->len += n;
        }
        break;
    }
    case 3: { /* fork */
        if (!q || st->n == OPS_MAX_SEQS) break;
        ops_seq *nq = &st->seqs[st->n];
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = st->next_id++;
        if (fkv_seq_fork(q->s, &p, &nq->s)) {
            snprintf(st->msg, sizeof st->msg, "fork: %s", fkv_last_error());
            return 1;
        }
        memcpy(nq->tokens, q->tokens, q->len * sizeof q->tokens[0]);
        nq->len = q->len;
        nq->pinned = 0;
        st->n++;
        break;
    }
    case 4: /* request ends */
        if (!q) break;
        ops_drop(st, (uint32_t)(q - st->seqs));
        break;
    case 5: { /* engine step reads it: reload what was offloaded (its bytes
               * must come back as they were: nothing is written), touch,
               * restore what is missing */
        if (!q) break;
        if (st->tenants || st->host) {
            fkv_fetch_info fi;
            fkv_status rc = fkv_seq_fetch(q->s, 0, q->len, FKV_FETCH_HOST, NULL, &fi);
            uint32_t rl = fi.host_tokens;
            if (rc == FKV_EFULL) break;
            if (rc) {
                snprintf(st->msg, sizeof st->msg, "reload: %s", fkv_last_error());
                return 1;
            }
            st->reloaded += rl;
        }
        uint32_t missing = 0;
        if (fkv_seq_touch(q->s, &missing)) return 1;
        fkv_range r[64];
        size_t nr = 0;
        fkv_seq_missing(q->s, r, 64, &nr);
        uint32_t sum = 0;
        for (size_t i = 0; i < nr && i < 64; i++) sum += r[i].end - r[i].start;
        if (nr <= 64 && sum != missing) {
            snprintf(st->msg, sizeof st->msg, "touch says %u missing, ranges sum to %u", missing, sum);
            return 1;
        }
        if (nr && nr <= 64) {
            fkv_fetch_info fi;
            fkv_status rc = fkv_seq_fetch(q->s, r[0].start, r[0].end, FKV_FETCH_RECOMPUTE, slots, &fi);
            uint32_t got = fi.recompute_tokens;
            if (rc == FKV_OK) {
                if (got != r[0].end - r[0].start) {
                    snprintf(st->msg, sizeof st->msg, "restored %u of %u", got, r[0].end - r[0].start);
                    return 1;
                }
                ops_write(st, q, slots, r[0].start, got);
            } else if (rc != FKV_EFULL) {
                return 1;
            }
        }
        if (ops_verify(st, q)) return 1;
        break;
    }
    case 6: /* pin / unpin */
        if (!q) break;
        if (q->pinned) {
            if (fkv_seq_unpin(q->s)) return 1;
            q->pinned = 0;
        } else if (ops_next(src, 2)) {
            if (fkv_seq_pin(q->s)) return 1;
            q->pinned = 1;
        }
        break;
    case 7: { /* explicit eviction */
        uint32_t freed = 0;
        fkv_status rc = fkv_cache_evict(st->c, ops_next(src, 40), &freed);
        if (rc && rc != FKV_EFULL) return 1;
        break;
    }
    case 9: { /* fair reclaim from a (maybe pinned) request: what it loses is
               * quantized, dropped or missing, never wrong */
        if (!q) break;
        fkv_reclaim_action a = (fkv_reclaim_action)ops_next(src, FKV_N_RECLAIM);
        fkv_reclaim_args args = {4 * ops_next(src, 3), 8 + 4 * ops_next(src, 4)};
        uint32_t freed = 0, want = 1 + ops_next(src, 16);
        if (fkv_seq_reclaim(q->s, a, &args, want, &freed)) {
            snprintf(st->msg, sizeof st->msg, "reclaim %s: %s", fkv_reclaim_name(a), fkv_last_error());
            return 1;
        }
        if (a == FKV_RECLAIM_PREEMPT && freed) {
            snprintf(st->msg, sizeof st->msg, "reclaim preempt freed %u pages", freed);
            return 1;
        }
        st->reclaimed += freed;
        if (ops_verify(st, q)) return 1;
        break;
    }
    default: /* let time pass */
        st->now += ops_next(src, 200);
        break;
    }
    return 0;
}

static int ops_check(ops_state *st)
{
    st->checks++;
    if (fkv__cache_check(st->c, st->msg, sizeof st->msg)) return 1;
    for (uint32_t i = 0; i < st->n; i++)
        if (ops_verify(st, &st->seqs[i])) return 1;
    return 0;
}

#endif
