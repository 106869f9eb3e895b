/* A model built in memory from a model-init configuration and loaded from
 * its GGUF bytes, as the engine tests use it.  The loaded model points
 * into the parsed file and the bytes, so all three live and go together. */
#ifndef FKV_TEST_MODEL_FIXTURE_H
#define FKV_TEST_MODEL_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/model_init.h"

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

#endif
