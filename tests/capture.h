/* Runs a CLI entry point with stdout sent to a temporary file and returns
 * what it printed (malloc'd; the test frees it); *rc gets its exit code. */
#ifndef FKV_TEST_CAPTURE_H
#define FKV_TEST_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static inline char *capture_stdout(int (*fn)(int, char **), int argc, char **argv, int *rc)
{
    char path[] = "/tmp/fkv_capture_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    REQUIRE(saved >= 0 && dup2(fd, 1) == 1);
    *rc = fn(argc, argv);
    fflush(stdout);
    REQUIRE(dup2(saved, 1) == 1);
    close(saved);
    close(fd);
    char *out = check_slurp(path);
    remove(path);
    REQUIRE(out);
    return out;
}

#endif
