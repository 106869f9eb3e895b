/* Tokenizers built from hand-made GGUF vocabularies (no pretrained model is
 * available offline): exact encodings worked out by hand, a brute-force
 * reference of the merge rule on random text, round trips; the sampler's
 * determinism and distribution. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf/gguf.h"
#include "model/model_init.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

typedef struct vocab {
    const char *tok[400];
    float score[400];
    int32_t type[400];
    uint32_t n;
    char bytes[256][8];
} vocab;

static uint32_t add(vocab *v, const char *s, float score, int32_t type)
{
    v->tok[v->n] = s;
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

static int32_t id_of(const vocab *v, const char *s)
{
    for (uint32_t i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], s) && (v->type[i] == FKV_TT_NORMAL)) return (int32_t)i;
    REQUIRE(0);
    return -1;
}

static fkv_tokenizer *load(const vocab *v, const char *model, const char *const *merges, uint32_t n_merges,
                           fkv_gguf **gout, uint8_t **bufout)
{
    fkv_gguf_writer *w = fkv_gguf_writer_new(32);
    REQUIRE(w);
    REQUIRE(!fkv_gguf_w_str(w, "tokenizer.ggml.model", model));
    REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.tokens", v->n, v->tok, NULL));
    REQUIRE(!fkv_gguf_w_arr(w, "tokenizer.ggml.scores", FKV_GGUF_F32, v->n, v->score));
    REQUIRE(!fkv_gguf_w_arr(w, "tokenizer.ggml.token_type", FKV_GGUF_I32, v->n, v->type));
    REQUIRE(!fkv_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1));
    REQUIRE(!fkv_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2));
    if (merges) REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.merges", n_merges, merges, NULL));
    /* GPT-2's pre-tokenizer (without the key llama.cpp's default applies) */
    if (merges) REQUIRE(!fkv_gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2"));
    size_t len;
    REQUIRE(!fkv_gguf_w_to_mem(w, bufout, &len));
    fkv_gguf_writer_free(w);
    char err[300];
    REQUIRE(!fkv_gguf_parse(*bufout, len, "vocab.gguf", gout, err, sizeof err));
    fkv_tokenizer *t;
    fkv_status st = fkv_tokenizer_from_gguf(*gout, &t, err, sizeof err);
    if (st) fprintf(stderr, "%s\n", err);
    REQUIRE(st == FKV_OK);
    return t;
}

static size_t enc(const fkv_tokenizer *t, const char *s, size_t len, int bos, int32_t *out)
{
    size_t n;
    REQUIRE(fkv_tok_encode(t, s, len, bos, out, 4096, &n) == FKV_OK);
    REQUIRE(n <= 4096);
    return n;
}

static int round_trip(const fkv_tokenizer *t, const char *s, size_t len)
{
    int32_t ids[4096];
    size_t n = enc(t, s, len, 1, ids);
    char out[8192];
    size_t olen;
    REQUIRE(fkv_tok_decode(t, ids, n, out, sizeof out, &olen) == FKV_OK);
    return olen == len && !memcmp(out, s, len);
}

static void rand_text(fkv_rng *r, const char *const *alpha, size_t na, char *buf, size_t *len, size_t max_pieces)
{
    size_t n = 1 + fkv_rng_next(r) % max_pieces, k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *a = alpha[fkv_rng_next(r) % na];
        memcpy(buf + k, a, strlen(a));
        k += strlen(a);
    }
    *len = k;
}

/* a + sep + b into out[cap]; 0 if it does not fit */
static int join(char *out, size_t cap, const char *a, const char *sep, const char *b)
{
    size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
    if (la + ls + lb >= cap) return 0;
    memcpy(out, a, la);
    memcpy(out + la, sep, ls);
    memcpy(out + la + ls, b, lb + 1);
    return 1;
}

static void merge_at(char (*sym)[64], size_t *ns, int best)
{
    char cat[64];
    REQUIRE(join(cat, sizeof cat, sym[best], "", sym[best + 1]));
    memcpy(sym[best], cat, sizeof cat);
    memmove(sym[best + 1], sym[best + 2], (*ns - (size_t)best - 2) * sizeof sym[0]);
    (*ns)--;
}

