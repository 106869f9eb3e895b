/* Request fields over the fake backend, in process: every field the server
 * does not implement is refused with a 400 that names it, the ones it
 * accepts on purpose pass with their neutral values, and logprobs come in
 * OpenAI's two formats (completions' legacy object, chat's content list),
 * whole and streamed, cut with the text at a stop sequence.  The fake
 * draws from 27 equally likely tokens, so every logprob is -ln 27.
 * llama-server's endpoints on the fake: /tokenize and /detokenize (one
 * token per byte), their refusals, /props, and /slots showing requests
 * while they run (held open on raw sockets) and not after. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_client.h"
#include "server/server.h"

static unsigned port;
static fkv_backend be;
static fkv_server *srv;

static const char *body_of(const http_resp *r) { return r->body.data ? r->body.data : ""; }

static void post(http_resp *r, const char *path, const char *json)
{
    memset(r, 0, sizeof *r);
    http_do(r, port, "POST", path, json, strlen(json), NULL);
}

#define CMPL "/v1/completions"
#define CHAT "/v1/chat/completions"
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* A 400 whose error names `param` in its param and its message. */
static void expect_refused(const char *path, const char *json, const char *param)
{
    http_resp r;
    post(&r, path, json);
    cJSON *j = cJSON_Parse(body_of(&r));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "param");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    CHECKF(r.status == 400 && cJSON_IsString(p) && !strcmp(p->valuestring, param) && cJSON_IsString(m) &&
               strstr(m->valuestring, param),
           "%s %s: %ld %s", path, json, r.status, body_of(&r));
    cJSON_Delete(j);
    http_free(&r);
}

static void test_refused(void)
{
    static const char *const cmpl[][2] = {
        {"{\"prompt\":\"hi\",\"top_k\":5}", "top_k"},
        {"{\"prompt\":\"hi\",\"min_p\":0.1}", "min_p"},
        {"{\"prompt\":\"hi\",\"repetition_penalty\":1.1}", "repetition_penalty"},
        {"{\"prompt\":\"hi\",\"n_predict\":4}", "n_predict"},
        {"{\"prompt\":\"hi\",\"grammar\":\"root ::= \\\"a\\\"\"}", "grammar"},
        {"{\"prompt\":\"hi\",\"logit_bias\":{\"97\":5}}", "logit_bias"},
        {"{\"prompt\":\"hi\",\"presence_penalty\":0.5}", "presence_penalty"},
        {"{\"prompt\":\"hi\",\"frequency_penalty\":-1}", "frequency_penalty"},
        {"{\"prompt\":\"hi\",\"echo\":true}", "echo"},
        {"{\"prompt\":\"hi\",\"best_of\":3}", "best_of"},
        {"{\"prompt\":\"hi\",\"suffix\":\"end\"}", "suffix"},
        {"{\"prompt\":\"hi\",\"store\":true}", "store"},
        {"{\"prompt\":\"hi\",\"response_format\":{\"type\":\"text\"}}", "response_format"}, /* chat only */
        {"{\"prompt\":\"hi\",\"tools\":[]}", "tools"},                                     /* chat only */
        {"{\"prompt\":\"hi\",\"top_logprobs\":2}", "top_logprobs"},                        /* chat only */
        {"{\"prompt\":\"hi\",\"logprobs\":21}", "logprobs"},
        {"{\"prompt\":\"hi\",\"logprobs\":true}", "logprobs"},
        {"{\"prompt\":\"hi\",\"ignore_eos\":1}", "ignore_eos"},
        {"{\"prompt\":\"hi\",\"cache_prompt\":\"yes\"}", "cache_prompt"},
    };
    for (size_t i = 0; i < sizeof cmpl / sizeof cmpl[0]; i++) expect_refused(CMPL, cmpl[i][0], cmpl[i][1]);
    static const char *const chat[][2] = {
        {"{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", "tools"},
        {"{" MSGS ",\"tool_choice\":\"auto\"}", "tool_choice"},
        {"{" MSGS ",\"functions\":[{\"name\":\"f\"}]}", "functions"},
        {"{" MSGS ",\"function_call\":\"auto\"}", "function_call"},
        {"{" MSGS ",\"response_format\":{\"type\":\"json_object\"}}", "response_format"},
        {"{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{}}}}",
         "response_format"},
        {"{" MSGS ",\"logit_bias\":{\"1\":-100}}", "logit_bias"},
        {"{" MSGS ",\"presence_penalty\":1}", "presence_penalty"},
        {"{" MSGS ",\"top_k\":40}", "top_k"},
        {"{" MSGS ",\"modalities\":[\"text\",\"audio\"]}", "modalities"},
        {"{" MSGS ",\"top_logprobs\":2}", "top_logprobs"}, /* needs logprobs: true */
        {"{" MSGS ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
        {"{" MSGS ",\"logprobs\":1}", "logprobs"},
        {"{" MSGS ",\"echo\":false}", "echo"}, /* completions only */
    };
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++) expect_refused(CHAT, chat[i][0], chat[i][1]);
}

