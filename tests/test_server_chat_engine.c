/* POST /v1/chat/completions over the engine backend.  On random tiny
 * models carrying a tokenizer.chat_template: a recognized template is used,
 * an unknown one falls back to chatml with a warning at start.  On a real
 * tiny model (stories260K, which has no chat template: chatml): the prompt
 * is the chatml text tokenized with special tokens, greedy whole and
 * streamed answers agree, n = 2, stop sequences on both endpoints,
 * max_completion_tokens, cached prompt tokens on a repeat, and a missing
 * model field. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_client.h"
#include "gguf/gguf.h"
#include "model/model_init.h"
#include "server/server.h"

static fkv_backend be;
static fkv_server *srv;

#define MSGS "[{\"role\":\"system\",\"content\":\"You tell stories.\"},{\"role\":\"user\",\"content\":\"Once upon a time\"}]"
static const char CHATML[] = "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nOnce upon a "
                             "time<|im_end|>\n<|im_start|>assistant\n";

static void test_prompt_and_stream(char *greedy, size_t cap)
{
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"model\":\"stories260K-llamacpp\",\"messages\":" MSGS ",\"max_tokens\":24,\"temperature\":0,"
                  "\"user\":\"alice\"}");
    REQUIRE(r.status == 200 && parse_answer(body_of(&r), &a));
    http_free(&r);
    REQUIRE(be.ops->tokenize_special);
    int32_t ids[512];
    uint32_t n = 0;
    REQUIRE(be.ops->tokenize_special(be.impl, CHATML, strlen(CHATML), ids, 512, &n) == FKV_OK && n <= 512);
    CHECKF(a.prompt == (long)n, "prompt_tokens %ld, the chatml prompt has %u tokens", a.prompt, n);
    CHECK(!strcmp(a.object, "chat.completion") && !strcmp(a.model, "stories260K-llamacpp"));
    CHECK(a.completion >= 1 && a.completion <= 24 && a.total == a.prompt + a.completion);
    CHECK(!strcmp(a.finish[0], a.completion == 24 ? "length" : "stop") && strlen(a.text[0]) > 12);
    snprintf(greedy, cap, "%s", a.text[0]);

    /* the same again: the prompt is found in the prefix cache (the tenant's) */
    post_chat(&r, "{\"messages\":" MSGS ",\"max_tokens\":24,\"temperature\":0,\"user\":\"alice\"}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a));
    CHECKF(a.cached > 0 && a.cached <= a.prompt && !strcmp(a.text[0], greedy), "cached %ld", a.cached);
    http_free(&r);

    chat_stream s;
    post_chat(&r, "{\"messages\":" MSGS ",\"max_tokens\":24,\"temperature\":0,\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}}");
    CHECK(r.status == 200);
    parse_chat_stream(body_of(&r), &s);
    CHECKF(!s.bad && s.done && s.n_choices == 1 && s.role_first[0], "stream: %s", body_of(&r));
    CHECKF(!strcmp(s.text[0], greedy), "streamed '%s', whole '%s'", s.text[0], greedy);
    CHECK(s.prompt == (long)n && s.completion >= 1);
    http_free(&r);
}

static void test_n_and_limits(void)
{
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"messages\":" MSGS ",\"max_completion_tokens\":5,\"n\":2,\"seed\":42,\"temperature\":0.8,"
                  "\"top_p\":0.95}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &a) && a.n_choices == 2);
    CHECK(a.completion >= 2 && a.completion <= 10);
    for (int i = 0; i < a.n_choices; i++) CHECK(!strcmp(a.finish[i], "length") || !strcmp(a.finish[i], "stop"));
    http_free(&r);
    /* the same seed, the same choices */
    answer b;
    post_chat(&r, "{\"messages\":" MSGS ",\"max_completion_tokens\":5,\"n\":2,\"seed\":42,\"temperature\":0.8,"
                  "\"top_p\":0.95}");
    CHECK(r.status == 200 && parse_answer(body_of(&r), &b) && b.n_choices == 2);
    CHECK(!strcmp(a.text[0], b.text[0]) && !strcmp(a.text[1], b.text[1]));
    http_free(&r);
    post_chat(&r, "{\"messages\":" MSGS ",\"max_completion_tokens\":600}");
    CHECK(is_error(&r, 400, "invalid_value", "max_completion_tokens"));
    http_free(&r);
    post_chat(&r, "{\"messages\":[{\"role\":\"user\",\"content\":3}]}");
    CHECK(is_error(&r, 400, "invalid_type", "messages[0].content"));
    http_free(&r);
}

/* s (a few characters) as the inside of a JSON string */
static void json_escape(const char *s, char *out)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') *out++ = '\\';
        *out++ = *s;
    }
    *out = 0;
}

