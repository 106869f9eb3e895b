/* Accuracy beside every row of `fairkv bench` (src/sim/accuracy.h): the
 * mapping from a row's configuration to its precision mix, the lookup in
 * the measured table (a known mix gets the table's figures, an unknown one
 * "not measured"), the JSON "accuracy" object, the CSV columns and the text
 * table of a real bench run; and, with the stories260K files, two of the
 * table's lines measured again by the code that made them (skipped below
 * FKV_TEST_SCALE 1: a full stream under the sanitizers takes minutes). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model/kv_eval.h"
#include "model/llama2c.h"
#include "sim/accuracy.h"
#include "sim/bench.h"

/* the table itself: the mixes the rule can name are there, figures in range,
 * and int4 behind a longer hot window never worse than behind a shorter one */
static void table(void)
{
    CHECK(fkv_accuracy_n_rows >= 40);
    CHECK(strlen(fkv_accuracy_commit) >= 7);
    for (size_t i = 0; i < fkv_accuracy_n_rows; i++) {
        const fkv_accuracy_row *r = &fkv_accuracy_rows[i];
        CHECKF(r->kld_mean >= 0 && r->kld_p99 >= 0 && r->top1 > 0.5 && r->top1 <= 1, "%s %u %u", r->kv, r->chunk,
               r->hot);
        CHECKF(r->hot % r->chunk == 0, "%s: hot %u, chunk %u", r->kv, r->hot, r->chunk);
        CHECKF(fkv_accuracy_find(r->kv, r->chunk, r->hot) == r, "%s %u %u found once", r->kv, r->chunk, r->hot);
    }
    const char *need[] = {"int8", "int4", "int8:0,int4", "int8:128,int4", "int8:256,int4"};
    const uint32_t hots[] = {0, 64, 128, 256};
    for (size_t k = 0; k < sizeof need / sizeof *need; k++)
        for (uint32_t c = 16; c <= 64; c += 48)
            for (size_t h = 0; h < 4; h++)
                CHECKF(fkv_accuracy_find(need[k], c, hots[h]) != NULL, "%s chunk %u hot %u", need[k], c, hots[h]);
    CHECK(fkv_accuracy_find("f16", 1, 0) && fkv_accuracy_find("fp8", 1, 0));
    for (size_t h = 1; h < 4; h++)
        CHECK(fkv_accuracy_find("int4", 64, hots[h])->kld_mean <= fkv_accuracy_find("int4", 64, hots[h - 1])->kld_mean);
    /* int4 costs more than int8 at every hot window that leaves cold chunks */
    CHECK(fkv_accuracy_find("int4", 64, 0)->kld_mean > fkv_accuracy_find("int8", 64, 0)->kld_mean);
    /* unknown mixes */
    CHECK(fkv_accuracy_find("int4", 64, 100) == NULL);
    CHECK(fkv_accuracy_find("int2", 64, 128) == NULL);
    CHECK(fkv_accuracy_find(NULL, 64, 128) == NULL);
}

/* the figures of a are the table's line (kv, chunk, hot) */
static int same(const fkv_accuracy *a, const char *kv, uint32_t chunk, uint32_t hot)
{
    const fkv_accuracy_row *r = fkv_accuracy_find(kv, chunk, hot);
    return r && !strcmp(a->kv, kv) && a->hot == hot && a->kld_mean == r->kld_mean && a->kld_p99 == r->kld_p99 &&
           a->top1 == r->top1 && strstr(a->source, "model eval --kv") && strstr(a->source, kv);
}

static int not_measured(const fkv_accuracy *a, const char *why)
{
    return a->kld_mean < 0 && a->kld_p99 < 0 && a->top1 < 0 && !strcmp(a->rule, "n/m") &&
           !strncmp(a->source, "not measured", 12) && strstr(a->source, why);
}

