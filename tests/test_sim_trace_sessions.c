/* Sessions recovered from traces and `--tenant-assign session`
 * (workload.h, "Sessions of traces"): a Mooncake request's session is its
 * first hash_id, a plain trace's its client column; each session goes whole
 * to tenant 1 + XXH64(key as 8 little-endian bytes, seed 0) mod N, computed
 * here independently of bench.c; traces and workloads without a session
 * signal are refused with a message that says why.  On the real Mooncake
 * trace (skipped when absent): every request has a tenant in 1..N and a
 * session's requests share it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "sim/bench.h"
#include "sim/workload.h"

static uint64_t want_tenant(uint64_t key, uint32_t n)
{
    unsigned char b[8];
    for (int j = 0; j < 8; j++) b[j] = (unsigned char)(key >> (8 * j));
    return 1 + XXH64(b, sizeof b, 0) % n;
}

static void assign(fkv_workload *w, uint32_t n)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.sim.n_tenants = n;
    o.tenant_assign = FKV_ASSIGN_SESSION;
    fkv_bench_assign_tenants(&o, w);
}

/* Mooncake lines: session heads 1000 (3 turns, each re-sending the head),
 * 2000 (2 turns), and 3000..3011 once each; timestamps out of file order so
 * the sort moves requests. */
static const char *moon_lines[] = {
    "{\"timestamp\": 50, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1000, 1001, 1002]}",
    "{\"timestamp\": 10, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [2000, 2001]}",
    "{\"timestamp\": 0, \"input_length\": 500, \"output_length\": 5, \"hash_ids\": [1000]}",
    "{\"timestamp\": 20, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1000, 1001]}",
    "{\"timestamp\": 30, \"input_length\": 900, \"output_length\": 5, \"hash_ids\": [2000, 2001]}",
};
#define N_SINGLE 12

static char *moon_text(int reversed)
{
    size_t n = sizeof moon_lines / sizeof *moon_lines;
    char *buf = malloc(8192);
    REQUIRE(buf);
    size_t len = 0;
    char single[N_SINGLE][128];
    for (int k = 0; k < N_SINGLE; k++)
        snprintf(single[k], sizeof single[k],
                 "{\"timestamp\": %d, \"input_length\": 300, \"output_length\": 2, \"hash_ids\": [%d]}", 60 + k,
                 3000 + k);
    size_t total = n + N_SINGLE;
    for (size_t i = 0; i < total; i++) {
        size_t j = reversed ? total - 1 - i : i;
        const char *l = j < n ? moon_lines[j] : single[j - n];
        len += (size_t)snprintf(buf + len, 8192 - len, "%s\n", l);
    }
    return buf;
}

