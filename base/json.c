#include "json.h"

#include <stdbool.h>

#include "fmt.h"
#include "strbuf.h"

#include <stdlib.h>

tt_status tt_json_parse(const char *text, size_t len, json_t **out, tt_errbuf *err)
{
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*out)
        return tt_err(err, TT_ERR_PARSE, "line %d, column %d: %s", je.line, je.column, je.text);
    return TT_OK;
}

tt_status tt_json_array_int(const json_t *a, size_t i, const char *what, int64_t *out,
                            tt_errbuf *err)
{
    const json_t *v = json_array_get(a, i);
    if (!v || !json_is_integer(v))
        return tt_err(err, TT_ERR_PARSE, "%s (element %zu) must be an integer", what, i);
    *out = (int64_t)json_integer_value(v);
    return TT_OK;
}

tt_status tt_json_object_int(const json_t *o, const char *key, int64_t *out, tt_errbuf *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || !json_is_integer(v))
        return tt_err(err, TT_ERR_PARSE, "field \"%s\" must be an integer", key);
    *out = (int64_t)json_integer_value(v);
    return TT_OK;
}

tt_status tt_json_object_str(const json_t *o, const char *key, const char **out, tt_errbuf *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || !json_is_string(v))
        return tt_err(err, TT_ERR_PARSE, "field \"%s\" must be a string", key);
    *out = json_string_value(v);
    return TT_OK;
}

char *tt_json_dump_compact(const json_t *v)
{
    /* JSON_COMPACT drops the spaces TVM writes after ',' and ':'; keep jansson's default
     * separators (", " and ": ") and only ask for one line. */
    return json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

/* ---- writers in other programs' styles ---- */

/* Python json.dumps (ensure_ascii) string. */
void tt_json_write_py_string(tt_strbuf *sb, const char *s)
{
    tt_strbuf_append(sb, "\"");
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            tt_strbuf_printf(sb, "\\%c", c);
            p++;
        } else if (c == '\n') {
            tt_strbuf_append(sb, "\\n"), p++;
        } else if (c == '\r') {
            tt_strbuf_append(sb, "\\r"), p++;
        } else if (c == '\t') {
            tt_strbuf_append(sb, "\\t"), p++;
        } else if (c == '\b') {
            tt_strbuf_append(sb, "\\b"), p++;
        } else if (c == '\f') {
            tt_strbuf_append(sb, "\\f"), p++;
        } else if (c < 0x20) {
            tt_strbuf_printf(sb, "\\u%04x", c), p++;
        } else if (c < 0x80) {
            tt_strbuf_appendn(sb, (const char *)p, 1), p++;
        } else {
            /* Decode UTF-8 (jansson guarantees it is valid) and write UTF-16 escapes. */
            unsigned cp;
            int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
            for (int i = 1; i < len && p[i]; i++)
                cp = (cp << 6) | (p[i] & 0x3f);
            p += len;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                tt_strbuf_printf(sb, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                tt_strbuf_printf(sb, "\\u%04x", cp);
            }
        }
    }
    tt_strbuf_append(sb, "\"");
}

/* Python json.dumps of a value. */
void tt_json_write_py(tt_strbuf *sb, const json_t *v)
{
    char b[40];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        bool first = true;
        tt_strbuf_append(sb, "{");
        json_object_foreach((json_t *)v, k, x)
        {
            tt_strbuf_append(sb, first ? "" : ", ");
            first = false;
            tt_json_write_py_string(sb, k);
            tt_strbuf_append(sb, ": ");
            tt_json_write_py(sb, x);
        }
        tt_strbuf_append(sb, "}");
        return;
    }
    case JSON_ARRAY:
        tt_strbuf_append(sb, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            tt_strbuf_append(sb, i ? ", " : "");
            tt_json_write_py(sb, json_array_get(v, i));
        }
        tt_strbuf_append(sb, "]");
        return;
    case JSON_STRING: tt_json_write_py_string(sb, json_string_value(v)); return;
    case JSON_INTEGER: tt_strbuf_printf(sb, "%lld", (long long)json_integer_value(v)); return;
    case JSON_REAL:
        tt_fmt_pyfloat(b, sizeof(b), json_real_value(v));
        tt_strbuf_append(sb, b);
        return;
    case JSON_TRUE: tt_strbuf_append(sb, "true"); return;
    case JSON_FALSE: tt_strbuf_append(sb, "false"); return;
    default: tt_strbuf_append(sb, "null"); return;
    }
}

/* TVM's C++ JSON writer: escapes only \r \n \\ \t and ". */
void tt_json_write_cxx_string(tt_strbuf *sb, const char *s)
{
    tt_strbuf_append(sb, "\"");
    for (; *s; s++) {
        switch (*s) {
        case '\r': tt_strbuf_append(sb, "\\r"); break;
        case '\n': tt_strbuf_append(sb, "\\n"); break;
        case '\t': tt_strbuf_append(sb, "\\t"); break;
        case '\\': tt_strbuf_append(sb, "\\\\"); break;
        case '"': tt_strbuf_append(sb, "\\\""); break;
        default:
            /* TVM leaves other control characters raw, which is not JSON: escape them. */
            if ((unsigned char)*s < 0x20)
                tt_strbuf_printf(sb, "\\u%04x", (unsigned char)*s);
            else
                tt_strbuf_appendn(sb, s, 1);
            break;
        }
    }
    tt_strbuf_append(sb, "\"");
}

void tt_json_write_cxx(tt_strbuf *sb, const json_t *v)
{
    char b[40];
    switch (json_typeof(v)) {
    case JSON_ARRAY:
        tt_strbuf_append(sb, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            tt_strbuf_append(sb, i ? ", " : "");
            tt_json_write_cxx(sb, json_array_get(v, i));
        }
        tt_strbuf_append(sb, "]");
        return;
    case JSON_STRING: tt_json_write_cxx_string(sb, json_string_value(v)); return;
    case JSON_INTEGER: tt_strbuf_printf(sb, "%lld", (long long)json_integer_value(v)); return;
    case JSON_REAL:
        tt_fmt_g6(b, sizeof(b), json_real_value(v));
        tt_strbuf_append(sb, b);
        return;
    case JSON_TRUE: tt_strbuf_append(sb, "true"); return;
    case JSON_FALSE: tt_strbuf_append(sb, "false"); return;
    case JSON_NULL: tt_strbuf_append(sb, "null"); return;
    default: tt_json_write_py(sb, v); return; /* objects do not occur in auto_scheduler records */
    }
}
