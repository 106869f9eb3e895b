/* Full invariant check of a cache: O(pages + chunks + table entries), for
 * tests and the fuzzer, one function per family of invariants.  Returns 0
 * when every invariant holds, else 1 with the first broken one described
 * in msg. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "fairkv_quant.h"

static int bad(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return 1;
}

/* What the families share: the cache, the message, and what the chunk
 * walk counts for the later families. */
typedef struct ck {
    fkv_cache *c;
    char *msg;
    size_t len;
    uint32_t *refs;   /* [n_pages] chunks using each page */
    uint8_t *is_free; /* [n_pages] on the free stack */
    uint64_t by_dtype[FKV_N_DTYPES], qmeta[FKV_N_DTYPES], tokens;
    uint32_t resident, in_young;
} ck;

#define FAIL(...) return bad(cx->msg, cx->len, __VA_ARGS__)

/* The free stack: distinct valid pages, none referenced. */
static int check_free_stack(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t np = c->n_pages;
    if (c->n_free > np) FAIL("n_free=%u > n_pages=%u", c->n_free, np);
    for (uint32_t i = 0; i < c->n_free; i++) {
        uint32_t p = c->free_stack[i];
        if (p >= np) FAIL("free stack holds page %u >= %u", p, np);
        if (cx->is_free[p]) FAIL("page %u twice in the free stack", p);
        cx->is_free[p] = 1;
        if (c->page_ref[p]) FAIL("free page %u has refcount %u", p, c->page_ref[p]);
    }
    return 0;
}

/* Every chunk: its pages, size and precision, scales, place, policy
 * instance and owner; counts what the accounting family compares. */
static int check_chunks(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t pt = c->cfg.page_tokens, np = c->n_pages;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        if (ch->v.resident) {
            cx->resident++;
            cx->tokens += ch->v.n_tokens;
            cx->by_dtype[ch->v.dtype] += ch->v.n_pages;
            if (ch->v.pages != ch->pages) FAIL("chunk %llu: view pages do not alias", (unsigned long long)ch->id);
            if (ch->v.dtype == c->cfg.dtype && ch->v.n_pages != (ch->v.n_tokens + pt - 1) / pt)
                FAIL("chunk %llu: %u pages for %u tokens", (unsigned long long)ch->id, ch->v.n_pages, ch->v.n_tokens);
            if (ch->v.dtype != c->cfg.dtype) {
                fkv_kv_geom g;
                fkv__kv_geom(c, &g);
                if (ch->v.n_pages != fkv_quant_pages_needed(&g, ch->v.dtype, ch->v.n_tokens))
                    FAIL("chunk %llu: %u %s pages for %u tokens", (unsigned long long)ch->id, ch->v.n_pages,
                         fkv_dtype_name(ch->v.dtype), ch->v.n_tokens);
                if (ch->quant.qmeta_bytes != fkv_quant_meta_bytes(&g, ch->v.dtype, ch->v.n_tokens) ||
                    (c->k && !ch->v.qmeta))
                    FAIL("chunk %llu: scales missing or of the wrong size", (unsigned long long)ch->id);
                cx->qmeta[ch->v.dtype] += ch->quant.qmeta_bytes;
            }
            if (ch->v.n_tokens > ch->v.cap_tokens) FAIL("chunk %llu: over its size", (unsigned long long)ch->id);
            for (uint32_t j = 0; j < ch->v.n_pages; j++) {
                uint32_t p = ch->pages[j];
                if (p >= np || cx->is_free[p]) FAIL("chunk %llu uses page %u which is free or invalid", (unsigned long long)ch->id, p);
                cx->refs[p]++;
            }
            int want_place = ch->m.pins == 0;
            if (want_place != (ch->place != FKV__PLACE_NONE))
                FAIL("chunk %llu: pins=%u but place=%d", (unsigned long long)ch->id, ch->m.pins, ch->place);
        } else {
            if (ch->v.n_pages || ch->v.pages) FAIL("evicted chunk %llu still has pages", (unsigned long long)ch->id);
            if (ch->m.refs == 0 && !ch->host.demoted) FAIL("evicted chunk %llu is referenced by nobody but alive", (unsigned long long)ch->id);
            if (ch->place != FKV__PLACE_NONE) FAIL("evicted chunk %llu is still evictable", (unsigned long long)ch->id);
        }
        if (ch->place == FKV__PLACE_YOUNG) cx->in_young++;
        if (ch->place == FKV__PLACE_POLICY) {
            fkv__policy_inst *want = !c->cfg.quotas ? c->shared_inst
                                     : ch->owner ? ch->owner->inst
                                     : c->cfg.quotas == FKV_QUOTA_TENANT ? ch->tenant->cached : c->shared_inst;
            if (ch->inst != want) FAIL("chunk %llu is in the wrong policy instance", (unsigned long long)ch->id);
        }
        if (ch->owner) {
            int found = 0;
            for (uint32_t i = 0; i < ch->owner->n_chunks && !found; i++) found = ch->owner->table[i] == ch;
            if (!found) FAIL("chunk %llu: owner %llu does not hold it", (unsigned long long)ch->id,
                             (unsigned long long)ch->owner->request_id);
        }
    }
    return 0;
}

