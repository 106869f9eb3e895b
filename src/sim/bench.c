/* Workload preparation, the capacity rule and the runs of the bench tools (their options: bench_opts.c).
 *
 * Load: offered load = arrival rate / saturation throughput, where the
 * saturation throughput (requests/s) is measured by simulating the same
 * requests all arriving at once with unlimited KV memory on the same cost
 * profile and step budget, in the plain scheduler order (FCFS, no step
 * share, step-time bound or within-share-first: those are mechanisms under
 * comparison, and the load must not move when a run turns one on).  Load
 * 1.0 offers exactly what the server can finish.
 *
 * Capacity rule (memory pressure), fixed before any policy is compared and
 * the same for every scheme: capacity = cap_frac (default 0.75) x the peak
 * live KV demand, i.e. the largest number of tokens held at once by open
 * requests when memory is unlimited, at the highest load of the run; raised
 * if needed to the largest single request plus one 256-token chunk, so that
 * every request fits alone; and never above the GPUs' memory left after the
 * fp16 weights (80 GB per GPU x tp - 2 bytes x parameters).  0.75 makes memory short during bursts, not all
 * the time: at 0.5 the seed workload's effective throughput falls below its
 * arrival rate and every scheme's latency is set by an ever-growing queue.
 */
#include "sim/bench.h"
#include "sim/frontier.h"
#include "sim/min_bound.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

void fkv_bench_opts_default(fkv_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->workload = "seed";
    o->trace_format = FKV_TRACE_AUTO;
    o->requests = 2000;
    o->load_lo = o->load_hi = 0.8;
    o->load_step = 0;
    o->time_scale = 1.0;
    o->profile = "a100-llama2-7b";
    o->cap_frac = 0.75;
    o->frontier_tol = 0.01;
    o->frontier_max = 1.0;
    o->seed = 42;
    fkv_sim_config_default(&o->sim);
    o->sim.sched.n_clients = 4;
    o->format = "text";
}

/* The generator workloads at their documented parameters; chat's sessions
 * start at session_rate per second. */
static fkv_status generate(const fkv_bench_opts *o, size_t n, double session_rate, fkv_workload *w)
{
    if (!strcmp(o->workload, "chat")) {
        fkv_chat_params p;
        fkv_chat_params_default(&p);
        p.session_rate = session_rate;
        return fkv_workload_chat(n, o->seed, o->sim.sched.n_clients, &p, w);
    }
    fkv_tenants_params p;
    fkv_tenants_params_default(&p);
    p.alike = !strcmp(o->workload, "tenants-alike");
    return fkv_workload_tenants(n, o->seed, o->sim.sched.n_clients, &p, w);
}