static void mapping(void)
{
    fkv_sim_config cfg;
    fkv_sim_config_default(&cfg);
    const fkv_scheme *lru = fkv_scheme_find("lru"), *fp8 = fkv_scheme_find("vllm-fp8"),
                     *fkv = fkv_scheme_find("fairkv"), *vllm = fkv_scheme_find("vllm"),
                     *dyn = fkv_scheme_find("flru-dyn");
    REQUIRE(lru && fp8 && fkv && vllm && dyn);
    fkv_accuracy a;
    /* defaults: fp16 rows, vLLM's fp8 cache, fairkv's reclaim ladder */
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(same(&a, "f16", 1, 0) && !strcmp(a.rule, "exact"));
    fkv_accuracy_of(fp8, &cfg, &a);
    CHECK(same(&a, "fp8", 1, 0) && !strcmp(a.rule, "exact"));
    /* fairkv's own cold precision: int4 behind 64 hot tokens (the ladder
     * rule of docs/EVALUATION.md 2b); its reclaim adds int8 */
    fkv_accuracy_of(fkv, &cfg, &a);
    CHECK(same(&a, "int8:0,int4", 64, 64) && !strcmp(a.rule, "worst case"));
    CHECK(fkv_sim_quant_dtype(&cfg, fkv) == FKV_INT4 && fkv_sim_quant_hot(&cfg, fkv) == 64);
    CHECK(fkv_sim_quant_dtype(&cfg, lru) == FKV_INT8 && fkv_sim_quant_hot(&cfg, lru) == 128);
    CHECK(fkv_sim_quant_dtype(&cfg, NULL) == FKV_INT8 && fkv_sim_quant_hot(&cfg, NULL) == 128);
    /* named ones hold for every scheme */
    cfg.quant_dtype = FKV_INT8;
    cfg.quant_hot = 128;
    CHECK(fkv_sim_quant_dtype(&cfg, fkv) == FKV_INT8 && fkv_sim_quant_hot(&cfg, fkv) == 128);
    fkv_accuracy_of(fkv, &cfg, &a);
    CHECK(same(&a, "int8:0,int4", 64, 128));
    cfg.quant_dtype = FKV_FP8;
    cfg.quant_hot = 0;
    CHECK(fkv_sim_quant_dtype(&cfg, lru) == FKV_FP8 && fkv_sim_quant_hot(&cfg, lru) == 0);
    cfg.quant_dtype = cfg.quant_hot = -1;
    /* --quant always: int8, or the ladder, exact; int4 */
    cfg.quant = FKV_QUANT_ALWAYS;
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(same(&a, "int8", 64, 128) && !strcmp(a.rule, "always"));
    fkv_accuracy_of(vllm, &cfg, &a); /* 16-token blocks */
    CHECK(same(&a, "int8", 16, 128));
    cfg.quant_warm = 256;
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(same(&a, "int8:256,int4", 64, 128) && !strcmp(a.rule, "always"));
    /* fairkv's cold chunks are int4 and its reclaim can take an int8
     * chunk to int4 at once */
    fkv_accuracy_of(fkv, &cfg, &a);
    CHECK(same(&a, "int8:0,int4", 64, 64) && !strcmp(a.rule, "worst case"));
    cfg.quant_warm = 0;
    cfg.quant = FKV_QUANT_UNDER_PRESSURE;
    cfg.quant_dtype = FKV_INT4;
    cfg.quant_hot = 64;
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(same(&a, "int4", 64, 64) && !strcmp(a.rule, "worst case"));
    /* not measured: a hot window off the table, dynamic chunking, an fp8
     * cache quantized further, drop */
    cfg.quant_hot = 100;
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(not_measured(&a, "hot 100 is not in the table") && !strcmp(a.kv, "int4") && a.hot == 100);
    cfg.quant_hot = 128;
    fkv_accuracy_of(dyn, &cfg, &a);
    CHECK(not_measured(&a, "dynamic chunking"));
    fkv_accuracy_of(fp8, &cfg, &a);
    CHECK(not_measured(&a, "fp8 cache"));
    cfg.quant = FKV_QUANT_OFF;
    char why[160];
    REQUIRE(fkv_sched_parse_reclaim("quantize8,drop", cfg.sched.reclaim, &cfg.sched.n_reclaim, why, sizeof why) == 0);
    cfg.reclaim_set = 1;
    fkv_accuracy_of(lru, &cfg, &a);
    CHECK(not_measured(&a, "drop"));
    /* --reclaim replaces the scheme's list: quantize8 alone reaches int8 */
    REQUIRE(fkv_sched_parse_reclaim("quantize8,evict", cfg.sched.reclaim, &cfg.sched.n_reclaim, why, sizeof why) == 0);
    fkv_accuracy_of(fkv, &cfg, &a);
    CHECK(same(&a, "int8", 64, 128) && !strcmp(a.rule, "worst case"));
    REQUIRE(fkv_sched_parse_reclaim("evict", cfg.sched.reclaim, &cfg.sched.n_reclaim, why, sizeof why) == 0);
    fkv_accuracy_of(fkv, &cfg, &a);
    CHECK(same(&a, "f16", 1, 0));
}

static char *report(const fkv_report_meta *m, const fkv_scheme_summary *s, size_t n, int form)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    if (form == 0) fkv_report_text(f, m, s, n);
    else if (form == 1) fkv_report_json(f, m, s, n);
    else fkv_report_csv(f, m, s, n, 1);
    fclose(f);
    return text;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

