/* Parsing of the engine backend's options (backend_engine_opts.h). */
#include "server/backend_engine_opts.h"
#include "util/bytes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int u64_in(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* on|off|1|0|true|false */
static int onoff(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false")) *out = 0;
    else return -1;
    return 0;
}

/* auto | flops | tokens | c0,c1,c2[,c3] (ms; `fairkv bench --calibrate --coeffs-out`):
 * finite, c1..c3 >= 0 and c1 + c2 > 0 (a cost that grows with the step) */
static int step_cost(const char *v, fkv_engine_config *cfg)
{
    if (!strcmp(v, "flops") || !strcmp(v, "tokens") || !strcmp(v, "auto")) {
        cfg->step_cost = v[0] == 'f' ? FKV_STEP_COST_FLOPS : v[0] == 't' ? FKV_STEP_COST_TOKENS : FKV_STEP_COST_AUTO;
        return 0;
    }
    double c[4] = {0, 0, 0, 0};
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !(x > -1e9 && x < 1e9) || n == 4 || (n > 0 && x < 0)) return -1;
        c[n++] = x;
        if (*end == '\0') break;
        if (*end != ',') return -1;
        p = end + 1;
    }
    if (n < 3 || !(c[1] + c[2] > 0)) return -1;
    cfg->step_cost = FKV_STEP_COST_COEFFS;
    memcpy(cfg->step_coeffs, c, sizeof c);
    return 0;
}

