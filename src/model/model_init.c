/* Random-weight model files.  Weights are uniform with standard deviation
 * 1/sqrt(fan_in), so activations and logits stay O(1) through the layers;
 * norm weights are 1 +- 0.1 so a bug that ignores them shows in tests. */
#include "model/model_init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/half.h"
#include "model/sampler.h"
#include "model/wquant.h"
#include "model/tokenizer.h"

fkv_status fkv_model_init_preset(const char *name, fkv_model_init_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->rope_base = 10000.0f;
    c->eps = 1e-5f;
    c->ctx_len = 1024;
    c->tied = 1;
    if (!strcmp(name, "tiny")) {
        /* 4 x (attention 49,152 + MLP 196,608 + norms 256) + embedding 259 x 128: 1,017,344 */
        c->dim = 128;
        c->n_layers = 4;
        c->n_heads = 4;
        c->n_kv_heads = 2; /* grouped-query attention */
        c->hidden = 512;
    } else if (!strcmp(name, "small")) {
        /* stories15M: dim 288, 6 layers, 6 heads, hidden 768; with 259 tokens
         * instead of 32000 the total is 6,050,304, not 15.2M */
        c->dim = 288;
        c->n_layers = 6;
        c->n_heads = 6;
        c->n_kv_heads = 6;
        c->hidden = 768;
    } else if (!strcmp(name, "prefill")) {
        /* sized for a real prefill cost (docs/EVALUATION.md, the engine's
         * BLAS section): Llama-shaped with grouped-query attention, context
         * 4096; 6 x (attention 393,216 + MLP 1,179,648 + norms 768) + embedding
         * 259 x 384 + output norm 384: 9,541,632 parameters, about 19 MFLOP of matrix products
         * per token, so a 2,000-token prefill costs about a second on two cores */
        c->dim = 384;
        c->n_layers = 6;
        c->n_heads = 6;
        c->n_kv_heads = 2;
        c->hidden = 1024;
        c->ctx_len = 4096;
    } else {
        return FKV_ENOENT;
    }
    return FKV_OK;
}

fkv_status fkv_vocab_bytes_write(fkv_gguf_writer *w)
{
    char names[FKV_BYTE_VOCAB][8];
    const char *ptr[FKV_BYTE_VOCAB];
    float scores[FKV_BYTE_VOCAB];
    int32_t types[FKV_BYTE_VOCAB];
    strcpy(names[0], "<unk>");
    strcpy(names[1], "<s>");
    strcpy(names[2], "</s>");
    types[0] = FKV_TT_UNKNOWN;
    types[1] = types[2] = FKV_TT_CONTROL;
    for (unsigned b = 0; b < 256; b++) {
        snprintf(names[3 + b], sizeof names[0], "<0x%02X>", b);
        types[3 + b] = FKV_TT_BYTE;
    }
    for (unsigned i = 0; i < FKV_BYTE_VOCAB; i++) {
        ptr[i] = names[i];
        scores[i] = 0;
    }
    fkv_status st;
    if ((st = fkv_gguf_w_str(w, "tokenizer.ggml.model", "bytes")) ||
        (st = fkv_gguf_w_arr_str(w, "tokenizer.ggml.tokens", FKV_BYTE_VOCAB, ptr, NULL)) ||
        (st = fkv_gguf_w_arr(w, "tokenizer.ggml.scores", FKV_GGUF_F32, FKV_BYTE_VOCAB, scores)) ||
        (st = fkv_gguf_w_arr(w, "tokenizer.ggml.token_type", FKV_GGUF_I32, FKV_BYTE_VOCAB, types)) ||
        (st = fkv_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0)) ||
        (st = fkv_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1)) ||
        (st = fkv_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2)))
        return st;
    uint8_t yes = 1;
    return fkv_gguf_w_kv(w, "tokenizer.ggml.add_bos_token", FKV_GGUF_BOOL, &yes);
}

/* rows x cols (GGUF ne = {cols, rows}) uniform weights of std 1/sqrt(cols),
 * stored as type (a block type falls back to f16 for rows that are not
 * whole blocks) */
static fkv_status add_mat(fkv_gguf_writer *w, fkv_rng *rng, const char *name, uint32_t rows, uint32_t cols,
                          uint32_t type)
{
    size_t n = (size_t)rows * cols;
    float a = sqrtf(3.0f / (float)cols);
    if (fkv_wq_is_block(type) && cols % FKV_GGML_QK) type = FKV_GGML_F16;
    float *v = malloc(n * sizeof *v);
    void *buf = malloc(n * 4);
    if (!v || !buf) {
        free(v);
        free(buf);
        return FKV_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) v[i] = (float)((2.0 * fkv_rng_unif(rng) - 1.0) * a);
    if (type == FKV_GGML_F16)
        for (size_t i = 0; i < n; i++) ((uint16_t *)buf)[i] = fkv_f2h(v[i]);
    else if (fkv_wq_is_block(type))
        for (uint32_t r = 0; r < rows; r++)
            fkv_wq_quantize_row(type, v + (size_t)r * cols, cols,
                                (uint8_t *)buf + (size_t)r * fkv_wq_row_bytes(type, cols));
    else
        memcpy(buf, v, n * 4);
    uint64_t ne[2] = {cols, rows};
    fkv_status st = fkv_gguf_w_tensor(w, name, type, 2, ne, buf);
    free(v);
    free(buf);
    return st;
}

