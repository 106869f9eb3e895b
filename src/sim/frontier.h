/* The memory frontier (`fairkv bench --frontier`): per scheme, the smallest
 * KV capacity, as a fraction of the peak live demand, at which its latency
 * stays within 5% of unlimited memory (oracle-memory).  It answers how much
 * GPU memory a scheme needs for the latency that more memory cannot beat.
 *
 * Latency is taken to fall as capacity grows (the bisection's assumption);
 * where it does not, the answer is one capacity that passes, with a smaller
 * one that passes possibly missed. */
#ifndef FKV_SIM_FRONTIER_H
#define FKV_SIM_FRONTIER_H

#include <stdio.h>

#include "sim/bench.h"
#include "sim/report.h"
#include "sim/sim.h"

#define FKV_FRONTIER_SLACK 0.05 /* "within 5%" */
#define FKV_FRONTIER_LO 0.05    /* the search's range, fractions of peak demand */
#define FKV_FRONTIER_HI 1.0     /* default top; --frontier-max raises it */
#define FKV_FRONTIER_MAX_PROBES 64

/* Smallest x in [lo, hi] with ok(x) true, to within tol, assuming ok is
 * monotone (false below some point, true from it on).  ok(hi) is asked
 * first: if false, returns NAN (nothing in range passes); then ok(lo): if
 * true, returns lo.  Otherwise halves [lo, hi] until it is at most tol wide
 * and returns its upper end, a point where ok held.  *probes (may be NULL)
 * gets the number of calls of ok. */
double fkv_frontier_bisect(int (*ok)(double x, void *ctx), void *ctx, double lo, double hi, double tol, int *probes);

/* 1 if s keeps mean, P99 and short-class P99 end-to-end latency each at
 * most (1 + slack) x the oracle's, and finishes as many requests (a
 * rejected request has no latency to be slow in).  A class the oracle has
 * no request of is not compared. */
int fkv_frontier_within(const fkv_scheme_summary *s, const fkv_scheme_summary *oracle, double slack);

/* KV tokens for fraction f of peak: ceil(f x peak), raised to floor_tokens
 * (the capacity rule's floor: the largest request plus one 256-token
 * chunk, so that every request fits alone).  Not capped at the HBM: a
 * frontier above it says the GPU cannot hold what the latency needs. */
uint64_t fkv_frontier_capacity(uint64_t peak, uint64_t floor_tokens, double f);

typedef struct fkv_frontier_probe {
    double frac;
    uint64_t capacity_tokens;
    int within;
    double mean_ratio, p99_ratio, short_p99_ratio; /* to the oracle's */
} fkv_frontier_probe;

typedef struct fkv_frontier_point {
    char scheme[32];
    int found;               /* 0: not within at the top of the range (report "> top") */
    double capacity_frac;    /* found: the frontier; else the top */
    uint64_t capacity_tokens;
    int floor_binds;         /* the capacity is the floor, not capacity_frac x peak */
    fkv_scheme_summary at;   /* the run at capacity_frac (the failing one at HI when not found) */
    int n_probes;
    fkv_frontier_probe probes[FKV_FRONTIER_MAX_PROBES];
} fkv_frontier_point;

/* One scheme's frontier on w against the oracle's summary, with c's peak
 * demand and floor, bisected to tol (a fraction of peak). */
fkv_status fkv_frontier_scheme(fkv_bench_ctx *c, const fkv_workload *w, const fkv_scheme *sc,
                               const fkv_scheme_summary *oracle, double tol, double top, fkv_frontier_point *out,
                               char *err,
                               size_t errlen);

/* The oracle-memory run on w: the reference every frontier is measured against. */
fkv_status fkv_frontier_oracle(fkv_bench_ctx *c, const fkv_workload *w, fkv_scheme_summary *oracle, char *err,
                               size_t errlen);

typedef struct fkv_frontier_meta {
    const char *workload, *profile;
    double load;             /* < 0: native trace timing */
    size_t requests;
    uint64_t peak_tokens, floor_tokens;
    uint64_t token_bytes;    /* KV bytes of one token (the GB column) */
    double tol, slack;
    double top;              /* the range's top, a fraction of peak (0 = FKV_FRONTIER_HI) */
} fkv_frontier_meta;

void fkv_frontier_text(FILE *f, const fkv_frontier_meta *m, const fkv_scheme_summary *oracle,
                       const fkv_frontier_point *p, size_t n);
void fkv_frontier_json(FILE *f, const fkv_frontier_meta *m, const fkv_scheme_summary *oracle,
                       const fkv_frontier_point *p, size_t n);

#endif
