/* NumPy's .npy files (format versions 1.0-3.0), the arrays tvm-net reads and writes:
 *
 *     tt_npy a;
 *     if (tt_npy_read("x.npy", &a, &err)) ...err.msg says what is wrong and where...
 *     ... a.dtype, a.rank, a.dims, a.data (C order, little-endian) ...
 *     tt_npy_free(&a);
 *
 * Element types: float32 '<f4', float64 '<f8', int32 '<i4', int64 '<i8', bool '|b1'.  Fortran-
 * order and big-endian arrays are refused with the reason (np.ascontiguousarray(x, '<f4') makes
 * one we read). */
#ifndef TT_DEPLOY_NPY_H
#define TT_DEPLOY_NPY_H

#include <stdint.h>

#include "../base/base.h"
#include "../schedule/expr.h"

enum { TT_NPY_MAX_RANK = 16 };

typedef struct tt_npy {
    tt_dtype dtype;
    int rank;
    int64_t dims[TT_NPY_MAX_RANK];
    void *data; /* numel x element bytes */
} tt_npy;

/* Elements of a (1 for rank 0). */
int64_t tt_npy_numel(const tt_npy *a);

/* Errors: TT_ERR_IO (cannot open or read), TT_ERR_PARSE (not .npy, a malformed header, fewer
 * bytes than the shape needs, with the offset), TT_ERR_UNSUPPORTED (an element type or order
 * above), TT_ERR_LIMIT (more than max_bytes of data; 0: 4 GiB). */
tt_status tt_npy_read(const char *path, int64_t max_bytes, tt_npy *out, tt_errbuf *err);
/* Writes version 1.0; TT_ERR_IO on failure (nothing is left at path). */
tt_status tt_npy_write(const char *path, tt_dtype dtype, int rank, const int64_t *dims,
                       const void *data, tt_errbuf *err);
void tt_npy_free(tt_npy *a);

#endif
