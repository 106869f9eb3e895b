/* `fairkv load`: options, the result table (text or JSON). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"
#include "server/load.h"

typedef struct summary {
    size_t n;
    double mean, std, p50, p90, p99, max; /* ms */
} summary;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentiles over the union of dists[0..k). */
static summary summarize(const fkv_load_dist *const *d, int k)
{
    summary s = {0};
    for (int i = 0; i < k; i++) s.n += d[i]->n;
    if (!s.n) return s;
    double *v = malloc(s.n * sizeof *v);
    if (!v) return (summary){0};
    size_t o = 0;
    for (int i = 0; i < k; i++) {
        if (d[i]->n) memcpy(v + o, d[i]->v, d[i]->n * sizeof *v);
        o += d[i]->n;
    }
    qsort(v, s.n, sizeof *v, cmp_double);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < s.n; i++) sum += v[i];
    s.mean = sum / (double)s.n;
    for (size_t i = 0; i < s.n; i++) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.std = sqrt(sq / (double)s.n);
    double q[3] = {0.5, 0.9, 0.99}, *dst[3] = {&s.p50, &s.p90, &s.p99};
    for (int i = 0; i < 3; i++) {
        size_t r = (size_t)ceil(q[i] * (double)s.n);
        *dst[i] = v[(r ? r : 1) - 1];
    }
    s.max = v[s.n - 1];
    free(v);
    s.mean *= 1e3, s.std *= 1e3, s.p50 *= 1e3, s.p90 *= 1e3, s.p99 *= 1e3, s.max *= 1e3;
    return s;
}

/* row c in [0, 3) is a class, c == 3 is all classes */
static void row_stats(const fkv_load_result *r, int c, summary *ttft, summary *itl, summary *e2e, size_t *sent,
                      size_t *ok, size_t *failed, uint64_t *tokens)
{
    const fkv_load_dist *dt[3], *di[3], *de[3];
    int lo = c < 3 ? c : 0, hi = c < 3 ? c + 1 : 3, k = 0;
    *sent = *ok = *failed = 0;
    *tokens = 0;
    for (int i = lo; i < hi; i++, k++) {
        dt[k] = &r->ttft[i], di[k] = &r->itl[i], de[k] = &r->e2e[i];
        *sent += r->sent[i], *ok += r->ok[i], *failed += r->failed[i], *tokens += r->tokens[i];
    }
    *ttft = summarize(dt, k);
    *itl = summarize(di, k);
    *e2e = summarize(de, k);
}

static summary user_dist(const fkv_load_dist *d)
{
    const fkv_load_dist *one[1] = {d};
    return summarize(one, 1);
}

static int has_roles(const fkv_load_result *r)
{
    for (uint32_t k = 0; k < r->n_users; k++)
        if (r->users[k].present && r->users[k].role != FKV_LOAD_CLIENT) return 1;
    return 0;
}

/* One user's row of either report; 0 when the user sent nothing. */
typedef struct user_row {
    char name[48];
    summary ttft, e2e;
    double tokens_s;
} user_row;

static int user_row_of(const fkv_load_result *r, uint32_t k, user_row *row)
{
    const fkv_load_user *u = &r->users[k];
    if (!u->present) return 0;
    fkv_load_item it = {.client = k, .role = u->role};
    fkv_load_user_name(&it, row->name, sizeof row->name);
    row->ttft = user_dist(&u->ttft);
    row->e2e = user_dist(&u->e2e);
    row->tokens_s = r->wall_s > 0 ? (double)u->tokens / r->wall_s : 0;
    return 1;
}

