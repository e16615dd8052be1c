/* Step lists as text: Ansor's step arrays (log-formats.md §2.4), written in TVM's ", " style. */
#include "state.h"

#include <stdlib.h>
#include <string.h>

static void put_ints(tt_strbuf *sb, const int *v, int n)
{
    tt_strbuf_append(sb, "[");
    for (int i = 0; i < n; i++)
        tt_strbuf_printf(sb, "%s%d", i ? ", " : "", v[i]);
    tt_strbuf_append(sb, "]");
}

static void put_str(tt_strbuf *sb, const char *s)
{
    tt_strbuf_append(sb, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            tt_strbuf_printf(sb, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            tt_strbuf_printf(sb, "\\u%04x", *s);
        else
            tt_strbuf_appendn(sb, s, 1);
    }
    tt_strbuf_append(sb, "\"");
}

char *tt_steps_to_json(const tt_step *steps, size_t n)
{
    tt_strbuf sb = {0};
    tt_strbuf_append(&sb, "[");
    for (size_t i = 0; i < n; i++) {
        const tt_step *s = &steps[i];
        tt_strbuf_printf(&sb, "%s[\"%s\", %d", i ? ", " : "", tt_step_code(s->kind), s->stage);
        switch (s->kind) {
        case TT_STEP_ANNOTATE: tt_strbuf_printf(&sb, ", %d, %d", s->iter, (int)s->ann); break;
        case TT_STEP_FUSE:
        case TT_STEP_REORDER:
            tt_strbuf_append(&sb, ", ");
            put_ints(&sb, s->ids, s->nids);
            break;
        case TT_STEP_PRAGMA:
            tt_strbuf_printf(&sb, ", %d, ", s->iter);
            put_str(&sb, s->pragma);
            break;
        case TT_STEP_SPLIT:
            tt_strbuf_printf(&sb, ", %d, %lld, [", s->iter, (long long)s->extent);
            for (int k = 0; k < s->nlen; k++)
                tt_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)s->lengths[k]);
            tt_strbuf_printf(&sb, "], %d", s->inner_to_outer);
            break;
        case TT_STEP_FOLLOW_SPLIT:
            tt_strbuf_printf(&sb, ", %d, %d, %d", s->iter, s->src_step, s->n_split);
            break;
        case TT_STEP_FOLLOW_FUSED_SPLIT:
            tt_strbuf_printf(&sb, ", %d, ", s->iter);
            put_ints(&sb, s->srcs, s->nsrc);
            tt_strbuf_printf(&sb, ", %d, %d", s->level, s->factor_or_nparts);
            break;
        case TT_STEP_STORAGE_ALIGN:
            tt_strbuf_printf(&sb, ", %d, %d, %d", s->iter, s->factor, s->offset);
            break;
        case TT_STEP_COMPUTE_AT:
            tt_strbuf_printf(&sb, ", %d, %d", s->target_stage, s->target_iter);
            break;
        case TT_STEP_CACHE_READ:
            tt_strbuf_append(&sb, ", ");
            put_str(&sb, s->scope);
            tt_strbuf_append(&sb, ", ");
            put_ints(&sb, s->ids, s->nids);
            break;
        case TT_STEP_CACHE_WRITE:
            tt_strbuf_append(&sb, ", ");
            put_str(&sb, s->scope);
            break;
        case TT_STEP_RFACTOR: tt_strbuf_printf(&sb, ", %d, %d", s->iter, s->factor_iter); break;
        default: break;
        }
        tt_strbuf_append(&sb, "]");
    }
    tt_strbuf_append(&sb, "]");
    return tt_strbuf_take(&sb);
}

typedef struct {
    const json_t *a;
    size_t index;
    const char *code;
    tt_errbuf *err;
} field_ctx;

static tt_status bad(field_ctx *f, size_t pos, const char *what)
{
    return tt_err(f->err, TT_ERR_PARSE, "step %zu (%s): field %zu must be %s", f->index, f->code,
                  pos, what);
}

static tt_status get_int(field_ctx *f, size_t pos, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = json_array_get(f->a, pos);
    if (!v || !json_is_integer(v))
        return bad(f, pos, "an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        return tt_err(f->err, TT_ERR_PARSE,
                      "step %zu (%s): field %zu = %lld is out of range %lld .. %lld", f->index,
                      f->code, pos, (long long)x, (long long)lo, (long long)hi);
    }
    *out = x;
    return TT_OK;
}

