/* The simulator's two tables: the options (src/sim/bench_opts.c) and the
 * result figures (src/sim/result_fields.h).
 *
 * Options: every option --help names is one the parser takes; numbers obey
 * their row's range at its ends (open or closed), whole-number rule, scale
 * and "given" flag; choices, flags and a missing value.  Figures: each
 * figure lands under its own CSV column and JSON key, in the order the
 * reports have always had (the keys' order is part of the output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sim/bench.h"

/* fkv_bench_parse_opt on "opt [v]" into o, stderr silenced; its result,
 * and in last_taken how many arguments after opt it took. */
static int last_taken;

static int parse(fkv_bench_opts *o, const char *opt, const char *v)
{
    char a[64], b[64];
    snprintf(a, sizeof a, "%s", opt);
    snprintf(b, sizeof b, "%s", v ? v : "");
    char *argv[2] = {a, b};
    int i = 0;
    fflush(stderr);
    int saved = dup(2);
    FILE *null = fopen("/dev/null", "w");
    if (saved >= 0 && null) dup2(fileno(null), 2);
    int r = fkv_bench_parse_opt(o, v ? 2 : 1, argv, &i);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (null) fclose(null);
    last_taken = i;
    return r;
}

/* the bench options --help names outside the option column too */
static int not_bench_option(const char *name)
{
    static const char *const other[] = {"--calibrate", "--calibrate-log", "--help", "--step-log",
                                        "--kv-cache-dtype"};
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++)
        if (!strcmp(name, other[k])) return 1;
    return 0;
}

static void help_options_parse(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    fkv_bench_usage(f);
    fclose(f);
    int seen = 0;
    for (const char *p = strstr(text, "--"); p; p = strstr(p, "--")) {
        size_t n = 2;
        while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || p[n] == '-') n++;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        p += n;
        if (n <= 2 || not_bench_option(name)) continue;
        fkv_bench_opts o;
        fkv_bench_opts_default(&o);
        /* a value that no number or choice takes: known options say 1 or -1 */
        int r = parse(&o, name, "?");
        CHECKF(r != 0, "--help names %s, which the parser does not know", name);
        seen++;
    }
    /* each option row's help: a missing table would leave nothing to walk */
    CHECKF(seen >= 60, "%d option names in --help", seen);
    CHECK(strstr(text, "  --frontier-tol X         the bisection's resolution") != NULL);
    CHECK(strstr(text, "within 5% of oracle-memory") != NULL);
    free(text);
}

static void ranges(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    /* (0.05, 64]: the low end open, the high end closed */
    CHECK(parse(&o, "--frontier-max", "0.05") == -1);
    CHECK(parse(&o, "--frontier-max", "64") == 1 && o.frontier_max == 64);
    CHECK(parse(&o, "--frontier-max", "64.01") == -1);
    /* [0.0001, 0.5]: both closed */
    CHECK(parse(&o, "--frontier-tol", "0.0001") == 1 && o.frontier_tol == 0.0001);
    CHECK(parse(&o, "--frontier-tol", "0.5") == 1 && o.frontier_tol == 0.5);
    CHECK(parse(&o, "--frontier-tol", "0.50001") == -1);
    CHECK(parse(&o, "--tenant-step-share", "0") == -1);
    CHECK(parse(&o, "--tenant-step-share", "1") == 1 && o.sim.tenant_step_share == 1);
    /* whole numbers, and the "given" flag only when taken */
    CHECK(parse(&o, "--requests", "1.5") == -1 && !o.requests_set);
    CHECK(parse(&o, "--requests", "1e8") == 1 && o.requests == 100000000 && o.requests_set);
    CHECK(parse(&o, "--requests", "100000001") == -1);
    CHECK(parse(&o, "--tenants", "16") == 1 && o.sim.n_tenants == 16 && o.tenants_set);
    CHECK(parse(&o, "--tenants", "17") == -1);
    CHECK(parse(&o, "--max-batch-tokens", "100") == 1 && o.sim.sched.max_batch_tokens == 100 &&
          o.sim.batch_tokens_set);
    CHECK(parse(&o, "--clients", "0") == -1 && !o.clients_set);
    /* --quant-hot is not whole-only: truncated */
    CHECK(parse(&o, "--quant-hot", "64.7") == 1 && o.sim.quant_hot == 64);
    /* scales: GB to bytes, ms to ns (rounded), GB/s to bytes/s */
    CHECK(parse(&o, "--host-gb", "2.5") == 1 && o.sim.host_capacity_bytes == 2500000000ULL);
    CHECK(parse(&o, "--remote-latency-ms", "0.5") == 1 && o.sim.remote_latency_ns == 500000);
    CHECK(parse(&o, "--remote-gbps", "3") == 1 && o.sim.remote_bytes_per_s == 3e9);
    CHECK(parse(&o, "--batch-window-ms", "20") == 1 && o.sim.sched.batch_window_ns == 20000000);
    CHECK(parse(&o, "--seed", "7") == 1 && o.seed == 7);
    CHECK(parse(&o, "--seed", "-1") == -1);
    CHECK(parse(&o, "--alpha", "inf") == -1 && parse(&o, "--alpha", "nan") == -1);
}

