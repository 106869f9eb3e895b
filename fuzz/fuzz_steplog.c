/* libFuzzer target for the step-log reader (src/engine/steplog.h) and the
 * step fit: any input must parse or fail with FKV_EPARSE (never crash, leak
 * or read out of bounds); parsed records must hold the format's bounds and
 * write back to text that parses to the same records; the fit of parsed
 * records either succeeds with finite coefficients or says why not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/steplog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    fkv_step_rec *r = NULL;
    size_t n = 0;
    fkv_status st = fkv_steplog_parse((const char *)data, size, "fuzz", &r, &n, err, sizeof err);
    if (st != FKV_OK) {
        if ((st != FKV_EPARSE && st != FKV_ENOMEM) || r || n) abort();
        return 0;
    }
    if (!n) abort();
    for (size_t i = 0; i < n; i++)
        if (r[i].t_ns < 0 || r[i].requests < 1 || r[i].wall_ns < 1 || !(r[i].attn >= 0)) abort();
    /* write back, parse again: the same records */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    for (size_t i = 0; i < n; i++) fkv_steplog_write(f, &r[i]);
    fclose(f);
    fkv_step_rec *r2 = NULL;
    size_t n2 = 0;
    if (fkv_steplog_parse(text, len, "again", &r2, &n2, err, sizeof err) != FKV_OK || n2 != n) abort();
    for (size_t i = 0; i < n; i++)
        if (r2[i].t_ns != r[i].t_ns || r2[i].tokens != r[i].tokens || r2[i].requests != r[i].requests ||
            r2[i].attn != r[i].attn || r2[i].wall_ns != r[i].wall_ns)
            abort();
    for (int k = 3; k <= 4; k++) {
        fkv_step_fit fit;
        fkv_status fs = fkv_step_fit_solve(r, n, k, &fit);
        if (fs != FKV_OK && fs != FKV_EINVAL && fs != FKV_ESTATE) abort();
        if (fs == FKV_OK) {
            fkv_step_err e;
            fkv_step_fit_eval(&fit, r, n, &e);
            if (e.n != n) abort();
        }
    }
    free(text);
    free(r);
    free(r2);
    return 0;
}
