/* Private to deploy/: what the library builder (compile.c), the header writer (header.c) and the
 * OpenCL host generator (cl_host.c) share. */
#ifndef TT_DEPLOY_COMPILE_INT_H
#define TT_DEPLOY_COMPILE_INT_H

#include "../codegen/cl_artifact.h"
#include "../codegen/codegen.h"
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
    char *cl_text;     /* OpenCL: the artifact (source with its metadata) */
    tt_cl_artifact cl; /* OpenCL: its metadata */
    /* The packed form, when the record reads some input packed (LR): the layout of each
     * parameter (nparts 0: row-major), else NULL; and the tag its symbols carry ("" without). */
    tt_layout *layouts;
    char tag[12];
} tt__kernel;

/* The default schedule of a workload without records: docs/compile.md. */
tt_status tt__compile_default_schedule(const tt_dag *dag, const tt_target *target, bool gpu,
                                       tt_state **out, tt_errbuf *err);

/* `prog` as OpenCL C (kernels named from `entry`) and its artifact, under the limits of a build:
 * generous (1024 work-items, no local memory cap), since the device is not known yet, unless the
 * target names its work-items (-max_num_threads; a kernel beyond it is an error that says so); a
 * library checks its kernels against the device's own limits when it is initialised. */
tt_status tt__compile_opencl(const tt_target *target, const tt_program *prog, const char *entry,
                             char **text, tt_cl_artifact *art, tt_errbuf *err);

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

/* Fills p, parses the target ("" or NULL: llvm) and opens the database when db_path is given;
 * a --device the database has no records of is TT_ERR_NOT_FOUND.  `gpu` is set for opencl; the
 * caller checks the target kind.  tt__picker_close closes the database. */
tt_status tt__picker_open(tt__picker *p, const char *db_path, const char *target,
                          const char *device, bool strict, bool no_fallback, FILE *warnings,
                          tt_errbuf *err);
void tt__picker_close(tt__picker *p);

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
/* Appends s to sb, safe inside a C comment. */
void tt__comment_text(struct tt_strbuf *sb, const char *s);
/* "2026-11-24 10:00:00 UTC" for a time in seconds since the epoch ("unknown" for 0). */
void tt__utc(double t, char *out, size_t n);
/* Writes sb to path and frees it; TT_ERR_IO / TT_ERR_NOMEM on failure. */
tt_status tt__write_text(const char *path, struct tt_strbuf *sb, tt_errbuf *err);
/* NAME's include guard: "NAME_H" upper-cased, other characters '_'. */
void tt__header_guard(const char *name, char *out, size_t n);
/* Writes OUT.h: the functions with their shapes and records.  TT_ERR_IO on failure. */
tt_status tt__write_header(const char *path, const char *guard, const tt__kernel *k, int n,
                           const char *target, tt_errbuf *err);
/* Writes OUT.pc for `name` installed under `dir`: `gomp`, cross kernels that call the device's
 * libgomp; `pool`, host kernels that carry the thread pool (pthreads); `cl`, the OpenCL host
 * runtime. */
tt_status tt__write_pc(const char *path, const char *name, const char *dir, bool gomp, bool pool,
                       bool cl, tt_errbuf *err);
/* Appends s as a C string literal, one source line per literal line (OpenCL programs embedded
 * in libraries: cl_host.c, cl_net_source.c). */
void tt__c_literal(struct tt_strbuf *sb, const char *s);
/* Writes the C source of the OpenCL host runtime and every kernel's launcher. */
tt_status tt__write_cl_host(const char *path, const tt__kernel *k, int n, tt_errbuf *err);

/* Compiles C source `src` to object `obj` for `triple` ("" or NULL: this machine) with $CC, else
 * clang (--target for a triple), else cc; `what` names the source in errors. */
tt_status tt__compile_c(const char *src, const char *obj, const char *triple, const char *what,
                        tt_errbuf *err);
/* mkdir -p */
tt_status tt__make_dirs(const char *dir, tt_errbuf *err);

/* ---- networks (compile_net.c, netexec.c) ---- */

struct tt_net;
/* The constants a network's calls read, in one blob: each once row-major, or once per layout a
 * kernel reads it packed in (packed here, at build time), each 64-byte aligned.  What a built
 * library embeds and what netexec runs with, so the two cannot differ. */
