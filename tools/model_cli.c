/* `fairkv model init|info|convert|tokenize`: write a random-weight GGUF;
 * describe a GGUF; convert a llama2.c checkpoint and tokenizer to a GGUF;
 * show how a vocabulary tokenizes a text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cli.h"
#include "gguf/gguf.h"
#include "model/llama2c.h"
#include "model/model.h"
#include "model/model_init.h"
#include "model/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv model init --preset tiny|small|prefill --out FILE [--seed N] [--f16]\n"
               "                        [--wtype f32|f16|q8_0|q4_0] [--untied]\n"
               "       fairkv model info FILE\n"
               "       fairkv model convert --llama2c CKPT --tokenizer TOK --out FILE [--type f32|f16|q8_0|q4_0]\n"
               "       fairkv model tokenize --model FILE --text STR [--ids] [--no-bos]\n"
               "       fairkv model eval --model FILE [--kv SPEC]... (fairkv model eval --help)\n"
               "  init  writes a Llama-architecture GGUF with deterministic random weights and the\n"
               "        byte-level vocabulary (259 tokens: <unk> <s> </s> <0x00>..<0xFF>)\n"
               "        tiny: dim 128, 4 layers, 4 heads (2 KV heads), hidden 512, ~1.0M parameters\n"
               "        small: llama2.c stories15M shape (dim 288, 6 layers, 6 heads, hidden 768);\n"
               "               6.05M parameters with the 259-token vocabulary (15.2M with 32000)\n"
               "        prefill: dim 384, 6 layers, 6 heads (2 KV heads), hidden 1024, context 4096,\n"
               "               9.54M parameters: a 2,000-token prefill costs about a second on two cores\n"
               "        --wtype stores the matrices as f32 (default), f16 (= --f16), or llama.cpp's\n"
               "        q8_0 / q4_0 blocks (matrices whose rows are not whole 32-element blocks: f16)\n"
               "  info  prints the metadata and tensors, and the model's shape when it is a llama\n"
               "  convert  writes a llama GGUF (llama.cpp's names and keys) from a llama2.c checkpoint\n"
               "        (legacy version-0 .bin, e.g. the tinyllamas) and its tokenizer.bin; --type\n"
               "        stores the matrices as f16, q8_0 or q4_0 (default f32; block types keep f16 for\n"
               "        rows that are not whole 32-element blocks); llama.context_length is the\n"
               "        checkpoint's seq_len\n"
               "  tokenize  prints one line per token, \"ID -> 'PIECE'\" (the bytes it stands for, with\n"
               "        \\n \\t \\r \\\\ \\' and bytes that are not printable UTF-8 as \\xHH; control tokens as\n"
               "        their own text), or with --ids the ids alone as [1, 2, 3]; BOS first when the\n"
               "        vocabulary adds it, unless --no-bos; special-token text in STR is plain text\n");
}

/* "f32", "f16", "q8_0", "q4_0" -> the ggml type; -1 otherwise */
static int fkv_parse_wtype(const char *s, uint32_t *t)
{
    if (!strcmp(s, "f32")) *t = FKV_GGML_F32;
    else if (!strcmp(s, "f16")) *t = FKV_GGML_F16;
    else if (!strcmp(s, "q8_0")) *t = FKV_GGML_Q8_0;
    else if (!strcmp(s, "q4_0")) *t = FKV_GGML_Q4_0;
    else return -1;
    return 0;
}

static int cmd_init(int argc, char **argv)
{
    const char *preset = NULL, *out = NULL;
    uint64_t seed = 1;
    int f16 = 0, untied = 0;
    const char *wtype = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            preset = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--f16"))
            f16 = 1;
        else if (!strcmp(argv[i], "--wtype") && i + 1 < argc)
            wtype = argv[++i];
        else if (!strcmp(argv[i], "--untied"))
            untied = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "fairkv model init: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!preset || !out) {
        fprintf(stderr, "fairkv model init: --preset and --out are required\n");
        return 2;
    }
    fkv_model_init_cfg cfg;
    if (fkv_model_init_preset(preset, &cfg)) {
        fprintf(stderr, "fairkv model init: unknown preset '%s' (tiny, small, prefill)\n", preset);
        return 2;
    }
    cfg.seed = seed;
    cfg.f16 = f16;
    if (wtype && fkv_parse_wtype(wtype, &cfg.wtype)) {
        fprintf(stderr, "fairkv model init: --wtype '%s' is not f32, f16, q8_0 or q4_0\n", wtype);
        return 2;
    }
    if (wtype && f16 && cfg.wtype != FKV_GGML_F16) {
        fprintf(stderr, "fairkv model init: --f16 and --wtype %s contradict each other\n", wtype);
        return 2;
    }
    cfg.tied = !untied;
    fkv_gguf_writer *w;
    char err[512];
    fkv_status st = fkv_model_init_build(&cfg, &w);
    if (!st) {
        st = fkv_gguf_w_to_file(w, out, err, sizeof err);
        fkv_gguf_writer_free(w);
    } else {
        snprintf(err, sizeof err, "building the model: %s", fkv_strerror(st));
    }
    if (st) {
        fprintf(stderr, "fairkv model init: %s\n", err);
        return 1;
    }
    printf("wrote %s: preset %s, seed %" PRIu64 ", %s weights\n", out, preset, seed,
           wtype ? wtype : f16 ? "f16" : "f32");
    return 0;
}

