/* The plain trace's shared_tokens column: `fairkv load --write-trace`
 * writes what its prompts share per client, the simulator's reader takes
 * it back (and refuses bad values with file, line and field), and the
 * simulated prefix cache then finds exactly the full pages inside each
 * client's common prefix, as the served engine's page hash chain does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hand_profile.h"
#include "server/load_workload.h"
#include "sim/sim.h"
#include "sim/workload.h"

#define PAGE 16

static fkv_status parse(const char *s, fkv_workload *w, char *err)
{
    return fkv_trace_parse(s, strlen(s), "t.csv", FKV_TRACE_AUTO, 0, 4, w, err, 256);
}

static void bad(const char *s, int line, const char *needle)
{
    fkv_workload w;
    char err[256] = "", want[32];
    fkv_status st = parse(s, &w, err);
    snprintf(want, sizeof want, "t.csv:%d:", line);
    CHECKF(st == FKV_EPARSE, "status %d for input '%.60s'", st, s);
    CHECKF(!strncmp(err, want, strlen(want)), "message '%s' lacks '%s'", err, want);
    CHECKF(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    CHECK(w.reqs == NULL && w.n == 0);
}

static void reader(void)
{
    fkv_workload w;
    char err[256] = "";
    const char *t = "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n"
                    "0,64,2,1,32\n5,40,2,1,32\n7,10,1,2,10\n9,10,1,5,0\n";
    REQUIRE(parse(t, &w, err) == FKV_OK);
    REQUIRE(w.n == 4);
    CHECK(w.reqs[0].shared_tokens == 32 && w.reqs[1].shared_tokens == 32 && w.reqs[2].shared_tokens == 10);
    CHECK(w.reqs[3].shared_tokens == 0 && w.reqs[3].client == 1);
    /* one client, one prefix: same ids up to shared_tokens, then not */
    fkv_sim_tokens ts = fkv_workload_tokens(&w, 512);
    CHECK(fkv_sim_src(&ts, &w.reqs[0]).shared_seed == fkv_sim_src(&ts, &w.reqs[1]).shared_seed &&
          fkv_sim_src(&ts, &w.reqs[0]).shared_seed != fkv_sim_src(&ts, &w.reqs[2]).shared_seed);
    int same = 1;
    for (uint32_t p = 0; p < 32; p++) same &= fkv_req_token(&ts, &w.reqs[0], p) == fkv_req_token(&ts, &w.reqs[1], p);
    CHECK(same);
    CHECK(fkv_req_token(&ts, &w.reqs[0], 32) != fkv_req_token(&ts, &w.reqs[1], 32));
    CHECK(fkv_req_token(&ts, &w.reqs[0], 0) != fkv_req_token(&ts, &w.reqs[2], 0));
    fkv_workload_free(&w);

    /* older headers and 3/4-column rows still read, with no shared prefix */
    REQUIRE(parse("arrival_ms,prompt_tokens,output_tokens\n0,8,1\n1,8,1,3\n", &w, err) == FKV_OK);
    ts = fkv_workload_tokens(&w, 512);
    CHECK(w.n == 2 && w.reqs[0].shared_tokens == 0 && w.reqs[1].shared_tokens == 0 &&
          fkv_sim_src(&ts, &w.reqs[1]).shared_seed == 0);
    fkv_workload_free(&w);

    const char *h5 = "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n";
    char b[256];
    snprintf(b, sizeof b, "%s0,10,2,1,4\n1,10,2,1,x\n", h5);
    bad(b, 3, "field shared_tokens");
    snprintf(b, sizeof b, "%s0,10,2,1,-1\n", h5);
    bad(b, 2, "field shared_tokens");
    snprintf(b, sizeof b, "%s0,10,2,1,99999999999\n", h5);
    bad(b, 2, "field shared_tokens");
    snprintf(b, sizeof b, "%s0,10,2,1,11\n", h5);
    bad(b, 2, "field shared_tokens: 11 is more than the 10 prompt tokens");
    snprintf(b, sizeof b, "%s0,10,2,1,\n", h5);
    bad(b, 2, "field shared_tokens");
    snprintf(b, sizeof b, "%s0,10,2,1,3,4\n", h5);
    bad(b, 2, "got 6 fields");
    bad("arrival_ms,prompt_tokens,output_tokens,client,shared\n0,1,1,0,0\n", 1, "header");
    /* equal to the prompt is allowed */
    snprintf(b, sizeof b, "%s0,10,2,1,10\n", h5);
    REQUIRE(parse(b, &w, err) == FKV_OK);
    CHECK(w.reqs[0].shared_tokens == 10);
    fkv_workload_free(&w);
}

