/* GGUF reader.  Every read goes through a cursor that knows how many bytes
 * are left, so a count or length is checked against the bytes present before
 * anything is allocated: a corrupt count cannot make us allocate gigabytes
 * or read past the buffer.  Messages name the file, the byte offset where the
 * field starts and the field. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct cursor {
    const uint8_t *b;
    size_t size, pos;
    const char *name;
    char *err;
    size_t errlen;
} cursor;

static fkv_status fail_at(cursor *c, fkv_status st, size_t at, const char *field, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        int n = snprintf(c->err, c->errlen, "%s: byte %zu: %s: ", c->name, at, field);
        if (n >= 0 && (size_t)n < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return st;
}

static size_t left(const cursor *c) { return c->size - c->pos; }

static fkv_status need(cursor *c, size_t n, const char *field)
{
    if (left(c) < n)
        return fail_at(c, FKV_EPARSE, c->pos, field, "truncated: needs %zu bytes, %zu left", n, left(c));
    return FKV_OK;
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static fkv_status rd(cursor *c, size_t n, uint64_t *v, const char *field)
{
    fkv_status st = need(c, n, field);
    if (st) return st;
    *v = le(c->b + c->pos, n);
    c->pos += n;
    return FKV_OK;
}

/* String: u64 length + bytes; returns a NUL-terminated copy. */
static fkv_status rd_str(cursor *c, char **out, uint64_t *len_out, const char *field)
{
    size_t at = c->pos;
    uint64_t len;
    fkv_status st = rd(c, 8, &len, field);
    if (st) return st;
    if (len > left(c)) {
        c->pos = at;
        return fail_at(c, FKV_EPARSE, at, field, "string length %llu exceeds the %zu bytes left",
                       (unsigned long long)len, left(c) - 8);
    }
    char *s = malloc((size_t)len + 1);
    if (!s) return fail_at(c, FKV_ENOMEM, at, field, "out of memory");
    memcpy(s, c->b + c->pos, (size_t)len);
    s[len] = 0;
    c->pos += (size_t)len;
    *out = s;
    if (len_out) *len_out = len;
    return FKV_OK;
}

