/* `fairkv run`, `bench`, `grid` and `size` (entry points of tools/cli.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "calib/calibrate.h"
#include "sim/bench.h"
#include "sim/frontier.h"

#define MAX_SCHEMES 16

static FILE *open_out(const char *path)
{
    if (!path) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) perror(path);
    return f;
}

static void report(FILE *f, const fkv_bench_opts *o, const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n,
                   int first)
{
    const char *fmt = o->format;
    if (o->fairness_table) {
        fkv_report_fairness_text(f, m, s, n);
    } else if (!strcmp(fmt, "json")) fkv_report_json(f, m, s, n);
    else if (!strcmp(fmt, "csv")) fkv_report_csv(f, m, s, n, first);
    else {
        if (!first) fputc('\n', f);
        fkv_report_text(f, m, s, n);
    }
}

/* The schemes of --schemes (all available ones by default), as
 * fkv_bench_schemes picks them. */
static int select_schemes(const char *list, const fkv_scheme **sel, size_t *n, size_t cap)
{
    *n = 0;
    if (!list) {
        size_t ns;
        const fkv_scheme *all = fkv_scheme_list(&ns);
        for (size_t i = 0; i < ns && *n < cap; i++)
            if (fkv_scheme_available(&all[i])) sel[(*n)++] = &all[i];
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok(buf, ","); t && *n < cap; t = strtok(NULL, ",")) {
        const fkv_scheme *s = fkv_scheme_find(t);
        if (!s || !fkv_scheme_available(s)) {
            fprintf(stderr, "fairkv bench: %s scheme '%s' (see fairkv bench --help)\n", s ? "unavailable" : "unknown",
                    t);
            return -1;
        }
        sel[(*n)++] = s;
    }
    return 0;
}

/* The options a frontier cannot take: it searches the capacity itself, at one load. */
static int frontier_refuse(const fkv_bench_opts *o)
{
    const char *why = NULL;
    if (o->load_step > 0) why = "--load takes one value here, not a range A:B:STEP (the frontier is per load)";
    else if (o->cap_tokens || o->cap_gb > 0) why = "--capacity-tokens / --capacity-gb fix the capacity the frontier searches";
    else if (!strcmp(o->format, "csv")) why = "--format csv: the frontier prints text or json";
    else if (o->step_trace) why = "--step-trace: the frontier's runs are many capacities; trace one with --capacity-frac";
    if (why) fprintf(stderr, "fairkv bench --frontier: %s\n", why);
    return why != NULL;
}

static int frontier_out(fkv_bench_opts *o, fkv_bench_ctx *c, size_t requests, const fkv_scheme_summary *oracle,
                        const fkv_frontier_point *pts, size_t n)
{
    FILE *out = open_out(o->output);
    if (!out) return 1;
    fkv_frontier_meta m = {
        .workload = c->base.name,
        .profile = c->profile.name,
        .load = o->load_lo,
        .requests = requests,
        .peak_tokens = c->peak_tokens,
        .floor_tokens = c->floor_tokens,
        .token_bytes = fkv_model_token_bytes(c->profile.model),
        .tol = o->frontier_tol,
        .top = o->frontier_max,
        .slack = FKV_FRONTIER_SLACK,
    };
    if (!strcmp(o->format, "json")) fkv_frontier_json(out, &m, oracle, pts, n);
    else fkv_frontier_text(out, &m, oracle, pts, n);
    if (out != stdout) fclose(out);
    if (o->plot_dir) {
        const char *names[MAX_SCHEMES];
        double fr[MAX_SCHEMES];
        int found[MAX_SCHEMES];
        for (size_t i = 0; i < n; i++) names[i] = pts[i].scheme, fr[i] = pts[i].capacity_frac, found[i] = pts[i].found;
        fkv_plot_frontier(o->plot_dir, names, fr, found, n);
    }
    return 0;
}

