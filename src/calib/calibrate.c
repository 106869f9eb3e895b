/* `fairkv bench --calibrate MODEL.gguf` and `fairkv bench --calibrate-log
 * FILE`: the engine's step time on this machine, fitted to the simulator's
 * cost model (src/sim/profile.h), so that `fairkv bench` can predict what
 * `fairkv serve` does.
 *
 * --calibrate-log fits the steps of step logs (src/engine/steplog.h) that
 * `fairkv serve --step-log FILE` wrote while serving a load: the steps then
 * pay for what serving adds (HTTP threads, the load generator and other
 * jobs on the same cores, caches cooled between steps).
 *
 * --calibrate runs the engine directly (no HTTP) over a grid of batch shapes: single
 * prompts of several lengths (prefill chunks up to the step budget), several
 * prompts at once (mixed prefill steps), and B requests decoding together at
 * context C for B in {1, 4, 8, 16} and C in {32, 256, 768}.  Every step is
 * timed (wall clock around fkv_engine_step) and described by the same
 * features the profile prices (fkv_profile_step_ns):
 *
 *   step ms = c0                        per-step overhead
 *           + c1 x tokens               new + recomputed tokens (linear ops)
 *           + c2 x A                    attention work, A = sum over items of
 *                                       n_new x (ctx + (n_new + 1) / 2)
 *                                       + n_restored x ctx / 2
 *           [+ c3 x requests]           per batch item (sampling, callbacks,
 *                                       per-sequence attention set-up)
 *
 * The coefficients are fitted by weighted least squares over all steps, weight
 * 1 / expected ms (1 / measured in a first pass, then 1 / fitted:
 * stepfit.c): the timing noise of a step grows with its length, and an
 * unweighted fit lets the long prefill steps set the overhead, which then
 * misprices the many short decode steps.
 *
 * Which form (3 or 4 terms): with --terms auto (the default) the one with
 * the lower held-out error: the steps are split in two halves in log
 * order, each form is fitted on one half and priced on the other, both
 * ways, and the mean |fitted - measured| / measured over the held-out
 * steps decides; the chosen form is then fitted on all steps.  The
 * profile then uses overhead_ms = c0, a linear table {1: c1, 4096: 4096 c1}
 * and an attention "peak" of 4 L H D / c2 FLOP per ms (efficiency 1, no
 * memory term), which reproduces c2 x A exactly, and per_request_ms = c3
 * (fkv_profile_set_coeffs; `fairkv bench --step-coeffs c0,c1,c2[,c3]`).
 *
 * --terms 7 (never chosen by auto) adds c4, c5, c6: attention's time per
 * byte of K/V read at full precision, int8 and int4 (codes and scales),
 * from the bytes each step read (steplog.h, kv_read); a precision no step
 * read keeps a price of 0 and the report says so.  The simulator then
 * prices each item's bytes at those rates (profile.h, kv_byte_ms). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calibrate.h"
#include "engine/engine.h"
#include "engine/steplog.h"
#include "model/model.h"
#include "sim/profile.h"

typedef struct rec_set {
    fkv_step_rec *v;
    size_t n, cap;
    int64_t t0;
    int oom;
} rec_set;

/* engine on_step: collects every step with work */
static void on_step(void *ctx, const fkv_engine_step_info *si)
{
    rec_set *rs = ctx;
    if (!rs || rs->oom) return;
    if (rs->n == rs->cap) {
        size_t nc = rs->cap ? 2 * rs->cap : 1024;
        fkv_step_rec *p = realloc(rs->v, nc * sizeof *p);
        if (!p) {
            rs->oom = 1;
            return;
        }
        rs->v = p;
        rs->cap = nc;
    }
    if (!rs->n) rs->t0 = si->t0_ns;
    rs->v[rs->n++] = (fkv_step_rec){si->t0_ns - rs->t0, si->tokens, si->n_items, si->attn_work, si->wall_ns,
                                     {si->kv_read[0], si->kv_read[1], si->kv_read[2]}};
}

/* Runs n requests of `prompt` random tokens and `out` outputs, all
 * submitted before the first step; the steps go to the engine's on_step. */
