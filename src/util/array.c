#include "util/array.h"

#include <stdlib.h>

int fkv_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*(void **)pp, nc * elem);
    if (!p) return -1;
    *(void **)pp = p;
    *cap = nc;
    return 0;
}
