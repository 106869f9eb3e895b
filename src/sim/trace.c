/* Trace readers: Azure LLM CSV, Mooncake JSONL, and our plain CSV.
 * Every parser reads from a memory buffer (the fuzz target calls
 * fkv_trace_parse directly) and reports the first malformed line as
 * "file:line: what".
 *
 * Sessions (what `--tenant-assign session` hashes to tenants): none of the
 * traces names a user, so a session is recovered from what each format
 * does carry, and only where that signal exists:
 *   mooncake  the request's first hash_id that is not shared by most
 *             requests, i.e. its first 512-token prompt block past a
 *             common system prompt.  Requests that share it share the head
 *             of their prompt (a conversation's earlier turns or a common
 *             document), which is what a session or a user looks like to a
 *             KV cache.  The rule (mooncake_session_keys): position d is
 *             common when one id holds it in more than half of all the
 *             trace's requests; positions 0, 1, ... are common while they
 *             are, up to the first that is not, D.  A request's key is its
 *             first id at a position below D that differs from the common
 *             one, else its id at D, else (a prompt no longer than the
 *             common head) its last id.  With no common block (D = 0) this
 *             is the first id.  In the published synthetic trace no first
 *             id dominates (no global system prompt): 3,993 requests have
 *             2,211 distinct first ids, the largest covering 24 requests
 *             (0.6%); keying on the first two or three ids splits only 13
 *             or 15 more, so D = 0 there.
 *   plain     the client column as written (before the modulo that maps it
 *             to VTC's clients).
 *   azure     no session: the trace has timestamps and sizes only.
 * A trace gets sessions only when every request has its key (a Mooncake
 * request without hash_ids, or a plain trace without a client column,
 * leaves w->session NULL).  Sessions are numbered densely in the order they
 * first arrive; w->session_key keeps each one's key so a session's tenant
 * can be derived from the key alone, whatever the order. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "sim/workload.h"
#include "util/err.h"

typedef struct parser {
    const char *fname;
    size_t line;
    char *err;
    size_t errlen;
    fkv_workload *w;
    size_t cap;
    size_t *boff; /* [cap] offset of each request's block ids in w->blocks */
    uint64_t *skey; /* [cap] each request's session key, NO_KEY if it has none */
    uint32_t n_clients;
} parser;

/* Mooncake ids are at most 2^53 and plain clients 32-bit, so no key is this. */
#define NO_KEY UINT64_MAX

static fkv_status perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static fkv_status perr(parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fkv_status st = fkv_verr_at(p->err, p->errlen, p->fname, p->line, fmt, ap);
    va_end(ap);
    return st;
}

int fkv_trace_format_parse(const char *s)
{
    if (!strcmp(s, "auto")) return FKV_TRACE_AUTO;
    if (!strcmp(s, "azure")) return FKV_TRACE_AZURE;
    if (!strcmp(s, "mooncake")) return FKV_TRACE_MOONCAKE;
    if (!strcmp(s, "plain")) return FKV_TRACE_PLAIN;
    return -1;
}

const char *fkv_trace_format_name(fkv_trace_format f)
{
    switch (f) {
    case FKV_TRACE_AZURE: return "azure";
    case FKV_TRACE_MOONCAKE: return "mooncake";
    case FKV_TRACE_PLAIN: return "plain";
    default: return "auto";
    }
}

/* Strict unsigned integer that fits 32 bits; the whole token must be digits. */
static int parse_u32(const char *s, uint32_t *out)
{
    while (*s == ' ') s++;
    if (!isdigit((unsigned char)*s)) return -1;
    uint64_t v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > UINT32_MAX) return -1;
        s++;
    }
    while (*s == ' ' || *s == '\r') s++;
    if (*s) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Non-negative decimal number (ms). */
static int parse_ms(const char *s, double *out)
{
    while (*s == ' ') s++;
    if (!isdigit((unsigned char)*s) && *s != '.') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s) return -1;
    while (*end == ' ' || *end == '\r') end++;
    if (*end || !(v >= 0) || v > 1e12) return -1; /* ms; 1e12 ms = 31 years keeps ns in int64 */
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* "YYYY-MM-DD hh:mm:ss[.fraction]" -> ns since 1970 (zone ignored: only
 * differences matter). */