/* ---------------------------------------------------------------- SentencePiece */

/* The rule, by brute force: merge the adjacent pair whose concatenation is
 * a normal token of highest score, leftmost on ties, until none; then
 * unknown characters become their bytes. */
static size_t spm_brute(const vocab *v, const char *text, int32_t *out)
{
    char norm[2048];
    size_t k = 0;
    memcpy(norm, SP, 3), k = 3;
    for (const char *p = text; *p; p++) {
        if (*p == ' ') {
            memcpy(norm + k, SP, 3), k += 3;
        } else {
            norm[k++] = *p;
        }
    }
    char sym[512][64];
    size_t ns = 0;
    for (size_t i = 0; i < k;) {
        size_t cl = fkv__utf8_len((unsigned char)norm[i]);
        memcpy(sym[ns], norm + i, cl);
        sym[ns++][cl] = 0;
        i += cl;
    }
    for (;;) {
        int best = -1;
        float bs = -INFINITY;
        for (size_t i = 0; i + 1 < ns; i++) {
            char cat[128];
            if (!join(cat, sizeof cat, sym[i], "", sym[i + 1])) continue;
            for (uint32_t j = 0; j < v->n; j++)
                if (v->type[j] == FKV_TT_NORMAL && !strcmp(v->tok[j], cat) && v->score[j] > bs) {
                    bs = v->score[j];
                    best = (int)i;
                }
        }
        if (best < 0) break;
        merge_at(sym, &ns, best);
    }
    size_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        int32_t id = -1;
        for (uint32_t j = 0; j < v->n; j++)
            if (v->type[j] == FKV_TT_NORMAL && !strcmp(v->tok[j], sym[i])) id = (int32_t)j;
        if (id >= 0) {
            out[n++] = id;
        } else {
            for (const char *p = sym[i]; *p; p++) out[n++] = 3 + (unsigned char)*p;
        }
    }
    return n;
}

