/* The deterministic fake backend: no model, but the cache is real.
 *
 * One step thread plays an engine with continuous batching: every `pace_ms`
 * it admits waiting requests into the running batch (at most max_batch),
 * then gives each running request one token drawn from a per-request
 * xorshift RNG seeded by the request's seed, so the same request gives the
 * same text.  Each request owns a sequence of a real fkv_cache on phantom
 * storage: the prompt is matched against the prefix cache and the rest
 * appended, every generated token is appended and the sequence touched (a
 * decode step reads the whole context), evicted ranges are restored (the
 * recomputation a real engine would do), and the sequence is freed at the
 * end, so /metrics shows real hit, miss, eviction and usage figures.  The
 * running batch is deliberately not pinned: with a small cache (pages=)
 * running requests evict each other, which is the pressure the fairness
 * metrics are about.
 *
 * Tokenizer: one token per byte (vocab 256).  Generated tokens are the bytes
 * "a".."z" and " ", so every piece is one printable character.
 *
 * Log-probabilities: the fake's distribution is what it draws from, 27
 * tokens equally likely, so its logits are 0 for those and -inf for the
 * rest, and logprobs go through the same log-softmax as the engine's:
 * every token -ln 27, alternatives in id order (" ", then "a", "b", ...).
 * It has no end-of-sequence token, so ignore_eos changes nothing.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/backend.h"

typedef struct freq {
    struct freq *next;
    uint64_t id;
    uint64_t client;
    int32_t *prompt; /* [n_prompt + max_tokens]: the prompt, then the tokens generated */
    uint32_t n_prompt;
    uint32_t max_tokens, produced, cached;
    uint64_t rng;
    int logprobs;
    uint32_t top_logprobs;
    fkv_gen_sink sink;
    fkv_seq *seq;
    int cancelled;
    /* filled by the step under the lock, delivered after it */
    int32_t tok;
    int emit;          /* 1: deliver tok this step */
    int done;          /* 1: deliver on_done this step */
    fkv_finish finish;
    char error[128];
} freq;

typedef struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* new work, cancel, stop */
    pthread_cond_t idle; /* a request finished (drain waits on it) */
    pthread_t thread;
    int stop, draining;
    fkv_cache *cache;
    freq *wait_head, *wait_tail; /* FIFO of accepted requests */
    freq *running;               /* owned by the step thread; counts under mu */
    uint64_t n_waiting, n_running, n_live;
    uint64_t recomputed, preemptions;
    int64_t pace_ns;
    uint32_t max_batch;
    uint64_t max_waiting; /* 0 = no limit of its own (the server has one) */
    uint32_t max_context;
    float logits[256];    /* the distribution tokens are drawn from (see the top) */
} fake;

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void fake_info(void *be, fkv_backend_info *out)
{
    fake *f = be;
    out->model = "fairkv-fake";
    out->vocab_size = 256;
    out->max_context = f->max_context;
    out->class_short_max = 128;
    out->class_medium_max = 512;
    out->max_running = f->max_batch;
}

static fkv_status fake_tokenize(void *be, const char *text, size_t len, int32_t *out, uint32_t cap,
                                uint32_t *n)
{
    (void)be;
    if (len > UINT32_MAX) return FKV_EINVAL;
    for (size_t i = 0; i < len && i < cap; i++) out[i] = (unsigned char)text[i];
    *n = (uint32_t)len;
    return FKV_OK;
}

