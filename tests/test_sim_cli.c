/* The bench commands end to end through their CLI entry points: output
 * files in the three formats, a load sweep, option errors. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "check.h"

static int run(int (*fn)(int, char **), const char *a0, const char *args, const char *out)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)a0;
    for (char *t = strtok(buf, " "); t && argc < 60; t = strtok(NULL, " ")) argv[argc++] = t;
    if (out) {
        argv[argc++] = (char *)"--output";
        argv[argc++] = (char *)out;
    }
    argv[argc] = NULL;
    return fn(argc, argv);
}

int main(void)
{
    REQUIRE(fkv_cli_bench && fkv_cli_run && fkv_cli_grid && fkv_cli_size);
    setenv("FKV_DATA_DIR", "", 1); /* embedded profile tables */
    char path[] = "/tmp/fkv_cli_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);

    CHECK(run(fkv_cli_bench, "bench", "--requests 300 --schemes lru,flru-dyn --format csv --quiet", path) == 0);
    char *csv = check_slurp(path);
    REQUIRE(csv);
    int lines = 0;
    for (char *p = csv; *p; p++) lines += *p == '\n';
    CHECK(lines == 3);
    CHECK(!strncmp(csv, "workload,load,profile,capacity_tokens,scheme,hit_rate", 52));
    CHECK(strstr(csv, "\nseed,0.8000,a100-llama2-7b,") && strstr(csv, ",flru-dyn,"));
    free(csv);

    CHECK(run(fkv_cli_bench, "bench", "--requests 300 --schemes lru --load 0.5:0.9:0.4 --format json --quiet", path) == 0);
    char *js = check_slurp(path);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    const cJSON *runs = cJSON_GetObjectItem(j, "runs");
    CHECK(cJSON_IsArray(runs) && cJSON_GetArraySize(runs) == 2);
    if (cJSON_GetArraySize(runs) == 2) {
        CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "load")->valuedouble == 0.5);
        CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "load")->valuedouble == 0.9);
    }
    cJSON_Delete(j);
    free(js);

    CHECK(run(fkv_cli_bench, "bench", "--requests 200 --schemes flru --quiet", path) == 0);
    char *txt = check_slurp(path);
    REQUIRE(txt);
    CHECK(strstr(txt, "workload seed, 200 requests") && strstr(txt, "\nflru ") && strstr(txt, "seed table 4.2"));
    free(txt);

    CHECK(run(fkv_cli_grid, "grid", "--alpha 0:1:0.5 --beta 0.3 --requests 200 --quiet", path) == 0);
    char *g = check_slurp(path);
    REQUIRE(g);
    lines = 0;
    for (char *p = g; *p; p++) lines += *p == '\n';
    CHECK(lines == 2 + 3 + 1); /* comment, header, 3 x 1 pairs, best */
    CHECK(strstr(g, "# best: alpha=") != NULL);
    free(g);

    /* errors: bad values, unknown options and schemes, missing traces */
    CHECK(run(fkv_cli_bench, "bench", "--load 0", NULL) == 2);
    CHECK(run(fkv_cli_bench, "bench", "--frobnicate", NULL) == 2);
    CHECK(run(fkv_cli_bench, "bench", "--requests 50 --schemes lru,nope --quiet", path) == 1);
    CHECK(run(fkv_cli_bench, "bench", "--trace /nonexistent/t.csv --quiet", path) == 1);
    CHECK(run(fkv_cli_bench, "bench", "--profile nope --quiet", path) == 1);
    CHECK(run(fkv_cli_size, "size", "--model llama-2-7b --context 1000", NULL) == 0);
    CHECK(run(fkv_cli_size, "size", "--model nope", NULL) == 2);
    remove(path);
    return check_done();
}
