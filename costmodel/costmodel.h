/* costmodel/: gradient-boosted trees (XGBoost through its C API) that predict how fast a config
 * runs from its features.  No XGBoost type leaves this module.  A model belongs to one thread at
 * a time. */
#ifndef TT_COSTMODEL_COSTMODEL_H
#define TT_COSTMODEL_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

typedef struct tt_costmodel tt_costmodel;

typedef enum {
    TT_COSTMODEL_REG,       /* squared error on normalised throughput (AutoTVM's "reg") */
    TT_COSTMODEL_RANK,      /* pairwise ranking (AutoTVM's "rank") */
    TT_COSTMODEL_PACK_SUM,  /* Ansor's: a program's score is the sum over its rows (stores),
                               trained with throughput-weighted squared error (search.md C8) */
    TT_COSTMODEL_PACK_RANK, /* the same program sums trained with a pairwise logistic loss on the
                               order of the labels (RankNet's), so only their order matters */
    TT_COSTMODEL_PROG_RANK, /* one row per program, its stores' rows side by side (below), trained
                               with XGBoost's pairwise ranking objective: trees see how the stores
                               of one program combine, which a sum over stores cannot */
} tt_costmodel_objective;

/* PROG_RANK's program row: TT_COSTMODEL_PROG_SLOTS slots of a store row each.  The first four
 * hold the program's stores, the last store in the fourth and the ones before it leftwards, so
 * the output store always shares a slot whatever stages precede it; slots without a store are
 * missing values, and stores beyond four (the earliest) are added into the first.  The fifth
 * repeats the main store's row (the largest TT_FEATURE_OUTER_PROD: the reduction's), which the
 * four place in a slot that depends on the stages around it (padding, cache write). */
#define TT_COSTMODEL_PROG_SLOTS 5

/* REG and RANK use AutoTVM's XGBoost parameters (search.md B4): max_depth 3, gamma 1e-4,
 * min_child_weight 1, eta 0.3, lambda 1, alpha 0.  PACK_SUM uses Ansor's (C8): max_depth 10,
 * gamma 1e-3, min_child_weight 0, eta 0.2, base_score 0.  PROG_RANK: max_depth 6, eta 0.1, the
 * rest XGBoost's defaults.  PACK_SUM, PACK_RANK and PROG_RANK split on histograms (tree_method
 * hist), REG and RANK exactly, as AutoTVM does.  `nthreads` 0 = XGBoost's default. */
tt_status tt_costmodel_create(tt_costmodel_objective obj, int nthreads, uint64_t seed,
                              tt_costmodel **out, tt_errbuf *err);
void tt_costmodel_free(tt_costmodel *m);

/* Trains from scratch on `nrows` rows of `ncols` features (row-major) with labels `y` for
 * `rounds` boosting rounds.  TT_ERR_RUNTIME with XGBoost's message on failure. */
tt_status tt_costmodel_train(tt_costmodel *m, const float *x, int nrows, int ncols, const float *y,
                             int rounds, tt_errbuf *err);
/* AutoTVM's training (search.md B4), with a validation split: boosts up to `max_rounds` rounds
 * and stops when the score checked every second round has not improved for `patience` rounds.
 * For REG with at least 5 x TT_COSTMODEL_MIN_VALIDATION rows, the score is the pairwise accuracy
 * of a fifth of the rows held out (weight 0, drawn by the model's seed), and the model is then
 * boosted again on every row for the rounds that scored best.  Otherwise (RANK, fewer rows, or
 * TT_STOP_TRAINING) it is AutoTVM's: the a-recall@top_n of the training set.  *rounds (may
 * be NULL) gets the rounds kept. */
tt_status tt_costmodel_train_recall(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const float *y, int max_rounds, int top_n, int patience,
                                    int *rounds, tt_errbuf *err);
/* a-recall@n of predictions against labels (higher labels are better): the mean over i < n of
 * #{j < i : true rank of the j-th predicted <= i} / (i + 1). */
