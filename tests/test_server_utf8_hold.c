/* The engine backend's UTF-8 holdback (src/server/utf8_hold.c): a
 * character split across token pieces is held back and goes out whole
 * with the piece that completes it; bytes that cannot be UTF-8 become
 * U+FFFD one each; a tail still incomplete at the flush becomes one
 * U+FFFD; valid text comes out unchanged however it is cut. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "server/api.h"
#include "server/utf8_hold.h"
#include "util/rng.h"

#define FFFD "\xEF\xBF\xBD"

/* feeds s (NUL-terminated) and compares what comes out with want */
static int feed_is(fkv_utf8_hold *h, const char *s, int flush, const char *want)
{
    char out[FKV_UTF8_HOLD_OUT(64)];
    size_t n = fkv_utf8_hold_feed(h, s, strlen(s), out, flush);
    int ok = n == strlen(want) && !memcmp(out, want, n);
    if (!ok) fprintf(stderr, "fed '%s': got %zu bytes '%.*s', want '%s'\n", s, n, (int)n, out, want);
    return ok;
}

static void test_split_characters(void)
{
    fkv_utf8_hold h = {0};
    /* é = C3 A9 split after its first byte */
    CHECK(feed_is(&h, "a\xC3", 0, "a"));
    CHECK(h.n_pend == 1);
    CHECK(feed_is(&h, "\xA9" "b", 0, "\xC3\xA9" "b"));
    CHECK(h.n_pend == 0);
    /* U+1F600 = F0 9F 98 80, one byte a piece: nothing until the last */
    CHECK(feed_is(&h, "\xF0", 0, ""));
    CHECK(feed_is(&h, "\x9F", 0, ""));
    CHECK(feed_is(&h, "\x98", 0, ""));
    CHECK(h.n_pend == 3);
    CHECK(feed_is(&h, "\x80", 0, "\xF0\x9F\x98\x80"));
    /* € = E2 82 AC cut 1 + 2 */
    CHECK(feed_is(&h, "x\xE2", 0, "x"));
    CHECK(feed_is(&h, "\x82\xAC", 0, "\xE2\x82\xAC"));
    /* an empty piece changes nothing */
    CHECK(feed_is(&h, "\xE2\x82", 0, ""));
    CHECK(feed_is(&h, "", 0, ""));
    CHECK(h.n_pend == 2);
    CHECK(feed_is(&h, "\xAC", 0, "\xE2\x82\xAC"));
}

static void test_invalid_bytes(void)
{
    fkv_utf8_hold h = {0};
    CHECK(feed_is(&h, "a\xFF" "b", 0, "a" FFFD "b"));          /* never UTF-8 */
    CHECK(feed_is(&h, "\xC0\xAF", 0, FFFD FFFD));               /* overlong '/' */
    CHECK(feed_is(&h, "\xED\xA0\x80", 0, FFFD FFFD FFFD));      /* a surrogate */
    CHECK(feed_is(&h, "\xF4\x90\x80\x80", 0, FFFD FFFD FFFD FFFD)); /* above U+10FFFF */
    CHECK(feed_is(&h, "\x80", 0, FFFD));                        /* a lone continuation */
    /* a held lead byte whose next piece does not continue it */
    CHECK(feed_is(&h, "\xE2", 0, ""));
    CHECK(feed_is(&h, "A", 0, FFFD "A"));
    CHECK(h.n_pend == 0);
    /* the flush: an incomplete tail is one U+FFFD, nothing stays held */
    CHECK(feed_is(&h, "y\xF0\x9F\x98", 1, "y" FFFD));
    CHECK(h.n_pend == 0);
    CHECK(feed_is(&h, "\xE2", 0, ""));
    CHECK(feed_is(&h, "", 1, FFFD));
    CHECK(h.n_pend == 0);
}

/* valid text cut anywhere comes out whole and unchanged; any bytes come
 * out valid and within the documented room; pieces longer than the
 * holdback's own buffer included */
static void test_any_cut(void)
{
    static const char *chars[] = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", " ", "\xD7\x90"};
    static char text[6000], got[6000 * 3 + 64], out[FKV_UTF8_HOLD_OUT(3000)];
    fkv_rng rng;
    fkv_rng_seed(&rng, 7);
    for (int round = 0; round < 200; round++) {
        size_t tl = 0;
        while (tl < sizeof text - 8) {
            const char *c = chars[fkv_rng_next(&rng) % 6];
            memcpy(text + tl, c, strlen(c));
            tl += strlen(c);
            if (round < 150 && fkv_rng_next(&rng) % 16 == 0) break;
        }
        int garbage = round % 4 == 3; /* one in four: random bytes instead */
        if (garbage)
            for (size_t i = 0; i < tl; i++) text[i] = (char)(fkv_rng_next(&rng) & 0xFF);
        fkv_utf8_hold h = {0};
        size_t at = 0, gl = 0;
        int ok = 1;
        while (at < tl) {
            size_t k = 1 + fkv_rng_next(&rng) % (round % 5 == 0 ? 3000 : 5);
            if (k > tl - at) k = tl - at;
            int last = at + k == tl;
            size_t n = fkv_utf8_hold_feed(&h, text + at, k, out, last);
            ok &= n <= FKV_UTF8_HOLD_OUT(k) && fkv_api_utf8_valid(out, n);
            memcpy(got + gl, out, n);
            gl += n;
            at += k;
        }
        CHECKF(ok, "round %d: an output was not valid UTF-8 or overran its room", round);
        CHECK(h.n_pend == 0);
        if (!garbage) CHECKF(gl == tl && !memcmp(got, text, tl), "round %d: %zu bytes in, %zu out", round, tl, gl);
    }
}

int main(void)
{
    test_split_characters();
    test_invalid_bytes();
    test_any_cut();
    return check_done();
}
