/* Shared pieces of the attention kernels: reading a run of tokens of one
 * chunk as an fp32 tile, the online-softmax step over such a run, and the
 * argument checks. */
#ifndef FKV_ATTN_INTERNAL_H
#define FKV_ATTN_INTERNAL_H

#include "fairkv_attn.h"
#include "quant/layout.h"
#include "quant/simd.h"

/* Tokens per run at most: a run is a piece of one chunk (within one key
 * group when quantized), its rows may lie in several pages; its scores
 * [M][FKV__TMAX] stay in L1. */
#define FKV__TMAX 64u

/* fp8 runs read by more query rows than this (prefill) are decoded once into
 * an fp32 tile for the fp32 kernels: the in-register kernels (qk8, pv8)
 * widen each code once per block of query rows, a cost that grows with the
 * rows.  Either way the results are the same bits (simd.h). */
#define FKV__FP8_TILE_M 8u

typedef struct fkv__kvctx {
    const fkv_kv_geom *g;
    uint32_t layer;
    const char *k, *v;
    uint64_t stride;           /* bytes between pages */
    const fkv__simd_ops *ops;
} fkv__kvctx;

/* Per-thread scratch of one kernel call (M = query rows per run). */
typedef struct fkv__tscratch {
    float *sz;     /* [2][max(head_dim, FKV__TMAX)]: key scales and zeros of the
                      run's group, or the tokens' value scales and zeros */
    float *logits; /* [M][FKV__TMAX] scores, then probabilities */
    float *w;      /* [M][FKV__TMAX] probabilities times a value scale */
    float *qp;     /* [M][head_dim] queries times key scales */
    float *c;      /* [M] q.zero of keys, or p.zero of values */
    float *dec;    /* [FKV__TMAX][head_dim] one head's fp8 rows decoded (keys, then values), when M > FKV__FP8_TILE_M */
    size_t M;
    const char *krows[FKV__TMAX], *vrows[FKV__TMAX]; /* the run's rows, all heads */
    const char *drows[FKV__TMAX];                    /* rows of dec */
    const fkv_chunk_view *rc;                        /* run the rows belong to */
    uint32_t rt0, rT;
} fkv__tscratch;

static inline size_t fkv__tscratch_floats(size_t M, size_t D)
{
    return 2 * (D > FKV__TMAX ? D : FKV__TMAX) + 2 * M * FKV__TMAX + M * D + M + FKV__TMAX * D;
}
void fkv__tscratch_init(fkv__tscratch *s, float *mem, size_t M, size_t D);

/* Tokens of the run of chunk c that starts at t0; group != 0: a quantized
 * run takes its whole key group (FKV_QK_GROUP tokens) even where that is
 * more than RUN_BYTES (prefill), else decode's shorter runs. */
uint32_t fkv__run_len(const fkv_kv_geom *g, const fkv_chunk_view *c, uint32_t t0, int group);

/* One run of chunk c (tokens [t0, t0+T), kv head h) folded into the online
 * softmax state of M query rows q[M][D]: running max m[M], sum l[M],
 * unnormalized output acc[M][D], and (if csum != NULL) the chunk's own sum of
 * exp(logit - m) kept relative to the current m.  lim[M] (may be NULL = T)
 * gives the valid tokens of each row (causal mask: a prefix of the run). */
void fkv__attend_run(const fkv__kvctx *x, const fkv_chunk_view *c, uint32_t h, uint32_t t0,
                     uint32_t T, const float *q, size_t M, const uint32_t *lim, float scale,
                     float *m, float *l, float *acc, float *csum, fkv__tscratch *s);

/* Software prefetch of part `part` of n_parts of each K and V row of the
 * run of chunk c at t0, issued one run ahead and spread over the heads of
 * the current run: pages are scattered, so the hardware prefetcher cannot
 * see past a page. */
void fkv__prefetch_run(const fkv__kvctx *x, const fkv_chunk_view *c, uint32_t t0, uint32_t part,
                       uint32_t n_parts);

/* Checks the layer and one sequence's chunk table (every kept chunk must be
 * resident, of a readable dtype, with enough in-range pages). */
fkv_status fkv__check_kv(const char *fn, const fkv_attn_kv *kv, uint32_t n_heads, char *err,
                         size_t errlen);
fkv_status fkv__check_seq(const char *fn, const fkv_attn_kv *kv, const fkv_attn_seq *s,
                          size_t idx, char *err, size_t errlen);

#endif
