/* The bench tools' options: one table drives the parser and --help.
 *
 * Each row names an option, how its value is read (a number in a range, a
 * choice, a string, a flag, or a function of its own), where it goes in
 * fkv_bench_opts, and its lines of --help.  Rows without a name are help
 * lines only (section heads); an option whose help shares another's line
 * has no help of its own and follows that row.  A bad value is refused
 * with the option and the value named, and the row's `why` if it has one.
 */
#include "sim/bench.h"
#include "sim/frontier.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        if (*n == 7) {
            snprintf(why, whylen, "more than 7 values");
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

/* The options read by a function of their own: 0, or -1 with why[] (empty:
 * the value alone is named). */
static int load(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    return range(v, &o->load_lo, &o->load_hi, &o->load_step) || o->load_lo <= 0 ? -1 : 0;
}

static int native(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    (void)v, (void)why, (void)whylen;
    o->load_lo = o->load_hi = -1;
    return 0;
}

static int trace_format(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    int f = fkv_trace_format_parse(v);
    if (f < 0) return -1;
    o->trace_format = f;
    return 0;
}

static int step_coeffs(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    return fkv_bench_parse_coeffs(v, o->step_coeffs, &o->n_step_coeffs, why, whylen);
}

static int tenant_weights(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    return parse_weights(v, o->sim.tenant_weight, &o->n_weights, why, whylen);
}

static int tenant_assign(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    if (!strcmp(v, "client")) o->tenant_assign = FKV_ASSIGN_CLIENT;
    else if (!strcmp(v, "roundrobin")) o->tenant_assign = FKV_ASSIGN_ROUNDROBIN;
    else if (!strcmp(v, "session")) o->tenant_assign = FKV_ASSIGN_SESSION;
    else if (!strncmp(v, "heavy:", 6)) {
        if (num(v + 6, &o->heavy_frac) || !(o->heavy_frac > 0 && o->heavy_frac <= 1))
            return snprintf(why, whylen, "heavy:F needs a fraction F in (0, 1]"), -1;
        o->tenant_assign = FKV_ASSIGN_HEAVY;
    } else
        return snprintf(why, whylen, "one of client, roundrobin, heavy:F, session"), -1;
    return 0;
}

static int victim(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    int r = fkv_victim_parse(v);
    if (r < 0) return snprintf(why, whylen, "one of last-started, fewest-output, fair"), -1;
    o->sim.victim = r;
    return 0;
}

static int reclaim(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    return fkv_sched_parse_reclaim(v, o->sim.sched.reclaim, &o->sim.sched.n_reclaim, why, whylen) ? -1 : 0;
}

static int tier_admission(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    if (fkv_tier_admission_parse(v, &o->sim.tier_admission))
        return snprintf(why, whylen, "one of off, tinylfu, seen"), -1;
    return 0;
}

static int host_policy(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    if (fkv_host_policy_parse(v, &o->sim.host_policy)) return snprintf(why, whylen, "one of lru, s3fifo, arc"), -1;
    return 0;
}

static int step_share(fkv_bench_opts *o, const char *v, char *why, size_t whylen)
{
    int m = fkv_step_share_parse(v);
    if (m < 0) return snprintf(why, whylen, "off or drr"), -1;
    o->sim.step_share = m;
    return 0;
}

typedef enum opt_kind {
    OPT_HELP = 0,  /* no option: help lines only */
    OPT_NUM,       /* a number in [lo, hi] (flags: open ends, whole), times scale, stored as `store` */
    OPT_CHOICE,    /* one of choices: its value stored as an int, or (ST_STR) the word itself */
    OPT_STR,       /* the value as given */
    OPT_FLAG,      /* no value: the int field gets `value` */
    OPT_CALL,      /* the value read by call() */
    OPT_FLAG_CALL  /* no value: call() with NULL */
} opt_kind;

typedef enum opt_store { ST_F64 = 0, ST_U32, ST_U64, ST_SIZE, ST_NS, ST_STR, ST_INT } opt_store;

enum { LO_OPEN = 1, HI_OPEN = 2, WHOLE = 4 };

