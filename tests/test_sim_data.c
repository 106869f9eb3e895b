/* The real inputs under ../shared/data (FKV_DATA_DIR), checked against
 * values the test derives itself:
 *  - the Azure and Mooncake traces parse whole with the published row
 *    counts and means (data README), and the first rows of each read as the
 *    test's own reader of the file reads them;
 *  - a slice of each trace, run one request at a time (arrivals 1000 s
 *    apart), gives every request exactly the latency of an idle system,
 *    priced here from the cpu-tiny profile's documented coefficients, and on
 *    Mooncake exactly the prefix hits of a small model of the hash ids with
 *    unlimited memory;
 *  - the same slices at their real arrivals, under memory pressure, finish
 *    every request no faster than the work it must do allows;
 *  - the Vidur profiles parsed at run time equal the embedded tables.
 * Skips (77) when the data folder is absent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "sim/profile.h"
#include "sim/sim.h"
#include "sim/workload.h"

/* cpu-tiny's step price as profile.c documents it (the fit of the served
 * engine's step times):
 *   step ms = 0.204025 + 0.299427 x tokens + attention + 0.160692 x requests
 * with attention = 4 L H D x work / peak, fairkv-tiny's L = 4 layers, H = 4
 * query heads, D = 32 (4 L H D = 2048 FLOPs per query-key pair), the stored
 * "peak" 2.73691e10 FLOP/s at efficiency 1 and no memory term, and the work
 * of n new tokens after ctx tokens n x (ctx + (n + 1) / 2) (each of them
 * sees the context and, causally, half the chunk).  A step lasts its price
 * rounded to whole ns. */
#define C0 0.204025
#define C1 0.299427
#define C3 0.160692
#define FLOP_PAIR 2048.0
#define PEAK 2.73691e10
#define BUDGET 2048u         /* sched.h: max_batch_tokens default */
#define PAGE 16u             /* schemes.c: pages of 16 tokens */
#define BLOCK 512u           /* data README: Mooncake's hash_ids block */
#define APART 1000000000000LL /* 1000 s between arrivals: one request at a time */

static double attn_ms(double work) { return 1e3 * FLOP_PAIR * work / PEAK; }

/* One request alone in a step: n new tokens after ctx. */
static int64_t step_ns(uint32_t ctx, uint32_t n)
{
    double ms = C0 + C1 * n + C3 + attn_ms((double)n * ((double)ctx + (n + 1) / 2.0));
    return llround(ms * 1e6);
}

/* A request alone in the system: prompt P with m tokens matched in the
 * prefix cache, O output tokens.  The prefill runs in chunks of BUDGET from
 * position m; the step that ends it emits token 1; each of the O - 1 decode
 * steps appends the previous token (context P, P + 1, ...) and emits the
 * next.  Every step reads the context it starts with (hits). */
typedef struct idle {
    int64_t ttft, e2e;
    uint64_t steps, hits;
} idle;

static idle idle_latency(uint32_t P, uint32_t O, uint32_t m)
{
    idle r = {0, 0, 0, 0};
    for (uint32_t c = m; c < P;) {
        uint32_t n = P - c < BUDGET ? P - c : BUDGET;
        r.ttft += step_ns(c, n);
        r.hits += c;
        r.steps++;
        c += n;
    }
    r.e2e = r.ttft;
    for (uint32_t j = 1; j < O; j++) {
        r.e2e += step_ns(P + j - 1, 1);
        r.hits += P + j - 1;
        r.steps++;
    }
    return r;
}

