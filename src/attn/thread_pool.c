/* A small fixed thread pool.  One run at a time: the caller publishes
 * (fn, ctx, n) under the lock and bumps a generation counter; workers and
 * the caller then claim item indices from one atomic counter, so uneven
 * items (sequences of different lengths) balance themselves; the caller
 * waits until every worker has left the generation. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn/thread_pool.h"

struct fkv_attn_pool {
    unsigned n;                     /* threads in all, the caller included */
    pthread_t *th;                  /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t gen;                   /* bumped per run (under mu) */
    unsigned busy;                  /* workers not yet done with gen */
    int stop;
    void (*fn)(void *, size_t, unsigned);
    void *ctx;
    size_t n_items;
    atomic_size_t next;
    void **buf;                     /* [n+1] scratch, see pool.h */
    size_t *cap;
};

struct worker_arg {
    fkv_attn_pool *p;
    unsigned id;
};

static void drain(fkv_attn_pool *p, unsigned id)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n_items) return;
        p->fn(p->ctx, i, id);
    }
}

static void *worker(void *arg)
{
    struct worker_arg *wa = arg;
    fkv_attn_pool *p = wa->p;
    unsigned id = wa->id;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->stop) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

fkv_status fkv_attn_pool_create(unsigned n_threads, fkv_attn_pool **out)
{
    if (!out) return FKV_EINVAL;
    *out = NULL;
    if (n_threads == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (unsigned)c : 1u;
    }
    if (n_threads > 1024) return FKV_EINVAL;
    fkv_attn_pool *p = calloc(1, sizeof *p);
    if (!p) return FKV_ENOMEM;
    p->n = n_threads;
    p->buf = calloc(n_threads + 1, sizeof *p->buf);
    p->cap = calloc(n_threads + 1, sizeof *p->cap);
    p->th = calloc(n_threads, sizeof *p->th);
    if (!p->buf || !p->cap || !p->th) {
        free(p->buf), free(p->cap), free(p->th), free(p);
        return FKV_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->next, 0);
    for (unsigned i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (struct worker_arg){p, i};
        if (!wa || pthread_create(&p->th[i - 1], NULL, worker, wa)) {
            free(wa);
            p->n = i; /* the threads started so far are joined by destroy */
            fkv_attn_pool_destroy(p);
            return FKV_ENOMEM;
        }
    }
    *out = p;
    return FKV_OK;
}

void fkv_attn_pool_destroy(fkv_attn_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 1; i < p->n; i++) pthread_join(p->th[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    for (unsigned i = 0; i <= p->n; i++) free(p->buf[i]);
    free(p->buf), free(p->cap), free(p->th), free(p);
}

unsigned fkv_attn_pool_threads(const fkv_attn_pool *p) { return p ? p->n : 1u; }

void fkv_attn_pool_run(fkv_attn_pool *p, size_t n, void (*fn)(void *, size_t, unsigned), void *ctx)
{
    if (!p || p->n == 1 || n <= 1) {
        for (size_t i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void *fkv__pool_buf(fkv_attn_pool *p, unsigned slot, size_t bytes)
{
    if (slot > p->n) return NULL;
    if (p->cap[slot] < bytes) {
        free(p->buf[slot]);
        /* 64-byte aligned so tiles start on cache lines */
        size_t sz = (bytes + 63) & ~(size_t)63;
        p->buf[slot] = aligned_alloc(64, sz);
        p->cap[slot] = p->buf[slot] ? sz : 0;
    }
    return p->buf[slot];
}
