/* Future prefix reads of cached pages, for the simulator's Belady scheme
 * (see oracle.c). */
#ifndef FKV_SIM_ORACLE_H
#define FKV_SIM_ORACLE_H

#include <stdint.h>

#include "sim/workload.h"

typedef struct fkv_oracle fkv_oracle;

/* NULL when out of memory (the caller then treats cached chunks as never
 * read again). */
fkv_oracle *fkv_oracle_build(const fkv_workload *w, uint32_t page_tokens, uint32_t block_tokens);
void fkv_oracle_free(fkv_oracle *o);

/* Time of the next read of the page with this prefix key by a request at
 * index >= frontier that has not started (its arrival, or now if it already
 * waits); INT64_MAX if none.  reqs: the simulation's live request array. */
int64_t fkv_oracle_next(const fkv_oracle *o, uint64_t key, const fkv_req *reqs, size_t frontier, int64_t now);

#endif
