/* Fitted step coefficients in the simulator: fkv_profile_set_coeffs prices
 * a step as c0 + c1 tokens + c2 attention work + c3 requests; the built-in
 * profiles keep no per-request term (their step prices are what they were:
 * the golden tests check whole runs); `--step-coeffs` rejects bad values
 * naming the fault and changes what a bench run simulates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim/bench.h"

/* Hand-priced steps.  Coefficients c = (0.25, 0.32, 7.4e-5, 0.13) ms: a
 * step, a token, a unit of attention work, a request.  The attention work of
 * an item of n new tokens after ctx, r of them recomputed (restored) inside
 * ctx, is n (ctx + (n + 1) / 2) + r ctx / 2 (profile.h).
 *  A, one decode: ctx 100, n 1: 1 token, work 101
 *     0.25 + 0.32 + 7.4e-5 x 101 + 0.13 = 0.707474 ms
 *  B, three items: a prefill of 64 at ctx 0 (work 64 x 32.5 = 2080), a
 *     decode at ctx 500 (501), a decode at ctx 300 that recomputes 17
 *     evicted tokens first (301 + 17 x 150 = 2851): 64 + 1 + 17 + 1 = 83
 *     tokens, work 5432
 *     0.25 + 0.32 x 83 + 7.4e-5 x 5432 + 0.13 x 3 = 27.601968 ms
 *  B with the 17 tokens reloaded instead: not in the budget (66 tokens),
 *     no attention of their own (work 2882), and the fitted form has no
 *     transfer term
 *     0.25 + 0.32 x 66 + 7.4e-5 x 2882 + 0.39 = 21.973268 ms
 *  A with three coefficients (no per-request term): 0.577474 ms */
static void batch_a(fkv_batch *b, fkv_batch_item *it)
{
    it[0] = (fkv_batch_item){.ctx = 100, .n_new = 1, .kind = FKV_ITEM_DECODE};
    *b = (fkv_batch){it, 1, 3, 1, 0, 0, 0, NULL, 0, 0, 0, 0, 0};
}

static void batch_b(fkv_batch *b, fkv_batch_item *it, int reload)
{
    it[0] = (fkv_batch_item){.ctx = 0, .n_new = 64, .kind = FKV_ITEM_PROMPT};
    it[1] = (fkv_batch_item){.ctx = 500, .n_new = 1, .kind = FKV_ITEM_DECODE};
    it[2] = (fkv_batch_item){.ctx = 300, .n_restored = 17, .n_new = 1, .kind = FKV_ITEM_DECODE};
    *b = (fkv_batch){it, 3, 3, reload ? 66 : 83, reload ? 17 : 0, 0, 0, NULL, 0, 0, 0, 0, 0};
}

