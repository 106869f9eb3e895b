/* The scheduler's ground floor: its error channel, the waiting queue's
 * insertion, a sequence's release, a request's token ids and its prefill
 * left.  Every other file of the scheduler calls these; these call none of
 * them (the order is in sched_internal.h). */
#include "sched/sched_internal.h"
#include "util/array.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

fkv_status fkv__sched_fail(fkv_sched *s, fkv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return st;
}

int fkv__step_failed(sched_step *t, fkv_status st)
{
    if (!t->status) t->status = st;
    return FAILED;
}

const int32_t *fkv__sched_tokens(fkv_sched *s, const fkv_req *r, uint32_t start, uint32_t n)
{
    if (!s->cfg.pass_tokens) return NULL;
    if (r->tokens) return r->tokens + start;
    if (!s->cfg.token_ids || fkv_grow(&s->tok, &s->tok_cap, n ? n : 1, sizeof *s->tok)) return NULL;
    s->cfg.token_ids(s->cfg.token_ctx, r, start, n, s->tok);
    return s->tok;
}

fkv_status fkv__sched_wait_insert(fkv_sched *s, fkv_req *r, size_t pos)
{
    if (fkv_grow(&s->wait, &s->cap_wait, s->n_wait + 1, sizeof *s->wait)) return FKV_ENOMEM;
    memmove(s->wait + pos + 1, s->wait + pos, (s->n_wait - pos) * sizeof *s->wait);
    s->wait[pos] = r;
    s->n_wait++;
    r->state = FKV_REQ_WAITING;
    return FKV_OK;
}

void fkv__sched_release_seq(fkv_sched *s, fkv_req *r)
{
    if (!r->seq && s->cache) return;
    s->live_tokens -= r->computed;
    if (r->seq) fkv_seq_free(r->seq);
    r->seq = NULL;
}

/* Prefill work a request has left: none once it decodes (one token a
 * step after its first output: computed + 1 == target), else its target
 * minus what it has. */
uint32_t fkv__sched_prefill_left(const fkv_req *r)
{
    if (r->computed >= r->target || (r->generated && r->computed + 1 == r->target)) return 0;
    return r->target - r->computed;
}
