/* The block codecs (fairkv_quant.h, "block codecs"): E4M3 exact at every
 * code and rounding to nearest even between them, the AVX-512 conversions
 * equal to the scalar reference, the Hadamard rotation keeping dot
 * products, every codec's round trip within the bound its format gives
 * (keys with outlier channels), bytes against fp16 from the layouts, and
 * bad input refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fixture.h"
#include "quant/simd.h"

static void test_e4m3_codes(void)
{
    CHECK(fkv_e4m3_to_f32(0x7e) == 448.0f);
    CHECK(fkv_e4m3_to_f32(0x38) == 1.0f);
    CHECK(fkv_e4m3_to_f32(0x08) == 0.015625f);        /* smallest normal 2^-6 */
    CHECK(fkv_e4m3_to_f32(0x01) == 0.001953125f);     /* smallest subnormal 2^-9 */
    CHECK(fkv_e4m3_to_f32(0xbc) == -1.5f);
    CHECK(fkv_e4m3_to_f32(0x00) == 0.0f && !signbit(fkv_e4m3_to_f32(0x00)) && signbit(fkv_e4m3_to_f32(0x80)));
    /* every finite code encodes back to itself; values grow with the code */
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) continue;
        CHECKF(fkv_f32_to_e4m3(fkv_e4m3_to_f32((uint8_t)c)) == c, "code 0x%02x", c);
        if ((c & 0x7f) && (c & 0x7f) < 0x7e)
            CHECK(fabsf(fkv_e4m3_to_f32((uint8_t)(c + 1))) > fabsf(fkv_e4m3_to_f32((uint8_t)c)));
    }
    /* between neighbours: the midpoint goes to the even code, one ulp off it to the nearer */
    for (int c = 0; c < 0x7e; c++) {
        float a = fkv_e4m3_to_f32((uint8_t)c), b = fkv_e4m3_to_f32((uint8_t)(c + 1)), m = (a + b) / 2;
        CHECKF(fkv_f32_to_e4m3(m) == (c % 2 ? c + 1 : c), "midpoint of 0x%02x", c);
        CHECK(fkv_f32_to_e4m3(nextafterf(m, 1e9f)) == c + 1);
        CHECK(fkv_f32_to_e4m3(nextafterf(m, -1e9f)) == c);
        CHECK(fkv_f32_to_e4m3(-nextafterf(m, 1e9f)) == (0x80 | (c + 1)));
    }
    /* saturation, as CUDA's satfinite conversion */
    CHECK(fkv_f32_to_e4m3(460.0f) == 0x7e);
    CHECK(fkv_f32_to_e4m3(1e6f) == 0x7e && fkv_f32_to_e4m3(-1e6f) == 0xfe);
    CHECK(fkv_f32_to_e4m3(INFINITY) == 0x7e && fkv_f32_to_e4m3(-INFINITY) == 0xfe);
    CHECK((fkv_f32_to_e4m3(NAN) & 0x7f) == 0x7f);
}

/* the AVX-512 and AVX2 conversions give the scalar reference's bits */
static void test_fp8_path(const fkv__fp8_ops *v)
{
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *y0 = malloc(N * sizeof *y0), *y1 = malloc(N * sizeof *y1);
    uint8_t *q0 = malloc(N), *q1 = malloc(N);
    REQUIRE(x && y0 && y1 && q0 && q1);
    rng r = {17};
    int rounds = (int)(32 * check_scale()), bad_enc = 0, bad_dec = 0;
    for (int k = 0; k < rounds; k++) {
        for (int i = 0; i < N; i++) {
            uint32_t bits = (uint32_t)rng_next(&r);
            switch (i % 4) {
            case 0: memcpy(&x[i], &bits, 4); break; /* any pattern: NaN, inf, subnormal */
            case 1: x[i] = (float)(rng_gauss(&r) * ldexp(1.0, (int)rng_below(&r, 30) - 15)); break;
            case 2: { /* near a midpoint of two codes */
                uint8_t c = (uint8_t)rng_below(&r, 0x7e);
                float m = (fkv_e4m3_to_f32(c) + fkv_e4m3_to_f32((uint8_t)(c + 1))) / 2;
                x[i] = bits & 1 ? m : nextafterf(m, bits & 2 ? 1e9f : -1e9f);
                if (bits & 4) x[i] = -x[i];
                break;
            }
            default: x[i] = (float)(rng_unif(&r) * 1000 - 500);
            }
        }
        float inv = k == 0 ? 1.0f : (float)(rng_unif(&r) * 4 + 0.01);
        size_t n = N - rng_below(&r, 16); /* a ragged tail too */
        fkv__fp8_scalar.enc(x, inv, q0, n);
        v->enc(x, inv, q1, n);
        for (size_t i = 0; i < n; i++)
            if (q0[i] != q1[i] && bad_enc++ < 5)
                fprintf(stderr, "enc(%a * %a): scalar 0x%02x, %s 0x%02x\n", x[i], inv, q0[i], v->name, q1[i]);
        fkv__fp8_scalar.dec(q0, 1.0f / inv, y0, n);
        v->dec(q0, 1.0f / inv, y1, n);
        if (memcmp(y0, y1, n * sizeof *y0)) bad_dec++;
    }
    CHECK(bad_enc == 0);
    CHECK(bad_dec == 0);
    printf("fp8 %s path: %d x %d values, same bits as scalar\n", v->name, rounds, N);
    free(x), free(y0), free(y1), free(q0), free(q1);
}

