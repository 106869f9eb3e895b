/* fairkv micro cache: nanoseconds per cache operation with 65,536 pages,
 * and the request lifecycle the Python managers of vLLM and SGLang are
 * measured with.  Each figure is the median of several timed rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fairkv.h"

#define PAGES 65536
#define PT 16

typedef struct opt {
    int json, rounds, skip_ops, skip_lifecycle, quotas, copy_timed, thread_safe;
    const char *policy;
} opt;

static double now_ns(void)
{
    return (double)fkv_monotonic_now_ns();
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static fkv_cache *make(const opt *o, int prefix)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.capacity_pages = PAGES;
    cfg.page_tokens = PT;
    cfg.policy = o->policy;
    cfg.prefix_cache = prefix;
    cfg.quotas = o->quotas;
    cfg.thread_safe = o->thread_safe;
    fkv_cache *c = NULL;
    char err[200];
    if (fkv_cache_create(&cfg, &c, err, sizeof err)) {
        fprintf(stderr, "fairkv micro cache: %s\n", err);
        exit(1);
    }
    return c;
}

static fkv_seq *mkseq(fkv_cache *c, uint64_t id)
{
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = id;
    fkv_seq *s = NULL;
    if (fkv_seq_create(c, &p, &s)) exit(1);
    return s;
}

/* tokens of request r: 1024 distinct-enough ids */
static void fill_tokens(int32_t *t, uint32_t n, uint64_t r)
{
    for (uint32_t i = 0; i < n; i++) t[i] = (int32_t)((r * 1000003u + i * 7919u) & 0x7fffffff);
}

enum { OP_APPEND, OP_MATCH, OP_TOUCH, OP_EVICT, OP_FREE, N_OPS };
static const char *op_names[N_OPS] = {"append_page", "prefix_match_page", "touch_chunk", "evict_chunk", "free_page"};

/* One round of every single-op figure; writes ns per op. */
static void round_ops(const opt *o, double *ns)
{
    enum { SEQS = 512, SEQ_PAGES = 64 }; /* 32768 pages: half the pool */
    static int32_t tok[SEQ_PAGES * PT];
    fkv_cache *c = make(o, 1);
    fkv_seq *s[SEQS];
    /* append, one page per call */
    double t0 = now_ns();
    for (int i = 0; i < SEQS; i++) {
        s[i] = mkseq(c, (uint64_t)i + 1);
        fill_tokens(tok, SEQ_PAGES * PT, (uint64_t)i);
        for (int p = 0; p < SEQ_PAGES; p++) fkv_seq_append(s[i], tok + p * PT, PT, NULL);
    }
    ns[OP_APPEND] = (now_ns() - t0) / (SEQS * SEQ_PAGES);
    /* touch: every chunk of every sequence */
    fkv_seq_touch(s[0], NULL);
    t0 = now_ns();
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < SEQS; i++) fkv_seq_touch(s[i], NULL);
    ns[OP_TOUCH] = (now_ns() - t0) / (4.0 * SEQS * SEQ_PAGES * PT / 64);
    /* free: the requests end, their pages stay cached */
    t0 = now_ns();
    for (int i = 0; i < SEQS; i++) fkv_seq_free(s[i]);
    ns[OP_FREE] = (now_ns() - t0) / (SEQS * SEQ_PAGES);
    /* prefix match: new requests find each earlier prompt (all but the last page) */
    t0 = now_ns();
    uint64_t matched = 0;
    for (int i = 0; i < SEQS; i++) {
        fill_tokens(tok, SEQ_PAGES * PT, (uint64_t)i);
        s[i] = mkseq(c, (uint64_t)SEQS + i + 1);
        fkv_match_info mi = {0, 0, 0};
        fkv_seq_match_prefix(s[i], tok, SEQ_PAGES * PT, SEQ_PAGES * PT - 1, FKV_MATCH_DEVICE_ONLY, &mi);
        matched += mi.device_tokens / PT;
    }
    ns[OP_MATCH] = (now_ns() - t0) / (double)matched;
    for (int i = 0; i < SEQS; i++) fkv_seq_free(s[i]);
    /* evict: the pool is half full of cached chunks; evict them all */
    fkv_cache_info info;
    fkv_cache_get_info(c, &info);
    uint32_t chunks = info.n_chunks, freed = 0;
    t0 = now_ns();
    fkv_cache_evict(c, PAGES, &freed);
    ns[OP_EVICT] = (now_ns() - t0) / chunks;
    fkv_cache_destroy(c);
}

/* The lifecycle: 512-token requests whose first 256 tokens are one of 64
 * shared prefixes; per request: hash and match (16 pages hit), touch, 16
 * new pages with the pool full of cached pages (each evicts), their full
 * pages enter the prefix index, free (pages stay cached).
 *
 * Prompts are assembled untimed, a batch of BATCH at a time, and the batch
 * is then timed: the figure is the cache's work on prompts an engine has
 * just tokenized, not the copying of them out of a 4 MiB table (which was
 * about a tenth of it).  With copy_timed the copy is timed too, as before. */
