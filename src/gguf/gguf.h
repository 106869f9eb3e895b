/* GGUF (llama.cpp's model file format, version 2 and 3, little-endian):
 *
 *   header      "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x      string key, u32 value type, value
 *   n_tensors x string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
 *   padding     to `general.alignment` (u32, default 32)
 *   data        each tensor at data_start + offset, in order, padded to the alignment
 *
 * A string is u64 length + bytes (no NUL).  An array value is u32 element
 * type, u64 count, elements.  ne[0] is the contiguous dimension: a weight
 * W[out][in] is stored with ne = {in, out}.
 *
 * The reader validates every count, length, size and offset against the
 * bytes actually present before it allocates or reads, and reports the file,
 * the byte offset and the field of the first problem (FKV_EPARSE).  Only
 * F32 and F16 tensors are accepted (FKV_EUNSUPPORTED otherwise). */
#ifndef FKV_ENGINE_GGUF_H
#define FKV_ENGINE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

typedef enum fkv_gguf_type {
    FKV_GGUF_U8 = 0,
    FKV_GGUF_I8 = 1,
    FKV_GGUF_U16 = 2,
    FKV_GGUF_I16 = 3,
    FKV_GGUF_U32 = 4,
    FKV_GGUF_I32 = 5,
    FKV_GGUF_F32 = 6,
    FKV_GGUF_BOOL = 7,
    FKV_GGUF_STRING = 8,
    FKV_GGUF_ARRAY = 9,
    FKV_GGUF_U64 = 10,
    FKV_GGUF_I64 = 11,
    FKV_GGUF_F64 = 12
} fkv_gguf_type;
#define FKV_GGUF_N_TYPES 13

/* ggml tensor types this code reads and writes. */
#define FKV_GGML_F32 0u
#define FKV_GGML_F16 1u
/* llama.cpp's block-quantized types (ggml-common.h): 32 elements a block,
 * an fp16 scale d first.  Q4_0: 16 bytes of nibbles, element j (< 16) the
 * low nibble of byte j, element j + 16 its high nibble, value (q - 8) * d;
 * 18 bytes.  Q8_0: 32 int8, value q * d; 34 bytes. */
#define FKV_GGML_Q4_0 2u
#define FKV_GGML_Q8_0 8u
#define FKV_GGML_QK 32u
#define FKV_GGUF_MAX_DIMS 4
#define FKV_GGUF_DEFAULT_ALIGNMENT 32u

typedef struct fkv_gguf_kv {
    char *key;            /* NUL-terminated copy */
    fkv_gguf_type type;
    /* scalars: the value widened; STRING: str/len; ARRAY: the fields below */
    union {
        uint64_t u;
        int64_t i;
        double f;
    } v;
    char *str;            /* STRING: NUL-terminated copy (may hold NULs; see len) */
    uint64_t len;         /* STRING: bytes */
    fkv_gguf_type arr_type;
    uint64_t n;           /* ARRAY: element count */
    const uint8_t *raw;   /* ARRAY of numbers: the packed little-endian elements, in the buffer */
    char **strs;          /* ARRAY of STRING: [n] NUL-terminated copies */
    uint64_t *str_lens;   /* ARRAY of STRING: [n] byte lengths */
} fkv_gguf_kv;

typedef struct fkv_gguf_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[FKV_GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint32_t type;                  /* FKV_GGML_F32, _F16, _Q8_0 or _Q4_0 */
    uint64_t offset;                /* from the data section's start, bytes */
    uint64_t n_elements;
    uint64_t n_bytes;
    const void *data;               /* into the buffer */
} fkv_gguf_tensor;

typedef struct fkv_gguf {
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    fkv_gguf_kv *kv;
    fkv_gguf_tensor *tensors;
    uint64_t data_offset; /* byte offset of the data section in the file */
    const uint8_t *buf;   /* the whole file */
    size_t size;
    /* owned mapping or copy, when loaded from a file */
    void *map;
    size_t map_len;
    int map_is_mmap;
} fkv_gguf;

const char *fkv_gguf_type_name(fkv_gguf_type t);
/* Bytes of n elements of a loadable ggml type (n a multiple of 32 for the
 * block types); 0 for other types. */
