/* The Llama forward pass over a batch of (sequence, new tokens, start
 * position).  All new tokens of all sequences are stacked into one
 * activation matrix, so every weight row is loaded (and, for f16, converted)
 * once per step and dotted with every token: decode of many sequences and
 * chunked prefill share the same matmul.  Attention is the only per-sequence
 * part and goes through the KV callbacks. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "model/half.h"
#include "model/model.h"
#include "model/wquant.h"

#define MAX_TASKS 64u
/* BLAS tiles: tokens x weight rows per SGEMM (see mm_blas_task) */
#define MM_TT 8u
#define MM_RB 64u

/* The engine splits work over its own thread pool and calls BLAS from each
 * worker on its own tile: BLAS itself runs one thread per call, so no
 * second set of threads competes for the cores.  OpenBLAS's pthread build
 * is the one linked (CMakeLists.txt: its buffer allocation is locked, so
 * concurrent calls are safe); its own workers, started when the library
 * loads, never get work and sleep after OpenBLAS's spin timeout. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single(void) { openblas_set_num_threads(1); }
static void fkv_blas_init(void) { pthread_once(&blas_once, blas_single); }

struct fkv_fwd {
    const fkv_llama *m;
    fkv_attn_pool *pool; /* borrowed (the engine's one thread pool); NULL: the caller's thread */
    uint32_t cap;     /* token rows the buffers hold */
    uint32_t *pos;    /* [cap] position of each stacked token */
    float *x;         /* [cap][dim] residual stream */
    float *xb;        /* [cap][dim] normed input / branch output */
    float *q, *att;   /* [cap][n_heads*head_dim] */
    float *k, *v;     /* [cap][n_kv_heads*head_dim] */
    float *hb, *hb2;  /* [cap][hidden] */
    float *lg;        /* [lg_cap][n_vocab] logits of the rows that want them */
    uint32_t lg_cap;
    float *rowbuf;    /* [MAX_TASKS][max_cols]: f16 rows converted to f32, per task */
    const float *h2f; /* f16 -> f32 table */
    uint32_t max_cols;
    float *scratch;       /* BLAS path, per pool thread: [MM_RB][max_cols] converted rows, */
    size_t scratch_per;   /* [MM_TT][max_cols] padded tokens, [MM_TT][MM_RB] their results */
    fkv_matmul_mode matmul;
};

fkv_matmul_mode fkv_matmul_mode_env(void)
{
    const char *v = getenv("FKV_MATMUL");
    if (v && !strcmp(v, "blas")) return FKV_MATMUL_BLAS;
    if (v && !strcmp(v, "loops")) return FKV_MATMUL_LOOPS;
    if (v && *v && strcmp(v, "auto"))
        fprintf(stderr, "fairkv: FKV_MATMUL='%s' is not auto, blas or loops; using auto\n", v);
    return FKV_MATMUL_AUTO;
}

fkv_status fkv_fwd_create(const fkv_llama *m, fkv_attn_pool *pool, fkv_fwd **out)
{
    *out = NULL;
    fkv_fwd *f = calloc(1, sizeof *f);
    if (!f) return FKV_ENOMEM;
    f->m = m;
    f->pool = pool;
    uint32_t qd = m->hp.n_heads * m->hp.head_dim;
    f->max_cols = m->hp.dim > m->hp.hidden ? m->hp.dim : m->hp.hidden;
    if (qd > f->max_cols) f->max_cols = qd; /* attn_output's input when key_length != dim / heads */
    f->rowbuf = malloc((size_t)MAX_TASKS * f->max_cols * sizeof(float));
    f->h2f = fkv_h2f_table();
    fkv_blas_init();
    f->matmul = fkv_matmul_mode_env();
    f->scratch_per = ((size_t)(MM_RB + MM_TT) * f->max_cols + (size_t)MM_TT * MM_RB + 15) & ~(size_t)15;
    f->scratch = malloc(f->scratch_per * fkv_attn_pool_threads(pool) * sizeof(float));
    if (!f->rowbuf || !f->scratch) {
        fkv_fwd_destroy(f);
        return FKV_ENOMEM;
    }
    *out = f;
    return FKV_OK;
}

