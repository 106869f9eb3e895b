/* The remote tier's pure parts, no server: key slots (the cluster
 * specification's CRC16 test vector, hash tags), the key format and its
 * chain, and every refusal of a value read back. */
#include <string.h>

#include "check.h"
#include "remote/remote.h"

static void test_crc16(void)
{
    /* the Redis Cluster specification's vector for CRC16-XMODEM */
    CHECK(fkv_remote_crc16("123456789", 9) == 0x31C3);
    CHECK(fkv_remote_key_slot("123456789", 9) == (0x31C3 & 16383));
    /* the slots redis-cli CLUSTER KEYSLOT gives */
    CHECK(fkv_remote_key_slot("foo", 3) == 12182);
    CHECK(fkv_remote_key_slot("bar", 3) == 5061);
}

static void test_hash_tags(void)
{
    uint16_t user = fkv_remote_key_slot("user1000", 8);
    CHECK(fkv_remote_key_slot("{user1000}.following", 20) == user);
    CHECK(fkv_remote_key_slot("{user1000}.followers", 20) == user);
    /* only the first {...}; an empty one is no tag: the whole key */
    CHECK(fkv_remote_key_slot("foo{}{bar}", 10) == fkv_remote_crc16("foo{}{bar}", 10) % 16384);
    CHECK(fkv_remote_key_slot("foo{{bar}}zap", 13) == fkv_remote_crc16("{bar", 4) % 16384);
    CHECK(fkv_remote_key_slot("foo{bar}{zap}", 13) == fkv_remote_crc16("bar", 3) % 16384);
    /* an unclosed brace is no tag */
    CHECK(fkv_remote_key_slot("foo{bar", 7) == fkv_remote_crc16("foo{bar", 7) % 16384);
}

static const fkv_remote_geom G = {2, 4, 8};

static void test_keys(void)
{
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    fkv_remote_key k0, k1, k1b, other;
    REQUIRE(fkv_remote_key_make(&k0, "llama-7b", G, FKV_REMOTE_F16, "t1", NULL, a, 4) == FKV_OK);
    REQUIRE(fkv_remote_key_make(&k1, "llama-7b", G, FKV_REMOTE_F16, "t1", &k0, b, 4) == FKV_OK);
    CHECKF(strncmp(k0.str, "fkv@llama-7b@2x4x8@f16@t1@", 26) == 0, "%s", k0.str);
    CHECK(strlen(k0.str) == 26 + 64);
    CHECK(!k0.has_parent && k1.has_parent && memcmp(k1.parent, k0.hash, 32) == 0);
    /* the chain: the same tokens after another prefix are another key */
    REQUIRE(fkv_remote_key_make(&k1b, "llama-7b", G, FKV_REMOTE_F16, "t1", NULL, b, 4) == FKV_OK);
    CHECK(strcmp(k1.str, k1b.str) != 0);
    /* deterministic */
    fkv_remote_key again;
    REQUIRE(fkv_remote_key_make(&again, "llama-7b", G, FKV_REMOTE_F16, "t1", &k0, b, 4) == FKV_OK);
    CHECK(strcmp(again.str, k1.str) == 0);
    /* bad names: the separator, a hash tag, empty */
    CHECK(fkv_remote_key_make(&other, "a@b", G, FKV_REMOTE_F16, "t1", NULL, a, 4) == FKV_EINVAL);
    CHECK(fkv_remote_key_make(&other, "m", G, FKV_REMOTE_F16, "{t1}", NULL, a, 4) == FKV_EINVAL);
    CHECK(fkv_remote_key_make(&other, "m", G, FKV_REMOTE_F16, "", NULL, a, 4) == FKV_EINVAL);
    CHECK(fkv_remote_key_make(&other, "m", G, FKV_REMOTE_F16, "t1", NULL, a, 0) == FKV_EINVAL);
    /* a chain does not cross tenants or geometries */
    CHECK(fkv_remote_key_make(&other, "llama-7b", G, FKV_REMOTE_F16, "t2", &k0, b, 4) == FKV_EINVAL);
    fkv_remote_geom g2 = {2, 4, 16};
    CHECK(fkv_remote_key_make(&other, "llama-7b", g2, FKV_REMOTE_F16, "t1", &k0, b, 4) == FKV_EINVAL);
    CHECK(fkv_remote_payload_bytes(&k0) == 2u * 2 * 4 * 8 * 4 * 2);
    /* the namespace salts the chain: another tenant's same prompt shares
     * no hash with this one */
    fkv_remote_key t2;
    REQUIRE(fkv_remote_key_make(&t2, "llama-7b", G, FKV_REMOTE_F16, "t2", NULL, a, 4) == FKV_OK);
    CHECK(memcmp(t2.hash, k0.hash, 32) != 0);
}

