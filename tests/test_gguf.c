/* GGUF writer -> reader round trip of every value type and of f32/f16
 * tensors; every truncation and a list of corrupted fields must give a
 * clean FKV_EPARSE / FKV_EUNSUPPORTED naming the byte and field; random
 * mutations must never crash (run under ASan: the parser reads from an
 * exact-size heap copy). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf.h"
#include "model/half.h"
#include "model/sampler.h"

static float f32s[3 * 5 * 2];
static uint16_t f16s[7];
static float vec4d[2 * 3 * 2 * 2];

static uint8_t *build(uint32_t alignment, size_t *len)
{
    fkv_gguf_writer *w = fkv_gguf_writer_new(alignment);
    REQUIRE(w);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 3.25f;
    uint64_t u64 = 0xfedcba9876543210ull;
    int64_t i64 = -1234567890123ll;
    double f64 = -2.5e300;
    uint8_t b = 1;
    REQUIRE(!fkv_gguf_w_kv(w, "k.u8", FKV_GGUF_U8, &u8));
    REQUIRE(!fkv_gguf_w_kv(w, "k.i8", FKV_GGUF_I8, &i8));
    REQUIRE(!fkv_gguf_w_kv(w, "k.u16", FKV_GGUF_U16, &u16));
    REQUIRE(!fkv_gguf_w_kv(w, "k.i16", FKV_GGUF_I16, &i16));
    REQUIRE(!fkv_gguf_w_kv(w, "k.u32", FKV_GGUF_U32, &u32));
    REQUIRE(!fkv_gguf_w_kv(w, "k.i32", FKV_GGUF_I32, &i32));
    REQUIRE(!fkv_gguf_w_kv(w, "k.f32", FKV_GGUF_F32, &f32));
    REQUIRE(!fkv_gguf_w_kv(w, "k.bool", FKV_GGUF_BOOL, &b));
    REQUIRE(!fkv_gguf_w_strn(w, "k.str", "a\0b\xe2\x96\x81", 6));
    REQUIRE(!fkv_gguf_w_kv(w, "k.u64", FKV_GGUF_U64, &u64));
    REQUIRE(!fkv_gguf_w_kv(w, "k.i64", FKV_GGUF_I64, &i64));
    REQUIRE(!fkv_gguf_w_kv(w, "k.f64", FKV_GGUF_F64, &f64));
    int16_t ai16[4] = {-1, 2, -32768, 32767};
    double af64[2] = {1.5, -0.125};
    uint8_t abool[3] = {1, 0, 1};
    REQUIRE(!fkv_gguf_w_arr(w, "a.i16", FKV_GGUF_I16, 4, ai16));
    REQUIRE(!fkv_gguf_w_arr(w, "a.f64", FKV_GGUF_F64, 2, af64));
    REQUIRE(!fkv_gguf_w_arr(w, "a.bool", FKV_GGUF_BOOL, 3, abool));
    REQUIRE(!fkv_gguf_w_arr(w, "a.empty", FKV_GGUF_U32, 0, NULL));
    const char *strs[3] = {"x", "", "hello"};
    REQUIRE(!fkv_gguf_w_arr_str(w, "a.str", 3, strs, NULL));
    for (size_t i = 0; i < sizeof f32s / sizeof f32s[0]; i++) f32s[i] = (float)i * 0.5f - 3;
    for (size_t i = 0; i < 7; i++) f16s[i] = fkv_f2h((float)i / 4 - 1);
    for (size_t i = 0; i < sizeof vec4d / sizeof vec4d[0]; i++) vec4d[i] = (float)(i * i);
    uint64_t ne2[2] = {5, 6}, ne1[1] = {7}, ne4[4] = {2, 3, 2, 2};
    REQUIRE(!fkv_gguf_w_tensor(w, "t.mat", FKV_GGML_F32, 2, ne2, f32s));
    REQUIRE(!fkv_gguf_w_tensor(w, "t.half", FKV_GGML_F16, 1, ne1, f16s));
    REQUIRE(!fkv_gguf_w_tensor(w, "t.4d", FKV_GGML_F32, 4, ne4, vec4d));
    uint8_t *buf;
    REQUIRE(!fkv_gguf_w_to_mem(w, &buf, len));
    fkv_gguf_writer_free(w);
    return buf;
}

static void check_round_trip(const fkv_gguf *g, uint32_t alignment)
{
    CHECK(g->version == 3);
    CHECK(g->alignment == alignment);
    CHECK(g->n_tensors == 3);
    CHECK(g->n_kv == 17 + (alignment != 32));
    const fkv_gguf_kv *kv;
    CHECK((kv = fkv_gguf_find(g, "k.u8")) && kv->type == FKV_GGUF_U8 && kv->v.u == 200);
    CHECK((kv = fkv_gguf_find(g, "k.i8")) && kv->type == FKV_GGUF_I8 && kv->v.i == -100);
    CHECK((kv = fkv_gguf_find(g, "k.u16")) && kv->v.u == 60000);
    CHECK((kv = fkv_gguf_find(g, "k.i16")) && kv->v.i == -30000);
    CHECK((kv = fkv_gguf_find(g, "k.u32")) && kv->v.u == 4000000000u);
    CHECK((kv = fkv_gguf_find(g, "k.i32")) && kv->v.i == -2000000000);
    CHECK((kv = fkv_gguf_find(g, "k.f32")) && kv->type == FKV_GGUF_F32 && kv->v.f == 3.25);
    CHECK((kv = fkv_gguf_find(g, "k.bool")) && kv->type == FKV_GGUF_BOOL && kv->v.u == 1);
    CHECK((kv = fkv_gguf_find(g, "k.str")) && kv->len == 6 && !memcmp(kv->str, "a\0b\xe2\x96\x81", 7));
    CHECK((kv = fkv_gguf_find(g, "k.u64")) && kv->v.u == 0xfedcba9876543210ull);
    CHECK((kv = fkv_gguf_find(g, "k.i64")) && kv->v.i == -1234567890123ll);
    CHECK((kv = fkv_gguf_find(g, "k.f64")) && kv->v.f == -2.5e300);
    CHECK((kv = fkv_gguf_find(g, "a.i16")) && kv->type == FKV_GGUF_ARRAY && kv->arr_type == FKV_GGUF_I16 &&
          kv->n == 4 && fkv_gguf_arr_i64(kv, 0) == -1 && fkv_gguf_arr_i64(kv, 2) == -32768 &&
          fkv_gguf_arr_f64(kv, 3) == 32767);
    CHECK((kv = fkv_gguf_find(g, "a.f64")) && kv->n == 2 && fkv_gguf_arr_f64(kv, 1) == -0.125);
    CHECK((kv = fkv_gguf_find(g, "a.bool")) && kv->n == 3 && fkv_gguf_arr_i64(kv, 1) == 0 &&
          fkv_gguf_arr_i64(kv, 2) == 1);
    CHECK((kv = fkv_gguf_find(g, "a.empty")) && kv->n == 0);
    CHECK((kv = fkv_gguf_find(g, "a.str")) && kv->arr_type == FKV_GGUF_STRING && kv->n == 3 &&
          !strcmp(kv->strs[0], "x") && kv->str_lens[1] == 0 && !strcmp(kv->strs[2], "hello"));
    CHECK(!fkv_gguf_find(g, "k.missing"));
    uint64_t u;
    double d;
    const char *s;
    char err[256];
    CHECK(fkv_gguf_get_u64(g, "k.u16", &u, err, sizeof err) == FKV_OK && u == 60000);
    CHECK(fkv_gguf_get_u64(g, "k.i8", &u, err, sizeof err) == FKV_EPARSE && strstr(err, "k.i8"));
    CHECK(fkv_gguf_get_f64(g, "k.f32", &d, err, sizeof err) == FKV_OK && d == 3.25);
    CHECK(fkv_gguf_get_str(g, "k.u8", &s, err, sizeof err) == FKV_EPARSE);
    CHECK(fkv_gguf_get_str(g, "nope", &s, err, sizeof err) == FKV_ENOENT);
    const fkv_gguf_tensor *t = fkv_gguf_tensor_find(g, "t.mat");
    REQUIRE(t);
    CHECK(t->n_dims == 2 && t->ne[0] == 5 && t->ne[1] == 6 && t->type == FKV_GGML_F32 && t->n_bytes == 120);
    CHECK(!memcmp(t->data, f32s, 120));
    t = fkv_gguf_tensor_find(g, "t.half");
    REQUIRE(t);
    CHECK(t->n_dims == 1 && t->type == FKV_GGML_F16 && t->n_elements == 7 && !memcmp(t->data, f16s, 14));
    t = fkv_gguf_tensor_find(g, "t.4d");
    REQUIRE(t);
    CHECK(t->n_dims == 4 && t->ne[3] == 2 && t->n_elements == 24 && !memcmp(t->data, vec4d, sizeof vec4d));
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        CHECK(g->tensors[i].offset % alignment == 0);
        CHECK(((const uint8_t *)g->tensors[i].data - g->buf) % alignment == 0);
    }
    CHECK(g->data_offset % alignment == 0);
}

static fkv_status parse_copy(const uint8_t *buf, size_t len, char *err, size_t errlen, fkv_gguf **out)
{
    /* exact-size copy: any read past len is a heap overflow ASan reports */
    uint8_t *copy = malloc(len ? len : 1);
    REQUIRE(copy);
    memcpy(copy, buf, len);
    fkv_gguf *g = NULL;
    fkv_status st = fkv_gguf_parse(copy, len, "mem.gguf", &g, err, errlen);
    if (!st) {
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const uint8_t *d = g->tensors[i].data;
            CHECK(d >= copy && d + g->tensors[i].n_bytes <= copy + len);
        }
    }
    if (out && !st) {
        /* keep the copy alive with the result: map owns it */
        g->map = copy;
        g->map_len = len;
        g->map_is_mmap = 0;
        *out = g;
        return st;
    }
    fkv_gguf_free(g);
    free(copy);
    return st;
}

