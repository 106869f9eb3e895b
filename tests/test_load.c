/* The load generator: the seed workload's mix and arrivals, trace reading,
 * and a short open-loop run against the in-process server whose numbers
 * must agree with what the server saw. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void test_run(void)
{
    fkv_backend be;
    fkv_server *srv;
    char err[256];
    const char *opts[] = {"pace_ms=1", "max_batch=64", NULL};
    REQUIRE(fkv_backend_create("fake", opts, &be, err, sizeof err) == FKV_OK);
    fkv_server_config sc;
    fkv_server_config_default(&sc);
    sc.port = 0;
    sc.api_key = "k";
    REQUIRE(fkv_server_start(&sc, &be, &srv, err, sizeof err) == FKV_OK);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)fkv_server_port(srv));

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

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_seed_workload();
    test_trace_workload();
    test_run();
    curl_global_cleanup();
    return check_done();
}
