/* Tiled layouts of constant inputs (layout.h). */
#include "layout.h"

#include <stdio.h>
#include <string.h>

int64_t tt_layout_offset(const tt_layout *l, const int64_t *idx)
{
    int64_t off = 0;
    for (int k = 0; k < l->nparts; k++) {
        const tt_layout_part *p = &l->parts[k];
        off = off * p->extent + (idx[p->dim] / p->inner) % p->extent;
    }
    return off;
}

void tt_layout_pack(const tt_layout *l, int ndim, const int64_t *shape, size_t elem_bytes,
                    const void *src, void *dst)
{
    memset(dst, 0, (size_t)l->size * elem_bytes);
    int64_t numel = 1, idx[16] = {0};
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    const char *s = src;
    char *t = dst;
    for (int64_t e = 0; e < numel; e++) {
        memcpy(t + (size_t)tt_layout_offset(l, idx) * elem_bytes, s + (size_t)e * elem_bytes,
               elem_bytes);
        for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--)
            idx[d] = 0;
    }
}

char *tt_layout_print(const tt_layout *l, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < l->nparts && used < n; k++) {
        const tt_layout_part *p = &l->parts[k];
        int w = p->inner == 1
                    ? snprintf(buf + used, n - used, "[d%d%%%lld]", p->dim, (long long)p->extent)
                    : snprintf(buf + used, n - used, "[d%d/%lld%%%lld]", p->dim,
                               (long long)p->inner, (long long)p->extent);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}
