/* Step logs (src/engine/steplog.h) and the step-cost fit: the writer and
 * the reader agree record for record; malformed lines fail naming file,
 * line and field; the fit recovers known coefficients from synthetic logs,
 * without the downward bias of weighting by the measured time; `fairkv
 * bench --calibrate-log` picks the form by held-out error and writes
 * coefficients that `--step-coeffs` accepts. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "calib/calibrate.h"
#include "engine/steplog.h"
#include "sim/bench.h"

static char dir[64];

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double unif(void) /* [0, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A step of the serving mix: mostly decode batches, some prefill chunks. */
static fkv_step_rec random_step(int64_t t)
{
    fkv_step_rec r = {t, 0, 0, 0, 1, {0, 0, 0}};
    uint32_t n = 1 + (uint32_t)(unif() * 16);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ctx = (uint32_t)(unif() * 900);
        uint32_t nn = unif() < 0.15 ? 1 + (uint32_t)(unif() * 64) : 1;
        r.tokens += nn;
        r.attn += (double)nn * (ctx + (nn + 1) / 2.0);
    }
    r.requests = n;
    return r;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

static void test_round_trip(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rt.log", dir);
    enum { N = 500 };
    fkv_step_rec w[N];
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(FKV_STEPLOG_HEADER, f);
    for (int i = 0; i < N; i++) {
        w[i] = random_step((int64_t)i * 1000003);
        /* the extremes of each field */
        if (i == 1) w[i].tokens = 0, w[i].attn = 0.5, w[i].wall_ns = 1;
        if (i == 2) w[i].tokens = UINT32_MAX, w[i].requests = UINT32_MAX, w[i].attn = 1e15 + 0.5;
        w[i].wall_ns = i == 1 ? 1 : 1 + (int64_t)(unif() * 1e9);
        CHECK(fkv_steplog_write(f, &w[i]) == 0);
        if (i == 100) fputs("# a comment line\n\n", f);
    }
    fclose(f);
    fkv_step_rec *r = NULL;
    size_t n = 0;
    char err[256] = "";
    REQUIRE(fkv_steplog_read(path, &r, &n, err, sizeof err) == FKV_OK);
    CHECKF(n == N, "read %zu records", n);
    int same = 0;
    for (size_t i = 0; i < n && i < N; i++)
        same += r[i].t_ns == w[i].t_ns && r[i].tokens == w[i].tokens && r[i].requests == w[i].requests &&
                r[i].attn == w[i].attn && r[i].wall_ns == w[i].wall_ns;
    CHECKF(same == N, "%d of %d records equal", same, N);
    free(r);
    /* CRLF line ends and a last line without one */
    const char *crlf = "0 3 2 10.5 400\r\n7 1 1 0 9";
    REQUIRE(fkv_steplog_parse(crlf, strlen(crlf), "crlf", &r, &n, err, sizeof err) == FKV_OK);
    CHECK(n == 2 && r[0].tokens == 3 && r[0].requests == 2 && r[0].attn == 10.5 && r[1].wall_ns == 9);
    free(r);
    unlink(path);
}