fkv_status fkv__engine_opts_parse(const char *const *opts, fkv_engine_config *cfg, char *model, size_t cap,
                                  fkv_engine_backend_opts *bo, char *err, size_t errlen)
{
    fkv_engine_config_default(cfg);
    cfg->chunk_tokens = 64; /* the simulator's schemes use 64-token chunks */
    /* The recommended configuration, the simulator's `fairkv` scheme
     * (docs/EVALUATION.md, 3b, "Re-choosing the recommended fairkv"):
     * tenant shares (the 'user' field) as guarantees, int4 cold chunks
     * behind 64 hot tokens under pressure (the precision the ladder rule
     * of docs/EVALUATION.md 2b picks among what the cache stores), the
     * fair victim, fair reclaim before preempting.
     * Its step rule, each tenant's prefill at most 1/n of a step for n
     * tenants, needs the number of tenants, which a server does not know;
     * serve keeps the step rule of the rule's previous run instead: the
     * step shared by deficit round robin under the step-time bound (k = 2;
     * the engine prices a step by its tokens).  An option that contradicts
     * one of them drops it (below). */
    cfg->quotas = FKV_QUOTA_TENANT;
    cfg->share_guarantee = 1;
    cfg->admit_reclaim = 0;
    cfg->step_share = FKV_STEP_DRR;
    cfg->step_bound = 2;
    cfg->quant_mode = FKV_QUANT_UNDER_PRESSURE;
    cfg->quant_dtype = FKV_INT4; /* behind 64 hot tokens, the fairkv scheme's ladder */
    cfg->quant_hot_tokens = 64;
    cfg->victim = FKV_VICTIM_FAIR;
    cfg->reclaim[0] = FKV_RECLAIM_QUANTIZE8, cfg->reclaim[1] = FKV_RECLAIM_QUANTIZE4;
    cfg->reclaim[2] = FKV_RECLAIM_EVICT, cfg->n_reclaim = 3;
    int shares_set = 0, reclaim_set = 0, quant_set = 0, host_policy_set = 0, dtype_set = 0;
    model[0] = 0;
    memset(bo, 0, sizeof *bo);
    for (size_t i = 0; opts && opts[i]; i++) {
        const char *o = opts[i], *eq = strchr(o, '=');
        if (!eq) {
            snprintf(err, errlen, "engine backend: option '%s' is not key=value", o);
            return FKV_EINVAL;
        }
        size_t kl = (size_t)(eq - o);
        const char *v = eq + 1;
        uint64_t u = 0;
        int bad = 0, known = 1;
#define KEY(k) (kl == strlen(k) && !strncmp(o, k, kl))
        if (KEY("model")) {
            if (strlen(v) >= cap) bad = 1;
            else snprintf(model, cap, "%s", v);
        } else if (KEY("kv_budget")) {
            int64_t x = fkv_parse_bytes(v);
            if (x <= 0) bad = 1;
            else cfg->kv_budget_bytes = (uint64_t)x;
        } else if (KEY("kv_dtype")) {
            if (!strcmp(v, "f32")) cfg->kv_dtype = FKV_F32;
            else if (!strcmp(v, "f16")) cfg->kv_dtype = FKV_F16;
            else bad = 1;
        } else if (KEY("policy")) {
            if (!*v) bad = 1;
            cfg->policy = v;
        } else if (KEY("quotas")) {
            if (!strcmp(v, "tenant")) cfg->quotas = FKV_QUOTA_TENANT;
            else if (!strcmp(v, "request")) cfg->quotas = FKV_QUOTA_REQUEST;
            else bad = onoff(v, &cfg->quotas);
        } else if (KEY("shares")) {
            /* tenant shares as guarantees, targets or a static partition
             * (fkv_config.share_guarantee; needs quotas=tenant) */
            if (!strcmp(v, "guarantee")) cfg->share_guarantee = 1;
            else if (!strcmp(v, "target")) cfg->share_guarantee = 0;
            else if (!strcmp(v, "partition")) cfg->share_guarantee = 2;
            else bad = 1;
            shares_set = 1;
        } else if (KEY("victim")) {
            int r = fkv_victim_parse(v);
            if (r < 0) bad = 1;
            else cfg->victim = (fkv_victim_rule)r;
        } else if (KEY("reclaim")) {
            bad = fkv_sched_parse_reclaim(v, cfg->reclaim, &cfg->n_reclaim, NULL, 0) != 0;
            reclaim_set = 1;
        } else if (KEY("host_bytes")) {
            int64_t x = fkv_parse_bytes(v);
            if (x < 0) bad = 1;
            else cfg->host_bytes = (uint64_t)x;
        }
        else if (KEY("host_kv")) {
            /* a host tier that idle evicted chunks are demoted to and
             * matched from (fkv_config.host_demote) */
            int64_t x = fkv_parse_bytes(v);
            if (x <= 0) bad = 1;
            else cfg->host_bytes = (uint64_t)x, cfg->host_demote = 1;
        } else if (KEY("tier_admission")) {
            /* the filter below the device: the host tier's demotions and
             * the remote tier's write-back (backend_engine.c) */
            bad = fkv_tier_admission_parse(v, &cfg->tier_admission) != 0;
        } else if (KEY("host_policy")) {
            /* the host tier's eviction order (fkv_config.host_policy); the
             * Redis tier evicts by its own maxmemory-policy */
            bad = fkv_host_policy_parse(v, &cfg->host_policy) != 0;
            host_policy_set = 1;
        } else if (KEY("remote")) {
            if (!*v) bad = 1;
            bo->remote = v;
        } else if (KEY("remote_cluster")) {
            bad = onoff(v, &bo->remote_cluster);
        } else if (KEY("remote_timeout_ms")) {
            if (!(bad = u64_in(v, 1, 60000, &u))) bo->remote_timeout_ms = (int)u;
        } else if (KEY("remote_ttl_s")) {
            if (!(bad = u64_in(v, 1, 365 * 86400, &u))) bo->remote_ttl_s = (int)u;
        } else if (KEY("remote_quota")) {
            /* bytes each tenant namespace may hold in the remote tier; the
             * client deletes its least recently used leaf pages past it */
            int64_t x = fkv_parse_bytes(v);
            if (x <= 0) bad = 1;
            else bo->remote_quota = (uint64_t)x;
        }
        else if (KEY("dynamic_chunking")) bad = onoff(v, &cfg->dynamic_chunking);
        else if (KEY("prefix_cache")) bad = onoff(v, &cfg->prefix_cache);
        else if (KEY("chunked_prefill")) bad = onoff(v, &cfg->chunked_prefill);
        else if (KEY("quant")) {
            quant_set = 1;
            if (!strcmp(v, "off")) cfg->quant_mode = FKV_QUANT_OFF;
            else if (!strcmp(v, "always")) cfg->quant_mode = FKV_QUANT_ALWAYS;
            else if (!strcmp(v, "under-pressure")) cfg->quant_mode = FKV_QUANT_UNDER_PRESSURE;
            else bad = 1;
        } else if (KEY("quant_hot")) {
            if (!(bad = u64_in(v, 1, 1u << 20, &u))) cfg->quant_hot_tokens = (uint32_t)u;
        } else if (KEY("quant_dtype")) {
            /* what cold chunks are stored in: int4 (the default), int8 or fp8 */
            dtype_set = 1;
            if (!strcmp(v, "int8")) cfg->quant_dtype = FKV_INT8;
            else if (!strcmp(v, "fp8")) cfg->quant_dtype = FKV_FP8;
            else if (!strcmp(v, "int4")) cfg->quant_dtype = FKV_INT4;
            else bad = 1;
        } else if (KEY("quant_warm")) {
            /* the precision ladder: int8 (fp8) for this many tokens past the hot ones, then int4 (0: off) */
            if (!(bad = u64_in(v, 0, 1u << 20, &u))) cfg->quant_warm_tokens = (uint32_t)u;
        } else if (KEY("threads")) {
            if (!(bad = u64_in(v, 1, 256, &u))) cfg->n_threads = (uint32_t)u;
        } else if (KEY("chunk_tokens")) {
            if (!(bad = u64_in(v, 16, 65536, &u))) cfg->chunk_tokens = (uint32_t)u;
        } else if (KEY("max_batch_tokens")) {
            if (!(bad = u64_in(v, 1, 1u << 20, &u))) cfg->max_batch_tokens = (uint32_t)u;
        } else if (KEY("max_running")) {
            if (!(bad = u64_in(v, 1, 4096, &u))) cfg->max_running = (uint32_t)u;
        } else if (KEY("admission")) {
            if (!strcmp(v, "fcfs")) cfg->admission = FKV_ADMIT_FCFS;
            else if (!strcmp(v, "vtc")) cfg->admission = FKV_ADMIT_VTC;
            else bad = 1;
        } else if (KEY("step_share")) {
            int r = fkv_step_share_parse(v);
            if (r < 0) bad = 1;
            else cfg->step_share = (fkv_step_share)r;
        } else if (KEY("admit_reclaim")) {
            bad = onoff(v, &cfg->admit_reclaim);
        } else if (KEY("step_bound")) {
            char *end = NULL;
            double k = strtod(v, &end);
            if (!*v || *end || !(k >= 0 && k <= 1000)) bad = 1;
            else cfg->step_bound = k;
        } else if (KEY("step_cost")) {
            bad = step_cost(v, cfg);
        } else if (KEY("max_waiting")) {
            bad = u64_in(v, 0, 1u << 30, &bo->max_waiting);
        } else if (KEY("ignore_eos")) {
            bad = onoff(v, &bo->ignore_eos);
        } else if (KEY("ctx")) {
            if (!(bad = u64_in(v, 1, 1u << 24, &u))) bo->ctx = (uint32_t)u;
        } else if (KEY("step_log")) {
            if (!*v) bad = 1;
            bo->step_log = v;
        } else {
            known = 0;
        }
#undef KEY
        if (!known) {
            snprintf(err, errlen, "engine backend: unknown option '%.*s' (known: %s)", (int)kl, o, FKV_ENGINE_OPT_KEYS);
            return FKV_EINVAL;
        }
        if (bad) {
            snprintf(err, errlen, "engine backend: bad value in '%s'", o);
            return FKV_EINVAL;
        }
    }
    /* defaults a chosen option rules out: guarantees need tenant quotas,
     * quantizing reclaim and cold chunks the fairkv kernels */
    if (!shares_set && cfg->quotas != FKV_QUOTA_TENANT) cfg->share_guarantee = 0;
    if (!reclaim_set && cfg->ref_attention) cfg->n_reclaim = 0;
    if (!quant_set && cfg->ref_attention) cfg->quant_mode = FKV_QUANT_OFF;
    /* the ladder starts from int8 unless told fp8: int4 is its last rung */
    if (!dtype_set && cfg->quant_warm_tokens) cfg->quant_dtype = FKV_INT8;
    /* the recommended host-tier order (docs/EVALUATION.md, 3c, "Host-tier
     * eviction": S3-FIFO), where there is a host tier */
    if (!host_policy_set) cfg->host_policy = cfg->host_demote ? FKV_HOST_S3FIFO : FKV_HOST_LRU;
    if (cfg->tier_admission != FKV_TIER_ADMIT_OFF && !cfg->host_demote && !bo->remote) {
        snprintf(err, errlen, "engine backend: tier_admission=%s: no tier below the device to admit to (give host_kv "
                 "or remote)", fkv_tier_admission_name(cfg->tier_admission));
        return FKV_EINVAL;
    }
    if (cfg->host_policy != FKV_HOST_LRU && !cfg->host_demote) {
        snprintf(err, errlen, "engine backend: host_policy=%s: no host tier to order (give host_kv)",
                 fkv_host_policy_name(cfg->host_policy));
        return FKV_EINVAL;
    }
    return FKV_OK;
}
