/* The vLLM v1 emulation (issue 13, item 4): what each behaviour the vllm
 * scheme takes from vLLM's code does, each shown against the same run
 * without it.
 *  - tail first: a freed request's chunks enter the free queue (freeq)
 *    last chunk first, so one eviction takes its tail and a resumed
 *    request re-matches everything else;
 *  - no admission in a step that preempted;
 *  - max_batch_tokens / max_running from the profile's GPU;
 *  - vllm-fp8: twice the tokens in the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hand_profile.h"
#include "sim/sim.h"

/* A cache of `pages` pages of 4 tokens, chunks of one page (vLLM's block
 * is the unit of eviction), quotas as given. */
static fkv_cache *block_cache(int64_t *now, uint32_t pages, const char *policy, int tail_first, int quotas)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = pages;
    cc.page_tokens = 4;
    cc.chunk_tokens = 4;
    cc.policy = policy;
    cc.quotas = quotas;
    cc.free_tail_first = tail_first;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = now;
    fkv_cache *cache = NULL;
    char err[256] = "";
    REQUIRE(fkv_cache_create(&cc, &cache, err, sizeof err) == FKV_OK);
    return cache;
}

static fkv_seq *open_seq(fkv_cache *c, uint64_t id)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    return s;
}

/* A request fills the whole cache and is preempted as the scheduler does
 * it with FKV_PREEMPT_FREE (unpin, free); another request takes one page,
 * which evicts one chunk; the first one resumes and matches its prompt
 * again.  Returns the tokens matched. */
static uint32_t preempt_evict_resume(const char *policy, int tail_first, uint32_t pages, int quotas)
{
    int64_t now = 0;
    fkv_cache *c = block_cache(&now, pages, policy, tail_first, quotas);
    uint32_t n = pages * 4;
    int32_t *a = malloc(n * sizeof *a), b[4];
    REQUIRE(a != NULL);
    for (uint32_t i = 0; i < n; i++) a[i] = 100 + (int32_t)i;
    for (int i = 0; i < 4; i++) b[i] = 9000 + i;
    fkv_seq *sa = open_seq(c, 1);
    REQUIRE(fkv_seq_append(sa, a, n, NULL) == FKV_OK);
    REQUIRE(fkv_seq_pin(sa) == FKV_OK);
    now += 1000;
    REQUIRE(fkv_seq_touch(sa, NULL) == FKV_OK); /* a step read it */
    REQUIRE(fkv_seq_unpin(sa) == FKV_OK);
    fkv_seq_free(sa);
    fkv_cache_info ci;
    REQUIRE(fkv_cache_get_info(c, &ci) == FKV_OK);
    CHECK(ci.free_pages == 0); /* every page is cached: the next allocation evicts */
    now += 1000;
    fkv_seq *sb = open_seq(c, 2);
    REQUIRE(fkv_seq_append(sb, b, 4, NULL) == FKV_OK);
    REQUIRE(fkv_seq_pin(sb) == FKV_OK);
    fkv_seq *sr = open_seq(c, 3);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(sr, a, n, n, FKV_MATCH_DEVICE_ONLY, &mi) == FKV_OK);
    uint32_t m = mi.device_tokens;
    fkv_seq_free(sr);
    REQUIRE(fkv_seq_unpin(sb) == FKV_OK);
    fkv_seq_free(sb);
    fkv_cache_destroy(c);
    free(a);
    return m;
}

/* Without quotas a chunk stays in the one policy instance from unpin to
 * free, so the unpin's order counts (step.c); with quotas the free moves
 * it from its request's instance to the cached chunks', so the free's
 * order counts (seq.c).  Both are checked. */
static void tail_first(void)
{
    for (int quotas = 0; quotas <= FKV_QUOTA_REQUEST; quotas++)
        for (uint32_t pages = 2; pages <= 16; pages *= 2) {
            uint32_t all_but_tail = (pages - 1) * 4;
            uint32_t m = preempt_evict_resume("freeq", 1, pages, quotas);
            CHECKF(m == all_but_tail, "freeq tail first, quotas %d, %u pages: matched %u of %u", quotas, pages, m,
                   all_but_tail);
            /* position order: the head goes and the match stops at 0, which
             * is what the emulation did before (the test fails without the
             * option) */
            m = preempt_evict_resume("freeq", 0, pages, quotas);
            CHECKF(m == 0, "freeq in position order, quotas %d, %u pages: matched %u", quotas, pages, m);
            /* LRU orders by last read, chunk id on ties: the option alone
             * does not change it */
            m = preempt_evict_resume("lru", 1, pages, quotas);
            CHECKF(m == 0, "lru, tail first, quotas %d, %u pages: matched %u", quotas, pages, m);
        }
}

