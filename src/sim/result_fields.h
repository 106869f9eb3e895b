/* The figures of a simulation run, listed once.
 *
 * FKV_RESULT_FIELDS(X) calls X(kind, name, apart, req, req_field, summary,
 * fmt, json, csv) once per figure.  From it come the fields of
 * fkv_sim_result (sim.h) and fkv_scheme_summary (report.h), run_whole's
 * per-request counts and run_apart's combining (sim.c), fkv_summarize's
 * copies (report.c) and the JSON and CSV writers (report_write.c).
 *
 *   kind       F64 double, U64 uint64_t, SZ size_t, U32 uint32_t, INT int,
 *              NS int64_t (ns), LAT fkv_lat_stats (a latency distribution)
 *   apart      how run_apart combines the tenants' separate runs: SUM, MAX,
 *              LAST (the last run's), HAND (its own code), DROP (not
 *              combined: 0 in the isolated and partition results); SUMMARY:
 *              not a field of fkv_sim_result, only of the summary
 *   req        how run_whole counts it from its requests: ALL (req_field
 *              summed over every request), DONE (over finished ones), HAND
 *              (its own code); req_field is the fkv_req field, _ for HAND
 *   summary    COPY (the summary's field is the result's), CALC
 *              (fkv_summarize computes it), NONE (not in the summary)
 *   fmt        printf format of its JSON value and CSV field; for LAT, the
 *              CSV columns it has (FKV_LATCOL_*)
 *   json       1: a key of each scheme's JSON object, in this list's order;
 *              0: not there, or printed in a nested part by hand
 *   csv        the rank of its CSV column(s) after "scheme" (1, 2, ...;
 *              dense); 0: none
 *
 * The list's order is the JSON keys' order.  The nested figures (per
 * tenant, per tier) are listed in report_fields.h; the text tables, the
 * nested JSON objects and the per-tenant and per-tier CSV columns are
 * column tables in report_write.c (header, width, format, which figure;
 * printed by report_cols.c).
 */
#ifndef FKV_SIM_RESULT_FIELDS_H
#define FKV_SIM_RESULT_FIELDS_H

#include <stddef.h>
#include <stdint.h>

/* CSV columns of a latency distribution, in this order: <name>_mean_ms,
 * _p50_ms, _p99_ms, _std_ms, then per class (short, medium, long) mean and
 * P99. */
enum {
    FKV_LATCOL_MEAN = 1 << 0,
    FKV_LATCOL_P50 = 1 << 1,
    FKV_LATCOL_P99 = 1 << 2,
    FKV_LATCOL_STD = 1 << 3,
    FKV_LATCOL_SHORT_MEAN = 1 << 4,
    FKV_LATCOL_SHORT_P99 = 1 << 5,
    FKV_LATCOL_MEDIUM_MEAN = 1 << 6,
    FKV_LATCOL_MEDIUM_P99 = 1 << 7,
    FKV_LATCOL_LONG_MEAN = 1 << 8,
    FKV_LATCOL_LONG_P99 = 1 << 9,
    FKV_LATCOL_N = 10,
    FKV_LATCOL_ALL = (1 << 10) - 1,
    FKV_LATCOL_TTFT = FKV_LATCOL_MEAN | FKV_LATCOL_P50 | FKV_LATCOL_P99 | FKV_LATCOL_STD | FKV_LATCOL_SHORT_MEAN |
                      FKV_LATCOL_LONG_MEAN,
    FKV_LATCOL_MEAN_P99 = FKV_LATCOL_MEAN | FKV_LATCOL_P99
};

