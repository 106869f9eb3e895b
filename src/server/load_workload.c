/* Workloads of the load generator (see load_workload.h).  The simulator
 * has its own generator of the seed's mix (src/sim/workload.c); this one is
 * kept small and self-contained so `fairkv load` works on its own. */
#include "server/load_workload.h"
#include "util/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* splitmix64 as the stream: explicit state, no rand() */
static uint64_t next_u64(uint64_t *s) { return fkv_rng_splitmix(s); }

/* uniform in [0, 1) with 53 bits */
static double next_unit(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint32_t uniform_range(uint64_t *s, uint32_t lo, uint32_t hi) /* [lo, hi] */
{
    return lo + (uint32_t)(next_u64(s) % ((uint64_t)hi - lo + 1));
}

/* exponential inter-arrival gap of a Poisson process of `rate` per second */
static double gap(uint64_t *s, double rate)
{
    return -log(1.0 - next_unit(s)) / rate;
}

int fkv_load_class_of(uint64_t total)
{
    if (total < 128) return FKV_CLASS_SHORT;
    if (total <= 512) return FKV_CLASS_MEDIUM;
    return FKV_CLASS_LONG;
}

static fkv_status grow(fkv_load_workload *w, size_t *cap)
{
    if (w->n < *cap) return FKV_OK;
    size_t nc = *cap ? *cap * 2 : 256;
    fkv_load_item *p = realloc(w->items, nc * sizeof *p);
    if (!p) return FKV_ENOMEM;
    memset(p + *cap, 0, (nc - *cap) * sizeof *p); /* role 0: a plain client */
    w->items = p;
    *cap = nc;
    return FKV_OK;
}

static void set_lengths(fkv_load_item *it, uint32_t prompt, uint32_t out)
{
    it->prompt_tokens = prompt ? prompt : 1;
    it->max_tokens = out ? out : 1;
    it->cls = fkv_load_class_of((uint64_t)it->prompt_tokens + it->max_tokens);
}

fkv_status fkv_load_workload_seed(uint64_t seed, double rate, double duration, uint32_t clients,
                                  fkv_load_workload *out)
{
    return fkv_load_workload_seed_max(seed, rate, duration, clients, 2048, out);
}

fkv_status fkv_load_workload_seed_max(uint64_t seed, double rate, double duration, uint32_t clients,
                                      uint32_t max_total, fkv_load_workload *out)
{
    memset(out, 0, sizeof *out);
    if (!(rate > 0) || !(duration >= 0) || !clients || max_total < 2) return FKV_EINVAL;
    uint32_t long_hi = max_total < 2048 ? max_total : 2048;
    uint64_t s = seed;
    size_t cap = 0;
    for (double t = gap(&s, rate); t < duration; t += gap(&s, rate)) {
        if (grow(out, &cap) != FKV_OK) {
            fkv_load_workload_free(out);
            return FKV_ENOMEM;
        }
        fkv_load_item *it = &out->items[out->n++];
        double u = next_unit(&s);
        uint32_t total = u < 0.6 ? uniform_range(&s, 16, 127) : u < 0.9 ? uniform_range(&s, 128, 512)
                                                                          : uniform_range(&s, 513, long_hi > 513 ? long_hi : 513);
        if (total > max_total) total = max_total;
        uint32_t prompt = total * 3 / 4;
        set_lengths(it, prompt, total - prompt);
        it->arrival_s = t;
        it->client = (uint32_t)(next_u64(&s) % clients);
    }
    return FKV_OK;
}

/* Reads the two lengths of one trace line; 1 if found. */
static int parse_line(const char *line, int csv, unsigned long *in, unsigned long *outl)
{
    if (!csv) {
        const char *a = strstr(line, "\"input_length\""), *b = strstr(line, "\"output_length\"");
        if (!a || !b) return 0;
        a = strchr(a + 14, ':');
        b = strchr(b + 15, ':');
        if (!a || !b) return 0;
        char *e1, *e2;
        errno = 0;
        *in = strtoul(a + 1, &e1, 10);
        *outl = strtoul(b + 1, &e2, 10);
        return !errno && e1 != a + 1 && e2 != b + 1;
    }
    /* TIMESTAMP,ContextTokens,GeneratedTokens */
    const char *c1 = strchr(line, ',');
    const char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2) return 0;
    char *e1, *e2;
    errno = 0;
    *in = strtoul(c1 + 1, &e1, 10);
    *outl = strtoul(c2 + 1, &e2, 10);
    return !errno && e1 != c1 + 1 && e2 != c2 + 1;
}

