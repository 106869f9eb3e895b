/* The OpenAI-compatible wire format of `fairkv serve`: request parsing and
 * validation, error bodies, completion and SSE chunk rendering.  Pure
 * functions over buffers: no sockets, no backend. */
#ifndef FKV_SERVER_API_H
#define FKV_SERVER_API_H

#include <stddef.h>
#include <stdint.h>

#include "server/chat_template.h"
#include "server/textbuf.h"

/* What a request may ask for. */
typedef struct fkv_api_limits {
    uint32_t max_prompt;  /* tokens; also checked after tokenizing a string prompt */
    uint32_t vocab_size;  /* token ids of an array prompt must be below this */
    uint32_t max_context; /* prompt + max_tokens */
    uint32_t max_n;       /* choices per request */
    const char *model;    /* the served model name; "model", when given, must equal it */
} fkv_api_limits;

/* Which endpoint a request came to: it decides the fields and the answer's shape. */
typedef enum fkv_api_kind { FKV_API_COMPLETION = 0, FKV_API_CHAT = 1 } fkv_api_kind;

#define FKV_API_MAX_STOP 4 /* stop sequences per request, as OpenAI's */

typedef struct fkv_api_request {
    char *model;          /* owned */
    int32_t *prompt;      /* owned, [n_prompt]: an array prompt, or NULL */
    uint32_t n_prompt;
    char *prompt_text;    /* owned: a string prompt (tokenized by the backend), or NULL */
    size_t prompt_text_len;
    uint32_t max_tokens;  /* default 16, as OpenAI's */
    double temperature;   /* default 1 */
    double top_p;         /* default 1 */
    uint64_t seed;
    int has_seed;
    uint32_t n;           /* default 1 */
    int stream;
    int include_usage;    /* stream_options.include_usage */
    char *user;           /* owned: the fairness client id and tenant, "" if absent */
    char *cache_salt;     /* owned: prefix-cache namespace (vLLM's cache_salt), NULL if absent */
    fkv_api_kind kind;
    int max_tokens_auto;  /* chat without max_tokens: the rest of the context (set after tokenizing) */
    char *stop[FKV_API_MAX_STOP]; /* owned, non-empty: text that ends a choice (not included) */
    uint32_t n_stop;
    fkv_chat_msg *messages; /* chat: owned, contents owned; [n_messages] */
    uint32_t n_messages;
    int logprobs;           /* completions: "logprobs" given (an integer); chat: "logprobs": true */
    uint32_t top_logprobs;  /* alternatives per token: completions' "logprobs" N, chat's "top_logprobs" */
    int ignore_eos;         /* generation goes on past the end-of-sequence token */
} fkv_api_request;

#define FKV_API_MAX_LOGPROBS 20 /* top_logprobs at most, as OpenAI's chat API (and vLLM's default) */

/* The log-probabilities of a choice's tokens, for rendering.  Token texts
 * are byte ranges of `pieces`; entry i's alternatives are top[ent[i].top ..
 * ent[i].top + ent[i].n_top), most likely first. */
typedef struct fkv_api_lp_top {
    uint32_t piece_off, piece_len;
    float logprob;
    int32_t token;
} fkv_api_lp_top;

typedef struct fkv_api_lp_entry {
    uint32_t piece_off, piece_len; /* the token's own bytes */
    float logprob;
    int32_t token;
    uint32_t text_offset;          /* where its text starts in the choice's text (completions' text_offset) */
    uint32_t top, n_top;
} fkv_api_lp_entry;

typedef struct fkv_api_logprobs {
    const fkv_api_lp_entry *ent;
    size_t n;
    const fkv_api_lp_top *top;
    const char *pieces;
} fkv_api_logprobs;

/* An error answer: HTTP status and the OpenAI error object's fields. */
typedef struct fkv_api_error {
    int http;            /* 400, 401, 404, 405, 413, 429, 500, 503 */
    const char *type;    /* "invalid_request_error", ... (static) */
    const char *code;    /* machine-readable code (static), or NULL */
    char param[32];      /* the offending field, "" for none */
    char message[256];
} fkv_api_error;

