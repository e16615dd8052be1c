/* Private to codegen/: the emitter shared by llvm_emit.c and llvm_module.c. */
#ifndef TT_CODEGEN_CODEGEN_INT_H
#define TT_CODEGEN_CODEGEN_INT_H

#include <llvm-c/Core.h>

#include "codegen.h"

typedef struct emitter {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;            /* function being emitted */
    LLVMValueRef entry_term;    /* terminator of its entry block: allocations go before it */
    TT_VEC(LLVMValueRef) frees; /* heap buffers of this function, freed before it returns */
    const tt_program *p;
    const char *entry_name;
    LLVMValueRef *vars; /* current value of each variable (NULL = not bound) */
    LLVMValueRef *bufs; /* element pointer of each live buffer */
    LLVMTypeRef i1, i8, i32, i64, f32, f64, i8p, voidt;
    int lanes; /* > 0 inside an explicitly vectorised loop */
    uint32_t vec_var;
    int auto_unroll; /* auto_unroll_max_step in effect */
    bool in_parallel;
    int num_threads; /* 0 = libgomp's default */
    int outlined;    /* counter for names */
    tt_codegen_options opt;
    tt_codegen_stats stats;
    tt_status status;
} emitter;

void tt__codegen_emit_body(emitter *e, tt_sid root);
void tt__codegen_emit_serial(emitter *e, const tt_stmt *loop, LLVMValueRef begin, LLVMValueRef end);
void tt__codegen_parallel(emitter *e, const tt_stmt *loop);
LLVMValueRef tt__codegen_alloc(emitter *e, uint32_t buf);

#endif