static void test_spm(void)
{
    vocab v = {0};
    add(&v, "<unk>", 0, FKV_TT_UNKNOWN);
    add(&v, "<s>", 0, FKV_TT_CONTROL);
    add(&v, "</s>", 0, FKV_TT_CONTROL);
    for (int b = 0; b < 256; b++) {
        snprintf(v.bytes[b], sizeof v.bytes[b], "<0x%02X>", b);
        add(&v, v.bytes[b], 0, FKV_TT_BYTE);
    }
    const char *pieces[] = {SP "hello", SP "world", SP "he", "ll", "llo", "he", SP "h", "lo", SP "w", "or",
                            "orld", "ld", "wor", SP "wor", "ab", "bc", SP, "a", "b", "c", "h",
                            "e", "l", "o", "w", "r", "d", SP SP, "\n"};
    const float scores[] = {-1, -1.5f, -3, -2, -2.5f, -4, -5, -6, -5, -4, -3, -4, -8, -6, -1, -0.5f, -10,
                            -10, -10, -10, -10, -10, -10, -10, -10, -10, -10, -7, -10};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) add(&v, pieces[i], scores[i], FKV_TT_NORMAL);
    fkv_gguf *g;
    uint8_t *buf;
    fkv_tokenizer *t = load(&v, "llama", NULL, 0, &g, &buf);
    CHECK(t->kind == FKV_TOK_SPM && t->bos == 1 && t->eos == 2 && t->add_space_prefix && t->add_bos);
    int32_t ids[4096];
    /* worked by hand: ll, llo, he, ▁he, ▁hello / or (ties ld, leftmost), ld, orld, ▁w, ▁world */
    size_t n = enc(t, "hello world", 11, 1, ids);
    CHECK(n == 3 && ids[0] == 1 && ids[1] == id_of(&v, SP "hello") && ids[2] == id_of(&v, SP "world"));
    /* higher score first: bc (-0.5) beats ab (-1) */
    n = enc(t, "abc", 3, 0, ids);
    CHECK(n == 3 && ids[0] == id_of(&v, SP) && ids[1] == id_of(&v, "a") && ids[2] == id_of(&v, "bc"));
    /* byte fallback for a character outside the vocabulary */
    n = enc(t, "\xc3\xa9", 2, 0, ids);
    CHECK(n == 3 && ids[0] == id_of(&v, SP) && ids[1] == 3 + 0xc3 && ids[2] == 3 + 0xa9);
    /* control tokens are not made from text */
    n = enc(t, "<s>", 3, 0, ids);
    CHECK(n == 4 && ids[1] == 3 + '<');
    char out[256];
    size_t olen;
    int32_t dec[] = {1, id_of(&v, SP "hello"), id_of(&v, SP "world"), 2};
    CHECK(fkv_tok_decode(t, dec, 4, out, sizeof out, &olen) == FKV_OK && olen == 11 && !strcmp(out, "hello world"));
    CHECK(fkv_tok_piece(t, id_of(&v, SP "world"), out, sizeof out) == 6 && !strcmp(out, " world"));
    CHECK(fkv_tok_piece(t, 1, out, sizeof out) == 0);
    /* random text against the brute-force rule, and back */
    const char *alpha[] = {"a", "b", "c", "h", "e", "l", "o", "w", "r", "d", " ", "\xc3\xa9", "\n", "z", "ll", "hello"};
    fkv_rng r;
    fkv_rng_seed(&r, 3);
    int bad = 0, bad_rt = 0, iters = (int)(400 * check_scale());
    for (int it = 0; it < iters; it++) {
        char text[300];
        size_t len;
        rand_text(&r, alpha, sizeof alpha / sizeof alpha[0], text, &len, 40);
        text[len] = 0;
        int32_t want[4096];
        size_t nw = spm_brute(&v, text, want);
        n = enc(t, text, len, 0, ids);
        if (n != nw || memcmp(ids, want, n * sizeof *ids)) bad++;
        if (!round_trip(t, text, len)) bad_rt++;
    }
    CHECKF(bad == 0, "%d of %d texts differ from the brute-force SentencePiece rule", bad, iters);
    CHECKF(bad_rt == 0, "%d of %d texts do not round-trip", bad_rt, iters);
    /* a long text stays fast (heap, not quadratic) and exact */
    size_t big = 12 * 16666; /* ends with a space: a lone ▁ at the end */
    char *long_text = malloc(big + 1);
    for (size_t i = 0; i < big; i++) long_text[i] = "hello world "[i % 12];
    int32_t *lids = malloc((big + 2) * sizeof *lids);
    REQUIRE(fkv_tok_encode(t, long_text, big, 0, lids, big + 2, &n) == FKV_OK);
    CHECK(n == big / 6 + 1 && lids[0] == id_of(&v, SP "hello") && lids[n - 1] == id_of(&v, SP));
    free(long_text), free(lids);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    free(buf);
}

/* ---------------------------------------------------------------- BPE */

static uint32_t g_byte_cp[256];

static void bytes_to_unicode(void)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        g_byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

static void cp_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
    }
}

/* brute-force rank merge of one pre-token (letters only: one piece) */
static size_t bpe_brute(const vocab *v, const char *const *merges, uint32_t nm, const char *word, int32_t *out)
{
    char sym[256][64];
    size_t ns = 0;
    for (const char *p = word; *p; p++) cp_utf8(g_byte_cp[(unsigned char)*p], sym[ns++]);
    for (;;) {
        int best = -1;
        uint32_t br = UINT32_MAX;
        for (size_t i = 0; i + 1 < ns; i++) {
            char key[160];
            if (!join(key, sizeof key, sym[i], " ", sym[i + 1])) continue;
            for (uint32_t m = 0; m < nm && m < br; m++)
                if (!strcmp(merges[m], key)) {
                    br = m;
                    best = (int)i;
                }
        }
        if (best < 0) break;
        merge_at(sym, &ns, best);
    }
    for (size_t i = 0; i < ns; i++) out[i] = id_of(v, sym[i]);
    return ns;
}

