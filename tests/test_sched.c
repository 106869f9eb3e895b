/* Scheduler and event loop: hand-computed scenarios reproduced exactly, and
 * the token budget under memory pressure.
 *
 * The hand scenarios use a profile whose linear-op time is
 *   lin(n) = 10 ms + 0.01 ms x (n - 1)   (table {1: 10 ms, 1001: 20 ms})
 * with attention and overhead switched off, so every step time can be
 * computed on paper. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hand_profile.h"
#include "sim/sim.h"
#include "util/err.h"

typedef struct spec {
    double arrival_ms;
    uint32_t prompt, output;
} spec;

static void make(fkv_workload *w, const spec *s, size_t n)
{
    memset(w, 0, sizeof *w);
    w->reqs = calloc(n, sizeof *w->reqs);
    w->n = n;
    for (size_t i = 0; i < n; i++) {
        w->reqs[i].id = i + 1;
        w->reqs[i].arrival_ns = (int64_t)(s[i].arrival_ms * 1e6 + 0.5);
        w->reqs[i].prompt = s[i].prompt;
        w->reqs[i].output = s[i].output;
        w->reqs[i].tag = 1000 + i;
    }
}

#define MS(x) ((int64_t)((x) * 1e6 + 0.5))

static void expect(const fkv_sim_result *r, size_t i, double ttft_ms, double e2e_ms)
{
    CHECKF(r->ttft_ns[i] == MS(ttft_ms), "req %zu ttft %lld ns, want %.3f ms", i, (long long)r->ttft_ns[i], ttft_ms);
    CHECKF(r->e2e_ns[i] == MS(e2e_ms), "req %zu e2e %lld ns, want %.3f ms", i, (long long)r->e2e_ns[i], e2e_ms);
}

/* Scenario 1: A(0 ms, prompt 100, output 3), B(5 ms, 50, 2), budget 2048.
 *  step 1 t=0:      A prefill 100             lin(100) = 10.99 -> 10.99  A token 1
 *  step 2 t=10.99:  A decode 1 + B prefill 50 lin(51)  = 10.50 -> 21.49  A 2, B 1
 *  step 3 t=21.49:  A 1 + B 1                 lin(2)   = 10.01 -> 31.50  A 3 done, B 2 done
 * TTFT A 10.99, B 16.49; e2e A 31.50, B 26.50. */
static void scenario1(const fkv_scheme *sc, uint64_t capacity)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.capacity_tokens = capacity;
    spec s[] = {{0, 100, 3}, {5, 50, 2}};
    fkv_workload w;
    make(&w, s, 2);
    fkv_sim_result r;
    char err[256] = "";
    REQUIRE(fkv_sim_run(&w, sc, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 10.99, 31.50);
    expect(&r, 1, 16.49, 26.50);
    CHECK(r.steps == 3 && r.done == 2 && r.preemptions == 0);
    CHECK(r.makespan_ns == MS(31.50));
    CHECK(r.tpot_ns[0] == (MS(31.50) - MS(10.99)) / 2);
    if (capacity) CHECKF(r.hit_tokens == 100 + 101 + 50, "hit tokens %llu", (unsigned long long)r.hit_tokens);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* Scenario 2: chunked prefill, budget 64; A(0, 100, 2), B(0, 30, 1).
 *  step 1 t=0:      A prefill 64 (budget spent)       lin(64) = 10.63 -> 10.63
 *  step 2 t=10.63:  A prefill 36 + B prefill 28       lin(64) = 10.63 -> 21.26  A token 1
 *  step 3 t=21.26:  A decode 1 + B prefill 2          lin(3)  = 10.02 -> 31.28  A done, B token 1 = done
 * TTFT A 21.26, B 31.28; e2e A 31.28, B 31.28. */
static void scenario2(void)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.sched.max_batch_tokens = 64;
    spec s[] = {{0, 100, 2}, {0, 30, 1}};
    fkv_workload w;
    make(&w, s, 2);
    fkv_sim_result r;
    char err[256];
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 21.26, 31.28);
    expect(&r, 1, 31.28, 31.28);
    CHECK(r.steps == 3 && r.max_step_tokens == 64);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* Scenario 3: dynamic batching, window 50 ms; A(0, 10, 2), B(20, 10, 1),
 * C(60, 10, 1).
 *  t=0..50: window open (A waits since 0)
 *  step t=50:     A + B prefill 20            lin(20) = 10.19 -> 60.19  A 1, B done
 *  step t=60.19:  A decode (C waits: batch still running) lin(1) = 10 -> 70.19  A done
 *  t=70.19..110:  window of C (arrived 60)
 *  step t=110:    C prefill 10                lin(10) = 10.09 -> 120.09 C done
 * e2e A 70.19, B 40.19, C 60.09. */
