/* Options, workload preparation and the capacity rule of the bench tools.
 *
 * Load: offered load = arrival rate / saturation throughput, where the
 * saturation throughput (requests/s) is measured by simulating the same
 * requests all arriving at once with unlimited KV memory on the same cost
 * profile and scheduler.  Load 1.0 offers exactly what the server can finish.
 *
 * Capacity rule (memory pressure), fixed before any policy is compared and
 * the same for every scheme: capacity = cap_frac (default 0.75) x the peak
 * live KV demand, i.e. the largest number of tokens held at once by open
 * requests when memory is unlimited, at the highest load of the run; raised
 * if needed to the largest single request plus one 256-token chunk, so that
 * every request fits alone; and never above the GPUs' memory left after the
 * fp16 weights (80 GB per GPU x tp - 2 bytes x parameters).  0.75 makes memory short during bursts, not all
 * the time: at 0.5 the seed workload's effective throughput falls below its
 * arrival rate and every scheme's latency is set by an ever-growing queue.
 */
#include "sim/bench.h"
#include "sim/frontier.h"
#include "sim/min_bound.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

void fkv_bench_opts_default(fkv_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->workload = "seed";
    o->trace_format = FKV_TRACE_AUTO;
    o->requests = 2000;
    o->load_lo = o->load_hi = 0.8;
    o->load_step = 0;
    o->time_scale = 1.0;
    o->profile = "a100-llama2-7b";
    o->cap_frac = 0.75;
    o->frontier_tol = 0.01;
    o->frontier_max = 1.0;
    o->seed = 42;
    fkv_sim_config_default(&o->sim);
    o->sim.sched.n_clients = 4;
    o->format = "text";
}

