/* llama2.c checkpoint and tokenizer readers, and their GGUF (llama2c.h). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/half.h"
#include "model/llama2c.h"
#include "model/wquant.h"
#include "util/err.h"

/* Bounds of the model loader (model_load.c), so that whatever converts also loads. */
#define MAX_DIM 65536u
#define MAX_HIDDEN (1u << 20)
#define MAX_LAYERS 1024u
#define MAX_HEADS 1024u
#define MAX_VOCAB (1u << 24)
#define MAX_SEQ (1u << 24)
#define MAX_TOKEN_BYTES 1024u /* the tokenizer loader's limit, after spaces become U+2581 */

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t rd_i32(const uint8_t *p)
{
    uint32_t u = rd_u32(p);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

static float rd_f32(const uint8_t *p)
{
    uint32_t u = rd_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One header field in [1, hi]. */
static fkv_status field(const char *name, const char *key, int32_t v, uint32_t hi, uint32_t *out, char *err,
                        size_t errlen)
{
    if (v < 1 || (uint32_t)v > hi)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: header %s = %d is outside [1, %u]", name, key, v, hi);
    *out = (uint32_t)v;
    return FKV_OK;
}

static fkv_status parse_header(const uint8_t *p, const char *name, fkv_llama2c_config *c, char *err, size_t errlen)
{
    /* llama2.c's newer exports start with the magic "ak42" and a version */
    if (rd_u32(p) == 0x616b3432u)
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED,
                        "%s: a llama2.c version-%d export (magic \"ak42\"); only the legacy version-0 checkpoint "
                        "(export.py --version 0, the tinyllamas .bin files) is supported",
                        name, rd_i32(p + 4));
    int32_t vocab = rd_i32(p + 20);
    fkv_status st;
    if ((st = field(name, "dim", rd_i32(p), MAX_DIM, &c->dim, err, errlen)) ||
        (st = field(name, "hidden_dim", rd_i32(p + 4), MAX_HIDDEN, &c->hidden_dim, err, errlen)) ||
        (st = field(name, "n_layers", rd_i32(p + 8), MAX_LAYERS, &c->n_layers, err, errlen)) ||
        (st = field(name, "n_heads", rd_i32(p + 12), MAX_HEADS, &c->n_heads, err, errlen)) ||
        (st = field(name, "n_kv_heads", rd_i32(p + 16), c->n_heads, &c->n_kv_heads, err, errlen)) ||
        (st = field(name, "|vocab_size|", vocab == INT32_MIN ? 0 : vocab < 0 ? -vocab : vocab, MAX_VOCAB,
                    &c->vocab_size, err, errlen)) ||
        (st = field(name, "seq_len", rd_i32(p + 24), MAX_SEQ, &c->seq_len, err, errlen)))
        return st;
    c->shared_classifier = vocab > 0;
    if (c->dim % c->n_heads)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: header dim %u is not a multiple of n_heads %u", name, c->dim,
                        c->n_heads);
    if (c->n_heads % c->n_kv_heads)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: header n_heads %u is not a multiple of n_kv_heads %u", name,
                        c->n_heads, c->n_kv_heads);
    c->head_size = c->dim / c->n_heads;
    if (c->head_size % 2)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: head size dim/n_heads = %u is odd (RoPE rotates pairs)", name,
                        c->head_size);
    c->kv_dim = c->n_kv_heads * c->head_size;
    return FKV_OK;
}

/* Floats of each tensor, in file order (the bounds keep every product far below 2^63). */
typedef struct layout {
    uint64_t emb, layer_vec, wq, wkv, wo, w13, w2, final, freq, wcls;
} layout;

static layout layout_of(const fkv_llama2c_config *c)
{
    uint64_t L = c->n_layers, d = c->dim;
    layout s = {(uint64_t)c->vocab_size * d, L * d, L * d * d, L * c->kv_dim * d, L * d * d,
                L * c->hidden_dim * d, L * d * c->hidden_dim, d, (uint64_t)c->seq_len * c->head_size,
                c->shared_classifier ? 0 : (uint64_t)c->vocab_size * d};
    return s;
}

static uint64_t layout_floats(const layout *s)
{
    return s->emb + 2 * s->layer_vec + s->wq + 2 * s->wkv + s->wo + 2 * s->w13 + s->w2 + s->final + s->freq + s->wcls;
}