static void scenario3(void)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.sched.mode = FKV_SCHED_DYNAMIC;
    c.sched.batch_window_ns = MS(50);
    spec s[] = {{0, 10, 2}, {20, 10, 1}, {60, 10, 1}};
    fkv_workload w;
    make(&w, s, 3);
    fkv_sim_result r;
    char err[256];
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 60.19, 70.19);
    expect(&r, 1, 40.19, 40.19);
    expect(&r, 2, 60.09, 60.09);
    CHECK(r.steps == 3);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* Scenario 4: no chunked prefill (a prompt runs whole), budget 64;
 * A(0, prompt 20, output 3), B(0, 44, 1), C(0, 100, 1), E(0, 30, 1).
 *  step 1 t=0:     A 20 + B 44: B's prompt equals the budget left, so it
 *                  runs (exactly full)  lin(64) = 10.63 -> 10.63  A 1, B done
 *  step 2 t=10.63: A decode 1; C (100 > 63 left) waits, admitted; E 30 packs
 *                                       lin(31) = 10.30 -> 20.93  A 2, E done
 *  step 3 t=20.93: A decode 1; C still waits (63 left)
 *                                       lin(1)  = 10.00 -> 30.93  A 3 done
 *  step 4 t=30.93: C alone in an empty step: 64 of its 100 tokens (still
 *                  bounded by the budget) lin(64) = 10.63 -> 41.56
 *  step 5 t=41.56: C's other 36         lin(36) = 10.35 -> 51.91  C done
 * TTFT A 10.63, B 10.63, C 51.91, E 20.93; e2e A 30.93, B 10.63, C 51.91,
 * E 20.93.  Deferring a prompt equal to the budget left would run A alone
 * in step 1 (B then in step 2: e2e 20.63). */
static void scenario4(const fkv_scheme *sc, uint64_t capacity)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.capacity_tokens = capacity;
    c.sched.chunked_prefill = 0;
    c.sched.max_batch_tokens = 64;
    spec s[] = {{0, 20, 3}, {0, 44, 1}, {0, 100, 1}, {0, 30, 1}};
    fkv_workload w;
    make(&w, s, 4);
    fkv_sim_result r;
    char err[256] = "";
    REQUIRE(fkv_sim_run(&w, sc, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 10.63, 30.93);
    expect(&r, 1, 10.63, 10.63);
    expect(&r, 2, 51.91, 51.91);
    expect(&r, 3, 20.93, 20.93);
    CHECKF(r.steps == 5 && r.done == 4 && r.max_step_tokens == 64, "steps %llu", (unsigned long long)r.steps);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* No chunked prefill, budget 64: a prompt of exactly 64 tokens alone runs
 * in one step, lin(64) = 10.63 ms, then decodes: 10.63 + 10 = 20.63; two
 * prompts of 30 and 34 fill one step together (lin(64)), a third of 1 token
 * does not fit beside them and runs in the next step with their decodes:
 *  step 1 t=0:     A 30 + B 34          lin(64) = 10.63 -> 10.63  A 1, B 1
 *  step 2 t=10.63: A 1 + B 1 + C 1      lin(3)  = 10.02 -> 20.65  A, B, C done
 * Deferring B (34 = the budget left) would run A and C in step 1. */
static void nonchunked_small(void)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.sched.chunked_prefill = 0;
    c.sched.max_batch_tokens = 64;
    spec one[] = {{0, 64, 2}};
    fkv_workload w;
    make(&w, one, 1);
    fkv_sim_result r;
    char err[256] = "";
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 10.63, 20.63);
    CHECK(r.steps == 2 && r.max_step_tokens == 64);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
    spec three[] = {{0, 30, 2}, {0, 34, 2}, {0, 1, 1}};
    make(&w, three, 3);
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r, err, sizeof err) == FKV_OK);
    expect(&r, 0, 10.63, 20.65);
    expect(&r, 1, 10.63, 20.65);
    expect(&r, 2, 20.65, 20.65);
    CHECK(r.steps == 2 && r.max_step_tokens == 64);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* VTC: client 0 floods, client 1 sends one request later; with FCFS the
 * latecomer waits behind the flood, with VTC it goes first at the next
 * admission.  max_running 1 makes admission order visible. */
