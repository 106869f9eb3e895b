/* Completions and chat completions of `fairkv serve`: admission (the queue
 * limit), the bridge from backend sink callbacks to blocking or streamed
 * (SSE) answers, and stop sequences.
 *
 * Stop sequences: a choice's text is scanned as tokens arrive; at the first
 * stop the text is cut before it, the choice ends with "stop" and the
 * connection thread cancels its backend request (not the sink: backend ops
 * are never called from callbacks).  A stream holds back a tail that could
 * still become a stop, so no stop text ever reaches the client.
 *
 * Lifetimes: a completion's state (`gen`) is shared by the connection thread
 * and the backend's sink callbacks; it is reference counted (one for the HTTP
 * side, one per submitted choice) and freed by whoever drops the last one.
 * Lock order: gen.mu, then the metrics lock; no backend op is ever called
 * with gen.mu held (backend.h's threading rules). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fairkv_eval.h"
#include "server/http_internal.h"

typedef struct choice {
    fkv_textbuf text;     /* the text so far (unused by a completion stream without stops) */
    size_t sent;          /* streamed: bytes of text already sent */
    int stopped;          /* a stop sequence ended it; later tokens are dropped */
    int stop_cancelled;   /* the connection thread has cancelled it after the stop */
    uint64_t backend_id;
    uint32_t tokens;
    int64_t t_last;       /* ns of the last token */
    int done;
    fkv_finish finish;
    uint32_t prompt_tokens, cached_tokens;
    char error[160];
    /* logprobs, when asked: one entry per delivered token, in order */
    fkv_api_lp_entry *lp_ent;
    size_t lp_n, lp_cap;
    fkv_api_lp_top *lp_top;
    size_t lp_ntop, lp_topcap;
    fkv_textbuf lp_pieces; /* the entries' token bytes */
    size_t lp_sent;        /* streamed: entries already sent */
    size_t text_total;     /* bytes of text the tokens delivered (text_offset of the next) */
    int lp_oom;
} choice;

typedef struct gen gen;
typedef struct sink_ctx {
    gen *g;
    uint32_t index;
} sink_ctx;

struct gen {
    fkv_server *srv;
    gen *next_live, **prev_live; /* fkv_server.gens, under its mu */
    char *user;                  /* the request's "user" (GET /slots) */
    uint32_t n_prompt, max_tokens;
    double temperature, top_p;
    uint32_t top_logprobs;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a token, a finish, or the end */
    int refs;
    uint64_t id;
    int64_t created;    /* unix seconds */
    int64_t t0;         /* ns: the request arrived */
    int64_t t_progress; /* ns: last token or finish (the no-progress timeout) */
    int cls;
    uint32_t n, n_done, n_submitted;
    int stream, include_usage, first_token_seen;
    int logprobs; /* the request asked for them */
    fkv_api_kind kind;
    char *stop[FKV_API_MAX_STOP]; /* owned copies of the request's */
    size_t stop_len[FKV_API_MAX_STOP];
    uint32_t n_stop;
    size_t stop_max;    /* the longest stop's length */
    choice *ch;         /* [n] */
    sink_ctx *sinks;    /* [n] */
    fkv_textbuf out;    /* SSE bytes not yet given to the connection */
    int ended;          /* "data: [DONE]" queued */
};

static int64_t now_ns(void)
{
    return fkv_monotonic_now_ns();
}

static const char *finish_name(fkv_finish f)
{
    switch (f) {
    case FKV_FINISH_LENGTH: return "length";
    case FKV_FINISH_STOP: return "stop";
    case FKV_FINISH_CANCELLED: return "cancelled";
    default: return "error";
    }
}

/* ------------------------------------------------------------ gen state */

static void gen_release(gen *g)
{
    pthread_mutex_lock(&g->mu);
    int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left) return;
    fkv_server *s = g->srv;
    /* unlinked before it is freed: GET /slots reads live gens under s->mu */
    pthread_mutex_lock(&s->mu);
    if (g->prev_live) {
        *g->prev_live = g->next_live;
        if (g->next_live) g->next_live->prev_live = g->prev_live;
    }
    pthread_mutex_unlock(&s->mu);
    free(g->user);
    for (uint32_t i = 0; i < g->n; i++) {
        fkv_textbuf_free(&g->ch[i].text);
        fkv_textbuf_free(&g->ch[i].lp_pieces);
        free(g->ch[i].lp_ent);
        free(g->ch[i].lp_top);
    }
    for (uint32_t i = 0; i < g->n_stop; i++) free(g->stop[i]);
    fkv_textbuf_free(&g->out);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->ch);
    free(g->sinks);
    free(g);
    pthread_mutex_lock(&s->mu);
    s->live_gens--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