fkv_status fkv_bench_prepare(fkv_bench_ctx *c, fkv_bench_opts *o, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    fkv_status st;
    if (!o->data_dir) o->data_dir = getenv("FKV_DATA_DIR");
    if (!o->data_dir && access("../shared/data/vidur", R_OK) == 0) o->data_dir = "../shared/data";
    if ((st = fkv_profile_get(o->profile, o->data_dir, &c->profile, err, errlen)) != FKV_OK) return st;
    if (o->n_step_coeffs &&
        (st = fkv_profile_set_coeffs(&c->profile, o->step_coeffs, o->n_step_coeffs, err, errlen)) != FKV_OK)
        return st;
    /* stderr only: the tables are equal either way (tests/test_sim_data.c) */
    if (!o->quiet)
        fprintf(stderr, "profile %s: linear-op table %s\n", c->profile.name,
                c->profile.from_data                 ? "parsed from the Vidur CSV"
                : o->n_step_coeffs                   ? "replaced by --step-coeffs"
                : !strncmp(c->profile.name, "cpu-", 4) ? "measured on the engine (fairkv bench --calibrate)"
                                                       : "embedded (derived from the Vidur CSV)");
    o->sim.profile = &c->profile;
    if (o->sim.tier_admission != FKV_TIER_ADMIT_OFF && !o->sim.host_demote && !o->sim.remote_capacity_bytes) {
        snprintf(err, errlen, "--tier-admission %s: no tier below the device to admit to (give --host-demote "
                 "with --host-x or --host-gb, or --remote-gb)", fkv_tier_admission_name(o->sim.tier_admission));
        return FKV_EINVAL;
    }
    if (o->sim.host_policy > FKV_HOST_LRU && !o->sim.host_demote && !o->sim.remote_capacity_bytes) {
        snprintf(err, errlen, "--host-policy %s: no tier below the device to order (give --host-demote "
                 "with --host-x or --host-gb, or --remote-gb)", fkv_host_policy_name(o->sim.host_policy));
        return FKV_EINVAL;
    }
    if (o->trace) {
        /* a trace is read whole unless --requests was given */
        size_t limit = o->requests_set ? o->requests : 0;
        st = fkv_trace_load(o->trace, (fkv_trace_format)o->trace_format, limit, o->sim.sched.n_clients, &c->base, err,
                            errlen);
        if (st) return st;
    } else if (strcmp(o->workload, "seed")) {
        if (o->requests_set && !o->requests) {
            snprintf(err, errlen, "--workload %s: --requests 0 (a generator needs a count)", o->workload);
            return FKV_EINVAL;
        }
        if ((st = generate(o, o->requests ? o->requests : 2000, 1.0, &c->base)) != FKV_OK) {
            snprintf(err, errlen, "%s workload: %s", o->workload, fkv_strerror(st));
            return st;
        }
        /* the generator names the tenants: the options may only agree */
        if (o->tenant_assign_set) {
            snprintf(err, errlen, "--tenant-assign: --workload %s gives every request its tenant", o->workload);
            return FKV_EINVAL;
        }
        if (o->tenants_set && o->sim.n_tenants != c->base.n_tenants) {
            snprintf(err, errlen, "--tenants %u: --workload %s has %u tenants", o->sim.n_tenants, o->workload,
                     c->base.n_tenants);
            return FKV_EINVAL;
        }
        o->sim.n_tenants = c->base.n_tenants;
        o->tenants_from_workload = 1;
    } else {
        if ((st = fkv_workload_seed(o->requests ? o->requests : 2000, o->seed, o->sim.sched.n_clients, &c->base)) != FKV_OK) {
            snprintf(err, errlen, "seed workload: %s", fkv_strerror(st));
            return st;
        }
    }
    c->base.block_tokens = o->sim.block_tokens;
    if (o->n_weights && o->n_weights != o->sim.n_tenants) {
        snprintf(err, errlen, "--tenant-weights gives %u weights for --tenants %u", o->n_weights, o->sim.n_tenants);
        return FKV_EINVAL;
    }
    if (o->tenant_assign == FKV_ASSIGN_HEAVY && o->sim.n_tenants < 2 && o->heavy_frac < 1) {
        snprintf(err, errlen, "--tenant-assign heavy:%g needs --tenants 2 or more (%u given)", o->heavy_frac,
                 o->sim.n_tenants);
        return FKV_EINVAL;
    }
    if (o->tenant_assign == FKV_ASSIGN_SESSION && !c->base.session_key) {
        /* hashing made-up sessions would hide that the trace names no user */
        const char *f = c->base.name;
        if (!o->trace)
            snprintf(err, errlen, "--tenant-assign session: the %s workload has no sessions; "
                                  "use roundrobin or heavy:F", o->workload);
        else
            snprintf(err, errlen, "--tenant-assign session: %s: %s; use roundrobin or heavy:F", o->trace,
                     !strcmp(f, "azure")   ? "an Azure trace has no session signal (no user, conversation or prefix field)"
                     : !strcmp(f, "plain") ? "no client column, so no session signal"
                                           : "a request has no hash_ids, so its session is unknown");
        return FKV_EINVAL;
    }
    if (!o->tenants_from_workload) fkv_bench_assign_tenants(o, &c->base);
    if (o->sim.n_tenants && !o->clients_set) {
        /* VTC's clients are the tenants: fair admission is fairness among
         * the tenants the cache and the reports see */
        o->sim.sched.n_clients = o->sim.n_tenants;
        for (size_t i = 0; i < c->base.n; i++) c->base.reqs[i].client = c->base.reqs[i].tenant - 1;
    }
    if (o->load_lo > 0 || o->trace == NULL) {
        if ((st = fkv_sim_capacity(&c->base, &o->sim, &c->cap_rps, &c->cap_tok_s, err, errlen)) != FKV_OK) return st;
    } else if (o->sim.n_tenants) {
        /* trace timing: the shares still need the saturation throughput */
        double rps;
        if ((st = fkv_sim_capacity(&c->base, &o->sim, &rps, &c->cap_tok_s, err, errlen)) != FKV_OK) return st;
    }
    uint64_t tb = fkv_model_token_bytes(c->profile.model);
    if (o->cap_tokens) {
        c->capacity_tokens = o->cap_tokens;
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "fixed %llu tokens", (unsigned long long)o->cap_tokens);
    } else if (o->cap_gb > 0) {
        c->capacity_tokens = (uint64_t)(o->cap_gb * 1e9 / (double)tb);
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "fixed %.2f GB", o->cap_gb);
    } else {
        /* the capacity rule: a fraction of the peak demand at the highest load */
        fkv_workload w;
        double rate;
        double ref = o->load_lo > 0 ? o->load_hi : -1;
        if ((st = fkv_bench_arrivals(c, ref, &w, &rate)) != FKV_OK) return st;
        uint64_t peak = 0;
        st = fkv_sim_peak_demand(&w, &o->sim, &peak, err, errlen);
        fkv_workload_free(&w);
        if (st) return st;
        c->peak_tokens = peak;
        c->capacity_tokens = (uint64_t)ceil(o->cap_frac * (double)peak);
        /* never more than the GPUs hold after the fp16 weights */
        const fkv_model_geom *mg = c->profile.model;
        double hbm = c->profile.gpu_mem_bytes * c->profile.tp - 2.0 * mg->params;
        uint64_t hbm_tokens = hbm > 0 ? (uint64_t)(hbm / (double)tb) : 0;
        int capped = 0;
        if (hbm_tokens && c->capacity_tokens > hbm_tokens) {
            c->capacity_tokens = hbm_tokens;
            capped = 1;
        }
        uint32_t biggest = 0;
        for (size_t i = 0; i < c->base.n; i++)
            if (c->base.reqs[i].prompt + c->base.reqs[i].output > biggest)
                biggest = c->base.reqs[i].prompt + c->base.reqs[i].output;
        int raised = 0;
        c->floor_tokens = (uint64_t)biggest + 256;
        if (c->capacity_tokens < (uint64_t)biggest + 256) {
            c->capacity_tokens = (uint64_t)biggest + 256;
            raised = 1;
        }
        snprintf(c->capacity_rule, sizeof c->capacity_rule, "%.2f x peak live demand %llu tokens%s%s", o->cap_frac,
                 (unsigned long long)peak, capped ? ", capped at the HBM left after the weights" : "",
                 raised ? ", raised to the largest request" : "");
    }
    return FKV_OK;
}

