/* The remote tier when Redis misbehaves: stopped (every command past the
 * timeout), killed, refusing writes (maxmemory), then back.  Each call must
 * return within its timeout plus a margin and never block a put; errors
 * are counted by kind and logged once per burst; after the server returns
 * the client reconnects (after its backoff) and works again. */
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "redis_fixture.h"
#include "remote/remote.h"

enum { TIMEOUT_MS = 200, MARGIN_MS = 150 };

static rfx_server srv;
static fkv_remote *cli;
static _Atomic int log_lines, recovered_lines;

static void count_log(void *ctx, const char *line)
{
    (void)ctx;
    atomic_fetch_add(&log_lines, 1);
    if (strstr(line, "recovered"))
        atomic_fetch_add(&recovered_lines, 1);
    fprintf(stderr, "remote: %s\n", line);
}

static fkv_remote_key key_of(int i)
{
    fkv_remote_geom g = {1, 2, 8};
    int32_t t[4] = {i, 1, 2, 3};
    fkv_remote_key k;
    REQUIRE(fkv_remote_key_make(&k, "tiny", g, FKV_REMOTE_F16, "faults", NULL, t, 4) == FKV_OK);
    return k;
}

static bool put(int i)
{
    static uint8_t bytes[1024];
    fkv_remote_key k = key_of(i);
    memset(bytes, i & 255, sizeof bytes);
    return fkv_remote_put(cli, &k, bytes, fkv_remote_payload_bytes(&k));
}

/* One get, timed: true on a hit; *ms is how long the caller waited. */
static bool get(int i, double *ms)
{
    fkv_remote_key k = key_of(i);
    fkv_remote_value v;
    double t0 = rfx_now_ms();
    size_t hits = fkv_remote_get(cli, &k, 1, &v);
    *ms = rfx_now_ms() - t0;
    bool ok = hits == 1 && v.data && v.data[0] == (uint8_t)i;
    fkv_remote_values_free(&v, 1);
    return ok;
}

static fkv_remote_counters now(void)
{
    fkv_remote_counters c;
    fkv_remote_get_counters(cli, &c);
    return c;
}

/* Gets key i until a hit, at most ms: the reconnect after a fault. */
static bool until_hit(int i, int ms)
{
    double t0 = rfx_now_ms(), waited;
    while (rfx_now_ms() - t0 < ms) {
        if (get(i, &waited))
            return true;
        if (!put(i))
            rfx_sleep_ms(10);
        fkv_remote_flush(cli, TIMEOUT_MS);
        rfx_sleep_ms(20);
    }
    return false;
}

static void test_stopped(void)
{
    fkv_remote_counters before = now();
    int lines = atomic_load(&log_lines);
    REQUIRE(kill(srv.pid, SIGSTOP) == 0);
    /* puts never wait: the first blocks the worker (the connection is still
     * up, the server silent) until the timeout, 4 queue, the rest drop */
    /* a put that waited would wait out the worker's timeout (TIMEOUT_MS);
     * half of it leaves room for a loaded machine's scheduling delays */
    int queued = 0;
    double put_worst = 0;
    for (int i = 0; i < 100; i++) {
        double t0 = rfx_now_ms();
        queued += put(100 + i);
        double d = rfx_now_ms() - t0;
        put_worst = d > put_worst ? d : put_worst;
    }
    CHECKF(put_worst < TIMEOUT_MS / 2, "a put took %.1f ms", put_worst);
    CHECKF(queued <= 6, "%d queued", queued);
    double worst = 0, ms;
    for (int i = 0; i < 5; i++) {
        CHECK(!get(1, &ms));
        worst = ms > worst ? ms : worst;
    }
    CHECKF(worst < TIMEOUT_MS + MARGIN_MS, "a get waited %.0f ms", worst);
    fkv_remote_counters c = now();
    CHECK(c.put_drops == before.put_drops + (uint64_t)(100 - queued) && c.puts == before.puts + (uint64_t)queued);
    /* each failed get is a miss; why it failed depends on timing: the
     * caller stopped waiting (gave_up), or the worker timed out first and
     * the node, now backing off, answered the rest at once (unavailable) */
    CHECK(c.misses >= before.misses + 5);
    CHECKF(c.gave_up + c.unavailable > before.gave_up + before.unavailable, "gave_up %llu, unavailable %llu",
           (unsigned long long)c.gave_up, (unsigned long long)c.unavailable);
    REQUIRE(kill(srv.pid, SIGCONT) == 0);
    CHECK(until_hit(1, 5000));
    c = now();
    CHECKF(c.err_timeout > before.err_timeout, "timeouts %llu", (unsigned long long)c.err_timeout);
    /* a burst: its first error and its end, not a line per failed call */
    int burst = atomic_load(&log_lines) - lines;
    CHECKF(burst >= 1 && burst <= 4, "%d log lines for one burst", burst);
}

