/* OpenAI-compatible request parsing and response rendering (see api.h).
 * Every rejection names the field: clients fix requests from the message. */
#include "server/api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fkv_api_error_set(fkv_api_error *e, int http, const char *type, const char *code, const char *param,
                       const char *fmt, ...)
{
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

#define BAD(param, code, ...) \
    (fkv_api_error_set(err, 400, "invalid_request_error", code, param, __VA_ARGS__), -1)

void fkv_api_request_free(fkv_api_request *r)
{
    free(r->model);
    free(r->prompt);
    free(r->prompt_text);
    free(r->user);
    free(r->cache_salt);
    for (uint32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (uint32_t i = 0; i < r->n_messages; i++) free((char *)r->messages[i].content);
    free(r->messages);
    memset(r, 0, sizeof *r);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* An integer-valued JSON number in [lo, hi]. */
static int get_uint(const cJSON *it, const char *name, double lo, double hi, uint64_t *out, fkv_api_error *err)
{
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi)
        return BAD(name, "invalid_value", "'%s' must be an integer in [%.0f, %.0f]", name, lo, hi);
    *out = (uint64_t)it->valuedouble;
    return 0;
}

static int get_num(const cJSON *it, const char *name, double lo, double hi, int lo_open, double *out,
                   fkv_api_error *err)
{
    if (!cJSON_IsNumber(it) || !(it->valuedouble <= hi) || it->valuedouble < lo || (lo_open && it->valuedouble == lo))
        return BAD(name, "invalid_value", "'%s' must be a number in %s%g, %g]", name, lo_open ? "(" : "[", lo, hi);
    *out = it->valuedouble;
    return 0;
}

static int parse_prompt(const cJSON *p, const fkv_api_limits *lim, fkv_api_request *r, fkv_api_error *err)
{
    if (!p) return BAD("prompt", "missing_field", "'prompt' is required");
    /* a one-element array of strings is the same as the string */
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        size_t n = strlen(p->valuestring);
        if (!n) return BAD("prompt", "invalid_value", "'prompt' is empty");
        r->prompt_text = dup_str(p->valuestring);
        r->prompt_text_len = n;
        if (!r->prompt_text) {
            fkv_api_error_set(err, 500, "server_error", "out_of_memory", "", "out of memory");
            return -1;
        }
        return 0;
    }
    if (!cJSON_IsArray(p))
        return BAD("prompt", "invalid_type", "'prompt' must be a string or an array of token ids");
    int n = cJSON_GetArraySize(p);
    if (n <= 0) return BAD("prompt", "invalid_value", "'prompt' is empty");
    if ((uint32_t)n > lim->max_prompt)
        return BAD("prompt", "context_length_exceeded", "the prompt has %d tokens; this server takes at most %u", n,
                   lim->max_prompt);
    r->prompt = malloc(sizeof *r->prompt * (size_t)n);
    if (!r->prompt) {
        fkv_api_error_set(err, 500, "server_error", "out_of_memory", "", "out of memory");
        return -1;
    }
    int i = 0;
    for (const cJSON *t = p->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= lim->vocab_size)
            return BAD("prompt", "invalid_value",
                       "'prompt'[%d] is not a token id in [0, %u) (prompts of several strings are not supported)", i,
                       lim->vocab_size);
        r->prompt[i] = (int32_t)t->valuedouble;
    }
    r->n_prompt = (uint32_t)n;
    return 0;
}

#define OOM() (fkv_api_error_set(err, 500, "server_error", "out_of_memory", "", "out of memory"), -1)

/* One server, one model: "model" may be left out, and when given must be it. */
static int parse_model(const cJSON *root, const fkv_api_limits *lim, fkv_api_request *r, fkv_api_error *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (m && !cJSON_IsNull(m) && !cJSON_IsString(m)) return BAD("model", "invalid_type", "'model' must be a string");
    if (cJSON_IsString(m) && strcmp(m->valuestring, lim->model)) {
        fkv_api_error_set(err, 404, "invalid_request_error", "model_not_found", "model",
                          "the model '%.64s' does not exist; this server serves '%s'", m->valuestring, lim->model);
        return -1;
    }
    return (r->model = dup_str(lim->model)) ? 0 : OOM();
}