static void vtc(void)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.sched.max_running = 1;
    c.sched.n_clients = 2;
    spec s[6] = {{0, 10, 2}, {0, 10, 2}, {0, 10, 2}, {0, 10, 2}, {0, 10, 2}, {1, 10, 2}};
    fkv_workload w;
    make(&w, s, 6);
    w.reqs[5].client = 1;
    fkv_sim_result r1, r2;
    char err[256];
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r1, err, sizeof err) == FKV_OK);
    c.sched.admission = FKV_ADMIT_VTC;
    REQUIRE(fkv_sim_run(&w, NULL, &c, &r2, err, sizeof err) == FKV_OK);
    /* FCFS: last; VTC: second (right after the request running when it came) */
    CHECK(r1.e2e_ns[5] > r1.e2e_ns[4] - MS(1));
    CHECKF(r2.e2e_ns[5] < r1.e2e_ns[5] / 2, "vtc %lld fcfs %lld", (long long)r2.e2e_ns[5], (long long)r1.e2e_ns[5]);
    fkv_sim_result_free(&r1);
    fkv_sim_result_free(&r2);
    fkv_workload_free(&w);
}

/* VTC's cost weights (1 x input + 2 x output): client 0 runs A (10 prompt,
 * 30 output tokens: counter 10 + 2 x 30 = 70), then client 1 runs B (40
 * prompt, 1 output: 40 + 2 = 42); of the two one-token requests waiting
 * behind them, client 1's D goes before client 0's C.  With output
 * weighed as input (40 vs 41) C goes first.  No cache: only the order. */
static void vtc_weights(double out_weight, int d_first)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.admission = FKV_ADMIT_VTC;
    sc.n_clients = 2;
    sc.max_running = 1;
    sc.vtc_out_weight = out_weight;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req r[4];
    memset(r, 0, sizeof r);
    const uint32_t prompt[4] = {10, 40, 1, 1}, output[4] = {30, 1, 1, 1}, client[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        r[i].id = (uint64_t)i + 1;
        r[i].client = client[i];
        r[i].prompt = prompt[i];
        r[i].output = output[i];
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    }
    fkv_batch b = {0};
    int64_t t = 0;
    for (int steps = 0; steps < 1000 && fkv_sched_finished(s) < 4; steps++) {
        REQUIRE(fkv_sched_step(s, t, &b) == FKV_OK);
        t += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, t) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 4);
    CHECKF(r[0].finish_ns < r[1].first_token_ns, "A ends before B starts");
    CHECKF((r[3].finish_ns < r[2].first_token_ns) == d_first, "output weight %g: D %s C (C ends %lld, D ends %lld)",
           out_weight, d_first ? "before" : "after", (long long)r[2].finish_ns, (long long)r[3].finish_ns);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

static int64_t never(void *ctx, const fkv_chunk_view *view, const fkv_chunk_info *v)
{
    (void)ctx;
    (void)view;
    return v->owner ? 0 : INT64_MAX;
}

/* The budget: drive the scheduler directly on a small cache and check every
 * step's recomputed + new tokens, and that the cache pressure path ran. */
