/* The chunk: what the cache keeps per chunk, and all an eviction policy
 * sees of the cache (policies include this header and core/policy.h,
 * never internal.h).  A policy reads the view (heat, times), the id (the
 * tie-break of every ordering) and its own node `pn`; the other fields
 * belong to the core. */
#ifndef FKV_CORE_CHUNK_H
#define FKV_CORE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_eval.h"
#include "core/policy.h"

typedef struct fkv__chunk fkv__chunk;

/* Where an evictable chunk currently waits. */
enum fkv__place {
    FKV__PLACE_NONE = 0, /* not evictable: pinned or evicted */
    FKV__PLACE_POLICY,   /* in a policy instance (owner's or the shared one) */
    FKV__PLACE_YOUNG     /* younger than min_chunk_retention: in the young FIFO */
};

struct fkv__chunk {
    fkv_chunk_view v;      /* first member: a view pointer is a chunk pointer */
    fkv_chunk_info m;      /* what changes while pinned (fkv_seq_chunk_info copies it) */
    uint32_t *pages;       /* [page_cap] page ids; v.pages aliases it while resident */
    uint64_t *phash;       /* [page_cap] prefix hash of each full page, 0 = none */
    uint32_t page_cap;
    uint8_t own_mem;       /* its own malloc (else carved from an arena: chunk.c) */
    uint64_t id;           /* creation order, unique: tie-break of every ordering */
    fkv_seq *owner;        /* sequence charged for the pages; NULL = cached */
    struct fkv__tenant *tenant; /* tenant charged for the pages (never NULL) */
    fkv_class cls;         /* class of the request that created it */
    uint8_t place;         /* enum fkv__place */
    fkv__policy_inst *inst; /* instance holding it when place == POLICY */
    fkv__policy_node pn;    /* policy-private links and key */
    union {                 /* list links, by where the chunk waits: */
        struct {
            fkv__chunk *prev, *next;
        } young;            /* place YOUNG: the young FIFO */
        struct {
            fkv__chunk *prev, *next;
        } ttl;              /* place POLICY, ttl_where WHEEL or OVER: a TTL list */
    } lk;
    uint32_t ttl_idx;       /* index in the TTL heap + 1 (ttl_where HEAP) */
    uint8_t ttl_where;      /* enum fkv__ttl_where */
    double ttl_key;         /* expiry it is filed under in the TTL tier, requests */
    uint64_t create_req, last_req; /* request clock at creation / last prefix hit */
    uint64_t create_tick;   /* pages the cache had allocated before it (F-LRU's turnover clock) */
    double ttl_req;         /* predicted TTL of a cached chunk, in requests; 0 = none */
    uint64_t prefix_hits;   /* times a new request matched it */
    fkv__chunk *all_prev, *all_next; /* every live chunk (invariant checks) */
    fkv__chunk *qprev, *qnext; /* cold FIFO (under-pressure quantization) */
    uint8_t in_cold;
    uint8_t kv_pending;        /* restored, K/V not yet written: set by fkv_seq_restore, cleared by
                                * the next fkv_seq_touch of a holder (the engine computes a restore
                                * in the step that made it; coldq.c does not quantize it before) */
    size_t qmeta_bytes;        /* bytes of v.qmeta (accounted even for phantom storage) */
    /* host tier (v.offloaded): the K/V of its pages, layer by layer, K then
     * V, page by page (NULL with phantom storage), and its scales */
    uint8_t *host;
    void *host_qmeta;
    size_t host_qmeta_bytes;
    uint32_t host_pages;
    uint8_t host_dtype;
    uint8_t demoted;           /* in the host tier by demotion: its index entries stay (host.c) */
    fkv__chunk *hprev, *hnext; /* host LRU (demoted, no holder) */
    fkv__chunk *thprev, *thnext; /* the same chunks, per tenant: htenant's host list */
    struct fkv__tenant *htenant; /* whose host list it is on (ch->tenant when pushed) */
    uint64_t hstamp;             /* push order on the host list: ties between tenants' oldest */
    /* prefix tree (host.c): the chunk this one extends in the sequence that
     * created it, and the chunks that extend this one; eviction at every
     * tier takes leaves only (host_demote) */
    fkv__chunk *tparent, *tkids, *tsib_prev, *tsib_next;
};

/* F-LRU's age is beta * (now - origin) / unit: the origin on the clock the
 * parameters name, nanoseconds (age_unit_ns > 0) or the pool's turnovers
 * (age_unit_ns == 0: pages allocated over the pool's pages). */
static inline double fkv__age_origin(const fkv__policy_params *p, const fkv__chunk *ch)
{
    return p->age_unit_ns > 0 ? (double)ch->m.create_ns / p->age_unit_ns : (double)ch->create_tick / p->age_unit_pages;
}

#endif
