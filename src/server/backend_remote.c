/* The engine backend's remote tier (see backend_remote.h; the rules are in
 * docs/ARCHITECTURE.md, "The engine backend's remote tier"). */
#include "server/backend_remote.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admit.h"
#include "metrics/remote_metrics.h"
#include "server/client_names.h"
#include "server/metrics_http.h"
#include "util/rng.h"

struct fkv_eng_remote {
    fkv_remote *remote;
    char model[FKV_REMOTE_NAME_MAX + 1]; /* the chunks' model name */
    fkv_remote_geom geom;
    fkv_remote_dtype dtype;
    uint32_t page_tokens;
    size_t page_bytes;
    /* the write-back's admission filter (NULL: off); under admit_mu, as
     * connection threads record and the step thread tests */
    fkv__admit *admit;
    uint32_t admit_threshold;
    pthread_mutex_t admit_mu;
    uint64_t refused; /* pages the filter kept from Redis (under admit_mu) */
    /* The keys this instance wrote, as a Bloom filter (OWN_BITS bits, OWN_K
     * probes), so a hit on a key it did not write counts as another
     * instance's: a false positive can only undercount those.  Under
     * own_mu (the step thread writes, connection threads look up). */
    uint64_t *own;
    uint64_t foreign_hits;
    pthread_mutex_t own_mu;
};

#define OWN_BITS (1u << 23) /* 1 MiB: about 1% false positives at a million keys written */
#define OWN_K 4

typedef struct eprefetch {
    uint32_t tokens; /* prompt tokens found: whole pages from position 0 */
    uint8_t *kv;     /* [tokens / page_tokens][page_bytes] */
} eprefetch;

/* "t<tenant>-s<salt>": the ids of the cache's own namespaces, so the
 * remote tier isolates exactly what the prefix cache does */
static void remote_ns(const fkv_gen_request *req, char *out, size_t cap)
{
    snprintf(out, cap, "t%016llx-s%016llx", (unsigned long long)fkv_name_id("fairkv tenant", req->client),
             (unsigned long long)fkv_name_id("fairkv cache_salt", req->cache_salt));
}

/* The chained keys of the first n_pages pages of tokens; the count made
 * (fewer only if a name were refused, which the checks at open rule out). */
static uint32_t remote_keys(const fkv_eng_remote *r, const char *ns, const int32_t *tokens, uint32_t n_pages,
                            fkv_remote_key *keys)
{
    uint32_t pt = r->page_tokens;
    for (uint32_t p = 0; p < n_pages; p++)
        if (fkv_remote_key_make(&keys[p], r->model, r->geom, r->dtype, ns, p ? &keys[p - 1] : NULL,
                                tokens + (size_t)p * pt, pt) != FKV_OK)
            return p;
    return n_pages;
}

/* A chunk's admission key: its chained hash's first 8 bytes. */
static uint64_t key64(const fkv_remote_key *k)
{
    uint64_t v;
    memcpy(&v, k->hash, sizeof v);
    return v;
}

/* probe i of key k in the own-keys filter */
static uint32_t own_bit(uint64_t k, int i) { return (uint32_t)(fkv_mix64(k + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) % OWN_BITS); }

static int own_has(const fkv_eng_remote *r, uint64_t k)
{
    for (int i = 0; i < OWN_K; i++) {
        uint32_t b = own_bit(k, i);
        if (!((r->own[b / 64] >> (b % 64)) & 1)) return 0;
    }
    return 1;
}

static void own_add(fkv_eng_remote *r, uint64_t k)
{
    for (int i = 0; i < OWN_K; i++) {
        uint32_t b = own_bit(k, i);
        r->own[b / 64] |= 1ull << (b % 64);
    }
}

void *fkv_eng_remote_prefetch(fkv_eng_remote *r, const fkv_gen_request *req)
{
    if (!r || req->n_prompt < 2) return NULL;
    uint32_t n_pages = (req->n_prompt - 1) / r->page_tokens;
    if (!n_pages) return NULL;
    fkv_remote_key *keys = malloc((size_t)n_pages * sizeof *keys);
    fkv_remote_value *vals = calloc(n_pages, sizeof *vals);
    eprefetch *pf = NULL;
    if (keys && vals) {
        char ns[FKV_REMOTE_NAME_MAX + 1];
        remote_ns(req, ns, sizeof ns);
        n_pages = remote_keys(r, ns, req->prompt, n_pages, keys);
        if (r->admit) {
            pthread_mutex_lock(&r->admit_mu);
            for (uint32_t p = 0; p < n_pages; p++) fkv__admit_record(r->admit, key64(&keys[p]));
            pthread_mutex_unlock(&r->admit_mu);
        }
        fkv_remote_get(r->remote, keys, n_pages, vals);
        uint32_t h = 0;
        while (h < n_pages && vals[h].data && vals[h].len == r->page_bytes) h++;
        pthread_mutex_lock(&r->own_mu);
        for (uint32_t p = 0; p < h; p++) r->foreign_hits += !own_has(r, key64(&keys[p]));
        pthread_mutex_unlock(&r->own_mu);
        if (h && (pf = calloc(1, sizeof *pf)) && (pf->kv = malloc((size_t)h * r->page_bytes))) {
            for (uint32_t p = 0; p < h; p++) memcpy(pf->kv + (size_t)p * r->page_bytes, vals[p].data, r->page_bytes);
            pf->tokens = h * r->page_tokens;
        } else if (pf) {
            free(pf);
            pf = NULL;
        }
        fkv_remote_values_free(vals, n_pages);
    }
    free(keys);
    free(vals);
    return pf;
}

