/* Internals shared by engine.c (steps, requests) and engine_kv.c (the K/V
 * callbacks of the forward pass over the cache). */
#ifndef FKV_ENGINE_INTERNAL_H
#define FKV_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "engine/engine.h"
#include "model/sampler.h"
#include "util/array.h"

typedef struct eng_req {
    fkv_req r;              /* the scheduler's view; r.tokens = tokens */
    int32_t *tokens;        /* [n_prompt + max_tokens]: prompt, then sampled tokens */
    uint32_t n_prompt, max_tokens;
    uint64_t id;            /* the submit's id */
    uint32_t sample;        /* index among the submit's n samples */
    int32_t stop_tokens[FKV_ENGINE_MAX_STOP]; /* fkv_engine_request.stop_tokens */
    uint32_t n_stop_tokens;
    int32_t *forced;        /* [max_tokens] teacher-forced tokens, or NULL */
    fkv_sampler smp;
    fkv_engine_token_fn on_token;
    fkv_engine_done_fn on_done;
    void *ctx;
    uint32_t *prefix_hit_out; /* sample 0: fkv_engine_request.prefix_hit_out */
    uint8_t *import_kv;     /* sample 0: a copy of fkv_engine_request.import_kv, freed once used */
    uint32_t import_tokens;
    fkv_engine_export_fn on_export; /* sample 0 */
    uint32_t export_from;
    float *mass;            /* [mass_cap] H2O attention mass per chunk index */
    size_t mass_cap;
    /* parallel samples: sample 0 runs the prompt; the others wait here and
     * are forked from its sequence when its prefill ends */
    struct eng_req **kids;
    uint32_t n_kids;
    uint32_t gen_offset;    /* tokens generated before joining the scheduler (a fork's first) */
} eng_req;

/* One entry of the forward batch: a contiguous run of positions of one
 * request (a recomputed range, a prefill chunk, a decode token). */
typedef struct eng_entry {
    eng_req *q;
    const fkv_chunk_view *const *chunks; /* the request's table after the step's cache calls */
    size_t n_chunks;                     /* chunks with start < end of this entry */
    uint8_t *keep;                       /* [n_chunks]: resident (dropped / evicted: 0) */
    fkv_slot *slots;                     /* [n_tokens] */
    uint32_t start, n_tokens;
    int decode;                          /* one token at the table's end: batched decode kernel */
    uint32_t index;                      /* in the batch */
    int lg;                              /* row of engine->logits for the sampled token, -1: none */
    size_t item;                         /* its batch item (fkv_sched_emit) */
    int owns_keep;
} eng_entry;

/* A batch's attention work as the calibration measures it (calibrate.c):
 * n_new x (ctx + (n_new + 1) / 2) + n_restored x ctx / 2 per item. */
static inline double fkv__attn_work(const fkv_batch *b)
{
    double w = 0;
    for (size_t i = 0; i < b->n; i++) {
        const fkv_batch_item *it = &b->items[i];
        w += (double)it->n_new * ((double)it->ctx + (it->n_new + 1) / 2.0) + (double)it->n_restored * it->ctx / 2.0;
    }
    return w;
}

int64_t fkv__engine_step_cost(void *ctx, const fkv_batch *b); /* step_bound's hook (engine.c) */
/* FKV_STEP_COST_AUTO: one timed step into the running fit (engine.c) */
void fkv__engine_fit_step(fkv_engine *e, double tokens, double attn, int64_t wall_ns);

/* The running fit of step ms = c0 + c1 x tokens + c2 x attention work
 * over the engine's own timed steps (FKV_STEP_COST_AUTO). */
typedef struct eng_fit {
    double s[3][3], y[3]; /* weighted normal equations, decayed each step */
    uint64_t n;           /* steps seen */
    double c[3];          /* the last accepted coefficients */
    int ok;               /* c is in use */
} eng_fit;

struct fkv_engine {
    const fkv_llama *m;
    fkv_engine_config cfg;
    fkv_cache *cache;
    fkv_sched *sched;
    fkv_fwd *fwd;
    fkv_attn_pool *apool;
    fkv_kv_geom geom;  /* the cache's storage as the kernels read it */
    void **kbase, **vbase; /* [n_layers] */
    int64_t now;       /* virtual clock (ns): 1 ms per step, deterministic eviction */
    eng_fit fit;       /* step_cost auto */
    uint64_t next_id, next_rid;

    pthread_mutex_t mu; /* guards inbox */
    eng_req **inbox;
    size_t n_inbox, cap_inbox;
    uint64_t *cancels;  /* ids cancelled since the last step (under mu) */
    size_t n_cancels, cap_cancels;
    eng_req **live;
    size_t n_live, cap_live;

    fkv_batch batch;
    eng_entry *ent;
    fkv_fwd_seq *fs; /* [cap_fs] the forward batch, one per entry */
    size_t n_ent, cap_ent, cap_fs;
    float *logits; /* [cap_logits][n_vocab] */
    size_t cap_logits;
    /* deferred decode attention of the current layer */
    float *dq, *dout;
    fkv_attn_seq *dseq;
    float **dout_ptr;
    size_t n_dec, cap_dseq, cap_dptr, cap_dq, cap_dout;

    fkv_engine_stats st;
    /* this step's K/V bytes read by attention, by stored precision
     * (fkv_engine_step_info.kv_read) */
    double step_kv[3];
    char err[320];
};

extern const fkv_kv_ops fkv__engine_kv_ops; /* ctx: fkv_engine* */
/* engine_io.c: the scheduler's import hook (ctx: fkv_engine*) and the export
 * of a finishing request's pages */
/* fkv_sched_config.below: a request's imported pages, appended with their K/V. */
uint32_t fkv__engine_import(void *ctx, fkv_req *r, uint32_t limit, uint64_t *fetched, int *appended);
void fkv__engine_export(fkv_engine *e, eng_req *q);
/* fkv_sched_config.on_finish: a request the step ends exports its pages. */
void fkv__engine_finished(void *ctx, fkv_req *r);
static inline eng_req *fkv__req_of(fkv_req *r) { return (eng_req *)(void *)((char *)r - offsetof(eng_req, r)); }
void fkv__eng_req_free(eng_req *q);

#endif
