/* Binds llama.cpp-named GGUF tensors and llama.* metadata to a fkv_llama,
 * checking every shape against the hyper-parameters so the forward pass
 * never reads outside a tensor. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/half.h"
#include "model/model.h"
#include "util/err.h"

/* An integer hyper-parameter in [lo, hi]; def used when absent (def < 0: required). */
static fkv_status hp_u32(const fkv_gguf *g, const char *key, int64_t def, uint32_t lo, uint32_t hi, uint32_t *out,
                         char *err, size_t errlen)
{
    uint64_t v;
    fkv_status st = fkv_gguf_get_u64(g, key, &v, err, errlen);
    if (st == FKV_ENOENT) {
        if (def < 0) return fkv_errf(err, errlen, FKV_EPARSE, "metadata '%s' is missing", key);
        v = (uint64_t)def;
    } else if (st) {
        return st;
    }
    if (v < lo || v > hi)
        return fkv_errf(err, errlen, FKV_EPARSE, "metadata '%s' = %llu is outside [%u, %u]", key, (unsigned long long)v,
                    lo, hi);
    *out = (uint32_t)v;
    return FKV_OK;
}

static fkv_status hp_f32(const fkv_gguf *g, const char *key, double def, double lo, double hi, float *out,
                         char *err, size_t errlen)
{
    double v;
    fkv_status st = fkv_gguf_get_f64(g, key, &v, err, errlen);
    if (st == FKV_ENOENT)
        v = def;
    else if (st)
        return st;
    if (!(v >= lo && v <= hi))
        return fkv_errf(err, errlen, FKV_EPARSE, "metadata '%s' = %g is outside [%g, %g]", key, v, lo, hi);
    *out = (float)v;
    return FKV_OK;
}

static fkv_status bind_mat(const fkv_gguf *g, const char *name, uint32_t rows, uint32_t cols, fkv_wmat *w,
                           char *err, size_t errlen)
{
    const fkv_gguf_tensor *t = fkv_gguf_tensor_find(g, name);
    if (!t) return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s' is missing", name);
    if (t->n_dims != 2 || t->ne[0] != cols || (rows && t->ne[1] != rows))
        return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s' has shape [%llu, %llu] (%u dims), expected [%u, %u]", name,
                    (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], t->n_dims, cols, rows);
    if (t->ne[1] > UINT32_MAX) return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s' has too many rows", name);
    size_t es = t->type == FKV_GGML_F32 ? 4 : 2; /* the block types' fp16 scales are read with memcpy */
    if (t->type != FKV_GGML_F32 && t->type != FKV_GGML_F16 && t->type != FKV_GGML_Q8_0 && t->type != FKV_GGML_Q4_0)
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "tensor '%s' has type %s (f32, f16, q8_0, q4_0 allowed)",
                        name, fkv_ggml_type_name(t->type));
    if ((t->type == FKV_GGML_Q8_0 || t->type == FKV_GGML_Q4_0) && cols % FKV_GGML_QK)
        return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s': %u columns are not whole 32-element blocks", name,
                        cols);
    if ((t->type == FKV_GGML_F32 || t->type == FKV_GGML_F16) && (uintptr_t)t->data % es)
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "tensor '%s' data is not %zu-byte aligned", name, es);
    w->data = t->data;
    w->type = t->type;
    w->rows = (uint32_t)t->ne[1];
    w->cols = cols;
    return FKV_OK;
}

/* A norm weight vector [n], converted to a malloc'd f32 copy. */
static fkv_status bind_vec(const fkv_gguf *g, const char *name, uint32_t n, float **out, char *err, size_t errlen)
{
    const fkv_gguf_tensor *t = fkv_gguf_tensor_find(g, name);
    if (!t) return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s' is missing", name);
    if (t->n_elements != n || t->ne[0] != n)
        return fkv_errf(err, errlen, FKV_EPARSE, "tensor '%s' has %llu elements, expected [%u]", name,
                    (unsigned long long)t->n_elements, n);
    if (t->type != FKV_GGML_F32 && t->type != FKV_GGML_F16)
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "tensor '%s' has type %s (f32 or f16 for a norm vector)", name,
                        fkv_ggml_type_name(t->type));
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return FKV_ENOMEM;
    const uint8_t *p = t->data;
    for (uint32_t i = 0; i < n; i++) {
        if (t->type == FKV_GGML_F32) {
            memcpy(&v[i], p + 4 * (size_t)i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * (size_t)i, 2);
            v[i] = fkv_h2f(h);
        }
    }
    *out = v;
    return FKV_OK;
}