typedef struct opt_choice {
    const char *word;
    int value;
} opt_choice;

typedef struct opt_row {
    const char *name;          /* "--requests"; NULL: help lines only */
    opt_kind kind;
    size_t field;              /* offsetof(fkv_bench_opts, ...) of the target */
    opt_store store;           /* OPT_NUM: the target's type (rounding: ST_NS llround, others truncate) */
    double lo, hi, scale;      /* OPT_NUM: the range of the value as given; stored x scale (0: x 1) */
    int flags;                 /* OPT_NUM: LO_OPEN, HI_OPEN, WHOLE */
    int value;                 /* OPT_FLAG: what the field gets */
    size_t set;                /* offset of an int set to 1 when the option is given; 0: none */
    const opt_choice *choices; /* OPT_CHOICE: ends with a NULL word */
    int (*call)(fkv_bench_opts *o, const char *v, char *why, size_t whylen);
    const char *why;           /* what a good value is, for the error message; NULL: the value alone */
    const char *help;          /* its --help lines, each ending in \n; NULL: on another row's line */
} opt_row;

/* offset 0 is `workload`, a pointer: no option's `set` can be there */
_Static_assert(offsetof(fkv_bench_opts, workload) == 0, "opt_row.set == 0 means none");
/* OPT_CHOICE writes an int into enum fields */
_Static_assert(sizeof(fkv_sched_mode) == sizeof(int) && sizeof(fkv_admit) == sizeof(int) &&
                   sizeof(fkv_miss_mode) == sizeof(int) && sizeof(fkv_quant_mode) == sizeof(int) &&
                   sizeof(fkv_dtype) == sizeof(int),
               "enum fields hold an int");

static const opt_choice workloads[] = {{"seed", 0}, {"tenants", 0}, {"tenants-alike", 0}, {"chat", 0}, {NULL, 0}};
static const opt_choice formats[] = {{"text", 0}, {"json", 0}, {"csv", 0}, {NULL, 0}};
static const opt_choice quotas[] = {
    {"off", FKV_QUOTA_OFF}, {"request", FKV_QUOTA_REQUEST}, {"tenant", FKV_QUOTA_TENANT}, {NULL, 0}};
static const opt_choice shares[] = {{"target", 0}, {"guarantee", 1}, {"partition", 2}, {NULL, 0}};
static const opt_choice batching[] = {
    {"continuous", FKV_SCHED_CONTINUOUS}, {"dynamic", FKV_SCHED_DYNAMIC}, {NULL, 0}};
static const opt_choice admission[] = {{"fcfs", FKV_ADMIT_FCFS}, {"vtc", FKV_ADMIT_VTC}, {NULL, 0}};
static const opt_choice miss[] = {{"recompute", FKV_MISS_RECOMPUTE}, {"reload", FKV_MISS_RELOAD}, {NULL, 0}};
static const opt_choice quant[] = {
    {"off", FKV_QUANT_OFF}, {"always", FKV_QUANT_ALWAYS}, {"under-pressure", FKV_QUANT_UNDER_PRESSURE}, {NULL, 0}};
static const opt_choice quant_dtype[] = {{"int8", FKV_INT8}, {"int4", FKV_INT4}, {"fp8", FKV_FP8}, {NULL, 0}};

#define F(m) offsetof(fkv_bench_opts, m)

