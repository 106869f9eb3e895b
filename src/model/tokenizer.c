/* Tokenizer loading, the string map, byte-level encoding, decoding. */
#include "model/tokenizer.h"
#include "util/err.h"

#include <ctype.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- string map
 * Open addressing with linear probing, FNV-1a; keys are not copied (they
 * point at the tokenizer's own strings). */
struct fkv_strmap {
    size_t cap; /* power of two */
    const char **key;
    size_t *klen;
    int32_t *val;
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

fkv_strmap *fkv__strmap_new(size_t expect)
{
    fkv_strmap *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = 16;
    while (m->cap < expect * 2 + 16) m->cap *= 2;
    m->key = calloc(m->cap, sizeof *m->key);
    m->klen = calloc(m->cap, sizeof *m->klen);
    m->val = calloc(m->cap, sizeof *m->val);
    if (!m->key || !m->klen || !m->val) {
        fkv__strmap_free(m);
        return NULL;
    }
    return m;
}

void fkv__strmap_free(fkv_strmap *m)
{
    if (!m) return;
    free(m->key);
    free(m->klen);
    free(m->val);
    free(m);
}

/* Sized for `expect` keys at creation; a later put beyond half full fails
 * rather than degrading (callers size it from the vocabulary). */
int fkv__strmap_put(fkv_strmap *m, const char *s, size_t len, int32_t val)
{
    size_t i = (size_t)fnv1a(s, len) & (m->cap - 1);
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) & (m->cap - 1)) {
        if (!m->key[i]) {
            m->key[i] = s;
            m->klen[i] = len;
            m->val[i] = val;
            return 0;
        }
        if (m->klen[i] == len && !memcmp(m->key[i], s, len)) {
            m->val[i] = val; /* later entries win, as in llama.cpp's map */
            return 0;
        }
    }
    return -1;
}

int32_t fkv__strmap_get(const fkv_strmap *m, const char *s, size_t len)
{
    size_t i = (size_t)fnv1a(s, len) & (m->cap - 1);
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) & (m->cap - 1)) {
        if (!m->key[i]) return -1;
        if (m->klen[i] == len && !memcmp(m->key[i], s, len)) return m->val[i];
    }
    return -1;
}

int fkv__ids_push(fkv__ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->p, cap * sizeof *p);
        if (!p) return -1;
        a->p = p;
        a->cap = cap;
    }
    a->p[a->n++] = id;
    return 0;
}

size_t fkv__utf8_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) return 2;
    if ((c & 0xf0) == 0xe0) return 3;
    if ((c & 0xf8) == 0xf0) return 4;
    return 1;
}

/* ---------------------------------------------------------------- loading */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static fkv_status opt_id(const fkv_gguf *g, const char *key, uint32_t n_vocab, int32_t *out, char *err, size_t errlen)
{
    uint64_t v;
    fkv_status st = fkv_gguf_get_u64(g, key, &v, err, errlen);
    if (st == FKV_ENOENT) return FKV_OK;
    if (st) return st;
    if (v >= n_vocab) return fkv_errf(err, errlen, FKV_EPARSE, "metadata '%s' = %llu is not a token id (< %u)", key,
                                  (unsigned long long)v, n_vocab);
    *out = (int32_t)v;
    return FKV_OK;
}

static fkv_status opt_bool(const fkv_gguf *g, const char *key, int *out)
{
    const fkv_gguf_kv *kv = fkv_gguf_find(g, key);
    if (kv && kv->type == FKV_GGUF_BOOL) *out = kv->v.u != 0;
    return FKV_OK;
}

static const fkv_gguf_kv *num_array(const fkv_gguf *g, const char *key, uint32_t n, fkv_status *st, char *err,
                                    size_t errlen)
{
    const fkv_gguf_kv *kv = fkv_gguf_find(g, key);
    *st = FKV_OK;
    if (!kv) return NULL;
    if (kv->type != FKV_GGUF_ARRAY || kv->arr_type == FKV_GGUF_STRING || kv->n != n) {
        *st = fkv_errf(err, errlen, FKV_EPARSE, "metadata '%s' must be a numeric array of %u entries", key, n);
        return NULL;
    }
    return kv;
}

