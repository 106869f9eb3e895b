/* The load generator: the seed workload's mix and arrivals, trace reading,
 * and a short open-loop run against the in-process server whose numbers
 * must agree with what the server saw. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "http_client.h"
#include "server/load.h"
#include "server/server.h"

static void test_seed_workload(void)
{
    fkv_load_workload w, w2, w3;
    REQUIRE(fkv_load_workload_seed(7, 100, 100, 8, &w) == FKV_OK);
    /* Poisson: ~10000 arrivals; count within 4 sigma (sqrt(1e4) = 100) */
    CHECKF(fabs((double)w.n - 10000) < 400, "n %zu", w.n);
    size_t cls[3] = {0};
    int sorted = 1, in_range = 1;
    double sum_sq_gap = 0, sum_gap = 0;
    for (size_t i = 0; i < w.n; i++) {
        const fkv_load_item *it = &w.items[i];
        cls[it->cls]++;
        uint32_t total = it->prompt_tokens + it->max_tokens;
        in_range &= it->cls == fkv_load_class_of(total) && it->client < 8 && it->prompt_tokens >= 1 &&
                    it->max_tokens >= 1 && total >= 16 && total <= 2048;
        if (i) {
            double g = it->arrival_s - w.items[i - 1].arrival_s;
            sorted &= g >= 0;
            sum_gap += g;
            sum_sq_gap += g * g;
        }
    }
    CHECK(sorted && in_range);
    /* 60/30/10 within 4 sigma of a binomial over n */
    double n = (double)w.n, p[3] = {0.6, 0.3, 0.1};
    for (int c = 0; c < 3; c++)
        CHECKF(fabs((double)cls[c] / n - p[c]) < 4 * sqrt(p[c] * (1 - p[c]) / n), "class %d: %zu of %zu", c, cls[c], w.n);
    /* exponential gaps: mean 1/rate and coefficient of variation 1 */
    double mean = sum_gap / (n - 1), var = sum_sq_gap / (n - 1) - mean * mean;
    CHECKF(fabs(mean - 0.01) < 0.0005, "mean gap %g", mean);
    CHECKF(fabs(sqrt(var) / mean - 1) < 0.05, "cv %g", sqrt(var) / mean);

    REQUIRE(fkv_load_workload_seed(7, 100, 100, 8, &w2) == FKV_OK);
    CHECK(w2.n == w.n && !memcmp(w.items, w2.items, w.n * sizeof *w.items));
    REQUIRE(fkv_load_workload_seed(8, 100, 100, 8, &w3) == FKV_OK);
    CHECK(w3.n != w.n || memcmp(w.items, w3.items, w.n * sizeof *w.items));

    /* prompts: deterministic, below vocab, a shared per-client prefix */
    int32_t a[2048], b[2048];
    fkv_load_prompt(&w.items[0], 0, 1, 50, a);
    fkv_load_prompt(&w.items[0], 0, 1, 50, b);
    CHECK(!memcmp(a, b, w.items[0].prompt_tokens * sizeof *a));
    int below = 1;
    for (uint32_t k = 0; k < w.items[0].prompt_tokens; k++) below &= a[k] >= 0 && a[k] < 50;
    CHECK(below);
    size_t j = 1;
    while (j < w.n && (w.items[j].client != w.items[0].client || w.items[j].prompt_tokens < 64 ||
                       w.items[0].prompt_tokens < 64))
        j++;
    if (j < w.n) {
        fkv_load_prompt(&w.items[j], j, 1, 50, b);
        CHECK(!memcmp(a, b, 32 * sizeof *a) && memcmp(a + 32, b + 32, 16 * sizeof *a));
    }
    fkv_load_workload_free(&w);
    fkv_load_workload_free(&w2);
    fkv_load_workload_free(&w3);
}

