/* HTTP front of `fairkv serve` (libmicrohttpd): routing, authentication,
 * body limits, admission (queue limit), and the bridge from backend sink
 * callbacks to blocking or streamed (SSE) responses.
 *
 * Lifetimes: a completion's state (`gen`) is shared by the connection thread
 * and the backend's sink callbacks; it is reference counted (one for the HTTP
 * side, one per submitted choice) and freed by whoever drops the last one.
 * Lock order: gen.mu, then the metrics lock; no backend op is ever called
 * with gen.mu held (backend.h's threading rules). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/api.h"
#include "server/metrics_http.h"
#include "server/server.h"

struct fkv_server {
    fkv_server_config cfg;
    char *api_key;
    fkv_backend *be;
    fkv_backend_info info;
    fkv_api_limits lim;
    struct MHD_Daemon *d;
    uint16_t port;
    fkv_server_metrics *metrics;
    pthread_mutex_t mu;  /* in_flight, draining, stopping, next_id */
    pthread_cond_t idle; /* in_flight reached 0 */
    pthread_mutex_t admit_mu; /* queue check + submit are one step */
    uint64_t in_flight;
    uint64_t live_gens; /* gen objects not yet freed (sinks may still call them) */
    uint64_t next_id;
    int draining, stopping;
    int64_t started_s;
};

typedef struct choice {
    fkv_textbuf text;     /* non-streamed: the text so far */
    uint64_t backend_id;
    uint32_t tokens;
    int64_t t_last;       /* ns of the last token */
    int done;
    fkv_finish finish;
    uint32_t prompt_tokens, cached_tokens;
    char error[160];
} choice;

typedef struct gen gen;
typedef struct sink_ctx {
    gen *g;
    uint32_t index;
} sink_ctx;

struct gen {
    fkv_server *srv;
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
    choice *ch;         /* [n] */
    sink_ctx *sinks;    /* [n] */
    fkv_textbuf out;    /* SSE bytes not yet given to the connection */
    int ended;          /* "data: [DONE]" queued */
};

typedef struct conn {
    fkv_textbuf body;
    int too_large;
    int counted; /* holds one in_flight */
    int64_t t0;
} conn;

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

/* ------------------------------------------------------------ responses */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *data,
                                 size_t len, unsigned retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (retry_after) {
        char s[16];
        snprintf(s, sizeof s, "%u", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, s);
    }
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, fkv_textbuf *b)
{
    if (b->oom) return send_text(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}\n", 38, 0);
    return send_text(c, status, "application/json", b->data ? b->data : "", b->len, 0);
}

static enum MHD_Result send_error(fkv_server *s, struct MHD_Connection *c, const fkv_api_error *e)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_api_render_error(&b, e);
    fkv_server_metrics_http_error(s->metrics, e->http);
    enum MHD_Result rc = b.oom ? MHD_NO
                               : send_text(c, (unsigned)e->http, "application/json", b.data, b.len,
                                           e->http == 429 || e->http == 503 ? s->cfg.retry_after_s : 0);
    fkv_textbuf_free(&b);
    return rc;
}

/* ------------------------------------------------------------ gen state */

static void gen_release(gen *g)
{
    pthread_mutex_lock(&g->mu);
    int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left) return;
    fkv_server *s = g->srv;
    for (uint32_t i = 0; i < g->n; i++) fkv_textbuf_free(&g->ch[i].text);
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