static fkv_status fake_submit(void *be, const fkv_gen_request *req, const fkv_gen_sink *sink, char *err,
                              size_t errlen)
{
    fake *f = be;
    if (!req->n_prompt || !req->max_tokens) {
        snprintf(err, errlen, "empty prompt or max_tokens 0");
        return FKV_EINVAL;
    }
    freq *r = calloc(1, sizeof *r);
    int32_t *p = malloc(sizeof *p * ((size_t)req->n_prompt + req->max_tokens));
    if (!r || !p) {
        free(r);
        free(p);
        snprintf(err, errlen, "out of memory");
        return FKV_ENOMEM;
    }
    memcpy(p, req->prompt, sizeof *p * req->n_prompt);
    r->id = req->id;
    r->client = fnv1a(req->client);
    r->prompt = p;
    r->n_prompt = req->n_prompt;
    r->max_tokens = req->max_tokens;
    r->rng = req->seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (!r->rng) r->rng = 1;
    r->sink = *sink;
    r->logprobs = req->logprobs;
    r->top_logprobs = req->top_logprobs;
    pthread_mutex_lock(&f->mu);
    fkv_status st = FKV_OK;
    if (f->draining || f->stop) {
        snprintf(err, errlen, "the backend is draining");
        st = FKV_ESTATE;
    } else if (f->max_waiting && f->n_waiting >= f->max_waiting) {
        snprintf(err, errlen, "the backend queue is full (%llu waiting)", (unsigned long long)f->n_waiting);
        st = FKV_EFULL;
    } else {
        if (f->wait_tail) f->wait_tail->next = r;
        else f->wait_head = r;
        f->wait_tail = r;
        f->n_waiting++;
        f->n_live++;
        pthread_cond_signal(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    if (st != FKV_OK) {
        free(p);
        free(r);
    }
    return st;
}

static void fake_cancel(void *be, uint64_t id)
{
    fake *f = be;
    pthread_mutex_lock(&f->mu);
    for (freq *r = f->wait_head; r; r = r->next)
        if (r->id == id) r->cancelled = 1;
    for (freq *r = f->running; r; r = r->next)
        if (r->id == id) r->cancelled = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void fake_stats(void *be, fkv_backend_stats *out)
{
    fake *f = be;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&f->mu);
    out->running = f->n_running;
    out->waiting = f->n_waiting;
    out->preemptions = f->preemptions;
    out->recomputed_tokens = f->recomputed;
    pthread_mutex_unlock(&f->mu);
    out->n_quant_reasons = 0; /* the fake keeps fp16 KV: nothing is quantized */
}

static void fake_metrics(void *be, fkv_textbuf *out)
{
    fake *f = be;
    size_t len = 0;
    char *buf = fkv_backend_cache_prometheus(f->cache, &len); /* the cache is shared: it may grow meanwhile */
    if (!buf) {
        out->oom = 1;
        return;
    }
    fkv_textbuf_append(out, buf, len);
    free(buf);
}

/* Gives a request a sequence holding its context (prompt and the tokens
 * generated before a preemption): matched against the prefix cache, the
 * rest appended (mu held).  On failure the request holds no sequence. */
static fkv_status admit(fake *f, freq *r)
{
    fkv_seq_params sp;
    fkv_seq_params_default(&sp);
    sp.request_id = r->id;
    sp.client_id = r->client;
    sp.expected_tokens = r->n_prompt + r->max_tokens;
    uint32_t n = r->n_prompt + r->produced, matched = 0;
    fkv_match_info mi;
    fkv_status st = fkv_seq_create(f->cache, &sp, &r->seq);
    if (st == FKV_OK) st = fkv_seq_match_prefix(r->seq, r->prompt, n, n - 1, FKV_MATCH_DEVICE_ONLY, &mi);
    if (st == FKV_OK) matched = mi.device_tokens;
    if (st == FKV_OK) st = fkv_seq_append(r->seq, r->prompt + matched, n - matched, NULL);
    if (st != FKV_OK) {
        snprintf(r->error, sizeof r->error, "cache: %s: %s", fkv_strerror(st), fkv_last_error());
        if (r->seq) fkv_seq_free(r->seq);
        r->seq = NULL;
        return st;
    }
    if (!r->produced) r->cached = matched;
    return FKV_OK;
}

/* The step read evicted tokens: give them pages again, as an engine that
 * recomputes them would (mu held). */
static fkv_status recompute(fake *f, freq *r)
{
    fkv_range rg[16];
    size_t n = 0;
    fkv_status st = fkv_seq_missing(r->seq, rg, 16, &n);
    for (size_t i = 0; st == FKV_OK && i < n && i < 16; i++) {
        fkv_fetch_info fi;
        st = fkv_seq_fetch(r->seq, rg[i].start, rg[i].end, FKV_FETCH_RECOMPUTE, NULL, &fi);
        f->recomputed += fi.recompute_tokens;
    }
    return st;
}

static void push_running(fake *f, freq *r)
{
    r->next = f->running;
    f->running = r;
    f->n_running++;
}

/* Sends a running request back to the head of the queue, its sequence
 * freed: vLLM's recompute preemption, when the cache cannot hold the batch
 * (mu held). */
static void preempt(fake *f, freq *r)
{
    freq **pp = &f->running;
    while (*pp != r) pp = &(*pp)->next;
    *pp = r->next;
    f->n_running--;
    fkv_seq_free(r->seq);
    r->seq = NULL;
    r->next = f->wait_head;
    f->wait_head = r;
    if (!f->wait_tail) f->wait_tail = r;
    f->n_waiting++;
    f->preemptions++;
}

/* One engine step (mu held): admit, then one token for every running request. */
static void step(fake *f)
{
    while (f->wait_head && f->n_running < f->max_batch) {
        freq *r = f->wait_head;
        fkv_status st = r->cancelled ? FKV_OK : admit(f, r);
        /* no room now: wait for running requests to finish, unless none runs */
        if (st == FKV_EFULL && f->n_running) break;
        f->wait_head = r->next;
        if (!f->wait_head) f->wait_tail = NULL;
        f->n_waiting--;
        push_running(f, r);
        if (r->cancelled) r->done = 1, r->finish = FKV_FINISH_CANCELLED;
        else if (st != FKV_OK) r->done = 1, r->finish = FKV_FINISH_ERROR;
    }
    freq *next;
    for (freq *r = f->running; r; r = next) {
        next = r->next;
        if (r->done) continue;
        if (r->cancelled) {
            r->done = 1, r->finish = FKV_FINISH_CANCELLED;
            continue;
        }
        uint64_t rng = r->rng;
        uint64_t x = xorshift(&r->rng);
        int32_t tok = (x % 27) == 26 ? ' ' : (int32_t)('a' + x % 27);
        fkv_status st = fkv_seq_append(r->seq, &tok, 1, NULL);
        uint32_t missing = 0;
        if (st == FKV_OK) st = fkv_seq_touch(r->seq, &missing);
        if (st == FKV_OK && missing) st = recompute(f, r);
        if (st == FKV_EFULL && f->n_running > 1) {
            /* the token is drawn again after readmission: same text */
            r->rng = rng;
            preempt(f, r);
            continue;
        }
        if (st != FKV_OK) {
            snprintf(r->error, sizeof r->error, "cache: %s (the request does not fit the cache alone)",
                     fkv_strerror(st));
            r->done = 1, r->finish = FKV_FINISH_ERROR;
            continue;
        }
        r->prompt[r->n_prompt + r->produced] = tok;
        r->tok = tok;
        r->emit = 1;
        r->produced++;
        if (r->produced >= r->max_tokens) r->done = 1, r->finish = FKV_FINISH_LENGTH;
    }
}

/* Delivers the step's tokens and completions with mu released.  Only this
 * thread changes the running list (unlinking under mu, for cancel), so
 * reading it here unlocked is safe. */
static void deliver(fake *f)
{
    for (freq *r = f->running; r; r = r->next) {
        if (r->emit) {
            char piece = (char)r->tok;
            fkv_gen_logprobs lp;
            char tops[FKV_GEN_MAX_TOP];
            if (r->logprobs) {
                fkv_gen_logprobs_compute(f->logits, 256, r->tok, r->top_logprobs, &lp);
                lp.piece = &piece;
                lp.piece_len = 1;
                for (uint32_t j = 0; j < lp.n_top; j++) {
                    tops[j] = (char)lp.top_token[j];
                    lp.top_piece[j] = &tops[j];
                    lp.top_piece_len[j] = 1;
                }
            }
            r->sink.on_token(r->sink.ctx, r->tok, &piece, 1, r->logprobs ? &lp : NULL);
            r->emit = 0;
        }
    }
    /* unlink under mu: cancel() walks the running list */
    freq *done = NULL;
    pthread_mutex_lock(&f->mu);
    freq **pp = &f->running;
    while (*pp) {
        freq *r = *pp;
        if (!r->done) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        r->next = done;
        done = r;
        f->n_running--;
    }
    pthread_mutex_unlock(&f->mu);
    uint64_t n_done = 0;
    while (done) {
        freq *r = done;
        done = r->next;
        if (r->seq) fkv_seq_free(r->seq);
        fkv_gen_result res = {r->finish, r->n_prompt, r->produced, r->cached,
                              r->finish == FKV_FINISH_ERROR ? r->error : NULL};
        r->sink.on_done(r->sink.ctx, &res);
        free(r->prompt);
        free(r);
        n_done++;
    }
    if (n_done) {
        /* after the callbacks: drain returns only once they have run */
        pthread_mutex_lock(&f->mu);
        f->n_live -= n_done;
        pthread_cond_broadcast(&f->idle);
        pthread_mutex_unlock(&f->mu);
    }
}

static void deadline_after(struct timespec *ts, int64_t ns)
{
    clock_gettime(CLOCK_REALTIME, ts);
    int64_t t = (int64_t)ts->tv_nsec + ns;
    ts->tv_sec += (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
}

static void *step_thread(void *arg)
{
    fake *f = arg;
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        if (!f->running && !f->wait_head) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        step(f);
        pthread_mutex_unlock(&f->mu);
        deliver(f);
        pthread_mutex_lock(&f->mu);
        /* the pace between steps; a stop wakes it early */
        struct timespec ts;
        deadline_after(&ts, f->pace_ns);
        while (!f->stop && pthread_cond_timedwait(&f->cv, &f->mu, &ts) != ETIMEDOUT) {
        }
    }
    /* shutdown: everything left ends as cancelled */
    for (freq *r = f->wait_head; r; r = r->next) r->cancelled = 1;
    for (freq *r = f->running; r; r = r->next) r->cancelled = 1;
    while (f->wait_head || f->running) {
        step(f);
        pthread_mutex_unlock(&f->mu);
        deliver(f);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static fkv_status fake_drain(void *be, int64_t timeout_ns)
{
    fake *f = be;
    struct timespec ts;
    deadline_after(&ts, timeout_ns);
    pthread_mutex_lock(&f->mu);
    f->draining = 1;
    int rc = 0;
    while (f->n_live && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&f->idle, &f->mu, &ts);
    fkv_status st = f->n_live ? FKV_ESTATE : FKV_OK;
    pthread_mutex_unlock(&f->mu);
    return st;
}

static void fake_destroy(void *be)
{
    fake *f = be;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    fkv_cache_destroy(f->cache);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    pthread_cond_destroy(&f->idle);
    free(f);
}

static size_t fake_piece(void *be, int32_t token, char *out, size_t cap)
{
    (void)be;
    if (token < 0 || token > 255) return 0;
    if (cap) out[0] = (char)token;
    return 1;
}

static fkv_status fake_detokenize(void *be, const int32_t *tokens, size_t n, char *out, size_t cap, size_t *len)
{
    (void)be;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] > 255) return FKV_EINVAL;
        if (i < cap) out[i] = (char)tokens[i];
    }
    *len = n;
    return FKV_OK;
}

static const fkv_backend_ops fake_ops = {
    "fake", fake_info, fake_tokenize, fake_submit, fake_cancel, fake_stats, fake_metrics, fake_drain, fake_destroy,
    NULL, /* no chat template: chats use the default one */
    NULL, /* no special tokens */
    NULL, NULL, /* nothing to prefetch */
    fake_piece, fake_detokenize,
};

/* Parses "key=value" with an unsigned value in [lo, hi]. */
static int opt_u64(const char *opt, const char *key, uint64_t lo, uint64_t hi, uint64_t *out, int *bad)
{
    size_t kl = strlen(key);
    if (strncmp(opt, key, kl) || opt[kl] != '=') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(opt + kl + 1, &end, 10);
    if (errno || end == opt + kl + 1 || *end || v < lo || v > hi) *bad = 1;
    else *out = v;
    return 1;
}

fkv_status fkv_backend_fake_create(const char *const *opts, fkv_backend *out, char *err, size_t errlen)
{
    uint64_t pace_ms = 5, max_batch = 8, max_waiting = 0, pages = 4096, max_context = 4096;
    for (size_t i = 0; opts && opts[i]; i++) {
        int bad = 0;
        const char *o = opts[i];
        if (!opt_u64(o, "pace_ms", 0, 60000, &pace_ms, &bad) && !opt_u64(o, "max_batch", 1, 4096, &max_batch, &bad) &&
            !opt_u64(o, "max_waiting", 0, 1u << 30, &max_waiting, &bad) &&
            !opt_u64(o, "pages", 16, 1u << 24, &pages, &bad) &&
            !opt_u64(o, "max_context", 2, 1u << 24, &max_context, &bad)) {
            snprintf(err, errlen,
                     "fake backend: unknown option '%s' (known: pace_ms, max_batch, max_waiting, pages, max_context)", o);
            return FKV_EINVAL;
        }
        if (bad) {
            snprintf(err, errlen, "fake backend: bad value in '%s'", o);
            return FKV_EINVAL;
        }
    }
    fake *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "fake backend: out of memory");
        return FKV_ENOMEM;
    }
    f->pace_ns = (int64_t)pace_ms * 1000000;
    f->max_batch = (uint32_t)max_batch;
    f->max_waiting = max_waiting;
    f->max_context = (uint32_t)max_context;
    for (int i = 0; i < 256; i++) f->logits[i] = (i >= 'a' && i <= 'z') || i == ' ' ? 0.0f : -INFINITY;
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.storage = FKV_STORAGE_PHANTOM;
    cfg.capacity_pages = (uint32_t)pages;
    fkv_status st = fkv_cache_create(&cfg, &f->cache, err, errlen);
    if (st != FKV_OK) {
        free(f);
        return st;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    pthread_cond_init(&f->idle, NULL);
    if (pthread_create(&f->thread, NULL, step_thread, f)) {
        fkv_cache_destroy(f->cache);
        free(f);
        snprintf(err, errlen, "fake backend: cannot start its thread");
        return FKV_ENOMEM;
    }
    out->ops = &fake_ops;
    out->impl = f;
    return FKV_OK;
}