static void test_fp8_paths(void)
{
    const fkv__fp8_ops *v = fkv__fp8_avx512_ops();
    if (v) test_fp8_path(v);
    else printf("fp8 AVX-512 path: skipped, this CPU has no AVX-512F\n");
    /* the AVX2 conversions run only where the AVX2 kernels do */
    int prev = fkv__simd_force(2);
    if (fkv__simd() != &fkv__simd_scalar && fkv__fp8_avx2_ops()) test_fp8_path(fkv__fp8_avx2_ops());
    else printf("fp8 AVX2 path: skipped, this CPU has no AVX2/FMA/F16C\n");
    fkv__simd_force(prev);
}

static double dot(const float *a, const float *b, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void test_hadamard(void)
{
    rng r = {3};
    for (uint32_t n = 1; n <= 256; n *= 2) {
        float q[256], k[256], k0[256], q0[256];
        for (uint32_t i = 0; i < n; i++) {
            q[i] = q0[i] = (float)rng_gauss(&r);
            k[i] = k0[i] = (float)rng_gauss(&r) * (i == 3 % n ? 30.0f : 1.0f); /* an outlier channel */
        }
        double d0 = dot(q, k, n), nq = sqrt(dot(q, q, n)), nk = sqrt(dot(k, k, n));
        REQUIRE(fkv_hadamard(q, n) == FKV_OK && fkv_hadamard(k, n) == FKV_OK);
        /* orthogonal: dot products and norms kept (fp32 rounding: log2(n) + 1 steps) */
        double tol = 1e-6 * (log2(n) + 2) * nq * nk;
        CHECKF(fabs(dot(q, k, n) - d0) <= tol, "n %u: %g vs %g", n, dot(q, k, n), d0);
        CHECK(fabs(sqrt(dot(k, k, n)) - nk) <= 1e-6 * (log2(n) + 2) * nk);
        /* the outlier is spread: no rotated channel keeps more than half of it (n >= 8) */
        if (n >= 8) {
            float mx = 0;
            for (uint32_t i = 0; i < n; i++) mx = fabsf(k[i]) > mx ? fabsf(k[i]) : mx;
            CHECK(mx < 0.5f * 30.0f * 3);
        }
        /* its own inverse */
        fkv_hadamard(q, n);
        for (uint32_t i = 0; i < n; i++) CHECK(fabsf(q[i] - q0[i]) <= 1e-5f * (float)nq);
        (void)k0;
    }
    float x[6] = {1, 2, 3, 4, 5, 6};
    CHECK(fkv_hadamard(x, 6) == FKV_EINVAL && x[0] == 1 && x[5] == 6);
    CHECK(fkv_hadamard(x, 0) == FKV_EINVAL);
}

static void test_bytes(void)
{
    /* a 7-8B model's heads (128 channels, 8 kv heads), a 64-token block:
     * codes plus fp16 (scale, zero) pairs, from the layouts */
    double f16 = (double)fkv_kvc_bytes(FKV_KVC_F16, 64, 8, 128);
    CHECK(f16 == 2.0 * 2 * 64 * 8 * 128);
    CHECK(fkv_kvc_bytes(FKV_KVC_FP8, 64, 8, 128) / f16 == 0.5);
    CHECK(fkv_kvc_bytes(FKV_KVC_FP8_HEAD, 64, 8, 128) / f16 == 0.5);
    CHECK(fkv_kvc_bytes(FKV_KVC_INT8, 64, 8, 128) / f16 == (131072.0 + 4096 + 4096) / 262144); /* 0.516 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT4, 64, 8, 128) / f16 == (65536.0 + 4096 + 8192) / 262144);  /* 0.297 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT4R, 64, 8, 128) / f16 == (65536.0 + 8192 + 8192) / 262144); /* 0.3125 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT2, 64, 8, 128) / f16 == (32768.0 + 8192 + 8192) / 262144);  /* 0.1875 */
    /* stories260K's 8-channel heads (4 kv heads): scales weigh far more */
    f16 = (double)fkv_kvc_bytes(FKV_KVC_F16, 64, 4, 8);
    CHECK(fkv_kvc_bytes(FKV_KVC_INT8, 64, 4, 8) / f16 == (4096.0 + 128 + 1024) / 8192);  /* 0.64 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT4, 64, 4, 8) / f16 == (2048.0 + 128 + 1024) / 8192);  /* 0.39 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT4R, 64, 4, 8) / f16 == (2048.0 + 1024 + 1024) / 8192); /* 0.5 */
    CHECK(fkv_kvc_bytes(FKV_KVC_INT2, 64, 4, 8) / f16 == (1024.0 + 256 + 1024) / 8192);   /* 0.28 */
    /* the cache's fp8 chunk: codes plus an fp32 scale per kv head for K and for V */
    CHECK(fkv_kvc_bytes(FKV_KVC_FP8_CHUNK, 64, 4, 8) == 4096 + 32);
    CHECK(fkv_kvc_bytes(FKV_KVC_COUNT, 64, 4, 8) == 0 && fkv_kvc_bytes(FKV_KVC_INT8, 0, 4, 8) == 0);
    printf("bytes vs fp16 (64 tokens, 8 kv heads x 128):");
    for (int c = 0; c < FKV_KVC_COUNT; c++)
        printf(" %s %.4f", fkv_kvc_name((fkv_kvc)c),
               (double)fkv_kvc_bytes((fkv_kvc)c, 64, 8, 128) / (double)fkv_kvc_bytes(FKV_KVC_F16, 64, 8, 128));
    printf("\n");
}

/* the bound of one asymmetric group with range [mn, mx]: half the stored
 * scale, which is at most ((mx - zero) / qmax) rounded up to fp16, zero =
 * mn rounded down (one fp16 ulp: 2^-10 |mn| + 2^-24), plus fp32 rounding
 * of code * scale + zero */
static double group_bound(double mn, double mx, double qmax)
{
    double s = ((mx - mn) + ldexp(fabs(mn), -10) + ldexp(1, -24)) / qmax * (1 + ldexp(1, -10)) + ldexp(1, -24);
    return s / 2 + ldexp(fabs(mn) + fabs(mx) + s * qmax, -22);
}

enum { T = 64, H = 2 };

static void fill(rng *r, float *k, float *v, uint32_t D)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t d = 0; d < D; d++) {
                size_t i = ((size_t)t * H + h) * D + d;
                /* keys: channel 1 an outlier (large offset and spread), as
                 * real keys' few outlier channels; head 1 a thousandth of head 0 */
                float hs = h ? 0.001f : 1.0f;
                k[i] = hs * (float)(rng_gauss(r) * (d == 1 ? 12.0 : 1.0) + (d == 1 ? 20.0 : 0.0));
                v[i] = hs * (float)rng_gauss(r);
            }
}