static const char *const type_names[FKV_GGUF_N_TYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *fkv_gguf_type_name(fkv_gguf_type t)
{
    return (unsigned)t < FKV_GGUF_N_TYPES ? type_names[t] : "unknown";
}

const char *fkv_ggml_type_name(uint32_t t)
{
    /* ggml's type ids (ggml.h); f32, f16, q4_0 and q8_0 are loadable here */
    static const char *const names[] = {"f32",  "f16",  "q4_0", "q4_1", "q4_2", "q4_3", "q5_0", "q5_1",
                                        "q8_0", "q8_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"};
    if (t < sizeof names / sizeof names[0]) return names[t];
    if (t == 30) return "bf16";
    return "an unknown type";
}

uint64_t fkv_ggml_nbytes(uint32_t type, uint64_t n)
{
    switch (type) {
    case FKV_GGML_F32: return n * 4;
    case FKV_GGML_F16: return n * 2;
    case FKV_GGML_Q8_0: return n / FKV_GGML_QK * (2 + FKV_GGML_QK);
    case FKV_GGML_Q4_0: return n / FKV_GGML_QK * (2 + FKV_GGML_QK / 2);
    default: return 0;
    }
}

size_t fkv_gguf_type_size(fkv_gguf_type t)
{
    switch (t) {
    case FKV_GGUF_U8: case FKV_GGUF_I8: case FKV_GGUF_BOOL: return 1;
    case FKV_GGUF_U16: case FKV_GGUF_I16: return 2;
    case FKV_GGUF_U32: case FKV_GGUF_I32: case FKV_GGUF_F32: return 4;
    case FKV_GGUF_U64: case FKV_GGUF_I64: case FKV_GGUF_F64: return 8;
    default: return 0;
    }
}

/* Widens a little-endian scalar of type t at p. */
static void widen(fkv_gguf_kv *kv, fkv_gguf_type t, const uint8_t *p)
{
    uint64_t raw = le(p, fkv_gguf_type_size(t));
    switch (t) {
    case FKV_GGUF_I8: kv->v.i = (int8_t)raw; break;
    case FKV_GGUF_I16: kv->v.i = (int16_t)raw; break;
    case FKV_GGUF_I32: kv->v.i = (int32_t)raw; break;
    case FKV_GGUF_I64: kv->v.i = (int64_t)raw; break;
    case FKV_GGUF_F32: {
        uint32_t b = (uint32_t)raw;
        float f;
        memcpy(&f, &b, 4);
        kv->v.f = f;
        break;
    }
    case FKV_GGUF_F64: memcpy(&kv->v.f, &raw, 8); break;
    default: kv->v.u = raw; break;
    }
}

static fkv_status rd_value(cursor *c, fkv_gguf_kv *kv, const char *field)
{
    size_t at = c->pos;
    fkv_gguf_type t = kv->type;
    if (t == FKV_GGUF_STRING) return rd_str(c, &kv->str, &kv->len, field);
    if (t != FKV_GGUF_ARRAY) {
        size_t sz = fkv_gguf_type_size(t);
        fkv_status st = need(c, sz, field);
        if (st) return st;
        if (t == FKV_GGUF_BOOL && c->b[c->pos] > 1)
            return fail_at(c, FKV_EPARSE, at, field, "bool is %u, not 0 or 1", c->b[c->pos]);
        widen(kv, t, c->b + c->pos);
        c->pos += sz;
        return FKV_OK;
    }
    uint64_t et, n;
    fkv_status st = rd(c, 4, &et, field);
    if (st) return st;
    if (et >= FKV_GGUF_N_TYPES)
        return fail_at(c, FKV_EPARSE, at, field, "array element type %llu is not a GGUF type",
                       (unsigned long long)et);
    if (et == FKV_GGUF_ARRAY)
        return fail_at(c, FKV_EUNSUPPORTED, at, field, "nested arrays are not supported");
    kv->arr_type = (fkv_gguf_type)et;
    size_t at_n = c->pos;
    if ((st = rd(c, 8, &n, field))) return st;
    if (et == FKV_GGUF_STRING) {
        /* each string takes at least its 8-byte length */
        if (n > left(c) / 8)
            return fail_at(c, FKV_EPARSE, at_n, field, "array of %llu strings cannot fit in the %zu bytes left",
                           (unsigned long long)n, left(c));
        kv->strs = calloc(n ? (size_t)n : 1, sizeof *kv->strs);
        kv->str_lens = calloc(n ? (size_t)n : 1, sizeof *kv->str_lens);
        if (!kv->strs || !kv->str_lens) return fail_at(c, FKV_ENOMEM, at, field, "out of memory");
        kv->n = n; /* set first: the free path walks strs[0..n) and calloc zeroed them */
        for (uint64_t i = 0; i < n; i++) {
            char sub[200];
            snprintf(sub, sizeof sub, "%s[%llu]", field, (unsigned long long)i);
            if ((st = rd_str(c, &kv->strs[i], &kv->str_lens[i], sub))) return st;
        }
        return FKV_OK;
    }
    size_t es = fkv_gguf_type_size(kv->arr_type);
    if (n > left(c) / es)
        return fail_at(c, FKV_EPARSE, at_n, field, "array of %llu %s needs %llu bytes, %zu left",
                       (unsigned long long)n, fkv_gguf_type_name(kv->arr_type),
                       (unsigned long long)(n > UINT64_MAX / es ? UINT64_MAX : n * es), left(c));
    if (kv->arr_type == FKV_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (c->b[c->pos + i] > 1)
                return fail_at(c, FKV_EPARSE, c->pos + (size_t)i, field, "bool element %llu is %u",
                               (unsigned long long)i, c->b[c->pos + i]);
    kv->n = n;
    kv->raw = c->b + c->pos;
    c->pos += (size_t)(n * es);
    return FKV_OK;
}

void fkv_gguf_free(fkv_gguf *g)
{
    if (!g) return;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        fkv_gguf_kv *kv = &g->kv[i];
        free(kv->key);
        free(kv->str);
        if (kv->strs)
            for (uint64_t j = 0; j < kv->n; j++) free(kv->strs[j]);
        free(kv->strs);
        free(kv->str_lens);
    }
    free(g->kv);
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    if (g->map) {
        if (g->map_is_mmap)
            munmap(g->map, g->map_len);
        else
            free(g->map);
    }
    free(g);
}

static fkv_status parse_kvs(cursor *c, fkv_gguf *g)
{
    fkv_status st;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        fkv_gguf_kv *kv = &g->kv[i];
        char field[160];
        snprintf(field, sizeof field, "kv[%llu] key", (unsigned long long)i);
        size_t at = c->pos;
        if ((st = rd_str(c, &kv->key, NULL, field))) return st;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key))
                return fail_at(c, FKV_EPARSE, at, field, "duplicate key '%s'", kv->key);
        snprintf(field, sizeof field, "kv[%llu] '%.100s' type", (unsigned long long)i, kv->key);
        uint64_t t;
        at = c->pos;
        if ((st = rd(c, 4, &t, field))) return st;
        if (t >= FKV_GGUF_N_TYPES)
            return fail_at(c, FKV_EPARSE, at, field, "%llu is not a GGUF value type", (unsigned long long)t);
        kv->type = (fkv_gguf_type)t;
        snprintf(field, sizeof field, "kv[%llu] '%.100s' value", (unsigned long long)i, kv->key);
        if ((st = rd_value(c, kv, field))) return st;
    }
    const fkv_gguf_kv *al = fkv_gguf_find(g, "general.alignment");
    g->alignment = FKV_GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != FKV_GGUF_U32)
            return fail_at(c, FKV_EPARSE, 0, "general.alignment", "type is %s, must be u32",
                           fkv_gguf_type_name(al->type));
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)))
            return fail_at(c, FKV_EPARSE, 0, "general.alignment", "%llu is not a power of two",
                           (unsigned long long)al->v.u);
        g->alignment = (uint32_t)al->v.u;
    }
    return FKV_OK;
}

