/* The client: its queues, its worker thread, and the calls.  The caller's
 * thread never talks to Redis: put queues (or drops), the others queue a
 * request and wait for it at most timeout_ms; a request the caller gave up
 * on is finished by the worker and freed there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote/internal.h"
#include "util/err.h"

typedef struct rmt_put {
    fkv_remote_key key;
    uint8_t *value; /* header + payload */
    size_t len;
    struct rmt_put *next;
} rmt_put;

typedef enum { REQ_GET, REQ_EXISTS, REQ_DEL } req_kind;

typedef struct rmt_req {
    req_kind kind;
    size_t n;
    fkv_remote_key *keys; /* copies: the caller may be gone when it runs */
    fkv_remote_value *values;
    bool *flags;
    int result;
    bool done, abandoned;
    struct rmt_req *next;
} rmt_req;

void fkv_remote_config_default(fkv_remote_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->nodes = "127.0.0.1:6379";
    cfg->timeout_ms = 100;
    cfg->ttl_s = 3600;
    cfg->queue_max = 1024;
    cfg->backoff_min_ms = 50;
    cfg->backoff_max_ms = 2000;
}

static void req_free(rmt_req *q)
{
    if (q->values)
        fkv_remote_values_free(q->values, q->n);
    free(q->values);
    free(q->flags);
    free(q->keys);
    free(q);
}

/* One GET reply for key k: a hit only when the value checks out. */
static void take_value(fkv_remote *r, const fkv_remote_key *k, const redisReply *rep, fkv_remote_value *out)
{
    if (!rep || rep->type == REDIS_REPLY_NIL)
        return;
    if (rep->type != REDIS_REPLY_STRING) {
        if (rep->type == REDIS_REPLY_ERROR)
            rmt_reply_error(r, rmt_route(r, k->str), rep);
        return;
    }
    RMT_INC(r, bytes_read, rep->len);
    const uint8_t *p;
    size_t len;
    if (fkv_remote_value_check(k, (const uint8_t *)rep->str, rep->len, &p, &len) != FKV_REMOTE_VALUE_OK) {
        RMT_INC(r, corrupt, 1);
        return;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return;
    memcpy(copy, p, len);
    out->data = copy;
    out->len = len;
}

static void run_req(fkv_remote *r, rmt_req *q)
{
    const char **names = malloc((q->n ? q->n : 1) * sizeof *names);
    redisReply **reps = calloc(q->n ? q->n : 1, sizeof *reps);
    q->result = -1;
    if (!names || !reps)
        goto out;
    for (size_t i = 0; i < q->n; i++)
        names[i] = q->keys[i].str;
    static const char *const cmd[] = {"GET", "EXISTS", "DEL"};
    rmt_batch(r, cmd[q->kind], q->n, names, reps);
    int count = 0;
    bool all = true;
    for (size_t i = 0; i < q->n; i++) {
        const redisReply *rep = reps[i];
        if (q->kind == REQ_GET) {
            take_value(r, &q->keys[i], rep, &q->values[i]);
            if (q->values[i].data) {
                count++;
                rmt_index_touch(&r->index, names[i]);
            }
            continue;
        }
        bool ok = rep && rep->type == REDIS_REPLY_INTEGER;
        if (rep && rep->type == REDIS_REPLY_ERROR)
            rmt_reply_error(r, rmt_route(r, names[i]), rep);
        all = all && ok;
        if (ok && rep->integer > 0) {
            count++;
            if (q->kind == REQ_EXISTS)
                q->flags[i] = true;
        }
        if (ok && q->kind == REQ_DEL)
            rmt_index_forget(&r->index, names[i]);
    }
    q->result = q->kind == REQ_GET || all ? count : -1;
    if (q->kind == REQ_DEL)
        RMT_INC(r, deletes, count);
out:
    for (size_t i = 0; reps && i < q->n; i++)
        freeReplyObject(reps[i]);
    free(reps);
    free(names);
}

static uint64_t quota_of(fkv_remote *r, const char *ns)
{
    pthread_mutex_lock(&r->mu);
    uint64_t q = r->cfg.default_quota;
    for (size_t i = 0; i < r->nquotas; i++)
        if (strcmp(r->quotas[i].ns, ns) == 0)
            q = r->quotas[i].bytes;
    pthread_mutex_unlock(&r->mu);
    return q;
}

/* The tenant's least recently used leaves go until it fits its quota.  A
 * DEL that fails still forgets the key: the TTL removes it in time, and an
 * index that kept it would retry it on every put. */
static void enforce_quota(fkv_remote *r, const char *ns)
{
    uint64_t quota = quota_of(r, ns);
    rmt_tenant *t = rmt_index_tenant(&r->index, ns);
    rmt_entry *v;
    while (quota && t && t->bytes > quota && (v = rmt_index_victim(t)) != NULL) {
        const char *argv[2] = {"DEL", v->key};
        size_t lens[2] = {3, strlen(v->key)};
        redisReply *rep = rmt_command(r, v->key, 2, argv, lens);
        if (rep && rep->type == REDIS_REPLY_INTEGER)
            RMT_INC(r, quota_deletes, rep->integer > 0);
        else if (rep && rep->type == REDIS_REPLY_ERROR)
            rmt_reply_error(r, rmt_route(r, v->key), rep);
        freeReplyObject(rep);
        rmt_index_forget(&r->index, v->key);
    }
}

static void run_put(fkv_remote *r, rmt_put *p)
{
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%d", r->cfg.ttl_s);
    const char *argv[5] = {"SET", p->key.str, (const char *)p->value, "EX", ttl};
    size_t lens[5] = {3, strlen(p->key.str), p->len, 2, strlen(ttl)};
    redisReply *rep = rmt_command(r, p->key.str, 5, argv, lens);
    bool ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep && rep->type == REDIS_REPLY_ERROR)
        rmt_reply_error(r, rmt_route(r, p->key.str), rep);
    freeReplyObject(rep);
    if (!ok) {
        RMT_INC(r, put_fails, 1);
        return;
    }
    RMT_INC(r, bytes_written, p->len);
    rmt_index_wrote(&r->index, &p->key, p->len + strlen(p->key.str));
    enforce_quota(r, p->key.ns);
}