void fkv_bench_usage(FILE *f)
{
    size_t n;
    const fkv_scheme *s = fkv_scheme_list(&n);
    fprintf(f,
            "calibration (bench only): --calibrate MODEL.gguf | --calibrate-log STEPLOG[,STEPLOG...]\n"
            "                           fit the engine's step times (alone, or from `fairkv serve --step-log`)\n"
            "                           to a cost profile (see cpu-tiny; --calibrate --help for options)\n"
            "workload:\n"
            "  --workload W             seed: the seed's 60/30/10 short/medium/long mix (default);\n"
            "                           tenants: 4 light tenants and 2 heavy long-prompt ones; tenants-alike:\n"
            "                           the same requests, tenants uniform; chat: multi-turn sessions of 4\n"
            "                           tenants (docs/EVALUATION.md, \"Fairness workloads\"); these name\n"
            "                           their requests' tenants, so --tenants must match and --tenant-assign\n"
            "                           is refused\n"
            "  --trace FILE             Azure CSV, Mooncake JSONL or plain CSV (recognized from the file)\n"
            "  --trace-format F         auto|azure|mooncake|plain (plain: a header line\n"
            "                           'arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]]',\n"
            "                           then one request per line; '#' starts a comment line; shared_tokens\n"
            "                           leading prompt tokens are common to the client's requests)\n"
            "  --requests N             seed: requests to generate (2000); trace: keep the first N (0 = all)\n"
            "  --load X | A:B:STEP      offered load (arrival rate / saturation throughput), 0.8; a range sweeps\n"
            "  --native                 trace: keep the trace's own timing (times --time-scale)\n"
            "  --time-scale S           multiply trace arrival times by S\n"
            "  --seed N                 RNG seed (42)\n"
            "  --clients K              clients for VTC admission (4; in tenant runs the tenants, unless given)\n"
            "tenants (docs/ARCHITECTURE.md, \"Tenants\"):\n"
            "  --tenants N              tenants 1..N (0 = none: every request anonymous; at most 16)\n");
    /* split: one literal would pass the 4095 characters C compilers must take */
    fprintf(f,
            "  --tenant-weights W1,W2,...  one weight per tenant (1 each)\n"
            "  --tenant-assign client|roundrobin|heavy:F|session   tenant of a request: 1 + client mod N\n"
            "                           (default), 1 + index mod N, tenant 1 for a fraction F, the rest\n"
            "                           round-robin, or its session's: 1 + XXH64(key) mod N, the key being a\n"
            "                           Mooncake request's first hash_id (first 512-token prompt block) or a\n"
            "                           plain trace's client; Azure traces and generated workloads have no\n"
            "                           sessions and are refused\n"
            "  --quotas off|request|tenant   the cache's fair shares for every scheme (default: the scheme's)\n"
            "  --victim last-started|fewest-output|fair   preemption victim for every scheme\n"
            "  --reclaim A,B,...        fair reclaim before preemption for every scheme: quantize8, quantize4,\n"
            "                           offload, drop, evict (none = preempt at once; default: the scheme's)\n"
            "  --host-gb G              host tier for offloaded chunks (0: offload frees nothing)\n"
            "  --host-demote            idle chunks the device evicts go down to the host tier (needs --host-gb or --host-x)\n"
            "  --host-x X               host tier of X times the device's KV bytes (instead of --host-gb)\n"
            "  --tier-admission off|tinylfu|seen   what goes below the device (host demotions, remote\n"
            "                           write-back): everything (off); with the tier full, chunks seen at least\n"
            "                           as often as the one they push out (tinylfu); chunks seen twice (seen)\n"
            "  --remote-gb G            remote tier below the host: a shared store of G GB, LRU, per-tenant\n"
            "                           namespaces, written back at request end, read at admission\n"
            "  --remote-gbps B          its network bandwidth, GB/s (12.5: one 100 Gb/s link)\n"
            "  --remote-latency-ms L    one round trip per request that reads it (0.5)\n"
            "  --vtc-mem W              VTC pays W per token-second of KV held (0)\n"
            "  --tenant-step-share F    one tenant's prefill share of a step while others wait (1 = off)\n"
            "  --step-share off|drr     drr: the step's prefill budget shared by tenants, weighted deficit\n"
            "                           round robin after decodes (replaces --tenant-step-share)\n"
            "  --private-prefix         shared_tokens matched within a tenant only (default: public)\n");
    /* two literals: one would pass the 4095 characters C compilers must take */
    fprintf(f,
            "system:\n"
            "  --profile NAME           cost profile (a100-llama2-7b; see below)\n"
            "  --step-coeffs C0,C1,C2[,C3]  replace the profile's step cost by the fitted form of\n"
            "                           --calibrate: C0 ms a step + C1 ms a token + C2 ms a unit of\n"
            "                           attention work [+ C3 ms a request]\n"
            "  --capacity-frac F        KV capacity = F x peak live demand (0.75)\n"
            "  --capacity-tokens N | --capacity-gb G   fixed KV capacity instead\n");
    /* two strings: one would pass the 4095 characters C guarantees */
    fprintf(f,
            "  --frontier               per scheme, the smallest capacity (fraction of peak live demand, by\n"
            "                           bisection in [0.05, 1]) at which mean, P99 and short-class P99 e2e\n"
            "                           latency stay within 5%% of oracle-memory; one load, no fixed capacity\n"
            "  --frontier-tol X         the bisection's resolution, a fraction of peak (0.01)\n"
            "  --min-bound              also MIN's prefix hit rate at the device's size, device + host, and all\n"
            "                           tiers: what no policy at those sizes exceeds (docs/EVALUATION.md 3c)\n"
            "  --frontier-max X         the search's top, a fraction of peak (1.0; reuse of finished requests'\n"
            "                           prefixes can need more than the peak live demand)\n"
            "  --max-batch-tokens N     token budget per step (2048; vllm rows: vLLM's default for the\n"
            "                           profile's GPU, 8192 on H100)\n"
            "  --max-running N          running requests (256; vllm rows: 1024 on H100)\n"
            "  --no-chunked-prefill     a prompt runs whole\n"
            "  --batching continuous|dynamic   --batch-window-ms W (50)\n"
            "  --admission fcfs|vtc     --miss recompute|reload (host tier over PCIe)\n"
            "  --alpha A --beta B       F-LRU weights (library defaults 0.7, 0.3)\n"
            "  --temperature T          quota temperature   --min-retention-ms M\n"
            "  --quant off|always|under-pressure   cold-chunk quantization (off)\n"
            "  --quant-dtype int8|int4  --quant-hot N (tokens kept full precision, 128)\n"
            "  --quant-warm N           precision ladder: int8 for N tokens past the hot ones, then int4 (0: off)\n"
            "  --price-kv-bytes         attention's memory time by the bytes each request's K/V take at their\n"
            "                           stored precisions, codes and scales (vllm-fp8: half); default: fp16 bytes\n"
            "output:\n"
            "  --schemes a,b,...        schemes to run (default all)\n"
            "  --format text|json|csv   --output FILE   --plot DIR   --quiet\n"
            "schemes:\n");
    for (size_t i = 0; i < n; i++) fprintf(f, "  %-13s %s\n", s[i].name, s[i].what);
    fprintf(f, "profiles:");
    for (const char *const *p = fkv_profile_names(); *p; p++) fprintf(f, " %s", *p);
    fprintf(f, "\n");
}

static int bad(const char *opt, const char *v)
{
    fprintf(stderr, "fairkv: bad value for %s: '%s'\n", opt, v ? v : "(missing)");
    return -1;
}

static int bad_why(const char *opt, const char *v, const char *why)
{
    fprintf(stderr, "fairkv: bad value for %s: '%s': %s\n", opt, v, why);
    return -1;
}

/* "w1,w2,..." -> weights in (0, 1e9]; -1 with why[]. */
static int parse_weights(const char *v, double *w, uint32_t *n, char *why, size_t whylen)
{
    *n = 0;
    const char *p = v;
    for (;;) {
        if (*n == FKV_SIM_MAX_TENANTS) {
            snprintf(why, whylen, "more than %d weights", FKV_SIM_MAX_TENANTS);
            return -1;
        }
        char *e;
        errno = 0;
        double x = strtod(p, &e);
        if (e == p || errno || (*e && *e != ',') || !(x > 0 && x <= 1e9)) {
            snprintf(why, whylen, "weight %u is not a number in (0, 1e9]", *n + 1);
            return -1;
        }
        w[(*n)++] = x;
        if (!*e) return 0;
        p = e + 1;
    }
}

