/* UTF-8 holdback (see utf8_hold.h). */
#include "server/utf8_hold.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 character at s[0..n): >0 complete, 0 when s
 * is a valid but incomplete prefix, -1 when s[0] cannot start a character
 * here. */
static int utf8_char(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        unsigned char lim_lo = i == 1 ? lo : 0x80, lim_hi = i == 1 ? hi : 0xBF;
        if (s[i] < lim_lo || s[i] > lim_hi) return -1;
    }
    return len;
}

size_t fkv_utf8_hold_feed(fkv_utf8_hold *h, const char *in, size_t n, char *out, int flush)
{
    size_t total = h->n_pend + n, o = 0, i = 0;
    unsigned char small[1100], *buf = total <= sizeof small ? small : malloc(total);
    if (!buf) {
        h->n_pend = 0;
        return 0;
    }
    memcpy(buf, h->pend, h->n_pend);
    if (n) memcpy(buf + h->n_pend, in, n);
    h->n_pend = 0;
    while (i < total) {
        int k = utf8_char(buf + i, total - i);
        if (k > 0) {
            memcpy(out + o, buf + i, (size_t)k);
            o += (size_t)k, i += (size_t)k;
        } else if (k == 0 && !flush) {
            memcpy(h->pend, buf + i, total - i);
            h->n_pend = total - i;
            break;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
            o += 3;
            i += k == 0 ? total - i : 1;
        }
    }
    if (buf != small) free(buf);
    return o;
}