/* The hash_ids of a Mooncake line, appended to *ids (n, cap): FKV_OK, or
 * FKV_EPARSE with err saying what, or FKV_ENOMEM. */
static fkv_status parse_hash_ids(const char *line, uint64_t **ids, size_t *n, size_t *cap, uint32_t *count,
                                 const char *path, size_t lineno, char *err, size_t errlen)
{
    cJSON *j = cJSON_Parse(line);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hash_ids");
    fkv_status st = FKV_OK;
    if (!j) {
        snprintf(err, errlen, "%s:%zu: not a JSON object (hash_ids are read with --trace-blocks)", path, lineno);
        st = FKV_EPARSE;
    } else if (!cJSON_IsArray(h) || !cJSON_GetArraySize(h)) {
        snprintf(err, errlen, "%s:%zu: %s (replaying by blocks needs each request's hash_ids)", path, lineno,
                 !h ? "no hash_ids" : !cJSON_IsArray(h) ? "hash_ids is not an array" : "hash_ids is empty");
        st = FKV_EPARSE;
    }
    *count = 0;
    const cJSON *e;
    int k = 0;
    const cJSON *arr = st == FKV_OK ? h : (const cJSON *)0;
    cJSON_ArrayForEach(e, arr)
    {
        /* ids are at most 2^53 (JSON numbers as doubles): exact below that */
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0) || e->valuedouble > 9007199254740992.0 ||
            e->valuedouble != floor(e->valuedouble)) {
            snprintf(err, errlen, "%s:%zu: hash_ids element %d is not a non-negative integer", path, lineno, k);
            st = FKV_EPARSE;
            break;
        }
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            uint64_t *p = realloc(*ids, nc * sizeof *p);
            if (!p) {
                st = FKV_ENOMEM;
                break;
            }
            *ids = p;
            *cap = nc;
        }
        (*ids)[(*n)++] = (uint64_t)e->valuedouble;
        (*count)++;
        k++;
    }
    cJSON_Delete(j);
    return st;
}

/* ceil(x * num / 512), at least 1 */
static uint32_t scale_len(uint32_t x, uint32_t num)
{
    uint64_t v = ((uint64_t)x * num + 511) / 512;
    return v > UINT32_MAX ? UINT32_MAX : v ? (uint32_t)v : 1;
}

fkv_status fkv_load_workload_trace(const char *path, uint64_t seed, double rate, double duration,
                                   uint32_t clients, uint32_t max_prompt, fkv_load_workload *out, char *err,
                                   size_t errlen)
{
    return fkv_load_workload_trace_opts(path, seed, rate, duration, clients, max_prompt, NULL, out, err, errlen);
}

