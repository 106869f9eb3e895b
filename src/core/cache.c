/* The cache facade: configuration, creation, public queries.  Errors and
 * the clock are in status.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv_quant.h"

/* ---------------------------------------------------------------- names */

const char *fkv_class_name(fkv_class cl)
{
    static const char *const n[] = {"short", "medium", "long"};
    return (unsigned)cl < FKV_N_CLASSES ? n[cl] : "?";
}

/* ---------------------------------------------------------------- config */

void fkv_config_default(fkv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_layers = 32;
    cfg->n_kv_heads = 8;
    cfg->head_dim = 128;
    cfg->dtype = FKV_F16;
    cfg->page_tokens = 16;
    cfg->capacity_bytes = (uint64_t)1 << 30;
    cfg->storage = FKV_STORAGE_PHANTOM;
    cfg->chunk_tokens = 64;
    cfg->dynamic_chunking = 0;
    cfg->chunk_min_tokens = 32;
    cfg->chunk_max_tokens = 256;
    cfg->policy = "flru";
    cfg->alpha = 0.7;
    cfg->beta = 0.3;
    cfg->age_unit_ns = 0; /* the pool's turnover: docs/ARCHITECTURE.md, "F-LRU's units" */
    cfg->quotas = FKV_QUOTA_REQUEST;
    cfg->temperature = 2.0;
    cfg->tenant_labels = 16;
    cfg->min_chunk_retention_ns = 0;
    cfg->free_tail_first = 0;
    cfg->quant_mode = FKV_QUANT_OFF;
    cfg->quant_dtype = FKV_INT8;
    cfg->quant_hot_tokens = 128;
    cfg->quant_pressure = 0.9;
    cfg->tier_admission = FKV_TIER_ADMIT_OFF;
    cfg->tier_admission_threshold = 2;
    cfg->tier_admission_window = 0;
    cfg->prefix_cache = 1;
    cfg->device_label = "cpu0";
    cfg->thread_safe = 1;
}

int fkv_tier_admission_parse(const char *name, int *out)
{
    if (!name || !out) return -1;
    if (!strcmp(name, "off")) *out = FKV_TIER_ADMIT_OFF;
    else if (!strcmp(name, "tinylfu")) *out = FKV_TIER_ADMIT_TINYLFU;
    else if (!strcmp(name, "seen")) *out = FKV_TIER_ADMIT_SEEN;
    else return -1;
    return 0;
}

int fkv_host_policy_parse(const char *name, int *out)
{
    if (!name || !out) return -1;
    if (!strcmp(name, "lru")) *out = FKV_HOST_LRU;
    else if (!strcmp(name, "s3fifo")) *out = FKV_HOST_S3FIFO;
    else if (!strcmp(name, "arc")) *out = FKV_HOST_ARC;
    else return -1;
    return 0;
}

const char *fkv_host_policy_name(int policy)
{
    return policy == FKV_HOST_LRU ? "lru" : policy == FKV_HOST_S3FIFO ? "s3fifo" : policy == FKV_HOST_ARC ? "arc" : "?";
}

const char *fkv_tier_admission_name(int mode)
{
    return mode == FKV_TIER_ADMIT_OFF ? "off" : mode == FKV_TIER_ADMIT_TINYLFU ? "tinylfu"
           : mode == FKV_TIER_ADMIT_SEEN ? "seen" : "?";
}

uint64_t fkv_config_token_bytes(const fkv_config *cfg)
{
    if (!cfg || (cfg->dtype != FKV_F32 && cfg->dtype != FKV_F16)) return 0;
    return 2ull * cfg->n_layers * cfg->n_kv_heads * cfg->head_dim * (fkv_dtype_bits(cfg->dtype) / 8);
}

void fkv_eval_config_default(fkv_eval_config *ev)
{
    if (!ev) return;
    memset(ev, 0, sizeof *ev);
    ev->block_tokens = 512;
    ev->class_short_max = 128;
    ev->class_medium_max = 512;
}

