/* Golden tests of every eviction policy.
 *
 * Objects are one-page prompts: a request for object x matches the prefix
 * cache (hit) or appends the page (miss, evicting one cached chunk when the
 * pool is full) and then ends, leaving its chunk cached.
 *  1. Victim order on a hand-made case, computed by hand below.
 *  2. Miss counts on tests/data/objects.trace against plain reference
 *     implementations written here from the policies' definitions (F-LRU
 *     rescoring every chunk at eviction time with the seed's formula, not
 *     the cache's static key). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "fairkv.h"
#include "fairkv_eval.h"

#define PT 4
#define MAX_OBJ 256
#define MAX_REQ 4000

static int64_t now;
static int32_t trace[MAX_REQ];
static int n_trace;
static int cur; /* index of the request being served */
static uint64_t obj_hash[MAX_OBJ];
static int req_obj[MAX_REQ * 2]; /* object of each request id */

/* Belady's future: next request for the chunk's object after `cur`. */
static int64_t next_use(void *ctx, const fkv_chunk_view *view, const fkv_chunk_info *v)
{
    (void)ctx;
    (void)view;
    int obj = -1;
    if (v->owner) { /* still held by the request that wrote it */
        obj = req_obj[v->owner];
    } else {
        for (int o = 0; o < MAX_OBJ; o++)
            if (obj_hash[o] == v->first_hash && v->first_hash) obj = o;
    }
    if (obj < 0) return INT64_MAX;
    for (int i = cur + 1; i < n_trace; i++)
        if (trace[i] == obj) return (int64_t)i * 1000 + 1;
    return INT64_MAX;
}

static fkv_cache *open_cache(const char *policy, uint32_t pages)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = PT;
    cfg.chunk_tokens = PT;
    cfg.capacity_pages = pages;
    cfg.policy = policy;
    cfg.quotas = 0;
    cfg.age_unit_ns = 1000; /* ages in steps of 1000 ns (one request each) */
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    char err[128];
    fkv_eval_config ev;
    fkv_eval_config_default(&ev);
    ev.next_use = next_use;
    if (fkv_cache_create_eval(&cfg, &ev, &c, err, sizeof err)) fprintf(stderr, "create: %s\n", err);
    return c;
}

static uint64_t next_req = 1; /* reset per cache: ids index req_obj */

/* One request for object x at time t; returns 1 on a hit. */
static int request(fkv_cache *c, int x, int64_t t)
{
    now = t;
    int32_t tok[PT];
    for (int i = 0; i < PT; i++) tok[i] = x;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = next_req++;
    if (p.request_id < MAX_REQ * 2) req_obj[p.request_id] = x;
    fkv_seq *s = NULL;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    fkv_match_info mi;
    REQUIRE(fkv_seq_match_prefix(s, tok, PT, PT, FKV_MATCH_DEVICE_ONLY, &mi) == FKV_OK);
    uint32_t m = mi.device_tokens;
    if (m == 0) {
        REQUIRE(fkv_seq_append(s, tok, PT, NULL) == FKV_OK);
        const fkv_chunk_view *const *ch;
        size_t n;
        fkv_seq_chunks(s, &ch, &n);
        fkv_chunk_info info;
        REQUIRE(n == 1 && !fkv_seq_chunk_info(s, 0, &info) && info.first_hash);
        if (x < MAX_OBJ) obj_hash[x] = info.first_hash;
    }
    fkv_seq_free(s);
    return m == PT;
}

static int cached(fkv_cache *c, int x)
{
    int32_t tok[PT];
    for (int i = 0; i < PT; i++) tok[i] = x;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = next_req++;
    fkv_seq *s = NULL;
    fkv_seq_create(c, &p, &s);
    fkv_match_info mi = {0, 0, 0};
    /* a probe that reads nothing: match with max 0 pages would not look,
     * so look with the full page and drop the sequence (counts as a hit,
     * which is why probes come only after the order checks below) */
    fkv_seq_match_prefix(s, tok, PT, PT, FKV_MATCH_DEVICE_ONLY, &mi);
    uint32_t m = mi.device_tokens;
    fkv_seq_free(s);
    return m == PT;
}

