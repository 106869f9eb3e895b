/* The shares module (src/core/shares.h): weighted max-min water-filling
 * with its spare-capacity rule, the request quota, and the ranking
 * "furthest over its share", against answers worked out by hand and
 * against an independent water level found by bisection. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/shares.h"
#include "test_rng.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (1 + fabs(b)))

/* Shares of n claimants, by claimant (the module reorders its array). */
static void fill(uint32_t n, const double *d, const double *w, double cap, enum fkv__spare spare, double *out)
{
    fkv__claim cl[16];
    for (uint32_t i = 0; i < n; i++) cl[i] = (fkv__claim){.demand = d[i], .weight = w[i], .share = -1, .id = i};
    fkv__water_fill(cl, n, cap, spare);
    for (uint32_t i = 0; i < n; i++) out[i] = -1;
    for (uint32_t i = 0; i < n; i++) out[cl[i].id] = cl[i].share;
}

static void by_hand(void)
{
    double s[4];
    /* equal weights, C = 100: 10 is below a third and gets it; the other
     * two split the remaining 90 */
    fill(3, (double[]){10, 50, 80}, (double[]){1, 1, 1}, 100, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 10 && s[1] == 45 && s[2] == 45);
    /* weights 1, 2, 1 over C = 120: claimant 2 (10 <= 120/4) gets 10;
     * then 110 over weights 2 and 1: 73.33 and 36.67, both below demand */
    fill(3, (double[]){100, 100, 10}, (double[]){1, 2, 1}, 120, FKV__SPARE_SPREAD, s);
    CHECK(s[2] == 10 && NEAR(s[1], 220.0 / 3) && NEAR(s[0], 110.0 / 3));
    /* a demand exactly at the fair level is met whole */
    fill(2, (double[]){30, 90}, (double[]){1, 2}, 90, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 30 && s[1] == 60);
    /* spare capacity: demands 10 and 20 of C = 100, weights 1 and 3: the
     * spare 70 goes 1:3 (17.5, 52.5) when spread, nowhere when kept */
    fill(2, (double[]){10, 20}, (double[]){1, 3}, 100, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 27.5 && s[1] == 72.5);
    fill(2, (double[]){10, 20}, (double[]){1, 3}, 100, FKV__SPARE_KEEP, s);
    CHECK(s[0] == 10 && s[1] == 20);
    /* the two spare rules agree once demands exceed the capacity */
    double k[3];
    fill(3, (double[]){10, 50, 80}, (double[]){1, 2, 1}, 100, FKV__SPARE_KEEP, k);
    fill(3, (double[]){10, 50, 80}, (double[]){1, 2, 1}, 100, FKV__SPARE_SPREAD, s);
    CHECK(!memcmp(k, s, sizeof k) && s[0] == 10 && s[1] == 50 && s[2] == 40);
    /* no demand: share 0, and its weight takes nothing from the others
     * (with weight 5 in the sum the other would get 40/6) */
    fill(2, (double[]){0, 50}, (double[]){5, 1}, 40, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 0 && s[1] == 40);
    fill(2, (double[]){0, 10}, (double[]){5, 1}, 40, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 0 && s[1] == 40); /* the spare goes only to claimants */
    fill(2, (double[]){0, 0}, (double[]){1, 1}, 40, FKV__SPARE_SPREAD, s);
    CHECK(s[0] == 0 && s[1] == 0);
    /* equal demands and weights: equal shares */
    fill(4, (double[]){30, 30, 30, 30}, (double[]){1, 1, 1, 1}, 100, FKV__SPARE_KEEP, s);
    CHECK(s[0] == 25 && s[1] == 25 && s[2] == 25 && s[3] == 25);
}

/* The water level lambda with sum_i min(d_i, lambda w_i) = C, by
 * bisection: an independent statement of weighted max-min. */
