/* The load generator (see load.h).
 *
 * Open loop: requests with arrival times start then whatever the server
 * does, so a slow server builds a queue instead of slowing the offered load
 * (a closed loop would hide exactly the latency under study).  Closed-loop
 * users (heavy users sending back to back) stand for the offered load that
 * does adapt: one request open each, the next sent when it ends.  One thread
 * drives every request through the libcurl multi interface; the SSE parser
 * timestamps each token event as it arrives. */
#include "server/load.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/textbuf.h"

typedef struct lreq {
    struct lreq *prev, *next; /* the open requests */
    CURL *h;
    struct curl_slist *hdr;
    char *body;
    const fkv_load_item *it;
    fkv_load_item *owned; /* a closed-loop user's request: freed with it */
    fkv_load_result *res;
    int64_t t_send, t_first, t_last; /* ns */
    uint32_t tokens;
    int got_done, stream_error;
    fkv_textbuf buf; /* SSE bytes not yet parsed into events */
    fkv_load_dist itl; /* this request's gaps, kept until it succeeds */
} lreq;

static int64_t now_ns(void)
{
    return fkv_monotonic_now_ns();
}

static void dist_add(fkv_load_dist *d, double v)
{
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 64;
        double *p = realloc(d->v, nc * sizeof *p);
        if (!p) return; /* a lost sample beats a crash in a measuring tool */
        d->v = p;
        d->cap = nc;
    }
    d->v[d->n++] = v;
}

static void count_error(fkv_load_result *r, const char *kind)
{
    for (int i = 0; i < r->n_err_kinds; i++)
        if (!strcmp(r->err_kind[i], kind)) {
            r->err_count[i]++;
            return;
        }
    int i = r->n_err_kinds < FKV_LOAD_MAX_ERRKINDS ? r->n_err_kinds++ : FKV_LOAD_MAX_ERRKINDS - 1;
    if (i == FKV_LOAD_MAX_ERRKINDS - 1 && r->err_count[i]) kind = "other";
    snprintf(r->err_kind[i], sizeof r->err_kind[i], "%s", kind);
    r->err_count[i]++;
}

/* One SSE event's data. */
static void on_event(lreq *q, const char *data, size_t n, int64_t t)
{
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        q->got_done = 1;
        return;
    }
    cJSON *j = cJSON_ParseWithLength(data, n);
    if (!j) {
        q->stream_error = 1;
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "error")) q->stream_error = 1;
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
    if (c0 && cJSON_IsNull(fin)) { /* a token event (its text may be empty) */
        if (!q->tokens) q->t_first = t;
        else dist_add(&q->itl, (double)(t - q->t_last) * 1e-9);
        q->t_last = t;
        q->tokens++;
    }
    cJSON_Delete(j);
}

static size_t on_data(char *p, size_t s, size_t n, void *u)
{
    lreq *q = u;
    int64_t t = now_ns();
    fkv_textbuf_append(&q->buf, p, s * n);
    if (q->buf.oom) return 0;
    /* events are "data: X\n\n"; keep an incomplete tail for the next call */
    size_t off = 0;
    for (;;) {
        char *e = q->buf.data ? strstr(q->buf.data + off, "\n\n") : NULL;
        if (!e) break;
        const char *ev = q->buf.data + off;
        if (!strncmp(ev, "data: ", 6)) on_event(q, ev + 6, (size_t)(e - ev) - 6, t);
        off = (size_t)(e - q->buf.data) + 2;
    }
    fkv_textbuf_consume(&q->buf, off);
    return s * n;
}

static void request_done(lreq *q, CURLcode cc)
{
    fkv_load_result *r = q->res;
    int cls = q->it->cls;
    long status = 0;
    curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
    char kind[32] = "";
    if (cc == CURLE_OPERATION_TIMEDOUT) snprintf(kind, sizeof kind, "timeout");
    else if (cc == CURLE_COULDNT_CONNECT) snprintf(kind, sizeof kind, "connect");
    else if (cc != CURLE_OK) snprintf(kind, sizeof kind, "curl_%d", (int)cc);
    else if (status != 200) snprintf(kind, sizeof kind, "http_%ld", status);
    else if (q->stream_error) snprintf(kind, sizeof kind, "stream_error");
    else if (!q->got_done) snprintf(kind, sizeof kind, "stream_incomplete");
    fkv_load_user *u = &r->users[q->it->client];
    u->open--;
    if (kind[0]) {
        r->failed[cls]++;
        u->failed++;
        count_error(r, kind);
    } else {
        double e2e = (double)(now_ns() - q->t_send) * 1e-9;
        r->ok[cls]++;
        u->ok++;
        r->tokens[cls] += q->tokens;
        u->tokens += q->tokens;
        if (q->tokens) {
            double ttft = (double)(q->t_first - q->t_send) * 1e-9;
            dist_add(&r->ttft[cls], ttft);
            dist_add(&u->ttft, ttft);
        }
        dist_add(&r->e2e[cls], e2e);
        dist_add(&u->e2e, e2e);
        for (size_t i = 0; i < q->itl.n; i++) dist_add(&r->itl[cls], q->itl.v[i]);
    }
}

