"""cffi builder (API mode): compiles fairkv._native against the installed
libfairkv, found with `pkg-config fairkv`.

Every declaration below is checked by the C compiler against the installed
fairkv.h when the extension is built, so a header change that breaks the
binding fails the build instead of misreading memory at run time.
"""
import os
import shlex
import subprocess

from cffi import FFI


def _pkg_config(*args: str) -> str:
    try:
        out = subprocess.run(["pkg-config", *args, "fairkv"], check=True, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise RuntimeError("pkg-config is not installed; it finds libfairkv") from e
    except subprocess.CalledProcessError as e:
        raise RuntimeError(
            "pkg-config cannot find fairkv (install the C library, or set PKG_CONFIG_PATH to the "
            "folder holding fairkv.pc): " + e.stderr.strip()
        ) from e
    return out.stdout.strip()


CDEF = r"""
typedef enum fkv_status {
    FKV_OK = 0, FKV_EINVAL = 1, FKV_ENOMEM = 2, FKV_EFULL = 3, FKV_ENOENT = 4,
    FKV_ESTATE = 5, FKV_EIO = 6, FKV_EPARSE = 7, FKV_EUNSUPPORTED = 8
} fkv_status;
typedef enum fkv_dtype { FKV_F32 = 0, FKV_F16 = 1, FKV_INT8 = 2, FKV_INT4 = 3 } fkv_dtype;
typedef enum fkv_storage_kind { FKV_STORAGE_PHANTOM = 0, FKV_STORAGE_CPU = 1 } fkv_storage_kind;
typedef enum fkv_class { FKV_CLASS_SHORT = 0, FKV_CLASS_MEDIUM = 1, FKV_CLASS_LONG = 2 } fkv_class;
typedef enum fkv_quant_mode { FKV_QUANT_OFF = 0, FKV_QUANT_ALWAYS = 1, FKV_QUANT_UNDER_PRESSURE = 2 } fkv_quant_mode;
typedef enum fkv_quota_mode { FKV_QUOTA_OFF = 0, FKV_QUOTA_REQUEST = 1, FKV_QUOTA_TENANT = 2 } fkv_quota_mode;
typedef enum fkv_reclaim_action {
    FKV_RECLAIM_QUANTIZE8 = 0, FKV_RECLAIM_QUANTIZE4 = 1, FKV_RECLAIM_DROP = 2,
    FKV_RECLAIM_EVICT = 3, FKV_RECLAIM_PREEMPT = 4, FKV_RECLAIM_OFFLOAD = 5
} fkv_reclaim_action;

#define FKV_VERSION_MAJOR ...
#define FKV_VERSION_MINOR ...
#define FKV_VERSION_PATCH ...
#define FKV_N_RECLAIM_SLOTS ...

typedef enum fkv_tier_admission {
    FKV_TIER_ADMIT_OFF = 0, FKV_TIER_ADMIT_TINYLFU = 1, FKV_TIER_ADMIT_SEEN = 2
} fkv_tier_admission;

typedef enum fkv_host_policy {
    FKV_HOST_LRU = 0, FKV_HOST_S3FIFO = 1, FKV_HOST_ARC = 2
} fkv_host_policy;

typedef struct fkv_clock { int64_t (*now_ns)(void *ctx); void *ctx; } fkv_clock;
typedef struct fkv_config {
    uint32_t n_layers; uint32_t n_kv_heads; uint32_t head_dim; fkv_dtype dtype;
    uint32_t page_tokens; uint64_t capacity_bytes; uint32_t capacity_pages; fkv_storage_kind storage;
    uint32_t chunk_tokens; int dynamic_chunking; uint32_t chunk_min_tokens; uint32_t chunk_max_tokens;
    const char *policy; double alpha; double beta; int64_t age_unit_ns; fkv_quota_mode quotas; double temperature;
    uint32_t tenant_labels; int64_t min_chunk_retention_ns; int free_tail_first;
    fkv_quant_mode quant_mode; fkv_dtype quant_dtype; uint32_t quant_hot_tokens; double quant_pressure;
    uint32_t quant_warm_tokens;
    uint64_t host_capacity_bytes; int host_demote;
    fkv_tier_admission tier_admission; uint32_t tier_admission_threshold; uint64_t tier_admission_window;
    fkv_host_policy host_policy;
    int prefix_cache;
    fkv_clock clock; const char *device_label; int thread_safe;
    ...;
} fkv_config;

typedef struct fkv_cache fkv_cache;
typedef struct fkv_seq fkv_seq;

typedef struct fkv_cache_info {
    uint32_t page_tokens; uint32_t n_pages; uint32_t free_pages; uint64_t page_bytes;
    uint64_t token_bytes; uint32_t n_chunks; uint32_t n_seqs;
    ...;
} fkv_cache_info;

typedef struct fkv_tenant_info {
    uint64_t tenant; double weight; uint64_t pages; double demand_pages; double share_pages;
    uint32_t seqs; uint64_t reclaimed_pages[7]; uint64_t prefix_query_tokens, prefix_hit_tokens;
    uint64_t host_bytes; double host_share_bytes;
    ...;
} fkv_tenant_info;

typedef struct fkv_chunk_view {
    uint32_t start; uint32_t n_tokens; uint32_t cap_tokens; uint32_t n_pages;
    const uint32_t *pages; fkv_dtype dtype; int resident; const void *qmeta; int dropped; int offloaded;
    ...;
} fkv_chunk_view;

typedef struct fkv_chunk_info {
    uint32_t refs; uint32_t pins; uint64_t access_count; int64_t create_ns; int64_t last_access_ns;
    int64_t expected_ttl_ns; uint64_t owner; uint64_t first_hash;
    ...;
} fkv_chunk_info;

typedef struct fkv_seq_params {
    uint64_t request_id; uint64_t client_id; double weight; uint32_t expected_tokens;
    uint64_t tenant; uint64_t cache_salt; uint32_t shared_prefix_tokens;
    ...;
} fkv_seq_params;

typedef struct fkv_slot { uint32_t page; uint32_t slot; } fkv_slot;
typedef struct fkv_range { uint32_t start, end; } fkv_range;
typedef enum fkv_match_tiers { FKV_MATCH_DEVICE_ONLY = 0, FKV_MATCH_ALL_TIERS = 1 } fkv_match_tiers;
typedef struct fkv_match_info { uint32_t device_tokens; uint32_t host_tokens; uint64_t host_bytes; ...; } fkv_match_info;
typedef enum fkv_fetch_from { FKV_FETCH_RECOMPUTE = 1, FKV_FETCH_HOST = 2, FKV_FETCH_ALL = 3 } fkv_fetch_from;
typedef struct fkv_fetch_info { uint32_t recompute_tokens; uint32_t host_tokens; uint64_t host_bytes; ...; } fkv_fetch_info;
typedef struct fkv_reclaim_args { uint32_t sink_tokens, window_tokens; } fkv_reclaim_args;

typedef struct fkv_counters {
    uint64_t hit_tokens[3]; uint64_t miss_tokens[3]; uint64_t evicted_chunks[3];
    uint64_t evicted_pages; uint64_t prefix_query_tokens; uint64_t prefix_hit_tokens;
    uint64_t quota_overruns; uint64_t cow_copies; uint32_t pages_used; uint32_t pages_free;
    uint64_t host_demoted_chunks; uint64_t host_demoted_bytes; uint64_t host_refused_chunks;
    ...;
} fkv_counters;

const char *fkv_strerror(fkv_status st);
const char *fkv_last_error(void);
const char *fkv_dtype_name(fkv_dtype t);
const char *fkv_class_name(fkv_class c);
const char *fkv_reclaim_name(fkv_reclaim_action a);
int64_t fkv_virtual_clock_now(void *ctx);
void fkv_config_default(fkv_config *cfg);
fkv_status fkv_config_from_env(fkv_config *cfg, char *err, size_t errlen);
uint64_t fkv_config_token_bytes(const fkv_config *cfg);
const char *const *fkv_policy_names(void);

fkv_status fkv_cache_create(const fkv_config *cfg, fkv_cache **out, char *err, size_t errlen);

/* fairkv_eval.h */
typedef struct fkv_eval_config {
    uint32_t block_tokens; uint32_t class_short_max; uint32_t class_medium_max; /* next_use: not exposed */
    ...;
} fkv_eval_config;
void fkv_eval_config_default(fkv_eval_config *ev);
fkv_status fkv_eval_config_from_env(fkv_eval_config *ev, char *err, size_t errlen);
fkv_status fkv_cache_create_eval(const fkv_config *cfg, const fkv_eval_config *ev, fkv_cache **out, char *err,
                                 size_t errlen);
fkv_status fkv_seq_create_blocks(fkv_cache *c, const fkv_seq_params *p, const uint64_t *block_ids,
                                 uint32_t n_block_ids, fkv_seq **out);
void fkv_cache_destroy(fkv_cache *c);
fkv_status fkv_cache_get_info(fkv_cache *c, fkv_cache_info *out);
fkv_status fkv_cache_layer_storage(fkv_cache *c, uint32_t layer, void **k, void **v, uint64_t *page_stride);
fkv_status fkv_cache_evict(fkv_cache *c, uint32_t pages, uint32_t *freed);
fkv_status fkv_cache_set_tenant_weight(fkv_cache *c, uint64_t tenant, double weight);
fkv_status fkv_cache_tenant_info(fkv_cache *c, uint64_t tenant, fkv_tenant_info *out);
fkv_status fkv_cache_metrics_prometheus(fkv_cache *c, char *buf, size_t cap, size_t *len);
fkv_status fkv_cache_metrics_json(fkv_cache *c, char *buf, size_t cap, size_t *len);
fkv_status fkv_cache_counters(fkv_cache *c, fkv_counters *out);

void fkv_seq_params_default(fkv_seq_params *p);
fkv_status fkv_seq_create(fkv_cache *c, const fkv_seq_params *p, fkv_seq **out);
fkv_status fkv_seq_match_prefix(fkv_seq *s, const int32_t *tokens, uint32_t n, uint32_t max_tokens,
                                fkv_match_tiers tiers, fkv_match_info *out);
fkv_status fkv_seq_append(fkv_seq *s, const int32_t *tokens, uint32_t n, fkv_slot *slots);
fkv_status fkv_seq_fork(fkv_seq *s, const fkv_seq_params *p, fkv_seq **child);
void fkv_seq_free(fkv_seq *s);
fkv_status fkv_seq_touch(fkv_seq *s, uint32_t *missing);
fkv_status fkv_seq_pin(fkv_seq *s);
fkv_status fkv_seq_unpin(fkv_seq *s);
fkv_status fkv_seq_missing(fkv_seq *s, fkv_range *out, size_t cap, size_t *n);
fkv_status fkv_seq_fetch(fkv_seq *s, uint32_t start, uint32_t end, unsigned from, fkv_slot *slots,
                         fkv_fetch_info *out);
fkv_status fkv_seq_drop(fkv_seq *s, uint32_t start, uint32_t end, uint32_t *n_dropped);
fkv_status fkv_seq_reclaim(fkv_seq *s, fkv_reclaim_action a, const fkv_reclaim_args *args, uint32_t pages, uint32_t *freed);
fkv_status fkv_seq_count_preempt(fkv_seq *s, uint64_t *pages);
uint32_t fkv_seq_len(const fkv_seq *s);
uint64_t fkv_seq_tenant(const fkv_seq *s);
uint64_t fkv_seq_pages(fkv_seq *s);
uint64_t fkv_seq_id(const fkv_seq *s);
fkv_class fkv_seq_class(const fkv_seq *s);
fkv_status fkv_seq_chunks(fkv_seq *s, const fkv_chunk_view *const **chunks, size_t *n);
fkv_status fkv_seq_chunk_info(fkv_seq *s, size_t i, fkv_chunk_info *out);

typedef struct fkv_kv_geom {
    uint32_t n_layers; uint32_t n_kv_heads; uint32_t head_dim; uint32_t page_tokens;
    fkv_dtype base; uint64_t page_stride; uint32_t n_pages;
} fkv_kv_geom;
typedef struct fkv_attn_pool fkv_attn_pool;
typedef struct fkv_attn_kv { const fkv_kv_geom *geom; uint32_t layer; const void *k; const void *v; } fkv_attn_kv;
typedef struct fkv_attn_seq {
    const fkv_chunk_view *const *chunks; size_t n_chunks; const uint8_t *keep; float *mass;
} fkv_attn_seq;
fkv_status fkv_attn_pool_create(unsigned n_threads, fkv_attn_pool **out);
void fkv_attn_pool_destroy(fkv_attn_pool *p);
fkv_status fkv_attn_decode(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                           const fkv_attn_seq *seqs, size_t n_seqs, const float *q, float *out,
                           float scale, char *err, size_t errlen);
fkv_status fkv_attn_prefill(fkv_attn_pool *pool, const fkv_attn_kv *kv, uint32_t n_heads,
                            const fkv_attn_seq *seq, uint32_t q_pos0, uint32_t n_q,
                            const float *q, float *out, float scale, char *err, size_t errlen);

/* defined in the module's own source below: where the library was found */
const char *fkv_py_prefix(void);
"""


def make_ffi() -> FFI:
    cflags = shlex.split(_pkg_config("--cflags"))
    libs = shlex.split(_pkg_config("--libs"))
    libdir = _pkg_config("--variable=libdir")
    prefix = _pkg_config("--variable=prefix")
    prefix = os.path.normpath(prefix)
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        "fairkv._native",
        "#include <fairkv.h>\n#include <fairkv_eval.h>\n#include <fairkv_attn.h>\n"
        "static const char *fkv_py_prefix(void) { return " + _c_string(prefix) + "; }\n",
        include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
        extra_compile_args=[f for f in cflags if not f.startswith("-I")],
        library_dirs=[f[2:] for f in libs if f.startswith("-L")],
        libraries=[f[2:] for f in libs if f.startswith("-l")],
        # the extension finds the library where pkg-config found it
        extra_link_args=["-Wl,-rpath," + os.path.normpath(libdir)],
    )
    return ffi


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


ffi = make_ffi()

if __name__ == "__main__":
    ffi.compile(verbose=True)
