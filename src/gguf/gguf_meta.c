/* Lookups and typed getters over a parsed GGUF. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

const fkv_gguf_kv *fkv_gguf_find(const fkv_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const fkv_gguf_tensor *fkv_gguf_tensor_find(const fkv_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static int is_signed(fkv_gguf_type t)
{
    return t == FKV_GGUF_I8 || t == FKV_GGUF_I16 || t == FKV_GGUF_I32 || t == FKV_GGUF_I64;
}

static int is_unsigned(fkv_gguf_type t)
{
    return t == FKV_GGUF_U8 || t == FKV_GGUF_U16 || t == FKV_GGUF_U32 || t == FKV_GGUF_U64 ||
           t == FKV_GGUF_BOOL;
}

fkv_status fkv_gguf_get_u64(const fkv_gguf *g, const char *key, uint64_t *out, char *err, size_t errlen)
{
    const fkv_gguf_kv *kv = fkv_gguf_find(g, key);
    if (!kv) return FKV_ENOENT;
    if (is_unsigned(kv->type)) {
        *out = kv->v.u;
        return FKV_OK;
    }
    if (is_signed(kv->type) && kv->v.i >= 0) {
        *out = (uint64_t)kv->v.i;
        return FKV_OK;
    }
    if (err) snprintf(err, errlen, "metadata '%s': expected a non-negative integer, found %s", key,
                      fkv_gguf_type_name(kv->type));
    return FKV_EPARSE;
}

fkv_status fkv_gguf_get_f64(const fkv_gguf *g, const char *key, double *out, char *err, size_t errlen)
{
    const fkv_gguf_kv *kv = fkv_gguf_find(g, key);
    if (!kv) return FKV_ENOENT;
    if (kv->type == FKV_GGUF_F32 || kv->type == FKV_GGUF_F64) {
        if (!isfinite(kv->v.f)) {
            if (err) snprintf(err, errlen, "metadata '%s': not a finite number", key);
            return FKV_EPARSE;
        }
        *out = kv->v.f;
        return FKV_OK;
    }
    if (is_unsigned(kv->type)) {
        *out = (double)kv->v.u;
        return FKV_OK;
    }
    if (is_signed(kv->type)) {
        *out = (double)kv->v.i;
        return FKV_OK;
    }
    if (err) snprintf(err, errlen, "metadata '%s': expected a number, found %s", key, fkv_gguf_type_name(kv->type));
    return FKV_EPARSE;
}

fkv_status fkv_gguf_get_str(const fkv_gguf *g, const char *key, const char **out, char *err, size_t errlen)
{
    const fkv_gguf_kv *kv = fkv_gguf_find(g, key);
    if (!kv) return FKV_ENOENT;
    if (kv->type != FKV_GGUF_STRING) {
        if (err) snprintf(err, errlen, "metadata '%s': expected a string, found %s", key,
                          fkv_gguf_type_name(kv->type));
        return FKV_EPARSE;
    }
    *out = kv->str;
    return FKV_OK;
}

static uint64_t arr_raw(const fkv_gguf_kv *kv, uint64_t i, size_t *sz)
{
    *sz = fkv_gguf_type_size(kv->arr_type);
    const uint8_t *p = kv->raw + i * *sz;
    uint64_t v = 0;
    for (size_t b = 0; b < *sz; b++) v |= (uint64_t)p[b] << (8 * b);
    return v;
}

int64_t fkv_gguf_arr_i64(const fkv_gguf_kv *kv, uint64_t i)
{
    size_t sz;
    uint64_t v = arr_raw(kv, i, &sz);
    switch (kv->arr_type) {
    case FKV_GGUF_I8: return (int8_t)v;
    case FKV_GGUF_I16: return (int16_t)v;
    case FKV_GGUF_I32: return (int32_t)v;
    case FKV_GGUF_F32:
    case FKV_GGUF_F64: {
        /* truncated toward zero; NaN and out-of-range values saturate
         * (a plain cast would be undefined) */
        double d = fkv_gguf_arr_f64(kv, i);
        if (d != d) return 0;
        if (d >= 9223372036854775807.0) return INT64_MAX;
        if (d <= -9223372036854775808.0) return INT64_MIN;
        return (int64_t)d;
    }
    default: return (int64_t)v;
    }
}

double fkv_gguf_arr_f64(const fkv_gguf_kv *kv, uint64_t i)
{
    size_t sz;
    uint64_t v = arr_raw(kv, i, &sz);
    if (kv->arr_type == FKV_GGUF_F32) {
        uint32_t b = (uint32_t)v;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    if (kv->arr_type == FKV_GGUF_F64) {
        double d;
        memcpy(&d, &v, 8);
        return d;
    }
    if (is_signed(kv->arr_type)) return (double)fkv_gguf_arr_i64(kv, i);
    return (double)v;
}
