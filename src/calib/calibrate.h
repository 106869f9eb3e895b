/* `fairkv bench --calibrate MODEL.gguf` (calibrate.c): the engine's step
 * cost on this machine, fitted to the simulator's cost model. */
#ifndef FKV_ENGINE_CALIBRATE_H
#define FKV_ENGINE_CALIBRATE_H

/* argv[1] is "--calibrate"; returns the exit status. */
int fkv__bench_calibrate(int argc, char **argv);

#endif
