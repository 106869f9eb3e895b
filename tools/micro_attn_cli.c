/* fairkv micro attn: how close decode attention over chunk tables comes to
 * this machine's memory bandwidth.
 *
 * Decode is memory-bound: each K/V byte is read once per step and used for
 * n_heads/n_kv_heads query heads.  So the yardstick is the streaming read
 * bandwidth measured here with the same threads (summing a buffer far larger
 * than the caches).  Each configuration reads a batch of sequences whose K/V
 * total ~192 MiB, so caches cannot hold it between calls.  "chunked" is the
 * cache's layout (16-token pages scattered over the pool, 64-token chunks);
 * "contiguous" is the same kernel on one page per sequence (no page
 * indirection, the best case of the same code). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fairkv_attn.h"
#include "fairkv_quant.h"
#include "quant/simd.h"

int fkv_cli_micro_attn(int argc, char **argv);

enum { NH = 32, NKV = 8, HD = 128, CHUNK = 64, PAGE = 16 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- bandwidth */

typedef float v4f __attribute__((vector_size(16)));

struct bw {
    const char *src;
    char *dst;
    size_t bytes, parts;
    double sums[64];
};

static void sum_part(void *ctx, size_t i, unsigned thread)
{
    (void)thread;
    struct bw *b = ctx;
    size_t per = b->bytes / b->parts / 64 * 64;
    const v4f *p = (const v4f *)(b->src + i * per);
    v4f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (size_t k = 0; k < per / 16; k += 4) a0 += p[k], a1 += p[k + 1], a2 += p[k + 2], a3 += p[k + 3];
    v4f s = a0 + a1 + a2 + a3;
    b->sums[i % 64] = s[0] + s[1] + s[2] + s[3];
}

static void copy_part(void *ctx, size_t i, unsigned thread)
{
    (void)thread;
    struct bw *b = ctx;
    size_t per = b->bytes / b->parts;
    memcpy(b->dst + i * per, b->src + i * per, per);
}

static void fill_part(void *ctx, size_t i, unsigned thread)
{
    (void)thread;
    struct bw *b = ctx;
    size_t per = b->bytes / b->parts;
    memset((char *)b->src + i * per, (int)(i + 1), per); /* also faults the pages in */
}

/* best of 3; returns GB/s (1e9 bytes) */
static double bandwidth(fkv_attn_pool *pool, size_t bytes, int copy)
{
    struct bw b = {0};
    char *src = malloc(bytes), *dst = copy ? malloc(bytes) : NULL;
    if (!src || (copy && !dst)) {
        free(src);
        return 0;
    }
    b.src = src, b.dst = dst, b.bytes = bytes, b.parts = fkv_attn_pool_threads(pool);
    fkv_attn_pool_run(pool, b.parts, fill_part, &b);
    if (copy) memset(dst, 0, bytes);
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s();
        fkv_attn_pool_run(pool, b.parts, copy ? copy_part : sum_part, &b);
        t = now_s() - t;
        best = t < best ? t : best;
    }
    free(src), free(dst);
    return bytes / best / 1e9;
}

/* ---------------------------------------------------------------- decode */

struct setup {
    fkv_kv_geom g;
    fkv_kv_layer layer;
    fkv_chunk_view *views;
    const fkv_chunk_view **tab;
    uint32_t *pages;
    void **meta;
    size_t n_chunks, per_seq;
    fkv_attn_seq *seqs;
    uint64_t bytes_read; /* K/V bytes the kernel reads per call (codes + scales) */
};

static unsigned bits_of(fkv_dtype t) { return t == FKV_F32 ? 32 : t == FKV_F16 ? 16 : t == FKV_INT8 ? 8 : 4; }
static const char *dname(fkv_dtype t) { return t == FKV_F32 ? "fp32" : t == FKV_F16 ? "fp16" : t == FKV_INT8 ? "int8" : "int4"; }

static void fill_random(const fkv__simd_ops *ops, fkv_dtype base, void *mem, size_t n, uint32_t seed)
{
    float buf[4096];
    uint32_t x = seed | 1u;
    for (size_t i = 0; i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < m; j++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            buf[j] = (float)((int32_t)x >> 8) * 0x1p-22f; /* uniform in [-2, 2) */
        }
        if (base == FKV_F32) memcpy((float *)mem + i, buf, m * sizeof(float));
        else ops->f2h(buf, (uint16_t *)mem + i, m);
    }
}

static void teardown(struct setup *s)
{
    for (size_t i = 0; s->meta && i < s->n_chunks; i++) free(s->meta[i]);
    free(s->meta), free(s->views), free(s->tab), free(s->pages), free(s->seqs);
    free(s->layer.k), free(s->layer.v);
    memset(s, 0, sizeof *s);
}