uint64_t fkv_ggml_nbytes(uint32_t type, uint64_t n);
/* "f32", "f16", "q4_0", ... or "type N" for unknown ids. */
const char *fkv_ggml_type_name(uint32_t t);

/* Parses a GGUF image held in memory; the result points into buf, which the
 * caller keeps alive and unchanged while it is used.  `name` labels errors
 * (a file name).  On error *out is NULL and err says file, byte, field. */
fkv_status fkv_gguf_parse(const void *buf, size_t size, const char *name, fkv_gguf **out, char *err,
                          size_t errlen);
/* Maps the file read-only (or reads it when mmap fails) and parses it. */
fkv_status fkv_gguf_load(const char *path, fkv_gguf **out, char *err, size_t errlen);
void fkv_gguf_free(fkv_gguf *g);

/* Lookups: NULL / -1 when absent. */
const fkv_gguf_kv *fkv_gguf_find(const fkv_gguf *g, const char *key);
const fkv_gguf_tensor *fkv_gguf_tensor_find(const fkv_gguf *g, const char *name);

/* Typed getters.  FKV_ENOENT when absent, FKV_EPARSE (err names the key)
 * when the type does not fit: integers of any width convert when the value
 * fits; floats accept F32/F64 (and integers). */
fkv_status fkv_gguf_get_u64(const fkv_gguf *g, const char *key, uint64_t *out, char *err, size_t errlen);
fkv_status fkv_gguf_get_f64(const fkv_gguf *g, const char *key, double *out, char *err, size_t errlen);
fkv_status fkv_gguf_get_str(const fkv_gguf *g, const char *key, const char **out, char *err,
                            size_t errlen);
/* Element i of a numeric array as double / int64 (range checked by caller). */
double fkv_gguf_arr_f64(const fkv_gguf_kv *kv, uint64_t i);
int64_t fkv_gguf_arr_i64(const fkv_gguf_kv *kv, uint64_t i);
/* Bytes of one element of a fixed-size type; 0 for STRING/ARRAY/unknown. */
size_t fkv_gguf_type_size(fkv_gguf_type t);

/* ---------------------------------------------------------------- writer */

typedef struct fkv_gguf_writer fkv_gguf_writer;

fkv_gguf_writer *fkv_gguf_writer_new(uint32_t alignment);
void fkv_gguf_writer_free(fkv_gguf_writer *w);
/* Scalar: val points at a value of the type's C type (uint8_t .. double;
 * BOOL is one uint8_t 0/1; STRING is a const char * NUL-terminated string). */
fkv_status fkv_gguf_w_kv(fkv_gguf_writer *w, const char *key, fkv_gguf_type type, const void *val);
fkv_status fkv_gguf_w_u32(fkv_gguf_writer *w, const char *key, uint32_t v);
fkv_status fkv_gguf_w_f32(fkv_gguf_writer *w, const char *key, float v);
fkv_status fkv_gguf_w_str(fkv_gguf_writer *w, const char *key, const char *s);
/* A string with explicit length (may hold NULs). */
fkv_status fkv_gguf_w_strn(fkv_gguf_writer *w, const char *key, const char *s, uint64_t len);
/* Array of fixed-size elements: data is [n] packed values of elem_type. */
fkv_status fkv_gguf_w_arr(fkv_gguf_writer *w, const char *key, fkv_gguf_type elem_type, uint64_t n,
                          const void *data);
/* Array of strings; lens may be NULL (strlen). */
fkv_status fkv_gguf_w_arr_str(fkv_gguf_writer *w, const char *key, uint64_t n,
                              const char *const *strs, const uint64_t *lens);
/* Tensor: data is n_elements of the ggml type (F32 or F16), copied. */
fkv_status fkv_gguf_w_tensor(fkv_gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                             const uint64_t *ne, const void *data);
/* The whole file image (malloc'd; caller frees). */
fkv_status fkv_gguf_w_to_mem(fkv_gguf_writer *w, uint8_t **out, size_t *len);
fkv_status fkv_gguf_w_to_file(fkv_gguf_writer *w, const char *path, char *err, size_t errlen);

#endif