/* Options tables for the environment: FAIRKV_<NAME>. */
enum opt_type { OPT_U32, OPT_U64, OPT_I64, OPT_DBL, OPT_BOOL, OPT_STR, OPT_DTYPE, OPT_QMODE, OPT_QUOTA, OPT_ADMIT, OPT_HOSTPOL };
typedef struct opt {
    const char *env;
    enum opt_type type;
    size_t off;
} opt;
static const opt options[] = {
    {"FAIRKV_N_LAYERS", OPT_U32, offsetof(fkv_config, n_layers)},
    {"FAIRKV_N_KV_HEADS", OPT_U32, offsetof(fkv_config, n_kv_heads)},
    {"FAIRKV_HEAD_DIM", OPT_U32, offsetof(fkv_config, head_dim)},
    {"FAIRKV_DTYPE", OPT_DTYPE, offsetof(fkv_config, dtype)},
    {"FAIRKV_PAGE_TOKENS", OPT_U32, offsetof(fkv_config, page_tokens)},
    {"FAIRKV_CAPACITY_BYTES", OPT_U64, offsetof(fkv_config, capacity_bytes)},
    {"FAIRKV_CAPACITY_PAGES", OPT_U32, offsetof(fkv_config, capacity_pages)},
    {"FAIRKV_CHUNK_TOKENS", OPT_U32, offsetof(fkv_config, chunk_tokens)},
    {"FAIRKV_DYNAMIC_CHUNKING", OPT_BOOL, offsetof(fkv_config, dynamic_chunking)},
    {"FAIRKV_CHUNK_MIN_TOKENS", OPT_U32, offsetof(fkv_config, chunk_min_tokens)},
    {"FAIRKV_CHUNK_MAX_TOKENS", OPT_U32, offsetof(fkv_config, chunk_max_tokens)},
    {"FAIRKV_POLICY", OPT_STR, offsetof(fkv_config, policy)},
    {"FAIRKV_ALPHA", OPT_DBL, offsetof(fkv_config, alpha)},
    {"FAIRKV_BETA", OPT_DBL, offsetof(fkv_config, beta)},
    {"FAIRKV_AGE_UNIT_NS", OPT_I64, offsetof(fkv_config, age_unit_ns)},
    {"FAIRKV_QUOTAS", OPT_QUOTA, offsetof(fkv_config, quotas)},
    {"FAIRKV_SHARE_GUARANTEE", OPT_BOOL, offsetof(fkv_config, share_guarantee)},
    {"FAIRKV_TENANT_LABELS", OPT_U32, offsetof(fkv_config, tenant_labels)},
    {"FAIRKV_TEMPERATURE", OPT_DBL, offsetof(fkv_config, temperature)},
    {"FAIRKV_MIN_CHUNK_RETENTION_NS", OPT_I64, offsetof(fkv_config, min_chunk_retention_ns)},
    {"FAIRKV_QUANT_MODE", OPT_QMODE, offsetof(fkv_config, quant_mode)},
    {"FAIRKV_QUANT_DTYPE", OPT_DTYPE, offsetof(fkv_config, quant_dtype)},
    {"FAIRKV_QUANT_HOT_TOKENS", OPT_U32, offsetof(fkv_config, quant_hot_tokens)},
    {"FAIRKV_QUANT_PRESSURE", OPT_DBL, offsetof(fkv_config, quant_pressure)},
    {"FAIRKV_QUANT_WARM_TOKENS", OPT_U32, offsetof(fkv_config, quant_warm_tokens)},
    {"FAIRKV_PREFIX_CACHE", OPT_BOOL, offsetof(fkv_config, prefix_cache)},
    {"FAIRKV_HOST_CAPACITY_BYTES", OPT_U64, offsetof(fkv_config, host_capacity_bytes)},
    {"FAIRKV_HOST_DEMOTE", OPT_BOOL, offsetof(fkv_config, host_demote)},
    {"FAIRKV_TIER_ADMISSION", OPT_ADMIT, offsetof(fkv_config, tier_admission)},
    {"FAIRKV_TIER_ADMISSION_THRESHOLD", OPT_U32, offsetof(fkv_config, tier_admission_threshold)},
    {"FAIRKV_TIER_ADMISSION_WINDOW", OPT_U64, offsetof(fkv_config, tier_admission_window)},
    {"FAIRKV_HOST_POLICY", OPT_HOSTPOL, offsetof(fkv_config, host_policy)},
};
static const opt eval_options[] = {
    {"FAIRKV_BLOCK_TOKENS", OPT_U32, offsetof(fkv_eval_config, block_tokens)},
    {"FAIRKV_CLASS_SHORT_MAX", OPT_U32, offsetof(fkv_eval_config, class_short_max)},
    {"FAIRKV_CLASS_MEDIUM_MAX", OPT_U32, offsetof(fkv_eval_config, class_medium_max)},
};