static int cmd_convert(int argc, char **argv)
{
    const char *ckpt = NULL, *tok = NULL, *out = NULL, *type = "f32";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 < argc && !strcmp(a, "--llama2c")) ckpt = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--tokenizer")) tok = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--out")) out = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--type")) type = argv[++i];
        else {
            fprintf(stderr, "fairkv model convert: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!ckpt || !tok || !out) {
        fprintf(stderr, "fairkv model convert: --llama2c, --tokenizer and --out are required\n");
        return 2;
    }
    uint32_t ggml_type;
    if (fkv_parse_wtype(type, &ggml_type)) {
        fprintf(stderr, "fairkv model convert: --type '%s' is not f32, f16, q8_0 or q4_0\n", type);
        return 2;
    }
    char err[640] = "";
    fkv_llama2c_config c;
    fkv_status st = fkv_llama2c_convert(ckpt, tok, out, ggml_type, &c, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv model convert: %s\n", err[0] ? err : fkv_strerror(st));
        return 1;
    }
    printf("wrote %s: %s weights; dim %u, hidden %u, %u layers, %u heads (%u kv), vocab %u, %s classifier, "
           "context_length %u (the checkpoint's seq_len)\n",
           out, type, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
           c.shared_classifier ? "shared" : "separate", c.seq_len);
    return 0;
}

static void print_value(const fkv_gguf_kv *kv)
{
    switch (kv->type) {
    case FKV_GGUF_STRING: printf("\"%.200s\"%s", kv->str, kv->len > 200 ? "..." : ""); break;
    case FKV_GGUF_F32:
    case FKV_GGUF_F64: printf("%g", kv->v.f); break;
    case FKV_GGUF_I8:
    case FKV_GGUF_I16:
    case FKV_GGUF_I32:
    case FKV_GGUF_I64: printf("%" PRId64, kv->v.i); break;
    case FKV_GGUF_BOOL: printf("%s", kv->v.u ? "true" : "false"); break;
    case FKV_GGUF_ARRAY:
        printf("[%" PRIu64 " x %s]", kv->n, fkv_gguf_type_name(kv->arr_type));
        for (uint64_t i = 0; i < kv->n && i < 4; i++) {
            if (kv->arr_type == FKV_GGUF_STRING)
                printf(" \"%.40s\"", kv->strs[i]);
            else if (kv->arr_type == FKV_GGUF_F32 || kv->arr_type == FKV_GGUF_F64)
                printf(" %g", fkv_gguf_arr_f64(kv, i));
            else
                printf(" %" PRId64, fkv_gguf_arr_i64(kv, i));
        }
        if (kv->n > 4) printf(" ...");
        break;
    default: printf("%" PRIu64, kv->v.u); break;
    }
}

