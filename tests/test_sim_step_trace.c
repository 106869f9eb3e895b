/* `fairkv bench --step-trace FILE` (src/sim/sim.h, FKV_SIM_STEP_TRACE_HEADER):
 * the steps it writes are the runs the report summarizes.  Checked against
 * the JSON report of the same command: a line per step of each scheme's
 * run (none for the isolated scheme's per-tenant runs), steps in time
 * order without overlap, each step's tokens the sum of its items', every
 * finished request's first token once, and each tenant's mean TTFT
 * recomputed from the trace equal to the report's.  Then its refusals. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_cli.h"
#include "check.h"
#include "sim/sim.h"

#define MAX_REQ 400
#define MAX_TEN 8

typedef struct scheme_trace {
    char name[32];
    long steps;
    long bad;                          /* malformed or inconsistent lines */
    int firsts[MAX_REQ + 1];           /* times a request's first token was emitted */
    double ttft_sum[MAX_TEN + 1];      /* ms, by tenant */
    long ttft_n[MAX_TEN + 1];
} scheme_trace;

static scheme_trace *find(scheme_trace *s, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(s[i].name, name)) return &s[i];
    REQUIRE(*n < 4);
    memset(&s[*n], 0, sizeof s[*n]);
    snprintf(s[*n].name, sizeof s[*n].name, "%s", name);
    return &s[(*n)++];
}

/* Reads the trace at path into s[*n]; returns the header's equality. */
static int read_trace(const char *path, scheme_trace *s, int *n)
{
    char *txt = check_slurp(path);
    REQUIRE(txt);
    size_t hl = strlen(FKV_SIM_STEP_TRACE_HEADER);
    int header = !strncmp(txt, FKV_SIM_STEP_TRACE_HEADER, hl);
    long long last_end = -1;
    char last_name[32] = "";
    for (char *line = strtok(txt + (header ? hl : 0), "\n"); line; line = strtok(NULL, "\n")) {
        char name[32];
        long long t0, t1;
        unsigned tokens;
        size_t items;
        int off = 0;
        if (sscanf(line, "%31s %lld %lld %u %zu%n", name, &t0, &t1, &tokens, &items, &off) != 5) {
            fprintf(stderr, "unparsed line: %.80s\n", line);
            find(s, n, "?")->bad++;
            continue;
        }
        scheme_trace *x = find(s, n, name);
        x->steps++;
        if (strcmp(name, last_name)) last_end = -1; /* the next scheme's run starts over */
        snprintf(last_name, sizeof last_name, "%s", name);
        if (t1 <= t0 || t0 < last_end) x->bad++;
        last_end = t1;
        char *p = line + off;
        unsigned sum = 0;
        size_t got = 0;
        for (;;) {
            unsigned long long tenant, id;
            char kind;
            unsigned nn, ctx, restored;
            long long arrival;
            int first, k = 0;
            if (sscanf(p, " %llu,%c,%u,%u,%u,%llu,%lld,%d%n", &tenant, &kind, &nn, &ctx, &restored, &id, &arrival,
                       &first, &k) != 8)
                break;
            p += k;
            got++;
            sum += nn + restored; /* the default miss mode recomputes restored tokens */
            if (!strchr("RPFD", kind) || tenant > MAX_TEN || id < 1 || id > MAX_REQ || arrival > t0 ||
                (kind == 'D' && nn != 1) || (kind == 'R' && (nn || first)))
                x->bad++;
            else if (first) {
                x->firsts[id]++;
                x->ttft_sum[tenant] += (double)(t1 - arrival) / 1e6;
                x->ttft_n[tenant]++;
            }
        }
        if (got != items || *p || sum != tokens) x->bad++;
    }
    free(txt);
    return header;
}

static void trace_matches_report(void)
{
    char out[] = "/tmp/fkv_trace_out_XXXXXX", tr[] = "/tmp/fkv_trace_XXXXXX";
    int fd = mkstemp(out);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE((fd = mkstemp(tr)) >= 0);
    close(fd);
    char args[256];
    snprintf(args, sizeof args,
             "--workload tenants --requests 300 --load 0.9 --schemes lru,fairkv,isolated --format json --quiet "
             "--step-trace %s",
             tr);
    REQUIRE(bench_cli(args, out) == 0);
    scheme_trace s[4];
    int n = 0;
    CHECK(read_trace(tr, s, &n));
    char *js = check_slurp(out);
    REQUIRE(js);
    cJSON *j = cJSON_Parse(js);
    REQUIRE(j);
    const cJSON *sc = cJSON_GetObjectItem(j, "schemes");
    REQUIRE(cJSON_GetArraySize(sc) == 3);
    CHECKF(n == 2, "%d schemes traced (lru and fairkv; isolated's runs are per tenant)", n);
    for (int i = 0; i < cJSON_GetArraySize(sc); i++) {
        const cJSON *x = cJSON_GetArrayItem(sc, i);
        const char *name = cJSON_GetObjectItem(x, "name")->valuestring;
        if (!strcmp(name, "isolated")) continue;
        scheme_trace *t = find(s, &n, name);
        CHECKF(t->bad == 0, "%s: %ld bad lines", name, t->bad);
        CHECKF(t->steps == cJSON_GetObjectItem(x, "steps")->valueint && t->steps > 0, "%s: %ld lines, %d steps",
               name, t->steps, cJSON_GetObjectItem(x, "steps")->valueint);
        int done = cJSON_GetObjectItem(x, "done")->valueint, once = 0, more = 0;
        for (int r = 1; r <= MAX_REQ; r++) {
            once += t->firsts[r] == 1;
            more += t->firsts[r] > 1;
        }
        CHECKF(once == done && more == 0, "%s: %d first tokens once, %d more than once, %d done", name, once, more,
               done);
        const cJSON *ten = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "fairness"), "tenants");
        REQUIRE(cJSON_GetArraySize(ten) == 6);
        for (int k = 0; k < cJSON_GetArraySize(ten); k++) {
            const cJSON *e = cJSON_GetArrayItem(ten, k);
            int id = cJSON_GetObjectItem(e, "id")->valueint;
            double want = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "ttft"), "mean_ms")->valuedouble;
            REQUIRE(id >= 1 && id <= MAX_TEN);
            double got = t->ttft_n[id] ? t->ttft_sum[id] / (double)t->ttft_n[id] : 0;
            CHECKF(t->ttft_n[id] > 0 && got > want - 1e-3 && got < want + 1e-3,
                   "%s tenant %d: trace's TTFT mean %.4f ms over %ld, report's %.3f", name, id, got, t->ttft_n[id],
                   want);
        }
    }
    cJSON_Delete(j);
    free(js);
    remove(out);
    remove(tr);
}

static void refusals(void)
{
    /* a file that cannot be made, a load range, the frontier */
    CHECK(bench_cli("--requests 50 --schemes lru --quiet --step-trace /nonexistent-dir/trace.txt", "/dev/null") != 0);
    CHECK(bench_cli("--requests 50 --schemes lru --quiet --load 0.5:0.9:0.2 --step-trace /dev/null", "/dev/null") != 0);
    CHECK(bench_cli("--requests 50 --schemes lru --quiet --frontier --step-trace /dev/null", "/dev/null") != 0);
}

int main(void)
{
    setenv("FKV_DATA_DIR", "", 1); /* embedded profile tables */
    trace_matches_report();
    refusals();
    return check_done();
}
