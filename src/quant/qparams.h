/* Scale and zero of one asymmetric integer group, shared by the chunk codecs
 * (quant.c) and the block codecs (kvcodec.c): the zero point is the group
 * minimum rounded down to fp16 and the scale ((max - zero) / qmax) rounded
 * up, so that no value of the group is clipped.  Error bound per element:
 * |x - (code * scale + zero)| <= scale / 2. */
#ifndef FKV_QUANT_QPARAMS_H
#define FKV_QUANT_QPARAMS_H

#include <stdint.h>

#include "quant/fp16.h"

/* fp16 of x rounded toward -inf */
static inline uint16_t fkv__f2h_down(float x)
{
    uint16_t h = fkv__f2h(x);
    if (fkv__h2f(h) > x) {
        if (h == 0) h = 0x8001u;         /* +0 -> smallest negative subnormal */
        else if (h & 0x8000u) h++;       /* negative: larger magnitude */
        else h--;
    }
    return h;
}

/* fp16 of x >= 0 rounded toward +inf */
static inline uint16_t fkv__f2h_up_pos(double x)
{
    uint16_t h = fkv__f2h((float)x);
    if ((double)fkv__h2f(h) < x) h++;
    return h;
}

/* fills (s16, z16) for a group with range [mn, mx]; returns 0 if out of
 * fp16 range or NaN */
static inline int fkv__group_params(float mn, float mx, float qmax, uint16_t *s16, uint16_t *z16)
{
    if (!(mn >= -65504.0f && mx <= 65504.0f)) return 0; /* also rejects NaN */
    *z16 = fkv__f2h_down(mn);
    *s16 = fkv__f2h_up_pos(((double)mx - (double)fkv__h2f(*z16)) / qmax);
    return 1;
}

#endif
