/* Fairness metrics: see fairness.h for the definitions and sources. */
#include "sim/fairness.h"

#include <math.h>
#include <stdlib.h>

double fkv_jain_index(const double *x, size_t n)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) s += x[i], s2 += x[i] * x[i];
    if (n == 0 || s2 == 0) return 1.0;
    return s * s / ((double)n * s2);
}

double fkv_max_min_ratio(const double *x, size_t n)
{
    if (n == 0) return 1.0;
    double lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (lo == 0) return hi == 0 ? 1.0 : INFINITY;
    return hi / lo;
}

int fkv_service_diff_init(fkv_service_diff *d, size_t n)
{
    d->n = n;
    d->max_diff = 0;
    d->served = calloc(n ? n : 1, sizeof *d->served);
    d->backlog = calloc(n ? n : 1, 1);
    if (!d->served || !d->backlog) {
        fkv_service_diff_free(d);
        return -1;
    }
    return 0;
}

void fkv_service_diff_free(fkv_service_diff *d)
{
    free(d->served);
    free(d->backlog);
    d->served = NULL;
    d->backlog = NULL;
    d->n = 0;
}

void fkv_service_diff_backlog(fkv_service_diff *d, size_t i, int backlogged)
{
    if (i >= d->n || !!backlogged == d->backlog[i]) return;
    if (backlogged) { /* (re)joins at the lowest counter of those backlogged: VTC's lift */
        double lo = 0;
        int any = 0;
        for (size_t k = 0; k < d->n; k++)
            if (d->backlog[k] && (!any || d->served[k] < lo)) lo = d->served[k], any = 1;
        d->served[i] = any ? lo : 0;
    }
    d->backlog[i] = (uint8_t)!!backlogged;
}

void fkv_service_diff_serve(fkv_service_diff *d, size_t i, double tokens)
{
    if (i < d->n && d->backlog[i]) d->served[i] += tokens;
}

void fkv_service_diff_observe(fkv_service_diff *d)
{
    double lo = 0, hi = 0;
    int any = 0;
    for (size_t k = 0; k < d->n; k++) {
        if (!d->backlog[k]) continue;
        if (!any || d->served[k] < lo) lo = d->served[k];
        if (!any || d->served[k] > hi) hi = d->served[k];
        any = 1;
    }
    if (any && hi - lo > d->max_diff) d->max_diff = hi - lo;
}