/* --frontier: oracle-memory once, then each scheme's bisection over capacity. */
static int frontier_main(fkv_bench_opts *o)
{
    if (frontier_refuse(o)) return 2;
    const fkv_scheme *sel[MAX_SCHEMES];
    size_t nsel;
    if (select_schemes(o->schemes, sel, &nsel, MAX_SCHEMES)) return 1;
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_workload w;
    double rate;
    fkv_scheme_summary oracle;
    fkv_frontier_point *pts = calloc(MAX_SCHEMES, sizeof *pts);
    int rc = 1;
    fkv_status st = pts ? fkv_bench_prepare(&c, o, err, sizeof err) : FKV_ENOMEM;
    if (st == FKV_OK && (st = fkv_bench_arrivals(&c, o->load_lo, &w, &rate)) == FKV_OK) {
        st = fkv_frontier_oracle(&c, &w, &oracle, err, sizeof err);
        for (size_t i = 0; i < nsel && st == FKV_OK; i++) {
            st = fkv_frontier_scheme(&c, &w, sel[i], &oracle, o->frontier_tol, o->frontier_max, &pts[i], err,
                                     sizeof err);
            if (st == FKV_OK && !o->quiet)
                fprintf(stderr, "  %-13s frontier %s%.2f of peak after %d runs\n", sel[i]->name,
                        pts[i].found ? "" : "> ", pts[i].capacity_frac, pts[i].n_probes);
        }
        if (st == FKV_OK) rc = frontier_out(o, &c, w.n, &oracle, pts, nsel);
        fkv_workload_free(&w);
    }
    if (st) fprintf(stderr, "fairkv bench --frontier: %s\n", err[0] ? err : fkv_strerror(st));
    free(pts);
    if (pts) fkv_bench_ctx_free(&c);
    return rc;
}

