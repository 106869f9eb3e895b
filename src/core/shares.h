/* Fair shares: the rules the cache, the host tier and the scheduler apply
 * to divide memory, written once.  Pure arithmetic on numbers the caller
 * gathers (no cache state), so any floor above the core may include it.
 *
 * 1. Weighted max-min water-filling (fkv__water_fill).  Claimants with a
 *    positive demand d_i and weight w_i share a capacity C.  In ascending
 *    order of d_i / w_i (ties: lower id first), a claimant whose demand is
 *    at most w_i * C' / W' (C', W': capacity and weight not given yet) gets
 *    its whole demand; the first that wants more, and everyone after it,
 *    gets w_i * C' / W'.  A claimant with no demand gets 0 and takes no
 *    part.  Spare capacity -- what is left when every demand is met --
 *    follows `spare`: FKV__SPARE_SPREAD adds it to every claimant's share
 *    in proportion to its weight (the shares then sum to C: the device
 *    pool), FKV__SPARE_KEEP leaves it unassigned (share == demand: the host
 *    tier, whose shares are reported as what each holder may keep).  The
 *    two agree whenever the demands exceed C, the only case in which a
 *    share ranks victims.
 * 2. The request quota weight q_i = w_i * max(d_i, 1)^(1/T) (d_i: the
 *    request's demand in pages, T: temperature; 1/T == 0 for T = inf);
 *    a request's quota is its group's capacity * q_i / sum of the group's
 *    q_j (fkv__quota_of).
 * 3. "Furthest over its share": candidates are ranked by excess = held -
 *    share; the larger excess wins, an equal one goes to the larger tie
 *    key (fkv__over_offer).  The caller names the tie key: 0 for "the
 *    first one seen", an age for "the oldest", an order for "the latest".
 *    Rule 3 ranks victims when shares are targets (the default).
 * 4. Shares as guarantees (fkv_config.share_guarantee, tenant mode): the
 *    shares are rule 1 over the open requests' demands only (their pages
 *    and what they expect to grow into; cached pages claim nothing, nor
 *    does a request that was pinned once and is not now: a preempted one
 *    the scheduler keeps), the
 *    spare spread by weight, so each tenant's cache is guaranteed within
 *    its weighted part of what running requests leave.  A tenant is over
 *    its share when it holds (running and cached) more pages than its
 *    share; at or under it, its memory is guaranteed.  When
 *    tenant A allocates, the victim is the policy's own next victim among
 *    the evictable chunks of the first group with one (tenants holding no
 *    page take no part):
 *      a. some tenant is over its share: the over-share tenants, A
 *         included if it is over, all in one order -- not the furthest
 *         over first; then A's own chunks; then none (FKV_EFULL): so an
 *         over-share A with nothing evictable fails;
 *      b. nobody is over and every tenant other than A is strictly under
 *         its share (or there is no other): every tenant -- the policy
 *         alone, as with quotas off;
 *      c. otherwise (nobody over, some other tenant exactly at its share,
 *         as a tenant holding only cached chunks within its fair level
 *         is): A's own chunks, then none.
 *    With no allocating request (fkv_cache_evict, teardown): the
 *    over-share tenants, then every tenant.
 *    So a tenant at or under its share never loses memory to another
 *    tenant's allocation, except in case b, where the allocation pushes A
 *    over and everybody else still has room under its share.  "The
 *    policy's order" is one order across the instances: (key, chunk id)
 *    for the key-ordered policies, exactly the victim one instance holding
 *    all the chunks would give; for sieve and freeq, whose order lives in
 *    one instance, each instance's victim competes by last read, then
 *    chunk id.  Young chunks
 *    (min_chunk_retention) go after all of these, by the same a/b/c, and
 *    the TTL tier is not used.  The host tier (demote.c) does the same with
 *    host shares: the least recently used demoted chunk of the tenants over
 *    their host shares; no tenant over: the host LRU alone; else the
 *    incoming tenant's own, or none (the chunk is not demoted).
 * 5. A static partition (fkv_config.share_guarantee = 2, tenant mode): the
 *    baseline FairRide's guarantee is stated against.  Each tenant that
 *    takes part -- every tenant but the anonymous tenant 0, which takes
 *    part only while it holds a page or has an open request -- has the
 *    share w_i / W of the pool (W: the weights of those taking part),
 *    whatever it runs or caches; victims are chosen as in rule 4 with these
 *    shares.  So free pages may be borrowed, a tenant under its part takes
 *    pages back from those over theirs, and a tenant at or over its part
 *    recycles its own: each tenant keeps its part, cached or running,
 *    against every other's allocation, and gets no more while others want
 *    theirs.  The host tier is as in rule 4. */
#ifndef FKV_CORE_SHARES_H
#define FKV_CORE_SHARES_H

#include <math.h>
#include <stdint.h>

enum fkv__spare {
    FKV__SPARE_KEEP = 0, /* spare capacity stays unassigned: share == demand when all fit */
    FKV__SPARE_SPREAD    /* spare capacity spread by weight: shares sum to the capacity */
};

/* One claimant of a water-filling.  The caller sets demand, weight (> 0)
 * and id (its own index: the tie-break, and how it finds its claimant
 * again, since the array is reordered); fkv__water_fill sets share. */
typedef struct fkv__claim {
    double demand, weight;
    double share;
    uint32_t id;
} fkv__claim;

/* Rule 1 over cl[0..n) (reordered by demand / weight). */
void fkv__water_fill(fkv__claim *cl, uint32_t n, double capacity, enum fkv__spare spare);

/* Rule 2: 1/T, the exponent of the demand (0 for an infinite temperature). */
static inline double fkv__quota_exponent(double temperature)
{
    return isinf(temperature) ? 0.0 : 1.0 / temperature;
}

/* Rule 2: the quota weight of a request of weight w and demand d pages. */
static inline double fkv__quota_weight(double w, double d, double inv_t)
{
    if (d < 1) d = 1;
    return w * (inv_t == 1.0 ? d : pow(d, inv_t));
}

/* Rule 2: the quota of a request of quota weight q in a group whose quota
 * weights sum to qsum and which holds `capacity` pages. */
static inline double fkv__quota_of(double capacity, double q, double qsum)
{
    return qsum > 0 ? capacity * q / qsum : 0;
}

/* Rule 3: the best candidate so far.  Start from {0} (no candidate). */
typedef struct fkv__over_rank {
    double excess; /* held - share of the best so far */
    uint64_t tie;  /* its tie key */
    int any;       /* a candidate was offered */
} fkv__over_rank;

/* Offers a candidate holding `held` of its `share`, with tie key `tie`;
 * 1 when it is now the best (the caller remembers which it was). */
static inline int fkv__over_offer(fkv__over_rank *r, double held, double share, uint64_t tie)
{
    double ex = held - share;
    if (r->any && !(ex > r->excess || (ex == r->excess && tie > r->tie))) return 0;
    r->excess = ex;
    r->tie = tie;
    r->any = 1;
    return 1;
}

#endif