/* Fields accepted on purpose, with the values that ask for nothing more. */
static void test_accepted(void)
{
    static const char *const ok[][2] = {
        {CMPL, "{\"prompt\":\"hi\",\"max_tokens\":2,\"presence_penalty\":0,\"frequency_penalty\":0,\"logit_bias\":{},"
               "\"echo\":false,\"best_of\":1,\"suffix\":\"\",\"cache_prompt\":true,\"metadata\":{\"a\":\"b\"},"
               "\"store\":false,\"service_tier\":\"auto\",\"ignore_eos\":true,\"logprobs\":null}"},
        {CHAT, "{" MSGS ",\"max_tokens\":2,\"tools\":[],\"tool_choice\":\"none\",\"parallel_tool_calls\":false,"
               "\"response_format\":{\"type\":\"text\"},\"functions\":[],\"function_call\":\"none\","
               "\"cache_prompt\":false,\"logprobs\":false,\"ignore_eos\":false}"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        http_resp r;
        post(&r, ok[i][0], ok[i][1]);
        CHECKF(r.status == 200, "%s: %ld %s", ok[i][1], r.status, body_of(&r));
        /* not asked: "logprobs": null */
        cJSON *j = cJSON_Parse(body_of(&r));
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c0, "logprobs")));
        cJSON_Delete(j);
        http_free(&r);
    }
}

#define LN27 3.295836866004329

/* The text of a choice and its logprobs' tokens, checked against each
 * other: one byte per token, every logprob -ln 27, alternatives the
 * fake's first tokens in id order (" ", "a", "b", ...). */
static void check_completion_lp(const cJSON *lp, const char *text, int top)
{
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens");
    const cJSON *tlp = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs");
    const cJSON *tops = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
    int n = cJSON_GetArraySize(toks);
    CHECKF(n == (int)strlen(text) && cJSON_GetArraySize(tlp) == n && cJSON_GetArraySize(tops) == n &&
               cJSON_GetArraySize(off) == n,
           "%d tokens for text '%s'", n, text);
    for (int i = 0; i < n && i < (int)strlen(text); i++) {
        const cJSON *t = cJSON_GetArrayItem(toks, i);
        CHECKF(cJSON_IsString(t) && strlen(t->valuestring) == 1 && t->valuestring[0] == text[i], "token %d", i);
        CHECKF(fabs(cJSON_GetArrayItem(tlp, i)->valuedouble + LN27) < 1e-6, "logprob %d", i);
        CHECK(cJSON_GetArrayItem(off, i)->valuedouble == i);
        const cJSON *d = cJSON_GetArrayItem(tops, i);
        int k = cJSON_GetArraySize(d);
        int sampled_in_top = text[i] == ' ' || (top > 1 && text[i] - 'a' < top - 1);
        CHECKF(k == top + !sampled_in_top, "token %d ('%c'): %d alternatives, want %d", i, text[i], k,
               top + !sampled_in_top);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(d, (char[]){text[i], 0});
        CHECK(s && fabs(s->valuedouble + LN27) < 1e-6);
        if (top >= 1) CHECK(cJSON_GetObjectItemCaseSensitive(d, " "));
        if (top >= 2) CHECK(cJSON_GetObjectItemCaseSensitive(d, "a"));
    }
}

