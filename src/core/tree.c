/* The prefix tree both tiers evict by (host_demote only).
 *
 * Each chunk links to the chunk it extends in the sequence that created it
 * (tree.parent) and lists those that extend it (tree.kids).  A chunk leaves
 * a tier only once no idle chunk extending it is still in that tier: a
 * device victim with an evictable device-resident extension is replaced by
 * that extension, repeatedly, down to a leaf (fkv__tree_device_leaf), and a
 * host victim likewise by a demoted extension (fkv__tree_host_leaf).  So a
 * prefix is never in a lower tier than an idle chunk that extends it
 * (fkv__tree_check).  Paths that take a chunk from a request regardless of
 * what extends it (reclaim, drop, evicting a held chunk) make its idle
 * extensions roots: they cannot be matched without it any more. */
#include <stdio.h>

#include "core/internal.h"

void fkv__tree_link(fkv__chunk *parent, fkv__chunk *kid)
{
    kid->tree.parent = parent;
    fkv__list_push_front(&parent->tree.kids, kid, FKV__LINK(tree.sib));
}

void fkv__tree_leave(fkv__chunk *ch)
{
    fkv__chunk *p = ch->tree.parent;
    if (!p) return;
    fkv__list_unlink(&p->tree.kids, ch, FKV__LINK(tree.sib));
    ch->tree.parent = NULL;
}

void fkv__tree_unlink(fkv__chunk *ch)
{
    fkv__tree_leave(ch);
    while (ch->tree.kids.head) fkv__tree_leave(ch->tree.kids.head);
}

void fkv__tree_adopt(fkv__chunk *from, fkv__chunk *to)
{
    while (from->tree.kids.head) {
        fkv__chunk *k = from->tree.kids.head;
        fkv__tree_leave(k);
        fkv__tree_link(to, k);
    }
    fkv__tree_link(from, to);
}

/* An idle chunk (no sequence holds it) and where it is: 2 device, 1 host. */
static int idle_level(const fkv__chunk *ch)
{
    if (ch->m.refs) return 0;
    return ch->v.resident ? 2 : ch->host.demoted ? 1 : 0;
}

fkv__chunk *fkv__tree_device_leaf(fkv__chunk *v)
{
    for (fkv__chunk *k = v->tree.kids.head; k;) {
        if (k->v.resident && k->place != FKV__PLACE_NONE) { /* evictable, not already leaving */
            v = k;
            k = v->tree.kids.head;
        } else {
            k = k->tree.sib.next;
        }
    }
    return v;
}

fkv__chunk *fkv__tree_host_leaf(fkv__chunk *v)
{
    for (fkv__chunk *k = v->tree.kids.head; k;) {
        if (idle_level(k) == 1) {
            v = k;
            k = v->tree.kids.head;
        } else {
            k = k->tree.sib.next;
        }
    }
    return v;
}

/* The idle extensions a chunk would strand above it, leaving the device
 * outside the closure's order (it is held: reclaimed, dropped, evicted as
 * a hole), become roots. */
void fkv__tree_orphan_idle(fkv__chunk *ch)
{
    for (fkv__chunk *k = ch->tree.kids.head; k;) {
        fkv__chunk *next = k->tree.sib.next;
        if (idle_level(k) == 2) fkv__tree_leave(k);
        k = next;
    }
}

int fkv__tree_check(fkv_cache *c, char *msg, size_t len)
{
    uint64_t n = 0;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) n++;
    for (fkv__chunk *ch = c->all.head; ch; ch = ch->all.next) {
        if (!c->cfg.host_demote && (ch->tree.parent || ch->tree.kids.head)) {
            snprintf(msg, len, "chunk %llu: prefix tree links without host_demote", (unsigned long long)ch->id);
            return 1;
        }
        uint64_t depth = 0;
        for (fkv__chunk *p = ch->tree.parent; p; p = p->tree.parent)
            if (++depth > n) {
                snprintf(msg, len, "chunk %llu: a cycle in the prefix tree", (unsigned long long)ch->id);
                return 1;
            }
        int found = 0;
        if (ch->tree.parent)
            for (fkv__chunk *k = ch->tree.parent->tree.kids.head; k && !found; k = k->tree.sib.next) found = k == ch;
        if (ch->tree.parent && !found) {
            snprintf(msg, len, "chunk %llu: not among its parent's extensions", (unsigned long long)ch->id);
            return 1;
        }
        for (fkv__chunk *k = ch->tree.kids.head; k; k = k->tree.sib.next)
            if (k->tree.parent != ch) {
                snprintf(msg, len, "chunk %llu: lists chunk %llu that extends another", (unsigned long long)ch->id,
                         (unsigned long long)k->id);
                return 1;
            }
        /* closed under prefixes at every tier: an idle prefix is at least
         * as high as each idle chunk extending it */
        if (ch->tree.parent && idle_level(ch) && idle_level(ch->tree.parent) && idle_level(ch->tree.parent) < idle_level(ch)) {
            snprintf(msg, len, "chunk %llu is on the device, its prefix %llu only in the host tier",
                     (unsigned long long)ch->id, (unsigned long long)ch->tree.parent->id);
            return 1;
        }
    }
    return 0;
}
