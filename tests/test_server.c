/* The HTTP server over the fake backend, in process on a free loopback
 * port: completions (whole and streamed), every error answer with its JSON
 * body, the queue limit, client disconnects, /metrics, and the graceful
 * drain of SIGTERM. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "http_client.h"
#include "server/api.h"
#include "server/metrics_http.h"
#include "server/server.h"

static const char *KEY = "test-key-123";
static unsigned port;
static fkv_backend be;
static fkv_server *srv;

static const char *body_of(const http_resp *r)
{
    return r->body.data ? r->body.data : "";
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A JSON error body: {"error":{"message":non-empty,"type":..,"param":..,"code":code}}. */
static int is_error_body(const http_resp *r, const char *code, const char *param)
{
    cJSON *j = cJSON_Parse(body_of(r));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "param");
    int ok = cJSON_IsString(m) && m->valuestring[0] && cJSON_IsString(t) && cJSON_IsString(c) &&
             !strcmp(c->valuestring, code) && p &&
             (param ? cJSON_IsString(p) && !strcmp(p->valuestring, param) : 1);
    if (!ok) fprintf(stderr, "unexpected error body: %s\n", body_of(r));
    cJSON_Delete(j);
    return ok;
}

static void post(http_resp *r, const char *json, const char *key)
{
    http_do(r, port, "POST", "/v1/completions", json, strlen(json), key);
}

static uint64_t stat_running(void)
{
    fkv_backend_stats s;
    be.ops->stats(be.impl, &s);
    return s.running;
}

static uint64_t stat_waiting(void)
{
    fkv_backend_stats s;
    be.ops->stats(be.impl, &s);
    return s.waiting;
}

/* Polls cond for at most ms milliseconds. */
#define WAIT_FOR(cond, ms)                                          \
    do {                                                            \
        for (int w_ = 0; w_ < (ms) / 5 && !(cond); w_++) sleep_ms(5); \
    } while (0)

/* ---------------------------------------------------------------- SSE */

typedef struct sse {
    int events, done_last, framing_ok;
    uint32_t tokens[4];       /* token chunks (non-empty text) per choice */
    char text[4][512];        /* concatenated text per choice */
    char finish[4][16];
    long usage_completion, usage_prompt, usage_total;
} sse;

/* Splits an SSE body into "data: X\n\n" events and checks their framing. */
static void parse_sse(const char *b, sse *s)
{
    memset(s, 0, sizeof *s);
    s->framing_ok = 1;
    s->usage_completion = s->usage_prompt = s->usage_total = -1;
    const char *p = b;
    while (*p) {
        const char *e = strstr(p, "\n\n");
        if (strncmp(p, "data: ", 6) || !e) {
            s->framing_ok = 0;
            return;
        }
        s->events++;
        size_t n = (size_t)(e - p - 6);
        s->done_last = n == 6 && !strncmp(p + 6, "[DONE]", 6) && e[2] == 0;
        if (!(n == 6 && !strncmp(p + 6, "[DONE]", 6))) {
            cJSON *j = cJSON_ParseWithLength(p + 6, n);
            if (!j) s->framing_ok = 0;
            const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
            const cJSON *c0 = cJSON_GetArrayItem(ch, 0);
            if (c0) {
                int idx = cJSON_GetObjectItemCaseSensitive(c0, "index")->valueint;
                const char *t = cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring;
                const cJSON *f = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
                if (idx >= 0 && idx < 4) {
                    if (t[0]) s->tokens[idx]++;
                    strncat(s->text[idx], t, sizeof s->text[idx] - strlen(s->text[idx]) - 1);
                    if (cJSON_IsString(f)) snprintf(s->finish[idx], sizeof s->finish[idx], "%s", f->valuestring);
                }
            }
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
            if (u) {
                s->usage_completion = (long)cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble;
                s->usage_prompt = (long)cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")->valuedouble;
                s->usage_total = (long)cJSON_GetObjectItemCaseSensitive(u, "total_tokens")->valuedouble;
            }
            cJSON_Delete(j);
        }
        p = e + 2;
    }
}

/* ---------------------------------------------------------------- cases */