/* writer -> reader, and the prompts `fairkv load` sends agree with the
 * column: two requests of one client share exactly shared_tokens leading
 * tokens and differ right after. */
static void load_round_trip(void)
{
    fkv_load_workload lw;
    REQUIRE(fkv_load_workload_seed_max(5, 40, 10, 4, 1024, &lw) == FKV_OK);
    REQUIRE(lw.n > 100);
    char dir[] = "/tmp/fkv-shared-XXXXXX", path[64];
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/w.csv", dir);
    char err[256] = "";
    REQUIRE(fkv_load_workload_write_plain(&lw, path, err, sizeof err) == FKV_OK);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    char head[128] = "";
    CHECK(fgets(head, sizeof head, f) &&
          !strcmp(head, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n"));
    fclose(f);
    fkv_workload sw;
    REQUIRE(fkv_trace_load(path, FKV_TRACE_AUTO, 0, 4, &sw, err, sizeof err) == FKV_OK);
    REQUIRE(sw.n == lw.n);
    int same = 1, some_short = 0, some_full = 0;
    for (size_t i = 0; i < lw.n; i++) {
        uint32_t s = fkv_load_shared_tokens(lw.items[i].prompt_tokens);
        same &= sw.reqs[i].prompt == lw.items[i].prompt_tokens && sw.reqs[i].client == lw.items[i].client &&
                sw.reqs[i].shared_tokens == s && s <= sw.reqs[i].prompt;
        some_short |= s < 32 && s > 0;
        some_full |= s == 32;
    }
    CHECK(same && some_short && some_full);

    /* the prompts themselves, with a vocabulary large enough that a chance
     * equality right after the prefix cannot pass for sharing */
    const uint32_t vocab = 1u << 30;
    int32_t *a = malloc(2048 * sizeof *a), *b = malloc(2048 * sizeof *b);
    REQUIRE(a && b);
    size_t pairs = 0, exact = 0, cross = 0, cross_differ = 0;
    for (size_t i = 0; i < lw.n && pairs < 200; i++)
        for (size_t j = i + 1; j < lw.n && j < i + 20; j++) {
            uint32_t si = sw.reqs[i].shared_tokens, sj = sw.reqs[j].shared_tokens;
            fkv_load_prompt(&lw.items[i], i, 7, vocab, a);
            fkv_load_prompt(&lw.items[j], j, 7, vocab, b);
            uint32_t n = lw.items[i].prompt_tokens < lw.items[j].prompt_tokens ? lw.items[i].prompt_tokens
                                                                                : lw.items[j].prompt_tokens;
            uint32_t common = 0;
            while (common < n && a[common] == b[common]) common++;
            if (lw.items[i].client != lw.items[j].client) {
                cross++;
                cross_differ += common == 0;
                continue;
            }
            pairs++;
            uint32_t want = si < sj ? si : sj;
            exact += common == want;
        }
    CHECKF(pairs >= 50 && exact == pairs, "%zu of %zu same-client pairs share exactly min(shared_tokens)", exact,
           pairs);
    CHECKF(cross > 0 && cross_differ == cross, "%zu of %zu cross-client pairs differ at token 0", cross_differ, cross);
    free(a);
    free(b);
    fkv_workload_free(&sw);
    fkv_load_workload_free(&lw);
    unlink(path);
    rmdir(dir);
}

/* Matched prompt tokens of the first k requests, run alone (requests one
 * second apart, each done long before the next arrives, so the first k
 * behave the same whatever follows). */
static uint64_t matched_first(const fkv_workload *w, size_t k, const char *scheme)
{
    fkv_profile p = hand_profile();
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &p;
    c.capacity_tokens = 1 << 16;
    c.sched.n_clients = 4;
    fkv_workload part = *w;
    part.n = k;
    fkv_sim_result r;
    char err[256] = "";
    const fkv_scheme *sc = fkv_scheme_find(scheme);
    REQUIRE(sc && sc->page_tokens == PAGE && sc->prefix_cache);
    REQUIRE(fkv_sim_run(&part, sc, &c, &r, err, sizeof err) == FKV_OK);
    CHECK(r.done == k);
    uint64_t m = r.matched_tokens;
    fkv_sim_result_free(&r);
    return m;
}

typedef struct row {
    uint32_t prompt, client, shared;
} row;

static void simulated_hits(const char *scheme)
{
    /* interleaved clients; prefixes of 32 (two full pages), 20 (one), a
     * prompt of 32 (the match stops at prompt - 1: one page) and of 33 */
    const row rows[] = {{64, 0, 32}, {80, 1, 32}, {70, 0, 32}, {48, 1, 20}, {33, 0, 32}, {96, 1, 32},
                        {32, 0, 32}, {90, 2, 8},  {90, 2, 8},  {64, 0, 32}, {200, 1, 32}};
    const size_t n = sizeof rows / sizeof *rows;
    char buf[1024], no_col[1024], zeros[1024];
    int k = snprintf(buf, sizeof buf, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n");
    int k4 = snprintf(no_col, sizeof no_col, "arrival_ms,prompt_tokens,output_tokens,client\n");
    int k0 = snprintf(zeros, sizeof zeros, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n");
    for (size_t i = 0; i < n; i++) {
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%zu,%u,2,%u,%u\n", i * 1000, rows[i].prompt, rows[i].client,
                      rows[i].shared);
        k4 += snprintf(no_col + k4, sizeof no_col - (size_t)k4, "%zu,%u,2,%u\n", i * 1000, rows[i].prompt,
                       rows[i].client);
        k0 += snprintf(zeros + k0, sizeof zeros - (size_t)k0, "%zu,%u,2,%u,0\n", i * 1000, rows[i].prompt,
                       rows[i].client);
    }
    fkv_workload w, w4, w0;
    char err[256] = "";
    REQUIRE(parse(buf, &w, err) == FKV_OK && parse(no_col, &w4, err) == FKV_OK && parse(zeros, &w0, err) == FKV_OK);
    REQUIRE(w.n == n);
    uint64_t prev = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        /* expected: full pages inside this request's prefix and its first
         * prompt - 1 tokens, and inside a prefix an earlier request of the
         * client has put in the cache */
        uint32_t own = (rows[i].shared < rows[i].prompt - 1 ? rows[i].shared : rows[i].prompt - 1) / PAGE, cached = 0;
        for (size_t j = 0; j < i; j++)
            if (rows[j].client == rows[i].client && rows[j].shared / PAGE > cached) cached = rows[j].shared / PAGE;
        uint64_t want = (uint64_t)(own < cached ? own : cached) * PAGE;
        uint64_t m = matched_first(&w, i + 1, scheme);
        CHECKF(m - prev == want, "%s: request %zu (client %u, prompt %u, shared %u) matched %llu, want %llu", scheme, i,
               rows[i].client, rows[i].prompt, rows[i].shared, (unsigned long long)(m - prev),
               (unsigned long long)want);
        prev = m;
        total += want;
    }
    CHECK(total >= 7 * PAGE); /* the rows above do exercise sharing */
    CHECKF(matched_first(&w4, n, scheme) == 0, "%s: hits without the column", scheme);
    CHECKF(matched_first(&w0, n, scheme) == 0, "%s: hits with shared_tokens 0", scheme);
    fkv_workload_free(&w);
    fkv_workload_free(&w4);
    fkv_workload_free(&w0);
}

int main(void)
{
    reader();
    load_round_trip();
    simulated_hits("lru");
    simulated_hits("vllm");
    return check_done();
}
