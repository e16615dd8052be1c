/* Tiled layouts of constant inputs (layout.h). */
#include "layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { MAX_DIMS = 16 };

int64_t tt_layout_offset(const tt_layout *l, const int64_t *idx)
{
    /* rel[d]: what is left of idx[d] for the parts after a panel part of d */
    int64_t off = 0, rel[MAX_DIMS];
    for (int k = 0; k < l->nparts; k++)
        rel[l->parts[k].dim] = idx[l->parts[k].dim];
    for (int k = 0; k < l->nparts; k++) {
        const tt_layout_part *p = &l->parts[k];
        int64_t v;
        if (p->last > 0) {
            v = rel[p->dim] < p->last ? rel[p->dim] / p->inner : p->extent - 1;
            rel[p->dim] -= v * p->inner < p->last ? v * p->inner : p->last;
        } else {
            v = (rel[p->dim] / p->inner) % p->extent;
        }
        off = off * p->extent + v;
    }
    return off;
}

void tt_layout_pack(const tt_layout *l, int ndim, const int64_t *shape, size_t elem_bytes,
                    const void *src, void *dst)
{
    /* Walks the places, not the elements: an element in two panels is written to both. */
    memset(dst, 0, (size_t)l->size * elem_bytes);
    int64_t part[TT_MAX_LAYOUT_PARTS] = {0};
    const char *s = src;
    char *t = dst;
    for (int64_t place = 0; place < l->size; place++) {
        int64_t idx[MAX_DIMS] = {0};
        for (int k = 0; k < l->nparts; k++) {
            const tt_layout_part *p = &l->parts[k];
            int64_t start = part[k] * p->inner;
            idx[p->dim] += p->last > 0 && start > p->last ? p->last : start;
        }
        int64_t e = 0;
        bool inside = true;
        for (int d = 0; d < ndim; d++) {
            inside &= idx[d] < shape[d];
            e = e * shape[d] + idx[d];
        }
        if (inside)
            memcpy(t + (size_t)place * elem_bytes, s + (size_t)e * elem_bytes, elem_bytes);
        for (int k = l->nparts - 1; k >= 0 && ++part[k] == l->parts[k].extent; k--)
            part[k] = 0;
    }
}

char *tt_layout_print(const tt_layout *l, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < l->nparts && used < n; k++) {
        const tt_layout_part *p = &l->parts[k];
        int w = p->last > 0
                    ? snprintf(buf + used, n - used, "[d%d/%lld%%%lld,last=%lld]", p->dim,
                               (long long)p->inner, (long long)p->extent, (long long)p->last)
                : p->inner == 1
                    ? snprintf(buf + used, n - used, "[d%d%%%lld]", p->dim, (long long)p->extent)
                    : snprintf(buf + used, n - used, "[d%d/%lld%%%lld]", p->dim,
                               (long long)p->inner, (long long)p->extent);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}