static void level_check(rng *r)
{
    int bad = 0;
    for (int it = 0; it < 20000 && bad < 5; it++) {
        uint32_t n = 1 + (uint32_t)(next(r) % 8);
        double d[8], w[8], s[8], k[8], cap = 1 + (double)(next(r) % 1000), tot = 0;
        for (uint32_t i = 0; i < n; i++) {
            d[i] = next(r) % 3 == 0 ? 0 : (double)(next(r) % 400);
            w[i] = (double)(1 + next(r) % 8) / 4;
            tot += d[i];
        }
        fill(n, d, w, cap, FKV__SPARE_SPREAD, s);
        fill(n, d, w, cap, FKV__SPARE_KEEP, k);
        double sum = 0;
        for (uint32_t i = 0; i < n; i++) sum += s[i];
        if (tot == 0) {
            for (uint32_t i = 0; i < n; i++) bad += s[i] != 0;
            continue;
        }
        if (tot <= cap) { /* every demand met: kept = demand, spread = demand + spare by weight */
            double wsum = 0;
            for (uint32_t i = 0; i < n; i++) wsum += d[i] > 0 ? w[i] : 0;
            for (uint32_t i = 0; i < n; i++) {
                bad += k[i] != d[i];
                bad += !NEAR(s[i], d[i] > 0 ? d[i] + w[i] * (cap - tot) / wsum : 0);
            }
            bad += !NEAR(sum, cap);
            continue;
        }
        double lo = 0, hi = 1e9;
        for (int b = 0; b < 200; b++) {
            double mid = (lo + hi) / 2, f = 0;
            for (uint32_t i = 0; i < n; i++) f += fmin(d[i], mid * w[i]);
            if (f < cap) lo = mid;
            else hi = mid;
        }
        for (uint32_t i = 0; i < n; i++) {
            double want = fmin(d[i], lo * w[i]);
            if (fabs(s[i] - want) > 1e-6 || s[i] != k[i]) {
                bad++;
                fprintf(stderr, "claimant %u of %u: share %g, level says %g (kept %g)\n", i, n, s[i], want, k[i]);
            }
        }
    }
    CHECK(bad == 0);
}

static void quota(void)
{
    CHECK(fkv__quota_exponent(1) == 1 && fkv__quota_exponent(2) == 0.5 && fkv__quota_exponent(INFINITY) == 0);
    CHECK(fkv__quota_weight(2, 9, 0.5) == 6);  /* 2 * 9^(1/2) */
    CHECK(fkv__quota_weight(2, 9, 1) == 18);   /* T = 1: weight x demand */
    CHECK(fkv__quota_weight(3, 400, 0) == 3);  /* T = inf: the weight alone */
    CHECK(fkv__quota_weight(1, 0, 1) == 1);    /* demand below one page counts as one */
    CHECK(fkv__quota_weight(1, 0.5, 0.5) == 1);
    /* two requests of demands 4 and 16 pages, T = 2: weights 2 and 4 of a
     * 60-page group: 20 and 40 */
    double inv = fkv__quota_exponent(2), q1 = fkv__quota_weight(1, 4, inv), q2 = fkv__quota_weight(1, 16, inv);
    CHECK(fkv__quota_of(60, q1, q1 + q2) == 20 && fkv__quota_of(60, q2, q1 + q2) == 40);
    CHECK(fkv__quota_of(60, 0, 0) == 0); /* an empty group gives nothing */
}

static void ranking(void)
{
    fkv__over_rank r = {0};
    CHECK(fkv__over_offer(&r, 10, 8, 0) == 1); /* the first candidate: excess 2 */
    CHECK(fkv__over_offer(&r, 5, 1, 0) == 1);  /* excess 4 beats 2 */
    CHECK(fkv__over_offer(&r, 7, 3, 0) == 0);  /* 4 again, tie key not larger: the first stays */
    CHECK(fkv__over_offer(&r, 9, 5, 7) == 1);  /* 4, larger tie key */
    CHECK(fkv__over_offer(&r, 1, 2, 99) == 0); /* below its share: -1 */
    CHECK(r.excess == 4 && r.tie == 7 && r.any);
    fkv__over_rank u = {0}; /* under every share, the least under wins */
    CHECK(fkv__over_offer(&u, 1, 10, 0) == 1 && fkv__over_offer(&u, 5, 8, 0) == 1 && fkv__over_offer(&u, 0, 9, 0) == 0);
    CHECK(u.excess == -3);
}

int main(void)
{
    rng g = {20};
    by_hand();
    level_check(&g);
    quota();
    ranking();
    return check_done();
}