/* Lower bounds at any load, ms.  Every step a request is in costs at least
 * c0 + c3 plus its own tokens and attention work (the others' add to it);
 * it is in at least O steps (one emission each); it computes every prompt
 * position from m on and every output position but the last once at least,
 * and position p costs p + 1 of work however the prompt is chunked:
 *   e2e >= (c0 + c3) O + c1 (P - m + O - 1)
 *          + c2 ((P (P + 1) - m (m + 1)) / 2 + (O - 1) P + (O - 1) O / 2)
 *   ttft >= c0 + c3 + c1 (P - m) + c2 (P (P + 1) - m (m + 1)) / 2
 * This holds when m bounds what the request matches and it never loses
 * computed tokens for good (no cache, or the keep-on-preemption schemes).
 * With any scheme, emission k (k = 1..O) computes at least one token at
 * position >= P + k - 2:
 *   e2e >= O (c0 + c3 + c1) + c2 (O P + O (O - 1) / 2)
 *   ttft >= c0 + c3 + c1 + c2 P */
static double lb_e2e(uint32_t P, uint32_t O, uint32_t m)
{
    double p = P, o = O, mm = m;
    double work = (p * (p + 1) - mm * (mm + 1)) / 2 + (o - 1) * p + (o - 1) * o / 2;
    return (C0 + C3) * o + C1 * (p - mm + o - 1) + attn_ms(work);
}

static double lb_ttft(uint32_t P, uint32_t m)
{
    double p = P, mm = m;
    return C0 + C3 + C1 * (p - mm) + attn_ms((p * (p + 1) - mm * (mm + 1)) / 2);
}

static double lb_e2e_any(uint32_t P, uint32_t O)
{
    double p = P, o = O;
    return o * (C0 + C3 + C1) + attn_ms(o * p + o * (o - 1) / 2);
}

static double lb_ttft_any(uint32_t P) { return C0 + C3 + C1 + attn_ms(P); }

/* A copy of w's requests with arrivals APART apart (blocks still w's). */
static fkv_workload spaced(const fkv_workload *w)
{
    fkv_workload s = *w;
    s.reqs = malloc(w->n * sizeof *s.reqs);
    REQUIRE(s.reqs);
    memcpy(s.reqs, w->reqs, w->n * sizeof *s.reqs);
    for (size_t i = 0; i < w->n; i++) s.reqs[i].arrival_ns = (int64_t)i * APART;
    s.blocks = NULL;
    return s;
}

/* One row as the test reads the file itself. */
typedef struct row {
    int64_t t_ns;
    uint32_t in, out;
    uint64_t *ids;
    uint32_t n_ids;
} row;

/* The first n data rows of the Azure CSV: "YYYY-MM-DD hh:mm:ss.fffffff,in,out"
 * (every row of the slice on one date; 7 fraction digits = 100 ns). */
static size_t read_azure(const char *path, row *rows, size_t n)
{
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    char line[256];
    REQUIRE(fgets(line, sizeof line, f) && !strncmp(line, "TIMESTAMP,ContextTokens,GeneratedTokens", 39));
    size_t k = 0;
    int day0 = -1;
    while (k < n && fgets(line, sizeof line, f)) {
        int y, mo, d, h, mi, s;
        char frac[16];
        unsigned in, out;
        REQUIRE(sscanf(line, "%d-%d-%d %d:%d:%d.%15[0-9],%u,%u", &y, &mo, &d, &h, &mi, &s, frac, &in, &out) == 9);
        REQUIRE(strlen(frac) == 7);
        if (day0 < 0) day0 = d;
        REQUIRE(d == day0);
        rows[k].t_ns = (((int64_t)h * 60 + mi) * 60 + s) * 1000000000LL + atoll(frac) * 100;
        rows[k].in = in;
        rows[k].out = out;
        rows[k].ids = NULL;
        rows[k].n_ids = 0;
        k++;
    }
    fclose(f);
    return k;
}

/* The first n lines of the Mooncake JSONL:
 * {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} */