fkv_status fkv_llama2c_parse(const void *buf, size_t size, const char *name, fkv_llama2c *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    const uint8_t *p = buf;
    if (size < FKV_LLAMA2C_HEADER_BYTES)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: %zu bytes, shorter than the %u-byte llama2.c header", name, size,
                        FKV_LLAMA2C_HEADER_BYTES);
    fkv_llama2c_config *c = &out->cfg;
    fkv_status st = parse_header(p, name, c, err, errlen);
    if (st) return st;
    layout s = layout_of(c);
    uint64_t want = FKV_LLAMA2C_HEADER_BYTES + 4 * layout_floats(&s);
    if ((uint64_t)size != want)
        return fkv_errf(err, errlen, FKV_EPARSE,
                        "%s: %zu bytes, but the header (dim %u, hidden_dim %u, n_layers %u, n_heads %u, n_kv_heads %u, "
                        "vocab_size %u%s, seq_len %u) needs %llu: %s",
                        name, size, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
                        c->shared_classifier ? "" : " unshared", c->seq_len, (unsigned long long)want,
                        (uint64_t)size < want ? "truncated, or a wrong header" : "trailing data, or a wrong header");
    const uint8_t *q = p + FKV_LLAMA2C_HEADER_BYTES;
#define TAKE(field, n) (out->field = q, q += 4 * (size_t)(n))
    TAKE(tok_embd, s.emb);
    TAKE(rms_att, s.layer_vec);
    TAKE(wq, s.wq);
    TAKE(wk, s.wkv);
    TAKE(wv, s.wkv);
    TAKE(wo, s.wo);
    TAKE(rms_ffn, s.layer_vec);
    TAKE(w1, s.w13);
    TAKE(w2, s.w2);
    TAKE(w3, s.w13);
    TAKE(rms_final, s.final);
    q += 4 * (size_t)s.freq; /* freq_cis_real and _imag: RoPE is recomputed from positions */
    if (!c->shared_classifier) TAKE(wcls, s.wcls);
#undef TAKE
    return FKV_OK;
}

void fkv_llama2c_vocab_free(fkv_llama2c_vocab *v)
{
    if (!v) return;
    for (uint32_t i = 0; v->text && i < v->n; i++) free(v->text[i]);
    free(v->text);
    free(v->len);
    free(v->score);
    memset(v, 0, sizeof *v);
}

/* Counts the whole entries from byte off on, for the mismatch message: 1
 * when the tokens end exactly at the end of the file. */
static int count_entries(const uint8_t *p, size_t size, size_t off, uint64_t *n)
{
    *n = 0;
    while (off < size) {
        if (size - off < 8) return 0;
        int32_t len = rd_i32(p + off + 4);
        if (len < 0 || (uint64_t)len > size - off - 8) return 0;
        off += 8 + (size_t)len;
        ++*n;
    }
    return 1;
}

fkv_status fkv_llama2c_vocab_parse(const void *buf, size_t size, const char *name, uint32_t n_vocab,
                                   fkv_llama2c_vocab *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    const uint8_t *p = buf;
    if (size < 4)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: %zu bytes, too short for a llama2.c tokenizer", name, size);
    int32_t maxlen = rd_i32(p);
    if (maxlen < 1 || maxlen > (int32_t)MAX_TOKEN_BYTES)
        return fkv_errf(err, errlen, FKV_EPARSE, "%s: max_token_length %d is outside [1, %u]", name, maxlen,
                        MAX_TOKEN_BYTES);
    v->max_token_length = (uint32_t)maxlen;
    v->text = calloc(n_vocab ? n_vocab : 1, sizeof *v->text);
    v->len = calloc(n_vocab ? n_vocab : 1, sizeof *v->len);
    v->score = calloc(n_vocab ? n_vocab : 1, sizeof *v->score);
    if (!v->text || !v->len || !v->score) {
        fkv_llama2c_vocab_free(v);
        return FKV_ENOMEM;
    }
    v->n = n_vocab;
    size_t off = 4;
    fkv_status st = FKV_OK;
    for (uint32_t i = 0; i < n_vocab; i++) {
        uint64_t whole;
        if (size - off < 8) {
            if (count_entries(p, size, 4, &whole))
                st = fkv_errf(err, errlen, FKV_EPARSE, "%s: holds %llu tokens, the checkpoint's vocab_size is %u",
                              name, (unsigned long long)whole, n_vocab);
            else
                st = fkv_errf(err, errlen, FKV_EPARSE, "%s: truncated at byte %zu, in token %u of %u", name, size, i,
                              n_vocab);
            goto fail;
        }
        float score = rd_f32(p + off);
        int32_t len = rd_i32(p + off + 4);
        if (len < 0 || len > maxlen) {
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: token %u at byte %zu has length %d, outside [0, %d]", name, i,
                          off + 4, len, maxlen);
            goto fail;
        }
        if ((uint64_t)len > size - off - 8) {
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: truncated at byte %zu, in the %d bytes of token %u", name,
                          size, len, i);
            goto fail;
        }
        if (!isfinite(score)) {
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: token %u has a score that is not finite", name, i);
            goto fail;
        }
        v->text[i] = malloc((size_t)len + 1);
        if (!v->text[i]) {
            st = FKV_ENOMEM;
            goto fail;
        }
        memcpy(v->text[i], p + off + 8, (size_t)len);
        v->text[i][len] = 0;
        v->len[i] = (uint32_t)len;
        v->score[i] = score;
        off += 8 + (size_t)len;
    }
    if (off != size) {
        uint64_t more;
        if (count_entries(p, size, off, &more))
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: holds %llu tokens, the checkpoint's vocab_size is %u", name,
                          (unsigned long long)(n_vocab + more), n_vocab);
        else
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: %zu bytes after its %u tokens that are not tokens", name,
                          size - off, n_vocab);
        goto fail;
    }
    return FKV_OK;
