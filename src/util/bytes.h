/* Byte sizes as users write them: "65536", "64MiB", "64M", "512KiB",
 * "1GiB" (K/M/G are binary, as KiB/MiB/GiB). */
#ifndef FKV_UTIL_BYTES_H
#define FKV_UTIL_BYTES_H

#include <stdint.h>

/* The size in bytes, or -1 if malformed. */
int64_t fkv_parse_bytes(const char *v);

#endif
