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
 * and the cache allow (none in a step that preempted, with
 * no_admit_after_preempt: below).  The sum of recomputed and new tokens of a step never
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
 *   FKV_VICTIM_FAIR          the request of the tenant most over its fair
 *                            share (fkv_tenant_info: pages - share_pages),
 *                            the most recently admitted one within it.
 * Starvation bound of the fair rule: a request that the fair rule has
 * chosen fair_max_victim times for something that costs it progress (a
 * preemption, or a reclaim by evict or offload that freed pages: its
 * chunks must be recomputed or reloaded) is exempt from it; quantize and
 * drop, which cost it precision but no time, do not count; when every candidate is exempt, the
 * victim is the last-started one.  So no request is chosen by the fair
 * rule more than fair_max_victim times in its life, and beyond that it is
 * treated as under vLLM's rule, where the oldest running request is never
 * chosen while others are candidates: it always progresses, so every
 * request finishes (tests/test_sched_fair.c, "starvation").
 *
 * Fair reclaim (reclaim[0 .. n_reclaim), empty by default): when an
 * allocation fails where the scheduler would preempt, each action in order
 * is tried on the fair victim (the rule above, among candidates other than
 * the requester; but when the requester's own tenant is further over its
 * share than the victim's, or there is no other candidate, the requester
 * pays for itself with the actions that leave its K/V readable in the
 * step, quantize and drop): fkv_seq_reclaim(victim, action, pages still needed); the
 * allocation is retried after every action that freed pages, from the
 * first action again.  Only when every action freed nothing is a victim
 * preempted (with fkv_seq_reclaim(victim, FKV_RECLAIM_PREEMPT) just before,
 * which counts its pages for its tenant).  The victim is not yet served in
 * this step, so nothing reads it while it is reclaimed, and the chunks an
 * EVICT made missing are restored (recomputed) by its own item when it is
 * served later in the step, or in the next step, by the restore path
 * below.  OFFLOAD (the cache needs host_capacity_bytes) moves the chunks'
 * K/V to the host tier; the victim's next service copies them back with
 * fkv_seq_reload (counted in fkv_batch.host_tokens, no recompute, named in
 * no item's ranges since their K/V are there when the step runs).  DROP
 * (sink reclaim_sink_tokens, window reclaim_window_tokens)
 * removes K/V for good: it only suits an engine whose attention already
 * reads a sink and a window (a sparsity mode); a dense engine loses
 * accuracy.
 *
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
 * Tenants (fkv_req.tenant, 0 = anonymous) are passed to the cache
 * (fkv_seq_params.tenant), which charges pages and computes fair shares by
 * them.  A request's shared_tokens (the simulator's per-client system
 * prompt) are published to every tenant (shared_prefix_tokens) when
 * publish_shared is set: a system prompt is public; otherwise they are
 * matched within the tenant only.
 *
 * Tenant step share (tenant_step_share < 1, Sarathi-Serve's bounded
 * prefill chunks applied per tenant): while requests of at least two
 * tenants have prefill left (waiting, or running below their target) at
 * the start of a step, no tenant's new prefill tokens in that step exceed
 * tenant_step_share x max_batch_tokens (at least 1); decode tokens and
 * restores are not limited, and admission skips a waiting request whose
 * tenant has used its share.  Applied with chunked prefill only (a whole
 * prompt cannot be bounded).
 *
 * Step share by weighted deficit round robin (step_share FKV_STEP_DRR,
 * continuous mode with chunked prefill; otherwise it has no effect).
 * Plan: the step's budget less a token per decoding request is divided
 * among the tenants with prefill work (running requests below their
 * target, waiting requests) in rounds: each round a tenant's deficit grows
 * by its weight x (budget left / the active tenants' total weight) and it
 * is allotted floor(deficit) tokens, at most its demand (the prefill its
 * requests still need; for a waiting request an upper bound, since its
 * prefix hits are known only at its match), which leave its deficit; a
 * tenant whose demand is met leaves the rounds with a deficit of 0.  The
 * rounds start one tenant later every step.
 * Serve: the oldest running request first, as in the plain order (so no
 * later one takes its memory and every request ends), within its tenant's
 * allotment but never less than its tenant's weighted part of the step
 * and a token; then the decoding requests and their restores; then, in the
 * rounds' order, every tenant's running prefills (in admission order)
 * within its allotment; then every tenant's waiting requests (in queue
 * order) within what is left of its allotment, plus what the tenants
 * before it left unused, shared by weight among those after.  An admission
 * under the share must fit: the pages the running requests hold, plus
 * those their prefills still need, plus the newcomer's prompt, at most the
 * pool (idle cached pages count as free; with nothing running, always), so
 * tenants do not all start prompts at once and push each other out.  A
 * budget still left goes to whatever is unserved, as without the share
 * (its admissions pass the same test).
 * Settle: a tenant is charged the tokens it took beyond its allotment and
 * the tokens it recomputed in restores; an allotment left unused is not
 * credited (prefix hits, memory or max_running stopped it); the debt is
 * bounded by one step's budget, and a tenant with no prefill work left
 * keeps no credit.  A tenant alone gets the whole budget.  Weights are the
 * cache's tenant weights (fkv_cache_set_tenant_weight) as they were when
 * the scheduler first saw the tenant; 1 without a cache.
 *
 * VTC (admission FKV_ADMIT_VTC): a client's counter grows by vtc_in_weight
 * per prefilled prompt token and vtc_out_weight per output token, and, with
 * vtc_mem_weight > 0 (Justitia's memory-centric cost: KV memory x time), at
 * every fkv_sched_finish by vtc_mem_weight x (KV tokens the request holds:
 * its charged pages x page tokens with a cache, else its length) x (the
 * step's duration in seconds) for every running request.  Units: counter
 * units are weighted tokens, so vtc_mem_weight is counter units per
 * token-second of KV held.
 *
 * No admission after a preemption (no_admit_after_preempt, vLLM v1's
 * vllm/v1/core/sched/scheduler.py, schedule: "if not preempted_reqs"):
 * a step whose running requests preempted one (or more) admits no waiting
 * request, so memory freed by a preemption goes to the running requests
 * first; except when the step holds no item at all (everything left was
 * preempted or rejected), where admission goes on so the step does work.
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
typedef enum fkv_victim_rule {
    FKV_VICTIM_LAST_STARTED = 0,
    FKV_VICTIM_FEWEST_OUTPUT = 1,
    FKV_VICTIM_FAIR = 2
} fkv_victim_rule;
typedef enum fkv_preempt_mode { FKV_PREEMPT_KEEP = 0, FKV_PREEMPT_FREE = 1 } fkv_preempt_mode;
typedef enum fkv_miss_mode { FKV_MISS_RECOMPUTE = 0, FKV_MISS_RELOAD = 1 } fkv_miss_mode;
typedef enum fkv_step_share { FKV_STEP_SHARE_OFF = 0, FKV_STEP_DRR = 1 } fkv_step_share;

struct fkv_req; /* below */

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
    int publish_shared;        /* 1: shared_tokens are published to every tenant */
    uint32_t fair_max_victim;  /* 2: fair-rule choices after which a request is exempt */
    fkv_reclaim_action reclaim[FKV_N_RECLAIM]; /* tried in order before preempting */
    uint32_t n_reclaim;        /* 0: preempt at once (no PREEMPT entry: it is implied) */
    uint32_t reclaim_sink_tokens, reclaim_window_tokens; /* DROP: 4 and 1024 */
    double vtc_mem_weight;     /* 0: counter units per token-second of KV held */
    double tenant_step_share;  /* 1 = off; (0, 1]: one tenant's prefill share of a step */
    int no_admit_after_preempt; /* 0; 1: a step that preempted admits nothing (vLLM) */
    fkv_step_share step_share; /* OFF: running requests first, then admission; DRR: above */
    /* A tier below the cache (NULL = none): an engine's imported pages, the
     * simulator's remote store.  At a request's admission, after the
     * cache's match across device and host, with r->computed tokens in its
     * sequence, the tier provides k <= limit - r->computed tokens from
     * there and returns k.  Either it appends them itself, writing their
     * K/V, and sets *appended (the sequence must then hold computed + k
     * tokens; pages it leaves without K/V would be read as they are), or
     * the scheduler appends them as loaded: their K/V cross the network
     * while the step runs (no memory for them: not loaded, computed as
     * usual).  *fetched_tokens is what crosses the network (whole chunks):
     * fkv_batch.remote_tokens, and one of remote_fetches.  They count as
     * matched, not computed (fkv_req.matched_remote). */
    uint32_t (*below)(void *ctx, struct fkv_req *r, uint32_t limit, uint64_t *fetched_tokens, int *appended);
    void *below_ctx;
    /* Token ids of a request without r->tokens (the simulator's synthetic
     * ids, src/sim/req_tokens.h): positions [start, start + n) of r to out.
     * NULL: every request carries r->tokens (with pass_tokens). */
    void (*token_ids)(void *ctx, const struct fkv_req *r, uint32_t start, uint32_t n, uint32_t block_tokens,
                      int32_t *out);
    void *token_ctx;
    /* NULL, or called by fkv_sched_finish for each request the step ends,
     * before its sequence is released (an engine exports its pages). */
    void (*on_finish)(void *ctx, struct fkv_req *r);
    void *finish_ctx;
} fkv_sched_config;

void fkv_sched_config_default(fkv_sched_config *c);
/* "off" / "drr" <-> step_share; -1 if unknown. */
int fkv_step_share_parse(const char *name);
const char *fkv_step_share_name(fkv_step_share v);
/* "quantize8,quantize4,drop,evict" -> c->reclaim / n_reclaim ("" or "none"
 * = empty); -1 with why[] naming the bad entry. */
int fkv_sched_parse_reclaim(const char *list, fkv_reclaim_action *out, uint32_t *n, char *why, size_t whylen);
/* "last-started", "fewest-output", "fair" <-> rule; -1 if unknown. */
int fkv_victim_parse(const char *name);
const char *fkv_victim_name(fkv_victim_rule v);

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
    uint64_t tenant;          /* fkv_seq_params.tenant: 0 = anonymous */
    uint64_t cache_salt;      /* fkv_seq_params.cache_salt: 0 = none */
    int64_t arrival_ns;
    uint32_t prompt, output;  /* tokens; output >= 1 */
    /* the source of a simulated request's ids, read by the caller's
     * token_ids hook (src/sim/req_tokens.h) and, without pass_tokens, by
     * the cache's block mode (block_ids) */
    const uint64_t *block_ids; /* prefix blocks (block_tokens each), may be NULL */
    uint32_t n_block_ids;
    uint64_t token_seed;      /* token ids of positions not named by a block */
    uint32_t shared_tokens;   /* leading prompt tokens common to every request of the
                               * same shared_seed (a per-client system prompt); 0 = none */
    uint64_t shared_seed;     /* token ids of positions < shared_tokens */
    int32_t *tokens;          /* real token ids [prompt + output] (an engine), or NULL:
                               * ids then come from token_ids; position p
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
    uint32_t fair_picks;      /* times the fair rule chose it to preempt, evict or offload (<= fair_max_victim) */
    uint32_t reclaims;        /* reclaim actions that freed some of its pages */
    uint64_t recomputed;      /* tokens computed again after eviction/preemption */
    uint64_t reloaded;        /* tokens reloaded from the host tier */
    uint64_t matched;         /* prompt tokens found in the prefix cache (every tier) at first admission */
    uint64_t matched_host;    /* ... of them in the host tier */
    uint64_t matched_remote;  /* ... of them in the tier below (below) */
    int served;               /* in the current step */
} fkv_req;