void fkv_fwd_destroy(fkv_fwd *f)
{
    if (!f) return;
    free(f->pos);
    free(f->x);
    free(f->xb);
    free(f->q);
    free(f->att);
    free(f->k);
    free(f->v);
    free(f->hb);
    free(f->hb2);
    free(f->lg);
    free(f->rowbuf);
    free(f->scratch);
    free(f);
}

static int grow(float **p, size_t n)
{
    float *q = realloc(*p, n * sizeof *q);
    if (!q) return -1;
    *p = q;
    return 0;
}

static fkv_status reserve(fkv_fwd *f, uint32_t T)
{
    if (T <= f->cap) return FKV_OK;
    const fkv_llama_hparams *hp = &f->m->hp;
    size_t t = T, qd = (size_t)hp->n_heads * hp->head_dim, kvd = (size_t)hp->n_kv_heads * hp->head_dim;
    uint32_t *pos = realloc(f->pos, t * sizeof *pos);
    if (!pos) return FKV_ENOMEM;
    f->pos = pos;
    if (grow(&f->x, t * hp->dim) || grow(&f->xb, t * hp->dim) || grow(&f->q, t * qd) || grow(&f->att, t * qd) ||
        grow(&f->k, t * kvd) || grow(&f->v, t * kvd) || grow(&f->hb, t * hp->hidden) ||
        grow(&f->hb2, t * hp->hidden))
        return FKV_ENOMEM;
    f->cap = T;
    return FKV_OK;
}

/* Row r of W as f32: a pointer into the weights (f32) or into buf
 * (f16, Q8_0, Q4_0 converted). */
static const float *wrow(const fkv_wmat *w, uint32_t r, float *buf, const float *h2f)
{
    if (w->type == FKV_GGML_F32) return (const float *)w->data + (size_t)r * w->cols;
    if (w->type == FKV_GGML_F16) {
        const uint16_t *h = (const uint16_t *)w->data + (size_t)r * w->cols;
        for (uint32_t i = 0; i < w->cols; i++) buf[i] = h2f[h[i]];
        return buf;
    }
    fkv_wq_row_f32(w->type, (const uint8_t *)w->data + (size_t)r * fkv_wq_row_bytes(w->type, w->cols), w->cols, buf);
    return buf;
}

/* Eight independent partial sums: vectorisable without -ffast-math, and the
 * summation order is fixed, so results do not depend on batching or threads. */
