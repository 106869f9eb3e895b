/* The random operation sequences of tests/ops_driver.h over the host tier
 * variants (demotion on, a host of 16 pages, tiered matches, promotion,
 * reclaim with offload into the same tier, admission filters off, tinylfu
 * and seen, host orders lru, s3fifo and arc): the full invariant checker
 * (both tiers' bytes, per tenant, prefix closure) and the read-back of
 * every resident K/V after every operation. */
#include "check.h"
#include "ops_driver.h"

int main(void)
{
    uint64_t per_variant = (uint64_t)(96000 * check_scale()) / OPS_HOST_VARIANTS + 1;
    uint64_t total = 0, matched = 0, promoted = 0, reloaded = 0;
    double demoted = 0, host_evicted = 0, host_hits = 0, refused[3] = {0, 0, 0}, evicted_by[3] = {0, 0, 0};
    for (uint32_t h = 0; h < OPS_HOST_VARIANTS; h++) {
        uint32_t k = OPS_VARIANTS + h;
        ops_state st;
        REQUIRE(ops_open(&st, k) == FKV_OK);
        ops_src src = {NULL, 0, 0, 7000 + h};
        int failed = 0;
        for (uint64_t i = 0; i < per_variant && !failed; i++) {
            if (ops_step(&st, &src) || ops_check(&st)) {
                fprintf(stderr, "host variant %u (%s) op %llu: %s\n", h, ops_policies[h % 6], (unsigned long long)i,
                        st.msg);
                failed = 1;
            }
        }
        CHECKF(!failed, "host variant %u", h);
        total += st.ops;
        matched += st.host_matched;
        promoted += st.promoted;
        reloaded += st.reloaded;
        demoted += st.c->stats.fairkv_tier_demotions_total[0];
        host_evicted += st.c->stats.fairkv_tier_evictions_total[1];
        host_hits += st.c->stats.fairkv_tier_hit_tokens_total[1];
        refused[h / 48 % 3] += st.c->stats.fairkv_tier_refused_total[0];
        evicted_by[h / 144] += st.c->stats.fairkv_tier_evictions_total[1];
        ops_close(&st);
    }
    printf("%llu ops; %.0f chunks demoted, %.0f evicted from the host; %llu tokens matched in the host "
           "(metric %.0f), %llu promoted at match, %llu reloaded at steps\n",
           (unsigned long long)total, demoted, host_evicted, (unsigned long long)matched, host_hits,
           (unsigned long long)promoted, (unsigned long long)reloaded);
    /* the sequence must exercise what it claims to */
    CHECK(demoted > 0 && host_evicted > 0 && matched > 0 && promoted > 0 && reloaded > 0);
    CHECK((double)matched == host_hits);
    /* the admission variants refuse some chunks (tinylfu, seen), off none */
    CHECKF(refused[0] == 0 && refused[1] > 0 && refused[2] > 0, "refused: off %.0f tinylfu %.0f seen %.0f", refused[0],
           refused[1], refused[2]);
    /* every host order (lru, s3fifo, arc) had to make room */
    CHECKF(evicted_by[0] > 0 && evicted_by[1] > 0 && evicted_by[2] > 0, "host evictions: lru %.0f s3fifo %.0f arc %.0f",
           evicted_by[0], evicted_by[1], evicted_by[2]);
    return check_done();
}
