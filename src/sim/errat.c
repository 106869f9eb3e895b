#include "sim/errat.h"

#include <stdarg.h>
#include <stdio.h>

fkv_status fkv_err_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, ...)
{
    if (err && errlen) {
        int k = snprintf(err, errlen, "%s:%zu: ", file, line);
        if (k >= 0 && (size_t)k < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return FKV_EPARSE;
}