static fkv_status read_hparams(const fkv_gguf *g, fkv_llama_hparams *hp, char *err, size_t errlen)
{
    const char *arch = NULL;
    fkv_status st = fkv_gguf_get_str(g, "general.architecture", &arch, err, errlen);
    if (st == FKV_ENOENT) return fkv_errf(err, errlen, FKV_EPARSE, "metadata 'general.architecture' is missing");
    if (st) return st;
    if (strcmp(arch, "llama"))
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "architecture '%s' is not supported (llama only)", arch);
    /* bounds keep every product below in size_t and int ranges */
    if ((st = hp_u32(g, "llama.embedding_length", -1, 1, 65536, &hp->dim, err, errlen))) return st;
    if ((st = hp_u32(g, "llama.block_count", -1, 1, 1024, &hp->n_layers, err, errlen))) return st;
    if ((st = hp_u32(g, "llama.feed_forward_length", -1, 1, 1 << 20, &hp->hidden, err, errlen))) return st;
    if ((st = hp_u32(g, "llama.attention.head_count", -1, 1, 1024, &hp->n_heads, err, errlen))) return st;
    if ((st = hp_u32(g, "llama.attention.head_count_kv", hp->n_heads, 1, hp->n_heads, &hp->n_kv_heads, err, errlen)))
        return st;
    if ((st = hp_u32(g, "llama.context_length", 2048, 1, 1u << 24, &hp->ctx_len, err, errlen))) return st;
    hp->ctx_train = hp->ctx_len;
    /* head size: key_length when given (some models decouple it from
     * embedding_length / head_count), else the quotient */
    if (fkv_gguf_find(g, "llama.attention.key_length")) {
        if ((st = hp_u32(g, "llama.attention.key_length", -1, 2, 4096, &hp->head_dim, err, errlen))) return st;
        uint32_t vl = 0;
        if ((st = hp_u32(g, "llama.attention.value_length", hp->head_dim, 1, 4096, &vl, err, errlen))) return st;
        if (vl != hp->head_dim)
            return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "llama.attention.value_length %u differs from key_length %u", vl,
                        hp->head_dim);
    } else {
        if (hp->dim % hp->n_heads)
            return fkv_errf(err, errlen, FKV_EPARSE, "llama.embedding_length %u is not a multiple of head_count %u",
                        hp->dim, hp->n_heads);
        hp->head_dim = hp->dim / hp->n_heads;
    }
    if (hp->n_heads % hp->n_kv_heads)
        return fkv_errf(err, errlen, FKV_EPARSE, "head_count %u is not a multiple of head_count_kv %u", hp->n_heads,
                    hp->n_kv_heads);
    if ((st = hp_u32(g, "llama.rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rope_dim, err, errlen)))
        return st;
    if (hp->rope_dim % 2) return fkv_errf(err, errlen, FKV_EPARSE, "llama.rope.dimension_count %u is odd", hp->rope_dim);
    if ((st = hp_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5, 1e-12, 1.0, &hp->eps, err, errlen))) return st;
    if ((st = hp_f32(g, "llama.rope.freq_base", 10000.0, 1.0, 1e12, &hp->rope_base, err, errlen))) return st;
    /* RoPE scaling: none, or linear (positions divided by the factor) */
    hp->rope_freq_scale = 1.0f;
    const char *scaling = NULL;
    st = fkv_gguf_get_str(g, "llama.rope.scaling.type", &scaling, err, errlen);
    if (st && st != FKV_ENOENT) return st;
    if (scaling && strcmp(scaling, "none") && strcmp(scaling, "linear"))
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "llama.rope.scaling.type '%s' is not supported (none, linear)",
                    scaling);
    if (scaling && !strcmp(scaling, "linear")) {
        float factor;
        if ((st = hp_f32(g, "llama.rope.scaling.factor", 1.0, 1e-3, 1e6, &factor, err, errlen))) return st;
        hp->rope_freq_scale = 1.0f / factor;
    }
    const fkv_gguf_tensor *emb = fkv_gguf_tensor_find(g, "token_embd.weight");
    if (!emb) return fkv_errf(err, errlen, FKV_EPARSE, "tensor 'token_embd.weight' is missing");
    if (emb->n_dims != 2 || emb->ne[1] > (1u << 24))
        return fkv_errf(err, errlen, FKV_EPARSE, "tensor 'token_embd.weight' must be [embedding_length, n_vocab <= 2^24]");
    hp->n_vocab = (uint32_t)emb->ne[1];
    return FKV_OK;
}