/* "stop": a string or an array of up to 4 non-empty strings. */
static int parse_stop(const cJSON *it, fkv_api_request *r, fkv_api_error *err)
{
    if (!it || cJSON_IsNull(it)) return 0;
    if (cJSON_IsString(it)) {
        if (!*it->valuestring) return BAD("stop", "invalid_value", "'stop' must not be empty");
        return (r->stop[r->n_stop++] = dup_str(it->valuestring)) ? 0 : OOM();
    }
    if (!cJSON_IsArray(it)) return BAD("stop", "invalid_type", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(it) > FKV_API_MAX_STOP)
        return BAD("stop", "invalid_value", "'stop' has more than %d sequences", FKV_API_MAX_STOP);
    int i = 0;
    for (const cJSON *s = it->child; s; s = s->next, i++) {
        if (!cJSON_IsString(s) || !*s->valuestring)
            return BAD("stop", "invalid_value", "'stop'[%d] must be a non-empty string", i);
        if (!(r->stop[r->n_stop++] = dup_str(s->valuestring))) return OOM();
    }
    return 0;
}

/* The text of a message's content: a string, or an array of
 * {"type":"text","text":...} parts, joined by newlines (as vLLM does). */
static int parse_content(const cJSON *c, int i, char **out, fkv_api_error *err)
{
    char name[48];
    snprintf(name, sizeof name, "messages[%d].content", i);
    if (cJSON_IsString(c)) return (*out = dup_str(c->valuestring)) ? 0 : OOM();
    if (!cJSON_IsArray(c))
        return BAD(name, c ? "invalid_type" : "missing_field", "'%s' must be a string or an array of text parts",
                   name);
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    int j = 0;
    for (const cJSON *p = c->child; p; p = p->next, j++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
            fkv_textbuf_free(&b);
            snprintf(name, sizeof name, "messages[%d].content[%d]", i, j);
            return BAD(name, "invalid_value", "'%s' must be {\"type\": \"text\", \"text\": string}", name);
        }
        if (j) fkv_textbuf_append(&b, "\n", 1);
        fkv_textbuf_puts(&b, tx->valuestring);
    }
    fkv_textbuf_append(&b, "", 0); /* an empty array is the empty string */
    if (b.oom || !b.data) {
        fkv_textbuf_free(&b);
        return OOM();
    }
    *out = b.data; /* the buffer's NUL-terminated bytes, handed over */
    return 0;
}

static int parse_role(const cJSON *ro, int i, fkv_chat_role *out, fkv_api_error *err)
{
    char name[48];
    snprintf(name, sizeof name, "messages[%d].role", i);
    if (!ro) return BAD(name, "missing_field", "'%s' is required", name);
    const char *v = cJSON_IsString(ro) ? ro->valuestring : "";
    /* "developer" is OpenAI's newer name for the system role */
    if (!strcmp(v, "system") || !strcmp(v, "developer")) *out = FKV_ROLE_SYSTEM;
    else if (!strcmp(v, "user")) *out = FKV_ROLE_USER;
    else if (!strcmp(v, "assistant")) *out = FKV_ROLE_ASSISTANT;
    else return BAD(name, "invalid_value", "'%s' must be \"system\", \"user\" or \"assistant\"", name);
    return 0;
}

static int parse_messages(const cJSON *ms, fkv_api_request *r, fkv_api_error *err)
{
    if (!ms) return BAD("messages", "missing_field", "'messages' is required");
    if (!cJSON_IsArray(ms)) return BAD("messages", "invalid_type", "'messages' must be an array of messages");
    int n = cJSON_GetArraySize(ms);
    if (n <= 0) return BAD("messages", "invalid_value", "'messages' is empty");
    if (!(r->messages = calloc((size_t)n, sizeof *r->messages))) return OOM();
    int i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        char name[48];
        snprintf(name, sizeof name, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return BAD(name, "invalid_type", "'%s' must be an object", name);
        fkv_chat_msg *cm = &r->messages[i];
        if (parse_role(cJSON_GetObjectItemCaseSensitive(m, "role"), i, &cm->role, err)) return -1;
        char *content = NULL;
        if (parse_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, &content, err)) return -1;
        cm->content = content;
        r->n_messages++;
    }
    return 0;
}

/* max_tokens, or for chat its newer name max_completion_tokens (which wins);
 * a chat that names neither may use the rest of the context. */
