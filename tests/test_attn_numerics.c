/* Attention kernels where softmax arithmetic goes wrong: logits of several
 * hundred (positive, negative, and 1e4-sized outlier key channels), a
 * running max that grows or shrinks along the sequence (the online
 * rescale and the merge of decode ranges with different maxima), keys
 * masked by huge negative scores (whole chunks, a whole decode range,
 * scattered tokens), dropped (evicted) chunks that would dominate if
 * read, and one dominant key per kv head (the output must be that key's
 * value row; in prefill, queries before it must not see it).
 *
 * Every K/V dtype the kernels read (fp32, fp16 chunks of their base, int8
 * and int4 over either base, mixed), decode and causal prefill, both vector
 * paths, 1 and 3 threads.  The reference is a max-subtracted softmax in
 * double over exactly the values the kernel reads (the fp16 values, or
 * code * scale + zero of quantized chunks, decoded here from the layout in
 * fairkv_quant.h), so the bound is the kernel's own float rounding:
 *   logit error   d <= gamma(D+4) * scale * sum_j |q_j| |k_j|  (|k_j| =
 *                 |code*scale| + |zero| for codes), over the keys within
 *                 40 of the max (the others weigh below e^-40);
 *   output error  <= 2.2 d * sum_t p_t |v_t - out| + (2 gamma(n) + 2^-19)
 *                 * sum_t p_t |v_t|  (softmax sensitivity; sums of n terms
 *                 and the exp approximation).
 * A softmax without the max subtraction overflows (NaN) or underflows (0)
 * here; a wrong rescale or merge weight is off by O(1). */
#include <stdio.h>

#include "attn_fixture.h"
#include "quant/layout.h"
#include "quant/simd.h"

#define U 0x1p-24
static double gamma_n(double n) { return n * U / (1 - n * U); }

enum scen { S_POS, S_NEG, S_RAMP, S_DOM, S_MASK, S_DROP, S_OUTLIER, S_COUNT };
static const char *const scen_name[] = {"logits +400", "logits -400", "ramp +-8 over +300", "dominant key",
                                        "masked keys", "dropped chunks", "outlier channel 1e4"};

/* key channels with a role (the others are unit noise) */
enum { C_OFF = 0, C_RAMP = 1, C_DOM = 2, C_MASK = 3, C_OUT = 5 };
#define OFF_K 4.0     /* C_OFF of every key */
#define DOM_GAP 200.0 /* logit a dominant key gets above the rest */

static int n_cases;
static double worst_ratio; /* largest error / bound seen */

/* The values the kernel reads for layer `layer`: kd, vd [n][E] and their
 * magnitudes as the kernel sums them (|x|, or |code*scale| + |zero|). */
typedef struct eff {
    double *kd, *vd, *km, *vm;
} eff;

static void effective(const fx *f, const fxseq *s, uint32_t layer, eff *o)
{
    const fkv_kv_geom *g = &f->g;
    const size_t D = g->head_dim, H = g->n_kv_heads, E = H * D;
    const uint64_t stride = fkv_kv_page_bytes(g);
    for (size_t ci = 0; ci < s->n_chunks; ci++) {
        const fkv_chunk_view *c = s->tab[ci];
        const uint32_t tpp = fkv_quant_tokens_per_page(g, c->dtype), N = c->n_tokens;
        const uint64_t rb = fkv__row_bytes(g, c->dtype);
        const int quant = c->dtype == FKV_INT8 || c->dtype == FKV_INT4;
        const uint16_t *lm = quant ? (const uint16_t *)c->qmeta + layer * fkv__layer_meta_elems(g, c->dtype, N) : NULL;
        for (int is_v = 0; is_v < 2; is_v++) {
            const char *arr = is_v ? f->layers[layer].v : f->layers[layer].k;
            double *xd = is_v ? o->vd : o->kd, *xm = is_v ? o->vm : o->km;
            for (uint32_t t = 0; t < N; t++) {
                const unsigned char *row = (const unsigned char *)arr + c->pages[t / tpp] * stride + (t % tpp) * rb;
                for (size_t h = 0; h < H; h++)
                    for (size_t d = 0; d < D; d++) {
                        const size_t e = h * D + d, i = (size_t)(c->start + t) * E + e;
                        double x, m;
                        if (c->dtype == FKV_F32) {
                            float y;
                            memcpy(&y, row + 4 * e, 4);
                            x = y, m = fabs(x);
                        } else if (c->dtype == FKV_F16) {
                            uint16_t y;
                            memcpy(&y, row + 2 * e, 2);
                            x = fkv_f16_to_f32(y), m = fabs(x);
                        } else {
                            unsigned code = c->dtype == FKV_INT8 ? row[e] : (row[e / 2] >> (4 * (e & 1))) & 15u;
                            double sc, z;
                            if (!is_v) {
                                const uint16_t *km = fkv__kmeta(lm, g, N, (uint32_t)h, t / FKV_QK_GROUP);
                                sc = fkv_f16_to_f32(km[d]), z = fkv_f16_to_f32(km[D + d]);
                            } else {
                                const uint16_t *vm = fkv__vmeta(lm, g, c->dtype, N, (uint32_t)h, (uint32_t)(d / fkv__vgroup(c->dtype)));
                                sc = fkv_f16_to_f32(vm[t]), z = fkv_f16_to_f32(vm[N + t]);
                            }
                            x = code * sc + z, m = fabs(code * sc) + fabs(z);
                        }
                        xd[i] = x, xm[i] = m;
                    }
            }
        }
    }
}

