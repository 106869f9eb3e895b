/* HTTP front of `fairkv serve` (libmicrohttpd): routing, authentication,
 * body limits and the server's lifecycle (start, drain, stop).  Completions
 * themselves are in completion.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/http_internal.h"

static int64_t now_ns(void)
{
    return fkv_monotonic_now_ns();
}

/* ------------------------------------------------------------ responses */

enum MHD_Result fkv__http_send_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *data,
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

enum MHD_Result fkv__http_send_json(struct MHD_Connection *c, unsigned status, fkv_textbuf *b)
{
    if (b->oom) return fkv__http_send_text(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}\n", 38, 0);
    return fkv__http_send_text(c, status, "application/json", b->data ? b->data : "", b->len, 0);
}

enum MHD_Result fkv__http_send_error(fkv_server *s, struct MHD_Connection *c, const fkv_api_error *e)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_api_render_error(&b, e);
    fkv_server_metrics_http_error(s->metrics, e->http);
    enum MHD_Result rc = b.oom ? MHD_NO
                               : fkv__http_send_text(c, (unsigned)e->http, "application/json", b.data, b.len,
                                           e->http == 429 || e->http == 503 ? s->cfg.retry_after_s : 0);
    fkv_textbuf_free(&b);
    return rc;
}

int fkv__server_stopping(fkv_server *s)
{
    pthread_mutex_lock(&s->mu);
    int v = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* ------------------------------------------------------------ read deadline */

/* libmicrohttpd's only timeout (CONNECTION_TIMEOUT) is an idle timeout: it
 * restarts with every byte, so a client trickling one header byte every few
 * seconds holds its connection (and thread) forever, and a short value would
 * also apply while an answer is pending or streamed.  So the deadline for
 * reading a request is kept here: every connection is a peer (MHD's
 * socket_context, from accept to close); it is "reading" from accept, and
 * again from the end of each answer (keep-alive), until its request is whole;
 * a thread shuts down the socket of a peer that has been reading longer than
 * read_timeout_s.  The connection's own thread then sees end of input and MHD
 * closes it as if the client had left.  Time spent generating or streaming is
 * never "reading", so only the idle timeout applies to it. */
typedef struct peer {
    struct peer *prev, *next;
    MHD_socket fd;
    int reading;     /* waiting for (the rest of) a request */
    int cut;         /* shut down once already */
    int64_t read_t0; /* ns: when the wait began */
} peer;

#define REAPER_TICK_NS 100000000 /* 100 ms: the deadline's precision */

static peer *peer_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void peer_set_reading(fkv_server *s, struct MHD_Connection *c, int reading)
{
    peer *p = peer_of(c);
    if (!p) return;
    pthread_mutex_lock(&s->peers_mu);
    p->reading = reading;
    p->read_t0 = now_ns();
    pthread_mutex_unlock(&s->peers_mu);
}

/* MHD_OPTION_NOTIFY_CONNECTION.  MHD calls CLOSED before it closes the
 * socket, so under peers_mu a listed peer's fd is still this connection's. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    fkv_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        peer *p = ci ? calloc(1, sizeof *p) : NULL;
        if (!p) return; /* untracked: only the idle timeout applies to it */
        p->fd = ci->connect_fd;
        p->reading = 1;
        p->read_t0 = now_ns();
        pthread_mutex_lock(&s->peers_mu);
        p->next = s->peers;
        if (s->peers) s->peers->prev = p;
        s->peers = p;
        pthread_mutex_unlock(&s->peers_mu);
        *socket_context = p;
        return;
    }
    peer *p = *socket_context;
    if (!p) return;
    pthread_mutex_lock(&s->peers_mu);
    if (p->prev) p->prev->next = p->next;
    else s->peers = p->next;
    if (p->next) p->next->prev = p->prev;
    pthread_mutex_unlock(&s->peers_mu);
    free(p);
    *socket_context = NULL;
}

static void *reaper_main(void *arg)
{
    fkv_server *s = arg;
    int64_t limit = (int64_t)s->cfg.read_timeout_s * 1000000000;
    pthread_mutex_lock(&s->peers_mu);
    while (!s->reaper_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += REAPER_TICK_NS;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->reaper_cv, &s->peers_mu, &ts);
        int64_t t = now_ns();
        for (peer *p = s->peers; p; p = p->next) {
            if (!p->reading || p->cut || t - p->read_t0 <= limit) continue;
            /* shutdown, not close: the fd stays MHD's until it closes it */
            shutdown(p->fd, SHUT_RDWR);
            p->cut = 1;
        }
    }
    pthread_mutex_unlock(&s->peers_mu);
    return NULL;
}