static size_t read_mooncake(const char *path, row *rows, size_t n)
{
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    static char line[1 << 16];
    size_t k = 0;
    while (k < n && fgets(line, sizeof line, f)) {
        REQUIRE(strchr(line, '\n'));
        const char *t = strstr(line, "\"timestamp\":"), *a = strstr(line, "\"input_length\":"),
                   *b = strstr(line, "\"output_length\":"), *h = strstr(line, "\"hash_ids\": [");
        REQUIRE(t && a && b && h);
        rows[k].t_ns = atoll(t + 12) * 1000000LL;
        rows[k].in = (uint32_t)atol(a + 15);
        rows[k].out = (uint32_t)atol(b + 16);
        uint32_t cap = 16, m = 0;
        uint64_t *ids = malloc(cap * sizeof *ids);
        REQUIRE(ids);
        for (char *p = (char *)h + 13; *p != ']';) {
            char *e;
            unsigned long long v = strtoull(p, &e, 10);
            REQUIRE(e != p);
            if (m == cap) REQUIRE((ids = realloc(ids, (cap *= 2) * sizeof *ids)));
            ids[m++] = v;
            p = e;
            while (*p == ',' || *p == ' ') p++;
        }
        rows[k].ids = ids;
        rows[k].n_ids = m;
        k++;
    }
    fclose(f);
    return k;
}

/* The loader agrees with the test's reading of the same rows. */
static void same_rows(const fkv_workload *w, const row *rows, size_t n, uint32_t n_clients)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const fkv_req *r = &w->reqs[i];
        fkv_sim_tokens ts = fkv_workload_tokens(w, 512);
        fkv_req_src src = fkv_sim_src(&ts, r);
        int ok = r->id == i + 1 && r->prompt == rows[i].in && r->output == (rows[i].out ? rows[i].out : 1) &&
                 r->arrival_ns == rows[i].t_ns - rows[0].t_ns && r->client == i % n_clients &&
                 src.n_block_ids == rows[i].n_ids;
        for (uint32_t b = 0; ok && b < rows[i].n_ids; b++) ok = src.block_ids[b] == rows[i].ids[b];
        if (!ok && bad++ < 3)
            fprintf(stderr, "row %zu: read %u,%u at %lld ns with %u ids; loaded %u,%u at %lld with %u\n", i,
                    rows[i].in, rows[i].out, (long long)(rows[i].t_ns - rows[0].t_ns), rows[i].n_ids, r->prompt,
                    r->output, (long long)r->arrival_ns, src.n_block_ids);
    }
    CHECKF(bad == 0, "%zu of %zu rows differ", bad, n);
}

/* Prefix hits with unlimited memory, one request at a time.  A prompt
 * position p of request i holds the token named by (block id p / 512,
 * p mod 512) (sched.h, fkv_req_token); the positions after the prompt are
 * unique to the request.  So request i shares with an earlier request j
 * the first min(512 k, P_i, P_j) tokens, k the number of leading equal block
 * ids, and finds the longest such prefix over all earlier requests, in
 * whole 16-token pages, keeping its last prompt token to compute. */
static void prefix_model(const row *rows, size_t n, uint32_t *M)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t best = 0;
        for (size_t j = 0; j < i; j++) {
            uint32_t k = 0;
            while (k < rows[i].n_ids && k < rows[j].n_ids && rows[i].ids[k] == rows[j].ids[k]) k++;
            uint64_t l = (uint64_t)BLOCK * k;
            if (l > rows[i].in) l = rows[i].in;
            if (l > rows[j].in) l = rows[j].in;
            if (l > best) best = (uint32_t)l;
        }
        if (best > rows[i].in - 1) best = rows[i].in - 1;
        M[i] = best / PAGE * PAGE;
    }
}

