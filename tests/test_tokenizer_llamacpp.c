/* The tokenizers against llama.cpp's own expectations: the vocabularies
 * under vocab/ (Llama 2 and Phi-3 SentencePiece, GPT-2 and DeepSeek-Coder
 * byte-level BPE) and, per vocabulary, the strings of its .inp file with
 * the ids llama.cpp gives them in .out (tokenized without BOS and without
 * parsing special tokens).  Every case must match exactly, and decoding
 * must give the string back.  Also `fairkv model tokenize` on them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "gguf/gguf.h"
#include "model/tokenizer.h"

#define MAX_CASES 128
#define SEP "\n__ggml_vocab_test__\n"

typedef struct cases {
    char *inp, *outp;          /* the two files, cut in place */
    const char *text[MAX_CASES];
    size_t len[MAX_CASES];
    const char *ids[MAX_CASES]; /* a line of space-separated ids */
    size_t n;
} cases;

/* .inp: every string is followed by the separator line; .out: one line per
 * string. */
static void read_cases(const char *inp_path, const char *out_path, cases *c)
{
    memset(c, 0, sizeof *c);
    c->inp = check_slurp(inp_path);
    c->outp = check_slurp(out_path);
    REQUIRE(c->inp && c->outp);
    for (char *p = c->inp, *e; (e = strstr(p, SEP)) != NULL; p = e + strlen(SEP)) {
        REQUIRE(c->n < MAX_CASES);
        *e = 0;
        c->text[c->n] = p;
        c->len[c->n] = (size_t)(e - p);
        c->n++;
    }
    size_t k = 0;
    for (char *p = c->outp, *e; k < c->n && (e = strchr(p, '\n')) != NULL; p = e + 1) {
        *e = 0;
        c->ids[k++] = p;
    }
    CHECKF(k == c->n, "%s: %zu id lines for %zu strings", out_path, k, c->n);
    c->n = k;
}

static size_t parse_ids(const char *s, int32_t *out, size_t cap)
{
    size_t n = 0;
    for (char *e; *s; s = e) {
        long v = strtol(s, &e, 10);
        if (e == s) break;
        REQUIRE(n < cap);
        out[n++] = (int32_t)v;
    }
    return n;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

static void print_text(const char *what, const char *s, size_t n)
{
    fprintf(stderr, "    %s: \"", what);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\t')
            fputs("\\t", stderr);
        else
            fputc(c, stderr);
    }
    fputs("\"\n", stderr);
}

typedef struct result {
    size_t n, enc_ok, dec_ok;
} result;

static result check_vocab(const char *dir, const char *name)
{
    char path[1024], inp[1100], outp[1100];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    char err[512];
    fkv_gguf *g;
    fkv_tokenizer *t;
    REQUIRE(fkv_gguf_load(path, &g, err, sizeof err) == FKV_OK);
    fkv_status st = fkv_tokenizer_from_gguf(g, &t, err, sizeof err);
    if (st) fprintf(stderr, "%s: %s\n", name, err);
    REQUIRE(st == FKV_OK);
    CHECKF(!t->warning[0], "%s: %s", name, t->warning);
    static cases c;
    read_cases(inp, outp, &c);
    CHECKF(c.n >= 40, "%s: only %zu cases", name, c.n);
    result r = {c.n, 0, 0};
    static int32_t want[4096], got[4096];
    static char back[16384];
    for (size_t i = 0; i < c.n; i++) {
        size_t nw = parse_ids(c.ids[i], want, 4096), ng;
        REQUIRE(fkv_tok_encode(t, c.text[i], c.len[i], 0, got, 4096, &ng) == FKV_OK);
        REQUIRE(ng <= 4096);
        int ok = ng == nw && !memcmp(got, want, nw * sizeof *want);
        CHECKF(ok, "%s case %zu: encoding differs from llama.cpp's", name, i);
        if (!ok) {
            print_text("text", c.text[i], c.len[i]);
            print_ids("want", want, nw);
            print_ids("got ", got, ng);
        }
        r.enc_ok += (size_t)ok;
        /* decode llama.cpp's ids: the text must come back */
        size_t bl;
        REQUIRE(fkv_tok_decode(t, want, nw, back, sizeof back, &bl) == FKV_OK);
        int dok = bl == c.len[i] && !memcmp(back, c.text[i], bl);
        CHECKF(dok, "%s case %zu: decode(encode(text)) != text", name, i);
        if (!dok) {
            print_text("text", c.text[i], c.len[i]);
            print_text("back", back, bl < sizeof back ? bl : sizeof back - 1);
        }
        r.dec_ok += (size_t)dok;
    }
    printf("%-16s encode %zu/%zu, round trip %zu/%zu\n", name, r.enc_ok, r.n, r.dec_ok, r.n);
    free(c.inp);
    free(c.outp);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    return r;
}

int main(void)
{
    static const char *const vocabs[] = {"llama-spm", "phi-3", "gpt-2", "deepseek-coder"};
    const char *dir = getenv("FKV_DATA_DIR");
    char path[1024];
    struct stat sb;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.out", dir ? dir : "", vocabs[v]);
        if (!dir || stat(path, &sb) != 0) {
            printf("SKIP: %s is absent (FKV_DATA_DIR=%s)\n", path, dir ? dir : "(unset)");
            return 77;
        }
    }
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) check_vocab(dir, vocabs[v]);
    return check_done();
}
