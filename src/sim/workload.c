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
        r->tag = fkv_rng_next(&rng); /* the token seed (no sources) */
        r->arrival_ns = 0;
    }
    return FKV_OK;
}

/* The seed's output fraction f ~ U[0.2, 0.5) of a turn or request of
 * `total` tokens, at least 1 and leaving at least 1 prompt token. */
static uint32_t seed_output(fkv_rng *rng, uint32_t total)
{
    double f = 0.2 + 0.3 * fkv_rng_unif(rng);
    uint32_t out = (uint32_t)lround(total * f);
    if (out < 1) out = 1;
    if (out >= total) out = total - 1;
    return out;
}

/* The seed's class and total length (60/30/10, uniform within the class). */
static uint32_t seed_total(fkv_rng *rng)
{
    double u = fkv_rng_unif(rng);
    if (u < 0.6) return fkv_rng_range(rng, 16, 127);
    if (u < 0.9) return fkv_rng_range(rng, 128, 512);
    return fkv_rng_range(rng, 513, 2048);
}

void fkv_tenants_params_default(fkv_tenants_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_light = 4;
    p->n_heavy = 2;
    p->heavy_frac = 0.05;
    p->heavy_prompt_lo = 4096;
    p->heavy_prompt_hi = 16384;
    p->heavy_out_lo = 16;
    p->heavy_out_hi = 282;
}

fkv_status fkv_workload_tenants(size_t n, uint64_t seed, uint32_t n_clients, const fkv_tenants_params *p,
                                fkv_workload *w)
{
    memset(w, 0, sizeof *w);
    if (!n || !n_clients || !p->n_light || p->n_light + p->n_heavy > 16 || !(p->heavy_frac >= 0) ||
        p->heavy_frac > 1 || (p->heavy_frac > 0 && !p->n_heavy) || p->heavy_prompt_lo < 1 ||
        p->heavy_prompt_lo > p->heavy_prompt_hi || p->heavy_out_lo < 1 || p->heavy_out_lo > p->heavy_out_hi)
        return FKV_EINVAL;
    w->reqs = calloc(n, sizeof *w->reqs);
    if (!w->reqs) return FKV_ENOMEM;
    w->n = n;
    w->block_tokens = 512;
    w->n_tenants = p->n_light + p->n_heavy;
    w->n_light = p->alike ? w->n_tenants : p->n_light;
    snprintf(w->name, sizeof w->name, "%s", p->alike ? "tenants-alike" : "tenants");
    fkv_rng rng, alike;
    fkv_rng_seed(&rng, seed ^ 0x7e4a47f1c0ffee01ULL);
    fkv_rng_seed(&alike, seed ^ 0x3c6ef372fe94f82bULL);
    for (size_t i = 0; i < n; i++) {
        fkv_req *r = &w->reqs[i];
        uint32_t total;
        if (fkv_rng_unif(&rng) < p->heavy_frac) {
            r->tenant = 1 + p->n_light + fkv_rng_range(&rng, 0, p->n_heavy - 1);
            r->prompt = fkv_rng_range(&rng, p->heavy_prompt_lo, p->heavy_prompt_hi);
            r->output = fkv_rng_range(&rng, p->heavy_out_lo, p->heavy_out_hi);
        } else {
            r->tenant = 1 + fkv_rng_range(&rng, 0, p->n_light - 1);
            /* the seed's short and medium classes in the seed's 60:30 ratio */
            total = fkv_rng_unif(&rng) < 2.0 / 3.0 ? fkv_rng_range(&rng, 16, 127) : fkv_rng_range(&rng, 128, 512);
            r->output = seed_output(&rng, total);
            r->prompt = total - r->output;
        }
        r->tag = fkv_rng_next(&rng); /* the token seed (no sources) */
        /* drawn for every request, so the variant changes tenants only */
        uint64_t t_alike = 1 + fkv_rng_range(&alike, 0, w->n_tenants - 1);
        if (p->alike) r->tenant = t_alike;
        r->id = i + 1;
        r->client = (r->tenant - 1) % n_clients;
    }
    return FKV_OK;
}

void fkv_chat_params_default(fkv_chat_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_tenants = 4;
    p->turns_mean = 2.0;
    p->turns_max = 32;
    p->think_mean_s = 60.0;
    p->session_rate = 1.0;
}

typedef struct chat_key {
    int64_t t;
    uint32_t s, k;
    size_t i;
} chat_key;