/* The host lists: the demoted idle chunks, and only they, on the host
 * lists (main and small) and on their tenant's, in the same order, with
 * their counts and the small and main lists' bytes; the small list empty
 * with host_policy lru. */
static int check_host_lists(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t listed = 0;
    uint64_t bytes[2] = {0, 0};
    if (c->cfg.host_policy == FKV_HOST_LRU && c->host_small.head) FAIL("host small list used with host_policy lru");
    for (int sm = 0; sm < 2; sm++) {
        const fkv__list *l = sm ? &c->host_small : &c->host_lru;
        for (fkv__chunk *ch = l->head, *prev = NULL; ch; prev = ch, ch = ch->host.lru.next) {
            if (ch->host.lru.prev != prev) FAIL("host list: chunk %llu mislinked", (unsigned long long)ch->id);
            if (!ch->host.demoted || ch->m.refs) FAIL("host list: chunk %llu demoted=%d refs=%u", (unsigned long long)ch->id, ch->host.demoted, ch->m.refs);
            if (ch->host.small != sm) FAIL("host list: chunk %llu on the %s list, marked otherwise", (unsigned long long)ch->id, sm ? "small" : "main");
            if (ch == l->tail && ch->host.lru.next) FAIL("host list: tail not last");
            if (++listed > c->host_n) FAIL("host lists longer than their count %u", c->host_n);
            bytes[sm] += fkv__host_bytes(c, ch);
        }
    }
    if (listed != c->host_n) FAIL("host lists hold %u chunks, count %u", listed, c->host_n);
    if (bytes[0] != c->host_main_bytes || bytes[1] != c->host_small_bytes)
        FAIL("host lists hold %llu + %llu bytes, count %llu + %llu", (unsigned long long)bytes[0],
             (unsigned long long)bytes[1], (unsigned long long)c->host_main_bytes, (unsigned long long)c->host_small_bytes);
    /* each tenant's lists: its chunks of the host lists, in their order */
    uint32_t per_tenant = 0;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        const fkv__tenant *t = c->tenants[i];
        uint32_t n = 0;
        for (int sm = 0; sm < 2; sm++) {
            const fkv__list *tl = sm ? &t->host_small : &t->host_lru;
            const fkv__chunk *last = NULL;
            for (fkv__chunk *ch = tl->head, *prev = NULL; ch; prev = ch, last = ch, ch = ch->host.tlru.next) {
                if (ch->host.tlru.prev != prev || ch->host.tenant != t || ch->host.small != sm)
                    FAIL("tenant %llu host list: chunk %llu mislinked", (unsigned long long)t->id, (unsigned long long)ch->id);
                if (prev && prev->host.stamp >= ch->host.stamp)
                    FAIL("tenant %llu host list: chunk %llu out of order", (unsigned long long)t->id, (unsigned long long)ch->id);
                if (!ch->host.lru.prev && (sm ? c->host_small.head : c->host_lru.head) != ch)
                    FAIL("tenant %llu host list: chunk %llu not on the host list", (unsigned long long)t->id, (unsigned long long)ch->id);
                if (++n > t->host_n) FAIL("tenant %llu host list longer than its count %u", (unsigned long long)t->id, t->host_n);
            }
            if (tl->tail != last) FAIL("tenant %llu host list: tail not last", (unsigned long long)t->id);
        }
        if (n != t->host_n) FAIL("tenant %llu host lists hold %u chunks, count %u", (unsigned long long)t->id, n, t->host_n);
        per_tenant += n;
    }
    if (per_tenant != c->host_n) FAIL("tenants' host lists hold %u chunks, the host lists %u", per_tenant, c->host_n);
    return 0;
}

