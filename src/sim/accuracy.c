/* The precision mix of a row and its measured accuracy (accuracy.h). */
#include "sim/accuracy.h"

#include <stdio.h>
#include <string.h>

const fkv_accuracy_row *fkv_accuracy_find(const char *kv, uint32_t chunk, uint32_t hot)
{
    if (!kv) return NULL;
    for (size_t i = 0; i < fkv_accuracy_n_rows; i++) {
        const fkv_accuracy_row *r = &fkv_accuracy_rows[i];
        if (r->chunk == chunk && r->hot == hot && !strcmp(r->kv, kv)) return r;
    }
    return NULL;
}

static void set_kv(fkv_accuracy *a, const char *kv)
{
    snprintf(a->kv, sizeof a->kv, "%s", kv ? kv : "");
    snprintf(a->kv_csv, sizeof a->kv_csv, "%s", a->kv);
    for (char *p = a->kv_csv; *p; p++)
        if (*p == ',') *p = '+';
}

void fkv_accuracy_none(fkv_accuracy *a, const char *kv, const char *why)
{
    memset(a, 0, sizeof *a);
    set_kv(a, kv);
    a->hot = a->kld_mean = a->kld_p99 = a->top1 = -1;
    snprintf(a->rule, sizeof a->rule, "n/m");
    snprintf(a->source, sizeof a->source, "not measured: %s", why);
}

/* The table's figures for (kv, chunk, hot) into a, or not measured. */
static void look_up(fkv_accuracy *a, const char *kv, uint32_t chunk, uint32_t hot, const char *rule)
{
    const fkv_accuracy_row *r = fkv_accuracy_find(kv, chunk, hot);
    if (!r) {
        char why[120];
        snprintf(why, sizeof why, "%s at chunk %u, hot %u is not in the table (scripts/accuracy_table.sh)", kv, chunk,
                 hot);
        fkv_accuracy_none(a, kv, why);
        a->hot = hot;
        return;
    }
    memset(a, 0, sizeof *a);
    set_kv(a, kv);
    a->hot = hot;
    a->kld_mean = r->kld_mean;
    a->kld_p99 = r->kld_p99;
    a->top1 = r->top1;
    snprintf(a->rule, sizeof a->rule, "%s", rule);
    snprintf(a->source, sizeof a->source, "stories260K, fairkv model eval --kv %s --chunk %u --hot %u (commit %s)", kv,
             chunk, hot, fkv_accuracy_commit);
}

void fkv_accuracy_of(const fkv_scheme *sc, const fkv_sim_config *cfg, fkv_accuracy *out)
{
    /* the reclaim list the run uses: --reclaim's, else the scheme's */
    fkv_reclaim_action list[FKV_N_RECLAIM];
    uint32_t n = 0;
    if (cfg->reclaim_set) {
        n = cfg->sched.n_reclaim < FKV_N_RECLAIM ? cfg->sched.n_reclaim : FKV_N_RECLAIM;
        memcpy(list, cfg->sched.reclaim, n * sizeof *list);
    } else if (sc && sc->reclaim) {
        char why[160];
        if (fkv_sched_parse_reclaim(sc->reclaim, list, &n, why, sizeof why)) {
            fkv_accuracy_none(out, "", "the scheme's reclaim list does not parse");
            return;
        }
    }
    int q8 = 0, q4 = 0, drop = 0;
    for (uint32_t i = 0; i < n; i++) {
        q8 |= list[i] == FKV_RECLAIM_QUANTIZE8;
        q4 |= list[i] == FKV_RECLAIM_QUANTIZE4;
        drop |= list[i] == FKV_RECLAIM_DROP;
    }
    fkv_quant_mode qm = fkv_sim_quant_mode(cfg, sc);
    int quant = sc && qm != FKV_QUANT_OFF;
    if (!sc) quant = q8 = q4 = drop = 0; /* no cache: nothing is quantized */
    if (drop) {
        fkv_accuracy_none(out, "", "reclaim drop (attention sparsity) is not measured");
        return;
    }
    if (sc && sc->kv_fp8) {
        if (quant || q8 || q4) fkv_accuracy_none(out, "", "an fp8 cache quantized further is not measured");
        else look_up(out, "fp8", 1, 0, "exact");
        return;
    }
    if (!quant && !q8 && !q4) {
        look_up(out, "f16", 1, 0, "exact");
        return;
    }
    if (sc->dynamic_chunking) {
        fkv_accuracy_none(out, "", "dynamic chunking (chunks of varying size) is not measured");
        return;
    }
    fkv_dtype qd = fkv_sim_quant_dtype(cfg, sc);
    int int4_direct = q4 || (quant && qd == FKV_INT4);
    int int8 = q8 || (quant && qd == FKV_INT8);
    int ladder = quant && qd == FKV_INT8 && cfg->quant_warm > 0;
    char kv[24];
    if (int4_direct) snprintf(kv, sizeof kv, "%s", int8 ? "int8:0,int4" : "int4");
    else if (ladder) snprintf(kv, sizeof kv, "int8:%u,int4", cfg->quant_warm);
    else snprintf(kv, sizeof kv, "int8");
    /* exact when every cold chunk is quantized as it turns cold and no
     * reclaim action goes deeper */
    int exact = qm == FKV_QUANT_ALWAYS && !q4 && !(q8 && qd != FKV_INT8);
    look_up(out, kv, sc->chunk_tokens, fkv_sim_quant_hot(cfg, sc), exact ? "always" : "worst case");
}
