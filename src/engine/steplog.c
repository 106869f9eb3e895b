/* Step log writer and reader (format in steplog.h). */
#include "engine/steplog.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

int fkv_steplog_write(FILE *f, const fkv_step_rec *r)
{
    /* attn is a multiple of 0.5: one decimal is exact */
    if (fprintf(f, "%" PRId64 " %" PRIu32 " %" PRIu32 " %.1f %" PRId64, r->t_ns, r->tokens, r->requests, r->attn,
                r->wall_ns) < 0)
        return -1;
    const double *b = r->kv_read;
    if ((b[0] || b[1] || b[2]) && fprintf(f, " %.0f %.0f %.0f", b[0], b[1], b[2]) < 0) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

fkv_status fkv_steplog_open(const char *path, FILE **out, char *err, size_t errlen)
{
    *out = fopen(path, "w");
    if (!*out) {
        if (err) snprintf(err, errlen, "cannot open '%s' for writing: %s", path, strerror(errno));
        return FKV_EIO;
    }
    fputs(FKV_STEPLOG_HEADER, *out);
    return FKV_OK;
}

/* An integer field in [lo, hi]: decimal digits only (no sign, no spaces). */
static int int_field(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (*s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static const char *const field_name[] = {"t_ns",    "tokens",  "requests", "attn_work",
                                         "wall_ns", "kv_base", "kv_int8",  "kv_int4"};

fkv_status fkv_steplog_parse(const char *buf, size_t len, const char *name, fkv_step_rec **out, size_t *n,
                             char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    fkv_step_rec *v = NULL;
    size_t nv = 0, cap = 0, line = 0, pos = 0;
    char lb[256];
    fkv_status st = FKV_OK;
    while (pos < len && !st) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - buf - pos) : len - pos;
        const char *src = buf + pos;
        pos += l + 1;
        line++;
        if (l && src[l - 1] == '\r') l--;
        if (l >= sizeof lb) {
            st = fkv_err_at(err, errlen, name, line, "line longer than %zu bytes", sizeof lb - 1);
            break;
        }
        memcpy(lb, src, l);
        lb[l] = 0;
        if (memchr(lb, 0, l)) {
            st = fkv_err_at(err, errlen, name, line, "NUL byte");
            break;
        }
        char *p = lb;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') continue;
        char *f[8], *save = NULL;
        int nf = 0;
        for (char *tok = strtok_r(p, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
            if (nf < 8) f[nf] = tok;
            nf++;
        }
        if (nf != 5 && nf != 8) {
            st = fkv_err_at(err, errlen, name, line,
                "%d fields, expected 5 (t_ns tokens requests attn_work wall_ns) or 8 (and kv_base kv_int8 "
                "kv_int4)", nf);
            break;
        }
        fkv_step_rec r;
        memset(&r, 0, sizeof r);
        int64_t x[5];
        int bad = -1;
        /* t_ns up to ~146 years; tokens and requests fit uint32_t; a step has
         * an item and takes time */
        static const int64_t hi[5] = {INT64_MAX / 2, UINT32_MAX, UINT32_MAX, 0, INT64_MAX / 2};
        static const int64_t lo[5] = {0, 0, 1, 0, 1};
        for (int k = 0; k < 5 && bad < 0; k++) {
            if (k == 3) continue;
            if (int_field(f[k], lo[k], hi[k], &x[k])) bad = k;
        }
        if (bad < 0) {
            char *end;
            errno = 0;
            r.attn = strtod(f[3], &end);
            /* a finite non-negative multiple of 0.5 */
            if (*f[3] < '0' || *f[3] > '9' || *end || errno || !isfinite(r.attn) || r.attn > 1e18 ||
                r.attn * 2 != floor(r.attn * 2))
                bad = 3;
        }
        /* bytes read: whole numbers, below 2^53 (exact as doubles) */
        for (int k = 5; k < nf && bad < 0; k++) {
            int64_t b;
            if (int_field(f[k], 0, (int64_t)1 << 53, &b)) bad = k;
            else r.kv_read[k - 5] = (double)b;
        }
        if (bad >= 0) {
            st = fkv_err_at(err, errlen, name, line, "field %s: '%.32s'", field_name[bad], f[bad]);
            break;
        }
        r.t_ns = x[0];
        r.tokens = (uint32_t)x[1];
        r.requests = (uint32_t)x[2];
        r.wall_ns = x[4];
        if (nv == cap) {
            size_t nc = cap ? 2 * cap : 256;
            fkv_step_rec *q = realloc(v, nc * sizeof *q);
            if (!q) {
                st = FKV_ENOMEM;
                break;
            }
            v = q;
            cap = nc;
        }
        v[nv++] = r;
    }
    if (!st && !nv) st = fkv_err_at(err, errlen, name, line, "no step records");
    if (st) {
        free(v);
        return st;
    }
    *out = v;
    *n = nv;
    return FKV_OK;
}

fkv_status fkv_steplog_read(const char *path, fkv_step_rec **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return FKV_EIO;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    fkv_status st = FKV_OK;
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
            cap *= 2;
        }
    }
    if (!buf) st = FKV_ENOMEM;
    else if (ferror(f)) {
        if (err) snprintf(err, errlen, "%s: read error", path);
        st = FKV_EIO;
    }
    fclose(f);
    if (!st) st = fkv_steplog_parse(buf, len, path, out, n, err, errlen);
    free(buf);
    return st;
}
