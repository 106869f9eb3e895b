/* The tokenizers against llama.cpp's own expectations: the vocabularies
 * under vocab/ (Llama 2 and Phi-3 SentencePiece, GPT-2 and DeepSeek-Coder
 * byte-level BPE) and, per vocabulary, the strings of its .inp file with
 * the ids llama.cpp gives them in .out (tokenized without BOS and without
 * parsing special tokens).  Every case must match exactly, and decoding
 * must give the string back (no case is exempt: SentencePiece's space
 * prefix is taken off again by decode, and all four vocabularies can
 * spell any byte).  Also `fairkv model tokenize` on them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
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
        /* decode(encode(text)): the text must come back */
        size_t bl;
        REQUIRE(fkv_tok_decode(t, got, ng, back, sizeof back, &bl) == FKV_OK);
        int dok = bl == c.len[i] && !memcmp(back, c.text[i], bl);
        CHECKF(dok, "%s case %zu: decode(encode(text)) != text", name, i);
        if (!dok) {
            print_text("text", c.text[i], c.len[i]);
            print_text("back", back, bl < sizeof back ? bl : sizeof back - 1);
        }
        r.dec_ok += (size_t)dok;
        /* with BOS: the same ids behind it, and BOS decodes to nothing */
        static int32_t with_bos[4097];
        size_t nb;
        REQUIRE(fkv_tok_encode(t, c.text[i], c.len[i], 1, with_bos, 4097, &nb) == FKV_OK);
        CHECKF(t->bos >= 0 && nb == ng + 1 && with_bos[0] == t->bos && !memcmp(with_bos + 1, got, ng * sizeof *got),
               "%s case %zu: BOS encoding is not BOS + the plain one", name, i);
        REQUIRE(fkv_tok_decode(t, with_bos, nb, back, sizeof back, &bl) == FKV_OK);
        CHECKF(bl == c.len[i] && !memcmp(back, c.text[i], bl), "%s case %zu: BOS + ids do not decode to the text", name,
               i);
    }
    printf("%-16s encode %zu/%zu, round trip %zu/%zu (%zu user-defined tokens)\n", name, r.enc_ok, r.n, r.dec_ok, r.n,
           t->n_user);
    free(c.inp);
    free(c.outp);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    return r;
}

static fkv_tokenizer *load_vocab(const char *dir, const char *name, fkv_gguf **g)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    fkv_tokenizer *t;
    REQUIRE(fkv_gguf_load(path, g, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_tokenizer_from_gguf(*g, &t, err, sizeof err) == FKV_OK);
    return t;
}

static size_t enc(const fkv_tokenizer *t, const char *s, int32_t *out)
{
    size_t n;
    REQUIRE(fkv_tok_encode(t, s, strlen(s), 0, out, 64, &n) == FKV_OK && n <= 64);
    return n;
}

/* User-defined tokens are cut out of the text first, control ones are not
 * (parse_special off); SentencePiece puts its space prefix after one, and
 * llama.cpp strips white space after Phi-3's. */
static void check_user_defined(const char *dir)
{
    fkv_gguf *g;
    fkv_tokenizer *t = load_vocab(dir, "phi-3", &g);
    int32_t a[64], b[64], ab[64];
    size_t na = enc(t, "a", a), nb = enc(t, "b", b), n = enc(t, "a</s>  b", ab);
    CHECKF(t->type[2] == FKV_TT_USER_DEFINED && t->user_rstrip, "phi-3: '</s>' is user-defined and right-stripped");
    CHECKF(n == na + 1 + nb && !memcmp(ab, a, na * sizeof *a) && ab[na] == 2 && !memcmp(ab + na + 1, b, nb * sizeof *b),
           "phi-3: 'a</s>  b' is not enc(a) </s> enc(b)");
    n = enc(t, "x<|user|>", ab); /* a control token: plain text */
    CHECK(n > 2);
    for (size_t i = 0; i < n; i++) CHECK(t->type[ab[i]] != FKV_TT_CONTROL);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    t = load_vocab(dir, "llama-spm", &g); /* here '</s>' is a control token */
    n = enc(t, "</s>", ab);
    CHECK(n > 1 && ab[0] != 2);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    /* DeepSeek-Coder's added Latin-1 letters: inside a word too, no space prefix */
    t = load_vocab(dir, "deepseek-coder", &g);
    n = enc(t, "\xc3\xbc", ab);
    CHECK(n == 1 && ab[0] == 32009 && t->type[32009] == FKV_TT_USER_DEFINED && !t->user_rstrip);
    char back[16];
    size_t bl;
    REQUIRE(fkv_tok_decode(t, ab, n, back, sizeof back, &bl) == FKV_OK);
    CHECK(bl == 2 && !memcmp(back, "\xc3\xbc", 2));
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
}

/* The SentencePiece path on a whole model as llama.cpp's converter wrote
 * it (stories260K): BOS, merges by score, and the text back. */
