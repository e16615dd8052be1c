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
    tt_compile_report rep;
} task_kernel;

struct tt_netexec {
    tt_net *net;
    task_kernel *tk;
    tt_layout **layouts; /* per task: the layouts its kernel reads (NULL: row-major) */
    tt__net_weights weights;
    void *arena;
    void **argv; /* scratch: one call's arguments */
};

static int64_t bytes_of(const tt_gtensor *t)
{
    return tt_gtensor_numel(t) * tt_dtype_bytes(t->dtype);
}

static tt_status build_task(tt_netexec *x, const tt__picker *pk, int ti, const char *dir,
                            tt_errbuf *err)
{
    task_kernel *tk = &x->tk[ti];
    tt__net_task_code code;
    double ts;
    tt_status s = tt__net_task_lower(pk, x->net, ti, &code, &x->layouts[ti], &tk->rep, &ts, err);
    char path[4200];
    snprintf(path, sizeof(path), "%s/task%d.o", dir, ti);
    if (!s) {
        tt_codegen_options co = {3, 64, 64, NULL, false};
#if defined(__x86_64__)
        co.object_only = !pk->target.triple[0];
#endif
        s = tt_codegen_llvm(code.prog, &pk->target, "kernel", path, &co, NULL, err);
    }
    if (!s)
        s = tt_kernel_load(path, "kernel", &tk->k, err);
    unlink(path);
    if (s)
        tt__net_task_error(x->net, ti, s, err);
    tt__net_task_free(&code);
    return s;
}

/* The address of tensor t's values, given the caller's buffers (constants: per call). */
static void *where(const tt_netexec *x, int t, const void *const *inputs, void *const *outputs)
{
    const tt_net_storage *st = &x->net->storage[t];
    switch (st->place) {
    case TT_NET_INPUT: return (void *)inputs[st->index];
    case TT_NET_OUTPUT: return outputs[st->index];
    case TT_NET_ARENA: return (char *)x->arena + st->offset;
    default: return NULL;
    }
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
    tt_status s = tt__picker_open(&pk, o ? o->db_path : NULL, o ? o->target : NULL, NULL,
                                  o && o->strict, false, o ? o->warnings : NULL, err);
    if (!s && strcmp(pk.target.kind, "llvm"))
        s = tt_err(err, TT_ERR_UNSUPPORTED, "networks run in process on llvm targets, not '%s'",
                   pk.target.kind);
    char dir[] = "/tmp/tvm-net-XXXXXX";
    if (!s && !mkdtemp(dir))
        s = tt_err(err, TT_ERR_IO, "cannot create a work directory: %s", strerror(errno));
    x->tk = calloc(net->tasks.len ? net->tasks.len : 1, sizeof(task_kernel));
    x->layouts = calloc(net->tasks.len ? net->tasks.len : 1, sizeof(tt_layout *));
    if (!s && (!x->tk || !x->layouts))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !s && i < net->tasks.len; i++)
        s = build_task(x, &pk, (int)i, dir, err);
    rmdir(dir);
    tt__picker_close(&pk);
    if (!s)
        s = tt__net_weights_build(net, x->layouts, &x->weights, err);
    if (!s && !(x->arena = aligned_alloc(64, (size_t)net->arena_bytes + 64)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory (%lld bytes of arena)",
                   (long long)net->arena_bytes);
    int max_args = 0;
    for (size_t c = 0; c < net->calls.len; c++)
        if (net->calls.data[c].nargs > max_args)
            max_args = net->calls.data[c].nargs;
    if (!s && !(x->argv = calloc((size_t)max_args + 1, sizeof(void *))))
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
            x->argv[k] = x->weights.offset[c][k] >= 0 ? x->weights.data + x->weights.offset[c][k]
                                                      : where(x, call->args[k], inputs, outputs);
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
        const void *from = x->weights.copy_offset[i] >= 0
                               ? x->weights.data + x->weights.copy_offset[i]
                               : where(x, cp->from, inputs, outputs);
        memmove(outputs[cp->output], from, (size_t)bytes_of(o));
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
    for (size_t i = 0; i < x->net->tasks.len; i++) {
        if (x->tk)
            tt_kernel_unload(x->tk[i].k);
        if (x->layouts)
            free(x->layouts[i]);
    }
    tt__net_weights_free(&x->weights);
    free(x->tk);
    free(x->layouts);
    free(x->arena);
    free(x->argv);
    free(x);
}
