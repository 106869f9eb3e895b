/* The shared Mooncake trace replayed by its blocks (`fairkv load
 * --trace-blocks 16`): the prompts sent share exactly the prefixes the
 * trace's hash_ids say they share.  Over one pass of the trace, a prompt
 * block counts as a hit when the same prefix was seen before, once
 * counted on the hash_ids (the trace's own word) and once on the prompt
 * tokens (16-token chunks chained from the start, as a prefix cache
 * hashes pages): the two counts must be equal, and about the trace's
 * published reuse (an infinite cache hits about 64% of blocks).  Skips
 * (77) without ../shared/data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/load_workload.h"
#include "util/rng.h"

#define BT 16u

typedef struct {
    uint64_t *v;
    size_t cap, n;
} set64;

/* 1 if x was in the set (then it is added anyway) */
static int seen(set64 *s, uint64_t x)
{
    if (!x) x = 1; /* 0 marks an empty slot */
    if (2 * (s->n + 1) > s->cap) {
        set64 t = {calloc(s->cap ? 2 * s->cap : 1 << 16, sizeof *t.v), s->cap ? 2 * s->cap : 1 << 16, 0};
        REQUIRE(t.v);
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i]) seen(&t, s->v[i]);
        free(s->v);
        *s = t;
    }
    for (size_t i = fkv_mix64(x) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (s->v[i] == x) return 1;
        if (!s->v[i]) {
            s->v[i] = x;
            s->n++;
            return 0;
        }
    }
}

int main(void)
{
    const char *d = getenv("FKV_DATA_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/mooncake_synthetic.jsonl", d ? d : "../shared/data");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("SKIP: %s is absent (the shared data folder)\n", path);
        return 77;
    }
    size_t rows = 0;
    for (int c; (c = fgetc(f)) != EOF;) rows += c == '\n';
    fclose(f);
    char err[256] = "";
    fkv_load_workload w;
    fkv_load_trace_opts o = {BT, 0, 1};
    /* more arrivals than rows, then only the first pass is looked at */
    REQUIRE(fkv_load_workload_trace_opts(path, 1, 1000, (double)rows / 1000 * 1.2, 8, 0, &o, &w, err, sizeof err) ==
            FKV_OK);
    REQUIRE(w.n >= rows);
    set64 ids = {0}, toks = {0};
    uint64_t blocks = 0, id_hits = 0, tok_hits = 0, mismatched = 0;
    int32_t *p = NULL;
    size_t cap = 0;
    uint32_t users_used[8] = {0};
    for (size_t i = 0; i < rows; i++) {
        const fkv_load_item *it = &w.items[i];
        if (it->prompt_tokens > cap) {
            cap = it->prompt_tokens;
            p = realloc(p, cap * sizeof *p);
            REQUIRE(p);
        }
        fkv_load_prompt(it, i, 1, 256, p);
        users_used[it->client]++;
        uint64_t hid = 0, htok = 0;
        /* the full blocks of the prompt */
        for (uint32_t b = 0; b < it->n_blocks && (b + 1) * BT <= it->prompt_tokens; b++) {
            hid = fkv_mix64(hid ^ fkv_mix64(it->blocks[b] + 0x9e37));
            for (uint32_t k = 0; k < BT; k++) htok = fkv_mix64(htok ^ (uint64_t)(uint32_t)p[b * BT + k]);
            int a = seen(&ids, hid), t = seen(&toks, htok);
            blocks++;
            id_hits += a;
            tok_hits += t;
            mismatched += a != t;
        }
    }
    double rate = (double)id_hits / (double)blocks;
    printf("%zu requests, %llu full blocks: %llu hits by hash_ids, %llu by prompt tokens (%.1f%%), %llu disagree\n",
           rows, (unsigned long long)blocks, (unsigned long long)id_hits, (unsigned long long)tok_hits, 100 * rate,
           (unsigned long long)mismatched);
    CHECK(blocks > 100000);
    CHECK(mismatched == 0 && id_hits == tok_hits);
    CHECKF(rate > 0.55 && rate < 0.75, "%.3f", rate);
    /* the users are spread (8 of them, none empty) */
    int all = 1;
    for (int k = 0; k < 8; k++) all &= users_used[k] > 0;
    CHECK(all);
    free(p);
    free(ids.v);
    free(toks.v);
    fkv_load_workload_free(&w);
    return check_done();
}