/* Every request of r against the bounds (m[i] = NULL: nothing matched). */
static void check_bounds(const char *what, const fkv_sim_result *r, const row *rows, size_t n, const uint32_t *m,
                         int keeps)
{
    size_t below = 0;
    /* each step's rounding to ns takes at most half a ns off its price */
    double slack_ms = 0.5e-6 * (double)r->steps;
    for (size_t i = 0; i < n; i++) {
        uint32_t P = rows[i].in, O = rows[i].out ? rows[i].out : 1, mi = m ? m[i] : 0;
        double e2e = r->e2e_ns[i] / 1e6, ttft = r->ttft_ns[i] / 1e6;
        int ok = r->e2e_ns[i] >= 0 && e2e + slack_ms >= lb_e2e_any(P, O) && ttft + slack_ms >= lb_ttft_any(P);
        if (keeps) ok = ok && e2e + slack_ms >= lb_e2e(P, O, mi) && ttft + slack_ms >= lb_ttft(P, mi);
        if (!ok && below++ < 3)
            fprintf(stderr, "%s: request %zu (%u, %u, m %u): e2e %.3f ttft %.3f ms; bounds %.3f %.3f\n", what, i, P, O,
                    mi, e2e, ttft, keeps ? lb_e2e(P, O, mi) : lb_e2e_any(P, O), keeps ? lb_ttft(P, mi) : lb_ttft_any(P));
    }
    CHECKF(below == 0, "%s: %zu requests faster than their work allows", what, below);
}

/* Sums of a slice of rows. */
static void totals(const row *rows, size_t n, uint64_t *in, uint64_t *out)
{
    *in = *out = 0;
    for (size_t i = 0; i < n; i++) {
        *in += rows[i].in;
        *out += rows[i].out ? rows[i].out : 1;
    }
}

/* The one-at-a-time run of w under sc: exact latencies, steps and hits. */
static void check_alone(const fkv_workload *w, const row *rows, const uint32_t *M, const fkv_scheme *sc,
                        uint64_t capacity, const fkv_profile *prof)
{
    size_t n = w->n;
    fkv_workload sp = spaced(w);
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = prof;
    c.capacity_tokens = capacity;
    c.sched.n_clients = 4;
    fkv_sim_result r;
    char err[512] = "";
    fkv_status st = fkv_sim_run(&sp, sc, &c, &r, err, sizeof err);
    if (st) fprintf(stderr, "%s alone: %s\n", sc ? sc->name : "no cache", err);
    REQUIRE(st == FKV_OK);
    const char *name = sc ? sc->name : "no cache";
    uint64_t in, out, steps = 0, hits = 0, matched = 0;
    totals(rows, n, &in, &out);
    size_t off = 0, late = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t m = M ? M[i] : 0;
        idle id = idle_latency(rows[i].in, rows[i].out ? rows[i].out : 1, m);
        steps += id.steps;
        hits += id.hits;
        matched += m;
        late += r.e2e_ns[i] < 0 || r.e2e_ns[i] >= APART; /* the premise: done before the next arrives */
        if ((r.e2e_ns[i] != id.e2e || r.ttft_ns[i] != id.ttft) && off++ < 3)
            fprintf(stderr, "%s alone: request %zu (%u, %u, m %u): e2e %lld ttft %lld ns, want %lld %lld\n", name,
                    i, rows[i].in, rows[i].out, m, (long long)r.e2e_ns[i], (long long)r.ttft_ns[i],
                    (long long)id.e2e, (long long)id.ttft);
    }
    CHECKF(late == 0, "%s alone: %zu requests not done before the next arrival", name, late);
    CHECKF(off == 0, "%s alone: %zu of %zu latencies differ from the idle-system price", name, off, n);
    CHECKF(r.done == n && r.rejected == 0, "%s alone: %zu done, %zu rejected", name, r.done, r.rejected);
    CHECKF(r.steps == steps, "%s alone: %llu steps, want %llu", name, (unsigned long long)r.steps,
           (unsigned long long)steps);
    CHECK(r.prompt_tokens == in && r.prompt_tokens_all == in && r.output_tokens == out);
    CHECK(r.preemptions == 0 && r.recomputed_tokens == 0);
    CHECKF(r.makespan_ns == (int64_t)(n - 1) * APART + r.e2e_ns[n - 1], "%s alone: makespan %lld", name,
           (long long)r.makespan_ns);
    if (sc) {
        /* nothing was ever evicted (the capacity holds every token of the
         * slice), so every read hit and the matches are the model's */
        CHECKF(r.evicted_pages == 0, "%s alone: %llu pages evicted", name, (unsigned long long)r.evicted_pages);
        CHECKF(r.hit_tokens == hits && r.miss_tokens == 0, "%s alone: hits %llu misses %llu, want %llu 0", name,
               (unsigned long long)r.hit_tokens, (unsigned long long)r.miss_tokens, (unsigned long long)hits);
        CHECKF(r.matched_tokens == matched && r.prefix_hit_tokens == matched, "%s alone: matched %llu (%llu), want %llu",
               name, (unsigned long long)r.matched_tokens, (unsigned long long)r.prefix_hit_tokens,
               (unsigned long long)matched);
        /* every prompt is looked up once, less the token kept to compute */
        CHECKF(r.prefix_query_tokens == in - n, "%s alone: queried %llu, want %llu", name,
               (unsigned long long)r.prefix_query_tokens, (unsigned long long)(in - n));
    }
    fkv_sim_result_free(&r);
    free(sp.reqs);
}

