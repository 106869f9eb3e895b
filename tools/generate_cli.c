/* `fairkv generate`: prompt -> text with a GGUF model.  By default K/V live
 * in the contiguous reference store: the prompt is prefilled in chunks (the
 * same batch interface a server uses), then one token per step.  With
 * --engine the request runs through the engine (engine.h) over a fairkv
 * cache of --kv-budget bytes (generate_engine_cli.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cli.h"
#include "generate_cli.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "util/bytes.h"

#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv generate --model FILE --prompt TEXT --max-tokens|-n N [--ctx N]\n"
               "                       [--temperature T] [--top-p P] [--seed S] [--threads N] [--chunk N]\n"
               "                       [--ids] [--logits FILE]\n"
               "                       [--engine [--kv-budget BYTES] [--kv-dtype f32|f16] [--n N]\n"
               "                        [--quant off|always|under-pressure] [--quant-hot TOKENS]\n"
               "                        [--sparsity dense|streaming|h2o] [--sparsity-budget TOKENS]\n"
               "                        [--ref-attention] [--stats]]\n"
               "  --ctx N overrides the model's context length (llama.context_length; warns beyond it);\n"
               "  -n is --max-tokens (--n is the number of samples);\n"
               "  temperature 0 (default) is greedy; --chunk sets the prefill chunk (default 64 tokens);\n"
               "  --engine runs through the scheduler and a fairkv cache of --kv-budget bytes (64MiB;\n"
               "  suffixes K, KiB, M, MiB, G, GiB); --n N samples share the prompt's pages;\n"
               "  --ids prints the generated token ids (one line per sample, the end-of-generation token\n"
               "  included) instead of the text; --logits FILE writes sample 0's logits before each\n"
               "  generated token, n_vocab little-endian f32 per token\n");
}

/* "65536", "64MiB", "64M", "512KiB", "1GiB": bytes; -1 if malformed */
static int parse(int argc, char **argv, gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 32, o->threads = 1, o->chunk = 64, o->top_p = 1.0, o->seed = 1;
    o->kv_budget = 64ll << 20, o->n = 1, o->sparsity_budget = 256, o->quant_hot = 128;
    o->quant = FKV_QUANT_OFF, o->sparsity = FKV_SPARSE_DENSE, o->kv_dtype = FKV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--engine")) {
            o->engine = 1;
            continue;
        }
        if (!strcmp(a, "--ref-attention")) {
            o->ref_attention = 1;
            continue;
        }
        if (!strcmp(a, "--stats")) {
            o->stats = 1;
            continue;
        }
        if (!strcmp(a, "--ids")) {
            o->ids = 1;
            continue;
        }
        if (!v) goto bad;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "--logits")) o->logits_path = v;
        else if (!strcmp(a, "--max-tokens") || !strcmp(a, "-n")) o->max_tokens = strtol(v, &end, 10);
        else if (!strcmp(a, "--ctx")) {
            o->ctx = strtol(v, &end, 10);
            if (o->ctx < 1) o->ctx = -1; /* 0 means "not given" inside */
        }
        else if (!strcmp(a, "--threads")) o->threads = strtol(v, &end, 10);
        else if (!strcmp(a, "--chunk")) o->chunk = strtol(v, &end, 10);
        else if (!strcmp(a, "--temperature")) o->temperature = strtod(v, &end);
        else if (!strcmp(a, "--top-p")) o->top_p = strtod(v, &end);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--n")) o->n = strtol(v, &end, 10);
        else if (!strcmp(a, "--sparsity-budget")) o->sparsity_budget = strtol(v, &end, 10);
        else if (!strcmp(a, "--quant-hot")) o->quant_hot = strtol(v, &end, 10);
        else if (!strcmp(a, "--kv-budget")) {
            if ((o->kv_budget = fkv_parse_bytes(v)) <= 0) {
                fprintf(stderr, "fairkv generate: --kv-budget: '%s' is not a size (65536, 64MiB, 1GiB)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--kv-dtype")) {
            if (!strcmp(v, "f32")) o->kv_dtype = FKV_F32;
            else if (!strcmp(v, "f16")) o->kv_dtype = FKV_F16;
            else goto badval;
        } else if (!strcmp(a, "--quant")) {
            if (!strcmp(v, "off")) o->quant = FKV_QUANT_OFF;
            else if (!strcmp(v, "always")) o->quant = FKV_QUANT_ALWAYS;
            else if (!strcmp(v, "under-pressure")) o->quant = FKV_QUANT_UNDER_PRESSURE;
            else goto badval;
        } else if (!strcmp(a, "--sparsity")) {
            if (fkv_sparse_mode_parse(v, &o->sparsity)) goto badval;
        } else goto bad;
        if (end && *end) {
            fprintf(stderr, "fairkv generate: %s: '%s' is not a number\n", a, v);
            return 2;
        }
        continue;
    badval:
        fprintf(stderr, "fairkv generate: %s: unknown value '%s'\n", a, v);
        return 2;
    bad:
        fprintf(stderr, "fairkv generate: unknown or incomplete option '%s'\n", a);
        usage(stderr);
        return 2;
    }
    if (!o->model || !o->prompt) {
        fprintf(stderr, "fairkv generate: --model and --prompt are required\n");
        return 2;
    }
    if (o->ctx < 0 || o->ctx > (1l << 24)) {
        fprintf(stderr, "fairkv generate: --ctx must be in [1, %ld]\n", 1l << 24);
        return 2;
    }
    if (o->max_tokens < 0 || o->threads < 1 || o->threads > 256 || o->chunk < 1 || !(o->temperature >= 0) ||
        !(o->top_p > 0 && o->top_p <= 1) || o->n < 1 || o->n > 64 || o->sparsity_budget < 1 || o->quant_hot < 1) {
        fprintf(stderr, "fairkv generate: need --max-tokens >= 0, 1 <= --threads <= 256, --chunk >= 1, "
                        "--temperature >= 0, 0 < --top-p <= 1, 1 <= --n <= 64, --sparsity-budget >= 1, "
                        "--quant-hot >= 1\n");
        return 2;
    }
    if (!o->engine && (o->n != 1 || o->quant != FKV_QUANT_OFF || o->sparsity != FKV_SPARSE_DENSE)) {
        fprintf(stderr, "fairkv generate: --n, --quant and --sparsity need --engine\n");
        return 2;
    }
    return 0;
}

