/* Cost profiles: how long one engine step takes, from measured operator
 * times and hardware figures, each named with its source.
 *
 * step time = overhead
 *           + linear(compute tokens)            Vidur's measured per-operator
 *                                               times (QKV/out projections,
 *                                               MLP, norms, rope, residual
 *                                               add, embedding), interpolated
 *                                               in num_tokens
 *           + sum over requests of attention    max(KV bytes read / HBM
 *                                               bandwidth, FLOPs / (peak x
 *                                               efficiency)), per GPU of the
 *                                               tensor-parallel group
 *           + reloaded KV bytes / PCIe bandwidth (host tier, when enabled)
 * where compute tokens = new tokens + recomputed tokens of the step.
 *
 * Not modelled (the sources lack them): the LM head, all-reduce time of
 * tensor parallelism, CPU scheduling overhead (overhead = 0 in the GPU
 * profiles).  All schemes share the profile, so these omissions shift every
 * scheme's latencies alike.
 */
#ifndef FKV_SIM_PROFILE_H
#define FKV_SIM_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "sched/sched.h"

typedef struct fkv_model_geom {
    const char *name;
    uint32_t n_layers, n_heads, n_kv_heads, head_dim;
    uint32_t dtype_bytes; /* 2: fp16 KV */
    uint32_t context;     /* native context length, tokens */
    double params;        /* parameters (for weight bytes) */
    const char *source;
} fkv_model_geom;

/* NULL-terminated list; lookup by name ("llama-2-7b", "gpt3-175b", ...). */
const fkv_model_geom *fkv_model_list(size_t *n);
const fkv_model_geom *fkv_model_find(const char *name);
/* 2 (K and V) x layers x kv_heads x head_dim x bytes */
uint64_t fkv_model_token_bytes(const fkv_model_geom *m);

typedef struct fkv_profile {
    char name[48];
    const char *gpu;
    const char *source; /* where the numbers come from */
    const fkv_model_geom *model;
    uint32_t tp;            /* tensor-parallel GPUs sharing the work */
    const uint32_t *lin_tokens; /* [n_lin] ascending */
    const double *lin_ms;       /* [n_lin] forward time of the linear ops */
    size_t n_lin;
    double hbm_bytes_per_s;  /* per GPU; 0 = attention memory time ignored */
    double peak_flops;       /* dense fp16 tensor, per GPU; 0 = ignored */
    double attn_efficiency;  /* achieved / peak for attention FLOPs */
    double pcie_bytes_per_s; /* host-tier reload, per direction */
    double overhead_ms;      /* per step */
    double per_request_ms;   /* per batch item of a step (0 but in fitted CPU profiles) */
    /* fitted 7-term profiles only (all 0 otherwise): attention's time per
     * byte of K/V read, ms, by stored precision: [0] full precision (fp16
     * in the simulator), [1] int8, [2] int4 (codes and scales); the
     * simulator adds sum of bytes x price per item (sim.c) */
    double kv_byte_ms[3];
    double gpu_mem_bytes;    /* per GPU */
    int from_data;           /* 1: linear table parsed from the data files */
    uint32_t *own_tokens;    /* allocated tables (parsed) */
    double *own_ms;
} fkv_profile;

const char *const *fkv_profile_names(void); /* NULL-terminated */

/* Fills a named profile.  With data_dir (may be NULL) holding
 * vidur/<gpu>_<model>_mlp.csv, the linear table is parsed from it (and is
 * identical to the embedded one, which is used otherwise). */
fkv_status fkv_profile_get(const char *name, const char *data_dir, fkv_profile *out, char *err,
                           size_t errlen);
void fkv_profile_free(fkv_profile *p);

/* Replaces p's step cost by the fitted form of `fairkv bench --calibrate`
 * (src/engine/steplog.h), c[0..n) with n 3, 4 or 7 (c3 = 0 when 3), ms:
 *   step ms = c0 + c1 x tokens + c2 x attention work + c3 x requests
 *             [+ c4, c5, c6 x K/V bytes read at full precision, int8, int4]
 * as overhead_ms = c0, a linear table of c1 a token, an attention "peak"
 * of 4 L H D / c2 at efficiency 1 with no memory term (which prices c2 x
 * attention work), per_request_ms = c3, kv_byte_ms = c4..c6.  FKV_EINVAL
 * (err says which) when n is not 3, 4 or 7, a value is not finite, c1 <= 0,
 * c2 < 0, c4..c6 < 0, or a one-token
 * one-request step would cost nothing or less (c0 + c1 + c3 <= 0). */
fkv_status fkv_profile_set_coeffs(fkv_profile *p, const double *c, size_t n, char *err, size_t errlen);
/* The checks of fkv_profile_set_coeffs alone (option parsing). */
fkv_status fkv_profile_check_coeffs(const double *c, size_t n, char *err, size_t errlen);

/* Linear-operator time of one forward pass over n tokens, ms (0 for 0). */
double fkv_profile_linear_ms(const fkv_profile *p, uint32_t n);
/* Attention time of one request's share of a step, ms. */
double fkv_profile_attn_ms(const fkv_profile *p, uint32_t ctx, uint32_t n_new, uint32_t n_recomputed);
/* Duration of a step, ns (deterministic: computed in a fixed order). */
int64_t fkv_profile_step_ns(const fkv_profile *p, const fkv_batch *b, fkv_miss_mode miss);
/* The same, with attention's memory time scaled per item by kv_factor[i]:
 * the bytes the item's K/V take at their stored precisions (codes and
 * scales) over the same tokens at fp16 (1: fkv_profile_step_ns).  NULL:
 * all 1. */
int64_t fkv_profile_step_ns_kv(const fkv_profile *p, const fkv_batch *b, fkv_miss_mode miss, const double *kv_factor);
double fkv_profile_attn_ms_kv(const fkv_profile *p, uint32_t ctx, uint32_t n_new, uint32_t n_recomputed,
                              double kv_factor);

/* Parses a Vidur mlp.csv into the table described in
 * scripts/gen_vidur_tables.py.  FKV_EPARSE names file, line and field. */
fkv_status fkv_vidur_parse(const char *buf, size_t len, const char *fname, uint32_t n_layers, uint32_t tp,
                           uint32_t **tokens, double **ms, size_t *n, char *err, size_t errlen);

/* generated tables (vidur_tables.c) */
extern const uint32_t fkv__vidur_a100_llama2_7b_tokens[];
extern const double fkv__vidur_a100_llama2_7b_ms[];
extern const size_t fkv__vidur_a100_llama2_7b_n;
extern const uint32_t fkv__vidur_h100_llama2_7b_tokens[];
extern const double fkv__vidur_h100_llama2_7b_ms[];
extern const size_t fkv__vidur_h100_llama2_7b_n;
extern const uint32_t fkv__vidur_a100_llama2_70b_tokens[];
extern const double fkv__vidur_a100_llama2_70b_ms[];
extern const size_t fkv__vidur_a100_llama2_70b_n;
extern const uint32_t fkv__vidur_h100_llama2_70b_tokens[];
extern const double fkv__vidur_h100_llama2_70b_ms[];
extern const size_t fkv__vidur_h100_llama2_70b_n;

#endif
