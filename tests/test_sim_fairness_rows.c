/* The fairness rows and figures of tenant runs against values worked out
 * by hand: the service difference of a run, the partition's hit rates, the
 * isolated scheme, the vtc scheme, and which tenants are light. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "check.h"
#include "bench_cli.h"
#include "hand_profile.h"
#include "sim/bench.h"
#include "sim/report.h"
#include "sim/sim.h"
#include "sim/workload.h"

/* A plain trace; each request's tenant is its client + 1. */
static void trace(const char *csv, uint32_t n_clients, fkv_workload *w)
{
    char err[256] = "";
    fkv_status st = fkv_trace_parse(csv, strlen(csv), "t.csv", FKV_TRACE_PLAIN, 0, n_clients, w, err, sizeof err);
    CHECKF(st == FKV_OK, "parse: %s", err);
    REQUIRE(st == FKV_OK);
    for (size_t i = 0; i < w->n; i++) w->reqs[i].tenant = w->reqs[i].client + 1;
}

static void config(fkv_sim_config *c, const fkv_profile *p, uint32_t n_tenants, uint64_t capacity)
{
    fkv_sim_config_default(c);
    c->profile = p;
    c->capacity_tokens = capacity;
    c->sched.n_clients = n_tenants;
    c->n_tenants = n_tenants;
}

/* One request a step (max_running 1), four at 0 in this order: A (tenant
 * 1, 10 prompt tokens, 1 output), B (tenant 2, 100, 1), C (tenant 1, 10,
 * 1), D (tenant 2, 50, 1).  VTC's weights: 1 a prompt token, 2 an output
 * token.  Step 1 runs A while B, C, D wait: both backlogged, tenant 1 has
 * 12.  Step 2 runs B while C and D wait: tenant 2 has 102, the gap is 90.
 * Step 3 runs C while only D waits: tenant 1 is no longer backlogged, no
 * gap is seen; step 4 runs D with nobody waiting.  The largest gap: 90;
 * with tenant 2's weight 2 its weighted service is 51, a gap of 39. */
