/* Partitioning a graph into kernels (fused subgraphs) and tasks; the memory plan is plan.c's. */
#include "net.h"

#include <stdlib.h>
#include <string.h>

#include "../schedule/workload.h"
#include "net_int.h"

enum { MAX_FUSED_DEFAULT = 16, MAX_GROUP = 64 };

/* How an operator fuses (TVM's op patterns, simplified): the PATTERN column of the operator
 * table (graph.h). */
typedef enum {
    K_NONE,      /* folded away at import (Shape, Constant) */
    K_ALIAS,     /* no data moves: the output is the input's memory */
    K_ELEM,      /* elementwise: joins the subgraph computing its input */
    K_ANCHOR,    /* Conv, Gemm, MatMul: starts a subgraph that elementwise ops join */
    K_REDUCE,    /* pools, reductions: joins an elementwise-only subgraph, then as an anchor */
    K_INJECTIVE, /* data movement: its own kernel, elementwise ops may follow */
    K_SPLIT,     /* one kernel per output */
} kind;

static const kind patterns[TT_GOP_COUNT] = {
#define TT_GOP_PATTERN(e, name, pattern, ...) [TT_GOP_##e] = K_##pattern,
    TT_GOP_LIST(TT_GOP_PATTERN)
#undef TT_GOP_PATTERN
};

static kind kind_of(tt_gop op)
{
    return (unsigned)op < TT_GOP_COUNT ? patterns[op] : K_NONE;
}

/* A node's kind: a node the layout pass made a view (a Transpose, a whole Pad or Slice) is an
 * alias. */
static kind node_kind(const tt_gnode *n)
{
    return n->view ? K_ALIAS : kind_of(n->op);
}

bool tt__net_moves_no_data(tt_gop op)
{
    return kind_of(op) == K_ALIAS;
}

bool tt__net_is_elementwise(tt_gop op)
{
    return kind_of(op) == K_ELEM;
}

typedef struct {
    int nodes[MAX_GROUP];
    int n;
    int out;
    bool elementwise_only;
} group;

typedef struct {
    tt_net *net;
    tt_graph *g;
    int *uses;     /* per tensor: readers among live nodes, plus one per graph output naming it */
    bool *aliased; /* per tensor: an alias node reads it */
    int *tail;     /* per tensor: the group whose last output it is, or -1 */
    TT_VEC(group) groups;
    int max_fused;
    tt_errbuf *err;
} builder;

