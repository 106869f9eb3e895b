/* The server over the engine backend, on a tiny random model written to a
 * temporary directory: a completion (usage, finish reason), a streamed one
 * with the same text, seeds, greedy tokens against the plain forward pass
 * (contiguous reference K/V, no fairkv cache) with and without memory
 * pressure, the HTTP text against the backend's own pieces, a client that
 * leaves, /metrics, and the drain. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "model_fixture.h"
#include "model/model.h"
#include "model/model_init.h"
#include "model/sampler.h"
#include "http_client.h"
#include "engine/steplog.h"
#include "server/server.h"

#define PLEN 120
#define MAXTOK 20
#define NPAR 4

static unsigned port;
static fkv_backend be;
static fkv_server *srv;
static fkv_llama *model;
static char dir[64], path[128];

static const char *body_of(const http_resp *r) { return r->body.data ? r->body.data : ""; }

static void post(http_resp *r, const char *json)
{
    http_do(r, port, "POST", "/v1/completions", json, strlen(json), NULL);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* choices[0].text / finish_reason and usage.completion_tokens of a JSON answer */
typedef struct answer {
    char text[1024];
    char finish[16];
    long completion, prompt, cached;
} answer;

static int parse_answer(const char *body, answer *a)
{
    memset(a, 0, sizeof *a);
    a->completion = a->prompt = -1;
    cJSON *j = cJSON_Parse(body);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    int ok = cJSON_IsString(t) && cJSON_IsString(f) && u;
    if (ok) {
        snprintf(a->text, sizeof a->text, "%s", t->valuestring);
        snprintf(a->finish, sizeof a->finish, "%s", f->valuestring);
        a->completion = (long)cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble;
        a->prompt = (long)cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")->valuedouble;
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "cached_tokens");
        a->cached = cJSON_IsNumber(c) ? (long)c->valuedouble : -1;
    }
    cJSON_Delete(j);
    return ok;
}

/* Concatenated texts and the finish reason of an SSE body; 0 on bad framing. */
static int parse_stream(const char *b, answer *a)
{
    memset(a, 0, sizeof *a);
    int done = 0;
    for (const char *p = b; *p;) {
        const char *e = strstr(p, "\n\n");
        if (strncmp(p, "data: ", 6) || !e) return 0;
        size_t n = (size_t)(e - p - 6);
        if (n == 6 && !strncmp(p + 6, "[DONE]", 6)) {
            done = e[2] == 0;
        } else {
            cJSON *j = cJSON_ParseWithLength(p + 6, n);
            const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
            if (!j || !cJSON_IsString(t)) {
                cJSON_Delete(j);
                return 0;
            }
            strncat(a->text, t->valuestring, sizeof a->text - strlen(a->text) - 1);
            if (cJSON_IsString(f)) snprintf(a->finish, sizeof a->finish, "%s", f->valuestring);
            cJSON_Delete(j);
        }
        p = e + 2;
    }
    return done;
}

/* ---------------------------------------------------------------- reference */

static int32_t prompts[NPAR][PLEN];
static int32_t want[NPAR][MAXTOK];
static uint32_t n_want[NPAR];

/* Greedy tokens of the plain forward pass, ending after EOS (id 2) as the
 * backend does (the EOS itself is not delivered). */
static void baseline(void)
{
    uint64_t x = 12345;
    for (int r = 0; r < NPAR; r++) {
        for (int i = 0; i < PLEN; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            /* the first 32 tokens are shared by every prompt (prefix cache) */
            prompts[r][i] = i < 32 ? (int32_t)(3 + (i * 37) % 256) : (int32_t)(3 + (x >> 33) % 256);
        }
        n_want[r] = greedy_reference(model, prompts[r], PLEN, want[r], MAXTOK, 2);
    }
}

static void json_prompt(char *out, size_t cap, int r, int stream)
{
    size_t o = (size_t)snprintf(out, cap, "{\"model\":\"tiny\",\"prompt\":[");
    for (int i = 0; i < PLEN; i++) o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? "," : "", prompts[r][i]);
    snprintf(out + o, cap - o, "],\"max_tokens\":%d,\"temperature\":0,\"user\":\"u%d\",\"stream\":%s}", MAXTOK, r,
             stream ? "true" : "false");
}

