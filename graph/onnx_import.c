/* ONNX import: protobuf-c's ModelProto into a tt_graph.
 *
 * protobuf-c checks every length prefix against the bytes that remain, so a message cannot claim
 * more than the file holds; what it can do is expand (a packed varint of 1 byte becomes an int64
 * of 8), so every allocation of the parse is charged to a budget of 16x the input plus 1 MiB. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/hash.h"
#include "graph_int.h"
#include "onnx.pb-c.h"

/* ---- names of things ---- */

static const char *const gop_names[] = {
#define TT_GOP_NAME(n, s, ...) s,
    TT_GOP_LIST(TT_GOP_NAME)
#undef TT_GOP_NAME
};

const char *tt_gop_name(tt_gop op)
{
    return (unsigned)op < TT_GOP_COUNT ? gop_names[op] : "?";
}

int tt_gop_parse(const char *name)
{
    for (int i = 0; i < TT_GOP_COUNT; i++)
        if (!strcmp(gop_names[i], name))
            return i;
    return -1;
}

int64_t tt_gtensor_numel(const tt_gtensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

void tt_gtensor_memory_dims(const tt_gtensor *t, int64_t *dims)
{
    for (int k = 0; k < t->rank; k++)
        dims[k] = t->dims[t->permuted ? t->perm[k] : k];
}

const tt_gattr *tt_gnode_attr(const tt_gnode *n, const char *name)
{
    for (int i = 0; i < n->nattrs; i++)
        if (!strcmp(n->attrs[i].name, name))
            return &n->attrs[i];
    return NULL;
}

int64_t tt__attr_int(const tt_gnode *n, const char *name, int64_t def)
{
    const tt_gattr *a = tt_gnode_attr(n, name);
    return a && a->kind == TT_GATTR_INT ? a->i : def;
}

double tt__attr_float(const tt_gnode *n, const char *name, double def)
{
    const tt_gattr *a = tt_gnode_attr(n, name);
    return a && a->kind == TT_GATTR_FLOAT ? a->f : def;
}

const char *tt__attr_str(const tt_gnode *n, const char *name, const char *def)
{
    const tt_gattr *a = tt_gnode_attr(n, name);
    return a && a->kind == TT_GATTR_STRING ? a->s : def;
}

const int64_t *tt__attr_ints(const tt_gnode *n, const char *name, size_t *count)
{
    const tt_gattr *a = tt_gnode_attr(n, name);
    *count = a && a->kind == TT_GATTR_INTS ? a->n : 0;
    return *count ? a->ints : NULL;
}

double tt__gtensor_value(const tt_gtensor *t, int64_t i)
{
    switch (t->dtype) {
    case TT_DT_FLOAT32: return ((const float *)t->data)[i];
    case TT_DT_FLOAT64: return ((const double *)t->data)[i];
    case TT_DT_INT32: return ((const int32_t *)t->data)[i];
    case TT_DT_INT64: return (double)((const int64_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

void tt__gtensor_set(tt_gtensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case TT_DT_FLOAT32: ((float *)t->data)[i] = (float)v; break;
    case TT_DT_FLOAT64: ((double *)t->data)[i] = v; break;
    case TT_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TT_DT_INT64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    }
}

const char *tt_gnode_describe(const tt_graph *g, int node, char *buf, size_t n)
{
    const tt_gnode *nd = &g->nodes.data[node];
    if (nd->name[0])
        snprintf(buf, n, "node %d '%s' (%s)", node, nd->name, tt_gop_name(nd->op));
    else
        snprintf(buf, n, "node %d (%s)", node, tt_gop_name(nd->op));
    return buf;
}

tt_status tt__graph_node_err(const tt_graph *g, int node, tt_errbuf *err, tt_status s,
                             const char *fmt, ...)
{
    char what[512], who[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return tt_err(err, s, "%s: %s: %s", g->source, tt_gnode_describe(g, node, who, sizeof(who)),
                  what);
}

int tt__graph_add_tensor(tt_graph *g, const char *name, tt_gtensor_kind kind)
{
    tt_gtensor t;
    memset(&t, 0, sizeof(t));
    t.name = tt_arena_strdup(&g->arena, name);
    t.kind = kind;
    t.producer = -1;
    if (!t.name || TT_VEC_PUSH(&g->tensors, t))
        return -1;
    return (int)g->tensors.len - 1;
}

void *tt__graph_copy(tt_graph *g, const void *src, size_t bytes)
{
    void *p = tt_arena_alloc(&g->arena, bytes ? bytes : 1);
    if (p && bytes)
        memcpy(p, src, bytes);
    return p;
}

void tt_graph_free(tt_graph *g)
{
    if (!g)
        return;
    TT_VEC_FREE(&g->tensors);
    TT_VEC_FREE(&g->nodes);
    TT_VEC_FREE(&g->inputs);
    TT_VEC_FREE(&g->outputs);
    tt_arena_free(&g->arena);
    free(g);
}

/* ---- the parse budget ---- */

typedef struct {
    size_t used, cap;
    bool over;
} budget;

static void *budget_alloc(void *ud, size_t size)
{
    budget *b = ud;
    if (size > b->cap - b->used) {
        b->over = true;
        return NULL;
    }
    size_t *p = malloc(size + 16);
    if (!p)
        return NULL;
    p[0] = size;
    b->used += size;
    return (char *)p + 16;
}

static void budget_free(void *ud, void *ptr)
{
    if (!ptr)
        return;
    budget *b = ud;
    size_t *p = (size_t *)((char *)ptr - 16);
    b->used -= p[0];
    free(p);
}

/* ---- tensors ---- */

static int dtype_of_onnx(int32_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return TT_DT_FLOAT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return TT_DT_FLOAT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return TT_DT_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return TT_DT_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return TT_DT_BOOL;
    default: return -1;
    }
}

static const char *onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                        "int16",      "int32",   "int64",  "string", "bool",
                                        "float16",    "double",  "uint32", "uint64", "complex64",
                                        "complex128", "bfloat16"};
    return t >= 0 && t < (int32_t)(sizeof(names) / sizeof(names[0])) ? names[t] : "unknown";
}

/* A TensorProto's data stored outside the model (exporters do so past protobuf's 2 GB): bytes of
 * the file `location` names, relative to the model's directory `dir`, from `offset` on.  Only
 * names inside that directory are followed (no absolute path, no ".."), as ONNX's checker
 * requires; `length`, when given, must be the tensor's size. */
static tt_status read_external(const tt_graph *g, const char *dir, const Onnx__TensorProto *p,
                               const char *what, void *dst, size_t bytes, tt_errbuf *err)
{
    const char *name = p->name ? p->name : "", *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < p->n_external_data; i++) {
        const char *k = p->external_data[i]->key, *v = p->external_data[i]->value;
        if (!k || !v)
            continue;
        int64_t *num = !strcmp(k, "offset") ? &offset : !strcmp(k, "length") ? &length : NULL;
        if (!strcmp(k, "location"))
            loc = v;
        else if (num) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (!*v || *end || errno || x < 0)
                return tt_err(err, TT_ERR_PARSE, "%s: %s '%s' has external data %s '%s'", g->source,
                              what, name, k, v);
            *num = (int64_t)x;
        }
    }
    if (!loc || !*loc)
        return tt_err(err, TT_ERR_PARSE,
                      "%s: %s '%s' is stored outside the file but says not where (no location)",
                      g->source, what, name);
    if (!dir)
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: %s '%s' is stored outside the file (external data, '%s'): import the "
                      "model from its path, or save it with its weights inside",
                      g->source, what, name, loc);
    bool escapes = loc[0] == '/';
    for (const char *c = loc; !escapes && (c = strstr(c, "..")); c += 2)
        escapes = (c == loc || c[-1] == '/') && (c[2] == 0 || c[2] == '/');
    if (escapes)
        return tt_err(err, TT_ERR_PARSE,
                      "%s: %s '%s' names external data '%s' outside the model's directory",
                      g->source, what, name, loc);
    if (length >= 0 && (uint64_t)length != bytes)
        return tt_err(err, TT_ERR_PARSE,
                      "%s: %s '%s' has %lld bytes of external data for %zu bytes of tensor",
                      g->source, what, name, (long long)length, bytes);
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, loc) >= (int)sizeof(path))
        return tt_err(err, TT_ERR_LIMIT, "%s: %s '%s': external data path too long", g->source,
                      what, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tt_err(err, TT_ERR_IO, "%s: %s '%s': external data %s: %s", g->source, what, name,
                      path, strerror(errno));
    struct stat st;
    tt_status s = TT_OK;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
        s = tt_err(err, TT_ERR_IO, "%s: %s '%s': external data %s is not a regular file", g->source,
                   what, name, path);
    else if ((uint64_t)offset > (uint64_t)st.st_size ||
             (uint64_t)st.st_size - (uint64_t)offset < bytes)
        s = tt_err(err, TT_ERR_PARSE,
                   "%s: %s '%s': external data %s holds %lld bytes, too few for %zu from offset "
                   "%lld",
                   g->source, what, name, path, (long long)st.st_size, bytes, (long long)offset);
    else if (fseeko(f, (off_t)offset, SEEK_SET) || fread(dst, 1, bytes, f) != bytes)
        s = tt_err(err, TT_ERR_IO, "%s: %s '%s': reading external data %s: %s", g->source, what,
                   name, path, strerror(errno));
    fclose(f);
    return s;
}