static int num(const char *s, double *out)
{
    char *e;
    double v = strtod(s, &e);
    if (e == s || *e || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int range(const char *s, double *lo, double *hi, double *step)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *a = buf, *b = strchr(a, ':');
    if (!b) {
        if (num(a, lo)) return -1;
        *hi = *lo;
        *step = 0;
        return 0;
    }
    *b++ = 0;
    char *c = strchr(b, ':');
    if (!c) return -1;
    *c++ = 0;
    if (num(a, lo) || num(b, hi) || num(c, step) || *step <= 0 || *hi < *lo) return -1;
    return 0;
}

int fkv_bench_parse_coeffs(const char *v, double *c, size_t *n, char *why, size_t whylen)
{
    *n = 0;
    const char *p = v;
    for (;;) {
        if (*n == 4) {
            snprintf(why, whylen, "more than 4 values");
            return -1;
        }
        char *e;
        errno = 0;
        double x = strtod(p, &e);
        /* trailing white space ends the list (a file's last newline) */
        const char *t = e;
        while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') t++;
        if (!*t) e = (char *)t;
        if (e == p || errno || (*e && *e != ',')) {
            snprintf(why, whylen, "value %zu is not a number", *n + 1);
            return -1;
        }
        c[(*n)++] = x;
        if (!*e) break;
        p = e + 1;
    }
    return fkv_profile_check_coeffs(c, *n, why, whylen) ? -1 : 0;
}

int fkv_bench_parse_opt(fkv_bench_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
#define TAKE()                      \
    do {                            \
        if (!v) return bad(a, v);   \
        (*i)++;                     \
    } while (0)
    if (!strcmp(a, "--workload")) {
        TAKE();
        if (strcmp(v, "seed") && strcmp(v, "tenants") && strcmp(v, "tenants-alike") && strcmp(v, "chat"))
            return bad_why(a, v, "one of seed, tenants, tenants-alike, chat");
        o->workload = v;
    } else if (!strcmp(a, "--trace")) {
        TAKE();
        o->trace = v;
    } else if (!strcmp(a, "--trace-format")) {
        TAKE();
        int f = fkv_trace_format_parse(v);
        if (f < 0) return bad(a, v);
        o->trace_format = f;
    } else if (!strcmp(a, "--requests")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e8 || d != floor(d)) return bad(a, v);
        o->requests = (size_t)d;
        o->requests_set = 1;
    } else if (!strcmp(a, "--load")) {
        TAKE();
        if (range(v, &o->load_lo, &o->load_hi, &o->load_step) || o->load_lo <= 0) return bad(a, v);
    } else if (!strcmp(a, "--native")) {
        o->load_lo = o->load_hi = -1;
    } else if (!strcmp(a, "--time-scale")) {
        TAKE();
        if (num(v, &o->time_scale) || o->time_scale <= 0) return bad(a, v);
    } else if (!strcmp(a, "--seed")) {
        TAKE();
        if (num(v, &d) || d < 0 || d != floor(d)) return bad(a, v);
        o->seed = (uint64_t)d;
    } else if (!strcmp(a, "--clients")) {
        TAKE();
        if (num(v, &d) || d < 1 || d > 1e6 || d != floor(d)) return bad(a, v);
        o->sim.sched.n_clients = (uint32_t)d;
        o->clients_set = 1;
    } else if (!strcmp(a, "--profile")) {
        TAKE();
        o->profile = v;
    } else if (!strcmp(a, "--step-coeffs")) {
        TAKE();
        char why[200] = "";
        if (fkv_bench_parse_coeffs(v, o->step_coeffs, &o->n_step_coeffs, why, sizeof why)) {
            fprintf(stderr, "fairkv: bad value for --step-coeffs: '%s': %s\n", v, why);
            return -1;
        }
    } else if (!strcmp(a, "--capacity-frac")) {
        TAKE();
        if (num(v, &o->cap_frac) || o->cap_frac <= 0) return bad(a, v);
    } else if (!strcmp(a, "--frontier")) {
        o->frontier = 1;
    } else if (!strcmp(a, "--min-bound")) {
        o->min_bound = 1;
    } else if (!strcmp(a, "--frontier-max")) {
        TAKE();
        if (num(v, &o->frontier_max) || !(o->frontier_max > FKV_FRONTIER_LO && o->frontier_max <= 64))
            return bad_why(a, v, "a fraction of peak demand in (0.05, 64]");
    } else if (!strcmp(a, "--frontier-tol")) {
        TAKE();
        if (num(v, &o->frontier_tol) || !(o->frontier_tol >= 1e-4 && o->frontier_tol <= 0.5))
            return bad_why(a, v, "a fraction of peak demand in [0.0001, 0.5]");
    } else if (!strcmp(a, "--capacity-tokens")) {
        TAKE();
        if (num(v, &d) || d < 1 || d != floor(d)) return bad(a, v);
        o->cap_tokens = (uint64_t)d;
    } else if (!strcmp(a, "--capacity-gb")) {
        TAKE();
        if (num(v, &o->cap_gb) || o->cap_gb <= 0) return bad(a, v);
    } else if (!strcmp(a, "--max-batch-tokens")) {
        TAKE();
        if (num(v, &d) || d < 1 || d > 1e7 || d != floor(d)) return bad(a, v);
        o->sim.sched.max_batch_tokens = (uint32_t)d;
        o->sim.batch_tokens_set = 1;
    } else if (!strcmp(a, "--max-running")) {
        TAKE();
        if (num(v, &d) || d < 1 || d > 1e6 || d != floor(d)) return bad(a, v);
        o->sim.sched.max_running = (uint32_t)d;
        o->sim.running_set = 1;
    } else if (!strcmp(a, "--no-chunked-prefill")) {
        o->sim.sched.chunked_prefill = 0;
    } else if (!strcmp(a, "--batching")) {
        TAKE();
        if (!strcmp(v, "continuous")) o->sim.sched.mode = FKV_SCHED_CONTINUOUS;
        else if (!strcmp(v, "dynamic")) o->sim.sched.mode = FKV_SCHED_DYNAMIC;
        else return bad(a, v);
    } else if (!strcmp(a, "--batch-window-ms")) {
        TAKE();
        if (num(v, &d) || d < 0) return bad(a, v);
        o->sim.sched.batch_window_ns = (int64_t)llround(d * 1e6);
    } else if (!strcmp(a, "--admission")) {
        TAKE();
        if (!strcmp(v, "fcfs")) o->sim.sched.admission = FKV_ADMIT_FCFS;
        else if (!strcmp(v, "vtc")) o->sim.sched.admission = FKV_ADMIT_VTC;
        else return bad(a, v);
    } else if (!strcmp(a, "--miss")) {
        TAKE();
        if (!strcmp(v, "recompute")) o->sim.sched.miss = FKV_MISS_RECOMPUTE;
        else if (!strcmp(v, "reload")) o->sim.sched.miss = FKV_MISS_RELOAD;
        else return bad(a, v);
    } else if (!strcmp(a, "--alpha")) {
        TAKE();
        if (num(v, &o->sim.alpha) || o->sim.alpha < 0) return bad(a, v);
    } else if (!strcmp(a, "--beta")) {
        TAKE();
        if (num(v, &o->sim.beta) || o->sim.beta < 0) return bad(a, v);
    } else if (!strcmp(a, "--temperature")) {
        TAKE();
        if (num(v, &o->sim.temperature) || o->sim.temperature <= 0) return bad(a, v);
    } else if (!strcmp(a, "--min-retention-ms")) {
        TAKE();
        if (num(v, &d) || d < 0) return bad(a, v);
        o->sim.min_retention_ns = (int64_t)llround(d * 1e6);
    } else if (!strcmp(a, "--quant")) {
        TAKE();
        if (!strcmp(v, "off")) o->sim.quant = FKV_QUANT_OFF;
        else if (!strcmp(v, "always")) o->sim.quant = FKV_QUANT_ALWAYS;
        else if (!strcmp(v, "under-pressure")) o->sim.quant = FKV_QUANT_UNDER_PRESSURE;
        else return bad(a, v);
    } else if (!strcmp(a, "--quant-dtype")) {
        TAKE();
        if (!strcmp(v, "int8")) o->sim.quant_dtype = FKV_INT8;
        else if (!strcmp(v, "int4")) o->sim.quant_dtype = FKV_INT4;
        else return bad(a, v);
    } else if (!strcmp(a, "--quant-hot")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e9) return bad(a, v);
        o->sim.quant_hot = (uint32_t)d;
    } else if (!strcmp(a, "--price-kv-bytes")) {
        o->sim.price_kv_bytes = 1;
    } else if (!strcmp(a, "--quant-warm")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e9 || d != floor(d)) return bad_why(a, v, "a whole number of tokens");
        o->sim.quant_warm = (uint32_t)d;
    } else if (!strcmp(a, "--tenants")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > FKV_SIM_MAX_TENANTS || d != floor(d))
            return bad_why(a, v, "a whole number of tenants from 0 to 16");
        o->sim.n_tenants = (uint32_t)d;
        o->tenants_set = 1;
    } else if (!strcmp(a, "--tenant-weights")) {
        TAKE();
        char why[160];
        if (parse_weights(v, o->sim.tenant_weight, &o->n_weights, why, sizeof why)) return bad_why(a, v, why);
    } else if (!strcmp(a, "--tenant-assign")) {
        TAKE();
        o->tenant_assign_set = 1;
        if (!strcmp(v, "client")) o->tenant_assign = FKV_ASSIGN_CLIENT;
        else if (!strcmp(v, "roundrobin")) o->tenant_assign = FKV_ASSIGN_ROUNDROBIN;
        else if (!strcmp(v, "session")) o->tenant_assign = FKV_ASSIGN_SESSION;
        else if (!strncmp(v, "heavy:", 6)) {
            if (num(v + 6, &o->heavy_frac) || !(o->heavy_frac > 0 && o->heavy_frac <= 1))
                return bad_why(a, v, "heavy:F needs a fraction F in (0, 1]");
            o->tenant_assign = FKV_ASSIGN_HEAVY;
        } else
            return bad_why(a, v, "one of client, roundrobin, heavy:F, session");
    } else if (!strcmp(a, "--quotas")) {
        TAKE();
        if (!strcmp(v, "off")) o->sim.quotas = FKV_QUOTA_OFF;
        else if (!strcmp(v, "request")) o->sim.quotas = FKV_QUOTA_REQUEST;
        else if (!strcmp(v, "tenant")) o->sim.quotas = FKV_QUOTA_TENANT;
        else return bad_why(a, v, "one of off, request, tenant");
    } else if (!strcmp(a, "--victim")) {
        TAKE();
        int r = fkv_victim_parse(v);
        if (r < 0) return bad_why(a, v, "one of last-started, fewest-output, fair");
        o->sim.victim = r;
    } else if (!strcmp(a, "--reclaim")) {
        TAKE();
        char why[160];
        if (fkv_sched_parse_reclaim(v, o->sim.sched.reclaim, &o->sim.sched.n_reclaim, why, sizeof why))
            return bad_why(a, v, why);
        o->sim.reclaim_set = 1;
    } else if (!strcmp(a, "--host-gb")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e6) return bad_why(a, v, "GB of host memory, 0 to 1e6");
        o->sim.host_capacity_bytes = (uint64_t)(d * 1e9);
    } else if (!strcmp(a, "--tier-admission")) {
        TAKE();
        if (fkv_tier_admission_parse(v, &o->sim.tier_admission)) return bad_why(a, v, "one of off, tinylfu, seen");
    } else if (!strcmp(a, "--host-demote")) {
        o->sim.host_demote = 1;
    } else if (!strcmp(a, "--host-x")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e6) return bad_why(a, v, "times the device KV capacity, 0 to 1e6");
        o->sim.host_x = d;
    } else if (!strcmp(a, "--remote-gb")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e9) return bad_why(a, v, "GB of remote store, 0 to 1e9");
        o->sim.remote_capacity_bytes = (uint64_t)(d * 1e9);
    } else if (!strcmp(a, "--remote-gbps")) {
        TAKE();
        if (num(v, &d) || d <= 0 || d > 1e6) return bad_why(a, v, "GB/s, above 0");
        o->sim.remote_bytes_per_s = d * 1e9;
    } else if (!strcmp(a, "--remote-latency-ms")) {
        TAKE();
        if (num(v, &d) || d < 0 || d > 1e6) return bad_why(a, v, "ms, 0 or more");
        o->sim.remote_latency_ns = (int64_t)llround(d * 1e6);
    } else if (!strcmp(a, "--vtc-mem")) {
        TAKE();
        if (num(v, &o->sim.sched.vtc_mem_weight) || o->sim.sched.vtc_mem_weight < 0)
            return bad_why(a, v, "a weight >= 0 (counter units per token-second)");
    } else if (!strcmp(a, "--tenant-step-share")) {
        TAKE();
        if (num(v, &o->sim.sched.tenant_step_share) ||
            !(o->sim.sched.tenant_step_share > 0 && o->sim.sched.tenant_step_share <= 1))
            return bad_why(a, v, "a fraction in (0, 1]");
    } else if (!strcmp(a, "--step-share")) {
        TAKE();
        int m = fkv_step_share_parse(v);
        if (m < 0) return bad_why(a, v, "off or drr");
        o->sim.sched.step_share = (fkv_step_share)m;
    } else if (!strcmp(a, "--private-prefix")) {
        o->sim.sched.publish_shared = 0;
    } else if (!strcmp(a, "--schemes")) {
        TAKE();
        o->schemes = v;
    } else if (!strcmp(a, "--format")) {
        TAKE();
        if (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "csv")) return bad(a, v);
        o->format = v;
    } else if (!strcmp(a, "--output")) {
        TAKE();
        o->output = v;
    } else if (!strcmp(a, "--plot")) {
        TAKE();
        o->plot_dir = v;
    } else if (!strcmp(a, "--quiet")) {
        o->quiet = 1;
    } else {
        return 0;
    }
