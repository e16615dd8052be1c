/* Workloads: an operator with its parameters, in a canonical text form that parses, validates and
 * prints back identically, and the compute DAG it defines.
 *
 *     matmul:M=512,N=512,K=512
 *     conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1
 *     conv2d_nhwc:N=1,H=56,W=56,CI=64,CO=64,K=3,S=1,P=1,G=4,dtype=float64
 *     te:C[i,j] += A[i,k] * B[k,j]; A:float32[512,512]; B:float32[512,512]
 *
 * Canonical form: parameters in the operator's declared order, optional ones only when they differ
 * from their default, `dtype=` last and only when not float32.  The `te:` form is the custom
 * tensor-expression language (docs/tensor-expressions.md), printed back normalised.
 * Thread-safe for distinct workloads; a const workload may be shared. */
#ifndef TT_SCHEDULE_WORKLOAD_H
#define TT_SCHEDULE_WORKLOAD_H

#include "dag.h"

#define TT_MAX_OP_PARAMS 12

typedef struct tt_op_param {
    const char *name;
    int64_t def; /* default when optional */
    bool optional;
    int64_t min; /* smallest legal value */
    const char *doc;
} tt_op_param;

typedef struct tt_op_def {
    const char *name;  /* "conv2d_nhwc" */
    const char *suite; /* class in the standard suite ("C2D", "GRP", ...) */
    const char *doc;   /* one line */
    tt_op_param params[TT_MAX_OP_PARAMS];
    int nparams;
    /* Writes the TE program of this operator for the given parameters into sb, or returns an
     * error saying which parameter combination is invalid. */
    tt_status (*te)(tt_strbuf *sb, const int64_t *p, const char *dtype, tt_errbuf *err);
} tt_op_def;

/* The operator library: count and i-th definition (registration order). */
int tt_op_library_count(void);
const tt_op_def *tt_op_library_get(int i);
const tt_op_def *tt_op_library_find(const char *name, size_t len);

typedef struct tt_workload {
    char *key;            /* canonical text */
    uint64_t hash;        /* tt_hash64 of key */
    const tt_op_def *def; /* NULL for te: workloads */
    int64_t params[TT_MAX_OP_PARAMS];
    tt_dtype dtype;
    tt_dag dag;
    double flops;
} tt_workload;

/* Parses workload text, validates it and builds its DAG.  On error returns TT_ERR_PARSE,
 * TT_ERR_UNKNOWN_OP or TT_ERR_BAD_WORKLOAD and says what and where (column) in err. */
tt_status tt_workload_parse(const char *text, tt_workload **out, tt_errbuf *err);
void tt_workload_free(tt_workload *w);

/* ---- the tensor-expression language (te.c) ---- */

/* Parses a TE program into `dag` (initialised by the caller) and writes its canonical text into
 * `canon` when not NULL.  Errors name the statement and column. */
tt_status tt_te_parse(const char *text, tt_dag *dag, tt_strbuf *canon, tt_errbuf *err);

#endif