static fkv_status run_shape(fkv_engine *e, uint32_t vocab, uint32_t n, uint32_t prompt, uint32_t out, uint64_t *seed)
{
    int32_t *ids = malloc(prompt * sizeof *ids);
    if (!ids) return FKV_ENOMEM;
    fkv_status st = FKV_OK;
    for (uint32_t r = 0; r < n && !st; r++) {
        for (uint32_t i = 0; i < prompt; i++) {
            *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
            ids[i] = (int32_t)(3 + (*seed >> 33) % (vocab - 3)); /* no BOS/EOS/unk: distinct prompts */
        }
        fkv_engine_request q;
        memset(&q, 0, sizeof q);
        q.prompt = ids;
        q.n_prompt = prompt;
        q.max_tokens = out;
        q.top_p = 1;
        q.n = 1;
        q.n_stop_tokens = 0; /* shapes must not end early */
        st = fkv_engine_submit(e, &q, NULL);
    }
    free(ids);
    if (!st) st = fkv_engine_run_until_idle(e);
    return st;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv bench --calibrate MODEL.gguf [--threads N] [--max-batch-tokens N] [--repeat R]\n"
               "                    [--kv-quant off|int8|int4|ladder] [--step-log FILE] [common options]\n"
               "       fairkv bench --calibrate-log FILE[,FILE...] [common options]\n"
               "  --calibrate times the engine alone over a grid of batch shapes; --calibrate-log reads\n"
               "  the step logs of `fairkv serve --step-log FILE`.  --kv-quant stores the engine's cold chunks\n"
               "  (past 128 hot tokens) in int8, int4, or int8 for 256 tokens then int4 (ladder), so that\n"
               "  --terms 7 can learn those precisions' prices (off: the default).  Both fit\n"
               "  step ms = c0 + c1 x tokens + c2 x attention work [+ c3 x requests]\n"
               "  (least squares weighted 1 / expected ms) and print the coefficients and the profile fields.\n"
               "common options:\n"
               "  --terms 3|4|7|auto   the form: without / with c3; 7: with c3 and c4, c5, c6 ms a K/V byte\n"
               "                       read at full precision, int8, int4; auto (default): of 3 and 4, the lower held-out\n"
               "                       error when fitted on one half of the steps and priced on the other\n"
               "  --out FILE           also write the report (and the steps) to FILE\n"
               "  --coeffs-out FILE    write 'c0,c1,c2[,c3]' for `fairkv bench --step-coeffs`\n");
}

static void print_err(FILE *f, const char *what, const fkv_step_err *e)
{
    fprintf(f, "  %-24s %6zu steps: mean |error| %5.1f%%, total %+5.1f%%, by tokens", what, e->n,
            100 * e->mean_abs_rel, 100 * e->total_rel);
    static const char *const bins[] = {"1", "2-4", "5-16", "17-64", ">64"};
    for (int b = 0; b < 5; b++)
        if (e->bin_n[b]) fprintf(f, " %s:%+.0f%%", bins[b], 100 * e->bin_rel[b]);
    fprintf(f, "\n");
}

/* Held-out error of the n_terms form: fit on one half, price the other,
 * both ways; *ok = 0 when a half cannot be fitted. */
static void held_out(const fkv_step_rec *r, size_t n, int n_terms, fkv_step_err *out, int *ok)
{
    size_t h = n / 2;
    fkv_step_fit fa, fb;
    fkv_step_err ea, eb;
    memset(out, 0, sizeof *out);
    *ok = !fkv_step_fit_solve(r, h, n_terms, &fa) && !fkv_step_fit_solve(r + h, n - h, n_terms, &fb);
    if (!*ok) return;
    fkv_step_fit_eval(&fa, r + h, n - h, &ea); /* fitted on the first half, priced on the second */
    fkv_step_fit_eval(&fb, r, h, &eb);
    out->n = n;
    out->mean_abs_rel = (ea.mean_abs_rel * (double)ea.n + eb.mean_abs_rel * (double)eb.n) / (double)n;
    out->sum_ms = ea.sum_ms + eb.sum_ms;
    out->sum_fit_ms = ea.sum_fit_ms + eb.sum_fit_ms;
    out->total_rel = (out->sum_fit_ms - out->sum_ms) / out->sum_ms;
    for (int b = 0; b < 5; b++) {
        out->bin_n[b] = ea.bin_n[b] + eb.bin_n[b];
        /* pooled: each half's bias weighted by its measured time in the bin */
        double ma = 0, mb = 0;
        for (size_t i = h; i < n; i++)
            if (r[i].tokens <= fkv_step_bin_hi(b) && (b == 0 || r[i].tokens > fkv_step_bin_hi(b - 1)))
                ma += (double)r[i].wall_ns / 1e6;
        for (size_t i = 0; i < h; i++)
            if (r[i].tokens <= fkv_step_bin_hi(b) && (b == 0 || r[i].tokens > fkv_step_bin_hi(b - 1)))
                mb += (double)r[i].wall_ns / 1e6;
        out->bin_rel[b] = ma + mb > 0 ? (ea.bin_rel[b] * ma + eb.bin_rel[b] * mb) / (ma + mb) : 0;
    }
}