static void usage_of(const gen *g, fkv_api_usage *u)
{
    memset(u, 0, sizeof *u);
    /* the prompt is counted once, as OpenAI does for n > 1 */
    for (uint32_t i = 0; i < g->n; i++) u->completion_tokens += g->ch[i].tokens;
    u->prompt_tokens = g->n ? g->ch[0].prompt_tokens : 0;
    u->cached_tokens = g->n ? g->ch[0].cached_tokens : 0;
}

/* Where the first stop sequence starting at or after `from` begins, or -1. */
static long find_stop(const gen *g, const char *s, size_t len, size_t from)
{
    for (size_t at = from; at < len; at++)
        for (uint32_t k = 0; k < g->n_stop; k++)
            if (g->stop_len[k] <= len - at && !memcmp(s + at, g->stop[k], g->stop_len[k])) return (long)at;
    return -1;
}

/* Bytes at the end of s that are the start of some stop sequence (they may
 * still become one, so a stream does not send them yet). */
static size_t stop_holdback(const gen *g, const char *s, size_t len)
{
    size_t best = 0;
    for (uint32_t k = 0; k < g->n_stop; k++)
        for (size_t m = g->stop_len[k] - 1; m > best; m--)
            if (m <= len && !memcmp(s + len - m, g->stop[k], m)) {
                best = m;
                break;
            }
    return best;
}

/* ------------------------------------------------------------ logprobs */

/* Records a delivered token's logprobs in choice ch (gen.mu held); its
 * text starts at ch->text_total. */
static void lp_add(choice *ch, const fkv_gen_logprobs *lp)
{
    if (ch->lp_n == ch->lp_cap) {
        size_t cap = ch->lp_cap ? 2 * ch->lp_cap : 16;
        fkv_api_lp_entry *e = realloc(ch->lp_ent, cap * sizeof *e);
        if (!e) {
            ch->lp_oom = 1;
            return;
        }
        ch->lp_ent = e, ch->lp_cap = cap;
    }
    if (ch->lp_ntop + lp->n_top > ch->lp_topcap) {
        size_t cap = ch->lp_topcap ? 2 * ch->lp_topcap : 64;
        while (cap < ch->lp_ntop + lp->n_top) cap *= 2;
        fkv_api_lp_top *t = realloc(ch->lp_top, cap * sizeof *t);
        if (!t) {
            ch->lp_oom = 1;
            return;
        }
        ch->lp_top = t, ch->lp_topcap = cap;
    }
    fkv_api_lp_entry *e = &ch->lp_ent[ch->lp_n++];
    e->piece_off = (uint32_t)ch->lp_pieces.len;
    e->piece_len = (uint32_t)lp->piece_len;
    fkv_textbuf_append(&ch->lp_pieces, lp->piece, lp->piece_len);
    e->logprob = lp->logprob;
    e->token = -1;
    e->text_offset = (uint32_t)ch->text_total;
    e->top = (uint32_t)ch->lp_ntop;
    e->n_top = lp->n_top;
    for (uint32_t j = 0; j < lp->n_top; j++) {
        fkv_api_lp_top *t = &ch->lp_top[ch->lp_ntop++];
        t->piece_off = (uint32_t)ch->lp_pieces.len;
        t->piece_len = (uint32_t)lp->top_piece_len[j];
        t->logprob = lp->top_logprob[j];
        t->token = lp->top_token[j];
        fkv_textbuf_append(&ch->lp_pieces, lp->top_piece[j], lp->top_piece_len[j]);
    }
    if (ch->lp_pieces.oom) ch->lp_oom = 1;
}

/* Entries [from, from + n) of choice ch as a logprobs view. */
static fkv_api_logprobs lp_view(const choice *ch, size_t from, size_t n)
{
    fkv_api_logprobs v = {ch->lp_ent ? ch->lp_ent + from : NULL, n, ch->lp_top, ch->lp_pieces.data ? ch->lp_pieces.data : ""};
    return v;
}

