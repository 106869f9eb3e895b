/* Seed workload generator and workload helpers (see workload.h). */
#include "sim/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

fkv_class fkv_sim_class(uint32_t total)
{
    if (total < 128) return FKV_CLASS_SHORT;
    if (total <= 512) return FKV_CLASS_MEDIUM;
    return FKV_CLASS_LONG;
}

fkv_status fkv_workload_seed(size_t n, uint64_t seed, uint32_t n_clients, fkv_workload *w)
{
    memset(w, 0, sizeof *w);
    if (!n || !n_clients) return FKV_EINVAL;
    w->reqs = calloc(n, sizeof *w->reqs);
    if (!w->reqs) return FKV_ENOMEM;
    w->n = n;
    w->block_tokens = 512;
    snprintf(w->name, sizeof w->name, "seed");
    fkv_rng rng;
    fkv_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        fkv_req *r = &w->reqs[i];
        double u = fkv_rng_unif(&rng);
        uint32_t total;
        if (u < 0.6) total = fkv_rng_range(&rng, 16, 127);
        else if (u < 0.9) total = fkv_rng_range(&rng, 128, 512);
        else total = fkv_rng_range(&rng, 513, 2048);
        double f = 0.2 + 0.3 * fkv_rng_unif(&rng);
        uint32_t out = (uint32_t)lround(total * f);
        if (out < 1) out = 1;
        if (out >= total) out = total - 1;
        r->id = i + 1;
        r->prompt = total - out;
        r->output = out;
        r->client = fkv_rng_range(&rng, 0, n_clients - 1);
        r->token_seed = fkv_rng_next(&rng);
        r->arrival_ns = 0;
    }
    return FKV_OK;
}

void fkv_workload_poisson(fkv_workload *w, double rate, uint64_t seed)
{
    fkv_rng rng;
    fkv_rng_seed(&rng, seed ^ 0xa5a5a5a5deadbeefULL);
    double t = 0; /* s */
    for (size_t i = 0; i < w->n; i++) {
        t += fkv_rng_exp(&rng) / rate;
        w->reqs[i].arrival_ns = (int64_t)llround(t * 1e9);
    }
}

void fkv_workload_scale_time(fkv_workload *w, double factor)
{
    if (!w->n) return;
    int64_t t0 = w->reqs[0].arrival_ns;
    for (size_t i = 0; i < w->n; i++) {
        double t = (double)(w->reqs[i].arrival_ns - t0) * factor;
        if (t > 4e18) t = 4e18; /* 126 years: keeps int64 ns */
        w->reqs[i].arrival_ns = t0 + (int64_t)llround(t);
    }
}

int64_t fkv_workload_span(const fkv_workload *w)
{
    return w->n ? w->reqs[w->n - 1].arrival_ns - w->reqs[0].arrival_ns : 0;
}

void fkv_workload_free(fkv_workload *w)
{
    free(w->reqs);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}
