/* The three forms of the summaries: text tables, JSON and CSV, each laid
 * out by column tables (report_cols.h) over the figures' lists
 * (result_fields.h, report_fields.h). */
#include "sim/report.h"
#include "sim/report_cols.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* The scheme column: 13 wide, or as wide as the longest name. */
static int name_width(const fkv_scheme_summary *s, size_t n)
{
    size_t w = 13;
    for (size_t i = 0; i < n; i++)
        if (strlen(s[i].name) > w) w = strlen(s[i].name);
    return (int)w;
}

/* Column tables (report_cols.h): a scheme's figures (S_), a tenant's (T_),
 * the fairness table's own (F_). */
#define S_(field) offsetof(fkv_scheme_summary, field)
#define T_(field) offsetof(struct fkv_tenant_summary, field)
#define F_(field) offsetof(struct fair_row, field)
#define C_(h, w, fm, k, o) .head = h, .width = w, .fmt = fm, .kind = FKV_COL_##k, .off = o
#define SHORT FKV_CLASS_SHORT
#define MEDIUM FKV_CLASS_MEDIUM
#define LONG FKV_CLASS_LONG

/* end-to-end latency, the seed's table 4.2 columns first */
static const fkv_col main_cols[] = {
    {C_("mean", 8, " %8.1f", F64, S_(e2e.mean_ms))},
    {C_("P99", 8, " %8.1f", F64, S_(e2e.p99_ms))},
    {C_("short", 8, " %8.1f", F64, S_(e2e.by_class[SHORT].mean_ms))},
    {C_("long", 8, " %8.1f", F64, S_(e2e.by_class[LONG].mean_ms))},
    {C_("medium", 8, " %8.1f", F64, S_(e2e.by_class[MEDIUM].mean_ms))},
    {C_("P50", 8, " %8.1f", F64, S_(e2e.p50_ms))},
    {C_("std", 8, " %8.1f", F64, S_(e2e.std_ms))},
    {C_("fair", 7, " %6.2fx", F64, S_(fairness_gain))},
    {C_("hit%", 6, " %6.2f", F64, S_(prefix_hit_rate)), .mul = 100},
    {C_("ctxread%", 8, " %8.2f", F64, S_(context_read_rate)), .mul = 100},
    {C_("recompute", 10, " %10llu", U64, S_(recomputed_tokens))},
    {C_("preempt", 7, " %7llu", U64, S_(preemptions))},
    {C_("tok/s", 9, " %9.1f", F64, S_(throughput_tok_s))},
    {C_("thr", 6, " %6.3f", F64, S_(throughput_rel_lru))},
};

/* per class P99, first-token and per-output-token latency */
static const fkv_col class_cols[] = {
    {C_("P99short", 9, " %9.1f", F64, S_(e2e.by_class[SHORT].p99_ms))},
    {C_("P99med", 9, " %9.1f", F64, S_(e2e.by_class[MEDIUM].p99_ms))},
    {C_("P99long", 9, " %9.1f", F64, S_(e2e.by_class[LONG].p99_ms))},
    {C_("TTFTmean", 9, " %9.1f", F64, S_(ttft.mean_ms))},
    {C_("TTFTp99", 9, " %9.1f", F64, S_(ttft.p99_ms))},
    {C_("TTFTshort", 9, " %9.1f", F64, S_(ttft.by_class[SHORT].mean_ms))},
    {C_("TPOTmean", 9, " %9.2f", F64, S_(tpot.mean_ms))},
    {C_("TPOTp99", 8, " %8.2f", F64, S_(tpot.p99_ms))},
    {C_("rej", 5, " %5zu", SZ, S_(rejected))},
};