/* batch seqs of ctx tokens in dtype dt; contiguous: one page per sequence.
 * *quant_s gets the seconds spent quantizing (0 for fp chunks). */
static int build(struct setup *s, uint32_t ctx, size_t batch, fkv_dtype dt, int contiguous, double *quant_s)
{
    memset(s, 0, sizeof *s);
    fkv_kv_geom *g = &s->g;
    g->n_layers = 1, g->n_kv_heads = NKV, g->head_dim = HD;
    g->base = dt == FKV_F32 ? FKV_F32 : FKV_F16;
    /* contiguous: 64-token pages in order, so each sequence's K (and V) is
     * one contiguous [ctx][n_kv_heads][head_dim] buffer, cut into the same
     * 64-token chunks (the decode kernel splits work at chunk boundaries) */
    g->page_tokens = contiguous ? CHUNK : PAGE;
    uint32_t chunk = CHUNK, cpages = chunk / g->page_tokens;
    s->per_seq = ctx / chunk;
    s->n_chunks = batch * s->per_seq;
    g->n_pages = (uint32_t)(s->n_chunks * cpages);
    size_t bytes = (size_t)g->n_pages * fkv_kv_page_bytes(g);
    s->layer.k = malloc(bytes), s->layer.v = malloc(bytes);
    s->views = calloc(s->n_chunks, sizeof *s->views);
    s->tab = calloc(s->n_chunks, sizeof *s->tab);
    s->pages = malloc(g->n_pages * sizeof *s->pages);
    s->meta = calloc(s->n_chunks, sizeof *s->meta);
    s->seqs = calloc(batch, sizeof *s->seqs);
    if (!s->layer.k || !s->layer.v || !s->views || !s->tab || !s->pages || !s->meta || !s->seqs) return -1;
    const fkv__simd_ops *ops = fkv__simd();
    size_t elems = bytes / (g->base == FKV_F32 ? 4 : 2);
    fill_random(ops, g->base, s->layer.k, elems, 1);
    fill_random(ops, g->base, s->layer.v, elems, 2);
    uint32_t x = 12345;
    for (uint32_t i = 0; i < g->n_pages; i++) s->pages[i] = i;
    for (uint32_t i = contiguous ? 0 : g->n_pages; i > 1; i--) { /* scatter pages like a long-running pool */
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        uint32_t j = x % i, t = s->pages[i - 1];
        s->pages[i - 1] = s->pages[j], s->pages[j] = t;
    }
    *quant_s = 0;
    for (size_t c = 0; c < s->n_chunks; c++) {
        fkv_chunk_view *v = &s->views[c];
        v->start = (uint32_t)((c % s->per_seq) * chunk);
        v->n_tokens = v->cap_tokens = chunk;
        v->pages = s->pages + c * cpages;
        v->n_pages = cpages;
        v->dtype = g->base;
        v->resident = 1;
        if (dt == FKV_INT8 || dt == FKV_INT4) {
            size_t mb = fkv_quant_meta_bytes(g, dt, chunk);
            uint32_t nq = fkv_quant_pages_needed(g, dt, chunk);
            if (!(s->meta[c] = malloc(mb))) return -1;
            double t = now_s();
            if (fkv_quant_chunk(g, &s->layer, chunk, v->pages, cpages, dt, v->pages, nq, s->meta[c], mb, NULL, 0))
                return -1;
            *quant_s += now_s() - t;
            v->dtype = dt, v->n_pages = nq, v->qmeta = s->meta[c];
            s->bytes_read += 2 * (uint64_t)chunk * NKV * HD * bits_of(dt) / 8 + mb;
        } else {
            s->bytes_read += 2 * (uint64_t)chunk * NKV * HD * (dt == FKV_F32 ? 4 : 2);
        }
        s->tab[c] = v;
    }
    for (size_t b = 0; b < batch; b++)
        s->seqs[b] = (fkv_attn_seq){s->tab + b * s->per_seq, s->per_seq, NULL, NULL};
    return 0;
}

/* best time of one decode call over the batch, seconds */
static double time_decode(fkv_attn_pool *pool, struct setup *s, size_t batch, double budget_s)
{
    float *q = malloc(batch * NH * HD * sizeof *q), *out = malloc(batch * NH * HD * sizeof *out);
    if (!q || !out) {
        free(q), free(out);
        return -1;
    }
    uint32_t x = 777;
    for (size_t i = 0; i < batch * NH * HD; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        q[i] = (float)((int32_t)x >> 8) * 0x1p-23f;
    }
    fkv_attn_kv kv = {&s->g, 0, s->layer.k, s->layer.v};
    const float scale = 1.0f / sqrtf((float)HD);
    double best = 1e30, start = now_s();
    int it = 0;
    fkv_attn_decode(pool, &kv, NH, s->seqs, batch, q, out, scale, NULL, 0); /* warm up */
    while (it < 3 || (now_s() - start < budget_s && it < 200)) {
        double t = now_s();
        if (fkv_attn_decode(pool, &kv, NH, s->seqs, batch, q, out, scale, NULL, 0)) {
            best = -1;
            break;
        }
        t = now_s() - t;
        best = t < best ? t : best;
        it++;
    }
    free(q), free(out);
    return best;
}

