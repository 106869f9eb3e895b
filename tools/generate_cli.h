/* Options of `fairkv generate`, parsed in generate_cli.c and run through
 * the engine in generate_engine_cli.c. */
#ifndef FKV_ENGINE_CLI_GEN_H
#define FKV_ENGINE_CLI_GEN_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "model/model.h"
#include "model/tokenizer.h"
#include "fairkv.h"
#include "fairkv_attn.h"

typedef struct gen_opts {
    const char *model, *prompt;
    long max_tokens, threads, chunk;
    long ctx; /* 0: the model's llama.context_length */
    double temperature, top_p;
    uint64_t seed;
    /* --ids: token ids on stdout instead of text, so that other
     * implementations can be compared token for token */
    int ids;
    const char *logits_path; /* --logits FILE: sample 0's logits, f32 [n_vocab] per generated token */
    FILE *logits_file;       /* opened from logits_path, or NULL */
    /* the engine */
    int engine; /* --engine was given (it changes nothing: the only path) */
    int ref_attention, stats;
    int64_t kv_budget; /* bytes; 0: sized to the request (at least 64 MiB) */
    fkv_dtype kv_dtype;
    long n, sparsity_budget, quant_hot, quant_warm;
    fkv_quant_mode quant;
    fkv_dtype quant_dtype; /* FKV_INT8 (default), FKV_FP8 or FKV_INT4 */
    fkv_sparse_mode sparsity;
} gen_opts;

/* Runs the prompt ids[0, n_prompt) through the engine; prints the text.
 * Returns the command's exit status. */
int fkv__generate_engine(const gen_opts *o, const fkv_llama *m, const fkv_tokenizer *tok, const int32_t *ids,
                         size_t n_prompt);

#endif