/* The hashes of known inputs, computed apart with python's hashlib:
 * h0 = sha256(sha256(b'ns') + struct.pack('<4i', 1, 2, 3, 4)) and, chained,
 * sha256(h0 + struct.pack('<4i', 5, 6, -7, 8)).  A big-endian packing, a
 * missing chain or salt, or a hex slip all break them. */
static void test_key_vector(void)
{
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, -7, 8};
    fkv_remote_key k, k2;
    REQUIRE(fkv_remote_key_make(&k, "m", G, FKV_REMOTE_F32, "ns", NULL, a, 4) == FKV_OK);
    REQUIRE(fkv_remote_key_make(&k2, "m", G, FKV_REMOTE_F32, "ns", &k, b, 4) == FKV_OK);
    CHECKF(strcmp(k.str, "fkv@m@2x4x8@f32@ns@1f7f244879543b8ba325b64d7dd4614a9658fda31b064a10efd69a85ed22425c") == 0,
           "%s", k.str);
    CHECKF(strcmp(k2.str + 19, "811591ac9d67ee541ba8e89ab607c44cd458b63d62ae5a4e217bbb0c86e159fd") == 0, "%s", k2.str);
}

static void test_values(void)
{
    int32_t a[4] = {1, 2, 3, 4};
    fkv_remote_key k, k2;
    REQUIRE(fkv_remote_key_make(&k, "m", G, FKV_REMOTE_F16, "ns", NULL, a, 4) == FKV_OK);
    REQUIRE(fkv_remote_key_make(&k2, "m", G, FKV_REMOTE_F16, "ns", &k, a, 4) == FKV_OK);
    size_t len = fkv_remote_payload_bytes(&k);
    uint8_t payload[1024], buf[FKV_REMOTE_HEADER_BYTES + 1024];
    REQUIRE(len <= sizeof payload);
    for (size_t i = 0; i < len; i++)
        payload[i] = (uint8_t)(i * 7 + 3);
    fkv_remote_value_encode(&k, payload, len, buf);
    size_t vlen = FKV_REMOTE_HEADER_BYTES + len;
    const uint8_t *p;
    size_t plen;
    CHECK(fkv_remote_value_check(&k, buf, vlen, &p, &plen) == FKV_REMOTE_VALUE_OK);
    CHECK(plen == len && memcmp(p, payload, len) == 0);
    /* another key's value (same geometry): the hash binds it */
    CHECK(fkv_remote_value_check(&k2, buf, vlen, &p, &plen) == FKV_REMOTE_VALUE_SHAPE);
    CHECK(fkv_remote_value_check(&k, buf, FKV_REMOTE_HEADER_BYTES - 1, &p, &plen) == FKV_REMOTE_VALUE_SHORT);
    CHECK(fkv_remote_value_check(&k, buf, vlen - 1, &p, &plen) == FKV_REMOTE_VALUE_LENGTH);
    /* every byte of the payload is covered by the checksum */
    for (size_t i = FKV_REMOTE_HEADER_BYTES; i < vlen; i += 97) {
        buf[i] ^= 1;
        CHECK(fkv_remote_value_check(&k, buf, vlen, &p, &plen) == FKV_REMOTE_VALUE_CHECKSUM);
        buf[i] ^= 1;
    }
    /* every header byte is checked */
    for (size_t i = 0; i < FKV_REMOTE_HEADER_BYTES; i++) {
        buf[i] ^= 0x10;
        CHECKF(fkv_remote_value_check(&k, buf, vlen, &p, &plen) != FKV_REMOTE_VALUE_OK, "header byte %zu", i);
        buf[i] ^= 0x10;
    }
    /* a wrong dtype in the key asked (same sizes: bf16 vs f16) */
    fkv_remote_key kb;
    REQUIRE(fkv_remote_key_make(&kb, "m", G, FKV_REMOTE_BF16, "ns", NULL, a, 4) == FKV_OK);
    memcpy(kb.hash, k.hash, 32);
    CHECK(fkv_remote_value_check(&kb, buf, vlen, &p, &plen) == FKV_REMOTE_VALUE_SHAPE);
    CHECK(fkv_remote_value_check(&k, buf, vlen, &p, &plen) == FKV_REMOTE_VALUE_OK);
}

int main(void)
{
    test_crc16();
    test_hash_tags();
    test_keys();
    test_key_vector();
    test_values();
    return check_done();
}