/* The tiers (report_fields.h): prefix hits by tier, then the whole */
#define TIER_HIT_TEXT(ID, name, below, written, refused) \
    {C_(#name, 7, " %7.2f", F64, S_(tier_hit_rate[FKV_TIER_##ID])), .mul = 100},
static const fkv_col tier_hit_cols[] = {
    FKV_TIER_FIELDS(TIER_HIT_TEXT)
    {C_("total", 7, " %7.2f", F64, S_(prefix_hit_rate)), .mul = 100},
    {C_("TTFTmean", 9, " %9.1f", F64, S_(ttft.mean_ms))},
    {C_("TTFTp99", 9, " %9.1f", F64, S_(ttft.p99_ms))},
    {C_("net tokens", 12, " %12llu", U64, S_(remote_fetched_tokens))},
};

/* written below the device (GB), then chunks refused, per tier below it */
#define TIER_GB_TEXT(ID, name, below, written, refused) TIER_GB_TEXT_##below(name, written)
#define TIER_GB_TEXT_NONE(name, written)
#define TIER_GB_TEXT_BELOW(name, written) {C_(#name " GB", 10, " %10.2f", U64_F, S_(written)), .div = 1e9},
#define TIER_REFUSED_TEXT(ID, name, below, written, refused) TIER_REFUSED_TEXT_##below(name, refused)
#define TIER_REFUSED_TEXT_NONE(name, refused)
#define TIER_REFUSED_TEXT_BELOW(name, refused) {C_(#name " refused", 12, " %12llu", U64, S_(refused))},
static const fkv_col tier_below_cols[] = {FKV_TIER_FIELDS(TIER_GB_TEXT) FKV_TIER_FIELDS(TIER_REFUSED_TEXT)};

/* per tenant: latency */
static const fkv_col tenant_lat_cols[] = {
    {C_("tenant", 6, " %6u", ID, 0)},
    {C_("light", 5, " %5s", BOOL, T_(light))},
    {C_("done", 6, " %6zu", SZ, T_(n))},
    {C_("mean", 9, " %9.1f", F64, T_(e2e.mean_ms))},
    {C_("P50", 9, " %9.1f", F64, T_(e2e.p50_ms))},
    {C_("P99", 9, " %9.1f", F64, T_(e2e.p99_ms))},
    {C_("TTFTmean", 9, " %9.1f", F64, T_(ttft.mean_ms))},
    {C_("TTFTp50", 9, " %9.1f", F64, T_(ttft.p50_ms))},
    {C_("TTFTp99", 9, " %9.1f", F64, T_(ttft.p99_ms))},
    {C_("isoTTFT99", 9, " %9.1f", F64, T_(isolated_ttft_p99_ms)), .miss = FKV_MISS_NEG},
    {C_("slowdown", 8, " %8.3f", F64, T_(slowdown_mean)), .miss = FKV_MISS_NONPOS},
};

/* per tenant: memory */
static const fkv_col tenant_mem_cols[] = {
    {C_("tenant", 6, " %6u", ID, 0)},
    {C_("weight", 6, " %6.2f", F64, T_(weight))},
    {C_("share", 8, " %8.0f", F64, T_(share_pages))},
    {C_("pfx%", 6, " %6.2f", F64, T_(prefix_hit_rate)), .mul = 100},
    {C_("part%", 6, " %6.2f", F64, T_(partition_hit_rate)), .mul = 100, .miss = FKV_MISS_NEG},
    {C_("preempt", 7, " %7llu", U64, T_(preemptions))},
    {C_("reclaims", 8, " %8llu", U64, T_(reclaims))},
    {C_("", 9, " %9llu", SLOTS, T_(reclaimed_pages)), .clip = 1},
};

/* per tenant: share attainment */
static const fkv_col tenant_share_cols[] = {
    {C_("tenant", 6, " %6u", ID, 0)},
    {C_("weight", 6, " %6.2f", F64, T_(weight))},
    {C_("offered/s", 10, " %10.1f", F64, T_(offered_tokens_s))},
    {C_("fair/s", 10, " %10.1f", F64, T_(fair_tokens_s)), .miss = FKV_MISS_NEG},
    {C_("served/s", 10, " %10.1f", F64, T_(served_tokens_s))},
    {C_("within", 6, " %6s", BOOL, T_(within_share)), .miss = FKV_MISS_NEG},
    {C_("attained", 8, " %8.3f", F64, T_(attained)), .miss = FKV_MISS_NEG},
};

/* the slowdown line's figures */
static const fkv_col slowdown_text_cols[] = {
    {C_("mean", 0, " mean %.3f", F64, S_(slowdown_mean))},
    {C_("P99", 0, " P99 %.3f |", F64, S_(slowdown_p99))},
};
static const fkv_col slowdown_tail_cols[] = {
    {C_("Jain", 0, " | Jain %.4f", F64, S_(jain_slowdown))},
    {C_("max/min", 0, " max/min %.3f", F64, S_(max_min_slowdown))},
    {C_("service diff", 0, " | service diff %.0f", F64, S_(service_diff_tokens))},
};

/* the fairness table: the worst light and heavy tenant (fair_row), then
 * the scheme's own figures */
struct fair_row {
    double light, ratio, heavy; /* < 0: no such tenant */
};
static const fkv_col fair_cols[] = {
    {C_("lightTTFT99", 11, " %11.1f", F64, F_(light)), .miss = FKV_MISS_NEG},
    {C_("x iso", 7, " %7.2f", F64, F_(ratio)), .miss = FKV_MISS_NEG},
    {C_("heavyTTFT99", 11, " %11.1f", F64, F_(heavy)), .miss = FKV_MISS_NEG},
};
static const fkv_col fair_scheme_cols[] = {
    {C_("e2e mean", 9, " %9.1f", F64, S_(e2e.mean_ms))},
    {C_("Jain", 8, " %8.4f", F64, S_(jain_slowdown))},
    {C_("max/min", 8, " %8.3f", F64, S_(max_min_slowdown))},
    {C_("svc diff", 10, " %10.0f", F64, S_(service_diff_tokens))},
    {C_("thr", 6, " %6.3f", F64, S_(throughput_rel_lru))},
};

/* JSON: the tiers' objects */
#define TIER_HIT_JSON(ID, name, below, written, refused) {C_(#name, 0, "%.6f", F64, S_(tier_hit_rate[FKV_TIER_##ID]))},
static const fkv_col tier_hit_json[] = {FKV_TIER_FIELDS(TIER_HIT_JSON)};
#define TIER_WRITTEN_JSON(ID, name, below, written, refused) TIER_WRITTEN_JSON_##below(name, written)
#define TIER_WRITTEN_JSON_NONE(name, written)
#define TIER_WRITTEN_JSON_BELOW(name, written) {C_(#name, 0, "%llu", U64, S_(written))},
static const fkv_col tier_written_json[] = {FKV_TIER_FIELDS(TIER_WRITTEN_JSON)};
#define TIER_REFUSED_JSON(ID, name, below, written, refused) TIER_REFUSED_JSON_##below(name, refused)
#define TIER_REFUSED_JSON_NONE(name, refused)
#define TIER_REFUSED_JSON_BELOW(name, refused) {C_(#name, 0, "%llu", U64, S_(refused))},
static const fkv_col tier_refused_json[] = {FKV_TIER_FIELDS(TIER_REFUSED_JSON)};
static const fkv_col remote_fetched_json[] = {{C_("remote_fetched_tokens", 0, "%llu", U64, S_(remote_fetched_tokens))}};

/* JSON: the slowdown and fairness objects */
static const fkv_col slowdown_json[] = {
    {C_("mean", 0, "%.6f", F64, S_(slowdown_mean))},
    {C_("p99", 0, "%.6f", F64, S_(slowdown_p99))},
};
static const fkv_col fairness_json[] = {
    {C_("jain_slowdown", 0, "%.6f", F64, S_(jain_slowdown))},
    {C_("max_min_slowdown", 0, "%.6f", F64, S_(max_min_slowdown))},
    {C_("service_diff_tokens", 0, "%.3f", F64, S_(service_diff_tokens))},
    {C_("share_capacity_tokens_s", 0, "%.3f", F64, S_(share_capacity_tok_s)), .miss = FKV_MISS_NONPOS},
    {C_("saturation_tokens_s", 0, "%.3f", F64, S_(share_saturation_tok_s)), .miss = FKV_MISS_NONPOS},
};
/* a tenant's "share" object */
static const fkv_col share_json[] = {
    {C_("fair_tokens_s", 0, "%.3f", F64, T_(fair_tokens_s)), .miss = FKV_MISS_NEG},
    {C_("attained", 0, "%.6f", F64, T_(attained)), .miss = FKV_MISS_NEG},
    {C_("within_share", 0, "%s", BOOL, T_(within_share)), .miss = FKV_MISS_NEG},
    {C_("offered_tokens_s", 0, "%.3f", F64, T_(offered_tokens_s))},
    {C_("served_tokens_s", 0, "%.3f", F64, T_(served_tokens_s))},
};
/* per tenant, what the fairness targets read */
static const fkv_col fairness_tenant_json[] = {
    {C_("id", 0, "%u", ID, 0)},
    {C_("light", 0, "%s", BOOL, T_(light))},
    {C_("done", 0, "%zu", SZ, T_(n))},
    {C_("ttft", 0, NULL, LAT, T_(ttft))},
    {C_("e2e", 0, NULL, LAT, T_(e2e))},
    {C_("slowdown_mean", 0, "%.6f", F64, T_(slowdown_mean))},
    {C_("isolated_ttft_p99_ms", 0, "%.6f", F64, T_(isolated_ttft_p99_ms)), .miss = FKV_MISS_NEG},
    {C_("isolated_e2e_p99_ms", 0, "%.6f", F64, T_(isolated_e2e_p99_ms)), .miss = FKV_MISS_NEG},
    {C_("prefix_hit_rate", 0, "%.6f", F64, T_(prefix_hit_rate))},
    {C_("partition_hit_rate", 0, "%.6f", F64, T_(partition_hit_rate)), .miss = FKV_MISS_NEG},
};
static const fkv_col spread_json[] = {{C_("tenant_spread", 0, "%.4f", F64, S_(tenant_spread))}};
/* per tenant: latency and memory */
static const fkv_col tenant_json[] = {
    {C_("tenant", 0, "%u", ID, 0)},
    {C_("weight", 0, "%.4f", F64, T_(weight))},
    {C_("share_pages", 0, "%.1f", F64, T_(share_pages))},
    {C_("done", 0, "%zu", SZ, T_(n))},
    {C_("e2e_mean_ms", 0, "%.3f", F64, T_(e2e.mean_ms))},
    {C_("e2e_p99_ms", 0, "%.3f", F64, T_(e2e.p99_ms))},
    {C_("ttft_mean_ms", 0, "%.3f", F64, T_(ttft.mean_ms))},
    {C_("ttft_p99_ms", 0, "%.3f", F64, T_(ttft.p99_ms))},
    {C_("preemptions", 0, "%llu", U64, T_(preemptions))},
    {C_("reclaims", 0, "%llu", U64, T_(reclaims))},
    {C_("reclaimed_pages", 0, NULL, SLOTS, T_(reclaimed_pages))},
};

/* CSV: the scheme's tenant figures, then each tenant's */
static const fkv_col tenants_csv[] = {
    {C_("tenant_spread", 0, ",%.4f", F64, S_(tenant_spread))},
    {C_("jain_slowdown", 0, ",%.6f", F64, S_(jain_slowdown))},
    {C_("max_min_slowdown", 0, ",%.6f", F64, S_(max_min_slowdown))},
    {C_("service_diff_tokens", 0, ",%.3f", F64, S_(service_diff_tokens))},
};
#define CLASS_CSV3(c, cn, lat)                                                         \
    {C_(cn "_" #lat "_mean_ms", 0, ",%.3f", F64, T_(lat.by_class[c].mean_ms))},        \
    {C_(cn "_" #lat "_p50_ms", 0, ",%.3f", F64, T_(lat.by_class[c].p50_ms))},          \
    {C_(cn "_" #lat "_p99_ms", 0, ",%.3f", F64, T_(lat.by_class[c].p99_ms))},
#define CLASS_CSV(c, cn) CLASS_CSV3(c, cn, e2e) CLASS_CSV3(c, cn, ttft)
static const fkv_col tenant_csv[] = {
    {C_("e2e_mean_ms", 0, ",%.3f", F64, T_(e2e.mean_ms))},
    {C_("e2e_p99_ms", 0, ",%.3f", F64, T_(e2e.p99_ms))},
    {C_("ttft_mean_ms", 0, ",%.3f", F64, T_(ttft.mean_ms))},
    {C_("ttft_p99_ms", 0, ",%.3f", F64, T_(ttft.p99_ms))},
    {C_("e2e_p50_ms", 0, ",%.3f", F64, T_(e2e.p50_ms))},
    {C_("ttft_p50_ms", 0, ",%.3f", F64, T_(ttft.p50_ms))},
    {C_("slowdown_mean", 0, ",%.6f", F64, T_(slowdown_mean))},
    {C_("isolated_ttft_p99_ms", 0, ",%.3f", F64, T_(isolated_ttft_p99_ms)), .miss = FKV_MISS_NEG},
    {C_("prefix_hit_rate", 0, ",%.6f", F64, T_(prefix_hit_rate))},
    {C_("partition_hit_rate", 0, ",%.6f", F64, T_(partition_hit_rate)), .miss = FKV_MISS_NEG},
    CLASS_CSV(SHORT, "short") CLASS_CSV(MEDIUM, "medium") CLASS_CSV(LONG, "long")
};

/* CSV: the tiers' hit rates, bytes written and chunks refused */
#define TIER_HIT_CSV(ID, name, below, written, refused) \
    {C_(#name "_hit_rate", 0, ",%.6f", F64, S_(tier_hit_rate[FKV_TIER_##ID]))},
#define TIER_WRITTEN_CSV(ID, name, below, written, refused) TIER_WRITTEN_CSV_##below(written)
#define TIER_WRITTEN_CSV_NONE(written)
#define TIER_WRITTEN_CSV_BELOW(written) {C_(#written, 0, ",%llu", U64, S_(written))},
#define TIER_REFUSED_CSV(ID, name, below, written, refused) TIER_REFUSED_CSV_##below(refused)
#define TIER_REFUSED_CSV_NONE(refused)
#define TIER_REFUSED_CSV_BELOW(refused) {C_(#refused, 0, ",%llu", U64, S_(refused))},
static const fkv_col tiers_csv[] = {
    FKV_TIER_FIELDS(TIER_HIT_CSV) FKV_TIER_FIELDS(TIER_WRITTEN_CSV) FKV_TIER_FIELDS(TIER_REFUSED_CSV)};

static void json_obj(FILE *f, const char *key, const fkv_col *c, size_t nc, const void *row);

/* The K/V precision mix each row can reach and its accuracy on
 * stories260K (accuracy.h): the text table, the fairness table's columns,
 * the JSON "accuracy" object and the CSV columns; "n/m" = not measured. */
#define A_(field) S_(accuracy.field)
static const fkv_col accuracy_cols[] = {
    {C_("kv", 13, " %13s", STR, A_(kv)), .miss = FKV_MISS_NONPOS, .none = "n/m"},
    {C_("hot", 5, " %5.0f", F64, A_(hot)), .miss = FKV_MISS_NEG},
    {C_("KLDmean", 9, " %9.5f", F64, A_(kld_mean)), .miss = FKV_MISS_NEG, .none = "n/m"},
    {C_("KLDp99", 9, " %9.5f", F64, A_(kld_p99)), .miss = FKV_MISS_NEG, .none = "n/m"},
    {C_("top1%", 7, " %7.2f", F64, A_(top1)), .mul = 100, .miss = FKV_MISS_NEG, .none = "n/m"},
    {C_("rule", 10, " %10s", STR, A_(rule))},
};
static const fkv_col fair_accuracy_cols[] = {
    {C_("kv", 13, " %13s", STR, A_(kv)), .miss = FKV_MISS_NONPOS, .none = "n/m"},
    {C_("KLDmean", 9, " %9.5f", F64, A_(kld_mean)), .miss = FKV_MISS_NEG, .none = "n/m"},
    {C_("top1%", 7, " %7.2f", F64, A_(top1)), .mul = 100, .miss = FKV_MISS_NEG, .none = "n/m"},
};
static const fkv_col accuracy_json[] = {
    {C_("kv", 0, "\"%s\"", STR, A_(kv)), .miss = FKV_MISS_NONPOS},
    {C_("hot", 0, "%.0f", F64, A_(hot)), .miss = FKV_MISS_NEG},
    {C_("kld_mean", 0, "%.5f", F64, A_(kld_mean)), .miss = FKV_MISS_NEG},
    {C_("kld_p99", 0, "%.5f", F64, A_(kld_p99)), .miss = FKV_MISS_NEG},
    {C_("top1", 0, "%.4f", F64, A_(top1)), .miss = FKV_MISS_NEG},
    {C_("rule", 0, "\"%s\"", STR, A_(rule))},
    {C_("source", 0, "\"%s\"", STR, A_(source))},
};
static const fkv_col accuracy_csv[] = {
    {C_("accuracy_kv", 0, ",%s", STR, A_(kv_csv)), .miss = FKV_MISS_NONPOS},
    {C_("accuracy_hot", 0, ",%.0f", F64, A_(hot)), .miss = FKV_MISS_NEG},
    {C_("kld_mean", 0, ",%.5f", F64, A_(kld_mean)), .miss = FKV_MISS_NEG},
    {C_("kld_p99", 0, ",%.5f", F64, A_(kld_p99)), .miss = FKV_MISS_NEG},
    {C_("top1", 0, ",%.4f", F64, A_(top1)), .miss = FKV_MISS_NEG},
};

void fkv_report_accuracy_json(FILE *f, const fkv_scheme_summary *x)
{
    json_obj(f, "accuracy", accuracy_json, FKV_NCOLS(accuracy_json), x);
}

void fkv_report_accuracy_text(FILE *f, const fkv_scheme_summary *x)
{
    if (x) fkv_cols_text_row(f, fair_accuracy_cols, FKV_NCOLS(fair_accuracy_cols), x, 0);
    else fkv_cols_text_head(f, fair_accuracy_cols, FKV_NCOLS(fair_accuracy_cols));
}

/* A table's header line after the scheme column. */
static void text_head(FILE *f, int w, const fkv_col *c, size_t nc)
{
    fprintf(f, "%-*s", w, "scheme");
    fkv_cols_text_head(f, c, nc);
    fputc('\n', f);
}

/* One row per scheme. */
static void text_rows(FILE *f, int w, const fkv_col *c, size_t nc, const fkv_scheme_summary *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%-*s", w, s[i].name);
        fkv_cols_text_row(f, c, nc, &s[i], 0);
        fputc('\n', f);
    }
}

/* One row per scheme and tenant. */
static void tenant_rows(FILE *f, int w, const fkv_col *c, size_t nc, const fkv_scheme_summary *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = 1; t <= s[i].n_tenants; t++) {
            fprintf(f, "%-*s", w, s[i].name);
            fkv_cols_text_row(f, c, nc, &s[i].tenants[t], t);
            fputc('\n', f);
        }
}

/* Per-tenant latency, hit rates and reclaim, after the main tables
 * (tenants only). */
static void tenant_text(FILE *f, const fkv_scheme_summary *s, size_t n)
{
    if (!n || !s[0].n_tenants) return;
    int w = name_width(s, n);
    fprintf(f, "\nper tenant: end-to-end and first-token latency (ms); iso = the isolated scheme's (the tenant alone)\n");
    text_head(f, w, tenant_lat_cols, FKV_NCOLS(tenant_lat_cols));
    tenant_rows(f, w, tenant_lat_cols, FKV_NCOLS(tenant_lat_cols), s, n);
    fprintf(f, "per class and tenant (mean, P50, P99 of e2e and TTFT): --format json or csv\n");
    fprintf(f, "\nper tenant: memory; pfx%% = its prompt tokens found in the prefix cache at admission, part%% = the "
               "same on a static 1/n partition of the cache (its requests alone there), pages reclaimed by action\n");
    text_head(f, w, tenant_mem_cols, FKV_NCOLS(tenant_mem_cols));
    tenant_rows(f, w, tenant_mem_cols, FKV_NCOLS(tenant_mem_cols), s, n);
    fprintf(f, "share = the tenant's fair share of the pool at the end (pages); spread = largest / smallest tenant "
               "mean:");
    for (size_t i = 0; i < n; i++) fprintf(f, " %s %.2f", s[i].name, s[i].tenant_spread);
    fprintf(f, "\n");
    if (s[0].share_capacity_tok_s > 0) {
        fprintf(f, "\nper tenant: share of service (prompt + output tokens/s over the window from the first "
                   "arrival to the last); fair = its weighted max-min fair share of the capacity given the offered "
                   "loads; within = offered <= fair; attained = served / min(offered, fair)\n");
        text_head(f, w, tenant_share_cols, FKV_NCOLS(tenant_share_cols));
        tenant_rows(f, w, tenant_share_cols, FKV_NCOLS(tenant_share_cols), s, n);
        fprintf(f, "capacity (tokens/s) = the saturation throughput %.1f, or the scheme's own served total when "
                   "larger:", s[0].share_saturation_tok_s);
        for (size_t i = 0; i < n; i++) fprintf(f, " %s %.1f", s[i].name, s[i].share_capacity_tok_s);
        fprintf(f, "\n");
    }
    if (!s[0].slowdown_mean) return;
    fprintf(f, "\nslowdown = e2e / e2e alone on an idle system; per tenant (mean), then Jain's index and max/min over "
               "the tenants' means; service diff = VTC's largest gap in weighted tokens served between two "
               "backlogged tenants\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%-*s", w, s[i].name);
        fkv_cols_text_row(f, slowdown_text_cols, FKV_NCOLS(slowdown_text_cols), &s[i], 0);
        for (uint32_t t = 1; t <= s[i].n_tenants; t++) fprintf(f, " t%u %.3f", t, s[i].tenants[t].slowdown_mean);
        fkv_cols_text_row(f, slowdown_tail_cols, FKV_NCOLS(slowdown_tail_cols), &s[i], 0);
        fputc('\n', f);
    }
}

/* The tiers tables, only in runs with a host or remote tier (so a run
 * without them prints what it printed before). */
static void tiers_text(FILE *f, const fkv_scheme_summary *s, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= s[i].tiered;
    if (!any) return;
    int w = name_width(s, n);
    fprintf(f, "\nprefix hits by tier (%% of prompt tokens, at first admission) and first-token latency (ms)\n");
    text_head(f, w, tier_hit_cols, FKV_NCOLS(tier_hit_cols));
    text_rows(f, w, tier_hit_cols, FKV_NCOLS(tier_hit_cols), s, n);
    fprintf(f, "net tokens: K/V tokens fetched from the remote tier (whole chunks)\n");
    fprintf(f, "\nwritten below the device (GB) and chunks the admission filter refused\n");
    text_head(f, w, tier_below_cols, FKV_NCOLS(tier_below_cols));
    text_rows(f, w, tier_below_cols, FKV_NCOLS(tier_below_cols), s, n);
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
    text_head(f, w, main_cols, FKV_NCOLS(main_cols));
    text_rows(f, w, main_cols, FKV_NCOLS(main_cols), s, n);
    fprintf(f, "short/long/medium: class means; fair = std(lru) / std(scheme); hit%% = prompt tokens found in the "
               "prefix cache at admission / prompt tokens (vLLM's prefix_cache_hits / prefix_cache_queries); "
               "ctxread%% = context tokens read from the cache / (those + recomputed or reloaded); recompute: "
               "tokens computed again after eviction or preemption; thr = output tokens/s over lru's\n");
    fprintf(f, "\nper class P99 (ms) and first-token / per-output-token latency (ms)\n");
    text_head(f, w, class_cols, FKV_NCOLS(class_cols));
    text_rows(f, w, class_cols, FKV_NCOLS(class_cols), s, n);
    fprintf(f, "rej = requests larger than the cache\n");
    fprintf(f, "\nK/V precision each row can reach, and its accuracy on stories260K against fp32 K/V "
               "(fairkv model eval)\n");
    text_head(f, w, accuracy_cols, FKV_NCOLS(accuracy_cols));
    text_rows(f, w, accuracy_cols, FKV_NCOLS(accuracy_cols), s, n);
    fprintf(f, "kv: the deepest precision mix of the row's configuration; hot: tokens at full precision; KLD: "
               "mean and P99 KL divergence (nats) of the next-token distribution; top1%%: argmax agreement; rule: "
               "exact (every token so), always (--quant always), worst case (under pressure or by reclaim); "
               "n/m: not measured (docs/EVALUATION.md, \"Accuracy beside every row\")\n");
    tiers_text(f, s, n);
    min_bound_text(f, m);
    tenant_text(f, s, n);
    fprintf(f, "\nseed table 4.2 for comparison: LRU 142/623/89/412, F-LRU 128/287/112/156, "
               "dynamic chunking 117/203/105/132 (mean/P99/short/long ms)\n");
}

/* The worst light tenant's first-token P99 and its ratio to the isolated
 * run's, and the worst heavy tenant's. */
static struct fair_row fair_row_of(const fkv_scheme_summary *x)
{
    struct fair_row r = {-1, -1, -1};
    for (uint32_t t = 1; t <= x->n_tenants; t++) {
        const struct fkv_tenant_summary *y = &x->tenants[t];
        if (!y->n) continue;
        if (!y->light) {
            if (y->ttft.p99_ms > r.heavy) r.heavy = y->ttft.p99_ms;
            continue;
        }
        if (y->ttft.p99_ms > r.light) r.light = y->ttft.p99_ms;
        if (y->isolated_ttft_p99_ms > 0 && y->ttft.p99_ms / y->isolated_ttft_p99_ms > r.ratio)
            r.ratio = y->ttft.p99_ms / y->isolated_ttft_p99_ms;
    }
    return r;
}

void fkv_report_fairness_text(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n)
{
    meta_line(f, m);
    int w = name_width(s, n);
    fprintf(f, "\nfairness: first-token P99 of the worst light and heavy tenant (ms), the light one's over its "
               "P99 alone (iso)\n");
    fprintf(f, "%-*s", w, "scheme");
    fkv_cols_text_head(f, fair_cols, FKV_NCOLS(fair_cols));
    fkv_cols_text_head(f, fair_scheme_cols, FKV_NCOLS(fair_scheme_cols));
    fkv_cols_text_head(f, fair_accuracy_cols, FKV_NCOLS(fair_accuracy_cols));
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        struct fair_row r = fair_row_of(&s[i]);
        fprintf(f, "%-*s", w, s[i].name);
        fkv_cols_text_row(f, fair_cols, FKV_NCOLS(fair_cols), &r, 0);
        fkv_cols_text_row(f, fair_scheme_cols, FKV_NCOLS(fair_scheme_cols), &s[i], 0);
        fkv_cols_text_row(f, fair_accuracy_cols, FKV_NCOLS(fair_accuracy_cols), &s[i], 0);
        fputc('\n', f);
    }
    fprintf(f, "x iso: the largest light tenant's P99 TTFT over its own in the isolated run; Jain and max/min: over "
               "the tenants' mean slowdowns; svc diff: VTC's service difference (tokens); thr: output tokens/s over "
               "lru's; kv, KLDmean, top1%%: the deepest K/V precision the row can reach and its accuracy on "
               "stories260K against fp32 (n/m: not measured)\n");
}

/* ,"key":{pairs} */
static void json_obj(FILE *f, const char *key, const fkv_col *c, size_t nc, const void *row)
{
    fprintf(f, ",\"%s\":{", key);
    fkv_cols_json(f, c, nc, row, 0, 0);
    fputc('}', f);
}

/* "fairness": the slowdown indices, the service difference, and per
 * tenant what the fairness targets read. */
static void json_fairness(FILE *f, const fkv_scheme_summary *x)
{
    fprintf(f, ",\"fairness\":{");
    fkv_cols_json(f, fairness_json, FKV_NCOLS(fairness_json), x, 0, 0);
    fprintf(f, ",\"tenants\":[");
    for (uint32_t t = 1; t <= x->n_tenants; t++) {
        fprintf(f, "%s{", t > 1 ? "," : "");
        fkv_cols_json(f, fairness_tenant_json, FKV_NCOLS(fairness_tenant_json), &x->tenants[t], t, 0);
        json_obj(f, "share", share_json, FKV_NCOLS(share_json), &x->tenants[t]);
        fputc('}', f);
    }
    fprintf(f, "]}");
}

/* The scheme's flat figures, in the list's order (result_fields.h, json 1):
 * each ,"name":value; a latency distribution as fkv_json_lat's object. */
#define JSON_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) JSON_##json(kind, name, fmt)
#define JSON_0(kind, name, fmt)
#define JSON_1(kind, name, fmt) JSON_PUT_##kind(name, fmt)
#define JSON_PUT_F64(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_SZ(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_U64(name, fmt) fprintf(f, ",\"" #name "\":" fmt, (unsigned long long)x->name);
#define JSON_PUT_U32(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_INT(name, fmt) fprintf(f, ",\"" #name "\":" fmt, x->name);
#define JSON_PUT_NS(name, fmt) fprintf(f, ",\"" #name "\":" fmt, (long long)x->name);
#define JSON_PUT_LAT(name, cols) fputc(',', f), fkv_json_lat(f, #name, &x->name);

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
        if (x->tiered) {
            json_obj(f, "tiers", tier_hit_json, FKV_NCOLS(tier_hit_json), x);
            fkv_cols_json(f, remote_fetched_json, FKV_NCOLS(remote_fetched_json), x, 0, 1);
            json_obj(f, "written_bytes", tier_written_json, FKV_NCOLS(tier_written_json), x);
            json_obj(f, "refused_chunks", tier_refused_json, FKV_NCOLS(tier_refused_json), x);
        }
        if (x->slowdown_mean) json_obj(f, "slowdown", slowdown_json, FKV_NCOLS(slowdown_json), x);
        if (x->n_tenants) {
            json_fairness(f, x);
            fkv_cols_json(f, spread_json, FKV_NCOLS(spread_json), x, 0, 1);
            fprintf(f, ",\"tenants\":[");
            for (uint32_t t = 1; t <= x->n_tenants; t++) {
                fprintf(f, "%s{", t > 1 ? "," : "");
                fkv_cols_json(f, tenant_json, FKV_NCOLS(tenant_json), &x->tenants[t], t, 0);
                json_obj(f, "share", share_json, FKV_NCOLS(share_json), &x->tenants[t]);
                fputc('}', f);
            }
            fprintf(f, "]");
        }
        fkv_report_accuracy_json(f, x);
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
    if (header && n && s[0].n_tenants) {
        fkv_cols_csv_head(f, tenants_csv, FKV_NCOLS(tenants_csv), 0);
        for (uint32_t t = 1; t <= s[0].n_tenants; t++) fkv_cols_csv_head(f, tenant_csv, FKV_NCOLS(tenant_csv), t);
    }
    if (header && n && s[0].tiered) fkv_cols_csv_head(f, tiers_csv, FKV_NCOLS(tiers_csv), 0);
    if (header) fkv_cols_csv_head(f, accuracy_csv, FKV_NCOLS(accuracy_csv), 0);
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
            fkv_cols_csv_row(f, tenants_csv, FKV_NCOLS(tenants_csv), x);
            for (uint32_t t = 1; t <= x->n_tenants; t++)
                fkv_cols_csv_row(f, tenant_csv, FKV_NCOLS(tenant_csv), &x->tenants[t]);
        }
        if (x->tiered) fkv_cols_csv_row(f, tiers_csv, FKV_NCOLS(tiers_csv), x);
        fkv_cols_csv_row(f, accuracy_csv, FKV_NCOLS(accuracy_csv), x);
        fputc('\n', f);
    }
}
