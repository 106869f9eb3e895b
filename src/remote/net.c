/* The node layer: one connection per node, reconnects with capped
 * exponential backoff, errors by kind (logged once per burst), the cluster
 * slot map (CLUSTER SLOTS) and the MOVED / ASK redirects.  Worker thread
 * only, except where `mu` is named. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote/internal.h"
#include "util/err.h"

int64_t rmt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *const err_names[] = {"connect", "timeout", "oom", "other"};

static void log_line(fkv_remote *r, const char *line)
{
    if (r->cfg.log)
        r->cfg.log(r->cfg.log_ctx, line);
    else
        fprintf(stderr, "fairkv remote: %s\n", line);
}

void rmt_error(fkv_remote *r, rmt_err kind, int node, const char *detail)
{
    switch (kind) {
    case RMT_ERR_CONNECT: RMT_INC(r, err_connect, 1); break;
    case RMT_ERR_TIMEOUT: RMT_INC(r, err_timeout, 1); break;
    case RMT_ERR_OOM: RMT_INC(r, err_oom, 1); break;
    default: RMT_INC(r, err_other, 1); kind = RMT_ERR_OTHER; break;
    }
    r->burst_errors++;
    /* a down server fails every call: one line when the burst starts (or
     * changes kind), one when it ends, not one per call */
    if (r->burst == kind)
        return;
    r->burst = kind;
    char line[400]; /* room for the host (63), the detail (200) and the words */
    snprintf(line, sizeof line, "%s error on %s:%d: %.200s (more are counted, not logged, until it recovers)",
             err_names[kind], node >= 0 ? r->nodes[node].host : "?", node >= 0 ? r->nodes[node].port : 0,
             detail ? detail : "");
    log_line(r, line);
}

void rmt_ok(fkv_remote *r)
{
    if (r->burst == RMT_ERR_NONE)
        return;
    char line[128];
    snprintf(line, sizeof line, "recovered after %llu errors", (unsigned long long)r->burst_errors);
    log_line(r, line);
    r->burst = RMT_ERR_NONE;
    r->burst_errors = 0;
}

/* A dead context: freed, and the node waits out its backoff. */
static void drop_conn(fkv_remote *r, int node)
{
    rmt_node *nd = &r->nodes[node];
    if (nd->c)
        redisFree(nd->c);
    nd->c = NULL;
    int b = nd->backoff_ms ? nd->backoff_ms : r->cfg.backoff_min_ms;
    nd->retry_at_ns = rmt_now_ns() + (int64_t)b * 1000000;
    nd->backoff_ms = b >= r->cfg.backoff_max_ms / 2 ? r->cfg.backoff_max_ms : 2 * b;
}

/* The kind of a context's error: a socket timeout (EAGAIN under
 * SO_RCVTIMEO), a lost or refused connection, or anything else. */
static rmt_err ctx_kind(const redisContext *c)
{
    if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT))
        return RMT_ERR_TIMEOUT;
    if (c->err == REDIS_ERR_IO || c->err == REDIS_ERR_EOF)
        return RMT_ERR_CONNECT;
    if (c->err == REDIS_ERR_OTHER && strstr(c->errstr, "imed out"))
        return RMT_ERR_TIMEOUT;
    return RMT_ERR_OTHER;
}

static void fail_conn(fkv_remote *r, int node)
{
    redisContext *c = r->nodes[node].c;
    rmt_error(r, c ? ctx_kind(c) : RMT_ERR_CONNECT, node, c ? c->errstr : "no connection");
    drop_conn(r, node);
}