static bool same_shape(const tt_gtensor *a, const tt_gtensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

static bool is_output(const tt_graph *g, int t)
{
    for (size_t i = 0; i < g->outputs.len; i++)
        if (g->outputs.data[i] == t)
            return true;
    return false;
}

/* The one live reader of tensor t after node `after` (-1: none, or more than one). */
static int only_reader(const builder *b, int t, int after)
{
    int found = -1;
    for (size_t i = (size_t)after + 1; i < b->g->nodes.len; i++) {
        const tt_gnode *n = &b->g->nodes.data[i];
        for (int j = 0; !n->removed && j < n->ninputs; j++)
            if (n->inputs[j] == t) {
                if (found >= 0 && found != (int)i)
                    return -1;
                found = (int)i;
            }
    }
    return found;
}

/* A diamond of elementwise nodes: t is read by `node` and by others, and the chain of
 * single-reader elementwise nodes that starts at `node` reaches every other reader of t, so all
 * of them join t's group and t stays inside the kernel.  SiLU (x * sigmoid(x)), HardSwish
 * (x * hardsigmoid(x)) and GELU (x * 0.5 * (1 + erf(x / sqrt 2))) after a convolution or a
 * matmul: each was a kernel of its own, one more pass over the whole activation (EfficientNet's
 * SiLU kernels were a fifth of its time). */
static bool diamond_closes(const builder *b, int node, int t, int room)
{
    int others[8], nothers = 0;
    for (size_t i = 0; i < b->g->nodes.len; i++) {
        const tt_gnode *n = &b->g->nodes.data[i];
        for (int j = 0; !n->removed && (int)i != node && j < n->ninputs; j++)
            if (n->inputs[j] == t) {
                if ((int)i < node || nothers == 8 || kind_of(n->op) != K_ELEM)
                    return false;
                others[nothers++] = (int)i;
                break;
            }
    }
    if (b->uses[t] != nothers + 1)
        return false; /* a graph output, or a reader not seen here */
    int reached = 0;
    for (int cur = node, len = 1; len < room && reached < nothers; len++) {
        const tt_gnode *c = &b->g->nodes.data[cur];
        int o = c->outputs[0];
        if (o < 0 || b->uses[o] != 1 || b->aliased[o] || is_output(b->g, o))
            return false;
        int next = only_reader(b, o, cur);
        if (next < 0 || kind_of(b->g->nodes.data[next].op) != K_ELEM ||
            !same_shape(&b->g->tensors.data[b->g->nodes.data[next].outputs[0]],
                        &b->g->tensors.data[t]))
            return false;
        for (int k = 0; k < nothers; k++)
            reached += others[k] == next;
        cur = next;
    }
    return reached == nothers;
}

/* The group node `node` (of kind k) may join through its input t, or -1. */
static int joinable(const builder *b, int node, kind k, int j)
{
    const tt_gnode *n = &b->g->nodes.data[node];
    int t = n->inputs[j];
    if (t < 0 || b->tail[t] < 0)
        return -1;
    const group *G = &b->groups.data[b->tail[t]];
    if (b->aliased[t] || is_output(b->g, t) || G->n >= b->max_fused ||
        (b->uses[t] != 1 && (k != K_ELEM || !diamond_closes(b, node, t, b->max_fused - G->n))))
        return -1;
    /* a kernel that also writes another output of its last node (LayerNormalization's Mean)
     * runs where that output is needed: nothing may join and move it later */
    const tt_gnode *last = &b->g->nodes.data[G->nodes[G->n - 1]];
    for (int o = 0; o < last->noutputs; o++)
        if (last->outputs[o] >= 0 && last->outputs[o] != t && b->uses[last->outputs[o]] > 0)
            return -1;
    if (k == K_ELEM && !same_shape(&b->g->tensors.data[n->outputs[0]], &b->g->tensors.data[t]))
        return -1;
    if (k == K_REDUCE && (j != 0 || !G->elementwise_only))
        return -1;
    return b->tail[t];
}

static tt_status new_group(builder *b, int node, int out, kind k)
{
    group G;
    memset(&G, 0, sizeof(G));
    G.nodes[0] = node;
    G.n = 1;
    G.out = out;
    G.elementwise_only = k == K_ELEM;
    if (TT_VEC_PUSH(&b->groups, G))
        return tt_err(b->err, TT_ERR_NOMEM, "out of memory");
    b->tail[out] = (int)b->groups.len - 1;
    return TT_OK;
}

static tt_status partition(builder *b)
{
    tt_graph *g = b->g;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->removed)
            continue;
        kind k = node_kind(n);
        if (k == K_NONE || k == K_ALIAS)
            continue;
        tt_status s;
        if (k == K_SPLIT) {
            for (int o = 0; o < n->noutputs; o++)
                if (n->outputs[o] >= 0 && (s = new_group(b, (int)i, n->outputs[o], k)))
                    return s;
            continue;
        }
        int gi = -1;
        if (k == K_ELEM || k == K_REDUCE)
            for (int j = 0; j < n->ninputs && gi < 0; j++)
                gi = joinable(b, (int)i, k, j);
        if (gi < 0) {
            if ((s = new_group(b, (int)i, n->outputs[0], k)))
                return s;
            continue;
        }
        group *G = &b->groups.data[gi];
        b->tail[G->out] = -1;
        G->nodes[G->n++] = (int)i;
        G->out = n->outputs[0];
        G->elementwise_only = G->elementwise_only && k == K_ELEM;
        b->tail[G->out] = gi;
    }
    return TT_OK;
}

/* Memory that is another tensor's: alias[out] = the root of the input's. */
static tt_status find_aliases(builder *b)
{
    tt_graph *g = b->g;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        if (n->removed || node_kind(n) != K_ALIAS)
            continue;
        if (n->op == TT_GOP_DROPOUT && n->noutputs > 1 && n->outputs[1] >= 0 &&
            (b->uses[n->outputs[1]] > 0))
            return tt__graph_node_err(g, (int)i, b->err, TT_ERR_UNSUPPORTED,
                                      "Dropout's mask output is used; export the model for "
                                      "inference (model.eval())");
        if (n->op == TT_GOP_DROPOUT && n->ninputs > 2 && n->inputs[2] >= 0) {
            /* training mode with a ratio of 0 drops nothing (torchvision 0.14's Swin writes
             * its attention dropout so) */
            const tt_gtensor *tm = &g->tensors.data[n->inputs[2]];
            const tt_gtensor *ratio = n->inputs[1] >= 0 ? &g->tensors.data[n->inputs[1]] : NULL;
            bool drops = !ratio || ratio->kind != TT_GT_CONST || tt_gtensor_numel(ratio) != 1 ||
                         tt__gtensor_value(ratio, 0) != 0;
            if (tm->kind != TT_GT_CONST || (((const uint8_t *)tm->data)[0] && drops))
                return tt__graph_node_err(g, (int)i, b->err, TT_ERR_UNSUPPORTED,
                                          "Dropout in training mode; export the model for "
                                          "inference (model.eval())");
        }
        int x = n->inputs[0], y = n->outputs[0];
        b->net->alias[y] = b->net->alias[x];
        b->aliased[x] = true;
    }
    return TT_OK;
}

