/* Test fixture for the codecs and attention kernels: a page pool laid out
 * exactly like the cache's K/V storage (fairkv.h), sequences whose chunk
 * tables are built by hand over shuffled pages, mixed chunk precisions
 * (quantized in place through the public hook), and an fp64 reference
 * attention over the original contiguous data. */
#ifndef FKV_TEST_ATTN_FIXTURE_H
#define FKV_TEST_ATTN_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fairkv_attn.h"
#include "fairkv_quant.h"

typedef struct rng {
    uint64_t s;
} rng;

static inline uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double rng_unif(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static inline uint32_t rng_below(rng *r, uint32_t n) { return (uint32_t)(rng_unif(r) * n); }
static inline double rng_gauss(rng *r)
{
    double u = rng_unif(r), v = rng_unif(r);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

typedef struct fx {
    fkv_kv_geom g;
    fkv_kv_layer *layers;
    uint32_t *free_pages, n_free;
} fx;

static inline void fx_init(fx *f, fkv_kv_geom g, rng *r)
{
    f->g = g;
    uint64_t stride = g.page_stride ? g.page_stride : fkv_kv_page_bytes(&g);
    f->layers = calloc(g.n_layers, sizeof *f->layers);
    REQUIRE(f->layers);
    for (uint32_t l = 0; l < g.n_layers; l++) {
        f->layers[l].k = calloc(g.n_pages, stride);
        f->layers[l].v = calloc(g.n_pages, stride);
        REQUIRE(f->layers[l].k && f->layers[l].v);
    }
    f->free_pages = malloc(g.n_pages * sizeof(uint32_t));
    REQUIRE(f->free_pages);
    for (uint32_t i = 0; i < g.n_pages; i++) f->free_pages[i] = i;
    for (uint32_t i = g.n_pages; i > 1; i--) { /* shuffle: pages of a chunk are scattered */
        uint32_t j = rng_below(r, i), t = f->free_pages[i - 1];
        f->free_pages[i - 1] = f->free_pages[j];
        f->free_pages[j] = t;
    }
    f->n_free = g.n_pages;
}

static inline void fx_free(fx *f)
{
    for (uint32_t l = 0; l < f->g.n_layers; l++) free(f->layers[l].k), free(f->layers[l].v);
    free(f->layers);
    free(f->free_pages);
}

/* A sequence: original fp32 data [n_layers][n][n_kv_heads*head_dim] for K
 * and V, and its chunk table. */
typedef struct fxseq {
    uint32_t n;
    float *k, *v;
    size_t n_chunks;
    fkv_chunk_view *views;
    const fkv_chunk_view **tab;
} fxseq;

/* key style: 0 Gaussian, 1 Gaussian plus two large-magnitude outlier
 * channels: the same channels for every token with a magnitude about 10x
 * the others (10 + 3 N(0,1)), the pattern KIVI and KVQuant report for
 * real keys */
static inline void fx_fill(const fx *f, fxseq *s, rng *r, int outliers)
{
    size_t E = (size_t)f->g.n_kv_heads * f->g.head_dim, n = (size_t)f->g.n_layers * s->n * E;
    for (size_t i = 0; i < n; i++) {
        s->k[i] = (float)rng_gauss(r);
        s->v[i] = (float)rng_gauss(r);
        size_t ch = i % f->g.head_dim;
        if (outliers && (ch == 3 || ch == f->g.head_dim / 2 + 1)) s->k[i] = (float)(10.0 + 3.0 * s->k[i]);
    }
}

static inline void fx_store(const fx *f, float x, void *dst)
{
    if (f->g.base == FKV_F32) memcpy(dst, &x, 4);
    else {
        uint16_t h = fkv_f32_to_f16(x);
        memcpy(dst, &h, 2);
    }
}

/* Allocates a sequence of n tokens (data not filled, no chunks yet). */
static inline void fx_seq_alloc(const fx *f, fxseq *s, uint32_t n)
{
    const fkv_kv_geom *g = &f->g;
    size_t E = (size_t)g->n_kv_heads * g->head_dim;
    s->n = n;
    s->k = malloc((size_t)g->n_layers * n * E * sizeof(float) + 1);
    s->v = malloc((size_t)g->n_layers * n * E * sizeof(float) + 1);
    s->views = calloc(n + 1, sizeof *s->views);
    s->tab = calloc(n + 1, sizeof *s->tab);
    REQUIRE(s->k && s->v && s->views && s->tab);
    s->n_chunks = 0;
}

/* Lays the sequence's data (s->k, s->v) out in chunks of lens[i] tokens
 * (summing to s->n) over free pages, chunk i quantized in place to dts[i]
 * when that is not the base dtype. */
static inline void fx_seq_place(fx *f, fxseq *s, const uint32_t *lens, const fkv_dtype *dts, size_t n_chunks)
{
    const fkv_kv_geom *g = &f->g;
    size_t E = (size_t)g->n_kv_heads * g->head_dim, es = g->base == FKV_F32 ? 4 : 2;
    uint64_t stride = g->page_stride ? g->page_stride : fkv_kv_page_bytes(g);
    const uint32_t n = s->n;
    s->n_chunks = 0;
    for (uint32_t pos = 0, i = 0; i < n_chunks; i++) {
        uint32_t len = lens[i];
        REQUIRE(len >= 1 && len <= n - pos);
        fkv_chunk_view *c = &s->views[s->n_chunks];
        uint32_t nb = fkv_quant_pages_needed(g, g->base, len);
        REQUIRE(f->n_free >= nb);
        uint32_t *pages = malloc(nb * sizeof *pages);
        REQUIRE(pages);
        for (uint32_t j = 0; j < nb; j++) pages[j] = f->free_pages[--f->n_free];
        for (uint32_t l = 0; l < g->n_layers; l++)
            for (uint32_t t = 0; t < len; t++)
                for (size_t e = 0; e < E; e++) {
                    size_t off = (size_t)pages[t / g->page_tokens] * stride + ((t % g->page_tokens) * E + e) * es;
                    size_t src = ((size_t)l * n + pos + t) * E + e;
                    fx_store(f, s->k[src], (char *)f->layers[l].k + off);
                    fx_store(f, s->v[src], (char *)f->layers[l].v + off);
                }
        fkv_dtype dt = dts[i];
        c->start = pos;
        c->n_tokens = len;
        c->cap_tokens = len;
        c->pages = pages;
        c->n_pages = nb;
        c->dtype = g->base;
        c->resident = 1;
        if (dt != g->base) {
            size_t mb = fkv_quant_meta_bytes(g, dt, len);
            void *meta = malloc(mb);
            REQUIRE(meta);
            uint32_t nq = fkv_quant_pages_needed(g, dt, len);
            char err[200] = "";
            fkv_status st = fkv_quant_chunk(g, f->layers, len, pages, nb, dt, pages, nq, meta, mb, err, sizeof err);
            CHECKF(st == FKV_OK, "%s", err);
            c->dtype = dt;
            c->n_pages = nq;
            c->qmeta = meta;
        }
        s->tab[s->n_chunks++] = c;
        pos += len;
    }
}

/* Builds a sequence of n tokens cut into chunks of 1..max_chunk tokens,
 * each chunk's dtype drawn from dtypes[n_dtypes] (quantized in place). */
static inline void fx_seq(fx *f, fxseq *s, uint32_t n, uint32_t max_chunk, const fkv_dtype *dtypes,
                          int n_dtypes, int outliers, rng *r)
{
    fx_seq_alloc(f, s, n);
    fx_fill(f, s, r, outliers);
    uint32_t *lens = malloc((n + 1) * sizeof *lens);
    fkv_dtype *dts = malloc((n + 1) * sizeof *dts);
    REQUIRE(lens && dts);
    size_t nc = 0;
    for (uint32_t pos = 0; pos < n; nc++) { /* draws in the order: length, dtype, per chunk */
        uint32_t len = 1 + rng_below(r, max_chunk);
        if (len > n - pos) len = n - pos;
        lens[nc] = len;
        dts[nc] = dtypes[rng_below(r, (uint32_t)n_dtypes)];
        pos += len;
    }
    fx_seq_place(f, s, lens, dts, nc);
    free(lens), free(dts);
}

static inline void fx_seq_free(fxseq *s)
{
    for (size_t i = 0; i < s->n_chunks; i++) free((void *)s->views[i].pages), free((void *)s->views[i].qmeta);
    free(s->k), free(s->v), free(s->views), free(s->tab);
}

/* fp64 reference: query heads q[n_heads][D] at position qpos attend to the
 * tokens t <= qpos of the kept chunks (keep may be NULL), contiguous data of
 * `layer`.  out[n_heads][D]; pmass (may be NULL) [n_chunks] += probability
 * mass per chunk summed over heads. */
static inline void fx_ref(const fx *f, const fxseq *s, uint32_t layer, const uint8_t *keep,
                          uint32_t n_heads, const float *q, uint32_t qpos, float scale, double *out,
                          double *pmass)
{
    const size_t D = f->g.head_dim, H = f->g.n_kv_heads, E = H * D, r = n_heads / H;
    double *lg = malloc((s->n + 1) * sizeof *lg);
    REQUIRE(lg);
    for (size_t h = 0; h < n_heads; h++) {
        size_t kvh = h / r;
        double mx = -INFINITY;
        for (size_t c = 0; c < s->n_chunks; c++) {
            const fkv_chunk_view *ch = s->tab[c];
            for (uint32_t t = ch->start; t < ch->start + ch->n_tokens; t++) {
                lg[t] = -INFINITY;
                if ((keep && !keep[c]) || t > qpos) continue;
                const float *k = s->k + ((size_t)layer * s->n + t) * E + kvh * D;
                double a = 0;
                for (size_t d = 0; d < D; d++) a += (double)q[h * D + d] * k[d];
                lg[t] = a * scale;
                mx = lg[t] > mx ? lg[t] : mx;
            }
        }
        double sum = 0;
        for (uint32_t t = 0; t < s->n; t++) sum += (lg[t] = lg[t] == -INFINITY ? 0.0 : exp(lg[t] - mx));
        for (size_t d = 0; d < D; d++) out[h * D + d] = 0;
        if (sum == 0) continue;
        for (size_t c = 0; c < s->n_chunks; c++)
            for (uint32_t t = s->tab[c]->start; t < s->tab[c]->start + s->tab[c]->n_tokens; t++) {
                double p = lg[t] / sum;
                if (p == 0) continue;
                if (pmass) pmass[c] += p;
                const float *v = s->v + ((size_t)layer * s->n + t) * E + kvh * D;
                for (size_t d = 0; d < D; d++) out[h * D + d] += p * v[d];
            }
    }
    free(lg);
}

/* normalized mean squared error mse(a, b) / mse(a, 0), a the reference */
static inline double fx_nmse(const double *a, const float *b, size_t n)
{
    double e = 0, z = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i])) return INFINITY;
        e += (a[i] - b[i]) * (a[i] - b[i]);
        z += a[i] * a[i];
    }
    return z > 0 ? e / z : e;
}

