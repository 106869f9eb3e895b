/* Tenants in the scheduler (sched.h): the fair victim rule with weights,
 * fair reclaim in its configured order before preemption, the starvation
 * bound of the fair rule against an adversarial heavy tenant, the tenant
 * step share, VTC's memory term, and the publishing of shared prefixes.
 *
 * Expected victims are computed here from the rule and what the cache
 * reports (fkv_cache_tenant_info) just before the step, not written down:
 * the shares are the cache's business (docs/ARCHITECTURE.md, "Tenants"). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sched/sched.h"
#include "sched_step.h"
#include "sim/workload.h"

#define MS(x) ((int64_t)((x) * 1e6 + 0.5))

/* A phantom cache in tenant mode: LRU (no quotas of its own to decide
 * victims), prefix cache off, no cold-chunk quantization but by reclaim. */
static fkv_cache *tenant_cache_host(int64_t *now, uint32_t pages, uint32_t chunk_tokens, uint32_t hot,
                                    uint64_t host_bytes)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = pages;
    cc.page_tokens = 16;
    cc.chunk_tokens = chunk_tokens;
    cc.policy = "lru";
    cc.quotas = FKV_QUOTA_TENANT;
    cc.prefix_cache = 0;
    cc.quant_hot_tokens = hot;
    cc.host_capacity_bytes = host_bytes;
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

static fkv_cache *tenant_cache(int64_t *now, uint32_t pages, uint32_t chunk_tokens, uint32_t hot)
{
    return tenant_cache_host(now, pages, chunk_tokens, hot, 0);
}

static double over_of(fkv_cache *c, uint64_t tenant)
{
    fkv_tenant_info ti;
    if (fkv_cache_tenant_info(c, tenant, &ti) != FKV_OK) return 0;
    return (double)ti.pages - ti.share_pages;
}

static fkv_req req(uint64_t id, uint64_t tenant, uint32_t prompt, uint32_t output)
{
    fkv_req r;
    memset(&r, 0, sizeof r);
    r.id = id;
    r.tenant = tenant;
    r.prompt = prompt;
    r.output = output;
    r.tag = 1000 + id;
    return r;
}

/* The reclaim cases' scene (reclaim_order, offload_reload,
 * reclaim_ladder): at most 2 running, 128-token steps, the fair victim,
 * tenant step share 0.5 (so R prefills 64 tokens a step while W waits),
 * reclaim by `list`. */
static void rvw_config(fkv_sched_config *sc, const char *list)
{
    fkv_sched_config_default(sc);
    sc->token_ids = fkv_sim_token_ids;
    sc->victim = FKV_VICTIM_FAIR;
    sc->max_running = 2;
    sc->max_batch_tokens = 128;
    sc->tenant_step_share = 0.5;
    REQUIRE(fkv_sched_parse_reclaim(list, sc->reclaim, &sc->n_reclaim, NULL, 0) == 0);
}

/* R (tenant 1, prompt 320), V (tenant 2, from a sequence of 257 tokens,
 * expected_tokens v_expected, 0 = unknown) and W (tenant 3, prompt 10),
 * added in that order. */
static fkv_sched *rvw_start(fkv_cache *cache, const fkv_sched_config *sc, fkv_req *r, fkv_req *v, fkv_req *w,
                            uint32_t v_expected)
{
    fkv_sched *s;
    REQUIRE(fkv_sched_create(sc, cache, &s) == FKV_OK);
    *r = req(1, 1, 320, 1);
    *v = req(2, 2, 257, 12);
    *w = req(3, 3, 10, 1);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = v->id;
    p.tenant = v->tenant;
    p.expected_tokens = v_expected;
    fkv_seq *vs;
    REQUIRE(fkv_seq_create(cache, &p, &vs) == FKV_OK);
    REQUIRE(fkv_seq_append(vs, NULL, 257, NULL) == FKV_OK);
    REQUIRE(fkv_sched_add(s, r) == FKV_OK);
    REQUIRE(fkv_sched_add_seq(s, v, vs) == FKV_OK);
    REQUIRE(fkv_sched_add(s, w) == FKV_OK);
    return s;
}

/* Fair victim with weights.  10 pages of 16 tokens, 1-page chunks; A and C
 * (tenant 1, prompts 47) and B (tenant 2, prompt 63) fill the cache in step
 * 1, admitted in that order, and decode in lockstep; A, served first, needs
 * a 4th page at its second decode while all three are candidates.  The
 * victim must be the newest request of the tenant most over its share as
 * the cache reports it then.  With equal weights tenant 1 (6 pages against
 * 4) is over: C goes, where last-started would take B; with tenant 1
 * weighted 3 to 1 its share covers it and B goes.  The weights must change
 * the victim. */
