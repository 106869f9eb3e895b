/* The step fit's 7-term form (src/engine/steplog.h): attention time per
 * byte of K/V read at each stored precision, learned from step logs.
 * Synthetic logs whose coefficients are known: recovered exactly without
 * noise, within a few percent with noise, a precision no step read left
 * out; and the step log's 8-field lines written and read back. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "engine/steplog.h"
#include "calib/calibrate.h"
#include "gguf/gguf.h"
#include "model/model_init.h"
#include "sim/bench.h"

static uint64_t rng = 88172645463325252ull;
static double uni(void) /* [0, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* c0..c6: ms per step, token, unit of attention work, request, byte read
 * at base (fp32/fp16), int8, int4 */
static const double C[7] = {0.4, 0.02, 2e-6, 0.15, 2e-7, 3.5e-7, 6e-7};

/* n steps of random shape priced by C (times 1 + noise x u, u in [-1, 1]);
 * int4 bytes only when with_int4 */
static void make_log(fkv_step_rec *r, size_t n, double noise, int with_int4)
{
    for (size_t i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].t_ns = (int64_t)i * 1000000;
        r[i].tokens = 1 + (uint32_t)(uni() * 256);
        r[i].requests = 1 + (uint32_t)(uni() * 8);
        r[i].attn = floor(uni() * 2e5) / 2;
        r[i].kv_read[FKV_STEP_KV_BASE] = floor(uni() * 4e6);
        r[i].kv_read[FKV_STEP_KV_INT8] = uni() < 0.3 ? 0 : floor(uni() * 3e6);
        r[i].kv_read[FKV_STEP_KV_INT4] = with_int4 && uni() < 0.7 ? floor(uni() * 2e6) : 0;
        double x[7] = {1, r[i].tokens, r[i].attn, r[i].requests, r[i].kv_read[0], r[i].kv_read[1], r[i].kv_read[2]};
        double ms = 0;
        for (int k = 0; k < 7; k++) ms += C[k] * x[k];
        ms *= 1 + noise * (2 * uni() - 1);
        r[i].wall_ns = llround(ms * 1e6);
    }
}

static void exact(void)
{
    enum { N = 400 };
    static fkv_step_rec r[N];
    make_log(r, N, 0, 1);
    fkv_step_fit f;
    REQUIRE(fkv_step_fit_solve(r, N, 7, &f) == FKV_OK);
    CHECK(f.n_terms == 7 && !f.dropped_attn && !f.unread[0] && !f.unread[1] && !f.unread[2]);
    for (int k = 0; k < 7; k++)
        CHECKF(fabs(f.c[k] - C[k]) <= 1e-4 * C[k], "c%d = %.9g, want %.9g", k, f.c[k], C[k]);
    /* the fit prices a step as its terms say */
    CHECK(fabs(fkv_step_fit_ms(&f, &r[7]) - (double)r[7].wall_ns / 1e6) < 1e-3);
    /* the 4-term form knows nothing of bytes: it cannot price them */
    fkv_step_fit f4;
    REQUIRE(fkv_step_fit_solve(r, N, 4, &f4) == FKV_OK);
    CHECK(f4.c[4] == 0 && f4.c[5] == 0 && f4.c[6] == 0);
    fkv_step_err e4, e7;
    fkv_step_fit_eval(&f4, r, N, &e4);
    fkv_step_fit_eval(&f, r, N, &e7);
    CHECKF(e7.mean_abs_rel < 1e-4 && e4.mean_abs_rel > 0.05, "7 terms %.2g, 4 terms %.2g", e7.mean_abs_rel,
           e4.mean_abs_rel);
    /* forms the fit does not have */
    CHECK(fkv_step_fit_solve(r, N, 5, &f) == FKV_EINVAL);
    CHECK(fkv_step_fit_solve(r, 6, 7, &f) == FKV_EINVAL);
}

static void noisy(void)
{
    enum { N = 2000 };
    static fkv_step_rec r[N];
    make_log(r, N, 0.03, 1);
    fkv_step_fit f;
    REQUIRE(fkv_step_fit_solve(r, N, 7, &f) == FKV_OK);
    for (int k = 4; k < 7; k++)
        CHECKF(fabs(f.c[k] - C[k]) <= 0.05 * C[k], "c%d = %.6g, want %.6g (3%% noise)", k, f.c[k], C[k]);
    /* the prices keep their order: a byte of int4 costs more than one of int8, than one of fp16 */
    CHECK(f.c[6] > f.c[5] && f.c[5] > f.c[4]);
}