static void bad_option(void)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.free_tail_first = 2;
    fkv_cache *c = NULL;
    char err[256] = "";
    CHECK(fkv_cache_create(&cc, &c, err, sizeof err) == FKV_EINVAL && c == NULL);
    CHECKF(strstr(err, "free_tail_first=2") != NULL, "error: %s", err);
}

/* No admission in a preempting step.  7 pages of 16 tokens, VTC over two
 * clients, at most 2 running: A (client 0, prompt 60) and B (client 0,
 * prompt 40) fill the cache in step 1 while C (client 1, prompt 4) waits
 * for a running slot.  At A's 4th decode (position 64) A needs a 5th page
 * and B (last started) is preempted with FREE; a running slot and B's
 * cached chunks are then free, and VTC's lowest counter is C's.  Without
 * the rule C is admitted in that step; with it C waits one step. */
static void no_admit(int rule)
{
    int64_t now = 0;
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 7;
    cc.policy = "freeq";
    cc.quotas = 0;
    cc.chunk_tokens = 16;
    cc.free_tail_first = 1;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create(&cc, &cache, NULL, 0) == FKV_OK);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.on_preempt = FKV_PREEMPT_FREE;
    sc.admission = FKV_ADMIT_VTC;
    sc.n_clients = 2;
    sc.max_running = 2;
    sc.no_admit_after_preempt = rule;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req r[3];
    memset(r, 0, sizeof r);
    uint32_t prompt[3] = {60, 40, 4}, output[3] = {40, 40, 2};
    for (int i = 0; i < 3; i++) {
        r[i].id = (uint64_t)i + 1;
        r[i].client = i == 2;
        r[i].prompt = prompt[i];
        r[i].output = output[i];
        r[i].tag = 77 + (uint64_t)i;
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    }
    fkv_batch b = {0};
    int seen = 0, steps = 0;
    while (fkv_sched_finished(s) < 3 && steps < 10000) {
        fkv_req_state c_before = r[2].state;
        REQUIRE(fkv_sched_step(s, now, &b) == FKV_OK);
        if (b.preempted && !seen) {
            seen = 1;
            CHECK(r[1].state == FKV_REQ_WAITING && c_before == FKV_REQ_WAITING);
            int c_in = 0;
            for (size_t i = 0; i < b.n; i++) c_in |= b.items[i].r == &r[2];
            if (rule) CHECKF(!c_in && r[2].state == FKV_REQ_WAITING, "C admitted in the preempting step");
            else CHECKF(c_in && r[2].state == FKV_REQ_RUNNING, "C not admitted without the rule");
        }
        now += 1000000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    CHECK(seen);
    CHECK(fkv_sched_finished(s) == 3 && fkv_sched_rejections(s) == 0);
    for (int i = 0; i < 3; i++) CHECK(r[i].generated == r[i].output);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* vLLM's defaults by GPU (vllm/engine/arg_utils.py, get_batch_defaults),
 * then in a run: one long prompt alone on the system is prefilled in
 * steps of the scheme's budget. */
static void batch_defaults(void)
{
    fkv_profile a100 = hand_profile(), h100 = hand_profile();
    a100.gpu = "A100-80GB-SXM";
    h100.gpu = "H100-SXM";
    a100.gpu_mem_bytes = h100.gpu_mem_bytes = 80e9;
    uint32_t ta, ra, th, rh;
    fkv_vllm_batch_defaults(&a100, &ta, &ra);
    fkv_vllm_batch_defaults(&h100, &th, &rh);
    CHECKF(ta == 2048 && ra == 256, "A100: %u / %u", ta, ra);
    CHECKF(th == 8192 && rh == 1024, "H100: %u / %u", th, rh);
    fkv_workload w;
    memset(&w, 0, sizeof w);
    w.reqs = calloc(1, sizeof *w.reqs);
    REQUIRE(w.reqs != NULL);
    w.n = 1;
    w.reqs[0].id = 1;
    w.reqs[0].prompt = 3 * th / 2;
    w.reqs[0].output = 2;
    w.reqs[0].tag = 5;
    const fkv_profile *prof[2] = {&a100, &h100};
    uint32_t want[2] = {ta, th};
    for (int k = 0; k < 2; k++) {
        fkv_sim_config c;
        fkv_sim_config_default(&c);
        c.profile = prof[k];
        c.capacity_tokens = 4 * th;
        fkv_sim_result r;
        char err[256] = "";
        REQUIRE(fkv_sim_run(&w, fkv_scheme_find("vllm"), &c, &r, err, sizeof err) == FKV_OK);
        CHECKF(r.max_step_tokens == want[k], "%s: largest step %llu, want %u", prof[k]->gpu,
               (unsigned long long)r.max_step_tokens, want[k]);
        fkv_sim_result_free(&r);
        /* a budget given on the command line wins */
        c.sched.max_batch_tokens = 1000;
        c.batch_tokens_set = 1;
        REQUIRE(fkv_sim_run(&w, fkv_scheme_find("vllm"), &c, &r, err, sizeof err) == FKV_OK);
        CHECKF(r.max_step_tokens == 1000, "%s, budget set: largest step %llu", prof[k]->gpu,
               (unsigned long long)r.max_step_tokens);
        fkv_sim_result_free(&r);
        /* other schemes keep the configured defaults */
        c.sched.max_batch_tokens = 2048;
        c.batch_tokens_set = 0;
        REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
        CHECKF(r.max_step_tokens == 2048, "lru on %s: largest step %llu", prof[k]->gpu,
               (unsigned long long)r.max_step_tokens);
        fkv_sim_result_free(&r);
    }
    fkv_workload_free(&w);
}

/* vllm-fp8 holds twice the tokens: two requests of 0.6 x the capacity
 * each run together under vllm-fp8 and one after the other under vllm;
 * with room for both, the two schemes give the same latencies. */
static void fp8_capacity(void)
{
    fkv_profile p = hand_profile();
    const uint64_t cap = 1600;
    fkv_workload w;
    memset(&w, 0, sizeof w);
    w.reqs = calloc(2, sizeof *w.reqs);
    REQUIRE(w.reqs != NULL);
    w.n = 2;
    for (int i = 0; i < 2; i++) {
        w.reqs[i].id = (uint64_t)i + 1;
        w.reqs[i].prompt = (uint32_t)(cap * 6 / 10);
        w.reqs[i].output = 4;
        w.reqs[i].tag = 10 + (uint64_t)i;
    }
    for (int ample = 0; ample < 2; ample++) {
        fkv_sim_result r16, r8;
        fkv_sim_config c;
        fkv_sim_config_default(&c);
        c.profile = &p;
        c.capacity_tokens = ample ? 4 * cap : cap;
        char err[256] = "";
        REQUIRE(fkv_sim_run(&w, fkv_scheme_find("vllm"), &c, &r16, err, sizeof err) == FKV_OK);
        REQUIRE(fkv_sim_run(&w, fkv_scheme_find("vllm-fp8"), &c, &r8, err, sizeof err) == FKV_OK);
        CHECK(r16.done == 2 && r8.done == 2);
        if (ample) {
            CHECK(r8.e2e_ns[0] == r16.e2e_ns[0] && r8.e2e_ns[1] == r16.e2e_ns[1]);
        } else {
            /* the second request waits for the first's memory at fp16 only */
            CHECKF(r8.ttft_ns[1] < r16.ttft_ns[1], "second TTFT fp8 %lld ns, fp16 %lld ns",
                   (long long)r8.ttft_ns[1], (long long)r16.ttft_ns[1]);
            CHECK(r16.ttft_ns[1] >= r16.e2e_ns[0]);
        }
        fkv_sim_result_free(&r16);
        fkv_sim_result_free(&r8);
    }
    fkv_workload_free(&w);
}

int main(void)
{
    tail_first();
    bad_option();
    no_admit(0);
    no_admit(1);
    batch_defaults();
    fp8_capacity();
    return check_done();
}