/* ---------------------------------------------------------------- backend directly */

typedef struct capture {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t tok[MAXTOK + 4];
    uint32_t n;
    char text[1024];
    size_t len;
    int done;
    fkv_gen_result res;
    uint32_t hold_at; /* >0: the step thread waits in the token callback at this count until released */
    int released;
    /* logprobs as delivered (when the request asked) */
    uint32_t n_lp;
    float lp[MAXTOK + 4];
    uint32_t n_top[MAXTOK + 4];
    int32_t top_tok[MAXTOK + 4][5];
    float top_lp[MAXTOK + 4][5];
} capture;

static void cap_token(void *ctx, int32_t token, const char *text, size_t len, const fkv_gen_logprobs *lp)
{
    capture *c = ctx;
    pthread_mutex_lock(&c->mu);
    if (lp && c->n_lp < MAXTOK + 4) {
        c->lp[c->n_lp] = lp->logprob;
        c->n_top[c->n_lp] = lp->n_top;
        for (uint32_t j = 0; j < lp->n_top && j < 5; j++) {
            c->top_tok[c->n_lp][j] = lp->top_token[j];
            c->top_lp[c->n_lp][j] = lp->top_logprob[j];
        }
        c->n_lp++;
    }
    if (c->n < MAXTOK + 4) c->tok[c->n++] = token;
    pthread_cond_broadcast(&c->cv);
    while (c->hold_at && c->n >= c->hold_at && !c->released) pthread_cond_wait(&c->cv, &c->mu);
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

static void cap_done(void *ctx, const fkv_gen_result *res)
{
    capture *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->res = *res;
    c->res.error = NULL;
    c->done++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* The backend's greedy tokens equal the plain forward pass; the HTTP
 * answer's text equals the pieces the backend delivered. */
static void test_greedy_direct(void)
{
    for (int r = 0; r < 2; r++) {
        capture c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
        char user[8];
        snprintf(user, sizeof user, "u%d", r); /* the HTTP request's user: the same tenant */
        fkv_gen_request q = {1000 + (uint64_t)r, user, prompts[r], PLEN, MAXTOK, 0.0, 1.0, 1, NULL, NULL, 0, 0, 0};
        fkv_gen_sink sink = {cap_token, cap_done, &c};
        char err[200];
        REQUIRE(be.ops->submit(be.impl, &q, &sink, err, sizeof err) == FKV_OK);
        pthread_mutex_lock(&c.mu);
        while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
        pthread_mutex_unlock(&c.mu);
        CHECKF(c.n == n_want[r], "request %d: %u tokens, reference %u", r, c.n, n_want[r]);
        CHECK(!memcmp(c.tok, want[r], n_want[r] * sizeof *c.tok));
        CHECK(c.res.completion_tokens == n_want[r] && c.res.prompt_tokens == PLEN);
        CHECK(c.res.finish == (n_want[r] == MAXTOK ? FKV_FINISH_LENGTH : FKV_FINISH_STOP));
        CHECK(c.done == 1);

        char json[4096];
        json_prompt(json, sizeof json, r, 0);
        http_resp h = {0};
        post(&h, json);
        answer a;
        CHECKF(h.status == 200 && parse_answer(body_of(&h), &a), "status %ld: %s", h.status, body_of(&h));
        CHECK(!strcmp(a.text, c.text));
        CHECK(a.completion == (long)n_want[r] && a.prompt == PLEN);
        /* the direct run of the same prompt finished just before: its
         * chunks are in the prefix cache (whole pages; the last prompt token
         * is always computed) */
        CHECKF(a.cached >= 64 && a.cached < PLEN, "cached_tokens %ld", a.cached);
        http_free(&h);
        /* another user, or the same user with another cache_salt, finds
         * none of it: prompts are private to their tenant and salt */
        for (int k = 0; k < 2; k++) {
            char *at = strstr(json, "\"user\":\"u");
            REQUIRE(at);
            char other[4096];
            snprintf(other, sizeof other, "%.*s%s%s", (int)(at - json), json,
                     k ? "\"cache_salt\":\"pepper\"," : "\"user\":\"intruder\",", at);
            http_resp h2 = {0};
            post(&h2, other);
            answer a2;
            CHECKF(h2.status == 200 && parse_answer(body_of(&h2), &a2), "status %ld: %s", h2.status, body_of(&h2));
            CHECK(!strcmp(a2.text, c.text)); /* the same greedy answer, computed again */
            CHECKF(a2.cached == 0, "%s: cached_tokens %ld of another tenant's prompt", k ? "salt" : "user", a2.cached);
            http_free(&h2);
        }
    }
}

/* ---------------------------------------------------------------- logprobs */

/* The test's own log-softmax, in double. */
static double ref_logprob(const float *lg, uint32_t V, int32_t tok)
{
    double mx = lg[0], sum = 0;
    for (uint32_t i = 1; i < V; i++) mx = lg[i] > mx ? lg[i] : mx;
    for (uint32_t i = 0; i < V; i++) sum += exp((double)lg[i] - mx);
    return (double)lg[tok] - mx - log(sum);
}

/* The id of the k-th largest logit (k from 0). */
static int32_t ref_rank(const float *lg, uint32_t V, uint32_t k)
{
    int32_t id = -1;
    for (uint32_t r = 0; r <= k; r++) {
        int32_t best = -1;
        for (uint32_t i = 0; i < V; i++) {
            int taken = 0;
            /* skip those of rank < r: larger, or equal with a lower id */
            if (id >= 0 && (lg[i] > lg[id] || (lg[i] == lg[id] && (int32_t)i <= id))) taken = 1;
            if (!taken && (best < 0 || lg[i] > lg[best])) best = (int32_t)i;
        }
        id = best;
    }
    return id;
}

#define LP_TOL 2e-3 /* the paged engine and the contiguous reference round differently */

/* Sampled at temperature 1.3 (past EOS: ignore_eos), each token's logprob
 * and its 5 alternatives are the log-softmax of the reference's raw logits
 * at that position (teacher-forced on the tokens the engine drew): not
 * scaled by the temperature, not shifted by a position, normalised. */
static void test_logprobs_direct(void)
{
    uint32_t V = model->hp.n_vocab;
    capture c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    fkv_gen_request q = {3000, "lp", prompts[2], PLEN, MAXTOK, 1.3, 1.0, 7, NULL, NULL, 1, 5, 1};
    fkv_gen_sink sink = {cap_token, cap_done, &c};
    char err[200];
    REQUIRE(be.ops->submit(be.impl, &q, &sink, err, sizeof err) == FKV_OK);
    pthread_mutex_lock(&c.mu);
    while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    CHECKF(c.n == MAXTOK && c.n_lp == MAXTOK, "%u tokens, %u logprobs (ignore_eos: all %d)", c.n, c.n_lp, MAXTOK);
    float *lg = malloc((size_t)MAXTOK * V * sizeof *lg);
    REQUIRE(lg);
    reference_logits(model, prompts[2], PLEN, c.tok, c.n, -1, NULL, lg);
    int differs_scaled = 0;
    for (uint32_t t = 0; t < c.n_lp && t < c.n; t++) {
        const float *l = lg + (size_t)t * V;
        double want_lp = ref_logprob(l, V, c.tok[t]);
        CHECKF(fabs(c.lp[t] - want_lp) < LP_TOL, "token %u: logprob %g, reference %g", t, (double)c.lp[t], want_lp);
        CHECK(c.n_top[t] == 5);
        for (uint32_t j = 0; j < 5 && j < c.n_top[t]; j++) {
            int32_t id = ref_rank(l, V, j);
            CHECKF(c.top_tok[t][j] == id && fabs(c.top_lp[t][j] - ref_logprob(l, V, id)) < LP_TOL,
                   "token %u alternative %u: %d %g, reference %d %g", t, j, c.top_tok[t][j], (double)c.top_lp[t][j],
                   id, ref_logprob(l, V, id));
        }
        /* what a temperature-scaled log-softmax would give instead */
        float sc[512];
        REQUIRE(V <= 512);
        for (uint32_t i = 0; i < V; i++) sc[i] = l[i] / 1.3f;
        if (fabs(ref_logprob(sc, V, c.tok[t]) - want_lp) > 10 * LP_TOL) differs_scaled = 1;
    }
    CHECK(differs_scaled); /* the test can tell raw from scaled */
    free(lg);
}

/* Over HTTP, greedy: completions' legacy logprobs of each token equal the
 * reference's, the alternatives start with the token itself (greedy takes
 * the most likely), text_offset counts the text before each token. */
static void test_logprobs_http(void)
{
    uint32_t V = model->hp.n_vocab;
    float *lg = malloc((size_t)MAXTOK * V * sizeof *lg);
    REQUIRE(lg);
    uint32_t n = reference_logits(model, prompts[0], PLEN, NULL, MAXTOK, 2, NULL, lg);
    REQUIRE(n == n_want[0]);
    char json[4096];
    json_prompt(json, sizeof json, 0, 0);
    char *end = strrchr(json, '}');
    snprintf(end, sizeof json - (size_t)(end - json), ",\"logprobs\":3}");
    http_resp h = {0};
    post(&h, json);
    CHECKF(h.status == 200, "status %ld: %s", h.status, body_of(&h));
    cJSON *j = cJSON_Parse(body_of(&h));
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens");
    const cJSON *tlp = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
    CHECKF(cJSON_GetArraySize(toks) == (int)n && cJSON_GetArraySize(tlp) == (int)n &&
               cJSON_GetArraySize(top) == (int)n && cJSON_GetArraySize(off) == (int)n,
           "%d logprobs for %u tokens: %s", cJSON_GetArraySize(tlp), n, body_of(&h));
    double prev_off = -1;
    for (uint32_t t = 0; t < n && t < (uint32_t)cJSON_GetArraySize(tlp); t++) {
        const float *l = lg + (size_t)t * V;
        double want_lp = ref_logprob(l, V, want[0][t]);
        double got = cJSON_GetArrayItem(tlp, (int)t)->valuedouble;
        CHECKF(fabs(got - want_lp) < LP_TOL, "token %u: %g, reference %g", t, got, want_lp);
        const cJSON *d = cJSON_GetArrayItem(top, (int)t);
        int k = cJSON_GetArraySize(d);
        CHECKF(k >= 1 && k <= 4, "token %u: %d alternatives", t, k);
        /* the most likely first: the greedy token itself */
        CHECKF(d->child && fabs(d->child->valuedouble - want_lp) < LP_TOL, "token %u: first alternative %g", t,
               d->child ? d->child->valuedouble : 0.0);
        double o = cJSON_GetArrayItem(off, (int)t)->valuedouble;
        CHECK(o >= prev_off);
        prev_off = o;
    }
    cJSON_Delete(j);
    http_free(&h);
    free(lg);
}

/* ---------------------------------------------------------------- over HTTP */

static void test_completion_and_stream(void)
{
    const char *req = "{\"model\":\"tiny\",\"prompt\":\"The cache keeps\",\"max_tokens\":12,\"seed\":5,"
                      "\"temperature\":0.9,\"top_p\":0.95}";
    http_resp r1 = {0}, r2 = {0}, r3 = {0}, rs = {0};
    post(&r1, req);
    answer a1, a2, a3, as;
    REQUIRE(r1.status == 200 && parse_answer(body_of(&r1), &a1));
    /* the bytes vocabulary: BOS + one token per byte */
    CHECK(a1.prompt == 1 + (long)strlen("The cache keeps"));
    CHECK(a1.completion >= 0 && a1.completion <= 12);
    CHECK(!strcmp(a1.finish, a1.completion == 12 ? "length" : "stop"));
    post(&r2, req);
    REQUIRE(r2.status == 200 && parse_answer(body_of(&r2), &a2));
    CHECK(!strcmp(a1.text, a2.text) && a1.completion == a2.completion);
    /* another seed: other tokens (12 random bytes from a 259-token
     * distribution coinciding is out of reach) */
    post(&r3, "{\"model\":\"tiny\",\"prompt\":\"The cache keeps\",\"max_tokens\":12,\"seed\":6,"
              "\"temperature\":0.9,\"top_p\":0.95}");
    REQUIRE(r3.status == 200 && parse_answer(body_of(&r3), &a3));
    CHECK(strcmp(a1.text, a3.text) != 0);
    /* streamed with the same seed: the same text, in SSE framing */
    post(&rs, "{\"model\":\"tiny\",\"prompt\":\"The cache keeps\",\"max_tokens\":12,\"seed\":5,"
              "\"temperature\":0.9,\"top_p\":0.95,\"stream\":true}");
    CHECK(rs.status == 200 && rs.headers.data && strstr(rs.headers.data, "text/event-stream"));
    CHECKF(parse_stream(body_of(&rs), &as), "SSE body: %s", body_of(&rs));
    CHECK(!strcmp(as.text, a1.text));
    CHECK(!strcmp(as.finish, a1.finish));
    http_free(&r1);
    http_free(&r2);
    http_free(&r3);
    http_free(&rs);
}

typedef struct par {
    pthread_t t;
    int r;
    http_resp h;
} par;

static void *par_run(void *arg)
{
    par *p = arg;
    char json[4096];
    json_prompt(json, sizeof json, p->r, p->r % 2);
    post(&p->h, json);
    return NULL;
}

static double metric(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = strstr(text, series); p; p = strstr(p + 1, series))
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return atof(p + n + 1);
    return -1;
}

/* The backend in every cell of the configuration sweep (each policy x
 * quotas on / off x fixed / dynamic chunks, and each policy with
 * non-chunked prefill): NPAR greedy requests at once in a cache of 256
 * tokens for ~560 tokens of context give the reference tokens.  The texts
 * of the first cell are kept for the HTTP run under pressure. */
static char sweep_text[NPAR][1024];

/* int8 cold chunks behind 128 hot tokens, not serve's default int4 behind
 * 64: these checks compare tokens and log-probabilities with an fp32
 * reference, which needs a precision that keeps this model's greedy
 * tokens; int4 moves some (its cost is priced by test_engine's ladder cell
 * and docs/EVALUATION.md 2b).  Two options. */
#define EXACT_COLD "quant_dtype=int8", "quant_hot=128"

static void test_backend_sweep(const char *mopt)
{
    static const char *const policies[] = {"flru", "lru", "fifo", "sieve", "flru-literal"};
    unsigned cells = 0;
    int small = check_scale() < 1;
    for (int p = 0; p < 5; p++)
        for (int k = 0; k < 5; k++) { /* k < 4: quotas x chunking, chunked prefill; k = 4: non-chunked */
            int quotas = k < 4 ? !(k & 1) : 1, dynamic = k < 4 && (k & 2), chunked = k < 4;
            /* sanitizers: the default cell, lru without quotas with dynamic
             * chunks, sieve with non-chunked prefill */
            if (small && !(p == 0 && k == 0) && !(p == 1 && k == 3) && !(p == 3 && k == 4)) continue;
            char pol[64];
            snprintf(pol, sizeof pol, "policy=%s", policies[p]);
            const char *opts[] = {mopt, "kv_budget=512KiB", "max_running=8", pol, quotas ? "quotas=on" : "quotas=off",
                                  dynamic ? "dynamic_chunking=on" : "dynamic_chunking=off",
                                  chunked ? "chunked_prefill=on" : "chunked_prefill=off", EXACT_COLD, NULL};
            char name[160], err[400];
            snprintf(name, sizeof name, "%s, quotas %s, %s chunks, %s prefill", policies[p], quotas ? "on" : "off",
                     dynamic ? "dynamic" : "fixed", chunked ? "chunked" : "non-chunked");
            fkv_backend b;
            REQUIRE(fkv_backend_create("engine", opts, &b, err, sizeof err) == FKV_OK ||
                    (fprintf(stderr, "%s: %s\n", name, err), 0));
            capture c[NPAR];
            for (int r = 0; r < NPAR; r++) {
                c[r] = (capture){.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
                fkv_gen_request q = {2000 + (uint64_t)r, "sweep", prompts[r], PLEN, MAXTOK, 0.0, 1.0, 1, NULL, NULL, 0, 0, 0};
                fkv_gen_sink sink = {cap_token, cap_done, &c[r]};
                REQUIRE(b.ops->submit(b.impl, &q, &sink, err, sizeof err) == FKV_OK);
            }
            for (int r = 0; r < NPAR; r++) {
                pthread_mutex_lock(&c[r].mu);
                while (!c[r].done) pthread_cond_wait(&c[r].cv, &c[r].mu);
                pthread_mutex_unlock(&c[r].mu);
                CHECKF(c[r].n == n_want[r] && !memcmp(c[r].tok, want[r], n_want[r] * sizeof *want[r]),
                       "[%s] request %d: %u tokens (reference %u), or other tokens", name, r, c[r].n, n_want[r]);
                if (!cells) memcpy(sweep_text[r], c[r].text, sizeof sweep_text[r]);
            }
            CHECK(b.ops->drain(b.impl, 20000000000LL) == FKV_OK);
            fkv_textbuf t = {0}; /* the step thread refreshes the metrics snapshot once idle */
            double ev = -1;
            for (int i = 0; i < 100 && ev <= 0; i++) {
                fkv_textbuf_free(&t);
                memset(&t, 0, sizeof t);
                b.ops->metrics(b.impl, &t);
                ev = metric(t.data ? t.data : "", "fairkv_evicted_pages_total");
                if (ev <= 0) sleep_ms(20);
            }
            CHECKF(ev > 0, "[%s] evicted pages %g: no pressure", name, ev);
            fkv_textbuf_free(&t);
            fkv_backend_destroy(&b);
            cells++;
        }
    printf("backend sweep: %u cells\n", cells);
}

/* NPAR greedy requests at once in a cache of 256 tokens (4 chunks of 64)
 * for ~560 tokens of context: evictions, recomputation or preemption, and
 * still the reference tokens; then /metrics shows the traffic. */
static void test_pressure_and_metrics(void)
{
    par p[NPAR];
    for (int i = 0; i < NPAR; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].r = i;
        pthread_create(&p[i].t, NULL, par_run, &p[i]);
    }
    for (int i = 0; i < NPAR; i++) {
        pthread_join(p[i].t, NULL);
        answer a;
        int ok = p[i].h.status == 200 &&
                 (p[i].r % 2 ? parse_stream(body_of(&p[i].h), &a) : parse_answer(body_of(&p[i].h), &a));
        CHECKF(ok, "request %d: status %ld body %.300s", i, p[i].h.status, body_of(&p[i].h));
        /* the reference tokens' text, as the backend gave it in the sweep */
        CHECKF(!strcmp(a.text, sweep_text[p[i].r]), "request %d: text differs from the reference tokens'", i);
        CHECK(!strcmp(a.finish, n_want[i] == MAXTOK ? "length" : "stop"));
        http_free(&p[i].h);
    }
    /* the snapshot is taken when the engine goes idle */
    http_resp m = {0};
    double hits = -1;
    for (int i = 0; i < 100 && hits <= 0; i++) {
        http_free(&m);
        memset(&m, 0, sizeof m);
        http_do(&m, port, "GET", "/metrics", NULL, 0, NULL);
        hits = metric(body_of(&m), "fairkv_hit_tokens_total{request_type=\"medium\"}");
        if (hits <= 0) sleep_ms(20);
    }
    const char *t = body_of(&m);
    CHECKF(hits > 0, "metrics: %.2000s", t);
    CHECK(metric(t, "fairkv_engine_tokens_total{kind=\"prefill\"}") >= NPAR * PLEN / 2);
    CHECK(metric(t, "fairkv_engine_tokens_total{kind=\"decode\"}") > 0);
    /* with 256 tokens for ~560, something was evicted or sent back */
    double ev = metric(t, "fairkv_evicted_pages_total"), pre = metric(t, "fairkv_num_preemptions_total");
    CHECKF(ev > 0 || pre > 0, "evicted pages %g, preemptions %g", ev, pre);
    CHECK(metric(t, "fairkv_num_preemptions_total") >= 0 && metric(t, "fairkv_recomputed_tokens_total") >= 0);
    /* the step-cost counters the simulator's profile is checked against */
    double steps = metric(t, "fairkv_engine_timed_steps_total"), toks = metric(t, "fairkv_engine_batch_tokens_total");
    CHECK(steps > 0 && metric(t, "fairkv_engine_step_seconds_total") > 0);
    CHECK(toks >= metric(t, "fairkv_engine_tokens_total{kind=\"prefill\"}") && toks >= steps);
    CHECK(metric(t, "fairkv_engine_attention_work_total") > toks);
    http_free(&m);
}

static void test_disconnect(void)
{
    http_resp r = {0};
    r.abort_after = 300;
    post(&r, "{\"model\":\"tiny\",\"prompt\":\"zz\",\"max_tokens\":600,\"stream\":true}");
    CHECK(r.cc == CURLE_WRITE_ERROR);
    http_free(&r);
    for (int i = 0; i < 1000 && fkv_server_in_flight(srv); i++) sleep_ms(10);
    CHECK(fkv_server_in_flight(srv) == 0);
}

/* Cancel reaches the engine: a request of 600 tokens (ignore_eos: it cannot
 * end early by itself) cancelled after a few tokens ends as cancelled, and
 * the engine decodes far fewer than 600 tokens for it. */
static void test_cancel_stops_engine(const char *mopt)
{
    /* with a step log (`fairkv serve --step-log`): it must agree with the
     * engine's step counters */
    char log_opt[300], log_path[200];
    snprintf(log_path, sizeof log_path, "%s/steps.log", dir);
    snprintf(log_opt, sizeof log_opt, "step_log=%s", log_path);
    const char *opts[] = {mopt, "ignore_eos=1", log_opt, NULL};
    fkv_backend b2;
    char err[400];
    const char *bad_log[] = {mopt, "step_log=/nonexistent-dir/steps.log", NULL};
    CHECKF(fkv_backend_create("engine", bad_log, &b2, err, sizeof err) == FKV_EIO &&
               strstr(err, "/nonexistent-dir/steps.log"), "%s", err);
    REQUIRE(fkv_backend_create("engine", opts, &b2, err, sizeof err) == FKV_OK);
    /* the step thread is held in the fifth token's callback until the
     * cancel is in, so the test does not race the decode speed */
    capture c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .hold_at = 5};
    fkv_gen_request q = {77, "x", prompts[0], 8, 600, 1.0, 1.0, 3, NULL, NULL, 0, 0, 0};
    fkv_gen_sink sink = {cap_token, cap_done, &c};
    REQUIRE(b2.ops->submit(b2.impl, &q, &sink, err, sizeof err) == FKV_OK);
    pthread_mutex_lock(&c.mu);
    while (c.n < 5 && !c.done) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    b2.ops->cancel(b2.impl, 77);
    pthread_mutex_lock(&c.mu);
    c.released = 1;
    pthread_cond_broadcast(&c.cv);
    while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    CHECK(c.res.finish == FKV_FINISH_CANCELLED && c.res.completion_tokens < 600);
    /* drain waits until the engine has ended the request */
    CHECK(b2.ops->drain(b2.impl, 20000000000LL) == FKV_OK);
    /* the step thread refreshes the metrics snapshot once idle: wait for
     * it, then until two reads 100 ms apart agree (a fixed 200 ms could
     * read a snapshot from before the last step on a loaded machine) */
    sleep_ms(200);
    fkv_textbuf t = {0}, prev = {0};
    for (int i = 0; i < 50; i++) {
        fkv_textbuf_free(&prev);
        prev = t;
        memset(&t, 0, sizeof t);
        b2.ops->metrics(b2.impl, &t);
        if (prev.data && t.data && !strcmp(prev.data, t.data)) break;
        sleep_ms(100);
    }
    fkv_textbuf_free(&prev);
    double dec = metric(t.data ? t.data : "", "fairkv_engine_tokens_total{kind=\"decode\"}");
    CHECKF(dec >= 4 && dec < 300, "decode tokens %g", dec);
    const char *mt = t.data ? t.data : "";
    double steps = metric(mt, "fairkv_engine_timed_steps_total"), toks = metric(mt, "fairkv_engine_batch_tokens_total");
    double attn = metric(mt, "fairkv_engine_attention_work_total");
    double secs = metric(mt, "fairkv_engine_step_seconds_total");
    fkv_textbuf_free(&t);
    fkv_backend_destroy(&b2); /* closes the log */
    fkv_step_rec *r = NULL;
    size_t n = 0;
    REQUIRE(fkv_steplog_read(log_path, &r, &n, err, sizeof err) == FKV_OK);
    double sum_tok = 0, sum_attn = 0, sum_s = 0;
    int ordered = 1;
    for (size_t i = 0; i < n; i++) {
        sum_tok += r[i].tokens;
        sum_attn += r[i].attn;
        sum_s += (double)r[i].wall_ns / 1e9;
        ordered &= r[i].requests == 1 && (!i || r[i].t_ns >= r[i - 1].t_ns + r[i - 1].wall_ns);
    }
    CHECKF((double)n == steps && sum_tok == toks && fabs(sum_attn - attn) < 1 && fabs(sum_s - secs) < 1e-5 && ordered,
           "log: %zu steps, %g tokens, %g attention, %g s; counters: %g, %g, %g, %g s", n, sum_tok, sum_attn, sum_s,
           steps, toks, attn, secs);
    free(r);
    unlink(log_path);
}