fkv_status fkv_load_workload_trace_opts(const char *path, uint64_t seed, double rate, double duration,
                                        uint32_t clients, uint32_t max_prompt, const fkv_load_trace_opts *o,
                                        fkv_load_workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    fkv_load_trace_opts none = {0, 0, 1};
    if (!o) o = &none;
    uint32_t n_shards = o->n_shards ? o->n_shards : 1;
    if (!(rate > 0) || !(duration >= 0) || !clients) {
        snprintf(err, errlen, "trace workload: rate must be > 0, duration >= 0, clients >= 1");
        return FKV_EINVAL;
    }
    if (o->shard >= n_shards || o->block_tokens > 512) {
        snprintf(err, errlen, "trace workload: shard %u of %u (shards are 0..N-1), block tokens %u (at most 512)",
                 o->shard, n_shards, o->block_tokens);
        return FKV_EINVAL;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return FKV_EIO;
    }
    size_t plen = strlen(path);
    int csv = plen > 4 && !strcmp(path + plen - 4, ".csv");
    if (csv && o->block_tokens) {
        fclose(f);
        snprintf(err, errlen, "%s: an Azure CSV has no hash_ids to build prompts from (--trace-blocks needs a "
                              "Mooncake .jsonl trace)", path);
        return FKV_EINVAL;
    }
    /* lengths of the trace rows: [n_rows][2]; with blocks, each row's ids
     * at ids[id_off[row]], id_n[row] of them */
    uint32_t *rows = NULL, *id_n = NULL;
    size_t *id_off = NULL;
    uint64_t *ids = NULL;
    size_t n_ids = 0, cap_ids = 0;
    size_t n_rows = 0, cap_rows = 0, lineno = 0;
    char line[1 << 16];
    fkv_status st = FKV_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        unsigned long in, o_len;
        int whole = strchr(line, '\n') || feof(f);
        if (!parse_line(line, csv, &in, &o_len)) {
            if (csv && lineno == 1) continue; /* header */
            if (line[0] == '\n' || line[0] == 0) continue;
            /* a JSON line longer than the buffer continues: skip its rest */
            if (!whole) {
                snprintf(err, errlen, "%s:%zu: line longer than %zu bytes before its lengths", path, lineno,
                         sizeof line);
                st = FKV_EPARSE;
                break;
            }
            snprintf(err, errlen, "%s:%zu: no %s on this line", path, lineno,
                     csv ? "ContextTokens,GeneratedTokens" : "input_length / output_length");
            st = FKV_EPARSE;
            break;
        }
        if (o->block_tokens && !whole) {
            snprintf(err, errlen, "%s:%zu: line longer than %zu bytes (its hash_ids cannot be read)", path, lineno,
                     sizeof line);
            st = FKV_EPARSE;
            break;
        }
        while (!strchr(line, '\n') && fgets(line, sizeof line, f)) {
        }
        if (n_rows == cap_rows) {
            size_t nc = cap_rows ? cap_rows * 2 : 1024;
            uint32_t *p = realloc(rows, nc * 2 * sizeof *p);
            if (p) rows = p;
            if (p && o->block_tokens) {
                uint32_t *pn = realloc(id_n, nc * sizeof *pn);
                if (pn) id_n = pn;
                size_t *po = pn ? realloc(id_off, nc * sizeof *po) : NULL;
                if (po) id_off = po;
                if (!po) p = NULL;
            }
            if (!p) {
                st = FKV_ENOMEM;
                break;
            }
            cap_rows = nc;
        }
        if (o->block_tokens) {
            id_off[n_rows] = n_ids;
            st = parse_hash_ids(line, &ids, &n_ids, &cap_ids, &id_n[n_rows], path, lineno, err, errlen);
            if (st != FKV_OK) break;
        }
        rows[2 * n_rows] = in > UINT32_MAX ? UINT32_MAX : (uint32_t)in;
        rows[2 * n_rows + 1] = o_len > UINT32_MAX ? UINT32_MAX : (uint32_t)o_len;
        n_rows++;
    }
    fclose(f);
    if (st == FKV_OK && !n_rows) {
        snprintf(err, errlen, "%s: no requests in the trace", path);
        st = FKV_EPARSE;
    }
    uint64_t s = seed;
    size_t cap = 0;
    for (double t = gap(&s, rate); st == FKV_OK && t < duration; t += gap(&s, rate)) {
        if ((st = grow(out, &cap)) != FKV_OK) break;
        fkv_load_item *it = &out->items[out->n];
        size_t row = (o->shard + (size_t)n_shards * out->n) % n_rows;
        const uint32_t *r = &rows[2 * row];
        uint32_t in = r[0], o_len = r[1];
        if (o->block_tokens) {
            in = scale_len(in, o->block_tokens);
            o_len = scale_len(o_len, o->block_tokens);
        }
        uint32_t prompt = max_prompt && in > max_prompt ? max_prompt : in;
        set_lengths(it, prompt, o_len);
        it->arrival_s = t;
        it->client = (uint32_t)(next_u64(&s) % clients);
        if (o->block_tokens) {
            uint32_t nb = (it->prompt_tokens + o->block_tokens - 1) / o->block_tokens;
            it->n_blocks = id_n[row] < nb ? id_n[row] : nb;
            it->block_tokens = o->block_tokens;
            it->client = (uint32_t)(fkv_mix64(ids[id_off[row]]) % clients);
        }
        out->n++;
    }
    if (st == FKV_OK && o->block_tokens) {
        out->block_store = ids;
        /* pointers only now: the ids did not move since */
        for (size_t i = 0; i < out->n; i++)
            out->items[i].blocks = ids + id_off[(o->shard + (size_t)n_shards * i) % n_rows];
    }
    free(rows);
    free(id_n);
    free(id_off);
    if (st != FKV_OK) {
        free(ids);
        fkv_load_workload_free(out);
    }
    return st;
}

