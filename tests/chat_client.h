/* Shared by the chat server tests: POSTs and the fields of OpenAI-shaped
 * chat and completion answers, whole and streamed. */
#ifndef FKV_TEST_CHAT_CLIENT_H
#define FKV_TEST_CHAT_CLIENT_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "http_client.h"

static unsigned chat_port;

static const char *body_of(const http_resp *r)
{
    return r->body.data ? r->body.data : "";
}

static void post_to(http_resp *r, const char *path, const char *json)
{
    http_do(r, chat_port, "POST", path, json, strlen(json), NULL);
}

static void post_chat(http_resp *r, const char *json)
{
    post_to(r, "/v1/chat/completions", json);
}

/* One choice of a whole answer and the usage; text is message.content
 * (chat) or text (completions). */
typedef struct answer {
    int n_choices;
    char text[8][1024];
    char finish[8][16];
    char object[32], model[64];
    long prompt, completion, total, cached;
} answer;

static int parse_answer(const char *body, answer *a)
{
    memset(a, 0, sizeof *a);
    a->prompt = a->completion = a->total = a->cached = -1;
    cJSON *j = cJSON_Parse(body);
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(j, "object");
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    int ok = cJSON_IsString(ob) && cJSON_IsString(mo) && cJSON_IsArray(ch) && cJSON_IsObject(u);
    if (ok) {
        snprintf(a->object, sizeof a->object, "%s", ob->valuestring);
        snprintf(a->model, sizeof a->model, "%s", mo->valuestring);
    }
    int i = 0;
    for (const cJSON *c = ok ? ch->child : NULL; c && i < 8; c = c->next, i++) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c, "message");
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const cJSON *t = msg ? cJSON_GetObjectItemCaseSensitive(msg, "content") : cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(c, "index");
        if (!cJSON_IsString(t) || !cJSON_IsString(f) || !cJSON_IsNumber(ix) || ix->valueint != i ||
            (msg && !(cJSON_IsString(role) && !strcmp(role->valuestring, "assistant"))))
            ok = 0;
        else {
            snprintf(a->text[i], sizeof a->text[i], "%s", t->valuestring);
            snprintf(a->finish[i], sizeof a->finish[i], "%s", f->valuestring);
        }
    }
    a->n_choices = i;
    if (ok) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "cached_tokens");
        a->prompt = (long)cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")->valuedouble;
        a->completion = (long)cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble;
        a->total = (long)cJSON_GetObjectItemCaseSensitive(u, "total_tokens")->valuedouble;
        a->cached = cJSON_IsNumber(c) ? (long)c->valuedouble : -1;
    }
    cJSON_Delete(j);
    if (!ok) fprintf(stderr, "unexpected answer: %s\n", body);
    return ok;
}

/* A streamed chat: per choice the concatenated delta contents, whether its
 * first chunk (and only it) carried role "assistant", its finish reason;
 * the usage chunk's counts; and whether it ended with data: [DONE]. */
typedef struct chat_stream {
    int n_choices;
    char text[8][1024];
    char finish[8][16];
    int role_first[8], chunks[8];
    long completion, prompt;
    int done, bad;
} chat_stream;

static void parse_chat_stream(const char *b, chat_stream *s)
{
    memset(s, 0, sizeof *s);
    s->completion = s->prompt = -1;
    for (const char *p = b; (p = strstr(p, "data: ")); p += 6) {
        if (s->done) s->bad = 1; /* nothing after [DONE] */
        if (!strncmp(p + 6, "[DONE]\n\n", 8)) {
            s->done = 1;
            continue;
        }
        const char *end = strstr(p, "\n\n");
        if (!end) {
            s->bad = 1;
            break;
        }
        cJSON *j = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        const cJSON *ob = cJSON_GetObjectItemCaseSensitive(j, "object");
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
        if (!cJSON_IsString(ob) || strcmp(ob->valuestring, "chat.completion.chunk") || !cJSON_IsArray(ch)) s->bad = 1;
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        if (u) {
            s->completion = (long)cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble;
            s->prompt = (long)cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")->valuedouble;
        }
        for (const cJSON *c = ch ? ch->child : NULL; c; c = c->next) {
            int i = cJSON_GetObjectItemCaseSensitive(c, "index")->valueint;
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(c, "delta");
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(d, "role");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "content");
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
            if (i < 0 || i >= 8 || !cJSON_IsObject(d)) {
                s->bad = 1;
                continue;
            }
            if (i >= s->n_choices) s->n_choices = i + 1;
            if (role) s->role_first[i] = s->chunks[i] == 0 && cJSON_IsString(role) && !strcmp(role->valuestring, "assistant");
            if (cJSON_IsString(t)) strncat(s->text[i], t->valuestring, sizeof s->text[i] - strlen(s->text[i]) - 1);
            if (cJSON_IsString(f)) snprintf(s->finish[i], sizeof s->finish[i], "%s", f->valuestring);
            s->chunks[i]++;
        }
        cJSON_Delete(j);
    }
}

/* {"error":{...,"param":param,"code":code}} with a non-empty message. */
static int is_error(const http_resp *r, int status, const char *code, const char *param)
{
    cJSON *j = cJSON_Parse(body_of(r));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "param");
    int ok = r->status == status && cJSON_IsString(m) && m->valuestring[0] && cJSON_IsString(c) &&
             !strcmp(c->valuestring, code) && cJSON_IsString(p) && !strcmp(p->valuestring, param);
    if (!ok) fprintf(stderr, "expected %d %s on %s, got %ld: %s\n", status, code, param, r->status, body_of(r));
    cJSON_Delete(j);
    return ok;
}

#endif
