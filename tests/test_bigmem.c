/* util/bigmem.h, the memory of the page pool's K/V arrays: zeroed, writable
 * to the last byte, 2 MiB-aligned from 2 MiB up, marked for huge pages
 * there with FAIRKV_KV_HUGEPAGES=1 and not without it (the mark read back
 * from /proc/self/smaps, where there is one), and wholly unmapped by
 * fkv__big_free.  (Recent kernels align large anonymous
 * mappings to 2 MiB themselves, so the alignment check can pass without
 * bigmem's own trimming; it is kept for the kernels that do not.) */
#define _DEFAULT_SOURCE /* setenv */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/bigmem.h"

#define MIB ((size_t)1 << 20)

/* The VmFlags line of the mapping holding address a: 1 and the flags in
 * out, 0 when no mapping holds it, -1 when /proc/self/smaps cannot be read. */
static int vm_flags(const void *a, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, found = 0;
    uintptr_t x = (uintptr_t)a;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = x >= lo && x < hi;
            continue;
        }
        if (in && !strncmp(line, "VmFlags:", 8)) {
            snprintf(out, n, "%s", line + 8);
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

int main(void)
{
    const size_t sizes[] = {1, 4096, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1, 64 * MIB + 5};
    char flags[512];
    int probe = 0;
    int have_smaps = vm_flags(&probe, flags, sizeof flags) >= 0;
    if (!have_smaps) printf("no /proc/self/smaps: the huge-page mark and the unmapping are not checked\n");
    /* a kernel without transparent huge pages refuses the advice */
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    int have_thp = thp != NULL;
    if (thp) fclose(thp);
    else printf("no transparent huge pages in this kernel: the huge-page mark is not checked\n");
    for (size_t i = 0; i < 2 * sizeof sizes / sizeof *sizes; i++) {
        /* first with the advice asked for, then without */
        const int huge = i < sizeof sizes / sizeof *sizes;
        if (huge) setenv("FAIRKV_KV_HUGEPAGES", "1", 1);
        else unsetenv("FAIRKV_KV_HUGEPAGES");
        CHECK(fkv__big_hugepages() == huge);
        size_t n = sizes[i % (sizeof sizes / sizeof *sizes)];
        unsigned char *p = fkv__big_alloc(n);
        CHECKF(p != NULL, "%zu bytes", n);
        if (!p) continue;
        CHECKF(p[0] == 0 && p[n / 2] == 0 && p[n - 1] == 0, "%zu bytes: not zero", n);
        p[n - 1] = 0x5a, p[0] = 0xa5;
        CHECKF(p[0] == 0xa5 && (n == 1 || p[n - 1] == 0x5a), "%zu bytes: not writable to the end", n);
        if (n >= 2 * MIB) {
            CHECKF((uintptr_t)p % (2 * MIB) == 0, "%zu bytes at %p: not 2 MiB-aligned", n, (void *)p);
            if (have_smaps && have_thp) {
                /* "hg": madvise(MADV_HUGEPAGE) on the whole buffer, or nowhere */
                CHECKF(vm_flags(p, flags, sizeof flags) == 1 && !strstr(flags, " hg") == !huge,
                       "%zu bytes, huge pages %s: first byte's flags %s", n, huge ? "asked" : "not asked", flags);
                CHECKF(vm_flags(p + n - 1, flags, sizeof flags) == 1 && !strstr(flags, " hg") == !huge,
                       "%zu bytes, huge pages %s: last byte's flags %s", n, huge ? "asked" : "not asked", flags);
            }
        }
        /* from 2 MiB up the mapping is of whole 2 MiB pages: its last byte */
        unsigned char *end = n >= 2 * MIB ? p + (n + 2 * MIB - 1) / (2 * MIB) * (2 * MIB) - 1 : p + n - 1;
        if (have_smaps) CHECKF(vm_flags(end, flags, sizeof flags) == 1, "%zu bytes: end of the mapping not mapped", n);
        fkv__big_free(p, n);
        /* nothing of it stays mapped, to the end of its last 2 MiB page */
        if (have_smaps) CHECKF(vm_flags(end, flags, sizeof flags) == 0, "%zu bytes: still mapped after free", n);
    }
    fkv__big_free(NULL, 123);
    CHECK(fkv__big_alloc(0) == NULL);
    return check_done();
}
