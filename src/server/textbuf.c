/* Growable text buffer (see textbuf.h). */
#include "server/textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fkv_textbuf_init(fkv_textbuf *b)
{
    memset(b, 0, sizeof *b);
}

void fkv_textbuf_free(fkv_textbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void fkv_textbuf_clear(fkv_textbuf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

/* Room for `extra` more bytes plus the NUL. */
static int reserve(fkv_textbuf *b, size_t extra)
{
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t want = b->cap ? b->cap : 256;
    while (want < b->len + extra + 1) {
        if (want > ((size_t)-1) / 2) {
            b->oom = 1;
            return 0;
        }
        want *= 2;
    }
    char *p = realloc(b->data, want);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = want;
    return 1;
}

void fkv_textbuf_append(fkv_textbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void fkv_textbuf_puts(fkv_textbuf *b, const char *s)
{
    fkv_textbuf_append(b, s, strlen(s));
}

void fkv_textbuf_printf(fkv_textbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        fkv_textbuf_append(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void fkv_textbuf_json_str(fkv_textbuf *b, const char *s, size_t n)
{
    fkv_textbuf_append(b, "\"", 1);
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        fkv_textbuf_append(b, s + run, i - run);
        run = i + 1;
        switch (ch) {
        case '"': fkv_textbuf_append(b, "\\\"", 2); break;
        case '\\': fkv_textbuf_append(b, "\\\\", 2); break;
        case '\n': fkv_textbuf_append(b, "\\n", 2); break;
        case '\r': fkv_textbuf_append(b, "\\r", 2); break;
        case '\t': fkv_textbuf_append(b, "\\t", 2); break;
        default: fkv_textbuf_printf(b, "\\u%04x", ch); break;
        }
    }
    fkv_textbuf_append(b, s + run, n - run);
    fkv_textbuf_append(b, "\"", 1);
}

void fkv_textbuf_consume(fkv_textbuf *b, size_t n)
{
    if (n >= b->len) {
        fkv_textbuf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = 0;
}
