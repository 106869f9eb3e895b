/* Accuracy of K/V precisions on a real model (kv_eval.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv_eval.h"
#include "model/sampler.h"

fkv_status fkv_kv_ladder_check(const fkv_kv_ladder *l, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!l || !l->chunk) why = "chunk must be >= 1";
    else if (l->hot % l->chunk) why = "the hot window must be a multiple of the chunk";
    else if (l->warm_tokens != FKV_LADDER_NO_COLD && l->warm_tokens % l->chunk)
        why = "the warm tokens must be a multiple of the chunk";
    else if ((unsigned)l->warm >= FKV_KVC_COUNT || (unsigned)l->cold >= FKV_KVC_COUNT) why = "unknown precision";
    if (why) {
        snprintf(err, errlen, "ladder: %s (chunk %u, hot %u, warm tokens %u)", why, l ? l->chunk : 0,
                 l ? l->hot : 0, l ? l->warm_tokens : 0);
        return FKV_EINVAL;
    }
    return FKV_OK;
}

fkv_status fkv_kv_ladder_parse(const char *spec, fkv_kv_ladder *l, char *err, size_t errlen)
{
    char buf[64];
    if (!spec || strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "--kv: missing or too long precision spec");
        return FKV_EINVAL;
    }
    strcpy(buf, spec);
    char *colon = strchr(buf, ':');
    if (!colon) {
        if (fkv_kvc_parse(buf, &l->warm)) goto bad;
        l->warm_tokens = FKV_LADDER_NO_COLD;
        l->cold = l->warm;
        return FKV_OK;
    }
    *colon = 0;
    char *comma = strchr(colon + 1, ','), *end = NULL;
    if (!comma) goto bad;
    *comma = 0;
    unsigned long w = strtoul(colon + 1, &end, 10);
    if (!*(colon + 1) || *end || w >= FKV_LADDER_NO_COLD) goto bad;
    if (fkv_kvc_parse(buf, &l->warm) || fkv_kvc_parse(comma + 1, &l->cold)) goto bad;
    l->warm_tokens = (uint32_t)w;
    return FKV_OK;
bad:
    snprintf(err, errlen, "--kv '%s': expected PREC or WARM:TOKENS,COLD with PREC one of f32, f16, fp8, "
             "fp8-head, fp8-chunk, int8, int4, int4r, int2", spec);
    return FKV_EINVAL;
}

void fkv_kv_ladder_name(const fkv_kv_ladder *l, char *buf, size_t n)
{
    if (l->warm_tokens == FKV_LADDER_NO_COLD) snprintf(buf, n, "%s", fkv_kvc_name(l->warm));
    else snprintf(buf, n, "%s:%u,%s", fkv_kvc_name(l->warm), l->warm_tokens, fkv_kvc_name(l->cold));
}

double fkv_kv_ladder_bytes_ratio(const fkv_kv_ladder *l, uint32_t n, uint32_t H, uint32_t D)
{
    uint32_t hot = l->hot < n ? l->hot : n, rest = n - hot;
    uint32_t warm = l->warm_tokens == FKV_LADDER_NO_COLD || l->warm_tokens > rest ? rest : l->warm_tokens;
    uint32_t cold = rest - warm;
    double b = (double)fkv_kvc_bytes(FKV_KVC_F16, hot ? hot : 1, H, D) * (hot ? 1 : 0);
    if (warm) b += (double)fkv_kvc_bytes(l->warm, warm, H, D);
    if (cold) b += (double)fkv_kvc_bytes(l->cold, cold, H, D);
    return b / (double)fkv_kvc_bytes(FKV_KVC_F16, n, H, D);
}

static void log_softmax(const float *x, uint32_t n, float *out)
{
    double mx = x[0], s = 0;
    for (uint32_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (uint32_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (uint32_t i = 0; i < n; i++) out[i] = (float)((double)x[i] - lse);
}

/* Brings every complete chunk of a sequence of `len` tokens to the
 * precision its age asks for.  level[j]: 0 fp32, 1 warm, 2 cold. */
