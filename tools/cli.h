/* Entry points of the `fairkv` subcommands.  Each lives with its module
 * (bench/, src/sim/, src/engine/, src/server/); a subcommand whose module is
 * not built links as NULL (weak) and the CLI says so. */
#ifndef FKV_CLI_H
#define FKV_CLI_H

#define FKV_WEAK __attribute__((weak))

/* argv[0] is the subcommand's own name ("cache" for `fairkv micro cache`). */
int fkv_cli_micro_cache(int argc, char **argv) FKV_WEAK; /* bench/micro_cache.c */
int fkv_cli_micro_attn(int argc, char **argv) FKV_WEAK;  /* bench/micro_attn.c */
int fkv_cli_run(int argc, char **argv) FKV_WEAK;         /* src/sim: make run's job */
int fkv_cli_bench(int argc, char **argv) FKV_WEAK;       /* src/sim */
int fkv_cli_grid(int argc, char **argv) FKV_WEAK;        /* src/sim */
int fkv_cli_size(int argc, char **argv) FKV_WEAK;        /* src/sim */
int fkv_cli_model(int argc, char **argv) FKV_WEAK;       /* src/engine */
int fkv_cli_generate(int argc, char **argv) FKV_WEAK;    /* src/engine */
int fkv_cli_serve(int argc, char **argv) FKV_WEAK;       /* src/server */
int fkv_cli_load(int argc, char **argv) FKV_WEAK;        /* src/server */

#endif
