/* The engine's CLI entry points (declared weak in tools/cli.h). */
#ifndef FKV_ENGINE_CLI_H
#define FKV_ENGINE_CLI_H

int fkv_cli_model(int argc, char **argv);
int fkv_cli_generate(int argc, char **argv);
/* `fairkv model eval` (model_eval_cli.c) */
int fkv_cli_model_eval(int argc, char **argv);

#endif
