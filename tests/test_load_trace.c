/* The plain-CSV bridge between `fairkv load` and `fairkv bench`: a seed
 * workload with a length cap, written by the load generator, read back by
 * it and by the simulator's trace reader, gives the same requests at the
 * same times; malformed files are refused with file and line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "server/load_workload.h"
#include "sim/workload.h"

int main(void)
{
    fkv_load_workload w, back;
    REQUIRE(fkv_load_workload_seed_max(3, 50, 20, 8, 1024, &w) == FKV_OK);
    REQUIRE(w.n > 500);
    size_t longs = 0;
    int capped = 1;
    for (size_t i = 0; i < w.n; i++) {
        uint32_t t = w.items[i].prompt_tokens + w.items[i].max_tokens;
        capped &= t <= 1024;
        longs += w.items[i].cls == FKV_CLASS_LONG;
    }
    CHECK(capped);
    /* the class mix keeps its long requests (10%) inside the cap */
    CHECKF(longs > w.n / 20 && longs < w.n / 6, "%zu long of %zu", longs, w.n);

    char dir[] = "/tmp/fkv-load-trace-XXXXXX", path[64];
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/w.csv", dir);
    char err[256] = "";
    REQUIRE(fkv_load_workload_write_plain(&w, path, err, sizeof err) == FKV_OK);
    REQUIRE(fkv_load_workload_plain(path, 8, &back, err, sizeof err) == FKV_OK);
    CHECK(back.n == w.n);
    int same = back.n == w.n;
    for (size_t i = 0; same && i < w.n; i++)
        same = back.items[i].prompt_tokens == w.items[i].prompt_tokens &&
               back.items[i].max_tokens == w.items[i].max_tokens && back.items[i].client == w.items[i].client &&
               back.items[i].cls == w.items[i].cls && fabs(back.items[i].arrival_s - w.items[i].arrival_s) < 1e-5;
    CHECK(same);

    /* the simulator reads the same file: same sizes, arrivals within a
     * microsecond (it starts its clock at the first arrival: latencies are
     * measured from each request's own arrival, so the shift is harmless) */
    fkv_workload sw;
    REQUIRE(fkv_trace_load(path, FKV_TRACE_AUTO, 0, 8, &sw, err, sizeof err) == FKV_OK);
    CHECK(sw.n == w.n);
    same = sw.n == w.n;
    for (size_t i = 0; same && i < w.n; i++)
        same = sw.reqs[i].prompt == w.items[i].prompt_tokens && sw.reqs[i].output == w.items[i].max_tokens &&
               sw.reqs[i].client == w.items[i].client &&
               llabs(sw.reqs[i].arrival_ns - (int64_t)llround((w.items[i].arrival_s - w.items[0].arrival_s) * 1e9)) < 1000;
    CHECK(same);
    fkv_workload_free(&sw);

    /* malformed: a missing field, time going back */
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "arrival_ms,prompt_tokens,output_tokens,client\n10,5,5,0\n12,7\n");
    fclose(f);
    fkv_load_workload bad;
    CHECK(fkv_load_workload_plain(path, 8, &bad, err, sizeof err) == FKV_EPARSE && strstr(err, ":3:"));
    f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "arrival_ms,prompt_tokens,output_tokens,client\n10,5,5,0\n9,7,7,1\n");
    fclose(f);
    CHECK(fkv_load_workload_plain(path, 8, &bad, err, sizeof err) == FKV_EPARSE && strstr(err, "back in time"));

    unlink(path);
    rmdir(dir);
    fkv_load_workload_free(&w);
    fkv_load_workload_free(&back);
    return check_done();
}
