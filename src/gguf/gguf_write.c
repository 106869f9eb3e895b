/* GGUF writer: metadata and tensor infos are serialised as they are added
 * (little-endian, whatever the host), tensor data is copied and laid out in
 * order at aligned offsets, as the reader expects. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

struct fkv_gguf_writer {
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    bytes kv, infos, data;
};

static int put(bytes *b, const void *src, size_t n)
{
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

static int put_le(bytes *b, uint64_t v, size_t n)
{
    uint8_t t[8];
    for (size_t i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    return put(b, t, n);
}

static int put_str(bytes *b, const char *s, uint64_t len)
{
    return put_le(b, len, 8) || put(b, s, (size_t)len);
}

fkv_gguf_writer *fkv_gguf_writer_new(uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1))) return NULL;
    fkv_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (alignment != FKV_GGUF_DEFAULT_ALIGNMENT && fkv_gguf_w_u32(w, "general.alignment", alignment)) {
        fkv_gguf_writer_free(w);
        return NULL;
    }
    return w;
}

void fkv_gguf_writer_free(fkv_gguf_writer *w)
{
    if (!w) return;
    free(w->kv.p);
    free(w->infos.p);
    free(w->data.p);
    free(w);
}

/* Appends the packed little-endian bytes of a scalar of type t read from val. */
static int put_scalar(bytes *b, fkv_gguf_type t, const void *val)
{
    size_t sz = fkv_gguf_type_size(t);
    if (sz != 1 && sz != 2 && sz != 4 && sz != 8) return -1;
    /* exactly sz bytes of val are read (a variable-length copy: gcc's
     * bounds check at -O3 cannot tie sz to the caller's type), then read
     * back as the typed value in host order */
    uint8_t raw[8] = {0};
    memcpy(raw, val, sz);
    uint64_t v = 0;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    switch (sz) {
    case 1: memcpy(&u8, raw, 1), v = u8; break;
    case 2: memcpy(&u16, raw, 2), v = u16; break;
    case 4: memcpy(&u32, raw, 4), v = u32; break;
    default: memcpy(&v, raw, 8); break;
    }
    return put_le(b, v, sz);
}

fkv_status fkv_gguf_w_kv(fkv_gguf_writer *w, const char *key, fkv_gguf_type type, const void *val)
{
    if (type == FKV_GGUF_STRING) {
        const char *s = *(const char *const *)val;
        return fkv_gguf_w_strn(w, key, s, strlen(s));
    }
    if (type == FKV_GGUF_ARRAY || !fkv_gguf_type_size(type)) return FKV_EINVAL;
    if (put_str(&w->kv, key, strlen(key)) || put_le(&w->kv, type, 4) || put_scalar(&w->kv, type, val))
        return FKV_ENOMEM;
    w->n_kv++;
    return FKV_OK;
}

fkv_status fkv_gguf_w_u32(fkv_gguf_writer *w, const char *key, uint32_t v)
{
    return fkv_gguf_w_kv(w, key, FKV_GGUF_U32, &v);
}

fkv_status fkv_gguf_w_f32(fkv_gguf_writer *w, const char *key, float v)
{
    return fkv_gguf_w_kv(w, key, FKV_GGUF_F32, &v);
}

fkv_status fkv_gguf_w_str(fkv_gguf_writer *w, const char *key, const char *s)
{
    return fkv_gguf_w_strn(w, key, s, strlen(s));
}

fkv_status fkv_gguf_w_strn(fkv_gguf_writer *w, const char *key, const char *s, uint64_t len)
{
    if (put_str(&w->kv, key, strlen(key)) || put_le(&w->kv, FKV_GGUF_STRING, 4) || put_str(&w->kv, s, len))
        return FKV_ENOMEM;
    w->n_kv++;
    return FKV_OK;
}

fkv_status fkv_gguf_w_arr(fkv_gguf_writer *w, const char *key, fkv_gguf_type et, uint64_t n, const void *data)
{
    size_t es = fkv_gguf_type_size(et);
    if (!es) return FKV_EINVAL;
    if (put_str(&w->kv, key, strlen(key)) || put_le(&w->kv, FKV_GGUF_ARRAY, 4) || put_le(&w->kv, et, 4) ||
        put_le(&w->kv, n, 8))
        return FKV_ENOMEM;
    const uint8_t *p = data;
    for (uint64_t i = 0; i < n; i++)
        if (put_scalar(&w->kv, et, p + i * es)) return FKV_ENOMEM;
    w->n_kv++;
    return FKV_OK;
}

