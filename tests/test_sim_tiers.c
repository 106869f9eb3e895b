/* The simulator's tiers below the device: the remote store (LRU, per-tenant
 * namespaces, prefix-closed eviction), the price of a remote hit worked
 * out by hand, the per-tier hit rates and their sum, and that runs without
 * a host or remote tier print what they printed before.  Also prints the
 * remote-hit-against-recompute table of docs/EVALUATION.md. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "bench_cli.h"
#include "check.h"
#include "hand_profile.h"
#include "sim/remote_store.h"
#include "sim/report.h"
#include "sim/sim.h"
#include "sim/workload.h"

static fkv_req req(uint64_t id, uint64_t tenant, uint64_t seed, uint32_t prompt)
{
    fkv_req r;
    memset(&r, 0, sizeof r);
    r.id = id;
    r.tenant = tenant;
    r.tag = seed;
    r.prompt = prompt;
    r.output = 1;
    return r;
}

/* Four 64-token chunks of room.  R1 and R2 write three each: the second
 * write evicts two of R1's, its last two (a prefix's tail goes first), so
 * R1 still finds its first chunk and only that.  A lookup stops at the
 * first missing chunk and never returns a chunk that ends past limit. */
static void store_lru(void)
{
    fkv_remote_store *st = fkv_remote_store_create(4, 64, NULL, 100);
    REQUIRE(st != NULL);
    fkv_req r1 = req(1, 1, 11, 192), r2 = req(2, 1, 22, 192);
    uint64_t fetched = 0;
    CHECK(fkv_remote_store_find(st, &r1, 0, 1000, &fetched) == 0 && fetched == 0);
    fkv_remote_store_put(st, &r1, 192);
    CHECK(fkv_remote_store_find(st, &r1, 0, 1000, &fetched) == 192 && fetched == 192);
    /* limit 191: the third chunk would end past it */
    CHECK(fkv_remote_store_find(st, &r1, 0, 191, &fetched) == 128 && fetched == 128);
    /* from inside a chunk: the whole chunk crosses the network */
    CHECK(fkv_remote_store_find(st, &r1, 100, 1000, &fetched) == 92 && fetched == 128);
    fkv_remote_store_put(st, &r2, 192);
    uint32_t got = fkv_remote_store_find(st, &r1, 0, 1000, &fetched);
    CHECKF(got == 64 && fetched == 64, "R1 after R2: %u tokens", got);
    CHECK(fkv_remote_store_find(st, &r2, 0, 1000, &fetched) == 192);
    fkv_remote_store_stats s;
    fkv_remote_store_stats_get(st, &s);
    CHECKF(s.entries == 4 && s.evictions == 2 && s.puts == 6, "entries %llu evictions %llu puts %llu",
           (unsigned long long)s.entries, (unsigned long long)s.evictions, (unsigned long long)s.puts);
    fkv_remote_store_free(st);
}

/* Write-backs alone (no lookup between): R2's three chunks evict two of
 * R1's, its tail, so R1's head chunk stays findable. */
static void store_put_order(void)
{
    fkv_remote_store *st = fkv_remote_store_create(4, 64, NULL, 100);
    REQUIRE(st != NULL);
    fkv_req r1 = req(1, 1, 11, 192), r2 = req(2, 1, 22, 192);
    uint64_t fetched = 0;
    fkv_remote_store_put(st, &r1, 192);
    fkv_remote_store_put(st, &r2, 192);
    uint32_t got = fkv_remote_store_find(st, &r1, 0, 1000, &fetched);
    CHECKF(got == 64, "R1's head after R2's write-back: %u tokens", got);
    fkv_remote_store_free(st);
}

/* Same tokens, another tenant: another namespace, never a hit. */
static void store_namespace(void)
{
    fkv_remote_store *st = fkv_remote_store_create(100, 64, NULL, 100);
    REQUIRE(st != NULL);
    fkv_req a = req(1, 1, 7, 256), b = req(2, 2, 7, 256), c = req(3, 1, 7, 256);
    uint64_t fetched;
    fkv_remote_store_put(st, &a, 256);
    CHECK(fkv_remote_store_find(st, &b, 0, 255, &fetched) == 0);
    CHECK(fkv_remote_store_find(st, &c, 0, 255, &fetched) == 192);
    c.cache_salt = 5; /* the cache's salt is part of the namespace too */
    CHECK(fkv_remote_store_find(st, &c, 0, 255, &fetched) == 0);
    fkv_remote_store_free(st);
}

