/* Within-share tenants first (sched.h, "Reclaiming admission": no
 * self-preemption of a light request while a heavy tenant over its share
 * holds running memory, admission that takes memory from over-share
 * tenants) and the step-time bound (sched.h, "Step-time bound": engaging
 * at a hand-computed cap, releasing to the full budget). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sched/sched.h"
#include "sched_step.h"
#include "sim/workload.h"

#define MS(x) ((int64_t)((x) * 1e6 + 0.5))

/* A phantom LRU cache of `pages` 16-token pages in chunks of chunk_tokens,
 * shares by tenant, prefixes shared or not, a host tier of host_bytes
 * (idle chunks demoted to it) or none. */
static fkv_cache *cache_with(int64_t *now, uint32_t pages, uint32_t chunk_tokens, int prefix, uint64_t host_bytes)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = pages;
    cc.page_tokens = 16;
    cc.chunk_tokens = chunk_tokens;
    cc.policy = "lru";
    cc.prefix_cache = prefix;
    cc.quotas = FKV_QUOTA_TENANT;
    cc.host_capacity_bytes = host_bytes;
    cc.host_demote = host_bytes > 0;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = now;
    cc.thread_safe = 0;
    fkv_cache *c;
    char err[256] = "";
    fkv_status st = fkv_cache_create(&cc, &c, err, sizeof err);
    CHECKF(st == FKV_OK, "fkv_cache_create: %s", err);
    REQUIRE(st == FKV_OK);
    return c;
}

/* 16-token chunks, no prefix sharing, no host tier. */
static fkv_cache *cache_of(int64_t *now, uint32_t pages) { return cache_with(now, pages, 16, 0, 0); }

/* Runs q[0..n) (added at their arrivals; steps of 1 ms + 20 us a token)
 * to the end.  The preemptions of q[light]'s tenant's requests that
 * happened while tenant `heavy` held more pages than its share go to
 * *bad. */
static void drive(fkv_sched *s, fkv_cache *c, fkv_req *q, size_t n, int64_t *now, size_t light, uint64_t heavy,
                  uint32_t *bad)
{
    fkv_batch b = {0};
    size_t next = 0, steps = 0;
    uint64_t lt = q[light].tenant;
    *bad = 0;
    while (fkv_sched_finished(s) < n && steps < 200000) {
        while (next < n && q[next].arrival_ns <= *now) REQUIRE(fkv_sched_add(s, &q[next++]) == FKV_OK);
        if (!fkv_sched_n_running(s) && !fkv_sched_n_waiting(s)) {
            *now = q[next].arrival_ns;
            continue;
        }
        uint32_t before = 0, after = 0;
        for (size_t i = 0; i < next; i++) before += q[i].tenant == lt ? q[i].preemptions : 0;
        STEP(s, *now, &b);
        for (size_t i = 0; i < next; i++) after += q[i].tenant == lt ? q[i].preemptions : 0;
        if (after > before) {
            fkv_tenant_info ti;
            REQUIRE(fkv_cache_tenant_info(c, heavy, &ti) == FKV_OK);
            /* the heavy tenant's running requests were served in this
             * step: they still hold their pages */
            if ((double)ti.pages > ti.share_pages) *bad += after - before;
        }
        *now += MS(1) + (int64_t)b.tokens * 20000;
        REQUIRE(fkv_sched_finish(s, &b, *now) == FKV_OK);
        steps++;
    }
    CHECK(fkv_sched_finished(s) == n);
    fkv_batch_free(&b);
}

/* Two heavy requests of tenant 1 (250 + 60 tokens: 20 pages each) and a
 * light one of tenant 2 (20 + 60: 5 pages) in 40 pages, the fair victim
 * rule.  Shares over the demands: tenant 2 gets its 5, tenant 1 35.  The
 * light request, admitted last, is served last in the plain order; when
 * it needs a page the heavy ones (served before it, over their share)
 * are no candidates, so it preempts itself.  With admit_reclaim it is
 * served before the younger heavy request, which pays instead. */
