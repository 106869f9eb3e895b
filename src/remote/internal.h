/* What the remote tier's files share: the client's state, the node layer
 * (net.c: connections, backoff, slot map, redirects, error kinds) and the
 * quota index (index.c).  The worker thread alone touches the connections
 * and the index; the slot map and node table are written by the worker
 * under `mu` so that fkv_remote_route may read them from another thread. */
#ifndef FKV_REMOTE_INTERNAL_H
#define FKV_REMOTE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <hiredis/hiredis.h>

#include "remote/remote.h"

#define RMT_MAX_NODES 64
#define RMT_SLOTS 16384
#define RMT_REDIRECTS 3 /* MOVED / ASK hops one command follows */

#define RMT_COUNTERS(X) X(gets) X(hits) X(misses) X(corrupt) X(puts) X(put_drops) X(put_fails) \
    X(deletes) X(quota_deletes) X(err_connect) X(err_timeout) X(err_oom) X(err_other)            \
    X(unavailable) X(gave_up) X(moved) X(asked) X(slot_refreshes) X(bytes_written) X(bytes_read)

typedef struct {
#define RMT_ATOMIC(name) _Atomic uint64_t name;
    RMT_COUNTERS(RMT_ATOMIC)
#undef RMT_ATOMIC
} rmt_counters;

typedef enum { RMT_ERR_CONNECT, RMT_ERR_TIMEOUT, RMT_ERR_OOM, RMT_ERR_OTHER, RMT_ERR_NONE } rmt_err;

typedef struct {
    char host[64];
    int port;
    redisContext *c;
    int64_t retry_at_ns; /* no connect attempt before this */
    int backoff_ms;      /* the next failure's delay; 0 after a success */
} rmt_node;

/* The quota index: the keys this client wrote, per namespace, oldest first. */
typedef struct rmt_entry {
    char *key;
    uint64_t size;
    struct rmt_tenant *tenant;
    struct rmt_entry *parent; /* the previous chunk's entry, when it was known */
    uint32_t children;        /* known children still present */
    struct rmt_entry *older, *newer, *hnext;
} rmt_entry;

typedef struct rmt_tenant {
    char ns[FKV_REMOTE_NAME_MAX + 1];
    uint64_t bytes;
    rmt_entry *oldest, *newest;
    struct rmt_tenant *next;
} rmt_tenant;

typedef struct {
    rmt_entry **buckets;
    size_t nbuckets, n;
    rmt_tenant *tenants;
} rmt_index;

struct rmt_put;
struct rmt_req;

struct fkv_remote {
    fkv_remote_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t worker;
    bool stop;
    struct rmt_put *put_head, *put_tail;
    size_t put_n;
    uint64_t put_seq, put_done; /* puts queued, puts finished (in order) */
    struct rmt_req *req_head, *req_tail;
    struct rmt_quota {
        char ns[FKV_REMOTE_NAME_MAX + 1];
        uint64_t bytes;
    } *quotas;
    size_t nquotas;

    /* the node layer (worker; the table and map written under mu) */
    rmt_node nodes[RMT_MAX_NODES];
    int nnodes;
    uint8_t slot_node[RMT_SLOTS];
    bool need_slots, refreshing;
    rmt_err burst; /* the kind of the burst being lived through, or NONE */
    uint64_t burst_errors;

    rmt_index index; /* worker only */
    rmt_counters n;
};

#define RMT_INC(r, name, v) atomic_fetch_add_explicit(&(r)->n.name, (uint64_t)(v), memory_order_relaxed)

/* net.c */
int64_t rmt_now_ns(void);
bool rmt_add_seeds(fkv_remote *r, const char *list, char *err, size_t errlen);
void rmt_close_nodes(fkv_remote *r);
int rmt_route(const fkv_remote *r, const char *key);
/* The node's connection, connecting if its backoff allows; NULL (counted:
 * connect error or unavailable) when there is none. */
redisContext *rmt_conn(fkv_remote *r, int node);
/* Counts an error of a kind and logs the first of a burst. */
void rmt_error(fkv_remote *r, rmt_err kind, int node, const char *detail);
/* A reply came: ends a burst (logging how long it was). */
void rmt_ok(fkv_remote *r);
/* An error reply: counts it by kind (OOM, other). */
void rmt_reply_error(fkv_remote *r, int node, const redisReply *rep);
/* One command of one key, following MOVED / ASK; NULL on failure (counted). */
redisReply *rmt_command(fkv_remote *r, const char *key, int argc, const char **argv, const size_t *lens);
/* cmd (GET, EXISTS, DEL) of each key, pipelined: one round trip per node,
 * the nodes' requests all written before any reply is read.  replies[i]
 * NULL where key i failed (counted); redirects are followed. */
void rmt_batch(fkv_remote *r, const char *cmd, size_t n, const char *const *keys, redisReply **replies);
bool rmt_refresh_slots(fkv_remote *r);

/* index.c */
void rmt_index_free(rmt_index *ix);
rmt_tenant *rmt_index_tenant(rmt_index *ix, const char *ns);
/* Records a write (new key, or a rewrite: newest again, new size). */
bool rmt_index_wrote(rmt_index *ix, const fkv_remote_key *key, uint64_t size);
void rmt_index_touch(rmt_index *ix, const char *key);
void rmt_index_forget(rmt_index *ix, const char *key);
/* The tenant's least recently used key with no known child left, or NULL. */
rmt_entry *rmt_index_victim(rmt_tenant *t);

#endif