static int bench_main(fkv_bench_opts *o)
{
    if (o->frontier) return frontier_main(o);
    if (o->step_trace && o->load_step > 0) {
        fprintf(stderr, "fairkv bench --step-trace: --load takes one value here, not a range A:B:STEP\n");
        return 1;
    }
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_status st = fkv_bench_prepare(&c, o, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv bench: %s\n", err[0] ? err : fkv_strerror(st));
        fkv_bench_ctx_free(&c);
        return 1;
    }
    FILE *out = open_out(o->output);
    if (!out) {
        fkv_bench_ctx_free(&c);
        return 1;
    }
    FILE *trace = NULL;
    if (o->step_trace && (!(trace = fopen(o->step_trace, "w")) || fputs(FKV_SIM_STEP_TRACE_HEADER, trace) == EOF)) {
        fprintf(stderr, "fairkv bench: --step-trace %s: %s\n", o->step_trace, strerror(errno));
        if (trace) fclose(trace);
        if (out != stdout) fclose(out);
        fkv_bench_ctx_free(&c);
        return 1;
    }
    c.step_trace = trace;
    size_t n_loads = 1;
    if (o->load_lo > 0 && o->load_step > 0) n_loads = (size_t)floor((o->load_hi - o->load_lo) / o->load_step + 1e-9) + 1;
    fkv_scheme_summary *all = calloc(n_loads * MAX_SCHEMES, sizeof *all);
    double *loads = calloc(n_loads, sizeof *loads);
    int rc = 0;
    size_t nsch = 0;
    int json_multi = n_loads > 1 && !strcmp(o->format, "json");
    char tenants[400] = "";
    if (o->sim.n_tenants && o->tenants_from_workload) {
        int k = snprintf(tenants, sizeof tenants, "%u, named by the workload, weights", o->sim.n_tenants);
        for (uint32_t t = 0; t < o->sim.n_tenants && k < (int)sizeof tenants - 16; t++)
            k += snprintf(tenants + k, sizeof tenants - (size_t)k, "%s%g", t ? "," : " ", o->sim.tenant_weight[t]);
    } else if (o->sim.n_tenants) {
        static const char *const an[] = {"client", "roundrobin", "heavy", "session"};
        int k = snprintf(tenants, sizeof tenants, "%u, assigned by %s", o->sim.n_tenants, an[o->tenant_assign]);
        if (o->tenant_assign == FKV_ASSIGN_HEAVY) k += snprintf(tenants + k, sizeof tenants - (size_t)k, ":%g", o->heavy_frac);
        k += snprintf(tenants + k, sizeof tenants - (size_t)k, ", weights");
        for (uint32_t t = 0; t < o->sim.n_tenants && k < (int)sizeof tenants - 16; t++)
            k += snprintf(tenants + k, sizeof tenants - (size_t)k, "%s%g", t ? "," : " ", o->sim.tenant_weight[t]);
    }
    if (json_multi) fprintf(out, "{\"runs\":[\n");
    for (size_t li = 0; li < n_loads && all && loads; li++) {
        double load = o->load_lo > 0 ? o->load_lo + li * o->load_step : -1;
        loads[li] = load;
        fkv_workload w;
        double rate;
        if ((st = fkv_bench_arrivals(&c, load, &w, &rate)) != FKV_OK) {
            rc = 1;
            break;
        }
        fkv_sim_result res[MAX_SCHEMES];
        fkv_scheme_summary *sums = all + li * MAX_SCHEMES;
        int want_res = o->plot_dir && li == 0;
        st = fkv_bench_schemes(&c, &w, sums, want_res ? res : NULL, &nsch, MAX_SCHEMES, err, sizeof err);
        if (st) {
            fprintf(stderr, "fairkv bench: %s\n", err[0] ? err : fkv_strerror(st));
            fkv_workload_free(&w);
            rc = 1;
            break;
        }
        fkv_report_meta m = {
            .workload = c.base.name,
            .load = load,
            .requests = w.n,
            .profile = c.profile.name,
            .capacity_tokens = c.capacity_tokens,
            .capacity_gb = (double)c.capacity_tokens * (double)fkv_model_token_bytes(c.profile.model) / 1e9,
            .capacity_rule = c.capacity_rule,
            .arrival_rate = rate,
            .capacity_rps = c.cap_rps,
            .seed = o->seed,
            .admission = o->sim.sched.admission == FKV_ADMIT_VTC ? "vtc" : "fcfs",
            .batching = o->sim.sched.mode == FKV_SCHED_DYNAMIC ? "dynamic" : "continuous",
            .n_tenants = o->sim.n_tenants,
            .tenants = tenants,
        };
        double bound[3];
        if (o->min_bound) {
            if ((st = fkv_bench_min_bound(&c, &w, bound)) != FKV_OK) {
                fprintf(stderr, "fairkv bench: --min-bound: %s\n", fkv_strerror(st));
                fkv_workload_free(&w);
                rc = 1;
                break;
            }
            m.min_bound = bound;
        }
        if (json_multi && li) fprintf(out, ",\n");
        report(out, o, &m, sums, nsch, li == 0);
        if (want_res) {
            fkv_plot_cdf(o->plot_dir, res, nsch);
            fkv_plot_classes(o->plot_dir, sums, nsch);
            fkv_plot_tenants(o->plot_dir, sums, nsch);
            for (size_t i = 0; i < nsch; i++) fkv_sim_result_free(&res[i]);
        }
        fkv_workload_free(&w);
    }
    if (json_multi) fprintf(out, "]}\n");
    c.step_trace = NULL; /* the plots' capacity runs below are not traced */
    if (trace && fclose(trace) && !rc) {
        fprintf(stderr, "fairkv bench: --step-trace %s: %s\n", o->step_trace, strerror(errno));
        rc = 1;
    }
    if (!rc && o->plot_dir && n_loads > 1) fkv_plot_load(o->plot_dir, loads, all, n_loads, nsch);
    if (!rc && o->plot_dir) {
        /* hit rate vs capacity: the same workload at 5 capacity fractions */
        double fr[5] = {0.2, 0.35, 0.5, 0.75, 1.0};
        fkv_scheme_summary *cs = calloc(5 * MAX_SCHEMES, sizeof *cs);
        uint64_t saved = c.capacity_tokens;
        fkv_workload w;
        double rate;
        if (cs && fkv_bench_arrivals(&c, loads[0], &w, &rate) == FKV_OK) {
            for (int k = 0; k < 5 && !rc; k++) {
                c.capacity_tokens = (uint64_t)ceil((double)saved / o->cap_frac * fr[k]);
                if (fkv_bench_schemes(&c, &w, cs + k * MAX_SCHEMES, NULL, &nsch, MAX_SCHEMES, err, sizeof err)) rc = 1;
            }
            if (!rc) fkv_plot_capacity(o->plot_dir, fr, cs, 5, nsch);
            fkv_workload_free(&w);
        }
        c.capacity_tokens = saved;
        free(cs);
    }
    free(all);
    free(loads);
    if (out != stdout) fclose(out);
    fkv_bench_ctx_free(&c);
    return rc;
}

static int parse_all(fkv_bench_opts *o, int argc, char **argv, const char *cmd)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: fairkv %s [options]\n\n", cmd);
            fkv_bench_usage(stdout);
            return 0;
        }
        int r = fkv_bench_parse_opt(o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "fairkv %s: unknown option '%s' (see --help)\n", cmd, argv[i]);
            return 2;
        }
    }
    return -1;
}

int fkv_cli_bench(int argc, char **argv)
{
    /* the engine's step cost, measured: the numbers of the cpu-tiny profile */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--calibrate") || !strcmp(argv[i], "--calibrate-log")) return fkv__bench_calibrate(argc, argv);
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    int r = parse_all(&o, argc, argv, "bench");
    if (r >= 0) return r;
    return bench_main(&o);
}

