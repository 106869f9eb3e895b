/* The token generation backend behind `fairkv serve`.
 *
 * The HTTP layer knows nothing of models: it parses and validates requests,
 * asks the backend to tokenize string prompts, submits token prompts, and
 * renders what the backend's sink callbacks deliver.  A backend is a struct
 * of function pointers (like fkv_policy_ops) plus its own state; backends are
 * found by name in one registry table (backend.c).
 *
 * Threading rules (every backend must keep them; the server relies on them):
 *  - Every op may be called from any server thread at any time, concurrently,
 *    except destroy (called once, after drain, with no other op running).
 *  - Sink callbacks run on backend threads, never inside submit/cancel, and
 *    with no backend lock held, so a callback may take the server's own locks.
 *    The server never calls a backend op while holding a lock its callbacks
 *    take.
 *  - For a request whose submit returned FKV_OK the backend calls on_token
 *    zero or more times and then on_done exactly once; after on_done returns
 *    it never touches that sink again.  Callbacks of one request are never
 *    concurrent with each other.  When submit fails no callback is made.
 *  - cancel(id) of a live request makes on_done(FKV_FINISH_CANCELLED) come
 *    soon (within a step); of an unknown or finished id it does nothing.
 */
#ifndef FKV_SERVER_BACKEND_H
#define FKV_SERVER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "server/textbuf.h"

typedef struct fkv_gen_request {
    uint64_t id;             /* nonzero, unique among live requests (server-assigned) */
    const char *client;      /* fairness client id: the request's "user"; "" if none */
    const int32_t *prompt;   /* [n_prompt] token ids < vocab_size; copied by submit */
    uint32_t n_prompt;       /* >= 1 */
    uint32_t max_tokens;     /* >= 1: tokens to generate at most */
    double temperature;      /* >= 0; 0 = greedy */
    double top_p;            /* (0, 1] */
    uint64_t seed;           /* sampling RNG seed: same seed, same tokens */
    const char *cache_salt;  /* prefix-cache namespace, NULL = none (the tenant is `client`) */
    void *prefetched;        /* NULL, or what the backend's prefetch returned for this request */
    int logprobs;            /* 1: on_token gets each token's log-probability */
    uint32_t top_logprobs;   /* and this many alternatives (<= FKV_GEN_MAX_TOP) */
    int ignore_eos;          /* the end-of-sequence token does not end the request */
} fkv_gen_request;

#define FKV_GEN_MAX_TOP 20

/* A generated token's log-probability and its most likely alternatives,
 * from the model's own distribution: the log-softmax of the raw logits the
 * token was sampled from, before temperature and top_p (vLLM's default,
 * "raw_logprobs").  Pieces are token bytes, valid during the call. */
typedef struct fkv_gen_logprobs {
    float logprob;
    const char *piece; /* the token's own bytes (the text delivered may hold some back) */
    size_t piece_len;
    uint32_t n_top;    /* most likely first */
    int32_t top_token[FKV_GEN_MAX_TOP];
    float top_logprob[FKV_GEN_MAX_TOP];
    const char *top_piece[FKV_GEN_MAX_TOP];
    size_t top_piece_len[FKV_GEN_MAX_TOP];
} fkv_gen_logprobs;

/* Fills out's logprob, n_top = min(k, V, FKV_GEN_MAX_TOP), top_token and
 * top_logprob (ties: the lower id first) from logits[V] for `token`;
 * pieces are left to the caller.  Sums in double; -INFINITY logits are
 * tokens of probability 0. */
void fkv_gen_logprobs_compute(const float *logits, uint32_t V, int32_t token, uint32_t k, fkv_gen_logprobs *out);

typedef enum fkv_finish {
    FKV_FINISH_LENGTH = 0,    /* max_tokens reached ("length") */
    FKV_FINISH_STOP = 1,      /* end-of-sequence token ("stop") */
    FKV_FINISH_CANCELLED = 2, /* cancel() or backend shutdown */
    FKV_FINISH_ERROR = 3      /* the backend failed the request (message in `error`) */
} fkv_finish;

typedef struct fkv_gen_result {
    fkv_finish finish;
    uint32_t prompt_tokens;     /* tokens of the prompt */
    uint32_t completion_tokens; /* tokens delivered through on_token */
    uint32_t cached_tokens;     /* prompt tokens found in the prefix cache */
    const char *error;          /* FKV_FINISH_ERROR: why; valid during the call */
} fkv_gen_result;

typedef struct fkv_gen_sink {
    /* One generated token; text[0..len) is its UTF-8 piece (may be empty,
     * e.g. an incomplete multi-byte character held back by the detokenizer).
     * Valid during the call only.  lp: NULL unless the request asked for
     * logprobs. */
    void (*on_token)(void *ctx, int32_t token, const char *text, size_t len, const fkv_gen_logprobs *lp);
    void (*on_done)(void *ctx, const fkv_gen_result *res);
    void *ctx;
} fkv_gen_sink;

typedef struct fkv_backend_info {
    const char *model;         /* served model name (static while the backend lives) */
    uint32_t vocab_size;       /* token ids of prompts must be below this */
    uint32_t max_context;      /* prompt + max_tokens must not exceed this */
    uint32_t class_short_max;  /* request_type thresholds on prompt + max_tokens, */
    uint32_t class_medium_max; /*   the same as the cache's (fkv_eval_config) */
    uint32_t max_running;      /* requests generating at once at most (llama-server's total_slots) */
} fkv_backend_info;