static void test_trace_workload(void)
{
    char dir[] = "/tmp/fkv_load_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n"
          "{\"timestamp\": 5, \"input_length\": 9000, \"output_length\": 300, \"hash_ids\": [1, 2]}\n",
          f);
    fclose(f);
    fkv_load_workload w;
    char err[256];
    REQUIRE(fkv_load_workload_trace(path, 3, 50, 2, 4, 1000, &w, err, sizeof err) == FKV_OK);
    CHECK(w.n > 50);
    int ok = 1;
    for (size_t i = 0; i < w.n; i++) {
        const fkv_load_item *it = &w.items[i];
        /* rows in order, cycled; the long prompt cut to 1000 */
        ok &= i % 2 == 0 ? it->prompt_tokens == 100 && it->max_tokens == 10 && it->cls == FKV_CLASS_SHORT
                         : it->prompt_tokens == 1000 && it->max_tokens == 300 && it->cls == FKV_CLASS_LONG;
    }
    CHECK(ok);
    fkv_load_workload_free(&w);
    f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"input_length\": 5, \"output_length\": 1}\nnot json\n", f);
    fclose(f);
    CHECK(fkv_load_workload_trace(path, 3, 50, 2, 4, 0, &w, err, sizeof err) == FKV_EPARSE && strstr(err, ":2:"));
    unlink(path);
    CHECK(fkv_load_workload_trace(path, 3, 50, 2, 4, 0, &w, err, sizeof err) == FKV_EIO);
    rmdir(dir);
}

static double metric(unsigned port, const char *series)
{
    http_resp r = {0};
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    double v = -1;
    size_t n = strlen(series);
    for (const char *p = r.body.data; p && (p = strstr(p, series)); p += n)
        if (p[-1] == '\n' && p[n] == ' ') v = atof(p + n + 1);
    http_free(&r);
    return v;
}

/* The in-process server over the fake backend (1 ms a token), on a free
 * port; its base URL in url. */
static void start_fake(fkv_backend *be, fkv_server **srv, const char *api_key, char url[64])
{
    char err[256];
    const char *opts[] = {"pace_ms=1", "max_batch=64", NULL};
    REQUIRE(fkv_backend_create("fake", opts, be, err, sizeof err) == FKV_OK);
    fkv_server_config sc;
    fkv_server_config_default(&sc);
    sc.port = 0;
    sc.api_key = api_key;
    REQUIRE(fkv_server_start(&sc, be, srv, err, sizeof err) == FKV_OK);
    snprintf(url, 64, "http://127.0.0.1:%u", (unsigned)fkv_server_port(*srv));
}

static void test_run(void)
{
    fkv_backend be;
    fkv_server *srv;
    char err[256], url[64];
    start_fake(&be, &srv, "k", url);

    /* short requests only, to keep the run short: 40/s for 1 s */
    fkv_load_workload w;
    REQUIRE(fkv_load_workload_seed(11, 40, 1.0, 4, &w) == FKV_OK);
    size_t kept = 0;
    for (size_t i = 0; i < w.n; i++)
        if (w.items[i].cls == FKV_CLASS_SHORT) w.items[kept++] = w.items[i];
    w.n = kept;
    REQUIRE(w.n > 10);
    uint64_t want_tokens = 0;
    for (size_t i = 0; i < w.n; i++) want_tokens += w.items[i].max_tokens;

    fkv_load_config cfg = {url, "k", NULL, 1, 256, 30, 1024};
    fkv_load_result r;
    REQUIRE(fkv_load_run(&cfg, &w, &r, err, sizeof err) == FKV_OK);
    CHECK(r.sent[FKV_CLASS_SHORT] == w.n && r.ok[FKV_CLASS_SHORT] == w.n && r.n_err_kinds == 0);
    /* the fake generates exactly max_tokens: every token event was seen */
    CHECK(r.tokens[FKV_CLASS_SHORT] == want_tokens);
    CHECK(r.ttft[0].n == w.n && r.e2e[0].n == w.n && r.itl[0].n == want_tokens - w.n);
    int sane = 1;
    for (size_t i = 0; i < w.n; i++) sane &= r.ttft[0].v[i] > 0 && r.ttft[0].v[i] < r.e2e[0].v[i] + 1e-9;
    CHECK(sane);
    /* the server counted the same requests */
    CHECK(metric(fkv_server_port(srv), "fairkv_e2e_request_latency_seconds_count{request_type=\"short\"}") == (double)w.n);
    CHECK(metric(fkv_server_port(srv), "fairkv_generation_tokens_total") == (double)want_tokens);
    /* Nothing was evicted: the fake's cache (4096 pages of 16 tokens, 65536
     * tokens) holds every token of the run (short requests, under 128
     * tokens each, 22 of them), so no read missed and the miss rate
     * is 0, not merely present.  Every generated token is appended and the
     * sequence read whole, so request i (prompt p, m tokens) reads
     * p + 1, ..., p + m tokens: sum m p + m (m + 1) / 2 hits. */
    double hits = 0;
    for (size_t i = 0; i < w.n; i++) {
        double p = w.items[i].prompt_tokens, m = w.items[i].max_tokens;
        hits += m * p + m * (m + 1) / 2;
    }
    CHECK(metric(fkv_server_port(srv), "fairkv_evicted_pages_total") == 0);
    CHECK(metric(fkv_server_port(srv), "fairkv_miss_tokens_total{request_type=\"short\"}") == 0);
    CHECKF(metric(fkv_server_port(srv), "fairkv_hit_tokens_total{request_type=\"short\"}") == hits,
           "hit tokens %g, want %g", metric(fkv_server_port(srv), "fairkv_hit_tokens_total{request_type=\"short\"}"),
           hits);
    CHECKF(r.miss_rate[FKV_CLASS_SHORT] == 0, "miss rate %g", r.miss_rate[FKV_CLASS_SHORT]);
    FILE *devnull = fopen("/dev/null", "w");
    fkv_load_print_text(&r, devnull);
    fkv_load_print_json(&r, devnull);
    fclose(devnull);
    fkv_load_result_free(&r);

    /* errors are counted by kind: a wrong key gives http_401 for each */
    cfg.api_key = "wrong";
    cfg.model = "fairkv-fake";
    REQUIRE(fkv_load_run(&cfg, &w, &r, err, sizeof err) == FKV_OK);
    CHECK(r.n_err_kinds == 1 && !strcmp(r.err_kind[0], "http_401") && r.err_count[0] == w.n);
    CHECK(r.failed[FKV_CLASS_SHORT] == w.n && r.ok[FKV_CLASS_SHORT] == 0);
    fkv_load_result_free(&r);

    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);

    /* nobody listening: connect errors, and the model lookup fails clearly */
    cfg.model = NULL;
    CHECK(fkv_load_run(&cfg, &w, &r, err, sizeof err) == FKV_EIO && strstr(err, "/v1/models"));
    cfg.model = "m";
    w.n = 3;
    REQUIRE(fkv_load_run(&cfg, &w, &r, err, sizeof err) == FKV_OK);
    CHECK(r.n_err_kinds == 1 && !strcmp(r.err_kind[0], "connect") && r.err_count[0] == 3);
    fkv_load_result_free(&r);
    fkv_load_workload_free(&w);
}