/* clang-format off */
static const opt_row rows[] = {
    {.help = "calibration (bench only): --calibrate MODEL.gguf | --calibrate-log STEPLOG[,STEPLOG...]\n"
              "                           fit the engine's step times (alone, or from `fairkv serve --step-log`)\n"
              "                           to a cost profile (see cpu-tiny; --calibrate --help for options)\n"},
    {.help = "workload:\n"},
    {.name = "--workload", .kind = OPT_CHOICE, .field = F(workload), .store = ST_STR, .choices = workloads, .why = "one of seed, tenants, tenants-alike, chat",
     .help = "  --workload W             seed: the seed's 60/30/10 short/medium/long mix (default);\n"
              "                           tenants: 4 light tenants and 2 heavy long-prompt ones; tenants-alike:\n"
              "                           the same requests, tenants uniform; chat: multi-turn sessions of 4\n"
              "                           tenants (docs/EVALUATION.md, \"Fairness workloads\"); these name\n"
              "                           their requests' tenants, so --tenants must match and --tenant-assign\n"
              "                           is refused\n"},
    {.name = "--trace", .kind = OPT_STR, .field = F(trace),
     .help = "  --trace FILE             Azure CSV, Mooncake JSONL or plain CSV (recognized from the file)\n"},
    {.name = "--trace-format", .kind = OPT_CALL, .call = trace_format,
     .help = "  --trace-format F         auto|azure|mooncake|plain (plain: a header line\n"
              "                           'arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]]',\n"
              "                           then one request per line; '#' starts a comment line; shared_tokens\n"
              "                           leading prompt tokens are common to the client's requests)\n"},
    {.name = "--requests", .kind = OPT_NUM, .field = F(requests), .store = ST_SIZE, .lo = 0, .hi = 1e8, .flags = WHOLE, .set = F(requests_set),
     .help = "  --requests N             seed: requests to generate (2000); trace: keep the first N (0 = all)\n"},
    {.name = "--load", .kind = OPT_CALL, .call = load,
     .help = "  --load X | A:B:STEP      offered load (arrival rate / saturation throughput), 0.8; a range sweeps\n"},
    {.name = "--native", .kind = OPT_FLAG_CALL, .call = native,
     .help = "  --native                 trace: keep the trace's own timing (times --time-scale)\n"},
    {.name = "--time-scale", .kind = OPT_NUM, .field = F(time_scale), .lo = 0, .hi = INFINITY, .flags = LO_OPEN,
     .help = "  --time-scale S           multiply trace arrival times by S\n"},
    {.name = "--seed", .kind = OPT_NUM, .field = F(seed), .store = ST_U64, .lo = 0, .hi = INFINITY, .flags = WHOLE,
     .help = "  --seed N                 RNG seed (42)\n"},
    {.name = "--clients", .kind = OPT_NUM, .field = F(sim.sched.n_clients), .store = ST_U32, .lo = 1, .hi = 1e6, .flags = WHOLE, .set = F(clients_set),
     .help = "  --clients K              clients for VTC admission (4; in tenant runs the tenants, unless given)\n"},
    {.help = "tenants (docs/ARCHITECTURE.md, \"Tenants\"):\n"},
    {.name = "--tenants", .kind = OPT_NUM, .field = F(sim.n_tenants), .store = ST_U32, .lo = 0, .hi = FKV_SIM_MAX_TENANTS, .flags = WHOLE, .set = F(tenants_set), .why = "a whole number of tenants from 0 to 16",
     .help = "  --tenants N              tenants 1..N (0 = none: every request anonymous; at most 16)\n"},
    {.name = "--tenant-weights", .kind = OPT_CALL, .call = tenant_weights,
     .help = "  --tenant-weights W1,W2,...  one weight per tenant (1 each)\n"},
    {.name = "--tenant-assign", .kind = OPT_CALL, .call = tenant_assign, .set = F(tenant_assign_set),
     .help = "  --tenant-assign client|roundrobin|heavy:F|session   tenant of a request: 1 + client mod N\n"
              "                           (default), 1 + index mod N, tenant 1 for a fraction F, the rest\n"
              "                           round-robin, or its session's: 1 + XXH64(key) mod N, the key being a\n"
              "                           Mooncake request's first hash_id (first 512-token prompt block) or a\n"
              "                           plain trace's client; Azure traces and generated workloads have no\n"
              "                           sessions and are refused\n"},
    {.name = "--quotas", .kind = OPT_CHOICE, .field = F(sim.quotas), .choices = quotas, .why = "one of off, request, tenant",
     .help = "  --quotas off|request|tenant   the cache's fair shares for every scheme (default: the scheme's)\n"},
    {.name = "--shares", .kind = OPT_CHOICE, .field = F(sim.share_guarantee), .choices = shares,
     .why = "target, guarantee or partition",
     .help = "  --shares target|guarantee|partition   tenant shares (quotas tenant) in every scheme as\n"
              "                           targets: the tenant furthest over gives first; as guarantees: no\n"
              "                           tenant at or under its share loses memory to another, the policy\n"
              "                           orders the rest; or a static partition: each tenant's share is its\n"
              "                           weighted part of the pool, held against every other tenant\n"
              "                           (default: the scheme's; fairkv's are guarantees)\n"},
    {.name = "--victim", .kind = OPT_CALL, .call = victim,
     .help = "  --victim last-started|fewest-output|fair   preemption victim for every scheme\n"},
    {.name = "--reclaim", .kind = OPT_CALL, .call = reclaim, .set = F(sim.reclaim_set),
     .help = "  --reclaim A,B,...        fair reclaim before preemption for every scheme: quantize8, quantize4,\n"
              "                           offload, drop, evict (none = preempt at once; default: the scheme's)\n"},
    {.name = "--host-gb", .kind = OPT_NUM, .field = F(sim.host_capacity_bytes), .store = ST_U64, .scale = 1e9, .lo = 0, .hi = 1e6, .why = "GB of host memory, 0 to 1e6",
     .help = "  --host-gb G              host tier for offloaded chunks (0: offload frees nothing)\n"},
    {.name = "--host-demote", .kind = OPT_FLAG, .field = F(sim.host_demote), .value = 1,
     .help = "  --host-demote            idle chunks the device evicts go down to the host tier (needs --host-gb or --host-x)\n"},
    {.name = "--host-x", .kind = OPT_NUM, .field = F(sim.host_x), .lo = 0, .hi = 1e6, .why = "times the device KV capacity, 0 to 1e6",
     .help = "  --host-x X               host tier of X times the device's KV bytes (instead of --host-gb)\n"},
    {.name = "--tier-admission", .kind = OPT_CALL, .call = tier_admission,
     .help = "  --tier-admission off|tinylfu|seen   what goes below the device (host demotions, remote\n"
              "                           write-back): everything (off); with the tier full, chunks seen at least\n"
              "                           as often as the one they push out (tinylfu); chunks seen twice (seen)\n"},
    {.name = "--host-policy", .kind = OPT_CALL, .call = host_policy,
     .help = "  --host-policy lru|s3fifo|arc   eviction order of the host tier and of the remote store:\n"
              "                           recency (lru); a small and a main FIFO with frequency bits and a\n"
              "                           ghost (s3fifo); ARC's recency and frequency lists (arc)\n"},
    {.name = "--remote-gb", .kind = OPT_NUM, .field = F(sim.remote_capacity_bytes), .store = ST_U64, .scale = 1e9, .lo = 0, .hi = 1e9, .why = "GB of remote store, 0 to 1e9",
     .help = "  --remote-gb G            remote tier below the host: a shared store of G GB, LRU, per-tenant\n"
              "                           namespaces, written back at request end, read at admission\n"},
    {.name = "--remote-gbps", .kind = OPT_NUM, .field = F(sim.remote_bytes_per_s), .scale = 1e9, .lo = 0, .hi = 1e6, .flags = LO_OPEN, .why = "GB/s, above 0",
     .help = "  --remote-gbps B          its network bandwidth, GB/s (12.5: one 100 Gb/s link)\n"},
    {.name = "--remote-latency-ms", .kind = OPT_NUM, .field = F(sim.remote_latency_ns), .store = ST_NS, .scale = 1e6, .lo = 0, .hi = 1e6, .why = "ms, 0 or more",
     .help = "  --remote-latency-ms L    one round trip per request that reads it (0.5)\n"},
    {.name = "--vtc-mem", .kind = OPT_NUM, .field = F(sim.sched.vtc_mem_weight), .lo = 0, .hi = INFINITY, .why = "a weight >= 0 (counter units per token-second)",
     .help = "  --vtc-mem W              VTC pays W per token-second of KV held (0)\n"},
    {.name = "--tenant-step-share", .kind = OPT_NUM, .field = F(sim.tenant_step_share), .lo = 0, .hi = 1, .flags = LO_OPEN, .why = "a fraction in (0, 1]",
     .help = "  --tenant-step-share F    one tenant's prefill share of a step while others wait (1 = off)\n"},
    {.name = "--step-share", .kind = OPT_CALL, .call = step_share,
     .help = "  --step-share off|drr     drr: the step's prefill budget shared by tenants, weighted deficit\n"
              "                           round robin after decodes (replaces --tenant-step-share), for\n"
              "                           every scheme (default: the scheme's; fairkv's is drr)\n"},
    {.name = "--admit-reclaim", .kind = OPT_FLAG, .field = F(sim.admit_reclaim), .value = 1,
     .help = "  --admit-reclaim          while a tenant is over its share, within-share tenants' requests are\n"
              "                           served and admitted first, taking memory from over-share ones, in\n"
              "                           every scheme (default: the scheme's; off in all)\n"},
    {.name = "--no-admit-reclaim", .kind = OPT_FLAG, .field = F(sim.admit_reclaim), .value = 0,
     .help = "  --no-admit-reclaim       the plain order in every scheme\n"},
    {.name = "--step-bound", .kind = OPT_NUM, .field = F(sim.step_bound), .lo = 0, .hi = 1000, .why = "a multiple from 0 (off) to 1000",
     .help = "  --step-bound K           while a within-share request waits for its first token, cap the step\n"
              "                           so its predicted time <= K x that request's own step, for every\n"
              "                           scheme (0 = off; default: the scheme's; fairkv's is 2)\n"},
    {.name = "--private-prefix", .kind = OPT_FLAG, .field = F(sim.sched.publish_shared), .value = 0,
     .help = "  --private-prefix         shared_tokens matched within a tenant only (default: public)\n"},
    {.help = "system:\n"},
    {.name = "--profile", .kind = OPT_STR, .field = F(profile),
     .help = "  --profile NAME           cost profile (a100-llama2-7b; see below)\n"},
    {.name = "--step-coeffs", .kind = OPT_CALL, .call = step_coeffs,
     .help = "  --step-coeffs C0,C1,C2[,C3[,C4,C5,C6]]  replace the profile's step cost by the fitted form\n"
              "                           of --calibrate: C0 ms a step + C1 ms a token + C2 ms a unit of\n"
              "                           attention work [+ C3 ms a request [+ C4, C5, C6 ms a K/V byte read\n"
              "                           at full precision, int8, int4]]\n"},
    {.name = "--capacity-frac", .kind = OPT_NUM, .field = F(cap_frac), .lo = 0, .hi = INFINITY, .flags = LO_OPEN,
     .help = "  --capacity-frac F        KV capacity = F x peak live demand (0.75)\n"},
    {.name = "--capacity-tokens", .kind = OPT_NUM, .field = F(cap_tokens), .store = ST_U64, .lo = 1, .hi = INFINITY, .flags = WHOLE,
     .help = "  --capacity-tokens N | --capacity-gb G   fixed KV capacity instead\n"},
    {.name = "--capacity-gb", .kind = OPT_NUM, .field = F(cap_gb), .lo = 0, .hi = INFINITY, .flags = LO_OPEN},
    {.name = "--frontier", .kind = OPT_FLAG, .field = F(frontier), .value = 1,
     .help = "  --frontier               per scheme, the smallest capacity (fraction of peak live demand, by\n"
              "                           bisection in [0.05, 1]) at which mean, P99 and short-class P99 e2e\n"
              "                           latency stay within 5% of oracle-memory; one load, no fixed capacity\n"},
    {.name = "--frontier-tol", .kind = OPT_NUM, .field = F(frontier_tol), .lo = 1e-4, .hi = 0.5, .why = "a fraction of peak demand in [0.0001, 0.5]",
     .help = "  --frontier-tol X         the bisection's resolution, a fraction of peak (0.01)\n"},
    {.name = "--min-bound", .kind = OPT_FLAG, .field = F(min_bound), .value = 1,
     .help = "  --min-bound              also MIN's prefix hit rate at the device's size, device + host, and all\n"
              "                           tiers: what no policy at those sizes exceeds (docs/EVALUATION.md 3c)\n"},
    {.name = "--frontier-max", .kind = OPT_NUM, .field = F(frontier_max), .lo = FKV_FRONTIER_LO, .hi = 64, .flags = LO_OPEN, .why = "a fraction of peak demand in (0.05, 64]",
     .help = "  --frontier-max X         the search's top, a fraction of peak (1.0; reuse of finished requests'\n"
              "                           prefixes can need more than the peak live demand)\n"},
    {.name = "--max-batch-tokens", .kind = OPT_NUM, .field = F(sim.sched.max_batch_tokens), .store = ST_U32, .lo = 1, .hi = 1e7, .flags = WHOLE, .set = F(sim.batch_tokens_set),
     .help = "  --max-batch-tokens N     token budget per step (2048; vllm rows: vLLM's default for the\n"
              "                           profile's GPU, 8192 on H100)\n"},
    {.name = "--max-running", .kind = OPT_NUM, .field = F(sim.sched.max_running), .store = ST_U32, .lo = 1, .hi = 1e6, .flags = WHOLE, .set = F(sim.running_set),
     .help = "  --max-running N          running requests (256; vllm rows: 1024 on H100)\n"},
    {.name = "--no-chunked-prefill", .kind = OPT_FLAG, .field = F(sim.sched.chunked_prefill), .value = 0,
     .help = "  --no-chunked-prefill     a prompt runs whole\n"},
    {.name = "--batching", .kind = OPT_CHOICE, .field = F(sim.sched.mode), .choices = batching,
     .help = "  --batching continuous|dynamic   --batch-window-ms W (50)\n"},
    {.name = "--batch-window-ms", .kind = OPT_NUM, .field = F(sim.sched.batch_window_ns), .store = ST_NS, .scale = 1e6, .lo = 0, .hi = INFINITY},
    {.name = "--admission", .kind = OPT_CHOICE, .field = F(sim.sched.admission), .choices = admission,
     .help = "  --admission fcfs|vtc     --miss recompute|reload (host tier over PCIe)\n"},
    {.name = "--miss", .kind = OPT_CHOICE, .field = F(sim.sched.miss), .choices = miss},
    {.name = "--alpha", .kind = OPT_NUM, .field = F(sim.alpha), .lo = 0, .hi = INFINITY,
     .help = "  --alpha A --beta B       F-LRU weights (library defaults 0.7, 0.3)\n"},
    {.name = "--beta", .kind = OPT_NUM, .field = F(sim.beta), .lo = 0, .hi = INFINITY},
    {.name = "--temperature", .kind = OPT_NUM, .field = F(sim.temperature), .lo = 0, .hi = INFINITY, .flags = LO_OPEN,
     .help = "  --temperature T          quota temperature   --min-retention-ms M\n"},
    {.name = "--min-retention-ms", .kind = OPT_NUM, .field = F(sim.min_retention_ns), .store = ST_NS, .scale = 1e6, .lo = 0, .hi = INFINITY},
    {.name = "--quant", .kind = OPT_CHOICE, .field = F(sim.quant), .choices = quant,
     .help = "  --quant off|always|under-pressure   cold-chunk quantization (off)\n"},
    {.name = "--quant-dtype", .kind = OPT_CHOICE, .field = F(sim.quant_dtype), .choices = quant_dtype,
     .help = "  --quant-dtype int8|int4|fp8  --quant-hot N (tokens kept full precision)   the scheme's\n"
             "                           (fairkv: int4 behind 64; others: int8 behind 128)\n"},
    {.name = "--quant-hot", .kind = OPT_NUM, .field = F(sim.quant_hot), .store = ST_INT, .lo = 0, .hi = 1e9},
    {.name = "--quant-warm", .kind = OPT_NUM, .field = F(sim.quant_warm), .store = ST_U32, .lo = 0, .hi = 1e9, .flags = WHOLE, .why = "a whole number of tokens",
     .help = "  --quant-warm N           precision ladder: int8 (or fp8) for N tokens past the hot ones, then int4 (0: off)\n"},
    {.name = "--price-kv-bytes", .kind = OPT_FLAG, .field = F(sim.price_kv_bytes), .value = 1,
     .help = "  --price-kv-bytes         attention's memory time by the bytes each request's K/V take at their\n"
              "                           stored precisions, codes and scales (vllm-fp8: half); default: fp16 bytes\n"},
    {.help = "output:\n"},
    {.name = "--schemes", .kind = OPT_STR, .field = F(schemes),
     .help = "  --schemes a,b,...        schemes to run (default all)\n"},
    {.name = "--format", .kind = OPT_CHOICE, .field = F(format), .store = ST_STR, .choices = formats,
     .help = "  --format text|json|csv   --output FILE   --plot DIR   --quiet\n"},
    {.name = "--output", .kind = OPT_STR, .field = F(output)},
    {.name = "--plot", .kind = OPT_STR, .field = F(plot_dir)},
    {.name = "--step-trace",
     .kind = OPT_STR,
     .field = F(step_trace),
     .help = "  --step-trace FILE        every scheme's simulated steps, a line each: start, end, tokens and\n"
             "                           each item's tenant, kind, tokens, context, request, arrival\n"
             "                           (docs/OPERATIONS.md); one load, not with --frontier\n"},
    {.name = "--quiet", .kind = OPT_FLAG, .field = F(quiet), .value = 1},
    {.help = "schemes:\n"},
};
/* clang-format on */

