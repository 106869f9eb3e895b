/* Result summaries and their three output forms (see report.h). */
#include "sim/report.h"
#include "sim/fairness.h"

#include <math.h>
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

/* The scheme column: 13 wide, or as wide as the longest name. */
static int name_width(const fkv_scheme_summary *s, size_t n)
{
    size_t w = 13;
    for (size_t i = 0; i < n; i++)
        if (strlen(s[i].name) > w) w = strlen(s[i].name);
    return (int)w;
}

/* fkv_tenant_info.reclaimed_pages[k]: by fkv_reclaim_action, then idle evictions */
static const char *slot_name(int k) { return k < FKV_N_RECLAIM ? fkv_reclaim_name((fkv_reclaim_action)k) : "idle"; }

/* A figure that may be missing (< 0): "-" then. */
static void opt_col(FILE *f, int width, int prec, double v)
{
    if (v < 0) fprintf(f, " %*s", width, "-");
    else fprintf(f, " %*.*f", width, prec, v);
}

/* Per-tenant latency, hit rates and reclaim, after the main tables
 * (tenants only). */
static void tenant_text(FILE *f, const fkv_scheme_summary *s, size_t n)
{
    if (!n || !s[0].n_tenants) return;
    int w = name_width(s, n);
    fprintf(f, "\nper tenant: end-to-end and first-token latency (ms); iso = the isolated scheme's (the tenant alone)\n");
    fprintf(f, "%-*s %6s %5s %6s %9s %9s %9s %9s %9s %9s %9s %8s\n", w, "scheme", "tenant", "light", "done", "mean",
            "P50", "P99", "TTFTmean", "TTFTp50", "TTFTp99", "isoTTFT99", "slowdown");
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 1; t <= s[i].n_tenants; t++) {
            const struct fkv_tenant_summary *x = &s[i].tenants[t];
            fprintf(f, "%-*s %6u %5s %6zu %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f", w, s[i].name, t, x->light ? "yes" : "no",
                    x->n, x->e2e.mean_ms, x->e2e.p50_ms, x->e2e.p99_ms, x->ttft.mean_ms, x->ttft.p50_ms, x->ttft.p99_ms);
            opt_col(f, 9, 1, x->isolated_ttft_p99_ms);
            opt_col(f, 8, 3, x->slowdown_mean > 0 ? x->slowdown_mean : -1);
            fputc('\n', f);
        }
    fprintf(f, "per class and tenant (mean, P50, P99 of e2e and TTFT): --format json or csv\n");
    fprintf(f, "\nper tenant: memory; pfx%% = its prompt tokens found in the prefix cache at admission, part%% = the "
               "same on a static 1/n partition of the cache (its requests alone there), pages reclaimed by action\n");
    fprintf(f, "%-*s %6s %6s %8s %6s %6s %7s %8s", w, "scheme", "tenant", "weight", "share", "pfx%", "part%", "preempt",
            "reclaims");
    for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++) fprintf(f, " %9.9s", slot_name(k));
    fputc('\n', f);
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 1; t <= s[i].n_tenants; t++) {
            const struct fkv_tenant_summary *x = &s[i].tenants[t];
            fprintf(f, "%-*s %6u %6.2f %8.0f %6.2f", w, s[i].name, t, x->weight, x->share_pages, 100 * x->prefix_hit_rate);
            opt_col(f, 6, 2, x->partition_hit_rate < 0 ? -1 : 100 * x->partition_hit_rate);
            fprintf(f, " %7llu %8llu", (unsigned long long)x->preemptions, (unsigned long long)x->reclaims);
            for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++)
                fprintf(f, " %9llu", (unsigned long long)x->reclaimed_pages[k]);
            fputc('\n', f);
        }
    fprintf(f, "share = the tenant's fair share of the pool at the end (pages); spread = largest / smallest tenant "
               "mean:");
    for (size_t i = 0; i < n; i++) fprintf(f, " %s %.2f", s[i].name, s[i].tenant_spread);
    fprintf(f, "\n");
    if (!s[0].slowdown_mean) return;
    fprintf(f, "\nslowdown = e2e / e2e alone on an idle system; per tenant (mean), then Jain's index and max/min over "
               "the tenants' means; service diff = VTC's largest gap in weighted tokens served between two "
               "backlogged tenants\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%-*s mean %.3f P99 %.3f |", w, s[i].name, s[i].slowdown_mean, s[i].slowdown_p99);
        for (uint32_t t = 1; t <= s[i].n_tenants; t++) fprintf(f, " t%u %.3f", t, s[i].tenants[t].slowdown_mean);
        fprintf(f, " | Jain %.4f max/min %.3f | service diff %.0f\n", s[i].jain_slowdown, s[i].max_min_slowdown,
                s[i].service_diff_tokens);
    }
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

