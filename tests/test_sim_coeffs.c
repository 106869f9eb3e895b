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

static double attn_work(const fkv_batch *b)
{
    double a = 0;
    for (size_t i = 0; i < b->n; i++)
        a += (double)b->items[i].n_new * (b->items[i].ctx + (b->items[i].n_new + 1) / 2.0) +
             (double)b->items[i].n_restored * b->items[i].ctx / 2.0;
    return a;
}

static void test_pricing(void)
{
    fkv_profile p;
    char err[256];
    REQUIRE(fkv_profile_get("cpu-tiny", NULL, &p, err, sizeof err) == FKV_OK);
    const double c[4] = {0.25, 0.32, 7.4e-5, 0.13};
    REQUIRE(fkv_profile_set_coeffs(&p, c, 4, err, sizeof err) == FKV_OK);
    CHECK(p.overhead_ms == c[0] && p.per_request_ms == c[3] && p.hbm_bytes_per_s == 0);
    fkv_batch_item it[20];
    fkv_batch b = {it, 0, 20, 0, 0, 0, 0, NULL, 0, 0};
    uint64_t s = 7;
    int exact = 0, trials = 200;
    for (int t = 0; t < trials; t++) {
        b.n = 1 + (size_t)(t % 20);
        b.tokens = 0;
        for (size_t i = 0; i < b.n; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            it[i] = (fkv_batch_item){NULL, (uint32_t)(s >> 40) % 900, (uint32_t)(s >> 20) % 3 ? 0 : 17,
                                     (s >> 30) % 5 ? 1 : 64, 0, 0, 0};
            b.tokens += it[i].n_new + it[i].n_restored;
        }
        double want = c[0] + c[1] * b.tokens + c[2] * attn_work(&b) + c[3] * (double)b.n;
        double got = (double)fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) / 1e6;
        exact += fabs(got - want) <= 1e-6 + 1e-9 * want;
    }
    CHECKF(exact == trials, "%d of %d steps priced as the formula", exact, trials);
    /* three values: no per-request term */
    REQUIRE(fkv_profile_set_coeffs(&p, c, 3, err, sizeof err) == FKV_OK);
    CHECK(p.per_request_ms == 0);
    b.n = 1;
    it[0] = (fkv_batch_item){NULL, 100, 0, 1, 0, 0, 0};
    b.tokens = 1;
    CHECK(llabs(fkv_profile_step_ns(&p, &b, FKV_MISS_RECOMPUTE) - llround((c[0] + c[1] + c[2] * 101) * 1e6)) <= 1);
    /* bad values leave an error naming the coefficient */
    const double bad1[4] = {0.1, 0, 1e-5, 0}, bad2[4] = {0.1, 0.3, -1e-5, 0}, bad3[4] = {0.1, NAN, 1e-5, 0},
                 bad4[4] = {-1, 0.3, 1e-5, 0.2};
    CHECK(fkv_profile_set_coeffs(&p, bad1, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c1"));
    CHECK(fkv_profile_set_coeffs(&p, bad2, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c2"));
    CHECK(fkv_profile_set_coeffs(&p, bad3, 3, err, sizeof err) == FKV_EINVAL && strstr(err, "c1"));
    CHECK(fkv_profile_set_coeffs(&p, bad4, 4, err, sizeof err) == FKV_EINVAL && strstr(err, "one-token"));
    CHECK(fkv_profile_set_coeffs(&p, c, 2, err, sizeof err) == FKV_EINVAL && strstr(err, "3 or 4"));
    fkv_profile_free(&p);
    /* no built-in profile has a per-request term but the fitted cpu-tiny */
    for (const char *const *nm = fkv_profile_names(); *nm; nm++) {
        REQUIRE(fkv_profile_get(*nm, NULL, &p, err, sizeof err) == FKV_OK);
        CHECKF(strncmp(*nm, "cpu-", 4) ? p.per_request_ms == 0 : p.per_request_ms >= 0, "%s: %g", *nm,
               p.per_request_ms);
        fkv_profile_free(&p);
    }
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
        {"1,2,3,4,5", "more than 4"},           {"1,x,3", "value 2 is not a number"},
        {"1,2,", "value 3 is not a number"},    {"1,0,3", "c1"},
        {"1,2,-3", "c2"},                       {"inf,2,3", "c0"},
        {"-5,1,0,1", "one-token step"},         {"1;2;3", "value 1 is not a number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        double c[4];
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
    test_option();
    test_bench();
    return check_done();
}
