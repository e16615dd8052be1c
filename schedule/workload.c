#include "workload.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tt_workload_free(tt_workload *w)
{
    if (!w)
        return;
    free(w->key);
    tt_dag_free(&w->dag);
    free(w);
}

static tt_status finish(tt_workload *w, tt_strbuf *key, tt_errbuf *err)
{
    w->key = tt_strbuf_take(key);
    if (!w->key)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    w->hash = tt_hash64_str(w->key);
    w->flops = tt_dag_flops(&w->dag);
    return TT_OK;
}

static tt_status parse_library(const char *text, tt_workload *w, tt_errbuf *err)
{
    const char *colon = strchr(text, ':');
    size_t oplen = colon ? (size_t)(colon - text) : strlen(text);
    const tt_op_def *def = tt_op_library_find(text, oplen);
    if (!def)
        return tt_err(
            err, TT_ERR_UNKNOWN_OP,
            "unknown operator '%.*s' (see `tvm-tune ops` for the library, or write te:...)",
            (int)oplen, text);
    w->def = def;
    bool seen[TT_MAX_OP_PARAMS] = {false};
    const char *dtype = "float32";
    char dtbuf[16];
    const char *s = colon ? colon + 1 : text + oplen;
    while (colon && *s) {
        size_t col = (size_t)(s - text) + 1;
        const char *eq = strchr(s, '=');
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        if (!eq || eq > end)
            return tt_err(err, TT_ERR_PARSE, "column %zu: expected KEY=VALUE, found '%.*s'", col,
                          (int)(end - s), s);
        size_t klen = (size_t)(eq - s);
        if (klen == 5 && memcmp(s, "dtype", 5) == 0) {
            int dt = tt_dtype_parse(eq + 1, (size_t)(end - eq - 1));
            if (dt < 0 || dt == TT_DT_BOOL)
                return tt_err(err, TT_ERR_BAD_WORKLOAD,
                              "column %zu: unknown dtype '%.*s' (float32, float64, int32, int64)",
                              col, (int)(end - eq - 1), eq + 1);
            w->dtype = (tt_dtype)dt;
            snprintf(dtbuf, sizeof(dtbuf), "%s", tt_dtype_name(w->dtype));
            dtype = dtbuf;
        } else {
            int k = -1;
            for (int i = 0; i < def->nparams; i++)
                if (strlen(def->params[i].name) == klen &&
                    memcmp(def->params[i].name, s, klen) == 0)
                    k = i;
            if (k < 0) {
                tt_strbuf names = {0};
                for (int i = 0; i < def->nparams; i++)
                    tt_strbuf_printf(&names, "%s%s", i ? ", " : "", def->params[i].name);
                tt_status st =
                    tt_err(err, TT_ERR_BAD_WORKLOAD,
                           "column %zu: %s has no parameter '%.*s' (parameters: %s, dtype)", col,
                           def->name, (int)klen, s, tt_strbuf_cstr(&names));
                tt_strbuf_free(&names);
                return st;
            }
            if (seen[k])
                return tt_err(err, TT_ERR_BAD_WORKLOAD, "column %zu: parameter %s given twice", col,
                              def->params[k].name);
            const char *v = eq + 1;
            char *vend;
            errno = 0;
            long long val = strtoll(v, &vend, 10);
            if (v == end || vend != end || !isdigit((unsigned char)*v) || errno == ERANGE)
                return tt_err(err, TT_ERR_PARSE,
                              "column %zu: value of %s must be an integer, found '%.*s'", col,
                              def->params[k].name, (int)(end - v), v);
            if (val < def->params[k].min || val > (1LL << 31))
                return tt_err(err, TT_ERR_BAD_WORKLOAD,
                              "column %zu: %s=%lld is out of range (%lld .. 2^31)", col,
                              def->params[k].name, val, (long long)def->params[k].min);
            w->params[k] = val;
            seen[k] = true;
        }
        s = *end ? end + 1 : end;
        if (*end && !*s)
            return tt_err(err, TT_ERR_PARSE, "column %zu: trailing ','", (size_t)(end - text) + 1);
    }
    for (int i = 0; i < def->nparams; i++) {
        if (seen[i])
            continue;
        if (!def->params[i].optional)
            return tt_err(err, TT_ERR_BAD_WORKLOAD, "%s needs parameter %s (%s)", def->name,
                          def->params[i].name, def->params[i].doc);
        w->params[i] = def->params[i].def;
    }
    /* Canonical key and the DAG through the TE program of the operator. */
    tt_strbuf key = {0}, prog = {0};
    tt_strbuf_append(&key, def->name);
    int n = 0;
    for (int i = 0; i < def->nparams; i++) {
        if (def->params[i].optional && w->params[i] == def->params[i].def)
            continue;
        tt_strbuf_printf(&key, "%c%s=%lld", n++ ? ',' : ':', def->params[i].name,
                         (long long)w->params[i]);
    }
    if (w->dtype != TT_DT_FLOAT32)
        tt_strbuf_printf(&key, "%cdtype=%s", n++ ? ',' : ':', tt_dtype_name(w->dtype));
    tt_status st = def->te(&prog, w->params, dtype, err);
    if (!st)
        st = tt_te_parse(tt_strbuf_cstr(&prog), &w->dag, NULL, err);
    if (st && st != TT_ERR_NOMEM)
        tt_err_prefix(err, st, "%s", tt_strbuf_cstr(&key));
    if (!st)
        st = finish(w, &key, err);
    tt_strbuf_free(&key);
    tt_strbuf_free(&prog);
    return st;
}

tt_status tt_workload_parse(const char *text, tt_workload **out, tt_errbuf *err)
{
    *out = NULL;
    if (!text || !*text)
        return tt_err(err, TT_ERR_PARSE, "empty workload");
    if (strlen(text) > 65536)
        return tt_err(err, TT_ERR_LIMIT, "workload text longer than 65536 bytes");
    for (const char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\n')
            return tt_err(err, TT_ERR_PARSE, "column %zu: control character in workload",
                          (size_t)(c - text) + 1);
    tt_workload *w = calloc(1, sizeof(*w));
    if (!w)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_dag_init(&w->dag);
    w->dtype = TT_DT_FLOAT32;
    tt_status st;
    if (strncmp(text, "te:", 3) == 0) {
        tt_strbuf key = {0};
        tt_strbuf_append(&key, "te:");
        st = tt_te_parse(text + 3, &w->dag, &key, err);
        if (!st)
            st = finish(w, &key, err);
        tt_strbuf_free(&key);
    } else {
        st = parse_library(text, w, err);
    }
    if (st) {
        tt_workload_free(w);
        return st;
    }
    *out = w;
    return TT_OK;
}