static void choices_and_flags(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    CHECK(parse(&o, "--batching", "dynamic") == 1 && o.sim.sched.mode == FKV_SCHED_DYNAMIC);
    CHECK(parse(&o, "--batching", "static") == -1);
    CHECK(parse(&o, "--quant", "under-pressure") == 1 && o.sim.quant == FKV_QUANT_UNDER_PRESSURE);
    CHECK(parse(&o, "--quant-dtype", "int4") == 1 && o.sim.quant_dtype == FKV_INT4);
    CHECK(parse(&o, "--quotas", "tenant") == 1 && o.sim.quotas == FKV_QUOTA_TENANT);
    CHECK(parse(&o, "--miss", "reload") == 1 && o.sim.sched.miss == FKV_MISS_RELOAD);
    CHECK(parse(&o, "--admission", "vtc") == 1 && o.sim.sched.admission == FKV_ADMIT_VTC);
    CHECK(parse(&o, "--format", "csv") == 1 && !strcmp(o.format, "csv"));
    CHECK(parse(&o, "--format", "xml") == -1);
    CHECK(parse(&o, "--workload", "chat") == 1 && !strcmp(o.workload, "chat"));
    CHECK(parse(&o, "--no-chunked-prefill", NULL) == 1 && o.sim.sched.chunked_prefill == 0);
    /* a flag leaves the next argument alone; an option with a value takes it */
    CHECK(parse(&o, "--quiet", "--seed") == 1 && last_taken == 0 && o.quiet == 1);
    CHECK(parse(&o, "--seed", "3") == 1 && last_taken == 1);
    CHECK(parse(&o, "--private-prefix", NULL) == 1 && o.sim.sched.publish_shared == 0);
    CHECK(parse(&o, "--host-demote", NULL) == 1 && o.sim.host_demote == 1);
    CHECK(parse(&o, "--native", NULL) == 1 && o.load_lo == -1 && o.load_hi == -1);
    CHECK(parse(&o, "--load", "0.5:0.9:0.2") == 1 && o.load_lo == 0.5 && o.load_hi == 0.9);
    CHECK(parse(&o, "--tenant-assign", "heavy:0.7") == 1 && o.tenant_assign == FKV_ASSIGN_HEAVY &&
          o.heavy_frac == 0.7 && o.tenant_assign_set);
    CHECK(parse(&o, "--reclaim", "quantize8,evict") == 1 && o.sim.sched.n_reclaim == 2 && o.sim.reclaim_set);
    CHECK(parse(&o, "--trace", "x.csv") == 1 && !strcmp(o.trace, "x.csv"));
    /* a value missing, an option unknown */
    CHECK(parse(&o, "--tenants", NULL) == -1);
    CHECK(parse(&o, "--no-such-option", "1") == 0);
}

/* One summary with a distinct value per figure, written as CSV: the value
 * under each column's name. */
static const char *csv_field(char *header, char *row, const char *column, char *out, size_t cap)
{
    char *hs, *rs;
    char *h = strtok_r(header, ",", &hs), *r = strtok_r(row, ",", &rs);
    while (h && r) {
        if (!strcmp(h, column)) {
            snprintf(out, cap, "%s", r);
            return out;
        }
        h = strtok_r(NULL, ",", &hs);
        r = strtok_r(NULL, ",", &rs);
    }
    return NULL;
}

