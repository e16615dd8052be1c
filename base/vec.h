/* Growable arrays.
 *
 *     TT_VEC(int) v = {0};
 *     if (TT_VEC_PUSH(&v, 42)) ...out of memory...
 *     for (size_t i = 0; i < v.len; i++) use(v.data[i]);
 *     TT_VEC_FREE(&v);
 *
 * The element type is part of the struct, so the compiler checks every push.  Not thread-safe. */
#ifndef TT_BASE_VEC_H
#define TT_BASE_VEC_H

#include <stddef.h>

#define TT_VEC(T)                                                                                  \
    struct {                                                                                       \
        T *data;                                                                                   \
        size_t len, cap;                                                                           \
    }

/* Ensures room for `n` more elements. Returns 0, or -1 when out of memory (the vector is intact).
 */
int tt__vec_reserve(void **data, size_t *cap, size_t len, size_t n, size_t elem);

#define TT_VEC_RESERVE(v, n)                                                                       \
    tt__vec_reserve((void **)&(v)->data, &(v)->cap, (v)->len, (n), sizeof(*(v)->data))
/* Appends a value; evaluates to 0 on success, -1 when out of memory. */
#define TT_VEC_PUSH(v, x) (TT_VEC_RESERVE(v, 1) ? -1 : ((v)->data[(v)->len++] = (x), 0))
#define TT_VEC_POP(v)     ((v)->data[--(v)->len])
#define TT_VEC_LAST(v)    ((v)->data[(v)->len - 1])
#define TT_VEC_CLEAR(v)   ((v)->len = 0)
#define TT_VEC_FREE(v)                                                                             \
    do {                                                                                           \
        free((v)->data);                                                                           \
        (v)->data = NULL;                                                                          \
        (v)->len = (v)->cap = 0;                                                                   \
    } while (0)

#endif
