/* Tiled layouts of constant inputs (the LR step): a tensor stored so that a kernel's loops read
 * it in order (Ansor's layout rewrite, AutoTVM's packed weights).
 *
 * A layout is a list of parts, outer to inner.  Part k holds (idx[dim_k] / inner_k) % extent_k
 * of the logical index, and the element lives at sum_k part_k * stride_k, strides row-major over
 * the parts' extents.  Each dimension's parts are a mixed-radix split of it (ordered by inner:
 * the smallest 1, each next the one before times its extent; lowering reads a tensor whose
 * loops give anything else as it is), so every logical element has exactly one place; `size`
 * may exceed the element count when the outermost part overshoots (those places are never
 * read).
 *
 *     B[k, j], K = 512, N = 512, tiles j by 32 and k by 8:
 *     [j/32%16][k/8%64][k%8][j%32]   ->   B_packed[16][64][8][32]
 *
 * A panel part (last > 0) is the tile of a dimension that a split does not divide, read by
 * tiles whose last one moves back to end with the dimension (lower.c clamped_tile): panel p
 * starts at min(p * inner, last), last = dimension - inner, and the later parts of the same
 * dimension index the offset into the panel.  The last panel then overlaps the one before: the
 * elements they share are stored in both, so every tile reads one contiguous panel.
 *
 *     W[j, k], N = 1000, K = 1024, tiles j by 32 (the last over 968..999):
 *     [d0/32%32,last=968][d1%1024][d0%32]   ->   32 panels of 1024 x 32
 */
#ifndef TT_SCHEDULE_LAYOUT_H
#define TT_SCHEDULE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define TT_MAX_LAYOUT_PARTS 24

typedef struct tt_layout_part {
    int dim;
    int64_t inner, extent;
    int64_t last; /* > 0: a panel part, its last panel starting there (above) */
} tt_layout_part;

typedef struct tt_layout {
    int nparts; /* 0: not rewritten (row-major) */
    tt_layout_part parts[TT_MAX_LAYOUT_PARTS];
    int64_t size; /* elements of the packed buffer */
} tt_layout;

/* Element offset of logical index idx (one entry per dimension); of an element stored twice
 * (panels), the place in the earlier panel unless it lies past the earlier panels' end. */
int64_t tt_layout_offset(const tt_layout *l, const int64_t *idx);

/* Copies a dense row-major tensor of `ndim` dims, `shape`, elements of `elem_bytes`, into the
 * packed buffer dst (l->size elements; every place an element maps to is written, places none
 * maps to are zeroed). */
void tt_layout_pack(const tt_layout *l, int ndim, const int64_t *shape, size_t elem_bytes,
                    const void *src, void *dst);

/* Readable form, dimensions numbered: "[d1/32%16][d0/8%64][d0%8][d1%32]" (the example above),
 * a panel part "[d0/32%32,last=968]".
 * Writes at most n bytes; returns buf. */
char *tt_layout_print(const tt_layout *l, char *buf, size_t n);

#endif