static fkv_status add_norm(fkv_gguf_writer *w, fkv_rng *rng, const char *name, uint32_t n)
{
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) return FKV_ENOMEM;
    for (uint32_t i = 0; i < n; i++) buf[i] = (float)(0.9 + 0.2 * fkv_rng_unif(rng));
    uint64_t ne[1] = {n};
    fkv_status st = fkv_gguf_w_tensor(w, name, FKV_GGML_F32, 1, ne, buf);
    free(buf);
    return st;
}

fkv_status fkv_model_init_build(const fkv_model_init_cfg *c, fkv_gguf_writer **out)
{
    *out = NULL;
    if (!c->dim || !c->n_layers || !c->n_heads || !c->n_kv_heads || !c->hidden || (!c->head_dim && c->dim % c->n_heads) ||
        c->n_heads % c->n_kv_heads || c->dim > 65536 || c->hidden > (1u << 20) || c->n_layers > 1024)
        return FKV_EINVAL;
    uint32_t hd = c->head_dim ? c->head_dim : c->dim / c->n_heads, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    uint32_t rd = c->rope_dim ? c->rope_dim : hd;
    uint32_t wt = c->wtype ? c->wtype : c->f16 ? FKV_GGML_F16 : FKV_GGML_F32;
    if (wt != FKV_GGML_F32 && wt != FKV_GGML_F16 && !fkv_wq_is_block(wt)) return FKV_EINVAL;
    /* llama_ftype: all f32, mostly f16, mostly q4_0, mostly q8_0 */
    uint32_t ftype = wt == FKV_GGML_F32 ? 0 : wt == FKV_GGML_F16 ? 1 : wt == FKV_GGML_Q4_0 ? 2 : 7;
    fkv_gguf_writer *w = fkv_gguf_writer_new(FKV_GGUF_DEFAULT_ALIGNMENT);
    if (!w) return FKV_ENOMEM;
    fkv_rng rng;
    fkv_rng_seed(&rng, c->seed);
    char name[96];
    fkv_status st;
    if ((st = fkv_gguf_w_str(w, "general.architecture", "llama")) ||
        (st = fkv_gguf_w_str(w, "general.name", "fairkv-random")) ||
        (st = fkv_gguf_w_u32(w, "general.file_type", ftype)) ||
        (st = fkv_gguf_w_u32(w, "llama.context_length", c->ctx_len ? c->ctx_len : 1024)) ||
        (st = fkv_gguf_w_u32(w, "llama.embedding_length", c->dim)) ||
        (st = fkv_gguf_w_u32(w, "llama.block_count", c->n_layers)) ||
        (st = fkv_gguf_w_u32(w, "llama.feed_forward_length", c->hidden)) ||
        (st = fkv_gguf_w_u32(w, "llama.attention.head_count", c->n_heads)) ||
        (st = fkv_gguf_w_u32(w, "llama.attention.head_count_kv", c->n_kv_heads)) ||
        (st = fkv_gguf_w_u32(w, "llama.rope.dimension_count", rd)) ||
        (st = fkv_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", c->eps > 0 ? c->eps : 1e-5f)) ||
        (st = fkv_gguf_w_f32(w, "llama.rope.freq_base", c->rope_base > 0 ? c->rope_base : 10000.0f)) ||
        (st = fkv_gguf_w_u32(w, "general.seed", (uint32_t)c->seed)) || (st = fkv_vocab_bytes_write(w)))
        goto fail;
    if (c->head_dim && ((st = fkv_gguf_w_u32(w, "llama.attention.key_length", hd)) ||
                        (st = fkv_gguf_w_u32(w, "llama.attention.value_length", hd))))
        goto fail;
    if (c->rope_linear > 0 && ((st = fkv_gguf_w_str(w, "llama.rope.scaling.type", "linear")) ||
                               (st = fkv_gguf_w_f32(w, "llama.rope.scaling.factor", c->rope_linear))))
        goto fail;
    if (c->rope_freqs) {
        float ff[4096];
        if (rd / 2 > 4096) {
            st = FKV_EINVAL;
            goto fail;
        }
        for (uint32_t i = 0; i < rd / 2; i++) ff[i] = (float)(1.0 + 3.0 * fkv_rng_unif(&rng));
        uint64_t ne[1] = {rd / 2};
        if ((st = fkv_gguf_w_tensor(w, "rope_freqs.weight", FKV_GGML_F32, 1, ne, ff))) goto fail;
    }
    if ((st = add_mat(w, &rng, "token_embd.weight", FKV_BYTE_VOCAB, c->dim, wt))) goto fail;
    for (uint32_t l = 0; l < c->n_layers; l++) {
#define MAT(suffix, r, cols)                                                        \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                     \
    if ((st = add_mat(w, &rng, name, r, cols, wt))) goto fail;
#define NORM(suffix)                                                                \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                     \
    if ((st = add_norm(w, &rng, name, c->dim))) goto fail;
        NORM("attn_norm")
        MAT("attn_q", qd, c->dim)
        MAT("attn_k", kvd, c->dim)
        MAT("attn_v", kvd, c->dim)
        MAT("attn_output", c->dim, qd)
        NORM("ffn_norm")
        MAT("ffn_gate", c->hidden, c->dim)
        MAT("ffn_up", c->hidden, c->dim)
        MAT("ffn_down", c->dim, c->hidden)
#undef MAT
#undef NORM
    }
    if ((st = add_norm(w, &rng, "output_norm.weight", c->dim))) goto fail;
    if (!c->tied && (st = add_mat(w, &rng, "output.weight", FKV_BYTE_VOCAB, c->dim, wt))) goto fail;
    *out = w;
    return FKV_OK;
fail:
    fkv_gguf_writer_free(w);
    return st;
}
