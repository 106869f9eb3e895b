/* The memory frontier (src/sim/frontier.h): the bisection on monotone toy
 * predicates, the within-5% test on hand-made summaries, the capacity of a
 * fraction, a small simulated run, and the CLI's refusals and JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "bench_cli.h"
#include "cli.h"
#include "sim/frontier.h"

/* ok iff x >= threshold, counting its calls */
typedef struct toy {
    double threshold;
    int calls;
} toy;

static int toy_ok(double x, void *ctx)
{
    toy *t = ctx;
    t->calls++;
    return x >= t->threshold;
}

static void bisect_toy(void)
{
    toy t = {0.437, 0};
    int probes = 0;
    double tol = 0.01;
    double f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, tol, &probes);
    CHECKF(f >= 0.437 && f <= 0.437 + tol, "frontier %.6f", f);
    CHECK(probes == t.calls);
    /* hi, lo, then halvings of 0.95 down to 0.01: ceil(log2(95)) = 7 */
    CHECKF(probes == 2 + 7, "probes %d", probes);
    /* a finer tolerance: closer, and one probe per halving more */
    t.calls = 0;
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, 1e-4, &probes);
    CHECKF(f >= 0.437 && f <= 0.437 + 1e-4, "frontier %.6f", f);
    CHECKF(probes == 2 + 14, "probes %d", probes); /* ceil(log2(9500)) = 14 */

    /* ok everywhere: lo, after asking hi and lo only */
    t = (toy){0.0, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, tol, &probes);
    CHECK(f == 0.05 && probes == 2);
    /* ok nowhere: not found, after asking hi only */
    t = (toy){2.0, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, tol, &probes);
    CHECK(isnan(f) && probes == 1);
    /* ok only at hi itself: hi */
    t = (toy){1.0, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, tol, &probes);
    CHECKF(f == 1.0, "frontier %.6f", f);
    /* the threshold just above lo: within tol of it */
    t = (toy){0.0501, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, tol, &probes);
    CHECKF(f >= 0.0501 && f <= 0.0501 + tol, "frontier %.6f", f);
    /* an empty range: hi if it passes */
    t = (toy){0.5, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.7, 0.7, tol, &probes);
    CHECK(f == 0.7 && probes == 1);
    /* tolerance 0 still ends */
    t = (toy){0.437, 0};
    f = fkv_frontier_bisect(toy_ok, &t, 0.05, 1.0, 0, &probes);
    CHECKF(fabs(f - 0.437) < 1e-9 && probes < 100, "frontier %.12f after %d", f, probes);
}

static fkv_scheme_summary summary(double mean, double p99, double short_p99)
{
    fkv_scheme_summary s;
    memset(&s, 0, sizeof s);
    s.done = 100;
    s.e2e.mean_ms = mean;
    s.e2e.p99_ms = p99;
    s.e2e.by_class[FKV_CLASS_SHORT].n = 60;
    s.e2e.by_class[FKV_CLASS_SHORT].p99_ms = short_p99;
    return s;
}

static void within(void)
{
    fkv_scheme_summary o = summary(100, 1000, 200);
    double k = FKV_FRONTIER_SLACK;
    fkv_scheme_summary s = o;
    CHECK(fkv_frontier_within(&s, &o, k));
    s = summary(105, 1050, 210); /* exactly 1.05 x each: within */
    CHECK(fkv_frontier_within(&s, &o, k));
    s = summary(50, 500, 100); /* faster than the oracle: within */
    CHECK(fkv_frontier_within(&s, &o, k));
    /* each criterion alone fails it at 1.0501 */
    s = summary(105.01, 1000, 200);
    CHECK(!fkv_frontier_within(&s, &o, k));
    s = summary(100, 1050.1, 200);
    CHECK(!fkv_frontier_within(&s, &o, k));
    s = summary(100, 1000, 210.02);
    CHECK(!fkv_frontier_within(&s, &o, k));
    /* a request fewer finished: not the same work */
    s = o;
    s.done = 99;
    CHECK(!fkv_frontier_within(&s, &o, k));
    /* no short request in the oracle's run: that criterion is not asked */
    o.e2e.by_class[FKV_CLASS_SHORT].n = 0;
    o.e2e.by_class[FKV_CLASS_SHORT].p99_ms = 0;
    s = summary(100, 1000, 0);
    CHECK(fkv_frontier_within(&s, &o, k));
}