static fkv_status from_env(void *base, const opt *tab, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const char *s = getenv(tab[i].env);
        if (!s) continue;
        char *end = NULL;
        void *f = (char *)base + tab[i].off;
        errno = 0;
        switch (tab[i].type) {
        case OPT_U32: {
            unsigned long long v = strtoull(s, &end, 10);
            if (v > UINT32_MAX) errno = ERANGE;
            *(uint32_t *)f = (uint32_t)v;
            break;
        }
        case OPT_U64: *(uint64_t *)f = strtoull(s, &end, 10); break;
        case OPT_I64: *(int64_t *)f = strtoll(s, &end, 10); break;
        case OPT_DBL: *(double *)f = strtod(s, &end); break;
        case OPT_BOOL: {
            long v = strtol(s, &end, 10);
            if (v != 0 && v != 1) errno = ERANGE;
            *(int *)f = (int)v;
            break;
        }
        case OPT_STR: *(const char **)f = s; end = (char *)s + strlen(s); break;
        case OPT_DTYPE:
            if (!strcmp(s, "f32")) *(fkv_dtype *)f = FKV_F32;
            else if (!strcmp(s, "f16")) *(fkv_dtype *)f = FKV_F16;
            else if (!strcmp(s, "int8")) *(fkv_dtype *)f = FKV_INT8;
            else if (!strcmp(s, "int4")) *(fkv_dtype *)f = FKV_INT4;
            else if (!strcmp(s, "fp8")) *(fkv_dtype *)f = FKV_FP8;
            else errno = EINVAL;
            end = (char *)s + strlen(s);
            break;
        case OPT_QUOTA:
            if (!strcmp(s, "off") || !strcmp(s, "0")) *(fkv_quota_mode *)f = FKV_QUOTA_OFF;
            else if (!strcmp(s, "request") || !strcmp(s, "1")) *(fkv_quota_mode *)f = FKV_QUOTA_REQUEST;
            else if (!strcmp(s, "tenant") || !strcmp(s, "2")) *(fkv_quota_mode *)f = FKV_QUOTA_TENANT;
            else errno = EINVAL;
            end = (char *)s + strlen(s);
            break;
        case OPT_ADMIT: {
            int m = 0;
            if (fkv_tier_admission_parse(s, &m)) errno = EINVAL;
            else *(fkv_tier_admission *)f = (fkv_tier_admission)m;
            end = (char *)s + strlen(s);
            break;
        }
        case OPT_HOSTPOL: {
            int m = 0;
            if (fkv_host_policy_parse(s, &m)) errno = EINVAL;
            else *(fkv_host_policy *)f = (fkv_host_policy)m;
            end = (char *)s + strlen(s);
            break;
        }
        case OPT_QMODE:
            if (!strcmp(s, "off")) *(fkv_quant_mode *)f = FKV_QUANT_OFF;
            else if (!strcmp(s, "always")) *(fkv_quant_mode *)f = FKV_QUANT_ALWAYS;
            else if (!strcmp(s, "under-pressure")) *(fkv_quant_mode *)f = FKV_QUANT_UNDER_PRESSURE;
            else errno = EINVAL;
            end = (char *)s + strlen(s);
            break;
        }
        if (errno || end == s || *end) {
            fkv__report(FKV_EINVAL, err, errlen, "%s=\"%s\": not a valid value", tab[i].env, s);
            return FKV_EINVAL;
        }
    }
    return FKV_OK;
}