static float dot(const float *a, const float *b, uint32_t n)
{
    float s[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[i % 8] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* dot() of one weight row with four inputs: the row is read once for four
 * tokens.  Every (row, token) result is computed exactly as dot() does,
 * lane by lane, so how tokens are grouped changes no bit. */
static void dot_x4(const float *w, const float *x0, const float *x1, const float *x2, const float *x3, uint32_t n,
                   float *o0, float *o1, float *o2, float *o3)
{
    float a[8] = {0}, b[8] = {0}, c[8] = {0}, d[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float wv = w[i + j];
            a[j] += wv * x0[i + j];
            b[j] += wv * x1[i + j];
            c[j] += wv * x2[i + j];
            d[j] += wv * x3[i + j];
        }
    for (; i < n; i++) {
        a[i % 8] += w[i] * x0[i];
        b[i % 8] += w[i] * x1[i];
        c[i % 8] += w[i] * x2[i];
        d[i % 8] += w[i] * x3[i];
    }
    *o0 = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    *o1 = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
    *o2 = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
    *o3 = ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

typedef struct mm_job {
    fkv_fwd *f;
    const fkv_wmat *w;
    const float *x; /* [T][w->cols] */
    float *y;       /* [T][w->rows] */
    uint32_t T, n_tasks;
    uint32_t n_rb, tiles_per_task; /* BLAS path: row blocks, token tiles per task */
} mm_job;

static void mm_task(void *ctx, size_t task, unsigned thread)
{
    (void)thread;
    mm_job *j = ctx;
    const fkv_wmat *w = j->w;
    uint32_t r0 = (uint32_t)((uint64_t)w->rows * task / j->n_tasks);
    uint32_t r1 = (uint32_t)((uint64_t)w->rows * (task + 1) / j->n_tasks);
    float *buf = j->f->rowbuf + (size_t)task * j->f->max_cols;
    const float *h2f = j->f->h2f;
    for (uint32_t r = r0; r < r1; r++) {
        const float *wr = wrow(w, r, buf, h2f);
        size_t R = w->rows, C = w->cols;
        uint32_t t = 0;
        for (; t + 4 <= j->T; t += 4) {
            const float *x = j->x + (size_t)t * C;
            float *y = j->y + (size_t)t * R + r;
            dot_x4(wr, x, x + C, x + 2 * C, x + 3 * C, w->cols, y, y + R, y + 2 * R, y + 3 * R);
        }
        for (; t < j->T; t++) j->y[(size_t)t * R + r] = dot(wr, j->x + (size_t)t * C, w->cols);
    }
}

/* The BLAS path.  Every product is one SGEMM of a fixed shape: MM_TT
 * tokens (the last tile zero-padded) by MM_RB weight rows (the last block
 * of a matrix shorter) by all columns.  A (token, row) result then goes
 * through the same kernel with the same operands whatever the batch, the
 * token's place in it and the thread count, so results stay independent
 * of batching (recomputed K/V equal the first computation's, bit for bit)
 * while the kernel does the work; one SGEMM over the whole batch would
 * pick other blockings and tail kernels for other batch sizes.  f16 and
 * quantized rows are converted to f32 one row block at a time. */
static void mm_blas_task(void *ctx, size_t task, unsigned thread)
{
    mm_job *j = ctx;
    fkv_fwd *f = j->f;
    const fkv_wmat *w = j->w;
    uint32_t rb = (uint32_t)(task % j->n_rb), tg = (uint32_t)(task / j->n_rb);
    uint32_t r0 = rb * MM_RB, m = w->rows - r0 < MM_RB ? w->rows - r0 : MM_RB;
    uint32_t C = w->cols, R = w->rows;
    float *scr = f->scratch + (size_t)thread * f->scratch_per;
    float *wb = scr, *xp = wb + (size_t)MM_RB * f->max_cols, *yp = xp + (size_t)MM_TT * f->max_cols;
    const float *wf;
    if (w->type == FKV_GGML_F32) {
        wf = (const float *)w->data + (size_t)r0 * C;
    } else {
        for (uint32_t r = 0; r < m; r++) {
            const float *src = wrow(w, r0 + r, wb + (size_t)r * C, f->h2f);
            if (src != wb + (size_t)r * C) memcpy(wb + (size_t)r * C, src, (size_t)C * sizeof(float));
        }
        wf = wb;
    }
    uint32_t t0 = tg * j->tiles_per_task * MM_TT;
    uint32_t t1 = t0 + j->tiles_per_task * MM_TT;
    if (t1 > j->T) t1 = j->T;
    for (uint32_t t = t0; t < t1; t += MM_TT) {
        if (t + MM_TT <= j->T) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, MM_TT, (int)m, (int)C, 1.0f, j->x + (size_t)t * C,
                        (int)C, wf, (int)C, 0.0f, j->y + (size_t)t * R + r0, (int)R);
            continue;
        }
        uint32_t n = j->T - t;
        memcpy(xp, j->x + (size_t)t * C, (size_t)n * C * sizeof(float));
        memset(xp + (size_t)n * C, 0, (size_t)(MM_TT - n) * C * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, MM_TT, (int)m, (int)C, 1.0f, xp, (int)C, wf, (int)C,
                    0.0f, yp, MM_RB);
        for (uint32_t i = 0; i < n; i++)
            memcpy(j->y + (size_t)(t + i) * R + r0, yp + (size_t)i * MM_RB, (size_t)m * sizeof(float));
    }
}

/* Whether W goes through BLAS: the choice depends on the mode alone (never
 * on the batch), so a token's result does not depend on what it was
 * batched with.  The dot loops were measured slower than the tiles even for
 * stories260K's 64 x 64 matrices and single-token decode (docs/EVALUATION.md,
 * the engine's BLAS section), so auto is BLAS; FKV_MATMUL=loops keeps them
 * for comparison. */
static int use_blas(const fkv_fwd *f) { return f->matmul != FKV_MATMUL_LOOPS; }

/* y[T][rows] = x[T][cols] . W^T, split across the pool. */
static void matmul(fkv_fwd *f, const fkv_wmat *w, const float *x, float *y, uint32_t T)
{
    uint32_t threads = f->pool ? fkv_attn_pool_threads(f->pool) : 1;
    if (use_blas(f)) {
        uint32_t n_rb = (w->rows + MM_RB - 1) / MM_RB, tiles = (T + MM_TT - 1) / MM_TT;
        /* enough tasks to balance the threads; each task a run of tiles of one row block */
        uint32_t groups = (4 * threads + n_rb - 1) / n_rb;
        if (groups > tiles) groups = tiles;
        if (groups < 1) groups = 1;
        uint32_t per = (tiles + groups - 1) / groups;
        groups = (tiles + per - 1) / per;
        mm_job j = {f, w, x, y, T, n_rb * groups, n_rb, per};
        fkv_attn_pool_run(f->pool, j.n_tasks, mm_blas_task, &j);
        return;
    }
    uint32_t n = threads * 4;
    if (n > MAX_TASKS) n = MAX_TASKS;
    if (n > w->rows) n = w->rows;
    mm_job j = {f, w, x, y, T, n, 0, 0};
    fkv_attn_pool_run(f->pool, n, mm_task, &j);
}

static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float s = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * s * w[i];
}

