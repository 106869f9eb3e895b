/* `fairkv bench` / `run` / `grid`: options, workload preparation, the
 * capacity rule, and the per-load loop over schemes. */
#ifndef FKV_SIM_BENCH_H
#define FKV_SIM_BENCH_H

#include <stdio.h>

#include "sim/report.h"
#include "sim/sim.h"

typedef struct fkv_bench_opts {
    const char *workload;   /* seed | tenants | tenants-alike | chat (docs/EVALUATION.md,
                             * "Fairness workloads"); a trace replaces it */
    const char *trace;      /* file, or NULL */
    int trace_format;       /* fkv_trace_format */
    size_t requests;        /* 0 = whole trace; seed: count to generate */
    int requests_set;       /* --requests given (a trace is read whole otherwise) */
    double load_lo, load_hi, load_step; /* load_lo < 0: native trace timing */
    double time_scale;      /* trace timing multiplier when no load is set */
    const char *schemes;    /* comma list or NULL = all available */
    const char *profile;
    double step_coeffs[7];  /* --step-coeffs c0,c1,c2[,c3[,c4,c5,c6]]: replace the profile's step cost */
    size_t n_step_coeffs;   /* 0: the profile as built in */
    const char *data_dir;   /* Vidur CSVs; NULL = embedded tables */
    double cap_frac;        /* capacity = cap_frac x peak demand ... */
    uint64_t cap_tokens;    /* ... unless given in tokens */
    double cap_gb;          /* ... or in GB */
    uint64_t seed;
    fkv_sim_config sim;
    const char *format;     /* text | json | csv */
    const char *output;     /* file or NULL = stdout */
    const char *plot_dir;
    const char *step_trace; /* --step-trace FILE: every scheme's steps (FKV_SIM_STEP_TRACE_HEADER); NULL = none */
    int quiet;
    /* tenants (sim.n_tenants, sim.tenant_weight): how requests get them */
    int tenant_assign;      /* fkv_tenant_assign */
    double heavy_frac;      /* heavy:F: tenant 1's fraction of the requests */
    uint32_t n_weights;     /* --tenant-weights given: this many */
    int tenants_set;        /* --tenants given */
    int tenant_assign_set;  /* --tenant-assign given */
    int tenants_from_workload; /* set by fkv_bench_prepare: the generator named the tenants */
    int fairness_table;     /* print the short fairness table (fkv_report_fairness_text) only */
    int clients_set;        /* --clients given (else tenant runs take the tenants as VTC's clients) */
    int frontier;           /* --frontier: per scheme, the smallest capacity within 5% of oracle-memory */
    int min_bound;          /* --min-bound: MIN's hit rate per tier at the run's sizes (min_bound.h) */
    double frontier_max;    /* --frontier-max: the search's top, a fraction of peak (1.0) */
    double frontier_tol;    /* --frontier-tol: the bisection's resolution, a fraction of peak (0.01) */
} fkv_bench_opts;

typedef enum fkv_tenant_assign {
    FKV_ASSIGN_CLIENT = 0,     /* tenant = 1 + client mod n (the trace's client or user) */
    FKV_ASSIGN_ROUNDROBIN = 1, /* tenant = 1 + request index mod n */
    FKV_ASSIGN_HEAVY = 2,      /* tenant 1 sends heavy_frac of the requests, spread evenly; the rest go
                                * round-robin over tenants 2..n */
    FKV_ASSIGN_SESSION = 3     /* tenant = 1 + XXH64(session key as 8 little-endian bytes, seed 0) mod n:
                                * the trace's recovered sessions (workload.h), each whole to one tenant */
} fkv_tenant_assign;

/* Sets every request's tenant (1..n_tenants) by the options' rule; with
 * n_tenants == 0 leaves them anonymous (0). */
void fkv_bench_assign_tenants(const fkv_bench_opts *o, fkv_workload *w);

void fkv_bench_opts_default(fkv_bench_opts *o);

/* Parses one option at argv[*i] (advancing *i past its value).  Returns 1
 * if consumed, 0 if unknown, -1 on a bad value (message on stderr). */
int fkv_bench_parse_opt(fkv_bench_opts *o, int argc, char **argv, int *i);
void fkv_bench_usage(FILE *f);
/* "c0,c1,c2[,c3[,c4,c5,c6]]" -> c[*n] (c holds 7); -1 with why[] naming the fault. */
int fkv_bench_parse_coeffs(const char *v, double *c, size_t *n, char *why, size_t whylen);

/* Workload at the options' first load, capacity rule applied.  *cap_rps
 * gets the saturation throughput; *capacity the tokens. */
typedef struct fkv_bench_ctx {
    fkv_bench_opts *o;
    fkv_profile profile;
    fkv_workload base;      /* sizes as loaded/generated, native arrivals */
    double cap_rps;
    double cap_tok_s;       /* the same run in prompt + output tokens/s (tenant runs: the fair shares' capacity) */
    uint64_t capacity_tokens;
    char capacity_rule[160];
    /* set by the capacity-fraction rule (0 with a fixed capacity): the
     * peak live demand, and the floor no capacity goes under */
    uint64_t peak_tokens, floor_tokens;
    FILE *step_trace;       /* non-NULL: fkv_bench_schemes traces each scheme's run there (the caller
                             * opens it and writes the header) */
} fkv_bench_ctx;

fkv_status fkv_bench_prepare(fkv_bench_ctx *c, fkv_bench_opts *o, char *err, size_t errlen);
/* Copies base to w with arrivals for `load` (< 0: native timing x time_scale). */
fkv_status fkv_bench_arrivals(fkv_bench_ctx *c, double load, fkv_workload *w, double *rate);
void fkv_bench_ctx_free(fkv_bench_ctx *c);

/* Runs the selected schemes on w; fills sums[*n] (caller frees results if
 * res != NULL).  Progress on stderr when asked. */
fkv_status fkv_bench_schemes(fkv_bench_ctx *c, const fkv_workload *w, fkv_scheme_summary *sums, fkv_sim_result *res,
                             size_t *n, size_t cap, char *err, size_t errlen);

/* MIN's prefix hit rate (min_bound.h) at the run's device size, device +
 * host, and device + host + remote, sized in 16-bit K/V bytes as the
 * simulator's cache sizes them, over pages of the schemes' smallest page:
 * rate[0..2], cumulative. */
fkv_status fkv_bench_min_bound(const fkv_bench_ctx *c, const fkv_workload *w, double rate[3]);

/* Plots (gnuplot; a missing gnuplot leaves the .dat/.gp files and a note). */
int fkv_plot_cdf(const char *dir, const fkv_sim_result *res, size_t n);
int fkv_plot_classes(const char *dir, const fkv_scheme_summary *s, size_t n);
/* Tenant runs: P99 TTFT per tenant and scheme (tenant_ttft.png); 0 without tenants. */
int fkv_plot_tenants(const char *dir, const fkv_scheme_summary *s, size_t n);
int fkv_plot_load(const char *dir, const double *loads, const fkv_scheme_summary *s, size_t n_loads, size_t n_schemes);
int fkv_plot_capacity(const char *dir, const double *fracs, const fkv_scheme_summary *s, size_t n_fracs, size_t n_schemes);
/* The frontier: one bar per scheme, its capacity fraction; a scheme not
 * within at the range's top (found[i] == 0) gets a bar at fracs[i] marked "> ". */
int fkv_plot_frontier(const char *dir, const char *const *names, const double *fracs, const int *found, size_t n);
int fkv_plot_grid(const char *dir, const double *alpha, const double *beta, const double *obj, size_t na, size_t nb);

#endif