static void test_bad_lines(void)
{
    static const struct {
        const char *line, *want;
    } bad[] = {
        {"1 2 3 4", "4 fields"},
        {"1 2 3 4 5 6", "6 fields"},
        {"1 -2 1 4 5", "field tokens: '-2'"},
        {"1 2 0 4 5", "field requests: '0'"},
        {"1 2 1 4.25 5", "field attn_work: '4.25'"},
        {"1 2 1 nan 5", "field attn_work: 'nan'"},
        {"1 2 1 -4 5", "field attn_work: '-4'"},
        {"1 2 1 4 0", "field wall_ns: '0'"},
        {"x 2 1 4 5", "field t_ns: 'x'"},
        {"1 4294967296 1 4 5", "field tokens"},
        {"1 2 1 4 5ms", "field wall_ns: '5ms'"},
        {"1 2 +1 4 5", "field requests: '+1'"},
    };
    char path[128];
    snprintf(path, sizeof path, "%s/bad.log", dir);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[256];
        /* the bad line is line 4: header, a good line, a comment */
        snprintf(text, sizeof text, "%s0 1 1 1 100\n# note\n%s\n5 1 1 1 100\n", FKV_STEPLOG_HEADER, bad[k].line);
        write_file(path, text);
        fkv_step_rec *r = (fkv_step_rec *)1;
        size_t n = 7;
        char err[256] = "", want[200];
        fkv_status st = fkv_steplog_read(path, &r, &n, err, sizeof err);
        snprintf(want, sizeof want, "%s:4: ", path);
        CHECKF(st == FKV_EPARSE && strstr(err, want) && strstr(err, bad[k].want) && !r && !n, "'%s': %s",
               bad[k].line, err);
    }
    char err[256] = "";
    fkv_step_rec *r;
    size_t n;
    write_file(path, FKV_STEPLOG_HEADER "# nothing else\n");
    CHECKF(fkv_steplog_read(path, &r, &n, err, sizeof err) == FKV_EPARSE && strstr(err, "no step records"), "%s", err);
    char longline[400];
    memset(longline, '1', sizeof longline - 1);
    longline[sizeof longline - 1] = 0;
    CHECK(fkv_steplog_parse(longline, strlen(longline), "long", &r, &n, err, sizeof err) == FKV_EPARSE &&
          strstr(err, "long:1: line longer"));
    CHECK(fkv_steplog_parse("1 1 1 1 1\0", 10, "nul", &r, &n, err, sizeof err) == FKV_EPARSE &&
          strstr(err, "nul:1: NUL"));
    unlink(path);
    snprintf(path, sizeof path, "%s/absent.log", dir);
    CHECK(fkv_steplog_read(path, &r, &n, err, sizeof err) == FKV_EIO && strstr(err, path));
}

/* n synthetic steps priced by c (c[3] = 0 for 3 terms) times (1 + noise),
 * noise uniform in [-amp, amp] (mean 0: the mean step time is the price). */
static fkv_step_rec *synth(size_t n, const double c[4], double amp)
{
    fkv_step_rec *r = malloc(n * sizeof *r);
    REQUIRE(r);
    for (size_t i = 0; i < n; i++) {
        r[i] = random_step((int64_t)i * 1000000);
        double ms = c[0] + c[1] * r[i].tokens + c[2] * r[i].attn + c[3] * r[i].requests;
        ms *= 1 + amp * (2 * unif() - 1);
        r[i].wall_ns = (int64_t)llround(ms * 1e6);
    }
    return r;
}

static void test_fit(void)
{
    const double c4[4] = {0.4, 0.3, 6e-5, 0.12}, c3[4] = {0.4, 0.3, 6e-5, 0};
    fkv_step_fit f;
    /* without noise: exact up to the nanosecond rounding of wall_ns */
    fkv_step_rec *r = synth(2000, c4, 0);
    REQUIRE(fkv_step_fit_solve(r, 2000, 4, &f) == FKV_OK);
    for (int k = 0; k < 4; k++) CHECKF(fabs(f.c[k] - c4[k]) <= 1e-4 * c4[k], "c%d %.9g, want %g", k, f.c[k], c4[k]);
    free(r);
    r = synth(2000, c3, 0);
    REQUIRE(fkv_step_fit_solve(r, 2000, 3, &f) == FKV_OK && f.n_terms == 3 && f.c[3] == 0);
    for (int k = 0; k < 3; k++) CHECKF(fabs(f.c[k] - c3[k]) <= 1e-4 * c3[k], "c%d %.9g, want %g", k, f.c[k], c3[k]);
    free(r);
    /* 30% noise: the fitted total matches the measured one to 1%.  Weighted
     * by 1 / measured time alone, it comes out ~3% low (the harmonic mean
     * of 1 + U(-0.3, 0.3) is 0.97). */
    size_t n = (size_t)(20000 * check_scale());
    r = synth(n, c4, 0.3);
    REQUIRE(fkv_step_fit_solve(r, n, 4, &f) == FKV_OK);
    fkv_step_err e;
    fkv_step_fit_eval(&f, r, n, &e);
    CHECKF(fabs(e.total_rel) < 0.01, "fitted total %+.2f%% off", 100 * e.total_rel);
    for (int k = 0; k < 4; k++)
        CHECKF(fabs(f.c[k] - c4[k]) <= 0.1 * c4[k], "noisy c%d %.6g, want %g", k, f.c[k], c4[k]);
    CHECK(e.n == n && e.mean_abs_rel > 0.1 && e.mean_abs_rel < 0.2 && e.r2 > 0.9);
    size_t nb = 0;
    for (int b = 0; b < 5; b++) nb += e.bin_n[b];
    CHECK(nb == n && e.bin_n[0] > 0 && e.bin_n[4] > 0);
    /* the fit prices what fkv_step_fit_ms says */
    CHECK(fabs(fkv_step_fit_ms(&f, &r[0]) -
               (f.c[0] + f.c[1] * r[0].tokens + f.c[2] * r[0].attn + f.c[3] * r[0].requests)) < 1e-12);
    CHECK(!f.dropped_attn);
    /* a log whose attention work lowers the time (what a negative c2 fit
     * means): the term is dropped, c2 = 0, the rest still fitted */
    free(r);
    const double neg[4] = {0.3, 0.3, -2e-5, 0.1};
    r = synth(4000, neg, 0.05);
    REQUIRE(fkv_step_fit_solve(r, 4000, 4, &f) == FKV_OK);
    CHECKF(f.dropped_attn && f.c[2] == 0 && f.c[1] > 0.2 && f.c[3] > 0, "c %g %g %g %g, dropped %d", f.c[0], f.c[1],
           f.c[2], f.c[3], f.dropped_attn);
    /* degenerate: every step the same shape; too few steps; bad form */
    for (size_t i = 0; i < 50; i++) r[i] = r[0];
    CHECK(fkv_step_fit_solve(r, 50, 3, &f) == FKV_ESTATE);
    CHECK(fkv_step_fit_solve(r, 3, 4, &f) == FKV_EINVAL);
    CHECK(fkv_step_fit_solve(r, 100, 5, &f) == FKV_EINVAL && fkv_step_fit_solve(r, 100, 2, &f) == FKV_EINVAL);
    free(r);
}

