/* f16 -> f32 by table: 65536 floats (256 KiB) filled once.  Portable C has
 * no fast half conversion without -mf16c, and weight rows are converted on
 * every use, so the table is what keeps f16 matmuls near f32 speed. */
#include <pthread.h>

#include "model/half.h"

static float table[65536];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void)
{
    for (uint32_t h = 0; h < 65536; h++) table[h] = fkv_h2f((uint16_t)h);
}

const float *fkv_h2f_table(void)
{
    pthread_once(&once, fill);
    return table;
}