#undef F

void fkv_bench_usage(FILE *f)
{
    size_t n;
    const fkv_scheme *s = fkv_scheme_list(&n);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        if (rows[r].help) fputs(rows[r].help, f);
    for (size_t i = 0; i < n; i++) fprintf(f, "  %-13s %s\n", s[i].name, s[i].what);
    fprintf(f, "profiles:");
    for (const char *const *p = fkv_profile_names(); *p; p++) fprintf(f, " %s", *p);
    fprintf(f, "\n");
}

/* v as row's number: 0, or -1 when it is not one or out of the range */
static int take_num(const opt_row *row, const char *v, void *field)
{
    double d;
    if (num(v, &d)) return -1;
    if (row->flags & LO_OPEN ? !(d > row->lo) : !(d >= row->lo)) return -1;
    if (row->flags & HI_OPEN ? !(d < row->hi) : !(d <= row->hi)) return -1;
    if (row->flags & WHOLE && d != floor(d)) return -1;
    double x = row->scale ? d * row->scale : d;
    switch (row->store) {
    case ST_F64: *(double *)field = x; break;
    case ST_U32: *(uint32_t *)field = (uint32_t)x; break;
    case ST_U64: *(uint64_t *)field = (uint64_t)x; break;
    case ST_SIZE: *(size_t *)field = (size_t)x; break;
    case ST_NS: *(int64_t *)field = (int64_t)llround(x); break;
    case ST_INT: *(int *)field = (int)x; break;
    case ST_STR: return -1;
    }
    return 0;
}

