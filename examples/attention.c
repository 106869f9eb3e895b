/* One decode attention call over a sequence's chunk table, with nothing
 * but the installed headers: a cache with real storage, K/V written at
 * the slots the append returns, then fkv_attn_decode reading the pages in
 * place.  The query meets token 7's key alone (a score of 80 against 0),
 * so the output is token 7's value row. */
#include <fairkv.h>
#include <fairkv_attn.h>
#include <math.h>
#include <stdio.h>

#define D 4
#define N 40

int main(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = D;
    cfg.dtype = FKV_F32;
    cfg.storage = FKV_STORAGE_CPU;
    cfg.capacity_pages = 16;
    fkv_cache *cache;
    char err[256];
    if (fkv_cache_create(&cfg, &cache, err, sizeof err) != FKV_OK) return fprintf(stderr, "%s\n", err), 1;
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    fkv_seq *seq;
    int32_t tokens[N];
    fkv_slot slots[N];
    for (int i = 0; i < N; i++) tokens[i] = 100 + i;
    if (fkv_seq_create(cache, &p, &seq) || fkv_seq_append(seq, tokens, N, slots)) return 1;

    void *k, *v;
    uint64_t stride;
    fkv_cache_info info;
    if (fkv_cache_layer_storage(cache, 0, &k, &v, &stride) || fkv_cache_get_info(cache, &info)) return 1;
    for (int i = 0; i < N; i++) { /* keys 0 but token 7's (all ones); value i is (i, -i, 2i, 1) */
        float *kp = (float *)((char *)k + slots[i].page * stride) + slots[i].slot * D;
        float *vp = (float *)((char *)v + slots[i].page * stride) + slots[i].slot * D;
        for (int d = 0; d < D; d++) kp[d] = i == 7 ? 1.0f : 0.0f;
        vp[0] = (float)i, vp[1] = (float)-i, vp[2] = 2.0f * i, vp[3] = 1.0f;
    }

    const fkv_chunk_view *const *chunks;
    size_t n_chunks;
    fkv_seq_pin(seq); /* the kernel reads the pages: keep them */
    fkv_seq_chunks(seq, &chunks, &n_chunks);
    fkv_kv_geom g = {1, 1, D, info.page_tokens, FKV_F32, stride, info.n_pages};
    fkv_attn_kv kv = {&g, 0, k, v};
    fkv_attn_seq s = {chunks, n_chunks, NULL, NULL};
    float q[D], out[D];
    for (int d = 0; d < D; d++) q[d] = 40.0f; /* score 80 for token 7, 0 for the others */
    fkv_status st = fkv_attn_decode(NULL, &kv, 1, &s, 1, q, out, 1.0f / sqrtf((float)D), err, sizeof err);
    fkv_seq_unpin(seq);
    fkv_seq_free(seq);
    fkv_cache_destroy(cache);
    if (st) return fprintf(stderr, "fkv_attn_decode: %s\n", err), 1;
    int ok = fabsf(out[0] - 7) < 0.01f && fabsf(out[1] + 7) < 0.01f && fabsf(out[2] - 14) < 0.02f &&
             fabsf(out[3] - 1) < 1e-4f;
    printf("attention over %zu chunks: (%.3f, %.3f, %.3f, %.3f) %s\n", n_chunks, out[0], out[1], out[2], out[3],
           ok ? "= token 7's value" : "WRONG");
    return ok ? 0 : 1;
}