/* Entries whose text starts before byte `end` of the choice's text (all
 * when `all`): the tokens a cut at a stop sequence keeps. */
static size_t lp_upto(const choice *ch, size_t end, int all)
{
    size_t k = 0;
    while (k < ch->lp_n && (all || ch->lp_ent[k].text_offset < end)) k++;
    return k;
}

/* Streams text[sent..upto) of choice i as one chunk, with the logprobs of
 * the tokens whose text starts in it (gen.mu held). */
static void send_text(gen *g, uint32_t i, size_t upto)
{
    choice *ch = &g->ch[i];
    if (upto <= ch->sent) return;
    fkv_api_logprobs v;
    if (g->logprobs) {
        size_t k = lp_upto(ch, upto, 0);
        v = lp_view(ch, ch->lp_sent, k > ch->lp_sent ? k - ch->lp_sent : 0);
        ch->lp_sent = k > ch->lp_sent ? k : ch->lp_sent;
    }
    fkv_api_render_chunk(&g->out, g->kind, g->id, g->created, g->srv->info.model, i, NULL, ch->text.data + ch->sent,
                         upto - ch->sent, NULL, g->logprobs ? &v : NULL);
    ch->sent = upto;
}

/* A token's text joins choice i: cut at a stop sequence, and in a stream
 * send what can no longer turn into one (gen.mu held). */
static void add_text(gen *g, uint32_t i, const char *text, size_t len)
{
    choice *ch = &g->ch[i];
    size_t from = ch->text.len + 1 > g->stop_max ? ch->text.len + 1 - g->stop_max : 0;
    fkv_textbuf_append(&ch->text, text, len);
    long at = g->n_stop && ch->text.data ? find_stop(g, ch->text.data, ch->text.len, from) : -1;
    if (at >= 0) {
        ch->text.len = (size_t)at;
        ch->text.data[at] = 0;
        ch->stopped = 1;
    }
    if (g->stream)
        send_text(g, i, ch->stopped ? ch->text.len : ch->text.len - stop_holdback(g, ch->text.data, ch->text.len));
}

