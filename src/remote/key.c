/* Keys, values and key slots: the pure part of the remote tier (no I/O),
 * so the tests and a fuzzer can reach every check of an untrusted value. */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "remote/remote.h"
#include "util/err.h"

static const char *const dtype_names[] = {NULL, "f32", "f16", "bf16", "int8", "int4"};

const char *fkv_remote_dtype_name(fkv_remote_dtype dt)
{
    return dt >= FKV_REMOTE_F32 && dt <= FKV_REMOTE_INT4 ? dtype_names[dt] : NULL;
}

/* Element bytes of the float dtypes; 0 for the quantized layouts, whose
 * size carries scales the geometry alone does not give. */
static size_t dtype_bytes(fkv_remote_dtype dt)
{
    switch (dt) {
    case FKV_REMOTE_F32: return 4;
    case FKV_REMOTE_F16:
    case FKV_REMOTE_BF16: return 2;
    default: return 0;
    }
}

/* The name characters: no '@' (the separator), no braces (a cluster hash
 * tag would put all of a tenant on one node), nothing a log would mangle. */
static bool name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > FKV_REMOTE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

static bool chain_hash(const uint8_t *prev, const int32_t *tokens, size_t n, uint8_t out[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    if (ok)
        ok = EVP_DigestUpdate(md, prev, 32) == 1;
    /* little-endian whatever the host, so every machine names a chunk alike */
    uint8_t buf[256];
    for (size_t i = 0; ok && i < n;) {
        size_t m = 0;
        for (; i < n && m + 4 <= sizeof buf; i++, m += 4) {
            uint32_t v = (uint32_t)tokens[i];
            buf[m] = (uint8_t)v, buf[m + 1] = (uint8_t)(v >> 8);
            buf[m + 2] = (uint8_t)(v >> 16), buf[m + 3] = (uint8_t)(v >> 24);
        }
        ok = EVP_DigestUpdate(md, buf, m) == 1;
    }
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(md);
    return ok;
}

static bool chain_hash_bytes(const char *s, size_t n, uint8_t out[32])
{
    unsigned len = 0;
    return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

/* The key without its hash: "fkv@model@LxHxD@dtype@ns@". */
static int key_prefix(char *buf, size_t len, const char *model, fkv_remote_geom g, fkv_remote_dtype dt,
                      const char *ns)
{
    return snprintf(buf, len, "fkv@%s@%ux%ux%u@%s@%s@", model, (unsigned)g.layers, (unsigned)g.kv_heads,
                    (unsigned)g.head_dim, fkv_remote_dtype_name(dt), ns);
}

fkv_status fkv_remote_key_make(fkv_remote_key *out, const char *model, fkv_remote_geom geom,
                               fkv_remote_dtype dtype, const char *ns, const fkv_remote_key *prev,
                               const int32_t *tokens, size_t ntokens)
{
    if (!out || !name_ok(model) || !name_ok(ns))
        return fkv__fail(FKV_EINVAL, "remote key: model and namespace are 1..%d of [A-Za-z0-9._:/-]",
                         FKV_REMOTE_NAME_MAX);
    if (!fkv_remote_dtype_name(dtype) || !geom.layers || !geom.kv_heads || !geom.head_dim)
        return fkv__fail(FKV_EINVAL, "remote key: bad dtype or a zero dimension");
    if (!tokens || ntokens == 0 || ntokens > UINT32_MAX)
        return fkv__fail(FKV_EINVAL, "remote key: a chunk has 1..2^32-1 tokens");
    char pre[FKV_REMOTE_KEY_MAX];
    int n = key_prefix(pre, sizeof pre, model, geom, dtype, ns);
    if (n < 0 || (size_t)n + 65 > sizeof pre)
        return fkv__fail(FKV_EINVAL, "remote key: too long");
    /* a chain crosses no model, geometry, dtype or tenant: its prefix is the
     * previous key's up to the hash */
    if (prev && strncmp(prev->str, pre, (size_t)n) != 0)
        return fkv__fail(FKV_EINVAL, "remote key: the previous key is of another model, geometry or namespace");
    fkv_remote_key k;
    memset(&k, 0, sizeof k);
    /* the first chunk chains from SHA-256(namespace): equal prompts of two
     * tenants share no hash, so whoever can list the keys cannot tell that
     * another tenant sent the same prefix */
    uint8_t root[32];
    if (!prev && !chain_hash_bytes(ns, strlen(ns), root))
        return fkv__fail(FKV_ENOMEM, "remote key: SHA-256 failed");
    if (!chain_hash(prev ? prev->hash : root, tokens, ntokens, k.hash))
        return fkv__fail(FKV_ENOMEM, "remote key: SHA-256 failed");
    if (prev) {
        memcpy(k.parent, prev->hash, 32);
        k.has_parent = true;
    }
    memcpy(k.str, pre, (size_t)n);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        k.str[n + 2 * i] = hex[k.hash[i] >> 4];
        k.str[n + 2 * i + 1] = hex[k.hash[i] & 15];
    }
    k.str[n + 64] = '\0';
    k.geom = geom;
    k.dtype = dtype;
    k.tokens = (uint32_t)ntokens;
    memcpy(k.ns, ns, strlen(ns) + 1);
    *out = k;
    return FKV_OK;
}

size_t fkv_remote_payload_bytes(const fkv_remote_key *key)
{
    /* uint64 products of u32 dimensions: a hostile geometry cannot wrap to
     * a small size before the 2^64 check below */
    uint64_t e = dtype_bytes(key->dtype);
    uint64_t a = (uint64_t)key->geom.layers * key->geom.kv_heads;
    uint64_t b = (uint64_t)key->geom.head_dim * key->tokens;
    if (!e || (a && b > UINT64_MAX / 2 / e / a))
        return 0;
    uint64_t bytes = 2 * e * a * b;
    return bytes > SIZE_MAX ? 0 : (size_t)bytes;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void fkv_remote_value_encode(const fkv_remote_key *key, const void *payload, size_t len, uint8_t *out)
{
    memcpy(out, "FKVR", 4);
    out[4] = FKV_REMOTE_FORMAT_VERSION, out[5] = 0;
    out[6] = (uint8_t)key->dtype, out[7] = 0;
    put32(out + 8, key->tokens);
    put32(out + 12, key->geom.layers);
    put32(out + 16, key->geom.kv_heads);
    put32(out + 20, key->geom.head_dim);
    put64(out + 24, len);
    put64(out + 32, XXH64(payload, len, 0));
    memcpy(out + 40, key->hash, 8);
    if (len)
        memcpy(out + FKV_REMOTE_HEADER_BYTES, payload, len);
}

fkv_remote_value_check_result fkv_remote_value_check(const fkv_remote_key *key, const uint8_t *buf,
                                                     size_t len, const uint8_t **payload, size_t *plen)
{
    if (!buf || len < FKV_REMOTE_HEADER_BYTES)
        return FKV_REMOTE_VALUE_SHORT;
    if (memcmp(buf, "FKVR", 4) != 0 || buf[4] != FKV_REMOTE_FORMAT_VERSION || buf[5] != 0)
        return FKV_REMOTE_VALUE_MAGIC;
    if (buf[6] != (uint8_t)key->dtype || buf[7] != 0 || get32(buf + 8) != key->tokens ||
        get32(buf + 12) != key->geom.layers || get32(buf + 16) != key->geom.kv_heads ||
        get32(buf + 20) != key->geom.head_dim || memcmp(buf + 40, key->hash, 8) != 0)
        return FKV_REMOTE_VALUE_SHAPE;
    uint64_t n = get64(buf + 24);
    size_t want = fkv_remote_payload_bytes(key);
    if (n != len - FKV_REMOTE_HEADER_BYTES || (want && n != want))
        return FKV_REMOTE_VALUE_LENGTH;
    const uint8_t *p = buf + FKV_REMOTE_HEADER_BYTES;
    if (XXH64(p, (size_t)n, 0) != get64(buf + 32))
        return FKV_REMOTE_VALUE_CHECKSUM;
    *payload = p;
    *plen = (size_t)n;
    return FKV_REMOTE_VALUE_OK;
}

/* CRC16-XMODEM (poly 0x1021, init 0), bitwise: keys are short and this runs
 * once per command, so a table buys nothing worth its lines. */
uint16_t fkv_remote_crc16(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

uint16_t fkv_remote_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(key + from, '}', len - from);
        if (close && close > key + from)
            return fkv_remote_crc16(key + from, (size_t)(close - key - from)) & 16383;
    }
    return fkv_remote_crc16(key, len) & 16383;
}
