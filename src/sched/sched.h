/* Iteration-level request scheduler over a fairkv cache, shared by the
 * simulator (src/sim) and the engine (src/engine).  fkv_sched_step decides
 * which requests run in the next step, how many tokens each processes, and
 * makes every cache call that implies; the batch items say what the step
 * does for each request (the step contract below); the caller executes the
 * step and reports its end with fkv_sched_finish.  Rules, binding for both
 * callers (docs/ARCHITECTURE.md has their reasons and sources):
 *
 * Step.  Running requests stay pinned from admission to end or preemption.
 *   They are served oldest first: first the tokens their evicted chunks
 *   need (recomputed, or reloaded from the host tier), whole chunks in
 *   position order, then one decode token or a prefill chunk; then waiting
 *   requests are admitted (FCFS, or VTC: the client with the smallest
 *   counter) while the budget, max_running and the cache allow.
 *   Recomputed + new tokens <= max_batch_tokens (reloads cost transfer
 *   time, not budget), except one chunk larger than the budget, recomputed
 *   alone in a step with nothing else.
 * Restored K/V.  A range restored in a step is computed in that step, by
 *   the item that restored it: a request that restored chunks is not
 *   preempted, rejected or requeued in that step (without memory for more,
 *   its item carries the restores alone), and a request whose shared last
 *   chunk was restored in the step appends nothing in it (its copy-on-write
 *   would copy a page before its K/V exist).  Another holder of a restored
 *   chunk reads it after the restoring item in batch order.
 * Preemption (no memory, nothing evictable): a running request not yet
 *   served in the step, by rule: LAST_STARTED (vLLM), FEWEST_OUTPUT (then
 *   longest prompt, then last started: SGLang), FAIR (the tenant most over
 *   its share, fkv_tenant_info pages - share_pages; its last started).  A
 *   request the fair rule chose fair_max_victim times for something that
 *   cost it progress (preemption; evict or offload that freed pages) is
 *   exempt from it; with every candidate exempt, the last started goes.
 *   So every request finishes.  The victim keeps its sequence (KEEP) or
 *   frees it (FREE: resumed by a match and a new prefill) and returns to
 *   the queue's front.  A request being admitted that finds no memory goes
 *   back to its place in the queue; one alone and still without memory is
 *   larger than the cache and is rejected.
 * Fair reclaim (reclaim[], empty by default): before preempting, each
 *   action in order on the fair victim among the others (or on the
 *   requester itself, by quantize or drop only, when its tenant is further
 *   over its share or no other candidate exists); the allocation is retried
 *   after every action that freed pages.  OFFLOAD needs a host tier (the
 *   victim's next service reloads); DROP keeps reclaim_sink_tokens and
 *   reclaim_window_tokens (a sparse engine's mode).
 * Tenants (fkv_req.tenant, 0 = anonymous) go to the cache, which charges
 *   pages by them; shared_tokens are public with publish_shared.
 * Tenant step share (tenant_step_share < 1, chunked prefill): while two
 *   tenants have prefill left, no tenant's tokens in a step exceed
 *   tenant_step_share x max_batch_tokens (at least 1); admission skips a
 *   waiting request whose tenant used its share.  Before a running request
 *   whose prefill left exceeds max_batch_tokens (it takes several steps
 *   anyway) takes its share, its tenant's waiting requests whose prompts
 *   fit in what is left of the share, keeping one token for it, start (in
 *   queue order, while running slots and memory allow); it takes what they
 *   leave.  So a tenant's short prompts do not wait behind its own long
 *   one, and share they cannot use stays the long one's.
 * Step share by weighted deficit round robin (step_share DRR, continuous,
 *   chunked prefill).  Plan: the budget less a token per decoding request
 *   goes to tenants with prefill work in rounds; each round a tenant's
 *   deficit grows by weight x (budget left / active weight) and it takes
 *   floor(deficit), at most its demand (a waiting request's is an upper
 *   bound: its prefix hits are unknown before its match); a tenant whose
 *   demand is met leaves with deficit 0; rounds start one tenant later each
 *   step.  Serve: the oldest running request first (at least its tenant's
 *   weighted part of the step and a token), then decodes and their
 *   restores, then each tenant's running prefills within its allotment,
 *   then each tenant's admissions within what is left plus what earlier
 *   tenants left (by weight), each admission fitting beside what running
 *   requests hold and still need (idle cached pages count as free), then a
 *   leftover pass.  Settle: a tenant pays the tokens beyond its allotment
 *   and its recomputed tokens; unused allotment is not credited; debt is
 *   bounded by one budget; no work left, no credit.  A tenant alone gets
 *   the whole budget.  Weights: the cache's, when first seen (1 without a
 *   cache).
 * Within share (admit_reclaim, step_bound): a tenant whose pages in the
 *   cache are at most its share_pages (fkv_tenant_info: the weighted
 *   max-min share of src/core/shares.h); one the cache has not seen, and
 *   every tenant without a cache, is within.
 * Reclaiming admission (admit_reclaim, continuous mode, with a cache).
 *   Victims: a victim is first the latest admitted unserved running
 *   request of the tenant furthest over its share (fair-rule exemptions
 *   first, then any), never the requester itself; only when no other
 *   over-share request is unserved do the rules above apply (so a request
 *   is never its own victim while an over-share tenant holds reclaimable
 *   running memory), and then requests of other tenants within their
 *   share are spared: the requester pays itself; only the oldest running
 *   request (which must progress) takes from them, and only when no
 *   other candidate is left.  Order: while some running request's tenant
 *   is over its share, the step serves (1) the oldest running request, (2) the
 *   running requests of within-share tenants, oldest first, (3) waiting
 *   requests of within-share tenants in admission order, without the DRR
 *   share's fit test, then (4) the rest as configured.  Under the DRR
 *   share, (1) is its oldest-first service, (2) and (3) follow its plan and
 *   stay within each tenant's allotment, and its passes are (4).  In (2)
 *   and (3) a token is held back for every unserved decode.  Requests
 *   served in (1)-(3) need memory while the over-share tenants' requests
 *   are still unserved, so the reclaim ladder (reclaim[], then preemption)
 *   takes it from those, and nothing the step has formed is undone: a
 *   request served in a step is never preempted in it.
 * Step-time bound (step_bound = k > 0, chunked prefill).  At the start of
 *   a step, take the within-share request waiting for its first token
 *   (waiting, or running with prefill left and nothing emitted) with the
 *   least prefill left; with p its prefill left (at most the budget) and D
 *   the running decodes, ref = step_cost(the D decodes + p prompt tokens
 *   of it).  The budget is the largest B <= max_batch_tokens, B >= D + p,
 *   with step_cost(the D decodes + B - D prompt tokens) <= k x ref
 *   (binary search: the cost grows with tokens).  No such request, or
 *   D + p >= the budget: the full budget.  Until that request is served
 *   in the step, other requests' prefills leave it its p tokens (an
 *   older running prefill, served first, would otherwise take the capped
 *   budget, and the light prompt would wait as long as without the
 *   bound, in shorter steps).  The cap holds back prompt
 *   tokens only: a running request's evicted chunks are recomputed within
 *   the full budget (a chunk is often larger than the cap, and the cap
 *   can stand for as long as light requests arrive: a request whose
 *   restore waited for it would never progress), and chunks reloaded from
 *   the host tier take nothing from either.
 * VTC: a client's counter grows by fkv_sched_item_cost (vtc_in_weight per
 *   prompt token, vtc_out_weight per emitted token) and, with
 *   vtc_mem_weight > 0, by vtc_mem_weight x KV tokens held x step seconds
 *   for every running request; a client whose queue refills is lifted to
 *   the smallest counter among clients with work.
 * no_admit_after_preempt (vLLM v1): a step whose running requests
 *   preempted admits nothing, unless it holds no item at all.
 * Dynamic batching: a batch is admitted only when nothing runs, once the
 *   oldest waiting request has waited batch_window_ns or max_running wait;
 *   it runs to completion.
 *
 * The step contract (fkv_batch_item): kind, emits, first and finishes are
 * decided by the scheduler when it forms the step; the caller reads them
 * and derives nothing again.  An engine writes its K/V at the slots of
 * positions [ctx, ctx + n_new) (fkv_seq_chunks + fkv_chunks_locate) after
 * recomputing exactly the item's restored ranges; it hands each sampled
 * token to fkv_sched_emit (stop: the request ends with it), cancels to
 * fkv_sched_stop between steps, and exports a finished request from
 * on_finish, which fkv_sched_finish calls before freeing its sequence. */
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

