/* fp8 cold chunks in the simulator (--quant-dtype fp8): an fp8 chunk takes
 * the pages an int8 one takes (one byte per element), so with attention
 * priced at fp16 bytes the runs are the same token for token; priced by the
 * bytes read (--price-kv-bytes), fp8 chunks read fewer bytes than fp16 ones;
 * and the ladder from fp8 (fp8 warm, int4 cold) frees at least what fp8
 * alone does. */
#include <string.h>

#include "check.h"
#include "sim/bench.h"

static fkv_scheme_summary run_opts(fkv_quant_mode q, fkv_dtype dt, uint32_t warm, int price)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = (size_t)(1500 * check_scale());
    o.schemes = "lru";
    o.sim.quant_warm = warm;
    o.sim.price_kv_bytes = price;
    o.cap_frac = 0.6;
    o.quiet = 1;
    o.sim.quant = q;
    o.sim.quant_dtype = dt;
    char err[512] = "";
    fkv_bench_ctx c;
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, 0.8, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[2];
    size_t n = 0;
    CHECKF(fkv_bench_schemes(&c, &w, s, NULL, &n, 2, err, sizeof err) == FKV_OK && n == 1, "%s", err);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
    return s[0];
}

int main(void)
{
    fkv_scheme_summary off = run_opts(FKV_QUANT_OFF, FKV_INT8, 0, 0);
    fkv_scheme_summary i8 = run_opts(FKV_QUANT_ALWAYS, FKV_INT8, 0, 0);
    fkv_scheme_summary f8 = run_opts(FKV_QUANT_ALWAYS, FKV_FP8, 0, 0);
    fkv_scheme_summary lad = run_opts(FKV_QUANT_ALWAYS, FKV_FP8, 128, 0);
    fkv_scheme_summary f8b = run_opts(FKV_QUANT_ALWAYS, FKV_FP8, 0, 1);
    printf("recomputed tokens: off %llu, int8 %llu, fp8 %llu, fp8 ladder %llu; mean ms fp8 %.1f, priced by bytes %.1f\n",
           (unsigned long long)off.recomputed_tokens, (unsigned long long)i8.recomputed_tokens,
           (unsigned long long)f8.recomputed_tokens, (unsigned long long)lad.recomputed_tokens, f8.e2e.mean_ms,
           f8b.e2e.mean_ms);
    CHECK(off.recomputed_tokens > 0); /* under pressure */
    CHECK(f8.recomputed_tokens < off.recomputed_tokens && f8.preemptions < off.preemptions);
    CHECK(f8.recomputed_tokens == i8.recomputed_tokens && f8.e2e.mean_ms == i8.e2e.mean_ms); /* same pages */
    CHECK(lad.recomputed_tokens <= f8.recomputed_tokens);
    CHECK(f8b.e2e.mean_ms < f8.e2e.mean_ms);
    return check_done();
}