void fkv_summary_partition(fkv_scheme_summary *o, const fkv_sim_result *p)
{
    for (uint32_t t = 1; t <= o->n_tenants && t <= p->n_tenants; t++)
        o->tenants[t].partition_hit_rate =
            p->tenants[t].prompt_tokens ? (double)p->tenants[t].matched_tokens / (double)p->tenants[t].prompt_tokens : 0;
}

static void meta_line(FILE *f, const fkv_report_meta *m)
{
    fprintf(f, "workload %s, %zu requests", m->workload, m->requests);
    if (m->load >= 0) fprintf(f, ", load %.2f (%.2f req/s of %.2f req/s capacity)", m->load, m->arrival_rate, m->capacity_rps);
    else fprintf(f, ", trace timing (%.2f req/s)", m->arrival_rate);
    fprintf(f, "\nprofile %s; KV capacity %llu tokens (%.2f GB), %s; admission %s, %s batching; seed %llu\n",
            m->profile, (unsigned long long)m->capacity_tokens, m->capacity_gb, m->capacity_rule, m->admission,
            m->batching, (unsigned long long)m->seed);
    if (m->n_tenants) fprintf(f, "tenants: %s\n", m->tenants);
}

/* The tiers table, only in runs with a host or remote tier (so a run
 * without them prints what it printed before). */
static void tiers_text(FILE *f, const fkv_scheme_summary *s, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= s[i].tiered;
    if (!any) return;
    int w = name_width(s, n);
    fprintf(f, "\nprefix hits by tier (%% of prompt tokens, at first admission) and first-token latency (ms)\n");
    fprintf(f, "%-*s %7s %7s %7s %7s %9s %9s %12s\n", w, "scheme", "device", "host", "remote", "total", "TTFTmean",
            "TTFTp99", "net tokens");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%-*s %7.2f %7.2f %7.2f %7.2f %9.1f %9.1f %12llu\n", w, x->name,
                100 * x->tier_hit_rate[FKV_TIER_DEVICE], 100 * x->tier_hit_rate[FKV_TIER_HOST],
                100 * x->tier_hit_rate[FKV_TIER_REMOTE], 100 * x->prefix_hit_rate, x->ttft.mean_ms, x->ttft.p99_ms,
                (unsigned long long)x->remote_fetched_tokens);
    }
    fprintf(f, "net tokens: K/V tokens fetched from the remote tier (whole chunks)\n");
    fprintf(f, "\nwritten below the device (GB) and chunks the admission filter refused\n");
    fprintf(f, "%-*s %10s %10s %12s %12s\n", w, "scheme", "host GB", "remote GB", "host refused", "remote refused");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%-*s %10.2f %10.2f %12llu %12llu\n", w, x->name, (double)x->host_written_bytes / 1e9,
                (double)x->remote_written_bytes / 1e9, (unsigned long long)x->host_refused_chunks,
                (unsigned long long)x->remote_refused_chunks);
    }
    fprintf(f, "host GB: demoted over PCIe; remote GB: written back over the network\n");
}

static void min_bound_text(FILE *f, const fkv_report_meta *m)
{
    if (!m->min_bound) return;
    fprintf(f, "\nMIN bound (%% of prompt tokens; no policy finds more at these sizes, 16-bit K/V):\n"
               "device %.2f, device + host %.2f, all tiers %.2f\n",
            100 * m->min_bound[0], 100 * m->min_bound[1], 100 * m->min_bound[2]);
}

