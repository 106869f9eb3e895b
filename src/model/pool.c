#include "model/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct fkv_pool {
    uint32_t n_threads; /* including the caller */
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    uint64_t generation; /* bumped for each run; workers wait for a new one */
    int stop;
    /* the current run */
    fkv_pool_fn fn;
    void *ctx;
    uint32_t n_tasks;
    atomic_uint next;
    uint32_t busy; /* workers still inside the current run */
};

static void drain(fkv_pool *p, fkv_pool_fn fn, void *ctx, uint32_t n)
{
    for (;;) {
        unsigned i = atomic_fetch_add(&p->next, 1u);
        if (i >= n) return;
        fn(ctx, i);
    }
}

static void *worker(void *arg)
{
    fkv_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        fkv_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        uint32_t n = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        drain(p, fn, ctx, n);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

fkv_status fkv_pool_create(uint32_t n_threads, fkv_pool **out)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return FKV_EINVAL;
    fkv_pool *p = calloc(1, sizeof *p);
    if (!p) return FKV_ENOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next, 0u);
    if (n_threads > 1) {
        p->tids = calloc(n_threads - 1, sizeof *p->tids);
        if (!p->tids) {
            fkv_pool_destroy(p);
            return FKV_ENOMEM;
        }
        for (uint32_t i = 0; i + 1 < n_threads; i++) {
            if (pthread_create(&p->tids[i], NULL, worker, p) != 0) {
                p->n_threads = i + 1; /* the ones started, plus the caller */
                fkv_pool_destroy(p);
                return FKV_ENOMEM;
            }
        }
    }
    *out = p;
    return FKV_OK;
}

void fkv_pool_destroy(fkv_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; p->tids && i + 1 < p->n_threads; i++) pthread_join(p->tids[i], NULL);
    free(p->tids);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p);
}

uint32_t fkv_pool_threads(const fkv_pool *p) { return p ? p->n_threads : 1; }

void fkv_pool_run(fkv_pool *p, fkv_pool_fn fn, void *ctx, uint32_t n_tasks)
{
    if (!p || p->n_threads == 1 || n_tasks <= 1) {
        for (uint32_t i = 0; i < n_tasks; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0u);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    drain(p, fn, ctx, n_tasks);
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