static fkv_status load_merges(fkv_tokenizer *t, const fkv_gguf *g, char *err, size_t errlen)
{
    const fkv_gguf_kv *mk = fkv_gguf_find(g, "tokenizer.ggml.merges");
    if (!mk || mk->type != FKV_GGUF_ARRAY || mk->arr_type != FKV_GGUF_STRING)
        return fkv_errf(err, errlen, FKV_EPARSE, "metadata 'tokenizer.ggml.merges' (array of strings) is required for gpt2");
    if (mk->n > INT32_MAX) return fkv_errf(err, errlen, FKV_EPARSE, "tokenizer.ggml.merges: too many entries");
    t->merges = fkv__strmap_new((size_t)mk->n);
    if (!t->merges) return FKV_ENOMEM;
    for (uint64_t i = 0; i < mk->n; i++) {
        const char *sp = memchr(mk->strs[i], ' ', mk->str_lens[i]);
        if (!sp || sp == mk->strs[i] || (uint64_t)(sp - mk->strs[i]) + 1 == mk->str_lens[i])
            return fkv_errf(err, errlen, FKV_EPARSE, "tokenizer.ggml.merges[%llu] is not \"left right\"",
                        (unsigned long long)i);
        /* the first rank of a duplicate pair is the one that applies */
        if (fkv__strmap_get(t->merges, mk->strs[i], mk->str_lens[i]) < 0 &&
            fkv__strmap_put(t->merges, mk->strs[i], mk->str_lens[i], (int32_t)i))
            return FKV_ENOMEM;
    }
    return FKV_OK;
}

/* llama.cpp's names for the pre-tokenizers implemented in tok_pretok.c;
 * a vocabulary without the key gets llama.cpp's default. */
static fkv_status pick_pre(fkv_tokenizer *t, const fkv_gguf *g, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int pre;
    } names[] = {
        {"default", FKV_PRE_DEFAULT},  {"gpt-2", FKV_PRE_GPT2},     {"phi-2", FKV_PRE_GPT2},
        {"llama3", FKV_PRE_LLAMA3},    {"llama-v3", FKV_PRE_LLAMA3}, {"llama-bpe", FKV_PRE_LLAMA3},
        {"falcon3", FKV_PRE_LLAMA3},   {"deepseek-coder", FKV_PRE_DEEPSEEK_CODER},
    };
    const char *pre = NULL;
    fkv_status st = fkv_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err, errlen);
    if (st == FKV_ENOENT) {
        t->pre = FKV_PRE_DEFAULT;
        return FKV_OK;
    }
    if (st) return st;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(pre, names[i].name)) {
            t->pre = names[i].pre;
            t->ignore_merges = t->pre == FKV_PRE_LLAMA3; /* as llama.cpp sets it for these */
            return FKV_OK;
        }
    return fkv_errf(err, errlen, FKV_EUNSUPPORTED,
                    "tokenizer.ggml.pre '%.60s' is not supported (default, gpt-2, phi-2, llama3, llama-v3, llama-bpe, "
                    "falcon3, deepseek-coder)",
                    pre);
}

typedef struct user_tok {
    uint32_t len;
    int32_t id;
} user_tok;

