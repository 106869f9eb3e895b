/* llama2.c checkpoints and tokenizers, converted to a llama GGUF.
 *
 * Checkpoint (llama2.c's legacy "version 0" export, little-endian):
 *   7 x int32   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *               (a negative vocab_size: a separate classifier follows)
 *   f32 tensors token_embedding[vocab][dim], rms_att[L][dim], wq[L][dim][dim],
 *               wk[L][kv_dim][dim], wv[L][kv_dim][dim], wo[L][dim][dim],
 *               rms_ffn[L][dim], w1[L][hidden][dim], w2[L][dim][hidden],
 *               w3[L][hidden][dim], rms_final[dim],
 *               freq_cis_real/imag[seq_len][head_size/2] (unused: RoPE is recomputed),
 *               wcls[vocab][dim] when not shared
 * Tokenizer: int32 max_token_length, then per token f32 score, int32 length, bytes.
 *
 * The readers take memory images and check every size against the bytes
 * present before they point into them, so a fuzzer can drive them; each
 * error names the file (the `name` given) and what is wrong.
 *
 * The GGUF follows llama.cpp's own llama2.c converter: the same tensor
 * names and llama.* keys, wq/wk written as they are.  No Q/K permutation is
 * needed because llama2.c's RoPE already rotates adjacent pairs
 * (x[2i], x[2i+1]), which is llama.cpp's "normal" RoPE for the llama
 * architecture (and the forward pass's, forward.c); only Hugging Face
 * checkpoints, trained with rotate-half, are permuted by convert_hf_to_gguf. */
#ifndef FKV_MODEL_LLAMA2C_H
#define FKV_MODEL_LLAMA2C_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "fairkv.h"

#define FKV_LLAMA2C_HEADER_BYTES 28u

typedef struct fkv_llama2c_config {
    uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    uint32_t head_size, kv_dim; /* dim / n_heads, n_kv_heads * head_size */
    int shared_classifier;      /* 1: logits use the token embedding (vocab_size > 0 in the header) */
} fkv_llama2c_config;

/* A parsed checkpoint: each tensor points at its little-endian f32 data in
 * the caller's buffer (not necessarily 4-byte aligned). */
typedef struct fkv_llama2c {
    fkv_llama2c_config cfg;
    const uint8_t *tok_embd, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final;
    const uint8_t *wcls; /* NULL when shared */
} fkv_llama2c;

typedef struct fkv_llama2c_vocab {
    uint32_t n;
    uint32_t max_token_length;
    char **text;   /* [n] bytes as in the file, NUL-terminated copies */
    uint32_t *len; /* [n] */
    float *score;  /* [n] */
} fkv_llama2c_vocab;

/* Parses a checkpoint image; the result points into buf. */
fkv_status fkv_llama2c_parse(const void *buf, size_t size, const char *name, fkv_llama2c *out, char *err,
                             size_t errlen);
/* Parses a tokenizer image that must hold exactly n_vocab tokens. */
fkv_status fkv_llama2c_vocab_parse(const void *buf, size_t size, const char *name, uint32_t n_vocab,
                                   fkv_llama2c_vocab *out, char *err, size_t errlen);
void fkv_llama2c_vocab_free(fkv_llama2c_vocab *v);

/* Builds the GGUF (matrices of ggml_type FKV_GGML_F32, _F16, _Q8_0 or _Q4_0; norm
 * vectors stay f32, as llama.cpp keeps 1-D tensors).  general.name is
 * model_name.  A weight that is not finite, or out of f16 range for f16, is
 * FKV_EPARSE naming the tensor and element (prefixed by ckpt_name). */
fkv_status fkv_llama2c_to_gguf(const fkv_llama2c *ck, const fkv_llama2c_vocab *v, uint32_t ggml_type,
                               const char *model_name, const char *ckpt_name, fkv_gguf_writer **out, char *err,
                               size_t errlen);

/* Files: reads both, converts, writes out_path.  cfg (may be NULL) gets the
 * checkpoint's shape.  FKV_EIO when a file cannot be read or written. */
fkv_status fkv_llama2c_convert(const char *ckpt_path, const char *tok_path, const char *out_path, uint32_t ggml_type,
                               fkv_llama2c_config *cfg, char *err, size_t errlen);

#endif
