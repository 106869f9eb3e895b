/* Internals shared by the HTTP front (http.c) and the completion handling
 * (completion.c) of `fairkv serve`. */
#ifndef FKV_SERVER_HTTP_INTERNAL_H
#define FKV_SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>

#include "server/api.h"
#include "server/chat_template.h"
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
    /* The read deadline (http.c): the open connections, and the thread that
     * cuts those still reading a request after cfg.read_timeout_s. */
    pthread_mutex_t peers_mu; /* peers and every peer's fields, reaper_stop */
    pthread_cond_t reaper_cv; /* reaper_stop was set */
    struct peer *peers;
    pthread_t reaper;
    int reaper_on, reaper_stop;
    fkv_chat_tmpl chat_tmpl; /* the prompt format of /v1/chat/completions */
    const char *chat_eos;    /* the template's eos_token text (the backend's), "" for none */
    struct gen *gens;        /* under mu: every completion not yet freed (GET /slots) */
};

/* Per-request state of a connection (MHD's con_cls). */
typedef struct conn {
    fkv_textbuf body;
    int too_large;
    int counted; /* holds one in_flight */
    int64_t t0;
} conn;

/* Responses with a copied body; send_error also counts the error metric and
 * adds Retry-After to 429 and 503. */
enum MHD_Result fkv__http_send_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *data,
                                    size_t len, unsigned retry_after);
enum MHD_Result fkv__http_send_json(struct MHD_Connection *c, unsigned status, fkv_textbuf *b);
enum MHD_Result fkv__http_send_error(fkv_server *s, struct MHD_Connection *c, const fkv_api_error *e);
int fkv__server_stopping(fkv_server *s);

/* POST /v1/completions with its whole body in cn (completion.c). */
enum MHD_Result fkv__completions(fkv_server *s, struct MHD_Connection *c, conn *cn);
/* POST /v1/chat/completions: the same path, messages through the template. */
enum MHD_Result fkv__chat_completions(fkv_server *s, struct MHD_Connection *c, conn *cn);
/* GET /slots: the choices of the completions being answered (completion.c). */
void fkv__slots_render(fkv_server *s, fkv_textbuf *b);
/* POST /tokenize, POST /detokenize, GET /props, GET /slots: llama-server's
 * endpoints (llama_endpoints.c). */
enum MHD_Result fkv__tokenize(fkv_server *s, struct MHD_Connection *c, conn *cn);
enum MHD_Result fkv__detokenize(fkv_server *s, struct MHD_Connection *c, conn *cn);
enum MHD_Result fkv__props(fkv_server *s, struct MHD_Connection *c);
enum MHD_Result fkv__slots(fkv_server *s, struct MHD_Connection *c);
/* Picks the chat template at start (name: --chat-template, NULL = the
 * model's); -1 with err for an unknown name. */
int fkv__chat_setup(fkv_server *s, const char *name, char *err, size_t errlen);

#endif