static void test_truncations(const uint8_t *buf, size_t len)
{
    int bad = 0;
    for (size_t cut = 0; cut < len; cut++) {
        char err[300] = "";
        fkv_status st = parse_copy(buf, cut, err, sizeof err, NULL);
        if (st != FKV_EPARSE || !strstr(err, "mem.gguf: byte ")) {
            if (bad++ < 5) fprintf(stderr, "cut %zu: status %d, '%s'\n", cut, st, err);
        }
    }
    CHECKF(bad == 0, "%d of %zu truncations were not a clean parse error", bad, len);
}

/* position of the first occurrence of a key string's bytes */
static size_t find(const uint8_t *buf, size_t len, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(buf + i, s, n)) return i;
    REQUIRE(0);
    return 0;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct corruption {
    const char *what;
    const char *anchor; /* bytes to find; the patch is relative to their start */
    long rel;           /* offset of the patched field from the anchor */
    int width;
    uint64_t value;
    fkv_status expect;
    const char *msg; /* must appear in the error */
} corruption;

static void test_corruptions(const uint8_t *buf, size_t len)
{
    const corruption cs[] = {
        {"magic", "GGUF", 0, 4, 0x46554746, FKV_EPARSE, "magic"},
        {"version", "GGUF", 4, 4, 1, FKV_EUNSUPPORTED, "version"},
        {"big-endian version", "GGUF", 4, 4, 0x03000000, FKV_EUNSUPPORTED, "version"},
        {"tensor count", "GGUF", 8, 8, 1ull << 40, FKV_EPARSE, "tensor count"},
        {"kv count", "GGUF", 16, 8, UINT64_MAX, FKV_EPARSE, "metadata kv count"},
        {"key length", "k.u8", -8, 8, 1ull << 62, FKV_EPARSE, "kv[1] key"},
        {"value type", "k.u16", 5, 4, 13, FKV_EPARSE, "'k.u16' type"},
        {"bool value", "k.bool", 10, 1, 2, FKV_EPARSE, "'k.bool' value"},
        {"string length", "k.str", 9, 8, 1ull << 50, FKV_EPARSE, "'k.str' value"},
        {"array count", "a.i16", 13, 8, 1ull << 61, FKV_EPARSE, "'a.i16' value"},
        {"array of strings count", "a.str", 13, 8, 1ull << 61, FKV_EPARSE, "'a.str' value"},
        {"array element type", "a.i16", 9, 4, 99, FKV_EPARSE, "'a.i16' value"},
        {"nested array", "a.i16", 9, 4, FKV_GGUF_ARRAY, FKV_EUNSUPPORTED, "nested"},
        {"duplicate key", "k.i8", 2, 1, 'u', FKV_EPARSE, "duplicate key"},
        {"n_dims 0", "t.mat", 5, 4, 0, FKV_EPARSE, "'t.mat' n_dims"},
        {"n_dims 5", "t.mat", 5, 4, 5, FKV_EPARSE, "'t.mat' n_dims"},
        {"dim 0", "t.mat", 9, 8, 0, FKV_EPARSE, "'t.mat' ne[0]"},
        {"dim overflow", "t.mat", 17, 8, 1ull << 63, FKV_EPARSE, "'t.mat' ne[1]"},
        {"data past the end", "t.mat", 17, 8, 100, FKV_EPARSE, "'t.mat' offset"},
        {"tensor type q4_1", "t.mat", 25, 4, 3, FKV_EUNSUPPORTED, "'t.mat' type"},
        {"tensor type unknown", "t.half", 18, 4, 1000, FKV_EUNSUPPORTED, "'t.half' type"},
        {"tensor offset misaligned", "t.half", 22, 8, 4, FKV_EPARSE, "'t.half' offset"},
        {"tensor offset past end", "t.4d", 44, 8, 1ull << 40, FKV_EPARSE, "'t.4d' offset"},
        {"alignment not a power of two", "general.alignment", 21, 4, 48, FKV_EPARSE, "general.alignment"},
        {"alignment type", "general.alignment", 17, 4, FKV_GGUF_I32, FKV_EPARSE, "general.alignment"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        uint8_t *c = malloc(len);
        REQUIRE(c);
        memcpy(c, buf, len);
        size_t at = find(c, len, cs[i].anchor) + (size_t)cs[i].rel;
        REQUIRE(at + (size_t)cs[i].width <= len);
        put_le(c + at, cs[i].value, cs[i].width);
        char err[300] = "";
        fkv_status st = parse_copy(c, len, err, sizeof err, NULL);
        CHECKF(st == cs[i].expect && strstr(err, cs[i].msg) && strstr(err, "mem.gguf: byte "),
               "%s: status %d (want %d), '%s' (want '%s')", cs[i].what, st, cs[i].expect, err, cs[i].msg);
        free(c);
    }
}

static void test_mutations(const uint8_t *buf, size_t len)
{
    fkv_rng rng;
    fkv_rng_seed(&rng, 7);
    int n = (int)(3000 * check_scale()), ok = 0;
    uint8_t *c = malloc(len);
    REQUIRE(c);
    for (int it = 0; it < n; it++) {
        memcpy(c, buf, len);
        int flips = 1 + (int)(fkv_rng_next(&rng) % 8);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(fkv_rng_next(&rng) % len);
            uint64_t r = fkv_rng_next(&rng);
            c[at] = (r & 1) ? (uint8_t)(r >> 8) : (uint8_t)(c[at] ^ (1u << ((r >> 8) % 8)));
        }
        size_t cut = (fkv_rng_next(&rng) % 4 == 0) ? (size_t)(fkv_rng_next(&rng) % len) : len;
        char err[300] = "";
        fkv_status st = parse_copy(c, cut, err, sizeof err, NULL);
        if (st == FKV_OK) ok++;
        CHECKF(st == FKV_OK || st == FKV_EPARSE || st == FKV_EUNSUPPORTED, "mutation %d: status %d", it, st);
        if (st) CHECKF(strstr(err, "mem.gguf: byte ") != NULL, "mutation %d: message '%s'", it, err);
    }
    free(c);
    printf("mutations: %d of %d still parsed (payload bytes changed)\n", ok, n);
}

