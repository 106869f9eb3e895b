/* Backend registry: one table from names to factories.  The real engine
 * has its line here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/backend.h"
#include "server/backend_engine_opts.h"

static const struct {
    const char *name;
    fkv_backend_create_fn create;
} registry[] = {
    {"fake", fkv_backend_fake_create},
    {"engine", fkv_backend_engine_create},
};

static const char *const names[] = {"fake", "engine", NULL};

const char *const *fkv_backend_names(void)
{
    return names;
}

fkv_status fkv_backend_create(const char *name, const char *const *opts, fkv_backend *out, char *err,
                              size_t errlen)
{
    if (!name || !out) {
        if (err) snprintf(err, errlen, "fkv_backend_create: NULL argument");
        return FKV_EINVAL;
    }
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (!strcmp(registry[i].name, name)) return registry[i].create(opts, out, err, errlen);
    if (err) {
        size_t off = (size_t)snprintf(err, errlen, "unknown backend '%s'; known backends:", name);
        for (size_t i = 0; names[i] && off < errlen; i++)
            off += (size_t)snprintf(err + off, errlen - off, " %s", names[i]);
    }
    return FKV_ENOENT;
}

void fkv_backend_destroy(fkv_backend *b)
{
    if (b && b->ops) b->ops->destroy(b->impl);
    if (b) b->ops = NULL, b->impl = NULL;
}

char *fkv_backend_cache_prometheus(fkv_cache *c, size_t *len)
{
    size_t need = 0;
    if (fkv_cache_metrics_prometheus(c, NULL, 0, &need) != FKV_OK) return NULL;
    for (int tries = 0; tries < 8; tries++) {
        size_t cap = need + need / 8 + 256; /* room for counters that grow meanwhile */
        char *text = malloc(cap);
        if (!text) return NULL;
        if (fkv_cache_metrics_prometheus(c, text, cap, &need) != FKV_OK) {
            free(text);
            return NULL;
        }
        if (need < cap) {
            *len = need;
            return text;
        }
        free(text); /* it grew past the room: again, at its new size */
    }
    return NULL;
}

void fkv_gen_logprobs_compute(const float *logits, uint32_t V, int32_t token, uint32_t k, fkv_gen_logprobs *out)
{
    /* log p_i = x_i - (max + log sum exp(x_j - max)) */
    float mx = -INFINITY;
    for (uint32_t i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (uint32_t i = 0; i < V; i++) sum += exp((double)logits[i] - (double)mx);
    double lse = (double)mx + log(sum);
    out->logprob = token >= 0 && (uint32_t)token < V ? (float)((double)logits[token] - lse) : -INFINITY;
    if (k > FKV_GEN_MAX_TOP) k = FKV_GEN_MAX_TOP;
    if (k > V) k = V;
    /* insertion into a sorted list of k: V x k at most 20, no allocation */
    uint32_t n = 0;
    for (uint32_t i = 0; i < V && k; i++) {
        float x = logits[i];
        if (n == k && !(x > logits[out->top_token[n - 1]])) continue;
        uint32_t at = n < k ? n++ : k - 1;
        while (at > 0 && x > logits[out->top_token[at - 1]]) {
            out->top_token[at] = out->top_token[at - 1];
            at--;
        }
        out->top_token[at] = (int32_t)i;
    }
    out->n_top = n;
    for (uint32_t j = 0; j < n; j++) {
        out->top_logprob[j] = (float)((double)logits[out->top_token[j]] - lse);
        out->top_piece[j] = "";
        out->top_piece_len[j] = 0;
    }
}
