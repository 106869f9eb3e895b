/* `fairkv serve`: the OpenAI-style HTTP server over a backend (backend.h).
 *
 * GNU libmicrohttpd, one thread per connection: a request blocks its own
 * thread while it waits for tokens, so a slow stream never delays another
 * client, and max_connections bounds the threads. */
#ifndef FKV_SERVER_SERVER_H
#define FKV_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "server/backend.h"

typedef struct fkv_server_config {
    const char *host;          /* "127.0.0.1": an IPv4 or IPv6 literal to bind */
    uint16_t port;             /* 8080; 0 = a free port (fkv_server_port tells which) */
    const char *api_key;       /* NULL or "": no key; else /v1/ needs "Authorization: Bearer KEY" */
    size_t max_body;           /* 1 MiB: larger request bodies get 413 */
    uint32_t max_prompt;       /* 0 = the backend's max_context - 1; longer prompts get 400 */
    uint32_t max_queue;        /* 256: waiting requests; beyond, 429 with Retry-After */
    uint32_t max_n;            /* 8: choices per request */
    unsigned max_connections;  /* 256: concurrent connections (threads) */
    unsigned max_conn_per_ip;  /* 64: concurrent connections from one client address; 0 = no limit */
    unsigned read_timeout_s;   /* 10: a request's headers and body must arrive within this (0 = no
                                  deadline); the wait for a generation is not counted */
    unsigned retry_after_s;    /* 1: the Retry-After of a 429 */
    unsigned conn_timeout_s;   /* 120: a connection with no traffic this long (a client not reading
                                  its answer) is closed */
    int64_t request_timeout_ns; /* 600 s: a request with no progress this long is cancelled */
    const char *chat_template; /* NULL: the model's tokenizer.chat_template, else chatml; or a name (chat_template.h) */
} fkv_server_config;

typedef struct fkv_server fkv_server;

void fkv_server_config_default(fkv_server_config *c);

/* Starts listening.  The backend must outlive the server. */
fkv_status fkv_server_start(const fkv_server_config *cfg, fkv_backend *be, fkv_server **out, char *err,
                            size_t errlen);
/* The bound port (the one chosen when cfg.port was 0). */
uint16_t fkv_server_port(const fkv_server *s);
/* Graceful stop (SIGTERM): closes the listening socket (new connections
 * are refused; new requests on open connections get 503), waits for every
 * running request to be answered, then drains the backend.  FKV_ESTATE if
 * timeout_ns passed first. */
fkv_status fkv_server_drain(fkv_server *s, int64_t timeout_ns);
/* Requests being answered now (accepted completions not yet fully sent). */
uint64_t fkv_server_in_flight(fkv_server *s);
/* Stops the daemon (open streams end at once) and frees the server. */
void fkv_server_destroy(fkv_server *s);

#endif
