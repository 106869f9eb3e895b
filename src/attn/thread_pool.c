/* A small fixed thread pool.  One run at a time: the caller publishes
 * (fn, ctx, n) under the lock and bumps a generation counter; workers and
 * the caller then claim item indices from one atomic counter, so uneven
 * items (sequences of different lengths) balance themselves; the caller
 * waits until every worker has left the generation.
 *
 * Waiting spins first, then blocks: an engine step is dozens of runs a few
 * microseconds apart (one per matrix product and per attention call), and a
 * worker put to sleep on the condition variable between them is woken by
 * the kernel tens of microseconds later each time.  So a worker that has
 * finished its items watches the generation for a while (FAIRKV_POOL_SPIN_US,
 * default 200 microseconds) before it sleeps, and the caller watches the
 * workers' count the same way before it sleeps; between steps, when the
 * pool idles for longer, everyone sleeps as before.  A watcher yields the
 * CPU every 16 looks: a server's HTTP threads share the cores, and a request
 * they have not read yet misses the next step (measured: docs/EVALUATION.md
 * section 4, "The pool's waits").  FAIRKV_POOL_SPIN_US=0 blocks at once. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "attn/thread_pool.h"

#define SPIN_US_DEFAULT 200

struct fkv_attn_pool {
    unsigned n;                     /* threads in all, the caller included */
    pthread_t *th;                  /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t gen;       /* bumped per run (under mu) */
    atomic_uint busy;               /* workers not yet done with gen */
    atomic_int stop;
    long spin_ns;                   /* how long a waiter spins before it sleeps */
    void (*fn)(void *, size_t, unsigned);
    void *ctx;
    size_t n_items;
    atomic_size_t next;
    void **buf;                     /* [n+1] scratch, see pool.h */
    size_t *cap;
};

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* The k-th look (k from 1) of a watcher that began at t0: a pause, or every
 * 16 looks a yield of the CPU; 0 once its spin is spent (read every 64
 * looks) or when there is none, and the watcher should sleep. */
static int spin_on(const fkv_attn_pool *p, unsigned k, long t0)
{
    if (p->spin_ns <= 0) return 0;
    if (!(k & 15)) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
    return (k & 63) || now_ns() - t0 <= p->spin_ns;
}

/* FAIRKV_POOL_SPIN_US: 0..100000 microseconds; anything else the default */
static long spin_ns_setting(void)
{
    const char *e = getenv("FAIRKV_POOL_SPIN_US");
    if (!e || !*e) return SPIN_US_DEFAULT * 1000L;
    char *end;
    long us = strtol(e, &end, 10);
    return *end || us < 0 || us > 100000 ? SPIN_US_DEFAULT * 1000L : us * 1000L;
}

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

/* no new run since the worker's last, and no stop */
static int idle(fkv_attn_pool *p, uint64_t seen)
{
    return atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !atomic_load(&p->stop);
}

static void *worker(void *arg)
{
    struct worker_arg *wa = arg;
    fkv_attn_pool *p = wa->p;
    unsigned id = wa->id;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        long t0 = p->spin_ns > 0 ? now_ns() : 0;
        for (unsigned k = 1; idle(p, seen); k++)
            if (!spin_on(p, k, t0)) {
                pthread_mutex_lock(&p->mu);
                while (idle(p, seen)) pthread_cond_wait(&p->cv_work, &p->mu);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        if (atomic_load(&p->stop)) break;
        /* acquire: the run's fn, ctx and n_items were written before gen */
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        drain(p, id);
        if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
            /* the last one out: wake the caller if it sleeps (it checks
             * busy under the lock before it waits) */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->busy, 0);
    atomic_init(&p->stop, 0);
    p->spin_ns = spin_ns_setting();
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
    atomic_store(&p->stop, 1);
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
    atomic_store_explicit(&p->busy, p->n - 1, memory_order_relaxed);
    /* release: a worker that sees the new generation sees the run */
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    long t0 = p->spin_ns > 0 ? now_ns() : 0;
    for (unsigned k = 1; atomic_load_explicit(&p->busy, memory_order_acquire); k++)
        if (!spin_on(p, k, t0)) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load_explicit(&p->busy, memory_order_acquire)) pthread_cond_wait(&p->cv_done, &p->mu);
            pthread_mutex_unlock(&p->mu);
            break;
        }
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
