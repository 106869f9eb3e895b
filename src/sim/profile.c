/* Cost profiles (see profile.h) and the Vidur CSV reader. */
#include "sim/profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* Model geometries.  Sources: GPT-3 175B, Brown et al. 2020, table 2.1
 * (96 layers, d_model 12288, 96 heads of 128); Llama 2, Touvron et al.
 * 2023 and the released config.json files (7B: 32 layers, 32 heads; 13B: 40
 * and 40; 70B: 80 layers, 64 query heads, 8 KV heads (GQA); head_dim 128;
 * context 4096); Llama 3 8B config.json (32 layers, 8 KV heads, 8192). */
static const fkv_model_geom models[] = {
    {"gpt3-175b", 96, 96, 96, 128, 2, 2048, 175e9, "Brown et al. 2020, table 2.1"},
    {"llama-2-7b", 32, 32, 32, 128, 2, 4096, 6.74e9, "Touvron et al. 2023; HF config.json"},
    {"llama-2-13b", 40, 40, 40, 128, 2, 4096, 13.0e9, "Touvron et al. 2023; HF config.json"},
    {"llama-2-70b", 80, 64, 8, 128, 2, 4096, 69.0e9, "Touvron et al. 2023; HF config.json (GQA, 8 KV heads)"},
    {"llama-3-8b", 32, 32, 8, 128, 2, 8192, 8.03e9, "Meta Llama 3 8B config.json"},
    /* the engine's random test model with f32 K/V (docs/ENGINE.md) */
    {"fairkv-tiny", 4, 4, 2, 32, 4, 1024, 1017344, "fairkv model init --preset tiny"},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL},
};

const fkv_model_geom *fkv_model_list(size_t *n)
{
    if (n) *n = sizeof models / sizeof models[0] - 1;
    return models;
}

const fkv_model_geom *fkv_model_find(const char *name)
{
    for (const fkv_model_geom *m = models; m->name; m++)
        if (!strcmp(m->name, name)) return m;
    return NULL;
}

uint64_t fkv_model_token_bytes(const fkv_model_geom *m)
{
    return 2ULL * m->n_layers * m->n_kv_heads * m->head_dim * m->dtype_bytes;
}

/* Hardware figures.  HBM bandwidth and dense fp16 tensor peak: NVIDIA A100
 * datasheet (80GB SXM: 2,039 GB/s, 312 TFLOPS), NVIDIA H100 datasheet (SXM:
 * 3.35 TB/s, 989 TFLOPS).  PCIe per direction: Gen4 x16 32 GB/s (A100),
 * Gen5 x16 64 GB/s (H100).  Attention efficiency 0.5: FlashAttention-2
 * (Dao 2023) reaches 50-73% of peak in the forward pass on A100; we take the
 * low end since short sequences run below the peak. */
#define A100_HBM 2.039e12
#define A100_FLOPS 312e12
#define A100_PCIE 32e9
#define A100_MEM 80e9
#define H100_HBM 3.35e12
#define H100_FLOPS 989e12
#define H100_PCIE 64e9
#define H100_MEM 80e9

typedef struct pdef {
    const char *name, *gpu, *model, *file;
    uint32_t tp;
    const uint32_t *tok;
    const double *ms;
    const size_t *n;
    double hbm, flops, pcie, mem;
    double efficiency, overhead_ms; /* 0, 0: 0.5 and none (the GPU profiles) */
    double per_request_ms;          /* 0 but in fitted CPU profiles */
    const char *source;             /* NULL: the Vidur + datasheet sentence */
} pdef;

