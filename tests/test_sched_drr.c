/* The step share by weighted deficit round robin (sched.h, step_share
 * FKV_STEP_DRR): allotments and deficits worked out by hand from the rule,
 * a tenant alone taking the whole budget, decodes first and uncharged,
 * prefix hits not charged and their budget passed on, and the same
 * requests finishing with the share as without it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sched/sched.h"
#include "sched_step.h"
#include "sim/workload.h"

#define MS(x) ((int64_t)((x) * 1e6 + 0.5))

/* A phantom LRU cache of `pages` 16-token pages, prefix cache as asked. */
static fkv_cache *cache_of(int64_t *now, int prefix, uint32_t pages)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = pages;
    cc.page_tokens = 16;
    cc.chunk_tokens = 16;
    cc.policy = "lru";
    cc.prefix_cache = prefix;
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

/* Adds q[0..n) at their arrivals and runs steps (1 ms + 20 us a token)
 * until all have finished; the largest step's tokens. */
static uint32_t drive(fkv_sched *s, fkv_req *q, size_t n, int64_t *now)
{
    fkv_batch b = {0};
    size_t next = 0, steps = 0;
    uint32_t most = 0;
    while (fkv_sched_finished(s) < n && steps < 200000) {
        while (next < n && q[next].arrival_ns <= *now) REQUIRE(fkv_sched_add(s, &q[next++]) == FKV_OK);
        if (!fkv_sched_n_running(s) && !fkv_sched_n_waiting(s)) {
            *now = q[next].arrival_ns;
            continue;
        }
        STEP(s, *now, &b);
        if (b.tokens > most) most = b.tokens;
        *now += MS(1) + (int64_t)b.tokens * 20000;
        REQUIRE(fkv_sched_finish(s, &b, *now) == FKV_OK);
        steps++;
    }
    fkv_batch_free(&b);
    return most;
}

static void drr_config(fkv_sched_config *sc, uint32_t budget)
{
    fkv_sched_config_default(sc);
    sc->token_ids = fkv_sim_token_ids;
    sc->max_batch_tokens = budget;
    sc->step_share = FKV_STEP_DRR;
}

/* new prompt tokens of each tenant (< 8) in the batch just formed: items
 * of requests that have not emitted yet (an item's prefill flag is also
 * set on decodes) */
static void prefill_by_tenant(const fkv_batch *b, uint32_t pf[8])
{
    memset(pf, 0, 8 * sizeof *pf);
    for (size_t i = 0; i < b->n; i++)
        if (!b->items[i].r->generated && b->items[i].r->tenant < 8) pf[b->items[i].r->tenant] += b->items[i].n_new;
}

static void expect_drr(fkv_sched *s, uint64_t tenant, double deficit, uint32_t alloc)
{
    double d = -1;
    uint32_t a = 0;
    REQUIRE(fkv_sched_drr_info(s, tenant, &d, &a) == FKV_OK);
    CHECKF(d == deficit && a == alloc, "tenant %llu: deficit %g allotted %u, want %g and %u",
           (unsigned long long)tenant, d, a, deficit, alloc);
}

/* Three tenants, weights 1, 1 and 2, a budget of 10, long prompts each.
 * Step 1 (rounds from tenant 1): q = 10 / 4 = 2.5; tenant 1: 2.5 -> 2
 * (0.5 left), tenant 2: 2 (0.5), tenant 3: 5 (0); 1 token left.  Round
 * 2: q = 0.25; 0.75, 0.75, 0.5: nobody reaches a token.  Round 3: tenant
 * 1 reaches 1.0 and takes the last token.  Allotted 3, 2, 5; deficits 0,
 * 0.75, 0.5.  Step 2 starts at tenant 2: q = 2.5; tenant 2: 3.25 -> 3
 * (0.25), tenant 3: 5.5 -> 5 (0.5), tenant 1: 2.5 -> 2 (0.5).  All exact
 * in binary, so compared with ==. */