static void check_chat_lp(const cJSON *content, const char *text, int top)
{
    int n = cJSON_GetArraySize(content);
    CHECKF(n == (int)strlen(text), "%d tokens for text '%s'", n, text);
    int i = 0;
    for (const cJSON *e = content ? content->child : NULL; e && i < (int)strlen(text); e = e->next, i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "token");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "logprob");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        const cJSON *tl = cJSON_GetObjectItemCaseSensitive(e, "top_logprobs");
        CHECKF(cJSON_IsString(t) && t->valuestring[0] == text[i] && !t->valuestring[1], "token %d", i);
        CHECK(cJSON_IsNumber(l) && fabs(l->valuedouble + LN27) < 1e-6);
        CHECK(cJSON_GetArraySize(b) == 1 && cJSON_GetArrayItem(b, 0)->valueint == (unsigned char)text[i]);
        CHECKF(cJSON_GetArraySize(tl) == top, "token %d: %d alternatives", i, cJSON_GetArraySize(tl));
        int j = 0;
        for (const cJSON *a = tl ? tl->child : NULL; a; a = a->next, j++) {
            const cJSON *at = cJSON_GetObjectItemCaseSensitive(a, "token");
            char want = j == 0 ? ' ' : (char)('a' + j - 1);
            CHECK(cJSON_IsString(at) && at->valuestring[0] == want &&
                  fabs(cJSON_GetObjectItemCaseSensitive(a, "logprob")->valuedouble + LN27) < 1e-6);
        }
    }
}

static void test_logprobs_whole(void)
{
    for (int top = 0; top <= 3; top += 3) {
        char json[256];
        snprintf(json, sizeof json, "{\"prompt\":\"hi\",\"max_tokens\":12,\"seed\":%d,\"logprobs\":%d}", 3 + top, top);
        http_resp r;
        post(&r, CMPL, json);
        CHECKF(r.status == 200, "%ld %s", r.status, body_of(&r));
        cJSON *j = cJSON_Parse(body_of(&r));
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c0, "text");
        REQUIRE(cJSON_IsString(text));
        check_completion_lp(cJSON_GetObjectItemCaseSensitive(c0, "logprobs"), text->valuestring, top);
        cJSON_Delete(j);
        http_free(&r);

        snprintf(json, sizeof json, "{" MSGS ",\"max_tokens\":12,\"seed\":4,\"logprobs\":true,\"top_logprobs\":%d}", top);
        post(&r, CHAT, json);
        CHECKF(r.status == 200, "%ld %s", r.status, body_of(&r));
        j = cJSON_Parse(body_of(&r));
        c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
        text = cJSON_GetObjectItemCaseSensitive(msg, "content");
        REQUIRE(cJSON_IsString(text));
        check_chat_lp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c0, "logprobs"), "content"),
                      text->valuestring, top);
        cJSON_Delete(j);
        http_free(&r);
    }
}

/* Streamed, with and without a stop sequence: the chunks' logprobs, put
 * together, are the tokens of the text sent (none past a stop). */
static void test_logprobs_stream(void)
{
    for (int kind = 0; kind < 2; kind++)
        for (int stop = 0; stop < 2; stop++) {
            char json[256];
            snprintf(json, sizeof json, "{%s,\"max_tokens\":40,\"seed\":9,\"stream\":true,%s%s}",
                     kind ? MSGS : "\"prompt\":\"hi\"", kind ? "\"logprobs\":true,\"top_logprobs\":2" : "\"logprobs\":2",
                     stop ? ",\"stop\":\"e\"" : "");
            http_resp r;
            post(&r, kind ? CHAT : CMPL, json);
            CHECKF(r.status == 200, "%ld %s", r.status, body_of(&r));
            char text[256] = "", toks[256] = "";
            size_t tl = 0, kl = 0;
            cJSON *content = cJSON_CreateArray(), *lpall = NULL;
            for (const char *p = body_of(&r); (p = strstr(p, "data: {")); p++) {
                cJSON *j = cJSON_Parse(p + 6);
                const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
                const cJSON *t = kind ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c0, "delta"),
                                                                         "content")
                                      : cJSON_GetObjectItemCaseSensitive(c0, "text");
                if (cJSON_IsString(t)) tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s", t->valuestring);
                const cJSON *lp = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
                const cJSON *arr = cJSON_GetObjectItemCaseSensitive(lp, kind ? "content" : "tokens");
                for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next) {
                    const cJSON *s = kind ? cJSON_GetObjectItemCaseSensitive(e, "token") : e;
                    if (cJSON_IsString(s)) kl += (size_t)snprintf(toks + kl, sizeof toks - kl, "%s", s->valuestring);
                    if (kind) cJSON_AddItemToArray(content, cJSON_Duplicate(e, 1));
                }
                if (!kind && lp && !cJSON_IsNull(lp)) {
                    /* each chunk's text_offset continues from the text before it */
                    const cJSON *off = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
                    CHECK(cJSON_GetArraySize(off) >= 1 && cJSON_GetArrayItem(off, 0)->valuedouble == (double)(kl - 1));
                }
                cJSON_Delete(j);
            }
            CHECKF(tl > 0 && !strcmp(text, toks), "kind %d stop %d: text '%s', logprob tokens '%s'", kind, stop, text,
                   toks);
            if (stop) CHECKF(!strchr(text, 'e') && tl < 40, "stopped text '%s'", text);
            if (kind) check_chat_lp(content, text, 2);
            cJSON_Delete(content);
            (void)lpall;
            http_free(&r);
        }
}

