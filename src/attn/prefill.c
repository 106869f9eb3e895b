/* Prefill attention: many query tokens of one sequence, causal.  Work items
 * are (kv head, block of QB queries); a block's rows are its queries times
 * the kv head's query heads, so each K/V run is decoded once for QB*r rows.
 * Query i at position q_pos0+i sees the tokens at positions <= q_pos0+i:
 * within a run that is a prefix, so the mask is a per-row valid count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/internal.h"
#include "attn/thread_pool.h"

#define QB 16u /* queries per work item */

typedef struct pctx {
    fkv__kvctx x;
    const fkv_attn_seq *s;
    uint32_t n_heads, r, q_pos0, n_q, n_qb;
    const float *q;
    float *out;
    float scale;
    fkv_attn_pool *pool;
    size_t tfloats;
} pctx;

static void run_block(void *arg, size_t i, unsigned thread)
{
    pctx *c = arg;
    const size_t D = c->x.g->head_dim, r = c->r, M = QB * r;
    const uint32_t kvh = (uint32_t)(i / c->n_qb), i0 = (uint32_t)(i % c->n_qb) * QB;
    const uint32_t nq = c->n_q - i0 < QB ? c->n_q - i0 : QB;
    const size_t rows = nq * r;
    float *mem = fkv__pool_buf(c->pool, 1 + thread, c->tfloats * sizeof(float));
    fkv__tscratch ts;
    fkv__tscratch_init(&ts, mem, M, D);
    float *qt = mem + fkv__tscratch_floats(M, D), *acc = qt + M * D, *m = acc + M * D, *l = m + M;
    uint32_t *lim = (uint32_t *)(l + M);
    for (uint32_t a = 0; a < nq; a++)
        for (size_t j = 0; j < r; j++)
            memcpy(qt + (a * r + j) * D, c->q + (((size_t)i0 + a) * c->n_heads + kvh * r + j) * D, D * sizeof(float));
    memset(acc, 0, rows * D * sizeof *acc);
    for (size_t j = 0; j < rows; j++) m[j] = -INFINITY, l[j] = 0.0f;
    const uint64_t last = (uint64_t)c->q_pos0 + i0 + nq - 1;
    const fkv_attn_seq *s = c->s;
    for (size_t ci = 0; ci < s->n_chunks; ci++) {
        const fkv_chunk_view *ch = s->chunks[ci];
        if (ch->start > last) break;
        if (s->keep && !s->keep[ci]) continue;
        for (uint32_t t0 = 0; t0 < ch->n_tokens;) {
            uint64_t pos0 = (uint64_t)ch->start + t0;
            if (pos0 > last) break;
            uint32_t T = fkv__run_len(c->x.g, ch, t0, 1);
            for (uint32_t a = 0; a < nq; a++) {
                uint64_t qp = (uint64_t)c->q_pos0 + i0 + a;
                uint32_t v = qp < pos0 ? 0u : (qp - pos0 + 1 < T ? (uint32_t)(qp - pos0 + 1) : T);
                for (size_t j = 0; j < r; j++) lim[a * r + j] = v;
            }
            fkv__attend_run(&c->x, ch, kvh, t0, T, qt, rows, lim, c->scale, m, l, acc, NULL, &ts);
            t0 += T;
        }
    }
    for (uint32_t a = 0; a < nq; a++)
        for (size_t j = 0; j < r; j++) {
            const float *src = acc + (a * r + j) * D;
            float L = l[a * r + j];
            float *o = c->out + (((size_t)i0 + a) * c->n_heads + kvh * r + j) * D;
            for (size_t d = 0; d < D; d++) o[d] = L > 0.0f ? src[d] / L : 0.0f;
        }
}

fkv_status fkv_attn_prefill(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                            const fkv_attn_seq *seq, uint32_t q_pos0, uint32_t n_q,
                            const float *q, float *out, float scale, char *err, size_t errlen)
{
    static const char fn[] = "fkv_attn_prefill";
    fkv_status st = fkv__check_kv(fn, kv, n_heads, err, errlen);
    if (st) return st;
    if (!n_q) return FKV_OK;
    if (!seq || !q || !out) {
        fkv__err(err, errlen, "%s: seq, q and out must be non-NULL", fn);
        return FKV_EINVAL;
    }
    if ((st = fkv__check_seq(fn, kv, seq, 0, err, errlen))) return st;
    uint64_t end = seq->n_chunks ? (uint64_t)seq->chunks[seq->n_chunks - 1]->start +
                                       seq->chunks[seq->n_chunks - 1]->n_tokens : 0;
    if (end < (uint64_t)q_pos0 + n_q) {
        fkv__err(err, errlen, "%s: the chunk table ends at %llu, before the last query position %llu "
                 "(append the new tokens' K/V first)", fn, (unsigned long long)end,
                 (unsigned long long)q_pos0 + n_q - 1);
        return FKV_EINVAL;
    }
    const fkv_kv_geom *g = kv->geom;
    const size_t D = g->head_dim, r = n_heads / g->n_kv_heads, M = QB * r;
    fkv_attn_pool *own = NULL;
    if (!pool) {
        if (fkv_attn_pool_create(1, &own)) return FKV_ENOMEM;
        pool = own;
    }
    pctx c = {{g, kv->layer, kv->k, kv->v, fkv__stride(g), fkv__simd()}, seq, n_heads, (uint32_t)r,
              q_pos0, n_q, (n_q + QB - 1) / QB, q, out, scale, pool, 0};
    /* tiles + logits, then q tile, acc [M][D], m, l, lim [M] */
    c.tfloats = fkv__tscratch_floats(M, D) + 2 * M * D + 3 * M;
    for (unsigned t = 0; t < fkv_attn_pool_threads(pool); t++)
        if (!fkv__pool_buf(pool, 1 + t, c.tfloats * sizeof(float))) {
            fkv_attn_pool_destroy(own);
            fkv__err(err, errlen, "%s: out of memory for scratch", fn);
            return FKV_ENOMEM;
        }
    fkv_attn_pool_run(pool, (size_t)g->n_kv_heads * c.n_qb, run_block, &c);
    fkv_attn_pool_destroy(own);
    return FKV_OK;
}
