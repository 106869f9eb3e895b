/* One request's part of a step (sched.h, "Step rule"): first the chunks
 * its evicted ranges need (recomputed within the budget, or reloaded from
 * the host tier), whole chunks in position order; then a prefill chunk or
 * one decode token.  The batch item it gets says what the step does for it
 * (fkv_batch_item: kind, emits, first, finishes), decided here once. */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <stdio.h>

/* The item's restored ranges are the batch's ranges from range0 on; r has
 * its new tokens (computed = ctx + n_new).  decoding: r had no prefill
 * left when it was served. */
static fkv_status add_item(fkv_batch *b, fkv_req *r, uint32_t ctx, uint32_t restored, uint32_t n_new, int decoding,
                           size_t range0)
{
    if (fkv_grow(&b->items, &b->cap, b->n + 1, sizeof *b->items)) return FKV_ENOMEM;
    fkv_item_kind kind = !n_new     ? FKV_ITEM_RESTORE
                         : decoding ? FKV_ITEM_DECODE
                         : r->generated ? FKV_ITEM_REFILL
                                        : FKV_ITEM_PROMPT;
    int emits = n_new > 0 && r->computed >= r->target;
    b->items[b->n++] = (fkv_batch_item){.r = r,
                                        .ctx = ctx,
                                        .n_restored = restored,
                                        .n_new = n_new,
                                        .kind = kind,
                                        .emits = emits,
                                        .first = emits && r->generated == 0,
                                        .finishes = emits && r->generated + 1 >= r->output,
                                        .range0 = (uint32_t)range0,
                                        .n_ranges = (uint32_t)(b->n_ranges - range0)};
    return FKV_OK;
}

/* Records [a, e) as restored in this step: in the batch (merged with the
 * item's previous range when adjacent) and the chunk in the step's set. */
static fkv_status note_restored(sched_step *t, size_t range0, const fkv_chunk_view *ch, uint32_t a, uint32_t e)
{
    fkv_batch *b = t->b;
    if (fkv_grow(&t->restored, &t->cap_restored, t->n_restored + 1, sizeof *t->restored)) return FKV_ENOMEM;
    t->restored[t->n_restored++] = ch;
    if (b->n_ranges > range0 && b->ranges[b->n_ranges - 1].end == a) {
        b->ranges[b->n_ranges - 1].end = e;
        return FKV_OK;
    }
    if (fkv_grow(&b->ranges, &b->cap_ranges, b->n_ranges + 1, sizeof *b->ranges)) return FKV_ENOMEM;
    b->ranges[b->n_ranges++] = (fkv_range){a, e};
    return FKV_OK;
}

/* r's last chunk is shared and was restored in this step: an append would
 * copy its partial page before that page's K/V exist. */
static int tail_restored_shared(const sched_step *t, fkv_req *r)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    fkv_chunk_info info;
    if (!t->n_restored || fkv_seq_chunks(r->seq, &ch, &n) || !n || fkv_seq_chunk_info(r->seq, n - 1, &info) ||
        info.refs < 2)
        return 0;
    for (size_t i = 0; i < t->n_restored; i++)
        if (t->restored[i] == ch[n - 1]) return 1;
    return 0;
}

/* Pages an allocation of `tokens` more tokens (after r's `len`) still
 * needs beyond the free ones: at least 1 (it failed). */
static uint32_t pages_needed(fkv_sched *s, uint32_t len, uint32_t tokens, int whole)
{
    uint32_t pt = s->page_tokens ? s->page_tokens : 1;
    uint32_t want = whole ? (tokens + pt - 1) / pt : (len + tokens + pt - 1) / pt - (len + pt - 1) / pt;
    fkv_cache_info ci;
    uint32_t free_pages = fkv_cache_get_info(s->cache, &ci) == FKV_OK ? ci.free_pages : 0;
    return want > free_pages ? want - free_pages : 1;
}

/* Recomputation of evicted chunks, chunk by chunk so a partial restore
 * never splits a chunk.  Returns SERVED with *missing_left set (the rest
 * next step: the budget ran out), STALLED (no memory for the next chunk
 * after restoring some), GONE/NOROOM (no memory before restoring any) or
 * FAILED. */