static void budget(const fkv_scheme *sc, uint32_t max_tokens)
{
    fkv_workload w;
    REQUIRE(fkv_workload_seed((size_t)(600 * check_scale()) + 50, 11, 2, &w) == FKV_OK);
    fkv_workload_poisson(&w, 400.0, 11); /* far over capacity: queues and preemption */
    fkv_config cc;
    fkv_config_default(&cc);
    int64_t now = 0;
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 300; /* 4800 tokens */
    cc.policy = sc->policy;
    cc.quotas = sc->quotas;
    cc.dynamic_chunking = sc->dynamic_chunking;
    cc.chunk_tokens = sc->chunk_tokens;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.next_use = never;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create_eval(&cc, &ev, &cache, NULL, 0) == FKV_OK);
    fkv_sched_config scfg;
    fkv_sched_config_default(&scfg);
    scfg.token_ids = fkv_sim_token_ids;
    scfg.max_batch_tokens = max_tokens;
    scfg.n_clients = 2;
    scfg.victim = sc->victim;
    scfg.on_preempt = sc->on_preempt;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&scfg, cache, &s) == FKV_OK);
    fkv_batch b = {0};
    size_t next = 0, over = 0, steps = 0, mismatch = 0;
    while (fkv_sched_finished(s) < w.n && steps < 2000000) {
        while (next < w.n && w.reqs[next].arrival_ns <= now) REQUIRE(fkv_sched_add(s, &w.reqs[next++]) == FKV_OK);
        if (!fkv_sched_n_running(s) && !fkv_sched_n_waiting(s)) {
            now = w.reqs[next].arrival_ns;
            continue;
        }
        fkv_status st = fkv_sched_step(s, now, &b);
        REQUIRE(st == FKV_OK);
        uint64_t sum = 0;
        for (size_t i = 0; i < b.n; i++) {
            sum += b.items[i].n_new + b.items[i].n_restored;
            /* the sequence holds what the scheduler thinks it computed */
            const fkv_req *r = b.items[i].r;
            if (r->state == FKV_REQ_RUNNING && r->seq && fkv_seq_len(r->seq) != r->computed) mismatch++;
        }
        over += sum > max_tokens || sum != b.tokens;
        now += 1000000 + (int64_t)sum * 1000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    CHECKF(over == 0, "%s: %zu steps over the budget", sc->name, over);
    CHECK(mismatch == 0);
    CHECKF(fkv_sched_finished(s) == w.n, "%s: %llu of %zu finished", sc->name,
           (unsigned long long)fkv_sched_finished(s), w.n);
    CHECK(fkv_sched_rejections(s) == 0);
    CHECKF(fkv_sched_preemptions(s) > 0, "%s: no preemption: the pressure path did not run", sc->name);
    size_t done = 0;
    for (size_t i = 0; i < w.n; i++) done += w.reqs[i].state == FKV_REQ_DONE && w.reqs[i].generated == w.reqs[i].output;
    CHECK(done == w.n);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
    fkv_workload_free(&w);
}

/* Victim rules on a cache of 7 pages of 16 tokens: A (prompt 60, 4 pages)
 * and B (prompt 40, 3 pages) fill it in step 1 and then decode in
 * lockstep.  A, served first in every step, needs its 5th page at token 64
 * (its 4th decode) while B is not yet served: both are candidates.
 * Last-started picks B (admitted second); fewest-output ties on output and
 * picks the longer prompt, A itself.  With KEEP the victim keeps its
 * sequence, with FREE it has none while it waits.  Both finish either way. */