void fkv_bench_assign_tenants(const fkv_bench_opts *o, fkv_workload *w)
{
    uint32_t n = o->sim.n_tenants, rr = 0;
    double acc = 0;
    for (size_t i = 0; i < w->n; i++) {
        fkv_req *r = &w->reqs[i];
        if (!n) {
            r->tenant = 0;
            continue;
        }
        switch (o->tenant_assign) {
        case FKV_ASSIGN_ROUNDROBIN: r->tenant = 1 + i % n; break;
        case FKV_ASSIGN_HEAVY:
            /* error diffusion: exactly round(F x i) of the first i requests
             * are tenant 1's, spread evenly over the trace */
            acc += o->heavy_frac;
            if (acc >= 1 - 1e-12 || n == 1) {
                acc -= 1;
                r->tenant = 1;
            } else {
                r->tenant = 2 + rr++ % (n - 1);
            }
            break;
        case FKV_ASSIGN_SESSION: {
            if (!w->session_key) { /* fkv_bench_prepare refuses this first */
                r->tenant = 0;
                break;
            }
            /* the key's bytes fixed little-endian: the same tenants on every host */
            uint64_t k = w->session_key[w->session[i]];
            unsigned char b[8];
            for (int j = 0; j < 8; j++) b[j] = (unsigned char)(k >> (8 * j));
            r->tenant = 1 + XXH64(b, sizeof b, 0) % n;
            break;
        }
        default: r->tenant = 1 + r->client % n; break;
        }
    }
}