/* Whole answers with a stop: the logprobs end where the text is cut. */
static void test_logprobs_stop_whole(void)
{
    http_resp r;
    post(&r, CMPL, "{\"prompt\":\"hi\",\"max_tokens\":40,\"seed\":9,\"stop\":\"e\",\"logprobs\":1}");
    cJSON *j = cJSON_Parse(body_of(&r));
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(c0, "text");
    CHECKF(r.status == 200 && cJSON_IsString(text) && !strchr(text->valuestring, 'e'), "%s", body_of(&r));
    if (cJSON_IsString(text)) check_completion_lp(cJSON_GetObjectItemCaseSensitive(c0, "logprobs"), text->valuestring, 1);
    cJSON_Delete(j);
    http_free(&r);
}

/* ---------------------------------------------------------------- llama-server's endpoints */

static void test_tokenize(void)
{
    http_resp r;
    post(&r, "/tokenize", "{\"content\":\"h\\u00e9\",\"with_pieces\":true}");
    /* one token per byte; the lone bytes of "é" are not UTF-8: arrays */
    CHECKF(r.status == 200 && !strcmp(body_of(&r), "{\"tokens\":[{\"id\":104,\"piece\":\"h\"},{\"id\":195,"
                                                   "\"piece\":[195]},{\"id\":169,\"piece\":[169]}]}\n"),
           "%ld %s", r.status, body_of(&r));
    http_free(&r);
    post(&r, "/tokenize", "{\"content\":\"hi there\"}");
    CHECKF(r.status == 200 && !strcmp(body_of(&r), "{\"tokens\":[104,105,32,116,104,101,114,101]}\n"), "%s",
           body_of(&r));
    http_free(&r);
    post(&r, "/detokenize", "{\"tokens\":[104,105,32,116,104,101,114,101]}");
    CHECKF(r.status == 200 && !strcmp(body_of(&r), "{\"content\":\"hi there\"}\n"), "%s", body_of(&r));
    http_free(&r);
    /* bytes that are not UTF-8 come back as U+FFFD, never as invalid JSON */
    post(&r, "/detokenize", "{\"tokens\":[97,255]}");
    CHECKF(r.status == 200 && !strcmp(body_of(&r), "{\"content\":\"a\xef\xbf\xbd\"}\n"), "%s", body_of(&r));
    http_free(&r);
    post(&r, "/detokenize", "{\"tokens\":[]}");
    CHECKF(r.status == 200 && !strcmp(body_of(&r), "{\"content\":\"\"}\n"), "%s", body_of(&r));
    http_free(&r);
    static const char *const bad[][3] = {
        {"/tokenize", "{}", "content"},
        {"/tokenize", "{\"content\":5}", "content"},
        {"/tokenize", "{\"content\":\"a\",\"add_special\":\"yes\"}", "add_special"},
        {"/tokenize", "{\"content\":\"a\",\"with_pieces\":1}", "with_pieces"},
        {"/tokenize", "{\"content\":\"a\",\"nonesuch\":1}", "nonesuch"},
        {"/detokenize", "{\"tokens\":[1,256]}", "tokens[1]"},
        {"/detokenize", "{\"tokens\":[1.5]}", "tokens[0]"},
        {"/detokenize", "{\"tokens\":\"abc\"}", "tokens"},
        {"/detokenize", "{}", "tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_refused(bad[i][0], bad[i][1], bad[i][2]);
    post(&r, "/tokenize", "not json");
    CHECK(r.status == 400);
    http_free(&r);
    memset(&r, 0, sizeof r);
    http_do(&r, port, "GET", "/tokenize", NULL, 0, NULL);
    CHECK(r.status == 405);
    http_free(&r);
}

static void test_props(void)
{
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, port, "GET", "/props", NULL, 0, NULL);
    cJSON *j = cJSON_Parse(body_of(&r));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "default_generation_settings");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(d, "params");
    CHECKF(r.status == 200 && cJSON_GetObjectItemCaseSensitive(j, "total_slots")->valueint == 8 &&
               cJSON_GetObjectItemCaseSensitive(d, "n_ctx")->valueint == 4096 &&
               cJSON_GetObjectItemCaseSensitive(params, "n_predict")->valueint == 16 &&
               !strcmp(cJSON_GetObjectItemCaseSensitive(j, "model_alias")->valuestring, "fairkv-fake"),
           "%s", body_of(&r));
    cJSON_Delete(j);
    http_free(&r);
}

