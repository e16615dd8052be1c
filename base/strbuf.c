#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(tt_strbuf *sb, size_t n)
{
    if (sb->oom)
        return -1;
    if (sb->len + n + 1 <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap * 2 : 64;
    while (cap < sb->len + n + 1)
        cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->oom = 1;
        return -1;
    }
    sb->data = p;
    sb->cap = cap;
    return 0;
}

void tt_strbuf_appendn(tt_strbuf *sb, const char *s, size_t n)
{
    if (grow(sb, n))
        return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void tt_strbuf_append(tt_strbuf *sb, const char *s)
{
    tt_strbuf_appendn(sb, s, strlen(s));
}

void tt_strbuf_vprintf(tt_strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || grow(sb, (size_t)n))
        return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void tt_strbuf_printf(tt_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
}

void tt_strbuf_indent(tt_strbuf *sb, int n)
{
    for (int i = 0; i < n; i++)
        tt_strbuf_appendn(sb, "  ", 2);
}

const char *tt_strbuf_cstr(const tt_strbuf *sb)
{
    return sb->data ? sb->data : "";
}

char *tt_strbuf_take(tt_strbuf *sb)
{
    char *p = sb->oom ? NULL : sb->data;
    if (!p && !sb->oom)
        p = strdup("");
    if (sb->oom)
        free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
    return p;
}

void tt_strbuf_free(tt_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}
