/* Server-side Prometheus metrics (text format 0.0.4).
 *
 * Latency histograms follow vLLM's (time_to_first_token_seconds,
 * inter_token_latency_seconds, e2e_request_latency_seconds) with the same
 * bucket bounds, plus a request_type label (short|medium|long, the cache's
 * classes of prompt + max_tokens) so the fairness question -- do short
 * requests wait behind long ones? -- is answered per class. */
#include "fairkv_eval.h"
#include "server/metrics_http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Bucket upper bounds in seconds, as in vLLM's metrics.py. */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                     0.5,   0.75,  1.0,  2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                                    7.5,  10.0,  20.0, 40.0, 80.0};
static const double e2e_bounds[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5,   5.0,   10.0,
                                    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
#define MAX_BUCKETS 24
#define TYPE_COUNTER "counter"

typedef struct hist {
    const char *name, *help;
    const double *bounds;
    int n_bounds;
    uint64_t counts[FKV_N_CLASSES][MAX_BUCKETS]; /* non-cumulative; [n_bounds] is +Inf */
    double sum[FKV_N_CLASSES];
    uint64_t count[FKV_N_CLASSES];
} hist;

static const int http_codes[] = {400, 401, 404, 405, 413, 429, 500, 503};
#define N_HTTP_CODES (sizeof http_codes / sizeof http_codes[0])
static const char *const finish_names[] = {"length", "stop", "cancelled", "error"};

struct fkv_server_metrics {
    pthread_mutex_t mu;
    hist ttft, itl, e2e;
    uint64_t errors[N_HTTP_CODES];
    uint64_t finished[4];
    uint64_t prompt_tokens, generation_tokens;
};

static void hist_init(hist *h, const char *name, const char *help, const double *b, int n)
{
    h->name = name;
    h->help = help;
    h->bounds = b;
    h->n_bounds = n;
}

fkv_server_metrics *fkv_server_metrics_create(void)
{
    fkv_server_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->ttft, "fairkv_time_to_first_token_seconds",
              "Time from receiving a completion request to its first generated token, in seconds", ttft_bounds,
              (int)(sizeof ttft_bounds / sizeof ttft_bounds[0]));
    hist_init(&m->itl, "fairkv_inter_token_latency_seconds",
              "Time between consecutive generated tokens of a request, in seconds", itl_bounds,
              (int)(sizeof itl_bounds / sizeof itl_bounds[0]));
    hist_init(&m->e2e, "fairkv_e2e_request_latency_seconds",
              "Time from receiving a completion request to its last token, in seconds", e2e_bounds,
              (int)(sizeof e2e_bounds / sizeof e2e_bounds[0]));
    return m;
}

void fkv_server_metrics_destroy(fkv_server_metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(fkv_server_metrics *m, hist *h, int cls, double v)
{
    if (cls < 0 || cls >= FKV_N_CLASSES) return;
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b]) b++;
    pthread_mutex_lock(&m->mu);
    h->counts[cls][b]++;
    h->sum[cls] += v;
    h->count[cls]++;
    pthread_mutex_unlock(&m->mu);
}

void fkv_server_metrics_ttft(fkv_server_metrics *m, int cls, double s) { observe(m, &m->ttft, cls, s); }
void fkv_server_metrics_itl(fkv_server_metrics *m, int cls, double s) { observe(m, &m->itl, cls, s); }
void fkv_server_metrics_e2e(fkv_server_metrics *m, int cls, double s) { observe(m, &m->e2e, cls, s); }

void fkv_server_metrics_finished(fkv_server_metrics *m, fkv_finish finish, uint64_t prompt_tokens,
                                 uint64_t completion_tokens)
{
    pthread_mutex_lock(&m->mu);
    if ((unsigned)finish < 4) m->finished[finish]++;
    m->prompt_tokens += prompt_tokens;
    m->generation_tokens += completion_tokens;
    pthread_mutex_unlock(&m->mu);
}

void fkv_server_metrics_http_error(fkv_server_metrics *m, int status)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < N_HTTP_CODES; i++)
        if (http_codes[i] == status) m->errors[i]++;
    pthread_mutex_unlock(&m->mu);
}