static int parse_max_tokens(const cJSON *root, const fkv_api_limits *lim, fkv_api_request *r, fkv_api_error *err)
{
    static const char *const keys[] = {"max_tokens", "max_completion_tokens"};
    r->max_tokens = 16;
    r->max_tokens_auto = r->kind == FKV_API_CHAT;
    for (int k = 0; k < (r->kind == FKV_API_CHAT ? 2 : 1); k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, keys[k]);
        uint64_t u;
        if (!it || cJSON_IsNull(it)) continue;
        if (get_uint(it, keys[k], 1, lim->max_context, &u, err)) return -1;
        r->max_tokens = (uint32_t)u;
        r->max_tokens_auto = 0;
    }
    return 0;
}

/* Fields this server reads, by endpoint (1 completions, 2 chat, 3 both). */
static const struct {
    const char *name;
    int kinds;
} known_fields[] = {
    {"model", 3}, {"prompt", 1}, {"messages", 2}, {"max_tokens", 3}, {"max_completion_tokens", 2},
    {"stop", 3}, {"temperature", 3}, {"top_p", 3}, {"seed", 3}, {"n", 3}, {"stream", 3},
    {"stream_options", 3}, {"user", 3}, {"cache_salt", 3}, {"logprobs", 3}, {"top_logprobs", 2},
    {"ignore_eos", 3},
    /* accepted and ignored on purpose, when their value asks for nothing
     * this server does not do (checked in neutral_field; docs/OPERATIONS.md
     * lists them) */
    {"cache_prompt", 3}, {"presence_penalty", 3}, {"frequency_penalty", 3}, {"logit_bias", 3},
    {"response_format", 2}, {"tools", 2}, {"tool_choice", 2}, {"parallel_tool_calls", 2},
    {"functions", 2}, {"function_call", 2}, {"echo", 1}, {"best_of", 1}, {"suffix", 1},
    {"metadata", 3}, {"store", 3}, {"service_tier", 3},
};

/* A field that is accepted only with a value that changes nothing here:
 * 0 when `it` is such a value (or is not one of these fields), else -1
 * with the 400 naming the field. */
static int neutral_field(const char *k, const cJSON *it, fkv_api_error *err)
{
    if (cJSON_IsNull(it)) return 0;
    if (!strcmp(k, "cache_prompt") || !strcmp(k, "parallel_tool_calls")) {
        /* the prefix cache is always on: cache_prompt changes nothing (see docs/OPERATIONS.md) */
        if (!cJSON_IsBool(it)) return BAD(k, "invalid_type", "'%s' must be true or false", k);
        return 0;
    }
    if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
        if (!cJSON_IsNumber(it) || it->valuedouble < -2 || it->valuedouble > 2)
            return BAD(k, "invalid_value", "'%s' must be a number in [-2, 2]", k);
        if (it->valuedouble != 0)
            return BAD(k, "unsupported_field", "'%s' is not supported by this server (only 0, the default)", k);
        return 0;
    }
    if (!strcmp(k, "logit_bias") || !strcmp(k, "metadata")) {
        if (!cJSON_IsObject(it)) return BAD(k, "invalid_type", "'%s' must be an object", k);
        if (!strcmp(k, "logit_bias") && it->child)
            return BAD(k, "unsupported_field", "'logit_bias' is not supported by this server (only {})");
        return 0;
    }
    if (!strcmp(k, "response_format")) {
        const cJSON *ty = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "type") : NULL;
        if (!cJSON_IsString(ty)) return BAD(k, "invalid_type", "'response_format' must be {\"type\": ...}");
        if (strcmp(ty->valuestring, "text"))
            return BAD(k, "unsupported_field",
                       "'response_format' of type '%.32s' is not supported by this server: it does not constrain "
                       "output (only {\"type\": \"text\"})",
                       ty->valuestring);
        return 0;
    }
    if (!strcmp(k, "tools") || !strcmp(k, "functions")) {
        if (!cJSON_IsArray(it) || it->child)
            return BAD(k, "unsupported_field", "'%s' is not supported by this server (no tool calls)", k);
        return 0;
    }
    if (!strcmp(k, "tool_choice") || !strcmp(k, "function_call")) {
        if (!cJSON_IsString(it) || strcmp(it->valuestring, "none"))
            return BAD(k, "unsupported_field", "'%s' is not supported by this server (only \"none\")", k);
        return 0;
    }
    if (!strcmp(k, "echo") || !strcmp(k, "store")) {
        if (!cJSON_IsBool(it)) return BAD(k, "invalid_type", "'%s' must be true or false", k);
        if (cJSON_IsTrue(it)) return BAD(k, "unsupported_field", "'%s' is not supported by this server (only false)", k);
        return 0;
    }
    if (!strcmp(k, "best_of")) {
        if (!cJSON_IsNumber(it) || it->valuedouble != 1)
            return BAD(k, "unsupported_field", "'best_of' is not supported by this server (only 1)");
        return 0;
    }
    if (!strcmp(k, "suffix")) {
        if (!cJSON_IsString(it) || *it->valuestring)
            return BAD(k, "unsupported_field", "'suffix' is not supported by this server (only \"\")");
        return 0;
    }
    if (!strcmp(k, "service_tier")) {
        if (!cJSON_IsString(it)) return BAD(k, "invalid_type", "'service_tier' must be a string");
        return 0;
    }
    return 0;
}

