/* The remote tier over a real 3-node Redis Cluster: keys routed by slot
 * land on every node; after a slot migration the client follows ASK (while
 * the slot moves) and MOVED (after), and its slot map is refreshed. */
#include <string.h>

#include "check.h"
#include "redis_fixture.h"
#include "remote/remote.h"

enum { NODES = 3, KEYS = 300 };

static rfx_server srv[NODES];
static fkv_remote *cli;
static fkv_remote_key keys[KEYS];

static void myid(int port, char *buf, size_t len)
{
    redisReply *rep = rfx_cmd(port, "CLUSTER MYID");
    snprintf(buf, len, "%s", rep && rep->type == REDIS_REPLY_STRING ? rep->str : "?");
    freeReplyObject(rep);
}

/* The node (index) that holds key, asked of the servers themselves. */
static int holder(const char *key)
{
    for (int i = 0; i < NODES; i++)
        if (rfx_int(srv[i].port, "EXISTS %s", key) == 1)
            return i;
    return -1;
}

static bool get_all(void)
{
    fkv_remote_value *v = calloc(KEYS, sizeof *v);
    size_t hits = fkv_remote_get(cli, keys, KEYS, v);
    bool ok = hits == KEYS;
    for (int i = 0; i < KEYS && ok; i++)
        ok = v[i].data && v[i].len == fkv_remote_payload_bytes(&keys[i]) && v[i].data[0] == (uint8_t)i;
    fkv_remote_values_free(v, KEYS);
    free(v);
    return ok;
}

static void test_spread(void)
{
    fkv_remote_geom g = {2, 2, 8};
    static uint8_t bytes[4096];
    for (int i = 0; i < KEYS; i++) {
        int32_t t[2] = {i, 7};
        REQUIRE(fkv_remote_key_make(&keys[i], "tiny", g, FKV_REMOTE_F16, "cl", i ? &keys[i - 1] : NULL, t, 2) ==
                FKV_OK);
        memset(bytes, i & 255, sizeof bytes);
        REQUIRE(fkv_remote_put(cli, &keys[i], bytes, fkv_remote_payload_bytes(&keys[i])));
    }
    REQUIRE(fkv_remote_flush(cli, 10000));
    long long total = 0;
    for (int i = 0; i < NODES; i++) {
        long long n = rfx_int(srv[i].port, "DBSIZE", NULL);
        CHECKF(n > KEYS / 6, "node %d holds %lld of %d keys", i, n, KEYS);
        total += n;
    }
    CHECK(total == KEYS);
    CHECK(get_all());
    /* the client's map agrees with the servers */
    char where[64], want[64];
    for (int i = 0; i < KEYS; i += 37) {
        int h = holder(keys[i].str);
        REQUIRE(h >= 0);
        snprintf(want, sizeof want, "127.0.0.1:%d", srv[h].port);
        CHECK(fkv_remote_route(cli, keys[i].str, where, sizeof where) && strcmp(where, want) == 0);
    }
    fkv_remote_counters c;
    fkv_remote_get_counters(cli, &c);
    CHECK(c.moved == 0 && c.asked == 0 && c.slot_refreshes >= 1);
}

/* Moves the slot of keys[0] to another node, by the specification's steps,
 * reading the key between them. */
static void test_migration(void)
{
    const fkv_remote_key *k = &keys[0];
    int from = holder(k->str), to = (from + 1) % NODES;
    REQUIRE(from >= 0);
    int slot = fkv_remote_key_slot(k->str, strlen(k->str));
    char from_id[64], to_id[64];
    myid(srv[from].port, from_id, sizeof from_id);
    myid(srv[to].port, to_id, sizeof to_id);
    redisReply *rep = rfx_cmd(srv[to].port, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rep = rfx_cmd(srv[from].port, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    /* every key of the slot (one of ours, maybe more) */
    redisReply *inslot = rfx_cmd(srv[from].port, "CLUSTER GETKEYSINSLOT %d 1000", slot);
    REQUIRE(inslot && inslot->type == REDIS_REPLY_ARRAY && inslot->elements >= 1);
    for (size_t i = 0; i < inslot->elements; i++) {
        char port[16];
        snprintf(port, sizeof port, "%d", srv[to].port);
        rep = rfx_cmd(srv[from].port, "MIGRATE 127.0.0.1 %s %s 0 5000", port, inslot->element[i]->str);
        CHECKF(rep && rep->type == REDIS_REPLY_STATUS, "MIGRATE %s", rep && rep->str ? rep->str : "");
        freeReplyObject(rep);
    }
    freeReplyObject(inslot);
    /* the key moved (EXISTS would answer ASK / MOVED here, so count) */
    char slot_s[16];
    snprintf(slot_s, sizeof slot_s, "%d", slot);
    CHECK(rfx_int(srv[from].port, "CLUSTER COUNTKEYSINSLOT %s", slot_s) == 0);
    CHECK(rfx_int(srv[to].port, "CLUSTER COUNTKEYSINSLOT %s", slot_s) >= 1);

    /* mid-migration: the old owner answers ASK for a key it no longer has */
    fkv_remote_counters before, after;
    fkv_remote_get_counters(cli, &before);
    fkv_remote_value v;
    CHECK(fkv_remote_get(cli, k, 1, &v) == 1 && v.data && v.data[0] == 0);
    fkv_remote_values_free(&v, 1);
    fkv_remote_get_counters(cli, &after);
    CHECK(after.asked == before.asked + 1 && after.moved == before.moved);

    for (int i = 0; i < NODES; i++) {
        rep = rfx_cmd(srv[i].port, "CLUSTER SETSLOT %d NODE %s", slot, to_id);
        CHECK(rep && rep->type == REDIS_REPLY_STATUS);
        freeReplyObject(rep);
    }
    /* after: MOVED, the map entry updated and the whole map reloaded */
    fkv_remote_get_counters(cli, &before);
    CHECK(fkv_remote_get(cli, k, 1, &v) == 1 && v.data && v.data[0] == 0);
    fkv_remote_values_free(&v, 1);
    fkv_remote_get_counters(cli, &after);
    CHECK(after.moved >= before.moved + 1);
    char where[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", srv[to].port);
    CHECK(fkv_remote_route(cli, k->str, where, sizeof where) && strcmp(where, want) == 0);
    /* the refresh runs when the worker is idle: give it a moment */
    for (int t = 0; t < 100 && after.slot_refreshes == before.slot_refreshes; t++) {
        rfx_sleep_ms(10);
        fkv_remote_get_counters(cli, &after);
    }
    CHECK(after.slot_refreshes > before.slot_refreshes);
    /* now straight to the new owner */
    fkv_remote_get_counters(cli, &before);
    CHECK(get_all());
    fkv_remote_get_counters(cli, &after);
    CHECK(after.moved == before.moved && after.asked == before.asked);
}

int main(void)
{
    rfx_require();
    REQUIRE(rfx_cluster_start(srv));
    char nodes[32];
    snprintf(nodes, sizeof nodes, "127.0.0.1:%d", srv[1].port);
    fkv_remote_config cfg;
    fkv_remote_config_default(&cfg);
    cfg.nodes = nodes; /* one seed: the others come from CLUSTER SLOTS */
    cfg.cluster = true;
    cfg.timeout_ms = 2000;
    char err[256];
    cli = fkv_remote_open(&cfg, err, sizeof err);
    REQUIRE(cli);
    test_spread();
    test_migration();
    fkv_remote_counters c;
    fkv_remote_get_counters(cli, &c);
    CHECK(c.err_connect + c.err_timeout + c.err_oom + c.err_other == 0);
    fkv_remote_close(cli);
    return check_done();
}
