/* Deterministic discrete-event serving simulator over libfairkv.
 *
 * One run = one workload x one scheme.  The loop: admit arrivals up to the
 * virtual clock; ask the scheduler (src/sched) for a step, which does the
 * real cache calls on a phantom-storage cache whose clock is the virtual
 * clock; price the step with the cost profile; advance the clock; report the
 * step's end to the scheduler.  Idle periods jump to the next arrival.
 * Nothing reads the wall clock or a global RNG, so the same inputs give the
 * same bytes out.
 */
#ifndef FKV_SIM_SIM_H
#define FKV_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fairkv.h"
#include "sched/sched.h"
#include "sim/profile.h"
#include "sim/result_fields.h"
#include "sim/workload.h"

/* How a scheme runs besides its cache's configuration: one of these. */
typedef enum fkv_scheme_mode {
    FKV_SCHEME_CACHED = 0,   /* the cache at the run's capacity under the run's admission */
    FKV_SCHEME_VTC = 1,      /* the same with VTC admission (fair scheduling alone), whatever the config says */
    FKV_SCHEME_UNLIMITED = 2, /* a cache that holds every token (oracle-memory): the memory limit's latency */
    FKV_SCHEME_ISOLATED = 3  /* each tenant's requests run alone, the others absent (fkv_sim_run) */
} fkv_scheme_mode;

/* A scheme = a cache configuration + the scheduler's preemption behaviour
 * + a mode.  The whole list lives in schemes.c, one designated initialiser
 * each (a field left out is 0). */
typedef struct fkv_scheme {
    const char *name;
    const char *policy;       /* fkv_config.policy */
    int quotas;               /* fkv_quota_mode */
    int dynamic_chunking;
    uint32_t chunk_tokens;
    uint32_t page_tokens;
    int prefix_cache;
    fkv_victim_rule victim;
    fkv_preempt_mode on_preempt;
    const char *reclaim;      /* fair reclaim before preemption (fkv_sched_parse_reclaim); NULL = none */
    /* vLLM v1's behaviours (docs/EVALUATION.md, section 3, names the code of each) */
    int free_tail_first;      /* fkv_config.free_tail_first: a freed request's tail is evicted first */
    int no_admit_after_preempt; /* fkv_sched_config.no_admit_after_preempt */
    int gpu_batch_defaults;   /* max_batch_tokens / max_running from the profile's GPU, unless set */
    int kv_fp8;               /* 1: one byte per K/V element: twice the tokens in the same bytes */
    fkv_step_share step_share; /* the scheduler's step share unless --step-share names one */
    int share_guarantee;      /* 1: tenant shares as guarantees (fkv_config.share_guarantee) */
    int admit_reclaim;        /* 1: within-share tenants first (fkv_sched_config.admit_reclaim) */
    double step_bound;        /* k > 0: the step-time bound (fkv_sched_config.step_bound); 0 = off */
    fkv_host_policy host_policy; /* the host tier's and remote store's eviction order */
    int step_fraction;        /* 1: the per-tenant step fraction at 1/n for n tenants
                               * (fkv_sched_config.tenant_step_share), with two tenants or more */
    fkv_quant_mode quant;     /* cold-chunk quantization (fkv_config.quant_mode) */
    fkv_dtype quant_dtype;    /* the cold chunks' precision; 0 = FKV_INT8 (fkv_sim_quant_dtype) */
    uint32_t quant_hot;       /* tokens kept full precision at a sequence's end; 0 = 128 (fkv_sim_quant_hot) */
    fkv_scheme_mode mode;
    const char *what;         /* one line for --help and the docs */
} fkv_scheme;

/* Tenants of a simulation: ids 1..n_tenants (0 = none: every request is
 * the anonymous tenant, as before tenants existed). */
#define FKV_SIM_MAX_TENANTS 16

const fkv_scheme *fkv_scheme_list(size_t *n);
const fkv_scheme *fkv_scheme_find(const char *name);
/* 1 if the linked library registers the scheme's policy. */
int fkv_scheme_available(const fkv_scheme *s);

