/* Seed workload: class proportions, size ranges, determinism, Poisson rate. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sim/workload.h"

int main(void)
{
    size_t n = 100000;
    fkv_workload w;
    REQUIRE(fkv_workload_seed(n, 7, 4, &w) == FKV_OK);
    REQUIRE(w.n == n);
    size_t cls[FKV_N_CLASSES] = {0}, bad_range = 0, bad_split = 0, clients[4] = {0};
    for (size_t i = 0; i < n; i++) {
        const fkv_req *r = &w.reqs[i];
        uint32_t t = r->prompt + r->output;
        fkv_class c = fkv_sim_class(t);
        cls[c]++;
        if (t < 16 || t > 2048) bad_range++;
        if (r->output < 1 || r->prompt < 1) bad_split++;
        /* output share f in [0.2, 0.5), rounded */
        double f = (double)r->output / t;
        if (f < 0.2 - 0.5 / t - 1e-9 || f > 0.5 + 0.5 / t + 1e-9) bad_split++;
        if (r->id != i + 1) bad_range++;
        if (r->client < 4) clients[r->client]++;
    }
    CHECKF(fabs(cls[FKV_CLASS_SHORT] / (double)n - 0.60) < 0.01, "short %zu", cls[FKV_CLASS_SHORT]);
    CHECKF(fabs(cls[FKV_CLASS_MEDIUM] / (double)n - 0.30) < 0.01, "medium %zu", cls[FKV_CLASS_MEDIUM]);
    CHECKF(fabs(cls[FKV_CLASS_LONG] / (double)n - 0.10) < 0.01, "long %zu", cls[FKV_CLASS_LONG]);
    CHECK(bad_range == 0);
    CHECK(bad_split == 0);
    for (int k = 0; k < 4; k++) CHECKF(fabs(clients[k] / (double)n - 0.25) < 0.01, "client %d: %zu", k, clients[k]);

    /* class boundaries are the cache's: short < 128 <= medium <= 512 < long */
    CHECK(fkv_sim_class(127) == FKV_CLASS_SHORT);
    CHECK(fkv_sim_class(128) == FKV_CLASS_MEDIUM);
    CHECK(fkv_sim_class(512) == FKV_CLASS_MEDIUM);
    CHECK(fkv_sim_class(513) == FKV_CLASS_LONG);

    /* same seed, same requests; another seed, other requests */
    fkv_workload a, b;
    REQUIRE(fkv_workload_seed(1000, 7, 4, &a) == FKV_OK);
    REQUIRE(fkv_workload_seed(1000, 8, 4, &b) == FKV_OK);
    int same = 1, diff = 0;
    for (size_t i = 0; i < 1000; i++) {
        same &= a.reqs[i].prompt == w.reqs[i].prompt && a.reqs[i].output == w.reqs[i].output &&
                a.reqs[i].tag == w.reqs[i].tag; /* the token seed */
        diff += a.reqs[i].prompt != b.reqs[i].prompt;
    }
    CHECK(same);
    CHECK(diff > 500);

    /* Poisson arrivals: mean gap 1/rate within 2% over 100,000 requests,
     * increasing times, coefficient of variation of gaps near 1 */
    fkv_workload_poisson(&w, 50.0, 3);
    double span = (double)fkv_workload_span(&w) * 1e-9;
    CHECKF(fabs(span / (n - 1) - 0.02) < 0.02 * 0.02, "mean gap %.6f s", span / (n - 1));
    int mono = 1;
    double s1 = 0, s2 = 0;
    for (size_t i = 1; i < n; i++) {
        double g = (w.reqs[i].arrival_ns - w.reqs[i - 1].arrival_ns) * 1e-9;
        mono &= g >= 0;
        s1 += g;
        s2 += g * g;
    }
    double mean = s1 / (n - 1), cv = sqrt(s2 / (n - 1) - mean * mean) / mean;
    CHECK(mono);
    CHECKF(fabs(cv - 1.0) < 0.03, "cv %.4f", cv);
    fkv_workload_scale_time(&w, 2.0);
    CHECKF(fabs((double)fkv_workload_span(&w) * 1e-9 - 2 * span) < 1e-6 * span, "scaled span");

    fkv_workload_free(&w);
    fkv_workload_free(&a);
    fkv_workload_free(&b);
    return check_done();
}
