/* PNG plots through gnuplot: each plot writes NAME.dat and NAME.gp into the
 * directory, then runs `gnuplot NAME.gp` there.  Without gnuplot the data
 * and scripts stay and a note goes to stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/bench.h"

static FILE *open_in(const char *dir, const char *name, const char *ext)
{
    char p[1024];
    mkdir(dir, 0777);
    snprintf(p, sizeof p, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(p, "w");
    if (!f) fprintf(stderr, "fairkv plot: %s: %s\n", p, strerror(errno));
    return f;
}

static int run_gnuplot(const char *dir, const char *name)
{
    static int warned;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "command -v gnuplot >/dev/null 2>&1 && cd '%s' && gnuplot '%s.gp'", dir, name);
    int rc = system(cmd);
    if (rc != 0 && !warned) {
        warned = 1;
        fprintf(stderr, "fairkv plot: gnuplot not found or failed; data and scripts are in %s "
                        "(apt-get install gnuplot-nox)\n", dir);
    }
    return rc == 0 ? 0 : -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int fkv_plot_cdf(const char *dir, const fkv_sim_result *res, size_t n)
{
    FILE *d = open_in(dir, "latency_cdf", "dat");
    if (!d) return -1;
    for (size_t s = 0; s < n; s++) {
        const fkv_sim_result *r = &res[s];
        int64_t *v = malloc(r->n * sizeof *v);
        size_t m = 0;
        for (size_t i = 0; v && i < r->n; i++)
            if (r->e2e_ns[i] >= 0) v[m++] = r->e2e_ns[i];
        if (v) qsort(v, m, sizeof *v, cmp_i64);
        fprintf(d, "# %s\n", r->scheme);
        size_t stride = m > 2000 ? m / 2000 : 1;
        for (size_t i = 0; i < m; i += stride) fprintf(d, "%.3f %.5f\n", v[i] * 1e-6, (double)(i + 1) / m);
        if (m) fprintf(d, "%.3f 1\n", v[m - 1] * 1e-6);
        fprintf(d, "\n\n");
        free(v);
    }
    fclose(d);
    FILE *g = open_in(dir, "latency_cdf", "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 900,600\nset output 'latency_cdf.png'\nset logscale x\n"
               "set xlabel 'end-to-end latency (ms)'\nset ylabel 'fraction of requests'\nset key bottom right\n"
               "set title 'latency CDF per scheme'\nplot ");
    for (size_t s = 0; s < n; s++)
        fprintf(g, "%s'latency_cdf.dat' index %zu with lines title '%s'", s ? ", " : "", s, res[s].scheme);
    fprintf(g, "\n");
    fclose(g);
    return run_gnuplot(dir, "latency_cdf");
}

int fkv_plot_classes(const char *dir, const fkv_scheme_summary *s, size_t n)
{
    FILE *d = open_in(dir, "class_latency", "dat");
    if (!d) return -1;
    fprintf(d, "scheme short medium long\n");
    for (size_t i = 0; i < n; i++)
        fprintf(d, "%s %.3f %.3f %.3f\n", s[i].name, s[i].e2e.by_class[0].mean_ms, s[i].e2e.by_class[1].mean_ms,
                s[i].e2e.by_class[2].mean_ms);
    fclose(d);
    FILE *g = open_in(dir, "class_latency", "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 1000,600\nset output 'class_latency.png'\nset style data histograms\n"
               "set style fill solid 0.8\nset ylabel 'mean end-to-end latency (ms)'\nset xtics rotate by -30\n"
               "set key autotitle columnheader\nset title 'latency per request class'\n"
               "plot 'class_latency.dat' using 2:xtic(1), '' using 3, '' using 4\n");
    fclose(g);
    return run_gnuplot(dir, "class_latency");
}

int fkv_plot_tenants(const char *dir, const fkv_scheme_summary *s, size_t n)
{
    if (!n || !s[0].n_tenants) return 0;
    FILE *d = open_in(dir, "tenant_ttft", "dat");
    if (!d) return -1;
    /* one row a scheme, one column a tenant: P99 TTFT (ms) */
    fprintf(d, "scheme");
    for (uint32_t t = 1; t <= s[0].n_tenants; t++) fprintf(d, " t%u%s", t, s[0].tenants[t].light ? "" : "(heavy)");
    fputc('\n', d);
    for (size_t i = 0; i < n; i++) {
        fprintf(d, "%s", s[i].name);
        for (uint32_t t = 1; t <= s[0].n_tenants; t++) fprintf(d, " %.3f", s[i].tenants[t].ttft.p99_ms);
        fputc('\n', d);
    }
    fclose(d);
    FILE *g = open_in(dir, "tenant_ttft", "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 1100,600\nset output 'tenant_ttft.png'\nset style data histograms\n"
               "set style fill solid 0.8\nset logscale y\nset ylabel 'P99 time to first token (ms, log)'\n"
               "set xtics rotate by -30\nset key autotitle columnheader outside right\n"
               "set title 'P99 TTFT per tenant'\nplot 'tenant_ttft.dat' using 2:xtic(1)");
    for (uint32_t t = 2; t <= s[0].n_tenants; t++) fprintf(g, ", '' using %u", t + 1);
    fprintf(g, "\n");
    fclose(g);
    return run_gnuplot(dir, "tenant_ttft");
}

