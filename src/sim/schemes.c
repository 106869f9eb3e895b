/* The schemes the simulator compares: one designated initialiser each.
 *
 * Rules: every scheme runs on the same capacity, scheduler and cost profile
 * and differs only in the fields it sets (fkv_scheme, sim.h); a field left
 * out is 0: no quotas, static chunks, the last-started victim, the
 * preempted sequence kept, no reclaim, none of vLLM's behaviours, mode
 * CACHED.  A scheme named after a system sets only what is built of it.
 * What each row emulates, the code it follows, what it leaves out and how
 * fairkv's policy was chosen: docs/EVALUATION.md, section 3 ("The schemes"
 * and "Schemes beyond the first table") and 3b ("the fairkv scheme").
 */
#include <string.h>

#include "sim/sim.h"

static const fkv_scheme schemes[] = {
    {.name = "lru", .policy = "lru", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "plain LRU over 64-token chunks"},
    {.name = "fifo", .policy = "fifo", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "FIFO over 64-token chunks"},
    {.name = "flru", .policy = "flru", .quotas = FKV_QUOTA_REQUEST, .chunk_tokens = 64, .page_tokens = 16,
     .prefix_cache = 1, .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "F-LRU (evict highest alpha/count + beta*age) with per-request quotas, fixed 64-token chunks"},
    {.name = "flru-dyn", .policy = "flru", .quotas = FKV_QUOTA_REQUEST, .dynamic_chunking = 1, .chunk_tokens = 64,
     .page_tokens = 16, .prefix_cache = 1, .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "F-LRU + quotas + dynamic chunking (the seed's 'dynamic chunking' row)"},
    {.name = "flru-literal", .policy = "flru-lowest", .quotas = FKV_QUOTA_REQUEST, .chunk_tokens = 64,
     .page_tokens = 16, .prefix_cache = 1, .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "the seed's formula read literally (evict the lowest score) + quotas"},
    {.name = "sieve", .policy = "sieve", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "SIEVE (NSDI'24) over 64-token chunks"},
    {.name = "belady", .policy = "belady", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP,
     .what = "Belady's MIN with the simulator's knowledge of the future: the hit-rate limit"},
    {.name = "vllm", .policy = "freeq", .chunk_tokens = 16, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_FREE, .free_tail_first = 1,
     .no_admit_after_preempt = 1, .gpu_batch_defaults = 1,
     .what = "vLLM v1 emulation: 16-token blocks, free block queue freed tail first, preempt last-started, "
             "recompute, no admission in a preempting step, the GPU's batch defaults"},
    {.name = "vllm-fp8", .policy = "freeq", .chunk_tokens = 16, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_FREE, .free_tail_first = 1,
     .no_admit_after_preempt = 1, .gpu_batch_defaults = 1, .kv_fp8 = 1,
     .what = "vllm with --kv-cache-dtype fp8: twice the blocks in the same bytes, every token fp8 (accuracy not "
             "priced)"},
    {.name = "lru+sglang-victim", .policy = "lru", .chunk_tokens = 16, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_FEWEST_OUTPUT, .on_preempt = FKV_PREEMPT_FREE,
     .what = "LRU prefix cache of 16-token blocks, retract the fewest-output request (SGLang's victim rule only)"},
    {.name = "vtc", .policy = "lru", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP, .mode = FKV_SCHEME_VTC,
     .what = "VTC fair admission (OSDI'24) over plain LRU: what fair scheduling alone gives"},
    {.name = "fairkv", .policy = "flru", .quotas = FKV_QUOTA_TENANT, .chunk_tokens = 64, .page_tokens = 16,
     .prefix_cache = 1, .victim = FKV_VICTIM_FAIR, .on_preempt = FKV_PREEMPT_KEEP,
     .reclaim = "quantize8,quantize4,evict", .share_guarantee = 1, .step_fraction = 1,
     .quant = FKV_QUANT_UNDER_PRESSURE, .quant_dtype = FKV_INT4, .quant_hot = 64, .host_policy = FKV_HOST_S3FIFO,
     .what = "tenant max-min shares as guarantees, each tenant's prefill at most 1/n of a step while two "
             "have prefill, int4 cold chunks behind 64 hot tokens under pressure, fair victim, reclaim quantize8 > quantize4 > "
             "evict before preempting, S3-FIFO in the tiers below"},
    {.name = "oracle-memory", .policy = "lru", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP, .mode = FKV_SCHEME_UNLIMITED,
     .what = "unlimited KV memory (no cache limit, nothing evicted or preempted): the latency every scheme "
             "approaches"},
    {.name = "isolated", .policy = "lru", .chunk_tokens = 64, .page_tokens = 16, .prefix_cache = 1,
     .victim = FKV_VICTIM_LAST_STARTED, .on_preempt = FKV_PREEMPT_KEEP, .mode = FKV_SCHEME_ISOLATED,
     .what = "each tenant's requests alone (the others absent), plain LRU on the whole cache: what a tenant gets "
             "alone"},
};

const fkv_scheme *fkv_scheme_list(size_t *n)
{
    *n = sizeof schemes / sizeof schemes[0];
    return schemes;
}

const fkv_scheme *fkv_scheme_find(const char *name)
{
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (!strcmp(schemes[i].name, name)) return &schemes[i];
    return NULL;
}

int fkv_scheme_available(const fkv_scheme *s)
{
    for (const char *const *p = fkv_policy_names(); p && *p; p++)
        if (!strcmp(*p, s->policy)) return 1;
    return 0;
}
