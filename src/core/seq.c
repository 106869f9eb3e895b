/* Sequences: create, free, append (with copy-on-write of a shared tail)
 * and fork.  Prefix matches are in match.c; what an engine step does to a
 * sequence (touch, pin, missing, restore, drop) in step.c. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define PT(c) ((c)->cfg.page_tokens)

void fkv_seq_params_default(fkv_seq_params *p)
{
    memset(p, 0, sizeof *p);
    p->weight = 1.0;
}

fkv_class fkv_seq_class(const fkv_seq *s)
{
    if (!s) return FKV_CLASS_SHORT;
    FKV__LOCK(s->cache);
    fkv_class cl = fkv__seq_class(s);
    FKV__UNLOCK(s->cache);
    return cl;
}

uint32_t fkv_seq_len(const fkv_seq *s)
{
    if (!s) return 0;
    FKV__LOCK(s->cache);
    uint32_t n = s->len;
    FKV__UNLOCK(s->cache);
    return n;
}

uint64_t fkv_seq_id(const fkv_seq *s)
{
    return s ? s->request_id : 0; /* immutable */
}

/* ---------------------------------------------------------------- table */

fkv_status fkv__seq_reserve(fkv_seq *s, uint32_t more)
{
    if (s->n_chunks + more <= s->cap_chunks) return FKV_OK;
    uint32_t ncap = s->cap_chunks ? s->cap_chunks : 8;
    while (ncap < s->n_chunks + more) ncap *= 2;
    fkv__chunk **t = realloc(s->table, (size_t)ncap * sizeof *t);
    if (!t) return FKV_ENOMEM;
    s->table = t;
    s->cap_chunks = ncap;
    return FKV_OK;
}

/* Inserts ch at table index `at` (space reserved by the caller). */
void fkv__seq_attach(fkv_seq *s, fkv__chunk *ch, uint32_t at)
{
    memmove(s->table + at + 1, s->table + at, (size_t)(s->n_chunks - at) * sizeof *s->table);
    s->table[at] = ch;
    s->n_chunks++;
    ch->m.refs++;
    ch->m.pins += s->pins;
    fkv__place_update(s->cache, ch);
}

/* Lets go of a chunk no sequence may need any more: evicted holes and, with
 * the prefix cache off, resident chunks are freed; the rest stay cached. */
static void release_if_unused(fkv_cache *c, fkv__chunk *ch)
{
    if (ch->m.refs) return;
    if (c->cfg.host_demote) {
        /* idle now: a matched demoted chunk waits in the host tier again; a
         * resident one whose prefix a holder left in the host tier is not
         * below it in the closure (host.c) */
        if (!ch->v.resident && ch->v.offloaded) {
            fkv__host_unheld(c, ch);
            return;
        }
        if (ch->v.resident && ch->tree.parent && !ch->tree.parent->v.resident) fkv__tree_leave(ch);
    }
    if (!ch->v.resident) fkv__chunk_destroy(c, ch);
    else if (!c->cfg.prefix_cache) fkv__chunk_evict(c, ch);
}

/* The sequence lets go of ch (already out of its table). */
static void drop(fkv_seq *s, fkv__chunk *ch)
{
    fkv_cache *c = s->cache;
    ch->m.refs--;
    ch->m.pins -= s->pins;
    if (ch->owner == s) fkv__chunk_set_owner(c, ch, NULL); /* re-places it */
    else fkv__place_update(c, ch);
    release_if_unused(c, ch);
}

void fkv__seq_detach(fkv_seq *s, uint32_t at)
{
    fkv__chunk *ch = s->table[at];
    memmove(s->table + at, s->table + at + 1, (size_t)(s->n_chunks - at - 1) * sizeof *s->table);
    s->n_chunks--;
    drop(s, ch);
}

/* ---------------------------------------------------------------- create */