static int cmd_info(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        usage(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    char err[512];
    fkv_gguf *g;
    fkv_status st = fkv_gguf_load(argv[1], &g, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv model info: %s (%s)\n", err, fkv_strerror(st));
        return 1;
    }
    printf("file: %s\nGGUF version %u, alignment %u, %zu bytes, data at byte %" PRIu64 "\n", argv[1], g->version,
           g->alignment, g->size, g->data_offset);
    printf("\nmetadata (%" PRIu64 "):\n", g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        printf("  %-44s %-6s ", g->kv[i].key, fkv_gguf_type_name(g->kv[i].type));
        print_value(&g->kv[i]);
        printf("\n");
    }
    printf("\ntensors (%" PRIu64 "):\n", g->n_tensors);
    uint64_t total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const fkv_gguf_tensor *t = &g->tensors[i];
        char dims[96];
        int k = snprintf(dims, sizeof dims, "[");
        for (uint32_t d = 0; d < t->n_dims && k > 0 && (size_t)k < sizeof dims; d++)
            k += snprintf(dims + k, sizeof dims - (size_t)k, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
        if (k > 0 && (size_t)k < sizeof dims) snprintf(dims + k, sizeof dims - (size_t)k, "]");
        printf("  %-32s %-4s %-18s offset %-10" PRIu64 " %" PRIu64 " bytes\n", t->name, fkv_ggml_type_name(t->type),
               dims, t->offset, t->n_bytes);
        total += t->n_elements;
    }
    printf("  total elements: %" PRIu64 "\n", total);
    fkv_llama *m;
    st = fkv_llama_from_gguf(g, &m, err, sizeof err);
    if (!st) {
        const fkv_llama_hparams *hp = &m->hp;
        printf("\nllama: vocab %u, dim %u, layers %u, heads %u (kv %u, head_dim %u), hidden %u, rope dims %u base %g, "
               "eps %g, context %u, %s head\n",
               hp->n_vocab, hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->hidden, hp->rope_dim,
               hp->rope_base, hp->eps, hp->ctx_len, m->tied_output ? "tied" : "separate");
        printf("parameters: %" PRIu64 "\n", fkv_llama_n_params(m));
        fkv_llama_free(m);
    } else {
        printf("\nnot loadable as a llama model: %s\n", err);
    }
    fkv_gguf_free(g);
    return 0;
}

/* A piece on one line: escapes what would break it or is not text. */
static void print_piece(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        size_t cl = fkv__utf8_len(c);
        int valid = c >= 0x80 && cl > 1 && cl <= n - i;
        for (size_t k = 1; valid && k < cl; k++) valid = ((unsigned char)p[i + k] & 0xc0) == 0x80;
        if (valid) {
            fwrite(p + i, 1, cl, stdout);
            i += cl;
            continue;
        }
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\' || c == '\'')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\x%02X", c);
        else
            putchar(c);
        i++;
    }
}

static void print_tokens(const fkv_tokenizer *t, const int32_t *ids, size_t n, int ids_only)
{
    if (ids_only) {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("]\n");
        return;
    }
    char piece[1100];
    for (size_t i = 0; i < n; i++) {
        const char *p = piece;
        size_t pl;
        if (t->type[ids[i]] == FKV_TT_CONTROL) { /* decodes to nothing: show its name */
            p = t->text[ids[i]];
            pl = t->len[ids[i]];
        } else {
            pl = fkv_tok_piece(t, ids[i], piece, sizeof piece);
            if (pl > sizeof piece - 1) pl = sizeof piece - 1; /* token texts are <= 1024 bytes */
        }
        printf("%6d -> '", ids[i]);
        print_piece(p, pl);
        printf("'\n");
    }
}

static int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL;
    int ids_only = 0, no_bos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--text") && i + 1 < argc)
            text = argv[++i];
        else if (!strcmp(argv[i], "--ids"))
            ids_only = 1;
        else if (!strcmp(argv[i], "--no-bos"))
            no_bos = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "fairkv model tokenize: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !text) {
        fprintf(stderr, "fairkv model tokenize: --model and --text are required\n");
        return 2;
    }
    char err[512];
    fkv_gguf *g;
    fkv_tokenizer *t = NULL;
    fkv_status st = fkv_gguf_load(model, &g, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv model tokenize: %s (%s)\n", err, fkv_strerror(st));
        return 1;
    }
    /* the tokenizer's merge table points into g: g lives as long */
    if ((st = fkv_tokenizer_from_gguf(g, &t, err, sizeof err))) {
        fprintf(stderr, "fairkv model tokenize: %s: %s (%s)\n", model, err, fkv_strerror(st));
        fkv_gguf_free(g);
        return 1;
    }
    size_t len = strlen(text), n = 0;
    int32_t *ids = NULL;
    st = fkv_tok_encode(t, text, len, t->add_bos && !no_bos, NULL, 0, &n);
    if (!st && !(ids = malloc((n ? n : 1) * sizeof *ids))) st = FKV_ENOMEM;
    if (!st) st = fkv_tok_encode(t, text, len, t->add_bos && !no_bos, ids, n, &n);
    if (st) {
        fprintf(stderr, "fairkv model tokenize: encoding the text: %s\n", fkv_strerror(st));
    } else {
        print_tokens(t, ids, n, ids_only);
    }
    free(ids);
    fkv_tokenizer_free(t);
    fkv_gguf_free(g);
    return st ? 1 : 0;
}

int fkv_cli_model(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "init")) return cmd_init(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return cmd_convert(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "eval")) return fkv_cli_model_eval(argc - 1, argv + 1);
    fprintf(stderr, "fairkv model: unknown subcommand '%s' (init, info, convert, tokenize, eval)\n", argv[1]);
    return 2;
}