static void service_diff_of_a_run(void)
{
    fkv_profile p = hand_profile();
    fkv_workload w;
    trace("arrival_ms,prompt_tokens,output_tokens,client\n0,10,1,0\n0,100,1,1\n0,10,1,0\n0,50,1,1\n", 2, &w);
    fkv_sim_config c;
    config(&c, &p, 2, 1 << 16);
    c.sched.max_running = 1;
    char err[256] = "";
    fkv_sim_result r;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    CHECKF(r.steps == 4 && fabs(r.service_diff_tokens - 90) < 1e-9, "%llu steps, gap %g",
           (unsigned long long)r.steps, r.service_diff_tokens);
    fkv_sim_result_free(&r);
    c.tenant_weight[1] = 2;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    CHECKF(fabs(r.service_diff_tokens - 39) < 1e-9, "weighted gap %g", r.service_diff_tokens);
    fkv_scheme_summary s;
    fkv_summarize(&r, &s);
    CHECK(s.service_diff_tokens == r.service_diff_tokens);
    fkv_sim_result_free(&r);
    /* no tenants: not tracked */
    c.n_tenants = 0;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    CHECK(r.service_diff_tokens == 0);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* Tenant 1 sends a 96-token prompt whose first 64 tokens are its system
 * prompt at 0 s and again at 10 s; tenant 2 sends eight unrelated
 * 300-token prompts in between, one a second.  On a 2000-token cache
 * (125 pages) tenant 2 writes 8 x 19 = 152 pages, so LRU evicts tenant
 * 1's older pages: its second request matches nothing, hit rate 0.  On a
 * static half (1000 tokens, above the floor 302 + 256) tenant 1 is alone
 * and its second request matches the 64 shared tokens: 64 / 192 = 1/3.
 * Tenant 2 reuses nothing: 0 either way. */
static void partition_rates(void)
{
    fkv_profile p = hand_profile();
    char csv[1024];
    int k = snprintf(csv, sizeof csv, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n0,96,2,0,64\n");
    for (int i = 1; i <= 8; i++) k += snprintf(csv + k, sizeof csv - (size_t)k, "%d,300,2,1,0\n", i * 1000);
    snprintf(csv + k, sizeof csv - (size_t)k, "10000,96,2,0,64\n");
    fkv_workload w;
    trace(csv, 2, &w);
    fkv_sim_config c;
    config(&c, &p, 2, 2000);
    char err[256] = "";
    const fkv_scheme *lru = fkv_scheme_find("lru");
    fkv_sim_result whole, part;
    REQUIRE(fkv_sim_run(&w, lru, &c, &whole, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_sim_partition(&w, lru, &c, &part, err, sizeof err) == FKV_OK);
    fkv_scheme_summary s;
    fkv_summarize(&whole, &s);
    CHECKF(whole.done == 10 && whole.evicted_pages > 0, "%zu done, %llu pages evicted", whole.done,
           (unsigned long long)whole.evicted_pages);
    fkv_summary_partition(&s, &part);
    CHECKF(s.tenants[1].prefix_hit_rate == 0 && fabs(s.tenants[1].partition_hit_rate - 1.0 / 3) < 1e-12,
           "tenant 1: shared %g, partition %g", s.tenants[1].prefix_hit_rate, s.tenants[1].partition_hit_rate);
    CHECKF(s.tenants[2].prefix_hit_rate == 0 && s.tenants[2].partition_hit_rate == 0, "tenant 2: %g, %g",
           s.tenants[2].prefix_hit_rate, s.tenants[2].partition_hit_rate);
    CHECKF(part.capacity_tokens == 1000, "partition capacity %llu", (unsigned long long)part.capacity_tokens);
    fkv_sim_result_free(&whole);
    fkv_sim_result_free(&part);
    /* a cache big enough for everything: tenant 1 hits 1/3 shared too */
    c.capacity_tokens = 1 << 16;
    REQUIRE(fkv_sim_run(&w, lru, &c, &whole, err, sizeof err) == FKV_OK);
    fkv_summarize(&whole, &s);
    CHECKF(fabs(s.tenants[1].prefix_hit_rate - 1.0 / 3) < 1e-12, "tenant 1 on a big cache: %g",
           s.tenants[1].prefix_hit_rate);
    fkv_sim_result_free(&whole);
    /* a partition smaller than the largest request is raised to it + 256 */
    c.capacity_tokens = 400;
    REQUIRE(fkv_sim_partition(&w, lru, &c, &part, err, sizeof err) == FKV_OK);
    CHECKF(part.capacity_tokens == 302 + 256, "partition capacity %llu (tenant 2's: the last run)",
           (unsigned long long)part.capacity_tokens);
    CHECK(part.rejected == 0 && part.done == 10);
    fkv_sim_result_free(&part);
    fkv_workload_free(&w);
}

/* isolated: request i's latency is its latency in a run of its tenant's
 * requests alone under lru on the same cache; vtc: lru with VTC admission. */
static void isolated_and_vtc(void)
{
    fkv_profile p;
    char err[256] = "";
    REQUIRE(fkv_profile_get("a100-llama2-7b", NULL, &p, err, sizeof err) == FKV_OK);
    fkv_tenants_params tp;
    fkv_tenants_params_default(&tp);
    fkv_workload w;
    REQUIRE(fkv_workload_tenants(300, 5, 6, &tp, &w) == FKV_OK);
    fkv_workload_poisson(&w, 12.0, 5);
    for (size_t i = 0; i < w.n; i++) w.reqs[i].client = w.reqs[i].tenant - 1;
    fkv_sim_config c;
    config(&c, &p, w.n_tenants, 60000);
    fkv_sim_result iso;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("isolated"), &c, &iso, err, sizeof err) == FKV_OK);
    CHECK(iso.done == w.n && !strcmp(iso.scheme, "isolated"));
    size_t compared = 0, differ = 0;
    for (uint32_t t = 1; t <= w.n_tenants; t++) {
        fkv_workload sub = w;
        fkv_req reqs[300];
        size_t where[300];
        sub.reqs = reqs;
        sub.n = 0;
        for (size_t i = 0; i < w.n; i++)
            if (w.reqs[i].tenant == t) {
                where[sub.n] = i;
                reqs[sub.n] = w.reqs[i];
                reqs[sub.n].id = sub.n + 1;
                sub.n++;
            }
        if (!sub.n) continue;
        fkv_sim_result r;
        REQUIRE(fkv_sim_run(&sub, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
        for (size_t j = 0; j < sub.n; j++, compared++)
            differ += r.e2e_ns[j] != iso.e2e_ns[where[j]] || r.ttft_ns[j] != iso.ttft_ns[where[j]];
        fkv_sim_result_free(&r);
    }
    CHECKF(compared == w.n && differ == 0, "%zu of %zu requests differ from their tenant's run alone", differ,
           compared);
    /* isolated is faster for the light tenants than sharing the system */
    fkv_sim_result all;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &all, err, sizeof err) == FKV_OK);
    fkv_scheme_summary si, sa;
    fkv_summarize(&iso, &si);
    fkv_summarize(&all, &sa);
    CHECKF(si.tenants[1].light && si.tenants[1].ttft.mean_ms < sa.tenants[1].ttft.mean_ms, "isolated %g, shared %g",
           si.tenants[1].ttft.mean_ms, sa.tenants[1].ttft.mean_ms);
    fkv_scheme_summary pair[2] = {sa, si};
    fkv_summaries_isolated(pair, 2);
    CHECK(pair[0].tenants[1].isolated_ttft_p99_ms == si.tenants[1].ttft.p99_ms &&
          pair[0].tenants[5].isolated_e2e_p99_ms == si.tenants[5].e2e.p99_ms);
    /* light: the generator names tenants 1..n_light */
    for (uint32_t t = 1; t <= w.n_tenants; t++) CHECKF(sa.tenants[t].light == (t <= w.n_light), "tenant %u", t);
    fkv_sim_result vr, lr;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("vtc"), &c, &vr, err, sizeof err) == FKV_OK);
    c.sched.admission = FKV_ADMIT_VTC;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &lr, err, sizeof err) == FKV_OK);
    CHECK(!memcmp(vr.e2e_ns, lr.e2e_ns, w.n * sizeof *vr.e2e_ns));
    CHECK(memcmp(vr.e2e_ns, all.e2e_ns, w.n * sizeof *vr.e2e_ns) != 0); /* and VTC changes something */
    fkv_sim_result_free(&vr);
    fkv_sim_result_free(&lr);
    fkv_sim_result_free(&iso);
    fkv_sim_result_free(&all);
    fkv_workload_free(&w);
    fkv_profile_free(&p);
}