/* `fairkv bench --calibrate-log`: held-out error picks the form; the
 * written coefficients are what --step-coeffs accepts. */
static int calibrate(const char *logs, const char *terms, const char *coeffs)
{
    char *argv[] = {"bench", "--calibrate-log", (char *)logs, "--terms", (char *)terms, "--coeffs-out", (char *)coeffs,
                    NULL};
    return fkv__bench_calibrate(7, argv);
}

static void test_calibrate_log(void)
{
    char a[128], b[128], both[300], co[128];
    snprintf(a, sizeof a, "%s/a.log", dir);
    snprintf(b, sizeof b, "%s/b.log", dir);
    snprintf(both, sizeof both, "%s,%s", a, b);
    snprintf(co, sizeof co, "%s/coeffs.txt", dir);
    const double c4[4] = {0.25, 0.32, 7e-5, 0.3};
    fkv_step_rec *r = synth(3000, c4, 0.1);
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(k ? b : a, "w");
        REQUIRE(f);
        fputs(FKV_STEPLOG_HEADER, f);
        for (size_t i = k * 1500; i < (size_t)(k + 1) * 1500; i++) fkv_steplog_write(f, &r[i]);
        fclose(f);
    }
    free(r);
    /* a per-request cost this large: the 4-term form wins on held-out steps */
    CHECK(calibrate(both, "auto", co) == 0);
    char *t = check_slurp(co);
    REQUIRE(t);
    double c[7];
    size_t n = 0;
    char why[200];
    CHECKF(fkv_bench_parse_coeffs(t, c, &n, why, sizeof why) == 0 && n == 4, "'%s': %s", t, why);
    for (size_t k = 0; k < n; k++) CHECKF(fabs(c[k] - c4[k]) < 0.1 * c4[k], "c%zu %g, want %g", k, c[k], c4[k]);
    free(t);
    CHECK(calibrate(a, "3", co) == 0);
    t = check_slurp(co);
    REQUIRE(t);
    CHECKF(fkv_bench_parse_coeffs(t, c, &n, why, sizeof why) == 0 && n == 3, "'%s'", t);
    free(t);
    /* a bad log: a non-zero exit (the reader's message is tested above) */
    write_file(b, "1 2 3\n");
    CHECK(calibrate(both, "auto", co) != 0);
    CHECK(calibrate(a, "5", co) == 2);
    unlink(a);
    unlink(b);
    unlink(co);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/fkv-steplog-XXXXXX");
    REQUIRE(mkdtemp(dir));
    test_round_trip();
    test_bad_lines();
    test_fit();
    test_calibrate_log();
    rmdir(dir);
    return check_done();
}