void fkv_load_print_text(const fkv_load_result *r, FILE *f)
{
    size_t sent = 0, ok = 0, failed = 0;
    for (int c = 0; c < FKV_N_CLASSES; c++) sent += r->sent[c], ok += r->ok[c], failed += r->failed[c];
    fprintf(f, "fairkv load: %zu requests in %.1f s, %zu ok, %zu failed", sent, r->wall_s, ok, failed);
    for (int i = 0; i < r->n_err_kinds; i++) fprintf(f, "%s %s %zu", i ? "," : ":", r->err_kind[i], r->err_count[i]);
    fprintf(f, "\nlatencies in ms; miss_rate is the server's kv_cache_miss_rate at the end\n");
    fprintf(f, "%-7s %6s %6s %5s %9s %9s %8s %8s %9s %9s %9s %9s %8s %9s\n", "class", "sent", "ok", "fail", "ttft_p50",
            "ttft_p99", "itl_p50", "itl_p99", "e2e_mean", "e2e_std", "e2e_p50", "e2e_p99", "tok/s", "miss_rate");
    for (int c = 0; c <= FKV_N_CLASSES; c++) {
        summary t, i, e;
        size_t s, o, fl;
        uint64_t tok;
        row_stats(r, c, &t, &i, &e, &s, &o, &fl, &tok);
        fprintf(f, "%-7s %6zu %6zu %5zu %9.1f %9.1f %8.1f %8.1f %9.1f %9.1f %9.1f %9.1f %8.1f", c < 3 ? fkv_class_name((fkv_class)c) : "all", s, o,
                fl, t.p50, t.p99, i.p50, i.p99, e.mean, e.std, e.p50, e.p99, r->wall_s > 0 ? (double)tok / r->wall_s : 0);
        if (c < 3 && r->miss_rate[c] >= 0) fprintf(f, " %9.4f\n", r->miss_rate[c]);
        else fprintf(f, " %9s\n", "-");
    }
    if (!has_roles(r)) return;
    fprintf(f, "per user (ttft from the stream's first token event; tok/s over the run)\n");
    fprintf(f, "%-10s %5s %6s %6s %5s %9s %9s %9s %8s\n", "user", "light", "sent", "ok", "fail", "ttft_p50", "ttft_p99",
            "e2e_mean", "tok/s");
    user_row w;
    for (uint32_t k = 0; k < r->n_users; k++) {
        const fkv_load_user *u = &r->users[k];
        if (!user_row_of(r, k, &w)) continue;
        fprintf(f, "%-10s %5s %6zu %6zu %5zu %9.1f %9.1f %9.1f %8.1f\n", w.name, u->role == FKV_LOAD_LIGHT ? "yes" : "no",
                u->sent, u->ok, u->failed, w.ttft.p50, w.ttft.p99, w.e2e.mean, w.tokens_s);
    }
}

static void json_summary(FILE *f, const char *name, const summary *s)
{
    fprintf(f, "\"%s\":{\"n\":%zu,\"mean\":%.3f,\"std\":%.3f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f}", name,
            s->n, s->mean, s->std, s->p50, s->p90, s->p99, s->max);
}

void fkv_load_print_json(const fkv_load_result *r, FILE *f)
{
    fprintf(f, "{\"wall_s\":%.3f,\"unit\":\"ms\",\"classes\":{", r->wall_s);
    for (int c = 0; c <= FKV_N_CLASSES; c++) {
        summary t, i, e;
        size_t s, o, fl;
        uint64_t tok;
        row_stats(r, c, &t, &i, &e, &s, &o, &fl, &tok);
        fprintf(f, "%s\"%s\":{\"sent\":%zu,\"ok\":%zu,\"failed\":%zu,\"tokens\":%llu,", c ? "," : "",
                c < 3 ? fkv_class_name((fkv_class)c) : "all", s, o, fl, (unsigned long long)tok);
        json_summary(f, "ttft_ms", &t);
        fputc(',', f);
        json_summary(f, "itl_ms", &i);
        fputc(',', f);
        json_summary(f, "e2e_ms", &e);
        if (c < 3 && r->miss_rate[c] >= 0) fprintf(f, ",\"miss_rate\":%.6g", r->miss_rate[c]);
        fputc('}', f);
    }
    fprintf(f, "},\"users\":[");
    int first = 1;
    user_row w;
    for (uint32_t k = 0; k < r->n_users; k++) {
        const fkv_load_user *u = &r->users[k];
        if (!user_row_of(r, k, &w)) continue;
        fprintf(f, "%s{\"user\":\"%s\",", first ? "" : ",", w.name);
        if (u->role != FKV_LOAD_CLIENT) fprintf(f, "\"light\":%s,", u->role == FKV_LOAD_LIGHT ? "true" : "false");
        fprintf(f,
                "\"sent\":%zu,\"ok\":%zu,\"failed\":%zu,\"tokens\":%llu,\"ttft\":{\"n\":%zu,\"p50_ms\":%.3f,\"p99_ms\":%.3f},"
                "\"e2e\":{\"n\":%zu,\"mean_ms\":%.3f},\"tokens_s\":%.3f}",
                u->sent, u->ok, u->failed, (unsigned long long)u->tokens, w.ttft.n, w.ttft.p50, w.ttft.p99, w.e2e.n,
                w.e2e.mean, w.tokens_s);
        first = 0;
    }
    fprintf(f, "],\"errors\":{");
    for (int i = 0; i < r->n_err_kinds; i++) fprintf(f, "%s\"%s\":%zu", i ? "," : "", r->err_kind[i], r->err_count[i]);
    fprintf(f, "}}\n");
}