fkv_status fkv_bench_arrivals(fkv_bench_ctx *c, double load, fkv_workload *w, double *rate)
{
    double span = (double)fkv_workload_span(&c->base) * 1e-9;
    if (c->base.session && !c->o->trace && load > 0) { /* a trace's sessions are recovered, not generated */
        /* chat: think times are fixed, so the load sets how often sessions
         * start: the same sessions (their sizes' stream does not depend on
         * the rate), generated again at the request rate load x capacity */
        double target = load * c->cap_rps;
        double turns = (double)c->base.n / (double)c->base.n_sessions;
        fkv_status st = generate(c->o, c->base.n, target / turns, w);
        if (st) return st;
        w->block_tokens = c->base.block_tokens;
        *rate = target;
        return FKV_OK;
    }
    *w = c->base;
    w->reqs = malloc(c->base.n * sizeof *w->reqs);
    w->src = c->base.src ? malloc(c->base.n_src * sizeof *w->src) : NULL;
    w->blocks = NULL; /* block pointers still point into base */
    w->n_blocks = w->cap_blocks = 0;
    w->session = w->turn = NULL; /* base's */
    w->session_key = NULL;
    if (!w->reqs || (c->base.src && !w->src)) {
        free(w->reqs);
        free(w->src);
        w->reqs = NULL;
        w->src = NULL;
        return FKV_ENOMEM;
    }
    memcpy(w->reqs, c->base.reqs, c->base.n * sizeof *w->reqs);
    if (w->src) memcpy(w->src, c->base.src, c->base.n_src * sizeof *w->src);
    if (load > 0) {
        double target = load * c->cap_rps;
        if (!c->o->trace) {
            fkv_workload_poisson(w, target, c->o->seed);
        } else if (span > 0 && w->n > 1) {
            double native = (double)(w->n - 1) / span;
            fkv_workload_scale_time(w, native / target);
        }
        *rate = target;
    } else {
        fkv_workload_scale_time(w, c->o->time_scale);
        *rate = span > 0 ? (double)(w->n - 1) / (span * c->o->time_scale) : 0;
    }
    return FKV_OK;
}

