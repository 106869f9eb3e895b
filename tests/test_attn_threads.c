/* The kernels under threads (also run under ThreadSanitizer by make test):
 * a pool reused across many calls, and two pools used at once from two
 * threads over the same K/V memory, agree with the single-threaded result;
 * the pool's waits (spin, then sleep) lose no run. */
#define _DEFAULT_SOURCE /* setenv, usleep */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn_fixture.h"

enum { NSEQ = 3, NH = 8, D = 64 };

static fx F;
static fxseq S[NSEQ];
static fkv_attn_seq AS[NSEQ];
static float Q[NSEQ * NH * D], REF[NSEQ * NH * D];

static double diff(const float *a, const float *b, size_t n)
{
    double e = 0, z = 0;
    for (size_t i = 0; i < n; i++) e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), z += (double)a[i] * a[i];
    return e / z;
}

static void *caller(void *arg)
{
    int *fails = arg;
    fkv_attn_pool *p;
    if (fkv_attn_pool_create(2, &p) != FKV_OK) {
        (*fails)++;
        return NULL;
    }
    fkv_attn_kv kv = {&F.g, 0, F.layers[0].k, F.layers[0].v};
    float out[NSEQ * NH * D];
    for (int it = 0; it < 10; it++) {
        if (fkv_attn_decode(p, &kv, NH, AS, NSEQ, Q, out, 0.125f, NULL, 0) != FKV_OK ||
            diff(REF, out, sizeof out / sizeof out[0]) > 1e-10)
            (*fails)++;
    }
    fkv_attn_pool_destroy(p);
    return NULL;
}

static void count(void *ctx, size_t i, unsigned thread)
{
    (void)thread;
    ((unsigned char *)ctx)[i]++;
}

/* as count, with some items slow enough that the caller, done with its
 * share, sleeps on the workers; they count after the wait, so a caller
 * that returns early finds them not counted */
static void slow_count(void *ctx, size_t i, unsigned thread)
{
    if (i % 97 == 0) usleep(300);
    count(ctx, i, thread);
}

/* The pool's waits: spinning before sleeping (the default), sleeping at once
 * (FAIRKV_POOL_SPIN_US=0) and a spin shorter than the gaps between runs;
 * runs back to back, runs further apart than the spin (the workers asleep),
 * runs whose items keep the caller waiting past its spin.  Every index is
 * visited once per run; a lost wake-up hangs the test past its timeout. */
static void pool_waits(void)
{
    static const char *spins[] = {NULL, "0", "20"};
    for (int s = 0; s < 3; s++) {
        if (spins[s]) setenv("FAIRKV_POOL_SPIN_US", spins[s], 1);
        else unsetenv("FAIRKV_POOL_SPIN_US");
        fkv_attn_pool *p;
        REQUIRE(fkv_attn_pool_create(3, &p) == FKV_OK);
        unsigned char hits[500];
        int bad = 0;
        for (int it = 0; it < 120; it++) {
            memset(hits, 0, sizeof hits);
            fkv_attn_pool_run(p, sizeof hits, it % 3 == 2 ? slow_count : count, hits);
            for (size_t i = 0; i < sizeof hits; i++) bad += hits[i] != 1;
            if (it % 4 == 1) usleep(400);
        }
        CHECKF(bad == 0, "FAIRKV_POOL_SPIN_US=%s: %d items not run exactly once", spins[s] ? spins[s] : "(unset)", bad);
        fkv_attn_pool_destroy(p);
    }
    unsetenv("FAIRKV_POOL_SPIN_US");
}

int main(void)
{
    pool_waits();
    rng r = {31};
    fkv_kv_geom g = {1, 2, D, 16, FKV_F32, 0, 1024};
    fx_init(&F, g, &r);
    static const fkv_dtype dts[] = {FKV_F32, FKV_INT8, FKV_INT4};
    for (int b = 0; b < NSEQ; b++) {
        fx_seq(&F, &S[b], 300 + 400 * (uint32_t)b, 80, dts, 3, 0, &r);
        AS[b] = (fkv_attn_seq){S[b].tab, S[b].n_chunks, NULL, NULL};
    }
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) Q[i] = (float)rng_gauss(&r);
    fkv_attn_kv kv = {&F.g, 0, F.layers[0].k, F.layers[0].v};
    REQUIRE(fkv_attn_decode(NULL, &kv, NH, AS, NSEQ, Q, REF, 0.125f, NULL, 0) == FKV_OK);

    /* every index of a run is visited exactly once, over many runs */
    fkv_attn_pool *p4;
    REQUIRE(fkv_attn_pool_create(4, &p4) == FKV_OK);
    CHECK(fkv_attn_pool_threads(p4) == 4);
    unsigned char hits[1000];
    for (int it = 0; it < 50; it++) {
        memset(hits, 0, sizeof hits);
        fkv_attn_pool_run(p4, sizeof hits, count, hits);
        int ok = 1;
        for (size_t i = 0; i < sizeof hits; i++) ok &= hits[i] == 1;
        CHECK(ok);
    }
    /* a reused pool: splits differ from the single-threaded plan, the
     * result may differ only by rounding */
    float out[NSEQ * NH * D];
    for (int it = 0; it < 10; it++) {
        CHECK(fkv_attn_decode(p4, &kv, NH, AS, NSEQ, Q, out, 0.125f, NULL, 0) == FKV_OK);
        CHECK(diff(REF, out, sizeof out / sizeof out[0]) <= 1e-10);
    }
    /* H2O mass from many ranges at once, with a keep mask */
    fkv_attn_seq ms[NSEQ];
    float *mass[NSEQ];
    uint8_t *keep[NSEQ];
    for (int b = 0; b < NSEQ; b++) {
        mass[b] = calloc(S[b].n_chunks, sizeof(float));
        keep[b] = malloc(S[b].n_chunks);
        REQUIRE(mass[b] && keep[b]);
        for (size_t i = 0; i < S[b].n_chunks; i++) keep[b][i] = (uint8_t)(i % 3 != 1);
        ms[b] = (fkv_attn_seq){S[b].tab, S[b].n_chunks, keep[b], mass[b]};
    }
    for (int it = 0; it < 5; it++) CHECK(fkv_attn_decode(p4, &kv, NH, ms, NSEQ, Q, out, 0.125f, NULL, 0) == FKV_OK);
    for (int b = 0; b < NSEQ; b++) {
        double tot = 0;
        for (size_t i = 0; i < S[b].n_chunks; i++) tot += mass[b][i];
        CHECKF(fabs(tot - 5.0 * NH) < 1e-3 * NH, "mass total %.5f, expected %d", tot, 5 * NH);
        free(mass[b]), free(keep[b]);
    }
    fkv_attn_pool_destroy(p4);

    pthread_t t[2];
    int fails[2] = {0, 0};
    for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&t[i], NULL, caller, &fails[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(fails[0] == 0 && fails[1] == 0);
    for (int b = 0; b < NSEQ; b++) fx_seq_free(&S[b]);
    fx_free(&F);
    return check_done();
}