static void test_bpe(void)
{
    bytes_to_unicode();
    vocab v = {0};
    static char chars[256][4];
    add(&v, "<|unk|>", 0, FKV_TT_UNKNOWN);
    add(&v, "<|bos|>", 0, FKV_TT_CONTROL);
    add(&v, "<|endoftext|>", 0, FKV_TT_CONTROL);
    for (int b = 0; b < 256; b++) {
        cp_utf8(g_byte_cp[b], chars[b]);
        add(&v, chars[b], 0, FKV_TT_NORMAL);
    }
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r", "\xc4\xa0w or",
                                         "l d", "\xc4\xa0wor ld", "' t", "n '", "\xc4\xa0 \xc4\xa0", "\xc4\x8a \xc4\x8a",
                                         "a b", "b a", "ab a", "a ba", "b b"};
    const char *merged[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld", "\xc4\xa0world",
                            "'t", "n'", "\xc4\xa0\xc4\xa0", "\xc4\x8a\xc4\x8a", "ab", "ba", "aba", "aba", "bb"};
    uint32_t nm = sizeof merges / sizeof merges[0];
    for (uint32_t i = 0; i < nm; i++)
        if (i != 16) add(&v, merged[i], 0, FKV_TT_NORMAL); /* "aba" twice: once is enough */
    fkv_gguf *g;
    uint8_t *buf;
    fkv_tokenizer *t = load(&v, "gpt2", merges, nm, &g, &buf);
    CHECK(t->kind == FKV_TOK_BPE && !t->add_space_prefix);
    int32_t ids[4096];
    size_t n = enc(t, "hello world", 11, 0, ids);
    CHECK(n == 2 && ids[0] == id_of(&v, "hello") && ids[1] == id_of(&v, "\xc4\xa0world"));
    /* "'t" is its own pre-token, so "n '" never applies */
    n = enc(t, "don't", 5, 0, ids);
    CHECK(n == 4 && ids[2] == id_of(&v, "n") && ids[3] == id_of(&v, "'t"));
    /* "a  b": pieces "a", " ", " b": the two spaces never meet */
    n = enc(t, "a  b", 4, 0, ids);
    CHECK(n == 4 && ids[1] == id_of(&v, "\xc4\xa0") && ids[2] == id_of(&v, "\xc4\xa0"));
    /* trailing spaces are one piece: ĠĠ + Ġ */
    n = enc(t, "a   ", 4, 0, ids);
    CHECK(n == 3 && ids[1] == id_of(&v, "\xc4\xa0\xc4\xa0") && ids[2] == id_of(&v, "\xc4\xa0"));
    /* "\n\nhello": \s+(?!\S) takes one newline, then \s+ the other */
    n = enc(t, "\n\nhello", 7, 0, ids);
    CHECK(n == 3 && ids[0] == id_of(&v, "\xc4\x8a") && ids[1] == id_of(&v, "\xc4\x8a") && ids[2] == id_of(&v, "hello"));
    n = enc(t, "x\n\n", 3, 0, ids);
    CHECK(n == 2 && ids[1] == id_of(&v, "\xc4\x8a\xc4\x8a"));
    /* rank order on letter-only words, against brute force */
    fkv_rng r;
    fkv_rng_seed(&r, 4);
    const char *letters[] = {"a", "b", "h", "e", "l", "o"};
    int bad = 0, iters = (int)(400 * check_scale());
    for (int it = 0; it < iters; it++) {
        char w[128];
        size_t len;
        rand_text(&r, letters, 6, w, &len, 30);
        w[len] = 0;
        int32_t want[256];
        size_t nw = bpe_brute(&v, merges, nm, w, want);
        n = enc(t, w, len, 0, ids);
        if (n != nw || memcmp(ids, want, n * sizeof *ids)) bad++;
    }
    CHECKF(bad == 0, "%d of %d words differ from the brute-force BPE rule", bad, iters);
    /* any bytes round-trip (every byte is a token) */
    int bad_rt = 0;
    for (int it = 0; it < iters; it++) {
        char text[200];
        size_t len = fkv_rng_next(&r) % 150;
        for (size_t i = 0; i < len; i++) {
            uint64_t x = fkv_rng_next(&r);
            text[i] = (x & 3) ? " \n\t'abhelo0129.,!"[x % 17] : (char)(x >> 8);
        }
        if (!round_trip(t, text, len)) bad_rt++;
    }
    CHECKF(bad_rt == 0, "%d BPE texts do not round-trip", bad_rt);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    free(buf);
}

