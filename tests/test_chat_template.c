/* Chat templates: names, detection from template texts, each format's
 * rendering against hand-written prompts, the Phi-3 vocabulary's own Jinja
 * template rendered by Jinja2 (tests/render_template.py) against fairkv's C
 * rendering byte for byte, and special tokens read from chat prompts. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf.h"
#include "model/tokenizer.h"
#include "server/chat_template.h"

static const fkv_chat_tokens toks = {"<s>", "</s>"};

/* system S, then user U1, assistant A1, user U2 (skip_system: without S) */
static const fkv_chat_msg conv[] = {
    {FKV_ROLE_SYSTEM, "S"}, {FKV_ROLE_USER, "U1"}, {FKV_ROLE_ASSISTANT, "A1"}, {FKV_ROLE_USER, "U2"}};

static void expect(fkv_chat_tmpl t, const fkv_chat_msg *m, size_t n, int gen, const char *want)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    CHECK(fkv_chat_template_apply(t, m, n, gen, &toks, &b) == 0);
    const char *got = b.data ? b.data : "";
    CHECKF(!strcmp(got, want), "%s (gen %d):\n got  [%s]\n want [%s]", fkv_chat_template_name(t), gen, got, want);
    fkv_textbuf_free(&b);
}

static void test_names(void)
{
    for (int t = 0; t < FKV_CHAT_N; t++) {
        const char *name = fkv_chat_template_name((fkv_chat_tmpl)t);
        CHECK(name && fkv_chat_template_by_name(name) == t);
        CHECKF(strstr(fkv_chat_template_list(), name) != NULL, "%s not in the list", name);
    }
    CHECK(fkv_chat_template_by_name("vicuna") == FKV_CHAT_UNKNOWN);
    CHECK(fkv_chat_template_by_name(NULL) == FKV_CHAT_UNKNOWN);
    CHECK(fkv_chat_template_name(FKV_CHAT_UNKNOWN) == NULL);
    CHECK(FKV_CHAT_DEFAULT == FKV_CHAT_CHATML);
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    CHECK(fkv_chat_template_apply(FKV_CHAT_UNKNOWN, conv, 4, 1, &toks, &b) == -1 && b.len == 0);
    fkv_textbuf_free(&b);
}

/* Fragments of the templates the models ship, enough to tell them apart. */
static void test_detect(void)
{
    static const struct {
        const char *text;
        fkv_chat_tmpl want;
    } cs[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}",
         FKV_CHAT_CHATML},
        {"{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% set content = '<<SYS>>\\n' + "
         "system_message + '\\n<</SYS>>\\n\\n' %}",
         FKV_CHAT_LLAMA2},
        {"{{- '[INST]' + message['content'] + '[/INST]' }}", FKV_CHAT_LLAMA2},
        {"{{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + m + '[/INST]' }}",
         FKV_CHAT_MISTRAL_V7},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
         "message['content'] | trim + '<|eot_id|>' %}",
         FKV_CHAT_LLAMA3},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", FKV_CHAT_PHI3},
        {"{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{{'<|assistant|>\\n'}}", FKV_CHAT_PHI35},
        {"{{ '<|user|>\\n' + message['content'] + eos_token }}{{ '<|assistant|>' }}", FKV_CHAT_ZEPHYR},
        {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", FKV_CHAT_GEMMA},
        {"{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}", FKV_CHAT_UNKNOWN},
        {"", FKV_CHAT_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        fkv_chat_tmpl got = fkv_chat_template_detect(cs[i].text);
        CHECKF(got == cs[i].want, "case %zu: detected %s", i, got < 0 ? "unknown" : fkv_chat_template_name(got));
    }
    CHECK(fkv_chat_template_detect(NULL) == FKV_CHAT_UNKNOWN);
}