void fkv_bench_ctx_free(fkv_bench_ctx *c)
{
    fkv_workload_free(&c->base);
    fkv_profile_free(&c->profile);
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

fkv_status fkv_bench_schemes(fkv_bench_ctx *c, const fkv_workload *w, fkv_scheme_summary *sums, fkv_sim_result *res,
                             size_t *n, size_t cap, char *err, size_t errlen)
{
    size_t ns;
    const fkv_scheme *all = fkv_scheme_list(&ns);
    const fkv_scheme *sel[64];
    size_t nsel = 0;
    if (c->o->schemes) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", c->o->schemes);
        for (char *t = strtok(buf, ","); t && nsel < 64; t = strtok(NULL, ",")) {
            const fkv_scheme *s = fkv_scheme_find(t);
            if (!s) {
                snprintf(err, errlen, "unknown scheme '%s' (see fairkv bench --help)", t);
                return FKV_ENOENT;
            }
            if (!fkv_scheme_available(s)) {
                snprintf(err, errlen, "scheme '%s' needs policy '%s', which this library does not register", t,
                         s->policy);
                return FKV_ENOENT;
            }
            sel[nsel++] = s;
        }
    } else {
        /* isolated is the single-tenant run itself without tenants */
        for (size_t i = 0; i < ns && nsel < 64; i++)
            if (fkv_scheme_available(&all[i]) && (c->o->sim.n_tenants || all[i].mode != FKV_SCHEME_ISOLATED))
                sel[nsel++] = &all[i];
    }
    if (nsel > cap) nsel = cap;
    fkv_sim_config cfg = c->o->sim;
    cfg.capacity_tokens = c->capacity_tokens;
    cfg.progress = !c->o->quiet;
    /* slowdown's denominator, once per workload: in tenant runs (their
     * fairness lines); the plain tables do not print it */
    int64_t *idle = NULL;
    if (cfg.n_tenants) {
        if (!(idle = malloc(w->n * sizeof *idle))) return FKV_ENOMEM;
        fkv_status st = fkv_sim_idle_latency(w, &cfg, idle, err, errlen);
        if (st) {
            free(idle);
            return st;
        }
    }
    for (size_t i = 0; i < nsel; i++) {
        fkv_sim_result r;
        double t0 = wall();
        cfg.step_trace = c->step_trace;
        fkv_status st = fkv_sim_run(w, sel[i], &cfg, &r, err, errlen);
        cfg.step_trace = NULL;
        if (st) {
            free(idle);
            return st;
        }
        double dt = wall() - t0;
        fkv_summarize(&r, &sums[i]);
        fkv_accuracy_of(sel[i], &cfg, &sums[i].accuracy);
        if (idle) fkv_summary_slowdown(&sums[i], &r, idle);
        if (cfg.n_tenants) fkv_summary_shares(&sums[i], c->cap_tok_s);
        if (cfg.n_tenants && sel[i]->mode != FKV_SCHEME_ISOLATED) {
            /* the isolation check's reference: the same scheme on a static
             * 1/n partition of the cache */
            fkv_sim_result p;
            if ((st = fkv_sim_partition(w, sel[i], &cfg, &p, err, errlen)) != FKV_OK) {
                fkv_sim_result_free(&r);
                free(idle);
                return st;
            }
            fkv_summary_partition(&sums[i], &p);
            fkv_sim_result_free(&p);
        }
        sums[i].sim_wall_s = dt;
        if (!c->o->quiet)
            fprintf(stderr, "  %-13s %zu requests simulated in %.2f s\n", sel[i]->name, w->n, dt);
        if (res) res[i] = r;
        else fkv_sim_result_free(&r);
    }
    free(idle);
    *n = nsel;
    fkv_summaries_fairness(sums, nsel);
    fkv_summaries_isolated(sums, nsel);
    return FKV_OK;
}

fkv_status fkv_bench_min_bound(const fkv_bench_ctx *c, const fkv_workload *w, double rate[3])
{
    size_t ns;
    const fkv_scheme *all = fkv_scheme_list(&ns);
    uint32_t pt = 0;
    for (size_t i = 0; i < ns; i++)
        if (!pt || all[i].page_tokens < pt) pt = all[i].page_tokens;
    const fkv_sim_config *sim = &c->o->sim;
    uint64_t tb = fkv_model_token_bytes(c->profile.model), page_bytes = (uint64_t)pt * tb;
    /* the sizes as make_cache (sim.c) gives them to the cache */
    uint64_t dev = (c->capacity_tokens + pt - 1) / pt;
    uint64_t host_bytes = fkv_sim_host_bytes(sim, dev * page_bytes);
    uint64_t caps[3] = {dev, dev + host_bytes / page_bytes, dev + host_bytes / page_bytes + sim->remote_capacity_bytes / page_bytes};
    uint64_t hits[3], prompts;
    fkv_status st = fkv_min_bound(w, pt, sim->block_tokens, caps, 3, hits, &prompts);
    if (st) return st;
    for (int i = 0; i < 3; i++) rate[i] = prompts ? (double)hits[i] / (double)prompts : 0;
    return FKV_OK;
}