/* max over elements of |err| / bound for codec c (> 1: out of bound) */
static double bound_ratio(fkv_kvc c, const float *x0, const float *xq, uint32_t D, int is_v,
                          const fkv_kvc_calib *cal)
{
    double worst = 0;
    const size_t E = (size_t)H * D;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++) {
            const float *r0 = x0 + t * E + h * D, *r1 = xq + t * E + h * D;
            if (c == FKV_KVC_INT4R && !is_v) { /* L2 of the row, in the rotated basis */
                float rot[256];
                memcpy(rot, r0, D * sizeof *rot);
                fkv_hadamard(rot, D);
                double b2 = 0, e2 = 0;
                for (uint32_t a = 0; a < D; a += FKV_KVC_INT4R_GROUP) {
                    uint32_t n = D - a < FKV_KVC_INT4R_GROUP ? D - a : FKV_KVC_INT4R_GROUP;
                    double mn = rot[a], mx = rot[a];
                    for (uint32_t i = 1; i < n; i++) mn = fmin(mn, rot[a + i]), mx = fmax(mx, rot[a + i]);
                    double b = group_bound(mn, mx, 15);
                    b2 += n * b * b;
                }
                for (uint32_t d = 0; d < D; d++) e2 += ((double)r1[d] - r0[d]) * ((double)r1[d] - r0[d]);
                double bnd = sqrt(b2) * (1 + 1e-5) + 1e-6 * sqrt(dot(r0, r0, D)); /* + two rotations' rounding */
                worst = fmax(worst, sqrt(e2) / bnd);
                continue;
            }
            for (uint32_t d = 0; d < D; d++) {
                double x = r0[d], err = fabs((double)r1[d] - x), b = 0;
                if (c == FKV_KVC_F16) b = ldexp(fabs(x), -11) + ldexp(1, -25);
                else if (c == FKV_KVC_FP8_CHUNK) { /* the block's own amax of this head */
                    double amax = 0;
                    for (uint32_t u = 0; u < T; u++)
                        for (uint32_t e = 0; e < D; e++) amax = fmax(amax, fabs(x0[u * E + h * D + e]));
                    b = ldexp(fabs(x), -4) * (1 + ldexp(1, -20)) + ldexp(amax / 448, -10) * (1 + ldexp(1, -20)) +
                        ldexp(fabs(x), -22);
                }
                else if (c == FKV_KVC_FP8 || c == FKV_KVC_FP8_HEAD) {
                    double s = fkv_kvc_fp8_scale(cal, 0, h, is_v, c == FKV_KVC_FP8_HEAD);
                    b = ldexp(fabs(x), -4) * (1 + ldexp(1, -20)) + ldexp(s, -10) + ldexp(fabs(x), -22);
                } else {
                    double qmax = c == FKV_KVC_INT8 ? 255 : c == FKV_KVC_INT2 ? 3 : 15;
                    uint32_t tg = c == FKV_KVC_INT2 ? FKV_KVC_INT2_GROUP : FKV_QK_GROUP;
                    uint32_t vg = c == FKV_KVC_INT8 ? FKV_QV_GROUP_INT8 : c == FKV_KVC_INT2 ? FKV_KVC_INT2_GROUP
                                                                                          : FKV_QV_GROUP_INT4;
                    double mn = INFINITY, mx = -INFINITY;
                    if (!is_v) { /* the channel over its token group */
                        for (uint32_t u = t / tg * tg; u < T && u < t / tg * tg + tg; u++)
                            mn = fmin(mn, x0[u * E + h * D + d]), mx = fmax(mx, x0[u * E + h * D + d]);
                    } else { /* the token's channel group */
                        for (uint32_t e = d / vg * vg; e < D && e < d / vg * vg + vg; e++)
                            mn = fmin(mn, r0[e]), mx = fmax(mx, r0[e]);
                    }
                    b = group_bound(mn, mx, qmax);
                }
                worst = fmax(worst, err / b);
            }
        }
    return worst;
}

