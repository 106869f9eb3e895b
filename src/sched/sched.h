/* Iteration-level request scheduler over a fairkv cache.
 *
 * Shared by the serving simulator (src/sim) and the real engine: the
 * scheduler decides which requests run in the next engine step and how many
 * tokens each one processes, and does every cache operation that decision
 * implies (create, prefix match, touch, restore of evicted ranges, append,
 * preemption).  The caller executes the step (the simulator prices it with a
 * cost profile, the engine runs the model) and then reports its end time.
 *
 * Step rule (continuous batching, vLLM/Orca style): a running request stays
 * pinned from its admission to its end or preemption (every step reads its
 * whole context); running requests are served oldest first, each getting first the
 * tokens its evicted ranges need (recompute, or reload from a host tier),
 * then one decode token or a prefill chunk; then waiting requests are
 * admitted (FCFS or VTC) while the token budget, the running-request limit
 * and the cache allow.  The sum of recomputed and new tokens of a step never
 * exceeds max_batch_tokens (reloaded tokens cost transfer time, not compute
 * budget), with one exception: a chunk larger than the whole budget (dynamic
 * chunks under a small budget) is recomputed alone, in a step with nothing
 * else, since a chunk is never restored in parts.
 *
 * Preemption (cache full and nothing evictable): the victim is chosen among
 * running requests not yet served in this step, by the configured rule:
 *   FKV_VICTIM_LAST_STARTED  the most recently admitted one (vLLM's rule);
 *   FKV_VICTIM_FEWEST_OUTPUT fewest output tokens so far, then longest
 *                            prompt, then most recently admitted (SGLang's
 *                            retract order).
 * The victim is unpinned and either keeps its sequence (its chunks become
 * evictable; on resume the evicted ranges are recomputed) or frees it (its
 * chunks stay in the prefix cache; on resume it is matched again and the
 * rest is prefilled again).  Preempted requests go back to the front of the
 * waiting queue.
 *
 * An engine executing a step finds where each new token's K/V goes with
 * fkv_seq_chunks + fkv_chunks_locate for positions [ctx, ctx + n_new) of the
 * item, and recomputes (or reloads) exactly the ranges the item names as
 * restored: the scheduler restores whole chunks in position order and
 * records each one in the batch.  Restored pages hold no K/V until the
 * step runs, so two rules keep every restored range computed in the step
 * that restored it, by the item that restored it:
 *   - a request that restored chunks in a step is not preempted, rejected
 *     or sent back to the queue in that step: when it then finds no memory
 *     for the rest of its restores or for its new tokens, its item carries
 *     the restores alone and the rest waits for the next step (where it
 *     may be preempted with its restored K/V intact);
 *   - a request whose last chunk is shared with another sequence (a fork,
 *     or a matched partial chunk) and was restored in this step appends
 *     nothing in this step: its append would copy the shared partial page
 *     (copy-on-write) before that page's K/V exist.
 * A chunk restored by one holder is resident for all of them; the others
 * read it after the restoring item in batch order, which an engine that
 * writes each layer's K/V in batch order before later items read it
 * (src/engine) computes in time.
 *
 * Dynamic (windowed) batching: a batch is admitted only when nothing runs,
 * once the oldest waiting request has waited batch_window_ns or
 * max_running requests wait; the batch then runs to completion.
 */
#ifndef FKV_SCHED_H
#define FKV_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

typedef enum fkv_sched_mode { FKV_SCHED_CONTINUOUS = 0, FKV_SCHED_DYNAMIC = 1 } fkv_sched_mode;
typedef enum fkv_admit { FKV_ADMIT_FCFS = 0, FKV_ADMIT_VTC = 1 } fkv_admit;
typedef enum fkv_victim_rule { FKV_VICTIM_LAST_STARTED = 0, FKV_VICTIM_FEWEST_OUTPUT = 1 } fkv_victim_rule;
typedef enum fkv_preempt_mode { FKV_PREEMPT_KEEP = 0, FKV_PREEMPT_FREE = 1 } fkv_preempt_mode;
typedef enum fkv_miss_mode { FKV_MISS_RECOMPUTE = 0, FKV_MISS_RELOAD = 1 } fkv_miss_mode;

typedef struct fkv_sched_config {
    fkv_sched_mode mode;
    uint32_t max_batch_tokens; /* 2048: recomputed + new tokens per step */
    uint32_t max_running;      /* 256: requests in the running set */
    int chunked_prefill;       /* 1: a prompt may be split over steps */
    int64_t batch_window_ns;   /* dynamic mode: 50 ms */
    fkv_admit admission;
    double vtc_in_weight, vtc_out_weight; /* VTC cost: 1 x input + 2 x output */
    uint32_t n_clients;        /* VTC counters: client ids < n_clients */
    fkv_victim_rule victim;
    fkv_preempt_mode on_preempt;
    fkv_miss_mode miss;
    int pass_tokens;           /* 1: synthesize token ids (prefix index keys) */
    uint32_t block_tokens;     /* tokens named by one block id (512) */
} fkv_sched_config;

void fkv_sched_config_default(fkv_sched_config *c);

typedef enum fkv_req_state {
    FKV_REQ_PENDING = 0, /* not yet arrived */
    FKV_REQ_WAITING,
    FKV_REQ_RUNNING,
    FKV_REQ_DONE,
    FKV_REQ_REJECTED     /* larger than the whole cache */
} fkv_req_state;

