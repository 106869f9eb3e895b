/* Share attainment (report.h): each tenant's weighted max-min fair share of
 * the capacity given the offered loads, whether it is within it, and the
 * fraction attained -- on toys worked out by hand, then in a bench report
 * (JSON and text) where the figures must be consistent with each other. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "sim/report.h"

static fkv_scheme_summary two(double w1, double o1, double s1, double w2, double o2, double s2)
{
    fkv_scheme_summary s;
    memset(&s, 0, sizeof s);
    s.n_tenants = 2;
    s.tenants[1].weight = w1, s.tenants[1].offered_tokens_s = o1, s.tenants[1].served_tokens_s = s1;
    s.tenants[2].weight = w2, s.tenants[2].offered_tokens_s = o2, s.tenants[2].served_tokens_s = s2;
    return s;
}

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) < 1e-9 * (1 + fabs((double)(b))))

static void toys(void)
{
    /* capacity 100, offers 30 and 200, equal weights: the first asks less
     * than half, so it is owed all of it (30) and the second the rest (70);
     * served 30 and 35: attained 1 and 0.5 */
    fkv_scheme_summary s = two(1, 30, 30, 1, 200, 35);
    fkv_summary_shares(&s, 100);
    CHECK(NEAR(s.share_capacity_tok_s, 100) && NEAR(s.share_saturation_tok_s, 100));
    CHECKF(NEAR(s.tenants[1].fair_tokens_s, 30) && NEAR(s.tenants[2].fair_tokens_s, 70), "shares %g %g",
           s.tenants[1].fair_tokens_s, s.tenants[2].fair_tokens_s);
    CHECK(s.tenants[1].within_share == 1 && s.tenants[2].within_share == 0);
    CHECKF(NEAR(s.tenants[1].attained, 1.0) && NEAR(s.tenants[2].attained, 0.5), "attained %g %g",
           s.tenants[1].attained, s.tenants[2].attained);

    /* weights 1 and 3, offers 50 and 200, capacity 100: both ask more than
     * their weighted part (25, 75), so each gets exactly that; served 20
     * and 75: attained 0.8 and 1 */
    s = two(1, 50, 20, 3, 200, 75);
    fkv_summary_shares(&s, 100);
    CHECK(NEAR(s.tenants[1].fair_tokens_s, 25) && NEAR(s.tenants[2].fair_tokens_s, 75));
    CHECK(s.tenants[1].within_share == 0 && s.tenants[2].within_share == 0);
    CHECK(NEAR(s.tenants[1].attained, 0.8) && NEAR(s.tenants[2].attained, 1.0));

    /* everything fits (40 + 50 < 100): each is owed what it asks, nothing
     * more (spare capacity is not owed to anyone) */
    s = two(1, 40, 40, 1, 50, 25);
    fkv_summary_shares(&s, 100);
    CHECK(NEAR(s.tenants[1].fair_tokens_s, 40) && NEAR(s.tenants[2].fair_tokens_s, 50));
    CHECK(s.tenants[1].within_share == 1 && s.tenants[2].within_share == 1);
    CHECK(NEAR(s.tenants[2].attained, 0.5));

    /* served more in total (30 + 120) than the saturation figure (100): the
     * run's own total is the capacity, 150 -> shares 30 and 120 */
    s = two(1, 30, 30, 1, 200, 120);
    fkv_summary_shares(&s, 100);
    CHECK(NEAR(s.share_capacity_tok_s, 150) && NEAR(s.share_saturation_tok_s, 100));
    CHECK(NEAR(s.tenants[2].fair_tokens_s, 120) && NEAR(s.tenants[2].attained, 1.0));

    /* a tenant that offers nothing is owed nothing: within, attained
     * undefined (< 0, printed as null) */
    s = two(1, 0, 0, 1, 200, 80);
    fkv_summary_shares(&s, 100);
    CHECK(s.tenants[1].fair_tokens_s == 0 && s.tenants[1].within_share == 1 && s.tenants[1].attained < 0);
    CHECK(NEAR(s.tenants[2].fair_tokens_s, 100) && NEAR(s.tenants[2].attained, 0.8));

    /* no capacity: nothing computed (the summary keeps its "not computed") */
    s = two(1, 30, 30, 1, 200, 35);
    s.tenants[1].fair_tokens_s = s.tenants[2].fair_tokens_s = -1;
    fkv_summary_shares(&s, 0);
    CHECK(s.tenants[1].fair_tokens_s == -1 && s.share_capacity_tok_s == 0);
}

