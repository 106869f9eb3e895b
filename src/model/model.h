/* Llama-architecture decoder over GGUF weights (llama.cpp's tensor names and
 * llama.* metadata), f32, f16, Q8_0 or Q4_0 weights, computed in f32.
 *
 * One forward call processes a batch of sequences, each with some new tokens
 * at known positions (chunked prefill and decode alike).  K/V never live in
 * the model: per layer the forward pass computes q, k, v of the new tokens,
 * hands k and v to kv->store (which writes them where the cache says) and
 * asks kv->attend for the attention output over everything stored so far. */
#ifndef FKV_ENGINE_MODEL_H
#define FKV_ENGINE_MODEL_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "fairkv_attn.h"
#include "fairkv.h"

typedef struct fkv_llama_hparams {
    uint32_t n_vocab;
    uint32_t dim;        /* llama.embedding_length */
    uint32_t n_layers;   /* llama.block_count */
    uint32_t n_heads;    /* llama.attention.head_count */
    uint32_t n_kv_heads; /* llama.attention.head_count_kv (default n_heads) */
    uint32_t head_dim;   /* llama.attention.key_length, default dim / n_heads */
    uint32_t hidden;     /* llama.feed_forward_length */
    uint32_t rope_dim;   /* llama.rope.dimension_count (default head_dim), even, <= head_dim */
    uint32_t ctx_len;    /* positions the model accepts: llama.context_length, or fkv_llama_set_ctx's */
    uint32_t ctx_train;  /* llama.context_length as trained (kept when ctx_len is overridden) */
    float eps;           /* llama.attention.layer_norm_rms_epsilon (default 1e-5) */
    float rope_base;     /* llama.rope.freq_base (default 10000) */
    float rope_freq_scale; /* 1 / llama.rope.scaling.factor for linear scaling, else 1 */
} fkv_llama_hparams;

/* A weight matrix W[rows][cols] (rows = outputs), row-major, f32, f16 or
 * llama.cpp's Q8_0 / Q4_0 blocks (each row whole blocks), pointing into the
 * GGUF data (GGUF ne = {cols, rows}). */
typedef struct fkv_wmat {
    const void *data;
    uint32_t type; /* FKV_GGML_F32 / _F16 / _Q8_0 / _Q4_0 */
    uint32_t rows, cols;
} fkv_wmat;

typedef struct fkv_llama_layer {
    float *attn_norm, *ffn_norm; /* [dim], converted to f32 */
    fkv_wmat wq;                 /* [n_heads*head_dim][dim] */
    fkv_wmat wk, wv;             /* [n_kv_heads*head_dim][dim] */
    fkv_wmat wo;                 /* [dim][n_heads*head_dim] */
    fkv_wmat w_gate, w_up;       /* [hidden][dim] */
    fkv_wmat w_down;             /* [dim][hidden] */
} fkv_llama_layer;

typedef struct fkv_llama {
    fkv_llama_hparams hp;
    fkv_wmat tok_embd;    /* [n_vocab][dim] */
    fkv_wmat output;      /* [n_vocab][dim]; = tok_embd when tied */
    int tied_output;
    float *output_norm;   /* [dim] */
    fkv_llama_layer *layers;
    float *rope_inv_freq; /* [rope_dim/2]: freq_scale * base^(-2i/rope_dim) / rope_freqs[i] */
    fkv_gguf *gguf;       /* owned when loaded from a file */
    int owns_gguf;
} fkv_llama;

/* Binds a parsed GGUF (kept alive by the caller) / loads a file (owned). */
fkv_status fkv_llama_from_gguf(const fkv_gguf *g, fkv_llama **out, char *err, size_t errlen);
fkv_status fkv_llama_load(const char *path, fkv_llama **out, char *err, size_t errlen);
void fkv_llama_free(fkv_llama *m);
/* Overrides the context length (llama.cpp's -c), n in [1, 2^24]: the
 * forward pass then accepts positions below n.  Returns 1 when n exceeds
 * the trained length (RoPE positions the model never saw: usable, but the
 * caller should warn), 0 otherwise, -1 (nothing changed) when n is out of range. */
int fkv_llama_set_ctx(fkv_llama *m, uint32_t n);
/* Parameters (elements of all tensors the model uses; a tied head counts once). */
uint64_t fkv_llama_n_params(const fkv_llama *m);

/* ---------------------------------------------------------------- batch */

/* One sequence's share of a forward step. */
typedef struct fkv_fwd_seq {
    void *seq;             /* the caller's handle (an fkv_seq*, an index, ...) for the callbacks */
    const int32_t *tokens; /* [n_tokens] new token ids */
    uint32_t n_tokens;     /* >= 1 */
    uint32_t start_pos;    /* position of tokens[0]; K/V of [0, start_pos) are already stored */
    const fkv_slot *slots; /* [n_tokens] where each new token's K/V goes (paged stores); may be NULL */
    float *logits;         /* [n_vocab] of the last token, or [n_tokens][n_vocab] if logits_all; NULL: none */
    int logits_all;
} fkv_fwd_seq;

