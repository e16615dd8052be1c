#include "json.h"

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