static void no_self_preemption(void)
{
    uint32_t light_pre[2], bad[2];
    for (int on = 0; on < 2; on++) {
        int64_t now = 0;
        fkv_cache *c = cache_of(&now, 36);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 512;
        sc.victim = FKV_VICTIM_FAIR;
        sc.admit_reclaim = on;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        fkv_req q[3] = {sched_req(1, 1, 250, 60), sched_req(2, 1, 250, 60), sched_req(3, 2, 20, 60)};
        q[2].arrival_ns = MS(1);
        drive(s, c, q, 3, &now, 2, 1, &bad[on]);
        light_pre[on] = q[2].preemptions;
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    printf("no_self_preemption: light request preempted %u times (%u while the heavy tenant was over its share), "
           "%u with admit_reclaim\n",
           light_pre[0], bad[0], light_pre[1]);
    CHECKF(bad[0] > 0, "the plain order did not preempt the light request while the heavy one was over (%u)", bad[0]);
    CHECKF(light_pre[1] == 0 && bad[1] == 0, "with admit_reclaim the light request was preempted %u times", light_pre[1]);
}

/* The cache full of two heavy requests' (tenant 1) running prefills, a
 * light request (tenant 2) arrives: in the plain order (or under the DRR
 * share, whose admissions must fit beside the running requests) it waits
 * for memory a heavy request gives up; with admit_reclaim it takes it from
 * them at once (reclaim then preemption) and its first token comes in the
 * step after its arrival. */
static void admission_reclaims(fkv_step_share share)
{
    int64_t ttft[2];
    uint64_t pre[2];
    for (int on = 0; on < 2; on++) {
        int64_t now = 0;
        fkv_cache *c = cache_of(&now, 64);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 256;
        sc.victim = FKV_VICTIM_FAIR;
        sc.step_share = share;
        sc.admit_reclaim = on;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        fkv_req q[4] = {sched_req(1, 1, 300, 200), sched_req(2, 1, 300, 200), sched_req(3, 1, 300, 200), sched_req(4, 2, 32, 4)};
        q[3].arrival_ns = MS(80);
        uint32_t bad;
        drive(s, c, q, 4, &now, 3, 1, &bad);
        ttft[on] = q[3].first_token_ns - q[3].arrival_ns;
        pre[on] = fkv_sched_preemptions(s);
        CHECK(q[3].state == FKV_REQ_DONE);
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    printf("admission_reclaims (step share %s): light TTFT %.2f ms without, %.2f ms with admit_reclaim (%llu preemptions)\n",
           fkv_step_share_name(share), ttft[0] / 1e6, ttft[1] / 1e6, (unsigned long long)pre[1]);
    /* a step takes 1 ms + 20 us a token, at most 6.2 ms: admitted in the
     * first step formed after its arrival, the light request's first token
     * comes within two steps */
    CHECKF(ttft[1] <= MS(12.4), "with admit_reclaim the light request waited %.2f ms", ttft[1] / 1e6);
    CHECKF(ttft[1] < ttft[0], "admit_reclaim %.2f ms, plain %.2f ms", ttft[1] / 1e6, ttft[0] / 1e6);
    CHECK(pre[1] > 0);
}

/* A step's cost: 500 + 2 a token + 10 an item (hand-computable). */
static int64_t toy_cost(void *ctx, const fkv_batch *b)
{
    (void)ctx;
    return 500 + 2 * (int64_t)b->tokens + 10 * (int64_t)b->n;
}

/* Step-time bound k = 2 under the DRR share, no cache (every tenant within
 * its share).  A heavy prompt (tenant 1, 5000 tokens) alone: its own
 * prefill fills the budget, full 2048.  A light prompt (tenant 2, 40)
 * arrives: ref = 500 + 2 x 40 + 10 = 590, the cap B is the largest with
 * 500 + 2B + 10 <= 1180: 335.  Once it decodes and nothing waits: full
 * budget again.  A second light prompt then, with one decode: ref = 500 +
 * 2 x 41 + 20 = 602, 500 + 2B + 20 <= 1204: 342.  Without a hook the cost
 * is the tokens: cap 2 x 40 = 80. */
static void bound(void)
{
    for (int hook = 1; hook >= 0; hook--) {
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.step_share = FKV_STEP_DRR;
        sc.step_bound = 2;
        if (hook) sc.step_cost = toy_cost;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
        fkv_req h = sched_req(1, 1, 5000, 4), l1 = sched_req(2, 2, 40, 50), l2 = sched_req(3, 2, 40, 50);
        fkv_batch b = {0};
        int64_t now = 0;
        REQUIRE(fkv_sched_add(s, &h) == FKV_OK);
        STEP(s, now, &b);
        CHECKF(b.tokens == 2048, "heavy alone: %u tokens, want 2048", b.tokens);
        REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
        REQUIRE(fkv_sched_add(s, &l1) == FKV_OK);
        STEP(s, now, &b);
        uint32_t want = hook ? 335 : 80;
        CHECKF(b.tokens == want, "light waiting: %u tokens, want %u (hook %d)", b.tokens, want, hook);
        REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
        CHECK(l1.generated == 1);
        STEP(s, now, &b);
        CHECKF(b.tokens == 2048, "nothing waiting: %u tokens, want the full 2048", b.tokens);
        REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
        if (hook) {
            REQUIRE(fkv_sched_add(s, &l2) == FKV_OK);
            STEP(s, now, &b);
            CHECKF(b.tokens == 342, "light waiting beside a decode: %u tokens, want 342", b.tokens);
            REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
        }
        fkv_batch_free(&b);
        fkv_sched_destroy(s);
    }
}

/* The bound keeps its request's tokens: in the plain order (running
 * requests first, then admission) a heavy prompt running (tenant 1, 5000
 * tokens) is served before the light one waiting (tenant 2, 40 tokens).
 * The cap is 335 as in bound(); the heavy prefill gets 335 - 40 = 295 and
 * the light prompt its 40, so it emits its first token in that step.
 * Without the reservation the heavy one took all 335 and the light prompt
 * waited for as long as the heavy prefill lasted. */
static void bound_reserves(void)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.step_bound = 2;
    sc.step_cost = toy_cost;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req h = sched_req(1, 1, 5000, 4), l = sched_req(2, 2, 40, 50);
    fkv_batch b = {0};
    int64_t now = 0;
    REQUIRE(fkv_sched_add(s, &h) == FKV_OK);
    STEP(s, now, &b);
    CHECK(b.tokens == 2048);
    REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
    REQUIRE(fkv_sched_add(s, &l) == FKV_OK);
    STEP(s, now, &b);
    CHECKF(b.tokens == 335, "light waiting: %u tokens, want 335", b.tokens);
    uint32_t heavy = 0, light = 0;
    for (size_t i = 0; i < b.n; i++) {
        if (b.items[i].r == &h) heavy = b.items[i].n_new;
        if (b.items[i].r == &l) light = b.items[i].n_new;
    }
    CHECKF(heavy == 295 && light == 40, "heavy %u tokens, light %u: want 295 and 40", heavy, light);
    REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
    CHECK(l.generated == 1);
    /* nothing waits for a first token: the heavy prefill has the full budget */
    STEP(s, now, &b);
    CHECKF(b.tokens == 2048, "after: %u tokens, want 2048", b.tokens);
    REQUIRE(fkv_sched_finish(s, &b, now += MS(1)) == FKV_OK);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* Every request ends with the options on, against an adversarial heavy
 * tenant (tenant 1: long prompts four times as often as tenant 2's tiny
 * ones, as test_sched_fair's starvation case), under each step order, with
 * the bound on: no rejection, every output complete; and tenant 2's
 * requests (within their share) are preempted no more often than without
 * admit_reclaim (victims spare within-share tenants but for the oldest
 * request's need). */
static void all_finish(fkv_step_share share)
{
    size_t light_pre[2];
    uint64_t pre[2];
    uint32_t bad[2];
    for (int on = 0; on < 2; on++) {
        int64_t now = 0;
        fkv_cache *c = cache_of(&now, 160);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.victim = FKV_VICTIM_FAIR;
        sc.step_share = share;
        sc.admit_reclaim = on;
        sc.step_bound = 2;
        sc.step_cost = toy_cost;
        REQUIRE(fkv_sched_parse_reclaim("quantize8,evict", sc.reclaim, &sc.n_reclaim, NULL, 0) == 0);
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        size_t n = (size_t)(400 * check_scale()) + 50;
        fkv_req *q = calloc(n, sizeof *q);
        REQUIRE(q);
        uint64_t rng = 12345;
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t x = (uint32_t)(rng >> 33);
            q[i] = i % 5 == 4 ? sched_req(i + 1, 2, 1 + x % 12, 1 + x % 4) : sched_req(i + 1, 1, 300 + x % 700, 50 + x % 300);
            q[i].arrival_ns = (int64_t)i * MS(2);
        }
        drive(s, c, q, n, &now, 4, 1, &bad[on]);
        pre[on] = fkv_sched_preemptions(s);
        CHECK(fkv_sched_rejections(s) == 0);
        light_pre[on] = 0;
        for (size_t i = 0; i < n; i++) {
            CHECKF(q[i].state == FKV_REQ_DONE && q[i].generated == q[i].output, "request %zu did not finish", i + 1);
            if (q[i].tenant == 2) light_pre[on] += q[i].preemptions;
        }
        free(q);
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    printf("all_finish (step share %s): %llu preemptions, %zu of tenant 2 (%u while tenant 1 was over its share) "
           "without admit_reclaim; %llu, %zu (%u) with it\n",
           fkv_step_share_name(share), (unsigned long long)pre[0], light_pre[0], bad[0], (unsigned long long)pre[1],
           light_pre[1], bad[1]);
    CHECK(pre[1] > 0); /* the pressure path ran */
    CHECKF(light_pre[1] <= light_pre[0], "tenant 2 preempted %zu times with admit_reclaim, %zu without", light_pre[1],
           light_pre[0]);
}

/* Steps until q[0..n) are done or `steps` steps have run (a tiny request
 * of tenant 3, prompt 1 and output 1, added before every step while
 * `light` is set: a within-share request always waits for its first
 * token, so the bound always caps); the steps run. */
static size_t run_until(fkv_sched *s, fkv_req **q, size_t n, int64_t *now, size_t steps, fkv_req *light, size_t n_light)
{
    fkv_batch b = {0};
    size_t k = 0, used = 0;
    for (; k < steps; k++) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++) done += q[i]->state == FKV_REQ_DONE;
        if (done == n) break;
        if (light && used < n_light) REQUIRE(fkv_sched_add(s, &light[used++]) == FKV_OK);
        STEP(s, *now, &b);
        *now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, *now) == FKV_OK);
    }
    fkv_batch_free(&b);
    return k;
}