/* Geometry the callbacks need. */
typedef struct fkv_fwd_geom {
    uint32_t n_layers, n_heads, n_kv_heads, head_dim;
    float scale; /* 1/sqrt(head_dim) */
} fkv_fwd_geom;

typedef struct fkv_kv_ops {
    /* Required.  Stores K and V of s's new tokens in layer `layer`:
     * k, v are [n_tokens][n_kv_heads][head_dim] f32, K already rotated by RoPE. */
    fkv_status (*store)(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s,
                        const float *k, const float *v);
    /* Required.  Causal attention of the new tokens (called after store for
     * the same layer): for new token i (position p = start_pos + i) and head
     * h, out[i][h] = sum_{j<=p} softmax_j(scale * q[i][h] . K[j][h/group]) V[j][h/group],
     * group = n_heads / n_kv_heads.  q, out: [n_tokens][n_heads][head_dim] f32. */
    fkv_status (*attend)(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s,
                         const float *q, float *out);
    void *ctx;
} fkv_kv_ops;

typedef struct fkv_fwd fkv_fwd; /* scratch buffers, reusable across steps */

/* pool (may be NULL: the caller's thread alone) is borrowed and must
 * outlive the forward state: the matrix products split their rows over it,
 * as the attention kernels split their work (one thread pool for a whole
 * engine).  Results do not depend on the thread count. */
fkv_status fkv_fwd_create(const fkv_llama *m, fkv_attn_pool *pool, fkv_fwd **out);
/* Which code multiplies the weight matrices: OpenBLAS SGEMM in fixed tiles
 * (blas; auto is blas: measured faster for every matrix and batch size tried,
 * single-token decode of 64 x 64 matrices included) or the hand-written dot
 * loops (loops).  Either way results do not depend on batching or threads.
 * fkv_fwd_create reads it from the environment, FKV_MATMUL=auto|blas|loops
 * (for measurements and the reference check; unknown values warn and mean auto). */
typedef enum { FKV_MATMUL_AUTO, FKV_MATMUL_BLAS, FKV_MATMUL_LOOPS } fkv_matmul_mode;
fkv_matmul_mode fkv_matmul_mode_env(void);
void fkv_fwd_destroy(fkv_fwd *f);
fkv_fwd_geom fkv_llama_geom(const fkv_llama *m);

/* Runs one step over the batch.  Token ids and positions are checked
 * (FKV_EINVAL, message in err); callback failures are passed through. */
fkv_status fkv_llama_forward(fkv_fwd *f, const fkv_kv_ops *kv, fkv_fwd_seq *batch, uint32_t n_seqs,
                             char *err, size_t errlen);

/* ---------------------------------------------------------------- reference KV */

/* Contiguous per-sequence K/V: fkv_fwd_seq.seq is a fkv_kvref_seq*.
 * K[l] = [max_tokens][n_kv_heads][head_dim] f32 (V alike).  Store writes at
 * positions start_pos.., slots are ignored. */
typedef struct fkv_kvref_seq {
    uint32_t max_tokens;
    float *k, *v; /* [n_layers][max_tokens][n_kv_heads][head_dim] */
} fkv_kvref_seq;

fkv_status fkv_kvref_seq_init(fkv_kvref_seq *s, const fkv_fwd_geom *g, uint32_t max_tokens);
void fkv_kvref_seq_free(fkv_kvref_seq *s);
/* ops for fkv_kvref_seq sequences (ctx unused) */
extern const fkv_kv_ops fkv_kvref_ops;

/* Writes n tokens' K/V ([n][n_kv_heads][head_dim] f32) into a page pool
 * laid out as fkv_cache_layer_storage describes: layer base k/v,
 * [n_pages][page_tokens][n_kv_heads][head_dim] of dtype (FKV_F32 or
 * FKV_F16), page_stride bytes per page; token i goes to slots[i]. */
fkv_status fkv_kv_write_paged(void *k_base, void *v_base, uint64_t page_stride, uint32_t page_tokens,
                              fkv_dtype dtype, uint32_t n_kv_heads, uint32_t head_dim,
                              const fkv_slot *slots, uint32_t n, const float *k, const float *v);

/* Causal attention reading K/V of positions [0, start_pos + n_tokens) from
 * the paged layout through slot_of[pos] (one slot per position); q/out as in
 * fkv_kv_ops.attend, q's token i at position start_pos + i.  Scalar
 * reference: what the cache's attention kernels must reproduce. */
fkv_status fkv_attn_paged_ref(const fkv_fwd_geom *g, const void *k_base, const void *v_base,
                              uint64_t page_stride, uint32_t page_tokens, fkv_dtype dtype,
                              const fkv_slot *slot_of, uint32_t start_pos, uint32_t n_tokens,
                              const float *q, float *out);

#endif
