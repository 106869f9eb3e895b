/* The ghost queue of ghost.h: a ring of (key, bytes) in insertion order
 * and an open-addressing table (linear probing, backward-shift deletion)
 * from key to its place in the ring.  A key taken out leaves a dead place
 * in the ring, skipped when the oldest are dropped. */
#include "core/ghost.h"

#include <stdlib.h>

#include "util/rng.h"

typedef struct gent {
    uint64_t key, bytes;
    int live;
} gent;

struct fkv__ghost {
    gent *ring;       /* [rmask + 1]: places head .. tail - 1 (absolute, masked) */
    uint64_t rmask, head, tail;
    uint64_t *slot;   /* [tmask + 1]: absolute place + 1, 0 = empty */
    uint64_t tmask;
    uint64_t n, bytes; /* live keys, their bytes */
};

fkv__ghost *fkv__ghost_new(void)
{
    fkv__ghost *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ring = malloc(16 * sizeof *g->ring);
    g->slot = calloc(32, sizeof *g->slot);
    if (!g->ring || !g->slot) {
        fkv__ghost_free(g);
        return NULL;
    }
    g->rmask = 15;
    g->tmask = 31;
    return g;
}

void fkv__ghost_free(fkv__ghost *g)
{
    if (!g) return;
    free(g->ring);
    free(g->slot);
    free(g);
}

static uint64_t probe(const fkv__ghost *g, uint64_t key)
{
    uint64_t i = fkv_mix64(key) & g->tmask;
    while (g->slot[i] && g->ring[(g->slot[i] - 1) & g->rmask].key != key) i = (i + 1) & g->tmask;
    return i;
}

static void table_delete(fkv__ghost *g, uint64_t i)
{
    uint64_t j = i;
    for (;;) {
        g->slot[i] = 0;
        for (;;) {
            j = (j + 1) & g->tmask;
            if (!g->slot[j]) return;
            uint64_t home = fkv_mix64(g->ring[(g->slot[j] - 1) & g->rmask].key) & g->tmask;
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        g->slot[i] = g->slot[j];
        i = j;
    }
}

/* Room for one more place in the ring and one more key in the table (at
 * most half full). */
static int grow(fkv__ghost *g)
{
    int ring_full = g->tail - g->head > g->rmask, table_full = 2 * (g->n + 1) > g->tmask + 1;
    if (!ring_full && !table_full) return 0;
    /* a full ring: the live places move to a ring twice as large, or as
     * large when at least half are dead (keys taken out), so the ring stays
     * within twice the live keys; a table over half full doubles */
    uint64_t rsize = !ring_full ? 0 : 2 * g->n + 2 > g->rmask + 1 ? 2 * (g->rmask + 1) : g->rmask + 1;
    uint64_t tsize = table_full ? 2 * (g->tmask + 1) : g->tmask + 1;
    gent *r = ring_full ? malloc(rsize * sizeof *r) : NULL;
    uint64_t *s = table_full ? calloc(tsize, sizeof *s) : NULL;
    if ((ring_full && !r) || (table_full && !s)) {
        free(r);
        free(s);
        return -1;
    }
    if (ring_full) {
        uint64_t t = 0;
        for (uint64_t p = g->head; p < g->tail; p++)
            if (g->ring[p & g->rmask].live) r[t++] = g->ring[p & g->rmask];
        free(g->ring);
        g->ring = r;
        g->rmask = rsize - 1;
        g->head = 0;
        g->tail = t;
    }
    if (table_full) {
        free(g->slot);
        g->slot = s;
        g->tmask = tsize - 1;
    }
    for (uint64_t i = 0; i <= g->tmask; i++) g->slot[i] = 0;
    for (uint64_t p = g->head; p < g->tail; p++)
        if (g->ring[p & g->rmask].live) g->slot[probe(g, g->ring[p & g->rmask].key)] = p + 1;
    return 0;
}

int fkv__ghost_take(fkv__ghost *g, uint64_t key)
{
    uint64_t i = probe(g, key);
    if (!g->slot[i]) return 0;
    gent *e = &g->ring[(g->slot[i] - 1) & g->rmask];
    e->live = 0;
    g->n--;
    g->bytes -= e->bytes;
    table_delete(g, i);
    return 1;
}

int fkv__ghost_add(fkv__ghost *g, uint64_t key, uint64_t bytes, uint64_t budget)
{
    fkv__ghost_take(g, key);
    if (grow(g)) return -1;
    gent *e = &g->ring[g->tail & g->rmask];
    e->key = key;
    e->bytes = bytes;
    e->live = 1;
    g->slot[probe(g, key)] = ++g->tail;
    g->n++;
    g->bytes += bytes;
    while (g->bytes > budget && g->head < g->tail) {
        gent *o = &g->ring[g->head & g->rmask];
        if (o->live) fkv__ghost_take(g, o->key);
        g->head++;
    }
    while (g->head < g->tail && !g->ring[g->head & g->rmask].live) g->head++;
    return 0;
}

uint64_t fkv__ghost_count(const fkv__ghost *g) { return g->n; }
uint64_t fkv__ghost_bytes(const fkv__ghost *g) { return g->bytes; }