static tt_status get_i(field_ctx *f, size_t pos, int *out)
{
    int64_t v;
    tt_status s = get_int(f, pos, -1, 1 << 20, &v);
    if (!s)
        *out = (int)v;
    return s;
}

static tt_status get_int_list(field_ctx *f, size_t pos, int max, int *out, int *n)
{
    const json_t *v = json_array_get(f->a, pos);
    if (!v || !json_is_array(v))
        return bad(f, pos, "an array of integers");
    if ((int)json_array_size(v) > max)
        return tt_err(f->err, TT_ERR_LIMIT, "step %zu (%s): field %zu has %zu entries (at most %d)",
                      f->index, f->code, pos, json_array_size(v), max);
    *n = (int)json_array_size(v);
    for (int i = 0; i < *n; i++) {
        const json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 1 << 20)
            return bad(f, pos, "an array of non-negative integers");
        out[i] = (int)json_integer_value(x);
    }
    return TT_OK;
}

static tt_status get_str(field_ctx *f, size_t pos, char *out, size_t cap)
{
    const json_t *v = json_array_get(f->a, pos);
    if (!v || !json_is_string(v))
        return bad(f, pos, "a string");
    if (strlen(json_string_value(v)) >= cap)
        return tt_err(f->err, TT_ERR_LIMIT, "step %zu (%s): field %zu is longer than %zu bytes",
                      f->index, f->code, pos, cap - 1);
    strcpy(out, json_string_value(v));
    return TT_OK;
}

static tt_status parse_step(const json_t *a, size_t index, tt_step *s, tt_errbuf *err)
{
    memset(s, 0, sizeof(*s));
    if (!json_is_array(a) || json_array_size(a) < 2 || !json_is_string(json_array_get(a, 0)))
        return tt_err(err, TT_ERR_PARSE, "step %zu: expected [\"CODE\", stage, ...]", index);
    const char *code = json_string_value(json_array_get(a, 0));
    int k = -1;
    for (int i = 0; i < TT_STEP_KIND_COUNT; i++)
        if (strcmp(code, tt_step_code((tt_step_kind)i)) == 0)
            k = i;
    if (k < 0)
        return tt_err(err, TT_ERR_PARSE, "step %zu: unknown step code \"%.16s\"", index, code);
    static const size_t arity[TT_STEP_KIND_COUNT] = {[TT_STEP_ANNOTATE] = 4,
                                                     [TT_STEP_FUSE] = 3,
                                                     [TT_STEP_PRAGMA] = 4,
                                                     [TT_STEP_REORDER] = 3,
                                                     [TT_STEP_SPLIT] = 6,
                                                     [TT_STEP_FOLLOW_SPLIT] = 5,
                                                     [TT_STEP_FOLLOW_FUSED_SPLIT] = 6,
                                                     [TT_STEP_STORAGE_ALIGN] = 5,
                                                     [TT_STEP_COMPUTE_AT] = 4,
                                                     [TT_STEP_COMPUTE_INLINE] = 2,
                                                     [TT_STEP_COMPUTE_ROOT] = 2,
                                                     [TT_STEP_CACHE_READ] = 4,
                                                     [TT_STEP_CACHE_WRITE] = 3,
                                                     [TT_STEP_RFACTOR] = 4,
                                                     [TT_STEP_LAYOUT_REWRITE] = 2};
    s->kind = (tt_step_kind)k;
    if (json_array_size(a) != arity[k])
        return tt_err(err, TT_ERR_PARSE, "step %zu (%s): expected %zu fields, found %zu", index,
                      code, arity[k], json_array_size(a));
    field_ctx f = {a, index, code, err};
    tt_status r;
    int64_t v;
    if ((r = get_int(&f, 1, 0, 1 << 20, &v)))
        return r;
    s->stage = (int)v;
    switch (s->kind) {
    case TT_STEP_ANNOTATE:
        if ((r = get_i(&f, 2, &s->iter)) || (r = get_int(&f, 3, 0, TT_ANN_COUNT - 1, &v)))
            return r;
        s->ann = (tt_ann)v;
        return TT_OK;
    case TT_STEP_FUSE:
    case TT_STEP_REORDER: return get_int_list(&f, 2, TT_MAX_ITERS, s->ids, &s->nids);
    case TT_STEP_PRAGMA:
        if ((r = get_i(&f, 2, &s->iter)))
            return r;
        return get_str(&f, 3, s->pragma, sizeof(s->pragma));
    case TT_STEP_SPLIT: {
        if ((r = get_i(&f, 2, &s->iter)) || (r = get_int(&f, 3, 0, 1LL << 40, &s->extent)))
            return r;
        const json_t *l = json_array_get(a, 4);
        if (!json_is_array(l))
            return bad(&f, 4, "an array of lengths");
        if (json_array_size(l) >= TT_MAX_SPLIT)
            return tt_err(err, TT_ERR_LIMIT, "step %zu (SP): %zu lengths (at most %d)", index,
                          json_array_size(l), TT_MAX_SPLIT - 1);
        s->nlen = (int)json_array_size(l);
        for (int i = 0; i < s->nlen; i++) {
            const json_t *x = json_array_get(l, (size_t)i);
            if (json_is_null(x))
                return tt_err(
                    err, TT_ERR_PARSE,
                    "step %zu (SP): length %d is undefined (null): a sketch, not a complete config",
                    index, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) > 1LL << 40)
                return bad(&f, 4, "an array of non-negative integer lengths");
            s->lengths[i] = json_integer_value(x);
        }
        if ((r = get_int(&f, 5, 0, 1, &v)))
            return r;
        s->inner_to_outer = (int)v;
        return TT_OK;
    }
    case TT_STEP_FOLLOW_SPLIT:
        if ((r = get_i(&f, 2, &s->iter)) || (r = get_i(&f, 3, &s->src_step)) ||
            (r = get_i(&f, 4, &s->n_split)))
            return r;
        return TT_OK;
    case TT_STEP_FOLLOW_FUSED_SPLIT:
        if ((r = get_i(&f, 2, &s->iter)) ||
            (r = get_int_list(&f, 3, TT_MAX_SPLIT, s->srcs, &s->nsrc)) ||
            (r = get_i(&f, 4, &s->level)) || (r = get_int(&f, 5, 0, 1, &v)))
            return r;
        s->factor_or_nparts = (int)v;
        return TT_OK;
    case TT_STEP_STORAGE_ALIGN:
        if ((r = get_i(&f, 2, &s->iter)) || (r = get_i(&f, 3, &s->factor)) ||
            (r = get_i(&f, 4, &s->offset)))
            return r;
        return TT_OK;
    case TT_STEP_COMPUTE_AT:
        if ((r = get_i(&f, 2, &s->target_stage)) || (r = get_i(&f, 3, &s->target_iter)))
            return r;
        return TT_OK;
    case TT_STEP_CACHE_READ:
        if ((r = get_str(&f, 2, s->scope, sizeof(s->scope))))
            return r;
        return get_int_list(&f, 3, TT_MAX_ITERS, s->ids, &s->nids);
    case TT_STEP_CACHE_WRITE: return get_str(&f, 2, s->scope, sizeof(s->scope));
    case TT_STEP_RFACTOR:
        if ((r = get_i(&f, 2, &s->iter)) || (r = get_i(&f, 3, &s->factor_iter)))
            return r;
        return TT_OK;
    default: return TT_OK;
    }
}

