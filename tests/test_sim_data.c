/* The real inputs under ../shared/data (FKV_DATA_DIR): the Azure and
 * Mooncake traces parse whole with the published row counts, and the Vidur
 * profiles parsed at run time equal the embedded tables bit for bit.
 * Skips (77) when the data folder is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "sim/profile.h"
#include "sim/sim.h"
#include "sim/workload.h"

int main(void)
{
    const char *dir = getenv("FKV_DATA_DIR");
    char az[1024], mc[1024], vd[1024];
    struct stat st;
    if (!dir || snprintf(az, sizeof az, "%s/azure_llm_conv_2023.csv", dir) < 0 || stat(az, &st) != 0) {
        printf("SKIP: data folder absent (FKV_DATA_DIR=%s): needs azure_llm_conv_2023.csv, "
               "mooncake_synthetic.jsonl, vidur/*.csv\n", dir ? dir : "(unset)");
        return 77;
    }
    snprintf(mc, sizeof mc, "%s/mooncake_synthetic.jsonl", dir);
    snprintf(vd, sizeof vd, "%s/vidur", dir);
    char err[512] = "";
    fkv_workload w;
    REQUIRE(fkv_trace_load(az, FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECKF(w.n == 19366, "azure rows %zu", w.n);
    CHECK(!strcmp(w.name, "azure"));
    /* one hour of trace; prompt mean 1155, output mean 211 (data README) */
    double in = 0, out = 0;
    for (size_t i = 0; i < w.n; i++) {
        in += w.reqs[i].prompt;
        out += w.reqs[i].output;
    }
    CHECKF(in / w.n > 1150 && in / w.n < 1160, "prompt mean %.1f", in / w.n);
    CHECKF(out / w.n > 206 && out / w.n < 216, "output mean %.1f", out / w.n);
    CHECKF(fkv_workload_span(&w) > 3500e9 && fkv_workload_span(&w) < 3700e9, "span %lld", (long long)fkv_workload_span(&w));
    fkv_workload_free(&w);

    REQUIRE(fkv_trace_load(mc, FKV_TRACE_AUTO, 0, 4, &w, err, sizeof err) == FKV_OK);
    CHECKF(w.n == 3993, "mooncake rows %zu", w.n);
    size_t with_blocks = 0, ok_blocks = 0;
    for (size_t i = 0; i < w.n; i++) {
        with_blocks += w.reqs[i].n_block_ids > 0;
        ok_blocks += w.reqs[i].n_block_ids == (w.reqs[i].prompt + 511) / 512;
    }
    CHECK(with_blocks == w.n);
    CHECK(ok_blocks == w.n); /* one id per 512-token block */
    /* the oracle-driven Belady and the prefix path are deterministic too:
     * two runs of the same 300 requests give the same latencies and hits */
    fkv_workload w300 = w;
    w300.n = 300;
    fkv_profile prof;
    REQUIRE(fkv_profile_get("a100-llama2-70b", NULL, &prof, err, sizeof err) == FKV_OK);
    fkv_sim_config c;
    fkv_sim_config_default(&c);
    c.profile = &prof;
    c.capacity_tokens = 300000;
    c.sched.n_clients = 4; /* the trace was read with 4 clients */
    const char *names[] = {"belady", "vllm", "flru-dyn"};
    for (int k = 0; k < 3; k++) {
        fkv_sim_result r1, r2;
        fkv_status s1 = fkv_sim_run(&w300, fkv_scheme_find(names[k]), &c, &r1, err, sizeof err);
        if (s1) fprintf(stderr, "%s: %s\n", names[k], err);
        REQUIRE(s1 == FKV_OK);
        REQUIRE(fkv_sim_run(&w300, fkv_scheme_find(names[k]), &c, &r2, err, sizeof err) == FKV_OK);
        CHECKF(r1.done == 300 && !memcmp(r1.e2e_ns, r2.e2e_ns, 300 * sizeof *r1.e2e_ns) &&
                   r1.matched_tokens == r2.matched_tokens && r1.hit_tokens == r2.hit_tokens,
               "%s: runs differ", names[k]);
        CHECKF(r1.matched_tokens > 0, "%s: no prefix hits on Mooncake", names[k]);
        fkv_sim_result_free(&r1);
        fkv_sim_result_free(&r2);
    }
    fkv_workload_free(&w);

    /* run-time parse == embedded table, for every profile */
    for (const char *const *p = fkv_profile_names(); *p; p++) {
        if (!strncmp(*p, "cpu-", 4)) continue; /* measured on the engine: no data file */
        fkv_profile a, b;
        REQUIRE(fkv_profile_get(*p, NULL, &a, err, sizeof err) == FKV_OK);
        fkv_status s = fkv_profile_get(*p, dir, &b, err, sizeof err);
        CHECKF(s == FKV_OK, "%s: %s", *p, err);
        if (s) continue;
        CHECK(!a.from_data && b.from_data);
        CHECKF(a.n_lin == b.n_lin, "%s: %zu vs %zu rows", *p, a.n_lin, b.n_lin);
        size_t diff = 0;
        for (size_t i = 0; i < a.n_lin && i < b.n_lin; i++)
            diff += a.lin_tokens[i] != b.lin_tokens[i] || a.lin_ms[i] != b.lin_ms[i];
        CHECKF(diff == 0, "%s: %zu rows differ", *p, diff);
        fkv_profile_free(&b);
    }
    (void)vd;
    return check_done();
}