#undef TAKE
    return 1;
}

/* The generator workloads at their documented parameters; chat's sessions
 * start at session_rate per second. */
static fkv_status generate(const fkv_bench_opts *o, size_t n, double session_rate, fkv_workload *w)
{
    if (!strcmp(o->workload, "chat")) {
        fkv_chat_params p;
        fkv_chat_params_default(&p);
        p.session_rate = session_rate;
        return fkv_workload_chat(n, o->seed, o->sim.sched.n_clients, &p, w);
    }
    fkv_tenants_params p;
    fkv_tenants_params_default(&p);
    p.alike = !strcmp(o->workload, "tenants-alike");
    return fkv_workload_tenants(n, o->seed, o->sim.sched.n_clients, &p, w);
}

fkv_status fkv_bench_prepare(fkv_bench_ctx *c, fkv_bench_opts *o, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    fkv_status st;
    if (!o->data_dir) o->data_dir = getenv("FKV_DATA_DIR");
    if (!o->data_dir && access("../shared/data/vidur", R_OK) == 0) o->data_dir = "../shared/data";
    if ((st = fkv_profile_get(o->profile, o->data_dir, &c->profile, err, errlen)) != FKV_OK) return st;
    if (o->n_step_coeffs &&
        (st = fkv_profile_set_coeffs(&c->profile, o->step_coeffs, o->n_step_coeffs, err, errlen)) != FKV_OK)
        return st;
    /* stderr only: the tables are equal either way (tests/test_sim_data.c) */
    if (!o->quiet)
        fprintf(stderr, "profile %s: linear-op table %s\n", c->profile.name,
                c->profile.from_data                 ? "parsed from the Vidur CSV"
                : o->n_step_coeffs                   ? "replaced by --step-coeffs"
                : !strncmp(c->profile.name, "cpu-", 4) ? "measured on the engine (fairkv bench --calibrate)"
                                                       : "embedded (derived from the Vidur CSV)");
    o->sim.profile = &c->profile;
    if (o->sim.tier_admission != FKV_TIER_ADMIT_OFF && !o->sim.host_demote && !o->sim.remote_capacity_bytes) {
        snprintf(err, errlen, "--tier-admission %s: no tier below the device to admit to (give --host-demote "
                 "with --host-x or --host-gb, or --remote-gb)", fkv_tier_admission_name(o->sim.tier_admission));
        return FKV_EINVAL;
    }
    if (o->trace) {
        /* a trace is read whole unless --requests was given */
        size_t limit = o->requests_set ? o->requests : 0;
        st = fkv_trace_load(o->trace, (fkv_trace_format)o->trace_format, limit, o->sim.sched.n_clients, &c->base, err,
                            errlen);
        if (st) return st;
    } else if (strcmp(o->workload, "seed")) {
        if (o->requests_set && !o->requests) {
            snprintf(err, errlen, "--workload %s: --requests 0 (a generator needs a count)", o->workload);
            return FKV_EINVAL;
        }
        if ((st = generate(o, o->requests ? o->requests : 2000, 1.0, &c->base)) != FKV_OK) {
            snprintf(err, errlen, "%s workload: %s", o->workload, fkv_strerror(st));
            return st;
        }
        /* the generator names the tenants: the options may only agree */
        if (o->tenant_assign_set) {
            snprintf(err, errlen, "--tenant-assign: --workload %s gives every request its tenant", o->workload);
            return FKV_EINVAL;
        }
        if (o->tenants_set && o->sim.n_tenants != c->base.n_tenants) {
            snprintf(err, errlen, "--tenants %u: --workload %s has %u tenants", o->sim.n_tenants, o->workload,
                     c->base.n_tenants);
            return FKV_EINVAL;
        }
        o->sim.n_tenants = c->base.n_tenants;
        o->tenants_from_workload = 1;
    } else {
        if ((st = fkv_workload_seed(o->requests ? o->requests : 2000, o->seed, o->sim.sched.n_clients, &c->base)) != FKV_OK) {
            snprintf(err, errlen, "seed workload: %s", fkv_strerror(st));
            return st;
        }
    }
    c->base.block_tokens = o->sim.sched.block_tokens;
    if (o->n_weights && o->n_weights != o->sim.n_tenants) {
        snprintf(err, errlen, "--tenant-weights gives %u weights for --tenants %u", o->n_weights, o->sim.n_tenants);
        return FKV_EINVAL;
    }
    if (o->tenant_assign == FKV_ASSIGN_HEAVY && o->sim.n_tenants < 2 && o->heavy_frac < 1) {
        snprintf(err, errlen, "--tenant-assign heavy:%g needs --tenants 2 or more (%u given)", o->heavy_frac,
                 o->sim.n_tenants);
        return FKV_EINVAL;
    }
    if (o->tenant_assign == FKV_ASSIGN_SESSION && !c->base.session_key) {
        /* hashing made-up sessions would hide that the trace names no user */
        const char *f = c->base.name;
        if (!o->trace)
            snprintf(err, errlen, "--tenant-assign session: the %s workload has no sessions; "
                                  "use roundrobin or heavy:F", o->workload);
        else
            snprintf(err, errlen, "--tenant-assign session: %s: %s; use roundrobin or heavy:F", o->trace,
                     !strcmp(f, "azure")   ? "an Azure trace has no session signal (no user, conversation or prefix field)"
                     : !strcmp(f, "plain") ? "no client column, so no session signal"
                                           : "a request has no hash_ids, so its session is unknown");
        return FKV_EINVAL;
    }
    if (!o->tenants_from_workload) fkv_bench_assign_tenants(o, &c->base);
    if (o->sim.n_tenants && !o->clients_set) {
        /* VTC's clients are the tenants: fair admission is fairness among
         * the tenants the cache and the reports see */
        o->sim.sched.n_clients = o->sim.n_tenants;
        for (size_t i = 0; i < c->base.n; i++) c->base.reqs[i].client = c->base.reqs[i].tenant - 1;
    }
    if (o->load_lo > 0 || o->trace == NULL) {
        if ((st = fkv_sim_capacity_rps(&c->base, &o->sim, &c->cap_rps, err, errlen)) != FKV_OK) return st;
    }
    uint64_t tb = fkv_model_token_bytes(c->profile.model);
    if (o->cap_tokens) {
        c->capacity_tokens = o->cap_tokens;
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "fixed %llu tokens", (unsigned long long)o->cap_tokens);
    } else if (o->cap_gb > 0) {
        c->capacity_tokens = (uint64_t)(o->cap_gb * 1e9 / (double)tb);
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "fixed %.2f GB", o->cap_gb);
    } else {
        /* the capacity rule: a fraction of the peak demand at the highest load */
        fkv_workload w;
        double rate;
        double ref = o->load_lo > 0 ? o->load_hi : -1;
        if ((st = fkv_bench_arrivals(c, ref, &w, &rate)) != FKV_OK) return st;
        uint64_t peak = 0;
        st = fkv_sim_peak_demand(&w, &o->sim, &peak, err, errlen);
        fkv_workload_free(&w);
        if (st) return st;
        c->peak_tokens = peak;
        c->capacity_tokens = (uint64_t)ceil(o->cap_frac * (double)peak);
        /* never more than the GPUs hold after the fp16 weights */
        const fkv_model_geom *mg = c->profile.model;
        double hbm = c->profile.gpu_mem_bytes * c->profile.tp - 2.0 * mg->params;
        uint64_t hbm_tokens = hbm > 0 ? (uint64_t)(hbm / (double)tb) : 0;
        int capped = 0;
        if (hbm_tokens && c->capacity_tokens > hbm_tokens) {
            c->capacity_tokens = hbm_tokens;
            capped = 1;
        }
        uint32_t biggest = 0;
        for (size_t i = 0; i < c->base.n; i++)
            if (c->base.reqs[i].prompt + c->base.reqs[i].output > biggest)
                biggest = c->base.reqs[i].prompt + c->base.reqs[i].output;
        int raised = 0;
        c->floor_tokens = (uint64_t)biggest + 256;
        if (c->capacity_tokens < (uint64_t)biggest + 256) {
            c->capacity_tokens = (uint64_t)biggest + 256;
            raised = 1;
        }
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "%.2f x peak live demand %llu tokens%s%s", o->cap_frac,
                 (unsigned long long)peak, capped ? ", capped at the HBM left after the weights" : "",
                 raised ? ", raised to the largest request" : "");
    }
    return FKV_OK;
}