fail:
    fkv_llama2c_vocab_free(v);
    return st;
}

/* ---------------------------------------------------------------- GGUF */

/* llama.cpp's token types (llama_token_type) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

/* Token i's GGUF text and type, as llama.cpp's converter makes them: ids
 * 0, 1, 2 are <unk>, <s>, </s>; spaces become U+2581 (SentencePiece's
 * marker, which the tokenizer expects). */
static fkv_status token_gguf(const fkv_llama2c_vocab *v, uint32_t i, char **text, uint64_t *len, int32_t *type)
{
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    const char *s = i < 3 ? special[i] : v->text[i];
    size_t n = i < 3 ? strlen(s) : v->len[i], spaces = 0;
    for (size_t k = 0; k < n; k++) spaces += s[k] == ' ';
    char *t = malloc(n + 2 * spaces + 1);
    if (!t) return FKV_ENOMEM;
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k] == ' ') {
            memcpy(t + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            t[o++] = s[k];
        }
    }
    t[o] = 0;
    if (i == 0) *type = TT_UNKNOWN;
    else if (i < 3 || n == 0) *type = TT_CONTROL;
    else if (n == 6 && !memcmp(s, "<0x", 3) && is_hex(s[3]) && is_hex(s[4]) && s[5] == '>') *type = TT_BYTE;
    else *type = TT_NORMAL;
    *text = t;
    *len = o;
    return FKV_OK;
}

static fkv_status write_vocab(fkv_gguf_writer *w, const fkv_llama2c_vocab *v, const char *tok_name, char *err,
                              size_t errlen)
{
    char **texts = calloc(v->n, sizeof *texts);
    uint64_t *lens = calloc(v->n, sizeof *lens);
    int32_t *types = calloc(v->n, sizeof *types);
    fkv_status st = texts && lens && types ? FKV_OK : FKV_ENOMEM;
    for (uint32_t i = 0; i < v->n && !st; i++) {
        st = token_gguf(v, i, &texts[i], &lens[i], &types[i]);
        if (!st && lens[i] > MAX_TOKEN_BYTES)
            st = fkv_errf(err, errlen, FKV_EPARSE, "%s: token %u is %llu bytes with spaces as U+2581 (%u max)",
                          tok_name, i, (unsigned long long)lens[i], MAX_TOKEN_BYTES);
    }
    if (!st)
        st = fkv_gguf_w_str(w, "tokenizer.ggml.model", "llama") ||
                     fkv_gguf_w_arr_str(w, "tokenizer.ggml.tokens", v->n, (const char *const *)texts, lens) ||
                     fkv_gguf_w_arr(w, "tokenizer.ggml.scores", FKV_GGUF_F32, v->n, v->score) ||
                     fkv_gguf_w_arr(w, "tokenizer.ggml.token_type", FKV_GGUF_I32, v->n, types) ||
                     fkv_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
                     fkv_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
                     fkv_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2)
                 ? FKV_ENOMEM
                 : FKV_OK;
    for (uint32_t i = 0; texts && i < v->n; i++) free(texts[i]);
    free(texts);
    free(lens);
    free(types);
    return st;
}

/* One tensor of n0 x n1 floats (GGUF ne = {n0, n1}; n1 = 1: a vector) from
 * the checkpoint's little-endian data, as f32, f16 or a block type (rows of
 * n0 elements that are not whole 32-element blocks: f16, as llama.cpp falls
 * back for such tensors). */