/* Every field of the body is one this server reads or accepts on purpose;
 * any other is refused by name, so a client asking for something not done
 * (top_k, tools, JSON output) learns it instead of getting plain text. */
static int check_fields(const cJSON *root, fkv_api_kind kind, fkv_api_error *err)
{
    int bit = kind == FKV_API_CHAT ? 2 : 1;
    for (const cJSON *it = root->child; it; it = it->next) {
        const char *k = it->string ? it->string : "";
        size_t i = 0, n = sizeof known_fields / sizeof known_fields[0];
        while (i < n && strcmp(known_fields[i].name, k)) i++;
        if (i == n || !(known_fields[i].kinds & bit)) {
            char name[32];
            snprintf(name, sizeof name, "%s", k);
            return BAD(name, "unsupported_field", "'%.64s' is not supported by this server on %s", k,
                       kind == FKV_API_CHAT ? "/v1/chat/completions" : "/v1/completions");
        }
        if (neutral_field(k, it, err)) return -1;
    }
    return 0;
}

static int get_bool(const cJSON *root, const char *name, int *out, fkv_api_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsBool(it)) return BAD(name, "invalid_type", "'%s' must be true or false", name);
    *out = cJSON_IsTrue(it);
    return 0;
}

/* completions: "logprobs": N alternatives (0..20); chat: "logprobs": bool
 * and "top_logprobs": N, which needs logprobs true (as OpenAI's). */
static int parse_logprobs(const cJSON *root, fkv_api_request *r, fkv_api_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    uint64_t u;
    if (r->kind == FKV_API_COMPLETION) {
        if (!it || cJSON_IsNull(it)) return 0;
        if (get_uint(it, "logprobs", 0, FKV_API_MAX_LOGPROBS, &u, err)) return -1;
        r->logprobs = 1;
        r->top_logprobs = (uint32_t)u;
        return 0;
    }
    if (get_bool(root, "logprobs", &r->logprobs, err)) return -1;
    it = cJSON_GetObjectItemCaseSensitive(root, "top_logprobs");
    if (!it || cJSON_IsNull(it)) return 0;
    if (get_uint(it, "top_logprobs", 0, FKV_API_MAX_LOGPROBS, &u, err)) return -1;
    if (!r->logprobs) return BAD("top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = (uint32_t)u;
    return 0;
}

static int parse_fields(const cJSON *root, const fkv_api_limits *lim, fkv_api_request *r, fkv_api_error *err)
{
    if (!cJSON_IsObject(root)) return BAD("", "invalid_json", "the body must be a JSON object");
    if (check_fields(root, r->kind, err)) return -1;
    if (parse_model(root, lim, r, err)) return -1;
    if (r->kind == FKV_API_CHAT ? parse_messages(cJSON_GetObjectItemCaseSensitive(root, "messages"), r, err)
                                : parse_prompt(cJSON_GetObjectItemCaseSensitive(root, "prompt"), lim, r, err))
        return -1;
    if (parse_max_tokens(root, lim, r, err)) return -1;
    if (parse_stop(cJSON_GetObjectItemCaseSensitive(root, "stop"), r, err)) return -1;

    uint64_t u;
    const cJSON *it;
    r->temperature = 1.0;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "temperature")) && !cJSON_IsNull(it) &&
        get_num(it, "temperature", 0, 2, 0, &r->temperature, err))
        return -1;
    r->top_p = 1.0;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "top_p")) && !cJSON_IsNull(it) &&
        get_num(it, "top_p", 0, 1, 1, &r->top_p, err))
        return -1;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "seed")) && !cJSON_IsNull(it)) {
        /* 2^53: the largest integer a JSON double holds exactly */
        if (get_uint(it, "seed", 0, 9007199254740992.0, &u, err)) return -1;
        r->seed = u;
        r->has_seed = 1;
    }
    r->n = 1;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "n")) && !cJSON_IsNull(it)) {
        if (get_uint(it, "n", 1, lim->max_n, &u, err)) return -1;
        r->n = (uint32_t)u;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "stream")) && !cJSON_IsNull(it)) {
        if (!cJSON_IsBool(it)) return BAD("stream", "invalid_type", "'stream' must be true or false");
        r->stream = cJSON_IsTrue(it);
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "stream_options")) && !cJSON_IsNull(it)) {
        const cJSON *iu = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "include_usage") : NULL;
        if (!cJSON_IsObject(it) || (iu && !cJSON_IsBool(iu)))
            return BAD("stream_options", "invalid_type", "'stream_options' must be {\"include_usage\": bool}");
        r->include_usage = cJSON_IsTrue(iu);
    }
    if (parse_logprobs(root, r, err) || get_bool(root, "ignore_eos", &r->ignore_eos, err)) return -1;
    it = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (it && !cJSON_IsNull(it) && !cJSON_IsString(it)) return BAD("user", "invalid_type", "'user' must be a string");
    r->user = dup_str(it && cJSON_IsString(it) ? it->valuestring : "");
    /* vLLM's cache_salt: requests share prefix-cache entries only with the
     * same salt (a namespace on top of the tenant's) */
    it = cJSON_GetObjectItemCaseSensitive(root, "cache_salt");
    if (it && !cJSON_IsNull(it)) {
        if (!cJSON_IsString(it) || !*it->valuestring)
            return BAD("cache_salt", "invalid_type", "'cache_salt' must be a non-empty string");
        if (!(r->cache_salt = dup_str(it->valuestring))) {
            fkv_api_error_set(err, 500, "server_error", "out_of_memory", "", "out of memory");
            return -1;
        }
    }
    if (!r->model || !r->user) {
        fkv_api_error_set(err, 500, "server_error", "out_of_memory", "", "out of memory");
        return -1;
    }
    if (r->prompt && fkv_api_check_prompt(r, r->n_prompt, lim, err)) return -1;
    return 0;
}