static void on_token(void *ctx, int32_t token, const char *text, size_t len)
{
    (void)token;
    sink_ctx *sc = ctx;
    gen *g = sc->g;
    int64_t t = now_ns();
    pthread_mutex_lock(&g->mu);
    choice *ch = &g->ch[sc->index];
    if (!g->first_token_seen) {
        g->first_token_seen = 1;
        fkv_server_metrics_ttft(g->srv->metrics, g->cls, (double)(t - g->t0) * 1e-9);
    }
    if (ch->tokens) fkv_server_metrics_itl(g->srv->metrics, g->cls, (double)(t - ch->t_last) * 1e-9);
    ch->t_last = t;
    ch->tokens++;
    g->t_progress = t;
    if (g->stream) fkv_api_render_chunk(&g->out, g->id, g->created, g->srv->info.model, sc->index, text, len, NULL);
    else fkv_textbuf_append(&ch->text, text, len);
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
    ch->done = 1;
    ch->finish = res->finish;
    ch->prompt_tokens = res->prompt_tokens;
    ch->cached_tokens = res->cached_tokens;
    if (res->error) snprintf(ch->error, sizeof ch->error, "%s", res->error);
    g->n_done++;
    g->t_progress = t;
    fkv_server_metrics_finished(g->srv->metrics, res->finish, res->prompt_tokens, res->completion_tokens);
    if (g->n_done == g->n_submitted && g->n_submitted == g->n)
        fkv_server_metrics_e2e(g->srv->metrics, g->cls, (double)(t - g->t0) * 1e-9);
    if (g->stream) {
        if (res->finish == FKV_FINISH_ERROR) {
            fkv_api_error e;
            fkv_api_error_set(&e, 500, "server_error", "backend_error", "", "choice %u failed: %s", sc->index,
                              ch->error);
            fkv_textbuf_puts(&g->out, "data: ");
            fkv_api_render_error(&g->out, &e);
            fkv_textbuf_puts(&g->out, "\n");
        } else {
            fkv_api_render_chunk(&g->out, g->id, g->created, g->srv->info.model, sc->index, "", 0,
                                 finish_name(res->finish));
        }
        if (g->n_done == g->n) {
            if (g->include_usage) {
                fkv_api_usage u;
                usage_of(g, &u);
                fkv_api_render_usage_chunk(&g->out, g->id, g->created, g->srv->info.model, &u);
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

static int server_stopping(fkv_server *s)
{
    pthread_mutex_lock(&s->mu);
    int v = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* Waits (gen.mu held) one bounded slice for news; returns 1 when the request
 * made no progress for request_timeout_ns or the server is stopping. */
static int gen_wait_slice(gen *g)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000; /* 200 ms: how soon a stop is noticed */
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    pthread_mutex_unlock(&g->mu);
    int stop = server_stopping(g->srv);
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

/* Tokenizes a string prompt with the backend, two passes when long. */
static int tokenize(fkv_server *s, fkv_api_request *r, fkv_api_error *e)
{
    uint32_t cap = (uint32_t)(r->prompt_text_len < 4096 ? r->prompt_text_len + 1 : 4096), n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *t = malloc(sizeof *t * cap);
        if (!t) {
            fkv_api_error_set(e, 500, "server_error", "out_of_memory", "", "out of memory");
            return -1;
        }
        fkv_status st = s->be->ops->tokenize(s->be->impl, r->prompt_text, r->prompt_text_len, t, cap, &n);
        if (st != FKV_OK) {
            free(t);
            fkv_api_error_set(e, 400, "invalid_request_error", "invalid_value", "prompt",
                              "the prompt could not be tokenized: %s", fkv_strerror(st));
            return -1;
        }
        if (n <= cap) {
            r->prompt = t;
            r->n_prompt = n;
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
    g->t0 = t0;
    g->t_progress = now_ns();
    g->created = (int64_t)time(NULL);
    g->cls = class_of(s, (uint64_t)r->n_prompt + r->max_tokens);
    fkv_textbuf_init(&g->out);
    pthread_mutex_lock(&s->mu);
    s->live_gens++;
    g->id = ++s->next_id;
    for (uint32_t i = 0; i < r->n; i++) {
        g->ch[i].backend_id = ++s->next_id;
        g->sinks[i].g = g;
        g->sinks[i].index = i;
    }
    pthread_mutex_unlock(&s->mu);
    return g;
}

/* Queue check and submission of all n choices, as one step under admit_mu. */
static int admit(fkv_server *s, gen *g, const fkv_api_request *r, fkv_api_error *e)
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
                             r->temperature,      r->top_p, r->has_seed ? r->seed + i : g->ch[i].backend_id};
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
    for (uint32_t i = 0; i < g->n; i++)
        if (!g->ch[i].done || g->ch[i].finish == FKV_FINISH_ERROR) errmsg = g->ch[i].done ? g->ch[i].error : "timed out";
    if (errmsg) {
        fkv_api_error e;
        fkv_api_error_set(&e, 500, "server_error", "backend_error", "", "generation failed: %s", errmsg);
        pthread_mutex_unlock(&g->mu);
        rc = send_error(s, c, &e);
    } else {
        const char *texts[64];
        size_t lens[64];
        const char *fin[64];
        fkv_api_usage u;
        usage_of(g, &u);
        for (uint32_t i = 0; i < g->n && i < 64; i++) {
            texts[i] = g->ch[i].text.data;
            lens[i] = g->ch[i].text.len;
            fin[i] = finish_name(g->ch[i].finish);
        }
        fkv_textbuf b;
        fkv_textbuf_init(&b);
        fkv_api_render_completion(&b, g->id, g->created, s->info.model, g->n < 64 ? g->n : 64, texts, lens, fin, &u);
        pthread_mutex_unlock(&g->mu);
        rc = send_json(c, 200, &b);
        fkv_textbuf_free(&b);
    }
    gen_release(g);
    return rc;
}

static enum MHD_Result completions(fkv_server *s, struct MHD_Connection *c, conn *cn)
{
    fkv_api_error e;
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    if (!draining) s->in_flight++, cn->counted = 1;
    pthread_mutex_unlock(&s->mu);
    if (draining) {
        fkv_api_error_set(&e, 503, "server_error", "draining", "", "the server is shutting down");
        return send_error(s, c, &e);
    }
    fkv_api_request r;
    if (fkv_api_parse_completion(cn->body.data ? cn->body.data : "", cn->body.len, &s->lim, &r, &e))
        return send_error(s, c, &e);
    if (r.prompt_text && tokenize(s, &r, &e)) {
        fkv_api_request_free(&r);
        return send_error(s, c, &e);
    }
    gen *g = gen_new(s, &r, cn->t0);
    if (!g) {
        fkv_api_request_free(&r);
        fkv_api_error_set(&e, 500, "server_error", "out_of_memory", "", "out of memory");
        return send_error(s, c, &e);
    }
    int rc = admit(s, g, &r, &e);
    fkv_api_request_free(&r);
    if (rc) {
        gen_release(g);
        return send_error(s, c, &e);
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

/* ------------------------------------------------------------ routing */

/* Constant-time comparison: the key must not leak through timing. */
static int key_ok(const char *want, const char *got)
{
    if (!got) return 0;
    size_t wl = strlen(want), gl = strlen(got);
    unsigned char diff = (unsigned char)(wl != gl);
    for (size_t i = 0; i < gl; i++) diff |= (unsigned char)(got[i] ^ want[i % (wl ? wl : 1)]);
    return diff == 0;
}

static enum MHD_Result route(fkv_server *s, struct MHD_Connection *c, const char *url, const char *method,
                             conn *cn)
{
    fkv_api_error e;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strncmp(url, "/v1/", 4) && s->api_key) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!h || strncmp(h, "Bearer ", 7) || !key_ok(s->api_key, h + 7)) {
            fkv_api_error_set(&e, 401, "invalid_request_error", "invalid_api_key", "",
                              h ? "incorrect API key provided" : "an API key is required (Authorization: Bearer KEY)");
            return send_error(s, c, &e);
        }
    }
    if (cn->too_large) {
        fkv_api_error_set(&e, 413, "invalid_request_error", "body_too_large", "",
                          "the request body exceeds the limit of %zu bytes", s->cfg.max_body);
        return send_error(s, c, &e);
    }
    const char *allow = NULL;
    if (!strcmp(url, "/v1/completions")) {
        if (post) return completions(s, c, cn);
        allow = "POST";
    } else if (!strcmp(url, "/v1/models")) {
        if (get) {
            fkv_textbuf b;
            fkv_textbuf_init(&b);
            fkv_api_render_models(&b, s->info.model, s->started_s, s->info.max_context);
            enum MHD_Result rc = send_json(c, 200, &b);
            fkv_textbuf_free(&b);
            return rc;
        }
        allow = "GET";
    } else if (!strcmp(url, "/health")) {
        if (get) {
            int dr = server_stopping(s);
            pthread_mutex_lock(&s->mu);
            dr |= s->draining;
            pthread_mutex_unlock(&s->mu);
            const char *body = dr ? "{\"status\":\"draining\"}\n" : "{\"status\":\"ok\"}\n";
            return send_text(c, dr ? 503 : 200, "application/json", body, strlen(body), 0);
        }
        allow = "GET";
    } else if (!strcmp(url, "/metrics")) {
        if (get) {
            fkv_textbuf b;
            fkv_textbuf_init(&b);
            fkv_server_metrics_render(s->metrics, s->be, &b);
            enum MHD_Result rc = b.oom ? MHD_NO
                                       : send_text(c, 200, "text/plain; version=0.0.4; charset=utf-8",
                                                   b.data ? b.data : "", b.len, 0);
            fkv_textbuf_free(&b);
            return rc;
        }
        allow = "GET";
    }
    if (allow) {
        fkv_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", "", "%s %s: use %s", method, url,
                          allow);
        return send_error(s, c, &e);
    }
    fkv_api_error_set(&e, 404, "invalid_request_error", "not_found", "", "no such endpoint: %s %s", method, url);
    return send_error(s, c, &e);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    fkv_server *s = cls;
    conn *cn = *con_cls;
    if (!cn) { /* headers only: set up body accumulation */
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        fkv_textbuf_init(&cn->body);
        cn->t0 = now_ns();
        *con_cls = cn;
        /* A declared oversized body with Expect: 100-continue is refused before it is sent. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if (cl && ex && strtoull(cl, NULL, 10) > s->cfg.max_body) {
            cn->too_large = 1;
            return route(s, c, url, method, cn);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        /* over the limit: keep reading (to answer cleanly) but keep nothing */
        if (!cn->too_large && cn->body.len + *upload_size > s->cfg.max_body) {
            cn->too_large = 1;
            fkv_textbuf_free(&cn->body);
        }
        if (!cn->too_large) fkv_textbuf_append(&cn->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->body.oom) return MHD_NO;
    return route(s, c, url, method, cn);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)c;
    (void)tc;
    fkv_server *s = cls;
    conn *cn = *con_cls;
    if (!cn) return;
    if (cn->counted) {
        pthread_mutex_lock(&s->mu);
        s->in_flight--;
        if (!s->in_flight) pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->mu);
    }
    fkv_textbuf_free(&cn->body);
    free(cn);
    *con_cls = NULL;
}

/* ------------------------------------------------------------ lifecycle */

void fkv_server_config_default(fkv_server_config *c)
{
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->max_body = 1u << 20;
    c->max_queue = 256;
    c->max_n = 8;
    c->max_connections = 256;
    c->retry_after_s = 1;
    c->conn_timeout_s = 120;
    c->request_timeout_ns = (int64_t)600 * 1000000000;
}

fkv_status fkv_server_start(const fkv_server_config *cfg, fkv_backend *be, fkv_server **out, char *err,
                            size_t errlen)
{
    if (!cfg || !be || !be->ops || !out) {
        snprintf(err, errlen, "fkv_server_start: NULL argument");
        return FKV_EINVAL;
    }
    if (!cfg->max_body || !cfg->max_n || cfg->max_n > 64 || !cfg->max_connections) {
        snprintf(err, errlen, "server config: max_body, max_connections must be > 0 and max_n in [1, 64]");
        return FKV_EINVAL;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned v6 = 0;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(cfg->port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(cfg->port);
        v6 = MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--host '%s' is not an IPv4 or IPv6 address", host);
        return FKV_EINVAL;
    }
    fkv_server *s = calloc(1, sizeof *s);
    if (!s) return FKV_ENOMEM;
    s->cfg = *cfg;
    s->be = be;
    if (cfg->api_key && cfg->api_key[0]) {
        s->api_key = malloc(strlen(cfg->api_key) + 1);
        if (s->api_key) strcpy(s->api_key, cfg->api_key);
    }
    s->cfg.api_key = NULL;
    s->cfg.host = NULL;
    be->ops->info(be->impl, &s->info);
    s->lim.max_context = s->info.max_context;
    s->lim.max_prompt = cfg->max_prompt && cfg->max_prompt < s->info.max_context ? cfg->max_prompt
                                                                                 : s->info.max_context - 1;
    s->lim.vocab_size = s->info.vocab_size;
    s->lim.max_n = cfg->max_n;
    s->lim.model = s->info.model;
    s->metrics = fkv_server_metrics_create();
    s->started_s = (int64_t)time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->admit_mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (!s->metrics || (cfg->api_key && cfg->api_key[0] && !s->api_key)) {
        fkv_server_destroy(s);
        return FKV_ENOMEM;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                                MHD_USE_POLL | v6,
                            0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                            cfg->conn_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%u: %s", host, (unsigned)cfg->port, strerror(errno));
        fkv_server_destroy(s);
        return FKV_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return FKV_OK;
}

uint16_t fkv_server_port(const fkv_server *s)
{
    return s->port;
}

uint64_t fkv_server_in_flight(fkv_server *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    return v;
}

fkv_status fkv_server_drain(fkv_server *s, int64_t timeout_ns)
{
    int64_t deadline = now_ns() + timeout_ns;
    pthread_mutex_lock(&s->mu);
    int first = !s->draining;
    s->draining = 1;
    pthread_mutex_unlock(&s->mu);
    if (first && s->d) {
        MHD_socket fd = MHD_quiesce_daemon(s->d);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
    pthread_mutex_lock(&s->mu);
    while (s->in_flight && now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->idle, &s->mu, &ts);
    }
    uint64_t left = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    if (left) return FKV_ESTATE;
    int64_t rest = deadline - now_ns();
    return s->be->ops->drain(s->be->impl, rest > 0 ? rest : 0);
}

void fkv_server_destroy(fkv_server *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    if (s->d) MHD_stop_daemon(s->d);
    /* Open streams were cancelled by the stop; their last sink callbacks
     * still use this server, so wait for them (a step or so each). */
    int64_t deadline = now_ns() + (int64_t)10 * 1000000000;
    pthread_mutex_lock(&s->mu);
    while (s->live_gens && now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->idle, &s->mu, &ts);
    }
    uint64_t live = s->live_gens;
    pthread_mutex_unlock(&s->mu);
    if (live) {
        /* a backend that ignores cancel: leaking beats a use after free */
        fprintf(stderr, "fairkv serve: %llu requests still held by the backend at exit\n", (unsigned long long)live);
        return;
    }
    fkv_server_metrics_destroy(s->metrics);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->admit_mu);
    pthread_cond_destroy(&s->idle);
    free(s->api_key);
    free(s);
}
