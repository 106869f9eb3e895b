/* The remote tier against one real redis-server: round trips of chunk bytes
 * over several geometries, corrupt values refused and counted, the TTL of
 * every SET, per-tenant quotas (LRU, only the tenant's own keys, prefix-
 * closed), batched gets, exists and delete. */
#include <string.h>

#include "check.h"
#include "redis_fixture.h"
#include "remote/remote.h"

static rfx_server srv;
static fkv_remote *cli;
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint8_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)rng;
}

static void counters(fkv_remote_counters *c)
{
    fkv_remote_get_counters(cli, c);
}

/* Key i of a namespace: a first chunk (no parent) of tokens {i, i+1}. */
static fkv_remote_key key_of(const char *ns, fkv_remote_geom g, fkv_remote_dtype dt, const fkv_remote_key *prev,
                             int i)
{
    int32_t t[2] = {i, i + 1};
    fkv_remote_key k;
    REQUIRE(fkv_remote_key_make(&k, "tiny", g, dt, ns, prev, t, 2) == FKV_OK);
    return k;
}

static void test_round_trip(void)
{
    const fkv_remote_geom geoms[] = {{1, 1, 4}, {2, 4, 8}, {4, 8, 64}, {3, 2, 16}};
    const fkv_remote_dtype dts[] = {FKV_REMOTE_F16, FKV_REMOTE_F32, FKV_REMOTE_BF16, FKV_REMOTE_INT8};
    fkv_remote_key keys[12];
    uint8_t *want[12];
    size_t lens[12];
    int n = 0;
    for (int g = 0; g < 4; g++) {
        fkv_remote_key *prev = NULL;
        for (int c = 0; c < 3; c++, n++) {
            keys[n] = key_of("rt", geoms[g], dts[g], prev, c);
            prev = &keys[n];
            lens[n] = fkv_remote_payload_bytes(&keys[n]);
            if (!lens[n])
                lens[n] = 1000 + (size_t)c; /* int8: any length */
            want[n] = malloc(lens[n]);
            for (size_t i = 0; i < lens[n]; i++)
                want[n][i] = rnd();
            CHECK(fkv_remote_put(cli, &keys[n], want[n], lens[n]));
        }
    }
    /* a length the geometry does not give is refused at the door */
    CHECK(!fkv_remote_put(cli, &keys[0], want[0], lens[0] - 1));
    REQUIRE(fkv_remote_flush(cli, 2000));
    fkv_remote_value out[12];
    CHECK(fkv_remote_get(cli, keys, (size_t)n, out) == (size_t)n);
    for (int i = 0; i < n; i++) {
        CHECKF(out[i].data && out[i].len == lens[i] && memcmp(out[i].data, want[i], lens[i]) == 0, "chunk %d", i);
        free(want[i]);
    }
    fkv_remote_values_free(out, (size_t)n);
    /* never written: a miss */
    fkv_remote_key none = key_of("rt", geoms[0], dts[0], NULL, 999);
    CHECK(fkv_remote_get(cli, &none, 1, out) == 0 && out[0].data == NULL);
    /* every SET carries its TTL */
    long long ttl = rfx_int(srv.port, "TTL %s", keys[0].str);
    CHECKF(ttl > 0 && ttl <= 600, "TTL %lld", ttl);
}

/* Writes a chunk and changes it in Redis with cmd (a format taking the key,
 * then arg); the get must be a miss and count as corrupt. */
static void corrupt_one(int i, const char *cmd, const char *arg)
{
    fkv_remote_geom g = {2, 2, 8};
    fkv_remote_key k = key_of("bad", g, FKV_REMOTE_F16, NULL, i);
    size_t len = fkv_remote_payload_bytes(&k);
    uint8_t *p = malloc(len);
    for (size_t j = 0; j < len; j++)
        p[j] = (uint8_t)('a' + j % 20); /* never '#', the byte written over it */
    REQUIRE(fkv_remote_put(cli, &k, p, len) && fkv_remote_flush(cli, 2000));
    fkv_remote_value v;
    CHECK(fkv_remote_get(cli, &k, 1, &v) == 1);
    fkv_remote_values_free(&v, 1);
    redisReply *rep = rfx_cmd(srv.port, cmd, k.str, arg);
    CHECKF(rep && rep->type != REDIS_REPLY_ERROR, "%s", cmd);
    freeReplyObject(rep);
    fkv_remote_counters before, after;
    counters(&before);
    CHECKF(fkv_remote_get(cli, &k, 1, &v) == 0 && v.data == NULL, "%s served", cmd);
    counters(&after);
    CHECKF(after.corrupt == before.corrupt + 1, "%s: corrupt %llu -> %llu", cmd,
           (unsigned long long)before.corrupt, (unsigned long long)after.corrupt);
    CHECK(after.misses == before.misses + 1);
    free(p);
}

