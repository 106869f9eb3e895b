/* Where an evictable chunk waits: every resident, unpinned chunk is in
 * exactly one place,
 *  - the young FIFO while it is younger than min_chunk_retention;
 *  - otherwise a policy instance: its owner's (quotas on), its tenant's
 *    cached one (tenant mode, no owner) or the shared one (unowned chunks
 *    of finished requests; every chunk when quotas are off);
 * and a cached chunk with a predicted TTL is also in the TTL tier (ttl.c).
 * A chunk's place follows its state (fkv__place_update); victims are
 * chosen from these places by evict.c. */
#include <stddef.h>

#include "core/internal.h"

void fkv__place_remove(fkv_cache *c, fkv__chunk *ch)
{
    switch (ch->place) {
    case FKV__PLACE_POLICY:
        ch->inst->ops->remove(ch->inst->state, ch);
        ch->inst->n--;
        ch->tenant->n_evictable--;
        ch->inst = NULL;
        break;
    case FKV__PLACE_YOUNG:
        fkv__list_unlink(&c->young, ch, FKV__LINK(lk.young));
        break;
    default: break;
    }
    ch->place = FKV__PLACE_NONE;
    fkv__ttl_remove(c, ch);
}

static fkv__policy_inst *home(fkv_cache *c, const fkv__chunk *ch)
{
    if (!c->cfg.quotas) return c->shared_inst;
    if (ch->owner) return ch->owner->inst;
    return c->cfg.quotas == FKV_QUOTA_TENANT ? ch->tenant->cached : c->shared_inst;
}

/* Puts ch in the TTL tier or takes it out, as its state now says. */
void fkv__ttl_sync(fkv_cache *c, fkv__chunk *ch)
{
    int want = c->cfg.quotas && !ch->owner && ch->ttl.req > 0 && ch->place == FKV__PLACE_POLICY;
    if (want) fkv__ttl_add(c, ch);
    else fkv__ttl_remove(c, ch);
}

static void place_policy(fkv_cache *c, fkv__chunk *ch)
{
    fkv__policy_inst *in = home(c, ch);
    if (in->ops->insert(in->state, ch) != FKV_OK) return; /* out of memory: stays unevictable */
    in->n++;
    ch->tenant->n_evictable++;
    ch->inst = in;
    ch->place = FKV__PLACE_POLICY;
    fkv__ttl_sync(c, ch);
}

/* Puts the chunk where its state says it belongs.  A chunk already in the
 * right place stays where it is, so list policies (SIEVE) keep its
 * position when a request merely starts or stops holding it. */
void fkv__place_update(fkv_cache *c, fkv__chunk *ch)
{
    if (!ch->v.resident || ch->m.pins > 0) {
        fkv__place_remove(c, ch);
        return;
    }
    int64_t ret = c->cfg.min_chunk_retention_ns;
    int young = ret > 0 && fkv__now(c) - ch->m.create_ns < ret;
    if (young) {
        if (ch->place == FKV__PLACE_YOUNG) return;
        fkv__place_remove(c, ch);
        fkv__list_push_back(&c->young, ch, FKV__LINK(lk.young));
        ch->place = FKV__PLACE_YOUNG;
        return;
    }
    if (ch->place == FKV__PLACE_POLICY && ch->inst == home(c, ch)) {
        fkv__ttl_sync(c, ch);
        return;
    }
    fkv__place_remove(c, ch);
    place_policy(c, ch);
}

/* Moves chunks that have outlived min_chunk_retention into their policy.
 * The FIFO is in order of entry, which is creation order except for chunks
 * re-entering after a pin; those wait at most one retention period more. */
void fkv__place_mature(fkv_cache *c, int64_t now)
{
    int64_t ret = c->cfg.min_chunk_retention_ns;
    while (c->young.head && now - c->young.head->m.create_ns >= ret) {
        fkv__chunk *ch = c->young.head;
        fkv__place_remove(c, ch);
        place_policy(c, ch);
    }
}