static int by_length_desc(const void *a, const void *b)
{
    const user_tok *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* User-defined tokens are matched in the text before tokenizing, longest
 * first so that one containing another wins. */
static fkv_status collect_user_tokens(fkv_tokenizer *t, const fkv_gguf *g)
{
    size_t n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) n += t->type[i] == FKV_TT_USER_DEFINED && t->len[i];
    if (!n) return FKV_OK;
    user_tok *u = malloc(n * sizeof *u);
    t->user = malloc(n * sizeof *t->user);
    if (!u || !t->user) {
        free(u);
        return FKV_ENOMEM;
    }
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (t->type[i] == FKV_TT_USER_DEFINED && t->len[i]) u[t->n_user++] = (user_tok){t->len[i], (int32_t)i};
    qsort(u, n, sizeof *u, by_length_desc);
    /* llama.cpp gives Phi-3's special tokens RSTRIP by the model's name */
    char name[64] = "";
    const char *gn;
    if (fkv_gguf_get_str(g, "general.name", &gn, NULL, 0) == FKV_OK) {
        size_t k = 0;
        for (; gn[k] && k + 1 < sizeof name; k++) name[k] = (char)tolower((unsigned char)gn[k]);
        name[k] = 0;
    }
    t->user_rstrip = strstr(name, "phi-3") || strstr(name, "phi3");
    for (size_t i = 0; i < n; i++) t->user[i] = u[i].id;
    free(u);
    return FKV_OK;
}

fkv_status fkv_tokenizer_from_gguf(const fkv_gguf *g, fkv_tokenizer **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *model;
    fkv_status st = fkv_gguf_get_str(g, "tokenizer.ggml.model", &model, err, errlen);
    if (st == FKV_ENOENT) return fkv_errf(err, errlen, FKV_EPARSE, "metadata 'tokenizer.ggml.model' is missing");
    if (st) return st;
    fkv_tok_kind kind;
    if (!strcmp(model, "llama"))
        kind = FKV_TOK_SPM;
    else if (!strcmp(model, "gpt2"))
        kind = FKV_TOK_BPE;
    else if (!strcmp(model, "bytes"))
        kind = FKV_TOK_BYTES;
    else
        return fkv_errf(err, errlen, FKV_EUNSUPPORTED, "tokenizer.ggml.model '%s' is not supported (llama, gpt2, bytes)",
                    model);
    const fkv_gguf_kv *tk = fkv_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tk || tk->type != FKV_GGUF_ARRAY || tk->arr_type != FKV_GGUF_STRING || tk->n == 0 || tk->n > (1u << 24))
        return fkv_errf(err, errlen, FKV_EPARSE, "metadata 'tokenizer.ggml.tokens' must be an array of 1..2^24 strings");
    fkv_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return FKV_ENOMEM;
    uint32_t n = (uint32_t)tk->n;
    t->kind = kind;
    t->n_vocab = n;
    t->bos = t->eos = t->unk = t->eot = -1;
    t->add_bos = kind != FKV_TOK_BPE;
    t->add_space_prefix = kind == FKV_TOK_SPM;
    t->text = calloc(n, sizeof *t->text);
    t->len = calloc(n, sizeof *t->len);
    t->score = calloc(n, sizeof *t->score);
    t->type = calloc(n, sizeof *t->type);
    t->vocab = fkv__strmap_new(n);
    if (!t->text || !t->len || !t->score || !t->type || !t->vocab) {
        st = FKV_ENOMEM;
        goto fail;
    }
    const fkv_gguf_kv *sc = num_array(g, "tokenizer.ggml.scores", n, &st, err, errlen);
    if (st) goto fail;
    const fkv_gguf_kv *ty = num_array(g, "tokenizer.ggml.token_type", n, &st, err, errlen);
    if (st) goto fail;
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (tk->str_lens[i] > 1024) {
            st = fkv_errf(err, errlen, FKV_EPARSE, "tokenizer.ggml.tokens[%u] is %llu bytes long (1024 max)", i,
                      (unsigned long long)tk->str_lens[i]);
            goto fail;
        }
        t->len[i] = (uint32_t)tk->str_lens[i];
        t->text[i] = malloc(t->len[i] + 1);
        if (!t->text[i]) {
            st = FKV_ENOMEM;
            goto fail;
        }
        memcpy(t->text[i], tk->strs[i], t->len[i] + 1);
        double score = sc ? fkv_gguf_arr_f64(sc, i) : 0.0;
        if (!(score >= -FLT_MAX)) score = -FLT_MAX; /* NaN and -inf: never preferred */
        if (score > FLT_MAX) score = FLT_MAX;
        t->score[i] = (float)score;
        int64_t type = ty ? fkv_gguf_arr_i64(ty, i) : FKV_TT_NORMAL;
        t->type[i] = type >= 0 && type <= FKV_TT_BYTE ? (int32_t)type : FKV_TT_UNDEFINED;
        const char *s = t->text[i];
        int is_byte_form = t->len[i] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hexval(s[3]) >= 0 &&
                           hexval(s[4]) >= 0;
        if (is_byte_form && (t->type[i] == FKV_TT_BYTE || !ty || kind == FKV_TOK_BYTES)) {
            t->type[i] = FKV_TT_BYTE;
            int b = hexval(s[3]) * 16 + hexval(s[4]);
            if (t->byte_tok[b] < 0) t->byte_tok[b] = (int32_t)i;
        } else if (t->type[i] == FKV_TT_BYTE) {
            /* marked as a byte but not written <0xHH>: decoding reads the
             * two hex digits, so treat it as plain text (found by fuzzing) */
            t->type[i] = FKV_TT_UNDEFINED;
        }
        /* only tokens text can turn into are merge targets */
        int mergeable = t->type[i] == FKV_TT_NORMAL || t->type[i] == FKV_TT_USER_DEFINED ||
                        t->type[i] == FKV_TT_UNDEFINED || t->type[i] == FKV_TT_UNUSED;
        if (mergeable && t->len[i] && fkv__strmap_put(t->vocab, t->text[i], t->len[i], (int32_t)i)) {
            st = FKV_ENOMEM;
            goto fail;
        }
    }
    if ((st = opt_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos, err, errlen))) goto fail;
    if ((st = opt_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos, err, errlen))) goto fail;
    if ((st = opt_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk, err, errlen))) goto fail;
    if ((st = opt_id(g, "tokenizer.ggml.eot_token_id", n, &t->eot, err, errlen))) goto fail;
    opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if (kind == FKV_TOK_BPE && (st = load_merges(t, g, err, errlen))) goto fail;
    if (kind == FKV_TOK_BPE && (st = pick_pre(t, g, err, errlen))) goto fail;
    if ((st = collect_user_tokens(t, g))) goto fail;
    if (kind == FKV_TOK_BYTES)
        for (int b = 0; b < 256; b++)
            if (t->byte_tok[b] < 0) {
                st = fkv_errf(err, errlen, FKV_EPARSE, "tokenizer 'bytes': no token <0x%02X>", b);
                goto fail;
            }
    *out = t;
    return FKV_OK;