/* Requests before puts: a get has a caller waiting, a put has none. */
static void *worker_main(void *arg)
{
    fkv_remote *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        if (r->req_head) {
            rmt_req *q = r->req_head;
            r->req_head = q->next;
            if (!r->req_head)
                r->req_tail = NULL;
            pthread_mutex_unlock(&r->mu);
            run_req(r, q);
            pthread_mutex_lock(&r->mu);
            if (q->abandoned) {
                req_free(q);
            } else {
                q->done = true;
                pthread_cond_broadcast(&r->done_cv);
            }
        } else if (r->put_head) {
            rmt_put *p = r->put_head;
            r->put_head = p->next;
            if (!r->put_head)
                r->put_tail = NULL;
            r->put_n--;
            pthread_mutex_unlock(&r->mu);
            run_put(r, p);
            free(p->value);
            free(p);
            pthread_mutex_lock(&r->mu);
            r->put_done++;
            pthread_cond_broadcast(&r->done_cv);
        } else {
            pthread_mutex_unlock(&r->mu);
            /* a slot map left stale by a MOVED, or never loaded */
            if (r->cfg.cluster && r->need_slots)
                rmt_refresh_slots(r);
            pthread_mutex_lock(&r->mu);
            if (!r->stop && !r->req_head && !r->put_head)
                pthread_cond_wait(&r->work_cv, &r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

fkv_remote *fkv_remote_open(const fkv_remote_config *cfg, char *err, size_t errlen)
{
    if (!cfg || cfg->timeout_ms <= 0 || cfg->ttl_s <= 0 || cfg->queue_max == 0 || cfg->backoff_min_ms <= 0 ||
        cfg->backoff_max_ms < cfg->backoff_min_ms) {
        fkv_errf(err, errlen, FKV_EINVAL, "remote: timeout_ms, ttl_s, queue_max, backoff_min_ms > 0 and "
                                          "backoff_max_ms >= backoff_min_ms");
        return NULL;
    }
    fkv_remote *r = calloc(1, sizeof *r);
    if (!r) {
        fkv_errf(err, errlen, FKV_ENOMEM, "remote: out of memory");
        return NULL;
    }
    r->cfg = *cfg;
    r->cfg.nodes = NULL; /* the caller's string; the seeds are copied */
    r->burst = RMT_ERR_NONE;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&r->work_cv, NULL);
    if (!rmt_add_seeds(r, cfg->nodes, err, errlen))
        goto fail;
    /* the first connection and slot map before the worker starts, so a
     * healthy server is in use from the first call; a down one is retried */
    if (rmt_conn(r, 0) && cfg->cluster)
        rmt_refresh_slots(r);
    if (pthread_create(&r->worker, NULL, worker_main, r) != 0) {
        fkv_errf(err, errlen, FKV_ENOMEM, "remote: cannot start the worker thread");
        goto fail;
    }
    return r;
fail:
    rmt_close_nodes(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->done_cv);
    free(r);
    return NULL;
}

void fkv_remote_close(fkv_remote *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->worker, NULL);
    for (rmt_put *p = r->put_head, *next; p; p = next) {
        next = p->next;
        free(p->value);
        free(p);
    }
    /* no caller waits any more (close is the last call): abandoned ones */
    for (rmt_req *q = r->req_head, *next; q; q = next) {
        next = q->next;
        req_free(q);
    }
    rmt_close_nodes(r);
    rmt_index_free(&r->index);
    free(r->quotas);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->done_cv);
    free(r);
}