/* Reference for one query row (head h, query q[D]) at position qpos over
 * the kept chunks; out[D] and the bound tol[D] (tol has room for 3*D: the
 * rest is scratch); returns the probability of token `dom` (0 if it is not
 * attended). */
static double reference(const fx *f, const fxseq *s, const eff *e, const uint8_t *keep, uint32_t kvh,
                        const float *q, uint32_t qpos, double scale, double *lg, double *out, double *tol,
                        uint32_t dom)
{
    const size_t D = f->g.head_dim, E = f->g.n_kv_heads * D;
    double mx = -INFINITY;
    for (size_t ci = 0; ci < s->n_chunks; ci++)
        for (uint32_t t = s->tab[ci]->start; t < s->tab[ci]->start + s->tab[ci]->n_tokens; t++) {
            lg[t] = -INFINITY;
            if ((keep && !keep[ci]) || t > qpos) continue;
            double a = 0;
            for (size_t d = 0; d < D; d++) a += (double)q[d] * e->kd[t * E + kvh * D + d];
            lg[t] = a * scale;
            mx = lg[t] > mx ? lg[t] : mx;
        }
    double sum = 0, smag = 0;
    uint32_t n = 0;
    for (uint32_t t = 0; t < s->n; t++) {
        if (lg[t] == -INFINITY) continue;
        n++;
        if (lg[t] >= mx - 40) { /* the keys that matter: their logits' rounding */
            double a = 0;
            for (size_t d = 0; d < D; d++) a += fabs((double)q[d]) * e->km[t * E + kvh * D + d];
            smag = a * scale > smag ? a * scale : smag;
        }
        sum += (lg[t] = exp(lg[t] - mx));
    }
    for (size_t d = 0; d < D; d++) out[d] = 0;
    double pdom = 0, *spread = tol + D, *mag = spread + D;
    for (size_t d = 0; d < D; d++) spread[d] = mag[d] = 0;
    for (uint32_t t = 0; t < s->n; t++) /* probabilities (in lg); exp underflows to 0 for masked keys */
        if (lg[t] != -INFINITY && (lg[t] /= sum) > 0) {
            if (t == dom) pdom = lg[t];
            for (size_t d = 0; d < D; d++) out[d] += lg[t] * e->vd[t * E + kvh * D + d];
        }
    for (uint32_t t = 0; t < s->n; t++)
        if (lg[t] != -INFINITY && lg[t] > 1e-30) /* the rest adds below n * 1e-30 * |v| */
            for (size_t d = 0; d < D; d++) {
                spread[d] += lg[t] * fabs(e->vd[t * E + kvh * D + d] - out[d]);
                mag[d] += lg[t] * e->vm[t * E + kvh * D + d];
            }
    const double delta = gamma_n((double)D + 4) * smag;
    for (size_t d = 0; d < D; d++) tol[d] = 2.2 * delta * spread[d] + (2 * gamma_n((double)n + D) + 0x1p-19) * mag[d];
    return pdom;
}

typedef struct cfg {
    const char *name;
    fkv_dtype base;
    const fkv_dtype *dts;
    int n_dts;
} cfg;

/* cheap unit-variance noise (sum of four uniforms), within +-3.5 */
static float noise(rng *r)
{
    return (float)((rng_unif(r) + rng_unif(r) + rng_unif(r) + rng_unif(r) - 2.0) * 1.7320508075688772);
}

/* S_DROP: up to three chunks in the middle (never the first or the last) */
static int dropped(size_t ci, size_t nc) { return ci >= 1 && ci + 2 <= nc && ci + 1 >= nc / 2 && ci <= nc / 2 + 1; }