/* The tiers' bytes: offloaded and demoted chunks are holes with a host
 * copy, and the host's bytes are theirs, in total and per tenant; the
 * device's bytes as the metric reports them. */
static int check_tier_bytes(ck *cx)
{
    fkv_cache *c = cx->c;
    uint64_t host = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        if (ch->host.demoted && (!ch->v.offloaded || !c->cfg.host_demote))
            FAIL("chunk %llu: demoted but not in the host tier", (unsigned long long)ch->id);
        if (ch->host.demoted && !ch->m.refs && !ch->host.lru.prev && c->host_lru.head != ch && c->host_small.head != ch)
            FAIL("chunk %llu: demoted and idle, not on the host list", (unsigned long long)ch->id);
        if (!ch->v.offloaded) {
            if (ch->host.kv || ch->host.qmeta || ch->host.pages)
                FAIL("chunk %llu: a host copy but not offloaded", (unsigned long long)ch->id);
            continue;
        }
        if (ch->v.resident || ch->v.dropped)
            FAIL("chunk %llu: offloaded but resident=%d dropped=%d", (unsigned long long)ch->id, ch->v.resident,
                 ch->v.dropped);
        if (!ch->host.pages || (c->k && !ch->host.kv))
            FAIL("chunk %llu: offloaded without its bytes", (unsigned long long)ch->id);
        host += (uint64_t)ch->host.pages * c->page_bytes + ch->host.qmeta_bytes;
    }
    if (host != c->host_used) FAIL("host tier holds %llu bytes, its chunks %llu", (unsigned long long)c->host_used, (unsigned long long)host);
    if (host > c->cfg.host_capacity_bytes) FAIL("host tier over its capacity: %llu bytes", (unsigned long long)host);
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        uint64_t tb = 0;
        for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
            if (ch->v.offloaded && ch->tenant == t) tb += (uint64_t)ch->host.pages * c->page_bytes + ch->host.qmeta_bytes;
        if (tb != t->host_bytes) FAIL("tenant %llu: %llu host bytes charged, its chunks hold %llu", (unsigned long long)t->id, (unsigned long long)t->host_bytes, (unsigned long long)tb);
    }
    /* device bytes as the metric reports them: pages by precision and scales */
    double dev = 0, want = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
        if (ch->v.resident) want += (double)ch->v.n_pages * (double)c->page_bytes + (double)ch->quant.qmeta_bytes;
    for (int d = 0; d < FKV_N_DTYPES; d++) dev += (double)c->pages_by_dtype[d] * (double)c->page_bytes + (double)c->qmeta_bytes[d];
    if (dev != want) FAIL("device tier accounts %.0f bytes, its chunks hold %.0f", dev, want);
    return 0;
}

/* The cache's counts of resident chunks, tokens, scales and pages by
 * precision against the chunk walk's. */
