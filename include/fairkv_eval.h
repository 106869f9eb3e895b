/* fairkv evaluation notions: what a simulator or a benchmark reads of the
 * cache, and an engine needs not.
 *
 *  - Request classes (short / medium / long by prompt + expected output,
 *    the seed evaluation's section 4.1): the label of the per-class
 *    counters (fkv_counters, fairkv_hit_tokens_total{class}), limits in
 *    fkv_config.class_short_max / class_medium_max.
 *  - Belady's MIN (policy "belady") needs the future: fkv_config.next_use.
 *  - Hash-id mode: traces that publish block ids instead of tokens
 *    (fkv_seq_params.block_ids, fkv_config.block_tokens).
 *
 * The fields stay in fairkv.h's structs (their layout is the ABI); the
 * types and calls that name these notions are here.  Installed beside
 * fairkv.h; include it after it. */
#ifndef FAIRKV_EVAL_H
#define FAIRKV_EVAL_H

#include "fairkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Request classes: short < class_short_max <= medium <= class_medium_max < long,
 * on fkv_seq_params.expected_tokens (or the length so far when 0). */
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
 * fkv_config.next_use.  Called under the cache's lock, with the chunk's
 * current info (it must not call the cache). */
typedef int64_t (*fkv_next_use_fn)(void *ctx, const fkv_chunk_view *chunk, const fkv_chunk_info *info);

#ifdef __cplusplus
}
#endif
#endif /* FAIRKV_EVAL_H */