void fkv_bench_assign_tenants(const fkv_bench_opts *o, fkv_workload *w)
{
    uint32_t n = o->sim.n_tenants, rr = 0;
    double acc = 0;
    for (size_t i = 0; i < w->n; i++) {
        fkv_req *r = &w->reqs[i];
        if (!n) {
            r->tenant = 0;
            continue;
        }
        switch (o->tenant_assign) {
        case FKV_ASSIGN_ROUNDROBIN: r->tenant = 1 + i % n; break;
        case FKV_ASSIGN_HEAVY:
            /* error diffusion: exactly round(F x i) of the first i requests
             * are tenant 1's, spread evenly over the trace */
            acc += o->heavy_frac;
            if (acc >= 1 - 1e-12 || n == 1) {
                acc -= 1;
                r->tenant = 1;
            } else {
                r->tenant = 2 + rr++ % (n - 1);
            }
            break;
        case FKV_ASSIGN_SESSION: {
            if (!w->session_key) { /* fkv_bench_prepare refuses this first */
                r->tenant = 0;
                break;
            }
            /* the key's bytes fixed little-endian: the same tenants on every host */
            uint64_t k = w->session_key[w->session[i]];
            unsigned char b[8];
            for (int j = 0; j < 8; j++) b[j] = (unsigned char)(k >> (8 * j));
            r->tenant = 1 + XXH64(b, sizeof b, 0) % n;
            break;
        }
        default: r->tenant = 1 + r->client % n; break;
        }
    }
}

