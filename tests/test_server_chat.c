/* POST /v1/chat/completions over the fake backend (one token per byte, so
 * prompt_tokens is the rendered prompt's length): whole and streamed
 * answers, n, max_tokens / max_completion_tokens, usage, stop sequences on
 * both endpoints, a missing model, every malformed message, and
 * --chat-template. */
#include <stdlib.h>
#include <string.h>

#include "chat_client.h"
#include "server/server.h"

static fkv_backend be;
static fkv_server *srv;

#define SYS_USER "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi!\"}]"
/* SYS_USER through chatml, the default for a model without a template */
static const char CHATML[] =
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n";

static void start(const char *tmpl)
{
    const char *opts[] = {"pace_ms=1", "max_context=400", NULL};
    char err[256];
    REQUIRE(fkv_backend_create("fake", opts, &be, err, sizeof err) == FKV_OK);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    cfg.chat_template = tmpl;
    REQUIRE(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_OK);
    chat_port = fkv_server_port(srv);
}

static void stop_server(void)
{
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
}

static void test_whole(void)
{
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"model\":\"fairkv-fake\",\"messages\":" SYS_USER ",\"max_tokens\":6,\"seed\":1}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECK(!strcmp(a.object, "chat.completion") && a.n_choices == 1 && strlen(a.text[0]) == 6);
    CHECK(!strcmp(a.finish[0], "length"));
    CHECKF(a.prompt == (long)strlen(CHATML), "prompt_tokens %ld, the chatml prompt has %zu bytes", a.prompt,
           strlen(CHATML));
    CHECK(a.completion == 6 && a.total == a.prompt + 6 && a.cached >= 0);
    CHECK(strstr(body_of(&r), "\"id\":\"chatcmpl-") != NULL);
    char first[1024];
    snprintf(first, sizeof first, "%s", a.text[0]);
    http_free(&r);

    /* no model field: one model is served; the answer names it */
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":6,\"seed\":1,\"user\":\"ann\"}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECK(!strcmp(a.model, "fairkv-fake") && !strcmp(a.text[0], first));
    http_free(&r);

    /* content as text parts is the same prompt as the joined string */
    post_chat(&r, "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be\"},"
                  "{\"type\":\"text\",\"text\":\"brief.\"}]},{\"role\":\"user\",\"content\":\"Hi!\"}],"
                  "\"max_tokens\":2}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECK(a.prompt == (long)strlen(CHATML)); /* "Be\nbrief." has the length of "Be brief." */
    http_free(&r);

    /* max_completion_tokens is max_tokens' newer name, and wins */
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_completion_tokens\":9}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a) && a.completion == 9 && strlen(a.text[0]) == 9);
    http_free(&r);
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":3,\"max_completion_tokens\":5}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a) && a.completion == 5);
    http_free(&r);

    /* neither: the rest of the context (400 tokens here) */
    post_chat(&r, "{\"messages\":" SYS_USER "}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECKF(a.completion == 400 - (long)strlen(CHATML) && !strcmp(a.finish[0], "length"), "completion %ld",
           a.completion);
    http_free(&r);

    /* n = 2: two choices, the prompt counted once */
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":4,\"n\":2,\"seed\":7,\"temperature\":0.5,\"top_p\":0.9}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECK(a.n_choices == 2 && strlen(a.text[0]) == 4 && strlen(a.text[1]) == 4);
    CHECK(a.completion == 8 && a.prompt == (long)strlen(CHATML));
    http_free(&r);
}

static void test_stream(void)
{
    http_resp r = {0};
    answer a;
    chat_stream s;
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":12,\"n\":2,\"seed\":5}");
    REQUIRE(r.status == 200 && parse_answer(body_of(&r), &a) && a.n_choices == 2);
    http_free(&r);
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":12,\"n\":2,\"seed\":5,\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}}");
    CHECK(r.status == 200 && strstr(r.headers.data, "text/event-stream"));
    parse_chat_stream(body_of(&r), &s);
    CHECKF(!s.bad && s.done && s.n_choices == 2, "stream: %s", body_of(&r));
    for (int i = 0; i < 2; i++) {
        CHECKF(s.role_first[i], "choice %d: the first chunk has no role", i);
        CHECKF(!strcmp(s.text[i], a.text[i]), "choice %d: streamed '%s', whole '%s'", i, s.text[i], a.text[i]);
        CHECK(!strcmp(s.finish[i], "length"));
    }
    CHECK(s.completion == 24 && s.prompt == (long)strlen(CHATML));
    http_free(&r);
}

/* The whole text of a seeded request, then the same with a stop taken from
 * its middle: cut before the stop's first place, finish "stop". */
