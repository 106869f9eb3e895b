/* Decode attention: one query token per sequence over its chunk table.
 *
 * Work is split FlashDecoding-style: each sequence's kept chunks are cut
 * into ranges of about equal token counts; a work item is (sequence, range)
 * and computes, for every query head, an online-softmax partial (max m, sum
 * l, unnormalized output).  All heads go in one item because a token's row
 * holds every kv head side by side: one head alone would read 1/n_kv_heads
 * of each row at a row stride, which defeats the hardware prefetcher.
 * A second pass per sequence merges the ranges:
 *     M = max_s m_s,  L = sum_s l_s e^(m_s - M),  out = sum_s acc_s e^(m_s - M) / L
 * which equals softmax attention over the union exactly (up to rounding).
 * The number of ranges grows with the work per thread, so a single long
 * sequence still spreads over all threads while short batches do not pay
 * for merges they do not need. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/internal.h"
#include "attn/thread_pool.h"

/* fewest tokens per range: below this a merge costs more than it spreads */
#define MIN_SPLIT_TOKENS 256u

typedef struct item {
    uint32_t seq;
    uint32_t c0, c1; /* chunk range [c0, c1) */
} item;

typedef struct dctx {
    fkv__kvctx x;
    const fkv_attn_seq *seqs;
    uint32_t n_heads, r;
    const float *q;
    float *out;
    float scale;
    item *items;
    size_t *item_off;  /* [n_seqs] first item of each sequence */
    uint32_t *splits;  /* [n_seqs] ranges of each sequence */
    float *partial;    /* [n_items][n_heads][D + 2]: acc [n_heads][D], then m, l [n_heads] */
    size_t *stat_off;  /* [n_seqs] offset of the sequence's chunk stats (h2o) */
    float *stats;      /* [chunk][n_heads][2]: (sum, m) of each chunk */
    fkv_attn_pool *pool;
    size_t tfloats;
} dctx;

static float *tbuf(dctx *c, unsigned thread)
{
    /* the per-thread buffers were grown before dispatch */
    return fkv__pool_buf(c->pool, 1 + thread, c->tfloats * sizeof(float));
}

/* Next run after (ci, t0+T) among the kept chunks of [ci, c1), for the
 * prefetch; returns 0 if none. */
static int next_run(const fkv_attn_seq *s, uint32_t c1, uint32_t *ci, uint32_t *t0)
{
    if (*t0 < s->chunks[*ci]->n_tokens) return 1;
    for ((*ci)++; *ci < c1; (*ci)++)
        if ((!s->keep || s->keep[*ci]) && s->chunks[*ci]->n_tokens) {
            *t0 = 0;
            return 1;
        }
    return 0;
}

/* One range of one sequence, all kv heads: the K/V rows of a token hold
 * every head side by side ([n_kv_heads][head_dim]), so walking runs in the
 * outer loop and heads inside reads each page front to back. */
static void run_item(void *arg, size_t i, unsigned thread)
{
    dctx *c = arg;
    const item *it = &c->items[i];
    const fkv_attn_seq *s = &c->seqs[it->seq];
    const size_t D = c->x.g->head_dim, r = c->r, NH = c->n_heads, H = c->x.g->n_kv_heads;
    float *mem = tbuf(c, thread);
    fkv__tscratch ts;
    fkv__tscratch_init(&ts, mem, r, D);
    float *csum = mem + fkv__tscratch_floats(r, D); /* [n_heads] */
    float *acc = c->partial + i * NH * (D + 2), *m = acc + NH * D, *l = m + NH;
    const float *q = c->q + (size_t)it->seq * NH * D;
    memset(acc, 0, NH * D * sizeof *acc);
    for (size_t j = 0; j < NH; j++) m[j] = -INFINITY, l[j] = 0.0f;
    for (uint32_t ci = it->c0; ci < it->c1; ci++) {
        if (s->keep && !s->keep[ci]) continue;
        const fkv_chunk_view *ch = s->chunks[ci];
        if (s->mass) memset(csum, 0, NH * sizeof *csum);
        for (uint32_t t0 = 0; t0 < ch->n_tokens;) {
            uint32_t T = fkv__run_len(c->x.g, ch, t0, 0);
            uint32_t nci = ci, nt0 = t0 + T;
            int pf = next_run(s, it->c1, &nci, &nt0);
            for (size_t g = 0; g < H; g++) {
                if (pf) fkv__prefetch_run(&c->x, s->chunks[nci], nt0, (uint32_t)g, (uint32_t)H);
                fkv__attend_run(&c->x, ch, (uint32_t)g, t0, T, q + g * r * D, r, NULL, c->scale, m + g * r,
                                l + g * r, acc + g * r * D, s->mass ? csum + g * r : NULL, &ts);
            }
            t0 += T;
        }
        if (s->mass) {
            float *st = c->stats + c->stat_off[it->seq] + (size_t)ci * NH * 2;
            for (size_t j = 0; j < NH; j++) st[2 * j] = csum[j], st[2 * j + 1] = m[j];
        }
    }
}

