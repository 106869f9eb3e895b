/* `fairkv model convert --llama2c`: a tiny synthetic checkpoint through the
 * reader, the GGUF and the model loader (every tensor where llama2.c puts
 * it, shared and separate classifiers); every malformed input refused with
 * the file and what is wrong; then the real stories260K checkpoint against
 * the GGUF llama.cpp's own converter wrote from it: the same tensors bit for
 * bit, the same vocabulary, the same greedy tokens, and f16 close to f32.
 * Also --ctx (llama.cpp's -c) of generate and serve, and generate's -n. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "engine_cli.h"
#include "gguf/gguf.h"
#include "model/llama2c.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "server/backend.h"
#include "server/backend_engine_opts.h"

/* ---------------------------------------------------------------- helpers */

/* Runs a CLI entry point with its stderr captured into out[cap]. */
static int run_cli(int (*fn)(int, char **), char **argv, char *out, size_t cap)
{
    int argc = 0;
    while (argv[argc]) argc++;
    char path[] = "/tmp/fkv_test_convert_err_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stdout);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = fn(argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, cap - 1);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    fputs(out, stderr); /* still visible in the test log */
    return rc;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(p, 1, n, f) == n);
    fclose(f);
}

static void put_i32(uint8_t *p, int32_t v)
{
    memcpy(p, &v, 4); /* the test runs on little-endian hosts, as the files are */
}

/* ---------------------------------------------------------------- synthetic */

/* A checkpoint of dim 8, hidden 12, 2 layers, 4 heads (2 kv), vocab 6,
 * seq_len 5; float k of the file is k * 0.001 (so each tensor's place in the
 * file is visible in its values). */
enum { S_DIM = 8, S_HID = 12, S_L = 2, S_H = 4, S_KV = 2, S_V = 6, S_SEQ = 5 };

static size_t synth_floats(int shared)
{
    size_t d = S_DIM, kv = S_DIM / S_H * S_KV;
    return S_V * d + 2 * S_L * d + S_L * (2 * d * d + 2 * kv * d + 3 * (size_t)S_HID * d) + d +
           S_SEQ * (d / S_H) + (shared ? 0 : S_V * d);
}

static uint8_t *synth_ckpt(int shared, size_t *n)
{
    size_t nf = synth_floats(shared);
    *n = 28 + 4 * nf;
    uint8_t *p = malloc(*n);
    REQUIRE(p);
    int32_t h[7] = {S_DIM, S_HID, S_L, S_H, S_KV, shared ? S_V : -S_V, S_SEQ};
    for (int i = 0; i < 7; i++) put_i32(p + 4 * i, h[i]);
    for (size_t k = 0; k < nf; k++) {
        float f = (float)k * 0.001f;
        memcpy(p + 28 + 4 * k, &f, 4);
    }
    return p;
}

/* tokens: <unk> <s> </s> <0x41> "a b" "c" */
static uint8_t *synth_tok(int n_tokens, size_t *n)
{
    static const char *const t[] = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", "a b", "c", "d", "e"};
    uint8_t *p = malloc(512);
    REQUIRE(p);
    put_i32(p, 8);
    size_t o = 4;
    for (int i = 0; i < n_tokens; i++) {
        float score = (float)-i;
        int32_t len = (int32_t)strlen(t[i]);
        memcpy(p + o, &score, 4);
        put_i32(p + o + 4, len);
        memcpy(p + o + 8, t[i], (size_t)len);
        o += 8 + (size_t)len;
    }
    *n = o;
    return p;
}

static float tensor_f(const fkv_gguf_tensor *t, size_t i)
{
    float f;
    memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
    return f;
}

/* The GGUF tensor `name` holds floats [first, first + count) of the file. */
static int holds(const fkv_gguf *g, const char *name, size_t first, size_t count)
{
    const fkv_gguf_tensor *t = fkv_gguf_tensor_find(g, name);
    if (!t || t->n_elements != count || t->type != FKV_GGML_F32) return 0;
    for (size_t i = 0; i < count; i++)
        if (tensor_f(t, i) != (float)(first + i) * 0.001f) return 0;
    return 1;
}