/* llama.cpp's "normal" RoPE for llama: rotates adjacent pairs (x[2i],
 * x[2i+1]) of each head by pos * base^(-2i/rope_dim); the GGUF converter
 * permutes Q/K rows so this pairing matches the checkpoint's rotate-half. */
static void rope(float *x, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, const float *inv_freq, uint32_t pos)
{
    for (uint32_t i = 0; i < rope_dim / 2; i++) {
        double a = (double)pos * inv_freq[i];
        float c = (float)cos(a), s = (float)sin(a);
        for (uint32_t h = 0; h < n_heads; h++) {
            float *p = x + (size_t)h * head_dim + 2 * i;
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
    }
}

static fkv_status check_batch(const fkv_llama *m, const fkv_fwd_seq *b, uint32_t n, uint32_t *T, char *err,
                              size_t errlen)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (!b[s].n_tokens || !b[s].tokens) {
            if (err) snprintf(err, errlen, "batch[%u]: no tokens", s);
            return FKV_EINVAL;
        }
        if ((uint64_t)b[s].start_pos + b[s].n_tokens > m->hp.ctx_len) {
            if (err) snprintf(err, errlen, "batch[%u]: positions up to %llu exceed the context length %u", s,
                              (unsigned long long)b[s].start_pos + b[s].n_tokens, m->hp.ctx_len);
            return FKV_EINVAL;
        }
        for (uint32_t i = 0; i < b[s].n_tokens; i++)
            if (b[s].tokens[i] < 0 || (uint32_t)b[s].tokens[i] >= m->hp.n_vocab) {
                if (err) snprintf(err, errlen, "batch[%u]: token %u is %d, outside [0, %u)", s, i, b[s].tokens[i],
                                  m->hp.n_vocab);
                return FKV_EINVAL;
            }
        total += b[s].n_tokens;
    }
    if (!n || total > (1u << 20)) {
        if (err) snprintf(err, errlen, "batch: %llu tokens (1 .. 2^20 allowed)", (unsigned long long)total);
        return FKV_EINVAL;
    }
    *T = (uint32_t)total;
    return FKV_OK;
}

static fkv_status attention(fkv_fwd *f, const fkv_kv_ops *kv, const fkv_fwd_geom *g, uint32_t l, fkv_fwd_seq *b,
                            uint32_t n, char *err, size_t errlen)
{
    size_t qd = (size_t)g->n_heads * g->head_dim, kvd = (size_t)g->n_kv_heads * g->head_dim;
    size_t off = 0;
    for (uint32_t s = 0; s < n; s++) {
        fkv_status st = kv->store(kv->ctx, g, l, &b[s], f->k + off * kvd, f->v + off * kvd);
        if (!st) st = kv->attend(kv->ctx, g, l, &b[s], f->q + off * qd, f->att + off * qd);
        if (st) {
            if (err) snprintf(err, errlen, "layer %u, batch[%u]: kv callback failed: %s", l, s, fkv_strerror(st));
            return st;
        }
        off += b[s].n_tokens;
    }
    return FKV_OK;
}