/* A stop taken from the middle of the greedy text cuts it there. */
static void test_stop(const char *greedy)
{
    char stop[4] = {greedy[8], greedy[9], greedy[10], 0}, req[1024], esc[16];
    json_escape(stop, esc);
    size_t cut = (size_t)(strstr(greedy, stop) - greedy);
    for (int stream = 0; stream < 2; stream++) {
        http_resp r = {0};
        snprintf(req, sizeof req, "{\"messages\":" MSGS ",\"max_tokens\":24,\"temperature\":0,\"stop\":\"%s\",\"stream\":%s}",
                 esc, stream ? "true" : "false");
        post_chat(&r, req);
        CHECK(r.status == 200);
        char got[1024] = "", finish[16] = "";
        if (stream) {
            chat_stream s;
            parse_chat_stream(body_of(&r), &s);
            CHECK(!s.bad && s.done);
            snprintf(got, sizeof got, "%s", s.text[0]);
            snprintf(finish, sizeof finish, "%s", s.finish[0]);
        } else {
            answer a;
            CHECK(parse_answer(body_of(&r), &a));
            snprintf(got, sizeof got, "%s", a.text[0]);
            snprintf(finish, sizeof finish, "%s", a.finish[0]);
        }
        CHECKF(strlen(got) == cut && !strncmp(got, greedy, cut) && !strcmp(finish, "stop"),
               "stream %d: stop '%s' in '%s': got '%s' (%s)", stream, stop, greedy, got, finish);
        http_free(&r);
    }
    /* /v1/completions: the same cut on a plain prompt's greedy text */
    http_resp r = {0};
    answer a, b;
    post_to(&r, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0}");
    REQUIRE(r.status == 200 && parse_answer(body_of(&r), &a) && strlen(a.text[0]) > 12);
    http_free(&r);
    char s2[3] = {a.text[0][10], a.text[0][11], 0};
    json_escape(s2, esc);
    size_t at = (size_t)(strstr(a.text[0], s2) - a.text[0]);
    snprintf(req, sizeof req, "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0,\"stop\":[\"%s\"]}",
             esc);
    post_to(&r, "/v1/completions", req);
    CHECK(r.status == 200 && parse_answer(body_of(&r), &b));
    CHECKF(strlen(b.text[0]) == at && !strncmp(b.text[0], a.text[0], at) && !strcmp(b.finish[0], "stop"),
           "completion stop '%s' in '%s': got '%s'", s2, a.text[0], b.text[0]);
    http_free(&r);
}

/* A random tiny model whose GGUF carries `tmpl` as its chat template,
 * served; the server's start-up stderr goes to log[cap]. */
static void serve_tiny(const char *dir, const char *tmpl, char *log, size_t cap)
{
    char path[256], mopt[300], err[400];
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    fkv_model_init_cfg mc;
    REQUIRE(!fkv_model_init_preset("tiny", &mc));
    fkv_gguf_writer *w;
    REQUIRE(!fkv_model_init_build(&mc, &w));
    REQUIRE(!fkv_gguf_w_str(w, "tokenizer.chat_template", tmpl));
    REQUIRE(fkv_gguf_w_to_file(w, path, err, sizeof err) == FKV_OK);
    fkv_gguf_writer_free(w);
    snprintf(mopt, sizeof mopt, "model=%s", path);
    const char *opts[] = {mopt, "kv_budget=1MiB", NULL};
    REQUIRE(fkv_backend_create("engine", opts, &be, err, sizeof err) == FKV_OK);
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/stderr", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    fkv_status st = fkv_server_start(&cfg, &be, &srv, err, sizeof err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    REQUIRE(st == FKV_OK);
    chat_port = fkv_server_port(srv);
    FILE *f = fopen(logpath, "r");
    size_t n = f ? fread(log, 1, cap - 1, f) : 0;
    log[n] = 0;
    if (f) fclose(f);
    unlink(logpath);
    unlink(path);
}

/* prompt_tokens of a one-user-message chat */
static long chat_prompt_tokens(void)
{
    http_resp r = {0};
    answer a;
    post_chat(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1}");
    int ok = r.status == 200 && parse_answer(body_of(&r), &a);
    http_free(&r);
    return ok ? a.prompt : -1;
}

/* The tiny model's byte tokenizer: BOS + one token a byte, so the prompt's
 * length tells which template rendered it. */
static void test_model_templates(void)
{
    char dir[] = "/tmp/fkv-chat-engine-XXXXXX", log[2048];
    REQUIRE(mkdtemp(dir));
    serve_tiny(dir, "{{ bos_token }}{% for message in messages %}{{'<|user|>' + '\\n' + message['content'] + "
                    "'<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% endfor %}",
               log, sizeof log);
    long want = 1 + (long)strlen("<|user|>\nhi<|end|>\n<|assistant|>\n");
    long got = chat_prompt_tokens();
    CHECKF(got == want, "phi3 template: prompt_tokens %ld, want %ld", got, want);
    CHECKF(!strstr(log, "warning"), "stderr: %s", log);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);

    serve_tiny(dir, "{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}", log, sizeof log);
    want = 1 + (long)strlen("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    got = chat_prompt_tokens();
    CHECKF(got == want, "unknown template: prompt_tokens %ld, want chatml's %ld", got, want);
    CHECKF(strstr(log, "warning") && strstr(log, "chatml") && strstr(log, "--chat-template"), "stderr: %s", log);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    rmdir(dir);
}

int main(void)
{
    const char *d = getenv("FKV_DATA_DIR");
    char path[1024], mopt[1100], err[400];
    snprintf(path, sizeof path, "%s/models/stories260K-llamacpp.gguf", d ? d : "../shared/data");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_model_templates();
    if (access(path, R_OK)) {
        printf("SKIP: %s not found (the stories260K model)\n", path);
        return check_done() ? 1 : 77;
    }
    snprintf(mopt, sizeof mopt, "model=%s", path);
    const char *opts[] = {mopt, "kv_budget=4MiB", NULL};
    REQUIRE(fkv_backend_create("engine", opts, &be, err, sizeof err) == FKV_OK);
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    REQUIRE(fkv_server_start(&cfg, &be, &srv, err, sizeof err) == FKV_OK);
    chat_port = fkv_server_port(srv);
    char greedy[1024];
    test_prompt_and_stream(greedy, sizeof greedy);
    test_n_and_limits();
    test_stop(greedy);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
