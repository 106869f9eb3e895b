/* The server's own Prometheus metrics (latency histograms by request class,
 * request and token counters, backend gauges), rendered before the
 * backend's cache metrics; a family never appears twice in /metrics. */
#ifndef FKV_SERVER_METRICS_HTTP_H
#define FKV_SERVER_METRICS_HTTP_H

#include "metrics/remote_metrics.h"
#include "server/backend.h"

typedef struct fkv_server_metrics fkv_server_metrics;

fkv_server_metrics *fkv_server_metrics_create(void);
void fkv_server_metrics_destroy(fkv_server_metrics *m);

/* Thread-safe observations; seconds; cls is an fkv_class. */
void fkv_server_metrics_ttft(fkv_server_metrics *m, int cls, double seconds);
void fkv_server_metrics_itl(fkv_server_metrics *m, int cls, double seconds);
void fkv_server_metrics_e2e(fkv_server_metrics *m, int cls, double seconds);
void fkv_server_metrics_finished(fkv_server_metrics *m, fkv_finish finish, uint64_t prompt_tokens,
                                 uint64_t completion_tokens);
void fkv_server_metrics_http_error(fkv_server_metrics *m, int status);

/* The whole /metrics text: the server's families, the backend's stats, then
 * the backend's own text with any family already written dropped. */
void fkv_server_metrics_render(fkv_server_metrics *m, const fkv_backend *be, fkv_textbuf *out);

/* The remote tier's families (src/metrics/remote_metrics.h), those not
 * marked absent, in the list's order. */
void fkv_prom_remote(fkv_textbuf *out, const fkv_remote_stats *s);

/* Appends `text` to out, dropping every family (and its samples) whose name
 * is in seen[0..n_seen) or appeared earlier in text.  Exposed for tests. */
void fkv_prom_append_filtered(fkv_textbuf *out, const char *text, size_t len, const char *const *seen,
                              size_t n_seen);

#endif