static int check_accounting(ck *cx)
{
    fkv_cache *c = cx->c;
    if (cx->resident != c->n_resident) FAIL("n_resident=%u, counted %u", c->n_resident, cx->resident);
    if (cx->tokens != c->resident_tokens) FAIL("resident_tokens=%llu, counted %llu", (unsigned long long)c->resident_tokens, (unsigned long long)cx->tokens);
    for (int d = 0; d < FKV_N_DTYPES; d++)
        if (cx->qmeta[d] != c->qmeta_bytes[d]) FAIL("qmeta bytes of %s: %llu, counted %llu", fkv_dtype_name((fkv_dtype)d),
                                                (unsigned long long)c->qmeta_bytes[d], (unsigned long long)cx->qmeta[d]);
    for (int d = 0; d < FKV_N_DTYPES; d++)
        if (cx->by_dtype[d] != c->pages_by_dtype[d]) FAIL("pages_by_dtype[%d]=%llu, counted %llu", d, (unsigned long long)c->pages_by_dtype[d], (unsigned long long)cx->by_dtype[d]);
    return 0;
}

/* Every page free or used, its refcount the chunks using it, its fill. */
static int check_pages(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t pt = c->cfg.page_tokens, np = c->n_pages;
    uint64_t fill = 0;
    uint32_t used = 0;
    for (uint32_t p = 0; p < np; p++) {
        if (cx->refs[p] != c->page_ref[p]) FAIL("page %u: refcount %u, referenced by %u chunks", p, c->page_ref[p], cx->refs[p]);
        if (!cx->is_free[p] && !cx->refs[p]) FAIL("page %u is neither free nor used (leaked)", p);
        if (cx->refs[p]) used++, fill += c->page_fill[p];
        if (c->page_fill[p] > pt) FAIL("page %u: fill %u > %u", p, c->page_fill[p], pt);
    }
    if (used + c->n_free != np) FAIL("used %u + free %u != %u pages", used, c->n_free, np);
    if (fill != c->fill_sum) FAIL("fill_sum=%llu, counted %llu", (unsigned long long)c->fill_sum, (unsigned long long)fill);
    return 0;
}

/* The young FIFO holds the chunks placed young. */
static int check_young(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t ny = 0;
    for (fkv__chunk *ch = c->young.head; ch; ch = ch->lk.young.next) ny++;
    if (ny != cx->in_young) FAIL("young list has %u chunks, %u are marked young", ny, cx->in_young);
    return 0;
}

/* The TTL tier: exactly the cached chunks with a prediction, each filed
 * where its key says (ttl.c), the lists and the heap consistent. */
