/* The prefix index's bucketed table (prefix.c): random inserts and
 * removals of keys crowded onto a few home buckets, so that buckets
 * overflow, chains wrap around the table's end and removals leave holes
 * in the middle of chains.  After every operation each key of a model set
 * must be found with its chunk, removed keys must not be, and every
 * bucket's overflow count must equal the entries that passed it. */
#include <stdlib.h>
#include <string.h>

#include "cache_fixture.h"
#include "test_rng.h"

enum { PAGES = 64, MAXKEYS = 64, OPS = 20000 };

static fkv_cache *open_cache(void)
{
    fkv_config cfg;
    fx_small_config(&cfg, PAGES);
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    return c;
}

/* overflow counts recomputed from where the entries sit */
static int counts_exact(const fkv_cache *c)
{
    uint64_t nb = c->pbmask + 1;
    uint32_t passed[1024] = {0};
    REQUIRE(nb <= 1024);
    for (uint64_t i = 0; i < nb * FKV__PBUCKET; i++) {
        uint64_t key = c->ptab[i].key;
        if (!key) continue;
        for (uint64_t b = key & c->pbmask; b != i / FKV__PBUCKET; b = (b + 1) & c->pbmask) passed[b]++;
    }
    for (uint64_t b = 0; b < nb; b++)
        if (c->povf[b] != passed[b]) return 0;
    return 1;
}

static void random_ops(uint64_t seed)
{
    fkv_cache *c = open_cache();
    FKV__LOCK(c);
    uint64_t nb = c->pbmask + 1;
    REQUIRE((nb * FKV__PBUCKET) / 2 >= MAXKEYS); /* load stays <= 1/2 */
    /* the chunk pointers are only compared, never followed */
    static fkv__chunk dummy[2];
    uint64_t keys[MAXKEYS];
    fkv__chunk *owner[MAXKEYS];
    int n = 0, bad_find = 0, bad_counts = 0, found_removed = 0;
    uint64_t removed[OPS];
    int n_removed = 0;
    rng r = {seed};
    for (int op = 0; op < OPS; op++) {
        uint32_t x = next(&r);
        if (n < MAXKEYS && (n == 0 || x % 3 != 0)) {
            /* home buckets: 3 of them, one the last (chains wrap) */
            uint64_t home = (uint64_t[]){0, nb / 2, nb - 1}[next(&r) % 3];
            uint64_t key = ((uint64_t)next(&r) << 32 | next(&r)) & ~c->pbmask;
            key |= home;
            if (!key) continue;
            int dup = 0;
            for (int i = 0; i < n; i++) dup |= keys[i] == key;
            fkv__chunk *ch = &dummy[next(&r) & 1];
            fkv__prefix_insert(c, key, ch);
            if (!dup) keys[n] = key, owner[n++] = ch;
        } else if (n > 0) {
            int i = (int)(next(&r) % (uint32_t)n);
            /* the wrong chunk does not remove it */
            fkv__prefix_remove(c, keys[i], owner[i] == &dummy[0] ? &dummy[1] : &dummy[0]);
            fkv__prefix_remove(c, keys[i], owner[i]);
            removed[n_removed++] = keys[i];
            keys[i] = keys[--n];
            owner[i] = owner[n];
        }
        for (int i = 0; i < n; i++) {
            fkv__pentry *e = fkv__prefix_find(c, keys[i]);
            bad_find += !e || e->chunk != owner[i];
        }
        for (int i = n_removed > 8 ? n_removed - 8 : 0; i < n_removed; i++) {
            int live = 0;
            for (int j = 0; j < n; j++) live |= keys[j] == removed[i];
            found_removed += !live && fkv__prefix_find(c, removed[i]) != NULL;
        }
        bad_counts += !counts_exact(c);
        CHECK(c->pcount == (uint64_t)n);
        if (c->pcount != (uint64_t)n) break;
    }
    CHECKF(bad_find == 0, "%d lookups of present keys failed", bad_find);
    CHECKF(found_removed == 0, "%d removed keys still found", found_removed);
    CHECKF(bad_counts == 0, "overflow counts wrong after %d operations", bad_counts);
    /* the crowding did overflow buckets: a chain of >= 3 buckets exists */
    int long_chain = 0;
    for (uint64_t b = 0; b < nb; b++) long_chain |= c->povf[b] && c->povf[(b + 1) & c->pbmask];
    CHECK(long_chain || n < 2 * FKV__PBUCKET);
    FKV__UNLOCK(c);
    fkv_cache_destroy(c);
}

int main(void)
{
    random_ops(1);
    random_ops(2);
    random_ops(3);
    return check_done();
}