static double nmse(const float *x0, const float *x, size_t n, size_t from, size_t step, size_t len)
{
    /* over elements i with (i - from) % step < len: one head's share */
    double e = 0, s = 0;
    for (size_t i = from; i < n; i += step)
        for (size_t j = 0; j < len; j++) {
            e += ((double)x[i + j] - x0[i + j]) * ((double)x[i + j] - x0[i + j]);
            s += (double)x0[i + j] * x0[i + j];
        }
    return e / s;
}

static void test_round_trips(uint32_t D)
{
    rng r = {100 + D};
    const size_t n = (size_t)T * H * D;
    float *k0 = malloc(n * 4), *v0 = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *k1 = malloc(n * 4),
          *v1 = malloc(n * 4);
    REQUIRE(k0 && v0 && k && v && k1 && v1);
    fill(&r, k0, v0, D);
    fkv_kvc_calib cal;
    REQUIRE(fkv_kvc_calib_init(&cal, 1, H) == FKV_OK);
    REQUIRE(fkv_kvc_calib_observe(&cal, 0, k0, v0, T, D) == FKV_OK);
    double nm_k[FKV_KVC_COUNT], nm_v[FKV_KVC_COUNT], nm_k1[FKV_KVC_COUNT];
    printf("head_dim %u: NMSE (K all heads, K head 1 at 1/1000, V) and worst |err| / bound:\n", D);
    for (int ci = 0; ci < FKV_KVC_COUNT; ci++) {
        fkv_kvc c = (fkv_kvc)ci;
        memcpy(k, k0, n * 4), memcpy(v, v0, n * 4);
        char err[256] = "";
        fkv__simd_force(1);
        fkv_status st = fkv_kvc_roundtrip(c, &cal, 0, k, v, T, H, D, err, sizeof err);
        CHECKF(st == FKV_OK, "%s: %s", fkv_kvc_name(c), err);
        /* the portable path gives the same bits */
        memcpy(k1, k0, n * 4), memcpy(v1, v0, n * 4);
        fkv__simd_force(0);
        CHECK(fkv_kvc_roundtrip(c, &cal, 0, k1, v1, T, H, D, NULL, 0) == FKV_OK);
        fkv__simd_force(1);
        CHECKF(!memcmp(k, k1, n * 4) && !memcmp(v, v1, n * 4), "%s: vector and scalar paths differ", fkv_kvc_name(c));
        nm_k[c] = nmse(k0, k, n, 0, 1, 1);
        nm_k1[c] = nmse(k0, k, n, D, 2 * D, D);
        nm_v[c] = nmse(v0, v, n, 0, 1, 1);
        double bk = c == FKV_KVC_F32 ? 0 : bound_ratio(c, k0, k, D, 0, &cal);
        double bv = c == FKV_KVC_F32 ? 0 : bound_ratio(c, v0, v, D, 1, &cal);
        printf("  %-8s %.3e %.3e %.3e  %.3f %.3f\n", fkv_kvc_name(c), nm_k[c], nm_k1[c], nm_v[c], bk, bv);
        if (c == FKV_KVC_F32) {
            CHECK(!memcmp(k, k0, n * 4) && !memcmp(v, v0, n * 4));
            continue;
        }
        CHECKF(bk <= 1.0, "%s keys: error %.3f of the bound", fkv_kvc_name(c), bk);
        CHECKF(bv <= 1.0, "%s values: error %.3f of the bound", fkv_kvc_name(c), bv);
    }
    /* fewer bits, more error; the format's relative step gives the NMSE's order:
     * f16 2^-11, fp8 2^-4 relative */
    CHECK(nm_k[FKV_KVC_F16] < nm_k[FKV_KVC_INT8] && nm_k[FKV_KVC_INT8] < nm_k[FKV_KVC_INT4] &&
          nm_k[FKV_KVC_INT4] < nm_k[FKV_KVC_INT2]);
    CHECK(nm_v[FKV_KVC_INT8] < nm_v[FKV_KVC_INT4] && nm_v[FKV_KVC_INT4] < nm_v[FKV_KVC_INT2]);
    CHECK(nm_k[FKV_KVC_F16] <= ldexp(1, -22) && nm_k[FKV_KVC_FP8_HEAD] <= ldexp(1, -8));
    /* a per-tensor scale sized for head 0 pushes head 1 (1/1000 of it) toward
     * the subnormal codes; a per-head scale does not */
    CHECK(nm_k1[FKV_KVC_FP8_HEAD] < nm_k1[FKV_KVC_FP8]);
    fkv_kvc_calib_free(&cal);
    free(k0), free(v0), free(k), free(v), free(k1), free(v1);
}

