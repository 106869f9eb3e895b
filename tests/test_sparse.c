/* Sparsity modes: which chunks streaming and h2o keep for a budget, that
 * attention with a keep mask equals dense attention restricted to the kept
 * chunks (dropped chunks may even be evicted), and that the decode kernel's
 * H2O accumulator adds each chunk's attention probability. */
#include <stdio.h>

#include "attn_fixture.h"

static void views_of(fkv_chunk_view *v, const fkv_chunk_view **tab, size_t n, uint32_t len)
{
    static const uint32_t page = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].start = (uint32_t)i * len;
        v[i].n_tokens = len;
        v[i].resident = 1;
        v[i].pages = &page;
        tab[i] = &v[i];
    }
}

static void selection(void)
{
    fkv_chunk_view v[20];
    const fkv_chunk_view *tab[20];
    uint8_t keep[20];
    uint32_t kept;
    views_of(v, tab, 20, 64);
    /* streaming, budget 256 = first chunk + the last three */
    fkv_sparse_config sc = {FKV_SPARSE_STREAMING, 256, 0};
    CHECK(fkv_sparse_select(&sc, tab, 20, NULL, keep, &kept) == FKV_OK);
    CHECK(kept == 256 && keep[0] && keep[17] && keep[18] && keep[19]);
    int others = 0;
    for (int i = 1; i < 17; i++) others += keep[i];
    CHECK(others == 0);
    /* an evicted sink is not kept; the window does not grow into its place
     * past an evicted chunk either */
    v[0].resident = 0, v[0].pages = NULL;
    v[17].resident = 0, v[17].pages = NULL;
    CHECK(fkv_sparse_select(&sc, tab, 20, NULL, keep, &kept) == FKV_OK);
    CHECK(!keep[0] && !keep[17] && keep[18] && keep[19] && kept == 128);
    views_of(v, tab, 20, 64);
    /* budget below one chunk: the last chunk alone */
    sc.budget_tokens = 10;
    CHECK(fkv_sparse_select(&sc, tab, 20, NULL, keep, &kept) == FKV_OK && kept == 64 && keep[19]);
    /* h2o: recent window of 128 (budget/2), then the two heaviest that fit */
    float mass[20];
    for (int i = 0; i < 20; i++) mass[i] = (float)i * 0.01f;
    mass[3] = 5.0f, mass[11] = 4.0f, mass[7] = 4.0f, mass[19] = 9.0f;
    fkv_sparse_config hc = {FKV_SPARSE_H2O, 256, 0};
    CHECK(fkv_sparse_select(&hc, tab, 20, mass, keep, &kept) == FKV_OK);
    CHECK(kept == 256 && keep[18] && keep[19] && keep[3] && keep[7]); /* 7 and 11 tie: the earlier */
    CHECK(!keep[11] && !keep[0]);
    hc.recent_tokens = 64;
    CHECK(fkv_sparse_select(&hc, tab, 20, mass, keep, &kept) == FKV_OK);
    CHECK(keep[19] && !keep[18] && keep[3] && keep[7] && keep[11] && kept == 256);
    CHECK(fkv_sparse_select(&hc, tab, 20, NULL, keep, &kept) == FKV_EINVAL);
    fkv_sparse_config dc = {FKV_SPARSE_DENSE, 0, 0};
    v[5].resident = 0;
    CHECK(fkv_sparse_select(&dc, tab, 20, NULL, keep, &kept) == FKV_OK && kept == 19 * 64 && !keep[5]);
    fkv_sparse_mode m;
    CHECK(fkv_sparse_mode_parse("h2o", &m) == FKV_OK && m == FKV_SPARSE_H2O);
    CHECK(fkv_sparse_mode_parse("streaming", &m) == FKV_OK && m == FKV_SPARSE_STREAMING);
    CHECK(fkv_sparse_mode_parse("dense", &m) == FKV_OK && m == FKV_SPARSE_DENSE);
    CHECK(fkv_sparse_mode_parse("lru", &m) == FKV_ENOENT);
}