/* Without the generator's names, a tenant is light when it offers no more
 * tokens than its weighted share: tenant 1 offers 1000 of 1300 tokens. */
static void light_by_demand(void)
{
    fkv_profile p = hand_profile();
    fkv_workload w;
    trace("arrival_ms,prompt_tokens,output_tokens,client\n0,990,10,0\n10,90,10,1\n20,190,10,2\n", 3, &w);
    fkv_sim_config c;
    config(&c, &p, 3, 1 << 16);
    char err[256] = "";
    fkv_sim_result r;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    fkv_scheme_summary s;
    fkv_summarize(&r, &s);
    CHECK(!s.tenants[1].light && s.tenants[2].light && s.tenants[3].light);
    fkv_sim_result_free(&r);
    /* weights move the share: 10 of 12 to tenant 1 makes it light */
    c.tenant_weight[0] = 10;
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    fkv_summarize(&r, &s);
    CHECK(s.tenants[1].light && !s.tenants[3].light);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    CHECKF(cJSON_IsNumber(v), "key %s is not a number", k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The JSON keys scripts read, their values consistent with each other:
 * lru's throughput relative to itself is 1, each row's isolated P99 is the
 * isolated row's own, a light tenant is one the generator names. */
static void json_keys(void)
{
    char path[] = "/tmp/fkv_fair_rows_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK(bench_cli("--workload tenants --requests 300 --load 0.9 --schemes lru,fairkv,isolated --format json --quiet",
                  path) == 0);
    char *js = check_slurp(path);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    const cJSON *sc = cJSON_GetObjectItem(j, "schemes");
    REQUIRE(cJSON_GetArraySize(sc) == 3);
    const cJSON *iso = cJSON_GetArrayItem(sc, 2);
    CHECK(!strcmp(cJSON_GetObjectItem(iso, "name")->valuestring, "isolated"));
    const cJSON *iso_t = cJSON_GetObjectItem(cJSON_GetObjectItem(iso, "fairness"), "tenants");
    for (int i = 0; i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(sc, i);
        double ph = num(x, "prefix_hit_rate"), cr = num(x, "context_read_rate"), thr = num(x, "throughput_rel_lru");
        CHECK(ph >= 0 && ph <= 1 && cr > 0 && cr <= 1 && thr > 0);
        if (i == 0) CHECK(thr == 1.0);
        const cJSON *f = cJSON_GetObjectItem(x, "fairness");
        REQUIRE(cJSON_IsObject(f));
        double jain = num(f, "jain_slowdown"), mm = num(f, "max_min_slowdown"), sd = num(f, "service_diff_tokens");
        CHECKF(jain > 1.0 / 6 && jain <= 1 && mm >= 1 && sd >= 0, "jain %g max/min %g diff %g", jain, mm, sd);
        const cJSON *t = cJSON_GetObjectItem(f, "tenants");
        REQUIRE(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 6);
        for (int k = 0; k < 6; k++) {
            const cJSON *y = cJSON_GetArrayItem(t, k), *yi = cJSON_GetArrayItem(iso_t, k);
            CHECK(num(y, "id") == k + 1);
            CHECK(cJSON_IsBool(cJSON_GetObjectItem(y, "light")) &&
                  cJSON_IsTrue(cJSON_GetObjectItem(y, "light")) == (k < 4));
            const cJSON *tt = cJSON_GetObjectItem(y, "ttft"), *e = cJSON_GetObjectItem(y, "e2e");
            CHECK(num(tt, "mean_ms") > 0 && num(tt, "p99_ms") >= num(tt, "p50_ms") && num(e, "p99_ms") >= num(e, "mean_ms") * 0.5);
            CHECK(cJSON_IsObject(cJSON_GetObjectItem(e, "by_class")));
            CHECK(num(y, "slowdown_mean") >= 1);
            /* printed to 3 and 6 decimals */
            CHECK(fabs(num(y, "isolated_ttft_p99_ms") - num(cJSON_GetObjectItem(yi, "ttft"), "p99_ms")) < 1e-3);
            double p = num(y, "prefix_hit_rate");
            CHECK(p >= 0 && p <= 1);
            const cJSON *part = cJSON_GetObjectItem(y, "partition_hit_rate");
            /* the isolated row has no partition of its own */
            CHECK(i == 2 ? cJSON_IsNull(part) : cJSON_IsNumber(part));
        }
    }
    cJSON_Delete(j);
    free(js);
    unlink(path);
    /* the per-tenant plot's data: a header of 6 tenants (5 and 6 heavy), a row a scheme */
    char dir[] = "/tmp/fkv_fair_plot_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char args[256], dat[300];
    snprintf(args, sizeof args, "--workload tenants --requests 300 --schemes lru,isolated --quiet --plot %s", dir);
    CHECK(bench_cli(args, path) == 0);
    snprintf(dat, sizeof dat, "%s/tenant_ttft.dat", dir);
    char *d = check_slurp(dat);
    CHECKF(d && !strncmp(d, "scheme t1 t2 t3 t4 t5(heavy) t6(heavy)\nlru ", 43) && strstr(d, "\nisolated "),
           "tenant_ttft.dat: %.120s", d ? d : "(missing)");
    free(d);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    unlink(path);
}