/* Fits, reports, writes the outputs; returns the exit status. */
static int fit_and_report(const fkv_step_rec *r, size_t n, const char *what, int terms, const fkv_llama_hparams *hp,
                          const char *out_path, const char *coeffs_path)
{
    fkv_step_err cv[2];
    int cv_ok[2];
    held_out(r, n, 3, &cv[0], &cv_ok[0]);
    held_out(r, n, 4, &cv[1], &cv_ok[1]);
    int chosen = terms;
    if (!terms) chosen = cv_ok[1] && (!cv_ok[0] || cv[1].mean_abs_rel < cv[0].mean_abs_rel) ? 4 : 3;
    fkv_step_fit fit;
    fkv_status st = fkv_step_fit_solve(r, n, chosen, &fit);
    if (st) {
        fprintf(stderr, "fairkv bench --calibrate: %zu steps cannot be fitted with %d terms (%s)\n", n, chosen,
                st == FKV_EINVAL ? "too few steps" : "degenerate: the steps do not vary enough");
        return 1;
    }
    fkv_step_err in;
    fkv_step_fit_eval(&fit, r, n, &in);
    FILE *files[2] = {stdout, NULL};
    if (out_path && !(files[1] = fopen(out_path, "w"))) {
        fprintf(stderr, "fairkv bench --calibrate: --out %s: %s\n", out_path, strerror(errno));
        return 1;
    }
    for (int k = 0; k < 2 && files[k]; k++) {
        FILE *f = files[k];
        fprintf(f, "calibration of %s: %zu steps, %d terms (%s)\n", what, n, chosen,
                terms ? "--terms" : "auto: the lower held-out error");
        fprintf(f, "  overhead_ms     c0 = %.6g   (per step)\n"
                   "  per_token_ms    c1 = %.6g   (per new or recomputed token)\n"
                   "  per_attn_ms     c2 = %.6g   (per unit of attention work)\n",
                fit.c[0], fit.c[1], fit.c[2]);
        if (chosen >= 4) fprintf(f, "  per_request_ms  c3 = %.6g   (per request in the step)\n", fit.c[3]);
        static const char *const prec[3] = {"full precision", "int8", "int4"};
        for (int j = 0; j < 3 && chosen == 7; j++)
            fprintf(f, "  kv_byte_ms[%d]  c%d = %.6g   (per K/V byte read at %s%s)\n", j, 4 + j, fit.c[4 + j], prec[j],
                    fit.unread[j]       ? "; no step read it: not fitted"
                    : fit.dropped_kv[j] ? "; came out negative: refitted without it"
                                        : "");
        if (fit.dropped_attn) fprintf(f, "  (c2 came out negative: refitted without the attention term)\n");
        fprintf(f, "  R^2 %.4f\n", in.r2);
        print_err(f, "fit, all steps:", &in);
        for (int t = 0; t < 2; t++) {
            char name[64];
            snprintf(name, sizeof name, "held out, %d terms:", 3 + t);
            if (cv_ok[t]) print_err(f, name, &cv[t]);
            else fprintf(f, "  %-24s cannot be fitted on a half\n", name);
        }
        double per = hp ? 4.0 * hp->n_layers * hp->n_heads * hp->head_dim : 0;
        fprintf(f, "profile fields: overhead_ms = %.6g; linear table {1: %.6g ms, 4096: %.6g ms}; per_request_ms = "
                   "%.6g;\n",
                fit.c[0], fit.c[1], 4096 * fit.c[1], fit.c[3]);
        if (per > 0 && fit.c[2] > 0)
            fprintf(f, "  peak_flops = 4 L H D / c2 = %.0f / %.6g ms = %.6g FLOP/s, attn_efficiency 1, hbm 0\n", per,
                    fit.c[2], per * 1e3 / fit.c[2]);
        fprintf(f, "fairkv bench --step-coeffs %.9g,%.9g,%.9g", fit.c[0], fit.c[1], fit.c[2]);
        for (int j = 3; j < chosen; j++) fprintf(f, ",%.9g", fit.c[j]);
        fprintf(f, "\n");
    }
    int rc = 0;
    if (files[1]) {
        fputs("# steps:\n" FKV_STEPLOG_HEADER, files[1]);
        for (size_t i = 0; i < n; i++) fkv_steplog_write(files[1], &r[i]);
        if (ferror(files[1]) | fclose(files[1])) {
            fprintf(stderr, "fairkv bench --calibrate: --out %s: write error\n", out_path);
            rc = 1;
        }
    }
    char why[200];
    double c[FKV_STEP_TERMS_MAX];
    memcpy(c, fit.c, sizeof c);
    if (fkv_profile_check_coeffs(c, (size_t)chosen, why, sizeof why)) {
        fprintf(stderr, "fairkv bench --calibrate: the fit is not a usable profile: %s\n", why);
        rc = 1;
    }
    if (coeffs_path) {
        FILE *f = fopen(coeffs_path, "w");
        if (!f) {
            fprintf(stderr, "fairkv bench --calibrate: --coeffs-out %s: %s\n", coeffs_path, strerror(errno));
            return 1;
        }
        fprintf(f, "%.9g,%.9g,%.9g", c[0], c[1], c[2]);
        for (int k = 3; k < chosen; k++) fprintf(f, ",%.9g", c[k]);
        fprintf(f, "\n");
        if (ferror(f) | fclose(f)) {
            fprintf(stderr, "fairkv bench --calibrate: --coeffs-out %s: write error\n", coeffs_path);
            rc = 1;
        }
    }
    return rc;
}

