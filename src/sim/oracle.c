/* Belady's future for prefix-cached chunks: which later request reads a
 * page again.
 *
 * A cached chunk (its request finished) is read again only when a new
 * request's prompt matches it in the prefix index.  The index keys a page
 * by the hash chain of the tokens up to it, so the oracle computes the same
 * chain over every request's prompt (with the library's own page hash) and
 * records, per page key, the requests that will look it up, in arrival
 * order.  Only pages inside prompt blocks that at least two requests name
 * can ever be shared, so only those are recorded (the Mooncake trace's
 * hash_ids mark them), and the full pages of a client's common prefix (the
 * plain trace's shared_tokens).
 *
 * Table: open addressing on the page key -> a run of request indices in
 * the sorted pair array. */
#include <stdlib.h>
#include <string.h>

#include "sim/oracle.h"

/* The library's page key (src/core/prefix.c): a simulator-only oracle must
 * agree with the index bit for bit, so it calls the same function. */

typedef struct pair {
    uint64_t key;
    uint32_t req;
} pair;

typedef struct slot {
    uint64_t key; /* 0 = empty */
    uint32_t first, n;
} slot;

struct fkv_oracle {
    pair *pairs;
    size_t n_pairs;
    slot *tab;
    uint64_t mask;
};

static int cmp_pair(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->req < y->req ? -1 : x->req > y->req;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Block ids named by at least two requests at the same block position. */
static uint64_t *shared_blocks(const fkv_workload *w, const fkv_sim_tokens *t, size_t *n_out)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) n += fkv_sim_src(t, &w->reqs[i]).n_block_ids;
    uint64_t *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < w->n; i++) {
        fkv_req_src src = fkv_sim_src(t, &w->reqs[i]);
        for (uint32_t b = 0; b < src.n_block_ids; b++)
            all[k++] = src.block_ids[b] * 1000003ULL + b; /* id at position */
    }
    qsort(all, k, sizeof *all, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && all[j] == all[i]) j++;
        if (j - i >= 2) all[m++] = all[i];
        i = j;
    }
    *n_out = m;
    return all;
}

fkv_oracle *fkv_oracle_build(const fkv_workload *w, uint32_t page_tokens, uint32_t block_tokens)
{
    size_t n_shared = 0;
    fkv_sim_tokens ts = fkv_workload_tokens(w, block_tokens);
    uint64_t *shared = shared_blocks(w, &ts, &n_shared);
    if (!shared) return NULL;
    fkv_oracle *o = calloc(1, sizeof *o);
    size_t cap = 0;
    int32_t *tok = malloc(page_tokens * sizeof *tok);
    if (!o || !tok) goto fail;
    for (size_t i = 0; i < w->n; i++) {
        const fkv_req *r = &w->reqs[i];
        fkv_req_src src = fkv_sim_src(&ts, r);
        if (!r->shared_tokens && (!src.n_block_ids || !n_shared)) continue;
        /* the match looks at most prompt - 1 tokens: full pages of those */
        uint32_t pages = (r->prompt - 1) / page_tokens;
        /* a client's common prefix (plain traces): its full pages, which
         * every request of the client looks up (the readers never give a
         * request both a common prefix and block ids) */
        uint32_t common = r->shared_tokens / page_tokens < pages ? r->shared_tokens / page_tokens : pages;
        uint64_t h = 0;
        for (uint32_t p = 0; p < pages; p++) {
            for (uint32_t t = 0; t < page_tokens; t++) tok[t] = fkv_req_token(&ts, r, p * page_tokens + t);
            h = fkv_page_key(h, tok, page_tokens);
            if (r->shared_tokens) {
                if (p >= common) break;
            } else {
                uint32_t b = p * page_tokens / block_tokens;
                if (b >= src.n_block_ids) break;
                uint64_t key = src.block_ids[b] * 1000003ULL + b;
                if (!bsearch(&key, shared, n_shared, sizeof *shared, cmp_u64)) break; /* the chain diverged */
            }
            if (o->n_pairs == cap) {
                cap = cap ? cap * 2 : 1 << 16;
                pair *np = realloc(o->pairs, cap * sizeof *np);
                if (!np) goto fail;
                o->pairs = np;
            }
            o->pairs[o->n_pairs++] = (pair){h, (uint32_t)i};
        }
    }
    if (o->n_pairs) qsort(o->pairs, o->n_pairs, sizeof *o->pairs, cmp_pair);
    size_t keys = 0;
    for (size_t i = 0; i < o->n_pairs; i++) keys += i == 0 || o->pairs[i].key != o->pairs[i - 1].key;
    uint64_t size = 16;
    while (size < 2 * keys + 16) size *= 2;
    o->tab = calloc(size, sizeof *o->tab);
    if (!o->tab) goto fail;
    o->mask = size - 1;
    for (size_t i = 0; i < o->n_pairs;) {
        size_t j = i;
        while (j < o->n_pairs && o->pairs[j].key == o->pairs[i].key) j++;
        uint64_t s = o->pairs[i].key & o->mask;
        while (o->tab[s].key) s = (s + 1) & o->mask;
        o->tab[s] = (slot){o->pairs[i].key, (uint32_t)i, (uint32_t)(j - i)};
        i = j;
    }
    free(shared);
    free(tok);
    return o;
fail:
    free(shared);
    free(tok);
    fkv_oracle_free(o);
    return NULL;
}

void fkv_oracle_free(fkv_oracle *o)
{
    if (!o) return;
    free(o->pairs);
    free(o->tab);
    free(o);
}

int64_t fkv_oracle_next(const fkv_oracle *o, uint64_t key, const fkv_req *reqs, size_t frontier, int64_t now)
{
    if (!o || !key || !o->tab) return INT64_MAX;
    uint64_t s = key & o->mask;
    while (o->tab[s].key && o->tab[s].key != key) s = (s + 1) & o->mask;
    if (!o->tab[s].key) return INT64_MAX;
    /* readers are in request (= arrival) order: skip those before the
     * frontier (all started), then the first that has not started reads it
     * at its admission, as soon as possible once arrived */
    const pair *p = o->pairs + o->tab[s].first;
    uint32_t lo = 0, hi = o->tab[s].n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p[mid].req < frontier) lo = mid + 1;
        else hi = mid;
    }
    for (uint32_t i = lo; i < o->tab[s].n; i++) {
        const fkv_req *r = &reqs[p[i].req];
        if (r->state == FKV_REQ_PENDING || (r->state == FKV_REQ_WAITING && r->admit_order == 0))
            return r->arrival_ns > now ? r->arrival_ns : now;
    }
    return INT64_MAX;
}
