/* Helpers shared by the cache tests: open a sequence or fail the test, and
 * run the full invariant checker with its message printed. */
#ifndef FKV_TEST_CACHE_FIXTURE_H
#define FKV_TEST_CACHE_FIXTURE_H

#include <stdio.h>

#include "check.h"
#include "core/internal.h"
#include "fairkv.h"

/* The default configuration shrunk for unit tests: one layer, one head of
 * two values, pages of four tokens, `pages` pages. */
static inline void fx_small_config(fkv_config *cfg, uint32_t pages)
{
    fkv_config_default(cfg);
    cfg->n_layers = 1;
    cfg->n_kv_heads = 1;
    cfg->head_dim = 2;
    cfg->page_tokens = 4;
    cfg->capacity_pages = pages;
}

static inline fkv_seq *fx_seq_full(fkv_cache *c, uint64_t id, uint32_t expected, double weight,
                                   const uint64_t *blocks, uint32_t n_blocks)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    p.expected_tokens = expected;
    p.weight = weight;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create_blocks(c, &p, blocks, n_blocks, &s) == FKV_OK);
    return s;
}

static inline fkv_seq *fx_seq(fkv_cache *c, uint64_t id)
{
    return fx_seq_full(c, id, 0, 1.0, NULL, 0);
}

/* A device-only prefix match; *matched gets the tokens attached. */
static inline fkv_status fx_match(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens,
                                  uint32_t *matched)
{
    fkv_match_info mi = {0, 0, 0};
    fkv_status st = fkv_seq_match_prefix(s, tokens, n, max_tokens, FKV_MATCH_DEVICE_ONLY, &mi);
    *matched = mi.device_tokens;
    return st;
}

/* 1 when every invariant holds; else prints the broken one */
static inline int fx_invariants(fkv_cache *c)
{
    char msg[256];
    if (fkv__cache_check(c, msg, sizeof msg)) {
        fprintf(stderr, "invariant: %s\n", msg);
        return 0;
    }
    return 1;
}

#endif