/* What a step does for an item's request (fkv_batch_item.kind). */
typedef enum fkv_item_kind {
    FKV_ITEM_RESTORE = 0, /* only restores (n_new == 0): no token computed, none emitted */
    FKV_ITEM_PROMPT = 1,  /* n_new prompt tokens, before the request's first output token */
    FKV_ITEM_REFILL = 2,  /* n_new known tokens computed again after a freeing preemption */
    FKV_ITEM_DECODE = 3   /* one token after an emission (or a forked sequence's first) */
} fkv_item_kind;

/* One request's share of a step.  The scheduler decides every field; the
 * engine and the simulator read them and derive nothing again. */
typedef struct fkv_batch_item {
    fkv_req *r;
    uint32_t ctx;        /* tokens already in the sequence before this step's work, after restores */
    uint32_t n_restored; /* evicted tokens recomputed or reloaded this step */
    uint32_t n_new;      /* prefill chunk or 1 decode token */
    fkv_item_kind kind;
    int emits;           /* the step samples a token for r after position ctx + n_new - 1 */
    int first;           /* that token is r's first output token */
    int finishes;        /* that token ends r (its last output, or fkv_sched_emit's stop) */
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
    uint64_t host_tokens;   /* offloaded chunks copied back by fkv_seq_reload: in no item's ranges (their
                             * K/V are there), not in the budget; PCIe time */
    uint64_t remote_tokens; /* loaded from the tier below at admission (below): network time */
    uint32_t remote_fetches; /* requests that loaded from it: one round trip each */
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

/* Between fkv_sched_step and fkv_sched_finish, by the caller that runs
 * the step (an engine): item i of b (emits set) produced `token`, written
 * at its request's next position (r->tokens[ctx + n_new] when within
 * prompt + output); stop: the request ends with this token (a stop token,
 * a cancel), so the item finishes.  FKV_EINVAL for an item that does not
 * emit. */
fkv_status fkv_sched_emit(fkv_sched *s, fkv_batch *b, size_t i, int32_t token, int stop);

/* r ends with its next emission, whatever its output length (a cancel
 * between steps); no-op for a request already done. */
void fkv_sched_stop(fkv_sched *s, fkv_req *r);

/* The step ended at end_ns: emits tokens, finishes requests (calling
 * on_finish for each before its sequence is released), unpins. */
fkv_status fkv_sched_finish(fkv_sched *s, fkv_batch *b, int64_t end_ns);

/* VTC's service for an item, in counter units: vtc_in_weight per prompt
 * token (FKV_ITEM_PROMPT) and vtc_out_weight per emitted token.  The one
 * rule the scheduler's counters and the simulator's service accounting use. */
double fkv_sched_item_cost(const fkv_sched_config *c, const fkv_batch_item *it);

size_t fkv_sched_n_waiting(const fkv_sched *s);
size_t fkv_sched_n_running(const fkv_sched *s);
uint64_t fkv_sched_preemptions(const fkv_sched *s);
uint64_t fkv_sched_rejections(const fkv_sched *s);
/* Requests done or rejected so far. */
uint64_t fkv_sched_finished(const fkv_sched *s);
/* Sum of sequence lengths of running and waiting requests that hold a
 * sequence (tokens of live KV), maintained incrementally. */
uint64_t fkv_sched_live_tokens(const fkv_sched *s);
/* The step share's state of a tenant after the last step: its deficit and
 * the prefill tokens allotted to it in that step.  FKV_ENOENT for a tenant
 * the share has not seen. */
fkv_status fkv_sched_drr_info(const fkv_sched *s, uint64_t tenant, double *deficit, uint32_t *allotted);
const char *fkv_sched_last_error(const fkv_sched *s);

void fkv_batch_free(fkv_batch *b);

#endif