void fkv_eng_remote_release(void *prefetched)
{
    eprefetch *pf = prefetched;
    if (pf) free(pf->kv);
    free(pf);
}

const uint8_t *fkv_eng_remote_begin(fkv_eng_remote *r, const fkv_gen_request *req, fkv_eng_remote_req *rr)
{
    remote_ns(req, rr->ns, sizeof rr->ns);
    rr->looked_up = req->n_prompt >= 2 ? (req->n_prompt - 1) / r->page_tokens : 0; /* the prefetch's pages */
    rr->hit = 0;
    const eprefetch *pf = req->prefetched;
    if (!pf || pf->tokens > req->n_prompt) return NULL;
    rr->hit = pf->tokens;
    return pf->kv;
}

void fkv_eng_remote_export(fkv_eng_remote *r, const fkv_eng_remote_req *rr, const fkv_engine_export *x)
{
    if (!r || x->page_tokens != r->page_tokens || x->page_bytes != r->page_bytes || !x->n_pages) return;
    fkv_remote_key *keys = malloc((size_t)x->n_pages * sizeof *keys);
    if (!keys) return;
    uint32_t n = remote_keys(r, rr->ns, x->tokens, x->n_pages, keys);
    if (r->admit) { /* the pages the lookup did not count are seen now; the first refused one ends the write */
        pthread_mutex_lock(&r->admit_mu);
        uint32_t keep = n;
        for (uint32_t p = 0; p < n; p++) {
            if (p >= rr->looked_up) fkv__admit_record(r->admit, key64(&keys[p]));
            if (keep == n && p * r->page_tokens >= rr->hit && x->ok[p] &&
                fkv__admit_estimate(r->admit, key64(&keys[p])) < r->admit_threshold)
                keep = p;
        }
        for (uint32_t p = keep; p < n; p++) r->refused += x->ok[p] && p * r->page_tokens >= rr->hit;
        pthread_mutex_unlock(&r->admit_mu);
        n = keep;
    }
    pthread_mutex_lock(&r->own_mu);
    for (uint32_t p = 0; p < n; p++)
        if (x->ok[p] && p * r->page_tokens >= rr->hit) own_add(r, key64(&keys[p]));
    pthread_mutex_unlock(&r->own_mu);
    for (uint32_t p = 0; p < n; p++)
        if (x->ok[p] && p * r->page_tokens >= rr->hit)
            fkv_remote_put(r->remote, &keys[p], x->kv + (size_t)p * r->page_bytes, r->page_bytes);
    free(keys);
}

