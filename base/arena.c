#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tt_arena_block {
    tt_arena_block *next;
    size_t size, off;
    _Alignas(16) unsigned char data[];
};

void tt_arena_init(tt_arena *a, size_t block_size)
{
    a->head = NULL;
    a->block_size = block_size ? block_size : 16384;
    a->used = 0;
}

void *tt_arena_alloc(tt_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    tt_arena_block *b = a->head;
    if (!b || b->size - b->off < size) {
        size_t cap = size > a->block_size ? size : a->block_size;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->size = cap;
        b->off = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->off;
    b->off += size;
    a->used += size;
    memset(p, 0, size);
    return p;
}

char *tt_arena_strndup(tt_arena *a, const char *s, size_t n)
{
    char *p = tt_arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

char *tt_arena_strdup(tt_arena *a, const char *s)
{
    return tt_arena_strndup(a, s, strlen(s));
}

char *tt_arena_printf(tt_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = tt_arena_alloc(a, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void tt_arena_free(tt_arena *a)
{
    tt_arena_block *b = a->head;
    while (b) {
        tt_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}