static int restore_missing(sched_step *t, fkv_req *r, uint32_t *restored, uint32_t *missing_left)
{
    fkv_sched *s = t->s;
    fkv_batch *b = t->b;
    size_t range0 = b->n_ranges;
    uint32_t missing = 0;
    fkv_status st;
    *missing_left = 0;
    if ((st = fkv_seq_touch(r->seq, &missing)) != FKV_OK) return fkv__step_failed(t, st);
    int counts = s->cfg.miss == FKV_MISS_RECOMPUTE;
    while (missing) {
        const fkv_chunk_view *const *ch;
        size_t nch;
        if ((st = fkv_seq_chunks(r->seq, &ch, &nch)) != FKV_OK) return fkv__step_failed(t, st);
        size_t i = 0;
        while (i < nch && (ch[i]->resident || ch[i]->dropped)) i++; /* dropped ones are not missing */
        if (i == nch) break;
        uint32_t a = ch[i]->start, e = ch[i]->start + ch[i]->n_tokens;
        /* an offloaded chunk comes back from the host tier as it was:
         * nothing to compute, so no range of the item names it, and it
         * takes nothing from the budget */
        int host = ch[i]->offloaded;
        /* a recomputed one: the rest next step when it does not fit; the
         * tokens the step-time bound held back count as room (the cap can
         * stand below a chunk for as long as light requests arrive); a
         * chunk larger than a whole step's budget is recomputed alone, in
         * a step that has nothing else */
        uint32_t room = t->budget + t->held;
        int oversize = e - a > s->cfg.max_batch_tokens && b->n == 0 && room == s->cfg.max_batch_tokens;
        if (counts && !host && e - a > room && !oversize) break;
        uint32_t got = 0;
        fkv_fetch_info fi;
        fkv_status rs = fkv_seq_fetch(r->seq, a, e, host ? FKV_FETCH_HOST : FKV_FETCH_RECOMPUTE, NULL, &fi);
        got = host ? fi.host_tokens : fi.recompute_tokens;
        if (rs == FKV_EFULL) {
            if (fkv__sched_make_room(t, r, pages_needed(s, 0, e - a, 1))) {
                if (!*restored) return fkv__sched_give_up(t, r);
                *missing_left = missing; /* what it restored is computed in this step */
                return STALLED;
            }
            if (t->status) return FAILED;
            continue;
        }
        if (rs != FKV_OK) return fkv__step_failed(t, rs);
        if (got == 0)
            return fkv__step_failed(t, fkv__sched_fail(s, FKV_ESTATE, "request %llu: %s of [%u,%u) brought nothing back",
                                                       (unsigned long long)r->id, host ? "reload" : "restore", a, e));
        if (host) {
            r->reloaded += got;
            b->host_tokens += got;
            missing = missing > got ? missing - got : 0;
            continue;
        }
        if ((st = note_restored(t, range0, ch[i], a, e)) != FKV_OK) return fkv__step_failed(t, st);
        *restored += got;
        missing = missing > got ? missing - got : 0;
        if (counts) {
            if (got > t->budget) { /* the rest from what the bound held back */
                uint32_t over = got - t->budget;
                t->held = over < t->held ? t->held - over : 0;
            }
            t->budget = got < t->budget ? t->budget - got : 0;
            r->recomputed += got;
        } else {
            r->reloaded += got;
        }
    }
    *missing_left = missing;
    return SERVED;
}

/* Gives r its share of the step.  r is in the running set and pinned (when
 * it has a sequence). */
int fkv__sched_serve(sched_step *t, fkv_req *r)
{
    fkv_sched *s = t->s;
    fkv_batch *b = t->b;
    uint32_t restored = 0, missing = 0, n = 0, ctx = r->computed;
    int rc = SERVED, prefill = 0, decoding = !fkv__sched_prefill_left(r);
    size_t range0 = b->n_ranges;
    if (s->cache && r->seq && r->computed) {
        rc = restore_missing(t, r, &restored, &missing);
        if (rc != SERVED || missing) goto out;
    }
    prefill = r->computed < r->target;
    if (r == t->bound_w) t->bound_reserve = 0; /* its turn: the tokens kept for it are its own */
    if (prefill) {
        n = r->target - r->computed;
        uint32_t left = fkv__sched_tenant_left(t, r);
        if (n > left) n = left; /* chunked prefill only (fkv__sched_share_start) */
        if (s->cfg.max_request_tokens && s->cfg.chunked_prefill && n > s->cfg.max_request_tokens)
            n = s->cfg.max_request_tokens;
        /* other requests' prefills leave the bound's request its tokens */
        uint32_t avail = t->budget > t->bound_reserve ? t->budget - t->bound_reserve : 0;
        if (n > avail) {
            /* without chunked prefill a prompt runs whole; one larger than
             * the budget runs alone in an otherwise empty step */
            if (s->cfg.chunked_prefill) n = avail;
            else n = 0;
        }
        if (!s->cfg.chunked_prefill && n == 0 && b->n == 0 && t->budget == s->cfg.max_batch_tokens)
            n = t->budget; /* still bounded by the budget: the rest next step */
    } else {
        n = t->budget ? 1 : 0;
    }
    if (n && s->cache && tail_restored_shared(t, r)) n = 0; /* next step */
    if (n && s->cache) {
        for (;;) {
            const int32_t *tok = fkv__sched_tokens(s, r, r->computed, n);
            if (s->cfg.pass_tokens && !tok) return fkv__step_failed(t, FKV_ENOMEM);
            fkv_status as = fkv_seq_append(r->seq, tok, n, NULL);
            if (as == FKV_OK) break;
            if (as != FKV_EFULL) return fkv__step_failed(t, as);
            if (fkv__sched_make_room(t, r, pages_needed(s, r->computed, n, 0))) {
                /* after restores, the step computes them; the new tokens wait */
                rc = restored ? STALLED : fkv__sched_give_up(t, r);
                n = 0;
                goto out;
            }
            if (t->status) return FAILED;
        }
    }
    if (n) {
        if (prefill) fkv__sched_tenant_used(t, r, n);
        if (prefill && r->computed < r->redo_until) {
            uint32_t e = r->computed + n < r->redo_until ? r->computed + n : r->redo_until;
            r->recomputed += e - r->computed;
        }
        r->computed += n;
        s->live_tokens += n;
        t->budget -= n;
    }
out:
    if (t->status) return FAILED;
    if (t->drr_on && (n || restored)) fkv__sched_drr_charge(t, r, prefill && !decoding, n, restored);
    if (n || restored) {
        int counts = s->cfg.miss == FKV_MISS_RECOMPUTE;
        if (add_item(b, r, ctx, restored, n, decoding, range0) != FKV_OK) return fkv__step_failed(t, FKV_ENOMEM);
        b->tokens += n + (counts ? restored : 0);
        if (!counts) b->reload_tokens += restored;
    }
    if (rc == SERVED || rc == STALLED) r->served = 1;
    return rc;
}
