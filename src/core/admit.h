/* Admission below the device: a TinyLFU frequency filter (Einziger,
 * Friedman, Manes, "TinyLFU: A Highly Efficient Cache Admission Policy",
 * ACM Transactions on Storage 13(4), 2017).  A doorkeeper Bloom filter
 * takes a key's first sighting; later ones go to a count-min sketch of
 * four rows of 4-bit counters (saturating at 15).  After `window`
 * sightings every counter is halved and the doorkeeper cleared, so what
 * was seen long ago fades.  A key's estimate is its sketch minimum plus one
 * if the doorkeeper holds it; it is admitted when the estimate reaches the
 * threshold (2: seen twice within about a window).  Keys are 64-bit page
 * keys (the prefix chain, seeded by the tenant's namespace), hashed once
 * more with xxHash (XXH3, 128 bits) into the rows.
 *
 * No false negatives: a key recorded n times since the last halving has an
 * estimate >= min(n, 16); false positives only from hash collisions
 * (sized so the doorkeeper holds <= 1/8 of a bit per key and the sketch
 * is as wide as the window). */
#ifndef FKV_CORE_ADMIT_H
#define FKV_CORE_ADMIT_H

#include <stdint.h>

typedef struct fkv__admit fkv__admit;

/* window: sightings between halvings (>= 1; bounded by 2^26 in size, not in
 * count); threshold: 1..15.  NULL when out of memory or out of range. */
fkv__admit *fkv__admit_new(uint64_t window, uint32_t threshold);
void fkv__admit_free(fkv__admit *a);
void fkv__admit_record(fkv__admit *a, uint64_t key);
uint32_t fkv__admit_estimate(const fkv__admit *a, uint64_t key);
int fkv__admit_ok(const fkv__admit *a, uint64_t key); /* estimate >= threshold */
uint64_t fkv__admit_halvings(const fkv__admit *a);    /* halvings so far */

#endif