double tt_costmodel_a_recall(const float *pred, const float *y, int nrows, int n);

/* Predicts `nrows` rows into out (higher = faster).  The model must have been trained. */
tt_status tt_costmodel_predict(tt_costmodel *m, const float *x, int nrows, int ncols, float *out,
                               tt_errbuf *err);
/* PACK_SUM, PACK_RANK and PROG_RANK training: rows belong to programs (row_prog[r] in
 * [0, nprog), non-decreasing), y holds one label per program (tt_costmodel_labels; 0 for
 * failures).  With at least 5 x TT_COSTMODEL_MIN_VALIDATION programs, a fifth of them (drawn by
 * the model's seed) is held out: boosting stops when their pairwise ranking accuracy has not
 * improved for TT_COSTMODEL_PATIENCE rounds (checked every second round, `max_rounds` at most),
 * and the model is then boosted again on every program for the rounds that scored best.  With
 * fewer programs the pack-sum objectives boost until the training RMSE stalls for 50 rounds and
 * PROG_RANK boosts TT_COSTMODEL_PROG_ROUNDS (or `max_rounds`, if fewer).  *rounds (may be NULL)
 * gets the rounds kept. */
#define TT_COSTMODEL_PROG_ROUNDS    100
#define TT_COSTMODEL_MIN_VALIDATION 16
#define TT_COSTMODEL_PATIENCE       50
tt_status tt_costmodel_train_packed(tt_costmodel *m, const float *x, int nrows, int ncols,
                                    const int *row_prog, const float *y, int nprog, int max_rounds,
                                    int *rounds, tt_errbuf *err);

/* When training stops: on held-out programs or rows (the default) or, as Ansor and AutoTVM do,
 * on the training set's own score, RMSE for pack-sum and a-recall for reg (kept for comparison
 * in bench_costmodel). */
typedef enum { TT_STOP_VALIDATION, TT_STOP_TRAINING } tt_costmodel_stopping;
void tt_costmodel_set_stopping(tt_costmodel *m, tt_costmodel_stopping how);

/* How measured throughputs become labels, per group (one group per workload); both give the
 * best program of a group 1 and failures (throughput <= 0) 0. */
typedef enum {
    /* Ansor's: throughput over the best of the group.  One lucky or unlucky measurement moves
     * every other label of its group. */
    TT_LABELS_RATIO,
    /* The program's rank among the group's working programs, (rank + 1) / count with the
     * slowest at 1 / count: unaffected by how far an outlier lies, only by where it sorts. */
    TT_LABELS_RANK,
} tt_costmodel_labels_kind;

/* Labels for n programs from their throughputs (higher = faster) and groups (>= 0).
 * TT_ERR_NOMEM only. */
tt_status tt_costmodel_labels(tt_costmodel_labels_kind kind, const double *throughput,
                              const int *group, int n, float *y, tt_errbuf *err);
/* Each program's score into out[nprog] (higher = faster): the sum of its rows' raw predictions,
 * or for PROG_RANK the prediction of its program row. */
tt_status tt_costmodel_predict_packed(tt_costmodel *m, const float *x, int nrows, int ncols,
                                      const int *row_prog, int nprog, float *out, tt_errbuf *err);

/* The trained model as bytes (XGBoost's JSON model), malloc'ed, for the database. */
tt_status tt_costmodel_save(tt_costmodel *m, void **blob, size_t *len, tt_errbuf *err);
/* A model from tt_costmodel_save's bytes; predictions equal the saved model's. */
tt_status tt_costmodel_load(tt_costmodel_objective obj, int nthreads, const void *blob, size_t len,
                            tt_costmodel **out, tt_errbuf *err);

/* The objective's name: "reg", "rank", "pack-sum", "pack-rank", "prog-rank". */
const char *tt_costmodel_objective_name(tt_costmodel_objective obj);

/* The XGBoost version this was built against ("1.7.4"). */
const char *tt_costmodel_backend_version(void);

#endif