void fkv_api_error_set(fkv_api_error *e, int http, const char *type, const char *code, const char *param,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Parses and validates a /v1/completions body.  0 on success (free with
 * fkv_api_request_free), -1 with *err filled (the request is freed). */
int fkv_api_parse_completion(const char *body, size_t len, const fkv_api_limits *lim, fkv_api_request *out,
                             fkv_api_error *err);
/* Parses and validates a /v1/chat/completions body (messages instead of a
 * prompt; max_completion_tokens as max_tokens).  Same contract. */
int fkv_api_parse_chat(const char *body, size_t len, const fkv_api_limits *lim, fkv_api_request *out,
                       fkv_api_error *err);
void fkv_api_request_free(fkv_api_request *r);
/* Checks a tokenized prompt against the limits (after tokenizing a string). */
int fkv_api_check_prompt(const fkv_api_request *r, uint32_t n_prompt, const fkv_api_limits *lim,
                         fkv_api_error *err);

/* {"error":{"message":..,"type":..,"param":..,"code":..}} */
void fkv_api_render_error(fkv_textbuf *b, const fkv_api_error *e);

typedef struct fkv_api_usage {
    uint64_t prompt_tokens, completion_tokens, cached_tokens;
} fkv_api_usage;

/* A whole completion (a chat.completion for FKV_API_CHAT).  texts[i] /
 * text_lens[i] / finish[i] for choice i; lps NULL ("logprobs": null) or
 * lps[i] for choice i. */
void fkv_api_render_completion(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                               uint32_t n, const char *const *texts, const size_t *text_lens,
                               const char *const *finish, const fkv_api_usage *usage, const fkv_api_logprobs *lps);
/* One SSE event "data: {...}\n\n" for choice `index`; finish NULL while
 * tokens are still coming.  Chat chunks carry text as delta.content and,
 * with `role`, the delta's role (the first chunk of a choice).  lp: the
 * chunk's tokens' log-probabilities, or NULL ("logprobs": null). */
void fkv_api_render_chunk(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                          uint32_t index, const char *role, const char *text, size_t len, const char *finish,
                          const fkv_api_logprobs *lp);
/* A logprobs object alone: completions' {"tokens", "token_logprobs",
 * "top_logprobs", "text_offset"}, chat's {"content": [{"token", "logprob",
 * "bytes", "top_logprobs"}]}.  Token texts that are not valid UTF-8 (a
 * piece of a multi-byte character) show U+FFFD for the bad bytes; chat's
 * "bytes" keep them exact. */
void fkv_api_render_logprobs(fkv_textbuf *b, fkv_api_kind kind, const fkv_api_logprobs *lp);
/* The final usage event (choices empty), sent when include_usage is set. */
void fkv_api_render_usage_chunk(fkv_textbuf *b, fkv_api_kind kind, uint64_t id, int64_t created, const char *model,
                                const fkv_api_usage *usage);
/* A token's or a text's bytes as a JSON string, U+FFFD for each byte that
 * is not part of a valid UTF-8 character. */
void fkv_api_json_text(fkv_textbuf *b, const char *s, size_t n);
/* 1 when s[0..n) is valid UTF-8 (RFC 3629). */
int fkv_api_utf8_valid(const char *s, size_t n);

/* POST /tokenize (llama-server's): {"content": string, "add_special":
 * bool (false), "parse_special": bool (true), "with_pieces": bool (false)}. */
typedef struct fkv_api_tokenize {
    char *content; /* owned */
    size_t len;
    int add_special, parse_special, with_pieces;
} fkv_api_tokenize;
int fkv_api_parse_tokenize(const char *body, size_t len, fkv_api_tokenize *out, fkv_api_error *err);
void fkv_api_tokenize_free(fkv_api_tokenize *t);
/* POST /detokenize: {"tokens": [ids below vocab]}; *tokens owned (free()),
 * NULL when n is 0. */
int fkv_api_parse_detokenize(const char *body, size_t len, uint32_t vocab, int32_t **tokens, size_t *n,
                             fkv_api_error *err);

void fkv_api_render_models(fkv_textbuf *b, const char *model, int64_t created, uint32_t max_context);

#endif
