/* The simulator's remote tier: a shared KV store below the host tier.
 *
 * What it models is the project's Redis tier (src/remote) seen from one
 * server: chunks named by a chained prefix hash salted by the tenant's
 * namespace (so two tenants' equal prompts never meet), LRU (or S3-FIFO,
 * ARC: fkv_remote_store_policy) over whole
 * chunks within a capacity in bytes, written back at request end (every
 * full chunk of the request's prompt and output), read at admission after
 * the device and host match.  No bytes are kept: an entry is its key.
 *
 * Keys: h(-1) = mix(namespace), h(k) = mix over the chunk's token ids
 * (fkv_req_token) chained from h(k-1); the namespace is the cache's prefix
 * namespace, (tenant, cache_salt).  64-bit keys: at the simulator's sizes
 * (at most millions of chunks) a collision has probability below 1e-6.
 *
 * Timing (priced by the simulator, not here): a fetch costs its whole
 * chunks' bytes over the network bandwidth plus one round trip, inside the
 * admitting step and not overlapped with its compute; write-back is not
 * priced (the real client queues puts and returns at once). */
#ifndef FKV_SIM_REMOTE_STORE_H
#define FKV_SIM_REMOTE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"
#include "sim/req_tokens.h"

typedef struct fkv_remote_store fkv_remote_store;

typedef struct fkv_remote_store_stats {
    uint64_t lookups, hit_chunks, puts, evictions, entries;
    uint64_t refused; /* chunks the admission filter kept out (fkv_remote_store_admit) */
} fkv_remote_store_stats;

/* capacity_chunks > 0 chunks of chunk_tokens each; max_keys bounds how many
 * distinct chunks the run can write (sizes the table); tokens: the
 * requests' token sources, as the scheduler's (fkv_req_token; copied, its
 * src borrowed: it must outlive the store; NULL: no sources). NULL on a
 * bad argument or no memory. */
fkv_remote_store *fkv_remote_store_create(uint64_t capacity_chunks, uint32_t chunk_tokens,
                                          const fkv_sim_tokens *tokens, uint64_t max_keys);
void fkv_remote_store_free(fkv_remote_store *st);

/* Tokens of r held from `from` on, whole chunks in a row, ending at or below
 * limit; *fetched_tokens gets the chunks' tokens (the first one may start
 * before from).  Hits are reads of the order (LRU: to the front).  fkv_sched_config.below (through the simulator). */
uint32_t fkv_remote_store_find(void *st, const fkv_req *r, uint32_t from, uint32_t limit, uint64_t *fetched_tokens);

/* Write-back at request end: every full chunk of r's first `len` tokens
 * (inserted, or moved to the front). */
void fkv_remote_store_put(fkv_remote_store *st, const fkv_req *r, uint32_t len);

/* Admission at write-back (src/core/admit.h, fairkv.h's tier_admission):
 * each put is a sighting of every full chunk of the request; a chunk not
 * held yet is written only when its count passes the test (SEEN: at least
 * threshold; TINYLFU: with the store full, at least the count of the entry
 * the order would push out first), and the chunks before it in the request did
 * too (prefix closure: the first refused chunk ends the write).  0, or -1
 * when out of memory. */
int fkv_remote_store_admit(fkv_remote_store *st, int mode, uint64_t window, uint32_t threshold);

/* The eviction order (an fkv_host_policy: lru, the default; s3fifo; arc),
 * counted in entries as the host tier's is in bytes (src/core/host.c):
 * s3fifo's small FIFO holds a tenth of the capacity, its ghost as many
 * keys as the main FIFO; arc's target p in entries.  A read (a find, or a
 * put of a held chunk) is lru's move to the front, s3fifo's frequency + 1,
 * arc's move to T2's front.  Prefix closure: lru touches a run last first,
 * so a prefix is never older than what extends it; s3fifo and arc keep it
 * only as well as their reads do (every read of an extension reads its
 * prefix too), not strictly.  Before the first put; 0, or -1 on a bad
 * policy or no memory. */
int fkv_remote_store_policy(fkv_remote_store *st, int policy);

void fkv_remote_store_stats_get(const fkv_remote_store *st, fkv_remote_store_stats *out);

#endif