void fkv_report_text(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n)
{
    meta_line(f, m);
    int w = name_width(s, n);
    fprintf(f, "\nend-to-end latency (ms), the seed's table 4.2 columns first\n");
    fprintf(f, "%-*s %8s %8s %8s %8s %8s %8s %8s %7s %6s %8s %10s %7s %9s %6s\n", w, "scheme", "mean", "P99", "short",
            "long", "medium", "P50", "std", "fair", "hit%", "ctxread%", "recompute", "preempt", "tok/s", "thr");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%-*s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.2fx %6.2f %8.2f %10llu %7llu %9.1f %6.3f\n", w,
                x->name, x->e2e.mean_ms, x->e2e.p99_ms, x->e2e.by_class[FKV_CLASS_SHORT].mean_ms,
                x->e2e.by_class[FKV_CLASS_LONG].mean_ms, x->e2e.by_class[FKV_CLASS_MEDIUM].mean_ms, x->e2e.p50_ms,
                x->e2e.std_ms, x->fairness_gain, 100 * x->prefix_hit_rate, 100 * x->context_read_rate,
                (unsigned long long)x->recomputed_tokens, (unsigned long long)x->preemptions, x->throughput_tok_s,
                x->throughput_rel_lru);
    }
    fprintf(f, "short/long/medium: class means; fair = std(lru) / std(scheme); hit%% = prompt tokens found in the "
               "prefix cache at admission / prompt tokens (vLLM's prefix_cache_hits / prefix_cache_queries); "
               "ctxread%% = context tokens read from the cache / (those + recomputed or reloaded); recompute: "
               "tokens computed again after eviction or preemption; thr = output tokens/s over lru's\n");
    fprintf(f, "\nper class P99 (ms) and first-token / per-output-token latency (ms)\n");
    fprintf(f, "%-*s %9s %9s %9s %9s %9s %9s %9s %8s %5s\n", w, "scheme", "P99short", "P99med", "P99long",
            "TTFTmean", "TTFTp99", "TTFTshort", "TPOTmean", "TPOTp99", "rej");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%-*s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.2f %8.2f %5zu\n", w, x->name,
                x->e2e.by_class[FKV_CLASS_SHORT].p99_ms, x->e2e.by_class[FKV_CLASS_MEDIUM].p99_ms,
                x->e2e.by_class[FKV_CLASS_LONG].p99_ms, x->ttft.mean_ms, x->ttft.p99_ms,
                x->ttft.by_class[FKV_CLASS_SHORT].mean_ms, x->tpot.mean_ms, x->tpot.p99_ms, x->rejected);
    }
    fprintf(f, "rej = requests larger than the cache\n");
    tiers_text(f, s, n);
    min_bound_text(f, m);
    tenant_text(f, s, n);
    fprintf(f, "\nseed table 4.2 for comparison: LRU 142/623/89/412, F-LRU 128/287/112/156, "
               "dynamic chunking 117/203/105/132 (mean/P99/short/long ms)\n");
}

void fkv_report_fairness_text(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n)
{
    meta_line(f, m);
    int w = name_width(s, n);
    fprintf(f, "\nfairness: first-token P99 of the worst light and heavy tenant (ms), the light one's over its "
               "P99 alone (iso)\n");
    fprintf(f, "%-*s %10s %7s %10s %9s %8s %8s %10s %6s\n", w, "scheme", "lightTTFT99", "x iso", "heavyTTFT99",
            "e2e mean", "Jain", "max/min", "svc diff", "thr");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        double light = -1, heavy = -1, ratio = -1;
        for (uint32_t t = 1; t <= x->n_tenants; t++) {
            const struct fkv_tenant_summary *y = &x->tenants[t];
            if (!y->n) continue;
            if (!y->light) {
                if (y->ttft.p99_ms > heavy) heavy = y->ttft.p99_ms;
                continue;
            }
            if (y->ttft.p99_ms > light) light = y->ttft.p99_ms;
            if (y->isolated_ttft_p99_ms > 0 && y->ttft.p99_ms / y->isolated_ttft_p99_ms > ratio)
                ratio = y->ttft.p99_ms / y->isolated_ttft_p99_ms;
        }
        fprintf(f, "%-*s", w, x->name);
        opt_col(f, 11, 1, light);
        opt_col(f, 7, 2, ratio);
        opt_col(f, 11, 1, heavy);
        fprintf(f, " %9.1f %8.4f %8.3f %10.0f %6.3f\n", x->e2e.mean_ms, x->jain_slowdown, x->max_min_slowdown,
                x->service_diff_tokens, x->throughput_rel_lru);
    }
    fprintf(f, "x iso: the largest light tenant's P99 TTFT over its own in the isolated run; Jain and max/min: over "
               "the tenants' mean slowdowns; svc diff: VTC's service difference (tokens); thr: output tokens/s over "
               "lru's\n");
}

