/* The quota index: every key this client wrote, per tenant namespace, in
 * least-recently-used order, with its size and its chain parent.  The
 * quota deletes leaves first (keys with no known child left), so what a
 * tenant keeps in Redis stays prefix-closed: a chunk is never kept after
 * the chunk before it was deleted by this client.  Worker thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "remote/internal.h"

static size_t bucket(const rmt_index *ix, const char *key)
{
    return (size_t)(XXH64(key, strlen(key), 0) & (ix->nbuckets - 1));
}

static rmt_entry *find(const rmt_index *ix, const char *key)
{
    if (!ix->nbuckets)
        return NULL;
    for (rmt_entry *e = ix->buckets[bucket(ix, key)]; e; e = e->hnext)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static bool grow(rmt_index *ix)
{
    size_t nb = ix->nbuckets ? 2 * ix->nbuckets : 256;
    rmt_entry **b = calloc(nb, sizeof *b);
    if (!b)
        return false;
    rmt_index tmp = {b, nb, 0, NULL};
    for (size_t i = 0; i < ix->nbuckets; i++)
        for (rmt_entry *e = ix->buckets[i], *next; e; e = next) {
            next = e->hnext;
            size_t h = bucket(&tmp, e->key);
            e->hnext = b[h];
            b[h] = e;
        }
    free(ix->buckets);
    ix->buckets = b;
    ix->nbuckets = nb;
    return true;
}

rmt_tenant *rmt_index_tenant(rmt_index *ix, const char *ns)
{
    for (rmt_tenant *t = ix->tenants; t; t = t->next)
        if (strcmp(t->ns, ns) == 0)
            return t;
    rmt_tenant *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->ns, sizeof t->ns, "%s", ns);
    t->next = ix->tenants;
    ix->tenants = t;
    return t;
}

static void unlink_lru(rmt_entry *e)
{
    rmt_tenant *t = e->tenant;
    if (e->older)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    e->older = e->newer = NULL;
}

static void link_newest(rmt_entry *e)
{
    rmt_tenant *t = e->tenant;
    e->older = t->newest;
    e->newer = NULL;
    if (t->newest)
        t->newest->newer = e;
    else
        t->oldest = e;
    t->newest = e;
}

/* The parent's key: the child's up to its hash, then the parent's hash. */
static void parent_key(const fkv_remote_key *k, char *buf)
{
    size_t pre = strlen(k->str) - 64;
    memcpy(buf, k->str, pre);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        buf[pre + 2 * i] = hex[k->parent[i] >> 4];
        buf[pre + 2 * i + 1] = hex[k->parent[i] & 15];
    }
    buf[pre + 64] = '\0';
}

bool rmt_index_wrote(rmt_index *ix, const fkv_remote_key *key, uint64_t size)
{
    rmt_entry *e = find(ix, key->str);
    if (e) {
        e->tenant->bytes += size - e->size;
        e->size = size;
        unlink_lru(e);
        link_newest(e);
        return true;
    }
    if (ix->n >= ix->nbuckets && !grow(ix))
        return false;
    rmt_tenant *t = rmt_index_tenant(ix, key->ns);
    e = calloc(1, sizeof *e);
    if (!t || !e || !(e->key = strdup(key->str))) {
        free(e);
        return false;
    }
    e->size = size;
    e->tenant = t;
    if (key->has_parent) {
        char pk[FKV_REMOTE_KEY_MAX];
        parent_key(key, pk);
        if ((e->parent = find(ix, pk)) != NULL)
            e->parent->children++;
    }
    size_t h = bucket(ix, e->key);
    e->hnext = ix->buckets[h];
    ix->buckets[h] = e;
    ix->n++;
    t->bytes += size;
    link_newest(e);
    return true;
}

void rmt_index_touch(rmt_index *ix, const char *key)
{
    rmt_entry *e = find(ix, key);
    if (e) {
        unlink_lru(e);
        link_newest(e);
    }
}

static void free_entry(rmt_entry *e)
{
    free(e->key);
    free(e);
}

void rmt_index_forget(rmt_index *ix, const char *key)
{
    if (!ix->nbuckets)
        return;
    for (rmt_entry **p = &ix->buckets[bucket(ix, key)]; *p; p = &(*p)->hnext) {
        rmt_entry *e = *p;
        if (strcmp(e->key, key) != 0)
            continue;
        *p = e->hnext;
        unlink_lru(e);
        e->tenant->bytes -= e->size;
        if (e->parent)
            e->parent->children--;
        /* children forgotten later must not reach a freed parent */
        for (size_t i = 0; e->children && i < ix->nbuckets; i++)
            for (rmt_entry *c = ix->buckets[i]; c; c = c->hnext)
                if (c->parent == e)
                    c->parent = NULL, e->children--;
        ix->n--;
        free_entry(e);
        return;
    }
}

rmt_entry *rmt_index_victim(rmt_tenant *t)
{
    for (rmt_entry *e = t->oldest; e; e = e->newer)
        if (e->children == 0)
            return e;
    return NULL;
}

void rmt_index_free(rmt_index *ix)
{
    for (size_t i = 0; i < ix->nbuckets; i++)
        for (rmt_entry *e = ix->buckets[i], *next; e; e = next) {
            next = e->hnext;
            free_entry(e);
        }
    free(ix->buckets);
    for (rmt_tenant *t = ix->tenants, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    memset(ix, 0, sizeof *ix);
}
