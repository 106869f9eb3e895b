/* Redis dies under load: a `fairkv serve --remote` instance (stories260K)
 * serves concurrent greedy requests from several client threads while its
 * redis-server is killed (SIGKILL) part way.  Every request still completes
 * with the text of an instance without the tier (the lookup misses, the
 * write-back is dropped, the prompt is computed), the error counter of
 * /metrics rises, and once Redis is back on its port the client writes
 * there again. */
#include <pthread.h>

#include "redis_fixture.h"
#include "serve_proc.h"

#define MAXTOK 24
#define NPROMPT 6
#define NTHREAD 4
#define PER_THREAD 6

static const char *names[NPROMPT] = {"Lily", "Tom", "Sue", "Max", "Ben", "Anna"};
static char prompts[NPROMPT][512];
static char want[NPROMPT][2048];
static unsigned port;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int n_done, n_ok, n_bad;

static void *client(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int p = (t + i) % NPROMPT;
        sp_answer a;
        sp_complete(port, prompts[p], NULL, NULL, MAXTOK, &a);
        int ok = a.status == 200 && !strcmp(a.text, want[p]);
        if (!ok) fprintf(stderr, "prompt %d: status %ld text '%s' want '%s'\n", p, a.status, a.text, want[p]);
        pthread_mutex_lock(&mu);
        n_done++;
        n_ok += ok;
        n_bad += !ok;
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static int done_now(void)
{
    pthread_mutex_lock(&mu);
    int d = n_done;
    pthread_mutex_unlock(&mu);
    return d;
}

static double errors(unsigned p) { return sp_metric(p, "fairkv_remote_errors_total"); }

int main(void)
{
    rfx_require();
    char model[1024];
    sp_model(model, sizeof model);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* prompts sharing their first sentence, so pages are shared too */
    for (int p = 0; p < NPROMPT; p++)
        snprintf(prompts[p], sizeof prompts[p],
                 "Once upon a time, there was a little child who loved the park. One day, %s saw a big red ball "
                 "and ran to get it. %s's mom said to be careful and to come home before dark.",
                 names[p], names[p]);
    sp_proc ref = {0}, s = {0};
    const char *rargs[] = {"--model", model, NULL};
    REQUIRE(sp_start(&ref, rargs) == 0);
    for (int p = 0; p < NPROMPT; p++) {
        sp_answer a;
        sp_complete(ref.port, prompts[p], NULL, NULL, MAXTOK, &a);
        REQUIRE(a.status == 200 && a.text[0] && a.prompt + MAXTOK <= 128);
        snprintf(want[p], sizeof want[p], "%s", a.text);
    }
    sp_end(&ref);

    rfx_server rs = {0};
    REQUIRE(rfx_start(&rs, false));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", rs.port);
    const char *args[] = {"--model", model, "--remote", url, "--remote-timeout-ms", "200", NULL};
    REQUIRE(sp_start(&s, args) == 0);
    port = s.port;
    double err0 = errors(port);
    CHECKF(err0 == 0, "errors before %g", err0);

    pthread_t th[NTHREAD];
    for (int t = 0; t < NTHREAD; t++) REQUIRE(pthread_create(&th[t], NULL, client, (void *)(intptr_t)t) == 0);
    /* kill it once a quarter of the requests are done, the rest run without */
    for (int i = 0; i < 1500 && done_now() < NTHREAD * PER_THREAD / 4; i++) sp_sleep_ms(10);
    int at_kill = done_now();
    rfx_stop(&rs);
    for (int t = 0; t < NTHREAD; t++) pthread_join(th[t], NULL);
    CHECKF(at_kill < NTHREAD * PER_THREAD, "Redis was killed after the load (%d done)", at_kill);
    CHECKF(n_ok == NTHREAD * PER_THREAD && n_bad == 0, "%d right, %d wrong", n_ok, n_bad);
    /* the client notices when it next talks to Redis (the write-backs) */
    double err1 = err0;
    for (int i = 0; i < 100 && !(err1 > err0); i++) {
        sp_sleep_ms(50);
        err1 = errors(port);
    }
    CHECKF(err1 > err0, "errors %g -> %g", err0, err1);
    CHECK(sp_metric(port, "fairkv_remote_hits_total") >= 0);

    /* Redis back on its port (empty: no persistence): the client
     * reconnects after its backoff and the write-back lands again */
    REQUIRE(rfx_start(&rs, false));
    long long keys = 0;
    for (int i = 0; i < 100 && keys <= 0; i++) {
        sp_answer a;
        sp_complete(port, prompts[i % NPROMPT], NULL, NULL, MAXTOK, &a);
        CHECK(a.status == 200 && !strcmp(a.text, want[i % NPROMPT]));
        sp_sleep_ms(100);
        keys = rfx_int(rs.port, "DBSIZE", NULL);
    }
    CHECKF(keys > 0, "no write-back after Redis came back (%lld keys)", keys);

    sp_end(&s);
    rfx_stop(&rs);
    curl_global_cleanup();
    return check_done();
}
