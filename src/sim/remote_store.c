/* The simulator's remote tier (remote_store.h): a hash table of chunk keys
 * (linear probing, backward-shift deletion) threaded on two lists: with
 * lru one list in recency order; with s3fifo the small and the main FIFO,
 * with arc T1 and T2 (fkv_remote_store_policy). */
#include "sim/remote_store.h"
#include "sim/req_tokens.h"

#include "core/admit.h"
#include "core/ghost.h"
#include "fairkv.h"
#include "util/rng.h"

#include <stdlib.h>

#define NIL UINT32_MAX

typedef struct entry {
    uint64_t key;
    uint32_t prev, next; /* on list q[small]: head = most recent */
    uint8_t small;       /* s3fifo's small FIFO, arc's T1 */
    uint8_t freq;        /* s3fifo: reads while held, at most 3 */
} entry;

typedef struct queue {
    uint32_t head, tail, n;
} queue;

struct fkv_remote_store {
    uint32_t chunk_tokens;
    fkv_sim_tokens tokens; /* the requests' token sources */
    uint32_t cap, n;       /* entries held at most / now */
    entry *e;
    uint32_t *slot;        /* table: entry index + 1, 0 = empty */
    uint64_t mask;
    queue q[2];            /* [0]: the LRU list, s3fifo's main FIFO, arc's T2; [1]: small FIFO, T1 */
    int policy;            /* fkv_host_policy */
    fkv__ghost *ghost, *ghost2; /* s3fifo's ghost, arc's B1; arc's B2 */
    double arc_p;          /* arc's target for T1, entries */
    uint64_t *buf;         /* one request's chunk keys or entries, in order */
    uint32_t buf_cap;
    fkv_remote_store_stats stats;
    fkv__admit *admit; /* NULL: every chunk is written */
    int admit_mode;    /* fkv_tier_admission */
};

fkv_remote_store *fkv_remote_store_create(uint64_t capacity_chunks, uint32_t chunk_tokens,
                                          const fkv_sim_tokens *tokens, uint64_t max_keys)
{
    if (!capacity_chunks || !chunk_tokens) return NULL;
    /* never more entries than the run can write: the table stays small
     * when the store is far larger than the workload */
    uint64_t cap = capacity_chunks < max_keys + 1 ? capacity_chunks : max_keys + 1;
    if (cap >= UINT32_MAX / 4) return NULL;
    uint64_t size = 16;
    while (size < 2 * cap) size <<= 1;
    fkv_remote_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->e = malloc(cap * sizeof *st->e);
    st->slot = calloc(size, sizeof *st->slot);
    if (!st->e || !st->slot) {
        fkv_remote_store_free(st);
        return NULL;
    }
    st->chunk_tokens = chunk_tokens;
    if (tokens) st->tokens = *tokens;
    st->cap = (uint32_t)cap;
    st->mask = size - 1;
    st->q[0].head = st->q[0].tail = st->q[1].head = st->q[1].tail = NIL;
    return st;
}

void fkv_remote_store_free(fkv_remote_store *st)
{
    if (!st) return;
    free(st->e);
    free(st->slot);
    free(st->buf);
    fkv__ghost_free(st->ghost);
    fkv__ghost_free(st->ghost2);
    fkv__admit_free(st->admit);
    free(st);
}

/* The chain's start: the cache's prefix namespace (tenant, salt). */
static uint64_t chain_seed(const fkv_req *r) { return fkv_mix64(fkv_mix64(r->tenant ^ 0x6a09e667f3bcc908ULL) ^ r->cache_salt); }

static uint64_t chain_next(const fkv_remote_store *st, const fkv_req *r, uint64_t h, uint32_t chunk)
{
    uint32_t p0 = chunk * st->chunk_tokens;
    for (uint32_t p = p0; p < p0 + st->chunk_tokens; p++)
        h = fkv_mix64(h ^ (uint64_t)(uint32_t)fkv_req_token(&st->tokens, r, p));
    return h;
}

/* Table slot of key, or of the empty slot where it would go. */
static uint64_t probe(const fkv_remote_store *st, uint64_t key)
{
    uint64_t i = fkv_mix64(key) & st->mask;
    while (st->slot[i] && st->e[st->slot[i] - 1].key != key) i = (i + 1) & st->mask;
    return i;
}

static void lru_unlink(fkv_remote_store *st, uint32_t x)
{
    entry *e = &st->e[x];
    queue *q = &st->q[e->small];
    if (e->prev != NIL) st->e[e->prev].next = e->next;
    else q->head = e->next;
    if (e->next != NIL) st->e[e->next].prev = e->prev;
    else q->tail = e->prev;
    q->n--;
}

