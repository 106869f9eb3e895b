/* An indexed 4-ary min-heap of items ordered by (key, id), used by the
 * cache's key-ordered policies and its TTL tier (items are chunks there).
 * Each item holds a uint32_t position field (at idx_off) and a uint64_t id
 * (at id_off), both set once by fkv__heap_init. */
#ifndef FKV_UTIL_HEAP_H
#define FKV_UTIL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

/* A heap entry: 16 bytes, so a node's four children fill one cache line
 * (heap.c aligns them).  The key is stored as the bits of the double
 * mapped so that unsigned integer order is the numeric order
 * (fkv__key_enc); ties, rare, are broken by the item's id. */
typedef struct fkv__hent {
    uint64_t key; /* fkv__key_enc of the key */
    void *item;
} fkv__hent;

/* Order-preserving map of a double (not NaN) to uint64: positive values
 * get the sign bit set, negative ones are inverted; -0.0 and +0.0 map
 * to the same value. */
static inline uint64_t fkv__key_enc(double d)
{
    union { double d; uint64_t u; } x = {d + 0.0};
    return (x.u >> 63) ? ~x.u : x.u | (1ull << 63);
}

typedef struct fkv__heap {
    fkv__hent *a;   /* a[0] is the minimum; each item stores its position + 1 */
    uint32_t n, cap;
    void *mem;      /* the allocation a points into */
    size_t idx_off; /* offset of the item's uint32_t position field */
    size_t id_off;  /* offset of the item's uint64_t id (ties) */
} fkv__heap;

/* An empty heap (no memory yet). */
void fkv__heap_init(fkv__heap *h, size_t idx_off, size_t id_off);
fkv_status fkv__heap_push(fkv__heap *h, void *item, double key);
void fkv__heap_remove(fkv__heap *h, void *item);
void fkv__heap_fix(fkv__heap *h, void *item, double key);
void fkv__heap_free(fkv__heap *h); /* empty again, offsets kept */

#endif
