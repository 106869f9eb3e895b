/* Error messages into a caller's buffer, the project's one formatter:
 * fkv_errf writes the message and returns the status it is given;
 * fkv_err_at prefixes "FILE:LINE: " (parse errors that name where) and
 * returns FKV_EPARSE. */
#ifndef FKV_UTIL_ERR_H
#define FKV_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

#include "fairkv.h"

/* err may be NULL or errlen 0: nothing is written. */
fkv_status fkv_errf(char *err, size_t errlen, fkv_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

fkv_status fkv_err_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
fkv_status fkv_verr_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

#endif