fail:
    fkv_tokenizer_free(t);
    return st;
}

void fkv_tokenizer_free(fkv_tokenizer *t)
{
    if (!t) return;
    for (uint32_t i = 0; t->text && i < t->n_vocab; i++) free(t->text[i]);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->type);
    fkv__strmap_free(t->vocab);
    fkv__strmap_free(t->merges);
    free(t->user);
    free(t);
}

/* ---------------------------------------------------------------- encode / decode */

int fkv_tok_is_eog(const fkv_tokenizer *t, int32_t id)
{
    return id >= 0 && (id == t->eos || id == t->eot);
}

uint32_t fkv_tok_eog_ids(const fkv_tokenizer *t, int32_t *out, uint32_t cap)
{
    uint32_t n = 0;
    if (t->eos >= 0 && n < cap) out[n++] = t->eos;
    if (t->eot >= 0 && t->eot != t->eos && n < cap) out[n++] = t->eot;
    return n;
}

/* A stretch of the text: raw (tok < 0) or one user-defined token. */
typedef struct frag {
    size_t start, len;
    int32_t tok;
} frag;

typedef struct frags {
    frag *p;
    size_t n, cap;
} frags;

static int frag_push(frags *f, size_t start, size_t len, int32_t tok)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *p = realloc(f->p, cap * sizeof *p);
        if (!p) return -1;
        f->p = p;
        f->cap = cap;
    }
    f->p[f->n++] = (frag){start, len, tok};
    return 0;
}