static void hand_deficits(void)
{
    int64_t now = 0;
    fkv_cache *c = cache_of(&now, 0, 4096);
    REQUIRE(fkv_cache_set_tenant_weight(c, 3, 2) == FKV_OK);
    fkv_sched_config sc;
    drr_config(&sc, 10);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
    fkv_req r[3] = {sched_req(1, 1, 500, 2), sched_req(2, 2, 500, 2), sched_req(3, 3, 500, 2)};
    for (int i = 0; i < 3; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    fkv_batch b = {0};
    uint32_t pf[8];
    STEP(s, now, &b);
    prefill_by_tenant(&b, pf);
    CHECKF(pf[1] == 3 && pf[2] == 2 && pf[3] == 5, "step 1: %u %u %u", pf[1], pf[2], pf[3]);
    expect_drr(s, 1, 0, 3);
    expect_drr(s, 2, 0.75, 2);
    expect_drr(s, 3, 0.5, 5);
    now += MS(1);
    REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    STEP(s, now, &b);
    prefill_by_tenant(&b, pf);
    CHECKF(pf[1] == 2 && pf[2] == 3 && pf[3] == 5, "step 2: %u %u %u", pf[1], pf[2], pf[3]);
    expect_drr(s, 1, 0.5, 2);
    expect_drr(s, 2, 0.25, 3);
    expect_drr(s, 3, 0.5, 5);
    now += MS(1);
    REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    /* over many steps the weights hold: tenant 3 prefills twice as much */
    uint64_t sum[4] = {0, 0, 0, 0};
    for (int k = 0; k < 40; k++) {
        STEP(s, now, &b);
        prefill_by_tenant(&b, pf);
        for (int t = 1; t <= 3; t++) sum[t] += pf[t];
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECKF(sum[1] + sum[2] + sum[3] == 400 && sum[1] >= 99 && sum[1] <= 101 && sum[2] >= 99 && sum[2] <= 101,
           "40 steps: %llu %llu %llu", (unsigned long long)sum[1], (unsigned long long)sum[2],
           (unsigned long long)sum[3]);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(c);
}

/* A tenant alone takes the whole budget every step (work conservation),
 * two requests of it in arrival order: 1000 + 300 tokens at 128 a step. */
static void alone(void)
{
    fkv_sched_config sc;
    drr_config(&sc, 128);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req r[2] = {sched_req(1, 7, 1000, 1), sched_req(2, 7, 300, 1)};
    for (int i = 0; i < 2; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    fkv_batch b = {0};
    int64_t now = 0;
    uint32_t left = 1300, steps = 0, full = 1;
    while (fkv_sched_finished(s) < 2 && steps < 100) {
        STEP(s, now, &b);
        uint32_t pf[8];
        prefill_by_tenant(&b, pf);
        uint32_t want = left < 128 ? left : 128;
        full &= pf[7] == want;
        left -= pf[7];
        /* the first request's prefill comes first */
        if (r[0].computed < r[0].prompt) full &= r[1].computed == 0;
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    CHECKF(full && left == 0 && fkv_sched_finished(s) == 2, "alone: %u tokens left after %u steps", left, steps);
    double d;
    uint32_t a;
    REQUIRE(fkv_sched_drr_info(s, 7, &d, &a) == FKV_OK);
    CHECK(d == 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* Decodes come first and are not charged: tenant 1 has a request that
 * decodes (its 64-token prompt done) and a long prompt; tenant 2 a long
 * prompt.  With a budget of 65, the decode takes 1 and the two tenants
 * share 64 equally, although tenant 1 also decodes. */
static void decodes_first(void)
{
    fkv_sched_config sc;
    drr_config(&sc, 65);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req d = sched_req(1, 1, 64, 50);
    REQUIRE(fkv_sched_add(s, &d) == FKV_OK);
    fkv_batch b = {0};
    int64_t now = 0;
    STEP(s, now, &b); /* d's prompt, 64 tokens */
    now += MS(1);
    REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    REQUIRE(d.generated == 1);
    fkv_req r[2] = {sched_req(2, 1, 1000, 1), sched_req(3, 2, 1000, 1)};
    for (int i = 0; i < 2; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    int ok = 1;
    for (int k = 0; k < 5; k++) {
        STEP(s, now, &b);
        uint32_t pf[8];
        prefill_by_tenant(&b, pf);
        ok &= b.n == 3 && b.items[0].r == &d && b.items[0].n_new == 1;
        ok &= pf[1] == 32 && pf[2] == 32;
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECK(ok);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* Prefix hits are not computed, so not charged, and the budget they leave
 * goes on: tenant 1's X repeats an earlier prompt of 170 tokens (so most
 * of it is found in the cache), tenant 2's Y has 400 new ones; budget 64,
 * weights equal.  Both are allotted 32; X computes only 170 - matched, and
 * Y takes the rest of the budget in the leftover pass, which leaves Y's
 * tenant in debt by what it took beyond its 32. */
static void prefix_hits(void)
{
    int64_t now = 0;
    fkv_cache *c = cache_of(&now, 1, 4096);
    fkv_sched_config sc;
    drr_config(&sc, 64);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
    fkv_req z = sched_req(1, 1, 170, 1);
    REQUIRE(fkv_sched_add(s, &z) == FKV_OK);
    fkv_batch b = {0};
    for (int k = 0; k < 10 && fkv_sched_finished(s) < 1; k++) {
        STEP(s, now, &b);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    REQUIRE(fkv_sched_finished(s) == 1);
    fkv_req x = sched_req(2, 1, 170, 1), y = sched_req(3, 2, 400, 1);
    x.tag = z.tag; /* the same prompt */
    REQUIRE(fkv_sched_add(s, &x) == FKV_OK);
    REQUIRE(fkv_sched_add(s, &y) == FKV_OK);
    STEP(s, now, &b);
    uint32_t pf[8];
    prefill_by_tenant(&b, pf);
    uint32_t xs = 170 - (uint32_t)x.matched;
    CHECKF(x.matched >= 128 && pf[1] == xs && pf[2] == 64 - xs, "matched %llu: prefills %u and %u",
           (unsigned long long)x.matched, pf[1], pf[2]);
    expect_drr(s, 1, 0, 32);
    expect_drr(s, 2, -(double)(32 - xs), 32);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(c);
}

/* With the share as without it, a mixed run finishes every request with
 * its output, within the budget every step; light requests' first tokens
 * come sooner with the share. */
static void finishes(void)
{
    double light_ttft[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        int64_t now = 0;
        fkv_cache *c = cache_of(&now, 1, 4096);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 256;
        sc.step_share = on ? FKV_STEP_DRR : FKV_STEP_SHARE_OFF;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        enum { N = 60 };
        fkv_req q[N];
        for (int i = 0; i < N; i++) {
            int light = i % 3 == 2;
            q[i] = light ? sched_req(i + 1, 2 + i % 2, 20, 4) : sched_req(i + 1, 1, 1500, 8);
            q[i].arrival_ns = (int64_t)i * MS(5);
        }
        int within = drive(s, q, N, &now) <= 256;
        CHECK(within && fkv_sched_finished(s) == N && fkv_sched_rejections(s) == 0);
        double sum = 0;
        int nl = 0;
        for (int i = 0; i < N; i++) {
            CHECKF(q[i].state == FKV_REQ_DONE && q[i].generated == q[i].output, "request %d", i + 1);
            if (i % 3 == 2) sum += (double)(q[i].first_token_ns - q[i].arrival_ns), nl++;
        }
        light_ttft[on] = sum / nl;
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    CHECKF(light_ttft[1] < 0.5 * light_ttft[0], "light mean TTFT %.1f ms with the share, %.1f ms without",
           light_ttft[1] / 1e6, light_ttft[0] / 1e6);
}

/* The share's admission test (sched.h): with four alike tenants and
 * memory for about two prompts at once, the share preempts no more than
 * the plain order does (admitting every tenant's prompt at once, they
 * would push each other out, over and over). */
static void no_admission_victims(void)
{
    uint64_t pre[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        int64_t now = 0;
        fkv_cache *c = cache_of(&now, 0, 96);
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 128;
        sc.step_share = on ? FKV_STEP_DRR : FKV_STEP_SHARE_OFF;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, c, &s) == FKV_OK);
        enum { N = 32 };
        fkv_req q[N];
        for (int i = 0; i < N; i++) {
            q[i] = sched_req(i + 1, 1 + i % 4, 500 + 37 * (i % 5), 20);
            q[i].arrival_ns = (int64_t)i * MS(2);
        }
        drive(s, q, N, &now);
        CHECK(fkv_sched_finished(s) == N);
        pre[on] = fkv_sched_preemptions(s);
        fkv_sched_destroy(s);
        fkv_cache_destroy(c);
    }
    printf("no_admission_victims: %llu preemptions in the plain order, %llu with the share\n",
           (unsigned long long)pre[0], (unsigned long long)pre[1]);
    CHECKF(pre[1] <= pre[0], "the share preempted %llu times, the plain order %llu", (unsigned long long)pre[1],
           (unsigned long long)pre[0]);
}

static void names(void)
{
    CHECK(fkv_step_share_parse("drr") == FKV_STEP_DRR && fkv_step_share_parse("off") == FKV_STEP_SHARE_OFF);
    CHECK(fkv_step_share_parse("fair") == -1 && !strcmp(fkv_step_share_name(FKV_STEP_DRR), "drr"));
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.step_share = (fkv_step_share)7;
    fkv_sched *s;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
    double d;
    uint32_t a;
    sc.step_share = FKV_STEP_DRR;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    CHECK(fkv_sched_drr_info(s, 1, &d, &a) == FKV_ENOENT);
    fkv_sched_destroy(s);
}

int main(void)
{
    names();
    hand_deficits();
    alone();
    decodes_first();
    prefix_hits();
    finishes();
    no_admission_victims();
    return check_done();
}
