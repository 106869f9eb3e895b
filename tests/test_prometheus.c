/* Integration with a real Prometheus server: it scrapes /metrics on
 * loopback and kv_cache_miss_rate{request_type="short"} read back through
 * its HTTP query API equals what the server reports. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "server_fixture.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A loopback port free right now (Prometheus binds it a moment later). */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    unsigned p = 0;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        p = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return p;
}

/* The server's own value of a series in its /metrics text, or -1. */
static double server_value(unsigned port, const char *series)
{
    http_resp r = {0};
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    double v = -1;
    size_t n = strlen(series);
    for (const char *p = r.body.data; p && (p = strstr(p, series)); p += n)
        if ((p == r.body.data || p[-1] == '\n') && p[n] == ' ') v = atof(p + n + 1);
    http_free(&r);
    return v;
}

/* The instant value of a PromQL query from Prometheus, or 0 if not there yet. */
static int prom_query(unsigned web, const char *q, double *out)
{
    CURL *h = curl_easy_init();
    char *esc = curl_easy_escape(h, q, 0);
    char path[512];
    snprintf(path, sizeof path, "/api/v1/query?query=%s", esc);
    curl_free(esc);
    curl_easy_cleanup(h);
    http_resp r = {0};
    http_do(&r, web, "GET", path, NULL, 0, NULL);
    int ok = 0;
    if (r.status == 200 && r.body.data) {
        cJSON *j = cJSON_Parse(r.body.data);
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "data"), "result");
        const cJSON *val = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(res, 0), "value");
        const cJSON *s = cJSON_GetArrayItem(val, 1);
        if (cJSON_IsString(s)) {
            *out = atof(s->valuestring);
            ok = 1;
        }
        cJSON_Delete(j);
    }
    http_free(&r);
    return ok;
}

int main(void)
{
    char prom[512];
    fkv_backend be;
    fkv_server *srv;
    unsigned port;
    fixture_start_for_tool("prometheus", prom, sizeof prom, &be, &srv, &port);
    const char *series = "kv_cache_miss_rate{request_type=\"short\"}";
    double want = server_value(port, series);
    REQUIRE(want >= 0);
    /* a zero would match a series that is merely present: the fixture's
     * pressure must make short requests miss */
    CHECKF(want > 0, "the fixture produced no short misses; the comparison would be weak");

    char dir[] = "/tmp/fkv_prometheus_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char cfgpath[128], logpath[128], data[128];
    snprintf(cfgpath, sizeof cfgpath, "%s/prometheus.yml", dir);
    snprintf(logpath, sizeof logpath, "%s/prometheus.log", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    FILE *f = fopen(cfgpath, "w");
    REQUIRE(f);
    fprintf(f,
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: fairkv\n    static_configs:\n      - targets: ['127.0.0.1:%u']\n",
            port);
    fclose(f);
    unsigned web = free_port();
    REQUIRE(web > 0);
    char listen[64], a_cfg[160], a_data[160];
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%u", web);
    snprintf(a_cfg, sizeof a_cfg, "--config.file=%s", cfgpath);
    snprintf(a_data, sizeof a_data, "--storage.tsdb.path=%s", data);

    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execl(prom, prom, a_cfg, a_data, listen, "--web.enable-lifecycle", (char *)NULL);
        _exit(127);
    }
    /* bounded: Prometheus starts, scrapes every second, answers queries */
    double got = -1;
    int found = 0;
    int64_t t0 = fkv_monotonic_now_ns();
    while (!found && fkv_monotonic_now_ns() - t0 < (int64_t)30 * 1000000000) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            pid = -1;
            break;
        }
        sleep_ms(250);
        found = prom_query(web, series, &got);
    }
    printf("server %s = %.17g; Prometheus read %.17g after %.1f s\n", series, want, got,
           (double)(fkv_monotonic_now_ns() - t0) * 1e-9);
    CHECKF(found, "Prometheus never returned %s (log in %s)", series, logpath);
    CHECK(found && got == want);
    /* the scrape saw the server's own families too */
    double ttft = -1;
    CHECK(prom_query(web, "sum(fairkv_time_to_first_token_seconds_count)", &ttft) && ttft == FIXTURE_REQUESTS);

    if (pid > 0) {
        kill(pid, SIGTERM);
        int st = 0, gone = 0;
        for (int i = 0; i < 100 && !gone; i++) {
            if (waitpid(pid, &st, WNOHANG) == pid) gone = 1;
            else sleep_ms(100);
        }
        if (!gone) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
    }
    if (!check_fail_) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