fkv_status fkv_bench_arrivals(fkv_bench_ctx *c, double load, fkv_workload *w, double *rate)
{
    double span = (double)fkv_workload_span(&c->base) * 1e-9;
    if (c->base.session && !c->o->trace && load > 0) { /* a trace's sessions are recovered, not generated */
        /* chat: think times are fixed, so the load sets how often sessions
         * start: the same sessions (their sizes' stream does not depend on
         * the rate), generated again at the request rate load x capacity */
        double target = load * c->cap_rps;
        double turns = (double)c->base.n / (double)c->base.n_sessions;
        fkv_status st = generate(c->o, c->base.n, target / turns, w);
        if (st) return st;
        w->block_tokens = c->base.block_tokens;
        *rate = target;
        return FKV_OK;
    }
    *w = c->base;
    w->reqs = malloc(c->base.n * sizeof *w->reqs);
    w->blocks = NULL; /* block pointers still point into base */
    w->n_blocks = w->cap_blocks = 0;
    w->session = w->turn = NULL; /* base's */
    w->session_key = NULL;
    if (!w->reqs) return FKV_ENOMEM;
    memcpy(w->reqs, c->base.reqs, c->base.n * sizeof *w->reqs);
    if (load > 0) {
        double target = load * c->cap_rps;
        if (!c->o->trace) {
            fkv_workload_poisson(w, target, c->o->seed);
        } else if (span > 0 && w->n > 1) {
            double native = (double)(w->n - 1) / span;
            fkv_workload_scale_time(w, native / target);
        }
        *rate = target;
    } else {
        fkv_workload_scale_time(w, c->o->time_scale);
        *rate = span > 0 ? (double)(w->n - 1) / (span * c->o->time_scale) : 0;
    }
    return FKV_OK;
}