/* fairkv run's short table: the isolated row is 1.00x itself; lru's light
 * column is the largest light tenant's P99 TTFT. */
static void short_table(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.workload = "tenants";
    o.requests = 300;
    o.requests_set = 1;
    o.load_lo = o.load_hi = 0.9;
    o.schemes = "lru,isolated";
    o.quiet = 1;
    fkv_bench_ctx c;
    char err[256] = "";
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, 0.9, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[2];
    size_t n = 0;
    REQUIRE(fkv_bench_schemes(&c, &w, s, NULL, &n, 2, err, sizeof err) == FKV_OK && n == 2);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    fkv_report_meta m = {.workload = "tenants", .load = 0.9, .requests = w.n, .profile = "p", .capacity_rule = "r",
                         .admission = "fcfs", .batching = "continuous", .n_tenants = 6, .tenants = "6"};
    fkv_report_fairness_text(f, &m, s, n);
    fclose(f);
    double light = 0;
    for (uint32_t t = 1; t <= 6; t++)
        if (s[0].tenants[t].light && s[0].tenants[t].ttft.p99_ms > light) light = s[0].tenants[t].ttft.p99_ms;
    char want[64];
    snprintf(want, sizeof want, "\n%-13s %11.1f", "lru", light);
    CHECKF(strstr(buf, want) != NULL, "no '%s' in:\n%s", want + 1, buf);
    char *iso = strstr(buf, "\nisolated ");
    CHECK(iso && strstr(iso, " 1.00 "));
    free(buf);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
}

int main(void)
{
    service_diff_of_a_run();
    partition_rates();
    isolated_and_vtc();
    light_by_demand();
    json_keys();
    short_table();
    return check_done();
}