static fkv_status put_tensor(fkv_gguf_writer *w, const char *tname, const uint8_t *src, uint64_t n0, uint64_t n1,
                             uint32_t type, const char *ckpt_name, char *err, size_t errlen)
{
    uint64_t n = n0 * n1;
    if (fkv_wq_is_block(type) && (n1 == 1 || n0 % FKV_GGML_QK)) type = FKV_GGML_F16;
    float *f = malloc((size_t)n * 4);
    void *data = type == FKV_GGML_F32 ? NULL : malloc((size_t)n * 4);
    if (!f || (type != FKV_GGML_F32 && !data)) {
        free(f);
        free(data);
        return FKV_ENOMEM;
    }
    uint16_t *h = data;
    for (uint64_t i = 0; i < n; i++) {
        float x = rd_f32(src + 4 * i);
        if (!isfinite(x) || (type == FKV_GGML_F16 && fabsf(x) > 65504.0f)) {
            free(f);
            free(data);
            return fkv_errf(err, errlen, FKV_EPARSE, "%s: %s[%llu] = %g is %s", ckpt_name, tname,
                            (unsigned long long)i, (double)x, isfinite(x) ? "out of f16 range" : "not finite");
        }
        if (type == FKV_GGML_F16) h[i] = fkv_f2h(x);
        f[i] = x;
    }
    if (fkv_wq_is_block(type))
        for (uint64_t r = 0; r < n1; r++)
            fkv_wq_quantize_row(type, f + r * n0, (uint32_t)n0,
                                (uint8_t *)data + r * fkv_wq_row_bytes(type, (uint32_t)n0));
    uint64_t ne[2] = {n0, n1};
    fkv_status st = fkv_gguf_w_tensor(w, tname, type, n1 == 1 ? 1 : 2, ne, type == FKV_GGML_F32 ? (void *)f : data);
    free(f);
    free(data);
    return st;
}

static fkv_status write_hparams(fkv_gguf_writer *w, const fkv_llama2c_config *c, uint32_t type, const char *model_name)
{
    /* general.file_type: 0 all f32, 1 mostly f16, 2 mostly q4_0, 7 mostly q8_0 (llama_ftype) */
    return fkv_gguf_w_str(w, "general.architecture", "llama") || fkv_gguf_w_str(w, "general.name", model_name) ||
                   fkv_gguf_w_u32(w, "general.file_type",
                                  type == FKV_GGML_F32 ? 0 : type == FKV_GGML_F16 ? 1 : type == FKV_GGML_Q4_0 ? 2 : 7) ||
                   fkv_gguf_w_u32(w, "llama.context_length", c->seq_len) ||
                   fkv_gguf_w_u32(w, "llama.embedding_length", c->dim) ||
                   fkv_gguf_w_u32(w, "llama.block_count", c->n_layers) ||
                   fkv_gguf_w_u32(w, "llama.feed_forward_length", c->hidden_dim) ||
                   fkv_gguf_w_u32(w, "llama.attention.head_count", c->n_heads) ||
                   fkv_gguf_w_u32(w, "llama.attention.head_count_kv", c->n_kv_heads) ||
                   /* llama2.c rotates the whole head (llama.cpp's converter caps this at 64, which
                    * is the same for the tinyllamas and wrong beyond) */
                   fkv_gguf_w_u32(w, "llama.rope.dimension_count", c->head_size) ||
                   fkv_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f)
               ? FKV_ENOMEM
               : FKV_OK;
}

static fkv_status write_tensors(fkv_gguf_writer *w, const fkv_llama2c *ck, uint32_t type, const char *cn, char *err,
                                size_t errlen)
{
    const fkv_llama2c_config *c = &ck->cfg;
    const uint64_t d = c->dim, hd = c->hidden_dim, kv = c->kv_dim, F32 = FKV_GGML_F32;
    fkv_status st;
    /* llama.cpp's converter's order */
    if ((st = put_tensor(w, "token_embd.weight", ck->tok_embd, d, c->vocab_size, type, cn, err, errlen)) ||
        (st = put_tensor(w, "output_norm.weight", ck->rms_final, d, 1, F32, cn, err, errlen)))
        return st;
    if (ck->wcls && (st = put_tensor(w, "output.weight", ck->wcls, d, c->vocab_size, type, cn, err, errlen)))
        return st;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        char name[64];
#define PUT(suffix, base, n0, n1, ty)                                                                   \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                                       \
    if ((st = put_tensor(w, name, ck->base + 4 * (size_t)(l * (n0) * (n1)), n0, n1, ty, cn, err, errlen))) \
        return st;
        PUT("attn_q", wq, d, d, type)
        PUT("attn_k", wk, d, kv, type)
        PUT("attn_v", wv, d, kv, type)
        PUT("attn_output", wo, d, d, type)
        PUT("attn_norm", rms_att, d, 1, F32)
        PUT("ffn_gate", w1, d, hd, type)
        PUT("ffn_down", w2, hd, d, type)
        PUT("ffn_up", w3, d, hd, type)
        PUT("ffn_norm", rms_ffn, d, 1, F32)
#undef PUT
    }
    return FKV_OK;
}