static void capacity(void)
{
    CHECK(fkv_frontier_capacity(1000, 100, 0.5) == 500);
    CHECK(fkv_frontier_capacity(1000, 100, 0.4371) == 438); /* rounded up */
    CHECK(fkv_frontier_capacity(1000, 100, 0.05) == 100);   /* the floor binds */
    CHECK(fkv_frontier_capacity(40650, 2294, 2294.0 / 40650) == 2294); /* the floor's own fraction */
    CHECK(fkv_frontier_capacity(1000, 100, 1.0) == 1000);
}

/* A small seed run: oracle-memory ignores capacity, so its frontier is the
 * bottom of the range after two runs; lru's frontier passes, and a failing
 * probe lies within the tolerance below it (the bisection closed in). */
static void simulated(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = 400;
    o.requests_set = 1;
    o.quiet = 1;
    o.load_lo = o.load_hi = 0.9;
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_status st = fkv_bench_prepare(&c, &o, err, sizeof err);
    if (st) fprintf(stderr, "prepare: %s\n", err);
    REQUIRE(st == FKV_OK);
    CHECK(c.peak_tokens > 0 && c.floor_tokens > 256 && c.floor_tokens < c.peak_tokens);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, o.load_lo, &w, &rate) == FKV_OK);
    fkv_scheme_summary oracle;
    REQUIRE(fkv_frontier_oracle(&c, &w, &oracle, err, sizeof err) == FKV_OK);
    CHECK(oracle.done == w.n);

    double lo = fmax(FKV_FRONTIER_LO, (double)c.floor_tokens / (double)c.peak_tokens);
    fkv_frontier_point p;
    REQUIRE(fkv_frontier_scheme(&c, &w, fkv_scheme_find("oracle-memory"), &oracle, 0.01, 0, &p, err, sizeof err) ==
            FKV_OK);
    CHECKF(p.found && p.capacity_frac == lo && p.n_probes == 2, "oracle frontier %.4f (lo %.4f), %d probes",
           p.capacity_frac, lo, p.n_probes);
    CHECK(p.at.e2e.mean_ms == oracle.e2e.mean_ms && p.at.e2e.p99_ms == oracle.e2e.p99_ms);

    /* a lower top: lru's frontier (above the bottom) is searched below it */
    double top = 0.5 * (lo + 1.0);
    REQUIRE(fkv_frontier_scheme(&c, &w, fkv_scheme_find("lru"), &oracle, 0.01, top, &p, err, sizeof err) == FKV_OK);
    CHECKF(p.found ? p.capacity_frac <= top : p.capacity_frac == top, "top %.3f: found %d at %.4f", top, p.found,
           p.capacity_frac);
    for (int k = 0; k < p.n_probes; k++) CHECK(p.probes[k].frac <= top);
    REQUIRE(fkv_frontier_scheme(&c, &w, fkv_scheme_find("lru"), &oracle, 0.01, 0, &p, err, sizeof err) == FKV_OK);
    CHECKF(p.found, "lru not within 5%% at the peak demand");
    if (p.found) {
        CHECK(fkv_frontier_within(&p.at, &oracle, FKV_FRONTIER_SLACK));
        CHECK(p.capacity_tokens == fkv_frontier_capacity(c.peak_tokens, c.floor_tokens, p.capacity_frac));
        int closed = p.capacity_frac == lo;
        for (int k = 0; k < p.n_probes; k++)
            if (!p.probes[k].within && p.probes[k].frac < p.capacity_frac &&
                p.probes[k].frac >= p.capacity_frac - 0.01 - 1e-9)
                closed = 1;
        CHECKF(closed, "lru frontier %.4f without a failing probe within 0.01 below", p.capacity_frac);
        /* memory pressure at the lowest capacity costs lru latency: a frontier above the bottom */
        CHECKF(p.capacity_frac > lo, "lru frontier %.4f at the bottom %.4f", p.capacity_frac, lo);
    }
    /* the frontier's row carries its accuracy (src/sim/accuracy.h): lru's fp16 */
    const fkv_accuracy_row *f16 = fkv_accuracy_find("f16", 1, 0);
    CHECK(f16 && !strcmp(p.at.accuracy.kv, "f16") && p.at.accuracy.top1 == f16->top1);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
}

/* A scheme not within at the top: "> 1.00" in the text, null and
 * within_at_max false in the JSON; a floor-bound one is starred. */
