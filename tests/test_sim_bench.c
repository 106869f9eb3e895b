/* Whole simulator runs: byte-identical output for the same inputs, the JSON
 * shape of the report, Belady's hit rate against the online policies, and
 * the fairness-gain arithmetic. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim/bench.h"

static char *run_json(fkv_bench_opts *o, double load)
{
    char err[512] = "";
    fkv_bench_ctx c;
    fkv_status st = fkv_bench_prepare(&c, o, err, sizeof err);
    if (st) {
        fprintf(stderr, "prepare: %s\n", err);
        fkv_bench_ctx_free(&c);
        return NULL;
    }
    fkv_workload w;
    double rate;
    REQUIRE(fkv_bench_arrivals(&c, load, &w, &rate) == FKV_OK);
    fkv_scheme_summary s[16];
    size_t n = 0;
    st = fkv_bench_schemes(&c, &w, s, NULL, &n, 16, err, sizeof err);
    if (st) fprintf(stderr, "schemes: %s\n", err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fkv_report_meta m = {.workload = "seed", .load = load, .requests = w.n, .profile = c.profile.name,
                         .capacity_tokens = c.capacity_tokens, .capacity_rule = c.capacity_rule,
                         .arrival_rate = rate, .capacity_rps = c.cap_rps, .seed = o->seed,
                         .admission = "fcfs", .batching = "continuous"};
    if (!st) fkv_report_json(f, &m, s, n);
    fclose(f);
    fkv_workload_free(&w);
    fkv_bench_ctx_free(&c);
    if (st) {
        free(buf);
        return NULL;
    }
    return buf;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

/* Open-loop replay: sessions (multi-turn conversations) whose contexts are
 * re-read at fixed future times; each turn pins the session, touches it,
 * recomputes (restores) what was evicted, appends the new turn's tokens and
 * unpins.  The access sequence is the same for every scheme, so Belady's
 * MIN, told each chunk's exact next read (its session's next turn), must
 * hit at least as often as every online policy with the same chunking. */
#define N_SESS 40
#define N_TURNS 4000
static int64_t turn_time[N_TURNS];
static int turn_sess[N_TURNS];
static int64_t replay_now;
static int replay_cur;

static int64_t replay_next_use(void *ctx, const fkv_chunk_view *view, const fkv_chunk_info *v)
{
    (void)ctx;
    (void)view;
    for (int t = replay_cur + 1; t < N_TURNS; t++)
        if ((uint64_t)turn_sess[t] + 1 == v->owner) return turn_time[t];
    return INT64_MAX;
}

/* overrides of the scheme's F-LRU weights and quotas (< 0: keep) */
static double ov_alpha = -1, ov_beta = -1;
static int ov_quotas = -1;

static double replay(const fkv_scheme *sc, uint64_t *recomputed)
{
    fkv_config cc;
    fkv_config_default(&cc);
    cc.storage = FKV_STORAGE_PHANTOM;
    cc.capacity_pages = 600;
    cc.policy = sc->policy;
    cc.quotas = ov_quotas >= 0 ? ov_quotas : sc->quotas;
    if (ov_alpha >= 0) cc.alpha = ov_alpha;
    if (ov_beta >= 0) cc.beta = ov_beta;
    cc.dynamic_chunking = sc->dynamic_chunking;
    cc.chunk_tokens = sc->chunk_tokens;
    cc.page_tokens = sc->page_tokens;
    cc.prefix_cache = 0;
    cc.clock.now_ns = fkv_virtual_clock_now;
    cc.clock.ctx = &replay_now;
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.next_use = replay_next_use;
    fkv_cache *c;
    REQUIRE(fkv_cache_create_eval(&cc, &ev, &c, NULL, 0) == FKV_OK);
    fkv_seq *s[N_SESS];
    for (int i = 0; i < N_SESS; i++) {
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = (uint64_t)i + 1;
        REQUIRE(fkv_seq_create(c, &p, &s[i]) == FKV_OK);
    }
    uint64_t hit = 0, lost = 0;
    for (int t = 0; t < N_TURNS; t++) {
        replay_cur = t;
        replay_now = turn_time[t];
        fkv_seq *q = s[turn_sess[t]];
        fkv_seq_pin(q);
        uint32_t missing = 0, len = fkv_seq_len(q);
        REQUIRE(fkv_seq_touch(q, &missing) == FKV_OK);
        if (missing) {
            fkv_fetch_info fi;
            REQUIRE(fkv_seq_fetch(q, 0, len, FKV_FETCH_RECOMPUTE, NULL, &fi) == FKV_OK);
            lost += fi.recompute_tokens;
        }
        hit += len - missing;
        uint32_t add = 32 + (uint32_t)((t * 2654435761u) >> 27); /* 32..63 tokens per turn */
        if (len + add > 2000) add = 0; /* sessions stop growing at ~2000 tokens */
        if (add) REQUIRE(fkv_seq_append(q, NULL, add, NULL) == FKV_OK);
        fkv_seq_unpin(q);
    }
    fkv_cache_destroy(c);
    *recomputed = lost;
    return (double)hit / (double)(hit + lost);
}