tt_status tt_steps_from_jarray(const json_t *arr, tt_step **out, size_t *n, tt_errbuf *err)
{
    *out = NULL;
    *n = 0;
    if (!json_is_array(arr))
        return tt_err(err, TT_ERR_PARSE, "a step list is a JSON array of steps");
    size_t count = json_array_size(arr);
    if (count > 100000)
        return tt_err(err, TT_ERR_LIMIT, "%zu steps (at most 100000)", count);
    tt_step *steps = calloc(count ? count : 1, sizeof(tt_step));
    if (!steps)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        tt_status r = parse_step(json_array_get(arr, i), i, &steps[i], err);
        if (r) {
            free(steps);
            return r;
        }
    }
    *out = steps;
    *n = count;
    return TT_OK;
}

tt_status tt_steps_from_json(const char *text, tt_step **out, size_t *n, tt_errbuf *err)
{
    json_t *root;
    *out = NULL;
    *n = 0;
    tt_status r = tt_json_parse(text, strlen(text), &root, err);
    if (r) {
        tt_err_prefix(err, r, "step list");
        return r;
    }
    r = tt_steps_from_jarray(root, out, n, err);
    json_decref(root);
    return r;
}

tt_status tt_state_from_json(const tt_dag *dag, const char *text, tt_state **out, tt_errbuf *err)
{
    tt_step *steps;
    size_t n;
    *out = NULL;
    tt_status s = tt_steps_from_json(text, &steps, &n, err);
    if (s)
        return s;
    s = tt_state_replay(dag, steps, n, out, err);
    free(steps);
    return s;
}
