/* Shared by the Prometheus tests: an in-process server over the fake
 * backend with some finished traffic, and finding a tool on PATH. */
#ifndef FKV_TEST_SERVER_FIXTURE_H
#define FKV_TEST_SERVER_FIXTURE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "http_client.h"
#include "server/server.h"

/* Full path of `name` on PATH into out, or 0 if it is not there. */
static int find_tool(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        const char *e = strchr(path, ':');
        size_t n = e ? (size_t)(e - path) : strlen(path);
        snprintf(out, cap, "%.*s/%s", (int)n, path, name);
        if (n && access(out, X_OK) == 0) return 1;
        path += n + (e ? 1 : 0);
    }
    return 0;
}

typedef struct fixture_req {
    pthread_t t;
    unsigned port;
    char body[512];
    long status;
} fixture_req;

static void *fixture_send(void *arg)
{
    fixture_req *q = arg;
    http_resp r = {0};
    http_do(&r, q->port, "POST", "/v1/completions", q->body, strlen(q->body), NULL);
    q->status = r.status;
    http_free(&r);
    return NULL;
}

#define FIXTURE_REQUESTS 12

/* Starts a server with a small cache (32 pages of 16 tokens) and sends 12
 * short and medium requests from 4 clients at once: ~1500 tokens of context
 * in 512 token slots, so running requests evict each other and the miss
 * rates are not zero. */
static int fixture_start(fkv_backend *be, fkv_server **srv, unsigned *port)
{
    const char *opts[] = {"pace_ms=2", "max_batch=12", "pages=32", NULL};
    char err[256];
    if (fkv_backend_create("fake", opts, be, err, sizeof err) != FKV_OK) return -1;
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    cfg.port = 0;
    if (fkv_server_start(&cfg, be, srv, err, sizeof err) != FKV_OK) {
        fprintf(stderr, "server: %s\n", err);
        return -1;
    }
    *port = fkv_server_port(*srv);
    fixture_req q[FIXTURE_REQUESTS];
    for (int i = 0; i < FIXTURE_REQUESTS; i++) {
        char prompt[256];
        int len = 20 + 15 * i;
        memset(prompt, 'a' + i % 3, (size_t)len);
        prompt[len] = 0;
        q[i].port = *port;
        snprintf(q[i].body, sizeof q[i].body,
                 "{\"model\":\"fairkv-fake\",\"prompt\":\"%s\",\"max_tokens\":%d,\"user\":\"c%d\",\"stream\":%s}",
                 prompt, 10 + 5 * i, i % 4, i % 2 ? "true" : "false");
        pthread_create(&q[i].t, NULL, fixture_send, &q[i]);
    }
    int ok = 1;
    for (int i = 0; i < FIXTURE_REQUESTS; i++) {
        pthread_join(q[i].t, NULL);
        if (q[i].status != 200) {
            fprintf(stderr, "fixture request %d: status %ld\n", i, q[i].status);
            ok = 0;
        }
    }
    return ok ? 0 : -1;
}

/* For the tests that check /metrics with a Prometheus tool: skips (exit 77)
 * when `tool` is not on PATH, else starts the fixture server with traffic
 * done; the tool's path is left in path[cap]. */
static void fixture_start_for_tool(const char *tool, char *path, size_t cap, fkv_backend *be, fkv_server **srv,
                                   unsigned *port)
{
    if (!find_tool(tool, path, cap)) {
        printf("SKIP: %s not found on PATH (Debian package 'prometheus')\n", tool);
        exit(77);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    REQUIRE(fixture_start(be, srv, port) == 0);
}

#endif