static int parse_body(const char *body, size_t len, fkv_api_kind kind, const fkv_api_limits *lim,
                      fkv_api_request *out, fkv_api_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return BAD("", "invalid_json", "the body is not valid JSON (error near byte %zu)", at);
    }
    int rc = parse_fields(root, lim, out, err);
    cJSON_Delete(root);
    if (rc) fkv_api_request_free(out);
    return rc;
}

int fkv_api_parse_completion(const char *body, size_t len, const fkv_api_limits *lim, fkv_api_request *out,
                             fkv_api_error *err)
{
    return parse_body(body, len, FKV_API_COMPLETION, lim, out, err);
}

int fkv_api_parse_chat(const char *body, size_t len, const fkv_api_limits *lim, fkv_api_request *out,
                       fkv_api_error *err)
{
    return parse_body(body, len, FKV_API_CHAT, lim, out, err);
}

int fkv_api_check_prompt(const fkv_api_request *r, uint32_t n_prompt, const fkv_api_limits *lim, fkv_api_error *err)
{
    if (n_prompt == 0) return BAD("prompt", "invalid_value", "'prompt' has no tokens");
    if (n_prompt > lim->max_prompt)
        return BAD("prompt", "context_length_exceeded", "the prompt has %u tokens; this server takes at most %u",
                   n_prompt, lim->max_prompt);
    if ((uint64_t)n_prompt + r->max_tokens > lim->max_context)
        return BAD("max_tokens", "context_length_exceeded",
                   "prompt (%u tokens) + max_tokens (%u) exceeds the model's context of %u tokens", n_prompt,
                   r->max_tokens, lim->max_context);
    return 0;
}

void fkv_api_render_error(fkv_textbuf *b, const fkv_api_error *e)
{
    fkv_textbuf_puts(b, "{\"error\":{\"message\":");
    fkv_textbuf_json_str(b, e->message, strlen(e->message));
    fkv_textbuf_puts(b, ",\"type\":");
    fkv_textbuf_json_str(b, e->type ? e->type : "server_error", strlen(e->type ? e->type : "server_error"));
    fkv_textbuf_puts(b, ",\"param\":");
    if (e->param[0]) fkv_textbuf_json_str(b, e->param, strlen(e->param));
    else fkv_textbuf_puts(b, "null");
    fkv_textbuf_puts(b, ",\"code\":");
    if (e->code) fkv_textbuf_json_str(b, e->code, strlen(e->code));
    else fkv_textbuf_puts(b, "null");
    fkv_textbuf_puts(b, "}}\n");
}

