/* The engine with threads (the TSan suite runs every test whose name holds
 * "threads"): three threads submit requests while the main thread steps,
 * and a forward / kernel pool of 2 threads runs the steps.  Greedy tokens
 * must equal a single-threaded run of the same requests. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model_fixture.h"
#include "engine/engine.h"
#include "model/model_init.h"

#define NSUB 3
#define PER 3
#define NR (NSUB * PER)
#define NTOK 16

static fkv_llama *model;
static int32_t prompts[NR][160];
static uint32_t plen[NR];

typedef struct out {
    int32_t tok[NR][NTOK];
    atomic_int n_tok[NR];
    atomic_int done[NR];
} out;

/* ctx: the request's index, boxed with the output */
typedef struct box {
    out *o;
    int r;
} box;

static void on_tok(void *ctx, uint64_t id, uint32_t sample, int32_t token, const float *lg, uint32_t V, unsigned flags)
{
    (void)id, (void)sample, (void)lg, (void)V, (void)flags;
    box *b = ctx;
    int t = atomic_fetch_add(&b->o->n_tok[b->r], 1);
    if (t < NTOK) b->o->tok[b->r][t] = token;
}

static void on_done(void *ctx, uint64_t id, uint32_t sample, fkv_status st, uint32_t n)
{
    (void)id, (void)sample;
    box *b = ctx;
    atomic_store(&b->o->done[b->r], st == FKV_OK && n == NTOK ? 1 : -1);
}

static box boxes[2][NR];

static fkv_engine_request mk(int r, box *b)
{
    fkv_engine_request rq;
    memset(&rq, 0, sizeof rq);
    rq.prompt = prompts[r];
    rq.n_prompt = plen[r];
    rq.max_tokens = NTOK;
    rq.top_p = 1;
    rq.n = 1;
    rq.n_stop_tokens = 0;
    rq.on_token = on_tok;
    rq.on_done = on_done;
    rq.ctx = b;
    return rq;
}

typedef struct sub_arg {
    fkv_engine *e;
    int first;
    int fails;
} sub_arg;

static void *submitter(void *p)
{
    sub_arg *a = p;
    for (int i = 0; i < PER; i++) {
        int r = a->first + i;
        fkv_engine_request rq = mk(r, &boxes[1][r]);
        a->fails += fkv_engine_submit(a->e, &rq, NULL) != FKV_OK;
    }
    return NULL;
}

static int all_done(out *o)
{
    for (int r = 0; r < NR; r++)
        if (atomic_load(&o->done[r]) == 0) return 0;
    return 1;
}

int main(void)
{
    fkv_model_init_cfg cfg;
    REQUIRE(!fkv_model_init_preset("tiny", &cfg));
    cfg.n_layers = 2, cfg.dim = 64, cfg.hidden = 256, cfg.seed = 11;
    built b = build(&cfg);
    model = b.m;
    char err[300];
    for (int r = 0; r < NR; r++) {
        plen[r] = 40 + 13 * (uint32_t)r;
        for (uint32_t i = 0; i < plen[r]; i++) prompts[r][i] = (int32_t)(3 + (i * 7 + (uint32_t)r * 31) % 250);
    }
    out *ref = calloc(1, sizeof *ref), *got = calloc(1, sizeof *got);
    REQUIRE(ref && got);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: one thread, requests in order; pass 1: submitted from
         * NSUB threads while the main thread steps, 2 pool threads.
         * Reference attention: tokens do not depend on the step mix. */
        out *o = pass ? got : ref;
        fkv_engine_config c;
        fkv_engine_config_default(&c);
        c.ref_attention = 1;
        c.n_threads = pass ? 2 : 1;
        c.max_batch_tokens = 64;
        c.kv_budget_bytes = 400ull * 2 * 2 * 2 * 16 * 4; /* 400 tokens: some eviction */
        fkv_engine *e;
        REQUIRE(!fkv_engine_create(model, &c, &e, err, sizeof err));
        for (int r = 0; r < NR; r++) boxes[pass][r] = (box){o, r};
        if (!pass) {
            for (int r = 0; r < NR; r++) {
                fkv_engine_request rq = mk(r, &boxes[0][r]);
                REQUIRE(!fkv_engine_submit(e, &rq, NULL));
            }
            REQUIRE(!fkv_engine_run_until_idle(e));
        } else {
            pthread_t th[NSUB];
            sub_arg args[NSUB];
            for (int t = 0; t < NSUB; t++) {
                args[t] = (sub_arg){e, t * PER, 0};
                REQUIRE(!pthread_create(&th[t], NULL, submitter, &args[t]));
            }
            fkv_status st = FKV_OK;
            for (long spins = 0; spins < 10000000 && !st && !all_done(o); spins++) st = fkv_engine_step(e, NULL);
            for (int t = 0; t < NSUB; t++) {
                pthread_join(th[t], NULL);
                CHECK(args[t].fails == 0);
            }
            CHECK(st == FKV_OK);
        }
        fkv_engine_destroy(e);
    }
    int bad = 0;
    for (int r = 0; r < NR; r++)
        bad += atomic_load(&ref->done[r]) != 1 || atomic_load(&got->done[r]) != 1 ||
               memcmp(ref->tok[r], got->tok[r], sizeof ref->tok[r]) != 0;
    CHECKF(bad == 0, "%d requests differ between the threaded and the single-threaded run", bad);

    /* the kernels on 2 threads against 1, same submission order */
    for (int pass = 0; pass < 2; pass++) {
        out *o = pass ? got : ref;
        memset(o, 0, sizeof *o);
        fkv_engine_config c;
        fkv_engine_config_default(&c);
        c.n_threads = pass ? 2 : 1;
        c.max_batch_tokens = 64;
        fkv_engine *e;
        REQUIRE(!fkv_engine_create(model, &c, &e, err, sizeof err));
        for (int r = 0; r < NR; r++) {
            boxes[pass][r] = (box){o, r};
            fkv_engine_request rq = mk(r, &boxes[pass][r]);
            REQUIRE(!fkv_engine_submit(e, &rq, NULL));
        }
        CHECK(fkv_engine_run_until_idle(e) == FKV_OK);
        fkv_engine_destroy(e);
    }
    bad = 0;
    for (int r = 0; r < NR; r++)
        bad += atomic_load(&got->done[r]) != 1 || memcmp(ref->tok[r], got->tok[r], sizeof ref->tok[r]) != 0;
    CHECKF(bad == 0, "kernels: %d requests differ between 2 threads and 1", bad);
    free(ref);
    free(got);
    unbuild(&b);
    return check_done();
}
