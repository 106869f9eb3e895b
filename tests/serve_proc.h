/* `fairkv serve` as a child process for the tier tests: started on a free
 * port (--port 0, read back from its banner), asked for completions and
 * /metrics over HTTP, and always stopped (SIGKILL at exit; each child also
 * dies with the test: PR_SET_PDEATHSIG).  sp_model() finds
 * stories260K-llamacpp.gguf under FKV_DATA_DIR, or skips (77). */
#ifndef FKV_TEST_SERVE_PROC_H
#define FKV_TEST_SERVE_PROC_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "http_client.h"

#define SP_MAX 8
typedef struct sp_proc {
    pid_t pid;
    unsigned port;
    int fd; /* its stdout + stderr */
} sp_proc;

static sp_proc *sp_all[SP_MAX];
static int sp_n;

static void sp_stop(sp_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        close(p->fd);
    }
    p->pid = 0;
}

static void sp_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Stops p as an operator would (SIGTERM: drain, exit 0) and checks that it
 * exited 0 without a sanitizer report (the TSan suite runs these children
 * instrumented too); SIGKILL after 15 s. */
static void sp_end(sp_proc *p)
{
    if (p->pid <= 0) return;
    kill(p->pid, SIGTERM);
    static char out[1 << 16];
    size_t len = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 15) break;
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(p->fd, &fs);
        struct timeval tv = {0, 100000};
        if (select(p->fd + 1, &fs, NULL, NULL, &tv) <= 0) continue;
        char buf[4096];
        ssize_t r = read(p->fd, buf, sizeof buf);
        if (r <= 0) break; /* EOF: it exited */
        size_t k = (size_t)r < sizeof out - 1 - len ? (size_t)r : sizeof out - 1 - len;
        memcpy(out + len, buf, k);
        len += k;
    }
    out[len] = 0;
    int st = 0, gone = 0;
    for (int i = 0; i < 500 && !gone; i++) { /* EOF comes just before the exit is reaped */
        gone = waitpid(p->pid, &st, WNOHANG) == p->pid;
        if (!gone) sp_sleep_ms(10);
    }
    if (!gone) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
        st = -1;
    }
    close(p->fd);
    p->pid = 0;
    CHECKF(st == 0, "fairkv serve exit status %d: %s", st, out);
    CHECKF(!strstr(out, "Sanitizer"), "fairkv serve: %s", out);
}

static void sp_cleanup(void)
{
    for (int i = 0; i < sp_n; i++) sp_stop(sp_all[i]);
}

static void sp_model(char *out, size_t cap)
{
    const char *d = getenv("FKV_DATA_DIR");
    snprintf(out, cap, "%s/models/stories260K-llamacpp.gguf", d ? d : "../shared/data");
    if (access(out, R_OK)) {
        printf("SKIP: needs the model %s\n", out);
        exit(77);
    }
}

/* Starts ./fairkv serve --port 0 with extra args (NULL-terminated); 0 on
 * success, with p->port read from the banner. */
static int sp_start(sp_proc *p, const char *const *args)
{
    const char *argv[48] = {"fairkv", "serve", "--port", "0"};
    int n = 4;
    for (int i = 0; args[i] && n < 47; i++) argv[n++] = args[i];
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        execv("./fairkv", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) return -1;
    p->pid = pid;
    p->fd = fds[0];
    if (sp_n < SP_MAX) sp_all[sp_n++] = p;
    if (sp_n == 1) atexit(sp_cleanup);
    char buf[4096];
    size_t len = 0;
    buf[0] = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        const char *at = strstr(buf, "127.0.0.1:");
        if (at && strstr(at, "/ (")) {
            p->port = (unsigned)atoi(at + 10);
            return p->port ? 0 : -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 20 || len + 1 >= sizeof buf) break;
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(p->fd, &fs);
        struct timeval tv = {0, 50000};
        if (select(p->fd + 1, &fs, NULL, NULL, &tv) <= 0) continue;
        ssize_t r = read(p->fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        buf[len] = 0;
    }
    fprintf(stderr, "fairkv serve did not start: %s\n", buf);
    return -1;
}

typedef struct sp_answer {
    long status;
    char text[2048];
    long cached, prompt;
} sp_answer;

/* A greedy completion of prompt; user / salt may be NULL. */
static void sp_complete(unsigned port, const char *prompt, const char *user, const char *salt, int max_tokens,
                        sp_answer *a)
{
    memset(a, 0, sizeof *a);
    a->cached = a->prompt = -1;
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "model", "stories260K-llamacpp");
    cJSON_AddStringToObject(q, "prompt", prompt);
    cJSON_AddNumberToObject(q, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(q, "temperature", 0);
    if (user) cJSON_AddStringToObject(q, "user", user);
    if (salt) cJSON_AddStringToObject(q, "cache_salt", salt);
    char *body = cJSON_PrintUnformatted(q);
    cJSON_Delete(q);
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, port, "POST", "/v1/completions", body, strlen(body), NULL);
    free(body);
    a->status = r.status;
    cJSON *j = cJSON_Parse(r.body.data ? r.body.data : "");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), "text");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details"),
                                                      "cached_tokens");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
    if (cJSON_IsString(t)) snprintf(a->text, sizeof a->text, "%s", t->valuestring);
    if (cJSON_IsNumber(c)) a->cached = (long)c->valuedouble;
    if (cJSON_IsNumber(pt)) a->prompt = (long)pt->valuedouble;
    if (a->status != 200) fprintf(stderr, "completion: %ld %s\n", a->status, r.body.data ? r.body.data : "");
    cJSON_Delete(j);
    http_free(&r);
}

/* The sum of the samples of /metrics whose line starts with `series`
 * (a family name, or a name with the start of its labels); -1 when none. */
static double sp_metric(unsigned port, const char *series)
{
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    double sum = -1;
    size_t n = strlen(series);
    for (const char *l = r.body.data ? r.body.data : ""; *l;) {
        const char *e = strchr(l, '\n');
        /* a family name matches its samples, not a longer name's */
        if (!strncmp(l, series, n) && (strchr(series, '{') || l[n] == ' ' || l[n] == '{')) {
            const char *sp = memchr(l, ' ', e ? (size_t)(e - l) : strlen(l));
            if (sp) sum = (sum < 0 ? 0 : sum) + atof(sp + 1);
        }
        if (!e) break;
        l = e + 1;
    }
    http_free(&r);
    return sum;
}


#endif