fkv_status fkv_llama_forward(fkv_fwd *f, const fkv_kv_ops *kv, fkv_fwd_seq *b, uint32_t n, char *err, size_t errlen)
{
    const fkv_llama *m = f->m;
    const fkv_llama_hparams *hp = &m->hp;
    uint32_t T;
    fkv_status st = check_batch(m, b, n, &T, err, errlen);
    if (st) return st;
    if ((st = reserve(f, T))) return st;
    fkv_fwd_geom g = fkv_llama_geom(m);
    size_t dim = hp->dim, qd = (size_t)hp->n_heads * hp->head_dim, kvd = (size_t)hp->n_kv_heads * hp->head_dim;
    /* stack the tokens; embed */
    uint32_t t = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; i < b[s].n_tokens; i++, t++) {
            f->pos[t] = b[s].start_pos + i;
            const float *e = wrow(&m->tok_embd, (uint32_t)b[s].tokens[i], f->rowbuf, f->h2f);
            memcpy(f->x + t * dim, e, dim * sizeof(float));
        }
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        const fkv_llama_layer *L = &m->layers[l];
        for (t = 0; t < T; t++) rmsnorm(f->xb + t * dim, f->x + t * dim, L->attn_norm, hp->dim, hp->eps);
        matmul(f, &L->wq, f->xb, f->q, T);
        matmul(f, &L->wk, f->xb, f->k, T);
        matmul(f, &L->wv, f->xb, f->v, T);
        for (t = 0; t < T; t++) {
            rope(f->q + t * qd, hp->n_heads, hp->head_dim, hp->rope_dim, m->rope_inv_freq, f->pos[t]);
            rope(f->k + t * kvd, hp->n_kv_heads, hp->head_dim, hp->rope_dim, m->rope_inv_freq, f->pos[t]);
        }
        if ((st = attention(f, kv, &g, l, b, n, err, errlen))) return st;
        matmul(f, &L->wo, f->att, f->xb, T);
        for (size_t i = 0; i < (size_t)T * dim; i++) f->x[i] += f->xb[i];
        for (t = 0; t < T; t++) rmsnorm(f->xb + t * dim, f->x + t * dim, L->ffn_norm, hp->dim, hp->eps);
        matmul(f, &L->w_gate, f->xb, f->hb, T);
        matmul(f, &L->w_up, f->xb, f->hb2, T);
        for (size_t i = 0; i < (size_t)T * hp->hidden; i++) {
            float a = f->hb[i];
            f->hb[i] = a / (1.0f + expf(-a)) * f->hb2[i]; /* SwiGLU: silu(gate) * up */
        }
        matmul(f, &L->w_down, f->hb, f->xb, T);
        for (size_t i = 0; i < (size_t)T * dim; i++) f->x[i] += f->xb[i];
    }
    /* final norm and head, only for the rows someone wants */
    uint32_t R = 0;
    t = 0;
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t i = 0; i < b[s].n_tokens; i++, t++) {
            int want = b[s].logits && (b[s].logits_all || i + 1 == b[s].n_tokens);
            if (want) rmsnorm(f->xb + (size_t)R++ * dim, f->x + (size_t)t * dim, m->output_norm, hp->dim, hp->eps);
        }
    }
    if (!R) return FKV_OK;
    if (R > f->lg_cap) { /* sized by the rows asked for: a long prefill usually wants one */
        if (grow(&f->lg, (size_t)R * hp->n_vocab)) return FKV_ENOMEM;
        f->lg_cap = R;
    }
    matmul(f, &m->output, f->xb, f->lg, R);
    R = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (!b[s].logits) continue;
        uint32_t rows = b[s].logits_all ? b[s].n_tokens : 1;
        memcpy(b[s].logits, f->lg + (size_t)R * hp->n_vocab, (size_t)rows * hp->n_vocab * sizeof(float));
        R += rows;
    }
    return FKV_OK;
}