static void on_token(void *ctx, int32_t token, const char *text, size_t len, const fkv_gen_logprobs *lp)
{
    sink_ctx *sc = ctx;
    gen *g = sc->g;
    int64_t t = now_ns();
    pthread_mutex_lock(&g->mu);
    choice *ch = &g->ch[sc->index];
    if (ch->stopped) { /* the tokens that came before the cancel took effect */
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (!g->first_token_seen) {
        g->first_token_seen = 1;
        fkv_server_metrics_ttft(g->srv->metrics, g->cls, (double)(t - g->t0) * 1e-9);
    }
    if (ch->tokens) fkv_server_metrics_itl(g->srv->metrics, g->cls, (double)(t - ch->t_last) * 1e-9);
    ch->t_last = t;
    ch->tokens++;
    g->t_progress = t;
    if (g->logprobs && lp) {
        lp_add(ch, lp);
        if (ch->lp_n) ch->lp_ent[ch->lp_n - 1].token = token;
    }
    ch->text_total += len;
    if (g->stream && !g->n_stop && g->kind == FKV_API_COMPLETION) {
        fkv_api_logprobs v;
        if (g->logprobs) v = lp_view(ch, ch->lp_sent, ch->lp_n - ch->lp_sent), ch->lp_sent = ch->lp_n;
        fkv_api_render_chunk(&g->out, g->kind, g->id, g->created, g->srv->info.model, sc->index, NULL, text, len,
                             NULL, g->logprobs ? &v : NULL);
    } else {
        add_text(g, sc->index, text, len);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void on_done(void *ctx, const fkv_gen_result *res)
{
    sink_ctx *sc = ctx;
    gen *g = sc->g;
    int64_t t = now_ns();
    pthread_mutex_lock(&g->mu);
    choice *ch = &g->ch[sc->index];
    /* a stop sequence's cancel is a normal end */
    fkv_finish finish = ch->stopped ? FKV_FINISH_STOP : res->finish;
    ch->done = 1;
    ch->finish = finish;
    ch->prompt_tokens = res->prompt_tokens;
    ch->cached_tokens = res->cached_tokens;
    if (res->error) snprintf(ch->error, sizeof ch->error, "%s", res->error);
    g->n_done++;
    g->t_progress = t;
    fkv_server_metrics_finished(g->srv->metrics, finish, res->prompt_tokens, res->completion_tokens);
    if (g->n_done == g->n_submitted && g->n_submitted == g->n)
        fkv_server_metrics_e2e(g->srv->metrics, g->cls, (double)(t - g->t0) * 1e-9);
    if (g->stream) {
        if (finish == FKV_FINISH_ERROR) {
            fkv_api_error e;
            fkv_api_error_set(&e, 500, "server_error", "backend_error", "", "choice %u failed: %s", sc->index,
                              ch->error);
            fkv_textbuf_puts(&g->out, "data: ");
            fkv_api_render_error(&g->out, &e);
            fkv_textbuf_puts(&g->out, "\n");
        } else {
            send_text(g, sc->index, ch->text.len); /* a held-back tail that never became a stop */
            /* tokens whose text was all held back, and never cut by a stop */
            fkv_api_logprobs v;
            if (g->logprobs) {
                size_t k = lp_upto(ch, ch->text.len, !ch->stopped);
                v = lp_view(ch, ch->lp_sent, k > ch->lp_sent ? k - ch->lp_sent : 0);
                ch->lp_sent = k > ch->lp_sent ? k : ch->lp_sent;
            }
            fkv_api_render_chunk(&g->out, g->kind, g->id, g->created, g->srv->info.model, sc->index, NULL, "", 0,
                                 finish_name(finish), g->logprobs && v.n ? &v : NULL);
        }
        if (g->n_done == g->n) {
            if (g->include_usage) {
                fkv_api_usage u;
                usage_of(g, &u);
                fkv_api_render_usage_chunk(&g->out, g->kind, g->id, g->created, g->srv->info.model, &u);
            }
            fkv_textbuf_puts(&g->out, "data: [DONE]\n\n");
            g->ended = 1;
        }
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    gen_release(g);
}

/* Cancels the choices still running (gen.mu not held: cancel is a backend op). */
static void gen_cancel(gen *g)
{
    uint64_t ids[64];
    uint32_t k = 0;
    pthread_mutex_lock(&g->mu);
    for (uint32_t i = 0; i < g->n_submitted && k < 64; i++)
        if (!g->ch[i].done) ids[k++] = g->ch[i].backend_id;
    pthread_mutex_unlock(&g->mu);
    for (uint32_t i = 0; i < k; i++) g->srv->be->ops->cancel(g->srv->be->impl, ids[i]);
}

/* Cancels the backend requests of choices a stop sequence ended (gen.mu
 * held on entry and exit, released around the backend calls). */
static void gen_cancel_stopped(gen *g)
{
    uint64_t ids[64];
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n_submitted && k < 64; i++) {
        choice *ch = &g->ch[i];
        if (ch->stopped && !ch->stop_cancelled && !ch->done) ids[k++] = ch->backend_id, ch->stop_cancelled = 1;
    }
    if (!k) return;
    pthread_mutex_unlock(&g->mu);
    for (uint32_t i = 0; i < k; i++) g->srv->be->ops->cancel(g->srv->be->impl, ids[i]);
    pthread_mutex_lock(&g->mu);
}

/* Waits (gen.mu held) one bounded slice for news; returns 1 when the request
 * made no progress for request_timeout_ns or the server is stopping. */
static int gen_wait_slice(gen *g)
{
    gen_cancel_stopped(g);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000; /* 200 ms: how soon a stop is noticed */
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    pthread_mutex_unlock(&g->mu);
    int stop = fkv__server_stopping(g->srv);
    pthread_mutex_lock(&g->mu);
    return stop || now_ns() - g->t_progress > g->srv->cfg.request_timeout_ns;
}

/* SSE body: hands out the bytes the sinks rendered, blocking until there are some. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    gen *g = cls;
    int gave_up = 0;
    pthread_mutex_lock(&g->mu);
    gen_cancel_stopped(g);
    while (!g->out.len && !g->ended && !gave_up) gave_up = gen_wait_slice(g);
    ssize_t n;
    if (g->out.len) {
        size_t k = g->out.len < max ? g->out.len : max;
        memcpy(buf, g->out.data, k);
        fkv_textbuf_consume(&g->out, k);
        n = (ssize_t)k;
    } else {
        n = g->ended ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* The stream is over (sent, or the client went away): cancel what still runs. */
static void sse_free(void *cls)
{
    gen *g = cls;
    gen_cancel(g);
    gen_release(g);
}

/* ------------------------------------------------------------ completions */

static int class_of(const fkv_server *s, uint64_t total)
{
    if (total < s->info.class_short_max) return FKV_CLASS_SHORT;
    if (total <= s->info.class_medium_max) return FKV_CLASS_MEDIUM;
    return FKV_CLASS_LONG;
}

/* Tokenizes a string prompt with the backend, two passes when long.  A chat
 * prompt's turn markers are the model's special tokens, so it is read with
 * tokenize_special when the backend has it. */
static int tokenize(fkv_server *s, fkv_api_request *r, fkv_api_error *e)
{
    int chat = r->kind == FKV_API_CHAT;
    fkv_status (*tok)(void *, const char *, size_t, int32_t *, uint32_t, uint32_t *) =
        chat && s->be->ops->tokenize_special ? s->be->ops->tokenize_special : s->be->ops->tokenize;
    uint32_t cap = (uint32_t)(r->prompt_text_len < 4096 ? r->prompt_text_len + 1 : 4096), n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *t = malloc(sizeof *t * cap);
        if (!t) {
            fkv_api_error_set(e, 500, "server_error", "out_of_memory", "", "out of memory");
            return -1;
        }
        fkv_status st = tok(s->be->impl, r->prompt_text, r->prompt_text_len, t, cap, &n);
        if (st != FKV_OK) {
            free(t);
            fkv_api_error_set(e, 400, "invalid_request_error", "invalid_value", chat ? "messages" : "prompt",
                              "the prompt could not be tokenized: %s", fkv_strerror(st));
            return -1;
        }
        if (n <= cap) {
            r->prompt = t;
            r->n_prompt = n;
            if (r->max_tokens_auto && n < s->lim.max_context) r->max_tokens = s->lim.max_context - n;
            return fkv_api_check_prompt(r, n, &s->lim, e);
        }
        free(t);
        if (n > s->lim.max_prompt) /* too long whatever its exact count */
            return fkv_api_check_prompt(r, n, &s->lim, e);
        cap = n;
    }
    fkv_api_error_set(e, 500, "server_error", "tokenizer", "prompt", "the tokenizer's count changed between calls");
    return -1;
}

static gen *gen_new(fkv_server *s, const fkv_api_request *r, int64_t t0)
{
    gen *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ch = calloc(r->n, sizeof *g->ch);
    g->sinks = calloc(r->n, sizeof *g->sinks);
    if (!g->ch || !g->sinks) {
        free(g->ch);
        free(g->sinks);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->srv = s;
    g->refs = 1;
    g->n = r->n;
    g->stream = r->stream;
    g->include_usage = r->include_usage;
    g->logprobs = r->logprobs;
    g->kind = r->kind;
    for (uint32_t i = 0; i < r->n_stop; i++) {
        if (!(g->stop[i] = strdup(r->stop[i]))) break;
        g->stop_len[i] = strlen(g->stop[i]);
        if (g->stop_len[i] > g->stop_max) g->stop_max = g->stop_len[i];
        g->n_stop++;
    }
    g->t0 = t0;
    g->t_progress = now_ns();
    g->created = (int64_t)time(NULL);
    g->cls = class_of(s, (uint64_t)r->n_prompt + r->max_tokens);
    fkv_textbuf_init(&g->out);
    g->user = strdup(r->user ? r->user : "");
    g->n_prompt = r->n_prompt;
    g->max_tokens = r->max_tokens;
    g->temperature = r->temperature;
    g->top_p = r->top_p;
    g->top_logprobs = r->top_logprobs;
    pthread_mutex_lock(&s->mu);
    s->live_gens++;
    g->next_live = s->gens;
    if (s->gens) s->gens->prev_live = &g->next_live;
    s->gens = g;
    g->prev_live = &s->gens;
    g->id = ++s->next_id;
    for (uint32_t i = 0; i < r->n; i++) {
        g->ch[i].backend_id = ++s->next_id;
        g->sinks[i].g = g;
        g->sinks[i].index = i;
    }
    pthread_mutex_unlock(&s->mu);
    /* a chat stream opens every choice with the assistant's role */
    for (uint32_t i = 0; g->stream && g->kind == FKV_API_CHAT && i < g->n; i++)
        fkv_api_render_chunk(&g->out, g->kind, g->id, g->created, s->info.model, i, "assistant", "", 0, NULL, NULL);
    if (g->n_stop < r->n_stop || !g->user) {
        gen_release(g);
        return NULL;
    }
    return g;
}

/* Queue check and submission of all n choices, as one step under admit_mu. */
static int admit_locked(fkv_server *s, gen *g, const fkv_api_request *r, void *pf, fkv_api_error *e)
{
    pthread_mutex_lock(&s->admit_mu);
    fkv_backend_stats bs;
    s->be->ops->stats(s->be->impl, &bs);
    /* a request is admitted while fewer than max_queue choices wait, so an
     * n > 1 request is not refused by a queue that is merely short */
    if (bs.waiting >= s->cfg.max_queue) {
        pthread_mutex_unlock(&s->admit_mu);
        fkv_api_error_set(e, 429, "rate_limit_error", "queue_full", "",
                          "the server queue is full (%llu waiting, limit %u); retry later",
                          (unsigned long long)bs.waiting, s->cfg.max_queue);
        return -1;
    }
    fkv_status st = FKV_OK;
    char err[160] = "";
    for (uint32_t i = 0; i < r->n; i++) {
        fkv_gen_request q = {g->ch[i].backend_id, r->user, r->prompt, r->n_prompt, r->max_tokens,
                             r->temperature,      r->top_p, r->has_seed ? r->seed + i : g->ch[i].backend_id,
                             r->cache_salt, pf, r->logprobs, r->top_logprobs, r->ignore_eos};
        fkv_gen_sink sink = {on_token, on_done, &g->sinks[i]};
        pthread_mutex_lock(&g->mu);
        g->refs++; /* the sink's reference, dropped by on_done */
        pthread_mutex_unlock(&g->mu);
        st = s->be->ops->submit(s->be->impl, &q, &sink, err, sizeof err);
        if (st != FKV_OK) {
            pthread_mutex_lock(&g->mu);
            g->refs--;
            pthread_mutex_unlock(&g->mu);
            break;
        }
        pthread_mutex_lock(&g->mu);
        g->n_submitted++;
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&s->admit_mu);
    if (st == FKV_OK) return 0;
    gen_cancel(g); /* the choices already queued */
    if (st == FKV_EFULL)
        fkv_api_error_set(e, 429, "rate_limit_error", "queue_full", "", "the backend queue is full: %s", err);
    else if (st == FKV_ESTATE)
        fkv_api_error_set(e, 503, "server_error", "draining", "", "the server is shutting down: %s", err);
    else if (st == FKV_EINVAL)
        fkv_api_error_set(e, 400, "invalid_request_error", "invalid_value", "", "%s", err);
    else
        fkv_api_error_set(e, 500, "server_error", "backend_error", "", "the backend failed: %s", err);
    return -1;
}

static int admit(fkv_server *s, gen *g, const fkv_api_request *r, fkv_api_error *e)
{
    /* before the lock: a backend's prefetch may wait (a remote lookup) */
    void *pf = NULL;
    if (s->be->ops->prefetch) {
        fkv_gen_request q0 = {0, r->user, r->prompt, r->n_prompt, r->max_tokens, r->temperature, r->top_p, 0,
                              r->cache_salt, NULL, r->logprobs, r->top_logprobs, r->ignore_eos};
        pf = s->be->ops->prefetch(s->be->impl, &q0);
    }
    int rc = admit_locked(s, g, r, pf, e);
    if (pf) s->be->ops->release(s->be->impl, pf);
    return rc;
}

/* A non-streamed answer: waits for every choice, then renders. */
static enum MHD_Result answer_whole(fkv_server *s, struct MHD_Connection *c, gen *g)
{
    int gave_up = 0;
    pthread_mutex_lock(&g->mu);
    while (g->n_done < g->n && !gave_up) gave_up = gen_wait_slice(g);
    pthread_mutex_unlock(&g->mu);
    if (gave_up) {
        gen_cancel(g);
        pthread_mutex_lock(&g->mu); /* cancelled choices finish within a step */
        for (int i = 0; i < 50 && g->n_done < g->n; i++) gen_wait_slice(g);
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_lock(&g->mu);
    enum MHD_Result rc;
    const char *errmsg = NULL;
    for (uint32_t i = 0; i < g->n; i++) {
        if (!g->ch[i].done || g->ch[i].finish == FKV_FINISH_ERROR) errmsg = g->ch[i].done ? g->ch[i].error : "timed out";
        if (g->ch[i].lp_oom) errmsg = "out of memory for logprobs";
    }
    if (errmsg) {
        fkv_api_error e;
        fkv_api_error_set(&e, 500, "server_error", "backend_error", "", "generation failed: %s", errmsg);
        pthread_mutex_unlock(&g->mu);
        rc = fkv__http_send_error(s, c, &e);
    } else {
        const char *texts[64];
        size_t lens[64];
        const char *fin[64];
        fkv_api_logprobs lps[64];
        fkv_api_usage u;
        usage_of(g, &u);
        for (uint32_t i = 0; i < g->n && i < 64; i++) {
            const choice *ch = &g->ch[i];
            texts[i] = ch->text.data;
            lens[i] = ch->text.len;
            fin[i] = finish_name(ch->finish);
            lps[i] = lp_view(ch, 0, lp_upto(ch, ch->text.len, !ch->stopped));
        }
        fkv_textbuf b;
        fkv_textbuf_init(&b);
        fkv_api_render_completion(&b, g->kind, g->id, g->created, s->info.model, g->n < 64 ? g->n : 64, texts, lens,
                                  fin, &u, g->logprobs ? lps : NULL);
        pthread_mutex_unlock(&g->mu);
        rc = fkv__http_send_json(c, 200, &b);
        fkv_textbuf_free(&b);
    }
    gen_release(g);
    return rc;
}

/* The chat prompt: the messages through the server's template, ending with
 * the assistant's header.  BOS is left to the tokenizer. */
static int chat_prompt(fkv_server *s, fkv_api_request *r, fkv_api_error *e)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_chat_tokens tok = {"", s->chat_eos};
    if (fkv_chat_template_apply(s->chat_tmpl, r->messages, r->n_messages, 1, &tok, &b) || b.oom || !b.len) {
        fkv_textbuf_free(&b);
        fkv_api_error_set(e, 400, "invalid_request_error", "invalid_value", "messages",
                          "the messages give an empty prompt under the '%s' chat template",
                          fkv_chat_template_name(s->chat_tmpl));
        return -1;
    }
    r->prompt_text = b.data; /* handed over, NUL-terminated */
    r->prompt_text_len = b.len;
    return 0;
}

static enum MHD_Result handle(fkv_server *s, struct MHD_Connection *c, conn *cn, fkv_api_kind kind)
{
    fkv_api_error e;
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    if (!draining) s->in_flight++, cn->counted = 1;
    pthread_mutex_unlock(&s->mu);
    if (draining) {
        fkv_api_error_set(&e, 503, "server_error", "draining", "", "the server is shutting down");
        return fkv__http_send_error(s, c, &e);
    }
    fkv_api_request r;
    const char *body = cn->body.data ? cn->body.data : "";
    if ((kind == FKV_API_CHAT ? fkv_api_parse_chat : fkv_api_parse_completion)(body, cn->body.len, &s->lim, &r, &e))
        return fkv__http_send_error(s, c, &e);
    if ((kind == FKV_API_CHAT && chat_prompt(s, &r, &e)) || (r.prompt_text && tokenize(s, &r, &e))) {
        fkv_api_request_free(&r);
        return fkv__http_send_error(s, c, &e);
    }
    gen *g = gen_new(s, &r, cn->t0);
    if (!g) {
        fkv_api_request_free(&r);
        fkv_api_error_set(&e, 500, "server_error", "out_of_memory", "", "out of memory");
        return fkv__http_send_error(s, c, &e);
    }
    int rc = admit(s, g, &r, &e);
    fkv_api_request_free(&r);
    if (rc) {
        gen_release(g);
        return fkv__http_send_error(s, c, &e);
    }
    if (!g->stream) return answer_whole(s, c, g);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, g, sse_free);
    if (!resp) {
        sse_free(g);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result q = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return q;
}

enum MHD_Result fkv__completions(fkv_server *s, struct MHD_Connection *c, conn *cn)
{
    return handle(s, c, cn, FKV_API_COMPLETION);
}

enum MHD_Result fkv__chat_completions(fkv_server *s, struct MHD_Connection *c, conn *cn)
{
    return handle(s, c, cn, FKV_API_CHAT);
}

/* The chat template: --chat-template, else the one the model's
 * tokenizer.chat_template text is recognized as, else the default (with a
 * warning when the model has a template this server cannot read). */
int fkv__chat_setup(fkv_server *s, const char *name, char *err, size_t errlen)
{
    fkv_backend_chat bc = {NULL, "", ""};
    if (s->be->ops->chat_info) s->be->ops->chat_info(s->be->impl, &bc);
    /* the EOS text only turns into the EOS token when the tokenizer reads specials */
    s->chat_eos = s->be->ops->tokenize_special && bc.eos ? bc.eos : "";
    if (name && *name) {
        if ((s->chat_tmpl = fkv_chat_template_by_name(name)) == FKV_CHAT_UNKNOWN) {
            snprintf(err, errlen, "--chat-template '%s' is not one of: %s", name, fkv_chat_template_list());
            return -1;
        }
        return 0;
    }
    s->chat_tmpl = fkv_chat_template_detect(bc.template_text);
    if (s->chat_tmpl == FKV_CHAT_UNKNOWN) {
        if (bc.template_text && *bc.template_text)
            fprintf(stderr,
                    "fairkv serve: warning: the model's chat template is none of %s; using %s "
                    "(choose one with --chat-template)\n",
                    fkv_chat_template_list(), fkv_chat_template_name(FKV_CHAT_DEFAULT));
        s->chat_tmpl = FKV_CHAT_DEFAULT;
    }
    return 0;
}

/* GET /slots, llama-server's shape where it maps: fairkv has no fixed
 * slots (continuous batching), so each running choice is one entry; a
 * choice is "waiting" (queued or in its prompt) until its first token,
 * then "generating".  The prompt counts as processed at the first token:
 * chunked prefill progress is the engine's and not seen here. */
void fkv__slots_render(fkv_server *s, fkv_textbuf *b)
{
    fkv_textbuf_puts(b, "[");
    int k = 0;
    pthread_mutex_lock(&s->mu); /* then each gen's mu: nothing takes s->mu holding a gen's */
    for (gen *g = s->gens; g; g = g->next_live) {
        pthread_mutex_lock(&g->mu);
        for (uint32_t i = 0; i < g->n_submitted; i++) {
            const choice *ch = &g->ch[i];
            if (ch->done) continue;
            fkv_textbuf_printf(b,
                               "%s{\"id\":%llu,\"id_task\":%llu,\"index\":%u,\"n_ctx\":%u,\"is_processing\":true,"
                               "\"state\":\"%s\",\"user\":",
                               k++ ? "," : "", (unsigned long long)ch->backend_id, (unsigned long long)g->id, i,
                               s->info.max_context, ch->tokens ? "generating" : "waiting");
            fkv_textbuf_json_str(b, g->user, strlen(g->user));
            fkv_textbuf_printf(b,
                               ",\"n_prompt_tokens\":%u,\"n_prompt_tokens_processed\":%u,\"n_decoded\":%u,"
                               "\"next_token\":{\"has_next_token\":true,\"n_remain\":%u,\"n_decoded\":%u},"
                               "\"params\":{\"n_predict\":%u,\"temperature\":%g,\"top_p\":%g,\"stream\":%s,"
                               "\"n_probs\":%u}}",
                               g->n_prompt, ch->tokens ? g->n_prompt : 0, ch->tokens,
                               g->max_tokens > ch->tokens ? g->max_tokens - ch->tokens : 0, ch->tokens, g->max_tokens,
                               g->temperature, g->top_p, g->stream ? "true" : "false", g->top_logprobs);
        }
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&s->mu);
    fkv_textbuf_puts(b, "]\n");
}
