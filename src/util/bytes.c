#include "util/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int64_t fkv_parse_bytes(const char *v)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno || !(x >= 0)) return -1;
    double mul;
    if (!strcmp(end, "") || !strcmp(end, "B")) mul = 1;
    else if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "k")) mul = 1024.0;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB")) mul = 1024.0 * 1024;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB")) mul = 1024.0 * 1024 * 1024;
    else return -1;
    x *= mul;
    return x < 9e18 ? (int64_t)x : -1;
}
