/* The one table of eviction policies: adding a policy is one file and one
 * line here. */
#include <stdlib.h>
#include <string.h>

#include "core/chunk.h"

extern const fkv__policy_ops fkv__policy_fifo, fkv__policy_lru, fkv__policy_flru,
    fkv__policy_flru_literal, fkv__policy_sieve, fkv__policy_belady, fkv__policy_flru_seed,
    fkv__policy_freeq;

static const fkv__policy_ops *const registry[] = {
    &fkv__policy_fifo,  &fkv__policy_lru,   &fkv__policy_flru, &fkv__policy_flru_literal,
    &fkv__policy_sieve, &fkv__policy_belady, &fkv__policy_flru_seed, &fkv__policy_freeq,
};
#define N_POLICIES (sizeof registry / sizeof registry[0])

static const char *const names[N_POLICIES + 1] = {"fifo", "lru", "flru", "flru-lowest", "sieve",
                                                  "belady", "flru-seed", "freeq", NULL};

const char *const *fkv_policy_names(void)
{
    return names;
}

const fkv__policy_ops *fkv__policy_find(const char *name)
{
    if (!name) return NULL;
    if (!strcmp(name, "flru-literal")) name = "flru-lowest"; /* its first name */
    for (size_t i = 0; i < N_POLICIES; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

fkv__policy_inst *fkv__policy_inst_new(const fkv__policy_ops *ops, const fkv__policy_params *p)
{
    fkv__policy_inst *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->ops = ops;
    if (ops->create(p, &in->state) != FKV_OK) {
        free(in);
        return NULL;
    }
    return in;
}

void fkv__policy_inst_free(fkv__policy_inst *in)
{
    if (!in) return;
    in->ops->destroy(in->state);
    free(in);
}