void fkv_load_result_free(fkv_load_result *r)
{
    for (int c = 0; c < FKV_N_CLASSES; c++) {
        free(r->ttft[c].v);
        free(r->itl[c].v);
        free(r->e2e[c].v);
    }
    for (uint32_t k = 0; k < r->n_users; k++) {
        free(r->users[k].ttft.v);
        free(r->users[k].e2e.v);
    }
    free(r->users);
    memset(r, 0, sizeof *r);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv load --url URL [options]\n"
               "  --url URL          server base URL, e.g. http://127.0.0.1:8080 (required)\n"
               "  --workload W       'seed' (60%% short, 30%% medium, 10%% long; default), 'tenants' (below)\n"
               "                     or a trace file:\n"
               "                     Mooncake .jsonl (input_length, output_length) or Azure .csv, or\n"
               "                     the simulator's plain CSV (header 'arrival_ms,prompt_tokens,output_tokens,client'),\n"
               "                     replayed at its own arrival times (--rate and --duration unused)\n"
               "  --max-total N      seed: prompt + max_tokens at most N (long class in 513..N; default 2048)\n"
               "  --write-trace FILE write the requests (arrivals, lengths, clients) as a plain CSV that\n"
               "                     `fairkv bench --trace FILE --native` replays; without --url, only that\n"
               "  --rate R           mean arrivals per second, Poisson (default 5)\n"
               "  --duration S       seconds of arrivals (default 30)\n"
               "  --seed N           workload and prompt seed (default 1)\n"
               "  --clients N        distinct 'user' ids (default 8)\n"
               "  --api-key KEY      Bearer key (or FAIRKV_API_KEY)\n"
               "  --model NAME       model name (default: the first of GET /v1/models)\n"
               "  --vocab N          prompt token ids are below N (default 256)\n"
               "  --max-prompt N     cut trace prompts to N tokens (default: no cut)\n"
               "  --trace-blocks N   Mooncake trace: build each prompt from its hash_ids, a 512-token\n"
               "                     block standing for N tokens (same id, same tokens; lengths scaled\n"
               "                     by N/512; 'user' from the first block) (default 0: random prompts)\n"
               "  --shard I/N        trace: replay rows I, I+N, I+2N, ... only (N generators at 1/N of\n"
               "                     the rate split one replay among N servers; default 0/1)\n"
               "  --timeout S        per-request timeout (default 120)\n"
               "  --max-inflight N   open requests at most; more arrivals count as errors (default 1024)\n"
               "  --format text|json output (default text)\n"
               "tenants: heavy users send long prompts back to back (one open each), light users send\n"
               "short prompts as Poisson arrivals; \"user\" is heavy-<k> or light-<k>; a table per user\n"
               "  --heavy N          heavy users (default 2)      --light N          light users (default 4)\n"
               "  --heavy-prompt N   tokens (default 2000)        --heavy-max-tokens N (default 32)\n"
               "  --light-prompt N   tokens (default 40)          --light-max-tokens N (default 16)\n"
               "  --light-rate R     arrivals per light user per second (default 0.5)\n"
               "  --only light|heavy|all  send one kind only (light: their isolated baseline; default all)\n");
}

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "fairkv load: %s needs a number in [%g, %g], got '%s'\n", opt, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