static fkv_status seq_new(fkv_cache *c, const fkv_seq_params *p, const uint64_t *block_ids, uint32_t n_block_ids,
                          fkv_seq **out)
{
    if (!p->request_id) return fkv__fail(FKV_EINVAL, "fkv_seq_params.request_id: must be nonzero");
    if (!(p->weight > 0) || p->weight > 1e9)
        return fkv__fail(FKV_EINVAL, "fkv_seq_params.weight=%g: must be in (0, 1e9]", p->weight);
    for (uint32_t i = 0; i < c->n_owners; i++)
        if (c->owners[i]->request_id == p->request_id)
            return fkv__fail(FKV_EINVAL, "fkv_seq_params.request_id=%llu: already open",
                             (unsigned long long)p->request_id);
    fkv__tenant *tn = fkv__tenant_get(c, p->tenant, 1);
    if (!tn) return fkv__fail(FKV_ENOMEM, "out of memory");
    if (c->n_owners == c->cap_owners) {
        uint32_t ncap = c->cap_owners ? c->cap_owners * 2 : 16;
        fkv_seq **o = realloc(c->owners, (size_t)ncap * sizeof *o);
        if (!o) return fkv__fail(FKV_ENOMEM, "out of memory");
        c->owners = o;
        c->cap_owners = ncap;
    }
    /* ended sequences are kept for reuse with their table and policy
     * instance: a request's life then allocates nothing */
    fkv_seq *s;
    if (c->n_idle_seqs) {
        s = c->idle_seqs[--c->n_idle_seqs];
        fkv__chunk **table = s->table;
        uint32_t cap = s->cap_chunks;
        fkv__policy_inst *inst = s->inst;
        memset(s, 0, sizeof *s + PT(c) * sizeof(int32_t));
        s->table = table;
        s->cap_chunks = cap;
        s->inst = inst;
    } else {
        s = calloc(1, sizeof *s + PT(c) * sizeof(int32_t));
        if (!s) return fkv__fail(FKV_ENOMEM, "out of memory");
    }
    s->pending = (int32_t *)(s + 1);
    s->cache = c;
    s->request_id = p->request_id;
    s->client_id = p->client_id;
    s->tenant = tn;
    /* prefix namespaces: the salt seeds the chain, the tenant enters it at
     * its first private page (docs/ARCHITECTURE.md, "Prefix namespaces") */
    s->ns_public = p->cache_salt ? fkv__ns_mix(0x73616c74ull, p->cache_salt) : 0;
    s->ns_private = p->tenant ? fkv__ns_mix(0x74656e61ull, p->tenant) : 0;
    s->shared_pages = p->shared_prefix_tokens / PT(c);
    s->weight = p->weight;
    s->expected_tokens = p->expected_tokens;
    s->hashing = c->cfg.prefix_cache;
    s->create_ns = fkv__now(c);
    /* the request clock, and the mean arrival gap that converts it to ns */
    if (c->n_requests++) {
        double dt = (double)(s->create_ns - c->last_create_ns);
        c->ns_per_request = c->n_requests == 2 ? dt : 0.95 * c->ns_per_request + 0.05 * dt;
    }
    c->last_create_ns = s->create_ns;
    if (n_block_ids) {
        s->block_ids = malloc((size_t)n_block_ids * sizeof *s->block_ids);
        if (s->block_ids) memcpy(s->block_ids, block_ids, (size_t)n_block_ids * sizeof *s->block_ids);
        s->n_block_ids = n_block_ids;
    }
    if (c->cfg.quotas && !s->inst) s->inst = fkv__policy_inst_new(c->ops, &c->pparams);
    if ((n_block_ids && !s->block_ids) || (c->cfg.quotas && !s->inst)) {
        fkv__policy_inst_free(s->inst);
        free(s->block_ids);
        free(s->table);
        free(s);
        return fkv__fail(FKV_ENOMEM, "out of memory");
    }
    s->owner_idx = c->n_owners;
    c->owners[c->n_owners++] = s;
    tn->n_seqs++;
    c->quota_dirty = 1;
    *out = s;
    return FKV_OK;
}

fkv_status fkv_seq_create(fkv_cache *c, const fkv_seq_params *p, fkv_seq **out)
{
    return fkv_seq_create_blocks(c, p, NULL, 0, out);
}

fkv_status fkv_seq_create_blocks(fkv_cache *c, const fkv_seq_params *p, const uint64_t *block_ids,
                                 uint32_t n_block_ids, fkv_seq **out)
{
    if (!c || !p || !out) return fkv__fail(FKV_EINVAL, "fkv_seq_create: cache, params and out must not be NULL");
    *out = NULL;
    if (n_block_ids && !block_ids)
        return fkv__fail(FKV_EINVAL, "fkv_seq_create_blocks: block_ids is NULL with n_block_ids=%u", n_block_ids);
    FKV__LOCK(c);
    fkv_status st = seq_new(c, p, block_ids, n_block_ids, out);
    FKV__UNLOCK(c);
    return st;
}

