/* Memory for the large tables the cache probes at random.
 *
 * The prefix index is probed at a random place for every page matched,
 * inserted or evicted; with 4 KiB pages such a probe into a table of
 * megabytes also misses the TLB, and a software prefetch then waits for
 * the page walk.  On Linux a table of 2 MiB or more is aligned to 2 MiB
 * and marked for transparent huge pages (honoured when the system's THP
 * mode is "madvise" or "always"; otherwise nothing changes). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <stdlib.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "core/internal.h"

void *fkv__table_alloc(size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= huge) {
        size_t rounded = (bytes + huge - 1) / huge * huge;
        void *p = NULL;
        if (posix_memalign(&p, huge, rounded) != 0) return NULL;
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice: failure only costs speed */
        return p;
    }
#endif
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}