static void unread(void)
{
    enum { N = 300 };
    static fkv_step_rec r[N];
    make_log(r, N, 0, 0);
    fkv_step_fit f;
    REQUIRE(fkv_step_fit_solve(r, N, 7, &f) == FKV_OK);
    CHECK(!f.unread[0] && !f.unread[1] && f.unread[2] && f.c[6] == 0);
    for (int k = 0; k < 6; k++) CHECKF(fabs(f.c[k] - C[k]) <= 1e-4 * C[k], "c%d = %.9g", k, f.c[k]);
    /* int8 bytes that shorten a step (timing noise can fit that): no
     * negative price, refitted without it */
    for (size_t i = 0; i < N; i++) r[i].wall_ns -= llround(5e-7 * r[i].kv_read[FKV_STEP_KV_INT8] * 1e6); /* c5 - 5e-7 < 0 */
    REQUIRE(fkv_step_fit_solve(r, N, 7, &f) == FKV_OK);
    CHECK(f.dropped_kv[1] && !f.dropped_kv[0] && f.c[5] == 0 && f.c[4] > 0);
    /* no bytes at all: only the fixed terms remain */
    for (size_t i = 0; i < N; i++) memset(r[i].kv_read, 0, sizeof r[i].kv_read);
    REQUIRE(fkv_step_fit_solve(r, N, 7, &f) == FKV_OK);
    CHECK(f.unread[0] && f.unread[1] && f.unread[2] && f.c[4] == 0 && f.c[5] == 0 && f.c[6] == 0);
}

static void log_lines(void)
{
    fkv_step_rec w[2] = {{5, 64, 2, 2080.5, 21987654, {1048576, 0, 262144}}, {9, 1, 1, 10, 100, {0, 0, 0}}};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    fputs(FKV_STEPLOG_HEADER, f);
    CHECK(fkv_steplog_write(f, &w[0]) == 0 && fkv_steplog_write(f, &w[1]) == 0);
    fclose(f);
    /* bytes only where a record has them: the second line keeps v1's 5 fields */
    CHECK(strstr(text, "5 64 2 2080.5 21987654 1048576 0 262144\n9 1 1 10.0 100\n") != NULL);
    fkv_step_rec *r;
    size_t n;
    char err[256];
    REQUIRE(fkv_steplog_parse(text, len, "t", &r, &n, err, sizeof err) == FKV_OK && n == 2);
    CHECK(r[0].kv_read[0] == 1048576 && r[0].kv_read[1] == 0 && r[0].kv_read[2] == 262144 && r[0].attn == 2080.5);
    CHECK(r[1].kv_read[0] == 0 && r[1].wall_ns == 100);
    free(r);
    free(text);
    /* refused, with the field named */
    static const struct {
        const char *line, *field;
    } bad[] = {{"0 1 1 1 100 1 2\n", "fields"},
               {"0 1 1 1 100 1 -2 3\n", "kv_int8"},
               {"0 1 1 1 100 1 2 3.5\n", "kv_int4"},
               {"0 1 1 1 100 x 2 3\n", "kv_base"},
               {"0 1 1 1 100 1 2 99999999999999999\n", "kv_int4"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECKF(fkv_steplog_parse(bad[k].line, strlen(bad[k].line), "log", &r, &n, err, sizeof err) == FKV_EPARSE &&
                   strstr(err, bad[k].field) && strstr(err, "log:1"),
               "'%s': %s", bad[k].line, err);
    }
}

/* The fitted prices become the simulator's: fkv_profile_set_coeffs takes
 * the 7 values, and a run prices each precision's bytes at its own rate. */
static double makespan(const double c[7], int quant_dtype)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.profile = "cpu-tiny";
    memcpy(o.step_coeffs, c, 7 * sizeof *c);
    o.n_step_coeffs = 7;
    o.requests = 60;
    o.quiet = 1;
    o.schemes = "lru";
    o.sim.price_kv_bytes = 1;
    o.sim.quant = FKV_QUANT_ALWAYS;
    o.sim.quant_dtype = (fkv_dtype)quant_dtype;
    o.sim.quant_hot = 0;
    char err[512] = "";
    fkv_bench_ctx ctx;
    fkv_status st = fkv_bench_prepare(&ctx, &o, err, sizeof err);
    CHECKF(st == FKV_OK, "prepare: %s", err);
    if (st) return -1;
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&ctx, 0.8, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[1];
    size_t n = 0;
    st = fkv_bench_schemes(&ctx, &w, s, NULL, &n, 1, err, sizeof err);
    CHECKF(st == FKV_OK && n == 1, "run: %s", err);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&ctx);
    return st ? -1 : s[0].makespan_s;
}

