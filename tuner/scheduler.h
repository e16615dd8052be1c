/* The task scheduler (search.md C9): several workloads share one trial budget; each round goes to
 * the task whose next round is expected to cut the weighted sum of latencies the most (Ansor's
 * gradient strategy), or to each in turn (round-robin). */
#ifndef TT_TUNER_SCHEDULER_H
#define TT_TUNER_SCHEDULER_H

#include <stdbool.h>

#include "../base/base.h"

typedef enum { TT_SCHED_GRADIENT, TT_SCHED_ROUND_ROBIN } tt_sched_policy;

typedef struct tt_sched_task {
    double weight; /* how often the workload occurs in the model */
    double flops;
    double best_s; /* best latency so far, 0 = none yet */
    int rounds;    /* rounds spent on it */
    double *hist;  /* best latency after each round (rounds entries; 0 = none yet) */
    int group;     /* similarity group (same operator, similar FLOPs), -1 = none */
    bool dead;     /* no valid program after its warm-up, or nothing left to try */
} tt_sched_task;

/* Ansor's defaults: alpha 0.2, beta 2, backward window 3. */
#define TT_SCHED_ALPHA 0.2
#define TT_SCHED_BETA  2.0

/* The gradient of the weighted latency sum with respect to one more round of task i (negative =
 * expected improvement); 0 for a dead task. */
double tt_sched_gradient(const tt_sched_task *tasks, int n, int i, double alpha, double beta);

/* The next task: the most negative gradient, ties broken at random; for round-robin the next live
 * task after `last`.  -1 when every task is dead. */
int tt_sched_pick(const tt_sched_task *tasks, int n, tt_sched_policy policy, int last, tt_rng *rng);

/* Similarity tag: the operator name and int(log_1.618(flops + 1)); equal tags share a group. */
int tt_sched_similarity_bucket(double flops);

/* After a round of task i: it leaves its group when it is much slower than the group's best and
 * has had far more rounds than the others (Ansor's rule). */
void tt_sched_update_groups(tt_sched_task *tasks, int n, int i, double beta);

#endif