/* A (tenant 1, 256 prompt tokens, seed 7) at 0; C (tenant 1, 300 tokens,
 * another seed) at 1 s takes the device's 320 tokens, evicting A's cached
 * chunks; B at 2 s has A's tokens and tenant b_tenant.  With the remote
 * tier, A's 16 pages (the store keeps pages, as the served Redis tier)
 * were written back when it ended; B (prefill limit 255) loads pages 0-14
 * (240 tokens) and computes 16.  Hand profile:
 *   load    240 x 524,288 B / 12.5 GB/s = 10.0663296 ms, + 0.5 ms round trip
 *   compute lin(16) = 10 + 0.01 x 15 = 10.15 ms
 *   TTFT    20.7163296 ms    (no remote: lin(256) = 12.55 ms)
 * Another tenant's B finds nothing: 12.55 ms. */
static void run_abc(uint64_t b_tenant, uint64_t remote_bytes, fkv_sim_result *r)
{
    fkv_profile p = hand_profile();
    fkv_req reqs[3] = {req(1, 1, 7, 256), req(2, 1, 8, 300), req(3, b_tenant, 7, 256)};
    reqs[1].arrival_ns = 1000000000;
    reqs[2].arrival_ns = 2000000000;
    fkv_workload w;
    memset(&w, 0, sizeof w);
    w.reqs = reqs;
    w.n = 3;
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.capacity_tokens = 320;
    c.n_tenants = 2;
    c.sched.n_clients = 1;
    c.remote_capacity_bytes = remote_bytes;
    char err[256] = "";
    fkv_status st = fkv_sim_run(&w, fkv_scheme_find("lru"), &c, r, err, sizeof err);
    CHECKF(st == FKV_OK, "run: %s", err);
    REQUIRE(st == FKV_OK);
}

static void remote_hit_priced(void)
{
    fkv_sim_result r;
    run_abc(1, 0, &r);
    CHECKF(r.ttft_ns[2] == 12550000 && r.matched_tokens == 0, "no remote: TTFT %lld ns, matched %llu",
           (long long)r.ttft_ns[2], (unsigned long long)r.matched_tokens);
    fkv_sim_result_free(&r);
    run_abc(1, 1000000000, &r);
    CHECKF(r.ttft_ns[2] == 20716330, "remote: TTFT %lld ns (20716330 by hand)", (long long)r.ttft_ns[2]);
    CHECKF(r.matched_remote_tokens == 240 && r.matched_tokens == 240 && r.matched_host_tokens == 0 &&
               r.remote_fetched_tokens == 240,
           "remote %llu matched %llu fetched %llu", (unsigned long long)r.matched_remote_tokens,
           (unsigned long long)r.matched_tokens, (unsigned long long)r.remote_fetched_tokens);
    fkv_sim_result_free(&r);
    run_abc(2, 1000000000, &r);
    CHECKF(r.ttft_ns[2] == 12550000 && r.matched_remote_tokens == 0, "other tenant: TTFT %lld, remote %llu",
           (long long)r.ttft_ns[2], (unsigned long long)r.matched_remote_tokens);
    fkv_sim_result_free(&r);
    /* the price alone: 64 tokens, one fetch, 10 GB/s, 2 ms */
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.remote_bytes_per_s = 10e9;
    c.remote_latency_ns = 2000000;
    fkv_batch b = {0};
    b.remote_tokens = 64;
    b.remote_fetches = 1;
    CHECKF(fkv_sim_remote_ns(&c, &b) == 3355443 + 2000000, "%lld", (long long)fkv_sim_remote_ns(&c, &b));
    b.remote_fetches = 0;
    CHECK(fkv_sim_remote_ns(&c, &b) == 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static char *bench_out(const char *args)
{
    char path[] = "/tmp/fkv_tiers_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    int rc = bench_cli(args, path);
    CHECKF(rc == 0, "bench %s: rc %d", args, rc);
    char *s = slurp(path);
    unlink(path);
    REQUIRE(s != NULL);
    return s;
}

/* No host tier and no remote tier: the options at 0 change no byte, and
 * nothing about tiers is printed (text or JSON). */
static void untiered_unchanged(void)
{
    const char *base = "--workload chat --requests 300 --load 0.9 --schemes lru,belady --quiet";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s --format json", base);
    snprintf(b, sizeof b, "%s --format json --host-x 0 --remote-gb 0 --remote-gbps 1 --remote-latency-ms 9", base);
    char *x = bench_out(a), *y = bench_out(b);
    CHECK(strcmp(x, y) == 0);
    CHECK(strstr(x, "\"tiers\"") == NULL);
    free(x);
    free(y);
    x = bench_out(base);
    CHECK(strstr(x, "prefix hits by tier") == NULL);
    free(x);
}

/* chat with a host tier (1x, demotion) and a remote tier: every tier finds
 * something, the three rates sum to the headline prefix hit rate, and a
 * larger host tier finds no fewer host hits. */
static void tiers_sum(void)
{
    double host[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char args[512];
        snprintf(args, sizeof args,
                 "--workload chat --requests 600 --load 0.9 --schemes lru --quiet --format json --host-x %d "
                 "--host-demote --remote-gb 50",
                 k ? 16 : 1);
        char *s = bench_out(args);
        cJSON *j = cJSON_Parse(s);
        REQUIRE(j != NULL);
        cJSON *x = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "schemes"), 0);
        cJSON *t = cJSON_GetObjectItem(x, "tiers");
        REQUIRE(t != NULL);
        double d = cJSON_GetObjectItem(t, "device")->valuedouble, h = cJSON_GetObjectItem(t, "host")->valuedouble,
               r = cJSON_GetObjectItem(t, "remote")->valuedouble;
        double all = cJSON_GetObjectItem(x, "prefix_hit_rate")->valuedouble;
        CHECKF(d > 0 && h > 0 && r > 0, "device %g host %g remote %g", d, h, r);
        CHECKF(fabs(d + h + r - all) < 3e-6, "%g + %g + %g != %g", d, h, r, all);
        host[k] = h;
        cJSON_Delete(j);
        free(s);
    }
    CHECKF(host[1] >= host[0], "host hits 16x %g < 1x %g", host[1], host[0]);
}