static void head(fkv_textbuf *b, fkv_api_kind kind, int chunk, uint64_t id, int64_t created, const char *model)
{
    const char *object = kind == FKV_API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                              : "text_completion";
    fkv_textbuf_printf(b, "{\"id\":\"%s-%llu\",\"object\":\"%s\",\"created\":%lld,\"model\":",
                       kind == FKV_API_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)id, object, (long long)created);
    fkv_textbuf_json_str(b, model, strlen(model));
}

static void usage_obj(fkv_textbuf *b, const fkv_api_usage *u)
{
    fkv_textbuf_printf(b,
                       "\"usage\":{\"prompt_tokens\":%llu,\"completion_tokens\":%llu,\"total_tokens\":%llu,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":%llu}}",
                       (unsigned long long)u->prompt_tokens, (unsigned long long)u->completion_tokens,
                       (unsigned long long)(u->prompt_tokens + u->completion_tokens),
                       (unsigned long long)u->cached_tokens);
}

/* Length of the valid UTF-8 character at s[0..n) (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF), 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) return 0;
    return len;
}

/* A token's text as a JSON string: its bytes, with U+FFFD for each byte
 * that is not part of a valid UTF-8 character (a token may end inside one). */
static void token_str(fkv_textbuf *b, const char *s, size_t n);

void fkv_api_json_text(fkv_textbuf *b, const char *s, size_t n)
{
    token_str(b, s, n);
}

static size_t utf8_len(const unsigned char *s, size_t n);

