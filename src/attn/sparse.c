/* Attention sparsity by chunk selection.  Selecting whole chunks (not
 * tokens) keeps the kernels' in-place runs intact and lets the cache evict
 * what is dropped without recompute.
 *  - streaming (StreamingLLM): the first chunk holds the attention sinks,
 *    the initial tokens that soak up attention whatever their content; with
 *    a recent window they keep perplexity stable on long streams.
 *  - h2o (Heavy-Hitter Oracle): a few tokens receive most attention mass
 *    over time; the decode kernel accumulates each chunk's mass, and the
 *    heaviest chunks are kept beside the recent window. */
#include <stdlib.h>
#include <string.h>

#include "attn/internal.h"

const char *fkv_sparse_mode_name(fkv_sparse_mode m)
{
    switch (m) {
    case FKV_SPARSE_DENSE: return "dense";
    case FKV_SPARSE_STREAMING: return "streaming";
    case FKV_SPARSE_H2O: return "h2o";
    }
    return "unknown";
}

fkv_status fkv_sparse_mode_parse(const char *s, fkv_sparse_mode *out)
{
    if (!s || !out) return FKV_EINVAL;
    for (int m = 0; m <= FKV_SPARSE_H2O; m++)
        if (!strcmp(s, fkv_sparse_mode_name((fkv_sparse_mode)m))) {
            *out = (fkv_sparse_mode)m;
            return FKV_OK;
        }
    return FKV_ENOENT;
}

static int usable(const fkv_chunk_view *c) { return c->resident && c->pages; }

fkv_status fkv_sparse_select(const fkv_sparse_config *cfg, const fkv_chunk_view *const *chunks,
                             size_t n, const float *mass, uint8_t *keep, uint32_t *kept_tokens)
{
    if (!cfg || (n && (!chunks || !keep))) return FKV_EINVAL;
    if (cfg->mode != FKV_SPARSE_DENSE && cfg->mode != FKV_SPARSE_STREAMING && cfg->mode != FKV_SPARSE_H2O)
        return FKV_EINVAL;
    if (cfg->mode == FKV_SPARSE_H2O && n && !mass) return FKV_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!chunks[i]) return FKV_EINVAL;
    uint64_t kept = 0;
    memset(keep, 0, n);
    if (!n) goto done;
    if (cfg->mode == FKV_SPARSE_DENSE) {
        for (size_t i = 0; i < n; i++)
            if (usable(chunks[i])) keep[i] = 1, kept += chunks[i]->n_tokens;
        goto done;
    }
    const uint64_t budget = cfg->budget_tokens;
    /* the last chunk (holding the current token) always */
    if (usable(chunks[n - 1])) keep[n - 1] = 1, kept = chunks[n - 1]->n_tokens;
    uint64_t recent_cap;
    if (cfg->mode == FKV_SPARSE_STREAMING) {
        if (n > 1 && usable(chunks[0]) && kept + chunks[0]->n_tokens <= budget)
            keep[0] = 1, kept += chunks[0]->n_tokens;
        recent_cap = budget;
    } else {
        recent_cap = cfg->recent_tokens ? cfg->recent_tokens : budget / 2;
        if (recent_cap > budget) recent_cap = budget;
    }
    /* recent window, newest first, stopping at the first chunk that does not fit */
    for (size_t i = n - 1; i-- > 0;) {
        if (keep[i]) break; /* reached the sink chunk */
        if (!usable(chunks[i])) break;
        if (kept + chunks[i]->n_tokens > recent_cap) break;
        keep[i] = 1;
        kept += chunks[i]->n_tokens;
    }
    if (cfg->mode == FKV_SPARSE_H2O) {
        /* heavy hitters: the rest by decreasing mass while they fit */
        size_t *idx = malloc(n * sizeof *idx), m = 0;
        if (!idx) return FKV_ENOMEM;
        for (size_t i = 0; i < n; i++)
            if (!keep[i] && usable(chunks[i])) idx[m++] = i;
        /* insertion sort: tables are short (a 32k context has 512 chunks) and
         * ties must keep the earlier chunk first */
        for (size_t a = 1; a < m; a++) {
            size_t v = idx[a], b = a;
            while (b > 0 && mass[idx[b - 1]] < mass[v]) idx[b] = idx[b - 1], b--;
            idx[b] = v;
        }
        for (size_t a = 0; a < m; a++)
            if (kept + chunks[idx[a]]->n_tokens <= budget) keep[idx[a]] = 1, kept += chunks[idx[a]]->n_tokens;
        free(idx);
    }
done:
    if (kept_tokens) *kept_tokens = kept > UINT32_MAX ? UINT32_MAX : (uint32_t)kept;
    return FKV_OK;
}
