/* The thread pool that host kernels run their parallel loops on, in place of libgomp.
 *
 * A kernel's parallel loop is outlined into a function that every thread of a team runs, each
 * taking its share by its number (codegen/llvm_module.c).  libgomp's fork and join costs 3.2 us
 * a region on these machines, and a network calls a hundred kernels in a few milliseconds; this
 * pool's workers spin on one word between regions and answer in about half a microsecond
 * (docs/decisions.md 65, docs/models.md "Fork and join").
 *
 * The same ABI as libgomp's entry points (GOMP_parallel, omp_get_thread_num,
 * omp_get_num_threads), under names of our own so that a kernel never binds to libgomp by
 * accident.  The "1" is the ABI's version: a change of meaning takes a new name.  pool.c is
 * compiled into the processes that load kernel objects, and once more, as a position-independent
 * object, into every host shared object and archive that tvm-tune links (link.c): a library then
 * needs nothing but the C library.  Several such libraries in one process bind to the first
 * one's pool, as one process has one libgomp.
 *
 * Team size: TT_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may run on, read
 * at the first parallel call.  A region started inside a region, or while another thread's
 * region runs, runs on the calling thread alone (thread 0 of 1): correct, not parallel.  Idle
 * workers spin TT_POOL_SPIN_US (default 1000) after a region, then sleep on a futex. */
#ifndef TT_CODEGEN_POOL_H
#define TT_CODEGEN_POOL_H

/* Runs fn(data) on a team of `nthreads` threads (0 = the pool's size), the caller as thread 0,
 * and returns when all are done.  `flags` is ignored (libgomp's proc_bind). */
void tt_rt1_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
/* The calling thread's number in its team, 0 outside a region. */
int tt_rt1_thread_num(void);
/* The size of the calling thread's team, 1 outside a region. */
int tt_rt1_num_threads(void);

#endif
