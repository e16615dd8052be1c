/* Small helpers over jansson: parse with a located error, typed field access that says which
 * field was wrong, and compact dumping.  Thread-safe (jansson is, for distinct values). */
#ifndef TT_BASE_JSON_H
#define TT_BASE_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "status.h"

/* Parses `text` (`len` bytes) into a new reference in *out.  On error returns TT_ERR_PARSE and
 * says "line L, column C: reason". */
tt_status tt_json_parse(const char *text, size_t len, json_t **out, tt_errbuf *err);
/* Integer element `i` of array `a`, or TT_ERR_PARSE naming `what`. */
tt_status tt_json_array_int(const json_t *a, size_t i, const char *what, int64_t *out,
                            tt_errbuf *err);
/* Integer member `key` of object `o`; TT_ERR_PARSE when absent or not an integer. */
tt_status tt_json_object_int(const json_t *o, const char *key, int64_t *out, tt_errbuf *err);
/* String member `key` of object `o` (borrowed from `o`). */
tt_status tt_json_object_str(const json_t *o, const char *key, const char **out, tt_errbuf *err);
/* Compact one-line text in the ", "-separated style TVM's logs use; caller frees. NULL on OOM. */
char *tt_json_dump_compact(const json_t *v);

struct tt_strbuf;
/* Python json.dumps style (", " and ": " separators, ensure_ascii escapes, floats as repr). */
void tt_json_write_py(struct tt_strbuf *sb, const json_t *v);
void tt_json_write_py_string(struct tt_strbuf *sb, const char *s);
/* TVM's C++ writer style: ", " separators, strings escaping only \r \n \\ \t and ", reals
 * with 6 significant digits. */
void tt_json_write_cxx(struct tt_strbuf *sb, const json_t *v);
void tt_json_write_cxx_string(struct tt_strbuf *sb, const char *s);

#endif