/* Fills t (dtype, shape, data in g's arena) from a TensorProto; `what` names it in messages.
 * External data is read from the directory `dir` (NULL: refused). */
static tt_status tensor_from_proto(tt_graph *g, const Onnx__TensorProto *p, tt_gtensor *t,
                                   const char *what, const char *dir, tt_errbuf *err)
{
    int dt = dtype_of_onnx(p->has_data_type ? p->data_type : 0);
    if (dt < 0)
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: %s '%s' has element type %s (supported: float, "
                      "double, int32, int64, bool)",
                      g->source, what, p->name ? p->name : "",
                      onnx_dtype_name(p->has_data_type ? p->data_type : 0));
    bool external =
        p->n_external_data ||
        (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
    if (p->n_dims > TT_GRAPH_MAX_RANK)
        return tt_err(err, TT_ERR_UNSUPPORTED, "%s: %s '%s' has rank %zu (at most %d)", g->source,
                      what, p->name ? p->name : "", p->n_dims, TT_GRAPH_MAX_RANK);
    t->dtype = (tt_dtype)dt;
    t->rank = (int)p->n_dims;
    int64_t numel = 1;
    for (size_t i = 0; i < p->n_dims; i++) {
        if (p->dims[i] < 0 || p->dims[i] > ((int64_t)1 << 40) ||
            (p->dims[i] && numel > ((int64_t)1 << 40) / p->dims[i]))
            return tt_err(err, TT_ERR_PARSE, "%s: %s '%s' has an impossible dimension %lld",
                          g->source, what, p->name ? p->name : "", (long long)p->dims[i]);
        t->dims[i] = p->dims[i];
        numel *= p->dims[i];
    }
    size_t esz = (size_t)tt_dtype_bytes(t->dtype), bytes = (size_t)numel * esz;
    t->data = tt_arena_alloc(&g->arena, bytes ? bytes : 1);
    if (!t->data)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    size_t have = 0;
    const void *src = NULL;
    if (external)
        return read_external(g, dir, p, what, t->data, bytes, err);
    if (p->has_raw_data) {
        if (p->raw_data.len != bytes)
            return tt_err(err, TT_ERR_PARSE,
                          "%s: %s '%s' holds %zu bytes of raw data for %lld elements of %s",
                          g->source, what, p->name ? p->name : "", p->raw_data.len,
                          (long long)numel, tt_dtype_name(t->dtype));
        if (bytes)
            memcpy(t->data, p->raw_data.data, bytes);
        return TT_OK;
    }
    switch (t->dtype) {
    case TT_DT_FLOAT32: have = p->n_float_data, src = p->float_data; break;
    case TT_DT_FLOAT64: have = p->n_double_data, src = p->double_data; break;
    case TT_DT_INT64: have = p->n_int64_data, src = p->int64_data; break;
    default: /* int32 and bool travel as int32_data */ have = p->n_int32_data; break;
    }
    if (have != (size_t)numel)
        return tt_err(err, TT_ERR_PARSE, "%s: %s '%s' holds %zu values for %lld elements",
                      g->source, what, p->name ? p->name : "", have, (long long)numel);
    if (!bytes)
        return TT_OK;
    if (src)
        memcpy(t->data, src, bytes);
    else if (t->dtype == TT_DT_INT32)
        memcpy(t->data, p->int32_data, bytes);
    else
        for (int64_t i = 0; i < numel; i++)
            ((uint8_t *)t->data)[i] = p->int32_data[i] != 0;
    return TT_OK;
}

/* ---- names to tensors ---- */

typedef struct {
    const char **keys;
    int *vals;
    size_t cap; /* power of two */
} name_map;

static size_t slot_of(const name_map *m, const char *k)
{
    size_t i = (size_t)tt_hash64_str(k) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], k))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_get(const name_map *m, const char *k)
{
    size_t i = slot_of(m, k);
    return m->keys[i] ? m->vals[i] : -1;
}

