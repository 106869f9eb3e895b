/* `fairkv load`: a load generator (libcurl multi interface) that streams
 * completions from a server and measures, per request class and per user,
 * time to first token, inter-token and end-to-end latency.  Requests with
 * arrival times are sent open loop; a workload's closed-loop users each
 * send their next request when the previous one ends. */
#ifndef FKV_SERVER_LOAD_H
#define FKV_SERVER_LOAD_H

#include <stdio.h>

#include "server/load_workload.h"

typedef struct fkv_load_config {
    const char *url;        /* base URL, e.g. http://127.0.0.1:8080 */
    const char *api_key;    /* NULL: none */
    const char *model;      /* NULL: asked from GET /v1/models */
    uint64_t seed;          /* prompts' token ids */
    uint32_t vocab;         /* token ids are below this (256 fits every model) */
    double timeout_s;       /* per request, and the wait for stragglers after the last arrival */
    uint32_t max_inflight;  /* requests open at once; an arrival beyond is counted as "client_limit" */
} fkv_load_config;

#define FKV_LOAD_MAX_ERRKINDS 24

typedef struct fkv_load_dist {
    double *v; /* seconds */
    size_t n, cap;
} fkv_load_dist;

/* One user's requests (the "user" field). */
typedef struct fkv_load_user {
    int present;           /* the workload has requests of this user */
    int role;              /* fkv_load_role */
    size_t sent, ok, failed;
    uint64_t tokens;       /* streamed token events of successful requests */
    fkv_load_dist ttft, e2e;
    uint32_t open, max_open; /* requests open now, and at most at once */
} fkv_load_user;

typedef struct fkv_load_result {
    size_t sent[FKV_N_CLASSES], ok[FKV_N_CLASSES], failed[FKV_N_CLASSES];
    fkv_load_dist ttft[FKV_N_CLASSES], itl[FKV_N_CLASSES], e2e[FKV_N_CLASSES];
    uint64_t tokens[FKV_N_CLASSES]; /* streamed token events of successful requests */
    char err_kind[FKV_LOAD_MAX_ERRKINDS][32];
    size_t err_count[FKV_LOAD_MAX_ERRKINDS];
    int n_err_kinds;
    double wall_s;   /* first arrival to last answer */
    double miss_rate[FKV_N_CLASSES]; /* the server's kv_cache_miss_rate at the end; -1 if absent */
    fkv_load_user *users;  /* [n_users], indexed by client number */
    uint32_t n_users;
} fkv_load_result;

fkv_status fkv_load_run(const fkv_load_config *cfg, const fkv_load_workload *w, fkv_load_result *out, char *err,
                        size_t errlen);
void fkv_load_result_free(fkv_load_result *r);
void fkv_load_print_text(const fkv_load_result *r, FILE *f);
void fkv_load_print_json(const fkv_load_result *r, FILE *f);

#endif