/* One request.  The caller fills the first block; the scheduler owns the rest. */
typedef struct fkv_req {
    uint64_t id;              /* nonzero, unique */
    uint64_t client;          /* < n_clients for VTC */
    int64_t arrival_ns;
    uint32_t prompt, output;  /* tokens; output >= 1 */
    const uint64_t *block_ids; /* prefix blocks (block_tokens each), may be NULL */
    uint32_t n_block_ids;
    uint64_t token_seed;      /* token ids of positions not named by a block */
    uint32_t shared_tokens;   /* leading prompt tokens common to every request of the
                               * same shared_seed (a per-client system prompt); 0 = none */
    uint64_t shared_seed;     /* token ids of positions < shared_tokens */
    const int32_t *tokens;    /* real token ids [prompt + output] (an engine), or NULL:
                               * ids are then synthesized (fkv_req_token); position p
                               * must be known before the step that appends it */

    fkv_req_state state;
    fkv_seq *seq;             /* NULL when not started or freed by preemption */
    uint32_t target;          /* tokens to prefill before the next emission */
    uint32_t computed;        /* tokens appended to seq (its length) */
    uint32_t generated;       /* output tokens emitted */
    uint32_t redo_until;      /* positions below this were computed before a freeing preemption */
    int64_t first_token_ns, finish_ns;
    uint64_t admit_order;     /* last admission, for the victim rules */
    uint64_t preempt_order;   /* last preemption (0 = never) */
    uint32_t preemptions;
    uint64_t recomputed;      /* tokens computed again after eviction/preemption */
    uint64_t reloaded;        /* tokens reloaded from the host tier */
    uint64_t matched;         /* prompt tokens found in the prefix cache */
    int served;               /* in the current step */
} fkv_req;

/* One request's share of a step. */
typedef struct fkv_batch_item {
    fkv_req *r;
    uint32_t ctx;        /* tokens already in the sequence before this step's work, after restores */
    uint32_t n_restored; /* evicted tokens recomputed or reloaded this step */
    uint32_t n_new;      /* prefill chunk or 1 decode token */
    int prefill;         /* n_new are prefill tokens */
    /* the positions restored: fkv_batch.ranges[range0 .. range0 + n_ranges),
     * ascending, disjoint, below ctx; their lengths sum to n_restored */
    uint32_t range0, n_ranges;
} fkv_batch_item;

typedef struct fkv_batch {
    fkv_batch_item *items;
    size_t n, cap;
    uint32_t tokens;        /* sum of new + recomputed tokens (the budget) */
    uint64_t reload_tokens; /* host-tier reloads (not in the budget) */
    uint32_t preempted;     /* preemptions while forming the step */
    int64_t wake_ns;        /* empty batch in dynamic mode: retry at this time */
    fkv_range *ranges;      /* restored ranges of all items (see fkv_batch_item) */
    size_t n_ranges, cap_ranges;
} fkv_batch;

typedef struct fkv_sched fkv_sched;

/* cache may be NULL: unlimited memory, no cache calls (capacity probes). */
fkv_status fkv_sched_create(const fkv_sched_config *cfg, fkv_cache *cache, fkv_sched **out);
void fkv_sched_destroy(fkv_sched *s); /* frees open sequences it created */

/* The request arrived (state PENDING -> WAITING).  r must outlive s. */
fkv_status fkv_sched_add(fkv_sched *s, fkv_req *r);

/* As fkv_sched_add, for a request that starts from a sequence of the
 * caller's (an engine's forked sample): r then holds seq, computed =
 * target = its length, and its tokens count in fkv_sched_live_tokens; the
 * token at that position (r->tokens) must be known: it is the first one
 * appended.  On error seq stays the caller's. */
fkv_status fkv_sched_add_seq(fkv_sched *s, fkv_req *r, fkv_seq *seq);

/* Forms the next step at time now (cache clock must read now).  An empty
 * batch with wake_ns > 0 means: nothing to do before wake_ns. */
fkv_status fkv_sched_step(fkv_sched *s, int64_t now, fkv_batch *b);

/* The step ended at end_ns: emits tokens, finishes requests, unpins. */
fkv_status fkv_sched_finish(fkv_sched *s, fkv_batch *b, int64_t end_ns);

size_t fkv_sched_n_waiting(const fkv_sched *s);
size_t fkv_sched_n_running(const fkv_sched *s);
uint64_t fkv_sched_preemptions(const fkv_sched *s);
uint64_t fkv_sched_rejections(const fkv_sched *s);
/* Requests done or rejected so far. */
uint64_t fkv_sched_finished(const fkv_sched *s);
/* Sum of sequence lengths of running and waiting requests that hold a
 * sequence (tokens of live KV), maintained incrementally. */
uint64_t fkv_sched_live_tokens(const fkv_sched *s);
const char *fkv_sched_last_error(const fkv_sched *s);

void fkv_batch_free(fkv_batch *b);

/* Token id of position pos of r (a pure function of the request):
 * positions < shared_tokens from (shared_seed, pos), so requests with the
 * same shared_seed agree there and the cache's page hash chain shares
 * exactly the full pages inside the common prefix; then positions named by
 * a block from (block id, offset); the rest from (token_seed, pos). */
int32_t fkv_req_token(const fkv_req *r, uint32_t pos, uint32_t block_tokens);

#endif
