/* libFuzzer target: any byte string through the GGUF parser, and whatever
 * parses through the model binder and the tokenizer loader (which trust
 * only what the parser checked), then a short encode/decode. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    fkv_gguf *g;
    if (fkv_gguf_parse(data, size, "fuzz.gguf", &g, err, sizeof err) != FKV_OK) return 0;
    fkv_llama *m;
    if (fkv_llama_from_gguf(g, &m, err, sizeof err) == FKV_OK) {
        /* two tokens through the whole pass: the hyper-parameters the
         * binder accepted must be safe to compute with */
        fkv_fwd_geom geom = fkv_llama_geom(m);
        fkv_kvref_seq kv;
        fkv_fwd *f;
        if (fkv_kvref_seq_init(&kv, &geom, 2) == FKV_OK) {
            if (fkv_fwd_create(m, NULL, &f) == FKV_OK) {
                int32_t tok[2] = {0, (int32_t)(m->hp.n_vocab - 1)};
                float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
                fkv_fwd_seq s = {&kv, tok, 2, 0, NULL, logits, 0};
                if (logits) fkv_llama_forward(f, &fkv_kvref_ops, &s, 1, err, sizeof err);
                free(logits);
                fkv_fwd_destroy(f);
            }
            fkv_kvref_seq_free(&kv);
        }
        fkv_llama_free(m);
    }
    fkv_tokenizer *t;
    if (fkv_tokenizer_from_gguf(g, &t, err, sizeof err) == FKV_OK) {
        static const char text[] = "Hello  world, don't\n\n stop\xc3\xa9\xe2\x96\x81 12";
        int32_t ids[256];
        size_t n;
        if (fkv_tok_encode(t, text, sizeof text - 1, 1, ids, 256, &n) == FKV_OK) {
            char out[4096];
            size_t len;
            fkv_tok_decode(t, ids, n < 256 ? n : 256, out, sizeof out, &len);
        }
        fkv_tokenizer_free(t);
    }
    fkv_gguf_free(g);
    return 0;
}