static void test_render(void)
{
    expect(FKV_CHAT_CHATML, conv, 4, 1,
           "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
           "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
    expect(FKV_CHAT_CHATML, conv + 1, 1, 0, "<|im_start|>user\nU1<|im_end|>\n");
    expect(FKV_CHAT_LLAMA2, conv, 4, 1, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]");
    expect(FKV_CHAT_LLAMA2, conv + 1, 3, 1, "<s>[INST] U1 [/INST] A1 </s><s>[INST] U2 [/INST]");
    expect(FKV_CHAT_LLAMA3, conv, 4, 1,
           "<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
           "U1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user"
           "<|end_header_id|>\n\nU2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(FKV_CHAT_PHI3, conv, 4, 1, "<s><|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n");
    expect(FKV_CHAT_PHI35, conv, 4, 1,
           "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n");
    expect(FKV_CHAT_PHI35, conv, 2, 0, "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n</s>");
    expect(FKV_CHAT_ZEPHYR, conv, 4, 1,
           "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n");
    expect(FKV_CHAT_MISTRAL_V7, conv, 4, 1, "<s>[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]U1[/INST]A1</s>[INST]U2[/INST]");
    expect(FKV_CHAT_GEMMA, conv, 4, 1,
           "<s><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
           "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n");
    expect(FKV_CHAT_GEMMA, conv + 1, 1, 0, "<s><start_of_turn>user\nU1<end_of_turn>\n");

    /* the templates that trim contents (Jinja's trim, Python's strip) */
    static const fkv_chat_msg pad[] = {{FKV_ROLE_USER, " \n hi there\t\n"}};
    expect(FKV_CHAT_LLAMA3, pad, 1, 0, "<s><|start_header_id|>user<|end_header_id|>\n\nhi there<|eot_id|>");
    expect(FKV_CHAT_GEMMA, pad, 1, 0, "<s><start_of_turn>user\nhi there<end_of_turn>\n");
    expect(FKV_CHAT_LLAMA2, pad, 1, 0, "<s>[INST] hi there [/INST]");
    expect(FKV_CHAT_CHATML, pad, 1, 0, "<|im_start|>user\n \n hi there\t\n<|im_end|>\n");

    /* the server leaves BOS to the tokenizer: no token texts, none written */
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    static const fkv_chat_tokens none = {"", ""};
    CHECK(fkv_chat_template_apply(FKV_CHAT_MISTRAL_V7, conv + 1, 2, 1, &none, &b) == 0);
    CHECK(b.data && !strcmp(b.data, "[INST]U1[/INST]A1"));
    fkv_textbuf_free(&b);
}

/* ------------------------------------------------------------ Phi-3 vs Jinja2 */

static const char *script_path(char *buf, size_t cap)
{
    const char *src = getenv("FKV_SOURCE_DIR");
    snprintf(buf, cap, "%s/tests/render_template.py", src ? src : ".");
    return buf;
}

/* Jinja2's rendering of tmpl over msgs into out; 77 when Jinja2 is missing. */
static int jinja_render(const char *tmpl, const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *t,
                        fkv_textbuf *out)
{
    static const char *const roles[] = {"system", "user", "assistant"};
    cJSON *req = cJSON_CreateObject(), *ms = cJSON_AddArrayToObject(req, "messages");
    cJSON_AddStringToObject(req, "template", tmpl);
    cJSON_AddBoolToObject(req, "add_generation_prompt", gen);
    cJSON_AddStringToObject(req, "bos_token", t->bos);
    cJSON_AddStringToObject(req, "eos_token", t->eos);
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", roles[m[i].role]);
        cJSON_AddStringToObject(o, "content", m[i].content);
        cJSON_AddItemToArray(ms, o);
    }
    char *json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    char path[] = "/tmp/fkv_chat_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0 && json);
    REQUIRE(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
    close(fd);
    free(json);
    char cmd[1200], sp[1024];
    const char *py = getenv("FKV_PYTHON") ? getenv("FKV_PYTHON") : "/usr/bin/python3";
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", py, script_path(sp, sizeof sp), path);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) fkv_textbuf_append(out, buf, k);
    int st = pclose(p);
    unlink(path);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (rc == 127) {
        printf("SKIP: %s not found (Debian package python3 with python3-jinja2)\n", py);
        return 77;
    }
    return rc;
}

static const char *vocab_path(char *buf, size_t cap)
{
    const char *d = getenv("FKV_DATA_DIR");
    snprintf(buf, cap, "%s/vocab/ggml-vocab-phi-3.gguf", d ? d : "../shared/data");
    return buf;
}

static int32_t special_id(const fkv_tokenizer *t, const char *text)
{
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (!strcmp(t->text[i], text) && (t->type[i] == FKV_TT_CONTROL || t->type[i] == FKV_TT_USER_DEFINED))
            return (int32_t)i;
    return -1;
}

static int has_id(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* The special tokens of a rendered chat prompt come out as those tokens. */
static void test_special_tokens(const fkv_tokenizer *tok, const char *prompt)
{
    int32_t user = special_id(tok, "<|user|>"), end = special_id(tok, "<|end|>"), ids[512];
    REQUIRE(user >= 0 && end >= 0);
    size_t n = 0;
    REQUIRE(fkv_tok_encode_special(tok, prompt, strlen(prompt), 0, ids, 512, &n) == FKV_OK && n <= 512);
    CHECKF(n > 2 && ids[0] == tok->bos && has_id(ids, n, user) && has_id(ids, n, end),
           "the prompt's <s>, <|user|>, <|end|> texts did not become tokens");
    size_t m = 0;
    REQUIRE(fkv_tok_encode(tok, prompt, strlen(prompt), 0, ids, 512, &m) == FKV_OK && m <= 512);
    CHECKF(!has_id(ids, m, user) && !has_id(ids, m, end) && m > n, "plain encoding read special tokens");
    /* text between the specials is encoded as before */
    static const char plain[] = "hello world";
    int32_t a[32], b[32];
    size_t na = 0, nb = 0;
    REQUIRE(!fkv_tok_encode_special(tok, plain, strlen(plain), 1, a, 32, &na));
    REQUIRE(!fkv_tok_encode(tok, plain, strlen(plain), 1, b, 32, &nb));
    CHECK(na == nb && na <= 32 && !memcmp(a, b, na * sizeof *a));
}

static void test_phi3_vs_jinja(void)
{
    char vp[1024], err[256];
    fkv_gguf *g = NULL;
    if (access(vocab_path(vp, sizeof vp), R_OK)) {
        printf("SKIP: %s not found (the Phi-3 vocabulary, with its tokenizer.chat_template)\n", vp);
        exit(77);
    }
    REQUIRE(fkv_gguf_load(vp, &g, err, sizeof err) == FKV_OK);
    const char *tmpl = NULL;
    REQUIRE(fkv_gguf_get_str(g, "tokenizer.chat_template", &tmpl, err, sizeof err) == FKV_OK);
    CHECK(fkv_chat_template_detect(tmpl) == FKV_CHAT_PHI3);
    fkv_tokenizer *tok = NULL;
    REQUIRE(fkv_tokenizer_from_gguf(g, &tok, err, sizeof err) == FKV_OK);
    fkv_chat_tokens t = {tok->text[tok->bos], tok->text[tok->eos]};

    static const fkv_chat_msg sys_user[] = {{FKV_ROLE_SYSTEM, "You are a helpful assistant."},
                                            {FKV_ROLE_USER, "What is 2+2?"}};
    static const fkv_chat_msg multi[] = {{FKV_ROLE_USER, "Hi \"there\"\nnew line"},
                                         {FKV_ROLE_ASSISTANT, "Hello! How can I help?"},
                                         {FKV_ROLE_USER, "Say caf\xc3\xa9 \xe2\x9c\x93 {{ not jinja }}"}};
    static const fkv_chat_msg full[] = {{FKV_ROLE_SYSTEM, "Be brief."},
                                        {FKV_ROLE_USER, "One"},
                                        {FKV_ROLE_ASSISTANT, "Two"},
                                        {FKV_ROLE_USER, "Three"},
                                        {FKV_ROLE_ASSISTANT, "Four"}};
    static const struct {
        const fkv_chat_msg *m;
        size_t n;
    } convs[] = {{sys_user, 2}, {multi, 3}, {full, 5}, {full + 1, 1}};
    for (size_t c = 0; c < sizeof convs / sizeof convs[0]; c++) {
        for (int gen = 1; gen >= 0; gen--) {
            fkv_textbuf want, got;
            fkv_textbuf_init(&want);
            fkv_textbuf_init(&got);
            int rc = jinja_render(tmpl, convs[c].m, convs[c].n, gen, &t, &want);
            if (rc == 77) {
                printf("SKIP: Jinja2 missing (Debian package python3-jinja2)\n");
                exit(77);
            }
            REQUIRE(rc == 0 && want.len > 0);
            REQUIRE(fkv_chat_template_apply(FKV_CHAT_PHI3, convs[c].m, convs[c].n, gen, &t, &got) == 0);
            CHECKF(got.len == want.len && !memcmp(got.data, want.data, want.len),
                   "conversation %zu, add_generation_prompt %d:\n jinja  [%s]\n fairkv [%s]", c, gen, want.data,
                   got.data ? got.data : "");
            if (c == 1 && gen) test_special_tokens(tok, got.data);
            fkv_textbuf_free(&want);
            fkv_textbuf_free(&got);
        }
    }
    fkv_tokenizer_free(tok);
    fkv_gguf_free(g);
}

int main(void)
{
    test_names();
    test_detect();
    test_render();
    test_phi3_vs_jinja();
    return check_done();
}
