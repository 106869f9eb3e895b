/* Accuracy of a K/V precision on a real model, as llama.cpp's
 * `llama-perplexity --kl-divergence` measures it: a fixed token stream
 * teacher-forced twice, once with fp32 K/V and once with the precision (or
 * ladder of precisions) under test, and the next-token distributions
 * compared: mean and P99 KL divergence (reference first), top-1 agreement,
 * perplexity of each run.
 *
 * K/V live in the contiguous reference store (kv_ref.c).  Chunks of `chunk`
 * tokens are quantized whole, by the block codecs of fairkv_quant.h (the
 * round trip is what attention over the stored codes computes): a chunk
 * whose last token is fewer than `hot` tokens old stays fp32, then it is
 * `warm` for `warm_tokens` more tokens, then `cold` (from its warm codes, as
 * a cache that kept no fp32 copy).  The newest, partial chunk is always
 * fp32.  hot and warm_tokens are multiples of chunk, so every change of
 * precision falls on a chunk boundary and a chunk of tokens can be run as
 * one batch: token i of the batch sees exactly what step-by-step decoding
 * would show it. */
#ifndef FKV_MODEL_KV_EVAL_H
#define FKV_MODEL_KV_EVAL_H

#include <stdint.h>

#include "fairkv_quant.h"
#include "model/model.h"

#define FKV_LADDER_NO_COLD UINT32_MAX /* warm_tokens: warm for ever */

typedef struct fkv_kv_ladder {
    uint32_t chunk;       /* tokens per chunk (>= 1) */
    uint32_t hot;         /* fp32 tokens (a multiple of chunk) */
    fkv_kvc warm;         /* after the hot window */
    uint32_t warm_tokens; /* a multiple of chunk, or FKV_LADDER_NO_COLD */
    fkv_kvc cold;         /* after the warm tokens */
} fkv_kv_ladder;

/* "PREC" (every chunk past the hot window in PREC) or "WARM:TOKENS,COLD"
 * (a ladder); chunk and hot are left as they are.  FKV_EINVAL with the
 * reason in err. */
fkv_status fkv_kv_ladder_parse(const char *spec, fkv_kv_ladder *l, char *err, size_t errlen);
/* Checks chunk, hot and warm_tokens (multiples, codecs in range). */
fkv_status fkv_kv_ladder_check(const fkv_kv_ladder *l, char *err, size_t errlen);
/* "int8", "fp8:128,int4r" */
void fkv_kv_ladder_name(const fkv_kv_ladder *l, char *buf, size_t n);
/* Bytes per token of a sequence of n_tokens under the ladder, relative to
 * fp16, for a model with n_kv_heads x head_dim K/V: hot tokens at fp16,
 * the warm and cold shares at their codec's fkv_kvc_bytes. */
double fkv_kv_ladder_bytes_ratio(const fkv_kv_ladder *l, uint32_t n_tokens, uint32_t n_kv_heads, uint32_t head_dim);

/* The stream: n_seqs sequences of len tokens, each BOS then the model's own
 * samples at temperature 1 (fp32 K/V), sequence i drawn with seed seed0 + i.
 * tokens: [n_seqs][len]. */
fkv_status fkv_kv_eval_stream(fkv_fwd *f, const fkv_llama *m, int32_t bos, uint32_t n_seqs, uint32_t len,
                              uint64_t seed0, int32_t *tokens, char *err, size_t errlen);

/* Observes the fp32 K/V of one sequence (len tokens) into cal. */
fkv_status fkv_kv_eval_calibrate(fkv_fwd *f, const fkv_llama *m, const int32_t *tokens, uint32_t len,
                                 fkv_kvc_calib *cal, char *err, size_t errlen);

/* Teacher-forced run over the stream with the ladder (NULL: fp32 K/V):
 * logp[s][i][v] = log-softmax of the logits after tokens[s][0..i], i < len - 1.
 * cal: for fp8 precisions (may be NULL otherwise). */
fkv_status fkv_kv_eval_run(fkv_fwd *f, const fkv_llama *m, const fkv_kv_ladder *l, const fkv_kvc_calib *cal,
                           const int32_t *tokens, uint32_t n_seqs, uint32_t len, float *logp, char *err,
                           size_t errlen);

typedef struct fkv_kv_eval_result {
    uint64_t n;              /* predicted tokens */
    double kld_mean, kld_p99; /* KL(reference || test), nats */
    double top1;             /* share of positions whose argmax agrees */
    double ppl_ref, ppl;     /* exp(mean -log p(next token)) */
} fkv_kv_eval_result;

/* Compares two runs' log-probabilities over the stream. */
fkv_status fkv_kv_eval_compare(const float *ref, const float *test, const int32_t *tokens, uint32_t n_seqs,
                               uint32_t len, uint32_t n_vocab, fkv_kv_eval_result *out);

/* Greedy decoding of n tokens after BOS with the ladder (NULL: fp32),
 * quantizing chunks as they age: out[n]. */
fkv_status fkv_kv_eval_greedy(fkv_fwd *f, const fkv_llama *m, const fkv_kv_ladder *l, const fkv_kvc_calib *cal,
                              int32_t bos, uint32_t n, int32_t *out, char *err, size_t errlen);

#endif
