/* The memory plan of a network: where each tensor lives while it runs.  Inputs and outputs are
 * the caller's buffers (an output computed under a Reshape is computed straight into the caller's
 * buffer), constants sit in one weight blob, and intermediates share one arena: each gets an
 * offset that no tensor alive at the same time overlaps, placed largest first (the greedy-by-size
 * plan TFLite and TVM's graph executor use). */
#include <stdlib.h>
#include <string.h>

#include "net_int.h"

enum { ALIGN = 64 };

static int64_t aligned(int64_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

static int64_t bytes_of(const tt_gtensor *t)
{
    return tt_gtensor_numel(t) * tt_dtype_bytes(t->dtype);
}

typedef struct {
    int tensor;
    int first, last; /* calls */
    int64_t size;
} live;

static int by_size(const void *a, const void *b)
{
    const live *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

tt_status tt__net_plan(tt_net *net, tt_errbuf *err)
{
    tt_graph *g = net->g;
    size_t nt = g->tensors.len;
    net->storage = calloc(nt, sizeof(tt_net_storage));
    int *first = malloc(nt * sizeof(int)), *last = malloc(nt * sizeof(int));
    live *lv = calloc(nt, sizeof(live));
    if (!net->storage || !first || !last || !lv) {
        free(first), free(last), free(lv);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (size_t t = 0; t < nt; t++)
        first[t] = last[t] = -1;
    /* lifetimes of the roots, in calls; the output argument is the last */
    for (size_t c = 0; c < net->calls.len; c++) {
        const tt_net_call *call = &net->calls.data[c];
        for (int k = 0; k < call->nargs; k++) {
            int r = net->alias[call->args[k]];
            if (first[r] < 0)
                first[r] = (int)c;
            last[r] = (int)c;
        }
    }
    /* inputs, constants, outputs */
    for (size_t i = 0; i < g->inputs.len; i++) {
        int r = net->alias[g->inputs.data[i]];
        net->storage[r].place = TT_NET_INPUT;
        net->storage[r].index = (int)i;
    }
    for (size_t i = 0; i < g->outputs.len; i++) {
        int r = net->alias[g->outputs.data[i]];
        tt_net_storage *st = &net->storage[r];
        if (g->tensors.data[r].kind == TT_GT_VALUE && st->place == TT_NET_NONE) {
            st->place = TT_NET_OUTPUT;
            st->index = (int)i;
        }
    }
    for (size_t i = 0; i < g->outputs.len; i++) {
        int r = net->alias[g->outputs.data[i]];
        if (net->storage[r].place == TT_NET_OUTPUT && net->storage[r].index == (int)i)
            continue;
        tt_net_copy cp = {(int)i, r};
        if (first[r] < 0 && g->tensors.data[r].kind == TT_GT_CONST)
            first[r] = last[r] = 0; /* a constant output: its values must be in the blob */
        if (TT_VEC_PUSH(&net->copies, cp)) {
            free(first), free(last), free(lv);
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        }
    }
    int nlive = 0;
    for (size_t t = 0; t < nt; t++) {
        if (first[t] < 0 || net->alias[t] != (int)t)
            continue;
        const tt_gtensor *x = &g->tensors.data[t];
        tt_net_storage *st = &net->storage[t];
        if (x->kind == TT_GT_CONST) {
            st->place = TT_NET_CONST;
            st->offset = net->weight_bytes;
            net->weight_bytes += aligned(bytes_of(x));
        } else if (x->kind == TT_GT_VALUE && st->place == TT_NET_NONE) {
            st->place = TT_NET_ARENA;
            lv[nlive++] = (live){(int)t, first[t], last[t], aligned(bytes_of(x))};
            net->unplanned_bytes += aligned(bytes_of(x));
        }
    }
    /* largest first, each at the lowest offset clear of every placed tensor it lives with */
    qsort(lv, (size_t)nlive, sizeof(live), by_size);
    for (int i = 0; i < nlive; i++) {
        int64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < i; j++) {
                if (lv[j].last < lv[i].first || lv[i].last < lv[j].first)
                    continue;
                int64_t o = net->storage[lv[j].tensor].offset;
                if (off < o + lv[j].size && o < off + lv[i].size) {
                    off = o + lv[j].size;
                    moved = true;
                }
            }
        }
        net->storage[lv[i].tensor].offset = off;
        if (off + lv[i].size > net->arena_bytes)
            net->arena_bytes = off + lv[i].size;
    }
    /* aliases share their root's place */
    for (size_t t = 0; t < nt; t++)
        if (net->alias[t] != (int)t)
            net->storage[t] = net->storage[net->alias[t]];
    free(first), free(last), free(lv);
    return TT_OK;
}