static fkv_status parse_tensor_infos(cursor *c, fkv_gguf *g)
{
    fkv_status st;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        fkv_gguf_tensor *t = &g->tensors[i];
        char field[160];
        snprintf(field, sizeof field, "tensor[%llu] name", (unsigned long long)i);
        size_t at = c->pos;
        if ((st = rd_str(c, &t->name, NULL, field))) return st;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->tensors[j].name, t->name))
                return fail_at(c, FKV_EPARSE, at, field, "duplicate tensor '%s'", t->name);
        snprintf(field, sizeof field, "tensor '%.100s' n_dims", t->name);
        uint64_t v;
        at = c->pos;
        if ((st = rd(c, 4, &v, field))) return st;
        if (v < 1 || v > FKV_GGUF_MAX_DIMS)
            return fail_at(c, FKV_EPARSE, at, field, "%llu dims (1..%d allowed)", (unsigned long long)v,
                           FKV_GGUF_MAX_DIMS);
        t->n_dims = (uint32_t)v;
        t->n_elements = 1;
        for (uint32_t d = 0; d < FKV_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            snprintf(field, sizeof field, "tensor '%.100s' ne[%u]", t->name, d);
            at = c->pos;
            if ((st = rd(c, 8, &t->ne[d], field))) return st;
            /* no tensor can hold more elements than the file has bytes */
            if (t->ne[d] == 0 || t->ne[d] > c->size || t->n_elements > c->size / t->ne[d])
                return fail_at(c, FKV_EPARSE, at, field, "dimension %llu is zero or too large for the file",
                               (unsigned long long)t->ne[d]);
            t->n_elements *= t->ne[d];
        }
        snprintf(field, sizeof field, "tensor '%.100s' type", t->name);
        at = c->pos;
        if ((st = rd(c, 4, &v, field))) return st;
        if (v != FKV_GGML_F32 && v != FKV_GGML_F16 && v != FKV_GGML_Q8_0 && v != FKV_GGML_Q4_0)
            return fail_at(c, FKV_EUNSUPPORTED, at, field,
                           "ggml type %llu (%s) is not supported (f32, f16, q8_0, q4_0)", (unsigned long long)v,
                           fkv_ggml_type_name((uint32_t)v));
        if ((v == FKV_GGML_Q8_0 || v == FKV_GGML_Q4_0) && t->ne[0] % FKV_GGML_QK)
            return fail_at(c, FKV_EPARSE, at, field, "%s rows of %llu elements are not whole 32-element blocks",
                           fkv_ggml_type_name((uint32_t)v), (unsigned long long)t->ne[0]);
        t->type = (uint32_t)v;
        t->n_bytes = fkv_ggml_nbytes(t->type, t->n_elements); /* <= 4 * size: no overflow */
        snprintf(field, sizeof field, "tensor '%.100s' offset", t->name);
        if ((st = rd(c, 8, &t->offset, field))) return st;
    }
    return FKV_OK;
}

/* Tensors lie in order, each at the previous one's end rounded up to the
 * alignment (what llama.cpp's reader requires and its writers produce). */