/* Remote hit against recompute on a profile: a P-token prompt whose first
 * P - 1 tokens are in the store (the last is computed, as the scheduler
 * does).  Recompute = the prefill step alone: linear ops of P tokens +
 * attention of a P-token chunk from position 0.  Reload = a 1-token step
 * over a (P - 1)-token context + (P - 1) x KV bytes / 12.5 GB/s + 0.5 ms
 * (remote), or (P - 1) x KV bytes / tp / PCIe (host, no latency term).
 * The crossover is the smallest P from which reloading stays cheaper up to
 * 32,768 tokens (the linear-op table is not monotone at small P, so the
 * first crossing alone can be a blip).  Printed for docs/EVALUATION.md,
 * checked only to be finite. */
static double recompute_ms(const fkv_profile *p, uint32_t n)
{
    return fkv_profile_linear_ms(p, n) + fkv_profile_attn_ms(p, 0, n, 0);
}

static double reload_ms(const fkv_profile *p, uint32_t n, double bytes_per_s, double latency_ms)
{
    return fkv_profile_linear_ms(p, 1) + fkv_profile_attn_ms(p, n - 1, 1, 0) +
           1e3 * (double)(n - 1) * (double)fkv_model_token_bytes(p->model) / bytes_per_s + latency_ms;
}

