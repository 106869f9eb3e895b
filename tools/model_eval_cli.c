/* `fairkv model eval`: what a K/V precision costs in accuracy on a real
 * model (src/model/kv_eval.h), as llama.cpp's perplexity tool measures a
 * quantized cache against the unquantized one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cli.h"
#include "model/kv_eval.h"
#include "model/model.h"
#include "model/tokenizer.h"

#define MAX_CFG 64

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fairkv model eval --model FILE [--kv SPEC]... [--hot N[,N...]] [--chunk N] [--seqs N]\n"
            "                         [--len N] [--seed S] [--calib-seed S] [--greedy N] [--pick]\n"
            "  Teacher-forces a fixed stream (--seqs sequences of --len tokens, the model's own samples at\n"
            "  temperature 1 from BOS, seeds S, S+1, ...) with fp32 K/V and with each precision, and prints\n"
            "  KL divergence (mean, P99, nats) of the next-token distributions against fp32, top-1\n"
            "  agreement and perplexity.  SPEC: f32, f16, fp8, fp8-head, fp8-chunk, int8, int4, int4r, int2\n"
            "  (every chunk past the hot window; fp8-chunk: the cache's fp8 chunks, a scale per chunk and kv\n"
            "  head), or a ladder WARM:TOKENS,COLD (e.g. fp8:128,int4r).  Chunks of\n"
            "  --chunk tokens (64) are quantized whole once --hot tokens (64; a comma list runs each) are\n"
            "  newer; fp8 scales come from a calibration sequence (--calib-seed, 1000) not scored.\n"
            "  --greedy N also decodes N tokens greedily under each precision and counts the tokens equal to\n"
            "  fp32's.  --pick runs the candidates of docs/EVALUATION.md section 2b and prints the one the\n"
            "  rule chooses.  bytes: per token of a 4096-token sequence of a 7-8B model's K/V shape (8 kv\n"
            "  heads x 128) against fp16.\n"
            "  defaults: every codec, --seqs 8 --len 512 (at most the context length) --seed 1\n");
}

static int parse_u32(const char *opt, const char *v, uint32_t lo, uint32_t *out)
{
    char *end = NULL;
    unsigned long x = strtoul(v, &end, 10);
    if (!*v || *end || x < lo || x > 1000000) {
        fprintf(stderr, "fairkv model eval: %s: '%s' is not a whole number in [%u, 1000000]\n", opt, v, lo);
        return 2;
    }
    *out = (uint32_t)x;
    return 0;
}

int fkv_cli_model_eval(int argc, char **argv)
{
    const char *model = NULL, *specs[MAX_CFG];
    uint32_t n_specs = 0, hots[8] = {64}, n_hots = 1, chunk = 64, seqs = 8, len = 512, greedy = 0;
    uint32_t seed = 1, calib_seed = 1000;
    int pick = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--pick")) {
            pick = 1;
            continue;
        }
        if (!v) goto bad;
        i++;
        int rc = 0;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--kv")) {
            if (n_specs == MAX_CFG) {
                fprintf(stderr, "fairkv model eval: at most %d --kv\n", MAX_CFG);
                return 2;
            }
            specs[n_specs++] = v;
        } else if (!strcmp(a, "--hot")) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            n_hots = 0;
            for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
                if (n_hots == 8) {
                    fprintf(stderr, "fairkv model eval: --hot: at most 8 sizes\n");
                    return 2;
                }
                if ((rc = parse_u32("--hot", s, 0, &hots[n_hots++]))) return rc;
            }
            if (!n_hots) goto bad;
        } else if (!strcmp(a, "--chunk")) rc = parse_u32(a, v, 1, &chunk);
        else if (!strcmp(a, "--seqs")) rc = parse_u32(a, v, 1, &seqs);
        else if (!strcmp(a, "--len")) rc = parse_u32(a, v, 2, &len);
        else if (!strcmp(a, "--seed")) rc = parse_u32(a, v, 0, &seed);
        else if (!strcmp(a, "--calib-seed")) rc = parse_u32(a, v, 0, &calib_seed);
        else if (!strcmp(a, "--greedy")) rc = parse_u32(a, v, 0, &greedy);
        else goto bad;
        if (rc) return rc;
        continue;
    bad:
        fprintf(stderr, "fairkv model eval: unknown or incomplete option '%s'\n", a);
        usage(stderr);
        return 2;
    }
    if (!model) {
        fprintf(stderr, "fairkv model eval: --model is required\n");
        return 2;
    }
    /* the configurations: (ladder, hot) pairs */
    fkv_kv_ladder cfg[MAX_CFG * 8];
    uint32_t n_cfg = 0;
    char err[512] = "";
    static const char *const dflt[] = {"f16", "fp8", "fp8-head", "int8", "int4", "int4r", "int2"};
    static const char *const cand[] = {"fp8", "fp8-head", "int8", "int4", "int4r", "int2",
                                       "fp8:128,int4", "fp8:128,int4r", "fp8:128,int2",
                                       "int8:128,int4", "int8:128,int4r", "int8:128,int2"};
    const char *const *list = n_specs ? specs : pick ? cand : dflt;
    uint32_t n_list = n_specs ? n_specs : pick ? 12 : 7;
    if (pick) hots[0] = 64, hots[1] = 128, n_hots = 2;
    for (uint32_t h = 0; h < n_hots; h++)
        for (uint32_t i = 0; i < n_list; i++) {
            fkv_kv_ladder *l = &cfg[n_cfg];
            l->chunk = chunk, l->hot = hots[h];
            if (fkv_kv_ladder_parse(list[i], l, err, sizeof err) || fkv_kv_ladder_check(l, err, sizeof err)) {
                fprintf(stderr, "fairkv model eval: %s\n", err);
                return 2;
            }
            n_cfg++;
        }
    fkv_llama *m = NULL;
    fkv_tokenizer *tok = NULL;
    fkv_fwd *f = NULL;
    fkv_kvc_calib cal = {0};
    int32_t *tokens = NULL, *calib = NULL, *g_ref = NULL, *g_test = NULL;
    float *ref = NULL, *test = NULL;
    fkv_status st = fkv_llama_load(model, &m, err, sizeof err);
    if (!st) st = fkv_tokenizer_from_gguf(m->gguf, &tok, err, sizeof err);
    if (st) goto out;
    if (len > m->hp.ctx_len) len = m->hp.ctx_len;
    if (greedy + 1 > m->hp.ctx_len) {
        snprintf(err, sizeof err, "--greedy %u: above the context length %u - 1", greedy, m->hp.ctx_len);
        st = FKV_EINVAL;
        goto out;
    }
    const uint32_t V = m->hp.n_vocab;
    const size_t n_lp = (size_t)seqs * (len - 1) * V;
    tokens = malloc((size_t)seqs * len * sizeof *tokens);
    calib = malloc((size_t)len * sizeof *calib);
    ref = malloc(n_lp * sizeof *ref);
    test = malloc(n_lp * sizeof *test);
    g_ref = malloc((greedy + 1) * sizeof *g_ref);
    g_test = malloc((greedy + 1) * sizeof *g_test);
    if (!tokens || !calib || !ref || !test || !g_ref || !g_test) {
        st = FKV_ENOMEM;
        goto out;
    }
    int32_t bos = tok->bos >= 0 ? tok->bos : 1;
    fkv_fwd_geom geom = fkv_llama_geom(m);
    if ((st = fkv_fwd_create(m, NULL, &f)) || (st = fkv_kvc_calib_init(&cal, geom.n_layers, geom.n_kv_heads)) ||
        (st = fkv_kv_eval_stream(f, m, bos, seqs, len, seed, tokens, err, sizeof err)) ||
        (st = fkv_kv_eval_stream(f, m, bos, 1, len, calib_seed, calib, err, sizeof err)) ||
        (st = fkv_kv_eval_calibrate(f, m, calib, len, &cal, err, sizeof err)) ||
        (st = fkv_kv_eval_run(f, m, NULL, NULL, tokens, seqs, len, ref, err, sizeof err)))
        goto out;
    if (greedy && (st = fkv_kv_eval_greedy(f, m, NULL, NULL, bos, greedy, g_ref, err, sizeof err))) goto out;
    printf("model %s: %u layers, %u kv heads of %u channels; stream %u x %u tokens (seeds %u..%u), %u predicted; "
           "chunk %u\n",
           model, geom.n_layers, geom.n_kv_heads, geom.head_dim, seqs, len, seed, seed + seqs - 1, seqs * (len - 1),
           chunk);
    fkv_kv_eval_result r0;
    if ((st = fkv_kv_eval_compare(ref, ref, tokens, seqs, len, V, &r0))) goto out;
    printf("| kv | hot | bytes vs fp16 | KLD mean | KLD P99 | top-1 | ppl (fp32 %.4f) | ppl delta |%s\n",
           r0.ppl_ref, greedy ? " greedy same as fp32 |" : "");
    printf("|---|---|---|---|---|---|---|---|%s\n", greedy ? "---|" : "");
    int best = -1;
    double best_bytes = 0, best_kld = 0;
    for (uint32_t c = 0; c < n_cfg; c++) {
        fkv_kv_eval_result r;
        if ((st = fkv_kv_eval_run(f, m, &cfg[c], &cal, tokens, seqs, len, test, err, sizeof err)) ||
            (st = fkv_kv_eval_compare(ref, test, tokens, seqs, len, V, &r)))
            goto out;
        char name[64];
        fkv_kv_ladder_name(&cfg[c], name, sizeof name);
        double bytes = fkv_kv_ladder_bytes_ratio(&cfg[c], 4096, 8, 128);
        printf("| %s | %u | %.3f | %.5f | %.5f | %.2f%% | %.4f | %+.4f |", name, cfg[c].hot, bytes, r.kld_mean,
               r.kld_p99, 100 * r.top1, r.ppl, r.ppl - r.ppl_ref);
        if (greedy) {
            if ((st = fkv_kv_eval_greedy(f, m, &cfg[c], &cal, bos, greedy, g_test, err, sizeof err))) goto out;
            uint32_t same = 0, first = greedy;
            for (uint32_t i = 0; i < greedy; i++) {
                same += g_test[i] == g_ref[i];
                if (g_test[i] != g_ref[i] && first == greedy) first = i;
            }
            printf(" %u/%u (first differs at %u) |", same, greedy, first);
        }
        printf("\n");
        fflush(stdout);
        int ok = r.kld_mean <= 0.01 && r.top1 >= 0.98;
        if (pick && ok && (best < 0 || bytes < best_bytes || (bytes == best_bytes && r.kld_mean < best_kld)))
            best = (int)c, best_bytes = bytes, best_kld = r.kld_mean;
    }
    if (pick) {
        if (best < 0) printf("pick: no candidate within the budget (mean KLD <= 0.01, top-1 >= 98%%)\n");
        else {
            char name[64];
            fkv_kv_ladder_name(&cfg[best], name, sizeof name);
            printf("pick: %s with a %u-token hot window (%.3f of fp16's bytes, mean KLD %.5f)\n", name,
                   cfg[best].hot, best_bytes, best_kld);
        }
    }
out:
    if (st) fprintf(stderr, "fairkv model eval: %s (%s)\n", err[0] ? err : "failed", fkv_strerror(st));
    free(tokens), free(calib), free(ref), free(test), free(g_ref), free(g_test);
    fkv_kvc_calib_free(&cal);
    fkv_fwd_destroy(f);
    fkv_tokenizer_free(tok);
    fkv_llama_free(m);
    return st ? 1 : 0;
}