/* Hand-made case, times in steps (request i at i*1000+1 ns, ages in units
 * of 1000 ns): capacity 4; A,B,C,D inserted at steps 0..3; A read at 4 and
 * 5, C at 6; E inserted at 7 evicts one; F at 8 evicts another.
 *   access counts: A=3, B=1, C=2, D=1; E new (1).
 *   fifo:  A then B (insertion order).
 *   lru:   B (last read 1) then D (last read 3).
 *   flru, highest 0.7/ac + 0.3*age first.  At 7: A=0.233+2.1=2.333,
 *          B=0.7+1.8=2.5, C=0.35+1.5=1.85, D=0.7+1.2=1.9 -> B.  At 8:
 *          A=2.633, C=2.15, D=2.2, E=0.7+0.3=1.0 -> A.
 *   flru-literal, lowest first: at 7 -> C (1.85); at 8: A=2.633, B=2.8,
 *          D=2.2, E=1.0 -> E.
 *   sieve: hand from the oldest: A visited (cleared), B not -> B; then C
 *          visited (cleared), D not -> D.
 *   belady, future D@9, B@10, A@11, F@12, C and E never: at 7 -> C, at 8 -> E. */
static void victim_order(void)
{
    static const struct {
        const char *policy;
        char first, second;
    } want[] = {{"fifo", 'A', 'B'},         {"lru", 'B', 'D'},   {"flru", 'B', 'A'},
                {"flru-literal", 'C', 'E'}, {"sieve", 'B', 'D'}, {"belady", 'C', 'E'}};
    const char *reqs = "ABCDAACEFDBAF";
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        memset(obj_hash, 0, sizeof obj_hash);
        n_trace = 0;
        for (const char *f = reqs; *f; f++) trace[n_trace++] = *f;
        next_req = 1;
        fkv_cache *c = open_cache(want[k].policy, 4);
        REQUIRE(c);
        for (int i = 0; i <= 8; i++) {
            cur = i;
            request(c, reqs[i], (int64_t)i * 1000 + 1);
        }
        char missing[8] = {0};
        int nm = 0;
        cur = n_trace;
        for (const char *o = "ABCDEF"; *o && nm < 7; o++)
            if (!cached(c, *o)) missing[nm++] = *o;
        CHECKF(nm == 2 && strchr(missing, want[k].first) && strchr(missing, want[k].second),
               "%s: evicted %s, want %c and %c", want[k].policy, missing, want[k].first, want[k].second);
        fkv_cache_destroy(c);
    }
}

/* ---- reference implementations over the object trace ---- */

typedef struct ref {
    int obj[64];
    int64_t create[64], last[64];
    uint64_t ac[64], seqno[64];
    int visited[64];
    int n, hand; /* sieve: positions in insertion order, hand index */
} ref;

static int ref_find(const ref *r, int x)
{
    for (int i = 0; i < r->n; i++)
        if (r->obj[i] == x) return i;
    return -1;
}

static void ref_del(ref *r, int i)
{
    for (int j = i; j + 1 < r->n; j++) {
        r->obj[j] = r->obj[j + 1], r->create[j] = r->create[j + 1], r->last[j] = r->last[j + 1];
        r->ac[j] = r->ac[j + 1], r->seqno[j] = r->seqno[j + 1], r->visited[j] = r->visited[j + 1];
    }
    r->n--;
}

static int64_t ref_next(int x, int from)
{
    for (int i = from + 1; i < n_trace; i++)
        if (trace[i] == x) return (int64_t)i * 1000 + 1;
    return INT64_MAX;
}