/* NMSE bound of a sequence whose lowest precision is dt */
static inline double fx_bound(fkv_dtype dt)
{
    switch (dt) {
    case FKV_F32: return 1e-10;
    case FKV_F16: return 1e-6;
    case FKV_INT8: return 1e-3;
    case FKV_INT4: return 3e-2;
    /* E4M3 rounds each element to a relative 2^-4 at most (element NMSE
     * near 2^-8/3 = 1.3e-3); keys with outlier channels 10x the others
     * carry that relative error at 10x the size into the logits (int8's
     * per-channel scales isolate them), so the bound with outliers is 2e-2
     * (test_quant_fp8 checks 5e-3 without outliers) */
    case FKV_FP8: return 2e-2;
    }
    return 0;
}

/* coarseness order: f32 < f16 < int8 < fp8 < int4 */
static inline int fx_rank(fkv_dtype t) { return t == FKV_FP8 ? 3 : t == FKV_INT4 ? 4 : (int)t; }

static inline fkv_dtype fx_lowest(const fxseq *s, const uint8_t *keep)
{
    fkv_dtype lo = FKV_F32;
    for (size_t i = 0; i < s->n_chunks; i++)
        if ((!keep || keep[i]) && fx_rank(s->tab[i]->dtype) > fx_rank(lo)) lo = s->tab[i]->dtype;
    return lo;
}

#endif
