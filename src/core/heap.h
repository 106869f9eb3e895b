/* The indexed 4-ary min-heap of chunks (heap.c), used by the key-ordered
 * policies and by the cache's TTL tier. */
#ifndef FKV_CORE_HEAP_H
#define FKV_CORE_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/chunk.h"

/* A heap entry: 16 bytes, so a node's four children fill one cache line
 * (heap.c aligns them).  The key is stored as the bits of the double
 * mapped so that unsigned integer order is the numeric order
 * (fkv__key_enc); ties, rare, are broken by the chunk's id. */
typedef struct fkv__hent {
    uint64_t key; /* fkv__key_enc of the key */
    fkv__chunk *ch;
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
    fkv__hent *a; /* a[0] is the minimum; each chunk stores its position + 1 */
    uint32_t n, cap;
    void *mem;    /* the allocation a points into */
} fkv__heap;

/* heap.c: indexed 4-ary min-heap on (key, chunk id); idx_off is the
 * offset of the chunk's uint32_t position field */
fkv_status fkv__heap_push(fkv__heap *h, fkv__chunk *ch, double key, size_t idx_off);
void fkv__heap_remove(fkv__heap *h, fkv__chunk *ch, size_t idx_off);
void fkv__heap_fix(fkv__heap *h, fkv__chunk *ch, double key, size_t idx_off);
void fkv__heap_free(fkv__heap *h);

#endif
