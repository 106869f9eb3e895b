/* The remote KV tier: chunk bytes kept in Redis or a Redis Cluster.
 *
 * Standalone: nothing here knows the cache's internals.  A caller names a
 * chunk by its key (fkv_remote_key_make, below), hands its bytes to
 * fkv_remote_put and asks for them back with fkv_remote_get; the module
 * turns that into SET / GET on the right node.
 *
 * Keys (one string, printable, no spaces; LMCache's
 * model@world@worker@hash@dtype layout, with the world/worker pair replaced
 * by the geometry that decides whether bytes fit, and a tenant namespace):
 *
 *     fkv@<model>@<layers>x<kv_heads>x<head_dim>@<dtype>@<namespace>@<hash>
 *
 * <hash> is 64 lowercase hex digits: the chained prefix hash of the chunk,
 * SHA-256(hash of the previous chunk || the chunk's token ids as
 * little-endian int32), where the "previous hash" of the first chunk is
 * SHA-256(namespace): the namespace salts the chain, so two tenants' equal
 * prompts give unrelated hashes (no cross-tenant side channel).  So
 * a key names the chunk *and* every token before it: equal keys mean equal
 * prefixes.  model and namespace are 1..64 characters of [A-Za-z0-9._:/-]
 * (no '@', which separates, nor '{' '}', which would make a Redis Cluster
 * hash tag and pin a tenant to one node).
 *
 * Values: a 48-byte header, then the payload.  Little-endian:
 *     0  magic "FKVR"          4  format version (u16, 1)   6  dtype (u16)
 *     8  tokens (u32)         12  layers (u32)             16  kv heads (u32)
 *    20  head dim (u32)       24  payload length (u64)
 *    32  XXH64 of the payload (u64, seed 0)
 *    40  the first 8 bytes of the key's hash (binds the value to its key)
 * A value read back is untrusted: a wrong magic, version, length, checksum,
 * or a geometry / dtype / token count / hash other than the key's is a
 * miss, counted in `corrupt`, and never handed out.
 *
 * Threads: the client owns one worker thread, which alone talks to Redis.
 * fkv_remote_put copies the bytes into a bounded queue and returns at once
 * (a full queue drops the put, counted).  get / exists / del wait for the
 * worker at most config.timeout_ms; past it the call gives up (misses) and
 * the worker's late answer is thrown away.  Every call may be made from any
 * thread, except close, which must be the last. */
#ifndef FKV_REMOTE_REMOTE_H
#define FKV_REMOTE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"

#define FKV_REMOTE_NAME_MAX 64
#define FKV_REMOTE_KEY_MAX 256
#define FKV_REMOTE_HEADER_BYTES 48
#define FKV_REMOTE_FORMAT_VERSION 1

typedef enum {
    FKV_REMOTE_F32 = 1,
    FKV_REMOTE_F16 = 2,
    FKV_REMOTE_BF16 = 3,
    FKV_REMOTE_INT8 = 4, /* the quantized layouts: sizes not fixed by geometry */
    FKV_REMOTE_INT4 = 5,
} fkv_remote_dtype;

/* "f32", "f16", "bf16", "int8", "int4"; NULL for another value. */
const char *fkv_remote_dtype_name(fkv_remote_dtype dt);

typedef struct {
    uint32_t layers, kv_heads, head_dim;
} fkv_remote_geom;

typedef struct fkv_remote_key {
    char str[FKV_REMOTE_KEY_MAX]; /* the Redis key, NUL-terminated */
    uint8_t hash[32];             /* this chunk's chained hash */
    uint8_t parent[32];           /* the previous chunk's (has_parent) */
    bool has_parent;
    fkv_remote_geom geom;
    fkv_remote_dtype dtype;
    uint32_t tokens;                    /* the chunk's token count */
    char ns[FKV_REMOTE_NAME_MAX + 1];   /* the tenant namespace */
} fkv_remote_key;

/* The key of a chunk from its tokens and the previous chunk's key (NULL
 * for the first chunk).  prev must have been made with the same model,
 * geometry, dtype and namespace (FKV_EINVAL otherwise), as must bad names,
 * a zero dimension or no tokens. */
fkv_status fkv_remote_key_make(fkv_remote_key *out, const char *model, fkv_remote_geom geom,
                               fkv_remote_dtype dtype, const char *ns, const fkv_remote_key *prev,
                               const int32_t *tokens, size_t ntokens);

/* The payload bytes a chunk of the key's geometry holds (K and V), or 0
 * where the dtype does not fix it (int8, int4). */
size_t fkv_remote_payload_bytes(const fkv_remote_key *key);

/* The value (header + payload) into out, which holds
 * FKV_REMOTE_HEADER_BYTES + len bytes. */
void fkv_remote_value_encode(const fkv_remote_key *key, const void *payload, size_t len, uint8_t *out);