static void test_synthetic(int shared)
{
    size_t cn, tn;
    uint8_t *c = synth_ckpt(shared, &cn), *tk = synth_tok(S_V, &tn);
    char err[512];
    fkv_llama2c ck;
    fkv_llama2c_vocab v;
    REQUIRE(fkv_llama2c_parse(c, cn, "s.bin", &ck, err, sizeof err) == FKV_OK);
    CHECK(ck.cfg.head_size == 2 && ck.cfg.kv_dim == 4 && ck.cfg.shared_classifier == shared);
    REQUIRE(fkv_llama2c_vocab_parse(tk, tn, "t.bin", S_V, &v, err, sizeof err) == FKV_OK);
    fkv_gguf_writer *w;
    REQUIRE(fkv_llama2c_to_gguf(&ck, &v, FKV_GGML_F32, "synth", "s.bin", &w, err, sizeof err) == FKV_OK);
    uint8_t *img;
    size_t len;
    REQUIRE(fkv_gguf_w_to_mem(w, &img, &len) == FKV_OK);
    fkv_gguf_writer_free(w);
    fkv_gguf *g;
    REQUIRE(fkv_gguf_parse(img, len, "synth.gguf", &g, err, sizeof err) == FKV_OK);
    /* llama2.c's order: each tensor starts where the previous ended */
    size_t d = S_DIM, kv = 4, o = 0;
    CHECK(holds(g, "token_embd.weight", o, S_V * d));
    o += S_V * d;
    char name[64];
    for (int l = 0; l < S_L; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        CHECK(holds(g, name, o + l * d, d));
    }
    o += S_L * d;
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    size_t msz[] = {d * d, kv * d, kv * d, d * d};
    for (int m = 0; m < 4; m++) {
        for (int l = 0; l < S_L; l++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[m]);
            CHECKF(holds(g, name, o + l * msz[m], msz[m]), "%s", name);
        }
        o += S_L * msz[m];
    }
    for (int l = 0; l < S_L; l++) {
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        CHECK(holds(g, name, o + l * d, d));
    }
    o += S_L * d;
    static const char *const ffn[] = {"ffn_gate", "ffn_down", "ffn_up"}; /* w1, w2, w3 */
    for (int m = 0; m < 3; m++) {
        for (int l = 0; l < S_L; l++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, ffn[m]);
            CHECKF(holds(g, name, o + l * S_HID * d, S_HID * d), "%s", name);
        }
        o += S_L * S_HID * d;
    }
    CHECK(holds(g, "output_norm.weight", o, d));
    o += d + S_SEQ * (d / S_H); /* freq_cis skipped */
    const fkv_gguf_tensor *down = fkv_gguf_tensor_find(g, "blk.0.ffn_down.weight");
    CHECK(down && down->ne[0] == S_HID && down->ne[1] == S_DIM);
    const fkv_gguf_tensor *k = fkv_gguf_tensor_find(g, "blk.0.attn_k.weight");
    CHECK(k && k->ne[0] == S_DIM && k->ne[1] == 4);
    if (shared) CHECK(!fkv_gguf_tensor_find(g, "output.weight"));
    else CHECK(holds(g, "output.weight", o, S_V * d));
    /* vocabulary: specials renamed, spaces as U+2581, types as llama.cpp's */
    const fkv_gguf_kv *toks = fkv_gguf_find(g, "tokenizer.ggml.tokens"), *ty = fkv_gguf_find(g, "tokenizer.ggml.token_type");
    REQUIRE(toks && ty && toks->n == S_V && ty->n == S_V);
    CHECK(!strcmp(toks->strs[0], "<unk>") && !strcmp(toks->strs[1], "<s>") && !strcmp(toks->strs[2], "</s>"));
    CHECK(!strcmp(toks->strs[4], "a\xe2\x96\x81" "b"));
    int64_t want_ty[S_V] = {2, 3, 3, 6, 1, 1};
    for (int i = 0; i < S_V; i++) CHECKF(fkv_gguf_arr_i64(ty, (uint64_t)i) == want_ty[i], "token %d", i);
    /* it loads and runs */
    fkv_llama *m;
    REQUIRE(fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_OK);
    CHECK(m->tied_output == shared && m->hp.ctx_len == S_SEQ && m->hp.rope_dim == 2 && m->hp.n_kv_heads == S_KV);
    fkv_tokenizer *t;
    CHECK(fkv_tokenizer_from_gguf(g, &t, err, sizeof err) == FKV_OK);
    fkv_tokenizer_free(t);
    fkv_llama_free(m);
    fkv_gguf_free(g);
    free(img);
    fkv_llama2c_vocab_free(&v);
    free(c);
    free(tk);
}

