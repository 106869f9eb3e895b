/* `fairkv serve --kv-budget 8GiB` starts at once and holds no more memory
 * than it uses: the KV pool is mapped, not written, at start.  A generous
 * bound (ready and answering /health within 5 s, resident memory under
 * 1 GiB), not a benchmark: with the pool written at start (seconds per
 * GiB, and 8 GiB resident) both checks fail. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve_proc.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* VmRSS of a process in KiB, -1 when /proc does not say. */
static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

int main(void)
{
    char model[1024];
    (void)sp_metric;
    sp_model(model, sizeof model);
    sp_proc p = {0};
    double t0 = now_s();
    const char *args[] = {"--model", model, "--kv-budget", "8GiB", NULL};
    REQUIRE(sp_start(&p, args) == 0);
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, p.port, "GET", "/health", NULL, 0, NULL);
    double ready = now_s() - t0;
    printf("serve --kv-budget 8GiB: /health answered %.3f s after start\n", ready);
    CHECKF(r.status == 200, "/health: %ld", r.status);
    CHECKF(ready < 5.0, "ready after %.2f s", ready);
    http_free(&r);
    long kib = rss_kib(p.pid);
    printf("resident after start: %ld KiB\n", kib);
    if (kib >= 0) CHECKF(kib < (1L << 20), "resident %ld KiB after start with an 8 GiB pool", kib);
    /* the lazily mapped pool still serves: pages are written as they fill */
    sp_answer a;
    sp_complete(p.port, "Once upon a time", NULL, NULL, 16, &a);
    CHECKF(a.status == 200 && a.text[0], "completion %ld '%s'", a.status, a.text);
    kib = rss_kib(p.pid);
    if (kib >= 0) CHECKF(kib < (1L << 20), "resident %ld KiB after a completion", kib);
    sp_end(&p);
    return check_done();
}