static void merge_seq(void *arg, size_t b, unsigned thread)
{
    dctx *c = arg;
    const size_t D = c->x.g->head_dim, NH = c->n_heads;
    float *ML = tbuf(c, thread); /* [n_heads][2]: final max, sum */
    const size_t first = c->item_off[b];
    for (size_t j = 0; j < NH; j++) {
        float M = -INFINITY, L = 0.0f;
        for (size_t sp = 0; sp < c->splits[b]; sp++) {
            const float *p = c->partial + (first + sp) * NH * (D + 2);
            M = p[NH * D + j] > M ? p[NH * D + j] : M;
        }
        float *o = c->out + ((size_t)b * NH + j) * D;
        memset(o, 0, D * sizeof *o);
        if (M > -INFINITY)
            for (size_t sp = 0; sp < c->splits[b]; sp++) {
                const float *p = c->partial + (first + sp) * NH * (D + 2);
                float w = expf(p[NH * D + j] - M); /* 0 for an empty range */
                L += p[NH * D + NH + j] * w;
                for (size_t d = 0; d < D; d++) o[d] += w * p[j * D + d];
            }
        if (L > 0.0f)
            for (size_t d = 0; d < D; d++) o[d] /= L;
        ML[2 * j] = M;
        ML[2 * j + 1] = L;
    }
    const fkv_attn_seq *s = &c->seqs[b];
    if (!s->mass) return;
    for (size_t ci = 0; ci < s->n_chunks; ci++) {
        if ((s->keep && !s->keep[ci]) || !s->chunks[ci]->n_tokens) continue;
        const float *st = c->stats + c->stat_off[b] + ci * NH * 2;
        double add = 0.0;
        for (size_t h = 0; h < NH; h++)
            if (ML[2 * h + 1] > 0.0f) add += st[2 * h] * exp((double)st[2 * h + 1] - ML[2 * h]) / ML[2 * h + 1];
        s->mass[ci] += (float)add;
    }
}

