/* Slow and idle clients cannot lock others out of the server (fake backend,
 * in process, loopback):
 *   - 300 half-open requests from 127.0.0.1 (headers and one byte of body,
 *     then silence) take at most max_conn_per_ip connections; a client at
 *     127.0.0.2 (Linux routes all of 127/8 to lo) still gets its completion
 *     and /health at once;
 *   - the idle ones are closed by the server after read_timeout_s, and so is
 *     a client that trickles one header byte every 200 ms (an idle timeout
 *     alone would keep it forever);
 *   - a streamed and a whole completion that last longer than the read
 *     timeout are not cut by it;
 *   - /health and /metrics answer at once while every generation slot and
 *     the queue are full (completions get 429). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "server/server.h"
#include "server/textbuf.h"

#define N_IDLE 300
#define READ_TIMEOUT_S 3

static unsigned port;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
}

/* A TCP connection to the server from source address `src`, or -1. */
static int open_from(const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, src, &a.sin_addr);
    struct sockaddr_in d = {0};
    d.sin_family = AF_INET;
    d.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || connect(fd, (struct sockaddr *)&d, sizeof d)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One request (Connection: close) from `src`; the status (0: no answer) and
 * the whole answer in out. */
static int raw_request(const char *src, const char *method, const char *path, const char *body, fkv_textbuf *out)
{
    fkv_textbuf_init(out);
    int fd = open_from(src);
    if (fd < 0) return 0;
    char head[512];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, blen);
    if (send_all(fd, head, (size_t)n) || (blen && send_all(fd, body, blen))) {
        close(fd);
        return 0;
    }
    double give_up = now_s() + 20;
    char buf[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) < 0 && errno != EINTR) break;
        if (now_s() > give_up) break;
        if (!p.revents) continue;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
        fkv_textbuf_append(out, buf, (size_t)k);
    }
    close(fd);
    int status = 0;
    if (out->data && out->len > 12 && !strncmp(out->data, "HTTP/1.", 7)) status = atoi(out->data + 9);
    return status;
}

static const char *text_of(const fkv_textbuf *b)
{
    return b->data ? b->data : "";
}

/* A request in its own thread, timed. */
typedef struct job {
    pthread_t t;
    const char *src, *method, *path, *body;
    int status;
    double seconds;
    fkv_textbuf out;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    double t0 = now_s();
    j->status = raw_request(j->src, j->method, j->path, j->body, &j->out);
    j->seconds = now_s() - t0;
    return NULL;
}

static void job_start(job *j, const char *src, const char *method, const char *path, const char *body)
{
    memset(j, 0, sizeof *j);
    j->src = src, j->method = method, j->path = path, j->body = body;
    REQUIRE(pthread_create(&j->t, NULL, job_main, j) == 0);
}

/* A client that sends one header byte every 200 ms, never finishing its
 * headers: closed_after is when the server closed it (< 0: it did not). */
typedef struct trickle {
    pthread_t t;
    double closed_after;
} trickle;

static void *trickle_main(void *arg)
{
    trickle *tr = arg;
    tr->closed_after = -1;
    double t0 = now_s();
    int fd = open_from("127.0.0.3");
    if (fd < 0) return NULL;
    const char *head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    int closed = send_all(fd, head, strlen(head)) != 0;
    while (!closed && now_s() - t0 < READ_TIMEOUT_S + 4) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            char b[256];
            closed = recv(fd, b, sizeof b, 0) <= 0;
        }
        if (!closed) closed = send(fd, "a", 1, MSG_NOSIGNAL) != 1;
    }
    if (closed) tr->closed_after = now_s() - t0;
    close(fd);
    return NULL;
}

static int start_server(fkv_backend *be, fkv_server **srv, const char *const *opts, uint32_t max_queue)
{
    char err[256];
    if (fkv_backend_create("fake", opts, be, err, sizeof err) != FKV_OK) {
        fprintf(stderr, "backend: %s\n", err);
        return -1;
    }
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    cfg.read_timeout_s = READ_TIMEOUT_S;
    if (max_queue) cfg.max_queue = max_queue;
    if (fkv_server_start(&cfg, be, srv, err, sizeof err) != FKV_OK) {
        fprintf(stderr, "server: %s\n", err);
        fkv_backend_destroy(be);
        return -1;
    }
    port = fkv_server_port(*srv);
    return 0;
}

