/* Ansor's search round (search.md C6): an initial population sampled from the sketches plus the
 * best measured programs, evolved for a few generations by mutation and roulette selection under
 * an XGBoost model trained on every measured program (costmodel.h PROG_RANK), then an
 * epsilon-greedy mix of the best predicted and random programs, none measured before.
 *
 * The model uses OpenMP threads; callers that fork afterwards run a round in a child process
 * (tune.c does). */
#ifndef TT_TUNER_EVOLUTION_H
#define TT_TUNER_EVOLUTION_H

#include "../codegen/codegen.h"
#include "../costmodel/costmodel.h"
#include "../costmodel/features.h"
#include "sketch.h"

typedef struct tt_evo_params {
    int population;        /* states per generation (Ansor: 2048) */
    int iterations;        /* generations (4) */
    double mutation_prob;  /* chance a child is a mutant rather than a copy (0.85) */
    double measured_ratio; /* share of the initial population taken from the best measured (0.2) */
    double eps_greedy;     /* share of random picks in a round's output (0.05) */
    int warmup;            /* measured programs before the model is trusted (Ansor: 100) */
    int max_rounds;        /* boosting rounds at most */
    /* The model: PROG_RANK (one row per program, pairwise ranking) on rank labels by default;
     * PACK_SUM is Ansor's objective and PACK_RANK its program sums with a pairwise loss
     * (bench_costmodel compares them; docs/search.md). */
    tt_costmodel_objective objective;
    tt_costmodel_labels_kind labels;
    /* GPU searches: the device's limits.  A program whose OpenCL kernel would exceed them (local
     * memory, work-group size, private arrays) scores -inf and is never offered, as Ansor's
     * feature extraction runs VerifyGPUCode; NULL on CPUs. */
    const tt_gpu_limits *gpu_limits;
    /* Where a round reports what it drew (NULL: not reported). */
    struct tt_evo_stats *stats;
} tt_evo_params;

/* What a search round drew: samples of the sketches, those kept in the initial population (on a
 * GPU only those within gpu_limits), and children bred over the generations and kept. */
typedef struct tt_evo_stats {
    int drawn, initial, children_tried, children_kept;
} tt_evo_stats;

void tt_evo_params_default(tt_evo_params *p);

/* Measured programs: their feature rows and throughput, and their configs (step JSON).  Group 0
 * is the workload being tuned; other groups are similar workloads whose records transfer to the
 * model (labels are normalised within each group; only group 0 seeds the population). */
typedef struct tt_evo_history {
    float *rows; /* TT_STORE_FEATURES each */
    int *row_prog;
    int nrows, caprows;
    double *throughput; /* per program; 0 for a failure */
    int *group;         /* per program */
    char **configs;     /* per program */
    uint64_t *program;  /* per program: tt_evo_program_hash of its lowered program, 0 unknown */
    int nprog, capprog;
} tt_evo_history;

/* Adds one measured program (rows may be NULL with nrows 0 for a program that failed to lower).
 * Takes a copy of everything. */
tt_status tt_evo_history_add(tt_evo_history *h, const char *config, const float *rows, int nrows,
                             double throughput, int group, uint64_t program);
void tt_evo_history_free(tt_evo_history *h);

/* Feature rows of a state (lowered here): a malloc'ed array in *rows, the count returned; -1 when
 * the state does not lower, or (with `gpu_limits`) when its OpenCL kernel exceeds them (without
 * `program`, judged by its buffers first where they already take more local memory).  With
 * `rows` NULL, only the count (no features computed).  With `program`, also its
 * tt_evo_program_hash. */
int tt_evo_features(const tt_state *st, const tt_gpu_limits *gpu_limits, float **rows,
                    uint64_t *program);

/* A hash of a lowered program's text (never 0).  Different steps often lower to one program (a
 * compute_at among loops of extent 1, a split whose factors leave the same nest): 3-6% of an
 * evolutionary search's trials measured such a twin again; a round offers none of them. */
uint64_t tt_evo_program_hash(const tt_program *prog);

/* One search round.  Writes up to `n` distinct configs (malloc'ed step JSON), best first, into
 * out and returns how many; `seen(ctx, config)` says whether a config was measured already.
 * `preload` (may be NULL) is a saved model of p->objective trained on (most of) this history: it is
 * loaded instead of training a new one.  model_blob and model_len (when not NULL) get the model
 * trained here (malloc'ed), or NULL when none was. */
int tt_evo_search_round(tt_sketch_space *sp, const tt_evo_params *p, const tt_evo_history *h,
                        const void *preload, size_t preload_len,
                        bool (*seen)(void *ctx, const char *config), void *ctx, tt_rng *rng,
                        char **out, int n, void **model_blob, size_t *model_len, tt_errbuf *err);

#endif
