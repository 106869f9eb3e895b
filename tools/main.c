/* fairkv: one command line for the library's tools. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fairkv.h"

typedef int (*cli_fn)(int, char **);

struct subcmd {
    const char *name;
    const char *sub; /* second word, or NULL */
    const char *help;
};

static const struct subcmd subcmds[] = {
    {"run", NULL, "the main job: the seed's evaluation table on the defaults"},
    {"bench", NULL, "serving simulation over the library (--workload, --trace, --schemes, --load)"},
    {"grid", NULL, "alpha/beta grid search of F-LRU's score"},
    {"size", NULL, "KV bytes per token and per sequence of a model"},
    {"micro", "cache", "cache operation costs (ns per op)"},
    {"micro", "attn", "attention kernel bandwidth over chunked KV"},
    {"model", NULL, "model files: init a random-weight GGUF, inspect"},
    {"generate", NULL, "generate text with a GGUF model"},
    {"serve", NULL, "OpenAI-style HTTP server with /metrics"},
    {"load", NULL, "open-loop load generator against a server"},
};

static cli_fn lookup(const char *name, const char *sub)
{
    if (!strcmp(name, "run")) return fkv_cli_run;
    if (!strcmp(name, "bench")) return fkv_cli_bench;
    if (!strcmp(name, "grid")) return fkv_cli_grid;
    if (!strcmp(name, "size")) return fkv_cli_size;
    if (!strcmp(name, "model")) return fkv_cli_model;
    if (!strcmp(name, "generate")) return fkv_cli_generate;
    if (!strcmp(name, "serve")) return fkv_cli_serve;
    if (!strcmp(name, "load")) return fkv_cli_load;
    if (!strcmp(name, "micro") && sub) {
        if (!strcmp(sub, "cache")) return fkv_cli_micro_cache;
        if (!strcmp(sub, "attn")) return fkv_cli_micro_attn;
    }
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "fairkv %d.%d.%d — KV cache manager for LLM inference\n\nusage: fairkv COMMAND [options]\n\n",
            FKV_VERSION_MAJOR, FKV_VERSION_MINOR, FKV_VERSION_PATCH);
    for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%s%s", subcmds[i].name, subcmds[i].sub ? " " : "",
                 subcmds[i].sub ? subcmds[i].sub : "");
        fprintf(f, "  %-12s %s%s\n", name, subcmds[i].help,
                lookup(subcmds[i].name, subcmds[i].sub) ? "" : " (not built)");
    }
    fprintf(f, "\n'fairkv COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fairkv %d.%d.%d\n", FKV_VERSION_MAJOR, FKV_VERSION_MINOR, FKV_VERSION_PATCH);
        return 0;
    }
    int two = !strcmp(argv[1], "micro");
    if (two && argc < 3) {
        fprintf(stderr, "fairkv micro: name a benchmark: cache or attn\n");
        return 2;
    }
    cli_fn fn = lookup(argv[1], two ? argv[2] : NULL);
    int known = 0;
    for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++)
        if (!strcmp(subcmds[i].name, argv[1]) && (!two || !strcmp(subcmds[i].sub, argv[2]))) known = 1;
    if (!known) {
        fprintf(stderr, "fairkv: unknown command '%s%s%s'\n\n", argv[1], two ? " " : "", two ? argv[2] : "");
        usage(stderr);
        return 2;
    }
    if (!fn) {
        fprintf(stderr, "fairkv: '%s' is not built in this binary\n", argv[1]);
        return 2;
    }
    return fn(argc - 1 - two, argv + 1 + two);
}