#define LONG_STREAM "{\"model\":\"fairkv-fake\",\"prompt\":\"slow\",\"max_tokens\":200,\"stream\":true}"
#define LONG_WHOLE "{\"model\":\"fairkv-fake\",\"prompt\":\"slow\",\"max_tokens\":200}"
#define SHORT_WHOLE "{\"model\":\"fairkv-fake\",\"prompt\":\"hi\",\"max_tokens\":4}"

static void test_idle_clients(void)
{
    /* 20 ms a step: a 200-token answer takes 4 s, longer than the deadline */
    const char *opts[] = {"pace_ms=20", NULL};
    fkv_backend be;
    fkv_server *srv;
    REQUIRE(start_server(&be, &srv, opts, 0) == 0);
    fkv_server_config def;
    fkv_server_config_default(&def);

    double t_open = now_s();
    static int fd[N_IDLE];
    const char *half = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
    int opened = 0;
    for (int i = 0; i < N_IDLE; i++) {
        fd[i] = open_from("127.0.0.1");
        if (fd[i] < 0) continue;
        opened++;
        send(fd[i], half, strlen(half), MSG_NOSIGNAL); /* a refused one may be closed already */
    }
    CHECKF(opened == N_IDLE, "%d of %d idle connections opened", opened, N_IDLE);

    trickle tr;
    REQUIRE(pthread_create(&tr.t, NULL, trickle_main, &tr) == 0);
    job stream, whole;
    job_start(&stream, "127.0.0.2", "POST", "/v1/completions", LONG_STREAM);
    job_start(&whole, "127.0.0.2", "POST", "/v1/completions", LONG_WHOLE);

    /* another address is served while the idle ones are all still open */
    fkv_textbuf out;
    int st = raw_request("127.0.0.2", "POST", "/v1/completions", SHORT_WHOLE, &out);
    CHECKF(st == 200, "completion from 127.0.0.2: status %d: %.200s", st, text_of(&out));
    CHECK(strstr(text_of(&out), "\"choices\"") != NULL);
    fkv_textbuf_free(&out);
    st = raw_request("127.0.0.2", "GET", "/health", NULL, &out);
    CHECKF(st == 200, "/health from 127.0.0.2: status %d", st);
    CHECK(strstr(text_of(&out), "\"ok\"") != NULL);
    fkv_textbuf_free(&out);
    double served = now_s() - t_open;
    CHECKF(served < READ_TIMEOUT_S - 0.5, "the other client was served after %.2f s, not before the read timeout",
           served);

    /* every idle connection is closed by the server: those over the
     * per-address limit at once, the others at the read deadline */
    double closed_at[N_IDLE];
    int left = 0;
    for (int i = 0; i < N_IDLE; i++) {
        closed_at[i] = -1;
        left += fd[i] >= 0;
    }
    while (left && now_s() - t_open < READ_TIMEOUT_S + 3) {
        struct pollfd p[N_IDLE];
        int map[N_IDLE], np = 0;
        for (int i = 0; i < N_IDLE; i++)
            if (fd[i] >= 0 && closed_at[i] < 0) p[np] = (struct pollfd){fd[i], POLLIN, 0}, map[np++] = i;
        if (poll(p, (nfds_t)np, 100) <= 0) continue;
        for (int k = 0; k < np; k++) {
            if (!p[k].revents) continue;
            char b[512];
            ssize_t r = recv(p[k].fd, b, sizeof b, MSG_DONTWAIT);
            if (r > 0 || (r < 0 && errno == EAGAIN)) continue; /* an answer (none is expected): read on */
            closed_at[map[k]] = now_s() - t_open;
            left--;
        }
    }
    int early = 0, late = 0, open_still = 0, mid = 0;
    double first_late = 1e9, last_late = 0;
    for (int i = 0; i < N_IDLE; i++) {
        if (fd[i] < 0) continue;
        double t = closed_at[i];
        if (t < 0) open_still++;
        else if (t < 1.0) early++;
        else if (t >= READ_TIMEOUT_S - 0.5) {
            late++;
            first_late = t < first_late ? t : first_late;
            last_late = t > last_late ? t : last_late;
        } else mid++;
        close(fd[i]);
    }
    CHECKF(open_still == 0, "%d idle connections still open %d s after the read timeout", open_still, 3);
    CHECKF(late == (int)def.max_conn_per_ip, "%d idle connections held until the deadline, want the limit %u", late,
           def.max_conn_per_ip);
    CHECKF(early == opened - (int)def.max_conn_per_ip, "%d refused at once by the per-address limit", early);
    CHECKF(mid == 0, "%d closed between refusal and the deadline", mid);
    if (late) printf("idle connections closed %.2f..%.2f s after opening (read timeout %d s)\n", first_late,
                     last_late, READ_TIMEOUT_S);

    pthread_join(tr.t, NULL);
    CHECKF(tr.closed_after >= READ_TIMEOUT_S - 0.5 && tr.closed_after < READ_TIMEOUT_S + 2,
           "a header trickler was closed after %.2f s (read timeout %d s)", tr.closed_after, READ_TIMEOUT_S);

    /* generating is not reading: answers longer than the deadline complete */
    pthread_join(stream.t, NULL);
    pthread_join(whole.t, NULL);
    CHECKF(stream.status == 200, "long stream: status %d", stream.status);
    CHECKF(strstr(text_of(&stream.out), "data: [DONE]") != NULL, "long stream cut after %.2f s: %zu bytes",
           stream.seconds, stream.out.len);
    CHECKF(whole.status == 200 && strstr(text_of(&whole.out), "\"length\"") != NULL,
           "long whole completion: status %d after %.2f s", whole.status, whole.seconds);
    CHECKF(stream.seconds > READ_TIMEOUT_S && whole.seconds > READ_TIMEOUT_S,
           "the long answers took %.2f and %.2f s: not longer than the read timeout", stream.seconds,
           whole.seconds);
    fkv_textbuf_free(&stream.out);
    fkv_textbuf_free(&whole.out);

    /* the address is served again once its idle connections are gone */
    st = raw_request("127.0.0.1", "GET", "/health", NULL, &out);
    CHECKF(st == 200, "/health from 127.0.0.1 afterwards: status %d", st);
    fkv_textbuf_free(&out);

    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
}

