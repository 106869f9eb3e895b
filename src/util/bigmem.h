/* Large zeroed buffers that cost nothing until written: the K/V arrays of
 * the page pool (and the buffers `fairkv micro attn` reads, so that it
 * measures what the pool gives).
 *
 * An anonymous mapping reads as zeros and gets memory page by page on first
 * write.  One of 2 MiB or more is also aligned to 2 MiB and marked for
 * transparent huge pages (honoured when the system's THP mode is "madvise"
 * or "always"): decode attention walks a pool of hundreds of MiB, whose
 * 4 KiB pages miss the TLB on almost every page, and a 2 MiB page covers
 * 512 of them (docs/EVALUATION.md 2, "K/V in huge pages").  Memory then
 * becomes resident 2 MiB at a time where written.  Without mmap: aligned
 * to 64 bytes and zeroed. */
#ifndef FKV_UTIL_BIGMEM_H
#define FKV_UTIL_BIGMEM_H

#include <stddef.h>

/* bytes > 0; NULL when out of memory */
void *fkv__big_alloc(size_t bytes);
/* p from fkv__big_alloc(bytes), with the same bytes; NULL does nothing */
void fkv__big_free(void *p, size_t bytes);

#endif
