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
 * indirection, the best case of the same code).
 *
 * Formats: fp32, fp16, fp8 (E4M3 codes with an fp32 scale per chunk and kv
 * head, the cache's FKV_FP8 chunks), int8 and int4.  Each row also gives its
 * time against fp16's at the same context and layout, its fraction of the
 * read bandwidth, and chunked over contiguous time; a prefill section (the
 * last 64 positions of one sequence, causal) gives the same ratios.
 * --verify compares every configuration's output with the portable scalar
 * kernels' on the same chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fairkv_attn.h"
#include "fairkv_quant.h"
#include "quant/simd.h"
#include "util/bigmem.h"

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
    /* the memory the page pool's K/V arrays live in (util/bigmem.h) */
    char *src = fkv__big_alloc(bytes), *dst = copy ? fkv__big_alloc(bytes) : NULL;
    if (!src || (copy && !dst)) {
        fkv__big_free(src, bytes);
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
    fkv__big_free(src, bytes), fkv__big_free(dst, bytes);
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

/* bytes of each of layer.k and layer.v */
static size_t kv_bytes(const struct setup *s) { return (size_t)s->g.n_pages * fkv_kv_page_bytes(&s->g); }

static unsigned bits_of(fkv_dtype t)
{
    return t == FKV_F32 ? 32 : t == FKV_F16 ? 16 : t == FKV_INT8 || t == FKV_FP8 ? 8 : 4;
}
static const char *dname(fkv_dtype t)
{
    return t == FKV_F32 ? "fp32" : t == FKV_F16 ? "fp16" : t == FKV_INT8 ? "int8" : t == FKV_FP8 ? "fp8" : "int4";
}
static int is_quant(fkv_dtype t) { return t == FKV_INT8 || t == FKV_INT4 || t == FKV_FP8; }

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
    fkv__big_free(s->layer.k, kv_bytes(s)), fkv__big_free(s->layer.v, kv_bytes(s));
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
    size_t bytes = kv_bytes(s);
    /* the pool's K/V memory (util/bigmem.h) */
    s->layer.k = fkv__big_alloc(bytes), s->layer.v = fkv__big_alloc(bytes);
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
        if (is_quant(dt)) {
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

static void fill_q(float *q, size_t n)
{
    uint32_t x = 777;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        q[i] = (float)((int32_t)x >> 8) * 0x1p-23f;
    }
}

enum { PREFILL_Q = 64 }; /* prefill: the last 64 positions of one sequence */

/* One call: decode over the batch (n_q = 0) or prefill of the last n_q
 * positions of sequence 0.  out gets [batch or n_q][NH][HD]. */
static int call(fkv_attn_pool *pool, struct setup *s, size_t batch, uint32_t n_q, const float *q, float *out)
{
    fkv_attn_kv kv = {&s->g, 0, s->layer.k, s->layer.v};
    const float scale = 1.0f / sqrtf((float)HD);
    if (!n_q) return fkv_attn_decode(pool, &kv, NH, s->seqs, batch, q, out, scale, NULL, 0) ? -1 : 0;
    uint32_t ctx = (uint32_t)(s->per_seq * CHUNK);
    return fkv_attn_prefill(pool, &kv, NH, &s->seqs[0], ctx - n_q, n_q, q, out, scale, NULL, 0) ? -1 : 0;
}

/* best time of one call, seconds (-1: the kernel failed): at least min_it
 * calls after a warm-up, more while the budget lasts */
static double time_call(fkv_attn_pool *pool, struct setup *s, size_t batch, uint32_t n_q, int min_it, double budget_s)
{
    size_t rows = n_q ? n_q : batch;
    float *q = malloc(rows * NH * HD * sizeof *q), *out = malloc(rows * NH * HD * sizeof *out);
    if (!q || !out) {
        free(q), free(out);
        return -1;
    }
    fill_q(q, rows * NH * HD);
    double best = 1e30, start = now_s();
    int it = 0;
    if (call(pool, s, batch, n_q, q, out)) best = -1; /* warm up */
    while (best > 0 && (it < min_it || (now_s() - start < budget_s && it < 200))) {
        double t = now_s();
        if (call(pool, s, batch, n_q, q, out)) {
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

/* the vector path in use, as fkv__simd_force's argument */
static int path_code(void)
{
    const fkv__simd_ops *o = fkv__simd();
    return o == &fkv__simd_scalar ? 0 : o == fkv__simd_vnni_ops() ? 3 : o == fkv__simd_avx2_ops() && fkv__simd_avx512_ops() ? 2 : 1;
}

/* --verify: NMSE of the output of the path in use against the portable
 * scalar kernels' on the same chunks and queries (-1: a call failed) */
static double verify(fkv_attn_pool *pool, struct setup *s, size_t batch, uint32_t n_q)
{
    size_t n = (size_t)(n_q ? n_q : batch) * NH * HD;
    float *q = malloc(n * sizeof *q), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double e = -1;
    if (q && a && b) {
        fill_q(q, n);
        int prev = path_code(), rc = call(pool, s, batch, n_q, q, a);
        fkv__simd_force(0);
        rc |= call(pool, s, batch, n_q, q, b);
        fkv__simd_force(prev);
        if (!rc) {
            double num = 0, den = 0;
            for (size_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
            e = den > 0 ? num / den : num;
            if (e != e) e = 1e30; /* nan in an output */
        }
    }
    free(q), free(a), free(b);
    return e;
}

struct result {
    uint32_t ctx;
    fkv_dtype dt;
    int contiguous, prefill;
    size_t batch;
    double ms, gbps;    /* gbps: K/V bytes read per second (decode) or GFLOP/s (prefill) */
    double vs_fp16;     /* time / fp16's at the same ctx, layout and phase (0: fp16 not measured) */
    double chk_cont;    /* chunked / contiguous time of this ctx, dtype and phase */
    double nmse;        /* --verify: against the scalar kernels (-1: not checked) */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fairkv micro attn [--json] [--threads N] [--quick] [--ctx N,N..] [--dtypes D,D..]\n"
               "                         [--mib N] [--verify]\n"
               "  Measures read and memcpy bandwidth, decode attention over contexts of\n"
               "  1k..32k tokens (32 query heads, 8 kv heads, head dim 128) for fp32, fp16,\n"
               "  fp8, int8 and int4 chunks, chunked and contiguous, causal prefill of the\n"
               "  last 64 positions of one sequence, and codec throughput.  Each row: time\n"
               "  against fp16's, fraction of the read bandwidth, chunked / contiguous time.\n"
               "  --quick: contexts 1k and 4k only, smaller buffers.\n"
               "  --ctx: contexts to measure (multiples of 64, at least 128).\n"
               "  --dtypes: formats to measure, of fp32, fp16, fp8, int8, int4.\n"
               "  --mib: K/V bytes of fp16 per decode configuration (the read bandwidth\n"
               "         buffer is 4x that); default 192 (64 with --quick).\n"
               "  --verify: also compare each output with the scalar kernels' (nmse).\n");
}

static int parse_dtype(const char *s, size_t n, fkv_dtype *dt)
{
    static const fkv_dtype all[] = {FKV_F32, FKV_F16, FKV_FP8, FKV_INT8, FKV_INT4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strlen(dname(all[i])) == n && !strncmp(s, dname(all[i]), n)) return *dt = all[i], 0;
    return -1;
}

/* index of the result of (ctx, dtype, layout, phase), or -1 */
static long find(const struct result *r, size_t n, uint32_t ctx, fkv_dtype dt, int contiguous, int prefill)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].ctx == ctx && r[i].dt == dt && r[i].contiguous == contiguous && r[i].prefill == prefill) return (long)i;
    return -1;
}

static void print_row(const struct result *r, double read_gbps)
{
    printf("%6u %5s %-10s %5zu %9.3f %8.2f", r->ctx, dname(r->dt), r->contiguous ? "contiguous" : "chunked", r->batch,
           r->ms, r->gbps);
    if (r->prefill) printf(" %6s", "");
    else printf(" %5.0f%%", 100 * r->gbps / read_gbps);
    if (r->vs_fp16 > 0) printf(" %7.3f", r->vs_fp16);
    else printf(" %7s", "-");
    if (r->contiguous) printf(" %9.3f", r->chk_cont);
    else printf(" %9s", "");
    if (r->nmse >= 0) printf(" %9.2e", r->nmse);
    printf("\n");
}

int fkv_cli_micro_attn(int argc, char **argv)
{
    int json = 0, quick = 0, check = 0;
    long threads = sysconf(_SC_NPROCESSORS_ONLN), mib = 0;
    uint32_t ctxs[16];
    size_t n_ctx = 0;
    fkv_dtype dts[5] = {FKV_F32, FKV_F16, FKV_FP8, FKV_INT8, FKV_INT4};
    size_t n_dt = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--verify")) check = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atol(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            char *end;
            mib = strtol(argv[++i], &end, 10);
            if (*end || mib < 1 || mib > 65536) {
                fprintf(stderr, "fairkv micro attn: --mib '%s' is not 1..65536\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            const char *p = argv[++i];
            n_ctx = 0;
            for (;;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 128 || v > (1l << 22) || v % CHUNK || (*end && *end != ',') || n_ctx == 16) {
                    fprintf(stderr, "fairkv micro attn: --ctx '%s': each context must be a multiple of %d "
                                    "from 128 to 4194304, at most 16 of them\n", argv[i], CHUNK);
                    return 2;
                }
                ctxs[n_ctx++] = (uint32_t)v;
                if (!*end) break;
                p = end + 1;
            }
        } else if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) {
            const char *p = argv[++i];
            n_dt = 0;
            for (;;) {
                size_t n = strcspn(p, ",");
                fkv_dtype dt;
                int dup = 0;
                if (parse_dtype(p, n, &dt) || n_dt == 5) {
                    fprintf(stderr, "fairkv micro attn: --dtypes '%s': unknown format '%.*s' (fp32, fp16, fp8, int8, int4)\n",
                            argv[i], (int)n, p);
                    return 2;
                }
                for (size_t k = 0; k < n_dt; k++) dup |= dts[k] == dt;
                if (!dup) dts[n_dt++] = dt;
                if (!p[n]) break;
                p += n + 1;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
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
    if (!n_ctx) {
        static const uint32_t ctxs_all[] = {1024, 4096, 16384, 32768};
        n_ctx = quick ? 2 : 4;
        memcpy(ctxs, ctxs_all, n_ctx * sizeof *ctxs);
    }
    fkv_attn_pool *pool;
    if (fkv_attn_pool_create((unsigned)threads, &pool)) {
        fprintf(stderr, "fairkv micro attn: cannot start %ld threads\n", threads);
        return 1;
    }
    const size_t working = mib ? (size_t)mib << 20 : (quick ? 64u : 192u) << 20;
    const size_t big = mib ? 4 * working : (quick ? 256u : 1024u) << 20;
    const double budget = quick ? 0.15 : 0.45;
    double read_gbps = bandwidth(pool, big, 0), memcpy_gbps = bandwidth(pool, big / 2, 1);
    if (!json)
        printf("threads %ld, vector path %s, fp8 codec %s, K/V in %s pages (FAIRKV_KV_HUGEPAGES)\nread bandwidth %.2f GB/s, memcpy %.2f GB/s (bytes copied)\n",
               threads, fkv_simd_path(), fkv_fp8_path(), fkv__big_hugepages() ? "2 MiB" : "4 KiB", read_gbps, memcpy_gbps);

    /* prefill: contexts up to 16k (32k would take seconds per call) */
    size_t n_pctx = 0;
    uint32_t pctxs[16];
    for (size_t ci = 0; ci < n_ctx; ci++)
        if (ctxs[ci] <= 16384 && (ctxs[ci] <= 4096 || !quick)) pctxs[n_pctx++] = ctxs[ci];
    struct result *res = calloc((n_ctx + n_pctx) * n_dt * 2, sizeof *res);
    if (!res) {
        fkv_attn_pool_destroy(pool);
        return 1;
    }
    size_t nres = 0;
    double q_bytes[5] = {0}, q_time[5] = {0}, dq_bytes[5] = {0}, dq_time[5] = {0}; /* by dtype value */
    int rc = 0;
    for (int prefill = 0; prefill < 2 && !rc; prefill++) {
        if (!json) {
            if (prefill) printf("prefill: causal, the last %d positions of one sequence; GFLOP/s counts q.k and p.v\n", PREFILL_Q);
            printf("%6s %5s %-10s %5s %9s %8s %6s %7s %9s%s\n", "ctx", "dtype", "layout", prefill ? "seqs" : "batch", "ms",
                   prefill ? "GFLOP/s" : "GB/s", prefill ? "" : "%read", "vs fp16", "chk/cont", check ? "  nmse/scalar" : "");
        }
        for (size_t ci = 0; ci < (prefill ? n_pctx : n_ctx) && !rc; ci++)
            for (size_t di = 0; di < n_dt && !rc; di++) {
                /* both layouts built at once and timed in alternating rounds
                 * (best of each), so a burst of other load on this machine
                 * hits both alike */
                uint32_t ctx = prefill ? pctxs[ci] : ctxs[ci];
                fkv_dtype dt = dts[di];
                size_t seq_bytes = 2ull * ctx * NKV * HD * (dt == FKV_F32 ? 4 : 2);
                size_t batch = prefill ? 1 : working / seq_bytes ? working / seq_bytes : 1;
                uint32_t n_q = prefill ? PREFILL_Q : 0;
                struct setup s[2];
                double qs[2], best[2] = {1e30, 1e30};
                memset(s, 0, sizeof s);
                for (int lay = 0; lay < 2 && !rc; lay++)
                    if (build(&s[lay], ctx, batch, dt, lay, &qs[lay])) {
                        fprintf(stderr, "fairkv micro attn: out of memory at ctx %u %s\n", ctx, dname(dt));
                        rc = 1;
                    }
                for (int round = 0; round < 3 && !rc; round++)
                    for (int lay = 0; lay < 2; lay++) {
                        double t = time_call(pool, &s[lay], batch, n_q, prefill ? 1 : 3, budget / 3);
                        if (t < 0) {
                            fprintf(stderr, "fairkv micro attn: the kernel failed at ctx %u %s\n", ctx, dname(dt));
                            rc = 1;
                            break;
                        }
                        if (t < best[lay]) best[lay] = t;
                    }
                /* prefill's arithmetic: q.k and p.v, 2 flops each per
                 * (query head, key, channel), keys up to each position */
                double flops = 0;
                for (uint32_t i = 0; i < n_q; i++) flops += 4.0 * NH * HD * (ctx - n_q + i + 1);
                for (int lay = 0; lay < 2 && !rc; lay++) {
                    double t = best[lay];
                    struct result r = {ctx, dt, lay, prefill, batch, t * 1e3,
                                       prefill ? flops / t / 1e9 : s[lay].bytes_read / t / 1e9, 0, best[0] / best[1], -1};
                    long f16 = find(res, nres, ctx, FKV_F16, lay, prefill);
                    if (f16 >= 0) r.vs_fp16 = r.ms / res[f16].ms;
                    if (check) r.nmse = verify(pool, &s[lay], batch, n_q);
                    res[nres++] = r;
                }
                if (!rc && !prefill && qs[0] > 0) { /* codec throughput on the scattered layout, fp16 bytes */
                    q_bytes[dt] += 2.0 * batch * ctx * NKV * HD * 2, q_time[dt] += qs[0];
                    double t0 = now_s();
                    for (size_t c = 0; c < s[0].n_chunks; c++) {
                        fkv_chunk_view *v = &s[0].views[c];
                        fkv_dequant_chunk(&s[0].g, &s[0].layer, v->n_tokens, dt, v->pages, v->n_pages, v->qmeta,
                                          fkv_quant_meta_bytes(&s[0].g, dt, v->n_tokens), v->pages,
                                          CHUNK / s[0].g.page_tokens, NULL, 0);
                    }
                    dq_bytes[dt] += 2.0 * batch * ctx * NKV * HD * 2, dq_time[dt] += now_s() - t0;
                }
                for (int lay = 0; lay < 2 && !rc && !json; lay++) print_row(&res[nres - 2 + lay], read_gbps);
                teardown(&s[0]), teardown(&s[1]);
            }
    }
    if (rc) {
        free(res);
        fkv_attn_pool_destroy(pool);
        return rc;
    }
    fkv_kv_geom g16 = {32, NKV, HD, PAGE, FKV_F16, 0, 1};
    double fp16b = (double)fkv_quant_chunk_bytes(&g16, FKV_F16, CHUNK);
    double r8 = fkv_quant_chunk_bytes(&g16, FKV_INT8, CHUNK) / fp16b, r4 = fkv_quant_chunk_bytes(&g16, FKV_INT4, CHUNK) / fp16b;
    double rf8 = fkv_quant_chunk_bytes(&g16, FKV_FP8, CHUNK) / fp16b;

    /* targets, per format: decode at >= 4k tokens >= 60% of the read
     * bandwidth (chunked); time against fp16's (worst over contexts and
     * layouts; targets int8 <= 0.6, int4 <= 0.4); chunked / contiguous
     * <= 1.10 (worst over contexts, decode) */
    struct tgt {
        double frac, vs16, cc, pvs16, pcc;
    } tg[5];
    for (size_t di = 0; di < n_dt; di++) tg[di] = (struct tgt){1e9, 0, 0, 0, 0};
    double worst_frac = 1e9, worst_ratio = 0;
    for (size_t i = 0; i < nres; i++) {
        size_t di = 0;
        while (dts[di] != res[i].dt) di++;
        struct tgt *t = &tg[di];
        if (res[i].prefill) {
            if (res[i].vs_fp16 > t->pvs16) t->pvs16 = res[i].vs_fp16;
            if (res[i].contiguous && res[i].chk_cont > t->pcc) t->pcc = res[i].chk_cont;
            continue;
        }
        if (res[i].ctx >= 4096 && !res[i].contiguous && res[i].gbps / read_gbps < t->frac) t->frac = res[i].gbps / read_gbps;
        if (res[i].vs_fp16 > t->vs16) t->vs16 = res[i].vs_fp16;
        if (res[i].contiguous && res[i].chk_cont > t->cc) t->cc = res[i].chk_cont;
        if (t->frac < worst_frac) worst_frac = t->frac;
        if (t->cc > worst_ratio) worst_ratio = t->cc;
    }
    double max_vs[5] = {0}; /* by dtype value */
    for (size_t di = 0; di < n_dt; di++) max_vs[dts[di]] = tg[di].vs16;
    if (json) {
        printf("{\"bench\":\"attn\",\"threads\":%ld,\"simd\":\"%s\",\"fp8_codec\":\"%s\",\"kv_page_kib\":%d,"
               "\"read_gbps\":%.6g,\"memcpy_gbps\":%.6g",
               threads, fkv_simd_path(), fkv_fp8_path(), fkv__big_hugepages() ? 2048 : 4, read_gbps, memcpy_gbps);
        for (int prefill = 0; prefill < 2; prefill++) {
            printf(",\"%s\":[", prefill ? "prefill" : "decode");
            int first = 1;
            for (size_t i = 0; i < nres; i++) {
                if (res[i].prefill != prefill) continue;
                printf("%s{\"ctx\":%u,\"dtype\":\"%s\",\"layout\":\"%s\",\"%s\":%zu,\"ms\":%.6g,\"%s\":%.6g", first ? "" : ",",
                       res[i].ctx, dname(res[i].dt), res[i].contiguous ? "contiguous" : "chunked",
                       prefill ? "seqs" : "batch", res[i].batch, res[i].ms, prefill ? "gflops" : "gbps", res[i].gbps);
                if (!prefill) printf(",\"read_fraction\":%.6g", res[i].gbps / read_gbps);
                if (prefill) printf(",\"n_q\":%d", PREFILL_Q);
                if (res[i].vs_fp16 > 0) printf(",\"time_vs_fp16\":%.6g", res[i].vs_fp16);
                printf(",\"chunked_over_contiguous\":%.6g", res[i].chk_cont);
                if (res[i].nmse >= 0) printf(",\"nmse_vs_scalar\":%.3e", res[i].nmse);
                printf("}");
                first = 0;
            }
            printf("]");
        }
        printf(",\"bytes_vs_fp16\":{\"fp8\":%.4f,\"int8\":%.4f,\"int4\":%.4f}", rf8, r8, r4);
        printf(",\"codec_gbps\":{");
        int first = 1;
        for (size_t di = 0; di < n_dt; di++)
            if (q_time[dts[di]] > 0) {
                fkv_dtype d = dts[di];
                printf("%s\"quant_%s\":%.3f,\"dequant_%s\":%.3f", first ? "" : ",", dname(d), q_bytes[d] / q_time[d] / 1e9,
                       dname(d), dq_bytes[d] / dq_time[d] / 1e9);
                first = 0;
            }
        printf("},\"per_dtype\":{");
        for (size_t di = 0; di < n_dt; di++) {
            printf("%s\"%s\":{\"max_chunked_over_contiguous\":%.4f", di ? "," : "", dname(dts[di]), tg[di].cc);
            if (tg[di].frac < 1e9) printf(",\"min_read_fraction_ge4k\":%.4f", tg[di].frac);
            if (tg[di].vs16 > 0) printf(",\"max_time_vs_fp16\":%.4f", tg[di].vs16);
            if (tg[di].pvs16 > 0) printf(",\"prefill_max_time_vs_fp16\":%.4f", tg[di].pvs16);
            if (tg[di].pcc > 0) printf(",\"prefill_max_chunked_over_contiguous\":%.4f", tg[di].pcc);
            printf("}");
        }
        printf("},\"targets\":{\"min_read_fraction_ge4k\":%.3f,\"max_chunked_over_contiguous\":%.3f,"
               "\"max_int8_over_fp16_time\":%.3f,\"max_int4_over_fp16_time\":%.3f,\"max_fp8_over_fp16_time\":%.3f}}\n",
               worst_frac < 1e9 ? worst_frac : 0, worst_ratio, max_vs[FKV_INT8], max_vs[FKV_INT4], max_vs[FKV_FP8]);
    } else {
        printf("bytes vs fp16 (64-token chunk, scales included): fp8 %.3f, int8 %.3f, int4 %.3f\n", rf8, r8, r4);
        printf("codec, one thread, GB/s of fp16 data:");
        for (size_t di = 0; di < n_dt; di++)
            if (q_time[dts[di]] > 0)
                printf(" %s quantize %.2f dequantize %.2f;", dname(dts[di]), q_bytes[dts[di]] / q_time[dts[di]] / 1e9,
                       dq_bytes[dts[di]] / dq_time[dts[di]] / 1e9);
        printf("\ntargets by format (decode; time vs fp16: worst over contexts and layouts):\n");
        printf("  %-5s %22s %26s %24s\n", "dtype", ">=4k %read (>= 60%)", "time vs fp16", "chunked/contig (<= 1.10)");
        for (size_t di = 0; di < n_dt; di++) {
            fkv_dtype d = dts[di];
            const struct tgt *t = &tg[di];
            double lim = d == FKV_INT8 ? 0.6 : d == FKV_INT4 ? 0.4 : 0;
            char a[32] = "-", b[40] = "-";
            if (t->frac < 1e9) snprintf(a, sizeof a, "%.0f%% %s", 100 * t->frac, t->frac >= 0.6 ? "met" : "NOT met");
            if (t->vs16 > 0 && lim > 0)
                snprintf(b, sizeof b, "%.3f (<= %.1f) %s", t->vs16, lim, t->vs16 <= lim ? "met" : "NOT met");
            else if (t->vs16 > 0) snprintf(b, sizeof b, "%.3f", t->vs16);
            printf("  %-5s %22s %26s %14.3f %s\n", dname(d), a, b, t->cc, t->cc <= 1.10 ? "met" : "NOT met");
        }
        printf("prefill by format: worst time vs fp16, worst chunked/contiguous:");
        for (size_t di = 0; di < n_dt; di++) printf(" %s %.3f %.3f;", dname(dts[di]), tg[di].pvs16, tg[di].pcc);
        printf("\n");
    }
    free(res);
    fkv_attn_pool_destroy(pool);
    return 0;
}
