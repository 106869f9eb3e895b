/* Status codes, the error detail and the clock.
 *
 * Errors: the convention is fairkv.h's ("Errors"). */
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
