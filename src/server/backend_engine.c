/* The engine backend: `fairkv serve --model FILE` serves a GGUF Llama model
 * through the real engine (src/engine/engine.h).
 *  - One step thread owns the engine and its cache (not thread-safe): it
 *    steps while requests are live and sleeps on cv otherwise.  Other
 *    threads only queue into the engine (submit, cancel) and read the
 *    snapshot of its counters and cache metrics that the step thread
 *    refreshes under mu (every 100 ms while busy, and when idle).
 *  - Engine callbacks run on the step thread inside the step with no
 *    backend lock held; they call the server's sinks directly.
 *  - A cancelled request gets on_done(CANCELLED) right after the step;
 *    what the engine still produces for it is not delivered.
 *  - Token text passes the UTF-8 holdback (utf8_hold.h); request names map
 *    to ids in client_names.c; the remote tier is backend_remote.c's.
 * Why, and the remote tier's rules: docs/ARCHITECTURE.md, "The engine
 * backend". */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/steplog.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "server/backend.h"
#include "server/backend_engine_opts.h"
#include "server/backend_remote.h"
#include "server/client_names.h"
#include "server/utf8_hold.h"

typedef struct ereq {
    struct ereq *next;
    uint64_t id;           /* the server's id */
    uint64_t eid;          /* the engine's id */
    struct eng *b;
    fkv_gen_sink sink;
    uint32_t n_prompt, produced;
    uint32_t cached;       /* prompt tokens found in the prefix cache (set by the engine before its on_done) */
    int cancelled;         /* under b->mu */
    int delivered;         /* on_done sent (step thread only) */
    int stopped;           /* end-of-generation token met (step thread only) */
    fkv_utf8_hold hold;    /* a piece's incomplete last character (step thread only) */
    int logprobs;          /* the request asked for them: on_token gets them */
    uint32_t top_logprobs;
    fkv_eng_remote_req remote; /* its part of the remote tier (when there is one) */
} ereq;

typedef struct eng {
    fkv_llama *m;
    fkv_tokenizer *tok;
    fkv_engine *e;
    char model_name[128];
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* new work, cancel, stop */
    pthread_cond_t idle; /* a request finished (drain waits on it) */
    pthread_t thread;
    int stop, draining, broken;
    ereq *live;              /* every accepted request until the engine ends it */
    uint64_t n_live, n_started; /* n_started: live requests that have produced a token */
    uint64_t max_waiting;
    uint32_t max_running;    /* the engine's (fkv_engine_config.max_running) */
    int ignore_eos;
    fkv_client_names clients; /* fairness client ids of "user" strings (under mu) */
    /* snapshot (under mu) */
    fkv_engine_stats snap;
    char *metrics_text;
    size_t metrics_len;
    int64_t snap_ns;
    char *scratch;           /* step thread: text of one token */
    size_t scratch_cap;
    char lp_pieces[FKV_GEN_MAX_TOP + 1][256]; /* step thread: pieces of a token's logprobs */
    FILE *step_log;          /* --step-log: written by the step thread only */
    char *step_log_path;
    int64_t step_log_t0;     /* CLOCK_MONOTONIC ns when it was opened */
    fkv_eng_remote *remote;  /* the remote tier (NULL: none); opened before any thread starts */
} eng;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------ engine callbacks (step thread) */