/* cpu-tiny: the engine (src/engine) serving the tiny random model on this
 * project's build machine, one engine thread, f32 K/V, 64-token chunks,
 * 256 tokens a step, behind `fairkv serve` with `fairkv load` on the same
 * cores.  Measured, not taken from a source (scripts/fidelity.sh, first
 * run's calibration, before any comparison of that run):
 *
 *   fairkv model init --preset tiny --out tiny.gguf
 *   fairkv load --workload seed --rate 8 --duration 40 --max-total 1024 --seed 2 --clients 8 \
 *       --write-trace calib-workload.csv
 *   fairkv serve --model tiny.gguf --kv-budget 4194304 --chunk-tokens 64 --threads 1 \
 *       --max-batch-tokens 256 --max-running 16 --backend-opt ignore_eos=1 \
 *       --policy flru --quotas on --dynamic-chunking off --step-log steps-calib.log &
 *   fairkv load --url http://127.0.0.1:PORT --workload calib-workload.csv --clients 8
 *   fairkv bench --calibrate-log steps-calib.log
 *
 * on 2026-11-29 11:53-11:54 UTC, `nproc` 2, `lscpu` "Model name: AMD EPYC",
 * `uptime` load average 1.02-1.45 (the 2 cores are shared with other
 * jobs).  9364 served steps, least squares weighted 1 / expected step time
 * (stepfit.c); the per-request term kept because it lowers the held-out
 * error (fitted on one half of the steps, priced on the other) from 19.9%
 * to 15.3% a step:
 *   step ms = 0.204025 + 0.299427 x tokens + 7.48289e-05 x attention work
 *           + 0.160692 x requests
 * R^2 0.989, mean |error| per step 14.6%, total time +0.0%.  The linear
 * table below is exactly 0.299427 ms a token; the attention "peak" is
 * 4 L H D / c2 = 2048 / 7.48289e-05 ms = 2.73691e10 FLOP/s at efficiency 1
 * with no memory term, which reproduces c2 x attention work
 * (fkv_profile_attn_ms); per_request_ms = 0.160692.  The previous
 * calibration (the engine alone, `fairkv bench --calibrate tiny.gguf
 * --threads 1`, 2026-11-29 10:51 UTC, 3 terms weighted 1 / measured ms):
 * 0.385413 + 0.299448 x tokens + 5.82354e-05 x attention work. */
static const uint32_t cpu_tiny_tok[] = {1, 4096};
static const double cpu_tiny_ms[] = {0.299427, 0.299427 * 4096};
static const size_t cpu_tiny_n = 2;

static const pdef pdefs[] = {
    {"a100-llama2-7b", "A100-80GB-SXM", "llama-2-7b", "a100_Llama-2-7b-hf_mlp.csv", 1,
     fkv__vidur_a100_llama2_7b_tokens, fkv__vidur_a100_llama2_7b_ms, &fkv__vidur_a100_llama2_7b_n,
     A100_HBM, A100_FLOPS, A100_PCIE, A100_MEM, 0, 0, 0, NULL},
    {"h100-llama2-7b", "H100-SXM", "llama-2-7b", "h100_Llama-2-7b-hf_mlp.csv", 1,
     fkv__vidur_h100_llama2_7b_tokens, fkv__vidur_h100_llama2_7b_ms, &fkv__vidur_h100_llama2_7b_n,
     H100_HBM, H100_FLOPS, H100_PCIE, H100_MEM, 0, 0, 0, NULL},
    {"a100-llama2-70b", "4x A100-80GB-SXM", "llama-2-70b", "a100_Llama-2-70b-hf_mlp.csv", 4,
     fkv__vidur_a100_llama2_70b_tokens, fkv__vidur_a100_llama2_70b_ms, &fkv__vidur_a100_llama2_70b_n,
     A100_HBM, A100_FLOPS, A100_PCIE, A100_MEM, 0, 0, 0, NULL},
    {"h100-llama2-70b", "4x H100-SXM", "llama-2-70b", "h100_Llama-2-70b-hf_mlp.csv", 4,
     fkv__vidur_h100_llama2_70b_tokens, fkv__vidur_h100_llama2_70b_ms, &fkv__vidur_h100_llama2_70b_n,
     H100_HBM, H100_FLOPS, H100_PCIE, H100_MEM, 0, 0, 0, NULL},
    {"cpu-tiny", "CPU (1 engine thread)", "fairkv-tiny", NULL, 1, cpu_tiny_tok, cpu_tiny_ms, &cpu_tiny_n, 0,
     2.73691e10, 0, 0, 1.0, 0.204025, 0.160692,
     "measured: fairkv serve --step-log + fairkv bench --calibrate-log (weighted least-squares fit of the served "
     "engine's step times; see profile.c)"},
};
#define N_PDEFS (sizeof pdefs / sizeof pdefs[0])

