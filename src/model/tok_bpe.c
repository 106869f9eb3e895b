/* Byte-level BPE (tokenizer.ggml.model "gpt2").
 *
 * Text is first cut by GPT-2's pre-tokenizer,
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * or Llama 3's (tokenizer.ggml.pre "llama-bpe"), written out by hand: ASCII is classified exactly; above ASCII, a few
 * ranges of spaces, digits and punctuation are recognised and every other
 * code point counts as a letter (no Unicode tables).  Each piece's bytes are
 * mapped to printable code points (byte_to_unicode), then merges apply by
 * rank, lowest first. */
#include <stdlib.h>
#include <string.h>

#include "model/tok_merge.h"

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };

static uint32_t decode_cp(const char *s, size_t len, size_t i, size_t *cl)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = fkv__utf8_len(u[i]);
    if (n > len - i) n = 1;
    for (size_t k = 1; k < n; k++)
        if ((u[i + k] & 0xc0) != 0x80) n = 1;
    *cl = n;
    if (n == 1) return u[i];
    uint32_t cp = u[i] & (0x7fu >> n);
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (u[i + k] & 0x3fu);
    return cp;
}

static int classify(uint32_t cp)
{
    if (cp < 0x80) {
        if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return C_SPACE;
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_DIGIT;
        return C_OTHER;
    }
    if (cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000)
        return C_SPACE;
    if (cp == 0xb2 || cp == 0xb3 || cp == 0xb9 || (cp >= 0xbc && cp <= 0xbe) || (cp >= 0x660 && cp <= 0x669) ||
        (cp >= 0xff10 && cp <= 0xff19))
        return C_DIGIT;
    if (cp < 0xa0 || (cp >= 0xa1 && cp <= 0xbf && cp != 0xaa && cp != 0xb5 && cp != 0xba) || cp == 0xd7 ||
        cp == 0xf7 || (cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) ||
        (cp >= 0xff00 && cp <= 0xff0f) || (cp >= 0x1f000 && cp <= 0x1faff))
        return C_OTHER;
    return C_LETTER;
}

static int class_at(const char *s, size_t len, size_t i, size_t *cl)
{
    return classify(decode_cp(s, len, i, cl));
}

/* End of the GPT-2 pre-token that starts at i. */
static size_t next_gpt2(const char *s, size_t len, size_t i)
{
    static const char *const contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    if (s[i] == '\'')
        for (size_t k = 0; k < sizeof contr / sizeof contr[0]; k++) {
            size_t n = strlen(contr[k]);
            if (len - i >= n && !memcmp(s + i, contr[k], n)) return i + n;
        }
    size_t cl, j = i;
    int c = class_at(s, len, i, &cl);
    if (s[i] == ' ' && i + 1 < len) {
        size_t cl2;
        int c2 = class_at(s, len, i + 1, &cl2);
        if (c2 != C_SPACE) { /* " ?X+" takes the space */
            j = i + 1;
            c = c2;
            cl = cl2;
        }
    }
    if (c != C_SPACE) {
        size_t e = j;
        while (e < len) {
            size_t l;
            if (class_at(s, len, e, &l) != c) break;
            e += l;
        }
        return e;
    }
    /* whitespace run; before a non-space, leave its last character to the next piece */
    size_t e = i, last = i;
    while (e < len) {
        size_t l;
        if (class_at(s, len, e, &l) != C_SPACE) break;
        last = e;
        e += l;
    }
    if (e < len && last > i) e = last;
    return e;
}

static int is_nl(char c) { return c == '\r' || c == '\n'; }

/* End of the Llama 3 pre-token that starts at i:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t next_llama3(const char *s, size_t len, size_t i)
{
    static const char *const contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    if (s[i] == '\'')
        for (size_t k = 0; k < sizeof contr / sizeof contr[0]; k++) {
            size_t n = strlen(contr[k]), m = 1;
            while (m < n && i + m < len && (s[i + m] | 0x20) == contr[k][m]) m++;
            if (m == n) return i + n;
        }
    size_t cl, l;
    int c = class_at(s, len, i, &cl);
    /* one optional non-letter, non-digit, non-newline character, then letters */
    size_t j = (c == C_LETTER) ? i : (c != C_DIGIT && !is_nl(s[i])) ? i + cl : len;
    size_t e = j;
    while (e < len && class_at(s, len, e, &l) == C_LETTER) e += l;
    if (e > j) return e;
    if (c == C_DIGIT) { /* at most three digits */
        e = i;
        for (int k = 0; k < 3 && e < len && class_at(s, len, e, &l) == C_DIGIT; k++) e += l;
        return e;
    }
    j = (s[i] == ' ' && i + 1 < len) ? i + 1 : i;
    e = j;
    while (e < len && class_at(s, len, e, &l) == C_OTHER) e += l;
    if (e > j) {
        while (e < len && is_nl(s[e])) e++;
        return e;
    }
    if (c != C_SPACE) return i + cl;
    /* whitespace: up to its last newline; else as GPT-2 */
    size_t last = i, after_nl = 0;
    e = i;
    while (e < len && class_at(s, len, e, &l) == C_SPACE) {
        if (is_nl(s[e])) after_nl = e + 1;
        last = e;
        e += l;
    }
    if (after_nl) return after_nl;
    if (e < len && last > i) e = last;
    return e;
}

size_t fkv__pretok_next(int pre, const char *s, size_t len, size_t i)
{
    return pre == FKV_PRE_LLAMA3 ? next_llama3(s, len, i) : next_gpt2(s, len, i);
}

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
    char *buf = NULL;
    size_t cap = 0;
    fkv_status st = FKV_OK;
    for (size_t i = 0; i < len && !st;) {
        size_t e = fkv__pretok_next(t->pre, text, len, i);
        if (e <= i) e = i + 1; /* cannot happen; guarantees progress */
        if (2 * (e - i) > cap) {
            cap = 2 * (e - i);
            char *b = realloc(buf, cap);
            if (!b) {
                st = FKV_ENOMEM;
                break;
            }
            buf = b;
        }
        st = encode_piece(t, text + i, e - i, buf, out);
        i = e;
    }
    free(buf);
    return st;
}
