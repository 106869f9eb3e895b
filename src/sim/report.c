/* Result summaries: latency statistics, slowdown, the fairness figures and
 * share attainment (see report.h); their forms are in report_write.c. */
#include "sim/report.h"
#include "core/shares.h"
#include "sim/fairness.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const int64_t *sorted, size_t n, double p)
{
    if (!n) return 0;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1] * 1e-6;
}

void fkv_lat_stats_compute(const int64_t *ns, const uint8_t *cls, size_t n, fkv_lat_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    int64_t *vc = malloc((n ? n : 1) * sizeof *vc);
    if (!v || !vc) {
        free(v);
        free(vc);
        return;
    }
    size_t m = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (ns[i] >= 0) {
            v[m++] = ns[i];
            sum += ns[i] * 1e-6;
        }
    out->n = m;
    if (m) {
        out->mean_ms = sum / m;
        double ss = 0;
        for (size_t i = 0; i < m; i++) {
            double d = v[i] * 1e-6 - out->mean_ms;
            ss += d * d;
        }
        out->std_ms = sqrt(ss / m);
        qsort(v, m, sizeof *v, cmp_i64);
        out->p50_ms = pct_ms(v, m, 50);
        out->p99_ms = pct_ms(v, m, 99);
        out->max_ms = v[m - 1] * 1e-6;
    }
    for (int c = 0; c < FKV_N_CLASSES; c++) {
        size_t k = 0;
        double s = 0;
        for (size_t i = 0; i < n; i++)
            if (ns[i] >= 0 && cls[i] == c) {
                vc[k++] = ns[i];
                s += ns[i] * 1e-6;
            }
        out->by_class[c].n = k;
        if (k) {
            qsort(vc, k, sizeof *vc, cmp_i64);
            out->by_class[c].mean_ms = s / k;
            out->by_class[c].p50_ms = pct_ms(vc, k, 50);
            out->by_class[c].p99_ms = pct_ms(vc, k, 99);
        }
    }
    free(v);
    free(vc);
}

/* The figures the summary takes as they are (result_fields.h, COPY). */
#define COPY_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) COPY_##summary(name)
#define COPY_COPY(name) o->name = r->name;
#define COPY_CALC(name)
#define COPY_NONE(name)