/* Checkpoint and tokenizer bytes that must be refused, with what the message says. */
static void expect_refused(const uint8_t *c, size_t cn, const uint8_t *t, size_t tn, int rc, const char *what,
                           const char *bad_file)
{
    char cp[] = "/tmp/fkv_test_convert_c_XXXXXX", tp[] = "/tmp/fkv_test_convert_t_XXXXXX",
         op[] = "/tmp/fkv_test_convert_o_XXXXXX";
    int a = mkstemp(cp), b = mkstemp(tp), o = mkstemp(op);
    REQUIRE(a >= 0 && b >= 0 && o >= 0);
    close(a), close(b), close(o);
    write_file(cp, c, cn);
    write_file(tp, t, tn);
    char *argv[] = {"model", "convert", "--llama2c", cp, "--tokenizer", tp, "--out", op, NULL};
    char msg[2048];
    int got = run_cli(fkv_cli_model, argv, msg, sizeof msg);
    const char *file = !strcmp(bad_file, "ckpt") ? cp : tp;
    CHECKF(got == rc && strstr(msg, what) && (rc == 0 || strstr(msg, file)), "rc %d, want %d with '%s' naming %s: %s", got, rc, what,
           file, msg);
    unlink(cp), unlink(tp), unlink(op);
}

static void test_malformed(void)
{
    size_t cn, tn;
    uint8_t *c = synth_ckpt(1, &cn), *t = synth_tok(S_V, &tn);
    uint8_t *x = malloc(cn + 64);
    REQUIRE(x);
    expect_refused(c, cn, t, tn, 0, "", "ckpt"); /* the baseline converts */
    expect_refused(c, cn - 4, t, tn, 1, "truncated", "ckpt");
    expect_refused(c, 20, t, tn, 1, "shorter than the 28-byte", "ckpt");
    memcpy(x, c, cn);
    memset(x + cn, 0, 8);
    expect_refused(x, cn + 8, t, tn, 1, "trailing data", "ckpt");
    struct {
        int field;
        int32_t v;
        const char *what;
    } hdr[] = {{0, -8, "dim = -8 is outside"},
               {3, 3, "dim 8 is not a multiple of n_heads 3"},
               {4, 3, "n_heads 4 is not a multiple of n_kv_heads 3"},
               {4, 8, "n_kv_heads = 8 is outside [1, 4]"},
               {3, 8, "head size dim/n_heads = 1 is odd"},
               {2, 0, "n_layers = 0 is outside"},
               {5, INT32_MIN, "vocab_size"},
               {1, 1 << 30, "hidden_dim = 1073741824 is outside"},
               {6, 6, "needs"}, /* seq_len: sizes no longer match the file */
               {2, 1, "needs"}};
    for (size_t i = 0; i < sizeof hdr / sizeof hdr[0]; i++) {
        memcpy(x, c, cn);
        put_i32(x + 4 * hdr[i].field, hdr[i].v);
        expect_refused(x, cn, t, tn, 1, hdr[i].what, "ckpt");
    }
    memcpy(x, "24ka", 4); /* llama2.c's version-1 magic, read little-endian */
    put_i32(x + 4, 1);
    expect_refused(x, cn, t, tn, 1, "version-1 export", "ckpt");
    memcpy(x, c, cn);
    float nan = NAN;
    memcpy(x + 28 + 4 * 70, &nan, 4);
    expect_refused(x, cn, t, tn, 1, "blk.0.attn_q.weight[6] = nan is not finite", "ckpt");
    /* the tokenizer against the checkpoint's vocab_size 6 */
    size_t n5, n8;
    uint8_t *t5 = synth_tok(5, &n5), *t8 = synth_tok(8, &n8);
    expect_refused(c, cn, t5, n5, 1, "holds 5 tokens, the checkpoint's vocab_size is 6", "tok");
    expect_refused(c, cn, t8, n8, 1, "holds 8 tokens, the checkpoint's vocab_size is 6", "tok");
    expect_refused(c, cn, t, tn - 1, 1, "truncated at byte", "tok");
    expect_refused(c, cn, t, 2, 1, "too short", "tok");
    memcpy(x, t, tn);
    put_i32(x + 4 + 4, -1); /* token 0's length */
    expect_refused(c, cn, x, tn, 1, "token 0 at byte 8 has length -1", "tok");
    memcpy(x, t, tn);
    memset(x + tn, 0xff, 3);
    expect_refused(c, cn, x, tn + 3, 1, "after its 6 tokens that are not tokens", "tok");
    memcpy(x, t, tn);
    put_i32(x, 0);
    expect_refused(c, cn, x, tn, 1, "max_token_length 0", "tok");
    /* command line */
    char msg[1024];
    char *a1[] = {"model", "convert", "--llama2c", "/nonexistent/x.bin", "--tokenizer", "t", "--out", "o", NULL};
    CHECK(run_cli(fkv_cli_model, a1, msg, sizeof msg) == 1 && strstr(msg, "/nonexistent/x.bin: cannot open"));
    char *a2[] = {"model", "convert", "--llama2c", "c", "--tokenizer", "t", "--out", "o", "--type", "q8", NULL};
    CHECK(run_cli(fkv_cli_model, a2, msg, sizeof msg) == 2 && strstr(msg, "'q8'"));
    char *a3[] = {"model", "convert", "--llama2c", "c", NULL};
    CHECK(run_cli(fkv_cli_model, a3, msg, sizeof msg) == 2 && strstr(msg, "required"));
    free(t5), free(t8), free(x), free(c), free(t);
}