static fkv_status place_tensors(cursor *c, fkv_gguf *g, size_t infos_end)
{
    uint64_t a = g->alignment;
    uint64_t start = ((uint64_t)infos_end + a - 1) / a * a;
    g->data_offset = start;
    if (g->n_tensors && start > c->size)
        return fail_at(c, FKV_EPARSE, infos_end, "data section", "starts at %llu, past the end of the file (%zu bytes)",
                       (unsigned long long)start, c->size);
    uint64_t avail = start <= c->size ? c->size - start : 0;
    uint64_t expect = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        fkv_gguf_tensor *t = &g->tensors[i];
        char field[160];
        snprintf(field, sizeof field, "tensor '%.100s' offset", t->name);
        if (t->offset != expect)
            return fail_at(c, FKV_EPARSE, infos_end, field, "is %llu, expected %llu (tensors are packed in order, %u-byte aligned)",
                           (unsigned long long)t->offset, (unsigned long long)expect, g->alignment);
        if (t->offset > avail || t->n_bytes > avail - t->offset)
            return fail_at(c, FKV_EPARSE, (size_t)(start + t->offset), field,
                           "data [%llu, +%llu) runs past the end of the file (%llu data bytes)",
                           (unsigned long long)t->offset, (unsigned long long)t->n_bytes, (unsigned long long)avail);
        t->data = c->b + start + t->offset;
        expect = (t->offset + t->n_bytes + a - 1) / a * a; /* both < size: no overflow */
    }
    return FKV_OK;
}

fkv_status fkv_gguf_parse(const void *buf, size_t size, const char *name, fkv_gguf **out, char *err,
                          size_t errlen)
{
    cursor c = {buf, size, 0, name ? name : "gguf", err, errlen};
    if (err && errlen) err[0] = 0;
    *out = NULL;
    if (!buf && size) return fail_at(&c, FKV_EINVAL, 0, "buffer", "NULL");
    fkv_gguf *g = calloc(1, sizeof *g);
    if (!g) return FKV_ENOMEM;
    g->buf = buf;
    g->size = size;
    fkv_status st;
    uint64_t magic, ver;
    if ((st = rd(&c, 4, &magic, "magic"))) goto fail;
    if (magic != 0x46554747u) {
        st = fail_at(&c, FKV_EPARSE, 0, "magic", "not a GGUF file (first bytes are not \"GGUF\")");
        goto fail;
    }
    if ((st = rd(&c, 4, &ver, "version"))) goto fail;
    if (ver != 2 && ver != 3) {
        st = fail_at(&c, FKV_EUNSUPPORTED, 4, "version",
                     "%llu is not supported (2 and 3, little-endian, are)", (unsigned long long)ver);
        goto fail;
    }
    g->version = (uint32_t)ver;
    if ((st = rd(&c, 8, &g->n_tensors, "tensor count"))) goto fail;
    if ((st = rd(&c, 8, &g->n_kv, "metadata kv count"))) goto fail;
    /* A kv takes >= 12 bytes (key length, type) + 1, a tensor info >= 24:
     * bound the counts by the bytes left before allocating. */
    if (g->n_kv > left(&c) / 13) {
        st = fail_at(&c, FKV_EPARSE, 16, "metadata kv count", "%llu entries cannot fit in %zu bytes",
                     (unsigned long long)g->n_kv, left(&c));
        goto fail;
    }
    if (g->n_tensors > left(&c) / 24) {
        st = fail_at(&c, FKV_EPARSE, 8, "tensor count", "%llu tensors cannot fit in %zu bytes",
                     (unsigned long long)g->n_tensors, left(&c));
        goto fail;
    }
    g->kv = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        st = FKV_ENOMEM;
        goto fail;
    }
    if ((st = parse_kvs(&c, g))) goto fail;
    if ((st = parse_tensor_infos(&c, g))) goto fail;
    if ((st = place_tensors(&c, g, c.pos))) goto fail;
    *out = g;
    return FKV_OK;
fail:
    fkv_gguf_free(g);
    return st;
}

fkv_status fkv_gguf_load(const char *path, fkv_gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (err) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return errno == ENOENT ? FKV_ENOENT : FKV_EIO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (err) snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return FKV_EIO;
    }
    size_t len = (size_t)sb.st_size;
    void *map = NULL;
    int is_mmap = 0;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            is_mmap = 1;
        } else { /* e.g. a file system without mmap: read it */
            map = malloc(len);
            size_t got = 0;
            while (map && got < len) {
                ssize_t r = read(fd, (char *)map + got, len - got);
                if (r <= 0) break;
                got += (size_t)r;
            }
            if (!map || got != len) {
                free(map);
                close(fd);
                if (err) snprintf(err, errlen, "%s: read failed", path);
                return FKV_EIO;
            }
        }
    }
    close(fd);
    fkv_gguf *g;
    fkv_status st = fkv_gguf_parse(map, len, path, &g, err, errlen);
    if (st) {
        if (is_mmap)
            munmap(map, len);
        else
            free(map);
        return st;
    }
    g->map = map;
    g->map_len = len;
    g->map_is_mmap = is_mmap;
    *out = g;
    return FKV_OK;
}
