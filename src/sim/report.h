/* Summaries of simulation results and their text / JSON / CSV forms.
 *
 * Percentiles are nearest-rank (the smallest value with at least p% of the
 * sample at or below it); std is the population standard deviation (the
 * seed's fairness metric).  Fairness gain of a scheme = std(e2e, lru) /
 * std(e2e, scheme): above 1 means latencies are more even than under LRU.
 *
 * Share attainment (tenant runs; fkv_summary_shares):
 *  - the share window runs from the workload's first arrival to its last
 *    (the same for every scheme and tenant; a workload arriving all at
 *    once has none: the figures are then "-");
 *  - offered load = the prompt + output tokens of all its requests / the
 *    window;
 *  - served = the tokens served by the window's end (the first step start
 *    at or after it) / the window: a request's prompt once its first token
 *    is out (while in prefill, the part prefilled), plus its output tokens
 *    emitted;
 *  - capacity = the saturation throughput in prompt + output tokens/s
 *    (fkv_sim_capacity: every request at time 0, unlimited memory, no
 *    prefix cache; the run behind "load", so at a load below 1 the offered
 *    loads sum to less), or the scheme's own served total when larger (the
 *    saturation run's average includes its drain, a few long requests
 *    decoding alone, so a run kept saturated may serve more: what it
 *    served is then the measured capacity, and the shares divide it);
 *  - fair share = weighted max-min water-filling of the capacity over the
 *    offered loads (src/core/shares.h rule 1, spare capacity kept: a
 *    tenant asking less than its share is owed what it asks);
 *  - within_share = offered <= fair share; attained = served / min(offered,
 *    fair share) (above 1: served more than owed, e.g. thanks to prefix
 *    hits, which the capacity run does not have).
 */
#ifndef FKV_SIM_REPORT_H
#define FKV_SIM_REPORT_H

#include <stdio.h>

#include "sim/accuracy.h"
#include "sim/report_fields.h"
#include "sim/sim.h"

typedef struct fkv_lat_stats {
    size_t n;
    double mean_ms, p50_ms, p99_ms, std_ms, max_ms;
    struct {
        size_t n;
        double mean_ms, p50_ms, p99_ms;
    } by_class[FKV_N_CLASSES];
} fkv_lat_stats;

typedef struct fkv_scheme_summary {
    char name[32];
    FKV_RESULT_FIELDS(FKV_RF_SUMMARY_FIELD) /* the figures: result_fields.h */
    /* prefix_hit_rate by the tier each token was found in (they sum to it);
     * printed only when a host or remote tier was configured (tiered) */
    double tier_hit_rate[FKV_N_TIERS]; /* FKV_TIER_DEVICE, _HOST, _REMOTE (report_fields.h) */
    double sim_wall_s;       /* not printed in byte-compared outputs */
    struct fkv_tenant_summary {
        FKV_TENANT_FIELDS(FKV_TF_FIELD) /* the figures: report_fields.h */
    } tenants[FKV_SIM_MAX_TENANTS + 1]; /* [t] for tenant t = 1..n_tenants */
    double tenant_spread;    /* largest / smallest tenant mean e2e (1 = even); 0 without tenants */
    /* slowdown (fkv_summary_slowdown): 0 = not computed */
    double slowdown_mean, slowdown_p99;
    double jain_slowdown, max_min_slowdown; /* over the tenants' mean slowdowns */
    /* what the fair shares divide (fkv_summary_shares), and the saturation
     * throughput it is at least; 0 = not computed */
    double share_capacity_tok_s, share_saturation_tok_s;
    /* the K/V precision mix the row can reach and its accuracy on
     * stories260K (accuracy.h; fkv_accuracy_of): fkv_summarize leaves it
     * "not measured", fkv_bench_schemes looks it up */
    fkv_accuracy accuracy;
} fkv_scheme_summary;

/* The run's description, printed with every report. */
typedef struct fkv_report_meta {
    const char *workload;    /* "seed", "azure", ... */
    double load;             /* offered load; < 0 = native trace timing */
    size_t requests;
    const char *profile;
    uint64_t capacity_tokens;
    double capacity_gb;
    const char *capacity_rule;
    double arrival_rate;     /* requests/s */
    double capacity_rps;     /* saturation throughput, requests/s */
    uint64_t seed;
    const char *admission, *batching;
    uint32_t n_tenants;      /* 0: no tenants (nothing printed about them) */
    const char *tenants;     /* e.g. "4 tenants, heavy:0.7, weights 1,1,1,1" */
    const double *min_bound; /* NULL, or MIN's hit rate: device, device + host, all tiers (fkv_bench_min_bound) */
} fkv_report_meta;

void fkv_lat_stats_compute(const int64_t *ns, const uint8_t *cls, size_t n, fkv_lat_stats *out);
void fkv_summarize(const fkv_sim_result *r, fkv_scheme_summary *out);
/* Slowdown of every finished request: its e2e over idle_e2e[i], its e2e
 * alone on an idle system (fkv_sim_idle_latency); the mean and P99, per
 * tenant, and Jain's index and the max/min ratio over the tenants' means
 * (src/sim/fairness.h). */
void fkv_summary_slowdown(fkv_scheme_summary *o, const fkv_sim_result *r, const int64_t *idle_e2e);
/* Sets fairness_gain and throughput_rel_lru of every summary from the one
 * named "lru", if any. */
void fkv_summaries_fairness(fkv_scheme_summary *s, size_t n);
/* Copies the isolated scheme's per-tenant P99s (if s holds one) into every
 * summary, so each row says how far it is from the tenant alone. */
void fkv_summaries_isolated(fkv_scheme_summary *s, size_t n);
/* Each tenant's fair share of capacity_tok_s (the saturation throughput,
 * fkv_sim_capacity), whether its offered load is within it, and the
 * fraction attained (the rules above); capacity_tok_s <= 0: not computed. */
void fkv_summary_shares(fkv_scheme_summary *o, double capacity_tok_s);
/* The partition's per-tenant prefix hit rates (fkv_sim_partition) into o. */
void fkv_summary_partition(fkv_scheme_summary *o, const fkv_sim_result *partition);

void fkv_report_text(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n);
void fkv_report_json(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n);
/* The short fairness table of `fairkv run`: per scheme the worst light
 * and heavy tenant's first-token P99, the light one's ratio to its
 * isolated P99, Jain's index and max/min of tenant slowdowns, the service
 * difference and throughput relative to lru. */
void fkv_report_fairness_text(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n);
/* A row's accuracy (accuracy.h) for tables of their own (the frontier's):
 * ,"accuracy":{...} as the JSON report prints it; the text columns kv,
 * KLDmean and top1% of the fairness table (x NULL: their header). */
void fkv_report_accuracy_json(FILE *f, const fkv_scheme_summary *x);
void fkv_report_accuracy_text(FILE *f, const fkv_scheme_summary *x);
/* header=1 prints the CSV header line first */
void fkv_report_csv(FILE *f, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n, int header);

#endif
