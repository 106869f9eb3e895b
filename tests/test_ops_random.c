/* At least 100,000 random create/append/fork/free/match/touch/restore/pin/
 * evict operations per fixed seed, over every policy and every mode, with
 * the full invariant checker and a read-back of every resident K/V. */
#include "check.h"
#include "ops_driver.h"

int main(void)
{
    const uint32_t variants = OPS_VARIANTS;
    uint64_t per_variant = (uint64_t)(432000 * check_scale()) / variants + 1;
    uint64_t total = 0, efull = 0, evicted = 0, hits = 0, cow = 0, missed = 0, splits = 0, quantized = 0;
    uint64_t reclaimed = 0, tenant_ops = 0, reloaded = 0;
    for (uint32_t k = 0; k < variants; k++) {
        ops_state st;
        REQUIRE(ops_open(&st, k) == FKV_OK);
        ops_src src = {NULL, 0, 0, 1000 + k};
        int failed = 0;
        for (uint64_t i = 0; i < per_variant && !failed; i++) {
            if (ops_step(&st, &src) || (i % 50 == 49 && ops_check(&st))) {
                fprintf(stderr, "variant %u (%s) op %llu: %s\n", k, ops_policies[k % 6], (unsigned long long)i, st.msg);
                failed = 1;
            }
        }
        CHECKF(!failed, "variant %u", k);
        if (!failed) CHECKF(!ops_check(&st), "variant %u final: %s", k, st.msg);
        fkv_counters cn;
        fkv_cache_counters(st.c, &cn);
        evicted += cn.evicted_pages;
        hits += cn.prefix_hit_tokens;
        cow += cn.cow_copies;
        for (int i = 0; i < FKV_N_CLASSES; i++) missed += cn.miss_tokens[i];
        splits += (uint64_t)st.c->stats.fairkv_chunk_splits_total[0];
        quantized += (uint64_t)(st.c->stats.fairkv_quantized_chunks_total[0] + st.c->stats.fairkv_quantized_chunks_total[1]);
        total += st.ops;
        reclaimed += st.reclaimed;
        reloaded += st.reloaded;
        if (st.tenants) tenant_ops += st.ops;
        efull += st.efull;
        ops_close(&st);
    }
    printf("%llu ops, %llu refused with EFULL; %llu pages evicted, %llu prefix-hit tokens, %llu CoW pages, "
           "%llu missed tokens, %llu splits, %llu quantized chunks; %llu ops in tenant mode, %llu pages reclaimed, %llu tokens reloaded\n",
           (unsigned long long)total, (unsigned long long)efull, (unsigned long long)evicted, (unsigned long long)hits,
           (unsigned long long)cow, (unsigned long long)missed, (unsigned long long)splits, (unsigned long long)quantized,
           (unsigned long long)tenant_ops, (unsigned long long)reclaimed, (unsigned long long)reloaded);
    /* the sequence must exercise what it claims to */
    CHECK(evicted > 0 && hits > 0 && cow > 0 && missed > 0 && splits > 0 && quantized > 0);
    CHECK(total >= (uint64_t)(100000 * check_scale()));
    CHECK(tenant_ops >= (uint64_t)(100000 * check_scale()) && reclaimed > 0 && reloaded > 0);
    return check_done();
}