/* Years 1970-2200 keep nanoseconds within int64. */
static int parse_timestamp(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n < 19) return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970 || y > 2200 || h < 0 || mi < 0 || se < 0)
        return -1;
    s += n;
    int64_t frac = 0, scale = 1000000000;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s)) return -1;
        while (isdigit((unsigned char)*s)) {
            if (scale > 1) {
                scale /= 10;
                frac += (*s - '0') * scale;
            }
            s++;
        }
    }
    while (*s == ' ' || *s == '\r') s++;
    if (*s) return -1;
    int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
    *out = ((days * 24 + h) * 60 + mi) * 60 * 1000000000LL + (int64_t)se * 1000000000LL + frac;
    return 0;
}

static fkv_req *new_req(parser *p)
{
    fkv_workload *w = p->w;
    if (w->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 1024;
        fkv_req *r = realloc(w->reqs, nc * sizeof *r);
        if (!r) return NULL;
        w->reqs = r;
        fkv_req_src *src = realloc(w->src, nc * sizeof *src);
        if (!src) return NULL;
        w->src = src;
        size_t *o = realloc(p->boff, nc * sizeof *o);
        if (!o) return NULL;
        p->boff = o;
        uint64_t *k = realloc(p->skey, nc * sizeof *k);
        if (!k) return NULL;
        p->skey = k;
        p->cap = nc;
    }
    fkv_req *r = &w->reqs[w->n];
    memset(r, 0, sizeof *r);
    memset(&w->src[w->n], 0, sizeof w->src[w->n]);
    r->tag = w->n; /* its source, wherever the sort moves it */
    w->n_src = w->n + 1;
    p->boff[w->n] = SIZE_MAX;
    p->skey[w->n] = NO_KEY;
    w->n++;
    return r;
}

/* Splits a CSV line in place into at most max fields; returns the count. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    f[n++] = line;
    for (char *c = line; *c; c++)
        if (*c == ',') {
            *c = 0;
            if (n == max) return max + 1;
            f[n++] = c + 1;
        }
    return n;
}

static fkv_status set_sizes(parser *p, fkv_req *r, uint32_t in, uint32_t out)
{
    if (in == 0) return perr(p, "prompt length 0 (a request needs at least one prompt token)");
    if ((uint64_t)in + out > 0x7fffffffULL) return perr(p, "request of %u + %u tokens is too long", in, out);
    r->prompt = in;
    r->output = out ? out : 1;
    return FKV_OK;
}

static fkv_status parse_azure_line(parser *p, char *line, int64_t *t0)
{
    char *f[4];
    int n = split_csv(line, f, 3);
    if (n != 3) return perr(p, "expected 3 fields TIMESTAMP,ContextTokens,GeneratedTokens, got %d", n);
    int64_t t;
    if (parse_timestamp(f[0], &t)) return perr(p, "field TIMESTAMP: '%.40s' is not 'YYYY-MM-DD hh:mm:ss[.frac]'", f[0]);
    uint32_t in, out;
    if (parse_u32(f[1], &in)) return perr(p, "field ContextTokens: '%.40s' is not a token count", f[1]);
    if (parse_u32(f[2], &out)) return perr(p, "field GeneratedTokens: '%.40s' is not a token count", f[2]);
    fkv_req *r = new_req(p);
    if (!r) return FKV_ENOMEM;
    if (p->w->n == 1) *t0 = t;
    r->arrival_ns = t - *t0; /* may be negative if unsorted; sorted below */
    r->client = UINT64_MAX;
    return set_sizes(p, r, in, out);
}

/* The token ids of a client's shared prefix: one stream per client (after
 * the modulo, as the load generator maps trace clients), distinct from
 * every request's token_seed stream by construction of fkv_req_token. */
static uint64_t client_prefix_seed(uint64_t client)
{
    return 0x9e3779b97f4a7c15ULL * (client + 1) ^ 0xc1e7c0de5eedULL;
}

