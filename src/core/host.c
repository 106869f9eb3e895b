/* The host copy of a chunk and the host lists (the tier's rules are in
 * demote.c).  A copy holds the chunk's K/V, layer by layer, K then V, page
 * by page (NULL with phantom storage, which only accounts the bytes), its
 * scales, dtype and page count; its bytes are charged to ch->tenant.  An
 * idle demoted chunk is on a host list and on its tenant's, in the same
 * order; the eviction orders (fkv_config.host_policy) keep those lists. */
#include <stdlib.h>
#include <string.h>

#include "core/ghost.h"
#include "core/internal.h"

/* The host copy of a chunk of np pages takes its quantization scales, its
 * dtype and its page count; the scales leave the resident accounting. */
void fkv__host_take_scales(fkv_cache *c, fkv__chunk *ch, uint32_t np)
{
    ch->host.qmeta = (void *)ch->v.qmeta;
    ch->host.qmeta_bytes = ch->quant.qmeta_bytes;
    if (ch->quant.qmeta_bytes) c->qmeta_bytes[ch->v.dtype] -= ch->quant.qmeta_bytes;
    ch->v.qmeta = NULL;
    ch->quant.qmeta_bytes = 0;
    ch->host.dtype = (uint8_t)ch->v.dtype;
    ch->host.pages = np;
}

/* A chunk's K/V pages copied out to one host buffer, layer by layer, K
 * then V, page by page (the layout fkv_seq_reload copies back); NULL when
 * out of memory.  cpu storage only. */
uint8_t *fkv__host_copy_out(const fkv_cache *c, const fkv__chunk *ch)
{
    uint32_t np = ch->v.n_pages;
    uint64_t stride = c->layer_page_stride;
    uint8_t *buf = malloc((size_t)np * c->page_bytes);
    if (!buf) return NULL;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t j = 0; j < np; j++)
                memcpy(buf + (((size_t)l * 2 + (size_t)kv) * np + j) * stride,
                       (kv ? c->v[l] : c->k[l]) + (size_t)ch->pages[j] * stride, stride);
    return buf;
}

uint64_t fkv__host_bytes(const fkv_cache *c, const fkv__chunk *ch)
{
    return (uint64_t)ch->host.pages * c->page_bytes + ch->host.qmeta_bytes;
}

void fkv__host_charge(fkv_cache *c, fkv__chunk *ch, int sign)
{
    uint64_t b = fkv__host_bytes(c, ch);
    if (sign > 0) c->host_used += b, ch->tenant->host_bytes += b;
    else c->host_used -= b, ch->tenant->host_bytes -= b;
}

/* The host lists.  Idle demoted chunks wait on one of two lists, oldest
 * first: the main list (host_lru), and with host_policy s3fifo or arc the
 * small one (host_small: s3fifo's small FIFO, arc's T1; the main list is
 * s3fifo's main FIFO, arc's T2); with lru only the main list, in recency
 * order.  The same chunks are on one pair of lists per tenant in the same
 * order, so that the victim search under tenant shares takes the chosen
 * tenants' oldest chunk at once rather than walking the whole list to it;
 * stamps order the heads of different tenants' lists. */
static fkv__list *glist(fkv_cache *c, int small) { return small ? &c->host_small : &c->host_lru; }
static fkv__list *tlist(fkv__tenant *t, int small) { return small ? &t->host_small : &t->host_lru; }

void fkv__host_list_push(fkv_cache *c, fkv__chunk *ch) /* most recent at the tail */
{
    int sm = ch->host.small;
    fkv__list_push_back(glist(c, sm), ch, FKV__LINK(host.lru));
    c->host_n++;
    if (sm) c->host_small_bytes += fkv__host_bytes(c, ch);
    else c->host_main_bytes += fkv__host_bytes(c, ch);
    fkv__tenant *t = ch->tenant;
    ch->host.tenant = t;
    ch->host.stamp = c->host_stamp++;
    fkv__list_push_back(tlist(t, sm), ch, FKV__LINK(host.tlru));
    t->host_n++;
}