void fkv_seq_free(fkv_seq *s)
{
    if (!s) return;
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    fkv__cold_scan(c, s, 1); /* an ended request's chunks are all cold */
    /* in position order: the chunks reach the cached chunks' policy
     * oldest first, the order a key-ordered policy appends fastest; with
     * free_tail_first last first, as vLLM frees a request's blocks
     * (single_type_kv_cache_manager.py, free: reversed(req_blocks)) */
    uint32_t n = s->n_chunks;
    int rev = c->cfg.free_tail_first;
    s->n_chunks = 0;
    for (uint32_t i = 0; i < n; i++) drop(s, s->table[rev ? n - 1 - i : i]);
    fkv_seq *last = c->owners[--c->n_owners];
    c->owners[s->owner_idx] = last;
    last->owner_idx = s->owner_idx;
    s->tenant->n_seqs--;
    c->quota_dirty = 1;
    free(s->block_ids);
    s->block_ids = NULL;
    if (c->n_idle_seqs < FKV__IDLE_SEQS && (!s->inst || s->inst->n == 0)) {
        c->idle_seqs[c->n_idle_seqs++] = s;
    } else {
        fkv__seq_release(s);
    }
    FKV__UNLOCK(c);
}

void fkv__seq_release(fkv_seq *s)
{
    fkv__policy_inst_free(s->inst);
    free(s->table);
    free(s->block_ids);
    free(s);
}

/* ---------------------------------------------------------------- hashing */

/* Key of the page that ends at token position `pos` (inclusive), or 0 when
 * the chain cannot go on (no tokens, or past the block ids). */
static uint64_t page_key(fkv_seq *s, uint64_t parent, const int32_t *page_tokens, uint32_t pos)
{
    fkv_cache *c = s->cache;
    if (s->block_ids) {
        uint32_t page_start = pos + 1 - PT(c);
        uint32_t b = page_start / c->ev.block_tokens;
        if (b >= s->n_block_ids) return 0;
        return fkv__hash_block(fkv__ns_parent(s, parent, page_start / PT(c)), s->block_ids[b],
                               (page_start % c->ev.block_tokens) / PT(c));
    }
    if (!page_tokens) return 0;
    return fkv__hash_tokens(fkv__ns_parent(s, parent, (pos + 1) / PT(c) - 1), page_tokens, PT(c));
}

/* ---------------------------------------------------------------- append */

/* Pages an append of n tokens needs, and whether the tail must be copied. */
typedef struct plan {
    int appendable, cow_chunk, cow_page;
    uint32_t pages;
} plan;

static plan make_plan(fkv_seq *s, uint32_t n)
{
    fkv_cache *c = s->cache;
    uint32_t pt = PT(c);
    plan p = {0, 0, 0, 0};
    fkv__chunk *t = s->n_chunks ? s->table[s->n_chunks - 1] : NULL;
    uint32_t take = 0;
    if (t && t->v.resident && t->v.dtype == c->cfg.dtype && t->v.n_tokens < t->v.cap_tokens &&
        t->v.start + t->v.n_tokens == s->len) {
        p.appendable = 1;
        uint32_t partial = t->v.n_tokens % pt;
        p.cow_chunk = t->m.refs > 1;
        p.cow_page = partial && (p.cow_chunk || c->page_ref[t->pages[t->v.n_pages - 1]] > 1);
        take = t->v.cap_tokens - t->v.n_tokens;
        if (take > n) take = n;
        uint32_t free_slots = partial ? pt - partial : 0;
        if (take > free_slots) p.pages += (take - free_slots + pt - 1) / pt;
        p.pages += (uint32_t)p.cow_page;
    }
    uint32_t pos = s->len + take, rest = n - take;
    while (rest) {
        uint32_t k = fkv__chunk_target(c, pos);
        if (k > rest) k = rest;
        p.pages += (k + pt - 1) / pt;
        pos += k;
        rest -= k;
    }
    return p;
}

/* Replaces the shared tail chunk by a private copy that shares its full
 * pages and copies only a partial last page (taken from `fresh`). */
