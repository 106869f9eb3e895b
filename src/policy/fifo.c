/* FIFO: the oldest chunk goes first, reads change nothing (access NULL). */
#include "core/internal.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    (void)p;
    return (double)ch->id; /* creation order */
}

static fkv_status create(const fkv__policy_params *p, void **state)
{
    return fkv__hp_create(p, key, state);
}

const fkv__policy_ops fkv__policy_fifo = {
    .name = "fifo",
    .help = "first in, first out: evicts the oldest chunk",
    .create = create,
    .destroy = fkv__hp_destroy,
    .insert = fkv__hp_insert,
    .remove = fkv__hp_remove,
    .access = NULL,
    .victim = fkv__hp_victim,
};