int fkv_cli_load(int argc, char **argv)
{
    fkv_load_config cfg = {NULL, getenv("FAIRKV_API_KEY"), NULL, 1, 256, 120, 1024};
    const char *workload = "seed", *format = "text", *write_trace = NULL;
    double rate = 5, duration = 30, v, clients = 8, max_prompt = 0, max_total = 2048;
    fkv_load_tenants ten;
    fkv_load_tenants_default(&ten);
    int duration_set = 0;
    fkv_load_trace_opts topt = {0, 0, 1};
    const char *trace_opt = NULL; /* a trace-only option given */
    const char *tenants_opt = NULL; /* a tenants-only option given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!val) {
            fprintf(stderr, "fairkv load: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--url")) cfg.url = val;
        else if (!strcmp(a, "--workload")) workload = val;
        else if (!strcmp(a, "--write-trace")) write_trace = val;
        else if (!strcmp(a, "--max-total")) {
            if (num(a, val, 2, 1e9, &max_total)) return 2;
        }
        else if (!strcmp(a, "--rate")) {
            if (num(a, val, 1e-6, 1e6, &rate)) return 2;
        } else if (!strcmp(a, "--duration")) {
            if (num(a, val, 0, 1e7, &duration)) return 2;
            duration_set = 1;
        } else if (!strcmp(a, "--heavy") || !strcmp(a, "--light")) {
            tenants_opt = a;
            if (num(a, val, 0, 4096, &v)) return 2;
            *(a[2] == 'h' ? &ten.heavy : &ten.light) = (uint32_t)v;
        } else if (!strcmp(a, "--heavy-prompt") || !strcmp(a, "--heavy-max-tokens") || !strcmp(a, "--light-prompt") ||
                   !strcmp(a, "--light-max-tokens")) {
            tenants_opt = a;
            if (num(a, val, 1, 1e7, &v)) return 2;
            uint32_t *dst = !strcmp(a, "--heavy-prompt")   ? &ten.heavy_prompt
                            : !strcmp(a, "--heavy-max-tokens") ? &ten.heavy_out
                            : !strcmp(a, "--light-prompt")     ? &ten.light_prompt
                                                               : &ten.light_out;
            *dst = (uint32_t)v;
        } else if (!strcmp(a, "--light-rate")) {
            tenants_opt = a;
            if (num(a, val, 1e-6, 1e6, &ten.light_rate)) return 2;
        } else if (!strcmp(a, "--only")) {
            tenants_opt = a;
            if (!strcmp(val, "all")) ten.only = FKV_LOAD_ONLY_ALL;
            else if (!strcmp(val, "light")) ten.only = FKV_LOAD_ONLY_LIGHT;
            else if (!strcmp(val, "heavy")) ten.only = FKV_LOAD_ONLY_HEAVY;
            else {
                fprintf(stderr, "fairkv load: --only is light, heavy or all, got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            if (num(a, val, 0, 9e15, &v)) return 2;
            cfg.seed = (uint64_t)v;
        } else if (!strcmp(a, "--clients")) {
            if (num(a, val, 1, 1e6, &clients)) return 2;
        } else if (!strcmp(a, "--api-key")) cfg.api_key = val;
        else if (!strcmp(a, "--model")) cfg.model = val;
        else if (!strcmp(a, "--vocab")) {
            if (num(a, val, 1, 1e8, &v)) return 2;
            cfg.vocab = (uint32_t)v;
        } else if (!strcmp(a, "--max-prompt")) {
            if (num(a, val, 0, 1e9, &max_prompt)) return 2;
        } else if (!strcmp(a, "--trace-blocks")) {
            trace_opt = a;
            if (num(a, val, 0, 512, &v)) return 2;
            topt.block_tokens = (uint32_t)v;
        } else if (!strcmp(a, "--shard")) {
            trace_opt = a;
            unsigned si, sn;
            int used = 0;
            if (sscanf(val, "%u/%u%n", &si, &sn, &used) != 2 || val[used] || !sn || si >= sn || sn > 1000000) {
                fprintf(stderr, "fairkv load: --shard is I/N with 0 <= I < N (e.g. 0/2), got '%s'\n", val);
                return 2;
            }
            topt.shard = si;
            topt.n_shards = sn;
        } else if (!strcmp(a, "--timeout")) {
            if (num(a, val, 0.001, 86400, &cfg.timeout_s)) return 2;
        } else if (!strcmp(a, "--max-inflight")) {
            if (num(a, val, 1, 1e6, &v)) return 2;
            cfg.max_inflight = (uint32_t)v;
        } else if (!strcmp(a, "--format")) {
            if (strcmp(val, "text") && strcmp(val, "json")) {
                fprintf(stderr, "fairkv load: --format is text or json, got '%s'\n", val);
                return 2;
            }
            format = val;
        } else {
            fprintf(stderr, "fairkv load: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!cfg.url && !write_trace) {
        fprintf(stderr, "fairkv load: --url is required (unless --write-trace only writes the requests)\n");
        usage(stderr);
        return 2;
    }
    if (cfg.url && strncmp(cfg.url, "http://", 7) && strncmp(cfg.url, "https://", 8)) {
        fprintf(stderr, "fairkv load: --url must start with http:// or https://, got '%s'\n", cfg.url);
        return 2;
    }
    if (tenants_opt && strcmp(workload, "tenants")) {
        fprintf(stderr, "fairkv load: %s applies to --workload tenants only\n", tenants_opt);
        return 2;
    }
    if (trace_opt && (!strcmp(workload, "seed") || !strcmp(workload, "tenants"))) {
        fprintf(stderr, "fairkv load: %s applies to a trace file (--workload FILE.jsonl) only\n", trace_opt);
        return 2;
    }
    char err[512] = "";
    fkv_load_workload w;
    fkv_status st;
    if (!strcmp(workload, "seed")) {
        st = fkv_load_workload_seed_max(cfg.seed, rate, duration, (uint32_t)clients, (uint32_t)max_total, &w);
    } else if (!strcmp(workload, "tenants")) {
        if (duration_set) ten.duration = duration;
        if (!ten.heavy && !ten.light) snprintf(err, sizeof err, "--heavy 0 --light 0: no users");
        st = ten.heavy || ten.light ? fkv_load_workload_tenants(cfg.seed, &ten, &w) : FKV_EINVAL;
    } else {
        /* the plain CSV is recognized by its header */
        char first[16] = "";
        FILE *f = fopen(workload, "r");
        if (f) {
            if (!fgets(first, sizeof first, f)) first[0] = 0;
            fclose(f);
        }
        int plain = !strncmp(first, "arrival_ms", 10);
        if (plain && trace_opt) {
            snprintf(err, sizeof err, "%s applies to a Mooncake or Azure trace, not the plain CSV", trace_opt);
            st = FKV_EINVAL;
        } else {
            st = plain ? fkv_load_workload_plain(workload, (uint32_t)clients, &w, err, sizeof err)
                       : fkv_load_workload_trace_opts(workload, cfg.seed, rate, duration, (uint32_t)clients,
                                                      (uint32_t)max_prompt, &topt, &w, err, sizeof err);
        }
    }
    if (st == FKV_OK && write_trace) {
        st = fkv_load_workload_write_plain(&w, write_trace, err, sizeof err);
        if (st != FKV_OK) fkv_load_workload_free(&w);
        else if (!cfg.url) {
            printf("fairkv load: wrote %zu requests to %s\n", w.n, write_trace);
            fkv_load_workload_free(&w);
            return 0;
        }
    }
    if (st != FKV_OK) {
        fprintf(stderr, "fairkv load: --workload %s: %s\n", workload, err[0] ? err : fkv_strerror(st));
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fkv_load_result r;
    st = fkv_load_run(&cfg, &w, &r, err, sizeof err);
    if (st == FKV_OK) {
        if (!strcmp(format, "json")) fkv_load_print_json(&r, stdout);
        else fkv_load_print_text(&r, stdout);
    } else {
        fprintf(stderr, "fairkv load: %s\n", err);
    }
    fkv_load_result_free(&r);
    fkv_load_workload_free(&w);
    curl_global_cleanup();
    return st == FKV_OK ? 0 : 1;
}