redisContext *rmt_conn(fkv_remote *r, int node)
{
    if (node < 0 || node >= r->nnodes)
        return NULL;
    rmt_node *nd = &r->nodes[node];
    if (nd->c)
        return nd->c;
    if (rmt_now_ns() < nd->retry_at_ns) {
        RMT_INC(r, unavailable, 1);
        return NULL;
    }
    struct timeval tv = {r->cfg.timeout_ms / 1000, (r->cfg.timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(nd->host, nd->port, tv);
    if (!c || c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        rmt_error(r, RMT_ERR_CONNECT, node, c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        drop_conn(r, node);
        return NULL;
    }
    nd->c = c;
    nd->backoff_ms = 0;
    /* a node that comes back may come back with other slots */
    if (r->cfg.cluster && !r->refreshing)
        r->need_slots = true;
    return c;
}

/* Adds a node (under mu: fkv_remote_route reads the table); its index, an
 * existing one for the same address, or -1 when the table is full. */
static int node_add(fkv_remote *r, const char *host, size_t hlen, int port)
{
    if (hlen == 0 || hlen >= sizeof r->nodes[0].host || port <= 0 || port > 65535)
        return -1;
    for (int i = 0; i < r->nnodes; i++)
        if (r->nodes[i].port == port && strlen(r->nodes[i].host) == hlen &&
            memcmp(r->nodes[i].host, host, hlen) == 0)
            return i;
    if (r->nnodes == RMT_MAX_NODES)
        return -1;
    pthread_mutex_lock(&r->mu);
    rmt_node *nd = &r->nodes[r->nnodes];
    memset(nd, 0, sizeof *nd);
    memcpy(nd->host, host, hlen);
    nd->port = port;
    int i = r->nnodes++;
    pthread_mutex_unlock(&r->mu);
    return i;
}

bool rmt_add_seeds(fkv_remote *r, const char *list, char *err, size_t errlen)
{
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        char *stop = NULL;
        long port = colon ? strtol(colon + 1, &stop, 10) : 0;
        if (!colon || stop != p + len || node_add(r, p, (size_t)(colon - p), (int)port) < 0) {
            fkv_errf(err, errlen, FKV_EINVAL, "remote: bad node \"%.*s\" (host:port)", (int)len, p);
            return false;
        }
        p = end ? end + 1 : NULL;
    }
    if (r->nnodes == 0) {
        fkv_errf(err, errlen, FKV_EINVAL, "remote: no node given");
        return false;
    }
    return true;
}

void rmt_close_nodes(fkv_remote *r)
{
    for (int i = 0; i < r->nnodes; i++)
        if (r->nodes[i].c)
            redisFree(r->nodes[i].c);
}

int rmt_route(const fkv_remote *r, const char *key)
{
    return r->cfg.cluster ? r->slot_node[fkv_remote_key_slot(key, strlen(key))] : 0;
}

void rmt_reply_error(fkv_remote *r, int node, const redisReply *rep)
{
    /* "OOM command not allowed when used memory > 'maxmemory'" */
    bool oom = rep->str && rep->len >= 3 && memcmp(rep->str, "OOM", 3) == 0;
    rmt_error(r, oom ? RMT_ERR_OOM : RMT_ERR_OTHER, node, rep->str);
}

/* "MOVED <slot> <host>:<port>" or "ASK ...": the target node (added when
 * new), or -1 when rep is no redirect.  The text is the server's, so every
 * part is checked. */
static int redirect(fkv_remote *r, const redisReply *rep, bool *ask, int *slot)
{
    if (rep->type != REDIS_REPLY_ERROR || !rep->str)
        return -1;
    const char *s = rep->str;
    if (strncmp(s, "MOVED ", 6) == 0)
        *ask = false, s += 6;
    else if (strncmp(s, "ASK ", 4) == 0)
        *ask = true, s += 4;
    else
        return -1;
    char *end;
    long sl = strtol(s, &end, 10);
    if (end == s || *end != ' ' || sl < 0 || sl >= RMT_SLOTS)
        return -1;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (!colon)
        return -1;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0')
        return -1;
    *slot = (int)sl;
    return node_add(r, addr, (size_t)(colon - addr), (int)port);
}

static void set_slot(fkv_remote *r, int slot, int node)
{
    pthread_mutex_lock(&r->mu);
    r->slot_node[slot] = (uint8_t)node;
    pthread_mutex_unlock(&r->mu);
}

redisReply *rmt_command(fkv_remote *r, const char *key, int argc, const char **argv, const size_t *lens)
{
    int node = rmt_route(r, key);
    bool asking = false;
    for (int hop = 0; hop <= RMT_REDIRECTS; hop++) {
        redisContext *c = rmt_conn(r, node);
        if (!c)
            return NULL;
        redisReply *rep = NULL;
        if (asking) {
            /* ASK: this one command, at the importing node, after ASKING */
            redisReply *ok = NULL;
            redisAppendCommand(c, "ASKING");
            redisAppendCommandArgv(c, argc, argv, lens);
            if (redisGetReply(c, (void **)&ok) == REDIS_OK)
                redisGetReply(c, (void **)&rep);
            freeReplyObject(ok);
        } else {
            rep = redisCommandArgv(c, argc, argv, lens);
        }
        if (!rep) {
            fail_conn(r, node);
            return NULL;
        }
        rmt_ok(r);
        bool ask = false;
        int slot = 0, to = redirect(r, rep, &ask, &slot);
        if (to < 0)
            return rep;
        freeReplyObject(rep);
        if (ask) {
            RMT_INC(r, asked, 1);
        } else {
            RMT_INC(r, moved, 1);
            set_slot(r, slot, to);
            r->need_slots = true;
        }
        asking = ask;
        node = to;
    }
    rmt_error(r, RMT_ERR_OTHER, node, "too many redirects");
    return NULL;
}

/* Writes a node's pipelined buffer out, so that every node works on its
 * share while the replies of the first are read. */
static bool flush_out(redisContext *c)
{
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return false;
    return true;
}

void rmt_batch(fkv_remote *r, const char *cmd, size_t n, const char *const *keys, redisReply **replies)
{
    int *node = malloc((n ? n : 1) * sizeof *node);
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    if (!node)
        return;
    bool sent[RMT_MAX_NODES] = {false};
    for (size_t i = 0; i < n; i++) {
        node[i] = rmt_route(r, keys[i]);
        redisContext *c = rmt_conn(r, node[i]);
        if (!c) {
            node[i] = -1;
            continue;
        }
        const char *argv[2] = {cmd, keys[i]};
        size_t lens[2] = {strlen(cmd), strlen(keys[i])};
        if (redisAppendCommandArgv(c, 2, argv, lens) != REDIS_OK) {
            node[i] = -1; /* out of memory: not sent, so no reply to read */
            continue;
        }
        sent[node[i]] = true;
    }
    for (int k = 0; k < r->nnodes; k++)
        if (sent[k] && !flush_out(r->nodes[k].c)) {
            sent[k] = false;
            fail_conn(r, k);
        }
    /* replies in the order of each node's commands */
    for (size_t i = 0; i < n; i++) {
        int k = node[i];
        if (k < 0 || !sent[k])
            continue;
        redisReply *rep = NULL;
        if (redisGetReply(r->nodes[k].c, (void **)&rep) != REDIS_OK || !rep) {
            sent[k] = false;
            fail_conn(r, k);
            continue;
        }
        rmt_ok(r);
        replies[i] = rep;
    }
    /* the redirected keys, one by one (rare: only while slots move) */
    for (size_t i = 0; i < n; i++) {
        bool ask;
        int slot;
        if (replies[i] && redirect(r, replies[i], &ask, &slot) >= 0) {
            freeReplyObject(replies[i]);
            const char *argv[2] = {cmd, keys[i]};
            size_t lens[2] = {strlen(cmd), strlen(keys[i])};
            /* rmt_command routes anew and counts the redirect itself */
            replies[i] = rmt_command(r, keys[i], 2, argv, lens);
        }
    }
    free(node);
}

/* One CLUSTER SLOTS reply into map; false when it is malformed (untrusted:
 * a bad entry rejects the whole reply rather than half a map). */
static bool parse_slots(fkv_remote *r, int asked, const redisReply *rep, uint8_t *map)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0)
        return false;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
            e->element[2]->elements < 2)
            return false;
        long long from = e->element[0]->integer, to = e->element[1]->integer;
        const redisReply *host = e->element[2]->element[0], *port = e->element[2]->element[1];
        if (from < 0 || to >= RMT_SLOTS || from > to || host->type != REDIS_REPLY_STRING ||
            port->type != REDIS_REPLY_INTEGER)
            return false;
        /* an empty host is "the node you asked" */
        int nd = host->len ? node_add(r, host->str, host->len, (int)port->integer)
                           : node_add(r, r->nodes[asked].host, strlen(r->nodes[asked].host), (int)port->integer);
        if (nd < 0)
            return false;
        for (long long s = from; s <= to; s++)
            map[s] = (uint8_t)nd;
    }
    return true;
}

bool rmt_refresh_slots(fkv_remote *r)
{
    uint8_t *map = malloc(RMT_SLOTS);
    if (!map)
        return false;
    bool done = false;
    r->refreshing = true;
    for (int k = 0; k < r->nnodes && !done; k++) {
        redisContext *c = rmt_conn(r, k);
        if (!c)
            continue;
        redisReply *rep = redisCommand(c, "CLUSTER SLOTS");
        if (!rep) {
            fail_conn(r, k);
            continue;
        }
        rmt_ok(r);
        /* slots no entry names stay where they were routed */
        memcpy(map, r->slot_node, RMT_SLOTS);
        if (parse_slots(r, k, rep, map)) {
            pthread_mutex_lock(&r->mu);
            memcpy(r->slot_node, map, RMT_SLOTS);
            pthread_mutex_unlock(&r->mu);
            RMT_INC(r, slot_refreshes, 1);
            done = true;
        } else {
            rmt_error(r, RMT_ERR_OTHER, k, "malformed CLUSTER SLOTS reply");
        }
        freeReplyObject(rep);
    }
    r->refreshing = false;
    r->need_slots = !done;
    free(map);
    return done;
}
