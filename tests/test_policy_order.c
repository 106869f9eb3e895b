/* The key-ordered policy engine (sorted runs beside a heap) must give the
 * victim a single heap would: the chunk with the least (key, id) among
 * those it holds, whatever the order of inserts, removals and reads.
 * Random operations on each key-ordered policy, the victim checked after
 * every one against a scan of the held chunks with the policy's key
 * computed here from its formula. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/internal.h"
#include "test_rng.h"

enum { N = 300, OPS = 20000 };

/* the keys, from the definitions in the policy files */
static double key_of(const char *name, const fkv__policy_params *p, const fkv__chunk *ch)
{
    const fkv_chunk_info *v = &ch->m;
    if (!strcmp(name, "fifo")) return (double)ch->id; /* creation order */
    if (!strcmp(name, "lru")) return (double)v->last_access_ns;
    double a = p->alpha / (double)v->access_count;
    /* age in ns units, or in the pool's turnovers (age_unit_ns == 0) */
    double b = p->beta * (p->age_unit_ns > 0 ? (double)v->create_ns / p->age_unit_ns
                                             : (double)ch->create_tick / p->age_unit_pages);
    if (!strcmp(name, "flru-seed")) return p->beta * ((double)v->create_ns / 1e9) - a; /* seconds, always */
    if (!strcmp(name, "flru")) return b - a;
    return a - b; /* flru-literal */
}

static int less(double ka, uint64_t ia, double kb, uint64_t ib)
{
    return ka < kb || (ka == kb && ia < ib);
}

static void run_policy(const char *name, uint64_t seed, int turnover)
{
    const fkv__policy_ops *ops = fkv__policy_find(name);
    REQUIRE(ops != NULL);
    fkv__policy_params p = {.alpha = 0.7, .beta = 0.3, .age_unit_ns = turnover ? 0 : 1000, .age_unit_pages = 40};
    fkv__policy_inst *in = fkv__policy_inst_new(ops, &p);
    REQUIRE(in != NULL);
    fkv__chunk *ch = calloc(N, sizeof *ch);
    int *held = calloc(N, sizeof *held);
    REQUIRE(ch && held);
    rng r = {seed};
    int64_t now = 1000;
    uint64_t next_id = 1;
    int bad = 0, n_held = 0;
    for (int op = 0; op < OPS && !bad; op++) {
        now += next(&r) % 3 * 500; /* equal times happen: ties go by id */
        uint32_t i = next(&r) % N, kind = next(&r) % 10;
        fkv__chunk *c = &ch[i];
        if (!held[i]) {
            /* (re)created: mostly now, sometimes back-dated (a chunk that
             * reaches the policy long after it was made) */
            memset(c, 0, sizeof *c);
            c->id = next_id++;
            c->m.create_ns = kind < 7 ? now : now - (int64_t)(next(&r) % 100000);
            c->create_tick = (uint64_t)c->m.create_ns / 50; /* pages allocated so far: grows with time */
            c->m.last_access_ns = kind < 8 ? now : c->m.create_ns;
            c->m.access_count = 1 + (kind == 9 ? next(&r) % 8 : 0);
            if (ops->insert(in->state, c) != FKV_OK) bad = 1;
            held[i] = 1;
            n_held++;
        } else if (kind < 3) {
            ops->remove(in->state, c);
            held[i] = 0;
            n_held--;
        } else if (kind < 4) {
            fkv__chunk *v = ops->victim(in->state);
            if (!v) {
                bad = 1;
                break;
            }
            ops->remove(in->state, v);
            held[v - ch] = 0;
            n_held--;
        } else {
            c->m.access_count++;
            c->m.last_access_ns = now;
            if (ops->access) ops->access(in->state, c);
        }
        /* the expected victim */
        int best = -1;
        double bk = 0;
        for (int j = 0; j < N; j++) {
            if (!held[j]) continue;
            double k = key_of(name, &p, &ch[j]);
            if (best < 0 || less(k, ch[j].id, bk, ch[best].id)) best = j, bk = k;
        }
        fkv__chunk *v = ops->victim(in->state);
        if ((best < 0) != (v == NULL) || (v && v != &ch[best])) {
            fprintf(stderr, "%s: op %d: victim is chunk %lld, expected %d (%d held)\n", name, op,
                    v ? (long long)(v - ch) : -1LL, best, n_held);
            bad = 1;
        }
    }
    CHECK(!bad);
    /* draining gives every held chunk once, in (key, id) order */
    double last_k = -INFINITY;
    uint64_t last_id = 0;
    int drained = 0, order_ok = 1;
    for (fkv__chunk *v; (v = ops->victim(in->state));) {
        double k = key_of(name, &p, v);
        if (drained && less(k, v->id, last_k, last_id)) order_ok = 0;
        last_k = k, last_id = v->id;
        ops->remove(in->state, v);
        REQUIRE(held[v - ch]);
        held[v - ch] = 0;
        drained++;
    }
    CHECK(order_ok);
    CHECK(drained == n_held);
    fkv__policy_inst_free(in);
    free(ch);
    free(held);
}

int main(void)
{
    /* flru-lowest under its first name too (accepted as an alias) */
    const char *names[] = {"fifo", "lru", "flru", "flru-lowest", "flru-literal", "flru-seed"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            for (int turnover = 0; turnover < 2; turnover++) run_policy(names[k], seed, turnover);
    int listed = 0, old = 0;
    for (const char *const *p = fkv_policy_names(); *p; p++) {
        listed += !strcmp(*p, "flru-lowest");
        old += !strcmp(*p, "flru-literal");
    }
    CHECKF(listed == 1 && old == 0, "policy names: flru-lowest listed %d times, flru-literal %d", listed, old);
    return check_done();
}
