/* Run-time choice of the vector path: AVX2+FMA+F16C when the CPU and OS
 * support it, with AVX-512 attention kernels where AVX-512F/BW/VL are there
 * too, and with the VNNI kernels for int8/int4 keys and values where the
 * CPU also has AVX512-VNNI, -DQ and -VBMI (simd_avx512.c states their
 * bounds); else portable scalar C.  FAIRKV_SIMD=avx512 keeps the AVX-512
 * FMA kernels, avx2 AVX2's, scalar the portable ones.  No -march flag is
 * needed to build. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fairkv_quant.h"
#include "quant/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static int cpu_has_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int f16c = (c >> 29) & 1u;
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks the OS saves ymm state */
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static int cpu_has_avx2_fma_f16c(void) { return 0; }
#endif

/* -1 unknown, 0 scalar, 1 AVX2, 2 AVX2 with AVX-512 kernels, 3 those with
 * the VNNI kernels */
static atomic_int choice = -1;

static int best_available(void)
{
    if (fkv__simd_avx2_ops() == NULL || !cpu_has_avx2_fma_f16c()) return 0;
    return fkv__simd_vnni_ops() ? 3 : fkv__simd_avx512_ops() ? 2 : 1;
}

static const fkv__simd_ops *ops_of(int c)
{
    return c == 3 ? fkv__simd_vnni_ops() : c == 2 ? fkv__simd_avx512_ops() : c ? fkv__simd_avx2_ops() : &fkv__simd_scalar;
}

const fkv__simd_ops *fkv__simd(void)
{
    int c = atomic_load_explicit(&choice, memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv("FAIRKV_SIMD");
        c = (e && !strcmp(e, "scalar")) ? 0 : best_available();
        if (c >= 2 && e && !strcmp(e, "avx2")) c = 1;
        if (c == 3 && e && !strcmp(e, "avx512")) c = 2;
        atomic_store_explicit(&choice, c, memory_order_relaxed);
    }
    return ops_of(c);
}

int fkv__simd_force(int best)
{
    int prev = fkv__simd() != &fkv__simd_scalar;
    int b = best_available();
    int c = !best ? 0 : best == 2 && b ? 1 : best == 3 && b == 3 ? 2 : b;
    atomic_store_explicit(&choice, c, memory_order_relaxed);
    return prev;
}

const char *fkv_simd_path(void) { return fkv__simd()->name; }