static void test_pricing(void)
{
    fkv_profile p;
    char err[256];
    REQUIRE(fkv_profile_get("cpu-tiny", NULL, &p, err, sizeof err) == FKV_OK);
    const double c[4] = {0.25, 0.32, 7.4e-5, 0.13};
    REQUIRE(fkv_profile_set_coeffs(&p, c, 4, err, sizeof err) == FKV_OK);
    CHECK(p.overhead_ms == c[0] && p.per_request_ms == c[3] && p.hbm_bytes_per_s == 0);
    fkv_batch_item it[3];
    fkv_batch b;
    batch_a(&b, it);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) == 707474, "A: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE));
    batch_b(&b, it, 0);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) == 27601968, "B: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE));
    batch_b(&b, it, 1);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RELOAD) == 21973268, "B reloaded: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RELOAD));
    /* three values: no per-request term */
    REQUIRE(fkv_profile_set_coeffs(&p, c, 3, err, sizeof err) == FKV_OK);
    CHECK(p.per_request_ms == 0);
    batch_a(&b, it);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) == 577474, "A, 3 values: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE));
    /* bad values leave an error naming the coefficient */
    const double bad1[4] = {0.1, 0, 1e-5, 0}, bad2[4] = {0.1, 0.3, -1e-5, 0}, bad3[4] = {0.1, NAN, 1e-5, 0},
                 bad4[4] = {-1, 0.3, 1e-5, 0.2};
    CHECK(fkv_profile_set_coeffs(&p, bad1, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c1"));
    CHECK(fkv_profile_set_coeffs(&p, bad2, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c2"));
    CHECK(fkv_profile_set_coeffs(&p, bad3, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c1"));
    CHECK(fkv_profile_set_coeffs(&p, bad4, 4, err, sizeof err) == FKV_EINVAL && strstr(err, "one-token"));
    CHECK(fkv_profile_set_coeffs(&p, c, 2, err, sizeof err) == FKV_EINVAL && strstr(err, "3, 4 or 7"));
    fkv_profile_free(&p);

    /* The built-in cpu-tiny prices steps as its documented fit (profile.c):
     * 0.204025 + 0.299427 x tokens + 7.48289e-05 x work + 0.160692 x
     * requests ms.  A: 0.204025 + 0.299427 + 0.0075577189 + 0.160692 =
     * 0.6717017 ms; B: 0.204025 + 24.852441 + 0.4064706 + 0.482076 =
     * 25.9450126 ms.  (The profile stores c2 as the "peak" 2.73691e10 FLOP/s
     * for 4 L H D = 2048: the same ns.) */
    REQUIRE(fkv_profile_get("cpu-tiny", NULL, &p, err, sizeof err) == FKV_OK);
    batch_a(&b, it);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) == 671702, "cpu-tiny A: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE));
    batch_b(&b, it, 0);
    CHECKF(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) == 25945013, "cpu-tiny B: %lld ns",
           (long long)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE));
    fkv_profile_free(&p);
    /* no built-in profile has a per-request term but the fitted cpu-tiny */
    for (const char *const *nm = fkv_profile_names(); *nm; nm++) {
        REQUIRE(fkv_profile_get(*nm, NULL, &p, err, sizeof err) == FKV_OK);
        CHECKF(strncmp(*nm, "cpu-", 4) ? p.per_request_ms == 0 : p.per_request_ms == 0.160692, "%s: %g", *nm,
               p.per_request_ms);
        fkv_profile_free(&p);
    }
}

/* The GPU profiles' attention from the datasheet figures profile.c cites
 * (A100 80GB SXM: 2,039 GB/s HBM, 312 TFLOPS dense fp16, efficiency 0.5)
 * and the Llama 2 geometry: the larger of KV bytes read / bandwidth and
 * 4 L H D x work / (tp x peak x efficiency).
 *  7B (32 layers, 32 heads of 128; K+V 2 x 32 x 32 x 128 x 2 = 524288 B a
 *  token), tp 1:
 *   decode at ctx 4095: memory 4096 x 524288 / 2.039e12 = 1.0532 ms,
 *     compute 524288 x 4096 / 1.56e14 = 0.0138 ms: memory-bound
 *   prefill of 2048 at ctx 0: work 2048 x 1024.5 = 2098176, compute
 *     524288 x 2098176 / 1.56e14 = 7.0516 ms, memory 0.5266 ms
 *  70B (80 layers, 8 KV heads: 327680 B a token), tp 4: decode at ctx
 *   4095: memory 4096 x 327680 / 4 / 2.039e12 = 0.16456 ms, compute
 *   4 x 80 x 64 x 128 x 4096 / (4 x 1.56e14) = 0.0172 ms */
static void test_gpu_attention(void)
{
    fkv_profile p;
    char err[256];
    REQUIRE(fkv_profile_get("a100-llama2-7b", NULL, &p, err, sizeof err) == FKV_OK);
    double want = 1e3 * 4096.0 * 524288 / 2.039e12, got = fkv_profile_attn_ms(&p, 4095, 1, 0);
    CHECKF(fabs(got - want) < 1e-12 * want && fabs(want - 1.0532) < 1e-4, "7B decode %.9g ms, want %.9g", got, want);
    want = 1e3 * 524288.0 * 2098176 / (312e12 * 0.5);
    got = fkv_profile_attn_ms(&p, 0, 2048, 0);
    CHECKF(fabs(got - want) < 1e-12 * want && fabs(want - 7.0516) < 1e-4, "7B prefill %.9g ms, want %.9g", got, want);
    /* priced by stored bytes (--price-kv-bytes): fp8's half of fp16 halves
     * the memory-bound decode; the compute-bound prefill does not move */
    want = 0.5 * 1e3 * 4096.0 * 524288 / 2.039e12;
    got = fkv_profile_attn_ms_kv(&p, 4095, 1, 0, 0.5);
    CHECKF(fabs(got - want) < 1e-12 * want, "7B decode at fp8 %.9g ms, want %.9g", got, want);
    CHECK(fkv_profile_attn_ms_kv(&p, 4095, 1, 0, 1.0) == fkv_profile_attn_ms(&p, 4095, 1, 0));
    CHECK(fkv_profile_attn_ms_kv(&p, 0, 2048, 0, 0.5) == fkv_profile_attn_ms(&p, 0, 2048, 0));
    fkv_profile_free(&p);
    REQUIRE(fkv_profile_get("a100-llama2-70b", NULL, &p, err, sizeof err) == FKV_OK);
    want = 1e3 * 4096.0 * 327680 / 4 / 2.039e12;
    got = fkv_profile_attn_ms(&p, 4095, 1, 0);
    CHECKF(fabs(got - want) < 1e-12 * want && fabs(want - 0.16456) < 1e-5, "70B decode %.9g ms, want %.9g", got, want);
    fkv_profile_free(&p);
}

static int parse(fkv_bench_opts *o, const char *v)
{
    char *argv[] = {"bench", "--step-coeffs", (char *)v, NULL};
    int i = 1;
    return fkv_bench_parse_opt(o, v ? 3 : 2, argv, &i);
}

static void test_option(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    CHECK(parse(&o, "0.25,0.32,7.4e-5,0.13") == 1 && o.n_step_coeffs == 4 && o.step_coeffs[3] == 0.13);
    CHECK(parse(&o, "0.5,0.3,6e-5") == 1 && o.n_step_coeffs == 3 && o.step_coeffs[0] == 0.5);
    static const struct {
        const char *v, *why;
    } bad[] = {
        {"", "value 1 is not a number"},         {"1,2", "2 values"},
        {"1,2,3,4,5", "5 values"},              {"1,x,3", "value 2 is not a number"},
        {"1,2,3,4,5,6,7,8", "more than 7"},     {"1,2,3,4,5,-6,7", "c5"},
        {"1,2,", "value 3 is not a number"},    {"1,0,3", "c1"},
        {"1,2,-3", "c2"},                       {"inf,2,3", "c0"},
        {"-5,1,0,1", "one-token step"},         {"1;2;3", "value 1 is not a number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        double c[7];
        size_t n;
        char why[200] = "";
        CHECKF(fkv_bench_parse_coeffs(bad[k].v, c, &n, why, sizeof why) == -1 && strstr(why, bad[k].why),
               "'%s': '%s'", bad[k].v, why);
        CHECK(parse(&o, bad[k].v) == -1);
    }
    CHECK(parse(&o, NULL) == -1); /* no value */
}

/* The coefficients reach the simulation: doubling every coefficient
 * doubles every step, so a lightly loaded run's mean latency grows. */
static double mean_latency(const char *coeffs)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.profile = "cpu-tiny";
    o.requests = 200;
    o.quiet = 1;
    o.schemes = "lru";
    o.load_lo = o.load_hi = 0.3;
    o.sim.sched.max_batch_tokens = 256;
    o.sim.sched.max_running = 16;
    if (coeffs) REQUIRE(parse(&o, coeffs) == 1);
    char err[512] = "";
    fkv_bench_ctx c;
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, 0.3, &w, &rate) == FKV_OK);
    fkv_scheme_summary s;
    size_t n = 0;
    REQUIRE(fkv_bench_schemes(&c, &w, &s, NULL, &n, 1, err, sizeof err) == FKV_OK && n == 1);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
    return s.e2e.mean_ms;
}

static void test_bench(void)
{
    double a = mean_latency("0.25,0.32,7.4e-5,0.13"), b = mean_latency("0.5,0.64,14.8e-5,0.26");
    /* the load is a fraction of each profile's own saturation throughput,
     * so both runs see the same queueing and latency scales with the step */
    CHECKF(fabs(b / a - 2) < 0.05, "mean %g ms, doubled coefficients %g ms", a, b);
}

int main(void)
{
    test_pricing();
    test_gpu_attention();
    test_option();
    test_bench();
    return check_done();
}
