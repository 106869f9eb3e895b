/* `fairkv bench ARGS [--output OUT]` called in-process, ARGS split at
 * spaces (the tests' arguments have none inside a value). */
#ifndef FKV_TEST_BENCH_CLI_H
#define FKV_TEST_BENCH_CLI_H

#include <stdio.h>
#include <string.h>

#include "cli.h"

static inline int bench_cli(const char *args, const char *out)
{
    char buf[1024];
    if (out) snprintf(buf, sizeof buf, "%s --output %s", args, out);
    else snprintf(buf, sizeof buf, "%s", args);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"bench";
    for (char *t = strtok(buf, " "); t && argc < 62; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    return fkv_cli_bench(argc, argv);
}

#endif