static fkv__chunk *cow_tail(fkv_seq *s, const uint32_t **fresh)
{
    fkv_cache *c = s->cache;
    uint32_t at = s->n_chunks - 1;
    fkv__chunk *t = s->table[at];
    fkv__chunk *n = fkv__chunk_new(c, s, t->v.start, t->v.cap_tokens);
    if (!n) return NULL;
    uint32_t partial = t->v.n_tokens % PT(c);
    for (uint32_t j = 0; j < t->v.n_pages; j++) {
        if (j == t->v.n_pages - 1 && partial) {
            uint32_t p = *(*fresh)++;
            fkv__page_copy(c, p, t->pages[j]);
            n->pages[j] = p;
        } else {
            fkv__page_ref(c, t->pages[j]);
            n->pages[j] = t->pages[j];
            n->phash[j] = t->phash[j]; /* indexed by t, not by n */
        }
    }
    n->v.n_tokens = t->v.n_tokens;
    n->m.first_hash = t->m.first_hash;
    n->m.access_count = t->m.access_count;
    n->m.create_ns = t->m.create_ns;
    n->create_tick = t->create_tick;
    c->resident_tokens += n->v.n_tokens;
    fkv__chunk_add_pages(c, n, t->v.n_pages);
    fkv__seq_detach(s, at);
    fkv__seq_attach(s, n, s->n_chunks);
    return n;
}

fkv_status fkv_seq_append(fkv_seq *s, const int32_t *tokens, uint32_t n, fkv_slot *slots)
{
    if (!s) return fkv__fail(FKV_EINVAL, "fkv_seq_append: seq is NULL");
    if (n == 0) return FKV_OK;
    fkv_cache *c = s->cache;
    FKV__LOCK(c);
    fkv_status st = FKV_OK;
    uint32_t pt = PT(c);
    if ((uint64_t)s->len + n > UINT32_MAX - pt) {
        st = fkv__fail(FKV_EINVAL, "fkv_seq_append: n=%u: sequence would exceed 2^32 tokens", n);
        goto out;
    }
    plan p = make_plan(s, n);
    uint32_t first_new;
    uint32_t new_chunks_max = n / c->cfg.chunk_min_tokens + 2;
    if ((st = fkv__seq_reserve(s, new_chunks_max + 1))) {
        fkv__set_error("out of memory");
        goto out;
    }
    /* the tail must survive the evictions (and, under pressure, the
     * quantization) the allocation may cause; with enough free pages and
     * no quantization there is neither, and no need to move it */
    fkv__chunk *t = s->n_chunks ? s->table[s->n_chunks - 1] : NULL;
    int guard = p.appendable && (c->n_free < p.pages || c->cfg.quant_mode == FKV_QUANT_UNDER_PRESSURE);
    if (guard) {
        t->m.pins++;
        fkv__place_update(c, t);
    }
    c->cur_seq = s;
    st = fkv__reserve_pages(c, p.pages, c->scratch);
    c->cur_seq = NULL;
    if (guard) {
        t->m.pins--;
        fkv__place_update(c, t);
    }
    if (st) goto out;

    const uint32_t *fresh = c->scratch;
    /* New chunks are held pinned until they are filled, so a policy first
     * sees them complete (Belady keys on their content). */
    first_new = s->n_chunks;
    if (p.cow_chunk) {
        t = cow_tail(s, &fresh);
        if (!t) {
            st = fkv__fail(FKV_ENOMEM, "out of memory");
            goto unused;
        }
    } else if (p.cow_page) {
        uint32_t j = t->v.n_pages - 1, np = *fresh++;
        fkv__page_copy(c, np, t->pages[j]);
        fkv__page_unref(c, t->pages[j]);
        t->pages[j] = np;
    }
    if (!p.appendable) t = NULL;
    if (!tokens) s->hashing = s->hashing && s->block_ids;

    /* after an evicted partial tail, new pages are not aligned to page
     * boundaries of the sequence: stop the hash chain (never mis-index) */
    if (!p.appendable && s->len % pt) s->hashing = 0;
    uint32_t n_ins = 0;
    uint32_t added = 0; /* pages written to t but not yet accounted (once per chunk) */
    for (uint32_t i = 0; i < n;) {
        if (!t || t->v.n_tokens == t->v.cap_tokens) {
            if (added) {
                fkv__chunk_add_pages(c, t, added);
                added = 0;
            }
            t = fkv__chunk_new(c, s, s->len, fkv__chunk_target(c, s->len));
            if (!t) {
                st = fkv__fail(FKV_ENOMEM, "out of memory");
                goto unused;
            }
            t->m.pins++;
            fkv__seq_attach(s, t, s->n_chunks);
        }
        uint32_t slot = t->v.n_tokens % pt;
        if (slot == 0) t->pages[t->v.n_pages + added++] = *fresh++;
        /* the run of tokens that goes into this page */
        uint32_t k = pt - slot;
        if (k > n - i) k = n - i;
        if (k > t->v.cap_tokens - t->v.n_tokens) k = t->v.cap_tokens - t->v.n_tokens;
        uint32_t pj = t->v.n_pages + added - 1, page = t->pages[pj];
        if (slots)
            for (uint32_t j = 0; j < k; j++) slots[i + j] = (fkv_slot){page, slot + j};
        fkv__page_set_fill(c, page, slot + k);
        /* a whole page is hashed where it is; a part waits in pending */
        const int32_t *page_toks = tokens && slot == 0 && k == pt ? tokens + i : s->pending;
        if (s->hashing && tokens && page_toks == s->pending) memcpy(s->pending + slot, tokens + i, k * sizeof *tokens);
        t->v.n_tokens += k;
        c->resident_tokens += k;
        s->len += k;
        i += k;
        if (s->hashing && slot + k == pt) {
            uint64_t h = page_key(s, s->chain_hash, tokens ? page_toks : NULL, s->len - 1);
            if (!h) {
                s->hashing = 0;
            } else {
                s->chain_hash = h;
                t->phash[pj] = h;
                if (pj == 0) t->m.first_hash = h;
                c->ins[n_ins++] = (fkv__pentry){h, t};
            }
        }
    }
    if (added) fkv__chunk_add_pages(c, t, added);
    fkv__prefix_insert_batch(c, c->ins, n_ins);
    if (c->admit) /* a computed page is a sighting of its key */
        for (uint32_t j = 0; j < n_ins; j++) fkv__admit_record(c->admit, c->ins[j].key);
    goto release;
unused: /* out of host memory half way: give back the pages not used */
    while (fresh < c->scratch + p.pages) fkv__page_unref(c, *fresh++);
release:
    for (uint32_t i = first_new; i < s->n_chunks; i++) {
        s->table[i]->m.pins--;
        fkv__place_update(c, s->table[i]);
    }
    fkv__cold_scan(c, s, 0);
out:
    FKV__UNLOCK(c);
    return st;
}