static int is_quant(fkv_dtype t) { return t == FKV_INT8 || t == FKV_INT4; }

static void run_case(rng *r, const cfg *cf, enum scen sc, int prefill, fkv_attn_pool *pool)
{
    fkv_kv_geom g = {0};
    g.n_layers = 2;
    g.n_kv_heads = 2;
    g.head_dim = rng_below(r, 2) ? 64 : 40;
    g.page_tokens = rng_below(r, 2) ? 16 : 8;
    g.base = cf->base;
    g.n_pages = 512;
    fx f;
    fx_init(&f, g, r);
    const uint32_t D = g.head_dim, E = 2 * D, ratio = rng_below(r, 2) ? 4 : 1, NH = 2 * ratio, layer = 1;
    /* decode: 1100 tokens make 4 ranges on one thread, 5 on three (at least
     * 256 tokens each), so the merge has work; prefill: 18 queries (a full
     * block of 16 and a partial one) at the end, 3 tokens before the end */
    const uint32_t n = prefill ? 320 : 1100, nq = prefill ? 18 : 1, qpos0 = prefill ? n - nq - 3 : n - 1;
    const double sqd = sqrt((double)D), scale = 1.0 / sqd;

    /* chunk plan: 40..100 tokens each, dtypes drawn from the config */
    uint32_t lens[64];
    fkv_dtype dts[64];
    size_t nc = 0;
    for (uint32_t pos = 0; pos < n; nc++) {
        uint32_t len = 40 + rng_below(r, 61);
        lens[nc] = len < n - pos ? len : n - pos;
        dts[nc] = cf->dts[rng_below(r, (uint32_t)cf->n_dts)];
        pos += lens[nc];
    }
    int fp16_range = 0; /* some chunk stores fp16 or codes: mask values must stay within +-65504 */
    for (size_t i = 0; i < nc; i++) fp16_range |= dts[i] != FKV_F32;

    fxseq s;
    fx_seq_alloc(&f, &s, n);
    /* layer 0 all zero (reading it instead of layer 1 gives 0); in layer 1
     * noise, the role channels of every key at 0, and values with a mean
     * that grows along the sequence, so a wrong weighting of early against
     * late tokens (or ranges) shows in the output */
    memset(s.k, 0, (size_t)n * E * sizeof(float));
    memset(s.v, 0, (size_t)n * E * sizeof(float));
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < 2; h++) {
            float *k = s.k + ((size_t)layer * n + t) * E + h * D, *v = s.v + ((size_t)layer * n + t) * E + h * D;
            for (uint32_t d = 0; d < D; d++) {
                k[d] = noise(r);
                v[d] = noise(r) + 1.0f + 2.0f * (float)t / (float)(n - 1);
            }
            k[C_OFF] = k[C_RAMP] = k[C_DOM] = k[C_MASK] = 0.0f;
        }
    uint8_t keep[64];
    memset(keep, 1, sizeof keep);
    uint32_t dom[2] = {UINT32_MAX, UINT32_MAX}; /* per kv head */
    const double kmask = fp16_range ? -60000.0 : -1e15, qmask = fp16_range ? 1000.0 : 1e15;
    for (uint32_t t = 0, ci = 0, cs = 0; t < n; t++) {
        while (t >= cs + lens[ci]) cs += lens[ci++];
        const uint32_t cend = cs + lens[ci];
        for (uint32_t h = 0; h < 2; h++) {
            float *k = s.k + ((size_t)layer * n + t) * E + h * D;
            switch (sc) {
            case S_POS: case S_NEG: case S_DOM: case S_MASK: case S_DROP:
                k[C_OFF] = (float)OFF_K;
                break;
            case S_RAMP: /* head 0: the max grows along the sequence; head 1: it shrinks */
                k[C_OFF] = (float)OFF_K;
                k[C_RAMP] = (float)(2.0 * (h ? n - 1 - t : t) / (n - 1));
                break;
            case S_OUTLIER: /* logits of +-1e4 q_5 / sqrt(D), varying by O(1) */
                k[C_OUT] = (float)(1e4 + 30.0 * noise(r));
                break;
            default:
                break;
            }
            if (sc == S_MASK) {
                /* the first chunk, the chunks within [n/4, 4n/5) (one
                 * decode range at least), every 7th token of float chunks */
                int whole = ci == 0 || (cs >= n / 4 && cend <= 4 * n / 5);
                if (whole || (!is_quant(dts[ci]) && t % 7 == 3 && t < qpos0)) k[C_MASK] = (float)kmask;
            }
            if (sc == S_DROP && dropped(ci, nc)) k[C_DOM] = 1.0f; /* would dominate */
        }
    }
    if (sc == S_DOM) {
        /* kv head 0: inside the query block (prefill) or anywhere; kv head 1:
         * the first or the last token */
        dom[0] = prefill ? qpos0 + 4 + rng_below(r, nq - 8) : rng_below(r, n);
        dom[1] = rng_below(r, 2) ? 0 : n - 1;
        for (uint32_t h = 0; h < 2; h++) s.k[((size_t)layer * n + dom[h]) * E + h * D + C_DOM] = 1.0f;
    }
    fx_seq_place(&f, &s, lens, dts, nc);
    REQUIRE(s.n_chunks == nc);
    /* dropped chunks: not kept, and evicted (no pages to read) */
    const uint32_t *saved[64] = {0};
    if (sc == S_DROP)
        for (size_t ci = 0; ci < nc; ci++) {
            if (!dropped(ci, nc)) continue;
            keep[ci] = 0;
            saved[ci] = s.views[ci].pages;
            s.views[ci].pages = NULL;
            s.views[ci].resident = 0;
        }

    eff e;
    e.kd = malloc((size_t)n * E * sizeof(double));
    e.vd = malloc((size_t)n * E * sizeof(double));
    e.km = malloc((size_t)n * E * sizeof(double));
    e.vm = malloc((size_t)n * E * sizeof(double));
    REQUIRE(e.kd && e.vd && e.km && e.vm);
    {
        fxseq live = s; /* effective values of the chunks that are resident */
        fkv_chunk_view *tmp[64];
        size_t m = 0;
        for (size_t ci = 0; ci < nc; ci++)
            if (keep[ci]) tmp[m++] = &s.views[ci];
        live.tab = (const fkv_chunk_view **)tmp;
        live.n_chunks = m;
        effective(&f, &live, layer, &e);
        for (size_t ci = 0; ci < nc; ci++) /* dropped: whatever they held, never read */
            if (!keep[ci])
                for (size_t i = (size_t)s.views[ci].start * E; i < (size_t)(s.views[ci].start + s.views[ci].n_tokens) * E; i++)
                    e.kd[i] = e.vd[i] = e.km[i] = e.vm[i] = 0;
    }

    /* queries: unit noise on every channel, the role channels set */
    const size_t qn = (size_t)nq * NH * D;
    float *q = malloc(qn * sizeof *q), *out = malloc(qn * sizeof *out);
    REQUIRE(q && out);
    for (size_t i = 0; i < qn; i++) q[i] = noise(r);
    for (size_t row = 0; row < (size_t)nq * NH; row++) {
        float *qr = q + row * D;
        if (sc == S_OUTLIER) continue;
        qr[C_OFF] = (float)((sc == S_NEG ? -400.0 : sc == S_POS ? 400.0 : 300.0) * sqd / OFF_K);
        qr[C_RAMP] = (float)(8.0 * sqd / 2.0);
        qr[C_DOM] = (float)(DOM_GAP * sqd);
        qr[C_MASK] = (float)qmask;
    }
    fkv_attn_kv kv = {&f.g, layer, f.layers[layer].k, f.layers[layer].v};
    fkv_attn_seq as = {s.tab, s.n_chunks, sc == S_DROP ? keep : NULL, NULL};
    char err[256] = "";
    fkv_status st = prefill ? fkv_attn_prefill(pool, &kv, NH, &as, qpos0, nq, q, out, (float)scale, err, sizeof err)
                            : fkv_attn_decode(pool, &kv, NH, &as, 1, q, out, (float)scale, err, sizeof err);
    CHECKF(st == FKV_OK, "%s", err);

    double *lg = malloc(n * sizeof *lg), *ref = malloc(D * sizeof *ref), *tol = malloc(3 * D * sizeof *tol);
    REQUIRE(lg && ref && tol);
    int bad = 0, nonfin = 0, bad_dom = 0;
    double worst = 0;
    for (uint32_t a = 0; a < nq; a++)
        for (uint32_t h = 0; h < NH; h++) {
            const uint32_t kvh = h / ratio, qpos = qpos0 + a;
            const float *qr = q + ((size_t)a * NH + h) * D, *o = out + ((size_t)a * NH + h) * D;
            double pdom = reference(&f, &s, &e, sc == S_DROP ? keep : NULL, kvh, qr, qpos, scale, lg, ref, tol, dom[kvh]);
            int sees_dom = dom[kvh] <= qpos;
            if (sees_dom) REQUIRE(1.0 - pdom < 1e-30); /* the setup: the key does dominate */
            for (uint32_t d = 0; d < D; d++) {
                if (!isfinite(o[d])) {
                    nonfin++;
                    continue;
                }
                double err_d = fabs(o[d] - ref[d]);
                if (err_d / tol[d] > worst) worst = err_d / tol[d];
                if (!(err_d <= tol[d]) && bad++ < 3)
                    fprintf(stderr, "%s, %s, %s, %s: q%u head %u ch %u: out %.9g, reference %.9g, bound %.3g\n",
                            cf->name, scen_name[sc], prefill ? "prefill" : "decode", fkv__simd()->name, a, h, d,
                            o[d], ref[d], tol[d]);
                /* the dominant key's value row itself */
                if (sees_dom && !(fabs(o[d] - e.vd[(size_t)dom[kvh] * E + kvh * D + d]) <= tol[d]) && bad_dom++ < 3)
                    fprintf(stderr, "%s, %s: q%u head %u ch %u: out %.9g, dominant value %.9g\n", cf->name,
                            prefill ? "prefill" : "decode", a, h, d, o[d], e.vd[(size_t)dom[kvh] * E + kvh * D + d]);
            }
        }
    CHECKF(nonfin == 0, "%s, %s, %s, %s: %d outputs not finite", cf->name, scen_name[sc],
           prefill ? "prefill" : "decode", fkv__simd()->name, nonfin);
    CHECKF(bad == 0, "%s, %s, %s, %s: %d outputs off the reference (D %u, ratio %u)", cf->name, scen_name[sc],
           prefill ? "prefill" : "decode", fkv__simd()->name, bad, D, ratio);
    CHECKF(bad_dom == 0, "%s, %s: %d outputs off the dominant key's value", cf->name, prefill ? "prefill" : "decode",
           bad_dom);
    if (worst > worst_ratio) worst_ratio = worst;
    n_cases++;

    for (size_t ci = 0; ci < nc; ci++)
        if (saved[ci]) s.views[ci].pages = saved[ci];
    free(lg), free(ref), free(tol), free(q), free(out);
    free(e.kd), free(e.vd), free(e.km), free(e.vm);
    fx_seq_free(&s);
    fx_free(&f);
}

