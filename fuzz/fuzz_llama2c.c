/* libFuzzer target: the llama2.c checkpoint and tokenizer readers.  Input:
 * u32 (little-endian) checkpoint length, the checkpoint, then the tokenizer.
 * Whatever both readers accept must convert, and what converts must parse
 * as a GGUF and load as a model and a tokenizer (abort otherwise): the
 * converter writes only files the engine reads. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/llama2c.h"
#include "model/model.h"
#include "model/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what, const char *err)
{
    if (ok) return;
    fprintf(stderr, "fuzz_llama2c: converted, but %s: %s\n", what, err);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    size_t cn = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (cn > size - 4) cn = size - 4;
    const uint8_t *c = data + 4, *t = c + cn;
    size_t tn = size - 4 - cn;
    char err[512];
    fkv_llama2c ck;
    if (fkv_llama2c_parse(c, cn, "fuzz.bin", &ck, err, sizeof err) != FKV_OK) return 0;
    fkv_llama2c_vocab v;
    if (fkv_llama2c_vocab_parse(t, tn, "fuzz-tok.bin", ck.cfg.vocab_size, &v, err, sizeof err) != FKV_OK) return 0;
    for (int f16 = 0; f16 < 2; f16++) {
        fkv_gguf_writer *w;
        if (fkv_llama2c_to_gguf(&ck, &v, f16 ? FKV_GGML_F16 : FKV_GGML_F32, "fuzz", "fuzz.bin", &w, err, sizeof err))
            continue; /* non-finite or out-of-range weights */
        uint8_t *img;
        size_t len;
        fkv_status st = fkv_gguf_w_to_mem(w, &img, &len);
        fkv_gguf_writer_free(w);
        if (st) continue;
        fkv_gguf *g;
        must(fkv_gguf_parse(img, len, "fuzz.gguf", &g, err, sizeof err) == FKV_OK, "the GGUF does not parse", err);
        fkv_llama *m;
        must(fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_OK, "the model does not load", err);
        must(m->hp.ctx_len == ck.cfg.seq_len && m->tied_output == ck.cfg.shared_classifier, "the shape changed", "");
        fkv_llama_free(m);
        fkv_tokenizer *tok;
        must(fkv_tokenizer_from_gguf(g, &tok, err, sizeof err) == FKV_OK, "the tokenizer does not load", err);
        fkv_tokenizer_free(tok);
        fkv_gguf_free(g);
        free(img);
    }
    fkv_llama2c_vocab_free(&v);
    return 0;
}
