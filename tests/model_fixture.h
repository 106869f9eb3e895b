/* A model built in memory from a model-init configuration and loaded from
 * its GGUF bytes, as the engine tests use it.  The loaded model points
 * into the parsed file and the bytes, so all three live and go together. */
#ifndef FKV_TEST_MODEL_FIXTURE_H
#define FKV_TEST_MODEL_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/model_init.h"
#include "model/sampler.h"

typedef struct built {
    uint8_t *buf;
    size_t len;
    fkv_gguf *g;
    fkv_llama *m;
} built;

static inline built build(const fkv_model_init_cfg *cfg)
{
    built b = {0};
    fkv_gguf_writer *w;
    REQUIRE(fkv_model_init_build(cfg, &w) == FKV_OK);
    REQUIRE(fkv_gguf_w_to_mem(w, &b.buf, &b.len) == FKV_OK);
    fkv_gguf_writer_free(w);
    char err[300];
    REQUIRE(fkv_gguf_parse(b.buf, b.len, "model.gguf", &b.g, err, sizeof err) == FKV_OK);
    fkv_status st = fkv_llama_from_gguf(b.g, &b.m, err, sizeof err);
    if (st) fprintf(stderr, "%s\n", err);
    REQUIRE(st == FKV_OK);
    return b;
}

static inline void unbuild(built *b)
{
    fkv_llama_free(b->m);
    fkv_gguf_free(b->g);
    free(b->buf);
}

/* Greedy tokens of the plain forward pass (contiguous reference K/V) after
 * prompt[n]: up to max of them into out, stopping before `eos` when it is
 * sampled (eos < 0: never).  Returns how many. */
static inline uint32_t greedy_reference(const fkv_llama *m, const int32_t *prompt, uint32_t n, int32_t *out,
                                        uint32_t max, int32_t eos)
{
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_fwd *f;
    REQUIRE(!fkv_fwd_create(m, NULL, &f));
    float *lg = malloc(m->hp.n_vocab * sizeof *lg);
    int32_t *ids = malloc((n + max) * sizeof *ids);
    REQUIRE(lg && ids);
    char err[300];
    fkv_kvref_seq kv;
    REQUIRE(!fkv_kvref_seq_init(&kv, &g, n + max));
    memcpy(ids, prompt, n * sizeof *ids);
    fkv_fwd_seq s = {&kv, ids, n, 0, NULL, lg, 0};
    REQUIRE(!fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err));
    uint32_t k = 0;
    for (uint32_t t = 0; t < max; t++) {
        int32_t tok = fkv_argmax(lg, m->hp.n_vocab);
        if (tok == eos) break;
        out[k++] = tok;
        ids[n + t] = tok;
        if (t + 1 == max) break;
        fkv_fwd_seq d = {&kv, ids + n + t, 1, n + t, NULL, lg, 0};
        REQUIRE(!fkv_llama_forward(f, &fkv_kvref_ops, &d, 1, err, sizeof err));
    }
    fkv_kvref_seq_free(&kv);
    free(ids);
    free(lg);
    fkv_fwd_destroy(f);
    return k;
}

/* The plain forward pass's logits at each generated position: logits[t *
 * n_vocab ..] are those token t is drawn from.  Token t is forced[t] when
 * forced is given (teacher forcing), else the argmax, ending before eos
 * like greedy_reference.  Returns the tokens produced (out may be NULL). */
static inline uint32_t reference_logits(const fkv_llama *m, const int32_t *prompt, uint32_t n, const int32_t *forced,
                                        uint32_t max, int32_t eos, int32_t *out, float *logits)
{
    uint32_t V = m->hp.n_vocab;
    fkv_fwd_geom g = fkv_llama_geom(m);
    fkv_fwd *f;
    REQUIRE(!fkv_fwd_create(m, NULL, &f));
    int32_t *ids = malloc((n + max) * sizeof *ids);
    REQUIRE(ids);
    char err[300];
    fkv_kvref_seq kv;
    REQUIRE(!fkv_kvref_seq_init(&kv, &g, n + max));
    memcpy(ids, prompt, n * sizeof *ids);
    fkv_fwd_seq s = {&kv, ids, n, 0, NULL, logits, 0};
    REQUIRE(!fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err));
    uint32_t k = 0;
    for (uint32_t t = 0; t < max; t++) {
        const float *lg = logits + (size_t)t * V;
        int32_t tok = forced ? forced[t] : fkv_argmax(lg, V);
        if (!forced && tok == eos) break;
        if (out) out[k] = tok;
        k++;
        ids[n + t] = tok;
        if (t + 1 == max) break;
        fkv_fwd_seq d = {&kv, ids + n + t, 1, n + t, NULL, logits + (size_t)(t + 1) * V, 0};
        REQUIRE(!fkv_llama_forward(f, &fkv_kvref_ops, &d, 1, err, sizeof err));
    }
    fkv_kvref_seq_free(&kv);
    free(ids);
    fkv_fwd_destroy(f);
    return k;
}

#endif