fkv_status fkv_load_workload_plain(const char *path, uint32_t clients, fkv_load_workload *out, char *err,
                                   size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return FKV_EIO;
    }
    char line[512];
    size_t cap = 0, lineno = 0;
    fkv_status st = FKV_OK;
    while (st == FKV_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n' || (lineno == 1 && !strncmp(line, "arrival_ms", 10))) continue;
        double ms;
        unsigned long in, o, c = 0;
        int n = sscanf(line, "%lf,%lu,%lu,%lu", &ms, &in, &o, &c);
        if (n < 3 || !(ms >= 0) || in > UINT32_MAX || o > UINT32_MAX) {
            snprintf(err, errlen, "%s:%zu: expected arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]]",
                     path, lineno);
            st = FKV_EPARSE;
            break;
        }
        if ((st = grow(out, &cap)) != FKV_OK) break;
        fkv_load_item *it = &out->items[out->n++];
        set_lengths(it, (uint32_t)in, (uint32_t)o);
        it->arrival_s = ms / 1e3;
        it->client = (uint32_t)(c % (clients ? clients : 1));
        if (out->n > 1 && it->arrival_s < out->items[out->n - 2].arrival_s) {
            snprintf(err, errlen, "%s:%zu: arrival_ms goes back in time", path, lineno);
            st = FKV_EPARSE;
        }
    }
    fclose(f);
    if (st == FKV_OK && !out->n) {
        snprintf(err, errlen, "%s: no requests", path);
        st = FKV_EPARSE;
    }
    if (st != FKV_OK) fkv_load_workload_free(out);
    return st;
}

fkv_status fkv_load_workload_write_plain(const fkv_load_workload *w, const char *path, char *err, size_t errlen)
{
    if (w->n_closed) {
        snprintf(err, errlen, "%s: the plain CSV holds arrival times only; back-to-back users have none", path);
        return FKV_EINVAL;
    }
    for (size_t i = 0; i < w->n; i++)
        if (w->items[i].blocks) {
            snprintf(err, errlen, "%s: the plain CSV cannot hold the trace's blocks that request %zu's prompt is "
                                  "built from (write it without --trace-blocks)", path, i);
            return FKV_EINVAL;
        }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return FKV_EIO;
    }
    fprintf(f, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens\n");
    for (size_t i = 0; i < w->n; i++)
        fprintf(f, "%.3f,%u,%u,%u,%u\n", w->items[i].arrival_s * 1e3, w->items[i].prompt_tokens,
                w->items[i].max_tokens, w->items[i].client, fkv_load_shared_tokens(w->items[i].prompt_tokens));
    if (fclose(f)) {
        snprintf(err, errlen, "%s: write failed", path);
        return FKV_EIO;
    }
    return FKV_OK;
}

void fkv_load_tenants_default(fkv_load_tenants *t)
{
    *t = (fkv_load_tenants){.heavy = 2,
                            .light = 4,
                            .heavy_prompt = 2000,
                            .heavy_out = 32,
                            .light_prompt = 40,
                            .light_out = 16,
                            .light_rate = 0.5,
                            .duration = 60,
                            .only = FKV_LOAD_ONLY_ALL};
}