static void request_free(lreq *q)
{
    if (q->h) curl_easy_cleanup(q->h);
    curl_slist_free_all(q->hdr);
    free(q->body);
    free(q->owned);
    free(q->itl.v);
    fkv_textbuf_free(&q->buf);
    free(q);
}

static lreq *request_new(const fkv_load_config *cfg, const char *model, const fkv_load_item *it, size_t i,
                         fkv_load_result *res)
{
    lreq *q = calloc(1, sizeof *q);
    int32_t *toks = malloc(sizeof *toks * it->prompt_tokens);
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    if (!q || !toks) {
        free(q);
        free(toks);
        return NULL;
    }
    fkv_load_prompt(it, i, cfg->seed, cfg->vocab, toks);
    fkv_textbuf_puts(&b, "{\"model\":");
    fkv_textbuf_json_str(&b, model, strlen(model));
    fkv_textbuf_puts(&b, ",\"prompt\":[");
    for (uint32_t k = 0; k < it->prompt_tokens; k++) fkv_textbuf_printf(&b, "%s%d", k ? "," : "", toks[k]);
    char user[48];
    fkv_load_user_name(it, user, sizeof user);
    fkv_textbuf_printf(&b, "],\"max_tokens\":%u,\"temperature\":0,\"seed\":%zu,\"stream\":true,\"user\":\"%s\"}",
                       it->max_tokens, i, user);
    free(toks);
    if (b.oom) {
        fkv_textbuf_free(&b);
        free(q);
        return NULL;
    }
    q->body = b.data; /* owned now */
    q->it = it;
    q->res = res;
    fkv_textbuf_init(&q->buf);
    q->h = curl_easy_init();
    char url[1024], auth[1024];
    snprintf(url, sizeof url, "%s/v1/completions", cfg->url);
    q->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    q->hdr = curl_slist_append(q->hdr, "Expect:"); /* no 100-continue round trip in TTFT */
    if (cfg->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cfg->api_key);
        q->hdr = curl_slist_append(q->hdr, auth);
    }
    curl_easy_setopt(q->h, CURLOPT_URL, url);
    curl_easy_setopt(q->h, CURLOPT_HTTPHEADER, q->hdr);
    curl_easy_setopt(q->h, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(q->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b.len);
    curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(q->h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
    curl_easy_setopt(q->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(q->h, CURLOPT_TIMEOUT_MS, (long)(cfg->timeout_s * 1000));
    return q;
}

typedef struct sender {
    const fkv_load_config *cfg;
    const char *model;
    CURLM *m;
    fkv_load_result *out;
    lreq **open_list;
    size_t *open;
} sender;

/* Sends request idx (it); owned, when not NULL, is it and goes with the
 * request.  0, or -1 when the client could not send it (counted). */
static int send_item(sender *x, const fkv_load_item *it, fkv_load_item *owned, size_t idx)
{
    fkv_load_result *out = x->out;
    fkv_load_user *u = &out->users[it->client];
    out->sent[it->cls]++;
    u->sent++;
    int room = *x->open < x->cfg->max_inflight;
    lreq *q = room ? request_new(x->cfg, x->model, it, idx, out) : NULL;
    if (!q) {
        free(owned);
        out->failed[it->cls]++;
        u->failed++;
        count_error(out, room ? "client_oom" : "client_limit");
        return -1;
    }
    q->owned = owned;
    q->t_send = now_ns();
    q->next = *x->open_list;
    if (*x->open_list) (*x->open_list)->prev = q;
    *x->open_list = q;
    curl_multi_add_handle(x->m, q->h);
    (*x->open)++;
    if (++u->open > u->max_open) u->max_open = u->open;
    return 0;
}

/* GET url+path into b; the HTTP status, or -1. */
static long get(const fkv_load_config *cfg, const char *path, fkv_textbuf *b)
{
    CURL *h = curl_easy_init();
    if (!h) return -1;
    char url[1024], auth[1024];
    snprintf(url, sizeof url, "%s%s", cfg->url, path);
    struct curl_slist *hdr = NULL;
    if (cfg->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cfg->api_key);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, (curl_write_callback)NULL);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    FILE *mem = NULL;
    char *data = NULL;
    size_t len = 0;
    mem = open_memstream(&data, &len);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, mem);
    CURLcode cc = curl_easy_perform(h);
    long status = -1;
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (mem) fclose(mem);
    if (data) fkv_textbuf_append(b, data, len);
    free(data);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return status;
}

static void read_miss_rates(const fkv_load_config *cfg, fkv_load_result *r)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    for (int c = 0; c < FKV_N_CLASSES; c++) r->miss_rate[c] = -1;
    if (get(cfg, "/metrics", &b) == 200 && b.data) {
        for (int c = 0; c < FKV_N_CLASSES; c++) {
            char series[96];
            int n = snprintf(series, sizeof series, "\nkv_cache_miss_rate{request_type=\"%s\"} ",
                             fkv_class_name((fkv_class)c));
            const char *p = strstr(b.data, series);
            if (p) r->miss_rate[c] = atof(p + n);
        }
    }
    fkv_textbuf_free(&b);
}