static int check_ttl(ck *cx)
{
    fkv_cache *c = cx->c;
    uint32_t n_ttl = 0;
    double near = (double)c->ttl_next * FKV__TTL_W, far = (double)c->ttl_end * FKV__TTL_W;
    if (c->ttl_end <= c->ttl_next && c->ttl_n) FAIL("TTL wheel ends at bucket %llu before %llu", (unsigned long long)c->ttl_end, (unsigned long long)c->ttl_next);
    if (c->ttl_end - c->ttl_next > FKV__TTL_NB) FAIL("TTL wheel spans %llu buckets", (unsigned long long)(c->ttl_end - c->ttl_next));
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        int want = c->cfg.quotas && !ch->owner && ch->ttl.req > 0 && ch->place == FKV__PLACE_POLICY;
        if (ch->ttl.where == FKV__TTL_NONE) {
            /* (a failed heap push leaves one out: tolerated when the heap is full) */
            if (want && c->ttl_heap.n < c->ttl_heap.cap) FAIL("chunk %llu: cached with a TTL but not in the TTL tier", (unsigned long long)ch->id);
            continue;
        }
        n_ttl++;
        if (!want) FAIL("chunk %llu: in the TTL tier without a cached TTL", (unsigned long long)ch->id);
        if (ch->ttl.where == FKV__TTL_HEAP) {
            uint32_t i = ch->ttl.idx - 1;
            if (!ch->ttl.idx || i >= c->ttl_heap.n || c->ttl_heap.a[i].item != ch) FAIL("chunk %llu: TTL heap index %u wrong", (unsigned long long)ch->id, ch->ttl.idx);
            if (c->ttl_heap.a[i].key != fkv__key_enc(ch->ttl.key) || !(ch->ttl.key < near)) FAIL("chunk %llu: TTL heap key %g, near below %g", (unsigned long long)ch->id, ch->ttl.key, near);
        } else if (ch->ttl.where == FKV__TTL_WHEEL) {
            if (ch->ttl.key < near || !(ch->ttl.key < far)) FAIL("chunk %llu: TTL key %g on the wheel [%g, %g)", (unsigned long long)ch->id, ch->ttl.key, near, far);
        } else if (ch->ttl.key < far) {
            FAIL("chunk %llu: TTL key %g in the overflow, wheel ends at %g", (unsigned long long)ch->id, ch->ttl.key, far);
        }
    }
    if (n_ttl != c->ttl_n) FAIL("TTL tier counts %u chunks, %u are in it", c->ttl_n, n_ttl);
    uint32_t listed = 0;
    for (uint32_t b = 0; b <= FKV__TTL_NB; b++) {
        fkv__chunk *prev = NULL;
        for (fkv__chunk *ch = b < FKV__TTL_NB ? c->ttl_wheel[b].head : c->ttl_over.head; ch; prev = ch, ch = ch->lk.ttl.next) {
            int where = b < FKV__TTL_NB ? FKV__TTL_WHEEL : FKV__TTL_OVER;
            if (ch->ttl.where != where || ch->lk.ttl.prev != prev) FAIL("TTL list %u: chunk %llu misfiled or mislinked", b, (unsigned long long)ch->id);
            if (where == FKV__TTL_WHEEL && (uint64_t)(ch->ttl.key / FKV__TTL_W) % FKV__TTL_NB != b) FAIL("TTL key %g in wheel slot %u", ch->ttl.key, b);
            if (++listed > n_ttl) FAIL("TTL lists hold more chunks than the tier (a cycle?)");
        }
    }
    if (listed + c->ttl_heap.n != n_ttl) FAIL("TTL lists %u + heap %u != %u chunks", listed, c->ttl_heap.n, n_ttl);
    uint32_t on_wheel = 0;
    for (uint32_t b = 0; b < FKV__TTL_NB; b++)
        for (fkv__chunk *ch = c->ttl_wheel[b].head; ch && on_wheel <= n_ttl; ch = ch->lk.ttl.next) on_wheel++;
    if (on_wheel != c->ttl_n_wheel) FAIL("TTL wheel counts %u chunks, holds %u", c->ttl_n_wheel, on_wheel);
    return 0;
}

/* Sequences: tables, refs, pins, usage, and the policy instances' sizes. */
static int check_seqs(ck *cx)
{
    fkv_cache *c = cx->c;
    uint64_t inst_total = c->shared_inst->n;
    for (uint32_t i = 0; i < c->n_tenants; i++)
        if (c->tenants[i]->cached) inst_total += c->tenants[i]->cached->n;
    for (uint32_t i = 0; i < c->n_owners; i++) {
        fkv_seq *s = c->owners[i];
        if (s->owner_idx != i) FAIL("request %llu: owner index %u != %u", (unsigned long long)s->request_id, s->owner_idx, i);
        uint32_t pos = 0;
        uint64_t usage = 0;
        for (uint32_t k = 0; k < s->n_chunks; k++) {
            fkv__chunk *ch = s->table[k];
            if (ch->v.start != pos) FAIL("request %llu: chunk %u starts at %u, expected %u", (unsigned long long)s->request_id, k, ch->v.start, pos);
            pos += ch->v.n_tokens;
        }
        if (pos != s->len) FAIL("request %llu: chunks hold %u tokens, len=%u", (unsigned long long)s->request_id, pos, s->len);
        for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
            if (ch->owner == s) usage += ch->v.n_pages;
        if (usage != s->usage_pages) FAIL("request %llu: usage %llu pages, counted %llu", (unsigned long long)s->request_id, (unsigned long long)s->usage_pages, (unsigned long long)usage);
        if (s->inst) inst_total += s->inst->n;
    }
    uint64_t placed = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        uint32_t r = 0, p = 0;
        for (uint32_t i = 0; i < c->n_owners; i++) {
            fkv_seq *s = c->owners[i];
            for (uint32_t k = 0; k < s->n_chunks; k++)
                if (s->table[k] == ch) r++, p += s->pins;
        }
        if (r != ch->m.refs) FAIL("chunk %llu: refs=%u, held by %u tables", (unsigned long long)ch->id, ch->m.refs, r);
        if (p != ch->m.pins) FAIL("chunk %llu: pins=%u, expected %u", (unsigned long long)ch->id, ch->m.pins, p);
        placed += ch->place == FKV__PLACE_POLICY;
    }
    if (placed != inst_total) FAIL("policy instances hold %llu chunks, %llu are placed", (unsigned long long)inst_total, (unsigned long long)placed);
    return 0;
}

