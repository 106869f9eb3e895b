/* The fairness workloads (tenants, tenants-alike, chat) against their
 * stated distributions (docs/EVALUATION.md, "Fairness workloads"): class
 * mix, size ranges, tenant shares, the heavy tenants' share of the work
 * against their fair share, sessions and turns, think time, the prefix each
 * turn re-sends (token ids), determinism, and the bench options' errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sim/bench.h"
#include "sim/workload.h"

/* Tolerances: 1% (absolute) for proportions over 1e5 draws (binomial
 * sd <= 0.0016, so 6 sd); 2% (relative) for the means of geometric and
 * exponential draws over 1e5 (sd of the mean 0.3% resp. 0.4%, 5 sd). */
#define PROP_TOL 0.01
#define MEAN_TOL 0.02

static void tenants_mix(void)
{
    size_t n = 100000;
    fkv_tenants_params p;
    fkv_tenants_params_default(&p);
    fkv_workload w;
    REQUIRE(fkv_workload_tenants(n, 7, 64, &p, &w) == FKV_OK);
    REQUIRE(w.n == n);
    CHECK(w.n_tenants == p.n_light + p.n_heavy && w.n_light == p.n_light && !strcmp(w.name, "tenants"));
    uint32_t nt = p.n_light + p.n_heavy;
    size_t heavy = 0, short_ = 0, medium = 0, bad = 0, per[17] = {0};
    for (size_t i = 0; i < n; i++) {
        const fkv_req *r = &w.reqs[i];
        if (r->id != i + 1 || r->tenant < 1 || r->tenant > nt || r->output < 1 || r->prompt < 1 ||
            r->client != r->tenant - 1) {
            bad++;
            continue;
        }
        per[r->tenant]++;
        uint32_t t = r->prompt + r->output;
        if (r->tenant > p.n_light) {
            heavy++;
            if (r->prompt < p.heavy_prompt_lo || r->prompt > p.heavy_prompt_hi) bad++;
            if (r->output < p.heavy_out_lo || r->output > p.heavy_out_hi) bad++;
        } else {
            /* light: the seed's short and medium only */
            fkv_class c = fkv_sim_class(t);
            if (c == FKV_CLASS_SHORT) short_++;
            else if (c == FKV_CLASS_MEDIUM) medium++;
            else bad++;
            if (t < 16) bad++;
        }
    }
    CHECKF(bad == 0, "%zu requests out of their ranges", bad);
    CHECKF(fabs(heavy / (double)n - p.heavy_frac) < PROP_TOL, "heavy %zu of %zu", heavy, n);
    size_t light = n - heavy;
    CHECKF(fabs(short_ / (double)light - 2.0 / 3.0) < PROP_TOL, "light short %zu of %zu", short_, light);
    CHECKF(fabs(medium / (double)light - 1.0 / 3.0) < PROP_TOL, "light medium %zu of %zu", medium, light);
    for (uint32_t t = 1; t <= nt; t++) {
        double want = t <= p.n_light ? (1 - p.heavy_frac) / p.n_light : p.heavy_frac / p.n_heavy;
        CHECKF(fabs(per[t] / (double)n - want) < PROP_TOL, "tenant %u: %zu", t, per[t]);
    }

    /* alike: the same requests, tenants uniform, each tenant the whole mix */
    p.alike = 1;
    fkv_workload a;
    REQUIRE(fkv_workload_tenants(n, 7, 64, &p, &a) == FKV_OK);
    CHECK(a.n_light == nt && !strcmp(a.name, "tenants-alike"));
    size_t same = 0, per_a[17] = {0}, heavy_a[17] = {0};
    for (size_t i = 0; i < n; i++) {
        const fkv_req *x = &w.reqs[i], *y = &a.reqs[i];
        same += x->prompt == y->prompt && x->output == y->output && x->tag == y->tag; /* token seeds */
        if (y->tenant >= 1 && y->tenant <= nt) {
            per_a[y->tenant]++;
            if (x->tenant > p.n_light) heavy_a[y->tenant]++;
        }
    }
    CHECKF(same == n, "alike changes %zu sizes", n - same);
    for (uint32_t t = 1; t <= nt; t++) {
        CHECKF(fabs(per_a[t] / (double)n - 1.0 / nt) < PROP_TOL, "alike tenant %u: %zu", t, per_a[t]);
        CHECKF(per_a[t] && fabs(heavy_a[t] / (double)per_a[t] - p.heavy_frac) < PROP_TOL,
               "alike tenant %u: %zu long-prompt of %zu", t, heavy_a[t], per_a[t]);
    }

    /* determinism: same seed, same requests; another seed, others */
    fkv_workload b, d;
    REQUIRE(fkv_workload_tenants(1000, 7, 64, &p, &b) == FKV_OK);
    REQUIRE(fkv_workload_tenants(1000, 8, 64, &p, &d) == FKV_OK);
    int eq = 1, diff = 0;
    for (size_t i = 0; i < 1000; i++) {
        eq &= !memcmp(&b.reqs[i], &a.reqs[i], sizeof b.reqs[i]);
        diff += b.reqs[i].prompt != d.reqs[i].prompt;
    }
    CHECK(eq);
    CHECK(diff > 500);

    /* bad parameters */
    fkv_workload z;
    fkv_tenants_params q = p;
    q.heavy_prompt_lo = q.heavy_prompt_hi + 1;
    CHECK(fkv_workload_tenants(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.n_light = 0;
    CHECK(fkv_workload_tenants(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.heavy_frac = 1.5;
    CHECK(fkv_workload_tenants(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.n_light = 15;
    CHECK(fkv_workload_tenants(10, 1, 4, &q, &z) == FKV_EINVAL); /* 17 tenants */
    fkv_workload_free(&w);
    fkv_workload_free(&a);
    fkv_workload_free(&b);
    fkv_workload_free(&d);
}

/* The heavy tenants' offered load alone exceeds their fair share at the
 * issue's load 0.9: their share of the work (the time to serve their
 * requests alone at saturation over the time to serve all of them, both
 * from the simulator's capacity probe) times 0.9 is above n_heavy / n. */
static void heavy_share(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.workload = "tenants";
    o.quiet = 1;
    o.cap_tokens = 1 << 20; /* skips the capacity rule's peak-demand probe */
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_status st = fkv_bench_prepare(&c, &o, err, sizeof err);
    CHECKF(st == FKV_OK, "prepare: %s", err);
    if (st) return;
    fkv_workload h = c.base;
    h.reqs = malloc(c.base.n * sizeof *h.reqs);
    REQUIRE(h.reqs);
    h.blocks = NULL;
    h.session = h.turn = NULL;
    h.n = 0;
    for (size_t i = 0; i < c.base.n; i++)
        if (c.base.reqs[i].tenant > c.base.n_light) h.reqs[h.n++] = c.base.reqs[i];
    REQUIRE(h.n > 0);
    double rps_heavy = 0;
    REQUIRE(fkv_sim_capacity_rps(&h, &o.sim, &rps_heavy, err, sizeof err) == FKV_OK);
    double work = (h.n / rps_heavy) / (c.base.n / c.cap_rps);
    double fair = (double)(c.base.n_tenants - c.base.n_light) / c.base.n_tenants;
    printf("heavy tenants: %zu of %zu requests, %.3f of the work; at load 0.9 they offer %.3f of the server, "
           "fair share %.3f\n",
           h.n, c.base.n, work, 0.9 * work, fair);
    CHECKF(0.9 * work > fair, "heavy work share %.3f x 0.9 <= fair share %.3f", work, fair);
    free(h.reqs);
    fkv_bench_ctx_free(&c);
}

static void chat_sessions(void)
{
    fkv_chat_params p;
    fkv_chat_params_default(&p);
    /* 100k sessions: turns_mean requests each */
    size_t n = (size_t)(100000 * p.turns_mean);
    fkv_workload w;
    REQUIRE(fkv_workload_chat(n, 11, 64, &p, &w) == FKV_OK);
    REQUIRE(w.session && w.turn && w.n >= n && w.n < n + p.turns_max);
    CHECK(w.n_tenants == p.n_tenants && !strcmp(w.name, "chat"));
    size_t ns = w.n_sessions;
    CHECKF(ns > 90000, "%zu sessions", ns);
    /* per session: last request index, turns, tenant, token seed */
    size_t *last = malloc(ns * sizeof *last);
    uint32_t *turns = calloc(ns, sizeof *turns);
    REQUIRE(last && turns);
    size_t bad_order = 0, bad_prefix = 0, bad_meta = 0, tok_checked = 0, tok_bad = 0, per[17] = {0};
    fkv_sim_tokens ts = fkv_workload_tokens(&w, w.block_tokens);
    double think = 0;
    size_t n_think = 0;
    for (size_t i = 0; i < w.n; i++) {
        const fkv_req *r = &w.reqs[i];
        uint32_t s = w.session[i], k = w.turn[i];
        if (r->id != i + 1 || s >= ns || r->output < 1 || r->tenant < 1 || r->tenant > p.n_tenants) {
            bad_meta++;
            continue;
        }
        if (i && r->arrival_ns < w.reqs[i - 1].arrival_ns) bad_order++;
        if (k != turns[s]) { /* turns arrive in order */
            bad_order++;
            continue;
        }
        if (k == 0) {
            per[r->tenant]++;
        } else {
            const fkv_req *q = &w.reqs[last[s]];
            uint32_t hist = q->prompt + q->output;
            if (q->tenant != r->tenant || q->tag != r->tag) bad_meta++;
            if (r->prompt <= hist) bad_prefix++; /* the history plus a user message of >= 1 token */
            if (r->arrival_ns <= q->arrival_ns) bad_order++;
            think += (double)(r->arrival_ns - q->arrival_ns) * 1e-9;
            n_think++;
            /* the ids the cache hashes: the previous prompt and output, id for id */
            if (s < 3000) {
                for (uint32_t pos = 0; pos < hist && pos < r->prompt; pos++, tok_checked++)
                    tok_bad += fkv_req_token(&ts, q, pos) != fkv_req_token(&ts, r, pos);
            }
        }
        last[s] = i;
        turns[s]++;
    }
    CHECKF(bad_meta == 0, "%zu requests with bad ids, tenants or seeds", bad_meta);
    CHECKF(bad_order == 0, "%zu out of order", bad_order);
    CHECKF(bad_prefix == 0, "%zu turns not extending their history", bad_prefix);
    CHECKF(tok_checked > 100000 && tok_bad == 0, "%zu of %zu prefix token ids differ", tok_bad, tok_checked);

    size_t cls[FKV_N_CLASSES] = {0}, bad_len = 0;
    double tsum = 0;
    for (size_t s = 0; s < ns; s++) {
        const fkv_req *r = &w.reqs[last[s]];
        uint32_t total = r->prompt + r->output;
        cls[fkv_sim_class(total)]++;
        if (total < 16 || total > 2048 || turns[s] < 1 || turns[s] > p.turns_max || turns[s] > total / 2) bad_len++;
        tsum += turns[s];
    }
    CHECKF(bad_len == 0, "%zu sessions out of range", bad_len);
    CHECKF(fabs(cls[FKV_CLASS_SHORT] / (double)ns - 0.60) < PROP_TOL, "short %zu of %zu", cls[FKV_CLASS_SHORT], ns);
    CHECKF(fabs(cls[FKV_CLASS_MEDIUM] / (double)ns - 0.30) < PROP_TOL, "medium %zu", cls[FKV_CLASS_MEDIUM]);
    CHECKF(fabs(cls[FKV_CLASS_LONG] / (double)ns - 0.10) < PROP_TOL, "long %zu", cls[FKV_CLASS_LONG]);
    double tmean = tsum / ns, thmean = think / (double)n_think;
    printf("chat: %zu sessions, %zu requests, turns per session %.3f, think time %.2f s\n", ns, w.n, tmean, thmean);
    CHECKF(fabs(tmean / p.turns_mean - 1) < MEAN_TOL, "turns per session %.3f, want %.3f", tmean, p.turns_mean);
    CHECKF(fabs(thmean / p.think_mean_s - 1) < MEAN_TOL, "think time %.3f s, want %.3f", thmean, p.think_mean_s);
    for (uint32_t t = 1; t <= p.n_tenants; t++)
        CHECKF(fabs(per[t] / (double)ns - 1.0 / p.n_tenants) < PROP_TOL, "tenant %u: %zu sessions", t, per[t]);

    /* determinism; and another session rate moves the same turns in time */
    fkv_workload a, b, d;
    REQUIRE(fkv_workload_chat(5000, 11, 64, &p, &a) == FKV_OK);
    REQUIRE(fkv_workload_chat(5000, 11, 64, &p, &b) == FKV_OK);
    REQUIRE(a.n == b.n);
    int eq = 1;
    for (size_t i = 0; i < a.n; i++)
        eq &= !memcmp(&a.reqs[i], &b.reqs[i], sizeof a.reqs[i]) && a.session[i] == b.session[i] &&
              a.turn[i] == b.turn[i];
    CHECK(eq);
    fkv_chat_params fast = p;
    fast.session_rate = 7.5;
    REQUIRE(fkv_workload_chat(5000, 11, 64, &fast, &d) == FKV_OK);
    CHECK(d.n == a.n && d.n_sessions == a.n_sessions);
    /* (session, turn) -> sizes must agree */
    uint64_t ha = 0, hd = 0, ta = 0, td = 0;
    for (size_t i = 0; i < a.n && d.n == a.n; i++) {
        uint64_t ka = ((uint64_t)a.session[i] << 8 | a.turn[i]) * 0x9e3779b97f4a7c15ULL;
        uint64_t kd = ((uint64_t)d.session[i] << 8 | d.turn[i]) * 0x9e3779b97f4a7c15ULL;
        ha += ka ^ ((uint64_t)a.reqs[i].prompt << 32 | a.reqs[i].output) * 31;
        hd += kd ^ ((uint64_t)d.reqs[i].prompt << 32 | d.reqs[i].output) * 31;
        ta += (uint64_t)a.reqs[i].arrival_ns;
        td += (uint64_t)d.reqs[i].arrival_ns;
    }
    CHECK(ha == hd);
    CHECK(ta != td);

    fkv_workload z;
    fkv_chat_params q = p;
    q.turns_mean = 0.5;
    CHECK(fkv_workload_chat(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.turns_max = 65;
    CHECK(fkv_workload_chat(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.session_rate = 0;
    CHECK(fkv_workload_chat(10, 1, 4, &q, &z) == FKV_EINVAL);
    q = p;
    q.think_mean_s = -1;
    CHECK(fkv_workload_chat(10, 1, 4, &q, &z) == FKV_EINVAL);
    free(last);
    free(turns);
    fkv_workload_free(&w);
    fkv_workload_free(&a);
    fkv_workload_free(&b);
    fkv_workload_free(&d);
}

/* Runs fkv_bench_parse_opt over args, then fkv_bench_prepare; returns the
 * parse result (-1 on a bad value) or 2 + prepare's status, with the parse
 * message (stderr) or prepare's err in msg. */
static int bench(const char *args, char *msg, size_t cap)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[32];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 30; t = strtok(NULL, " ")) argv[argc++] = t;
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.quiet = 1;
    o.cap_tokens = 1 << 20;
    o.requests = 200;
    char path[] = "/tmp/fkv_fairwl_err_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fd, 2) == 2);
    int r = 1;
    for (int i = 0; i < argc && r == 1; i++) r = fkv_bench_parse_opt(&o, argc, argv, &i);
    fflush(stderr);
    REQUIRE(dup2(saved, 2) == 2);
    close(saved);
    close(fd);
    char *s = check_slurp(path);
    remove(path);
    snprintf(msg, cap, "%s", s ? s : "");
    free(s);
    if (r != 1) return r;
    fkv_bench_ctx c;
    char err[512] = "";
    fkv_status st = fkv_bench_prepare(&c, &o, err, sizeof err);
    snprintf(msg, cap, "%s", err);
    if (!st) {
        /* the workload names the tenants for the simulator */
        CHECK(o.sim.n_tenants == c.base.n_tenants && o.tenants_from_workload);
        fkv_workload w;
        double rate;
        CHECK(fkv_bench_arrivals(&c, 0.9, &w, &rate) == FKV_OK);
        CHECK(w.n == c.base.n);
        for (size_t i = 1; i < w.n; i++)
            if (w.reqs[i].arrival_ns < w.reqs[i - 1].arrival_ns) {
                CHECKF(0, "%s: arrivals out of order at %zu", args, i);
                break;
            }
        fkv_workload_free(&w);
    }
    fkv_bench_ctx_free(&c);
    return 2 + (int)st;
}

/* The runs that size a workload (the saturation throughput behind "load"
 * and the peak demand behind the capacity rule) use the plain scheduler
 * order: turning the step share, the step-time bound, within-share-first or
 * VTC admission on for a run must leave its arrival rate and capacity where
 * a run without them has them, or a comparison against a baseline run
 * compares two different loads.  The same mechanisms do change a run's
 * figures (checked last), so the probe is not blind to them. */
static void sizing_apart(void)
{
    double rps[2], tok_s[2], thr[2];
    uint64_t cap[2];
    for (int on = 0; on < 2; on++) {
        fkv_bench_opts o;
        fkv_bench_opts_default(&o);
        o.workload = "tenants";
        o.quiet = 1;
        o.requests = 400;
        o.load_lo = o.load_hi = 0.9;
        if (on) {
            o.sim.step_share = FKV_STEP_DRR;
            o.sim.admit_reclaim = 1;
            o.sim.step_bound = 2;
            o.sim.tenant_step_share = 0.25;
            o.sim.sched.admission = FKV_ADMIT_VTC;
        }
        char err[512] = "";
        fkv_bench_ctx c;
        fkv_status st = fkv_bench_prepare(&c, &o, err, sizeof err);
        CHECKF(st == FKV_OK, "prepare: %s", err);
        if (st) return;
        rps[on] = c.cap_rps;
        tok_s[on] = c.cap_tok_s;
        cap[on] = c.capacity_tokens;
        /* the mechanisms reach an unsized run: every request at 0 */
        fkv_sim_config cfg = o.sim;
        fkv_workload sat = c.base;
        sat.reqs = malloc(c.base.n * sizeof *sat.reqs);
        REQUIRE(sat.reqs);
        memcpy(sat.reqs, c.base.reqs, c.base.n * sizeof *sat.reqs);
        for (size_t i = 0; i < sat.n; i++) sat.reqs[i].arrival_ns = 0;
        fkv_sim_result r;
        REQUIRE(fkv_sim_run(&sat, NULL, &cfg, &r, err, sizeof err) == FKV_OK);
        thr[on] = (double)r.done / (double)r.makespan_ns;
        fkv_sim_result_free(&r);
        free(sat.reqs);
        fkv_bench_ctx_free(&c);
    }
    printf("sizing: %.4f/%.4f req/s, %.1f/%.1f tok/s, %llu/%llu tokens; unsized throughput %.6g/%.6g\n", rps[0],
           rps[1], tok_s[0], tok_s[1], (unsigned long long)cap[0], (unsigned long long)cap[1], thr[0], thr[1]);
    CHECKF(rps[0] == rps[1] && tok_s[0] == tok_s[1], "saturation moved with the mechanisms: %.6g/%.6g req/s", rps[0],
           rps[1]);
    CHECKF(cap[0] == cap[1], "capacity moved with the mechanisms: %llu/%llu", (unsigned long long)cap[0],
           (unsigned long long)cap[1]);
    CHECKF(thr[0] != thr[1], "the mechanisms changed nothing in a run (%.6g): the probe above proves nothing",
           thr[0]);
}

/* A workload prepared as fairkv bench does (requests 0: the default
 * count) and its arrivals at load 0.9; 0 when the preparation failed. */
static int arrivals_09(const char *workload, size_t requests, fkv_bench_opts *o, fkv_bench_ctx *c,
                       fkv_workload *w)
{
    fkv_bench_opts_default(o);
    o->workload = workload;
    o->quiet = 1;
    if (requests) o->requests = requests;
    o->load_lo = o->load_hi = 0.9;
    char err[512] = "";
    fkv_status st = fkv_bench_prepare(c, o, err, sizeof err);
    CHECKF(st == FKV_OK, "prepare %s: %s", workload, err);
    if (st) return 0;
    double rate;
    REQUIRE(fkv_bench_arrivals(c, 0.9, w, &rate) == FKV_OK);
    return 1;
}

/* The recommended fairkv scheme's step rule: each tenant's prefill at most
 * 1/n of a step (n tenants) unless --tenant-step-share names a fraction.
 * Its run without the option is the run with 1/6 on the 6-tenant
 * workload, and not the run with the fraction off. */
static void fairkv_step_fraction(void)
{
    fkv_bench_opts o;
    fkv_bench_ctx c;
    fkv_workload w;
    if (!arrivals_09("tenants", 400, &o, &c, &w)) return;
    const fkv_scheme *sc = fkv_scheme_find("fairkv");
    REQUIRE(sc && c.base.n_tenants == 6);
    char err[512] = "";
    const double frac[3] = {-1, 1.0 / 6, 1};
    double ttft[3];
    for (int i = 0; i < 3; i++) {
        fkv_sim_config cfg = o.sim;
        cfg.capacity_tokens = c.capacity_tokens;
        cfg.tenant_step_share = frac[i];
        fkv_sim_result r;
        REQUIRE(fkv_sim_run(&w, sc, &cfg, &r, err, sizeof err) == FKV_OK);
        ttft[i] = 0;
        for (size_t k = 0; k < r.n; k++) ttft[i] += (double)r.ttft_ns[k];
        fkv_sim_result_free(&r);
    }
    printf("fairkv TTFT sums: default %.6g, 1/6 %.6g, off %.6g\n", ttft[0], ttft[1], ttft[2]);
    CHECK(ttft[0] == ttft[1]);
    CHECK(ttft[0] != ttft[2]);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
}

/* A long prefill's tenant's short prompts start before it (sched.h,
 * "Tenant step share") while admission reclaims memory (--admit-reclaim)
 * with shares as targets: the whole tenants-alike workload, whose 14,885-
 * token prompt runs beside its tenant's short ones, must end with every
 * request done.  A build that let such an admission preempt the long
 * prefill it ran for failed here with "preempt: request 1814 not
 * running" (the re-choice's candidate admit+fraction). */
static void own_short_with_reclaim(void)
{
    fkv_bench_opts o;
    fkv_bench_ctx c;
    fkv_workload w;
    if (!arrivals_09("tenants-alike", 0, &o, &c, &w)) return;
    const fkv_scheme *sc = fkv_scheme_find("fairkv");
    REQUIRE(sc);
    char err[512] = "";
    fkv_sim_config cfg = o.sim;
    cfg.capacity_tokens = c.capacity_tokens;
    cfg.step_share = FKV_STEP_SHARE_OFF;
    cfg.step_bound = 0;
    cfg.share_guarantee = 0;
    cfg.admit_reclaim = 1;
    cfg.tenant_step_share = 1.0 / 6;
    cfg.quant = FKV_QUANT_OFF;
    fkv_sim_result r;
    fkv_status st = fkv_sim_run(&w, sc, &cfg, &r, err, sizeof err);
    CHECKF(st == FKV_OK, "admit+fraction on tenants-alike: %s", err);
    if (st == FKV_OK) {
        CHECKF(r.done == w.n, "%llu of %zu requests done", (unsigned long long)r.done, w.n);
        fkv_sim_result_free(&r);
    }
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
}

static void options(void)
{
    char msg[512];
    CHECK(bench("--workload rag", msg, sizeof msg) == -1);
    CHECKF(strstr(msg, "--workload: 'rag'") && strstr(msg, "tenants-alike"), "%s", msg);
    CHECK(bench("--workload tenants --tenants 4", msg, sizeof msg) == 2 + FKV_EINVAL);
    CHECKF(strstr(msg, "--tenants 4") && strstr(msg, "6 tenants"), "%s", msg);
    CHECK(bench("--workload chat --tenant-assign roundrobin", msg, sizeof msg) == 2 + FKV_EINVAL);
    CHECKF(strstr(msg, "--tenant-assign") && strstr(msg, "chat"), "%s", msg);
    CHECK(bench("--workload tenants --tenant-weights 1,2", msg, sizeof msg) == 2 + FKV_EINVAL);
    CHECKF(strstr(msg, "--tenant-weights"), "%s", msg);
    CHECK(bench("--workload chat --requests 0", msg, sizeof msg) == 2 + FKV_EINVAL);
    CHECKF(strstr(msg, "--requests 0"), "%s", msg);
    /* agreeing options are fine */
    CHECKF(bench("--workload tenants --tenants 6 --tenant-weights 1,1,1,1,2,2", msg, sizeof msg) == 2, "%s", msg);
    CHECKF(bench("--workload tenants-alike", msg, sizeof msg) == 2, "%s", msg);
    CHECKF(bench("--workload chat", msg, sizeof msg) == 2, "%s", msg);
}

int main(void)
{
    tenants_mix();
    heavy_share();
    chat_sessions();
    options();
    sizing_apart();
    fairkv_step_fraction();
    own_short_with_reclaim();
    return check_done();
}
