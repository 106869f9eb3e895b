/* The fairness metrics (src/sim/fairness.h) against values worked out by
 * hand on tiny cases. */
#include <math.h>

#include <string.h>

#include "check.h"
#include "sim/fairness.h"
#include "sim/report.h"
#include "sim/sim.h"
#include "sim/workload.h"

static void jain(void)
{
    double eq[3] = {2, 2, 2}, one[4] = {1, 0, 0, 0}, two[2] = {1, 3}, zero[2] = {0, 0};
    CHECK(fabs(fkv_jain_index(eq, 3) - 1.0) < 1e-12);
    CHECK(fabs(fkv_jain_index(one, 4) - 0.25) < 1e-12);      /* one of n served: 1/n */
    CHECK(fabs(fkv_jain_index(two, 2) - 16.0 / 20.0) < 1e-12); /* (1+3)^2 / (2 * (1+9)) */
    CHECK(fkv_jain_index(zero, 2) == 1.0 && fkv_jain_index(NULL, 0) == 1.0);
    double three[3] = {1, 2, 4};
    CHECK(fabs(fkv_jain_index(three, 3) - 49.0 / 63.0) < 1e-12); /* 7^2 / (3 * 21) */
}

static void max_min(void)
{
    double a[3] = {1.5, 3, 6}, z[2] = {0, 2}, zz[2] = {0, 0};
    CHECK(fabs(fkv_max_min_ratio(a, 3) - 4.0) < 1e-12);
    CHECK(isinf(fkv_max_min_ratio(z, 2)) && fkv_max_min_ratio(zz, 2) == 1.0 && fkv_max_min_ratio(NULL, 0) == 1.0);
}

/* Two tenants backlogged: A gets 10 a step, B 4; after 3 steps the gap is
 * 18.  B leaves, A gets 100 alone (no gap: one backlogged tenant); B comes
 * back at A's counter (the lift), then they get 5 each: the gap stays 18,
 * the largest seen.  A tenant not backlogged is not counted. */
static void service_diff(void)
{
    fkv_service_diff d;
    REQUIRE(fkv_service_diff_init(&d, 3) == 0);
    fkv_service_diff_backlog(&d, 0, 1);
    fkv_service_diff_backlog(&d, 1, 1);
    for (int s = 0; s < 3; s++) {
        fkv_service_diff_serve(&d, 0, 10);
        fkv_service_diff_serve(&d, 1, 4);
        fkv_service_diff_serve(&d, 2, 1000); /* never backlogged: ignored */
        fkv_service_diff_observe(&d);
    }
    CHECKF(fabs(d.max_diff - 18) < 1e-12, "gap %g", d.max_diff);
    fkv_service_diff_backlog(&d, 1, 0);
    fkv_service_diff_serve(&d, 0, 100);
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 18) < 1e-12);
    fkv_service_diff_backlog(&d, 1, 1);
    CHECK(fabs(d.served[1] - 130) < 1e-12); /* lifted to A's counter */
    fkv_service_diff_serve(&d, 0, 5);
    fkv_service_diff_serve(&d, 1, 5);
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 18) < 1e-12);
    fkv_service_diff_serve(&d, 1, 30); /* now B is 30 ahead */
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 30) < 1e-12);
    fkv_service_diff_free(&d);
}

/* Slowdown through the simulator: one request on an idle system (any
 * arrival time, a cache with room) has slowdown exactly 1; two requests
 * arriving together share steps, so the one finishing later is slowed
 * down, and its tenant's mean slowdown is above 1. */
