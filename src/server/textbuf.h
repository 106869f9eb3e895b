/* A growable byte buffer for rendering HTTP bodies and metrics text.
 * Allocation failure is sticky: `oom` is set, later appends do nothing, and
 * the owner answers 500 instead of sending a truncated body. */
#ifndef FKV_SERVER_TEXTBUF_H
#define FKV_SERVER_TEXTBUF_H

#include <stddef.h>

typedef struct fkv_textbuf {
    char *data; /* NUL-terminated when len > 0 or after any append */
    size_t len; /* bytes, excluding the NUL */
    size_t cap; /* bytes allocated */
    int oom;    /* 1 once an allocation failed */
} fkv_textbuf;

void fkv_textbuf_init(fkv_textbuf *b);
void fkv_textbuf_free(fkv_textbuf *b);
void fkv_textbuf_clear(fkv_textbuf *b); /* keeps the allocation */
void fkv_textbuf_append(fkv_textbuf *b, const char *s, size_t n);
void fkv_textbuf_puts(fkv_textbuf *b, const char *s);
void fkv_textbuf_printf(fkv_textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes included); bytes below 0x20,
 * '"' and '\\' are escaped, other bytes pass through unchanged. */
void fkv_textbuf_json_str(fkv_textbuf *b, const char *s, size_t n);
/* Drops the first n bytes (a consumer that has sent them). */
void fkv_textbuf_consume(fkv_textbuf *b, size_t n);

#endif
