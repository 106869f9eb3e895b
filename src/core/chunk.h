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
#include "core/list.h"
#include "fairkv_eval.h"
#include "core/policy.h"

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
    uint8_t kv_pending;    /* restored, K/V not yet written: set by fkv_seq_restore, cleared by the next
                            * fkv_seq_touch of a holder (the engine computes a restore in the step that
                            * made it; coldq.c does not quantize it, host.c does not demote it before) */
    uint64_t id;           /* creation order, unique: tie-break of every ordering */
    fkv_seq *owner;        /* sequence charged for the pages; NULL = cached */
    struct fkv__tenant *tenant; /* tenant charged for the pages (never NULL) */
    fkv_class cls;         /* class of the request that created it */
    uint64_t create_tick;  /* pages the cache had allocated before it (F-LRU's turnover clock) */
    fkv__link all;         /* every live chunk (cache->all); once freed, .next links its free list */
    /* where it waits to be evicted (place.c) */
    uint8_t place;          /* enum fkv__place */
    fkv__policy_inst *inst; /* instance holding it when place == POLICY */
    fkv__policy_node pn;    /* policy-private links and key */
    union {                 /* list links, by where the chunk waits: */
        fkv__link young;    /* place YOUNG: the young FIFO */
        fkv__link ttl;      /* place POLICY, ttl.where WHEEL or OVER: a TTL list */
    } lk;
    /* the TTL tier (ttl.c) and the prediction it is filed by (chunk.c) */
    struct {
        uint32_t idx;       /* index in the TTL heap + 1 (where HEAP) */
        uint8_t where;      /* enum fkv__ttl_where */
        double key;         /* expiry it is filed under, requests */
        double req;         /* predicted TTL of a cached chunk, in requests; 0 = none */
        uint64_t create_req, last_req; /* request clock at creation / last prefix hit */
        uint64_t prefix_hits; /* times a new request matched it */
    } ttl;
    /* cold-chunk quantization (coldq.c) */
    struct {
        fkv__link lk;       /* the cold FIFO (under-pressure) */
        uint8_t queued;     /* on it */
        size_t qmeta_bytes; /* bytes of v.qmeta (accounted even for phantom storage) */
    } quant;
    /* the host tier (host.c; v.offloaded): the K/V of its pages, layer by
     * layer, K then V, page by page (NULL with phantom storage), and its
     * scales; the demoted ones wait on two lists while no one holds them */
    struct {
        uint8_t *kv;
        void *qmeta;
        size_t qmeta_bytes;
        uint32_t pages;
        uint8_t dtype;
        uint8_t demoted;      /* in the host tier by demotion: its index entries stay */
        fkv__link lru;        /* the host LRU (cache->host_lru) */
        fkv__link tlru;       /* the same chunks, per tenant: tenant's host_lru */
        struct fkv__tenant *tenant; /* whose list it is on (ch->tenant when pushed) */
        uint64_t stamp;       /* push order: ties between tenants' oldest */
        uint8_t small;        /* on the small list (host_policy s3fifo, arc), else the main one */
        uint8_t freq;         /* s3fifo: reads while in the tier, at most 3 */
        uint8_t read;         /* read from the host tier at least once (kept while promoted) */
    } host;
    /* the prefix tree (tree.c): the chunk this one extends in the sequence
     * that created it, and the chunks that extend this one; eviction at
     * every tier takes leaves only (host_demote) */
    struct {
        fkv__chunk *parent;
        fkv__list kids;
        fkv__link sib;        /* among its parent's kids */
    } tree;
};

/* F-LRU's age is beta * (now - origin) / unit: the origin on the clock the
 * parameters name, nanoseconds (age_unit_ns > 0) or the pool's turnovers
 * (age_unit_ns == 0: pages allocated over the pool's pages). */
static inline double fkv__age_origin(const fkv__policy_params *p, const fkv__chunk *ch)
{
    return p->age_unit_ns > 0 ? (double)ch->m.create_ns / p->age_unit_ns : (double)ch->create_tick / p->age_unit_pages;
}

#endif