static void test_file(const uint8_t *buf, size_t len)
{
    char path[] = "/tmp/fkv_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, buf, len) == (ssize_t)len);
    close(fd);
    fkv_gguf *g;
    char err[300];
    CHECK(fkv_gguf_load(path, &g, err, sizeof err) == FKV_OK);
    if (g) {
        check_round_trip(g, 64);
        fkv_gguf_free(g);
    }
    /* truncated on disk: message names the path */
    REQUIRE(truncate(path, (off_t)(len - 3)) == 0);
    CHECK(fkv_gguf_load(path, &g, err, sizeof err) == FKV_EPARSE && strstr(err, path) && strstr(err, "byte "));
    unlink(path);
    CHECK(fkv_gguf_load(path, &g, err, sizeof err) == FKV_ENOENT && strstr(err, path));
}

int main(void)
{
    size_t len;
    uint8_t *buf = build(32, &len);
    fkv_gguf *g = NULL;
    char err[300];
    CHECK(parse_copy(buf, len, err, sizeof err, &g) == FKV_OK);
    if (g) {
        check_round_trip(g, 32);
        fkv_gguf_free(g);
    }
    test_truncations(buf, len);
    free(buf);

    buf = build(64, &len);
    g = NULL;
    CHECK(parse_copy(buf, len, err, sizeof err, &g) == FKV_OK);
    if (g) {
        check_round_trip(g, 64);
        fkv_gguf_free(g);
    }
    test_corruptions(buf, len);
    test_mutations(buf, len);
    test_file(buf, len);
    free(buf);

    /* an empty GGUF (no kv, no tensors) is valid; 23 bytes is not */
    fkv_gguf_writer *w = fkv_gguf_writer_new(32);
    uint8_t *e;
    size_t elen;
    REQUIRE(!fkv_gguf_w_to_mem(w, &e, &elen));
    fkv_gguf_writer_free(w);
    CHECK(elen == 32 && parse_copy(e, 24, err, sizeof err, NULL) == FKV_OK);
    CHECK(parse_copy(e, 23, err, sizeof err, NULL) == FKV_EPARSE);
    free(e);
    CHECK(fkv_gguf_writer_new(48) == NULL);

    /* float arrays read as integers saturate instead of overflowing (a
     * fuzzed token_type array of NaN once did) */
    w = fkv_gguf_writer_new(32);
    double odd[4] = {NAN, 1e300, -1e300, -2.9};
    REQUIRE(!fkv_gguf_w_arr(w, "odd", FKV_GGUF_F64, 4, odd));
    REQUIRE(!fkv_gguf_w_to_mem(w, &e, &elen));
    fkv_gguf_writer_free(w);
    fkv_gguf *og;
    REQUIRE(!fkv_gguf_parse(e, elen, "odd", &og, err, sizeof err));
    const fkv_gguf_kv *okv = fkv_gguf_find(og, "odd");
    CHECK(fkv_gguf_arr_i64(okv, 0) == 0 && fkv_gguf_arr_i64(okv, 1) == INT64_MAX &&
          fkv_gguf_arr_i64(okv, 2) == INT64_MIN && fkv_gguf_arr_i64(okv, 3) == -2);
    fkv_gguf_free(og);
    free(e);

    /* the writer does not police names; the reader rejects a repeated tensor */
    w = fkv_gguf_writer_new(32);
    uint64_t ne[1] = {2};
    float two[2] = {1, 2};
    REQUIRE(!fkv_gguf_w_tensor(w, "dup", FKV_GGML_F32, 1, ne, two));
    REQUIRE(!fkv_gguf_w_tensor(w, "dup", FKV_GGML_F32, 1, ne, two));
    REQUIRE(!fkv_gguf_w_to_mem(w, &e, &elen));
    fkv_gguf_writer_free(w);
    CHECK(parse_copy(e, elen, err, sizeof err, NULL) == FKV_EPARSE && strstr(err, "duplicate tensor 'dup'"));
    free(e);

    /* half conversion: exact for representable values, round to nearest even */
    CHECK(fkv_h2f(fkv_f2h(1.5f)) == 1.5f && fkv_h2f(fkv_f2h(-65504.0f)) == -65504.0f);
    CHECK(fkv_h2f(fkv_f2h(5.9604645e-8f)) == 5.9604645e-8f); /* smallest subnormal */
    CHECK(fkv_f2h(1.0f + 1.0f / 2048) == 0x3c00);            /* tie -> even */
    CHECK(fkv_f2h(1.0f + 3.0f / 2048) == 0x3c02);
    CHECK(fkv_f2h(1e6f) == 0x7c00);
    int mism = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        if (fkv_f2h(fkv_h2f((uint16_t)h)) != h) mism++;
    }
    CHECK(mism == 0);
    return check_done();
}