static void cost_table(void)
{
    const char *names[] = {"a100-llama2-7b", "h100-llama2-7b", "a100-llama2-70b", "h100-llama2-70b"};
    const uint32_t at[] = {64, 512, 2048, 8192, 16384};
    printf("| profile | P | recompute (ms) | remote reload (ms) | host reload (ms) |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        fkv_profile p;
        char err[256];
        if (fkv_profile_get(names[i], NULL, &p, err, sizeof err) != FKV_OK) continue;
        double net = FKV_SIM_REMOTE_BYTES_PER_S, lat = FKV_SIM_REMOTE_LATENCY_NS * 1e-6, pcie = p.pcie_bytes_per_s * p.tp;
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            double c = recompute_ms(&p, at[k]), r = reload_ms(&p, at[k], net, lat), h = reload_ms(&p, at[k], pcie, 0);
            printf("| %s | %u | %.2f | %.2f | %.2f |\n", names[i], at[k], c, r, h);
            CHECK(isfinite(c) && isfinite(r) && isfinite(h));
        }
        uint32_t cross_r = 0, cross_h = 0;
        for (uint32_t n = 32768; n >= 2; n--) {
            if (reload_ms(&p, n, net, lat) < recompute_ms(&p, n)) cross_r = n;
            else if (cross_r == 0) cross_r = UINT32_MAX; /* loses at the top: never */
            else break;
        }
        for (uint32_t n = 32768; n >= 2; n--) {
            if (reload_ms(&p, n, pcie, 0) < recompute_ms(&p, n)) cross_h = n;
            else break;
        }
        char rs[32];
        if (cross_r == UINT32_MAX) snprintf(rs, sizeof rs, "never (up to 32768)");
        else snprintf(rs, sizeof rs, "%u", cross_r);
        printf("%s: remote beats recompute from P = %s, host from P = %u; per token: remote %.4f ms, host %.4f "
               "ms, recompute (P = 2048) %.4f ms\n",
               names[i], rs, cross_h,
               1e3 * (double)fkv_model_token_bytes(p.model) / net,
               1e3 * (double)fkv_model_token_bytes(p.model) / pcie, recompute_ms(&p, 2048) / 2048);
        fkv_profile_free(&p);
    }
}

static unsigned long long after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : ~0ull;
}

/* oracle-memory evicts nothing: with a host tier asked for, it runs with
 * none (no "tiers" in its JSON; before, its host was sized from its
 * whole-trace device) while lru's row beside it has its tiers. */
static void oracle_without_host(void)
{
    char *s = bench_out("--workload chat --requests 200 --load 0.9 --schemes lru,oracle-memory --quiet --format json "
                        "--host-x 16 --host-demote");
    const char *o = strstr(s, "\"name\":\"oracle-memory\"");
    REQUIRE(o != NULL);
    CHECK(strstr(o, "\"tiers\"") == NULL);
    CHECK(strstr(s, "\"tiers\"") != NULL && strstr(s, "\"tiers\"") < o);
    free(s);
}

/* The admission filter: off is the run without the option, byte for byte;
 * "seen" refuses chunks and writes fewer bytes to both tiers; asked for
 * with no tier below the device it is refused. */
static void admission_writes(void)
{
    const char *base = "--workload chat --requests 600 --load 0.9 --schemes lru --quiet --format json --host-x 4 "
                       "--host-demote --remote-gb 50";
    char a[512];
    char *plain = bench_out(base);
    snprintf(a, sizeof a, "%s --tier-admission off", base);
    char *off = bench_out(a);
    snprintf(a, sizeof a, "%s --tier-admission seen", base);
    char *seen = bench_out(a);
    CHECK(strcmp(plain, off) == 0);
    const char *ro = strstr(off, "\"written_bytes\":{\"host\":"), *rs = strstr(seen, "\"written_bytes\":{\"host\":");
    REQUIRE(ro && rs);
    unsigned long long oh = after(ro, "{\"host\":"), sh = after(rs, "{\"host\":");
    unsigned long long o_remote = after(ro, ",\"remote\":"), s_remote = after(rs, ",\"remote\":");
    CHECKF(oh > 0 && sh < oh, "host bytes off %llu seen %llu", oh, sh);
    CHECKF(o_remote > 0 && s_remote < o_remote, "remote bytes off %llu seen %llu", o_remote, s_remote);
    CHECK(after(off, "\"refused_chunks\":{\"host\":") == 0);
    unsigned long long refused = after(seen, "\"refused_chunks\":{\"host\":");
    CHECKF(refused > 0 && refused != ~0ull, "refused %llu", refused);
    free(plain);
    free(off);
    free(seen);
    CHECK(bench_cli("--workload chat --requests 50 --quiet --schemes lru --tier-admission tinylfu", "/dev/null") != 0);
}

int main(void)
{
    store_lru();
    store_put_order();
    store_namespace();
    remote_hit_priced();
    untiered_unchanged();
    tiers_sum();
    cost_table();
    oracle_without_host();
    admission_writes();
    return check_done();
}