fkv_status fkv_remote_set_quota(fkv_remote *r, const char *ns, uint64_t bytes)
{
    if (!r || !ns || strlen(ns) == 0 || strlen(ns) > FKV_REMOTE_NAME_MAX)
        return fkv__fail(FKV_EINVAL, "remote quota: bad namespace");
    pthread_mutex_lock(&r->mu);
    size_t i = 0;
    while (i < r->nquotas && strcmp(r->quotas[i].ns, ns) != 0)
        i++;
    if (i == r->nquotas) {
        struct rmt_quota *q = realloc(r->quotas, (r->nquotas + 1) * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&r->mu);
            return fkv__fail(FKV_ENOMEM, "remote quota: out of memory");
        }
        r->quotas = q;
        snprintf(q[i].ns, sizeof q[i].ns, "%s", ns);
        r->nquotas++;
    }
    r->quotas[i].bytes = bytes;
    pthread_mutex_unlock(&r->mu);
    return FKV_OK;
}

bool fkv_remote_put(fkv_remote *r, const fkv_remote_key *key, const void *payload, size_t len)
{
    size_t want = fkv_remote_payload_bytes(key);
    if ((want && len != want) || (len && !payload) || len > SIZE_MAX - FKV_REMOTE_HEADER_BYTES) {
        RMT_INC(r, put_drops, 1);
        return false;
    }
    /* the copy is made before the lock, and thrown away when full: the
     * caller pays a memcpy, never a wait on the worker */
    pthread_mutex_lock(&r->mu);
    bool full = r->put_n >= r->cfg.queue_max;
    pthread_mutex_unlock(&r->mu);
    rmt_put *p = full ? NULL : malloc(sizeof *p);
    uint8_t *v = p ? malloc(FKV_REMOTE_HEADER_BYTES + len) : NULL;
    if (!v) {
        free(p);
        RMT_INC(r, put_drops, 1);
        return false;
    }
    fkv_remote_value_encode(key, payload, len, v);
    p->key = *key;
    p->value = v;
    p->len = FKV_REMOTE_HEADER_BYTES + len;
    p->next = NULL;
    pthread_mutex_lock(&r->mu);
    if (r->put_n >= r->cfg.queue_max) {
        pthread_mutex_unlock(&r->mu);
        free(v);
        free(p);
        RMT_INC(r, put_drops, 1);
        return false;
    }
    if (r->put_tail)
        r->put_tail->next = p;
    else
        r->put_head = p;
    r->put_tail = p;
    r->put_n++;
    r->put_seq++;
    pthread_cond_signal(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
    RMT_INC(r, puts, 1);
    return true;
}

static struct timespec deadline(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    return ts;
}

bool fkv_remote_flush(fkv_remote *r, int timeout_ms)
{
    struct timespec until = deadline(timeout_ms);
    pthread_mutex_lock(&r->mu);
    uint64_t target = r->put_seq;
    int rc = 0;
    while (r->put_done < target && rc == 0)
        rc = pthread_cond_timedwait(&r->done_cv, &r->mu, &until);
    bool ok = r->put_done >= target;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* Queues q and waits for it at most timeout_ms; true when it was done (the
 * caller then frees it), false when the worker will. */
static bool submit(fkv_remote *r, rmt_req *q)
{
    struct timespec until = deadline(r->cfg.timeout_ms);
    pthread_mutex_lock(&r->mu);
    if (r->req_tail)
        r->req_tail->next = q;
    else
        r->req_head = q;
    r->req_tail = q;
    pthread_cond_signal(&r->work_cv);
    int rc = 0;
    while (!q->done && rc == 0)
        rc = pthread_cond_timedwait(&r->done_cv, &r->mu, &until);
    bool done = q->done;
    if (!done)
        q->abandoned = true;
    pthread_mutex_unlock(&r->mu);
    if (!done)
        RMT_INC(r, gave_up, 1);
    return done;
}

static rmt_req *req_new(req_kind kind, const fkv_remote_key *keys, size_t n)
{
    rmt_req *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->kind = kind;
    q->n = n;
    q->keys = malloc((n ? n : 1) * sizeof *keys);
    q->values = kind == REQ_GET ? calloc(n ? n : 1, sizeof *q->values) : NULL;
    q->flags = calloc(n ? n : 1, sizeof *q->flags);
    if (!q->keys || !q->flags || (kind == REQ_GET && !q->values)) {
        req_free(q);
        return NULL;
    }
    memcpy(q->keys, keys, n * sizeof *keys);
    return q;
}

size_t fkv_remote_get(fkv_remote *r, const fkv_remote_key *keys, size_t n, fkv_remote_value *out)
{
    memset(out, 0, n * sizeof *out);
    RMT_INC(r, gets, n);
    rmt_req *q = n ? req_new(REQ_GET, keys, n) : NULL;
    size_t hits = 0;
    if (q && submit(r, q)) {
        /* the payloads move to the caller */
        for (size_t i = 0; i < n; i++)
            if ((out[i] = q->values[i]).data)
                hits++;
        free(q->values);
        q->values = NULL;
        req_free(q);
    }
    RMT_INC(r, hits, hits);
    RMT_INC(r, misses, n - hits);
    return hits;
}

void fkv_remote_values_free(fkv_remote_value *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].data);
        v[i].data = NULL;
        v[i].len = 0;
    }
}