static void test_corrupt(void)
{
    corrupt_one(1, "SETRANGE %s 60 %s", "#");          /* a payload byte */
    corrupt_one(2, "SETRANGE %s 0 %s", "XXXX");        /* the magic */
    corrupt_one(3, "SETRANGE %s 12 %s", "\x07");       /* the layers */
    corrupt_one(4, "SET %s %s", "short");              /* not even a header */
    corrupt_one(5, "APPEND %s %s", "more");            /* a longer payload */
    /* another chunk's good value under this key: the hash in the header */
    fkv_remote_geom g = {2, 2, 8};
    fkv_remote_key other = key_of("bad", g, FKV_REMOTE_F16, NULL, 1);
    redisReply *rep = rfx_cmd(srv.port, "DEL %s", other.str);
    freeReplyObject(rep);
    fkv_remote_key src = key_of("bad", g, FKV_REMOTE_F16, NULL, 7);
    size_t len = fkv_remote_payload_bytes(&src);
    uint8_t *p = calloc(1, len);
    REQUIRE(fkv_remote_put(cli, &src, p, len) && fkv_remote_flush(cli, 2000));
    rep = rfx_cmd(srv.port, "COPY %s %s", src.str, other.str);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
    freeReplyObject(rep);
    fkv_remote_value v;
    CHECK(fkv_remote_get(cli, &other, 1, &v) == 0);
    CHECK(fkv_remote_get(cli, &src, 1, &v) == 1);
    fkv_remote_values_free(&v, 1);
    free(p);
}

static bool exists(const fkv_remote_key *k)
{
    return rfx_int(srv.port, "EXISTS %s", k->str) == 1;
}

static void put_zero(const fkv_remote_key *k)
{
    static uint8_t zero[4096];
    size_t len = fkv_remote_payload_bytes(k);
    REQUIRE(len <= sizeof zero);
    REQUIRE(fkv_remote_put(cli, k, zero, len));
}

static void test_quota(void)
{
    fkv_remote_geom g = {1, 2, 16}; /* 2*1*2*16*2 tokens*2 bytes = 256 bytes */
    fkv_remote_key a[10], b[3];
    for (int i = 0; i < 10; i++)
        a[i] = key_of("tenant-a", g, FKV_REMOTE_F16, NULL, i);
    for (int i = 0; i < 3; i++)
        b[i] = key_of("tenant-b", g, FKV_REMOTE_F16, NULL, i);
    uint64_t one = FKV_REMOTE_HEADER_BYTES + fkv_remote_payload_bytes(&a[0]) + strlen(a[0].str);
    REQUIRE(fkv_remote_set_quota(cli, "tenant-a", 5 * one) == FKV_OK);
    for (int i = 0; i < 3; i++)
        put_zero(&b[i]);
    for (int i = 0; i < 5; i++)
        put_zero(&a[i]);
    REQUIRE(fkv_remote_flush(cli, 2000));
    /* a read makes a[0] the most recent: LRU, not FIFO, picks a[1] next */
    fkv_remote_value v;
    CHECK(fkv_remote_get(cli, &a[0], 1, &v) == 1);
    fkv_remote_values_free(&v, 1);
    fkv_remote_counters before, after;
    counters(&before);
    for (int i = 5; i < 9; i++)
        put_zero(&a[i]);
    REQUIRE(fkv_remote_flush(cli, 2000));
    counters(&after);
    CHECK(after.quota_deletes == before.quota_deletes + 4);
    CHECK(exists(&a[0]));
    for (int i = 1; i < 5; i++)
        CHECKF(!exists(&a[i]), "a[%d] kept", i);
    for (int i = 5; i < 9; i++)
        CHECKF(exists(&a[i]), "a[%d] deleted", i);
    /* now a[0] is the least recently used */
    put_zero(&a[9]);
    REQUIRE(fkv_remote_flush(cli, 2000));
    CHECK(!exists(&a[0]) && exists(&a[9]) && exists(&a[5]));
    for (int i = 0; i < 3; i++)
        CHECKF(exists(&b[i]), "another tenant's b[%d] deleted", i);
}