static void map_put(name_map *m, const char *k, int v)
{
    size_t i = slot_of(m, k);
    m->keys[i] = k;
    m->vals[i] = v;
}

/* ---- the model ---- */

typedef struct {
    tt_graph *g;
    name_map names;
    const tt_graph_options *o;
    const char *dir; /* the model's directory, for external data (NULL: imported from bytes) */
} importer;

/* Defines tensor `name` (a new one) as *t; an error when it is defined twice. */
static tt_status define(importer *im, const char *name, tt_gtensor_kind kind, const char *by,
                        int *t, tt_errbuf *err)
{
    if (map_get(&im->names, name) >= 0)
        return tt_err(err, TT_ERR_PARSE, "%s: '%s' is defined twice (again by %s)", im->g->source,
                      name, by);
    *t = tt__graph_add_tensor(im->g, name, kind);
    if (*t < 0)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    map_put(&im->names, im->g->tensors.data[*t].name, *t);
    return TT_OK;
}

/* The override "name=1x3x224x224" for input `name`, parsed into dims; 0 when there is none, 1
 * when there is, -1 (err set) when it is malformed. */
static int shape_override(const importer *im, const char *name, int *rank, int64_t *dims,
                          tt_errbuf *err)
{
    size_t nl = strlen(name);
    for (int i = 0; i < (im->o ? im->o->nshapes : 0); i++) {
        const char *s = im->o->shapes[i];
        if (strncmp(s, name, nl) || s[nl] != '=')
            continue;
        const char *p = s + nl + 1;
        *rank = 0;
        while (*p) {
            char *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || v < 1 || v > ((int64_t)1 << 31) || errno ||
                *rank == TT_GRAPH_MAX_RANK || (*end && *end != 'x')) {
                tt_err(err, TT_ERR_INVALID_ARG,
                       "--shape '%s': want NAME=D1xD2x... with dimensions >= 1 (at most %d)", s,
                       TT_GRAPH_MAX_RANK);
                return -1;
            }
            dims[(*rank)++] = v;
            p = *end ? end + 1 : end;
        }
        return 1;
    }
    return 0;
}