static tt_status add_call(builder *b, const group *G)
{
    tt_net *net = b->net;
    tt_graph *g = b->g;
    tt_strbuf text = {0};
    int ph[TT__NET_MAX_INPUTS], nph = 0;
    tt_strbuf_append(&text, "te:");
    tt_status s = tt__net_write_te(g, G->nodes, G->n, G->out, &text, ph, &nph, b->err);
    if (s) {
        tt_strbuf_free(&text);
        return s;
    }
    tt_workload *w = NULL;
    if ((s = tt_workload_parse(tt_strbuf_cstr(&text), &w, b->err))) {
        char where[200];
        tt_gnode_describe(g, G->nodes[0], where, sizeof(where));
        tt_err_prefix(b->err, s, "%s: %s: the kernel written for %s does not parse", g->source,
                      tt_strbuf_cstr(&text), where);
        tt_strbuf_free(&text);
        return s;
    }
    tt_strbuf_free(&text);
    /* the task: an existing one with the same key, or a new one */
    size_t ti = 0;
    while (ti < net->tasks.len && strcmp(net->tasks.data[ti].workload, w->key))
        ti++;
    if (ti == net->tasks.len) {
        tt_net_task t;
        memset(&t, 0, sizeof(t));
        tt_strbuf label = {0};
        for (int i = 0; i < G->n; i++)
            tt_strbuf_printf(&label, "%s%s", i ? "+" : "",
                             tt_gop_name(g->nodes.data[G->nodes[i]].op));
        t.workload = strdup(w->key);
        t.label = tt_strbuf_take(&label);
        t.flops = w->flops;
        if (!t.workload || !t.label || TT_VEC_PUSH(&net->tasks, t)) {
            free(t.workload);
            free(t.label);
            tt_workload_free(w);
            return tt_err(b->err, TT_ERR_NOMEM, "out of memory");
        }
    }
    net->tasks.data[ti].weight++;
    net->flops += w->flops;
    /* the arguments, in the kernel's parameter order */
    int params[TT__NET_MAX_INPUTS + 2], nin;
    int np = tt_dag_params(&w->dag, params, TT__NET_MAX_INPUTS + 2, &nin);
    tt_net_call c;
    memset(&c, 0, sizeof(c));
    c.task = (int)ti;
    c.first_node = G->nodes[0];
    c.last_node = G->nodes[G->n - 1];
    c.nargs = np;
    c.args = calloc((size_t)np, sizeof(int));
    for (int k = 0; c.args && k < np; k++) {
        const char *name = w->dag.ops.data[params[k]].name;
        int idx = atoi(name + 1);
        if (!strcmp(name, "out"))
            c.args[k] = G->out;
        else if ((name[0] == 'x' || name[0] == 'w' || name[0] == 'y') && idx >= 0 && idx < nph)
            c.args[k] = ph[idx];
        else
            s = tt_err(b->err, TT_ERR_INTERNAL, "kernel parameter '%s' of %s is not a tensor", name,
                       w->key);
    }
    tt_workload_free(w);
    if (!s && (!c.args || TT_VEC_PUSH(&net->calls, c)))
        s = tt_err(b->err, TT_ERR_NOMEM, "out of memory");
    if (s)
        free(c.args);
    return s;
}

/* Groups run in the order of their last node: every tensor a group reads from outside is the
 * last output of a group whose nodes all come earlier. */
static int by_last_node(const void *a, const void *b)
{
    const group *x = a, *y = b;
    int lx = x->nodes[x->n - 1], ly = y->nodes[y->n - 1];
    return lx != ly ? (lx > ly) - (lx < ly) : (x->out > y->out) - (x->out < y->out);
}

