/* UTF-8 holdback for streamed token text: a token's piece may end inside a
 * multi-byte character (byte-level vocabularies split them), so the
 * complete part goes out and the incomplete tail waits for the next piece.
 * Bytes that cannot be UTF-8 (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF) go out as U+FFFD, one per byte; a tail still
 * incomplete at the flush becomes one U+FFFD. */
#ifndef FKV_SERVER_UTF8_HOLD_H
#define FKV_SERVER_UTF8_HOLD_H

#include <stddef.h>

typedef struct fkv_utf8_hold {
    unsigned char pend[4]; /* the held bytes: a valid, incomplete character */
    size_t n_pend;
} fkv_utf8_hold; /* zero-initialized: nothing held */

/* Output room fkv_utf8_hold_feed needs for an n-byte piece. */
#define FKV_UTF8_HOLD_OUT(n) (3 * ((n) + 4))

/* Appends in[0..n) to the held bytes and writes the complete characters to
 * out (at least FKV_UTF8_HOLD_OUT(n) bytes); keeps an incomplete tail
 * unless `flush`.  Returns the bytes written; 0 with nothing held when out
 * of memory (the piece is lost). */
size_t fkv_utf8_hold_feed(fkv_utf8_hold *h, const char *in, size_t n, char *out, int flush);

#endif