static tt_status import_input(importer *im, const Onnx__ValueInfoProto *vi, tt_errbuf *err)
{
    tt_graph *g = im->g;
    const char *name = vi->name ? vi->name : "";
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return tt_err(err, TT_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", g->source, name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    int dt = dtype_of_onnx(tt->has_elem_type ? tt->elem_type : 0);
    if (dt < 0)
        return tt_err(err, TT_ERR_UNSUPPORTED, "%s: input '%s' has element type %s", g->source,
                      name, onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0));
    int t;
    tt_status s = define(im, name, TT_GT_INPUT, "a graph input", &t, err);
    if (s)
        return s;
    tt_gtensor *x = &g->tensors.data[t];
    x->dtype = (tt_dtype)dt;
    int rank;
    int64_t dims[TT_GRAPH_MAX_RANK];
    int ov = shape_override(im, name, &rank, dims, err);
    if (ov < 0)
        return TT_ERR_INVALID_ARG;
    if (!tt->shape && !ov)
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: input '%s' has no shape: give one with --shape %s=D1xD2x...", g->source,
                      name, name);
    if (tt->shape && tt->shape->n_dim > TT_GRAPH_MAX_RANK)
        return tt_err(err, TT_ERR_UNSUPPORTED, "%s: input '%s' has rank %zu (at most %d)",
                      g->source, name, tt->shape->n_dim, TT_GRAPH_MAX_RANK);
    if (ov) {
        if (tt->shape && (size_t)rank != tt->shape->n_dim)
            return tt_err(err, TT_ERR_INVALID_ARG,
                          "%s: --shape gives input '%s' rank %d, the model says %zu", g->source,
                          name, rank, tt->shape->n_dim);
        x->rank = rank;
        memcpy(x->dims, dims, sizeof(dims[0]) * (size_t)rank);
        return TT_OK;
    }
    x->rank = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            d->dim_value < 1)
            return tt_err(err, TT_ERR_UNSUPPORTED,
                          "%s: input '%s' has a dynamic dimension %zu ('%s'): give its shape with "
                          "--shape %s=D1xD2x...",
                          g->source, name, i,
                          d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                              ? d->dim_param
                              : "?",
                          name);
        x->dims[i] = d->dim_value;
    }
    return TT_OK;
}