int fkv_bench_parse_opt(fkv_bench_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const opt_row *row = NULL;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0] && !row; r++)
        if (rows[r].name && !strcmp(rows[r].name, a)) row = &rows[r];
    if (!row) return 0;
    void *field = (char *)o + row->field;
    char why[200] = "";
    switch (row->kind) {
    case OPT_FLAG: *(int *)field = row->value; break;
    case OPT_FLAG_CALL: row->call(o, NULL, why, sizeof why); break;
    case OPT_HELP: return 0;
    default: {
        const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
        if (!v) return bad(a, v);
        (*i)++;
        int fail = 0;
        if (row->kind == OPT_STR) {
            *(const char **)field = v;
        } else if (row->kind == OPT_NUM) {
            fail = take_num(row, v, field);
        } else if (row->kind == OPT_CHOICE) {
            const opt_choice *c = row->choices;
            while (c->word && strcmp(c->word, v)) c++;
            if (!c->word) fail = 1;
            else if (row->store == ST_STR) *(const char **)field = v;
            else *(int *)field = c->value;
        } else {
            fail = row->call(o, v, why, sizeof why) != 0;
        }
        if (fail) return why[0] ? bad_why(a, v, why) : row->why ? bad_why(a, v, row->why) : bad(a, v);
    }
    }
    if (row->set) *(int *)((char *)o + row->set) = 1;
    return 1;
}