const char *const *fkv_profile_names(void)
{
    static const char *names[N_PDEFS + 1];
    for (size_t i = 0; i < N_PDEFS; i++) names[i] = pdefs[i].name;
    names[N_PDEFS] = NULL;
    return names;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (n < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

fkv_status fkv_profile_get(const char *name, const char *data_dir, fkv_profile *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const pdef *d = NULL;
    for (size_t i = 0; i < N_PDEFS; i++)
        if (!strcmp(pdefs[i].name, name)) d = &pdefs[i];
    if (!d) {
        if (err) {
            int k = snprintf(err, errlen, "unknown profile '%s' (known:", name);
            for (size_t i = 0; i < N_PDEFS && k > 0 && (size_t)k < errlen; i++)
                k += snprintf(err + k, errlen - (size_t)k, " %s", pdefs[i].name);
            if (k > 0 && (size_t)k < errlen) snprintf(err + k, errlen - (size_t)k, ")");
        }
        return FKV_ENOENT;
    }
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->gpu = d->gpu;
    out->model = fkv_model_find(d->model);
    out->tp = d->tp;
    out->lin_tokens = d->tok;
    out->lin_ms = d->ms;
    out->n_lin = *d->n;
    out->hbm_bytes_per_s = d->hbm;
    out->peak_flops = d->flops;
    out->attn_efficiency = d->efficiency > 0 ? d->efficiency : 0.5;
    out->pcie_bytes_per_s = d->pcie;
    out->overhead_ms = d->overhead_ms;
    out->per_request_ms = d->per_request_ms;
    out->gpu_mem_bytes = d->mem;
    out->source = d->source ? d->source
                            : "linear ops: Vidur profiles (microsoft/vidur, MIT), mean of measured per-operator times; "
                              "attention: KV bytes / HBM bandwidth and FLOPs / (0.5 x peak), NVIDIA datasheets";
    if (d->file && data_dir && *data_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vidur/%s", data_dir, d->file);
        size_t len;
        char *buf = read_all(path, &len);
        if (buf) {
            fkv_status st = fkv_vidur_parse(buf, len, d->file, out->model->n_layers, d->tp, &out->own_tokens,
                                            &out->own_ms, &out->n_lin, err, errlen);
            free(buf);
            if (st) return st;
            out->lin_tokens = out->own_tokens;
            out->lin_ms = out->own_ms;
            out->from_data = 1;
        }
    }
    return FKV_OK;
}

fkv_status fkv_profile_check_coeffs(const double *c, size_t n, char *err, size_t errlen)
{
    static const char *const what[] = {"c0 (ms a step)", "c1 (ms a token)", "c2 (ms a unit of attention work)",
                                       "c3 (ms a request)", "c4 (ms a full-precision K/V byte read)",
                                       "c5 (ms an int8 K/V byte read)", "c6 (ms an int4 K/V byte read)"};
    if (n != 3 && n != 4 && n != 7) {
        if (err)
            snprintf(err, errlen, "step coefficients: %zu values, expected 3, 4 or 7 (c0,c1,c2[,c3[,c4,c5,c6]])", n);
        return FKV_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(c[i]) || (i == 1 && c[i] <= 0) || ((i == 2 || i >= 4) && c[i] < 0)) {
            if (err)
                snprintf(err, errlen, "step coefficient %s: %g (must be finite%s)", what[i], c[i],
                         i == 1 ? " and > 0" : i == 2 || i >= 4 ? " and >= 0" : "");
            return FKV_EINVAL;
        }
    double c3 = n >= 4 ? c[3] : 0;
    if (!(c[0] + c[1] + c3 > 0)) {
        if (err) snprintf(err, errlen, "step coefficients: c0 + c1 + c3 = %g ms: a one-token step must cost time",
                          c[0] + c[1] + c3);
        return FKV_EINVAL;
    }
    return FKV_OK;
}

fkv_status fkv_profile_set_coeffs(fkv_profile *p, const double *c, size_t n, char *err, size_t errlen)
{
    fkv_status st = fkv_profile_check_coeffs(c, n, err, errlen);
    if (st) return st;
    double c3 = n >= 4 ? c[3] : 0;
    if (!p->model) {
        if (err) snprintf(err, errlen, "step coefficients: profile %s has no model geometry", p->name);
        return FKV_EINVAL;
    }
    uint32_t *t = malloc(2 * sizeof *t);
    double *v = malloc(2 * sizeof *v);
    if (!t || !v) {
        free(t);
        free(v);
        return FKV_ENOMEM;
    }
    /* the same two-point table as the built-in cpu-tiny: c1 ms a token
     * (fkv_profile_linear_ms interpolates, and extrapolates the slope) */
    t[0] = 1;
    t[1] = 4096;
    v[0] = c[1];
    v[1] = c[1] * 4096;
    fkv_profile_free(p);
    p->own_tokens = t;
    p->own_ms = v;
    p->lin_tokens = t;
    p->lin_ms = v;
    p->n_lin = 2;
    p->from_data = 0;
    const fkv_model_geom *m = p->model;
    double per = 4.0 * m->n_layers * m->n_heads * m->head_dim;
    /* fkv_profile_attn_ms: 1e3 x per x A / (tp x peak) ms = c2 x A */
    p->peak_flops = c[2] > 0 ? per * 1e3 / (c[2] * p->tp) : 0;
    p->attn_efficiency = 1.0;
    p->hbm_bytes_per_s = 0;
    p->overhead_ms = c[0];
    p->per_request_ms = c3;
    for (int k = 0; k < 3; k++) p->kv_byte_ms[k] = n == 7 ? c[4 + k] : 0;
    p->source = "fitted step coefficients (fairkv bench --step-coeffs, from fairkv bench --calibrate)";
    return FKV_OK;
}

void fkv_profile_free(fkv_profile *p)
{
    free(p->own_tokens);
    free(p->own_ms);
    p->own_tokens = NULL;
    p->own_ms = NULL;
}

double fkv_profile_linear_ms(const fkv_profile *p, uint32_t n)
{
    if (n == 0 || p->n_lin == 0) return 0;
    const uint32_t *t = p->lin_tokens;
    const double *v = p->lin_ms;
    if (p->n_lin == 1) return v[0] * n / t[0];
    if (n <= t[0]) return v[0]; /* a step costs at least the smallest measured one */
    size_t lo = 0, hi = p->n_lin - 1;
    if (n >= t[hi]) {
        /* beyond the table: the last segment's slope (linear-op time is
         * linear in tokens at these sizes) */
        double slope = (v[hi] - v[hi - 1]) / (t[hi] - t[hi - 1]);
        if (slope < 0) slope = v[hi] / t[hi];
        return v[hi] + slope * (n - t[hi]);
    }
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t[mid] <= n) lo = mid;
        else hi = mid;
    }
    return v[lo] + (v[hi] - v[lo]) * (double)(n - t[lo]) / (double)(t[hi] - t[lo]);
}