static void json_lat(FILE *f, const char *key, const fkv_lat_stats *l)
{
    static const char *cn[FKV_N_CLASSES] = {"short", "medium", "long"};
    fprintf(f, "\"%s\":{\"n\":%zu,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"std_ms\":%.3f,\"max_ms\":%.3f,\"by_class\":{",
            key, l->n, l->mean_ms, l->p50_ms, l->p99_ms, l->std_ms, l->max_ms);
    for (int c = 0; c < FKV_N_CLASSES; c++)
        fprintf(f, "%s\"%s\":{\"n\":%zu,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}", c ? "," : "", cn[c],
                l->by_class[c].n, l->by_class[c].mean_ms, l->by_class[c].p50_ms, l->by_class[c].p99_ms);
    fprintf(f, "}}");
}

/* A figure that may be missing (< 0): null then. */
static void json_opt(FILE *f, const char *key, double v)
{
    if (v < 0) fprintf(f, ",\"%s\":null", key);
    else fprintf(f, ",\"%s\":%.6f", key, v);
}

/* "fairness": the slowdown indices, the service difference, and per
 * tenant what the fairness targets read. */
static void json_fairness(FILE *f, const fkv_scheme_summary *x)
{
    fprintf(f, ",\"fairness\":{\"jain_slowdown\":%.6f,\"max_min_slowdown\":%.6f,\"service_diff_tokens\":%.3f,"
               "\"tenants\":[",
            x->jain_slowdown, x->max_min_slowdown, x->service_diff_tokens);
    for (uint32_t t = 1; t <= x->n_tenants; t++) {
        const struct fkv_tenant_summary *y = &x->tenants[t];
        fprintf(f, "%s{\"id\":%u,\"light\":%s,\"done\":%zu,", t > 1 ? "," : "", t, y->light ? "true" : "false", y->n);
        json_lat(f, "ttft", &y->ttft);
        fputc(',', f);
        json_lat(f, "e2e", &y->e2e);
        fprintf(f, ",\"slowdown_mean\":%.6f", y->slowdown_mean);
        json_opt(f, "isolated_ttft_p99_ms", y->isolated_ttft_p99_ms);
        json_opt(f, "isolated_e2e_p99_ms", y->isolated_e2e_p99_ms);
        fprintf(f, ",\"prefix_hit_rate\":%.6f", y->prefix_hit_rate);
        json_opt(f, "partition_hit_rate", y->partition_hit_rate);
        fputc('}', f);
    }
    fprintf(f, "]}");
}

/* The scheme's flat figures, in the list's order (result_fields.h, json 1):
 * each ,"name":value; a latency distribution as json_lat's object. */
#define JSON_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) JSON_##json(kind, name, fmt)
#define JSON_0(kind, name, fmt)
#define JSON_1(kind, name, fmt) JSON_PUT_##kind(name, fmt)
#define JSON_PUT_F64(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_SZ(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_U64(name, fmt) fprintf(f, ",\"" #name "\":" fmt, (unsigned long long)x->name);
#define JSON_PUT_U32(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_INT(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_NS(name, fmt) fprintf(f, ",\"" #name "\":" fmt, (long long)x->name);
#define JSON_PUT_LAT(name, cols) fputc(',', f), json_lat(f, #name, &x->name);

