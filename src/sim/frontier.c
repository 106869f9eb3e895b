/* The memory frontier: bisection over KV capacity per scheme, the
 * within-5%-of-oracle test, and the frontier's text and JSON forms. */
#include "sim/frontier.h"

#include <math.h>
#include <string.h>

double fkv_frontier_bisect(int (*ok)(double x, void *ctx), void *ctx, double lo, double hi, double tol, int *probes)
{
    int n = 1;
    double r;
    /* a tolerance of 0 would never end: a floor far below any use */
    if (!(tol > 1e-12)) tol = 1e-12;
    if (!ok(hi, ctx)) {
        r = NAN;
    } else if (lo >= hi) {
        r = hi;
    } else {
        n++;
        if (ok(lo, ctx)) {
            r = lo;
        } else {
            /* ok(lo) false, ok(hi) true: the frontier is in (lo, hi] */
            for (int guard = 0; hi - lo > tol && guard < 200; guard++) {
                double mid = 0.5 * (lo + hi);
                n++;
                if (ok(mid, ctx)) hi = mid;
                else lo = mid;
            }
            r = hi;
        }
    }
    if (probes) *probes = n;
    return r;
}

/* A tiny relative margin, so that a latency of exactly (1 + slack) x the
 * oracle's passes whatever the rounding of the product. */
static int le_slack(double v, double ref, double slack)
{
    return v <= ref * (1 + slack) * (1 + 1e-12);
}

int fkv_frontier_within(const fkv_scheme_summary *s, const fkv_scheme_summary *oracle, double slack)
{
    if (s->done < oracle->done) return 0;
    if (!le_slack(s->e2e.mean_ms, oracle->e2e.mean_ms, slack)) return 0;
    if (!le_slack(s->e2e.p99_ms, oracle->e2e.p99_ms, slack)) return 0;
    if (oracle->e2e.by_class[FKV_CLASS_SHORT].n &&
        !le_slack(s->e2e.by_class[FKV_CLASS_SHORT].p99_ms, oracle->e2e.by_class[FKV_CLASS_SHORT].p99_ms, slack))
        return 0;
    return 1;
}

uint64_t fkv_frontier_capacity(uint64_t peak, uint64_t floor_tokens, double f)
{
    /* the small margin keeps floor/peak x peak from rounding up a token */
    double t = ceil(f * (double)peak - 1e-6);
    uint64_t cap = t > 0 ? (uint64_t)t : 0;
    return cap < floor_tokens ? floor_tokens : cap;
}

static double ratio(double v, double ref)
{
    return ref > 0 ? v / ref : (v > 0 ? INFINITY : 1);
}

/* What one probe of the bisection needs and leaves behind. */
typedef struct probe_ctx {
    fkv_bench_ctx *c;
    const fkv_workload *w;
    const fkv_scheme *sc;
    const fkv_scheme_summary *oracle;
    fkv_frontier_point *out;
    int have_best;           /* best: the run at the smallest passing fraction */
    double best_frac;
    fkv_scheme_summary best, first; /* first: the run at the range's top */
    fkv_status st;
    char *err;
    size_t errlen;
} probe_ctx;

static int probe(double frac, void *arg)
{
    probe_ctx *p = arg;
    if (p->st) return 0; /* a failed run ends the search (reported by the caller) */
    fkv_sim_config cfg = p->c->o->sim;
    cfg.capacity_tokens = fkv_frontier_capacity(p->c->peak_tokens, p->c->floor_tokens, frac);
    cfg.progress = 0;
    fkv_sim_result r;
    if ((p->st = fkv_sim_run(p->w, p->sc, &cfg, &r, p->err, p->errlen)) != FKV_OK) return 0;
    fkv_scheme_summary s;
    fkv_summarize(&r, &s);
    fkv_sim_result_free(&r);
    int ok = fkv_frontier_within(&s, p->oracle, FKV_FRONTIER_SLACK);
    fkv_frontier_point *o = p->out;
    if (o->n_probes < FKV_FRONTIER_MAX_PROBES) {
        const fkv_lat_stats *e = &s.e2e, *oe = &p->oracle->e2e;
        o->probes[o->n_probes++] = (fkv_frontier_probe){
            .frac = frac,
            .capacity_tokens = cfg.capacity_tokens,
            .within = ok,
            .mean_ratio = ratio(e->mean_ms, oe->mean_ms),
            .p99_ratio = ratio(e->p99_ms, oe->p99_ms),
            .short_p99_ratio = ratio(e->by_class[FKV_CLASS_SHORT].p99_ms, oe->by_class[FKV_CLASS_SHORT].p99_ms),
        };
    }
    if (o->n_probes == 1) p->first = s;
    if (ok && (!p->have_best || frac < p->best_frac)) {
        p->have_best = 1;
        p->best_frac = frac;
        p->best = s;
    }
    return ok;
}

