/* The engine backend's pieces around the remote tier, without Redis:
 *  - the --remote node list (redis:// dropped per node, bad or too long
 *    lists refused);
 *  - the client indexes and name ids (src/server/client_names.c): first
 *    come indexes, SHA-256 ids per domain (a known answer computed with
 *    Python's hashlib), the domain and name kept apart;
 *  - the remote tier's /metrics families, generated from the list of
 *    src/metrics/remote_metrics.h: every family with HELP and TYPE, its
 *    values in their labels, an absent family left out, and nothing the
 *    server's family filter would drop as a repeat. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "server/backend_remote.h"
#include "server/client_names.h"
#include "server/metrics_http.h"

static int nodes_are(const char *spec, size_t cap, const char *want)
{
    char out[64];
    memset(out, 'z', sizeof out);
    int rc = fkv_eng_remote_nodes(spec, out, cap);
    if (!want) return rc == -1;
    return rc == 0 && !strcmp(out, want);
}

static void test_nodes(void)
{
    CHECK(nodes_are("redis://a:1,b:2", 64, "a:1,b:2"));
    CHECK(nodes_are("a:1,redis://b:2", 64, "a:1,b:2"));
    CHECK(nodes_are("redis://127.0.0.1:6379", 64, "127.0.0.1:6379"));
    CHECK(nodes_are("h:1", 4, "h:1")); /* exactly fits */
    CHECK(nodes_are("h:12", 4, NULL)); /* one byte over */
    CHECK(nodes_are("a:1,b:2", 4, NULL));
    CHECK(nodes_are("", 64, NULL));
    CHECK(nodes_are("redis://", 64, NULL));
    CHECK(nodes_are("h:1", 0, NULL));
}

static void test_names(void)
{
    fkv_client_names c = {0};
    CHECK(fkv_client_index(&c, NULL) == 0);
    CHECK(fkv_client_index(&c, "") == 0);
    CHECK(fkv_client_index(&c, "alice") == 1);
    CHECK(fkv_client_index(&c, "bob") == 2);
    CHECK(fkv_client_index(&c, "alice") == 1);
    char name[32];
    for (int i = 3; i <= 63; i++) {
        snprintf(name, sizeof name, "user%d", i);
        CHECK(fkv_client_index(&c, name) == (uint64_t)i);
    }
    /* past the table: a shared index, the same for the same name */
    uint64_t x = fkv_client_index(&c, "late one");
    CHECK(x >= 1 && x <= 63 && fkv_client_index(&c, "late one") == x);
    CHECK(c.n == 63 && fkv_client_index(&c, "user40") == 40);
    fkv_client_names_free(&c);
    CHECK(c.n == 0);

    CHECK(fkv_name_id("fairkv tenant", NULL) == 0 && fkv_name_id("fairkv tenant", "") == 0);
    /* first 8 bytes of SHA-256("fairkv tenant\0alice"), little-endian */
    CHECK(fkv_name_id("fairkv tenant", "alice") == 0x51d66364464e80feull);
    CHECK(fkv_name_id("fairkv cache_salt", "alice") == 0x8c6fda80e38be0f0ull);
    CHECK(fkv_name_id("a", "bc") != fkv_name_id("ab", "c"));
    CHECK(fkv_name_id("d", "bob") != fkv_name_id("d", "alice"));
}

static int has_line(const fkv_textbuf *t, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    size_t wl = strlen(want);
    if (t->len >= wl - 1 && !memcmp(t->data, want + 1, wl - 1)) return 1;
    for (size_t i = 0; i + wl <= t->len; i++)
        if (!memcmp(t->data + i, want, wl)) return 1;
    return 0;
}