void fkv_summarize(const fkv_sim_result *r, fkv_scheme_summary *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", r->scheme);
    fkv_accuracy_none(&o->accuracy, "", "the row's precision mix was not looked up");
    fkv_lat_stats_compute(r->e2e_ns, r->cls, r->n, &o->e2e);
    fkv_lat_stats_compute(r->ttft_ns, r->cls, r->n, &o->ttft);
    fkv_lat_stats_compute(r->tpot_ns, r->cls, r->n, &o->tpot);
    uint64_t touched = r->hit_tokens + r->miss_tokens;
    o->cache_hit_rate = touched ? (double)r->hit_tokens / (double)touched : 1.0;
    /* reads served from the cache / reads: comparable between schemes that
     * keep a preempted sequence (its evicted chunks miss at the next touch)
     * and schemes that free it (its tokens are prefilled again, never
     * touched as misses) */
    uint64_t lost = r->recomputed_tokens + r->reloaded_tokens;
    o->context_read_rate = r->hit_tokens + lost ? (double)r->hit_tokens / (double)(r->hit_tokens + lost) : 1.0;
    /* prompt tokens found in the prefix cache at a request's first
     * admission; the cache's own counter also counts the re-matches of
     * requests resumed after a freeing preemption (their own blocks) */
    o->prefix_hit_rate = r->prompt_tokens_all ? (double)r->matched_tokens / (double)r->prompt_tokens_all : 0;
    o->cache_prefix_hit_rate =
        r->prefix_query_tokens ? (double)r->prefix_hit_tokens / (double)r->prefix_query_tokens : 0;
    FKV_RESULT_FIELDS(COPY_FIELD)
    if (r->prompt_tokens_all) {
        double all = (double)r->prompt_tokens_all;
        o->tier_hit_rate[FKV_TIER_HOST] = (double)r->matched_host_tokens / all;
        o->tier_hit_rate[FKV_TIER_REMOTE] = (double)r->matched_remote_tokens / all;
        o->tier_hit_rate[FKV_TIER_DEVICE] =
            (double)(r->matched_tokens - r->matched_host_tokens - r->matched_remote_tokens) / all;
    }
    o->makespan_s = r->makespan_ns * 1e-9;
    o->throughput_tok_s = o->makespan_s > 0 ? r->output_tokens / o->makespan_s : 0;
    o->throughput_req_s = o->makespan_s > 0 ? r->done / o->makespan_s : 0;
    if (!r->n_tenants) return;
    int64_t *e2e = malloc(r->n * sizeof *e2e), *ttft = malloc(r->n * sizeof *ttft);
    if (!e2e || !ttft) {
        free(e2e);
        free(ttft);
        return;
    }
    double lo = 0, hi = 0, offered = 0, weights = 0;
    for (uint32_t t = 1; t <= r->n_tenants; t++) {
        offered += (double)r->tenants[t].offered_tokens;
        weights += r->tenants[t].weight > 0 ? r->tenants[t].weight : 1;
    }
    for (uint32_t t = 1; t <= r->n_tenants; t++) {
        /* the tenant's requests only: the others count as not done */
        for (size_t i = 0; i < r->n; i++) {
            e2e[i] = r->tenant[i] == t ? r->e2e_ns[i] : -1;
            ttft[i] = r->tenant[i] == t ? r->ttft_ns[i] : -1;
        }
        struct fkv_tenant_summary *x = &o->tenants[t];
        fkv_lat_stats_compute(e2e, r->cls, r->n, &x->e2e);
        fkv_lat_stats_compute(ttft, r->cls, r->n, &x->ttft);
        x->n = x->e2e.n;
        x->weight = r->tenants[t].weight;
        x->share_pages = r->tenants[t].share_pages;
        x->preemptions = r->tenants[t].preemptions;
        x->reclaims = r->tenants[t].reclaims;
        memcpy(x->reclaimed_pages, r->tenants[t].reclaimed_pages, sizeof x->reclaimed_pages);
        x->prefix_hit_rate = r->tenants[t].prompt_tokens
                                 ? (double)r->tenants[t].matched_tokens / (double)r->tenants[t].prompt_tokens
                                 : 0;
        x->partition_hit_rate = x->isolated_ttft_p99_ms = x->isolated_e2e_p99_ms = -1;
        /* light: the workload says so (generators name their light
         * tenants), or else the tenant offers no more tokens than its
         * weighted share of all offered */
        double w = r->tenants[t].weight > 0 ? r->tenants[t].weight : 1;
        x->light = r->n_light ? t <= r->n_light
                              : (double)r->tenants[t].offered_tokens <= offered * w / weights * (1 + 1e-9);
        /* share attainment: the loads here, the shares in fkv_summary_shares */
        double win = r->tenants[t].window_ns * 1e-9;
        x->offered_tokens_s = win > 0 ? (double)r->tenants[t].offered_tokens / win : 0;
        x->served_tokens_s = win > 0 ? (double)r->tenants[t].window_tokens / win : 0;
        x->fair_tokens_s = x->attained = -1;
        x->within_share = -1;
        if (x->n && (lo == 0 || x->e2e.mean_ms < lo)) lo = x->e2e.mean_ms;
        if (x->n && x->e2e.mean_ms > hi) hi = x->e2e.mean_ms;
    }
    o->tenant_spread = lo > 0 ? hi / lo : 0;
    free(e2e);
    free(ttft);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void fkv_summary_slowdown(fkv_scheme_summary *o, const fkv_sim_result *r, const int64_t *idle_e2e)
{
    double *sd = malloc((r->n ? r->n : 1) * sizeof *sd);
    if (!sd) return;
    size_t m = 0;
    double sum = 0, tsum[FKV_SIM_MAX_TENANTS + 1] = {0};
    size_t tn[FKV_SIM_MAX_TENANTS + 1] = {0};
    for (size_t i = 0; i < r->n; i++) {
        if (r->e2e_ns[i] < 0 || idle_e2e[i] <= 0) continue;
        double x = (double)r->e2e_ns[i] / (double)idle_e2e[i];
        sd[m++] = x;
        sum += x;
        uint32_t t = r->tenant[i];
        if (t <= FKV_SIM_MAX_TENANTS) tsum[t] += x, tn[t]++;
    }
    if (m) {
        o->slowdown_mean = sum / (double)m;
        qsort(sd, m, sizeof *sd, cmp_dbl);
        size_t k = (size_t)ceil(0.99 * (double)m);
        o->slowdown_p99 = sd[(k ? k : 1) - 1];
    }
    free(sd);
    if (!r->n_tenants) return;
    double means[FKV_SIM_MAX_TENANTS];
    size_t nm = 0;
    for (uint32_t t = 1; t <= r->n_tenants; t++)
        if (tn[t]) o->tenants[t].slowdown_mean = tsum[t] / (double)tn[t], means[nm++] = o->tenants[t].slowdown_mean;
    o->jain_slowdown = fkv_jain_index(means, nm);
    o->max_min_slowdown = fkv_max_min_ratio(means, nm);
}

void fkv_summaries_fairness(fkv_scheme_summary *s, size_t n)
{
    const fkv_scheme_summary *lru = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s[i].name, "lru")) lru = &s[i];
    for (size_t i = 0; i < n; i++) {
        s[i].fairness_gain = lru && s[i].e2e.std_ms > 0 ? lru->e2e.std_ms / s[i].e2e.std_ms : 0;
        s[i].throughput_rel_lru = lru && lru->throughput_tok_s > 0 ? s[i].throughput_tok_s / lru->throughput_tok_s : 0;
    }
}