void fkv_report_json(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n)
{
    fprintf(f, "{\"workload\":\"%s\",\"load\":", m->workload);
    if (m->load >= 0) fprintf(f, "%.4f", m->load);
    else fprintf(f, "null");
    fprintf(f, ",\"requests\":%zu,\"profile\":\"%s\",\"capacity_tokens\":%llu,\"capacity_gb\":%.4f,"
               "\"capacity_rule\":\"%s\",\"arrival_rate_rps\":%.4f,\"capacity_rps\":%.4f,\"seed\":%llu,"
               "\"admission\":\"%s\",\"batching\":\"%s\",",
            m->requests, m->profile, (unsigned long long)m->capacity_tokens, m->capacity_gb, m->capacity_rule,
            m->arrival_rate, m->capacity_rps, (unsigned long long)m->seed, m->admission, m->batching);
    if (m->n_tenants) fprintf(f, "\"tenants\":\"%s\",", m->tenants);
    if (m->min_bound)
        fprintf(f, "\"min_bound\":{\"device\":%.6f,\"device_host\":%.6f,\"all\":%.6f},", m->min_bound[0],
                m->min_bound[1], m->min_bound[2]);
    fprintf(f, "\"schemes\":[");
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%s\n{\"name\":\"%s\"", i ? "," : "", x->name);
        FKV_RESULT_FIELDS(JSON_FIELD)
        if (x->tiered)
            fprintf(f, ",\"tiers\":{\"device\":%.6f,\"host\":%.6f,\"remote\":%.6f},\"remote_fetched_tokens\":%llu",
                    x->tier_hit_rate[FKV_TIER_DEVICE], x->tier_hit_rate[FKV_TIER_HOST],
                    x->tier_hit_rate[FKV_TIER_REMOTE], (unsigned long long)x->remote_fetched_tokens);
        if (x->tiered)
            fprintf(f, ",\"written_bytes\":{\"host\":%llu,\"remote\":%llu},\"refused_chunks\":{\"host\":%llu,\"remote\":%llu}",
                    (unsigned long long)x->host_written_bytes, (unsigned long long)x->remote_written_bytes,
                    (unsigned long long)x->host_refused_chunks, (unsigned long long)x->remote_refused_chunks);
        if (x->slowdown_mean) fprintf(f, ",\"slowdown\":{\"mean\":%.6f,\"p99\":%.6f}", x->slowdown_mean, x->slowdown_p99);
        if (x->n_tenants) json_fairness(f, x);
        if (x->n_tenants) {
            fprintf(f, ",\"tenant_spread\":%.4f,\"tenants\":[", x->tenant_spread);
            for (uint32_t t = 1; t <= x->n_tenants; t++) {
                const struct fkv_tenant_summary *y = &x->tenants[t];
                fprintf(f, "%s{\"tenant\":%u,\"weight\":%.4f,\"share_pages\":%.1f,\"done\":%zu,\"e2e_mean_ms\":%.3f,"
                           "\"e2e_p99_ms\":%.3f,\"ttft_mean_ms\":%.3f,\"ttft_p99_ms\":%.3f,\"preemptions\":%llu,"
                           "\"reclaims\":%llu,\"reclaimed_pages\":{",
                        t > 1 ? "," : "", t, y->weight, y->share_pages, y->n, y->e2e.mean_ms, y->e2e.p99_ms,
                        y->ttft.mean_ms, y->ttft.p99_ms, (unsigned long long)y->preemptions,
                        (unsigned long long)y->reclaims);
                for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++)
                    fprintf(f, "%s\"%s\":%llu", k ? "," : "", slot_name(k), (unsigned long long)y->reclaimed_pages[k]);
                fprintf(f, "}}");
            }
            fprintf(f, "]");
        }
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
}

/* A latency distribution's CSV columns (result_fields.h, FKV_LATCOL_*):
 * their names after key, or their values. */