/* The step-time bound (k = 2, cost = tokens) caps a step far below a
 * chunk: a request's restores must still go through, while tiny requests
 * of a third tenant (1-token prompts) keep the cap at a few tokens.  (a) A
 * prompt whose first 96 tokens wait in the host tier (demoted when another
 * tenant's prompt took the device): its 32-token host chunks cost no
 * compute at all.  (b) A request preempted (its sequence kept, its chunks
 * evicted meanwhile) recomputes 32-token chunks.  Each must end within a bounded number of steps; before the
 * fix neither did (every step left them out). */
static void bound_restores(void)
{
    {
        int64_t now = 0;
        fkv_cache *c = cache_with(&now, 8, 32, 1, 1ULL << 30);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 256;
        sc.step_bound = 2;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        fkv_req a = sched_req(1, 1, 97, 1), o = sched_req(2, 2, 97, 1), r = sched_req(3, 1, 97, 2);
        r.tag = a.tag; /* a's tokens, in a's tenant (prefixes stay within it) */
        fkv_req *q[1] = {&a};
        REQUIRE(fkv_sched_add(s, &a) == FKV_OK);
        run_until(s, q, 1, &now, 100, NULL, 0);
        q[0] = &o; /* o's pages push a's prefix to the host */
        REQUIRE(fkv_sched_add(s, &o) == FKV_OK);
        run_until(s, q, 1, &now, 100, NULL, 0);
        q[0] = &r;
        REQUIRE(fkv_sched_add(s, &r) == FKV_OK);
        enum { NL = 100 };
        fkv_req light[NL];
        for (size_t i = 0; i < NL; i++) light[i] = sched_req(100 + i, 3, 1, 1);
        size_t steps = run_until(s, q, 1, &now, NL, light, NL);
        printf("bound_restores (host): %zu steps, state %d, %u of the prompt from the host (%llu reloaded)\n", steps,
               (int)r.state, (unsigned)r.matched_host, (unsigned long long)r.reloaded);
        CHECKF(r.matched_host >= 64, "the prompt found %u tokens in the host tier, want its chunks there",
               (unsigned)r.matched_host);
        CHECKF(r.state == FKV_REQ_DONE, "a prompt reloading from the host under the bound did not end in 100 steps");
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    {
        int64_t now = 0;
        fkv_cache *c = cache_with(&now, 12, 32, 1, 0);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 256;
        sc.step_bound = 2;
        sc.on_preempt = FKV_PREEMPT_KEEP;
        sc.miss = FKV_MISS_RECOMPUTE;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        fkv_req a = sched_req(1, 1, 64, 60), v = sched_req(2, 2, 64, 60);
        enum { NL = 600 };
        fkv_req *light = calloc(NL, sizeof *light);
        REQUIRE(light);
        for (size_t i = 0; i < NL; i++) light[i] = sched_req(100 + i, 3, 1, 1);
        REQUIRE(fkv_sched_add(s, &a) == FKV_OK);
        REQUIRE(fkv_sched_add(s, &v) == FKV_OK);
        fkv_req *q[2] = {&a, &v};
        size_t steps = run_until(s, q, 2, &now, NL, light, NL);
        printf("bound_restores (recompute): %zu steps, states %d %d, generated %u %u; preempted %u and %u times, %llu and %llu tokens recomputed\n", steps,
               (int)a.state, (int)v.state, a.generated, v.generated, a.preemptions, v.preemptions, (unsigned long long)a.recomputed, (unsigned long long)v.recomputed);
        CHECKF(a.preemptions + v.preemptions > 0, "no preemption: the scene did not happen");
        CHECKF(a.recomputed + v.recomputed > 0, "nothing recomputed: the scene did not happen");
        CHECKF(a.state == FKV_REQ_DONE && v.state == FKV_REQ_DONE,
               "a preempted request recomputing 32-token chunks under the bound did not end in %d steps", NL);
        free(light);
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
}

static void config_checks(void)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    CHECK(sc.admit_reclaim == 0 && sc.step_bound == 0);
    sc.token_ids = fkv_sim_token_ids;
    fkv_sched *s;
    sc.step_bound = -1;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
    sc.step_bound = NAN;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
    sc.step_bound = 0;
    sc.admit_reclaim = 2;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
}

int main(void)
{
    config_checks();
    no_self_preemption();
    admission_reclaims(FKV_STEP_SHARE_OFF);
    admission_reclaims(FKV_STEP_DRR);
    bound();
    bound_reserves();
    bound_restores();
    all_finish(FKV_STEP_SHARE_OFF);
    all_finish(FKV_STEP_DRR);
    return check_done();
}