static void test_killed(void)
{
    fkv_remote_counters before = now();
    int lines = atomic_load(&log_lines), recovered = atomic_load(&recovered_lines);
    rfx_stop(&srv);
    double worst = 0, ms;
    for (int i = 0; i < 50; i++) {
        CHECK(!get(1, &ms));
        put(2);
        worst = ms > worst ? ms : worst;
    }
    CHECKF(worst < TIMEOUT_MS + MARGIN_MS, "a get waited %.0f ms", worst);
    fkv_remote_counters c = now();
    CHECK(c.err_connect > before.err_connect);
    /* the backoff: most calls are not even tried against a dead server */
    CHECK(c.unavailable > 0);
    CHECKF(c.err_connect - before.err_connect < 50, "%llu connect errors: no backoff",
           (unsigned long long)(c.err_connect - before.err_connect));
    int burst = atomic_load(&log_lines) - lines;
    CHECKF(burst >= 1 && burst <= 2, "%d log lines while down", burst);

    REQUIRE(rfx_start(&srv, false)); /* same port, an empty server */
    double t0 = rfx_now_ms();
    CHECK(until_hit(3, 5000));
    double back = rfx_now_ms() - t0;
    /* the backoff is capped (400 ms here): no waiting for the first delay's
     * doublings to grow without bound */
    CHECKF(back < 3000, "back after %.0f ms", back);
    CHECK(atomic_load(&recovered_lines) > recovered);
}

static void test_oom(void)
{
    redisReply *rep = rfx_cmd(srv.port, "CONFIG SET maxmemory-policy noeviction");
    freeReplyObject(rep);
    rep = rfx_cmd(srv.port, "CONFIG SET maxmemory 1");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    fkv_remote_counters before = now();
    CHECK(put(40));
    CHECK(fkv_remote_flush(cli, 2000));
    fkv_remote_counters c = now();
    CHECK(c.err_oom == before.err_oom + 1 && c.put_fails == before.put_fails + 1);
    double ms;
    CHECK(!get(40, &ms));
    rep = rfx_cmd(srv.port, "CONFIG SET maxmemory 0");
    freeReplyObject(rep);
    CHECK(put(40) && fkv_remote_flush(cli, 2000));
    CHECK(get(40, &ms));
}

int main(void)
{
    rfx_require();
    REQUIRE(rfx_start(&srv, false));
    char nodes[32];
    snprintf(nodes, sizeof nodes, "127.0.0.1:%d", srv.port);
    fkv_remote_config cfg;
    fkv_remote_config_default(&cfg);
    cfg.nodes = nodes;
    cfg.timeout_ms = TIMEOUT_MS;
    cfg.queue_max = 4;
    cfg.backoff_min_ms = 50;
    cfg.backoff_max_ms = 400;
    cfg.log = count_log;
    char err[256];
    cli = fkv_remote_open(&cfg, err, sizeof err);
    REQUIRE(cli);
    double ms;
    REQUIRE(put(1) && fkv_remote_flush(cli, 2000));
    CHECK(get(1, &ms));
    test_stopped();
    test_killed();
    test_oom();
    fkv_remote_close(cli);
    return check_done();
}