static void replay_all(void)
{
    /* sessions with skewed popularity: session k is picked with weight 1/(k+1) */
    uint64_t x = 12345;
    double wsum = 0;
    for (int k = 0; k < N_SESS; k++) wsum += 1.0 / (k + 1);
    for (int t = 0; t < N_TURNS; t++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(x >> 11) * 0x1.0p-53 * wsum, acc = 0;
        int k = 0;
        for (; k < N_SESS - 1; k++) {
            acc += 1.0 / (k + 1);
            if (u < acc) break;
        }
        turn_sess[t] = k;
        turn_time[t] = (int64_t)t * 1000000;
    }
    size_t n;
    const fkv_scheme *all = fkv_scheme_list(&n);
    const fkv_scheme *bel = fkv_scheme_find("belady");
    uint64_t rb, ro;
    double hb = replay(bel, &rb);
    CHECK(rb > 0); /* there is pressure */
    for (size_t i = 0; i < n; i++) {
        if (!fkv_scheme_available(&all[i]) || &all[i] == bel) continue;
        if (all[i].chunk_tokens != bel->chunk_tokens || all[i].dynamic_chunking) continue;
        double h = replay(&all[i], &ro);
        CHECKF(hb >= h, "replay: belady %.6f (%llu recomputed) < %s %.6f (%llu)", hb, (unsigned long long)rb,
               all[i].name, h, (unsigned long long)ro);
        printf("replay: %-13s hit %.6f recomputed %llu (belady %.6f, %llu)\n", all[i].name, h,
               (unsigned long long)ro, hb, (unsigned long long)rb);
    }
    /* which part of F-LRU costs hits here (docs/EVALUATION.md, section 3) */
    const struct {
        double a, b;
        int q;
    } var[] = {{0.7, 0.3, 0}, {1, 0, 0}, {0, 1, 0}, {1, 0, 1}};
    for (size_t k = 0; k < sizeof var / sizeof var[0]; k++) {
        ov_alpha = var[k].a;
        ov_beta = var[k].b;
        ov_quotas = var[k].q;
        double h = replay(fkv_scheme_find("flru"), &ro);
        printf("replay: flru alpha %.1f beta %.1f quotas %d: hit %.6f\n", var[k].a, var[k].b, var[k].q, h);
        CHECK(h <= hb);
    }
    ov_alpha = ov_beta = -1;
    ov_quotas = 1;
    double hq = replay(fkv_scheme_find("lru"), &ro);
    printf("replay: lru with quotas: hit %.6f\n", hq);
    CHECK(hq <= hb);
    ov_quotas = -1;
}