/* Chains c0 <- c1 <- c2 and one more key past the quota: the leaf c2 goes
 * although c0 is older, so no chunk outlives the chunk before it. */
static void test_prefix_closed(void)
{
    fkv_remote_geom g = {1, 2, 16};
    fkv_remote_key c[3], x[2];
    c[0] = key_of("tenant-c", g, FKV_REMOTE_F16, NULL, 0);
    c[1] = key_of("tenant-c", g, FKV_REMOTE_F16, &c[0], 1);
    c[2] = key_of("tenant-c", g, FKV_REMOTE_F16, &c[1], 2);
    x[0] = key_of("tenant-c", g, FKV_REMOTE_F16, NULL, 50);
    x[1] = key_of("tenant-c", g, FKV_REMOTE_F16, NULL, 51);
    uint64_t one = FKV_REMOTE_HEADER_BYTES + fkv_remote_payload_bytes(&c[0]) + strlen(c[0].str);
    REQUIRE(fkv_remote_set_quota(cli, "tenant-c", 3 * one) == FKV_OK);
    for (int i = 0; i < 3; i++)
        put_zero(&c[i]);
    put_zero(&x[0]);
    REQUIRE(fkv_remote_flush(cli, 2000));
    CHECK(exists(&c[0]) && exists(&c[1]) && !exists(&c[2]) && exists(&x[0]));
    /* next: c1 is a leaf now, older than x0 */
    put_zero(&x[1]);
    REQUIRE(fkv_remote_flush(cli, 2000));
    CHECK(exists(&c[0]) && !exists(&c[1]) && exists(&x[0]) && exists(&x[1]));
}

static void test_batch(void)
{
    enum { N = 50 };
    fkv_remote_geom g = {2, 2, 4};
    fkv_remote_key k[N];
    fkv_remote_key *prev = NULL;
    for (int i = 0; i < N; i++) {
        k[i] = key_of("batch", g, FKV_REMOTE_F32, prev, i);
        prev = &k[i];
        put_zero(&k[i]);
    }
    REQUIRE(fkv_remote_flush(cli, 2000));
    fkv_remote_counters before, after;
    counters(&before);
    fkv_remote_value v[N];
    double t0 = rfx_now_ms();
    CHECK(fkv_remote_get(cli, k, N, v) == N);
    double ms = rfx_now_ms() - t0;
    counters(&after);
    CHECKF(ms < 500, "%.1f ms", ms);
    CHECK(after.gets == before.gets + N && after.hits == before.hits + N && after.gave_up == before.gave_up);
    for (int i = 0; i < N; i++)
        CHECK(v[i].data && v[i].len == fkv_remote_payload_bytes(&k[i]));
    fkv_remote_values_free(v, N);

    bool ex[N];
    CHECK(fkv_remote_exists(cli, k, N, ex) == N);
    CHECK(fkv_remote_del(cli, k, 2) == 2);
    CHECK(fkv_remote_exists(cli, k, 3, ex) == 1 && !ex[0] && !ex[1] && ex[2]);
    counters(&after);
    CHECK(after.deletes >= 2);
}

static void quiet(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "remote: %s\n", line);
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
    cfg.timeout_ms = 1000;
    cfg.ttl_s = 600;
    cfg.log = quiet;
    char err[256];
    cli = fkv_remote_open(&cfg, err, sizeof err);
    REQUIRE(cli);
    test_round_trip();
    test_corrupt();
    test_quota();
    test_prefix_closed();
    test_batch();
    fkv_remote_counters c;
    counters(&c);
    CHECK(c.err_connect == 0 && c.err_timeout == 0 && c.err_oom == 0 && c.err_other == 0);
    fkv_remote_close(cli);
    return check_done();
}