static fkv_status parse_plain_line(parser *p, char *line)
{
    char *f[6];
    int n = split_csv(line, f, 5);
    if (n < 3 || n > 5)
        return perr(p, "expected arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]], got %d fields", n);
    double ms;
    uint32_t in, out, client = 0, shared = 0;
    if (parse_ms(f[0], &ms)) return perr(p, "field arrival_ms: '%.40s' is not a non-negative number", f[0]);
    if (parse_u32(f[1], &in)) return perr(p, "field prompt_tokens: '%.40s' is not a token count", f[1]);
    if (parse_u32(f[2], &out)) return perr(p, "field output_tokens: '%.40s' is not a token count", f[2]);
    if (n >= 4 && parse_u32(f[3], &client)) return perr(p, "field client: '%.40s' is not a client number", f[3]);
    if (n == 5) {
        if (parse_u32(f[4], &shared)) return perr(p, "field shared_tokens: '%.40s' is not a token count", f[4]);
        if (shared > in)
            return perr(p, "field shared_tokens: %u is more than the %u prompt tokens", shared, in);
    }
    fkv_req *r = new_req(p);
    if (!r) return FKV_ENOMEM;
    r->arrival_ns = (int64_t)(ms * 1e6 + 0.5);
    r->client = n >= 4 ? client % p->n_clients : UINT64_MAX;
    if (n >= 4) p->skey[p->w->n - 1] = client;
    if (shared) {
        r->shared_tokens = shared;
        p->w->src[r->tag].shared_seed = client_prefix_seed(r->client);
    }
    return set_sizes(p, r, in, out);
}

static fkv_status parse_mooncake_line(parser *p, const char *line, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return perr(p, "not a JSON object");
    }
    fkv_status st = FKV_OK;
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input_length");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "output_length");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hash_ids");
    double v;
    if (!cJSON_IsNumber(ts) || !((v = ts->valuedouble) >= 0) || v > 1e12) {
        st = perr(p, "field timestamp: missing or not a non-negative number (ms)");
        goto out;
    }
    const cJSON *sz[2] = {in, out};
    const char *nm[2] = {"input_length", "output_length"};
    for (int k = 0; k < 2; k++)
        if (!cJSON_IsNumber(sz[k]) || sz[k]->valuedouble < 0 || sz[k]->valuedouble > 2147483647.0 ||
            sz[k]->valuedouble != (double)(int64_t)sz[k]->valuedouble) {
            st = perr(p, "field %s: missing or not a token count", nm[k]);
            goto out;
        }
    if (h && !cJSON_IsArray(h)) {
        st = perr(p, "field hash_ids: not an array");
        goto out;
    }
    fkv_req *r = new_req(p);
    if (!r) {
        st = FKV_ENOMEM;
        goto out;
    }
    r->arrival_ns = (int64_t)(v * 1e6 + 0.5);
    r->client = UINT64_MAX;
    if ((st = set_sizes(p, r, (uint32_t)in->valuedouble, (uint32_t)out->valuedouble)) != FKV_OK) goto out;
    if (h) {
        int nh = cJSON_GetArraySize(h);
        fkv_workload *w = p->w;
        if (w->n_blocks + (size_t)nh > w->cap_blocks) {
            size_t nc = w->cap_blocks ? w->cap_blocks * 2 : 4096;
            while (nc < w->n_blocks + (size_t)nh) nc *= 2;
            uint64_t *b = realloc(w->blocks, nc * sizeof *b);
            if (!b) {
                st = FKV_ENOMEM;
                goto out;
            }
            w->blocks = b;
            w->cap_blocks = nc;
        }
        p->boff[w->n - 1] = w->n_blocks;
        int i = 0;
        for (const cJSON *e = h->child; e; e = e->next, i++) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 9007199254740992.0 ||
                e->valuedouble != (double)(int64_t)e->valuedouble) {
                st = perr(p, "field hash_ids: element %d is not a non-negative integer", i);
                goto out;
            }
            w->blocks[w->n_blocks++] = (uint64_t)e->valuedouble;
        }
        w->src[r->tag].n_block_ids = (uint32_t)nh;
        if (nh) p->skey[w->n - 1] = w->blocks[p->boff[w->n - 1]];
    }
out:
    cJSON_Delete(j);
    return st;
}

static int cmp_req(const void *a, const void *b)
{
    const fkv_req *x = a, *y = b;
    if (x->arrival_ns != y->arrival_ns) return x->arrival_ns < y->arrival_ns ? -1 : 1;
    /* stable: the original order rides in id until ids are assigned */
    return x->id < y->id ? -1 : x->id > y->id;
}

