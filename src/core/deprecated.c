/* The names kept one release (fairkv.h, "deprecated"): each is a thin
 * wrapper over the call that replaces it, and nothing in the library calls
 * them.  Remove the file with the declarations. */
#include "core/internal.h"

fkv_status fkv_seq_restore(fkv_seq *s, uint32_t start, uint32_t end, fkv_slot *slots, uint32_t *n_restored)
{
    fkv_fetch_info fi;
    fkv_status st = fkv_seq_fetch(s, start, end, FKV_FETCH_RECOMPUTE, slots, &fi);
    if (n_restored) *n_restored = fi.recompute_tokens;
    return st;
}

fkv_status fkv_seq_reload(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_reloaded)
{
    fkv_fetch_info fi;
    fkv_status st = fkv_seq_fetch(s, start, end, FKV_FETCH_HOST, NULL, &fi);
    if (n_reloaded) *n_reloaded = fi.host_tokens;
    return st;
}

fkv_status fkv_seq_promote(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_tokens, uint64_t *n_bytes)
{
    fkv_fetch_info fi;
    fkv_status st = fkv_seq_fetch(s, start, end, FKV_FETCH_HOST, NULL, &fi);
    if (n_tokens) *n_tokens = fi.host_tokens;
    if (n_bytes) *n_bytes = fi.host_bytes;
    return st;
}

fkv_status fkv_seq_match(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens, uint32_t *matched)
{
    if (!matched) return fkv__fail(FKV_EINVAL, "fkv_seq_match: matched is NULL");
    fkv_match_info mi = {0, 0, 0};
    fkv_status st = fkv_seq_match_prefix(s, tokens, n, max_tokens, FKV_MATCH_DEVICE_ONLY, &mi);
    *matched = mi.device_tokens;
    return st;
}

fkv_status fkv_seq_match_tiers(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens,
                               fkv_match_info *out)
{
    return fkv_seq_match_prefix(s, tokens, n, max_tokens, FKV_MATCH_ALL_TIERS, out);
}

const char *fkv_cache_last_error(fkv_cache *c)
{
    (void)c;
    return fkv_last_error();
}
