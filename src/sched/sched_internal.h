/* The scheduler's own state and the seams between its files (not for
 * other folders: scripts/layering.sh).
 *
 * The files, each calling only those listed before it:
 *   sched_base.c    the error channel, the queue's insertion, a sequence's
 *                   release, token ids, prefill left
 *   sched_victim.c  who pays when memory runs out: reclaim, preemption,
 *                   rejection
 *   sched_share.c   the tenants' accounts of a step: the tenant step share,
 *                   the DRR share's entries, charge and settling
 *   sched_serve.c   one request's part of a step: restores, then new tokens
 *   sched_admit.c   who starts: FCFS or VTC order, the sequence's start
 *                   (prefix match across tiers, the tier below)
 *   sched_guard.c   within-share tenants first (admit_reclaim), the
 *                   step-time bound (step_bound)
 *   sched_drr.c     the step under the DRR share: plan, then passes by tenant
 *   sched.c         requests in and out: create, add, step (its frame),
 *                   emit, stop, finish
 *
 * Everything the step being formed needs travels in one sched_step;
 * functions that can fail return an outcome, and the step's status says
 * why (one channel). */
#ifndef FKV_SCHED_INTERNAL_H
#define FKV_SCHED_INTERNAL_H

#include "sched/sched.h"
#include "core/shares.h"

/* The tenant step share's use of the step being formed, per tenant (a step
 * sees few tenants: a linear list). */
struct tenant_use {
    uint64_t tenant;
    uint32_t used;
};

/* How far a tenant is over its fair share, memoized over one choice. */
struct tenant_over {
    uint64_t tenant;
    double over; /* pages - share_pages */
};

/* A tenant's share at the step's start over the demand of running and
 * waiting requests (sched.h, "Within share"). */
struct tenant_share {
    uint64_t tenant;
    double demand, weight, share;
};

/* The step share by DRR (sched.h): one entry per tenant seen, kept across
 * steps for the deficits. */
struct drr_tenant {
    uint64_t tenant;
    double weight, deficit;
    uint64_t demand;     /* prefill tokens its requests need, this step */
    uint32_t alloc;      /* allotted this step */
    uint32_t extra;      /* passed on to it from tenants before it this step */
    uint32_t used;       /* new prefill tokens computed this step */
    uint32_t recomputed; /* restored tokens recomputed this step */
};

/* The step being formed.  Its buffers are kept across steps. */
typedef struct sched_step {
    fkv_sched *s;
    fkv_batch *b;
    uint32_t budget;   /* compute tokens left */
    uint32_t held;     /* tokens the step-time bound took off the budget: restores may still use them */
    /* the step-time bound's request and its prefill tokens, kept from other
     * requests' prefills until it is served (sched.h, "Step-time bound") */
    const fkv_req *bound_w;
    uint32_t bound_reserve;
    int admitting;     /* serving a request being admitted: no memory is NOROOM, not a preemption */
    int stop_admit;    /* an admission found no memory: no more in this step */
    fkv_status status; /* FKV_OK, or why the step failed (an outcome FAILED) */
    const fkv_chunk_view **restored; /* chunks restored in this step */
    size_t n_restored, cap_restored;
    struct tenant_use *use; /* tenant step share */
    size_t n_use, cap_use;
    uint32_t tenant_cap; /* prefill tokens a tenant may take; UINT32_MAX = no limit */
    struct tenant_over *over;
    size_t cap_over;
    const fkv_req *fair_choice; /* the last victim chosen by the fair rule, until preempted */
    int drr_on;    /* the DRR share applies to this step */
    int drr_limit; /* serving within allotments (not the leftover pass) */
    fkv_req **pick; /* requests a pass of the share visits */
    size_t cap_pick;
    fkv_batch probe; /* step_bound: the steps whose cost it predicts */
    struct tenant_share *shares; /* admit_reclaim, step_bound: this step's shares */
    size_t n_shares, cap_shares;
    fkv__claim *claims;
    size_t cap_claims;
} sched_step;

