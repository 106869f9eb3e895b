/* The vector primitives the codecs and attention kernels are built from.
 * Two implementations: portable scalar C (simd_scalar.c) and AVX2+FMA+F16C
 * (simd_avx2.c, compiled with a target attribute so the build needs no
 * -march flag); fkv__simd() picks one at run time.  The codec primitives of
 * both paths produce bit-identical results (same operations, same order, no
 * fused multiply-add), which tests/test_quant.c checks. */
#ifndef FKV_QUANT_SIMD_H
#define FKV_QUANT_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* index of qk[] / pv[]: the stored format of a row */
enum { FKV__FMT_F32 = 0, FKV__FMT_F16 = 1, FKV__FMT_U8 = 2, FKV__FMT_U4 = 3 };

typedef struct fkv__simd_ops {
    const char *name;
    /* fp16 <-> fp32, n elements */
    void (*h2f)(const uint16_t *src, float *dst, size_t n);
    void (*f2h)(const float *src, uint16_t *dst, size_t n);
    /* codes q[i] = clamp(rint((x[i] - z) * inv), 0, qmax): per-element z/inv
     * (keys: one per channel) or one scalar z/inv (values: one per group) */
    void (*quant_v)(const float *x, const float *z, const float *inv, float qmax, uint8_t *q,
                    size_t n);
    void (*quant_s)(const float *x, float z, float inv, float qmax, uint8_t *q, size_t n);
    /* x[i] = code[i] * s + z; u8: one byte per code; u4: n even, two codes per
     * byte (element 2i low nibble) */
    void (*deq8_v)(const uint8_t *q, const float *s, const float *z, float *x, size_t n);
    void (*deq8_s)(const uint8_t *q, float s, float z, float *x, size_t n);
    void (*deq4_v)(const uint8_t *q, const float *s, const float *z, float *x, size_t n);
    void (*deq4_s)(const uint8_t *q, float s, float z, float *x, size_t n);
    /* Attention micro-kernels, reading K/V rows where they lie in their
     * stored format (fp32, fp16, int8 codes, int4 codes: suffix f, h, b, n).
     * Row t starts at rows[t] + off (rows of one run may sit in different
     * pages); element j is j elements of the format further.  For codes the
     * caller folds the scales in: keys by scaling q per channel (and adding
     * q.zero), values by scaling p per token (and adding p.zero per group).
     * qk: out[m*ldo + t] = scale * dot(q[m*d .. +d], row t), m < M, t < T
     * pv: acc[m*lda + j] += sum_t p[m*ldp + t] * row_t[j], j < n */
    void (*qk[4])(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
                  float scale, float *out, size_t ldo);
    void (*pv[4])(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off,
                  size_t n, float *acc, size_t lda);
    /* qp[m*ld + j] = q[m*ld + j] * s[j], c[m] = scale * dot(q[m*ld ..], z), j < d:
     * folds quantization scales into queries (keys) or probabilities (values) */
    void (*scale_q)(size_t M, const float *q, size_t ld, const float *s, const float *z, size_t d,
                    float scale, float *qp, float *c);
    /* acc[m*lda + j] += c[m], j < n */
    void (*add_rows)(size_t M, const float *c, size_t n, float *acc, size_t lda);
    /* x[i] = exp(x[i] - mx) for i < n; returns the sum */
    float (*expsum)(float *x, size_t n, float mx);
    /* qk and pv over fp8 E4M3 rows (one code byte per element) read where
     * they lie: element j is widened in registers to e4m3_value(code) * s,
     * the fp32 value fkv__fp8's dec gives (one product; s is the chunk
     * head's scale), and then used exactly as qk[FMT_F32] / pv[FMT_F32] use
     * an element of an fp32 row.  So the results are those of the fp32
     * kernels of the same table on the decoded rows, bit for bit
     * (tests/test_attn.c), without writing the rows out as fp32. */
    void (*qk8)(size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d, float s,
                float scale, float *out, size_t ldo);
    void (*pv8)(size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off, size_t n,
                float s, float *acc, size_t lda);
    /* Optional (NULL in tables without them): quantized runs with their
     * scales folded in by the kernel.  qkq: out[m*ldo + t] = scale *
     * dot(q_m, code_t * s + z), the keys' per-channel s and z in fp16 at
     * km[0..d) and km[d..2d), as h2f + scale_q + qk + add_rows give it.
     * pvq: acc[m*lda + j] += sum_t p[m*ldp + t] * (code_tj * s + z), s and
     * z of token t and j's group of G channels in fp16 at
     * vm[gi*vstride + t] and vm[gi*vstride + zoff + t], as scale_q + pv +
     * add_rows give it per group.  fmt is FKV__FMT_U8 or _U4.  Both return
     * 0, having written nothing, where they do not apply. */
    int (*qkq)(int fmt, size_t M, const float *q, size_t T, const char *const *rows, size_t off, size_t d,
               const uint16_t *km, float scale, float *out, size_t ldo);
    int (*pvq)(int fmt, size_t M, const float *p, size_t ldp, size_t T, const char *const *rows, size_t off,
               size_t d, size_t G, const uint16_t *vm, size_t vstride, size_t zoff, float *acc, size_t lda);
} fkv__simd_ops;

