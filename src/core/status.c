#include "fairkv.h"
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
