/* Several threads on one cache (thread_safe = 1): each runs requests that
 * share prompt prefixes, appends, touches, pins and frees, while another
 * thread scrapes the metrics.  Run under ThreadSanitizer by `make test`;
 * afterwards the full invariant check must pass. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/internal.h"
#include "fairkv.h"
#include "server/backend.h"

#define THREADS 4

static fkv_cache *cache;
static int stop;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static int errors[THREADS + 1];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t rng = (uint64_t)id * 7919 + 1;
    int32_t prompt[96];
    int iters = (int)(3000 * check_scale());
    for (int it = 0; it < iters; it++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t base = (uint32_t)(rng >> 40) % 4, len = 16 + (uint32_t)(rng >> 20) % 80;
        for (uint32_t i = 0; i < len; i++) prompt[i] = (int32_t)(base * 1000 + i);
        fkv_seq_params p;
        fkv_seq_params_default(&p);
        p.request_id = ((uint64_t)id << 32) | ((uint64_t)it + 1);
        p.expected_tokens = len + 32;
        fkv_seq *s = NULL;
        if (fkv_seq_create(cache, &p, &s)) { errors[id]++; continue; }
        fkv_match_info mi = {0, 0, 0};
        if (fkv_seq_match_prefix(s, prompt, len, len - 1, FKV_MATCH_DEVICE_ONLY, &mi)) errors[id]++;
        uint32_t m = mi.device_tokens;
        fkv_status st = fkv_seq_append(s, prompt + m, len - m, NULL);
        if (st && st != FKV_EFULL) errors[id]++;
        fkv_seq_pin(s);
        for (int step = 0; step < 8 && st == FKV_OK; step++) {
            uint32_t miss = 0;
            fkv_seq_touch(s, &miss);
            if (miss) {
                fkv_range r;
                size_t n;
                fkv_seq_missing(s, &r, 1, &n);
                if (n) fkv_seq_fetch(s, r.start, r.end, FKV_FETCH_ALL, NULL, NULL);
            }
            int32_t t = (int32_t)step;
            st = fkv_seq_append(s, &t, 1, NULL);
            if (st && st != FKV_EFULL) errors[id]++;
        }
        fkv_seq_unpin(s);
        fkv_seq_free(s);
    }
    return NULL;
}

static void *scraper(void *arg)
{
    (void)arg;
    static char buf[16384];
    for (;;) {
        pthread_mutex_lock(&stop_lock);
        int done = stop;
        pthread_mutex_unlock(&stop_lock);
        if (done) break;
        size_t len;
        if (fkv_cache_metrics_prometheus(cache, buf, sizeof buf, &len)) errors[THREADS]++;
        if (!strstr(buf, "kv_cache_miss_rate{request_type=\"short\"}")) errors[THREADS]++;
        /* the server's copy of the same text, taken while the workers
         * make it grow: whole, its length right, never past its buffer */
        size_t tl = 0;
        char *text = fkv_backend_cache_prometheus(cache, &tl);
        if (!text || strlen(text) != tl || !tl || text[tl - 1] != '\n') errors[THREADS]++;
        free(text);
        fkv_counters cn;
        fkv_cache_counters(cache, &cn);
        fkv_cache_info info;
        fkv_cache_get_info(cache, &info);
        if (info.free_pages > info.n_pages) errors[THREADS]++;
    }
    return NULL;
}

int main(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.capacity_pages = 160; /* tight: threads evict each other's chunks */
    cfg.storage = FKV_STORAGE_CPU;
    REQUIRE(fkv_cache_create(&cfg, &cache, NULL, 0) == FKV_OK);
    pthread_t th[THREADS], sc;
    pthread_create(&sc, NULL, scraper, NULL);
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    pthread_mutex_lock(&stop_lock);
    stop = 1;
    pthread_mutex_unlock(&stop_lock);
    pthread_join(sc, NULL);
    for (int i = 0; i <= THREADS; i++) CHECKF(errors[i] == 0, "thread %d: %d errors", i, errors[i]);
    char msg[256];
    CHECKF(!fkv__cache_check(cache, msg, sizeof msg), "%s", msg);
    fkv_counters cn;
    fkv_cache_counters(cache, &cn);
    CHECK(cn.prefix_hit_tokens > 0 && cn.evicted_pages > 0); /* they did share and compete */
    fkv_cache_destroy(cache);
    return check_done();
}