/* Why a value read back is refused. */
typedef enum {
    FKV_REMOTE_VALUE_OK = 0,
    FKV_REMOTE_VALUE_SHORT,    /* shorter than the header */
    FKV_REMOTE_VALUE_MAGIC,    /* magic or version */
    FKV_REMOTE_VALUE_SHAPE,    /* dtype, tokens, geometry or hash not the key's */
    FKV_REMOTE_VALUE_LENGTH,   /* payload length not the header's, or not the geometry's */
    FKV_REMOTE_VALUE_CHECKSUM, /* the payload's XXH64 */
} fkv_remote_value_check_result;

/* Checks buf[0, len) as the value of key; on OK, *payload and *plen name
 * the payload inside buf. */
fkv_remote_value_check_result fkv_remote_value_check(const fkv_remote_key *key, const uint8_t *buf,
                                                     size_t len, const uint8_t **payload, size_t *plen);

/* Redis Cluster's key slot: CRC16-XMODEM of the key, or of its hash tag
 * (the bytes between the first '{' and the next '}', when not empty), mod
 * 16384. */
uint16_t fkv_remote_crc16(const void *buf, size_t len);
uint16_t fkv_remote_key_slot(const char *key, size_t len);

typedef struct {
    /* Seeds, "host:port[,host:port...]".  Standalone: the first only.
     * Cluster: any that answers CLUSTER SLOTS. */
    const char *nodes;
    bool cluster;
    int timeout_ms;         /* each call's bound (connect, command, the caller's wait); 100 */
    int ttl_s;              /* every SET's EX; 3600 */
    size_t queue_max;       /* puts waiting for the worker; 1024 */
    int backoff_min_ms;     /* the first reconnect delay after a failure; 50 */
    int backoff_max_ms;     /* the cap of its doubling; 2000 */
    uint64_t default_quota; /* bytes per namespace, 0: none (fkv_remote_set_quota) */
    /* Where the once-per-burst error lines go; NULL: stderr. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
} fkv_remote_config;

void fkv_remote_config_default(fkv_remote_config *cfg);

typedef struct {
    uint64_t gets, hits, misses, corrupt;  /* keys asked, served, not served, refused as corrupt */
    uint64_t puts, put_drops, put_fails;   /* queued, dropped (queue full), not written */
    uint64_t deletes, quota_deletes;       /* keys deleted (by del, by the quota) */
    uint64_t err_connect, err_timeout, err_oom, err_other;
    uint64_t unavailable; /* keys not tried: their node waits out its backoff */
    uint64_t gave_up;     /* calls whose caller stopped waiting at timeout_ms */
    uint64_t moved, asked, slot_refreshes;
    uint64_t bytes_written, bytes_read; /* values (header + payload) set, and got */
} fkv_remote_counters;

typedef struct fkv_remote fkv_remote;

/* Connects (bounded by timeout_ms; a server that is down is no error: the
 * worker retries with backoff) and starts the worker.  NULL on a bad
 * config, with why in err. */
fkv_remote *fkv_remote_open(const fkv_remote_config *cfg, char *err, size_t errlen);
/* Stops the worker (after at most one call's timeout); puts still queued
 * are dropped. */
void fkv_remote_close(fkv_remote *r);

/* A namespace's quota in bytes (keys + values this client wrote), 0: none.
 * Past it the client DELs the namespace's least recently used keys that
 * have no known child left, so what stays is prefix-closed. */
fkv_status fkv_remote_set_quota(fkv_remote *r, const char *ns, uint64_t bytes);

/* Queues a SET of the chunk's value; copies payload.  false: dropped (queue
 * full, or len not the key's geometry), counted.  Never blocks on Redis. */
bool fkv_remote_put(fkv_remote *r, const fkv_remote_key *key, const void *payload, size_t len);
/* Waits (at most timeout_ms) until every put queued before it is done.
 * false: it gave up. */
bool fkv_remote_flush(fkv_remote *r, int timeout_ms);

typedef struct {
    uint8_t *data; /* the payload (malloc'd; fkv_remote_values_free), NULL on a miss */
    size_t len;
} fkv_remote_value;

/* GETs n keys in one pipelined round trip per node; out[i] is key i's
 * payload or a miss.  Returns the hits. */
size_t fkv_remote_get(fkv_remote *r, const fkv_remote_key *keys, size_t n, fkv_remote_value *out);
void fkv_remote_values_free(fkv_remote_value *v, size_t n);
/* EXISTS of each key into out[i]; -1 when the call failed (out all false). */
int fkv_remote_exists(fkv_remote *r, const fkv_remote_key *keys, size_t n, bool *out);
/* DELs the keys (and forgets them in the quota index); the count deleted, or
 * -1 when the call failed. */
int fkv_remote_del(fkv_remote *r, const fkv_remote_key *keys, size_t n);

void fkv_remote_get_counters(fkv_remote *r, fkv_remote_counters *out);
/* "host:port" of the node the client's slot map sends key to (the map as
 * it is now), into buf; false if none. */
bool fkv_remote_route(fkv_remote *r, const char *key, char *buf, size_t len);

#endif
