/* libFuzzer target: the first four bytes choose the configuration cell of
 * tests/sched_driver.h, the rest are its operations (submit, cancel, let
 * time pass, run steps); the run then drains.  Every step the driver plays
 * the engine's part and checks the scheduler's contract with it. */
#include <stdint.h>
#include <stdio.h>

#include "sched_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sd_state st;
    if (sd_run_input(&st, data, size, 0) > 0) {
        char cell[400];
        sd_cell_describe(&st.cell, cell, sizeof cell);
        fprintf(stderr, "fuzz_sched: %s\n  %s\n", cell, st.msg);
        __builtin_trap();
    }
    return 0;
}
