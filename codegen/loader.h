/* Loading kernel libraries: the small part of codegen/ that devices link (no LLVM, no IR).
 * A kernel is `int32_t NAME(void *const *args)` (see codegen.h). */
#ifndef TT_CODEGEN_LOADER_H
#define TT_CODEGEN_LOADER_H

#include <stdint.h>

#include "../base/base.h"

typedef struct tt_kernel tt_kernel;
typedef int32_t (*tt_kernel_fn)(void *const *args);

/* A kernel whose intermediates live on the heap keeps them between calls and frees them in
 * `<entry>` TT_WS_RELEASE_SUFFIX, which tt_kernel_unload calls. */
#define TT_WS_RELEASE_SUFFIX ".ws.release"

/* dlopen()s a kernel library and finds `entry`.  TT_ERR_IO with dlerror()'s text on failure. */
tt_status tt_kernel_load(const char *so_path, const char *entry, tt_kernel **out, tt_errbuf *err);
tt_kernel_fn tt_kernel_function(const tt_kernel *k);
/* The thread pool a kernel's parallel loops run on (pool.h): the one its library carries, else
 * (an object, a serial kernel, a cross kernel on libgomp) this process's own, so that other work
 * can run on a team of threads as a parallel kernel's would. */
typedef struct tt_kernel_pool {
    void (*parallel)(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
    int (*thread_num)(void);
    int (*num_threads)(void);
} tt_kernel_pool;
tt_kernel_pool tt_kernel_pool_of(const tt_kernel *k);
/* Frees what the kernel kept (its heap intermediates) and unloads it. */
void tt_kernel_unload(tt_kernel *k);

#endif