int fkv_eng_remote_nodes(const char *spec, char *out, size_t cap)
{
    size_t o = 0;
    if (!cap) return -1;
    for (const char *p = spec; *p;) {
        if (!strncmp(p, "redis://", 8)) p += 8;
        while (*p && *p != ',') {
            if (o + 1 >= cap) return -1;
            out[o++] = *p++;
        }
        if (*p == ',') {
            if (o + 1 >= cap) return -1;
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    return o ? 0 : -1;
}

/* The chunks' model name: the served name with characters outside the key
 * alphabet as '_', at most 40 of them, then "-" and 16 hex digits of
 * SHA-256 of the whole file: two files with one name (a fine-tune, a
 * requantization) never share chunks.  Read once at startup. */
static int remote_model_name(const char *path, const char *served, char *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(md, buf, n) == 1;
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(md, dg, &dl) == 1 && dl >= 8;
    EVP_MD_CTX_free(md);
    fclose(f);
    if (!ok) return -1;
    char name[41];
    size_t k = 0;
    for (; served[k] && k < 40; k++) {
        char c = served[k];
        int good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:/-", c);
        name[k] = good ? c : '_';
    }
    name[k] = 0;
    snprintf(out, cap, "%s-%02x%02x%02x%02x%02x%02x%02x%02x", k ? name : "model", dg[0], dg[1], dg[2], dg[3], dg[4],
             dg[5], dg[6], dg[7]);
    return 0;
}

fkv_status fkv_eng_remote_open(const fkv_engine_backend_opts *bo, const fkv_engine_config *cfg, fkv_engine *e,
                               const fkv_llama *m, const char *model_path, const char *served, fkv_eng_remote **out,
                               char *err, size_t errlen)
{
    *out = NULL;
    fkv_eng_remote *r = calloc(1, sizeof *r);
    uint64_t *own = calloc(OWN_BITS / 64, sizeof *own);
    if (!r || !own) {
        free(r);
        free(own);
        snprintf(err, errlen, "engine backend: out of memory");
        return FKV_ENOMEM;
    }
    r->own = own;
    pthread_mutex_init(&r->own_mu, NULL);
    char nodes[1100], e2[400] = "";
    fkv_remote_config rc;
    fkv_remote_config_default(&rc);
    rc.nodes = nodes;
    rc.cluster = bo->remote_cluster != 0;
    if (bo->remote_timeout_ms) rc.timeout_ms = bo->remote_timeout_ms;
    if (bo->remote_ttl_s) rc.ttl_s = bo->remote_ttl_s;
    rc.default_quota = bo->remote_quota;
    r->geom = (fkv_remote_geom){m->hp.n_layers, m->hp.n_kv_heads, m->hp.head_dim};
    r->dtype = cfg->kv_dtype == FKV_F16 ? FKV_REMOTE_F16 : FKV_REMOTE_F32;
    r->page_tokens = fkv_engine_page_tokens(e);
    r->page_bytes = fkv_engine_page_bytes(e);
    fkv_status st = FKV_OK;
    if (fkv_eng_remote_nodes(bo->remote, nodes, sizeof nodes)) {
        snprintf(err, errlen, "engine backend: remote: bad node list '%s' (redis://HOST:PORT[,HOST:PORT...])",
                 bo->remote);
        st = FKV_EINVAL;
    } else if (remote_model_name(model_path, served, r->model, sizeof r->model)) {
        snprintf(err, errlen, "engine backend: remote: cannot read %s to name its chunks", model_path);
        st = FKV_EIO;
    } else if (!(r->remote = fkv_remote_open(&rc, e2, sizeof e2))) {
        snprintf(err, errlen, "engine backend: %s", e2);
        st = FKV_EINVAL;
    } else if (cfg->tier_admission != FKV_TIER_ADMIT_OFF) {
        /* window: ten sightings per page the local tiers hold, as the cache's own */
        fkv_cache_info ci;
        fkv_config dc;
        fkv_config_default(&dc);
        r->admit_threshold = dc.tier_admission_threshold;
        uint64_t pages = cfg->kv_budget_bytes / r->page_bytes + cfg->host_bytes / r->page_bytes;
        if (fkv_cache_get_info(fkv_engine_cache(e), &ci) == FKV_OK) pages = ci.n_pages + cfg->host_bytes / r->page_bytes;
        if (!(r->admit = fkv__admit_new(10 * (pages ? pages : 1), r->admit_threshold))) {
            snprintf(err, errlen, "engine backend: out of memory for the admission filter");
            st = FKV_ENOMEM;
        } else {
            pthread_mutex_init(&r->admit_mu, NULL);
        }
    }
    if (st != FKV_OK) {
        fkv_eng_remote_close(r);
        return st;
    }
    *out = r;
    return FKV_OK;
}

void fkv_eng_remote_close(fkv_eng_remote *r)
{
    if (!r) return;
    fkv_remote_close(r->remote);
    if (r->admit) pthread_mutex_destroy(&r->admit_mu);
    fkv__admit_free(r->admit);
    pthread_mutex_destroy(&r->own_mu);
    free(r->own);
    free(r);
}

void fkv_eng_remote_metrics(fkv_eng_remote *r, uint64_t hit_tokens, fkv_textbuf *out)
{
    fkv_remote_counters c;
    fkv_remote_get_counters(r->remote, &c);
    fkv_remote_stats s;
    memset(&s, 0, sizeof s);
    s.fairkv_remote_gets_total[0] = c.gets;
    s.fairkv_remote_hits_total[0] = c.hits;
    s.fairkv_remote_misses_total[0] = c.misses;
    s.fairkv_remote_corrupt_total[0] = c.corrupt;
    s.fairkv_remote_puts_total[0] = c.puts;
    s.fairkv_remote_put_drops_total[0] = c.put_drops;
    uint64_t errors[FKV__RL_RERR] = {c.err_connect, c.err_timeout, c.err_oom, c.err_other};
    memcpy(s.fairkv_remote_errors_total, errors, sizeof errors);
    s.fairkv_remote_bytes_total[0] = c.bytes_read;
    s.fairkv_remote_bytes_total[1] = c.bytes_written;
    if (r->admit) {
        pthread_mutex_lock(&r->admit_mu);
        s.fairkv_remote_refused_total[0] = r->refused;
        pthread_mutex_unlock(&r->admit_mu);
    } else {
        s.absent |= 1ull << FKV__RM_fairkv_remote_refused_total;
    }
    pthread_mutex_lock(&r->own_mu);
    s.fairkv_remote_foreign_hits_total[0] = r->foreign_hits;
    pthread_mutex_unlock(&r->own_mu);
    s.fairkv_remote_hit_tokens_total[0] = hit_tokens;
    fkv_prom_remote(out, &s);
}