/* Cuts every occurrence of token id out of the raw fragments of *f
 * (white space after it too when rstrip). */
static fkv_status cut_token(const fkv_tokenizer *t, const char *text, frags *f, int32_t id, int rstrip)
{
    const char *w = t->text[id];
    size_t wl = t->len[id];
    frags out = {0};
    for (size_t k = 0; k < f->n; k++) {
        frag fr = f->p[k];
        size_t from = fr.start, end = fr.start + fr.len;
        if (fr.tok < 0)
            for (size_t i = from; i + wl <= end; i++) {
                if (text[i] != w[0] || memcmp(text + i, w, wl)) continue;
                if ((i > from && frag_push(&out, from, i - from, -1)) || frag_push(&out, i, wl, id)) goto nomem;
                from = i + wl;
                while (rstrip && from < end && isspace((unsigned char)text[from])) from++;
                i = from - 1;
            }
        if (fr.tok >= 0 ? frag_push(&out, fr.start, fr.len, fr.tok) : from < end && frag_push(&out, from, end - from, -1))
            goto nomem;
    }
    free(f->p);
    *f = out;
    return FKV_OK;
nomem:
    free(out.p);
    return FKV_ENOMEM;
}

static fkv_status encode_raw(const fkv_tokenizer *t, const char *text, size_t len, int after_special, fkv__ids *ids)
{
    if (t->kind == FKV_TOK_SPM) return fkv__spm_encode(t, text, len, t->add_space_prefix && after_special, ids);
    if (t->kind == FKV_TOK_BPE) return fkv__bpe_encode(t, text, len, ids);
    for (size_t i = 0; i < len; i++)
        if (fkv__ids_push(ids, t->byte_tok[(unsigned char)text[i]])) return FKV_ENOMEM;
    return FKV_OK;
}

/* The control tokens with a text, longest first (so "<|im_start|>" is not
 * cut as a shorter token it begins with); *n of them, or NULL for none. */
static int32_t *control_tokens(const fkv_tokenizer *t, size_t *n)
{
    *n = 0;
    for (uint32_t i = 0; t->type && i < t->n_vocab; i++) *n += t->type[i] == FKV_TT_CONTROL && t->len[i];
    int32_t *ids = *n ? malloc(*n * sizeof *ids) : NULL;
    size_t k = 0;
    for (uint32_t i = 0; ids && i < t->n_vocab; i++) {
        if (t->type[i] != FKV_TT_CONTROL || !t->len[i]) continue;
        size_t j = k++; /* insertion by length: control tokens are few */
        for (; j > 0 && t->len[ids[j - 1]] < t->len[i]; j--) ids[j] = ids[j - 1];
        ids[j] = (int32_t)i;
    }
    if (!ids) *n = 0;
    return ids;
}

/* special: control tokens are cut out of the text too, before the
 * user-defined ones (llama.cpp's parse_special). */
static fkv_status encode(const fkv_tokenizer *t, const char *text, size_t len, int add_bos, int special, int32_t *out,
                         size_t cap, size_t *n)
{
    fkv__ids ids = {0};
    frags f = {0};
    fkv_status st = FKV_OK;
    if (add_bos && t->bos >= 0 && fkv__ids_push(&ids, t->bos)) st = FKV_ENOMEM;
    if (!st && len && frag_push(&f, 0, len, -1)) st = FKV_ENOMEM;
    if (special && !st) {
        size_t nc;
        int32_t *ctl = control_tokens(t, &nc);
        for (size_t c = 0; c < nc && !st; c++) st = cut_token(t, text, &f, ctl[c], 0);
        free(ctl);
    }
    for (size_t u = 0; u < t->n_user && !st; u++) st = cut_token(t, text, &f, t->user[u], t->user_rstrip);
    /* the space prefix goes at the start and after each user-defined token */
    int after_special = 1;
    for (size_t k = 0; k < f.n && !st; k++) {
        if (f.p[k].tok >= 0) {
            if (fkv__ids_push(&ids, f.p[k].tok)) st = FKV_ENOMEM;
            after_special = 1;
            continue;
        }
        st = encode_raw(t, text + f.p[k].start, f.p[k].len, after_special, &ids);
        after_special = 0;
    }
    if (!st) {
        *n = ids.n;
        if (out && cap && ids.n) memcpy(out, ids.p, (ids.n < cap ? ids.n : cap) * sizeof *out);
    }
    free(f.p);
    free(ids.p);
    return st;
}

