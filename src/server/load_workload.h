/* Request streams for `fairkv load`: open-loop Poisson arrivals with the
 * seed's class mix (60% short < 128 tokens, 30% medium 128-512, 10% long
 * > 512), request lengths read from a trace, or tenants: heavy users that
 * send long prompts back to back (closed loop) beside light users whose
 * short prompts arrive as a Poisson process.
 * Same seed, same stream. */
#ifndef FKV_SERVER_LOAD_WORKLOAD_H
#define FKV_SERVER_LOAD_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_eval.h"

typedef struct fkv_load_item {
    double arrival_s;       /* seconds after the start */
    uint32_t prompt_tokens; /* >= 1 */
    uint32_t max_tokens;    /* >= 1 */
    uint32_t client;        /* client index: the request's "user" is "client-<k>" */
    int cls;                /* fkv_class of prompt + max_tokens (thresholds 128 / 512) */
    int role;               /* fkv_load_role: names the "user" */
    /* A trace replayed by its blocks (fkv_load_trace_opts.block_tokens):
     * the prompt's first n_blocks * block_tokens positions (those below
     * prompt_tokens) are named by these block ids, so requests that share
     * an id at a position share those tokens; NULL: no blocks. */
    const uint64_t *blocks; /* [n_blocks], owned by the workload */
    uint32_t n_blocks;
    uint32_t block_tokens;
} fkv_load_item;

/* Who sends a request, which names its "user" field (the server's tenant):
 * "client-<k>", "light-<k>" or "heavy-<k>". */
typedef enum fkv_load_role { FKV_LOAD_CLIENT = 0, FKV_LOAD_LIGHT = 1, FKV_LOAD_HEAVY = 2 } fkv_load_role;

typedef struct fkv_load_workload {
    fkv_load_item *items; /* [n], in arrival order */
    size_t n;
    /* Closed-loop users: closed[k] is user k's request, sent again as soon
     * as the previous one ends (its arrival_s unused), from the start
     * until closed_until_s.  Each has at most one request open. */
    fkv_load_item *closed; /* [n_closed] */
    uint32_t n_closed;
    double closed_until_s;
    uint64_t *block_store; /* the items' block ids (a trace replayed by its blocks) */
} fkv_load_workload;

/* The "user" field of a request: "client-<k>", "light-<k>" or "heavy-<k>". */
void fkv_load_user_name(const fkv_load_item *it, char *buf, size_t len);

/* The `tenants` workload.  Users 0..heavy-1 are heavy, heavy..heavy+light-1
 * light; a light user's requests are the same whatever `only` says, so a
 * run of the light users alone is the isolated baseline of the full run. */
typedef enum fkv_load_only { FKV_LOAD_ONLY_ALL = 0, FKV_LOAD_ONLY_LIGHT, FKV_LOAD_ONLY_HEAVY } fkv_load_only;
typedef struct fkv_load_tenants {
    uint32_t heavy, light;              /* users of each kind */
    uint32_t heavy_prompt, heavy_out;   /* a heavy request's prompt and max_tokens */
    uint32_t light_prompt, light_out;   /* a light request's */
    double light_rate;                  /* Poisson arrivals per light user per second */
    double duration;                    /* seconds of arrivals (and of heavy sending) */
    fkv_load_only only;
} fkv_load_tenants;

/* 2 heavy users sending 2,000-token prompts with 32 tokens out; 4 light
 * users sending 40-token prompts with 16 out at 0.5 per second each; 60 s. */
void fkv_load_tenants_default(fkv_load_tenants *t);
/* FKV_EINVAL when a count, a length, the rate or the duration is out of range. */
fkv_status fkv_load_workload_tenants(uint64_t seed, const fkv_load_tenants *t, fkv_load_workload *out);

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

/* How a Mooncake trace is replayed (fkv_load_workload_trace_opts).
 *
 * block_tokens > 0: each prompt is built from the request's hash_ids, the
 * trace's 512-token prefix blocks, each standing for block_tokens tokens
 * here: the same id gives the same tokens (a pure function of the id and
 * the offset), so two requests share exactly the prompt prefix the trace
 * says they share, and a prefix cache, a host tier or a remote tier can
 * find it.  Lengths are scaled alike: prompt ceil(input_length *
 * block_tokens / 512), max_tokens ceil(output_length * block_tokens / 512)
 * (then max_prompt cuts the prompt, and the blocks past it).  A request's
 * "user" follows from its first block (client = mix64(first id) mod
 * clients), so the turns of one conversation, and two instances replaying
 * parts of the trace, agree on it (a tenant's remote chunks are its own).
 * 0: prompts as fkv_load_prompt makes them for any workload (a per-client
 * prefix of up to 32 tokens, the rest unique to the request), today's
 * replay; an Azure CSV has no blocks and needs 0.
 *
 * n_shards > 1: this run replays the trace rows shard, shard + n_shards,
 * shard + 2 n_shards, ... (in the trace's order, cycled), so n_shards
 * load generators with the same seed and shard 0..n_shards-1, each at
 * 1/n_shards of the rate, split one replay between n_shards servers as a
 * round-robin balancer would (a conversation's turns land on different
 * instances).  0 or 1: every row. */
typedef struct fkv_load_trace_opts {
    uint32_t block_tokens; /* 0: no blocks; else 1..512 */
    uint32_t shard, n_shards;
} fkv_load_trace_opts;

/* fkv_load_workload_trace with those options; FKV_EINVAL when shard >=
 * n_shards or block_tokens > 512, FKV_EPARSE (err: file:line) when a
 * request has no hash_ids, or they are not an array of non-negative
 * integers, while block_tokens > 0. */
fkv_status fkv_load_workload_trace_opts(const char *path, uint64_t seed, double rate, double duration,
                                        uint32_t clients, uint32_t max_prompt, const fkv_load_trace_opts *o,
                                        fkv_load_workload *out, char *err, size_t errlen);

void fkv_load_workload_free(fkv_load_workload *w);

/* The prompt token ids of item i: a per-client shared prefix (a system
 * prompt of up to 32 tokens, so the prefix cache has something to find)
 * then tokens unique to the request, all below vocab.  Deterministic.
 * An item with blocks has no per-client prefix: its first positions come
 * from its block ids (the same id and offset, the same token), the rest
 * are unique to the request. */
/* Leading prompt tokens common to every request of one client in
 * fkv_load_prompt: min(prompt_tokens / 2, 32). */
uint32_t fkv_load_shared_tokens(uint32_t prompt_tokens);

void fkv_load_prompt(const fkv_load_item *it, size_t i, uint64_t seed, uint32_t vocab, int32_t *out);

#endif