/* The tenants workload: light users' Poisson arrivals, heavy users as
 * closed-loop templates, and a light-only run with the same requests. */
static void test_tenants_workload(void)
{
    fkv_load_tenants t;
    fkv_load_tenants_default(&t);
    t.duration = 20;
    fkv_load_workload w, lo, ho;
    REQUIRE(fkv_load_workload_tenants(5, &t, &w) == FKV_OK);
    /* 4 users x 0.5/s x 20 s: 40 expected, Poisson sd 6.3 */
    CHECKF(w.n > 20 && w.n < 60, "%zu light requests", w.n);
    int ok = 1, seen[6] = {0};
    for (size_t i = 0; i < w.n; i++) {
        const fkv_load_item *it = &w.items[i];
        ok &= it->role == FKV_LOAD_LIGHT && it->client >= 2 && it->client < 6 && it->prompt_tokens == 40 &&
              it->max_tokens == 16 && it->arrival_s < 20 && (i == 0 || it->arrival_s >= w.items[i - 1].arrival_s);
        if (it->client < 6) seen[it->client] = 1;
    }
    CHECK(ok && seen[2] && seen[3] && seen[4] && seen[5] && !seen[0] && !seen[1]);
    CHECK(w.n_closed == 2 && w.closed_until_s == 20);
    for (uint32_t k = 0; k < w.n_closed; k++)
        CHECK(w.closed[k].role == FKV_LOAD_HEAVY && w.closed[k].client == k && w.closed[k].prompt_tokens == 2000 &&
              w.closed[k].max_tokens == 32);
    char name[48];
    fkv_load_user_name(&w.closed[1], name, sizeof name);
    CHECK(!strcmp(name, "heavy-1"));
    fkv_load_user_name(&w.items[0], name, sizeof name);
    CHECK(!strncmp(name, "light-", 6) && atoi(name + 6) >= 2);
    /* the light users' requests do not depend on the heavy ones */
    t.only = FKV_LOAD_ONLY_LIGHT;
    REQUIRE(fkv_load_workload_tenants(5, &t, &lo) == FKV_OK);
    CHECK(lo.n == w.n && lo.n_closed == 0 && !memcmp(lo.items, w.items, w.n * sizeof *w.items));
    t.only = FKV_LOAD_ONLY_HEAVY;
    REQUIRE(fkv_load_workload_tenants(5, &t, &ho) == FKV_OK);
    CHECK(ho.n == 0 && ho.n_closed == 2);
    /* bad parameters, and a plain CSV cannot hold a closed loop */
    char err[256] = "";
    CHECK(fkv_load_workload_write_plain(&w, "/nonexistent/x.csv", err, sizeof err) == FKV_EINVAL &&
          strstr(err, "back-to-back"));
    fkv_load_workload bad;
    t.only = FKV_LOAD_ONLY_ALL;
    t.light_rate = 0;
    CHECK(fkv_load_workload_tenants(5, &t, &bad) == FKV_EINVAL);
    t.light_rate = 1;
    t.heavy_prompt = 0;
    CHECK(fkv_load_workload_tenants(5, &t, &bad) == FKV_EINVAL);
    fkv_load_workload_free(&w);
    fkv_load_workload_free(&lo);
    fkv_load_workload_free(&ho);
}

