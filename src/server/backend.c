/* Backend registry: one table from names to factories.  The real engine
 * has its line here. */
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