typedef struct fkv_backend_chat {
    const char *template_text; /* tokenizer.chat_template (Jinja), NULL when the model has none */
    const char *bos, *eos;     /* token texts, "" when none; static while the backend lives */
} fkv_backend_chat;

#define FKV_BACKEND_MAX_QREASONS 8
typedef struct fkv_backend_stats {
    uint64_t running;            /* requests in the running batch */
    uint64_t waiting;            /* requests accepted and queued */
    uint64_t preemptions;        /* counter: running requests sent back to wait */
    uint64_t recomputed_tokens;  /* counter: evicted KV tokens computed again */
    /* counter: chunks quantized, by reason (names static) */
    const char *quant_reason[FKV_BACKEND_MAX_QREASONS];
    uint64_t quantizations[FKV_BACKEND_MAX_QREASONS];
    int n_quant_reasons;
} fkv_backend_stats;

typedef struct fkv_backend_ops {
    const char *name;
    /* required */
    void (*info)(void *be, fkv_backend_info *out);
    /* required: tokens of a UTF-8 prompt; *n gets the count, which may exceed
     * cap (then only cap were written and the caller retries larger). */
    fkv_status (*tokenize)(void *be, const char *text, size_t len, int32_t *out, uint32_t cap,
                           uint32_t *n);
    /* required: queues the request.  FKV_EFULL: queue full (server answers
     * 429); FKV_ESTATE: draining; FKV_EINVAL: bad request (err says why). */
    fkv_status (*submit)(void *be, const fkv_gen_request *req, const fkv_gen_sink *sink, char *err,
                         size_t errlen);
    void (*cancel)(void *be, uint64_t id);               /* required */
    void (*stats)(void *be, fkv_backend_stats *out);     /* required */
    /* may be NULL: the backend's own Prometheus text (its cache's metrics);
     * families the server already wrote are dropped from it. */
    void (*metrics)(void *be, fkv_textbuf *out);
    /* required: refuse new submits, wait (at most timeout_ns) until every
     * accepted request has finished; FKV_ESTATE if the wait timed out. */
    fkv_status (*drain)(void *be, int64_t timeout_ns);
    void (*destroy)(void *be); /* required: cancels what is left, frees */
    /* may be NULL (no template, no special tokens): the model's chat
     * template and the texts of its BOS and EOS tokens */
    void (*chat_info)(void *be, fkv_backend_chat *out);
    /* may be NULL (then tokenize is used): as tokenize, but texts of control
     * tokens in `text` ("<|im_start|>", "</s>") become those tokens; for the
     * prompts a chat template wrote */
    fkv_status (*tokenize_special)(void *be, const char *text, size_t len, int32_t *out, uint32_t cap,
                                   uint32_t *n);
    /* may be NULL (both): work for a request that may wait (the engine's
     * lookup of the prompt in a remote tier), done by the server in the
     * connection thread before admission and outside its admission lock, so
     * a slow lookup delays only its own request.  The result (NULL: none)
     * goes to every submit of the request's choices in
     * fkv_gen_request.prefetched (submit only reads it), then to release. */
    void *(*prefetch)(void *be, const fkv_gen_request *req);
    void (*release)(void *be, void *prefetched);
    /* required: the bytes of a token (its piece), written to out[0..cap);
     * returns the length, which may exceed cap (then the caller retries
     * larger); 0 for an id outside the vocabulary.  For /detokenize and
     * /tokenize's pieces: any thread, no lock taken. */
    size_t (*piece)(void *be, int32_t token, char *out, size_t cap);
    /* required: the text of a token sequence (tokenize's inverse: a space
     * the tokenizer put in front is removed; control tokens give no text),
     * written as piece; FKV_EINVAL for an id outside the vocabulary. */
    fkv_status (*detokenize)(void *be, const int32_t *tokens, size_t n, char *out, size_t cap, size_t *len);
} fkv_backend_ops;

typedef struct fkv_backend {
    const fkv_backend_ops *ops;
    void *impl;
} fkv_backend;

/* Backend factory signature: opts is a NULL-terminated list of "key=value"
 * strings (the CLI's --backend-opt); an unknown key is FKV_EINVAL. */
typedef fkv_status (*fkv_backend_create_fn)(const char *const *opts, fkv_backend *out, char *err,
                                            size_t errlen);

/* Creates the backend registered under `name`; FKV_ENOENT (err lists the
 * known names) when there is none. */
fkv_status fkv_backend_create(const char *name, const char *const *opts, fkv_backend *out, char *err,
                              size_t errlen);
void fkv_backend_destroy(fkv_backend *b);
/* NULL-terminated names of the registered backends. */
const char *const *fkv_backend_names(void);

/* The cache's Prometheus text, malloc'd and NUL-terminated (*len: its
 * length), or NULL (no memory, or the cache refused).  The text can grow
 * between the size query and the copy while other threads use the cache,
 * so it asks again until the copy fits. */
char *fkv_backend_cache_prometheus(fkv_cache *c, size_t *len);

/* The deterministic fake (backend_fake.c). */
fkv_status fkv_backend_fake_create(const char *const *opts, fkv_backend *out, char *err, size_t errlen);

#endif
