/* The real inference engine: the Llama forward pass (model.h) driven by the
 * iteration-level scheduler (src/sched) over a fairkv cache with cpu
 * storage.  One engine step = one scheduler step executed for real:
 *
 *   1. requests submitted since the last step join the scheduler;
 *   2. fkv_sched_step() admits / preempts and does every cache call
 *      (prefix match, restore of evicted chunks, append of new tokens);
 *   3. the engine runs one forward pass over the step's work, in batch
 *      order: per request, the chunks restored in this step (recompute),
 *      then the prefill chunk or the decode token, writing K/V at the slots
 *      the chunk table names, attention through the fairkv kernels
 *      (decode tokens of a layer in one batched call);
 *   4. requests that finished their prompt or decoded sample a token; the
 *      callbacks run; fkv_sched_finish() ends the step;
 *   5. with a sparsity mode, chunks outside each decoding request's budget
 *      are dropped (pages freed).
 *
 * Parallel samples (n > 1): sample 0 runs the prompt; when its prefill
 * ends, every other sample draws its first token from the same logits
 * (with its own seed) and gets a fork of sample 0's sequence (fkv_seq_fork:
 * the prompt's pages are shared, the first write into a shared page copies
 * that page), then joins the scheduler as a request already holding its
 * sequence and decodes like any other.
 *
 * Threading: fkv_engine_submit() may be called from any thread at any time
 * (it only queues the request under a mutex); fkv_engine_step() and
 * fkv_engine_run_until_idle() must be called from one thread at a time (the
 * stepping thread).  Callbacks run on the stepping thread, inside the step.
 */
#ifndef FKV_ENGINE_ENGINE_H
#define FKV_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "fairkv.h"
#include "fairkv_attn.h"
#include "sched/sched.h"

/* One step with work as fkv_engine_step timed it (step logs, calibration). */
typedef struct fkv_engine_step_info {
    int64_t t0_ns;     /* start, CLOCK_MONOTONIC ns */
    int64_t wall_ns;   /* wall time inside fkv_engine_step */
    uint32_t tokens;   /* new + recomputed tokens (fkv_batch.tokens) */
    uint32_t n_items;  /* batch items (fkv_batch.n) */
    double attn_work;  /* this step's share of fkv_engine_stats.attn_work */
    /* K/V bytes its attention read, by stored precision: [0] the engine's
     * kv_dtype, [1] int8, [2] int4; codes and scales (fkv_kvc_bytes), all
     * layers, each item's resident chunks (the simulator's --price-kv-bytes
     * counts the same) */
    double kv_read[3];
} fkv_engine_step_info;
typedef void (*fkv_engine_step_fn)(void *ctx, const fkv_engine_step_info *s);

/* How the step-time bound predicts a step's time (fkv_engine_config.step_cost). */
typedef enum fkv_step_cost {
    FKV_STEP_COST_FLOPS = 0,
    FKV_STEP_COST_TOKENS = 1,
    FKV_STEP_COST_COEFFS = 2,
    FKV_STEP_COST_AUTO = 3 /* coefficients fitted on the engine's own timed steps; FLOPs until the fit holds */
} fkv_step_cost;

