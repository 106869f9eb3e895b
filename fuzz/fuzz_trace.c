/* libFuzzer target for the trace readers and the Vidur profile reader:
 * any input must parse or fail with FKV_EPARSE (never crash, leak or read
 * out of bounds), and a parsed workload must be sorted with valid sizes.
 * The first byte picks the format (auto, azure, mooncake, plain, vidur). */
#include <stdint.h>
#include <stdlib.h>

#include "sim/profile.h"
#include "sim/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned sel = data[0] % 5;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    char err[256];
    if (sel == 4) {
        uint32_t *t;
        double *ms;
        size_t n;
        if (fkv_vidur_parse(buf, len, "fuzz", 32, 1, &t, &ms, &n, err, sizeof err) == FKV_OK) {
            for (size_t i = 1; i < n; i++)
                if (t[i] <= t[i - 1]) abort();
            free(t);
            free(ms);
        }
        return 0;
    }
    fkv_workload w;
    fkv_status st = fkv_trace_parse(buf, len, "fuzz", (fkv_trace_format)sel, 0, 3, &w, err, sizeof err);
    if (st == FKV_OK) {
        for (size_t i = 0; i < w.n; i++) {
            const fkv_req *r = &w.reqs[i];
            if (r->prompt < 1 || r->output < 1 || r->id != i + 1 || r->client >= 3) abort();
            if (r->tag >= w.n_src || !w.src) abort(); /* a trace's requests all have a source */
            const fkv_req_src *q = &w.src[r->tag];
            if (r->shared_tokens > r->prompt || (!r->shared_tokens && q->shared_seed)) abort();
            if (i && r->arrival_ns < w.reqs[i - 1].arrival_ns) abort();
            for (uint32_t b = 0; b < q->n_block_ids; b++) (void)q->block_ids[b];
        }
        fkv_workload_free(&w);
    } else if (st != FKV_EPARSE && st != FKV_ENOMEM) {
        abort();
    }
    return 0;
}