static void family(fkv_textbuf *o, const char *name, const char *type, const char *help)
{
    fkv_textbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_hist(fkv_textbuf *o, const hist *h)
{
    family(o, h->name, "histogram", h->help);
    for (int c = 0; c < FKV_N_CLASSES; c++) {
        const char *cl = fkv_class_name((fkv_class)c);
        uint64_t cum = 0;
        for (int b = 0; b <= h->n_bounds; b++) {
            cum += h->counts[c][b];
            if (b < h->n_bounds)
                fkv_textbuf_printf(o, "%s_bucket{request_type=\"%s\",le=\"%g\"} %llu\n", h->name, cl, h->bounds[b],
                                   (unsigned long long)cum);
            else
                fkv_textbuf_printf(o, "%s_bucket{request_type=\"%s\",le=\"+Inf\"} %llu\n", h->name, cl,
                                   (unsigned long long)cum);
        }
        fkv_textbuf_printf(o, "%s_sum{request_type=\"%s\"} %.9g\n", h->name, cl, h->sum[c]);
        fkv_textbuf_printf(o, "%s_count{request_type=\"%s\"} %llu\n", h->name, cl, (unsigned long long)h->count[c]);
    }
}

/* ------------------------------------------------------------ the remote tier's list */

/* label name and value of entry i of a remote metric with these labels */
static const char *const rerr_names[FKV__RL_RERR] = {"connect", "timeout", "oom", "other"};
static const char *const rdir_names[FKV__RL_RDIR] = {"read", "written"};
#define RLABEL_NONE NULL, NULL
#define RLABEL_RERR "kind", rerr_names
#define RLABEL_RDIR "direction", rdir_names

static void remote_family(fkv_textbuf *o, const char *name, const char *type, const char *help, const char *label,
                          const char *const *values, const uint64_t *v, int n)
{
    family(o, name, type, help);
    for (int i = 0; i < n; i++) {
        if (label) fkv_textbuf_printf(o, "%s{%s=\"%s\"} %llu\n", name, label, values[i], (unsigned long long)v[i]);
        else fkv_textbuf_printf(o, "%s %llu\n", name, (unsigned long long)v[i]);
    }
}

void fkv_prom_remote(fkv_textbuf *o, const fkv_remote_stats *s)
{
#define X(name, type, labels, help)                                                                                  \
    if (!((s->absent >> FKV__RM_##name) & 1))                                                                          \
        remote_family(o, #name, TYPE_##type, help, RLABEL_##labels, s->name, FKV__RL_##labels);
    FKV_REMOTE_METRICS(X)
#undef X
}

/* Families the server writes itself; the backend's text may not repeat them. */
static const char *const own_families[] = {
    "fairkv_time_to_first_token_seconds", "fairkv_inter_token_latency_seconds", "fairkv_e2e_request_latency_seconds",
    "fairkv_http_errors_total",           "fairkv_requests_finished_total",     "fairkv_prompt_tokens_total",
    "fairkv_generation_tokens_total",     "fairkv_num_requests_running",        "fairkv_num_requests_waiting",
    "fairkv_num_preemptions_total",       "fairkv_recomputed_tokens_total",     "fairkv_quantizations_total",
};

void fkv_server_metrics_render(fkv_server_metrics *m, const fkv_backend *be, fkv_textbuf *o)
{
    fkv_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    if (be && be->ops) be->ops->stats(be->impl, &bs);

    pthread_mutex_lock(&m->mu);
    render_hist(o, &m->ttft);
    render_hist(o, &m->itl);
    render_hist(o, &m->e2e);
    family(o, "fairkv_http_errors_total", "counter", "Requests answered with an error, by HTTP status");
    for (size_t i = 0; i < N_HTTP_CODES; i++)
        fkv_textbuf_printf(o, "fairkv_http_errors_total{code=\"%d\"} %llu\n", http_codes[i],
                           (unsigned long long)m->errors[i]);
    family(o, "fairkv_requests_finished_total", "counter", "Completion choices finished, by finish reason");
    for (int i = 0; i < 4; i++)
        fkv_textbuf_printf(o, "fairkv_requests_finished_total{finished_reason=\"%s\"} %llu\n", finish_names[i],
                           (unsigned long long)m->finished[i]);
    family(o, "fairkv_prompt_tokens_total", "counter", "Prompt tokens of finished choices");
    fkv_textbuf_printf(o, "fairkv_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    family(o, "fairkv_generation_tokens_total", "counter", "Tokens generated");
    fkv_textbuf_printf(o, "fairkv_generation_tokens_total %llu\n", (unsigned long long)m->generation_tokens);
    pthread_mutex_unlock(&m->mu);

    family(o, "fairkv_num_requests_running", "gauge", "Requests in the backend's running batch");
    fkv_textbuf_printf(o, "fairkv_num_requests_running %llu\n", (unsigned long long)bs.running);
    family(o, "fairkv_num_requests_waiting", "gauge", "Requests accepted and waiting for the running batch");
    fkv_textbuf_printf(o, "fairkv_num_requests_waiting %llu\n", (unsigned long long)bs.waiting);
    family(o, "fairkv_num_preemptions_total", "counter", "Running requests sent back to wait for KV space");
    fkv_textbuf_printf(o, "fairkv_num_preemptions_total %llu\n", (unsigned long long)bs.preemptions);
    family(o, "fairkv_recomputed_tokens_total", "counter", "KV tokens computed again because they had been evicted");
    fkv_textbuf_printf(o, "fairkv_recomputed_tokens_total %llu\n", (unsigned long long)bs.recomputed_tokens);
    family(o, "fairkv_quantizations_total", "counter", "KV chunks quantized, by reason");
    for (int i = 0; i < bs.n_quant_reasons && i < FKV_BACKEND_MAX_QREASONS; i++)
        fkv_textbuf_printf(o, "fairkv_quantizations_total{reason=\"%s\"} %llu\n", bs.quant_reason[i],
                           (unsigned long long)bs.quantizations[i]);

    if (be && be->ops && be->ops->metrics) {
        fkv_textbuf extra;
        fkv_textbuf_init(&extra);
        be->ops->metrics(be->impl, &extra);
        if (extra.oom) o->oom = 1;
        else if (extra.len)
            fkv_prom_append_filtered(o, extra.data, extra.len, own_families,
                                     sizeof own_families / sizeof own_families[0]);
        fkv_textbuf_free(&extra);
    }
}

/* A metric name at s (up to '{', ' ' or end of line), as length. */
static size_t name_len(const char *s, const char *end)
{
    size_t n = 0;
    while (s + n < end && s[n] != '{' && s[n] != ' ' && s[n] != '\n') n++;
    return n;
}

static int in_list(const char *name, size_t n, const char *const *list, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++)
        if (strlen(list[i]) == n && !memcmp(list[i], name, n)) return 1;
    return 0;
}

/* Does sample name (n bytes) belong to family fam? (histogram/summary suffixes) */
static int of_family(const char *name, size_t n, const char *fam, size_t fl)
{
    static const char *const sfx[] = {"", "_bucket", "_sum", "_count", "_total", "_created"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        size_t sl = strlen(sfx[i]);
        if (fl + sl == n && !memcmp(name, fam, fl) && !memcmp(name + fl, sfx[i], sl)) return 1;
    }
    return 0;
}

void fkv_prom_append_filtered(fkv_textbuf *out, const char *text, size_t len, const char *const *seen,
                              size_t n_seen)
{
    /* families met in `text` so far: offsets into text (no allocation of names) */
    const char *fam = NULL; /* current family of `text`, NULL before any header */
    size_t fam_len = 0;
    int dropping = 0;
    int samples = 0; /* sample lines since the last header */
    const char *p = text, *end = text + len;
    /* names of families already taken from `text` (to drop a repeat) */
    const char **mine = NULL;
    size_t *mine_len = NULL, n_mine = 0, cap_mine = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl + 1 : end;
        const char *name = NULL;
        size_t nlen = 0;
        int header = 0;
        size_t ll = (size_t)(le - p); /* the text need not be NUL-terminated */
        if (ll >= 7 && (!memcmp(p, "# HELP ", 7) || !memcmp(p, "# TYPE ", 7))) {
            header = 1;
            name = p + 7;
            nlen = name_len(name, le);
        } else if (*p != '#' && *p != '\n') {
            name = p;
            nlen = name_len(p, le);
        }
        /* HELP and TYPE of one family come together; a header after samples,
         * even of the same name, starts a (repeated) family */
        if (header && !(fam && !samples && fam_len == nlen && !memcmp(fam, name, nlen))) {
            /* a new family starts */
            int repeat = in_list(name, nlen, seen, n_seen);
            for (size_t i = 0; i < n_mine && !repeat; i++)
                if (mine_len[i] == nlen && !memcmp(mine[i], name, nlen)) repeat = 1;
            fam = name;
            fam_len = nlen;
            dropping = repeat;
            if (!repeat) {
                if (n_mine == cap_mine) {
                    size_t nc = cap_mine ? 2 * cap_mine : 32;
                    const char **a = realloc(mine, nc * sizeof *a);
                    if (a) mine = a;
                    size_t *b = realloc(mine_len, nc * sizeof *b);
                    if (b) mine_len = b;
                    if (!a || !b) {
                        out->oom = 1;
                        break;
                    }
                    cap_mine = nc;
                }
                mine[n_mine] = name;
                mine_len[n_mine++] = nlen;
            }
        } else if (!header && name && !(fam && of_family(name, nlen, fam, fam_len))) {
            /* a sample outside the current family: judge it by its own name */
            int repeat = 0;
            for (size_t i = 0; i < n_seen && !repeat; i++) repeat = of_family(name, nlen, seen[i], strlen(seen[i]));
            dropping = repeat;
            fam = NULL;
        }
        if (header) samples = 0;
        else if (name) samples++;
        if (!dropping) fkv_textbuf_append(out, p, (size_t)(le - p));
        p = le;
    }
    free(mine);
    free(mine_len);
}
