/* The bench commands end to end through their CLI entry points: output
 * files in the three formats, a load sweep, option errors; the figures of
 * `fairkv size`. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "capture.h"
#include "check.h"

/* argv of `a0 ARGS [--output OUT]`, ARGS split at spaces into buf. */
static int split_args(const char *a0, const char *args, const char *out, char *buf, size_t cap, char **argv)
{
    snprintf(buf, cap, "%s", args);
    int argc = 0;
    argv[argc++] = (char *)a0;
    for (char *t = strtok(buf, " "); t && argc < 60; t = strtok(NULL, " ")) argv[argc++] = t;
    if (out) {
        argv[argc++] = (char *)"--output";
        argv[argc++] = (char *)out;
    }
    argv[argc] = NULL;
    return argc;
}

static int run(int (*fn)(int, char **), const char *a0, const char *args, const char *out)
{
    char buf[1024], *argv[64];
    int argc = split_args(a0, args, out, buf, sizeof buf, argv);
    return fn(argc, argv);
}

/* Runs fn with stdout sent to a file; returns what it printed. */
static char *captured(int (*fn)(int, char **), const char *a0, const char *args, int *rc)
{
    char buf[1024], *argv[64];
    int argc = split_args(a0, args, NULL, buf, sizeof buf, argv);
    return capture_stdout(fn, argc, argv, rc);
}

/* `fairkv size`: the figures from the model geometry, computed here.
 * K and V per token = 2 x layers x KV heads x head_dim x element bytes;
 * a sequence holds that times its tokens (the model's native context when
 * --context is absent); weights at 2 bytes a parameter.  Geometries (the
 * sources profile.c names): Llama 2 7B 32 layers, 32 KV heads of 128, 6.74e9
 * parameters, context 4096; Llama 2 70B 80 layers, 8 KV heads (GQA) of 128,
 * 69e9, 4096; Llama 3 8B 32 layers, 8 KV heads of 128, context 8192; GPT-3
 * 175B 96 layers, 96 heads of 128, context 2048. */
static void check_size(const char *args, const char *model, uint32_t layers, uint32_t q_heads, uint32_t kv_heads,
                       uint32_t dims, uint32_t bytes, double tokens, double batch, double params)
{
    int rc = -1;
    char *out = captured(fkv_cli_size, "size", args, &rc);
    CHECKF(rc == 0, "%s: exit %d", args, rc);
    uint64_t tb = 2ull * layers * kv_heads * dims * bytes;
    char want[256];
    snprintf(want, sizeof want, "model %s: %u layers, %u query heads, %u KV heads x %u dims, %u-byte elements (", model,
             layers, q_heads, kv_heads, dims, bytes);
    CHECKF(!strncmp(out, want, strlen(want)), "%s: first line of\n%s", args, out);
    snprintf(want, sizeof want, "\nKV per token: %llu bytes (%.2f MiB; 2 x %u layers x %u heads x %u x %u B)\n",
             (unsigned long long)tb, tb / 1048576.0, layers, kv_heads, dims, bytes);
    CHECKF(strstr(out, want) != NULL, "%s: want '%s' in\n%s", args, want + 1, out);
    snprintf(want, sizeof want, "\nKV per sequence of %.0f tokens: %.3f GB (%.3f GiB)\n", tokens, tb * tokens / 1e9,
             tb * tokens / 1073741824.0);
    CHECKF(strstr(out, want) != NULL, "%s: want '%s' in\n%s", args, want + 1, out);
    if (batch > 1) {
        snprintf(want, sizeof want, "\nKV for a batch of %.0f: %.3f GB\n", batch, tb * tokens * batch / 1e9);
        CHECKF(strstr(out, want) != NULL, "%s: want '%s' in\n%s", args, want + 1, out);
    } else {
        CHECK(strstr(out, "batch") == NULL);
    }
    snprintf(want, sizeof want, "\nweights at 2 B/parameter: %.1f GB\n", params * 2 / 1e9);
    CHECKF(strstr(out, want) != NULL, "%s: want '%s' in\n%s", args, want + 1, out);
    free(out);
}

static void test_size(void)
{
    /* 2 x 32 x 32 x 128 x 2 = 524288 B = 0.50 MiB a token; 1000 tokens
     * 524288000 B = 0.524 GB = 0.488 GiB; 8 of them 4.194 GB; 13.5 GB */
    check_size("--model llama-2-7b --context 1000 --batch 8", "llama-2-7b", 32, 32, 32, 128, 2, 1000, 8, 6.74e9);
    /* GQA: 2 x 80 x 8 x 128 x 2 = 327680 B (0.31 MiB); 4096 tokens
     * 1342177280 B = 1.342 GB = 1.250 GiB; 138.0 GB of weights */
    check_size("--model llama-2-70b", "llama-2-70b", 80, 64, 8, 128, 2, 4096, 1, 69e9);
    /* f32: 2 x 32 x 8 x 128 x 4 = 262144 B (0.25 MiB); 8192 tokens = 2 GiB */
    check_size("--model llama-3-8b --dtype f32", "llama-3-8b", 32, 32, 8, 128, 4, 8192, 1, 8.03e9);
    /* int8: 2 x 96 x 96 x 128 x 1 = 2359296 B (2.25 MiB); 2048 tokens
     * 4.832 GB = 4.500 GiB */
    check_size("--model gpt3-175b --dtype int8 --batch 3", "gpt3-175b", 96, 96, 96, 128, 1, 2048, 3, 175e9);
    /* hand values of the first case, not recomputed */
    int rc;
    char *out = captured(fkv_cli_size, "size", "--model llama-2-7b --context 1000 --batch 8", &rc);
    CHECK(strstr(out, "KV per token: 524288 bytes (0.50 MiB;") && strstr(out, ": 0.524 GB (0.488 GiB)") &&
          strstr(out, "batch of 8: 4.194 GB") && strstr(out, "weights at 2 B/parameter: 13.5 GB"));
    free(out);
    out = captured(fkv_cli_size, "size", "--model llama-2-70b", &rc);
    CHECK(strstr(out, "KV per token: 327680 bytes (0.31 MiB;") && strstr(out, "of 4096 tokens: 1.342 GB (1.250 GiB)"));
    free(out);
    /* bad values */
    const char *bad[] = {"--model llama-2-7b --dtype int4", "--model llama-2-7b --batch 0",
                         "--model llama-2-7b --context -5", "--model llama-2-7b --context 1k", "--model nope",
                         "--model llama-2-7b --frobnicate"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = captured(fkv_cli_size, "size", bad[i], &rc);
        CHECKF(rc == 2 && !strstr(out, "KV per token"), "'%s': exit %d", bad[i], rc);
        free(out);
    }
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
    CHECK(!strncmp(csv, "workload,load,profile,capacity_tokens,scheme,prefix_hit_rate,context_read_rate", 78));
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
    test_size();
    remove(path);
    return check_done();
}
