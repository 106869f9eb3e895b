/* The MIN bound per tier (src/sim/min_bound.h): worked out by hand on a
 * reference string whose optimum is known, pages keyed by their whole
 * prefix and namespace, and against the simulator: no scheme's device,
 * device + host or total hit rate passes the bound at its sizes, and the
 * bound at an unlimited size is no lower than the unlimited-memory row. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "check.h"
#include "sim/min_bound.h"
#include "sim/workload.h"

static const uint64_t X[3] = {1, 2, 3}, Y[3] = {4, 5, 6}, Z[3] = {9, 2, 3};

/* the token sources of the requests below, by id (tag = id - 1) */
static fkv_req_src src[8];

/* 33 prompt tokens in 16-token blocks: two full pages a match can find */
static fkv_req req(uint64_t id, const uint64_t *blocks, uint64_t salt)
{
    fkv_req r;
    memset(&r, 0, sizeof r);
    r.id = id;
    r.prompt = 33;
    r.output = 1;
    REQUIRE(id >= 1 && id <= 8);
    r.tag = id - 1;
    src[id - 1] = (fkv_req_src){.block_ids = blocks, .n_block_ids = 3, .token_seed = 100 + id};
    r.cache_salt = salt;
    return r;
}

/* MIN's tokens found over reqs[n] at cap pages of 16 tokens; *prompts
 * gets the prompt tokens. */
static uint64_t bound_of(const fkv_req *reqs, size_t n, uint64_t cap, uint64_t *prompts)
{
    fkv_workload w;
    memset(&w, 0, sizeof w);
    w.reqs = (fkv_req *)reqs;
    w.n = n;
    w.src = src;
    w.n_src = 8;
    uint64_t hits = 0;
    REQUIRE(fkv_min_bound(&w, 16, 16, &cap, 1, &hits, prompts) == FKV_OK);
    return hits;
}

static uint64_t bound(const fkv_req *reqs, size_t n, uint64_t cap)
{
    uint64_t prompts = 0, hits = bound_of(reqs, n, cap, &prompts);
    CHECK(prompts == 33 * n);
    return hits;
}

/* X Y X Y X with two-page prompts.  Two pages of room: keeping X's pair
 * gives 4 hits (X twice), any other choice fewer (x1 + y1: 3; Y's pair: 2),
 * and LRU none.  One page: x1 alone, 2 hits.  Four: every repeat, 6. */
static void by_hand(void)
{
    fkv_req s[5] = {req(1, X, 0), req(2, Y, 0), req(3, X, 0), req(4, Y, 0), req(5, X, 0)};
    CHECK(bound(s, 5, 0) == 0);
    CHECKF(bound(s, 5, 1) == 2 * 16, "one page: %llu tokens", (unsigned long long)bound(s, 5, 1));
    CHECKF(bound(s, 5, 2) == 4 * 16, "two pages: %llu tokens", (unsigned long long)bound(s, 5, 2));
    CHECKF(bound(s, 5, 4) == 6 * 16, "four pages: %llu tokens", (unsigned long long)bound(s, 5, 4));
    CHECK(bound(s, 5, 1000) == 6 * 16);
}

/* Z's second block equals X's, its first does not: its second page has
 * another prefix, so nothing of X serves it.  The same prompt under
 * another cache_salt finds nothing either; under the same one, all. */
static void keys(void)
{
    fkv_req a[2] = {req(1, X, 0), req(2, Z, 0)};
    CHECK(bound(a, 2, 100) == 0);
    fkv_req b[2] = {req(1, X, 7), req(2, X, 8)};
    CHECK(bound(b, 2, 100) == 0);
    fkv_req c[2] = {req(1, X, 7), req(2, X, 7)};
    CHECK(bound(c, 2, 100) == 2 * 16);
}

/* A run computes prompt + output - 1 tokens of a request (its last
 * token is emitted, never appended), so only those pages can be found
 * again.  Two turns of one conversation (one token seed: the second's
 * prompt repeats the first's prompt and output): the first with a
 * 31-token prompt and one output token computes 31 tokens, one full page,
 * so the second finds 16 tokens, not the 32 that prompt + output would
 * fill.  With two output tokens the second page is computed and found. */
static void last_token(void)
{
    fkv_req a[2] = {req(1, X, 0), req(2, X, 0)};
    src[0] = src[1] = (fkv_req_src){.token_seed = 77};
    a[0].prompt = 31;
    a[1].prompt = 40;
    uint64_t prompts = 0, hits = bound_of(a, 2, 100, &prompts);
    CHECKF(hits == 16 && prompts == 31 + 40, "one output token: %llu tokens found", (unsigned long long)hits);
    a[0].output = 2;
    hits = bound_of(a, 2, 100, &prompts);
    CHECKF(hits == 32, "two output tokens: %llu tokens found", (unsigned long long)hits);
}

static char *bench_out(const char *args)
{
    char path[] = "/tmp/fkv-minb-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(bench_cli(args, path) == 0);
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    return strdup(buf);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    REQUIRE(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* chat, 600 requests, a host tier of a quarter of the device and a remote tier: every 16-bit scheme stays
 * within the bound at each tier; the bound grows with the tiers. */
static void against_schemes(void)
{
    char *s = bench_out("--workload chat --requests 600 --load 0.9 --schemes lru,belady,fairkv,vllm --quiet "
                        "--format json --host-x 0.25 --host-demote --remote-gb 20 --min-bound");
    cJSON *j = cJSON_Parse(s);
    REQUIRE(j != NULL);
    const cJSON *b = cJSON_GetObjectItem(j, "min_bound");
    REQUIRE(b != NULL);
    double b0 = num(b, "device"), b1 = num(b, "device_host"), b2 = num(b, "all");
    CHECKF(b0 > 0 && b0 < b1 && b1 < b2 && b2 <= 1, "bound %g %g %g", b0, b1, b2);
    const cJSON *x;
    int n = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "schemes"))
    {
        const cJSON *t = cJSON_GetObjectItem(x, "tiers");
        REQUIRE(t != NULL);
        double d = num(t, "device"), h = num(t, "host"), r = num(t, "remote");
        const char *name = cJSON_GetObjectItem(x, "name")->valuestring;
        CHECKF(d <= b0 && d + h <= b1 && d + h + r <= b2 + 1e-6, "%s: device %g host %g remote %g, bound %g %g %g",
               name, d, h, r, b0, b1, b2);
        n++;
    }
    CHECK(n == 4);
    cJSON_Delete(j);
    free(s);
    /* room for everything: the bound is every repeat, no lower than what
     * unlimited memory finds in the closed loop */
    s = bench_out("--workload chat --requests 600 --load 0.9 --schemes oracle-memory --quiet --format json "
                  "--host-gb 100000 --min-bound");
    j = cJSON_Parse(s);
    REQUIRE(j != NULL);
    double all = num(cJSON_GetObjectItem(j, "min_bound"), "device_host");
    double oracle = num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "schemes"), 0), "prefix_hit_rate");
    CHECKF(oracle > 0.1 && oracle <= all, "oracle-memory %g, bound %g", oracle, all);
    cJSON_Delete(j);
    free(s);
}

int main(void)
{
    by_hand();
    last_token();
    keys();
    against_schemes();
    return check_done();
}