static void write_model(void)
{
    snprintf(dir, sizeof dir, "/tmp/fkv-serve-engine-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    fkv_model_init_cfg cfg;
    REQUIRE(!fkv_model_init_preset("tiny", &cfg));
    fkv_gguf_writer *w;
    REQUIRE(!fkv_model_init_build(&cfg, &w));
    char err[200];
    REQUIRE(fkv_gguf_w_to_file(w, path, err, sizeof err) == FKV_OK);
    fkv_gguf_writer_free(w);
    REQUIRE(fkv_llama_load(path, &model, err, sizeof err) == FKV_OK);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    write_model();
    baseline();
    char mopt[200];
    snprintf(mopt, sizeof mopt, "model=%s", path);
    /* tiny: 4 layers x 2 K/V heads x 32 x f32 x (K, V) = 2 KiB a token */
    const char *opts[] = {mopt, "kv_budget=512KiB", "max_running=8", "policy=flru", EXACT_COLD, NULL};
    char err[400];
    fkv_backend bad;
    const char *bad_opts[] = {mopt, "nonesuch=1", NULL};
    CHECK(fkv_backend_create("engine", bad_opts, &bad, err, sizeof err) == FKV_EINVAL && strstr(err, "nonesuch"));
    const char *no_file[] = {"model=/nonexistent/m.gguf", NULL};
    CHECK(fkv_backend_create("engine", no_file, &bad, err, sizeof err) != FKV_OK && strstr(err, "nonexistent"));
    REQUIRE(fkv_backend_create("engine", opts, &be, err, sizeof err) == FKV_OK);
    fkv_backend_info info;
    be.ops->info(be.impl, &info);
    CHECK(!strcmp(info.model, "tiny") && info.vocab_size == 259 && info.max_context == model->hp.ctx_len);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    REQUIRE(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_OK);
    port = fkv_server_port(srv);

    test_completion_and_stream();
    test_greedy_direct();
    test_logprobs_direct();
    test_logprobs_http();
    test_backend_sweep(mopt);
    test_pressure_and_metrics();
    test_disconnect();
    test_cancel_stops_engine(mopt);

    CHECK(fkv_server_drain(srv, 10000000000LL) == FKV_OK);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    fkv_llama_free(model);
    unlink(path);
    rmdir(dir);
    curl_global_cleanup();
    return check_done();
}