/* ---------------------------------------------------------------- bytes, errors */

static void test_bytes(void)
{
    fkv_gguf_writer *w = fkv_gguf_writer_new(32);
    REQUIRE(!fkv_vocab_bytes_write(w));
    uint8_t *buf;
    size_t len;
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    fkv_gguf *g;
    fkv_tokenizer *t;
    char err[300];
    REQUIRE(!fkv_gguf_parse(buf, len, "b", &g, err, sizeof err));
    REQUIRE(!fkv_tokenizer_from_gguf(g, &t, err, sizeof err));
    CHECK(t->kind == FKV_TOK_BYTES && t->n_vocab == FKV_BYTE_VOCAB && t->bos == 1 && t->eos == 2 && t->add_bos);
    CHECK(fkv_tok_is_eog(t, 2) && !fkv_tok_is_eog(t, 1) && !fkv_tok_is_eog(t, -1) && t->eot == -1);
    int32_t ids[300];
    size_t n = enc(t, "A\0\xff", 3, 1, ids);
    CHECK(n == 4 && ids[0] == 1 && ids[1] == 3 + 'A' && ids[2] == 3 && ids[3] == 3 + 255);
    fkv_rng r;
    fkv_rng_seed(&r, 9);
    int bad = 0;
    for (int it = 0; it < 200; it++) {
        char text[256];
        size_t l = fkv_rng_next(&r) % 256;
        for (size_t i = 0; i < l; i++) text[i] = (char)fkv_rng_next(&r);
        if (!round_trip(t, text, l)) bad++;
    }
    CHECK(bad == 0);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    free(buf);

    /* errors name the key */
    w = fkv_gguf_writer_new(32);
    fkv_gguf_w_str(w, "tokenizer.ggml.model", "wordpiece");
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    REQUIRE(!fkv_gguf_parse(buf, len, "b", &g, err, sizeof err));
    CHECK(fkv_tokenizer_from_gguf(g, &t, err, sizeof err) == FKV_EUNSUPPORTED && strstr(err, "wordpiece"));
    fkv_gguf_free(g);
    free(buf);
    w = fkv_gguf_writer_new(32);
    REQUIRE(!fkv_vocab_bytes_write(w));
    fkv_gguf_w_u32(w, "tokenizer.ggml.pad_token_id", 0);
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    /* bos id beyond the vocabulary: patch the written value */
    size_t at = 0;
    while (memcmp(buf + at, "tokenizer.ggml.bos_token_id", 27)) at++;
    buf[at + 27 + 4] = 0x10, buf[at + 27 + 5] = 0x10;
    REQUIRE(!fkv_gguf_parse(buf, len, "b", &g, err, sizeof err));
    CHECK(fkv_tokenizer_from_gguf(g, &t, err, sizeof err) == FKV_EPARSE && strstr(err, "bos_token_id"));
    fkv_gguf_free(g);
    free(buf);
}

/* ---------------------------------------------------------------- sampler */