static void test_basic_endpoints(void)
{
    http_resp r = {0};
    http_do(&r, port, "GET", "/health", NULL, 0, NULL);
    CHECK(r.status == 200 && strstr(body_of(&r), "\"ok\""));
    http_free(&r);

    http_do(&r, port, "GET", "/v1/models", NULL, 0, KEY);
    CHECK(r.status == 200);
    cJSON *j = cJSON_Parse(body_of(&r));
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "data"), 0), "id");
    CHECK(cJSON_IsString(id) && !strcmp(id->valuestring, "fairkv-fake"));
    cJSON_Delete(j);
    http_free(&r);

    http_do(&r, port, "GET", "/nope", NULL, 0, KEY);
    CHECK(r.status == 404 && is_error_body(&r, "not_found", NULL));
    http_free(&r);
    http_do(&r, port, "GET", "/v1/completions", NULL, 0, KEY);
    CHECK(r.status == 405 && is_error_body(&r, "method_not_allowed", NULL));
    http_free(&r);
}

static void test_completion(void)
{
    http_resp r = {0}, r2 = {0}, r3 = {0};
    const char *req = "{\"model\":\"fairkv-fake\",\"prompt\":\"hello world\",\"max_tokens\":7,\"seed\":42,\"user\":\"alice\"}";
    post(&r, req, KEY);
    CHECKF(r.status == 200, "status %ld body %s", r.status, body_of(&r));
    cJSON *j = cJSON_Parse(body_of(&r));
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(c0, "text");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    REQUIRE(cJSON_IsString(text) && u);
    /* the fake makes one character per token; the prompt is one token per byte */
    CHECK(strlen(text->valuestring) == 7);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(c0, "finish_reason")->valuestring, "length"));
    CHECK(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")->valuedouble == 11);
    CHECK(cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble == 7);
    CHECK(cJSON_GetObjectItemCaseSensitive(u, "total_tokens")->valuedouble == 18);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "object")->valuestring, "text_completion"));

    /* same seed, same text; another seed, another text */
    post(&r2, req, KEY);
    cJSON *j2 = cJSON_Parse(body_of(&r2));
    const char *t2 = cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j2, "choices"), 0), "text")
                         ->valuestring;
    CHECK(!strcmp(t2, text->valuestring));
    post(&r3, "{\"model\":\"fairkv-fake\",\"prompt\":\"hello world\",\"max_tokens\":7,\"seed\":43}", KEY);
    cJSON *j3 = cJSON_Parse(body_of(&r3));
    const char *t3 = cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j3, "choices"), 0), "text")
                         ->valuestring;
    CHECK(strcmp(t3, text->valuestring) != 0);

    /* a streamed request with the same seed streams the same text */
    http_resp rs = {0};
    post(&rs,
         "{\"model\":\"fairkv-fake\",\"prompt\":\"hello world\",\"max_tokens\":7,\"seed\":42,\"stream\":true,"
         "\"stream_options\":{\"include_usage\":true}}",
         KEY);
    CHECK(rs.status == 200 && strstr(rs.headers.data, "text/event-stream"));
    sse s;
    parse_sse(body_of(&rs), &s);
    CHECKF(s.framing_ok && s.done_last, "SSE body: %s", body_of(&rs));
    CHECK(s.tokens[0] == 7);
    CHECK(!strcmp(s.text[0], text->valuestring));
    CHECK(!strcmp(s.finish[0], "length"));
    CHECK(s.usage_completion == 7 && s.usage_prompt == 11 && s.usage_total == 18);
    http_free(&rs);
    cJSON_Delete(j);
    cJSON_Delete(j2);
    cJSON_Delete(j3);
    http_free(&r);
    http_free(&r2);
    http_free(&r3);
}

static void test_stream_n_tokens(void)
{
    http_resp r = {0};
    post(&r,
         "{\"model\":\"fairkv-fake\",\"prompt\":[1,2,3,4,5],\"max_tokens\":5,\"n\":2,\"stream\":true,"
         "\"stream_options\":{\"include_usage\":true}}",
         KEY);
    CHECK(r.status == 200);
    sse s;
    parse_sse(body_of(&r), &s);
    CHECKF(s.framing_ok && s.done_last, "SSE body: %s", body_of(&r));
    CHECK(s.tokens[0] == 5 && s.tokens[1] == 5);
    /* usage agrees with what was streamed: prompt counted once */
    CHECK(s.usage_completion == (long)(s.tokens[0] + s.tokens[1]));
    CHECK(s.usage_prompt == 5 && s.usage_total == 15);
    /* one chunk per token per choice, one finish per choice, usage, [DONE] */
    CHECK(s.events == 5 * 2 + 2 + 1 + 1);
    http_free(&r);

    /* without include_usage there is no usage event */
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":[7],\"max_tokens\":3,\"stream\":true}", KEY);
    parse_sse(body_of(&r), &s);
    CHECK(s.framing_ok && s.done_last && s.usage_completion == -1 && s.events == 3 + 1 + 1);
    http_free(&r);
}