static const char *const latcol_name[FKV_LATCOL_N] = {
    "mean_ms", "p50_ms", "p99_ms", "std_ms", "short_mean_ms", "short_p99_ms", "medium_mean_ms", "medium_p99_ms",
    "long_mean_ms", "long_p99_ms"};

static void csv_lat_head(FILE *f, const char *key, int cols)
{
    for (int k = 0; k < FKV_LATCOL_N; k++)
        if (cols & 1 << k) fprintf(f, ",%s_%s", key, latcol_name[k]);
}

static void csv_lat(FILE *f, const fkv_lat_stats *l, int cols)
{
    const double v[FKV_LATCOL_N] = {l->mean_ms,
                                    l->p50_ms,
                                    l->p99_ms,
                                    l->std_ms,
                                    l->by_class[FKV_CLASS_SHORT].mean_ms,
                                    l->by_class[FKV_CLASS_SHORT].p99_ms,
                                    l->by_class[FKV_CLASS_MEDIUM].mean_ms,
                                    l->by_class[FKV_CLASS_MEDIUM].p99_ms,
                                    l->by_class[FKV_CLASS_LONG].mean_ms,
                                    l->by_class[FKV_CLASS_LONG].p99_ms};
    for (int k = 0; k < FKV_LATCOL_N; k++)
        if (cols & 1 << k) fprintf(f, ",%.3f", v[k]);
}

/* The scheme's flat CSV columns by rank (result_fields.h, csv): the header's
 * names and each row's values; the ranks are 1..CSV_COLUMNS, each once. */
#define CSV_COUNT(kind, name, apart, req, rf, summary, fmt, json, csv) +((csv) != 0)
#define CSV_RANKS(kind, name, apart, req, rf, summary, fmt, json, csv) +(csv)
enum { CSV_COLUMNS = 0 FKV_RESULT_FIELDS(CSV_COUNT) };
_Static_assert((0 FKV_RESULT_FIELDS(CSV_RANKS)) == CSV_COLUMNS * (CSV_COLUMNS + 1) / 2,
               "result_fields.h: the CSV ranks must be 1..n, each once");
#define CSV_HEAD(kind, name, apart, req, rf, summary, fmt, json, csv) CSV_HEAD_##summary(kind, name, fmt, csv)
#define CSV_HEAD_NONE(kind, name, fmt, csv)
#define CSV_HEAD_COPY(kind, name, fmt, csv) CSV_HEAD_CALC(kind, name, fmt, csv)
#define CSV_HEAD_CALC(kind, name, fmt, csv) \
    if (col == (csv)) CSV_HEAD_PUT_##kind(name, fmt)
#define CSV_HEAD_PUT_F64(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_U64(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_SZ(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_U32(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_INT(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_NS(name, fmt) fputs("," #name, f);
#define CSV_HEAD_PUT_LAT(name, cols) csv_lat_head(f, #name, cols);
#define CSV_VALUE(kind, name, apart, req, rf, summary, fmt, json, csv) CSV_VALUE_##summary(kind, name, fmt, csv)
#define CSV_VALUE_NONE(kind, name, fmt, csv)
#define CSV_VALUE_COPY(kind, name, fmt, csv) CSV_VALUE_CALC(kind, name, fmt, csv)
#define CSV_VALUE_CALC(kind, name, fmt, csv) \
    if (col == (csv)) CSV_PUT_##kind(name, fmt)
#define CSV_PUT_F64(name, fmt) fprintf(f, "," fmt, x->name);
#define CSV_PUT_SZ(name, fmt) fprintf(f, "," fmt, x->name);
#define CSV_PUT_U32(name, fmt) fprintf(f, "," fmt, x->name);
#define CSV_PUT_INT(name, fmt) fprintf(f, "," fmt, x->name);
#define CSV_PUT_U64(name, fmt) fprintf(f, "," fmt, (unsigned long long)x->name);
#define CSV_PUT_NS(name, fmt) fprintf(f, "," fmt, (long long)x->name);
#define CSV_PUT_LAT(name, cols) csv_lat(f, &x->name, cols);