typedef struct fkv_engine_config {
    uint64_t kv_budget_bytes;  /* 64 MiB: K+V bytes of all layers (the cache's capacity) */
    fkv_dtype kv_dtype;        /* FKV_F32 (default) or FKV_F16 */
    uint32_t page_tokens;      /* 16 */
    uint32_t chunk_tokens;     /* 32 */
    const char *policy;        /* "flru" */
    int prefix_cache;          /* 1 */
    int quotas;                /* FKV_QUOTA_REQUEST: the cache's quotas around the policy (fkv_config.quotas) */
    int share_guarantee;       /* 0: tenant shares are targets; 1: guarantees (fkv_config.share_guarantee) */
    int dynamic_chunking;      /* 0: fixed chunk_tokens; 1: the cache's dynamic chunk sizes */
    fkv_quant_mode quant_mode; /* off */
    fkv_dtype quant_dtype;     /* FKV_INT8 (or FKV_FP8, FKV_INT4) */
    uint32_t quant_hot_tokens; /* 128; when quantizing, no request appends more in a step (max_batch_tokens
                                * itself without chunked prefill; see engine_step.c) */
    uint32_t quant_warm_tokens; /* 0: no ladder; else fkv_config.quant_warm_tokens (int8, then int4) */
    fkv_sparse_mode sparsity;  /* dense */
    uint32_t sparsity_budget;  /* tokens kept per request in streaming / h2o mode (256) */
    fkv_sched_mode sched_mode; /* continuous */
    fkv_admit admission;       /* FCFS; VTC shares service among request.client ids */
    fkv_victim_rule victim;    /* preemption victim: the last started (vLLM) */
    fkv_step_share step_share; /* off; drr: tenants share each step's prefill budget (sched.h) */
    int admit_reclaim;         /* 0; 1: within-share tenants first, taking memory from over-share ones (sched.h) */
    double step_bound;         /* 0 = off; k: sched.h's step-time bound, a step's time predicted by step_cost */
    fkv_step_cost step_cost;   /* FKV_STEP_COST_FLOPS: the model's FLOPs (matrix products 2 x weights a
                                * token, attention 4 L H D a unit of work); _TOKENS: the step's tokens;
                                * _COEFFS: step_coeffs, fitted by `fairkv bench --calibrate`; _AUTO: fitted
                                * as the engine runs, over its own steps (engine.c) */
    double step_coeffs[4];     /* c0 + c1 x tokens + c2 x attention work + c3 x requests, ms (_COEFFS) */
    fkv_reclaim_action reclaim[FKV_N_RECLAIM]; /* fair reclaim before preemption (sched.h); none */
    uint32_t n_reclaim;
    uint64_t host_bytes;       /* 0: the cache's host tier for offloaded chunks (fkv_config.host_capacity_bytes) */
    int host_demote;           /* 0; 1: idle evicted chunks are demoted to that tier and matched from it
                                * (fkv_config.host_demote; needs host_bytes) */
    int tier_admission;        /* fkv_config.tier_admission (FKV_TIER_ADMIT_OFF): what goes below the device */
    int host_policy;           /* fkv_config.host_policy (FKV_HOST_LRU): the host tier's eviction order */
    uint32_t max_batch_tokens; /* 256: recomputed + new tokens per step */
    int chunked_prefill;       /* 1: a prompt may be split over steps (fkv_sched_config.chunked_prefill) */
    uint32_t max_running;      /* 16 */
    uint32_t n_threads;        /* 1: threads of the engine's one pool (forward pass and attention) */
    int ref_attention;         /* 1: scalar reference attention (dense, base-dtype chunks only) */
    /* NULL, or called on the stepping thread after each step with work,
     * outside the timed part (so a slow observer does not inflate wall_ns) */
    fkv_engine_step_fn on_step;
    void *step_ctx;
} fkv_engine_config;

void fkv_engine_config_default(fkv_engine_config *c);


/* K/V outside the cache (a remote tier), in whole pages of the cache's
 * page_tokens tokens.  A page's bytes (fkv_engine_page_bytes): for each
 * layer, K then V, each [page_tokens][n_kv_heads][head_dim] of kv_dtype,
 * K already rotated, exactly the bytes the cache's pages hold, so a page
 * exported by one engine and imported by another of the same model and
 * kv_dtype gives the same logits bit for bit. */
typedef struct fkv_engine fkv_engine;
size_t fkv_engine_page_bytes(const fkv_engine *e);
uint32_t fkv_engine_page_tokens(const fkv_engine *e);

/* A finished request's pages, handed to fkv_engine_request.on_export. */
typedef struct fkv_engine_export {
    const int32_t *tokens; /* [n_pages * page_tokens]: the sequence's tokens */
    uint32_t page_tokens, n_pages;
    size_t page_bytes;
    const uint8_t *kv;     /* [n_pages][page_bytes]; page i's bytes are meaningful only where ok[i] */
    const uint8_t *ok;     /* [n_pages]: 1 = its K/V are full precision and computed */
} fkv_engine_export;
/* On the stepping thread, inside the step that ends the request, before
 * its sequence is freed; x and its arrays are valid during the call. */
typedef void (*fkv_engine_export_fn)(void *ctx, uint64_t id, const fkv_engine_export *x);

/* What a generated token means for its request, as the scheduler's batch
 * item says it (fkv_batch_item.finishes) once the token is emitted: the
 * caller reads these and derives nothing. */
enum {
    FKV_ENGINE_TOKEN_STOP = 1 << 0, /* one of the request's stop_tokens: the request ends on it */
    FKV_ENGINE_TOKEN_LAST = 1 << 1  /* the request's last token (a stop token, or its max_tokens-th) */
};

/* Called on the stepping thread for each generated token: logits[n_vocab]
 * (valid during the call) are the ones the token was sampled from; flags
 * are FKV_ENGINE_TOKEN_*. */
typedef void (*fkv_engine_token_fn)(void *ctx, uint64_t id, uint32_t sample, int32_t token, const float *logits,
                                    uint32_t n_vocab, unsigned flags);
/* Once per sample, at its end: FKV_OK, or FKV_EFULL when it was rejected
 * (larger than the whole cache). */
typedef void (*fkv_engine_done_fn)(void *ctx, uint64_t id, uint32_t sample, fkv_status st, uint32_t n_generated);

#define FKV_ENGINE_MAX_STOP 4 /* stop tokens a request may name */