static void simulator(void)
{
    double c[7] = {0.4, 0.02, 2e-6, 0.15, 2e-7, 3.5e-7, 6e-7};
    fkv_profile p;
    char err[256];
    REQUIRE(fkv_profile_get("cpu-tiny", NULL, &p, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_profile_set_coeffs(&p, c, 7, err, sizeof err) == FKV_OK);
    CHECK(p.kv_byte_ms[0] == c[4] && p.kv_byte_ms[1] == c[5] && p.kv_byte_ms[2] == c[6]);
    /* 3 and 4 values leave no byte prices */
    REQUIRE(fkv_profile_set_coeffs(&p, c, 4, err, sizeof err) == FKV_OK);
    CHECK(p.kv_byte_ms[0] == 0 && p.kv_byte_ms[1] == 0 && p.kv_byte_ms[2] == 0);
    fkv_profile_free(&p);
    double bad[7] = {0.4, 0.02, 2e-6, 0.15, 2e-7, -1e-7, 6e-7};
    CHECK(fkv_profile_check_coeffs(bad, 7, err, sizeof err) == FKV_EINVAL && strstr(err, "int8"));
    CHECK(fkv_profile_check_coeffs(c, 5, err, sizeof err) == FKV_EINVAL && strstr(err, "3, 4 or 7"));
    /* int4 chunks only (--quant always int4, no hot window): the int4
     * price moves the run, the int8 price does not */
    double base = makespan(c, FKV_INT4);
    double c6[7], c5[7];
    memcpy(c6, c, sizeof c6);
    memcpy(c5, c, sizeof c5);
    c6[6] *= 20;
    c5[5] *= 20;
    double up6 = makespan(c6, FKV_INT4), up5 = makespan(c5, FKV_INT4);
    CHECKF(base > 0 && up6 > base * 1.01 && up5 == base, "makespan %.6f, int4 x20 %.6f, int8 x20 %.6f", base, up6,
           up5);
    /* and int8 chunks: the other way round */
    double b8 = makespan(c, FKV_INT8), up5b = makespan(c5, FKV_INT8), up6b = makespan(c6, FKV_INT8);
    CHECKF(b8 > 0 && up5b > b8 * 1.01 && up6b == b8, "int8 run %.6f, int8 x20 %.6f, int4 x20 %.6f", b8, up5b, up6b);
}

/* `fairkv bench --calibrate-log FILE --terms 7 --coeffs-out F`: the bytes
 * of an 8-field log reach the fit, and the coefficients written are the
 * seven that --step-coeffs takes. */
static void calibrate_cli(void)
{
    char dir[] = "/tmp/fkv_test_stepfit_kv_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char log[128], co[128];
    snprintf(log, sizeof log, "%s/s.log", dir);
    snprintf(co, sizeof co, "%s/c.txt", dir);
    enum { N = 600 };
    static fkv_step_rec r[N];
    make_log(r, N, 0, 1);
    FILE *f = fopen(log, "w");
    REQUIRE(f);
    fputs(FKV_STEPLOG_HEADER, f);
    for (size_t i = 0; i < N; i++) fkv_steplog_write(f, &r[i]);
    fclose(f);
    char *argv[] = {"bench", "--calibrate-log", log, "--terms", "7", "--coeffs-out", co, NULL};
    fflush(stdout);
    CHECK(fkv__bench_calibrate(7, argv) == 0);
    char *t = check_slurp(co);
    REQUIRE(t);
    double c[7];
    size_t n = 0;
    char why[200];
    CHECKF(fkv_bench_parse_coeffs(t, c, &n, why, sizeof why) == 0 && n == 7, "'%s': %s", t, why);
    for (size_t k = 4; k < n; k++) CHECKF(fabs(c[k] - C[k]) < 1e-3 * C[k], "c%zu %g, want %g", k, c[k], C[k]);
    free(t);
    char *bad[] = {"bench", "--calibrate-log", log, "--kv-quant", "int3", NULL};
    CHECK(fkv__bench_calibrate(5, bad) == 2);
    /* the engine itself with int4 cold chunks: its steps read int4 bytes,
     * so the int4 price is fitted and the int8 one is not (a few seconds) */
    if (check_scale() >= 1) {
        char model[160];
        snprintf(model, sizeof model, "%s/tiny.gguf", dir);
        fkv_model_init_cfg mc;
        REQUIRE(!fkv_model_init_preset("tiny", &mc));
        mc.n_layers = 2;
        fkv_gguf_writer *w;
        REQUIRE(!fkv_model_init_build(&mc, &w));
        REQUIRE(!fkv_gguf_w_to_file(w, model, why, sizeof why));
        fkv_gguf_writer_free(w);
        char slog[160];
        snprintf(slog, sizeof slog, "%s/engine.log", dir);
        char *eng[] = {"bench", "--calibrate", model, "--terms", "7", "--repeat", "1", "--kv-quant", "int4",
                       "--step-log", slog, NULL};
        fkv__bench_calibrate(11, eng); /* the fit's sign depends on this machine's timing: not checked */
        fkv_step_rec *lr;
        size_t ln = 0;
        REQUIRE(fkv_steplog_read(slog, &lr, &ln, why, sizeof why) == FKV_OK);
        double by[3] = {0, 0, 0};
        for (size_t i = 0; i < ln; i++)
            for (int k = 0; k < 3; k++) by[k] += lr[i].kv_read[k];
        CHECKF(ln > 100 && by[0] > 0 && by[1] == 0 && by[2] > 0, "engine, int4 cold chunks: %zu steps, bytes %g %g %g",
               ln, by[0], by[1], by[2]);
        free(lr);
        unlink(slog);
        unlink(model);
    }
    unlink(log);
    unlink(co);
    rmdir(dir);
}

int main(void)
{
    exact();
    noisy();
    unread();
    log_lines();
    simulator();
    calibrate_cli();
    return check_done();
}