void fkv_report_csv(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n, int header)
{
    if (header) {
        fprintf(f, "workload,load,profile,capacity_tokens,scheme");
        for (int col = 1; col <= CSV_COLUMNS; col++) {
            FKV_RESULT_FIELDS(CSV_HEAD)
        }
    }
    static const char *const cn[FKV_N_CLASSES] = {"short", "medium", "long"};
    if (header && n && s[0].n_tenants) {
        fprintf(f, ",tenant_spread,jain_slowdown,max_min_slowdown,service_diff_tokens");
        for (uint32_t t = 1; t <= s[0].n_tenants; t++) {
            fprintf(f, ",t%u_e2e_mean_ms,t%u_e2e_p99_ms,t%u_ttft_mean_ms,t%u_ttft_p99_ms,t%u_e2e_p50_ms,t%u_ttft_p50_ms,"
                       "t%u_slowdown_mean,t%u_isolated_ttft_p99_ms,t%u_prefix_hit_rate,t%u_partition_hit_rate",
                    t, t, t, t, t, t, t, t, t, t);
            for (int c = 0; c < FKV_N_CLASSES; c++)
                for (int k = 0; k < 2; k++)
                    fprintf(f, ",t%u_%s_%s_mean_ms,t%u_%s_%s_p50_ms,t%u_%s_%s_p99_ms", t, cn[c], k ? "ttft" : "e2e", t,
                            cn[c], k ? "ttft" : "e2e", t, cn[c], k ? "ttft" : "e2e");
        }
    }
    if (header && n && s[0].tiered)
        fprintf(f, ",device_hit_rate,host_hit_rate,remote_hit_rate,host_written_bytes,remote_written_bytes,"
                   "host_refused_chunks,remote_refused_chunks");
    if (header) fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        const fkv_scheme_summary *x = &s[i];
        fprintf(f, "%s,", m->workload);
        if (m->load >= 0) fprintf(f, "%.4f", m->load);
        fprintf(f, ",%s,%llu,%s", m->profile, (unsigned long long)m->capacity_tokens, x->name);
        for (int col = 1; col <= CSV_COLUMNS; col++) {
            FKV_RESULT_FIELDS(CSV_VALUE)
        }
        if (x->n_tenants) {
            fprintf(f, ",%.4f,%.6f,%.6f,%.3f", x->tenant_spread, x->jain_slowdown, x->max_min_slowdown,
                    x->service_diff_tokens);
            for (uint32_t t = 1; t <= x->n_tenants; t++) {
                const struct fkv_tenant_summary *y = &x->tenants[t];
                fprintf(f, ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6f", y->e2e.mean_ms, y->e2e.p99_ms, y->ttft.mean_ms,
                        y->ttft.p99_ms, y->e2e.p50_ms, y->ttft.p50_ms, y->slowdown_mean);
                /* missing figures are empty fields */
                if (y->isolated_ttft_p99_ms >= 0) fprintf(f, ",%.3f", y->isolated_ttft_p99_ms);
                else fputc(',', f);
                fprintf(f, ",%.6f", y->prefix_hit_rate);
                if (y->partition_hit_rate >= 0) fprintf(f, ",%.6f", y->partition_hit_rate);
                else fputc(',', f);
                for (int c = 0; c < FKV_N_CLASSES; c++)
                    for (int k = 0; k < 2; k++) {
                        const fkv_lat_stats *l = k ? &y->ttft : &y->e2e;
                        fprintf(f, ",%.3f,%.3f,%.3f", l->by_class[c].mean_ms, l->by_class[c].p50_ms,
                                l->by_class[c].p99_ms);
                    }
            }
        }
        if (x->tiered)
            fprintf(f, ",%.6f,%.6f,%.6f,%llu,%llu,%llu,%llu", x->tier_hit_rate[FKV_TIER_DEVICE],
                    x->tier_hit_rate[FKV_TIER_HOST], x->tier_hit_rate[FKV_TIER_REMOTE],
                    (unsigned long long)x->host_written_bytes, (unsigned long long)x->remote_written_bytes,
                    (unsigned long long)x->host_refused_chunks, (unsigned long long)x->remote_refused_chunks);
        fputc('\n', f);
    }
}
