/* The fairness metrics (src/sim/fairness.h) against values worked out by
 * hand on tiny cases. */
#include <math.h>

#include "check.h"
#include "sim/fairness.h"

static void jain(void)
{
    double eq[3] = {2, 2, 2}, one[4] = {1, 0, 0, 0}, two[2] = {1, 3}, zero[2] = {0, 0};
    CHECK(fabs(fkv_jain_index(eq, 3) - 1.0) < 1e-12);
    CHECK(fabs(fkv_jain_index(one, 4) - 0.25) < 1e-12);      /* one of n served: 1/n */
    CHECK(fabs(fkv_jain_index(two, 2) - 16.0 / 20.0) < 1e-12); /* (1+3)^2 / (2 * (1+9)) */
    CHECK(fkv_jain_index(zero, 2) == 1.0 && fkv_jain_index(NULL, 0) == 1.0);
    double three[3] = {1, 2, 4};
    CHECK(fabs(fkv_jain_index(three, 3) - 49.0 / 63.0) < 1e-12); /* 7^2 / (3 * 21) */
}

static void max_min(void)
{
    double a[3] = {1.5, 3, 6}, z[2] = {0, 2}, zz[2] = {0, 0};
    CHECK(fabs(fkv_max_min_ratio(a, 3) - 4.0) < 1e-12);
    CHECK(isinf(fkv_max_min_ratio(z, 2)) && fkv_max_min_ratio(zz, 2) == 1.0 && fkv_max_min_ratio(NULL, 0) == 1.0);
}

/* Two tenants backlogged: A gets 10 a step, B 4; after 3 steps the gap is
 * 18.  B leaves, A gets 100 alone (no gap: one backlogged tenant); B comes
 * back at A's counter (the lift), then they get 5 each: the gap stays 18,
 * the largest seen.  A tenant not backlogged is not counted. */
static void service_diff(void)
{
    fkv_service_diff d;
    REQUIRE(fkv_service_diff_init(&d, 3) == 0);
    fkv_service_diff_backlog(&d, 0, 1);
    fkv_service_diff_backlog(&d, 1, 1);
    for (int s = 0; s < 3; s++) {
        fkv_service_diff_serve(&d, 0, 10);
        fkv_service_diff_serve(&d, 1, 4);
        fkv_service_diff_serve(&d, 2, 1000); /* never backlogged: ignored */
        fkv_service_diff_observe(&d);
    }
    CHECKF(fabs(d.max_diff - 18) < 1e-12, "gap %g", d.max_diff);
    fkv_service_diff_backlog(&d, 1, 0);
    fkv_service_diff_serve(&d, 0, 100);
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 18) < 1e-12);
    fkv_service_diff_backlog(&d, 1, 1);
    CHECK(fabs(d.served[1] - 130) < 1e-12); /* lifted to A's counter */
    fkv_service_diff_serve(&d, 0, 5);
    fkv_service_diff_serve(&d, 1, 5);
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 18) < 1e-12);
    fkv_service_diff_serve(&d, 1, 30); /* now B is 30 ahead */
    fkv_service_diff_observe(&d);
    CHECK(fabs(d.max_diff - 30) < 1e-12);
    fkv_service_diff_free(&d);
}

int main(void)
{
    jain();
    max_min();
    service_diff();
    return check_done();
}