struct result {
    uint32_t ctx;
    fkv_dtype dt;
    int contiguous;
    size_t batch;
    double ms, gbps;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv micro attn [--json] [--threads N] [--quick]\n"
               "  Measures read and memcpy bandwidth, decode attention over contexts of\n"
               "  1k..32k tokens (32 query heads, 8 kv heads, head dim 128) for fp32, fp16,\n"
               "  int8 and int4 chunks, chunked and contiguous, and codec throughput.\n"
               "  --quick: contexts 1k and 4k only, smaller buffers.\n");
}

int fkv_cli_micro_attn(int argc, char **argv)
{
    int json = 0, quick = 0;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atol(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "fairkv micro attn: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (threads < 1 || threads > 1024) {
        fprintf(stderr, "fairkv micro attn: --threads must be 1..1024\n");
        return 2;
    }
    fkv_attn_pool *pool;
    if (fkv_attn_pool_create((unsigned)threads, &pool)) {
        fprintf(stderr, "fairkv micro attn: cannot start %ld threads\n", threads);
        return 1;
    }
    const size_t big = (quick ? 256u : 1024u) << 20, working = (quick ? 64u : 192u) << 20;
    const double budget = quick ? 0.15 : 0.45;
    double read_gbps = bandwidth(pool, big, 0), memcpy_gbps = bandwidth(pool, big / 2, 1);
    if (!json)
        printf("threads %ld, vector path %s\nread bandwidth %.2f GB/s, memcpy %.2f GB/s (bytes copied)\n", threads,
               fkv_simd_path(), read_gbps, memcpy_gbps);

    static const uint32_t ctxs_all[] = {1024, 4096, 16384, 32768};
    static const fkv_dtype dts[] = {FKV_F32, FKV_F16, FKV_INT8, FKV_INT4};
    size_t n_ctx = quick ? 2 : 4;
    struct result res[4 * 4 * 2];
    size_t nres = 0;
    double q_bytes[4] = {0}, q_time[4] = {0}, dq_bytes[4] = {0}, dq_time[4] = {0};
    if (!json) printf("%6s %5s %-10s %5s %9s %8s %6s\n", "ctx", "dtype", "layout", "batch", "ms", "GB/s", "%read");
    for (size_t ci = 0; ci < n_ctx; ci++)
        for (size_t di = 0; di < 4; di++)
        {
            /* both layouts built at once and timed in alternating rounds
             * (best of each), so a burst of other load on this machine hits
             * both alike */
            uint32_t ctx = ctxs_all[ci];
            fkv_dtype dt = dts[di];
            size_t seq_bytes = 2ull * ctx * NKV * HD * (dt == FKV_F32 ? 4 : 2);
            size_t batch = working / seq_bytes ? working / seq_bytes : 1;
            struct setup s[2];
            double qs[2], best[2] = {1e30, 1e30};
            memset(s, 0, sizeof s);
            for (int lay = 0; lay < 2; lay++)
                if (build(&s[lay], ctx, batch, dt, lay, &qs[lay])) {
                    fprintf(stderr, "fairkv micro attn: out of memory at ctx %u %s\n", ctx, dname(dt));
                    teardown(&s[0]), teardown(&s[1]);
                    fkv_attn_pool_destroy(pool);
                    return 1;
                }
            for (int round = 0; round < 3; round++)
                for (int lay = 0; lay < 2; lay++) {
                    double t = time_decode(pool, &s[lay], batch, budget / 3);
                    if (t > 0 && t < best[lay]) best[lay] = t;
                }
            if (qs[0] > 0) { /* codec throughput on the scattered layout, fp16 bytes */
                q_bytes[di] += 2.0 * batch * ctx * NKV * HD * 2, q_time[di] += qs[0];
                double t0 = now_s();
                for (size_t c = 0; c < s[0].n_chunks; c++) {
                    fkv_chunk_view *v = &s[0].views[c];
                    fkv_dequant_chunk(&s[0].g, &s[0].layer, v->n_tokens, dt, v->pages, v->n_pages, v->qmeta,
                                      fkv_quant_meta_bytes(&s[0].g, dt, v->n_tokens), v->pages,
                                      CHUNK / s[0].g.page_tokens, NULL, 0);
                }
                dq_bytes[di] += 2.0 * batch * ctx * NKV * HD * 2, dq_time[di] += now_s() - t0;
            }
            for (int lay = 0; lay < 2; lay++) {
                double t = best[lay] < 1e30 ? best[lay] : -1;
                struct result r = {ctx, dt, lay, batch, t * 1e3, t > 0 ? s[lay].bytes_read / t / 1e9 : 0};
                res[nres++] = r;
                if (!json)
                    printf("%6u %5s %-10s %5zu %9.3f %8.2f %5.0f%%\n", ctx, dname(dt),
                           lay ? "contiguous" : "chunked", batch, r.ms, r.gbps, 100 * r.gbps / read_gbps);
                teardown(&s[lay]);
            }
        }
    fkv_kv_geom g16 = {32, NKV, HD, PAGE, FKV_F16, 0, 1};
    double fp16b = (double)fkv_quant_chunk_bytes(&g16, FKV_F16, CHUNK);
    double r8 = fkv_quant_chunk_bytes(&g16, FKV_INT8, CHUNK) / fp16b, r4 = fkv_quant_chunk_bytes(&g16, FKV_INT4, CHUNK) / fp16b;

    /* targets: >= 60% of read bandwidth at >= 4k; chunked/contiguous <= 1.10; int8 no slower than fp16 */
    double worst_frac = 1e9, worst_ratio = 0, worst_i8 = 0;
    for (size_t i = 0; i < nres; i++) {
        if (res[i].ctx >= 4096 && !res[i].contiguous && res[i].gbps / read_gbps < worst_frac)
            worst_frac = res[i].gbps / read_gbps;
        if (!res[i].contiguous && i + 1 < nres && res[i + 1].contiguous && res[i + 1].ms > 0 &&
            res[i].ms / res[i + 1].ms > worst_ratio)
            worst_ratio = res[i].ms / res[i + 1].ms;
        if (res[i].dt == FKV_INT8) /* fp16 of the same ctx and layout is 2 entries back */
            if (res[i].ms / res[i - 2].ms > worst_i8) worst_i8 = res[i].ms / res[i - 2].ms;
    }
    if (json) {
        printf("{\"bench\":\"attn\",\"threads\":%ld,\"simd\":\"%s\",\"read_gbps\":%.3f,\"memcpy_gbps\":%.3f,\"decode\":[",
               threads, fkv_simd_path(), read_gbps, memcpy_gbps);
        for (size_t i = 0; i < nres; i++)
            printf("%s{\"ctx\":%u,\"dtype\":\"%s\",\"layout\":\"%s\",\"batch\":%zu,\"ms\":%.4f,\"gbps\":%.3f}",
                   i ? "," : "", res[i].ctx, dname(res[i].dt), res[i].contiguous ? "contiguous" : "chunked",
                   res[i].batch, res[i].ms, res[i].gbps);
        printf("],\"bytes_vs_fp16\":{\"int8\":%.4f,\"int4\":%.4f}", r8, r4);
        printf(",\"codec_gbps\":{\"quant_int8\":%.3f,\"quant_int4\":%.3f,\"dequant_int8\":%.3f,\"dequant_int4\":%.3f}",
               q_bytes[2] / q_time[2] / 1e9, q_bytes[3] / q_time[3] / 1e9, dq_bytes[2] / dq_time[2] / 1e9,
               dq_bytes[3] / dq_time[3] / 1e9);
        printf(",\"targets\":{\"min_read_fraction_ge4k\":%.3f,\"max_chunked_over_contiguous\":%.3f,"
               "\"max_int8_over_fp16_time\":%.3f}}\n", worst_frac, worst_ratio, worst_i8);
    } else {
        printf("bytes vs fp16 (64-token chunk, scales included): int8 %.3f, int4 %.3f\n", r8, r4);
        printf("codec, one thread, GB/s of fp16 data: quantize int8 %.2f int4 %.2f, dequantize int8 %.2f int4 %.2f\n",
               q_bytes[2] / q_time[2] / 1e9, q_bytes[3] / q_time[3] / 1e9, dq_bytes[2] / dq_time[2] / 1e9,
               dq_bytes[3] / dq_time[3] / 1e9);
        printf("targets: decode >= 4k at >= 60%% of read bandwidth: worst %.0f%% %s\n", 100 * worst_frac,
               worst_frac >= 0.6 ? "met" : "NOT met");
        printf("         chunked / contiguous time <= 1.10: worst %.3f %s\n", worst_ratio,
               worst_ratio <= 1.10 ? "met" : "NOT met");
        printf("         int8 decode no slower than fp16: worst int8/fp16 time %.3f %s\n", worst_i8,
               worst_i8 <= 1.0 ? "met" : "NOT met");
    }
    fkv_attn_pool_destroy(pool);
    return 0;
}