void fkv_bench_ctx_free(fkv_bench_ctx *c)
{
    fkv_workload_free(&c->base);
    fkv_profile_free(&c->profile);
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

fkv_status fkv_bench_schemes(fkv_bench_ctx *c, const fkv_workload *w, fkv_scheme_summary *sums, fkv_sim_result *res,
                             size_t *n, size_t cap, char *err, size_t errlen)
{
    size_t ns;
    const fkv_scheme *all = fkv_scheme_list(&ns);
    const fkv_scheme *sel[64];
    size_t nsel = 0;
    if (c->o->schemes) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", c->o->schemes);
        for (char *t = strtok(buf, ","); t && nsel < 64; t = strtok(NULL, ",")) {
            const fkv_scheme *s = fkv_scheme_find(t);
            if (!s) {
                snprintf(err, errlen, "unknown scheme '%s' (see fairkv bench --help)", t);
                return FKV_ENOENT;
            }
            if (!fkv_scheme_available(s)) {
                snprintf(err, errlen, "scheme '%s' needs policy '%s', which this library does not register", t,
                         s->policy);
                return FKV_ENOENT;
            }
            sel[nsel++] = s;
        }
    } else {
        /* isolated is the single-tenant run itself without tenants */
        for (size_t i = 0; i < ns && nsel < 64; i++)
            if (fkv_scheme_available(&all[i]) && (c->o->sim.n_tenants || !all[i].isolated)) sel[nsel++] = &all[i];
    }
    if (nsel > cap) nsel = cap;
    fkv_sim_config cfg = c->o->sim;
    cfg.capacity_tokens = c->capacity_tokens;
    cfg.progress = !c->o->quiet;
    /* slowdown's denominator, once per workload: in tenant runs (their
     * fairness lines); the plain tables do not print it */
    int64_t *idle = NULL;
    if (cfg.n_tenants) {
        if (!(idle = malloc(w->n * sizeof *idle))) return FKV_ENOMEM;
        fkv_status st = fkv_sim_idle_latency(w, &cfg, idle, err, errlen);
        if (st) {
            free(idle);
            return st;
        }
    }
    for (size_t i = 0; i < nsel; i++) {
        fkv_sim_result r;
        double t0 = wall();
        fkv_status st = fkv_sim_run(w, sel[i], &cfg, &r, err, errlen);
        if (st) {
            free(idle);
            return st;
        }
        double dt = wall() - t0;
        fkv_summarize(&r, &sums[i]);
        if (idle) fkv_summary_slowdown(&sums[i], &r, idle);
        if (cfg.n_tenants && !sel[i]->isolated) {
            /* the isolation check's reference: the same scheme on a static
             * 1/n partition of the cache */
            fkv_sim_result p;
            if ((st = fkv_sim_partition(w, sel[i], &cfg, &p, err, errlen)) != FKV_OK) {
                fkv_sim_result_free(&r);
                free(idle);
                return st;
            }
            fkv_summary_partition(&sums[i], &p);
            fkv_sim_result_free(&p);
        }
        sums[i].sim_wall_s = dt;
        if (!c->o->quiet)
            fprintf(stderr, "  %-13s %zu requests simulated in %.2f s\n", sel[i]->name, w->n, dt);
        if (res) res[i] = r;
        else fkv_sim_result_free(&r);
    }
    free(idle);
    *n = nsel;
    fkv_summaries_fairness(sums, nsel);
    fkv_summaries_isolated(sums, nsel);
    return FKV_OK;
}

