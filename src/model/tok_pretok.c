/* BPE pre-tokenizers (tokenizer.ggml.pre), as llama.cpp runs them.
 *
 * A pre-tokenizer is a list of regular expressions applied in order: each
 * one cuts every piece left by the previous ones into its matches and the
 * unmatched stretches between them (both stay pieces, so no text is lost).
 * Each expression is matched here by a hand-written function over code
 * points; the character classes come from Unicode general categories
 * (utf8proc): \p{L} letters, \p{N} numbers, \p{P} punctuation; \s is the
 * Unicode White_Space property, which is not a category and so is listed.
 *
 *   gpt-2           's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3          (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *                    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   deepseek-coder  [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ; [一-龥ࠀ-一가-퟿]+ ; \p{N}
 *   default         [\p{P}\$\+<=>\^~\|]+ ; gpt-2 ; \p{N}+ ; [0-9][0-9][0-9]
 *
 * Bytes that are not UTF-8 count as U+FFFD (a symbol) but keep their own
 * bytes in the pieces, so decoding still gives them back. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "model/tokenizer.h"

enum {
    F_IN = 1,     /* a code point of the piece (0: past its end) */
    F_WS = 2,     /* \s */
    F_LETTER = 4, /* \p{L} */
    F_NUMBER = 8, /* \p{N} */
    F_PUNCT = 16, /* \p{P} */
    F_NL = 32     /* \r or \n */
};

typedef struct cptext {
    uint32_t *cp;
    uint8_t *fl;
    size_t *off; /* byte offset of each code point; off[n] = length */
    size_t n;
} cptext;

typedef struct range {
    size_t a, b; /* code points [a, b) */
} range;

/* Returns how many code points match at i (the piece ends at end); 0: none. */
typedef size_t (*match_fn)(const cptext *t, size_t i, size_t end);

static int is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static uint8_t cp_flags(uint32_t c)
{
    uint8_t f = F_IN;
    if (is_white_space(c)) f |= F_WS;
    if (c == '\r' || c == '\n') f |= F_NL;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: f |= F_LETTER; break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: f |= F_NUMBER; break;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: f |= F_PUNCT; break;
    default: break;
    }
    return f;
}

static fkv_status decode_text(const char *s, size_t len, cptext *t)
{
    t->cp = malloc((len + 1) * sizeof *t->cp);
    t->fl = malloc(len + 1);
    t->off = malloc((len + 1) * sizeof *t->off);
    if (!t->cp || !t->fl || !t->off) return FKV_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) { /* not UTF-8: this byte alone */
            c = 0xfffd;
            k = 1;
        }
        t->cp[n] = (uint32_t)c;
        t->fl[n] = cp_flags((uint32_t)c);
        t->off[n] = i;
        i += (size_t)k;
    }
    t->off[n] = len;
    t->n = n;
    return FKV_OK;
}

static void free_text(cptext *t)
{
    free(t->cp);
    free(t->fl);
    free(t->off);
}

/* flags at i, 0 past the piece (as llama.cpp's out-of-range code point) */
static uint8_t at(const cptext *t, size_t i, size_t end)
{
    return i < end ? t->fl[i] : 0;
}

