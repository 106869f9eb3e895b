/* A small fixed thread pool: fkv_pool_run() calls fn(ctx, i) for every task
 * i in [0, n_tasks) across the workers and the calling thread, and returns
 * when all are done.  Tasks are handed out by an atomic counter, so which
 * thread runs a task varies but each task's arithmetic does not: results do
 * not depend on the thread count. */
#ifndef FKV_ENGINE_POOL_H
#define FKV_ENGINE_POOL_H

#include <stdint.h>

#include "fairkv.h"

typedef struct fkv_pool fkv_pool;
typedef void (*fkv_pool_fn)(void *ctx, uint32_t task);

/* n_threads >= 1 counts the caller: 1 means no extra threads. */
fkv_status fkv_pool_create(uint32_t n_threads, fkv_pool **out);
void fkv_pool_destroy(fkv_pool *p);
uint32_t fkv_pool_threads(const fkv_pool *p);
/* p may be NULL: runs inline. */
void fkv_pool_run(fkv_pool *p, fkv_pool_fn fn, void *ctx, uint32_t n_tasks);

#endif