static void check_stories(const char *dir)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/models/stories260K-llamacpp.gguf", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        printf("stories260K-llamacpp.gguf absent: its check is skipped\n");
        return;
    }
    fkv_gguf *g;
    fkv_tokenizer *t;
    REQUIRE(fkv_gguf_load(path, &g, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_tokenizer_from_gguf(g, &t, err, sizeof err) == FKV_OK);
    const char *text = "Once upon a time, there was a little girl named Lily.";
    int32_t ids[128];
    size_t n;
    REQUIRE(fkv_tok_encode(t, text, strlen(text), t->add_bos, ids, 128, &n) == FKV_OK && n <= 128);
    CHECKF(t->kind == FKV_TOK_SPM && t->add_bos && ids[0] == 1, "stories260K: BOS first");
    CHECKF(n > 4 && n < 30, "stories260K: %zu tokens (merges not applied?)", n);
    char back[256];
    size_t bl;
    REQUIRE(fkv_tok_decode(t, ids, n, back, sizeof back, &bl) == FKV_OK);
    CHECKF(bl == strlen(text) && !memcmp(back, text, bl), "stories260K: decodes to '%s'", back);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
}

/* ---------------------------------------------------------------- fairkv model tokenize */

/* Runs `fairkv model tokenize ARGS...` with stdout to a file; returns what it printed. */
static char *tokenize_cli(int *rc, int argc, const char **args)
{
    char *argv[16];
    REQUIRE(argc < 15);
    argv[0] = (char *)"model";
    argv[1] = (char *)"tokenize";
    for (int i = 0; i < argc; i++) argv[i + 2] = (char *)args[i];
    argv[argc + 2] = NULL;
    return capture_stdout(fkv_cli_model, argc + 2, argv, rc);
}

static void check_cli(const char *dir)
{
    REQUIRE(fkv_cli_model);
    char gpt2[1024], spm[1024], dsc[1024];
    snprintf(gpt2, sizeof gpt2, "%s/vocab/ggml-vocab-gpt-2.gguf", dir);
    snprintf(spm, sizeof spm, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    snprintf(dsc, sizeof dsc, "%s/vocab/ggml-vocab-deepseek-coder.gguf", dir);
    int rc;
    /* --ids: the list llama.cpp's .out has for "Hello world" */
    char *out = tokenize_cli(&rc, 5, (const char *[]){"--model", gpt2, "--text", "Hello world", "--ids"});
    CHECKF(rc == 0 && !strcmp(out, "[15496, 995]\n"), "gpt-2 --ids: rc %d, '%s'", rc, out);
    free(out);
    /* Llama 2 adds BOS (1) unless --no-bos */
    out = tokenize_cli(&rc, 5, (const char *[]){"--model", spm, "--text", "Hello world", "--ids"});
    CHECKF(rc == 0 && !strcmp(out, "[1, 15043, 3186]\n"), "llama-spm --ids: rc %d, '%s'", rc, out);
    free(out);
    out = tokenize_cli(&rc, 6, (const char *[]){"--model", spm, "--text", "Hello world", "--ids", "--no-bos"});
    CHECKF(rc == 0 && !strcmp(out, "[15043, 3186]\n"), "llama-spm --no-bos: rc %d, '%s'", rc, out);
    free(out);
    /* one line per token: BOS by name, SentencePiece spaces as spaces */
    out = tokenize_cli(&rc, 4, (const char *[]){"--model", spm, "--text", "Hello world"});
    CHECKF(rc == 0 && !strcmp(out, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n"),
           "llama-spm pieces: rc %d, '%s'", rc, out);
    free(out);
    /* a newline escaped, a user-defined token as its text */
    out = tokenize_cli(&rc, 4, (const char *[]){"--model", dsc, "--text", "F\xc3\xbchrer\n"});
    CHECKF(rc == 0 && strstr(out, " 32009 -> '\xc3\xbc'\n") && strstr(out, "   185 -> '\\n'\n"),
           "deepseek-coder pieces: rc %d, '%s'", rc, out);
    free(out);
    /* a lone byte of a character is shown as \xHH */
    out = tokenize_cli(&rc, 5, (const char *[]){"--model", spm, "--text", "\xf0\x9f\x9a\x80", "--no-bos"});
    CHECKF(rc == 0 && strstr(out, "   243 -> '\\xF0'\n"), "byte pieces: rc %d, '%s'", rc, out);
    free(out);
    /* errors: usage 2, an unreadable model 1, output nothing */
    out = tokenize_cli(&rc, 2, (const char *[]){"--model", spm});
    CHECKF(rc == 2 && !out[0], "no --text: rc %d", rc);
    free(out);
    out = tokenize_cli(&rc, 4, (const char *[]){"--model", "/nonexistent.gguf", "--text", "x"});
    CHECKF(rc == 1 && !out[0], "missing model: rc %d", rc);
    free(out);
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
    check_user_defined(dir);
    check_stories(dir);
    check_cli(dir);
    return check_done();
}
