/* `fairkv serve --remote ... --remote-cluster` over a real 3-node Redis
 * Cluster, seeded with one node only: the pages one instance writes are
 * spread over the nodes by slot, and a second instance answers the prompt
 * from them with the text of an instance without the tier. */
#include "redis_fixture.h"
#include "serve_proc.h"

enum { NODES = 3, MAXTOK = 24 };
static rfx_server srv[NODES];

static const char *P = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
                       "with her friends. One day, she saw a big red ball and ran to get it. Her mom said she could "
                       "keep it if she was careful.";

static long long total_keys(int *nodes_used)
{
    long long sum = 0;
    *nodes_used = 0;
    for (int i = 0; i < NODES; i++) {
        long long n = rfx_int(srv[i].port, "DBSIZE", NULL);
        if (n > 0) sum += n, (*nodes_used)++;
    }
    return sum;
}

int main(void)
{
    rfx_require();
    char model[1024];
    sp_model(model, sizeof model);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static sp_proc ref, s1, s2;
    const char *rargs[] = {"--model", model, NULL};
    REQUIRE(sp_start(&ref, rargs) == 0);
    sp_answer want, a;
    sp_complete(ref.port, P, NULL, NULL, MAXTOK, &want);
    REQUIRE(want.status == 200 && want.text[0]);
    sp_end(&ref);

    REQUIRE(rfx_cluster_start(srv));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv[1].port); /* one seed: the rest from CLUSTER SLOTS */
    const char *args[] = {"--model", model, "--remote", url, "--remote-cluster", "--remote-timeout-ms", "2000", NULL};
    REQUIRE(sp_start(&s1, args) == 0);
    REQUIRE(sp_start(&s2, args) == 0);
    sp_complete(s1.port, P, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && a.cached == 0 && !strcmp(a.text, want.text));
    long pages = (a.prompt + MAXTOK - 1) / 16;
    int used = 0;
    long long keys = 0;
    for (int i = 0; i < 250 && keys < pages; i++) {
        rfx_sleep_ms(20);
        keys = total_keys(&used);
    }
    CHECKF(keys == pages && used >= 2, "%lld keys of %ld on %d nodes", keys, pages, used);
    sp_complete(s2.port, P, NULL, NULL, MAXTOK, &a);
    CHECKF(a.cached >= 64, "cached %ld", a.cached);
    CHECKF(!strcmp(a.text, want.text), "'%s' vs '%s'", a.text, want.text);
    CHECK(sp_metric(s2.port, "fairkv_remote_hits_total") >= 4);
    sp_end(&s1);
    sp_end(&s2);
    curl_global_cleanup();
    return check_done();
}
