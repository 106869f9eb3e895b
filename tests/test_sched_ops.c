/* The scheduler against the engine's contract, without a model: random
 * operation sequences (tests/sched_driver.h) over fixed seeds, each in its
 * own configuration cell (policy, quotas, chunking, prefix cache, chunked
 * prefill, victim rule, admission, batching mode, quantization, capacity,
 * budget, preemption and miss modes, sparsity).  Every step the driver
 * computes each batch item's restored ranges and new tokens in batch order
 * and checks that the item's attention reads exactly the K/V of its tokens;
 * every request must end. */
#include <dirent.h>

#include "check.h"
#include "sched_driver.h"

/* Runs one fuzz input of fuzz/fuzz_sched.c; 0 when it passes. */
static int replay_one(const char *path, int trace)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    sd_state st;
    int rc = sd_run_input(&st, buf, n, trace);
    if (rc > 0) {
        char cell[400];
        sd_cell_describe(&st.cell, cell, sizeof cell);
        fprintf(stderr, "%s: %s\n  %s\n", path, cell, st.msg);
    }
    return rc > 0;
}

/* The committed fuzz corpus (seeds and regressions) runs here too, so the
 * release and sanitizer suites replay it, not only the fuzz build. */
static void corpus(void)
{
    const char *src = getenv("FKV_SOURCE_DIR");
    if (!src) return;
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/fuzz/corpus/fuzz_sched", src);
    DIR *d = opendir(dir);
    REQUIRE(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        CHECKF(!replay_one(path, 0), "%s", path);
        n++;
    }
    closedir(d);
    CHECKF(n >= 6, "%d corpus files", n);
}

int main(int argc, char **argv)
{
    /* test_sched_ops -r FILE: replays a fuzz input, traced */
    if (argc > 2 && !strcmp(argv[1], "-r")) {
        CHECK(!replay_one(argv[2], 1));
        return check_done();
    }
    /* a run's index as the argument: that run alone, traced (and with a
     * file name, written there as a fuzz input) */
    int one = argc > 1 ? atoi(argv[1]) : -1;
    uint32_t cells = (uint32_t)(5000 * check_scale());
    if (cells < 60) cells = 60;
    sd_stats tot;
    memset(&tot, 0, sizeof tot);
    uint32_t failed = 0;
    for (uint32_t k = one >= 0 ? (uint32_t)one : 0; k < cells; k++) {
        sd_state st;
        uint32_t word = (uint32_t)sd_mix(0x5eedull + k);
        REQUIRE(sd_open(&st, word) == FKV_OK);
        st.trace = one >= 0;
        sd_src src = {NULL, 0, 0, 7000 + k, NULL, 0, 0};
        uint8_t rec[4096];
        if (one >= 0 && argc > 2) { /* and its choices as a fuzz input for fuzz/fuzz_sched.c */
            for (int b = 0; b < 4; b++) rec[b] = (uint8_t)(word >> (8 * b));
            src.rec = rec + 4;
            src.cap_rec = sizeof rec - 4;
        }
        if (sd_run(&st, &src, 60)) {
            char cell[400];
            sd_cell_describe(&st.cell, cell, sizeof cell);
            fprintf(stderr, "run %u, %s\n  %s\n", k, cell, st.msg);
            failed++;
        }
        if (src.rec) {
            FILE *f = fopen(argv[2], "wb");
            REQUIRE(f && fwrite(rec, 1, 4 + src.n_rec, f) == 4 + src.n_rec);
            fclose(f);
            printf("wrote %zu bytes to %s\n", 4 + src.n_rec, argv[2]);
        }
        const sd_stats *s = &st.st;
        tot.steps += s->steps;
        tot.items += s->items;
        tot.new_tokens += s->new_tokens;
        tot.restored_tokens += s->restored_tokens;
        tot.restore_items += s->restore_items;
        tot.stalled_items += s->stalled_items;
        tot.emissions += s->emissions;
        tot.forks += s->forks;
        tot.kid_ends_at_fork += s->kid_ends_at_fork;
        tot.done += s->done;
        tot.rejected += s->rejected;
        tot.cancels += s->cancels;
        tot.preempted += s->preempted;
        tot.drops += s->drops;
        tot.verified_tokens += s->verified_tokens;
        tot.quant_tokens += s->quant_tokens;
        tot.cow_copies += s->cow_copies;
        tot.prefix_hits += s->prefix_hits;
        tot.quantized += s->quantized;
        tot.evicted_pages += s->evicted_pages;
        if (s->max_gap > tot.max_gap) tot.max_gap = s->max_gap;
        if (s->max_drain > tot.max_drain) tot.max_drain = s->max_drain;
        tot.reclaims += s->reclaims;
        tot.fair_picks += s->fair_picks;
        tot.host_tokens += s->host_tokens;
        sd_close(&st);
        if (failed >= 40 || one >= 0) break;
    }
    CHECKF(failed == 0, "%u runs failed", failed);
    printf("%u cells: %llu steps, %llu items (%llu new, %llu restored tokens; %llu items restored, %llu restored "
           "only), %llu emissions, %llu done, %llu rejected, %llu cancels, %llu preemptions, %llu forks (%llu ended "
           "at the fork), %llu dropped tokens; %llu pages evicted, %llu prefix-hit tokens, %llu CoW pages, %llu "
           "chunks quantized; %llu tokens read back exactly, %llu within the quantization bound; longest wait for "
           "progress %llu steps, longest drain %llu steps; %llu reclaims that freed pages, %llu fair-rule victims, %llu offloaded tokens reloaded\n",
           cells, (unsigned long long)tot.steps, (unsigned long long)tot.items, (unsigned long long)tot.new_tokens,
           (unsigned long long)tot.restored_tokens, (unsigned long long)tot.restore_items,
           (unsigned long long)tot.stalled_items, (unsigned long long)tot.emissions, (unsigned long long)tot.done,
           (unsigned long long)tot.rejected, (unsigned long long)tot.cancels, (unsigned long long)tot.preempted,
           (unsigned long long)tot.forks, (unsigned long long)tot.kid_ends_at_fork, (unsigned long long)tot.drops,
           (unsigned long long)tot.evicted_pages, (unsigned long long)tot.prefix_hits,
           (unsigned long long)tot.cow_copies, (unsigned long long)tot.quantized,
           (unsigned long long)tot.verified_tokens, (unsigned long long)tot.quant_tokens,
           (unsigned long long)tot.max_gap, (unsigned long long)tot.max_drain, (unsigned long long)tot.reclaims,
           (unsigned long long)tot.fair_picks, (unsigned long long)tot.host_tokens);
    if (one >= 0) return check_done();
    /* the runs must exercise what they claim to */
    CHECK(tot.restore_items > 0 && tot.stalled_items > 0 && tot.preempted > 0 && tot.forks > 0);
    CHECK(tot.rejected > 0 && tot.cancels > 0 && tot.drops > 0 && tot.cow_copies > 0 && tot.prefix_hits > 0);
    CHECK(tot.quantized > 0 && tot.quant_tokens > 0 && tot.evicted_pages > 0);
    CHECK(tot.reclaims > 0 && tot.fair_picks > 0 && tot.host_tokens > 0);
    corpus();
    return check_done();
}
