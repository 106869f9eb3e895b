/* Reference K/V stores and attention: a contiguous per-sequence buffer (for
 * tests and the CLI), and the write / read of fairkv's paged layout
 * [n_pages][page_tokens][n_kv_heads][head_dim] that a cache-backed store
 * uses.  Scalar and plain on purpose: these define what faster kernels must
 * reproduce. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/half.h"
#include "model/model.h"

fkv_status fkv_kvref_seq_init(fkv_kvref_seq *s, const fkv_fwd_geom *g, uint32_t max_tokens)
{
    size_t n = (size_t)g->n_layers * max_tokens * g->n_kv_heads * g->head_dim;
    s->max_tokens = max_tokens;
    s->k = calloc(n ? n : 1, sizeof(float));
    s->v = calloc(n ? n : 1, sizeof(float));
    if (!s->k || !s->v) {
        fkv_kvref_seq_free(s);
        return FKV_ENOMEM;
    }
    return FKV_OK;
}

void fkv_kvref_seq_free(fkv_kvref_seq *s)
{
    free(s->k);
    free(s->v);
    s->k = s->v = NULL;
}

static fkv_status ref_store(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s, const float *k,
                            const float *v)
{
    (void)ctx;
    fkv_kvref_seq *r = s->seq;
    if ((uint64_t)s->start_pos + s->n_tokens > r->max_tokens) return FKV_EFULL;
    size_t row = (size_t)g->n_kv_heads * g->head_dim;
    size_t base = ((size_t)layer * r->max_tokens + s->start_pos) * row;
    memcpy(r->k + base, k, (size_t)s->n_tokens * row * sizeof(float));
    memcpy(r->v + base, v, (size_t)s->n_tokens * row * sizeof(float));
    return FKV_OK;
}

/* One query head over n_ctx keys: out[head_dim].  key(j)/val(j) give f32
 * rows; scores is scratch [n_ctx]. */
typedef struct kv_reader {
    const float *(*row)(const struct kv_reader *r, int is_v, uint32_t pos, uint32_t kvh, float *buf);
    const void *a, *b;
    const fkv_slot *slot_of;
    uint64_t page_stride;
    uint32_t page_tokens, n_kv_heads, head_dim, max_tokens, layer;
    fkv_dtype dtype;
} kv_reader;

