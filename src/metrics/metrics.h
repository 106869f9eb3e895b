/* The cache's metrics, from one X-macro list: the stats struct, the JSON
 * dump and the Prometheus text (rendered by src/core/metrics.c, which reads
 * the cache) are all generated from it, so a name cannot drift between
 * them.  The two metric names the seed gives are kept exactly.
 *
 * X(name, type, labels, help)
 *   type:   COUNTER or GAUGE
 *   labels: NONE, CLASS (request_type=short|medium|long), DEVICE
 *           (device=<config.device_label>), DTYPE (precision=f32|f16|int8|int4|fp8),
 *           TIER (tier=expired|cached|over_quota|in_quota|young|global),
 *           QREASON (reason=always|pressure|reclaim),
 *           TENANT (tenant=<id>|other: the first config.tenant_labels tenants
 *           seen get their own label, the rest add up under "other"),
 *           TACTION (tenant, action=quantize8|quantize4|drop|evict|preempt|offload|idle),
 *           KTIER (tier=device|host: the memory tier, not the eviction tier of TIER)
 */
#ifndef FKV_METRICS_H
#define FKV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define FKV_METRICS(X)                                                                           \
    X(kv_cache_chunk_size, GAUGE, DEVICE, "Mean size of resident KV cache chunks, in tokens")    \
    X(kv_cache_miss_rate, GAUGE, CLASS,                                                          \
      "Fraction of KV tokens read by engine steps that had been evicted, per request class")    \
    X(fairkv_hit_tokens_total, COUNTER, CLASS, "KV tokens read by engine steps and resident")    \
    X(fairkv_miss_tokens_total, COUNTER, CLASS, "KV tokens read by engine steps but evicted")    \
    X(fairkv_evicted_chunks_total, COUNTER, CLASS, "Chunks evicted, by class of their creator")  \
    X(fairkv_evictions_by_tier_total, COUNTER, TIER, "Chunks evicted, by the tier that chose them") \
    X(fairkv_evicted_pages_total, COUNTER, NONE, "Pages freed by eviction")                      \
    X(fairkv_pages_used, GAUGE, NONE, "Pages in use")                                            \
    X(fairkv_pages_free, GAUGE, NONE, "Pages free")                                              \
    X(fairkv_usage_ratio, GAUGE, NONE, "Pages in use over all pages")                            \
    X(fairkv_bytes, GAUGE, DTYPE, "Bytes of KV held, by precision (pages and scales)")                      \
    X(fairkv_chunks_resident, GAUGE, NONE, "Resident chunks")                                    \
    X(fairkv_sequences, GAUGE, NONE, "Open sequences")                                           \
    X(fairkv_quota_overruns_total, COUNTER, NONE,                                                \
      "Times an allocation took a request over its quota")                                       \
    X(fairkv_fragmentation_ratio, GAUGE, NONE,                                                   \
      "Unused token slots in used pages over all slots of used pages (internal fragmentation)")  \
    X(fairkv_prefix_queries_tokens_total, COUNTER, NONE, "Prompt tokens looked up in the prefix cache") \
    X(fairkv_prefix_hits_tokens_total, COUNTER, NONE, "Prompt tokens found in the prefix cache")  \
    X(fairkv_cow_copies_total, COUNTER, NONE, "Pages copied on first write into a shared page")  \
    X(fairkv_chunk_splits_total, COUNTER, NONE, "Chunks split where prefixes diverge")           \
    X(fairkv_prefix_index_full_total, COUNTER, NONE,                                            \
      "Page keys left out of a full prefix index (sized for every logical page: 0 unless that sizing is wrong)") \
    X(fairkv_restored_tokens_total, COUNTER, NONE, "Evicted tokens given pages again to recompute") \
    X(fairkv_alloc_failures_total, COUNTER, NONE, "Allocations refused with FKV_EFULL")       \
    X(fairkv_quantized_chunks_total, COUNTER, QREASON,                                          \
      "Cold chunks quantized, by reason (always: on becoming cold; pressure: before evicting; "  \
      "reclaim: taken from a running request over its tenant's share)")                         \
    X(fairkv_dropped_tokens_total, COUNTER, NONE, "Tokens dropped by attention sparsity")    \
    X(fairkv_quant_failures_total, COUNTER, NONE,                                               \
      "Cold chunks left in full precision: non-finite or out-of-range values, or no memory")   \
    X(fairkv_tenant_pages, GAUGE, TENANT, "Pages charged to the tenant (running, preempted and cached chunks)") \
    X(fairkv_tenant_share_pages, GAUGE, TENANT,                                                  \
      "Weighted max-min fair share of the pool over current demands, in pages")                  \
    X(fairkv_tenant_reclaimed_pages_total, COUNTER, TACTION,                                     \
      "Pages taken from the tenant, by action (idle: cached or preempted chunks evicted)")       \
    X(fairkv_tenant_prefix_queries_tokens_total, COUNTER, TENANT,                                \
      "Prompt tokens of the tenant looked up in the prefix cache")                               \
    X(fairkv_tenant_prefix_hits_tokens_total, COUNTER, TENANT, "Prompt tokens of the tenant found in the prefix cache") \
    X(fairkv_host_bytes, GAUGE, NONE, "Bytes of offloaded chunks held in the host tier (K/V and scales)") \
    X(fairkv_reloaded_tokens_total, COUNTER, NONE, "Offloaded tokens copied back from the host tier") \
    X(fairkv_tier_bytes, GAUGE, KTIER, "Bytes of KV held in the memory tier (pages and scales)")     \
    X(fairkv_tier_hit_tokens_total, COUNTER, KTIER, "Prompt tokens the prefix cache found in the memory tier") \
    X(fairkv_tier_demotions_total, COUNTER, KTIER, "Idle chunks moved from the memory tier to the one below") \
    X(fairkv_tier_promotions_total, COUNTER, KTIER, "Chunks copied from the memory tier back to the device") \
    X(fairkv_tier_promoted_bytes_total, COUNTER, KTIER, "Bytes copied from the memory tier back to the device") \
    X(fairkv_tier_evictions_total, COUNTER, KTIER, "Chunks that left the cache from the memory tier") \
    X(fairkv_tier_refused_total, COUNTER, KTIER,                                                 \
      "Idle chunks the admission filter kept from moving from the memory tier to the one below") \
    X(fairkv_tier_demoted_bytes_total, COUNTER, KTIER, "Bytes written from the memory tier to the one below")

enum { FKV__L_NONE = 1, FKV__L_CLASS = 3, FKV__L_DEVICE = 1, FKV__L_DTYPE = 5, FKV__L_TIER = 6, FKV__L_QREASON = 3,
       FKV__L_TENANT = 65 /* FKV__TENANT_LABELS_MAX + other */, FKV__L_TACTION = 65 * 7, FKV__L_KTIER = 2 };

typedef struct fkv__stats {
#define FKV__STAT_FIELD(name, type, labels, help) double name[FKV__L_##labels];
    FKV_METRICS(FKV__STAT_FIELD)
#undef FKV__STAT_FIELD
} fkv__stats;


#endif