static int on_list(const fkv_cache *c, const fkv__chunk *ch)
{
    return ch->host.lru.prev || ch->host.lru.next || c->host_lru.head == ch || c->host_small.head == ch;
}

void fkv__host_list_remove(fkv_cache *c, fkv__chunk *ch)
{
    if (!on_list(c, ch)) return;
    int sm = ch->host.small;
    fkv__list_unlink(glist(c, sm), ch, FKV__LINK(host.lru));
    c->host_n--;
    if (sm) c->host_small_bytes -= fkv__host_bytes(c, ch);
    else c->host_main_bytes -= fkv__host_bytes(c, ch);
    fkv__tenant *t = ch->host.tenant;
    fkv__list_unlink(tlist(t, sm), ch, FKV__LINK(host.tlru));
    ch->host.tenant = NULL;
    t->host_n--;
}

/* ------------------------------------------------------- eviction orders */
/* A chunk's key in the ghosts: its last page's prefix key (a demoted chunk
 * is whole and indexed, so it has one). */
static uint64_t host_key(const fkv_cache *c, const fkv__chunk *ch)
{
    uint32_t lp = fkv__lpages(c, ch);
    return lp ? ch->phash[lp - 1] : 0;
}

static uint64_t s3fifo_small_target(const fkv_cache *c) { return c->cfg.host_capacity_bytes / 10; }

fkv_status fkv__host_order_init(fkv_cache *c)
{
    if (c->cfg.host_policy == FKV_HOST_LRU) return FKV_OK;
    c->host_ghost = fkv__ghost_new();
    if (c->cfg.host_policy == FKV_HOST_ARC) c->host_ghost2 = fkv__ghost_new();
    return c->host_ghost && (c->cfg.host_policy != FKV_HOST_ARC || c->host_ghost2) ? FKV_OK : FKV_ENOMEM;
}

void fkv__host_order_fini(fkv_cache *c)
{
    fkv__ghost_free(c->host_ghost);
    fkv__ghost_free(c->host_ghost2);
    c->host_ghost = c->host_ghost2 = NULL;
}

/* A chunk just demoted.  s3fifo: to the main FIFO if it was read from the
 * host tier before (promoted, then demoted again: a return) or its key is
 * in the ghost (taken out of it, frequency 0); else to the small FIFO.
 * arc: a key in B1 raises the target p by max(|B2| / |B1|, 1) x its
 * bytes, one in B2 lowers it by max(|B1| / |B2|, 1) x its bytes (sizes in
 * bytes, p within [0, capacity]); either, or a read before, puts it on T2,
 * anything else on T1. */
void fkv__host_list_enter(fkv_cache *c, fkv__chunk *ch)
{
    ch->host.small = 0;
    if (c->cfg.host_policy == FKV_HOST_S3FIFO) {
        if (fkv__ghost_take(c->host_ghost, host_key(c, ch))) ch->host.freq = 0;
        else if (!ch->host.read) ch->host.small = 1, ch->host.freq = 0;
    } else if (c->cfg.host_policy == FKV_HOST_ARC) {
        uint64_t key = host_key(c, ch);
        double b = (double)fkv__host_bytes(c, ch), cap = (double)c->cfg.host_capacity_bytes;
        double b1 = (double)fkv__ghost_bytes(c->host_ghost), b2 = (double)fkv__ghost_bytes(c->host_ghost2);
        if (fkv__ghost_take(c->host_ghost, key)) {
            double d = b1 >= b2 ? b : b * b2 / b1;
            c->host_arc_p = c->host_arc_p + d < cap ? c->host_arc_p + d : cap;
        } else if (fkv__ghost_take(c->host_ghost2, key)) {
            double d = b2 >= b1 ? b : b * b1 / b2;
            c->host_arc_p = c->host_arc_p > d ? c->host_arc_p - d : 0;
        } else if (!ch->host.read) {
            ch->host.small = 1;
        }
    }
    fkv__host_list_push(c, ch);
}

/* A match attaches it (its first holder): it leaves its list, and the read
 * counts (s3fifo: frequency + 1, at most 3; arc: it returns on T2). */
