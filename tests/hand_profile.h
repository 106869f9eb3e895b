/* A step-cost profile that can be priced on paper: linear-op time
 *   lin(n) = 10 ms + 0.01 ms x (n - 1)   (table {1: 10 ms, 1001: 20 ms})
 * with attention and overhead switched off.  Shared by the simulator tests. */
#ifndef FKV_TESTS_HAND_PROFILE_H
#define FKV_TESTS_HAND_PROFILE_H

#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

static const uint32_t hand_lin_tok[] = {1, 1001};
static const double hand_lin_ms[] = {10.0, 20.0};

static inline fkv_profile hand_profile(void)
{
    fkv_profile p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "hand");
    p.model = fkv_model_find("llama-2-7b");
    p.tp = 1;
    p.lin_tokens = hand_lin_tok;
    p.lin_ms = hand_lin_ms;
    p.n_lin = 2;
    return p;
}

#endif