int main(void)
{
    rng r = {4242};
    fkv_attn_pool *p3 = NULL;
    REQUIRE(fkv_attn_pool_create(3, &p3) == FKV_OK);
    static const fkv_dtype f32[] = {FKV_F32}, f16[] = {FKV_F16}, i8[] = {FKV_INT8}, i4[] = {FKV_INT4},
                           mix16[] = {FKV_F16, FKV_INT8, FKV_INT4}, mix32[] = {FKV_F32, FKV_INT8, FKV_INT4};
    static const cfg cfgs[] = {
        {"f32", FKV_F32, f32, 1},           {"f16", FKV_F16, f16, 1},
        {"int8 (f32 base)", FKV_F32, i8, 1}, {"int8 (f16 base)", FKV_F16, i8, 1},
        {"int4 (f32 base)", FKV_F32, i4, 1}, {"int4 (f16 base)", FKV_F16, i4, 1},
        {"f16/int8/int4", FKV_F16, mix16, 3}, {"f32/int8/int4", FKV_F32, mix32, 3},
    };
    /* scalar, the best path, AVX2's kernels where AVX-512's are the best, and
     * AVX-512's FMA kernels where the VNNI ones are */
    const int paths = fkv__simd_vnni_ops() ? 4 : fkv__simd_avx512_ops() ? 3 : fkv__simd_avx2_ops() ? 2 : 1;
    for (int p = 0; p < paths; p++) {
        fkv__simd_force(p);
        for (int c = 0; c < (int)(sizeof cfgs / sizeof cfgs[0]); c++)
            for (int sc = 0; sc < S_COUNT; sc++)
                for (int pre = 0; pre < 2; pre++) {
                    /* under sanitizers (scale < 1) each case on one of the two paths */
                    if (paths >= 2 && check_scale() < 1 && (c + sc + pre + p) % paths) continue;
                    run_case(&r, &cfgs[c], (enum scen)sc, pre, (c + sc) % 2 ? p3 : NULL);
                }
    }
    fkv__simd_force(1);
    fkv_attn_pool_destroy(p3);
    printf("%d cases, worst error / bound %.3g\n", n_cases, worst_ratio);
    return check_done();
}