/* clang-format off */
#define FKV_RESULT_FIELDS(X)                                                                                         \
    /* kind name                  apart    req   req_field       summary fmt                  json csv */            \
    /* prompt tokens found in the prefix cache at first admission / prompt tokens (vLLM's                            \
     * prefix_cache_hits / prefix_cache_queries): the headline */                                                    \
    X(F64, prefix_hit_rate,       SUMMARY, HAND, _,              CALC,   "%.6f",              1,   1)               \
    /* context reads served from cache / (those + recomputed + reloaded) */                                          \
    X(F64, context_read_rate,     SUMMARY, HAND, _,              CALC,   "%.6f",              1,   2)               \
    /* the cache's own counter: touched tokens found resident */                                                     \
    X(F64, cache_hit_rate,        SUMMARY, HAND, _,              CALC,   "%.6f",              1,   0)               \
    /* the cache's counter (includes re-matches after preemption) */                                                 \
    X(F64, cache_prefix_hit_rate, SUMMARY, HAND, _,              CALC,   "%.6f",              1,   0)               \
    /* std(e2e, lru) / std(e2e, this); 0 when no lru run (fkv_summaries_fairness) */                                 \
    X(F64, fairness_gain,         SUMMARY, HAND, _,              CALC,   "%.4f",              1,   3)               \
    /* output tokens/s over lru's in the same run; 0 when no lru run */                                              \
    X(F64, throughput_rel_lru,    SUMMARY, HAND, _,              CALC,   "%.6f",              1,   12)              \
    X(LAT, e2e,                   SUMMARY, HAND, _,              CALC,   FKV_LATCOL_ALL,      1,   4)               \
    X(LAT, ttft,                  SUMMARY, HAND, _,              CALC,   FKV_LATCOL_TTFT,     1,   5)               \
    X(LAT, tpot,                  SUMMARY, HAND, _,              CALC,   FKV_LATCOL_MEAN_P99, 1,   6)               \
    /* tokens computed again after eviction or preemption */                                                         \
    X(U64, recomputed_tokens,     SUM,     ALL,  recomputed,     COPY,   "%llu",              1,   7)               \
    X(U64, reloaded_tokens,       SUM,     ALL,  reloaded,       COPY,   "%llu",              1,   0)               \
    X(U64, preemptions,           SUM,     HAND, _,              COPY,   "%llu",              1,   8)               \
    X(U64, evicted_pages,         SUM,     HAND, _,              COPY,   "%llu",              1,   0)               \
    /* requests finished, and refused as larger than the cache */                                                    \
    X(SZ,  done,                  SUM,     HAND, _,              COPY,   "%zu",               1,   9)               \
    X(SZ,  rejected,              SUM,     HAND, _,              COPY,   "%zu",               1,   10)              \
    X(F64, throughput_tok_s,      SUMMARY, HAND, _,              CALC,   "%.3f",              1,   11)              \
    X(F64, throughput_req_s,      SUMMARY, HAND, _,              CALC,   "%.4f",              1,   0)               \
    X(F64, makespan_s,            SUMMARY, HAND, _,              CALC,   "%.4f",              1,   0)               \
    X(U64, steps,                 SUM,     HAND, _,              COPY,   "%llu",              1,   0)               \
    X(U64, max_step_tokens,       MAX,     HAND, _,              COPY,   "%llu",              1,   0)               \
    /* cache touch counters, all classes */                                                                          \
    X(U64, hit_tokens,            SUM,     HAND, _,              NONE,   "%llu",              0,   0)               \
    X(U64, miss_tokens,           SUM,     HAND, _,              NONE,   "%llu",              0,   0)               \
    X(U64, prefix_query_tokens,   SUM,     HAND, _,              NONE,   "%llu",              0,   0)               \
    X(U64, prefix_hit_tokens,     SUM,     HAND, _,              NONE,   "%llu",              0,   0)               \
    /* prompt tokens matched at first admission, every tier; of them found in the host tier and in the               \
     * remote tier (the rest was on the device) */                                                                   \
    X(U64, matched_tokens,        SUM,     ALL,  matched,        NONE,   "%llu",              0,   0)               \
    X(U64, matched_host_tokens,   SUM,     ALL,  matched_host,   NONE,   "%llu",              0,   0)               \
    X(U64, matched_remote_tokens, SUM,     ALL,  matched_remote, NONE,   "%llu",              0,   0)               \
    /* of finished requests; prompt_tokens_all: of every request */                                                  \
    X(U64, output_tokens,         SUM,     DONE, output,         NONE,   "%llu",              0,   0)               \
    X(U64, prompt_tokens,         SUM,     DONE, prompt,         NONE,   "%llu",              0,   0)               \
    X(U64, prompt_tokens_all,     SUM,     ALL,  prompt,         NONE,   "%llu",              0,   0)               \
    X(U64, peak_live_tokens,      MAX,     HAND, _,              NONE,   "%llu",              0,   0)               \
    /* first arrival to last finish; run_apart offsets each run by its first arrival */                              \
    X(NS,  makespan_ns,           HAND,    HAND, _,              NONE,   "%lld",              0,   0)               \
    X(U64, capacity_tokens,       LAST,    HAND, _,              COPY,   "%llu",              0,   0)               \
    X(U32, n_tenants,             HAND,    HAND, _,              COPY,   "%u",                0,   0)               \
    /* 1: a host or remote tier was configured (reports print the tiers) */                                          \
    X(INT, tiered,                LAST,    HAND, _,              COPY,   "%d",                0,   0)               \
    /* tokens that crossed the network (whole chunks) */                                                             \
    X(U64, remote_fetched_tokens, SUM,     HAND, _,              COPY,   "%llu",              0,   0)               \
    /* written below the device: bytes demoted to the host tier (PCIe) and written back to the remote store          \
     * (network); chunks the admission filter refused at each */                                                     \
    X(U64, host_written_bytes,    DROP,    HAND, _,              COPY,   "%llu",              0,   0)               \
    X(U64, remote_written_bytes,  DROP,    HAND, _,              COPY,   "%llu",              0,   0)               \
    X(U64, host_refused_chunks,   DROP,    HAND, _,              COPY,   "%llu",              0,   0)               \
    X(U64, remote_refused_chunks, DROP,    HAND, _,              COPY,   "%llu",              0,   0)               \
    /* VTC's service difference (src/sim/fairness.h): the largest gap seen, at the end of any step, between the      \
     * weighted service (input tokens of first prefills x vtc_in_weight + output tokens x vtc_out_weight, over       \
     * the tenant's weight) of two backlogged tenants; tenant runs only */                                           \
    X(F64, service_diff_tokens,   DROP,    HAND, _,              COPY,   "%.3f",              0,   0)
/* clang-format on */

#define FKV_RF_TYPE_F64 double
#define FKV_RF_TYPE_U64 uint64_t
#define FKV_RF_TYPE_SZ size_t
#define FKV_RF_TYPE_U32 uint32_t
#define FKV_RF_TYPE_INT int
#define FKV_RF_TYPE_NS int64_t
#define FKV_RF_TYPE_LAT fkv_lat_stats

/* fkv_sim_result's fields: every figure but the summary's own */
#define FKV_RF_RESULT_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) FKV_RF_RES_##apart(kind, name)
#define FKV_RF_RES_SUM(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_RES_MAX(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_RES_LAST(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_RES_HAND(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_RES_DROP(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_RES_SUMMARY(kind, name)

/* fkv_scheme_summary's fields: the copied and the computed ones */
#define FKV_RF_SUMMARY_FIELD(kind, name, apart, req, rf, summary, fmt, json, csv) FKV_RF_SUM_##summary(kind, name)
#define FKV_RF_SUM_COPY(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_SUM_CALC(kind, name) FKV_RF_TYPE_##kind name;
#define FKV_RF_SUM_NONE(kind, name)

#endif
