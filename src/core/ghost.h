/* A ghost queue: the keys of chunks a tier evicted, oldest first, without
 * their data, within a byte budget (each key remembers the bytes of the
 * chunk it names).  S3-FIFO's ghost (host.c, the simulator's remote
 * store): a chunk that comes back while its key is still here skips the
 * small queue.  Pure: no cache state, so any floor above the core may use
 * it.  Keys are 64-bit page keys (any value, 0 included). */
#ifndef FKV_CORE_GHOST_H
#define FKV_CORE_GHOST_H

#include <stdint.h>

typedef struct fkv__ghost fkv__ghost;

fkv__ghost *fkv__ghost_new(void); /* NULL when out of memory */
void fkv__ghost_free(fkv__ghost *g);
/* Appends key (moved to the newest place if held), then drops the oldest
 * keys while the bytes held exceed budget.  -1 when out of memory (the
 * ghost is then as before, less key). */
int fkv__ghost_add(fkv__ghost *g, uint64_t key, uint64_t bytes, uint64_t budget);
/* 1 if key is held: it leaves the ghost.  0 otherwise. */
int fkv__ghost_take(fkv__ghost *g, uint64_t key);
uint64_t fkv__ghost_count(const fkv__ghost *g); /* keys held */
uint64_t fkv__ghost_bytes(const fkv__ghost *g); /* their bytes */

#endif
