/* The step-cost fit (steplog.h): weighted least squares of the measured
 * step time on [1, tokens, attention work, requests] and, in the 7-term
 * form, the K/V bytes attention read at each stored precision. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/steplog.h"

static void features(const fkv_step_rec *r, double f[FKV_STEP_TERMS_MAX])
{
    f[0] = 1;
    f[1] = r->tokens;
    f[2] = r->attn;
    f[3] = r->requests;
    for (int k = 0; k < FKV_STEP_KV_PRECS; k++) f[4 + k] = r->kv_read[k];
}

double fkv_step_fit_ms(const fkv_step_fit *f, const fkv_step_rec *r)
{
    double x[FKV_STEP_TERMS_MAX];
    features(r, x);
    double ms = 0;
    for (int k = 0; k < f->n_terms; k++) ms += f->c[k] * x[k];
    return ms;
}

/* Solves a x = b in place (k x k, Gaussian elimination with partial
 * pivoting); -1 when a pivot vanishes relative to the matrix's scale. */
static int solve(double a[FKV_STEP_TERMS_MAX][FKV_STEP_TERMS_MAX], double b[FKV_STEP_TERMS_MAX], int k,
                 double x[FKV_STEP_TERMS_MAX])
{
    double scale = 0;
    for (int r = 0; r < k; r++)
        for (int c = 0; c < k; c++) scale = fmax(scale, fabs(a[r][c]));
    if (!(scale > 0)) return -1;
    for (int c = 0; c < k; c++) {
        int p = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
        if (!(fabs(a[p][c]) > 1e-12 * scale)) return -1;
        for (int j = 0; j < k; j++) {
            double t = a[c][j];
            a[c][j] = a[p][j];
            a[p][j] = t;
        }
        double t = b[c];
        b[c] = b[p];
        b[p] = t;
        for (int r = c + 1; r < k; r++) {
            double f = a[r][c] / a[c][c];
            for (int j = c; j < k; j++) a[r][j] -= f * a[c][j];
            b[r] -= f * b[c];
        }
    }
    for (int r = k - 1; r >= 0; r--) {
        double s = b[r];
        for (int j = r + 1; j < k; j++) s -= a[r][j] * x[j];
        x[r] = s / a[r][r];
    }
    return 0;
}

/* The fit of the terms in use[] (the others are 0). */
static fkv_status fit_terms(const fkv_step_rec *r, size_t n, int n_terms, const int use[FKV_STEP_TERMS_MAX],
                           fkv_step_fit *out);

fkv_status fkv_step_fit_solve(const fkv_step_rec *r, size_t n, int n_terms, fkv_step_fit *out)
{
    memset(out, 0, sizeof *out);
    if ((n_terms != 3 && n_terms != 4 && n_terms != 7) || n < (size_t)n_terms) return FKV_EINVAL;
    int use[FKV_STEP_TERMS_MAX] = {1, 1, 1, n_terms > 3};
    /* 7 terms: a precision no step read has nothing to fit (its price stays 0) */
    int unread[FKV_STEP_KV_PRECS] = {0};
    for (int k = 0; k < FKV_STEP_KV_PRECS && n_terms == 7; k++) {
        int any = 0;
        for (size_t i = 0; i < n && !any; i++) any = r[i].kv_read[k] > 0;
        use[4 + k] = any;
        unread[k] = !any;
    }
    fkv_status st = fit_terms(r, n, n_terms, use, out);
    /* Attention work is a small part of these steps and grows with the
     * tokens, so on a log of short contexts its coefficient can come out
     * negative, which no step can cost; the fit then drops the term
     * (c2 = 0) rather than price attention at a negative rate. */
    if (st == FKV_OK && out->c[2] < 0) {
        use[2] = 0;
        st = fit_terms(r, n, n_terms, use, out);
        out->dropped_attn = 1;
    }
    /* the same for a byte price: a negative one is refitted as 0 */
    int dropped[FKV_STEP_KV_PRECS] = {0}, again = 0;
    for (int k = 0; k < FKV_STEP_KV_PRECS && st == FKV_OK && n_terms == 7; k++)
        if (out->c[4 + k] < 0) use[4 + k] = 0, dropped[k] = again = 1;
    if (again) {
        int da = out->dropped_attn;
        st = fit_terms(r, n, n_terms, use, out);
        out->dropped_attn = da;
    }
    memcpy(out->unread, unread, sizeof unread);
    memcpy(out->dropped_kv, dropped, sizeof dropped);
    return st;
}