/* A request sent on a raw socket and left running until the socket closes. */
static int send_raw(unsigned p, const char *json)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(json), json);
    REQUIRE(write(fd, req, (size_t)n) == n);
    return fd;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* GET /slots until `want` entries show (the first generating, the rest
 * waiting), or 10 s; returns the array (caller frees). */
static cJSON *slots_until(unsigned p, int want, int need_generating)
{
    for (int i = 0; i < 1000; i++) {
        http_resp r;
        memset(&r, 0, sizeof r);
        http_do(&r, p, "GET", "/slots", NULL, 0, NULL);
        cJSON *j = cJSON_Parse(body_of(&r));
        http_free(&r);
        int gen = 0;
        for (const cJSON *e = j ? j->child : NULL; e; e = e->next) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "state");
            gen += cJSON_IsString(st) && !strcmp(st->valuestring, "generating");
        }
        if (cJSON_GetArraySize(j) == want && gen >= need_generating) return j;
        cJSON_Delete(j);
        sleep_ms(10);
    }
    return NULL;
}

/* A backend that runs one request at a time: one request generates (the
 * fake gives a token per 5 ms, 4000 at most: 20 s unless cancelled),
 * another waits; closing their sockets ends both. */
static void test_slots(void)
{
    fkv_backend b1;
    fkv_server *s1;
    char err[256];
    const char *opts[] = {"pace_ms=5", "max_batch=1", NULL};
    REQUIRE(fkv_backend_create("fake", opts, &b1, err, sizeof err) == FKV_OK);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    REQUIRE(fkv_server_start(&cfg, &b1, &s1, err, sizeof err) == FKV_OK);
    unsigned p = fkv_server_port(s1);
    cJSON *none = slots_until(p, 0, 0);
    CHECK(none && cJSON_IsArray(none));
    cJSON_Delete(none);

    int a = send_raw(p, "{\"prompt\":\"hello\",\"max_tokens\":4000,\"stream\":true,\"user\":\"alice\"}");
    cJSON *one = slots_until(p, 1, 1);
    CHECK(one != NULL);
    int b = send_raw(p, "{\"prompt\":\"hey\",\"max_tokens\":4000,\"stream\":true,\"user\":\"bob\"}");
    cJSON *two = slots_until(p, 2, 1);
    CHECK(two != NULL);
    int seen_a = 0, seen_b = 0;
    for (const cJSON *e = two ? two->child : NULL; e; e = e->next) {
        const char *user = cJSON_GetObjectItemCaseSensitive(e, "user")->valuestring;
        const char *state = cJSON_GetObjectItemCaseSensitive(e, "state")->valuestring;
        int np = cJSON_GetObjectItemCaseSensitive(e, "n_prompt_tokens")->valueint;
        int dec = cJSON_GetObjectItemCaseSensitive(e, "n_decoded")->valueint;
        int done = cJSON_GetObjectItemCaseSensitive(e, "n_prompt_tokens_processed")->valueint;
        if (!strcmp(user, "alice")) {
            seen_a = 1;
            CHECKF(!strcmp(state, "generating") && np == 5 && done == 5 && dec >= 1 && dec < 4000, "alice: %s %d %d",
                   state, np, dec);
        } else if (!strcmp(user, "bob")) {
            seen_b = 1;
            CHECKF(!strcmp(state, "waiting") && np == 3 && done == 0 && dec == 0, "bob: %s %d %d", state, np, dec);
        }
    }
    CHECK(seen_a && seen_b);
    cJSON_Delete(one);
    cJSON_Delete(two);
    close(a);
    close(b);
    /* gone once their clients left (a stream notices at its next write) */
    cJSON *after = slots_until(p, 0, 0);
    CHECK(after != NULL);
    cJSON_Delete(after);
    fkv_server_destroy(s1);
    fkv_backend_destroy(&b1);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *opts[] = {"pace_ms=1", "max_batch=8", NULL};
    char err[256];
    REQUIRE(fkv_backend_create("fake", opts, &be, err, sizeof err) == FKV_OK);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    REQUIRE(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_OK);
    port = fkv_server_port(srv);

    test_refused();
    test_accepted();
    test_logprobs_whole();
    test_logprobs_stream();
    test_logprobs_stop_whole();
    test_tokenize();
    test_props();
    test_slots();

    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