static fkv_status age_chunks(const fkv_kv_ladder *l, const fkv_kvc_calib *cal, const fkv_fwd_geom *g,
                             fkv_kvref_seq *kv, uint32_t len, uint8_t *level, char *err, size_t errlen)
{
    const size_t row = (size_t)g->n_kv_heads * g->head_dim;
    for (uint32_t j = 0; (uint64_t)(j + 1) * l->chunk <= len; j++) {
        uint32_t age = len - (j + 1) * l->chunk;
        uint8_t want = age < l->hot ? 0
                       : (l->warm_tokens == FKV_LADDER_NO_COLD || (uint64_t)age < (uint64_t)l->hot + l->warm_tokens) ? 1
                                                                                                              : 2;
        while (level[j] < want) {
            level[j]++;
            fkv_kvc c = level[j] == 1 ? l->warm : l->cold;
            for (uint32_t y = 0; y < g->n_layers; y++) {
                size_t off = ((size_t)y * kv->max_tokens + (size_t)j * l->chunk) * row;
                fkv_status st = fkv_kvc_roundtrip(c, cal, y, kv->k + off, kv->v + off, l->chunk, g->n_kv_heads,
                                                  g->head_dim, err, errlen);
                if (st) return st;
            }
        }
    }
    return FKV_OK;
}

fkv_status fkv_kv_eval_stream(fkv_fwd *f, const fkv_llama *m, int32_t bos, uint32_t n_seqs, uint32_t len,
                              uint64_t seed0, int32_t *tokens, char *err, size_t errlen)
{
    if (len < 2 || len > m->hp.ctx_len) {
        snprintf(err, errlen, "stream: sequence length %u must be within 2 .. the context length %u", len,
                 m->hp.ctx_len);
        return FKV_EINVAL;
    }
    fkv_fwd_geom g = fkv_llama_geom(m);
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    fkv_status st = logits ? FKV_OK : FKV_ENOMEM;
    for (uint32_t s = 0; s < n_seqs && !st; s++) {
        fkv_kvref_seq kv = {0};
        fkv_sampler smp = {0};
        int32_t *t = tokens + (size_t)s * len;
        t[0] = bos;
        st = fkv_kvref_seq_init(&kv, &g, len);
        if (!st) st = fkv_sampler_init(&smp, m->hp.n_vocab, 1.0f, 1.0f, seed0 + s);
        for (uint32_t p = 0; p + 1 < len && !st; p++) {
            fkv_fwd_seq q = {&kv, t + p, 1, p, NULL, logits, 0};
            if (!(st = fkv_llama_forward(f, &fkv_kvref_ops, &q, 1, err, errlen))) t[p + 1] = fkv_sample(&smp, logits);
        }
        fkv_sampler_free(&smp);
        fkv_kvref_seq_free(&kv);
    }
    free(logits);
    return st;
}

fkv_status fkv_kv_eval_calibrate(fkv_fwd *f, const fkv_llama *m, const int32_t *tokens, uint32_t len,
                                 fkv_kvc_calib *cal, char *err, size_t errlen)
{
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_kvref_seq kv = {0};
    fkv_status st = fkv_kvref_seq_init(&kv, &g, len);
    fkv_fwd_seq q = {&kv, tokens, len, 0, NULL, NULL, 0};
    if (!st) st = fkv_llama_forward(f, &fkv_kvref_ops, &q, 1, err, errlen);
    const size_t row = (size_t)g.n_kv_heads * g.head_dim;
    for (uint32_t y = 0; y < g.n_layers && !st; y++)
        st = fkv_kvc_calib_observe(cal, y, kv.k + (size_t)y * len * row, kv.v + (size_t)y * len * row, len, g.head_dim);
    fkv_kvref_seq_free(&kv);
    return st;
}