/* The slice at its real arrivals under scheme sc: every request done, the
 * totals, matches no more than the model's, the latency bounds. */
static void check_loaded(const fkv_workload *w, const row *rows, const uint32_t *M, const char *scheme,
                         uint64_t capacity, const fkv_profile *prof)
{
    size_t n = w->n;
    const fkv_scheme *sc = scheme ? fkv_scheme_find(scheme) : NULL;
    REQUIRE(!scheme || sc);
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = prof;
    c.capacity_tokens = capacity;
    c.sched.n_clients = 4;
    fkv_sim_result r;
    char err[512] = "";
    fkv_status st = fkv_sim_run(w, sc, &c, &r, err, sizeof err);
    if (st) fprintf(stderr, "%s: %s\n", scheme ? scheme : "no cache", err);
    REQUIRE(st == FKV_OK);
    const char *name = scheme ? scheme : "no cache";
    uint64_t in, out, mod = 0;
    totals(rows, n, &in, &out);
    for (size_t i = 0; i < n; i++) mod += M ? M[i] : 0;
    CHECKF(r.done == n && r.rejected == 0, "%s: %zu of %zu done, %zu rejected", name, r.done, n, r.rejected);
    CHECK(r.prompt_tokens == in && r.output_tokens == out);
    /* a first admission can only match what earlier requests computed */
    CHECKF(r.matched_tokens <= mod, "%s: matched %llu, more than the %llu of unlimited memory", name,
           (unsigned long long)r.matched_tokens, (unsigned long long)mod);
    if (!M) CHECKF(r.matched_tokens == 0, "%s: matched %llu with no shared prefix", name,
                   (unsigned long long)r.matched_tokens);
    int keeps = !sc || sc->on_preempt == FKV_PREEMPT_KEEP;
    check_bounds(name, &r, rows, n, M, keeps);
    /* the capacity is small enough that the pressure path runs */
    if (sc) CHECKF(r.evicted_pages > 0 && r.preemptions > 0, "%s: %llu pages evicted, %llu preemptions", name,
                   (unsigned long long)r.evicted_pages, (unsigned long long)r.preemptions);
    fkv_sim_result_free(&r);
}