void fkv__host_list_read(fkv_cache *c, fkv__chunk *ch)
{
    fkv__host_list_remove(c, ch);
    if (ch->host.freq < 3) ch->host.freq++;
    ch->host.read = 1;
    if (c->cfg.host_policy == FKV_HOST_ARC) ch->host.small = 0;
}

/* The oldest chunk on one of the lists among the picked tenants. */
static fkv__chunk *oldest(fkv_cache *c, int small, int all)
{
    if (all) return glist(c, small)->head;
    fkv__chunk *best = NULL;
    for (uint32_t i = 0; i < c->n_tenants; i++) {
        fkv__tenant *t = c->tenants[i];
        fkv__chunk *h = t->host_pick ? tlist(t, small)->head : NULL;
        if (h && (!best || h->host.stamp < best->host.stamp)) best = h;
    }
    return best;
}

/* lru: the oldest.  s3fifo: from the small FIFO while it holds more than
 * a tenth of the capacity (or the main one is empty), else from the main
 * one; a head read while in the tier moves on (small: to the main FIFO's
 * tail, frequency 0; main: back to its tail, frequency - 1), the first
 * head with frequency 0 is the pick.  Without commit the head of the
 * FIFO it would take from, frequency aside.  arc: T1's oldest while T1
 * holds more than p bytes (or T2 is empty), else T2's oldest. */
fkv__chunk *fkv__host_order_pick(fkv_cache *c, int all, int commit)
{
    if (c->cfg.host_policy == FKV_HOST_LRU) return oldest(c, 0, all);
    for (;;) {
        fkv__chunk *s = oldest(c, 1, all), *m = oldest(c, 0, all);
        if (!s && !m) return NULL;
        double limit = c->cfg.host_policy == FKV_HOST_S3FIFO ? (double)s3fifo_small_target(c) : c->host_arc_p;
        int from_small = s && (!m || (double)c->host_small_bytes > limit);
        fkv__chunk *h = from_small ? s : m;
        if (c->cfg.host_policy == FKV_HOST_ARC || !h->host.freq || !commit) return h;
        fkv__host_list_remove(c, h);
        if (from_small) h->host.small = 0, h->host.freq = 0;
        else h->host.freq--;
        fkv__host_list_push(c, h);
    }
}

/* ch leaves the host tier for room.  s3fifo: from the small FIFO, its key
 * goes to the ghost (bytes up to the main FIFO's nine tenths of the
 * capacity).  arc: from T1 to B1 (|T1| + |B1| within the capacity), from
 * T2 to B2 (|T2| + |B2| within it).  A ghost out of memory forgets the
 * key: the chunk is then treated as new if it returns. */
void fkv__host_evicting(fkv_cache *c, fkv__chunk *ch)
{
    uint64_t cap = c->cfg.host_capacity_bytes, b = fkv__host_bytes(c, ch);
    if (c->cfg.host_policy == FKV_HOST_S3FIFO) {
        if (ch->host.small) (void)fkv__ghost_add(c->host_ghost, host_key(c, ch), b, cap - s3fifo_small_target(c));
    } else if (c->cfg.host_policy == FKV_HOST_ARC) {
        uint64_t t = ch->host.small ? c->host_small_bytes : c->host_main_bytes;
        t -= b; /* the list's bytes once ch has left */
        (void)fkv__ghost_add(ch->host.small ? c->host_ghost : c->host_ghost2, host_key(c, ch), b, cap > t ? cap - t : 0);
    }
}

void fkv__host_free(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->v.offloaded) return;
    fkv__host_charge(c, ch, -1);
    if (ch->host.demoted) { /* its index entries stayed with it in the host tier */
        fkv__host_list_remove(c, ch);
        uint32_t lp = fkv__lpages(c, ch);
        for (uint32_t j = 0; j < lp; j++)
            if (ch->phash[j]) fkv__prefix_remove(c, ch->phash[j], ch);
        ch->host.demoted = 0;
    }
    free(ch->host.kv);
    free(ch->host.qmeta);
    ch->host.kv = NULL;
    ch->host.qmeta = NULL;
    ch->host.qmeta_bytes = 0;
    ch->host.pages = 0;
    ch->v.offloaded = 0;
}

/* ---------------------------------------------------------------- demotion */
