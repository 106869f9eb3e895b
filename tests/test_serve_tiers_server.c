/* The tiers below the device in `fairkv serve` processes over the
 * stories260K model (ctx 128: prompts of about 80 tokens, 24 greedy ones):
 *  - --host-kv: under a budget that holds one request, a prompt evicted by
 *    another one is found again in the host tier (cached tokens, tier
 *    "host" hits), where the same server without it finds nothing, and
 *    the text is the same;
 *  - --remote over a real redis-server: a second instance answers a
 *    prompt the first one served from the chunks it wrote (cached tokens,
 *    remote hits, counted as another instance's, the imported tokens as
 *    remote hit tokens) with the text of an instance without the tier;
 *    the first, finding its own pages, counts no other instance's; another
 *    user, or another cache_salt, gets none of them;
 *  - a value corrupted in Redis (SETRANGE) is refused (corrupt counter)
 *    and the prompt computed: the text is still right;
 *  - --tier-admission seen: a prompt served once writes nothing to Redis
 *    (its pages counted in fairkv_remote_refused_total), served twice its
 *    pages are written and another instance finds them. */
#include "redis_fixture.h"
#include "serve_proc.h"

static const char *A = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
                       "with her friends. One day, she saw a big red ball and ran to get it. Her mom said she could "
                       "keep it if she was careful.";
static const char *B = "Tom had a small dog called Max. Every morning they walked to the river and watched the ducks "
                       "swim. One day Max jumped into the water and Tom laughed.";
static const char *C = "The sun was hot and the sky was blue. A little bird sat on a branch and sang a happy song. A "
                       "cat looked up at the bird and wanted to play with it, but the bird flew away.";

#define MAXTOK 24
static char model[1024];

/* Keys in the server (KEYS *: a test database of a few dozen). */
static int keys_of(int port, char names[][256], int cap)
{
    redisReply *rep = rfx_cmd(port, "KEYS *");
    int n = 0;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements && n < cap; i++)
        snprintf(names[n++], 256, "%s", rep->element[i]->str);
    freeReplyObject(rep);
    return n;
}

/* Waits until the server holds at least `want` keys (puts are queued). */
static int wait_keys(int port, long long want)
{
    for (int i = 0; i < 250; i++) {
        redisReply *rep = rfx_cmd(port, "DBSIZE");
        long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        freeReplyObject(rep);
        if (n >= want) return 1;
        sp_sleep_ms(20);
    }
    return 0;
}

/* DBSIZE once it has not moved for 300 ms (the puts queued so far landed) */
static long long stable_keys(int port)
{
    long long last = -2;
    for (int same = 0, i = 0; i < 100 && same < 3; i++) {
        redisReply *rep = rfx_cmd(port, "DBSIZE");
        long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        freeReplyObject(rep);
        same = n == last ? same + 1 : 0;
        last = n;
        sp_sleep_ms(100);
    }
    return last;
}

/* A counter of /metrics once it exceeds `than` (the server's snapshot of
 * the cache follows the step that answered), or its value after 2 s. */
static double metric_above(unsigned port, const char *series, double than)
{
    double v = sp_metric(port, series);
    for (int i = 0; i < 40 && !(v > than); i++) {
        sp_sleep_ms(50);
        v = sp_metric(port, series);
    }
    return v;
}

static void test_host_tier(const sp_answer *refA, unsigned ref_port)
{
    /* 160 KiB = 128 tokens of stories260K's f32 K/V: one request at a time
     * (cold chunks full precision, so B's chunks take A's place) */
    static sp_proc h; /* static: the exit cleanup holds a pointer to it */
    const char *args[] = {"--model", model, "--kv-budget", "160KiB", "--host-kv", "1MiB", "--quant", "off", NULL};
    REQUIRE(sp_start(&h, args) == 0);
    sp_answer a1, b, a2;
    sp_complete(h.port, A, NULL, NULL, MAXTOK, &a1);
    sp_complete(h.port, B, NULL, NULL, MAXTOK, &b);
    CHECK(a1.status == 200 && b.status == 200 && a1.cached == 0);
    double host0 = sp_metric(h.port, "fairkv_tier_hit_tokens_total{tier=\"host\"}");
    sp_complete(h.port, A, NULL, NULL, MAXTOK, &a2);
    double host1 = metric_above(h.port, "fairkv_tier_hit_tokens_total{tier=\"host\"}", host0);
    CHECKF(a2.cached > 0, "cached %ld", a2.cached);
    CHECKF(host1 > host0 && host1 > 0, "host hits %g -> %g", host0, host1);
    CHECKF(!strcmp(a2.text, refA->text), "host tier: '%s' vs '%s'", a2.text, refA->text);
    /* without the tier the same sequence finds nothing: B evicted A */
    sp_answer r2;
    sp_complete(ref_port, B, NULL, NULL, MAXTOK, &r2);
    sp_complete(ref_port, A, NULL, NULL, MAXTOK, &r2);
    CHECKF(r2.cached == 0, "reference cached %ld", r2.cached);
    CHECK(!strcmp(r2.text, refA->text));
    sp_end(&h);
}

