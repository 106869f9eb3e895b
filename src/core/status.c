/* Status codes, the error detail and the clock.
 *
 * Errors: every public call returns an fkv_status; a failing call of the
 * cache (fkv_cache_*, fkv_seq_*) leaves its detail in a thread-local
 * buffer that fkv_cache_last_error reads (see fairkv.h). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/internal.h"

const char *fkv_strerror(fkv_status st)
{
    switch (st) {
    case FKV_OK: return "ok";
    case FKV_EINVAL: return "invalid argument";
    case FKV_ENOMEM: return "out of host memory";
    case FKV_EFULL: return "cache full: nothing evictable";
    case FKV_ENOENT: return "not found";
    case FKV_ESTATE: return "invalid state for this call";
    case FKV_EIO: return "i/o error";
    case FKV_EPARSE: return "malformed input";
    case FKV_EUNSUPPORTED: return "not supported";
    }
    return "unknown status";
}

/* ---------------------------------------------------------------- errors */

static _Thread_local char errbuf[256];

void fkv__set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
}

fkv_status fkv__fail(fkv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return st;
}

const char *fkv_cache_last_error(fkv_cache *c)
{
    (void)c;
    return errbuf;
}

/* ---------------------------------------------------------------- clock */

int64_t fkv_monotonic_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t fkv_virtual_clock_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

void fkv__tick(fkv_cache *c)
{
    c->tnow = c->cfg.clock.now_ns ? c->cfg.clock.now_ns(c->cfg.clock.ctx) : fkv_monotonic_now_ns();
    c->tnow_valid = 1;
}