fkv_status fkv_frontier_scheme(fkv_bench_ctx *c, const fkv_workload *w, const fkv_scheme *sc,
                               const fkv_scheme_summary *oracle, double tol, double top, fkv_frontier_point *out,
                               char *err,
                               size_t errlen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->scheme, sizeof out->scheme, "%s", sc->name);
    /* below the floor's fraction every capacity is the floor: start there */
    double lo = FKV_FRONTIER_LO, hi = top > 0 ? top : FKV_FRONTIER_HI;
    double floor_frac = c->peak_tokens ? (double)c->floor_tokens / (double)c->peak_tokens : hi;
    if (floor_frac > lo) lo = floor_frac < hi ? floor_frac : hi;
    probe_ctx p = {.c = c, .w = w, .sc = sc, .oracle = oracle, .out = out, .err = err, .errlen = errlen};
    int n = 0;
    double f = fkv_frontier_bisect(probe, &p, lo, hi, tol, &n);
    if (p.st) return p.st;
    out->found = !isnan(f);
    out->capacity_frac = out->found ? f : hi;
    out->capacity_tokens = fkv_frontier_capacity(c->peak_tokens, c->floor_tokens, out->capacity_frac);
    out->floor_binds = out->capacity_tokens == c->floor_tokens;
    out->at = out->found ? p.best : p.first;
    fkv_accuracy_of(sc, &c->o->sim, &out->at.accuracy);
    out->n_probes = n;
    return FKV_OK;
}

fkv_status fkv_frontier_oracle(fkv_bench_ctx *c, const fkv_workload *w, fkv_scheme_summary *oracle, char *err,
                               size_t errlen)
{
    const fkv_scheme *sc = fkv_scheme_find("oracle-memory");
    if (!sc || !fkv_scheme_available(sc)) {
        snprintf(err, errlen, "the frontier needs the oracle-memory scheme, which this build lacks");
        return FKV_ENOENT;
    }
    fkv_sim_config cfg = c->o->sim;
    cfg.capacity_tokens = c->peak_tokens ? c->peak_tokens : 1; /* ignored: the oracle sizes itself */
    cfg.progress = 0;
    fkv_sim_result r;
    fkv_status st = fkv_sim_run(w, sc, &cfg, &r, err, errlen);
    if (st) return st;
    fkv_summarize(&r, oracle);
    fkv_sim_result_free(&r);
    return FKV_OK;
}

static double gb(const fkv_frontier_meta *m, uint64_t tokens)
{
    return (double)tokens * (double)m->token_bytes / 1e9;
}

static double short_p99(const fkv_scheme_summary *s)
{
    return s->e2e.by_class[FKV_CLASS_SHORT].p99_ms;
}

void fkv_frontier_text(FILE *f, const fkv_frontier_meta *m, const fkv_scheme_summary *oracle,
                       const fkv_frontier_point *p, size_t n)
{
    fprintf(f, "memory frontier: workload %s, ", m->workload);
    if (m->load > 0) fprintf(f, "load %.2f, ", m->load);
    else fprintf(f, "native timing, ");
    fprintf(f, "%zu requests, profile %s; peak live demand %llu tokens (%.2f GB); tolerance %.3f of peak\n",
            m->requests, m->profile, (unsigned long long)m->peak_tokens, gb(m, m->peak_tokens), m->tol);
    fprintf(f, "smallest KV capacity (fraction of peak) with mean, P99 and short-class P99 end-to-end latency each\n"
               "within %.0f%% of oracle-memory (mean %.1f ms, P99 %.1f ms, short P99 %.1f ms)\n\n",
            100 * m->slack, oracle->e2e.mean_ms, oracle->e2e.p99_ms, short_p99(oracle));
    fprintf(f, "%-14s %9s %9s %8s %8s %8s %10s %7s", "scheme", "capacity", "tokens", "GB", "mean/o", "P99/o",
            "shortP99/o", "probes");
    fkv_report_accuracy_text(f, NULL);
    fputc('\n', f);
    int any_floor = 0, any_missing = 0;
    for (size_t i = 0; i < n; i++) {
        const fkv_frontier_point *q = &p[i];
        char frac[16];
        if (q->found) snprintf(frac, sizeof frac, "%.2f%s", q->capacity_frac, q->floor_binds ? "*" : "");
        else snprintf(frac, sizeof frac, "> %.2f", m->top > 0 ? m->top : FKV_FRONTIER_HI);
        any_floor |= q->floor_binds;
        any_missing |= !q->found;
        fprintf(f, "%-14s %9s %9llu %8.2f %8.3f %8.3f %10.3f %7d", q->scheme, frac,
                (unsigned long long)q->capacity_tokens, gb(m, q->capacity_tokens),
                ratio(q->at.e2e.mean_ms, oracle->e2e.mean_ms), ratio(q->at.e2e.p99_ms, oracle->e2e.p99_ms),
                ratio(short_p99(&q->at), short_p99(oracle)), q->n_probes);
        fkv_report_accuracy_text(f, &q->at);
        fputc('\n', f);
    }
    fprintf(f, "x/o: the scheme's latency at that capacity over oracle-memory's; GB: KV bytes of the tokens at the\n"
               "model's element size (fp8 schemes hold twice the tokens in them); kv, KLDmean, top1%%: the deepest K/V\n"
               "precision the row can reach and its accuracy on stories260K against fp32 (n/m: not measured)\n");
    if (any_floor)
        fprintf(f, "*: the floor, %llu tokens = %.2f of peak (the largest request + 256: every request fits alone)\n",
                (unsigned long long)m->floor_tokens, m->peak_tokens ? (double)m->floor_tokens / m->peak_tokens : 0);
    if (any_missing)
        fprintf(f, "> %.2f: not within %.0f%% even at the peak demand (ratios at %.2f); not searched above\n",
                m->top > 0 ? m->top : FKV_FRONTIER_HI, 100 * m->slack, m->top > 0 ? m->top : FKV_FRONTIER_HI);
}

