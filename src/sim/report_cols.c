/* Column tables printed as text, JSON and CSV (see report_cols.h). */
#include "sim/report_cols.h"
#include "sim/report.h"

#include <stdint.h>
#include <string.h>

const char *fkv_slot_name(int k) { return k < FKV_N_RECLAIM ? fkv_reclaim_name((fkv_reclaim_action)k) : "idle"; }

void fkv_json_lat(FILE *f, const char *key, const fkv_lat_stats *l)
{
    static const char *cn[FKV_N_CLASSES] = {"short", "medium", "long"};
    fprintf(f, "\"%s\":{\"n\":%zu,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"std_ms\":%.3f,\"max_ms\":%.3f,\"by_class\":{",
            key, l->n, l->mean_ms, l->p50_ms, l->p99_ms, l->std_ms, l->max_ms);
    for (int c = 0; c < FKV_N_CLASSES; c++)
        fprintf(f, "%s\"%s\":{\"n\":%zu,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}", c ? "," : "", cn[c],
                l->by_class[c].n, l->by_class[c].mean_ms, l->by_class[c].p50_ms, l->by_class[c].p99_ms);
    fprintf(f, "}}");
}

static const void *at(const fkv_col *c, const void *row) { return (const char *)row + c->off; }

static uint64_t u64_at(const fkv_col *c, const void *row, int k)
{
    uint64_t v;
    memcpy(&v, (const char *)at(c, row) + (size_t)k * sizeof v, sizeof v);
    return v;
}

/* the raw value as a double (for the missing test) */
static double raw(const fkv_col *c, const void *row)
{
    double d;
    size_t z;
    int i;
    switch (c->kind) {
    case FKV_COL_F64:
        memcpy(&d, at(c, row), sizeof d);
        return d;
    case FKV_COL_U64:
    case FKV_COL_U64_F:
        return (double)u64_at(c, row, 0);
    case FKV_COL_SZ:
        memcpy(&z, at(c, row), sizeof z);
        return (double)z;
    case FKV_COL_BOOL:
        memcpy(&i, at(c, row), sizeof i);
        return i;
    case FKV_COL_STR:
        return *(const char *)at(c, row) != 0;
    default:
        return 0;
    }
}

static int missing(const fkv_col *c, const void *row)
{
    if (c->miss == FKV_MISS_NEVER) return 0;
    double v = raw(c, row);
    return c->miss == FKV_MISS_NEG ? v < 0 : v <= 0;
}

static double scaled(const fkv_col *c, double v)
{
    if (c->mul) v = c->mul * v;
    if (c->div) v = v / c->div;
    return v;
}

/* the value by fmt; BOOL as yes/no (text) or true/false (JSON) */
static void value(FILE *f, const fkv_col *c, const void *row, unsigned id, int json)
{
    switch (c->kind) {
    case FKV_COL_F64:
    case FKV_COL_U64_F:
        fprintf(f, c->fmt, scaled(c, raw(c, row)));
        break;
    case FKV_COL_U64:
        fprintf(f, c->fmt, (unsigned long long)u64_at(c, row, 0));
        break;
    case FKV_COL_SZ: {
        size_t z;
        memcpy(&z, at(c, row), sizeof z);
        fprintf(f, c->fmt, z);
        break;
    }
    case FKV_COL_BOOL:
        fprintf(f, c->fmt, raw(c, row) != 0 ? (json ? "true" : "yes") : (json ? "false" : "no"));
        break;
    case FKV_COL_ID:
        fprintf(f, c->fmt, id);
        break;
    case FKV_COL_STR:
        fprintf(f, c->fmt, (const char *)at(c, row));
        break;
    case FKV_COL_LAT:
    case FKV_COL_SLOTS:
        break;
    }
}

void fkv_cols_text_head(FILE *f, const fkv_col *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (c[i].kind == FKV_COL_SLOTS) {
            for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++)
                fprintf(f, " %*.*s", c[i].width, c[i].clip ? c[i].width : -1, fkv_slot_name(k));
            continue;
        }
        fprintf(f, " %*.*s", c[i].width, c[i].clip ? c[i].width : -1, c[i].head);
    }
}

void fkv_cols_text_row(FILE *f, const fkv_col *c, size_t n, const void *row, unsigned id)
{
    for (size_t i = 0; i < n; i++) {
        if (c[i].kind == FKV_COL_SLOTS) {
            for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++)
                fprintf(f, c[i].fmt, (unsigned long long)u64_at(&c[i], row, k));
        } else if (missing(&c[i], row)) {
            fprintf(f, " %*s", c[i].width, c[i].none ? c[i].none : "-");
        } else {
            value(f, &c[i], row, id, 0);
        }
    }
}

void fkv_cols_json(FILE *f, const fkv_col *c, size_t n, const void *row, unsigned id, int lead)
{
    for (size_t i = 0; i < n; i++) {
        if (i || lead) fputc(',', f);
        if (c[i].kind == FKV_COL_LAT) {
            fkv_json_lat(f, c[i].head, at(&c[i], row));
            continue;
        }
        fprintf(f, "\"%s\":", c[i].head);
        if (c[i].kind == FKV_COL_SLOTS) {
            fputc('{', f);
            for (int k = 0; k < FKV_N_RECLAIM_SLOTS; k++)
                fprintf(f, "%s\"%s\":%llu", k ? "," : "", fkv_slot_name(k), (unsigned long long)u64_at(&c[i], row, k));
            fputc('}', f);
        } else if (missing(&c[i], row)) {
            fputs("null", f);
        } else {
            value(f, &c[i], row, id, 1);
        }
    }
}

void fkv_cols_csv_head(FILE *f, const fkv_col *c, size_t n, unsigned id)
{
    for (size_t i = 0; i < n; i++) {
        if (id) fprintf(f, ",t%u_%s", id, c[i].head);
        else fprintf(f, ",%s", c[i].head);
    }
}

void fkv_cols_csv_row(FILE *f, const fkv_col *c, size_t n, const void *row)
{
    for (size_t i = 0; i < n; i++) {
        if (missing(&c[i], row)) fputc(',', f);
        else value(f, &c[i], row, 0, 0);
    }
}