/* A small bench run of three schemes, one of them under a hot window the
 * table lacks: what each form prints. */
static void reports(void)
{
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = 120;
    o.quiet = 1;
    o.schemes = "lru,vllm-fp8,fairkv";
    char err[512] = "";
    fkv_bench_ctx c;
    REQUIRE(fkv_bench_prepare(&c, &o, err, sizeof err) == FKV_OK);
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, 0.8, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[4];
    size_t n = 0;
    REQUIRE(fkv_bench_schemes(&c, &w, s, NULL, &n, 4, err, sizeof err) == FKV_OK && n == 3);
    /* a fourth row not measured */
    s[3] = s[2];
    snprintf(s[3].name, sizeof s[3].name, "odd");
    fkv_sim_config cfg = o.sim;
    cfg.quant_hot = 100;
    fkv_accuracy_of(fkv_scheme_find("fairkv"), &cfg, &s[3].accuracy);
    n = 4;
    fkv_report_meta m = {.workload = "seed", .load = 0.8, .requests = w.n, .profile = c.profile.name,
                         .capacity_tokens = c.capacity_tokens, .capacity_rule = c.capacity_rule,
                         .arrival_rate = rate, .capacity_rps = c.cap_rps, .seed = o.seed, .admission = "fcfs",
                         .batching = "continuous"};
    const fkv_accuracy_row *f16 = fkv_accuracy_find("f16", 1, 0), *fp8 = fkv_accuracy_find("fp8", 1, 0),
                           *lad = fkv_accuracy_find("int8:0,int4", 64, 64);
    REQUIRE(f16 && fp8 && lad);

    /* JSON: "accuracy":{"kv","hot","kld_mean","kld_p99","top1","rule","source"} per scheme */
    char *js = report(&m, s, n, 1);
    cJSON *root = cJSON_Parse(js);
    REQUIRE(root);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "schemes");
    REQUIRE(cJSON_GetArraySize(arr) == 4);
    const fkv_accuracy_row *want[3] = {f16, fp8, lad};
    const char *kv[3] = {"f16", "fp8", "int8:0,int4"};
    for (int i = 0; i < 4; i++) {
        const cJSON *x = cJSON_GetArrayItem(arr, i);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(x, "accuracy");
        CHECKF(cJSON_IsObject(a), "scheme %d has no accuracy object", i);
        if (!a) continue;
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(a, "source");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(a, "kv");
        CHECK(cJSON_IsString(src) && cJSON_IsString(k));
        if (i < 3) {
            CHECKF(fabs(num(a, "kld_mean") - want[i]->kld_mean) < 1e-9 &&
                       fabs(num(a, "kld_p99") - want[i]->kld_p99) < 1e-9 && fabs(num(a, "top1") - want[i]->top1) < 1e-9,
                   "scheme %d: %g %g %g", i, num(a, "kld_mean"), num(a, "kld_p99"), num(a, "top1"));
            CHECK(k && !strcmp(k->valuestring, kv[i]));
            CHECK(src && strstr(src->valuestring, "stories260K, fairkv model eval --kv"));
        } else {
            CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "kld_mean")) &&
                  cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "kld_p99")) &&
                  cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "top1")));
            CHECK(num(a, "hot") == 100);
            CHECK(src && !strncmp(src->valuestring, "not measured", 12));
        }
    }
    cJSON_Delete(root);
    free(js);

    /* CSV: the five columns at the end of the header and of each row */
    char *csv = report(&m, s, n, 2);
    char *nl = strchr(csv, '\n');
    REQUIRE(nl);
    *nl = 0;
    const char *tail = ",accuracy_kv,accuracy_hot,kld_mean,kld_p99,top1";
    CHECK(strlen(csv) > strlen(tail) && !strcmp(csv + strlen(csv) - strlen(tail), tail));
    char line[160];
    snprintf(line, sizeof line, ",int8:0+int4,64,%.5f,%.5f,%.4f\n", lad->kld_mean, lad->kld_p99, lad->top1);
    CHECKF(strstr(nl + 1, line) != NULL, "CSV: no row ending %s", line);
    CHECK(strstr(nl + 1, ",int8:0+int4,100,,,\n") != NULL);
    free(csv);

    /* text: the table, n/m for the row not measured */
    char *txt = report(&m, s, n, 0);
    char *tab = strstr(txt, "K/V precision each row can reach");
    REQUIRE(tab);
    char *at = strstr(tab, "\nodd ");
    CHECK(at && strstr(at, "n/m"));
    snprintf(line, sizeof line, "%9.5f", fp8->kld_mean);
    at = strstr(tab, "\nvllm-fp8 ");
    CHECK(at && strstr(at, line) && strstr(at, line) < strchr(at + 1, '\n'));
    free(txt);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
}