static void victims(fkv_victim_rule rule, fkv_preempt_mode mode, int want_a)
{
    fkv_config cc;
    fkv_config_default(&cc);
    int64_t now = 0;
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 7;
    cc.policy = "lru";
    cc.quotas = 0;
    cc.chunk_tokens = 16;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create(&cc, &cache, NULL, 0) == FKV_OK);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.victim = rule;
    sc.on_preempt = mode;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    spec sp[] = {{0, 60, 40}, {0, 40, 40}};
    fkv_workload w;
    make(&w, sp, 2);
    REQUIRE(fkv_sched_add(s, &w.reqs[0]) == FKV_OK);
    REQUIRE(fkv_sched_add(s, &w.reqs[1]) == FKV_OK);
    fkv_batch b = {0};
    fkv_req *first = NULL;
    int steps = 0;
    while (fkv_sched_finished(s) < 2 && steps < 10000) {
        REQUIRE(fkv_sched_step(s, now, &b) == FKV_OK);
        if (b.preempted && !first) {
            first = w.reqs[0].state == FKV_REQ_WAITING ? &w.reqs[0] : &w.reqs[1];
            CHECK(first->state == FKV_REQ_WAITING);
            CHECK(mode == FKV_PREEMPT_KEEP ? first->seq != NULL : first->seq == NULL);
            /* the other one got its page */
            const fkv_req *other = first == &w.reqs[0] ? &w.reqs[1] : &w.reqs[0];
            CHECK(other->state == FKV_REQ_RUNNING);
        }
        now += 1000000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    REQUIRE(first != NULL);
    CHECKF(first == (want_a ? &w.reqs[0] : &w.reqs[1]), "rule %d mode %d: victim %llu", rule, mode,
           (unsigned long long)first->id);
    CHECK(fkv_sched_finished(s) == 2 && fkv_sched_rejections(s) == 0);
    CHECK(w.reqs[0].generated == 40 && w.reqs[1].generated == 40);
    CHECK(first->recomputed > 0); /* its evicted or freed tokens were computed again */
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
    fkv_workload_free(&w);
}

/* Real token ids: B repeats A's 100-token prompt and arrives after A has
 * finished, so it finds the first 96 tokens (6 full pages; the match keeps
 * the last prompt token to compute) in the prefix cache and prefills 4:
 *  A: t=0 prefill 100 (10.99) -> 10.99, decode -> 20.99 done
 *  B: t=30 prefill 4 lin(4) = 10.03 -> 40.03 token 1, decode 1 -> 50.03 done */
static void real_tokens(void)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.capacity_tokens = 100000;
    spec s[] = {{0, 100, 2}, {30, 100, 2}};
    fkv_workload w;
    make(&w, s, 2);
    int32_t tok[2][102];
    for (int i = 0; i < 102; i++) tok[0][i] = tok[1][i] = 1000 + i * 7;
    w.reqs[0].tokens = tok[0];
    w.reqs[1].tokens = tok[1];
    fkv_sim_result r;
    char err[256] = "";
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &c, &r, err, sizeof err) == FKV_OK);
    CHECKF(r.matched_tokens == 96, "matched %llu", (unsigned long long)r.matched_tokens);
    expect(&r, 0, 10.99, 20.99);
    expect(&r, 1, 10.03, 20.03);
    fkv_sim_result_free(&r);
    fkv_workload_free(&w);
}

/* A cache of `pages` pages of 4 tokens, chunks of 8, LRU, no quotas. */
static fkv_cache *small_cache(int64_t *now, uint32_t pages)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = pages;
    cc.page_tokens = 4;
    cc.chunk_tokens = 8;
    cc.policy = "lru";
    cc.quotas = 0;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = now;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create(&cc, &cache, NULL, 0) == FKV_OK);
    return cache;
}

/* A dropped chunk (sparsity) is not missing: a request that comes back
 * from a preemption with its evicted chunks and a dropped one restores the
 * evicted ones.  12 pages of 4 tokens: A (prompt 8, output 40) and B
 * (prompt 20, output 20) start together; after B's first token its chunk
 * [8, 16) is dropped, as the engine's sparsity does.  A, served first,
 * runs out of pages while both decode and preempts B (last started), whose
 * chunks are then evicted; B resumes once A is done. */