/* ---------------------------------------------------------------- --ctx */

static void test_ctx_synthetic(void)
{
    size_t cn, tn;
    uint8_t *c = synth_ckpt(1, &cn), *tk = synth_tok(S_V, &tn);
    char cp[] = "/tmp/fkv_test_convert_c_XXXXXX", tp[] = "/tmp/fkv_test_convert_t_XXXXXX",
         op[] = "/tmp/fkv_test_convert_o_XXXXXX";
    int a = mkstemp(cp), b = mkstemp(tp), o = mkstemp(op);
    REQUIRE(a >= 0 && b >= 0 && o >= 0);
    close(a), close(b), close(o);
    write_file(cp, c, cn);
    write_file(tp, tk, tn);
    char err[512];
    REQUIRE(fkv_llama2c_convert(cp, tp, op, FKV_GGML_F32, NULL, err, sizeof err) == FKV_OK);
    fkv_llama *m;
    REQUIRE(fkv_llama_load(op, &m, err, sizeof err) == FKV_OK);
    CHECK(m->hp.ctx_len == S_SEQ && m->hp.ctx_train == S_SEQ);
    fkv_fwd_geom geom = fkv_llama_geom(m);
    fkv_kvref_seq kv;
    fkv_fwd *f;
    REQUIRE(fkv_kvref_seq_init(&kv, &geom, 16) == FKV_OK && fkv_fwd_create(m, NULL, &f) == FKV_OK);
    int32_t toks[16] = {1, 3, 4, 5, 4, 3, 5, 4, 3, 4, 5, 3, 4, 5, 3, 4};
    float logits[S_V];
    fkv_fwd_seq s = {&kv, toks, 8, 0, NULL, logits, 0};
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_EINVAL); /* 8 > seq_len 5 */
    CHECK(fkv_llama_set_ctx(m, 16) == 1); /* beyond the trained 5 */
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
    s.tokens = toks + 8, s.start_pos = 8;
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK); /* positions up to 16 */
    s.n_tokens = 1, s.start_pos = 16;
    CHECK(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_EINVAL);
    CHECK(fkv_llama_set_ctx(m, 4) == 0 && m->hp.ctx_len == 4);
    CHECK(fkv_llama_set_ctx(m, 0) == -1 && fkv_llama_set_ctx(m, (1u << 24) + 1) == -1 && m->hp.ctx_len == 4);
    fkv_fwd_destroy(f);
    fkv_kvref_seq_free(&kv);
    fkv_llama_free(m);
    /* generate: --ctx lets 5 + 6 tokens through and warns; -n is --max-tokens */
    char msg[2048];
    char *g1[] = {"generate", "--model", op, "--prompt", "c", "-n", "6", NULL};
    CHECK(run_cli(fkv_cli_generate, g1, msg, sizeof msg) == 1 && strstr(msg, "context length 5") &&
          strstr(msg, "--max-tokens 6"));
    char *g2[] = {"generate", "--model", op, "--prompt", "c", "-n", "6", "--ctx", "12", NULL};
    CHECK(run_cli(fkv_cli_generate, g2, msg, sizeof msg) == 0 &&
          strstr(msg, "warning: --ctx 12 exceeds the model's trained context length 5"));
    CHECK(strstr(msg, "generated 6 tokens")); /* 3 + 6 positions, past the trained 5 */
    char *g3[] = {"generate", "--model", op, "--prompt", "c", "-n", "1", "--ctx", "4", NULL};
    CHECK(run_cli(fkv_cli_generate, g3, msg, sizeof msg) == 0 && !strstr(msg, "warning: --ctx"));
    char *g4[] = {"generate", "--model", op, "--prompt", "c", "-n", "4", "--ctx", "4", NULL};
    CHECK(run_cli(fkv_cli_generate, g4, msg, sizeof msg) == 1 && strstr(msg, "context length 4 (--ctx)"));
    char *g5[] = {"generate", "--model", op, "--prompt", "c", "--ctx", "-3", NULL};
    CHECK(run_cli(fkv_cli_generate, g5, msg, sizeof msg) == 2 && strstr(msg, "--ctx"));
    char *g5b[] = {"generate", "--model", op, "--prompt", "c", "--ctx", "0", NULL};
    CHECK(run_cli(fkv_cli_generate, g5b, msg, sizeof msg) == 2 && strstr(msg, "--ctx must be in [1, "));
    char *g6[] = {"generate", "--model", op, "--prompt", "c", "--engine", "-n", "3", "--ctx", "40", NULL};
    CHECK(run_cli(fkv_cli_generate, g6, msg, sizeof msg) == 0 && strstr(msg, "--ctx 40 exceeds"));
    /* serve: the engine backend's ctx option */
    fkv_engine_config cfg;
    fkv_engine_backend_opts bo;
    char model[256];
    const char *o1[] = {"ctx=1000", NULL}, *o2[] = {"ctx=0", NULL}, *o3[] = {"ctx=abc", NULL};
    CHECK(fkv__engine_opts_parse(o1, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK && bo.ctx == 1000);
    CHECK(fkv__engine_opts_parse(o2, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "ctx=0"));
    CHECK(fkv__engine_opts_parse(o3, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL);
    /* no option: the recommended configuration (the simulator's fairkv) */
    CHECK(fkv__engine_opts_parse(NULL, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK);
    CHECK(cfg.quotas == FKV_QUOTA_TENANT && cfg.share_guarantee == 1 && cfg.step_share == FKV_STEP_DRR &&
          cfg.step_bound == 2 && cfg.admit_reclaim == 0 && cfg.victim == FKV_VICTIM_FAIR && cfg.n_reclaim == 3 &&
          cfg.quant_mode == FKV_QUANT_UNDER_PRESSURE && cfg.quant_dtype == FKV_INT4 && cfg.quant_hot_tokens == 64 &&
          cfg.host_policy == FKV_HOST_LRU &&
          cfg.reclaim[0] == FKV_RECLAIM_QUANTIZE8 && cfg.reclaim[1] == FKV_RECLAIM_QUANTIZE4 &&
          cfg.reclaim[2] == FKV_RECLAIM_EVICT);
    /* the step share */
    const char *o5[] = {"step_share=drr", NULL}, *o6[] = {"step_share=fair", NULL};
    CHECK(fkv__engine_opts_parse(o5, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_share == FKV_STEP_DRR);
    CHECK(fkv__engine_opts_parse(o6, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "step_share=fair"));
    /* within-share tenants first and the step-time bound */
    const char *o7[] = {"admit_reclaim=on", "step_bound=2.5", NULL}, *o8[] = {"step_bound=-1", NULL},
               *o9[] = {"step_bound=2x", NULL}, *o10[] = {"admit_reclaim=yes", NULL};
    CHECK(fkv__engine_opts_parse(o7, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.admit_reclaim == 1 && cfg.step_bound == 2.5);
    CHECK(fkv__engine_opts_parse(o8, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "step_bound=-1"));
    CHECK(fkv__engine_opts_parse(o9, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "step_bound=2x"));
    CHECK(fkv__engine_opts_parse(o10, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "admit_reclaim=yes"));
    /* how the bound predicts a step: the model's FLOPs by default */
    CHECK(fkv__engine_opts_parse(NULL, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_cost == FKV_STEP_COST_FLOPS);
    const char *c0[] = {"step_cost=auto", NULL};
    CHECK(fkv__engine_opts_parse(c0, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_cost == FKV_STEP_COST_AUTO);
    const char *c1[] = {"step_cost=tokens", NULL}, *c2[] = {"step_cost=0.5,0.01,0.0001", NULL},
               *c3[] = {"step_cost=0.5,0.01,0.0001,0.2", NULL};
    CHECK(fkv__engine_opts_parse(c1, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_cost == FKV_STEP_COST_TOKENS);
    CHECK(fkv__engine_opts_parse(c2, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_cost == FKV_STEP_COST_COEFFS && cfg.step_coeffs[0] == 0.5 && cfg.step_coeffs[1] == 0.01 &&
          cfg.step_coeffs[2] == 0.0001 && cfg.step_coeffs[3] == 0);
    CHECK(fkv__engine_opts_parse(c3, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_OK &&
          cfg.step_coeffs[3] == 0.2);
    const char *bad_costs[] = {"step_cost=0.5,0.01", "step_cost=0.5,-0.01,1", "step_cost=1,0,0",
                               "step_cost=1,2,3,4,5", "step_cost=1,2,x", "step_cost=nan,1,1", "step_cost=flop",
                               "step_cost=1,,2", "step_cost="};
    for (size_t i = 0; i < sizeof bad_costs / sizeof *bad_costs; i++) {
        const char *cb[] = {bad_costs[i], NULL};
        CHECKF(fkv__engine_opts_parse(cb, &cfg, model, sizeof model, &bo, err, sizeof err) == FKV_EINVAL &&
                   strstr(err, bad_costs[i]),
               "'%s' accepted or not named: %s", bad_costs[i], err);
    }
    char mopt[300], copt[32] = "ctx=64";
    snprintf(mopt, sizeof mopt, "model=%s", op);
    const char *o4[] = {mopt, copt, NULL};
    fkv_backend be;
    fflush(stderr);
    char path[] = "/tmp/fkv_test_convert_err_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    REQUIRE(fd >= 0);
    dup2(fd, 2);
    fkv_status st = fkv_backend_engine_create(o4, &be, err, sizeof err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = 0;
    close(fd), unlink(path);
    CHECKF(st == FKV_OK, "%s", err);
    if (st == FKV_OK) {
        fkv_backend_info info;
        be.ops->info(be.impl, &info);
        CHECK(info.max_context == 64); /* what the server checks prompt + max_tokens against */
        CHECK(strstr(msg, "warning: --ctx 64 exceeds the model's trained context length 5"));
        fkv_backend_destroy(&be);
    }
    unlink(cp), unlink(tp), unlink(op);
    free(c), free(tk);
}

/* ---------------------------------------------------------------- stories260K */

static void greedy(const fkv_llama *m, const int32_t *prompt, uint32_t n_prompt, uint32_t n_gen, int32_t *out)
{
    fkv_fwd_geom geom = fkv_llama_geom(m);
    fkv_kvref_seq kv;
    fkv_fwd *f;
    char err[256];
    REQUIRE(fkv_kvref_seq_init(&kv, &geom, n_prompt + n_gen) == FKV_OK && fkv_fwd_create(m, NULL, &f) == FKV_OK);
    int32_t *ids = malloc((n_prompt + n_gen) * sizeof *ids);
    float *logits = malloc(m->hp.n_vocab * sizeof *logits);
    REQUIRE(ids && logits);
    memcpy(ids, prompt, n_prompt * sizeof *ids);
    fkv_fwd_seq s = {&kv, ids, n_prompt, 0, NULL, logits, 0};
    REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
    for (uint32_t i = 0; i < n_gen; i++) {
        int32_t best = 0;
        for (uint32_t k = 1; k < m->hp.n_vocab; k++)
            if (logits[k] > logits[best]) best = (int32_t)k;
        out[i] = ids[n_prompt + i] = best;
        if (i + 1 == n_gen) break;
        fkv_fwd_seq d = {&kv, ids + n_prompt + i, 1, n_prompt + i, NULL, logits, 0};
        REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &d, 1, err, sizeof err) == FKV_OK);
    }
    free(ids), free(logits);
    fkv_fwd_destroy(f);
    fkv_kvref_seq_free(&kv);
}

/* Logits of every position of ids[n] (teacher forcing), malloc'd [n][n_vocab]. */
static float *all_logits(const fkv_llama *m, const int32_t *ids, uint32_t n)
{
    fkv_fwd_geom geom = fkv_llama_geom(m);
    fkv_kvref_seq kv;
    fkv_fwd *f;
    char err[256];
    REQUIRE(fkv_kvref_seq_init(&kv, &geom, n) == FKV_OK && fkv_fwd_create(m, NULL, &f) == FKV_OK);
    float *lg = malloc((size_t)n * m->hp.n_vocab * sizeof *lg);
    REQUIRE(lg);
    fkv_fwd_seq s = {&kv, ids, n, 0, NULL, lg, 1};
    REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
    fkv_fwd_destroy(f);
    fkv_kvref_seq_free(&kv);
    return lg;
}

static void check_u64(const fkv_gguf *g, const char *key, uint64_t want)
{
    uint64_t v = 0;
    CHECKF(fkv_gguf_get_u64(g, key, &v, NULL, 0) == FKV_OK && v == want, "%s = %llu, want %llu", key,
           (unsigned long long)v, (unsigned long long)want);
}

static void test_stories(const char *ckpt, const char *tokp, const char *ref_path)
{
    char out[] = "/tmp/fkv_test_convert_s32_XXXXXX", out16[] = "/tmp/fkv_test_convert_s16_XXXXXX";
    int a = mkstemp(out), b = mkstemp(out16);
    REQUIRE(a >= 0 && b >= 0);
    close(a), close(b);
    char msg[2048];
    char *argv[] = {"model", "convert", "--llama2c", (char *)ckpt, "--tokenizer", (char *)tokp, "--out", out, NULL};
    REQUIRE(run_cli(fkv_cli_model, argv, msg, sizeof msg) == 0);
    char *argv16[] = {"model", "convert", "--llama2c", (char *)ckpt, "--tokenizer", (char *)tokp, "--out", out16,
                      "--type", "f16", NULL};
    REQUIRE(run_cli(fkv_cli_model, argv16, msg, sizeof msg) == 0);
    char err[512];
    fkv_gguf *g, *ref;
    REQUIRE(fkv_gguf_load(out, &g, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_gguf_load(ref_path, &ref, err, sizeof err) == FKV_OK);
    /* every tensor bit for bit; llama.cpp's file adds output.weight, a copy of the embedding */
    CHECK(g->n_tensors == 47 && ref->n_tensors == 48);
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const fkv_gguf_tensor *r = &ref->tensors[i], *t = fkv_gguf_tensor_find(g, r->name);
        if (!strcmp(r->name, "output.weight")) {
            const fkv_gguf_tensor *e = fkv_gguf_tensor_find(g, "token_embd.weight");
            CHECK(!t && e && e->n_bytes == r->n_bytes && !memcmp(e->data, r->data, r->n_bytes));
            continue;
        }
        CHECKF(t && t->type == FKV_GGML_F32 && r->type == FKV_GGML_F32 && t->n_dims == r->n_dims &&
                   !memcmp(t->ne, r->ne, sizeof t->ne) && t->n_bytes == r->n_bytes &&
                   !memcmp(t->data, r->data, r->n_bytes),
               "tensor %s differs from llama.cpp's", r->name);
    }
    /* metadata: llama.cpp's keys and values (context_length: ours is the checkpoint's seq_len) */
    const char *str_keys[][2] = {{"general.architecture", "llama"}, {"tokenizer.ggml.model", "llama"}};
    for (int i = 0; i < 2; i++) {
        const char *s = NULL;
        CHECKF(fkv_gguf_get_str(g, str_keys[i][0], &s, NULL, 0) == FKV_OK && !strcmp(s, str_keys[i][1]), "%s",
               str_keys[i][0]);
    }
    check_u64(g, "llama.context_length", 512);
    check_u64(ref, "llama.context_length", 128);
    static const char *const same[] = {"llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
                                       "llama.attention.head_count", "llama.attention.head_count_kv",
                                       "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
                                       "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        uint64_t want = 0;
        REQUIRE(fkv_gguf_get_u64(ref, same[i], &want, NULL, 0) == FKV_OK);
        check_u64(g, same[i], want);
    }
    double eps = 0;
    CHECK(fkv_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &eps, NULL, 0) == FKV_OK &&
          (float)eps == 1e-5f);
    /* the vocabulary entry by entry */
    const fkv_gguf_kv *tk = fkv_gguf_find(g, "tokenizer.ggml.tokens"), *rtk = fkv_gguf_find(ref, "tokenizer.ggml.tokens");
    const fkv_gguf_kv *sc = fkv_gguf_find(g, "tokenizer.ggml.scores"), *rsc = fkv_gguf_find(ref, "tokenizer.ggml.scores");
    const fkv_gguf_kv *ty = fkv_gguf_find(g, "tokenizer.ggml.token_type"),
                      *rty = fkv_gguf_find(ref, "tokenizer.ggml.token_type");
    REQUIRE(tk && rtk && sc && rsc && ty && rty && tk->n == 512 && rtk->n == 512 && sc->n == 512 && ty->n == 512);
    int vocab_diff = 0;
    for (uint64_t i = 0; i < 512; i++)
        vocab_diff += tk->str_lens[i] != rtk->str_lens[i] || memcmp(tk->strs[i], rtk->strs[i], tk->str_lens[i]) ||
                      fkv_gguf_arr_f64(sc, i) != fkv_gguf_arr_f64(rsc, i) ||
                      fkv_gguf_arr_i64(ty, i) != fkv_gguf_arr_i64(rty, i);
    CHECKF(vocab_diff == 0, "%d vocabulary entries differ from llama.cpp's", vocab_diff);
    fkv_gguf_free(g);
    fkv_gguf_free(ref);
    /* both load and greedy-decode the same 64 tokens, from BOS and from a prompt */
    fkv_llama *m, *mr, *m16;
    REQUIRE(fkv_llama_load(out, &m, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_llama_load(ref_path, &mr, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_llama_load(out16, &m16, err, sizeof err) == FKV_OK);
    CHECK(m->tied_output && !mr->tied_output && m->hp.ctx_len == 512);
    CHECK(m16->layers[0].wq.type == FKV_GGML_F16 && m16->tok_embd.type == FKV_GGML_F16);
    fkv_tokenizer *tok;
    REQUIRE(fkv_tokenizer_from_gguf(m->gguf, &tok, err, sizeof err) == FKV_OK);
    int32_t prompt[64];
    size_t np = 0;
    static const char text[] = "Once upon a time";
    REQUIRE(fkv_tok_encode(tok, text, strlen(text), 1, prompt, 64, &np) == FKV_OK && np > 1 && prompt[0] == 1);
    int32_t bos = 1, a64[64], r64[64], p64[64], q64[64];
    greedy(m, &bos, 1, 64, a64);
    greedy(mr, &bos, 1, 64, r64);
    greedy(m, prompt, (uint32_t)np, 64, p64);
    greedy(mr, prompt, (uint32_t)np, 64, q64);
    CHECK(!memcmp(a64, r64, sizeof a64));
    CHECK(!memcmp(p64, q64, sizeof p64));
    char story[4096];
    size_t sl = 0;
    CHECK(fkv_tok_decode(tok, p64, 64, story, sizeof story, &sl) == FKV_OK);
    story[sl < sizeof story ? sl : sizeof story - 1] = 0;
    printf("greedy after \"%s\": %s\n", text, story);
    CHECKF(strstr(story, "Lily"), "not the TinyStories continuation: %s", story); /* a working model, not noise */
    /* f16 weights: logits over the same 65 positions stay close */
    int32_t seq[65];
    seq[0] = 1;
    memcpy(seq + 1, a64, sizeof a64);
    float *l32 = all_logits(m, seq, 65), *l16 = all_logits(m16, seq, 65);
    double num = 0, den = 0;
    int argmax_same = 0;
    for (uint32_t p = 0; p < 65; p++) {
        const float *x = l32 + (size_t)p * 512, *y = l16 + (size_t)p * 512;
        int bx = 0, by = 0;
        for (int k = 0; k < 512; k++) {
            num += (double)(x[k] - y[k]) * (x[k] - y[k]);
            den += (double)x[k] * x[k];
            if (x[k] > x[bx]) bx = k;
            if (y[k] > y[by]) by = k;
        }
        argmax_same += bx == by;
    }
    double nmse = num / den;
    printf("f16 vs f32 logits: NMSE %.3g over 65 positions, argmax equal at %d\n", nmse, argmax_same);
    /* f16 keeps 11 significant bits (relative error <= 2^-12 per weight): the
     * logits' NMSE is ~6e-8 here; the bound 1e-5 leaves room for other
     * rounding, while a mis-converted or misplaced tensor gives ~1 */
    CHECK(nmse < 1e-5);
    CHECK(argmax_same >= 62);
    free(l32), free(l16);
    fkv_tokenizer_free(tok);
    fkv_llama_free(m), fkv_llama_free(mr), fkv_llama_free(m16);
    unlink(out), unlink(out16);
}

int main(void)
{
    test_synthetic(1);
    test_synthetic(0);
    test_malformed();
    test_ctx_synthetic();
    const char *dir = getenv("FKV_DATA_DIR");
    if (!dir) dir = "../shared/data";
    char ckpt[1024], tokp[1024], ref[1024];
    snprintf(ckpt, sizeof ckpt, "%s/models/stories260K.bin", dir);
    snprintf(tokp, sizeof tokp, "%s/models/tok512.bin", dir);
    snprintf(ref, sizeof ref, "%s/models/stories260K-llamacpp.gguf", dir);
    const char *paths[] = {ckpt, tokp, ref};
    for (int i = 0; i < 3; i++) {
        if (access(paths[i], R_OK)) {
            check_done();
            printf("SKIP: the stories260K part needs %s\n", paths[i]);
            return 77;
        }
    }
    test_stories(ckpt, tokp, ref);
    return check_done();
}
