/* Eviction policy plug-in interface.
 *
 * A policy orders the evictable chunks of one instance; the cache keeps
 * everything else (pinning, quotas, min_chunk_retention, TTL) around it, so
 * every policy gets those for free.  The cache creates one instance for the
 * shared (unowned) chunks and, with quotas on, one per open sequence.
 *
 * A policy is one .c file defining a const fkv__policy_ops and one line in
 * registry.c.  Chunks carry a small policy-private node (fkv__policy_node)
 * so no policy allocates per chunk.
 */
#ifndef FKV_CORE_POLICY_H
#define FKV_CORE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_eval.h"

typedef struct fkv__chunk fkv__chunk;

/* Per-chunk state owned by whichever policy instance holds the chunk. */
typedef struct fkv__policy_node {
    double key;           /* heap policies: smaller = evicted sooner */
    uint32_t hidx;        /* heap position + 1; 0 = not in a heap */
    fkv__chunk *prev, *next; /* list policies; the sorted run of heap policies */
    uint8_t visited;      /* SIEVE */
    uint8_t in_run;       /* heap policies: in the sorted run, not the heap */
} fkv__policy_node;

typedef struct fkv__policy_params {
    double alpha, beta;     /* F-LRU weights */
    double age_unit_ns;     /* F-LRU age unit in ns; 0 = the pool's turnover (age_unit_pages) */
    double age_unit_pages;  /* the pool's pages */
    fkv_next_use_fn next_use; /* Belady */
    void *next_use_ctx;
} fkv__policy_params;

typedef struct fkv__policy_ops {
    const char *name;
    const char *help;
    /* required: make the instance state */
    fkv_status (*create)(const fkv__policy_params *p, void **state);
    /* required */
    void (*destroy)(void *state);
    /* required: the chunk became evictable in this instance */
    fkv_status (*insert)(void *state, fkv__chunk *ch);
    /* required: the chunk leaves the instance (pinned, evicted, moved) */
    void (*remove)(void *state, fkv__chunk *ch);
    /* may be NULL: the chunk, held by this instance, was read; its
     * access_count and last_access_ns are already updated */
    void (*access)(void *state, fkv__chunk *ch);
    /* required: the chunk to evict next, left in place; NULL when empty */
    fkv__chunk *(*victim)(void *state);
} fkv__policy_ops;

typedef struct fkv__policy_inst {
    const fkv__policy_ops *ops;
    void *state;
    uint32_t n; /* chunks held */
} fkv__policy_inst;

/* registry.c */
const fkv__policy_ops *fkv__policy_find(const char *name);
fkv__policy_inst *fkv__policy_inst_new(const fkv__policy_ops *ops, const fkv__policy_params *p);
void fkv__policy_inst_free(fkv__policy_inst *in);

/* Shared by the key-ordered policies (heap_policy.c): the order of
 * chunk->pn.key with the chunk id as tie-break (a sorted run plus a
 * min-heap); `keyfn` computes the key. */
typedef double (*fkv__keyfn)(const fkv__policy_params *p, const fkv__chunk *ch);
/* The sorted run a chunk's key belongs to (0 .. FKV__HP_RUNS - 1): keys of
 * one run grow with time, so chunks usually arrive in order; -1 = none
 * (the heap).  Only speed depends on it, never the order of victims. */
#define FKV__HP_RUNS 4
typedef int (*fkv__runfn)(const fkv__chunk *ch);
typedef struct fkv__heap_policy fkv__heap_policy;
fkv_status fkv__hp_create(const fkv__policy_params *p, fkv__keyfn key, fkv__runfn run, void **state);
void fkv__hp_destroy(void *state);
fkv_status fkv__hp_insert(void *state, fkv__chunk *ch);
void fkv__hp_remove(void *state, fkv__chunk *ch);
void fkv__hp_access(void *state, fkv__chunk *ch);
fkv__chunk *fkv__hp_victim(void *state);

/* Defines the ops table `sym` of a heap policy keyed by `keyfn`, with
 * sorted runs chosen by `runfn` (NULL: the heap only); `access` is
 * fkv__hp_access when a read changes the key, NULL when it cannot. */
#define FKV__HEAP_POLICY(sym, pname, phelp, keyfn, runfn, access_fn)              \
    static fkv_status sym##_create(const fkv__policy_params *p, void **state)     \
    {                                                                             \
        return fkv__hp_create(p, keyfn, runfn, state);                            \
    }                                                                             \
    const fkv__policy_ops sym = {                                                 \
        .name = pname,                                                            \
        .help = phelp,                                                            \
        .create = sym##_create,                                                   \
        .destroy = fkv__hp_destroy,                                               \
        .insert = fkv__hp_insert,                                                 \
        .remove = fkv__hp_remove,                                                 \
        .access = access_fn,                                                      \
        .victim = fkv__hp_victim,                                                 \
    }

#endif
