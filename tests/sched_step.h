/* What the scheduler tests that drive steps by hand share: a step that
 * must succeed (STEP), and a request of a tenant whose token ids come from
 * its tag as a seed (fkv_sim_token_ids without sources). */
#ifndef FKV_TESTS_SCHED_STEP_H
#define FKV_TESTS_SCHED_STEP_H

#include <string.h>

#include "check.h"
#include "sched/sched.h"

#define STEP(s, now, b)                                                                              \
    do {                                                                                             \
        fkv_status st_ = fkv_sched_step(s, now, b);                                                  \
        CHECKF(st_ == FKV_OK, "fkv_sched_step: %s: %s", fkv_strerror(st_), fkv_sched_last_error(s)); \
        REQUIRE(st_ == FKV_OK);                                                                      \
    } while (0)

static inline fkv_req sched_req(uint64_t id, uint64_t tenant, uint32_t prompt, uint32_t output)
{
    fkv_req r;
    memset(&r, 0, sizeof r);
    r.id = id;
    r.tenant = tenant;
    r.prompt = prompt;
    r.output = output;
    r.tag = 1000 + id; /* the token seed */
    return r;
}

#endif