fkv_status fkv_load_workload_tenants(uint64_t seed, const fkv_load_tenants *t, fkv_load_workload *out)
{
    memset(out, 0, sizeof *out);
    if (!t || !t->heavy_prompt || !t->heavy_out || !t->light_prompt || !t->light_out || !(t->duration >= 0) ||
        (t->light && !(t->light_rate > 0)) || t->heavy > 4096 || t->light > 4096 || t->only > FKV_LOAD_ONLY_HEAVY)
        return FKV_EINVAL;
    if (t->only != FKV_LOAD_ONLY_HEAVY && t->light) {
        /* one stream at the light users' total rate, each arrival given to a
         * user uniformly: the same as a Poisson process per user */
        uint64_t s = seed;
        size_t cap = 0;
        double rate = t->light_rate * t->light;
        for (double at = gap(&s, rate); at < t->duration; at += gap(&s, rate)) {
            if (grow(out, &cap) != FKV_OK) {
                fkv_load_workload_free(out);
                return FKV_ENOMEM;
            }
            fkv_load_item *it = &out->items[out->n++];
            set_lengths(it, t->light_prompt, t->light_out);
            it->arrival_s = at;
            it->client = t->heavy + (uint32_t)(next_u64(&s) % t->light);
            it->role = FKV_LOAD_LIGHT;
        }
    }
    if (t->only != FKV_LOAD_ONLY_LIGHT && t->heavy) {
        out->closed = calloc(t->heavy, sizeof *out->closed);
        if (!out->closed) {
            fkv_load_workload_free(out);
            return FKV_ENOMEM;
        }
        for (uint32_t k = 0; k < t->heavy; k++) {
            set_lengths(&out->closed[k], t->heavy_prompt, t->heavy_out);
            out->closed[k].client = k;
            out->closed[k].role = FKV_LOAD_HEAVY;
        }
        out->n_closed = t->heavy;
        out->closed_until_s = t->duration;
    }
    return FKV_OK;
}

void fkv_load_user_name(const fkv_load_item *it, char *buf, size_t len)
{
    const char *kind = it->role == FKV_LOAD_LIGHT ? "light" : it->role == FKV_LOAD_HEAVY ? "heavy" : "client";
    snprintf(buf, len, "%s-%u", kind, it->client);
}

void fkv_load_workload_free(fkv_load_workload *w)
{
    free(w->items);
    free(w->closed);
    free(w->block_store);
    memset(w, 0, sizeof *w);
}

uint32_t fkv_load_shared_tokens(uint32_t prompt_tokens)
{
    return prompt_tokens / 2 < 32 ? prompt_tokens / 2 : 32;
}

void fkv_load_prompt(const fkv_load_item *it, size_t i, uint64_t seed, uint32_t vocab, int32_t *out)
{
    if (it->blocks && it->block_tokens) {
        uint32_t k = 0;
        for (; k < it->prompt_tokens && k / it->block_tokens < it->n_blocks; k++)
            out[k] = (int32_t)(fkv_mix64(fkv_mix64(it->blocks[k / it->block_tokens] ^ 0x5bd1e995ULL) +
                                         k % it->block_tokens) % vocab);
        uint64_t rs = seed ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
        for (; k < it->prompt_tokens; k++) out[k] = (int32_t)(next_u64(&rs) % vocab);
        return;
    }
    uint32_t shared = fkv_load_shared_tokens(it->prompt_tokens);
    uint64_t cs = seed ^ (0xC0FFEEull + it->client * 0x9E3779B97F4A7C15ull);
    for (uint32_t k = 0; k < shared; k++) out[k] = (int32_t)(next_u64(&cs) % vocab);
    uint64_t rs = seed ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
    for (uint32_t k = shared; k < it->prompt_tokens; k++) out[k] = (int32_t)(next_u64(&rs) % vocab);
}
