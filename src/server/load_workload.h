/* Request streams for `fairkv load`: open-loop Poisson arrivals with the
 * seed's class mix (60% short < 128 tokens, 30% medium 128-512, 10% long
 * > 512) or with request lengths read from a trace.
 * Same seed, same stream. */
#ifndef FKV_SERVER_LOAD_WORKLOAD_H
#define FKV_SERVER_LOAD_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

typedef struct fkv_load_item {
    double arrival_s;       /* seconds after the start */
    uint32_t prompt_tokens; /* >= 1 */
    uint32_t max_tokens;    /* >= 1 */
    uint32_t client;        /* client index: the request's "user" is "client-<k>" */
    int cls;                /* fkv_class of prompt + max_tokens (thresholds 128 / 512) */
} fkv_load_item;

typedef struct fkv_load_workload {
    fkv_load_item *items; /* [n], in arrival order */
    size_t n;
} fkv_load_workload;

/* The class of a request of `total` = prompt + max_tokens tokens, as the
 * cache's default config classes it. */
int fkv_load_class_of(uint64_t total);

/* Poisson arrivals at `rate` per second during `duration` seconds; class
 * 60/30/10; total length uniform within the class (short 16-127, medium
 * 128-512, long 513-2048), 3/4 prompt and 1/4 output; `clients` clients. */
fkv_status fkv_load_workload_seed(uint64_t seed, double rate, double duration, uint32_t clients,
                                  fkv_load_workload *out);

/* The same with totals of at most max_total tokens (prompt + output): the
 * long class is drawn in [513, max_total] when max_total < 2048, so a
 * model with a short context gets the same mix (2048 above). */
fkv_status fkv_load_workload_seed_max(uint64_t seed, double rate, double duration, uint32_t clients,
                                      uint32_t max_total, fkv_load_workload *out);

/* The simulator's plain CSV (arrival_ms,prompt_tokens,output_tokens[,client
 * [,shared_tokens]], optional header line 'arrival_ms,...', '#' comments),
 * with its own arrival times: `fairkv load` and `fairkv bench --trace` then
 * replay the same requests at the same times.  The prompts sent always
 * follow fkv_load_shared_tokens; a shared_tokens column is not read here. */
fkv_status fkv_load_workload_plain(const char *path, uint32_t clients, fkv_load_workload *out, char *err,
                                   size_t errlen);
/* Writes w in that format, with the client and shared_tokens columns
 * (shared_tokens = fkv_load_shared_tokens(prompt_tokens): what the prompts
 * fkv_load_prompt builds share per client, so the simulator replaying the
 * trace sees the same prefix structure as the served engine). */
fkv_status fkv_load_workload_write_plain(const fkv_load_workload *w, const char *path, char *err, size_t errlen);

/* Lengths from a trace, in its order (cycled if the run needs more), with
 * Poisson arrivals at `rate`: a Mooncake JSON-lines file (input_length,
 * output_length) or an Azure LLM CSV (ContextTokens, GeneratedTokens).
 * Prompts longer than max_prompt (0 = no limit) are cut to it. */
fkv_status fkv_load_workload_trace(const char *path, uint64_t seed, double rate, double duration,
                                   uint32_t clients, uint32_t max_prompt, fkv_load_workload *out, char *err,
                                   size_t errlen);

void fkv_load_workload_free(fkv_load_workload *w);

/* The prompt token ids of item i: a per-client shared prefix (a system
 * prompt of up to 32 tokens, so the prefix cache has something to find)
 * then tokens unique to the request, all below vocab.  Deterministic. */
/* Leading prompt tokens common to every request of one client in
 * fkv_load_prompt: min(prompt_tokens / 2, 32). */
uint32_t fkv_load_shared_tokens(uint32_t prompt_tokens);

void fkv_load_prompt(const fkv_load_item *it, size_t i, uint64_t seed, uint32_t vocab, int32_t *out);

#endif
