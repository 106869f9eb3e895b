/* Prometheus text (exposition format 0.0.4) and JSON, both generated from
 * the FKV_METRICS list. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

void fkv__metrics_refresh(fkv_cache *c)
{
    fkv__stats *st = &c->stats;
    st->kv_cache_chunk_size[0] = c->n_resident ? (double)c->resident_tokens / c->n_resident : 0;
    for (int i = 0; i < FKV_N_CLASSES; i++) {
        double h = st->fairkv_hit_tokens_total[i], m = st->fairkv_miss_tokens_total[i];
        st->kv_cache_miss_rate[i] = h + m > 0 ? m / (h + m) : 0;
    }
    uint32_t used = c->n_pages - c->n_free;
    st->fairkv_pages_used[0] = used;
    st->fairkv_pages_free[0] = c->n_free;
    st->fairkv_usage_ratio[0] = (double)used / c->n_pages;
    for (int d = 0; d < FKV_N_DTYPES; d++)
        st->fairkv_bytes[d] = (double)c->pages_by_dtype[d] * (double)c->page_bytes + (double)c->qmeta_bytes[d];
    st->fairkv_chunks_resident[0] = c->n_resident;
    st->fairkv_sequences[0] = c->n_owners;
    /* per tenant: slot i is the i-th tenant seen; later ones add up in the
     * slot tenant_labels ("other") */
    memset(st->fairkv_tenant_pages, 0, sizeof st->fairkv_tenant_pages);
    memset(st->fairkv_tenant_share_pages, 0, sizeof st->fairkv_tenant_share_pages);
    memset(st->fairkv_tenant_reclaimed_pages_total, 0, sizeof st->fairkv_tenant_reclaimed_pages_total);
    memset(st->fairkv_tenant_prefix_queries_tokens_total, 0, sizeof st->fairkv_tenant_prefix_queries_tokens_total);
    memset(st->fairkv_tenant_prefix_hits_tokens_total, 0, sizeof st->fairkv_tenant_prefix_hits_tokens_total);
    fkv__tenant_shares(c);
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        const fkv__tenant *t = c->tenants[i];
        uint32_t k = t->slot;
        st->fairkv_tenant_pages[k] += (double)t->pages;
        st->fairkv_tenant_share_pages[k] += t->share;
        for (int a = 0; a < FKV__N_ACTIONS; a++)
            st->fairkv_tenant_reclaimed_pages_total[k * FKV__N_ACTIONS + a] += (double)t->reclaimed[a];
        st->fairkv_tenant_prefix_queries_tokens_total[k] += (double)t->prefix_queries;
        st->fairkv_tenant_prefix_hits_tokens_total[k] += (double)t->prefix_hits;
    }
    st->fairkv_host_bytes[0] = (double)c->host_used;
    st->fairkv_tier_bytes[0] = 0;
    for (int d = 0; d < FKV_N_DTYPES; d++) st->fairkv_tier_bytes[0] += st->fairkv_bytes[d];
    st->fairkv_tier_bytes[1] = (double)c->host_used;
    double slots = (double)used * c->cfg.page_tokens;
    st->fairkv_fragmentation_ratio[0] = slots > 0 ? 1.0 - (double)c->fill_sum / slots : 0;
}

/* A bounded writer that keeps counting past the end of the buffer. */
typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static const char *tier_names[FKV__L_TIER] = {"expired", "cached", "over_quota", "in_quota", "young", "global"};

static const char *action_names[FKV__N_ACTIONS] = {"quantize8", "quantize4", "drop", "evict", "preempt", "offload",
                                                   "idle"};

/* label name and value of entry i of a metric with these labels */
static const char *label_name(int labels)
{
    switch (labels) {
    case 1: return "request_type";
    case 2: return "device";
    case 3: return "precision";
    case 4: return "tier";
    case 5: return "reason";
    case 8: return "tier";
    default: return NULL;
    }
}

static const char *label_value(const fkv_cache *c, int labels, int i)
{
    switch (labels) {
    case 1: return fkv_class_name((fkv_class)i);
    case 2: return c->device_label;
    case 3: return fkv_dtype_name((fkv_dtype)i);
    case 4: return tier_names[i];
    case 5: return i == 2 ? "reclaim" : i ? "pressure" : "always";
    case 8: return i ? "host" : "device";
    default: return "";
    }
}

enum { LK_NONE = 0, LK_CLASS = 1, LK_DEVICE = 2, LK_DTYPE = 3, LK_TIER = 4, LK_QREASON = 5, LK_TENANT = 6,
       LK_TACTION = 7, LK_KTIER = 8 };

/* Tenant slot k is shown when a tenant holds it: slot i < n_slots is
 * tenants[i] (slots are given in order of creation), slot tenant_labels is
 * "other" once more tenants than that were seen. */
static int tenant_slot_used(const fkv_cache *c, uint32_t k)
{
    return k < c->n_slots || (k == c->cfg.tenant_labels && c->n_tenants > c->n_slots);
}

static void tenant_label(const fkv_cache *c, uint32_t k, char *buf, size_t n)
{
    if (k < c->n_slots) snprintf(buf, n, "%llu", (unsigned long long)c->tenants[k]->id);
    else snprintf(buf, n, "other");
}