struct fkv_sched {
    fkv_sched_config cfg;
    fkv_cache *cache;
    fkv_req **wait; /* waiting queue, front = index 0 */
    size_t n_wait, cap_wait;
    fkv_req **run;  /* running set in admission order */
    size_t n_run, cap_run;
    uint64_t admit_counter, preempt_counter;
    uint64_t preemptions, rejections, done;
    uint64_t live_tokens;
    double *vtc;           /* [n_clients] virtual token counters */
    uint32_t *client_live; /* [n_clients] waiting + running requests */
    int32_t *tok;          /* [tok_cap] token ids of one append */
    size_t tok_cap;
    int64_t step_ns;       /* start of the last step (VTC memory term) */
    uint32_t page_tokens;  /* of the cache; 0 without one */
    struct drr_tenant *drr;
    size_t n_drr, cap_drr;
    size_t drr_first;      /* the entry that starts this step's rounds */
    sched_step step;
    char err[256];
};

/* Outcomes of serving one request: SERVED; GONE (preempted or rejected);
 * NOROOM (an admission that found no memory: it goes back to the queue);
 * STALLED (no memory after restoring chunks: the item carries the
 * restores, the request stays running and tries again next step);
 * FAILED (t->status says why). */
enum { SERVED = 0, GONE = 1, NOROOM = 2, STALLED = 3, FAILED = 4 };

/* sched_base.c */
fkv_status fkv__sched_fail(fkv_sched *s, fkv_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int fkv__step_failed(sched_step *t, fkv_status st); /* records st, returns FAILED */
fkv_status fkv__sched_wait_insert(fkv_sched *s, fkv_req *r, size_t pos);
void fkv__sched_release_seq(fkv_sched *s, fkv_req *r);
uint32_t fkv__sched_prefill_left(const fkv_req *r);
const int32_t *fkv__sched_tokens(fkv_sched *s, const fkv_req *r, uint32_t start, uint32_t n);

/* sched_victim.c */
fkv_status fkv__sched_preempt(fkv_sched *s, fkv_req *r);
void fkv__sched_reject(fkv_sched *s, fkv_req *r);
void fkv__sched_forget(fkv_sched *s, fkv_req *r);
int fkv__sched_make_room(sched_step *t, fkv_req *r, uint32_t need);
int fkv__sched_give_up(sched_step *t, fkv_req *r);
void fkv__sched_shares_start(sched_step *t);
int fkv__sched_within_share(sched_step *t, uint64_t tenant);

/* sched_serve.c */
int fkv__sched_serve(sched_step *t, fkv_req *r);


/* sched_admit.c */
void fkv__sched_admit(sched_step *t, int64_t now);
void fkv__sched_admit_one(sched_step *t, size_t wi);
void fkv__sched_admit_own_short(sched_step *t, fkv_req *r);

/* sched_share.c */
struct drr_tenant *fkv__sched_drr_entry(fkv_sched *s, uint64_t tenant); /* created when first seen; NULL: no memory */
void fkv__sched_share_start(sched_step *t);
uint32_t fkv__sched_tenant_left(sched_step *t, const fkv_req *r);
void fkv__sched_tenant_used(sched_step *t, const fkv_req *r, uint32_t n);
int fkv__sched_may_prefill(sched_step *t, const fkv_req *r);
int fkv__sched_admission_fits(fkv_sched *s, const fkv_req *r);
void fkv__sched_drr_charge(sched_step *t, const fkv_req *r, int prefill, uint32_t n, uint32_t restored);
void fkv__sched_drr_settle(fkv_sched *s);

/* sched_guard.c */
void fkv__sched_step_bound(sched_step *t);
void fkv__sched_guard_first(sched_step *t);

/* sched_drr.c */
void fkv__sched_drr_serve(sched_step *t);

#endif
