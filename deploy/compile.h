/* deploy/: builds from the database.  tvm-compile asks the database for the best record of each
 * workload on a target and writes a library an application links:
 *
 *     OUT.a, OUT.so   the kernels (CPU: machine code for the target; OpenCL: the kernels' source
 *                     and a small host runtime that launches them through the ICD loader)
 *     OUT.h           one function per workload, int SYM(inputs..., outputs...), returning 0
 *     OUT.pc          pkg-config: what to link besides (libm, pthreads, libdl; a cross target's
 * libgomp)
 *
 * Every function is traceable: the header names the record it came from (id, config, time
 * (its fastest sample), device, date, and whether it was an exact match or a fallback).
 * docs/compile.md. */
#ifndef TT_DEPLOY_COMPILE_H
#define TT_DEPLOY_COMPILE_H

#include <stdbool.h>
#include <stdio.h>

#include "../base/base.h"

typedef struct tt_compile_kernel {
    const char *workload; /* as tvm-tune takes it */
    const char *symbol;   /* the C function's name */
} tt_compile_kernel;

typedef struct tt_compile_options {
    const char *db_path;
    const char *target;     /* default "llvm" */
    const char *device;     /* a device fingerprint (or a unique part of one); NULL: any */
    const char *out_prefix; /* OUTDIR/NAME; OUTDIR is created */
    const tt_compile_kernel *kernels;
    int nkernels;
    bool strict;      /* no tuned record for a kernel is an error, not a default schedule */
    bool no_fallback; /* records of other devices, of the target's family or of similar shapes do
                       * not count */
    FILE *log;        /* a line per kernel; NULL: quiet */
    FILE *warnings;   /* default schedules and fallbacks, one line each; NULL: none */
} tt_compile_options;

/* Where a kernel's schedule came from. */
typedef enum {
    TT_COMPILE_EXACT,        /* a record of this target (and device, when one was asked) */
    TT_COMPILE_OTHER_DEVICE, /* this target, measured on another device */
    TT_COMPILE_FAMILY,       /* another target of the same family */
    TT_COMPILE_SIMILAR,      /* no record: the tuned template config of the nearest other shape
                              * of the operator on this target, mapped to this shape */
    TT_COMPILE_DEFAULT,      /* no record: the documented default schedule */
} tt_compile_source;

const char *tt_compile_source_name(tt_compile_source s);
/* A record of the kernel's own workload (this target, another device, the target's family): its
 * time is the kernel's. */
bool tt_compile_source_tuned(tt_compile_source s);

typedef struct tt_compile_report {
    tt_compile_source source;
    long long record;  /* database record id, 0 for the default */
    double fastest_s;  /* the record's time (its fastest sample), 0 for the default (SIMILAR: on the
                          similar workload) */
    double median_s;   /* its median sample: what a network timed by its median should take */
    char similar[512]; /* SIMILAR: the workload whose record it is */
    char device[256];
    char target[256];
    bool parallel; /* has parallel loops (the thread pool, or a cross target's libgomp) */
} tt_compile_report;

/* Builds the library.  `reports` (may be NULL) gets one entry per kernel.  Errors say what was
 * wrong and for which workload: TT_ERR_BAD_WORKLOAD / TT_ERR_UNKNOWN_OP for a workload that does
 * not parse, TT_ERR_NOT_FOUND for no record under --strict or a --device the database does not
 * know, TT_ERR_PARSE for a stored config that does not replay on its workload (a corrupt
 * record), TT_ERR_UNSUPPORTED for a target kind that cannot be built, TT_ERR_IO for files and
 * the linker. */
tt_status tt_compile(const tt_compile_options *o, tt_compile_report *reports, tt_errbuf *err);

/* ---- networks: tvm-compile --model ----
 *
 * A network (graph/net.h) built into OUTDIR/NAME.{a,so,h,pc}: one kernel per task (its best
 * record, or the default schedule), the weights embedded in the library's read-only data,
 * packed at build time for the kernels that read them packed, and
 *
 *     int NAME_run(const float *input..., float *output...);
 *     int NAME_run_workspace(void *workspace, const float *input..., float *output...);
 *     const char *NAME_info(void);   // JSON: inputs, outputs, tasks, records, estimate
 *
 * NAME_run uses a static arena (one call at a time per process); NAME_run_workspace takes the
 * caller's NAME_WORKSPACE_BYTES, 64-byte aligned, for concurrent callers.  docs/models.md. */

struct tt_net;

typedef struct tt_compile_net_options {
    const char *db_path;    /* NULL: every task gets the default schedule */
    const char *target;     /* default "llvm"; CPU targets only */
    const char *device;     /* as tt_compile_options */
    const char *out_prefix; /* OUTDIR/NAME, NAME a C identifier (the functions' prefix) */
    const char *model;      /* the file the net came from, for the header */
    bool strict, no_fallback;
    FILE *log;      /* a line per task; NULL: quiet */
    FILE *warnings; /* default schedules and fallbacks; NULL: none */
} tt_compile_net_options;

/* Summary of a built network. */
typedef struct tt_compile_net_summary {
    int tasks, tuned;          /* tasks, and those with a record */
    double estimate_s;         /* sum over tasks of weight x record's median; 0 unless all tuned */
    double estimate_fastest_s; /* ... of weight x record's fastest sample */
    int64_t weight_bytes;      /* embedded, packed copies included */
    int64_t packed_bytes;      /* of those, packed for kernels */
    int64_t workspace_bytes;
} tt_compile_net_summary;

/* Builds the network's library.  `reports` (may be NULL) gets one entry per task.  Errors as
 * tt_compile, naming the task (label, workload, first node) at fault. */
tt_status tt_compile_net(const tt_compile_net_options *o, struct tt_net *net,
                         tt_compile_report *reports, tt_compile_net_summary *summary,
                         tt_errbuf *err);

#endif
