/* Entry points of the `fairkv` subcommands, each in its own tools/NAME_cli.c
 * over the modules below; a subcommand that is not built links as NULL
 * (weak) and the CLI says so. */
#ifndef FKV_CLI_H
#define FKV_CLI_H

#define FKV_WEAK __attribute__((weak))

/* argv[0] is the subcommand's own name ("cache" for `fairkv micro cache`). */
int fkv_cli_micro_cache(int argc, char **argv) FKV_WEAK; /* tools/micro_cache_cli.c */
int fkv_cli_micro_attn(int argc, char **argv) FKV_WEAK;  /* tools/micro_attn_cli.c */
int fkv_cli_run(int argc, char **argv) FKV_WEAK;         /* tools/sim_cli.c: make run's job */
int fkv_cli_bench(int argc, char **argv) FKV_WEAK;       /* tools/sim_cli.c */
int fkv_cli_grid(int argc, char **argv) FKV_WEAK;        /* tools/sim_cli.c */
int fkv_cli_size(int argc, char **argv) FKV_WEAK;        /* tools/sim_cli.c */
int fkv_cli_model(int argc, char **argv) FKV_WEAK;       /* tools/model_cli.c */
int fkv_cli_generate(int argc, char **argv) FKV_WEAK;    /* tools/generate_cli.c */
int fkv_cli_serve(int argc, char **argv) FKV_WEAK;       /* tools/serve_cli.c */
int fkv_cli_load(int argc, char **argv) FKV_WEAK;        /* tools/load_cli.c */

#endif