fkv_status fkv_attn_decode(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                           const fkv_attn_seq *seqs, size_t n_seqs, const float *q, float *out,
                           float scale, char *err, size_t errlen)
{
    static const char fn[] = "fkv_attn_decode";
    fkv_status st = fkv__check_kv(fn, kv, n_heads, err, errlen);
    if (st) return st;
    if (!n_seqs) return FKV_OK;
    if (!seqs || !q || !out) {
        fkv__err(err, errlen, "%s: seqs, q and out must be non-NULL", fn);
        return FKV_EINVAL;
    }
    for (size_t b = 0; b < n_seqs; b++)
        if ((st = fkv__check_seq(fn, kv, &seqs[b], b, err, errlen))) return st;

    const fkv_kv_geom *g = kv->geom;
    const size_t H = g->n_kv_heads, D = g->head_dim, r = n_heads / H;
    fkv_attn_pool *own = NULL;
    if (!pool) {
        if (fkv_attn_pool_create(1, &own)) return FKV_ENOMEM;
        pool = own;
    }
    const unsigned nt = fkv_attn_pool_threads(pool);

    /* plan the ranges */
    uint64_t total = 0;
    for (size_t b = 0; b < n_seqs; b++)
        for (size_t i = 0; i < seqs[b].n_chunks; i++)
            if (!seqs[b].keep || seqs[b].keep[i]) total += seqs[b].chunks[i]->n_tokens;
    uint64_t tps = total / (4u * nt);
    if (tps < MIN_SPLIT_TOKENS) tps = MIN_SPLIT_TOKENS;

    size_t n_items = 0, n_stats = 0;
    size_t *item_off = malloc(n_seqs * 2 * sizeof(size_t));
    uint32_t *splits = malloc(n_seqs * sizeof(uint32_t));
    if (!item_off || !splits) goto nomem;
    size_t *stat_off = item_off + n_seqs;
    for (size_t b = 0; b < n_seqs; b++) {
        uint64_t kept = 0, kept_chunks = 0;
        for (size_t i = 0; i < seqs[b].n_chunks; i++)
            if (!seqs[b].keep || seqs[b].keep[i]) kept += seqs[b].chunks[i]->n_tokens, kept_chunks++;
        uint64_t sp = (kept + tps - 1) / tps;
        if (sp > kept_chunks) sp = kept_chunks;
        splits[b] = sp ? (uint32_t)sp : 1u;
        item_off[b] = n_items;
        n_items += splits[b];
        stat_off[b] = n_stats;
        if (seqs[b].mass) n_stats += seqs[b].n_chunks * n_heads * 2;
    }
    item *items = malloc(n_items * sizeof *items);
    if (!items) goto nomem;
    for (size_t b = 0; b < n_seqs; b++) {
        const fkv_attn_seq *s = &seqs[b];
        uint64_t kept = 0, cum = 0;
        for (size_t i = 0; i < s->n_chunks; i++)
            if (!s->keep || s->keep[i]) kept += s->chunks[i]->n_tokens;
        /* cut after the chunk where the running total passes k/splits of it */
        uint32_t c0 = 0, k = 0;
        for (size_t i = 0; i < s->n_chunks && k + 1 < splits[b]; i++) {
            if (!s->keep || s->keep[i]) cum += s->chunks[i]->n_tokens;
            if (cum * splits[b] >= kept * (k + 1)) {
                items[item_off[b] + k] = (item){(uint32_t)b, c0, (uint32_t)i + 1};
                c0 = (uint32_t)i + 1;
                k++;
            }
        }
        for (; k < splits[b]; k++) { /* the last range takes the rest (later ones, if any, are empty) */
            items[item_off[b] + k] = (item){(uint32_t)b, c0, (uint32_t)s->n_chunks};
            c0 = (uint32_t)s->n_chunks;
        }
    }

    dctx c = {{g, kv->layer, kv->k, kv->v, fkv__stride(g), fkv__simd()}, seqs, n_heads, (uint32_t)r,
              q, out, scale, items, item_off, splits, NULL, stat_off, NULL, pool, 0};
    c.tfloats = fkv__tscratch_floats(r, D) + n_heads;
    if (c.tfloats < 2 * (size_t)n_heads) c.tfloats = 2 * (size_t)n_heads;
    size_t shared = n_items * n_heads * (D + 2) + n_stats;
    float *sh = fkv__pool_buf(pool, 0, shared * sizeof(float));
    if (!sh) goto nomem_items;
    c.partial = sh;
    c.stats = sh + n_items * n_heads * (D + 2);
    for (unsigned t = 0; t < nt; t++)
        if (!fkv__pool_buf(pool, 1 + t, c.tfloats * sizeof(float))) goto nomem_items;
    fkv_attn_pool_run(pool, n_items, run_item, &c);
    fkv_attn_pool_run(pool, n_seqs, merge_seq, &c);
    free(items);
    free(item_off);
    free(splits);
    fkv_attn_pool_destroy(own);
    return FKV_OK;
nomem_items:
    free(items);
nomem:
    free(item_off);
    free(splits);
    fkv_attn_pool_destroy(own);
    fkv__err(err, errlen, "%s: out of memory for the work plan", fn);
    return FKV_ENOMEM;
}