static void unlink_live(eng *b, ereq *r)
{
    for (ereq **pp = &b->live; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

/* A token's piece into one of the step thread's logprob buffers (a piece
 * longer than 255 bytes, which no vocabulary has, is cut). */
static void lp_piece(eng *b, int slot, int32_t token, const char **p, size_t *len)
{
    size_t n = fkv_tok_piece(b->tok, token, b->lp_pieces[slot], sizeof b->lp_pieces[slot]);
    *p = b->lp_pieces[slot];
    *len = n < sizeof b->lp_pieces[slot] ? n : sizeof b->lp_pieces[slot] - 1;
}

/* engine on_token: the flags say whether the token stops the request (an
 * end-of-generation token: not shown) and whether it is the last (the
 * holdback flushes); nothing here re-decides either. */
static void cb_token(void *ctx, uint64_t id, uint32_t sample, int32_t token, const float *logits, uint32_t n_vocab,
                     unsigned flags)
{
    (void)id, (void)sample;
    ereq *r = ctx;
    eng *b = r->b;
    if (r->delivered) return;
    if (!r->produced) {
        pthread_mutex_lock(&b->mu);
        b->n_started++;
        pthread_mutex_unlock(&b->mu);
    }
    if (flags & FKV_ENGINE_TOKEN_STOP) {
        r->stopped = 1;
        r->produced++; /* counted for n_started bookkeeping only; not delivered */
        return;
    }
    char piece[1024];
    size_t pl = fkv_tok_piece(b->tok, token, piece, sizeof piece);
    if (pl >= sizeof piece) pl = sizeof piece - 1; /* no vocabulary has pieces this long */
    size_t need = 4 * (pl + 8);
    if (need > b->scratch_cap) {
        char *p = realloc(b->scratch, need);
        if (!p) return;
        b->scratch = p;
        b->scratch_cap = need;
    }
    r->produced++;
    size_t n = fkv_utf8_hold_feed(&r->hold, piece, pl, b->scratch, (flags & FKV_ENGINE_TOKEN_LAST) != 0);
    fkv_gen_logprobs lp;
    if (r->logprobs && logits) {
        /* the raw logits the token was drawn from (before temperature) */
        fkv_gen_logprobs_compute(logits, n_vocab, token, r->top_logprobs, &lp);
        lp_piece(b, FKV_GEN_MAX_TOP, token, &lp.piece, &lp.piece_len);
        for (uint32_t j = 0; j < lp.n_top; j++) lp_piece(b, (int)j, lp.top_token[j], &lp.top_piece[j], &lp.top_piece_len[j]);
    }
    r->sink.on_token(r->sink.ctx, token, b->scratch, n, r->logprobs && logits ? &lp : NULL);
}

static void finished(eng *b, ereq *r)
{
    pthread_mutex_lock(&b->mu);
    unlink_live(b, r);
    if (r->produced) b->n_started--;
    b->n_live--;
    pthread_cond_broadcast(&b->idle);
    pthread_mutex_unlock(&b->mu);
    free(r);
}

static void cb_done(void *ctx, uint64_t id, uint32_t sample, fkv_status st, uint32_t n_generated)
{
    (void)id, (void)sample, (void)n_generated;
    ereq *r = ctx;
    eng *b = r->b;
    if (!r->delivered) {
        r->delivered = 1;
        uint32_t delivered = r->produced - (r->stopped ? 1 : 0);
        fkv_gen_result res = {FKV_FINISH_LENGTH, r->n_prompt, delivered, r->cached, NULL};
        if (st != FKV_OK) {
            res.finish = FKV_FINISH_ERROR;
            res.error = st == FKV_EFULL ? "the request does not fit in the KV cache (--kv-budget)" : fkv_strerror(st);
        } else if (r->stopped) {
            res.finish = FKV_FINISH_STOP;
        }
        r->sink.on_done(r->sink.ctx, &res);
    }
    finished(b, r);
}

/* ------------------------------------------------------------ step thread */

/* engine on_step: one step log line (buffered; after the timed part) */
static void log_step(void *ctx, const fkv_engine_step_info *si)
{
    eng *b = ctx;
    fkv_step_rec r = {si->t0_ns - b->step_log_t0, si->tokens, si->n_items, si->attn_work, si->wall_ns,
                      {si->kv_read[0], si->kv_read[1], si->kv_read[2]}};
    fkv_steplog_write(b->step_log, &r);
}

static void snapshot(eng *b)
{
    fkv_engine_stats s;
    fkv_engine_stats_get(b->e, &s);
    size_t len = 0;
    char *text = fkv_backend_cache_prometheus(fkv_engine_cache(b->e), &len);
    pthread_mutex_lock(&b->mu);
    b->snap = s;
    if (text) {
        free(b->metrics_text);
        b->metrics_text = text;
        b->metrics_len = len;
    }
    b->snap_ns = now_ns();
    pthread_mutex_unlock(&b->mu);
}

/* Delivers on_done(CANCELLED) to cancelled requests (mu not held). */
static void deliver_cancels(eng *b, int all)
{
    for (;;) {
        ereq *r = NULL;
        pthread_mutex_lock(&b->mu);
        for (ereq *q = b->live; q && !r; q = q->next)
            if ((q->cancelled || all) && !q->delivered) r = q;
        if (r) r->delivered = 1; /* only this thread reads or writes it */
        pthread_mutex_unlock(&b->mu);
        if (!r) return;
        fkv_gen_result res = {FKV_FINISH_CANCELLED, r->n_prompt, r->produced - (r->stopped ? 1 : 0), 0, NULL};
        r->sink.on_done(r->sink.ctx, &res);
    }
}

/* The engine failed a step: its state is unknown, so every live request
 * ends with the error and new ones are refused. */
static void fail_all(eng *b, fkv_status st)
{
    char msg[400];
    snprintf(msg, sizeof msg, "engine step failed: %s: %s", fkv_strerror(st), fkv_engine_last_error(b->e));
    fprintf(stderr, "fairkv serve: %s\n", msg);
    for (;;) {
        ereq *r = NULL;
        pthread_mutex_lock(&b->mu);
        b->broken = 1;
        for (ereq *q = b->live; q && !r; q = q->next)
            if (!q->delivered) r = q;
        if (r) r->delivered = 1;
        pthread_mutex_unlock(&b->mu);
        if (!r) return;
        fkv_gen_result res = {FKV_FINISH_ERROR, r->n_prompt, r->produced, 0, msg};
        r->sink.on_done(r->sink.ctx, &res);
    }
}

static void *step_thread(void *arg)
{
    eng *b = arg;
    snapshot(b);
    pthread_mutex_lock(&b->mu);
    while (!b->stop) {
        if (!b->n_live || b->broken) {
            pthread_cond_wait(&b->cv, &b->mu);
            continue;
        }
        pthread_mutex_unlock(&b->mu);
        int busy = 0;
        fkv_status st = fkv_engine_step(b->e, &busy);
        if (st != FKV_OK) fail_all(b, st);
        deliver_cancels(b, 0);
        pthread_mutex_lock(&b->mu);
        int idle = !b->n_live;
        int64_t age = now_ns() - b->snap_ns;
        pthread_mutex_unlock(&b->mu);
        if (idle || age > 100000000) snapshot(b);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    /* shutdown: whatever is left ends as cancelled; the engine frees it */
    deliver_cancels(b, 1);
    return NULL;
}

/* ------------------------------------------------------------ the remote tier (backend_remote.c) */

static void *eng_prefetch(void *be, const fkv_gen_request *req)
{
    eng *b = be;
    return b->remote ? fkv_eng_remote_prefetch(b->remote, req) : NULL;
}

static void eng_release(void *be, void *prefetched)
{
    (void)be;
    fkv_eng_remote_release(prefetched);
}

/* engine on_export (step thread, at the request's end) */
static void cb_export(void *ctx, uint64_t id, const fkv_engine_export *x)
{
    (void)id;
    ereq *r = ctx;
    fkv_eng_remote_export(r->b->remote, &r->remote, x);
}

/* ------------------------------------------------------------ ops */

static void eng_info(void *be, fkv_backend_info *out)
{
    eng *b = be;
    out->model = b->model_name;
    out->vocab_size = b->m->hp.n_vocab;
    out->max_context = b->m->hp.ctx_len;
    out->class_short_max = 128; /* the cache's class rule (fkv_config defaults) */
    out->class_medium_max = 512;
    out->max_running = b->max_running;
}

/* The backend's token count from the tokenizer's. */
static fkv_status tok_count(fkv_status st, size_t got, uint32_t *n)
{
    if (st != FKV_OK) return st;
    if (got > UINT32_MAX) return FKV_EINVAL;
    *n = (uint32_t)got;
    return FKV_OK;
}

static fkv_status eng_tokenize(void *be, const char *text, size_t len, int32_t *out, uint32_t cap, uint32_t *n)
{
    eng *b = be;
    size_t got = 0;
    fkv_status st = fkv_tok_encode(b->tok, text, len, b->tok->add_bos, out, cap, &got);
    return tok_count(st, got, n); /* after the call: got is its result */
}

/* The same with control tokens' text turned into those tokens (chat turn markers). */
static fkv_status eng_tokenize_special(void *be, const char *text, size_t len, int32_t *out, uint32_t cap,
                                       uint32_t *n)
{
    eng *b = be;
    size_t got = 0;
    fkv_status st = fkv_tok_encode_special(b->tok, text, len, b->tok->add_bos, out, cap, &got);
    return tok_count(st, got, n);
}

static const char *token_text(const fkv_tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_vocab ? t->text[id] : "";
}

static void eng_chat_info(void *be, fkv_backend_chat *out)
{
    eng *b = be;
    const char *tmpl = NULL;
    char e[64];
    if (fkv_gguf_get_str(b->m->gguf, "tokenizer.chat_template", &tmpl, e, sizeof e) != FKV_OK) tmpl = NULL;
    out->template_text = tmpl;
    out->bos = token_text(b->tok, b->tok->bos);
    out->eos = token_text(b->tok, b->tok->eos);
}

static fkv_status eng_submit(void *be, const fkv_gen_request *req, const fkv_gen_sink *sink, char *err, size_t errlen)
{
    eng *b = be;
    if (!req->n_prompt || !req->max_tokens) {
        snprintf(err, errlen, "empty prompt or max_tokens 0");
        return FKV_EINVAL;
    }
    if ((uint64_t)req->n_prompt + req->max_tokens > b->m->hp.ctx_len) {
        snprintf(err, errlen, "prompt (%u tokens) + max_tokens (%u) exceed the model's context of %u", req->n_prompt,
                 req->max_tokens, b->m->hp.ctx_len);
        return FKV_EINVAL;
    }
    ereq *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return FKV_ENOMEM;
    }
    r->id = req->id;
    r->b = b;
    r->sink = *sink;
    r->n_prompt = req->n_prompt;
    r->logprobs = req->logprobs;
    r->top_logprobs = req->top_logprobs;
    fkv_engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt = req->prompt;
    q.n_prompt = req->n_prompt;
    q.max_tokens = req->max_tokens;
    q.temperature = (float)req->temperature;
    q.top_p = (float)req->top_p;
    q.seed = req->seed;
    q.n = 1; /* the server submits each of n choices on its own, with seed + i */
    /* the tokenizer's end-of-generation set ends it, unless ignore_eos */
    if (!b->ignore_eos && !req->ignore_eos) q.n_stop_tokens = fkv_tok_eog_ids(b->tok, q.stop_tokens, FKV_ENGINE_MAX_STOP);
    q.on_token = cb_token;
    q.on_done = cb_done;
    q.ctx = r;
    q.prefix_hit_out = &r->cached;
    if (b->remote) {
        const uint8_t *kv = fkv_eng_remote_begin(b->remote, req, &r->remote);
        if (kv) {
            q.import_kv = kv;
            q.import_tokens = r->remote.hit;
        }
        q.on_export = cb_export;
        q.export_from = r->remote.hit; /* already there */
    }
    fkv_status st = FKV_OK;
    pthread_mutex_lock(&b->mu);
    q.client = fkv_client_index(&b->clients, req->client);
    q.tenant = fkv_name_id("fairkv tenant", req->client);
    q.cache_salt = fkv_name_id("fairkv cache_salt", req->cache_salt);
    if (b->draining || b->stop || b->broken) {
        snprintf(err, errlen, b->broken ? "the engine failed; restart the server" : "the backend is draining");
        st = FKV_ESTATE;
    } else if (b->max_waiting && b->n_live - b->n_started >= b->max_waiting) {
        snprintf(err, errlen, "the backend queue is full (%llu waiting)",
                 (unsigned long long)(b->n_live - b->n_started));
        st = FKV_EFULL;
    } else if ((st = fkv_engine_submit(b->e, &q, &r->eid)) != FKV_OK) {
        snprintf(err, errlen, "engine: %s (a token id outside the vocabulary?)", fkv_strerror(st));
    } else {
        r->next = b->live;
        b->live = r;
        b->n_live++;
        pthread_cond_signal(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    if (st != FKV_OK) free(r);
    return st;
}

static void eng_cancel(void *be, uint64_t id)
{
    eng *b = be;
    pthread_mutex_lock(&b->mu);
    for (ereq *r = b->live; r; r = r->next)
        if (r->id == id && !r->cancelled) {
            r->cancelled = 1;
            fkv_engine_cancel(b->e, r->eid); /* ENOMEM: the tokens are computed and dropped */
        }
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void eng_stats(void *be, fkv_backend_stats *out)
{
    eng *b = be;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->mu);
    /* running: requests that have produced a token (preempted ones
     * included); waiting: accepted ones still before their first token */
    out->running = b->n_started;
    out->waiting = b->n_live - b->n_started;
    out->preemptions = b->snap.preemptions;
    out->recomputed_tokens = b->snap.recomputed_tokens;
    pthread_mutex_unlock(&b->mu);
}

static void eng_metrics(void *be, fkv_textbuf *out)
{
    eng *b = be;
    pthread_mutex_lock(&b->mu);
    if (b->metrics_text) fkv_textbuf_append(out, b->metrics_text, b->metrics_len);
    fkv_engine_stats s = b->snap;
    pthread_mutex_unlock(&b->mu);
    if (b->remote) fkv_eng_remote_metrics(b->remote, s.imported_tokens, out);
    fkv_textbuf_printf(out,
                       "# HELP fairkv_engine_steps_total Engine steps run\n# TYPE fairkv_engine_steps_total counter\n"
                       "fairkv_engine_steps_total %llu\n"
                       "# HELP fairkv_engine_tokens_total Tokens computed by the engine, by kind\n"
                       "# TYPE fairkv_engine_tokens_total counter\n"
                       "fairkv_engine_tokens_total{kind=\"prefill\"} %llu\n"
                       "fairkv_engine_tokens_total{kind=\"decode\"} %llu\n"
                       "fairkv_engine_tokens_total{kind=\"recomputed\"} %llu\n"
                       "# HELP fairkv_engine_timed_steps_total Engine steps with work\n"
                       "# TYPE fairkv_engine_timed_steps_total counter\n"
                       "fairkv_engine_timed_steps_total %llu\n"
                       "# HELP fairkv_engine_step_seconds_total Wall time inside engine steps with work\n"
                       "# TYPE fairkv_engine_step_seconds_total counter\n"
                       "fairkv_engine_step_seconds_total %.6f\n"
                       "# HELP fairkv_engine_batch_tokens_total New and recomputed tokens of all steps\n"
                       "# TYPE fairkv_engine_batch_tokens_total counter\n"
                       "fairkv_engine_batch_tokens_total %llu\n"
                       "# HELP fairkv_engine_attention_work_total Attention work of all steps, as the cost "
                       "profile counts it (query x context tokens)\n"
                       "# TYPE fairkv_engine_attention_work_total counter\n"
                       "fairkv_engine_attention_work_total %.0f\n",
                       (unsigned long long)s.steps, (unsigned long long)s.prefill_tokens,
                       (unsigned long long)s.decode_tokens, (unsigned long long)s.recomputed_tokens,
                       (unsigned long long)s.timed_steps, (double)s.step_ns / 1e9, (unsigned long long)s.batch_tokens,
                       s.attn_work);
}

static void deadline_after(struct timespec *ts, int64_t ns)
{
    clock_gettime(CLOCK_REALTIME, ts);
    int64_t t = (int64_t)ts->tv_nsec + ns;
    ts->tv_sec += (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
}

static fkv_status eng_drain(void *be, int64_t timeout_ns)
{
    eng *b = be;
    struct timespec ts;
    deadline_after(&ts, timeout_ns);
    pthread_mutex_lock(&b->mu);
    b->draining = 1;
    int rc = 0;
    while (b->n_live && !b->broken && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&b->idle, &b->mu, &ts);
    fkv_status st = b->n_live && !b->broken ? FKV_ESTATE : FKV_OK;
    pthread_mutex_unlock(&b->mu);
    return st;
}

static void eng_free(eng *b)
{
    fkv_engine_destroy(b->e); /* pending requests end without callbacks */
    fkv_eng_remote_close(b->remote); /* after the engine: its step thread puts */
    while (b->live) {
        ereq *r = b->live;
        b->live = r->next;
        free(r);
    }
    fkv_client_names_free(&b->clients);
    fkv_tokenizer_free(b->tok);
    fkv_llama_free(b->m);
    free(b->metrics_text);
    free(b->scratch);
    if (b->step_log && (ferror(b->step_log) | fclose(b->step_log)))
        fprintf(stderr, "fairkv serve: step log %s: write error\n", b->step_log_path);
    free(b->step_log_path);
    free(b);
}

static void eng_destroy(void *be)
{
    eng *b = be;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    pthread_cond_destroy(&b->idle);
    eng_free(b);
}

static size_t eng_piece(void *be, int32_t token, char *out, size_t cap)
{
    eng *b = be;
    return fkv_tok_piece(b->tok, token, out, cap);
}

static fkv_status eng_detokenize(void *be, const int32_t *tokens, size_t n, char *out, size_t cap, size_t *len)
{
    eng *b = be;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= b->tok->n_vocab) return FKV_EINVAL;
    return fkv_tok_decode(b->tok, tokens, n, out, cap, len);
}

static const fkv_backend_ops eng_ops = {
    "engine",  eng_info,    eng_tokenize, eng_submit,    eng_cancel,
    eng_stats, eng_metrics, eng_drain,    eng_destroy,   eng_chat_info,
    eng_tokenize_special, eng_prefetch, eng_release, eng_piece, eng_detokenize,
};

fkv_status fkv_backend_engine_create(const char *const *opts, fkv_backend *out, char *err, size_t errlen)
{
    fkv_engine_config cfg;
    char model[1024] = "";
    fkv_engine_backend_opts bo;
    fkv_status st = fkv__engine_opts_parse(opts, &cfg, model, sizeof model, &bo, err, errlen);
    if (st != FKV_OK) return st;
    if (!model[0]) {
        snprintf(err, errlen, "engine backend: no model (fairkv serve --model FILE.gguf)");
        return FKV_EINVAL;
    }
    eng *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "engine backend: out of memory");
        return FKV_ENOMEM;
    }
    b->max_waiting = bo.max_waiting;
    b->max_running = cfg.max_running;
    b->ignore_eos = bo.ignore_eos;
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    snprintf(b->model_name, sizeof b->model_name, "%.120s", base); /* a served name, not a path */
    size_t bl = strlen(b->model_name);
    if (bl > 5 && !strcmp(b->model_name + bl - 5, ".gguf")) b->model_name[bl - 5] = 0;
    char e2[400] = "";
    if ((st = fkv_llama_load(model, &b->m, e2, sizeof e2)) != FKV_OK) {
        snprintf(err, errlen, "engine backend: %s", e2[0] ? e2 : fkv_strerror(st));
        eng_free(b);
        return st;
    }
    if (bo.ctx && fkv_llama_set_ctx(b->m, bo.ctx) == 1)
        fprintf(stderr,
                "fairkv serve: warning: --ctx %u exceeds the model's trained context length %u "
                "(llama.context_length); positions beyond it were never trained\n",
                bo.ctx, b->m->hp.ctx_train);
    if ((st = fkv_tokenizer_from_gguf(b->m->gguf, &b->tok, e2, sizeof e2)) != FKV_OK) {
        snprintf(err, errlen, "engine backend: %s: tokenizer: %s", model, e2[0] ? e2 : fkv_strerror(st));
        eng_free(b);
        return st;
    }
    if (bo.step_log) {
        b->step_log_path = strdup(bo.step_log);
        if ((st = fkv_steplog_open(bo.step_log, &b->step_log, e2, sizeof e2)) != FKV_OK || !b->step_log_path) {
            snprintf(err, errlen, "engine backend: step_log: %s", e2);
            eng_free(b);
            return st ? st : FKV_ENOMEM;
        }
        b->step_log_t0 = now_ns();
        cfg.on_step = log_step;
        cfg.step_ctx = b;
    }
    if ((st = fkv_engine_create(b->m, &cfg, &b->e, e2, sizeof e2)) != FKV_OK) {
        snprintf(err, errlen, "engine backend: %s", e2[0] ? e2 : fkv_strerror(st));
        eng_free(b);
        return st;
    }
    if (bo.remote &&
        (st = fkv_eng_remote_open(&bo, &cfg, b->e, b->m, model, b->model_name, &b->remote, err, errlen)) != FKV_OK) {
        eng_free(b);
        return st;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    pthread_cond_init(&b->idle, NULL);
    if (pthread_create(&b->thread, NULL, step_thread, b)) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        pthread_cond_destroy(&b->idle);
        eng_free(b);
        snprintf(err, errlen, "engine backend: cannot start its thread");
        return FKV_ENOMEM;
    }
    out->ops = &eng_ops;
    out->impl = b;
    return FKV_OK;
}
