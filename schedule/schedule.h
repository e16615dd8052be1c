/* schedule/: the tensor IR.  Workloads and the operator library, the tensor-expression language,
 * compute DAGs, schedule states and transform steps, lowering to loop IR, the simplifier, the
 * interpreter and program verification.  Depends on base/ only. */
#ifndef TT_SCHEDULE_SCHEDULE_H
#define TT_SCHEDULE_SCHEDULE_H

#include "dag.h"
#include "expr.h"
#include "loop_ir.h"
#include "state.h"
#include "target.h"
#include "verify.h"
#include "workload.h"

#endif
