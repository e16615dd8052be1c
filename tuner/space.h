/* A tiling search space for any workload, in the manner of an AutoTVM template: knobs (tile sizes
 * of the main stage's spatial axes and of its last reduce axis, cache-write, parallel,
 * vectorize, auto-unroll) map to a step list, which is the config stored in the database.
 *
 * The main stage is the reduction with the most work (or the last op).  Elementwise intermediates
 * (padding, bias, batch-norm) are inlined; other stages get a parallel outer loop and a vector
 * inner loop.  Thread-safe for distinct spaces; a const space may be shared. */
#ifndef TT_TUNER_SPACE_H
#define TT_TUNER_SPACE_H

#include "../schedule/schedule.h"

#define TT_SPACE_MAX_KNOBS   20
#define TT_SPACE_MAX_CHOICES 64

typedef struct tt_knob {
    char name[48];
    int n; /* number of choices */
    int64_t choice[TT_SPACE_MAX_CHOICES];
    /* A split knob (GPU space): each choice packs `parts` inner tile lengths, 16 bits each,
     * outermost first (tt_space_split_lengths); 0 = a plain value. */
    int parts;
} tt_knob;

typedef struct tt_space {
    const tt_dag *dag;
    bool gpu;        /* the GPU template (tt_space_init_gpu) */
    int max_threads; /* GPU: threads per block a config may use */
    int max_vthread; /* GPU: largest vthread extent (the product over the axes) */
    bool no_shared;  /* GPU: inputs not staged through shared memory (Mali) */
    int main_stage;  /* stage id of the main op */
    int nspatial, nreduce;
    int nknobs;
    tt_knob knobs[TT_SPACE_MAX_KNOBS];
    int vector_lanes; /* CPU: lanes of the widest vector for the main stage's dtype (0: none) */
    bool micro;       /* CPU: register-blocked micro-kernels (the micro_kernel knob) */
    uint64_t size;    /* product of the knob sizes */
} tt_space;

/* Builds the space of `dag` for a CPU with `cores` cores whose vector unit is `isa` (NULL: no
 * register-blocked micro-kernels).
 *
 * With a reduction and an ISA, the space is register-blocked: the knob micro_kernel (a split knob
 * [rows, vectors]) picks the register tile of the accumulation, `rows` of the second-innermost
 * spatial axis by `vectors` vector registers of the innermost one, every choice fitting the ISA's
 * registers with room for the operands (rows x vectors accumulators + vectors for B + 1 for the
 * broadcast of A, which AVX-512 folds into the FMA: up to 6x2 on AVX2, 15x2 or 7x4 on AVX-512). The
 * tile knobs of those two axes then count register tiles per cache tile (1, 2, 4, 8, 16; shrunk to
 * the nearest that divides the axis).  The local accumulator is ordered [outer reductions][cache
 * tile / register tile][inner reduction][rows, unrolled] [columns, vectorised], so LLVM keeps the
 * accumulators in registers across the inner reduction and every multiply-add is one FMA with a
 * broadcast operand.  The knob inline_producers (0) computes padding and other elementwise
 * producers once at the root instead of inlining them (a guarded load per multiply-add); the knob
 * taps_inner (1, with two reduce axes or more) moves the reduce axis before the inner one (a
 * convolution's kernel column) inside the inner reduction, unrolled, so that a row's padded taps
 * are known when the kernel is built.  The knob row_kernel (1), offered for softmax, layer
 * normalisation and other reductions along a row, computes every stage at the row loop instead:
 * elementwise stages as vectors along the row, reductions as vector accumulators (space.c). */
tt_status tt_space_init(tt_space *s, const tt_dag *dag, int cores, const tt_vector_isa *isa,
                        tt_errbuf *err);
/* The GPU template, in the manner of TVM's direct CUDA/OpenCL templates (conv2d_nchw.cuda): each
 * spatial axis of the main stage split in four (block, vthread, thread, inner: knob tile_<axis>
 * with the three inner lengths), each reduce axis in two (tile_<axis>, the inner length), the
 * main stage accumulated in a per-thread local buffer, its inputs staged through shared memory
 * per outer reduction step and fetched cooperatively by all threads, auto_unroll_max_step
 * [0, 512, 1500] and unroll_explicit [0, 1].  Configs whose threads exceed `max_threads` or
 * whose vthread extent exceeds `max_vthread` are invalid (INSTANTIATION, as AutoTVM's).
 * Without `shared_memory` (Mali: tt_target_fast_local_memory) the inputs are read from global
 * memory as they are, and the space has its own signature. */
tt_status tt_space_init_gpu(tt_space *s, const tt_dag *dag, int64_t max_threads, int max_vthread,
                            bool shared_memory, tt_errbuf *err);
/* The inner lengths of choice `pos` of split knob `k`; returns their count. */
int tt_space_split_lengths(const tt_space *s, int k, int pos, int64_t *out);
/* One number per knob choice for the cost model's knob features: log2(1 + value), or for a split
 * knob the log2 lengths weighted by level. */