static void azure(const char *path, const fkv_profile *prof)
{
    enum { N = 50 };
    row rows[N];
    REQUIRE(read_azure(path, rows, N) == N);
    for (size_t i = 1; i < N; i++) REQUIRE(rows[i].t_ns >= rows[i - 1].t_ns); /* file order is arrival order */
    fkv_workload w;
    char err[512] = "";
    REQUIRE(fkv_trace_load(path, FKV_TRACE_AUTO, N, 4, &w, err, sizeof err) == FKV_OK);
    REQUIRE(w.n == N);
    same_rows(&w, rows, N, 4);
    /* the first rows, read by eye: 374 -> 44 at 18:15:46.6805900, 396 -> 109
     * at 18:15:50.9951690 (4.314579 s later) */
    CHECK(w.reqs[0].prompt == 374 && w.reqs[0].output == 44 && w.reqs[1].prompt == 396 &&
          w.reqs[1].output == 109 && w.reqs[1].arrival_ns == 4314579000LL);
    /* the slice has prompts over the step budget (4085 tokens: two chunks) */
    uint32_t maxp = 0;
    for (size_t i = 0; i < N; i++) maxp = rows[i].in > maxp ? rows[i].in : maxp;
    CHECK(maxp > BUDGET);
    uint64_t in, out;
    totals(rows, N, &in, &out);
    /* one at a time: no cache, and an ample LRU cache (no shared prefixes
     * in Azure: token ids are unique per request) */
    check_alone(&w, rows, NULL, NULL, 0, prof);
    check_alone(&w, rows, NULL, fkv_scheme_find("lru"), in + out + (uint64_t)PAGE * N, prof);
    /* real arrivals: the slice arrives over 26.5 s and its work alone
     * takes about 17.6 s on the CPU profile (the sum of the bounds), so
     * requests overlap; a cache of 8000 tokens (two of the largest
     * prompts) forces evictions and preemptions */
    check_loaded(&w, rows, NULL, NULL, 0, prof);
    check_loaded(&w, rows, NULL, "flru-dyn", 8000, prof);
    check_loaded(&w, rows, NULL, "vllm", 8000, prof);
    fkv_workload_free(&w);
}

static void mooncake(const char *path, const fkv_profile *prof)
{
    enum { N = 200 };
    static row rows[N];
    REQUIRE(read_mooncake(path, rows, N) == N);
    for (size_t i = 1; i < N; i++) REQUIRE(rows[i].t_ns >= rows[i - 1].t_ns); /* file order is arrival order */
    fkv_workload w;
    char err[512] = "";
    REQUIRE(fkv_trace_load(path, FKV_TRACE_AUTO, N, 4, &w, err, sizeof err) == FKV_OK);
    REQUIRE(w.n == N);
    same_rows(&w, rows, N, 4);
    static uint32_t M[N];
    prefix_model(rows, N, M);
    /* The model's hits, checked by hand on the file: ten requests of the
     * first 200 reuse an earlier prefix.  Request 74 repeats request 15's
     * prompt (2752 tokens, the same 6 block ids): 172 pages, less the last
     * token kept to compute = 171 pages = 2736 tokens; request 180 repeats
     * request 124's 5891 tokens: 368 pages = 5888; request 49 shares 57
     * block ids with request 42: 57 x 512 = 29184. */
    size_t with = 0;
    for (size_t i = 0; i < N; i++) with += M[i] > 0;
    CHECKF(with == 10, "%zu requests with a prefix hit", with);
    CHECKF(M[74] == 2736 && M[180] == 5888 && M[49] == 29184, "model %u %u %u", M[74], M[180], M[49]);
    uint64_t in, out;
    totals(rows, N, &in, &out);
    uint64_t ample = in + out + (uint64_t)PAGE * N;
    /* one at a time with unlimited memory: fixed chunks, dynamic chunking
     * (matched heads split off), 16-token chunks */
    check_alone(&w, rows, M, fkv_scheme_find("lru"), ample, prof);
    check_alone(&w, rows, M, fkv_scheme_find("flru-dyn"), ample, prof);
    check_alone(&w, rows, M, fkv_scheme_find("vllm"), ample, prof);
    /* real arrivals: 58.5 s of trace for about 3900 s of work on the CPU
     * profile, a long queue; 300000 tokens, under four of the largest
     * prompt (82831 tokens) */
    check_loaded(&w, rows, M, NULL, 0, prof);
    check_loaded(&w, rows, M, "belady", 300000, prof);
    check_loaded(&w, rows, M, "flru-dyn", 300000, prof);
    check_loaded(&w, rows, M, "vllm", 300000, prof);
    fkv_workload_free(&w);
    for (size_t i = 0; i < N; i++) free(rows[i].ids);
}

