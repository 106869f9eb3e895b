/* The TTL tier (ttl.c: a heap for near expiries, a wheel of unordered
 * bucket lists and an overflow list for far ones) must choose the expired
 * chunk a single heap over every entry would choose: the least (filed key,
 * chunk id) below the clock whose real expiry has passed, re-filing the
 * ones read since they were filed.  Random adds, reads (which move the
 * real expiry but not the filed key), removals and clock steps, small and
 * large (past the wheel, and jumps with the tier empty), each followed by
 * the tier's answer checked against a scan of a model. */
#include <stdlib.h>

#include "check.h"
#include "core/internal.h"
#include "test_rng.h"

enum { N = 400, OPS = 40000 };

static double ttl_of(rng *r)
{
    switch (next(r) % 3) {
    case 0: return 1 + next(r) % 64;                           /* near: the heap */
    case 1: return 100 + next(r) % 3000 + (next(r) % 4) * 0.25; /* on the wheel */
    default: return 5000 + next(r) % 20000;                    /* past it */
    }
}

static void run(uint64_t seed)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.capacity_pages = 64;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    FKV__LOCK(c);
    fkv__chunk *ch = calloc(N, sizeof *ch);
    double *filed = calloc(N, sizeof *filed);
    int *in = calloc(N, sizeof *in);
    REQUIRE(ch && filed && in);
    for (int i = 0; i < N; i++) ch[i].id = (uint64_t)i + 1;
    rng r = {seed};
    int wrong = 0, expired_found = 0, n_in = 0;
    uint64_t clock = 0;
    for (int op = 0; op < OPS && !wrong; op++) {
        int i = (int)(next(&r) % N);
        uint32_t kind = next(&r) % 16;
        if (kind < 6 && !in[i]) { /* a chunk enters the tier */
            ch[i].ttl.last_req = clock - (clock ? next(&r) % (clock < 50 ? clock : 50) : 0);
            ch[i].ttl.req = ttl_of(&r);
            fkv__ttl_add(c, &ch[i]);
            filed[i] = (double)ch[i].ttl.last_req + ch[i].ttl.req;
            in[i] = 1, n_in++;
        } else if (kind < 9 && in[i]) { /* read: the real expiry moves, the filed key does not */
            ch[i].ttl.last_req = clock;
            ch[i].ttl.req = ttl_of(&r);
        } else if (kind < 11 && in[i]) {
            fkv__ttl_remove(c, &ch[i]);
            in[i] = 0, n_in--;
        } else if (kind < 15) {
            clock += next(&r) % 40;
        } else {
            clock += 5000 + next(&r) % 30000;
        }
        c->n_requests = clock;
        /* the model: a single heap's answer */
        const fkv__chunk *want = NULL;
        for (;;) {
            int best = -1;
            for (int k = 0; k < N; k++)
                if (in[k] && filed[k] < (double)clock &&
                    (best < 0 || filed[k] < filed[best] || (filed[k] == filed[best] && ch[k].id < ch[best].id)))
                    best = k;
            if (best < 0) break;
            double real = (double)ch[best].ttl.last_req + ch[best].ttl.req;
            if (real < (double)clock) {
                want = &ch[best];
                break;
            }
            filed[best] = real;
        }
        fkv__chunk *got = c->ttl_n ? fkv__ttl_expired(c) : NULL;
        if (got != want) {
            wrong++;
            fprintf(stderr, "seed %llu op %d: tier chose %lld, a single heap %lld\n", (unsigned long long)seed, op,
                    got ? (long long)got->id : -1, want ? (long long)want->id : -1);
        }
        if (want) { /* evicted */
            expired_found++;
            int k = (int)(want - ch);
            fkv__ttl_remove(c, &ch[k]);
            in[k] = 0, n_in--;
        }
        uint32_t listed = c->ttl_heap.n;
        for (int b = 0; b <= FKV__TTL_NB; b++)
            for (fkv__chunk *x = b < FKV__TTL_NB ? c->ttl_wheel[b].head : c->ttl_over.head; x; x = x->lk.ttl.next) listed++;
        if (c->ttl_n != (uint32_t)n_in || listed != (uint32_t)n_in) {
            wrong++;
            fprintf(stderr, "seed %llu op %d: tier holds %u (listed %u), model %d\n", (unsigned long long)seed, op,
                    c->ttl_n, listed, n_in);
        }
    }
    CHECK(wrong == 0);
    CHECKF(expired_found > 1000, "only %d expiries: the test did not exercise the tier", expired_found);
    for (int i = 0; i < N; i++)
        if (in[i]) fkv__ttl_remove(c, &ch[i]);
    FKV__UNLOCK(c);
    fkv_cache_destroy(c);
    free(ch);
    free(filed);
    free(in);
}

int main(void)
{
    run(1);
    run(2);
    run(3);
    return check_done();
}
