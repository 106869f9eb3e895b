/* FIFO: the oldest chunk goes first, reads change nothing (access NULL). */
#include "core/chunk.h"

static double key(const fkv__policy_params *p, const fkv__chunk *ch)
{
    (void)p;
    return (double)ch->id; /* creation order */
}

/* creation order only grows: one run holds every chunk placed in order */
static int run0(const fkv__chunk *ch)
{
    (void)ch;
    return 0;
}

FKV__HEAP_POLICY(fkv__policy_fifo, "fifo",
                 "first in, first out: evicts the oldest chunk",
                 key, run0, NULL);
