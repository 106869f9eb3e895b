/* Fairness metrics of the simulator's reports (issue 13), pure functions
 * over per-tenant figures so that each is checked against hand-computed
 * values (tests/test_sim_fairness_metrics.c) before any report uses it.
 *
 *  - Jain's index of x[0..n): (sum x)^2 / (n * sum x^2), in [1/n, 1]; 1 when
 *    all are equal (Jain, Chiu and Hawe, DEC-TR-301, 1984).  Over per-tenant
 *    mean slowdowns it says how evenly tenants are slowed down.
 *  - max/min ratio of x[0..n).
 *  - Service difference (VTC, Sheng et al., OSDI'24, its fairness bound):
 *    the largest gap in weighted service between two tenants that are both
 *    backlogged.  Tracked online: each tenant's service counts only while it
 *    is backlogged (a tenant that sends nothing is owed nothing); at every
 *    observation the gap is the max minus the min of those counters over
 *    the tenants backlogged then; the metric is the largest gap seen.  A
 *    tenant that stops being backlogged and comes back restarts at the
 *    smallest counter of the tenants backlogged at that moment (VTC's
 *    counter lift), so an idle spell is neither a debt nor a credit. */
#ifndef FKV_SIM_FAIRNESS_H
#define FKV_SIM_FAIRNESS_H

#include <stddef.h>
#include <stdint.h>

/* 1 for n == 0 or when every x is 0 (nobody is treated unequally). */
double fkv_jain_index(const double *x, size_t n);
/* max / min; 1 for n == 0; INFINITY when min is 0 and max is not. */
double fkv_max_min_ratio(const double *x, size_t n);

typedef struct fkv_service_diff {
    size_t n;
    double *served;    /* [n] weighted service while backlogged */
    uint8_t *backlog;  /* [n] backlogged now */
    double max_diff;   /* the metric */
} fkv_service_diff;

int fkv_service_diff_init(fkv_service_diff *d, size_t n_tenants); /* 0, or -1 out of memory */
void fkv_service_diff_free(fkv_service_diff *d);
/* Tenant i's backlog state now (call before its service of the period). */
void fkv_service_diff_backlog(fkv_service_diff *d, size_t i, int backlogged);
/* Tenant i got `tokens` of weighted service (counted only if backlogged). */
void fkv_service_diff_serve(fkv_service_diff *d, size_t i, double tokens);
/* An observation point (e.g. the end of a step): updates max_diff. */
void fkv_service_diff_observe(fkv_service_diff *d);

#endif
