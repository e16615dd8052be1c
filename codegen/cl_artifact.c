#define _GNU_SOURCE
#include "cl_artifact.h"

#include <stdio.h>
#include <string.h>

#include "../base/json.h"
#include "../base/fmt.h"
#include "../base/strbuf.h"

static const char *const elem_names[] = {"float32", "float64", "int32", "int64", "uint8"};

const char *tt_cl_elem_name(tt_cl_elem e)
{
    return (unsigned)e < sizeof(elem_names) / sizeof(elem_names[0]) ? elem_names[e] : "?";
}

size_t tt_cl_elem_bytes(tt_cl_elem e)
{
    switch (e) {
    case TT_CL_F32:
    case TT_CL_I32: return 4;
    case TT_CL_F64:
    case TT_CL_I64: return 8;
    default: return 1;
    }
}

bool tt_cl_artifact_is(const char *text, size_t len)
{
    size_t m = strlen(TT_CL_ARTIFACT_MAGIC);
    return text && len >= m && memcmp(text, TT_CL_ARTIFACT_MAGIC, m) == 0;
}

static tt_status parse_dims(const json_t *k, const char *key, int64_t out[3], int kernel,
                            tt_errbuf *err)
{
    const json_t *a = json_object_get(k, key);
    if (!json_is_array(a) || json_array_size(a) != 3)
        return tt_err(err, TT_ERR_PARSE, "kernel %d: \"%s\" must be an array of 3 integers", kernel,
                      key);
    for (size_t i = 0; i < 3; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
            return tt_err(err, TT_ERR_PARSE, "kernel %d: %s[%zu] must be an integer >= 1", kernel,
                          key, i);
        out[i] = json_integer_value(v);
    }
    return TT_OK;
}

static tt_status parse_buffers(const json_t *root, const char *key, tt_cl_buffer *out, int *n,
                               tt_errbuf *err)
{
    const json_t *a = json_object_get(root, key);
    *n = 0;
    if (!a)
        return TT_OK;
    if (!json_is_array(a) || json_array_size(a) > TT_CL_MAX_BUFFERS)
        return tt_err(err, TT_ERR_PARSE, "\"%s\" must be an array of at most %d buffers", key,
                      TT_CL_MAX_BUFFERS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *b = json_array_get(a, i);
        const char *dt;
        int64_t count;
        if (!json_is_object(b) || tt_json_object_str(b, "dtype", &dt, err) ||
            tt_json_object_int(b, "count", &count, err))
            return tt_err_prefix(err, TT_ERR_PARSE, "%s[%zu]", key, i);
        int e = -1;
        for (int k = 0; k < (int)(sizeof(elem_names) / sizeof(elem_names[0])); k++)
            if (strcmp(dt, elem_names[k]) == 0)
                e = k;
        if (e < 0)
            return tt_err(err, TT_ERR_PARSE, "%s[%zu]: unknown dtype '%s'", key, i, dt);
        if (count < 0)
            return tt_err(err, TT_ERR_PARSE, "%s[%zu]: negative count", key, i);
        out[*n].elem = (tt_cl_elem)e;
        out[*n].count = count;
        (*n)++;
    }
    return TT_OK;
}

tt_status tt_cl_artifact_parse(const char *text, size_t len, tt_cl_artifact *out, tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    if (!tt_cl_artifact_is(text, len))
        return tt_err(err, TT_ERR_PARSE, "not an OpenCL artifact (no '%.28s' header)",
                      TT_CL_ARTIFACT_MAGIC);
    const char *start = text + strlen(TT_CL_ARTIFACT_MAGIC);
    const char *end = memmem(start, len - (size_t)(start - text), "*/", 2);
    if (!end)
        return tt_err(err, TT_ERR_PARSE, "OpenCL artifact: the metadata comment is not closed");
    json_t *root;
    tt_status r = tt_json_parse(start, (size_t)(end - start), &root, err);
    if (r)
        return tt_err_prefix(err, r, "OpenCL artifact metadata");
    const json_t *ks = json_object_get(root, "kernels");
    if (!json_is_array(ks) || json_array_size(ks) < 1 || json_array_size(ks) > TT_CL_MAX_KERNELS) {
        json_decref(root);
        return tt_err(err, TT_ERR_PARSE, "OpenCL artifact: \"kernels\" must list 1 to %d kernels",
                      TT_CL_MAX_KERNELS);
    }
    for (size_t i = 0; i < json_array_size(ks) && !r; i++) {
        const json_t *k = json_array_get(ks, i);
        const char *name;
        tt_cl_kernel *kk = &out->kernels[i];
        if (!json_is_object(k) || tt_json_object_str(k, "name", &name, err))
            r = tt_err_prefix(err, TT_ERR_PARSE, "OpenCL artifact: kernel %zu", i);
        else if (!tt_is_identifier(name) || strlen(name) >= sizeof(kk->name))
            r = tt_err(err, TT_ERR_PARSE,
                       "OpenCL artifact: kernel %zu: the name must be an identifier of at most "
                       "%zu characters",
                       i, sizeof(kk->name) - 1);
        else {
            snprintf(kk->name, sizeof(kk->name), "%s", name);
            r = parse_dims(k, "grid", kk->grid, (int)i, err);
            if (!r)
                r = parse_dims(k, "block", kk->block, (int)i, err);
        }
        out->nkernels++;
    }
    if (!r)
        r = parse_buffers(root, "params", out->params, &out->nparams, err);
    if (!r)
        r = parse_buffers(root, "workspace", out->workspace, &out->nworkspace, err);
    const json_t *sh = json_object_get(root, "shared_bytes");
    if (!r && json_is_integer(sh))
        out->shared_bytes = json_integer_value(sh);
    json_decref(root);
    return r;
}

static void write_buffers(tt_strbuf *sb, const char *key, const tt_cl_buffer *b, int n)
{
    tt_strbuf_printf(sb, ",\n \"%s\": [", key);
    for (int i = 0; i < n; i++)
        tt_strbuf_printf(sb, "%s{\"dtype\": \"%s\", \"count\": %lld}", i ? ", " : "",
                         tt_cl_elem_name(b[i].elem), (long long)b[i].count);
    tt_strbuf_append(sb, "]");
}

char *tt_cl_artifact_header(const tt_cl_artifact *a)
{
    tt_strbuf sb = {0};
    tt_strbuf_append(&sb, TT_CL_ARTIFACT_MAGIC);
    tt_strbuf_append(&sb, "{\"kernels\": [");
    for (int i = 0; i < a->nkernels; i++) {
        const tt_cl_kernel *k = &a->kernels[i];
        tt_strbuf_printf(&sb,
                         "%s{\"name\": \"%s\", \"grid\": [%lld, %lld, %lld], "
                         "\"block\": [%lld, %lld, %lld]}",
                         i ? ",\n  " : "", k->name, (long long)k->grid[0], (long long)k->grid[1],
                         (long long)k->grid[2], (long long)k->block[0], (long long)k->block[1],
                         (long long)k->block[2]);
    }
    tt_strbuf_append(&sb, "]");
    write_buffers(&sb, "params", a->params, a->nparams);
    write_buffers(&sb, "workspace", a->workspace, a->nworkspace);
    tt_strbuf_printf(&sb, ",\n \"shared_bytes\": %lld}\n*/\n", (long long)a->shared_bytes);
    return tt_strbuf_take(&sb);
}
