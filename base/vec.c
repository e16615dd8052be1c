#include "vec.h"

#include <stdint.h>
#include <stdlib.h>

int tt__vec_reserve(void **data, size_t *cap, size_t len, size_t n, size_t elem)
{
    if (len + n <= *cap)
        return 0;
    size_t want = *cap ? *cap * 2 : 8;
    while (want < len + n)
        want *= 2;
    if (want > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*data, want * elem);
    if (!p)
        return -1;
    *data = p;
    *cap = want;
    return 0;
}