static void reaper_stop(fkv_server *s)
{
    if (!s->reaper_on) return;
    pthread_mutex_lock(&s->peers_mu);
    s->reaper_stop = 1;
    pthread_cond_broadcast(&s->reaper_cv);
    pthread_mutex_unlock(&s->peers_mu);
    pthread_join(s->reaper, NULL);
    s->reaper_on = 0;
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
    /* llama-server's endpoints are behind the key too (/slots shows users) */
    int llama = !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize") || !strcmp(url, "/props") ||
                !strcmp(url, "/slots");
    if ((!strncmp(url, "/v1/", 4) || llama) && s->api_key) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!h || strncmp(h, "Bearer ", 7) || !key_ok(s->api_key, h + 7)) {
            fkv_api_error_set(&e, 401, "invalid_request_error", "invalid_api_key", "",
                              h ? "incorrect API key provided" : "an API key is required (Authorization: Bearer KEY)");
            return fkv__http_send_error(s, c, &e);
        }
    }
    if (cn->too_large) {
        fkv_api_error_set(&e, 413, "invalid_request_error", "body_too_large", "",
                          "the request body exceeds the limit of %zu bytes", s->cfg.max_body);
        return fkv__http_send_error(s, c, &e);
    }
    const char *allow = NULL;
    if (!strcmp(url, "/v1/completions")) {
        if (post) return fkv__completions(s, c, cn);
        allow = "POST";
    } else if (!strcmp(url, "/v1/chat/completions")) {
        if (post) return fkv__chat_completions(s, c, cn);
        allow = "POST";
    } else if (!strcmp(url, "/v1/models")) {
        if (get) {
            fkv_textbuf b;
            fkv_textbuf_init(&b);
            fkv_api_render_models(&b, s->info.model, s->started_s, s->info.max_context);
            enum MHD_Result rc = fkv__http_send_json(c, 200, &b);
            fkv_textbuf_free(&b);
            return rc;
        }
        allow = "GET";
    } else if (!strcmp(url, "/tokenize")) {
        if (post) return fkv__tokenize(s, c, cn);
        allow = "POST";
    } else if (!strcmp(url, "/detokenize")) {
        if (post) return fkv__detokenize(s, c, cn);
        allow = "POST";
    } else if (!strcmp(url, "/props")) {
        if (get) return fkv__props(s, c);
        allow = "GET";
    } else if (!strcmp(url, "/slots")) {
        if (get) return fkv__slots(s, c);
        allow = "GET";
    } else if (!strcmp(url, "/health")) {
        if (get) {
            int dr = fkv__server_stopping(s);
            pthread_mutex_lock(&s->mu);
            dr |= s->draining;
            pthread_mutex_unlock(&s->mu);
            const char *body = dr ? "{\"status\":\"draining\"}\n" : "{\"status\":\"ok\"}\n";
            return fkv__http_send_text(c, dr ? 503 : 200, "application/json", body, strlen(body), 0);
        }
        allow = "GET";
    } else if (!strcmp(url, "/metrics")) {
        if (get) {
            fkv_textbuf b;
            fkv_textbuf_init(&b);
            fkv_server_metrics_render(s->metrics, s->be, &b);
            enum MHD_Result rc = b.oom ? MHD_NO
                                       : fkv__http_send_text(c, 200, "text/plain; version=0.0.4; charset=utf-8",
                                                   b.data ? b.data : "", b.len, 0);
            fkv_textbuf_free(&b);
            return rc;
        }
        allow = "GET";
    }
    if (allow) {
        fkv_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", "", "%s %s: use %s", method, url,
                          allow);
        return fkv__http_send_error(s, c, &e);
    }
    fkv_api_error_set(&e, 404, "invalid_request_error", "not_found", "", "no such endpoint: %s %s", method, url);
    return fkv__http_send_error(s, c, &e);
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
            peer_set_reading(s, c, 0);
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
    peer_set_reading(s, c, 0); /* whole: generating is not reading */
    return route(s, c, url, method, cn);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)tc;
    fkv_server *s = cls;
    /* answered: on keep-alive the next request's deadline starts now */
    peer_set_reading(s, c, 1);
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
    /* a quarter of the connections: one address (one client's burst, or
     * idle sockets) cannot take them all; 0 behind a proxy */
    c->max_conn_per_ip = 64;
    c->read_timeout_s = 10;
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
    pthread_mutex_init(&s->peers_mu, NULL);
    pthread_cond_init(&s->reaper_cv, NULL);
    if (!s->metrics || (cfg->api_key && cfg->api_key[0] && !s->api_key)) {
        fkv_server_destroy(s);
        return FKV_ENOMEM;
    }
    if (fkv__chat_setup(s, cfg->chat_template, err, errlen)) {
        fkv_server_destroy(s);
        return FKV_EINVAL;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                                MHD_USE_POLL | v6,
                            0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            cfg->max_conn_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                            s, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%u: %s", host, (unsigned)cfg->port, strerror(errno));
        fkv_server_destroy(s);
        return FKV_EIO;
    }
    if (cfg->read_timeout_s) {
        int e = pthread_create(&s->reaper, NULL, reaper_main, s);
        if (e) {
            snprintf(err, errlen, "cannot start the read-timeout thread: %s", strerror(e));
            fkv_server_destroy(s);
            return FKV_EIO;
        }
        s->reaper_on = 1;
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
    reaper_stop(s); /* first: it must not shut down sockets the stop is closing */
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
    pthread_mutex_destroy(&s->peers_mu);
    pthread_cond_destroy(&s->reaper_cv);
    free(s->api_key);
    free(s);
}