static tt_status import_attr(importer *im, int node, const Onnx__AttributeProto *a, tt_gattr *out,
                             tt_errbuf *err)
{
    tt_graph *g = im->g;
    out->name = tt_arena_strdup(&g->arena, a->name ? a->name : "");
    out->tensor = -1;
    if (!out->name)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!strncmp(out->name, TT__GRAPH_OWN_ATTR, strlen(TT__GRAPH_OWN_ATTR)))
        return tt__graph_node_err(g, node, err, TT_ERR_PARSE,
                                  "has attribute '%s': names that begin '" TT__GRAPH_OWN_ATTR
                                  "' are tvm-tune's own, for the nodes it writes",
                                  out->name);
    switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        out->kind = TT_GATTR_INT, out->i = a->i;
        return TT_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        out->kind = TT_GATTR_FLOAT, out->f = a->f;
        return TT_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        out->kind = TT_GATTR_STRING;
        out->s = tt_arena_strndup(&g->arena, (const char *)a->s.data, a->s.len);
        return out->s ? TT_OK : tt_err(err, TT_ERR_NOMEM, "out of memory");
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        out->kind = TT_GATTR_INTS, out->n = a->n_ints;
        out->ints = tt__graph_copy(g, a->ints, a->n_ints * sizeof(int64_t));
        return out->ints ? TT_OK : tt_err(err, TT_ERR_NOMEM, "out of memory");
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        out->kind = TT_GATTR_FLOATS, out->n = a->n_floats;
        out->floats = tt__graph_copy(g, a->floats, a->n_floats * sizeof(float));
        return out->floats ? TT_OK : tt_err(err, TT_ERR_NOMEM, "out of memory");
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!a->t)
            return tt__graph_node_err(g, node, err, TT_ERR_PARSE, "attribute '%s' has no tensor",
                                      out->name);
        int t = tt__graph_add_tensor(g, a->t->name ? a->t->name : "", TT_GT_CONST);
        if (t < 0)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        tt_status s =
            tensor_from_proto(g, a->t, &g->tensors.data[t], "attribute tensor", im->dir, err);
        out->kind = TT_GATTR_TENSOR, out->tensor = t;
        return s;
    }
    default:
        return tt__graph_node_err(g, node, err, TT_ERR_UNSUPPORTED,
                                  "attribute '%s' is of a kind import does not take (type %d)",
                                  out->name, (int)a->type);
    }
}