/* ---------------------------------------------------------------- fork */

fkv_status fkv_seq_fork(fkv_seq *s, const fkv_seq_params *p, fkv_seq **child)
{
    if (!s || !p || !child) return fkv__fail(FKV_EINVAL, "fkv_seq_fork: seq, params and child must not be NULL");
    fkv_cache *c = s->cache;
    if (p->tenant && p->tenant != s->tenant->id)
        return fkv__fail(FKV_EINVAL, "fkv_seq_params.tenant=%llu: a fork stays in its parent's tenant %llu",
                         (unsigned long long)p->tenant, (unsigned long long)s->tenant->id);
    fkv_seq_params q = *p;
    q.tenant = s->tenant->id; /* a fork stays in its parent's tenant */
    FKV__LOCK(c);
    fkv_seq *k = NULL;
    fkv_status st = seq_new(c, &q, NULL, 0, &k); /* the parent's block ids, below */
    if (!st && fkv__seq_reserve(k, s->n_chunks)) {
        st = fkv__fail(FKV_ENOMEM, "out of memory");
    }
    if (st) {
        if (k) { /* undo seq_new */
            FKV__UNLOCK(c);
            fkv_seq_free(k);
            return st;
        }
        FKV__UNLOCK(c);
        return st;
    }
    for (uint32_t i = 0; i < s->n_chunks; i++) fkv__seq_attach(k, s->table[i], i);
    k->ns_public = s->ns_public; /* and its namespace */
    k->ns_private = s->ns_private;
    k->shared_pages = s->shared_pages;
    k->len = s->len;
    k->chain_hash = s->chain_hash;
    k->hashing = s->hashing;
    memcpy(k->pending, s->pending, PT(c) * sizeof *k->pending);
    if (s->block_ids) {
        k->block_ids = malloc((size_t)s->n_block_ids * sizeof *k->block_ids);
        if (k->block_ids) {
            memcpy(k->block_ids, s->block_ids, (size_t)s->n_block_ids * sizeof *k->block_ids);
            k->n_block_ids = s->n_block_ids;
        } else {
            k->hashing = 0;
        }
    }
    if (!k->expected_tokens) k->expected_tokens = s->expected_tokens;
    *child = k;
    FKV__UNLOCK(c);
    return FKV_OK;
}
