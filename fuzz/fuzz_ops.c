/* libFuzzer target: the fuzz input chooses the cache variant and every
 * operation of tests/ops_driver.h; after each op the invariant checker and
 * the K/V read-back must pass. */
#include <stdint.h>
#include <stdio.h>

#include "ops_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    ops_state st;
    /* the top of the first two bytes' range picks a host tier variant */
    uint32_t v = (uint32_t)(data[0] | (size > 1 ? data[1] << 8 : 0));
    uint32_t k = v < 60000 ? v % OPS_VARIANTS : OPS_VARIANTS + v % OPS_HOST_VARIANTS;
    if (ops_open(&st, k) != FKV_OK) __builtin_trap();
    ops_src src = {data + 1, size - 1, 0, 0};
    while (src.pos < src.len) {
        if (ops_step(&st, &src) || ops_check(&st)) {
            fprintf(stderr, "fuzz_ops: %s\n", st.msg);
            __builtin_trap();
        }
    }
    ops_close(&st);
    return 0;
}