static void test_errors(void)
{
    http_resp r = {0};
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":", KEY);
    CHECK(r.status == 400 && is_error_body(&r, "invalid_json", NULL));
    http_free(&r);
    post(&r, "{\"model\":\"fairkv-fake\",\"max_tokens\":4}", KEY);
    CHECK(r.status == 400 && is_error_body(&r, "missing_field", "prompt"));
    http_free(&r);
    /* one model served: "model" may be left out, and the answer names it */
    post(&r, "{\"prompt\":\"x\",\"max_tokens\":2}", KEY);
    CHECK(r.status == 200 && strstr(body_of(&r), "\"model\":\"fairkv-fake\""));
    http_free(&r);
    post(&r, "{\"model\":5,\"prompt\":\"x\"}", KEY);
    CHECK(r.status == 400 && is_error_body(&r, "invalid_type", "model"));
    http_free(&r);
    post(&r, "{\"model\":\"gpt-9\",\"prompt\":\"x\"}", KEY);
    CHECK(r.status == 404 && is_error_body(&r, "model_not_found", "model"));
    http_free(&r);
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"x\",\"temperature\":3}", KEY);
    CHECK(r.status == 400 && is_error_body(&r, "invalid_value", "temperature"));
    http_free(&r);
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":[1,999]}", KEY);
    CHECK(r.status == 400 && is_error_body(&r, "invalid_value", "prompt"));
    http_free(&r);
    /* --max-prompt 64 in this server: 65 bytes are 65 tokens */
    char longp[128];
    memset(longp, 'a', 65);
    longp[65] = 0;
    char body[256];
    snprintf(body, sizeof body, "{\"model\":\"fairkv-fake\",\"prompt\":\"%s\"}", longp);
    post(&r, body, KEY);
    CHECK(r.status == 400 && is_error_body(&r, "context_length_exceeded", "prompt"));
    http_free(&r);

    /* wrong and missing keys; /health needs none */
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"x\"}", "wrong-key-123");
    CHECK(r.status == 401 && is_error_body(&r, "invalid_api_key", NULL));
    http_free(&r);
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"x\"}", NULL);
    CHECK(r.status == 401 && is_error_body(&r, "invalid_api_key", NULL));
    http_free(&r);

    /* bodies over --max-body 4096: sent whole (8 KiB) and refused after
     * Expect: 100-continue (2 MiB, curl asks first) */
    size_t sizes[2] = {8192, 2u << 20};
    for (int i = 0; i < 2; i++) {
        char *big = malloc(sizes[i] + 1);
        REQUIRE(big);
        memset(big, ' ', sizes[i]);
        memcpy(big, "{\"model\":\"fairkv-fake\",\"prompt\":\"x\"", 35);
        big[sizes[i] - 1] = '}';
        big[sizes[i]] = 0;
        http_do(&r, port, "POST", "/v1/completions", big, sizes[i], KEY);
        CHECKF(r.status == 413 && is_error_body(&r, "body_too_large", NULL), "size %zu: status %ld cc %d", sizes[i],
               r.status, (int)r.cc);
        http_free(&r);
        free(big);
    }
}

typedef struct bg {
    pthread_t t;
    const char *json;
    http_resp r;
} bg;

static void *bg_run(void *arg)
{
    bg *b = arg;
    post(&b->r, b->json, KEY);
    return NULL;
}

static void test_queue_full(void)
{
    /* max_batch 1, --max-queue 1: one running, one waiting, the third is refused */
    bg a = {.json = "{\"model\":\"fairkv-fake\",\"prompt\":\"aaaa\",\"max_tokens\":40,\"stream\":true}"};
    bg b = {.json = "{\"model\":\"fairkv-fake\",\"prompt\":\"bbbb\",\"max_tokens\":10}"};
    pthread_create(&a.t, NULL, bg_run, &a);
    WAIT_FOR(stat_running() == 1, 5000);
    CHECK(stat_running() == 1);
    pthread_create(&b.t, NULL, bg_run, &b);
    WAIT_FOR(stat_waiting() == 1, 5000);
    CHECK(stat_waiting() == 1);
    http_resp r = {0};
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"cccc\",\"max_tokens\":3}", KEY);
    CHECK(r.status == 429 && is_error_body(&r, "queue_full", NULL));
    CHECK(r.headers.data && strstr(r.headers.data, "Retry-After: 1"));
    http_free(&r);
    pthread_join(a.t, NULL);
    pthread_join(b.t, NULL);
    sse s;
    parse_sse(body_of(&a.r), &s);
    CHECK(a.r.status == 200 && s.done_last && s.tokens[0] == 40);
    CHECK(b.r.status == 200);
    http_free(&a.r);
    http_free(&b.r);
    /* the queue drained: accepted again */
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"cccc\",\"max_tokens\":3}", KEY);
    CHECK(r.status == 200);
    http_free(&r);
}

