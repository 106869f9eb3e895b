/* `fairkv bench --calibrate MODEL.gguf`: measures the engine's step time on
 * this machine and fits the simulator's cost model (src/sim/profile.h) to
 * it, so that `fairkv bench` can predict what `fairkv serve` does.
 *
 * The engine runs directly (no HTTP) over a grid of batch shapes: single
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
 *
 * c0, c1, c2 are fitted by weighted least squares over all steps, weight
 * 1 / measured ms: the timing noise of a step grows with its length, and
 * an unweighted fit lets the long prefill steps set the overhead, which
 * then misprices the many short decode steps.  The
 * profile then uses overhead_ms = c0, a linear table {1: c1, 4096: 4096 c1}
 * and an attention "peak" of 4 L H D / c2 FLOP per ms (efficiency 1, no
 * memory term), which reproduces c2 x A exactly. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/calibrate.h"
#include "engine/engine_internal.h"
#include "engine/model.h"

typedef struct obs {
    double ms, tokens, attn;
    int scenario;
} obs;

typedef struct obs_set {
    obs *v;
    size_t n, cap;
} obs_set;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double attn_work(const fkv_batch *b)
{
    double a = 0;
    for (size_t i = 0; i < b->n; i++) {
        const fkv_batch_item *it = &b->items[i];
        a += (double)it->n_new * ((double)it->ctx + (it->n_new + 1) / 2.0) + (double)it->n_restored * it->ctx / 2.0;
    }
    return a;
}

/* Runs n requests of `prompt` random tokens and `out` outputs, all
 * submitted before the first step; records every non-empty step. */
static fkv_status run_shape(fkv_engine *e, uint32_t vocab, uint32_t n, uint32_t prompt, uint32_t out, uint64_t *seed,
                            int scenario, obs_set *os)
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
        q.stop_token = -1; /* shapes must not end early */
        st = fkv_engine_submit(e, &q, NULL);
    }
    free(ids);
    for (int busy = 1; busy && !st;) {
        int64_t t0 = now_ns();
        st = fkv_engine_step(e, &busy);
        int64_t t1 = now_ns();
        if (st || !busy || !e->batch.n || !e->batch.tokens) continue;
        if (os->n == os->cap) {
            size_t nc = os->cap ? 2 * os->cap : 1024;
            obs *p = realloc(os->v, nc * sizeof *p);
            if (!p) return FKV_ENOMEM;
            os->v = p;
            os->cap = nc;
        }
        os->v[os->n++] = (obs){(double)(t1 - t0) / 1e6, e->batch.tokens, attn_work(&e->batch), scenario};
    }
    return st;
}

/* Solves the 3x3 system a x = b (Gaussian elimination, partial pivoting). */
static int solve3(double a[3][3], double b[3], double x[3])
{
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int r = c + 1; r < 3; r++)
            if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
        if (fabs(a[p][c]) < 1e-300) return -1;
        for (int k = 0; k < 3; k++) {
            double t = a[c][k];
            a[c][k] = a[p][k];
            a[p][k] = t;
        }
        double t = b[c];
        b[c] = b[p];
        b[p] = t;
        for (int r = c + 1; r < 3; r++) {
            double f = a[r][c] / a[c][c];
            for (int k = c; k < 3; k++) a[r][k] -= f * a[c][k];
            b[r] -= f * b[c];
        }
    }
    for (int r = 2; r >= 0; r--) {
        double s = b[r];
        for (int k = r + 1; k < 3; k++) s -= a[r][k] * x[k];
        x[r] = s / a[r][r];
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv bench --calibrate MODEL.gguf [--threads N] [--max-batch-tokens N] [--repeat R]\n"
               "                    [--out FILE]\n"
               "  times the engine's steps over a grid of batch shapes and fits the cost profile\n"
               "  step ms = overhead + per_token x tokens + per_attn x attention work (least squares);\n"
               "  prints the coefficients and the profile fields (and writes them to FILE)\n");
}

static const char *const scen_name[] = {"prefill-1", "prefill-4", "decode"};