static double round_lifecycle(const opt *o, uint64_t *counter, int copy_timed)
{
    /* 64 shared prefixes and TAILS unique tails; request r takes prefix
     * r % 64 and tail r % TAILS, a pair that repeats only after 64 * TAILS
     * requests (TAILS is prime) */
    enum { TAILS = 4099, BATCH = 64 };
    static int32_t *prefix, *tails, *batch;
    if (!prefix) {
        prefix = malloc(64 * 256 * sizeof *prefix);
        tails = malloc((size_t)TAILS * 256 * sizeof *tails);
        batch = malloc((size_t)BATCH * 512 * sizeof *batch);
        if (!prefix || !tails || !batch) exit(1);
        for (int i = 0; i < 64; i++) fill_tokens(prefix + i * 256, 256, (uint64_t)i);
        for (int i = 0; i < TAILS; i++) fill_tokens(tails + (size_t)i * 256, 256, (uint64_t)i + 1000000);
    }
    fkv_cache *c = make(o, 1);
    uint64_t r = *counter;
    /* warm up until the pool is full of cached pages */
    int warm = (PAGES / 16 + 2000) / BATCH * BATCH, timed = 20000 / BATCH * BATCH;
    double t_sum = 0;
    for (int i = 0; i < warm + timed; i += BATCH) {
        double t0 = now_ns();
        for (int b = 0; b < BATCH; b++) {
            int32_t *tok = batch + (size_t)b * 512;
            memcpy(tok, prefix + ((r + (uint64_t)b) % 64) * 256, 256 * sizeof *tok);
            memcpy(tok + 256, tails + ((r + (uint64_t)b) % TAILS) * 256, 256 * sizeof *tok);
        }
        if (!copy_timed) t0 = now_ns();
        for (int b = 0; b < BATCH; b++, r++) {
            const int32_t *tok = batch + (size_t)b * 512;
            fkv_seq *s = mkseq(c, r + 1);
            fkv_match_info mi = {0, 0, 0};
            fkv_seq_match_prefix(s, tok, 512, 511, FKV_MATCH_DEVICE_ONLY, &mi);
            uint32_t m = mi.device_tokens;
            fkv_seq_touch(s, NULL);
            if (fkv_seq_append(s, tok + m, 512 - m, NULL)) {
                fprintf(stderr, "fairkv micro cache: lifecycle append failed\n");
                exit(1);
            }
            fkv_seq_free(s);
        }
        if (i >= warm) t_sum += now_ns() - t0;
    }
    double ns = t_sum / timed;
    fkv_counters cn;
    fkv_cache_counters(c, &cn);
    if (cn.pages_free > 0 || cn.evicted_pages == 0) fprintf(stderr, "warning: the pool was not under pressure\n");
    if (cn.prefix_hit_tokens < (uint64_t)(warm + timed - 64) * 256)
        fprintf(stderr, "warning: shared prefixes were not all hits\n");
    *counter = r;
    fkv_cache_destroy(c);
    return ns;
}

int fkv_cli_micro_cache(int argc, char **argv)
{
    opt o = {.rounds = 7, .policy = "flru", .quotas = 1, .thread_safe = 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o.json = 1;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) o.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--policy") && i + 1 < argc) o.policy = argv[++i];
        else if (!strcmp(argv[i], "--quotas") && i + 1 < argc) o.quotas = atoi(argv[++i]) != 0;
        else if (!strcmp(argv[i], "--time-prompt-copy")) o.copy_timed = 1;
        else if (!strcmp(argv[i], "--thread-safe") && i + 1 < argc) o.thread_safe = atoi(argv[++i]) != 0;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[i + 1], "ops")) o.skip_lifecycle = 1, i++;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[i + 1], "lifecycle")) o.skip_ops = 1, i++;
        else {
            fprintf(stderr, "usage: fairkv micro cache [--json] [--rounds N] [--policy NAME] [--quotas 0|1] [--only ops|lifecycle]\n"
                            "                        [--time-prompt-copy] [--thread-safe 0|1]\n"
                            "  median ns per cache operation with %d pages of %d tokens\n", PAGES, PT);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (o.rounds < 1 || o.rounds > 101) {
        fprintf(stderr, "fairkv micro cache: --rounds must be 1..101\n");
        return 2;
    }
    double v[N_OPS][101], lc[101];
    uint64_t counter = 0;
    for (int r = 0; r < o.rounds; r++) {
        double ns[N_OPS] = {0};
        if (!o.skip_ops) round_ops(&o, ns);
        for (int k = 0; k < N_OPS; k++) v[k][r] = ns[k];
        lc[r] = o.skip_lifecycle ? 0 : round_lifecycle(&o, &counter, o.copy_timed);
    }
    double med[N_OPS];
    for (int k = 0; k < N_OPS; k++) med[k] = median(v[k], o.rounds);
    double lmed = median(lc, o.rounds);
    if (o.json) {
        printf("{\"bench\":\"cache\",\"pages\":%d,\"page_tokens\":%d,\"policy\":\"%s\",\"quotas\":%d,"
               "\"thread_safe\":%d,\"rounds\":%d,\"ops\":[",
               PAGES, PT, o.policy, o.quotas, o.thread_safe, o.rounds);
        for (int k = 0; k < N_OPS && !o.skip_ops; k++)
            printf("%s{\"name\":\"%s\",\"ns_per_op\":%.1f}", k ? "," : "", op_names[k], med[k]);
        printf("]");
        if (!o.skip_lifecycle)
            printf(",\"lifecycle_ns_per_request\":%.0f,\"prompt_copy_timed\":%d", lmed, o.copy_timed);
        printf("}\n");
    } else {
        printf("fairkv micro cache: %d pages of %d tokens, policy %s, quotas %s%s, median of %d rounds\n", PAGES, PT,
               o.policy, o.quotas ? "on" : "off", o.thread_safe ? "" : ", no lock", o.rounds);
        for (int k = 0; k < N_OPS && !o.skip_ops; k++) printf("  %-20s %8.1f ns/op\n", op_names[k], med[k]);
        if (!o.skip_lifecycle)
            printf("  %-20s %8.0f ns/request (512 tokens, 16 pages hit, 16 allocated with eviction%s)\n", "lifecycle",
                   lmed, o.copy_timed ? "; prompt copy timed" : "");
    }
    return 0;
}