/* eviction key of entry i (smaller = evicted sooner), from the definitions */
static double ref_key(const ref *r, const char *policy, int i, int64_t t, int ti)
{
    if (!strcmp(policy, "fifo")) return (double)r->seqno[i];
    if (!strcmp(policy, "lru")) return (double)r->last[i];
    double score = 0.7 / (double)r->ac[i] + 0.3 * (double)(t - r->create[i]) / 1000.0;
    if (!strcmp(policy, "flru")) return -score;
    if (!strcmp(policy, "flru-literal")) return score;
    return -(double)ref_next(r->obj[i], ti); /* belady */
}

static int ref_victim(ref *r, const char *policy, int64_t t, int ti)
{
    if (!strcmp(policy, "sieve")) {
        /* entries are in insertion order: index 0 = oldest */
        int h = r->hand < r->n ? r->hand : 0;
        while (r->visited[h]) {
            r->visited[h] = 0;
            h = h + 1 < r->n ? h + 1 : 0;
        }
        r->hand = h; /* after deleting h, the next newer entry slides into h */
        return h;
    }
    int best = 0;
    double bk = ref_key(r, policy, 0, t, ti);
    for (int i = 1; i < r->n; i++) {
        double k = ref_key(r, policy, i, t, ti);
        double eps = 1e-9 * (bk < 0 ? -bk : bk);
        /* ties (within rounding) go to the older entry, as in the cache */
        if (k < bk - eps || (k <= bk + eps && r->seqno[i] < r->seqno[best])) best = i, bk = k;
    }
    return best;
}

static uint64_t ref_misses(const char *policy, int cap)
{
    ref r;
    memset(&r, 0, sizeof r);
    uint64_t misses = 0, seq = 0;
    for (int i = 0; i < n_trace; i++) {
        int64_t t = (int64_t)i * 1000 + 1;
        int x = trace[i], k = ref_find(&r, x);
        if (k >= 0) {
            r.ac[k]++;
            r.last[k] = t;
            r.visited[k] = 1;
            continue;
        }
        misses++;
        if (r.n == cap) {
            int v = ref_victim(&r, policy, t, i);
            ref_del(&r, v);
            if (r.hand >= r.n) r.hand = 0; /* the hand passed the newest: wrap */
        }
        k = r.n++;
        r.obj[k] = x, r.create[k] = t, r.last[k] = t, r.ac[k] = 1, r.seqno[k] = ++seq, r.visited[k] = 0;
    }
    return misses;
}

static int load_trace(void)
{
    const char *dir = getenv("FKV_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/objects.trace", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    n_trace = 0;
    while (fgets(line, sizeof line, f) && n_trace < MAX_REQ)
        if (line[0] != '#') trace[n_trace++] = atoi(line);
    fclose(f);
    return n_trace;
}

static void trace_misses(void)
{
    REQUIRE(load_trace() == 3000);
    const char *policies[] = {"fifo", "lru", "flru", "flru-literal", "sieve", "belady"};
    uint64_t got[6];
    for (int k = 0; k < 6; k++) {
        memset(obj_hash, 0, sizeof obj_hash);
        next_req = 1;
        fkv_cache *c = open_cache(policies[k], 16);
        REQUIRE(c);
        uint64_t misses = 0;
        for (int i = 0; i < n_trace; i++) {
            cur = i;
            misses += !request(c, trace[i], (int64_t)i * 1000 + 1);
        }
        fkv_cache_destroy(c);
        uint64_t want = ref_misses(policies[k], 16);
        got[k] = misses;
        printf("%-13s misses %llu (reference %llu)\n", policies[k], (unsigned long long)misses, (unsigned long long)want);
        CHECKF(misses == want, "%s: %llu misses, reference %llu", policies[k], (unsigned long long)misses,
               (unsigned long long)want);
    }
    for (int k = 0; k < 5; k++) CHECKF(got[5] <= got[k], "belady %llu > %s %llu", (unsigned long long)got[5], policies[k], (unsigned long long)got[k]);
}

int main(void)
{
    victim_order();
    trace_misses();
    return check_done();
}