static fkv_status fit_terms(const fkv_step_rec *r, size_t n, int n_terms, const int use[FKV_STEP_TERMS_MAX],
                           fkv_step_fit *out)
{
    memset(out, 0, sizeof *out);
    /* each feature scaled by its largest value, so that the normal
     * equations of 1, tokens (~1e2) and attention work (~1e5) are of
     * similar size; the coefficients are scaled back at the end */
    double s[FKV_STEP_TERMS_MAX] = {0}, f[FKV_STEP_TERMS_MAX];
    int idx[FKV_STEP_TERMS_MAX], k_used = 0; /* the solved terms, in order */
    for (int k = 0; k < n_terms; k++)
        if (use[k]) idx[k_used++] = k;
    if ((size_t)k_used > n) return FKV_EINVAL;
    for (size_t i = 0; i < n; i++) {
        features(&r[i], f);
        for (int k = 0; k < n_terms; k++) s[k] = fmax(s[k], fabs(f[k]));
    }
    for (int j = 0; j < k_used; j++)
        if (!(s[idx[j]] > 0)) return FKV_ESTATE; /* a feature that is 0 in every step cannot be fitted */
    double min_ms = HUGE_VAL;
    for (size_t i = 0; i < n; i++) min_ms = fmin(min_ms, (double)r[i].wall_ns / 1e6);
    /* Weights: the noise of a step grows with its length, so each step is
     * weighted by 1 / its expected time.  The first pass uses the measured
     * time; that alone biases the fit low (a step slowed by noise gets less
     * weight than one sped up: on served step logs the fitted total came
     * out 3% under the measured one), so the passes after it weight by
     * 1 / the previous fit (iteratively reweighted least squares), floored
     * at the shortest measured step. */
    fkv_step_fit cur = {n_terms, {0}, 0, {0}, {0}};
    for (int pass = 0; pass < 5; pass++) {
        double A[FKV_STEP_TERMS_MAX][FKV_STEP_TERMS_MAX] = {{0}}, B[FKV_STEP_TERMS_MAX] = {0},
               x[FKV_STEP_TERMS_MAX] = {0};
        for (size_t i = 0; i < n; i++) {
            features(&r[i], f);
            double ms = (double)r[i].wall_ns / 1e6;
            double w = 1.0 / fmax(pass ? fkv_step_fit_ms(&cur, &r[i]) : ms, min_ms);
            for (int a = 0; a < k_used; a++) {
                double fa = f[idx[a]] / s[idx[a]];
                for (int b = 0; b < k_used; b++) A[a][b] += w * fa * (f[idx[b]] / s[idx[b]]);
                B[a] += w * fa * ms;
            }
        }
        if (solve(A, B, k_used, x)) return FKV_ESTATE;
        for (int j = 0; j < k_used; j++) {
            cur.c[idx[j]] = x[j] / s[idx[j]];
            if (!isfinite(cur.c[idx[j]])) return FKV_ESTATE;
        }
    }
    *out = cur;
    return FKV_OK;
}

static const uint32_t bin_hi[5] = {1, 4, 16, 64, UINT32_MAX};

uint32_t fkv_step_bin_hi(int i)
{
    return i >= 0 && i < 5 ? bin_hi[i] : UINT32_MAX;
}

void fkv_step_fit_eval(const fkv_step_fit *f, const fkv_step_rec *r, size_t n, fkv_step_err *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (!n) return;
    double mean = 0, ss_res = 0, ss_tot = 0, bin_ms[5] = {0}, bin_fit[5] = {0};
    for (size_t i = 0; i < n; i++) mean += (double)r[i].wall_ns / 1e6 / (double)n;
    for (size_t i = 0; i < n; i++) {
        double ms = (double)r[i].wall_ns / 1e6, fit = fkv_step_fit_ms(f, &r[i]);
        out->mean_abs_rel += fabs(fit - ms) / ms / (double)n;
        ss_res += (fit - ms) * (fit - ms);
        ss_tot += (ms - mean) * (ms - mean);
        out->sum_ms += ms;
        out->sum_fit_ms += fit;
        int b = 0;
        while (r[i].tokens > bin_hi[b]) b++;
        out->bin_n[b]++;
        bin_ms[b] += ms;
        bin_fit[b] += fit;
    }
    out->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
    out->total_rel = (out->sum_fit_ms - out->sum_ms) / out->sum_ms;
    for (int b = 0; b < 5; b++) out->bin_rel[b] = bin_ms[b] > 0 ? (bin_fit[b] - bin_ms[b]) / bin_ms[b] : 0;
}