/* The prefix index: every entry names a page of a live chunk, is reached
 * by probing, is counted; the overflow counts. */
static int check_prefix(ck *cx)
{
    fkv_cache *c = cx->c;
    fkv__prefix_drain(c);
    uint64_t n = 0;
    for (uint64_t i = 0; i < (c->pbmask + 1) * FKV__PBUCKET; i++) {
        fkv__pentry *e = &c->ptab[i];
        if (!e->key) continue;
        n++;
        uint32_t lp = e->chunk->v.resident || e->chunk->host.demoted ? fkv__lpages(c, e->chunk) : 0, j = 0;
        while (j < lp && e->chunk->phash[j] != e->key) j++;
        if (j == lp || e->chunk->v.start % c->cfg.page_tokens)
            FAIL("prefix entry %llx does not match its chunk", (unsigned long long)e->key);
        if (fkv__prefix_find(c, e->key) != e) FAIL("prefix entry %llx unreachable by probing", (unsigned long long)e->key);
    }
    /* every entry must point at a live chunk: count the entries reached
     * from live chunks */
    uint64_t live = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
        for (uint32_t j = 0; (ch->v.resident || ch->host.demoted) && j < fkv__lpages(c, ch); j++) {
            fkv__pentry *e = ch->phash[j] ? fkv__prefix_find(c, ch->phash[j]) : NULL;
            live += e && e->chunk == ch;
        }
    if (live != n) FAIL("%llu prefix entries, %llu reached from live chunks", (unsigned long long)n, (unsigned long long)live);
    if (n != c->pcount) FAIL("prefix index counts %llu entries, holds %llu", (unsigned long long)c->pcount, (unsigned long long)n);
    /* each bucket's overflow count is the number of entries that passed
     * it on the way from their home bucket (exact below 255) */
    uint64_t nb = c->pbmask + 1;
    uint32_t *passed = calloc(nb, sizeof *passed);
    if (passed) {
        for (uint64_t i = 0; i < nb * FKV__PBUCKET; i++) {
            uint64_t key = c->ptab[i].key;
            if (!key) continue;
            for (uint64_t b = key & c->pbmask; b != i / FKV__PBUCKET; b = (b + 1) & c->pbmask) passed[b]++;
        }
        for (uint64_t b = 0; b < nb; b++)
            if (c->povf[b] < 255 && c->povf[b] != passed[b]) { /* 255 is sticky: an upper bound */
                unsigned long long got = c->povf[b], want = passed[b];
                free(passed);
                FAIL("prefix bucket %llu: overflow count %llu, %llu entries pass it", (unsigned long long)b, got, want);
            }
        free(passed);
    }
    return 0;
}

/* Tenants: the charge of every chunk (tenant.c: the tenant of the request
 * that allocated its pages, so an owned chunk's is its owner's), the page,
 * seq and evictable counts, the shares. */