static void slowdown(void)
{
    fkv_profile prof;
    char err[200];
    REQUIRE(fkv_profile_get("a100-llama2-7b", NULL, &prof, err, sizeof err) == FKV_OK);
    fkv_sim_config cfg;
    fkv_sim_config_default(&cfg);
    cfg.profile = &prof;
    cfg.capacity_tokens = 1 << 20;
    cfg.n_tenants = 2;
    fkv_req rq[2];
    memset(rq, 0, sizeof rq);
    for (int i = 0; i < 2; i++) {
        rq[i].id = 1 + (uint64_t)i;
        rq[i].tenant = 1 + (uint64_t)i;
        rq[i].prompt = 300 + 200 * (uint32_t)i;
        rq[i].output = 40;
        rq[i].tag = 7 + (uint64_t)i;
        rq[i].arrival_ns = 5000000; /* 5 ms: an idle system whenever it comes */
    }
    fkv_workload w;
    memset(&w, 0, sizeof w);
    w.reqs = rq;
    w.n = 1;
    int64_t idle[2];
    REQUIRE(fkv_sim_idle_latency(&w, &cfg, idle, err, sizeof err) == FKV_OK);
    const fkv_scheme *lru = fkv_scheme_find("lru");
    REQUIRE(lru);
    fkv_sim_result r;
    REQUIRE(fkv_sim_run(&w, lru, &cfg, &r, err, sizeof err) == FKV_OK);
    fkv_scheme_summary s;
    fkv_summarize(&r, &s);
    fkv_summary_slowdown(&s, &r, idle);
    CHECKF(idle[0] > 0 && s.slowdown_mean == 1.0 && s.tenants[1].slowdown_mean == 1.0, "idle %lld, slowdown %.17g",
           (long long)idle[0], s.slowdown_mean);
    fkv_sim_result_free(&r);
    w.n = 2;
    REQUIRE(fkv_sim_idle_latency(&w, &cfg, idle, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_sim_run(&w, lru, &cfg, &r, err, sizeof err) == FKV_OK);
    fkv_summarize(&r, &s);
    fkv_summary_slowdown(&s, &r, idle);
    CHECKF(s.slowdown_mean > 1.0 && (s.tenants[1].slowdown_mean > 1.0 || s.tenants[2].slowdown_mean > 1.0),
           "together: slowdown %g (%g, %g)", s.slowdown_mean, s.tenants[1].slowdown_mean, s.tenants[2].slowdown_mean);
    double m[2] = {s.tenants[1].slowdown_mean, s.tenants[2].slowdown_mean};
    CHECK(fabs(s.jain_slowdown - fkv_jain_index(m, 2)) < 1e-12);
    fkv_sim_result_free(&r);
    fkv_profile_free(&prof);
}

/* oracle-memory on chat (prefix reuse) at a capacity where lru evicts:
 * no eviction, preemption or recompute, at least lru's prefix hit rate,
 * and no request slower on average. */
static void oracle_memory(void)
{
    fkv_profile prof;
    char err[200];
    REQUIRE(fkv_profile_get("a100-llama2-7b", NULL, &prof, err, sizeof err) == FKV_OK);
    fkv_chat_params cp;
    fkv_chat_params_default(&cp);
    cp.session_rate = 2.0;
    fkv_workload w;
    REQUIRE(fkv_workload_chat(600, 11, 4, &cp, &w) == FKV_OK);
    fkv_sim_config cfg;
    fkv_sim_config_default(&cfg);
    cfg.profile = &prof;
    cfg.capacity_tokens = 8192; /* small: lru must evict */
    cfg.sched.n_clients = 4;
    fkv_sim_result ro, rl;
    fkv_status so_st = fkv_sim_run(&w, fkv_scheme_find("oracle-memory"), &cfg, &ro, err, sizeof err);
    CHECKF(so_st == FKV_OK, "oracle run: %s", err);
    REQUIRE(so_st == FKV_OK);
    REQUIRE(fkv_sim_run(&w, fkv_scheme_find("lru"), &cfg, &rl, err, sizeof err) == FKV_OK);
    fkv_scheme_summary so, sl;
    fkv_summarize(&ro, &so);
    fkv_summarize(&rl, &sl);
    CHECKF(ro.preemptions == 0 && ro.recomputed_tokens == 0 && ro.evicted_pages == 0,
           "oracle: %llu preemptions, %llu recomputed, %llu evicted pages", (unsigned long long)ro.preemptions,
           (unsigned long long)ro.recomputed_tokens, (unsigned long long)ro.evicted_pages);
    CHECKF(rl.evicted_pages > 0, "lru at 8192 tokens evicted nothing: the case proves nothing");
    CHECKF(so.prefix_hit_rate >= sl.prefix_hit_rate && so.prefix_hit_rate > 0, "prefix hit rate oracle %g, lru %g",
           so.prefix_hit_rate, sl.prefix_hit_rate);
    CHECKF(so.e2e.mean_ms <= sl.e2e.mean_ms, "oracle mean %g ms > lru %g ms", so.e2e.mean_ms, sl.e2e.mean_ms);
    fkv_sim_result_free(&ro);
    fkv_sim_result_free(&rl);
    fkv_workload_free(&w);
    fkv_profile_free(&prof);
}

int main(void)
{
    jain();
    max_min();
    service_diff();
    slowdown();
    oracle_memory();
    return check_done();
}