static void lru_front(fkv_remote_store *st, uint32_t x)
{
    queue *q = &st->q[st->e[x].small];
    st->e[x].prev = NIL;
    st->e[x].next = q->head;
    if (q->head != NIL) st->e[q->head].prev = x;
    q->head = x;
    if (q->tail == NIL) q->tail = x;
    q->n++;
}

/* Removes the table's reference at slot i (backward shift: no tombstones). */
static void table_delete(fkv_remote_store *st, uint64_t i)
{
    uint64_t j = i;
    for (;;) {
        st->slot[i] = 0;
        for (;;) {
            j = (j + 1) & st->mask;
            if (!st->slot[j]) return;
            uint64_t home = fkv_mix64(st->e[st->slot[j] - 1].key) & st->mask;
            /* j's entry may fill i unless its home lies cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        st->slot[i] = st->slot[j];
        i = j;
    }
}

/* A held entry is read (found, or written again).  lru: to the front;
 * s3fifo: frequency + 1 (at most 3), no move; arc: to T2's front. */
static void touch(fkv_remote_store *st, uint32_t x)
{
    if (st->policy == FKV_HOST_S3FIFO) {
        if (st->e[x].freq < 3) st->e[x].freq++;
        return;
    }
    lru_unlink(st, x);
    st->e[x].small = 0;
    lru_front(st, x);
}

/* The entry the order takes next (s3fifo: moving the read ones on when
 * commit, as the host tier's order does, src/core/host.c; without commit
 * the oldest of the FIFO it would take from, frequency aside). */
static uint32_t next_victim(fkv_remote_store *st, int commit)
{
    if (st->policy == FKV_HOST_LRU) return st->q[0].tail;
    for (;;) {
        queue *s = &st->q[1], *m = &st->q[0];
        double limit = st->policy == FKV_HOST_S3FIFO ? st->cap / 10.0 : st->arc_p;
        int from_small = s->n && (!m->n || s->n > limit);
        uint32_t x = from_small ? s->tail : m->tail;
        if (st->policy == FKV_HOST_ARC || !st->e[x].freq || !commit) return x;
        lru_unlink(st, x);
        if (from_small) st->e[x].small = 0, st->e[x].freq = 0;
        else st->e[x].freq--;
        lru_front(st, x);
    }
}

static void insert(fkv_remote_store *st, uint64_t key)
{
    uint64_t i = probe(st, key);
    if (st->slot[i]) {
        touch(st, st->slot[i] - 1);
        return;
    }
    uint32_t x;
    if (st->n < st->cap) {
        x = st->n++;
    } else {
        /* full: the victim's place is reused (lru: the least recently used) */
        x = next_victim(st, 1);
        if (st->policy != FKV_HOST_LRU) {
            /* its key to a ghost: s3fifo's from the small FIFO (as many
             * keys as the main FIFO holds); arc's B1 from T1, B2 from T2
             * (|T1| + |B1| and |T2| + |B2| within the capacity) */
            int sm = st->e[x].small;
            uint64_t left = st->q[sm].n - 1;
            if (st->policy == FKV_HOST_S3FIFO && sm)
                (void)fkv__ghost_add(st->ghost, st->e[x].key, 1, st->cap - st->cap / 10);
            else if (st->policy == FKV_HOST_ARC)
                (void)fkv__ghost_add(sm ? st->ghost : st->ghost2, st->e[x].key, 1, st->cap - left);
        }
        lru_unlink(st, x);
        table_delete(st, probe(st, st->e[x].key));
        st->stats.evictions++;
        i = probe(st, key);
    }
    st->e[x].key = key;
    st->e[x].small = 0;
    st->e[x].freq = 0;
    if (st->policy == FKV_HOST_S3FIFO) {
        st->e[x].small = !fkv__ghost_take(st->ghost, key);
    } else if (st->policy == FKV_HOST_ARC) {
        double b1 = (double)fkv__ghost_count(st->ghost), b2 = (double)fkv__ghost_count(st->ghost2);
        if (fkv__ghost_take(st->ghost, key)) {
            double d = b1 >= b2 ? 1 : b2 / b1;
            st->arc_p = st->arc_p + d < st->cap ? st->arc_p + d : st->cap;
        } else if (fkv__ghost_take(st->ghost2, key)) {
            double d = b2 >= b1 ? 1 : b1 / b2;
            st->arc_p = st->arc_p > d ? st->arc_p - d : 0;
        } else {
            st->e[x].small = 1;
        }
    }
    st->slot[i] = x + 1;
    lru_front(st, x);
}

static int buf_reserve(fkv_remote_store *st, uint32_t n)
{
    if (n <= st->buf_cap) return 0;
    uint64_t *b = realloc(st->buf, (size_t)n * sizeof *b);
    if (!b) return -1;
    st->buf = b;
    st->buf_cap = n;
    return 0;
}

/* Touching a run of chunks last first leaves the first most recent, so LRU
 * evicts a prefix's tail before its head and what stays is prefix-closed,
 * as the real tier's index keeps it (victims are leaves). */
uint32_t fkv_remote_store_find(void *vst, const fkv_req *r, uint32_t from, uint32_t limit, uint64_t *fetched_tokens)
{
    fkv_remote_store *st = vst;
    uint32_t c = st->chunk_tokens, k0 = from / c, k = 0;
    uint64_t h = chain_seed(r);
    *fetched_tokens = 0;
    st->stats.lookups++;
    if (buf_reserve(st, (limit > from ? limit : from) / c + 1)) return 0; /* no memory: a miss */
    /* the chunks before from (the device or host had them) are this
     * request's prefix too: touched where held, so the run stays closed */
    uint32_t n_touch = 0;
    for (; k < k0; k++) {
        h = chain_next(st, r, h, k);
        uint64_t i = probe(st, h);
        if (st->slot[i]) st->buf[n_touch++] = st->slot[i] - 1;
    }
    for (; (uint64_t)(k + 1) * c <= limit; k++) {
        h = chain_next(st, r, h, k);
        uint64_t i = probe(st, h);
        if (!st->slot[i]) break;
        st->buf[n_touch++] = st->slot[i] - 1;
        st->stats.hit_chunks++;
    }
    for (uint32_t j = n_touch; j-- > 0;) touch(st, (uint32_t)st->buf[j]);
    if (k == k0) return 0;
    *fetched_tokens = (uint64_t)(k - k0) * c;
    return k * c - from;
}

void fkv_remote_store_put(fkv_remote_store *st, const fkv_req *r, uint32_t len)
{
    uint32_t n = len / st->chunk_tokens;
    if (!n || buf_reserve(st, n)) return;
    uint64_t h = chain_seed(r);
    for (uint32_t k = 0; k < n; k++) st->buf[k] = h = chain_next(st, r, h, k);
    if (st->admit) {
        uint32_t keep = n;
        for (uint32_t k = 0; k < n; k++) fkv__admit_record(st->admit, st->buf[k]);
        uint32_t victim = st->n >= st->cap ? fkv__admit_estimate(st->admit, st->e[next_victim(st, 0)].key) : 0;
        for (uint32_t k = 0; k < n && keep == n; k++) {
            if (st->slot[probe(st, st->buf[k])]) continue; /* held: touched, not written again */
            if (st->admit_mode == FKV_TIER_ADMIT_SEEN ? !fkv__admit_ok(st->admit, st->buf[k])
                                                      : fkv__admit_estimate(st->admit, st->buf[k]) < victim)
                keep = k;
        }
        st->stats.refused += n - keep;
        n = keep;
        if (!n) return;
    }
    for (uint32_t k = n; k-- > 0;) insert(st, st->buf[k]);
    st->stats.puts += n;
}

int fkv_remote_store_admit(fkv_remote_store *st, int mode, uint64_t window, uint32_t threshold)
{
    st->admit_mode = mode;
    fkv__admit_free(st->admit);
    st->admit = fkv__admit_new(window, threshold);
    return st->admit ? 0 : -1;
}

int fkv_remote_store_policy(fkv_remote_store *st, int policy)
{
    if (policy != FKV_HOST_LRU && policy != FKV_HOST_S3FIFO && policy != FKV_HOST_ARC) return -1;
    if (st->n) return -1;
    st->policy = policy;
    if (policy == FKV_HOST_LRU) return 0;
    if (!st->ghost && !(st->ghost = fkv__ghost_new())) return -1;
    if (policy == FKV_HOST_ARC && !st->ghost2 && !(st->ghost2 = fkv__ghost_new())) return -1;
    return 0;
}

void fkv_remote_store_stats_get(const fkv_remote_store *st, fkv_remote_store_stats *out)
{
    *out = st->stats;
    out->entries = st->n;
}