static void test_cheap_endpoints_while_full(void)
{
    /* one running slot and a queue of one */
    const char *opts[] = {"pace_ms=20", "max_batch=1", NULL};
    fkv_backend be;
    fkv_server *srv;
    REQUIRE(start_server(&be, &srv, opts, 1) == 0);
    job running, waiting;
    job_start(&running, "127.0.0.2", "POST", "/v1/completions", LONG_STREAM);
    fkv_backend_stats bs;
    double t0 = now_s();
    while (be.ops->stats(be.impl, &bs), bs.running < 1 && now_s() - t0 < 5) nap();
    job_start(&waiting, "127.0.0.2", "POST", "/v1/completions", LONG_STREAM);
    while (be.ops->stats(be.impl, &bs), bs.waiting < 1 && now_s() - t0 < 5) nap();
    REQUIRE(bs.running == 1 && bs.waiting == 1);

    fkv_textbuf out;
    int st = raw_request("127.0.0.2", "POST", "/v1/completions", SHORT_WHOLE, &out);
    CHECKF(st == 429, "a completion while full: status %d", st);
    fkv_textbuf_free(&out);
    for (int i = 0; i < 2; i++) {
        const char *path = i ? "/metrics" : "/health";
        double t = now_s();
        st = raw_request("127.0.0.3", "GET", path, NULL, &out);
        t = now_s() - t;
        CHECKF(st == 200, "%s while generation is full: status %d", path, st);
        CHECKF(t < 1.0, "%s while generation is full took %.2f s", path, t);
        fkv_textbuf_free(&out);
    }
    be.ops->stats(be.impl, &bs);
    CHECK(bs.running == 1 && bs.waiting == 1); /* it was still full */

    fkv_server_destroy(srv); /* ends the streams */
    pthread_join(running.t, NULL);
    pthread_join(waiting.t, NULL);
    fkv_textbuf_free(&running.out);
    fkv_textbuf_free(&waiting.out);
    fkv_backend_destroy(&be);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* 300 client sockets and the server's own: more than a small default */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < 2048) {
        rl.rlim_cur = rl.rlim_max < 2048 ? rl.rlim_max : 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    test_idle_clients();
    test_cheap_endpoints_while_full();
    return check_done();
}