fkv_status fkv_kv_eval_run(fkv_fwd *f, const fkv_llama *m, const fkv_kv_ladder *l, const fkv_kvc_calib *cal,
                           const int32_t *tokens, uint32_t n_seqs, uint32_t len, float *logp, char *err,
                           size_t errlen)
{
    fkv_kv_ladder full = {64, 0, FKV_KVC_F32, FKV_LADDER_NO_COLD, FKV_KVC_F32};
    if (!l) l = &full;
    fkv_status st = fkv_kv_ladder_check(l, err, errlen);
    if (st) return st;
    const uint32_t V = m->hp.n_vocab, C = l->chunk;
    fkv_fwd_geom g = fkv_llama_geom(m);
    float *logits = malloc((size_t)C * V * sizeof *logits);
    uint8_t *level = calloc(len / C + 1, 1);
    if (!logits || !level) st = FKV_ENOMEM;
    for (uint32_t s = 0; s < n_seqs && !st; s++) {
        fkv_kvref_seq kv = {0};
        const int32_t *t = tokens + (size_t)s * len;
        memset(level, 0, len / C + 1);
        st = fkv_kvref_seq_init(&kv, &g, len);
        for (uint32_t p0 = 0; p0 + 1 < len && !st; p0 += C) {
            uint32_t n = len - 1 - p0 < C ? len - 1 - p0 : C; /* the last token predicts nothing */
            if ((st = age_chunks(l, cal, &g, &kv, p0, level, err, errlen))) break;
            fkv_fwd_seq q = {&kv, t + p0, n, p0, NULL, logits, 1};
            if ((st = fkv_llama_forward(f, &fkv_kvref_ops, &q, 1, err, errlen))) break;
            for (uint32_t i = 0; i < n; i++)
                log_softmax(logits + (size_t)i * V, V, logp + ((size_t)s * (len - 1) + p0 + i) * V);
        }
        fkv_kvref_seq_free(&kv);
    }
    free(logits);
    free(level);
    return st;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

fkv_status fkv_kv_eval_compare(const float *ref, const float *test, const int32_t *tokens, uint32_t n_seqs,
                               uint32_t len, uint32_t V, fkv_kv_eval_result *out)
{
    memset(out, 0, sizeof *out);
    uint64_t n = (uint64_t)n_seqs * (len - 1);
    double *kl = malloc((n ? n : 1) * sizeof *kl);
    if (!kl) return FKV_ENOMEM;
    double sum = 0, nll_r = 0, nll_t = 0;
    uint64_t agree = 0;
    for (uint64_t i = 0; i < n; i++) {
        const float *a = ref + i * V, *b = test + i * V;
        double k = 0;
        uint32_t ar = 0, at = 0;
        for (uint32_t v = 0; v < V; v++) {
            k += exp((double)a[v]) * ((double)a[v] - (double)b[v]);
            if (a[v] > a[ar]) ar = v;
            if (b[v] > b[at]) at = v;
        }
        kl[i] = k > 0 ? k : 0; /* rounding can make a near-zero divergence negative */
        sum += kl[i];
        agree += ar == at;
        uint64_t s = i / (len - 1), p = i % (len - 1);
        int32_t next = tokens[s * len + p + 1];
        nll_r -= a[next];
        nll_t -= b[next];
    }
    qsort(kl, n, sizeof *kl, cmp_d);
    out->n = n;
    out->kld_mean = n ? sum / (double)n : 0;
    out->kld_p99 = n ? kl[(uint64_t)ceil(0.99 * (double)n) - 1] : 0;
    out->top1 = n ? (double)agree / (double)n : 0;
    out->ppl_ref = n ? exp(nll_r / (double)n) : 0;
    out->ppl = n ? exp(nll_t / (double)n) : 0;
    free(kl);
    return FKV_OK;
}

fkv_status fkv_kv_eval_greedy(fkv_fwd *f, const fkv_llama *m, const fkv_kv_ladder *l, const fkv_kvc_calib *cal,
                              int32_t bos, uint32_t n, int32_t *out, char *err, size_t errlen)
{
    fkv_kv_ladder full = {64, 0, FKV_KVC_F32, FKV_LADDER_NO_COLD, FKV_KVC_F32};
    if (!l) l = &full;
    fkv_status st = fkv_kv_ladder_check(l, err, errlen);
    if (st) return st;
    if (n + 1 > m->hp.ctx_len) {
        snprintf(err, errlen, "greedy: %u tokens exceed the context length %u", n, m->hp.ctx_len);
        return FKV_EINVAL;
    }
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_kvref_seq kv = {0};
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    uint8_t *level = calloc((n + 1) / l->chunk + 1, 1);
    st = logits && level ? fkv_kvref_seq_init(&kv, &g, n + 1) : FKV_ENOMEM;
    int32_t cur = bos;
    for (uint32_t p = 0; p < n && !st; p++) {
        if ((st = age_chunks(l, cal, &g, &kv, p, level, err, errlen))) break;
        fkv_fwd_seq q = {&kv, &cur, 1, p, NULL, logits, 0};
        if ((st = fkv_llama_forward(f, &fkv_kvref_ops, &q, 1, err, errlen))) break;
        cur = out[p] = fkv_argmax(logits, m->hp.n_vocab);
    }
    fkv_kvref_seq_free(&kv);
    free(logits);
    free(level);
    return st;
}
