/* The engine's one thread pool (the attention pool, which the forward pass
 * borrows) under load (the TSan suite runs every test whose name holds
 * "threads"): many small runs, and forward passes whose logits must be
 * bit-identical for 1, 2 and 4 threads. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model_fixture.h"
#include "model/model.h"
#include "model/model_init.h"
#include "fairkv_attn.h"

typedef struct counter {
    atomic_uint hits[257];
} counter;

static void bump(void *ctx, size_t task, unsigned thread)
{
    counter *c = ctx;
    (void)thread;
    atomic_fetch_add(&c->hits[task], 1u);
}

static void test_pool(void)
{
    for (unsigned threads = 1; threads <= 4; threads++) {
        fkv_attn_pool *p;
        REQUIRE(fkv_attn_pool_create(threads, &p) == FKV_OK);
        CHECK(fkv_attn_pool_threads(p) == threads);
        counter c;
        for (int i = 0; i < 257; i++) atomic_init(&c.hits[i], 0u);
        int runs = (int)(2000 * check_scale());
        for (int r = 0; r < runs; r++) fkv_attn_pool_run(p, 1 + (size_t)r % 257, bump, &c);
        /* task t ran once in every run with more than t tasks */
        int bad = 0;
        for (uint32_t t = 0; t < 257; t++) {
            unsigned want = 0;
            for (int r = 0; r < runs; r++) want += t < 1 + (uint32_t)r % 257;
            if (atomic_load(&c.hits[t]) != want) bad++;
        }
        CHECKF(bad == 0, "%u threads: %d tasks ran a wrong number of times", threads, bad);
        fkv_attn_pool_destroy(p);
    }
}

static void test_forward_threads(void)
{
    fkv_model_init_cfg cfg;
    fkv_model_init_preset("tiny", &cfg);
    cfg.n_layers = 2, cfg.f16 = 1, cfg.seed = 12;
    built b = build(&cfg);
    fkv_llama *m = b.m;
    char err[300];
    uint32_t n = 48, V = m->hp.n_vocab;
    int32_t tok[48];
    for (uint32_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 37 + 5) % V);
    float *ref = NULL;
    fkv_fwd_geom geom = fkv_llama_geom(m);
    for (uint32_t threads = 1; threads <= 4; threads *= 2) {
        float *lg = malloc((size_t)n * V * sizeof *lg);
        fkv_kvref_seq kv;
        fkv_fwd *f;
        fkv_attn_pool *pool;
        REQUIRE(!fkv_attn_pool_create(threads, &pool));
        REQUIRE(!fkv_kvref_seq_init(&kv, &geom, n) && !fkv_fwd_create(m, pool, &f));
        /* prefill 20, then one token per step */
        for (uint32_t p = 0; p < n; p += p < 20 ? 20 : 1) {
            uint32_t c = p < 20 ? 20 : 1;
            fkv_fwd_seq s = {&kv, tok + p, c, p, NULL, lg + (size_t)p * V, 1};
            REQUIRE(fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err) == FKV_OK);
        }
        if (!ref)
            ref = lg;
        else {
            CHECKF(!memcmp(ref, lg, (size_t)n * V * sizeof *lg), "%u threads: logits differ from 1 thread", threads);
            free(lg);
        }
        fkv_fwd_destroy(f);
        fkv_attn_pool_destroy(pool);
        fkv_kvref_seq_free(&kv);
    }
    free(ref);
    unbuild(&b);
}

int main(void)
{
    test_pool();
    test_forward_threads();
    return check_done();
}