/* --calibrate-log FILE[,FILE...]: the steps of all files, in order. */
static int from_logs(const char *list, int terms, const char *out_path, const char *coeffs_path)
{
    fkv_step_rec *all = NULL;
    size_t n = 0;
    char *copy = strdup(list), *save = NULL;
    int rc = copy ? 0 : 1;
    for (char *p = copy ? strtok_r(copy, ",", &save) : NULL; p && !rc; p = strtok_r(NULL, ",", &save)) {
        fkv_step_rec *v;
        size_t k;
        char err[512] = "";
        fkv_status st = fkv_steplog_read(p, &v, &k, err, sizeof err);
        if (st) {
            fprintf(stderr, "fairkv bench --calibrate-log: %s\n", err[0] ? err : fkv_strerror(st));
            rc = 1;
            break;
        }
        fkv_step_rec *g = realloc(all, (n + k) * sizeof *g);
        if (!g) {
            free(v);
            rc = 1;
            break;
        }
        all = g;
        memcpy(all + n, v, k * sizeof *v);
        n += k;
        free(v);
    }
    if (!rc) rc = fit_and_report(all, n, list, terms, NULL, out_path, coeffs_path);
    free(copy);
    free(all);
    return rc;
}

int fkv__bench_calibrate(int argc, char **argv)
{
    const char *path = NULL, *logs = NULL, *out_path = NULL, *coeffs_path = NULL, *log_path = NULL;
    long threads = 1, mbt = 256, repeat = 2;
    int terms = 0, kvq = 0; /* --kv-quant: 0 off, 1 int8, 2 int4, 3 ladder */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "fairkv bench --calibrate: %s needs a value\n", a);
            return 2;
        }
        i++;
        char *end = NULL;
        if (!strcmp(a, "--calibrate")) path = v;
        else if (!strcmp(a, "--calibrate-log")) logs = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--coeffs-out")) coeffs_path = v;
        else if (!strcmp(a, "--step-log")) log_path = v;
        else if (!strcmp(a, "--threads")) threads = strtol(v, &end, 10);
        else if (!strcmp(a, "--max-batch-tokens")) mbt = strtol(v, &end, 10);
        else if (!strcmp(a, "--repeat")) repeat = strtol(v, &end, 10);
        else if (!strcmp(a, "--kv-quant")) {
            static const char *const kq[] = {"off", "int8", "int4", "ladder"};
            kvq = -1;
            for (int q = 0; q < 4; q++)
                if (!strcmp(v, kq[q])) kvq = q;
            if (kvq < 0) {
                fprintf(stderr, "fairkv bench --calibrate: bad value for --kv-quant: '%s' (off, int8, int4 or ladder)\n",
                        v);
                return 2;
            }
        } else if (!strcmp(a, "--terms")) {
            if (!strcmp(v, "3")) terms = 3;
            else if (!strcmp(v, "4")) terms = 4;
            else if (!strcmp(v, "7")) terms = 7;
            else if (!strcmp(v, "auto")) terms = 0;
            else {
                fprintf(stderr, "fairkv bench --calibrate: bad value for --terms: '%s' (3, 4, 7 or auto)\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "fairkv bench --calibrate: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (end && (*end || threads < 1 || threads > 256 || mbt < 16 || mbt > 65536 || repeat < 1 || repeat > 100)) {
            fprintf(stderr, "fairkv bench --calibrate: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }
    if (!path == !logs) {
        fprintf(stderr, "fairkv bench --calibrate: give one of --calibrate MODEL.gguf or --calibrate-log FILE\n");
        return 2;
    }
    if (logs) return from_logs(logs, terms, out_path, coeffs_path);
    char err[400] = "";
    fkv_llama *m = NULL;
    fkv_status st = fkv_llama_load(path, &m, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv bench --calibrate: %s\n", err[0] ? err : fkv_strerror(st));
        return 1;
    }
    /* the serving configuration of `fairkv serve --model` (backend_engine_opts.c):
     * 64-token chunks, 16 running, the step budget; a cache large enough
     * that nothing is evicted (the profile prices recomputation through
     * the same token and attention terms) */
    rec_set rs = {0};
    fkv_engine_config c;
    fkv_engine_config_default(&c);
    c.chunk_tokens = 64;
    c.n_threads = (uint32_t)threads;
    c.max_batch_tokens = (uint32_t)mbt;
    c.kv_budget_bytes = 64ull << 20;
    c.on_step = on_step;
    c.step_ctx = &rs;
    if (kvq) {
        c.quant_mode = FKV_QUANT_ALWAYS;
        c.quant_dtype = kvq == 2 ? FKV_INT4 : FKV_INT8;
        c.quant_warm_tokens = kvq == 3 ? 256 : 0;
    }
    fkv_engine *e = NULL;
    if ((st = fkv_engine_create(m, &c, &e, err, sizeof err))) {
        fprintf(stderr, "fairkv bench --calibrate: engine: %s\n", err[0] ? err : fkv_strerror(st));
        fkv_llama_free(m);
        return 1;
    }
    uint32_t V = m->hp.n_vocab, ctx = m->hp.ctx_len;
    uint64_t seed = 2026;
    /* warm-up: page in the weights, size the buffers (its steps dropped) */
    st = run_shape(e, V, 4, 128, 8, &seed);
    rs.n = 0;
    static const uint32_t plen[] = {16, 64, 256, 768};
    static const uint32_t bsz[] = {1, 4, 8, 16}, clen[] = {32, 256, 768};
    for (long rep = 0; rep < repeat && !st; rep++) {
        for (size_t i = 0; i < sizeof plen / sizeof *plen && !st; i++)
            if (plen[i] + 1 <= ctx) st = run_shape(e, V, 1, plen[i], 1, &seed);
        if (!st && 200 + 1 <= ctx) st = run_shape(e, V, 4, 200, 1, &seed);
        for (size_t b = 0; b < sizeof bsz / sizeof *bsz && !st; b++)
            for (size_t k = 0; k < sizeof clen / sizeof *clen && !st; k++)
                if (clen[k] + 16 <= ctx) st = run_shape(e, V, bsz[b], clen[k], 16, &seed);
    }
    if (!st && rs.oom) st = FKV_ENOMEM;
    if (st) fprintf(stderr, "fairkv bench --calibrate: %s (%s)\n", fkv_engine_last_error(e), fkv_strerror(st));
    int rc = st ? 1 : 0;
    if (!rc && log_path) {
        FILE *f = NULL;
        char e2[400] = "";
        if (fkv_steplog_open(log_path, &f, e2, sizeof e2))
            fprintf(stderr, "fairkv bench --calibrate: --step-log %s\n", e2);
        rc = !f;
        if (f) {
            for (size_t i = 0; i < rs.n; i++) fkv_steplog_write(f, &rs.v[i]);
            if (ferror(f) | fclose(f)) {
                fprintf(stderr, "fairkv bench --calibrate: --step-log %s: write error\n", log_path);
                rc = 1;
            }
        }
    }
    if (!rc) {
        char what[1200];
        snprintf(what, sizeof what, "%s (engine alone, %ld thread(s), max_batch_tokens %ld%s)", path, threads, mbt,
                 kvq == 1 ? ", int8 cold chunks" : kvq == 2 ? ", int4 cold chunks" : kvq == 3 ? ", int8 then int4" : "");
        rc = fit_and_report(rs.v, rs.n, what, terms, &m->hp, out_path, coeffs_path);
    }
    fkv_engine_destroy(e);
    fkv_llama_free(m);
    free(rs.v);
    return rc;
}