static void test_sampler(void)
{
    float lg[5] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f};
    CHECK(fkv_argmax(lg, 5) == 1); /* ties: lowest id */
    fkv_sampler a, b, c;
    REQUIRE(!fkv_sampler_init(&a, 5, 1.0f, 1.0f, 42));
    REQUIRE(!fkv_sampler_init(&b, 5, 1.0f, 1.0f, 42));
    REQUIRE(!fkv_sampler_init(&c, 5, 1.0f, 1.0f, 43));
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        int32_t x = fkv_sample(&a, lg), y = fkv_sample(&b, lg), z = fkv_sample(&c, lg);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same && differ);
    fkv_sampler_free(&a), fkv_sampler_free(&b), fkv_sampler_free(&c);
    /* temperature 0 is greedy; a tiny top_p keeps only the best */
    REQUIRE(!fkv_sampler_init(&a, 5, 0.0f, 1.0f, 1));
    REQUIRE(!fkv_sampler_init(&b, 5, 1.5f, 1e-6f, 1));
    for (int i = 0; i < 100; i++) CHECK(fkv_sample(&a, lg) == 1 && fkv_sample(&b, lg) == 1);
    fkv_sampler_free(&a), fkv_sampler_free(&b);
    /* distribution: p = 0.5, 0.3, 0.2; top_p 0.7 keeps the first two (0.625 / 0.375) */
    float pl[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    for (int mode = 0; mode < 2; mode++) {
        REQUIRE(!fkv_sampler_init(&a, 3, 1.0f, mode ? 0.7f : 1.0f, 7));
        int cnt[3] = {0};
        int N = 40000;
        for (int i = 0; i < N; i++) cnt[fkv_sample(&a, pl)]++;
        double p0 = (double)cnt[0] / N, p1 = (double)cnt[1] / N, p2 = (double)cnt[2] / N;
        printf("sampler top_p %.1f: %.4f %.4f %.4f\n", mode ? 0.7 : 1.0, p0, p1, p2);
        /* 5 standard errors at N = 40000 is about 0.012 */
        if (!mode) {
            CHECK(fabs(p0 - 0.5) < 0.012 && fabs(p1 - 0.3) < 0.012 && fabs(p2 - 0.2) < 0.012);
        } else {
            CHECK(fabs(p0 - 0.625) < 0.012 && fabs(p1 - 0.375) < 0.012 && cnt[2] == 0);
        }
        fkv_sampler_free(&a);
    }
    /* temperature sharpens: T = 0.5 squares the odds (0.25:0.09:0.04) */
    REQUIRE(!fkv_sampler_init(&a, 3, 0.5f, 1.0f, 8));
    int hits = 0;
    for (int i = 0; i < 40000; i++) hits += fkv_sample(&a, pl) == 0;
    CHECK(fabs(hits / 40000.0 - 0.25 / 0.38) < 0.012);
    fkv_sampler_free(&a);
    CHECK(fkv_sampler_init(&a, 3, -1.0f, 1.0f, 1) == FKV_EINVAL);
    CHECK(fkv_sampler_init(&a, 3, 1.0f, 0.0f, 1) == FKV_EINVAL);
}

/* ---------------------------------------------------------------- pre-tokenizers */

static void check_split(int pre, const char *text, const char *want)
{
    static const char *const names[] = {"gpt2", "llama3", "deepseek-coder", "default"};
    char got[512];
    size_t k = 0, len = strlen(text), *ends, n;
    REQUIRE(fkv__pretok_split(pre, text, len, &ends, &n) == FKV_OK);
    for (size_t p = 0, i = 0; p < n; i = ends[p++]) {
        REQUIRE(ends[p] > i && ends[p] <= len);
        if (i) got[k++] = '|';
        memcpy(got + k, text + i, ends[p] - i);
        k += ends[p] - i;
    }
    got[k] = 0;
    CHECK(n == 0 || ends[n - 1] == len);
    free(ends);
    CHECKF(!strcmp(got, want), "%s split of '%s': got '%s', want '%s'", names[pre], text, got, want);
}

