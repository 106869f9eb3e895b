#include <fairkv.h>
#include <stdio.h>

int main(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg); /* Llama-like geometry, 16-token pages, F-LRU with quotas */
    cfg.capacity_bytes = 256ull << 20;
    fkv_cache *cache;
    char err[256];
    if (fkv_cache_create(&cfg, &cache, err, sizeof err) != FKV_OK) return fprintf(stderr, "%s\n", err), 1;

    int32_t prompt[100];
    for (int i = 0; i < 100; i++) prompt[i] = 1000 + i;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    fkv_seq *seq;
    fkv_match_info hit = {0, 0, 0};
    fkv_seq_create(cache, &p, &seq);
    /* reuse an earlier request's prefix (on the device; FKV_MATCH_ALL_TIERS
     * also finds what a host tier holds, then fkv_seq_fetch copies it back) */
    fkv_seq_match_prefix(seq, prompt, 100, 99, FKV_MATCH_DEVICE_ONLY, &hit);
    uint32_t cached = hit.device_tokens;
    fkv_slot slots[100];                          /* where to write each new token's K/V */
    if (fkv_seq_append(seq, prompt + cached, 100 - cached, slots) != FKV_OK) return 1;
    fkv_seq_pin(seq);                             /* in the running batch: not evictable */
    uint32_t missing = 0;
    fkv_seq_touch(seq, &missing);                 /* one decode step reads the whole sequence */
    fkv_seq_unpin(seq);
    fkv_seq_free(seq);                            /* its chunks stay cached for the next prompt */

    char text[8192];
    size_t len;
    fkv_cache_metrics_prometheus(cache, text, sizeof text, &len);
    printf("%u tokens reused, %u missing\n%.300s", cached, missing, text);
    fkv_cache_destroy(cache);
    return 0;
}