int fkv_api_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_len((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

static void token_str(fkv_textbuf *b, const char *s, size_t n)
{
    fkv_textbuf t;
    fkv_textbuf_init(&t);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (k) fkv_textbuf_append(&t, s + i, k), i += k;
        else fkv_textbuf_append(&t, "\xEF\xBF\xBD", 3), i++;
    }
    fkv_textbuf_json_str(b, t.data ? t.data : "", t.len);
    if (t.oom) b->oom = 1;
    fkv_textbuf_free(&t);
}

/* A log-probability as JSON: finite always (a token of probability 0
 * shows -9999.0, as vLLM writes -inf). */
static void lp_num(fkv_textbuf *b, float lp)
{
    if (!(lp > -9999.0f)) fkv_textbuf_puts(b, "-9999.0");
    else fkv_textbuf_printf(b, "%.9g", (double)lp);
}

static void chat_lp_token(fkv_textbuf *b, const char *pieces, uint32_t off, uint32_t len, float lp)
{
    fkv_textbuf_puts(b, "{\"token\":");
    token_str(b, pieces + off, len);
    fkv_textbuf_puts(b, ",\"logprob\":");
    lp_num(b, lp);
    fkv_textbuf_puts(b, ",\"bytes\":[");
    for (uint32_t i = 0; i < len; i++) fkv_textbuf_printf(b, "%s%u", i ? "," : "", (unsigned char)pieces[off + i]);
    fkv_textbuf_puts(b, "]");
}

void fkv_api_render_logprobs(fkv_textbuf *b, fkv_api_kind kind, const fkv_api_logprobs *lp)
{
    if (kind == FKV_API_CHAT) {
        fkv_textbuf_puts(b, "{\"content\":[");
        for (size_t i = 0; i < lp->n; i++) {
            const fkv_api_lp_entry *e = &lp->ent[i];
            if (i) fkv_textbuf_puts(b, ",");
            chat_lp_token(b, lp->pieces, e->piece_off, e->piece_len, e->logprob);
            fkv_textbuf_puts(b, ",\"top_logprobs\":[");
            for (uint32_t j = 0; j < e->n_top; j++) {
                const fkv_api_lp_top *t = &lp->top[e->top + j];
                if (j) fkv_textbuf_puts(b, ",");
                chat_lp_token(b, lp->pieces, t->piece_off, t->piece_len, t->logprob);
                fkv_textbuf_puts(b, "}");
            }
            fkv_textbuf_puts(b, "]}");
        }
        fkv_textbuf_puts(b, "]}");
        return;
    }
    /* completions (OpenAI's legacy format): top_logprobs is a {text:
     * logprob} object per token holding the N most likely and the sampled
     * one; a text two tokens share is listed once, with the likelier */
    fkv_textbuf_puts(b, "{\"tokens\":[");
    for (size_t i = 0; i < lp->n; i++) {
        if (i) fkv_textbuf_puts(b, ",");
        token_str(b, lp->pieces + lp->ent[i].piece_off, lp->ent[i].piece_len);
    }
    fkv_textbuf_puts(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        if (i) fkv_textbuf_puts(b, ",");
        lp_num(b, lp->ent[i].logprob);
    }
    fkv_textbuf_puts(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        const fkv_api_lp_entry *e = &lp->ent[i];
        fkv_textbuf_puts(b, i ? ",{" : "{");
        int sampled_seen = 0, k = 0;
        for (uint32_t j = 0; j <= e->n_top; j++) {
            /* the N alternatives, then the sampled token when not among them */
            const char *s;
            uint32_t len;
            float v;
            if (j < e->n_top) {
                const fkv_api_lp_top *t = &lp->top[e->top + j];
                s = lp->pieces + t->piece_off, len = t->piece_len, v = t->logprob;
                if (t->token == e->token) sampled_seen = 1;
            } else {
                if (sampled_seen) break;
                s = lp->pieces + e->piece_off, len = e->piece_len, v = e->logprob;
            }
            int dup = 0;
            for (uint32_t q = 0; q < j && q < e->n_top && !dup; q++) {
                const fkv_api_lp_top *t = &lp->top[e->top + q];
                dup = t->piece_len == len && !memcmp(lp->pieces + t->piece_off, s, len);
            }
            if (dup) continue;
            if (k++) fkv_textbuf_puts(b, ",");
            token_str(b, s, len);
            fkv_textbuf_puts(b, ":");
            lp_num(b, v);
        }
        fkv_textbuf_puts(b, "}");
    }
    fkv_textbuf_puts(b, "],\"text_offset\":[");
    for (size_t i = 0; i < lp->n; i++) fkv_textbuf_printf(b, "%s%u", i ? "," : "", lp->ent[i].text_offset);
    fkv_textbuf_puts(b, "]}");
}

static void finish_field(fkv_textbuf *b, fkv_api_kind kind, const char *finish, const fkv_api_logprobs *lp)
{
    fkv_textbuf_puts(b, ",\"logprobs\":");
    if (lp) fkv_api_render_logprobs(b, kind, lp);
    else fkv_textbuf_puts(b, "null");
    fkv_textbuf_puts(b, ",\"finish_reason\":");
    if (finish) fkv_textbuf_printf(b, "\"%s\"", finish);
    else fkv_textbuf_puts(b, "null");
    fkv_textbuf_puts(b, "}");
}

void fkv_api_render_completion(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                               uint32_t n, const char *const *texts, const size_t *text_lens,
                               const char *const *finish, const fkv_api_usage *usage, const fkv_api_logprobs *lps)
{
    head(b, kind, 0, id, created, model);
    fkv_textbuf_puts(b, ",\"choices\":[");
    for (uint32_t i = 0; i < n; i++) {
        fkv_textbuf_printf(b, "%s{\"index\":%u,", i ? "," : "", i);
        fkv_textbuf_puts(b, kind == FKV_API_CHAT ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"text\":");
        fkv_textbuf_json_str(b, texts[i] ? texts[i] : "", text_lens[i]);
        if (kind == FKV_API_CHAT) fkv_textbuf_puts(b, "}");
        finish_field(b, kind, finish[i], lps ? &lps[i] : NULL);
    }
    fkv_textbuf_puts(b, "],");
    usage_obj(b, usage);
    fkv_textbuf_puts(b, "}\n");
}

/* A chat delta: the role on a choice's first chunk, content while there is
 * text, and {} on the finishing chunk (as OpenAI sends it). */
static void chat_delta(fkv_textbuf *b, const char *role, const char *text, size_t len)
{
    fkv_textbuf_puts(b, "\"delta\":{");
    if (role) fkv_textbuf_printf(b, "\"role\":\"%s\",\"content\":", role);
    else if (len) fkv_textbuf_puts(b, "\"content\":");
    if (role || len) fkv_textbuf_json_str(b, text ? text : "", len);
    fkv_textbuf_puts(b, "}");
}

void fkv_api_render_chunk(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                          uint32_t index, const char *role, const char *text, size_t len, const char *finish,
                          const fkv_api_logprobs *lp)
{
    fkv_textbuf_puts(b, "data: ");
    head(b, kind, 1, id, created, model);
    fkv_textbuf_printf(b, ",\"choices\":[{\"index\":%u,", index);
    if (kind == FKV_API_CHAT) {
        chat_delta(b, role, text, len);
    } else {
        fkv_textbuf_puts(b, "\"text\":");
        fkv_textbuf_json_str(b, text, len);
    }
    finish_field(b, kind, finish, lp);
    fkv_textbuf_puts(b, "]}\n\n");
}

void fkv_api_render_usage_chunk(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                                const fkv_api_usage *usage)
{
    fkv_textbuf_puts(b, "data: ");
    head(b, kind, 1, id, created, model);
    fkv_textbuf_puts(b, ",\"choices\":[],");
    usage_obj(b, usage);
    fkv_textbuf_puts(b, "}\n\n");
}

void fkv_api_render_models(fkv_textbuf *b, const char *model, int64_t created, uint32_t max_context)
{
    fkv_textbuf_puts(b, "{\"object\":\"list\",\"data\":[{\"id\":");
    fkv_textbuf_json_str(b, model, strlen(model));
    fkv_textbuf_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"fairkv\",\"max_model_len\":%u}]}\n",
                       (long long)created, max_context);
}

