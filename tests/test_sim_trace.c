/* Trace readers on good and malformed inputs (in memory and from a file),
 * and the Vidur profile reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim/profile.h"
#include "sim/workload.h"

static fkv_status parse(const char *s, fkv_trace_format f, fkv_workload *w, char *err)
{
    return fkv_trace_parse(s, strlen(s), "t.csv", f, 0, 3, w, err, 256);
}

/* A malformed input must fail with FKV_EPARSE and a message that starts
 * with "t.csv:LINE:" and names the problem. */
static void bad(const char *s, int line, const char *needle)
{
    fkv_workload w;
    char err[256] = "", want[32];
    fkv_status st = parse(s, FKV_TRACE_AUTO, &w, err);
    snprintf(want, sizeof want, "t.csv:%d:", line);
    CHECKF(st == FKV_EPARSE, "status %d for input '%.40s'", st, s);
    CHECKF(!strncmp(err, want, strlen(want)), "message '%s' lacks '%s'", err, want);
    CHECKF(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    CHECK(w.reqs == NULL && w.n == 0);
}

int main(void)
{
    fkv_workload w;
    char err[256];

    /* Azure: relative times, sorted, zero output read as 1 */
    const char *az = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\r\n"
                     "2023-11-16 18:15:50.9951690,396,0\n"
                     "2023-11-16 18:15:46.1805900,10,5\n"
                     "2023-11-17 00:00:00,7,1\n";
    REQUIRE(parse(az, FKV_TRACE_AUTO, &w, err) == FKV_OK);
    CHECK(!strcmp(w.name, "azure"));
    REQUIRE(w.n == 4);
    CHECK(w.reqs[0].arrival_ns == 0 && w.reqs[0].prompt == 10 && w.reqs[0].output == 5);
    CHECK(w.reqs[1].arrival_ns == 500000000LL && w.reqs[1].prompt == 374 && w.reqs[1].output == 44);
    CHECK(w.reqs[2].arrival_ns == 4814579000LL && w.reqs[2].output == 1);
    /* 18:15:46.18059 -> next day 00:00:00 = 20,653.81941 s */
    CHECK(w.reqs[3].arrival_ns == 20653819410000LL);
    for (size_t i = 0; i < w.n; i++) CHECKF(w.reqs[i].id == i + 1 && w.reqs[i].client == i % 3, "req %zu id %llu client %llu", i, (unsigned long long)w.reqs[i].id, (unsigned long long)w.reqs[i].client);
    fkv_workload_free(&w);

    /* limit keeps the first N lines of the file */
    REQUIRE(fkv_trace_parse(az, strlen(az), "t.csv", FKV_TRACE_AUTO, 2, 1, &w, err, sizeof err) == FKV_OK);
    CHECK(w.n == 2);
    fkv_workload_free(&w);

    /* Mooncake JSONL with block ids */
    const char *mc = "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 6, \"hash_ids\": [0, 1]}\n"
                     "{\"timestamp\": 12.5, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [0, 7]}\n"
                     "\n"
                     "{\"timestamp\": 3, \"input_length\": 5, \"output_length\": 1}\n";
    REQUIRE(parse(mc, FKV_TRACE_AUTO, &w, err) == FKV_OK);
    CHECK(!strcmp(w.name, "mooncake"));
    REQUIRE(w.n == 3);
    REQUIRE(w.src && w.n_src == 3 && w.reqs[0].tag < 3 && w.reqs[1].tag < 3 && w.reqs[2].tag < 3);
    const fkv_req_src *s0 = &w.src[w.reqs[0].tag], *s1 = &w.src[w.reqs[1].tag], *s2 = &w.src[w.reqs[2].tag];
    CHECK(w.reqs[0].prompt == 1000 && s0->n_block_ids == 2 && s0->block_ids[1] == 1);
    CHECK(w.reqs[1].arrival_ns == 3000000 && s1->block_ids == NULL && s1->n_block_ids == 0);
    CHECK(w.reqs[2].arrival_ns == 12500000 && s2->block_ids[0] == 0 && s2->block_ids[1] == 7);
    /* shared first block: same token ids on the first 512 positions only */
    fkv_sim_tokens ts = fkv_workload_tokens(&w, 512);
    CHECK(fkv_req_token(&ts, &w.reqs[0], 5) == fkv_req_token(&ts, &w.reqs[2], 5));
    CHECK(fkv_req_token(&ts, &w.reqs[0], 513) != fkv_req_token(&ts, &w.reqs[2], 513));
    fkv_workload_free(&w);

    /* plain CSV with comments and clients; format forced */
    const char *pl = "# made by hand\narrival_ms,prompt_tokens,output_tokens,client\n0,10,2,1\n1.5,20,3,5\n";
    REQUIRE(parse(pl, FKV_TRACE_PLAIN, &w, err) == FKV_OK);
    REQUIRE(w.n == 2);
    CHECK(w.reqs[1].arrival_ns == 1500000 && w.reqs[1].client == 5 % 3 && w.reqs[0].client == 1);
    fkv_workload_free(&w);

    /* malformed inputs: file and line in the message */
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47,x,1\n", 3,
        "ContextTokens");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:15:46,1,1\n", 2, "TIMESTAMP");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:15:46,1\n", 2, "3 fields");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:15:46,1,2,3\n", 2, "3 fields");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:15:46,-1,2\n", 2, "ContextTokens");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:15:46,99999999999,2\n", 2, "ContextTokens");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:15:46,0,2\n", 2, "prompt length 0");
    bad("TIMESTAMP,Context,Generated\n", 1, "header");
    bad("TIMESTAMP,ContextTokens,GeneratedTokens\n", 1, "no requests");
    bad("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 1, \"input_length\": 10\n", 2,
        "JSON");
    bad("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 1, \"output_length\": 1}\n", 2,
        "input_length");
    bad("{\"timestamp\": -4, \"input_length\": 10, \"output_length\": 1}\n", 1, "timestamp");
    bad("{\"timestamp\": 0, \"input_length\": 10.5, \"output_length\": 1}\n", 1, "input_length");
    bad("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1, \"a\"]}\n", 1, "hash_ids");
    bad("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": 3}\n", 1, "hash_ids");
    bad("arrival_ms,prompt_tokens,output_tokens\n0,1,1\n\n5,1\n", 4, "got 2 fields");
    bad("arrival_ms,prompt_tokens,output_tokens\nabc,1,1\n", 2, "arrival_ms");
    bad("hello world\n", 1, "unrecognized trace format");
    bad("", 1, "unrecognized");

    /* from a file: the message names the file's base name */
    char path[] = "/tmp/fkv_trace_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("arrival_ms,prompt_tokens,output_tokens\n0,5,5\n1,5,oops\n", f);
    fclose(f);
    fkv_status st = fkv_trace_load(path, FKV_TRACE_AUTO, 0, 1, &w, err, sizeof err);
    CHECK(st == FKV_EPARSE);
    CHECKF(strstr(err, strrchr(path, '/') + 1) && strstr(err, ":3:") && strstr(err, "output_tokens"), "%s", err);
    remove(path);
    CHECK(fkv_trace_load("/nonexistent/trace.csv", FKV_TRACE_AUTO, 0, 1, &w, err, sizeof err) == FKV_EIO);
    CHECK(strstr(err, "/nonexistent/trace.csv") != NULL);

    /* Vidur reader: duplicates averaged, other TP degrees skipped */
    const char *vh = "time_stats.emb.mean,time_stats.input_layernorm.mean,time_stats.attn_pre_proj.mean,"
                     "time_stats.attn_rope.mean,time_stats.attn_post_proj.mean,time_stats.post_attention_layernorm.mean,"
                     "time_stats.mlp_up_proj.mean,time_stats.mlp_act.mean,time_stats.mlp_down_proj.mean,"
                     "time_stats.add.mean,num_tokens,num_tensor_parallel_workers\n";
    char csv[2048];
    snprintf(csv, sizeof csv,
             "%s1,1,1,1,1,1,1,1,1,1,8,1\n"  /* layer 9 ms, emb 1 */
             "3,2,2,2,2,2,2,2,2,2,8,1\n"    /* layer 18, emb 3 */
             "0,5,5,5,5,5,5,5,5,5,8,2\n"    /* other TP: skipped */
             "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,1,1\n",
             vh);
    uint32_t *tk;
    double *ms;
    size_t nv;
    REQUIRE(fkv_vidur_parse(csv, strlen(csv), "v.csv", 2, 1, &tk, &ms, &nv, err, sizeof err) == FKV_OK);
    REQUIRE(nv == 2);
    CHECK(tk[0] == 1 && tk[1] == 8);
    CHECK(ms[0] == 2 * 4.5 + 0.5);
    CHECK(ms[1] == 2 * 13.5 + 2.0);
    free(tk);
    free(ms);
    snprintf(csv, sizeof csv, "%s1,1,1,1,1,1,1,1,1,1,8,1\n1,1,1,x,1,1,1,1,1,1,8,1\n", vh);
    CHECK(fkv_vidur_parse(csv, strlen(csv), "v.csv", 2, 1, &tk, &ms, &nv, err, sizeof err) == FKV_EPARSE);
    CHECKF(strstr(err, "v.csv:3:") && strstr(err, "attn_rope"), "%s", err);
    CHECK(fkv_vidur_parse("a,b\n1,2\n", 8, "v.csv", 2, 1, &tk, &ms, &nv, err, sizeof err) == FKV_EPARSE);
    return check_done();
}