double tt_space_knob_feature(const tt_space *s, int k, int pos);
/* Decodes config index `index` (mixed radix, first knob least significant) into knob positions. */
void tt_space_decode(const tt_space *s, uint64_t index, int *pos);
/* The index of the config whose knobs take choices `pos` (the inverse of tt_space_decode). */
uint64_t tt_space_encode(const tt_space *s, const int *pos);
/* The schedule state of config `index`; TT_ERR_ILLEGAL_STEP for a combination the state rejects
 * (rare).  *out owned by the caller. */
tt_status tt_space_apply(const tt_space *s, uint64_t index, tt_state **out, tt_errbuf *err);
/* The template's default config, what a search measures first (builds without records take the
 * window or cache-blocked config below, deploy/compile.c): tiles of 8 (16 on the innermost axis, 8
 * on the reduction; with micro-kernels 1 register tile of rows and 2 of columns per cache tile),
 * a local accumulator, the outer loops parallel, the inner loop vectorised, auto-unroll 16, a
 * register tile of 6 rows x 2 vectors (8 x 2 with 32 vector registers), producers inlined.
 * Choices a workload does not offer fall back to the nearest smaller one.  `isa` may be NULL. */
uint64_t tt_space_default_index(const tt_space *s, const tt_vector_isa *isa);

/* A cache-blocked config, as BLAS libraries block a GEMM for the cache (what a search measures
 * next to the default): the register tile with the most rows by two vectors (with `taps_inner`,
 * where the space offers it, the window's column taps unrolled inside the tile, and rows few
 * enough that their B vectors fit the registers too); an inner reduction
 * whose slice of the column operand fills half of L1; the cache tile one register tile wide and
 * as many rows deep (the row axis first, then the outer spatial axes) as keep its accumulators in
 * half of L1 and its slice of the row operand in half of L2, so that each slice of the columns
 * (the weights of a convolution) is loaded once per cache tile and reused by all its rows; shrunk
 * until there are at least two cache tiles per core.  `inline_producers` picks that knob (padding
 * inlined or computed once).  Other knobs as tt_space_default_index, which is also what a space
 * without register tiles gets. */
uint64_t tt_space_blocked_index(const tt_space *s, const tt_vector_isa *isa,
                                const tt_cpu_caches *caches, int cores, bool inline_producers,
                                bool taps_inner);

/* A register-tiled config for a window operator (a depthwise convolution, a pooling): one whose
 * reductions hold at most TT_SPACE_WINDOW_TAPS taps in all, so that the accumulators of a register
 * tile stay in registers over the whole window.  The spatial loops go outside the reductions
 * (reduce_inner_first), the tile is one vector of columns by the most rows that divide the row
 * axis, are offered by micro_kernel and are at most `max_rows`, the cache tile is that register
 * tile, and the window is unrolled over it (auto_unroll_max_step 512), so the input vectors that
 * neighbouring rows and taps share are loaded once.  Other knobs as tt_space_default_index, which
 * is also what any other space gets. */
#define TT_SPACE_WINDOW_TAPS 64
uint64_t tt_space_window_index(const tt_space *s, const tt_vector_isa *isa, int64_t max_rows);

/* The config a build without records takes (tvm-compile's default schedule, and the tuner's
 * first seed besides the template's default): the window config for a window operator
 * (tt_space_window_index with 8 rows at most), else the cache-blocked config for `caches` and
 * `cores` (tt_space_blocked_index, producers inlined, the window's column taps inside the
 * register tile).  `tvm-tune lower --default` prints it. */
uint64_t tt_space_untuned_index(const tt_space *s, const tt_vector_isa *isa,
                                const tt_cpu_caches *caches, int cores);

/* The float32 lanes of the vectors of target `text` as this machine builds for it (the vector ISA
 * tvm-tune and tvm-compile take), or 0 for a target that is not a CPU's or does not parse. */
int tt_space_target_lanes(const char *text);

/* The untuned CPU schedule of `dag` for `target` (tvm-compile's default without records): the
 * template space as tvm-tune builds it here (the target's vector ISA, this machine's cores, its
 * caches or typical ones for a cross target) with its tt_space_untuned_index config, or the naive
 * schedule where the template does not apply.  `desc` (NULL: not wanted) gets the config's knobs,
 * or why it is naive. */
tt_status tt_space_untuned_schedule(const tt_dag *dag, const tt_target *target, tt_state **out,
                                    char *desc, size_t ndesc, tt_errbuf *err);

/* The config of `s` nearest to config `index` of `from` (another workload's space of the same
 * template): each knob takes the choice closest (in log scale) to the value of `from`'s knob of
 * the same name, or its first choice when `from` has none.  How a tuned config of one shape
 * becomes a starting point for another. */
uint64_t tt_space_nearest_index(const tt_space *s, const tt_space *from, uint64_t index);

/* The identity of a template space (its knobs and their choices), "tiling:<hex>" or "gpu:<hex>":
 * records keep it beside their config index, so that an index is decoded only under the space it
 * was made in. */
void tt_space_signature(const tt_space *s, char *out, size_t n);

/* "tile_i=8 tile_j=16 ..." for people. */
void tt_space_describe(const tt_space *s, uint64_t index, char *buf, size_t n);

#endif