double fkv_profile_attn_ms(const fkv_profile *p, uint32_t ctx, uint32_t n_new, uint32_t n_recomputed)
{
    return fkv_profile_attn_ms_kv(p, ctx, n_new, n_recomputed, 1.0);
}

double fkv_profile_attn_ms_kv(const fkv_profile *p, uint32_t ctx, uint32_t n_new, uint32_t n_recomputed,
                              double kv_factor)
{
    const fkv_model_geom *m = p->model;
    if (!m) return 0;
    double mem = 0, comp = 0;
    if (p->hbm_bytes_per_s > 0) {
        mem = (double)(ctx + n_new) * (double)fkv_model_token_bytes(m) / p->tp / p->hbm_bytes_per_s;
        if (kv_factor != 1.0) mem *= kv_factor; /* skipped at 1: the old sums bit for bit */
    }
    if (p->peak_flops > 0) {
        /* QK^T and PV: 2 matmuls x 2 FLOPs per multiply-add, per query token
         * and key; a prefill chunk's queries see ctx plus half the chunk on
         * average (causal); recomputed tokens lie inside ctx (half of it). */
        double per = 4.0 * m->n_layers * m->n_heads * m->head_dim;
        double q = (double)n_new * ((double)ctx + (n_new + 1) / 2.0) + (double)n_recomputed * ctx / 2.0;
        comp = per * q / (p->tp * p->peak_flops * p->attn_efficiency);
    }
    return 1e3 * (mem > comp ? mem : comp);
}