static char *report(const fkv_scheme_summary *s, int json)
{
    fkv_report_meta m = {.workload = "w", .load = 0.5, .requests = 1, .profile = "p", .capacity_rule = "r",
                         .admission = "fcfs", .batching = "continuous"};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    if (json) fkv_report_json(f, &m, s, 1);
    else fkv_report_csv(f, &m, s, 1, 1);
    fclose(f);
    return text;
}

static void figures(void)
{
    fkv_scheme_summary s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "x");
    s.prefix_hit_rate = 0.125;
    s.context_read_rate = 0.25;
    s.fairness_gain = 1.5;
    s.throughput_rel_lru = 0.75;
    s.recomputed_tokens = 11;
    s.reloaded_tokens = 12;
    s.preemptions = 13;
    s.evicted_pages = 14;
    s.done = 15;
    s.rejected = 16;
    s.throughput_tok_s = 17.5;
    s.steps = 18;
    s.max_step_tokens = 19;
    s.e2e.mean_ms = 21;
    s.e2e.by_class[FKV_CLASS_MEDIUM].p99_ms = 22;
    s.e2e.by_class[FKV_CLASS_LONG].p99_ms = 23;
    s.ttft.by_class[FKV_CLASS_LONG].mean_ms = 24;
    s.tpot.p99_ms = 25;
    char *csv = report(&s, 0);
    char *nl = strchr(csv, '\n');
    REQUIRE(nl);
    *nl = 0;
    char *line = nl + 1;
    line[strcspn(line, "\n")] = 0;
    static const struct {
        const char *column, *value;
    } want[] = {{"scheme", "x"},
                {"prefix_hit_rate", "0.125000"},
                {"context_read_rate", "0.250000"},
                {"fairness_gain", "1.5000"},
                {"e2e_mean_ms", "21.000"},
                {"e2e_medium_p99_ms", "22.000"},
                {"e2e_long_p99_ms", "23.000"},
                {"ttft_long_mean_ms", "24.000"},
                {"tpot_p99_ms", "25.000"},
                {"recomputed_tokens", "11"},
                {"preemptions", "13"},
                {"done", "15"},
                {"rejected", "16"},
                {"throughput_tok_s", "17.500"},
                {"throughput_rel_lru", "0.750000"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        char h[4096], r[4096], v[64];
        snprintf(h, sizeof h, "%s", csv);
        snprintf(r, sizeof r, "%s", line);
        const char *got = csv_field(h, r, want[k].column, v, sizeof v);
        CHECKF(got && !strcmp(got, want[k].value), "CSV %s: %s, want %s", want[k].column, got ? got : "(none)",
               want[k].value);
    }
    /* the header has as many columns as the row */
    size_t ch = 0, cr = 0;
    for (const char *p = csv; *p; p++) ch += *p == ',';
    for (const char *p = line; *p && *p != '\n'; p++) cr += *p == ',';
    /* 31, then the accuracy columns (src/sim/accuracy.h) at the end */
    CHECKF(ch == cr && ch == 36, "CSV: %zu header commas, %zu row commas", ch, cr);
    free(csv);

    /* JSON: the scheme's keys in their published order, each value its own */
    char *json = report(&s, 1);
    static const char *const keys[] = {
        "\"name\":\"x\"",          "\"prefix_hit_rate\":0.125000", "\"context_read_rate\":0.250000",
        "\"cache_hit_rate\":",     "\"cache_prefix_hit_rate\":",   "\"fairness_gain\":1.5000",
        "\"throughput_rel_lru\":0.750000", "\"e2e\":{\"n\":0,\"mean_ms\":21.000", "\"ttft\":{",
        "\"tpot\":{",              "\"recomputed_tokens\":11",     "\"reloaded_tokens\":12",
        "\"preemptions\":13",      "\"evicted_pages\":14",         "\"done\":15",
        "\"rejected\":16",         "\"throughput_tok_s\":17.500",  "\"throughput_req_s\":",
        "\"makespan_s\":",         "\"steps\":18",                 "\"max_step_tokens\":19,\"accuracy\":{"};
    const char *at = json;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *p = strstr(at, keys[k]);
        CHECKF(p != NULL, "JSON: %s missing or out of order", keys[k]);
        if (p) at = p + strlen(keys[k]);
    }
    free(json);
}

int main(void)
{
    help_options_parse();
    ranges();
    choices_and_flags();
    figures();
    return check_done();
}