/* Turns a Constant node into the constant tensor of its output. */
static tt_status fold_constant_node(tt_graph *g, int node, tt_errbuf *err)
{
    tt_gnode *n = &g->nodes.data[node];
    tt_gtensor *out = &g->tensors.data[n->outputs[0]];
    out->kind = TT_GT_CONST;
    out->producer = -1;
    n->removed = true;
    const tt_gattr *a = n->nattrs == 1 ? &n->attrs[0] : NULL;
    if (a && a->kind == TT_GATTR_TENSOR) {
        const tt_gtensor *v = &g->tensors.data[a->tensor];
        out->dtype = v->dtype, out->rank = v->rank, out->data = v->data;
        memcpy(out->dims, v->dims, sizeof(out->dims));
        return TT_OK;
    }
    if (a && (a->kind == TT_GATTR_INT || a->kind == TT_GATTR_FLOAT || a->kind == TT_GATTR_INTS ||
              a->kind == TT_GATTR_FLOATS)) {
        bool list = a->kind == TT_GATTR_INTS || a->kind == TT_GATTR_FLOATS;
        bool ints = a->kind == TT_GATTR_INT || a->kind == TT_GATTR_INTS;
        out->dtype = ints ? TT_DT_INT64 : TT_DT_FLOAT32;
        out->rank = list ? 1 : 0;
        out->dims[0] = list ? (int64_t)a->n : 1;
        size_t n_el = list ? a->n : 1, esz = ints ? 8 : 4;
        out->data = tt__graph_copy(g,
                                   ints ? (const void *)(list ? a->ints : &a->i)
                                        : (const void *)(list ? a->floats : &a->f),
                                   n_el * esz);
        return out->data ? TT_OK : tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return tt__graph_node_err(
        g, node, err, TT_ERR_UNSUPPORTED,
        "a Constant needs exactly one of value, value_int(s), value_float(s)");
}

static tt_status import_node(importer *im, const Onnx__NodeProto *np, int index, tt_errbuf *err)
{
    tt_graph *g = im->g;
    tt_gnode n;
    memset(&n, 0, sizeof(n));
    n.op = (tt_gop)tt_gop_parse(np->op_type ? np->op_type : "");
    n.name = tt_arena_strdup(&g->arena, np->name ? np->name : "");
    n.inputs = tt_arena_alloc(&g->arena, (np->n_input + 1) * sizeof(int));
    n.outputs = tt_arena_alloc(&g->arena, (np->n_output + 1) * sizeof(int));
    n.attrs = tt_arena_alloc(&g->arena, (np->n_attribute + 1) * sizeof(tt_gattr));
    if (!n.name || !n.inputs || !n.outputs || !n.attrs || TT_VEC_PUSH(&g->nodes, n))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    tt_gnode *nd = &g->nodes.data[index];
    for (size_t i = 0; i < np->n_input; i++) {
        const char *in = np->input[i];
        if (!in[0]) {
            nd->inputs[nd->ninputs++] = -1;
            continue;
        }
        int t = map_get(&im->names, in);
        if (t < 0)
            return tt__graph_node_err(g, index, err, TT_ERR_PARSE,
                                      "reads '%s', which no earlier node, input or initializer "
                                      "defines",
                                      in);
        nd->inputs[nd->ninputs++] = t;
    }
    for (size_t i = 0; i < np->n_attribute; i++) {
        tt_status s = import_attr(im, index, np->attribute[i], &nd->attrs[nd->nattrs], err);
        nd = &g->nodes.data[index];
        if (s)
            return s;
        nd->nattrs++;
    }
    char by[300];
    tt_gnode_describe(g, index, by, sizeof(by));
    for (size_t i = 0; i < np->n_output; i++) {
        const char *on = np->output[i];
        if (!on[0]) {
            nd->outputs[nd->noutputs++] = -1;
            continue;
        }
        int t;
        tt_status s = define(im, on, TT_GT_VALUE, by, &t, err);
        if (s)
            return s;
        g->tensors.data[t].producer = index;
        nd->outputs[nd->noutputs++] = t;
    }
    if (nd->op == TT_GOP_CONSTANT && nd->noutputs == 1 && nd->outputs[0] >= 0)
        return fold_constant_node(g, index, err);
    return TT_OK;
}

/* Lists every operator of the model that import does not know, by name, in one message. */
static tt_status check_operators(const tt_graph *g, const Onnx__GraphProto *gp, tt_errbuf *err)
{
    char list[768] = "";
    size_t used = 0;
    int unknown = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *op = np->op_type ? np->op_type : "";
        const char *dom = np->domain ? np->domain : "";
        bool known = (!dom[0] || !strcmp(dom, "ai.onnx")) && tt_gop_parse(op) >= 0;
        if (known)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const Onnx__NodeProto *q = gp->node[j];
            seen = !strcmp(q->op_type ? q->op_type : "", op) &&
                   !strcmp(q->domain ? q->domain : "", dom);
        }
        if (seen)
            continue;
        unknown++;
        if (used < sizeof(list) - 1)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s%s%s (node %zu%s%s%s)",
                                     unknown > 1 ? ", " : "", dom[0] ? dom : "", dom[0] ? "." : "",
                                     op, i, np->name && np->name[0] ? " '" : "",
                                     np->name ? np->name : "", np->name && np->name[0] ? "'" : "");
    }
    if (!unknown)
        return TT_OK;
    return tt_err(err, TT_ERR_UNSUPPORTED,
                  "%s: %d operator%s not supported: %s (supported: ai.onnx Conv, ConvTranspose, "
                  "Gemm, MatMul, elementwise, pooling, normalisation and shape operators; "
                  "docs/models.md)",
                  g->source, unknown, unknown > 1 ? "s are" : " is", list);
}