typedef struct fkv_sim_config {
    fkv_sched_config sched;
    uint32_t block_tokens;    /* tokens named by one block id of a trace (512, Mooncake's) */
    const fkv_profile *profile;
    uint64_t capacity_tokens; /* KV capacity in tokens; 0 = no cache (unlimited) */
    double alpha, beta;       /* F-LRU weights; < 0 = library default */
    double temperature;       /* < 0 = library default */
    int64_t min_retention_ns; /* < 0 = library default */
    int quant;                /* -1: the scheme's cold-chunk quantization; else fkv_quant_mode
                               * for every scheme (fkv_sim_quant_mode) */
    int quant_dtype;          /* -1: the scheme's cold-chunk precision; else fkv_dtype for every scheme
                               * (fkv_sim_quant_dtype) */
    int quant_hot;            /* -1: the scheme's hot window; else the tokens kept full precision at a
                               * sequence's end for every scheme (fkv_sim_quant_hot) */
    uint32_t quant_warm;      /* the ladder: int8 tokens after the hot ones before int4 (0: no ladder) */
    int price_kv_bytes;       /* 1: attention's memory time by the bytes each item's K/V take at their
                               * stored precisions (fp8 rows: half), codes and scales; 0: all fp16 */
    int progress;             /* 1: progress lines on stderr */
    uint32_t n_tenants;       /* 0: no tenants; requests carry fkv_req.tenant in 1..n_tenants */
    double tenant_weight[FKV_SIM_MAX_TENANTS]; /* [n_tenants]: fkv_cache_set_tenant_weight (1) */
    int quotas;               /* -1: the scheme's; else fkv_quota_mode for every scheme */
    int share_guarantee;      /* -1: the scheme's; 1: tenant shares are guarantees
                               * (fkv_config.share_guarantee) in every scheme whose quotas are
                               * per tenant; 0: targets in every scheme */
    /* The scheduler's tenant mechanisms, each -1 for the scheme's own
     * setting (fkv_scheme), else the value for every scheme; they replace
     * the same fields of `sched`, which the simulator does not read: */
    int step_share;           /* fkv_step_share (--step-share) */
    int admit_reclaim;        /* 0 or 1: within-share tenants first (--admit-reclaim, --no-admit-reclaim) */
    double step_bound;        /* k >= 0, 0 = off: the step-time bound (--step-bound) */
    double tenant_step_share; /* (0, 1]: the per-tenant step fraction, 1 = off (--tenant-step-share) */
    int victim;               /* -1: the scheme's; else fkv_victim_rule for every scheme */
    int reclaim_set;          /* 1: sched.reclaim / n_reclaim replace every scheme's list */
    uint64_t host_capacity_bytes; /* fkv_config's host tier (reclaim action offload); 0 = none */
    int host_demote;              /* fkv_config.host_demote: idle chunks evicted go to the host tier */
    double host_x;                /* > 0: the host tier holds host_x x the device KV bytes (replaces
                                   * host_capacity_bytes; follows the capacity in every run) */
    /* The remote tier (src/sim/remote_store.h): a shared store below the
     * host; 0 bytes = none.  A fetch at admission costs its chunks' bytes
     * over remote_bytes_per_s plus remote_latency_ns, added to the step's
     * time (not overlapped); write-back at request end is free. */
    uint64_t remote_capacity_bytes;
    double remote_bytes_per_s;
    int64_t remote_latency_ns;
    /* admission below the device (fkv_config.tier_admission): the host
     * tier's demotions and the remote store's write-back pass the same
     * kind of TinyLFU filter (src/core/admit.h); FKV_TIER_ADMIT_OFF = all */
    int tier_admission;
    /* the host tier's and the remote store's eviction order
     * (fkv_config.host_policy) for every scheme; -1: the scheme's */
    int host_policy;
    int batch_tokens_set, running_set; /* 1: sched.max_batch_tokens / max_running were given: they
                               * replace a scheme's GPU defaults (gpu_batch_defaults) */
    FILE *step_trace;         /* non-NULL: one line per step of a whole run (fkv_sim_run, not the
                               * isolated scheme's per-tenant runs), FKV_SIM_STEP_TRACE_HEADER's fields */
} fkv_sim_config;

/* `fairkv bench --step-trace FILE`: what each simulated step held, for
 * looking at why a request waited.  Text, one line per step; a step's
 * items follow its five fields, each as eight comma-separated fields. */
#define FKV_SIM_STEP_TRACE_HEADER                                                                              \
    "# fairkv step trace v1: scheme start_ns end_ns tokens items, then per item "                             \
    "tenant,kind,n_new,ctx,restored,request,arrival_ns,first (kind: P prompt, F refill, D decode, R restores " \
    "only; first: 1 when the item emits the request's first token)\n"

void fkv_sim_config_default(fkv_sim_config *c);

/* Defaults of the remote tier's network (docs/EVALUATION.md, "Tiers"):
 * one 100 Gb/s link, 12.5 GB/s; one round trip 0.5 ms.  Both assumptions. */
#define FKV_SIM_REMOTE_BYTES_PER_S 12.5e9
#define FKV_SIM_REMOTE_LATENCY_NS 500000

/* The time a step's remote fetches add (b->remote_tokens, remote_fetches):
 * their bytes over cfg->remote_bytes_per_s plus one remote_latency_ns each. */
int64_t fkv_sim_remote_ns(const fkv_sim_config *cfg, const fkv_batch *b);

/* vLLM's default max_num_batched_tokens / max_num_seqs on p's GPU
 * (gpu_batch_defaults; the rule and its source in sim.c). */
void fkv_vllm_batch_defaults(const fkv_profile *p, uint32_t *max_batch_tokens, uint32_t *max_running);

