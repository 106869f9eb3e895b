/* Tenants in `fairkv bench`: the options and their errors (each names the
 * option and the value), the assignment rules, and the per-tenant part of
 * the JSON and CSV reports. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "bench_cli.h"
#include "cli.h"
#include "sim/bench.h"

/* Parses one option line into o; returns fkv_bench_parse_opt's result of
 * the last option and what it printed on stderr in msg. */
static int parse(fkv_bench_opts *o, const char *args, char *msg, size_t cap)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[32];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 30; t = strtok(NULL, " ")) argv[argc++] = t;
    char path[] = "/tmp/fkv_tenants_err_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fd, 2) == 2);
    int r = 1;
    for (int i = 0; i < argc && r == 1; i++) r = fkv_bench_parse_opt(o, argc, argv, &i);
    fflush(stderr);
    REQUIRE(dup2(saved, 2) == 2);
    close(saved);
    close(fd);
    char *s = check_slurp(path);
    remove(path);
    snprintf(msg, cap, "%s", s ? s : "");
    free(s);
    return r;
}

static void option_errors(void)
{
    static const struct {
        const char *args, *names;
    } bad[] = {
        {"--tenants 17", "--tenants: '17'"},
        {"--tenants -1", "--tenants: '-1'"},
        {"--tenants 2.5", "--tenants: '2.5'"},
        {"--tenant-weights 1,0", "--tenant-weights: '1,0': weight 2"},
        {"--tenant-weights 1,x", "--tenant-weights: '1,x': weight 2"},
        {"--tenant-assign heavy:1.5", "--tenant-assign: 'heavy:1.5'"},
        {"--tenant-assign heavy:", "--tenant-assign: 'heavy:'"},
        {"--tenant-assign random", "--tenant-assign: 'random'"},
        {"--quotas tenants", "--quotas: 'tenants'"},
        {"--victim fairest", "--victim: 'fairest'"},
        {"--reclaim quantize8,squeeze", "--reclaim: 'quantize8,squeeze': entry 2 'squeeze'"},
        {"--reclaim evict,evict", "--reclaim: 'evict,evict': entry 2 'evict' repeats entry 1"},
        {"--reclaim preempt", "--reclaim: 'preempt'"},
        {"--vtc-mem -2", "--vtc-mem: '-2'"},
        {"--tenant-step-share 0", "--tenant-step-share: '0'"},
        {"--tenant-step-share 1.2", "--tenant-step-share: '1.2'"},
        {"--step-share fair", "--step-share: 'fair'"},
        {"--tenants", "--tenants: '(missing)'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fkv_bench_opts o;
        fkv_bench_opts_default(&o);
        char msg[512];
        int r = parse(&o, bad[i].args, msg, sizeof msg);
        CHECKF(r == -1 && strstr(msg, bad[i].names), "'%s': result %d, message '%s'", bad[i].args, r, msg);
    }
    /* good ones land where they belong */
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    char msg[512];
    CHECK(parse(&o,
                "--tenants 3 --tenant-weights 1,2,0.5 --tenant-assign heavy:0.6 --quotas tenant --victim fair "
                "--reclaim quantize8,evict --vtc-mem 0.25 --tenant-step-share 0.5 --private-prefix --step-share drr",
                msg, sizeof msg) == 1);
    CHECK(o.sim.n_tenants == 3 && o.n_weights == 3 && o.sim.tenant_weight[1] == 2 && o.sim.tenant_weight[2] == 0.5);
    CHECK(o.tenant_assign == FKV_ASSIGN_HEAVY && o.heavy_frac == 0.6);
    CHECK(o.sim.quotas == FKV_QUOTA_TENANT && o.sim.victim == FKV_VICTIM_FAIR && o.sim.reclaim_set);
    CHECK(o.sim.sched.n_reclaim == 2 && o.sim.sched.reclaim[0] == FKV_RECLAIM_QUANTIZE8 &&
          o.sim.sched.reclaim[1] == FKV_RECLAIM_EVICT);
    CHECK(o.sim.sched.vtc_mem_weight == 0.25 && o.sim.tenant_step_share == 0.5 && !o.sim.sched.publish_shared);
    CHECK(o.sim.step_share == FKV_STEP_DRR);
    /* within-share first and the step-time bound */
    fkv_bench_opts_default(&o);
    CHECK(o.sim.admit_reclaim == -1 && o.sim.step_bound == -1 && o.sim.step_share == -1); /* the scheme's */
    CHECK(parse(&o, "--admit-reclaim --step-bound 2.5", msg, sizeof msg) == 1);
    CHECK(o.sim.admit_reclaim == 1 && o.sim.step_bound == 2.5);
    CHECK(parse(&o, "--no-admit-reclaim --step-bound 0 --step-share off", msg, sizeof msg) == 1);
    CHECK(o.sim.admit_reclaim == 0 && o.sim.step_bound == 0 && o.sim.step_share == FKV_STEP_SHARE_OFF);
    CHECKF(parse(&o, "--step-bound -1", msg, sizeof msg) == -1 && strstr(msg, "--step-bound: '-1'"), "'%s'", msg);
    CHECKF(parse(&o, "--step-bound x", msg, sizeof msg) == -1 && strstr(msg, "--step-bound: 'x'"), "'%s'", msg);
    /* a count of weights that is not the count of tenants: at prepare */
    fkv_bench_opts_default(&o);
    CHECK(parse(&o, "--tenants 2 --tenant-weights 1,2,3 --requests 20 --quiet", msg, sizeof msg) == 1);
    fkv_bench_ctx c;
    char err[256] = "";
    CHECK(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_EINVAL);
    CHECKF(strstr(err, "--tenant-weights gives 3 weights for --tenants 2"), "'%s'", err);
    fkv_bench_ctx_free(&c);
    fkv_bench_opts_default(&o);
    CHECK(parse(&o, "--tenants 1 --tenant-assign heavy:0.5 --requests 20 --quiet", msg, sizeof msg) == 1);
    CHECK(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_EINVAL && strstr(err, "--tenant-assign heavy:0.5"));
    fkv_bench_ctx_free(&c);
}

/* The three assignment rules on 1000 requests of the seed workload. */
static void assignment(void)
{
    fkv_workload w;
    REQUIRE(fkv_workload_seed(1000, 5, 4, &w) == FKV_OK);
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.sim.n_tenants = 3;
    size_t count[4];
    /* heavy:F: tenant 1 gets round(F x n), evenly (every prefix of the trace
     * within one request of F x its length); the others share the rest */
    o.tenant_assign = FKV_ASSIGN_HEAVY;
    o.heavy_frac = 0.7;
    fkv_bench_assign_tenants(&o, &w);
    memset(count, 0, sizeof count);
    int even = 1;
    for (size_t i = 0; i < w.n; i++) {
        REQUIRE(w.reqs[i].tenant >= 1 && w.reqs[i].tenant <= 3);
        count[w.reqs[i].tenant]++;
        double lag = (double)count[1] - 0.7 * (double)(i + 1);
        if (lag > 1 || lag < -1) even = 0;
    }
    CHECKF(count[1] == 700 && even, "heavy:0.7: tenant 1 has %zu of 1000", count[1]);
    CHECKF(count[2] == 150 && count[3] == 150, "the others: %zu and %zu", count[2], count[3]);
    o.tenant_assign = FKV_ASSIGN_ROUNDROBIN;
    fkv_bench_assign_tenants(&o, &w);
    for (size_t i = 0; i < w.n; i++) CHECK(w.reqs[i].tenant == 1 + i % 3);
    o.tenant_assign = FKV_ASSIGN_CLIENT;
    fkv_bench_assign_tenants(&o, &w);
    for (size_t i = 0; i < w.n; i++) CHECK(w.reqs[i].tenant == 1 + w.reqs[i].client % 3);
    o.sim.n_tenants = 0;
    fkv_bench_assign_tenants(&o, &w);
    for (size_t i = 0; i < w.n; i++) CHECK(w.reqs[i].tenant == 0);
    fkv_workload_free(&w);
}


/* The per-tenant report: every tenant's finished requests add up to the
 * scheme's, and the heavy tenant has the share of requests assigned. */
static void report(void)
{
    char path[] = "/tmp/fkv_tenants_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK(bench_cli("--requests 400 --tenants 2 --tenant-weights 1,3 --tenant-assign heavy:0.75 --schemes lru,fairkv "
                  "--format json --quiet",
                  path) == 0);
    char *js = check_slurp(path);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(j, "tenants")));
    const cJSON *sc = cJSON_GetObjectItem(j, "schemes");
    CHECK(cJSON_GetArraySize(sc) == 2);
    for (int i = 0; i < cJSON_GetArraySize(sc); i++) {
        const cJSON *x = cJSON_GetArrayItem(sc, i), *t = cJSON_GetObjectItem(x, "tenants");
        REQUIRE(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 2);
        int done = cJSON_GetObjectItem(x, "done")->valueint;
        int d1 = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "done")->valueint;
        int d2 = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 1), "done")->valueint;
        CHECKF(d1 + d2 == done && d1 == 300 && d2 == 100, "tenants' done %d + %d, scheme %d", d1, d2, done);
        CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "e2e_p99_ms")->valuedouble > 0);
        const cJSON *rp = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 1), "reclaimed_pages");
        CHECK(cJSON_IsObject(rp) && cJSON_GetArraySize(rp) == FKV_N_RECLAIM_SLOTS);
        for (int k = 0; k < FKV_N_RECLAIM; k++)
            CHECK(cJSON_IsNumber(cJSON_GetObjectItem(rp, fkv_reclaim_name((fkv_reclaim_action)k))));
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(rp, "idle")));
    }
    cJSON_Delete(j);
    free(js);
    CHECK(bench_cli("--requests 200 --tenants 3 --schemes fairkv --format csv --quiet", path) == 0);
    char *csv = check_slurp(path);
    REQUIRE(csv);
    CHECK(strstr(csv, ",tenant_spread,jain_slowdown,max_min_slowdown,service_diff_tokens,t1_e2e_mean_ms,t1_e2e_p99_ms,"
                      "t1_ttft_mean_ms,t1_ttft_p99_ms,") &&
          strstr(csv, ",t3_partition_hit_rate,") && strstr(csv, ",t3_long_ttft_p99_ms,accuracy_kv,"));
    /* as many fields in the row as in the header */
    int hf = 1, rf = 1;
    char *nl = strchr(csv, '\n');
    REQUIRE(nl);
    for (char *p = csv; p < nl; p++) hf += *p == ',';
    for (char *p = nl + 1; *p && *p != '\n'; p++) rf += *p == ',';
    CHECKF(hf == rf, "header %d fields, row %d", hf, rf);
    free(csv);
    /* without tenants nothing about them */
    CHECK(bench_cli("--requests 200 --schemes lru --format json --quiet", path) == 0);
    js = check_slurp(path);
    REQUIRE(js);
    CHECK(!strstr(js, "tenant"));
    free(js);
    remove(path);
}

int main(void)
{
    setenv("FKV_DATA_DIR", "", 1); /* embedded profile tables */
    option_errors();
    assignment();
    report();
    return check_done();
}