static void test_metrics(void)
{
    fkv_remote_stats s;
    memset(&s, 0, sizeof s);
    s.fairkv_remote_gets_total[0] = 11;
    s.fairkv_remote_hits_total[0] = 7;
    s.fairkv_remote_misses_total[0] = 4;
    s.fairkv_remote_corrupt_total[0] = 1;
    s.fairkv_remote_puts_total[0] = 9;
    s.fairkv_remote_put_drops_total[0] = 2;
    for (int i = 0; i < FKV__RL_RERR; i++) s.fairkv_remote_errors_total[i] = 100 + (uint64_t)i;
    s.fairkv_remote_bytes_total[0] = 18446744073709551615ull; /* printed exactly, not as a double */
    s.fairkv_remote_bytes_total[1] = 5;
    s.fairkv_remote_refused_total[0] = 3;
    s.fairkv_remote_foreign_hits_total[0] = 6;
    s.fairkv_remote_hit_tokens_total[0] = 96;
    fkv_textbuf t;
    fkv_textbuf_init(&t);
    fkv_prom_remote(&t, &s);
    REQUIRE(!t.oom && t.len);
    const char *lines[] = {
        "# HELP fairkv_remote_gets_total Chunk keys looked up in the remote tier",
        "# TYPE fairkv_remote_gets_total counter",
        "fairkv_remote_gets_total 11",
        "fairkv_remote_hits_total 7",
        "fairkv_remote_misses_total 4",
        "fairkv_remote_corrupt_total 1",
        "fairkv_remote_puts_total 9",
        "fairkv_remote_put_drops_total 2",
        "# TYPE fairkv_remote_errors_total counter",
        "fairkv_remote_errors_total{kind=\"connect\"} 100",
        "fairkv_remote_errors_total{kind=\"timeout\"} 101",
        "fairkv_remote_errors_total{kind=\"oom\"} 102",
        "fairkv_remote_errors_total{kind=\"other\"} 103",
        "fairkv_remote_bytes_total{direction=\"read\"} 18446744073709551615",
        "fairkv_remote_bytes_total{direction=\"written\"} 5",
        "# HELP fairkv_remote_refused_total Pages the admission filter kept from the remote tier",
        "fairkv_remote_refused_total 3",
        "# TYPE fairkv_remote_foreign_hits_total counter",
        "fairkv_remote_foreign_hits_total 6",
        "# TYPE fairkv_remote_hit_tokens_total counter",
        "fairkv_remote_hit_tokens_total 96",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) CHECKF(has_line(&t, lines[i]), "no line '%s'", lines[i]);
    /* 11 families, each with HELP and TYPE; 15 samples */
    int helps = 0, types = 0, samples = 0;
    for (size_t i = 0; i < t.len; i++)
        if (i == 0 || t.data[i - 1] == '\n') {
            helps += !strncmp(t.data + i, "# HELP ", 7);
            types += !strncmp(t.data + i, "# TYPE ", 7);
            samples += t.data[i] != '#';
        }
    CHECKF(helps == 11 && types == 11 && samples == 15, "%d HELP, %d TYPE, %d samples", helps, types, samples);
    /* the server's filter keeps every line: no family twice */
    fkv_textbuf f;
    fkv_textbuf_init(&f);
    fkv_prom_append_filtered(&f, t.data, t.len, NULL, 0);
    CHECK(f.len == t.len && !memcmp(f.data, t.data, t.len));
    fkv_textbuf_free(&f);

    /* an absent family: neither its header nor its sample */
    s.absent = 1ull << FKV__RM_fairkv_remote_refused_total;
    fkv_textbuf_clear(&t);
    fkv_prom_remote(&t, &s);
    CHECK(!strstr(t.data, "fairkv_remote_refused"));
    CHECK(has_line(&t, "fairkv_remote_gets_total 11"));
    s.absent = 1ull << FKV__RM_fairkv_remote_gets_total;
    fkv_textbuf_clear(&t);
    fkv_prom_remote(&t, &s);
    CHECK(!strstr(t.data, "gets_total") && has_line(&t, "fairkv_remote_refused_total 3"));
    fkv_textbuf_free(&t);
}

int main(void)
{
    test_nodes();
    test_names();
    test_metrics();
    return check_done();
}