/* make run: the seed's table for every scheme on the defaults; with no
 * options, then the short fairness table on the tenants workload at load
 * 0.9 (docs/EVALUATION.md, "Fairness"), with its limits: oracle-memory and
 * each tenant alone (isolated). */
int fkv_cli_run(int argc, char **argv)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = 20000; /* 2,000 long requests: enough for a long-class P99 */
    int r = parse_all(&o, argc, argv, "run");
    if (r >= 0) return r;
    int rc = bench_main(&o);
    if (rc || argc > 1) return rc;
    fkv_bench_opts f;
    fkv_bench_opts_default(&f);
    f.workload = "tenants";
    f.load_lo = f.load_hi = 0.9;
    f.schemes = "lru,vtc,vllm,vllm-fp8,lru+sglang-victim,fairkv,oracle-memory,isolated";
    f.fairness_table = 1;
    printf("\n");
    fflush(stdout);
    return bench_main(&f);
}

/* Grid search of F-LRU's (alpha, beta), which the seed says it tuned to
 * (0.7, 0.3), on the bench workload;
 * objective = mean + std of end-to-end latency (ms), the seed's "balance of
 * latency and fairness" made explicit. */
int fkv_cli_grid(int argc, char **argv)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = 1000;
    o.schemes = "flru";
    double a0 = 0, a1 = 1, as = 0.1, b0 = 0, b1 = 1, bs = 0.1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: fairkv grid [--alpha A:B:STEP] [--beta A:B:STEP] [--scheme flru|flru-dyn] [bench options]\n"
                   "objective: mean + std of end-to-end latency (ms); prints the grid as CSV and the best pair\n\n");
            fkv_bench_usage(stdout);
            return 0;
        }
        if ((!strcmp(argv[i], "--alpha") || !strcmp(argv[i], "--beta")) && i + 1 < argc) {
            double lo, hi, st;
            const char *v = argv[i + 1];
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            char *p1 = strchr(buf, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
            char *e1, *e2, *e3;
            if (p1 && p2) {
                *p1 = *p2 = 0;
                lo = strtod(buf, &e1);
                hi = strtod(p1 + 1, &e2);
                st = strtod(p2 + 1, &e3);
            } else {
                lo = hi = strtod(buf, &e1);
                st = 1;
                e2 = e3 = (char *)"";
            }
            if (*e1 || *e2 || *e3 || st <= 0 || hi < lo || lo < 0) {
                fprintf(stderr, "fairkv grid: bad range for %s: '%s' (A:B:STEP)\n", argv[i], v);
                return 2;
            }
            if (argv[i][2] == 'a') a0 = lo, a1 = hi, as = st;
            else b0 = lo, b1 = hi, bs = st;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--scheme") && i + 1 < argc) {
            o.schemes = argv[++i];
            continue;
        }
        int r = fkv_bench_parse_opt(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "fairkv grid: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (strchr(o.schemes, ',')) {
        fprintf(stderr, "fairkv grid: one scheme only\n");
        return 2;
    }
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_status st = fkv_bench_prepare(&c, &o, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv grid: %s\n", err[0] ? err : fkv_strerror(st));
        fkv_bench_ctx_free(&c);
        return 1;
    }
    size_t na = (size_t)floor((a1 - a0) / as + 1e-9) + 1, nb = (size_t)floor((b1 - b0) / bs + 1e-9) + 1;
    double *A = calloc(na, sizeof *A), *B = calloc(nb, sizeof *B), *obj = calloc(na * nb, sizeof *obj);
    FILE *out = open_out(o.output);
    fkv_workload w;
    double rate;
    int rc = 0;
    if (!A || !B || !obj || !out || fkv_bench_arrivals(&c, o.load_lo, &w, &rate) != FKV_OK) {
        rc = 1;
        goto done;
    }
    fprintf(out, "# fairkv grid: scheme %s, workload %s, %zu requests, load %.2f, profile %s, capacity %llu tokens (%s)\n",
            o.schemes, c.base.name, w.n, o.load_lo, c.profile.name,
            (unsigned long long)c.capacity_tokens, c.capacity_rule);
    fprintf(out, "alpha,beta,e2e_mean_ms,e2e_p99_ms,e2e_std_ms,short_mean_ms,long_mean_ms,prefix_hit_rate,objective\n");
    size_t best = 0;
    int quiet = o.quiet;
    o.quiet = 1;
    for (size_t i = 0; i < na && !rc; i++)
        for (size_t j = 0; j < nb && !rc; j++) {
            A[i] = a0 + i * as;
            B[j] = b0 + j * bs;
            o.sim.alpha = A[i];
            o.sim.beta = B[j];
            fkv_scheme_summary s;
            size_t n;
            if (fkv_bench_schemes(&c, &w, &s, NULL, &n, 1, err, sizeof err)) {
                fprintf(stderr, "fairkv grid: %s\n", err);
                rc = 1;
                break;
            }
            obj[i * nb + j] = s.e2e.mean_ms + s.e2e.std_ms;
            if (obj[i * nb + j] < obj[best]) best = i * nb + j;
            fprintf(out, "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6f,%.3f\n", A[i], B[j], s.e2e.mean_ms, s.e2e.p99_ms,
                    s.e2e.std_ms, s.e2e.by_class[FKV_CLASS_SHORT].mean_ms, s.e2e.by_class[FKV_CLASS_LONG].mean_ms,
                    s.prefix_hit_rate, obj[i * nb + j]);
            if (!quiet && isatty(2)) fprintf(stderr, "\r  grid %zu/%zu   ", i * nb + j + 1, na * nb);
        }
    if (!quiet && isatty(2)) fprintf(stderr, "\r%30s\r", "");
    if (!rc) {
        fprintf(out, "# best: alpha=%.3f beta=%.3f objective=%.3f ms (mean + std of e2e latency)\n", A[best / nb],
                B[best % nb], obj[best]);
        if (o.plot_dir) fkv_plot_grid(o.plot_dir, A, B, obj, na, nb);
    }
    fkv_workload_free(&w);
done:
    free(A);
    free(B);
    free(obj);
    if (out && out != stdout) fclose(out);
    fkv_bench_ctx_free(&c);
    return rc;
}