static tt_status import_model(importer *im, const Onnx__ModelProto *m, tt_errbuf *err)
{
    tt_graph *g = im->g;
    const Onnx__GraphProto *gp = m->graph;
    if (!gp || !m->has_ir_version)
        return tt_err(err, TT_ERR_PARSE, "%s: not an ONNX model (no %s); is this the right file?",
                      g->source, gp ? "IR version" : "graph");
    g->ir_version = m->ir_version;
    g->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = m->opset_import[i];
        if (!os->domain || !os->domain[0] || !strcmp(os->domain, "ai.onnx"))
            g->opset = os->has_version ? os->version : -1;
    }
    if (g->opset < TT_GRAPH_MIN_OPSET || g->opset > TT_GRAPH_MAX_OPSET)
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: opset %lld of ai.onnx is not supported (%d-%d); convert the model "
                      "with onnx.version_converter.convert_version(model, %d)",
                      g->source, (long long)g->opset, TT_GRAPH_MIN_OPSET, TT_GRAPH_MAX_OPSET,
                      g->opset < TT_GRAPH_MIN_OPSET ? TT_GRAPH_MIN_OPSET : TT_GRAPH_MAX_OPSET);
    if (m->producer_name) {
        g->producer =
            tt_arena_printf(&g->arena, "%s%s%s", m->producer_name, m->producer_version ? " " : "",
                            m->producer_version ? m->producer_version : "");
        if (!g->producer)
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    tt_status s = check_operators(g, gp, err);
    if (s)
        return s;
    size_t ntensors = gp->n_initializer + gp->n_input + 1;
    for (size_t i = 0; i < gp->n_node; i++)
        ntensors += gp->node[i]->n_output;
    for (im->names.cap = 16; im->names.cap < 2 * ntensors;)
        im->names.cap *= 2;
    im->names.keys = calloc(im->names.cap, sizeof(*im->names.keys));
    im->names.vals = calloc(im->names.cap, sizeof(*im->names.vals));
    if (!im->names.keys || !im->names.vals)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        int t;
        if ((s = define(im, tp->name ? tp->name : "", TT_GT_CONST, "an initializer", &t, err)))
            return s;
        if ((s = tensor_from_proto(g, tp, &g->tensors.data[t], "initializer", im->dir, err)))
            return s;
    }
    /* Inputs that are initializers are defaults an application may override; a deployment
     * keeps them constant, as TVM's importer does. */
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name ? gp->input[i]->name : "";
        if (map_get(&im->names, name) >= 0)
            continue;
        const tt_gtensor *bound = NULL;
        for (int k = 0; k < (im->o ? im->o->nbind : 0) && !bound; k++)
            if (!strcmp(im->o->bind[k].name, name))
                bound = &im->o->bind[k];
        if (bound) {
            int t;
            if ((s = define(im, name, TT_GT_CONST, "a bound input", &t, err)))
                return s;
            size_t bytes = (size_t)tt_gtensor_numel(bound) * (size_t)tt_dtype_bytes(bound->dtype);
            tt_gtensor *x = &g->tensors.data[t];
            x->dtype = bound->dtype, x->rank = bound->rank;
            memcpy(x->dims, bound->dims, sizeof(x->dims));
            if (!(x->data = tt__graph_copy(g, bound->data, bytes)))
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            continue;
        }
        if ((s = import_input(im, gp->input[i], err)))
            return s;
        if (TT_VEC_PUSH(&g->inputs, (int)g->tensors.len - 1))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < gp->n_node; i++)
        if ((s = import_node(im, gp->node[i], (int)i, err)))
            return s;
    if (!gp->n_output)
        return tt_err(err, TT_ERR_PARSE, "%s: the graph has no outputs", g->source);
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        int t = map_get(&im->names, name);
        if (t < 0)
            return tt_err(err, TT_ERR_PARSE, "%s: output '%s' is computed by no node", g->source,
                          name);
        g->tensors.data[t].output = true;
        if (TT_VEC_PUSH(&g->outputs, t))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return tt__graph_infer(g, err);
}