fkv_status fkv_config_from_env(fkv_config *cfg, char *err, size_t errlen)
{
    if (!cfg) return fkv__report(FKV_EINVAL, err, errlen, "fkv_config_from_env: cfg must not be NULL");
    return from_env(cfg, options, sizeof options / sizeof options[0], err, errlen);
}

fkv_status fkv_eval_config_from_env(fkv_eval_config *ev, char *err, size_t errlen)
{
    if (!ev) return fkv__report(FKV_EINVAL, err, errlen, "fkv_eval_config_from_env: ev must not be NULL");
    return from_env(ev, eval_options, sizeof eval_options / sizeof eval_options[0], err, errlen);
}

#define BAD(...) fkv__report(FKV_EINVAL, err, errlen, __VA_ARGS__)

static fkv_status validate(const fkv_config *cfg, char *err, size_t errlen)
{
    if (cfg->n_layers == 0 || cfg->n_layers > 4096) return BAD("n_layers=%u: must be 1..4096", cfg->n_layers);
    if (cfg->n_kv_heads == 0 || cfg->n_kv_heads > 4096)
        return BAD("n_kv_heads=%u: must be 1..4096", cfg->n_kv_heads);
    if (cfg->head_dim == 0 || cfg->head_dim > 65536 || cfg->head_dim % 2)
        return BAD("head_dim=%u: must be even, 2..65536", cfg->head_dim);
    if (cfg->dtype != FKV_F32 && cfg->dtype != FKV_F16)
        return BAD("dtype=%d: the cache's base precision must be f32 or f16", (int)cfg->dtype);
    if (cfg->page_tokens == 0 || cfg->page_tokens > 4096)
        return BAD("page_tokens=%u: must be 1..4096", cfg->page_tokens);
    if (cfg->storage != FKV_STORAGE_PHANTOM && cfg->storage != FKV_STORAGE_CPU)
        return BAD("storage=%d: unknown storage kind", (int)cfg->storage);
    if (cfg->chunk_tokens > 65536 || (cfg->dynamic_chunking && cfg->chunk_max_tokens > 65536))
        return BAD("chunk_tokens=%u, chunk_max_tokens=%u: at most 65536", cfg->chunk_tokens, cfg->chunk_max_tokens);
    if (cfg->chunk_tokens == 0 || cfg->chunk_tokens % cfg->page_tokens)
        return BAD("chunk_tokens=%u: must be a positive multiple of page_tokens=%u", cfg->chunk_tokens,
                   cfg->page_tokens);
    if (cfg->dynamic_chunking) {
        if (cfg->chunk_min_tokens == 0 || cfg->chunk_min_tokens % cfg->page_tokens ||
            cfg->chunk_max_tokens % cfg->page_tokens || cfg->chunk_min_tokens > cfg->chunk_max_tokens)
            return BAD("chunk_min_tokens=%u, chunk_max_tokens=%u: must be multiples of page_tokens=%u "
                       "with min <= max",
                       cfg->chunk_min_tokens, cfg->chunk_max_tokens, cfg->page_tokens);
    }
    if (!fkv__policy_find(cfg->policy)) return BAD("policy=\"%s\": unknown policy", cfg->policy ? cfg->policy : "(null)");
    if (!isfinite(cfg->alpha) || !isfinite(cfg->beta) || cfg->alpha < 0 || cfg->beta < 0)
        return BAD("alpha=%g, beta=%g: must be finite and >= 0", cfg->alpha, cfg->beta);
    if (cfg->age_unit_ns < 0)
        return BAD("age_unit_ns=%lld: must be >= 0 (0 = the pool's turnover)", (long long)cfg->age_unit_ns);
    if (cfg->quotas != FKV_QUOTA_OFF && cfg->quotas != FKV_QUOTA_REQUEST && cfg->quotas != FKV_QUOTA_TENANT)
        return BAD("quotas=%d: must be 0 (off), 1 (request) or 2 (tenant)", cfg->quotas);
    if (cfg->share_guarantee < 0 || cfg->share_guarantee > 2)
        return BAD("share_guarantee=%d: must be 0 (shares are targets), 1 (guarantees) or 2 (a static partition)",
                   cfg->share_guarantee);
    if (cfg->share_guarantee && cfg->quotas != FKV_QUOTA_TENANT)
        return BAD("share_guarantee=%d needs quotas=tenant (shares are per tenant)", cfg->share_guarantee);
    if (cfg->tenant_labels > FKV__TENANT_LABELS_MAX)
        return BAD("tenant_labels=%u: at most %d", cfg->tenant_labels, FKV__TENANT_LABELS_MAX);
    if (!(cfg->temperature > 0) || isnan(cfg->temperature))
        return BAD("temperature=%g: must be > 0 (inf = equal shares)", cfg->temperature);
    if (cfg->min_chunk_retention_ns < 0)
        return BAD("min_chunk_retention_ns=%lld: must be >= 0", (long long)cfg->min_chunk_retention_ns);
    if (cfg->free_tail_first != 0 && cfg->free_tail_first != 1)
        return BAD("free_tail_first=%d: must be 0 (position order) or 1 (tail first)", cfg->free_tail_first);
    if (cfg->quant_mode != FKV_QUANT_OFF && cfg->quant_mode != FKV_QUANT_ALWAYS &&
        cfg->quant_mode != FKV_QUANT_UNDER_PRESSURE)
        return BAD("quant_mode=%d: must be off, always or under-pressure", (int)cfg->quant_mode);
    if (cfg->quant_mode != FKV_QUANT_OFF) {
        if (cfg->quant_dtype != FKV_INT8 && cfg->quant_dtype != FKV_INT4 && cfg->quant_dtype != FKV_FP8)
            return BAD("quant_dtype=%s: must be int8, int4 or fp8", fkv_dtype_name(cfg->quant_dtype));
        if (!(cfg->quant_pressure > 0 && cfg->quant_pressure <= 1))
            return BAD("quant_pressure=%g: must be in (0, 1]", cfg->quant_pressure);
        if (cfg->quant_warm_tokens && cfg->quant_dtype != FKV_INT8 && cfg->quant_dtype != FKV_FP8)
            return BAD("quant_warm_tokens=%u: the ladder goes from int8 or fp8 to int4, quant_dtype is %s",
                       cfg->quant_warm_tokens, fkv_dtype_name(cfg->quant_dtype));
    }
    if (cfg->host_demote && (!cfg->host_capacity_bytes || !cfg->prefix_cache))
        return BAD("host_demote=%d: needs host_capacity_bytes > 0 and prefix_cache (demoted chunks are found "
                   "by prefix matching)", cfg->host_demote);
    if (cfg->tier_admission != FKV_TIER_ADMIT_OFF && cfg->tier_admission != FKV_TIER_ADMIT_TINYLFU &&
        cfg->tier_admission != FKV_TIER_ADMIT_SEEN)
        return BAD("tier_admission=%d: must be off (0), tinylfu (1) or seen (2)", cfg->tier_admission);
    if (cfg->tier_admission != FKV_TIER_ADMIT_OFF &&
        (cfg->tier_admission_threshold < 1 || cfg->tier_admission_threshold > 15))
        return BAD("tier_admission_threshold=%u: must be 1 to 15 (4-bit counters)", cfg->tier_admission_threshold);
    if (cfg->host_policy != FKV_HOST_LRU && cfg->host_policy != FKV_HOST_S3FIFO && cfg->host_policy != FKV_HOST_ARC)
        return BAD("host_policy=%d: must be lru (0), s3fifo (1) or arc (2)", (int)cfg->host_policy);
    if (cfg->host_policy != FKV_HOST_LRU && !cfg->host_demote)
        return BAD("host_policy=%s: needs host_demote (the order is among demoted chunks)",
                   fkv_host_policy_name(cfg->host_policy));
    if (cfg->tier_admission != FKV_TIER_ADMIT_OFF && !cfg->prefix_cache)
        return BAD("tier_admission=%s: needs prefix_cache (sightings are page keys)",
                   fkv_tier_admission_name(cfg->tier_admission));
    uint64_t page_bytes = fkv_config_token_bytes(cfg) * cfg->page_tokens;
    uint64_t pages = cfg->capacity_pages ? cfg->capacity_pages : cfg->capacity_bytes / page_bytes;
    if (pages == 0) return BAD("capacity_bytes=%llu: less than one page (%llu bytes)",
                               (unsigned long long)cfg->capacity_bytes, (unsigned long long)page_bytes);
    if (pages > (1u << 30)) return BAD("capacity: %llu pages, more than 2^30", (unsigned long long)pages);
    if (cfg->storage == FKV_STORAGE_CPU && page_bytes * pages / page_bytes != pages)
        return BAD("capacity: byte size overflows");
    return FKV_OK;
}