int fkv__bench_calibrate(int argc, char **argv)
{
    const char *path = NULL, *out_path = NULL;
    long threads = 1, mbt = 256, repeat = 2;
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
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--threads")) threads = strtol(v, &end, 10);
        else if (!strcmp(a, "--max-batch-tokens")) mbt = strtol(v, &end, 10);
        else if (!strcmp(a, "--repeat")) repeat = strtol(v, &end, 10);
        else {
            fprintf(stderr, "fairkv bench --calibrate: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (end && (*end || threads < 1 || threads > 256 || mbt < 16 || mbt > 65536 || repeat < 1 || repeat > 100)) {
            fprintf(stderr, "fairkv bench --calibrate: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }
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
    fkv_engine_config c;
    fkv_engine_config_default(&c);
    c.chunk_tokens = 64;
    c.n_threads = (uint32_t)threads;
    c.max_batch_tokens = (uint32_t)mbt;
    c.kv_budget_bytes = 64ull << 20;
    fkv_engine *e = NULL;
    if ((st = fkv_engine_create(m, &c, &e, err, sizeof err))) {
        fprintf(stderr, "fairkv bench --calibrate: engine: %s\n", err[0] ? err : fkv_strerror(st));
        fkv_llama_free(m);
        return 1;
    }
    uint32_t V = m->hp.n_vocab, ctx = m->hp.ctx_len;
    obs_set os = {0};
    uint64_t seed = 2026;
    /* warm-up: page in the weights, size the buffers */
    obs_set warm = {0};
    st = run_shape(e, V, 4, 128, 8, &seed, 0, &warm);
    free(warm.v);
    static const uint32_t plen[] = {16, 64, 256, 768};
    static const uint32_t bsz[] = {1, 4, 8, 16}, clen[] = {32, 256, 768};
    for (long rep = 0; rep < repeat && !st; rep++) {
        for (size_t i = 0; i < sizeof plen / sizeof *plen && !st; i++)
            if (plen[i] + 1 <= ctx) st = run_shape(e, V, 1, plen[i], 1, &seed, 0, &os);
        if (!st && 200 + 1 <= ctx) st = run_shape(e, V, 4, 200, 1, &seed, 1, &os);
        for (size_t b = 0; b < sizeof bsz / sizeof *bsz && !st; b++)
            for (size_t k = 0; k < sizeof clen / sizeof *clen && !st; k++)
                if (clen[k] + 16 <= ctx) st = run_shape(e, V, bsz[b], clen[k], 16, &seed, 2, &os);
    }
    if (st) {
        fprintf(stderr, "fairkv bench --calibrate: %s (%s)\n", fkv_engine_last_error(e), fkv_strerror(st));
        fkv_engine_destroy(e);
        fkv_llama_free(m);
        free(os.v);
        return 1;
    }
    /* weighted least squares: normal equations of [1, tokens, attn] */
    double A[3][3] = {{0}}, B[3] = {0}, x[3] = {0};
    for (size_t i = 0; i < os.n; i++) {
        double f[3] = {1, os.v[i].tokens, os.v[i].attn};
        double w = 1.0 / (os.v[i].ms > 1e-3 ? os.v[i].ms : 1e-3);
        for (int r = 0; r < 3; r++) {
            for (int k = 0; k < 3; k++) A[r][k] += w * f[r] * f[k];
            B[r] += w * f[r] * os.v[i].ms;
        }
    }
    int bad = os.n < 3 || solve3(A, B, x);
    double mean = 0, ss_tot = 0, ss_res = 0, sum_ms = 0, sum_fit = 0, rel = 0;
    for (size_t i = 0; i < os.n; i++) mean += os.v[i].ms / (double)os.n;
    double s_ms[3] = {0}, s_fit[3] = {0};
    size_t s_n[3] = {0};
    for (size_t i = 0; i < os.n; i++) {
        double fit = x[0] + x[1] * os.v[i].tokens + x[2] * os.v[i].attn;
        ss_res += (os.v[i].ms - fit) * (os.v[i].ms - fit);
        ss_tot += (os.v[i].ms - mean) * (os.v[i].ms - mean);
        sum_ms += os.v[i].ms;
        rel += fabs(fit - os.v[i].ms) / os.v[i].ms / (double)os.n;
        sum_fit += fit;
        s_ms[os.v[i].scenario] += os.v[i].ms;
        s_fit[os.v[i].scenario] += fit;
        s_n[os.v[i].scenario]++;
    }
    double per = 4.0 * m->hp.n_layers * m->hp.n_heads * m->hp.head_dim;
    char text[2048];
    int k = snprintf(text, sizeof text,
                     "calibration of %s: %zu steps, %ld thread(s), max_batch_tokens %ld\n"
                     "  overhead_ms   c0 = %.6g   (per step)\n"
                     "  per_token_ms  c1 = %.6g   (per new or recomputed token)\n"
                     "  per_attn_ms   c2 = %.6g   (per unit of attention work)\n"
                     "  R^2 %.4f; mean |error| per step %.1f%%; total measured %.1f ms, fitted %.1f ms\n",
                     path, os.n, threads, mbt, x[0], x[1], x[2], ss_tot > 0 ? 1 - ss_res / ss_tot : 0, 100 * rel, sum_ms, sum_fit);
    for (int s = 0; s < 3 && k > 0 && (size_t)k < sizeof text; s++)
        k += snprintf(text + k, sizeof text - (size_t)k, "  %-10s %5zu steps: measured mean %.3f ms, fitted %.3f ms\n",
                      scen_name[s], s_n[s], s_n[s] ? s_ms[s] / (double)s_n[s] : 0, s_n[s] ? s_fit[s] / (double)s_n[s] : 0);
    if (k > 0 && (size_t)k < sizeof text)
        snprintf(text + k, sizeof text - (size_t)k,
                 "profile fields: overhead_ms = %.6g; linear table {1: %.6g ms, 4096: %.6g ms};\n"
                 "  peak_flops = 4 L H D / c2 = %.0f / %.6g ms = %.6g FLOP/s, attn_efficiency 1, hbm 0\n",
                 x[0], x[1], 4096 * x[1], per, x[2], x[2] > 0 ? per * 1e3 / x[2] : 0);
    fputs(text, stdout);
    if (bad || x[1] <= 0 || x[2] <= 0) fprintf(stderr, "fairkv bench --calibrate: the fit is degenerate or negative\n");
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) perror(out_path);
        else {
            fputs(text, f);
            fprintf(f, "# steps: ms tokens attn scenario\n");
            for (size_t i = 0; i < os.n; i++)
                fprintf(f, "%.4f %.0f %.0f %d\n", os.v[i].ms, os.v[i].tokens, os.v[i].attn, os.v[i].scenario);
            fclose(f);
        }
    }
    fkv_engine_destroy(e);
    fkv_llama_free(m);
    free(os.v);
    return bad ? 1 : 0;
}