int main(void)
{
    const char *dir = getenv("FKV_DATA_DIR");
    char az[1024], mc[1024];
    struct stat st;
    if (dir) {
        snprintf(az, sizeof az, "%s/azure_llm_conv_2023.csv", dir);
        snprintf(mc, sizeof mc, "%s/mooncake_synthetic.jsonl", dir);
    }
    if (!dir || stat(az, &st) != 0 || stat(mc, &st) != 0) {
        printf("SKIP: data folder absent (FKV_DATA_DIR=%s): needs azure_llm_conv_2023.csv, "
               "mooncake_synthetic.jsonl, vidur/*.csv\n", dir ? dir : "(unset)");
        return 77;
    }
    char err[512] = "";
    fkv_workload w;
    REQUIRE(fkv_trace_load(az, FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECKF(w.n == 19366, "azure rows %zu", w.n);
    CHECK(!strcmp(w.name, "azure"));
    /* one hour of trace; prompt mean 1155, output mean 211 (data README) */
    double in = 0, out = 0;
    for (size_t i = 0; i < w.n; i++) {
        in += w.reqs[i].prompt;
        out += w.reqs[i].output;
    }
    CHECKF(in / w.n > 1150 && in / w.n < 1160, "prompt mean %.1f", in / w.n);
    CHECKF(out / w.n > 206 && out / w.n < 216, "output mean %.1f", out / w.n);
    CHECKF(fkv_workload_span(&w) > 3500e9 && fkv_workload_span(&w) < 3700e9, "span %lld", (long long)fkv_workload_span(&w));
    fkv_workload_free(&w);

    REQUIRE(fkv_trace_load(mc, FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECKF(w.n == 3993, "mooncake rows %zu", w.n);
    size_t ok_blocks = 0;
    fkv_sim_tokens ts = fkv_workload_tokens(&w, 512);
    for (size_t i = 0; i < w.n; i++) ok_blocks += fkv_sim_src(&ts, &w.reqs[i]).n_block_ids == (w.reqs[i].prompt + 511) / 512;
    CHECK(ok_blocks == w.n); /* one id per 512-token block */
    fkv_workload_free(&w);

    fkv_profile prof;
    REQUIRE(fkv_profile_get("cpu-tiny", NULL, &prof, err, sizeof err) == FKV_OK);
    azure(az, &prof);
    mooncake(mc, &prof);

    /* run-time parse == embedded table, for every profile */
    for (const char *const *p = fkv_profile_names(); *p; p++) {
        if (!strncmp(*p, "cpu-", 4)) continue; /* measured on the engine: no data file */
        fkv_profile a, b;
        REQUIRE(fkv_profile_get(*p, NULL, &a, err, sizeof err) == FKV_OK);
        fkv_status s = fkv_profile_get(*p, dir, &b, err, sizeof err);
        CHECKF(s == FKV_OK, "%s: %s", *p, err);
        if (s) continue;
        CHECK(!a.from_data && b.from_data);
        CHECKF(a.n_lin == b.n_lin, "%s: %zu vs %zu rows", *p, a.n_lin, b.n_lin);
        size_t diff = 0;
        for (size_t i = 0; i < a.n_lin && i < b.n_lin; i++)
            diff += a.lin_tokens[i] != b.lin_tokens[i] || a.lin_ms[i] != b.lin_ms[i];
        CHECKF(diff == 0, "%s: %zu rows differ", *p, diff);
        fkv_profile_free(&b);
    }
    return check_done();
}