/* ---------------------------------------------------------------- create */

/* The evaluation settings (fairkv_eval.h), after cfg's own checks. */
static fkv_status validate_eval(const fkv_config *cfg, const fkv_eval_config *ev, char *err, size_t errlen)
{
    if (!strcmp(cfg->policy, "belady") && !ev->next_use)
        return BAD("policy=\"belady\" needs fkv_eval_config.next_use (the future access times; "
                   "fkv_cache_create_eval)");
    if (ev->block_tokens == 0 || ev->block_tokens % cfg->page_tokens)
        return BAD("fkv_eval_config.block_tokens=%u: must be a positive multiple of page_tokens=%u",
                   ev->block_tokens, cfg->page_tokens);
    if (ev->class_short_max > ev->class_medium_max)
        return BAD("fkv_eval_config.class_short_max=%u > class_medium_max=%u", ev->class_short_max,
                   ev->class_medium_max);
    return FKV_OK;
}

fkv_status fkv_cache_create(const fkv_config *cfg, fkv_cache **out, char *err, size_t errlen)
{
    return fkv_cache_create_eval(cfg, NULL, out, err, errlen);
}

fkv_status fkv_cache_create_eval(const fkv_config *cfg, const fkv_eval_config *evp, fkv_cache **out, char *err,
                                 size_t errlen)
{
    char dummy[8];
    if (!err) err = dummy, errlen = sizeof dummy;
    if (!cfg || !out) return BAD("cfg and out must not be NULL");
    *out = NULL;
    fkv_eval_config defaults;
    fkv_eval_config_default(&defaults);
    const fkv_eval_config *ev = evp ? evp : &defaults;
    fkv_status st = validate(cfg, err, errlen);
    if (!st) st = validate_eval(cfg, ev, err, errlen);
    if (st) return st;

    fkv_cache *c = calloc(1, sizeof *c);
    if (!c) {
        fkv__report(FKV_ENOMEM, err, errlen, "out of memory");
        return FKV_ENOMEM;
    }
    c->ttl_end = FKV__TTL_NB; /* the TTL wheel starts at bucket 0 */
    fkv__heap_init(&c->ttl_heap, offsetof(fkv__chunk, ttl.idx), offsetof(fkv__chunk, id));
    c->cfg = *cfg;
    snprintf(c->policy_name, sizeof c->policy_name, "%s", cfg->policy);
    snprintf(c->device_label, sizeof c->device_label, "%s", cfg->device_label ? cfg->device_label : "cpu0");
    c->cfg.policy = c->policy_name;
    c->cfg.device_label = c->device_label;
    if (!c->cfg.dynamic_chunking) c->cfg.chunk_min_tokens = c->cfg.chunk_max_tokens = c->cfg.chunk_tokens;
    c->token_bytes = fkv_config_token_bytes(cfg);
    c->page_bytes = c->token_bytes * cfg->page_tokens;
    c->layer_page_stride = c->page_bytes / (2ull * cfg->n_layers);
    c->n_pages = cfg->capacity_pages ? cfg->capacity_pages : (uint32_t)(cfg->capacity_bytes / c->page_bytes);
    pthread_mutex_init(&c->lock, NULL);
    fkv__tick(c);
    if (cfg->quant_mode != FKV_QUANT_OFF) {
        fkv_kv_geom g;
        fkv__kv_geom(c, &g);
        char gerr[160] = "a chunk of chunk_min_tokens has no quantized layout";
        if (fkv_kv_geom_check(&g, gerr, sizeof gerr) != FKV_OK ||
            fkv_quant_pages_needed(&g, cfg->quant_dtype, cfg->chunk_min_tokens) == 0) {
            fkv__report(FKV_EINVAL, err, errlen, "quantization: %s", gerr);
            pthread_mutex_destroy(&c->lock);
            free(c);
            return FKV_EINVAL;
        }
    }

    c->ops = fkv__policy_find(c->cfg.policy);
    c->pparams.alpha = cfg->alpha;
    c->pparams.beta = cfg->beta;
    c->pparams.age_unit_ns = (double)cfg->age_unit_ns;
    c->pparams.age_unit_pages = (double)c->n_pages;
    c->ev = *ev;
    c->pparams.next_use = ev->next_use;
    c->pparams.next_use_ctx = ev->next_use_ctx;

    st = fkv__pool_init(c);
    if (!st) st = fkv__prefix_init(c);
    if (!st) st = fkv__tenants_init(c);
    if (!st) st = fkv__host_order_init(c);
    if (!st && cfg->tier_admission != FKV_TIER_ADMIT_OFF) {
        /* the window: ten sightings per page the tiers hold, Caffeine's
         * sample size (ten times the maximum size) for TinyLFU */
        uint64_t w = cfg->tier_admission_window;
        if (!w) w = 10 * ((uint64_t)c->n_pages + cfg->host_capacity_bytes / c->page_bytes);
        c->admit = fkv__admit_new(w, cfg->tier_admission_threshold);
        if (!c->admit) st = FKV_ENOMEM;
    }
    if (!st) {
        c->shared_inst = fkv__policy_inst_new(c->ops, &c->pparams);
        if (!c->shared_inst) st = FKV_ENOMEM;
    }
    if (st) {
        if (st == FKV_ENOMEM) fkv__report(st, err, errlen, "out of memory allocating the page pool");
        else if (err && errlen) snprintf(err, errlen, "%s", fkv_last_error());
        fkv_cache_destroy(c);
        return st;
    }
    *out = c;
    return FKV_OK;
}

