/* Byte-level BPE (tokenizer.ggml.model "gpt2").
 *
 * Text is first cut by the vocabulary's pre-tokenizer (tok_pretok.c).
 * Each piece's bytes are mapped to printable code points (byte_to_unicode),
 * then merges apply by rank, lowest first. */
#include <stdlib.h>
#include <string.h>

#include "model/tok_merge.h"

/* byte -> GPT-2 printable code point */
static uint32_t byte_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    uint32_t k = 256;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return k;
}

static int bpe_pair(const void *ctx, const char *a, size_t la, size_t lb, double *score)
{
    const fkv_tokenizer *t = ctx;
    char key[2 * 1024 + 2];
    if (la + lb + 1 > sizeof key) return 0;
    memcpy(key, a, la);
    key[la] = ' ';
    memcpy(key + la + 1, a + la, lb);
    int32_t rank = fkv__strmap_get(t->merges, key, la + lb + 1);
    if (rank < 0) return 0;
    *score = -(double)rank;
    return 1;
}

static fkv_status encode_piece(const fkv_tokenizer *t, const char *p, size_t n, char *buf, fkv__ids *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = byte_cp((unsigned char)p[i]);
        if (cp < 0x80) {
            buf[k++] = (char)cp;
        } else {
            buf[k++] = (char)(0xc0 | (cp >> 6));
            buf[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    if (t->ignore_merges) { /* Llama 3: a piece that is a token is kept whole */
        int32_t whole = fkv__strmap_get(t->vocab, buf, k);
        if (whole >= 0) return fkv__ids_push(out, whole) ? FKV_ENOMEM : FKV_OK;
    }
    size_t ns;
    fkv__sym *s = fkv__split_chars(buf, k, &ns);
    if (!s) return FKV_ENOMEM;
    fkv_status st = fkv__merge(buf, s, ns, bpe_pair, t);
    for (size_t i = 0; !st && ns && i != SIZE_MAX; i = s[i].next) {
        int32_t id = fkv__strmap_get(t->vocab, buf + s[i].start, s[i].len);
        if (id >= 0) {
            if (fkv__ids_push(out, id)) st = FKV_ENOMEM;
            continue;
        }
        /* not in the vocabulary: its characters one by one, else <unk> */
        for (size_t c = s[i].start; c < s[i].start + s[i].len && !st;) {
            size_t cl = fkv__utf8_len((unsigned char)buf[c]);
            int32_t cid = fkv__strmap_get(t->vocab, buf + c, cl);
            if (cid < 0) cid = t->unk;
            if (cid >= 0 && fkv__ids_push(out, cid)) st = FKV_ENOMEM;
            c += cl;
        }
    }
    free(s);
    return st;
}

fkv_status fkv__bpe_encode(const fkv_tokenizer *t, const char *text, size_t len, fkv__ids *out)
{
    size_t *ends, n;
    fkv_status st = fkv__pretok_split(t->pre, text, len, &ends, &n);
    if (st) return st;
    size_t most = 0;
    for (size_t k = 0, i = 0; k < n; i = ends[k++])
        if (ends[k] - i > most) most = ends[k] - i;
    char *buf = malloc(2 * most + 1); /* a byte maps to at most two UTF-8 bytes */
    if (!buf) st = FKV_ENOMEM;
    for (size_t k = 0, i = 0; k < n && !st; i = ends[k++]) st = encode_piece(t, text + i, ends[k] - i, buf, out);
    free(buf);
    free(ends);
    return st;
}