/* JSON number, or null where it is not finite (JSON has no inf/nan). */
static void jnum(FILE *f, const char *key, double v, int comma)
{
    if (isfinite(v)) fprintf(f, "\"%s\":%.6g", key, v);
    else fprintf(f, "\"%s\":null", key);
    if (comma) fputc(',', f);
}

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void json_point(FILE *f, const fkv_frontier_meta *m, const fkv_scheme_summary *oracle,
                       const fkv_frontier_point *q)
{
    fprintf(f, "{\"scheme\":");
    jstr(f, q->scheme);
    if (q->found) fprintf(f, ",\"capacity_frac\":%.6g", q->capacity_frac);
    else fprintf(f, ",\"capacity_frac\":null");
    fprintf(f, ",\"within_at_max\":%s,\"capacity_tokens\":%llu,", q->found ? "true" : "false",
            (unsigned long long)q->capacity_tokens);
    jnum(f, "capacity_gb", gb(m, q->capacity_tokens), 1);
    fprintf(f, "\"floor\":%s,", q->floor_binds ? "true" : "false");
    jnum(f, "mean_ms", q->at.e2e.mean_ms, 1);
    jnum(f, "p99_ms", q->at.e2e.p99_ms, 1);
    jnum(f, "short_p99_ms", short_p99(&q->at), 1);
    jnum(f, "mean_ratio", ratio(q->at.e2e.mean_ms, oracle->e2e.mean_ms), 1);
    jnum(f, "p99_ratio", ratio(q->at.e2e.p99_ms, oracle->e2e.p99_ms), 1);
    jnum(f, "short_p99_ratio", ratio(short_p99(&q->at), short_p99(oracle)), 1);
    fprintf(f, "\"probes\":%d,\"trail\":[", q->n_probes);
    for (int k = 0; k < q->n_probes && k < FKV_FRONTIER_MAX_PROBES; k++) {
        const fkv_frontier_probe *t = &q->probes[k];
        fprintf(f, "%s{\"frac\":%.6g,\"capacity_tokens\":%llu,\"within\":%s,", k ? "," : "", t->frac,
                (unsigned long long)t->capacity_tokens, t->within ? "true" : "false");
        jnum(f, "mean_ratio", t->mean_ratio, 1);
        jnum(f, "p99_ratio", t->p99_ratio, 1);
        jnum(f, "short_p99_ratio", t->short_p99_ratio, 0);
        fputc('}', f);
    }
    fputc(']', f);
    fkv_report_accuracy_json(f, &q->at);
    fputc('}', f);
}

void fkv_frontier_json(FILE *f, const fkv_frontier_meta *m, const fkv_scheme_summary *oracle,
                       const fkv_frontier_point *p, size_t n)
{
    fprintf(f, "{\"workload\":");
    jstr(f, m->workload);
    fprintf(f, ",\"profile\":");
    jstr(f, m->profile);
    fputc(',', f);
    if (m->load > 0) jnum(f, "load", m->load, 1);
    else fprintf(f, "\"load\":null,");
    fprintf(f, "\"requests\":%zu,\"peak_tokens\":%llu,\"floor_tokens\":%llu,", m->requests,
            (unsigned long long)m->peak_tokens, (unsigned long long)m->floor_tokens);
    jnum(f, "tolerance", m->tol, 1);
    jnum(f, "slack", m->slack, 1);
    fprintf(f, "\"oracle\":{");
    jnum(f, "mean_ms", oracle->e2e.mean_ms, 1);
    jnum(f, "p99_ms", oracle->e2e.p99_ms, 1);
    jnum(f, "short_p99_ms", short_p99(oracle), 0);
    fprintf(f, "},\"frontier\":[\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s", i ? ",\n" : "");
        json_point(f, m, oracle, &p[i]);
    }
    fprintf(f, "\n]}\n");
}