/* ------------------------------------------------------------ llama-server's /tokenize, /detokenize */

/* Every key of root is one of names[n]; else a 400 naming it. */
static int only_fields(const cJSON *root, const char *const *names, size_t n, const char *what, fkv_api_error *err)
{
    for (const cJSON *it = root->child; it; it = it->next) {
        const char *k = it->string ? it->string : "";
        size_t i = 0;
        while (i < n && strcmp(names[i], k)) i++;
        if (i == n) {
            char name[32];
            snprintf(name, sizeof name, "%s", k);
            return BAD(name, "unsupported_field", "'%.64s' is not supported by this server on %s", k, what);
        }
    }
    return 0;
}

static cJSON *parse_object(const char *body, size_t len, fkv_api_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        (void)BAD("", "invalid_json", "the body is not valid JSON (error near byte %zu)", at);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        (void)BAD("", "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return root;
}

void fkv_api_tokenize_free(fkv_api_tokenize *t)
{
    free(t->content);
    memset(t, 0, sizeof *t);
}

int fkv_api_parse_tokenize(const char *body, size_t len, fkv_api_tokenize *out, fkv_api_error *err)
{
    static const char *const names[] = {"content", "add_special", "parse_special", "with_pieces"};
    memset(out, 0, sizeof *out);
    out->parse_special = 1;
    cJSON *root = parse_object(body, len, err);
    if (!root) return -1;
    int rc = only_fields(root, names, 4, "/tokenize", err);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!rc && !cJSON_IsString(c))
        rc = BAD("content", c ? "invalid_type" : "missing_field", "'content' must be a string");
    if (!rc && (get_bool(root, "add_special", &out->add_special, err) ||
                get_bool(root, "parse_special", &out->parse_special, err) ||
                get_bool(root, "with_pieces", &out->with_pieces, err)))
        rc = -1;
    if (!rc) {
        out->len = strlen(c->valuestring);
        if (!(out->content = dup_str(c->valuestring))) rc = OOM();
    }
    cJSON_Delete(root);
    if (rc) fkv_api_tokenize_free(out);
    return rc;
}

int fkv_api_parse_detokenize(const char *body, size_t len, uint32_t vocab, int32_t **tokens, size_t *n,
                             fkv_api_error *err)
{
    static const char *const names[] = {"tokens"};
    *tokens = NULL;
    *n = 0;
    cJSON *root = parse_object(body, len, err);
    if (!root) return -1;
    int rc = only_fields(root, names, 1, "/detokenize", err);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!rc && !cJSON_IsArray(t))
        rc = BAD("tokens", t ? "invalid_type" : "missing_field", "'tokens' must be an array of token ids");
    int k = rc ? 0 : cJSON_GetArraySize(t);
    if (!rc && k > 0 && !(*tokens = malloc(sizeof **tokens * (size_t)k))) rc = OOM();
    int i = 0;
    for (const cJSON *x = rc ? NULL : t->child; x && !rc; x = x->next, i++) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= vocab) {
            char name[32];
            snprintf(name, sizeof name, "tokens[%d]", i);
            rc = BAD(name, "invalid_value", "'tokens[%d]' is not a token id in [0, %u)", i, vocab);
        } else {
            (*tokens)[i] = (int32_t)x->valuedouble;
        }
    }
    cJSON_Delete(root);
    if (rc) {
        free(*tokens);
        *tokens = NULL;
        return -1;
    }
    *n = (size_t)k;
    return 0;
}
