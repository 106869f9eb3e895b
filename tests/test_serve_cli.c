/* The `fairkv serve` process: an unknown backend is a clear error, and
 * SIGTERM lets a running stream finish, then the process exits 0; `fairkv
 * model init` + `fairkv serve --model` serve a completion with the engine
 * backend, and a bad engine option (or a negative --read-timeout) is refused
 * naming it.  Runs the
 * fairkv binary of the build tree (CTest's working directory). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fairkv.h"
#include "http_client.h"

static const char *BIN = "./fairkv";

/* 1 when the server's /metrics shows a running request. */
static int running(unsigned port)
{
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    const char *m = r.body.data ? strstr(r.body.data, "\nfairkv_num_requests_running ") : NULL;
    int on = m && atof(m + strlen("\nfairkv_num_requests_running ")) >= 1;
    http_free(&r);
    return on;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* waitpid with a bound; the exit status, or -1 (the child is then killed). */
static int wait_exit(pid_t pid, int ms)
{
    int st;
    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* Runs BIN with args, stdout+stderr into a pipe; returns the pid. */
static pid_t spawn(char *const argv[], int *out_fd)
{
    int p[2];
    if (pipe(p)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        execv(BIN, argv);
        _exit(127);
    }
    close(p[1]);
    *out_fd = p[0];
    return pid;
}

/* Reads from fd until `want` appears or ms pass (bounded). */
static int read_until(int fd, char *buf, size_t cap, const char *want, int ms)
{
    size_t len = 0;
    int64_t end = fkv_monotonic_now_ns() + (int64_t)ms * 1000000;
    buf[0] = 0;
    while (fkv_monotonic_now_ns() < end && len + 1 < cap) {
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(fd, &fs);
        struct timeval tv = {0, 50000};
        if (select(fd + 1, &fs, NULL, NULL, &tv) <= 0) continue;
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = 0;
        if (strstr(buf, want)) return 1;
    }
    return 0;
}

/* argv is refused at start-up: exit status 2; its first line of stderr
 * goes to buf. */
static void refused(char *const argv[], char *buf, size_t cap)
{
    int fd;
    pid_t pid = spawn(argv, &fd);
    REQUIRE(pid > 0);
    read_until(fd, buf, cap, "\n", 5000);
    close(fd);
    CHECK(wait_exit(pid, 5000) == 2);
}

typedef struct bg {
    pthread_t t;
    unsigned port;
    http_resp r;
} bg;

static void *stream(void *arg)
{
    bg *b = arg;
    const char *body = "{\"model\":\"fairkv-fake\",\"prompt\":\"abc\",\"max_tokens\":50,\"stream\":true}";
    http_do(&b->r, b->port, "POST", "/v1/completions", body, strlen(body), NULL);
    return NULL;
}

int main(void)
{
    if (access(BIN, X_OK)) {
        fprintf(stderr, "%s not found: run from the build directory (ctest does)\n", BIN);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char buf[4096];
    int fd;

    char *bad[] = {"fairkv", "serve", "--port", "0", "--backend", "nonesuch", NULL};
    refused(bad, buf, sizeof buf);
    CHECKF(strstr(buf, "unknown backend 'nonesuch'") && strstr(buf, "fake"), "stderr: %s", buf);

    char *badrt[] = {"fairkv", "serve", "--port", "0", "--read-timeout", "-1", NULL};
    refused(badrt, buf, sizeof buf);
    CHECKF(strstr(buf, "--read-timeout needs an integer"), "stderr: %s", buf);

    /* llama-server's -ub below the step's token budget has no equivalent: refused, saying why */
    char *badub[] = {"fairkv", "serve", "--port", "0", "-b", "128", "-ub", "32", NULL};
    refused(badub, buf, sizeof buf);
    CHECKF(strstr(buf, "-ub/--ubatch-size 32") && strstr(buf, "token budget 128"), "stderr: %s", buf);

    char *good[] = {"fairkv", "serve", "--port", "0", "--backend-opt", "pace_ms=10", "--read-timeout", "5",
                    "--max-connections-per-ip", "8", NULL};
    pid_t pid = spawn(good, &fd);
    REQUIRE(pid > 0);
    REQUIRE(read_until(fd, buf, sizeof buf, "/ (POST", 5000));
    const char *p = strstr(buf, "127.0.0.1:");
    REQUIRE(p);
    bg b = {.port = (unsigned)atoi(p + 10)};
    REQUIRE(b.port > 0);
    pthread_create(&b.t, NULL, stream, &b);
    /* until the stream is under way (50 tokens take 0.5 s); a fixed sleep
     * lost that race on a loaded machine */
    for (int i = 0; i < 500 && !running(b.port); i++) sleep_ms(10);
    kill(pid, SIGTERM);
    pthread_join(b.t, NULL);
    const char *body = b.r.body.data ? b.r.body.data : "";
    size_t bl = strlen(body);
    CHECKF(b.r.status == 200 && bl > 14 && !strcmp(body + bl - 14, "data: [DONE]\n\n"), "status %ld body %s",
           b.r.status, body);
    int tokens = 0;
    for (const char *q = body; (q = strstr(q, "\"finish_reason\":null")); q++) tokens++;
    CHECK(tokens == 50);
    CHECK(wait_exit(pid, 10000) == 0);
    read_until(fd, buf, sizeof buf, "finishing", 1000);
    CHECKF(strstr(buf, "SIGTERM") && strstr(buf, "finishing 1 running"), "stderr: %s", buf);
    close(fd);
    /* gone: nothing listens any more */
    http_resp r = {0};
    http_do(&r, b.port, "GET", "/health", NULL, 0, NULL);
    CHECK(r.cc == CURLE_COULDNT_CONNECT);
    http_free(&r);
    http_free(&b.r);

    /* the README's path: model init, serve --model, one completion */
    char dir[] = "/tmp/fkv-serve-cli-XXXXXX", model[64];
    REQUIRE(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/t.gguf", dir);
    char *init[] = {"fairkv", "model", "init", "--preset", "tiny", "--out", model, NULL};
    pid = spawn(init, &fd);
    REQUIRE(pid > 0);
    read_until(fd, buf, sizeof buf, "\n", 10000);
    close(fd);
    REQUIRE(wait_exit(pid, 10000) == 0);
    char *badq[] = {"fairkv", "serve", "--port", "0", "--model", model, "--quant", "sometimes", NULL};
    refused(badq, buf, sizeof buf);
    CHECKF(strstr(buf, "quant=sometimes"), "stderr: %s", buf);
    /* a remote tier's node list is checked before serving */
    char *badr[] = {"fairkv", "serve", "--port", "0", "--model", model, "--remote", "redis://nohostport", NULL};
    refused(badr, buf, sizeof buf);
    CHECKF(strstr(buf, "bad node \"nohostport\""), "stderr: %s", buf);
    char *eng[] = {"fairkv", "serve", "--port", "0", "--model", model, "--kv-budget", "1MiB", "--policy", "lru", NULL};
    pid = spawn(eng, &fd);
    REQUIRE(pid > 0);
    REQUIRE(read_until(fd, buf, sizeof buf, "/ (POST", 10000));
    CHECKF(strstr(buf, "model t (backend engine)"), "banner: %s", buf);
    p = strstr(buf, "127.0.0.1:");
    REQUIRE(p);
    unsigned eport = (unsigned)atoi(p + 10);
    const char *req = "{\"model\":\"t\",\"prompt\":\"hi\",\"max_tokens\":4,\"seed\":1}";
    http_do(&r, eport, "POST", "/v1/completions", req, strlen(req), NULL);
    body = r.body.data ? r.body.data : "";
    /* BOS + 2 bytes; 4 tokens unless the random model drew end-of-sequence */
    CHECKF(r.status == 200 && strstr(body, "\"prompt_tokens\":3"), "status %ld body %s", r.status, body);
    http_free(&r);
    kill(pid, SIGTERM);
    CHECK(wait_exit(pid, 10000) == 0);
    close(fd);
    unlink(model);
    rmdir(dir);
    curl_global_cleanup();
    return check_done();
}