static void test_disconnect_cancels(void)
{
    /* 2000 tokens at 10 ms would take 20 s; the client leaves after a few
     * chunks and the backend must stop within a few steps */
    http_resp r = {0};
    r.abort_after = 600;
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"zz\",\"max_tokens\":2000,\"stream\":true}", KEY);
    CHECK(r.cc == CURLE_WRITE_ERROR);
    http_free(&r);
    WAIT_FOR(stat_running() == 0 && fkv_server_in_flight(srv) == 0, 3000);
    CHECK(stat_running() == 0);
    CHECK(fkv_server_in_flight(srv) == 0);
}

/* The value of one sample line "name{labels} value" in a metrics text, or -1. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return atof(p + n + 1);
    return -1;
}

static void test_metrics(void)
{
    http_resp r = {0};
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    CHECK(r.status == 200 && strstr(r.headers.data, "text/plain; version=0.0.4"));
    const char *m = body_of(&r);
    CHECK(sample(m, "kv_cache_chunk_size{device=\"cpu0\"}") > 0);
    double miss = sample(m, "kv_cache_miss_rate{request_type=\"short\"}");
    CHECK(miss >= 0 && miss <= 1);
    CHECK(sample(m, "fairkv_time_to_first_token_seconds_count{request_type=\"short\"}") >= 5);
    CHECK(sample(m, "fairkv_inter_token_latency_seconds_count{request_type=\"short\"}") > 0);
    CHECK(sample(m, "fairkv_e2e_request_latency_seconds_count{request_type=\"short\"}") >= 5);
    CHECK(sample(m, "fairkv_http_errors_total{code=\"429\"}") == 1);
    CHECK(sample(m, "fairkv_http_errors_total{code=\"413\"}") == 2);
    CHECK(sample(m, "fairkv_http_errors_total{code=\"401\"}") == 2);
    CHECK(sample(m, "fairkv_requests_finished_total{finished_reason=\"cancelled\"}") == 1);
    CHECK(sample(m, "fairkv_prefix_queries_tokens_total") > 0);
    CHECK(sample(m, "fairkv_num_requests_running") == 0);
    /* no family twice */
    int dup = 0, types = 0;
    for (const char *p = m; (p = strstr(p, "# TYPE ")); p += 7) {
        types++;
        const char *e = strchr(p + 7, ' ');
        char name[128];
        snprintf(name, sizeof name, "# TYPE %.*s ", (int)(e - p - 7), p + 7);
        if (strstr(p + 1, name)) dup++;
    }
    CHECK(types > 20 && dup == 0);
    http_free(&r);

    /* the filter drops families already written and repeats within the text */
    const char *seen[] = {"a_total"};
    const char *text = "# HELP a_total x\n# TYPE a_total counter\na_total 1\n"
                       "# HELP b y\n# TYPE b gauge\nb{l=\"1\"} 2\n"
                       "# HELP b y\n# TYPE b gauge\nb{l=\"1\"} 3\n";
    fkv_textbuf out;
    fkv_textbuf_init(&out);
    fkv_prom_append_filtered(&out, text, strlen(text), seen, 1);
    CHECK(out.data && !strcmp(out.data, "# HELP b y\n# TYPE b gauge\nb{l=\"1\"} 2\n"));
    fkv_textbuf_free(&out);
}

