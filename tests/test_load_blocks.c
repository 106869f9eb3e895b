/* `fairkv load --trace-blocks`: a Mooncake trace replayed by its blocks.
 * On a hand-written trace: lengths scaled by block_tokens / 512 (hand
 * computed), prompts that share a hash_id at a position share exactly
 * those tokens and differ where the ids differ, the same block gives the
 * same tokens in every request that holds it, the "user" follows the first
 * block, a prompt cut by max_prompt keeps only its blocks inside the cut,
 * shards split the rows round robin; without the option the replay is
 * today's (no blocks, the per-client prefix); malformed hash_ids are
 * refused with file and line, an Azure CSV with the option is refused,
 * and the plain CSV writer refuses a workload built from blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "server/load_workload.h"
#include "util/rng.h"

static char dir[] = "/tmp/fkv-load-blocks-XXXXXX";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

/* leading positions where a and b agree */
static uint32_t common(const int32_t *a, const int32_t *b, uint32_t n)
{
    uint32_t k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

int main(void)
{
    REQUIRE(mkdtemp(dir));
    char path[96], csv[96], out[96];
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    snprintf(out, sizeof out, "%s/w.csv", dir);
    /* row 0: 3 full blocks; row 1: shares blocks 0 and 1, then its own,
     * the last one partial; row 2: nothing in common */
    write_file(path, "{\"timestamp\": 0, \"input_length\": 1536, \"output_length\": 100, \"hash_ids\": [10, 11, 12]}\n"
                     "{\"timestamp\": 5, \"input_length\": 1400, \"output_length\": 1, \"hash_ids\": [10, 11, 40]}\n"
                     "{\"timestamp\": 9, \"input_length\": 600, \"output_length\": 600, \"hash_ids\": [77, 78]}\n");
    char err[256] = "";
    fkv_load_workload w;
    fkv_load_trace_opts o = {.block_tokens = 8, .shard = 0, .n_shards = 1};
    /* 6 requests: the three rows twice, in order */
    REQUIRE(fkv_load_workload_trace_opts(path, 5, 1000, 1.0, 16, 0, &o, &w, err, sizeof err) == FKV_OK);
    REQUIRE(w.n >= 6);
    /* ceil(1536 * 8 / 512) = 24, ceil(100 * 8 / 512) = 2; ceil(1400 * 8 / 512) = 22 (21.875), 1 out;
     * ceil(600 * 8 / 512) = 10 (9.375) both */
    CHECKF(w.items[0].prompt_tokens == 24 && w.items[0].max_tokens == 2, "%u %u", w.items[0].prompt_tokens,
           w.items[0].max_tokens);
    CHECKF(w.items[1].prompt_tokens == 22 && w.items[1].max_tokens == 1, "%u %u", w.items[1].prompt_tokens,
           w.items[1].max_tokens);
    CHECKF(w.items[2].prompt_tokens == 10 && w.items[2].max_tokens == 10, "%u %u", w.items[2].prompt_tokens,
           w.items[2].max_tokens);
    CHECK(w.items[0].n_blocks == 3 && w.items[1].n_blocks == 3 && w.items[2].n_blocks == 2);
    CHECK(w.items[0].blocks && w.items[0].blocks[2] == 12 && w.items[1].blocks[2] == 40 && w.items[2].blocks[0] == 77);
    CHECK(w.items[3].blocks == w.items[0].blocks && w.items[4].prompt_tokens == 22);
    /* the user follows the first block: rows 0 and 1 one user, row 2 its own */
    CHECK(w.items[0].client == (uint32_t)(fkv_mix64(10) % 16) && w.items[1].client == w.items[0].client);
    CHECK(w.items[2].client == (uint32_t)(fkv_mix64(77) % 16) && w.items[3].client == w.items[0].client);

    int32_t p[6][32];
    for (size_t i = 0; i < 6; i++) fkv_load_prompt(&w.items[i], i, 5, 256, p[i]);
    int in_vocab = 1;
    for (size_t i = 0; i < 6; i++)
        for (uint32_t k = 0; k < w.items[i].prompt_tokens; k++) in_vocab &= p[i][k] >= 0 && p[i][k] < 256;
    CHECK(in_vocab);
    /* rows 0 and 1 agree on blocks 10, 11 (16 tokens) and not on the third */
    CHECKF(common(p[0], p[1], 22) == 16, "%u", common(p[0], p[1], 22));
    /* row 2 shares nothing with row 0 (a token may agree by chance, not 8) */
    CHECK(common(p[0], p[2], 10) < 8);
    /* the same row again, as another request: the same prompt (the blocks
     * cover it whole); the partial last block of row 1 is also the block's */
    CHECK(!memcmp(p[0], p[3], 24 * sizeof(int32_t)) && !memcmp(p[1], p[4], 22 * sizeof(int32_t)));
    CHECK(!memcmp(p[2], p[5], 10 * sizeof(int32_t)));
    /* another seed: the same blocks, the same tokens (blocks do not depend on it) */
    int32_t q[32];
    fkv_load_prompt(&w.items[0], 0, 99, 256, q);
    CHECK(!memcmp(q, p[0], 24 * sizeof(int32_t)));
    /* the plain CSV cannot carry blocks */
    CHECK(fkv_load_workload_write_plain(&w, out, err, sizeof err) == FKV_EINVAL && strstr(err, "blocks"));
    fkv_load_workload_free(&w);

    /* max_prompt cuts the prompt and the blocks past it: 12 tokens = 1.5 blocks -> 2 */
    REQUIRE(fkv_load_workload_trace_opts(path, 5, 1000, 1.0, 16, 12, &o, &w, err, sizeof err) == FKV_OK);
    CHECK(w.items[0].prompt_tokens == 12 && w.items[0].n_blocks == 2 && w.items[2].prompt_tokens == 10);
    fkv_load_workload_free(&w);

    /* shards: 0/2 replays rows 0, 2, 1, 0, ...; 1/2 rows 1, 0, 2, ... */
    fkv_load_trace_opts s0 = {8, 0, 2}, s1 = {8, 1, 2};
    fkv_load_workload a, b;
    REQUIRE(fkv_load_workload_trace_opts(path, 5, 1000, 1.0, 16, 0, &s0, &a, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_load_workload_trace_opts(path, 5, 1000, 1.0, 16, 0, &s1, &b, err, sizeof err) == FKV_OK);
    REQUIRE(a.n >= 3 && b.n >= 3);
    CHECK(a.items[0].blocks[0] == 10 && a.items[0].blocks[2] == 12 && a.items[1].blocks[0] == 77 &&
          a.items[2].blocks[2] == 40);
    CHECK(b.items[0].blocks[2] == 40 && b.items[1].blocks[2] == 12 && b.items[2].blocks[0] == 77);
    fkv_load_workload_free(&a);
    fkv_load_workload_free(&b);
    /* shards without blocks split the lengths alike */
    fkv_load_trace_opts s1n = {0, 1, 2};
    REQUIRE(fkv_load_workload_trace_opts(path, 5, 1000, 1.0, 16, 0, &s1n, &b, err, sizeof err) == FKV_OK);
    CHECK(b.items[0].prompt_tokens == 1400 && b.items[1].prompt_tokens == 1536 && !b.items[0].blocks);
    fkv_load_workload_free(&b);

    /* without the option: today's replay, unscaled, no blocks, the per-client prefix */
    REQUIRE(fkv_load_workload_trace(path, 5, 1000, 1.0, 16, 0, &w, err, sizeof err) == FKV_OK);
    CHECK(w.items[0].prompt_tokens == 1536 && !w.items[0].blocks && !w.items[0].n_blocks && !w.block_store);
    fkv_load_workload_free(&w);

    /* malformed hash_ids, with the line; without the option they are not read */
    fkv_load_workload bad;
    write_file(path, "{\"input_length\": 600, \"output_length\": 6, \"hash_ids\": [1, 2]}\n"
                     "{\"input_length\": 600, \"output_length\": 6}\n");
    CHECK(fkv_load_workload_trace_opts(path, 5, 100, 1.0, 4, 0, &o, &bad, err, sizeof err) == FKV_EPARSE &&
          strstr(err, ":2:") && strstr(err, "no hash_ids"));
    CHECK(fkv_load_workload_trace(path, 5, 100, 1.0, 4, 0, &bad, err, sizeof err) == FKV_OK);
    fkv_load_workload_free(&bad);
    const char *bads[] = {"{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": [1, -2]}\n",
                          "{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": [1.5]}\n",
                          "{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": \"x\"}\n",
                          "{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": []}\n",
                          "{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": [1, \"a\"]}\n",
                          "{\"input_length\": 6, \"output_length\": 6, \"hash_ids\": [1, 2]\n"};
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        write_file(path, bads[i]);
        err[0] = 0;
        CHECKF(fkv_load_workload_trace_opts(path, 5, 100, 1.0, 4, 0, &o, &bad, err, sizeof err) == FKV_EPARSE &&
                   strstr(err, ":1:"),
               "case %zu: %s", i, err);
    }
    /* an Azure CSV has no blocks; shard and block bounds */
    write_file(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n");
    CHECK(fkv_load_workload_trace_opts(csv, 5, 100, 1.0, 4, 0, &o, &bad, err, sizeof err) == FKV_EINVAL &&
          strstr(err, "hash_ids"));
    fkv_load_trace_opts badshard = {0, 2, 2}, badbt = {513, 0, 1};
    CHECK(fkv_load_workload_trace_opts(csv, 5, 100, 1.0, 4, 0, &badshard, &bad, err, sizeof err) == FKV_EINVAL);
    CHECK(fkv_load_workload_trace_opts(csv, 5, 100, 1.0, 4, 0, &badbt, &bad, err, sizeof err) == FKV_EINVAL);

    unlink(path);
    unlink(csv);
    unlink(out);
    rmdir(dir);
    return check_done();
}
