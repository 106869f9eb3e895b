/* `fairkv micro attn` on a small configuration: its fp8 rows (decode and
 * prefill, both layouts) are there with the sizes of the other formats,
 * the bytes they count are fp8's (one byte per element plus a scale per
 * chunk and kv head), every output equals the scalar kernels' (--verify),
 * and the ratios it prints (time against fp16's, fraction of the read
 * bandwidth, chunked over contiguous, the per-format worst cases) are the
 * ones its own rows give.  Option errors exit 2. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "cli.h"
#include "fairkv_quant.h"

enum { NKV = 8, HD = 128, CHUNK = 64 };

static char *run(const char *args, int *rc)
{
    char buf[512], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    argv[argc++] = (char *)"attn";
    for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    return capture_stdout(fkv_cli_micro_attn, argc, argv, rc);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static const cJSON *row(const cJSON *arr, int ctx, const char *dt, const char *layout)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, arr)
    if (num(r, "ctx") == ctx && !strcmp(str(r, "dtype"), dt) && !strcmp(str(r, "layout"), layout)) return r;
    return NULL;
}

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-12; }

static void check_json(void)
{
    static const int ctxs[] = {128, 256};
    static const char *const dts[] = {"fp16", "fp8", "int8"}, *const lays[] = {"chunked", "contiguous"};
    int rc = -1;
    char *out = run("--json --quick --threads 2 --mib 1 --ctx 128,256 --dtypes fp16,fp8,int8 --verify", &rc);
    CHECKF(rc == 0, "exit %d", rc);
    cJSON *j = cJSON_Parse(out);
    REQUIRE(j);
    const double read = num(j, "read_gbps");
    CHECK(read > 0);
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "decode"), *pre = cJSON_GetObjectItemCaseSensitive(j, "prefill");
    REQUIRE(cJSON_IsArray(dec) && cJSON_IsArray(pre));
    CHECKF(cJSON_GetArraySize(dec) == 12 && cJSON_GetArraySize(pre) == 12, "%d decode, %d prefill rows",
           cJSON_GetArraySize(dec), cJSON_GetArraySize(pre));
    int nonzero = 0;
    double worst_vs[3] = {0}, worst_cc[3] = {0}, min_frac_ge4k = 1e9;
    for (int ph = 0; ph < 2; ph++)
        for (int ci = 0; ci < 2; ci++)
            for (int di = 0; di < 3; di++)
                for (int li = 0; li < 2; li++) {
                    const cJSON *arr = ph ? pre : dec, *r = row(arr, ctxs[ci], dts[di], lays[li]);
                    CHECKF(r, "%s row ctx %d %s %s missing", ph ? "prefill" : "decode", ctxs[ci], dts[di], lays[li]);
                    if (!r) continue;
                    const cJSON *f16 = row(arr, ctxs[ci], "fp16", lays[li]), *other = row(arr, ctxs[ci], dts[di], lays[!li]);
                    REQUIRE(f16 && other);
                    double ms = num(r, "ms"), nm = num(r, "nmse_vs_scalar");
                    CHECK(ms > 0);
                    /* the same attention as the scalar kernels, up to the order of fp32 sums; the VNNI
                     * kernels' int8 rows within their stated bounds (simd_avx512.c: the query to
                     * 1/(127 * 256) of its row's largest element, the probabilities to 1/32767 of
                     * theirs), two orders of magnitude below the int8 codec's own error */
                    const double bound = di == 2 && !strcmp(fkv_simd_path(), "avx512-vnni") ? 1e-7 : 1e-9;
                    CHECKF(nm >= 0 && nm <= bound, "%s %d %s %s: nmse vs scalar %g > %g", ph ? "prefill" : "decode",
                           ctxs[ci], dts[di], lays[li], nm, bound);
                    nonzero += nm > 0;
                    double cc = li ? num(other, "ms") / ms : ms / num(other, "ms");
                    CHECK(near(num(r, "chunked_over_contiguous"), cc, 2e-3));
                    if (li && cc > worst_cc[di] && !ph) worst_cc[di] = cc;
                    if (di) {
                        double vs = ms / num(f16, "ms");
                        CHECKF(near(num(r, "time_vs_fp16"), vs, 2e-3), "time_vs_fp16 %g, rows give %g",
                               num(r, "time_vs_fp16"), vs);
                        if (!ph && vs > worst_vs[di]) worst_vs[di] = vs;
                    } else {
                        CHECK(cJSON_GetObjectItemCaseSensitive(r, "time_vs_fp16") == NULL);
                    }
                    if (ph) {
                        CHECK(num(r, "n_q") == 64 && num(r, "seqs") == 1 && num(r, "gflops") > 0);
                        continue;
                    }
                    /* the same sequences for every format: batch from the fp16 bytes */
                    double batch = num(r, "batch");
                    CHECK(batch == num(f16, "batch") && batch == (1 << 20) / (2.0 * ctxs[ci] * NKV * HD * 2));
                    CHECK(near(num(r, "read_fraction"), num(r, "gbps") / read, 2e-3));
                    if (!strcmp(dts[di], "fp8")) { /* codes: one byte a element; one fp32 scale per chunk, K/V, kv head */
                        double bytes = batch * (2.0 * ctxs[ci] * NKV * HD + ctxs[ci] / CHUNK * 2.0 * NKV * 4);
                        CHECKF(near(num(r, "gbps") * ms * 1e6, bytes, 2e-3), "fp8 bytes %g, want %g",
                               num(r, "gbps") * ms * 1e6, bytes);
                    }
                    if (ctxs[ci] >= 4096 && !li && num(r, "read_fraction") < min_frac_ge4k) min_frac_ge4k = num(r, "read_fraction");
                }
    if (strcmp(fkv_simd_path(), "scalar")) CHECKF(nonzero > 0, "every nmse is 0: was the scalar path run at all?");
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(j, "per_dtype");
    for (int di = 0; di < 3; di++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(pd, dts[di]);
        REQUIRE(d);
        CHECK(near(num(d, "max_chunked_over_contiguous"), worst_cc[di], 2e-3));
        if (di) CHECK(near(num(d, "max_time_vs_fp16"), worst_vs[di], 2e-3));
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "targets");
    CHECK(near(num(t, "max_fp8_over_fp16_time"), worst_vs[1], 2e-3));
    CHECK(near(num(t, "max_int8_over_fp16_time"), worst_vs[2], 2e-3));
    double b8 = num(cJSON_GetObjectItemCaseSensitive(j, "bytes_vs_fp16"), "fp8");
    CHECKF(b8 > 0.5 && b8 < 0.501, "fp8 bytes vs fp16 %g", b8);
    const cJSON *codec = cJSON_GetObjectItemCaseSensitive(j, "codec_gbps");
    CHECK(num(codec, "quant_fp8") > 0 && num(codec, "dequant_fp8") > 0);
    cJSON_Delete(j);
    free(out);
}

static void check_text(void)
{
    int rc = -1;
    char *out = run("--quick --threads 1 --mib 1 --ctx 128 --dtypes fp16,fp8", &rc);
    CHECKF(rc == 0, "exit %d", rc);
    CHECK(strstr(out, "   fp8 chunked") && strstr(out, "   fp8 contiguous") && strstr(out, "vs fp16"));
    CHECK(strstr(out, "prefill: causal"));
    CHECK(strstr(out, "targets by format") && strstr(out, "\n  fp8 "));
    CHECK(!strstr(out, "int4") || strstr(out, "int4 0.297")); /* only the formats asked for are measured */
    free(out);
}

static void check_errors(void)
{
    static const char *const bad[] = {"--dtypes fp9", "--dtypes fp8,", "--ctx 100", "--ctx 128,", "--mib 0",
                                      "--mib 12x", "--threads 0", "--nonesuch"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = -1;
        char *out = run(bad[i], &rc);
        CHECKF(rc == 2, "'%s': exit %d, want 2", bad[i], rc);
        free(out);
    }
}

int main(void)
{
    check_errors();
    check_text();
    check_json();
    printf("micro attn: fp8 rows, ratios and --verify checked (vector path %s)\n", fkv_simd_path());
    return check_done();
}