tt_status tt_net_build(tt_graph *g, const tt_net_options *o, tt_net **out, tt_errbuf *err)
{
    *out = NULL;
    tt_net *net = calloc(1, sizeof(*net));
    if (!net)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    net->g = g;
    builder b;
    memset(&b, 0, sizeof(b));
    b.net = net;
    b.g = g;
    b.err = err;
    b.max_fused = o && o->max_fused > 0 ? o->max_fused : MAX_FUSED_DEFAULT;
    if (b.max_fused > MAX_GROUP)
        b.max_fused = MAX_GROUP;
    tt_status s = tt__net_fold_batchnorm(g, &net->folded_batchnorms, err);
    if (!s)
        s = tt__net_fold_pads(g, &net->folded_pads, err);
    if (!s)
        s = tt__net_fuse_layer_norms(g, &net->fused_layer_norms, err);
    if (!s)
        s = tt__net_scale_weights(g, &net->scaled_weights, err);
    if (!s && !(o && o->no_winograd))
        s = tt__net_winograd(g, o ? o->vector_lanes : 0, &net->winograd_convs, err);
    if (!s)
        s = tt__net_split_padded_convs(g, &net->region_convs, err);
    net->layout = o ? o->layout : TT_NET_LAYOUT_CHANNELS_LAST;
    if (!s)
        s = tt__net_choose_layouts(g, net->layout, &net->channels_last, &net->views, err);
    size_t nt = g->tensors.len;
    /* room for the constants lowering adds (two per BatchNormalization at most) */
    size_t cap = nt + 2 * g->nodes.len + 16;
    if (!s) {
        b.uses = calloc(cap, sizeof(int));
        b.aliased = calloc(cap, sizeof(bool));
        b.tail = malloc(cap * sizeof(int));
        net->alias = malloc(cap * sizeof(int));
        if (!b.uses || !b.aliased || !b.tail || !net->alias)
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    for (size_t t = 0; !s && t < cap; t++)
        b.tail[t] = -1, net->alias[t] = (int)t;
    for (size_t i = 0; !s && i < g->nodes.len; i++) {
        const tt_gnode *n = &g->nodes.data[i];
        for (int k = 0; !n->removed && k < n->ninputs; k++)
            if (n->inputs[k] >= 0)
                b.uses[n->inputs[k]]++;
    }
    for (size_t i = 0; !s && i < g->outputs.len; i++)
        b.uses[g->outputs.data[i]]++;
    if (!s)
        s = find_aliases(&b);
    if (!s)
        s = partition(&b);
    if (!s && b.groups.len > 1)
        qsort(b.groups.data, b.groups.len, sizeof(group), by_last_node);
    for (size_t i = 0; !s && i < b.groups.len; i++)
        s = add_call(&b, &b.groups.data[i]);
    if (!s && g->tensors.len > cap)
        s = tt_err(err, TT_ERR_INTERNAL, "lowering added more constants than planned");
    if (!s)
        s = tt__net_plan(net, err);
    free(b.uses);
    free(b.aliased);
    free(b.tail);
    TT_VEC_FREE(&b.groups);
    if (s) {
        tt_net_free(net);
        return s;
    }
    *out = net;
    return TT_OK;
}

static const char *const LAYOUT_NAMES[] = {
    [TT_NET_LAYOUT_CHANNELS_LAST] = "channels-last",
    [TT_NET_LAYOUT_MODEL] = "model",
};

bool tt_net_winograd_default(const char *target)
{
    while (*target == ' ')
        target++;
    return strncmp(target, "opencl", 6) != 0;
}

void tt_net_options_for(tt_net_options *o, const char *target, int target_lanes,
                        tt_net_layout layout, int winograd)
{
    memset(o, 0, sizeof(*o));
    o->layout = layout;
    o->no_winograd = winograd < 0 ? !tt_net_winograd_default(target) : !winograd;
    o->vector_lanes = winograd < 0 ? target_lanes : 0;
}

const char *tt_net_layout_name(tt_net_layout l)
{
    return (unsigned)l < sizeof(LAYOUT_NAMES) / sizeof(LAYOUT_NAMES[0]) ? LAYOUT_NAMES[l] : "?";
}

int tt_net_layout_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(LAYOUT_NAMES) / sizeof(LAYOUT_NAMES[0]); i++)
        if (!strcmp(name, LAYOUT_NAMES[i]))
            return (int)i;
    return !strcmp(name, "nhwc")   ? TT_NET_LAYOUT_CHANNELS_LAST
           : !strcmp(name, "nchw") ? TT_NET_LAYOUT_MODEL
                                   : -1;
}

void tt_net_free(tt_net *net)
{
    if (!net)
        return;
    for (size_t i = 0; i < net->tasks.len; i++) {
        free(net->tasks.data[i].workload);
        free(net->tasks.data[i].label);
    }
    for (size_t i = 0; i < net->calls.len; i++)
        free(net->calls.data[i].args);
    TT_VEC_FREE(&net->tasks);
    TT_VEC_FREE(&net->calls);
    TT_VEC_FREE(&net->copies);
    free(net->alias);
    free(net->storage);
    free(net);
}