int fkv_cli_generate(int argc, char **argv)
{
    gen_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    char err[512] = "";
    fkv_llama *m = NULL;
    fkv_tokenizer *tok = NULL;
    fkv_fwd *fwd = NULL;
    fkv_attn_pool *pool = NULL;
    fkv_kvref_seq kv = {0};
    fkv_sampler smp = {0};
    int32_t *ids = NULL;
    float *logits = NULL;
    fkv_status st = fkv_llama_load(o.model, &m, err, sizeof err);
    if (!st) st = fkv_tokenizer_from_gguf(m->gguf, &tok, err, sizeof err);
    if (st) goto out;
    const fkv_llama_hparams *hp = &m->hp;
    if (o.ctx && fkv_llama_set_ctx(m, (uint32_t)o.ctx) == 1)
        fprintf(stderr,
                "fairkv generate: warning: --ctx %ld exceeds the model's trained context length %u "
                "(llama.context_length); positions beyond it were never trained\n",
                o.ctx, hp->ctx_train);
    if (tok->n_vocab != hp->n_vocab) {
        snprintf(err, sizeof err, "tokenizer has %u tokens, the model %u", tok->n_vocab, hp->n_vocab);
        st = FKV_EPARSE;
        goto out;
    }
    size_t plen = strlen(o.prompt), n_prompt = 0;
    if ((st = fkv_tok_encode(tok, o.prompt, plen, tok->add_bos, NULL, 0, &n_prompt))) goto out;
    size_t total = n_prompt + (size_t)o.max_tokens;
    if (n_prompt == 0 || total > hp->ctx_len) {
        snprintf(err, sizeof err, "prompt (%zu tokens) + --max-tokens %ld must be within 1 .. context length %u%s",
                 n_prompt, o.max_tokens, hp->ctx_len, o.ctx ? " (--ctx)" : " (--ctx N raises it)");
        st = FKV_EINVAL;
        goto out;
    }
    ids = malloc(total * sizeof *ids);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!ids || !logits) {
        st = FKV_ENOMEM;
        goto out;
    }
    if ((st = fkv_tok_encode(tok, o.prompt, plen, tok->add_bos, ids, total, &n_prompt))) goto out;
    if (o.logits_path && !(o.logits_file = fopen(o.logits_path, "wb"))) {
        snprintf(err, sizeof err, "--logits: cannot write '%s'", o.logits_path);
        st = FKV_EIO;
        goto out;
    }
    if (o.engine) {
        rc = fkv__generate_engine(&o, m, tok, ids, n_prompt);
        goto out;
    }
    fkv_fwd_geom geom = fkv_llama_geom(m);
    if ((st = fkv_kvref_seq_init(&kv, &geom, (uint32_t)total)) ||
        (st = fkv_attn_pool_create((unsigned)o.threads, &pool)) || (st = fkv_fwd_create(m, pool, &fwd)) ||
        (st = fkv_sampler_init(&smp, hp->n_vocab, (float)o.temperature, (float)o.top_p, o.seed)))
        goto out;
    int64_t t0 = now_ns();
    for (size_t p = 0; p < n_prompt && !st; p += (size_t)o.chunk) {
        uint32_t n = (uint32_t)(n_prompt - p < (size_t)o.chunk ? n_prompt - p : (size_t)o.chunk);
        fkv_fwd_seq s = {&kv, ids + p, n, (uint32_t)p, NULL, p + n == n_prompt ? logits : NULL, 0};
        st = fkv_llama_forward(fwd, &fkv_kvref_ops, &s, 1, err, sizeof err);
    }
    if (st) goto out;
    int64_t t1 = now_ns();
    if (!o.ids) fputs(o.prompt, stdout);
    size_t n_gen = 0;
    for (size_t pos = n_prompt; n_gen < (size_t)o.max_tokens; n_gen++, pos++) {
        /* written before sampling: these are the logits the token is drawn from */
        if (o.logits_file && fwrite(logits, sizeof *logits, hp->n_vocab, o.logits_file) != hp->n_vocab) {
            snprintf(err, sizeof err, "--logits: write to '%s' failed", o.logits_path);
            st = FKV_EIO;
            goto out;
        }
        int32_t next = fkv_sample(&smp, logits);
        if (o.ids) printf("%s%d", n_gen ? " " : "", (int)next);
        if (fkv_tok_is_eog(tok, next)) break;
        char piece[1100];
        size_t pl = fkv_tok_piece(tok, next, piece, sizeof piece);
        if (!o.ids) {
            fwrite(piece, 1, pl < sizeof piece ? pl : sizeof piece - 1, stdout);
            fflush(stdout);
        }
        ids[pos] = next;
        if (n_gen + 1 == (size_t)o.max_tokens) {
            n_gen++;
            break;
        }
        fkv_fwd_seq s = {&kv, ids + pos, 1, (uint32_t)pos, NULL, logits, 0};
        if ((st = fkv_llama_forward(fwd, &fkv_kvref_ops, &s, 1, err, sizeof err))) goto out;
    }
    int64_t t2 = now_ns();
    double pre_s = (double)(t1 - t0) / 1e9, gen_s = (double)(t2 - t1) / 1e9;
    printf("\n");
    fprintf(stderr, "prompt %zu tokens in %.3f s (%.1f tok/s); generated %zu tokens in %.3f s (%.1f tok/s); %ld threads\n",
            n_prompt, pre_s, pre_s > 0 ? (double)n_prompt / pre_s : 0.0, n_gen, gen_s,
            gen_s > 0 ? (double)n_gen / gen_s : 0.0, o.threads);
out:
    if (o.logits_file && fclose(o.logits_file) && !st) {
        snprintf(err, sizeof err, "--logits: write to '%s' failed", o.logits_path);
        st = FKV_EIO;
    }
    if (st) fprintf(stderr, "fairkv generate: %s (%s)\n", err[0] ? err : "failed", fkv_strerror(st));
    free(ids);
    free(logits);
    fkv_sampler_free(&smp);
    fkv_fwd_destroy(fwd);
    fkv_attn_pool_destroy(pool);
    fkv_kvref_seq_free(&kv);
    fkv_tokenizer_free(tok);
    fkv_llama_free(m);
    return st ? 1 : rc;
}