fkv_status fkv_bench_min_bound(const fkv_bench_ctx *c, const fkv_workload *w, double rate[3])
{
    size_t ns;
    const fkv_scheme *all = fkv_scheme_list(&ns);
    uint32_t pt = 0;
    for (size_t i = 0; i < ns; i++)
        if (!pt || all[i].page_tokens < pt) pt = all[i].page_tokens;
    const fkv_sim_config *sim = &c->o->sim;
    uint64_t tb = fkv_model_token_bytes(c->profile.model), page_bytes = (uint64_t)pt * tb;
    /* the sizes as make_cache (sim.c) gives them to the cache */
    uint64_t dev = (c->capacity_tokens + pt - 1) / pt;
    uint64_t host_bytes = fkv_sim_host_bytes(sim, dev * page_bytes);
    uint64_t caps[3] = {dev, dev + host_bytes / page_bytes, dev + host_bytes / page_bytes + sim->remote_capacity_bytes / page_bytes};
    uint64_t hits[3], prompts;
    fkv_status st = fkv_min_bound(w, pt, sim->sched.block_tokens, caps, 3, hits, &prompts);
    if (st) return st;
    for (int i = 0; i < 3; i++) rate[i] = prompts ? (double)hits[i] / (double)prompts : 0;
    return FKV_OK;
}
