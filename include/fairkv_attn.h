/* fairkv attention kernels over chunk tables, and attention sparsity.
 *
 * The kernels read K/V in place through a sequence's chunk table (struct
 * fkv_chunk_view in fairkv.h), whatever each chunk's precision: the cache's
 * base dtype (fp32 or fp16) or int8 / int4 (layout in fairkv_quant.h).  No
 * gather into a contiguous buffer: a chunk is walked in runs of up to 64
 * tokens (32 KiB of rows), one row pointer per token into its page, and each micro-kernel
 * reads its stored format directly (quantization scales are folded into
 * the queries and the probabilities, so codes are never expanded to fp32
 * in memory).
 *
 * Decode splits each sequence's chunk list into ranges (FlashDecoding): work
 * items are (sequence, range); each keeps an online-softmax state (running
 * max m, sum l, unnormalized output) for every query head, and a second pass
 * merges the ranges.  Grouped-query attention: query head h uses kv head
 * h / (n_heads / n_kv_heads), and the group's query heads are processed
 * together so each K/V byte is read once.
 *
 * Shapes (all fp32, row-major):
 *   decode:  q, out [n_seqs][n_heads][head_dim]
 *   prefill: q, out [n_q][n_heads][head_dim] per sequence
 * The caller passes `scale` (usually 1/sqrt(head_dim)).
 */
#ifndef FAIRKV_ATTN_H
#define FAIRKV_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- threads */

/* A fixed set of worker threads the kernels split work over.  One kernel
 * call at a time per pool (the pool also owns the calls' scratch memory);
 * use one pool per engine thread that calls kernels. */
typedef struct fkv_attn_pool fkv_attn_pool;

/* n_threads >= 1 workers in all, the calling thread included (n_threads-1
 * pthreads are started).  0 = number of online CPUs. */
FKV_API fkv_status fkv_attn_pool_create(unsigned n_threads, fkv_attn_pool **out);
FKV_API void fkv_attn_pool_destroy(fkv_attn_pool *p);
FKV_API unsigned fkv_attn_pool_threads(const fkv_attn_pool *p);

/* Runs fn(ctx, i, thread) for i in [0, n) over the pool's threads and
 * returns when all are done (thread in [0, n_threads)).  NULL pool: runs
 * on the caller.  Exposed for benchmarks that want the same threads. */
FKV_API void fkv_attn_pool_run(fkv_attn_pool *p, size_t n, void (*fn)(void *ctx, size_t i, unsigned thread),
                               void *ctx);

/* ---------------------------------------------------------------- inputs */

/* One layer of the cache as the kernels read it. */
typedef struct fkv_attn_kv {
    const fkv_kv_geom *geom; /* geometry (n_pages bounds the page ids) */
    uint32_t layer;          /* which layer: selects this layer's part of each qmeta */
    const void *k;           /* K[layer]: [n_pages][page_tokens][n_kv_heads][head_dim] of base */
    const void *v;           /* V[layer], same shape */
} fkv_attn_kv;

/* One sequence's view for a kernel call. */
typedef struct fkv_attn_seq {
    const fkv_chunk_view *const *chunks; /* [n_chunks], in position order, contiguous */
    size_t n_chunks;
    /* Sparsity (may be NULL = dense): keep[i] == 0 skips chunk i entirely;
     * a skipped chunk may be evicted (pages NULL).  Without keep, every
     * chunk must be resident. */
    const uint8_t *keep;
    /* H2O accumulator (may be NULL; decode only): mass[i] += the attention
     * probability that chunk i received, summed over the query heads of this
     * call (so one call adds n_heads in total over the kept chunks). */
    float *mass;
} fkv_attn_seq;

/* ---------------------------------------------------------------- kernels */

/* Decode: one query token per sequence, attending to every (kept) token of
 * its chunk table (the query's own K/V already appended).  n_heads must be a
 * multiple of n_kv_heads.  A sequence with no kept token gets a zero output.
 * pool may be NULL (single-threaded).  err (may be NULL) names a bad field. */
FKV_API fkv_status fkv_attn_decode(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                                   const fkv_attn_seq *seqs, size_t n_seqs, const float *q, float *out,
                                   float scale, char *err, size_t errlen);

/* Prefill of one sequence (call per sequence; work splits over query blocks
 * x kv heads): query i sits at position q_pos0 + i and attends causally to
 * every kept token at position <= q_pos0 + i; the new tokens' K/V must be in
 * the chunk table already (chunked prefill: q_pos0 > 0 attends to the
 * resident prefix too).  seq->mass is not updated by prefill. */
FKV_API fkv_status fkv_attn_prefill(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                                    const fkv_attn_seq *seq, uint32_t q_pos0, uint32_t n_q,
                                    const float *q, float *out, float scale, char *err, size_t errlen);

/* ---------------------------------------------------------------- sparsity */

typedef enum fkv_sparse_mode {
    FKV_SPARSE_DENSE = 0,     /* keep every resident chunk */
    FKV_SPARSE_STREAMING = 1, /* first chunk (attention sinks) + recent window (StreamingLLM) */
    FKV_SPARSE_H2O = 2        /* heavy hitters by accumulated mass + recent window (H2O) */
} fkv_sparse_mode;

typedef struct fkv_sparse_config {
    fkv_sparse_mode mode;
    uint32_t budget_tokens; /* tokens kept in all (whole chunks; the last chunk is always kept) */
    uint32_t recent_tokens; /* h2o: recent window; 0 = budget_tokens / 2.  streaming: the
                               recent window is budget - first chunk */
} fkv_sparse_config;

/* Pure.  Fills keep[n] (1 = attend) for a chunk table and returns the kept
 * token count in *kept_tokens (may be NULL).  Evicted chunks are never kept.
 *  streaming: chunk 0, then chunks from the end while the total stays within
 *             the budget (the last chunk always).
 *  h2o:       chunks from the end within recent_tokens (the last chunk
 *             always), then the other chunks by decreasing mass[] (ties: the
 *             earlier chunk) while they fit in the budget.  mass may be NULL
 *             only in the other modes.
 * A chunk not kept is skipped by attention, and the cache may evict it
 * without recompute. */
FKV_API fkv_status fkv_sparse_select(const fkv_sparse_config *cfg, const fkv_chunk_view *const *chunks,
                                     size_t n, const float *mass, uint8_t *keep, uint32_t *kept_tokens);

/* Pure.  "dense", "streaming", "h2o"; parse returns FKV_ENOENT if unknown. */
FKV_API const char *fkv_sparse_mode_name(fkv_sparse_mode m);
FKV_API fkv_status fkv_sparse_mode_parse(const char *s, fkv_sparse_mode *out);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_ATTN_H */