static uint32_t lower_ascii(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's 't 'm 'd 're 've 'll; 0 if none */
static size_t contraction(const cptext *t, size_t i, size_t end, int fold)
{
    if (t->cp[i] != '\'' || i + 1 >= end) return 0;
    uint32_t c1 = fold ? lower_ascii(t->cp[i + 1]) : t->cp[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= end) return 0;
    uint32_t c2 = fold ? lower_ascii(t->cp[i + 2]) : t->cp[i + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

static size_t run(const cptext *t, size_t i, size_t end, uint8_t want)
{
    size_t e = i;
    while (e < end && (t->fl[e] & want)) e++;
    return e - i;
}

/* \s+(?!\S)|\s+ : a whitespace run, less its last character when a
 * non-space follows (that one goes with the next piece) */
static size_t spaces(const cptext *t, size_t i, size_t end)
{
    size_t k = run(t, i, end, F_WS);
    if (k > 1 && i + k < end) return k - 1;
    return k;
}

static size_t m_gpt2(const cptext *t, size_t i, size_t end)
{
    size_t k = contraction(t, i, end, 0);
    if (k) return k;
    size_t sp = t->cp[i] == ' ';
    uint8_t f2 = sp ? at(t, i + 1, end) : t->fl[i];
    if (f2 & F_LETTER) return sp + run(t, i + sp, end, F_LETTER);
    if (f2 & F_NUMBER) return sp + run(t, i + sp, end, F_NUMBER);
    if ((f2 & F_IN) && !(f2 & (F_WS | F_LETTER | F_NUMBER))) {
        size_t e = i + sp;
        while (e < end && !(t->fl[e] & (F_WS | F_LETTER | F_NUMBER))) e++;
        return e - i;
    }
    k = spaces(t, i, end);
    return k ? k : 1;
}

static size_t m_llama3(const cptext *t, size_t i, size_t end)
{
    size_t k = contraction(t, i, end, 1);
    if (k) return k;
    uint8_t f = t->fl[i];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!(f & (F_NL | F_NUMBER)) && ((f & F_LETTER) || (at(t, i + 1, end) & F_LETTER)))
        return 1 + run(t, i + 1, end, F_LETTER);
    if (f & F_NUMBER) { /* \p{N}{1,3} */
        k = run(t, i, end, F_NUMBER);
        return k < 3 ? k : 3;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t sp = t->cp[i] == ' ';
    uint8_t f2 = sp ? at(t, i + 1, end) : f;
    if (!(f2 & (F_WS | F_LETTER | F_NUMBER))) {
        size_t e = i + sp;
        while (e < end && !(t->fl[e] & (F_WS | F_LETTER | F_NUMBER))) e++;
        while (e < end && (t->fl[e] & F_NL)) e++;
        return e - i;
    }
    /* \s*[\r\n]+ : whitespace up to its last newline */
    size_t last_nl = 0;
    for (size_t e = i; e < end && (t->fl[e] & F_WS); e++)
        if (t->fl[e] & F_NL) last_nl = e + 1;
    if (last_nl) return last_nl - i;
    k = spaces(t, i, end);
    return k ? k : 1;
}

static size_t m_newline(const cptext *t, size_t i, size_t end)
{
    (void)end;
    return (t->fl[i] & F_NL) ? 1 : 0;
}

/* \s?X+ for the class X */
static size_t opt_space_run(const cptext *t, size_t i, size_t end, uint8_t cls)
{
    if (t->fl[i] & cls) return run(t, i, end, cls);
    if ((t->fl[i] & F_WS) && (at(t, i + 1, end) & cls)) return 1 + run(t, i + 1, end, cls);
    return 0;
}

static size_t m_space_letters(const cptext *t, size_t i, size_t end)
{
    return opt_space_run(t, i, end, F_LETTER);
}

static size_t m_space_punct(const cptext *t, size_t i, size_t end)
{
    return opt_space_run(t, i, end, F_PUNCT);
}

/* [一-龥ࠀ-一가-퟿]+ : CJK ideographs, U+0800..U+9FA5 and Hangul */
static size_t m_cjk(const cptext *t, size_t i, size_t end)
{
    size_t e = i;
    while (e < end && ((t->cp[e] >= 0x0800 && t->cp[e] <= 0x9fa5) || (t->cp[e] >= 0xac00 && t->cp[e] <= 0xd7ff))) e++;
    return e - i;
}

static size_t m_one_number(const cptext *t, size_t i, size_t end)
{
    (void)end;
    return (t->fl[i] & F_NUMBER) ? 1 : 0;
}

static size_t m_numbers(const cptext *t, size_t i, size_t end)
{
    return run(t, i, end, F_NUMBER);
}

/* [\p{P}\$\+<=>\^~\|]+ */
static size_t m_punct_symbols(const cptext *t, size_t i, size_t end)
{
    size_t e = i;
    while (e < end && ((t->fl[e] & F_PUNCT) || (t->cp[e] < 0x80 && t->cp[e] && strchr("$+<=>^~|", (int)t->cp[e]))))
        e++;
    return e - i;
}

static size_t m_three_digits(const cptext *t, size_t i, size_t end)
{
    for (size_t k = 0; k < 3; k++)
        if (i + k >= end || t->cp[i + k] < '0' || t->cp[i + k] > '9') return 0;
    return 3;
}

/* One expression over every piece: matches and the stretches between them. */
static size_t split_step(const cptext *t, const range *in, size_t nin, range *out, match_fn m)
{
    size_t n = 0;
    for (size_t r = 0; r < nin; r++) {
        size_t gap = in[r].a, i = in[r].a, end = in[r].b;
        while (i < end) {
            size_t k = m(t, i, end);
            if (!k) {
                i++;
                continue;
            }
            if (k > end - i) k = end - i; /* cannot happen; keeps pieces inside */
            if (gap < i) out[n++] = (range){gap, i};
            out[n++] = (range){i, i + k};
            i += k;
            gap = i;
        }
        if (gap < end) out[n++] = (range){gap, end};
    }
    return n;
}

static size_t program(int pre, match_fn *steps)
{
    size_t n = 0;
    switch (pre) {
    case FKV_PRE_LLAMA3: steps[n++] = m_llama3; break;
    case FKV_PRE_DEEPSEEK_CODER:
        steps[n++] = m_newline;
        steps[n++] = m_space_letters;
        steps[n++] = m_space_punct;
        steps[n++] = m_cjk;
        steps[n++] = m_one_number;
        break;
    case FKV_PRE_DEFAULT:
        steps[n++] = m_punct_symbols;
        steps[n++] = m_gpt2;
        steps[n++] = m_numbers;
        steps[n++] = m_three_digits;
        break;
    default: steps[n++] = m_gpt2; break;
    }
    return n;
}

fkv_status fkv__pretok_split(int pre, const char *s, size_t len, size_t **ends, size_t *n_out)
{
    *ends = NULL;
    *n_out = 0;
    cptext t = {0};
    fkv_status st = decode_text(s, len, &t);
    /* every piece holds at least one code point: n ranges at most */
    range *a = st ? NULL : malloc((t.n + 1) * sizeof *a), *b = a ? malloc((t.n + 1) * sizeof *b) : NULL;
    size_t *e = b ? malloc((t.n + 1) * sizeof *e) : NULL;
    if (!e) {
        free_text(&t);
        free(a);
        free(b);
        return FKV_ENOMEM;
    }
    size_t n = 0;
    if (t.n) a[n++] = (range){0, t.n};
    match_fn steps[8];
    size_t ns = program(pre, steps);
    for (size_t k = 0; k < ns; k++) {
        n = split_step(&t, a, n, b, steps[k]);
        range *tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t r = 0; r < n; r++) e[r] = t.off[a[r].b];
    free_text(&t);
    free(a);
    free(b);
    *ends = e;
    *n_out = n;
    return FKV_OK;
}
