/* MIN over the workload's pages (min_bound.h): the reference string once,
 * each page's next read by a backward pass, then one forward pass per
 * cache size with a max-heap of (next read, depth) and lazy deletion. */
#include "sim/min_bound.h"

#include <stdlib.h>

#include "util/rng.h"

#define NEVER UINT32_MAX

typedef struct ref {
    uint32_t slot;  /* the page's entry in the key table */
    uint32_t next;  /* index of the page's next read after this reference, NEVER if none */
    uint32_t depth; /* page index in its request */
    uint8_t read;   /* 1: a read (a hit opportunity) then a write; 0: a write */
} ref;

typedef struct page {
    uint64_t key;  /* 0 = empty slot */
    uint32_t next; /* while kept: its next read */
    uint8_t kept;
} page;

typedef struct hent {
    uint64_t pri; /* next << 32 | depth: the largest goes first */
    uint32_t slot;
} hent;

typedef struct heap {
    hent *a;
    size_t n;
} heap;

static void heap_push(heap *h, hent e)
{
    size_t i = h->n++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h->a[p].pri >= e.pri) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
}

static void heap_pop(heap *h)
{
    hent e = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mp = e.pri;
        if (l < h->n && h->a[l].pri > mp) m = l, mp = h->a[l].pri;
        if (r < h->n && h->a[r].pri > mp) m = r;
        if (m == i) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n) h->a[i] = e;
}

static uint32_t table_slot(page *t, uint64_t mask, uint64_t key)
{
    uint64_t i = fkv_mix64(key) & mask;
    while (t[i].key && t[i].key != key) i = (i + 1) & mask;
    return (uint32_t)i;
}

/* One cache size: hit tokens of MIN with bypass over refs. */
static uint64_t run_min(ref *refs, size_t n_refs, page *tab, uint64_t size, uint64_t cap, uint32_t page_tokens,
                        heap *h)
{
    for (uint64_t i = 0; i < size; i++) tab[i].kept = 0;
    h->n = 0;
    uint64_t held = 0, hits = 0;
    for (size_t j = 0; j < n_refs; j++) {
        const ref *r = &refs[j];
        page *p = &tab[r->slot];
        if (p->kept) {
            hits += r->read ? page_tokens : 0;
            p->next = r->next;
            if (r->next == NEVER) { /* never read again: it goes */
                p->kept = 0;
                held--;
            } else {
                heap_push(h, (hent){(uint64_t)r->next << 32 | r->depth, r->slot});
            }
            continue;
        }
        if (r->next == NEVER || !cap) continue; /* bypass */
        if (held == cap) {
            /* the kept page read last, unless this one is read later still */
            for (;;) {
                const hent *top = &h->a[0];
                const page *q = &tab[top->slot];
                if (q->kept && (uint64_t)q->next << 32 == (top->pri & ~0xffffffffull)) break;
                heap_pop(h); /* stale: read or evicted since */
            }
            uint64_t pri = (uint64_t)r->next << 32 | r->depth;
            if (h->a[0].pri <= pri) continue; /* bypass: every kept page is read sooner */
            tab[h->a[0].slot].kept = 0;
            heap_pop(h);
            held--;
        }
        p->kept = 1;
        p->next = r->next;
        held++;
        heap_push(h, (hent){(uint64_t)r->next << 32 | r->depth, r->slot});
    }
    return hits;
}

/* What a run computes of r: its last output token is emitted, never
 * appended (min_bound.h). */
static uint64_t computed_tokens(const fkv_req *r)
{
    uint64_t t = (uint64_t)r->prompt + r->output;
    return t ? t - 1 : 0;
}

fkv_status fkv_min_bound(const fkv_workload *w, uint32_t page_tokens, uint32_t block_tokens, const uint64_t *cap_pages,
                         size_t n, uint64_t *hit_tokens, uint64_t *prompt_tokens)
{
    if (!page_tokens) return FKV_EINVAL;
    size_t n_refs = 0;
    uint64_t prompts = 0;
    for (size_t i = 0; i < w->n; i++) {
        const fkv_req *r = &w->reqs[i];
        prompts += r->prompt;
        n_refs += computed_tokens(r) / page_tokens; /* one per page: a read is also its write */
    }
    *prompt_tokens = prompts;
    if (n_refs >= NEVER) return FKV_EINVAL;
    uint64_t size = 16;
    while (size < 2 * (uint64_t)n_refs + 16) size <<= 1;
    ref *refs = malloc((n_refs ? n_refs : 1) * sizeof *refs);
    page *tab = calloc(size, sizeof *tab);
    int32_t *tok = malloc(page_tokens * sizeof *tok);
    heap h = {malloc((n_refs + 1) * sizeof *h.a), 0}; /* at most one push per reference */
    fkv_status st = FKV_OK;
    if (!refs || !tab || !tok || !h.a) {
        st = FKV_ENOMEM;
        goto out;
    }
    /* the reference string; a page's key chains its prefix's keys */
    size_t k = 0;
    fkv_sim_tokens ts = fkv_workload_tokens(w, block_tokens);
    for (size_t i = 0; i < w->n; i++) {
        const fkv_req *r = &w->reqs[i];
        uint32_t reads = r->prompt ? (r->prompt - 1) / page_tokens : 0;
        uint32_t pages = (uint32_t)(computed_tokens(r) / page_tokens);
        uint64_t key = r->cache_salt ? fkv_mix64(r->cache_salt ^ 0x73616c74ull) : 0;
        for (uint32_t p = 0; p < pages; p++) {
            for (uint32_t t = 0; t < page_tokens; t++) tok[t] = fkv_req_token(&ts, r, p * page_tokens + t);
            key = fkv_page_key(key, tok, page_tokens);
            uint64_t kk = key ? key : 1; /* 0 marks an empty slot */
            uint32_t s = table_slot(tab, size - 1, kk);
            tab[s].key = kk;
            refs[k++] = (ref){s, NEVER, p, p < reads};
        }
    }
    n_refs = k;
    /* next reads, backward */
    for (uint64_t i = 0; i < size; i++) tab[i].next = NEVER;
    for (size_t j = n_refs; j-- > 0;) {
        refs[j].next = tab[refs[j].slot].next;
        if (refs[j].read) tab[refs[j].slot].next = (uint32_t)j;
    }
    for (size_t i = 0; i < n; i++) hit_tokens[i] = run_min(refs, n_refs, tab, size, cap_pages[i], page_tokens, &h);
out:
    free(refs);
    free(tab);
    free(tok);
    free(h.a);
    return st;
}