fkv_status fkv_load_run(const fkv_load_config *cfg, const fkv_load_workload *w, fkv_load_result *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    char model[256];
    if (cfg->model) {
        snprintf(model, sizeof model, "%s", cfg->model);
    } else {
        fkv_textbuf b;
        fkv_textbuf_init(&b);
        long st = get(cfg, "/v1/models", &b);
        cJSON *j = st == 200 && b.data ? cJSON_Parse(b.data) : NULL;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "data"), 0), "id");
        int found = cJSON_IsString(id);
        if (found) snprintf(model, sizeof model, "%s", id->valuestring);
        cJSON_Delete(j);
        fkv_textbuf_free(&b);
        if (!found) {
            snprintf(err, errlen, "GET %s/v1/models failed (HTTP %ld); is the server up? (or pass --model)", cfg->url,
                     st);
            return FKV_EIO;
        }
    }
    uint32_t n_users = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->items[i].client >= n_users) n_users = w->items[i].client + 1;
    for (uint32_t k = 0; k < w->n_closed; k++)
        if (w->closed[k].client >= n_users) n_users = w->closed[k].client + 1;
    out->users = calloc(n_users ? n_users : 1, sizeof *out->users);
    if (!out->users) return FKV_ENOMEM;
    out->n_users = n_users;
    for (size_t i = 0; i < w->n; i++)
        out->users[w->items[i].client].present = 1, out->users[w->items[i].client].role = w->items[i].role;
    for (uint32_t k = 0; k < w->n_closed; k++)
        out->users[w->closed[k].client].present = 1, out->users[w->closed[k].client].role = w->closed[k].role;
    uint8_t *stopped = calloc(w->n_closed + 1, 1);
    CURLM *m = stopped ? curl_multi_init() : NULL;
    if (!m) {
        free(stopped);
        return FKV_ENOMEM;
    }
    size_t next = 0, closed_sent = 0;
    lreq *open_list = NULL;
    size_t open = 0;
    sender ctx = {cfg, model, m, out, &open_list, &open};
    int64_t t0 = now_ns();
    int64_t last_arrival = w->n ? t0 + (int64_t)(w->items[w->n - 1].arrival_s * 1e9) : t0;
    int64_t closed_until = t0 + (int64_t)(w->closed_until_s * 1e9);
    if (w->n_closed && closed_until > last_arrival) last_arrival = closed_until;
    int64_t give_up = last_arrival + (int64_t)(cfg->timeout_s * 1e9) + 1000000000;
    for (;;) {
        int64_t t = now_ns();
        int closed_live = w->n_closed && t < closed_until;
        if (!((next < w->n || open || closed_live) && t < give_up)) break;
        /* the due arrivals, then every closed-loop user with nothing open */
        while (next < w->n && t0 + (int64_t)(w->items[next].arrival_s * 1e9) <= t) {
            send_item(&ctx, &w->items[next], NULL, next);
            next++;
        }
        for (uint32_t k = 0; k < w->n_closed && closed_live; k++) {
            const fkv_load_item *c = &w->closed[k];
            if (out->users[c->client].open || stopped[k]) continue;
            fkv_load_item *owned = malloc(sizeof *owned);
            if (owned) {
                *owned = *c;
                owned->arrival_s = (double)(t - t0) * 1e-9;
            }
            /* a prompt of its own; a user whose request the client itself
             * could not send stops, rather than failing in a busy loop */
            if (send_item(&ctx, owned ? owned : c, owned, w->n + closed_sent++)) stopped[k] = 1;
        }
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            lreq *q = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            CURLcode cc = msg->data.result;
            request_done(q, cc);
            if (q->prev) q->prev->next = q->next;
            else open_list = q->next;
            if (q->next) q->next->prev = q->prev;
            curl_multi_remove_handle(m, q->h);
            request_free(q);
            open--;
        }
        /* sleep in poll until data or the next arrival, at most 50 ms; a
         * closed-loop user whose request just ended is served next round */
        int64_t wait_ms = 50;
        if (next < w->n) {
            int64_t until = (t0 + (int64_t)(w->items[next].arrival_s * 1e9) - now_ns()) / 1000000;
            if (until < wait_ms) wait_ms = until < 0 ? 0 : until;
        }
        for (uint32_t k = 0; k < w->n_closed && closed_live; k++)
            if (!out->users[w->closed[k].client].open && !stopped[k]) wait_ms = 0;
        curl_multi_poll(m, NULL, 0, (int)wait_ms, NULL);
    }
    out->wall_s = (double)(now_ns() - t0) * 1e-9;
    /* stragglers past the overall bound are failures of their own kind */
    while (open_list) {
        lreq *q = open_list;
        open_list = q->next;
        out->failed[q->it->cls]++;
        out->users[q->it->client].failed++;
        out->users[q->it->client].open--;
        count_error(out, "unfinished");
        curl_multi_remove_handle(m, q->h);
        request_free(q);
    }
    curl_multi_cleanup(m);
    free(stopped);
    read_miss_rates(cfg, out);
    return FKV_OK;
}