void fkv_summaries_isolated(fkv_scheme_summary *s, size_t n)
{
    const fkv_scheme_summary *iso = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s[i].name, "isolated")) iso = &s[i];
    if (!iso) return;
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 1; t <= s[i].n_tenants && t <= iso->n_tenants; t++) {
            s[i].tenants[t].isolated_ttft_p99_ms = iso->tenants[t].ttft.p99_ms;
            s[i].tenants[t].isolated_e2e_p99_ms = iso->tenants[t].e2e.p99_ms;
        }
}

void fkv_summary_shares(fkv_scheme_summary *o, double capacity_tok_s)
{
    if (!o->n_tenants || capacity_tok_s <= 0) return;
    /* the saturation run's average includes its drain (a few long requests
     * decoding alone), so a run kept saturated may serve more: its own
     * total is then the capacity */
    double served = 0;
    for (uint32_t t = 1; t <= o->n_tenants; t++) served += o->tenants[t].served_tokens_s;
    o->share_saturation_tok_s = capacity_tok_s;
    o->share_capacity_tok_s = served > capacity_tok_s ? served : capacity_tok_s;
    capacity_tok_s = o->share_capacity_tok_s;
    fkv__claim cl[FKV_SIM_MAX_TENANTS];
    uint32_t nc = 0;
    for (uint32_t t = 1; t <= o->n_tenants && nc < FKV_SIM_MAX_TENANTS; t++) {
        const struct fkv_tenant_summary *x = &o->tenants[t];
        cl[nc++] = (fkv__claim){.demand = x->offered_tokens_s, .weight = x->weight > 0 ? x->weight : 1, .id = t};
    }
    fkv__water_fill(cl, nc, capacity_tok_s, FKV__SPARE_KEEP);
    for (uint32_t k = 0; k < nc; k++) {
        struct fkv_tenant_summary *x = &o->tenants[cl[k].id];
        x->fair_tokens_s = cl[k].share;
        x->within_share = x->offered_tokens_s <= cl[k].share * (1 + 1e-9);
        double owed = x->offered_tokens_s < cl[k].share ? x->offered_tokens_s : cl[k].share;
        x->attained = owed > 0 ? x->served_tokens_s / owed : -1;
    }
}

void fkv_summary_partition(fkv_scheme_summary *o, const fkv_sim_result *p)
{
    for (uint32_t t = 1; t <= o->n_tenants && t <= p->n_tenants; t++)
        o->tenants[t].partition_hit_rate =
            p->tenants[t].prompt_tokens ? (double)p->tenants[t].matched_tokens / (double)p->tenants[t].prompt_tokens : 0;
}