/* tt_graph_import_onnx_bytes, with external data read from `dir` (NULL: refused). */
static tt_status import_bytes(const uint8_t *data, size_t len, const char *source, const char *dir,
                              const tt_graph_options *o, tt_graph **out, tt_errbuf *err)
{
    *out = NULL;
    int64_t max = o && o->max_bytes > 0 ? o->max_bytes : (int64_t)2 << 30;
    if ((int64_t)len > max)
        return tt_err(err, TT_ERR_LIMIT, "%s: %zu bytes, over the limit of %lld", source, len,
                      (long long)max);
    budget b = {0, 16 * len + (1 << 20), false};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, len, data);
    if (!m)
        return b.over ? tt_err(err, TT_ERR_LIMIT,
                               "%s: parsing would take more than %zu bytes of memory: a corrupt "
                               "or hostile file",
                               source, b.cap)
                      : tt_err(err, TT_ERR_PARSE,
                               "%s: not an ONNX model, or truncated (%zu bytes do not parse as an "
                               "ONNX ModelProto)",
                               source, len);
    tt_graph *g = calloc(1, sizeof(*g));
    if (!g) {
        onnx__model_proto__free_unpacked(m, &alloc);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    tt_arena_init(&g->arena, 64 << 10);
    g->source = tt_arena_strdup(&g->arena, source);
    importer im = {g, {NULL, NULL, 0}, o, dir};
    tt_status s =
        g->source ? import_model(&im, m, err) : tt_err(err, TT_ERR_NOMEM, "out of memory");
    free(im.names.keys);
    free(im.names.vals);
    onnx__model_proto__free_unpacked(m, &alloc);
    if (s) {
        tt_graph_free(g);
        return s;
    }
    *out = g;
    return TT_OK;
}

tt_status tt_graph_import_onnx_bytes(const uint8_t *data, size_t len, const char *source,
                                     const tt_graph_options *o, tt_graph **out, tt_errbuf *err)
{
    return import_bytes(data, len, source, NULL, o, out, err);
}

/* The directory of `path` into buf ("." for a bare name). */
static const char *dir_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ".";
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= size)
        return NULL;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

/* Reads a whole file of at most `max` bytes into *buf (malloc'd). */
static tt_status read_file(const char *path, int64_t max, uint8_t **buf, size_t *len,
                           tt_errbuf *err)
{
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tt_err(err, TT_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        fclose(f);
        return tt_err(err, TT_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size > max) {
        fclose(f);
        return tt_err(err, TT_ERR_LIMIT, "%s: %lld bytes, over the limit of %lld", path,
                      (long long)st.st_size, (long long)max);
    }
    *len = (size_t)st.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        fclose(f);
        return tt_err(err, TT_ERR_NOMEM, "%s: out of memory for %zu bytes", path, *len);
    }
    size_t got = fread(*buf, 1, *len, f);
    fclose(f);
    if (got != *len) {
        free(*buf);
        *buf = NULL;
        return tt_err(err, TT_ERR_IO, "%s: read %zu of %zu bytes", path, got, *len);
    }
    return TT_OK;
}

tt_status tt_graph_import_onnx(const char *path, const tt_graph_options *o, tt_graph **out,
                               tt_errbuf *err)
{
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int64_t max = o && o->max_bytes > 0 ? o->max_bytes : (int64_t)2 << 30;
    tt_status s = read_file(path, max, &buf, &len, err);
    if (s)
        return s;
    char dir[4096];
    s = import_bytes(buf, len, path, dir_of(path, dir, sizeof(dir)), o, out, err);
    free(buf);
    return s;
}

tt_status tt_graph_read_tensor(const char *path, tt_gtensor *out, tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    uint8_t *buf;
    size_t len;
    tt_status s = read_file(path, (int64_t)2 << 30, &buf, &len, err);
    if (s)
        return s;
    budget b = {0, 16 * len + (1 << 20), false};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&alloc, len, buf);
    free(buf);
    if (!tp)
        return tt_err(err, TT_ERR_PARSE, "%s: not a serialized ONNX TensorProto", path);
    /* A throwaway graph lends its arena and its messages' source. */
    tt_graph g;
    memset(&g, 0, sizeof(g));
    tt_arena_init(&g.arena, 4096);
    g.source = (char *)path;
    char dir[4096];
    s = tensor_from_proto(&g, tp, out, "tensor", dir_of(path, dir, sizeof(dir)), err);
    if (!s) {
        size_t bytes = (size_t)tt_gtensor_numel(out) * (size_t)tt_dtype_bytes(out->dtype);
        void *data = malloc(bytes ? bytes : 1);
        out->name = strdup(tp->name ? tp->name : "");
        if (!data || !out->name) {
            free(data);
            free(out->name);
            out->name = NULL;
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        } else {
            memcpy(data, out->data, bytes);
            out->data = data;
            out->kind = TT_GT_CONST;
            out->producer = -1;
        }
    }
    if (s)
        out->data = NULL;
    tt_arena_free(&g.arena);
    onnx__tensor_proto__free_unpacked(tp, &alloc);
    return s;
}