/* KV cache size calculator. */
int fkv_cli_size(int argc, char **argv)
{
    const char *model = NULL;
    double ctx = 0, batch = 1;
    int bytes = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *e = NULL;
        if (!strcmp(argv[i], "--model") && v) model = argv[++i];
        else if (!strcmp(argv[i], "--context") && v) ctx = strtod(argv[++i], &e);
        else if (!strcmp(argv[i], "--batch") && v) batch = strtod(argv[++i], &e);
        else if (!strcmp(argv[i], "--dtype") && v) {
            i++;
            bytes = !strcmp(v, "f32") ? 4 : !strcmp(v, "f16") ? 2 : !strcmp(v, "int8") ? 1 : -1;
            if (bytes < 0) {
                fprintf(stderr, "fairkv size: --dtype f32|f16|int8\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            model = NULL;
            break;
        } else {
            fprintf(stderr, "fairkv size: unknown option '%s'\n", argv[i]);
            return 2;
        }
        if (e && (*e || ctx < 0 || batch < 1)) {
            fprintf(stderr, "fairkv size: bad number '%s'\n", argv[i]);
            return 2;
        }
    }
    size_t n;
    const fkv_model_geom *ms = fkv_model_list(&n);
    if (!model) {
        printf("usage: fairkv size --model NAME [--context TOKENS] [--batch N] [--dtype f16|f32|int8]\nmodels:");
        for (size_t i = 0; i < n; i++) printf(" %s", ms[i].name);
        printf("\n");
        return argc > 1 ? 0 : 2;
    }
    const fkv_model_geom *m = fkv_model_find(model);
    if (!m) {
        fprintf(stderr, "fairkv size: unknown model '%s'; known:", model);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", ms[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    fkv_model_geom g = *m;
    if (bytes) g.dtype_bytes = (uint32_t)bytes;
    uint64_t tb = fkv_model_token_bytes(&g);
    double c = ctx > 0 ? ctx : g.context;
    double seq = (double)tb * c;
    printf("model %s: %u layers, %u query heads, %u KV heads x %u dims, %u-byte elements (%s)\n", g.name, g.n_layers,
           g.n_heads, g.n_kv_heads, g.head_dim, g.dtype_bytes, g.source);
    printf("KV per token: %llu bytes (%.2f MiB; 2 x %u layers x %u heads x %u x %u B)\n", (unsigned long long)tb,
           tb / 1048576.0, g.n_layers, g.n_kv_heads, g.head_dim, g.dtype_bytes);
    printf("KV per sequence of %.0f tokens: %.3f GB (%.3f GiB)\n", c, seq / 1e9, seq / 1073741824.0);
    if (batch > 1) printf("KV for a batch of %.0f: %.3f GB\n", batch, seq * batch / 1e9);
    printf("weights at 2 B/parameter: %.1f GB\n", g.params * 2 / 1e9);
    return 0;
}