typedef struct tt__net_weights {
    unsigned char *data; /* 64-byte aligned */
    int64_t bytes;
    int64_t packed_bytes; /* of the packed copies */
    int64_t **offset;     /* [call][arg]: byte offset of a constant argument, -1 otherwise */
    size_t ncalls;
    int64_t *copy_offset; /* [copy]: offset of a graph output that is a constant, -1 otherwise */
} tt__net_weights;

/* task_layouts[t][k]: the layout task t's kernel reads parameter k in (nparts 0: row-major), or
 * task_layouts[t] NULL when it reads everything row-major. */
tt_status tt__net_weights_build(const struct tt_net *net, tt_layout *const *task_layouts,
                                tt__net_weights *out, tt_errbuf *err);
void tt__net_weights_free(tt__net_weights *w);

/* What the network's generated sources say (net_source.c). */
typedef struct tt__net_build {
    const char *name, *model, *target;
    const struct tt_net *net;
    const tt__net_weights *weights;
    const tt_compile_report *reps; /* per task */
    const double *timestamps;      /* per task: when its record was measured, 0: default */
    char (*in_names)[64];          /* C identifiers of the graph's inputs */
    char (*out_names)[64];         /* ... and outputs */
    /* When every task is tuned (else 0): the sum of weight x each record's median sample, what
     * a network timed by its median should take, and of weight x its fastest sample. */
    double estimate_s, estimate_fastest_s;
    bool opencl; /* the network runs on an OpenCL device */
} tt__net_build;

/* The C identifiers of the graph's inputs and outputs (sanitized, unique), caller frees. */
tt_status tt__net_param_names(const struct tt_net *net, char (**in)[64], char (**out)[64],
                              tt_errbuf *err);
/* NAME.c: the weights (.incbin of params_path), the arena and the run functions. */
tt_status tt__write_net_glue(const char *path, const tt__net_build *b, const char *params_path,
                             tt_errbuf *err);
/* Pieces of NAME.c: the run functions' parameters ("const float *data, float *logits"), the
 * weights as read-only data (NAME__weights, an .incbin of params_path), NAME_info(). */
void tt__net_params(struct tt_strbuf *sb, const tt__net_build *b);
/* The typed entry points' parameters gathered into tvm__in[] and tvm__out[] (C statements). */
void tt__net_buffer_arrays(struct tt_strbuf *sb, const tt__net_build *b);
void tt__write_net_weights_asm(struct tt_strbuf *sb, const char *name, const char *params_path);
void tt__write_net_info(struct tt_strbuf *sb, const tt__net_build *b);
/* NAME.c of a network on OpenCL (cl_net_source.c): the runtime, the weights, the program of
 * every task's artifact (texts[t], its metadata arts[t]), the tables of buffers and calls, and
 * NAME_init/_run/_run_buffers/_profile/_error/_release/_info. */
tt_status tt__write_cl_net_glue(const char *path, const tt__net_build *b, const char *params_path,
                                const tt_cl_artifact *arts, char *const *texts, tt_errbuf *err);
/* NAME.h */
tt_status tt__write_net_header(const char *path, const char *guard, const tt__net_build *b,
                               tt_errbuf *err);

/* Task t of net lowered under the schedule pk picks for it: the program, the layouts it reads
 * (tt__program_layouts), where its schedule came from in *rep and when it was measured in
 * *timestamp.  The program points into the workload: free all three with tt__net_task_free. */
typedef struct tt__net_task_code {
    tt_workload *w;
    tt_state *st;
    tt_program *prog;
} tt__net_task_code;
tt_status tt__net_task_lower(const tt__picker *pk, const struct tt_net *net, int t,
                             tt__net_task_code *out, tt_layout **layouts, tt_compile_report *rep,
                             double *timestamp, tt_errbuf *err);
void tt__net_task_free(tt__net_task_code *c);

/* Prefixes err with the task that failed and the node its first call starts at; returns s. */
tt_status tt__net_task_error(const struct tt_net *net, int task, tt_status s, tt_errbuf *err);

/* The layouts prog's parameters are read in, or NULL in *out when all are row-major. */
tt_status tt__program_layouts(const tt_program *prog, tt_layout **out, tt_errbuf *err);

#endif