/* rotation against the outlier channel, compared like for like: int4 per
 * (token, head) over the raw row vs over the rotated row */
static void test_rotation_helps(void)
{
    enum { D = 64, R = 256 };
    rng r = {9};
    float x[R * D], y[R * D];
    for (int i = 0; i < R * D; i++) x[i] = (float)rng_gauss(&r) + (i % D == 5 ? 40.0f : 0.0f);
    /* raw: int4r's value path is int4 per (token, head) over 32 channels, unrotated */
    memcpy(y, x, sizeof x);
    float kk[R * D];
    memcpy(kk, x, sizeof x);
    REQUIRE(fkv_kvc_roundtrip(FKV_KVC_INT4R, NULL, 0, kk, y, R, 1, D, NULL, 0) == FKV_OK);
    double raw = nmse(x, y, R * D, 0, 1, 1), rot = nmse(x, kk, R * D, 0, 1, 1);
    printf("int4 per token over a row with one outlier channel: NMSE %.3e raw, %.3e rotated\n", raw, rot);
    CHECK(rot < raw / 4);
}

static void test_bad_input(void)
{
    float k[16] = {0}, v[16] = {0};
    char err[256];
    fkv_kvc c;
    CHECK(fkv_kvc_parse("int4r", &c) == FKV_OK && c == FKV_KVC_INT4R);
    CHECK(fkv_kvc_parse("fp8-head", &c) == FKV_OK && c == FKV_KVC_FP8_HEAD);
    CHECK(fkv_kvc_parse("int3", &c) == FKV_EINVAL && strstr(fkv_last_error(), "int3"));
    for (int i = 0; i < FKV_KVC_COUNT; i++) CHECK(fkv_kvc_parse(fkv_kvc_name((fkv_kvc)i), &c) == FKV_OK && (int)c == i);
    CHECK(fkv_kvc_name(FKV_KVC_COUNT) == NULL);
    CHECK(fkv_kvc_roundtrip(FKV_KVC_FP8, NULL, 0, k, v, 2, 1, 8, err, sizeof err) == FKV_EINVAL && strstr(err, "calibration"));
    CHECK(fkv_kvc_roundtrip(FKV_KVC_INT4R, NULL, 0, k, v, 2, 1, 6, err, sizeof err) == FKV_EINVAL && strstr(err, "power"));
    CHECK(fkv_kvc_roundtrip(FKV_KVC_INT2, NULL, 0, k, v, 2, 1, 7, err, sizeof err) == FKV_EINVAL);
    CHECK(fkv_kvc_roundtrip(FKV_KVC_INT4, NULL, 0, NULL, v, 2, 1, 8, err, sizeof err) == FKV_EINVAL);
    fkv_kvc_calib cal;
    REQUIRE(fkv_kvc_calib_init(&cal, 1, 1) == FKV_OK);
    for (int ci = FKV_KVC_F16; ci < FKV_KVC_COUNT; ci++) {
        float kk[16] = {0}, vv[16] = {0};
        kk[5] = NAN;
        err[0] = 0;
        CHECKF(fkv_kvc_roundtrip((fkv_kvc)ci, &cal, 0, kk, vv, 2, 1, 8, err, sizeof err) == FKV_EINVAL && err[0],
               "%s takes NaN", fkv_kvc_name((fkv_kvc)ci));
        kk[5] = 1e6f; /* beyond fp16: only fp8 (saturating) takes it */
        fkv_status st = fkv_kvc_roundtrip((fkv_kvc)ci, &cal, 0, kk, vv, 2, 1, 8, NULL, 0);
        CHECKF(ci == FKV_KVC_FP8 || ci == FKV_KVC_FP8_HEAD ? st == FKV_OK : st == FKV_EINVAL, "%s and 1e6",
               fkv_kvc_name((fkv_kvc)ci));
    }
    CHECK(fkv_kvc_calib_observe(&cal, 1, k, v, 2, 8) == FKV_EINVAL);
    k[3] = INFINITY;
    CHECK(fkv_kvc_calib_observe(&cal, 0, k, v, 2, 8) == FKV_EINVAL);
    fkv_kvc_calib_free(&cal);
}

int main(void)
{
    printf("fp8 path: %s\n", fkv_fp8_path());
    test_e4m3_codes();
    test_fp8_paths();
    test_hadamard();
    test_bytes();
    test_round_trips(8);
    test_round_trips(64);
    test_round_trips(128);
    test_rotation_helps();
    test_bad_input();
    return check_done();
}
