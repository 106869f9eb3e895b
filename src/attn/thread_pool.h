/* Internal side of fkv_attn_pool, the thread pool of the kernels (and of an
 * engine's forward pass): per-thread and per-call scratch. */
#ifndef FKV_ATTN_THREAD_POOL_H
#define FKV_ATTN_THREAD_POOL_H

#include "fairkv_attn.h"

/* Buffer `slot` of the pool grown to at least `bytes` (contents are not
 * kept).  Slot 0 is the call's shared buffer, slots 1..n_threads belong to
 * each thread (thread i uses slot 1+i).  Called by the kernel before it
 * dispatches work, never concurrently.  NULL on allocation failure. */
void *fkv__pool_buf(fkv_attn_pool *p, unsigned slot, size_t bytes);

#endif
