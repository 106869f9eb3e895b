#include "util/err.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- the library's detail */

static _Thread_local char errbuf[256];

const char *fkv_last_error(void) { return errbuf; }

void fkv__vset_error(const char *fmt, va_list ap) { vsnprintf(errbuf, sizeof errbuf, fmt, ap); }

void fkv__set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv__vset_error(fmt, ap);
    va_end(ap);
}

fkv_status fkv__fail(fkv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv__vset_error(fmt, ap);
    va_end(ap);
    return st;
}

fkv_status fkv__report(fkv_status st, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv__vset_error(fmt, ap);
    va_end(ap);
    if (err && errlen) snprintf(err, errlen, "%s", errbuf);
    return st;
}

/* ---------------------------------------------------------------- the tools' messages */

fkv_status fkv_errf(char *err, size_t errlen, fkv_status st, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

fkv_status fkv_verr_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, va_list ap)
{
    if (err && errlen) {
        int k = snprintf(err, errlen, "%s:%zu: ", file, line);
        if (k >= 0 && (size_t)k < errlen) vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    }
    return FKV_EPARSE;
}

fkv_status fkv_err_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv_status st = fkv_verr_at(err, errlen, file, line, fmt, ap);
    va_end(ap);
    return st;
}
