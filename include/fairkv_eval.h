/* fairkv evaluation notions: what a simulator or a benchmark reads of the
 * cache, and an engine needs not.
 *
 *  - Request classes (short / medium / long by prompt + expected output,
 *    the seed evaluation's section 4.1): the label of the per-class
 *    counters; limits in fkv_eval_config.class_short_max /
 *    class_medium_max.
 *  - Belady's MIN (policy "belady") needs the future:
 *    fkv_eval_config.next_use.
 *  - Hash-id mode: traces that publish block ids instead of tokens
 *    (fkv_seq_create_blocks, fkv_eval_config.block_tokens).
 *
 * Since 0.2.0 these settings are not fields of fairkv.h's structs
 * (fkv_config.next_use / next_use_ctx / block_tokens / class_short_max /
 * class_medium_max and fkv_seq_params.block_ids / n_block_ids were
 * removed, not deprecated: the layout of those structs changed, so code
 * built against 0.1 must be rebuilt): a cache takes them at creation
 * (fkv_cache_create_eval; fkv_cache_create uses the defaults, 128 / 512 /
 * 512, no next_use), a sequence its block ids when opened
 * (fkv_seq_create_blocks).  What stays in fairkv.h: the per-class counters
 * of fkv_counters (hit_tokens[] and friends) and the metrics' class label
 * are reported figures, read by any operator, so they keep their place
 * there.  Installed beside fairkv.h; include it after it. */
#ifndef FAIRKV_EVAL_H
#define FAIRKV_EVAL_H

#include "fairkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Request classes: short < class_short_max <= medium <= class_medium_max < long
 * (fkv_eval_config), on fkv_seq_params.expected_tokens (or the length so
 * far when 0). */
typedef enum fkv_class {
    FKV_CLASS_SHORT = 0,
    FKV_CLASS_MEDIUM = 1,
    FKV_CLASS_LONG = 2
} fkv_class;
#define FKV_N_CLASSES 3 /* the per-class arrays of fkv_counters */
#ifndef __cplusplus
_Static_assert(sizeof(((fkv_counters *)0)->hit_tokens) == FKV_N_CLASSES * sizeof(uint64_t),
               "fkv_counters has one entry per request class");
#endif

FKV_API const char *fkv_class_name(fkv_class c); /* pure: "short", "medium", "long", or "?" */
FKV_API fkv_class fkv_seq_class(const fkv_seq *s);

/* Belady's MIN: the caller (a simulator) returns the time of the chunk's
 * next access in ns, or INT64_MAX for never; the type of
 * fkv_eval_config.next_use.  Called under the cache's lock, with the
 * chunk's current info (it must not call the cache). */
typedef int64_t (*fkv_next_use_fn)(void *ctx, const fkv_chunk_view *chunk, const fkv_chunk_info *info);

/* A cache's evaluation settings, fixed at its creation. */
typedef struct fkv_eval_config {
    fkv_next_use_fn next_use;  /* NULL; required by policy "belady" */
    void *next_use_ctx;
    uint32_t block_tokens;     /* 512: tokens per block id in hash-id mode, a multiple of page_tokens */
    uint32_t class_short_max;  /* 128: short < class_short_max <= medium */
    uint32_t class_medium_max; /* 512: medium <= class_medium_max < long */
} fkv_eval_config;

/* Pure.  Fills the defaults above. */
FKV_API void fkv_eval_config_default(fkv_eval_config *ev);
/* Overrides block_tokens, class_short_max and class_medium_max from
 * FAIRKV_BLOCK_TOKENS, FAIRKV_CLASS_SHORT_MAX, FAIRKV_CLASS_MEDIUM_MAX
 * (fkv_config_from_env no longer reads them).  FKV_EINVAL with err and
 * fkv_last_error naming the variable on a bad value. */
FKV_API fkv_status fkv_eval_config_from_env(fkv_eval_config *ev, char *err, size_t errlen);

/* fkv_cache_create with evaluation settings (ev NULL: the defaults).
 * FKV_EINVAL with err and fkv_last_error naming the field when cfg or ev
 * is invalid (block_tokens not a positive multiple of page_tokens,
 * class_short_max > class_medium_max, policy "belady" without next_use). */
FKV_API fkv_status fkv_cache_create_eval(const fkv_config *cfg, const fkv_eval_config *ev, fkv_cache **out,
                                         char *err, size_t errlen);

/* fkv_seq_create in hash-id mode: block_ids[n_block_ids] name the prompt's
 * blocks, block_tokens tokens each; the prefix index then keys pages on
 * these ids instead of token contents (appends and matches may pass NULL
 * tokens).  Copied by the call.  n_block_ids 0: a plain fkv_seq_create.
 * FKV_EINVAL naming the argument for NULL block_ids with n_block_ids > 0.
 * A fork (fkv_seq_fork) keeps its parent's block ids. */
FKV_API fkv_status fkv_seq_create_blocks(fkv_cache *c, const fkv_seq_params *p, const uint64_t *block_ids,
                                         uint32_t n_block_ids, fkv_seq **out);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_EVAL_H */
