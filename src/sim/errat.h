/* Parse errors that name where: "FILE:LINE: message". */
#ifndef FKV_SIM_ERRAT_H
#define FKV_SIM_ERRAT_H

#include <stddef.h>

#include "fairkv.h"

/* Writes "file:line: " and the formatted message into err (if any) and
 * returns FKV_EPARSE. */
fkv_status fkv_err_at(char *err, size_t errlen, const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
