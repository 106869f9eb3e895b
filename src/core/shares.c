/* Weighted max-min water-filling (rule 1 of shares.h). */
#include <stdlib.h>

#include "core/shares.h"

static int by_ratio(const void *a, const void *b)
{
    const fkv__claim *x = a, *y = b;
    double kx = x->demand / x->weight, ky = y->demand / y->weight;
    if (kx != ky) return kx < ky ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void fkv__water_fill(fkv__claim *cl, uint32_t n, double capacity, enum fkv__spare spare)
{
    /* the weight of the claimants, summed in the caller's order; then they
     * move to the front, the ones without demand (share 0) behind them */
    double wsum = 0;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        cl[i].share = 0;
        if (cl[i].demand > 0) {
            wsum += cl[i].weight;
            fkv__claim t = cl[m];
            cl[m++] = cl[i];
            cl[i] = t;
        }
    }
    qsort(cl, m, sizeof *cl, by_ratio);
    double left = capacity, w = wsum;
    uint32_t k = 0;
    for (; k < m; k++) {
        if (cl[k].demand > cl[k].weight * left / w) break;
        cl[k].share = cl[k].demand;
        left -= cl[k].demand;
        w -= cl[k].weight;
    }
    if (k < m) {
        for (uint32_t j = k; j < m; j++) cl[j].share = cl[j].weight * left / w;
    } else if (spare == FKV__SPARE_SPREAD && m && left > 0) {
        for (uint32_t j = 0; j < m; j++) cl[j].share += cl[j].weight * left / wsum;
    }
}