int fkv_remote_exists(fkv_remote *r, const fkv_remote_key *keys, size_t n, bool *out)
{
    memset(out, 0, n * sizeof *out);
    rmt_req *q = req_new(REQ_EXISTS, keys, n);
    if (!q || !submit(r, q))
        return -1;
    int res = q->result;
    if (res >= 0)
        memcpy(out, q->flags, n * sizeof *out);
    req_free(q);
    return res;
}

int fkv_remote_del(fkv_remote *r, const fkv_remote_key *keys, size_t n)
{
    rmt_req *q = req_new(REQ_DEL, keys, n);
    if (!q || !submit(r, q))
        return -1;
    int res = q->result;
    req_free(q);
    return res;
}

void fkv_remote_get_counters(fkv_remote *r, fkv_remote_counters *out)
{
#define RMT_COPY(name) out->name = atomic_load_explicit(&r->n.name, memory_order_relaxed);
    RMT_COUNTERS(RMT_COPY)
#undef RMT_COPY
}

bool fkv_remote_route(fkv_remote *r, const char *key, char *buf, size_t len)
{
    pthread_mutex_lock(&r->mu);
    int k = rmt_route(r, key);
    bool ok = k >= 0 && k < r->nnodes;
    if (ok)
        snprintf(buf, len, "%s:%d", r->nodes[k].host, r->nodes[k].port);
    pthread_mutex_unlock(&r->mu);
    return ok;
}