fkv_status fkv_tok_encode(const fkv_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *out, size_t cap,
                          size_t *n)
{
    return encode(t, text, len, add_bos, 0, out, cap, n);
}

fkv_status fkv_tok_encode_special(const fkv_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *out,
                                  size_t cap, size_t *n)
{
    return encode(t, text, len, add_bos, 1, out, cap, n);
}

/* GPT-2's byte <-> printable code point map: printable Latin-1 bytes stand
 * for themselves, the other 68 take 256, 257, ... in byte order. */
static int32_t bpe_byte_of(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int32_t)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    uint32_t k = 256;
    for (uint32_t b = 0; b < 256; b++) {
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) continue;
        if (k++ == cp) return (int32_t)b;
    }
    return -1;
}

static size_t emit(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (at + i < cap) buf[at + i] = s[i];
    return at + n;
}

size_t fkv_tok_piece(const fkv_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    size_t n = 0;
    if (id < 0 || (uint32_t)id >= t->n_vocab || t->type[id] == FKV_TT_CONTROL) goto done;
    const char *s = t->text[id];
    size_t len = t->len[id];
    if (t->type[id] == FKV_TT_USER_DEFINED) { /* matched in the text as it is, so it stands for itself */
        n = emit(buf, cap, 0, s, len);
    } else if (t->type[id] == FKV_TT_BYTE) {
        char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
        n = emit(buf, cap, 0, &b, 1);
    } else if (t->kind == FKV_TOK_SPM) {
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                n = emit(buf, cap, n, " ", 1);
                i += 3;
            } else {
                n = emit(buf, cap, n, s + i, 1);
                i++;
            }
        }
    } else if (t->kind == FKV_TOK_BPE) {
        for (size_t i = 0; i < len;) {
            size_t cl = fkv__utf8_len((unsigned char)s[i]);
            if (cl > len - i) cl = len - i;
            uint32_t cp = (unsigned char)s[i];
            if (cl == 2) cp = ((cp & 0x1fu) << 6) | ((unsigned char)s[i + 1] & 0x3fu);
            int32_t b = cl <= 2 ? bpe_byte_of(cp) : -1;
            if (b >= 0) {
                char c = (char)b;
                n = emit(buf, cap, n, &c, 1);
            } else {
                n = emit(buf, cap, n, s + i, cl);
            }
            i += cl;
        }
    } else {
        n = emit(buf, cap, 0, s, len);
    }
done:
    if (cap) buf[n < cap ? n : cap - 1] = 0;
    return n;
}

fkv_status fkv_tok_decode(const fkv_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len)
{
    size_t at = 0;
    char piece[1100];
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        size_t pl = fkv_tok_piece(t, ids[i], piece, sizeof piece);
        if (pl > sizeof piece - 1) pl = sizeof piece - 1; /* token texts are <= 1024 bytes */
        const char *p = piece;
        /* the space encode put in front of the text */
        if (first && pl && t->kind == FKV_TOK_SPM && t->add_space_prefix && p[0] == ' ') {
            p++;
            pl--;
        }
        if (pl || (ids[i] >= 0 && (uint32_t)ids[i] < t->n_vocab && t->type[ids[i]] != FKV_TT_CONTROL)) first = 0;
        at = emit(out, cap, at, p, pl);
    }
    if (cap) out[at < cap ? at : cap - 1] = 0;
    *len = at;
    return FKV_OK;
}