/* the labels of entry i, as name="value"[,name="value"]; 0 = entry not shown */
static int labels_of(const fkv_cache *c, int lk, int i, char *buf, size_t n)
{
    char t[32];
    if (lk == LK_TENANT || lk == LK_TACTION) {
        uint32_t k = lk == LK_TENANT ? (uint32_t)i : (uint32_t)i / FKV__N_ACTIONS;
        if (!tenant_slot_used(c, k)) return 0;
        tenant_label(c, k, t, sizeof t);
        if (lk == LK_TENANT) snprintf(buf, n, "tenant=\"%s\"", t);
        else snprintf(buf, n, "tenant=\"%s\",action=\"%s\"", t, action_names[i % FKV__N_ACTIONS]);
        return 1;
    }
    /* fp8 is shown only by caches that store it: other exports stay as they were */
    if (lk == LK_DTYPE && i == FKV_FP8 && c->cfg.quant_dtype != FKV_FP8) return 0;
    snprintf(buf, n, "%s=\"%s\"", label_name(lk), label_value(c, lk, i));
    return 1;
}

static void prom_value(out *o, double v)
{
    if (v == (double)(int64_t)v && v < 9e15 && v > -9e15) put(o, "%lld\n", (long long)v);
    else put(o, "%.17g\n", v);
}

static void prom_metric(out *o, const fkv_cache *c, const char *name, const char *type, int lk, int n,
                        const double *vals, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int i = 0; i < n; i++) {
        char lb[96];
        if (lk != LK_NONE && !labels_of(c, lk, i, lb, sizeof lb)) continue;
        put(o, "%s", name);
        if (lk != LK_NONE) put(o, "{%s}", lb);
        put(o, " ");
        prom_value(o, vals[i]);
    }
}

#define LK_OF_NONE LK_NONE
#define LK_OF_CLASS LK_CLASS
#define LK_OF_DEVICE LK_DEVICE
#define LK_OF_DTYPE LK_DTYPE
#define LK_OF_TIER LK_TIER
#define LK_OF_QREASON LK_QREASON
#define LK_OF_TENANT LK_TENANT
#define LK_OF_TACTION LK_TACTION
#define LK_OF_KTIER LK_KTIER
#define TYPE_COUNTER "counter"
#define TYPE_GAUGE "gauge"

fkv_status fkv_cache_metrics_prometheus(fkv_cache *c, char *buf, size_t cap, size_t *len)
{
    if (!c || (!buf && cap) || !len) return fkv__fail(FKV_EINVAL, "fkv_cache_metrics_prometheus: NULL argument");
    FKV__LOCK(c);
    fkv__metrics_refresh(c);
    out o = {buf, cap, 0};
#define X(name, type, labels, help) \
    prom_metric(&o, c, #name, TYPE_##type, LK_OF_##labels, FKV__L_##labels, c->stats.name, help);
    FKV_METRICS(X)
#undef X
    FKV__UNLOCK(c);
    if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
    *len = o.len;
    return FKV_OK;
}

static void json_num(out *o, double v)
{
    if (v == (double)(int64_t)v && v < 9e15 && v > -9e15) put(o, "%lld", (long long)v);
    else put(o, "%.17g", v);
}

/* {"<tenant>": v, ...} or {"<tenant>": {"<action>": v, ...}, ...} */
static void json_tenants(out *o, const fkv_cache *c, int lk, const double *vals)
{
    put(o, "{");
    int first = 1;
    for (uint32_t k = 0; k < FKV__L_TENANT; k++) {
        if (!tenant_slot_used(c, k)) continue;
        char t[32];
        tenant_label(c, k, t, sizeof t);
        put(o, "%s\"%s\":", first ? "" : ",", t);
        first = 0;
        if (lk == LK_TENANT) {
            json_num(o, vals[k]);
            continue;
        }
        put(o, "{");
        for (int a = 0; a < FKV__N_ACTIONS; a++) {
            put(o, "%s\"%s\":", a ? "," : "", action_names[a]);
            json_num(o, vals[k * FKV__N_ACTIONS + a]);
        }
        put(o, "}");
    }
    put(o, "}");
}

fkv_status fkv_cache_metrics_json(fkv_cache *c, char *buf, size_t cap, size_t *len)
{
    if (!c || (!buf && cap) || !len) return fkv__fail(FKV_EINVAL, "fkv_cache_metrics_json: NULL argument");
    FKV__LOCK(c);
    fkv__metrics_refresh(c);
    out o = {buf, cap, 0};
    put(&o, "{\"policy\":\"%s\",\"pages\":%u", c->policy_name, c->n_pages);
#define X(name, type, labels, help)                                              \
    do {                                                                         \
        int lk_ = LK_OF_##labels;                                                \
        put(&o, ",\"%s\":", #name);                                              \
        if (lk_ == LK_NONE || lk_ == LK_DEVICE) {                                \
            json_num(&o, c->stats.name[0]);                                      \
        } else if (lk_ == LK_TENANT || lk_ == LK_TACTION) {                      \
            json_tenants(&o, c, lk_, c->stats.name);                             \
        } else {                                                                 \
            put(&o, "{");                                                        \
            for (int i_ = 0; i_ < FKV__L_##labels; i_++) {                       \
                put(&o, "%s\"%s\":", i_ ? "," : "", label_value(c, lk_, i_));     \
                json_num(&o, c->stats.name[i_]);                                 \
            }                                                                    \
            put(&o, "}");                                                        \
        }                                                                        \
    } while (0);
    FKV_METRICS(X)
#undef X
    put(&o, "}\n");
    FKV__UNLOCK(c);
    if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
    *len = o.len;
    return FKV_OK;
}