static uint64_t fair_weights(double w1, double w2)
{
    int64_t now = 0;
    fkv_cache *cache = tenant_cache(&now, 10, 16, 1024);
    REQUIRE(fkv_cache_set_tenant_weight(cache, 1, w1) == FKV_OK);
    REQUIRE(fkv_cache_set_tenant_weight(cache, 2, w2) == FKV_OK);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.victim = FKV_VICTIM_FAIR;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req r[3] = {req(1, 1, 47, 40), req(2, 1, 47, 40), req(3, 2, 63, 40)}; /* A, C, B */
    for (int i = 0; i < 3; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    fkv_batch b = {0};
    uint64_t victim = 0;
    for (int steps = 0; steps < 10000 && fkv_sched_finished(s) < 3; steps++) {
        /* the rule's choice if this step preempts: candidates are every
         * running request (A, served first, needs the page) */
        double best = 0;
        const fkv_req *want = NULL;
        for (int i = 0; i < 3; i++) {
            if (r[i].state != FKV_REQ_RUNNING) continue;
            double o = over_of(cache, r[i].tenant);
            if (!want || o > best || (o == best && r[i].admit_order > want->admit_order)) {
                want = &r[i];
                best = o;
            }
        }
        STEP(s, now, &b);
        if (b.preempted && !victim) {
            for (int i = 0; i < 3; i++)
                if (r[i].preemptions) victim = r[i].id;
            CHECKF(want && victim == want->id, "weights %g:%g: victim %llu, the rule says %llu", w1, w2,
                   (unsigned long long)victim, want ? (unsigned long long)want->id : 0ULL);
            CHECK(b.preempted == 1 && r[victim - 1].fair_picks == 1);
        }
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 3 && fkv_sched_rejections(s) == 0);
    for (int i = 0; i < 3; i++) CHECK(r[i].generated == r[i].output);
    REQUIRE(victim != 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
    return victim;
}

static void fair_victim_weights(void)
{
    uint64_t even = fair_weights(1, 1), heavy1 = fair_weights(3, 1);
    CHECKF(even != heavy1, "weights 1:1 and 3:1 chose the same victim %llu", (unsigned long long)even);
    CHECKF(even != 3, "equal weights: the fair rule chose what last-started chooses (B)");
}

/* Resident chunks of s that end at least `hot` tokens before its end (the
 * cold ones fkv_seq_reclaim may act on) and are still of dtype t. */
static int cold_of_dtype(fkv_seq *s, uint32_t hot, fkv_dtype t)
{
    const fkv_chunk_view *const *ch;
    size_t n;
    int k = 0;
    if (!s || fkv_seq_chunks(s, &ch, &n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (ch[i]->resident && ch[i]->start + ch[i]->n_tokens + hot <= fkv_seq_len(s) && ch[i]->dtype == t) k++;
    return k;
}

/* Reclaim order: a quantization (int8 or int4: both act on chunks still
 * at base precision), then evict, then preemption, each only when the ones
 * before it have nothing left.  21 pages of 16
 * tokens, 64-token chunks, the last 64 tokens hot.  V (tenant 2) starts
 * from a sequence of 257 tokens (17 pages: three cold 4-page chunks) and
 * decodes one token a step within its last page; R (tenant 1, older, prompt 320:
 * the whole cache) prefills 64 tokens (4 pages) a step: W (tenant 3) waits with its
 * prefill (max_running 2), so R's share of a step's 128 tokens is 64.
 * Step 1 fills the cache; from step 2 on each of R's chunks needs 4 pages
 * that only V's cold chunks can give.  Without reclaim V is preempted at
 * step 2.  With int8 each chunk gives 2 of its 4 pages (two chunks make
 * step 2's chunk; in step 3 the third gives 2 and an eviction the rest);
 * with int4, 3 (step 2 takes two, step 3 the third, step 4 evicts). */
static void reclaim_order(const char *list, fkv_reclaim_action quant)
{
    int64_t now = 0;
    const uint32_t hot = 64;
    fkv_cache *cache = tenant_cache(&now, 21, 64, hot);
    /* V's tenant at weight 1/4: its share (4 pages) stays below what it
     * holds until it is preempted, while R's (16) stays above R's pages
     * until R's last chunk, so V is the victim by the fair rule throughout
     * (at equal weights R would cross its share at step 3 and then have
     * to give way itself) */
    REQUIRE(fkv_cache_set_tenant_weight(cache, 2, 0.25) == FKV_OK);
    fkv_sched_config sc;
    rvw_config(&sc, list);
    fkv_req r, v, w;
    fkv_sched *s = rvw_start(cache, &sc, &r, &v, &w, 257 + 12);
    fkv_batch b = {0};
    enum { Q, EV, PRE, N };
    int first[N] = {0, 0, 0};
    uint64_t prev[FKV_N_RECLAIM_SLOTS] = {0};
    int step = 0, r_steady = 1;
    while (step < 40 && !first[PRE]) {
        step++;
        uint32_t before = r.computed;
        STEP(s, now, &b);
        fkv_tenant_info ti;
        REQUIRE(fkv_cache_tenant_info(cache, 2, &ti) == FKV_OK);
        uint64_t d[FKV_N_RECLAIM_SLOTS];
        for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++) d[k] = ti.reclaimed_pages[k] - prev[k];
        memcpy(prev, ti.reclaimed_pages, sizeof prev);
        const int slot[N] = {(int)quant, FKV_RECLAIM_EVICT, FKV_RECLAIM_PREEMPT};
        for (int k = 0; k < N; k++)
            if (d[slot[k]] && !first[k]) first[k] = step;
        if (v.preemptions && !first[PRE]) first[PRE] = step;
        /* evict only once quantization had nothing left */
        if (d[FKV_RECLAIM_EVICT] && v.seq)
            CHECKF(cold_of_dtype(v.seq, hot, FKV_F16) == 0, "%s: step %d: evict while quantization had chunks", list,
                   step);
        CHECKF(d[quant == FKV_RECLAIM_QUANTIZE8 ? FKV_RECLAIM_QUANTIZE4 : FKV_RECLAIM_QUANTIZE8] == 0,
               "%s: an action not in the list ran", list);
        /* until V goes, reclaim gave R exactly its chunk every step */
        if (!v.preemptions && step > 1 && r.computed != before + 64) r_steady = 0;
        CHECK(r.preemptions == 0);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECKF(first[Q] == 2, "%s: quantization first at step %d", list, first[Q]);
    CHECKF(first[Q] && first[Q] < first[EV] && first[EV] <= first[PRE],
           "%s: first steps: quantization %d, evict %d, preemption %d", list, first[Q], first[EV], first[PRE]);
    CHECKF(r_steady, "%s: R did not get its 64 tokens every step before V's preemption", list);
    CHECKF(prev[FKV_RECLAIM_PREEMPT] > 0, "the preemption's pages were not counted");
    CHECK(v.fair_picks <= sc.fair_max_victim);
    /* and everything still finishes */
    for (int k = 0; k < 100000 && fkv_sched_finished(s) < 3; k++) {
        STEP(s, now, &b);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 3 && fkv_sched_rejections(s) == 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* Offload: reclaim_order's case with the list "offload" and a host tier.
 * R's step-2 chunk takes V's first chunk to the host; V, served next,
 * cannot bring it back (R holds the pages) and is preempted with its
 * sequence.  When V runs again the chunk is copied back (fkv_seq_fetch:
 * reloaded, counted in the batch's host_tokens, named in no range), and
 * only the chunks evicted meanwhile are recomputed. */
static void offload_reload(void)
{
    int64_t now = 0;
    fkv_cache *cache = tenant_cache_host(&now, 21, 64, 64, 1ULL << 30);
    fkv_sched_config sc;
    rvw_config(&sc, "offload");
    fkv_req r, v, w;
    fkv_sched *s = rvw_start(cache, &sc, &r, &v, &w, 0);
    fkv_batch b = {0};
    uint64_t host = 0;
    for (int k = 0; k < 1000 && fkv_sched_finished(s) < 3; k++) {
        STEP(s, now, &b);
        host += b.host_tokens;
        for (size_t i = 0; i < b.n; i++)
            for (uint32_t j = 0; j < b.items[i].n_ranges; j++)
                CHECK(b.items[i].r != &v || b.ranges[b.items[i].range0 + j].start >= 64); /* not the offloaded one */
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    fkv_tenant_info ti;
    REQUIRE(fkv_cache_tenant_info(cache, 2, &ti) == FKV_OK);
    CHECKF(ti.reclaimed_pages[FKV_RECLAIM_OFFLOAD] == 4, "%llu pages offloaded",
           (unsigned long long)ti.reclaimed_pages[FKV_RECLAIM_OFFLOAD]);
    CHECKF(v.preemptions == 1 && v.reloaded == 64 && host == 64, "V: %u preemptions, %llu reloaded, batches %llu",
           v.preemptions, (unsigned long long)v.reloaded, (unsigned long long)host);
    CHECK(fkv_sched_finished(s) == 3 && fkv_sched_rejections(s) == 0 && v.generated == v.output);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* The whole reclaim ladder, quantize8, offload, drop, then preemption, on
 * reclaim_order's cache (21 pages, R taking 4 pages a step from V, whose
 * tenant weighs a quarter) with a host tier of one int8 chunk (2 pages)
 * and a drop window of the last 64 tokens.  Step 2: two int8 chunks give
 * R its 4 pages; step 3: the third int8 chunk (2) and, quantization having
 * nothing left, an offload of one int8 chunk (2: the host is then full).
 * Later in step 3 V itself is served and must reload its offloaded chunk:
 * with R served there is no other victim, and V, its tenant the one over
 * its share, pays for itself by the one action left that keeps its K/V
 * readable, drop (its other two int8 chunks, 4 pages).  Only then is
 * preemption left.  So each action acts first only after the one before
 * it in the list has given what it could. */
static void reclaim_ladder(void)
{
    int64_t now = 0;
    fkv_cache *cache = tenant_cache(&now, 21, 64, 64);
    fkv_cache_info ci;
    REQUIRE(fkv_cache_get_info(cache, &ci) == FKV_OK);
    fkv_cache_destroy(cache);
    /* one int8 chunk of 64 tokens: 2 pages and its scales (fairkv_quant.h) */
    cache = tenant_cache_host(&now, 21, 64, 64, 2 * ci.page_bytes + 2 * ci.page_bytes / 4);
    REQUIRE(fkv_cache_set_tenant_weight(cache, 2, 0.25) == FKV_OK);
    fkv_sched_config sc;
    rvw_config(&sc, "quantize8,offload,drop");
    sc.reclaim_sink_tokens = 0;
    sc.reclaim_window_tokens = 64;
    fkv_req r, v, w;
    fkv_sched *s = rvw_start(cache, &sc, &r, &v, &w, 257 + 12);
    fkv_batch b = {0};
    enum { Q, OFF, DROP, PRE, N };
    const int slot[N] = {FKV_RECLAIM_QUANTIZE8, FKV_RECLAIM_OFFLOAD, FKV_RECLAIM_DROP, FKV_RECLAIM_PREEMPT};
    int first[N] = {0, 0, 0, 0};
    uint64_t prev[FKV_N_RECLAIM_SLOTS] = {0};
    for (int step = 1; step <= 40 && !first[PRE]; step++) {
        STEP(s, now, &b);
        fkv_tenant_info ti;
        REQUIRE(fkv_cache_tenant_info(cache, 2, &ti) == FKV_OK);
        for (int k = 0; k < N; k++)
            if (ti.reclaimed_pages[slot[k]] > prev[slot[k]] && !first[k]) first[k] = step;
        if (v.preemptions && !first[PRE]) first[PRE] = step;
        memcpy(prev, ti.reclaimed_pages, sizeof prev);
        CHECK(r.preemptions == 0);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECKF(first[Q] == 2 && first[OFF] == 3 && first[DROP] == 3 && first[PRE] > first[DROP],
           "first steps: quantize8 %d, offload %d, drop %d, preemption %d", first[Q], first[OFF], first[DROP],
           first[PRE]);
    CHECKF(prev[FKV_RECLAIM_QUANTIZE8] == 6 && prev[FKV_RECLAIM_OFFLOAD] == 2 && prev[FKV_RECLAIM_DROP] == 4,
           "pages: quantize8 %llu, offload %llu, drop %llu", (unsigned long long)prev[FKV_RECLAIM_QUANTIZE8],
           (unsigned long long)prev[FKV_RECLAIM_OFFLOAD], (unsigned long long)prev[FKV_RECLAIM_DROP]);
    for (int k = 0; k < 100000 && fkv_sched_finished(s) < 3; k++) {
        STEP(s, now, &b);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 3 && fkv_sched_rejections(s) == 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* The starvation bound against an adversarial heavy tenant: tenant 1
 * sends long requests four times as often as tenant 2 sends tiny ones
 * (at most 16 tokens: one page, so they never need memory after their
 * admission and are victims only when chosen for others).  Every request
 * must finish, none may be chosen by the fair rule more than
 * fair_max_victim times, and no request of tenant 2 may be a victim
 * (preempted, or reclaimed from) in a step that began with tenant 1 over
 * its share. */
static void starvation(const char *reclaim, uint32_t max_victim, fkv_step_share share)
{
    int64_t now = 0;
    fkv_cache *cache = tenant_cache(&now, 160, 64, 64);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.victim = FKV_VICTIM_FAIR;
    sc.fair_max_victim = max_victim;
    sc.step_share = share;
    REQUIRE(fkv_sched_parse_reclaim(reclaim, sc.reclaim, &sc.n_reclaim, NULL, 0) == 0);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    size_t n = (size_t)(400 * check_scale()) + 50;
    fkv_req *q = calloc(n, sizeof *q);
    REQUIRE(q);
    uint64_t rng = 12345;
    for (size_t i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t x = (uint32_t)(rng >> 33);
        int light = i % 5 == 4;
        q[i] = light ? req(i + 1, 2, 1 + x % 12, 1 + x % 4) : req(i + 1, 1, 300 + x % 700, 50 + x % 300);
        q[i].arrival_ns = (int64_t)i * MS(2);
    }
    fkv_batch b = {0};
    size_t next = 0, violations = 0, light_victims = 0, steps = 0;
    uint32_t *pre = calloc(n, sizeof *pre), *rec = calloc(n, sizeof *rec);
    REQUIRE(pre && rec);
    while (fkv_sched_finished(s) < n && steps < 2000000) {
        while (next < n && q[next].arrival_ns <= now) REQUIRE(fkv_sched_add(s, &q[next++]) == FKV_OK);
        if (!fkv_sched_n_running(s) && !fkv_sched_n_waiting(s)) {
            now = q[next].arrival_ns;
            continue;
        }
        double heavy_over = over_of(cache, 1);
        STEP(s, now, &b);
        for (size_t i = 0; i < next; i++) {
            int hit = q[i].preemptions != pre[i] || q[i].reclaims != rec[i];
            pre[i] = q[i].preemptions;
            rec[i] = q[i].reclaims;
            if (!hit || q[i].tenant != 2) continue;
            light_victims++;
            violations += heavy_over > 0;
        }
        now += MS(1) + (int64_t)b.tokens * 10000;
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        steps++;
    }
    CHECKF(fkv_sched_finished(s) == n, "reclaim '%s': %llu of %zu finished", reclaim,
           (unsigned long long)fkv_sched_finished(s), n);
    CHECK(fkv_sched_rejections(s) == 0);
    uint64_t picks = 0, preempted = 0;
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        CHECKF(q[i].state == FKV_REQ_DONE && q[i].generated == q[i].output, "request %zu did not finish", i + 1);
        CHECKF(q[i].fair_picks <= max_victim, "request %zu chosen %u times by the fair rule", i + 1, q[i].fair_picks);
        picks += q[i].fair_picks;
        preempted += q[i].preemptions;
        if (q[i].fair_picks > most) most = q[i].fair_picks;
    }
    printf("starvation, step share %s, reclaim '%s', fair_max_victim %u: %zu requests in %zu steps, %llu preemptions, %llu fair "
           "choices (at most %u a request), %zu light victims\n",
           fkv_step_share_name(share), reclaim, max_victim, n, steps, (unsigned long long)preempted, (unsigned long long)picks, most, light_victims);
    CHECKF(violations == 0, "reclaim '%s': %zu victims of tenant 2 while tenant 1 was over its share (%zu in all)",
           reclaim, violations, light_victims);
    /* the pressure path ran and the bound was reached, so it was tested */
    CHECKF(preempted > 0 && picks > 0 && most == max_victim, "reclaim '%s': %llu preemptions, %llu fair choices, "
           "at most %u a request", reclaim, (unsigned long long)preempted, (unsigned long long)picks, most);
    free(pre);
    free(rec);
    free(q);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

/* The tenant step share: tenant 1 has four 400-token prompts, tenant 2 two
 * of 40 arriving with them; budget 128, share 0.25.  While both tenants
 * have prefill left no tenant prefills more than 32 tokens a step; once
 * only one has, it takes the whole budget; decodes are never limited.
 * Tenant 2's first tokens come sooner than with the share off, where
 * tenant 1's prompts, first in the queue, take every step's budget. */
static void step_share(void)
{
    int64_t t2_first[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        fkv_sched_config sc;
        fkv_sched_config_default(&sc);
        sc.token_ids = fkv_sim_token_ids;
        sc.max_batch_tokens = 128;
        sc.tenant_step_share = on ? 0.25 : 1;
        fkv_sched *s;
        REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
        fkv_req r[6] = {req(1, 1, 400, 4), req(2, 1, 400, 4), req(3, 1, 400, 4),
                        req(4, 1, 400, 4), req(5, 2, 40, 4),  req(6, 2, 40, 4)};
        for (int i = 0; i < 6; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
        fkv_batch b = {0};
        int64_t now = 0;
        int full_alone = 0;
        for (int steps = 0; steps < 1000 && fkv_sched_finished(s) < 6; steps++) {
            int pending[3] = {0, 0, 0};
            for (int i = 0; i < 6; i++)
                if (r[i].state != FKV_REQ_DONE && r[i].computed < r[i].target) pending[r[i].tenant] = 1;
            STEP(s, now, &b);
            uint32_t pf[3] = {0, 0, 0};
            for (size_t i = 0; i < b.n; i++)
                pf[b.items[i].r->tenant] += b.items[i].n_new; /* the share bounds every new token */
            if (on && pending[1] && pending[2])
                CHECKF(pf[1] <= 32 && pf[2] <= 32, "both tenants waiting: prefills %u and %u tokens", pf[1], pf[2]);
            if (on && pending[1] != pending[2] && pf[1] + pf[2] > 32) full_alone = 1;
            now += MS(10);
            REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        }
        CHECK(fkv_sched_finished(s) == 6);
        if (on) CHECKF(full_alone, "a tenant alone with prefill left never took the whole budget");
        t2_first[on] = r[4].first_token_ns > r[5].first_token_ns ? r[4].first_token_ns : r[5].first_token_ns;
        fkv_batch_free(&b);
        fkv_sched_destroy(s);
    }
    CHECKF(t2_first[1] < t2_first[0], "tenant 2's last first token at %lld ns with the share, %lld without",
           (long long)t2_first[1], (long long)t2_first[0]);
}

/* A long prefill leaves its tenant's short prompts their share (sched.h,
 * "Tenant step share").  Budget 128, share 0.5 (64 tokens a tenant while
 * two have prefill left); tenant 1's A and tenant 2's B run their prompts
 * from step 1; before step 2, tenant 1's short prompts arrive.  A prompt
 * of 1000 (more than a step's budget) lets them start first and takes
 * what they leave: one prompt of 20 runs whole in step 2 and A takes 44;
 * three of 30: two start (30, 30) and A takes the 4 left, too few for the
 * third, which waits.  A prompt of 127 (one step's budget or less) is not
 * held back: A takes its 63 left and the short one the 1 token its tenant
 * has left.  A waiting prompt of 100 does not fit in the share: A keeps
 * the share, the prompt waits, and so does one of 64, the whole share (A
 * keeps a token).  With no running slot for the short prompt (max_running
 * 2), A takes the whole share: what the short prompts cannot use is not
 * lost.  A short prompt of tenant 3 does not start before A: A and B take
 * the whole budget and the prompt waits. */
static void long_prefill_yields(uint32_t a_prompt, int n_short, uint32_t short_prompt, uint32_t want_a,
                                const uint32_t *want_short, uint32_t max_running, uint64_t short_tenant)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.max_batch_tokens = 128;
    sc.max_running = max_running;
    sc.tenant_step_share = 0.5;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req r[5] = {req(1, 1, a_prompt, 2), req(2, 2, 1000, 2)};
    for (int i = 0; i < 2; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    fkv_batch b = {0};
    STEP(s, 0, &b);
    CHECK(b.n == 2 && b.items[0].n_new == 64 && b.items[1].n_new == 64);
    REQUIRE(fkv_sched_finish(s, &b, MS(10)) == FKV_OK);
    for (int k = 0; k < n_short; k++) {
        r[2 + k] = req(3 + k, short_tenant, short_prompt, 1);
        REQUIRE(fkv_sched_add(s, &r[2 + k]) == FKV_OK);
    }
    STEP(s, MS(10), &b);
    uint32_t got[5] = {0};
    for (size_t i = 0; i < b.n; i++) got[b.items[i].r->id - 1] = b.items[i].n_new;
    CHECKF(got[0] == want_a && got[1] == 64, "A (prompt %u) took %u, B %u", a_prompt, got[0], got[1]);
    for (int k = 0; k < n_short; k++)
        CHECKF(got[2 + k] == want_short[k], "A %u: short prompt %d took %u, want %u", a_prompt, k, got[2 + k],
               want_short[k]);
    REQUIRE(fkv_sched_finish(s, &b, MS(20)) == FKV_OK);
    if (n_short == 1 && want_short[0] == short_prompt)
        CHECK(r[2].state == FKV_REQ_DONE && r[2].first_token_ns == MS(20));
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* max_request_tokens (the engine's cap while it quantizes): budget 128,
 * at most 40 new tokens of one request a step.  Two prompts of 100 take 40
 * each in the first two steps and their last 20 in the third; a decode is
 * not limited.  Without the cap the first takes 100 and the second 28. */
static void request_cap(void)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.max_batch_tokens = 128;
    sc.max_request_tokens = 40;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req r[2] = {req(1, 1, 100, 2), req(2, 1, 100, 2)};
    for (int i = 0; i < 2; i++) REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    fkv_batch b = {0};
    const uint32_t want[4][2] = {{40, 40}, {40, 40}, {20, 20}, {1, 1}};
    for (int k = 0; k < 4; k++) {
        STEP(s, MS(10 * k), &b);
        uint32_t got[2] = {0, 0};
        for (size_t i = 0; i < b.n; i++) got[b.items[i].r->id - 1] = b.items[i].n_new;
        CHECKF(got[0] == want[k][0] && got[1] == want[k][1], "step %d: %u and %u new tokens, want %u and %u", k,
               got[0], got[1], want[k][0], want[k][1]);
        REQUIRE(fkv_sched_finish(s, &b, MS(10 * k + 10)) == FKV_OK);
    }
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* VTC's memory term (no cache: a request holds its length).  One request
 * runs at a time.  Client 0's A (prompt 1000, output 50) costs 1000 + 2 x
 * 50 = 1100 and holds about 1025 tokens for 50 steps of 10 ms (~512
 * token-seconds); client 1's B (prompt 1100, output 1) costs 1102 and holds
 * 1100 tokens for one step (11 token-seconds).  Then C (client 0) and D
 * (client 1) wait, one token each: without the term client 0's counter is
 * lower and C goes first; at 1 unit a token-second client 0 pays ~500 more
 * and D goes first. */
static void vtc_memory(double mem_weight, int d_first)
{
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.admission = FKV_ADMIT_VTC;
    sc.n_clients = 2;
    sc.max_running = 1;
    sc.vtc_mem_weight = mem_weight;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, NULL, &s) == FKV_OK);
    fkv_req r[4] = {req(1, 0, 1000, 50), req(2, 0, 1100, 1), req(3, 0, 1, 1), req(4, 0, 1, 1)};
    const uint32_t client[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        r[i].client = client[i];
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
    }
    fkv_batch b = {0};
    int64_t t = 0;
    for (int steps = 0; steps < 1000 && fkv_sched_finished(s) < 4; steps++) {
        STEP(s, t, &b);
        t += MS(10);
        REQUIRE(fkv_sched_finish(s, &b, t) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 4);
    CHECK(r[0].finish_ns < r[1].first_token_ns);
    CHECKF((r[3].finish_ns < r[2].first_token_ns) == d_first, "memory weight %g: D %s C", mem_weight,
           d_first ? "before" : "after");
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
}

/* Publishing shared_tokens: tenant 2's request repeats tenant 1's
 * 64-token system prompt (same shared_seed) and arrives after it has
 * finished.  Published, it finds the prompt's full pages (64 tokens); kept
 * private, the tenants' namespaces differ and it finds nothing. */
static void publish_shared(int publish)
{
    int64_t now = 0;
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 64;
    cc.policy = "lru";
    cc.quotas = FKV_QUOTA_TENANT;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &now;
    fkv_cache *cache;
    REQUIRE(fkv_cache_create(&cc, &cache, NULL, 0) == FKV_OK);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    /* the requests' token sources: the same shared seed, their own seeds */
    fkv_req_src src[2] = {{.token_seed = 1001, .shared_seed = 77}, {.token_seed = 1002, .shared_seed = 77}};
    fkv_sim_tokens ts = {src, 2, 512, 0};
    sc.token_ids = fkv_sim_token_ids;
    sc.token_ctx = &ts;
    sc.publish_shared = publish;
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req r[2] = {req(1, 1, 100, 2), req(2, 2, 100, 2)};
    for (int i = 0; i < 2; i++) {
        r[i].shared_tokens = 64;
        r[i].tag = (uint64_t)i; /* src[i] */
    }
    fkv_batch b = {0};
    for (int i = 0; i < 2; i++) {
        REQUIRE(fkv_sched_add(s, &r[i]) == FKV_OK);
        for (int k = 0; k < 100 && r[i].state != FKV_REQ_DONE; k++) {
            STEP(s, now, &b);
            now += MS(1);
            REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
        }
        CHECK(r[i].state == FKV_REQ_DONE);
    }
    CHECKF(r[1].matched == (publish ? 64u : 0u), "publish %d: tenant 2 matched %llu tokens", publish,
           (unsigned long long)r[1].matched);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

static void config_errors(void)
{
    fkv_reclaim_action a[FKV_N_RECLAIM];
    uint32_t n = 9;
    char why[160] = "";
    CHECK(fkv_sched_parse_reclaim("", a, &n, why, sizeof why) == 0 && n == 0);
    CHECK(fkv_sched_parse_reclaim("none", a, &n, why, sizeof why) == 0 && n == 0);
    CHECK(fkv_sched_parse_reclaim("quantize8,drop,evict", a, &n, why, sizeof why) == 0 && n == 3 &&
          a[0] == FKV_RECLAIM_QUANTIZE8 && a[1] == FKV_RECLAIM_DROP && a[2] == FKV_RECLAIM_EVICT);
    CHECK(fkv_sched_parse_reclaim("quantize8,squash", a, &n, why, sizeof why) < 0 && strstr(why, "'squash'"));
    CHECK(fkv_sched_parse_reclaim("evict,evict", a, &n, why, sizeof why) < 0 && strstr(why, "repeats"));
    CHECK(fkv_sched_parse_reclaim("preempt", a, &n, why, sizeof why) < 0);
    CHECK(fkv_sched_parse_reclaim("offload,evict", a, &n, why, sizeof why) == 0 && n == 2 &&
          a[0] == FKV_RECLAIM_OFFLOAD);
    CHECK(fkv_victim_parse("fair") == FKV_VICTIM_FAIR && fkv_victim_parse("nope") < 0);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    fkv_sched *s = NULL;
    sc.tenant_step_share = 0;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
    sc.tenant_step_share = 1;
    sc.vtc_mem_weight = -1;
    CHECK(fkv_sched_create(&sc, NULL, &s) == FKV_EINVAL);
}

/* The requester pays for itself when its tenant is the one over share.
 * 22 pages of 16 tokens, 64-token chunks, the last 64 hot.  H (tenant 1)
 * holds 255 tokens (16 pages) and L (tenant 2) 81 (6 pages): the pool is
 * full, nothing is idle once both run.  Demands 19 and 8 pages (expected
 * lengths 295 and 121): L's share is its 8, H's 14, so H is 2 over and L
 * 2 under.  Step 1 fits in their last pages; in step 2 H's decode needs a
 * page: H quantizes one of its own cold chunks (2 pages) rather than
 * take from L, within its share (whose nothing cold would end in H's
 * preemption); L keeps everything. */
static void self_reclaim(void)
{
    int64_t now = 0;
    fkv_cache *cache = tenant_cache(&now, 22, 64, 64);
    fkv_sched_config sc;
    fkv_sched_config_default(&sc);
    sc.token_ids = fkv_sim_token_ids;
    sc.victim = FKV_VICTIM_FAIR;
    REQUIRE(fkv_sched_parse_reclaim("quantize8,evict", sc.reclaim, &sc.n_reclaim, NULL, 0) == 0);
    fkv_sched *s;
    REQUIRE(fkv_sched_create(&sc, cache, &s) == FKV_OK);
    fkv_req h = req(1, 1, 255, 40), l = req(2, 2, 81, 40);
    fkv_req *rs[2] = {&h, &l};
    for (int i = 0; i < 2; i++) {
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = rs[i]->id;
        p.tenant = rs[i]->tenant;
        p.expected_tokens = rs[i]->prompt + rs[i]->output;
        fkv_seq *q;
        REQUIRE(fkv_seq_create(cache, &p, &q) == FKV_OK);
        REQUIRE(fkv_seq_append(q, NULL, rs[i]->prompt, NULL) == FKV_OK);
        REQUIRE(fkv_sched_add_seq(s, rs[i], q) == FKV_OK);
    }
    CHECKF(over_of(cache, 1) > 0 && over_of(cache, 2) < 0, "over: %g %g", over_of(cache, 1), over_of(cache, 2));
    fkv_batch b = {0};
    STEP(s, now, &b);
    CHECK(b.n == 2 && b.preempted == 0);
    now += MS(1);
    REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    STEP(s, now, &b);
    fkv_tenant_info t1, t2;
    REQUIRE(fkv_cache_tenant_info(cache, 1, &t1) == FKV_OK && fkv_cache_tenant_info(cache, 2, &t2) == FKV_OK);
    CHECKF(t1.reclaimed_pages[FKV_RECLAIM_QUANTIZE8] == 2, "H gave %llu pages by int8",
           (unsigned long long)t1.reclaimed_pages[FKV_RECLAIM_QUANTIZE8]);
    for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++) CHECKF(t2.reclaimed_pages[k] == 0, "L lost pages (slot %d)", k);
    CHECK(h.preemptions == 0 && l.preemptions == 0 && b.n == 2 && b.preempted == 0);
    CHECK(h.fair_picks == 0); /* paying for itself does not count toward its exemption */
    now += MS(1);
    REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    for (int k = 0; k < 1000 && fkv_sched_finished(s) < 2; k++) {
        STEP(s, now, &b);
        now += MS(1);
        REQUIRE(fkv_sched_finish(s, &b, now) == FKV_OK);
    }
    CHECK(fkv_sched_finished(s) == 2 && fkv_sched_rejections(s) == 0);
    fkv_batch_free(&b);
    fkv_sched_destroy(s);
    fkv_cache_destroy(cache);
}

int main(void)
{
    config_errors();
    publish_shared(1);
    publish_shared(0);
    fair_victim_weights();
    reclaim_order("quantize8,evict", FKV_RECLAIM_QUANTIZE8);
    reclaim_order("quantize4,evict", FKV_RECLAIM_QUANTIZE4);
    offload_reload();
    reclaim_ladder();
    self_reclaim();
    starvation("", 2, FKV_STEP_SHARE_OFF);
    starvation("quantize8,evict", 2, FKV_STEP_SHARE_OFF);
    starvation("", 1, FKV_STEP_SHARE_OFF);
    starvation("", 2, FKV_STEP_DRR);
    starvation("quantize8,evict", 1, FKV_STEP_DRR);
    step_share();
    long_prefill_yields(1000, 1, 20, 44, (const uint32_t[]){20}, 256, 1);
    long_prefill_yields(1000, 3, 30, 4, (const uint32_t[]){30, 30, 0}, 256, 1);
    long_prefill_yields(127, 1, 20, 63, (const uint32_t[]){1}, 256, 1);
    long_prefill_yields(1000, 1, 100, 64, (const uint32_t[]){0}, 256, 1);
    long_prefill_yields(1000, 1, 64, 64, (const uint32_t[]){0}, 256, 1);
    long_prefill_yields(1000, 1, 20, 64, (const uint32_t[]){0}, 2, 1);
    long_prefill_yields(1000, 1, 20, 64, (const uint32_t[]){0}, 256, 3);
    vtc_memory(0, 0);
    vtc_memory(1, 1);
    request_cap();
    return check_done();
}
