/* Error messages, the project's one formatter.
 *
 * The library's convention (fairkv.h, "Errors"): a failing call leaves its
 * detail in a per-thread buffer (fkv__set_error, fkv__fail; read back by
 * fkv_last_error), and a call that takes (err, errlen) also gets a copy
 * there (fkv__report).
 *
 * For the tools' own messages into a caller's buffer: fkv_errf writes the
 * message and returns the status it is given; fkv_err_at prefixes
 * "FILE:LINE: " (parse errors that name where) and returns FKV_EPARSE. */
#ifndef FKV_UTIL_ERR_H
#define FKV_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

#include "fairkv.h"

/* The calling thread's detail (library convention). */
void fkv__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fkv__vset_error(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
fkv_status fkv__fail(fkv_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the detail and copies it into err (may be NULL); returns st. */
fkv_status fkv__report(fkv_status st, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* err may be NULL or errlen 0: nothing is written. */
fkv_status fkv_errf(char *err, size_t errlen, fkv_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

fkv_status fkv_err_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
fkv_status fkv_verr_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

#endif
