/* Which BLAS for the engine: single-threaded SGEMM GFLOP/s of OpenBLAS and
 * BLIS on the engine's shapes, for docs/EVALUATION.md (section 4, "The
 * engine's matrix products through BLAS"); measured with Debian's serial
 * builds (the engine links OpenBLAS's pthread build, one thread per call:
 * run the OpenBLAS binary with OPENBLAS_NUM_THREADS=1 if pkg-config names
 * that build).  The engine calls
 * y[T][R] = x[T][C] . W^T; whole-batch products and its fixed 8 x 64 tiles.
 *
 *   cc -O2 $(pkg-config --cflags openblas) scripts/bench_blas.c -o /tmp/bb_openblas \
 *      $(pkg-config --libs openblas) -Wl,-rpath,$(pkg-config --variable=libdir openblas)
 *   cc -O2 -I/usr/include/$(gcc -print-multiarch)/blis-serial -include blis.h scripts/bench_blas.c \
 *      -o /tmp/bb_blis -L/usr/lib/$(gcc -print-multiarch)/blis-serial \
 *      -Wl,-rpath,/usr/lib/$(gcc -print-multiarch)/blis-serial -lblis
 *   /tmp/bb_openblas; /tmp/bb_blis      (best of 3 timings per shape)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifndef BLIS_H
#include <cblas.h>
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    /* T tokens, R weight rows, C columns, tiled: 8-token x 64-row tiles */
    static const int shapes[][4] = {{2000, 384, 384, 0}, {2000, 1024, 384, 0}, {2000, 384, 1024, 0},
                                    {2000, 384, 384, 1}, {2000, 1024, 384, 1}, {2000, 384, 1024, 1},
                                    {16, 384, 384, 1},   {8, 64, 64, 1},       {8, 172, 64, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int T = shapes[s][0], R = shapes[s][1], C = shapes[s][2], tiled = shapes[s][3];
        float *x = malloc(sizeof(float) * (size_t)T * C), *w = malloc(sizeof(float) * (size_t)R * C);
        float *y = malloc(sizeof(float) * (size_t)T * R);
        if (!x || !w || !y) return 1;
        for (long i = 0; i < (long)T * C; i++) x[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < (long)R * C; i++) w[i] = (float)(i % 5) * 0.1f;
        double flop = 2.0 * T * R * C, best = 1e9;
        int reps = (int)(1e9 / flop) + 1;
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            for (int r = 0; r < reps; r++) {
                if (!tiled) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, R, C, 1.f, x, C, w, C, 0.f, y, R);
                    continue;
                }
                for (int r0 = 0; r0 < R; r0 += 64)
                    for (int t = 0; t + 8 <= T; t += 8)
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 8, R - r0 < 64 ? R - r0 : 64, C, 1.f,
                                    x + (size_t)t * C, C, w + (size_t)r0 * C, C, 0.f, y + (size_t)t * R + r0, R);
            }
            double t = (now() - t0) / reps;
            if (t < best) best = t;
        }
        printf("T=%d R=%d C=%d %s: %.1f GFLOP/s\n", T, R, C, tiled ? "tiles 8x64" : "one call", flop / best * 1e-9);
        free(x), free(w), free(y);
    }
    return 0;
}
