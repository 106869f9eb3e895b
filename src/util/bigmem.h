/* Large zeroed buffers that cost nothing until written: the K/V arrays of
 * the page pool (and the buffers `fairkv micro attn` reads, so that it
 * measures what the pool gives).
 *
 * An anonymous mapping reads as zeros and gets memory page by page on first
 * write.  One of 2 MiB or more is also aligned to 2 MiB, and with
 * FAIRKV_KV_HUGEPAGES=1 marked for transparent huge pages (honoured when
 * the system's THP mode is "madvise" or "always"): decode attention walks a
 * pool of hundreds of MiB, whose 4 KiB pages miss the TLB on almost every
 * page, and a 2 MiB page covers 512 of them.  Not by default: memory then
 * becomes resident 2 MiB at a time where first written, and a server step
 * that first writes a new 2 MiB of every layer's K and V stalls for tens of
 * milliseconds (docs/EVALUATION.md 2, "K/V in huge pages" and "Huge pages
 * on the real server").  Without mmap: aligned to 64 bytes and zeroed. */
#ifndef FKV_UTIL_BIGMEM_H
#define FKV_UTIL_BIGMEM_H

#include <stddef.h>

/* bytes > 0; NULL when out of memory */
void *fkv__big_alloc(size_t bytes);
/* whether fkv__big_alloc marks its buffers for huge pages
 * (FAIRKV_KV_HUGEPAGES=1, read at each call) */
int fkv__big_hugepages(void);
/* p from fkv__big_alloc(bytes), with the same bytes; NULL does nothing */
void fkv__big_free(void *p, size_t bytes);

#endif
