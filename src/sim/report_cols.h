/* Column tables: what a report's table, JSON object or CSV column group
 * prints, as data.
 *
 * A column names one figure of a row (a struct read at off), its text
 * header and width, and the printf conversion of its value.  Rules:
 *  - text: the header is " %*s" of width (cut to width with clip); the
 *    value is fmt, which carries its own leading space and width; a missing
 *    value prints " %*s" of width, "-";
 *  - JSON: "head":value with fmt, pairs separated by commas; missing: null;
 *  - CSV: fmt carries its leading comma; the header is ",head" (or
 *    ",t<id>_head"); missing: an empty field;
 *  - F64 (and U64_F, a counter printed as a double) prints value * mul /
 *    div (each only when set, so 100 * x and x / 1e9 keep their rounding);
 *  - ID prints the row's id (a tenant's number), not a field;
 *  - STR prints a char array at off (JSON: fmt carries the quotes); it is
 *    missing under NONPOS when empty;
 *  - missing: NEG when the raw value is < 0, NONPOS when <= 0; the text
 *    prints none ("-" when NULL) in its place.
 */
#ifndef FKV_SIM_REPORT_COLS_H
#define FKV_SIM_REPORT_COLS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    FKV_COL_F64,   /* double */
    FKV_COL_U64,   /* uint64_t, fmt %llu */
    FKV_COL_U64_F, /* uint64_t printed as a double */
    FKV_COL_SZ,    /* size_t, fmt %zu */
    FKV_COL_BOOL,  /* int: text "yes"/"no" (fmt %s), JSON true/false */
    FKV_COL_ID,    /* the row's id, fmt %u */
    FKV_COL_LAT,   /* fkv_lat_stats: JSON only, its object */
    FKV_COL_SLOTS, /* uint64_t[FKV_N_RECLAIM_SLOTS]: one text column per slot (its name the header), a JSON object */
    FKV_COL_STR    /* a NUL-terminated char array, fmt %s */
} fkv_col_kind;

typedef enum { FKV_MISS_NEVER, FKV_MISS_NEG, FKV_MISS_NONPOS } fkv_col_miss;

typedef struct fkv_col {
    const char *head; /* text header, JSON key, CSV name */
    int width;        /* text: the header's width and a missing value's */
    const char *fmt;  /* the value's printf conversion */
    fkv_col_kind kind;
    size_t off;       /* the figure's offset in the row */
    double mul, div;  /* F64, U64_F: value * mul / div; 0 = not applied */
    fkv_col_miss miss;
    int clip;         /* text: the header cut to width */
    const char *none; /* text: what a missing value prints (NULL: "-") */
} fkv_col;

#define FKV_NCOLS(a) (sizeof(a) / sizeof *(a))

void fkv_cols_text_head(FILE *f, const fkv_col *c, size_t n);
void fkv_cols_text_row(FILE *f, const fkv_col *c, size_t n, const void *row, unsigned id);
/* "key":value pairs separated by commas; lead: one comma before the first */
void fkv_cols_json(FILE *f, const fkv_col *c, size_t n, const void *row, unsigned id, int lead);
/* id > 0: each name as t<id>_name */
void fkv_cols_csv_head(FILE *f, const fkv_col *c, size_t n, unsigned id);
void fkv_cols_csv_row(FILE *f, const fkv_col *c, size_t n, const void *row);
/* A latency distribution's JSON object: "key":{"n":..,"mean_ms":..,...,"by_class":{..}} */
struct fkv_lat_stats;
void fkv_json_lat(FILE *f, const char *key, const struct fkv_lat_stats *l);
/* slot k of reclaimed_pages: the reclaim action's name, then "idle" */
const char *fkv_slot_name(int k);

#endif