fkv_status fkv_llama_from_gguf(const fkv_gguf *g, fkv_llama **out, char *err, size_t errlen)
{
    *out = NULL;
    fkv_llama *m = calloc(1, sizeof *m);
    if (!m) return FKV_ENOMEM;
    fkv_llama_hparams *hp = &m->hp;
    fkv_status st = read_hparams(g, hp, err, errlen);
    if (st) goto fail;
    uint32_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    if ((st = bind_mat(g, "token_embd.weight", hp->n_vocab, hp->dim, &m->tok_embd, err, errlen))) goto fail;
    if ((st = bind_vec(g, "output_norm.weight", hp->dim, &m->output_norm, err, errlen))) goto fail;
    if (fkv_gguf_tensor_find(g, "output.weight")) {
        if ((st = bind_mat(g, "output.weight", hp->n_vocab, hp->dim, &m->output, err, errlen))) goto fail;
    } else { /* tied head: logits = token embeddings . h */
        m->output = m->tok_embd;
        m->tied_output = 1;
    }
    m->layers = calloc(hp->n_layers, sizeof *m->layers);
    m->rope_inv_freq = malloc(hp->rope_dim / 2 * sizeof *m->rope_inv_freq);
    if (!m->layers || !m->rope_inv_freq) {
        st = FKV_ENOMEM;
        goto fail;
    }
    /* theta_i = pos * freq_scale * base^(-2i/rope_dim) / rope_freqs[i]; rope_freqs.weight
     * (Llama 3.1's long-context factors) is optional */
    const fkv_gguf_tensor *ff = fkv_gguf_tensor_find(g, "rope_freqs.weight");
    if (ff && (ff->type != FKV_GGML_F32 || ff->n_elements != hp->rope_dim / 2)) {
        st = fkv_errf(err, errlen, FKV_EPARSE, "tensor 'rope_freqs.weight' must be f32 [%u]", hp->rope_dim / 2);
        goto fail;
    }
    for (uint32_t i = 0; i < hp->rope_dim / 2; i++) {
        double f = 1.0;
        if (ff) {
            float v;
            memcpy(&v, (const uint8_t *)ff->data + 4 * (size_t)i, 4);
            if (!(v > 0) || !isfinite(v)) {
                st = fkv_errf(err, errlen, FKV_EPARSE, "tensor 'rope_freqs.weight'[%u] = %g is not positive", i, v);
                goto fail;
            }
            f = v;
        }
        m->rope_inv_freq[i] = (float)(hp->rope_freq_scale * pow((double)hp->rope_base, -2.0 * i / hp->rope_dim) / f);
    }
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        fkv_llama_layer *L = &m->layers[l];
        char name[96];
#define BIND_MAT(field, suffix, r, c)                                              \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                   \
    if ((st = bind_mat(g, name, r, c, &L->field, err, errlen))) goto fail;
#define BIND_VEC(field, suffix)                                                    \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                   \
    if ((st = bind_vec(g, name, hp->dim, &L->field, err, errlen))) goto fail;
        BIND_VEC(attn_norm, "attn_norm")
        BIND_VEC(ffn_norm, "ffn_norm")
        BIND_MAT(wq, "attn_q", qd, hp->dim)
        BIND_MAT(wk, "attn_k", kvd, hp->dim)
        BIND_MAT(wv, "attn_v", kvd, hp->dim)
        BIND_MAT(wo, "attn_output", hp->dim, qd)
        BIND_MAT(w_gate, "ffn_gate", hp->hidden, hp->dim)
        BIND_MAT(w_up, "ffn_up", hp->hidden, hp->dim)
        BIND_MAT(w_down, "ffn_down", hp->dim, hp->hidden)
#undef BIND_MAT
#undef BIND_VEC
    }
    m->gguf = (fkv_gguf *)g;
    *out = m;
    return FKV_OK;
fail:
    fkv_llama_free(m);
    return st;
}

fkv_status fkv_llama_load(const char *path, fkv_llama **out, char *err, size_t errlen)
{
    fkv_gguf *g;
    fkv_status st = fkv_gguf_load(path, &g, err, errlen);
    if (st) return st;
    char sub[400] = "";
    st = fkv_llama_from_gguf(g, out, sub, sizeof sub);
    if (st) {
        if (err) snprintf(err, errlen, "%s: %s", path, sub);
        fkv_gguf_free(g);
        return st;
    }
    (*out)->owns_gguf = 1;
    return FKV_OK;
}

void fkv_llama_free(fkv_llama *m)
{
    if (!m) return;
    for (uint32_t l = 0; m->layers && l < m->hp.n_layers; l++) {
        free(m->layers[l].attn_norm);
        free(m->layers[l].ffn_norm);
    }
    free(m->layers);
    free(m->output_norm);
    free(m->rope_inv_freq);
    if (m->owns_gguf) fkv_gguf_free(m->gguf);
    free(m);
}

int fkv_llama_set_ctx(fkv_llama *m, uint32_t n)
{
    if (n < 1 || n > (1u << 24)) return -1;
    m->hp.ctx_len = n;
    return n > m->hp.ctx_train;
}

uint64_t fkv_llama_n_params(const fkv_llama *m)
{
    const fkv_llama_hparams *hp = &m->hp;
    uint64_t qd = (uint64_t)hp->n_heads * hp->head_dim, kvd = (uint64_t)hp->n_kv_heads * hp->head_dim;
    uint64_t per_layer = 2 * (uint64_t)hp->dim + 2 * qd * hp->dim + 2 * kvd * hp->dim + 3 * (uint64_t)hp->hidden * hp->dim;
    uint64_t n = (uint64_t)hp->n_vocab * hp->dim * (m->tied_output ? 1 : 2) + hp->dim + per_layer * hp->n_layers;
    const fkv_gguf_tensor *ff = m->gguf ? fkv_gguf_tensor_find(m->gguf, "rope_freqs.weight") : NULL;
    if (ff) n += ff->n_elements;
    return n;
}

fkv_fwd_geom fkv_llama_geom(const fkv_llama *m)
{
    fkv_fwd_geom g = {m->hp.n_layers, m->hp.n_heads, m->hp.n_kv_heads, m->hp.head_dim,
                     1.0f / sqrtf((float)m->hp.head_dim)};
    return g;
}