fkv_status fkv_gguf_w_arr_str(fkv_gguf_writer *w, const char *key, uint64_t n, const char *const *strs,
                              const uint64_t *lens)
{
    if (put_str(&w->kv, key, strlen(key)) || put_le(&w->kv, FKV_GGUF_ARRAY, 4) ||
        put_le(&w->kv, FKV_GGUF_STRING, 4) || put_le(&w->kv, n, 8))
        return FKV_ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        if (put_str(&w->kv, strs[i], lens ? lens[i] : strlen(strs[i]))) return FKV_ENOMEM;
    w->n_kv++;
    return FKV_OK;
}

fkv_status fkv_gguf_w_tensor(fkv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                             const uint64_t *ne, const void *data)
{
    int block = type == FKV_GGML_Q8_0 || type == FKV_GGML_Q4_0;
    if ((type != FKV_GGML_F32 && type != FKV_GGML_F16 && !block) || n_dims < 1 || n_dims > FKV_GGUF_MAX_DIMS)
        return FKV_EINVAL;
    if (block && ne[0] % FKV_GGML_QK) return FKV_EINVAL;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (!ne[d] || nel > UINT64_MAX / 4 / ne[d]) return FKV_EINVAL;
        nel *= ne[d];
    }
    size_t es = type == FKV_GGML_F32 ? 4 : 2;
    /* pad the data section so this tensor starts aligned */
    static const uint8_t zeros[64];
    while (w->data.n % w->alignment) {
        size_t pad = w->alignment - w->data.n % w->alignment;
        if (put(&w->data, zeros, pad < sizeof zeros ? pad : sizeof zeros)) return FKV_ENOMEM;
    }
    uint64_t offset = w->data.n;
    if (put_str(&w->infos, name, strlen(name)) || put_le(&w->infos, n_dims, 4)) return FKV_ENOMEM;
    for (uint32_t d = 0; d < n_dims; d++)
        if (put_le(&w->infos, ne[d], 8)) return FKV_ENOMEM;
    if (put_le(&w->infos, type, 4) || put_le(&w->infos, offset, 8)) return FKV_ENOMEM;
    const uint8_t *p = data;
    if (block) { /* blocks as llama.cpp lays them out: bytes as given (the fp16 scales little-endian) */
        if (put(&w->data, p, (size_t)fkv_ggml_nbytes(type, nel))) return FKV_ENOMEM;
        w->n_tensors++;
        return FKV_OK;
    }
    /* elements little-endian */
    for (uint64_t i = 0; i < nel; i++)
        if (put_scalar(&w->data, es == 4 ? FKV_GGUF_U32 : FKV_GGUF_U16, p + i * es)) return FKV_ENOMEM;
    w->n_tensors++;
    return FKV_OK;
}

fkv_status fkv_gguf_w_to_mem(fkv_gguf_writer *w, uint8_t **out, size_t *len)
{
    bytes b = {0};
    int bad = put(&b, "GGUF", 4) || put_le(&b, 3, 4) || put_le(&b, w->n_tensors, 8) || put_le(&b, w->n_kv, 8) ||
              put(&b, w->kv.p, w->kv.n) || put(&b, w->infos.p, w->infos.n);
    static const uint8_t zeros[64];
    while (!bad && b.n % w->alignment) {
        size_t pad = w->alignment - b.n % w->alignment;
        bad = put(&b, zeros, pad < sizeof zeros ? pad : sizeof zeros);
    }
    if (bad || put(&b, w->data.p, w->data.n)) {
        free(b.p);
        return FKV_ENOMEM;
    }
    *out = b.p;
    *len = b.n;
    return FKV_OK;
}

fkv_status fkv_gguf_w_to_file(fkv_gguf_writer *w, const char *path, char *err, size_t errlen)
{
    uint8_t *buf;
    size_t len;
    fkv_status st = fkv_gguf_w_to_mem(w, &buf, &len);
    if (st) {
        if (err) snprintf(err, errlen, "%s: out of memory building the file", path);
        return st;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        if (err) snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        free(buf);
        return FKV_EIO;
    }
    size_t put_n = fwrite(buf, 1, len, f);
    int closed = fclose(f);
    free(buf);
    if (put_n != len || closed != 0) {
        if (err) snprintf(err, errlen, "%s: write failed", path);
        return FKV_EIO;
    }
    return FKV_OK;
}