void fkv_cache_destroy(fkv_cache *c)
{
    if (!c) return;
    while (c->n_owners) fkv_seq_free(c->owners[c->n_owners - 1]);
    /* what is left is cached, unreferenced chunks: the demoted ones go, and
     * the resident ones are not demoted on the way out */
    while (c->host_lru.head || c->host_small.head)
        fkv__chunk_destroy(c, c->host_lru.head ? c->host_lru.head : c->host_small.head);
    c->cfg.host_demote = 0;
    while (c->n_resident) {
        if (fkv__evict_one(c) != FKV_OK) break;
    }
    for (int i = 0; i < FKV__CHUNK_LISTS; i++)
        while (c->chunk_free[i]) {
            fkv__chunk *n = c->chunk_free[i]->all.next;
            if (c->chunk_free[i]->own_mem) free(c->chunk_free[i]);
            c->chunk_free[i] = n;
        }
    for (uint32_t i = 0; i < c->n_arenas; i++) free(c->arenas[i]);
    free(c->arenas);
    while (c->n_idle_seqs) fkv__seq_release(c->idle_seqs[--c->n_idle_seqs]);
    fkv__policy_inst_free(c->shared_inst);
    fkv__tenants_fini(c);
    fkv__admit_free(c->admit);
    fkv__host_order_fini(c);
    fkv__heap_free(&c->ttl_heap);
    free(c->owners);
    fkv__prefix_fini(c);
    fkv__pool_fini(c);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---------------------------------------------------------------- queries */

fkv_status fkv_cache_get_info(fkv_cache *c, fkv_cache_info *out)
{
    if (!c || !out) return fkv__fail(FKV_EINVAL, "fkv_cache_get_info: cache and out must not be NULL");
    FKV__LOCK(c);
    out->page_tokens = c->cfg.page_tokens;
    out->n_pages = c->n_pages;
    out->free_pages = c->n_free;
    out->page_bytes = c->page_bytes;
    out->token_bytes = c->token_bytes;
    out->n_chunks = c->n_resident;
    out->n_seqs = c->n_owners;
    FKV__UNLOCK(c);
    return FKV_OK;
}

fkv_status fkv_cache_layer_storage(fkv_cache *c, uint32_t layer, void **k, void **v, uint64_t *page_stride)
{
    if (!c || !k || !v || !page_stride)
        return fkv__fail(FKV_EINVAL, "fkv_cache_layer_storage: NULL argument");
    if (c->cfg.storage != FKV_STORAGE_CPU)
        return fkv__fail(FKV_EUNSUPPORTED, "fkv_cache_layer_storage: phantom storage holds no K/V");
    if (layer >= c->cfg.n_layers)
        return fkv__fail(FKV_EINVAL, "layer=%u: the model has %u layers", layer, c->cfg.n_layers);
    *k = c->k[layer];
    *v = c->v[layer];
    *page_stride = c->layer_page_stride;
    return FKV_OK;
}

fkv_status fkv_cache_evict(fkv_cache *c, uint32_t pages, uint32_t *freed)
{
    if (!c) return fkv__fail(FKV_EINVAL, "fkv_cache_evict: cache is NULL");
    FKV__LOCK(c);
    uint32_t before = c->n_free;
    fkv_status st = FKV_OK;
    uint32_t want = pages > c->n_pages ? c->n_pages : pages;
    st = fkv__evict_until(c, want);
    if (freed) *freed = c->n_free - before;
    if (st) fkv__set_error("fkv_cache_evict: only %u of %u pages could be freed", c->n_free, pages);
    FKV__UNLOCK(c);
    return st;
}

fkv_status fkv_cache_counters(fkv_cache *c, fkv_counters *out)
{
    if (!c || !out) return fkv__fail(FKV_EINVAL, "fkv_cache_counters: NULL argument");
    FKV__LOCK(c);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < FKV_N_CLASSES; i++) {
        out->hit_tokens[i] = (uint64_t)c->stats.fairkv_hit_tokens_total[i];
        out->miss_tokens[i] = (uint64_t)c->stats.fairkv_miss_tokens_total[i];
        out->evicted_chunks[i] = (uint64_t)c->stats.fairkv_evicted_chunks_total[i];
    }
    out->evicted_pages = (uint64_t)c->stats.fairkv_evicted_pages_total[0];
    out->prefix_query_tokens = (uint64_t)c->stats.fairkv_prefix_queries_tokens_total[0];
    out->prefix_hit_tokens = (uint64_t)c->stats.fairkv_prefix_hits_tokens_total[0];
    out->quota_overruns = (uint64_t)c->stats.fairkv_quota_overruns_total[0];
    out->cow_copies = (uint64_t)c->stats.fairkv_cow_copies_total[0];
    out->pages_used = c->n_pages - c->n_free;
    out->pages_free = c->n_free;
    out->host_demoted_chunks = (uint64_t)c->stats.fairkv_tier_demotions_total[0];
    out->host_demoted_bytes = (uint64_t)c->stats.fairkv_tier_demoted_bytes_total[0];
    out->host_refused_chunks = (uint64_t)c->stats.fairkv_tier_refused_total[0];
    FKV__UNLOCK(c);
    return FKV_OK;
}
