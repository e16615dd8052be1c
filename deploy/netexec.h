/* A network run in this process: every task of a tt_net compiled for this machine (its best
 * record in a database, or the default schedule), weights packed once into the layouts the
 * kernels chose, one arena for the intermediates.  What tests check networks with and what
 * bench_model times; tvm-compile --model writes the same plan into a library.
 *
 *     tt_netexec *x;
 *     tt_netexec_options o = {.db_path = "tuning.db"};
 *     if (tt_netexec_create(net, &o, &x, &err)) ...
 *     tt_netexec_run(x, inputs, outputs, &err);   // buffers in g->inputs / g->outputs order
 *     tt_netexec_free(x);
 *
 * Not thread-safe: one run at a time (the arena is shared). */
#ifndef TT_DEPLOY_NETEXEC_H
#define TT_DEPLOY_NETEXEC_H

#include <stdio.h>

#include "../graph/net.h"
#include "compile.h"

typedef struct tt_netexec tt_netexec;

typedef struct tt_netexec_options {
    const char *db_path; /* NULL: default schedules for every task */
    const char *target;  /* NULL: "llvm" (this machine) */
    bool strict;         /* a task without a record is an error */
    FILE *warnings;      /* tasks on default schedules, fallbacks; NULL: quiet */
} tt_netexec_options;

/* Compiles and loads every task.  Errors name the task (its workload and the node it starts
 * at): a schedule that does not lower, a missing record under strict, the compiler's failures. */
tt_status tt_netexec_create(tt_net *net, const tt_netexec_options *o, tt_netexec **out,
                            tt_errbuf *err);

/* Runs the network: inputs[i] is graph input i, outputs[i] graph output i, each a dense
 * row-major array of its tensor's dtype and shape. */
tt_status tt_netexec_run(tt_netexec *x, const void *const *inputs, void *const *outputs,
                         tt_errbuf *err);

/* Where task i's schedule came from. */
const tt_compile_report *tt_netexec_report(const tt_netexec *x, int task);

void tt_netexec_free(tt_netexec *x);

#endif
