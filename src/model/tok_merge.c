/* The merge loop both tokenizers share, and the SentencePiece encoder.
 *
 * Symbols start as single characters and form a linked list over the text;
 * adjacent symbols are always contiguous bytes.  Candidate pairs sit in a
 * max-heap keyed (score, then leftmost); a popped pair is applied only if
 * both sides are unchanged since it was pushed (lazy invalidation), so the
 * loop is O(n log n) and equals "repeatedly merge the best adjacent pair,
 * leftmost on ties". */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "model/tok_merge.h"

#define NONE SIZE_MAX

typedef struct cand {
    double score;
    size_t left, right, size;
} cand;

typedef struct heap {
    cand *a;
    size_t n, cap;
} heap;

static int better(const cand *x, const cand *y)
{
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static int heap_push(heap *h, cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        cand *a = realloc(h->a, cap * sizeof *a);
        if (!a) return -1;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i && better(&c, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = c;
    return 0;
}

static cand heap_pop(heap *h)
{
    cand top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && better(&h->a[c + 1], &h->a[c])) c++;
        if (!better(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

static int try_pair(heap *h, const char *text, const fkv__sym *s, size_t l, fkv__pair_fn fn, const void *ctx)
{
    if (l == NONE || s[l].next == NONE) return 0;
    size_t r = s[l].next;
    double score;
    if (!fn(ctx, text + s[l].start, s[l].len, s[r].len, &score)) return 0;
    cand c = {score, l, r, s[l].len + s[r].len};
    return heap_push(h, c);
}

fkv_status fkv__merge(const char *text, fkv__sym *s, size_t n, fkv__pair_fn fn, const void *ctx)
{
    heap h = {0};
    for (size_t i = 0; i + 1 < n; i++)
        if (try_pair(&h, text, s, i, fn, ctx)) goto nomem;
    while (h.n) {
        cand c = heap_pop(&h);
        if (!s[c.left].len || !s[c.right].len || s[c.left].next != c.right || s[c.left].len + s[c.right].len != c.size)
            continue; /* stale */
        s[c.left].len += s[c.right].len;
        s[c.left].next = s[c.right].next;
        if (s[c.right].next != NONE) s[s[c.right].next].prev = c.left;
        s[c.right].len = 0;
        if (try_pair(&h, text, s, s[c.left].prev, fn, ctx) || try_pair(&h, text, s, c.left, fn, ctx)) goto nomem;
    }
    free(h.a);
    return FKV_OK;
nomem:
    free(h.a);
    return FKV_ENOMEM;
}

fkv__sym *fkv__split_chars(const char *text, size_t len, size_t *n_out)
{
    fkv__sym *s = malloc((len ? len : 1) * sizeof *s);
    if (!s) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = fkv__utf8_len((unsigned char)text[i]);
        if (cl > len - i) cl = len - i;
        s[n].start = i;
        s[n].len = cl;
        s[n].prev = n ? n - 1 : NONE;
        s[n].next = NONE;
        if (n) s[n - 1].next = n;
        n++;
        i += cl;
    }
    *n_out = n;
    return s;
}

/* ---------------------------------------------------------------- SentencePiece */

static int spm_pair(const void *ctx, const char *a, size_t la, size_t lb, double *score)
{
    const fkv_tokenizer *t = ctx;
    int32_t id = fkv__strmap_get(t->vocab, a, la + lb);
    if (id < 0) return 0;
    *score = t->score[id];
    return 1;
}

fkv_status fkv__spm_encode(const fkv_tokenizer *t, const char *text, size_t len, int space_prefix, fkv__ids *out)
{
    /* normalise: optional leading space, ' ' -> U+2581 (3 bytes) */
    if (len > (SIZE_MAX - 3) / 3) return FKV_EINVAL;
    char *s = malloc(3 * len + 3);
    if (!s) return FKV_ENOMEM;
    size_t k = 0;
    size_t pre = space_prefix != 0;
    for (size_t i = 0; i < len + pre; i++) {
        char c = (pre && i == 0) ? ' ' : text[i - pre];
        if (c == ' ') {
            memcpy(s + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            s[k++] = c;
        }
    }
    size_t n;
    fkv__sym *sym = fkv__split_chars(s, k, &n);
    fkv_status st = sym ? fkv__merge(s, sym, n, spm_pair, t) : FKV_ENOMEM;
    for (size_t i = 0; !st && n && i != NONE; i = sym[i].next) {
        int32_t id = fkv__strmap_get(t->vocab, s + sym[i].start, sym[i].len);
        if (id >= 0) {
            if (fkv__ids_push(out, id)) st = FKV_ENOMEM;
            continue;
        }
        /* byte fallback, else <unk> */
        for (size_t b = 0; b < sym[i].len && !st; b++) {
            int32_t bt = t->byte_tok[(unsigned char)s[sym[i].start + b]];
            if (bt < 0 && b > 0) continue; /* one <unk> per character */
            if (bt < 0) bt = t->unk;
            if (bt >= 0 && fkv__ids_push(out, bt)) st = FKV_ENOMEM;
        }
    }
    free(sym);
    free(s);
    return st;
}