/* Two lines of the table measured again (vllm-fp8's and fairkv's default
 * mix): the committed figures are what the code measures. */
static int remeasure(void)
{
    const char *dir = getenv("FKV_DATA_DIR");
    if (!dir) dir = "../shared/data";
    char ckpt[1024], tokp[1024];
    snprintf(ckpt, sizeof ckpt, "%s/models/stories260K.bin", dir);
    snprintf(tokp, sizeof tokp, "%s/models/tok512.bin", dir);
    if (access(ckpt, R_OK) || access(tokp, R_OK)) {
        printf("SKIP: measuring the table again needs %s and %s\n", ckpt, tokp);
        return 77;
    }
    if (check_scale() < 1) {
        printf("note: not measuring the table again: it takes the full stream (FKV_TEST_SCALE %g < 1)\n",
               check_scale());
        return 0;
    }
    char out[] = "/tmp/fkv_test_sim_accuracy_XXXXXX", err[512] = "";
    int fd = mkstemp(out);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(fkv_llama2c_convert(ckpt, tokp, out, FKV_GGML_F32, NULL, err, sizeof err) == FKV_OK);
    fkv_llama *m;
    REQUIRE(fkv_llama_load(out, &m, err, sizeof err) == FKV_OK);
    unlink(out);
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_fwd *f;
    REQUIRE(fkv_fwd_create(m, NULL, &f) == FKV_OK);
    /* model eval's defaults: 8 x 512 tokens from seed 1, fp8 scales from seed 1000 */
    const uint32_t S = 8, L = 512, V = m->hp.n_vocab;
    int32_t *tok = malloc(S * L * sizeof *tok), *cal_tok = malloc(L * sizeof *cal_tok);
    float *ref = malloc((size_t)S * (L - 1) * V * sizeof *ref), *test = malloc((size_t)S * (L - 1) * V * sizeof *test);
    REQUIRE(tok && cal_tok && ref && test);
    fkv_kvc_calib cal;
    REQUIRE(fkv_kvc_calib_init(&cal, g.n_layers, g.n_kv_heads) == FKV_OK);
    REQUIRE(fkv_kv_eval_stream(f, m, 1, S, L, 1, tok, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_kv_eval_stream(f, m, 1, 1, L, 1000, cal_tok, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_kv_eval_calibrate(f, m, cal_tok, L, &cal, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_kv_eval_run(f, m, NULL, NULL, tok, S, L, ref, err, sizeof err) == FKV_OK);
    const struct {
        const char *kv;
        uint32_t chunk, hot;
    } lines[] = {{"fp8", 1, 0}, {"int8:0,int4", 64, 128}};
    for (size_t i = 0; i < 2; i++) {
        fkv_kv_ladder l = {lines[i].chunk, lines[i].hot, FKV_KVC_F32, 0, FKV_KVC_F32};
        REQUIRE(fkv_kv_ladder_parse(lines[i].kv, &l, err, sizeof err) == FKV_OK);
        fkv_kv_eval_result r;
        REQUIRE(fkv_kv_eval_run(f, m, &l, &cal, tok, S, L, test, err, sizeof err) == FKV_OK);
        REQUIRE(fkv_kv_eval_compare(ref, test, tok, S, L, V, &r) == FKV_OK);
        const fkv_accuracy_row *t = fkv_accuracy_find(lines[i].kv, lines[i].chunk, lines[i].hot);
        REQUIRE(t);
        /* the table holds model eval's printed digits: 5 decimals, top-1 in % to 2 */
        CHECKF(fabs(r.kld_mean - t->kld_mean) <= 5.01e-6 && fabs(r.kld_p99 - t->kld_p99) <= 5.01e-6 &&
                   fabs(r.top1 - t->top1) <= 5.01e-5,
               "%s: measured %.6f %.6f %.5f, table %.5f %.5f %.4f", lines[i].kv, r.kld_mean, r.kld_p99, r.top1,
               t->kld_mean, t->kld_p99, t->top1);
    }
    free(tok), free(cal_tok), free(ref), free(test);
    fkv_kvc_calib_free(&cal);
    fkv_fwd_destroy(f);
    fkv_llama_free(m);
    return 0;
}

int main(void)
{
    table();
    mapping();
    reports();
    int rc = remeasure();
    int done = check_done();
    return done ? done : rc;
}