struct fkv_req;   /* below */
struct fkv_batch; /* below */

typedef struct fkv_sched_config {
    fkv_sched_mode mode;
    uint32_t max_batch_tokens; /* 2048: recomputed + new tokens per step */
    uint32_t max_request_tokens; /* 0 = no limit: new prompt tokens of one request per step
                                  * (chunked prefill; as vLLM's long_prefill_token_threshold) */
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
    int publish_shared;        /* 1: shared_tokens are published to every tenant */
    uint32_t fair_max_victim;  /* 2: fair-rule choices after which a request is exempt */
    fkv_reclaim_action reclaim[FKV_N_RECLAIM]; /* tried in order before preempting */
    uint32_t n_reclaim;        /* 0: preempt at once (no PREEMPT entry: it is implied) */
    uint32_t reclaim_sink_tokens, reclaim_window_tokens; /* DROP: 4 and 1024 */
    double vtc_mem_weight;     /* 0: counter units per token-second of KV held */
    double tenant_step_share;  /* 1 = off; (0, 1]: one tenant's prefill share of a step */
    int no_admit_after_preempt; /* 0; 1: a step that preempted admits nothing (vLLM) */
    fkv_step_share step_share; /* OFF: running requests first, then admission; DRR: above */
    int admit_reclaim;         /* 0; 1: within-share tenants first, taking memory from over-share ones (above) */
    double step_bound;         /* 0 = off; k > 0: the step-time bound while a within-share request waits (above) */
    /* The predicted duration of a step like b (any unit, increasing with
     * b's work), for step_bound; NULL: its compute tokens (b->tokens). */
    int64_t (*step_cost)(void *ctx, const struct fkv_batch *b);
    void *cost_ctx;
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
    void (*token_ids)(void *ctx, const struct fkv_req *r, uint32_t start, uint32_t n, int32_t *out);
    void *token_ctx;
    /* Opens r's sequence in cache with the parameters the scheduler chose
     * (p: id, client, tenant, salt, expected and shared tokens), which the
     * caller may complete (the simulator's hash-id mode,
     * src/sim/req_tokens.h); on failure it returns the error with
     * fkv_last_error's text set.  NULL: fkv_seq_create. */
    fkv_status (*open_seq)(void *ctx, const struct fkv_req *r, fkv_cache *cache, const fkv_seq_params *p,
                           fkv_seq **out);
    void *open_ctx;
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
    uint64_t tag;             /* the caller's, for its hooks (the simulator: where the
                               * request's token ids come from); never read here */
    uint32_t shared_tokens;   /* leading prompt tokens common to a group of requests (a
                               * per-client system prompt), public with publish_shared; 0 = none */
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
    uint64_t host_tokens;   /* offloaded chunks copied back by fkv_seq_fetch: in no item's ranges (their
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