/* 1 while the server's port takes a TCP connection (nothing is sent). */
static int port_open(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

typedef struct drainer {
    pthread_t t;
    fkv_status st;
    int64_t end_ns;
    uint64_t in_flight_after, running_after; /* read as soon as drain returned */
} drainer;

static void *drain_run(void *arg)
{
    drainer *d = arg;
    d->st = fkv_server_drain(srv, (int64_t)20 * 1000000000);
    d->end_ns = fkv_monotonic_now_ns();
    d->in_flight_after = fkv_server_in_flight(srv);
    d->running_after = stat_running();
    return NULL;
}

static void test_drain(void)
{
    /* 300 tokens at one per 10 ms step: at least 3 s, long enough to still
     * run through the refused request below on a loaded machine (60 tokens
     * did not: a CI run saw it finish first) */
    enum { TOKENS = 300 };
    char json[128];
    snprintf(json, sizeof json,
             "{\"model\":\"fairkv-fake\",\"prompt\":\"dddd\",\"max_tokens\":%d,\"stream\":true}", TOKENS);
    bg a = {.json = json};
    int64_t a_start = fkv_monotonic_now_ns();
    pthread_create(&a.t, NULL, bg_run, &a);
    WAIT_FOR(stat_running() == 1, 5000);
    REQUIRE(stat_running() == 1);
    drainer d = {0};
    pthread_create(&d.t, NULL, drain_run, &d);
    /* until the drain has closed the listening socket (a fixed sleep lost
     * that race on a loaded machine) */
    WAIT_FOR(!port_open(), 5000);
    /* new requests are refused (listening socket closed) while one runs */
    http_resp r = {0};
    post(&r, "{\"model\":\"fairkv-fake\",\"prompt\":\"e\",\"max_tokens\":2}", KEY);
    CHECKF(r.cc == CURLE_COULDNT_CONNECT || r.status == 503, "cc %d status %ld", (int)r.cc, r.status);
    CHECK(stat_running() == 1);
    http_free(&r);
    pthread_join(a.t, NULL);
    pthread_join(d.t, NULL);
    /* the running request finished whole, and drain returned only after it:
     * nothing in flight or running when it returned, and no sooner than the
     * request's paced steps allow (sleeps only stretch under load) */
    sse s;
    parse_sse(body_of(&a.r), &s);
    CHECK(a.r.status == 200 && s.done_last && s.tokens[0] == TOKENS);
    CHECK(d.st == FKV_OK);
    CHECK(d.in_flight_after == 0 && d.running_after == 0);
    CHECKF(d.end_ns - a_start >= (int64_t)TOKENS * 10 * 1000000, "drain returned %.3f s after the request began",
           (double)(d.end_ns - a_start) / 1e9);
    CHECK(fkv_server_in_flight(srv) == 0);
    http_free(&a.r);
}

static void test_parse_unit(void)
{
    fkv_api_limits lim = {100, 256, 200, 4, "m"};
    fkv_api_request q;
    fkv_api_error e;
    CHECK(fkv_api_parse_completion("{\"model\":\"m\",\"prompt\":\"hi\"}", 27, &lim, &q, &e) == 0);
    CHECK(q.max_tokens == 16 && q.n == 1 && q.temperature == 1.0 && !q.stream && q.prompt_text);
    CHECK(!q.cache_salt && q.user && !*q.user);
    fkv_api_request_free(&q);
    const char *salted = "{\"model\":\"m\",\"prompt\":\"hi\",\"user\":\"ann\",\"cache_salt\":\"s1\"}";
    CHECK(fkv_api_parse_completion(salted, strlen(salted), &lim, &q, &e) == 0);
    CHECK(q.cache_salt && !strcmp(q.cache_salt, "s1") && !strcmp(q.user, "ann"));
    fkv_api_request_free(&q);
    const char *bad[][2] = {
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":0}", "max_tokens"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":1.5}", "max_tokens"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"n\":5}", "n"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":0}", "top_p"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":1}", "stream"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"user\":3}", "user"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"cache_salt\":7}", "cache_salt"},
        {"{\"model\":\"m\",\"prompt\":\"hi\",\"cache_salt\":\"\"}", "cache_salt"},
        {"{\"model\":\"m\",\"prompt\":[]}", "prompt"},
        {"{\"model\":\"m\",\"prompt\":{}}", "prompt"},
        {"{\"model\":\"m\",\"prompt\":[1,2],\"max_tokens\":199}", "max_tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = fkv_api_parse_completion(bad[i][0], strlen(bad[i][0]), &lim, &q, &e);
        CHECKF(rc == -1 && e.http == 400 && !strcmp(e.param, bad[i][1]), "case %zu: rc %d param '%s'", i, rc, e.param);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_parse_unit();
    const char *opts[] = {"pace_ms=10", "max_batch=1", NULL};
    char err[256];
    REQUIRE(fkv_backend_create("fake", opts, &be, err, sizeof err) == FKV_OK);
    fkv_backend other;
    CHECK(fkv_backend_create("nonesuch", NULL, &other, err, sizeof err) == FKV_ENOENT && strstr(err, "fake"));
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    cfg.api_key = KEY;
    cfg.max_body = 4096;
    cfg.max_prompt = 64;
    cfg.max_queue = 1;
    REQUIRE(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_OK);
    port = fkv_server_port(srv);
    REQUIRE(port > 0);

    test_basic_endpoints();
    test_completion();
    test_stream_n_tokens();
    test_errors();
    test_queue_full();
    test_disconnect_cancels();
    test_metrics();
    test_drain();

    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