int64_t fkv_profile_step_ns(const fkv_profile *p, const fkv_batch *b, fkv_miss_mode miss)
{
    return fkv_profile_step_ns_kv(p, b, miss, NULL);
}

int64_t fkv_profile_step_ns_kv(const fkv_profile *p, const fkv_batch *b, fkv_miss_mode miss, const double *kv_factor)
{
    if (b->n == 0) return 0;
    double ms = p->overhead_ms + fkv_profile_linear_ms(p, b->tokens);
    /* only fitted CPU profiles have it; skipping 0 keeps the others' sums
     * bit for bit what they were */
    if (p->per_request_ms != 0) ms += p->per_request_ms * (double)b->n;
    for (size_t i = 0; i < b->n; i++) {
        const fkv_batch_item *it = &b->items[i];
        ms += fkv_profile_attn_ms_kv(p, it->ctx, it->n_new, miss == FKV_MISS_RECOMPUTE ? it->n_restored : 0,
                                     kv_factor ? kv_factor[i] : 1.0);
    }
    /* host-tier reloads: the miss mode's, and offloaded chunks copied back */
    if ((b->reload_tokens || b->host_tokens) && p->pcie_bytes_per_s > 0 && p->model)
        ms += 1e3 * (double)(b->reload_tokens + b->host_tokens) * (double)fkv_model_token_bytes(p->model) / p->tp /
              p->pcie_bytes_per_s;
    int64_t ns = llround(ms * 1e6);
    return ns > 0 ? ns : 1;
}

/* ---------------------------------------------------------------- Vidur CSV */

static const char *const vidur_ops[] = {"input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                                        "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj",
                                        "add"};
#define N_VOPS (sizeof vidur_ops / sizeof vidur_ops[0])

typedef struct vrow {
    uint32_t n;
    size_t idx;
    double layer, emb;
} vrow;

