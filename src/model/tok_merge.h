/* Internal: the symbol-merge loop shared by the SentencePiece and BPE encoders. */
#ifndef FKV_ENGINE_TOK_MERGE_H
#define FKV_ENGINE_TOK_MERGE_H

#include <stddef.h>

#include "model/tokenizer.h"

typedef struct fkv__sym {
    size_t start, len;  /* bytes of the text; len 0 = merged away */
    size_t prev, next;  /* neighbours, SIZE_MAX = none */
} fkv__sym;

/* Whether the adjacent symbols a (la bytes at a) and b (the lb bytes after)
 * may merge; *score: higher merges first. */
typedef int (*fkv__pair_fn)(const void *ctx, const char *a, size_t la, size_t lb, double *score);

/* One symbol per UTF-8 character (malloc'd; *n gets the count). */
fkv__sym *fkv__split_chars(const char *text, size_t len, size_t *n);
fkv_status fkv__merge(const char *text, fkv__sym *s, size_t n, fkv__pair_fn fn, const void *ctx);

#endif