typedef struct fkv_sim_result {
    char scheme[32];
    size_t n;                 /* requests */
    int64_t *e2e_ns, *ttft_ns, *tpot_ns; /* [n]; -1 = not applicable / not done */
    uint8_t *cls;             /* [n] fkv_class */
    FKV_RESULT_FIELDS(FKV_RF_RESULT_FIELD) /* the figures: result_fields.h */
    uint32_t n_light;         /* the workload's: tenants 1..n_light are light (0: not named) */
    uint8_t *tenant;          /* [n] tenant id of each request (0..n_tenants) */
    struct fkv_sim_tenant {
        double weight, share_pages; /* share at the end of the run */
        uint64_t reclaimed_pages[FKV_N_RECLAIM_SLOTS]; /* fkv_tenant_info: by fkv_reclaim_action (5 = offload);
                                                         * [FKV_N_RECLAIM] (6) = idle chunks evicted */
        uint64_t preemptions, reclaims;
        uint64_t prompt_tokens, matched_tokens; /* of all its requests; matched at first admission */
        uint64_t offered_tokens; /* prompt + output of all its requests */
        /* the share window (report.h, share attainment): from the
         * workload's first arrival to its last (the whole workload's in the
         * isolated and partition runs too); the tokens served by the first
         * step start at or after its end (a request's prompt once its first
         * token is out -- its prefilled part while in prefill -- and its
         * emitted output tokens) */
        int64_t window_ns;
        uint64_t window_tokens;
    } tenants[FKV_SIM_MAX_TENANTS + 1]; /* [t] for tenant t; [0] = anonymous */
} fkv_sim_result;

/* The host tier's bytes for a device of device_bytes: host_x times it, or
 * host_capacity_bytes when host_x is not set. */
uint64_t fkv_sim_host_bytes(const fkv_sim_config *cfg, uint64_t device_bytes);

/* Runs w (not modified) under scheme sc (NULL = no cache even if capacity
 * is set).  err gets the reason on failure. */
fkv_status fkv_sim_run(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg,
                       fkv_sim_result *res, char *err, size_t errlen);
void fkv_sim_result_free(fkv_sim_result *r);

/* The isolation check's reference: each tenant's requests alone on a
 * static 1/n_tenants partition of cfg's capacity (never below the tenant's
 * largest request + 256 tokens, the capacity rule's floor) under sc, the
 * others absent.  Its per-tenant prefix hit rates are what a partitioned
 * cache gives; its latencies are not a partition's (each tenant also has
 * the whole compute), so reports use only the hit rates. */
fkv_status fkv_sim_partition(const fkv_workload *w, const fkv_scheme *sc, const fkv_sim_config *cfg,
                             fkv_sim_result *res, char *err, size_t errlen);

/* Saturation throughput in requests/s: every request arrives at 0,
 * unlimited memory.  The denominator of "load". */
fkv_status fkv_sim_capacity_rps(const fkv_workload *w, const fkv_sim_config *cfg, double *rps,
                                char *err, size_t errlen);
/* The same run: *rps as above and, when tok_s is not NULL, *tok_s the
 * prompt + output tokens of finished requests per second (the capacity
 * the tenants' fair shares divide, report.h). */
fkv_status fkv_sim_capacity(const fkv_workload *w, const fkv_sim_config *cfg, double *rps, double *tok_s,
                            char *err, size_t errlen);
/* Each request's end-to-end latency alone on an idle system with unlimited
 * memory, under cfg's scheduler (the denominator of its slowdown): w's
 * request i run by itself, arriving at 0, through the same loop and cost
 * profile, so one request on an idle system has a slowdown of exactly 1.
 * e2e[n] (ns). */
fkv_status fkv_sim_idle_latency(const fkv_workload *w, const fkv_sim_config *cfg, int64_t *e2e, char *err,
                                size_t errlen);

/* Peak live KV tokens with unlimited memory at w's arrivals (the memory
 * demand that the capacity rule takes a fraction of). */
/* Pure.  The cold-chunk quantization a run of scheme sc (NULL: none)
 * uses: cfg->quant when named, else the scheme's. */
fkv_quant_mode fkv_sim_quant_mode(const fkv_sim_config *cfg, const fkv_scheme *sc);
/* Pure.  The precision and hot window of its cold chunks: cfg's when
 * named, else the scheme's, else int8 behind 128 tokens (the library's
 * defaults). */
fkv_dtype fkv_sim_quant_dtype(const fkv_sim_config *cfg, const fkv_scheme *sc);
uint32_t fkv_sim_quant_hot(const fkv_sim_config *cfg, const fkv_scheme *sc);
/* Pure.  The same for the host tier's and remote store's eviction order. */
fkv_host_policy fkv_sim_host_policy(const fkv_sim_config *cfg, const fkv_scheme *sc);

fkv_status fkv_sim_peak_demand(const fkv_workload *w, const fkv_sim_config *cfg, uint64_t *tokens,
                               char *err, size_t errlen);

#endif