static int cmp_vrow(const void *a, const void *b)
{
    const vrow *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

fkv_status fkv_vidur_parse(const char *buf, size_t len, const char *fname, uint32_t n_layers, uint32_t tp,
                           uint32_t **tokens, double **ms, size_t *n_out, char *err, size_t errlen)
{
    *tokens = NULL;
    *ms = NULL;
    *n_out = 0;
    enum { MAXCOL = 128 };
    int col_op[N_VOPS], col_emb = -1, col_ntok = -1, col_tp = -1;
    for (size_t i = 0; i < N_VOPS; i++) col_op[i] = -1;
    vrow *rows = NULL;
    size_t nrows = 0, caprows = 0, line = 0, pos = 0;
    char *lb = NULL;
    size_t lcap = 0;
    fkv_status st = FKV_OK;
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - buf - pos) : len - pos;
        line++;
        if (l + 1 > lcap) {
            lcap = l + 1;
            char *nb = realloc(lb, lcap);
            if (!nb) {
                st = FKV_ENOMEM;
                break;
            }
            lb = nb;
        }
        memcpy(lb, buf + pos, l);
        lb[l] = 0;
        pos += l + 1;
        if (l && lb[l - 1] == '\r') lb[--l] = 0;
        if (!l) continue;
        char *f[MAXCOL];
        int nf = 0;
        f[nf++] = lb;
        for (char *c = lb; *c && nf < MAXCOL; c++)
            if (*c == ',') {
                *c = 0;
                f[nf++] = c + 1;
            }
        if (line == 1) {
            char want[96];
            for (int i = 0; i < nf; i++) {
                for (size_t k = 0; k < N_VOPS; k++) {
                    snprintf(want, sizeof want, "time_stats.%s.mean", vidur_ops[k]);
                    if (!strcmp(f[i], want)) col_op[k] = i;
                }
                if (!strcmp(f[i], "time_stats.emb.mean")) col_emb = i;
                if (!strcmp(f[i], "num_tokens")) col_ntok = i;
                if (!strcmp(f[i], "num_tensor_parallel_workers")) col_tp = i;
            }
            for (size_t k = 0; k < N_VOPS; k++)
                if (col_op[k] < 0) {
                    st = fkv_err_at(err, errlen, fname, line, "header lacks time_stats.%s.mean", vidur_ops[k]);
                    goto out;
                }
            if (col_emb < 0 || col_ntok < 0 || col_tp < 0) {
                st = fkv_err_at(err, errlen, fname, line,
                    "header lacks emb, num_tokens or num_tensor_parallel_workers");
                goto out;
            }
            continue;
        }
        if (col_ntok < 0) {
            st = fkv_err_at(err, errlen, fname, line, "no header");
            goto out;
        }
        int maxc = col_emb > col_ntok ? col_emb : col_ntok;
        if (col_tp > maxc) maxc = col_tp;
        for (size_t k = 0; k < N_VOPS; k++)
            if (col_op[k] > maxc) maxc = col_op[k];
        if (nf <= maxc) {
            st = fkv_err_at(err, errlen, fname, line, "%d fields, expected at least %d", nf, maxc + 1);
            goto out;
        }
        char *end;
        long t = strtol(f[col_tp], &end, 10);
        if (*end || end == f[col_tp]) {
            st = fkv_err_at(err, errlen, fname, line, "field num_tensor_parallel_workers: '%.20s'", f[col_tp]);
            goto out;
        }
        if ((uint32_t)t != tp) continue;
        long ntok = strtol(f[col_ntok], &end, 10);
        if (*end || end == f[col_ntok] || ntok <= 0 || ntok > 1 << 24) {
            st = fkv_err_at(err, errlen, fname, line, "field num_tokens: '%.20s'", f[col_ntok]);
            goto out;
        }
        vrow r = {(uint32_t)ntok, nrows, 0.0, 0.0};
        for (size_t k = 0; k < N_VOPS; k++) {
            errno = 0;
            double v = strtod(f[col_op[k]], &end);
            if (*end || end == f[col_op[k]] || errno || !(v >= 0)) {
                st = fkv_err_at(err, errlen, fname, line,
                    "field time_stats.%s.mean: '%.20s'", vidur_ops[k], f[col_op[k]]);
                goto out;
            }
            r.layer += v;
        }
        r.emb = strtod(f[col_emb], &end);
        if (*end || end == f[col_emb] || !(r.emb >= 0)) {
            st = fkv_err_at(err, errlen, fname, line, "field time_stats.emb.mean: '%.20s'", f[col_emb]);
            goto out;
        }
        if (nrows == caprows) {
            caprows = caprows ? caprows * 2 : 512;
            vrow *nr = realloc(rows, caprows * sizeof *rows);
            if (!nr) {
                st = FKV_ENOMEM;
                goto out;
            }
            rows = nr;
        }
        rows[nrows++] = r;
    }
    if (!nrows) {
        st = fkv_err_at(err, errlen, fname, line, "no rows with num_tensor_parallel_workers = %u", tp);
        goto out;
    }
    qsort(rows, nrows, sizeof *rows, cmp_vrow);
    *tokens = malloc(nrows * sizeof **tokens);
    *ms = malloc(nrows * sizeof **ms);
    if (!*tokens || !*ms) {
        st = FKV_ENOMEM;
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < nrows;) {
        double layer = 0.0, emb = 0.0;
        size_t j = i;
        for (; j < nrows && rows[j].n == rows[i].n; j++) {
            layer += rows[j].layer;
            emb += rows[j].emb;
        }
        double cnt = (double)(j - i);
        (*tokens)[k] = rows[i].n;
        (*ms)[k] = (double)n_layers * (layer / cnt) + emb / cnt;
        k++;
        i = j;
    }
    *n_out = k;
out:
    free(lb);
    free(rows);
    if (st) {
        free(*tokens);
        free(*ms);
        *tokens = NULL;
        *ms = NULL;
    }
    return st;
}
