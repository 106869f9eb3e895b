/* libFuzzer target for the K/V precision spec of `fairkv model eval --kv`
 * (src/model/kv_eval.h): any input must parse or fail with FKV_EINVAL and
 * a message (never crash or read out of bounds); a parsed spec names known
 * precisions and prints back to a spec that parses to the same ladder. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv_eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[128], err[256] = "", name[64];
    if (size >= sizeof spec) size = sizeof spec - 1;
    memcpy(spec, data, size);
    spec[size] = 0;
    fkv_kv_ladder l = {64, 64, FKV_KVC_F32, 0, FKV_KVC_F32}, m = l;
    fkv_status st = fkv_kv_ladder_parse(spec, &l, err, sizeof err);
    if (st != FKV_OK) {
        if (st != FKV_EINVAL || !err[0]) abort();
        return 0;
    }
    if ((unsigned)l.warm >= FKV_KVC_COUNT || (unsigned)l.cold >= FKV_KVC_COUNT || l.chunk != 64 || l.hot != 64) abort();
    fkv_kv_ladder_name(&l, name, sizeof name);
    if (fkv_kv_ladder_parse(name, &m, err, sizeof err) != FKV_OK) abort();
    if (m.warm != l.warm || m.warm_tokens != l.warm_tokens ||
        (l.warm_tokens != FKV_LADDER_NO_COLD && m.cold != l.cold))
        abort();
    /* the check accepts it or says why */
    err[0] = 0;
    if (fkv_kv_ladder_check(&l, err, sizeof err) != FKV_OK && !err[0]) abort();
    return 0;
}
