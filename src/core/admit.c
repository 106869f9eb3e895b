/* The TinyLFU admission filter of admit.h. */
#include "core/admit.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define ROWS 4
#define CMAX 15

struct fkv__admit {
    uint64_t *door; /* doorkeeper bits */
    uint64_t door_mask;
    uint8_t *cms; /* [ROWS][width] */
    uint64_t width_mask;
    uint64_t window, n, halvings;
    uint32_t threshold;
};

static uint64_t pow2_at_least(uint64_t v)
{
    uint64_t p = 64;
    while (p < v) p <<= 1;
    return p;
}

fkv__admit *fkv__admit_new(uint64_t window, uint32_t threshold)
{
    if (!window || threshold < 1 || threshold > CMAX) return NULL;
    uint64_t sized = window < (1ull << 26) ? window : (1ull << 26);
    fkv__admit *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    uint64_t bits = pow2_at_least(8 * sized), width = pow2_at_least(sized);
    a->door = calloc(bits / 64, sizeof *a->door);
    a->cms = calloc(ROWS * width, 1);
    if (!a->door || !a->cms) {
        fkv__admit_free(a);
        return NULL;
    }
    a->door_mask = bits - 1;
    a->width_mask = width - 1;
    a->window = window;
    a->threshold = threshold;
    return a;
}

void fkv__admit_free(fkv__admit *a)
{
    if (!a) return;
    free(a->door);
    free(a->cms);
    free(a);
}

typedef struct {
    uint64_t lo, hi;
} h128;

static h128 hash(uint64_t key)
{
    XXH128_hash_t h = XXH3_128bits(&key, sizeof key);
    return (h128){h.low64, h.high64};
}

/* doorkeeper: two bits, from the two halves of the hash */
static int door_has(const fkv__admit *a, h128 h)
{
    uint64_t b1 = h.lo & a->door_mask, b2 = h.hi & a->door_mask;
    return (a->door[b1 >> 6] >> (b1 & 63) & 1) && (a->door[b2 >> 6] >> (b2 & 63) & 1);
}

static void door_add(fkv__admit *a, h128 h)
{
    uint64_t b1 = h.lo & a->door_mask, b2 = h.hi & a->door_mask;
    a->door[b1 >> 6] |= 1ull << (b1 & 63);
    a->door[b2 >> 6] |= 1ull << (b2 & 63);
}

/* row r's counter: double hashing over the two halves */
static uint8_t *cell(const fkv__admit *a, h128 h, int r)
{
    uint64_t i = (h.lo + (uint64_t)r * (h.hi | 1)) >> 7 & a->width_mask;
    return a->cms + (uint64_t)r * (a->width_mask + 1) + i;
}

static uint32_t cms_min(const fkv__admit *a, h128 h)
{
    uint32_t m = CMAX;
    for (int r = 0; r < ROWS; r++) {
        uint8_t v = *cell(a, h, r);
        if (v < m) m = v;
    }
    return m;
}

static void halve(fkv__admit *a)
{
    uint64_t n = ROWS * (a->width_mask + 1);
    for (uint64_t i = 0; i < n; i++) a->cms[i] >>= 1;
    memset(a->door, 0, (a->door_mask + 1) / 8);
    a->n = 0;
    a->halvings++;
}

void fkv__admit_record(fkv__admit *a, uint64_t key)
{
    h128 h = hash(key);
    if (!door_has(a, h)) {
        door_add(a, h);
    } else {
        /* conservative update: raise only the counters at the minimum */
        uint32_t m = cms_min(a, h);
        if (m < CMAX)
            for (int r = 0; r < ROWS; r++) {
                uint8_t *p = cell(a, h, r);
                if (*p == m) (*p)++;
            }
    }
    if (++a->n >= a->window) halve(a);
}

uint32_t fkv__admit_estimate(const fkv__admit *a, uint64_t key)
{
    h128 h = hash(key);
    return cms_min(a, h) + (uint32_t)door_has(a, h);
}

int fkv__admit_ok(const fkv__admit *a, uint64_t key)
{
    return fkv__admit_estimate(a, key) >= a->threshold;
}

uint64_t fkv__admit_halvings(const fkv__admit *a)
{
    return a->halvings;
}