static char *bench(const char *args, const char *path)
{
    char buf[512], *argv[40];
    snprintf(buf, sizeof buf, "%s --output %s", args, path);
    int argc = 0;
    argv[argc++] = (char *)"bench";
    for (char *t = strtok(buf, " "); t && argc < 39; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    if (fkv_cli_bench(argc, argv) != 0) return NULL;
    return check_slurp(path);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Overload (load 1.5): the heavy tenants ask for more than their share,
 * the light ones less.  Per scheme: every tenant has a "share" object in
 * both tenant lists; the shares of the over-share tenants fill the
 * capacity; within_share says offered <= fair; a tenant never serves more
 * than it offered; attained = served / min(offered, fair). */
static void report(const char *path)
{
    char *js = bench("--workload tenants --tenants 6 --load 1.5 --requests 300 --schemes lru,vtc --format json --quiet",
                     path);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    const cJSON *schemes = cJSON_GetObjectItem(j, "schemes");
    REQUIRE(cJSON_GetArraySize(schemes) == 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *x = cJSON_GetArrayItem(schemes, i);
        const cJSON *fair = cJSON_GetObjectItem(x, "fairness");
        double cap = num(fair, "share_capacity_tokens_s"), sat = num(fair, "saturation_tokens_s");
        CHECKF(sat > 0 && cap >= sat, "capacity %g, saturation %g", cap, sat);
        const cJSON *ts = cJSON_GetObjectItem(x, "tenants"), *fts = cJSON_GetObjectItem(fair, "tenants");
        REQUIRE(cJSON_GetArraySize(ts) == 6 && cJSON_GetArraySize(fts) == 6);
        double sum_fair = 0, sum_served = 0, sum_offered = 0;
        int over = 0, within = 0;
        for (int t = 0; t < 6; t++) {
            const cJSON *sh = cJSON_GetObjectItem(cJSON_GetArrayItem(ts, t), "share");
            const cJSON *fsh = cJSON_GetObjectItem(cJSON_GetArrayItem(fts, t), "share");
            REQUIRE(sh && fsh);
            double f = num(sh, "fair_tokens_s"), a = num(sh, "attained"), o = num(sh, "offered_tokens_s"),
                   s = num(sh, "served_tokens_s");
            const cJSON *in = cJSON_GetObjectItem(sh, "within_share");
            CHECK(cJSON_IsBool(in));
            CHECK(num(fsh, "fair_tokens_s") == f && num(fsh, "attained") == a);
            CHECKF(f > 0 && o > 0 && s > 0 && s <= o * (1 + 1e-6), "tenant %d: fair %g offered %g served %g", t + 1,
                   f, o, s);
            CHECKF(cJSON_IsTrue(in) == (o <= f * (1 + 1e-6)), "tenant %d: within %d, offered %g, fair %g", t + 1,
                   cJSON_IsTrue(in), o, f);
            CHECKF(fabs(a - s / (o < f ? o : f)) < 1e-4 * (1 + a), "tenant %d: attained %g", t + 1, a);
            sum_fair += f, sum_served += s, sum_offered += o;
            if (cJSON_IsTrue(in)) within++;
            else over++;
        }
        CHECKF(over >= 1 && within >= 1, "over %d within %d", over, within);
        /* someone is over share: the shares fill the capacity */
        CHECKF(fabs(sum_fair - cap) < 1e-3 * cap, "shares %g, capacity %g", sum_fair, cap);
        CHECK(sum_served <= cap * (1 + 1e-6));
        /* 1.5 times the saturation load: a backlog is left at the window's end */
        CHECKF(sum_served < 0.9 * sum_offered, "served %g of %g offered", sum_served, sum_offered);
    }
    cJSON_Delete(j);
    free(js);

    /* light load: everyone within share, and served close to offered (the
     * window's end leaves a few requests in flight) */
    char *txt = bench("--workload tenants --tenants 6 --load 0.3 --requests 300 --schemes lru --quiet", path);
    REQUIRE(txt);
    const char *p = strstr(txt, "per tenant: share of service");
    CHECK(p && strstr(p, "attained") && strstr(p, "capacity (tokens/s) = the saturation throughput"));
    int rows = 0;
    for (const char *q = p ? strstr(p, "\nlru ") : NULL; q; q = strstr(q + 1, "\nlru ")) {
        unsigned t;
        double w, o, f, s, a;
        char in[8];
        if (sscanf(q + 1, "lru %u %lf %lf %lf %lf %7s %lf", &t, &w, &o, &f, &s, in, &a) != 7) break;
        rows++;
        CHECKF(!strcmp(in, "yes") && a > 0.8 && a <= 1 + 1e-3, "tenant %u: within %s attained %g", t, in, a);
    }
    CHECKF(rows == 6, "%d share rows", rows);
    free(txt);
}

int main(void)
{
    setenv("FKV_DATA_DIR", "", 1); /* embedded profile tables */
    toys();
    char path[] = "/tmp/fkv_shares_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    report(path);
    unlink(path);
    return check_done();
}
