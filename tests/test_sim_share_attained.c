/* Shares are guarantees (issue 21): the recommended fairkv scheme on the
 * shared Azure conversation trace with one tenant sending 70% of the
 * requests, load 0.9 (the table of scripts/fairness.sh).  Every tenant is
 * within its fair share there (the heavy one offers 5,382 tokens/s, less
 * than its water level), so each must attain at least 0.95 of what it
 * offers (the test checks that premise too), and the
 * scheme's throughput must stay at 0.95x lru's or more.  Commit b7c69be
 * broke both (the heavy tenant at 0.889, throughput 0.921x: its long
 * prefills ran a token a step while the prompts kept for them could not
 * start), which no other test saw: the re-choice's Azure run has one
 * tenant, and slices of the trace do not show it.  The whole trace takes
 * about 5 s, so the sanitizer runs (FKV_TEST_SCALE < 1) skip it.  Skips
 * (77) without the data folder. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "check.h"

static const cJSON *scheme(const cJSON *j, const char *name)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "schemes"))
    {
        const cJSON *n = cJSON_GetObjectItem(x, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return x;
    }
    return NULL;
}

int main(void)
{
    const char *dir = getenv("FKV_DATA_DIR");
    char trace[512];
    snprintf(trace, sizeof trace, "%s/azure_llm_conv_2023.csv", dir ? dir : "../shared/data");
    if (access(trace, R_OK)) {
        printf("skip: %s is absent\n", trace);
        return 77;
    }
    if (check_scale() < 1) {
        printf("skip: the whole Azure trace (about 5 s in a release build) at FKV_TEST_SCALE %g < 1\n",
               check_scale());
        return check_done();
    }
    char out[] = "/tmp/fkv_share_attained_XXXXXX", args[900];
    int fd = mkstemp(out);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(args, sizeof args,
             "--quiet --format json --load 0.9 --trace %s --tenants 4 --tenant-assign heavy:0.7 --schemes lru,fairkv",
             trace);
    CHECK(bench_cli(args, out) == 0);
    char *js = check_slurp(out);
    unlink(out);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    free(js);
    REQUIRE(j);
    const cJSON *f = scheme(j, "fairkv");
    REQUIRE(f);
    double thr = cJSON_GetObjectItem(f, "throughput_rel_lru")->valuedouble;
    CHECKF(thr >= 0.95, "fairkv's throughput %.3f of lru's", thr);
    int n = 0, within = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(cJSON_GetObjectItem(f, "fairness"), "tenants"))
    {
        const cJSON *sh = cJSON_GetObjectItem(t, "share");
        REQUIRE(sh);
        double att = cJSON_GetObjectItem(sh, "attained")->valuedouble;
        int in = cJSON_IsTrue(cJSON_GetObjectItem(sh, "within_share"));
        int light = cJSON_IsTrue(cJSON_GetObjectItem(t, "light"));
        printf("tenant %d (%s): within its share %d, attained %.6f\n", cJSON_GetObjectItem(t, "id")->valueint,
               light ? "light" : "heavy", in, att);
        n++;
        within += in;
        if (in) CHECKF(att >= 0.95, "tenant %d, within its share, attains %.4f of it",
                       cJSON_GetObjectItem(t, "id")->valueint, att);
    }
    /* the premise: four tenants, all within their shares at this load */
    CHECKF(n == 4 && within == 4, "%d tenants, %d within their shares", n, within);
    cJSON_Delete(j);
    return check_done();
}