static void outputs(void)
{
    fkv_scheme_summary o = summary(100, 1000, 200);
    fkv_frontier_point p[2];
    memset(p, 0, sizeof p);
    snprintf(p[0].scheme, sizeof p[0].scheme, "slow");
    p[0].capacity_frac = 1.0;
    p[0].capacity_tokens = 1000;
    p[0].at = summary(300, 1100, 210);
    p[0].n_probes = 1;
    snprintf(p[1].scheme, sizeof p[1].scheme, "tiny");
    p[1].found = 1;
    p[1].capacity_frac = 0.2;
    p[1].capacity_tokens = 200;
    p[1].floor_binds = 1;
    p[1].at = o;
    p[1].n_probes = 2;
    fkv_frontier_meta m = {.workload = "seed", .profile = "toy", .load = 0.8, .requests = 100, .peak_tokens = 1000,
                           .floor_tokens = 200, .token_bytes = 1000000, .tol = 0.01, .slack = FKV_FRONTIER_SLACK};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    fkv_frontier_text(f, &m, &o, p, 2);
    fclose(f);
    CHECKF(strstr(buf, "slow              > 1.00") && strstr(buf, "3.000"), "%s", buf);
    CHECKF(strstr(buf, "tiny               0.20*") && strstr(buf, "*: the floor, 200 tokens"), "%s", buf);
    free(buf);
    f = open_memstream(&buf, &len);
    REQUIRE(f);
    fkv_frontier_json(f, &m, &o, p, 2);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    CHECKF(j, "not JSON: %s", buf);
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(j, "frontier");
    const cJSON *a = cJSON_GetArrayItem(fr, 0), *b = cJSON_GetArrayItem(fr, 1);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "capacity_frac")));
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "within_at_max")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "floor")));
    const cJSON *gbv = cJSON_GetObjectItemCaseSensitive(b, "capacity_gb");
    CHECK(cJSON_IsNumber(gbv) && fabs(gbv->valuedouble - 0.2) < 1e-9); /* 200 tokens x 1 MB */
    cJSON_Delete(j);
    free(buf);
}


static void cli(void)
{
    REQUIRE(fkv_cli_bench);
    CHECK(bench_cli("--frontier --requests 200 --load 0.5:0.9:0.2 --quiet", NULL) == 2);
    CHECK(bench_cli("--frontier --requests 200 --capacity-tokens 5000 --quiet", NULL) == 2);
    CHECK(bench_cli("--frontier --requests 200 --capacity-gb 4 --quiet", NULL) == 2);
    CHECK(bench_cli("--frontier --requests 200 --format csv --quiet", NULL) == 2);
    CHECK(bench_cli("--frontier-tol 0 --quiet", NULL) == 2);
    CHECK(bench_cli("--frontier-max 0.05 --quiet", NULL) == 2 && bench_cli("--frontier-max 65 --quiet", NULL) == 2);

    char path[] = "/tmp/fkv_frontier_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    char args[256];
    snprintf(args, sizeof args, "--frontier --requests 300 --schemes lru,oracle-memory --format json --quiet --output %s",
             path);
    CHECK(bench_cli(args, NULL) == 0);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    char text[16384];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = 0;
    fclose(f);
    unlink(path);
    cJSON *j = cJSON_Parse(text);
    CHECKF(j, "not JSON: %.200s", text);
    if (!j) return;
    const cJSON *wl = cJSON_GetObjectItemCaseSensitive(j, "workload");
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(j, "frontier");
    CHECK(cJSON_IsString(wl) && !strcmp(wl->valuestring, "seed"));
    CHECK(cJSON_IsArray(fr) && cJSON_GetArraySize(fr) == 2);
    for (int i = 0; i < cJSON_GetArraySize(fr); i++) {
        const cJSON *e = cJSON_GetArrayItem(fr, i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "scheme");
        const cJSON *cf = cJSON_GetObjectItemCaseSensitive(e, "capacity_frac");
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(e, "within_at_max");
        CHECK(cJSON_IsString(name) && !strcmp(name->valuestring, i ? "oracle-memory" : "lru"));
        CHECK(cJSON_IsBool(in));
        /* a number when within at the top of the range, null otherwise */
        CHECK(cJSON_IsTrue(in) ? cJSON_IsNumber(cf) && cf->valuedouble > 0 && cf->valuedouble <= 1 : cJSON_IsNull(cf));
    }
    cJSON_Delete(j);
}

int main(void)
{
    bisect_toy();
    within();
    capacity();
    simulated();
    outputs();
    cli();
    return check_done();
}
