/* libFuzzer target for `fairkv load`'s trace reader with --trace-blocks
 * (the hash_ids of a Mooncake line) and --shard: any input must load or
 * fail with FKV_EPARSE (never crash, leak or read out of bounds), and a
 * loaded workload's prompts, built from its blocks, must stay inside
 * their lengths and the vocabulary.  The reader takes a path: the input
 * goes through a memfd.  The first byte picks the block tokens and the
 * shard. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/load_workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16) return 0;
    int fd = memfd_create("fuzz-load-trace", 0);
    if (fd < 0) return 0;
    if (write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
        close(fd);
        return 0;
    }
    char path[64], err[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    fkv_load_trace_opts o = {1u + data[0] % 16, (data[0] >> 4) % 2, 2};
    fkv_load_workload w;
    fkv_status st = fkv_load_workload_trace_opts(path, 1, 200, 0.5, 3, 64, &o, &w, err, sizeof err);
    close(fd);
    if (st == FKV_OK) {
        int32_t toks[64];
        for (size_t i = 0; i < w.n; i++) {
            const fkv_load_item *it = &w.items[i];
            if (!it->prompt_tokens || it->prompt_tokens > 64 || !it->max_tokens || it->client >= 3) abort();
            if (!it->blocks || !it->n_blocks || (uint64_t)(it->n_blocks - 1) * o.block_tokens >= it->prompt_tokens)
                abort();
            fkv_load_prompt(it, i, 1, 100, toks);
            for (uint32_t k = 0; k < it->prompt_tokens; k++)
                if (toks[k] < 0 || toks[k] >= 100) abort();
        }
        fkv_load_workload_free(&w);
    } else if (st != FKV_EPARSE && st != FKV_ENOMEM) {
        abort();
    }
    return 0;
}
