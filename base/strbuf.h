/* A growable string for building text (IR printing, canonical keys, JSON). Not thread-safe. */
#ifndef TT_BASE_STRBUF_H
#define TT_BASE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct tt_strbuf {
    char *data; /* always NUL-terminated once anything was appended; NULL when empty */
    size_t len, cap;
    int oom; /* set once an append failed; later appends are ignored */
} tt_strbuf;

void tt_strbuf_append(tt_strbuf *sb, const char *s);
void tt_strbuf_appendn(tt_strbuf *sb, const char *s, size_t n);
void tt_strbuf_printf(tt_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tt_strbuf_vprintf(tt_strbuf *sb, const char *fmt, va_list ap);
void tt_strbuf_indent(tt_strbuf *sb, int n);
/* Returns the text ("" when empty); owned by the strbuf. */
const char *tt_strbuf_cstr(const tt_strbuf *sb);
/* Hands the buffer to the caller (free() it); the strbuf is reset. NULL if out of memory. */
char *tt_strbuf_take(tt_strbuf *sb);
void tt_strbuf_free(tt_strbuf *sb);

#endif