/* A tenants run against the in-process server: each heavy user keeps
 * exactly one request open and sends again when it ends; every request is
 * reported under its user, and the server saw the same count. */
static void test_tenants_run(void)
{
    fkv_backend be;
    fkv_server *srv;
    char err[256], url[64];
    start_fake(&be, &srv, NULL, url);
    fkv_load_tenants t;
    fkv_load_tenants_default(&t);
    t.heavy = 2, t.light = 3, t.heavy_prompt = 200, t.heavy_out = 8, t.light_prompt = 20, t.light_out = 4;
    t.light_rate = 10, t.duration = 1.0;
    fkv_load_workload w;
    REQUIRE(fkv_load_workload_tenants(9, &t, &w) == FKV_OK);
    fkv_load_config cfg = {url, NULL, NULL, 1, 256, 30, 1024};
    fkv_load_result r;
    REQUIRE(fkv_load_run(&cfg, &w, &r, err, sizeof err) == FKV_OK);
    REQUIRE(r.n_users == 5);
    size_t light_sent = 0, all_ok = 0;
    for (uint32_t k = 0; k < r.n_users; k++) {
        const fkv_load_user *u = &r.users[k];
        CHECK(u->present && u->failed == 0 && u->ok == u->sent && u->ttft.n == u->ok && u->e2e.n == u->ok);
        all_ok += u->ok;
        if (k < 2) {
            /* back to back for a second, one open at a time: several, never two */
            CHECKF(u->role == FKV_LOAD_HEAVY && u->max_open == 1 && u->sent >= 3, "heavy %u: %zu sent, %u open",
                   k, u->sent, u->max_open);
            CHECK(u->tokens == u->ok * 8);
        } else {
            CHECK(u->role == FKV_LOAD_LIGHT && u->tokens == u->ok * 4);
            light_sent += u->sent;
        }
    }
    CHECK(light_sent == w.n && r.n_err_kinds == 0);
    CHECK(metric(fkv_server_port(srv), "fairkv_e2e_request_latency_seconds_count{request_type=\"short\"}") +
              metric(fkv_server_port(srv), "fairkv_e2e_request_latency_seconds_count{request_type=\"medium\"}") ==
          (double)all_ok);
    /* the JSON report names each user and says which are light */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    fkv_load_print_json(&r, mem);
    fclose(mem);
    cJSON *j = cJSON_Parse(buf);
    const cJSON *users = cJSON_GetObjectItemCaseSensitive(j, "users");
    REQUIRE(cJSON_GetArraySize(users) == 5);
    for (int k = 0; k < 5; k++) {
        const cJSON *u = cJSON_GetArrayItem(users, k);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(u, "user");
        const cJSON *light = cJSON_GetObjectItemCaseSensitive(u, "light");
        const cJSON *p99 = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "ttft"), "p99_ms");
        CHECK(cJSON_IsString(name) && !strncmp(name->valuestring, k < 2 ? "heavy-" : "light-", 6));
        CHECK(k < 2 ? cJSON_IsFalse(light) : cJSON_IsTrue(light));
        CHECK(cJSON_IsNumber(p99) && p99->valuedouble > 0);
    }
    cJSON_Delete(j);
    free(buf);
    fkv_load_result_free(&r);
    fkv_load_workload_free(&w);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_tenants_workload();
    test_tenants_run();
    test_seed_workload();
    test_trace_workload();
    test_run();
    curl_global_cleanup();
    return check_done();
}
