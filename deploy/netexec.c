/* A network run in this process (netexec.h). */
#define _GNU_SOURCE
#include "netexec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../db/db.h"
#include "compile_int.h"

typedef struct {
    tt_kernel *k;
    tt_layout *layouts; /* per parameter (nparts 0: row-major) */
    int nparams;
    tt_compile_report rep;
} task_kernel;

typedef struct {
    void **packed; /* per argument: the packed copy of a constant, or NULL */
} call_state;

struct tt_netexec {
    tt_net *net;
    task_kernel *tk;
    call_state *cs;
    void *arena, *weights;
    void **argv; /* scratch: one call's arguments */
    int max_args;
};

static int64_t bytes_of(const tt_gtensor *t)
{
    return tt_gtensor_numel(t) * tt_dtype_bytes(t->dtype);
}

static tt_status build_task(tt_netexec *x, const tt__picker *pk, int ti, const char *dir,
                            tt_errbuf *err)
{
    const tt_net_task *task = &x->net->tasks.data[ti];
    task_kernel *tk = &x->tk[ti];
    tt_workload *w = NULL;
    tt_state *st = NULL;
    tt_program *prog = NULL;
    double ts;
    tt_status s = tt_workload_parse(task->workload, &w, err);
    if (!s)
        s = tt__compile_pick(pk, w, &st, &tk->rep, &ts, err);
    if (!s)
        s = tt_lower(st, &prog, err);
    char path[4200];
    snprintf(path, sizeof(path), "%s/task%d.o", dir, ti);
    if (!s) {
        tt_codegen_options co = {3, 64, 64, NULL, false};
#if defined(__x86_64__)
        co.object_only = !pk->target.triple[0];
#endif
        s = tt_codegen_llvm(prog, &pk->target, "kernel", path, &co, NULL, err);
    }
    if (!s)
        s = tt_kernel_load(path, "kernel", &tk->k, err);
    unlink(path);
    if (!s) {
        tk->nparams = prog->nparams;
        tk->layouts = calloc((size_t)prog->nparams, sizeof(tt_layout));
        if (!tk->layouts)
            s = tt_err(err, TT_ERR_NOMEM, "out of memory");
        for (int i = 0; !s && i < prog->nparams; i++) {
            const tt_buffer *b = tt_program_param(prog, i);
            if (b)
                tk->layouts[i] = b->layout;
        }
    }
    if (s) {
        char where[200] = "";
        for (size_t c = 0; c < x->net->calls.len && !where[0]; c++)
            if (x->net->calls.data[c].task == ti)
                tt_gnode_describe(x->net->g, x->net->calls.data[c].first_node, where,
                                  sizeof(where));
        tt_err_prefix(err, s, "task %d (%s, from %s)", ti, task->label, where);
    }
    tt_program_free(prog);
    tt_state_free(st);
    tt_workload_free(w);
    return s;
}

/* The address of tensor t's values, given the caller's buffers. */
static void *where(const tt_netexec *x, int t, const void *const *inputs, void *const *outputs)
{
    const tt_net_storage *st = &x->net->storage[t];
    switch (st->place) {
    case TT_NET_INPUT: return (void *)inputs[st->index];
    case TT_NET_OUTPUT: return outputs[st->index];
    case TT_NET_CONST: return (char *)x->weights + st->offset;
    case TT_NET_ARENA: return (char *)x->arena + st->offset;
    default: return NULL;
    }
}

/* Constants passed packed get their packed copy once, per call (a weight is one call's). */
static tt_status pack_weights(tt_netexec *x, tt_errbuf *err)
{
    tt_net *net = x->net;
    for (size_t c = 0; c < net->calls.len; c++) {
        const tt_net_call *call = &net->calls.data[c];
        const task_kernel *tk = &x->tk[call->task];
        if (call->nargs > x->max_args)
            x->max_args = call->nargs;
        if (!(x->cs[c].packed = calloc((size_t)call->nargs, sizeof(void *))))
            return tt_err(err, TT_ERR_NOMEM, "out of memory");
        for (int k = 0; k < call->nargs && k < tk->nparams; k++) {
            const tt_layout *l = &tk->layouts[k];
            if (!l->nparts)
                continue;
            const tt_gtensor *t = &net->g->tensors.data[call->args[k]];
            if (t->kind != TT_GT_CONST)
                return tt_err(err, TT_ERR_INTERNAL, "'%s' is passed packed but is not a constant",
                              t->name);
            size_t eb = (size_t)tt_dtype_bytes(t->dtype);
            void *p = aligned_alloc(64, ((size_t)l->size * eb + 63) / 64 * 64);
            if (!p)
                return tt_err(err, TT_ERR_NOMEM, "out of memory");
            tt_layout_pack(l, t->rank, t->dims, eb, t->data, p);
            x->cs[c].packed[k] = p;
        }
    }
    return TT_OK;
}

