/* Private to deploy/: what the library builder (compile.c), the header writer (header.c) and the
 * OpenCL host generator (cl_host.c) share. */
#ifndef TT_DEPLOY_COMPILE_INT_H
#define TT_DEPLOY_COMPILE_INT_H

#include "../codegen/cl_artifact.h"
#include "../schedule/schedule.h"
#include "compile.h"

/* One function of the library. */
typedef struct tt__kernel {
    const char *symbol;
    tt_workload *w;
    tt_compile_report rep;
    char *config;     /* the schedule's step list (JSON) */
    double timestamp; /* when the record was measured, 0 for the default */
    int params[64];   /* ops of the parameters: inputs, then outputs */
    int nparams, ninputs;
    char *cl_text;      /* OpenCL: the artifact (source with its metadata) */
    tt_cl_artifact cl;  /* OpenCL: its metadata */
    tt_layout *layouts; /* per parameter when some input is passed packed (LR), else NULL */
} tt__kernel;

/* The default schedule of a workload without records: docs/compile.md. */
tt_status tt__compile_default_schedule(const tt_dag *dag, const tt_target *target, bool gpu,
                                       tt_state **out, tt_errbuf *err);

/* How kernels get their schedules: the database's best record for the target (and device), or
 * the default schedule with a warning. */
typedef struct tt__picker {
    struct tt_db *db; /* NULL: every kernel gets the default schedule, silently */
    const char *db_path;
    const char *target_text;
    tt_target target;
    const char *device; /* NULL: any */
    bool gpu, strict, no_fallback;
    FILE *warnings;
} tt__picker;

/* The schedule of workload w: its best record or the default (TT_ERR_NOT_FOUND under strict);
 * where it came from in *rep, the record's time in *timestamp. */
tt_status tt__compile_pick(const tt__picker *p, const tt_workload *w, tt_state **st,
                           tt_compile_report *rep, double *timestamp, tt_errbuf *err);

/* C name of a parameter (the op's name made an identifier). */
void tt__param_name(const tt_workload *w, int op, char *out, size_t n);
/* C type of a parameter's elements ("float", "int64_t", ...). */
const char *tt__c_type(tt_dtype t);

struct tt_strbuf;
/* "int SYM(const float *A, ..., float *C)", as the header declares it. */
void tt__signature(struct tt_strbuf *sb, const tt__kernel *k);
/* Writes sb to path and frees it; TT_ERR_IO / TT_ERR_NOMEM on failure. */
tt_status tt__write_text(const char *path, struct tt_strbuf *sb, tt_errbuf *err);
/* Writes OUT.h: the functions with their shapes and records.  TT_ERR_IO on failure. */
tt_status tt__write_header(const char *path, const char *guard, const tt__kernel *k, int n,
                           const char *target, tt_errbuf *err);
/* Writes OUT.pc for `name` installed under `dir`. */
tt_status tt__write_pc(const char *path, const char *name, const char *dir, bool gomp, bool cl,
                       tt_errbuf *err);
/* Writes the C source of the OpenCL host runtime and every kernel's launcher. */
tt_status tt__write_cl_host(const char *path, const tt__kernel *k, int n, tt_errbuf *err);

#endif