static int check_tenants(ck *cx)
{
    fkv_cache *c = cx->c;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        uint32_t i = 0;
        while (i < c->n_tenants && c->tenants[i] != ch->tenant) i++;
        if (i == c->n_tenants) FAIL("chunk %llu: charged to no known tenant", (unsigned long long)ch->id);
        if (ch->owner && ch->owner->tenant != ch->tenant)
            FAIL("chunk %llu: owned by request %llu of tenant %llu but charged to tenant %llu",
                 (unsigned long long)ch->id, (unsigned long long)ch->owner->request_id,
                 (unsigned long long)ch->owner->tenant->id, (unsigned long long)ch->tenant->id);
    }
    double share_sum = 0, demand_sum = 0;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        uint64_t pages = 0, evictable = 0, seqs = 0;
        double qsum = 0;
        for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next)
            if (ch->tenant == t) pages += ch->v.n_pages, evictable += ch->place == FKV__PLACE_POLICY;
        for (uint32_t k = 0; k < c->n_owners; k++)
            if (c->owners[k]->tenant == t) seqs++, qsum += c->owners[k]->quota_pages;
        if (pages != t->pages) FAIL("tenant %llu: %llu pages charged, its chunks hold %llu", (unsigned long long)t->id, (unsigned long long)t->pages, (unsigned long long)pages);
        if (evictable != t->n_evictable) FAIL("tenant %llu: %u evictable chunks counted, %llu placed", (unsigned long long)t->id, t->n_evictable, (unsigned long long)evictable);
        if (seqs != t->n_seqs) FAIL("tenant %llu: %u open sequences counted, %llu open", (unsigned long long)t->id, t->n_seqs, (unsigned long long)seqs);
        if (c->cfg.quotas == FKV_QUOTA_TENANT && !c->quota_dirty) {
            if (t->share < 0 || (c->cfg.share_guarantee != 2 && t->demand <= 0 && t->share != 0)) FAIL("tenant %llu: share %.3f for demand %.3f", (unsigned long long)t->id, t->share, t->demand);
            if (seqs && (qsum < t->share * (1 - 1e-9) - 1e-9 || qsum > t->share * (1 + 1e-9) + 1e-9))
                FAIL("tenant %llu: its requests' quotas sum to %.3f, its share is %.3f", (unsigned long long)t->id, qsum, t->share);
            share_sum += t->share;
            demand_sum += t->demand;
        }
    }
    if (c->cfg.quotas == FKV_QUOTA_TENANT && !c->quota_dirty && (c->cfg.share_guarantee == 2 ? share_sum > 0 : demand_sum > 0) &&
        (share_sum < c->n_pages * (1 - 1e-9) || share_sum > c->n_pages * (1 + 1e-9)))
        FAIL("tenant shares sum to %.3f pages, the pool has %u", share_sum, c->n_pages);
    return 0;
}

/* Request quotas share the whole pool among the open requests; no pinned
 * chunk was ever evicted. */
static int check_quotas(ck *cx)
{
    fkv_cache *c = cx->c;
    if (c->cfg.quotas == FKV_QUOTA_REQUEST && c->n_owners && !c->quota_dirty) {
        double sum = 0;
        for (uint32_t i = 0; i < c->n_owners; i++) sum += c->owners[i]->quota_pages;
        if (sum < c->n_pages * (1 - 1e-9) || sum > c->n_pages * (1 + 1e-9))
            FAIL("quotas sum to %.3f pages, the pool has %u", sum, c->n_pages);
    }
    if (c->pinned_evictions) FAIL("%llu pinned chunks were evicted", (unsigned long long)c->pinned_evictions);
    return 0;
}

int fkv__cache_check(fkv_cache *c, char *msg, size_t len)
{
    ck cx = {.c = c, .msg = msg, .len = len};
    cx.refs = calloc(c->n_pages, sizeof *cx.refs);
    cx.is_free = calloc(c->n_pages, 1);
    /* the families in order; the first broken invariant is reported */
    int rc = !cx.refs || !cx.is_free ? bad(msg, len, "out of memory in the checker")
             : check_free_stack(&cx) || check_chunks(&cx) || check_host_lists(&cx) || check_tier_bytes(&cx) ||
                   fkv__tree_check(c, msg, len) || check_accounting(&cx) || check_pages(&cx) || check_young(&cx) ||
                   check_ttl(&cx) || check_seqs(&cx) || check_prefix(&cx) || check_tenants(&cx) ||
                   check_quotas(&cx);
    free(cx.refs);
    free(cx.is_free);
    return rc;
}
