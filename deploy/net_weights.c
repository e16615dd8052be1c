/* A network's weights in one blob, packed for the kernels that read them packed (compile_int.h). */
#include <stdlib.h>
#include <string.h>

#include "../graph/net.h"
#include "compile_int.h"

enum { ALIGN = 64 };

tt_status tt__program_layouts(const tt_program *prog, tt_layout **out, tt_errbuf *err)
{
    *out = NULL;
    for (int i = 0; i < prog->nparams; i++) {
        const tt_buffer *b = tt_program_param(prog, i);
        if (!b || !b->layout.nparts)
            continue;
        if (!*out && !(*out = calloc((size_t)prog->nparams, sizeof(tt_layout))))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        (*out)[i] = b->layout;
    }
    return TT_OK;
}

/* One copy in the blob: a constant (its alias root) in a layout (NULL: row-major), packed with
 * the dims of the argument that first reads it so (an alias may have other dims). */
typedef struct {
    int tensor, arg;
    const tt_layout *layout;
    int64_t offset, bytes;
} entry;

static bool same_layout(const tt_layout *a, const tt_layout *b)
{
    if (!a || !b)
        return a == b;
    if (a->nparts != b->nparts || a->size != b->size)
        return false;
    for (int i = 0; i < a->nparts; i++)
        if (a->parts[i].dim != b->parts[i].dim || a->parts[i].inner != b->parts[i].inner ||
            a->parts[i].extent != b->parts[i].extent || a->parts[i].last != b->parts[i].last)
            return false;
    return true;
}

typedef TT_VEC(entry) entries;

/* The offset of constant t (an argument) in layout l (NULL: row-major), added if new. */
static tt_status place(entries *es, const tt_net *net, int t, const tt_layout *l,
                       tt__net_weights *out, int64_t *offset, tt_errbuf *err)
{
    int root = net->alias[t];
    size_t i = 0;
    while (i < es->len && !(es->data[i].tensor == root && same_layout(es->data[i].layout, l)))
        i++;
    if (i == es->len) {
        const tt_gtensor *x = &net->g->tensors.data[t];
        int64_t n = l ? l->size : tt_gtensor_numel(x);
        entry e = {root, t, l, out->bytes, n * tt_dtype_bytes(x->dtype)};
        if (TT_VEC_PUSH(es, e))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        out->bytes += (e.bytes + ALIGN - 1) / ALIGN * ALIGN;
        if (l)
            out->packed_bytes += e.bytes;
    }
    *offset = es->data[i].offset;
    return TT_OK;
}

void tt__net_weights_free(tt__net_weights *w)
{
    for (size_t c = 0; w->offset && c < w->ncalls; c++)
        free(w->offset[c]);
    free(w->offset);
    free(w->copy_offset);
    free(w->data);
    memset(w, 0, sizeof(*w));
}

tt_status tt__net_weights_build(const tt_net *net, tt_layout *const *task_layouts,
                                tt__net_weights *out, tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    const tt_graph *g = net->g;
    entries es = {0};
    tt_status s = TT_OK;
    out->ncalls = net->calls.len;
    if (!(out->offset = calloc(net->calls.len ? net->calls.len : 1, sizeof(int64_t *))))
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    /* Pass 1: which copies, where. */
    for (size_t c = 0; !s && c < net->calls.len; c++) {
        const tt_net_call *call = &net->calls.data[c];
        const tt_layout *lays = task_layouts ? task_layouts[call->task] : NULL;
        if (!(out->offset[c] = malloc(sizeof(int64_t) * (size_t)(call->nargs ? call->nargs : 1)))) {
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
            break;
        }
        for (int k = 0; k < call->nargs; k++) {
            int t = call->args[k];
            const tt_layout *l = lays && lays[k].nparts ? &lays[k] : NULL;
            out->offset[c][k] = -1;
            if (net->storage[t].place != TT_NET_CONST) {
                if (!l)
                    continue;
                s = tt_err(err, TT_ERR_INTERNAL, "'%s' is passed packed but is not a constant",
                           g->tensors.data[t].name);
                break;
            }
            if ((s = place(&es, net, t, l, out, &out->offset[c][k], err)))
                break;
        }
    }
    /* Graph outputs that are constants are copied from the blob too. */
    if (!s && !(out->copy_offset = malloc(sizeof(int64_t) * (net->copies.len + 1))))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t c = 0; !s && c < net->copies.len; c++) {
        int t = net->copies.data[c].from;
        out->copy_offset[c] = -1;
        if (net->storage[t].place == TT_NET_CONST &&
            (s = place(&es, net, t, NULL, out, &out->copy_offset[c], err)))
            break;
    }
    /* Pass 2: the values. */
    if (!s && !(out->data = aligned_alloc(ALIGN, (size_t)(out->bytes ? out->bytes : ALIGN))))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory (%lld bytes of weights)",
                   (long long)out->bytes);
    if (!s)
        memset(out->data, 0, (size_t)out->bytes);
    for (size_t i = 0; !s && i < es.len; i++) {
        const entry *e = &es.data[i];
        const tt_gtensor *x = &g->tensors.data[e->arg];
        const void *src = g->tensors.data[e->tensor].data;
        int64_t dims[TT_GRAPH_MAX_RANK];
        tt_gtensor_memory_dims(x, dims); /* as the kernel declares it */
        if (e->layout)
            tt_layout_pack(e->layout, x->rank, dims, (size_t)tt_dtype_bytes(x->dtype), src,
                           out->data + e->offset);
        else
            memcpy(out->data + e->offset, src, (size_t)e->bytes);
    }
    TT_VEC_FREE(&es);
    if (s)
        tt__net_weights_free(out);
    return s;
}