/* KV sizes: the seed's 175B figure and the library's own formula. */
static void sizes(void)
{
    const fkv_model_geom *g = fkv_model_find("gpt3-175b");
    REQUIRE(g);
    CHECK(fkv_model_token_bytes(g) == 4718592ULL); /* 2 x 96 x 12288 x 2 B */
    CHECK(fkv_model_token_bytes(g) * 2048 > 9.6e9 && fkv_model_token_bytes(g) * 2048 < 9.7e9);
    CHECK(fkv_model_token_bytes(fkv_model_find("llama-2-7b")) == 524288ULL);
    CHECK(fkv_model_token_bytes(fkv_model_find("llama-2-70b")) == 327680ULL);
    size_t n;
    const fkv_model_geom *m = fkv_model_list(&n);
    for (size_t i = 0; i < n; i++) {
        fkv_config c;
        fkv_config_default(&c);
        c.n_layers = m[i].n_layers;
        c.n_kv_heads = m[i].n_kv_heads;
        c.head_dim = m[i].head_dim;
        c.dtype = m[i].dtype_bytes == 4 ? FKV_F32 : FKV_F16; /* the engine's tiny model keeps f32 K/V */
        CHECKF(fkv_config_token_bytes(&c) == fkv_model_token_bytes(&m[i]), "%s", m[i].name);
    }
    CHECK(fkv_model_find("nope") == NULL);
}

int main(void)
{
    sizes();
    replay_all();
    fkv_bench_opts o;
    fkv_bench_opts_default(&o);
    o.requests = (size_t)(1200 * check_scale());
    o.quiet = 1;
    o.data_dir = ""; /* embedded profile tables */
    o.cap_frac = 0.5;  /* strong pressure: evictions and preemptions */

    char *a = run_json(&o, 0.8), *b = run_json(&o, 0.8);
    REQUIRE(a && b);
    CHECK(strlen(a) > 500 && !strcmp(a, b)); /* byte-identical */
    o.seed = 43;
    char *c = run_json(&o, 0.8);
    REQUIRE(c);
    CHECK(strcmp(a, c) != 0); /* and the seed matters */

    cJSON *j = cJSON_Parse(a);
    REQUIRE(j);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(j, "workload")));
    CHECK(num(j, "load") == 0.8);
    const cJSON *sch = cJSON_GetObjectItem(j, "schemes");
    REQUIRE(cJSON_IsArray(sch));
    int n = cJSON_GetArraySize(sch);
    CHECK(n >= 8);
    double belady = -1, best_online = -1, lru_std = -1;
    const char *best_name = "";
    for (const cJSON *s = sch->child; s; s = s->next) {
        const char *name = cJSON_GetObjectItem(s, "name")->valuestring;
        double hr = num(s, "context_read_rate");
        CHECKF(hr > 0 && hr <= 1, "%s hit rate %f", name, hr);
        const char *lat[] = {"e2e", "ttft"};
        for (int k = 0; k < 2; k++) {
            const cJSON *l = cJSON_GetObjectItem(s, lat[k]);
            REQUIRE(cJSON_IsObject(l));
            double mean = num(l, "mean_ms"), p50 = num(l, "p50_ms"), p99 = num(l, "p99_ms"), sd = num(l, "std_ms");
            CHECKF(mean > 0 && p50 > 0 && p50 <= p99 && sd > 0, "%s %s", name, lat[k]);
            const cJSON *bc = cJSON_GetObjectItem(l, "by_class");
            const char *cn[] = {"short", "medium", "long"};
            for (int q = 0; q < 3; q++) {
                const cJSON *x = cJSON_GetObjectItem(bc, cn[q]);
                CHECKF(num(x, "mean_ms") > 0 && num(x, "p99_ms") >= num(x, "mean_ms") * 0.5, "%s %s %s", name, lat[k], cn[q]);
            }
        }
        CHECK(num(s, "done") == (double)o.requests);
        if (!strcmp(name, "lru")) {
            lru_std = num(cJSON_GetObjectItem(s, "e2e"), "std_ms");
            CHECK(num(s, "fairness_gain") == 1.0);
        }
        if (!strcmp(name, "belady")) belady = hr;
        else if (hr > best_online) {
            best_online = hr;
            best_name = name;
        }
    }
    CHECK(lru_std > 0);
    CHECK(belady > 0 && best_online > 0);
    /* In the closed loop Belady is not a bound: an eviction changes which
     * request is preempted next, so the access sequence differs between
     * schemes (docs/EVALUATION.md, section 3); the bound is checked on a fixed
     * access sequence in replay() below. */
    printf("closed loop: belady %.6f, best online %s %.6f\n", belady, best_name, best_online);
    cJSON_Delete(j);
    free(a);
    free(b);
    free(c);
    return check_done();
}
