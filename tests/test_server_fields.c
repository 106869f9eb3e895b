/* Request fields over the fake backend, in process: every field the server
 * does not implement is refused with a 400 that names it, the ones it
 * accepts on purpose pass with their neutral values, and logprobs come in
 * OpenAI's two formats (completions' legacy object, chat's content list),
 * whole and streamed, cut with the text at a stop sequence.  The fake
 * draws from 27 equally likely tokens, so every logprob is -ln 27. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