static void mooncake_memory(void)
{
    const uint32_t N = 4;
    uint64_t tenant_of[2][N_SINGLE + 2]; /* per key, in each file order */
    for (int rev = 0; rev < 2; rev++) {
        char *t = moon_text(rev);
        fkv_workload w;
        char err[256] = "";
        REQUIRE(fkv_trace_parse(t, strlen(t), "mem.jsonl", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
        free(t);
        REQUIRE(w.n == 5 + N_SINGLE && w.session && w.session_key);
        CHECKF(w.n_sessions == 2 + N_SINGLE, "%zu sessions", w.n_sessions);
        CHECK(w.turn == NULL);
        assign(&w, N);
        fkv_sim_tokens ts = fkv_workload_tokens(&w, 512);
        size_t per[5] = {0};
        for (size_t i = 0; i < w.n; i++) {
            const fkv_req *r = &w.reqs[i];
            REQUIRE(w.session[i] < w.n_sessions);
            uint64_t key = w.session_key[w.session[i]];
            /* the session is the first block, nothing else */
            fkv_req_src src = fkv_sim_src(&ts, r);
            CHECK(src.n_block_ids >= 1 && src.block_ids[0] == key);
            CHECKF(r->tenant == want_tenant(key, N), "key %llu tenant %llu", (unsigned long long)key,
                   (unsigned long long)r->tenant);
            size_t slot = key == 1000 ? 0 : key == 2000 ? 1 : (size_t)(key - 3000) + 2;
            REQUIRE(slot < N_SINGLE + 2);
            tenant_of[rev][slot] = r->tenant;
            per[r->tenant]++;
        }
        /* sessions numbered densely by first arrival: 1000 arrives first (t=0) */
        CHECK(w.session[0] == 0 && w.session_key[0] == 1000);
        for (size_t i = 0; i < w.n; i++) {
            /* same key <=> same session index */
            for (size_t j = 0; j < w.n; j++)
                CHECK((fkv_sim_src(&ts, &w.reqs[i]).block_ids[0] == fkv_sim_src(&ts, &w.reqs[j]).block_ids[0]) ==
                      (w.session[i] == w.session[j]));
        }
        /* 14 keys over 4 tenants: the hash uses more than one */
        int used = 0;
        for (uint32_t k = 1; k <= N; k++) used += per[k] > 0;
        CHECKF(used >= 2, "%d tenants used", used);
        fkv_workload_free(&w);
    }
    /* a session's tenant follows from its key, not from where it appears */
    CHECK(!memcmp(tenant_of[0], tenant_of[1], sizeof tenant_of[0]));
}

/* The session rule past a common system prompt: every request but one
 * begins with block 5 (6 of 7: more than half), and all that share it
 * begin 5, 9 (also 6 of 7); the next position is the first not common.
 * Sessions: the first id past the common head (40, 41, 42), the one
 * request that does not start with 5 by its own first id (77), and the
 * request no longer than the common head by its last id (9).  Under the
 * old rule (first id) the six requests were one session. */
static void common_first_block(void)
{
    fkv_workload w;
    char err[256] = "";
    const char *m = "{\"timestamp\": 0, \"input_length\": 2000, \"output_length\": 5, \"hash_ids\": [5, 9, 40, 1]}\n"
                    "{\"timestamp\": 1, \"input_length\": 2000, \"output_length\": 5, \"hash_ids\": [5, 9, 41, 2]}\n"
                    "{\"timestamp\": 2, \"input_length\": 2000, \"output_length\": 5, \"hash_ids\": [5, 9, 40, 3]}\n"
                    "{\"timestamp\": 3, \"input_length\": 2000, \"output_length\": 5, \"hash_ids\": [5, 9, 42, 4]}\n"
                    "{\"timestamp\": 4, \"input_length\": 2000, \"output_length\": 5, \"hash_ids\": [77, 9, 40, 5]}\n"
                    "{\"timestamp\": 5, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [5, 9]}\n"
                    "{\"timestamp\": 6, \"input_length\": 1600, \"output_length\": 5, \"hash_ids\": [5, 9, 41]}\n";
    REQUIRE(fkv_trace_parse(m, strlen(m), "c.jsonl", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    REQUIRE(w.session && w.session_key && w.n == 7);
    CHECKF(w.n_sessions == 5, "%zu sessions", w.n_sessions);
    static const uint64_t key[7] = {40, 41, 40, 42, 77, 9, 41};
    for (size_t i = 0; i < w.n; i++)
        CHECKF(w.session_key[w.session[i]] == key[i], "request %zu: key %llu", i,
               (unsigned long long)w.session_key[w.session[i]]);
    CHECK(w.session[0] == w.session[2] && w.session[1] == w.session[6] && w.session[0] != w.session[1]);
    fkv_workload_free(&w);
    /* half exactly is not most: 2 of 4 share block 5, so the first id rules */
    const char *h = "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [5, 1]}\n"
                    "{\"timestamp\": 1, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [5, 2]}\n"
                    "{\"timestamp\": 2, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [6, 3]}\n"
                    "{\"timestamp\": 3, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [7, 4]}\n";
    REQUIRE(fkv_trace_parse(h, strlen(h), "h.jsonl", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECK(w.n_sessions == 3 && w.session[0] == w.session[1] && w.session_key[w.session[0]] == 5);
    fkv_workload_free(&w);
}

static void plain_and_missing(void)
{
    fkv_workload w;
    char err[256] = "";
    /* clients 7 and 11 are one VTC client (mod 4) but two sessions */
    const char *p = "arrival_ms,prompt_tokens,output_tokens,client\n0,10,2,7\n1,10,2,11\n2,10,2,7\n";
    REQUIRE(fkv_trace_parse(p, strlen(p), "p.csv", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    REQUIRE(w.session && w.session_key);
    CHECK(w.n_sessions == 2 && w.session_key[0] == 7 && w.session_key[1] == 11);
    CHECK(w.session[0] == 0 && w.session[1] == 1 && w.session[2] == 0);
    CHECK(w.reqs[0].client == w.reqs[1].client);
    assign(&w, 16);
    CHECK(w.reqs[0].tenant == want_tenant(7, 16) && w.reqs[2].tenant == want_tenant(7, 16));
    CHECK(w.reqs[1].tenant == want_tenant(11, 16));
    fkv_workload_free(&w);

    /* no client column, or one Mooncake request without hash_ids: no sessions */
    const char *q = "arrival_ms,prompt_tokens,output_tokens\n0,10,2\n";
    REQUIRE(fkv_trace_parse(q, strlen(q), "q.csv", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECK(!w.session && !w.session_key && w.n_sessions == 0);
    fkv_workload_free(&w);
    const char *m = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n"
                    "{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 5}\n";
    REQUIRE(fkv_trace_parse(m, strlen(m), "m.jsonl", FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECK(!w.session && !w.session_key);
    fkv_workload_free(&w);
}

/* fkv_bench_prepare's message for `--tenant-assign session` on a trace of
 * `text` (NULL: the seed workload); its status in *st. */
static void prepare_msg(const char *text, char *path, size_t pathlen, char *msg, size_t cap,
                        fkv_status *st)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.quiet = 1;
    o.cap_tokens = 1 << 20;
    o.requests = 200;
    char a0[] = "--tenants", a1[] = "4", a2[] = "--tenant-assign", a3[] = "session";
    char *argv[] = {a0, a1, a2, a3};
    for (int i = 0; i < 4; i++) REQUIRE(fkv_bench_parse_opt(&o, 4, argv, &i) == 1);
    CHECK(o.tenant_assign == FKV_ASSIGN_SESSION);
    path[0] = 0;
    if (text) {
        /* the format is recognized from the text, so no extension */
        snprintf(path, pathlen, "/tmp/fkv_sess_XXXXXX");
        int fd = mkstemp(path);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
        o.trace = path;
    }
    fkv_bench_ctx c;
    char err[512] = "";
    *st = fkv_bench_prepare(&c, &o, err, sizeof err);
    fkv_bench_ctx_free(&c); /* on failure too: prepare may have loaded the workload and profile */
    if (text) remove(path);
    snprintf(msg, cap, "%s", err);
}

static void refusals(void)
{
    char path[64], msg[512];
    fkv_status st;
    prepare_msg("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n", path,
                sizeof path, msg, sizeof msg, &st);
    CHECK(st == FKV_EINVAL);
    CHECKF(strstr(msg, path) && strstr(msg, "Azure trace has no session signal") && strstr(msg, "roundrobin") &&
               strstr(msg, "heavy:F"),
           "azure: %s", msg);
    prepare_msg("arrival_ms,prompt_tokens,output_tokens\n0,100,10\n5,100,10\n", path, sizeof path, msg,
                sizeof msg, &st);
    CHECK(st == FKV_EINVAL);
    CHECKF(strstr(msg, path) && strstr(msg, "no client column"), "plain: %s", msg);
    prepare_msg(NULL, path, sizeof path, msg, sizeof msg, &st);
    CHECK(st == FKV_EINVAL);
    CHECKF(strstr(msg, "seed workload has no sessions") && strstr(msg, "roundrobin"), "seed: %s", msg);
    /* a trace with sessions is accepted */
    prepare_msg("arrival_ms,prompt_tokens,output_tokens,client\n0,100,10,3\n5,100,10,9\n", path, sizeof path,
                msg, sizeof msg, &st);
    CHECKF(st == FKV_OK, "plain with clients: %s", msg);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The real trace, through fkv_bench_prepare as `fairkv bench` reads it. */
static void mooncake_real(const char *path)
{
    const uint32_t N = 4;
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.quiet = 1;
    o.trace = path;
    o.sim.n_tenants = N;
    o.tenant_assign = FKV_ASSIGN_SESSION;
    o.tenant_assign_set = o.tenants_set = 1;
    fkv_bench_ctx c;
    char err[512] = "";
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    const fkv_workload *w = &c.base;
    REQUIRE(w->session && w->session_key);
    CHECKF(w->n == 3993 && w->n_sessions == 2211, "%zu requests, %zu sessions", w->n, w->n_sessions);
    uint64_t *st = calloc(w->n_sessions, sizeof *st);
    size_t *cnt = calloc(w->n_sessions, sizeof *cnt);
    REQUIRE(st && cnt);
    size_t per[5] = {0}, bad = 0, split = 0;
    for (size_t i = 0; i < w->n; i++) {
        const fkv_req *r = &w->reqs[i];
        uint32_t s = w->session[i];
        if (r->tenant < 1 || r->tenant > N || r->tenant != want_tenant(w->session_key[s], N)) bad++;
        else per[r->tenant]++;
        fkv_sim_tokens ts = fkv_workload_tokens(w, 512);
        fkv_req_src src = fkv_sim_src(&ts, r);
        if (!src.n_block_ids || src.block_ids[0] != w->session_key[s]) bad++;
        if (st[s] && st[s] != r->tenant) split++;
        st[s] = r->tenant;
        cnt[s]++;
    }
    CHECKF(bad == 0, "%zu requests with a wrong tenant or key", bad);
    CHECKF(split == 0, "%zu requests away from their session's tenant", split);
    qsort(cnt, w->n_sessions, sizeof *cnt, cmp_size);
    printf("mooncake: %zu requests, %zu sessions, requests per session median %zu max %zu; N=%u shares", w->n,
           w->n_sessions, cnt[w->n_sessions / 2], cnt[w->n_sessions - 1], N);
    for (uint32_t t = 1; t <= N; t++) printf(" %.3f", per[t] / (double)w->n);
    printf("\n");
    /* every tenant gets a real share (sessions are small: at most 24 requests) */
    for (uint32_t t = 1; t <= N; t++) CHECKF(per[t] > w->n / 10, "tenant %u: %zu", t, per[t]);
    /* the recovered sessions do not make the trace a chat workload: arrivals rescale it */
    fkv_workload a;
    double rate;
    CHECK(fkv_bench_arrivals(&c, 0.8, &a, &rate) == FKV_OK);
    CHECK(a.n == w->n && rate > 0);
    size_t moved = 0;
    for (size_t i = 0; i < a.n; i++) moved += a.reqs[i].tenant != w->reqs[i].tenant;
    CHECK(moved == 0);
    fkv_workload_free(&a);
    free(st);
    free(cnt);
    fkv_bench_ctx_free(&c);
}

int main(void)
{
    mooncake_memory();
    common_first_block();
    plain_and_missing();
    refusals();
    const char *dir = getenv("FKV_DATA_DIR");
    char mc[1024];
    if (dir) snprintf(mc, sizeof mc, "%s/mooncake_synthetic.jsonl", dir);
    if (!dir || access(mc, R_OK) != 0) {
        printf("SKIP: the real-trace part needs mooncake_synthetic.jsonl in FKV_DATA_DIR (%s)\n",
               dir ? dir : "unset");
        /* the in-memory checks above still count */
        return check_fail_ ? check_done() : 77;
    }
    mooncake_real(mc);
    return check_done();
}
