/* `fairkv generate`: the prompt runs as one request (n samples)
 * through the engine over a fairkv cache of --kv-budget bytes.  One sample
 * streams its text as it is generated; several are printed at the end, one
 * after another (or, with --ids, their token ids, one line each). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "generate_cli.h"
#include "engine/engine.h"

typedef struct sample_text {
    char *buf;
    size_t len, cap;
    int ended; /* an end-of-generation token was met */
    size_t n_ids; /* --ids: ids written */
} sample_text;

typedef struct gen_ctx {
    const fkv_tokenizer *tok;
    sample_text *s; /* [n] */
    long n;
    int stream;
    int ids;            /* --ids: token ids instead of text */
    FILE *logits;       /* --logits: sample 0's logits, or NULL */
    int logits_failed;  /* a write to it failed */
    size_t generated;
    int64_t first_ns; /* when the first token came (the prompt's prefill done) */
    int failed; /* samples that ended with an error (rejected: larger than the cache) */
} gen_ctx;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Streams the bytes, or keeps them for the end (several samples). */
static void emit(gen_ctx *g, sample_text *t, const char *p, size_t n)
{
    if (g->stream) {
        fwrite(p, 1, n, stdout);
        fflush(stdout);
        return;
    }
    if (t->len + n + 1 > t->cap) {
        size_t nc = (t->cap ? t->cap * 2 : 256) + n;
        char *q = realloc(t->buf, nc);
        if (!q) return; /* the text is cut; generation goes on */
        t->buf = q;
        t->cap = nc;
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
    t->buf[t->len] = 0;
}

static void on_token(void *ctx, uint64_t id, uint32_t sample, int32_t token, const float *logits, uint32_t n_vocab,
                     unsigned flags)
{
    (void)id;
    gen_ctx *g = ctx;
    if ((long)sample >= g->n) return;
    sample_text *t = &g->s[sample];
    if (!g->generated++) g->first_ns = now_ns();
    if (t->ended) return;
    if (sample == 0 && g->logits && fwrite(logits, sizeof *logits, n_vocab, g->logits) != n_vocab)
        g->logits_failed = 1;
    int eog = (flags & FKV_ENGINE_TOKEN_STOP) != 0;
    char piece[1100];
    size_t pl;
    if (g->ids) {
        /* the end-of-generation token too: a comparison sees where it stopped */
        pl = (size_t)snprintf(piece, sizeof piece, "%s%d", t->n_ids++ ? " " : "", (int)token);
    } else {
        if (eog) {
            t->ended = 1;
            return;
        }
        pl = fkv_tok_piece(g->tok, token, piece, sizeof piece);
        if (pl >= sizeof piece) pl = sizeof piece - 1;
    }
    emit(g, t, piece, pl);
    if (eog) t->ended = 1;
}

static void on_done(void *ctx, uint64_t id, uint32_t sample, fkv_status st, uint32_t n_generated)
{
    (void)id;
    gen_ctx *g = ctx;
    if (st == FKV_OK) return;
    g->failed++;
    fprintf(stderr, "fairkv generate: sample %u ended after %u tokens: %s%s\n", sample, n_generated,
            fkv_strerror(st), st == FKV_EFULL ? " (the request does not fit in --kv-budget)" : "");
}

int fkv__generate_engine(const gen_opts *o, const fkv_llama *m, const fkv_tokenizer *tok, const int32_t *ids,
                         size_t n_prompt)
{
    fkv_engine_config c;
    fkv_engine_config_default(&c);
    c.kv_budget_bytes = (uint64_t)o->kv_budget;
    if (!o->kv_budget) {
        /* not given: 64 MiB, or twice what every sample's prompt and tokens
         * need if more (page rounding and the forked samples' copies fit) */
        const fkv_llama_hparams *hp = &m->hp;
        uint64_t per_tok = (uint64_t)hp->n_layers * hp->n_kv_heads * hp->head_dim * 2 * (o->kv_dtype == FKV_F16 ? 2 : 4);
        uint64_t need = 2 * per_tok * ((uint64_t)n_prompt + (uint64_t)o->max_tokens + 64) * (uint64_t)o->n;
        c.kv_budget_bytes = need > (64ull << 20) ? need : 64ull << 20;
    }
    c.kv_dtype = o->kv_dtype;
    c.quant_mode = o->quant;
    c.quant_hot_tokens = (uint32_t)o->quant_hot;
    c.quant_dtype = o->quant_dtype;
    c.quant_warm_tokens = (uint32_t)o->quant_warm;
    c.sparsity = o->sparsity;
    c.sparsity_budget = (uint32_t)o->sparsity_budget;
    c.n_threads = (uint32_t)o->threads;
    c.max_batch_tokens = (uint32_t)o->chunk;
    c.max_running = (uint32_t)(o->n > 16 ? o->n : 16);
    c.ref_attention = o->ref_attention;
    char err[400] = "";
    fkv_engine *e = NULL;
    fkv_status st = fkv_engine_create(m, &c, &e, err, sizeof err);
    if (st) {
        fprintf(stderr, "fairkv generate: engine: %s (%s)\n", err[0] ? err : "failed", fkv_strerror(st));
        return 1;
    }
    gen_ctx g = {tok, calloc((size_t)o->n, sizeof(sample_text)), o->n, o->n == 1, o->ids, o->logits_file, 0, 0, 0, 0};
    if (!g.s) {
        fkv_engine_destroy(e);
        return 1;
    }
    if (!o->ids) fputs(o->prompt, stdout);
    int64_t t0 = now_ns();
    if (o->max_tokens > 0) {
        fkv_engine_request rq;
        memset(&rq, 0, sizeof rq);
        rq.prompt = ids;
        rq.n_prompt = (uint32_t)n_prompt;
        rq.max_tokens = (uint32_t)o->max_tokens;
        rq.temperature = (float)o->temperature;
        rq.top_p = (float)o->top_p;
        rq.seed = o->seed;
        rq.n = (uint32_t)o->n;
        /* every sample ends at the first end-of-generation token it draws */
        rq.n_stop_tokens = fkv_tok_eog_ids(tok, rq.stop_tokens, FKV_ENGINE_MAX_STOP);
        rq.on_token = on_token;
        rq.on_done = on_done;
        rq.ctx = &g;
        if (!(st = fkv_engine_submit(e, &rq, NULL))) st = fkv_engine_run_until_idle(e);
    }
    int64_t t1 = now_ns();
    if (g.stream || !o->ids) printf("\n"); /* ends the streamed text or ids */
    for (long i = 0; i < o->n && o->n > 1; i++)
        if (o->ids) printf("%s\n", g.s[i].buf ? g.s[i].buf : "");
        else printf("--- sample %ld ---\n%s%s\n", i, o->prompt, g.s[i].buf ? g.s[i].buf : "");
    if (g.logits_failed) fprintf(stderr, "fairkv generate: --logits: write to '%s' failed\n", o->logits_path);
    double sec = (double)(t1 - t0) / 1e9;
    fkv_engine_stats s;
    fkv_engine_stats_get(e, &s);
    fprintf(stderr, "engine: prompt %zu tokens, %zu generated (%ld samples) in %.3f s (%.1f tok/s); %ld threads\n",
            n_prompt, g.generated, o->n, sec, sec > 0 ? (double)g.generated / sec : 0.0, o->threads);
    /* the prompt's prefill up to the first token, then the rest (the
     * first token is drawn from the prefill's logits, so "generated" counts
     * it as the plain path's line did: a script reads one format) */
    if (g.generated) {
        double pre = (double)(g.first_ns - t0) / 1e9, dec = (double)(t1 - g.first_ns) / 1e9;
        fprintf(stderr,
                "prompt %zu tokens in %.3f s (%.1f tok/s); generated %zu tokens in %.3f s (%.1f tok/s); %ld threads\n",
                n_prompt, pre, pre > 0 ? (double)n_prompt / pre : 0.0, g.generated, dec,
                dec > 0 ? (double)g.generated / dec : 0.0, o->threads);
    }
    if (o->stats)
        fprintf(stderr,
                "engine: %" PRIu64 " steps, %" PRIu64 " prefill + %" PRIu64 " decode + %" PRIu64
                " recomputed tokens, %" PRIu64 " preemptions, %" PRIu64 " evicted pages, %" PRIu64
                " prefix-hit tokens, %" PRIu64 " quantized-chunk reads, %" PRIu64 " dropped tokens, peak %u pages\n",
                s.steps, s.prefill_tokens, s.decode_tokens, s.recomputed_tokens, s.preemptions, s.cache.evicted_pages,
                s.cache.prefix_hit_tokens, s.quant_chunk_reads, s.dropped_tokens, s.peak_pages_used);
    if (st) fprintf(stderr, "fairkv generate: engine: %s (%s)\n", fkv_engine_last_error(e), fkv_strerror(st));
    for (long i = 0; i < o->n; i++) free(g.s[i].buf);
    free(g.s);
    fkv_engine_destroy(e);
    return st || g.failed || g.logits_failed ? 1 : 0;
}
