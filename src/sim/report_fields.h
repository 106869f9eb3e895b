/* The nested figures of a report, listed once: per tenant and per tier.
 *
 * FKV_TENANT_FIELDS(X) calls X(kind, name) once per field of
 * fkv_tenant_summary (report.h declares the struct from it); kinds as in
 * result_fields.h, plus SLOTS (uint64_t[FKV_N_RECLAIM_SLOTS], one per
 * reclaim action, then idle evictions).
 *
 * FKV_TIER_FIELDS(X) calls X(ID, name, below, written, refused) once per
 * tier, in the order of fkv_scheme_summary.tier_hit_rate: ID makes
 * FKV_TIER_<ID>; name is the tier's word in every table, JSON key and CSV
 * column; below is BELOW for a tier written below the device, whose
 * summary fields written (bytes) and refused (chunks) the tables print,
 * NONE (written, refused: _) for the device.
 *
 * Which figure a table, a JSON object or a CSV column group prints, with
 * its header, width and format, is a column table (fkv_col,
 * report_cols.h) in report_write.c that names the figure's field.
 */
#ifndef FKV_SIM_REPORT_FIELDS_H
#define FKV_SIM_REPORT_FIELDS_H

#include <stdint.h>

/* clang-format off */
#define FKV_TENANT_FIELDS(X)                                                                                          \
    /* finished requests */                                                                                          \
    X(SZ,    n)                                                                                                      \
    /* a light tenant: the workload names it (fkv_bench_light_tenants), or it offers no more than its weighted       \
     * share of all offered tokens */                                                                                \
    X(INT,   light)                                                                                                  \
    /* its weight, and its fair share of the pool at the end of the run (pages) */                                   \
    X(F64,   weight)                                                                                                 \
    X(F64,   share_pages)                                                                                            \
    /* the tenant's requests only, per class too */                                                                  \
    X(LAT,   e2e)                                                                                                    \
    X(LAT,   ttft)                                                                                                   \
    /* its prompt tokens matched at first admission / its prompt tokens; the same on a static 1/n partition          \
     * (fkv_sim_partition), < 0 = not run */                                                                         \
    X(F64,   prefix_hit_rate)                                                                                        \
    X(F64,   partition_hit_rate)                                                                                     \
    /* the isolated scheme's P99s; < 0 = not run */                                                                  \
    X(F64,   isolated_ttft_p99_ms)                                                                                   \
    X(F64,   isolated_e2e_p99_ms)                                                                                    \
    X(U64,   preemptions)                                                                                            \
    X(U64,   reclaims)                                                                                               \
    X(SLOTS, reclaimed_pages)                                                                                        \
    /* mean of e2e / e2e alone on an idle system; 0 = not computed */                                                \
    X(F64,   slowdown_mean)                                                                                          \
    /* share attainment (report.h): its offered load and the tokens/s served, both over its share window;           \
     * its weighted max-min fair share of the saturation throughput; served / min(offered, fair share);             \
     * offered <= fair share.  < 0 = not computed (attained also when min(offered, fair share) is 0) */             \
    X(F64,   offered_tokens_s)                                                                                       \
    X(F64,   served_tokens_s)                                                                                        \
    X(F64,   fair_tokens_s)                                                                                          \
    X(F64,   attained)                                                                                               \
    X(INT,   within_share)

#define FKV_TIER_FIELDS(X)                                                                                            \
    /* ID      name    below  written               refused */                                                      \
    X(DEVICE,  device, NONE,  _,                    _)                                                               \
    X(HOST,    host,   BELOW, host_written_bytes,   host_refused_chunks)                                             \
    X(REMOTE,  remote, BELOW, remote_written_bytes, remote_refused_chunks)
/* clang-format on */

#define FKV_TF_TYPE_SLOTS uint64_t
#define FKV_TF_DIM_SLOTS [FKV_N_RECLAIM_SLOTS]
#define FKV_TF_DIM_SZ
#define FKV_TF_DIM_INT
#define FKV_TF_DIM_F64
#define FKV_TF_DIM_U64
#define FKV_TF_DIM_LAT
#define FKV_TF_TYPE_SZ size_t
#define FKV_TF_TYPE_INT int
#define FKV_TF_TYPE_F64 double
#define FKV_TF_TYPE_U64 uint64_t
#define FKV_TF_TYPE_LAT fkv_lat_stats

/* fkv_tenant_summary's fields */
#define FKV_TF_FIELD(kind, name) FKV_TF_TYPE_##kind name FKV_TF_DIM_##kind;

/* FKV_TIER_DEVICE, ... and FKV_N_TIERS */
#define FKV_TF_TIER_ID(ID, name, below, written, refused) FKV_TIER_##ID,
enum { FKV_TIER_FIELDS(FKV_TF_TIER_ID) FKV_N_TIERS };

#endif
