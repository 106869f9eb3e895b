/* Cold-chunk quantization in the simulator: on the seed workload under
 * memory pressure, int8 cold chunks must relieve the pressure (fewer
 * recomputed tokens and preemptions, no worse mean latency), and int4 at
 * least as much as int8; same inputs, same result. */
#include <string.h>

#include "check.h"
#include "sim/bench.h"

static fkv_scheme_summary run_full(fkv_quant_mode q, int dt, int hot, const char *scheme, uint32_t warm, int price)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = (size_t)(1500 * check_scale());
    o.schemes = scheme;
    o.sim.quant_warm = warm;
    o.sim.price_kv_bytes = price;
    o.cap_frac = 0.6;
    o.quiet = 1;
    o.sim.quant = q;
    o.sim.quant_dtype = dt;
    o.sim.quant_hot = hot;
    char err[512] = "";
    fkv_bench_ctx c;
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, 0.8, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[2];
    size_t n = 0;
    REQUIRE(fkv_bench_schemes(&c, &w, s, NULL, &n, 2, err, sizeof err) == FKV_OK && n == 1);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
    return s[0];
}

/* dt, hot: -1 for the scheme's own */
static fkv_scheme_summary run_hot(fkv_quant_mode q, int dt, int hot, const char *scheme)
{
    return run_full(q, dt, hot, scheme, 0, 0);
}

static fkv_scheme_summary run_opts(fkv_quant_mode q, fkv_dtype dt, const char *scheme, uint32_t warm, int price)
{
    return run_full(q, (int)dt, -1, scheme, warm, price);
}

static fkv_scheme_summary run(fkv_quant_mode q, fkv_dtype dt) { return run_opts(q, dt, "lru", 0, 0); }

int main(void)
{
    fkv_scheme_summary off = run(FKV_QUANT_OFF, FKV_INT8);
    fkv_scheme_summary i8 = run(FKV_QUANT_ALWAYS, FKV_INT8);
    fkv_scheme_summary i8p = run(FKV_QUANT_UNDER_PRESSURE, FKV_INT8);
    fkv_scheme_summary i4 = run(FKV_QUANT_ALWAYS, FKV_INT4);
    fkv_scheme_summary again = run(FKV_QUANT_ALWAYS, FKV_INT8);
    printf("recomputed tokens: off %llu, int8 %llu, int8 under pressure %llu, int4 %llu\n",
           (unsigned long long)off.recomputed_tokens, (unsigned long long)i8.recomputed_tokens,
           (unsigned long long)i8p.recomputed_tokens, (unsigned long long)i4.recomputed_tokens);
    CHECK(off.recomputed_tokens > 0 && off.preemptions > 0); /* the run is under pressure */
    CHECK(i8.recomputed_tokens < off.recomputed_tokens && i8.preemptions < off.preemptions);
    CHECK(i8p.recomputed_tokens < off.recomputed_tokens);
    CHECK(i4.recomputed_tokens <= i8.recomputed_tokens);
    CHECK(i8.e2e.mean_ms <= off.e2e.mean_ms);
    CHECK(again.recomputed_tokens == i8.recomputed_tokens && again.e2e.mean_ms == i8.e2e.mean_ms);
    /* the ladder (int8 for 128 tokens past the hot ones, then int4) frees
     * at least what int8 alone does */
    fkv_scheme_summary lad = run_opts(FKV_QUANT_ALWAYS, FKV_INT8, "lru", 128, 0);
    printf("recomputed tokens: ladder %llu\n", (unsigned long long)lad.recomputed_tokens);
    CHECK(lad.recomputed_tokens <= i8.recomputed_tokens);
    /* attention priced by the bytes read: quantized chunks and vllm-fp8's
     * tokens read fewer bytes, so the same run finishes sooner; unquantized
     * runs do not change */
    fkv_scheme_summary i8b = run_opts(FKV_QUANT_ALWAYS, FKV_INT8, "lru", 0, 1);
    fkv_scheme_summary offb = run_opts(FKV_QUANT_OFF, FKV_INT8, "lru", 0, 1);
    fkv_scheme_summary f8 = run_opts(FKV_QUANT_OFF, FKV_INT8, "vllm-fp8", 0, 0);
    fkv_scheme_summary f8b = run_opts(FKV_QUANT_OFF, FKV_INT8, "vllm-fp8", 0, 1);
    printf("mean ms priced by fp16 / by stored bytes: int8 %.1f / %.1f, vllm-fp8 %.1f / %.1f\n", i8.e2e.mean_ms,
           i8b.e2e.mean_ms, f8.e2e.mean_ms, f8b.e2e.mean_ms);
    CHECK(i8b.e2e.mean_ms < i8.e2e.mean_ms && f8b.e2e.mean_ms < f8.e2e.mean_ms);
    CHECK(offb.e2e.mean_ms == off.e2e.mean_ms && offb.recomputed_tokens == off.recomputed_tokens);
    /* a scheme's own cold precision reaches the cache: lru with int4 behind
     * 64 hot tokens named is what fairkv's precision gives lru... */
    fkv_scheme_summary i4h = run_hot(FKV_QUANT_ALWAYS, FKV_INT4, 64, "lru");
    CHECK(i4h.recomputed_tokens <= i4.recomputed_tokens);
    /* ...and fairkv run with its own (int4, 64) differs from fairkv named
     * int8 behind 128, and equals fairkv named int4 behind 64 */
    fkv_scheme_summary own = run_hot(FKV_QUANT_ALWAYS, -1, -1, "fairkv");
    fkv_scheme_summary named4 = run_hot(FKV_QUANT_ALWAYS, FKV_INT4, 64, "fairkv");
    fkv_scheme_summary named8 = run_hot(FKV_QUANT_ALWAYS, FKV_INT8, 128, "fairkv");
    printf("fairkv recomputed tokens, quant always: own %llu, int4/64 %llu, int8/128 %llu; mean ms %.1f %.1f %.1f\n",
           (unsigned long long)own.recomputed_tokens, (unsigned long long)named4.recomputed_tokens,
           (unsigned long long)named8.recomputed_tokens, own.e2e.mean_ms, named4.e2e.mean_ms, named8.e2e.mean_ms);
    CHECK(own.e2e.mean_ms == named4.e2e.mean_ms && own.recomputed_tokens == named4.recomputed_tokens &&
          own.preemptions == named4.preemptions);
    CHECK(own.e2e.mean_ms != named8.e2e.mean_ms || own.recomputed_tokens != named8.recomputed_tokens);
    return check_done();
}