typedef struct fkv_engine_request {
    const int32_t *prompt; /* [n_prompt] token ids (copied) */
    uint32_t n_prompt;     /* >= 1 */
    uint32_t max_tokens;   /* >= 1 */
    float temperature;     /* 0: greedy */
    float top_p;           /* (0, 1] */
    uint64_t seed;         /* sample i uses seed + i */
    uint32_t n;            /* parallel samples, >= 1 */
    uint64_t client;       /* fairness client (< 64) */
    uint64_t tenant;       /* the cache's tenant (fkv_seq_params.tenant): shares and prefix namespace */
    uint64_t cache_salt;   /* fkv_seq_params.cache_salt: 0 = none */
    /* generation ends after any of these tokens (a tokenizer's
     * end-of-generation set: end of sequence, end of turn); copied */
    int32_t stop_tokens[FKV_ENGINE_MAX_STOP];
    uint32_t n_stop_tokens; /* 0: none (zero-initialized requests stop only at max_tokens) */
    /* NULL, or [max_tokens] tokens appended instead of the sampled ones
     * (teacher forcing: evaluations compare the logits of two
     * configurations over the same context; callbacks still get the
     * sampled token).  Copied. */
    const int32_t *forced;
    fkv_engine_token_fn on_token;
    fkv_engine_done_fn on_done;
    void *ctx;
    /* NULL, or written before sample 0's on_done: its prompt tokens found in
     * the prefix cache at its first admission.  Must stay valid until then. */
    uint32_t *prefix_hit_out;
    /* NULL, or the K/V of the prompt's first import_tokens tokens (whole
     * pages, the layout of fkv_engine_page_bytes; copied).  When the
     * request's sequence opens, the tokens past the cache's own match up to
     * import_tokens (and before the prompt's last token, which is always
     * computed) are appended with these bytes instead of being computed;
     * they count in prefix_hit_out.  Sample 0 only. */
    const uint8_t *import_kv;
    uint32_t import_tokens;
    /* NULL, or called once when sample 0 ends normally with the full pages
     * of its sequence up to its last computed token; pages wholly below
     * export_from are left out (ok = 0: the caller knows where they are). */
    fkv_engine_export_fn on_export;
    uint32_t export_from;
} fkv_engine_request;

typedef struct fkv_engine_stats {
    uint64_t steps;
    uint64_t timed_steps;       /* steps with a non-empty batch: those step_ns covers */
    uint64_t step_ns;           /* wall time inside fkv_engine_step, those steps */
    uint64_t batch_tokens;      /* sum of the steps' budgets: new + recomputed tokens */
    double attn_work;           /* sum over steps and items of n_new x (ctx + (n_new + 1) / 2)
                                 * + n_restored x ctx / 2: the cost profile's attention term */
    uint64_t prefill_tokens;    /* prompt tokens computed (first time) */
    uint64_t decode_tokens;     /* single-token decode entries */
    uint64_t recomputed_tokens; /* K/V computed again (restored chunks) */
    uint64_t generated_tokens;
    uint64_t decode_batches;    /* batched decode kernel calls (per layer) */
    uint64_t max_decode_batch;  /* most sequences in one decode call */
    uint64_t quant_chunk_reads; /* quantized chunks met in attention tables */
    uint64_t dropped_tokens;    /* tokens dropped by the sparsity mode */
    uint32_t peak_pages_used;   /* most cache pages in use after a step */
    uint64_t forks;             /* samples forked from their request's sequence */
    uint64_t imported_tokens;   /* prompt tokens appended with imported K/V (fkv_engine_request.import_kv) */
    uint64_t exported_pages;    /* pages handed to on_export with ok = 1 */
    uint64_t exported_decoded_pages; /* of them, pages of quantized chunks decoded to the base precision */
    uint64_t preemptions, rejections;
    fkv_counters cache;         /* the cache's counters */
} fkv_engine_stats;


/* m must outlive the engine.  err names the bad field. */
fkv_status fkv_engine_create(const fkv_llama *m, const fkv_engine_config *cfg, fkv_engine **out, char *err,
                             size_t errlen);
void fkv_engine_destroy(fkv_engine *e); /* pending requests end without callbacks */

/* Thread-safe.  Queues the request; *id (may be NULL) gets its id. */
fkv_status fkv_engine_submit(fkv_engine *e, const fkv_engine_request *req, uint64_t *id);

/* Thread-safe.  Ends request `id` early: from the next step on, each of its
 * samples generates at most one more token (a sample still in its prompt
 * finishes the prompt first: the scheduler cannot drop a request), then
 * ends with FKV_OK as usual.  An unknown or finished id is ignored. */
fkv_status fkv_engine_cancel(fkv_engine *e, uint64_t id);

/* Runs one step.  *busy (may be NULL) gets 0 when there was nothing to do. */
fkv_status fkv_engine_step(fkv_engine *e, int *busy);
/* Steps until every submitted request has ended. */
fkv_status fkv_engine_run_until_idle(fkv_engine *e);

fkv_status fkv_engine_stats_get(fkv_engine *e, fkv_engine_stats *out);
fkv_cache *fkv_engine_cache(fkv_engine *e);
const char *fkv_engine_last_error(const fkv_engine *e);

#endif