static void dropped_not_missing(void)
{
    int64_t now = 0;
    fkv_cache *cache = small_cache(&now, 12);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    spec sp[] = {{0, 8, 40}, {0, 20, 20}};
    fkv_workload w;
    make(&w, sp, 2);
    REQUIRE(fkv_sched_add(s, &w.reqs[0]) == FKV_OK);
    REQUIRE(fkv_sched_add(s, &w.reqs[1]) == FKV_OK);
    fkv_batch b = {0};
    int steps = 0, dropped = 0, ok = 1, restored_b = 0;
    while (ok && fkv_sched_finished(s) < 2 && steps < 1000) {
        fkv_status st = fkv_sched_step(s, now, &b);
        CHECKF(st == FKV_OK, "step %d: %s", steps, fkv_sched_last_error(s));
        if (st) ok = 0;
        for (size_t i = 0; ok && i < b.n; i++) restored_b += b.items[i].r == &w.reqs[1] && b.items[i].n_restored;
        now += 1000000;
        if (ok) REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        if (ok && !dropped && w.reqs[1].generated && w.reqs[1].seq) {
            uint32_t got = 0;
            REQUIRE(fkv_seq_drop(w.reqs[1].seq, 8, 16, &got) == FKV_OK && got == 8);
            dropped = 1;
        }
        steps++;
    }
    CHECK(dropped && w.reqs[1].preemptions > 0 && restored_b > 0);
    CHECK(fkv_sched_finished(s) == 2 && fkv_sched_rejections(s) == 0);
    CHECK(w.reqs[0].generated == 40 && w.reqs[1].generated == 20);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
    fkv_workload_free(&w);
}

/* A forked sample (started from a sequence the engine set, as its
 * fork_kids does: computed = target = prompt, the token at position prompt
 * given by the fork) whose sequence is freed before it ran keeps that
 * token: it prefills it again and emits the one after.  4 pages of 4
 * tokens: P (prompt 12, output 5) fills 3; after its first token the child
 * forks, and in the next step P's decode takes the last page, so the
 * child's first append finds no room and, freeing, goes back to the
 * queue. */
