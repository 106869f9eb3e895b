/* Growable arrays: one doubling rule for every dynamic array of the
 * project's tools (scheduler, engine). */
#ifndef FKV_UTIL_ARRAY_H
#define FKV_UTIL_ARRAY_H

#include <stddef.h>

/* Grows the array *pp (elements of elem bytes, *cap of them) to hold at
 * least need elements, doubling from 16; 0 on success, -1 when out of
 * memory (the array is then unchanged). */
int fkv_grow(void *pp, size_t *cap, size_t need, size_t elem);

#endif