int main(void)
{
    rfx_require();
    sp_model(model, sizeof model);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* the reference: no tier below the device, the same budget */
    sp_proc ref = {0};
    const char *rargs[] = {"--model", model, "--kv-budget", "160KiB", "--quant", "off", NULL};
    REQUIRE(sp_start(&ref, rargs) == 0);
    sp_answer refA, refC;
    sp_complete(ref.port, A, NULL, NULL, MAXTOK, &refA);
    sp_complete(ref.port, C, NULL, NULL, MAXTOK, &refC);
    REQUIRE(refA.status == 200 && refC.status == 200 && refA.text[0] && refC.text[0]);
    REQUIRE(refA.prompt > 64 && refA.prompt + MAXTOK <= 128);

    test_host_tier(&refA, ref.port);

    rfx_server rs = {0};
    REQUIRE(rfx_start(&rs, false));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", rs.port);
    sp_proc s1 = {0}, s2 = {0};
    const char *args[] = {"--model", model, "--remote", url, "--remote-timeout-ms", "2000", NULL};
    REQUIRE(sp_start(&s1, args) == 0);
    REQUIRE(sp_start(&s2, args) == 0);

    /* the first instance computes A and writes its pages back */
    sp_answer a;
    sp_complete(s1.port, A, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && a.cached == 0 && !strcmp(a.text, refA.text));
    long pages = (a.prompt + MAXTOK - 1) / 16; /* every token but the last sampled one has K/V */
    CHECKF(wait_keys(rs.port, pages), "want %ld keys", pages);
    /* the second finds them: cached, counted as remote hits, same text */
    sp_complete(s2.port, A, NULL, NULL, MAXTOK, &a);
    CHECKF(a.cached >= 64 && a.cached % 16 == 0, "second instance cached %ld", a.cached);
    CHECKF(metric_above(s2.port, "fairkv_remote_hits_total", 3) >= 4, "remote hits %g",
           sp_metric(s2.port, "fairkv_remote_hits_total"));
    CHECKF(!strcmp(a.text, refA.text), "remote: '%s' vs '%s'", a.text, refA.text);
    /* those pages were the first instance's: every leading page found is
     * another instance's, and the tokens imported are the cached ones */
    double foreign2 = sp_metric(s2.port, "fairkv_remote_foreign_hits_total");
    CHECKF(foreign2 == sp_metric(s2.port, "fairkv_remote_hits_total") && foreign2 >= 4, "foreign hits %g of %g",
           foreign2, sp_metric(s2.port, "fairkv_remote_hits_total"));
    CHECKF(metric_above(s2.port, "fairkv_remote_hit_tokens_total", 0) == (double)a.cached, "remote hit tokens %g, cached %ld",
           sp_metric(s2.port, "fairkv_remote_hit_tokens_total"), a.cached);
    CHECK(sp_metric(s2.port, "fairkv_tier_hit_tokens_total{tier=\"device\"}") == 0);
    /* the first instance asked again finds A on its device, and in Redis
     * pages it wrote itself: none of them another instance's */
    sp_complete(s1.port, A, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && a.cached > 0);
    CHECKF(metric_above(s1.port, "fairkv_remote_hits_total", 0) > 0, "first instance: remote hits %g",
           sp_metric(s1.port, "fairkv_remote_hits_total"));
    CHECKF(sp_metric(s1.port, "fairkv_remote_foreign_hits_total") == 0, "first instance: foreign hits %g",
           sp_metric(s1.port, "fairkv_remote_foreign_hits_total"));
    CHECK(sp_metric(s1.port, "fairkv_remote_hit_tokens_total") == 0);
    /* namespaces: another user, or the same one with a cache_salt, sees none */
    sp_complete(s2.port, A, "mallory", NULL, MAXTOK, &a);
    CHECKF(a.status == 200 && a.cached == 0, "another user cached %ld", a.cached);
    CHECK(!strcmp(a.text, refA.text));
    sp_complete(s2.port, A, NULL, "salt-1", MAXTOK, &a);
    CHECKF(a.status == 200 && a.cached == 0, "another salt cached %ld", a.cached);
    CHECK(sp_metric(s2.port, "fairkv_remote_corrupt_total") == 0);

    /* corruption: s1 writes C's pages, every one of them is damaged in its
     * payload, s2 must refuse them all and compute C */
    static char before[64][256], after[64][256];
    REQUIRE(stable_keys(rs.port) > 0);
    int nb = keys_of(rs.port, before, 64);
    sp_complete(s1.port, C, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && !strcmp(a.text, refC.text));
    long cpages = (a.prompt + MAXTOK - 1) / 16;
    REQUIRE(wait_keys(rs.port, nb + cpages));
    int na = keys_of(rs.port, after, 64), damaged = 0;
    for (int i = 0; i < na; i++) {
        int old = 0;
        for (int k = 0; k < nb && !old; k++) old = !strcmp(after[i], before[k]);
        if (old) continue;
        redisReply *rep = rfx_cmd(rs.port, "SETRANGE %s 100 %s", after[i], "CORRUPTED");
        damaged += rep && rep->type == REDIS_REPLY_INTEGER;
        freeReplyObject(rep);
    }
    CHECKF(damaged == cpages, "damaged %d of %ld", damaged, cpages);
    double corrupt0 = sp_metric(s2.port, "fairkv_remote_corrupt_total");
    sp_complete(s2.port, C, NULL, NULL, MAXTOK, &a);
    CHECKF(a.status == 200 && a.cached == 0, "corrupt values served: cached %ld", a.cached);
    CHECKF(!strcmp(a.text, refC.text), "after corruption: '%s' vs '%s'", a.text, refC.text);
    CHECKF(metric_above(s2.port, "fairkv_remote_corrupt_total", corrupt0) > corrupt0, "corrupt %g -> %g", corrupt0,
           sp_metric(s2.port, "fairkv_remote_corrupt_total"));

    sp_end(&s1);
    sp_end(&s2);

    /* a remote quota: an instance whose tenants may hold 60 KiB each (two
     * or three of stories260K's 20 KiB pages) writes A's pages back and the
     * client deletes past the quota: its own Redis ends with at most three
     * keys, not one a page */
    rfx_server rq = {0};
    REQUIRE(rfx_start(&rq, false));
    char qurl[64];
    snprintf(qurl, sizeof qurl, "redis://127.0.0.1:%d", rq.port);
    sp_proc s3 = {0};
    const char *qargs[] = {"--model", model, "--remote", qurl, "--remote-quota", "60KiB", NULL};
    REQUIRE(sp_start(&s3, qargs) == 0);
    sp_complete(s3.port, A, "quota-user", NULL, MAXTOK, &a);
    CHECK(a.status == 200 && !strcmp(a.text, refA.text));
    long qpages = (a.prompt + MAXTOK - 1) / 16;
    long long held = stable_keys(rq.port);
    CHECKF(qpages >= 5 && held >= 1 && held <= 3, "quota: %lld keys held of %ld pages written", held, qpages);
    sp_end(&s3);
    rfx_stop(&rq);

    /* admission (--tier-admission seen): A served once is looked up and
     * computed, one sighting of each page: nothing is written, the pages
     * are counted as refused; served again (a second sighting) its pages
     * go to Redis, and another instance finds them */
    rfx_server ra = {0};
    REQUIRE(rfx_start(&ra, false));
    char aurl[64];
    snprintf(aurl, sizeof aurl, "redis://127.0.0.1:%d", ra.port);
    sp_proc s4 = {0}, s5 = {0};
    const char *aargs[] = {"--model", model, "--remote", aurl, "--remote-timeout-ms", "2000", "--tier-admission",
                           "seen", NULL};
    REQUIRE(sp_start(&s4, aargs) == 0);
    REQUIRE(sp_start(&s5, aargs) == 0);
    sp_complete(s4.port, A, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && !strcmp(a.text, refA.text));
    long apages = (a.prompt + MAXTOK - 1) / 16;
    CHECKF(metric_above(s4.port, "fairkv_remote_refused_total", apages - 1) == apages, "refused %g of %ld",
           sp_metric(s4.port, "fairkv_remote_refused_total"), apages);
    CHECKF(stable_keys(ra.port) == 0, "written after one sighting: %lld", stable_keys(ra.port));
    CHECK(sp_metric(s4.port, "fairkv_remote_puts_total") == 0);
    sp_complete(s4.port, A, NULL, NULL, MAXTOK, &a);
    CHECK(a.status == 200 && !strcmp(a.text, refA.text));
    CHECKF(wait_keys(ra.port, apages), "want %ld keys after the second sighting", apages);
    CHECK(sp_metric(s4.port, "fairkv_remote_refused_total") == apages);
    sp_complete(s5.port, A, NULL, NULL, MAXTOK, &a);
    CHECKF(a.cached >= 64 && !strcmp(a.text, refA.text), "admitted pages: cached %ld", a.cached);
    CHECK(metric_above(s5.port, "fairkv_remote_hits_total", 3) >= 4);
    /* the library's own counter of host demotions refused is there too */
    CHECK(sp_metric(s4.port, "fairkv_tier_refused_total{tier=\"device\"}") == 0);
    sp_end(&s4);
    sp_end(&s5);
    rfx_stop(&ra);

    sp_end(&ref);
    rfx_stop(&rs);
    curl_global_cleanup();
    return check_done();
}
