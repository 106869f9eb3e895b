/* The remote tier's metrics as `fairkv serve` shows them, from one X-macro
 * list in the shape of metrics.h's: the stats struct and the Prometheus
 * text (src/server/metrics_http.c, fkv_prom_remote) are generated from it.
 *
 * X(name, type, labels, help)
 *   type:   COUNTER
 *   labels: NONE, RERR (kind=connect|timeout|oom|other),
 *           RDIR (direction=read|written)
 * A family whose bit is set in fkv_remote_stats.absent is not shown (the
 * part that counts it is off). */
#ifndef FKV_REMOTE_METRICS_H
#define FKV_REMOTE_METRICS_H

#include <stdint.h>

#define FKV_REMOTE_METRICS(X)                                                                                     \
    X(fairkv_remote_gets_total, COUNTER, NONE, "Chunk keys looked up in the remote tier")                         \
    X(fairkv_remote_hits_total, COUNTER, NONE, "Chunk keys served by the remote tier")                            \
    X(fairkv_remote_misses_total, COUNTER, NONE, "Chunk keys not served (absent, refused, or the tier failed)")   \
    X(fairkv_remote_corrupt_total, COUNTER, NONE, "Values read back that failed the check and were not served")   \
    X(fairkv_remote_puts_total, COUNTER, NONE, "Chunks queued for writing to the remote tier")                    \
    X(fairkv_remote_put_drops_total, COUNTER, NONE, "Chunks not queued (queue full)")                              \
    X(fairkv_remote_errors_total, COUNTER, RERR, "Remote tier failures, by kind")                                 \
    X(fairkv_remote_bytes_total, COUNTER, RDIR, "Value bytes (header and payload) moved, by direction")           \
    X(fairkv_remote_refused_total, COUNTER, NONE, "Pages the admission filter kept from the remote tier")          \
    X(fairkv_remote_foreign_hits_total, COUNTER, NONE,                                                            \
      "Chunk keys served by the remote tier that this instance has not written (another instance's)")            \
    X(fairkv_remote_hit_tokens_total, COUNTER, NONE,                                                              \
      "Prompt tokens whose K/V came from the remote tier (past what the device and host tiers held)")

/* entries per label kind */
enum { FKV__RL_NONE = 1, FKV__RL_RERR = 4, FKV__RL_RDIR = 2 };

/* a family's index in the list (bit of fkv_remote_stats.absent) */
enum {
#define FKV__RM_INDEX(name, type, labels, help) FKV__RM_##name,
    FKV_REMOTE_METRICS(FKV__RM_INDEX)
#undef FKV__RM_INDEX
    FKV__RM_N
};

typedef struct fkv_remote_stats {
#define FKV__RSTAT_FIELD(name, type, labels, help) uint64_t name[FKV__RL_##labels];
    FKV_REMOTE_METRICS(FKV__RSTAT_FIELD)
#undef FKV__RSTAT_FIELD
    uint64_t absent; /* bit FKV__RM_<name>: that family is not shown */
} fkv_remote_stats;

#endif