tt_status tt_netexec_create(tt_net *net, const tt_netexec_options *o, tt_netexec **out,
                            tt_errbuf *err)
{
    *out = NULL;
    tt_netexec *x = calloc(1, sizeof(*x));
    if (!x)
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    x->net = net;
    tt__picker pk;
    memset(&pk, 0, sizeof(pk));
    pk.db_path = o ? o->db_path : NULL;
    pk.target_text = o && o->target && o->target[0] ? o->target : "llvm";
    pk.strict = o && o->strict;
    pk.warnings = o ? o->warnings : NULL;
    tt_status s = tt_target_parse(pk.target_text, &pk.target, err);
    if (!s && strcmp(pk.target.kind, "llvm"))
        s = tt_err(err, TT_ERR_UNSUPPORTED, "networks run in process on llvm targets, not '%s'",
                   pk.target.kind);
    if (!s && pk.db_path)
        s = tt_db_open(pk.db_path, TT_DB_READONLY, &pk.db, err);
    char dir[] = "/tmp/tvm-net-XXXXXX";
    if (!s && !mkdtemp(dir))
        s = tt_err(err, TT_ERR_IO, "cannot create a work directory: %s", strerror(errno));
    x->tk = calloc(net->tasks.len ? net->tasks.len : 1, sizeof(task_kernel));
    x->cs = calloc(net->calls.len ? net->calls.len : 1, sizeof(call_state));
    if (!s && (!x->tk || !x->cs))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !s && i < net->tasks.len; i++)
        s = build_task(x, &pk, (int)i, dir, err);
    rmdir(dir);
    if (pk.db)
        tt_db_close(pk.db);
    /* weights into one blob at the plan's offsets; the arena */
    if (!s) {
        x->weights = aligned_alloc(64, (size_t)net->weight_bytes + 64);
        x->arena = aligned_alloc(64, (size_t)net->arena_bytes + 64);
        if (!x->weights || !x->arena)
            s = tt_err(err, TT_ERR_NOMEM, "out of memory (%lld bytes of weights, %lld of arena)",
                       (long long)net->weight_bytes, (long long)net->arena_bytes);
    }
    for (size_t t = 0; !s && t < net->g->tensors.len; t++) {
        const tt_gtensor *g = &net->g->tensors.data[t];
        if (net->alias[t] == (int)t && net->storage[t].place == TT_NET_CONST)
            memcpy((char *)x->weights + net->storage[t].offset, g->data, (size_t)bytes_of(g));
    }
    if (!s)
        s = pack_weights(x, err);
    if (!s && !(x->argv = calloc((size_t)x->max_args + 1, sizeof(void *))))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (s) {
        tt_netexec_free(x);
        return s;
    }
    *out = x;
    return TT_OK;
}

tt_status tt_netexec_run(tt_netexec *x, const void *const *inputs, void *const *outputs,
                         tt_errbuf *err)
{
    tt_net *net = x->net;
    for (size_t c = 0; c < net->calls.len; c++) {
        const tt_net_call *call = &net->calls.data[c];
        for (int k = 0; k < call->nargs; k++)
            x->argv[k] =
                x->cs[c].packed[k] ? x->cs[c].packed[k] : where(x, call->args[k], inputs, outputs);
        int32_t rc = tt_kernel_function(x->tk[call->task].k)(x->argv);
        if (rc) {
            char at[200];
            tt_gnode_describe(net->g, call->first_node, at, sizeof(at));
            return tt_err(err, TT_ERR_RUNTIME, "the kernel of %s returned %d", at, (int)rc);
        }
    }
    for (size_t i = 0; i < net->copies.len; i++) {
        const tt_net_copy *cp = &net->copies.data[i];
        const tt_gtensor *o = &net->g->tensors.data[net->g->outputs.data[cp->output]];
        memmove(outputs[cp->output], where(x, cp->from, inputs, outputs), (size_t)bytes_of(o));
    }
    return TT_OK;
}

const tt_compile_report *tt_netexec_report(const tt_netexec *x, int task)
{
    return &x->tk[task].rep;
}

void tt_netexec_free(tt_netexec *x)
{
    if (!x)
        return;
    for (size_t i = 0; x->tk && i < x->net->tasks.len; i++) {
        tt_kernel_unload(x->tk[i].k);
        free(x->tk[i].layouts);
    }
    for (size_t c = 0; x->cs && c < x->net->calls.len; c++) {
        for (int k = 0; x->cs[c].packed && k < x->net->calls.data[c].nargs; k++)
            free(x->cs[c].packed[k]);
        free(x->cs[c].packed);
    }
    free(x->tk);
    free(x->cs);
    free(x->arena);
    free(x->weights);
    free(x->argv);
    free(x);
}
