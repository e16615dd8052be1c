/* Bump allocator: many small allocations freed all at once.
 *
 * A candidate schedule, a lowered program or a search generation owns one arena and frees it
 * whole.  Not thread-safe; one arena per owner. */
#ifndef TT_BASE_ARENA_H
#define TT_BASE_ARENA_H

#include <stddef.h>

typedef struct tt_arena_block tt_arena_block;

typedef struct tt_arena {
    tt_arena_block *head;
    size_t block_size; /* size of the next ordinary block */
    size_t used;       /* bytes handed out, for accounting */
} tt_arena;

void tt_arena_init(tt_arena *a, size_t block_size);
/* Returns zeroed memory aligned to 16 bytes, or NULL when out of memory. */
void *tt_arena_alloc(tt_arena *a, size_t size);
char *tt_arena_strdup(tt_arena *a, const char *s);
char *tt_arena_strndup(tt_arena *a, const char *s, size_t n);
char *tt_arena_printf(tt_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees every block; the arena may be used again afterwards. */
void tt_arena_free(tt_arena *a);

#endif
