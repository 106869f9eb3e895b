/* Deterministic random-weight Llama models with the byte-level vocabulary,
 * written as GGUF: the engine's test and demo models (no pretrained weights
 * are needed to exercise the cache with real tensors). */
#ifndef FKV_ENGINE_MODEL_INIT_H
#define FKV_ENGINE_MODEL_INIT_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "fairkv.h"

typedef struct fkv_model_init_cfg {
    uint32_t dim, n_layers, n_heads, n_kv_heads, hidden, ctx_len;
    uint32_t rope_dim;  /* 0: head_dim */
    float rope_base;    /* 10000 */
    float eps;          /* 1e-5 */
    uint32_t head_dim;  /* 0: dim / n_heads; else written as llama.attention.key_length */
    float rope_linear;  /* > 0: llama.rope.scaling.type linear with this factor */
    int rope_freqs;     /* write a rope_freqs.weight tensor (factors in [1, 4]) */
    int f16;            /* weight matrices in f16 (norms stay f32) */
    uint32_t wtype;     /* 0: f32, or f16 with .f16; else FKV_GGML_F32/_F16/_Q8_0/_Q4_0 for the
                         * matrices (block types: matrices whose rows are not whole
                         * 32-element blocks stay f16) */
    int tied;           /* no output.weight: the head reuses token_embd */
    uint64_t seed;
} fkv_model_init_cfg;

/* "tiny" (~1.0M parameters), "small" (llama2.c stories15M's shape) or
 * "prefill" (9.5M parameters, context 4096: a 2,000-token prefill costs
 * about a second on two cores). */
fkv_status fkv_model_init_preset(const char *name, fkv_model_init_cfg *cfg);
/* Number of tokens of the byte-level vocabulary: <unk> <s> </s> <0x00>..<0xFF>. */
#define FKV_BYTE_VOCAB 259u
/* Adds the byte-level tokenizer metadata (tokenizer.ggml.*). */
fkv_status fkv_vocab_bytes_write(fkv_gguf_writer *w);
/* A writer holding the whole model; the caller writes and frees it. */
fkv_status fkv_model_init_build(const fkv_model_init_cfg *cfg, fkv_gguf_writer **out);

#endif