/* kernels with a keep mask vs the fp64 reference over the kept chunks */
static void masked_attention(rng *r, fkv_attn_pool *pool, fkv_sparse_mode mode, fkv_dtype base,
                             const fkv_dtype *dts, int n_dt)
{
    fkv_kv_geom g = {1, 2, 64, 16, base, 0, 2048};
    fx f;
    fx_init(&f, g, r);
    fxseq s;
    fx_seq(&f, &s, 1500 + rng_below(r, 500), 96, dts, n_dt, 1, r);
    const uint32_t n_heads = 8;
    const float scale = 0.125f;
    uint8_t *keep = malloc(s.n_chunks);
    float *mass = calloc(s.n_chunks, sizeof *mass), *mass0 = calloc(s.n_chunks, sizeof *mass0);
    double *pm = calloc(s.n_chunks, sizeof *pm);
    REQUIRE(keep && mass && mass0 && pm);
    for (size_t i = 0; i < s.n_chunks; i++) mass0[i] = (float)rng_unif(r);
    fkv_sparse_config cfg = {mode, 600, 0};
    uint32_t kept;
    REQUIRE(fkv_sparse_select(&cfg, s.tab, s.n_chunks, mass0, keep, &kept) == FKV_OK);
    CHECK(kept <= 600 || mode == FKV_SPARSE_DENSE);
    /* dropped chunks can be evicted: the kernels must not touch them */
    const uint32_t **saved = malloc(s.n_chunks * sizeof *saved);
    REQUIRE(saved);
    for (size_t i = 0; i < s.n_chunks; i++) {
        saved[i] = s.views[i].pages;
        if (!keep[i]) s.views[i].resident = 0, s.views[i].pages = NULL;
    }
    float q[8 * 64], out[8 * 64];
    double ref[8 * 64];
    for (int i = 0; i < 8 * 64; i++) q[i] = (float)rng_gauss(r);
    fkv_attn_kv kv = {&f.g, 0, f.layers[0].k, f.layers[0].v};
    fkv_attn_seq as = {s.tab, s.n_chunks, keep, mass};
    char err[256] = "";
    CHECKF(fkv_attn_decode(pool, &kv, n_heads, &as, 1, q, out, scale, err, sizeof err) == FKV_OK, "%s", err);
    fx_ref(&f, &s, 0, keep, n_heads, q, s.n - 1, scale, ref, pm);
    double e = fx_nmse(ref, out, 8 * 64);
    fkv_dtype lo = fx_lowest(&s, keep);
    CHECKF(e <= fx_bound(lo), "%s decode nmse %.3g (lowest %d)", fkv_sparse_mode_name(mode), e, (int)lo);
    /* H2O accumulator: per-chunk probability mass summed over heads */
    double total = 0;
    int bad = 0;
    for (size_t i = 0; i < s.n_chunks; i++) {
        total += mass[i];
        if (!keep[i] && mass[i] != 0.0f) bad++;
        /* exact up to fp32 rounding on fp32 chunks; quantized chunks move
         * the probabilities themselves by their logit error */
        double tol = lo == FKV_F32 ? 1e-5 + 1e-5 * pm[i] : 1e-2 + 0.1 * pm[i];
        if (keep[i] && fabs(mass[i] - pm[i]) > tol) bad++;
    }
    CHECKF(fabs(total - n_heads) < 1e-3, "mass sums to %.6f, not %u", total, n_heads);
    CHECK(bad == 0);
    /* prefill with the same mask: the last 20 tokens as queries */
    uint32_t nq = 20, pos0 = s.n - nq;
    float *pq = malloc(nq * 8 * 64 * sizeof *pq), *po = malloc(nq * 8 * 64 * sizeof *po);
    double *pr = malloc(nq * 8 * 64 * sizeof *pr);
    REQUIRE(pq && po && pr);
    for (uint32_t i = 0; i < nq * 8 * 64; i++) pq[i] = (float)rng_gauss(r);
    CHECKF(fkv_attn_prefill(pool, &kv, n_heads, &as, pos0, nq, pq, po, scale, err, sizeof err) == FKV_OK, "%s", err);
    for (uint32_t i = 0; i < nq; i++) fx_ref(&f, &s, 0, keep, n_heads, pq + i * 512, pos0 + i, scale, pr + i * 512, NULL);
    e = fx_nmse(pr, po, (size_t)nq * 512);
    CHECKF(e <= fx_bound(lo), "%s prefill nmse %.3g", fkv_sparse_mode_name(mode), e);
    /* a dropped chunk that is evicted but marked kept is an error */
    for (size_t i = 0; i < s.n_chunks; i++)
        if (!keep[i]) {
            keep[i] = 1;
            CHECK(fkv_attn_decode(pool, &kv, n_heads, &as, 1, q, out, scale, err, sizeof err) == FKV_ESTATE);
            break;
        }
    for (size_t i = 0; i < s.n_chunks; i++) s.views[i].pages = saved[i];
    free(saved);
    free(pq), free(po), free(pr), free(keep), free(mass), free(mass0), free(pm);
    fx_seq_free(&s);
    fx_free(&f);
}

int main(void)
{
    selection();
    rng r = {77};
    fkv_attn_pool *p3;
    REQUIRE(fkv_attn_pool_create(3, &p3) == FKV_OK);
    static const fkv_dtype f32[] = {FKV_F32}, mix[] = {FKV_F16, FKV_INT8, FKV_INT4};
    for (int mode = FKV_SPARSE_DENSE; mode <= FKV_SPARSE_H2O; mode++)
        for (int i = 0; i < 3; i++) {
            masked_attention(&r, i ? p3 : NULL, (fkv_sparse_mode)mode, FKV_F32, f32, 1);
            masked_attention(&r, i ? p3 : NULL, (fkv_sparse_mode)mode, FKV_F16, mix, 3);
        }
    fkv_attn_pool_destroy(p3);
    return check_done();
}
