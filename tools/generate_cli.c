/* `fairkv generate`: prompt -> text with a GGUF model.  The request runs
 * through the engine (engine.h) over a fairkv cache (generate_engine_cli.c),
 * the path `fairkv serve` takes: one code path for prefill and decode, so
 * what generate measures is what the server computes.  --engine is accepted
 * and changes nothing. */
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

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv generate --model FILE --prompt TEXT --max-tokens|-n N [--ctx N]\n"
               "                       [--temperature T] [--top-p P] [--seed S] [--threads N] [--chunk N]\n"
               "                       [--ids] [--logits FILE]\n"
               "                       [--kv-budget BYTES] [--kv-dtype f32|f16] [--n N]\n"
               "                       [--quant off|always|under-pressure] [--quant-hot TOKENS]\n"
               "                       [--quant-dtype int8|fp8|int4] [--quant-warm TOKENS]\n"
               "                       [--sparsity dense|streaming|h2o] [--sparsity-budget TOKENS]\n"
               "                       [--ref-attention] [--stats] [--engine]\n"
               "  --ctx N overrides the model's context length (llama.context_length; warns beyond it);\n"
               "  -n is --max-tokens (--n is the number of samples);\n"
               "  temperature 0 (default) is greedy; --chunk sets the tokens per engine step (default 256);\n"
               "  the request runs through the engine (the scheduler and a fairkv cache) as in\n"
               "  `fairkv serve`; --kv-budget sizes the cache (default: 64MiB, or what the prompt and\n"
               "  --max-tokens of all samples need if more; suffixes K, KiB, M, MiB, G, GiB); --engine\n"
               "  is accepted and changes nothing; --n N samples share the prompt's pages;\n"
               "  --ids prints the generated token ids (one line per sample, the end-of-generation token\n"
               "  included) instead of the text; --logits FILE writes sample 0's logits before each\n"
               "  generated token, n_vocab little-endian f32 per token\n");
}

/* "65536", "64MiB", "64M", "512KiB", "1GiB": bytes; -1 if malformed */
static int parse(int argc, char **argv, gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 32, o->threads = 1, o->chunk = 256, o->top_p = 1.0, o->seed = 1;
    o->kv_budget = 0, o->n = 1, o->sparsity_budget = 256, o->quant_hot = 128;
    o->quant_warm = 0, o->quant_dtype = FKV_INT8;
    o->quant = FKV_QUANT_OFF, o->sparsity = FKV_SPARSE_DENSE, o->kv_dtype = FKV_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--engine")) { /* the only path; kept for scripts that name it */
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
        else if (!strcmp(a, "--quant-warm")) o->quant_warm = strtol(v, &end, 10);
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
        } else if (!strcmp(a, "--quant-dtype")) {
            if (!strcmp(v, "int8")) o->quant_dtype = FKV_INT8;
            else if (!strcmp(v, "fp8")) o->quant_dtype = FKV_FP8;
            else if (!strcmp(v, "int4")) o->quant_dtype = FKV_INT4;
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
        !(o->top_p > 0 && o->top_p <= 1) || o->n < 1 || o->n > 64 || o->sparsity_budget < 1 || o->quant_hot < 1 ||
        o->quant_warm < 0 || o->quant_warm > (1l << 20)) {
        fprintf(stderr, "fairkv generate: need --max-tokens >= 0, 1 <= --threads <= 256, --chunk >= 1, "
                        "--temperature >= 0, 0 < --top-p <= 1, 1 <= --n <= 64, --sparsity-budget >= 1, "
                        "--quant-hot >= 1, 0 <= --quant-warm <= 1048576\n");
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
    int32_t *ids = NULL;
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
    if (!ids) {
        st = FKV_ENOMEM;
        goto out;
    }
    if ((st = fkv_tok_encode(tok, o.prompt, plen, tok->add_bos, ids, total, &n_prompt))) goto out;
    if (o.logits_path && !(o.logits_file = fopen(o.logits_path, "wb"))) {
        snprintf(err, sizeof err, "--logits: cannot write '%s'", o.logits_path);
        st = FKV_EIO;
        goto out;
    }
    rc = fkv__generate_engine(&o, m, tok, ids, n_prompt);
out:
    if (o.logits_file && fclose(o.logits_file) && !st) {
        snprintf(err, sizeof err, "--logits: write to '%s' failed", o.logits_path);
        st = FKV_EIO;
    }
    if (st) fprintf(stderr, "fairkv generate: %s (%s)\n", err[0] ? err : "failed", fkv_strerror(st));
    free(ids);
    fkv_tokenizer_free(tok);
    fkv_llama_free(m);
    return st ? 1 : rc;
}
