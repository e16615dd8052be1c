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
 * workers spin TT_POOL_SPIN_US (default 1000) after a region, then sleep on a futex.
 *
 * Kernels' parallel loops use tt_rt1_parallel_for: each thread starts on its own contiguous
 * share (the static schedule, so a layer reads what the same core wrote in the layer before),
 * takes it in shrinking pieces, and then takes pieces from the back of the others' shares (all
 * but a share's last iteration, which stays its owner's).  On a shared machine one core is often
 * slower than the other for a while (a busy neighbour, the hypervisor); a static split then
 * waits for it, where here the faster thread finishes part of its share (docs/decisions.md 72). */
#ifndef TT_CODEGEN_POOL_H
#define TT_CODEGEN_POOL_H

/* Runs fn(data) on a team of `nthreads` threads (0 = the pool's size), the caller as thread 0,
 * and returns when all are done.  `flags` is ignored (libgomp's proc_bind). */
void tt_rt1_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
/* A parallel loop's shares of iterations (opaque), and the most iterations one may have (the
 * code generator runs a longer loop serially). */
#define TT_RT1_MAX_LOOP_EXTENT 0xffffffffLL
typedef struct tt_rt1_loop tt_rt1_loop;
/* Runs a parallel loop of `extent` iterations on a team of up to `nthreads` threads (0 = the
 * pool's size; never more than `extent`): fn(data, loop, num) on each thread that joins, the
 * caller as number 0, each taking ranges with tt_rt1_loop_next until it says there are none
 * left.  Returns when every iteration has run. */
void tt_rt1_parallel_for(void (*fn)(void *, tt_rt1_loop *, int), void *data, long long extent,
                         unsigned nthreads);
/* The next range [range[0], range[1]) for thread `num` of `loop`: from the front of its own
 * share, else from the back of another's.  0 when no iteration is left to take. */
int tt_rt1_loop_next(tt_rt1_loop *loop, int num, long long range[2]);
/* The calling thread's number in its team, 0 outside a region. */
int tt_rt1_thread_num(void);
/* The size of the calling thread's team, 1 outside a region. */
int tt_rt1_num_threads(void);

#endif