static int chat_cmp(const void *a, const void *b)
{
    const chat_key *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

fkv_status fkv_workload_chat(size_t n, uint64_t seed, uint32_t n_clients, const fkv_chat_params *p, fkv_workload *w)
{
    memset(w, 0, sizeof *w);
    if (!n || !n_clients || !p->n_tenants || p->n_tenants > 16 || !(p->turns_mean >= 1) || p->turns_max < 1 || p->turns_max > 64 ||
        !(p->think_mean_s >= 0) || !(p->session_rate > 0) || !isfinite(p->think_mean_s) ||
        !isfinite(p->turns_mean) || !isfinite(p->session_rate))
        return FKV_EINVAL;
    size_t cap = n + p->turns_max;
    fkv_req *tmp = calloc(cap, sizeof *tmp);
    chat_key *key = calloc(cap, sizeof *key);
    w->reqs = calloc(cap, sizeof *w->reqs);
    w->session = calloc(cap, sizeof *w->session);
    w->turn = calloc(cap, sizeof *w->turn);
    if (!tmp || !key || !w->reqs || !w->session || !w->turn) {
        free(tmp);
        free(key);
        fkv_workload_free(w);
        return FKV_ENOMEM;
    }
    w->block_tokens = 512;
    w->n_tenants = w->n_light = p->n_tenants;
    snprintf(w->name, sizeof w->name, "chat");
    fkv_rng rng, clock;
    fkv_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ULL);
    fkv_rng_seed(&clock, seed ^ 0xc2b2ae3d27d4eb4fULL);
    /* P(T = k) = (1 - q)^(k-1) q with mean 1/q = turns_mean */
    double q = 1.0 / p->turns_mean;
    size_t m = 0;
    double start = 0; /* s */
    uint32_t s = 0;
    while (m < n) {
        uint64_t tenant = 1 + fkv_rng_range(&rng, 0, p->n_tenants - 1);
        uint64_t token_seed = fkv_rng_next(&rng);
        uint32_t total = seed_total(&rng);
        double u = fkv_rng_unif(&rng);
        uint32_t turns = 1;
        if (q < 1) {
            double extra = floor(log1p(-u) / log1p(-q));
            turns = extra >= p->turns_max ? p->turns_max : 1 + (uint32_t)extra;
        }
        if (turns > p->turns_max) turns = p->turns_max;
        if (turns > total / 2) turns = total / 2;
        /* chunk sizes: 2 each, the rest in proportion to U[0.5, 1.5) weights */
        double wt[64], wsum = 0; /* turns <= turns_max <= 64 */
        for (uint32_t k = 0; k < turns; k++) wsum += wt[k] = 0.5 + fkv_rng_unif(&rng);
        uint32_t rest = total - 2 * turns, used = 0, hist = 0;
        start += fkv_rng_exp(&clock) / p->session_rate;
        double t = start;
        for (uint32_t k = 0; k < turns; k++) {
            uint32_t c = 2 + (k + 1 == turns ? rest - used : (uint32_t)floor(rest * wt[k] / wsum));
            if (k + 1 < turns) used += c - 2;
            uint32_t out = seed_output(&rng, c);
            fkv_req *r = &tmp[m];
            if (k) t += fkv_rng_exp(&clock) * p->think_mean_s;
            int64_t ns = (int64_t)llround(t * 1e9);
            if (k && ns <= key[m - 1].t) ns = key[m - 1].t + 1; /* strictly after the previous turn */
            r->tenant = tenant;
            r->client = (tenant - 1) % n_clients;
            r->tag = token_seed;
            r->prompt = hist + (c - out);
            r->output = out;
            r->arrival_ns = ns;
            key[m] = (chat_key){ns, s, k, m};
            hist += c;
            m++;
        }
        s++;
    }
    qsort(key, m, sizeof *key, chat_cmp);
    for (size_t i = 0; i < m; i++) {
        w->reqs[i] = tmp[key[i].i];
        w->reqs[i].id = i + 1;
        w->session[i] = key[i].s;
        w->turn[i] = key[i].k;
    }
    w->n = m;
    w->n_sessions = s;
    free(tmp);
    free(key);
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

fkv_sim_tokens fkv_workload_tokens(const fkv_workload *w, uint32_t block_tokens)
{
    fkv_sim_tokens t = {w->src, w->n_src, block_tokens, 0};
    return t;
}

void fkv_workload_free(fkv_workload *w)
{
    free(w->reqs);
    free(w->src);
    free(w->blocks);
    free(w->session);
    free(w->turn);
    free(w->session_key);
    memset(w, 0, sizeof *w);
}