static void check_stop(const char *path, const char *field, int stream)
{
    char req[1024];
    http_resp r = {0};
    answer a;
    snprintf(req, sizeof req, "{%s,\"max_tokens\":40,\"seed\":11}", field);
    post_to(&r, path, req);
    REQUIRE(r.status == 200 && parse_answer(body_of(&r), &a) && strlen(a.text[0]) == 40);
    http_free(&r);
    char stop[4] = {a.text[0][20], a.text[0][21], a.text[0][22], 0};
    size_t cut = (size_t)(strstr(a.text[0], stop) - a.text[0]);
    snprintf(req, sizeof req, "{%s,\"max_tokens\":40,\"seed\":11,\"stop\":[\"\\u0001\",\"%s\"],\"stream\":%s}", field,
             stop, stream ? "true" : "false");
    post_to(&r, path, req);
    CHECK(r.status == 200);
    char got[1024] = "", finish[16] = "";
    if (!stream) {
        answer b;
        CHECK(parse_answer(body_of(&r), &b));
        snprintf(got, sizeof got, "%s", b.text[0]);
        snprintf(finish, sizeof finish, "%s", b.finish[0]);
        CHECKF(b.completion >= (long)cut + 1 && b.completion <= 23, "completion_tokens %ld", b.completion);
    } else if (!strcmp(path, "/v1/chat/completions")) {
        chat_stream s;
        parse_chat_stream(body_of(&r), &s);
        CHECK(!s.bad && s.done);
        snprintf(got, sizeof got, "%s", s.text[0]);
        snprintf(finish, sizeof finish, "%s", s.finish[0]);
    } else { /* completions chunks: "text" pieces */
        for (const char *p = body_of(&r); (p = strstr(p, "\"text\":\"")); p += 8)
            strncat(got, p + 8, strcspn(p + 8, "\""));
        const char *f = strstr(body_of(&r), "\"finish_reason\":\"");
        if (f) snprintf(finish, sizeof finish, "%.*s", (int)strcspn(f + 17, "\""), f + 17);
    }
    CHECKF(strlen(got) == cut && !strncmp(got, a.text[0], cut) && !strcmp(finish, "stop"),
           "%s stream %d: stop '%s' in '%s': got '%s' (%s)", path, stream, stop, a.text[0], got, finish);
    http_free(&r);
}

static void test_stop(void)
{
    for (int stream = 0; stream < 2; stream++) {
        check_stop("/v1/chat/completions", "\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]", stream);
        check_stop("/v1/completions", "\"prompt\":\"go\"", stream);
    }
    /* a single string; a stop never met leaves the length finish */
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":8,\"stop\":\"\\u0002\"}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a) && strlen(a.text[0]) == 8 && !strcmp(a.finish[0], "length"));
    http_free(&r);
    static const char *const bad[] = {
        "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]", "\"stop\":\"\"", "\"stop\":7", "\"stop\":[\"a\",3]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char req[256];
        snprintf(req, sizeof req, "{\"messages\":" SYS_USER ",%s}", bad[i]);
        post_chat(&r, req);
        CHECKF(is_error(&r, 400, r.status == 400 && strstr(body_of(&r), "invalid_type") ? "invalid_type"
                                                                                         : "invalid_value", "stop"),
               "case %zu", i);
        http_free(&r);
        snprintf(req, sizeof req, "{\"prompt\":\"x\",%s}", bad[i]);
        post_to(&r, "/v1/completions", req);
        CHECK(r.status == 400 && strstr(body_of(&r), "\"param\":\"stop\""));
        http_free(&r);
    }
}

static void test_bad_messages(void)
{
    static const struct {
        const char *body, *code, *param;
        int status;
    } cs[] = {
        {"{\"model\":\"fairkv-fake\"}", "missing_field", "messages", 400},
        {"{\"messages\":[]}", "invalid_value", "messages", 400},
        {"{\"messages\":\"hi\"}", "invalid_type", "messages", 400},
        {"{\"messages\":[\"hi\"]}", "invalid_type", "messages[0]", 400},
        {"{\"messages\":[{\"content\":\"hi\"}]}", "missing_field", "messages[0].role", 400},
        {"{\"messages\":[{\"role\":\"bot\",\"content\":\"hi\"}]}", "invalid_value", "messages[0].role", 400},
        {"{\"messages\":[{\"role\":7,\"content\":\"hi\"}]}", "invalid_value", "messages[0].role", 400},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":5}]}", "invalid_type",
         "messages[1].content", 400},
        {"{\"messages\":[{\"role\":\"user\"}]}", "missing_field", "messages[0].content", 400},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}",
         "invalid_value", "messages[0].content[0]", 400},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "invalid_value",
         "messages[0].content[0]", 400},
        {"{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "model_not_found", "model", 404},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":0}", "invalid_value",
         "max_completion_tokens", 400},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":400}", "context_length_exceeded",
         "max_tokens", 400},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"user\":3}", "invalid_type", "user", 400},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        http_resp r = {0};
        post_chat(&r, cs[i].body);
        CHECKF(is_error(&r, cs[i].status, cs[i].code, cs[i].param), "case %zu: %s", i, cs[i].body);
        http_free(&r);
    }
    http_resp r = {0};
    http_do(&r, chat_port, "GET", "/v1/chat/completions", NULL, 0, NULL);
    CHECK(r.status == 405);
    http_free(&r);
}

/* --chat-template picks the format; an unknown name refuses to start. */
static void test_override(void)
{
    start("llama2");
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"messages\":" SYS_USER ",\"max_tokens\":1}");
    static const char want[] = "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST]"; /* BOS: the tokenizer's */
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a) && a.prompt == (long)strlen(want));
    http_free(&r);
    stop_server();

    const char *opts[] = {"pace_ms=1", NULL};
    char err[256] = "";
    REQUIRE(fkv_backend_create("fake", opts, &be, err, sizeof err) == FKV_OK);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    cfg.chat_template = "vicuna";
    CHECK(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_EINVAL);
    CHECKF(strstr(err, "vicuna") && strstr(err, "chatml") && strstr(err, "gemma"), "err: %s", err);
    fkv_backend_destroy(&be);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    start(NULL);
    test_whole();
    test_stream();
    test_stop();
    test_bad_messages();
    stop_server();
    test_override();
    curl_global_cleanup();
    return check_done();
}
