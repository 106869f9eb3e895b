/* Real redis-server processes for the remote tier's tests: loopback, a free
 * port, a temporary folder, no persistence.  Every server started is
 * stopped at exit, whatever happens: atexit for a normal end, and each
 * child dies with the test (PR_SET_PDEATHSIG) when it crashes or is killed
 * by a timeout.  rfx_require() skips the test (77) without redis-server. */
#ifndef FKV_TEST_REDIS_FIXTURE_H
#define FKV_TEST_REDIS_FIXTURE_H

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

typedef struct {
    pid_t pid;
    int port;
    bool cluster;
    char dir[64];
} rfx_server;

#define RFX_MAX 8
static rfx_server *rfx_all[RFX_MAX];
static int rfx_n;

static void rfx_stop(rfx_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGCONT); /* a stopped server would not die of SIGTERM */
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
}

static void rfx_cleanup(void)
{
    for (int i = 0; i < rfx_n; i++) {
        rfx_stop(rfx_all[i]);
        if (rfx_all[i]->dir[0]) {
            char cmd[128];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", rfx_all[i]->dir);
            if (system(cmd) != 0)
                fprintf(stderr, "redis fixture: could not remove %s\n", rfx_all[i]->dir);
        }
    }
    rfx_n = 0;
}

static void rfx_require(void)
{
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        printf("SKIP: redis-server is not installed\n");
        exit(77);
    }
}

static inline void rfx_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static inline double rfx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool rfx_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* The lowest port the kernel hands out to outgoing connections (its
 * ephemeral range); a server port picked inside that range can be taken by
 * any client's connect() between the check and redis-server's bind. */
static int rfx_ephemeral_low(void)
{
    int low = 32768, high = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &low, &high) != 2)
            low = 32768;
        fclose(f);
    }
    return low;
}

/* A port free now, and whose cluster bus port (port + 10000) is free too:
 * both below the kernel's ephemeral range when it leaves room (ports from
 * 10000), else in [20000, 50000). */
static int rfx_free_port(void)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    int base = 10000, span = rfx_ephemeral_low() - 10000 - base;
    if (span < 1000) {
        base = 20000;
        span = 30000;
    }
    for (int tries = 0; tries < 1000; tries++) {
        seed = seed * 1103515245u + 12345u;
        int port = base + (int)((seed >> 8) % (unsigned)span);
        if (rfx_port_free(port) && rfx_port_free(port + 10000))
            return port;
    }
    return -1;
}

static redisContext *rfx_connect(int port)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c)
        redisSetTimeout(c, tv);
    return c;
}

/* Runs one command on the server; the reply (caller frees) or NULL. */
static redisReply *rfx_cmd(int port, const char *fmt, ...)
{
    redisContext *c = rfx_connect(port);
    if (!c)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return rep;
}

/* Forks redis-server on s->port and waits until it answers PING: true when
 * it does; false when it exits first (*exited set: its port was taken) or
 * stays silent for 20 s on a loaded machine. */
static bool rfx_spawn(rfx_server *s, bool *exited)
{
    char port[16], conf[128];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(conf, sizeof conf, "%s/nodes-%d.conf", s->dir, s->port);
    const char *argv[] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", s->dir, "--save", "",
                          "--appendonly", "no", "--daemonize", "no",
                          s->cluster ? "--cluster-enabled" : NULL, "yes", "--cluster-config-file", conf, NULL};
    *exited = false;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        return false;
    s->pid = pid;
    double deadline = rfx_now_ms() + 20000.0;
    while (rfx_now_ms() < deadline) {
        redisReply *rep = rfx_cmd(s->port, "PING");
        bool up = rep && rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (up)
            return true;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            s->pid = 0;
            *exited = true;
            return false;
        }
        rfx_sleep_ms(20);
    }
    return false;
}

/* (Re)starts s: a new port and folder the first time (another port when
 * the first one was taken meanwhile), the same port after. */
static bool rfx_start(rfx_server *s, bool cluster)
{
    bool fresh = !s->port;
    if (fresh) {
        bool known = false;
        for (int i = 0; i < rfx_n; i++)
            known = known || rfx_all[i] == s;
        if (!known && rfx_n < RFX_MAX)
            rfx_all[rfx_n++] = s;
        if (rfx_n == 1)
            atexit(rfx_cleanup);
        snprintf(s->dir, sizeof s->dir, "/tmp/fkv-redis-XXXXXX");
        if (!mkdtemp(s->dir)) {
            s->dir[0] = '\0';
            return false;
        }
        s->port = rfx_free_port();
        s->cluster = cluster;
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        bool exited;
        if (rfx_spawn(s, &exited))
            return true;
        if (!fresh || !exited)
            return false;
        s->port = rfx_free_port();
    }
    return false;
}

static inline long long rfx_int(int port, const char *fmt, const char *arg)
{
    redisReply *rep = rfx_cmd(port, fmt, arg);
    long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return v;
}

/* A 3-node Redis Cluster on free ports (redis-cli --cluster create, no
 * replicas), once every node says cluster_state:ok. */
static inline bool rfx_cluster_ok(int port)
{
    redisReply *rep = rfx_cmd(port, "CLUSTER INFO");
    bool ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");
    freeReplyObject(rep);
    return ok;
}

static inline bool rfx_cluster_start(rfx_server srv[3])
{
    for (int i = 0; i < 3; i++)
        if (!rfx_start(&srv[i], true)) return false;
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d --cluster-replicas 0 "
             "--cluster-yes >/dev/null 2>&1",
             srv[0].port, srv[1].port, srv[2].port);
    if (system(cmd) != 0) return false;
    for (int t = 0; t < 500; t++) {
        bool all = true;
        for (int i = 0; i < 3; i++) all = all && rfx_cluster_ok(srv[i].port);
        if (all) return true;
        rfx_sleep_ms(20);
    }
    return false;
}

#endif