static fkv_trace_format detect(const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
    if (i < len && buf[i] == '{') return FKV_TRACE_MOONCAKE;
    if (len - i >= 9 && !memcmp(buf + i, "TIMESTAMP", 9)) return FKV_TRACE_AZURE;
    if (len - i >= 10 && !memcmp(buf + i, "arrival_ms", 10)) return FKV_TRACE_PLAIN;
    if (i < len && buf[i] == '#') return FKV_TRACE_PLAIN;
    return FKV_TRACE_AUTO;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#define COMMON_MAX 64 /* common leading blocks looked for at most */

/* The Mooncake session rule of the top of this file: skey[orig[i]] of
 * every request with block ids, past the leading blocks most requests
 * share. */
static fkv_status mooncake_session_keys(const fkv_workload *w, uint64_t *skey, const size_t *orig)
{
    uint64_t common[COMMON_MAX];
    uint32_t d = 0;
    uint64_t *v = malloc(w->n * sizeof *v);
    if (!v) return FKV_ENOMEM;
    for (; d < COMMON_MAX; d++) {
        size_t m = 0;
        for (size_t i = 0; i < w->n; i++) {
            const fkv_req_src *b = &w->src[w->reqs[i].tag];
            if (b->n_block_ids > d) v[m++] = b->block_ids[d];
        }
        qsort(v, m, sizeof *v, cmp_u64);
        size_t best = 0, run = 0;
        uint64_t top = 0;
        for (size_t i = 0; i < m; i++) {
            run = i && v[i] == v[i - 1] ? run + 1 : 1;
            if (run > best) best = run, top = v[i];
        }
        if (2 * best <= w->n) break;
        common[d] = top;
    }
    free(v);
    for (size_t i = 0; i < w->n && d; i++) {
        const fkv_req_src *r = &w->src[w->reqs[i].tag];
        if (!r->n_block_ids || skey[orig[i]] == NO_KEY) continue;
        uint32_t j = 0;
        while (j < d && j < r->n_block_ids && r->block_ids[j] == common[j]) j++;
        skey[orig[i]] = r->block_ids[j < r->n_block_ids ? j : r->n_block_ids - 1];
    }
    return FKV_OK;
}

/* Numbers the sessions of the sorted requests densely by first arrival.
 * orig[i] is request i's index in the file (skey's order).  Leaves w
 * without sessions when some request has no key. */
static fkv_status build_sessions(fkv_workload *w, const uint64_t *skey, const size_t *orig)
{
    for (size_t i = 0; i < w->n; i++)
        if (skey[orig[i]] == NO_KEY) return FKV_OK;
    size_t cap = 16;
    while (cap < 2 * w->n) cap *= 2;
    /* open addressing: slot -> session index + 1 (0 = empty) */
    uint32_t *slot = calloc(cap, sizeof *slot);
    w->session = malloc(w->n * sizeof *w->session);
    w->session_key = malloc(w->n * sizeof *w->session_key);
    if (!slot || !w->session || !w->session_key) {
        free(slot);
        return FKV_ENOMEM;
    }
    size_t ns = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint64_t k = skey[orig[i]];
        size_t h = (size_t)XXH64(&k, sizeof k, 0) & (cap - 1);
        while (slot[h] && w->session_key[slot[h] - 1] != k) h = (h + 1) & (cap - 1);
        if (!slot[h]) {
            w->session_key[ns] = k;
            slot[h] = (uint32_t)++ns;
        }
        w->session[i] = slot[h] - 1;
    }
    free(slot);
    w->n_sessions = ns;
    return FKV_OK;
}

