/* Options of the engine backend ("key=value" strings of --backend-opt; the
 * serve command turns --model, --kv-budget, --policy, ... into them). */
#ifndef FKV_SERVER_BACKEND_ENGINE_OPTS_H
#define FKV_SERVER_BACKEND_ENGINE_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "server/backend.h"

/* The option keys, for messages and --help. */
#define FKV_ENGINE_OPT_KEYS                                                                                      \
    "model, kv_budget, kv_dtype, policy, quotas, shares, dynamic_chunking, quant, quant_dtype, quant_hot, "           \
    "quant_warm, threads, chunk_tokens, max_batch_tokens, chunked_prefill, max_running, admission, step_share, "      \
    "admit_reclaim, step_bound, step_cost, victim, reclaim, host_bytes, prefix_cache, max_waiting, ignore_eos, step_log, ctx, "  \
    "host_kv, remote, remote_cluster, remote_timeout_ms, remote_ttl_s, remote_quota, tier_admission, host_policy"

/* Settings of the backend itself (not the engine's). */
typedef struct fkv_engine_backend_opts {
    uint64_t max_waiting; /* 0: no queue limit of its own (the server has one) */
    int ignore_eos;       /* 1: generate max_tokens whatever is sampled (benchmarks: fixed lengths) */
    uint32_t ctx;         /* 0: the model's llama.context_length; else its override (fkv_llama_set_ctx) */
    const char *step_log; /* NULL, or a file to write a step log to (src/engine/steplog.h); points into opts */
    /* the remote tier (backend_engine.c, "Remote tier"): NULL, or
     * "redis://HOST:PORT[,HOST:PORT...]" (the scheme may be left out);
     * points into opts */
    const char *remote;
    int remote_cluster;    /* 0; 1: the nodes are seeds of a Redis Cluster */
    int remote_timeout_ms; /* 0: the client's default (100 ms): the bound of an admission's lookup */
    uint64_t remote_quota; /* 0: none; else bytes per tenant namespace in the remote tier */
    int remote_ttl_s;      /* 0: the client's default (3600 s): every chunk's EX */
} fkv_engine_backend_opts;

/* Fills cfg (from fkv_engine_config_default) and model[cap] from opts; an
 * unknown key or a bad value is FKV_EINVAL naming the option.  cfg->policy
 * points into opts. */
fkv_status fkv__engine_opts_parse(const char *const *opts, fkv_engine_config *cfg, char *model, size_t cap,
                                  fkv_engine_backend_opts *bo, char *err, size_t errlen);

/* The engine backend's factory (backend_engine.c). */
fkv_status fkv_backend_engine_create(const char *const *opts, fkv_backend *out, char *err, size_t errlen);

#endif