static void test_pretok(void)
{
    check_split(FKV_PRE_GPT2, "Hello, world!", "Hello|,| world|!");
    check_split(FKV_PRE_GPT2, "don't stop", "don|'t| stop");
    check_split(FKV_PRE_GPT2, "a  b", "a| | b");
    check_split(FKV_PRE_GPT2, "x\n\ny", "x|\n|\n|y");
    check_split(FKV_PRE_GPT2, "abc123 45", "abc|123| 45");
    check_split(FKV_PRE_GPT2, "  hi", " | hi");
    check_split(FKV_PRE_GPT2, "hi  ", "hi|  ");
    check_split(FKV_PRE_GPT2, "$$$ ok", "$$$| ok");
    check_split(FKV_PRE_GPT2, "I'M", "I|'|M"); /* GPT-2's contractions are lower case only */
    check_split(FKV_PRE_GPT2, "caf\xc3\xa9 \xe2\x80\x94 ok", "caf\xc3\xa9| \xe2\x80\x94| ok");
    check_split(FKV_PRE_LLAMA3, "Hello, world!\n\n  123456 it's", "Hello|,| world|!\n\n| | |123|456| it|'s");
    check_split(FKV_PRE_LLAMA3, "I'M here", "I|'M| here");
    check_split(FKV_PRE_LLAMA3, "!hello", "!hello");
    check_split(FKV_PRE_LLAMA3, "x \n\n y", "x| \n\n| y");
    check_split(FKV_PRE_LLAMA3, "\tfoo", "\tfoo");
    check_split(FKV_PRE_LLAMA3, "12345", "123|45");
    check_split(FKV_PRE_LLAMA3, "a  ", "a|  ");
    /* Unicode categories: letters beyond Latin, U+00BD and U+0663 are
     * numbers, U+2014 punctuation, U+3000 and U+00A0 white space */
    check_split(FKV_PRE_GPT2, "\xd0\xbd\xd0\xb0 4\xc2\xbd \xd9\xa3", "\xd0\xbd\xd0\xb0| 4\xc2\xbd| \xd9\xa3");
    check_split(FKV_PRE_GPT2, "a\xe3\x80\x80\xe3\x80\x80" "b", "a|\xe3\x80\x80|\xe3\x80\x80|b"); /* " ?" is ASCII only */
    check_split(FKV_PRE_GPT2, "x\xc2\xa0\xe2\x80\x94", "x|\xc2\xa0|\xe2\x80\x94");
    check_split(FKV_PRE_LLAMA3, "\xe2\x80\x94\xce\xb1\xce\xb2 \xd9\xa3\xd9\xa3\xd9\xa3\xd9\xa3",
                "\xe2\x80\x94\xce\xb1\xce\xb2| |\xd9\xa3\xd9\xa3\xd9\xa3|\xd9\xa3");
    /* deepseek-coder: expressions in sequence; what none matches stays a piece */
    check_split(FKV_PRE_DEEPSEEK_CODER, "ied 4 \xc2\xbd months", "ied| |4| |\xc2\xbd| months");
    check_split(FKV_PRE_DEEPSEEK_CODER, "a\n\nb", "a|\n|\n|b");
    check_split(FKV_PRE_DEEPSEEK_CODER, "x = f(1234);", "x| =| f|(|1|2|3|4|);");
    /* " \xec\x95\x88" (U+C548) is a match of \s?\p{L}+, then the CJK/Hangul expression cuts the space off again */
    check_split(FKV_PRE_DEEPSEEK_CODER, "\xe4\xbd\xa0\xe5\xa5\xbd \xec\x95\x88 ok",
                "\xe4\xbd\xa0\xe5\xa5\xbd| |\xec\x95\x88| ok");
    check_split(FKV_PRE_DEEPSEEK_CODER, "don't", "don|'|t");
    /* llama.cpp's default: punctuation runs first, then GPT-2's, then digit groups */
    check_split(FKV_PRE_DEFAULT, "don't", "don|'|t");
    check_split(FKV_PRE_DEFAULT, "a+=b 1234567", "a|+=|b| |123|456|7");
    check_split(FKV_PRE_DEFAULT, "Hello, world!", "Hello|,| world|!");
}

/* Llama 3 style: a pre-token that is a token is not merged further, even
 * where the merges would split it differently */
