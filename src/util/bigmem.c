/* The large buffers of bigmem.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include "util/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define FKV_BIG_MMAP 1
#endif

#define BIG_PAGE ((size_t)2 << 20)

#ifdef FKV_BIG_MMAP
/* what is mapped for bytes: whole 2 MiB pages from 2 MiB up */
static size_t mapped(size_t bytes)
{
    return bytes >= BIG_PAGE ? (bytes + BIG_PAGE - 1) / BIG_PAGE * BIG_PAGE : bytes;
}
#endif

int fkv__big_hugepages(void)
{
    const char *e = getenv("FAIRKV_KV_HUGEPAGES");
    return e && !strcmp(e, "1");
}

void *fkv__big_alloc(size_t bytes)
{
    if (!bytes) return NULL;
#ifdef FKV_BIG_MMAP
    size_t len = mapped(bytes);
    if (len < BIG_PAGE) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* map 2 MiB more, then unmap what lies outside the aligned range */
    if (len > SIZE_MAX - BIG_PAGE) return NULL;
    char *p = mmap(NULL, len + BIG_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)p + BIG_PAGE - 1) & ~(uintptr_t)(BIG_PAGE - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + len + BIG_PAGE > a + len) munmap(a + len, (size_t)(p + len + BIG_PAGE - (a + len)));
#ifdef MADV_HUGEPAGE
    if (fkv__big_hugepages()) (void)madvise(a, len, MADV_HUGEPAGE); /* advice: failure only costs speed */
#endif
    return a;
#else
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p) memset(p, 0, bytes);
    return p;
#endif
}

void fkv__big_free(void *p, size_t bytes)
{
    if (!p) return;
#ifdef FKV_BIG_MMAP
    munmap(p, mapped(bytes));
#else
    (void)bytes;
    free(p);
#endif
}