fkv_status fkv_trace_parse(const char *buf, size_t len, const char *fname, fkv_trace_format fmt,
                           size_t limit, uint32_t n_clients, fkv_workload *w, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (err && errlen) err[0] = 0;
    parser p = {fname ? fname : "<trace>", 0, err, errlen, w, 0, NULL, NULL, n_clients ? n_clients : 1};
    if (fmt == FKV_TRACE_AUTO) fmt = detect(buf, len);
    if (fmt == FKV_TRACE_AUTO) {
        p.line = 1;
        return perr(&p, "unrecognized trace format (expected an Azure CSV header 'TIMESTAMP,...', "
                        "Mooncake JSON lines, or a plain CSV header 'arrival_ms,...'); use --format");
    }
    w->block_tokens = 512;
    snprintf(w->name, sizeof w->name, "%s", fkv_trace_format_name(fmt));
    char *line = NULL;
    size_t line_cap = 0;
    fkv_status st = FKV_OK;
    int header_seen = 0;
    int64_t t0 = 0;
    size_t pos = 0;
    while (pos < len && (!limit || w->n < limit)) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - (buf + pos)) : len - pos;
        p.line++;
        if (l + 1 > line_cap) {
            line_cap = l + 1 > 256 ? l + 1 : 256;
            char *nb = realloc(line, line_cap);
            if (!nb) {
                st = FKV_ENOMEM;
                break;
            }
            line = nb;
        }
        memcpy(line, buf + pos, l);
        line[l] = 0;
        pos += l + 1;
        if (memchr(line, 0, l)) {
            st = perr(&p, "NUL byte in line");
            break;
        }
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ')) line[--l] = 0;
        if (l == 0) continue;
        if (fmt == FKV_TRACE_AZURE) {
            if (!header_seen) {
                header_seen = 1;
                if (strcmp(line, "TIMESTAMP,ContextTokens,GeneratedTokens")) {
                    st = perr(&p, "expected header 'TIMESTAMP,ContextTokens,GeneratedTokens'");
                    break;
                }
                continue;
            }
            st = parse_azure_line(&p, line, &t0);
        } else if (fmt == FKV_TRACE_PLAIN) {
            if (line[0] == '#') continue;
            if (!header_seen) {
                header_seen = 1;
                if (strcmp(line, "arrival_ms,prompt_tokens,output_tokens") &&
                    strcmp(line, "arrival_ms,prompt_tokens,output_tokens,client") &&
                    strcmp(line, "arrival_ms,prompt_tokens,output_tokens,client,shared_tokens")) {
                    st = perr(&p, "expected header 'arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]]'");
                    break;
                }
                continue;
            }
            st = parse_plain_line(&p, line);
        } else {
            st = parse_mooncake_line(&p, line, l);
        }
        if (st) break;
        if (w->n) w->reqs[w->n - 1].id = w->n; /* original order, for a stable sort */
    }
    free(line);
    if (!st && w->n == 0) {
        p.line = p.line ? p.line : 1;
        st = perr(&p, "no requests in trace");
    }
    if (st) {
        free(p.boff);
        free(p.skey);
        fkv_workload_free(w);
        return st;
    }
    /* block pointers are fixed only now: w->blocks moved while growing */
    for (size_t i = 0; i < w->n; i++) /* tag i: the request read i-th */
        w->src[i].block_ids = p.boff[i] == SIZE_MAX || !w->src[i].n_block_ids ? NULL : w->blocks + p.boff[i];
    free(p.boff);
    qsort(w->reqs, w->n, sizeof *w->reqs, cmp_req);
    int64_t first = w->reqs[0].arrival_ns;
    /* the file's order still rides in id: where each sorted request's session key is */
    size_t *orig = malloc(w->n * sizeof *orig);
    if (!orig) {
        free(p.skey);
        fkv_workload_free(w);
        return FKV_ENOMEM;
    }
    for (size_t i = 0; i < w->n; i++) orig[i] = (size_t)w->reqs[i].id - 1;
    st = fmt == FKV_TRACE_MOONCAKE ? mooncake_session_keys(w, p.skey, orig) : FKV_OK;
    if (!st) st = build_sessions(w, p.skey, orig);
    free(orig);
    free(p.skey);
    if (st) {
        fkv_workload_free(w);
        return st;
    }
    for (size_t i = 0; i < w->n; i++) {
        fkv_req *r = &w->reqs[i];
        r->arrival_ns -= first;
        if (r->client == UINT64_MAX) r->client = i % p.n_clients;
        r->id = i + 1;
        /* token ids of positions past the blocks: unique per request */
        w->src[r->tag].token_seed = 0x7f4a7c159e3779b9ULL * (i + 1) + 0x1234567ULL;
    }
    return FKV_OK;
}

fkv_status fkv_trace_load(const char *path, fkv_trace_format fmt, size_t limit, uint32_t n_clients,
                          fkv_workload *w, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return FKV_EIO;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return FKV_ENOMEM;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        if (err) snprintf(err, errlen, "%s: read error", path);
        return FKV_EIO;
    }
    fkv_status st = fkv_trace_parse(buf, len, path, fmt, limit, n_clients, w, err, errlen);
    free(buf);
    return st;
}