static void test_llama3_ignore_merges(void)
{
    vocab v = {0};
    add(&v, "<|unk|>", 0, FKV_TT_UNKNOWN);
    add(&v, "<|bos|>", 0, FKV_TT_CONTROL);
    add(&v, "<|eot|>", 0, FKV_TT_CONTROL);
    static char chars[256][4];
    for (int b = 0; b < 256; b++) {
        cp_utf8(g_byte_cp[b], chars[b]);
        add(&v, chars[b], 0, FKV_TT_NORMAL);
    }
    add(&v, "ab", 0, FKV_TT_NORMAL);
    add(&v, "abc", 0, FKV_TT_NORMAL);
    const char *merges[] = {"a b"}; /* no merge makes "abc" */
    fkv_gguf_writer *w = fkv_gguf_writer_new(32);
    REQUIRE(!fkv_gguf_w_str(w, "tokenizer.ggml.model", "gpt2"));
    REQUIRE(!fkv_gguf_w_str(w, "tokenizer.ggml.pre", "llama-bpe"));
    REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.n, v.tok, NULL));
    REQUIRE(!fkv_gguf_w_arr(w, "tokenizer.ggml.token_type", FKV_GGUF_I32, v.n, v.type));
    REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.merges", 1, merges, NULL));
    uint8_t *buf;
    size_t len;
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    fkv_gguf *g;
    fkv_tokenizer *t;
    char err[300];
    REQUIRE(!fkv_gguf_parse(buf, len, "l3", &g, err, sizeof err));
    REQUIRE(!fkv_tokenizer_from_gguf(g, &t, err, sizeof err));
    CHECK(t->pre == FKV_PRE_LLAMA3 && t->ignore_merges);
    int32_t ids[16];
    size_t n = enc(t, "abc abcd", 8, 0, ids);
    /* "abc" whole; " abcd" is not a token: Ġ a b c d -> Ġ ab c d */
    CHECK(n == 5 && ids[0] == id_of(&v, "abc") && ids[2] == id_of(&v, "ab"));
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    free(buf);
}

/* tokenizer.ggml.pre: llama.cpp's names, its default when absent, and a
 * clear refusal of one not implemented (never a silent other split) */
static fkv_status load_pre(const char *pre, int *got, char *err, size_t errlen)
{
    const char *tok[] = {"a", "b", "ab"};
    int32_t type[] = {FKV_TT_NORMAL, FKV_TT_NORMAL, FKV_TT_NORMAL};
    const char *merges[] = {"a b"};
    fkv_gguf_writer *w = fkv_gguf_writer_new(8);
    REQUIRE(w && !fkv_gguf_w_str(w, "tokenizer.ggml.model", "gpt2"));
    if (pre) REQUIRE(!fkv_gguf_w_str(w, "tokenizer.ggml.pre", pre));
    REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.tokens", 3, tok, NULL));
    REQUIRE(!fkv_gguf_w_arr(w, "tokenizer.ggml.token_type", FKV_GGUF_I32, 3, type));
    REQUIRE(!fkv_gguf_w_arr_str(w, "tokenizer.ggml.merges", 1, merges, NULL));
    uint8_t *buf;
    size_t len;
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, &len));
    fkv_gguf_writer_free(w);
    fkv_gguf *g;
    REQUIRE(!fkv_gguf_parse(buf, len, "pre.gguf", &g, err, errlen));
    fkv_tokenizer *t = NULL;
    fkv_status st = fkv_tokenizer_from_gguf(g, &t, err, errlen);
    if (!st) *got = t->pre;
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    free(buf);
    return st;
}

static void test_pre_names(void)
{
    static const struct {
        const char *name;
        int pre;
    } ok[] = {{NULL, FKV_PRE_DEFAULT},         {"default", FKV_PRE_DEFAULT}, {"gpt-2", FKV_PRE_GPT2},
              {"llama-bpe", FKV_PRE_LLAMA3},    {"llama3", FKV_PRE_LLAMA3},   {"phi-2", FKV_PRE_GPT2},
              {"deepseek-coder", FKV_PRE_DEEPSEEK_CODER}};
    char err[300];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int got = -1;
        fkv_status st = load_pre(ok[i].name, &got, err, sizeof err);
        CHECKF(st == FKV_OK && got == ok[i].pre, "pre '%s': status %d, pre %d", ok[i].name ? ok[i].name : "(absent)",
               (int)st, got);
    }
    int got = -1;
    CHECK(load_pre("qwen2", &got, err, sizeof err) == FKV_EUNSUPPORTED);
    CHECKF(strstr(err, "tokenizer.ggml.pre") && strstr(err, "'qwen2'") && strstr(err, "not supported"), "error: %s", err);
}

int main(void)
{
    test_pretok();
    test_pre_names();
    test_spm();
    test_bpe();
    test_llama3_ignore_merges();
    test_bytes();
    test_sampler();
    return check_done();
}