/* The ops in use (detected once; FAIRKV_SIMD=scalar forces the portable path). */
const fkv__simd_ops *fkv__simd(void);
/* Tests: 0 = scalar, 1 = the best available, 2 = AVX2 even where AVX-512 is
 * there, 3 = the AVX-512 FMA kernels where the VNNI ones are the best (else
 * the best);
 * returns the previous choice (0 scalar, else non-zero). */
int fkv__simd_force(int best);
extern const fkv__simd_ops fkv__simd_scalar;
/* NULL when not built (non-x86) */
const fkv__simd_ops *fkv__simd_avx2_ops(void);
/* The AVX2 table with AVX-512 attention kernels (simd_avx512.c); NULL when
 * not built or the CPU lacks AVX-512F/BW/VL. */
const fkv__simd_ops *fkv__simd_avx512_ops(void);
/* The AVX-512 table with VNNI kernels for int8/int4 keys and values (the
 * query and the probabilities in integer codes; simd_avx512.c states the
 * bounds); NULL when not built or the CPU lacks AVX512-VNNI/DQ/VBMI. */
const fkv__simd_ops *fkv__simd_vnni_ops(void);

/* fp8 E4M3 conversions of n elements: q[i] = e4m3(x[i] * inv), x[i] =
 * e4m3_value(q[i]) * s (the value first, then one fp32 product).  Scalar
 * reference in kvcodec.c, AVX-512F path in simd_avx512.c, AVX2 path in
 * simd_avx2.c, same bits. */
typedef struct fkv__fp8_ops {
    const char *name;
    void (*enc)(const float *x, float inv, uint8_t *q, size_t n);
    void (*dec)(const uint8_t *q, float s, float *x, size_t n);
} fkv__fp8_ops;
/* The fp8 ops in use: AVX-512 when the CPU has it and fkv__simd() is not
 * the scalar path, else AVX2 when fkv__simd() is not scalar, else scalar. */
const fkv__fp8_ops *fkv__fp8(void);
extern const fkv__fp8_ops fkv__fp8_scalar;
/* NULL when not built (non-x86) or the CPU lacks AVX-512F */
const fkv__fp8_ops *fkv__fp8_avx512_ops(void);
/* AVX2 (+F16C) conversions, same bits (simd_avx2.c); NULL when not built
 * (non-x86).  Callable only where fkv__simd() is not the scalar path. */
const fkv__fp8_ops *fkv__fp8_avx2_ops(void);

/* exp(x) for x <= 0 in the vector paths (exp8 of simd_avx2.c, exp16 of
 * simd_avx512.c, the same steps at two widths): inputs clamped at
 * FKV__EXP_MIN, Cody-Waite reduction x = n ln2 + r (ln2 = HI + LO),
 * |r| <= ln2/2, then Horner over FKV__EXP_P and p r^2 + r + 1: the degree-7
 * polynomial of the Cephes expf (relative error about 1e-7, below fp32
 * attention's own rounding). */
#define FKV__EXP_MIN (-87.0f)
#define FKV__EXP_LOG2E 1.44269504088896341f
#define FKV__EXP_LN2_HI 0.693359375f
#define FKV__EXP_LN2_LO (-2.12194440e-4f)
#define FKV__EXP_P {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}

#endif
