/* Step logs: one line per engine step with work, the step's shape as the
 * simulator's cost model prices it and its wall time, so that the cost
 * profile can be fitted on steps taken while serving (`fairkv serve
 * --step-log FILE`, then `fairkv bench --calibrate-log FILE`), not only on
 * the engine run alone (`fairkv bench --calibrate MODEL.gguf`).
 *
 * Text format (whitespace-separated; '#' starts a comment line):
 *
 *   # fairkv step log v1: t_ns tokens requests attn_work wall_ns
 *   1532211 64 1 2080 21987654
 *
 *   t_ns       step start, ns since the log was opened (monotonic clock)
 *   tokens     new + recomputed tokens of the step (fkv_batch.tokens), >= 0
 *   requests   batch items of the step (fkv_batch.n), >= 1
 *   attn_work  sum over items of n_new x (ctx + (n_new + 1) / 2)
 *              + n_restored x ctx / 2 (fkv_engine_stats.attn_work), >= 0
 *   wall_ns    wall time inside fkv_engine_step, >= 1
 *
 * and, on lines of 8 fields (v2; a line of 5 reads them as 0):
 *
 *   kv_base kv_int8 kv_int4   bytes of K/V the step's attention read, by
 *              the precision they are stored in (the engine's fp32/fp16,
 *              int8, int4; codes and scales, all layers): per item, its
 *              resident chunks, as the simulator's --price-kv-bytes counts
 *              them; whole numbers >= 0.  The writer adds them to a record
 *              that has any.
 *
 * The step fit (stepfit.c):
 *
 *   step ms = c0 + c1 x tokens + c2 x attn_work [+ c3 x requests]
 *             [+ c4 x kv_base + c5 x kv_int8 + c6 x kv_int4]
 *
 * (7 terms: the attention time per byte read at each precision, what the
 * simulator's --price-kv-bytes prices by bytes alone).
 *
 * by least squares weighted 1 / expected ms (calibrate.c, stepfit.c say
 * why and how). */
#ifndef FKV_ENGINE_STEPLOG_H
#define FKV_ENGINE_STEPLOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fairkv.h"

#define FKV_STEPLOG_HEADER "# fairkv step log v2: t_ns tokens requests attn_work wall_ns [kv_base kv_int8 kv_int4]\n"

/* K/V bytes read by stored precision (fkv_step_rec.kv_read) */
enum { FKV_STEP_KV_BASE = 0, FKV_STEP_KV_INT8 = 1, FKV_STEP_KV_INT4 = 2, FKV_STEP_KV_PRECS = 3 };

typedef struct fkv_step_rec {
    int64_t t_ns;      /* start, ns since the log began */
    uint32_t tokens;   /* new + recomputed tokens */
    uint32_t requests; /* batch items */
    double attn;       /* attention work (a multiple of 0.5) */
    int64_t wall_ns;   /* duration */
    double kv_read[FKV_STEP_KV_PRECS]; /* K/V bytes read by attention, by stored precision (0: not logged) */
} fkv_step_rec;

/* Creates (truncates) path and writes the header line; FKV_EIO with err
 * naming the file and why when it cannot be opened. */
fkv_status fkv_steplog_open(const char *path, FILE **out, char *err, size_t errlen);
/* Writes one record line; returns 0, or -1 on a write error. */
int fkv_steplog_write(FILE *f, const fkv_step_rec *r);

/* Parses a whole log (buf[len], not NUL-terminated).  *out (free()) gets
 * *n records in file order.  A malformed line is FKV_EPARSE with err
 * "NAME:LINE: field F: 'text'" (or what else is wrong); no records at all
 * is FKV_EPARSE too. */
fkv_status fkv_steplog_parse(const char *buf, size_t len, const char *name, fkv_step_rec **out, size_t *n,
                             char *err, size_t errlen);
/* Reads and parses the file at path (FKV_EIO naming it if unreadable). */
fkv_status fkv_steplog_read(const char *path, fkv_step_rec **out, size_t *n, char *err, size_t errlen);

/* ------------------------------------------------------------------ fit */

#define FKV_STEP_TERMS_MAX 7

typedef struct fkv_step_fit {
    int n_terms;                  /* 3: c0..c2; 4: with c3 x requests; 7: and c4..c6 x kv_read[0..2] */
    double c[FKV_STEP_TERMS_MAX]; /* ms; the terms not in the form are 0 */
    int dropped_attn;             /* 1: c2 came out negative; refitted without it (c2 = 0) */
    int unread[FKV_STEP_KV_PRECS]; /* 7 terms: 1 where no step read that precision (its c is 0, not fitted) */
    int dropped_kv[FKV_STEP_KV_PRECS]; /* 7 terms: 1 where its price came out negative (refitted as 0) */
} fkv_step_fit;

/* The fit's price of a step, ms. */
double fkv_step_fit_ms(const fkv_step_fit *f, const fkv_step_rec *r);

/* Weighted least squares (weight 1 / expected ms, stepfit.c) over r[0..n) with 3, 4 or 7
 * terms; a negative c2 is refitted as 0 (dropped_attn); with 7, a precision
 * no step read is left out (unread) and a negative byte price refitted as 0
 * (dropped_kv).  FKV_EINVAL when n_terms is not 3, 4 or 7 or there are fewer steps
 * than terms; FKV_ESTATE when the features are degenerate (e.g. every step
 * has the same shape). */
fkv_status fkv_step_fit_solve(const fkv_step_rec *r, size_t n, int n_terms, fkv_step_fit *out);

/* How well a fit prices steps r[0..n). */
typedef struct fkv_step_err {
    size_t n;
    double mean_abs_rel;   /* mean over steps of |fit - measured| / measured */
    double total_rel;      /* (sum fit - sum measured) / sum measured */
    double r2;             /* 1 - SS_res / SS_tot (unweighted) */
    double sum_ms, sum_fit_ms;
    /* by step size (tokens 1, 2-4, 5-16, 17-64, > 64): steps and
     * (sum fit - sum measured) / sum measured */
    size_t bin_n[5];
    double bin_rel[5];
} fkv_step_err;

void fkv_step_fit_eval(const fkv_step_fit *f, const fkv_step_rec *r, size_t n, fkv_step_err *out);
/* Upper token bound of size bin i (the last is unbounded: UINT32_MAX). */
uint32_t fkv_step_bin_hi(int i);

#endif