static int xy_plot(const char *dir, const char *name, const char *xl, const char *yl, const char *title,
                   const double *x, const fkv_scheme_summary *s, size_t nx, size_t ns, int what)
{
    FILE *d = open_in(dir, name, "dat");
    if (!d) return -1;
    for (size_t k = 0; k < ns; k++) {
        fprintf(d, "# %s\n", s[k].name);
        for (size_t i = 0; i < nx; i++) {
            const fkv_scheme_summary *v = &s[i * 16 + k];
            double y = what == 0   ? v->fairness_gain
                       : what == 1 ? 100 * v->context_read_rate
                       : what == 3 ? 100 * v->prefix_hit_rate
                                   : v->e2e.std_ms;
            fprintf(d, "%.4f %.4f\n", x[i], y);
        }
        fprintf(d, "\n\n");
    }
    fclose(d);
    FILE *g = open_in(dir, name, "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 900,600\nset output '%s.png'\nset xlabel '%s'\nset ylabel '%s'\n"
               "set title '%s'\nset key outside right\nplot ", name, xl, yl, title);
    for (size_t k = 0; k < ns; k++)
        fprintf(g, "%s'%s.dat' index %zu with linespoints title '%s'", k ? ", " : "", name, k, s[k].name);
    fprintf(g, "\n");
    fclose(g);
    return run_gnuplot(dir, name);
}

int fkv_plot_load(const char *dir, const double *loads, const fkv_scheme_summary *s, size_t n_loads, size_t n_schemes)
{
    xy_plot(dir, "std_vs_load", "offered load", "std of e2e latency (ms)", "latency spread vs load", loads, s, n_loads,
            n_schemes, 2);
    return xy_plot(dir, "fairness_vs_load", "offered load", "fairness gain vs LRU (std ratio)",
                   "fairness gain vs load", loads, s, n_loads, n_schemes, 0);
}

int fkv_plot_capacity(const char *dir, const double *fracs, const fkv_scheme_summary *s, size_t n_fracs,
                      size_t n_schemes)
{
    xy_plot(dir, "context_read_vs_capacity", "KV capacity / peak demand", "context tokens read from the cache (%)",
            "context reads served by the cache vs capacity", fracs, s, n_fracs, n_schemes, 1);
    return xy_plot(dir, "prefix_hit_vs_capacity", "KV capacity / peak demand",
                   "prompt tokens found in the prefix cache (%)", "prefix hit rate vs cache capacity", fracs, s,
                   n_fracs, n_schemes, 3);
}

int fkv_plot_frontier(const char *dir, const char *const *names, const double *fracs, const int *found, size_t n)
{
    FILE *d = open_in(dir, "frontier", "dat");
    if (!d) return -1;
    fprintf(d, "# scheme capacity_frac label\n");
    for (size_t i = 0; i < n; i++)
        fprintf(d, "%s %.4f \"%s%.2f\"\n", names[i], fracs[i], found[i] ? "" : "> ", fracs[i]);
    fclose(d);
    FILE *g = open_in(dir, "frontier", "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 900,600\nset output 'frontier.png'\nset style fill solid 0.8\n"
               "set boxwidth 0.6\nset yrange [0:1.15]\nset xtics rotate by -30\n"
               "set ylabel 'KV capacity / peak live demand'\n"
               "set title 'memory frontier: smallest capacity within 5%% of oracle-memory (lower is better)'\n"
               "plot 'frontier.dat' using 0:2:xtic(1) with boxes notitle, "
               "'' using 0:($2+0.03):3 with labels notitle\n");
    fclose(g);
    return run_gnuplot(dir, "frontier");
}

int fkv_plot_grid(const char *dir, const double *alpha, const double *beta, const double *obj, size_t na, size_t nb)
{
    FILE *d = open_in(dir, "grid", "dat");
    if (!d) return -1;
    for (size_t i = 0; i < na; i++) {
        for (size_t j = 0; j < nb; j++) fprintf(d, "%.4f %.4f %.4f\n", alpha[i], beta[j], obj[i * nb + j]);
        fprintf(d, "\n");
    }
    fclose(d);
    FILE *g = open_in(dir, "grid", "gp");
    if (!g) return -1;
    fprintf(g, "set terminal pngcairo size 800,650\nset output 'grid.png'\nset view map\nset xlabel 'alpha'\n"
               "set ylabel 'beta'\nset cblabel 'mean + std of e2e latency (ms)'\n"
               "set title 'F-LRU grid search (lower is better)'\n"
               "splot 'grid.dat' using 1:2:3 with pm3d notitle\n");
    fclose(g);
    return run_gnuplot(dir, "grid");
}