fkv_status fkv_llama2c_to_gguf(const fkv_llama2c *ck, const fkv_llama2c_vocab *v, uint32_t type,
                               const char *model_name, const char *ckpt_name, fkv_gguf_writer **out, char *err,
                               size_t errlen)
{
    *out = NULL;
    if (type != FKV_GGML_F32 && type != FKV_GGML_F16 && !fkv_wq_is_block(type))
        return fkv_errf(err, errlen, FKV_EINVAL, "type must be f32, f16, q8_0 or q4_0");
    if (v->n != ck->cfg.vocab_size)
        return fkv_errf(err, errlen, FKV_EINVAL, "tokenizer has %u tokens, the checkpoint %u", v->n,
                        ck->cfg.vocab_size);
    fkv_gguf_writer *w = fkv_gguf_writer_new(FKV_GGUF_DEFAULT_ALIGNMENT);
    if (!w) return FKV_ENOMEM;
    fkv_status st = write_hparams(w, &ck->cfg, type, model_name);
    if (!st) st = write_vocab(w, v, "tokenizer", err, errlen);
    if (!st) st = write_tensors(w, ck, type, ckpt_name, err, errlen);
    if (st) {
        if (st == FKV_ENOMEM) fkv_errf(err, errlen, st, "out of memory building the GGUF");
        fkv_gguf_writer_free(w);
        return st;
    }
    *out = w;
    return FKV_OK;
}

/* The whole file, malloc'd. */
static fkv_status slurp(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fkv_errf(err, errlen, FKV_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *q = cap <= SIZE_MAX / 2 ? realloc(p, cap * 2) : NULL;
        if (!q) {
            free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!p) return fkv_errf(err, errlen, FKV_ENOMEM, "%s: out of memory reading it", path);
    if (bad) {
        free(p);
        return fkv_errf(err, errlen, FKV_EIO, "%s: read failed", path);
    }
    *buf = p;
    *len = n;
    return FKV_OK;
}

/* "dir/stories260K.bin" -> "stories260K" */
static void base_name(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
}

fkv_status fkv_llama2c_convert(const char *ckpt_path, const char *tok_path, const char *out_path, uint32_t type,
                               fkv_llama2c_config *cfg, char *err, size_t errlen)
{
    uint8_t *cbuf = NULL, *tbuf = NULL;
    size_t clen, tlen;
    fkv_llama2c ck;
    fkv_llama2c_vocab v = {0};
    fkv_gguf_writer *w = NULL;
    char name[128];
    base_name(ckpt_path, name, sizeof name);
    fkv_status st = slurp(ckpt_path, &cbuf, &clen, err, errlen);
    if (!st) st = fkv_llama2c_parse(cbuf, clen, ckpt_path, &ck, err, errlen);
    if (!st && cfg) *cfg = ck.cfg;
    if (!st) st = slurp(tok_path, &tbuf, &tlen, err, errlen);
    if (!st) st = fkv_llama2c_vocab_parse(tbuf, tlen, tok_path, ck.cfg.vocab_size, &v, err, errlen);
    if (!st) {
        char sub[400] = "";
        st = fkv_llama2c_to_gguf(&ck, &v, type, name, ckpt_path, &w, sub, sizeof sub);
        /* the vocabulary's messages say "tokenizer": name the file */
        if (st && !strncmp(sub, "tokenizer", 9)) fkv_errf(err, errlen, st, "%s%s", tok_path, sub + 9);
        else if (st) fkv_errf(err, errlen, st, "%s", sub);
    }
    if (!st) st = fkv_gguf_w_to_file(w, out_path, err, errlen);
    fkv_gguf_writer_free(w);
    fkv_llama2c_vocab_free(&v);
    free(cbuf);
    free(tbuf);
    return st;
}