static void attend_head(const kv_reader *r, const float *q, float scale, uint32_t n_ctx, uint32_t kvh, float *scores,
                        float *buf, float *out)
{
    uint32_t hd = r->head_dim;
    float mx = -INFINITY;
    for (uint32_t j = 0; j < n_ctx; j++) {
        const float *kr = r->row(r, 0, j, kvh, buf);
        float d = 0;
        for (uint32_t i = 0; i < hd; i++) d += q[i] * kr[i];
        scores[j] = d * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    float sum = 0;
    for (uint32_t j = 0; j < n_ctx; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    memset(out, 0, hd * sizeof(float));
    for (uint32_t j = 0; j < n_ctx; j++) {
        const float *vr = r->row(r, 1, j, kvh, buf);
        float p = scores[j] / sum;
        for (uint32_t i = 0; i < hd; i++) out[i] += p * vr[i];
    }
}

static fkv_status attend_all(const kv_reader *r, const fkv_fwd_geom *g, uint32_t start_pos, uint32_t n_tokens,
                             const float *q, float *out)
{
    float *scores = malloc(((size_t)start_pos + n_tokens + g->head_dim) * sizeof(float));
    if (!scores) return FKV_ENOMEM;
    float *buf = scores + start_pos + n_tokens;
    uint32_t group = g->n_heads / g->n_kv_heads;
    size_t qd = (size_t)g->n_heads * g->head_dim;
    for (uint32_t i = 0; i < n_tokens; i++)
        for (uint32_t h = 0; h < g->n_heads; h++)
            attend_head(r, q + i * qd + (size_t)h * g->head_dim, g->scale, start_pos + i + 1, h / group, scores, buf,
                        out + i * qd + (size_t)h * g->head_dim);
    free(scores);
    return FKV_OK;
}

static const float *contig_row(const kv_reader *r, int is_v, uint32_t pos, uint32_t kvh, float *buf)
{
    (void)buf;
    const float *base = is_v ? r->b : r->a;
    return base + (((size_t)r->layer * r->max_tokens + pos) * r->n_kv_heads + kvh) * r->head_dim;
}

static fkv_status ref_attend(void *ctx, const fkv_fwd_geom *g, uint32_t layer, const fkv_fwd_seq *s, const float *q,
                             float *out)
{
    (void)ctx;
    const fkv_kvref_seq *rs = s->seq;
    if ((uint64_t)s->start_pos + s->n_tokens > rs->max_tokens) return FKV_EINVAL;
    kv_reader r = {contig_row, rs->k, rs->v, NULL, 0, 0, g->n_kv_heads, g->head_dim, rs->max_tokens, layer, FKV_F32};
    return attend_all(&r, g, s->start_pos, s->n_tokens, q, out);
}

const fkv_kv_ops fkv_kvref_ops = {ref_store, ref_attend, NULL};

/* ---------------------------------------------------------------- paged */

static size_t elt_size(fkv_dtype t) { return t == FKV_F32 ? 4 : 2; }

fkv_status fkv_kv_write_paged(void *k_base, void *v_base, uint64_t page_stride, uint32_t page_tokens, fkv_dtype dtype,
                              uint32_t n_kv_heads, uint32_t head_dim, const fkv_slot *slots, uint32_t n,
                              const float *k, const float *v)
{
    if (dtype != FKV_F32 && dtype != FKV_F16) return FKV_EUNSUPPORTED;
    if (n && !slots) return FKV_EINVAL; /* a paged store needs fkv_fwd_seq.slots */
    size_t row = (size_t)n_kv_heads * head_dim, es = elt_size(dtype);
    for (uint32_t i = 0; i < n; i++) {
        if (slots[i].slot >= page_tokens) return FKV_EINVAL;
        size_t off = (size_t)slots[i].page * page_stride + (size_t)slots[i].slot * row * es;
        uint8_t *kd = (uint8_t *)k_base + off, *vd = (uint8_t *)v_base + off;
        const float *ks = k + i * row, *vs = v + i * row;
        if (dtype == FKV_F32) {
            memcpy(kd, ks, row * 4);
            memcpy(vd, vs, row * 4);
        } else {
            for (size_t e = 0; e < row; e++) {
                uint16_t hk = fkv_f2h(ks[e]), hv = fkv_f2h(vs[e]);
                memcpy(kd + 2 * e, &hk, 2);
                memcpy(vd + 2 * e, &hv, 2);
            }
        }
    }
    return FKV_OK;
}

static const float *paged_row(const kv_reader *r, int is_v, uint32_t pos, uint32_t kvh, float *buf)
{
    fkv_slot sl = r->slot_of[pos];
    size_t es = elt_size(r->dtype);
    const uint8_t *p = (const uint8_t *)(is_v ? r->b : r->a) + (size_t)sl.page * r->page_stride +
                       ((size_t)sl.slot * r->n_kv_heads + kvh) * r->head_dim * es;
    if (r->dtype == FKV_F32) {
        memcpy(buf, p, r->head_dim * sizeof(float));
    } else {
        for (uint32_t i = 0; i < r->head_dim; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            buf[i] = fkv_h2f(h);
        }
    }
    return buf;
}

fkv_status fkv_attn_paged_ref(const fkv_fwd_geom *g, const void *k_base, const void *v_base, uint64_t page_stride,
                              uint32_t page_tokens, fkv_dtype dtype, const fkv_slot *slot_of, uint32_t start_pos,
                              uint32_t n_tokens, const float *q, float *out)
{
    if (dtype != FKV_F32 && dtype != FKV_F16) return FKV_EUNSUPPORTED;
    if (!slot_of) return FKV_EINVAL;
    kv_reader r = {paged_row, k_base, v_base, slot_of, page_stride, page_tokens, g->n_kv_heads, g->head_dim, 0, 0,
                   dtype};
    return attend_all(&r, g, start_pos, n_tokens, q, out);
}