static void forked_freed(void)
{
    int64_t now = 0;
    fkv_cache *cache = small_cache(&now, 4);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.on_preempt = FKV_PREEMPT_FREE;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    int32_t tok[2][17];
    for (int i = 0; i < 17; i++) tok[0][i] = tok[1][i] = 100 + i;
    tok[1][12] = 7; /* the child's own first token */
    fkv_req p = {.id = 1, .prompt = 12, .output = 5, .tokens = tok[0]};
    fkv_req c = {.id = 2, .prompt = 12, .output = 4, .tokens = tok[1]};
    REQUIRE(fkv_sched_add(s, &p) == FKV_OK);
    fkv_batch b = {0};
    int steps = 0, forked = 0, freed = 0;
    uint32_t first_at = 0;
    while (fkv_sched_finished(s) < 2 && steps < 1000) {
        REQUIRE(fkv_sched_step(s, now, &b) == FKV_OK);
        for (size_t i = 0; i < b.n; i++)
            if (b.items[i].r == &c && b.items[i].n_new && c.computed >= c.target && c.generated == 0)
                first_at = c.computed; /* where its first emitted token goes */
        if (!forked && p.computed >= p.target) {
            fkv_seq_params sp;
            fkv_seq_params_default(&sp);
            sp.request_id = c.id;
            fkv_seq *child = NULL;
            REQUIRE(fkv_seq_fork(p.seq, &sp, &child) == FKV_OK);
            REQUIRE(fkv_sched_add(s, &c) == FKV_OK);
            c.seq = child;
            c.computed = c.target = 12;
            forked = 1;
        }
        freed |= forked && c.state == FKV_REQ_WAITING && !c.seq;
        now += 1000000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    CHECK(forked && freed && fkv_sched_finished(s) == 2 && p.generated == 5 && c.generated == 4);
    /* the fork's token is at 12: the child's first emission is at 13 */
    CHECKF(first_at == 13, "the child's first emitted token went to position %u", first_at);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* The step contract (sched.h): a prompt item, then decodes; the token an
 * emitting item samples is written through fkv_sched_emit; a stop makes
 * the item finish; on_finish runs once per ended request while its
 * sequence exists; fkv_sched_stop between steps ends a request at its
 * next emission; an item that does not emit takes no token. */
static int finished_calls;
static uint64_t finished_id;
static int finished_had_seq;
static void on_finish(void *ctx, fkv_req *r)
{
    (void)ctx;
    finished_calls++;
    finished_id = r->id;
    finished_had_seq = r->seq != NULL && fkv_seq_len(r->seq) == r->computed;
}

static void contract(void)
{
    int64_t now = 0;
    fkv_cache *cache = small_cache(&now, 64);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.max_batch_tokens = 8;
    sc.on_finish = on_finish;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    int32_t tok[2][30] = {{0}};
    for (int i = 0; i < 12; i++) tok[0][i] = tok[1][i] = 200 + i;
    fkv_req a = {.id = 1, .prompt = 12, .output = 10, .tokens = tok[0]};
    fkv_req c = {.id = 2, .prompt = 12, .output = 10, .tokens = tok[1]};
    c.tokens[0] = 9; /* another prompt */
    REQUIRE(fkv_sched_add(s, &a) == FKV_OK);
    REQUIRE(fkv_sched_add(s, &c) == FKV_OK);
    fkv_batch b = {0};
    int kinds[4] = {0}, steps = 0, stopped = 0, cancelled = 0;
    while (fkv_sched_finished(s) < 2 && steps++ < 100) {
        REQUIRE(fkv_sched_step(s, now, &b) == FKV_OK);
        for (size_t i = 0; i < b.n; i++) {
            const fkv_batch_item *it = &b.items[i];
            fkv_req *r = it->r;
            kinds[it->kind]++;
            CHECK(it->kind != FKV_ITEM_PROMPT || (r->generated == 0 && it->n_new >= 1));
            CHECK(it->kind != FKV_ITEM_DECODE || (r->generated > 0 && it->n_new == 1 && it->emits));
            CHECK(it->first == (it->emits && r->generated == 0));
            if (!it->emits) {
                CHECK(fkv_sched_emit(s, &b, i, 1, 0) == FKV_EINVAL);
                continue;
            }
            /* a's fourth token is a stop */
            int stop = r == &a && r->generated == 3;
            CHECK(fkv_sched_emit(s, &b, i, 500 + (int32_t)r->generated, stop) == FKV_OK);
            CHECK(r->tokens[it->ctx + it->n_new] == 500 + (int32_t)r->generated);
            if (stop) {
                CHECK(it->finishes && r->output == 4);
                stopped = 1;
            }
        }
        int calls = finished_calls;
        now += 1000000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        if (stopped == 1) {
            CHECKF(finished_calls == calls + 1 && finished_id == 1 && finished_had_seq,
                   "stop: %d on_finish calls (id %llu, seq %d)", finished_calls - calls,
                   (unsigned long long)finished_id, finished_had_seq);
            CHECK(a.state == FKV_REQ_DONE && a.generated == 4);
            stopped = 2;
        }
        if (!cancelled && c.generated == 2) {
            fkv_sched_stop(s, &c); /* a cancel: one more token */
            cancelled = 1;
        }
    }
    CHECK(fkv_sched_finished(s) == 2 && finished_calls == 2 && finished_id == 2);
    CHECKF(c.state == FKV_REQ_DONE && c.generated == 3, "cancelled after 2 tokens: %u", c.generated);
    CHECK(kinds[FKV_ITEM_PROMPT] >= 2 && kinds[FKV_ITEM_DECODE] >= 4);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* The open_seq hook completes the sequence's parameters: without
 * pass_tokens the simulator's hook opens sequences on the request's prompt
 * blocks (the cache's hash-id mode), so B, whose 16-token blocks repeat
 * A's, finds A's two full blocks (32 tokens) once A is done; B with other
 * block ids finds nothing.  A hook's failure stops the step with the
 * request and the hook's text. */
static fkv_status failing_open(void *ctx, const fkv_req *r, fkv_cache *cache, const fkv_seq_params *p, fkv_seq **out)
{
    (void)ctx;
    (void)r;
    (void)cache;
    (void)p;
    (void)out;
    return fkv__fail(FKV_EINVAL, "no source here");
}

static void open_hook(int same, int fail)
{
    int64_t now = 0;
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 64;
    cc.page_tokens = 4;
    cc.chunk_tokens = 8;
    cc.prefix_cache = 1;
    cc.policy = "lru";
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.block_tokens = 16;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create_eval(&cc, &ev, &cache, NULL, 0) == FKV_OK);
    static const uint64_t ids[3] = {11, 12, 13}, other[2] = {21, 22};
    fkv_req_src src[2] = {{ids, 3, 5, 0}, {same ? ids : other, 2, 6, 0}};
    fkv_sim_tokens ts = {src, 2, 16, 1};
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.pass_tokens = 0;
    sc.token_ids = fkv_sim_token_ids;
    sc.token_ctx = &ts;
    sc.open_seq = fail ? failing_open : fkv_sim_open_seq;
    sc.open_ctx = &ts;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req r[2] = {{.id = 1, .prompt = 48, .output = 2, .tag = 0}, {.id = 2, .prompt = 40, .output = 2, .tag = 1}};
    fkv_batch b = {0};
    for (int i = 0; i < 2; i++) {
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
        for (int k = 0; k < 20 && r[i].state != FKV_REQ_DONE; k++) {
            fkv_status st = fkv_sched_step(s, now, &b);
            if (fail) {
                CHECK(st == FKV_EINVAL && strstr(fkv_sched_last_error(s), "request 1") &&
                      strstr(fkv_sched_last_error(s), "no source here"));
                fkv_batch_free(&b);
                fkv_sched_destroy(s);
                fkv_cache_destroy(cache);
                return;
            }
            CHECKF(st == FKV_OK, "step: %s", fkv_sched_last_error(s));
            REQUIRE(st == FKV_OK);
            now += MS(1);
            REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        }
        REQUIRE(r[i].state == FKV_REQ_DONE);
    }
    CHECKF(r[1].matched == (same ? 32u : 0u), "same blocks %d: B matched %llu", same,
           (unsigned long long)r[1].matched);
    CHECK(r[0].matched == 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* A simulated workload whose request names no token source is refused
 * with the request's id, before anything runs: with a cache, and without
 * one (no sequence is opened then, so only the check up front sees it). */
static void bad_tag(void)
{
    spec sp[] = {{0, 8, 2}, {0, 8, 2}};
    fkv_workload w;
    make(&w, sp, 2);
    fkv_req_src src[1] = {{NULL, 0, 1, 0}};
    w.src = src;
    w.n_src = 1;
    w.reqs[0].tag = 0;
    w.reqs[1].tag = 1;
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    fkv_sim_result res;
    for (int cap = 0; cap < 2; cap++) {
        c.capacity_tokens = cap ? 100000 : 0;
        char err[256] = "";
        CHECK(fkv_sim_run(&w, cap ? fkv_scheme_find("lru") : NULL, &c, &res, err, sizeof err) == FKV_EINVAL);
        CHECKF(strstr(err, "request 2") && strstr(err, "tag 1"), "capacity %d: error: %s", cap, err);
    }
    w.src = NULL; /* the test's */
    fkv_workload_free(&w);
}

int main(void)
{
    contract();
    dropped_not_missing();
    forked_freed();
    real_tokens();
    victims(FKV_VICTIM_LAST_STARTED, FKV_PREEMPT_KEEP, 0);
    victims(FKV_VICTIM_LAST_STARTED, FKV_PREEMPT_FREE, 0);
    victims(FKV_VICTIM_FEWEST_OUTPUT, FKV_PREEMPT_KEEP, 1);
    victims(FKV_VICTIM_FEWEST_OUTPUT, FKV_PREEMPT_FREE, 1);
    scenario1(NULL, 0);
    scenario1(fkv_scheme_find("lru"), 100000); /* ample cache: same times */
    scenario1(fkv_scheme_find("flru-dyn"), 100000);
    scenario2();
    scenario3();
    scenario4(NULL, 0);
    scenario4(fkv_scheme_find("lru"), 100000); /* ample cache: same times */
    nonchunked_small();
    vtc();
    vtc_weights(2.0, 1);
    vtc_weights(1.0, 0);
    open_hook(1, 0);
    open_hook(0, 0);
    open_hook(1, 1);
    bad_tag();
    size_t n;
    const fkv_scheme *all = fkv_scheme_list(&n);
    for (size_t i = 0; i < n; i++)
        if (fkv_scheme_available(&all[i])) {
            budget(&all[i], 256);
            if (!strcmp(all[i].name, "lru")) budget(&all[i], 97);
        }
    return check_done();
}
