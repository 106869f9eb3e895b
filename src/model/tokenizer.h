/* Tokenizers read from GGUF metadata (tokenizer.ggml.*):
 *   "llama"  SentencePiece-style: a space prefix, ' ' -> U+2581, greedy
 *            merge of the adjacent pair whose token has the highest score,
 *            bytes of characters not in the vocabulary as <0xXX> tokens;
 *   "gpt2"   byte-level BPE: the pre-tokenizer tokenizer.ggml.pre names
 *            (gpt-2, llama3, deepseek-coder or llama.cpp's default, see
 *            tok_pretok.c; any other name is refused), bytes mapped to
 *            printable code points, merges applied by rank;
 *   "bytes"  this project's vocabulary for random-weight models: <unk>,
 *            <s>, </s>, then <0x00>..<0xFF> (259 tokens, llama's first 259),
 *            one token per byte.
 * Control tokens (BOS, EOS, ...) are produced from text only by
 * fkv_tok_encode_special and decode to nothing.  User-defined tokens are cut out of the text before anything
 * else (longest first) and decode to their text as it is, as in llama.cpp:
 * encodings equal llama_tokenize(add_special = false, parse_special = false)
 * plus BOS when asked. */
#ifndef FKV_ENGINE_TOKENIZER_H
#define FKV_ENGINE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "fairkv.h"

typedef enum fkv_tok_kind { FKV_TOK_BYTES = 0, FKV_TOK_SPM = 1, FKV_TOK_BPE = 2 } fkv_tok_kind;

/* tokenizer.ggml.token_type values (llama.cpp) */
enum {
    FKV_TT_UNDEFINED = 0,
    FKV_TT_NORMAL = 1,
    FKV_TT_UNKNOWN = 2,
    FKV_TT_CONTROL = 3,
    FKV_TT_USER_DEFINED = 4,
    FKV_TT_UNUSED = 5,
    FKV_TT_BYTE = 6
};

typedef struct fkv_strmap fkv_strmap; /* string -> int32 */

enum { FKV_PRE_GPT2 = 0, FKV_PRE_LLAMA3 = 1, FKV_PRE_DEEPSEEK_CODER = 2, FKV_PRE_DEFAULT = 3 };

typedef struct fkv_tokenizer {
    fkv_tok_kind kind;
    uint32_t n_vocab;
    char **text;       /* [n_vocab] token strings (NUL-terminated copies) */
    uint32_t *len;     /* [n_vocab] bytes */
    float *score;      /* [n_vocab] (0 when absent) */
    int32_t *type;     /* [n_vocab] FKV_TT_* (NORMAL when absent) */
    int32_t bos, eos, unk; /* -1 when none */
    int32_t eot;           /* tokenizer.ggml.eot_token_id (end of turn), -1 when none */
    int add_bos, add_space_prefix;
    int pre;           /* BPE pre-tokenizer: FKV_PRE_* */
    int ignore_merges; /* BPE: a pre-token that is itself a token stays whole (Llama 3) */
    int32_t *user;     /* USER_DEFINED token ids, longest text first */
    size_t n_user;
    int user_rstrip;   /* white space after a user-defined token is dropped (Phi-3, as llama.cpp) */
    int32_t byte_tok[256]; /* <0xXX> token of each byte, -1 if none */
    fkv_strmap *vocab;  /* text -> id (mergeable tokens only) */
    fkv_strmap *merges; /* BPE: "left right" -> rank */
} fkv_tokenizer;

fkv_status fkv_tokenizer_from_gguf(const fkv_gguf *g, fkv_tokenizer **out, char *err, size_t errlen);
void fkv_tokenizer_free(fkv_tokenizer *t);

/* Encodes len bytes of text (BOS first when add_bos and bos >= 0).  Writes
 * at most cap ids; *n gets the full count (call again with a larger buffer
 * if *n > cap). */
fkv_status fkv_tok_encode(const fkv_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *out, size_t cap,
                          size_t *n);
/* As fkv_tok_encode, but the text of a control token ("<|im_start|>",
 * "</s>": what a chat template writes) becomes that token, longest first:
 * llama_tokenize(parse_special = true). */
fkv_status fkv_tok_encode_special(const fkv_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *out,
                                  size_t cap, size_t *n);
/* Whether generation should stop at this token (EOS or end-of-turn). */
int fkv_tok_is_eog(const fkv_tokenizer *t, int32_t id);
/* The end-of-generation set (the tokens fkv_tok_is_eog accepts) into
 * out[0..cap); returns how many (at most 2: EOS, end of turn). */
uint32_t fkv_tok_eog_ids(const fkv_tokenizer *t, int32_t *out, uint32_t cap);
/* The bytes one token stands for (no leading-space stripping); NUL-
 * terminated when room; returns the byte count (0 for control tokens and
 * ids out of range), which may exceed cap - 1. */
size_t fkv_tok_piece(const fkv_tokenizer *t, int32_t id, char *buf, size_t cap);
/* Whole-sequence decode: concatenated pieces; the SentencePiece space
 * prefix added by encode is removed.  *len gets the full length. */
fkv_status fkv_tok_decode(const fkv_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len);

/* internal: the string map and the per-model encoders */
fkv_strmap *fkv__strmap_new(size_t expect);
void fkv__strmap_free(fkv_strmap *m);
int fkv__strmap_put(fkv_strmap *m, const char *s, size_t len, int32_t val); /* -1: no memory */
int32_t fkv__strmap_get(const fkv_strmap *m, const char *s, size_t len);    /* -1: absent */

/* Appends ids to a growable array; -1 on out of memory. */
typedef struct fkv__ids {
    int32_t *p;
    size_t n, cap;
} fkv__ids;
int fkv__ids_push(fkv__ids *a, int32_t id);

/* space_prefix: put the SentencePiece space in front (text at the start
 * or after a user-defined token, when add_space_prefix) */
fkv_status fkv__spm_encode(const fkv_tokenizer *t, const char *text, size_t len, int space_prefix, fkv__ids *out);
fkv_status fkv__bpe_encode(const fkv_tokenizer *t, const char *text, size_t len, fkv__ids *out);
/* Cuts len bytes into pre-tokens (BPE): *ends (malloc'd) gets the byte
 * offset where each ends, *n how many. */
fkv_status fkv__pretok_split(int pre, const char *s, size_t len, size_t **ends, size_t *n);
/* length of the UTF-8 sequence starting with byte c (1 for invalid lead bytes) */
size_t fkv__utf8_len(unsigned char c);

#endif
